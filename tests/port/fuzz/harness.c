/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The gradient check of one generated program (gen.c), linked with the
 * original objectives (fz_fK), their port (fz_fK_ad) and fused port (fz_fK_fd): both
 * ports compute the original's value bit for bit; the port's gradient
 * matches central differences of the original (the best of several steps,
 * since a kink or a branch may sit within the largest ones); the tangent
 * sweep agrees with the gradient (dot-product test) on both tapes; and the
 * fused gradient equals the port's to round-off. Prints one line per
 * disagreement, starting with its class, and exits 1 if there was any.
 *
 * With FZ_MPI the objective is collective and replicated: every rank holds
 * all inputs, one copy of the result is seeded, the total derivative is the
 * sum of the ranks' gradients, and central differences move an input on
 * every rank at once. Each rank checks what it holds; the exit status is the
 * same on all ranks.
 */
#ifdef FZ_MPI
#include <ariadne_mpi.h>
#else
#include <ariadne.h>
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int fz_n;
extern double fz_x0[];
/* The objectives of one program (gen.c's FZ_BATCH), the originals and both ports. */
#define FZ_DECLARE(k)                                                                                                  \
  double fz_f##k(const double *x, int n);                                                                              \
  ad_real fz_f##k##_ad(const ad_real *x, int n);                                                                       \
  ad_real fz_f##k##_fd(const ad_real *x, int n);
FZ_DECLARE(0)
FZ_DECLARE(1)
FZ_DECLARE(2)
FZ_DECLARE(3)
typedef double objective(const double *, int);
typedef ad_real port_objective(const ad_real *, int);
static objective *const originals[] = {fz_f0, fz_f1, fz_f2, fz_f3};
static port_objective *const ports[][2] = {
    {fz_f0_ad, fz_f0_fd}, {fz_f1_ad, fz_f1_fd}, {fz_f2_ad, fz_f2_fd}, {fz_f3_ad, fz_f3_fd}};

#define MAXN 16

static int failures;

static void fail(const char *cls, const char *f, ...) __attribute__((format(printf, 2, 3)));
static int rank, current; /* the objective being checked */

static void fail(const char *cls, const char *f, ...) {
  va_list ap;
  printf("FAIL %s: [%d] fz_f%d: ", cls, rank, current);
  va_start(ap, f);
  vprintf(f, ap);
  va_end(ap);
  printf("\n");
  failures++;
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The sum over ranks (the identity on one process). */
static void sum_ranks(double *v, int n) {
#ifdef FZ_MPI
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
  (void)v, (void)n;
#endif
}

static void check(objective *fz_f, port_objective *const port[2], ad_tape *const tape[2]) {
  int n = fz_n;
  double x[MAXN], g[2][MAXN], v[MAXN];
  ad_real xa[2][MAXN], y[2];
  for (int i = 0; i < n; i++) x[i] = fz_x0[i];
  const double J = fz_f(x, n);
  if (!isfinite(J)) fail("primal", "f(x0) = %a is not finite", J);

  const char *name[2] = {"port", "fused port"};
  for (int p = 0; p < 2; p++) {
    ad_tape_reset(tape[p]);
    ad_tape_begin(tape[p]);
    for (int i = 0; i < n; i++) xa[p][i] = ad_input(fz_x0[i]);
    y[p] = port[p](xa[p], n);
    ad_tape_end(tape[p]);
    if (!same_bits(ad_value(y[p]), J)) fail("value", "%s gives %a, the original %a", name[p], ad_value(y[p]), J);
    /* A replicated result is seeded once. */
    int rc = ad_gradient(tape[p], rank == 0 ? y[p] : ad_const(ad_value(y[p])), (size_t)n, xa[p], g[p]);
    if (rc != AD_OK && rc != AD_ERR_PASSIVE) fail("sweep", "%s: ad_gradient: %s", name[p], ad_strerror(rc));
    sum_ranks(g[p], n);
  }

  /* Dot-product test: the tangent along v is the gradient times v. */
  for (int i = 0; i < n; i++) v[i] = 0.3 + 0.17 * i - 0.05 * i * i;
  for (int p = 0; p < 2; p++) {
    double dot = 0.0, scale = 0.0;
    for (int i = 0; i < n; i++) dot += g[p][i] * v[i], scale += fabs(g[p][i] * v[i]);
    ad_tangents_zero(tape[p]);
    for (int i = 0; i < n; i++) ad_tangent_seed(tape[p], xa[p][i], v[i]);
    int rc = ad_forward(tape[p]);
    double t = ad_tangent(tape[p], y[p]);
    /* Every rank's inputs move along v: the replicated result's tangent is the summed gradient times v. */
    if (rc != AD_OK) fail("tangent", "%s: ad_forward: %s", name[p], ad_strerror(rc));
    else if (!(fabs(t - dot) <= 1e-10 * (1.0 + scale)))
      fail("tangent", "%s: tangent %.17g, gradient . v %.17g", name[p], t, dot);
  }

  double gmax = 0.0;
  for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[0][i]));
  for (int i = 0; i < n; i++) {
    /* Central differences at several steps; the best one counts. They
     * judge the gradient only where they settle: two neighbouring steps
     * agree. A program whose value is too sensitive there (a derivative of
     * 1e10 through a long chain, values that jump at every step) is noted,
     * and the tangent and fused checks above and below still hold it. */
    double best = INFINITY, best_fd = 0.0, prev = NAN;
    int settled = 0;
    for (double h = 1e-3; h > 1e-8; h /= 10.0) {
      double hi = h * fmax(1.0, fabs(fz_x0[i]));
      for (int k = 0; k < n; k++) x[k] = fz_x0[k];
      x[i] = fz_x0[i] + hi;
      double fp = fz_f(x, n);
      x[i] = fz_x0[i] - hi;
      double fm = fz_f(x, n);
      double fd = (fp - fm) / (2.0 * hi);
      if (fabs(fd - prev) <= 1e-4 * (1.0 + fabs(fd))) settled = 1;
      prev = fd;
      if (fabs(fd - g[0][i]) < best) best = fabs(fd - g[0][i]), best_fd = fd;
    }
    if (!(best <= 1e-6 * (1.0 + fabs(g[0][i])) + 1e-9 * gmax)) {
      if (settled)
        fail("gradient", "input %d: port %.17g, central differences %.17g", i, g[0][i], best_fd);
      else
        printf("note: [%d] fz_f%d: input %d: central differences do not settle at any step (port %.17g): not judged\n",
               rank, current, i, g[0][i]);
    }
    if (!(fabs(g[1][i] - g[0][i]) <= 1e-11 * (1.0 + fabs(g[0][i]) + gmax)))
      fail("fused", "input %d: fused port %.17g, port %.17g", i, g[1][i], g[0][i]);
  }
}

int main(int argc, char **argv) {
#ifdef FZ_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#else
  (void)argc, (void)argv;
#endif
  if (fz_n > MAXN) return 2;
  ad_tape *tape[2] = {ad_tape_create(), ad_tape_create()};
  for (current = 0; current < (int)(sizeof originals / sizeof *originals); current++)
    check(originals[current], ports[current], tape);
  ad_tape_destroy(tape[0]);
  ad_tape_destroy(tape[1]);
#ifdef FZ_MPI
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
#endif
  return failures ? 1 : 0;
}
