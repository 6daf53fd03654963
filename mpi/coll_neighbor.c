/* SPDX-License-Identifier: BSD-3-Clause */
/* Neighbourhood collectives: allgather(v), alltoall(v) and alltoallw over a
 * topology, each an alltoallv over its edges. */
#include <math.h>

#include "coll_impl.h"

/* ------------------------------------------------------------------------ */
/* Neighbourhood collectives                                                 */
/* ------------------------------------------------------------------------ */

/* A topology's sources (indeg) and destinations (outdeg). */
int ad__coll_degrees(MPI_Comm comm, int *indeg, int *outdeg) {
  int topo = MPI_UNDEFINED, rc = MPI_Topo_test(comm, &topo), w;
  if (rc != MPI_SUCCESS) return rc;
  if (topo == MPI_CART) {
    int nd;
    rc = MPI_Cartdim_get(comm, &nd);
    *indeg = *outdeg = 2 * nd;
  } else if (topo == MPI_GRAPH) {
    int me;
    MPI_Comm_rank(comm, &me);
    rc = MPI_Graph_neighbors_count(comm, me, indeg);
    *outdeg = *indeg;
  } else if (topo == MPI_DIST_GRAPH) {
    rc = MPI_Dist_graph_neighbors_count(comm, indeg, outdeg, &w);
  } else {
    rc = MPI_ERR_TOPOLOGY;
  }
  return rc;
}

/* Every neighbourhood collective on AD_MPI_REAL is an alltoallv over the
 * edges: allgather(v) sends the same slot along every edge. */
static int neighbor_any(const void *sendbuf, const int *scnt, const int *sdsp, void *recvbuf, const int *rcnt,
                        const int *rdsp, int indeg, int outdeg, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = ad__coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int sext = extent(scnt, sdsp, outdeg), rext = extent(rcnt, rdsp, indeg);
  pend *q = ad__coll_pend_new(&x, AD__M_NEIGHBOR, fn);
  if (!q || !(q->sv = dbuf((size_t)sext)) || !(q->rv = dbuf((size_t)rext)) || !(q->cnt = icopy(rcnt, indeg)) ||
      !(q->dsp = icopy(rdsp, indeg)) || !(q->a1 = icopy(scnt, outdeg)) || !(q->a2 = icopy(sdsp, outdeg)) ||
      !(q->a3 = icopy(rcnt, indeg)) || !(q->a4 = icopy(rdsp, indeg))) {
    ad__coll_pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  /* A Cartesian slot of MPI_PROC_NULL receives nothing: its buffer, and
   * its handles, stay as they are. */
  int topo = MPI_UNDEFINED;
  MPI_Topo_test(comm, &topo);
  int nin = total(scnt, outdeg), nsend = nin;
  if (topo == MPI_CART)
    for (int d = 0; 2 * d < indeg; d++) {
      int lo, hi;
      MPI_Cart_shift(comm, d, 1, &lo, &hi);
      if (lo == MPI_PROC_NULL) {
        q->cnt[2 * d] = 0;
        nsend -= scnt[2 * d];
      }
      if (hi == MPI_PROC_NULL) {
        q->cnt[2 * d + 1] = 0;
        nsend -= scnt[2 * d + 1];
      }
    }
  int nout = total(q->cnt, indeg);
  q->recvbuf = recvbuf;
  q->nslots = indeg;
  ad__pack(sendbuf, sext, q->sv);
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, AD__M_NEIGHBOR, x.c, nin, nout) : NULL;
  if (r) {
    r->peer = outdeg;
    r->rpeer = indeg;
    r->count = nsend; /* values that leave this rank (not to MPI_PROC_NULL) */
    if (!(r->cnt = icopy(scnt, outdeg)) || !(r->dsp = icopy(sdsp, outdeg)) || !(r->cnt2 = icopy(q->cnt, indeg)) ||
        !(r->dsp2 = icopy(rdsp, indeg)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    else
      ad__coll_slot_handles(x.t, sendbuf, scnt, sdsp, outdeg, r->in, fn);
  }
  /* Always MPI's nonblocking alltoallv, which the sweeps use too: where a
   * rank is the same neighbour twice (a periodic Cartesian dimension of one
   * or two ranks, repeated graph edges) MPI libraries disagree, even between
   * their own blocking and nonblocking calls, on which slot receives which
   * message; the forward call and the sweeps must route alike. */
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = MPI_Ineighbor_alltoallv(q->sv, q->a1, q->a2, MPI_DOUBLE, q->rv, q->a3, q->a4, MPI_DOUBLE, comm, &mq);
  if (rc == MPI_SUCCESS && !req) rc = MPI_Wait(&mq, MPI_STATUS_IGNORE);
  ad__mpi_counters.forward_bytes += (uint64_t)nsend * sizeof(double);
  return ad__coll_pend_go(q, rc, mq, req);
}

/* A neighbourhood collective with a datatype built from AD_MPI_REAL: its
 * slots spelled out for ad__dt_alltoallw (allgather(v) sends the same slot
 * along every edge). Displacements in items become bytes. */
static int neighbor_dt(int kind, const void *sendbuf, int sendcount, const int *scnt, const int *sdsp,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, const int *rcnt, const int *rdsp,
                       MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER;
  int indeg, outdeg, rc = ad__coll_degrees(comm, &indeg, &outdeg);
  if (rc != MPI_SUCCESS) return rc;
  size_t n = (size_t)(indeg + outdeg + 1);
  int *c = malloc(n * sizeof *c);
  MPI_Aint *d = malloc(n * sizeof *d);
  MPI_Datatype *t = malloc(n * sizeof *t);
  if (!c || !d || !t) {
    free(c);
    free(d);
    free(t);
    return MPI_ERR_NO_MEM;
  }
  MPI_Aint se = ad__dtype_extent(sendtype), re = ad__dtype_extent(recvtype);
  for (int j = 0; j < outdeg; j++) {
    c[j] = kind == 1 ? scnt[j] : sendcount;
    d[j] = (kind == 1 ? sdsp[j] : kind == 0 ? (MPI_Aint)j * sendcount : 0) * se;
    t[j] = sendtype;
  }
  for (int j = 0; j < indeg; j++) {
    c[outdeg + j] = kind == 1 || kind == 3 ? rcnt[j] : recvcount;
    d[outdeg + j] = (kind == 1 || kind == 3 ? rdsp[j] : (MPI_Aint)j * recvcount) * re;
    t[outdeg + j] = recvtype;
  }
  rc = ad__handoff.dt_alltoallw(1, 1, fn, sendbuf, c, d, t, outdeg, recvbuf, c + outdeg, d + outdeg, t + outdeg, indeg,
                                comm, req);
  free(c);
  free(d);
  free(t);
  return rc;
}

/* kind: 0 alltoall, 1 alltoallv, 2 allgather, 3 allgatherv. Counts and
 * displacements the call does not take are made here. */
static int neighbor_kind(int kind, const void *sendbuf, int sendcount, const int *scnt, const int *sdsp,
                         MPI_Datatype sendtype, void *recvbuf, int recvcount, const int *rcnt, const int *rdsp,
                         MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return neighbor_dt(kind, sendbuf, sendcount, scnt, sdsp, sendtype, recvbuf, recvcount, rcnt, rdsp, recvtype, comm,
                       req, fn);
  int active, rc = ad__coll_all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER; /* MPI allows no MPI_IN_PLACE here */
  int indeg, outdeg;
  if ((rc = ad__coll_degrees(comm, &indeg, &outdeg)) != MPI_SUCCESS) return rc;
  int *a = malloc(sizeof(int) * (size_t)(2 * (indeg + outdeg) + 1));
  if (!a) return MPI_ERR_NO_MEM;
  int *sc = a, *sd = a + outdeg, *rc_ = a + 2 * outdeg, *rd = a + 2 * outdeg + indeg;
  for (int j = 0; j < outdeg; j++) {
    sc[j] = kind == 1 ? scnt[j] : sendcount;
    sd[j] = kind == 1 ? sdsp[j] : kind == 0 ? j * sendcount : 0;
  }
  for (int j = 0; j < indeg; j++) {
    rc_[j] = kind == 1 || kind == 3 ? rcnt[j] : recvcount;
    rd[j] = kind == 1 || kind == 3 ? rdsp[j] : j * recvcount;
  }
  if (active) {
    rc = neighbor_any(sendbuf, sc, sd, recvbuf, rc_, rd, indeg, outdeg, comm, req, fn);
  } else if ((rc = ad__coll_send_guard(fn, comm, sendbuf, 0, outdeg, sc, sd, sendtype)) == MPI_SUCCESS) {
    switch (kind) {
    case 0:
      rc = AD__COLL_PASSIVE(req, MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, sendbuf, sendcount, sendtype, recvbuf,
                            recvcount, recvtype, comm);
      break;
    case 1:
      rc = AD__COLL_PASSIVE(req, MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, sendbuf, scnt, sdsp, sendtype,
                            recvbuf, rcnt, rdsp, recvtype, comm);
      break;
    case 2:
      rc = AD__COLL_PASSIVE(req, MPI_Neighbor_allgather, MPI_Ineighbor_allgather, sendbuf, sendcount, sendtype, recvbuf,
                            recvcount, recvtype, comm);
      break;
    default:
      rc = AD__COLL_PASSIVE(req, MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, sendbuf, sendcount, sendtype,
                            recvbuf, rcnt, rdsp, recvtype, comm);
      break;
    }
  }
  free(a);
  return rc;
}

AD__COLL_FORMS(neighbor_allgather, neighbor_kind,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm),
               (2, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm))
AD__COLL_FORMS(neighbor_allgatherv, neighbor_kind,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, MPI_Comm comm),
               (3, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, comm))
AD__COLL_FORMS(neighbor_alltoall, neighbor_kind,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm),
               (0, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm))
AD__COLL_FORMS(neighbor_alltoallv, neighbor_kind,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm),
               (1, sendbuf, 0, sendcounts, sdispls, sendtype, recvbuf, 0, recvcounts, rdispls, recvtype, comm))

/* Alltoallw over a neighbourhood: as alltoallw (every type in use
 * AD_MPI_REAL, or none). Its displacements are MPI_Aint bytes. */
static int neighbor_w(const void *sendbuf, const int *scnt, const MPI_Aint *sdsp, const MPI_Datatype *stypes,
                      void *recvbuf, const int *rcnt, const MPI_Aint *rdsp, const MPI_Datatype *rtypes, MPI_Comm comm,
                      ad_mpi_request *req, const char *fn) {
  int indeg, outdeg, rc = ad__coll_degrees(comm, &indeg, &outdeg);
  if (rc != MPI_SUCCESS) return rc;
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER; /* MPI allows no MPI_IN_PLACE here */
  if (ad__coll_derived_in_use(outdeg, scnt, stypes, indeg, rcnt, rtypes))
    return ad__handoff.dt_alltoallw(1, 0, fn, sendbuf, scnt, sdsp, stypes, outdeg, recvbuf, rcnt, rdsp, rtypes, indeg,
                                    comm, req);
  int nreal, *el = NULL;
  rc = ad__coll_w_check(fn, comm, sendbuf, outdeg, scnt, NULL, sdsp, stypes, indeg, rcnt, NULL, rdsp, rtypes, &nreal,
                        &el);
  if (rc != MPI_SUCCESS) return rc;
  if (nreal == 0)
    return AD__COLL_PASSIVE(req, MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, sendbuf, scnt, sdsp, stypes, recvbuf,
                            rcnt, rdsp, rtypes, comm);
  rc = neighbor_any(sendbuf, scnt, el, recvbuf, rcnt, el + outdeg, indeg, outdeg, comm, req, fn);
  free(el);
  return rc;
}

AD__COLL_FORMS(neighbor_alltoallw, neighbor_w,
               (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm),
               (sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm))
