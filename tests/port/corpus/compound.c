/* SPDX-License-Identifier: BSD-3-Clause */
/* Compound assignments, ternaries, increments and the loop forms. */
#include <stdio.h>

#define NX 5
int n_inputs = NX;
double x_start[NX] = {1.25, -0.75, 0.5, 2.03, -1.5};

double objective(double *x) {
  double acc = 1.0, p = x[0];
  int i = 0;
  do {
    acc *= 1.0 + 0.1 * x[i];
    acc -= x[i] > 0 ? 0.05 * x[i] : -0.02 * x[i];
    p += acc / (2 + i);
    p /= 1.01;
    i++;
  } while (i < NX);
  double q = x[1];
  q++;
  ++q;
  q--;
  double r = -q + (+p);
  r += !(x[2] != 0.5) ? 1.0 : 0.0; /* a comparison on active values */
  int n = (int)(x[3] * 10.0);      /* an active value converted to int */
  r += n;
  r = x[4] < 0.0 && x[0] > 0.0 ? r * x[4] : r;
  return r;
}

#define PROGRAM "compound"
#include "corpus_main.c"
