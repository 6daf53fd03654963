/* SPDX-License-Identifier: BSD-3-Clause */
/* A code whose real type is a macro (`#define DTYPE double` in its header),
 * with double active: every declaration spelled DTYPE that holds active
 * data is ported (parameters, returns, fields, locals, pointers, casts,
 * sizeof), and a DTYPE local no active value reaches stays DTYPE. The
 * potential energy of a few particles on springs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "type_macro.h"

#define NP 3
int n_inputs = 3 * NP;
double x_start[3 * NP] = {0.1, 0.2, 1.0, 1.3, -0.2, 2.0, 0.4, 1.1, 1.5};

static DTYPE spring(const particle *a, const particle *b, DTYPE rest) {
  DTYPE d[2];
  for (int k = 0; k < 2; k++) d[k] = b->pos[k] - a->pos[k];
  DTYPE r = sqrt(tm_norm2(d));
  return 0.5 * (a->mass + b->mass) * (r - rest) * (r - rest);
}

double objective(double *x) {
  DTYPE half = 0.5; /* a constant: stays DTYPE */
  particle *p = (particle *)malloc(NP * sizeof(particle));
  DTYPE *rest = (DTYPE *)malloc(NP * sizeof(DTYPE));
  for (int i = 0; i < NP; i++) {
    p[i].pos[0] = x[3 * i];
    p[i].pos[1] = x[3 * i + 1];
    p[i].mass = (DTYPE)x[3 * i + 2];
    p[i].id = i;
    rest[i] = (DTYPE)(i + 1) * half;
  }
  DTYPE e = 0;
  for (int i = 0; i + 1 < NP; i++) e += spring(&p[i], &p[i + 1], rest[i]);
  e += (DTYPE)1 / (DTYPE)NP * tm_norm2(p[0].pos);
  free(rest);
  free(p);
  return e;
}

int main(void) {
  double x[3 * NP];
  for (int i = 0; i < 3 * NP; i++) x[i] = x_start[i];
  printf("type_macro: J = %.17g\n", objective(x));
  return 0;
}
