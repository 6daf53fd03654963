/* SPDX-License-Identifier: BSD-3-Clause */
/* Globals and statics with initializers, a constant table, printf output. */
#include <stdio.h>

#define NX 3
int n_inputs = NX;
double x_start[NX] = {0.4, 1.6, -0.3};

double gain = 1.5;
static double offset = -0.25;
static const double table[4] = {1.0, 0.5, 0.25, 0.125};
static int calls = 0;
static double last = 0.0; /* the previous value, reset by each run */

static double scaled(double v) {
  static int local_calls = 0; /* passive static local */
  double r = gain * v + offset + 0.1 * last;
  last = v;
  calls++;
  local_calls++;
  return r + 0.0 * local_calls;
}

double objective(double *x) {
  double s = 0.0;
  last = 0.0;
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < NX; i++) s += table[k] * scaled(x[i] * x[i]);
  gain = 1.5;
  return s;
}

int main(void) {
  double x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  double J = objective(x);
  printf("globals: J = %.17g after %d calls, gain %g, first %.3f\n", J, calls, gain, x[0] * J);
  return 0;
}
