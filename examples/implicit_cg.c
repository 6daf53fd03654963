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
 * Usage: implicit_cg [m T]     (default 12 x 12 points, 10 steps)
 */
#include <ariadne.h>
#include <ariadne_tools.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gradients are computed with CG to a relative residual of CG_TOL, which
 * bounds the error of either gradient to about CG_TOL times the condition
 * number of A (a few tens here). The finite differences solve to FD_TOL, far
 * below their own rounding noise, so that a change in the iteration count
 * between the two perturbed runs cannot show in the difference quotient. */
#define CG_TOL 1e-12
#define FD_TOL 1e-15
#define CG_MAX_ITER 2000
static const double DT = 0.02;

/* Neighbour directions of a grid point: north, south, west, east. */
enum { NORTH, SOUTH, WEST, EAST };

typedef struct problem {
  int m, n, steps; /* points per side, unknowns (m*m), time steps */
  double r;        /* dt / h^2 */
  /* Work arrays of the double solver, used by the primal and the callbacks. */
  double *diag, *off;          /* matrix: diagonal, 4 off-diagonals per row */
  double *res, *dir, *prod;    /* CG residual, direction, A*direction */
  double *lam, *rhs;           /* adjoint or tangent solve */
  double *kv, *sol;            /* kappa and the solution in the primal external solve */
  long iterations;             /* CG iterations in the callbacks, summed */
} problem;

/* The neighbour of point k in direction d, or -1 on the boundary. */
static int neighbour(const problem *P, int k, int d) {
  int i = k / P->m, j = k % P->m;
  switch (d) {
  case NORTH: return i > 0 ? k - P->m : -1;
  case SOUTH: return i < P->m - 1 ? k + P->m : -1;
  case WEST: return j > 0 ? k - 1 : -1;
  default: return j < P->m - 1 ? k + 1 : -1;
  }
}

static void initial(const problem *P, double *u0, double *kappa) {
  for (int k = 0; k < P->n; k++) {
    int i = k / P->m, j = k % P->m;
    u0[k] = 0.5 + 0.4 * sin(0.37 * k);
    kappa[k] = 1.0 + 0.5 * sin(1.3 * i + 0.4) * cos(0.7 * j);
  }
}

/* ------------------------------------------------------------------------ */
/* The plain double program: the primal of the external solve, the adjoint  */
/* and tangent solves, and the finite differences.                          */
/* ------------------------------------------------------------------------ */

/* A(kappa): off[4k+d] = -r kf for an interior face, 0 for a boundary face;
 * diag[k] = 1 + r * (sum of the point's face diffusivities). */
static void assemble(const problem *P, const double *kappa, double *diag, double *off) {
  for (int k = 0; k < P->n; k++) {
    double kf[4], sum = 0.0;
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      kf[d] = nb >= 0 ? 0.5 * (kappa[k] + kappa[nb]) : kappa[k];
      off[4 * k + d] = nb >= 0 ? -P->r * kf[d] : 0.0;
      sum += kf[d];
    }
    diag[k] = 1.0 + P->r * sum;
  }
}

static void matvec(const problem *P, const double *diag, const double *off, const double *p, double *q) {
  for (int k = 0; k < P->n; k++) {
    double s = diag[k] * p[k];
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      if (nb >= 0) s += off[4 * k + d] * p[nb];
    }
    q[k] = s;
  }
}

static double dot(int n, const double *a, const double *b) {
  double s = 0.0;
  for (int k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}

/* Solve A x = b from the initial guess in x until ||r|| <= tol ||b||.
 * Returns the iteration count, or -1 if CG_MAX_ITER was not enough. */
static int cg(problem *P, const double *b, double *x, double tol) {
  int n = P->n;
  double *r = P->res, *p = P->dir, *q = P->prod;
  matvec(P, P->diag, P->off, x, q);
  for (int k = 0; k < n; k++) p[k] = r[k] = b[k] - q[k];
  double rr = dot(n, r, r), stop = tol * tol * dot(n, b, b);
  int it = 0;
  for (; rr > stop; it++) {
    if (it == CG_MAX_ITER) return -1;
    matvec(P, P->diag, P->off, p, q);
    double alpha = rr / dot(n, p, q);
    for (int k = 0; k < n; k++) {
      x[k] = fma(alpha, p[k], x[k]);
      r[k] = fma(-alpha, q[k], r[k]);
    }
    double rr1 = dot(n, r, r), beta = rr1 / rr;
    for (int k = 0; k < n; k++) p[k] = fma(beta, p[k], r[k]);
    rr = rr1;
  }
  return it;
}

/* J(u0, kappa) in plain double, each solve to `tol`; NAN if CG fails. */
static double simulate(problem *P, const double *u0, const double *kappa, double tol) {
  int n = P->n;
  double *u = malloc((size_t)n * sizeof *u), *b = malloc((size_t)n * sizeof *b), J = NAN;
  if (!u || !b) goto done;
  memcpy(u, u0, (size_t)n * sizeof *u);
  assemble(P, kappa, P->diag, P->off);
  for (int s = 0; s < P->steps; s++) {
    for (int k = 0; k < n; k++) b[k] = u[k] + DT * (u[k] * (1.0 - u[k]));
    if (cg(P, b, u, tol) < 0) goto done; /* warm start from u_n */
  }
  J = dot(n, u, u);
done:
  free(u);
  free(b);
  return J;
}

/* ------------------------------------------------------------------------ */
/* (a) The port: CG on ad_real, every iteration taped.                      */
/* ------------------------------------------------------------------------ */

typedef struct ad_work {
  ad_real *diag, *off;   /* the matrix, active because it depends on kappa */
  ad_real *b, *r, *p, *q;
  ad_real *in;           /* (b, kappa): the inputs of an external solve */
} ad_work;

static void assemble_ad(const problem *P, const ad_real *kappa, ad_real *diag, ad_real *off) {
  for (int k = 0; k < P->n; k++) {
    ad_real kf[4];
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      kf[d] = nb >= 0 ? ad_mul(0.5, ad_add(kappa[k], kappa[nb])) : kappa[k];
      off[4 * k + d] = nb >= 0 ? ad_mul(-P->r, kf[d]) : ad_const(0.0);
    }
    diag[k] = ad_add(1.0, ad_mul(P->r, ad_sum(4, kf)));
  }
}

/* q = A p, each row one statement: the row's entries dotted with the
 * entries of p they multiply. */
static void matvec_ad(const problem *P, const ad_real *diag, const ad_real *off, const ad_real *p, ad_real *q) {
  for (int k = 0; k < P->n; k++) {
    ad_real a[5], x[5];
    int c = 0;
    a[c] = diag[k];
    x[c++] = p[k];
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      if (nb < 0) continue;
      a[c] = off[4 * k + d];
      x[c++] = p[nb];
    }
    q[k] = ad_dot((size_t)c, a, x);
  }
}

/* The same CG as cg() above, on active values. */
static int cg_ad(const problem *P, ad_work *W, const ad_real *b, ad_real *x, double tol) {
  int n = P->n;
  ad_real *r = W->r, *p = W->p, *q = W->q;
  matvec_ad(P, W->diag, W->off, x, q);
  for (int k = 0; k < n; k++) p[k] = r[k] = ad_sub(b[k], q[k]);
  ad_real rr = ad_dot((size_t)n, r, r);
  double bb = 0.0;
  for (int k = 0; k < n; k++) bb += ad_value(b[k]) * ad_value(b[k]);
  double stop = tol * tol * bb; /* from values only: the test records nothing */
  int it = 0;
  for (; ad_gt(rr, stop); it++) {
    if (it == CG_MAX_ITER) return -1;
    matvec_ad(P, W->diag, W->off, p, q);
    ad_real alpha = ad_div(rr, ad_dot((size_t)n, p, q)), nalpha = ad_neg(alpha);
    for (int k = 0; k < n; k++) {
      x[k] = ad_fma(alpha, p[k], x[k]);
      r[k] = ad_fma(nalpha, q[k], r[k]);
    }
    ad_real rr1 = ad_dot((size_t)n, r, r), beta = ad_div(rr1, rr);
    for (int k = 0; k < n; k++) p[k] = ad_fma(beta, p[k], r[k]);
    rr = rr1;
  }
  return it;
}

/* ------------------------------------------------------------------------ */
/* (b) The solve as an external function.                                   */
/* ------------------------------------------------------------------------ */

/* Adjoint: inputs x = (b, kappa), output y = u = A(kappa)^-1 b. With
 * A lambda = ybar (A^T = A): bbar = lambda, and for each face with
 * diffusivity kf, kfbar = -lambda^T (dA/dkf) u, where dA/dkf contributes
 * r (lambda_k - lambda_nb)(u_k - u_nb) for an interior face and
 * r lambda_k u_k for a boundary face. An interior face's kf is the mean of
 * two kappas, and each end of it visits it once, so each end takes half. */
static int solve_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                         const double *ybar) {
  problem *P = ud;
  int n = P->n;
  if (nin != 2 * (size_t)n || nout != (size_t)n) return 1;
  const double *kappa = x + n;
  assemble(P, kappa, P->diag, P->off);
  memset(P->lam, 0, (size_t)n * sizeof *P->lam);
  int it = cg(P, ybar, P->lam, CG_TOL);
  if (it < 0) return 2;
  P->iterations += it;
  const double *lam = P->lam;
  for (int k = 0; k < n; k++) {
    xbar[k] += lam[k];
    double kb = 0.0;
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      if (nb >= 0)
        kb -= 0.5 * P->r * (lam[k] - lam[nb]) * (y[k] - y[nb]);
      else
        kb -= P->r * lam[k] * y[k];
    }
    xbar[n + k] += kb;
  }
  return 0;
}

/* Tangent: differentiate A u = b: A udot = bdot - (dA/dkappa . kappadot) u,
 * where the bracket is the same operator with face diffusivities kfdot. */
static int solve_forward(void *ud, size_t nin, const double *x, const double *xdot, size_t nout, const double *y,
                         double *ydot) {
  problem *P = ud;
  int n = P->n;
  if (nin != 2 * (size_t)n || nout != (size_t)n) return 1;
  const double *kappa = x + n, *bdot = xdot, *kdot = xdot + n;
  assemble(P, kappa, P->diag, P->off);
  for (int k = 0; k < n; k++) {
    double s = 0.0;
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      if (nb >= 0)
        s += 0.5 * (kdot[k] + kdot[nb]) * (y[k] - y[nb]);
      else
        s += kdot[k] * y[k];
    }
    P->rhs[k] = bdot[k] - P->r * s;
    ydot[k] = 0.0;
  }
  int it = cg(P, P->rhs, ydot, CG_TOL);
  if (it < 0) return 2;
  P->iterations += it;
  return 0;
}

static const ad_external_ops solve_ops = {solve_reverse, solve_forward, NULL, "CG solve"};

/* u <- A(kappa)^-1 b: solved passively (warm start from u), then recorded as
 * one external function. Returns the iteration count, or -1. */
static int solve_external(problem *P, ad_work *W, const ad_real *b, const ad_real *kappa, ad_real *u) {
  int n = P->n;
  double *bv = P->rhs, *x = P->sol, *kv = P->kv;
  for (int k = 0; k < n; k++) kv[k] = ad_value(kappa[k]);
  assemble(P, kv, P->diag, P->off);
  for (int k = 0; k < n; k++) {
    bv[k] = ad_value(b[k]);
    x[k] = ad_value(u[k]);
  }
  int it = cg(P, bv, x, CG_TOL);
  if (it < 0) return -1;
  for (int k = 0; k < n; k++) {
    W->in[k] = b[k];
    W->in[n + k] = kappa[k];
    u[k] = ad_const(x[k]);
  }
  if (ad_external(&solve_ops, P, 2 * (size_t)n, W->in, (size_t)n, u) != AD_OK) return -1;
  return it;
}

/* ------------------------------------------------------------------------ */
/* The simulation, either way                                               */
/* ------------------------------------------------------------------------ */

/* Runs the T steps from u (overwritten with u_T) and returns J; *iters gets
 * the CG iterations of the forward run, -1 if a solve failed. */
static ad_real simulate_ad(problem *P, ad_work *W, const ad_real *kappa, ad_real *u, int external, long *iters) {
  int n = P->n;
  *iters = 0;
  if (!external) assemble_ad(P, kappa, W->diag, W->off); /* once: the matrix does not change */
  for (int s = 0; s < P->steps; s++) {
    for (int k = 0; k < n; k++) W->b[k] = ad_add(u[k], ad_mul(DT, ad_mul(u[k], ad_sub(1.0, u[k]))));
    int it = external ? solve_external(P, W, W->b, kappa, u) : cg_ad(P, W, W->b, u, CG_TOL);
    if (it < 0) {
      *iters = -1;
      break;
    }
    *iters += it;
  }
  return ad_dot((size_t)n, u, u);
}

/* ------------------------------------------------------------------------ */

static void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count, size);
  if (!p) {
    fprintf(stderr, "implicit_cg: out of memory\n");
    exit(1);
  }
  return p;
}

static int parse(const char *s, int lo, int hi, const char *what) {
  char *end;
  long x = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || x < lo || x > hi) {
    fprintf(stderr, "implicit_cg: %s must be an integer in [%d, %d], got '%s'\n", what, lo, hi, s);
    exit(2);
  }
  return (int)x;
}

typedef struct run {
  double J;
  long iters;          /* CG iterations of the forward run */
  double *g;           /* dJ/du0 then dJ/dkappa */
  double tangent_err;  /* |<g, xdot> - ad_forward's dJ| / |<g, xdot>| */
  long adjoint_iters;  /* CG iterations in the external adjoint solves */
  ad_stats st;
} run;

/* Record the simulation (taped or external CG), sweep it, and check the
 * tangent sweep against the gradient. Returns 0 on success. */
static int record_and_sweep(problem *P, ad_work *W, const double *u0, const double *kappa0, int external,
                            run *out) {
  int n = P->n;
  ad_real *x = xcalloc(2 * (size_t)n, sizeof *x), *u = xcalloc((size_t)n, sizeof *u);
  ad_tape *tape = ad_tape_create();
  int rc = tape ? AD_OK : AD_ERR_NOMEM;
  if (tape) {
    ad_tape_begin(tape);
    for (int k = 0; k < 2 * n; k++) x[k] = ad_input(k < n ? u0[k] : kappa0[k - n]);
    memcpy(u, x, (size_t)n * sizeof *u);
    ad_real J = simulate_ad(P, W, x + n, u, external, &out->iters);
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
  problem *P;
  ad_work *W;
  int external;
  double *xd;
  ad_real *u;
} check_ctx;

static int cg_fn(void *ud, size_t nx, const ad_real *x, size_t m, ad_real *y) {
  check_ctx *c = ud;
  int n = c->P->n;
  (void)m;
  if (!ad_tape_current()) {
    for (size_t k = 0; k < nx; k++) c->xd[k] = ad_value(x[k]);
    y[0] = ad_const(simulate(c->P, c->xd, c->xd + n, FD_TOL));
    return 0;
  }
  long iters;
  memcpy(c->u, x, (size_t)n * sizeof *c->u);
  y[0] = simulate_ad(c->P, c->W, x + n, c->u, c->external, &iters);
  return iters < 0;
}
#endif

int main(int argc, char **argv) {
  problem P;
  memset(&P, 0, sizeof P);
  P.m = 12;
  P.steps = 10;
  if (argc != 1 && argc != 3) {
    fprintf(stderr, "usage: %s [m T]\n", argv[0]);
    return 2;
  }
  if (argc == 3) {
    P.m = parse(argv[1], 2, 1000, "m");
    P.steps = parse(argv[2], 1, 100000, "T");
  }
  int n = P.n = P.m * P.m;
  double h = 1.0 / (P.m + 1);
  P.r = DT / (h * h);
  P.diag = xcalloc((size_t)n, sizeof(double));
  P.off = xcalloc(4 * (size_t)n, sizeof(double));
  P.res = xcalloc((size_t)n, sizeof(double));
  P.dir = xcalloc((size_t)n, sizeof(double));
  P.prod = xcalloc((size_t)n, sizeof(double));
  P.lam = xcalloc((size_t)n, sizeof(double));
  P.rhs = xcalloc((size_t)n, sizeof(double));
  P.kv = xcalloc((size_t)n, sizeof(double));
  P.sol = xcalloc((size_t)n, sizeof(double));
  ad_work W;
  W.diag = xcalloc((size_t)n, sizeof(ad_real));
  W.off = xcalloc(4 * (size_t)n, sizeof(ad_real));
  W.b = xcalloc((size_t)n, sizeof(ad_real));
  W.r = xcalloc((size_t)n, sizeof(ad_real));
  W.p = xcalloc((size_t)n, sizeof(ad_real));
  W.q = xcalloc((size_t)n, sizeof(ad_real));
  W.in = xcalloc(2 * (size_t)n, sizeof(ad_real));
  double *u0 = xcalloc((size_t)n, sizeof *u0), *kappa = xcalloc((size_t)n, sizeof *kappa);
  initial(&P, u0, kappa);

  run runs[2];
  memset(runs, 0, sizeof runs);
  int failures = 0;
  for (int e = 0; e < 2; e++) {
    runs[e].g = xcalloc(2 * (size_t)n, sizeof(double));
    if (record_and_sweep(&P, &W, u0, kappa, e, &runs[e]) != AD_OK) failures++;
  }
  double Jd = simulate(&P, u0, kappa, CG_TOL);

  printf("implicit diffusion-reaction: %d x %d points, %d backward Euler steps, dt/h^2 = %.3g, CG to %.0e\n\n",
         P.m, P.m, P.steps, P.r, CG_TOL);
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
    ad_check_options_default(&co);
    co.columns = pick;
    co.ncolumns = 8;
    co.steps[0] = 1e-3, co.steps[1] = 1e-4, co.steps[2] = 1e-5;
    co.rtol = 3e-8;
    co.atol = 10.0 * DBL_EPSILON * fabs(Jd) / 1e-4;
    co.print = 2;
    co.table_rows = 8;
    co.title = e ? "(b) external CG" : "(a) taped CG";
    printf("\n");
    if (ad_check_gradient(cg_fn, &cc, 2 * (size_t)n, xd, 1, &co, NULL) != AD_OK) failures++;
    free(cc.xd), free(cc.u);
  }
  free(xd);
  printf("(inputs 0..%d are u0, %d..%d kappa; central differences of the double program, CG to %.0e)\n", n - 1, n,
         2 * n - 1, FD_TOL);
  printf("\nmax |taped - external| / max |g| over all %d entries: %.2e (limit %.0e)\n", 2 * n, agree,
         1e3 * CG_TOL);
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
  free(P.diag), free(P.off), free(P.res), free(P.dir), free(P.prod), free(P.lam), free(P.rhs), free(P.kv), free(P.sol);
  free(W.diag), free(W.off), free(W.b), free(W.r), free(W.p), free(W.q), free(W.in);
  free(u0), free(kappa);
  if (failures) {
    fprintf(stderr, "implicit_cg: %d check(s) failed\n", failures);
    return 1;
  }
  printf("implicit_cg: OK\n");
  return 0;
}
