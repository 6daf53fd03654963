/* SPDX-License-Identifier: BSD-3-Clause */
/* A right-hand side passed by pointer to an RK4 integrator: a damped
 * pendulum whose initial state, length and damping are the inputs. */
#include <math.h>
#include <stdio.h>

#define NX 4
int n_inputs = NX;
double x_start[NX] = {0.8, 0.1, 1.3, 0.15};

typedef void (*rhs_fn)(double t, const double *y, double *dy, const double *par);

static void pendulum(double t, const double *y, double *dy, const double *par) {
  (void)t;
  dy[0] = y[1];
  dy[1] = -9.81 / par[0] * sin(y[0]) - par[1] * y[1];
}

static void rk4_step(rhs_fn f, double t, double h, double *y, int n, const double *par) {
  double k1[2], k2[2], k3[2], k4[2], tmp[2];
  f(t, y, k1, par);
  for (int i = 0; i < n; i++) tmp[i] = y[i] + 0.5 * h * k1[i];
  f(t + 0.5 * h, tmp, k2, par);
  for (int i = 0; i < n; i++) tmp[i] = y[i] + 0.5 * h * k2[i];
  f(t + 0.5 * h, tmp, k3, par);
  for (int i = 0; i < n; i++) tmp[i] = y[i] + h * k3[i];
  f(t + h, tmp, k4, par);
  for (int i = 0; i < n; i++) y[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

double objective(double *x) {
  double y[2] = {x[0], x[1]};
  double par[2] = {x[2], x[3]};
  double t = 0.0, h = 0.01;
  for (int s = 0; s < 200; s++) {
    rk4_step(pendulum, t, h, y, 2, par);
    t += h;
  }
  return y[0] * y[0] + 0.5 * y[1];
}

#define PROGRAM "rk4"
#include "corpus_main.c"
