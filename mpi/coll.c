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

#include "coll_impl.h"

int ad__coll_begin(coll *x, MPI_Comm comm) {
  int err;
  x->c = ad__mpi_comm(comm, &err);
  if (!x->c) return err;
  if ((err = ad__mpi_comm_settled(x->c)) != MPI_SUCCESS) return err;
  x->t = ad__mpi_tape(&x->seen);
  if ((err = ad__mpi_comm_renew(x->seen, x->c)) != MPI_SUCCESS) return err;
  ad__mpi_note_coll(x->seen, x->c);
  return MPI_SUCCESS;
}

int ad__coll_bad_op(coll *x, const char *fn) {
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
int ad__coll_weights(const coll *x, MPI_Op op, const double *v, int n, double **w, unsigned char **nanm) {
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

/* Gather the handles of the slots (cnt, dsp) of buffer b in rank order. */
int ad__coll_slot_handles(ad_tape *t, const ad_real *b, const int *cnt, const int *dsp, int n, ad_index *h,
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

uint64_t ad__coll_payload(int kind, int adjoint, int me, int p, int root, int64_t nown, const int *cnt,
                          const int *cnt2) {
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
  return ad__coll_payload(r->kind, adjoint, me, p, r->root, nown, r->cnt, r->cnt2);
}

/* ------------------------------------------------------------------------ */
/* Nonblocking calls                                                         */
/* ------------------------------------------------------------------------ */

/* Every collective wrapper prepares the packed buffers and its record, runs
 * the MPI call, and delivers what it received. A nonblocking one (req not
 * NULL) starts the MPI call and leaves the delivery to the completion call
 * (wait, test, ...), which also pushes the completion record: the pending
 * state below lives in the request's slot until then. */

pend *ad__coll_pend_new(const coll *x, int kind, const char *fn) {
  pend *q = calloc(1, sizeof *q);
  if (q) {
    q->kind = kind;
    q->x = *x;
    q->fn = fn;
  }
  return q;
}

void ad__coll_pend_free(pend *q) {
  if (!q) return;
  AD__FREE_EACH(q->sv, q->rv, q->all, q->cnt, q->dsp, q->a1, q->a2, q->a3, q->a4, q->nanm, q->w, q);
}

/* The result of op over every rank's contributions (all: p blocks of n
 * values) and this rank's partials, by the rules ad__coll_weights() gives the
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
    ad__mrec *d = ad__mrec_push(t, AD__M_ICOLL_DONE, q->x.c, 0, 0);
    ad__corder *o = ad__coll_order(t, q->x.c);
    if (d && o) {
      d->seq = o->n - 1; /* the last collective started before this completion */
      d->link = start;
      start->link = d;
    }
  }
  ad__coll_pend_free(q);
}

static void pend_failed(void *ctx, int rc) {
  pend *q = ctx;
  (void)rc;
  /* MPI may still read or write the buffers. */
  AD__EACH(ad__mpi_keep, q->sv, q->rv, q->all, q->a1, q->a2, q->a3, q->a4);
  q->sv = q->rv = q->all = NULL;
  q->a1 = q->a2 = q->a3 = q->a4 = NULL;
  ad__coll_pend_free(q);
}

const ad__req_ops ad__coll_pend_ops = {pend_complete, pend_failed};

ad__coll_captured ad__coll_capture;

/* After the MPI call (started, if req): deliver now, or hand q to the
 * request. Takes q in every case. */
int ad__coll_pend_go(pend *q, int rc, MPI_Request mq, ad_mpi_request *req) {
  coll x = q->x;
  if (rc != MPI_SUCCESS) {
    const char *fn = q->fn;
    if (mq != MPI_REQUEST_NULL)
      pend_failed(q, rc);
    else
      ad__coll_pend_free(q);
    return fwd_fail(&x, rc, fn);
  }
  if (!req) {
    pend_deliver(q, q->r ? x.t : NULL);
    ad__coll_pend_free(q);
    return MPI_SUCCESS;
  }
  if (q->r) q->r->nb = 1;
  if (req == &ad__coll_capture.req) { /* the start of a persistent collective takes it */
    ad__coll_capture.mq = mq;
    ad__coll_capture.ctx = q;
    ad__coll_capture.t = x.t;
    ad__coll_capture.r = q->r;
    ad__coll_capture.active = 1;
    return MPI_SUCCESS;
  }
  rc = ad__req_new(req, mq, x.t, q->r, &ad__coll_pend_ops, q);
  if (rc != MPI_SUCCESS) {
    /* Cannot track it: wait here (it was started) and deliver. */
    MPI_Wait(&mq, MPI_STATUS_IGNORE);
    if (q->r) q->r->nb = 0;
    pend_deliver(q, q->r ? x.t : NULL);
    ad__coll_pend_free(q);
    req->mpi = MPI_REQUEST_NULL;
    req->slot = -1;
  }
  return MPI_SUCCESS;
}

/* A nonblocking call on passive data: MPI's own request in a slot. */
int ad__coll_passive_req(int rc, MPI_Request *mq, ad_mpi_request *req) {
  if (rc != MPI_SUCCESS) return rc;
  if (req == &ad__coll_capture.req) {
    ad__coll_capture.mq = *mq;
    ad__coll_capture.active = 0;
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
int ad__coll_send_guard(const char *fn, MPI_Comm comm, const void *buf, int count, int n, const int *cnt,
                        const int *dsp, MPI_Datatype type) {
  int rc = cnt ? ad__mpi_guard_blocks(fn, "send buffer", buf, n, cnt, dsp, 0, NULL, NULL, type)
               : ad__mpi_guard(fn, "send buffer", buf, count, type);
  return ad__mpi_guard_agree(fn, comm, rc);
}

int ad__coll_both_real(coll *x, MPI_Datatype a, MPI_Datatype b, int a_used, int b_used, const char *fn) {
  if ((!a_used || is_real(a)) && (!b_used || is_real(b))) return 1;
  if (x->seen) ad__fail(x->seen, AD_ERR_MPI, "%s: AD_MPI_REAL on one side needs AD_MPI_REAL on the other", fn);
  return 0;
}

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

/* The root's values of the n handles h, laid out by the record's slots in
 * r->sbuf: their adjoints taken (adj) or their tangents. */
static int laid_out(ad_tape *t, ad__mrec *r, const ad_index *h, int n, int p, int adj) {
  double *pk = dbuf((size_t)n);
  if (!pk) return AD_ERR_NOMEM;
  if (adj)
    ad__adj_take(t, h, n, pk);
  else
    ad__tan_get(t, h, n, pk);
  to_layout(pk, r->cnt, r->dsp, p, r->sbuf);
  free(pk);
  return AD_OK;
}

/* A sweep's sum scan of the record's kind (scan or exscan) over comm. */
static int scan_start(ad__mrec *r, int n, MPI_Comm comm) {
  return r->kind == AD__M_SCAN ? MPI_Iscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, comm, &r->sreq)
                               : MPI_Iexscan(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, comm, &r->sreq);
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

/* The adjoint of r's collective, started on pc (p ranks; root: this rank is
 * the record's root): AD_OK with MPI's code in *mpi, or the library's error. */
static int rev_kinds(ad_tape *t, ad__mrec *r, MPI_Comm pc, int p, int root, int *mpi) {
  int e = MPI_SUCCESS;
  double *a;
  switch (r->kind) {
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
    if (e == MPI_SUCCESS) e = scan_start(r, n, rev);
    break;
  }
  case AD__M_GATHERV: {
    /* Scatter the adjoints of the gathered slots back to their owners. */
    int ext = root ? extent(r->cnt, r->dsp, p) : 0;
    if (!bufs(r, (size_t)ext, (size_t)r->nin)) return AD_ERR_NOMEM;
    if (root && laid_out(t, r, r->out, r->nout, p, 1) != AD_OK) return AD_ERR_NOMEM;
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
  *mpi = e;
  return AD_OK;
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

/* The tangent of r's collective, as rev_kinds. */
static int fwd_kinds(ad_tape *t, ad__mrec *r, MPI_Comm pc, int p, int root, int *mpi) {
  int e = MPI_SUCCESS;
  switch (r->kind) {
  case AD__M_BCAST: {
    int n = root ? r->nin : r->nout;
    if (!bufs(r, (size_t)n, 0)) return AD_ERR_NOMEM;
    if (root) ad__tan_get(t, r->in, n, r->sbuf);
    e = MPI_Ibcast(r->sbuf, n, MPI_DOUBLE, r->root, pc, &r->sreq);
    break;
  }
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE:
  case AD__M_RSB: {
    /* The weighted tangents, summed where the forward call summed. */
    int n = r->nin;
    if (!bufs(r, (size_t)n, (size_t)(r->kind == AD__M_RSB ? r->count : n))) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, n, r->sbuf);
    scale(r->sbuf, r->w, n);
    if (r->kind == AD__M_REDUCE)
      e = MPI_Ireduce(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, r->root, pc, &r->sreq);
    else if (r->kind == AD__M_ALLREDUCE)
      e = MPI_Iallreduce(r->sbuf, r->sbuf2, n, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    else if (r->cnt)
      e = MPI_Ireduce_scatter(r->sbuf, r->sbuf2, r->cnt, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    else
      e = MPI_Ireduce_scatter_block(r->sbuf, r->sbuf2, r->count, MPI_DOUBLE, MPI_SUM, pc, &r->sreq);
    break;
  }
  case AD__M_SCAN:
  case AD__M_EXSCAN: {
    int n = r->nin;
    if (!bufs(r, (size_t)n, (size_t)n)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, n, r->sbuf);
    e = scan_start(r, n, pc);
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
    if (root && laid_out(t, r, r->in, r->nin, p, 0) != AD_OK) return AD_ERR_NOMEM;
    e = MPI_Iscatterv(r->sbuf, r->cnt, r->dsp, MPI_DOUBLE, r->inplace ? MPI_IN_PLACE : r->sbuf2, r->count, MPI_DOUBLE,
                      r->root, pc, &r->sreq);
    break;
  }
  case AD__M_ALLGATHERV: {
    int ext = extent(r->cnt, r->dsp, p);
    if (!bufs(r, (size_t)ext, 0)) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, r->sbuf + r->dsp[r->c->rank]); /* in place, as in the forward call */
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
  *mpi = e;
  return AD_OK;
}

/* Start a sweep's collective for r: its adjoint (rev) or its tangent. What
 * the two directions share is here: the bytes counted, the barrier, which
 * moves no values, and an MPI failure turned into the tape's error. */
static int sweep_start(ad_tape *t, ad__mrec *r, int rev) {
  int e = MPI_SUCCESS, rc = AD_OK, root = r->c->rank == r->root;
  *(rev ? &ad__mpi_counters.adjoint_bytes : &ad__mpi_counters.tangent_bytes) += record_payload(r, rev);
  if (r->kind == AD__M_BARRIER)
    e = MPI_Ibarrier(r->c->priv, &r->sreq);
  else
    rc = (rev ? rev_kinds : fwd_kinds)(t, r, r->c->priv, r->c->size, root, &e);
  if (rc != AD_OK || e == MPI_SUCCESS) return rc;
  return ad__mpi_fail(t, e, rev ? "starting the adjoint of a collective" : "starting the tangent of a collective");
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
      int rc = sweep_start(t, s, 1);
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
  int rc = sweep_start(t, r, 1);
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
  int rc = sweep_start(t, r, 0);
  if (rc != AD_OK && r->sreq == MPI_REQUEST_NULL) bufs_free(r);
  if (rc == AD_OK && r->nb) {
    ad__corder *o = ad__coll_order(t, r->c);
    if (o) o->inflight++;
  }
  if (rc != AD_OK || r->nb) return rc;
  return fwd_finish(t, r);
}

/* A nonblocking collective's start leaves a request in a slot that
 * points back at it. */
static void coll_lost(const ad__mrec *r) {
  if (r->nb) ad__req_forget(r);
}

const ad__mactions ad__coll_actions = {coll_reverse, coll_tangent, coll_lost, NULL};
