/* SPDX-License-Identifier: BSD-3-Clause */
/* Collective wrappers and their adjoint and tangent actions (DESIGN.md):
 * Bcast <-> Reduce-sum to the root; Reduce/Allreduce <-> Bcast/Allreduce of
 * the result adjoints, weighted by the local partials (PROD: product of the
 * other contributions; MIN/MAX: 1 at the owner of the extremum, lowest rank
 * on ties); Gather(v) <-> Scatter(v); Allgather(v) <-> Reduce-scatter-sum;
 * Alltoall(v) <-> Alltoall(v) with the layouts swapped; Scan/Exscan SUM <->
 * suffix sums. Sweep collectives are nonblocking collectives on the private
 * duplicate, waited for with the sweep timeout.
 *
 * In-place variants: a buffer that MPI overwrites gets fresh handles for
 * everything it receives (its own slot too), and the old handles are the
 * contributions; the root's own slot of an in-place scatter and a broadcast
 * root's buffer keep their handles, so their own adjoint needs no traffic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

static int is_real(MPI_Datatype t) { return t == AD_MPI_REAL; }
static double *dbuf(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

typedef struct coll {
  ad__comm *c;
  ad_tape *t, *seen;
} coll;

static int coll_begin(coll *x, MPI_Comm comm) {
  int err;
  x->c = ad__mpi_comm(comm, &err);
  if (!x->c) return err;
  x->t = ad__mpi_tape(&x->seen);
  ad__mpi_note_coll(x->seen, x->c);
  return MPI_SUCCESS;
}

static int op_ok(MPI_Op op) { return op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX; }

static int op_code(MPI_Op op) { return op == MPI_SUM ? 0 : op == MPI_PROD ? 1 : op == MPI_MIN ? 2 : 3; }

static int bad_op(coll *x, const char *fn) {
  if (x->seen)
    ad__fail(x->seen, AD_ERR_MPI, "%s: only MPI_SUM, MPI_PROD, MPI_MIN and MPI_MAX are differentiable here", fn);
  else
    ad__fail_notape(AD_ERR_MPI, "%s: unsupported reduction operation on AD_MPI_REAL", fn);
  return MPI_ERR_OP;
}

/* Local partials of an element-wise reduction of n values per rank, or NULL
 * (all ones, for SUM). PROD: the product of the other ranks' values, formed
 * by multiplication only, so zeros are fine. MIN/MAX: the result has exactly
 * one owner, which gets the whole adjoint: the lowest rank with a NaN if any
 * contribution is NaN (the result is then NaN: *nanm, if not NULL, marks
 * those elements, for the caller to make the result NaN whatever MPI's own
 * MIN/MAX did with it), else the rank MINLOC/MAXLOC name (ties go to the
 * lowest rank). */
static int weights(const coll *x, MPI_Op op, const double *v, int n, double **w, unsigned char **nanm) {
  *w = NULL;
  *nanm = NULL;
  if (op == MPI_SUM || n == 0) return MPI_SUCCESS;
  double *ww = dbuf((size_t)n);
  if (!ww) return MPI_ERR_NO_MEM;
  int rc;
  if (op == MPI_PROD) {
    double *all = dbuf((size_t)n * (size_t)x->c->size);
    if (!all) {
      free(ww);
      return MPI_ERR_NO_MEM;
    }
    rc = MPI_Allgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, x->c->user);
    for (int i = 0; i < n; i++) {
      double p = 1.0;
      for (int j = 0; j < x->c->size; j++)
        if (j != x->c->rank) p *= all[(size_t)j * (size_t)n + (size_t)i];
      ww[i] = p;
    }
    free(all);
  } else {
    struct {
      double v;
      int r;
    } *pr = malloc((size_t)n * sizeof *pr);
    if (!pr) {
      free(ww);
      return MPI_ERR_NO_MEM;
    }
    int *key = malloc((size_t)n * 2 * sizeof *key);
    if (!key) {
      free(pr);
      free(ww);
      return MPI_ERR_NO_MEM;
    }
    /* (0, rank) for a NaN, (1, rank) otherwise: MINLOC finds the lowest
     * rank with a NaN, if there is one. */
    for (int i = 0; i < n; i++) {
      key[2 * i] = isnan(v[i]) ? 0 : 1;
      key[2 * i + 1] = x->c->rank;
      pr[i].v = v[i];
      pr[i].r = x->c->rank;
    }
    rc = MPI_Allreduce(MPI_IN_PLACE, key, n, MPI_2INT, MPI_MINLOC, x->c->user);
    if (rc == MPI_SUCCESS)
      rc = MPI_Allreduce(MPI_IN_PLACE, pr, n, MPI_DOUBLE_INT, op == MPI_MIN ? MPI_MINLOC : MPI_MAXLOC, x->c->user);
    int any_nan = 0;
    for (int i = 0; i < n; i++) {
      int owner = key[2 * i] == 0 ? key[2 * i + 1] : pr[i].r;
      any_nan |= key[2 * i] == 0;
      ww[i] = owner == x->c->rank ? 1.0 : 0.0;
    }
    if (rc == MPI_SUCCESS && any_nan && (*nanm = malloc((size_t)n)) != NULL)
      for (int i = 0; i < n; i++) (*nanm)[i] = key[2 * i] == 0;
    free(key);
    free(pr);
  }
  if (rc != MPI_SUCCESS) {
    free(ww);
    return rc;
  }
  *w = ww;
  return MPI_SUCCESS;
}

static int *icopy(const int *a, int n) {
  int *b = malloc((size_t)(n ? n : 1) * sizeof *b);
  if (b) memcpy(b, a, (size_t)n * sizeof *b);
  return b;
}

static int extent(const int *cnt, const int *dsp, int n) {
  int e = 0;
  for (int j = 0; j < n; j++)
    if (cnt[j] && dsp[j] + cnt[j] > e) e = dsp[j] + cnt[j];
  return e;
}

static int total(const int *cnt, int n) {
  int s = 0;
  for (int j = 0; j < n; j++) s += cnt[j];
  return s;
}

/* Gather the handles of the slots (cnt, dsp) of buffer b in rank order. */
static int slot_handles(ad_tape *t, const ad_real *b, const int *cnt, const int *dsp, int n, ad_index *h,
                        const char *fn) {
  int p = 0;
  for (int j = 0; j < n; j++) {
    if (ad__handles(t, b + dsp[j], cnt[j], h + p, fn) != AD_OK) return AD_ERR_STALE_HANDLE;
    p += cnt[j];
  }
  return AD_OK;
}

static void slot_unpack(ad_tape *t, ad_real *b, const int *cnt, const int *dsp, int n, const double *v, ad_index *h) {
  int p = 0;
  for (int j = 0; j < n; j++) {
    ad__unpack(t, b + dsp[j], cnt[j], v + dsp[j], h ? h + p : NULL);
    p += cnt[j];
  }
}

/* Between a buffer laid out by (cnt, dsp) and a packed rank-order one. */
static void to_layout(const double *packed, const int *cnt, const int *dsp, int n, double *laid) {
  int p = 0;
  for (int j = 0; j < n; j++) {
    memcpy(laid + dsp[j], packed + p, (size_t)cnt[j] * sizeof(double));
    p += cnt[j];
  }
}
static void to_packed(const double *laid, const int *cnt, const int *dsp, int n, double *packed) {
  int p = 0;
  for (int j = 0; j < n; j++) {
    memcpy(packed + p, laid + dsp[j], (size_t)cnt[j] * sizeof(double));
    p += cnt[j];
  }
}

/* Payload statistics. Counted as the values a rank would send to other
 * ranks if every collective were made of direct messages: a collective and
 * its adjoint (a broadcast and a reduction, a gather and a scatter, ...)
 * then move the same total, as the point-to-point ones do, whatever
 * algorithm MPI uses underneath. */
static int64_t others(const int *cnt, int p, int skip) {
  int64_t s = 0;
  for (int j = 0; j < p; j++)
    if (j != skip) s += cnt[j];
  return s;
}

static uint64_t payload(int kind, int adjoint, int me, int p, int root, int64_t nown, const int *cnt, const int *cnt2) {
  int64_t v = 0;
  switch (kind) {
  case AD__M_BCAST:
    v = adjoint ? (me == root ? 0 : nown) : (me == root ? (int64_t)(p - 1) * nown : 0);
    break;
  case AD__M_REDUCE:
    v = adjoint ? (me == root ? (int64_t)(p - 1) * nown : 0) : (me == root ? 0 : nown);
    break;
  case AD__M_ALLREDUCE:
  case AD__M_RSB:
    v = (int64_t)(p - 1) * nown;
    break;
  case AD__M_SCAN:
  case AD__M_EXSCAN:
    v = adjoint ? (int64_t)me * nown : (int64_t)(p - 1 - me) * nown;
    break;
  case AD__M_GATHERV:
    v = adjoint ? (me == root ? others(cnt, p, root) : 0) : (me == root ? 0 : nown);
    break;
  case AD__M_SCATTERV:
    v = adjoint ? (me == root ? 0 : nown) : (me == root ? others(cnt, p, root) : 0);
    break;
  case AD__M_ALLGATHERV:
    v = adjoint ? others(cnt, p, me) : (int64_t)(p - 1) * nown;
    break;
  case AD__M_ALLTOALLV:
    v = others(adjoint ? cnt2 : cnt, p, me);
    break;
  default:
    break;
  }
  return (uint64_t)v * sizeof(double);
}

/* The same for a record in a sweep (tangents move like the forward call). */
static uint64_t record_payload(const ad__mrec *r, int adjoint) {
  int me = r->c->rank, p = r->c->size;
  int64_t nown = r->nin;
  if (r->kind == AD__M_BCAST) nown = me == r->root ? r->nin : r->nout;
  if (r->kind == AD__M_RSB || r->kind == AD__M_SCATTERV) nown = r->count;
  return payload(r->kind, adjoint, me, p, r->root, nown, r->cnt, r->cnt2);
}

static int fwd_fail(coll *x, int rc, const char *fn) { return ad__mpi_forward_error(x->seen, rc, fn); }

/* ------------------------------------------------------------------------ */
/* Barrier, Bcast                                                            */
/* ------------------------------------------------------------------------ */

int ad_mpi_barrier(MPI_Comm comm) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (x.t) ad__mrec_push(x.t, AD__M_BARRIER, x.c, 0, 0);
  rc = MPI_Barrier(comm);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, "ad_mpi_barrier");
}

int ad_mpi_bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_bcast(buffer, count, type, root, comm);
  if (!is_real(type)) return MPI_Bcast(buffer, count, type, root, comm);
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int me = x.c->rank == root;
  double *v = dbuf((size_t)count);
  if (!v) return MPI_ERR_NO_MEM;
  ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_BCAST, x.c, me ? count : 0, 0) : NULL;
  if (r) r->root = root;
  if (me) {
    ad__pack(buffer, count, v);
    if (r) ad__handles(x.t, buffer, count, r->in, "ad_mpi_bcast");
  }
  rc = MPI_Bcast(v, count, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_BCAST, 0, x.c->rank, x.c->size, root, count, NULL, NULL);
  if (rc == MPI_SUCCESS && !me) {
    if (r && !(r->out = calloc((size_t)(count ? count : 1), sizeof *r->out)))
      ad__fail(x.t, AD_ERR_NOMEM, "ad_mpi_bcast: no memory");
    if (r && r->out) r->nout = count;
    ad__unpack(r && r->out ? x.t : NULL, buffer, count, v, r && r->out ? r->out : NULL);
  }
  free(v);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, "ad_mpi_bcast");
}

/* ------------------------------------------------------------------------ */
/* Reductions                                                                */
/* ------------------------------------------------------------------------ */

static int reduce_any(const void *sendbuf, void *recvbuf, int count, MPI_Op op, int root, MPI_Comm comm, int all,
                      const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (!op_ok(op)) return bad_op(&x, fn);
  int gets = all || x.c->rank == root;
  int inplace = sendbuf == MPI_IN_PLACE;
  const ad_real *src = inplace ? recvbuf : sendbuf;
  double *v = dbuf((size_t)count), *res = dbuf((size_t)count), *w = NULL;
  if (!v || !res) {
    free(v);
    free(res);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(src, count, v);
  unsigned char *nanm = NULL;
  if ((rc = weights(&x, op, v, count, &w, &nanm)) != MPI_SUCCESS) {
    free(v);
    free(res);
    return fwd_fail(&x, rc, fn);
  }
  ad__mrec *r = x.t ? ad__mrec_push(x.t, all ? AD__M_ALLREDUCE : AD__M_REDUCE, x.c, count, gets ? count : 0) : NULL;
  if (r) {
    r->root = root;
    r->op = op_code(op);
    r->w = w;
    w = NULL;
    ad__handles(x.t, src, count, r->in, fn);
  }
  if (all)
    rc = MPI_Allreduce(v, res, count, MPI_DOUBLE, op, comm);
  else
    rc = MPI_Reduce(v, gets ? res : NULL, count, MPI_DOUBLE, op, root, comm);
  ad__mpi_counters.forward_bytes +=
      payload(all ? AD__M_ALLREDUCE : AD__M_REDUCE, 0, x.c->rank, x.c->size, root, count, NULL, NULL);
  if (rc == MPI_SUCCESS && gets && nanm)
    for (int i = 0; i < count; i++)
      if (nanm[i]) res[i] = NAN;
  if (rc == MPI_SUCCESS && gets) ad__unpack(r ? x.t : NULL, recvbuf, count, res, r ? r->out : NULL);
  free(v);
  free(res);
  free(w);
  free(nanm);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_reduce(0, sendbuf, recvbuf, count, type, op, root, comm);
  if (is_real(type) && ad__op_user(op)) return ad__user_reduce(0, sendbuf, recvbuf, count, type, op, root, comm);
  if (!is_real(type)) return MPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  return reduce_any(sendbuf, recvbuf, count, op, root, comm, 0, "ad_mpi_reduce");
}

int ad_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_reduce(1, sendbuf, recvbuf, count, type, op, 0, comm);
  if (is_real(type) && ad__op_user(op)) return ad__user_reduce(1, sendbuf, recvbuf, count, type, op, 0, comm);
  if (!is_real(type)) return MPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  return reduce_any(sendbuf, recvbuf, count, op, 0, comm, 1, "ad_mpi_allreduce");
}

int ad_mpi_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  if (is_real(type) && ad__op_user(op)) return ad__user_reduce(4, sendbuf, recvbuf, recvcount, type, op, 0, comm);
  if (!is_real(type)) return MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  if (recvcount < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (!op_ok(op)) return bad_op(&x, "ad_mpi_reduce_scatter_block");
  int n = recvcount * x.c->size;
  const ad_real *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  double *v = dbuf((size_t)n), *res = dbuf((size_t)recvcount), *w = NULL;
  if (!v || !res) {
    free(v);
    free(res);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(src, n, v);
  unsigned char *nanm = NULL;
  if ((rc = weights(&x, op, v, n, &w, &nanm)) == MPI_SUCCESS) {
    ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_RSB, x.c, n, recvcount) : NULL;
    if (r) {
      r->op = op_code(op);
      r->w = w;
      w = NULL;
      r->count = recvcount;
      ad__handles(x.t, src, n, r->in, "ad_mpi_reduce_scatter_block");
    }
    rc = MPI_Reduce_scatter_block(v, res, recvcount, MPI_DOUBLE, op, comm);
    ad__mpi_counters.forward_bytes += payload(AD__M_RSB, 0, x.c->rank, x.c->size, 0, recvcount, NULL, NULL);
    if (rc == MPI_SUCCESS && nanm)
      for (int j = 0; j < recvcount; j++)
        if (nanm[(size_t)x.c->rank * (size_t)recvcount + (size_t)j]) res[j] = NAN;
    if (rc == MPI_SUCCESS) ad__unpack(r ? x.t : NULL, recvbuf, recvcount, res, r ? r->out : NULL);
  }
  free(v);
  free(res);
  free(w);
  free(nanm);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, "ad_mpi_reduce_scatter_block");
}

static int scan_any(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    int ex) {
  const char *fn = ex ? "ad_mpi_exscan" : "ad_mpi_scan";
  if (!is_real(type))
    return ex ? MPI_Exscan(sendbuf, recvbuf, count, type, op, comm) : MPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (op != MPI_SUM) {
    if (x.seen) ad__fail(x.seen, AD_ERR_MPI, "%s: only MPI_SUM is differentiable here", fn);
    return MPI_ERR_OP;
  }
  const ad_real *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  int gets = !(ex && x.c->rank == 0); /* Exscan leaves rank 0's buffer undefined: we leave it alone */
  double *v = dbuf((size_t)count), *res = dbuf((size_t)count);
  if (!v || !res) {
    free(v);
    free(res);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(src, count, v);
  ad__mrec *r = x.t ? ad__mrec_push(x.t, ex ? AD__M_EXSCAN : AD__M_SCAN, x.c, count, gets ? count : 0) : NULL;
  if (r) ad__handles(x.t, src, count, r->in, fn);
  rc = ex ? MPI_Exscan(v, res, count, MPI_DOUBLE, MPI_SUM, comm) : MPI_Scan(v, res, count, MPI_DOUBLE, MPI_SUM, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_SCAN, 0, x.c->rank, x.c->size, 0, count, NULL, NULL);
  if (rc == MPI_SUCCESS && gets) ad__unpack(r ? x.t : NULL, recvbuf, count, res, r ? r->out : NULL);
  free(v);
  free(res);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_reduce(2, sendbuf, recvbuf, count, type, op, 0, comm);
  if (is_real(type) && ad__op_user(op)) return ad__user_reduce(2, sendbuf, recvbuf, count, type, op, 0, comm);
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 0);
}
int ad_mpi_exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_reduce(3, sendbuf, recvbuf, count, type, op, 0, comm);
  if (is_real(type) && ad__op_user(op)) return ad__user_reduce(3, sendbuf, recvbuf, count, type, op, 0, comm);
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 1);
}

/* ------------------------------------------------------------------------ */
/* Gather, scatter, allgather, alltoall                                      */
/* ------------------------------------------------------------------------ */

static int both_real(coll *x, MPI_Datatype a, MPI_Datatype b, int a_used, int b_used, const char *fn) {
  if ((!a_used || is_real(a)) && (!b_used || is_real(b))) return 1;
  if (x->seen) ad__fail(x->seen, AD_ERR_MPI, "%s: AD_MPI_REAL on one side needs AD_MPI_REAL on the other", fn);
  return 0;
}

static int gatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                       int root, MPI_Comm comm, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[root] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[root] : sendbuf;
  int ext = me ? extent(recvcounts, displs, p) : 0, tot = me ? total(recvcounts, p) : 0;
  double *sv = dbuf((size_t)nin), *rv = dbuf((size_t)ext);
  if (!sv || !rv) {
    free(sv);
    free(rv);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(src, nin, sv);
  if (inplace) memcpy(rv + displs[root], sv, (size_t)nin * sizeof(double));
  ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_GATHERV, x.c, nin, tot) : NULL;
  if (r) {
    r->root = root;
    r->inplace = inplace;
    ad__handles(x.t, src, nin, r->in, fn);
    if (me && (!(r->cnt = icopy(recvcounts, p)) || !(r->dsp = icopy(displs, p))))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
  }
  rc = MPI_Gatherv(inplace ? MPI_IN_PLACE : sv, sendcount, MPI_DOUBLE, rv, recvcounts, displs, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_GATHERV, 0, x.c->rank, p, root, nin, recvcounts, NULL);
  if (rc == MPI_SUCCESS && me) slot_unpack(r ? x.t : NULL, recvbuf, recvcounts, displs, p, rv, r ? r->out : NULL);
  free(sv);
  free(rv);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_gatherv(1, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype, root, comm);
  int rank;
  MPI_Comm_rank(comm, &rank);
  int use_send = !(rank == root && sendbuf == MPI_IN_PLACE);
  if (!(use_send ? is_real(sendtype) : is_real(recvtype)) && (rank != root || !is_real(recvtype)))
    return MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, rank == root, "ad_mpi_gatherv")) return MPI_ERR_TYPE;
  return gatherv_any(sendbuf, sendcount, recvbuf, recvcounts, displs, root, comm, "ad_mpi_gatherv");
}

int ad_mpi_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_gatherv(0, sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, root, comm);
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int use_send = !(rank == root && sendbuf == MPI_IN_PLACE);
  if (!(use_send ? is_real(sendtype) : is_real(recvtype)) && (rank != root || !is_real(recvtype)))
    return MPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, rank == root, "ad_mpi_gather")) return MPI_ERR_TYPE;
  int *cnt = malloc((size_t)size * sizeof *cnt), *dsp = malloc((size_t)size * sizeof *dsp);
  if (!cnt || !dsp) {
    free(cnt);
    free(dsp);
    return MPI_ERR_NO_MEM;
  }
  for (int j = 0; j < size; j++) {
    cnt[j] = recvcount;
    dsp[j] = j * recvcount;
  }
  int rc = gatherv_any(sendbuf, sendcount, recvbuf, cnt, dsp, root, comm, "ad_mpi_gather");
  free(cnt);
  free(dsp);
  return rc;
}

static int scatterv_any(const void *sendbuf, const int *sendcounts, const int *displs, void *recvbuf, int recvcount,
                        int root, MPI_Comm comm, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && recvbuf == MPI_IN_PLACE;
  int ext = me ? extent(sendcounts, displs, p) : 0;
  int nin = 0;
  int *cnt = NULL;
  if (me) {
    /* An in-place root keeps its own slot where it is, handles and all. */
    if (!(cnt = icopy(sendcounts, p))) return MPI_ERR_NO_MEM;
    if (inplace) cnt[root] = 0;
    nin = total(cnt, p);
  }
  int nout = inplace ? 0 : recvcount;
  double *sv = dbuf((size_t)ext), *rv = dbuf((size_t)recvcount);
  if (!sv || !rv) {
    free(sv);
    free(rv);
    free(cnt);
    return MPI_ERR_NO_MEM;
  }
  if (me) ad__pack(sendbuf, ext, sv);
  ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_SCATTERV, x.c, nin, nout) : NULL;
  if (r) {
    r->root = root;
    r->inplace = inplace;
    r->count = recvcount;
    if (me) {
      r->cnt = cnt;
      cnt = NULL;
      if (!(r->dsp = icopy(displs, p)))
        ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
      else
        slot_handles(x.t, sendbuf, r->cnt, r->dsp, p, r->in, fn);
    }
  }
  rc = MPI_Scatterv(sv, sendcounts, displs, MPI_DOUBLE, inplace ? MPI_IN_PLACE : rv, recvcount, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_SCATTERV, 0, x.c->rank, p, root, recvcount, sendcounts, NULL);
  if (rc == MPI_SUCCESS && !inplace) ad__unpack(r ? x.t : NULL, recvbuf, recvcount, rv, r ? r->out : NULL);
  free(sv);
  free(rv);
  free(cnt);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                    void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_scatterv(1, sendbuf, sendcounts, displs, 0, sendtype, recvbuf, recvcount, recvtype, root, comm);
  int rank;
  MPI_Comm_rank(comm, &rank);
  int use_recv = !(rank == root && recvbuf == MPI_IN_PLACE);
  if (!(use_recv ? is_real(recvtype) : is_real(sendtype)) && (rank != root || !is_real(sendtype)))
    return MPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, rank == root, use_recv, "ad_mpi_scatterv")) return MPI_ERR_TYPE;
  return scatterv_any(sendbuf, sendcounts, displs, recvbuf, recvcount, root, comm, "ad_mpi_scatterv");
}

int ad_mpi_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_scatterv(0, sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int use_recv = !(rank == root && recvbuf == MPI_IN_PLACE);
  if (!(use_recv ? is_real(recvtype) : is_real(sendtype)) && (rank != root || !is_real(sendtype)))
    return MPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, rank == root, use_recv, "ad_mpi_scatter")) return MPI_ERR_TYPE;
  int *cnt = malloc((size_t)size * sizeof *cnt), *dsp = malloc((size_t)size * sizeof *dsp);
  if (!cnt || !dsp) {
    free(cnt);
    free(dsp);
    return MPI_ERR_NO_MEM;
  }
  for (int j = 0; j < size; j++) {
    cnt[j] = sendcount;
    dsp[j] = j * sendcount;
  }
  int rc = scatterv_any(sendbuf, cnt, dsp, recvbuf, recvcount, root, comm, "ad_mpi_scatter");
  free(cnt);
  free(dsp);
  return rc;
}

static int allgatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                          MPI_Comm comm, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank, inplace = sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[me] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[me] : sendbuf;
  int ext = extent(recvcounts, displs, p), tot = total(recvcounts, p);
  double *sv = dbuf((size_t)nin), *rv = dbuf((size_t)ext);
  if (!sv || !rv) {
    free(sv);
    free(rv);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(src, nin, sv);
  /* The own contribution always goes in place: by MPI's definition the same
   * operation, and some MPI libraries (MPICH 4.0) put a separate one at
   * displacement 0 instead of displs[rank] on a one-rank communicator. A
   * count that does not match recvcounts[rank] is left to MPI to report. */
  int own = inplace || sendcount == recvcounts[me];
  if (own) memcpy(rv + displs[me], sv, (size_t)nin * sizeof(double));
  ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_ALLGATHERV, x.c, nin, tot) : NULL;
  if (r) {
    ad__handles(x.t, src, nin, r->in, fn);
    if (!(r->cnt = icopy(recvcounts, p)) || !(r->dsp = icopy(displs, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
  }
  rc = MPI_Allgatherv(own ? MPI_IN_PLACE : sv, sendcount, MPI_DOUBLE, rv, recvcounts, displs, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_ALLGATHERV, 0, me, p, 0, nin, recvcounts, NULL);
  if (rc == MPI_SUCCESS) slot_unpack(r ? x.t : NULL, recvbuf, recvcounts, displs, p, rv, r ? r->out : NULL);
  free(sv);
  free(rv);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_allgatherv(1, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype, comm);
  int use_send = sendbuf != MPI_IN_PLACE;
  if (!is_real(recvtype) && !(use_send && is_real(sendtype)))
    return MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, 1, "ad_mpi_allgatherv")) return MPI_ERR_TYPE;
  return allgatherv_any(sendbuf, sendcount, recvbuf, recvcounts, displs, comm, "ad_mpi_allgatherv");
}

int ad_mpi_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_allgatherv(0, sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, comm);
  int use_send = sendbuf != MPI_IN_PLACE;
  if (!is_real(recvtype) && !(use_send && is_real(sendtype)))
    return MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, 1, "ad_mpi_allgather")) return MPI_ERR_TYPE;
  int size;
  MPI_Comm_size(comm, &size);
  int *cnt = malloc((size_t)size * sizeof *cnt), *dsp = malloc((size_t)size * sizeof *dsp);
  if (!cnt || !dsp) {
    free(cnt);
    free(dsp);
    return MPI_ERR_NO_MEM;
  }
  for (int j = 0; j < size; j++) {
    cnt[j] = recvcount;
    dsp[j] = j * recvcount;
  }
  int rc = allgatherv_any(sendbuf, sendcount, recvbuf, cnt, dsp, comm, "ad_mpi_allgather");
  free(cnt);
  free(dsp);
  return rc;
}

static int alltoallv_any(const void *sendbuf, const int *scnt, const int *sdsp, void *recvbuf, const int *rcnt,
                         const int *rdsp, MPI_Comm comm, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, inplace = sendbuf == MPI_IN_PLACE;
  if (inplace) { /* the data to send is in recvbuf, laid out as received */
    sendbuf = recvbuf;
    scnt = rcnt;
    sdsp = rdsp;
  }
  int sext = extent(scnt, sdsp, p), rext = extent(rcnt, rdsp, p);
  int nin = total(scnt, p), nout = total(rcnt, p);
  double *sv = dbuf((size_t)sext), *rv = dbuf((size_t)rext);
  if (!sv || !rv) {
    free(sv);
    free(rv);
    return MPI_ERR_NO_MEM;
  }
  ad__pack(sendbuf, sext, sv);
  ad__mrec *r = x.t ? ad__mrec_push(x.t, AD__M_ALLTOALLV, x.c, nin, nout) : NULL;
  if (r) {
    if (!(r->cnt = icopy(scnt, p)) || !(r->dsp = icopy(sdsp, p)) || !(r->cnt2 = icopy(rcnt, p)) ||
        !(r->dsp2 = icopy(rdsp, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    else
      slot_handles(x.t, sendbuf, scnt, sdsp, p, r->in, fn);
  }
  rc = MPI_Alltoallv(sv, scnt, sdsp, MPI_DOUBLE, rv, rcnt, rdsp, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_ALLTOALLV, 0, x.c->rank, p, 0, 0, scnt, rcnt);
  if (rc == MPI_SUCCESS) slot_unpack(r ? x.t : NULL, recvbuf, rcnt, rdsp, p, rv, r ? r->out : NULL);
  free(sv);
  free(rv);
  return rc == MPI_SUCCESS ? rc : fwd_fail(&x, rc, fn);
}

int ad_mpi_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                     void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_alltoallv(1, sendbuf, sendcounts, sdispls, 0, sendtype, recvbuf, recvcounts, rdispls, 0, recvtype,
                            comm);
  int use_send = sendbuf != MPI_IN_PLACE;
  if (!is_real(recvtype) && !(use_send && is_real(sendtype)))
    return MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, 1, "ad_mpi_alltoallv")) return MPI_ERR_TYPE;
  return alltoallv_any(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, comm, "ad_mpi_alltoallv");
}

int ad_mpi_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_alltoallv(0, sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype,
                            comm);
  int use_send = sendbuf != MPI_IN_PLACE;
  if (!is_real(recvtype) && !(use_send && is_real(sendtype)))
    return MPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  if (!both_real(&chk, sendtype, recvtype, use_send, 1, "ad_mpi_alltoall")) return MPI_ERR_TYPE;
  int size;
  MPI_Comm_size(comm, &size);
  int *a = malloc(4 * (size_t)size * sizeof *a);
  if (!a) return MPI_ERR_NO_MEM;
  int *sc = a, *sd = a + size, *rc_ = a + 2 * size, *rd = a + 3 * size;
  for (int j = 0; j < size; j++) {
    sc[j] = sendcount;
    sd[j] = j * sendcount;
    rc_[j] = recvcount;
    rd[j] = j * recvcount;
  }
  int rc = alltoallv_any(sendbuf, sc, sd, recvbuf, rc_, rd, comm, "ad_mpi_alltoall");
  free(a);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Sweep actions                                                             */
/* ------------------------------------------------------------------------ */

static int nbwait(ad_tape *t, int e, MPI_Request *q, const char *what) {
  if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
  return ad__mpi_wait(t, q, MPI_STATUS_IGNORE, what);
}

static void scale(double *b, const double *w, int n) {
  if (w)
    for (int i = 0; i < n; i++) b[i] *= w[i];
}

int ad__coll_reverse(ad_tape *t, ad__mrec *r) {
  MPI_Comm pc = r->c->priv;
  ad__mpi_counters.adjoint_bytes += record_payload(r, 1);
  int p = r->c->size, me = r->c->rank, rc = AD_OK, e;
  MPI_Request q = MPI_REQUEST_NULL, q2 = MPI_REQUEST_NULL;
  double *a = NULL, *b = NULL;
  switch (r->kind) {
  case AD__M_BARRIER:
    return nbwait(t, MPI_Ibarrier(pc, &q), &q, "the adjoint of a barrier");
  case AD__M_BCAST: {
    int n = me == r->root ? r->nin : r->nout;
    if (!(a = dbuf((size_t)n))) return AD_ERR_NOMEM;
    if (me == r->root) {
      rc = nbwait(t, MPI_Ireduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &q), &q,
                  "the adjoint of a bcast");
      if (rc == AD_OK) ad__adj_add(t, r->in, n, a, NULL);
    } else {
      ad__adj_take(t, r->out, n, a);
      rc = nbwait(t, MPI_Ireduce(a, NULL, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &q), &q, "the adjoint of a bcast");
    }
    break;
  }
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE: {
    int n = r->nin;
    if (!(a = dbuf((size_t)n))) return AD_ERR_NOMEM;
    if (r->nout) ad__adj_take(t, r->out, n, a);
    if (r->kind == AD__M_REDUCE) {
      e = MPI_Ibcast(a, n, MPI_DOUBLE, r->root, pc, &q);
    } else {
      e = MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_SUM, pc, &q);
    }
    rc = nbwait(t, e, &q, "the adjoint of a reduction");
    if (rc == AD_OK) ad__adj_add(t, r->in, n, a, r->w);
    break;
  }
  case AD__M_RSB: {
    if (!(a = dbuf((size_t)r->count)) || !(b = dbuf((size_t)r->nin))) break;
    ad__adj_take(t, r->out, r->count, a);
    rc = nbwait(t, MPI_Iallgather(a, r->count, MPI_DOUBLE, b, r->count, MPI_DOUBLE, pc, &q), &q,
                "the adjoint of a reduce_scatter_block");
    if (rc == AD_OK) ad__adj_add(t, r->in, r->nin, b, r->w);
    break;
  }
  case AD__M_SCAN:
  case AD__M_EXSCAN: {
    /* x_i's adjoint: the sum of y_k's adjoints over k >= i (scan) or k > i
     * (exscan), a scan in the reverse rank order, summed directly: a total
     * minus a prefix would cancel (1e16 + 1 + 1 - 1e16). */
    int n = r->nin;
    MPI_Comm rev;
    if (!(a = dbuf((size_t)n)) || !(b = dbuf((size_t)n))) break;
    if (r->nout) ad__adj_take(t, r->out, n, a);
    e = ad__mpi_comm_reversed(r->c, &rev);
    if (e == MPI_SUCCESS)
      e = r->kind == AD__M_SCAN ? MPI_Iscan(a, b, n, MPI_DOUBLE, MPI_SUM, rev, &q)
                                : MPI_Iexscan(a, b, n, MPI_DOUBLE, MPI_SUM, rev, &q);
    rc = nbwait(t, e, &q, "the adjoint of a scan");
    if (rc == AD_OK) {
      /* Exscan leaves the first rank's result undefined: the last rank
       * (first in reverse order) has nothing after it. */
      if (r->kind == AD__M_EXSCAN && me == p - 1)
        for (int i = 0; i < n; i++) b[i] = 0.0;
      ad__adj_add(t, r->in, n, b, NULL);
    }
    break;
  }
  case AD__M_GATHERV: {
    /* Scatter the adjoints of the gathered slots back to their owners. */
    int root = me == r->root, ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!(a = dbuf((size_t)ext)) || !(b = dbuf((size_t)r->nin))) break;
    if (root) {
      double *pk = dbuf((size_t)r->nout);
      if (!pk) break;
      ad__adj_take(t, r->out, r->nout, pk);
      to_layout(pk, r->cnt, r->dsp, p, a);
      free(pk);
    }
    rc = nbwait(t, MPI_Iscatterv(a, r->cnt, r->dsp, MPI_DOUBLE, b, r->nin, MPI_DOUBLE, r->root, pc, &q), &q,
                "the adjoint of a gather");
    if (rc == AD_OK) ad__adj_add(t, r->in, r->nin, b, NULL);
    break;
  }
  case AD__M_SCATTERV: {
    int root = me == r->root, ext = root ? extent(r->cnt, r->dsp, p) : 0;
    int *rcnt = NULL;
    if (!(a = dbuf((size_t)r->nout)) || !(b = dbuf((size_t)ext))) break;
    ad__adj_take(t, r->out, r->nout, a);
    if (root) {
      /* The in-place root's own slot has count 0 in r->cnt but MPI still
       * expects the original layout: send nothing for it. */
      rcnt = icopy(r->cnt, p);
      if (!rcnt) break;
    }
    e = MPI_Igatherv(r->inplace ? MPI_IN_PLACE : a, r->nout, MPI_DOUBLE, b, rcnt, r->dsp, MPI_DOUBLE, r->root, pc, &q);
    rc = nbwait(t, e, &q, "the adjoint of a scatter");
    if (rc == AD_OK && root) {
      double *pk = dbuf((size_t)r->nin);
      if (pk) {
        to_packed(b, r->cnt, r->dsp, p, pk);
        ad__adj_add(t, r->in, r->nin, pk, NULL);
        free(pk);
      }
    }
    if (q == MPI_REQUEST_NULL)
      free(rcnt);
    else
      ad__mpi_keep(rcnt); /* MPI may still read it (see below) */
    break;
  }
  case AD__M_ALLGATHERV: {
    if (!(a = dbuf((size_t)r->nout)) || !(b = dbuf((size_t)r->nin))) break;
    ad__adj_take(t, r->out, r->nout, a); /* packed in rank order: what reduce_scatter wants */
    rc = nbwait(t, MPI_Ireduce_scatter(a, b, r->cnt, MPI_DOUBLE, MPI_SUM, pc, &q), &q, "the adjoint of an allgather");
    if (rc == AD_OK) ad__adj_add(t, r->in, r->nin, b, NULL);
    break;
  }
  case AD__M_ALLTOALLV: {
    int sext = extent(r->cnt, r->dsp, p), rext = extent(r->cnt2, r->dsp2, p);
    double *pk = dbuf((size_t)(r->nout > r->nin ? r->nout : r->nin));
    if (!pk || !(a = dbuf((size_t)rext)) || !(b = dbuf((size_t)sext))) {
      free(pk);
      break;
    }
    ad__adj_take(t, r->out, r->nout, pk);
    to_layout(pk, r->cnt2, r->dsp2, p, a);
    rc = nbwait(t, MPI_Ialltoallv(a, r->cnt2, r->dsp2, MPI_DOUBLE, b, r->cnt, r->dsp, MPI_DOUBLE, pc, &q), &q,
                "the adjoint of an alltoall");
    if (rc == AD_OK) {
      to_packed(b, r->cnt, r->dsp, p, pk);
      ad__adj_add(t, r->in, r->nin, pk, NULL);
    }
    free(pk);
    break;
  }
  default:
    return AD_ERR_STATE;
  }
  if (rc == AD_OK && (!a || (!b && r->kind != AD__M_BCAST && r->kind != AD__M_REDUCE && r->kind != AD__M_ALLREDUCE)))
    rc = AD_ERR_NOMEM;
  /* A collective that timed out is still pending and MPI may still use its
   * buffers when the other ranks arrive: they are given up for good. */
  if (!ad__mpi_abandon(&q, 0) || !ad__mpi_abandon(&q2, 0)) {
    ad__mpi_keep(a);
    ad__mpi_keep(b);
    a = b = NULL;
  }
  free(a);
  free(b);
  return rc;
}

int ad__coll_forward(ad_tape *t, ad__mrec *r) {
  MPI_Comm pc = r->c->priv;
  ad__mpi_counters.tangent_bytes += record_payload(r, 0);
  int p = r->c->size, me = r->c->rank, rc = AD_OK, e;
  MPI_Request q = MPI_REQUEST_NULL;
  double *a = NULL, *b = NULL;
  switch (r->kind) {
  case AD__M_BARRIER:
    return nbwait(t, MPI_Ibarrier(pc, &q), &q, "the tangent of a barrier");
  case AD__M_BCAST: {
    int n = me == r->root ? r->nin : r->nout;
    if (!(a = dbuf((size_t)n))) return AD_ERR_NOMEM;
    if (me == r->root) {
      ad__tan_get(t, r->in, n, a);
    }
    rc = nbwait(t, MPI_Ibcast(a, n, MPI_DOUBLE, r->root, pc, &q), &q, "the tangent of a bcast");
    if (rc == AD_OK && me != r->root) ad__tan_set(t, r->out, n, a);
    if (ad__mpi_abandon(&q, 0))
      free(a);
    else
      ad__mpi_keep(a); /* still pending: see the end of this function */
    return rc;
  }
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE: {
    int n = r->nin;
    if (!(a = dbuf((size_t)n)) || !(b = dbuf((size_t)n))) break;
    ad__tan_get(t, r->in, n, a);
    scale(a, r->w, n);
    if (r->kind == AD__M_REDUCE)
      e = MPI_Ireduce(a, b, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &q);
    else
      e = MPI_Iallreduce(a, b, n, MPI_DOUBLE, MPI_SUM, pc, &q);
    rc = nbwait(t, e, &q, "the tangent of a reduction");
    if (rc == AD_OK && r->nout) ad__tan_set(t, r->out, n, b);
    break;
  }
  case AD__M_RSB: {
    if (!(a = dbuf((size_t)r->nin)) || !(b = dbuf((size_t)r->count))) break;
    ad__tan_get(t, r->in, r->nin, a);
    scale(a, r->w, r->nin);
    rc = nbwait(t, MPI_Ireduce_scatter_block(a, b, r->count, MPI_DOUBLE, MPI_SUM, pc, &q), &q,
                "the tangent of a reduce_scatter_block");
    if (rc == AD_OK) ad__tan_set(t, r->out, r->count, b);
    break;
  }
  case AD__M_SCAN:
  case AD__M_EXSCAN: {
    int n = r->nin;
    if (!(a = dbuf((size_t)n)) || !(b = dbuf((size_t)n))) break;
    ad__tan_get(t, r->in, n, a);
    e = r->kind == AD__M_SCAN ? MPI_Iscan(a, b, n, MPI_DOUBLE, MPI_SUM, pc, &q)
                              : MPI_Iexscan(a, b, n, MPI_DOUBLE, MPI_SUM, pc, &q);
    rc = nbwait(t, e, &q, "the tangent of a scan");
    if (rc == AD_OK && r->nout) ad__tan_set(t, r->out, n, b);
    break;
  }
  case AD__M_GATHERV: {
    int root = me == r->root, ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!(a = dbuf((size_t)r->nin)) || !(b = dbuf((size_t)ext))) break;
    ad__tan_get(t, r->in, r->nin, a);
    rc = nbwait(t, MPI_Igatherv(a, r->nin, MPI_DOUBLE, b, r->cnt, r->dsp, MPI_DOUBLE, r->root, pc, &q), &q,
                "the tangent of a gather");
    if (rc == AD_OK && root) {
      double *pk = dbuf((size_t)r->nout);
      if (pk) {
        to_packed(b, r->cnt, r->dsp, p, pk);
        ad__tan_set(t, r->out, r->nout, pk);
        free(pk);
      }
    }
    break;
  }
  case AD__M_SCATTERV: {
    int root = me == r->root, ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!(a = dbuf((size_t)ext)) || !(b = dbuf((size_t)r->count))) break;
    if (root) {
      double *pk = dbuf((size_t)r->nin);
      if (!pk) break;
      ad__tan_get(t, r->in, r->nin, pk);
      to_layout(pk, r->cnt, r->dsp, p, a);
      free(pk);
    }
    e = MPI_Iscatterv(a, r->cnt, r->dsp, MPI_DOUBLE, r->inplace ? MPI_IN_PLACE : b, r->count, MPI_DOUBLE, r->root, pc,
                      &q);
    rc = nbwait(t, e, &q, "the tangent of a scatter");
    if (rc == AD_OK && !r->inplace) ad__tan_set(t, r->out, r->nout, b);
    break;
  }
  case AD__M_ALLGATHERV: {
    int ext = extent(r->cnt, r->dsp, p);
    if (!(a = dbuf((size_t)r->nin)) || !(b = dbuf((size_t)ext))) break;
    ad__tan_get(t, r->in, r->nin, a);
    memcpy(b + r->dsp[me], a, (size_t)r->nin * sizeof(double)); /* in place, as in the forward call */
    rc = nbwait(t, MPI_Iallgatherv(MPI_IN_PLACE, r->nin, MPI_DOUBLE, b, r->cnt, r->dsp, MPI_DOUBLE, pc, &q), &q,
                "the tangent of an allgather");
    if (rc == AD_OK) {
      double *pk = dbuf((size_t)r->nout);
      if (pk) {
        to_packed(b, r->cnt, r->dsp, p, pk);
        ad__tan_set(t, r->out, r->nout, pk);
        free(pk);
      }
    }
    break;
  }
  case AD__M_ALLTOALLV: {
    int sext = extent(r->cnt, r->dsp, p), rext = extent(r->cnt2, r->dsp2, p);
    double *pk = dbuf((size_t)(r->nout > r->nin ? r->nout : r->nin));
    if (!pk || !(a = dbuf((size_t)sext)) || !(b = dbuf((size_t)rext))) {
      free(pk);
      break;
    }
    ad__tan_get(t, r->in, r->nin, pk);
    to_layout(pk, r->cnt, r->dsp, p, a);
    rc = nbwait(t, MPI_Ialltoallv(a, r->cnt, r->dsp, MPI_DOUBLE, b, r->cnt2, r->dsp2, MPI_DOUBLE, pc, &q), &q,
                "the tangent of an alltoall");
    if (rc == AD_OK) {
      to_packed(b, r->cnt2, r->dsp2, p, pk);
      ad__tan_set(t, r->out, r->nout, pk);
    }
    free(pk);
    break;
  }
  default:
    return AD_ERR_STATE;
  }
  if (rc == AD_OK && (!a || !b)) rc = AD_ERR_NOMEM;
  /* A collective that timed out is still pending and MPI may still use its
   * buffers when the other ranks arrive: they are given up for good. */
  if (!ad__mpi_abandon(&q, 0)) {
    ad__mpi_keep(a);
    ad__mpi_keep(b);
    a = b = NULL;
  }
  free(a);
  free(b);
  return rc;
}
