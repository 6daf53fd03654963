/* SPDX-License-Identifier: BSD-3-Clause */
/* A code whose real type is a typedef of a type macro (`#define REAL
 * double`, `typedef REAL real_t;`), ported with --active-type real_t: the
 * typedef becomes ad_real, a REAL spelled elsewhere stays passive, and a
 * passive double cast to real_t inside a passive macro's argument
 * (`SQ((real_t)d)`) stays a double. Damped oscillator steps. */
#include <math.h>
#include <stdio.h>

#define REAL double
typedef REAL real_t;
#define SQ(a) ((a) * (a))

#define NX 3
int n_inputs = NX;
real_t x_start[NX] = {0.8, -0.3, 1.7};

static const REAL damping = 0.125; /* passive */

static real_t energy(real_t q, real_t p, REAL k) { return 0.5 * (SQ(p) + k * SQ(q)); }

real_t objective(real_t *x) {
  real_t q = x[0], p = x[1], k = x[2];
  REAL dt = 0.05;
  for (int it = 0; it < 20; it++) {
    p -= dt * (k * q + damping * p);
    q += dt * p;
    dt = SQ((real_t)dt) + 0.04; /* a passive value through a cast to real_t */
  }
  real_t e = energy(q, p, SQ((real_t)damping) + 1.0);
  return e + SQ((real_t)dt) * k;
}

int main(void) {
  real_t x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  real_t J = objective(x);
  printf("type_macro_real: J = %.17g\n", J);
  return 0;
}
