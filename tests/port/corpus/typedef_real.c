/* SPDX-License-Identifier: BSD-3-Clause */
/* A code with its own real type: only real_t becomes active (--active-type
 * real_t); plain double stays passive (a tolerance, a timer). Newton's method
 * on a cubic whose coefficients are the inputs, then a Horner evaluation. */
#include <math.h>
#include <stdio.h>

typedef double real_t;

#define NX 4
int n_inputs = NX;
real_t x_start[NX] = {1.5, -0.5, 0.25, 2.0};

static const double tolerance = 1e-13; /* passive */

static real_t horner(const real_t *c, int n, real_t t) {
  real_t p = c[n - 1];
  for (int k = n - 2; k >= 0; k--) p = p * t + c[k];
  return p;
}

static real_t dhorner(const real_t *c, int n, real_t t) {
  real_t p = (n - 1) * c[n - 1];
  for (int k = n - 2; k >= 1; k--) p = p * t + k * c[k];
  return p;
}

real_t objective(real_t *x) {
  real_t t = 1.0;
  int it = 0;
  for (; it < 50; it++) {
    real_t f = horner(x, NX, t);
    real_t step = f / dhorner(x, NX, t);
    t -= step;
    double size = (double)fabs(step); /* a passive copy (an explicit cast): only to stop */
    if (size < tolerance) break;
  }
  return t * t + horner(x, NX, 0.5 * t);
}

int main(void) {
  real_t x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  real_t J = objective(x);
  printf("typedef_real: J = %.17g\n", J);
  return 0;
}
