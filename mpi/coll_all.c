/* SPDX-License-Identifier: BSD-3-Clause */
/* All-to-all collectives: allgather(v), alltoall(v) and alltoallw, blocking
 * and nonblocking. */
#include <math.h>

#include "coll_impl.h"

static int allgatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                          MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank, inplace = sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[me] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[me] : sendbuf;
  int ext = extent(recvcounts, displs, p), tot = total(recvcounts, p);
  pend *q = ad__coll_pend_new(&x, AD__M_ALLGATHERV, fn);
  if (!q || !(q->sv = dbuf((size_t)nin)) || !(q->rv = dbuf((size_t)ext)) || !(q->cnt = icopy(recvcounts, p)) ||
      !(q->dsp = icopy(displs, p))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  ad__pack(src, nin, q->sv);
  /* The own contribution always goes in place: by MPI's definition the same
   * operation, and some MPI libraries (MPICH 4.0) put a separate one at
   * displacement 0 instead of displs[rank] on a one-rank communicator. A
   * count that does not match recvcounts[rank] is left to MPI to report. */
  int own = inplace || sendcount == recvcounts[me];
  if (own) memcpy(q->rv + displs[me], q->sv, (size_t)nin * sizeof(double));
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_ALLGATHERV, x.c, nin, tot) : NULL;
  if (r) {
    ad__handles(x.t, src, nin, r->in, fn);
    if (!(r->cnt = icopy(recvcounts, p)) || !(r->dsp = icopy(displs, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
  }
  const void *sb = own ? MPI_IN_PLACE : q->sv;
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Iallgatherv(sb, sendcount, MPI_DOUBLE, q->rv, q->cnt, q->dsp, MPI_DOUBLE, comm, &mq)
           : MPI_Allgatherv(sb, sendcount, MPI_DOUBLE, q->rv, recvcounts, displs, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += ad__coll_payload(AD__M_ALLGATHERV, 0, me, p, 0, nin, recvcounts, NULL);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* Allgather(v) and alltoall(v): active when a buffer in use is AD_MPI_REAL. */
int ad__coll_all_check(const void *sendbuf, MPI_Datatype sendtype, MPI_Datatype recvtype, const char *fn, int *active) {
  int e_ = ad__types_refuse(fn, 2, sendtype, recvtype);
  if (e_ != MPI_SUCCESS) return e_;
  int use_send = sendbuf != MPI_IN_PLACE;
  *active = is_real(recvtype) || (use_send && is_real(sendtype));
  if (!*active) return MPI_SUCCESS; /* the caller guards its send side */
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  return ad__coll_both_real(&chk, sendtype, recvtype, use_send, 1, fn) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/* Allgather(v) and iallgather(v) (req); the regular form (v 0) as the
 * v-form with recvcount per rank. */
static int allgather_front(int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__handoff.dt_gatherv(v, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvcount, recvtype,
                                  AD__ROOT_ALL, comm, req);
  int active, *reg, rc = ad__coll_all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active) rc = ad__coll_send_guard(fn, comm, sendbuf, sendcount, 0, NULL, NULL, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active)
    return v ? AD__COLL_PASSIVE(req, MPI_Allgatherv, MPI_Iallgatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                displs, recvtype, comm)
             : AD__COLL_PASSIVE(req, MPI_Allgather, MPI_Iallgather, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                recvtype, comm);
  if ((rc = ad__mpi_as_v(v, comm, recvcount, &recvcounts, &displs, &reg)) != MPI_SUCCESS) return rc;
  rc = allgatherv_any(sendbuf, sendcount, recvbuf, recvcounts, displs, comm, req, fn);
  free(reg);
  return rc;
}

AD__COLL_FORMS(allgatherv, allgather_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, MPI_Comm comm),
               (1, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype, comm))
AD__COLL_FORMS(allgather, allgather_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm),
               (0, sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, comm))

static int alltoallv_any(const void *sendbuf, const int *scnt, const int *sdsp, void *recvbuf, const int *rcnt,
                         const int *rdsp, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, inplace = sendbuf == MPI_IN_PLACE;
  if (inplace) { /* the data to send is in recvbuf, laid out as received */
    sendbuf = recvbuf;
    scnt = rcnt;
    sdsp = rdsp;
  }
  int sext = extent(scnt, sdsp, p), rext = extent(rcnt, rdsp, p);
  int nin = total(scnt, p), nout = total(rcnt, p);
  pend *q = ad__coll_pend_new(&x, AD__M_ALLTOALLV, fn);
  if (!q || !(q->sv = dbuf((size_t)sext)) || !(q->rv = dbuf((size_t)rext)) || !(q->cnt = icopy(rcnt, p)) ||
      !(q->dsp = icopy(rdsp, p)) || !(q->a1 = icopy(scnt, p)) || !(q->a2 = icopy(sdsp, p))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  ad__pack(sendbuf, sext, q->sv);
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_ALLTOALLV, x.c, nin, nout) : NULL;
  if (r) {
    if (!(r->cnt = icopy(scnt, p)) || !(r->dsp = icopy(sdsp, p)) || !(r->cnt2 = icopy(rcnt, p)) ||
        !(r->dsp2 = icopy(rdsp, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    else
      ad__coll_slot_handles(x.t, sendbuf, scnt, sdsp, p, r->in, fn);
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ialltoallv(q->sv, q->a1, q->a2, MPI_DOUBLE, q->rv, q->cnt, q->dsp, MPI_DOUBLE, comm, &mq)
           : MPI_Alltoallv(q->sv, scnt, sdsp, MPI_DOUBLE, q->rv, rcnt, rdsp, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += ad__coll_payload(AD__M_ALLTOALLV, 0, x.c->rank, p, 0, 0, scnt, rcnt);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* Alltoall(v) and ialltoall(v) (req); the regular form (v 0) as the v-form
 * with sendcount and recvcount per rank. */
static int alltoall_front(int v, const void *sendbuf, const int sendcounts[], const int sdispls[], int sendcount,
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__handoff.dt_alltoallv(v, sendbuf, sendcounts, sdispls, sendcount, sendtype, recvbuf, recvcounts, rdispls,
                                    recvcount, recvtype, comm, req);
  int *sreg = NULL, *rreg = NULL, active, rc = ad__coll_all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active)
    rc = v ? ad__coll_send_guard(fn, comm, sendbuf, 0, comm_size(comm), sendcounts, sdispls, sendtype)
           : ad__coll_send_guard(fn, comm, sendbuf, blocks_of(sendcount, comm_size(comm)), 0, NULL, NULL, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active)
    return v ? AD__COLL_PASSIVE(req, MPI_Alltoallv, MPI_Ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                recvcounts, rdispls, recvtype, comm)
             : AD__COLL_PASSIVE(req, MPI_Alltoall, MPI_Ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                recvtype, comm);
  if ((rc = ad__mpi_as_v(v, comm, sendcount, &sendcounts, &sdispls, &sreg)) == MPI_SUCCESS &&
      (rc = ad__mpi_as_v(v, comm, recvcount, &recvcounts, &rdispls, &rreg)) == MPI_SUCCESS)
    rc = alltoallv_any(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, comm, req, fn);
  AD__FREE_EACH(sreg, rreg);
  return rc;
}

AD__COLL_FORMS(alltoallv, alltoall_front,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
               (1, sendbuf, sendcounts, sdispls, 0, sendtype, recvbuf, recvcounts, rdispls, 0, recvtype, comm))
AD__COLL_FORMS(alltoall, alltoall_front,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm),
               (0, sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, comm))

/* The slots in use (count not zero) of one side of an alltoallw: their
 * datatypes refused if they cannot be used, counted, and whether a
 * displacement is not in whole ad_real elements. */
static int w_slots(const char *fn, int n, const int *cnt, const int *dsp, const MPI_Aint *adsp,
                   const MPI_Datatype *types, int *nused, int *nreal, int *bad) {
  for (int j = 0; j < n; j++) {
    if (!cnt[j]) continue;
    (*nused)++;
    *nreal += is_real(types[j]);
    *bad |= (adsp ? adsp[j] : dsp[j]) % (MPI_Aint)sizeof(ad_real) != 0;
    int rc = ad__types_refuse(fn, 1, types[j]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int ad__coll_w_check(const char *fn, MPI_Comm comm, const void *sendbuf, int ns, const int *scnt, const int *sdsp,
                     const MPI_Aint *sadsp, const MPI_Datatype *stypes, int nr, const int *rcnt, const int *rdsp,
                     const MPI_Aint *radsp, const MPI_Datatype *rtypes, int *nreal, int **el) {
  int nused = 0, bad = 0;
  *nreal = 0;
  int rc = w_slots(fn, ns, scnt, sdsp, sadsp, stypes, &nused, nreal, &bad);
  if (rc == MPI_SUCCESS) rc = w_slots(fn, nr, rcnt, rdsp, radsp, rtypes, &nused, nreal, &bad);
  if (rc == MPI_SUCCESS && *nreal == 0) {
    rc = ad__mpi_guard_blocks(fn, "send buffer", sendbuf, ns, scnt, sdsp, sdsp != NULL, sadsp, stypes,
                              MPI_DATATYPE_NULL);
    rc = ad__mpi_guard_agree(fn, comm, rc);
  }
  if (rc != MPI_SUCCESS || *nreal == 0) return rc;
  if (bad || *nreal != nused) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (seen)
      ad__fail(seen, AD_ERR_MPI,
               "%s: every datatype in use must be AD_MPI_REAL, with displacements in whole ad_real elements", fn);
    return MPI_ERR_TYPE;
  }
  if (!(*el = malloc(sizeof(int) * (size_t)(ns + nr + 1)))) return MPI_ERR_NO_MEM;
  for (int j = 0; j < ns; j++) (*el)[j] = (int)((sadsp ? sadsp[j] : sdsp[j]) / (MPI_Aint)sizeof(ad_real));
  for (int j = 0; j < nr; j++) (*el)[ns + j] = (int)((radsp ? radsp[j] : rdsp[j]) / (MPI_Aint)sizeof(ad_real));
  return MPI_SUCCESS;
}

/* 1 if a slot in use (count not zero) has a datatype built from
 * AD_MPI_REAL (ns 0: the send side is not in use). */
int ad__coll_derived_in_use(int ns, const int *scnt, const MPI_Datatype *stypes, int nr, const int *rcnt,
                            const MPI_Datatype *rtypes) {
  for (int j = 0; j < ns; j++)
    if (scnt[j] && ad__dtype_any(1, stypes[j])) return 1;
  for (int j = 0; j < nr; j++)
    if (rcnt[j] && ad__dtype_any(1, rtypes[j])) return 1;
  return 0;
}

/* Alltoallw: per-rank datatypes and displacements in bytes. Differentiated
 * when every type in use is AD_MPI_REAL (then it is an alltoallv with the
 * displacements in elements), passed to MPI when none is; a mix is refused. */
static int alltoallw_any(const void *sendbuf, const int *scnt, const int *sdsp, const MPI_Datatype *stypes,
                         void *recvbuf, const int *rcnt, const int *rdsp, const MPI_Datatype *rtypes, MPI_Comm comm,
                         ad_mpi_request *req, const char *fn) {
  int size;
  MPI_Comm_size(comm, &size);
  int inplace = sendbuf == MPI_IN_PLACE, nreal, rc, *el = NULL;
  if (ad__coll_derived_in_use(inplace ? 0 : size, scnt, stypes, size, rcnt, rtypes)) {
    MPI_Aint *a = malloc(2 * (size_t)(size ? size : 1) * sizeof *a);
    if (!a) return MPI_ERR_NO_MEM;
    for (int j = 0; j < size; j++) {
      a[j] = inplace ? 0 : sdsp[j];
      a[size + j] = rdsp[j];
    }
    rc = ad__handoff.dt_alltoallw(0, 0, fn, sendbuf, scnt, a, stypes, size, recvbuf, rcnt, a + size, rtypes, size, comm,
                                  req);
    free(a);
    return rc;
  }
  rc = ad__coll_w_check(fn, comm, sendbuf, inplace ? 0 : size, scnt, sdsp, NULL, stypes, size, rcnt, rdsp, NULL, rtypes,
                        &nreal, &el);
  if (rc != MPI_SUCCESS) return rc;
  if (nreal == 0)
    return AD__COLL_PASSIVE(req, MPI_Alltoallw, MPI_Ialltoallw, sendbuf, scnt, sdsp, stypes, recvbuf, rcnt, rdsp,
                            rtypes, comm);
  int ns = inplace ? 0 : size, *rd = el + ns; /* in place: the receive side's layout */
  rc = alltoallv_any(sendbuf, inplace ? rcnt : scnt, inplace ? rd : el, recvbuf, rcnt, rd, comm, req, fn);
  free(el);
  return rc;
}

AD__COLL_FORMS(alltoallw, alltoallw_any,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm),
               (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm))
