/* SPDX-License-Identifier: BSD-3-Clause */
/* What one-sided communication with fences (rma.c) and in passive-target
 * epochs (rma_passive.c) share: windows, accesses and the records' data. */
#ifndef ARIADNE_MPI_RMA_IMPL_H
#define ARIADNE_MPI_RMA_IMPL_H

#include <stdlib.h>

#include "mpi_impl.h"

/* Access kinds. A contributing access carries origin values to the target
 * (and writes there), a returning one brings target values back. */
enum { K_PUT = 1, K_GET, K_ACC_SUM, K_ACC_REPLACE, K_GACC_SUM, K_GACC_REPLACE };

static inline int contributes(int k) { return k != K_GET; }
static inline int returns(int k) { return k == K_GET || k == K_GACC_SUM || k == K_GACC_REPLACE; }
static inline int sums(int k) { return k == K_ACC_SUM || k == K_GACC_SUM; }

static inline const char *kind_name(int k) {
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
static inline int mark_at(int n) { return n + (n & 1); }

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

typedef struct psyncrec {
  phead h;
  int64_t ticket;
  int ni, np;
  int *ie, *pe;      /* incorporated and published elements */
  ad_index *ih, *ph; /* their new handles, the published handles */
} psyncrec;

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

static inline void note_release(token *k) {
  if (--k->refs == 0) free(k);
}

/* The windows of ad_real memory, and those used in passive-target epochs. */
extern win *ad__rma_wins;
extern pwin *ad__rma_pwins;

/* rma.c */
void ad__rma_access_free(access *a);
void ad__rma_deliver(access *a, ad_tape *t, ad_index *out);
int ad__rma_finish(int e, MPI_Request *r);
win *ad__rma_lookup(MPI_Win w);
int ad__rma_same_real(ad_real a, ad_real b);

/* rma_passive.c */
int ad__rma_passive_sweep(ad_tape *t, ad__mrec *r, int reverse);
void ad__rma_passive_free(void *data);
int ad__rma_passive_sweep_check(ad_tape *t);
int ad__rma_barrier(int after);
pwin *ad__rma_pw_make(ad_tape *t, win *w);
int ad__rma_psync(win *w, ad_tape *t, ad_tape *seen, const char *fn);
int ad__rma_passive_check(win *w, ad_tape *t, ad_tape *seen, const char *fn);
void ad__rma_pw_release(pwin *pw);
int64_t ad__rma_my_tickets(win *w);
int ad__rma_pw_end(win *w, ad_tape *t, int64_t tickets);

#endif
