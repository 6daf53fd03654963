/* SPDX-License-Identifier: BSD-3-Clause */
/* The gradient checker: it passes correct code (with the derivatives it
 * reports equal to the closed form), and it catches a deliberately wrong
 * external-function adjoint by finite differences and by the dot-product
 * test, a wrong tangent by the dot-product test, and a failing function. */
#define _POSIX_C_SOURCE 200809L
#include <ariadne_tools.h>
#include <unistd.h>

#include "check.h"

#define N 5

/* The external function y = (x0 x1^2, x1 + 3 x2); `mode` selects which of
 * its callbacks is wrong: 0 none, 1 the reverse, 2 the forward. */
typedef struct ext_cfg {
  int mode;
  int with_forward;
} ext_cfg;
static ext_cfg cfg;

static int ext_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud, (void)nin, (void)nout, (void)y;
  xbar[0] += ybar[0] * x[1] * x[1];
  /* the bug: the factor 2 of d(x1^2)/dx1 forgotten */
  xbar[1] += ybar[0] * (cfg.mode == 1 ? 1.0 : 2.0) * x[0] * x[1] + ybar[1];
  xbar[2] += 3.0 * ybar[1];
  return 0;
}
static int ext_forward(void *ud, size_t nin, const double *x, const double *xdot, size_t nout, const double *y,
                       double *ydot) {
  (void)ud, (void)nin, (void)nout, (void)y;
  ydot[0] = xdot[0] * x[1] * x[1] + 2.0 * x[0] * x[1] * xdot[1];
  ydot[1] = xdot[1] + (cfg.mode == 2 ? -3.0 : 3.0) * xdot[2];
  return 0;
}
static const ad_external_ops ops_fwd = {ext_reverse, ext_forward, NULL, "test map"};
static const ad_external_ops ops_nofwd = {ext_reverse, NULL, NULL, "test map (reverse only)"};

/* f(x) = sin(x3) y0 + y1^2 + x4 exp(x0), and a second output y0 - x4. */
static int fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *out) {
  (void)ud;
  if (n != N) return 1;
  ad_real y[2] = {ad_const(ad_value(x[0]) * ad_value(x[1]) * ad_value(x[1])),
                  ad_const(ad_value(x[1]) + 3.0 * ad_value(x[2]))};
  int rc = ad_external(cfg.with_forward ? &ops_fwd : &ops_nofwd, NULL, 3, x, 2, y);
  if (rc != AD_OK) return 1;
  out[0] = ad_add(ad_add(ad_mul(ad_sin(x[3]), y[0]), ad_mul(y[1], y[1])), ad_mul(x[4], ad_exp(x[0])));
  if (m > 1) out[1] = ad_sub(y[0], x[4]);
  return 0;
}

static const double X0[N] = {0.4, -1.3, 0.8, 0.9, 2.0};

/* dF0/dx_i in closed form. */
static double grad0(size_t i) {
  const double *x = X0;
  double y1 = x[1] + 3.0 * x[2];
  switch (i) {
  case 0: return sin(x[3]) * x[1] * x[1] + x[4] * exp(x[0]);
  case 1: return sin(x[3]) * 2.0 * x[0] * x[1] + 2.0 * y1;
  case 2: return 6.0 * y1;
  case 3: return cos(x[3]) * x[0] * x[1] * x[1];
  default: return exp(x[0]);
  }
}

/* The default options with print: 0 quiet, 1 the report of a failure, 2
 * every report. */
static ad_check_options options_printing(int print) {
  ad_check_options o;
  ad_check_options_default(&o);
  o.print = print;
  return o;
}

static void test_correct(void) {
  CHECK_CONTEXT("correct code");
  cfg = (ext_cfg){0, 1};
  ad_check_options o = options_printing(2);
  o.title = "correct external function";
  o.table_rows = N;
  ad_check_result r;
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 1, &o, &r), AD_OK);
  CHECK(r.passed);
  CHECK_INT(r.failed, 0);
  CHECK_INT(r.checked, N);
  CHECK_INT(r.n, N);
  CHECK(r.dot_done);
  CHECK(r.dot_rel < 1e-12);
  CHECK(r.tangent_rel <= 1.0);
  CHECK_INT(r.nworst, N);
  /* the derivatives it compared are the closed form */
  for (size_t k = 0; k < r.nworst; k++) {
    CHECK_CLOSE(r.worst[k].ad, grad0(r.worst[k].col), 1e-13);
    CHECK_CLOSE(r.worst[k].fd, grad0(r.worst[k].col), 1e-6);
    CHECK(r.worst[k].err <= 1.0);
  }
  /* sorted worst first */
  for (size_t k = 1; k < r.nworst; k++) CHECK(r.worst[k - 1].err >= r.worst[k].err);

  /* A Jacobian block: two outputs, two chosen columns. */
  size_t cols[2] = {1, 4};
  o.columns = cols;
  o.ncolumns = 2;
  o.print = 0;
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 2, &o, &r), AD_OK);
  CHECK_INT(r.checked, 4);
  CHECK_INT(r.m, 2);
  for (size_t k = 0; k < r.nworst; k++) {
    size_t i = r.worst[k].col, j = r.worst[k].row;
    CHECK(i == 1 || i == 4);
    double want = j == 0 ? grad0(i) : (i == 1 ? 2.0 * X0[0] * X0[1] : -1.0);
    CHECK_CLOSE(r.worst[k].ad, want, 1e-13);
  }
}

static void test_wrong_reverse(void) {
  CHECK_CONTEXT("wrong external adjoint");
  for (int fwd = 1; fwd >= 0; fwd--) {
    cfg = (ext_cfg){1, fwd};
    ad_check_options o = options_printing(1); /* the report of the failure */
    o.title = fwd ? "wrong reverse callback" : "wrong reverse callback, no tangent";
    ad_check_result r;
    CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 1, &o, &r), AD_ERR_CHECK);
    CHECK(!r.passed);
    CHECK_INT(r.failed, 1); /* only dF/dx1 is wrong */
    CHECK_INT(r.worst[0].col, 1);
    CHECK(r.worst[0].err > 1.0);
    /* the tape gives the wrong value, the differences the right one */
    double wrong = grad0(1) - sin(X0[3]) * X0[0] * X0[1];
    CHECK_CLOSE(r.worst[0].ad, wrong, 1e-13);
    CHECK_CLOSE(r.worst[0].fd, grad0(1), 1e-6);
    CHECK_INT(r.dot_done, fwd);
    if (fwd) CHECK(r.dot_rel > 1e-3);
  }
}

static void test_wrong_forward(void) {
  CHECK_CONTEXT("wrong external tangent");
  cfg = (ext_cfg){2, 1};
  ad_check_options o = options_printing(0);
  ad_check_result r;
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 1, &o, &r), AD_ERR_CHECK);
  CHECK_INT(r.failed, 0); /* the gradient is right ... */
  CHECK(r.dot_done);
  CHECK(r.dot_rel > 1e-3); /* ... but the tangent disagrees with it */
  CHECK(r.tangent_rel > 1.0);
}

static int failing(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  int *calls = ud;
  (void)n, (void)x, (void)m, (void)y;
  return ++*calls > 1; /* records fine, fails in the first difference */
}

/* y = 2 x with a NaN partial recorded: the tape's derivative is NaN. */
static int nan_partial(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  double p = NAN;
  (void)ud, (void)n, (void)m;
  y[0] = ad_custom(2.0 * ad_value(x[0]), 1, x, &p);
  return 0;
}

static void test_errors(void) {
  CHECK_CONTEXT("errors");
  ad_check_options o = options_printing(0);
  int calls = 0;
  double x = 1.0;
  CHECK_INT(ad_check_gradient(failing, &calls, 1, &x, 1, &o, NULL), AD_ERR_CALLBACK);
  CHECK_INT(ad_check_gradient(NULL, NULL, 1, &x, 1, &o, NULL), AD_ERR_ARG);
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 0, &o, NULL), AD_ERR_ARG);
  /* a NaN derivative never passes */
  ad_check_result r;
  CHECK_INT(ad_check_gradient(nan_partial, NULL, 1, &x, 1, &o, &r), AD_ERR_CHECK);
  CHECK_INT(r.failed, 1);
  CHECK(isnan(r.worst[0].ad));
  CHECK_CLOSE(r.worst[0].fd, 2.0, 1e-9);
  /* The caller's recording is left alone. */
  cfg = (ext_cfg){0, 1};
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(2.0);
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 1, &o, NULL), AD_OK);
  ad_real b = ad_mul(a, a);
  ad_tape_end(t);
  CHECK(ad_tape_current() == NULL);
  double g;
  CHECK_INT(ad_gradient(t, b, 1, &a, &g), AD_OK);
  CHECK_CLOSE(g, 4.0, 1e-15);
  ad_stats s;
  ad_tape_stats(t, &s);
  CHECK_INT(s.records, 0);
  ad_tape_destroy(t);
}


/* Repeated columns are checked once each (and one out of range is ignored,
 * as documented): the column table must hold them whatever their number. */
static void test_repeated_columns(void) {
  CHECK_CONTEXT("repeated columns");
  cfg = (ext_cfg){0, 1};
  ad_check_options o = options_printing(0);
  size_t cols[24];
  for (size_t k = 0; k < 24; k++) cols[k] = k % 3 == 2 ? 3 : 1; /* 1, 1, 3, 1, 1, 3, ... */
  cols[23] = N + 7;
  o.columns = cols;
  o.ncolumns = 24;
  ad_check_result r;
  CHECK_INT(ad_check_gradient(fn, NULL, N, X0, 1, &o, &r), AD_OK);
  CHECK_INT(r.checked, 2);
  CHECK_INT(r.nworst, 2);
  for (size_t k = 0; k < r.nworst; k++) {
    CHECK(r.worst[k].col == 1 || r.worst[k].col == 3);
    CHECK_CLOSE(r.worst[k].ad, grad0(r.worst[k].col), 1e-13);
  }
  if (r.nworst == 2) CHECK(r.worst[0].col != r.worst[1].col);
}

/* What the checker prints while `run` runs, caught from stdout. */
static char printed[8192];
static int run_printed(ad_check_fn f, size_t n, const double *x0, const ad_check_options *o, ad_check_result *r) {
  fflush(stdout);
  FILE *tmp = tmpfile();
  int saved = dup(1);
  dup2(fileno(tmp), 1);
  int rc = ad_check_gradient(f, NULL, n, x0, 1, o, r);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  rewind(tmp);
  size_t k = fread(printed, 1, sizeof printed - 1, tmp);
  printed[k] = '\0';
  fclose(tmp);
  fputs(printed, stdout); /* for the log */
  return rc;
}

/* minmod(a, b): the smaller slope if both have one sign, else 0. */
static ad_real minmod(ad_real a, ad_real b) {
  if (ad_le(ad_mul(a, b), 0.0)) return ad_const(0.0);
  return ad_gt(a, 0.0) ? ad_fmin(a, b) : ad_fmax(a, b);
}

/* A MUSCL-style reconstruction: sum over interior cells of u_i + 1/2
 * minmod(u_i - u_{i-1}, u_{i+1} - u_i). At a flat state every limiter sits
 * at its kink (both slopes 0): each input moved alone leaves every product
 * of slopes <= 0, so the columns see the linear part only and agree, while
 * a random direction gives slopes of one sign in some cell. */
#define NK 8
static int muscl(void *ud, size_t n, const ad_real *u, size_t m, ad_real *y) {
  (void)ud, (void)m;
  ad_real s = ad_const(0.0);
  for (size_t i = 1; i + 1 < n; i++) {
    ad_real lim = minmod(ad_sub(u[i], u[i - 1]), ad_sub(u[i + 1], u[i]));
    s = ad_add(s, ad_add(u[i], ad_mul(0.5, lim)));
  }
  y[0] = s;
  return 0;
}

static void test_kink(void) {
  CHECK_CONTEXT("kink");
  double flat[NK], smooth[NK];
  for (int i = 0; i < NK; i++) {
    flat[i] = 1.0;
    smooth[i] = 0.1 * i * i; /* slopes of one sign, all different: no kink */
  }
  ad_check_options o = options_printing(1);
  o.title = "minmod at a flat state";
  ad_check_result r;
  CHECK_INT(run_printed(muscl, NK, flat, &o, &r), AD_ERR_CHECK);
  CHECK_INT(r.failed, 0);         /* every column agrees ... */
  CHECK(r.dot_rel <= o.dot_tol);  /* ... the sweeps agree with each other ... */
  CHECK(r.tangent_rel > 1.0);     /* ... only the direction crossing the kink does not */
  CHECK(r.kink);
  CHECK_INT(r.nonfinite, 0);
  /* the derivatives compared are those of the linear part, in closed form */
  for (size_t k = 0; k < r.nworst; k++)
    CHECK_CLOSE(r.worst[k].ad, r.worst[k].col == 0 || r.worst[k].col == NK - 1 ? 0.0 : 1.0, 1e-15);
  CHECK(strstr(printed, "FAILED: only the tangent against central differences along xdot failed") != NULL);
  CHECK(strstr(printed, "probably not differentiable at x0") != NULL);
  CHECK(strstr(printed, "move the point") != NULL);
  CHECK(strstr(r.verdict, "fabs, fmin/fmax, a branch") != NULL);
  CHECK(strstr(printed, "0 of 8 entries") == NULL);
  /* Moved off the kink, the same code passes. */
  CHECK_INT(run_printed(muscl, NK, smooth, &o, &r), AD_OK);
  CHECK(!r.kink);
  CHECK_INT(r.verdict[0], '\0');
}

/* y = x^2 + 1: a NaN input makes every number of the check NaN. */
static int square(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  (void)ud, (void)n, (void)m;
  y[0] = ad_add(ad_mul(x[0], x[0]), 1.0);
  return 0;
}
/* y = sqrt(x0) + x1: at x0 = 0 the derivative is infinite. */
static int root(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  (void)ud, (void)n, (void)m;
  y[0] = ad_add(ad_sqrt(x[0]), x[1]);
  return 0;
}

static void test_nonfinite(void) {
  ad_check_options o = options_printing(1);
  ad_check_result r;

  CHECK_CONTEXT("NaN input");
  double xn = NAN;
  CHECK_INT(run_printed(square, 1, &xn, &o, &r), AD_ERR_CHECK);
  CHECK(!r.passed);
  CHECK(r.nonfinite > 0);
  CHECK(strstr(r.nonfinite_at, "f(x0): output 0 is nan") != NULL);
  CHECK(isinf(r.dot_rel)); /* not "rel. diff 0" */
  CHECK(strstr(printed, "rel. diff 0.0e+00") == NULL);
  CHECK(strstr(printed, "rel. diff inf  MISMATCH") != NULL);
  CHECK(strstr(printed, "not finite: f(x0): output 0 is nan") != NULL);
  CHECK(strstr(printed, "FAILED: a NaN or infinity in the comparisons") != NULL);

  CHECK_CONTEXT("sqrt at 0");
  double x0[2] = {0.0, 3.0};
  CHECK_INT(run_printed(root, 2, x0, &o, &r), AD_ERR_CHECK);
  CHECK(isfinite(r.atol)); /* the tolerance comes from the finite derivative d/dx1 = 1 */
  CHECK_CLOSE(r.atol, 1e-7, 1e-12);
  CHECK(strstr(printed, "atol inf") == NULL);
  CHECK(strstr(r.nonfinite_at, "derivative of output 0 with respect to input 0 is inf") != NULL);
  CHECK(strstr(printed, "not finite: the tape's derivative of output 0 with respect to input 0 is inf") != NULL);
  /* d/dx1 is still compared, and right */
  for (size_t k = 0; k < r.nworst; k++)
    if (r.worst[k].col == 1) CHECK_CLOSE(r.worst[k].ad, 1.0, 1e-15);

  CHECK_CONTEXT("infinite differences");
  /* y = sqrt(x0) + x1 at x0 = 1e-300: the tape's derivative is finite but
   * the differences step into x0 < 0, where f is NaN. */
  x0[0] = 1e-300;
  CHECK_INT(run_printed(root, 2, x0, &o, &r), AD_ERR_CHECK);
  CHECK(strstr(r.nonfinite_at, "central difference of output 0 along input 0 is nan at every step") != NULL);
}

int main(void) {
  test_correct();
  test_wrong_reverse();
  test_wrong_forward();
  test_errors();
  test_repeated_columns();
  test_kink();
  test_nonfinite();
  return check_finish("test_check");
}
