/* SPDX-License-Identifier: BSD-3-Clause */
/* What the collective wrappers share (coll.c): the state of a call, its
 * pending form for nonblocking calls, and the helpers every family uses.
 * The families: coll_rooted.c (barrier, bcast, gather, scatter),
 * coll_reduce.c (reductions and scans), coll_all.c (allgather, alltoall),
 * coll_neighbor.c (neighbourhood collectives), coll_persist.c (persistent
 * collectives). */
#ifndef ARIADNE_MPI_COLL_IMPL_H
#define ARIADNE_MPI_COLL_IMPL_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

typedef struct coll {
  ad__comm *c;
  ad_tape *t, *seen;
} coll;

typedef struct pend {
  int kind;
  coll x;
  ad__mrec *r;
  const char *fn;
  double *sv, *rv, *all; /* packed send and receive values; every rank's contributions */
  void *recvbuf;
  int n;                  /* values received into recvbuf (contiguous), or */
  int *cnt, *dsp;         /* the slots received into recvbuf (owned) */
  int *a1, *a2, *a3, *a4; /* count and displacement arrays MPI reads while it runs (owned) */
  int op, root, gets;
  int nall, off; /* local reduction: contributions per rank; where this rank's result starts */
  int nslots;    /* slots in cnt and dsp: the ranks, or a neighbourhood's sources */
  unsigned char *nanm;
  double *w;
} pend;

static inline int is_real(MPI_Datatype t) { return t == AD_MPI_REAL; }

static inline double *dbuf(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static inline int *icopy(const int *a, int n) {
  int *b = malloc((size_t)(n ? n : 1) * sizeof *b);
  if (b) memcpy(b, a, (size_t)n * sizeof *b);
  return b;
}

static inline int extent(const int *cnt, const int *dsp, int n) {
  int e = 0;
  for (int j = 0; j < n; j++)
    if (cnt[j] && dsp[j] + cnt[j] > e) e = dsp[j] + cnt[j];
  return e;
}

static inline int total(const int *cnt, int n) {
  int s = 0;
  for (int j = 0; j < n; j++) s += cnt[j];
  return s;
}

static inline int fwd_fail(coll *x, int rc, const char *fn) { return ad__mpi_forward_error(x->seen, rc, fn); }

/* Sizes of a communicator's count arrays: p for the ranks, or a
 * neighbourhood's sources (in) and destinations (out). */
static inline int comm_size(MPI_Comm comm) {
  int p = 0;
  MPI_Comm_size(comm, &p);
  return p;
}

/* a * b elements, as many as an int holds at most: a buffer of p blocks is
 * looked at through an int count. */
static inline int blocks_of(int a, int b) {
  long long n = (long long)a * b;
  return n > INT_MAX ? INT_MAX : (int)n;
}

/* 1 if this rank is a rooted collective's root (MPI_ROOT on an
 * intercommunicator). */
static inline int is_root(int root, MPI_Comm comm) {
  int rank = -1;
  if (root == MPI_ROOT) return 1;
  MPI_Comm_rank(comm, &rank);
  return rank == root;
}

static inline int op_ok(MPI_Op op) { return op == MPI_SUM || op == MPI_PROD || op == MPI_MIN || op == MPI_MAX; }

static inline int op_code(MPI_Op op) { return op == MPI_SUM ? 0 : op == MPI_PROD ? 1 : op == MPI_MIN ? 2 : 3; }

/* What a nonblocking wrapper started when a persistent collective's start
 * called it with ad__coll_capture.req: the MPI request and the pending state, for
 * the persistent request's slot. */
typedef struct ad__coll_captured {
  ad_mpi_request req;
  MPI_Request mq;
  void *ctx;
  ad_tape *t;
  ad__mrec *r;
  int active;
} ad__coll_captured;
extern ad__coll_captured ad__coll_capture;

/* The completion actions of a pending collective (see pend_go). */
extern const ad__req_ops ad__coll_pend_ops;

int ad__coll_begin(coll *x, MPI_Comm comm);
int ad__coll_bad_op(coll *x, const char *fn);
int ad__coll_weights(const coll *x, MPI_Op op, const double *v, int n, double **w, unsigned char **nanm);
pend *ad__coll_pend_new(const coll *x, int kind, const char *fn);
void ad__coll_pend_free(pend *q);
int ad__coll_pend_go(pend *q, int rc, MPI_Request mq, ad_mpi_request *req);
int ad__coll_passive_req(int rc, MPI_Request *mq, ad_mpi_request *req);
uint64_t ad__coll_payload(int kind, int adjoint, int me, int p, int root, int64_t nown, const int *cnt,
                          const int *cnt2);
int ad__coll_send_guard(const char *fn, MPI_Comm comm, const void *buf, int count, int n, const int *cnt,
                        const int *dsp, MPI_Datatype type);
int ad__coll_slot_handles(ad_tape *t, const ad_real *b, const int *cnt, const int *dsp, int n, ad_index *h,
                          const char *fn);
int ad__coll_both_real(coll *x, MPI_Datatype a, MPI_Datatype b, int a_used, int b_used, const char *fn);
int ad__coll_all_check(const void *sendbuf, MPI_Datatype sendtype, MPI_Datatype recvtype, const char *fn, int *active);
int ad__coll_derived_in_use(int ns, const int *scnt, const MPI_Datatype *stypes, int nr, const int *rcnt,
                            const MPI_Datatype *rtypes);
int ad__coll_degrees(MPI_Comm comm, int *indeg, int *outdeg);
/* The checks of an alltoallw, over a neighbourhood or not: ns send and nr
 * receive slots, their byte displacements as int (dsp) or MPI_Aint (adsp).
 * Every datatype in use is refused if it cannot be used; *nreal counts the
 * AD_MPI_REAL ones. None: the send buffer is guarded (on every rank, in
 * check mode) for MPI's own call. Some: all must be, with displacements in
 * whole elements, or the call is refused; *el (malloc'd) holds the
 * displacements in elements, the ns send slots' and then the nr receive
 * slots'. MPI_SUCCESS or the error. */
int ad__coll_w_check(const char *fn, MPI_Comm comm, const void *sendbuf, int ns, const int *scnt, const int *sdsp,
                     const MPI_Aint *sadsp, const MPI_Datatype *stypes, int nr, const int *rcnt, const int *rdsp,
                     const MPI_Aint *radsp, const MPI_Datatype *rtypes, int *nreal, int **el);

/* MPI's own collective on passive data: the blocking call, or with req the
 * nonblocking one, whose MPI request req takes over (ad__coll_passive_req);
 * the arguments are the blocking call's. */
#define AD__COLL_PASSIVE(req, blocking, nonblocking, ...)                                                              \
  ((req) ? ad__coll_passive_req(nonblocking(__VA_ARGS__, &(req)->mpi), &(req)->mpi, (req)) : blocking(__VA_ARGS__))

/* The blocking and the nonblocking wrapper of a collective, one function
 * (front) taking the request (NULL: blocking) and the wrapper's name after
 * its other arguments: params is the blocking wrapper's parameter list, args
 * what it hands to front, each in parentheses. */
#define AD__COLL_FORMS(name, front, params, args)                                                                      \
  int ad_mpi_##name(AD__COLL_LIST params) { return front(AD__COLL_LIST args, NULL, "ad_mpi_" #name); }                 \
  int ad_mpi_i##name(AD__COLL_LIST params, ad_mpi_request *request) {                                                  \
    return front(AD__COLL_LIST args, request, "ad_mpi_i" #name);                                                       \
  }
#define AD__COLL_LIST(...) __VA_ARGS__

#endif
