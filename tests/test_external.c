/* SPDX-License-Identifier: BSD-3-Clause */
/* External functions: a linear map and a nonlinear function given by their
 * own adjoints, checked against the same code taped operation by operation,
 * central differences and the dot-product test; a callback that records and
 * sweeps a nested tape; and the error paths. */
#include <ariadne.h>

#include "check.h"

#define N 4

/* y = A x with a fixed matrix; reverse xbar += A^T ybar, forward ydot = A xdot. */
static const double A[3][N] = {{1.0, -2.0, 0.5, 3.0}, {0.0, 4.0, -1.0, 2.0}, {2.5, 0.0, 1.5, -0.5}};
static int destroyed, reverse_calls;

static int lin_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud, (void)x, (void)y;
  reverse_calls++;
  for (size_t j = 0; j < nout; j++)
    for (size_t i = 0; i < nin; i++) xbar[i] += A[j][i] * ybar[j];
  return 0;
}
static int lin_forward(void *ud, size_t nin, const double *x, const double *xdot, size_t nout, const double *y,
                       double *ydot) {
  (void)ud, (void)x, (void)y;
  for (size_t j = 0; j < nout; j++)
    for (size_t i = 0; i < nin; i++) ydot[j] += A[j][i] * xdot[i];
  return 0;
}
static void count_destroy(void *ud) {
  (void)ud;
  destroyed++;
}
static const ad_external_ops lin_ops = {lin_reverse, lin_forward, count_destroy, "linear map"};

/* f(x) = sum_j y_j^2 * sin(x_j) with y = A x: the program under test. */
static ad_real program(const ad_real *x, int use_external) {
  ad_real y[3];
  if (use_external) {
    for (int j = 0; j < 3; j++) {
      double v = 0.0;
      for (int i = 0; i < N; i++) v += A[j][i] * ad_value(x[i]);
      y[j] = ad_const(v);
    }
    CHECK_INT(ad_external(&lin_ops, NULL, N, x, 3, y), AD_OK);
  } else {
    for (int j = 0; j < 3; j++) y[j] = ad_lincomb(N, A[j], x);
  }
  ad_real f = ad_const(0.0);
  for (int j = 0; j < 3; j++) f = ad_add(f, ad_mul(ad_mul(y[j], y[j]), ad_sin(x[j])));
  return f;
}

static double program_value(const double *x0) {
  ad_real x[N];
  for (int i = 0; i < N; i++) x[i] = ad_const(x0[i]);
  return ad_value(program(x, 0));
}

static void test_linear(void) {
  CHECK_CONTEXT("linear external function");
  const double x0[N] = {0.3, -0.7, 1.1, 0.45};
  double g_ext[N], g_tap[N];
  for (int mode = 0; mode < 2; mode++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[N];
    for (int i = 0; i < N; i++) x[i] = ad_input(x0[i]);
    ad_real f = program(x, mode == 0);
    ad_tape_end(t);
    CHECK_INT(ad_gradient(t, f, N, x, mode == 0 ? g_ext : g_tap), AD_OK);
    if (mode == 0) {
      ad_stats s;
      ad_tape_stats(t, &s);
      CHECK_INT((long long)s.records, 1);
      /* dot-product test: tangent sweep through the forward callback */
      double xdot[N] = {0.2, -1.0, 0.7, 0.4}, tdir = 0.0;
      ad_tangents_zero(t);
      for (int i = 0; i < N; i++) ad_tangent_seed(t, x[i], xdot[i]);
      CHECK_INT(ad_forward(t), AD_OK);
      for (int i = 0; i < N; i++) tdir += g_ext[i] * xdot[i];
      CHECK_CLOSE(ad_tangent(t, f), tdir, 1e-13);
      /* sweeping again gives the same gradient (the record is reusable) */
      double g2[N];
      CHECK_INT(ad_gradient(t, f, N, x, g2), AD_OK);
      for (int i = 0; i < N; i++) CHECK_SAME(g2[i], g_ext[i]);
    }
    ad_tape_destroy(t);
  }
  for (int i = 0; i < N; i++) CHECK_CLOSE(g_ext[i], g_tap[i], 1e-14);
  for (int i = 0; i < N; i++)
    CHECK_CLOSE(check_central_difference(program_value, x0, N, (size_t)i, 1e-6), g_ext[i], 1e-7);
  CHECK_INT(destroyed, 1); /* the record's data went with the tape */
}

/* An external function whose adjoint is computed by recording and sweeping a
 * nested tape inside the callback: y = exp(x0 * x1) + x2^3. */
static ad_real nested_f(const ad_real *x) {
  return ad_add(ad_exp(ad_mul(x[0], x[1])), ad_mul(x[2], ad_mul(x[2], x[2])));
}
static int nested_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                          const double *ybar) {
  (void)ud, (void)nout, (void)y;
  ad_tape *inner = ad_tape_create();
  ad_tape_begin(inner);
  ad_real xi[3];
  for (size_t i = 0; i < nin; i++) xi[i] = ad_input(x[i]);
  ad_real yi = nested_f(xi);
  ad_tape_end(inner);
  double g[3];
  int rc = ad_gradient(inner, yi, nin, xi, g);
  for (size_t i = 0; i < nin; i++) xbar[i] += ybar[0] * g[i];
  ad_tape_destroy(inner);
  return rc;
}
static const ad_external_ops nested_ops = {nested_reverse, NULL, NULL, "nested tape"};

static void test_nested(void) {
  CHECK_CONTEXT("external function with a nested tape");
  const double x0[3] = {0.4, -0.9, 1.3};
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[3], y;
  for (int i = 0; i < 3; i++) x[i] = ad_input(x0[i]);
  ad_tape_begin(NULL); /* a NULL tape is refused, and recording goes on */
  y = ad_const(exp(x0[0] * x0[1]) + x0[2] * x0[2] * x0[2]);
  CHECK_INT(ad_external(&nested_ops, NULL, 3, x, 1, &y), AD_OK);
  ad_real z = ad_mul(y, ad_cos(x[0]));
  CHECK(ad_tape_is_recording(t));
  ad_tape_end(t);
  double g[3];
  CHECK_INT(ad_gradient(t, z, 3, x, g), AD_OK);
  double yv = ad_value(y), c = cos(x0[0]), s = sin(x0[0]), e = exp(x0[0] * x0[1]);
  CHECK_CLOSE(g[0], x0[1] * e * c - yv * s, 1e-14);
  CHECK_CLOSE(g[1], x0[0] * e * c, 1e-14);
  CHECK_CLOSE(g[2], 3 * x0[2] * x0[2] * c, 1e-14);
  /* no tangent callback: a forward sweep fails clearly */
  CHECK_INT(ad_forward(t), AD_ERR_STATE);
  CHECK(strstr(ad_tape_error_message(t), "tangent") != NULL);
  ad_tape_destroy(t);
  ad_clear_last_error();
}

static int failing_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                           const double *ybar) {
  (void)ud, (void)nin, (void)x, (void)xbar, (void)nout, (void)y, (void)ybar;
  return 7;
}
static const ad_external_ops failing_ops = {failing_reverse, NULL, count_destroy, "failing solver"};

static void test_errors(void) {
  CHECK_CONTEXT("external function errors");
  destroyed = 0;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(2.0), y = ad_const(4.0);
  CHECK_INT(ad_external(&failing_ops, NULL, 1, &x, 1, &y), AD_OK);
  ad_tape_end(t);
  double g;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_ERR_CALLBACK);
  CHECK(strstr(ad_tape_error_message(t), "failing solver") != NULL);
  /* the tape is still usable: reset, re-record without the failing part */
  ad_tape_reset(t);
  CHECK_INT(destroyed, 1);
  ad_tape_begin(t);
  x = ad_input(2.0);
  y = ad_mul(x, x);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 4.0);

  /* passive inputs, or no recording tape: passive outputs, data freed at once */
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real p = ad_const(1.0), q = ad_const(2.0);
  CHECK_INT(ad_external(&failing_ops, NULL, 1, &p, 1, &q), AD_OK);
  CHECK(q.i == 0 && ad_value(q) == 2.0);
  CHECK_INT(destroyed, 2);
  ad_tape_end(t);
  CHECK_INT(ad_external(&failing_ops, NULL, 1, &x, 1, &q), AD_OK);
  CHECK(q.i == 0);
  CHECK_INT(destroyed, 3);

  /* bad arguments */
  ad_external_ops no_reverse = {NULL, NULL, count_destroy, NULL};
  CHECK_INT(ad_external(&no_reverse, NULL, 1, &x, 1, &q), AD_ERR_ARG);
  CHECK_INT(destroyed, 4);
  CHECK_INT(ad_external(NULL, NULL, 1, &x, 1, &q), AD_ERR_ARG);

  /* a stale input (from before the reset) is refused with a clear error */
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real fresh = ad_input(1.0);
  (void)fresh;
  CHECK_INT(ad_external(&lin_ops, NULL, 1, &x, 1, &q), AD_ERR_STALE_HANDLE);
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  ad_tape_end(t);
  ad_tape_destroy(t);
  ad_clear_last_error();
}

int main(void) {
  test_linear();
  test_nested();
  test_errors();
  return check_finish("test_external");
}
