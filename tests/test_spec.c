/* SPDX-License-Identifier: BSD-3-Clause */
/* Statements taken back (ad__spec_mark / ad__spec_drop, what ariadne-port
 * --fused writes before a loop body's early exit): on a plain recording they
 * are gone from the tape and their handles are issued again; wherever taking
 * them back could not be known safe (a new block in between, a special
 * record, a watching tape, a preaccumulation region, no recording) nothing
 * is dropped. Each gradient is checked against its closed form. */
#include <ariadne.h>
#include <math.h>

#include "check.h"

static uint64_t statements(const ad_tape *t) {
  ad_stats s;
  ad_tape_stats(t, &s);
  return s.statements;
}

/* y = x^2 and sin(y) * y recorded, then taken back: the tape holds the input
 * alone, the next statement reuses the first dropped handle, and the
 * gradient of what follows is that of 3 x. */
static void dropped(void) {
  CHECK_CONTEXT("dropped");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.5);
  ad__spec m = ad__spec_mark();
  ad_real y = ad_mul(x, x);
  ad_real z = ad_mul(ad_sin(y), y);
  (void)z;
  CHECK(statements(t) == 4);
  ad__spec_drop(&m);
  CHECK(statements(t) == 1);
  ad_real x3 = ad_mul(x, 3.0);
  CHECK(x3.i == y.i);
  ad_real w = ad_add(x3, 1.0);
  ad_tape_end(t);
  double g = 0.0;
  CHECK(ad_gradient(t, w, 1, &x, &g) == AD_OK);
  CHECK_CLOSE(g, 3.0, 0.0);
  ad_tape_destroy(t);
}

/* A chain of `n` products by 1.001 between the mark and the drop, then one
 * more: d/dx = 1.001^(n+1) whether or not the chain was kept. */
static void chain(ad_tape *t, int n, uint64_t want_after_drop) {
  ad_tape_begin(t);
  ad_real x = ad_input(0.5);
  ad__spec m = ad__spec_mark();
  ad_real y = x;
  for (int k = 0; k < n; k++) y = ad_mul(y, 1.001);
  ad__spec_drop(&m);
  CHECK(statements(t) == want_after_drop);
  ad_real w = ad_mul(y, 1.001);
  ad_tape_end(t);
  double g = 0.0;
  CHECK(ad_gradient(t, w, 1, &x, &g) == AD_OK);
  CHECK_CLOSE(g, pow(1.001, n + 1), 1e-13);
}

int main(void) {
  dropped();

  /* Across a block boundary nothing is taken back (y is used after it, which
   * only a kept recording makes right: the test uses what a port never would). */
  CHECK_CONTEXT("new block");
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  ad_tape *t = ad_tape_create_with(&o);
  chain(t, 3000, 3001);
  ad_tape_destroy(t);

  /* On a watching tape (the finite check) every statement stays. */
  CHECK_CONTEXT("watching");
  t = ad_tape_create();
  ad_tape_set_check_finite(t, 1);
  chain(t, 5, 6);
  ad_tape_destroy(t);

  /* Inside a preaccumulation region operations propagate partials and
   * record nothing: the region's statement is right either way. */
  CHECK_CONTEXT("preaccumulation region");
  t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(2.0);
  ad_stmt_begin();
  ad__spec m = ad__spec_mark();
  ad_real y = ad_mul(ad_mul(x, x), 3.0);
  ad__spec_drop(&m);
  y = ad_stmt_end(y);
  ad_tape_end(t);
  double g = 0.0;
  CHECK(ad_gradient(t, y, 1, &x, &g) == AD_OK);
  CHECK_CLOSE(g, 12.0, 1e-15);
  ad_tape_destroy(t);

  /* With no recording the pair does nothing. */
  CHECK_CONTEXT("not recording");
  m = ad__spec_mark();
  y = ad_mul(ad_const(2.0), ad_const(3.0));
  ad__spec_drop(&m);
  CHECK(ad_value(y) == 6.0);

  /* A sticky error in between (a stale handle): nothing is taken back, the
   * error stays. */
  CHECK_CONTEXT("sticky error");
  t = ad_tape_create();
  ad_tape_begin(t);
  x = ad_input(1.0);
  ad_tape_end(t);
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real x2 = ad_input(1.0);
  m = ad__spec_mark();
  y = ad_mul(x2, 2.0);
  y = ad_mul(y, x); /* x is from before the reset */
  ad__spec_drop(&m);
  ad_tape_end(t);
  CHECK(ad_tape_error(t) == AD_ERR_STALE_HANDLE);
  ad_tape_destroy(t);
  return check_finish("test_spec");
}
