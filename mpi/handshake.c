/* SPDX-License-Identifier: BSD-3-Clause */
/* Per-tape participation and the sweep handshake: what a tape exchanged
 * with each partner and on each communicator, and the agreement of the
 * partners at the start of every sweep (the tape's extension, ad__ext_ops),
 * so that a sweep one side cannot do fails on all sides instead of
 * deadlocking. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

/* ------------------------------------------------------------------------ */
/* Per-tape participation and the sweep handshake                            */
/* ------------------------------------------------------------------------ */

typedef struct peer_note {
  ad__comm *c;
  int peer;        /* -1: collective over c */
  int sent, recvd; /* active messages to and from peer on this tape */
  /* Order-free signatures of those messages (tag and length of each), so
   * that two tapes with the same number of messages, or a message recorded
   * with another length on each side, are told apart. */
  unsigned sig_sent, sig_recvd;
  /* The tags of those messages with the range of sequence numbers in each
   * tag's stream, sent [0] and received [1]: they number the sweep messages
   * (sweeptag.c). Both sides have the same tags and ranges, or the handshake
   * fails on the signatures. */
  ad__chans chans[2];
  /* How many tapes of this process communicated with peer on c (peer -1:
   * used c collectively) before this one: both sides, or all ranks of c,
   * count the same tapes, so a rank that sweeps another of its tapes than
   * its partners do is found out. */
  int serial;
  /* c->gen when this recording used c: a recording older than c's private
   * duplicate is never swept (see ad__mpi_comm_renew). */
  int gen;
  /* Collectively (peer -1): the collective records' numbers, and the
   * reverse sweep's order of adjoint collectives (see coll.c). */
  ad__corder order;
} peer_note;

typedef struct tape_ctx {
  peer_note *notes;
  size_t n, cap;
  /* lazy sends of the running sweep */
  MPI_Request *lazy;
  double **lazy_buf;
  size_t nlazy, caplazy;
} tape_ctx;

/* A sweep that timed out, or gave up with a send or a collective still
 * pending on a private communicator, leaves messages behind: MPI cannot
 * cancel a collective, a send that completed locally may not have been
 * received, and a partner's later messages land unmatched. A partner's next
 * sweep could pair its own operations with the leftovers. Such a communicator is never swept over again on this rank:
 * later sweeps of tapes that used it fail at once with AD_ERR_MPI, and their
 * partners, which cannot tell, fail too (by the handshake or the timeout)
 * rather than mix leftovers into a gradient. */
static int taint(ad_tape *t, tape_ctx *x) {
  if (!ad__mpi_left_pending) return 0;
  ad__mpi_left_pending = 0;
  for (size_t i = 0; i < x->n; i++) x->notes[i].c->tainted = 1;
  (void)t;
  return 1;
}

/* What each side says in the handshake, per partner. */
enum { HS_STATUS, HS_SENT, HS_RECVD, HS_SIG_SENT, HS_SIG_RECVD, HS_DIR, HS_SERIAL, HS_W };

/* A rank that refuses a sweep over a retired communicator still tells its
 * point-to-point partners, so that they fail at once instead of after a
 * timeout. Only an error status is sent (a partner that takes an older
 * leftover first takes this one in its next sweep, and fails then); nothing
 * is received, and nothing joins a collective, where a leftover would pair
 * with it. */
static void tell_partners(tape_ctx *x, int status) {
  int *msg = calloc(HS_W, sizeof *msg);
  if (!msg) return;
  msg[HS_STATUS] = status;
  int sent = 0;
  for (size_t i = 0; i < x->n; i++) {
    peer_note *p = &x->notes[i];
    /* A recording older than the duplicate: its partners refuse it too. */
    if (p->peer < 0 || p->c->priv == MPI_COMM_NULL || p->gen != p->c->gen) continue;
    MPI_Request r;
    if (MPI_Isend(msg, HS_W, MPI_INT, p->peer, ad__mpi_handshake_tag, p->c->priv, &r) != MPI_SUCCESS) continue;
    MPI_Request_free(&r);
    sent = 1;
  }
  if (sent)
    ad__mpi_keep(msg);
  else
    free(msg);
}

/* 1 if no sweep of this recording can be trusted: an earlier sweep over
 * one of its communicators gave up on this rank, or on some rank before
 * the communicator was renewed (then this recording is older than the
 * private duplicate and none of the ranks sweeps it). */
static int untrusted(const tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].c->tainted || x->notes[i].gen != x->notes[i].c->gen) return 1;
  return 0;
}

static int tainted_check(ad_tape *t, tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].gen != x->notes[i].c->gen) {
      ad__pending(t, AD_ERR_MPI,
                  "this recording is older than the private duplicate of a communicator it used (an earlier sweep "
                  "over it gave up on some rank, so a later recording got a fresh one); no sweep of it can be "
                  "trusted, so none was done: record again");
      return AD_ERR_MPI;
    }
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].c->tainted) {
      ad__pending(t, AD_ERR_MPI,
                  "an earlier sweep over a communicator this tape used gave up with communication still pending "
                  "there (a partner that never swept, or a timeout); no sweep of a recording made before can be "
                  "trusted, so none was done: record again (a collective over the communicator, or "
                  "ad_mpi_comm_prepare, gives a new recording a fresh private duplicate)");
      return AD_ERR_MPI;
    }
  return AD_OK;
}

/* Complete the sweep's sends. After a failure (this sweep's or an earlier
 * send's) a send is only tested, not waited for: its partner may be gone. A
 * send that is still pending keeps its buffer, which MPI may still read. */
static void lazy_finish(ad_tape *t, tape_ctx *x, int *rc) {
  for (size_t i = 0; i < x->nlazy; i++) {
    if (x->lazy[i] != MPI_REQUEST_NULL) {
      if (*rc == AD_OK) {
        *rc = ad__mpi_wait(t, &x->lazy[i], MPI_STATUS_IGNORE, "an adjoint or tangent send to complete");
      } else {
        int done = 0;
        MPI_Test(&x->lazy[i], &done, MPI_STATUS_IGNORE);
      }
    }
    if (ad__mpi_abandon(&x->lazy[i], 0))
      free(x->lazy_buf[i]);
    else
      ad__mpi_keep(x->lazy_buf[i]);
  }
  x->nlazy = 0;
}

/* Every partner says whether it is fine to sweep, which way it sweeps,
 * which of its recordings it sweeps (the serial) and,
 * pairwise, what it recorded with this rank: in[HS_W*i ..] is what partner i
 * says and out[HS_W*i ..] what this rank says. A count or signature that
 * does not match means one side recorded a message the other did not (a
 * passive send met by an active receive) or the two sides sweep different
 * tapes, which would pair adjoints with the wrong messages. Over a
 * communicator used collectively the ranks agree on the direction and the
 * recording by a minimum of (status, direction, -direction, serial,
 * -serial). */
static int handshake(ad_tape *t, tape_ctx *x, int status, int reverse, int *peer_status, int *peer_rank) {
  int rc = AD_OK;
  size_t n = x->n;
  MPI_Request *req = malloc((2 * n + 1) * sizeof *req);
  char *is_recv = malloc(2 * n + 1);
  /* Both halves live on the heap, so that a handshake that gives up can
   * leave them to MPI (see below). */
  int *in = malloc((2 * HS_W * n + 1) * sizeof *in), *out = in + HS_W * n;
  if (!req || !in || !is_recv) {
    free(req);
    free(in);
    free(is_recv);
    return AD_ERR_NOMEM;
  }
  int dir = reverse ? 1 : 2;
  size_t nr = 0;
  for (size_t i = 0; i < n; i++) {
    peer_note *p = &x->notes[i];
    if ((rc = ad__mpi_comm_ready(t, p->c)) != AD_OK) {
      if (p->c->freed) ad__pending(t, AD_ERR_MPI, "a communicator used on this tape was freed before the sweep");
      break;
    }
    int *o = &out[HS_W * i], *v = &in[HS_W * i];
    o[HS_STATUS] = v[HS_STATUS] = status;
    o[HS_SENT] = p->sent;
    o[HS_RECVD] = p->recvd;
    o[HS_SIG_SENT] = (int)(p->sig_sent & 0x7fffffffu);
    o[HS_SIG_RECVD] = (int)(p->sig_recvd & 0x7fffffffu);
    o[HS_DIR] = dir;
    o[HS_SERIAL] = p->serial;
    /* what a silent partner would have to say */
    v[HS_SENT] = o[HS_RECVD];
    v[HS_RECVD] = o[HS_SENT];
    v[HS_SIG_SENT] = o[HS_SIG_RECVD];
    v[HS_SIG_RECVD] = o[HS_SIG_SENT];
    v[HS_DIR] = dir;
    v[HS_SERIAL] = p->serial;
    int e;
    if (p->peer < 0) {
      is_recv[nr] = 0;
      v[1] = dir;
      v[2] = -dir;
      v[3] = p->serial;
      v[4] = -p->serial;
      e = MPI_Iallreduce(MPI_IN_PLACE, v, 5, MPI_INT, MPI_MIN, p->c->priv, &req[nr]);
      if (e == MPI_SUCCESS) nr++;
    } else {
      is_recv[nr] = 0;
      e = MPI_Isend(o, HS_W, MPI_INT, p->peer, ad__mpi_handshake_tag, p->c->priv, &req[nr]);
      if (e == MPI_SUCCESS) {
        nr++;
        is_recv[nr] = 1;
        e = MPI_Irecv(v, HS_W, MPI_INT, p->peer, ad__mpi_handshake_tag, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) nr++;
      }
    }
    if (e != MPI_SUCCESS) {
      rc = ad__mpi_fail(t, e, "the sweep handshake");
      break;
    }
  }
  for (size_t i = 0; i < nr && rc == AD_OK; i++)
    rc = ad__mpi_wait(t, &req[i], MPI_STATUS_IGNORE, "the other ranks to start their sweep");
  for (size_t i = 0; rc == AD_OK && i < n; i++) {
    /* The first cause wins over a partner's report of an MPI failure,
     * which may only be the consequence of another rank's. */
    if (in[HS_W * i] < 0 && (*peer_status == AD_OK || (*peer_status == AD_ERR_MPI && in[HS_W * i] != AD_ERR_MPI))) {
      *peer_status = in[HS_W * i];
      *peer_rank = x->notes[i].peer;
    }
  }
  for (size_t i = 0; rc == AD_OK && *peer_status == AD_OK && i < n; i++) {
    peer_note *p = &x->notes[i];
    const int *v = &in[HS_W * i], *o = &out[HS_W * i];
    int other_dir = p->peer < 0 ? (v[1] != -v[2] ? -1 : v[1]) : v[HS_DIR];
    if (other_dir != dir) {
      const char *mine = reverse ? "reverse" : "tangent";
      if (p->peer >= 0)
        ad__pending(t, AD_ERR_MPI, "rank %d runs a %s sweep while this rank runs a %s sweep; no sweep was done",
                    p->peer, reverse ? "tangent" : "reverse", mine);
      else
        ad__pending(t, AD_ERR_MPI,
                    "the ranks of a communicator this tape used do not all run a %s sweep; no sweep was done", mine);
      rc = AD_ERR_MPI;
    } else if (p->peer < 0 && v[3] != -v[4]) {
      /* Collectives pair by their order on the communicator alone: without
       * this, two tapes swept in different orders would exchange each
       * other's adjoints. */
      ad__pending(t, AD_ERR_MPI,
                  "the ranks of a communicator this tape used collectively do not all sweep the same recording "
                  "(this rank sweeps number %d of its tapes that used it, the ranks numbers %d to %d); no sweep was "
                  "done",
                  p->serial + 1, v[3] + 1, -v[4] + 1);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && (v[HS_SENT] != o[HS_RECVD] || v[HS_RECVD] != o[HS_SENT])) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d recorded %d active messages to and %d from this rank, which recorded %d from and %d to "
                  "it (a message sent with another datatype than it was received with?); no sweep was done",
                  p->peer, v[HS_SENT], v[HS_RECVD], p->recvd, p->sent);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && v[HS_SERIAL] != o[HS_SERIAL]) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d sweeps its tape number %d of those that communicated with this rank, this rank its number "
                  "%d; no sweep was done",
                  p->peer, v[HS_SERIAL] + 1, o[HS_SERIAL] + 1);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && (v[HS_SIG_SENT] != o[HS_SIG_RECVD] || v[HS_SIG_RECVD] != o[HS_SIG_SENT])) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d recorded messages with this rank of other tags or lengths than this tape did (does it "
                  "sweep another tape?); no sweep was done",
                  p->peer);
      rc = AD_ERR_MPI;
    }
  }
  /* A partner that never started its sweep leaves operations pending, which
   * MPI may still complete when it starts late: the receives are cancelled,
   * the sends and reductions keep the buffers for good. */
  int keep = 0;
  for (size_t i = 0; i < nr; i++) keep |= !ad__mpi_abandon(&req[i], is_recv[i]);
  taint(t, x);
  free(req);
  free(is_recv);
  if (keep)
    ad__mpi_keep(in);
  else
    free(in);
  return rc;
}

static void order_free(ad__corder *o) {
  free(o->started);
  free(o->ready);
  memset(o, 0, sizeof *o);
}

/* Number every partner's messages for the sweep's tags. A tape that
 * exchanged more messages with one partner in one direction than there
 * are tags cannot be swept: a tag of two messages could pair an adjoint
 * with the wrong one. 1 with an error on t, else 0. */
static int chans_number(ad_tape *t, tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    for (int d = 0; d < 2; d++) {
      ad__chans *s = &x->notes[i].chans[d];
      if (ad__chans_number(s) != AD_OK) {
        ad__pending(t, AD_ERR_NOMEM, "cannot number the messages of a sweep");
        return 1;
      }
      if (s->total > ad__mpi_sweep_tags) {
        ad__fail(t, AD_ERR_MPI,
                 "this tape %s %lld messages %s rank %d (counting from the first to the last of each tag), more "
                 "than the %d tags below MPI_TAG_UB that tell their sweep messages apart; no sweep is possible",
                 d ? "received" : "sent", (long long)s->total, d ? "from" : "to", x->notes[i].peer, ad__mpi_sweep_tags);
        return 1;
      }
    }
  return 0;
}

static int ctx_sweep_begin(ad_tape *t, void *ctx, int reverse, int err) {
  tape_ctx *x = ctx;
  x->nlazy = 0;
  for (size_t i = 0; i < x->n; i++) {
    ad__corder *o = &x->notes[i].order;
    if (o->started) memset(o->started, 0, (size_t)o->n);
    o->nready = 0;
  }
  int peer_status = AD_OK, peer_rank = -1;
  /* One-sided operations of an epoch that was not closed on this tape are
   * missing from it: the partners learn of it through the handshake. */
  if (err == AD_OK && ad__mpi_chapters_sweep_check(t)) err = ad__driver_check(t);
  if (err == AD_OK && chans_number(t, x)) err = ad__driver_check(t);
  if (untrusted(x)) {
    tell_partners(x, err != AD_OK ? err : AD_ERR_MPI);
    if (err != AD_OK) return err;
    tainted_check(t, x);
    return ad__driver_check(t);
  }
  int rc = handshake(t, x, err, reverse, &peer_status, &peer_rank);
  if (err != AD_OK) return err;
  if (rc != AD_OK) {
    /* Reported by this call: the next sweep starts clean (the message
     * stays readable). */
    ad__driver_check(t);
    return rc;
  }
  if (peer_status != AD_OK) {
    if (peer_rank >= 0)
      ad__pending(t, AD_ERR_MPI, "rank %d of a communicator this tape used reported %s; no sweep was done", peer_rank,
                  ad_errname(peer_status));
    else
      ad__pending(t, AD_ERR_MPI, "a rank of a communicator this tape used reported %s; no sweep was done",
                  ad_errname(peer_status));
    return ad__driver_check(t);
  }
  return AD_OK;
}

static int ctx_sweep_end(ad_tape *t, void *ctx, int reverse, int rc) {
  (void)reverse;
  tape_ctx *x = ctx;
  /* A sweep that stopped between a nonblocking collective's start and its
   * finish leaves it running on the private communicator. */
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].order.inflight > 0) {
      x->notes[i].order.inflight = 0;
      ad__mpi_left_pending = 1;
    }
  lazy_finish(t, ctx, &rc);
  taint(t, ctx);
  return rc;
}

static void ctx_destroy(void *ctx) {
  tape_ctx *x = ctx;
  for (size_t i = 0; i < x->nlazy; i++) free(x->lazy_buf[i]);
  for (size_t i = 0; i < x->n; i++) {
    ad__chans_free(&x->notes[i].chans[0]);
    ad__chans_free(&x->notes[i].chans[1]);
    order_free(&x->notes[i].order);
  }
  free(x->lazy);
  free(x->lazy_buf);
  free(x->notes);
  free(x);
}

/* A maximum over the ranks connected to this one by the tape's
 * communication: partners exchange what they know, as many rounds as there
 * are processes (a bound on the distance between any two of them), and
 * communicators used collectively reduce at once. Every rank of the
 * component runs the same rounds, so their messages pair up. */
static int ctx_agree_max(ad_tape *t, void *ctx, int64_t *v, int n) {
  tape_ctx *x = ctx;
  int wsize = 1, rc = AD_OK;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  size_t nn = x->n;
  MPI_Request *req = malloc((2 * nn + 1) * sizeof *req);
  char *is_recv = malloc(2 * nn + 1);
  int64_t *buf = malloc((2 * nn + 1) * (size_t)n * sizeof *buf);
  if (!req || !is_recv || !buf) {
    free(req);
    free(is_recv);
    free(buf);
    return AD_ERR_NOMEM;
  }
  for (size_t i = 0; i < nn && rc == AD_OK; i++) rc = ad__mpi_comm_ready(t, x->notes[i].c);
  for (int round = 0; rc == AD_OK && round < (wsize > 1 ? wsize - 1 : 1); round++) {
    size_t nr = 0;
    for (size_t i = 0; i < nn && rc == AD_OK; i++) {
      peer_note *p = &x->notes[i];
      int64_t *o = buf + 2 * i * (size_t)n, *in = o + n;
      memcpy(o, v, (size_t)n * sizeof *v);
      memcpy(in, v, (size_t)n * sizeof *v);
      int e;
      is_recv[nr] = 0;
      if (p->peer < 0) {
        e = MPI_Iallreduce(o, in, n, MPI_INT64_T, MPI_MAX, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) nr++;
      } else {
        e = MPI_Isend(o, n, MPI_INT64_T, p->peer, ad__mpi_handshake_tag - 1, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) {
          nr++;
          is_recv[nr] = 1;
          e = MPI_Irecv(in, n, MPI_INT64_T, p->peer, ad__mpi_handshake_tag - 1, p->c->priv, &req[nr]);
          if (e == MPI_SUCCESS) nr++;
        }
      }
      if (e != MPI_SUCCESS) rc = ad__mpi_fail(t, e, "agreeing with the other ranks");
    }
    for (size_t i = 0; i < nr && rc == AD_OK; i++)
      rc = ad__mpi_wait(t, &req[i], MPI_STATUS_IGNORE, "the other ranks to agree on the sweeps");
    int keep = 0;
    for (size_t i = 0; i < nr; i++) keep |= !ad__mpi_abandon(&req[i], is_recv[i]);
    taint(t, x);
    if (keep) {
      ad__mpi_keep(buf);
      buf = NULL;
      break;
    }
    for (size_t i = 0; rc == AD_OK && i < nn; i++)
      for (int j = 0; j < n; j++)
        if (buf[(2 * i + 1) * (size_t)n + j] > v[j]) v[j] = buf[(2 * i + 1) * (size_t)n + j];
  }
  free(req);
  free(is_recv);
  free(buf);
  if (rc != AD_OK) ad__driver_check(t); /* reported by the caller's return value */
  return rc;
}

static const ad__ext_ops ctx_ops = {ctx_sweep_begin, ctx_sweep_end, ctx_destroy, ctx_agree_max};

static tape_ctx *ctx_of(ad_tape *t) {
  if (t->ext_ops == &ctx_ops) return t->ext_ctx;
  if (t->ext_ops) return NULL; /* another extension owns the slot */
  tape_ctx *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  t->ext_ops = &ctx_ops;
  t->ext_ctx = x;
  return x;
}

/* One message's part of a signature: a hash of its tag and length. */
static unsigned sig_of(int tag, int count) {
  uint64_t h = ((uint64_t)(uint32_t)tag << 32 | (uint32_t)count) * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 33);
}

static void note(ad_tape *t, ad__comm *c, int peer, int recv, int tag, int count, int k) {
  tape_ctx *x = ctx_of(t);
  if (!x) {
    ad__fail(t, AD_ERR_NOMEM, "cannot attach the MPI layer's state to the tape");
    return;
  }
  size_t i = 0;
  while (i < x->n && (x->notes[i].c != c || x->notes[i].peer != peer)) i++;
  if (i == x->n) {
    if (x->n == x->cap) {
      size_t ncap = x->cap ? 2 * x->cap : 8;
      peer_note *nn = realloc(x->notes, ncap * sizeof *nn);
      if (!nn) {
        ad__fail(t, AD_ERR_NOMEM, "cannot note a communication partner");
        return;
      }
      x->notes = nn;
      x->cap = ncap;
    }
    memset(&x->notes[x->n], 0, sizeof x->notes[x->n]);
    x->notes[x->n].c = c;
    x->notes[x->n].peer = peer;
    x->notes[x->n].gen = c->gen;
    int *ns = ad__kmap_slot(&c->tapes, ad__kmap_key(peer, 0)); /* peer -1 has a key of its own */
    x->notes[x->n].serial = ns ? (*ns)++ : -1;
    x->n++;
  }
  if (peer >= 0) {
    if (ad__chans_note(&x->notes[i].chans[recv != 0], tag, k) != AD_OK) {
      ad__fail(t, AD_ERR_NOMEM, "cannot note a message tag");
      return;
    }
    if (recv) {
      x->notes[i].recvd++;
      x->notes[i].sig_recvd += sig_of(tag, count);
    } else {
      x->notes[i].sent++;
      x->notes[i].sig_sent += sig_of(tag, count);
    }
  }
}

void ad__mpi_note_coll(ad_tape *t, ad__comm *c) {
  if (t) note(t, c, -1, 0, 0, 0, -1);
}

ad__corder *ad__coll_order(ad_tape *t, ad__comm *c) {
  tape_ctx *x = t->ext_ops == &ctx_ops ? t->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++)
    if (x->notes[i].c == c && x->notes[i].peer < 0) return &x->notes[i].order;
  return NULL;
}

/* After a sweep over c gave up on some rank, MPI may still pair what that
 * sweep left on the private duplicate with any later sweep over it. Every
 * rank of c takes part here, so they agree (on the user's communicator,
 * where all of them are) whether one of them retired the duplicate, and if
 * so all move to a fresh one together. The recording under way is the
 * first over the fresh duplicate: what it noted on c before moves with it,
 * while every older recording over c stays refused, on every rank. */
static int comm_renew(ad_tape *seen, ad__comm *c) {
  if (c->freed) return MPI_SUCCESS;
  int mine = c->tainted, any = 0;
  int e = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, c->user);
  if (e != MPI_SUCCESS || !any) return e;
  if ((e = ad__mpi_comm_settled(c)) != MPI_SUCCESS) return e;
  MPI_Comm fresh;
  if ((e = MPI_Comm_dup(c->user, &fresh)) != MPI_SUCCESS) return e;
  MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
  MPI_Comm *old[3] = {&c->priv, &c->rev, &c->tposed};
  MPI_Comm *keep = realloc(c->retired, (size_t)(c->nretired + 3) * sizeof *keep);
  if (keep) c->retired = keep; /* else the old duplicates are merely never freed */
  for (int i = 0; i < 3; i++) {
    if (*old[i] == MPI_COMM_NULL) continue;
    if (keep) c->retired[c->nretired++] = *old[i];
    *old[i] = MPI_COMM_NULL;
  }
  c->priv = fresh;
  c->gen++;
  c->tainted = 0;
  tape_ctx *x = seen && seen->ext_ops == &ctx_ops ? seen->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++)
    if (x->notes[i].c == c) x->notes[i].gen = c->gen;
  return MPI_SUCCESS;
}

int ad__mpi_comm_renew(ad_tape *seen, ad__comm *c) {
  if (!seen || ad__coll_order(seen, c)) return MPI_SUCCESS; /* no recording, or not its first collective over c */
  return comm_renew(seen, c);
}

int ad__mpi_coll_enter(MPI_Comm comm, ad__comm **c, ad_tape **t, ad_tape **seen) {
  int err;
  *c = ad__mpi_comm(comm, &err);
  if (!*c) return err;
  *t = ad__mpi_tape(seen);
  if ((err = ad__mpi_comm_renew(*seen, *c)) != MPI_SUCCESS) return err;
  ad__mpi_note_coll(*seen, *c);
  return MPI_SUCCESS;
}

int ad_mpi_comm_prepare(MPI_Comm comm) {
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  if (ad__mpi_comm_ready(NULL, c) != AD_OK) return MPI_ERR_OTHER;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  return comm_renew(seen, c);
}

int ad__coll_number(ad_tape *t, ad__comm *c) {
  ad__corder *o = ad__coll_order(t, c);
  if (!o) return -1;
  if (o->n == o->cap) {
    int ncap = o->cap ? 2 * o->cap : 16;
    unsigned char *n = realloc(o->started, (size_t)ncap);
    if (!n) {
      ad__fail(t, AD_ERR_NOMEM, "cannot number a collective record");
      return -1;
    }
    o->started = n;
    o->cap = ncap;
  }
  o->started[o->n] = 0;
  return o->n++;
}
void ad__mpi_note_peer(ad_tape *t, ad__comm *c, int peer, int recv, int tag, int count, int k) {
  if (t && peer >= 0) note(t, c, peer, recv, tag, count, k);
}

int ad__sweep_tag(ad_tape *t, ad__comm *c, int peer, int tag, int k, int was_recv) {
  tape_ctx *x = t->ext_ops == &ctx_ops ? t->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++) {
    peer_note *p = &x->notes[i];
    if (p->c != c || p->peer != peer) continue;
    int64_t place = ad__chans_place(&p->chans[was_recv != 0], tag, k);
    if (place < 0 || place >= ad__mpi_sweep_tags) break; /* the sweep's start numbered them all */
    return (int)place;
  }
  ad__pending(t, AD_ERR_MPI, "no record of the messages with rank %d (tag %d) that this sweep needs", peer, tag);
  return -1;
}

ad_tape *ad__mpi_tape(ad_tape **seen) {
  ad_tape *t = ad_tape_current();
  *seen = t && t->recording ? t : NULL;
  if (t && t->recording) ad__region_flush(t); /* communication inside a region: record the region */
  return t && t->recording && t->rec.active ? t : NULL;
}

int ad__mpi_lazy(ad_tape *t, MPI_Request r, double *buf) {
  tape_ctx *x = ctx_of(t);
  if (!x) {
    free(buf);
    return AD_ERR_NOMEM;
  }
  if (x->nlazy == x->caplazy) {
    size_t ncap = x->caplazy ? 2 * x->caplazy : 16;
    MPI_Request *nr = realloc(x->lazy, ncap * sizeof *nr);
    if (nr) x->lazy = nr;
    double **nb = realloc(x->lazy_buf, ncap * sizeof *nb);
    if (nb) x->lazy_buf = nb;
    if (!nr || !nb) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      free(buf);
      return AD_OK;
    }
    x->caplazy = ncap;
  }
  x->lazy[x->nlazy] = r;
  x->lazy_buf[x->nlazy] = buf;
  x->nlazy++;
  return AD_OK;
}
