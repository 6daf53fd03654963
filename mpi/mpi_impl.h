/* SPDX-License-Identifier: BSD-3-Clause */
/* Private definitions of the MPI layer. */
#ifndef ARIADNE_MPI_IMPL_H
#define ARIADNE_MPI_IMPL_H

#include <ariadne_mpi.h>
#include <limits.h>
#include <stdarg.h>

#include "../lib/tape_impl.h"

/* An attribute's delete callback (of a communicator or a datatype, handle_t)
 * that frees the attribute's value with release. MPI's signature names the
 * handle, key and extra state, which the layer's attributes do not need. */
#define AD__MPI_ATTR_DELETE(name, handle_t, release)                                                                   \
  static int name(handle_t handle, int keyval, void *attr, void *extra) {                                              \
    (void)handle;                                                                                                      \
    (void)keyval;                                                                                                      \
    (void)extra;                                                                                                       \
    release(attr);                                                                                                     \
    return MPI_SUCCESS;                                                                                                \
  }

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

/* (peer, tag) -> count, open addressing. */
typedef struct ad__kmap {
  uint64_t *keys; /* key + 1; 0 = empty */
  int *vals;
  size_t cap, n;
} ad__kmap;
/* The value of key (0 if new); NULL if out of memory. */
int *ad__kmap_slot(ad__kmap *m, uint64_t key);
/* The value of key; NULL if it has none. */
const int *ad__kmap_find(const ad__kmap *m, uint64_t key);
void ad__kmap_free(ad__kmap *m);
/* The key of (peer, tag). */
uint64_t ad__kmap_key(int peer, int tag);

/* An active receive in posting order, kept until everything posted before
 * it has completed (see ad__recv_complete). */
typedef struct ad__rentry {
  int src, tag; /* posted pattern, wildcards allowed */
  int done;     /* completed, with the actual source and tag below */
  int asrc, atag;
  int slot; /* the nonblocking request's slot (request.c), -1 for a blocking receive */
  unsigned gen;
} ad__rentry;

typedef struct ad__comm {
  MPI_Comm user, priv; /* priv: private duplicate for adjoint and tangent traffic */
  MPI_Comm rev;        /* priv with the ranks reversed, for suffix scans; made on first use */
  MPI_Comm tposed;     /* a distributed graph's priv with its edges reversed; made on first use */
  MPI_Request idup;    /* pending MPI_Comm_idup, MPI_REQUEST_NULL once done */
  int rank, size;
  int freed;        /* the user freed the communicator */
  int settling;     /* a wait for the duplicate is under way (see comm.c) */
  int tainted;      /* a sweep gave up with operations on priv still pending */
  ad__kmap sendk;   /* active sends per (dest, tag) */
  ad__kmap prunedk; /* completed receives per (source, tag) dropped from rq */
  ad__kmap tapes;   /* recordings that communicated with a peer, per (peer, 0); collectively: (-1, 0) */
  ad__rentry *rq;   /* receives posted and not yet pruned */
  size_t rq_n, rq_cap;
  uint64_t rq_base; /* posting number of rq[0] */
  uint64_t rq_next; /* next posting number */
  /* How many times priv was replaced by a fresh duplicate after a sweep
   * gave up (see ad__mpi_comm_renew); the retired ones, freed with the
   * rest, since MPI may still complete what was left on them. */
  int gen;
  MPI_Comm *retired;
  int nretired;
  struct ad__comm *next;
} ad__comm;

/* Layer set-up on first use; returns MPI_SUCCESS or an MPI error code. */
int ad__mpi_setup(void);
/* A sweep timed out, or left a send or collective pending, since the last
 * taint (handshake.c): MPI may still pair what it left with a later
 * operation. */
extern int ad__mpi_left_pending;
/* The tag of the sweep handshake on the private communicators, the one
 * below it the agreement's, and the sweep messages' tags below those: 0 ..
 * ad__mpi_sweep_tags - 1 (comm.c). */
extern int ad__mpi_handshake_tag, ad__mpi_sweep_tags;
/* Info for a user communicator, created (and its duplicate started) on
 * first use. NULL on failure (message in *err). */
ad__comm *ad__mpi_comm(MPI_Comm comm, int *err);
/* The private communicator with the ranks in reverse order (collective
 * over c's ranks: call it where they all are, in a sweep). */
int ad__mpi_comm_reversed(ad__comm *c, MPI_Comm *rev);
/* The communicator whose neighbourhood collectives run a topology's edges
 * backwards: priv itself for Cartesian and graph topologies (symmetric, and
 * the k-th neighbour of one side is matched with the k-th of the other), a
 * distributed graph with sources and destinations swapped otherwise
 * (collective over c's ranks, as above). */
int ad__mpi_comm_transposed(ad__comm *c, MPI_Comm *out);
/* Collective over c's ranks, at the start of every collective wrapper on
 * active data (where all of them are, and record it if one does): on the
 * first collective over c of seen's recording, the ranks agree whether an
 * earlier sweep over c gave up on any of them, and if so replace the
 * private duplicate by a fresh one, so that this recording's sweeps meet
 * no leftovers; recordings made before are refused. MPI_SUCCESS or MPI's
 * error. */
int ad__mpi_comm_renew(ad_tape *seen, ad__comm *c);
/* A collective wrapper on active data over comm enters: its communicator's
 * record (*c), the recording tape (*t, NULL if none) and the current one
 * (*seen), renewed (above) and noted (ad__mpi_note_coll). MPI_SUCCESS or
 * MPI's error. */
int ad__mpi_coll_enter(MPI_Comm comm, ad__comm **c, ad_tape **t, ad_tape **seen);
/* Wait for the private duplicate (used before sweep traffic); a failure is
 * left on t (if not NULL) as a pending error with its message. */
int ad__mpi_comm_ready(ad_tape *t, ad__comm *c);
/* The same for a forward collective, which every rank of c has reached (so
 * every rank has started the duplicate): wait for it as the collective
 * itself would wait, without a timeout. Open MPI 4.1 mixes up nonblocking
 * collectives started on a communicator while its MPI_Comm_idup runs (a
 * truncation error or a hang, intermittently). MPI_SUCCESS or MPI's error. */
int ad__mpi_comm_settled(ad__comm *c);

/* Message identity: the k-th active message from one rank to another with
 * the same tag on the same communicator is the k-th received there (MPI's
 * non-overtaking rule), so both sides know k without sending it. The adjoint
 * and tangent messages carry a number made of (tag, k) in their tag on the
 * private communicator (sweeptag.c), so they match exactly whatever order
 * the sweeps post them in. */
int ad__send_seq(ad__comm *c, int dest, int tag);
uint64_t ad__recv_post(ad__comm *c, int src, int tag);
int ad__recv_complete(ad__comm *c, uint64_t post, int asrc, int atag);
/* The request of a nonblocking receive posted as `post`, kept in request.c's
 * slot (slot, gen): lets ad__recv_complete read where an earlier wildcard
 * receive's message came from (ad__req_mpi: the slot's MPI request, or
 * MPI_REQUEST_NULL once it is gone). */
void ad__recv_attach(ad__comm *c, uint64_t post, int slot, unsigned gen);
MPI_Request ad__req_mpi(int slot, unsigned gen);
/* The tag on the private communicator of the sweep message for the message
 * of `tag` and sequence number k that this rank sent to (was_recv 0) or
 * received from (1) peer, as recorded on t: the message's number among
 * those t exchanged with peer in that direction (see ad__chans). -1, with a
 * pending error on t, if there is none. */
int ad__sweep_tag(ad_tape *t, ad__comm *c, int peer, int tag, int k, int was_recv);

/* The messages a tape exchanged with one partner in one direction, per tag
 * (sweeptag.c): the range of sequence numbers noted in each tag's stream,
 * and from it a number for each message that the partner gives it too. */
typedef struct ad__chan {
  int tag;
  int kmin, kmax; /* sequence numbers noted; -1: none yet */
  int64_t base;   /* the number of the stream's message kmin */
} ad__chan;
typedef struct ad__chans {
  ad__chan *v; /* in the order the tags were first noted */
  int n, cap;
  ad__kmap at;   /* tag + 1 -> place in v + 1 */
  int stale;     /* noted since the last ad__chans_number */
  int64_t total; /* numbers given out by ad__chans_number */
} ad__chans;
/* Note a message of `tag` and sequence number k (-1: unknown). AD_OK or
 * AD_ERR_NOMEM. */
int ad__chans_note(ad__chans *s, int tag, int k);
/* Number the messages noted (s->total of them): by tag, then by sequence
 * number. AD_OK or AD_ERR_NOMEM. */
int ad__chans_number(ad__chans *s);
/* The number of the message (tag, k); -1 if it was not noted or s is stale. */
int64_t ad__chans_place(const ad__chans *s, int tag, int k);
void ad__chans_free(ad__chans *s);

/* ------------------------------------------------------------------------ */
/* Tapes                                                                     */
/* ------------------------------------------------------------------------ */

/* The tape a wrapper records on: this thread's current tape if it is
 * recording with no error; NULL otherwise. `*seen` is set to the current
 * tape even if it is in error, so that its sweep can tell the peers. */
ad_tape *ad__mpi_tape(ad_tape **seen);
/* The collective records of a tape on one communicator are numbered in the
 * order they started. MPI wants nonblocking collectives started in one
 * order on all ranks of a communicator, but a reverse sweep reaches the
 * completion records (where the adjoints of nonblocking collectives start)
 * in each rank's own order: it starts them in descending number instead
 * (coll.c). */
typedef struct ad__corder {
  int n, cap;              /* records numbered so far */
  unsigned char *started;  /* reverse sweep: adjoint started, per number */
  struct ad__mrec **ready; /* reverse sweep: completion reached, waiting for its turn */
  int nready, capready;
  int inflight; /* a sweep's nonblocking collectives started and not finished */
} ad__corder;
/* The state of (t, c), NULL if t has no collective on c. */
ad__corder *ad__coll_order(ad_tape *t, ad__comm *c);
/* The next number for a collective record on (t, c); -1 on failure (a
 * sticky error on t). Call after ad__mpi_note_coll. */
int ad__coll_number(ad_tape *t, ad__comm *c);
/* Note that tape t communicated on c collectively, or with a peer. */
void ad__mpi_note_coll(ad_tape *t, ad__comm *c);
/* ... a message of `count` elements (-1: unknown), sequence number k (-1:
 * unknown) with `tag` to (recv 0) or
 * from (recv 1) peer; the sweep handshake compares the counts and a
 * signature of tags and lengths with the partner's, so that a message one
 * side recorded and the other did not is an error, not a shifted pairing. */
void ad__mpi_note_peer(ad_tape *t, ad__comm *c, int peer, int recv, int tag, int count, int k);

/* Pack values of an ad_real buffer; unpack received values into new handles
 * (passive if t is NULL). Handles of sent elements: 0 for passive ones; a
 * stale handle sets the tape's error. */
void ad__pack(const ad_real *x, int n, double *v);
/* A regular collective (v 0: n elements per rank of comm, packed in rank
 * order) as its v-form: *cnt and *dsp point into *block, which the caller
 * frees. A v-form (v 1) keeps its own (*block NULL). MPI_SUCCESS or
 * MPI_ERR_NO_MEM. */
int ad__mpi_as_v(int v, MPI_Comm comm, int n, const int **cnt, const int **dsp, int **block);
void ad__unpack(ad_tape *t, ad_real *x, int n, const double *v, ad_index *out);
int ad__handles(ad_tape *t, const ad_real *x, int n, ad_index *in, const char *op);

/* Adjoint and tangent vector helpers (handle 0 is passive). */
void ad__adj_take(ad_tape *t, const ad_index *h, int n, double *buf);
void ad__adj_add(ad_tape *t, const ad_index *h, int n, const double *buf, const double *w);
void ad__tan_get(ad_tape *t, const ad_index *h, int n, double *buf);
void ad__tan_set(ad_tape *t, const ad_index *h, int n, const double *buf);

/* Wait for a request with the sweep timeout; on failure the tape gets a
 * pending error naming `what`. */
int ad__mpi_wait(ad_tape *t, MPI_Request *r, MPI_Status *st, const char *what);
/* The sweep timeout in seconds (ARIADNE_MPI_TIMEOUT, ad_mpi_set_timeout). */
double ad__mpi_timeout(void);
/* An operation that a failed wait left pending. A receive (is_recv) is
 * cancelled and completed: returns 1, its buffer may be freed. Anything else
 * (a send, a nonblocking collective) cannot be taken back: returns 0, and its
 * buffers must stay allocated, since MPI may still use them: the caller hands
 * them to ad__mpi_keep, on a path that has already failed. 1 for a null
 * request. */
int ad__mpi_abandon(MPI_Request *r, int is_recv);
/* Keep a buffer that an abandoned operation may still use (see above). */
void ad__mpi_keep(void *p);
/* A nonblocking send of a sweep, completed at the end of the sweep. The
 * buffer is freed then. */
int ad__mpi_lazy(ad_tape *t, MPI_Request r, double *buf);
/* Turn an MPI error code into a pending tape error; returns AD_ERR_MPI. */
int ad__mpi_fail(ad_tape *t, int mpirc, const char *what);
/* Record an MPI error of a forward wrapper on the tape (sticky) and return it. */
int ad__mpi_forward_error(ad_tape *t, int mpirc, const char *fn);
/* Bad input of a wrapper: a sticky error with the message on the tape seen
 * recording (or the thread's last error if none), and mpicode for the
 * caller. */
int ad__mpi_refuse(int mpicode, const char *fmt, ...);

/* MPI_ERR_TYPE, with a sticky error on the recording tape naming fn, if one
 * of the n datatypes that follow is built from AD_MPI_REAL: for the calls
 * that do not take derived types of active values (the others dispatch to
 * types.c first); MPI_SUCCESS otherwise. */
int ad__types_refuse(const char *fn, int n, ...);

/* MPI_ERR_TYPE, with a sticky error on the recording tape naming fn and
 * `what` ("buffer", "send buffer"), if buf, given to fn under a passive
 * datatype such as MPI_DOUBLE, holds ad_real values with handles live on
 * the recording tape (guard.c; all of it in check mode, a few elements
 * otherwise); MPI_SUCCESS otherwise. For the buffers MPI reads. */
int ad__mpi_guard(const char *fn, const char *what, const void *buf, int count, MPI_Datatype type);

/* ad__mpi_guard over the blocks a v- or w-collective sends: block j holds
 * counts[j] elements of types[j] (or of type when types is NULL) at
 * displs[j] elements of that type (bytes if bytes is set), or at adispls[j]
 * bytes, or at the start of buf when both are NULL. Outside check mode only
 * the first block in use is looked at. */
int ad__mpi_guard_blocks(const char *fn, const char *what, const void *buf, int n, const int *counts, const int *displs,
                         int bytes, const MPI_Aint *adispls, const MPI_Datatype *types, MPI_Datatype type);

/* A collective's verdict on its send data: rc is this rank's (from the
 * guards above). In check mode the ranks of comm agree on it before the
 * collective, so that every rank refuses with MPI_ERR_TYPE when one does
 * (the others with a tape error saying so) and none waits in a collective
 * that a refusing rank never enters; outside check mode rc is returned
 * as it is. Collective over comm in check mode: every rank that takes the
 * passive path of a collective calls it. */
int ad__mpi_guard_agree(const char *fn, MPI_Comm comm, int rc);

/* Derived datatypes of active values: their typemaps (types.c, a service).
 * ad__dtype_any: 1 if one of the n datatypes that follow is built from
 * AD_MPI_REAL (and is not AD_MPI_REAL itself); the wrapper then hands the
 * whole call to its ad__dt_* twin (through ad__handoff, below), which
 * gathers the elements into a contiguous ad_real buffer, calls the wrapper
 * on AD_MPI_REAL and scatters what arrived. The gather/scatter forms (v = 0)
 * take recvcount/sendcount, the v-forms the count and displacement arrays.
 * The ad__*_f types are those of the functions of ad__handoff. */
typedef struct ad__dtype ad__dtype;
const ad__dtype *ad__dtype_get(MPI_Datatype t);
int ad__dtype_any(int n, ...);
int ad__dtype_refuse(const char *fn, const char *fmt, ...);
typedef int (*ad__dt_send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int ad__dt_send_f(ad__dt_send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest,
                          int tag, MPI_Comm comm);
/* isend, issend, ibsend, irsend: the MPI call (for a type with passive
 * fields, sent as bytes) and the wrapper (on AD_MPI_REAL) of the mode. */
typedef int (*ad__dt_mpi_isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*ad__dt_isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, ad_mpi_request *);
typedef int ad__dt_isend_f(ad__dt_mpi_isend_fn mpifn, ad__dt_isend_fn fn, const char *name, const void *buf, int count,
                           MPI_Datatype type, int dest, int tag, MPI_Comm comm, ad_mpi_request *request);
typedef int ad__dt_recv_f(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                          MPI_Status *status);
typedef int ad__dt_irecv_f(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                           ad_mpi_request *request);
typedef int ad__dt_mrecv_f(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, MPI_Status *status);
typedef int ad__dt_imrecv_f(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, ad_mpi_request *request);
/* The probed message of a matched receive on a derived type: 1 with its
 * communicator, its place in the receive order and MPI's message, the
 * message taken (*message is null after); 0 for MPI_MESSAGE_NO_PROC; an MPI
 * error code, negated, after refusing a stale or null message. */
int ad__msg_take(ad_mpi_message *message, const char *fn, ad__comm **c, uint64_t *post, MPI_Message *m);
typedef int ad__dt_sendrecv_f(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                              void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                              MPI_Comm comm, MPI_Status *status);
typedef int ad__dt_sendrecv_replace_f(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                                      int recvtag, MPI_Comm comm, MPI_Status *status);
typedef int ad__dt_bcast_f(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm);
typedef int ad__dt_ibcast_f(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *req);
/* Reductions that go to types.c and reduce_ext.c: on a type built from
 * AD_MPI_REAL, or with a user-defined operation. kind: 0 reduce, 1
 * allreduce, 2 scan, 3 exscan, 4 reduce_scatter_block (count = recvcount),
 * 5 reduce_scatter (recvcounts); nonblocking if req. */
typedef int ad__dt_reduce_f(int kind, const void *sendbuf, void *recvbuf, int count, const int *recvcounts,
                            MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req);
/* Gather, or allgather with root AD__ROOT_ALL (no rank's number). */
#define AD__ROOT_ALL INT_MIN
typedef int ad__dt_gatherv_f(int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[], int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm, ad_mpi_request *req);
typedef int ad__dt_scatterv_f(int v, const void *sendbuf, const int sendcounts[], const int displs[], int sendcount,
                              MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                              MPI_Comm comm, ad_mpi_request *req);
typedef int ad__dt_alltoallv_f(int v, const void *sendbuf, const int sendcounts[], const int sdispls[], int sendcount,
                               MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req);

/* Alltoallw (neighbor 0) or a neighbourhood alltoallw (1) with a datatype
 * built from AD_MPI_REAL in use: ns send and nr receive slots, each with its
 * count, byte displacement and datatype (AD_MPI_REAL or built from it);
 * runs the AD_MPI_REAL alltoallv on the gathered elements. The other
 * neighbourhood collectives come here with their slots spelled out and
 * one_type 1: one datatype per side, so a struct with passive fields can
 * move them (every rank has them); the w-forms refuse such a struct. */
typedef int ad__dt_alltoallw_f(int neighbor, int one_type, const char *fn, const void *sendbuf, const int *scnt,
                               const MPI_Aint *sdsp, const MPI_Datatype *stypes, int ns, void *recvbuf, const int *rcnt,
                               const MPI_Aint *rdsp, const MPI_Datatype *rtypes, int nr, MPI_Comm comm,
                               ad_mpi_request *req);

/* Reductions beyond the four predefined operations (reduce_ext.c):
 * 1 if op was made by ad_mpi_op_create. */
typedef int ad__op_user_f(MPI_Op op);
/* A reduction gathered and applied locally: a user-defined operation on
 * AD_MPI_REAL or a type built from it, MINLOC/MAXLOC on AD_MPI_REAL_INT
 * (kinds as ad__dt_reduce). */
typedef int ad__user_reduce_f(int kind, const void *sendbuf, void *recvbuf, int count, const int *recvcounts,
                              MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req);
/* Typemap queries (types.c). For user operations on derived types: 0 if t
 * can be used (else an error code, with the tape's error naming fn); copy
 * the ad_real elements of `items` items of t; the memory extent of one
 * item. */
int ad__dtype_check(const char *fn, MPI_Datatype t);
void ad__dtype_copy(MPI_Datatype t, void *dst, const void *src, long long items);
MPI_Aint ad__dtype_extent(MPI_Datatype t);
/* The byte offsets of the ad_real elements of `count` items of t
 * (AD_MPI_REAL, or a type built on it without passive fields), in typemap
 * order, in *off (malloc'd): their number, or -1 after a refusal naming fn
 * (MPI_ERR_TYPE). For one-sided communication. */
long ad__dtype_offsets(const char *fn, MPI_Datatype t, int count, MPI_Aint **off);
/* How far the elements of the last item of t reach beyond its extent. */
MPI_Aint ad__dtype_tail(MPI_Datatype t);
typedef int ad__loc_reduce_f(int all, const void *sendbuf, void *recvbuf, int count, MPI_Op op, int root,
                             MPI_Comm comm);

/* The calls a wrapper hands over to another chapter, through this table
 * (kinds.c) so that the chapters do not call each other: a datatype built
 * from AD_MPI_REAL (ad__dtype_any) goes to the derived-type chapter
 * (types_p2p.c, types_coll.c: dt_*), a reduction with a user-defined
 * operation (op_user), or MINLOC/MAXLOC on AD_MPI_REAL_INT, to reduce_ext.c.
 * Each member is the function ad__<member> of the type ad__<member>_f
 * declared above. */
typedef struct ad__handoff_ops {
  ad__dt_send_f *dt_send;
  ad__dt_isend_f *dt_isend;
  ad__dt_recv_f *dt_recv;
  ad__dt_irecv_f *dt_irecv;
  ad__dt_mrecv_f *dt_mrecv;
  ad__dt_imrecv_f *dt_imrecv;
  ad__dt_sendrecv_f *dt_sendrecv;
  ad__dt_sendrecv_replace_f *dt_sendrecv_replace;
  ad__dt_bcast_f *dt_bcast;
  ad__dt_ibcast_f *dt_ibcast;
  ad__dt_reduce_f *dt_reduce;
  ad__dt_gatherv_f *dt_gatherv;
  ad__dt_scatterv_f *dt_scatterv;
  ad__dt_alltoallv_f *dt_alltoallv;
  ad__dt_alltoallw_f *dt_alltoallw;
  ad__op_user_f *op_user;
  ad__user_reduce_f *user_reduce;
  ad__loc_reduce_f *loc_reduce;
} ad__handoff_ops;
extern const ad__handoff_ops ad__handoff;
/* The functions of the table, declared for kinds.c, which fills it; nothing
 * else calls them from outside their chapter. */
ad__dt_send_f ad__dt_send;
ad__dt_isend_f ad__dt_isend;
ad__dt_recv_f ad__dt_recv;
ad__dt_irecv_f ad__dt_irecv;
ad__dt_mrecv_f ad__dt_mrecv;
ad__dt_imrecv_f ad__dt_imrecv;
ad__dt_sendrecv_f ad__dt_sendrecv;
ad__dt_sendrecv_replace_f ad__dt_sendrecv_replace;
ad__dt_bcast_f ad__dt_bcast;
ad__dt_ibcast_f ad__dt_ibcast;
ad__dt_reduce_f ad__dt_reduce;
ad__dt_gatherv_f ad__dt_gatherv;
ad__dt_scatterv_f ad__dt_scatterv;
ad__dt_alltoallv_f ad__dt_alltoallv;
ad__dt_alltoallw_f ad__dt_alltoallw;
ad__op_user_f ad__op_user;
ad__user_reduce_f ad__user_reduce;
ad__loc_reduce_f ad__loc_reduce;

extern ad_mpi_stats ad__mpi_counters;

/* A record's data: one layout for all kinds, unused fields zero. */
typedef struct ad__mrec {
  int kind;
  ad__comm *c;
  int peer, tag, k;    /* point to point: partner, actual tag, sequence */
  int rpeer, rtag, rk; /* the receive half of a sendrecv */
  int count;           /* elements */
  ad_index *in, *out;  /* handles: sent or contributed / received or created */
  int nin, nout;
  struct ad__mrec *link; /* nonblocking: start record <-> completion record */
  MPI_Request sreq;      /* a sweep's pending operation and its buffer */
  double *sbuf;
  int root, op, inplace;
  double *w;                    /* reduction weights (NULL: all ones) */
  int *cnt, *dsp, *cnt2, *dsp2; /* v-variants: counts and displacements */
  /* Collectives: the record's number on (tape, comm) (see ad__corder); a
   * nonblocking one (nb) has a completion record (AD__M_ICOLL_DONE, linked)
   * whose `seq` is the last number started before it completed; a sweep's
   * second buffer and an array MPI may read while its operation runs. */
  int seq, nb;
  double *sbuf2;
  int *keep;
  void *rma;                   /* one-sided epochs: their description (rma.c) */
  const struct ad__mkind *ops; /* the kind's entry (see ad__mkind) */
} ad__mrec;

enum {
  AD__M_SEND = 1,
  AD__M_RECV,
  AD__M_ISEND,
  AD__M_ISEND_DONE,
  AD__M_IRECV,
  AD__M_IRECV_DONE,
  AD__M_SENDRECV,
  AD__M_BARRIER,
  AD__M_BCAST,
  AD__M_REDUCE,
  AD__M_ALLREDUCE,
  AD__M_GATHERV,
  AD__M_SCATTERV,
  AD__M_ALLGATHERV,
  AD__M_ALLTOALLV,
  AD__M_RSB,
  AD__M_SCAN,
  AD__M_EXSCAN,
  AD__M_ICOLL_DONE, /* completion of a nonblocking collective */
  AD__M_NEIGHBOR,   /* neighbourhood alltoallv (allgather(v) as one with every send slot the same) */
  AD__M_CANCELLED   /* a start record whose request was cancelled: no action */
};

/* One-sided communication (rma.c): kinds from 80 up. */
enum {
  AD__M_RMA_FENCE = 80, /* a fence, with the epoch it closed */
  AD__M_RMA_OPEN,       /* the first access of an epoch on this tape */
  AD__M_RMA_PBEGIN,     /* a window created while recording */
  AD__M_RMA_PEND,       /* its free, when it was used in passive-target epochs */
  AD__M_RMA_BATCH,      /* an origin's passive-target accesses to one target, at their completion */
  AD__M_RMA_SYNC        /* a rank's synchronisation of its part of a window */
};

/* The actions of a chapter's record kinds: the reverse (adjoint) and
 * tangent (ad_forward) sweep actions; what to do when the record goes away
 * (ad_tape_reset_to, a reset, the tape's end) while a request it started may
 * be pending, so that the request no longer links to it (NULL: the chapter's
 * kinds start no request); what to free that the chapter hung on the record
 * (r->rma; NULL: nothing). Each chapter defines one (p2p.c, coll.c, rma.c);
 * types.c and reduce_ext.c record the kinds of the first two. */
typedef struct ad__mactions {
  int (*reverse)(ad_tape *t, ad__mrec *r);
  int (*tangent)(ad_tape *t, ad__mrec *r);
  void (*lost)(const ad__mrec *r);
  void (*free)(ad__mrec *r);
} ad__mactions;
extern const ad__mactions ad__p2p_actions, ad__coll_actions, ad__rma_actions;

/* A record kind's entry in the table of kinds (kinds.c). comm.c runs every
 * record's actions through its entry, as the tape runs its statement kinds,
 * and knows no kind or chapter by name: a new kind is a new entry. */
typedef struct ad__mkind {
  int kind; /* AD__M_*, for ad_tape_dump and the chapter's own switches */
  /* Numbered among the collectives of (tape, communicator) when pushed
   * (see ad__corder); a sweep operation it leaves pending cannot be
   * cancelled, so its buffers are kept and its communicator retired. */
  int coll;
  const ad__mactions *act;
} ad__mkind;

/* The entry of a kind (kinds.c; NULL if there is none). */
const ad__mkind *ad__mkind_of(int kind);
/* A new record of `kind` on t with room for nin/nout handles (NULL, and a
 * sticky error, on failure). */
ad__mrec *ad__mrec_push(ad_tape *t, int kind, ad__comm *c, int nin, int nout);
/* A record's kind changes (a cancelled receive's start). */
void ad__mrec_rekind(ad__mrec *r, int kind);
/* Messages on active data (comm.c). An active send of n values of buf to
 * dest: numbered, noted for the handshake, and its record of `kind` pushed
 * on t (if not NULL) with the handles of what was sent; NULL for
 * MPI_PROC_NULL. */
ad__mrec *ad__mpi_send_record(ad__comm *c, ad_tape *t, ad_tape *seen, int dest, int tag, const ad_real *buf, int n,
                              int kind, const char *fn);
/* An active receive of n values (post) completed with status st: its
 * sequence number noted, and its record of `kind` pushed on t (if not NULL)
 * with room for the handles of what arrived. */
ad__mrec *ad__mpi_recv_record(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st, int n,
                              int kind);
/* The same, and the values v that arrived delivered into buf (fresh handles
 * if recorded): the record, or NULL. */
ad__mrec *ad__mpi_recv_deliver(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st,
                               ad_real *buf, const double *v, int kind);
/* How many values a completed active receive got. */
int ad__mpi_received(const MPI_Status *st);
/* An active receive (post) failed with MPI's error rc: a truncated message
 * is counted in its stream and its sender noted, anything else took no
 * message. */
void ad__mpi_recv_failed(ad__comm *c, ad_tape *seen, uint64_t post, int rc, const MPI_Status *st);
/* A nonblocking operation's start and completion records point at each
 * other (nothing if either is NULL). */
void ad__mrec_link(ad__mrec *start, ad__mrec *done);

/* What a chapter does beyond its records, joined to comm.c's list the first
 * time the chapter holds state (ad__mpi_chapter_join; joining twice is a
 * no-op): a check at every sweep's start (1, with a sticky error on t, if t
 * cannot be swept), a step of ad_mpi_barrier before MPI's barrier (after 0)
 * and after it (1) returning MPI_SUCCESS or MPI's error, and a clean-up at
 * MPI_Finalize. Any may be NULL. */
typedef struct ad__mpi_chapter {
  int (*sweep_check)(ad_tape *t);
  int (*barrier)(int after);
  void (*finalize)(void);
  struct ad__mpi_chapter *next; /* comm.c's */
  int joined;
} ad__mpi_chapter;
void ad__mpi_chapter_join(ad__mpi_chapter *ch);
/* The joined chapters' barrier steps: the first error, or MPI_SUCCESS. */
int ad__mpi_chapters_barrier(int after);
/* The joined chapters' sweep checks: 1 as soon as one says t cannot be
 * swept (handshake.c, at a sweep's start). */
int ad__mpi_chapters_sweep_check(ad_tape *t);
/* A record is going away with a request of request.c's slots possibly
 * pending that it started (the `lost` action of the kinds that start
 * requests). */
void ad__req_forget(const ad__mrec *r);
/* Requests of other kinds than point to point (nonblocking collectives)
 * live in request.c's slots too, so that every completion call takes them. At
 * completion, `complete` delivers the results and pushes the completion
 * record on t (NULL if the start was not recorded there; `seen` is the
 * current tape, to report errors on); `failed` is called instead when MPI
 * freed the request after an error, or at MPI_Finalize with it pending: its
 * buffers may still be MPI's and are handed to ad__mpi_keep. */
typedef struct ad__req_ops {
  void (*complete)(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st);
  void (*failed)(void *ctx, int rc);
} ad__req_ops;
int ad__req_new(ad_mpi_request *request, MPI_Request mpi, ad_tape *t, ad__mrec *start, const ad__req_ops *ops,
                void *ctx);
/* A persistent request whose every start runs `start`: it starts the
 * operation and gives its MPI request, its ops and pending state (NULL ops
 * for passive data), the recording tape and the start record (NULL if not
 * recorded). `release` frees pctx when the request is freed. */
typedef struct ad__preq_ops {
  int (*start)(void *pctx, MPI_Request *mpi, const ad__req_ops **ops, void **ctx, ad_tape **t, ad__mrec **start);
  void (*release)(void *pctx);
} ad__preq_ops;
int ad__preq_new(ad_mpi_request *request, const ad__preq_ops *pops, void *pctx);
/* Run fn(ctx, 1) once the request completes (after its own completion
 * action), or fn(ctx, 0) if it fails or is still pending at MPI_Finalize
 * (its buffers may still be MPI's); at once if nothing is pending. Used for
 * derived types and user operations in nonblocking collectives (types.c,
 * reduce_ext.c). */
int ad__req_then(const ad_mpi_request *request, void (*fn)(void *ctx, int ok), void *ctx);
/* The slot of the request a persistent collective's start hands to the
 * nonblocking twin it runs (coll.c): actions given to ad__req_then on it
 * run when the persistent request completes. */
#define AD__SLOT_STARTING (-2)
/* The record's line for ad_tape_dump (describe.c). */
int ad__mrec_describe(const void *data, char *buf, size_t size);

#endif
