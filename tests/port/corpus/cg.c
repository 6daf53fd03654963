/* SPDX-License-Identifier: BSD-3-Clause */
/* A conjugate-gradient solve of a 1-D Laplacian with a diagonal that
 * depends on the inputs; the loop runs while (rnorm > tol). */
#include <math.h>
#include <stdio.h>

#define NX 8
int n_inputs = NX;
double x_start[NX] = {2.5, 2.2, 2.9, 3.1, 2.4, 2.7, 3.3, 2.6};

static void apply(const double *d, const double *p, double *q, int n) {
  for (int i = 0; i < n; i++) {
    q[i] = d[i] * p[i];
    if (i > 0) q[i] -= p[i - 1];
    if (i < n - 1) q[i] -= p[i + 1];
  }
}

static double dot(const double *a, const double *b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

double objective(double *x) {
  int n = NX;
  double b[NX], u[NX], r[NX], p[NX], q[NX];
  for (int i = 0; i < n; i++) {
    b[i] = 1.0 + 0.1 * i;
    u[i] = 0.0;
    r[i] = b[i];
    p[i] = r[i];
  }
  double rr = dot(r, r, n), tol = 1e-12;
  double rnorm = sqrt(rr);
  int it = 0;
  while (rnorm > tol && it < 100) {
    apply(x, p, q, n);
    double alpha = rr / dot(p, q, n);
    for (int i = 0; i < n; i++) {
      u[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
    double rr_new = dot(r, r, n);
    for (int i = 0; i < n; i++) p[i] = r[i] + rr_new / rr * p[i];
    rr = rr_new;
    rnorm = sqrt(rr);
    it++;
  }
  return dot(u, b, n);
}

#define PROGRAM "cg"
#include "corpus_main.c"
