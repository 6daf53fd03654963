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
 * buffering. */
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

int ad__p2p_reverse(ad_tape *t, ad__mrec *r) {
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
  default:
    return -1;
  }
}

int ad__p2p_forward(ad_tape *t, ad__mrec *r) {
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
  default:
    return -1;
  }
}

/* ------------------------------------------------------------------------ */
/* Blocking wrappers                                                         */
/* ------------------------------------------------------------------------ */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

static int send_any(send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                    MPI_Comm comm) {
  if (!is_real(type)) return fn(buf, count, type, dest, tag, comm);
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
    ad__mrec *r = t ? ad__mrec_push(t, AD__M_SEND, c, count, 0) : NULL;
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

int ad_mpi_send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_send(ad_mpi_send, "ad_mpi_send", buf, count, type, dest, tag, comm);
  return send_any(MPI_Send, "ad_mpi_send", buf, count, type, dest, tag, comm);
}
int ad_mpi_ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_send(ad_mpi_ssend, "ad_mpi_ssend", buf, count, type, dest, tag, comm);
  return send_any(MPI_Ssend, "ad_mpi_ssend", buf, count, type, dest, tag, comm);
}
int ad_mpi_bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_send(ad_mpi_bsend, "ad_mpi_bsend", buf, count, type, dest, tag, comm);
  return send_any(MPI_Bsend, "ad_mpi_bsend", buf, count, type, dest, tag, comm);
}
int ad_mpi_rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ad__dtype_any(1, type)) return ad__dt_send(ad_mpi_rsend, "ad_mpi_rsend", buf, count, type, dest, tag, comm);
  return send_any(MPI_Rsend, "ad_mpi_rsend", buf, count, type, dest, tag, comm);
}

/* Finish an active receive of n values from (asrc, atag): sequence it, and
 * record it with fresh handles for the received elements. */
static void recv_finish(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st, ad_real *buf,
                        const double *v, int n, int kind, ad__mrec **rec) {
  int k = ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t ? ad__mrec_push(t, kind, c, 0, n) : NULL;
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
  ad__mrec *r =
      t && (active_send || active_recv) ? ad__mrec_push(t, AD__M_SENDRECV, c, active_send ? sendcount : 0, 0) : NULL;
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
 * its generation, so a stale copy of a completed request is caught. */
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
  void (*then[2])(void *ctx, int ok); /* see ad__req_then, run in order */
  void *then_ctx[2];
  int next_free;
} rslot;

static rslot *slots;
static int nslots, capslots, free_slot = -1;

static int slot_new(void) {
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
void ad__p2p_finalize(void) {
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
}

static void slot_free(int s) {
  free(slots[s].v);
  slots[s].v = NULL;
  slots[s].live = 0;
  slots[s].gen++;
  slots[s].next_free = free_slot;
  free_slot = s;
}

/* Retire slot s, then run its ad__req_then action (after the slot is free,
 * so that the action may start requests of its own). */
static void slot_retire(int s, int ok) {
  void (*then[2])(void *, int) = {slots[s].then[0], slots[s].then[1]};
  void *ctx[2] = {slots[s].then_ctx[0], slots[s].then_ctx[1]};
  slot_free(s);
  for (int i = 0; i < 2; i++)
    if (then[i]) then[i](ctx[i], ok);
}

int ad__req_then(const ad_mpi_request *request, void (*fn)(void *ctx, int ok), void *ctx) {
  int s = request->slot;
  if (s < 0 || s >= nslots || !slots[s].live || slots[s].gen != request->gen) {
    fn(ctx, 1); /* nothing pending */
    return MPI_SUCCESS;
  }
  int i = slots[s].then[0] ? 1 : 0;
  if (slots[s].then[i]) return MPI_ERR_INTERN;
  slots[s].then[i] = fn;
  slots[s].then_ctx[i] = ctx;
  return MPI_SUCCESS;
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

/* 1 live slot, 0 a null request, -1 a request used after it completed. */
static int req_check(const ad_mpi_request *q) {
  if (q->slot < 0) return q->mpi == MPI_REQUEST_NULL ? 0 : -1;
  if (q->slot >= nslots || !slots[q->slot].live || slots[q->slot].gen != q->gen) return -1;
  return 1;
}

MPI_Request ad__p2p_request(int slot, unsigned gen) {
  if (slot < 0 || slot >= nslots || !slots[slot].live || slots[slot].gen != gen) return MPI_REQUEST_NULL;
  return slots[slot].mpi;
}

static int req_misuse(const char *fn) {
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (seen)
    ad__fail(seen, AD_ERR_MPI, "%s: request was already completed (a copy used twice?) or never started", fn);
  else
    ad__fail_notape(AD_ERR_MPI, "%s: request was already completed (a copy used twice?) or never started", fn);
  return MPI_ERR_REQUEST;
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

int ad_mpi_isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                 ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__dt_isend(buf, count, type, dest, tag, comm, request);
  if (count < 0) return MPI_ERR_COUNT;
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &slots[s];
  int rc;
  if (!is_real(type)) {
    rc = MPI_Isend(buf, count, type, dest, tag, comm, &q->mpi);
  } else {
    int err;
    ad__comm *c = ad__mpi_comm(comm, &err);
    if (!c) {
      slot_free(s);
      return err;
    }
    ad_tape *seen, *t = ad__mpi_tape(&seen);
    q->active = 1;
    q->c = c;
    if (!(q->v = scratch(count))) {
      slot_free(s);
      return MPI_ERR_NO_MEM;
    }
    ad__pack(buf, count, q->v);
    if (dest != MPI_PROC_NULL) {
      int k = ad__send_seq(c, dest, tag);
      ad__mpi_note_peer(seen, c, dest, 0, tag, count, k);
      ad__mrec *r = t ? ad__mrec_push(t, AD__M_ISEND, c, count, 0) : NULL;
      if (r) {
        r->peer = dest;
        r->tag = tag;
        r->k = k;
        ad__handles(t, buf, count, r->in, "ad_mpi_isend");
        q->tape = t;
        q->epoch = t->rec.epoch;
        q->start = r;
      }
    }
    rc = MPI_Isend(q->v, count, MPI_DOUBLE, dest, tag, comm, &q->mpi);
    if (rc != MPI_SUCCESS)
      ad__mpi_forward_error(seen, rc, "ad_mpi_isend");
    else if (dest != MPI_PROC_NULL)
      ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double);
  }
  if (rc != MPI_SUCCESS) {
    slot_free(s);
    return rc;
  }
  req_set(request, s);
  return MPI_SUCCESS;
}

int ad_mpi_irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__dt_irecv(buf, count, type, source, tag, comm, request);
  if (count < 0) return MPI_ERR_COUNT;
  int s = slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &slots[s];
  int rc;
  if (!is_real(type) || source == MPI_PROC_NULL) {
    rc = MPI_Irecv(buf, count, is_real(type) ? MPI_DOUBLE : type, source, tag, comm, &q->mpi);
  } else {
    int err;
    ad__comm *c = ad__mpi_comm(comm, &err);
    if (!c) {
      slot_free(s);
      return err;
    }
    ad_tape *seen, *t = ad__mpi_tape(&seen);
    q->active = 1;
    q->is_recv = 1;
    q->c = c;
    q->ubuf = buf;
    q->count = count;
    if (!(q->v = scratch(count))) {
      slot_free(s);
      return MPI_ERR_NO_MEM;
    }
    q->post = ad__recv_post(c, source, tag);
    ad__recv_attach(c, q->post, s, q->gen);
    ad__mrec *r = t ? ad__mrec_push(t, AD__M_IRECV, c, 0, 0) : NULL;
    if (r) {
      q->tape = t;
      q->epoch = t->rec.epoch;
      q->start = r;
    }
    rc = MPI_Irecv(q->v, count, MPI_DOUBLE, source, tag, comm, &q->mpi);
    if (rc != MPI_SUCCESS) {
      ad__recv_complete(c, q->post, -2, -2);
      ad__mpi_forward_error(seen, rc, "ad_mpi_irecv");
    }
  }
  if (rc != MPI_SUCCESS) {
    slot_free(s);
    return rc;
  }
  req_set(request, s);
  return MPI_SUCCESS;
}

/* The request in slot s has completed with status st: deliver received
 * values and push the completion record. */
static void slot_complete(int s, const MPI_Status *st) {
  rslot *q = &slots[s];
  if (q->active) {
    ad_tape *seen, *t = ad__mpi_tape(&seen);
    int recorded = q->start && q->tape == t && t && t->rec.epoch == q->epoch;
    if (q->lost && seen) {
      ad__fail(seen, AD_ERR_MPI,
               "a request started while recording completed after ad_tape_reset_to discarded its start; the "
               "recording cannot be differentiated");
    } else if (q->start && !recorded) {
      ad_tape *victim = seen ? seen : NULL;
      if (victim)
        ad__fail(victim, AD_ERR_MPI, "a request started while recording completed on another tape or recording");
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
      ad__mrec *d = ad__mrec_push(t, AD__M_ISEND_DONE, q->c, 0, 0);
      if (d) {
        d->link = q->start;
        q->start->link = d;
      }
    }
  }
  slot_retire(s, 1);
}

/* The request in slot s failed with error rc and MPI has freed it: retire
 * the slot (see recv_failed). */
static void slot_failed(int s, int rc, const MPI_Status *st) {
  rslot *q = &slots[s];
  if (q->ops) {
    q->ops->failed(q->ctx, rc);
  } else if (q->active && q->is_recv) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    recv_failed(q->c, seen, q->post, rc, st);
  }
  slot_retire(s, 0);
}

/* A completion call failed for the single request q in slot s: report it on
 * the tape, and retire the slot if MPI is done with the request. */
static int single_failed(ad_mpi_request *q, int s, int rc, const MPI_Status *st, const char *fn) {
  ad_tape *seen;
  ad__mpi_tape(&seen);
  ad__mpi_forward_error(seen, rc, fn);
  if (slots[s].mpi == MPI_REQUEST_NULL) {
    slot_failed(s, rc, st);
    req_clear(q);
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
  req_clear(request);
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
  req_clear(request);
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
  if (q->slot >= 0) {
    slots[q->slot].mpi = mr;
    slot_complete(q->slot, st);
  }
  req_clear(q);
}

/* Waitall or testall failed with MPI_ERR_IN_STATUS: finish the requests that
 * completed, retire those that failed, leave the pending ones pending, and
 * pass the statuses (with their MPI_ERROR fields) on. */
static void finish_in_status(int count, ad_mpi_request reqs[], MPI_Request *mr, const int *live, MPI_Status *st,
                             MPI_Status *statuses) {
  for (int i = 0; i < count; i++) {
    if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st[i];
    if (!live[i] || mr[i] != MPI_REQUEST_NULL) continue;
    if (st[i].MPI_ERROR == MPI_SUCCESS) {
      finish_one(&reqs[i], mr[i], &st[i]);
    } else {
      slots[reqs[i].slot].mpi = MPI_REQUEST_NULL;
      slot_failed(reqs[i].slot, st[i].MPI_ERROR, &st[i]);
      req_clear(&reqs[i]);
    }
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

int ad_mpi_waitany(int count, ad_mpi_request reqs[], int *index, MPI_Status *status) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  int rc = mr ? gather_reqs(count, reqs, mr, "ad_mpi_waitany") : MPI_ERR_NO_MEM;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  if (rc == MPI_SUCCESS) rc = MPI_Waitany(count, mr, index, &st);
  if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) {
    finish_one(&reqs[*index], mr[*index], &st);
    if (status != MPI_STATUS_IGNORE) *status = st;
  } else if (rc != MPI_SUCCESS && rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, "ad_mpi_waitany");
    /* The request that failed is named by index and freed by MPI. */
    int i = *index;
    if (i >= 0 && i < count && reqs[i].slot >= 0 && mr[i] == MPI_REQUEST_NULL) {
      slots[reqs[i].slot].mpi = MPI_REQUEST_NULL;
      slot_failed(reqs[i].slot, rc, &st);
      req_clear(&reqs[i]);
    }
  }
  free(mr);
  return rc;
}
