/* SPDX-License-Identifier: BSD-3-Clause */
/* One-sided communication in passive-target epochs (locks, lock_all,
 * flushes, window synchronisation): each program checked by the dot-product
 * test and by central finite differences of the whole parallel program, its
 * values against the same program on plain MPI (a window of doubles), the
 * byte counts, and bad input, which must fail with an MPI error code and a
 * tape error naming the call.
 *
 * The programs are written once, below, and included twice: with ad_real
 * and the ad_mpi_* wrappers, and with double and plain MPI. The same file is
 * also compiled with ARIADNE_PASSIVE, where only the comparison of values
 * runs. Windows are allocated (MPI_Win_allocate), which every MPI library
 * here supports at one rank. */
#ifndef LOCK_PROGS
#include <stddef.h>

#include "mtest.h"

#define N 3
#define STEPS 4

static MPI_Op op_of(int code) { return code == 0 ? MPI_SUM : code == 1 ? MPI_REPLACE : MPI_NO_OP; }

#define LOCK_PROGS
#include "twins.h"
#include "test_mpi_lock.c"
#define MT_PLAIN
#include "twins.h"
#include "test_mpi_lock.c"

#ifndef ARIADNE_PASSIVE

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/* Summed over the ranks, each sweep moves the bytes of the forward run: the
 * halo program puts one value to each neighbour per step (none of it counts
 * at one rank, where the neighbours are the rank itself). */
static void stats_test(void) {
  uint64_t bytes[3];
  mt_sweep_bytes(lockall_halo_ad, N, NULL, 1.0, 0.01, bytes);
  uint64_t per_rank = mt_size > 1 ? (uint64_t)(2 * STEPS) * sizeof(double) : 0;
  int before = mt_errors;
  MT_CHECK(bytes[0] == per_rank);
  MT_CHECK(bytes[1] == per_rank);
  MT_CHECK(bytes[2] == per_rank);
  if (mt_errors > before) fprintf(stderr, "[%d] bytes of the halo: FAILED\n", mt_rank);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                 */
/* ------------------------------------------------------------------------ */

static void expect_error(ad_tape *t, const char *call, const char *words) {
  const char *msg = ad_tape_error_message(t);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  MT_CHECK(msg && strstr(msg, call) != NULL);
  MT_CHECK(msg && strstr(msg, words) != NULL);
  MT_CHECK(mt_has_rank_prefix(msg));
  if (!msg || !strstr(msg, call) || !strstr(msg, words))
    fprintf(stderr, "[%d] expected %s / %s, got: %s\n", mt_rank, call, words, msg ? msg : "(none)");
}

/* The end of a recording that must fail: the window freed (which succeeds),
 * the tape ended and holding the error of call, then destroyed. */
static void free_and_expect(MPI_Win *win, ad_tape *t, const char *call, const char *words) {
  MT_CHECK(ad_mpi_win_free(win) == MPI_SUCCESS);
  ad_tape_end(t);
  expect_error(t, call, words);
  ad_tape_destroy(t);
}

static MPI_Win make_win(ad_real **wb, int n) {
  MPI_Win win = MPI_WIN_NULL;
  MT_CHECK(ad_mpi_win_allocate((MPI_Aint)n * (MPI_Aint)sizeof(ad_real), (int)sizeof(ad_real), MPI_INFO_NULL,
                               MPI_COMM_WORLD, wb, &win) == MPI_SUCCESS);
  return win;
}

/* Two puts into one element in one epoch (MPI leaves the result undefined):
 * the unlock refuses; the values MPI left are still delivered. */
static void batch_conflict_test(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real *wb, v[2] = {ad_input(5.0), ad_input(6.0)};
  MPI_Win win = make_win(&wb, 2);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, mt_right(), 0, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_put(&v[0], 1, AD_MPI_REAL, mt_right(), 1, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_put(&v[1], 1, AD_MPI_REAL, mt_right(), 1, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_ERR_RMA_CONFLICT);
  ad_mpi_barrier(MPI_COMM_WORLD);
  free_and_expect(&win, t, "ad_mpi_win_unlock", "overlap");
}

/* A store of the target into an element that another rank's completed
 * operation wrote, with no synchronisation of the target between them: its
 * next synchronisation (here the barrier) refuses. Plain MPI_Barrier, which
 * is no synchronisation of the window, makes sure that the accumulate has
 * completed before the store. A store before a barrier is no such
 * conflict: the barrier publishes it (test_mpi_rma_publish). (At one rank
 * the rank's own lock is such a synchronisation, so there is no conflict to
 * make.) */
static void store_conflict_test(void) {
  if (mt_size == 1) return;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real *wb, v = ad_input(5.0);
  MPI_Win win = make_win(&wb, 2);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, mt_right(), 0, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_accumulate(&v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, MPI_SUM, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  wb[0] = ad_mul(v, 3.0);
  /* the barrier synchronises the window (as ad_mpi_win_sync would) */
  MT_CHECK(ad_mpi_barrier(MPI_COMM_WORLD) == MPI_ERR_RMA_CONFLICT);
  ad_mpi_win_free(&win);
  ad_tape_end(t);
  expect_error(t, "ad_mpi_barrier", "stored into element 0");
  ad_tape_destroy(t);
}

/* Misuse on one rank, refused there with the call's name. */
static void usage_test(void) {
  ad_real *wb, v = ad_const(1.0);
  /* accumulate with MPI_REPLACE under a shared lock */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  v = ad_input(2.0);
  MPI_Win win = make_win(&wb, 2);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, mt_right(), 0, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_accumulate(&v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, MPI_REPLACE, win) == MPI_ERR_RMA_SYNC);
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_SUCCESS);
  /* an access to a rank this one holds no lock on */
  MT_CHECK(ad_mpi_put(&v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, win) == MPI_ERR_RMA_SYNC);
  /* a struct with a passive field */
  struct pair {
    ad_real v;
    int k;
  } sv = {v, 1};
  int bl2[2] = {1, 1};
  MPI_Aint dp2[2] = {offsetof(struct pair, v), offsetof(struct pair, k)};
  MPI_Datatype ty2[2] = {AD_MPI_REAL, MPI_INT}, st;
  MPI_Type_create_struct(2, bl2, dp2, ty2, &st);
  MPI_Type_commit(&st);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, mt_right(), 0, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_put(&sv, 1, st, mt_right(), 0, 1, AD_MPI_REAL, win) == MPI_ERR_TYPE);
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_SUCCESS);
  MPI_Type_free(&st);
  /* unlock without lock, lock twice */
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_ERR_RMA_SYNC);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, mt_right(), 0, win) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, mt_right(), 0, win) == MPI_ERR_RMA_SYNC);
  MT_CHECK(ad_mpi_win_unlock(mt_right(), win) == MPI_SUCCESS);
  ad_mpi_barrier(MPI_COMM_WORLD);
  free_and_expect(&win, t, "ad_mpi_accumulate", "exclusive lock");

  /* a fence on a window used with locks: refused on every rank */
  t = ad_tape_create();
  ad_tape_begin(t);
  win = make_win(&wb, 2);
  if (mt_rank == 0) {
    MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_win_unlock(0, win) == MPI_SUCCESS);
  }
  MT_CHECK(ad_mpi_win_fence(0, win) == MPI_ERR_RMA_SYNC);
  free_and_expect(&win, t, "ad_mpi_win_fence", mt_rank == 0 ? "either with fences or" : "rank 0 found");

  /* a window created before the recording cannot take part in its
   * passive-target epochs */
  win = make_win(&wb, 2);
  t = ad_tape_create();
  ad_tape_begin(t);
  MT_CHECK(ad_mpi_win_lock_all(0, win) == MPI_ERR_RMA_SYNC);
  ad_tape_end(t);
  expect_error(t, "ad_mpi_win_lock_all", "created in that recording");
  ad_tape_destroy(t);
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
}

/* A window used with locks but freed after the recording: no sweep, on any
 * rank (the ranks that made no passive-target call learn it in the sweep's
 * handshake). */
static void not_freed_test(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real *wb, x = ad_input(1.0 + mt_rank), r;
  MPI_Win win = make_win(&wb, 1);
  wb[0] = ad_mul(x, x);
  if (mt_rank == 0) {
    MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_get(&r, 1, AD_MPI_REAL, 0, 0, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_win_unlock(0, win) == MPI_SUCCESS);
  } else {
    r = ad_mul(x, 2.0);
  }
  ad_mpi_barrier(MPI_COMM_WORLD);
  ad_tape_end(t);
  MT_CHECK(ad_mpi_win_free(&win) != MPI_SUCCESS); /* outside the recording */
  ad_seed(t, r, 1.0);
  MT_CHECK(ad_reverse(t) == AD_ERR_MPI);
  if (mt_rank == 0) expect_error(t, "ad_mpi_win_free", "not freed in the recording");
  ad_tape_destroy(t);
}

/* The order of epochs under exclusive locks is whatever order the locks
 * are granted in: every rank swaps a value into rank 0's element with
 * get_accumulate (MPI_REPLACE) with nothing else ordering them, so each
 * fetches the previous writer's value. The gradient must follow the order
 * that happened, which the fetched values reveal: checked against the
 * closed form, on several runs (the order may differ between them). */
static void arbitrated_test(void) {
  for (int run = 0; run < 3; run++) {
    double a = 1.0 + 0.25 * mt_rank, b = 0.5 + 0.125 * mt_rank;
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real xa = ad_input(a), xb = ad_input(b), *u, s, res, fin = ad_const(0.0);
    MPI_Win win = make_win(&u, 2);
    if (mt_rank == 0) {
      MT_CHECK(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
      u[0] = ad_mul(xb, 7.0);
      MT_CHECK(ad_mpi_win_unlock(0, win) == MPI_SUCCESS);
    }
    ad_mpi_barrier(MPI_COMM_WORLD);
    s = ad_mul(xa, (double)(mt_rank + 1));
    MT_CHECK(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_get_accumulate(&s, 1, AD_MPI_REAL, &res, 1, AD_MPI_REAL, 0, 0, 1, AD_MPI_REAL, MPI_REPLACE, win) ==
             MPI_SUCCESS);
    MT_CHECK(ad_mpi_win_unlock(0, win) == MPI_SUCCESS);
    ad_mpi_barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) {
      MT_CHECK(ad_mpi_win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
      fin = u[0];
      MT_CHECK(ad_mpi_win_unlock(0, win) == MPI_SUCCESS);
    }
    ad_real y = ad_add(ad_mul(res, xb), fin);
    MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
    ad_tape_end(t);
    ad_seed(t, y, 1.0);
    MT_CHECK(ad_reverse(t) == AD_OK);
    double mine[4] = {ad_value(res), ad_adjoint(t, xa), ad_adjoint(t, xb), b}, *all = malloc(4 * sizeof *all * mt_size);
    MPI_Allgather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, MPI_COMM_WORLD);
    /* prev[r]: whose value rank r fetched (-1: rank 0's initial 7 b_0) */
    int *next = malloc(sizeof *next * mt_size), first = -1, last = -1, ok = 1;
    for (int q = 0; q < mt_size; q++) next[q] = -1;
    for (int r = 0; r < mt_size; r++) {
      double v = all[4 * r];
      int prev = -2;
      if (v == 7.0 * all[3]) prev = -1;
      for (int q = 0; q < mt_size; q++)
        if (v == (1.0 + 0.25 * q) * (q + 1)) prev = q;
      if (prev == -2) ok = 0;
      if (prev == -1) first = r;
      if (prev >= 0) next[prev] = r;
    }
    for (int q = 0; q < mt_size; q++)
      if (next[q] == -1) last = q;
    MT_CHECK(ok && first >= 0 && last >= 0);
    if (ok && first >= 0 && last >= 0) {
      for (int q = 0; q < mt_size; q++) {
        double ga = (q + 1) * (q == last ? 1.0 : all[4 * next[q] + 3]);
        double gb = all[4 * q] + (q == 0 ? 7.0 * all[4 * first + 3] : 0.0);
        MT_CLOSE(all[4 * q + 1], ga, 1e-15);
        MT_CLOSE(all[4 * q + 2], gb, 1e-15);
      }
    }
    free(all);
    free(next);
    ad_tape_destroy(t);
  }
}

/* MPI's own calls on a window of doubles that these wrappers did not
 * create. */
static void plain_window_test(void) {
  int *ib;
  MPI_Win pw;
  MT_CHECK(MPI_Win_allocate(2 * (MPI_Aint)sizeof(int), (int)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &ib, &pw) ==
           MPI_SUCCESS);
  ib[0] = ib[1] = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  int one = 1;
  MT_CHECK(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, pw) == MPI_SUCCESS);
  MT_CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_flush(0, pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_unlock(0, pw) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
  MT_CHECK(ad_mpi_win_lock_all(0, pw) == MPI_SUCCESS);
  int got = -1;
  MT_CHECK(MPI_Get_accumulate(NULL, 0, MPI_INT, &got, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_NO_OP, pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_flush_all(pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_sync(pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_unlock_all(pw) == MPI_SUCCESS);
  MT_CHECK(got == mt_size);
  MPI_Win_free(&pw);
}
#endif

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  static const struct {
    const char *name;
    mt_ad_prog ad;
    mt_plain_prog plain;
  } progs[] = {{"lock_halo", lock_halo_ad, lock_halo_plain},
               {"lockall_halo", lockall_halo_ad, lockall_halo_plain},
               {"barrier_halo", barrier_halo_ad, barrier_halo_plain},
               {"accumulate", acc_prog_ad, acc_prog_plain},
               {"get", get_prog_ad, get_prog_plain},
               {"relay", relay_prog_ad, relay_prog_plain},
               {"columns", column_prog_ad, column_prog_plain}};
  const size_t nprogs = sizeof progs / sizeof progs[0];
  for (size_t k = 0; k < nprogs; k++) mt_values(progs[k].name, progs[k].ad, progs[k].plain, NULL, N);
  for (int op = 0; op < 3; op++) mt_values("get_accumulate", gacc_prog_ad, gacc_prog_plain, &op, N);
#ifndef ARIADNE_PASSIVE
  for (size_t k = 0; k < nprogs; k++) mt_check_prog(progs[k].name, progs[k].ad, N, N, NULL, 1e-6);
  char name[64];
  for (int op = 0; op < 3; op++) {
    snprintf(name, sizeof name, "get_accumulate_%s", op == 0 ? "sum" : op == 1 ? "replace" : "no_op");
    mt_check_prog(name, gacc_prog_ad, N, N, &op, 1e-6);
  }
  stats_test();
  batch_conflict_test();
  store_conflict_test();
  usage_test();
  not_freed_test();
  arbitrated_test();
  plain_window_test();
#endif
  return mt_finalize();
}

#else /* LOCK_PROGS: the programs, once per instantiation */

/* Sizes are padded to a multiple of 16 bytes: MPICH 4.0.2 places a rank's
 * segment of an allocated window at the wrong offset otherwise (plain MPI
 * then fetches the neighbouring element). */
static R *F(alloc)(int n, MPI_Win *win) {
  R *u = NULL;
  n += n & 1;
  WIN_ALLOCATE((MPI_Aint)n * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &u, win);
  return u;
}

/* The cells of a periodic 1-D field after one explicit step, from the
 * ghosts u[0] and u[n+1]. */
static void F(update)(R *u, int n) {
  R nu[N];
  for (int i = 1; i <= n; i++) {
    R lap = ADD(ADD(u[i - 1], u[i + 1]), MUL(-2.0, u[i]));
    nu[i - 1] = ADD(ADD(u[i], MUL(0.2, lap)), MUL(0.05, MUL(u[i], u[i])));
  }
  for (int i = 1; i <= n; i++) u[i] = nu[i - 1];
}

/* A halo exchange with exclusive locks: each step puts the edge cells into
 * the neighbours' ghosts, one lock epoch per neighbour; a barrier; the rank
 * reads its ghosts and stores its cells under a lock of its own part; a
 * barrier before the next puts overwrite the ghosts. */
static void F(lock_halo)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  MPI_Win win;
  R *u = F(alloc)(n + 2, &win), e[2];
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < n; i++) u[i + 1] = MUL(x[i], x[i]);
  u[0] = u[n + 1] = CST(0.0);
  UNLOCK(mt_rank, win);
  BARRIER();
  for (int step = 0; step < STEPS; step++) {
    e[0] = u[1];
    e[1] = u[n];
    LOCK(MPI_LOCK_EXCLUSIVE, mt_left(), 0, win);
    PUT(&e[0], 1, RT, mt_left(), n + 1, 1, RT, win); /* my first cell: the left neighbour's right ghost */
    UNLOCK(mt_left(), win);
    LOCK(MPI_LOCK_EXCLUSIVE, mt_right(), 0, win);
    PUT(&e[1], 1, RT, mt_right(), 0, 1, RT, win); /* my last cell: the right neighbour's left ghost */
    UNLOCK(mt_right(), win);
    BARRIER();
    LOCK(MPI_LOCK_SHARED, mt_rank, 0, win);
    F(update)(u, n);
    UNLOCK(mt_rank, win);
    BARRIER();
  }
  for (int i = 0; i < n; i++) y[i] = MUL(u[i + 1], ADD(u[i + 1], x[i]));
  WIN_FREE(&win);
}

/* The same exchange in one long lock_all epoch: puts, flush_all, a barrier.
 * `synced`: as codes write it, a window synchronisation before reading the
 * ghosts and another after storing the cells. Otherwise as programs
 * written for MPI's unified memory model have it: the ghosts are read right
 * after the barrier, with no synchronisation of the window (ad_mpi_barrier
 * takes in what was completed before it; the plain program synchronises, as
 * MPI requires of it). The two start from sin(x) and cos(x). */
static void F(epoch_halo)(R *x, int n, R *y, int synced) {
  MPI_Win win;
  R *u = F(alloc)(n + 2, &win), e[2];
  LOCK_ALL(0, win);
  for (int i = 0; i < n; i++) u[i + 1] = synced ? SIN(x[i]) : COS(x[i]);
  u[0] = u[n + 1] = CST(0.0);
  if (synced)
    WIN_SYNC(win);
  else
    PLAIN_SYNC(win);
  BARRIER(); /* no put may reach a ghost before it is set */
  for (int step = 0; step < STEPS; step++) {
    e[0] = u[1];
    e[1] = u[n];
    PUT(&e[0], 1, RT, mt_left(), n + 1, 1, RT, win);
    PUT(&e[1], 1, RT, mt_right(), 0, 1, RT, win);
    FLUSH_ALL(win);
    BARRIER();
    if (synced)
      WIN_SYNC(win);
    else
      PLAIN_SYNC(win);
    F(update)(u, n);
    if (synced) WIN_SYNC(win);
    BARRIER();
  }
  UNLOCK_ALL(win);
  for (int i = 0; i < n; i++) y[i] = MUL(u[i + 1], ADD(u[i + 1], x[i]));
  WIN_FREE(&win);
}

static void F(lockall_halo)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  F(epoch_halo)(x, n, y, 1);
}

static void F(barrier_halo)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  F(epoch_halo)(x, n, y, 0);
}

/* Accumulates with MPI_SUM: every rank adds into rank 0's first n elements
 * under an exclusive lock (in whatever order the locks are granted) and into
 * its right neighbour's next n under a shared lock (flushed, then
 * unlocked). */
static void F(acc_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  MPI_Win win;
  R *u = F(alloc)(2 * n, &win), s[N];
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < 2 * n; i++) u[i] = MUL(x[i % n], x[i % n]);
  UNLOCK(mt_rank, win);
  for (int i = 0; i < n; i++) s[i] = COS(ADD(x[i], 0.1 * mt_rank));
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, 0, 0, win);
  ACC(s, n, RT, 0, 0, n, RT, MPI_SUM, win);
  UNLOCK(0, win);
  LOCK(MPI_LOCK_SHARED, mt_right(), 0, win);
  ACC(s, n, RT, mt_right(), n, n, RT, MPI_SUM, win);
  FLUSH(mt_right(), win);
  UNLOCK(mt_right(), win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, mt_rank, 0, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(u[i], u[n + i]), x[i]);
  UNLOCK(mt_rank, win);
  WIN_FREE(&win);
}

/* Gets under shared locks, twice, with stores of the target between them:
 * what a rank stores and then synchronises is what later gets see. Two
 * overlapping gets in one epoch (reads may overlap); a last get in a
 * lock_all epoch completed by flush_local_all. */
static void F(get_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  MPI_Win win;
  R *u = F(alloc)(n, &win), r[N], r2[N], r3, r4;
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < n; i++) u[i] = SIN(MUL(0.3, x[i]));
  UNLOCK(mt_rank, win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, mt_right(), 0, win);
  GET(r, n, RT, mt_right(), 0, n, RT, win);
  UNLOCK(mt_right(), win);
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < n; i++) u[i] = MUL(r[i], x[(i + 1) % n]);
  UNLOCK(mt_rank, win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, mt_left(), 0, win);
  GET(r2, n, RT, mt_left(), 0, n, RT, win);
  GET(&r3, 1, RT, mt_left(), 1, 1, RT, win);
  FLUSH_LOCAL(mt_left(), win);
  UNLOCK(mt_left(), win);
  LOCK_ALL(0, win);
  GET(&r4, 1, RT, mt_right(), n - 1, 1, RT, win);
  FLUSH_LOCAL_ALL(win); /* the fetched value is there now */
  R r5 = MUL(r4, r4);
  UNLOCK_ALL(win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(r2[i], r[i]), MUL(ADD(r3, r5), x[i]));
  BARRIER();
  WIN_FREE(&win);
}

/* A value relayed through a third rank's window without that rank taking
 * part: each rank puts into its right neighbour's element 0; after a
 * barrier, each rank gets element 0 of the rank two to its right (put there
 * by the rank one to its right) and puts its square into element 1 there;
 * after another barrier, every rank reads its elements. */
static void F(relay_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  MPI_Win win;
  R *u = F(alloc)(2, &win), v = MUL(x[0], ADD(x[1], x[2])), g, sq;
  int far = (mt_rank + 2) % mt_size;
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  u[0] = x[1];
  u[1] = x[2];
  UNLOCK(mt_rank, win);
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, mt_right(), 0, win);
  PUT(&v, 1, RT, mt_right(), 0, 1, RT, win);
  UNLOCK(mt_right(), win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, far, 0, win);
  GET(&g, 1, RT, far, 0, 1, RT, win);
  UNLOCK(far, win);
  sq = MUL(g, g);
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, far, 0, win);
  PUT(&sq, 1, RT, far, 1, 1, RT, win);
  UNLOCK(far, win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, mt_rank, 0, win);
  y[0] = MUL(u[0], x[0]);
  y[1] = ADD(u[1], g);
  y[2] = MUL(u[0], u[1]);
  UNLOCK(mt_rank, win);
  WIN_FREE(&win);
}

/* Get_accumulate into rank 0's elements (ctx: 0 MPI_SUM, 1 MPI_REPLACE,
 * 2 MPI_NO_OP), one rank after the other (barriers order them): each rank
 * fetches what the ranks before it left. */
static void F(gacc_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  MPI_Op op = op_of(*(int *)ctx);
  MPI_Win win;
  R *u = F(alloc)(n, &win), s[N], res[N];
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < n; i++) u[i] = COS(x[i]);
  UNLOCK(mt_rank, win);
  for (int i = 0; i < n; i++) s[i] = MUL(x[(i + 1) % n], 2.0 + mt_rank);
  BARRIER();
  for (int q = 0; q < mt_size; q++) {
    if (q == mt_rank) {
      LOCK(MPI_LOCK_EXCLUSIVE, 0, 0, win);
      GACC(s, n, RT, res, n, RT, 0, 0, n, RT, op, win);
      UNLOCK(0, win);
    }
    BARRIER();
  }
  LOCK(MPI_LOCK_SHARED, mt_rank, 0, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(res[i], u[i]), MUL(u[i], u[i]));
  UNLOCK(mt_rank, win);
  WIN_FREE(&win);
}

/* Derived datatypes in lock epochs: a 3 by 4 row-major block per rank with
 * ghost columns 0 and 3; each rank puts its columns 1 and 2 into the
 * neighbours' ghost columns as one column type on each side (exclusive
 * locks), and after the update fetches the right neighbour's column 1 into
 * a contiguous buffer (a shared lock). */
static void F(column_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  MPI_Datatype col;
  MPI_Type_vector(3, 1, 4, RT, &col);
  MPI_Type_commit(&col);
  MPI_Win win;
  R *u = F(alloc)(12, &win), g[3], nb[12];
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) u[4 * i + j] = j == 0 || j == 3 ? CST(0.0) : MUL(x[i], 0.5 + j);
  UNLOCK(mt_rank, win);
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, mt_left(), 0, win);
  PUT(u + 1, 1, col, mt_left(), 3, 1, col, win);
  UNLOCK(mt_left(), win);
  LOCK(MPI_LOCK_EXCLUSIVE, mt_right(), 0, win);
  PUT(u + 2, 1, col, mt_right(), 0, 1, col, win);
  UNLOCK(mt_right(), win);
  BARRIER();
  LOCK(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win);
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) nb[4 * i + j] = ADD(u[4 * i + j], MUL(0.25, MUL(u[4 * i + j - 1], u[4 * i + j + 1])));
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) u[4 * i + j] = nb[4 * i + j];
  UNLOCK(mt_rank, win);
  BARRIER();
  LOCK(MPI_LOCK_SHARED, mt_right(), 0, win);
  GET(g, 3, RT, mt_right(), 1, 1, col, win);
  UNLOCK(mt_right(), win);
  LOCK(MPI_LOCK_SHARED, mt_rank, 0, win);
  for (int i = 0; i < 3; i++) y[i] = ADD(MUL(g[i], u[4 * i + 1]), MUL(u[4 * i + 3], u[4 * i + 2]));
  UNLOCK(mt_rank, win);
  BARRIER();
  WIN_FREE(&win);
  MPI_Type_free(&col);
}

#endif /* LOCK_PROGS */
