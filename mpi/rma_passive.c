/* SPDX-License-Identifier: BSD-3-Clause */
/* One-sided communication in passive-target epochs (lock, unlock, flush,
 * win_sync) on windows of ad_real memory, and the adjoint and tangent
 * actions of their records (docs/mpi-onesided.md). Windows, fences and the
 * record kinds are rma.c's. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rma_impl.h"

/* ------------------------------------------------------------------------ */
/* Passive target                                                            */
/* ------------------------------------------------------------------------ */

/* In a passive-target epoch the target makes no call, so nothing can be
 * exchanged with it when an origin accesses its memory. The model
 * (docs/mpi-onesided.md, "Passive target"):
 *
 * - A rank's user array changes only at its synchronisation points
 *   (ad_mpi_win_sync, its lock/unlock of itself, lock_all/unlock_all, the
 *   window's free). There, elements that completed remote accesses wrote
 *   get new handles with the values MPI left in the shadow (incorporated),
 *   and the rank's own stores since the last one go into the shadow
 *   (published).
 * - An origin's accesses to one target between two completions (unlock,
 *   flush, unlock_all, flush_all) form a batch. At its completion the
 *   origin makes the data complete at the target, draws a ticket from the
 *   target's counter and marks the elements it wrote with it (a second
 *   window, held under a permanent lock_all). A synchronisation draws a
 *   ticket too and takes in only the elements marked by earlier tickets.
 *   Tickets order every batch and synchronisation at one target as they
 *   happened: under an exclusive lock because the ticket is drawn before the
 *   lock is released, otherwise because accesses that the program orders by
 *   other means (a barrier, a message) draw their tickets in that order.
 * - The sweeps mirror this with a window of adjoints (reverse) or tangents
 *   (forward) made while they run, from the window's free to its creation
 *   (reverse) or back: each batch and synchronisation acts on it in its
 *   turn, in reverse ticket order (reverse) or in ticket order (tangent),
 *   waiting for its turn on the target's counter in that window with the
 *   sweep timeout. The adjoint of a put is a fetch-and-zero of the target's
 *   adjoint, of an accumulate with MPI_SUM a fetch, of a get an accumulate;
 *   an incorporation adds the new handle's adjoint into the window's, a
 *   publication takes the window's adjoint into the published handle. */

static void batch_free(pbatch *x) {
  if (!x) return;
  AD__FREE_EACH(x->a, x->off, x->in, x->out, x);
}

static void sync_free(psyncrec *x) {
  if (!x) return;
  AD__FREE_EACH(x->ie, x->pe, x->ih, x->ph, x);
}

/* Off the list of windows whose recording lives (their begin record is
 * gone, with its tape's recording). */
static void pw_unlist(pwin *pw) {
  if (!pw->tape) return;
  if (pw->prev)
    pw->prev->next = pw->next;
  else
    ad__rma_pwins = pw->next;
  if (pw->next) pw->next->prev = pw->prev;
  pw->prev = pw->next = NULL;
  pw->tape = NULL;
}

void ad__rma_pw_release(pwin *pw) {
  if (--pw->refs > 0) return;
  pw_unlist(pw);
  free(pw->h0);
  free(pw);
}

void ad__rma_passive_free(void *data) {
  phead *h = data;
  pwin *pw = h->pw;
  if (h->what == RMA_BATCH || h->what == RMA_SYNC) {
    if (pw->tape) pw->holes = 1;
    if (h->what == RMA_BATCH)
      batch_free(data);
    else
      sync_free(data);
  } else {
    if (h->what == RMA_PBEGIN)
      pw_unlist(pw);
    else
      pw->ended = 0;
    free(h);
  }
  ad__rma_pw_release(pw);
}

static int pw_push(ad_tape *t, int kind, win *w, phead *h) {
  ad__mrec *r = ad__mrec_push(t, kind, w->c, 0, 0);
  if (!r) return 0;
  r->rma = h;
  w->pw->refs++;
  return 1;
}

/* A window created while recording: its begin record, with the elements'
 * handles (0 if it fails: a sticky error on t). */
pwin *ad__rma_pw_make(ad_tape *t, win *w) {
  pwin *pw = calloc(1, sizeof *pw);
  phead *h = calloc(1, sizeof *h);
  if (pw) pw->h0 = calloc((size_t)w->n + 1, sizeof *pw->h0);
  if (!pw || !h || !pw->h0 || ad__handles(t, w->base, w->n, pw->h0, "ad_mpi_win_create") != AD_OK) {
    if (pw) free(pw->h0);
    free(pw);
    free(h);
    return NULL;
  }
  pw->n = w->n;
  pw->tape = t;
  pw->refs = 1; /* the window's */
  pw->sw = MPI_WIN_NULL;
  h->what = RMA_PBEGIN;
  h->pw = pw;
  w->pw = pw;
  if (!pw_push(t, AD__M_RMA_PBEGIN, w, h)) {
    w->pw = NULL;
    free(h);
    free(pw->h0);
    free(pw);
    return NULL;
  }
  pw->next = ad__rma_pwins;
  if (ad__rma_pwins) ad__rma_pwins->prev = pw;
  ad__rma_pwins = pw;
  return pw;
}

/* The tickets drawn at this rank's part of the window. */
int64_t ad__rma_my_tickets(win *w) {
  uint64_t v = 0;
  int me = w->c->rank;
  if (MPI_Win_lock(MPI_LOCK_SHARED, me, 0, w->mpi) != MPI_SUCCESS) return -1;
  if (MPI_Fetch_and_op(NULL, &v, MPI_UINT64_T, me, mark_at(w->n) + w->n, MPI_NO_OP, w->mpi) == MPI_SUCCESS)
    MPI_Win_flush(me, w->mpi);
  MPI_Win_unlock(me, w->mpi);
  return (int64_t)v;
}

/* The free of a window used in passive-target epochs, on the tape that
 * created it (0 if out of memory). */
int ad__rma_pw_end(win *w, ad_tape *t, int64_t tickets) {
  phead *h = calloc(1, sizeof *h);
  if (!h) return 0;
  h->what = RMA_PEND;
  h->pw = w->pw;
  if (!pw_push(t, AD__M_RMA_PEND, w, h)) {
    free(h);
    return 0;
  }
  w->pw->ended = 1;
  w->pw->all_used = 1;
  w->pw->tickets = tickets;
  return 1;
}

/* Why this rank may not use passive-target synchronisation on w now (a
 * format taking the function's name), or NULL if it may. */
static const char *passive_bar(const win *w, const ad_tape *t, const ad_tape *seen) {
  if (w->mode == MODE_FENCE)
    return "%s: the window was synchronised with ad_mpi_win_fence; a window of ad_real is used either with fences or "
           "with passive-target epochs";
  if (t && (!w->pw || w->pw->tape != t))
    return "%s: a window of ad_real used in passive-target epochs while recording must be created in that recording "
           "(and freed in it before the sweeps)";
  if (!t && w->pw && w->pw->tape && w->pw->tape != seen)
    return "%s: the window was created while recording, so its passive-target epochs belong to that recording, and "
           "this call is outside it";
  return NULL;
}

/* Whether this rank may use passive-target synchronisation on w now. */
int ad__rma_passive_check(win *w, ad_tape *t, ad_tape *seen, const char *fn) {
  const char *why = passive_bar(w, t, seen);
  return why ? ad__mpi_refuse(MPI_ERR_RMA_SYNC, why, fn) : MPI_SUCCESS;
}

static int read_marks(win *w, uint64_t *m) {
  int me = w->c->rank, rc = MPI_SUCCESS;
  if (w->n > 0)
    rc = MPI_Get_accumulate(NULL, 0, MPI_UINT64_T, m, w->n, MPI_UINT64_T, me, mark_at(w->n), w->n, MPI_UINT64_T,
                            MPI_NO_OP, w->mpi);
  return rc == MPI_SUCCESS ? MPI_Win_flush(me, w->mpi) : rc;
}

/* What a synchronisation point does: take in what other ranks wrote,
 * publish this rank's stores. TENTATIVE: the window has seen no
 * passive-target call on this rank and may yet be used with fences, so the
 * record does not count as passive-target use (see sync_sweep). */
enum { SYNC_TAKE = 1, SYNC_PUBLISH = 2, SYNC_TENTATIVE = 4 };

static int any_store(const win *w) {
  for (int e = 0; e < w->n; e++)
    if (!ad__rma_same_real(w->base[e], w->snap[e])) return 1;
  return 0;
}

/* This rank's synchronisation point: remote writes in, own stores out. */
static int psync_as(win *w, ad_tape *t, ad_tape *seen, const char *fn, int flags) {
  int me = w->c->rank, n = w->n, rc = MPI_SUCCESS, code = MPI_SUCCESS;
  int own = w->lk_all || w->lk[me];
  char why[300] = "";
  /* Publishing alone needs no MPI call when nothing was stored. */
  if (!(flags & SYNC_TAKE) && !any_store(w)) return MPI_SUCCESS;
  uint64_t *m = malloc(((size_t)n + 1) * sizeof *m);
  unsigned char *what = calloc((size_t)n + 1, 1); /* 1 incorporate, 2 publish */
  if (!m || !what) {
    free(m);
    free(what);
    return ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
  }
  if (!own) rc = MPI_Win_lock(MPI_LOCK_SHARED, me, 0, w->mpi);
  if (rc == MPI_SUCCESS) rc = read_marks(w, m);
  if (rc == MPI_SUCCESS) rc = MPI_Win_sync(w->mpi);
  int todo = 0;
  for (int e = 0; rc == MPI_SUCCESS && e < n && !todo; e++)
    todo = ((flags & SYNC_TAKE) && m[e] != w->seen[e]) || !ad__rma_same_real(w->base[e], w->snap[e]);
  uint64_t s = 0, one = 1;
  if (todo && rc == MPI_SUCCESS) {
    rc = MPI_Fetch_and_op(&one, &s, MPI_UINT64_T, me, mark_at(n) + n, MPI_SUM, w->mpi);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(me, w->mpi);
    if (rc == MPI_SUCCESS) rc = read_marks(w, m);
    if (rc == MPI_SUCCESS) rc = MPI_Win_sync(w->mpi);
  }
  int ni = 0, np = 0;
  for (int e = 0; todo && rc == MPI_SUCCESS && e < n; e++) {
    int stored = !ad__rma_same_real(w->base[e], w->snap[e]);
    int remote = m[e] != w->seen[e];
    if (stored && remote) {
      if (code == MPI_SUCCESS)
        snprintf(why, sizeof why,
                 "rank %d stored into element %d of its window while another rank's operation wrote it (no "
                 "synchronisation between them), which MPI leaves undefined",
                 me, e);
      code = MPI_ERR_RMA_CONFLICT;
    } else if (remote && m[e] - 1 < s && (flags & SYNC_TAKE)) {
      what[e] = 1;
      ni++;
    } else if (stored) {
      const ad_real *b = &w->base[e];
      if (t && b->i && (b->e != t->rec.epoch || b->i > t->rec.next)) {
        if (code == MPI_SUCCESS)
          snprintf(why, sizeof why, "element %d of rank %d's window holds a handle from another tape or recording", e,
                   me);
        code = MPI_ERR_OTHER;
      }
      what[e] = 2;
      np++;
    }
  }
  ad_tape *rt = code == MPI_SUCCESS && rc == MPI_SUCCESS ? t : NULL;
  psyncrec *x = NULL;
  if (rt && todo) {
    x = calloc(1, sizeof *x);
    if (x) {
      x->ie = malloc(((size_t)ni + 1) * sizeof *x->ie);
      x->ih = malloc(((size_t)ni + 1) * sizeof *x->ih);
      x->pe = malloc(((size_t)np + 1) * sizeof *x->pe);
      x->ph = malloc(((size_t)np + 1) * sizeof *x->ph);
    }
    if (!x || !x->ie || !x->ih || !x->pe || !x->ph) {
      sync_free(x);
      x = NULL;
      code = MPI_ERR_NO_MEM;
      snprintf(why, sizeof why, "no memory");
      rt = NULL;
    }
  }
  for (int e = 0; e < n; e++) {
    if (what[e] == 1) {
      w->base[e] = rt ? ad__new_input(rt, w->shadow[e]) : ad__const(w->shadow[e]);
      w->seen[e] = m[e];
      if (x) {
        x->ie[x->ni] = e;
        x->ih[x->ni++] = w->base[e].i;
      }
    } else if (what[e] == 2) {
      w->shadow[e] = w->base[e].v;
      if (x) {
        x->pe[x->np] = e;
        x->ph[x->np++] = w->base[e].i;
      }
    }
    if (what[e]) w->snap[e] = w->base[e];
  }
  if (x) {
    x->h.what = RMA_SYNC;
    x->h.pw = w->pw;
    x->ticket = (int64_t)s;
    if (pw_push(rt, AD__M_RMA_SYNC, w, &x->h)) {
      if (!(flags & SYNC_TENTATIVE)) w->pw->used = 1;
    } else {
      sync_free(x);
      code = MPI_ERR_NO_MEM;
      snprintf(why, sizeof why, "no memory for the record");
    }
  }
  if (rc == MPI_SUCCESS) rc = MPI_Win_sync(w->mpi);
  if (!own) {
    int u = MPI_Win_unlock(me, w->mpi);
    if (rc == MPI_SUCCESS) rc = u;
  }
  free(m);
  free(what);
  if (todo && rc == MPI_SUCCESS && (flags & SYNC_TENTATIVE)) w->pubs++;
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  if (code != MPI_SUCCESS) return ad__mpi_refuse(code, "%s: %s", fn, why);
  return MPI_SUCCESS;
}

int ad__rma_psync(win *w, ad_tape *t, ad_tape *seen, const char *fn) {
  return psync_as(w, t, seen, fn, SYNC_TAKE | SYNC_PUBLISH);
}

/* Complete this rank's batch of accesses to `target`: data complete there,
 * a ticket, the marks, the record, the fetched values. */
static int batch_complete(win *w, int target, ad_tape *t, ad_tape *seen, const char *fn) {
  int k = 0, total = 0, maxc = 1;
  for (int i = 0; i < w->nacc; i++)
    if (w->acc[i].target == target) {
      k++;
      total += w->acc[i].count;
      if (w->acc[i].count > maxc) maxc = w->acc[i].count;
    }
  if (!k) return MPI_SUCCESS;
  int code = MPI_SUCCESS;
  char why[400] = "";
  if (w->tape != t) {
    code = MPI_ERR_RMA_SYNC;
    snprintf(why, sizeof why, "the epoch's one-sided operations were recorded %s than their completion",
             w->tape ? "on another tape" : "outside a recording");
  }
  /* Within one batch MPI orders nothing but accumulates to one element:
   * elements accessed twice must be only read, or only summed into. */
  for (int i = 0; i < w->nacc && code == MPI_SUCCESS; i++) {
    const access *a = &w->acc[i];
    if (a->target != target) continue;
    for (int j = i + 1; j < w->nacc && code == MPI_SUCCESS; j++) {
      const access *b = &w->acc[j];
      if (b->target != target || b->disp >= a->disp + a->count || a->disp >= b->disp + b->count) continue;
      if ((a->kind == K_GET && b->kind == K_GET) || (sums(a->kind) && sums(b->kind))) continue;
      snprintf(why, sizeof why,
               "%s and %s overlap at element %d of rank %d's window in one passive-target epoch, which MPI leaves "
               "undefined (only gets, or only accumulates with MPI_SUM, may overlap)",
               kind_name(a->kind), kind_name(b->kind), a->disp > b->disp ? a->disp : b->disp, target);
      code = MPI_ERR_RMA_CONFLICT;
    }
  }
  uint64_t one = 1, b = 0;
  uint64_t *mb = malloc((size_t)maxc * sizeof *mb);
  int rc = mb ? MPI_Win_flush(target, w->mpi) : MPI_ERR_NO_MEM;
  int tm = mark_at(w->sizes[target]);
  if (rc == MPI_SUCCESS) rc = MPI_Fetch_and_op(&one, &b, MPI_UINT64_T, target, tm + w->sizes[target], MPI_SUM, w->mpi);
  if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, w->mpi);
  for (int c = 0; mb && c < maxc; c++) mb[c] = b + 1;
  for (int i = 0; i < w->nacc && rc == MPI_SUCCESS; i++) {
    const access *a = &w->acc[i];
    if (a->target == target && contributes(a->kind) && a->count)
      rc = MPI_Accumulate(mb, a->count, MPI_UINT64_T, target, tm + a->disp, a->count, MPI_UINT64_T, MPI_MAX, w->mpi);
  }
  if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, w->mpi);
  free(mb);
  ad_tape *rt = code == MPI_SUCCESS && rc == MPI_SUCCESS ? t : NULL;
  pbatch *x = NULL;
  if (rt) {
    x = calloc(1, sizeof *x);
    if (x) {
      x->a = malloc((size_t)k * 3 * sizeof *x->a);
      x->off = malloc(((size_t)k + 1) * sizeof *x->off);
      x->in = calloc((size_t)total + 1, sizeof *x->in);
      x->out = calloc((size_t)total + 1, sizeof *x->out);
    }
    if (!x || !x->a || !x->off || !x->in || !x->out) {
      batch_free(x);
      x = NULL;
      rt = NULL;
      code = MPI_ERR_NO_MEM;
      snprintf(why, sizeof why, "no memory for the record");
    }
  }
  int kept = 0, j = 0;
  if (x) x->off[0] = 0;
  for (int i = 0; i < w->nacc; i++) {
    access *a = &w->acc[i];
    if (a->target != target) {
      w->acc[kept++] = *a;
      continue;
    }
    if (x) {
      x->a[3 * j] = a->disp;
      x->a[3 * j + 1] = a->count;
      x->a[3 * j + 2] = a->kind;
      x->off[j + 1] = x->off[j] + a->count;
      if (a->in) memcpy(x->in + x->off[j], a->in, (size_t)a->count * sizeof *a->in);
    }
    if (returns(a->kind)) ad__rma_deliver(a, rt, x ? x->out + x->off[j] : NULL);
    ad__rma_access_free(a);
    j++;
  }
  w->nacc = kept;
  if (x) {
    x->h.what = RMA_BATCH;
    x->h.pw = w->pw;
    x->target = target;
    x->tn = w->sizes[target];
    x->na = k;
    x->ticket = (int64_t)b;
    if (pw_push(rt, AD__M_RMA_BATCH, w, &x->h))
      w->pw->used = 1;
    else {
      batch_free(x);
      x = NULL;
      code = MPI_ERR_NO_MEM;
      snprintf(why, sizeof why, "no memory for the record");
    }
  }
  if (w->nacc == 0) {
    if (w->tok) {
      w->tok->state = x && rt == w->tape ? NOTE_RECORDED : NOTE_LOST;
      note_release(w->tok);
      w->tok = NULL;
    }
    w->tape = NULL;
  }
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  if (code != MPI_SUCCESS) return ad__mpi_refuse(code, "%s: %s", fn, why);
  return MPI_SUCCESS;
}

/* The window of a passive-target call on a window of ad_real, or NULL for
 * MPI's own windows (*rc = MPI_SUCCESS) or a refusal. */
static win *passive_window(MPI_Win mwin, ad_tape **t, ad_tape **seen, int *rc, const char *fn) {
  win *w = ad__rma_lookup(mwin);
  *rc = MPI_SUCCESS;
  if (!w) return NULL;
  *t = ad__mpi_tape(seen);
  ad__mpi_note_coll(*seen, w->c);
  *rc = ad__rma_passive_check(w, *t, *seen, fn);
  return *rc == MPI_SUCCESS ? w : NULL;
}

static int first_error(int a, int b) { return a != MPI_SUCCESS ? a : b; }

int ad_mpi_win_lock(int lock_type, int rank, int assert, MPI_Win mwin) {
  const char *fn = "ad_mpi_win_lock";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_lock(lock_type, rank, assert, mwin);
  if (rank < 0 || rank >= w->c->size)
    return ad__mpi_refuse(MPI_ERR_RANK, "%s: rank %d is not in the window's group", fn, rank);
  if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
    return ad__mpi_refuse(MPI_ERR_LOCKTYPE, "%s: the lock type is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE", fn);
  if (w->lk[rank] || w->lk_all)
    return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: this rank already holds a lock on rank %d's part of the window", fn,
                          rank);
  rc = MPI_Win_lock(lock_type, rank, assert, w->mpi);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  w->mode = MODE_PASSIVE;
  w->lk[rank] = lock_type;
  return rank == w->c->rank ? ad__rma_psync(w, t, seen, fn) : MPI_SUCCESS;
}

int ad_mpi_win_unlock(int rank, MPI_Win mwin) {
  const char *fn = "ad_mpi_win_unlock";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_unlock(rank, mwin);
  if (rank < 0 || rank >= w->c->size || !w->lk[rank])
    return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: this rank holds no lock (ad_mpi_win_lock) on rank %d", fn, rank);
  rc = batch_complete(w, rank, t, seen, fn);
  if (rank == w->c->rank) rc = first_error(rc, ad__rma_psync(w, t, seen, fn));
  int u = MPI_Win_unlock(rank, w->mpi);
  w->lk[rank] = 0;
  return first_error(rc, u != MPI_SUCCESS ? ad__mpi_forward_error(seen, u, fn) : MPI_SUCCESS);
}

int ad_mpi_win_lock_all(int assert, MPI_Win mwin) {
  const char *fn = "ad_mpi_win_lock_all";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_lock_all(assert, mwin);
  int any = w->lk_all;
  for (int q = 0; q < w->c->size; q++) any |= w->lk[q] != 0;
  if (any) return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: this rank already holds a lock on the window", fn);
  rc = MPI_Win_lock_all(assert, w->mpi);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  w->mode = MODE_PASSIVE;
  w->lk_all = 1;
  return ad__rma_psync(w, t, seen, fn);
}

int ad_mpi_win_unlock_all(MPI_Win mwin) {
  const char *fn = "ad_mpi_win_unlock_all";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_unlock_all(mwin);
  if (!w->lk_all) return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: this rank holds no ad_mpi_win_lock_all", fn);
  for (int q = 0; q < w->c->size; q++) rc = first_error(rc, batch_complete(w, q, t, seen, fn));
  rc = first_error(rc, ad__rma_psync(w, t, seen, fn));
  int u = MPI_Win_unlock_all(w->mpi);
  w->lk_all = 0;
  return first_error(rc, u != MPI_SUCCESS ? ad__mpi_forward_error(seen, u, fn) : MPI_SUCCESS);
}

/* flush and flush_local complete the batch (a local completion is not
 * enough to mark the target). */
static int flush_one(int rank, MPI_Win mwin, int local, const char *fn) {
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : local ? MPI_Win_flush_local(rank, mwin) : MPI_Win_flush(rank, mwin);
  if (rank < 0 || rank >= w->c->size || !(w->lk_all || w->lk[rank]))
    return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: this rank holds no lock on rank %d", fn, rank);
  rc = batch_complete(w, rank, t, seen, fn);
  int f = MPI_Win_flush(rank, w->mpi);
  return first_error(rc, f != MPI_SUCCESS ? ad__mpi_forward_error(seen, f, fn) : MPI_SUCCESS);
}

static int flush_every(MPI_Win mwin, int local, const char *fn) {
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : local ? MPI_Win_flush_local_all(mwin) : MPI_Win_flush_all(mwin);
  for (int q = 0; q < w->c->size; q++)
    if (w->lk_all || w->lk[q]) rc = first_error(rc, batch_complete(w, q, t, seen, fn));
  if (w->nacc) /* accesses without a lock were refused: nothing is left */
    rc = first_error(rc, ad__mpi_refuse(MPI_ERR_RMA_SYNC, "%s: operations pending without a lock", fn));
  int f = MPI_Win_flush_all(w->mpi);
  return first_error(rc, f != MPI_SUCCESS ? ad__mpi_forward_error(seen, f, fn) : MPI_SUCCESS);
}

int ad_mpi_win_flush(int rank, MPI_Win win) { return flush_one(rank, win, 0, "ad_mpi_win_flush"); }
int ad_mpi_win_flush_local(int rank, MPI_Win win) { return flush_one(rank, win, 1, "ad_mpi_win_flush_local"); }
int ad_mpi_win_flush_all(MPI_Win win) { return flush_every(win, 0, "ad_mpi_win_flush_all"); }
int ad_mpi_win_flush_local_all(MPI_Win win) { return flush_every(win, 1, "ad_mpi_win_flush_local_all"); }

int ad_mpi_win_sync(MPI_Win mwin) {
  const char *fn = "ad_mpi_win_sync";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_sync(mwin);
  w->mode = MODE_PASSIVE;
  return ad__rma_psync(w, t, seen, fn);
}

/* At a sweep's start: the tape holds the window's whole passive-target life. */
int ad__rma_passive_sweep_check(ad_tape *t) {
  for (pwin *pw = ad__rma_pwins; pw; pw = pw->next) {
    if (pw->tape != t) continue;
    if (pw->holes && (pw->used || pw->ended)) {
      ad__fail(t, AD_ERR_MPI,
               "ad_mpi_win_lock: records of passive-target epochs on a window created in this recording were "
               "discarded (ad_tape_reset_to) while the window lived, so the sweeps cannot order the others; no sweep "
               "is possible");
      return 1;
    }
    if (pw->used && !pw->ended) {
      ad__fail(t, AD_ERR_MPI,
               "ad_mpi_win_free: a window used in passive-target epochs on this tape was not freed in the recording "
               "(free it with ad_mpi_win_free before ad_tape_end); no sweep is possible");
      return 1;
    }
  }
  return 0;
}

int ad__rma_barrier(int after) {
  int rc = MPI_SUCCESS;
  for (win *w = ad__rma_wins; w; w = w->next) {
    if (w->mode == MODE_FENCE) continue;
    ad_tape *seen, *t = ad__mpi_tape(&seen);
    if (!after) {
      /* Before MPI's barrier: this rank's stores go into the shadow, where
       * the other ranks' operations after the barrier meet them. A window
       * that saw no passive-target call here may yet be used with fences:
       * publish tentatively, and quietly not at all where passive-target
       * calls would be refused (those refusals come with the calls). */
      if (passive_bar(w, t, seen)) continue;
      int tentative = w->mode == MODE_NONE ? SYNC_TENTATIVE : 0;
      rc = first_error(rc, psync_as(w, t, seen, "ad_mpi_barrier", SYNC_PUBLISH | tentative));
      continue;
    }
    /* a rank that made no passive-target call itself may be the target of
     * others: tickets that others drew at its part say so */
    if (w->mode == MODE_NONE && ad__rma_my_tickets(w) <= w->pubs) continue;
    if (ad__rma_passive_check(w, t, seen, "ad_mpi_barrier") != MPI_SUCCESS) continue; /* its own calls were refused */
    w->mode = MODE_PASSIVE;
    rc = first_error(rc, ad__rma_psync(w, t, seen, "ad_mpi_barrier"));
  }
  return rc;
}

/* ---- the sweeps ---------------------------------------------------------- */

static int sweep_barrier(ad_tape *t, ad__comm *c, const char *what) {
  MPI_Request q;
  int e = MPI_Ibarrier(c->priv, &q);
  return e != MPI_SUCCESS ? ad__mpi_fail(t, e, what) : ad__mpi_wait(t, &q, MPI_STATUS_IGNORE, what);
}

static int64_t turn_of(const pwin *pw) {
  int64_t v;
  memcpy(&v, &pw->sb[pw->n], sizeof v);
  return v;
}

/* The sweep's window, made when every rank has come to it (a rank that
 * does not sweep makes the others time out here instead of waiting in
 * MPI_Win_allocate). If a sweep fails while it is open, it stays open. */
static int sweep_open(ad_tape *t, ad__mrec *r, pwin *pw, int reverse) {
  const char *what = reverse ? "the other ranks to begin the adjoint of a window's passive-target epochs"
                             : "the other ranks to begin the tangent of a window's passive-target epochs";
  int rc = sweep_barrier(t, r->c, what);
  if (rc != AD_OK) return rc;
  int n = pw->n;
  MPI_Aint slots = (MPI_Aint)n + 1 + ((n + 1) & 1);
  int e = MPI_Win_allocate(slots * (MPI_Aint)sizeof(double), (int)sizeof(double), MPI_INFO_NULL, r->c->priv, &pw->sb,
                           &pw->sw);
  if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
  MPI_Win_set_errhandler(pw->sw, MPI_ERRORS_RETURN);
  for (int i = 0; i < n; i++) pw->sb[i] = reverse || !pw->h0[i] ? 0.0 : t->tan[pw->h0[i]];
  int64_t turn = reverse ? pw->tickets : 0;
  memcpy(&pw->sb[n], &turn, sizeof turn);
  e = MPI_Win_lock_all(MPI_MODE_NOCHECK, pw->sw);
  if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
  return sweep_barrier(t, r->c, what);
}

static int sweep_close(ad_tape *t, ad__mrec *r, pwin *pw, int reverse) {
  const char *what = reverse ? "the other ranks to finish the adjoint of a window's passive-target epochs"
                             : "the other ranks to finish the tangent of a window's passive-target epochs";
  if (pw->sw == MPI_WIN_NULL) {
    ad__pending(t, AD_ERR_MPI, "%s: the sweep's window was not made", what);
    return AD_ERR_MPI;
  }
  int rc = sweep_barrier(t, r->c, what);
  if (rc != AD_OK) return rc;
  MPI_Win_sync(pw->sw);
  int64_t turn = turn_of(pw), want = reverse ? 0 : pw->tickets;
  if (reverse)
    for (int i = 0; i < pw->n; i++)
      if (pw->h0[i]) t->adj[pw->h0[i]] += pw->sb[i];
  MPI_Win_unlock_all(pw->sw);
  int e = MPI_Win_free(&pw->sw);
  pw->sw = MPI_WIN_NULL;
  pw->sb = NULL;
  if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
  if (turn != want) {
    ad__pending(t, AD_ERR_MPI, "%s: %lld of this rank's %lld one-sided turns were not taken", what,
                (long long)(reverse ? turn : want - turn), (long long)pw->tickets);
    return AD_ERR_MPI;
  }
  return AD_OK;
}

/* Wait until the turn counter at target reads `want`. */
static int turn_wait(ad_tape *t, pwin *pw, int target, int tn, int64_t want, const char *what) {
  double t0 = MPI_Wtime(), limit = ad__mpi_timeout();
  for (unsigned spins = 0;; spins++) {
    int64_t cur = -1;
    int e = MPI_Fetch_and_op(NULL, &cur, MPI_INT64_T, target, tn, MPI_NO_OP, pw->sw);
    if (e == MPI_SUCCESS) e = MPI_Win_flush(target, pw->sw);
    if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
    if (cur == want) return AD_OK;
    double el = MPI_Wtime() - t0;
    if (el > limit) {
      ad__pending(t, AD_ERR_MPI,
                  "waited %.0f s for %s at rank %d (turn %lld, counter %lld): a rank did not start its sweep, or "
                  "recorded different one-sided operations",
                  el, what, target, (long long)want, (long long)cur);
      return AD_ERR_MPI;
    }
    if (spins > 64) {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    }
  }
}

static int turn_pass(ad_tape *t, pwin *pw, int target, int tn, int64_t d, const char *what) {
  int e = MPI_Accumulate(&d, 1, MPI_INT64_T, target, tn, 1, MPI_INT64_T, MPI_SUM, pw->sw);
  if (e == MPI_SUCCESS) e = MPI_Win_flush(target, pw->sw);
  return e == MPI_SUCCESS ? AD_OK : ad__mpi_fail(t, e, what);
}

static int batch_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  pbatch *x = r->rma;
  pwin *pw = x->h.pw;
  const char *what = reverse ? "the turn of a passive-target epoch's adjoint"
                             : "the turn of a passive-target epoch's "
                               "tangent";
  if (pw->sw == MPI_WIN_NULL) {
    ad__pending(t, AD_ERR_MPI, "%s: the sweep's window was not made", what);
    return AD_ERR_MPI;
  }
  int rc = turn_wait(t, pw, x->target, x->tn, reverse ? x->ticket + 1 : x->ticket, what);
  if (rc != AD_OK) return rc;
  size_t total = (size_t)x->off[x->na] + 1;
  double *v = calloc(total, sizeof *v), *z = calloc(total, sizeof *z), *f = calloc(total, sizeof *f);
  if (!v || !z || !f) {
    free(v);
    free(z);
    free(f);
    return AD_ERR_NOMEM;
  }
  int e = MPI_SUCCESS, tg = x->target;
  uint64_t bytes = 0;
  for (int s = 0; s < x->na && e == MPI_SUCCESS; s++) {
    int i = reverse ? x->na - 1 - s : s; /* the adjoints in reverse order: MPI orders accumulates to one element */
    int disp = x->a[3 * i], count = x->a[3 * i + 1], kind = x->a[3 * i + 2];
    double *vi = v + x->off[i], *zi = z + x->off[i], *fi = f + x->off[i];
    const ad_index *in = x->in + x->off[i], *out = x->out + x->off[i];
    bytes += (uint64_t)count * sizeof(double) * (uint64_t)(contributes(kind) + returns(kind));
    if (!count) continue;
    if (reverse) {
      /* contributions: fetch the written elements' adjoint (and zero it
       * where the old value was overwritten); fetches: add their adjoint */
      if (contributes(kind))
        e = MPI_Get_accumulate(zi, sums(kind) ? 0 : count, MPI_DOUBLE, fi, count, MPI_DOUBLE, tg, disp, count,
                               MPI_DOUBLE, sums(kind) ? MPI_NO_OP : MPI_REPLACE, pw->sw);
      if (e == MPI_SUCCESS && returns(kind)) {
        ad__adj_take(t, out, count, vi);
        e = MPI_Accumulate(vi, count, MPI_DOUBLE, tg, disp, count, MPI_DOUBLE, MPI_SUM, pw->sw);
      }
    } else {
      if (contributes(kind)) ad__tan_get(t, in, count, vi);
      if (kind == K_PUT || kind == K_ACC_REPLACE || kind == K_ACC_SUM)
        e = MPI_Accumulate(vi, count, MPI_DOUBLE, tg, disp, count, MPI_DOUBLE,
                           kind == K_ACC_SUM ? MPI_SUM : MPI_REPLACE, pw->sw);
      else
        e = MPI_Get_accumulate(vi, kind == K_GET ? 0 : count, MPI_DOUBLE, fi, count, MPI_DOUBLE, tg, disp, count,
                               MPI_DOUBLE,
                               kind == K_GET        ? MPI_NO_OP
                               : kind == K_GACC_SUM ? MPI_SUM
                                                    : MPI_REPLACE,
                               pw->sw);
    }
  }
  if (e == MPI_SUCCESS) e = MPI_Win_flush(tg, pw->sw);
  if (e != MPI_SUCCESS) rc = ad__mpi_fail(t, e, what);
  for (int i = 0; rc == AD_OK && i < x->na; i++) {
    int count = x->a[3 * i + 1], kind = x->a[3 * i + 2];
    if (reverse && contributes(kind)) ad__adj_add(t, x->in + x->off[i], count, f + x->off[i], NULL);
    if (!reverse && returns(kind)) ad__tan_set(t, x->out + x->off[i], count, f + x->off[i]);
  }
  free(v);
  free(z);
  free(f);
  if (tg != r->c->rank) {
    if (reverse)
      ad__mpi_counters.adjoint_bytes += bytes;
    else
      ad__mpi_counters.tangent_bytes += bytes;
  }
  return rc == AD_OK ? turn_pass(t, pw, tg, x->tn, reverse ? -1 : 1, what) : rc;
}

static int sync_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  psyncrec *x = r->rma;
  pwin *pw = x->h.pw;
  /* Only tentative records (stores published by barriers) on a window that
   * no rank used in passive-target epochs: the values stayed in the user's
   * array, under their handles, and the shadow is no variable of its own. */
  if (!pw->all_used) return AD_OK;
  const char *what =
      reverse ? "the turn of a window synchronisation's adjoint" : "the turn of a window synchronisation's tangent";
  if (pw->sw == MPI_WIN_NULL) {
    ad__pending(t, AD_ERR_MPI, "%s: the sweep's window was not made", what);
    return AD_ERR_MPI;
  }
  int me = r->c->rank;
  int rc = turn_wait(t, pw, me, pw->n, reverse ? x->ticket + 1 : x->ticket, what);
  if (rc != AD_OK) return rc;
  double *sb = pw->sb;
  MPI_Win_sync(pw->sw);
  if (reverse) {
    /* taken in: the window's adjoint gets the new value's; published: the
     * published value gets the window's, which it overwrote */
    for (int k = 0; k < x->ni; k++) {
      sb[x->ie[k]] += t->adj[x->ih[k]];
      t->adj[x->ih[k]] = 0.0;
    }
    for (int k = 0; k < x->np; k++) {
      if (x->ph[k]) t->adj[x->ph[k]] += sb[x->pe[k]];
      sb[x->pe[k]] = 0.0;
    }
  } else {
    for (int k = 0; k < x->ni; k++) t->tan[x->ih[k]] = sb[x->ie[k]];
    for (int k = 0; k < x->np; k++) sb[x->pe[k]] = x->ph[k] ? t->tan[x->ph[k]] : 0.0;
  }
  MPI_Win_sync(pw->sw);
  return turn_pass(t, pw, me, pw->n, reverse ? -1 : 1, what);
}

int ad__rma_passive_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  phead *h = r->rma;
  pwin *pw = h->pw;
  switch (r->kind) {
  case AD__M_RMA_PBEGIN:
    if (!pw->ended || !pw->all_used) return AD_OK;
    return reverse ? sweep_close(t, r, pw, 1) : sweep_open(t, r, pw, 0);
  case AD__M_RMA_PEND:
    if (!pw->all_used) return AD_OK;
    return reverse ? sweep_open(t, r, pw, 1) : sweep_close(t, r, pw, 0);
  case AD__M_RMA_BATCH:
    return batch_sweep(t, r, reverse);
  default:
    return sync_sweep(t, r, reverse);
  }
}
