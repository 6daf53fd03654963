/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loop bodies that compute something, then leave early: pair loops with a
 * cutoff over distance vectors kept in small local arrays (`continue`), a
 * walk that stops at a threshold (`break`), a body that ends in
 * `if (r2 < rc2) { ... }`, nested loops whose inner body leaves early. The
 * fused port takes back what such a body recorded when the exit is taken.
 * Beside them the bodies where that would lose a derivative, which must
 * keep their statements: an active value stored outside the body (into an
 * array, an outer accumulator, through a pointer) before the exit, and a
 * call of a function of the program before it. A loop body that keeps no
 * counter outside runs first on values alone, recording nothing, and the
 * recording body runs only when the twin did not leave.
 */
#include <math.h>
#include <stdio.h>

#define NP 6
#define N (3 * NP)
int n_inputs = N;
double x_start[N] = {0.0,  0.1, -0.2, 1.0, 0.2,  0.1, 0.3, 1.1, -0.1, 2.4, 2.2,
                     -0.3, 0.9, 0.8,  1.2, -1.6, 0.4, 0.7};

static const double rc2 = 2.25;

typedef double vec3[3];

static double twice(double v) { return 2.0 * v; }

/* The cutoff of a Lennard-Jones loop over distance vectors: most pairs are
 * rejected after their distance is computed. */
static double pairs(const double *x, double *f) {
  double e = 0.0;
  for (int i = 0; i < NP; i++)
    for (int j = 0; j < NP; j++) {
      vec3 dr;
      if (j == i) continue;
      double r2 = 0.0;
      double r2_seen[1] = {0.0};
      for (int m = 0; m < 3; m++) {
        dr[m] = x[3 * i + m] - x[3 * j + m];
        r2 += dr[m] * dr[m];
      }
      r2_seen[0] = r2;
      if (r2_seen[0] > rc2) continue;
      r2 = 1.0 / r2;
      double r6 = r2 * r2 * r2;
      e += 0.5 * r6 * (r6 - 1.0);
      double fr = r6 * r2 * (12.0 * r6 - 6.0);
      for (int m = 0; m < 3; m++) f[3 * i + m] += dr[m] * fr;
    }
  return e;
}

/* A walk along the atoms that stops where a step gets long (`break`), its
 * step kept in a local structure. */
static double walk(const double *x) {
  double path = 0.0;
  int k = 0;
  while (k + 1 < NP) {
    struct {
      double d[2];
      double len;
    } s;
    s.d[0] = x[3 * (k + 1)] - x[3 * k];
    s.d[1] = x[3 * (k + 1) + 1] - x[3 * k + 1];
    s.len = sqrt(s.d[0] * s.d[0] + s.d[1] * s.d[1]);
    if (s.len > 1.2) break;
    path += s.len * s.len + s.d[0];
    k++;
  }
  return path + (double)k;
}

/* A body that ends in the test that accepts the pair, and an inner loop
 * whose body leaves early (a do loop over the third coordinates). */
static double trailing(const double *x) {
  double e = 0.0;
  for (int i = 0; i < NP; i++)
    for (int j = i + 1; j < NP; j++) {
      double d[3] = {1.5, 1.5, 1.5};
      int m = 0;
      do {
        double t = x[3 * i + m] - x[3 * j + m];
        double w[1];
        w[0] = t * t;
        m++;
        if (w[0] > rc2) continue;
        d[m - 1] = t;
      } while (m < 3);
      double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
      if (r2 < rc2) {
        e += exp(-r2) * d[0];
      }
    }
  return e;
}

/* A passive counter outside the body counts before the exit: the body must
 * not run twice, so it is not tried first on values (what it recorded is
 * still taken back). */
static double counted(const double *x) {
  double e = 0.0;
  int tried = 0;
  for (int i = 0; i + 1 < N; i++) {
    double d[1];
    d[0] = x[i + 1] - x[i];
    tried++;
    if (d[0] * d[0] > 0.5) continue;
    e += d[0] * x[i];
  }
  return e + 0.001 * (double)tried;
}

/* Bodies whose statements must stay: before the exit an active value goes to
 * an array of the caller, to an accumulator outside the body, through a
 * pointer, or into a function of the program. */
static double kept(const double *x, double *g) {
  double acc = 0.0, e = 0.0;
  for (int i = 0; i < N; i++) {
    g[i] = x[i] * x[i] + 0.5;
    if (g[i] > 1.0) continue;
    e += g[i];
  }
  for (int i = 0; i + 1 < N; i++) {
    acc += x[i] * x[i + 1];
    if (x[i] > 0.5) continue;
    e += 0.1 * x[i];
  }
  for (int i = 0; i < N; i++) {
    double *p = &g[i];
    *p = *p * x[i] + sin(x[i]);
    if (*p > 0.3) continue;
    e += *p;
  }
  for (int i = 0; i < N; i++) {
    double t = twice(x[i]) * x[i];
    if (t > 0.5) continue;
    e += t;
  }
  double s = 0.0;
  for (int i = 0; i < N; i++) s += g[i] * g[i];
  return e + acc + s;
}

double objective(double *x) {
  double f[N] = {0.0};
  double g[N];
  double e = pairs(x, f) + walk(x) + trailing(x) + kept(x, g) + counted(x);
  for (int i = 0; i < N; i++) e += 0.01 * (double)(i + 1) * f[i];
  return e;
}

#define NX N
#define PROGRAM "cutoff"
#include "corpus_main.c"
