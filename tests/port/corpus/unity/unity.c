/* SPDX-License-Identifier: BSD-3-Clause */
/* A unity build: the operators live in ops/, whose files this file includes
 * after the types they use (they do not compile on their own). Ported with
 * their includer and written where its #include finds them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 12
typedef struct field {
  int n;
  double h;
  double *u, *w;
} field;

#include "ops/stencil.c"
#include "ops/norms.c"

int n_inputs = N + 2;
double x_start[N + 2] = {0.3, 0.5, 0.45, 0.6, 0.7, 0.65, 0.5, 0.4, 0.35, 0.5, 0.55, 0.6, 0.08, 0.2};

double objective(double *x) {
  field f;
  f.n = N;
  f.h = 1.0 / (N + 1);
  f.u = malloc(N * sizeof(double));
  f.w = malloc(N * sizeof(double));
  for (int i = 0; i < N; i++) f.u[i] = x[i];
  for (int t = 0; t < 8; t++) field_step(&f, x[N], x[N + 1]);
  double e = field_energy(&f);
  free(f.u);
  free(f.w);
  return e;
}

int main(void) {
  double x[N + 2];
  for (int i = 0; i < N + 2; i++) x[i] = x_start[i];
  printf("unity: J = %.17g\n", objective(x));
  return 0;
}
