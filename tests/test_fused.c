/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fused statements (ad_sum, ad_lincomb, ad_dot, ad_custom) and statement-level
 * preaccumulation (ad_stmt_begin / ad_stmt_end).
 *
 * Values are compared with the same sums written in plain C in the same
 * order, so they must agree exactly; gradients with closed forms; statement
 * counts through ad_tape_stats. Preaccumulated recordings are compared with
 * the plain recording of the same expression.
 */
#include <ariadne.h>

#include "check.h"

static ad_tape *tape;

static ad_stats stats(void) {
  ad_stats s;
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  return s;
}

static uint64_t statements(void) { return stats().statements; }

/* Gradient of y with respect to x[0..n) into g, which must succeed. */
static void gradient(ad_real y, size_t n, const ad_real *x, double *g) {
  CHECK_INT(ad_gradient(tape, y, n, x, g), AD_OK);
}

/* Tangent of y with every input x[k] seeded with xdot[k]. */
static double tangent(ad_real y, size_t n, const ad_real *x, const double *xdot) {
  ad_tangents_zero(tape);
  for (size_t k = 0; k < n; k++) ad_tangent_seed(tape, x[k], xdot[k]);
  CHECK_INT(ad_forward(tape), AD_OK);
  return ad_tangent(tape, y);
}

/* Inputs 0.5 + 0.01 k, and the array of them. */
static ad_real *inputs(size_t n) {
  ad_real *x = malloc((n ? n : 1) * sizeof *x);
  for (size_t k = 0; k < n; k++) x[k] = ad_input(0.5 + 0.01 * (double)k);
  return x;
}

/* ------------------------------------------------------------------------ */
/* ad_sum                                                                    */
/* ------------------------------------------------------------------------ */

static void test_sum_small(void) {
  CHECK_CONTEXT("ad_sum, empty and mixed");
  ad_tape_reset(tape);
  uint64_t s0 = statements();
  ad_real z = ad_sum(0, NULL);
  CHECK_SAME(ad_value(z), 0.0);
  CHECK_INT(z.i, 0);
  CHECK_INT(statements(), s0);

  ad_real a = ad_input(1.25), b = ad_input(-3.5);
  ad_real x[6] = {a, ad_const(2.5), b, a, ad_const(-1.0), ad_const(0.125)};
  s0 = statements();
  ad_real y = ad_sum(6, x);
  CHECK_INT(statements() - s0, 1);
  CHECK_SAME(ad_value(y), ((((1.25 + 2.5) + -3.5) + 1.25) + -1.0) + 0.125);
  ad_real in[2] = {a, b};
  double g[2];
  gradient(y, 2, in, g);
  CHECK_SAME(g[0], 2.0); /* a appears twice */
  CHECK_SAME(g[1], 1.0);
  double xd[2] = {0.5, -4.0};
  CHECK_CLOSE(tangent(y, 2, in, xd), 2.0 * 0.5 - 4.0, 1e-15);

  /* All entries passive: a constant, nothing recorded. */
  ad_real c[3] = {ad_const(1), ad_const(2), ad_const(4)};
  s0 = statements();
  ad_real yc = ad_sum(3, c);
  CHECK_INT(statements(), s0);
  CHECK_INT(yc.i, 0);
  CHECK_SAME(ad_value(yc), 7.0);
}

/* n values, all active and distinct: one statement up to AD_STMT_MAX_ARGS arguments,
 * a short chain beyond; the derivative is 1 for every entry either way. */
static void test_sum_n(size_t n) {
  CHECK_CONTEXT("ad_sum, n = %zu", n);
  ad_tape_reset(tape);
  ad_real *x = inputs(n);
  double want = 0.0;
  for (size_t k = 0; k < n; k++) want += ad_value(x[k]);
  uint64_t s0 = statements();
  ad_real y = ad_sum(n, x);
  uint64_t ds = statements() - s0;
  if (n <= AD_STMT_MAX_ARGS)
    CHECK_INT(ds, 1);
  else
    CHECK(ds >= 2 && ds <= n / (AD_STMT_MAX_ARGS - 1) + 2);
  CHECK_SAME(ad_value(y), want);
  double *g = malloc(n * sizeof *g);
  gradient(y, n, x, g);
  size_t ones = 0;
  for (size_t k = 0; k < n; k++) ones += g[k] == 1.0;
  CHECK_INT(ones, n);
  /* Tangent: the sum of the seeds. */
  double *xd = malloc(n * sizeof *xd), tw = 0.0;
  for (size_t k = 0; k < n; k++) tw += xd[k] = (double)(k % 7) - 3.0;
  CHECK_SAME(tangent(y, n, x, xd), tw);
  free(xd);
  free(g);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* ad_lincomb                                                                */
/* ------------------------------------------------------------------------ */

static void test_lincomb(size_t n, size_t npassive) {
  CHECK_CONTEXT("ad_lincomb, n = %zu (%zu passive)", n, npassive);
  ad_tape_reset(tape);
  uint64_t s0 = statements();
  ad_real y0 = ad_lincomb(0, NULL, NULL);
  CHECK_INT(y0.i, 0);
  CHECK_SAME(ad_value(y0), 0.0);
  CHECK_INT(statements(), s0);

  ad_real *x = inputs(n);
  double *w = malloc((n ? n : 1) * sizeof *w);
  /* Weights of both signs and some exact zeros; the first npassive
   * entries passive. */
  for (size_t k = 0; k < n; k++) {
    w[k] = k % 5 == 3 ? 0.0 : ((double)(k % 11) - 5.0) / 4.0;
    if (k < npassive) x[k] = ad_const(ad_value(x[k]));
  }
  double want = 0.0;
  for (size_t k = 0; k < n; k++) want += w[k] * ad_value(x[k]);
  s0 = statements();
  ad_real y = ad_lincomb(n, w, x);
  CHECK_SAME(ad_value(y), want);
  if (n - npassive <= AD_STMT_MAX_ARGS) CHECK_INT(statements() - s0, n > npassive ? 1 : 0);
  if (n == npassive) {
    CHECK_INT(y.i, 0);
  } else {
    double *g = malloc(n * sizeof *g);
    gradient(y, n, x, g);
    size_t good = 0;
    for (size_t k = 0; k < n; k++) good += g[k] == (k < npassive ? 0.0 : w[k]);
    CHECK_INT(good, n);
    free(g);
  }
  free(w);
  free(x);
}

static void test_lincomb_repeat(void) {
  CHECK_CONTEXT("ad_lincomb, repeated entries");
  ad_tape_reset(tape);
  ad_real a = ad_input(2.0), b = ad_input(3.0);
  ad_real x[5] = {a, b, a, ad_const(7.0), a};
  double w[5] = {0.5, -1.0, 0.25, 10.0, -2.0};
  ad_real y = ad_lincomb(5, w, x);
  CHECK_SAME(ad_value(y), 0.5 * 2.0 + -1.0 * 3.0 + 0.25 * 2.0 + 10.0 * 7.0 + -2.0 * 2.0);
  ad_real in[2] = {a, b};
  double g[2];
  gradient(y, 2, in, g);
  CHECK_SAME(g[0], 0.5 + 0.25 - 2.0);
  CHECK_SAME(g[1], -1.0);
}

/* ------------------------------------------------------------------------ */
/* ad_dot                                                                    */
/* ------------------------------------------------------------------------ */

static void test_dot(size_t n) {
  CHECK_CONTEXT("ad_dot, n = %zu", n);
  ad_tape_reset(tape);
  ad_real *a = inputs(n), *b = inputs(n);
  /* Every third a and every fourth b passive. */
  for (size_t k = 0; k < n; k++) {
    if (k % 3 == 1) a[k] = ad_const(-ad_value(a[k]));
    if (k % 4 == 2) b[k] = ad_const(2.0 * ad_value(b[k]));
  }
  double want = 0.0;
  size_t active = 0;
  for (size_t k = 0; k < n; k++) {
    want += ad_value(a[k]) * ad_value(b[k]);
    active += (a[k].i != 0) + (b[k].i != 0);
  }
  uint64_t s0 = statements();
  ad_real y = ad_dot(n, a, b);
  CHECK_SAME(ad_value(y), want);
  if (active <= AD_STMT_MAX_ARGS) CHECK_INT(statements() - s0, active ? 1 : 0);
  if (!active) {
    CHECK_INT(y.i, 0);
    free(a);
    free(b);
    return;
  }
  double *ga = malloc(n * sizeof *ga), *gb = malloc(n * sizeof *gb);
  gradient(y, n, a, ga);
  gradient(y, n, b, gb);
  size_t good = 0;
  for (size_t k = 0; k < n; k++) {
    good += ga[k] == (a[k].i ? ad_value(b[k]) : 0.0);
    good += gb[k] == (b[k].i ? ad_value(a[k]) : 0.0);
  }
  CHECK_INT(good, 2 * n);
  free(ga);
  free(gb);
  free(a);
  free(b);
}

static void test_dot_square(void) {
  CHECK_CONTEXT("ad_dot(x, x)");
  ad_tape_reset(tape);
  ad_real *x = inputs(4);
  ad_real y = ad_dot(4, x, x);
  double g[4];
  gradient(y, 4, x, g);
  for (int k = 0; k < 4; k++) CHECK_SAME(g[k], 2.0 * ad_value(x[k]));
  /* AD_STMT_MAX_ARGS / 2 active pairs fill one statement exactly. */
  ad_real *z = inputs(AD_STMT_MAX_ARGS / 2);
  uint64_t s0 = statements();
  ad_real yz = ad_dot(AD_STMT_MAX_ARGS / 2, z, z);
  CHECK_INT(statements() - s0, 1);
  CHECK(yz.i != 0);
  free(z);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* ad_custom                                                                 */
/* ------------------------------------------------------------------------ */

static void test_custom(void) {
  CHECK_CONTEXT("ad_custom");
  ad_tape_reset(tape);
  double xv = 0.7, yv = -1.3;
  ad_real x = ad_input(xv), y = ad_input(yv);
  /* f(x, y) = x^2 y with its partials (2 x y, x^2), computed by hand. */
  ad_real args[3] = {x, ad_const(5.0), y};
  double par[3] = {2 * xv * yv, 123.0, xv * xv};
  uint64_t s0 = statements();
  ad_real f = ad_custom(xv * xv * yv, 3, args, par);
  CHECK_INT(statements() - s0, 1);
  CHECK_SAME(ad_value(f), xv * xv * yv);
  /* The same function through elementary operations. */
  ad_real f2 = ad_mul(ad_mul(x, x), y);
  ad_real in[2] = {x, y};
  double g[2], g2[2];
  gradient(f, 2, in, g);
  gradient(f2, 2, in, g2);
  CHECK_CLOSE(g[0], g2[0], 1e-15);
  CHECK_CLOSE(g[1], g2[1], 1e-15);
  /* Composed further: the chain rule through a custom statement. */
  ad_real h = ad_sin(f);
  gradient(h, 2, in, g);
  CHECK_CLOSE(g[0], cos(xv * xv * yv) * 2 * xv * yv, 1e-14);
  CHECK_CLOSE(g[1], cos(xv * xv * yv) * xv * xv, 1e-14);

  /* No arguments, or only passive ones: the value, passive. */
  s0 = statements();
  ad_real c0 = ad_custom(4.5, 0, NULL, NULL);
  ad_real cargs[2] = {ad_const(1.0), ad_const(2.0)};
  double cpar[2] = {1.0, 1.0};
  ad_real c1 = ad_custom(-2.0, 2, cargs, cpar);
  CHECK_INT(statements(), s0);
  CHECK(c0.i == 0 && c1.i == 0);
  CHECK_SAME(ad_value(c0), 4.5);
  CHECK_SAME(ad_value(c1), -2.0);

  /* Repeated arguments add up. */
  ad_real rargs[3] = {x, x, y};
  double rpar[3] = {1.5, 2.5, -1.0};
  ad_real r = ad_custom(0.0, 3, rargs, rpar);
  gradient(r, 2, in, g);
  CHECK_SAME(g[0], 4.0);
  CHECK_SAME(g[1], -1.0);
}

static void test_custom_n(size_t n) {
  CHECK_CONTEXT("ad_custom, n = %zu", n);
  ad_tape_reset(tape);
  ad_real *x = inputs(n);
  double *p = malloc(n * sizeof *p);
  for (size_t k = 0; k < n; k++) p[k] = 1.0 / (double)(k + 1);
  uint64_t s0 = statements();
  ad_real y = ad_custom(42.0, n, x, p);
  if (n <= AD_STMT_MAX_ARGS) CHECK_INT(statements() - s0, 1);
  CHECK_SAME(ad_value(y), 42.0);
  double *g = malloc(n * sizeof *g);
  gradient(y, n, x, g);
  size_t good = 0;
  for (size_t k = 0; k < n; k++) good += g[k] == p[k];
  CHECK_INT(good, n);
  free(g);
  free(p);
  free(x);
}

/* ------------------------------------------------------------------------ */
/* Preaccumulation                                                           */
/* ------------------------------------------------------------------------ */

/* A dozen operations on three inputs, each used several times. */
static ad_real expr(ad_real x0, ad_real x1, ad_real x2) {
  ad_real t1 = ad_mul(x0, x1);
  ad_real t2 = ad_add(ad_sin(t1), x2);
  ad_real t3 = ad_mul(ad_exp(ad_mul(t2, 0.1)), x0);
  ad_real t4 = ad_div(t3, ad_add(1, ad_mul(x1, x1)));
  ad_real t5 = ad_hypot(t1, x2);
  ad_real t6 = ad_pow(ad_add(ad_mul(x0, x0), 1.0), ad_cos(x2));
  return ad_add(ad_sub(t4, t5), ad_mul(t6, ad_tanh(x1)));
}

static ad_real expr_region(ad_real x0, ad_real x1, ad_real x2) {
  ad_stmt_begin();
  return ad_stmt_end(expr(x0, x1, x2));
}

static void test_preacc_basic(void) {
  CHECK_CONTEXT("preaccumulation of one expression");
  const double xv[3] = {0.3, -1.1, 2.2};

  ad_tape_reset(tape);
  ad_real x[3] = {ad_input(xv[0]), ad_input(xv[1]), ad_input(xv[2])};
  ad_real y = expr(x[0], x[1], x[2]);
  double g_plain[3];
  gradient(y, 3, x, g_plain);
  double xd[3] = {0.25, -0.5, 1.5};
  double t_plain = tangent(y, 3, x, xd);
  uint64_t plain_statements = statements();

  ad_tape_reset(tape);
  ad_real z[3] = {ad_input(xv[0]), ad_input(xv[1]), ad_input(xv[2])};
  ad_stats s0 = stats();
  ad_real yr = expr_region(z[0], z[1], z[2]);
  ad_stats s1 = stats();
  CHECK_SAME(ad_value(yr), ad_value(y));
  CHECK_INT(s1.statements - s0.statements, 1);
  CHECK(plain_statements > 3 + 10);
  /* One argument per distinct input, however often each was used. */
  CHECK_INT(s1.arguments - s0.arguments, 3);
  double g[3];
  gradient(yr, 3, z, g);
  for (int k = 0; k < 3; k++) CHECK_CLOSE(g[k], g_plain[k], 1e-14);
  CHECK_CLOSE(tangent(yr, 3, z, xd), t_plain, 1e-14);

  /* Many regions in a row, each using the previous result: one statement
   * per region, and the gradient of the chain equals the plain one. */
  CHECK_CONTEXT("a chain of regions");
  int nreg = 50;
  ad_tape_reset(tape);
  ad_real a[3] = {ad_input(xv[0]), ad_input(xv[1]), ad_input(xv[2])};
  ad_real c = a[0];
  for (int k = 0; k < nreg; k++) c = ad_mul(expr(c, a[1], a[2]), 0.5);
  gradient(c, 3, a, g_plain);
  double cv = ad_value(c);
  ad_tape_reset(tape);
  ad_real b[3] = {ad_input(xv[0]), ad_input(xv[1]), ad_input(xv[2])};
  uint64_t before = statements();
  ad_real d = b[0];
  for (int k = 0; k < nreg; k++) {
    ad_stmt_begin();
    d = ad_stmt_end(ad_mul(expr(d, b[1], b[2]), 0.5));
  }
  CHECK_SAME(ad_value(d), cv);
  CHECK_INT(statements() - before, nreg);
  gradient(d, 3, b, g);
  for (int k = 0; k < 3; k++) CHECK_CLOSE(g[k], g_plain[k], 1e-14);
}

static void test_preacc_nested(void) {
  CHECK_CONTEXT("nested regions");
  ad_tape_reset(tape);
  ad_real x[3] = {ad_input(0.5), ad_input(1.5), ad_input(-0.5)};
  ad_real y = expr(x[0], x[1], x[2]);
  double g_plain[3], g[3];
  gradient(y, 3, x, g_plain);

  ad_tape_reset(tape);
  ad_real z[3] = {ad_input(0.5), ad_input(1.5), ad_input(-0.5)};
  uint64_t before = statements();
  ad_stmt_begin();
  ad_real t = ad_mul(z[0], z[1]);
  ad_stmt_begin();
  ad_real inner = ad_stmt_end(expr(z[0], z[1], z[2]));
  uint64_t mid = statements();
  ad_real r = ad_add(ad_mul(inner, 2.0), t);
  ad_real out = ad_stmt_end(r);
  /* The inner pair did nothing: the region is still open, and nothing of it
   * is on the tape before the outer end. */
  CHECK_INT(mid - before, 0);
  CHECK_INT(statements() - before, 1);
  gradient(out, 3, z, g);
  CHECK_CLOSE(g[0], 2.0 * g_plain[0] + 1.5, 1e-14);
  CHECK_CLOSE(g[1], 2.0 * g_plain[1] + 0.5, 1e-14);
  CHECK_CLOSE(g[2], 2.0 * g_plain[2], 1e-14);
}

static void test_preacc_passive_and_outside(void) {
  ad_tape_reset(tape);
  ad_real x = ad_input(2.0), y = ad_input(3.0);

  CHECK_CONTEXT("region with a passive result");
  uint64_t before = statements();
  ad_stmt_begin();
  ad_real t = ad_mul(ad_sin(x), y);
  (void)t;
  ad_real p = ad_stmt_end(ad_const(5.0));
  CHECK_INT(statements(), before);
  CHECK_INT(p.i, 0);
  CHECK_SAME(ad_value(p), 5.0);

  CHECK_CONTEXT("region whose result is an outside value");
  ad_stmt_begin();
  ad_real u = ad_exp(ad_mul(x, y));
  (void)u;
  ad_real o = ad_stmt_end(x);
  CHECK_INT(statements(), before);
  CHECK(o.i == x.i && ad_value(o) == 2.0);
  /* The discarded region leaves no trace in later derivatives. */
  ad_real f = ad_mul(o, y);
  ad_real in[2] = {x, y};
  double g[2];
  gradient(f, 2, in, g);
  CHECK_SAME(g[0], 3.0);
  CHECK_SAME(g[1], 2.0);

  CHECK_CONTEXT("empty region");
  ad_stmt_begin();
  ad_real e = ad_stmt_end(f);
  CHECK(e.i == f.i);
  CHECK_INT(statements(), before + 1);

  CHECK_CONTEXT("region without a recording tape");
  ad_tape_end(tape);
  ad_stmt_begin();
  ad_real q = ad_mul(ad_const(3.0), ad_sin(ad_const(1.0)));
  ad_real qr = ad_stmt_end(q);
  CHECK_INT(qr.i, 0);
  CHECK_SAME(ad_value(qr), 3.0 * sin(1.0));
  ad_tape_begin(tape);
}

/* Repeated variables and an unused infinite partial inside a region. */
static void test_preacc_repeated(void) {
  CHECK_CONTEXT("region with one repeated variable");
  ad_tape_reset(tape);
  double xv = 1.3;
  ad_real x = ad_input(xv);
  ad_stats s0 = stats();
  ad_stmt_begin();
  ad_real x2 = ad_mul(x, x);
  ad_real y = ad_stmt_end(ad_add(ad_mul(x2, x2), x));
  ad_stats s1 = stats();
  CHECK_INT(s1.statements - s0.statements, 1);
  CHECK_INT(s1.arguments - s0.arguments, 1);
  double g;
  gradient(y, 1, &x, &g);
  CHECK_CLOSE(g, 4 * xv * xv * xv + 1, 1e-15);

  CHECK_CONTEXT("region with an unused sqrt(0)");
  ad_real z = ad_input(0.0);
  ad_stmt_begin();
  ad_real s = ad_sqrt(z);
  (void)s;
  ad_real r = ad_stmt_end(ad_mul(z, 3.0));
  gradient(r, 1, &z, &g);
  CHECK_SAME(g, 3.0);
}

/* A region whose derivative is exactly 0 still yields an active result, as
 * the same operations recorded without the region do. */
static void test_preacc_zero_derivative(void) {
  CHECK_CONTEXT("region with a zero derivative");
  ad_tape_reset(tape);
  ad_real x = ad_input(0.75);
  ad_real plain = ad_mul(ad_sin(x), 0.0);
  double g = 1.0;
  CHECK_INT(ad_gradient(tape, plain, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 0.0);
  ad_stmt_begin();
  ad_real r = ad_stmt_end(ad_mul(ad_sin(x), 0.0));
  CHECK(r.i != 0);
  g = 1.0;
  CHECK_INT(ad_gradient(tape, r, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 0.0);
  /* Used further, it contributes nothing. */
  ad_real f = ad_add(r, ad_mul(x, 2.0));
  CHECK_INT(ad_gradient(tape, f, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 2.0);
}

/* Regions across storage blocks: a tape with 1024-statement blocks, filled
 * to just before a block boundary, then regions that straddle it and one
 * region longer than several blocks. */
static void test_preacc_blocks(void) {
  ad_tape *small = check_tape_blocks(1024, 1024);
  if (!small) return;
  ad_tape *saved = tape;
  tape = small;
  ad_tape_begin(tape);

  for (int fill = 1000; fill <= 1030; fill += 5) {
    for (int variant = 0; variant < 2; variant++) {
      CHECK_CONTEXT("region across a block boundary, fill %d, %s", fill, variant ? "long region" : "short region");
      int reps = variant ? 300 : 3;
      double result[2], g[2][3];
      for (int pre = 0; pre < 2; pre++) {
        ad_tape_reset(tape);
        ad_real x[3] = {ad_input(0.1), ad_input(0.2), ad_input(0.3)};
        ad_real acc = x[0];
        for (int k = 3; k < fill; k++) acc = ad_add(acc, 1e-3);
        if (pre) ad_stmt_begin();
        ad_real y = acc;
        for (int k = 0; k < reps; k++) y = ad_mul(expr(y, x[1], x[2]), 0.5);
        if (pre) y = ad_stmt_end(y);
        /* More recording after the region, over the reused handles. */
        ad_real f = ad_add(ad_mul(y, x[1]), ad_sin(x[2]));
        result[pre] = ad_value(f);
        gradient(f, 3, x, g[pre]);
        if (pre) CHECK_INT(statements(), (uint64_t)fill + 1 + 3);
      }
      CHECK_SAME(result[1], result[0]);
      for (int k = 0; k < 3; k++) CHECK_CLOSE2(g[1][k], g[0][k], 1e-14, 1e-300);
    }
  }

  /* More than AD_STMT_MAX_ARGS distinct inputs in one region. */
  CHECK_CONTEXT("region with 300 distinct inputs");
  ad_tape_reset(tape);
  ad_real *x = inputs(300);
  uint64_t before = statements();
  ad_stmt_begin();
  ad_real s = ad_const(0.0);
  for (int k = 0; k < 300; k++) s = ad_add(s, ad_sin(x[k]));
  s = ad_stmt_end(s);
  /* a chain: ceil((300 - 1) / (AD_STMT_MAX_ARGS - 1)) statements */
  CHECK(statements() - before <= (300 - 1) / (AD_STMT_MAX_ARGS - 1) + 1);
  double *gs = malloc(300 * sizeof *gs);
  gradient(s, 300, x, gs);
  size_t good = 0;
  for (int k = 0; k < 300; k++) good += fabs(gs[k] - cos(ad_value(x[k]))) <= 1e-15;
  CHECK_INT(good, 300);
  free(gs);
  free(x);

  ad_tape_end(tape);
  ad_tape_destroy(tape);
  tape = saved;
}

/* Fused statements with many arguments on small blocks: the chained
 * statements land in several blocks. */
static void test_fused_blocks(size_t n) {
  ad_tape *small = check_tape_blocks(1024, 1024);
  if (!small) return;
  ad_tape *saved = tape;
  tape = small;
  ad_tape_begin(tape);
  CHECK_CONTEXT("fused statements of %zu arguments on 1024-argument blocks", n);
  ad_real *x = inputs(n);
  double *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
  for (size_t k = 0; k < n; k++) w[k] = (double)(k % 13) - 6.0;
  ad_real y = ad_add(ad_sum(n, x), ad_lincomb(n, w, x));
  ad_real z = ad_dot(n, x, x);
  CHECK(stats().blocks >= 2 * n / 1024);
  gradient(y, n, x, g);
  size_t good = 0;
  for (size_t k = 0; k < n; k++) good += g[k] == 1.0 + w[k];
  CHECK_INT(good, n);
  gradient(z, n, x, g);
  good = 0;
  for (size_t k = 0; k < n; k++) good += g[k] == 2.0 * ad_value(x[k]);
  CHECK_INT(good, n);
  free(w);
  free(g);
  free(x);
  ad_tape_end(tape);
  ad_tape_destroy(tape);
  tape = saved;
}

/* A region with several results: f1 = t1 t2, f2 = t2 / a with t1 = a b and
 * t2 = sin(t1) + c shared; c (from before the region) and a constant are
 * passed through. Closed-form partials; the recording shrinks to one
 * statement per result. */
static void test_preacc_multi(void) {
  CHECK_CONTEXT("ad_stmt_end_n");
  double av = 0.7, bv = -1.3, cv = 0.4;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(av), b = ad_input(bv), c = ad_input(cv);
  ad_stmt_begin();
  ad_real t1 = ad_mul(a, b);
  ad_real t2 = ad_add(ad_sin(t1), c);
  ad_real f[4] = {ad_mul(t1, t2), ad_div(t2, a), c, ad_const(2.0)};
  ad_stmt_end_n(4, f);
  ad_stats st;
  CHECK_INT(ad_tape_stats(t, &st), AD_OK);
  CHECK_INT(st.statements, 5); /* three inputs and the two results computed inside */
  CHECK_INT(f[2].i, c.i);      /* from before the region: unchanged */
  CHECK_INT(f[3].i, 0);
  /* values unchanged */
  double t1v = av * bv, t2v = sin(t1v) + cv;
  CHECK_SAME(ad_value(f[0]), t1v * t2v);
  CHECK_SAME(ad_value(f[1]), t2v / av);
  ad_tape_end(t);
  ad_real x[3] = {a, b, c};
  double J[12];
  ad_real y[4] = {f[0], f[1], f[2], f[3]};
  CHECK_INT(ad_jacobian(t, 4, y, 3, x, J), AD_OK);
  double dt2da = cos(t1v) * bv, dt2db = cos(t1v) * av;
  CHECK_CLOSE(J[0], bv * t2v + t1v * dt2da, 1e-15);
  CHECK_CLOSE(J[1], av * t2v + t1v * dt2db, 1e-15);
  CHECK_CLOSE(J[2], t1v, 1e-15);
  CHECK_CLOSE(J[3], dt2da / av - t2v / (av * av), 1e-15);
  CHECK_CLOSE(J[4], dt2db / av, 1e-15);
  CHECK_CLOSE(J[5], 1.0 / av, 1e-15);
  CHECK_SAME(J[6], 0.0);
  CHECK_SAME(J[7], 0.0);
  CHECK_SAME(J[8], 1.0);
  for (int k = 9; k < 12; k++) CHECK_SAME(J[k], 0.0);
  ad_tape_destroy(t);

  /* Many regions on small blocks, so that regions straddle block ends: the
   * sum of all results against the same computation without regions. */
  CHECK_CONTEXT("ad_stmt_end_n across blocks");
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.block_arguments = 1024;
  ad_tape *t2t = ad_tape_create_with(&o), *ref = ad_tape_create();
  double g1[3], g2[3];
  for (int pass = 0; pass < 2; pass++) {
    ad_tape *tt = pass ? ref : t2t;
    ad_tape_begin(tt);
    ad_real in[3] = {ad_input(av), ad_input(bv), ad_input(cv)};
    ad_real acc = ad_const(0.0);
    for (int r = 0; r < 700; r++) {
      if (pass == 0) ad_stmt_begin();
      ad_real u = ad_mul(in[0], in[1]);
      ad_real v = ad_exp(ad_mul(u, 0.01 * r));
      ad_real out[2] = {ad_add(u, v), ad_mul(v, in[2])};
      if (pass == 0) ad_stmt_end_n(2, out);
      acc = ad_add(acc, ad_add(out[0], out[1]));
    }
    ad_tape_end(tt);
    CHECK_INT(ad_gradient(tt, acc, 3, in, pass ? g2 : g1), AD_OK);
  }
  for (int k = 0; k < 3; k++) CHECK_CLOSE(g1[k], g2[k], 1e-13);
  ad_tape_destroy(t2t);
  ad_tape_destroy(ref);
}

int main(void) {
  size_t big = check_small() ? 2000 : 10000;
  tape = ad_tape_create();
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_fused");
  ad_tape_begin(tape);

  test_sum_small();
  size_t sizes[] = {1, 2, 62, 63, 64, 124, 125, 126, 254, 255, 256, 1000, big};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    test_sum_n(sizes[k]);
    test_lincomb(sizes[k], 0);
    test_lincomb(sizes[k], sizes[k] / 3);
    test_dot(sizes[k]);
    test_custom_n(sizes[k]);
  }
  test_lincomb(0, 0);
  test_lincomb(7, 7);
  test_lincomb(400, 200); /* 200 active of 400: one statement */
  test_dot(0);
  test_lincomb_repeat();
  test_dot_square();
  test_custom();

  test_preacc_basic();
  test_preacc_nested();
  test_preacc_passive_and_outside();
  test_preacc_repeated();
  test_preacc_zero_derivative();
  test_preacc_multi();

  ad_tape_end(tape);
  test_preacc_blocks();
  test_fused_blocks(big);
  ad_tape_destroy(tape);
  return check_finish("test_fused");
}
