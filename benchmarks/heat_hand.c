/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The plain double references of the heat benchmarks, written once for the
 * serial, MPI and checkpointing benchmarks: the primal run, J, and the
 * hand-written adjoint (every state stored forward, then the transposed
 * steps backwards), against which every Ariadne gradient is checked.
 */
#include <string.h>

#include "heat_kernel.h"

double heat_objective(size_t nn, const double *u) {
  double J = 0.0;
  for (size_t k = 0; k < nn; k++) J += u[k] * u[k];
  return J;
}

double heat_primal(int n, int steps, const double *u0, double *a, double *b) {
  size_t nn = (size_t)n * (size_t)n;
  memcpy(a, u0, nn * sizeof(double));
  memcpy(b, u0, nn * sizeof(double));
  double *u = a, *v = b;
  for (int t = 0; t < steps; t++) {
    heat_kernel_step(n, u, v);
    double *x = u;
    u = v;
    v = x;
  }
  return heat_objective(nn, u);
}

double heat_hand_forward(int n, int steps, const double *u0, double *states) {
  size_t nn = (size_t)n * (size_t)n;
  memcpy(states, u0, nn * sizeof(double));
  for (int t = 0; t < steps; t++) {
    const double *u = states + (size_t)t * nn;
    double *v = states + (size_t)(t + 1) * nn;
    memcpy(v, u, nn * sizeof(double)); /* the boundary */
    heat_kernel_step(n, u, v);
  }
  return heat_objective(nn, states + (size_t)steps * nn);
}

/* Boundary values pass their adjoint through unchanged; an interior value
 * v[k] sends vbar * dv/dx to u[k] and vbar * c to each of its four
 * neighbours. */
void heat_hand_reverse(int n, int steps, const double *states, double *ubar, double *vbar, double *grad) {
  size_t nn = (size_t)n * (size_t)n;
  const double *uT = states + (size_t)steps * nn;
  for (size_t k = 0; k < nn; k++) vbar[k] = 2.0 * uT[k];
  for (int t = steps - 1; t >= 0; t--) {
    const double *u = states + (size_t)t * nn;
    memcpy(ubar, vbar, nn * sizeof(double)); /* boundary pass-through; interior overwritten below */
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) ubar[i * n + j] = 0.0;
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) {
        int k = i * n + j;
        double b = vbar[k], x = u[k];
        ubar[k] += b * heat_cell_dx(x);
        ubar[k - n] += HEAT_C * b;
        ubar[k + n] += HEAT_C * b;
        ubar[k - 1] += HEAT_C * b;
        ubar[k + 1] += HEAT_C * b;
      }
    double *x = ubar;
    ubar = vbar;
    vbar = x;
  }
  memcpy(grad, vbar, nn * sizeof(double));
}
