/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Preaccumulation regions (ad_stmt_begin ... ad_stmt_end / ad_stmt_end_n) by
 * forward propagation of partials, and every case in which a region is
 * recorded operation by operation instead (more inputs than a row holds,
 * non-finite partials, special records, new inputs, fused statements,
 * positions, long regions).
 *
 * Each program is recorded twice, with and without regions; the two
 * gradients (or Jacobians) must agree to round-off, and a region must leave
 * one statement per result. The multi-output kernel is also checked against
 * central finite differences.
 */
#include <ariadne.h>
#include <stdlib.h>

#include "check.h"

typedef ad_real (*program)(size_t n, const ad_real *x, int regions);

/* Record prog with and without regions on fresh tapes; compare the
 * gradients (relative to the largest entry) and return the statements the
 * region recording left beyond the n inputs. */
static uint64_t compare(program prog, size_t n, const double *x0, double rtol) {
  double *g[2];
  uint64_t stmts = 0;
  for (int regions = 0; regions < 2; regions++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real *x = malloc(n * sizeof *x);
    for (size_t k = 0; k < n; k++) x[k] = ad_input(x0[k]);
    ad_real y = prog(n, x, regions);
    ad_tape_end(t);
    g[regions] = malloc(n * sizeof(double));
    CHECK_INT(ad_gradient(t, y, n, x, g[regions]), AD_OK);
    if (ad_tape_error(t) != AD_OK) fprintf(stderr, "%s\n", ad_tape_error_message(t));
    ad_stats st;
    ad_tape_stats(t, &st);
    stmts = st.statements - n;
    free(x);
    ad_tape_destroy(t);
  }
  double scale = 0.0;
  for (size_t k = 0; k < n; k++) scale = fmax(scale, fabs(g[0][k]));
  for (size_t k = 0; k < n; k++) CHECK_CLOSE2(g[1][k], g[0][k], rtol, rtol * scale);
  free(g[0]);
  free(g[1]);
  return stmts;
}

static void begin(int regions) {
  if (regions) ad_stmt_begin();
}
static ad_real end(int regions, ad_real r) { return regions ? ad_stmt_end(r) : r; }

/* ------------------------------------------------------------------------ */
/* The common case: the heat benchmark's cell update, 5 inputs per region     */
/* ------------------------------------------------------------------------ */

static ad_real cell(ad_real x, ad_real n, ad_real s, ad_real w, ad_real e) {
  ad_real lap = ad_sub(ad_add(ad_add(ad_add(n, s), w), e), ad_mul(4.0, x));
  ad_real v = ad_add(x, ad_mul(0.2, lap));
  v = ad_add(v, ad_mul(ad_mul(0.1, x), ad_sub(1.0, x)));
  return ad_add(v, ad_mul(0.01, ad_sin(x)));
}

enum { GRID = 12, STEPS = 4 };

static ad_real heat(size_t n, const ad_real *x, int regions) {
  ad_real u[GRID * GRID], v[GRID * GRID];
  (void)n;
  for (int k = 0; k < GRID * GRID; k++) u[k] = v[k] = x[k];
  for (int t = 0; t < STEPS; t++) {
    for (int i = 1; i < GRID - 1; i++)
      for (int j = 1; j < GRID - 1; j++) {
        int k = i * GRID + j;
        begin(regions);
        v[k] = end(regions, cell(u[k], u[k - GRID], u[k + GRID], u[k - 1], u[k + 1]));
      }
    for (int k = 0; k < GRID * GRID; k++) u[k] = v[k];
  }
  return ad_dot(GRID * GRID, u, u);
}

static void test_heat(void) {
  CHECK_CONTEXT("heat cells");
  double x0[GRID * GRID];
  for (int k = 0; k < GRID * GRID; k++) x0[k] = 0.5 + 0.4 * sin(0.37 * k);
  uint64_t s = compare(heat, GRID * GRID, x0, 1e-13);
  /* one statement per cell update, and the final dot product (288
   * arguments: a chain of 5 statements of at most 63) */
  CHECK_INT(s, (GRID - 2) * (GRID - 2) * STEPS + 5);

  /* the tape of one region: a statement of five arguments */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a[5];
  for (int k = 0; k < 5; k++) a[k] = ad_input(0.3 + 0.1 * k);
  ad_stmt_begin();
  ad_real r = ad_stmt_end(cell(a[0], a[1], a[2], a[3], a[4]));
  ad_stats st;
  ad_tape_stats(t, &st);
  CHECK_INT(st.statements, 6);
  CHECK_INT(st.arguments, 5);
  double g[5];
  CHECK_INT(ad_gradient(t, r, 5, a, g), AD_OK);
  double xv = 0.3;
  CHECK_CLOSE(g[0], 1.0 - 0.8 + 0.1 * (1.0 - 2.0 * xv) + 0.01 * cos(xv), 1e-15);
  for (int k = 1; k < 5; k++) CHECK_CLOSE(g[k], 0.2, 1e-15);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Regions recorded operation by operation                                   */
/* ------------------------------------------------------------------------ */

/* More inputs than a row holds (AD__FWD_INPUTS = 8): 12 per region. */
static ad_real many_inputs(size_t n, const ad_real *x, int regions) {
  ad_real acc = ad_const(0.0);
  for (size_t r = 0; r + 12 <= n; r += 3) {
    begin(regions);
    ad_real s = ad_mul(x[r], x[r + 1]);
    for (size_t k = 2; k < 12; k++) s = ad_add(ad_mul(s, 0.9), ad_sin(ad_mul(x[r + k], s)));
    acc = ad_add(acc, end(regions, s));
  }
  return acc;
}

/* Non-finite partials: sqrt at 0 (partial +inf). The per-operation sweep
 * skips a statement whose adjoint is zero, so t - t and 0 * t contribute 0,
 * not NaN; a region must do the same. */
static ad_real nonfinite(size_t n, const ad_real *x, int regions) {
  (void)n;
  begin(regions);
  ad_real t = ad_sqrt(ad_sub(x[0], 0.25));
  ad_real r = ad_add(ad_mul(x[1], 2.0), ad_sub(t, t));
  r = ad_add(r, ad_mul(t, 0.0));
  r = end(regions, r);
  begin(regions);
  ad_real u = ad_sqrt(ad_sub(x[2], 0.5)); /* a dead intermediate */
  (void)u;
  ad_real q = end(regions, ad_mul(x[1], x[2]));
  return ad_add(r, q);
}

static void test_nonfinite(void) {
  CHECK_CONTEXT("non-finite partials");
  double x0[3] = {0.25, 1.5, 0.5};
  compare(nonfinite, 3, x0, 0.0);
  /* and the exact values */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[3] = {ad_input(x0[0]), ad_input(x0[1]), ad_input(x0[2])};
  ad_real y = nonfinite(3, x, 1);
  double g[3];
  CHECK_INT(ad_gradient(t, y, 3, x, g), AD_OK);
  CHECK_SAME(g[0], 0.0);
  CHECK_SAME(g[1], 2.0 + 0.5);
  CHECK_SAME(g[2], 1.5);
  ad_tape_destroy(t);
}

/* A region longer than the values forward propagation keeps (2048). */
static ad_real long_region(size_t n, const ad_real *x, int regions) {
  begin(regions);
  ad_real s = ad_add(x[0], x[1]);
  for (int k = 0; k < 3000; k++) s = ad_add(ad_mul(s, 0.999), ad_mul(ad_cos(s), ad_mul(x[(size_t)k % n], 1e-3)));
  return end(regions, ad_mul(s, x[2]));
}

/* An input (ad_input) and fused statements inside regions. */
static ad_real fused_inside(size_t n, const ad_real *x, int regions) {
  begin(regions);
  ad_real s = ad_sum(n, x);
  ad_real d = ad_dot(n, x, x);
  ad_real r = end(regions, ad_mul(ad_sin(s), d));
  begin(regions);
  ad_real args[3] = {x[0], r, x[2]};
  double p[3] = {2.0, 0.5, -1.0};
  ad_real c = ad_custom(2.0 * x[0].v + 0.5 * r.v - x[2].v, 3, args, p);
  ad_real f = ad_fma(c, x[1], ad_mul(c, c));
  return end(regions, f);
}

static int ext_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud;
  (void)nin;
  (void)nout;
  (void)y;
  xbar[0] += ybar[0] * 3.0 * x[0] * x[0];
  xbar[1] += ybar[0];
  return 0;
}
static const ad_external_ops ext_ops = {ext_reverse, NULL, NULL, "cube_plus"};

/* A special record inside a region: the region is left as recorded. */
static ad_real external_inside(size_t n, const ad_real *x, int regions) {
  (void)n;
  begin(regions);
  ad_real a = ad_mul(x[0], x[1]);
  ad_real in[2] = {a, x[2]};
  ad_real out[1] = {ad_const(a.v * a.v * a.v + x[2].v)};
  CHECK_INT(ad_external(&ext_ops, NULL, 2, in, 1, out), AD_OK);
  ad_real r = end(regions, ad_add(ad_mul(out[0], a), x[0]));
  return r;
}

static void test_recorded(void) {
  double x0[40];
  for (int k = 0; k < 40; k++) x0[k] = 0.3 + 0.02 * k;
  CHECK_CONTEXT("12 inputs per region");
  uint64_t s = compare(many_inputs, 40, x0, 1e-13);
  CHECK_INT(s, 10 + 10); /* one statement per region, and the sums */
  CHECK_CONTEXT("long region");
  CHECK_INT(compare(long_region, 5, x0, 1e-12), 1);
  CHECK_CONTEXT("fused statements inside");
  compare(fused_inside, 6, x0, 1e-13);
  CHECK_CONTEXT("external function inside");
  compare(external_inside, 3, x0, 1e-14);

  CHECK_CONTEXT("new input inside");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(0.7);
  ad_stmt_begin();
  ad_real u = ad_mul(a, a);
  ad_real b = ad_input(1.3); /* an independent variable made inside */
  ad_real r = ad_stmt_end(ad_mul(u, ad_exp(b)));
  double g[1];
  /* b is discarded with the region, as every value but the result */
  CHECK_INT(ad_gradient(t, r, 1, &a, g), AD_OK);
  CHECK_CLOSE(g[0], 2.0 * 0.7 * exp(1.3), 1e-15);

  CHECK_CONTEXT("position inside");
  ad_tape_reset(t);
  a = ad_input(0.7);
  ad_stmt_begin();
  u = ad_sin(a);
  ad_tape_pos p = ad_tape_position(t); /* the region is recorded from here on */
  ad_real w = ad_mul(u, a);
  r = ad_stmt_end(w);
  CHECK_INT(ad_gradient(t, r, 1, &a, g), AD_OK);
  CHECK_CLOSE(g[0], cos(0.7) * 0.7 + sin(0.7), 1e-15);
  (void)p;
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Several results: a Rusanov flux of the shallow water equations             */
/* ------------------------------------------------------------------------ */

static void flux(const ad_real *l, const ad_real *r, ad_real *f) {
  const double g = 9.81;
  ad_real ul = ad_div(l[1], l[0]), ur = ad_div(r[1], r[0]);
  ad_real fl0 = l[1], fr0 = r[1];
  ad_real fl1 = ad_add(ad_mul(l[1], ul), ad_mul(0.5 * g, ad_mul(l[0], l[0])));
  ad_real fr1 = ad_add(ad_mul(r[1], ur), ad_mul(0.5 * g, ad_mul(r[0], r[0])));
  ad_real sl = ad_add(ad_fabs(ul), ad_sqrt(ad_mul(g, l[0])));
  ad_real sr = ad_add(ad_fabs(ur), ad_sqrt(ad_mul(g, r[0])));
  ad_real s = ad_fmax(sl, sr);
  f[0] = ad_mul(0.5, ad_sub(ad_add(fl0, fr0), ad_mul(s, ad_sub(r[0], l[0]))));
  f[1] = ad_mul(0.5, ad_sub(ad_add(fl1, fr1), ad_mul(s, ad_sub(r[1], l[1]))));
}

static ad_real swe(size_t n, const ad_real *x, int regions) {
  size_t cells = n / 2;
  ad_real q[2 * 16], f[2 * 17];
  for (size_t k = 0; k < n; k++) q[k] = x[k];
  for (int t = 0; t < 3; t++) {
    for (size_t i = 1; i < cells; i++) {
      begin(regions);
      flux(&q[2 * (i - 1)], &q[2 * i], &f[2 * i]);
      if (regions) ad_stmt_end_n(2, &f[2 * i]);
    }
    for (size_t i = 1; i + 1 < cells; i++)
      for (int c = 0; c < 2; c++)
        q[2 * i + c] = ad_sub(q[2 * i + c], ad_mul(0.05, ad_sub(f[2 * (i + 1) + c], f[2 * i + c])));
  }
  ad_real J = ad_const(0.0);
  for (size_t k = 0; k < n; k++) J = ad_add(J, ad_mul(ad_mul(q[k], q[k]), 1.0 + 0.1 * (double)k));
  return J;
}

static void test_multi(void) {
  CHECK_CONTEXT("shallow water fluxes, ad_stmt_end_n");
  double x0[32];
  for (int i = 0; i < 16; i++) {
    x0[2 * i] = 1.0 + 0.3 * sin(0.7 * i);
    x0[2 * i + 1] = 0.2 * cos(0.4 * i) * x0[2 * i];
  }
  uint64_t s = compare(swe, 32, x0, 1e-13);
  /* per step 2 statements per face (15 faces) and 3 per updated value
   * (14 cells, 2 each); 3 per term of J */
  CHECK_INT(s, 3 * (15 * 2 + 14 * 2 * 3) + 32 * 3);

  /* the region's gradient against central differences of the primal */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[32];
  for (int k = 0; k < 32; k++) x[k] = ad_input(x0[k]);
  ad_real J = swe(32, x, 1);
  ad_tape_end(t);
  double g[32];
  CHECK_INT(ad_gradient(t, J, 32, x, g), AD_OK);
  for (int k = 0; k < 32; k += 5) {
    double h = 1e-6 * fmax(1.0, fabs(x0[k])), xp[32], xm[32];
    ad_real ap[32], am[32];
    for (int j = 0; j < 32; j++) xp[j] = xm[j] = x0[j];
    xp[k] += h;
    xm[k] -= h;
    for (int j = 0; j < 32; j++) {
      ap[j] = ad_const(xp[j]);
      am[j] = ad_const(xm[j]);
    }
    double d = (ad_value(swe(32, ap, 1)) - ad_value(swe(32, am, 1))) / (2.0 * h);
    CHECK_CLOSE2(g[k], d, 1e-6, 1e-7);
  }
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static void test_stale(void) {
  CHECK_CONTEXT("a value of another tape inside a region");
  ad_tape *other = ad_tape_create(), *t = ad_tape_create();
  ad_real o = check_input_on(other, 2.0);
  ad_tape_begin(t);
  ad_real a = ad_input(1.0);
  ad_stmt_begin();
  ad_real u = ad_mul(a, a);
  ad_real v = ad_add(u, o);
  ad_real r = ad_stmt_end(v);
  CHECK_SAME(ad_value(r), 3.0);
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_add");
  double g;
  CHECK_INT(ad_gradient(t, r, 1, &a, &g), AD_ERR_STALE_HANDLE);
  ad_tape_reset(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  /* the tape records regions again after the reset */
  a = ad_input(1.0);
  ad_stmt_begin();
  r = ad_stmt_end(ad_mul(ad_exp(a), a));
  CHECK_INT(ad_gradient(t, r, 1, &a, &g), AD_OK);
  CHECK_CLOSE(g, 2.0 * exp(1.0), 1e-15);
  ad_tape_destroy(t);
  ad_tape_destroy(other);
}

/* The tape ends, and is destroyed, while a region on it is open: the region
 * is left as recorded, and its end touches no freed memory. */
static void test_tape_gone(void) {
  CHECK_CONTEXT("tape ended inside a region");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(0.5);
  ad_stmt_begin();
  ad_real u = ad_mul(ad_sin(a), a);
  ad_tape_end(t);
  ad_real r = ad_stmt_end(u);
  CHECK_SAME(ad_value(r), sin(0.5) * 0.5);
  double g;
  CHECK_INT(ad_gradient(t, r, 1, &a, &g), AD_OK);
  CHECK_CLOSE(g, cos(0.5) * 0.5 + sin(0.5), 1e-15);

  ad_tape_reset(t);
  ad_tape_begin(t);
  a = ad_input(0.5);
  ad_stmt_begin();
  u = ad_mul(a, a);
  ad_tape_destroy(t);
  r = ad_stmt_end(u);
  CHECK_SAME(ad_value(r), 0.25);
  /* the thread records regions again on another tape */
  ad_tape *t2 = ad_tape_create();
  ad_tape_begin(t2);
  a = ad_input(2.0);
  ad_stmt_begin();
  r = ad_stmt_end(ad_mul(a, a));
  CHECK_INT(ad_gradient(t2, r, 1, &a, &g), AD_OK);
  CHECK_CLOSE(g, 4.0, 1e-15);
  ad_tape_destroy(t2);
}


/* ------------------------------------------------------------------------ */
/* Overflow in a row although every partial is finite                        */
/* ------------------------------------------------------------------------ */

/* x = 1e-300: a = 1e200 x and b = 1e200 a have finite partials, but the
 * partial of b with respect to x, 1e400, overflows. Unused (c = 0 b), the
 * per-operation sweep skips b and gives dr/dx = 0; used through a small
 * factor (1e-200 b), it gives 1e200 = 1e-200 * 1e200 * 1e200. Sums overflow
 * the same way (a + a with a = 1e308 x). A region must give what the
 * per-operation recording gives: each case is checked against its closed
 * form with and without a region, with ad_stmt_end and ad_stmt_end_n. */
static ad_real overflow_program(int kase, ad_real x, ad_real y) {
  ad_real yy = ad_mul(y, y);
  switch (kase) {
  case 0: /* unused overflowed product */
    return ad_add(ad_mul(0.0, ad_mul(1e200, ad_mul(1e200, x))), yy);
  case 1: /* used overflowed product */
    return ad_add(ad_mul(1e-200, ad_mul(1e200, ad_mul(1e200, x))), yy);
  case 2: { /* unused overflowed sum */
    ad_real a = ad_mul(1e308, x);
    return ad_add(ad_mul(ad_add(a, a), 0.0), yy);
  }
  default: { /* an overflowed row that cancels: a + a - 2 a, used; its derivative is 0 */
    ad_real a = ad_mul(1e308, x);
    return ad_add(ad_mul(ad_sub(ad_add(a, a), ad_mul(2.0, a)), 1.0), yy);
  }
  }
}

static void test_overflow(void) {
  static const double xv[4] = {1e-300, 1e-300, 1.0, 1.0};
  for (int kase = 0; kase < 4; kase++) {
    /* the closed form of the per-operation sweep's result */
    double want_x = kase == 1 ? 1e-200 * 1e200 * 1e200 : 0.0; /* case 3: 1e308 (1 + 1 - 2) */
    for (int mode = 0; mode < 3; mode++) {
      CHECK_CONTEXT("overflow case %d, %s", kase, mode == 0 ? "per operation" : mode == 1 ? "ad_stmt_end" : "ad_stmt_end_n");
      ad_tape *t = ad_tape_create();
      ad_tape_begin(t);
      ad_real in[2] = {ad_input(xv[kase]), ad_input(3.0)};
      if (mode) ad_stmt_begin();
      ad_real r = overflow_program(kase, in[0], in[1]);
      if (mode == 1) r = ad_stmt_end(r);
      if (mode == 2) ad_stmt_end_n(1, &r);
      ad_tape_end(t);
      double g[2];
      CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
      CHECK(isfinite(g[0])); /* CHECK_CLOSE would take inf for 1e200 */
      CHECK_CLOSE(g[0], want_x, 1e-14);
      CHECK_CLOSE(g[1], 6.0, 1e-15);
      ad_tape_destroy(t);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* A position taken inside a region                                          */
/* ------------------------------------------------------------------------ */

/* The region replaces its statements by one, so a position taken inside it
 * names statements that are gone: after the region, ad_tape_reset_to and
 * ad_reverse_to must refuse it, and the tape must stay usable. Statements
 * recorded after the region make the position's handle exist again. */
static void test_position_in_region(void) {
  for (int nested = 0; nested < 2; nested++) {
    CHECK_CONTEXT("position in a region%s", nested ? ", nested" : "");
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(0.7), y = ad_input(1.3);
    ad_stmt_begin();
    if (nested) ad_stmt_begin();
    ad_real a = ad_mul(x, y), b = ad_sin(a);
    ad_tape_pos p = ad_tape_position(t);
    ad_real c = ad_mul(b, x), d = ad_exp(c);
    if (nested) d = ad_stmt_end(d);
    ad_real r = ad_stmt_end(ad_add(d, y));
    /* more statements than the region had, of two arguments each */
    ad_real s = r;
    for (int k = 0; k < 6; k++) s = ad_mul(s, ad_add(x, y));
    ad_tape_end(t);
    CHECK_INT(ad_reverse_to(t, p), AD_ERR_ARG);
    CHECK_INT(ad_tape_reset_to(t, p), AD_ERR_ARG);
    CHECK_CONTAINS(ad_tape_error_message(t), "ad_tape_reset_to");
    CHECK_CONTAINS(ad_tape_error_message(t), "region");
    ad_real in[2] = {x, y};
    double g[2];
    CHECK_INT(ad_gradient(t, s, 2, in, g), AD_ERR_ARG); /* the refused reset, reported once */
    /* the recording is intact: s = (exp(sin(x y) x) + y) (x + y)^6 */
    CHECK_INT(ad_gradient(t, s, 2, in, g), AD_OK);
    double xv = 0.7, yv = 1.3, sn = sin(xv * yv), cs = cos(xv * yv), e = exp(sn * xv), q = pow(xv + yv, 6.0);
    double rv = e + yv, dq = 6.0 * pow(xv + yv, 5.0);
    CHECK_CLOSE(g[0], e * (cs * yv * xv + sn) * q + rv * dq, 1e-13);
    CHECK_CLOSE(g[1], (e * cs * xv * xv + 1.0) * q + rv * dq, 1e-13);
    /* positions from before the region stay good */
    ad_tape_destroy(t);
  }
}

int main(void) {
  test_heat();
  test_nonfinite();
  test_recorded();
  test_multi();
  test_stale();
  test_tape_gone();
  test_overflow();
  test_position_in_region();
  return check_finish("test_stmt");
}
