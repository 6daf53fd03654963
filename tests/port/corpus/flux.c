/* SPDX-License-Identifier: BSD-3-Clause */
/* Finite volumes for Burgers' equation with a minmod-limited MUSCL
 * reconstruction and a Rusanov flux: fabs, fmax, fmin, sqrt, pow, exp. */
#include <math.h>
#include <stdio.h>

#define NC 16
#define NX NC
int n_inputs = NX;
double x_start[NX] = {1.2381093860262171, 1.3882362937679569, 1.4792577451542919, 1.4973165493231644, 1.4396634170433309, 1.3150755150774507, 1.1425202221076849, 0.94826751727105496, 0.76189061397378288, 0.61176370623204335, 0.52074225484570813, 0.50268345067683562, 0.5603365829566691, 0.68492448492254931, 0.85747977789231511, 1.0517324827289449};

static double minmod(double a, double b) {
  if (a * b <= 0.0) return 0.0;
  return fabs(a) < fabs(b) ? a : b;
}

static double flux(double ul, double ur) {
  double fl = 0.5 * ul * ul, fr = 0.5 * ur * ur;
  double s = fmax(fabs(ul), fabs(ur));
  return 0.5 * (fl + fr) - 0.5 * s * (ur - ul);
}

double objective(double *x) {
  double u[NC], du[NC], F[NC + 1];
  for (int i = 0; i < NC; i++) u[i] = x[i];
  double dx = 1.0 / NC, dt = 0.2 * dx;
  for (int step = 0; step < 20; step++) {
    for (int i = 0; i < NC; i++) {
      int l = (i + NC - 1) % NC, r = (i + 1) % NC;
      du[i] = minmod(u[i] - u[l], u[r] - u[i]);
    }
    for (int i = 0; i <= NC; i++) {
      int l = (i + NC - 1) % NC, r = i % NC;
      F[i] = flux(u[l] + 0.5 * du[l], u[r] - 0.5 * du[r]);
    }
    for (int i = 0; i < NC; i++) u[i] -= dt / dx * (F[i + 1] - F[i]);
  }
  double J = 0.0;
  for (int i = 0; i < NC; i++) J += sqrt(1.0 + pow(u[i], 2)) * exp(-0.1 * fmin(u[i], 1.0));
  return J;
}

#define PROGRAM "flux"
#include "corpus_main.c"
