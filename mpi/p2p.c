/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point wrappers, requests, and their adjoint and tangent actions.
 *
 * Reverse rules (DESIGN.md): a send's adjoint receives the adjoints from the
 * destination and accumulates them; a receive's adjoint sends the received
 * values' adjoints back to the source that actually matched and zeroes them.
 * Nonblocking pairs act at both ends: at the completion record the reverse
 * sweep posts the adjoint operation (a nonblocking send, or a receive), and at
 * the start record it completes the receive and accumulates. Adjoint sends are
 * completed lazily at the end of the sweep, so a sweep never relies on MPI
 * buffering.
 *
 * The other nonblocking send modes, persistent requests and matched probes
 * use the same records: every start of a persistent request is an isend or
 * irecv start record, an mrecv is a receive record and an imrecv an irecv.
 * A cancelled receive's start record becomes AD__M_CANCELLED (no action),
 * and an active send freed by ad_mpi_request_free records its completion at
 * the free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

static int is_real(MPI_Datatype t) { return t == AD_MPI_REAL; }

/* ------------------------------------------------------------------------ */
/* Sweep actions                                                             */
/* ------------------------------------------------------------------------ */

static int sweep_isend(ad_tape *t, const ad__mrec *r, const double *buf, int n, int peer, int tag, int k, int was_recv,
                       uint64_t *counter) {
  if (peer == MPI_PROC_NULL || peer < 0) return AD_OK;
  int stag = ad__sweep_tag(t, r->c, peer, tag, k, was_recv);
  if (stag < 0) return AD_ERR_MPI;
  double *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
  if (!copy) return AD_ERR_NOMEM;
  memcpy(copy, buf, (size_t)n * sizeof *copy);
  MPI_Request q;
  int e = MPI_Isend(copy, n, MPI_DOUBLE, peer, stag, r->c->priv, &q);
  if (e != MPI_SUCCESS) {
    free(copy);
    return ad__mpi_fail(t, e, "posting a sweep send");
  }
  *counter += (uint64_t)n * sizeof(double);
  return ad__mpi_lazy(t, q, copy);
}

/* A sweep message must have exactly the recorded length: a shorter one
 * (possible when the two sides sweep different tapes, or with an MPI that
 * lets a mismatched message to oneself through) would leave part of the
 * buffer unset. */
static int count_check(ad_tape *t, const MPI_Status *st, int n, int peer, const char *what) {
  int got = -1;
  MPI_Get_count(st, MPI_DOUBLE, &got);
  if (got == n) return AD_OK;
  ad__pending(t, AD_ERR_MPI, "%s: rank %d sent %d values where this rank recorded %d", what, peer, got, n);
  return AD_ERR_MPI;
}

static int sweep_recv(ad_tape *t, const ad__mrec *r, double *buf, int n, int peer, int tag, int k, int was_recv,
                      const char *what) {
  if (peer == MPI_PROC_NULL || peer < 0) {
    memset(buf, 0, (size_t)n * sizeof *buf);
    return AD_OK;
  }
  int stag = ad__sweep_tag(t, r->c, peer, tag, k, was_recv);
  if (stag < 0) return AD_ERR_MPI;
  MPI_Request q;
  MPI_Status st;
  int e = MPI_Irecv(buf, n, MPI_DOUBLE, peer, stag, r->c->priv, &q);
  if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, "posting a sweep receive");
  int rc = ad__mpi_wait(t, &q, &st, what);
  ad__mpi_abandon(&q, 1); /* after a timeout: the caller frees buf */
  return rc == AD_OK ? count_check(t, &st, n, peer, what) : rc;
}

static double *scratch(int n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }

static int p2p_reverse(ad_tape *t, ad__mrec *r) {
  int rc = AD_OK;
  double *buf;
  uint64_t *bytes = &ad__mpi_counters.adjoint_bytes;
  switch (r->kind) {
  case AD__M_SEND:
    if (!(buf = scratch(r->nin))) return AD_ERR_NOMEM;
    rc = sweep_recv(t, r, buf, r->nin, r->peer, r->tag, r->k, 0, "the adjoint of a sent message");
    if (rc == AD_OK) ad__adj_add(t, r->in, r->nin, buf, NULL);
    free(buf);
    return rc;
  case AD__M_RECV:
  case AD__M_IRECV_DONE:
    if (!(buf = scratch(r->nout))) return AD_ERR_NOMEM;
    ad__adj_take(t, r->out, r->nout, buf);
    rc = sweep_isend(t, r, buf, r->nout, r->peer, r->tag, r->k, 1, bytes);
    free(buf);
    return rc;
  case AD__M_ISEND_DONE: {
    ad__mrec *s = r->link;
    if (!s) return AD_OK;
    if (!(s->sbuf = scratch(s->nin))) return AD_ERR_NOMEM;
    if (s->peer == MPI_PROC_NULL) {
      memset(s->sbuf, 0, (size_t)s->nin * sizeof(double));
      return AD_OK;
    }
    int stag = ad__sweep_tag(t, s->c, s->peer, s->tag, s->k, 0);
    if (stag < 0) return AD_ERR_MPI;
    int e = MPI_Irecv(s->sbuf, s->nin, MPI_DOUBLE, s->peer, stag, s->c->priv, &s->sreq);
    return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, "posting the adjoint receive of an isend");
  }
  case AD__M_ISEND:
    if (!r->link) {
      ad__pending(t, AD_ERR_MPI,
                  "an ad_mpi_isend recorded on this tape was never completed (wait or test) while recording");
      return AD_ERR_MPI;
    }
    if (r->sreq != MPI_REQUEST_NULL) {
      MPI_Status st;
      rc = ad__mpi_wait(t, &r->sreq, &st, "the adjoint of an isend message");
      if (rc == AD_OK) rc = count_check(t, &st, r->nin, r->peer, "the adjoint of an isend message");
    }
    ad__mpi_abandon(&r->sreq, 1); /* after a timeout, before sbuf goes */
    if (rc == AD_OK && r->sbuf) ad__adj_add(t, r->in, r->nin, r->sbuf, NULL);
    free(r->sbuf);
    r->sbuf = NULL;
    return rc;
  case AD__M_IRECV:
    if (!r->link) {
      ad__pending(t, AD_ERR_MPI,
                  "an ad_mpi_irecv recorded on this tape was never completed (wait or test) while recording");
      return AD_ERR_MPI;
    }
    return AD_OK;
  case AD__M_SENDRECV:
    if (!(buf = scratch(r->nout > r->nin ? r->nout : r->nin))) return AD_ERR_NOMEM;
    ad__adj_take(t, r->out, r->nout, buf);
    rc = sweep_isend(t, r, buf, r->nout, r->rpeer, r->rtag, r->rk, 1, bytes);
    /* An empty message still has an adjoint message, which the partner
     * sends: receive it whatever the count (sweep_recv skips a half that was
     * not active). */
    if (rc == AD_OK) {
      rc = sweep_recv(t, r, buf, r->nin, r->peer, r->tag, r->k, 0, "the adjoint of a sendrecv message");
      if (rc == AD_OK) ad__adj_add(t, r->in, r->nin, buf, NULL);
    }
    free(buf);
    return rc;
  default: /* AD__M_CANCELLED: a receive that never was */
    return AD_OK;
  }
}

static int p2p_tangent(ad_tape *t, ad__mrec *r) {
  int rc = AD_OK;
  double *buf;
  uint64_t *bytes = &ad__mpi_counters.tangent_bytes;
  switch (r->kind) {
  case AD__M_SEND:
  case AD__M_ISEND:
    if (!(buf = scratch(r->nin))) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, buf);
    rc = sweep_isend(t, r, buf, r->nin, r->peer, r->tag, r->k, 0, bytes);
    free(buf);
    return rc;
  case AD__M_RECV:
    if (!(buf = scratch(r->nout))) return AD_ERR_NOMEM;
    rc = sweep_recv(t, r, buf, r->nout, r->peer, r->tag, r->k, 1, "the tangent of a received message");
    if (rc == AD_OK) ad__tan_set(t, r->out, r->nout, buf);
    free(buf);
    return rc;
  case AD__M_ISEND_DONE:
    return AD_OK;
  case AD__M_IRECV: {
    ad__mrec *d = r->link;
    if (!d) {
      ad__pending(t, AD_ERR_MPI, "an ad_mpi_irecv recorded on this tape was never completed while recording");
      return AD_ERR_MPI;
    }
    if (!(r->sbuf = scratch(d->nout))) return AD_ERR_NOMEM;
    if (d->peer == MPI_PROC_NULL) return AD_OK;
    int stag = ad__sweep_tag(t, d->c, d->peer, d->tag, d->k, 1);
    if (stag < 0) return AD_ERR_MPI;
    int e = MPI_Irecv(r->sbuf, d->nout, MPI_DOUBLE, d->peer, stag, r->c->priv, &r->sreq);
    return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, "posting the tangent receive of an irecv");
  }
  case AD__M_IRECV_DONE: {
    ad__mrec *s = r->link;
    if (!s || !s->sbuf) return AD_OK;
    if (s->sreq != MPI_REQUEST_NULL) {
      MPI_Status st;
      rc = ad__mpi_wait(t, &s->sreq, &st, "the tangent of an irecv message");
      if (rc == AD_OK) rc = count_check(t, &st, r->nout, r->peer, "the tangent of an irecv message");
    }
    ad__mpi_abandon(&s->sreq, 1); /* after a timeout, before sbuf goes */
    if (rc == AD_OK) ad__tan_set(t, r->out, r->nout, s->sbuf);
    free(s->sbuf);
    s->sbuf = NULL;
    return rc;
  }
  case AD__M_SENDRECV:
    if (!(buf = scratch(r->nout > r->nin ? r->nout : r->nin))) return AD_ERR_NOMEM;
    ad__tan_get(t, r->in, r->nin, buf);
    rc = sweep_isend(t, r, buf, r->nin, r->peer, r->tag, r->k, 0, bytes);
    if (rc == AD_OK) { /* empty messages too, as in the reverse sweep */
      rc = sweep_recv(t, r, buf, r->nout, r->rpeer, r->rtag, r->rk, 1, "the tangent of a sendrecv message");
      if (rc == AD_OK) ad__tan_set(t, r->out, r->nout, buf);
    }
    free(buf);
    return rc;
  default: /* AD__M_CANCELLED: a receive that never was */
    return AD_OK;
  }
}

/* The point-to-point record kinds. Nonblocking starts leave a request in a
 * slot that points back at them (see ad__p2p_forget); a cancelled receive's
 * start becomes AD__M_CANCELLED, with no action. */
static const ad__mkind kinds[] = {
    {AD__M_SEND, 0, p2p_reverse, p2p_tangent, NULL, NULL},
    {AD__M_RECV, 0, p2p_reverse, p2p_tangent, NULL, NULL},
    {AD__M_ISEND, 0, p2p_reverse, p2p_tangent, ad__p2p_forget, NULL},
    {AD__M_ISEND_DONE, 0, p2p_reverse, p2p_tangent, NULL, NULL},
    {AD__M_IRECV, 0, p2p_reverse, p2p_tangent, ad__p2p_forget, NULL},
    {AD__M_IRECV_DONE, 0, p2p_reverse, p2p_tangent, NULL, NULL},
    {AD__M_SENDRECV, 0, p2p_reverse, p2p_tangent, NULL, NULL},
    {AD__M_CANCELLED, 0, p2p_reverse, p2p_tangent, NULL, NULL},
};

const ad__mkind *ad__p2p_kind(int kind) { return ad__mkind_find(kinds, sizeof kinds / sizeof *kinds, kind); }

/* ------------------------------------------------------------------------ */
/* Blocking wrappers                                                         */
/* ------------------------------------------------------------------------ */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

static int send_any(send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                    MPI_Comm comm) {
  if (!is_real(type)) {
    int bad = ad__mpi_guard(name, "buffer", buf, count, type);
    return bad != MPI_SUCCESS ? bad : fn(buf, count, type, dest, tag, comm);
  }
  if (count < 0) return MPI_ERR_COUNT;
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  double *v = scratch(count);
  if (!v) return MPI_ERR_NO_MEM;
  ad__pack(buf, count, v);
  if (dest != MPI_PROC_NULL) {
    int k = ad__send_seq(c, dest, tag);
    ad__mpi_note_peer(seen, c, dest, 0, tag, count, k);
    ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_SEND), c, count, 0) : NULL;
    if (r) {
      r->peer = dest;
      r->tag = tag;
      r->k = k;
      ad__handles(t, buf, count, r->in, name);
    }
  }
  int rc = fn(v, count, MPI_DOUBLE, dest, tag, comm);
  free(v);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, name);
  if (dest != MPI_PROC_NULL) ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double);
  return MPI_SUCCESS;
}

/* Finish an active receive of n values from (asrc, atag): sequence it, and
 * record it with fresh handles for the received elements. */
static void recv_finish(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st, ad_real *buf,
                        const double *v, int n, int kind, ad__mrec **rec) {
  int k = ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(kind), c, 0, n) : NULL;
  if (r) {
    r->peer = st->MPI_SOURCE;
    r->tag = st->MPI_TAG;
    r->k = k;
  }
  ad__unpack(r ? t : NULL, buf, n, v, r ? r->out : NULL);
  if (rec) *rec = r;
}

static int received(const MPI_Status *st) {
  int n = 0;
  MPI_Get_count(st, MPI_DOUBLE, &n);
  return n == MPI_UNDEFINED ? 0 : n;
}

/* An active receive that failed with MPI error `rc`. A truncated message was
 * taken off the wire all the same: count it in its stream, so that later
 * messages keep their sequence numbers, and note its sender, so that the
 * sender's sweep learns of this rank's error in the handshake instead of
 * waiting for it. Any other failure took no message. */
static void recv_failed(ad__comm *c, ad_tape *seen, uint64_t post, int rc, const MPI_Status *st) {
  int cls = MPI_ERR_OTHER;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_TRUNCATE && st->MPI_SOURCE >= 0) {
    ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
    ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, -1, -1);
  } else {
    ad__recv_complete(c, post, -2, -2);
  }
}

int ad_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  if (ad__dtype_any(1, type)) return ad__dt_recv(buf, count, type, source, tag, comm, status);
  if (!is_real(type) || source == MPI_PROC_NULL)
    return MPI_Recv(buf, count, type == AD_MPI_REAL ? MPI_DOUBLE : type, source, tag, comm, status);
  if (count < 0) return MPI_ERR_COUNT;
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  double *v = scratch(count);
  if (!v) return MPI_ERR_NO_MEM;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  uint64_t post = ad__recv_post(c, source, tag);
  int rc = MPI_Recv(v, count, MPI_DOUBLE, source, tag, comm, &st);
  if (rc != MPI_SUCCESS) {
    recv_failed(c, seen, post, rc, &st);
    free(v);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_recv");
  }
  recv_finish(c, t, seen, post, &st, buf, v, received(&st), AD__M_RECV, NULL);
  free(v);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__dt_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                           comm, status);
  int sa = is_real(sendtype), ra = is_real(recvtype);
  int bad = sa ? MPI_SUCCESS : ad__mpi_guard("ad_mpi_sendrecv", "send buffer", sendbuf, sendcount, sendtype);
  if (bad != MPI_SUCCESS) return bad;
  if (!sa && !ra)
    return MPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                        comm, status);
  if (sendcount < 0 || recvcount < 0) return MPI_ERR_COUNT;
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  double *sv = sa ? scratch(sendcount) : NULL, *rv = ra ? scratch(recvcount) : NULL;
  if ((sa && !sv) || (ra && !rv)) {
    free(sv);
    free(rv);
    return MPI_ERR_NO_MEM;
  }
  if (sa) ad__pack(sendbuf, sendcount, sv);
  int active_send = sa && dest != MPI_PROC_NULL, active_recv = ra && source != MPI_PROC_NULL;
  int k = active_send ? ad__send_seq(c, dest, sendtag) : 0;
  uint64_t post = active_recv ? ad__recv_post(c, source, recvtag) : 0;
  if (active_send) ad__mpi_note_peer(seen, c, dest, 0, sendtag, sendcount, k);
  ad__mrec *r = t && (active_send || active_recv)
                    ? ad__mrec_push(t, ad__p2p_kind(AD__M_SENDRECV), c, active_send ? sendcount : 0, 0)
                    : NULL;
  if (r) {
    r->peer = active_send ? dest : -1;
    r->tag = sendtag;
    r->k = k;
    r->rpeer = -1;
    if (active_send) ad__handles(t, sendbuf, sendcount, r->in, "ad_mpi_sendrecv");
  }
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int rc = MPI_Sendrecv(sa ? sv : sendbuf, sendcount, sa ? MPI_DOUBLE : sendtype, dest, sendtag,
                        ra ? (void *)rv : recvbuf, recvcount, ra ? MPI_DOUBLE : recvtype, source, recvtag, comm, &st);
  free(sv);
  if (rc != MPI_SUCCESS) {
    if (active_recv) recv_failed(c, seen, post, rc, &st);
    free(rv);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_sendrecv");
  }
  if (active_send) ad__mpi_counters.forward_bytes += (uint64_t)sendcount * sizeof(double);
  if (ra) {
    int n = received(&st);
    if (active_recv) {
      int rk = ad__recv_complete(c, post, st.MPI_SOURCE, st.MPI_TAG);
      ad__mpi_note_peer(seen, c, st.MPI_SOURCE, 1, st.MPI_TAG, n, rk);
      if (r) {
        r->rpeer = st.MPI_SOURCE;
        r->rtag = st.MPI_TAG;
        r->rk = rk;
        r->out = calloc((size_t)(n ? n : 1), sizeof *r->out);
        if (!r->out)
          ad__fail(t, AD_ERR_NOMEM, "ad_mpi_sendrecv: no memory for the record");
        else
          r->nout = n;
      }
    }
    ad__unpack(r && r->out ? t : NULL, recvbuf, n, rv, r && r->out ? r->out : NULL);
  }
  free(rv);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                            MPI_Comm comm, MPI_Status *status) {
  if (ad__dtype_any(1, type))
    return ad__dt_sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  if (!is_real(type)) return MPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  if (count < 0) return MPI_ERR_COUNT;
  /* The values go out from a copy, so the buffer can take the received ones. */
  ad_real *copy = malloc((size_t)(count ? count : 1) * sizeof *copy);
  if (!copy) return MPI_ERR_NO_MEM;
  memcpy(copy, buf, (size_t)count * sizeof *copy);
  int rc = ad_mpi_sendrecv(copy, count, type, dest, sendtag, buf, count, type, source, recvtag, comm, status);
  free(copy);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Nonblocking wrappers and requests                                         */
/* ------------------------------------------------------------------------ */

/* Every request lives in a slot; the user's ad_mpi_request names the slot and
 * its generation, so a stale copy of a completed request is caught. A
 * persistent request's slot stays live from its init call to
 * ad_mpi_request_free, inactive between a completion and the next start. A
 * message of ad_mpi_mprobe (is_msg) lives in a slot too, until it is
 * received. */
typedef struct rslot {
  int live;
  unsigned gen;
  MPI_Request mpi;
  int active, is_recv;
  ad__comm *c;
  ad_real *ubuf;
  int count;
  double *v;
  uint64_t post;
  ad_tape *tape; /* the tape that recorded the start, if any */
  uint32_t epoch;
  ad__mrec *start;
  int lost;               /* its start record was discarded (ad_tape_reset_to) */
  const ad__req_ops *ops; /* another kind of request (a nonblocking collective): its actions */
  void *ctx;
  int pers, started; /* persistent, and started since its last completion */
  int peer, tag;     /* persistent: destination, or source pattern, and tag */
  int orphan;        /* a send the user freed while active: goes when MPI is done with it */
  int is_msg;        /* a probed message not yet received */
  int cancelled;     /* a receive cancelled, waiting for its completion call */
  MPI_Message msg;
  const ad__preq_ops *pops; /* a persistent collective: how to start it */
  void *pctx;
  void (*then[2])(void *ctx, int ok); /* see ad__req_then, run in order */
  void *then_ctx[2];
  int outer; /* a start of a persistent request on a derived type: its slot + 1 (see pp2p) */
  int next_free;
} rslot;

static rslot *slots;
static void p2p_finalize(void);
static ad__mpi_chapter chapter = {NULL, NULL, p2p_finalize, NULL, 0};
static int nslots, capslots, free_slot = -1, norphans;

static void orphans_poll(void);

static int slot_new(void) {
  ad__mpi_chapter_join(&chapter); /* the slots are freed at MPI_Finalize */
  orphans_poll();
  int s = free_slot;
  if (s >= 0) {
    free_slot = slots[s].next_free;
  } else {
    if (nslots == capslots) {
      int ncap = capslots ? 2 * capslots : 16;
      rslot *n = realloc(slots, (size_t)ncap * sizeof *n);
      if (!n) return -1;
      slots = n;
      capslots = ncap;
    }
    s = nslots++;
    slots[s].gen = 0;
  }
  unsigned gen = slots[s].gen;
  memset(&slots[s], 0, sizeof slots[s]);
  slots[s].gen = gen;
  slots[s].live = 1;
  slots[s].mpi = MPI_REQUEST_NULL;
  slots[s].msg = MPI_MESSAGE_NULL;
  return s;
}

void ad__p2p_forget(const ad__mrec *r) {
  for (int s = 0; s < nslots; s++) {
    if (slots[s].live && slots[s].start == r) {
      slots[s].start = NULL;
      slots[s].lost = 1;
    }
  }
}

/* At MPI_Finalize: the table. The buffer of a request never completed may
 * still be MPI's, so it is kept (reachable) rather than freed. */
static void p2p_finalize(void) {
  for (int s = 0; s < nslots; s++) {
    if (!slots[s].live) continue;
    ad__mpi_keep(slots[s].v);
    if (slots[s].ops) slots[s].ops->failed(slots[s].ctx, MPI_ERR_PENDING);
    for (int i = 0; i < 2; i++)
      if (slots[s].then[i]) slots[s].then[i](slots[s].then_ctx[i], 0);
  }
  free(slots);
  slots = NULL;
  nslots = capslots = 0;
  free_slot = -1;
  norphans = 0;
}

static void slot_free(int s) {
  if (slots[s].pops) slots[s].pops->release(slots[s].pctx);
  slots[s].pops = NULL;
  free(slots[s].v);
  slots[s].v = NULL;
  slots[s].live = 0;
  slots[s].gen++;
  slots[s].next_free = free_slot;
  free_slot = s;
}

/* The request in slot s is finished: a persistent one becomes inactive,
 * anything else goes. Then its ad__req_then actions run (after the slot is
 * free, so that they may start requests of their own), told whether it
 * completed (ok) or failed. */
static void slot_retire(int s, int ok) {
  rslot *q = &slots[s];
  void (*then[2])(void *, int) = {q->then[0], q->then[1]};
  void *ctx[2] = {q->then_ctx[0], q->then_ctx[1]};
  q->then[0] = q->then[1] = NULL;
  if (q->pers && !q->orphan) {
    if (q->pops) { /* its nonblocking collective is done with */
      q->ops = NULL;
      q->ctx = NULL;
      q->active = 0;
    }
    q->started = 0;
    q->cancelled = 0;
    q->start = NULL;
    q->tape = NULL;
    q->lost = 0;
  } else {
    if (q->orphan) norphans--;
    if (q->pers && q->mpi != MPI_REQUEST_NULL) MPI_Request_free(&q->mpi);
    slot_free(s);
  }
  for (int i = 0; i < 2; i++)
    if (then[i]) then[i](ctx[i], ok);
}

/* The persistent request whose start runs (see start_one), -1 if none. */
static int pstarting = -1;

int ad__req_then(const ad_mpi_request *request, void (*fn)(void *ctx, int ok), void *ctx) {
  int starting = request->slot == AD__SLOT_STARTING, s = starting ? pstarting : request->slot;
  if (s < 0 || s >= nslots || !slots[s].live || (!starting && slots[s].gen != request->gen)) {
    fn(ctx, 1); /* nothing pending */
    return MPI_SUCCESS;
  }
  int i = slots[s].then[0] ? 1 : 0;
  if (slots[s].then[i]) return MPI_ERR_INTERN;
  slots[s].then[i] = fn;
  slots[s].then_ctx[i] = ctx;
  return MPI_SUCCESS;
}

/* Sends the user freed while active (ad_mpi_request_free): their buffers go
 * once MPI has finished with them. */
static void orphans_poll(void) {
  for (int s = 0; norphans > 0 && s < nslots; s++) {
    if (!slots[s].live || !slots[s].orphan) continue;
    int flag = 0, ok = 1;
    MPI_Status st;
    if (MPI_Test(&slots[s].mpi, &flag, &st) != MPI_SUCCESS) {
      ad__mpi_keep(slots[s].v); /* MPI may not be done with it */
      slots[s].v = NULL;
      flag = 1;
      ok = 0;
    }
    if (flag) slot_retire(s, ok);
  }
}

static void req_set(ad_mpi_request *q, int s) {
  q->mpi = slots[s].mpi;
  q->slot = s;
  q->gen = slots[s].gen;
}

static void req_clear(ad_mpi_request *q) {
  q->mpi = MPI_REQUEST_NULL;
  q->slot = -1;
  q->gen = 0;
}

/* After a completion of the request in slot s: the user's request names the
 * slot still if it is persistent, and is null otherwise. */
static void req_after(ad_mpi_request *q, int s) {
  if (s >= 0 && slots[s].live && slots[s].gen == q->gen && !slots[s].is_msg)
    q->mpi = slots[s].mpi;
  else
    req_clear(q);
}

/* 1 live slot, 0 a null request, -1 a request used after it completed. */
static int req_check(const ad_mpi_request *q) {
  if (q->slot < 0) return q->mpi == MPI_REQUEST_NULL ? 0 : -1;
  if (q->slot >= nslots || !slots[q->slot].live || slots[q->slot].gen != q->gen || slots[q->slot].is_msg ||
      slots[q->slot].orphan)
    return -1;
  return 1;
}

MPI_Request ad__p2p_request(int slot, unsigned gen) {
  if (slot < 0 || slot >= nslots || !slots[slot].live || slots[slot].gen != gen) return MPI_REQUEST_NULL;
  /* The persistent request holds the MPI request that completion calls use. */
  if (slots[slot].outer) return slots[slots[slot].outer - 1].mpi;
  return slots[slot].mpi;
}

/* Bad input: a sticky error on the recording tape (or the thread's error if
 * none records) with the message, and the MPI error code for the caller. */
static int refuse(int mpicode, const char *fmt, ...) {
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (seen)
    ad__fail(seen, AD_ERR_MPI, "%s", msg);
  else
    ad__fail_notape(AD_ERR_MPI, "%s", msg);
  return mpicode;
}

static int req_misuse(const char *fn) {
  return refuse(MPI_ERR_REQUEST, "%s: request was already completed or freed (a copy used twice?) or never started",
                fn);
}

int ad__req_new(ad_mpi_request *request, MPI_Request mpi, ad_tape *t, ad__mrec *start, const ad__req_ops *ops,
                void *ctx) {
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &slots[s];
  q->mpi = mpi;
  q->active = ops != NULL; /* without ops: a passive request, nothing to do at completion */
  q->ops = ops;
  q->ctx = ctx;
  if (t && start) {
    q->tape = t;
    q->epoch = t->rec.epoch;
    q->start = start;
  }
  req_set(request, s);
  return MPI_SUCCESS;
}

/* An active send from slot q starts: pack the values of buf, number the
 * message and record its start. */
static void send_start(rslot *q, const ad_real *buf, int dest, int tag, const char *fn) {
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  ad__pack(buf, q->count, q->v);
  if (dest == MPI_PROC_NULL) return;
  int k = ad__send_seq(q->c, dest, tag);
  ad__mpi_note_peer(seen, q->c, dest, 0, tag, q->count, k);
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_ISEND), q->c, q->count, 0) : NULL;
  if (r) {
    r->peer = dest;
    r->tag = tag;
    r->k = k;
    ad__handles(t, buf, q->count, r->in, fn);
    q->tape = t;
    q->epoch = t->rec.epoch;
    q->start = r;
  }
}

/* An active receive into slot s starts: its place in the receive order
 * (post, unless it has one already: an ad_mpi_imrecv), and its start
 * record. */
static void recv_start(int s, int source, int tag, int posted) {
  rslot *q = &slots[s];
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if (!posted) q->post = ad__recv_post(q->c, source, tag);
  ad__recv_attach(q->c, q->post, s, q->gen);
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_IRECV), q->c, 0, 0) : NULL;
  if (r) {
    q->tape = t;
    q->epoch = t->rec.epoch;
    q->start = r;
  }
}

/* Persistent requests on datatypes derived from AD_MPI_REAL: every start
 * runs the nonblocking call of types.c (isend, issend, ibsend, irsend or
 * irecv) on a request of its own, the start's inner request, whose MPI
 * request the persistent request holds while it is active; completing the
 * persistent request completes the inner one, which records and delivers as
 * a nonblocking call does. */
typedef struct pp2p {
  ad__dt_mpi_isend_fn mpifn; /* NULL: a receive */
  ad__dt_isend_fn fn;
  const char *name;
  void *buf;
  int count, peer, tag;
  MPI_Datatype type; /* a duplicate: the user may free theirs */
  MPI_Comm comm;
  int self; /* the persistent request's slot */
  ad_mpi_request inner;
} pp2p;

static void slot_complete(int s, const MPI_Status *st);
static void slot_failed(int s, int rc, const MPI_Status *st);

/* The slot of the start's inner request, -1 if it is gone. */
static int pp2p_inner(pp2p *p) {
  int s = p->inner.slot;
  if (s < 0 || s >= nslots || !slots[s].live || slots[s].gen != p->inner.gen) return -1;
  slots[s].mpi = MPI_REQUEST_NULL; /* completed, or freed by MPI, with the persistent request's */
  slots[s].outer = 0;
  return s;
}

static void pp2p_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  (void)t;
  (void)seen;
  (void)start;
  int s = pp2p_inner(ctx);
  if (s >= 0) slot_complete(s, st);
}

static void pp2p_failed(void *ctx, int rc) {
  if (rc == MPI_ERR_PENDING) return; /* MPI_Finalize: the inner slot is kept by p2p_finalize */
  int s = pp2p_inner(ctx);
  MPI_Status st;
  memset(&st, 0, sizeof st);
  st.MPI_SOURCE = st.MPI_TAG = -1;
  if (s >= 0) slot_failed(s, rc, &st);
}

static const ad__req_ops pp2p_ops = {pp2p_complete, pp2p_failed};

static int pp2p_start(void *pctx, MPI_Request *mpi, const ad__req_ops **ops, void **ctx, ad_tape **t,
                      ad__mrec **start) {
  pp2p *p = pctx;
  ad_mpi_request r = AD_MPI_REQUEST_NULL;
  int rc = p->mpifn ? ad__dt_isend(p->mpifn, p->fn, p->name, p->buf, p->count, p->type, p->peer, p->tag, p->comm, &r)
                    : ad__dt_irecv(p->buf, p->count, p->type, p->peer, p->tag, p->comm, &r);
  if (rc != MPI_SUCCESS) return rc;
  p->inner = r;
  if (r.slot >= 0) slots[r.slot].outer = p->self + 1;
  *mpi = r.mpi;
  *ops = &pp2p_ops;
  *ctx = p;
  *t = NULL; /* the inner request checks its own recording */
  *start = NULL;
  return MPI_SUCCESS;
}

static void pp2p_release(void *pctx) {
  pp2p *p = pctx;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Type_free(&p->type);
  free(p);
}

static const ad__preq_ops pp2p_pops = {pp2p_start, pp2p_release};

static int pp2p_init(ad__dt_mpi_isend_fn mpifn, ad__dt_isend_fn fn, const char *name, const void *buf, int count,
                     MPI_Datatype type, int peer, int tag, MPI_Comm comm, ad_mpi_request *request) {
  if (count < 0) return MPI_ERR_COUNT;
  pp2p *p = calloc(1, sizeof *p);
  if (!p) return MPI_ERR_NO_MEM;
  int rc = MPI_Type_dup(type, &p->type);
  if (rc != MPI_SUCCESS) {
    free(p);
    return rc;
  }
  p->mpifn = mpifn;
  p->fn = fn;
  p->name = name;
  p->buf = (void *)buf;
  p->count = count;
  p->peer = peer;
  p->tag = tag;
  p->comm = comm;
  rc = ad__preq_new(request, &pp2p_pops, p);
  if (rc != MPI_SUCCESS) {
    pp2p_release(p);
    return rc;
  }
  p->self = request->slot;
  return MPI_SUCCESS;
}

/* Slot s of a new request on active data: its communicator, the user's
 * buffer, partner and tag, and room for the values. MPI_SUCCESS, or an
 * error with the slot freed. */
static int slot_activate(int s, MPI_Comm comm, void *buf, int count, int peer, int tag, int is_recv) {
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) {
    slot_free(s);
    return err;
  }
  rslot *q = &slots[s];
  q->active = 1;
  q->is_recv = is_recv;
  q->c = c;
  q->count = count;
  q->ubuf = buf;
  q->peer = peer;
  q->tag = tag;
  if (!(q->v = scratch(count))) {
    slot_free(s);
    return MPI_ERR_NO_MEM;
  }
  return MPI_SUCCESS;
}

/* A new request in slot s once MPI's call returned rc: the user's, or freed. */
static int slot_hand(ad_mpi_request *request, int s, int rc) {
  if (rc != MPI_SUCCESS) {
    slot_free(s);
    return rc;
  }
  req_set(request, s);
  return MPI_SUCCESS;
}

/* MPI_Isend, MPI_Issend, MPI_Ibsend, MPI_Irsend, and the persistent
 * MPI_Send_init family, which has the same arguments. */
typedef int (*nbsend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

/* A nonblocking send (pers 0) or a persistent send's set-up (pers 1). */
static int isend_any(nbsend_fn fn, const char *name, int pers, const void *buf, int count, MPI_Datatype type, int dest,
                     int tag, MPI_Comm comm, ad_mpi_request *request) {
  int rc = ad__types_refuse(name, 1, type);
  /* A persistent send's buffer is read at each start, not here. */
  if (rc == MPI_SUCCESS && !is_real(type) && !pers) rc = ad__mpi_guard(name, "buffer", buf, count, type);
  if (rc != MPI_SUCCESS) return rc;
  if (count < 0) return MPI_ERR_COUNT;
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &slots[s];
  q->pers = pers;
  if (!is_real(type)) {
    rc = fn(buf, count, type, dest, tag, comm, &q->mpi);
  } else {
    if ((rc = slot_activate(s, comm, (void *)buf, count, dest, tag, 0)) != MPI_SUCCESS) return rc;
    q = &slots[s];
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (!pers) send_start(q, buf, dest, tag, name);
    rc = fn(q->v, count, MPI_DOUBLE, dest, tag, comm, &q->mpi);
    if (rc != MPI_SUCCESS)
      ad__mpi_forward_error(seen, rc, name);
    else if (!pers && dest != MPI_PROC_NULL)
      ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double);
  }
  return slot_hand(request, s, rc);
}

/* The send modes: every mode has a blocking, a nonblocking and a persistent
 * wrapper, made here from one list of the MPI calls they forward to. A
 * datatype built from AD_MPI_REAL goes to types.c, which sends the gathered
 * elements through the mode's wrapper on AD_MPI_REAL (for a persistent send,
 * at each start, through the nonblocking one). */
#define SEND_MODES(X)                                                                                                  \
  X(send, isend, send_init, MPI_Send, MPI_Isend, MPI_Send_init)                                                        \
  X(ssend, issend, ssend_init, MPI_Ssend, MPI_Issend, MPI_Ssend_init)                                                  \
  X(bsend, ibsend, bsend_init, MPI_Bsend, MPI_Ibsend, MPI_Bsend_init)                                                  \
  X(rsend, irsend, rsend_init, MPI_Rsend, MPI_Irsend, MPI_Rsend_init)

#define SEND_WRAPPERS(b, nb, pers, mpi_b, mpi_nb, mpi_pers)                                                            \
  int ad_mpi_##b(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {                    \
    if (ad__dtype_any(1, type)) return ad__dt_send(ad_mpi_##b, "ad_mpi_" #b, buf, count, type, dest, tag, comm);       \
    return send_any(mpi_b, "ad_mpi_" #b, buf, count, type, dest, tag, comm);                                           \
  }                                                                                                                    \
  int ad_mpi_##nb(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,                     \
                  ad_mpi_request *request) {                                                                           \
    if (ad__dtype_any(1, type))                                                                                        \
      return ad__dt_isend(mpi_nb, ad_mpi_##nb, "ad_mpi_" #nb, buf, count, type, dest, tag, comm, request);             \
    return isend_any(mpi_nb, "ad_mpi_" #nb, 0, buf, count, type, dest, tag, comm, request);                            \
  }                                                                                                                    \
  int ad_mpi_##pers(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,                   \
                    ad_mpi_request *request) {                                                                         \
    if (ad__dtype_any(1, type))                                                                                        \
      return pp2p_init(mpi_nb, ad_mpi_##nb, "ad_mpi_" #pers, buf, count, type, dest, tag, comm, request);              \
    return isend_any(mpi_pers, "ad_mpi_" #pers, 1, buf, count, type, dest, tag, comm, request);                        \
  }

SEND_MODES(SEND_WRAPPERS)

/* A nonblocking receive (pers 0) or a persistent receive's set-up (1): the
 * two receive forms that leave a request. */
static int irecv_any(const char *name, int pers, void *buf, int count, MPI_Datatype type, int source, int tag,
                     MPI_Comm comm, ad_mpi_request *request) {
  if (ad__dtype_any(1, type))
    return pers ? pp2p_init(NULL, NULL, name, buf, count, type, source, tag, comm, request)
                : ad__dt_irecv(buf, count, type, source, tag, comm, request);
  int rc = ad__types_refuse(name, 1, type);
  if (rc != MPI_SUCCESS) return rc;
  if (count < 0) return MPI_ERR_COUNT;
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &slots[s];
  q->pers = pers;
  MPI_Datatype mt = is_real(type) ? MPI_DOUBLE : type;
  if (!is_real(type) || source == MPI_PROC_NULL) {
    rc = pers ? MPI_Recv_init(buf, count, mt, source, tag, comm, &q->mpi)
              : MPI_Irecv(buf, count, mt, source, tag, comm, &q->mpi);
  } else {
    if ((rc = slot_activate(s, comm, buf, count, source, tag, 1)) != MPI_SUCCESS) return rc;
    q = &slots[s];
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (pers) {
      rc = MPI_Recv_init(q->v, count, MPI_DOUBLE, source, tag, comm, &q->mpi);
    } else {
      recv_start(s, source, tag, 0);
      rc = MPI_Irecv(q->v, count, MPI_DOUBLE, source, tag, comm, &q->mpi);
      if (rc != MPI_SUCCESS) ad__recv_complete(q->c, q->post, -2, -2);
    }
    if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, name);
  }
  return slot_hand(request, s, rc);
}

int ad_mpi_irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, ad_mpi_request *request) {
  return irecv_any("ad_mpi_irecv", 0, buf, count, type, source, tag, comm, request);
}
int ad_mpi_recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                     ad_mpi_request *request) {
  return irecv_any("ad_mpi_recv_init", 1, buf, count, type, source, tag, comm, request);
}

/* The request in slot s has completed with status st: deliver received
 * values and push the completion record (nothing for a receive that was
 * cancelled: its start record becomes no action). */
static void slot_deliver(int s, const MPI_Status *st) {
  rslot *q = &slots[s];
  if (!q->active) return;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  int recorded = q->start && q->tape == t && t && t->rec.epoch == q->epoch;
  if (q->cancelled) return; /* see ad_mpi_cancel */
  if (q->lost && seen) {
    ad__fail(seen, AD_ERR_MPI,
             "a request started while recording completed after ad_tape_reset_to discarded its start; the "
             "recording cannot be differentiated");
  } else if (q->start && !recorded) {
    if (seen) ad__fail(seen, AD_ERR_MPI, "a request started while recording completed on another tape or recording");
  }
  if (q->ops) {
    q->ops->complete(q->ctx, recorded ? t : NULL, seen, recorded ? q->start : NULL, st);
  } else if (q->is_recv) {
    ad__mrec *d = NULL;
    recv_finish(q->c, recorded ? t : NULL, seen, q->post, st, q->ubuf, q->v, received(st), AD__M_IRECV_DONE, &d);
    if (d && recorded) {
      d->link = q->start;
      q->start->link = d;
    }
  } else if (recorded) {
    ad__mrec *d = ad__mrec_push(t, ad__p2p_kind(AD__M_ISEND_DONE), q->c, 0, 0);
    if (d) {
      d->link = q->start;
      q->start->link = d;
    }
  }
}

/* The request in slot s has completed: deliver and retire it. An inactive
 * persistent request completes at once with an empty status and no record. */
static void slot_complete(int s, const MPI_Status *st) {
  if (slots[s].pers && !slots[s].started) return;
  slot_deliver(s, st);
  slot_retire(s, 1);
}

/* The request in slot s failed with error rc and MPI has freed it (or made
 * a persistent one inactive): retire the slot (see recv_failed). */
static void slot_failed(int s, int rc, const MPI_Status *st) {
  rslot *q = &slots[s];
  if (q->pers && !q->started) return;
  if (q->ops) {
    q->ops->failed(q->ctx, rc);
  } else if (q->active && q->is_recv) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    recv_failed(q->c, seen, q->post, rc, st);
  }
  slot_retire(s, 0);
}

/* MPI is done with a request that failed: it freed a nonpersistent one;
 * a persistent one stays, inactive. */
static int done_after_error(int s, MPI_Request mr) { return mr == MPI_REQUEST_NULL || slots[s].pers; }

/* A completion call failed for the single request q in slot s: report it on
 * the tape, and retire the slot if MPI is done with the request. */
static int single_failed(ad_mpi_request *q, int s, int rc, const MPI_Status *st, const char *fn) {
  ad_tape *seen;
  ad__mpi_tape(&seen);
  ad__mpi_forward_error(seen, rc, fn);
  if (done_after_error(s, slots[s].mpi)) {
    slot_failed(s, rc, st);
    req_after(q, s);
  }
  return rc;
}

int ad_mpi_wait(ad_mpi_request *request, MPI_Status *status) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_wait");
  if (c == 0) return MPI_Wait(&request->mpi, status);
  int s = request->slot;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int rc = MPI_Wait(&slots[s].mpi, &st);
  if (rc != MPI_SUCCESS) return single_failed(request, s, rc, &st, "ad_mpi_wait");
  slot_complete(s, &st);
  req_after(request, s);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_test(ad_mpi_request *request, int *flag, MPI_Status *status) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_test");
  if (c == 0) return MPI_Test(&request->mpi, flag, status);
  int s = request->slot;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int rc = MPI_Test(&slots[s].mpi, flag, &st);
  if (rc != MPI_SUCCESS) return single_failed(request, s, rc, &st, "ad_mpi_test");
  if (!*flag) return MPI_SUCCESS;
  slot_complete(s, &st);
  req_after(request, s);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

/* MPI request array view of user requests (null for null requests). */
static int gather_reqs(int count, ad_mpi_request reqs[], MPI_Request *mr, const char *fn) {
  for (int i = 0; i < count; i++) {
    int c = req_check(&reqs[i]);
    if (c < 0) return req_misuse(fn);
    mr[i] = c ? slots[reqs[i].slot].mpi : MPI_REQUEST_NULL;
  }
  return MPI_SUCCESS;
}

static void finish_one(ad_mpi_request *q, MPI_Request mr, const MPI_Status *st) {
  int s = q->slot;
  if (s >= 0) {
    slots[s].mpi = mr;
    slot_complete(s, st);
  }
  req_after(q, s);
}

/* Request i of a multiple completion call failed with error e (its status's
 * MPI_ERROR); retire it if MPI is done with it. */
static void fail_one(ad_mpi_request *q, MPI_Request mr, int e, const MPI_Status *st) {
  int s = q->slot;
  if (s < 0 || !done_after_error(s, mr)) return;
  slots[s].mpi = mr;
  slot_failed(s, e, st);
  req_after(q, s);
}

/* Waitall or testall failed with MPI_ERR_IN_STATUS: finish the requests that
 * completed, retire those that failed, leave the pending ones pending, and
 * pass the statuses (with their MPI_ERROR fields) on. */
static void finish_in_status(int count, ad_mpi_request reqs[], MPI_Request *mr, const int *live, MPI_Status *st,
                             MPI_Status *statuses) {
  for (int i = 0; i < count; i++) {
    if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st[i];
    if (!live[i] || st[i].MPI_ERROR == MPI_ERR_PENDING) continue;
    if (!slots[reqs[i].slot].pers && mr[i] != MPI_REQUEST_NULL) continue;
    if (st[i].MPI_ERROR == MPI_SUCCESS)
      finish_one(&reqs[i], mr[i], &st[i]);
    else
      fail_one(&reqs[i], mr[i], st[i].MPI_ERROR, &st[i]);
  }
}

static int in_status(int rc) {
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls == MPI_ERR_IN_STATUS;
}

/* Waitall and testall (flag non-NULL): complete every request, or none. */
static int complete_all(int count, ad_mpi_request reqs[], int *flag, MPI_Status *statuses, const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  MPI_Status *st = malloc((size_t)(count ? count : 1) * sizeof *st);
  int rc = mr && st ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  int live[count > 0 ? count : 1];
  for (int i = 0; rc == MPI_SUCCESS && i < count; i++) live[i] = reqs[i].slot >= 0;
  if (rc == MPI_SUCCESS) rc = flag ? MPI_Testall(count, mr, flag, st) : MPI_Waitall(count, mr, st);
  if (rc == MPI_SUCCESS && (!flag || *flag)) {
    for (int i = 0; i < count; i++) {
      if (live[i])
        finish_one(&reqs[i], mr[i], &st[i]);
      else
        req_clear(&reqs[i]);
      if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st[i];
    }
  } else if (rc != MPI_SUCCESS && rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    if (in_status(rc)) finish_in_status(count, reqs, mr, live, st, statuses);
  }
  free(mr);
  free(st);
  return rc;
}

int ad_mpi_waitall(int count, ad_mpi_request reqs[], MPI_Status *statuses) {
  return complete_all(count, reqs, NULL, statuses, "ad_mpi_waitall");
}

int ad_mpi_testall(int count, ad_mpi_request reqs[], int *flag, MPI_Status *statuses) {
  return complete_all(count, reqs, flag, statuses, "ad_mpi_testall");
}

/* Waitany and testany (flag non-NULL). */
static int complete_any(int count, ad_mpi_request reqs[], int *index, int *flag, MPI_Status *status, const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  int rc = mr ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int done = 1;
  if (rc == MPI_SUCCESS) rc = flag ? MPI_Testany(count, mr, index, flag, &st) : MPI_Waitany(count, mr, index, &st);
  if (rc == MPI_SUCCESS && flag) done = *flag;
  if (rc == MPI_SUCCESS && done) {
    if (*index != MPI_UNDEFINED) finish_one(&reqs[*index], mr[*index], &st);
    if (status != MPI_STATUS_IGNORE) *status = st;
  } else if (rc != MPI_SUCCESS && rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    /* The request that failed is named by index. */
    int i = *index;
    if (i >= 0 && i < count) fail_one(&reqs[i], mr[i], rc, &st);
  }
  free(mr);
  return rc;
}

int ad_mpi_waitany(int count, ad_mpi_request reqs[], int *index, MPI_Status *status) {
  return complete_any(count, reqs, index, NULL, status, "ad_mpi_waitany");
}

int ad_mpi_testany(int count, ad_mpi_request reqs[], int *index, int *flag, MPI_Status *status) {
  return complete_any(count, reqs, index, flag, status, "ad_mpi_testany");
}

/* Waitsome and testsome. */
static int complete_some(int count, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses, int test,
                         const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  MPI_Status *st = malloc((size_t)(count ? count : 1) * sizeof *st);
  int rc = mr && st ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS)
    rc = test ? MPI_Testsome(count, mr, outcount, indices, st) : MPI_Waitsome(count, mr, outcount, indices, st);
  if (rc == MPI_SUCCESS) {
    for (int j = 0; *outcount != MPI_UNDEFINED && j < *outcount; j++) {
      finish_one(&reqs[indices[j]], mr[indices[j]], &st[j]);
      if (statuses != MPI_STATUSES_IGNORE) statuses[j] = st[j];
    }
  } else if (rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    for (int j = 0; in_status(rc) && *outcount != MPI_UNDEFINED && j < *outcount; j++) {
      int i = indices[j];
      if (statuses != MPI_STATUSES_IGNORE) statuses[j] = st[j];
      if (st[j].MPI_ERROR == MPI_SUCCESS)
        finish_one(&reqs[i], mr[i], &st[j]);
      else
        fail_one(&reqs[i], mr[i], st[j].MPI_ERROR, &st[j]);
    }
  }
  free(mr);
  free(st);
  return rc;
}

int ad_mpi_waitsome(int incount, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses) {
  return complete_some(incount, reqs, outcount, indices, statuses, 0, "ad_mpi_waitsome");
}

int ad_mpi_testsome(int incount, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses) {
  return complete_some(incount, reqs, outcount, indices, statuses, 1, "ad_mpi_testsome");
}

/* ------------------------------------------------------------------------ */
/* Freeing and cancelling requests                                           */
/* ------------------------------------------------------------------------ */

int ad_mpi_request_free(ad_mpi_request *request) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_request_free");
  if (c == 0) return refuse(MPI_ERR_REQUEST, "ad_mpi_request_free: the request is null");
  int s = request->slot;
  rslot *q = &slots[s];
  if (q->ops)
    return refuse(MPI_ERR_REQUEST,
                  "ad_mpi_request_free: the request of a nonblocking collective, or an active persistent request on "
                  "a derived datatype, cannot be freed; complete it with a wait or test");
  if (q->pops && !q->started) { /* an inactive persistent collective: nothing of MPI's to free */
    slot_free(s);
    req_clear(request);
    return MPI_SUCCESS;
  }
  if (!q->active || (q->pers && !q->started)) {
    int rc = MPI_Request_free(&q->mpi);
    if (rc != MPI_SUCCESS) {
      ad_tape *seen;
      ad__mpi_tape(&seen);
      return ad__mpi_forward_error(seen, rc, "ad_mpi_request_free");
    }
    slot_free(s);
    req_clear(request);
    return MPI_SUCCESS;
  }
  if (q->is_recv)
    return refuse(MPI_ERR_REQUEST,
                  "ad_mpi_request_free: the receive is active; its values would arrive after nobody can differentiate "
                  "them (complete it with a wait or test, or cancel it first)");
  /* An active send: the message goes out all the same, so its completion
   * record is pushed here, and the slot stays until MPI is done with the
   * packed values. */
  MPI_Status st;
  memset(&st, 0, sizeof st);
  slot_deliver(s, &st);
  q->orphan = 1;
  q->started = 0;
  norphans++;
  req_clear(request);
  return MPI_SUCCESS;
}

int ad_mpi_cancel(ad_mpi_request *request) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_cancel");
  if (c == 0) return refuse(MPI_ERR_REQUEST, "ad_mpi_cancel: the request is null");
  rslot *q = &slots[request->slot];
  if (q->ops)
    return refuse(MPI_ERR_REQUEST, "ad_mpi_cancel: a nonblocking collective, or a request on a derived datatype, "
                                   "cannot be cancelled");
  if (q->pers && !q->started)
    return refuse(MPI_ERR_REQUEST, "ad_mpi_cancel: the persistent request is not active (not started)");
  if (!q->active) return MPI_Cancel(&q->mpi);
  if (!q->is_recv)
    return refuse(MPI_ERR_REQUEST,
                  "ad_mpi_cancel: a send of AD_MPI_REAL data cannot be cancelled (the receiver could not tell which "
                  "messages it missed)");
  if (q->cancelled) return MPI_SUCCESS; /* cancelled already */
  int flag = 0;
  MPI_Status st;
  int rc = MPI_Request_get_status(q->mpi, &flag, &st);
  if (rc == MPI_SUCCESS && flag)
    return refuse(MPI_ERR_REQUEST,
                  "ad_mpi_cancel: the receive has already matched a message; complete it with a wait or test");
  if (rc == MPI_SUCCESS) rc = MPI_Cancel(&q->mpi);
  /* A receive marked for cancellation completes without anybody else's
   * help; whether it was cancelled is known once it has. Find out now: a
   * cancelled receive then leaves the receive order at once (so that a
   * later receive's number does not wait for it), and its start record
   * becomes no action. One that matched meanwhile completes as usual in the
   * user's completion call. */
  while (rc == MPI_SUCCESS && !flag) rc = MPI_Request_get_status(q->mpi, &flag, &st);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_cancel");
  }
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  if (cancelled) {
    q->cancelled = 1;
    ad__recv_complete(q->c, q->post, -2, -2);
    if (q->start) ad__mrec_rekind(q->start, ad__p2p_kind(AD__M_CANCELLED));
    q->start = NULL;
  }
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Persistent requests                                                       */
/* ------------------------------------------------------------------------ */

/* 1 if the request can be started, else an MPI error code (negated: MPI
 * error codes are positive) after refusing. */
static int start_check(const ad_mpi_request *request, const char *fn) {
  int c = req_check(request);
  if (c < 0) return -req_misuse(fn);
  const rslot *q = c ? &slots[request->slot] : NULL;
  if (!q || !q->pers) return -refuse(MPI_ERR_REQUEST, "%s: not a persistent request", fn);
  if (q->started)
    return -refuse(MPI_ERR_REQUEST, "%s: the persistent request is active already (started twice without a completion)",
                   fn);
  return 1;
}

static int start_one(ad_mpi_request *request, const char *fn) {
  int c = start_check(request, fn);
  if (c < 0) return -c;
  int s = request->slot;
  rslot *q = &slots[s];
  if (q->pops) { /* a persistent collective: each start is a nonblocking collective */
    ad_tape *t = NULL;
    ad__mrec *rec = NULL;
    MPI_Request mq = MPI_REQUEST_NULL;
    const ad__req_ops *ops = NULL;
    void *ctx = NULL;
    /* The start may take slots of its own (the table may move). */
    pstarting = s;
    int rc = q->pops->start(q->pctx, &mq, &ops, &ctx, &t, &rec);
    pstarting = -1;
    if (rc != MPI_SUCCESS) return rc;
    q = &slots[s];
    q->mpi = mq;
    q->ops = ops;
    q->ctx = ctx;
    q->active = q->ops != NULL;
    q->tape = t && rec ? t : NULL;
    q->epoch = t && rec ? t->rec.epoch : 0;
    q->start = t ? rec : NULL;
    q->lost = 0;
    q->started = 1;
    request->mpi = q->mpi;
    return MPI_SUCCESS;
  }
  if (q->active) {
    if (q->is_recv)
      recv_start(s, q->peer, q->tag, 0);
    else
      send_start(q, q->ubuf, q->peer, q->tag, fn);
  }
  int rc = MPI_Start(&q->mpi);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (q->active && q->is_recv) ad__recv_complete(q->c, q->post, -2, -2);
    q->start = NULL;
    return ad__mpi_forward_error(seen, rc, fn);
  }
  q->started = 1;
  if (q->active && !q->is_recv && q->peer != MPI_PROC_NULL)
    ad__mpi_counters.forward_bytes += (uint64_t)q->count * sizeof(double);
  request->mpi = q->mpi;
  return MPI_SUCCESS;
}

int ad__preq_new(ad_mpi_request *request, const ad__preq_ops *pops, void *pctx) {
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  slots[s].pers = 1;
  slots[s].pops = pops;
  slots[s].pctx = pctx;
  req_set(request, s);
  return MPI_SUCCESS;
}

int ad_mpi_start(ad_mpi_request *request) { return start_one(request, "ad_mpi_start"); }

int ad_mpi_startall(int count, ad_mpi_request reqs[]) {
  if (count < 0) return MPI_ERR_COUNT;
  /* Nothing starts unless everything can. */
  for (int i = 0; i < count; i++) {
    int c = start_check(&reqs[i], "ad_mpi_startall");
    if (c < 0) return -c;
    for (int j = 0; j < i; j++)
      if (reqs[j].slot == reqs[i].slot)
        return refuse(MPI_ERR_REQUEST, "ad_mpi_startall: request %d is request %d again (started twice)", i, j);
  }
  for (int i = 0; i < count; i++) {
    int rc = start_one(&reqs[i], "ad_mpi_startall");
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Probes and matched receives                                               */
/* ------------------------------------------------------------------------ */

int ad_mpi_probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  int rc = MPI_Probe(source, tag, comm, status);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, "ad_mpi_probe");
  }
  return rc;
}

int ad_mpi_iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  int rc = MPI_Iprobe(source, tag, comm, flag, status);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, "ad_mpi_iprobe");
  }
  return rc;
}

/* A matched probe takes its message out of MPI's matching at probe time, so
 * that is where the message takes its place among the receives of its
 * stream: the probe posts an entry for exactly (source, tag) of the message,
 * and a later receive of that stream counts it as holding an earlier
 * message, whenever it completes. Whether the message is active is known
 * only at the receive: an active one completes the entry and takes its
 * number then, a passive one retires it without a number (see msg_passive). */
static int mprobe_any(int source, int tag, MPI_Comm comm, int *flag, ad_mpi_message *message, MPI_Status *status,
                      const char *fn) {
  ad_tape *seen;
  ad__mpi_tape(&seen);
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  MPI_Message m = MPI_MESSAGE_NULL;
  int rc;
  message->slot = -1;
  message->gen = 0;
  if (source == MPI_PROC_NULL) {
    rc = flag ? MPI_Improbe(source, tag, comm, flag, &m, status) : MPI_Mprobe(source, tag, comm, &m, status);
    message->mpi = m;
    return rc == MPI_SUCCESS ? rc : ad__mpi_forward_error(seen, rc, fn);
  }
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rc = flag ? MPI_Improbe(source, tag, comm, flag, &m, &st) : MPI_Mprobe(source, tag, comm, &m, &st);
  if (rc != MPI_SUCCESS || (flag && !*flag)) {
    slot_free(s);
    message->mpi = MPI_MESSAGE_NULL;
    return rc == MPI_SUCCESS ? rc : ad__mpi_forward_error(seen, rc, fn);
  }
  rslot *q = &slots[s];
  q->is_msg = 1;
  q->c = c;
  q->msg = m;
  q->post = ad__recv_post(c, st.MPI_SOURCE, st.MPI_TAG);
  message->mpi = m;
  message->slot = s;
  message->gen = q->gen;
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_mprobe(int source, int tag, MPI_Comm comm, ad_mpi_message *message, MPI_Status *status) {
  return mprobe_any(source, tag, comm, NULL, message, status, "ad_mpi_mprobe");
}

int ad_mpi_improbe(int source, int tag, MPI_Comm comm, int *flag, ad_mpi_message *message, MPI_Status *status) {
  return mprobe_any(source, tag, comm, flag, message, status, "ad_mpi_improbe");
}

/* 1 a probed message's slot, 0 MPI_MESSAGE_NO_PROC, -1 a message received
 * already (a stale copy) or a null one. */
static int msg_check(const ad_mpi_message *m) {
  if (m->slot < 0) return m->mpi == MPI_MESSAGE_NO_PROC ? 0 : -1;
  if (m->slot >= nslots || !slots[m->slot].live || slots[m->slot].gen != m->gen || !slots[m->slot].is_msg) return -1;
  return 1;
}

static int msg_misuse(const char *fn) {
  return refuse(MPI_ERR_REQUEST, "%s: message was already received (a copy used twice?) or never probed", fn);
}

/* A probed message received as passive data: its entry retires without a
 * number. A later active receive of the same stream that completed before
 * this counted it as an earlier active message, which the sender did not:
 * that receive's number is off by one, so the recording fails instead. */
static void msg_passive(ad__comm *c, uint64_t post, const char *fn) {
  if (post >= c->rq_base && post < c->rq_next) {
    const ad__rentry *e = &c->rq[post - c->rq_base];
    for (size_t i = (size_t)(post - c->rq_base) + 1; i < c->rq_n; i++) {
      if (c->rq[i].done && c->rq[i].asrc == e->src && c->rq[i].atag == e->tag) {
        refuse(MPI_ERR_OTHER,
               "%s: a message probed with ad_mpi_mprobe was received as passive data after a later active message "
               "of its source and tag; that message's sequence number is lost (receive probed messages in order)",
               fn);
        break;
      }
    }
  }
  ad__recv_complete(c, post, -2, -2);
}

int ad__msg_take(ad_mpi_message *message, const char *fn, ad__comm **c, uint64_t *post, MPI_Message *m) {
  int mc = msg_check(message);
  if (mc < 0) return -msg_misuse(fn);
  if (mc == 0) return 0;
  int s = message->slot;
  *c = slots[s].c;
  *post = slots[s].post;
  *m = slots[s].msg;
  slot_free(s);
  message->mpi = MPI_MESSAGE_NULL;
  message->slot = -1;
  message->gen = 0;
  return 1;
}

int ad_mpi_mrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, MPI_Status *status) {
  if (ad__dtype_any(1, type)) return ad__dt_mrecv(buf, count, type, message, status);
  int rc = ad__types_refuse("ad_mpi_mrecv", 1, type);
  if (rc != MPI_SUCCESS) return rc;
  int mc = msg_check(message);
  if (mc < 0) return msg_misuse("ad_mpi_mrecv");
  if (mc == 0) return MPI_Mrecv(buf, count, is_real(type) ? MPI_DOUBLE : type, &message->mpi, status);
  if (count < 0) return MPI_ERR_COUNT;
  int s = message->slot;
  ad__comm *c = slots[s].c;
  uint64_t post = slots[s].post;
  MPI_Message m = slots[s].msg;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  double *v = is_real(type) ? scratch(count) : NULL;
  if (is_real(type) && !v) return MPI_ERR_NO_MEM;
  slot_free(s);
  message->mpi = MPI_MESSAGE_NULL;
  message->slot = -1;
  message->gen = 0;
  if (!is_real(type)) {
    msg_passive(c, post, "ad_mpi_mrecv");
    rc = MPI_Mrecv(buf, count, type, &m, status);
    return rc == MPI_SUCCESS ? rc : ad__mpi_forward_error(seen, rc, "ad_mpi_mrecv");
  }
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  rc = MPI_Mrecv(v, count, MPI_DOUBLE, &m, &st);
  if (rc != MPI_SUCCESS) {
    recv_failed(c, seen, post, rc, &st);
    free(v);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_mrecv");
  }
  recv_finish(c, t, seen, post, &st, buf, v, received(&st), AD__M_RECV, NULL);
  free(v);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_imrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__dt_imrecv(buf, count, type, message, request);
  int rc = ad__types_refuse("ad_mpi_imrecv", 1, type);
  if (rc != MPI_SUCCESS) return rc;
  int mc = msg_check(message);
  if (mc < 0) return msg_misuse("ad_mpi_imrecv");
  if (count < 0) return MPI_ERR_COUNT;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  int s;
  if (mc == 0) {
    if ((s = slot_new()) < 0) return MPI_ERR_NO_MEM;
    rc = MPI_Imrecv(buf, count, is_real(type) ? MPI_DOUBLE : type, &message->mpi, &slots[s].mpi);
  } else {
    /* The message's slot becomes the request's. */
    s = message->slot;
    rslot *q = &slots[s];
    MPI_Message m = q->msg;
    q->is_msg = 0;
    q->msg = MPI_MESSAGE_NULL;
    q->gen++; /* the message's copies are stale now */
    message->mpi = MPI_MESSAGE_NULL;
    message->slot = -1;
    message->gen = 0;
    if (!is_real(type)) {
      msg_passive(q->c, q->post, "ad_mpi_imrecv");
      rc = MPI_Imrecv(buf, count, type, &m, &q->mpi);
    } else if (!(q->v = scratch(count))) {
      ad__recv_complete(q->c, q->post, -2, -2);
      slot_free(s);
      return MPI_ERR_NO_MEM;
    } else {
      q->active = 1;
      q->is_recv = 1;
      q->ubuf = buf;
      q->count = count;
      recv_start(s, 0, 0, 1);
      rc = MPI_Imrecv(q->v, count, MPI_DOUBLE, &m, &q->mpi);
      if (rc != MPI_SUCCESS) ad__recv_complete(q->c, q->post, -2, -2);
    }
  }
  if (rc != MPI_SUCCESS) {
    slot_free(s);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_imrecv");
  }
  req_set(request, s);
  return MPI_SUCCESS;
}
