/* SPDX-License-Identifier: BSD-3-Clause */
/* Multi-rank test harness: every rank counts its own failures (each message
 * names its rank), rank 0 reduces them and prints " No Errors" or
 * " Found N errors", and the exit code is non-zero on any failure.
 *
 * The derivative checks are independent of the code under test:
 * - dot-product test: for random rank-dependent directions xdot and weights
 *   ybar, <ybar, J xdot> from the tangent sweep equals <J^T ybar, xdot> from
 *   the reverse sweep, both summed over all ranks;
 * - central finite differences of the whole parallel program, run passive
 *   (no tape) at x +- h xdot, against <J^T ybar, xdot>; an fd_tol <= 0
 *   skips it, for programs too many or too long to run three more times.
 *
 * In a passive build (ARIADNE_PASSIVE) only the counting, the random numbers
 * and the set-up are available: there is nothing to differentiate. */
#ifndef ARIADNE_MTEST_H
#define ARIADNE_MTEST_H

#include <ariadne_mpi.h>
#include <math.h>

/* GCC 12 takes MPICH's sentinels MPI_STATUSES_IGNORE and MPI_UNWEIGHTED (an
 * address of 1, a pointer to an empty object) for arrays too small for what
 * MPI's calls are declared to access, and warns at every legitimate use. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_errors, mt_rank, mt_size;

#define MT_CHECK(cond)                                                                                                 \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      mt_errors++;                                                                                                     \
      fprintf(stderr, "[%d] %s:%d: check failed: %s\n", mt_rank, __FILE__, __LINE__, #cond);                           \
    }                                                                                                                  \
  } while (0)

#define MT_CLOSE(a, b, tol)                                                                                            \
  do {                                                                                                                 \
    double mt_a = (a), mt_b = (b);                                                                                     \
    if (!(fabs(mt_a - mt_b) <= (tol) * (1.0 + fabs(mt_a) + fabs(mt_b)))) {                                             \
      mt_errors++;                                                                                                     \
      fprintf(stderr, "[%d] %s:%d: %s = %.17g vs %s = %.17g\n", mt_rank, __FILE__, __LINE__, #a, mt_a, #b, mt_b);      \
    }                                                                                                                  \
  } while (0)

static inline void mt_init(int *argc, char ***argv) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static inline int mt_finalize(void) {
  int total = 0;
  MPI_Reduce(&mt_errors, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (mt_rank == 0) {
    if (total == 0)
      printf(" No Errors\n");
    else
      printf(" Found %d errors\n", total);
  }
  MPI_Finalize();
  return total != 0;
}

/* The neighbours of this rank on the ring of all ranks. */
static inline int mt_right(void) { return (mt_rank + 1) % mt_size; }
static inline int mt_left(void) { return (mt_rank + mt_size - 1) % mt_size; }

/* A deterministic rank-dependent value in [-1, 1]. */
static inline double mt_rand(unsigned long long *s) {
  unsigned long long z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* The same parallel program on ad_real through the wrappers and on double
 * through plain MPI: n inputs and n outputs on this rank. */
typedef void (*mt_ad_prog)(ad_real *x, int n, ad_real *y, int m, void *ctx);
typedef void (*mt_plain_prog)(double *x, int n, double *y, int m, void *ctx);
#define MT_VALUES_MAX 16

/* The program's values through the wrappers, not recorded and recorded,
 * against the plain program's (n <= MT_VALUES_MAX). Sums from several ranks
 * may be applied in any order, hence the rounding tolerance. */
static inline void mt_values(const char *name, mt_ad_prog fa, mt_plain_prog fp, void *ctx, int n) {
  int before = mt_errors;
  unsigned long long seed = 4242ull + 7919ull * (unsigned long long)mt_rank;
  double x0[MT_VALUES_MAX], yp[MT_VALUES_MAX];
  ad_real x[MT_VALUES_MAX], y[MT_VALUES_MAX];
  for (int i = 0; i < n; i++) {
    x0[i] = 0.5 + 0.4 * mt_rand(&seed) + 0.1 * mt_rank;
    x[i] = ad_const(x0[i]);
  }
  fp(x0, n, yp, n, ctx);
  fa(x, n, y, n, ctx);
  for (int i = 0; i < n; i++) MT_CLOSE(ad_value(y[i]), yp[i], 1e-14);
#ifndef ARIADNE_PASSIVE
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  for (int i = 0; i < n; i++) x[i] = ad_input(x0[i]);
  fa(x, n, y, n, ctx);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  if (ad_tape_error(t) != AD_OK) fprintf(stderr, "[%d] %s\n", mt_rank, ad_tape_error_message(t));
  for (int i = 0; i < n; i++) MT_CLOSE(ad_value(y[i]), yp[i], 1e-14);
  ad_tape_destroy(t);
#endif
  if (mt_errors > before) fprintf(stderr, "[%d] values of %s: FAILED\n", mt_rank, name);
}

#ifndef ARIADNE_PASSIVE

/* A parallel program under test: n inputs and m outputs on this rank. */
typedef mt_ad_prog mt_prog;

static double mt_weighted(mt_prog f, const double *x0, const double *xdot, double h, int n, const double *ybar, int m,
                          void *ctx) {
  ad_real *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)m + 1, sizeof *y);
  for (int i = 0; i < n; i++) x[i] = ad_const(x0[i] + h * xdot[i]);
  f(x, n, y, m, ctx);
  double s = 0.0, total = 0.0;
  for (int i = 0; i < m; i++) s += ybar[i] * ad_value(y[i]);
  MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(x);
  free(y);
  return total;
}

/* Record f, run the dot-product test and the finite-difference test.
 * Returns the number of failures on this rank. */
static inline int mt_check_prog(const char *name, mt_prog f, int n, int m, void *ctx, double fd_tol) {
  int before = mt_errors;
  unsigned long long seed = 1234567ull + 7919ull * (unsigned long long)mt_rank;
  double *x0 = malloc(sizeof(double) * (size_t)(n + 1)), *xdot = malloc(sizeof(double) * (size_t)(n + 1));
  double *ybar = malloc(sizeof(double) * (size_t)(m + 1)), *xbar = malloc(sizeof(double) * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    x0[i] = 0.5 + 0.4 * mt_rand(&seed) + 0.1 * mt_rank;
    xdot[i] = mt_rand(&seed);
  }
  for (int i = 0; i < m; i++) ybar[i] = mt_rand(&seed);

  ad_tape *t = ad_tape_create();
  ad_real *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)m + 1, sizeof *y);
  ad_tape_begin(t);
  for (int i = 0; i < n; i++) x[i] = ad_input(x0[i]);
  f(x, n, y, m, ctx);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);

  /* tangent */
  ad_tangents_zero(t);
  for (int i = 0; i < n; i++) ad_tangent_seed(t, x[i], xdot[i]);
  int rc = ad_forward(t);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: ad_forward: %s\n", mt_rank, name, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  double ty = 0.0, tyall = 0.0;
  for (int i = 0; i < m; i++) ty += ybar[i] * ad_tangent(t, y[i]);
  MPI_Allreduce(&ty, &tyall, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

  /* reverse */
  ad_adjoints_zero(t);
  for (int i = 0; i < m; i++)
    if (y[i].i) ad_seed(t, y[i], ybar[i]);
  rc = ad_reverse(t);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: ad_reverse: %s\n", mt_rank, name, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  double rx = 0.0, rxall = 0.0;
  for (int i = 0; i < n; i++) {
    xbar[i] = ad_adjoint(t, x[i]);
    rx += xbar[i] * xdot[i];
  }
  MPI_Allreduce(&rx, &rxall, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CLOSE(tyall, rxall, 1e-12);

  /* finite differences of the whole parallel program, run passive */
  if (fd_tol > 0) {
    double h = 1e-6;
    double fp = mt_weighted(f, x0, xdot, h, n, ybar, m, ctx), fm = mt_weighted(f, x0, xdot, -h, n, ybar, m, ctx);
    double fd = (fp - fm) / (2 * h);
    MT_CLOSE(fd, rxall, fd_tol);
  }
  /* A program whose derivative is identically zero proves nothing. */
  MT_CHECK(fabs(rxall) > 1e-8);

  ad_tape_destroy(t);
  free(x);
  free(y);
  free(x0);
  free(xdot);
  free(ybar);
  free(xbar);
  if (mt_errors > before) fprintf(stderr, "[%d] %s: FAILED\n", mt_rank, name);
  return mt_errors - before;
}

/* The dot-product test on a tape that is already recorded: x (n inputs) and
 * y (m outputs) on this rank, directions and weights drawn from `seed` and
 * the rank. Runs one tangent and one reverse sweep (collective), stores
 * <ybar, J xdot> and <J^T ybar, xdot> summed over all ranks, and returns the
 * first sweep error (AD_OK if none). Passive outputs are not seeded. */
static inline int mt_dot_test(ad_tape *t, const ad_real *x, int n, const ad_real *y, int m, unsigned long long seed,
                              double *tangent_side, double *adjoint_side) {
  unsigned long long s = seed + 7919ull * (unsigned long long)mt_rank;
  double *xdot = malloc(sizeof(double) * (size_t)(n + 1)), *ybar = malloc(sizeof(double) * (size_t)(m + 1));
  for (int i = 0; i < n; i++) xdot[i] = mt_rand(&s);
  for (int i = 0; i < m; i++) ybar[i] = mt_rand(&s);
  ad_tangents_zero(t);
  for (int i = 0; i < n; i++) ad_tangent_seed(t, x[i], xdot[i]);
  int rc = ad_forward(t), rc2;
  double a = 0.0, b = 0.0;
  for (int i = 0; i < m; i++) a += ybar[i] * ad_tangent(t, y[i]);
  ad_adjoints_zero(t);
  for (int i = 0; i < m; i++)
    if (y[i].i) ad_seed(t, y[i], ybar[i]);
  rc2 = ad_reverse(t);
  for (int i = 0; i < n; i++) b += xdot[i] * ad_adjoint(t, x[i]);
  MPI_Allreduce(&a, tangent_side, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&b, adjoint_side, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(xdot);
  free(ybar);
  return rc != AD_OK ? rc : rc2;
}

/* The bytes f moves on the wire on this rank, {forward, adjoint, tangent}:
 * f is recorded at x[i] = x0 + 0.1 i + rank_step * rank (n inputs, n
 * outputs, n <= MT_VALUES_MAX), then swept once in reverse with every
 * output's adjoint 1 and once forward with every input's tangent 1; each
 * sweep must succeed. Collective. */
static inline void mt_sweep_bytes(mt_prog f, int n, void *ctx, double x0, double rank_step, uint64_t bytes[3]) {
  ad_mpi_stats st;
  ad_tape *t = ad_tape_create();
  ad_real x[MT_VALUES_MAX], y[MT_VALUES_MAX];
  ad_mpi_stats_reset();
  ad_tape_begin(t);
  for (int i = 0; i < n; i++) x[i] = ad_input(x0 + 0.1 * i + rank_step * mt_rank);
  f(x, n, y, n, ctx);
  ad_tape_end(t);
  for (int i = 0; i < n; i++) ad_seed(t, y[i], 1.0);
  MT_CHECK(ad_reverse(t) == AD_OK);
  for (int i = 0; i < n; i++) ad_tangent_seed(t, x[i], 1.0);
  MT_CHECK(ad_forward(t) == AD_OK);
  ad_mpi_stats_get(&st);
  bytes[0] = st.forward_bytes;
  bytes[1] = st.adjoint_bytes;
  bytes[2] = st.tangent_bytes;
  ad_tape_destroy(t);
}

/* A communicator of its own for one scenario of a test: a duplicate of
 * MPI_COMM_WORLD that returns errors, prepared for the MPI layer. With
 * ARIADNE_TEST_VERBOSE set, rank 0 names the scenario as it begins. */
static inline MPI_Comm mt_scenario_comm(const char *name) {
  MPI_Comm c;
  if (mt_rank == 0 && getenv("ARIADNE_TEST_VERBOSE")) fprintf(stderr, "scenario %s\n", name);
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MT_CHECK(ad_mpi_comm_prepare(c) == MPI_SUCCESS);
  return c;
}

#endif /* ARIADNE_PASSIVE */

/* Attaches a buffer of `bytes` for MPI_Bsend and the other buffered sends,
 * or with 0 detaches and frees it. */
static inline void mt_bsend_buffer(int bytes) {
  static void *buf;
  int size = bytes;
  if (bytes) {
    buf = malloc((size_t)size);
    MPI_Buffer_attach(buf, size);
  } else {
    MPI_Buffer_detach(&buf, &size);
    free(buf);
  }
}

/* A directory every rank's files share: rank 0 made it (made: whether it
 * could) in dir, a buffer of size bytes. Rank 0's name and verdict go to
 * every rank; a failure counts. Returns whether the directory is there.
 * Collective. */
static inline int mt_share_dir(char *dir, int size, int made) {
  MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(dir, size, MPI_CHAR, 0, MPI_COMM_WORLD);
  MT_CHECK(made);
  return made;
}

/* 1 if an error message carries this rank's prefix, "[rank] ariadne: ". */
static inline int mt_has_rank_prefix(const char *msg) {
  char p[48];
  snprintf(p, sizeof p, "[%d] ariadne: ", mt_rank);
  return msg && strncmp(msg, p, strlen(p)) == 0;
}

#endif
