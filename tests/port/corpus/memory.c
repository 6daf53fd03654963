/* SPDX-License-Identifier: BSD-3-Clause */
/* State arrays on the heap: malloc, calloc, realloc, memcpy, memset and
 * pointer swaps in an explicit 1-D diffusion with a nonlinear source. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 10
int n_inputs = NX;
double x_start[NX] = {0.1, 0.4, 0.9, 0.3, 0.7, 0.2, 0.8, 0.5, 0.6, 0.05};

double objective(double *x) {
  int n = NX;
  double *u = malloc(n * sizeof(double));
  double *v = calloc(n, sizeof *v);
  memcpy(u, x, n * sizeof(double));
  for (int t = 0; t < 30; t++) {
    memset(v, 0, n * sizeof(double));
    for (int i = 1; i < n - 1; i++) v[i] = u[i] + 0.2 * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + 0.01 * u[i] * u[i];
    v[0] = u[0];
    v[n - 1] = u[n - 1];
    double *w = u;
    u = v;
    v = w;
  }
  u = realloc(u, 2 * n * sizeof(double));
  for (int i = 0; i < n; i++) u[n + i] = u[i] * u[i];
  double J = 0.0;
  for (int i = 0; i < 2 * n; i++) J += u[i];
  free(u);
  free(v);
  return J;
}

#define PROGRAM "memory"
#include "corpus_main.c"
