/* SPDX-License-Identifier: BSD-3-Clause */
/* One-sided communication on windows of ad_real memory, synchronised by
 * fences or in passive-target epochs (rma_passive.c),
 * and the adjoint and tangent actions of its epochs (docs/mpi-onesided.md).
 *
 * A window on ad_real memory is an MPI window over a shadow array of doubles
 * (the values) kept next to the user's array. The wrappers move values
 * through MPI and note each access; at the fence that closes an epoch the
 * origins tell the targets what they accessed (an alltoall of counts and an
 * alltoallv of ranges on the private communicator), every target refuses
 * accesses that MPI leaves undefined, the elements written in the epoch get
 * new handles, fetched values become new handles at the origins, and one
 * record on the tape holds the whole epoch.
 *
 * The sweeps run the epoch's mirror at that record: one nonblocking alltoallv
 * on the private communicator, waited for with the sweep timeout (a fence
 * cannot time out, so the sweeps use no window). Reverse: a put's target
 * sends the adjoint of what was written and zeroes it (the mirrored get); an
 * accumulate's target sends it without zeroing and keeps it on the old
 * value; a get's origin sends the adjoint of what it fetched, which the
 * target adds (the mirrored accumulate). Tangent: the same traffic in the
 * primal direction. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rma_impl.h"

win *ad__rma_wins;
pwin *ad__rma_pwins;
/* The notes of open epochs (see token). */
static token *notes;
static int win_keyval = MPI_KEYVAL_INVALID;

/* Joined when the first window is made: every sweep checks the epochs
 * recorded on its tape, and ad_mpi_barrier synchronises the windows. */
static int rma_sweep_check(ad_tape *t);
static ad__mpi_chapter chapter = {rma_sweep_check, ad__rma_barrier, NULL, NULL, 0};

typedef struct rma_rec {
  int what; /* RMA_EPOCH */
  int p, no, nt;
  int *o;               /* per origin access: target, count, kind */
  int *tg;              /* per target access: origin, count, kind */
  int *ooff, *toff;     /* prefix sums of the counts (no + 1, nt + 1) */
  int *ostart, *tstart; /* first access per peer (p + 1) */
  ad_index *o_in, *o_out, *t_old, *t_new;
  /* Values per peer that the tangent sweep sends (f) and receives (b); the
   * reverse sweep sends b and receives f. */
  int *fcnt, *fdsp, *bcnt, *bdsp;
  int fn, bn;
} rma_rec;

static void rma_free(void *data) {
  if (!data) return;
  if (*(int *)data >= RMA_PBEGIN) {
    ad__rma_passive_free(data);
    return;
  }
  if (*(int *)data == RMA_NOTE) {
    token *k = data;
    if (k->prev)
      k->prev->next = k->next;
    else
      notes = k->next;
    if (k->next) k->next->prev = k->prev;
    note_release(k);
    return;
  }
  rma_rec *x = data;
  AD__FREE_EACH(x->o, x->tg, x->ooff, x->toff, x->ostart, x->tstart, x->o_in, x->o_out, x->t_old, x->t_new, x->fcnt,
                x->fdsp, x->bcnt, x->bdsp, x);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Complete a nonblocking collective of a forward call, as its blocking
 * twin would, but yielding the processor once spinning is clearly not
 * enough: ranks oversubscribed on few cores need the time themselves, and
 * a fence makes several such collectives. */
int ad__rma_finish(int e, MPI_Request *r) {
  if (e != MPI_SUCCESS) return e;
  for (unsigned spins = 0;; spins++) {
    int flag = 0;
    e = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS || flag) return e;
    if (spins > 256) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

win *ad__rma_lookup(MPI_Win w) {
  if (w == MPI_WIN_NULL || win_keyval == MPI_KEYVAL_INVALID) return NULL;
  void *attr = NULL;
  int flag = 0;
  if (MPI_Win_get_attr(w, win_keyval, &attr, &flag) != MPI_SUCCESS || !flag) return NULL;
  return attr;
}

static int rma_sweep_check(ad_tape *t) {
  if (ad__rma_passive_sweep_check(t)) return 1;
  for (token *k = notes; k; k = k->next) {
    if (k->tape != t || k->state == NOTE_RECORDED) continue;
    /* sticky: closing the epoch later does not put it on this tape */
    if (k->state == NOTE_OPEN)
      ad__fail(t, AD_ERR_MPI,
               "ad_mpi_win_fence: one-sided operations were recorded on this tape in an epoch that no fence had "
               "closed when the tape was swept (close it with ad_mpi_win_fence before ad_tape_end); no sweep is "
               "possible");
    else
      ad__fail(t, AD_ERR_MPI,
               "ad_mpi_win_fence: one-sided operations were recorded on this tape in an epoch closed by a fence "
               "outside this recording, so the tape lacks them; no sweep is possible");
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Windows                                                                   */
/* ------------------------------------------------------------------------ */

/* Collective over comm: every rank learns whether all ranks are fine
 * (`ok`), so that a window refused on one rank is refused on all, and none
 * waits in MPI for a rank that returned. */
static int agree(ad__comm *c, int ok) {
  int all = ok;
  MPI_Request r;
  if (ad__rma_finish(MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->priv, &r), &r) != MPI_SUCCESS) return 0;
  return all;
}

static int win_make(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, int allocate, void *baseptr,
                    MPI_Win *out, const char *fn) {
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if (!out) return ad__mpi_refuse(MPI_ERR_ARG, "%s: the window argument is NULL", fn);
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return ad__mpi_refuse(err, "%s: the communicator is not valid", fn);
  if (ad__mpi_comm_settled(c) != MPI_SUCCESS || c->freed)
    return ad__mpi_refuse(MPI_ERR_COMM, "%s: the communicator's private duplicate is not available", fn);
  if ((err = ad__mpi_comm_renew(seen, c)) != MPI_SUCCESS)
    return ad__mpi_refuse(err, "%s: renewing the communicator's private duplicate failed", fn);
  ad__mpi_note_coll(seen, c);
  /* A window on ad_real memory counts in elements: its displacement unit
   * is sizeof(ad_real) and its size a whole number of them. */
  int mine = MPI_SUCCESS;
  if (disp_unit != (int)sizeof(ad_real))
    mine = MPI_ERR_DISP;
  else if (size < 0 || size % (MPI_Aint)sizeof(ad_real) != 0 || size / (MPI_Aint)sizeof(ad_real) > 0x3fffffff)
    mine = MPI_ERR_SIZE;
  else if (!allocate && size > 0 && !base)
    mine = MPI_ERR_BUFFER;
  int n = mine == MPI_SUCCESS ? (int)(size / (MPI_Aint)sizeof(ad_real)) : 0;
  win *w = calloc(1, sizeof *w);
  ad_real *ubase = allocate ? calloc((size_t)n + 1, sizeof *ubase) : base;
  ad_real *snap = malloc(((size_t)n + 1) * sizeof *snap);
  int *sizes = malloc((size_t)c->size * sizeof *sizes);
  int ok = mine == MPI_SUCCESS && w && ubase && snap && sizes;
  if (!agree(c, ok)) {
    free(w);
    if (allocate) free(ubase);
    free(snap);
    free(sizes);
    if (mine == MPI_ERR_DISP)
      return ad__mpi_refuse(
          mine,
          "%s: a window on ad_real memory has the displacement unit sizeof(ad_real) = %d, not %d (a window "
          "on the wrong type?)",
          fn, (int)sizeof(ad_real), disp_unit);
    if (mine == MPI_ERR_SIZE)
      return ad__mpi_refuse(
          mine, "%s: size %ld is not a whole number of ad_real elements of %d bytes (a window on the wrong type?)", fn,
          (long)size, (int)sizeof(ad_real));
    if (mine == MPI_ERR_BUFFER) return ad__mpi_refuse(mine, "%s: base is NULL with a nonzero size", fn);
    if (!ok) return ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
    return ad__mpi_refuse(MPI_ERR_OTHER, "%s: another rank refused the window (see its message)", fn);
  }
  w->c = c;
  w->base = ubase;
  w->n = n;
  w->owned = allocate;
  w->snap = snap;
  w->sizes = sizes;
  w->mpi = MPI_WIN_NULL;
  MPI_Request req;
  int rc = ad__rma_finish(MPI_Iallgather(&n, 1, MPI_INT, sizes, 1, MPI_INT, c->priv, &req), &req);
  /* The shadow is MPI's memory (MPI_Win_allocate): Open MPI 4.1 creates no
   * window on a single rank's own memory (MPI_Win_create fails there). Its
   * size is padded to a multiple of 16 bytes: MPICH 4.0 places a rank's
   * segment of an allocated window at the wrong offset otherwise. After the
   * shadow come the marks of passive-target epochs (n elements and the
   * ticket counter), accessed within the epochs that the program opens on
   * the window (one window: making one costs as much as the rest of a
   * small program). */
  if (rc == MPI_SUCCESS)
    rc = MPI_Win_allocate((MPI_Aint)(mark_at(n) + n + 1 + ((n + 1) & 1)) * (MPI_Aint)sizeof(double),
                          (int)sizeof(double), info, comm, &w->shadow, &w->mpi);
  if (rc == MPI_SUCCESS) {
    w->mk = (uint64_t *)(w->shadow + mark_at(n));
    memset(w->mk, 0, ((size_t)n + 1) * sizeof *w->mk);
    w->seen = calloc((size_t)n + 1, sizeof *w->seen);
    w->lk = calloc((size_t)c->size, sizeof *w->lk);
    if (!w->seen || !w->lk) rc = MPI_ERR_NO_MEM;
  }
  if (rc == MPI_SUCCESS && win_keyval == MPI_KEYVAL_INVALID)
    rc = MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &win_keyval, NULL);
  if (rc == MPI_SUCCESS) rc = MPI_Win_set_attr(w->mpi, win_keyval, w);
  if (rc != MPI_SUCCESS) {
    if (w->mpi != MPI_WIN_NULL) MPI_Win_free(&w->mpi);
    free(w->seen);
    free(w->lk);
    if (allocate) free(ubase);
    free(snap);
    free(sizes);
    free(w);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  MPI_Win_set_errhandler(w->mpi, MPI_ERRORS_RETURN);
  for (int i = 0; i < n; i++) w->shadow[i] = ubase[i].v;
  memcpy(snap, ubase, (size_t)n * sizeof *snap);
  /* Nobody marks a rank's part before the rank has cleared it. */
  rc = ad__rma_finish(MPI_Ibarrier(c->priv, &req), &req);
  if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, fn);
  if (t && !ad__rma_pw_make(t, w)) ad__fail(t, AD_ERR_NOMEM, "%s: no memory for the window's record", fn);
  ad__mpi_chapter_join(&chapter);
  w->next = ad__rma_wins;
  ad__rma_wins = w;
  if (allocate) *(ad_real **)baseptr = ubase;
  *out = w->mpi;
  return MPI_SUCCESS;
}

int ad_mpi_win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  return win_make(base, size, disp_unit, info, comm, 0, NULL, win, "ad_mpi_win_create");
}

int ad_mpi_win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
  if (!baseptr) return ad__mpi_refuse(MPI_ERR_ARG, "ad_mpi_win_allocate: baseptr is NULL");
  return win_make(NULL, size, disp_unit, info, comm, 1, baseptr, win, "ad_mpi_win_allocate");
}

void ad__rma_access_free(access *a) {
  free(a->in);
  free(a->val);
  free(a->res);
  if (a->dst) {
    free(a->rbuf);
    free(a->dst);
  }
}

/* The fetched values, as new handles (out: their handles, NULL if not
 * recorded), where the user's result type puts them. */
void ad__rma_deliver(access *a, ad_tape *t, ad_index *out) {
  ad__unpack(t, a->rbuf, a->count, a->res, out);
  if (a->dst)
    for (int k = 0; k < a->count; k++) *a->dst[k] = a->rbuf[k];
}

int ad_mpi_win_free(MPI_Win *mwin) {
  win *w = mwin ? ad__rma_lookup(*mwin) : NULL;
  if (!w) return mwin ? MPI_Win_free(mwin) : MPI_ERR_WIN;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  int locks = w->lk_all;
  for (int q = 0; q < w->c->size; q++) locks |= w->lk[q] != 0;
  /* Every rank learns whether all are done, and whether any used
   * passive-target epochs. */
  int v[2] = {w->nacc != 0 || locks, w->mode == MODE_PASSIVE};
  MPI_Request vr;
  if (ad__rma_finish(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, w->c->priv, &vr), &vr) != MPI_SUCCESS)
    v[0] = 1;
  if (v[0]) {
    if (w->nacc)
      return ad__mpi_refuse(
          MPI_ERR_RMA_SYNC,
          "ad_mpi_win_free: %d one-sided operation(s) on the window are not completed: close the epoch "
          "with ad_mpi_win_fence or complete it with ad_mpi_win_unlock first",
          w->nacc);
    if (locks) return ad__mpi_refuse(MPI_ERR_RMA_SYNC, "ad_mpi_win_free: this rank still holds a lock on the window");
    return ad__mpi_refuse(
        MPI_ERR_RMA_SYNC,
        "ad_mpi_win_free: another rank has one-sided operations or locks on the window not completed");
  }
  int rc = MPI_SUCCESS;
  if (v[1]) {
    /* The last synchronisation: what other ranks wrote is in the memory
     * after the free, as in MPI. */
    rc = w->mode == MODE_FENCE ? MPI_SUCCESS : ad__rma_passive_check(w, t, seen, "ad_mpi_win_free");
    int ok = w->mode != MODE_FENCE && rc == MPI_SUCCESS;
    if (ok) rc = ad__rma_psync(w, t, seen, "ad_mpi_win_free");
    if (ok && t && w->pw && w->pw->tape == t && !ad__rma_pw_end(w, t, ad__rma_my_tickets(w)))
      rc = ad__mpi_refuse(MPI_ERR_NO_MEM, "ad_mpi_win_free: no memory for the record");
  }
  int frc = MPI_Win_free(&w->mpi);
  if (frc != MPI_SUCCESS) return ad__mpi_forward_error(seen, frc, "ad_mpi_win_free");
  for (win **p = &ad__rma_wins; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  if (w->tok) {
    w->tok->state = NOTE_LOST;
    note_release(w->tok);
  }
  if (w->owned) free(w->base);
  if (w->pw) ad__rma_pw_release(w->pw);
  AD__FREE_EACH(w->snap, w->sizes, w->acc, w->seen, w->lk, w);
  *mwin = MPI_WIN_NULL;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Accesses                                                                  */
/* ------------------------------------------------------------------------ */

static int in_some_window(const ad_real *p, int n) {
  for (win *w = ad__rma_wins; w; w = w->next)
    if (p < w->base + w->n && p + n > w->base) return 1;
  return 0;
}

/* Common part of put, get, accumulate and get_accumulate on a window of
 * ad_real memory. `origin` holds the contributed values, `result` receives
 * the fetched ones. */
static int rma_access(const ad_real *origin, ad_real *result, ad_real **dst, int count, int target, MPI_Aint disp,
                      int kind, MPI_Op op, win *w, const char *fn) {
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  ad__mpi_note_coll(seen, w->c);
  if (count < 0) return ad__mpi_refuse(MPI_ERR_COUNT, "%s: negative count", fn);
  if (target == MPI_PROC_NULL) return MPI_SUCCESS;
  if (target < 0 || target >= w->c->size)
    return ad__mpi_refuse(MPI_ERR_RANK, "%s: target rank %d is not in the window's group", fn, target);
  if (w->mode == MODE_PASSIVE) {
    if (!w->lk_all && !w->lk[target])
      return ad__mpi_refuse(MPI_ERR_RMA_SYNC,
                            "%s: this rank holds no lock on rank %d's part of the window (ad_mpi_win_lock or "
                            "ad_mpi_win_lock_all first)",
                            fn, target);
    int pc = ad__rma_passive_check(w, t, seen, fn);
    if (pc != MPI_SUCCESS) return pc;
    if ((kind == K_ACC_REPLACE || kind == K_GACC_SUM || kind == K_GACC_REPLACE) && w->lk[target] != MPI_LOCK_EXCLUSIVE)
      return ad__mpi_refuse(MPI_ERR_RMA_SYNC,
                            "%s: %s under a shared lock may be applied in another order than the ranks complete their "
                            "epochs, which the sweeps must know; take an exclusive lock (ad_mpi_win_lock with "
                            "MPI_LOCK_EXCLUSIVE)",
                            fn, kind_name(kind));
  } else if (!w->open)
    return ad__mpi_refuse(MPI_ERR_RMA_SYNC,
                          "%s: no access epoch is open on the window (call ad_mpi_win_fence first; a fence with "
                          "MPI_MODE_NOSUCCEED opens none; or lock it for a passive-target epoch)",
                          fn);
  if (disp < 0 || disp + count > w->sizes[target])
    return ad__mpi_refuse(MPI_ERR_RMA_RANGE, "%s: elements %ld to %ld are outside rank %d's window of %d elements", fn,
                          (long)disp, (long)disp + count - 1, target, w->sizes[target]);
  if (w->nacc && w->tape != t)
    return ad__mpi_refuse(
        MPI_ERR_RMA_SYNC,
        "%s: the open epoch's earlier one-sided operations were recorded %s; one epoch belongs to one "
        "recording",
        fn, w->tape ? "on another tape" : "outside a recording");
  int inwin = 0;
  if (returns(kind) && dst)
    for (int k = 0; k < count && !inwin; k++) inwin = in_some_window(dst[k], 1);
  else if (returns(kind))
    inwin = in_some_window(result, count);
  if (inwin)
    return ad__mpi_refuse(
        MPI_ERR_BUFFER,
        "%s: the result buffer lies in a window's memory; fetch into other memory and copy after the fence", fn);
  if (w->nacc == w->cap) {
    int ncap = w->cap ? 2 * w->cap : 8;
    access *na = realloc(w->acc, (size_t)ncap * sizeof *na);
    if (!na) return ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
    w->acc = na;
    w->cap = ncap;
  }
  if (t && !w->tok) {
    token *k = calloc(1, sizeof *k);
    ad__mrec *r = k ? ad__mrec_push(t, AD__M_RMA_OPEN, w->c, 0, 0) : NULL;
    if (!r) {
      free(k);
      return ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
    }
    k->what = RMA_NOTE;
    k->state = NOTE_OPEN;
    k->refs = 2; /* the record's and the window's */
    k->tape = t;
    k->next = notes;
    if (notes) notes->prev = k;
    notes = k;
    r->rma = k;
    w->tok = k;
  }
  access a = {target, (int)disp, count, kind, NULL, NULL, NULL, result, NULL};
  size_t sz = (size_t)(count ? count : 1);
  int nomem = 0;
  if (contributes(kind)) {
    nomem |= !(a.val = malloc(sz * sizeof *a.val));
    if (t) nomem |= !(a.in = calloc(sz, sizeof *a.in));
  }
  if (returns(kind)) nomem |= !(a.res = calloc(sz, sizeof *a.res));
  if (returns(kind) && dst && !nomem) {
    a.rbuf = calloc(sz, sizeof *a.rbuf);
    a.dst = malloc(sz * sizeof *a.dst);
    if (a.dst) memcpy(a.dst, dst, (size_t)count * sizeof *a.dst);
    nomem |= !a.rbuf || !a.dst;
    if (!a.dst) {
      free(a.rbuf);
      a.rbuf = NULL;
    }
  }
  if (nomem) {
    ad__rma_access_free(&a);
    return ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
  }
  if (contributes(kind)) {
    ad__pack(origin, count, a.val);
    if (t && ad__handles(t, origin, count, a.in, fn) != AD_OK) {
      ad__rma_access_free(&a);
      return MPI_ERR_BUFFER;
    }
  }
  int rc;
  switch (kind) {
  case K_PUT:
    rc = MPI_Put(a.val, count, MPI_DOUBLE, target, disp, count, MPI_DOUBLE, w->mpi);
    break;
  case K_GET:
    rc = op == MPI_NO_OP ? MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, a.res, count, MPI_DOUBLE, target, disp, count,
                                              MPI_DOUBLE, MPI_NO_OP, w->mpi)
                         : MPI_Get(a.res, count, MPI_DOUBLE, target, disp, count, MPI_DOUBLE, w->mpi);
    break;
  case K_ACC_SUM:
  case K_ACC_REPLACE:
    rc = MPI_Accumulate(a.val, count, MPI_DOUBLE, target, disp, count, MPI_DOUBLE, op, w->mpi);
    break;
  default:
    rc = MPI_Get_accumulate(a.val, count, MPI_DOUBLE, a.res, count, MPI_DOUBLE, target, disp, count, MPI_DOUBLE, op,
                            w->mpi);
    break;
  }
  if (rc != MPI_SUCCESS) {
    ad__rma_access_free(&a);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  if (target != w->c->rank)
    ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double) * (uint64_t)(contributes(kind) + returns(kind));
  w->acc[w->nacc++] = a;
  w->tape = t;
  return MPI_SUCCESS;
}

/* The window of an access on AD_MPI_REAL data, or why there is none. NULL
 * with *rc = MPI_SUCCESS: a plain window with other data, for MPI itself. */
static win *access_window(MPI_Win mwin, int n_types, const MPI_Datatype *types, int *rc, const char *fn) {
  *rc = MPI_SUCCESS;
  int nreal = 0;
  for (int i = 0; i < n_types; i++) nreal += types[i] == AD_MPI_REAL || ad__dtype_any(1, types[i]);
  win *w = ad__rma_lookup(mwin);
  if (!w && nreal)
    *rc = ad__mpi_refuse(
        MPI_ERR_WIN, "%s: AD_MPI_REAL data on a window that ad_mpi_win_create or ad_mpi_win_allocate did not create",
        fn);
  else if (w && nreal != n_types)
    *rc = ad__mpi_refuse(
        MPI_ERR_TYPE,
        "%s: a window on ad_real memory is accessed with AD_MPI_REAL data only (a window on the wrong type?)", fn);
  return w;
}

/* An access with any datatypes of active values: AD_MPI_REAL alone goes
 * straight to rma_access; derived types (built on AD_MPI_REAL, no passive
 * fields) are flattened, the target's elements cut into contiguous runs, and
 * each run becomes one access, its origin values gathered and its results
 * scattered where the result type puts them. */
static int typed_access(const void *origin, int ocount, MPI_Datatype otype, void *result, int rcount,
                        MPI_Datatype rtype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, int kind,
                        MPI_Op op, win *w, const char *fn) {
  int c = contributes(kind), r = returns(kind);
  if ((!c || otype == AD_MPI_REAL) && (!r || rtype == AD_MPI_REAL) && ttype == AD_MPI_REAL) {
    if ((c && ocount != tcount) || (r && rcount != tcount))
      return ad__mpi_refuse(MPI_ERR_COUNT, "%s: origin count %d, result count %d and target count %d differ", fn,
                            c ? ocount : tcount, r ? rcount : tcount, tcount);
    return rma_access(origin, result, NULL, tcount, target, tdisp, kind, op, w, fn);
  }
  if (ocount < 0 || rcount < 0 || tcount < 0) return ad__mpi_refuse(MPI_ERR_COUNT, "%s: negative count", fn);
  MPI_Aint *to = NULL, *oo = NULL, *ro = NULL;
  long nt = ad__dtype_offsets(fn, ttype, tcount, &to), no = 0, nr = 0;
  int rc = nt < 0 ? MPI_ERR_TYPE : MPI_SUCCESS;
  if (rc == MPI_SUCCESS && c && (no = ad__dtype_offsets(fn, otype, ocount, &oo)) < 0) rc = MPI_ERR_TYPE;
  if (rc == MPI_SUCCESS && r && (nr = ad__dtype_offsets(fn, rtype, rcount, &ro)) < 0) rc = MPI_ERR_TYPE;
  if (rc == MPI_SUCCESS && ((c && no != nt) || (r && nr != nt)))
    rc = ad__mpi_refuse(MPI_ERR_COUNT, "%s: the origin has %ld, the result %ld and the target %ld ad_real elements", fn,
                        c ? no : nt, r ? nr : nt, nt);
  for (long k = 0; rc == MPI_SUCCESS && k < nt; k++)
    if (to[k] % (MPI_Aint)sizeof(ad_real) != 0)
      rc = ad__mpi_refuse(MPI_ERR_TYPE, "%s: the target datatype places an element between two ad_real elements", fn);
  ad_real *ob = c ? malloc(((size_t)nt + 1) * sizeof *ob) : NULL;
  ad_real **rd = r ? malloc(((size_t)nt + 1) * sizeof *rd) : NULL;
  if (rc == MPI_SUCCESS && ((c && !ob) || (r && !rd))) rc = ad__mpi_refuse(MPI_ERR_NO_MEM, "%s: no memory", fn);
  for (long k0 = 0, k1; rc == MPI_SUCCESS && k0 < nt; k0 = k1) {
    MPI_Aint e0 = tdisp + to[k0] / (MPI_Aint)sizeof(ad_real);
    for (k1 = k0 + 1; k1 < nt && tdisp + to[k1] / (MPI_Aint)sizeof(ad_real) == e0 + (k1 - k0); k1++) {
    }
    for (long k = k0; c && k < k1; k++) ob[k] = *(const ad_real *)((const char *)origin + oo[k]);
    for (long k = k0; r && k < k1; k++) rd[k] = (ad_real *)((char *)result + ro[k]);
    rc = rma_access(c ? ob + k0 : NULL, NULL, r ? rd + k0 : NULL, (int)(k1 - k0), target, e0, kind, op, w, fn);
  }
  free(to);
  free(oo);
  free(ro);
  free(ob);
  free(rd);
  return rc;
}

/* Put (acc 0) and accumulate (acc 1, with op). */
static int put_any(int acc, const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win,
                   const char *fn) {
  MPI_Datatype ty[2] = {origin_datatype, target_datatype};
  int rc;
  struct win *w = access_window(win, 2, ty, &rc, fn);
  if (!w && rc == MPI_SUCCESS) rc = ad__mpi_guard(fn, "origin buffer", origin_addr, origin_count, origin_datatype);
  if (!w && rc == MPI_SUCCESS)
    return acc ? MPI_Accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                                target_datatype, op, win)
               : MPI_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count,
                         target_datatype, win);
  if (rc != MPI_SUCCESS) return rc;
  if (acc && op != MPI_SUM && op != MPI_REPLACE)
    return ad__mpi_refuse(MPI_ERR_OP, "%s: only MPI_SUM and MPI_REPLACE are differentiable here", fn);
  return typed_access(origin_addr, origin_count, origin_datatype, NULL, 0, MPI_DATATYPE_NULL, target_rank, target_disp,
                      target_count, target_datatype,
                      !acc            ? K_PUT
                      : op == MPI_SUM ? K_ACC_SUM
                                      : K_ACC_REPLACE,
                      acc ? op : MPI_REPLACE, w, fn);
}

int ad_mpi_put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
               MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return put_any(0, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype,
                 MPI_REPLACE, win, "ad_mpi_put");
}

int ad_mpi_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                      MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return put_any(1, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype,
                 op, win, "ad_mpi_accumulate");
}

int ad_mpi_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
               int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  const char *fn = "ad_mpi_get";
  MPI_Datatype ty[2] = {origin_datatype, target_datatype};
  int rc;
  struct win *w = access_window(win, 2, ty, &rc, fn);
  if (!w)
    return rc != MPI_SUCCESS ? rc
                             : MPI_Get(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                                       target_count, target_datatype, win);
  if (rc != MPI_SUCCESS) return rc;
  return typed_access(NULL, 0, MPI_DATATYPE_NULL, origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                      target_count, target_datatype, K_GET, MPI_OP_NULL, w, fn);
}

int ad_mpi_get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr,
                          int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                          int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const char *fn = "ad_mpi_get_accumulate";
  /* With MPI_NO_OP the origin buffer is ignored, as in MPI. */
  int noop = op == MPI_NO_OP;
  MPI_Datatype ty[3] = {result_datatype, target_datatype, origin_datatype};
  int rc;
  struct win *w = access_window(win, noop ? 2 : 3, ty, &rc, fn);
  if (!w && rc == MPI_SUCCESS && !noop)
    rc = ad__mpi_guard(fn, "origin buffer", origin_addr, origin_count, origin_datatype);
  if (!w)
    return rc != MPI_SUCCESS
               ? rc
               : MPI_Get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count,
                                    result_datatype, target_rank, target_disp, target_count, target_datatype, op, win);
  if (rc != MPI_SUCCESS) return rc;
  if (op != MPI_SUM && op != MPI_REPLACE && !noop)
    return ad__mpi_refuse(MPI_ERR_OP, "%s: only MPI_SUM, MPI_REPLACE and MPI_NO_OP are differentiable here", fn);
  int kind = noop ? K_GET : op == MPI_SUM ? K_GACC_SUM : K_GACC_REPLACE;
  return typed_access(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                      target_rank, target_disp, target_count, target_datatype, kind, op, w, fn);
}

/* ------------------------------------------------------------------------ */
/* Fences                                                                    */
/* ------------------------------------------------------------------------ */

int ad__rma_same_real(ad_real a, ad_real b) { return memcmp(&a.v, &b.v, sizeof a.v) == 0 && a.i == b.i && a.e == b.e; }

/* Stable sort by target (insertion: epochs hold few accesses). */
static void sort_accesses(access *a, int n) {
  for (int i = 1; i < n; i++) {
    access x = a[i];
    int j = i;
    while (j > 0 && a[j - 1].target > x.target) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = x;
  }
}

static int *prefix(const int *cnt, int n) {
  int *d = malloc(((size_t)n + 1) * sizeof *d);
  if (!d) return NULL;
  d[0] = 0;
  for (int i = 0; i < n; i++) d[i + 1] = d[i] + cnt[i];
  return d;
}

/* The epoch's description for the sweeps (NULL if out of memory). `tl`
 * holds the target accesses (disp, count, kind), `tl_origin` their origins. */
static rma_rec *rec_make(const win *w, const int *tl, const int *tl_origin, int nt) {
  int p = w->c->size, no = w->nacc;
  rma_rec *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  x->what = RMA_EPOCH;
  x->p = p;
  x->no = no;
  x->nt = nt;
  x->o = malloc(((size_t)no * 3 + 1) * sizeof *x->o);
  x->tg = malloc(((size_t)nt * 3 + 1) * sizeof *x->tg);
  int *oc = malloc(((size_t)no + 1) * sizeof *oc), *tc = malloc(((size_t)nt + 1) * sizeof *tc);
  x->fcnt = calloc((size_t)p, sizeof *x->fcnt);
  x->bcnt = calloc((size_t)p, sizeof *x->bcnt);
  x->ostart = calloc((size_t)p + 1, sizeof *x->ostart);
  x->tstart = calloc((size_t)p + 1, sizeof *x->tstart);
  if (!x->o || !x->tg || !oc || !tc || !x->fcnt || !x->bcnt || !x->ostart || !x->tstart) goto fail;
  for (int i = 0; i < no; i++) {
    const access *a = &w->acc[i];
    x->o[3 * i] = a->target;
    x->o[3 * i + 1] = a->count;
    x->o[3 * i + 2] = a->kind;
    oc[i] = a->count;
    x->ostart[a->target + 1]++;
    if (contributes(a->kind)) x->fcnt[a->target] += a->count;
    if (returns(a->kind)) x->bcnt[a->target] += a->count;
  }
  for (int j = 0; j < nt; j++) {
    int q = tl_origin[j], count = tl[3 * j + 1], kind = tl[3 * j + 2];
    x->tg[3 * j] = q;
    x->tg[3 * j + 1] = count;
    x->tg[3 * j + 2] = kind;
    tc[j] = count;
    x->tstart[q + 1]++;
    if (contributes(kind)) x->bcnt[q] += count;
    if (returns(kind)) x->fcnt[q] += count;
  }
  for (int q = 0; q < p; q++) {
    x->ostart[q + 1] += x->ostart[q];
    x->tstart[q + 1] += x->tstart[q];
  }
  x->ooff = prefix(oc, no);
  x->toff = prefix(tc, nt);
  x->fdsp = prefix(x->fcnt, p);
  x->bdsp = prefix(x->bcnt, p);
  if (!x->ooff || !x->toff || !x->fdsp || !x->bdsp) goto fail;
  x->fn = x->fdsp[p];
  x->bn = x->bdsp[p];
  size_t on = (size_t)x->ooff[no] + 1, tn = (size_t)x->toff[nt] + 1;
  x->o_in = calloc(on, sizeof *x->o_in);
  x->o_out = calloc(on, sizeof *x->o_out);
  x->t_old = calloc(tn, sizeof *x->t_old);
  x->t_new = calloc(tn, sizeof *x->t_new);
  if (!x->o_in || !x->o_out || !x->t_old || !x->t_new) goto fail;
  free(oc);
  free(tc);
  return x;
fail:
  free(oc);
  free(tc);
  rma_free(x);
  return NULL;
}

/* The epoch's accesses, as the targets see them: tl gets (disp, count,
 * kind) per access made on this rank, grouped by origin; tl_origin the
 * origins. Collective over the window's ranks. */
static int exchange_lists(win *w, int **tl, int **tl_origin, int *nt) {
  int p = w->c->size, rc;
  MPI_Comm pc = w->c->priv;
  int *scnt = calloc((size_t)p, sizeof *scnt), *rcnt = calloc((size_t)p, sizeof *rcnt);
  int *sl = malloc(((size_t)w->nacc * 3 + 1) * sizeof *sl);
  int *sdsp = NULL, *rdsp = NULL;
  *tl = *tl_origin = NULL;
  *nt = 0;
  if (!scnt || !rcnt || !sl) {
    rc = MPI_ERR_NO_MEM;
    goto out;
  }
  for (int i = 0; i < w->nacc; i++) {
    const access *a = &w->acc[i];
    scnt[a->target] += 3;
    sl[3 * i] = a->disp;
    sl[3 * i + 1] = a->count;
    sl[3 * i + 2] = a->kind;
  }
  MPI_Request r;
  rc = ad__rma_finish(MPI_Ialltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, pc, &r), &r);
  if (rc != MPI_SUCCESS) goto out;
  sdsp = prefix(scnt, p);
  rdsp = prefix(rcnt, p);
  if (!sdsp || !rdsp) {
    rc = MPI_ERR_NO_MEM;
    goto out;
  }
  int total = rdsp[p];
  *tl = malloc(((size_t)total + 1) * sizeof **tl);
  *tl_origin = malloc(((size_t)total / 3 + 1) * sizeof **tl_origin);
  if (!*tl || !*tl_origin) {
    rc = MPI_ERR_NO_MEM;
    goto out;
  }
  rc = ad__rma_finish(MPI_Ialltoallv(sl, scnt, sdsp, MPI_INT, *tl, rcnt, rdsp, MPI_INT, pc, &r), &r);
  for (int q = 0; q < p; q++)
    for (int j = rdsp[q] / 3; j < rdsp[q + 1] / 3; j++) (*tl_origin)[j] = q;
  *nt = total / 3;
out:
  free(scnt);
  free(rcnt);
  free(sl);
  free(sdsp);
  free(rdsp);
  return rc;
}

/* Element modes within one epoch at the target. */
enum { M_NONE, M_READ, M_SUM, M_WRITE };

/* Accesses MPI leaves undefined, and local stores into elements accessed
 * remotely: MPI_SUCCESS, or an error code and why. Fills mode[] and who[]
 * (the first access of each element). */
static int check_epoch(const win *w, const ad_tape *t, const int *tl, const int *tl_origin, int nt, unsigned char *mode,
                       int *who, char *why, size_t size) {
  int me = w->c->rank;
  for (int j = 0; j < nt; j++) {
    int disp = tl[3 * j], count = tl[3 * j + 1], kind = tl[3 * j + 2];
    int m = kind == K_GET ? M_READ : kind == K_ACC_SUM ? M_SUM : M_WRITE;
    if (disp < 0 || count < 0 || disp + count > w->n) {
      snprintf(why, size, "rank %d accessed elements %d to %d of rank %d's window of %d", tl_origin[j], disp,
               disp + count - 1, me, w->n);
      return MPI_ERR_RMA_RANGE;
    }
    for (int e = disp; e < disp + count; e++) {
      if (mode[e] != M_NONE && (mode[e] != m || m == M_WRITE)) {
        int k = who[e];
        snprintf(why, size,
                 "%s by rank %d and %s by rank %d overlap at element %d of rank %d's window in one epoch, which MPI "
                 "leaves undefined (only gets, or only accumulates with MPI_SUM, may overlap)",
                 kind_name(tl[3 * k + 2]), tl_origin[k], kind_name(kind), tl_origin[j], e, me);
        return MPI_ERR_RMA_CONFLICT;
      }
      if (mode[e] == M_NONE) {
        who[e] = j;
        if (!ad__rma_same_real(w->base[e], w->snap[e])) {
          snprintf(why, size,
                   "rank %d stored into element %d of its window during an epoch in which rank %d accessed it with "
                   "%s, which MPI leaves undefined",
                   me, e, tl_origin[j], kind_name(kind));
          return MPI_ERR_RMA_CONFLICT;
        }
        const ad_real *s = &w->snap[e];
        if (t && s->i && (s->e != t->rec.epoch || s->i > t->rec.next)) {
          snprintf(why, size,
                   "element %d of rank %d's window, accessed in this epoch, holds a handle from another tape or "
                   "recording",
                   e, me);
          return MPI_ERR_OTHER;
        }
      }
      mode[e] = (unsigned char)m;
    }
  }
  return MPI_SUCCESS;
}

int ad_mpi_win_fence(int assert, MPI_Win mwin) {
  win *w = ad__rma_lookup(mwin);
  if (!w) return MPI_Win_fence(assert, mwin);
  const char *fn = "ad_mpi_win_fence";
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  ad__mpi_note_coll(seen, w->c);
  int me = w->c->rank, n = w->n;
  char why[640] = "";
  int code = MPI_SUCCESS;
  if (w->mode == MODE_PASSIVE) {
    code = MPI_ERR_RMA_SYNC;
    snprintf(why, sizeof why,
             "rank %d used the window in passive-target epochs; a window of ad_real is used either with fences or "
             "with passive-target epochs",
             me);
  } else if (w->nacc && w->tape != t) {
    code = MPI_ERR_RMA_SYNC;
    snprintf(why, sizeof why,
             "the epoch's one-sided operations were recorded %s than this fence; one epoch belongs to one recording",
             w->tape ? (t ? "on another tape" : "on a tape, but this fence outside a recording")
                     : "outside a recording, but this fence on a tape");
  }
  sort_accesses(w->acc, w->nacc);
  int *tl, *tl_origin, nt;
  int rc = exchange_lists(w, &tl, &tl_origin, &nt);
  if (rc != MPI_SUCCESS) {
    free(tl);
    free(tl_origin);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  unsigned char *mode = calloc((size_t)n + 1, 1);
  int *who = malloc(((size_t)n + 1) * sizeof *who);
  if (!mode || !who) {
    code = MPI_ERR_NO_MEM;
    snprintf(why, sizeof why, "no memory");
  } else if (code == MPI_SUCCESS) {
    code = check_epoch(w, t, tl, tl_origin, nt, mode, who, why, sizeof why);
  }
  /* Every rank learns the verdict (the highest failing rank's code) and
   * whether the epoch had any access at all. */
  int64_t v[2] = {code != MPI_SUCCESS ? (int64_t)code << 32 | (int64_t)me : -1, w->nacc > 0 || nt > 0};
  MPI_Request vr;
  rc = ad__rma_finish(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, w->c->priv, &vr), &vr);
  if (rc != MPI_SUCCESS) {
    code = rc;
    snprintf(why, sizeof why, "agreeing on the epoch with the other ranks failed");
    v[0] = (int64_t)code << 32 | (int64_t)me;
  }
  if (v[0] >= 0 && code == MPI_SUCCESS) {
    code = (int)(v[0] >> 32);
    snprintf(why, sizeof why, "rank %d found the epoch this fence closes erroneous (see its message)",
             (int)(v[0] & 0xffffffff));
  }
  /* Local stores since the epoch began become visible to the next one: the
   * shadow takes them before MPI's fence, so no access of the next epoch
   * can come first. Elements accessed in the closing epoch are left alone. */
  int stored = 0;
  for (int e = 0; mode && e < n; e++)
    if (mode[e] == M_NONE && memcmp(&w->base[e].v, &w->shadow[e], sizeof(double)) != 0) {
      w->shadow[e] = w->base[e].v;
      stored = 1;
    }
  if (stored) assert &= ~MPI_MODE_NOSTORE;
  rc = MPI_Win_fence(assert, w->mpi);
  if (rc != MPI_SUCCESS && code == MPI_SUCCESS) {
    code = rc;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    snprintf(why, sizeof why, "%s", s);
  }
  /* The epoch's results: new values of written elements, fetched values
   * (passive after an error: the tape has a sticky error then, and the
   * values are MPI's, whatever they mean). */
  ad_tape *rt = code == MPI_SUCCESS ? t : NULL;
  rma_rec *x = NULL;
  if (rt && v[1]) {
    x = rec_make(w, tl, tl_origin, nt);
    ad__mrec *r = x ? ad__mrec_push(rt, AD__M_RMA_FENCE, w->c, 0, 0) : NULL;
    if (r)
      r->rma = x;
    else {
      if (x) rma_free(x);
      x = NULL;
      if (!r) code = MPI_ERR_NO_MEM;
      snprintf(why, sizeof why, "no memory for the epoch's record");
      rt = NULL;
    }
  }
  for (int j = 0; mode && j < nt; j++) {
    int disp = tl[3 * j], count = tl[3 * j + 1], kind = tl[3 * j + 2];
    for (int c = 0; c < count; c++) {
      int e = disp + c;
      if (x) x->t_old[x->toff[j] + c] = w->snap[e].i;
      if (!contributes(kind)) continue;
      if (!(mode[e] & 0x80)) {
        w->base[e] = rt ? ad__new_input(rt, w->shadow[e]) : ad__const(w->shadow[e]);
        mode[e] |= 0x80;
      }
      if (x) x->t_new[x->toff[j] + c] = w->base[e].i;
    }
  }
  for (int i = 0; i < w->nacc; i++) {
    access *a = &w->acc[i];
    if (x && a->in) memcpy(x->o_in + x->ooff[i], a->in, (size_t)a->count * sizeof *a->in);
    if (returns(a->kind)) ad__rma_deliver(a, rt, x ? x->o_out + x->ooff[i] : NULL);
    ad__rma_access_free(a);
  }
  if (w->tok) {
    w->tok->state = x && rt == w->tape ? NOTE_RECORDED : NOTE_LOST;
    note_release(w->tok);
    w->tok = NULL;
  }
  w->nacc = 0;
  w->tape = NULL;
  w->open = !(assert &MPI_MODE_NOSUCCEED);
  if (w->mode == MODE_NONE) w->mode = MODE_FENCE;
  memcpy(w->snap, w->base, (size_t)n * sizeof *w->snap);
  free(tl);
  free(tl_origin);
  free(mode);
  free(who);
  if (code != MPI_SUCCESS) return ad__mpi_refuse(code, "%s: %s", fn, why);
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Sweep actions                                                             */
/* ------------------------------------------------------------------------ */

static uint64_t others_bytes(const int *cnt, int p, int me) {
  uint64_t s = 0;
  for (int q = 0; q < p; q++)
    if (q != me) s += (uint64_t)cnt[q];
  return s * sizeof(double);
}

static int rma_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  rma_rec *x = r->rma;
  int p = x->p, me = r->c->rank;
  const int *scnt = reverse ? x->bcnt : x->fcnt, *sdsp = reverse ? x->bdsp : x->fdsp;
  const int *rcnt = reverse ? x->fcnt : x->bcnt, *rdsp = reverse ? x->fdsp : x->bdsp;
  int sn = reverse ? x->bn : x->fn, rn = reverse ? x->fn : x->bn;
  double *sb = calloc((size_t)sn + 1, sizeof *sb), *rb = calloc((size_t)rn + 1, sizeof *rb);
  if (!sb || !rb) {
    free(sb);
    free(rb);
    return AD_ERR_NOMEM;
  }
  if (reverse)
    ad__mpi_counters.adjoint_bytes += others_bytes(scnt, p, me);
  else
    ad__mpi_counters.tangent_bytes += others_bytes(scnt, p, me);
  int pos = 0;
  for (int q = 0; q < p; q++) {
    if (reverse) {
      /* To each peer: the adjoints of what its puts and accumulates wrote
       * here (kept for now), then those of what this rank fetched from it
       * (taken). */
      for (int j = x->tstart[q]; j < x->tstart[q + 1]; j++) {
        int count = x->tg[3 * j + 1];
        if (!contributes(x->tg[3 * j + 2])) continue;
        const ad_index *h = x->t_new + x->toff[j];
        for (int c = 0; c < count; c++) sb[pos + c] = h[c] ? t->adj[h[c]] : 0.0;
        pos += count;
      }
      for (int i = x->ostart[q]; i < x->ostart[q + 1]; i++) {
        if (!returns(x->o[3 * i + 2])) continue;
        ad__adj_take(t, x->o_out + x->ooff[i], x->o[3 * i + 1], sb + pos);
        pos += x->o[3 * i + 1];
      }
    } else {
      /* To each peer: the tangents of what this rank contributed to it,
       * then those of what it fetched from here. */
      for (int i = x->ostart[q]; i < x->ostart[q + 1]; i++) {
        if (!contributes(x->o[3 * i + 2])) continue;
        ad__tan_get(t, x->o_in + x->ooff[i], x->o[3 * i + 1], sb + pos);
        pos += x->o[3 * i + 1];
      }
      for (int j = x->tstart[q]; j < x->tstart[q + 1]; j++) {
        if (!returns(x->tg[3 * j + 2])) continue;
        ad__tan_get(t, x->t_old + x->toff[j], x->tg[3 * j + 1], sb + pos);
        pos += x->tg[3 * j + 1];
      }
    }
  }
  /* Written elements: reverse, an accumulate's adjoint also flows to the old
   * value (once per element: it is zeroed after the first); tangent, a
   * written element starts from the old value's tangent (accumulate) or
   * from zero (put, replace), and the contributions are added below. */
  for (int j = 0; j < x->nt; j++) {
    int kind = x->tg[3 * j + 2];
    if (!contributes(kind)) continue;
    const ad_index *h = x->t_new + x->toff[j], *o = x->t_old + x->toff[j];
    for (int c = 0; c < x->tg[3 * j + 1]; c++) {
      if (!h[c]) continue;
      if (reverse) {
        if (sums(kind) && o[c]) t->adj[o[c]] += t->adj[h[c]];
        t->adj[h[c]] = 0.0;
      } else {
        t->tan[h[c]] = sums(kind) && o[c] ? t->tan[o[c]] : 0.0;
      }
    }
  }
  MPI_Request q = MPI_REQUEST_NULL;
  const char *what = reverse ? "the adjoint of a one-sided epoch" : "the tangent of a one-sided epoch";
  int e = MPI_Ialltoallv(sb, scnt, sdsp, MPI_DOUBLE, rb, rcnt, rdsp, MPI_DOUBLE, r->c->priv, &q);
  int rc = e != MPI_SUCCESS ? ad__mpi_fail(t, e, what) : ad__mpi_wait(t, &q, MPI_STATUS_IGNORE, what);
  if (!ad__mpi_abandon(&q, 0)) {
    /* still pending: MPI may use the buffers when the others arrive */
    ad__mpi_keep(sb);
    ad__mpi_keep(rb);
    return rc;
  }
  pos = 0;
  for (int qq = 0; rc == AD_OK && qq < p; qq++) {
    if (reverse) {
      for (int i = x->ostart[qq]; i < x->ostart[qq + 1]; i++) {
        if (!contributes(x->o[3 * i + 2])) continue;
        ad__adj_add(t, x->o_in + x->ooff[i], x->o[3 * i + 1], rb + pos, NULL);
        pos += x->o[3 * i + 1];
      }
      for (int j = x->tstart[qq]; j < x->tstart[qq + 1]; j++) {
        if (!returns(x->tg[3 * j + 2])) continue;
        ad__adj_add(t, x->t_old + x->toff[j], x->tg[3 * j + 1], rb + pos, NULL);
        pos += x->tg[3 * j + 1];
      }
    } else {
      for (int j = x->tstart[qq]; j < x->tstart[qq + 1]; j++) {
        int count = x->tg[3 * j + 1];
        if (!contributes(x->tg[3 * j + 2])) continue;
        const ad_index *h = x->t_new + x->toff[j];
        for (int c = 0; c < count; c++)
          if (h[c]) t->tan[h[c]] += rb[pos + c];
        pos += count;
      }
      for (int i = x->ostart[qq]; i < x->ostart[qq + 1]; i++) {
        if (!returns(x->o[3 * i + 2])) continue;
        ad__tan_set(t, x->o_out + x->ooff[i], x->o[3 * i + 1], rb + pos);
        pos += x->o[3 * i + 1];
      }
    }
  }
  free(sb);
  free(rb);
  return rc;
}
static int rma_reverse(ad_tape *t, ad__mrec *r) {
  if (r->kind == AD__M_RMA_FENCE) return rma_sweep(t, r, 1);
  if (r->kind == AD__M_RMA_OPEN) return AD_OK; /* the sweep's start checked its note */
  return ad__rma_passive_sweep(t, r, 1);
}
static int rma_tangent(ad_tape *t, ad__mrec *r) {
  if (r->kind == AD__M_RMA_FENCE) return rma_sweep(t, r, 0);
  if (r->kind == AD__M_RMA_OPEN) return AD_OK;
  return ad__rma_passive_sweep(t, r, 0);
}

static void rma_free_record(ad__mrec *r) { rma_free(r->rma); }

/* The one-sided record kinds each keep their epoch's description in r->rma. */
const ad__mactions ad__rma_actions = {rma_reverse, rma_tangent, NULL, rma_free_record};
