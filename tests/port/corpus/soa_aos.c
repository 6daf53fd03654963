/* SPDX-License-Identifier: BSD-3-Clause */
/* Particles twice: as a structure of arrays and as an array of structures,
 * pulled by springs toward their neighbours, integrated with symplectic Euler. */
#include <math.h>
#include <stdio.h>

#define NP 6
#define NX (2 * NP)
int n_inputs = NX;
double x_start[NX] = {0.0, 0.9, 2.1, 2.9, 4.2, 5.0, 0.1, -0.2, 0.05, 0.0, 0.3, -0.1};

struct soa {
  double pos[NP], vel[NP];
  double mass;
};

struct particle {
  double pos, vel;
  int id;
};

static void forces_soa(const struct soa *s, double *f) {
  for (int i = 0; i < NP; i++) {
    f[i] = 0.0;
    if (i > 0) f[i] += s->pos[i - 1] - s->pos[i] + 1.0;
    if (i < NP - 1) f[i] += s->pos[i + 1] - s->pos[i] - 1.0;
  }
}

static double energy_aos(const struct particle *p, int n) {
  double e = 0;
  for (int i = 0; i < n; i++) {
    e += 0.5 * p[i].vel * p[i].vel;
    if (i + 1 < n) {
      double d = p[i + 1].pos - p[i].pos - 1.0;
      e += 0.5 * d * d;
    }
  }
  return e;
}

double objective(double *x) {
  struct soa s;
  s.mass = 2.0;
  for (int i = 0; i < NP; i++) {
    s.pos[i] = x[i];
    s.vel[i] = x[NP + i];
  }
  double f[NP], dt = 0.05;
  for (int step = 0; step < 40; step++) {
    forces_soa(&s, f);
    for (int i = 0; i < NP; i++) s.vel[i] += dt * f[i] / s.mass;
    for (int i = 0; i < NP; i++) s.pos[i] += dt * s.vel[i];
  }
  struct particle p[NP];
  for (int i = 0; i < NP; i++) {
    p[i].pos = s.pos[i];
    p[i].vel = s.vel[i];
    p[i].id = i;
  }
  return energy_aos(p, NP) + p[NP - 1].pos;
}

#define PROGRAM "soa_aos"
#include "corpus_main.c"
