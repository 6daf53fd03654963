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
#include <limits.h>
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
  if ((err = ad__mpi_comm_settled(x->c)) != MPI_SUCCESS) return err;
  x->t = ad__mpi_tape(&x->seen);
  if ((err = ad__mpi_comm_renew(x->seen, x->c)) != MPI_SUCCESS) return err;
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
  if (r->kind == AD__M_NEIGHBOR) return (uint64_t)(adjoint ? total(r->cnt2, r->rpeer) : r->count) * sizeof(double);
  if (r->kind == AD__M_RSB && r->cnt) return (uint64_t)(r->nin - r->count) * sizeof(double);
  if (r->kind == AD__M_RSB || r->kind == AD__M_SCATTERV) nown = r->count;
  return payload(r->kind, adjoint, me, p, r->root, nown, r->cnt, r->cnt2);
}

static int fwd_fail(coll *x, int rc, const char *fn) { return ad__mpi_forward_error(x->seen, rc, fn); }

/* ------------------------------------------------------------------------ */
/* Nonblocking calls                                                         */
/* ------------------------------------------------------------------------ */

/* Every collective wrapper prepares the packed buffers and its record, runs
 * the MPI call, and delivers what it received. A nonblocking one (req not
 * NULL) starts the MPI call and leaves the delivery to the completion call
 * (wait, test, ...), which also pushes the completion record: the pending
 * state below lives in the request's slot until then. */
/* What a nonblocking wrapper started when a persistent collective's start
 * called it with capture.req: the MPI request and the pending state, for
 * the persistent request's slot. */
static struct {
  ad_mpi_request req;
  MPI_Request mq;
  void *ctx;
  ad_tape *t;
  ad__mrec *r;
  int active;
} capture;

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

static pend *pend_new(const coll *x, int kind, const char *fn) {
  pend *q = calloc(1, sizeof *q);
  if (q) {
    q->kind = kind;
    q->x = *x;
    q->fn = fn;
  }
  return q;
}

static void pend_free(pend *q) {
  if (!q) return;
  free(q->sv);
  free(q->rv);
  free(q->all);
  free(q->cnt);
  free(q->dsp);
  free(q->a1);
  free(q->a2);
  free(q->a3);
  free(q->a4);
  free(q->nanm);
  free(q->w);
  free(q);
}

/* The result of op over every rank's contributions (all: p blocks of n
 * values) and this rank's partials, by the rules weights() gives the
 * blocking calls: products formed by multiplication only, in rank order;
 * one owner of each MIN/MAX, the lowest rank with a NaN, else the lowest
 * rank with the extremum. */
static void local_reduce(int op, const double *all, int p, int me, int n, double *res, double *w) {
  for (int i = 0; i < n; i++) {
    if (op == 1) { /* PROD */
      double pr = 1.0, po = 1.0;
      for (int j = 0; j < p; j++) {
        double v = all[(size_t)j * (size_t)n + (size_t)i];
        pr *= v;
        if (j != me) po *= v;
      }
      res[i] = pr;
      w[i] = po;
      continue;
    }
    int owner = -1;
    for (int j = 0; j < p && owner < 0; j++)
      if (isnan(all[(size_t)j * (size_t)n + (size_t)i])) owner = j;
    if (owner < 0) {
      owner = 0;
      for (int j = 1; j < p; j++) {
        double v = all[(size_t)j * (size_t)n + (size_t)i], b = all[(size_t)owner * (size_t)n + (size_t)i];
        if (op == 2 ? v < b : v > b) owner = j;
      }
    }
    res[i] = all[(size_t)owner * (size_t)n + (size_t)i];
    w[i] = owner == me ? 1.0 : 0.0;
  }
}

/* Deliver what a collective received (t: the recording tape, or NULL). */
static void pend_deliver(pend *q, ad_tape *t) {
  ad__mrec *r = t ? q->r : NULL;
  int p = q->x.c->size, me = q->x.c->rank;
  if (q->all) { /* a nonblocking MIN/MAX/PROD: reduce here */
    double *res = dbuf((size_t)q->nall), *w = dbuf((size_t)q->nall);
    if (!res || !w) {
      free(res);
      free(w);
      if (q->x.seen) ad__fail(q->x.seen, AD_ERR_NOMEM, "%s: no memory", q->fn);
      return;
    }
    local_reduce(q->op, q->all, p, me, q->nall, res, w);
    memcpy(q->rv, res + q->off, (size_t)q->n * sizeof *res);
    free(res);
    if (r) {
      r->w = w;
      w = NULL;
    }
    free(w);
  }
  if (q->kind == AD__M_BCAST && q->gets && r) {
    if (!(r->out = calloc((size_t)(q->n ? q->n : 1), sizeof *r->out))) {
      ad__fail(t, AD_ERR_NOMEM, "%s: no memory", q->fn);
      r = NULL;
      t = NULL;
    } else {
      r->nout = q->n;
    }
  }
  if (q->nanm)
    for (int i = 0; i < q->n; i++)
      if (q->nanm[q->off + i]) q->rv[i] = NAN;
  if (q->cnt)
    slot_unpack(t, q->recvbuf, q->cnt, q->dsp, q->kind == AD__M_NEIGHBOR ? q->nslots : p, q->rv, r ? r->out : NULL);
  else if (q->gets)
    ad__unpack(t, q->recvbuf, q->n, q->rv, r ? r->out : NULL);
}

static void pend_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  pend *q = ctx;
  (void)st;
  (void)seen;
  pend_deliver(q, t && start == q->r ? t : NULL);
  if (t && start && start == q->r) {
    ad__mrec *d = ad__mrec_push(t, ad__coll_kind(AD__M_ICOLL_DONE), q->x.c, 0, 0);
    ad__corder *o = ad__coll_order(t, q->x.c);
    if (d && o) {
      d->seq = o->n - 1; /* the last collective started before this completion */
      d->link = start;
      start->link = d;
    }
  }
  pend_free(q);
}

static void pend_failed(void *ctx, int rc) {
  pend *q = ctx;
  (void)rc;
  /* MPI may still read or write the buffers. */
  ad__mpi_keep(q->sv);
  ad__mpi_keep(q->rv);
  ad__mpi_keep(q->all);
  ad__mpi_keep(q->a1);
  ad__mpi_keep(q->a2);
  ad__mpi_keep(q->a3);
  ad__mpi_keep(q->a4);
  q->sv = q->rv = q->all = NULL;
  q->a1 = q->a2 = q->a3 = q->a4 = NULL;
  pend_free(q);
}

static const ad__req_ops pend_ops = {pend_complete, pend_failed};

/* After the MPI call (started, if req): deliver now, or hand q to the
 * request. Takes q in every case. */
static int pend_go(pend *q, int rc, MPI_Request mq, ad_mpi_request *req) {
  coll x = q->x;
  if (rc != MPI_SUCCESS) {
    const char *fn = q->fn;
    if (mq != MPI_REQUEST_NULL)
      pend_failed(q, rc);
    else
      pend_free(q);
    return fwd_fail(&x, rc, fn);
  }
  if (!req) {
    pend_deliver(q, q->r ? x.t : NULL);
    pend_free(q);
    return MPI_SUCCESS;
  }
  if (q->r) q->r->nb = 1;
  if (req == &capture.req) { /* the start of a persistent collective takes it */
    capture.mq = mq;
    capture.ctx = q;
    capture.t = x.t;
    capture.r = q->r;
    capture.active = 1;
    return MPI_SUCCESS;
  }
  rc = ad__req_new(req, mq, x.t, q->r, &pend_ops, q);
  if (rc != MPI_SUCCESS) {
    /* Cannot track it: wait here (it was started) and deliver. */
    MPI_Wait(&mq, MPI_STATUS_IGNORE);
    if (q->r) q->r->nb = 0;
    pend_deliver(q, q->r ? x.t : NULL);
    pend_free(q);
    req->mpi = MPI_REQUEST_NULL;
    req->slot = -1;
  }
  return MPI_SUCCESS;
}

/* A nonblocking call on passive data: MPI's own request in a slot. */
static int passive_req(int rc, MPI_Request *mq, ad_mpi_request *req) {
  if (rc != MPI_SUCCESS) return rc;
  if (req == &capture.req) {
    capture.mq = *mq;
    capture.active = 0;
    return MPI_SUCCESS;
  }
  rc = ad__req_new(req, *mq, NULL, NULL, NULL, NULL);
  if (rc != MPI_SUCCESS) MPI_Wait(mq, MPI_STATUS_IGNORE);
  return rc;
}

/* The passive path of a collective: ad_real data in what this rank sends
 * (count elements at buf, or n blocks cnt/dsp in elements of type) is
 * refused, every rank agreeing on the verdict in check mode (guard.c). A
 * rank that sends nothing passes buf NULL and still takes part. */
static int send_guard(const char *fn, MPI_Comm comm, const void *buf, int count, int n, const int *cnt, const int *dsp,
                      MPI_Datatype type) {
  int rc = cnt ? ad__mpi_guard_blocks(fn, "send buffer", buf, n, cnt, dsp, 0, NULL, NULL, type)
               : ad__mpi_guard(fn, "send buffer", buf, count, type);
  return ad__mpi_guard_agree(fn, comm, rc);
}

/* Sizes of a communicator's count arrays: p for the ranks, or a
 * neighbourhood's sources (in) and destinations (out). */
static int comm_size(MPI_Comm comm) {
  int p = 0;
  MPI_Comm_size(comm, &p);
  return p;
}

/* a * b elements, as many as an int holds at most: a buffer of p blocks is
 * looked at through an int count. */
static int blocks_of(int a, int b) {
  long long n = (long long)a * b;
  return n > INT_MAX ? INT_MAX : (int)n;
}

/* 1 if this rank is a rooted collective's root (MPI_ROOT on an
 * intercommunicator). */
static int is_root(int root, MPI_Comm comm) {
  int rank = -1;
  if (root == MPI_ROOT) return 1;
  MPI_Comm_rank(comm, &rank);
  return rank == root;
}

/* ------------------------------------------------------------------------ */
/* Barrier, Bcast                                                            */
/* ------------------------------------------------------------------------ */

static int barrier_any(MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  pend *q = pend_new(&x, AD__M_BARRIER, fn);
  if (!q) return MPI_ERR_NO_MEM;
  if (x.t) q->r = ad__mrec_push(x.t, ad__coll_kind(AD__M_BARRIER), x.c, 0, 0);
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ibarrier(comm, &mq) : MPI_Barrier(comm);
  return pend_go(q, rc, mq, req);
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
    e_ = send_guard(fn, comm, is_root(root, comm) ? buffer : NULL, count, 0, NULL, NULL, type);
    if (e_ != MPI_SUCCESS) return e_;
    if (!req) return MPI_Bcast(buffer, count, type, root, comm);
    MPI_Request mq;
    return passive_req(MPI_Ibcast(buffer, count, type, root, comm, &mq), &mq, req);
  }
  if (count < 0) return MPI_ERR_COUNT;
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int me = x.c->rank == root;
  pend *q = pend_new(&x, AD__M_BCAST, fn);
  if (!q || !(q->rv = dbuf((size_t)count))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = buffer;
  q->n = count;
  q->gets = !me;
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_BCAST), x.c, me ? count : 0, 0) : NULL;
  if (r) r->root = root;
  if (me) {
    ad__pack(buffer, count, q->rv);
    if (r) ad__handles(x.t, buffer, count, r->in, fn);
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ibcast(q->rv, count, MPI_DOUBLE, root, comm, &mq) : MPI_Bcast(q->rv, count, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_BCAST, 0, x.c->rank, x.c->size, root, count, NULL, NULL);
  return pend_go(q, rc, mq, req);
}

int ad_mpi_bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_bcast(buffer, count, type, root, comm);
  return bcast_any(buffer, count, type, root, comm, NULL, "ad_mpi_bcast");
}
int ad_mpi_ibcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__dt_ibcast(buffer, count, type, root, comm, request);
  return bcast_any(buffer, count, type, root, comm, request, "ad_mpi_ibcast");
}

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
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (!op_ok(op)) return bad_op(&x, fn);
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
  pend *q = pend_new(&x, kind, fn);
  if (!q || !(q->sv = dbuf((size_t)n)) || !(q->rv = dbuf((size_t)m))) {
    pend_free(q);
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
  if (!local && (rc = weights(&x, op, q->sv, n, &q->w, &q->nanm)) != MPI_SUCCESS) {
    pend_free(q);
    return fwd_fail(&x, rc, fn);
  }
  if (local && !(q->all = dbuf((size_t)n * (size_t)p))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(kind), x.c, n, gets ? m : 0) : NULL;
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
      pend_free(q);
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
    ad__mpi_counters.forward_bytes += payload(kind, 0, me, p, root, scatter ? count : n, NULL, NULL);
  return pend_go(q, rc, mq, req);
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
  MPI_Request mq;
  int rc;
  switch (dt) {
  case 0:
    if (!req) return MPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    rc = MPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, &mq);
    break;
  case 1:
    if (!req) return MPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    rc = MPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, &mq);
    break;
  case 4:
    if (!req) return MPI_Reduce_scatter_block(sendbuf, recvbuf, count, type, op, comm);
    rc = MPI_Ireduce_scatter_block(sendbuf, recvbuf, count, type, op, comm, &mq);
    break;
  default:
    if (!req) return MPI_Reduce_scatter(sendbuf, recvbuf, counts, type, op, comm);
    rc = MPI_Ireduce_scatter(sendbuf, recvbuf, counts, type, op, comm, &mq);
    break;
  }
  return passive_req(rc, &mq, req);
}

/* Every reduction wrapper, blocking (req NULL) or not: a derived type or a
 * user operation goes to types.c or reduce_ext.c, passive data to MPI, and
 * AD_MPI_REAL to reduce_any. dt as for reduce_passive. */
static int reduce_front(int dt, const void *sendbuf, void *recvbuf, int count, const int *counts, MPI_Datatype type,
                        MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(1, type) || (is_real(type) && ad__op_user(op)))
    return ad__dt_reduce(dt, sendbuf, recvbuf, count, counts, type, op, root, comm, req);
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

int ad_mpi_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm comm) {
  return reduce_front(0, sendbuf, recvbuf, count, NULL, type, op, root, comm, NULL, "ad_mpi_reduce");
}
int ad_mpi_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                   ad_mpi_request *request) {
  return reduce_front(0, sendbuf, recvbuf, count, NULL, type, op, root, comm, request, "ad_mpi_ireduce");
}
int ad_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return reduce_front(1, sendbuf, recvbuf, count, NULL, type, op, 0, comm, NULL, "ad_mpi_allreduce");
}
int ad_mpi_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                      ad_mpi_request *request) {
  return reduce_front(1, sendbuf, recvbuf, count, NULL, type, op, 0, comm, request, "ad_mpi_iallreduce");
}
int ad_mpi_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm) {
  return reduce_front(4, sendbuf, recvbuf, recvcount, NULL, type, op, 0, comm, NULL, "ad_mpi_reduce_scatter_block");
}
int ad_mpi_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm, ad_mpi_request *request) {
  return reduce_front(4, sendbuf, recvbuf, recvcount, NULL, type, op, 0, comm, request, "ad_mpi_ireduce_scatter_block");
}
int ad_mpi_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                          MPI_Comm comm) {
  return reduce_front(5, sendbuf, recvbuf, 0, recvcounts, type, op, 0, comm, NULL, "ad_mpi_reduce_scatter");
}
int ad_mpi_ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                           MPI_Comm comm, ad_mpi_request *request) {
  return reduce_front(5, sendbuf, recvbuf, 0, recvcounts, type, op, 0, comm, request, "ad_mpi_ireduce_scatter");
}

static int scan_any(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int ex,
                    ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(1, type) || (is_real(type) && ad__op_user(op)))
    return ad__dt_reduce(ex ? 3 : 2, sendbuf, recvbuf, count, NULL, type, op, 0, comm, req);
  int e_ = ad__types_refuse(fn, 1, type);
  if (e_ == MPI_SUCCESS && !is_real(type)) e_ = reduce_guard(fn, sendbuf, recvbuf, count, type, comm);
  if (e_ != MPI_SUCCESS) return e_;
  if (!is_real(type)) {
    if (!req)
      return ex ? MPI_Exscan(sendbuf, recvbuf, count, type, op, comm)
                : MPI_Scan(sendbuf, recvbuf, count, type, op, comm);
    MPI_Request mq;
    int rc = ex ? MPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, &mq)
                : MPI_Iscan(sendbuf, recvbuf, count, type, op, comm, &mq);
    return passive_req(rc, &mq, req);
  }
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
  pend *q = pend_new(&x, ex ? AD__M_EXSCAN : AD__M_SCAN, fn);
  if (!q || !(q->sv = dbuf((size_t)count)) || !(q->rv = dbuf((size_t)count))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  q->n = count;
  q->gets = gets;
  ad__pack(src, count, q->sv);
  ad__mrec *r = q->r =
      x.t ? ad__mrec_push(x.t, ad__coll_kind(ex ? AD__M_EXSCAN : AD__M_SCAN), x.c, count, gets ? count : 0) : NULL;
  if (r) ad__handles(x.t, src, count, r->in, fn);
  MPI_Request mq = MPI_REQUEST_NULL;
  if (req)
    rc = ex ? MPI_Iexscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm, &mq)
            : MPI_Iscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm, &mq);
  else
    rc = ex ? MPI_Exscan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm)
            : MPI_Scan(q->sv, q->rv, count, MPI_DOUBLE, MPI_SUM, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_SCAN, 0, x.c->rank, x.c->size, 0, count, NULL, NULL);
  return pend_go(q, rc, mq, req);
}

int ad_mpi_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 0, NULL, "ad_mpi_scan");
}
int ad_mpi_exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 1, NULL, "ad_mpi_exscan");
}
int ad_mpi_iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                 ad_mpi_request *request) {
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 0, request, "ad_mpi_iscan");
}
int ad_mpi_iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   ad_mpi_request *request) {
  return scan_any(sendbuf, recvbuf, count, type, op, comm, 1, request, "ad_mpi_iexscan");
}

/* ------------------------------------------------------------------------ */
/* Gather, scatter, allgather, alltoall                                      */
/* ------------------------------------------------------------------------ */

static int both_real(coll *x, MPI_Datatype a, MPI_Datatype b, int a_used, int b_used, const char *fn) {
  if ((!a_used || is_real(a)) && (!b_used || is_real(b))) return 1;
  if (x->seen) ad__fail(x->seen, AD_ERR_MPI, "%s: AD_MPI_REAL on one side needs AD_MPI_REAL on the other", fn);
  return 0;
}

/* Regular counts: n per rank, packed in rank order. */
static int regular(int size, int n, int **cnt, int **dsp) {
  *cnt = malloc((size_t)size * sizeof **cnt);
  *dsp = malloc((size_t)size * sizeof **dsp);
  if (!*cnt || !*dsp) {
    free(*cnt);
    free(*dsp);
    return MPI_ERR_NO_MEM;
  }
  for (int j = 0; j < size; j++) {
    (*cnt)[j] = n;
    (*dsp)[j] = j * n;
  }
  return MPI_SUCCESS;
}

static int gatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                       int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[root] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[root] : sendbuf;
  int ext = me ? extent(recvcounts, displs, p) : 0, tot = me ? total(recvcounts, p) : 0;
  pend *q = pend_new(&x, AD__M_GATHERV, fn);
  if (!q || !(q->sv = dbuf((size_t)nin)) || !(q->rv = dbuf((size_t)ext)) ||
      (me && (!(q->cnt = icopy(recvcounts, p)) || !(q->dsp = icopy(displs, p))))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  ad__pack(src, nin, q->sv);
  if (inplace) memcpy(q->rv + displs[root], q->sv, (size_t)nin * sizeof(double));
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_GATHERV), x.c, nin, tot) : NULL;
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
  ad__mpi_counters.forward_bytes += payload(AD__M_GATHERV, 0, x.c->rank, p, root, nin, recvcounts, NULL);
  return pend_go(q, rc, mq, req);
}

static int gather_check(const void *sendbuf, int sendcount, MPI_Datatype sendtype, MPI_Datatype recvtype, int root,
                        MPI_Comm comm, const char *fn, int *active) {
  int e_ = ad__types_refuse(fn, 2, sendtype, recvtype);
  if (e_ != MPI_SUCCESS) return e_;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int use_send = !(rank == root && sendbuf == MPI_IN_PLACE);
  *active = (use_send ? is_real(sendtype) : is_real(recvtype)) || (rank == root && is_real(recvtype));
  /* An intercommunicator's root group (MPI_ROOT, MPI_PROC_NULL) sends nothing. */
  int sends = use_send && root != MPI_ROOT && root != MPI_PROC_NULL;
  if (!*active) return send_guard(fn, comm, sends ? sendbuf : NULL, sendcount, 0, NULL, NULL, sendtype);
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  return both_real(&chk, sendtype, recvtype, use_send, rank == root, fn) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/* Gatherv and igatherv (req). */
static int gatherv_front(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                         ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_gatherv(1, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype, root, comm, req);
  int active, rc = gather_check(sendbuf, sendcount, sendtype, recvtype, root, comm, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
    MPI_Request mq;
    rc = MPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  return gatherv_any(sendbuf, sendcount, recvbuf, recvcounts, displs, root, comm, req, fn);
}

int ad_mpi_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gatherv_front(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, NULL,
                       "ad_mpi_gatherv");
}
int ad_mpi_igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request) {
  return gatherv_front(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request,
                       "ad_mpi_igatherv");
}

static int gather_reg(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_gatherv(0, sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, root, comm, req);
  int active, rc = gather_check(sendbuf, sendcount, sendtype, recvtype, root, comm, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MPI_Request mq;
    rc = MPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  int size, *cnt, *dsp;
  MPI_Comm_size(comm, &size);
  if ((rc = regular(size, recvcount, &cnt, &dsp)) != MPI_SUCCESS) return rc;
  rc = gatherv_any(sendbuf, sendcount, recvbuf, cnt, dsp, root, comm, req, fn);
  free(cnt);
  free(dsp);
  return rc;
}

int ad_mpi_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL, "ad_mpi_gather");
}
int ad_mpi_igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request) {
  return gather_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request, "ad_mpi_igather");
}

static int scatterv_any(const void *sendbuf, const int *sendcounts, const int *displs, void *recvbuf, int recvcount,
                        int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank == root, inplace = me && recvbuf == MPI_IN_PLACE;
  int ext = me ? extent(sendcounts, displs, p) : 0;
  int nin = 0;
  pend *q = pend_new(&x, AD__M_SCATTERV, fn);
  if (!q || !(q->sv = dbuf((size_t)ext)) || !(q->rv = dbuf((size_t)recvcount)) ||
      (me && (!(q->a1 = icopy(sendcounts, p)) || !(q->a2 = icopy(displs, p))))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  int *cnt = NULL;
  if (me) {
    /* An in-place root keeps its own slot where it is, handles and all. */
    if (!(cnt = icopy(sendcounts, p))) {
      pend_free(q);
      return MPI_ERR_NO_MEM;
    }
    if (inplace) cnt[root] = 0;
    nin = total(cnt, p);
  }
  q->recvbuf = recvbuf;
  q->n = recvcount;
  q->gets = !inplace;
  if (me) ad__pack(sendbuf, ext, q->sv);
  ad__mrec *r = q->r =
      x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_SCATTERV), x.c, nin, inplace ? 0 : recvcount) : NULL;
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
  free(cnt);
  void *rb = inplace ? MPI_IN_PLACE : q->rv;
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Iscatterv(q->sv, q->a1, q->a2, MPI_DOUBLE, rb, recvcount, MPI_DOUBLE, root, comm, &mq)
           : MPI_Scatterv(q->sv, sendcounts, displs, MPI_DOUBLE, rb, recvcount, MPI_DOUBLE, root, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_SCATTERV, 0, x.c->rank, p, root, recvcount, sendcounts, NULL);
  return pend_go(q, rc, mq, req);
}

static int scatter_check(const void *sendbuf, int sendcount, const int *sendcounts, const int *displs,
                         MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype, int root, MPI_Comm comm,
                         const char *fn, int *active) {
  int e_ = ad__types_refuse(fn, 2, sendtype, recvtype);
  if (e_ != MPI_SUCCESS) return e_;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int use_recv = !(rank == root && recvbuf == MPI_IN_PLACE);
  *active = (use_recv ? is_real(recvtype) : is_real(sendtype)) || (rank == root && is_real(sendtype));
  if (!*active) { /* only the root sends */
    int p = comm_size(comm);
    return send_guard(fn, comm, is_root(root, comm) ? sendbuf : NULL, blocks_of(sendcount, p), p, sendcounts, displs,
                      sendtype);
  }
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  return both_real(&chk, sendtype, recvtype, rank == root, use_recv, fn) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/* Scatterv and iscatterv (req). */
static int scatterv_front(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                          ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_scatterv(1, sendbuf, sendcounts, displs, 0, sendtype, recvbuf, recvcount, recvtype, root, comm, req);
  int active, rc = scatter_check(sendbuf, 0, sendcounts, displs, sendtype, recvbuf, recvtype, root, comm, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MPI_Request mq;
    rc = MPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  return scatterv_any(sendbuf, sendcounts, displs, recvbuf, recvcount, root, comm, req, fn);
}

int ad_mpi_scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                    void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv_front(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL,
                        "ad_mpi_scatterv");
}
int ad_mpi_iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                     ad_mpi_request *request) {
  return scatterv_front(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                        "ad_mpi_iscatterv");
}

static int scatter_reg(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_scatterv(0, sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req);
  int active, rc = scatter_check(sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvtype, root, comm, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    MPI_Request mq;
    rc = MPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  int size, *cnt, *dsp;
  MPI_Comm_size(comm, &size);
  if ((rc = regular(size, sendcount, &cnt, &dsp)) != MPI_SUCCESS) return rc;
  rc = scatterv_any(sendbuf, cnt, dsp, recvbuf, recvcount, root, comm, req, fn);
  free(cnt);
  free(dsp);
  return rc;
}

int ad_mpi_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, NULL, "ad_mpi_scatter");
}
int ad_mpi_iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request) {
  return scatter_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
                     "ad_mpi_iscatter");
}

static int allgatherv_any(const void *sendbuf, int sendcount, void *recvbuf, const int *recvcounts, const int *displs,
                          MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  coll x;
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int p = x.c->size, me = x.c->rank, inplace = sendbuf == MPI_IN_PLACE;
  int nin = inplace ? recvcounts[me] : sendcount;
  const ad_real *src = inplace ? (const ad_real *)recvbuf + displs[me] : sendbuf;
  int ext = extent(recvcounts, displs, p), tot = total(recvcounts, p);
  pend *q = pend_new(&x, AD__M_ALLGATHERV, fn);
  if (!q || !(q->sv = dbuf((size_t)nin)) || !(q->rv = dbuf((size_t)ext)) || !(q->cnt = icopy(recvcounts, p)) ||
      !(q->dsp = icopy(displs, p))) {
    pend_free(q);
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
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_ALLGATHERV), x.c, nin, tot) : NULL;
  if (r) {
    ad__handles(x.t, src, nin, r->in, fn);
    if (!(r->cnt = icopy(recvcounts, p)) || !(r->dsp = icopy(displs, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
  }
  const void *sb = own ? MPI_IN_PLACE : q->sv;
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Iallgatherv(sb, sendcount, MPI_DOUBLE, q->rv, q->cnt, q->dsp, MPI_DOUBLE, comm, &mq)
           : MPI_Allgatherv(sb, sendcount, MPI_DOUBLE, q->rv, recvcounts, displs, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_ALLGATHERV, 0, me, p, 0, nin, recvcounts, NULL);
  return pend_go(q, rc, mq, req);
}

/* Allgather(v) and alltoall(v): active when a buffer in use is AD_MPI_REAL. */
static int all_check(const void *sendbuf, MPI_Datatype sendtype, MPI_Datatype recvtype, const char *fn, int *active) {
  int e_ = ad__types_refuse(fn, 2, sendtype, recvtype);
  if (e_ != MPI_SUCCESS) return e_;
  int use_send = sendbuf != MPI_IN_PLACE;
  *active = is_real(recvtype) || (use_send && is_real(sendtype));
  if (!*active) return MPI_SUCCESS; /* the caller guards its send side */
  coll chk = {0};
  ad__mpi_tape(&chk.seen);
  return both_real(&chk, sendtype, recvtype, use_send, 1, fn) ? MPI_SUCCESS : MPI_ERR_TYPE;
}

/* Allgatherv and iallgatherv (req). */
static int allgatherv_front(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                            ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_allgatherv(1, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, 0, recvtype, comm, req);
  int active, rc = all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active) rc = send_guard(fn, comm, sendbuf, sendcount, 0, NULL, NULL, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
    MPI_Request mq;
    rc = MPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  return allgatherv_any(sendbuf, sendcount, recvbuf, recvcounts, displs, comm, req, fn);
}

int ad_mpi_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv_front(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, NULL,
                          "ad_mpi_allgatherv");
}
int ad_mpi_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                       const int displs[], MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request) {
  return allgatherv_front(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request,
                          "ad_mpi_iallgatherv");
}

static int allgather_reg(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_allgatherv(0, sendbuf, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, comm, req);
  int active, rc = all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active) rc = send_guard(fn, comm, sendbuf, sendcount, 0, NULL, NULL, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    MPI_Request mq;
    return passive_req(MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mq), &mq, req);
  }
  int size, *cnt, *dsp;
  MPI_Comm_size(comm, &size);
  if ((rc = regular(size, recvcount, &cnt, &dsp)) != MPI_SUCCESS) return rc;
  rc = allgatherv_any(sendbuf, sendcount, recvbuf, cnt, dsp, comm, req, fn);
  free(cnt);
  free(dsp);
  return rc;
}

int ad_mpi_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, "ad_mpi_allgather");
}
int ad_mpi_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request) {
  return allgather_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, "ad_mpi_iallgather");
}

static int alltoallv_any(const void *sendbuf, const int *scnt, const int *sdsp, void *recvbuf, const int *rcnt,
                         const int *rdsp, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
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
  pend *q = pend_new(&x, AD__M_ALLTOALLV, fn);
  if (!q || !(q->sv = dbuf((size_t)sext)) || !(q->rv = dbuf((size_t)rext)) || !(q->cnt = icopy(rcnt, p)) ||
      !(q->dsp = icopy(rdsp, p)) || !(q->a1 = icopy(scnt, p)) || !(q->a2 = icopy(sdsp, p))) {
    pend_free(q);
    return MPI_ERR_NO_MEM;
  }
  q->recvbuf = recvbuf;
  ad__pack(sendbuf, sext, q->sv);
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_ALLTOALLV), x.c, nin, nout) : NULL;
  if (r) {
    if (!(r->cnt = icopy(scnt, p)) || !(r->dsp = icopy(sdsp, p)) || !(r->cnt2 = icopy(rcnt, p)) ||
        !(r->dsp2 = icopy(rdsp, p)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    else
      slot_handles(x.t, sendbuf, scnt, sdsp, p, r->in, fn);
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = req ? MPI_Ialltoallv(q->sv, q->a1, q->a2, MPI_DOUBLE, q->rv, q->cnt, q->dsp, MPI_DOUBLE, comm, &mq)
           : MPI_Alltoallv(q->sv, scnt, sdsp, MPI_DOUBLE, q->rv, rcnt, rdsp, MPI_DOUBLE, comm);
  ad__mpi_counters.forward_bytes += payload(AD__M_ALLTOALLV, 0, x.c->rank, p, 0, 0, scnt, rcnt);
  return pend_go(q, rc, mq, req);
}

/* Alltoallv and ialltoallv (req). */
static int alltoallv_front(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_alltoallv(1, sendbuf, sendcounts, sdispls, 0, sendtype, recvbuf, recvcounts, rdispls, 0, recvtype,
                            comm, req);
  int active, rc = all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active)
    rc = send_guard(fn, comm, sendbuf, 0, comm_size(comm), sendcounts, sdispls, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req)
      return MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
    MPI_Request mq;
    rc = MPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  return alltoallv_any(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, comm, req, fn);
}

int ad_mpi_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                     void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv_front(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, NULL,
                         "ad_mpi_alltoallv");
}
int ad_mpi_ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                      void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                      ad_mpi_request *request) {
  return alltoallv_front(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request,
                         "ad_mpi_ialltoallv");
}

static int alltoall_reg(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_alltoallv(0, sendbuf, NULL, NULL, sendcount, sendtype, recvbuf, NULL, NULL, recvcount, recvtype, comm,
                            req);
  int active, rc = all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc == MPI_SUCCESS && !active)
    rc = send_guard(fn, comm, sendbuf, blocks_of(sendcount, comm_size(comm)), 0, NULL, NULL, sendtype);
  if (rc != MPI_SUCCESS) return rc;
  if (!active) {
    if (!req) return MPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    MPI_Request mq;
    return passive_req(MPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mq), &mq, req);
  }
  int size, *sc, *sd, *rcn, *rd;
  MPI_Comm_size(comm, &size);
  if ((rc = regular(size, sendcount, &sc, &sd)) != MPI_SUCCESS) return rc;
  if ((rc = regular(size, recvcount, &rcn, &rd)) == MPI_SUCCESS) {
    rc = alltoallv_any(sendbuf, sc, sd, recvbuf, rcn, rd, comm, req, fn);
    free(rcn);
    free(rd);
  }
  free(sc);
  free(sd);
  return rc;
}

int ad_mpi_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, NULL, "ad_mpi_alltoall");
}
int ad_mpi_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request) {
  return alltoall_reg(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, "ad_mpi_ialltoall");
}

/* 1 if a slot in use (count not zero) has a datatype built from
 * AD_MPI_REAL (ns 0: the send side is not in use). */
static int derived_in_use(int ns, const int *scnt, const MPI_Datatype *stypes, int nr, const int *rcnt,
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
  int inplace = sendbuf == MPI_IN_PLACE, nreal = 0, nused = 0, rc = MPI_SUCCESS;
  if (derived_in_use(inplace ? 0 : size, scnt, stypes, size, rcnt, rtypes)) {
    MPI_Aint *a = malloc(2 * (size_t)(size ? size : 1) * sizeof *a);
    if (!a) return MPI_ERR_NO_MEM;
    for (int j = 0; j < size; j++) {
      a[j] = inplace ? 0 : sdsp[j];
      a[size + j] = rdsp[j];
    }
    rc = ad__dt_alltoallw(0, 0, fn, sendbuf, scnt, a, stypes, size, recvbuf, rcnt, a + size, rtypes, size, comm, req);
    free(a);
    return rc;
  }
  for (int j = 0; j < size && rc == MPI_SUCCESS; j++) {
    if (!inplace && scnt[j]) {
      nused++;
      nreal += is_real(stypes[j]);
      rc = ad__types_refuse(fn, 1, stypes[j]);
    }
    if (rc == MPI_SUCCESS && rcnt[j]) {
      nused++;
      nreal += is_real(rtypes[j]);
      rc = ad__types_refuse(fn, 1, rtypes[j]);
    }
  }
  if (rc == MPI_SUCCESS && nreal == 0) {
    rc = ad__mpi_guard_blocks(fn, "send buffer", sendbuf, size, scnt, sdsp, 1, NULL, stypes, MPI_DATATYPE_NULL);
    rc = ad__mpi_guard_agree(fn, comm, rc);
  }
  if (rc != MPI_SUCCESS) return rc;
  if (nreal == 0) {
    if (!req) return MPI_Alltoallw(sendbuf, scnt, sdsp, stypes, recvbuf, rcnt, rdsp, rtypes, comm);
    MPI_Request mq;
    return passive_req(MPI_Ialltoallw(sendbuf, scnt, sdsp, stypes, recvbuf, rcnt, rdsp, rtypes, comm, &mq), &mq, req);
  }
  int *a = malloc(2 * (size_t)size * sizeof *a);
  if (!a) return MPI_ERR_NO_MEM;
  int *sd = a, *rd = a + size;
  int bad = nreal != nused;
  for (int j = 0; j < size; j++) {
    sd[j] = inplace ? 0 : sdsp[j] / (int)sizeof(ad_real);
    rd[j] = rdsp[j] / (int)sizeof(ad_real);
    if ((!inplace && scnt[j] && sdsp[j] % (int)sizeof(ad_real)) || (rcnt[j] && rdsp[j] % (int)sizeof(ad_real))) bad = 1;
  }
  if (bad) {
    free(a);
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (seen)
      ad__fail(seen, AD_ERR_MPI,
               "%s: every datatype in use must be AD_MPI_REAL, with displacements in whole ad_real elements", fn);
    return MPI_ERR_TYPE;
  }
  rc = alltoallv_any(sendbuf, inplace ? rcnt : scnt, inplace ? rd : sd, recvbuf, rcnt, rd, comm, req, fn);
  free(a);
  return rc;
}

int ad_mpi_alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                     void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                     MPI_Comm comm) {
  return alltoallw_any(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, NULL,
                       "ad_mpi_alltoallw");
}
int ad_mpi_ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                      void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                      MPI_Comm comm, ad_mpi_request *request) {
  return alltoallw_any(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
                       "ad_mpi_ialltoallw");
}

/* ------------------------------------------------------------------------ */
/* Neighbourhood collectives                                                 */
/* ------------------------------------------------------------------------ */

/* A topology's sources (indeg) and destinations (outdeg). */
static int degrees(MPI_Comm comm, int *indeg, int *outdeg) {
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
  int rc = coll_begin(&x, comm);
  if (rc != MPI_SUCCESS) return rc;
  int sext = extent(scnt, sdsp, outdeg), rext = extent(rcnt, rdsp, indeg);
  pend *q = pend_new(&x, AD__M_NEIGHBOR, fn);
  if (!q || !(q->sv = dbuf((size_t)sext)) || !(q->rv = dbuf((size_t)rext)) || !(q->cnt = icopy(rcnt, indeg)) ||
      !(q->dsp = icopy(rdsp, indeg)) || !(q->a1 = icopy(scnt, outdeg)) || !(q->a2 = icopy(sdsp, outdeg)) ||
      !(q->a3 = icopy(rcnt, indeg)) || !(q->a4 = icopy(rdsp, indeg))) {
    pend_free(q);
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
  ad__mrec *r = q->r = x.t ? ad__mrec_push(x.t, ad__coll_kind(AD__M_NEIGHBOR), x.c, nin, nout) : NULL;
  if (r) {
    r->peer = outdeg;
    r->rpeer = indeg;
    r->count = nsend; /* values that leave this rank (not to MPI_PROC_NULL) */
    if (!(r->cnt = icopy(scnt, outdeg)) || !(r->dsp = icopy(sdsp, outdeg)) || !(r->cnt2 = icopy(q->cnt, indeg)) ||
        !(r->dsp2 = icopy(rdsp, indeg)))
      ad__fail(x.t, AD_ERR_NOMEM, "%s: no memory", fn);
    else
      slot_handles(x.t, sendbuf, scnt, sdsp, outdeg, r->in, fn);
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
  return pend_go(q, rc, mq, req);
}

/* A neighbourhood collective with a datatype built from AD_MPI_REAL: its
 * slots spelled out for ad__dt_alltoallw (allgather(v) sends the same slot
 * along every edge). Displacements in items become bytes. */
static int neighbor_dt(int kind, const void *sendbuf, int sendcount, const int *scnt, const int *sdsp,
                       MPI_Datatype sendtype, void *recvbuf, int recvcount, const int *rcnt, const int *rdsp,
                       MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req, const char *fn) {
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER;
  int indeg, outdeg, rc = degrees(comm, &indeg, &outdeg);
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
  rc = ad__dt_alltoallw(1, 1, fn, sendbuf, c, d, t, outdeg, recvbuf, c + outdeg, d + outdeg, t + outdeg, indeg, comm,
                        req);
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
  int active, rc = all_check(sendbuf, sendtype, recvtype, fn, &active);
  if (rc != MPI_SUCCESS) return rc;
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER; /* MPI allows no MPI_IN_PLACE here */
  int indeg, outdeg;
  if ((rc = degrees(comm, &indeg, &outdeg)) != MPI_SUCCESS) return rc;
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
  } else if ((rc = send_guard(fn, comm, sendbuf, 0, outdeg, sc, sd, sendtype)) == MPI_SUCCESS) {
    MPI_Request mq = MPI_REQUEST_NULL;
    switch (kind) {
    case 0:
      rc = req ? MPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mq)
               : MPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
      break;
    case 1:
      rc = req ? MPI_Ineighbor_alltoallv(sendbuf, scnt, sdsp, sendtype, recvbuf, rcnt, rdsp, recvtype, comm, &mq)
               : MPI_Neighbor_alltoallv(sendbuf, scnt, sdsp, sendtype, recvbuf, rcnt, rdsp, recvtype, comm);
      break;
    case 2:
      rc = req ? MPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &mq)
               : MPI_Neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
      break;
    default:
      rc = req ? MPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, rcnt, rdsp, recvtype, comm, &mq)
               : MPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, rcnt, rdsp, recvtype, comm);
      break;
    }
    if (req) rc = passive_req(rc, &mq, req);
  }
  free(a);
  return rc;
}

int ad_mpi_neighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor_kind(2, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm,
                       NULL, "ad_mpi_neighbor_allgather");
}
int ad_mpi_neighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor_kind(3, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, comm,
                       NULL, "ad_mpi_neighbor_allgatherv");
}
int ad_mpi_neighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm) {
  return neighbor_kind(0, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm,
                       NULL, "ad_mpi_neighbor_alltoall");
}
int ad_mpi_neighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                              void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                              MPI_Comm comm) {
  return neighbor_kind(1, sendbuf, 0, sendcounts, sdispls, sendtype, recvbuf, 0, recvcounts, rdispls, recvtype, comm,
                       NULL, "ad_mpi_neighbor_alltoallv");
}
int ad_mpi_ineighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                               MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request) {
  return neighbor_kind(2, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm,
                       request, "ad_mpi_ineighbor_allgather");
}
int ad_mpi_ineighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                ad_mpi_request *request) {
  return neighbor_kind(3, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, comm,
                       request, "ad_mpi_ineighbor_allgatherv");
}
int ad_mpi_ineighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request) {
  return neighbor_kind(0, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, comm,
                       request, "ad_mpi_ineighbor_alltoall");
}
int ad_mpi_ineighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                               void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                               MPI_Comm comm, ad_mpi_request *request) {
  return neighbor_kind(1, sendbuf, 0, sendcounts, sdispls, sendtype, recvbuf, 0, recvcounts, rdispls, recvtype, comm,
                       request, "ad_mpi_ineighbor_alltoallv");
}

/* Alltoallw over a neighbourhood: as alltoallw (every type in use
 * AD_MPI_REAL, or none). Its displacements are MPI_Aint bytes. */
static int neighbor_w(const void *sendbuf, const int *scnt, const MPI_Aint *sdsp, const MPI_Datatype *stypes,
                      void *recvbuf, const int *rcnt, const MPI_Aint *rdsp, const MPI_Datatype *rtypes, MPI_Comm comm,
                      ad_mpi_request *req, const char *fn) {
  int indeg, outdeg, rc = degrees(comm, &indeg, &outdeg);
  if (rc != MPI_SUCCESS) return rc;
  if (sendbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER; /* MPI allows no MPI_IN_PLACE here */
  if (derived_in_use(outdeg, scnt, stypes, indeg, rcnt, rtypes))
    return ad__dt_alltoallw(1, 0, fn, sendbuf, scnt, sdsp, stypes, outdeg, recvbuf, rcnt, rdsp, rtypes, indeg, comm,
                            req);
  int nreal = 0, nused = 0, bad = 0;
  for (int j = 0; j < outdeg && rc == MPI_SUCCESS; j++)
    if (scnt[j]) {
      nused++;
      nreal += is_real(stypes[j]);
      bad |= sdsp[j] % (MPI_Aint)sizeof(ad_real) != 0;
      rc = ad__types_refuse(fn, 1, stypes[j]);
    }
  for (int j = 0; j < indeg && rc == MPI_SUCCESS; j++)
    if (rcnt[j]) {
      nused++;
      nreal += is_real(rtypes[j]);
      bad |= rdsp[j] % (MPI_Aint)sizeof(ad_real) != 0;
      rc = ad__types_refuse(fn, 1, rtypes[j]);
    }
  if (rc == MPI_SUCCESS && nreal == 0) {
    rc = ad__mpi_guard_blocks(fn, "send buffer", sendbuf, outdeg, scnt, NULL, 0, sdsp, stypes, MPI_DATATYPE_NULL);
    rc = ad__mpi_guard_agree(fn, comm, rc);
  }
  if (rc != MPI_SUCCESS) return rc;
  if (nreal == 0) {
    if (!req) return MPI_Neighbor_alltoallw(sendbuf, scnt, sdsp, stypes, recvbuf, rcnt, rdsp, rtypes, comm);
    MPI_Request mq;
    rc = MPI_Ineighbor_alltoallw(sendbuf, scnt, sdsp, stypes, recvbuf, rcnt, rdsp, rtypes, comm, &mq);
    return passive_req(rc, &mq, req);
  }
  if (bad || nreal != nused) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (seen)
      ad__fail(seen, AD_ERR_MPI,
               "%s: every datatype in use must be AD_MPI_REAL, with displacements in whole ad_real elements", fn);
    return MPI_ERR_TYPE;
  }
  int *a = malloc(sizeof(int) * (size_t)(indeg + outdeg + 1));
  if (!a) return MPI_ERR_NO_MEM;
  for (int j = 0; j < outdeg; j++) a[j] = (int)(sdsp[j] / (MPI_Aint)sizeof(ad_real));
  for (int j = 0; j < indeg; j++) a[outdeg + j] = (int)(rdsp[j] / (MPI_Aint)sizeof(ad_real));
  rc = neighbor_any(sendbuf, scnt, a, recvbuf, rcnt, a + outdeg, indeg, outdeg, comm, req, fn);
  free(a);
  return rc;
}

int ad_mpi_neighbor_alltoallw(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                              const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                              const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return neighbor_w(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, NULL,
                    "ad_mpi_neighbor_alltoallw");
}
int ad_mpi_ineighbor_alltoallw(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                               const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                               ad_mpi_request *request) {
  return neighbor_w(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
                    "ad_mpi_ineighbor_alltoallw");
}

/* ------------------------------------------------------------------------ */
/* Persistent collectives (MPI 4.0)                                          */
/* ------------------------------------------------------------------------ */

#if MPI_VERSION >= 4
/* A persistent collective keeps its arguments; every ad_mpi_start runs its
 * nonblocking twin, which records one collective, as MPI's own persistent
 * collective would run one (the same number of operations, started in the
 * same order on every rank). */
enum {
  P_BARRIER,
  P_BCAST,
  P_REDUCE,
  P_ALLREDUCE,
  P_RS,
  P_RSB,
  P_SCAN,
  P_EXSCAN,
  P_GATHER,
  P_GATHERV,
  P_SCATTER,
  P_SCATTERV,
  P_ALLGATHER,
  P_ALLGATHERV,
  P_ALLTOALL,
  P_ALLTOALLV,
  P_ALLTOALLW,
  P_NALLGATHER,
  P_NALLGATHERV,
  P_NALLTOALL,
  P_NALLTOALLV,
  P_NALLTOALLW
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
  free(c->scnt);
  free(c->sdsp);
  free(c->rcnt);
  free(c->rdsp);
  free(c->sdspa);
  free(c->rdspa);
  free(c->stypes);
  free(c->rtypes);
  free(c);
}

static int pcoll_start(void *pctx, MPI_Request *mpi, const ad__req_ops **ops, void **ctx, ad_tape **t, ad__mrec **rec) {
  pcoll *c = pctx;
  ad_mpi_request *q = &capture.req;
  capture.req.mpi = MPI_REQUEST_NULL;
  capture.req.slot = AD__SLOT_STARTING;
  capture.req.gen = 0;
  capture.mq = MPI_REQUEST_NULL;
  capture.ctx = NULL;
  capture.t = NULL;
  capture.r = NULL;
  capture.active = 0;
  int rc;
  switch (c->kind) {
  case P_BARRIER:
    rc = ad_mpi_ibarrier(c->comm, q);
    break;
  case P_BCAST:
    rc = ad_mpi_ibcast(c->rbuf, c->rcount, c->rtype, c->root, c->comm, q);
    break;
  case P_REDUCE:
    rc = ad_mpi_ireduce(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->root, c->comm, q);
    break;
  case P_ALLREDUCE:
    rc = ad_mpi_iallreduce(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q);
    break;
  case P_RS:
    rc = ad_mpi_ireduce_scatter(c->sbuf, c->rbuf, c->rcnt, c->rtype, c->op, c->comm, q);
    break;
  case P_RSB:
    rc = ad_mpi_ireduce_scatter_block(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q);
    break;
  case P_SCAN:
    rc = ad_mpi_iscan(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q);
    break;
  case P_EXSCAN:
    rc = ad_mpi_iexscan(c->sbuf, c->rbuf, c->rcount, c->rtype, c->op, c->comm, q);
    break;
  case P_GATHER:
    rc = ad_mpi_igather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q);
    break;
  case P_GATHERV:
    rc = ad_mpi_igatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->root, c->comm, q);
    break;
  case P_SCATTER:
    rc = ad_mpi_iscatter(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q);
    break;
  case P_SCATTERV:
    rc = ad_mpi_iscatterv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcount, c->rtype, c->root, c->comm, q);
    break;
  case P_ALLGATHER:
    rc = ad_mpi_iallgather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q);
    break;
  case P_ALLGATHERV:
    rc = ad_mpi_iallgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q);
    break;
  case P_ALLTOALL:
    rc = ad_mpi_ialltoall(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q);
    break;
  case P_ALLTOALLV:
    rc = ad_mpi_ialltoallv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q);
    break;
  case P_ALLTOALLW:
    rc = ad_mpi_ialltoallw(c->sbuf, c->scnt, c->sdsp, c->stypes, c->rbuf, c->rcnt, c->rdsp, c->rtypes, c->comm, q);
    break;
  case P_NALLGATHER:
    rc = ad_mpi_ineighbor_allgather(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q);
    break;
  case P_NALLGATHERV:
    rc = ad_mpi_ineighbor_allgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm, q);
    break;
  case P_NALLTOALL:
    rc = ad_mpi_ineighbor_alltoall(c->sbuf, c->scount, c->stype, c->rbuf, c->rcount, c->rtype, c->comm, q);
    break;
  case P_NALLTOALLV:
    rc = ad_mpi_ineighbor_alltoallv(c->sbuf, c->scnt, c->sdsp, c->stype, c->rbuf, c->rcnt, c->rdsp, c->rtype, c->comm,
                                    q);
    break;
  default:
    rc = ad_mpi_ineighbor_alltoallw(c->sbuf, c->scnt, c->sdspa, c->stypes, c->rbuf, c->rcnt, c->rdspa, c->rtypes,
                                    c->comm, q);
    break;
  }
  if (rc != MPI_SUCCESS) return rc;
  *mpi = capture.mq;
  *ops = capture.active ? &pend_ops : NULL;
  *ctx = capture.ctx;
  *t = capture.t;
  *rec = capture.r;
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

int ad_mpi_bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                      ad_mpi_request *request) {
  (void)info;
  pcoll *c;
  int rc = pcoll_new(P_BCAST, comm, &c);
  if (rc != MPI_SUCCESS) return rc;
  c->rbuf = buffer;
  c->rcount = count;
  c->rtype = datatype;
  c->root = root;
  return pcoll_done(c, 1, request);
}

static int reduce_init(int kind, const void *sendbuf, void *recvbuf, int count, const int *counts,
                       MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *request) {
  pcoll *c;
  int rc = pcoll_new(kind, comm, &c);
  if (rc != MPI_SUCCESS) return rc;
  c->sbuf = sendbuf;
  c->rbuf = recvbuf;
  c->rcount = count;
  c->rtype = datatype;
  c->op = op;
  c->root = root;
  return pcoll_done(c, pc_icopy(&c->rcnt, counts, comm_size(comm)), request);
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

/* The gather, scatter, allgather and alltoall family: ns and nr entries in
 * the send and receive arrays that are given. */
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
int ad_mpi_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_ALLGATHER, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, 0,
                   0, 0, comm, request);
}
int ad_mpi_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_ALLGATHERV, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, 0,
                   0, comm_size(comm), comm, request);
}
int ad_mpi_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  return move_init(P_ALLTOALL, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, 0, 0,
                   0, comm, request);
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

int ad_mpi_neighbor_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                   ad_mpi_request *request) {
  (void)info;
  return move_init(P_NALLGATHER, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, 0,
                   0, 0, comm, request);
}
int ad_mpi_neighbor_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                    MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int in = 0, out = 0;
  int rc = degrees(comm, &in, &out);
  if (rc != MPI_SUCCESS) return rc;
  return move_init(P_NALLGATHERV, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, 0, recvcounts, displs, recvtype, 0,
                   0, in, comm, request);
}
int ad_mpi_neighbor_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  ad_mpi_request *request) {
  (void)info;
  return move_init(P_NALLTOALL, sendbuf, sendcount, NULL, NULL, sendtype, recvbuf, recvcount, NULL, NULL, recvtype, 0,
                   0, 0, comm, request);
}
int ad_mpi_neighbor_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request) {
  (void)info;
  int in = 0, out = 0;
  int rc = degrees(comm, &in, &out);
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
  int rc = degrees(comm, &in, &out);
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

/* ------------------------------------------------------------------------ */
/* Sweep actions                                                             */
/* ------------------------------------------------------------------------ */

/* Each collective's sweep action is a start (prepare the buffers, start
 * the nonblocking collective on the private duplicate, r->sreq) and a finish
 * (wait with the sweep timeout, then accumulate or set). A blocking
 * collective runs both at its record. A nonblocking one mirrors its forward
 * call: the tangent starts at the start record and finishes at the
 * completion record; the adjoint starts at the completion record and
 * finishes at the start record, so every rank's adjoint is under way before
 * any rank waits for it (as with point-to-point requests). */

static void scale(double *b, const double *w, int n) {
  if (w)
    for (int i = 0; i < n; i++) b[i] *= w[i];
}

/* The buffers of a start; 0 if one could not be had. */
static int bufs(ad__mrec *r, size_t na, size_t nb) {
  r->sbuf = dbuf(na);
  r->sbuf2 = dbuf(nb);
  return r->sbuf && r->sbuf2;
}

static void bufs_free(ad__mrec *r) {
  free(r->sbuf);
  free(r->sbuf2);
  free(r->keep);
  r->sbuf = r->sbuf2 = NULL;
  r->keep = NULL;
}

static int rev_start(ad_tape *t, ad__mrec *r) {
  MPI_Comm pc = r->c->priv;
  ad__mpi_counters.adjoint_bytes += record_payload(r, 1);
  int p = r->c->size, me = r->c->rank, e = MPI_SUCCESS;
  int root = me == r->root;
  double *a;
  switch (r->kind) {
  case AD__M_BARRIER:
    e = MPI_Ibarrier(pc, &r->sreq);
    break;
  case AD__M_BCAST: {
    int n = root ? r->nin : r->nout;
    if (!bufs(r, (size_t)n, 0)) return AD_ERR_NOMEM;
    a = r->sbuf;
    if (root) {
      e = MPI_Ireduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &r->sreq);
    } else {
      ad__adj_take(t, r->out, n, a);
      e = MPI_Ireduce(a, NULL, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &r->sreq);
    }
    break;
  }
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE: {
    int n = r->nin;
    if (!bufs(r, (size_t)n, 0)) return AD_ERR_NOMEM;
    a = r->sbuf;
    if (r->nout) ad__adj_take(t, r->out, n, a);
    if (r->kind == AD__M_REDUCE)
      e = MPI_Ibcast(a, n, MPI_DOUBLE, r->root, pc, &r->sreq);
    else
      e = MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  }
  case AD__M_RSB:
    if (!bufs(r, (size_t)r->count, (size_t)r->nin)) return AD_ERR_NOMEM;
    ad__adj_take(t, r->out, r->count, r->sbuf);
    if (r->cnt)
      e = MPI_Iallgatherv(r->sbuf, r->count, MPI_DOUBLE, r->sbuf2, r->cnt, r->dsp, MPI_DOUBLE, pc, &r->sreq);
    else
      e = MPI_Iallgather(r->sbuf, r->count, MPI_DOUBLE, r->sbuf2, r->count, MPI_DOUBLE, pc, &r->sreq);
    break;
  case AD__M_SCAN:
  case AD__M_EXSCAN: {
    /* x_i's adjoint: the sum of y_k's adjoints over k >= i (scan) or k > i
     * (exscan), a scan in the reverse rank order, summed directly: a total
     * minus a prefix would cancel (1e16 + 1 + 1 - 1e16). */
    int n = r->nin;
    MPI_Comm rev;
    if (!bufs(r, (size_t)n, (size_t)n)) return AD_ERR_NOMEM;
    if (r->nout) ad__adj_take(t, r->out, n, r->sbuf);
    e = ad__mpi_comm_reversed(r->c, &rev);
    if (e == MPI_SUCCESS)
      e = r->kind == AD__M_SCAN ? MPI_Iscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, rev, &r->sreq)
                                : MPI_Iexscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, rev, &r->sreq);
    break;
  }
  case AD__M_GATHERV: {
    /* Scatter the adjoints of the gathered slots back to their owners. */
    int ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!bufs(r, (size_t)ext, (size_t)r->nin)) return AD_ERR_NOMEM;
    if (root) {
      double *pk = dbuf((size_t)r->nout);
      if (!pk) return AD_ERR_NOMEM;
      ad__adj_take(t, r->out, r->nout, pk);
      to_layout(pk, r->cnt, r->dsp, p, r->sbuf);
      free(pk);
    }
    e = MPI_Iscatterv(r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, r->sbuf2, r->nin, MPI_DOUBLE, r->root, pc, &r->sreq);
    break;
  }
  case AD__M_SCATTERV: {
    int ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!bufs(r, (size_t)r->nout, (size_t)ext)) return AD_ERR_NOMEM;
    ad__adj_take(t, r->out, r->nout, r->sbuf);
    /* The in-place root's own slot has count 0 in r->cnt but MPI still
     * expects the original layout: send nothing for it. MPI reads the
     * counts while the gather runs. */
    if (root && !(r->keep = icopy(r->cnt, p))) return AD_ERR_NOMEM;
    e = MPI_Igatherv(r->inplace ? MPI_IN_PLACE : r->sbuf, r->nout, MPI_DOUBLE, r->sbuf2, r->keep, r->dsp, MPI_DOUBLE,
                     r->root, pc, &r->sreq);
    break;
  }
  case AD__M_ALLGATHERV:
    if (!bufs(r, (size_t)r->nout, (size_t)r->nin)) return AD_ERR_NOMEM;
    ad__adj_take(t, r->out, r->nout, r->sbuf); /* packed in rank order: what reduce_scatter wants */
    e = MPI_Ireduce_scatter(r->sbuf, r->sbuf2, r->cnt, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  case AD__M_ALLTOALLV:
  case AD__M_NEIGHBOR: {
    /* Send the received slots' adjoints back to where they came from
     * (along the reversed edges for a neighbourhood), and receive them
     * packed in slot order, in keep's displacements: send slots may overlap
     * (a value sent to several ranks, allgather's one slot), and each
     * slot's adjoint must be added, not overwritten by another's. */
    int nb = r->kind == AD__M_NEIGHBOR, ns = nb ? r->peer : p, nr = nb ? r->rpeer : p;
    int rext = extent(r->cnt2, r->dsp2, nr);
    MPI_Comm tc = pc;
    double *pk = dbuf((size_t)r->nout);
    if (!pk || !bufs(r, (size_t)rext, (size_t)r->nin) || !(r->keep = malloc(sizeof(int) * (size_t)(ns + 1)))) {
      free(pk);
      return AD_ERR_NOMEM;
    }
    for (int j = 0, d = 0; j < ns; d += r->cnt[j], j++) r->keep[j] = d;
    ad__adj_take(t, r->out, r->nout, pk);
    to_layout(pk, r->cnt2, r->dsp2, nr, r->sbuf);
    free(pk);
    if (nb) e = ad__mpi_comm_transposed(r->c, &tc);
    if (e == MPI_SUCCESS)
      e = nb ? MPI_Ineighbor_alltoallv(r->sbuf, r->cnt2, r->dsp2, MPI_DOUBLE, r->sbuf2, r->cnt, r->keep, MPI_DOUBLE, tc,
                                       &r->sreq)
             : MPI_Ialltoallv(r->sbuf, r->cnt2, r->dsp2, MPI_DOUBLE, r->sbuf2, r->cnt, r->keep, MPI_DOUBLE, tc,
                              &r->sreq);
    break;
  }
  default:
    return AD_ERR_STATE;
  }
  return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, "starting the adjoint of a collective");
}

/* Wait for a sweep's collective. One that timed out is still pending, and
 * MPI may still use its buffers when the other ranks arrive: they are given
 * up for good. */
static int sweep_wait(ad_tape *t, ad__mrec *r, const char *what) {
  int rc = ad__mpi_wait(t, &r->sreq, MPI_STATUS_IGNORE, what);
  if (!ad__mpi_abandon(&r->sreq, 0)) {
    ad__mpi_keep(r->sbuf);
    ad__mpi_keep(r->sbuf2);
    ad__mpi_keep(r->keep);
    r->sbuf = r->sbuf2 = NULL;
    r->keep = NULL;
    r->sreq = MPI_REQUEST_NULL; /* given up: MPI completes it when it can */
  }
  if (r->nb) {
    ad__corder *o = ad__coll_order(t, r->c);
    if (o && o->inflight > 0) o->inflight--;
  }
  return rc;
}

static int rev_finish(ad_tape *t, ad__mrec *r) {
  int p = r->c->size, me = r->c->rank;
  int rc = sweep_wait(t, r, "the adjoint of a collective");
  if (rc == AD_OK) {
    switch (r->kind) {
    case AD__M_BCAST:
      if (me == r->root) ad__adj_add(t, r->in, r->nin, r->sbuf, NULL);
      break;
    case AD__M_REDUCE:
    case AD__M_ALLREDUCE:
      ad__adj_add(t, r->in, r->nin, r->sbuf, r->w);
      break;
    case AD__M_RSB:
      ad__adj_add(t, r->in, r->nin, r->sbuf2, r->w);
      break;
    case AD__M_SCAN:
    case AD__M_EXSCAN:
      /* Exscan leaves the first rank's result undefined: the last rank
       * (first in reverse order) has nothing after it. */
      if (r->kind == AD__M_EXSCAN && me == p - 1)
        for (int i = 0; i < r->nin; i++) r->sbuf2[i] = 0.0;
      ad__adj_add(t, r->in, r->nin, r->sbuf2, NULL);
      break;
    case AD__M_GATHERV:
    case AD__M_ALLGATHERV:
    case AD__M_ALLTOALLV:
    case AD__M_NEIGHBOR:
      ad__adj_add(t, r->in, r->nin, r->sbuf2, NULL);
      break;
    case AD__M_SCATTERV:
      if (me == r->root) {
        double *pk = dbuf((size_t)r->nin);
        if (!pk) {
          rc = AD_ERR_NOMEM;
          break;
        }
        to_packed(r->sbuf2, r->cnt, r->dsp, p, pk);
        ad__adj_add(t, r->in, r->nin, pk, NULL);
        free(pk);
      }
      break;
    default:
      break;
    }
  }
  bufs_free(r);
  return rc;
}

static int fwd_start(ad_tape *t, ad__mrec *r) {
  MPI_Comm pc = r->c->priv;
  ad__mpi_counters.tangent_bytes += record_payload(r, 0);
  int p = r->c->size, me = r->c->rank, e = MPI_SUCCESS;
  int root = me == r->root;
  switch (r->kind) {
  case AD__M_BARRIER:
    e = MPI_Ibarrier(pc, &r->sreq);
    break;
  case AD__M_BCAST: {
    int n = root ? r->nin : r->nout;
    if (!bufs(r, (size_t)n, 0)) return AD_ERR_NOMEM;
    if (root) ad__tan_get(t, r->in, n, r->sbuf);
    e = MPI_Ibcast(r->sbuf, n, MPI_DOUBLE, r->root, pc, &r->sreq);
    break;
  }
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE: {
    int n = r->nin;
    if (!bufs(r, (size_t)n, (size_t)n)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, n, r->sbuf);
    scale(r->sbuf, r->w, n);
    if (r->kind == AD__M_REDUCE)
      e = MPI_Ireduce(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &r->sreq);
    else
      e = MPI_Iallreduce(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  }
  case AD__M_RSB:
    if (!bufs(r, (size_t)r->nin, (size_t)r->count)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, r->sbuf);
    scale(r->sbuf, r->w, r->nin);
    if (r->cnt)
      e = MPI_Ireduce_scatter(r->sbuf, r->sbuf2, r->cnt, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    else
      e = MPI_Ireduce_scatter_block(r->sbuf, r->sbuf2, r->count, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  case AD__M_SCAN:
  case AD__M_EXSCAN: {
    int n = r->nin;
    if (!bufs(r, (size_t)n, (size_t)n)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, n, r->sbuf);
    e = r->kind == AD__M_SCAN ? MPI_Iscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, pc, &r->sreq)
                              : MPI_Iexscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  }
  case AD__M_GATHERV: {
    int ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!bufs(r, (size_t)r->nin, (size_t)ext)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, r->sbuf);
    e = MPI_Igatherv(r->sbuf, r->nin, MPI_DOUBLE, r->sbuf2, r->cnt, r->dsp, MPI_DOUBLE, r->root, pc, &r->sreq);
    break;
  }
  case AD__M_SCATTERV: {
    int ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!bufs(r, (size_t)ext, (size_t)r->count)) return AD_ERR_NOMEM;
    if (root) {
      double *pk = dbuf((size_t)r->nin);
      if (!pk) return AD_ERR_NOMEM;
      ad__tan_get(t, r->in, r->nin, pk);
      to_layout(pk, r->cnt, r->dsp, p, r->sbuf);
      free(pk);
    }
    e = MPI_Iscatterv(r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, r->inplace ? MPI_IN_PLACE : r->sbuf2, r->count, MPI_DOUBLE,
                      r->root, pc, &r->sreq);
    break;
  }
  case AD__M_ALLGATHERV: {
    int ext = extent(r->cnt, r->dsp, p);
    if (!bufs(r, (size_t)ext, 0)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, r->sbuf + r->dsp[me]); /* in place, as in the forward call */
    e = MPI_Iallgatherv(MPI_IN_PLACE, r->nin, MPI_DOUBLE, r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, pc, &r->sreq);
    break;
  }
  case AD__M_ALLTOALLV: {
    int sext = extent(r->cnt, r->dsp, p), rext = extent(r->cnt2, r->dsp2, p);
    double *pk = dbuf((size_t)r->nin);
    if (!pk || !bufs(r, (size_t)sext, (size_t)rext)) {
      free(pk);
      return AD_ERR_NOMEM;
    }
    ad__tan_get(t, r->in, r->nin, pk);
    to_layout(pk, r->cnt, r->dsp, p, r->sbuf);
    free(pk);
    e = MPI_Ialltoallv(r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, r->sbuf2, r->cnt2, r->dsp2, MPI_DOUBLE, pc, &r->sreq);
    break;
  }
  case AD__M_NEIGHBOR: {
    int sext = extent(r->cnt, r->dsp, r->peer), rext = extent(r->cnt2, r->dsp2, r->rpeer);
    double *pk = dbuf((size_t)r->nin);
    if (!pk || !bufs(r, (size_t)sext, (size_t)rext)) {
      free(pk);
      return AD_ERR_NOMEM;
    }
    ad__tan_get(t, r->in, r->nin, pk);
    to_layout(pk, r->cnt, r->dsp, r->peer, r->sbuf);
    free(pk);
    e = MPI_Ineighbor_alltoallv(r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, r->sbuf2, r->cnt2, r->dsp2, MPI_DOUBLE, pc,
                                &r->sreq);
    break;
  }
  default:
    return AD_ERR_STATE;
  }
  return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, "starting the tangent of a collective");
}

/* Set packed values v of the slots (cnt, dsp) laid out in `laid`. */
static int tan_set_slots(ad_tape *t, ad__mrec *r, const double *laid, const int *cnt, const int *dsp) {
  double *pk = dbuf((size_t)r->nout);
  if (!pk) return AD_ERR_NOMEM;
  to_packed(laid, cnt, dsp, r->kind == AD__M_NEIGHBOR ? r->rpeer : r->c->size, pk);
  ad__tan_set(t, r->out, r->nout, pk);
  free(pk);
  return AD_OK;
}

static int fwd_finish(ad_tape *t, ad__mrec *r) {
  int me = r->c->rank;
  int rc = sweep_wait(t, r, "the tangent of a collective");
  if (rc == AD_OK) {
    switch (r->kind) {
    case AD__M_BCAST:
      if (me != r->root) ad__tan_set(t, r->out, r->nout, r->sbuf);
      break;
    case AD__M_REDUCE:
    case AD__M_ALLREDUCE:
    case AD__M_SCAN:
    case AD__M_EXSCAN:
      if (r->nout) ad__tan_set(t, r->out, r->nout, r->sbuf2);
      break;
    case AD__M_RSB:
      ad__tan_set(t, r->out, r->count, r->sbuf2);
      break;
    case AD__M_GATHERV:
      if (me == r->root) rc = tan_set_slots(t, r, r->sbuf2, r->cnt, r->dsp);
      break;
    case AD__M_SCATTERV:
      if (!r->inplace) ad__tan_set(t, r->out, r->nout, r->sbuf2);
      break;
    case AD__M_ALLGATHERV:
      rc = tan_set_slots(t, r, r->sbuf, r->cnt, r->dsp);
      break;
    case AD__M_ALLTOALLV:
    case AD__M_NEIGHBOR:
      rc = tan_set_slots(t, r, r->sbuf2, r->cnt2, r->dsp2);
      break;
    default:
      break;
    }
  }
  bufs_free(r);
  return rc;
}

/* Reverse order of adjoint collectives on one communicator (see ad__corder):
 * a record numbered s whose completion record says the last number started
 * before it completed was hi may start once every number in (s, hi] has:
 * those started while it was pending, so they start before it in the
 * reverse sweep on every rank. A blocking collective has nothing in between
 * and always may. Returns AD_OK or the first failure. */
static int may_start(const ad__corder *o, const ad__mrec *s, int hi) {
  for (int j = s->seq + 1; j <= hi && j < o->n; j++)
    if (!o->started[j]) return 0;
  return 1;
}

static int pump(ad_tape *t, ad__corder *o) {
  for (int again = 1; again;) {
    again = 0;
    for (int i = 0; i < o->nready; i++) {
      ad__mrec *d = o->ready[i], *s = d->link;
      if (!may_start(o, s, d->seq)) continue;
      o->ready[i] = o->ready[--o->nready];
      o->started[s->seq] = 1;
      int rc = rev_start(t, s);
      if (rc != AD_OK) return rc;
      o->inflight++;
      again = 1;
      break;
    }
  }
  return AD_OK;
}

static int order_fail(ad_tape *t, const char *why) {
  ad__pending(t, AD_ERR_MPI, "a nonblocking collective %s", why);
  return AD_ERR_MPI;
}

static int coll_reverse(ad_tape *t, ad__mrec *r) {
  ad__corder *o = ad__coll_order(t, r->c);
  if (r->kind == AD__M_ICOLL_DONE) {
    ad__mrec *s = r->link;
    if (!s) return order_fail(t, "completed on this tape but its start is gone (ad_tape_reset_to?)");
    if (!o || s->seq < 0 || s->seq >= o->n) return order_fail(t, "record has no number");
    if (o->nready == o->capready) {
      int ncap = o->capready ? 2 * o->capready : 8;
      ad__mrec **n = realloc(o->ready, (size_t)ncap * sizeof *n);
      if (!n) return AD_ERR_NOMEM;
      o->ready = n;
      o->capready = ncap;
    }
    o->ready[o->nready++] = r;
    return pump(t, o);
  }
  if (r->nb) {
    if (!r->link) return order_fail(t, "recorded on this tape was never completed (wait or test) while recording");
    if (!o || r->seq < 0 || r->seq >= o->n || !o->started[r->seq])
      return order_fail(t, "was not started when the sweep reached its start (a sweep over part of its request?)");
    return rev_finish(t, r);
  }
  int rc = rev_start(t, r);
  if (rc == AD_OK)
    rc = rev_finish(t, r);
  else
    bufs_free(r); /* nothing was started */
  if (o && r->seq >= 0 && r->seq < o->n) o->started[r->seq] = 1;
  return rc == AD_OK && o ? pump(t, o) : rc;
}

static int coll_tangent(ad_tape *t, ad__mrec *r) {
  if (r->kind == AD__M_ICOLL_DONE) {
    ad__mrec *s = r->link;
    if (!s) return order_fail(t, "completed on this tape but its start is gone (ad_tape_reset_to?)");
    return fwd_finish(t, s);
  }
  int rc = fwd_start(t, r);
  if (rc != AD_OK && r->sreq == MPI_REQUEST_NULL) bufs_free(r);
  if (rc == AD_OK && r->nb) {
    ad__corder *o = ad__coll_order(t, r->c);
    if (o) o->inflight++;
  }
  if (rc != AD_OK || r->nb) return rc;
  return fwd_finish(t, r);
}

/* A nonblocking collective's start leaves a request in p2p.c's slots that
 * points back at it. */
static void coll_lost(const ad__mrec *r) {
  if (r->nb) ad__p2p_forget(r);
}

/* The collective record kinds: every one but the completion of a
 * nonblocking collective is numbered on its (tape, communicator). */
static const ad__mkind kinds[] = {
    {AD__M_BARRIER, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_BCAST, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_REDUCE, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_ALLREDUCE, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_GATHERV, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_SCATTERV, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_ALLGATHERV, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_ALLTOALLV, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_RSB, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_SCAN, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_EXSCAN, 1, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_ICOLL_DONE, 0, coll_reverse, coll_tangent, coll_lost, NULL},
    {AD__M_NEIGHBOR, 1, coll_reverse, coll_tangent, coll_lost, NULL},
};

const ad__mkind *ad__coll_kind(int kind) { return ad__mkind_find(kinds, sizeof kinds / sizeof *kinds, kind); }
