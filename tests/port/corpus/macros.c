/* SPDX-License-Identifier: BSD-3-Clause */
/* SQR-style macros on active operands are rewritten at the expansion;
 * index macros stay (integer arithmetic). */
#include <math.h>
#include <stdio.h>

#define SQR(a) ((a) * (a))
#define CUBE(a) ((a) * (a) * (a))
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
#define IDX(i, j) ((i) * 3 + (j))
#define HALF 0.5
#define NX 9

int n_inputs = NX;
double x_start[NX] = {0.3, 0.7, -0.2, 1.1, 0.4, 0.9, -0.6, 0.2, 0.5};

double objective(double *x) {
  double s = 0.0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double a = x[IDX(i, j)];
      s += SQR(a - HALF) + CUBE(a) * HALF;
      s = MAX2(s, SQR(a));
    }
  return s + SQR(SQR(x[IDX(1, 1)]));
}

#define PROGRAM "macros"
#include "corpus_main.c"
