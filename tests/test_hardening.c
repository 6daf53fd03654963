/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Misuse and corner cases that must give either the right number or a clear
 * error, never a wrong number with AD_OK: stale handles and positions after
 * ad_tape_reset_to, preaccumulation regions across resets, fused statements
 * inside regions, nested tapes ended out of order, vector-mode Jacobians with
 * infinite partials, atan2 and division at the edges of the double range,
 * and the memory limit. Derivatives are judged by closed forms.
 */
#include <ariadne.h>
#include <ariadne_checkpoint.h>

#include <float.h>
#include <stdint.h>

#include "check.h"

/* ------------------------------------------------------------------------ */
/* Handles discarded by ad_tape_reset_to                                     */
/* ------------------------------------------------------------------------ */

/* The plain case: s = x*x is discarded, z reuses its handle number, y still
 * uses s. Wrong today would be dy/dx = 15 (s read as z = 5x). */
static void test_stale_after_reset_to(void) {
  CHECK_CONTEXT("stale handle after ad_tape_reset_to: as an argument");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(3.0);
  ad_tape_pos p = ad_tape_position(t);
  ad_real s = ad_mul(x, x);
  CHECK_INT(ad_tape_reset_to(t, p), AD_OK);
  ad_real z = ad_mul(x, 5.0);
  CHECK_INT(z.i, s.i); /* the handle number is reused: only the recording tells them apart */
  ad_real y = ad_add(s, ad_mul(10.0, x));
  ad_tape_end(t);
  double g = -1.0;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_ERR_STALE_HANDLE);
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_add");
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_tape_reset_to");
  ad_tape_destroy(t);
}

/* Each use of a stale value: seed, gradient output, gradient input, tangent
 * seed, adjoint read, fused statement, external function. */
static int ext_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud, (void)x, (void)nout, (void)y;
  for (size_t i = 0; i < nin; i++) xbar[i] += ybar[0];
  return 0;
}
static const ad_external_ops ext_ops = {ext_reverse, NULL, NULL, "sum_external"};

static void test_stale_uses(void) {
  for (int use = 0; use < 9; use++) {
    CHECK_CONTEXT("stale handle after ad_tape_reset_to: use %d", use);
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(3.0);
    ad_tape_pos p = ad_tape_position(t);
    ad_real s = ad_mul(x, x);
    ad_tape_reset_to(t, p);
    ad_real z = ad_mul(x, 5.0); /* reuses s's handle */
    ad_real y = ad_mul(z, 2.0);
    double g = -1.0;
    int rc = AD_OK;
    switch (use) {
    case 0: /* as the seed of a reverse sweep */
      ad_tape_end(t);
      ad_seed(t, s, 1.0);
      rc = ad_reverse(t);
      break;
    case 1: /* as the output of ad_gradient */
      ad_tape_end(t);
      rc = ad_gradient(t, s, 1, &x, &g);
      break;
    case 2: /* as an input of ad_gradient */
      ad_tape_end(t);
      rc = ad_gradient(t, y, 1, &s, &g);
      break;
    case 3: /* as a tangent seed */
      ad_tape_end(t);
      ad_tangent_seed(t, s, 1.0);
      rc = ad_forward(t);
      break;
    case 4: { /* in ad_jacobian */
      ad_tape_end(t);
      ad_real ys[2] = {y, s};
      double J[2];
      rc = ad_jacobian(t, 2, ys, 1, &x, J);
      break;
    }
    case 5: { /* in a fused statement */
      ad_real a[2] = {x, s};
      ad_real f = ad_sum(2, a);
      ad_tape_end(t);
      rc = ad_gradient(t, f, 1, &x, &g);
      break;
    }
    case 6: { /* in ad_custom */
      ad_real a[2] = {s, x};
      double d[2] = {1.0, 1.0};
      ad_real f = ad_custom(s.v + x.v, 2, a, d);
      ad_tape_end(t);
      rc = ad_gradient(t, f, 1, &x, &g);
      break;
    }
    case 7: { /* as the input of an external function */
      ad_real out = ad_const(s.v);
      rc = ad_external(&ext_ops, NULL, 1, &s, 1, &out);
      CHECK_INT(rc, AD_ERR_STALE_HANDLE);
      ad_tape_end(t);
      rc = ad_gradient(t, y, 1, &x, &g);
      break;
    }
    case 8: /* reading its adjoint */
      ad_tape_end(t);
      CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
      CHECK_CLOSE(g, 10.0, 1e-15);
      CHECK(isnan(ad_adjoint(t, s)));
      rc = ad_reverse(t);
      break;
    }
    CHECK_INT(rc, AD_ERR_STALE_HANDLE);
    ad_tape_destroy(t);
  }
}

/* Nested positions, repeated resets, and many statements recorded since:
 * what lies before the position reset to stays usable, what lies after is
 * stale however often handle numbers are reused. */
static void test_stale_nested_positions(void) {
  CHECK_CONTEXT("nested positions");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(2.0);
  ad_tape_pos p0 = ad_tape_position(t);
  ad_real a = ad_sin(x); /* kept: before p1 */
  ad_tape_pos p1 = ad_tape_position(t);
  ad_real b = ad_exp(x); /* discarded by the reset to p1 */
  ad_tape_pos p2 = ad_tape_position(t);
  ad_real c = ad_mul(b, a); /* discarded */
  (void)p0;
  for (int round = 0; round < 50; round++) {
    CHECK_INT(ad_tape_reset_to(t, p1), AD_OK);
    /* Plenty of new statements, so every discarded number is reissued. */
    ad_real w = a;
    for (int k = 0; k < 20; k++) w = ad_add(ad_mul(w, 0.5), x);
    (void)w;
  }
  /* a is still good: d/dx (3 sin x) = 3 cos x */
  ad_real y = ad_mul(a, 3.0);
  double g = 0.0;
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, 3.0 * cos(2.0), 1e-15);
  /* b and c are stale, p2 is a stale position. */
  ad_tape_begin(t);
  ad_real yb = ad_add(b, 1.0);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, yb, 1, &x, &g), AD_ERR_STALE_HANDLE);
  ad_tape_reset(t);

  CHECK_CONTEXT("a stale position (from a discarded part)");
  ad_tape_begin(t);
  x = ad_input(2.0);
  p1 = ad_tape_position(t);
  b = ad_exp(x);
  p2 = ad_tape_position(t);
  c = ad_mul(b, b);
  CHECK_INT(ad_tape_reset_to(t, p1), AD_OK);
  ad_real d = ad_mul(ad_cos(x), ad_cos(x));
  ad_real e = ad_mul(d, d); /* the tape is longer than at p2 again */
  (void)e;
  CHECK_INT(ad_tape_reset_to(t, p2), AD_ERR_ARG);
  CHECK_CONTAINS(ad_tape_error_message(t), "discarded");
  /* The tape is unharmed by the refused reset: the pending error is
   * reported once, and d's gradient is right afterwards. */
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, d, 1, &x, &g), AD_ERR_ARG);
  CHECK_INT(ad_gradient(t, d, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, -2.0 * cos(2.0) * sin(2.0), 1e-15);
  /* ad_reverse_to with a stale position */
  ad_adjoints_zero(t);
  ad_seed(t, d, 1.0);
  CHECK_INT(ad_reverse_to(t, p2), AD_ERR_ARG);
  CHECK_INT(ad_reverse_to(t, p1), AD_OK);
  (void)c;

  CHECK_CONTEXT("reset_to, then a full reset");
  ad_tape_begin(t);
  ad_tape_pos q = ad_tape_position(t);
  ad_real f = ad_mul(x, x);
  CHECK_INT(ad_tape_reset_to(t, q), AD_OK);
  ad_tape_reset(t);
  ad_real x2 = ad_input(1.5);
  ad_real h = ad_mul(x2, x2);
  ad_real bad = ad_add(f, h);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, bad, 1, &x2, &g), AD_ERR_STALE_HANDLE);
  /* a position from before the full reset */
  ad_tape_reset(t);
  ad_tape_begin(t);
  x2 = ad_input(1.5);
  h = ad_mul(x2, x2);
  ad_tape_end(t);
  CHECK_INT(ad_tape_reset_to(t, q), AD_ERR_ARG);
  CHECK_INT(ad_gradient(t, h, 1, &x2, &g), AD_ERR_ARG);
  CHECK_INT(ad_gradient(t, h, 1, &x2, &g), AD_OK);
  CHECK_CLOSE(g, 3.0, 1e-15);
  ad_tape_destroy(t);
}

/* Per-step re-recording, the pattern positions are for: record a step,
 * sweep it, reset to the position, record the next. The inputs before the
 * position keep working; a value of an earlier step does not. */
static void test_rerecord_steps(void) {
  CHECK_CONTEXT("per-step re-recording");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.7);
  ad_tape_pos p = ad_tape_position(t);
  ad_real prev = x;
  for (int step = 1; step <= 200; step++) {
    ad_tape_reset_to(t, p);
    ad_real y = ad_mul(ad_sin(x), (double)step);
    double g = 0.0;
    CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
    CHECK_CLOSE(g, step * cos(0.7), 1e-14);
    if (step > 1) {
      /* prev is from the previous step, discarded by this reset */
      double gp = 0.0;
      CHECK_INT(ad_gradient(t, prev, 1, &x, &gp), AD_ERR_STALE_HANDLE);
    }
    prev = y;
  }
  ad_tape_end(t);
  ad_tape_destroy(t);
}


/* ------------------------------------------------------------------------ */
/* Preaccumulation regions                                                   */
/* ------------------------------------------------------------------------ */

/* A region that a reset ends: the result is either right or stale. */
static void test_region_across_reset(void) {
  CHECK_CONTEXT("region spanning ad_tape_reset");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.25);
  ad_stmt_begin();
  ad_real a = ad_mul(x, x);
  ad_tape_reset(t);
  ad_real x2 = ad_input(0.5);
  ad_real b = ad_mul(ad_sin(x2), 2.0);
  ad_real r = ad_stmt_end(b);
  (void)a;
  ad_real y = ad_mul(r, r);
  ad_tape_end(t);
  double g = 0.0;
  CHECK_INT(ad_gradient(t, y, 1, &x2, &g), AD_OK);
  CHECK_CLOSE(g, 8.0 * sin(0.5) * cos(0.5), 1e-15);
  /* The result from before the reset is stale, not a wrong number. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(1.25);
  ad_stmt_begin();
  a = ad_mul(x, x);
  ad_tape_reset(t);
  x2 = ad_input(0.5);
  b = ad_mul(x2, 3.0);
  r = ad_stmt_end(a);
  y = ad_add(r, b);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, y, 1, &x2, &g), AD_ERR_STALE_HANDLE);

  CHECK_CONTEXT("region spanning ad_tape_reset_to");
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(1.25);
  ad_tape_pos p = ad_tape_position(t);
  ad_real pre = ad_exp(x);
  ad_stmt_begin();
  a = ad_mul(pre, x);
  CHECK_INT(ad_tape_reset_to(t, p), AD_OK);
  b = ad_mul(ad_cos(x), x);
  r = ad_stmt_end(b);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, r, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, cos(1.25) - 1.25 * sin(1.25), 1e-15);
  /* a position from before a full reset, with a region open */
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(2.0);
  ad_stmt_begin();
  a = ad_mul(x, x);
  CHECK_INT(ad_tape_reset_to(t, p), AD_ERR_ARG);
  r = ad_stmt_end(ad_mul(a, x));
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, r, 1, &x, &g), AD_ERR_ARG); /* the refused reset, reported once */
  CHECK_INT(ad_gradient(t, r, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, 12.0, 1e-15);
  ad_tape_destroy(t);
}

/* A value computed inside a region and used after it (not allowed: only the
 * result survives) must not make a sweep index past the adjoint vector
 * (valgrind and ASan judge that), and a driver refuses it while its handle
 * lies above the last one issued. */
static void test_region_discarded_value(void) {
  CHECK_CONTEXT("region-internal value used after the region");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.5);
  ad_stmt_begin();
  ad_real a = ad_mul(x, x);
  ad_real b = ad_sin(a);
  ad_real c = ad_mul(b, a);
  for (int k = 0; k < 5000; k++) c = ad_mul(c, 1.0001); /* far above the region's start */
  ad_real r = ad_stmt_end(ad_add(c, x));
  (void)b;
  ad_real y = ad_mul(r, c); /* c's handle is above r's, the last issued */
  ad_tape_end(t);
  double g = 0.0;
  int rc = ad_gradient(t, y, 1, &x, &g); /* a misuse: whatever it returns, it stays in bounds */
  (void)rc;
  CHECK_INT(ad_gradient(t, c, 1, &x, &g), AD_ERR_STALE_HANDLE);
  ad_tape_destroy(t);
}

/* ad_sum, ad_dot, ad_lincomb and ad_custom inside regions, many times over
 * (so regions straddle block ends), with closed-form gradients. */
static void test_fused_in_regions(void) {
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024; /* statements run out long before arguments */
  o.block_arguments = 1 << 16;
  for (int kind = 0; kind < 4; kind++) {
    CHECK_CONTEXT("fused statement kind %d inside regions", kind);
    ad_tape *t = ad_tape_create_with(&o);
    enum { N = 40 };
    double xv[N];
    for (int k = 0; k < N; k++) xv[k] = 0.1 + 0.05 * k;
    ad_tape_begin(t);
    ad_real x[N];
    for (int k = 0; k < N; k++) x[k] = ad_input(xv[k]);
    double w[N];
    for (int k = 0; k < N; k++) w[k] = 1.0 + k;
    ad_real acc = ad_const(0.0);
    int reps = 300;
    for (int r = 0; r < reps; r++) {
      /* Two fused statements on the same arguments: the region ends with
       * fewer arguments than it took, but only one statement fewer... */
      ad_stmt_begin();
      ad_real f[2];
      for (int q = 0; q < 2; q++) {
        if (kind == 0) {
          f[q] = ad_sum(N, x);
        } else if (kind == 1) {
          f[q] = ad_dot(N, x, x);
        } else if (kind == 2) {
          f[q] = ad_lincomb(N, w, x);
        } else {
          f[q] = ad_custom(0.0, N, x, w);
        }
      }
      ad_real z = ad_mul(ad_add(f[0], f[1]), 0.25);
      acc = ad_add(acc, ad_stmt_end(z));
      /* ... and a run of one-argument statements after it fills the block. */
      for (int q = 0; q < 30; q++) acc = ad_mul(acc, 1.0);
    }
    ad_tape_end(t);
    CHECK_INT(ad_tape_error(t), AD_OK);
    double g[N];
    CHECK_INT(ad_gradient(t, acc, N, x, g), AD_OK);
    for (int k = 0; k < N; k++) {
      double want = kind == 1 ? reps * xv[k] : kind == 0 ? reps * 0.5 : reps * 0.5 * w[k];
      CHECK_CLOSE(g[k], want, 1e-13);
    }
    ad_tape_destroy(t);
  }

  CHECK_CONTEXT("fused statements in regions with a small index limit");
  o.index_limit = 2000;
  ad_tape *t = ad_tape_create_with(&o);
  ad_tape_begin(t);
  ad_real x[8];
  for (int k = 0; k < 8; k++) x[k] = ad_input(1.0 + k);
  ad_real acc = ad_const(0.0);
  for (int r = 0; r < 5000; r++) {
    ad_stmt_begin();
    ad_real f = ad_mul(ad_sum(8, x), ad_dot(8, x, x));
    acc = ad_add(acc, ad_stmt_end(f));
    for (int q = 0; q < 30; q++) acc = ad_mul(acc, 1.0);
  }
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_ERR_INDEX_OVERFLOW);
  ad_stats st;
  CHECK_INT(ad_tape_stats(t, &st), AD_OK);
  CHECK(st.statements <= 2000);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Nested tapes                                                              */
/* ------------------------------------------------------------------------ */

static void test_nested_out_of_order(void) {
  CHECK_CONTEXT("destroying a tape under a nested one");
  ad_tape *a = ad_tape_create(), *b = ad_tape_create();
  ad_tape_begin(a);
  ad_tape_begin(b);
  ad_tape_destroy(a);
  CHECK(ad_tape_current() == b);
  ad_real x = ad_input(2.0);
  ad_real y = ad_mul(x, x);
  ad_tape_end(b);
  CHECK(ad_tape_current() == NULL);
  double g = 0.0;
  CHECK_INT(ad_gradient(b, y, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, 4.0, 1e-15);
  ad_tape_destroy(b);

  CHECK_CONTEXT("ending nested tapes out of order");
  ad_tape *c = ad_tape_create(), *d = ad_tape_create(), *e = ad_tape_create();
  ad_tape_begin(c);
  ad_tape_begin(d);
  ad_tape_begin(e);
  ad_tape_end(d); /* the middle one */
  CHECK(ad_tape_current() == e);
  ad_tape_end(e);
  CHECK(ad_tape_current() == c);
  ad_tape_destroy(d);
  ad_real u = ad_input(3.0);
  ad_real v = ad_sin(u);
  ad_tape_end(c);
  CHECK(ad_tape_current() == NULL);
  CHECK_INT(ad_gradient(c, v, 1, &u, &g), AD_OK);
  CHECK_CLOSE(g, cos(3.0), 1e-15);
  /* ending the lower one first, then destroying it, then using the upper */
  ad_tape_begin(c);
  ad_tape_begin(e);
  ad_tape_end(c);
  ad_tape_destroy(c);
  ad_tape_end(e);
  CHECK(ad_tape_current() == NULL);
  ad_real w = ad_input(1.0); /* no tape: passive, AD_ERR_NO_TAPE */
  CHECK_INT(w.i, 0);
  CHECK_INT(ad_last_error(), AD_ERR_NO_TAPE);
  ad_clear_last_error();
  ad_tape_destroy(e);
}

/* ------------------------------------------------------------------------ */
/* Jacobians, atan2, division                                                */
/* ------------------------------------------------------------------------ */

/* sqrt(0) is used only by output 1: its infinite partial must not spread
 * into row 0, which ad_gradient computes as (0, 3, 2). */
static void test_jacobian_infinite_partial(void) {
  CHECK_CONTEXT("vector Jacobian with an infinite partial in another row");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[3] = {ad_input(0.0), ad_input(2.0), ad_input(5.0)};
  ad_real s = ad_sqrt(x[0]);
  ad_real y[2] = {ad_add(ad_mul(x[1], 3.0), ad_mul(x[2], 2.0)), ad_add(s, x[1])};
  ad_tape_end(t);
  double J[6], g[3];
  CHECK_INT(ad_jacobian(t, 2, y, 3, x, J), AD_OK);
  CHECK_INT(ad_gradient(t, y[0], 3, x, g), AD_OK);
  for (int k = 0; k < 3; k++) CHECK_SAME(J[k], g[k]);
  CHECK_SAME(J[0], 0.0);
  CHECK_SAME(J[1], 3.0);
  CHECK_SAME(J[2], 2.0);
  CHECK(isinf(J[3]));
  CHECK_SAME(J[4], 1.0);
  CHECK_SAME(J[5], 0.0);
  ad_tape_destroy(t);
}

static void atan2_partials(double yv, double xv, double *dy, double *dx) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real in[2] = {ad_input(yv), ad_input(xv)};
  ad_real r = ad_atan2(in[0], in[1]);
  ad_tape_end(t);
  double g[2] = {NAN, NAN};
  CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
  *dy = g[0];
  *dx = g[1];
  ad_tape_destroy(t);
}

/* The reference uses homogeneity: the partials of atan2 have degree -1, so
 * at (y, x) they are 2^k times those at (2^k y, 2^k x), a point near 1 where
 * the plain formula x / (x^2 + y^2) is accurate. */
static void test_atan2_range(void) {
  const double pts[][2] = {{1e-300, 1e-300}, {1e200, 1e200}, {3e-160, 4e-160}, {-4e-160, 3e-160},
                           {1e-170, 2e150},  {5e300, -7e300}, {0.3, -0.4},      {2.5e-320, 1e-310}};
  for (size_t k = 0; k < sizeof pts / sizeof *pts; k++) {
    double yv = pts[k][0], xv = pts[k][1];
    CHECK_CONTEXT("atan2 partials at (%g, %g)", yv, xv);
    int e = -ilogb(fmax(fabs(yv), fabs(xv)));
    double ys = ldexp(yv, e), xs = ldexp(xv, e), r2 = xs * xs + ys * ys;
    double wy = ldexp(xs / r2, e), wx = ldexp(-ys / r2, e);
    double dy, dx;
    atan2_partials(yv, xv, &dy, &dx);
    /* an underflowed reference (the smaller side scaled to a subnormal) is only good to its own precision */
    double tol_y = fabs(xs) < 1e-290 ? 1e-3 : 1e-15, tol_x = fabs(ys) < 1e-290 ? 1e-3 : 1e-15;
    CHECK_CLOSE2(dy, wy, tol_y, 0.0);
    CHECK_CLOSE2(dx, wx, tol_x, 0.0);
  }
}

static void test_div_subnormal(void) {
  CHECK_CONTEXT("ad_div(0, b) with subnormal b");
  double bs[] = {4.9e-324, 1e-310, -3e-320, DBL_MIN};
  for (size_t k = 0; k < sizeof bs / sizeof *bs; k++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real in[2] = {ad_input(0.0), ad_input(bs[k])};
    ad_real r = ad_div(in[0], in[1]);
    ad_tape_end(t);
    double g[2];
    CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
    CHECK_SAME(g[0], 1.0 / bs[k]);
    CHECK_SAME(g[1], 0.0); /* -a/b^2 = 0 exactly */
    ad_tape_destroy(t);
  }
  /* and the ordinary case is unchanged: d/db (a/b) = -a/b^2 */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real in[2] = {ad_input(3.0), ad_input(-7.0)};
  ad_real r = ad_div(in[0], in[1]);
  ad_tape_end(t);
  double g[2];
  CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
  CHECK_CLOSE(g[0], -1.0 / 7.0, 1e-16);
  CHECK_CLOSE(g[1], -3.0 / 49.0, 4e-16);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Memory limit and accounting                                               */
/* ------------------------------------------------------------------------ */

/* A recording under a memory limit fills most of it with data before it
 * fails, and the failure says how much was recorded. */
static void test_memory_limit_use(void) {
  CHECK_CONTEXT("memory limit: recorded data close to the limit");
  const size_t limit = (size_t)64 << 20;
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.memory_limit = limit;
  ad_tape *t = ad_tape_create_with(&o);
  ad_tape_begin(t);
  ad_real x = ad_input(1.0), y = x;
  long n = 0;
  while (ad_tape_error(t) == AD_OK && n < 100000000L) {
    y = ad_mul(y, 1.0000001);
    y = ad_add(y, x);
    n += 2;
  }
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
  CHECK_CONTAINS(ad_tape_error_message(t), "recorded data");
  ad_stats st;
  CHECK_INT(ad_tape_stats(t, &st), AD_OK);
  CHECK(st.bytes_reserved <= limit);
  CHECK(st.bytes_used >= limit / 100 * 80);
  printf("memory limit %zu: %zu bytes recorded, %zu reserved when the limit was reached\n", limit, st.bytes_used,
         st.bytes_reserved);
  ad_tape_destroy(t);
}

/* Without a limit, what a long recording reserves stays close to what it
 * records, whatever its mix of statements. */
static void test_reserved_close_to_used(void) {
  for (int mix = 0; mix < 3; mix++) {
    CHECK_CONTEXT("reserved vs used, statement mix %d", mix);
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[8];
    for (int k = 0; k < 8; k++) x[k] = ad_input(0.5 + k);
    ad_real y = x[0];
    for (long n = 0; n < 3000000L; n++) {
      if (mix == 0)
        y = ad_add(y, x[n & 7]); /* no partials */
      else if (mix == 1)
        y = ad_mul(y, x[n & 7]); /* two partials */
      else
        y = ad_sum(8, x); /* eight arguments, no partials */
    }
    ad_tape_end(t);
    ad_stats st;
    CHECK_INT(ad_tape_stats(t, &st), AD_OK);
    CHECK((double)st.bytes_reserved <= 1.25 * (double)st.bytes_used);
    printf("mix %d: %zu bytes recorded, %zu reserved (%.3f)\n", mix, st.bytes_used, st.bytes_reserved,
           (double)st.bytes_reserved / (double)st.bytes_used);
    ad_tape_destroy(t);
  }
}

/* ------------------------------------------------------------------------ */
/* Checkpointed loops and schedules                                          */
/* ------------------------------------------------------------------------ */

static int one_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *ps) {
  (void)ud, (void)i, (void)pb, (void)ps;
  for (size_t k = 0; k < *n; k++) u[k] = ad_mul(ad_sin(u[k]), 1.5);
  return 0;
}

/* A loop of one step: the first tangent sweep, a second gradient and a
 * Jacobian of two rows need the initial state, which the schedule never
 * stores for one step. d/dx (1.5 sin x) = 1.5 cos x. */
static void test_checkpoint_one_step(void) {
  const ad_ckpt_schedule sch[] = {AD_CKPT_BINOMIAL, AD_CKPT_STORE_ALL};
  for (int s = 0; s < 2; s++) {
    for (int order = 0; order < 3; order++) {
      CHECK_CONTEXT("checkpointed loop of one step, schedule %d, first driver %d", (int)sch[s], order);
      ad_tape *t = ad_tape_create();
      ad_tape_begin(t);
      ad_real x[2] = {ad_input(0.3), ad_input(0.7)}, u[2] = {x[0], x[1]};
      ad_ckpt_options o;
      ad_ckpt_options_default(&o);
      o.schedule = sch[s];
      o.steps = 1;
      o.snapshots = 2;
      CHECK_INT(ad_checkpoint_loop(&o, one_step, NULL, 2, u, 0, NULL), AD_OK);
      ad_tape_end(t);
      double d0 = 1.5 * cos(0.3), d1 = 1.5 * cos(0.7), g[2], J[4];
      for (int rep = 0; rep < 2; rep++) {
        int which = (order + rep) % 3;
        if (which == 0) {
          ad_tangents_zero(t);
          ad_tangent_seed(t, x[0], 1.0);
          CHECK_INT(ad_forward(t), AD_OK);
          CHECK_CLOSE(ad_tangent(t, u[0]), d0, 1e-15);
        } else if (which == 1) {
          CHECK_INT(ad_gradient(t, u[1], 2, x, g), AD_OK);
          CHECK_SAME(g[0], 0.0);
          CHECK_CLOSE(g[1], d1, 1e-15);
        } else {
          CHECK_INT(ad_jacobian(t, 2, u, 2, x, J), AD_OK);
          CHECK_CLOSE(J[0], d0, 1e-15);
          CHECK_SAME(J[1], 0.0);
          CHECK_SAME(J[2], 0.0);
          CHECK_CLOSE(J[3], d1, 1e-15);
        }
      }
      ad_tape_destroy(t);
    }
  }
}

/* Saved schedule states load and continue exactly as the original; states
 * no schedule reaches are refused with AD_ERR_CORRUPT. */
static void test_revolve_load(void) {
  CHECK_CONTEXT("ad_revolve_load");
  const int64_t steps = 40;
  const int snaps = 4;
  for (int stop = 0; stop < 60; stop += 7) {
    ad_revolve *a = ad_revolve_create(steps, snaps);
    for (int i = 0; i < stop; i++) ad_revolve_next(a);
    size_t size = ad_revolve_state_size(a);
    int64_t buf[64];
    CHECK(size <= sizeof buf);
    CHECK_INT(ad_revolve_save(a, buf, sizeof buf), AD_OK);
    ad_revolve *b = ad_revolve_load(buf, size);
    CHECK(b != NULL);
    if (b) {
      for (;;) {
        ad_ckpt_action x = ad_revolve_next(a), y = ad_revolve_next(b);
        CHECK_INT(x.op, y.op);
        CHECK_INT(x.step, y.step);
        CHECK_INT(x.to, y.to);
        CHECK_INT(x.slot, y.slot);
        if (x.op == AD_CKPT_DONE || x.op != y.op) break;
      }
      ad_revolve_destroy(b);
    }
    /* Impossible variants of the same state: words 1 steps, 2 fine, 3 cur,
     * 4 advances, 5 (snaps << 32 | in use), 6.. the snapshot steps. */
    for (int bad = 0; bad < 6; bad++) {
      int64_t w[64];
      memcpy(w, buf, size);
      int k = (int)(uint32_t)w[5];
      switch (bad) {
      case 0: w[2] = w[1] + 1; break;                       /* fine beyond the steps */
      case 1: w[3] = -1; w[5] = (int64_t)snaps << 32; break; /* used up, nothing to restore */
      case 2: w[3] = w[2] + 3; break;                       /* working state beyond fine */
      case 3: w[5] = ((int64_t)snaps << 32) | 2; w[6] = 5; w[7] = 3; break; /* not increasing */
      case 4: w[5] = ((int64_t)snaps << 32) | 1; w[6] = 7; break;         /* first snapshot not at 0 */
      case 5: w[4] = -5; break;                              /* negative work */
      }
      (void)k;
      if (bad == 1 && w[2] == 0) continue; /* all reversed: used up is fine */
      ad_clear_last_error();
      ad_revolve *c = ad_revolve_load(w, size);
      CHECK(c == NULL);
      CHECK_INT(ad_last_error(), AD_ERR_CORRUPT);
      ad_revolve_destroy(c);
    }
    ad_revolve_destroy(a);
  }
  ad_clear_last_error();
}

/* ------------------------------------------------------------------------ */

int main(void) {
  test_stale_after_reset_to();
  test_stale_uses();
  test_stale_nested_positions();
  test_rerecord_steps();
  test_region_across_reset();
  test_region_discarded_value();
  test_fused_in_regions();
  test_nested_out_of_order();
  test_jacobian_infinite_partial();
  test_atan2_range();
  test_div_subnormal();
  test_memory_limit_use();
  test_reserved_close_to_used();
  test_checkpoint_one_step();
  test_revolve_load();
  return check_finish("test_hardening");
}
