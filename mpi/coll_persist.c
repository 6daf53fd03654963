/* SPDX-License-Identifier: BSD-3-Clause */
/* Persistent collectives (MPI 4.0): every start runs the nonblocking twin. */
#include <math.h>

#include "coll_impl.h"

/* ------------------------------------------------------------------------ */
/* Persistent collectives (MPI 4.0)                                          */
/* ------------------------------------------------------------------------ */

#if MPI_VERSION >= 4
/* A persistent collective keeps its arguments; every ad_mpi_start runs its
 * nonblocking twin, which records one collective, as MPI's own persistent
 * collective would run one (the same number of operations, started in the
 * same order on every rank). The kinds, each with the nonblocking call that
 * starts it from the kept arguments (c) into the request q: */
#define PCOLL_KINDS(X)                                                                                                 \
  X(P_BARRIER, ad_mpi_ibarrier(c->comm, q))                                                                            \
  X(P_BCAST, ad_mpi_ibcast(c->rbuf, c->rcount, c->rtype, c->root, c->comm, q))                                         \
  X(P_REDUCE, ad_mpi_ireduce(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->root, c->comm, q))                       \
  X(P_ALLREDUCE, ad_mpi_iallreduce(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q))                          \
  X(P_RS, ad_mpi_ireduce_scatter(c->sbuf, c->rbuf, c->rcnt, c->rtype, c->op, c->comm, q))                              \
  X(P_RSB, ad_mpi_ireduce_scatter_block(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q))                     \
  X(P_SCAN, ad_mpi_iscan(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q))                                    \
  X(P_EXSCAN, ad_mpi_iexscan(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q))                                \
  X(P_GATHER, ad_mpi_igather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q))         \
  X(P_GATHERV,                                                                                                         \
    ad_mpi_igatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->root, c->comm, q))           \
  X(P_SCATTER, ad_mpi_iscatter(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q))       \
  X(P_SCATTERV,                                                                                                        \
    ad_mpi_iscatterv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q))          \
  X(P_ALLGATHER, ad_mpi_iallgather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q))            \
  X(P_ALLGATHERV, ad_mpi_iallgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q))   \
  X(P_ALLTOALL, ad_mpi_ialltoall(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q))              \
  X(P_ALLTOALLV,                                                                                                       \
    ad_mpi_ialltoallv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q))           \
  X(P_ALLTOALLW,                                                                                                       \
    ad_mpi_ialltoallw(c->sbuf, c->scnt, c->sdsp, c->stypes, c->rbuf, c->rcnt, c->rdsp, c->rtypes, c->comm, q))         \
  X(P_NALLGATHER, ad_mpi_ineighbor_allgather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q))  \
  X(P_NALLGATHERV,                                                                                                     \
    ad_mpi_ineighbor_allgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q))        \
  X(P_NALLTOALL, ad_mpi_ineighbor_alltoall(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q))    \
  X(P_NALLTOALLV,                                                                                                      \
    ad_mpi_ineighbor_alltoallv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q))  \
  X(P_NALLTOALLW, ad_mpi_ineighbor_alltoallw(c->sbuf, c->scnt, c->sdspa, c->stypes, c->rbuf, c->rcnt, c->rdspa,        \
                                             c->rtypes, c->comm, q))

enum {
#define KIND(kind, call) kind,
  PCOLL_KINDS(KIND)
#undef KIND
};

typedef struct pcoll {
  int kind;
  const void *sbuf;
  void *rbuf;
  int scount, rcount, root;
  int *scnt, *sdsp, *rcnt, *rdsp; /* owned copies */
  MPI_Aint *sdspa, *rdspa;
  MPI_Datatype stype, rtype, *stypes, *rtypes;
  MPI_Op op;
  MPI_Comm comm;
} pcoll;

static void pcoll_release(void *pctx) {
  pcoll *c = pctx;
  AD__FREE_EACH(c->scnt, c->sdsp, c->rcnt, c->rdsp, c->sdspa, c->rdspa, c->stypes, c->rtypes, c);
}

static int pcoll_start(void *pctx, MPI_Request *mpi, const ad__req_ops **ops, void **ctx, ad_tape **t, ad__mrec **rec) {
  pcoll *c = pctx;
  ad_mpi_request *q = &ad__coll_capture.req;
  ad__coll_capture.req.mpi = MPI_REQUEST_NULL;
  ad__coll_capture.req.slot = AD__SLOT_STARTING;
  ad__coll_capture.req.gen = 0;
  ad__coll_capture.mq = MPI_REQUEST_NULL;
  ad__coll_capture.ctx = NULL;
  ad__coll_capture.t = NULL;
  ad__coll_capture.r = NULL;
  ad__coll_capture.active = 0;
  int rc = MPI_ERR_INTERN;
  switch (c->kind) {
#define START(kind, call)                                                                                              \
  case kind:                                                                                                           \
    rc = call;                                                                                                         \
    break;
    PCOLL_KINDS(START)
#undef START
  }
  if (rc != MPI_SUCCESS) return rc;
  *mpi = ad__coll_capture.mq;
  *ops = ad__coll_capture.active ? &ad__coll_pend_ops : NULL;
  *ctx = ad__coll_capture.ctx;
  *t = ad__coll_capture.t;
  *rec = ad__coll_capture.r;
  return MPI_SUCCESS;
}

static const ad__preq_ops pcoll_ops = {pcoll_start, pcoll_release};

/* Copies of the arrays a call takes (n entries, none if a is NULL). */
static int pc_icopy(int **out, const int *a, int n) {
  *out = NULL;
  if (!a) return 1;
  return (*out = icopy(a, n)) != NULL;
}

static int pcoll_new(int kind, MPI_Comm comm, pcoll **out) {
  pcoll *c = calloc(1, sizeof *c);
  *out = c;
  if (!c) return MPI_ERR_NO_MEM;
  c->kind = kind;
  c->comm = comm;
  return MPI_SUCCESS;
}

static int pcoll_done(pcoll *c, int ok, ad_mpi_request *request) {
  if (!ok) {
    pcoll_release(c);
    return MPI_ERR_NO_MEM;
  }
  int rc = ad__preq_new(request, &pcoll_ops, c);
  if (rc != MPI_SUCCESS) pcoll_release(c);
  return rc;
}

int ad_mpi_barrier_init(MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  pcoll *c;
  int rc = pcoll_new(P_BARRIER, comm, &c);
  return rc != MPI_SUCCESS ? rc : pcoll_done(c, 1, request);
}

/* The arguments a collective keeps, in *out (also when an array could not be
 * copied: MPI_ERR_NO_MEM): ns and nr entries in the send and receive arrays
 * that are given. */
static int move_fill(pcoll **out, int kind, const void *sendbuf, int sendcount, const int *scnt, const int *sdsp,
                     MPI_Datatype sendtype, void *recvbuf, int recvcount, const int *rcnt, const int *rdsp,
                     MPI_Datatype recvtype, int root, int ns, int nr, MPI_Comm comm) {
  pcoll *c;
  int rc = pcoll_new(kind, comm, &c);
  if (rc != MPI_SUCCESS) return rc;
  *out = c;
  c->sbuf = sendbuf;
  c->rbuf = recvbuf;
  c->scount = sendcount;
  c->rcount = recvcount;
  c->stype = sendtype;
  c->rtype = recvtype;
  c->root = root;
  int ok = pc_icopy(&c->scnt, scnt, ns) && pc_icopy(&c->sdsp, sdsp, ns) && pc_icopy(&c->rcnt, rcnt, nr) &&
           pc_icopy(&c->rdsp, rdsp, nr);
  return ok ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

static int move_init(int kind, const void *sendbuf, int sendcount, const int *scnt, const int *sdsp,
                     MPI_Datatype sendtype, void *recvbuf, int recvcount, const int *rcnt, const int *rdsp,
                     MPI_Datatype recvtype, int root, int ns, int nr, MPI_Comm comm, ad_mpi_request *request) {
  pcoll *c = NULL;
  int rc = move_fill(&c, kind, sendbuf, sendcount, scnt, sdsp, sendtype, recvbuf, recvcount, rcnt, rdsp, recvtype, root,
                     ns, nr, comm);
  if (!c) return rc;
  return pcoll_done(c, rc == MPI_SUCCESS, request);
}

int ad_mpi_bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                      ad_mpi_request *request) {
  (void)info;
  return move_init(P_BCAST, NULL, 0, NULL, NULL, MPI_DATATYPE_NULL, buffer, count, NULL, NULL, datatype, root, 0, 0,
                   comm, request);
}

/* The reductions: the send and receive buffers of one type, an operation,
 * and receive counts per rank for reduce_scatter. */
static int reduce_init(int kind, const void *sendbuf, void *recvbuf, int count, const int *counts,
                       MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *request) {
  pcoll *c = NULL;
  int rc = move_fill(&c, kind, sendbuf, 0, NULL, NULL, MPI_DATATYPE_NULL, recvbuf, count, counts, NULL, datatype, root,
                     0, comm_size(comm), comm);
  if (!c) return rc;
  c->op = op;
  return pcoll_done(c, rc == MPI_SUCCESS, request);
}

int ad_mpi_reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                       MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, request);
}
int ad_mpi_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_ALLREDUCE, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request);
}
int ad_mpi_reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_RS, sendbuf, recvbuf, 0, recvcounts, datatype, op, 0, comm, request);
}
int ad_mpi_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_RSB, sendbuf, recvbuf, recvcount, NULL, datatype, op, 0, comm, request);
}
int ad_mpi_scan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request);
}
int ad_mpi_exscan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                       MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return reduce_init(P_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request);
}

int ad_mpi_gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_GATHER, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, root,
                   0, 0, comm, request);
}
int ad_mpi_gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                        MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_GATHERV, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, root,
                   0, comm_size(comm), comm, request);
}
int ad_mpi_scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_SCATTER, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, root,
                   0, 0, comm, request);
}
int ad_mpi_scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                         ad_mpi_request *request) {
  (void)info;
  return move_init(P_SCATTERV, sendbuf, 0, sendcounts, displs, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, root,
                   comm_size(comm), 0, comm, request);
}
/* The collectives that move one block of a type to every rank (or neighbour)
 * and one from each: the same parameters, a different kind kept. */
#define PCOLL_ONE_BLOCK(name, kind)                                                                                    \
  int ad_mpi_##name##_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,    \
                           MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {             \
    (void)info;                                                                                                        \
    return move_init(kind, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, 0, 0,   \
                     0, comm, request);                                                                                \
  }
PCOLL_ONE_BLOCK(allgather, P_ALLGATHER)
PCOLL_ONE_BLOCK(alltoall, P_ALLTOALL)
PCOLL_ONE_BLOCK(neighbor_allgather, P_NALLGATHER)
PCOLL_ONE_BLOCK(neighbor_alltoall, P_NALLTOALL)
int ad_mpi_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_ALLGATHERV, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, 0,
                   0, comm_size(comm), comm, request);
}
int ad_mpi_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                          void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                          MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int p = comm_size(comm);
  return move_init(P_ALLTOALLV, sendbuf, 0, sendcounts, sdispls, sendtype, recvbuf, 0, recvcounts, rdispls, recvtype, 0,
                   p, p, comm, request);
}

static int types_copy(MPI_Datatype **out, const MPI_Datatype *a, int n) {
  *out = malloc(sizeof(MPI_Datatype) * (size_t)(n > 0 ? n : 1));
  if (*out && n > 0) memcpy(*out, a, sizeof(MPI_Datatype) * (size_t)n);
  return *out != NULL;
}

int ad_mpi_alltoallw_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
                          const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int p = comm_size(comm);
  pcoll *c = NULL;
  int rc = move_fill(&c, P_ALLTOALLW, sendbuf, 0, sendcounts, sdispls, MPI_DATATYPE_NULL, recvbuf, 0, recvcounts,
                     rdispls, MPI_DATATYPE_NULL, 0, p, p, comm);
  if (!c) return rc;
  int ok = rc == MPI_SUCCESS && types_copy(&c->stypes, sendtypes, p) && types_copy(&c->rtypes, recvtypes, p);
  return pcoll_done(c, ok, request);
}

int ad_mpi_neighbor_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                    MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int in = 0, out = 0;
  int rc = ad__coll_degrees(comm, &in, &out);
  if (rc != MPI_SUCCESS) return rc;
  return move_init(P_NALLGATHERV, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, 0,
                   0, in, comm, request);
}
int ad_mpi_neighbor_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int in = 0, out = 0;
  int rc = ad__coll_degrees(comm, &in, &out);
  if (rc != MPI_SUCCESS) return rc;
  return move_init(P_NALLTOALLV, sendbuf, 0, sendcounts, sdispls, sendtype, recvbuf, 0, recvcounts, rdispls, recvtype,
                   0, out, in, comm, request);
}
int ad_mpi_neighbor_alltoallw_init(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                                   const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                   MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int in = 0, out = 0;
  int rc = ad__coll_degrees(comm, &in, &out);
  if (rc != MPI_SUCCESS) return rc;
  pcoll *c = NULL;
  rc = move_fill(&c, P_NALLTOALLW, sendbuf, 0, sendcounts, NULL, MPI_DATATYPE_NULL, recvbuf, 0, recvcounts, NULL,
                 MPI_DATATYPE_NULL, 0, out, in, comm);
  if (!c) return rc;
  c->sdspa = malloc(sizeof(MPI_Aint) * (size_t)(out + 1));
  c->rdspa = malloc(sizeof(MPI_Aint) * (size_t)(in + 1));
  int ok = rc == MPI_SUCCESS && c->sdspa && c->rdspa && types_copy(&c->stypes, sendtypes, out) &&
           types_copy(&c->rtypes, recvtypes, in);
  if (ok) {
    memcpy(c->sdspa, sdispls, sizeof(MPI_Aint) * (size_t)out);
    memcpy(c->rdspa, rdispls, sizeof(MPI_Aint) * (size_t)in);
  }
  return pcoll_done(c, ok, request);
}
#endif /* MPI_VERSION >= 4 */
