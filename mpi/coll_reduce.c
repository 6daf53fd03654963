/* SPDX-License-Identifier: BSD-3-Clause */
/* Reductions and scans on AD_MPI_REAL: reduce, allreduce, reduce_scatter(_block),
 * scan and exscan, blocking and nonblocking. */
#include <math.h>

#include "coll_impl.h"

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

/* Reduce, Allreduce, Reduce_scatter(_block): counts NULL for the block
 * variant (block values per rank) and for the plain reductions (kind says
 * which). A nonblocking MIN, MAX or PROD gathers every rank's contributions
 * and reduces locally at completion (the blocking calls find the
 * partials with extra collectives first, which a nonblocking call cannot
 * wait for): p times the data, documented. */
static int reduce_any(const void *sendbuf, void *recvbuf, int count, const int *counts, MPI_Op op, int root,
                      MPI_Comm comm, int kind, ad_mpi_request *req, const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (!op_ok(op)) return ad__coll_bad_op(&x, fn);
  int p = x.c->size, me = x.c->rank;
  int scatter = kind == AD__M_RSB;
  int *dsp = NULL;
  if (counts) {
    for (int j = 0; j < p; j++)
      if (counts[j] < 0) return MPI_ERR_COUNT;
    if (!(dsp = malloc((size_t)p * sizeof *dsp))) return MPI_ERR_NO_MEM;
    for (int j = 0, s = 0; j < p; s += counts[j], j++) dsp[j] = s;
  }
  /* n: this rank's contributions; m: the values it receives */
  int n = scatter ? (counts ? total(counts, p) : count * p) : count;
  int m = scatter ? (counts ? counts[me] : count) : count;
  int gets = scatter || kind == AD__M_ALLREDUCE || me == root;
  const ad_real *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  pend *q = ad__coll_pend_new(&x, kind, fn);
  if (!q || !(q->sv = dbuf((size_t)n)) || !(q->rv = dbuf((size_t)m))) {
    ad__coll_pend_free(q);
    free(dsp);
    return MPI_ERR_NO_MEM;
  }
  q->a2 = dsp;
  q->recvbuf = recvbuf;
  q->n = m;
  q->gets = gets;
  q->op = op_code(op);
  q->nall = n;
  q->off = scatter ? (counts ? dsp[me] : me * count) : 0;
  ad__pack(src, n, q->sv);
  int local = req && op != MPI_SUM && n > 0;
  if (!local && (rc = ad__coll_weights(&x, op, q->sv, n, &q->w, &q->nanm)) != MPI_SUCCESS) {
    ad__coll_pend_free(q);
    return fwd_fail(&x, rc, fn);
  }
  if (local && !(q->all = dbuf((size_t)n * (size_t)p))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, kind, x.c, n, gets ? m : 0) : NULL;
  if (r) {
    r->root = root;
    r->op = q->op;
    r->w = q->w;
    q->w = NULL;
    r->count = m;
    if (counts && (!(r->cnt = icopy(counts, p)) || !(r->dsp = icopy(dsp, p))))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    ad__handles(x.t, src, n, r->in, fn);
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  if (local) {
    rc = MPI_Iallgather(q->sv, n, MPI_DOUBLE, q->all, n, MPI_DOUBLE, comm, &mq);
  } else if (kind == AD__M_ALLREDUCE) {
    rc = req ? MPI_Iallreduce(q->sv, q->rv, n, MPI_DOUBLE, op, comm, &mq)
             : MPI_Allreduce(q->sv, q->rv, n, MPI_DOUBLE, op, comm);
  } else if (kind == AD__M_REDUCE) {
    double *rv = gets ? q->rv : NULL;
    rc = req ? MPI_Ireduce(q->sv, rv, n, MPI_DOUBLE, op, root, comm, &mq)
             : MPI_Reduce(q->sv, rv, n, MPI_DOUBLE, op, root, comm);
  } else if (counts) {
    if (!(q->a1 = icopy(counts, p))) {
      ad__coll_pend_free(q);
      return MPI_ERR_NO_MEM;
    }
    rc = req ? MPI_Ireduce_scatter(q->sv, q->rv, q->a1, MPI_DOUBLE, op, comm, &mq)
             : MPI_Reduce_scatter(q->sv, q->rv, q->a1, MPI_DOUBLE, op, comm);
  } else {
    rc = req ? MPI_Ireduce_scatter_block(q->sv, q->rv, count, MPI_DOUBLE, op, comm, &mq)
             : MPI_Reduce_scatter_block(q->sv, q->rv, count, MPI_DOUBLE, op, comm);
  }
  if (counts) /* to each other rank its block */
    ad__mpi_counters.forward_bytes += (uint64_t)(n - m) * sizeof(double);
  else
    ad__mpi_counters.forward_bytes += ad__coll_payload(kind, 0, me, p, root, scatter ? count : n, NULL, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* The data a reduction reads: its send buffer, or its receive buffer in
 * place (the first `count` elements of either are enough to look at). */
static int reduce_guard(const char *fn, const void *sendbuf, const void *recvbuf, int count, MPI_Datatype type,
                        MPI_Comm comm) {
  int inplace = sendbuf == MPI_IN_PLACE;
  int rc = ad__mpi_guard(fn, inplace ? "buffer" : "send buffer", inplace ? recvbuf : sendbuf, count, type);
  return ad__mpi_guard_agree(fn, comm, rc);
}

/* MPI's own reduction on passive data: dt as for ad__dt_reduce (0 reduce,
 * 1 allreduce, 4 reduce_scatter_block, 5 reduce_scatter), nonblocking if
 * req. */
static int reduce_passive(int dt, const void *sendbuf, void *recvbuf, int count, const int *counts, MPI_Datatype type,
                          MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req) {
  switch (dt) {
  case 0:
    return AD__COLL_PASSIVE(req, MPI_Reduce, MPI_Ireduce, sendbuf, recvbuf, count, type, op, root, comm);
  case 1:
    return AD__COLL_PASSIVE(req, MPI_Allreduce, MPI_Iallreduce, sendbuf, recvbuf, count, type, op, comm);
  case 4:
    return AD__COLL_PASSIVE(req, MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, sendbuf, recvbuf, count, type, op,
                            comm);
  default:
    return AD__COLL_PASSIVE(req, MPI_Reduce_scatter, MPI_Ireduce_scatter, sendbuf, recvbuf, counts, type, op, comm);
  }
}

/* Every reduction wrapper, blocking (req NULL) or not: a derived type or a
 * user operation goes to types.c or reduce_ext.c, passive data to MPI, and
 * AD_MPI_REAL to reduce_any. dt as for reduce_passive. */
static int reduce_front(int dt, const void *sendbuf, void *recvbuf, int count, const int *counts, MPI_Datatype type,
                        MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(1, type) || (is_real(type) && ad__handoff.op_user(op)))
    return ad__handoff.dt_reduce(dt, sendbuf, recvbuf, count, counts, type, op, root, comm, req);
  int e_ = ad__types_refuse(fn, 1, type);
  if (e_ == MPI_SUCCESS && !is_real(type)) {
    int n = dt == 5 ? (counts ? total(counts, comm_size(comm)) : 0) : count;
    e_ = reduce_guard(fn, sendbuf, recvbuf, n, type, comm);
  }
  if (e_ != MPI_SUCCESS) return e_;
  if (!is_real(type)) return reduce_passive(dt, sendbuf, recvbuf, count, counts, type, op, root, comm, req);
  int kind = dt == 0 ? AD__M_REDUCE : dt == 1 ? AD__M_ALLREDUCE : AD__M_RSB;
  return reduce_any(sendbuf, recvbuf, count, counts, op, root, comm, kind, req, fn);
}

AD__COLL_FORMS(reduce, reduce_front,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm),
               (0, sendbuf, recvbuf, count, NULL, type, op, root, comm))
AD__COLL_FORMS(allreduce, reduce_front,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm),
               (1, sendbuf, recvbuf, count, NULL, type, op, 0, comm))
AD__COLL_FORMS(reduce_scatter_block, reduce_front,
               (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm),
               (4, sendbuf, recvbuf, recvcount, NULL, type, op, 0, comm))
AD__COLL_FORMS(reduce_scatter, reduce_front,
               (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                MPI_Comm comm),
               (5, sendbuf, recvbuf, 0, recvcounts, type, op, 0, comm))

static int scan_any(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int ex,
                    ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(1, type) || (is_real(type) && ad__handoff.op_user(op)))
    return ad__handoff.dt_reduce(ex ? 3 : 2, sendbuf, recvbuf, count, NULL, type, op, 0, comm, req);
  int e_ = ad__types_refuse(fn, 1, type);
  if (e_ == MPI_SUCCESS && !is_real(type)) e_ = reduce_guard(fn, sendbuf, recvbuf, count, type, comm);
  if (e_ != MPI_SUCCESS) return e_;
  if (!is_real(type))
    return ex ? AD__COLL_PASSIVE(req, MPI_Exscan, MPI_Iexscan, sendbuf, recvbuf, count, type, op, comm)
              : AD__COLL_PASSIVE(req, MPI_Scan, MPI_Iscan, sendbuf, recvbuf, count, type, op, comm);
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (op != MPI_SUM) {
    if (x.seen) ad__fail(x.seen, AD_ERR_MPI, "%s: only MPI_SUM is differentiable here", fn);
    return MPI_ERR_OP;
  }
  const ad_real *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  int gets = !(ex && x.c->rank == 0); /* Exscan leaves rank 0's buffer undefined: we leave it alone */
  pend *q = ad__coll_pend_new(&x, ex ? AD__M_EXSCAN : AD__M_SCAN, fn);
  if (!q || !(q->sv = dbuf((size_t)count)) || !(q->rv = dbuf((size_t)count))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  q->n = count;
  q->gets = gets;
  ad__pack(src, count, q->sv);
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ex ? AD__M_EXSCAN : AD__M_SCAN, x.c, count, gets ? count : 0) : NULL;
  if (r) ad__handles(x.t, src, count, r->in, fn);
  MPI_Request mq = MPI_REQUEST_NULL;
  if (req)
    rc = ex ? MPI_Iexscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm, &mq)
            : MPI_Iscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm, &mq);
  else
    rc = ex ? MPI_Exscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm)
            : MPI_Scan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm);
  ad__mpi_counters.forward_bytes += ad__coll_payload(AD__M_SCAN, 0, x.c->rank, x.c->size, 0, count, NULL, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

AD__COLL_FORMS(scan, scan_any,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm),
               (sendbuf, recvbuf, count, type, op, comm, 0))
AD__COLL_FORMS(exscan, scan_any,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm),
               (sendbuf, recvbuf, count, type, op, comm, 1))
