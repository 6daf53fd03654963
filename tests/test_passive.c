/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The passive build. This source is compiled twice: normally (test_passive)
 * and with ARIADNE_PASSIVE defined (test_passive_build), where ad_real is
 * double and every ad_* call is plain arithmetic. A "ported" function written
 * once with ad_* calls is compared with the original double code, written
 * independently with the same operations in the same order: the values must
 * be equal to the last bit in both builds. The active build also checks the
 * gradient against finite differences of the original; the passive build
 * checks that the drivers say AD_ERR_PASSIVE_BUILD and that the tape calls
 * of a port, error handling included, compile and do nothing.
 */
#include <ariadne.h>

#include "check.h"

#ifdef ARIADNE_PASSIVE
#define TEST_NAME "test_passive_build"
#else
#define TEST_NAME "test_passive"
#endif

enum { N = 6 };

/* The port: every kind of operation, a branch on a comparison, fused
 * statements, user partials and a preaccumulated region. */
static ad_real ported(const ad_real *x) {
  ad_real s = ad_const(0.0);
  for (int k = 0; k < N; k++) {
    ad_real a = x[k], b = x[(k + 1) % N];
    ad_real t = ad_add(ad_mul(ad_sin(a), b), ad_div(ad_exp(ad_neg(ad_mul(a, a))), ad_add(1, ad_mul(b, b))));
    if (ad_gt(t, 0.1))
      t = ad_sqrt(ad_add(t, 1));
    else
      t = ad_cbrt(ad_sub(t, 2));
    t = ad_add(t, ad_sub(ad_atan2(a, b), ad_mul(ad_hypot(a, b), 0.25)));
    t = ad_add(t, ad_pow(ad_add(ad_fabs(a), 1), 0.5));
    t = ad_add(t, ad_sub(ad_fmin(a, b), ad_fmax(a, ad_mul(2, b))));
    t = ad_add(t, ad_fma(a, b, 0.5));
    t = ad_add(t, ad_fmod(ad_mul(a, 10), 3));
    t = ad_add(t, ad_mul(ad_erf(a), ad_erfc(b)));
    t = ad_add(t, ad_mul(ad_tanh(a), ad_cosh(ad_mul(b, 0.1))));
    t = ad_add(t, ad_add(ad_log1p(ad_mul(a, a)), ad_log2(ad_add(ad_mul(b, b), 1))));
    t = ad_add(t, ad_sub(ad_log10(ad_add(ad_mul(a, a), 2)), ad_log(ad_add(ad_mul(b, b), 3))));
    t = ad_add(t, ad_add(ad_expm1(ad_mul(b, 0.5)), ad_exp2(a)));
    t = ad_add(t, ad_add(ad_asinh(b), ad_acosh(ad_add(ad_mul(a, a), 1.5))));
    t = ad_add(t, ad_add(ad_atanh(ad_mul(b, 0.3)), ad_asin(ad_mul(a, 0.2))));
    t = ad_add(t, ad_add(ad_acos(ad_mul(b, 0.2)), ad_atan(a)));
    t = ad_add(t, ad_add(ad_tan(ad_mul(b, 0.3)), ad_sinh(ad_mul(a, 0.5))));
    t = ad_add(t, ad_cos(b));
    t = ad_add(t, ad_add(ad_add(ad_floor(a), ad_ceil(b)), ad_add(ad_round(a), ad_trunc(b))));
    s = ad_add(s, t);
  }
  ad_stmt_begin();
  s = ad_stmt_end(ad_add(ad_mul(ad_mul(s, s), 0.001), s));
  double w[N] = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5};
  ad_real u = ad_add(ad_sum(N, x), ad_lincomb(N, w, x));
  u = ad_add(u, ad_dot(N, x, x));
  double av = ad_value(x[0]), bv = ad_value(x[1]);
  ad_real args[2] = {x[0], x[1]};
  double par[2] = {bv, av};
  u = ad_add(u, ad_custom(av * bv, 2, args, par));
  return ad_add(s, ad_div(u, 7));
}

/* The original, in plain C. */
static double original(const double *x) {
  double s = 0.0;
  for (int k = 0; k < N; k++) {
    double a = x[k], b = x[(k + 1) % N];
    double t = sin(a) * b + exp(-(a * a)) / (1 + b * b);
    if (t > 0.1)
      t = sqrt(t + 1);
    else
      t = cbrt(t - 2);
    t = t + (atan2(a, b) - hypot(a, b) * 0.25);
    t = t + pow(fabs(a) + 1, 0.5);
    t = t + (fmin(a, b) - fmax(a, 2 * b));
    t = t + fma(a, b, 0.5);
    t = t + fmod(a * 10, 3);
    t = t + erf(a) * erfc(b);
    t = t + tanh(a) * cosh(b * 0.1);
    t = t + (log1p(a * a) + log2(b * b + 1));
    t = t + (log10(a * a + 2) - log(b * b + 3));
    t = t + (expm1(b * 0.5) + exp2(a));
    t = t + (asinh(b) + acosh(a * a + 1.5));
    t = t + (atanh(b * 0.3) + asin(a * 0.2));
    t = t + (acos(b * 0.2) + atan(a));
    t = t + (tan(b * 0.3) + sinh(a * 0.5));
    t = t + cos(b);
    t = t + ((floor(a) + ceil(b)) + (round(a) + trunc(b)));
    s = s + t;
  }
  s = s * s * 0.001 + s;
  double w[N] = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5};
  double sum = 0.0, lin = 0.0, dot = 0.0;
  for (int k = 0; k < N; k++) sum += x[k];
  for (int k = 0; k < N; k++) lin += w[k] * x[k];
  for (int k = 0; k < N; k++) dot += x[k] * x[k];
  double u = sum + lin;
  u = u + dot;
  u = u + x[0] * x[1];
  return s + u / 7;
}

int main(void) {
  /* Points away from the kinks of fabs, fmin, fmax, floor and fmod. */
  static const double points[][N] = {
      {0.37, -1.21, 0.83, 2.14, -0.56, 1.33},
      {-0.71, 0.26, -1.47, 0.64, 1.78, -0.33},
      {1.12, 1.93, -0.42, -2.27, 0.18, 0.91},
  };
  ad_tape_options o;
  ad_tape_options_default(&o);
  ad_tape *tape = ad_tape_create_with(&o);
  CHECK(tape != NULL);
  for (size_t p = 0; p < sizeof points / sizeof *points; p++) {
    CHECK_CONTEXT("point %zu", p);
    const double *xv = points[p];
    ad_tape_reset(tape);
    ad_tape_begin(tape);
    ad_real x[N];
    for (int k = 0; k < N; k++) x[k] = ad_input(xv[k]);
    ad_real y = ported(x);
    ad_tape_end(tape);
    CHECK_SAME(ad_value(y), original(xv));

    double g[N];
    int rc = ad_gradient(tape, y, N, x, g);
    if (rc != AD_OK && rc != AD_ERR_PASSIVE_BUILD)
      fprintf(stderr, "%s: ad_gradient: %s: %s\n", TEST_NAME, ad_errname(rc), ad_tape_error_message(tape));
#ifndef ARIADNE_PASSIVE
    CHECK_INT(rc, AD_OK);
    /* Against central differences of the original. */
    for (int k = 0; k < N; k++)
      CHECK_CLOSE2(g[k], check_central_difference(original, xv, N, (size_t)k, 1e-5), 1e-6, 1e-8);
#else
    /* Plain double: no tape, no derivatives, and the drivers say so. */
    CHECK_INT(rc, AD_ERR_PASSIVE_BUILD);
    for (int k = 0; k < N; k++) CHECK_SAME(g[k], 0.0);
    CHECK_INT(sizeof(ad_real), sizeof(double));
    CHECK_SAME(ad_input(xv[0]), xv[0]);
    CHECK_INT(ad_tape_is_recording(tape), 0);
    CHECK_INT(ad_reverse(tape), AD_ERR_PASSIVE_BUILD);
    CHECK_INT(ad_forward(tape), AD_ERR_PASSIVE_BUILD);
    double J[N];
    CHECK_INT(ad_jacobian(tape, 1, &y, N, x, J), AD_ERR_PASSIVE_BUILD);
    CHECK_SAME(ad_adjoint(tape, y), 0.0);
#endif
    /* A port keeps its tape calls; in the passive build they do nothing. */
    ad_tape_pos pos = ad_tape_position(tape);
    CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
    CHECK_INT(ad_tape_error(tape), AD_OK);
    CHECK(ad_tape_error_message(tape) != NULL);
    ad_stats st;
    CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
  }
  ad_tape_destroy(tape);
  CHECK(ad_tape_current() == NULL);
  return check_finish(TEST_NAME);
}
