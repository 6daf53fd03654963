/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The model of implicit_cg.c, shared with benchmarks/cg.c: 2-D diffusion
 * with a logistic reaction on the unit square, m x m interior points
 * (h = 1/(m+1)), u = 0 on the boundary, T steps of
 *
 *     (I - dt L_kappa) u_{n+1} = u_n + dt u_n (1 - u_n),
 *
 * each solved with conjugate gradients (CG) from the previous state, and
 * J = sum_k u_T[k]^2 as a function of u0 and kappa. implicit_cg.c explains
 * the model and the two ways its gradient is taken; this file holds the code
 * both programs run: the plain double solver, the taped CG, and the solve as
 * an external function with its adjoint and tangent.
 */
#ifndef ARIADNE_EXAMPLE_IMPLICIT_CG_MODEL_H
#define ARIADNE_EXAMPLE_IMPLICIT_CG_MODEL_H

#include <ariadne.h>

typedef struct cg_problem {
  int m, n, steps;    /* points per side, unknowns (m*m), time steps */
  double dt, r;       /* time step, dt / h^2 */
  double tol;         /* relative residual of the recorded solves and of the external function's callbacks */
  int max_iter;       /* CG gives up after this many iterations */
  double *u0, *kappa; /* the initial state and the diffusivity, the inputs */
  /* Work arrays of the double solver, used by the primal and the callbacks. */
  double *diag, *off;       /* matrix: diagonal, 4 off-diagonals per row */
  double *res, *dir, *prod; /* CG residual, direction, A*direction */
  double *lam, *rhs;        /* adjoint or tangent solve */
  double *kv, *sol;         /* kappa and the solution in the primal external solve */
  double *u, *b;            /* state and right-hand side of cg_simulate */
  long iterations;          /* CG iterations in the external function's callbacks, summed */
} cg_problem;

/* Work arrays of the active code. */
typedef struct cg_ad_work {
  ad_real *diag, *off; /* the matrix, active because it depends on kappa */
  ad_real *b, *r, *p, *q;
  ad_real *in; /* (b, kappa): the inputs of an external solve */
} cg_ad_work;

/* Sets up P for m x m points and `steps` steps of length dt with its inputs
 * u0 and kappa, and allocates the work arrays of P and W. Returns 0, or -1
 * when out of memory (what was allocated is then freed by cg_problem_free). */
int cg_problem_init(cg_problem *P, cg_ad_work *W, int m, int steps, double dt, double tol, int max_iter);
void cg_problem_free(cg_problem *P, cg_ad_work *W);

/* J(u0, kappa) in plain double, each solve to `tol` warm-started from the
 * previous state; *iters gets the CG iterations. NAN if CG fails. */
double cg_simulate(cg_problem *P, const double *u0, const double *kappa, double tol, long *iters);

/* The T steps on active values from u (overwritten with u_T), each solve to
 * P->tol with every CG iteration taped (external = 0) or as one ad_external
 * record (external = 1); returns J. *iters gets the CG iterations of the
 * forward run, -1 if a solve failed. */
ad_real cg_simulate_ad(cg_problem *P, cg_ad_work *W, const ad_real *kappa, ad_real *u, int external, long *iters);

#endif
