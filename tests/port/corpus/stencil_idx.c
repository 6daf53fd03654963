/* SPDX-License-Identifier: BSD-3-Clause */
/* The commonest stencil style in C: the grid is a flat array indexed
 * through a macro. --fused must tape each cell update as one statement
 * (tests/port/fused_report.sh checks that none is left per operation). */
#include <math.h>
#include <stdio.h>

#define NX 6
#define NY 5
#define IDX(i, j) ((i)*NY + (j))
#define AT(u, i, j) ((u)[IDX(i, j)])
#define NSTEP 4

int n_inputs = NX * NY;
double x_start[NX * NY] = {0.300, 0.558, 0.694, 0.645, 0.434,  0.160,  -0.049, -0.093, 0.047, 0.307,
                           0.563, 0.695, 0.642, 0.428, 0.153,  -0.052, -0.092, 0.053,  0.313, 0.568,
                           0.696, 0.638, 0.421, 0.147, -0.055, -0.090, 0.058,  0.320,  0.573, 0.697};

static const double c = 0.1, dt = 0.05;

static void step(const double *u, double *v) {
  for (int i = 1; i < NX - 1; i++)
    for (int j = 1; j < NY - 1; j++) {
      v[IDX(i, j)] = u[IDX(i, j)] + c * (u[IDX(i - 1, j)] + u[IDX(i + 1, j)] + u[IDX(i, j - 1)] + u[IDX(i, j + 1)] -
                                         4.0 * u[IDX(i, j)]);
      v[IDX(i, j)] += dt * AT(u, i, j) * (1.0 - AT(u, i, j)) + dt * sin(u[IDX(i, j)]);
    }
  for (int i = 0; i < NX; i++) {
    v[IDX(i, 0)] = 0.5 * (u[IDX(i, 0)] + u[IDX(i, 1)]);
    v[IDX(i, NY - 1)] = u[IDX(i, NY - 1)];
  }
  for (int j = 1; j < NY - 1; j++) {
    v[IDX(0, j)] = u[IDX(0, j)] * u[IDX(1, j)];
    v[IDX(NX - 1, j)] = u[IDX(NX - 1, j)] - 0.25 * u[IDX(NX - 2, j)] * u[IDX(NX - 2, j)];
  }
}

double objective(double *x) {
  double a[NX * NY], b[NX * NY];
  for (int k = 0; k < NX * NY; k++) a[k] = x[k];
  for (int s = 0; s < NSTEP; s++) {
    step(a, b);
    step(b, a);
  }
  double J = 0.0;
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++) J += AT(a, i, j) * AT(a, i, j) + 0.1 * a[IDX(i, j)];
  return J;
}

int main(void) {
  double x[NX * NY];
  for (int k = 0; k < NX * NY; k++) x[k] = x_start[k];
  printf("stencil_idx: J = %.17g\n", objective(x));
  return 0;
}
