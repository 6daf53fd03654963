/* SPDX-License-Identifier: BSD-3-Clause */
/* One-sided communication with fences: each operation in a parallel program
 * checked by the dot-product test and by central finite differences of the
 * whole program; the values of every program against the same program on
 * plain MPI (MPI_Put, ... on a window of doubles); the byte counts; and bad
 * input, which must fail on every rank with an MPI error code and a tape
 * error naming the call.
 *
 * The programs are written once, below, and included twice: with ad_real
 * and the ad_mpi_* wrappers, and with double and plain MPI. The same file is
 * also compiled with ARIADNE_PASSIVE, where only the comparison of values
 * runs. */
#ifndef RMA_PROGS
#include "mtest.h"

#define N 3

static MPI_Op op_of(int code) { return code == 0 ? MPI_SUM : code == 1 ? MPI_REPLACE : MPI_NO_OP; }

#define RMA_PROGS
#include "twins.h"
#include "test_mpi_rma.c"
#define MT_PLAIN
#include "twins.h"
#include "test_mpi_rma.c"

/* ------------------------------------------------------------------------ */
/* Values against plain MPI                                                  */
/* ------------------------------------------------------------------------ */

static int plain_create = 1; /* plain MPI_Win_create works here */

/* mt_values, for programs whose plain twin can run here. */
static void values(const char *name, mt_ad_prog fa, mt_plain_prog fp, void *ctx, int creates) {
  if (creates && !plain_create) return;
  mt_values(name, fa, fp, ctx, N);
}

#ifndef ARIADNE_PASSIVE

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/* Summed over the ranks, each sweep moves the bytes of the forward run. The
 * put program sends n values to the right neighbour; the get program
 * fetches n values from each neighbour in turn; the get_accumulate program
 * sends n and fetches n. None of it counts at one rank, where the
 * neighbours are the rank itself. */
static void stats_one(const char *name, mt_ad_prog f, void *ctx, uint64_t per_rank) {
  uint64_t mine[3], all[3];
  mt_sweep_bytes(f, N, ctx, 1.0, 0.01, mine);
  MPI_Allreduce(mine, all, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  uint64_t expect = mt_size > 1 ? (uint64_t)mt_size * per_rank * sizeof(double) : 0;
  int before = mt_errors;
  MT_CHECK(all[0] == expect);
  MT_CHECK(all[1] == expect);
  MT_CHECK(all[2] == expect);
  MT_CHECK(mine[0] == (mt_size > 1 ? per_rank * sizeof(double) : 0));
  if (mt_errors > before) fprintf(stderr, "[%d] bytes of %s: FAILED\n", mt_rank, name);
}

static void stats_test(void) {
  int create = 0, sum = 0;
  stats_one("put", put_prog_ad, &create, N);
  stats_one("get", get_prog_ad, NULL, 2 * N);
  stats_one("get_accumulate", gacc_prog_ad, &sum, 2 * N);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                 */
/* ------------------------------------------------------------------------ */

/* The tape's error names the call (and the message carries the rank). */
static void expect_error(ad_tape *t, const char *call) {
  const char *msg = ad_tape_error_message(t);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  MT_CHECK(msg && strstr(msg, call) != NULL);
  MT_CHECK(mt_has_rank_prefix(msg));
}

static MPI_Win make_win(ad_real *wb, int n) {
  MPI_Win win = MPI_WIN_NULL;
  MT_CHECK(ad_mpi_win_create(wb, (MPI_Aint)n * (MPI_Aint)sizeof(ad_real), (int)sizeof(ad_real), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win) == MPI_SUCCESS);
  return win;
}

/* An epoch MPI leaves undefined (mode 0: two puts into one element, from
 * every rank; 1: a put and a get of one element; 2: a target's own store
 * into an element put into): the fence fails on every rank. */
static void conflict_test(int mode) {
  ad_real wb[4] = {{0}}, v[2], r[1];
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  for (int i = 0; i < 4; i++) wb[i] = ad_input(1.0 + i);
  v[0] = ad_input(5.0);
  v[1] = ad_input(6.0);
  MPI_Win win = make_win(wb, 4);
  MT_CHECK(ad_mpi_win_fence(0, win) == MPI_SUCCESS);
  if (mode == 0) {
    MT_CHECK(ad_mpi_put(&v[0], 1, AD_MPI_REAL, 0, 2, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_put(&v[1], 1, AD_MPI_REAL, 0, 2, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  } else if (mode == 1) {
    MT_CHECK(ad_mpi_put(&v[0], 1, AD_MPI_REAL, mt_right(), 1, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_get(r, 1, AD_MPI_REAL, mt_right(), 1, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  } else {
    MT_CHECK(ad_mpi_accumulate(&v[0], 1, AD_MPI_REAL, mt_right(), 3, 1, AD_MPI_REAL, MPI_SUM, win) == MPI_SUCCESS);
    wb[3] = ad_mul(wb[3], 2.0);
  }
  MT_CHECK(ad_mpi_win_fence(MPI_MODE_NOSUCCEED, win) == MPI_ERR_RMA_CONFLICT);
  expect_error(t, "ad_mpi_win_fence");
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
  ad_tape_end(t);
  /* the sweep refuses the tape: no gradient */
  MT_CHECK(ad_reverse(t) != AD_OK);
  ad_tape_destroy(t);
}

/* Overlapping accumulates with MPI_SUM are fine (and checked above); one
 * with MPI_SUM and one with MPI_REPLACE on one element are not. */
static void conflict_acc_test(void) {
  ad_real wb[2] = {{0}}, v = ad_const(1.0);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  MPI_Win win = make_win(wb, 2);
  ad_mpi_win_fence(0, win);
  ad_mpi_accumulate(&v, 1, AD_MPI_REAL, 0, 0, 1, AD_MPI_REAL, mt_rank == 0 ? MPI_REPLACE : MPI_SUM, win);
  ad_mpi_accumulate(&v, 1, AD_MPI_REAL, 0, 0, 1, AD_MPI_REAL, MPI_SUM, win);
  MT_CHECK(ad_mpi_win_fence(0, win) == MPI_ERR_RMA_CONFLICT);
  expect_error(t, "ad_mpi_win_fence");
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
  ad_tape_end(t);
  ad_tape_destroy(t);
}

/* Windows and accesses on the wrong type, counts, ranges, operations and
 * epochs: refused on the calling rank, with nothing left pending. */
static void usage_test(void) {
  ad_real wb[4] = {{0}}, v[2] = {{0}};
  double d[4] = {0};
  ad_tape *t;
  MPI_Win win = MPI_WIN_NULL;

#define FRESH()                                                                                                        \
  do {                                                                                                                 \
    t = ad_tape_create();                                                                                              \
    ad_tape_begin(t);                                                                                                  \
    v[0] = ad_input(1.0);                                                                                              \
    v[1] = ad_input(2.0);                                                                                              \
  } while (0)
#define DONE()                                                                                                         \
  do {                                                                                                                 \
    ad_tape_end(t);                                                                                                    \
    ad_tape_destroy(t);                                                                                                \
  } while (0)

  /* a window on doubles: the displacement unit of a double */
  FRESH();
  MT_CHECK(ad_mpi_win_create(wb, 4 * (MPI_Aint)sizeof(ad_real), (int)sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD,
                             &win) == MPI_ERR_DISP);
  expect_error(t, "ad_mpi_win_create");
  DONE();
  /* a size that is no whole number of ad_real elements, on one rank only:
   * every rank refuses */
  FRESH();
  {
    /* three ad_real and a double (ad_real is larger than a double) */
    MPI_Aint size = mt_rank == mt_size - 1 ? 3 * (MPI_Aint)sizeof(ad_real) + 8 : 4 * (MPI_Aint)sizeof(ad_real);
    int rc = ad_mpi_win_create(wb, size, (int)sizeof(ad_real), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MT_CHECK(rc == (mt_rank == mt_size - 1 ? MPI_ERR_SIZE : MPI_ERR_OTHER));
    expect_error(t, "ad_mpi_win_create");
  }
  DONE();

  FRESH();
  win = make_win(wb, 4);
  /* an access before any fence */
  MT_CHECK(ad_mpi_put(v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, win) == MPI_ERR_RMA_SYNC);
  expect_error(t, "ad_mpi_put");
  DONE();
  FRESH();
  ad_mpi_win_fence(0, win);
  /* double data on an ad_real window */
  MT_CHECK(ad_mpi_put(d, 1, MPI_DOUBLE, mt_right(), 0, 1, MPI_DOUBLE, win) == MPI_ERR_TYPE);
  expect_error(t, "ad_mpi_put");
  DONE();
  FRESH();
  MT_CHECK(ad_mpi_get(v, 2, AD_MPI_REAL, mt_right(), 3, 2, AD_MPI_REAL, win) == MPI_ERR_RMA_RANGE);
  expect_error(t, "ad_mpi_get");
  DONE();
  FRESH();
  MT_CHECK(ad_mpi_accumulate(v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, MPI_PROD, win) == MPI_ERR_OP);
  expect_error(t, "ad_mpi_accumulate");
  DONE();
  FRESH();
  MT_CHECK(ad_mpi_put(v, 2, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, win) == MPI_ERR_COUNT);
  expect_error(t, "ad_mpi_put");
  DONE();
  FRESH();
  /* a result buffer inside a window */
  MT_CHECK(ad_mpi_get(wb + 1, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, win) == MPI_ERR_BUFFER);
  expect_error(t, "ad_mpi_get");
  DONE();
  ad_mpi_win_fence(MPI_MODE_NOSUCCEED, win);
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
  MT_CHECK(win == MPI_WIN_NULL);

  /* AD_MPI_REAL on a window of MPI's own */
  MPI_Win pw;
  double *pd; /* allocated: see probe_create */
  MPI_Win_allocate(4 * (MPI_Aint)sizeof(double), (int)sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &pd, &pw);
  MPI_Win_fence(0, pw);
  FRESH();
  MT_CHECK(ad_mpi_put(v, 1, AD_MPI_REAL, mt_right(), 0, 1, AD_MPI_REAL, pw) == MPI_ERR_WIN);
  expect_error(t, "ad_mpi_put");
  DONE();
  /* other data on it passes through to MPI */
  double one = 1.0 + mt_rank;
  MT_CHECK(ad_mpi_put(&one, 1, MPI_DOUBLE, mt_right(), 2, 1, MPI_DOUBLE, pw) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_win_fence(0, pw) == MPI_SUCCESS);
  MT_CHECK(pd[2] == 1.0 + mt_left());
  MPI_Win_free(&pw);
#undef FRESH
#undef DONE
}

/* An epoch left open when the tape is swept: every rank's sweep fails, the
 * window cannot be freed while it is open, and a fence outside the
 * recording closes it, refusing to differentiate what it closes: the tape
 * lacks the epoch for good, so a second sweep fails too. */
static void open_epoch_test(void) {
  ad_real wb[2] = {{0}}, v;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  v = ad_input(1.0 + mt_rank);
  MPI_Win win = make_win(wb, 2);
  ad_mpi_win_fence(0, win);
  if (mt_rank == 0) MT_CHECK(ad_mpi_put(&v, 1, AD_MPI_REAL, mt_size - 1, 0, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  ad_tape_end(t);
  ad_seed(t, v, 1.0);
  MT_CHECK(ad_reverse(t) == AD_ERR_MPI);
  if (mt_rank == 0) expect_error(t, "ad_mpi_win_fence");
  MT_CHECK(ad_mpi_win_free(&win) == MPI_ERR_RMA_SYNC);
  int rc = ad_mpi_win_fence(MPI_MODE_NOSUCCEED, win);
  MT_CHECK(rc == MPI_ERR_RMA_SYNC);
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
  ad_adjoints_zero(t);
  ad_seed(t, v, 1.0);
  MT_CHECK(ad_reverse(t) == AD_ERR_MPI);
  if (mt_rank == 0) expect_error(t, "ad_mpi_win_fence");
  ad_tape_destroy(t);
}

/* Accesses recorded on one tape, the epoch closed by a fence on another:
 * the first tape lacks the epoch, and its sweeps fail on every rank. */
static void lost_epoch_test(void) {
  ad_real wb[2] = {{0}}, v;
  ad_tape *a = ad_tape_create(), *b = ad_tape_create();
  ad_tape_begin(a);
  v = ad_input(2.0);
  MPI_Win win = make_win(wb, 2);
  ad_mpi_win_fence(0, win);
  MT_CHECK(ad_mpi_put(&v, 1, AD_MPI_REAL, mt_right(), 1, 1, AD_MPI_REAL, win) == MPI_SUCCESS);
  ad_tape_end(a);
  ad_tape_begin(b);
  MT_CHECK(ad_mpi_win_fence(0, win) == MPI_ERR_RMA_SYNC);
  expect_error(b, "ad_mpi_win_fence");
  MT_CHECK(ad_mpi_win_free(&win) == MPI_SUCCESS);
  ad_tape_end(b);
  ad_seed(a, v, 1.0);
  MT_CHECK(ad_reverse(a) == AD_ERR_MPI);
  expect_error(a, "ad_mpi_win_fence");
  ad_tape_destroy(a);
  ad_tape_destroy(b);
}

#endif /* ARIADNE_PASSIVE */

/* Open MPI 4.1 has no one-sided component for a window on a single rank's
 * own memory: MPI_Win_create fails at one rank (MPI_Win_allocate works).
 * The comparisons with plain MPI programs that create their windows are
 * skipped there (and in the passive build, the programs themselves). */
static void probe_create(void) {
  double d[2];
  MPI_Win w;
  int ok = MPI_Win_create(d, sizeof d, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &w) == MPI_SUCCESS;
  if (ok) MPI_Win_free(&w);
  MPI_Allreduce(&ok, &plain_create, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!plain_create && mt_rank == 0)
    printf(" skipped: comparisons with plain MPI programs that use MPI_Win_create, which fails in this MPI at %d "
           "rank(s)\n",
           mt_size);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  probe_create();
  char name[64];
  for (int alloc = 0; alloc < 2; alloc++) {
    snprintf(name, sizeof name, "put_%s", alloc ? "allocate" : "create");
    values(name, put_prog_ad, put_prog_plain, &alloc, !alloc);
#ifndef ARIADNE_PASSIVE
    mt_check_prog(name, put_prog_ad, N, N, &alloc, 1e-6);
#endif
  }
  values("get", get_prog_ad, get_prog_plain, NULL, 1);
#ifndef ARIADNE_PASSIVE
  mt_check_prog("get", get_prog_ad, N, N, NULL, 1e-6);
#endif
  for (int op = 0; op < 2; op++) {
    snprintf(name, sizeof name, "accumulate_%s", op ? "replace" : "sum");
    values(name, acc_prog_ad, acc_prog_plain, &op, 1);
#ifndef ARIADNE_PASSIVE
    mt_check_prog(name, acc_prog_ad, N, N, &op, 1e-6);
#endif
  }
  for (int op = 0; op < 3; op++) {
    snprintf(name, sizeof name, "get_accumulate_%s", op == 0 ? "sum" : op == 1 ? "replace" : "no_op");
    values(name, gacc_prog_ad, gacc_prog_plain, &op, 1);
#ifndef ARIADNE_PASSIVE
    mt_check_prog(name, gacc_prog_ad, N, N, &op, 1e-6);
#endif
  }
  values("halo", halo_prog_ad, halo_prog_plain, NULL, 1);
  values("columns", column_prog_ad, column_prog_plain, NULL, 1);
#ifndef ARIADNE_PASSIVE
  mt_check_prog("halo", halo_prog_ad, N, N, NULL, 1e-6);
  mt_check_prog("columns", column_prog_ad, N, N, NULL, 1e-6);
  stats_test();
  for (int mode = 0; mode < 3; mode++) conflict_test(mode);
  conflict_acc_test();
  usage_test();
  open_epoch_test();
  lost_epoch_test();
#endif
  return mt_finalize();
}

#else /* RMA_PROGS: the programs, once per instantiation */

/* A window of 2n elements holding local values; every rank puts n values
 * into elements 1..n of its right neighbour's (ctx: 1 to allocate the
 * window, 0 to create it on the program's own array). */
static void F(put_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  int alloc = *(int *)ctx, w = 2 * n;
  R *wb = NULL;
  MPI_Win win;
  if (alloc)
    WIN_ALLOCATE((MPI_Aint)w * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &wb, &win);
  else {
    wb = calloc((size_t)w, sizeof *wb);
    WIN_CREATE(wb, (MPI_Aint)w * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  }
  FENCE(0, win);
  /* local stores in the first epoch, which has no remote access to them */
  for (int i = 0; i < w; i++) wb[i] = MUL(x[i % n], 0.5 + i);
  FENCE(0, win);
  R s[N];
  for (int i = 0; i < n; i++) s[i] = SIN(MUL(x[i], x[(i + 1) % n]));
  PUT(s, n, RT, mt_right(), 1, n, RT, win);
  FENCE(MPI_MODE_NOSUCCEED, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(wb[i], wb[i + n]), x[i]);
  WIN_FREE(&win);
  if (!alloc) free(wb);
}

/* Gets in two epochs with a local store between them: what a rank stores
 * into its window between fences is what the next epoch's gets see. */
static void F(get_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  R *wb = calloc((size_t)n, sizeof *wb), r[N], r2[N];
  MPI_Win win;
  WIN_CREATE(wb, (MPI_Aint)n * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  for (int i = 0; i < n; i++) wb[i] = EXP(MUL(0.3, x[i]));
  FENCE(MPI_MODE_NOPRECEDE, win);
  GET(r, n, RT, mt_left(), 0, n, RT, win);
  FENCE(0, win);
  for (int i = 0; i < n; i++) wb[i] = MUL(r[i], x[(i + 1) % n]);
  FENCE(0, win);
  GET(r2, n - 1, RT, mt_right(), 1, n - 1, RT, win);
  GET(r2 + n - 1, 1, RT, mt_right(), 0, 1, RT, win); /* reads may overlap nothing: disjoint here */
  FENCE(MPI_MODE_NOSUCCEED, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(r2[i], r[i]), x[i]);
  WIN_FREE(&win);
  free(wb);
}

/* Accumulates (ctx: 0 MPI_SUM, 1 MPI_REPLACE): with MPI_SUM every rank adds
 * into rank 0's first n elements (overlapping sums, which MPI allows) and
 * into its right neighbour's next n; with MPI_REPLACE only the latter. */
static void F(acc_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  MPI_Op op = op_of(*(int *)ctx);
  R *wb = calloc((size_t)(2 * n), sizeof *wb), s[N];
  MPI_Win win;
  WIN_CREATE(wb, (MPI_Aint)(2 * n) * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  for (int i = 0; i < 2 * n; i++) wb[i] = MUL(x[i % n], x[i % n]);
  for (int i = 0; i < n; i++) s[i] = COS(ADD(x[i], 0.1 * mt_rank));
  FENCE(0, win);
  if (op == MPI_SUM) ACC(s, n, RT, 0, 0, n, RT, op, win);
  ACC(s, n, RT, mt_right(), n, n, RT, op, win);
  FENCE(0, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(wb[i], wb[n + i]), x[i]);
  FENCE(MPI_MODE_NOSUCCEED, win);
  WIN_FREE(&win);
  free(wb);
}

/* Get_accumulate into the right neighbour's window (ctx: 0 MPI_SUM,
 * 1 MPI_REPLACE, 2 MPI_NO_OP): the fetched old values and the new ones both
 * flow into the outputs. */
static void F(gacc_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  MPI_Op op = op_of(*(int *)ctx);
  R *wb = calloc((size_t)n, sizeof *wb), s[N], res[N];
  MPI_Win win;
  WIN_CREATE(wb, (MPI_Aint)n * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  for (int i = 0; i < n; i++) {
    wb[i] = COS(x[i]);
    s[i] = MUL(x[(i + 1) % n], 2.0 + mt_rank);
  }
  FENCE(0, win);
  GACC(s, n, RT, res, n, RT, mt_right(), 0, n, RT, op, win);
  FENCE(0, win);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(res[i], wb[i]), MUL(wb[i], wb[i]));
  FENCE(MPI_MODE_NOSUCCEED, win);
  WIN_FREE(&win);
  free(wb);
}

/* A one-sided halo exchange as real codes write it: a periodic 1-D field of
 * n cells per rank with a ghost cell on each side, in a window; each step
 * puts the edge cells into the neighbours' ghosts, fences, updates the cells
 * (local stores, which the next epoch's puts read), and fences again before
 * the next puts may overwrite the ghosts the update reads. */
#define HALO_STEPS 5
static void F(halo_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  R *u = calloc((size_t)(n + 2), sizeof *u), nu[N];
  MPI_Win win;
  WIN_CREATE(u, (MPI_Aint)(n + 2) * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  for (int i = 0; i < n; i++) u[i + 1] = x[i];
  FENCE(MPI_MODE_NOPRECEDE, win);
  for (int step = 0; step < HALO_STEPS; step++) {
    PUT(u + 1, 1, RT, mt_left(), n + 1, 1, RT, win); /* my first cell: the left neighbour's right ghost */
    PUT(u + n, 1, RT, mt_right(), 0, 1, RT, win);    /* my last cell: the right neighbour's left ghost */
    FENCE(0, win);
    for (int i = 1; i <= n; i++) {
      R lap = ADD(ADD(u[i - 1], u[i + 1]), MUL(-2.0, u[i]));
      nu[i - 1] = ADD(ADD(u[i], MUL(0.2, lap)), MUL(0.05, MUL(u[i], u[i])));
    }
    for (int i = 1; i <= n; i++) u[i] = nu[i - 1];
    FENCE(0, win);
  }
  FENCE(MPI_MODE_NOSUCCEED, win);
  for (int i = 0; i < n; i++) y[i] = MUL(u[i + 1], ADD(u[i + 1], CST(1.0)));
  WIN_FREE(&win);
  free(u);
}

/* Derived datatypes: a block of 3 rows by 4 columns per rank, row-major, in
 * a window; columns 0 and 3 are ghosts. Each rank puts its column 1 into
 * the left neighbour's ghost column 3 and its column 2 into the right
 * neighbour's ghost column 0, both as one column type on each side; after an
 * update, it fetches the right neighbour's column 1 into a contiguous buffer
 * and adds two of its values (an indexed origin type) into two contiguous
 * elements of the left neighbour's block. */
static void F(column_prog)(R *x, int n, R *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  MPI_Datatype col, pair;
  MPI_Type_vector(3, 1, 4, RT, &col);
  MPI_Type_commit(&col);
  int bl[2] = {1, 1}, dp[2] = {0, 2};
  MPI_Type_indexed(2, bl, dp, RT, &pair);
  MPI_Type_commit(&pair);
  R *u = calloc(12, sizeof *u), g[3], a[3], nb[12];
  MPI_Win win;
  WIN_CREATE(u, 12 * (MPI_Aint)sizeof(R), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) u[4 * i + j] = MUL(x[i], 0.5 + j);
  FENCE(0, win);
  PUT(u + 1, 1, col, mt_left(), 3, 1, col, win);
  PUT(u + 2, 1, col, mt_right(), 0, 1, col, win);
  FENCE(0, win);
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) nb[4 * i + j] = ADD(u[4 * i + j], MUL(0.25, MUL(u[4 * i + j - 1], u[4 * i + j + 1])));
  for (int i = 0; i < 3; i++)
    for (int j = 1; j < 3; j++) u[4 * i + j] = nb[4 * i + j];
  FENCE(0, win);
  GET(g, 3, RT, mt_right(), 1, 1, col, win);
  for (int i = 0; i < 3; i++) a[i] = SIN(x[i]);
  ACC(a, 1, pair, mt_left(), 6, 2, RT, MPI_SUM, win); /* a[0], a[2] into elements 6 and 7: columns 2 and 3 of row 1 */
  FENCE(MPI_MODE_NOSUCCEED, win);
  for (int i = 0; i < 3; i++) y[i] = ADD(MUL(g[i], u[4 * i + 1]), MUL(u[4 * i + 3], u[4 * i + 2]));
  WIN_FREE(&win);
  free(u);
  MPI_Type_free(&col);
  MPI_Type_free(&pair);
}

#endif /* RMA_PROGS */
