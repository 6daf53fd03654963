/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * port_example: porting a double-based function to Ariadne.
 *
 * The model is a damped nonlinear pendulum,
 *
 *     theta'' = -k sin(theta) - c theta',
 *
 * integrated with classical Runge-Kutta (RK4) steps from (theta0, omega0).
 * The output is the pendulum's energy at the final time,
 *
 *     E = 0.5 omega^2 + k (1 - cos theta),
 *
 * and we want its gradient with respect to the four inputs
 * x = (theta0, omega0, k, c).
 *
 * The file holds the code twice: first the plain `double` version, as it was
 * before the port, then the port. The port is a rename: `double` becomes
 * `ad_real`, each operator becomes a call (`a * b` -> `ad_mul(a, b)`,
 * `sin` -> `ad_sin`), and the RK4 update uses one fused statement
 * (`ad_lincomb`) instead of a chain of additions. The double version is kept
 * to compare values with; ad_check_gradient checks the derivatives.
 *
 * Build with -DARIADNE_PASSIVE and the port compiles to plain double
 * arithmetic: the program then only prints values.
 */
#include <ariadne.h>
#include <ariadne_tools.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_util.h"

enum { NIN = 4, NSTEPS = 200 };
static const double T_END = 2.0;

/* ------------------------------------------------------------------------ */
/* The original: plain double.                                               */
/* ------------------------------------------------------------------------ */

static void rhs(double k, double c, const double y[2], double dy[2]) {
  dy[0] = y[1];
  dy[1] = -k * sin(y[0]) - c * y[1];
}

static double pendulum(const double x[NIN]) {
  double y[2] = {x[0], x[1]}, k = x[2], c = x[3];
  double h = T_END / NSTEPS;
  for (int n = 0; n < NSTEPS; n++) {
    double k1[2], k2[2], k3[2], k4[2], t[2];
    rhs(k, c, y, k1);
    for (int i = 0; i < 2; i++) t[i] = y[i] + 0.5 * h * k1[i];
    rhs(k, c, t, k2);
    for (int i = 0; i < 2; i++) t[i] = y[i] + 0.5 * h * k2[i];
    rhs(k, c, t, k3);
    for (int i = 0; i < 2; i++) t[i] = y[i] + h * k3[i];
    rhs(k, c, t, k4);
    for (int i = 0; i < 2; i++) y[i] = y[i] + h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
  }
  return 0.5 * y[1] * y[1] + k * (1.0 - cos(y[0]));
}

/* ------------------------------------------------------------------------ */
/* The port: the same code with ad_real.                                     */
/* ------------------------------------------------------------------------ */

static void rhs_ad(ad_real k, ad_real c, const ad_real y[2], ad_real dy[2]) {
  dy[0] = y[1];
  dy[1] = ad_sub(ad_neg(ad_mul(k, ad_sin(y[0]))), ad_mul(c, y[1]));
}

static ad_real pendulum_ad(const ad_real x[NIN]) {
  ad_real y[2] = {x[0], x[1]}, k = x[2], c = x[3];
  double h = T_END / NSTEPS;
  /* Weights of the RK4 update y + h/6 (k1 + 2 k2 + 2 k3 + k4). */
  const double w[5] = {1.0, h / 6.0, h / 3.0, h / 3.0, h / 6.0};
  for (int n = 0; n < NSTEPS; n++) {
    ad_real k1[2], k2[2], k3[2], k4[2], t[2];
    rhs_ad(k, c, y, k1);
    for (int i = 0; i < 2; i++) t[i] = ad_add(y[i], ad_mul(0.5 * h, k1[i]));
    rhs_ad(k, c, t, k2);
    for (int i = 0; i < 2; i++) t[i] = ad_add(y[i], ad_mul(0.5 * h, k2[i]));
    rhs_ad(k, c, t, k3);
    for (int i = 0; i < 2; i++) t[i] = ad_add(y[i], ad_mul(h, k3[i]));
    rhs_ad(k, c, t, k4);
    /* One tape statement with five arguments instead of eight operations. */
    for (int i = 0; i < 2; i++) {
      ad_real terms[5] = {y[i], k1[i], k2[i], k3[i], k4[i]};
      y[i] = ad_lincomb(5, w, terms);
    }
  }
  return ad_add(ad_mul(0.5, ad_mul(y[1], y[1])), ad_mul(k, ad_sub(1.0, ad_cos(y[0]))));
}

#ifndef ARIADNE_PASSIVE
/* The computation as ad_check_gradient wants it: outputs from inputs. */
static int energy_fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  (void)ud, (void)n, (void)m;
  y[0] = pendulum_ad(x);
  return 0;
}
#endif

/* ------------------------------------------------------------------------ */

int main(void) {
  static const char *names[NIN] = {"theta0", "omega0", "k", "c"};
  const double x0[NIN] = {1.2, -0.3, 9.81, 0.25};

  /* Record the port once: inputs, then the computation. */
  ad_tape *tape = ad_tape_create();
  if (!tape) {
    fprintf(stderr, "port_example: cannot create a tape\n");
    return 1;
  }
  ad_real x[NIN];
  ad_tape_begin(tape);
  for (int i = 0; i < NIN; i++) x[i] = ad_input(x0[i]);
  ad_real e = pendulum_ad(x);
  ad_tape_end(tape);

  double e_double = pendulum(x0);
  printf("energy at t = %g: port %.15g, double %.15g\n", T_END, ad_value(e), e_double);
  int failures = 0;
  if (fabs(ad_value(e) - e_double) > 1e-12 * fabs(e_double)) {
    fprintf(stderr, "port_example: the port's value differs from the double version\n");
    failures++;
  }

#ifndef ARIADNE_PASSIVE
  /* One reverse sweep gives the whole gradient. */
  double g[NIN];
  int rc = ad_gradient(tape, e, NIN, x, g);
  if (rc != AD_OK) {
    fprintf(stderr, "port_example: ad_gradient: %s: %s\n", ad_errname(rc), ad_tape_error_message(tape));
    ad_tape_destroy(tape);
    return 1;
  }

  printf("\n");
  for (int i = 0; i < NIN; i++) printf("dE/d%-7s = %22.15e\n", names[i], g[i]);

  /* ad_check_gradient records the port again on a tape of its own and
   * compares every entry with central finite differences (at three step
   * sizes; their error is about h^2 truncation plus eps/h rounding) and the
   * tangent sweep with the reverse one. Input i is column i of the table. */
  ad_check_options co;
  example_check_report(&co, NIN, 1e-6, "pendulum energy");
  printf("\n");
  if (ad_check_gradient(energy_fn, NULL, NIN, x0, 1, &co, NULL) != AD_OK) failures++;

  ad_stats st;
  if (ad_tape_stats(tape, &st) == AD_OK)
    printf("\ntape: %llu statements, %llu arguments, %zu bytes\n", (unsigned long long)st.statements,
           (unsigned long long)st.arguments, st.bytes_used);
#else
  (void)names;
  printf("passive build: no gradient, values only\n");
#endif

  ad_tape_destroy(tape);
  if (failures) {
    fprintf(stderr, "port_example: %d check(s) failed\n", failures);
    return 1;
  }
  printf("port_example: OK\n");
  return 0;
}
