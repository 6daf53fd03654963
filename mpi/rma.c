/* SPDX-License-Identifier: BSD-3-Clause */
/* One-sided communication on windows of ad_real memory, synchronised by
 * fences or in passive-target epochs (the section "Passive target" below),
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

#include "mpi_impl.h"

/* Access kinds. A contributing access carries origin values to the target
 * (and writes there), a returning one brings target values back. */
enum { K_PUT = 1, K_GET, K_ACC_SUM, K_ACC_REPLACE, K_GACC_SUM, K_GACC_REPLACE };

static int contributes(int k) { return k != K_GET; }
static int returns(int k) { return k == K_GET || k == K_GACC_SUM || k == K_GACC_REPLACE; }
static int sums(int k) { return k == K_ACC_SUM || k == K_GACC_SUM; }

static const char *kind_name(int k) {
  switch (k) {
  case K_PUT:
    return "a put";
  case K_GET:
    return "a get";
  case K_ACC_SUM:
    return "an accumulate (MPI_SUM)";
  case K_ACC_REPLACE:
    return "an accumulate (MPI_REPLACE)";
  case K_GACC_SUM:
    return "a get_accumulate (MPI_SUM)";
  default:
    return "a get_accumulate (MPI_REPLACE)";
  }
}

/* An access this rank made as origin in the open epoch. */
typedef struct access {
  int target, disp, count, kind;
  ad_index *in;  /* handles of the origin values (contributing kinds; NULL off tape) */
  double *val;   /* the origin values, which MPI may read until the fence */
  double *res;   /* fetched values, which MPI may write until the fence */
  ad_real *rbuf; /* the user's result buffer, filled at the fence */
  ad_real **dst; /* a derived result type: where each element of rbuf (then
                  * this access's own buffer) goes; NULL otherwise */
} access;

typedef struct win {
  MPI_Win mpi; /* over `shadow` */
  ad__comm *c;
  ad_real *base; /* the user's memory, n elements */
  int n, owned;  /* owned: allocated by ad_mpi_win_allocate */
  double *shadow;
  /* base as the epoch began: a target element accessed in the epoch must
   * still be this at its end (no local store meanwhile), and its handle is
   * the old value's. */
  ad_real *snap;
  int *sizes; /* every rank's n, so that an origin checks its ranges */
  access *acc;
  int nacc, cap;
  ad_tape *tape;     /* the tape the open epoch's accesses were recorded on */
  struct token *tok; /* that tape's note of the open epoch */
  int open;          /* an access epoch is open (a fence without MPI_MODE_NOSUCCEED) */
  /* Passive-target epochs (see "Passive target" below). */
  int mode;        /* MODE_*: how this rank synchronised the window so far */
  uint64_t *mk;    /* marks, in the window after the shadow: per element of this rank's part, 1 + the
                 * ticket of the last completed access that wrote it; then the ticket counter */
  uint64_t *seen;  /* per element, the mark that the last synchronisation took in */
  int *lk;         /* per rank, the lock this rank holds there (0: none) */
  int lk_all;      /* this rank holds MPI_Win_lock_all */
  int64_t pubs;    /* tickets drawn at this rank's part by barriers that published before any passive-target call */
  struct pwin *pw; /* the recording the window was created in (NULL: none) */
  struct win *next;
} win;

enum { MODE_NONE, MODE_FENCE, MODE_PASSIVE };

/* Where the marks begin in a window of n elements (in doubles). */
static int mark_at(int n) { return n + (n & 1); }

typedef struct pwin {
  int refs;
  int n;
  ad_index *h0;    /* the elements' handles when the window was created */
  ad_tape *tape;   /* the recording that created it (NULL once that record is gone) */
  int used;        /* this rank recorded a batch or a synchronisation (not a tentative one) */
  int ended;       /* the free is recorded ... */
  int all_used;    /* ... and some rank used passive-target epochs */
  int holes;       /* a batch or synchronisation record was discarded */
  int64_t tickets; /* the tickets drawn at this rank's part by the end */
  MPI_Win sw;      /* a sweep's window: n adjoints or tangents, then the turn */
  double *sb;
  struct pwin *prev, *next;
} pwin;
static pwin *pwins;

/* The head of every passive-target record's data. */
typedef struct phead {
  int what;
  pwin *pw;
} phead;

typedef struct pbatch {
  phead h;
  int target, tn, na; /* tn: the target's number of elements (its turn's place) */
  int64_t ticket;
  int *a;   /* per access: disp, count, kind, in the origin's order */
  int *off; /* na + 1 prefix sums of the counts */
  ad_index *in, *out;
} pbatch;

typedef struct psync {
  phead h;
  int64_t ticket;
  int ni, np;
  int *ie, *pe;      /* incorporated and published elements */
  ad_index *ih, *ph; /* their new handles, the published handles */
} psyncrec;

static win *wins;
static int win_keyval = MPI_KEYVAL_INVALID;

/* Joined when the first window is made: every sweep checks the epochs
 * recorded on its tape, and ad_mpi_barrier synchronises the windows. */
static int rma_sweep_check(ad_tape *t);
static int rma_barrier(int after);
static ad__mpi_chapter chapter = {rma_sweep_check, rma_barrier, NULL, NULL, 0};
static const ad__mkind *rma_kind(int kind);

/* The record of a fence: the epoch it closed, from both sides. Origin
 * accesses are sorted by target, target accesses by origin (in the order
 * each origin made them), so both ends of a pair list the same accesses in
 * the same order. */
/* What a record's `rma` points to: the epoch closed by a fence, or a
 * note that a tape has accesses in an epoch. */
enum { RMA_EPOCH = 1, RMA_NOTE, RMA_PBEGIN, RMA_PEND, RMA_BATCH, RMA_SYNC };

/* The note: accesses were recorded on `tape` in an epoch (the first of them
 * pushed an AD__M_RMA_OPEN record holding it). The fence that closes the
 * epoch says whether the epoch went on that tape. A sweep of the tape fails
 * while a note of it is not RECORDED: its gradient would miss the epoch. The
 * note is listed while its record lives (so `tape` is alive), and freed when
 * neither the record nor the window holds it. */
enum { NOTE_OPEN, NOTE_RECORDED, NOTE_LOST };
typedef struct token {
  int what; /* RMA_NOTE */
  int state, refs;
  ad_tape *tape;
  struct token *prev, *next;
} token;
static token *notes;

static void note_release(token *k) {
  if (--k->refs == 0) free(k);
}

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

static void passive_free(void *data);

static void rma_free(void *data) {
  if (!data) return;
  if (*(int *)data >= RMA_PBEGIN) {
    passive_free(data);
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
  free(x->o);
  free(x->tg);
  free(x->ooff);
  free(x->toff);
  free(x->ostart);
  free(x->tstart);
  free(x->o_in);
  free(x->o_out);
  free(x->t_old);
  free(x->t_new);
  free(x->fcnt);
  free(x->fdsp);
  free(x->bcnt);
  free(x->bdsp);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* An MPI error code, with a sticky error naming the call on the tape that
 * was seen recording (or the thread's last error if none). */
static int refuse(ad_tape *seen, int mpirc, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (seen)
    ad__fail(seen, AD_ERR_MPI, "%s", msg);
  else
    ad__fail_notape(AD_ERR_MPI, "%s", msg);
  return mpirc;
}

/* Complete a nonblocking collective of a forward call, as its blocking
 * twin would, but yielding the processor once spinning is clearly not
 * enough: ranks oversubscribed on few cores need the time themselves, and
 * a fence makes several such collectives. */
static int finish(int e, MPI_Request *r) {
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

static win *lookup(MPI_Win w) {
  if (w == MPI_WIN_NULL || win_keyval == MPI_KEYVAL_INVALID) return NULL;
  void *attr = NULL;
  int flag = 0;
  if (MPI_Win_get_attr(w, win_keyval, &attr, &flag) != MPI_SUCCESS || !flag) return NULL;
  return attr;
}

static int passive_sweep_check(ad_tape *t);

static int rma_sweep_check(ad_tape *t) {
  if (passive_sweep_check(t)) return 1;
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
  if (finish(MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->priv, &r), &r) != MPI_SUCCESS) return 0;
  return all;
}

static struct pwin *pw_make(ad_tape *t, win *w);
static int psync(win *w, ad_tape *t, ad_tape *seen, const char *fn);
static int passive_check(win *w, ad_tape *t, ad_tape *seen, const char *fn);
static void pw_release(struct pwin *pw);
static int64_t my_tickets(win *w);
static int pw_end(win *w, ad_tape *t, int64_t tickets);

static int win_make(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, int allocate, void *baseptr,
                    MPI_Win *out, const char *fn) {
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if (!out) return refuse(seen, MPI_ERR_ARG, "%s: the window argument is NULL", fn);
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return refuse(seen, err, "%s: the communicator is not valid", fn);
  if (ad__mpi_comm_settled(c) != MPI_SUCCESS || c->freed)
    return refuse(seen, MPI_ERR_COMM, "%s: the communicator's private duplicate is not available", fn);
  if ((err = ad__mpi_comm_renew(seen, c)) != MPI_SUCCESS)
    return refuse(seen, err, "%s: renewing the communicator's private duplicate failed", fn);
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
      return refuse(seen, mine,
                    "%s: a window on ad_real memory has the displacement unit sizeof(ad_real) = %d, not %d (a window "
                    "on the wrong type?)",
                    fn, (int)sizeof(ad_real), disp_unit);
    if (mine == MPI_ERR_SIZE)
      return refuse(seen, mine,
                    "%s: size %ld is not a whole number of ad_real elements of %d bytes (a window on the wrong type?)",
                    fn, (long)size, (int)sizeof(ad_real));
    if (mine == MPI_ERR_BUFFER) return refuse(seen, mine, "%s: base is NULL with a nonzero size", fn);
    if (!ok) return refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
    return refuse(seen, MPI_ERR_OTHER, "%s: another rank refused the window (see its message)", fn);
  }
  w->c = c;
  w->base = ubase;
  w->n = n;
  w->owned = allocate;
  w->snap = snap;
  w->sizes = sizes;
  w->mpi = MPI_WIN_NULL;
  MPI_Request req;
  int rc = finish(MPI_Iallgather(&n, 1, MPI_INT, sizes, 1, MPI_INT, c->priv, &req), &req);
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
  rc = finish(MPI_Ibarrier(c->priv, &req), &req);
  if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, fn);
  if (t && !pw_make(t, w)) ad__fail(t, AD_ERR_NOMEM, "%s: no memory for the window's record", fn);
  ad__mpi_chapter_join(&chapter);
  w->next = wins;
  wins = w;
  if (allocate) *(ad_real **)baseptr = ubase;
  *out = w->mpi;
  return MPI_SUCCESS;
}

int ad_mpi_win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  return win_make(base, size, disp_unit, info, comm, 0, NULL, win, "ad_mpi_win_create");
}

int ad_mpi_win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
  if (!baseptr) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return refuse(seen, MPI_ERR_ARG, "ad_mpi_win_allocate: baseptr is NULL");
  }
  return win_make(NULL, size, disp_unit, info, comm, 1, baseptr, win, "ad_mpi_win_allocate");
}

static void access_free(access *a) {
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
static void deliver(access *a, ad_tape *t, ad_index *out) {
  ad__unpack(t, a->rbuf, a->count, a->res, out);
  if (a->dst)
    for (int k = 0; k < a->count; k++) *a->dst[k] = a->rbuf[k];
}

int ad_mpi_win_free(MPI_Win *mwin) {
  win *w = mwin ? lookup(*mwin) : NULL;
  if (!w) return mwin ? MPI_Win_free(mwin) : MPI_ERR_WIN;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  int locks = w->lk_all;
  for (int q = 0; q < w->c->size; q++) locks |= w->lk[q] != 0;
  /* Every rank learns whether all are done, and whether any used
   * passive-target epochs. */
  int v[2] = {w->nacc != 0 || locks, w->mode == MODE_PASSIVE};
  MPI_Request vr;
  if (finish(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, w->c->priv, &vr), &vr) != MPI_SUCCESS) v[0] = 1;
  if (v[0]) {
    if (w->nacc)
      return refuse(seen, MPI_ERR_RMA_SYNC,
                    "ad_mpi_win_free: %d one-sided operation(s) on the window are not completed: close the epoch "
                    "with ad_mpi_win_fence or complete it with ad_mpi_win_unlock first",
                    w->nacc);
    if (locks) return refuse(seen, MPI_ERR_RMA_SYNC, "ad_mpi_win_free: this rank still holds a lock on the window");
    return refuse(seen, MPI_ERR_RMA_SYNC,
                  "ad_mpi_win_free: another rank has one-sided operations or locks on the window not completed");
  }
  int rc = MPI_SUCCESS;
  if (v[1]) {
    /* The last synchronisation: what other ranks wrote is in the memory
     * after the free, as in MPI. */
    rc = w->mode == MODE_FENCE ? MPI_SUCCESS : passive_check(w, t, seen, "ad_mpi_win_free");
    int ok = w->mode != MODE_FENCE && rc == MPI_SUCCESS;
    if (ok) rc = psync(w, t, seen, "ad_mpi_win_free");
    if (ok && t && w->pw && w->pw->tape == t && !pw_end(w, t, my_tickets(w)))
      rc = refuse(seen, MPI_ERR_NO_MEM, "ad_mpi_win_free: no memory for the record");
  }
  int frc = MPI_Win_free(&w->mpi);
  if (frc != MPI_SUCCESS) return ad__mpi_forward_error(seen, frc, "ad_mpi_win_free");
  for (win **p = &wins; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  if (w->tok) {
    w->tok->state = NOTE_LOST;
    note_release(w->tok);
  }
  if (w->owned) free(w->base);
  if (w->pw) pw_release(w->pw);
  free(w->snap);
  free(w->sizes);
  free(w->acc);
  free(w->seen);
  free(w->lk);
  free(w);
  *mwin = MPI_WIN_NULL;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Accesses                                                                  */
/* ------------------------------------------------------------------------ */

static int in_some_window(const ad_real *p, int n) {
  for (win *w = wins; w; w = w->next)
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
  if (count < 0) return refuse(seen, MPI_ERR_COUNT, "%s: negative count", fn);
  if (target == MPI_PROC_NULL) return MPI_SUCCESS;
  if (target < 0 || target >= w->c->size)
    return refuse(seen, MPI_ERR_RANK, "%s: target rank %d is not in the window's group", fn, target);
  if (w->mode == MODE_PASSIVE) {
    if (!w->lk_all && !w->lk[target])
      return refuse(seen, MPI_ERR_RMA_SYNC,
                    "%s: this rank holds no lock on rank %d's part of the window (ad_mpi_win_lock or "
                    "ad_mpi_win_lock_all first)",
                    fn, target);
    int pc = passive_check(w, t, seen, fn);
    if (pc != MPI_SUCCESS) return pc;
    if ((kind == K_ACC_REPLACE || kind == K_GACC_SUM || kind == K_GACC_REPLACE) && w->lk[target] != MPI_LOCK_EXCLUSIVE)
      return refuse(seen, MPI_ERR_RMA_SYNC,
                    "%s: %s under a shared lock may be applied in another order than the ranks complete their "
                    "epochs, which the sweeps must know; take an exclusive lock (ad_mpi_win_lock with "
                    "MPI_LOCK_EXCLUSIVE)",
                    fn, kind_name(kind));
  } else if (!w->open)
    return refuse(seen, MPI_ERR_RMA_SYNC,
                  "%s: no access epoch is open on the window (call ad_mpi_win_fence first; a fence with "
                  "MPI_MODE_NOSUCCEED opens none; or lock it for a passive-target epoch)",
                  fn);
  if (disp < 0 || disp + count > w->sizes[target])
    return refuse(seen, MPI_ERR_RMA_RANGE, "%s: elements %ld to %ld are outside rank %d's window of %d elements", fn,
                  (long)disp, (long)disp + count - 1, target, w->sizes[target]);
  if (w->nacc && w->tape != t)
    return refuse(seen, MPI_ERR_RMA_SYNC,
                  "%s: the open epoch's earlier one-sided operations were recorded %s; one epoch belongs to one "
                  "recording",
                  fn, w->tape ? "on another tape" : "outside a recording");
  int inwin = 0;
  if (returns(kind) && dst)
    for (int k = 0; k < count && !inwin; k++) inwin = in_some_window(dst[k], 1);
  else if (returns(kind))
    inwin = in_some_window(result, count);
  if (inwin)
    return refuse(seen, MPI_ERR_BUFFER,
                  "%s: the result buffer lies in a window's memory; fetch into other memory and copy after the fence",
                  fn);
  if (w->nacc == w->cap) {
    int ncap = w->cap ? 2 * w->cap : 8;
    access *na = realloc(w->acc, (size_t)ncap * sizeof *na);
    if (!na) return refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
    w->acc = na;
    w->cap = ncap;
  }
  if (t && !w->tok) {
    token *k = calloc(1, sizeof *k);
    ad__mrec *r = k ? ad__mrec_push(t, rma_kind(AD__M_RMA_OPEN), w->c, 0, 0) : NULL;
    if (!r) {
      free(k);
      return refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
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
    access_free(&a);
    return refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
  }
  if (contributes(kind)) {
    ad__pack(origin, count, a.val);
    if (t && ad__handles(t, origin, count, a.in, fn) != AD_OK) {
      access_free(&a);
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
    access_free(&a);
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
  win *w = lookup(mwin);
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (!w && nreal)
    *rc = refuse(seen, MPI_ERR_WIN,
                 "%s: AD_MPI_REAL data on a window that ad_mpi_win_create or ad_mpi_win_allocate did not create", fn);
  else if (w && nreal != n_types)
    *rc = refuse(seen, MPI_ERR_TYPE,
                 "%s: a window on ad_real memory is accessed with AD_MPI_REAL data only (a window on the wrong type?)",
                 fn);
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
  ad_tape *seen;
  ad__mpi_tape(&seen);
  int c = contributes(kind), r = returns(kind);
  if ((!c || otype == AD_MPI_REAL) && (!r || rtype == AD_MPI_REAL) && ttype == AD_MPI_REAL) {
    if ((c && ocount != tcount) || (r && rcount != tcount))
      return refuse(seen, MPI_ERR_COUNT, "%s: origin count %d, result count %d and target count %d differ", fn,
                    c ? ocount : tcount, r ? rcount : tcount, tcount);
    return rma_access(origin, result, NULL, tcount, target, tdisp, kind, op, w, fn);
  }
  if (ocount < 0 || rcount < 0 || tcount < 0) return refuse(seen, MPI_ERR_COUNT, "%s: negative count", fn);
  MPI_Aint *to = NULL, *oo = NULL, *ro = NULL;
  long nt = ad__dtype_offsets(fn, ttype, tcount, &to), no = 0, nr = 0;
  int rc = nt < 0 ? MPI_ERR_TYPE : MPI_SUCCESS;
  if (rc == MPI_SUCCESS && c && (no = ad__dtype_offsets(fn, otype, ocount, &oo)) < 0) rc = MPI_ERR_TYPE;
  if (rc == MPI_SUCCESS && r && (nr = ad__dtype_offsets(fn, rtype, rcount, &ro)) < 0) rc = MPI_ERR_TYPE;
  if (rc == MPI_SUCCESS && ((c && no != nt) || (r && nr != nt)))
    rc = refuse(seen, MPI_ERR_COUNT, "%s: the origin has %ld, the result %ld and the target %ld ad_real elements", fn,
                c ? no : nt, r ? nr : nt, nt);
  for (long k = 0; rc == MPI_SUCCESS && k < nt; k++)
    if (to[k] % (MPI_Aint)sizeof(ad_real) != 0)
      rc = refuse(seen, MPI_ERR_TYPE, "%s: the target datatype places an element between two ad_real elements", fn);
  ad_real *ob = c ? malloc(((size_t)nt + 1) * sizeof *ob) : NULL;
  ad_real **rd = r ? malloc(((size_t)nt + 1) * sizeof *rd) : NULL;
  if (rc == MPI_SUCCESS && ((c && !ob) || (r && !rd))) rc = refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
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

int ad_mpi_put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
               MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  const char *fn = "ad_mpi_put";
  MPI_Datatype ty[2] = {origin_datatype, target_datatype};
  int rc;
  struct win *w = access_window(win, 2, ty, &rc, fn);
  if (!w && rc == MPI_SUCCESS) rc = ad__mpi_guard(fn, "origin buffer", origin_addr, origin_count, origin_datatype);
  if (!w)
    return rc != MPI_SUCCESS ? rc
                             : MPI_Put(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                                       target_count, target_datatype, win);
  if (rc != MPI_SUCCESS) return rc;
  return typed_access(origin_addr, origin_count, origin_datatype, NULL, 0, MPI_DATATYPE_NULL, target_rank, target_disp,
                      target_count, target_datatype, K_PUT, MPI_REPLACE, w, fn);
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

int ad_mpi_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                      MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const char *fn = "ad_mpi_accumulate";
  MPI_Datatype ty[2] = {origin_datatype, target_datatype};
  int rc;
  struct win *w = access_window(win, 2, ty, &rc, fn);
  if (!w && rc == MPI_SUCCESS) rc = ad__mpi_guard(fn, "origin buffer", origin_addr, origin_count, origin_datatype);
  if (!w)
    return rc != MPI_SUCCESS ? rc
                             : MPI_Accumulate(origin_addr, origin_count, origin_datatype, target_rank, target_disp,
                                              target_count, target_datatype, op, win);
  if (rc != MPI_SUCCESS) return rc;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (op != MPI_SUM && op != MPI_REPLACE)
    return refuse(seen, MPI_ERR_OP, "%s: only MPI_SUM and MPI_REPLACE are differentiable here", fn);
  return typed_access(origin_addr, origin_count, origin_datatype, NULL, 0, MPI_DATATYPE_NULL, target_rank, target_disp,
                      target_count, target_datatype, op == MPI_SUM ? K_ACC_SUM : K_ACC_REPLACE, op, w, fn);
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
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (op != MPI_SUM && op != MPI_REPLACE && !noop)
    return refuse(seen, MPI_ERR_OP, "%s: only MPI_SUM, MPI_REPLACE and MPI_NO_OP are differentiable here", fn);
  int kind = noop ? K_GET : op == MPI_SUM ? K_GACC_SUM : K_GACC_REPLACE;
  return typed_access(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                      target_rank, target_disp, target_count, target_datatype, kind, op, w, fn);
}

/* ------------------------------------------------------------------------ */
/* Fences                                                                    */
/* ------------------------------------------------------------------------ */

static int same_real(ad_real a, ad_real b) { return memcmp(&a.v, &b.v, sizeof a.v) == 0 && a.i == b.i && a.e == b.e; }

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
  rc = finish(MPI_Ialltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, pc, &r), &r);
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
  rc = finish(MPI_Ialltoallv(sl, scnt, sdsp, MPI_INT, *tl, rcnt, rdsp, MPI_INT, pc, &r), &r);
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
        if (!same_real(w->base[e], w->snap[e])) {
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
  win *w = lookup(mwin);
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
  rc = finish(MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, w->c->priv, &vr), &vr);
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
    ad__mrec *r = x ? ad__mrec_push(rt, rma_kind(AD__M_RMA_FENCE), w->c, 0, 0) : NULL;
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
    if (returns(a->kind)) deliver(a, rt, x ? x->o_out + x->ooff[i] : NULL);
    access_free(a);
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
  if (code != MPI_SUCCESS) return refuse(seen, code, "%s: %s", fn, why);
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
  free(x->a);
  free(x->off);
  free(x->in);
  free(x->out);
  free(x);
}

static void sync_free(psyncrec *x) {
  if (!x) return;
  free(x->ie);
  free(x->pe);
  free(x->ih);
  free(x->ph);
  free(x);
}

/* Off the list of windows whose recording lives (their begin record is
 * gone, with its tape's recording). */
static void pw_unlist(pwin *pw) {
  if (!pw->tape) return;
  if (pw->prev)
    pw->prev->next = pw->next;
  else
    pwins = pw->next;
  if (pw->next) pw->next->prev = pw->prev;
  pw->prev = pw->next = NULL;
  pw->tape = NULL;
}

static void pw_release(pwin *pw) {
  if (--pw->refs > 0) return;
  pw_unlist(pw);
  free(pw->h0);
  free(pw);
}

static void passive_free(void *data) {
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
  pw_release(pw);
}

static int pw_push(ad_tape *t, int kind, win *w, phead *h) {
  ad__mrec *r = ad__mrec_push(t, rma_kind(kind), w->c, 0, 0);
  if (!r) return 0;
  r->rma = h;
  w->pw->refs++;
  return 1;
}

/* A window created while recording: its begin record, with the elements'
 * handles (0 if it fails: a sticky error on t). */
static pwin *pw_make(ad_tape *t, win *w) {
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
  pw->next = pwins;
  if (pwins) pwins->prev = pw;
  pwins = pw;
  return pw;
}

/* The tickets drawn at this rank's part of the window. */
static int64_t my_tickets(win *w) {
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
static int pw_end(win *w, ad_tape *t, int64_t tickets) {
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
static int passive_check(win *w, ad_tape *t, ad_tape *seen, const char *fn) {
  const char *why = passive_bar(w, t, seen);
  return why ? refuse(seen, MPI_ERR_RMA_SYNC, why, fn) : MPI_SUCCESS;
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
    if (!same_real(w->base[e], w->snap[e])) return 1;
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
    return refuse(seen, MPI_ERR_NO_MEM, "%s: no memory", fn);
  }
  if (!own) rc = MPI_Win_lock(MPI_LOCK_SHARED, me, 0, w->mpi);
  if (rc == MPI_SUCCESS) rc = read_marks(w, m);
  if (rc == MPI_SUCCESS) rc = MPI_Win_sync(w->mpi);
  int todo = 0;
  for (int e = 0; rc == MPI_SUCCESS && e < n && !todo; e++)
    todo = ((flags & SYNC_TAKE) && m[e] != w->seen[e]) || !same_real(w->base[e], w->snap[e]);
  uint64_t s = 0, one = 1;
  if (todo && rc == MPI_SUCCESS) {
    rc = MPI_Fetch_and_op(&one, &s, MPI_UINT64_T, me, mark_at(n) + n, MPI_SUM, w->mpi);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(me, w->mpi);
    if (rc == MPI_SUCCESS) rc = read_marks(w, m);
    if (rc == MPI_SUCCESS) rc = MPI_Win_sync(w->mpi);
  }
  int ni = 0, np = 0;
  for (int e = 0; todo && rc == MPI_SUCCESS && e < n; e++) {
    int stored = !same_real(w->base[e], w->snap[e]);
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
  if (code != MPI_SUCCESS) return refuse(seen, code, "%s: %s", fn, why);
  return MPI_SUCCESS;
}

static int psync(win *w, ad_tape *t, ad_tape *seen, const char *fn) {
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
    if (returns(a->kind)) deliver(a, rt, x ? x->out + x->off[j] : NULL);
    access_free(a);
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
  if (code != MPI_SUCCESS) return refuse(seen, code, "%s: %s", fn, why);
  return MPI_SUCCESS;
}

/* The window of a passive-target call on a window of ad_real, or NULL for
 * MPI's own windows (*rc = MPI_SUCCESS) or a refusal. */
static win *passive_window(MPI_Win mwin, ad_tape **t, ad_tape **seen, int *rc, const char *fn) {
  win *w = lookup(mwin);
  *rc = MPI_SUCCESS;
  if (!w) return NULL;
  *t = ad__mpi_tape(seen);
  ad__mpi_note_coll(*seen, w->c);
  *rc = passive_check(w, *t, *seen, fn);
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
    return refuse(seen, MPI_ERR_RANK, "%s: rank %d is not in the window's group", fn, rank);
  if (lock_type != MPI_LOCK_SHARED && lock_type != MPI_LOCK_EXCLUSIVE)
    return refuse(seen, MPI_ERR_LOCKTYPE, "%s: the lock type is neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE", fn);
  if (w->lk[rank] || w->lk_all)
    return refuse(seen, MPI_ERR_RMA_SYNC, "%s: this rank already holds a lock on rank %d's part of the window", fn,
                  rank);
  rc = MPI_Win_lock(lock_type, rank, assert, w->mpi);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  w->mode = MODE_PASSIVE;
  w->lk[rank] = lock_type;
  return rank == w->c->rank ? psync(w, t, seen, fn) : MPI_SUCCESS;
}

int ad_mpi_win_unlock(int rank, MPI_Win mwin) {
  const char *fn = "ad_mpi_win_unlock";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_unlock(rank, mwin);
  if (rank < 0 || rank >= w->c->size || !w->lk[rank])
    return refuse(seen, MPI_ERR_RMA_SYNC, "%s: this rank holds no lock (ad_mpi_win_lock) on rank %d", fn, rank);
  rc = batch_complete(w, rank, t, seen, fn);
  if (rank == w->c->rank) rc = first_error(rc, psync(w, t, seen, fn));
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
  if (any) return refuse(seen, MPI_ERR_RMA_SYNC, "%s: this rank already holds a lock on the window", fn);
  rc = MPI_Win_lock_all(assert, w->mpi);
  if (rc != MPI_SUCCESS) return ad__mpi_forward_error(seen, rc, fn);
  w->mode = MODE_PASSIVE;
  w->lk_all = 1;
  return psync(w, t, seen, fn);
}

int ad_mpi_win_unlock_all(MPI_Win mwin) {
  const char *fn = "ad_mpi_win_unlock_all";
  ad_tape *t = NULL, *seen = NULL;
  int rc;
  win *w = passive_window(mwin, &t, &seen, &rc, fn);
  if (!w) return rc != MPI_SUCCESS ? rc : MPI_Win_unlock_all(mwin);
  if (!w->lk_all) return refuse(seen, MPI_ERR_RMA_SYNC, "%s: this rank holds no ad_mpi_win_lock_all", fn);
  for (int q = 0; q < w->c->size; q++) rc = first_error(rc, batch_complete(w, q, t, seen, fn));
  rc = first_error(rc, psync(w, t, seen, fn));
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
    return refuse(seen, MPI_ERR_RMA_SYNC, "%s: this rank holds no lock on rank %d", fn, rank);
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
    rc = first_error(rc, refuse(seen, MPI_ERR_RMA_SYNC, "%s: operations pending without a lock", fn));
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
  return psync(w, t, seen, fn);
}

/* At a sweep's start: the tape holds the window's whole passive-target life. */
static int passive_sweep_check(ad_tape *t) {
  for (pwin *pw = pwins; pw; pw = pw->next) {
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

static int rma_barrier(int after) {
  int rc = MPI_SUCCESS;
  for (win *w = wins; w; w = w->next) {
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
    if (w->mode == MODE_NONE && my_tickets(w) <= w->pubs) continue;
    if (passive_check(w, t, seen, "ad_mpi_barrier") != MPI_SUCCESS) continue; /* its own calls were refused */
    w->mode = MODE_PASSIVE;
    rc = first_error(rc, psync(w, t, seen, "ad_mpi_barrier"));
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

static int passive_sweep(ad_tape *t, ad__mrec *r, int reverse) {
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

static int rma_reverse(ad_tape *t, ad__mrec *r) {
  if (r->kind == AD__M_RMA_FENCE) return rma_sweep(t, r, 1);
  if (r->kind == AD__M_RMA_OPEN) return AD_OK; /* the sweep's start checked its note */
  return passive_sweep(t, r, 1);
}
static int rma_tangent(ad_tape *t, ad__mrec *r) {
  if (r->kind == AD__M_RMA_FENCE) return rma_sweep(t, r, 0);
  if (r->kind == AD__M_RMA_OPEN) return AD_OK;
  return passive_sweep(t, r, 0);
}

static void rma_free_record(ad__mrec *r) { rma_free(r->rma); }

/* The one-sided record kinds: each keeps its epoch's description in r->rma. */
static const ad__mkind kinds[] = {
    {AD__M_RMA_FENCE, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
    {AD__M_RMA_OPEN, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
    {AD__M_RMA_PBEGIN, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
    {AD__M_RMA_PEND, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
    {AD__M_RMA_BATCH, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
    {AD__M_RMA_SYNC, 0, rma_reverse, rma_tangent, NULL, rma_free_record},
};

static const ad__mkind *rma_kind(int kind) { return ad__mkind_find(kinds, sizeof kinds / sizeof *kinds, kind); }
