/*
 * Misuse and corner cases that must give either the right number or a clear
 * error, never a wrong number with AD_OK: stale handles and positions after
 * ad_tape_reset_to, preaccumulation regions across resets, fused statements
 * inside regions, nested tapes ended out of order, vector-mode Jacobians with
 * infinite partials, atan2 and division at the edges of the double range,
 * and the memory limit. Derivatives are judged by closed forms.
 */
#include <ariadne.h>

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

int main(void) {
  test_stale_after_reset_to();
  test_stale_uses();
  test_stale_nested_positions();
  test_rerecord_steps();
  return check_finish("test_hardening");
}
