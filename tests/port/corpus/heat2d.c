/* SPDX-License-Identifier: BSD-3-Clause */
/* The reference kernel's style: a grid struct, sizeof of the element type,
 * a 2-D nonlinear reaction-diffusion step with an index macro. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define G 6
#define NX (G * G)
#define AT(g, i, j) ((g)->u[(i) * (g)->n + (j)])
int n_inputs = NX;
double x_start[NX] = {
    0.50, 0.55, 0.62, 0.58, 0.51, 0.47, 0.44, 0.60, 0.71, 0.66, 0.53, 0.49, 0.52, 0.64, 0.80, 0.75, 0.59, 0.50,
    0.48, 0.61, 0.77, 0.73, 0.57, 0.46, 0.45, 0.56, 0.65, 0.63, 0.54, 0.43, 0.41, 0.50, 0.58, 0.55, 0.49, 0.40};

typedef struct grid {
  int n;
  double *u;
} grid;

static grid *grid_new(int n) {
  grid *g = malloc(sizeof *g);
  g->n = n;
  g->u = malloc((size_t)n * (size_t)n * sizeof(double));
  return g;
}

static void step(const grid *a, grid *b, double c, double dt) {
  for (int i = 1; i < a->n - 1; i++)
    for (int j = 1; j < a->n - 1; j++) {
      double x = AT(a, i, j);
      AT(b, i, j) = x + c * (AT(a, i - 1, j) + AT(a, i + 1, j) + AT(a, i, j - 1) + AT(a, i, j + 1) - 4.0 * x) +
                    dt * x * (1.0 - x) + 0.01 * sin(x);
    }
}

double objective(double *x) {
  grid *a = grid_new(G), *b = grid_new(G);
  for (int k = 0; k < NX; k++) a->u[k] = b->u[k] = x[k];
  for (int t = 0; t < 10; t++) {
    step(a, b, 0.2, 0.1);
    grid *w = a;
    a = b;
    b = w;
  }
  double J = 0.0;
  for (int k = 0; k < NX; k++) J += a->u[k] * a->u[k];
  free(a->u);
  free(b->u);
  free(a);
  free(b);
  return J;
}

#define PROGRAM "heat2d"
#include "corpus_main.c"
