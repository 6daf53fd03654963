/* SPDX-License-Identifier: BSD-3-Clause */
/* Rooted collectives: barrier, bcast, gather(v) and scatter(v), blocking and
 * nonblocking. Their records and sweep actions are coll.c's. */
#include <math.h>

#include "coll_impl.h"

/* ------------------------------------------------------------------------ */
/* Barrier, Bcast                                                            */
/* ------------------------------------------------------------------------ */

static int barrier_any(MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  pend *q = ad__coll_pend_new(&x, AD__M_BARRIER, fn);
  if (!q) return MPI_ERR_NO_MEM;
  if (x.t) q->r = ad__mrec_push(x.t, AD__M_BARRIER, x.c, 0, 0);
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ibarrier(comm, &mq) : MPI_Barrier(comm);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* Windows of ad_real publish this rank's stores before the barrier and take
 * in what other ranks completed before it after (see ad__mpi_chapters_barrier). */
int ad_mpi_barrier(MPI_Comm comm) {
  int prc = ad__mpi_chapters_barrier(0);
  int rc = barrier_any(comm, NULL, "ad_mpi_barrier");
  if (rc != MPI_SUCCESS) return rc;
  rc = ad__mpi_chapters_barrier(1);
  return prc != MPI_SUCCESS ? prc : rc;
}
int ad_mpi_ibarrier(MPI_Comm comm, ad_mpi_request *request) { return barrier_any(comm, request, "ad_mpi_ibarrier"); }

static int bcast_any(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *req,
                     const char *fn) {
  int e_ = ad__types_refuse(fn, 1, type);
  if (e_ != MPI_SUCCESS) return e_;
  if (!is_real(type)) {
    /* Only the root's buffer is sent: the other ranks learn its verdict in
     * check mode. */
    e_ = ad__coll_send_guard(fn, comm, is_root(root, comm) ? buffer : NULL, count, 0, NULL, NULL, type);
    if (e_ != MPI_SUCCESS) return e_;
    return AD__COLL_PASSIVE(req, MPI_Bcast, MPI_Ibcast, buffer, count, type, root, comm);
  }
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int me = x.c->rank == root;
  pend *q = ad__coll_pend_new(&x, AD__M_BCAST, fn);
  if (!q || !(q->rv = dbuf((size_t)count))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = buffer;
  q->n = count;
  q->gets = !me;
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_BCAST, x.c, me ? count : 0, 0) : NULL;
  if (r) r->root = root;
  if (me) {
    ad__pack(buffer, count, q->rv);
    if (r) ad__handles(x.t, buffer, count, r->in, fn);
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ibcast(q->rv, count, MPI_DOUBLE, root, comm, &mq) : MPI_Bcast(q->rv, count, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += ad__coll_payload(AD__M_BCAST, 0, x.c->rank, x.c->size, root, count, NULL, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

int ad_mpi_bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__handoff.dt_bcast(buffer, count, type, root, comm);
  return bcast_any(buffer, count, type, root, comm, NULL, "ad_mpi_bcast");
}
int ad_mpi_ibcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__handoff.dt_ibcast(buffer, count, type, root, comm, request);
  return bcast_any(buffer, count, type, root, comm, request, "ad_mpi_ibcast");
}

/* ------------------------------------------------------------------------ */
/* Gather, scatter, allgather, alltoall                                      */
/* ------------------------------------------------------------------------ */

static int gatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                       int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[root] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[root] : sendbuf;
  int ext = me ? extent(recvcounts, displs, p) : 0, tot = me ? total(recvcounts, p) : 0;
  pend *q = ad__coll_pend_new(&x, AD__M_GATHERV, fn);
  if (!q || !(q->sv = dbuf((size_t)nin)) || !(q->rv = dbuf((size_t)ext)) ||
      (me && (!(q->cnt = icopy(recvcounts, p)) || !(q->dsp = icopy(displs, p))))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  ad__pack(src, nin, q->sv);
  if (inplace) memcpy(q->rv + displs[root], q->sv, (size_t)nin * sizeof(double));
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_GATHERV, x.c, nin, tot) : NULL;
  if (r) {
    r->root = root;
    r->inplace = inplace;
    ad__handles(x.t, src, nin, r->in, fn);
    if (me && (!(r->cnt = icopy(recvcounts, p)) || !(r->dsp = icopy(displs, p))))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
  }
  const void *sb = inplace ? MPI_IN_PLACE : q->sv;
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Igatherv(sb, sendcount, MPI_DOUBLE, q->rv, q->cnt, q->dsp, MPI_DOUBLE, root, comm, &mq)
           : MPI_Gatherv(sb, sendcount, MPI_DOUBLE, q->rv, recvcounts, displs, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += ad__coll_payload(AD__M_GATHERV, 0, x.c->rank, p, root, nin, recvcounts, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

static int scatterv_any(const void *sendbuf, const int *sendcounts, const int *displs, void *recvbuf, int recvcount,
                        int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && recvbuf == MPI_IN_PLACE;
  int ext = me ? extent(sendcounts, displs, p) : 0;
  int nin = 0;
  pend *q = ad__coll_pend_new(&x, AD__M_SCATTERV, fn);
  if (!q || !(q->sv = dbuf((size_t)ext)) || !(q->rv = dbuf((size_t)recvcount)) ||
      (me && (!(q->a1 = icopy(sendcounts, p)) || !(q->a2 = icopy(displs, p))))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  int *cnt = NULL;
  if (me) {
    /* An in-place root keeps its own slot where it is, handles and all. */
    if (!(cnt = icopy(sendcounts, p))) {
      ad__coll_pend_free(q);
      return MPI_ERR_NO_MEM;
    }
    if (inplace) cnt[root] = 0;
    nin = total(cnt, p);
  }
  q->recvbuf = recvbuf;
  q->n = recvcount;
  q->gets = !inplace;
  if (me) ad__pack(sendbuf, ext, q->sv);
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_SCATTERV, x.c, nin, inplace ? 0 : recvcount) : NULL;
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
        ad__coll_slot_handles(x.t, sendbuf, r->cnt, r->dsp, p, r->in, fn);
    }
  }
  free(cnt);
  void *rb = inplace ? MPI_IN_PLACE : q->rv;
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Iscatterv(q->sv, q->a1, q->a2, MPI_DOUBLE, rb, recvcount, MPI_DOUBLE, root, comm, &mq)
           : MPI_Scatterv(q->sv, sendcounts, displs, MPI_DOUBLE, rb, recvcount, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes +=
      ad__coll_payload(AD__M_SCATTERV, 0, x.c->rank, p, root, recvcount, sendcounts, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* The arguments of a gather(v) or a scatter(v). counts and displs describe
 * the root's side, which receives (gather) or sends (scatter) one block per
 * rank, and which may be in place at the root; the other side is each rank's
 * own block. The regular forms leave counts NULL. */
typedef struct {
  const void *sendbuf;
  void *recvbuf;
  int sendcount, recvcount;
  const int *counts, *displs;
  MPI_Datatype sendtype, recvtype;
  int root;
  MPI_Comm comm;
} rooted;

static int rooted_check(int scatter, const rooted *a, const char *fn, int *active) {
  int e_ = ad__types_refuse(fn, 2, a->sendtype, a->recvtype);
  if (e_ != MPI_SUCCESS) return e_;
  int rank;
  MPI_Comm_rank(a->comm, &rank);
  int me = rank == a->root;
  MPI_Datatype own = scatter ? a->recvtype : a->sendtype, all = scatter ? a->sendtype : a->recvtype;
  int use_own = !(me && (scatter ? a->recvbuf : a->sendbuf) == MPI_IN_PLACE);
  *active = (use_own ? is_real(own) : is_real(all)) || (me && is_real(all));
  if (!*active && scatter) { /* only the root sends */
    int p = comm_size(a->comm);
    return ad__coll_send_guard(fn, a->comm, is_root(a->root, a->comm) ? a->sendbuf : NULL, blocks_of(a->sendcount, p),
                               p, a->counts, a->displs, a->sendtype);
  }
  if (!*active) {
    /* An intercommunicator's root group (MPI_ROOT, MPI_PROC_NULL) sends nothing. */
    int sends = use_own && a->root != MPI_ROOT && a->root != MPI_PROC_NULL;
    return ad__coll_send_guard(fn, a->comm, sends ? a->sendbuf : NULL, a->sendcount, 0, NULL, NULL, a->sendtype);
  }
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  return ad__coll_both_real(&chk, a->sendtype, a->recvtype, scatter ? me : use_own, scatter ? use_own : me, fn)
             ? MPI_SUCCESS
             : MPI_ERR_TYPE;
}

/* A passive gather(v) or scatter(v) in the form the user called. */
static int rooted_passive(int scatter, int v, const rooted *a, ad_mpi_request *req) {
  if (scatter)
    return v ? AD__COLL_PASSIVE(req, MPI_Scatterv, MPI_Iscatterv, a->sendbuf, a->counts, a->displs, a->sendtype,
                                a->recvbuf, a->recvcount, a->recvtype, a->root, a->comm)
             : AD__COLL_PASSIVE(req, MPI_Scatter, MPI_Iscatter, a->sendbuf, a->sendcount, a->sendtype, a->recvbuf,
                                a->recvcount, a->recvtype, a->root, a->comm);
  return v ? AD__COLL_PASSIVE(req, MPI_Gatherv, MPI_Igatherv, a->sendbuf, a->sendcount, a->sendtype, a->recvbuf,
                              a->counts, a->displs, a->recvtype, a->root, a->comm)
           : AD__COLL_PASSIVE(req, MPI_Gather, MPI_Igather, a->sendbuf, a->sendcount, a->sendtype, a->recvbuf,
                              a->recvcount, a->recvtype, a->root, a->comm);
}

/* Gather(v), scatter(v) and their nonblocking forms (req): one sequence of
 * steps, mirrored by the direction. The regular form (v 0) runs as the v-form
 * with the root's block count per rank. */
static int rooted_front(int scatter, int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        int recvcount, MPI_Datatype recvtype, const int counts[], const int displs[], int root,
                        MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return scatter ? ad__handoff.dt_scatterv(v, sendbuf, counts, displs, sendcount, sendtype, recvbuf, recvcount,
                                             recvtype, root, comm, req)
                   : ad__handoff.dt_gatherv(v, sendbuf, sendcount, sendtype, recvbuf, counts, displs, recvcount,
                                            recvtype, root, comm, req);
  rooted a = {sendbuf, recvbuf, sendcount, recvcount, counts, displs, sendtype, recvtype, root, comm};
  int active, *reg, rc = rooted_check(scatter, &a, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) return rooted_passive(scatter, v, &a, req);
  rc = ad__mpi_as_v(v, comm, scatter ? sendcount : recvcount, &counts, &displs, &reg);
  if (rc != MPI_SUCCESS) return rc;
  rc = scatter ? scatterv_any(sendbuf, counts, displs, recvbuf, recvcount, root, comm, req, fn)
               : gatherv_any(sendbuf, sendcount, recvbuf, counts, displs, root, comm, req, fn);
  free(reg);
  return rc;
}

AD__COLL_FORMS(gatherv, rooted_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm),
               (0, 1, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, recvcounts, displs, root, comm))
AD__COLL_FORMS(gather, rooted_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm),
               (0, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, NULL, NULL, root, comm))
AD__COLL_FORMS(scatterv, rooted_front,
               (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm),
               (1, 1, sendbuf, 0, sendtype, recvbuf, recvcount, recvtype, sendcounts, displs, root, comm))
AD__COLL_FORMS(scatter, rooted_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm),
               (1, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, NULL, NULL, root, comm))
