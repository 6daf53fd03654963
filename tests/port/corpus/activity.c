/* SPDX-License-Identifier: BSD-3-Clause */
/* Local doubles no derivative reaches (timers, constants, a clock of the
 * steps) stay double in the port, and the timer macro stays as written;
 * locals that an active value reaches, on any branch or through their
 * address, become ad_real. */
#include <stdio.h>
#include <time.h>

#define TIC(t) ((t) = clock() / (double)CLOCKS_PER_SEC)
#define NX 5

int n_inputs = NX;
double x_start[NX] = {0.8, -0.4, 1.3, 0.6, -1.1};

/* A ported function: its parameters are active. */
static double weigh(double a, double b) { return a * b + 0.25 * a; }

/* Stores an active value through a pointer. */
static void set_to(double *p, double v) { *p = v; }

double objective(double *x) {
  double t0, t1;
  TIC(t0);
  double half = 0.5;             /* a constant in active arithmetic */
  double quarter = half * half;  /* passive through a passive local */
  double n = NX;                 /* from an integer */
  double step = 1.0 / n, t = 0.0; /* two declarators, both passive */
  double time = 0.0;             /* a clock of the steps */
  double acc = 0.0;              /* the accumulator: active */
  for (int i = 0; i < NX; i++) {
    time += quarter;
    t += step;
    acc += half * x[i] * x[i] + time * x[i] + t;
  }
  double lo = 0.0, hi = 1.0; /* one of two declarators active: both are */
  hi = x[2] * lo + x[3];
  acc += lo + hi;
  double w = 1.0; /* active on one branch only */
  if (x[0] > 0.0) w = x[1];
  acc += w * x[2];
  double via = 2.0; /* address taken: written through a pointer */
  set_to(&via, x[3]);
  acc += via * half;
  double peek = 3.0; /* address taken, never written */
  const double *pp = &peek;
  acc += *pp * x[4];
  double r = weigh(half, quarter); /* a ported function's result: active */
  acc += r * x[0];
  acc += weigh(x[1], half);        /* a passive local for an active parameter */
  TIC(t1);
  double elapsed = t1 - t0;
  if (elapsed < -1.0) acc = 0.0; /* never: the clock does not go back */
  return acc;
}

int main(void) {
  double x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  printf("activity: J = %.17g, half = %.17g\n", objective(x), 0.5);
  return 0;
}
