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

#include "p2p_impl.h"

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

double *ad__p2p_scratch(int n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(double)); }

/* A nonblocking pair's sweep receive, posted at one of its records and
 * finished at the other: n values of the message that record m describes
 * (was_recv: m received it), into h->sbuf, which h holds until then. From
 * a null partner: zeros. */
static int post_held(ad_tape *t, ad__mrec *h, const ad__mrec *m, int n, int was_recv, const char *what) {
  if (!(h->sbuf = ad__p2p_scratch(n))) return AD_ERR_NOMEM;
  if (m->peer == MPI_PROC_NULL) {
    memset(h->sbuf, 0, (size_t)n * sizeof(double));
    return AD_OK;
  }
  int stag = ad__sweep_tag(t, m->c, m->peer, m->tag, m->k, was_recv);
  if (stag < 0) return AD_ERR_MPI;
  int e = MPI_Irecv(h->sbuf, n, MPI_DOUBLE, m->peer, stag, h->c->priv, &h->sreq);
  return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, what);
}

/* Its finish: wait for the n values from peer and check their number; h
 * keeps the buffer for the caller. */
static int wait_held(ad_tape *t, ad__mrec *h, int n, int peer, const char *what) {
  int rc = AD_OK;
  if (h->sreq != MPI_REQUEST_NULL) {
    MPI_Status st;
    rc = ad__mpi_wait(t, &h->sreq, &st, what);
    if (rc == AD_OK) rc = count_check(t, &st, n, peer, what);
  }
  ad__mpi_abandon(&h->sreq, 1); /* after a timeout, before sbuf goes */
  return rc;
}

/* The two sweeps mirror each other: the reverse sweep (tan 0) moves a
 * message's adjoint from its receiver back to its sender, the tangent sweep
 * (tan 1) moves its tangent along with it. So a record's sweep sends the
 * adjoints of what it received, or the tangents of what it sent, and lands
 * what it receives on the other handles: added to the adjoints of what it
 * sent, or set as the tangents of what it received. */
static const char *const sweep_name[2] = {"adjoint", "tangent"};

static void sweep_land(ad_tape *t, const ad__mrec *r, int tan, const double *buf) {
  if (tan)
    ad__tan_set(t, r->out, r->nout, buf);
  else
    ad__adj_add(t, r->in, r->nin, buf, NULL);
}

/* The record's sweep message to peer (tag and sequence k of the recorded
 * message it answers or follows). */
static int sweep_out(ad_tape *t, const ad__mrec *r, int tan, int peer, int tag, int k) {
  int n = tan ? r->nin : r->nout;
  double *buf = ad__p2p_scratch(n);
  if (!buf) return AD_ERR_NOMEM;
  if (tan)
    ad__tan_get(t, r->in, n, buf);
  else
    ad__adj_take(t, r->out, n, buf);
  int rc = sweep_isend(t, r, buf, n, peer, tag, k, !tan,
                       tan ? &ad__mpi_counters.tangent_bytes : &ad__mpi_counters.adjoint_bytes);
  free(buf);
  return rc;
}

/* The record's sweep message from peer, landed. An empty message still has
 * a sweep message, which the partner sends: it is received whatever the
 * count (sweep_recv skips a half that was not active). */
static int sweep_in(ad_tape *t, const ad__mrec *r, int tan, int peer, int tag, int k, const char *message) {
  int n = tan ? r->nout : r->nin;
  double *buf = ad__p2p_scratch(n);
  if (!buf) return AD_ERR_NOMEM;
  char what[80];
  snprintf(what, sizeof what, "the %s of a %s", sweep_name[tan], message);
  int rc = sweep_recv(t, r, buf, n, peer, tag, k, tan, what);
  if (rc == AD_OK) sweep_land(t, r, tan, buf);
  free(buf);
  return rc;
}

/* A nonblocking pair's sweep receive, finished at its second record: h holds
 * the buffer posted at the first (post_held), r's handles take the values. */
static int sweep_in_held(ad_tape *t, ad__mrec *h, const ad__mrec *r, int tan, const char *message) {
  char what[80];
  snprintf(what, sizeof what, "the %s of an %s", sweep_name[tan], message);
  int rc = wait_held(t, h, tan ? r->nout : r->nin, r->peer, what);
  if (rc == AD_OK && h->sbuf) sweep_land(t, r, tan, h->sbuf);
  free(h->sbuf);
  h->sbuf = NULL;
  return rc;
}

/* A nonblocking start record whose completion was never recorded. */
static int sweep_unfinished(ad_tape *t, const char *fn, const char *how) {
  ad__pending(t, AD_ERR_MPI, "an %s recorded on this tape was never completed%s while recording", fn, how);
  return AD_ERR_MPI;
}

static int p2p_reverse(ad_tape *t, ad__mrec *r) {
  int rc;
  switch (r->kind) {
  case AD__M_SEND:
    return sweep_in(t, r, 0, r->peer, r->tag, r->k, "sent message");
  case AD__M_RECV:
  case AD__M_IRECV_DONE:
    return sweep_out(t, r, 0, r->peer, r->tag, r->k);
  case AD__M_ISEND_DONE:
    return r->link ? post_held(t, r->link, r->link, r->link->nin, 0, "posting the adjoint receive of an isend") : AD_OK;
  case AD__M_ISEND:
    return r->link ? sweep_in_held(t, r, r, 0, "isend message")
                   : sweep_unfinished(t, "ad_mpi_isend", " (wait or test)");
  case AD__M_IRECV:
    return r->link ? AD_OK : sweep_unfinished(t, "ad_mpi_irecv", " (wait or test)");
  case AD__M_SENDRECV:
    rc = sweep_out(t, r, 0, r->rpeer, r->rtag, r->rk);
    return rc == AD_OK ? sweep_in(t, r, 0, r->peer, r->tag, r->k, "sendrecv message") : rc;
  default: /* AD__M_CANCELLED: a receive that never was */
    return AD_OK;
  }
}

static int p2p_tangent(ad_tape *t, ad__mrec *r) {
  int rc;
  switch (r->kind) {
  case AD__M_SEND:
  case AD__M_ISEND:
    return sweep_out(t, r, 1, r->peer, r->tag, r->k);
  case AD__M_RECV:
    return sweep_in(t, r, 1, r->peer, r->tag, r->k, "received message");
  case AD__M_ISEND_DONE:
    return AD_OK;
  case AD__M_IRECV:
    return r->link ? post_held(t, r, r->link, r->link->nout, 1, "posting the tangent receive of an irecv")
                   : sweep_unfinished(t, "ad_mpi_irecv", "");
  case AD__M_IRECV_DONE:
    return r->link && r->link->sbuf ? sweep_in_held(t, r->link, r, 1, "irecv message") : AD_OK;
  case AD__M_SENDRECV:
    rc = sweep_out(t, r, 1, r->peer, r->tag, r->k);
    return rc == AD_OK ? sweep_in(t, r, 1, r->rpeer, r->rtag, r->rk, "sendrecv message") : rc;
  default: /* AD__M_CANCELLED: a receive that never was */
    return AD_OK;
  }
}

/* Nonblocking starts leave a request in a slot that points back at them
 * (see ad__req_forget); a cancelled receive's start becomes AD__M_CANCELLED,
 * with no action. */
static void p2p_lost(const ad__mrec *r) {
  if (r->kind == AD__M_ISEND || r->kind == AD__M_IRECV) ad__req_forget(r);
}

const ad__mactions ad__p2p_actions = {p2p_reverse, p2p_tangent, p2p_lost, NULL};

/* ------------------------------------------------------------------------ */
/* Blocking wrappers                                                         */
/* ------------------------------------------------------------------------ */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);

/* What a blocking call on active data needs: its communicator's record, the
 * tapes, and room for its count values. MPI_SUCCESS, or the error to return. */
static int p2p_begin(MPI_Comm comm, int count, ad__comm **c, ad_tape **t, ad_tape **seen, double **v) {
  *c = NULL;
  *t = *seen = NULL;
  *v = NULL;
  if (count < 0) return MPI_ERR_COUNT;
  int err;
  if (!(*c = ad__mpi_comm(comm, &err))) return err;
  *t = ad__mpi_tape(seen);
  return (*v = ad__p2p_scratch(count)) ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

static int send_any(send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                    MPI_Comm comm) {
  if (!is_real(type)) {
    int bad = ad__mpi_guard(name, "buffer", buf, count, type);
    return bad != MPI_SUCCESS ? bad : fn(buf, count, type, dest, tag, comm);
  }
  ad__comm *c;
  ad_tape *t, *seen;
  double *v;
  int e = p2p_begin(comm, count, &c, &t, &seen, &v);
  if (e != MPI_SUCCESS) return e;
  ad__pack(buf, count, v);
  ad__mpi_send_record(c, t, seen, dest, tag, buf, count, AD__M_SEND, name);
  int rc = fn(v, count, MPI_DOUBLE, dest, tag, comm);
  free(v);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, name);
  if (dest != MPI_PROC_NULL) ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double);
  return MPI_SUCCESS;
}

/* A blocking receive into v (of post) returned rc with status st: its
 * record and delivery into buf, or its failure; v is freed. */
static int recv_done(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, int rc, const MPI_Status *st, ad_real *buf,
                     double *v, MPI_Status *status, const char *fn) {
  if (rc != MPI_SUCCESS) {
    ad__mpi_recv_failed(c, seen, post, rc, st);
    free(v);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  ad__mpi_recv_deliver(c, t, seen, post, st, buf, v, AD__M_RECV);
  free(v);
  if (status != MPI_STATUS_IGNORE) *status = *st;
  return MPI_SUCCESS;
}

int ad_mpi_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  if (ad__dtype_any(1, type)) return ad__handoff.dt_recv(buf, count, type, source, tag, comm, status);
  if (!is_real(type) || source == MPI_PROC_NULL)
    return MPI_Recv(buf, count, type == AD_MPI_REAL ? MPI_DOUBLE : type, source, tag, comm, status);
  ad__comm *c;
  ad_tape *t, *seen;
  double *v;
  int e = p2p_begin(comm, count, &c, &t, &seen, &v);
  if (e != MPI_SUCCESS) return e;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  uint64_t post = ad__recv_post(c, source, tag);
  int rc = MPI_Recv(v, count, MPI_DOUBLE, source, tag, comm, &st);
  return recv_done(c, t, seen, post, rc, &st, buf, v, status, "ad_mpi_recv");
}

int ad_mpi_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (ad__dtype_any(2, sendtype, recvtype))
    return ad__handoff.dt_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                   recvtag, comm, status);
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
  double *sv = sa ? ad__p2p_scratch(sendcount) : NULL, *rv = ra ? ad__p2p_scratch(recvcount) : NULL;
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
    if (active_recv) ad__mpi_recv_failed(c, seen, post, rc, &st);
    free(rv);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_sendrecv");
  }
  if (active_send) ad__mpi_counters.forward_bytes += (uint64_t)sendcount * sizeof(double);
  if (ra) {
    int n = ad__mpi_received(&st);
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
    return ad__handoff.dt_sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
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

/* The slot of the start's inner request, -1 if it is gone. */
static int pp2p_inner(pp2p *p) {
  int s = p->inner.slot;
  if (s < 0 || s >= ad__req_nslots || !ad__req_slots[s].live || ad__req_slots[s].gen != p->inner.gen) return -1;
  ad__req_slots[s].mpi = MPI_REQUEST_NULL; /* completed, or freed by MPI, with the persistent request's */
  ad__req_slots[s].outer = 0;
  return s;
}

static void pp2p_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  (void)t;
  (void)seen;
  (void)start;
  int s = pp2p_inner(ctx);
  if (s >= 0) ad__req_slot_complete(s, st);
}

static void pp2p_failed(void *ctx, int rc) {
  if (rc == MPI_ERR_PENDING) return; /* MPI_Finalize: the inner slot is kept by p2p_finalize */
  int s = pp2p_inner(ctx);
  MPI_Status st;
  memset(&st, 0, sizeof st);
  st.MPI_SOURCE = st.MPI_TAG = -1;
  if (s >= 0) ad__req_slot_failed(s, rc, &st);
}

static const ad__req_ops pp2p_ops = {pp2p_complete, pp2p_failed};

static int pp2p_start(void *pctx, MPI_Request *mpi, const ad__req_ops **ops, void **ctx, ad_tape **t,
                      ad__mrec **start) {
  pp2p *p = pctx;
  ad_mpi_request r = AD_MPI_REQUEST_NULL;
  int rc = p->mpifn
               ? ad__handoff.dt_isend(p->mpifn, p->fn, p->name, p->buf, p->count, p->type, p->peer, p->tag, p->comm, &r)
               : ad__handoff.dt_irecv(p->buf, p->count, p->type, p->peer, p->tag, p->comm, &r);
  if (rc != MPI_SUCCESS) return rc;
  p->inner = r;
  if (r.slot >= 0) ad__req_slots[r.slot].outer = p->self + 1;
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
    ad__req_slot_free(s);
    return err;
  }
  rslot *q = &ad__req_slots[s];
  q->c = c;
  q->ubuf = buf;
  q->count = count;
  if (!(q->v = ad__p2p_scratch(count))) {
    ad__req_slot_free(s);
    return MPI_ERR_NO_MEM;
  }
  q->active = 1;
  q->is_recv = is_recv;
  q->peer = peer;
  q->tag = tag;
  return MPI_SUCCESS;
}

/* A new slot, in *s, for a request of count values (pers: persistent).
 * MPI_SUCCESS, or the error to return. */
static int slot_open(int count, int pers, int *s) {
  if (count < 0) return MPI_ERR_COUNT;
  if ((*s = ad__req_slot_new()) < 0) return MPI_ERR_NO_MEM;
  ad__req_slots[*s].pers = pers;
  return MPI_SUCCESS;
}

/* A new request in slot s once MPI's call returned rc: the user's, or freed. */
static int slot_hand(ad_mpi_request *request, int s, int rc) {
  if (rc != MPI_SUCCESS) {
    ad__req_slot_free(s);
    return rc;
  }
  ad__req_set(request, s);
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
  int s;
  if (rc != MPI_SUCCESS || (rc = slot_open(count, pers, &s)) != MPI_SUCCESS) return rc;
  rslot *q = &ad__req_slots[s];
  if (!is_real(type)) {
    rc = fn(buf, count, type, dest, tag, comm, &q->mpi);
  } else {
    if ((rc = slot_activate(s, comm, (void *)buf, count, dest, tag, 0)) != MPI_SUCCESS) return rc;
    q = &ad__req_slots[s];
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (!pers) ad__req_send_start(q, buf, dest, tag, name);
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
    if (ad__dtype_any(1, type))                                                                                        \
      return ad__handoff.dt_send(ad_mpi_##b, "ad_mpi_" #b, buf, count, type, dest, tag, comm);                         \
    return send_any(mpi_b, "ad_mpi_" #b, buf, count, type, dest, tag, comm);                                           \
  }                                                                                                                    \
  int ad_mpi_##nb(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,                     \
                  ad_mpi_request *request) {                                                                           \
    if (ad__dtype_any(1, type))                                                                                        \
      return ad__handoff.dt_isend(mpi_nb, ad_mpi_##nb, "ad_mpi_" #nb, buf, count, type, dest, tag, comm, request);     \
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
                : ad__handoff.dt_irecv(buf, count, type, source, tag, comm, request);
  int rc = ad__types_refuse(name, 1, type);
  int s;
  if (rc != MPI_SUCCESS || (rc = slot_open(count, pers, &s)) != MPI_SUCCESS) return rc;
  rslot *q = &ad__req_slots[s];
  MPI_Datatype mt = is_real(type) ? MPI_DOUBLE : type;
  if (!is_real(type) || source == MPI_PROC_NULL) {
    rc = pers ? MPI_Recv_init(buf, count, mt, source, tag, comm, &q->mpi)
              : MPI_Irecv(buf, count, mt, source, tag, comm, &q->mpi);
  } else {
    if ((rc = slot_activate(s, comm, buf, count, source, tag, 1)) != MPI_SUCCESS) return rc;
    q = &ad__req_slots[s];
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (pers) {
      rc = MPI_Recv_init(q->v, count, MPI_DOUBLE, source, tag, comm, &q->mpi);
    } else {
      ad__req_recv_start(s, source, tag, 0);
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
  int s = ad__req_slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rc = flag ? MPI_Improbe(source, tag, comm, flag, &m, &st) : MPI_Mprobe(source, tag, comm, &m, &st);
  if (rc != MPI_SUCCESS || (flag && !*flag)) {
    ad__req_slot_free(s);
    message->mpi = MPI_MESSAGE_NULL;
    return rc == MPI_SUCCESS ? rc : ad__mpi_forward_error(seen, rc, fn);
  }
  rslot *q = &ad__req_slots[s];
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
/* A probed message received as passive data: its entry retires without a
 * number. A later active receive of the same stream that completed before
 * this counted it as an earlier active message, which the sender did not:
 * that receive's number is off by one, so the recording fails instead. */
static void msg_passive(ad__comm *c, uint64_t post, const char *fn) {
  if (post >= c->rq_base && post < c->rq_next) {
    const ad__rentry *e = &c->rq[post - c->rq_base];
    for (size_t i = (size_t)(post - c->rq_base) + 1; i < c->rq_n; i++) {
      if (c->rq[i].done && c->rq[i].asrc == e->src && c->rq[i].atag == e->tag) {
        ad__mpi_refuse(
            MPI_ERR_OTHER,
            "%s: a message probed with ad_mpi_mprobe was received as passive data after a later active message "
            "of its source and tag; that message's sequence number is lost (receive probed messages in order)",
            fn);
        break;
      }
    }
  }
  ad__recv_complete(c, post, -2, -2);
}

/* The checks of a receive of a probed message: the type, and the message
 * (*mc as ad__req_msg_check says, never negative on success). */
static int message_check(MPI_Datatype type, const ad_mpi_message *message, const char *fn, int *mc) {
  int rc = ad__types_refuse(fn, 1, type);
  if (rc != MPI_SUCCESS) return rc;
  *mc = ad__req_msg_check(message);
  return *mc < 0 ? ad__req_msg_misuse(fn) : MPI_SUCCESS;
}

int ad_mpi_mrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, MPI_Status *status) {
  if (ad__dtype_any(1, type)) return ad__handoff.dt_mrecv(buf, count, type, message, status);
  int mc, rc = message_check(type, message, "ad_mpi_mrecv", &mc);
  if (rc != MPI_SUCCESS) return rc;
  if (mc == 0) return MPI_Mrecv(buf, count, is_real(type) ? MPI_DOUBLE : type, &message->mpi, status);
  if (count < 0) return MPI_ERR_COUNT;
  int s = message->slot;
  ad__comm *c = ad__req_slots[s].c;
  uint64_t post = ad__req_slots[s].post;
  MPI_Message m = ad__req_slots[s].msg;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  double *v = is_real(type) ? ad__p2p_scratch(count) : NULL;
  if (is_real(type) && !v) return MPI_ERR_NO_MEM;
  ad__req_slot_free(s);
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
  return recv_done(c, t, seen, post, rc, &st, buf, v, status, "ad_mpi_mrecv");
}

int ad_mpi_imrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, ad_mpi_request *request) {
  if (ad__dtype_any(1, type)) return ad__handoff.dt_imrecv(buf, count, type, message, request);
  int mc, rc = message_check(type, message, "ad_mpi_imrecv", &mc);
  if (rc != MPI_SUCCESS) return rc;
  if (count < 0) return MPI_ERR_COUNT;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  int s;
  if (mc == 0) {
    if ((s = ad__req_slot_new()) < 0) return MPI_ERR_NO_MEM;
    rc = MPI_Imrecv(buf, count, is_real(type) ? MPI_DOUBLE : type, &message->mpi, &ad__req_slots[s].mpi);
  } else {
    /* The message's slot becomes the request's. */
    s = message->slot;
    rslot *q = &ad__req_slots[s];
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
    } else if (!(q->v = ad__p2p_scratch(count))) {
      ad__recv_complete(q->c, q->post, -2, -2);
      ad__req_slot_free(s);
      return MPI_ERR_NO_MEM;
    } else {
      q->active = 1;
      q->is_recv = 1;
      q->ubuf = buf;
      q->count = count;
      ad__req_recv_start(s, 0, 0, 1);
      rc = MPI_Imrecv(q->v, count, MPI_DOUBLE, &m, &q->mpi);
      if (rc != MPI_SUCCESS) ad__recv_complete(q->c, q->post, -2, -2);
    }
  }
  if (rc != MPI_SUCCESS) {
    ad__req_slot_free(s);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_imrecv");
  }
  ad__req_set(request, s);
  return MPI_SUCCESS;
}
