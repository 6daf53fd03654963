/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * implicit_cg: the gradient of a simulation whose time steps solve a linear
 * system with conjugate gradients (CG), computed two ways.
 *
 * The model is 2-D diffusion with a logistic reaction on the unit square,
 * m x m interior points (h = 1/(m+1)), u = 0 on the boundary, and T steps of
 *
 *     (I - dt L_kappa) u_{n+1} = u_n + dt f(u_n),    f(u) = u (1 - u):
 *
 * backward Euler for the diffusion, forward Euler for the reaction. L_kappa
 * is the 5-point form of div(kappa grad u) with a diffusivity kappa_k per
 * point; a face between two points takes the mean of their diffusivities and
 * a face to the boundary the interior point's. So A = I - dt L_kappa is the
 * identity plus (dt/h^2) times a weighted graph Laplacian with positive
 * weights and positive boundary terms: symmetric positive definite for
 * kappa > 0, the matrix CG is made for. The objective is
 *
 *     J = sum_k u_T[k]^2,   and we want dJ/du0 and dJ/dkappa (2 m^2 inputs).
 *
 * (a) Taped CG: every iteration is recorded with ad_* operations. A matrix
 *     row times a vector is one ad_dot (the row's entries depend on kappa,
 *     so they are active too), the inner products are ad_dot, the vector
 *     updates x + alpha p are ad_fma (alpha is active, so this is not an
 *     ad_lincomb with constant weights). The tape grows with the iteration
 *     count, and its gradient is that of the iteration, which tends to the
 *     gradient of the exact solution as the residual goes to zero.
 * (b) External CG: each solve is one ad_external record with inputs
 *     (b, kappa) and output u = A(kappa)^-1 b. Its adjoint is one CG solve
 *     with the transposed matrix, which is A itself: A lambda = ubar, then
 *     bbar += lambda and kappabar -= lambda^T (dA/dkappa) u. Its tangent is
 *     one CG solve too: A udot = bdot - (dA/dkappa . kappadot) u. The tape
 *     holds the inputs and outputs of each solve, not its iterations.
 *
 * Both gradients are checked against each other, by ad_check_gradient
 * against central finite differences of the plain double program, and by a
 * tangent sweep (ad_forward) against the gradient. The program exits non-zero if any check
 * fails. Built with -DARIADNE_PASSIVE it only runs the simulation and
 * compares the values of J.
 *
 * The model, its solvers and the external function live in
 * implicit_cg_model.c (shared with benchmarks/cg.c); this file records,
 * sweeps and checks.
 *
 * Usage: implicit_cg [m T]     (default 12 x 12 points, 10 steps)
 */
#include <ariadne.h>
#include <ariadne_tools.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "implicit_cg_model.h"
#include "example_util.h"

/* The gradients are computed with CG to a relative residual of CG_TOL, which
 * bounds the error of either gradient to about CG_TOL times the condition
 * number of A (a few tens here). The finite differences solve to FD_TOL, far
 * below their own rounding noise, so that a change in the iteration count
 * between the two perturbed runs cannot show in the difference quotient. */
#define CG_TOL 1e-12
#define FD_TOL 1e-15
#define CG_MAX_ITER 2000
static const double DT = 0.02;

static void *xcalloc(size_t count, size_t size) { return example_alloc("implicit_cg", count, size); }

static int parse(const char *s, int lo, int hi, const char *what) {
  return example_parse_int("implicit_cg", s, lo, hi, what);
}

typedef struct run {
  double J;
  long iters;         /* CG iterations of the forward run */
  double *g;          /* dJ/du0 then dJ/dkappa */
  double tangent_err; /* |<g, xdot> - ad_forward's dJ| / |<g, xdot>| */
  long adjoint_iters; /* CG iterations in the external adjoint solves */
  ad_stats st;
} run;

/* Record the simulation (taped or external CG), sweep it, and check the
 * tangent sweep against the gradient. Returns 0 on success. */
static int record_and_sweep(cg_problem *P, cg_ad_work *W, const double *u0, const double *kappa0, int external,
                            run *out) {
  int n = P->n;
  ad_real *x = xcalloc(2 * (size_t)n, sizeof *x), *u = xcalloc((size_t)n, sizeof *u);
  ad_tape *tape = ad_tape_create();
  int rc = tape ? AD_OK : AD_ERR_NOMEM;
  if (tape) {
    ad_tape_begin(tape);
    for (int k = 0; k < 2 * n; k++) x[k] = ad_input(k < n ? u0[k] : kappa0[k - n]);
    memcpy(u, x, (size_t)n * sizeof *u);
    ad_real J = cg_simulate_ad(P, W, x + n, u, external, &out->iters);
    ad_tape_end(tape);
    out->J = ad_value(J);
    if (out->iters < 0) {
      fprintf(stderr, "implicit_cg: CG did not converge in %d iterations\n", CG_MAX_ITER);
      rc = AD_ERR_CALLBACK;
    }
#ifndef ARIADNE_PASSIVE
    P->iterations = 0;
    if (rc == AD_OK) rc = ad_gradient(tape, J, 2 * (size_t)n, x, out->g);
    out->adjoint_iters = P->iterations;
    ad_tape_stats(tape, &out->st);
    /* Tangent check: the directional derivative along xdot from one tangent
     * sweep (through the external function's tangent callback in case b)
     * must equal <g, xdot>. */
    if (rc == AD_OK) {
      double want = 0.0;
      ad_tangents_zero(tape);
      for (int k = 0; k < 2 * n; k++) {
        double xdot = sin(0.91 * k + 0.3);
        ad_tangent_seed(tape, x[k], xdot);
        want += out->g[k] * xdot;
      }
      rc = ad_forward(tape);
      out->tangent_err = fabs(ad_tangent(tape, J) - want) / fabs(want);
    }
    if (rc != AD_OK)
      fprintf(stderr, "implicit_cg: %s CG: %s: %s\n", external ? "external" : "taped", ad_errname(rc),
              ad_tape_error_message(tape));
#endif
  }
  ad_tape_destroy(tape);
  free(x);
  free(u);
  return rc;
}

#ifndef ARIADNE_PASSIVE
/* J of (u0, kappa) for ad_check_gradient: the taped or external variant
 * while the checker records, and the plain double program solved to FD_TOL
 * for its finite differences (it calls with no tape recording). */
typedef struct check_ctx {
  cg_problem *P;
  cg_ad_work *W;
  int external;
  double *xd;
  ad_real *u;
} check_ctx;

static int cg_fn(void *ud, size_t nx, const ad_real *x, size_t m, ad_real *y) {
  check_ctx *c = ud;
  int n = c->P->n;
  (void)m;
  long iters;
  if (!ad_tape_current()) {
    for (size_t k = 0; k < nx; k++) c->xd[k] = ad_value(x[k]);
    y[0] = ad_const(cg_simulate(c->P, c->xd, c->xd + n, FD_TOL, &iters));
    return 0;
  }
  memcpy(c->u, x, (size_t)n * sizeof *c->u);
  y[0] = cg_simulate_ad(c->P, c->W, x + n, c->u, c->external, &iters);
  return iters < 0;
}
#endif

int main(int argc, char **argv) {
  int m = 12, steps = 10;
  if (argc != 1 && argc != 3) {
    fprintf(stderr, "usage: %s [m T]\n", argv[0]);
    return 2;
  }
  if (argc == 3) {
    m = parse(argv[1], 2, 1000, "m");
    steps = parse(argv[2], 1, 100000, "T");
  }
  cg_problem P;
  cg_ad_work W;
  example_need_memory("implicit_cg", cg_problem_init(&P, &W, m, steps, DT, CG_TOL, CG_MAX_ITER) == 0);
  int n = P.n;
  const double *u0 = P.u0, *kappa = P.kappa;

  run runs[2];
  memset(runs, 0, sizeof runs);
  int failures = 0;
  for (int e = 0; e < 2; e++) {
    runs[e].g = xcalloc(2 * (size_t)n, sizeof(double));
    if (record_and_sweep(&P, &W, u0, kappa, e, &runs[e]) != AD_OK) failures++;
  }
  long iters;
  double Jd = cg_simulate(&P, u0, kappa, CG_TOL, &iters);

  printf("implicit diffusion-reaction: %d x %d points, %d backward Euler steps, dt/h^2 = %.3g, CG to %.0e\n\n", P.m,
         P.m, P.steps, P.r, CG_TOL);
  printf("%-12s %22s %14s %14s %12s\n", "variant", "J", "CG iterations", "tape records", "tape KiB");
  printf("%-12s %22.15g %14s %14s %12s\n", "double", Jd, "", "", "");
  for (int e = 0; e < 2; e++) {
    printf("%-12s %22.15g %14ld %14llu %12.1f\n", e ? "external CG" : "taped CG", runs[e].J, runs[e].iters,
           (unsigned long long)runs[e].st.records, runs[e].st.bytes_used / 1024.0);
    /* The three runs do the same arithmetic up to the order of a few sums. */
    if (!(fabs(runs[e].J - Jd) <= 1e-12 * fabs(Jd))) {
      fprintf(stderr, "implicit_cg: J of the %s run (%.17g) differs from the double code (%.17g)\n",
              e ? "external" : "taped", runs[e].J, Jd);
      failures++;
    }
  }

#ifndef ARIADNE_PASSIVE
  /* The two gradients agree to about CG_TOL times the condition number. */
  const double *ga = runs[0].g, *gb = runs[1].g;
  double gmax = 0.0, dmax = 0.0;
  for (int k = 0; k < 2 * n; k++) {
    gmax = fmax(gmax, fabs(ga[k]));
    dmax = fmax(dmax, fabs(ga[k] - gb[k]));
  }
  double agree = dmax / gmax;

  /* ad_check_gradient records each variant again and compares a few entries
   * of each input with central differences of the plain double program (a
   * corner, the centre, a point next to a corner and one on an edge; columns
   * n.. are kappa's), and the tangent sweep with the reverse one. With steps
   * near 1e-4 the truncation error (h^2) and the rounding error (eps J / h)
   * are about equal, and together about 1e-9 of the entries here. */
  size_t pick[8] = {0, (size_t)(n / 2 + P.m / 2), (size_t)P.m + 1, (size_t)n - 2};
  for (int p = 0; p < 4; p++) pick[4 + p] = (size_t)n + pick[p];
  double *xd = xcalloc(2 * (size_t)n, sizeof *xd);
  memcpy(xd, u0, (size_t)n * sizeof *xd);
  memcpy(xd + n, kappa, (size_t)n * sizeof *xd);
  for (int e = 0; e < 2; e++) {
    check_ctx cc = {&P, &W, e, xcalloc(2 * (size_t)n, sizeof(double)), xcalloc((size_t)n, sizeof(ad_real))};
    ad_check_options co;
    example_check_columns(&co, pick, 8, 3e-8, 10.0 * DBL_EPSILON * fabs(Jd) / 1e-4,
                          e ? "(b) external CG" : "(a) taped CG");
    printf("\n");
    if (ad_check_gradient(cg_fn, &cc, 2 * (size_t)n, xd, 1, &co, NULL) != AD_OK) failures++;
    free(cc.xd), free(cc.u);
  }
  free(xd);
  printf("(inputs 0..%d are u0, %d..%d kappa; central differences of the double program, CG to %.0e)\n", n - 1, n,
         2 * n - 1, FD_TOL);
  printf("\nmax |taped - external| / max |g| over all %d entries: %.2e (limit %.0e)\n", 2 * n, agree, 1e3 * CG_TOL);
  if (!(agree <= 1e3 * CG_TOL)) failures++;
  for (int e = 0; e < 2; e++) {
    int ok = runs[e].tangent_err <= 1e-10;
    printf("tangent sweep vs <g, xdot>, %-11s: relative difference %.2e%s\n", e ? "external CG" : "taped CG",
           runs[e].tangent_err, ok ? "" : "  MISMATCH");
    failures += !ok;
  }
  printf("the external solves' adjoints took %ld CG iterations (the forward solves %ld)\n", runs[1].adjoint_iters,
         runs[1].iters);
  printf("tape: taped CG %llu statements, %.1f KiB; external CG %llu statements, %.1f KiB (%.0fx smaller)\n",
         (unsigned long long)runs[0].st.statements, runs[0].st.bytes_used / 1024.0,
         (unsigned long long)runs[1].st.statements, runs[1].st.bytes_used / 1024.0,
         (double)runs[0].st.bytes_used / (double)runs[1].st.bytes_used);
#else
  printf("\n(passive build: no tape, so no gradients to check)\n");
#endif

  for (int e = 0; e < 2; e++) free(runs[e].g);
  cg_problem_free(&P, &W);
  if (failures) {
    fprintf(stderr, "implicit_cg: %d check(s) failed\n", failures);
    return 1;
  }
  printf("implicit_cg: OK\n");
  return 0;
}
