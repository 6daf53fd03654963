/* SPDX-License-Identifier: BSD-3-Clause */
/* The finite check (ad_tape_set_check_finite, ARIADNE_CHECK_FINITE=1): the
 * first NaN or infinity recorded, on every recording path (inline
 * operations, preaccumulation regions, ad_custom and the fused statements,
 * inputs, external functions), becomes the sticky error AD_ERR_NONFINITE
 * naming the operation; a reverse sweep names the first statement whose
 * adjoint became non-finite. With the check on, finite code records the same
 * derivatives (checked against the closed form), and with it off the same
 * non-finite code records without a word, as before. */
#define _POSIX_C_SOURCE 200809L
#include <ariadne_tools.h>
#include <stdlib.h>

#include "check.h"

/* The recording of `body` on a fresh tape with the check on. */
typedef void (*body_fn)(ad_real *x);

static int record(body_fn body, int check, char *msg, size_t size) {
  ad_tape *t = ad_tape_create();
  ad_tape_set_check_finite(t, check);
  ad_tape_begin(t);
  ad_real x[3] = {ad_input(0.0), ad_input(-1.0), ad_input(2.0)};
  body(x);
  ad_tape_end(t);
  int rc = ad_tape_error(t);
  snprintf(msg, size, "%s", ad_tape_error_message(t));
  ad_tape_destroy(t);
  return rc;
}

static void sqrt_at_0(ad_real *x) { (void)ad_sqrt(x[0]); }
static void log_of_neg(ad_real *x) { (void)ad_log(x[1]); }
static void div_by_0(ad_real *x) { (void)ad_div(x[2], x[0]); }
static void mul_overflow(ad_real *x) { (void)ad_mul(ad_mul(x[2], 1e300), ad_mul(x[2], 1e300)); }
static void add_overflow(ad_real *x) { (void)ad_add(ad_mul(x[2], 0.6e308), ad_mul(x[2], 0.6e308)); }
static void region_sqrt(ad_real *x) {
  ad_stmt_begin();
  ad_real y = ad_mul(ad_sqrt(x[0]), x[2]);
  (void)ad_stmt_end(y);
}
static void custom_nan(ad_real *x) {
  double p[2] = {1.0, NAN};
  (void)ad_custom(1.0, 2, x + 1, p);
}
static void custom_long(ad_real *x) { /* more than 63 arguments: the library's chain */
  ad_real a[70];
  double p[70];
  for (int k = 0; k < 70; k++) a[k] = x[k % 3], p[k] = k == 66 ? INFINITY : 1.0;
  (void)ad_custom(0.5, 70, a, p);
}
static void lincomb_inf(ad_real *x) {
  double w[3] = {1.0, INFINITY, 2.0};
  (void)ad_lincomb(3, w, x);
}
static void sum_overflow(ad_real *x) {
  ad_real big[2] = {ad_mul(x[2], 0.6e308), ad_mul(x[2], 0.6e308)};
  (void)ad_sum(2, big);
}
static void input_nan(ad_real *x) {
  (void)x;
  (void)ad_input(NAN);
}
static int ext_rev(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                   const double *ybar) {
  (void)ud, (void)nin, (void)x, (void)nout, (void)y;
  xbar[0] += ybar[0];
  return 0;
}
static const ad_external_ops ext_ops = {ext_rev, NULL, NULL, "test map"};
static void external_nan(ad_real *x) {
  ad_real out[1] = {ad_const(NAN)};
  (void)ad_external(&ext_ops, NULL, 1, x + 2, 1, out);
}
static void fine(ad_real *x) { (void)ad_add(ad_sin(x[2]), ad_mul(x[1], x[2])); }

static void test_recording(void) {
  static const struct {
    const char *what;
    body_fn body;
    const char *want; /* in the message */
  } cases[] = {
      {"sqrt at 0", sqrt_at_0,
       "ad_sqrt: the partial with respect to argument 1 is inf (the value is 0), at what would "
       "be statement %4; arguments %1 = 0 (ad_input)"},
      {"log(-1)", log_of_neg, "ad_log: the value is nan, at what would be statement %4; arguments %2 = -1"},
      {"1/0", div_by_0, "ad_div: the value is inf"},
      {"overflowing product", mul_overflow, "ad_mul: the value is inf, at what would be statement %6"},
      {"overflowing sum", add_overflow, "ad_add: the value is inf"},
      {"region", region_sqrt, "ad_sqrt: the partial with respect to argument 1 is inf"},
      {"ad_custom", custom_nan, "ad_custom: the partial with respect to argument 2 is nan"},
      {"ad_custom of 70 arguments", custom_long, "ad_custom: the partial with respect to argument 67 is inf"},
      {"ad_lincomb", lincomb_inf, "ad_lincomb: the value is -inf"},
      {"ad_sum", sum_overflow, "ad_sum: the value is inf"},
      {"ad_input", input_nan, "ad_input: a value entering the tape is nan, at what would be statement %4"},
      {"external function", external_nan, "external function: a value entering the tape is nan"},
  };
  char msg[512];
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    CHECK_CONTEXT("%s", cases[k].what);
    CHECK_INT(record(cases[k].body, 1, msg, sizeof msg), AD_ERR_NONFINITE);
    if (!CHECK(strstr(msg, cases[k].want) != NULL)) fprintf(stderr, "  message: %s\n", msg);
    CHECK(strstr(msg, "AD_ERR_NONFINITE") != NULL);
    /* Off, the same recording says nothing, as before. */
    CHECK_INT(record(cases[k].body, 0, msg, sizeof msg), AD_OK);
  }
  CHECK_CONTEXT("finite code");
  CHECK_INT(record(fine, 1, msg, sizeof msg), AD_OK);
}

/* f(x) = sum of every recording path on finite values, gradient in closed
 * form: the check on records the same derivatives. */
static ad_real paths(const ad_real *x) {
  ad_real a = ad_mul(ad_sin(x[0]), x[1]); /* inline */
  ad_stmt_begin();
  ad_real r = ad_stmt_end(ad_add(ad_mul(x[0], x[0]), ad_exp(x[2]))); /* a region */
  double p[2] = {2.0, -1.0};
  ad_real c = ad_custom(2.0 * ad_value(x[1]) - ad_value(x[2]), 2, x + 1, p); /* 2 x1 - x2 */
  double w[3] = {1.0, 2.0, 3.0};
  ad_real l = ad_lincomb(3, w, x);
  ad_real s = ad_sub(ad_neg(a), ad_fmax(r, c));
  ad_real parts[3] = {s, l, ad_sqrt(x[1])};
  return ad_sum(3, parts);
}
static void grad_closed(const double *x, double *g) {
  double r = x[0] * x[0] + exp(x[2]), c = 2.0 * x[1] - x[2];
  int rmax = r >= c;
  g[0] = -cos(x[0]) * x[1] + (rmax ? -2.0 * x[0] : 0.0) + 1.0;
  g[1] = -sin(x[0]) + (rmax ? 0.0 : -2.0) + 2.0 + 0.5 / sqrt(x[1]);
  g[2] = (rmax ? -exp(x[2]) : 1.0) + 3.0;
}

static void test_same_derivatives(void) {
  CHECK_CONTEXT("finite code, check on");
  const double X[3] = {0.3, 1.7, -0.4};
  double want[3], g[3];
  grad_closed(X, want);
  for (int check = 0; check < 2; check++) {
    ad_tape *t = ad_tape_create();
    ad_tape_set_check_finite(t, check);
    ad_tape_begin(t);
    ad_real x[3] = {ad_input(X[0]), ad_input(X[1]), ad_input(X[2])};
    ad_real y = paths(x);
    ad_tape_end(t);
    CHECK_INT(ad_tape_error(t), AD_OK);
    CHECK_INT(ad_gradient(t, y, 3, x, g), AD_OK);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(g[i], want[i], 1e-14);
    ad_tape_destroy(t);
  }
}

static void test_env_and_reset(void) {
  CHECK_CONTEXT("ARIADNE_CHECK_FINITE=1");
  setenv("ARIADNE_CHECK_FINITE", "1", 1);
  ad_tape *t = ad_tape_create();
  unsetenv("ARIADNE_CHECK_FINITE");
  ad_tape_begin(t);
  ad_real x = ad_input(0.0);
  ad_real y = ad_sqrt(x);
  CHECK_INT(ad_tape_error(t), AD_ERR_NONFINITE);
  CHECK(ad_value(y) == 0.0); /* the value is still computed */
  /* Recording stopped: later operations are passive. */
  CHECK_INT(ad_mul(x, 2.0).i, 0);
  ad_tape_end(t);
  /* A reset keeps the check (the failure had turned it off). */
  CHECK_CONTEXT("after ad_tape_reset");
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(0.0);
  (void)ad_log(x);
  CHECK_INT(ad_tape_error(t), AD_ERR_NONFINITE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_log: the value is -inf");
  ad_tape_end(t);
  /* Turned off, the recording is as before. */
  ad_tape_set_check_finite(t, 0);
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(0.0);
  (void)ad_log(x);
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  ad_tape_destroy(t);
  /* No tape: a clear error, nothing else. */
  ad_clear_last_error();
  ad_tape_set_check_finite(NULL, 1);
  CHECK_INT(ad_last_error(), AD_ERR_ARG);
  CHECK_CONTAINS(ad_tape_error_message(NULL), "ad_tape_set_check_finite: tape is NULL");
}

static int ext_rev_nan(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud, (void)nin, (void)x, (void)nout, (void)y, (void)ybar;
  xbar[0] += NAN;
  return 0;
}
static const ad_external_ops ext_nan_ops = {ext_rev_nan, NULL, NULL, "nan adjoint"};

/* The tape's message names the handles `fmt` spells as %%%u (a format that
 * names one ends in %.0u, which prints nothing for the 0 passed). */
static void check_named(ad_tape *t, const char *fmt, ad_index a, ad_index b) {
  char want[256];
  snprintf(want, sizeof want, fmt, (unsigned)a, (unsigned)b);
  CHECK_CONTAINS(ad_tape_error_message(t), want);
}

static void test_sweep(void) {
  CHECK_CONTEXT("sweep: sqrt(x*x) at 0");
  /* Recorded with names but without the check (the recording would stop at
   * sqrt's infinite partial), swept with it. */
  ad_tape *t = ad_tape_create();
  ad_tape_set_record_names(t, 1);
  ad_tape_begin(t);
  ad_real x = ad_input(0.0), z = ad_input(3.0);
  ad_real sq = ad_mul(x, x);
  ad_real r = ad_sqrt(sq);
  ad_real y = ad_add(r, ad_mul(z, z));
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  double g[2];
  CHECK_INT(ad_gradient(t, y, 2, (ad_real[]){x, z}, g), AD_OK); /* off: NaN, silently */
  CHECK(isnan(g[0]));
  ad_tape_set_check_finite(t, 1);
  ad_adjoints_zero(t);
  ad_seed(t, y, 1.0);
  CHECK_INT(ad_reverse(t), AD_ERR_NONFINITE);
  check_named(t,
              "reverse sweep: the adjoint of %%%u = 0 (ad_mul) became inf at statement %%%u = 0 (ad_sqrt): its "
              "partial inf times its adjoint 1",
              sq.i, r.i);
  /* The sweep ran to its end: the other input's adjoint is right. */
  CHECK_CLOSE(ad_adjoint(t, z), 6.0, 1e-15);
  /* The error is the sweep's, not the tape's: the next sweep runs, and
   * ad_gradient fills the gradient all the same (d/dz = 2 z). */
  CHECK_INT(ad_tape_error(t), AD_OK);
  g[0] = g[1] = 0.0;
  CHECK_INT(ad_gradient(t, y, 2, (ad_real[]){x, z}, g), AD_ERR_NONFINITE);
  CHECK(isnan(g[0]));
  CHECK_CLOSE(g[1], 6.0, 1e-15);

  CHECK_CONTEXT("sweep: a non-finite seed");
  ad_real w = ad_mul(z, 2.0); /* passive: the tape does not record */
  (void)w;
  ad_adjoints_zero(t);
  ad_seed(t, y, INFINITY);
  CHECK_INT(ad_reverse(t), AD_ERR_NONFINITE);
  check_named(t, "the adjoint of statement %%%u = 9 (ad_add) is inf where the sweep reaches it%.0u", y.i, 0);
  ad_tape_destroy(t);

  CHECK_CONTEXT("sweep: a record's NaN adjoint on an input");
  t = ad_tape_create();
  ad_tape_set_check_finite(t, 1);
  ad_tape_begin(t);
  ad_real in = ad_input(1.0), out[1] = {ad_const(1.0)};
  CHECK_INT(ad_external(&ext_nan_ops, NULL, 1, &in, 1, out), AD_OK);
  ad_tape_end(t);
  ad_seed(t, out[0], 1.0);
  CHECK_INT(ad_reverse(t), AD_ERR_NONFINITE);
  check_named(t, "the adjoint of statement %%%u = 1 (ad_input) is nan%.0u", in.i, 0);
  ad_tape_destroy(t);
}

/* Tangent sweeps and the Jacobian: sqrt(x*x) at 0 again. The tangent of
 * x*x is 0 there, so the tangent sweep alone stays finite (0 times the
 * infinite partial is skipped); the Jacobian's reverse row and a seeded
 * overflow are not. */
static void test_tangent(void) {
  CHECK_CONTEXT("tangent sweep: an overflow through finite partials");
  ad_tape *t = ad_tape_create();
  ad_tape_set_record_names(t, 1);
  ad_tape_begin(t);
  ad_real x = ad_input(1e-300);
  ad_real y = ad_mul(x, 1e300);  /* 1, partial 1e300 */
  ad_real z = ad_mul(y, 1e300);  /* 1e300, partial 1e300: tangent 1e600 */
  ad_real u = ad_add(z, ad_sin(x));
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  ad_tangents_zero(t);
  ad_tangent_seed(t, x, 1.0);
  CHECK_INT(ad_forward(t), AD_OK); /* off: inf, silently */
  CHECK(isinf(ad_tangent(t, u)));
  ad_tape_set_check_finite(t, 1);
  ad_tangents_zero(t);
  ad_tangent_seed(t, x, 1.0);
  CHECK_INT(ad_forward(t), AD_ERR_NONFINITE);
  static const char want[] = "tangent sweep: the tangent of statement %%%u = 1e+300 (ad_mul) became inf: the partial "
                             "1e+300 for its argument %%%u = 1 (ad_mul) times that argument's tangent 1e+300";
  check_named(t, want, z.i, y.i);
  /* The sweep ran to its end and the tape is not in error. */
  CHECK(isinf(ad_tangent(t, u)));
  CHECK_INT(ad_tape_error(t), AD_OK);

  CHECK_CONTEXT("ad_jacobian under the check");
  /* Two outputs, one input: tangent sweeps (m > n). Off, the vector sweep
   * returns inf silently; on, the scalar sweeps name the statement. */
  double J[2] = {0.0, 0.0};
  ad_tape_set_check_finite(t, 0);
  CHECK_INT(ad_jacobian(t, 2, (ad_real[]){u, y}, 1, &x, J), AD_OK);
  CHECK(isinf(J[0]));
  CHECK_CLOSE(J[1], 1e300, 1e285);
  ad_tape_set_check_finite(t, 1);
  J[0] = J[1] = 0.0;
  CHECK_INT(ad_jacobian(t, 2, (ad_real[]){u, y}, 1, &x, J), AD_ERR_NONFINITE);
  check_named(t, want, z.i, y.i);
  /* One output (m <= n): a reverse sweep, named as such. */
  CHECK_INT(ad_jacobian(t, 1, &u, 1, &x, J), AD_ERR_NONFINITE);
  CHECK_CONTAINS(ad_tape_error_message(t), "reverse sweep: the adjoint of");
  ad_tape_destroy(t);
}

int main(void) {
  unsetenv("ARIADNE_CHECK_FINITE");
  unsetenv("ARIADNE_RECORD_NAMES");
  test_recording();
  test_same_derivatives();
  test_env_and_reset();
  test_sweep();
  test_tangent();
  return check_finish("test_finite");
}
