/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The model of implicit_cg.c and benchmarks/cg.c (see implicit_cg_model.h):
 * its plain double solver, its taped CG, and its solve as an external
 * function.
 */
#include "implicit_cg_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Neighbour directions of a grid point: north, south, west, east. */
enum { NORTH, SOUTH, WEST, EAST };

/* The neighbour of point k in direction d, or -1 on the boundary. */
static int neighbour(const cg_problem *P, int k, int d) {
  int i = k / P->m, j = k % P->m;
  switch (d) {
  case NORTH:
    return i > 0 ? k - P->m : -1;
  case SOUTH:
    return i < P->m - 1 ? k + P->m : -1;
  case WEST:
    return j > 0 ? k - 1 : -1;
  default:
    return j < P->m - 1 ? k + 1 : -1;
  }
}

/* The inputs: the initial state u0 and the diffusivity kappa. */
static void initial(const cg_problem *P, double *u0, double *kappa) {
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

/* A(kappa): off[4k+d] = -r kf for an interior face (kf the mean of the two
 * kappas), 0 for a boundary face; diag[k] = 1 + r * (sum of the point's face
 * diffusivities, kappa[k] for a boundary face). */
static void assemble(const cg_problem *P, const double *kappa, double *diag, double *off) {
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

/* q = A p with the assembled matrix. */
static void matvec(const cg_problem *P, const double *p, double *q) {
  int m = P->m;
  for (int k = 0; k < P->n; k++) {
    int i = k / m, j = k % m;
    const double *o = P->off + 4 * k;
    double s = P->diag[k] * p[k];
    if (i > 0) s += o[NORTH] * p[k - m];
    if (i < m - 1) s += o[SOUTH] * p[k + m];
    if (j > 0) s += o[WEST] * p[k - 1];
    if (j < m - 1) s += o[EAST] * p[k + 1];
    q[k] = s;
  }
}

static double dot(int n, const double *a, const double *b) {
  double s = 0.0;
  for (int k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}

/* Solve A x = b with the assembled matrix from the initial guess in x until
 * ||r|| <= tol ||b||. Returns the iteration count, or -1 if P->max_iter was
 * not enough. */
static int cg(cg_problem *P, const double *b, double *x, double tol) {
  int n = P->n;
  double *r = P->res, *p = P->dir, *q = P->prod;
  matvec(P, x, q);
  for (int k = 0; k < n; k++) p[k] = r[k] = b[k] - q[k];
  double rr = dot(n, r, r), stop = tol * tol * dot(n, b, b);
  int it = 0;
  for (; rr > stop; it++) {
    if (it == P->max_iter) return -1;
    matvec(P, p, q);
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

double cg_simulate(cg_problem *P, const double *u0, const double *kappa, double tol, long *iters) {
  int n = P->n;
  double *u = P->u, *b = P->b;
  memcpy(u, u0, (size_t)n * sizeof *u);
  assemble(P, kappa, P->diag, P->off);
  *iters = 0;
  for (int s = 0; s < P->steps; s++) {
    for (int k = 0; k < n; k++) b[k] = u[k] + P->dt * (u[k] * (1.0 - u[k]));
    int it = cg(P, b, u, tol); /* warm start from u_n */
    if (it < 0) return NAN;
    *iters += it;
  }
  return dot(n, u, u);
}

/* ------------------------------------------------------------------------ */
/* (a) The port: CG on ad_real, every iteration taped.                      */
/* ------------------------------------------------------------------------ */

/* The matrix from active kappa, so that its entries carry dA/dkappa. */
static void assemble_ad(const cg_problem *P, const ad_real *kappa, ad_real *diag, ad_real *off) {
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
static void matvec_ad(const cg_problem *P, const ad_real *diag, const ad_real *off, const ad_real *p, ad_real *q) {
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

/* The same CG as cg() above, on active values: a matrix row times a vector
 * and the inner products are ad_dot, the vector updates x + alpha p are
 * ad_fma (alpha is active). */
static int cg_ad(const cg_problem *P, cg_ad_work *W, const ad_real *b, ad_real *x, double tol) {
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
    if (it == P->max_iter) return -1;
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
  cg_problem *P = ud;
  int n = P->n;
  if (nin != 2 * (size_t)n || nout != (size_t)n) return 1;
  const double *kappa = x + n;
  assemble(P, kappa, P->diag, P->off);
  memset(P->lam, 0, (size_t)n * sizeof *P->lam);
  int it = cg(P, ybar, P->lam, P->tol);
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
  cg_problem *P = ud;
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
  int it = cg(P, P->rhs, ydot, P->tol);
  if (it < 0) return 2;
  P->iterations += it;
  return 0;
}

static const ad_external_ops solve_ops = {solve_reverse, solve_forward, NULL, "CG solve"};

/* u <- A(kappa)^-1 b: solved passively (warm start from u), then recorded as
 * one external function. Returns the iteration count, or -1. */
static int solve_external(cg_problem *P, cg_ad_work *W, const ad_real *b, const ad_real *kappa, ad_real *u) {
  int n = P->n;
  double *bv = P->rhs, *x = P->sol, *kv = P->kv;
  for (int k = 0; k < n; k++) kv[k] = ad_value(kappa[k]);
  assemble(P, kv, P->diag, P->off);
  for (int k = 0; k < n; k++) {
    bv[k] = ad_value(b[k]);
    x[k] = ad_value(u[k]);
  }
  int it = cg(P, bv, x, P->tol);
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

ad_real cg_simulate_ad(cg_problem *P, cg_ad_work *W, const ad_real *kappa, ad_real *u, int external, long *iters) {
  int n = P->n;
  *iters = 0;
  if (!external) assemble_ad(P, kappa, W->diag, W->off); /* once: the matrix does not change */
  for (int s = 0; s < P->steps; s++) {
    for (int k = 0; k < n; k++) W->b[k] = ad_add(u[k], ad_mul(P->dt, ad_mul(u[k], ad_sub(1.0, u[k]))));
    int it = external ? solve_external(P, W, W->b, kappa, u) : cg_ad(P, W, W->b, u, P->tol);
    if (it < 0) {
      *iters = -1;
      break;
    }
    *iters += it;
  }
  return ad_dot((size_t)n, u, u);
}

/* ------------------------------------------------------------------------ */

int cg_problem_init(cg_problem *P, cg_ad_work *W, int m, int steps, double dt, double tol, int max_iter) {
  memset(P, 0, sizeof *P);
  memset(W, 0, sizeof *W);
  P->m = m;
  P->n = m * m;
  P->steps = steps;
  P->dt = dt;
  double h = 1.0 / (m + 1);
  P->r = dt / (h * h);
  P->tol = tol;
  P->max_iter = max_iter;
  size_t n = (size_t)P->n;
  double **dn[] = {&P->u0,  &P->kappa, &P->diag, &P->res, &P->dir, &P->prod,
                   &P->lam, &P->rhs,   &P->kv,   &P->sol, &P->u,   &P->b};
  ad_real **an[] = {&W->diag, &W->b, &W->r, &W->p, &W->q};
  int failed = 0;
  for (size_t i = 0; i < sizeof dn / sizeof dn[0]; i++) failed |= !(*dn[i] = calloc(n, sizeof(double)));
  for (size_t i = 0; i < sizeof an / sizeof an[0]; i++) failed |= !(*an[i] = calloc(n, sizeof(ad_real)));
  failed |= !(P->off = calloc(4 * n, sizeof(double)));
  failed |= !(W->off = calloc(4 * n, sizeof(ad_real)));
  failed |= !(W->in = calloc(2 * n, sizeof(ad_real)));
  if (failed) return -1;
  initial(P, P->u0, P->kappa);
  return 0;
}

void cg_problem_free(cg_problem *P, cg_ad_work *W) {
  free(P->u0), free(P->kappa);
  free(P->diag), free(P->off), free(P->res), free(P->dir), free(P->prod), free(P->lam), free(P->rhs);
  free(P->kv), free(P->sol), free(P->u), free(P->b);
  free(W->diag), free(W->off), free(W->b), free(W->r), free(W->p), free(W->q), free(W->in);
}
