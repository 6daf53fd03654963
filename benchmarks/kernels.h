/* SPDX-License-Identifier: BSD-3-Clause */
/* The fv and lj benchmark kernels (kernels.c): the problem and what a run measures. */
#ifndef ARIADNE_BENCH_KERNELS_H
#define ARIADNE_BENCH_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

enum { KERNELS_FV, KERNELS_LJ };

typedef struct kernels_problem {
  int kind;
  const char *name, *what;
  int n;     /* fv: cells per side (two ghost rings included); lj: atoms */
  int steps; /* fv: time steps; lj: force evaluations */
  double dt; /* fv */
  double box; /* lj: periodic box edge */
  int ncell;  /* lj: link cells per side */
  int *head, *next, *cell_of; /* lj: the link cells (integer data) */
} kernels_problem;

typedef struct kernels_result {
  double J;
  double record_s, reverse_s;
  double statements, arguments, tape_bytes;
} kernels_result;

void kernels_fv_init(const kernels_problem *p, double *q);
void kernels_lj_init(kernels_problem *p, double *x);

/* ADOL-C: the same kernels, the same J (kernels_adolc.cpp). */
int kernels_adolc_run(const kernels_problem *p, const double *in, double *grad, kernels_result *r);

#ifdef __cplusplus
}
#endif
#endif
