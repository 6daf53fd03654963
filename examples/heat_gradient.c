/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heat_gradient: the gradient of a 2-D reaction-diffusion simulation.
 *
 * An explicit scheme on an N x N grid runs T steps with the boundary held
 * fixed; each interior cell is updated by
 *
 *     v = x + c (u_N + u_S + u_W + u_E - 4 x) + dt x (1 - x) + 0.01 sin(x),
 *
 * where x is the cell's old value, from u0[k] = 0.5 + 0.4 sin(0.37 k),
 * k = i N + j. The objective is J = sum_k u_T[k]^2 and we want dJ/du0, the
 * sensitivity of J to every initial value: N*N inputs, one reverse sweep.
 *
 * Each cell update is wrapped in ad_stmt_begin / ad_stmt_end: its dozen
 * operations are preaccumulated into one tape statement with five arguments
 * (the cell and its four neighbours), which makes the tape several times
 * smaller and the reverse sweep faster. J is one fused statement (ad_dot).
 *
 * Usage: heat_gradient [N T] [--png FILE] [--vtk FILE] [--figure FILE]
 *        (default 24 x 24 cells, 40 steps)
 *
 * ad_check_gradient compares a few entries of the gradient with central
 * finite differences of the same code at three step sizes and runs the
 * dot-product test of the tangent and reverse sweeps. For N = 128, T = 100
 * the program also checks the published reference values of this kernel.
 * --png and --vtk write the sensitivity map dJ/du0 as data: one pixel per
 * cell whose colour reads back as the value (with libpng), and VTK image
 * data for ParaView; --figure draws it to show (with cairo; .png, .pdf or
 * .svg): axes, a colour bar with its scale, a title. Built with -DARIADNE_PASSIVE
 * the program only prints J.
 */
#include <ariadne.h>
#include <ariadne_tools.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heat_example.h"
#include "example_util.h"

static void initial(int n, double *u0) {
  for (int k = 0; k < n * n; k++) u0[k] = 0.5 + 0.4 * sin(0.37 * k);
}

/* ------------------------------------------------------------------------ */
/* The plain double simulation (used for the finite differences).            */
/* ------------------------------------------------------------------------ */

static double simulate(int n, int steps, const double *u0, double *u, double *v) {
  memcpy(u, u0, (size_t)n * n * sizeof *u);
  memcpy(v, u0, (size_t)n * n * sizeof *v); /* the boundary stays as it was */
  for (int s = 0; s < steps; s++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) {
        int k = i * n + j;
        double x = u[k];
        double lap = u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4.0 * x;
        v[k] = x + C * lap + DT * x * (1.0 - x) + 0.01 * sin(x);
      }
    double *w = u;
    u = v;
    v = w;
  }
  double J = 0.0;
  for (int k = 0; k < n * n; k++) J += u[k] * u[k];
  return J;
}

/* ------------------------------------------------------------------------ */
/* The port. `u` and `v` hold ad_real; the loop is the same.                 */
/* ------------------------------------------------------------------------ */

static ad_real simulate_ad(int n, int steps, const ad_real *u0, ad_real *u, ad_real *v) {
  memcpy(u, u0, (size_t)n * n * sizeof *u);
  memcpy(v, u0, (size_t)n * n * sizeof *v);
  for (int s = 0; s < steps; s++) {
    for (int i = 1; i < n - 1; i++) heat_row(u, v, i * n, n);
    heat_swap(&u, &v);
  }
  return ad_dot((size_t)n * n, u, u);
}

#ifndef ARIADNE_PASSIVE
/* What ad_check_gradient records and re-runs: J from the initial state x. */
typedef struct sim {
  int n, steps;
  ad_real *u, *v;
} sim;

static int heat_fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  sim *s = ud;
  (void)n, (void)m;
  y[0] = simulate_ad(s->n, s->steps, x, s->u, s->v);
  return 0;
}
#endif

/* ------------------------------------------------------------------------ */

static void *xmalloc(size_t bytes) { return example_alloc("heat_gradient", 1, bytes); }

static int parse(const char *s, int lo, int hi, const char *what) {
  return example_parse_int("heat_gradient", s, lo, hi, what);
}

int main(int argc, char **argv) {
  int n = 24, steps = 40;
  const char *png, *vtk, *fig, *pos[2] = {NULL, NULL};
  int npos = heat_args(argc, argv, &png, &vtk, &fig, pos);
  if (npos < 0) {
    fprintf(stderr, "usage: %s [N T] [--png FILE] [--vtk FILE] [--figure FILE]\n", argv[0]);
    return 2;
  }
  if (npos == 2) {
    n = parse(pos[0], 3, 4096, "N");
    steps = parse(pos[1], 0, 1000000, "T");
  }
  size_t cells = (size_t)n * n;
  double *u0 = xmalloc(cells * sizeof *u0), *u = xmalloc(cells * sizeof *u), *v = xmalloc(cells * sizeof *v);
  ad_real *x = xmalloc(cells * sizeof *x), *ua = xmalloc(cells * sizeof *ua), *va = xmalloc(cells * sizeof *va);
  initial(n, u0);

  ad_tape *tape = ad_tape_create();
  if (!tape) {
    fprintf(stderr, "heat_gradient: cannot create a tape\n");
    return 1;
  }
  ad_tape_begin(tape);
  for (size_t k = 0; k < cells; k++) x[k] = ad_input(u0[k]);
  ad_real J = simulate_ad(n, steps, x, ua, va);
  ad_tape_end(tape);

  double Jd = simulate(n, steps, u0, u, v);
  int failures = 0;
  printf("reaction-diffusion %d x %d, %d steps: J = %.12g\n", n, n, steps, ad_value(J));
  if (fabs(ad_value(J) - Jd) > 1e-12 * fabs(Jd)) {
    fprintf(stderr, "heat_gradient: J of the port (%.17g) differs from the double code (%.17g)\n", ad_value(J), Jd);
    failures++;
  }

  double *g = xmalloc(cells * sizeof *g);
#ifndef ARIADNE_PASSIVE
  int rc = ad_gradient(tape, J, cells, x, g);
  if (rc != AD_OK) {
    fprintf(stderr, "heat_gradient: ad_gradient: %s: %s\n", ad_errname(rc), ad_tape_error_message(tape));
    return 1;
  }
  ad_stats st;
  ad_tape_stats(tape, &st);
  printf("tape: %llu statements, %llu arguments, %.1f MiB recorded\n\n", (unsigned long long)st.statements,
         (unsigned long long)st.arguments, st.bytes_used / 1048576.0);

  /* The checker records the simulation again on a tape of its own and
   * compares a few entries with central differences: a corner (never read by
   * the stencil), an edge cell, the first interior cell, the centre and an
   * interior cell near the far corner. Central differences are only as good
   * as the rounding noise in J, which grows roughly like the square root of
   * the number of operations, divided by the step: that is the absolute
   * tolerance. */
  size_t pick[5] = {0, (size_t)n / 2, (size_t)n + 1, cells / 2 + (size_t)n / 2, cells - (size_t)n - 2};
  sim sm = {n, steps, ua, va};
  ad_check_options co;
  example_check_columns(&co, pick, 5, 1e-6, DBL_EPSILON * fabs(Jd) * sqrt((double)cells * (steps + 1)) / 1e-4,
                        "dJ/du0 of the heat kernel");
  ad_check_result cr;
  rc = ad_check_gradient(heat_fn, &sm, cells, u0, 1, &co, &cr);
  if (rc != AD_OK) failures++;
  /* The tape's entries the table names, against the gradient computed above. */
  for (size_t k = 0; k < cr.nworst; k++)
    if (cr.worst[k].ad != g[cr.worst[k].col]) {
      fprintf(stderr, "heat_gradient: the checker's tape differs from the first one at %zu\n", cr.worst[k].col);
      failures++;
    }

  if (png || vtk || fig) printf("\n");
  char sub[160];
  snprintf(sub, sizeof sub, "J = \u03a3 u\u209c\u00b2 after T = %d steps on %d x %d cells; red: raising u0 raises J",
           steps, n, n);
  failures += heat_maps_write("heat_gradient", n, g, vtk, png, fig, sub);
#endif

  if (n == 128 && steps == 100) {
    /* Reference values of the kernel, to 12 significant digits. */
    struct { const char *what; double got, want; } ref[] = {
        {"J", ad_value(J), 18150.0729665},
#ifndef ARIADNE_PASSIVE
        {"dJ/du0[N+1]", g[n + 1], 3.24572929612e-06},
        {"dJ/du0[N*N/2+N/2]", g[cells / 2 + (size_t)n / 2], 8.41379276415e-05},
#endif
    };
    printf("\nreference values (N = 128, T = 100):\n");
    for (size_t r = 0; r < sizeof ref / sizeof ref[0]; r++) {
      double rel = fabs(ref[r].got - ref[r].want) / fabs(ref[r].want);
      int ok = rel < 1e-10;
      printf("  %-18s %.12g (reference %.12g)%s\n", ref[r].what, ref[r].got, ref[r].want, ok ? "" : "  MISMATCH");
      failures += !ok;
    }
  }

  ad_tape_destroy(tape);
  free(u0), free(u), free(v), free(x), free(ua), free(va), free(g);
  if (failures) {
    fprintf(stderr, "heat_gradient: %d check(s) failed\n", failures);
    return 1;
  }
  printf("heat_gradient: OK\n");
  return 0;
}
