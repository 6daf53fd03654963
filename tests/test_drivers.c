/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Drivers and tape management: ad_gradient and ad_jacobian in every shape,
 * repeated sweeps of one recording, zeroing of adjoints and tangents,
 * positions (ad_tape_position, ad_reverse_to, ad_tape_reset_to), statistics
 * and the reuse of memory after ad_tape_reset.
 *
 * Jacobians are checked against finite differences and against each other:
 * vector reverse mode (m <= n), vector tangent mode (m > n), one
 * ad_gradient per row and one tangent sweep per column.
 */
#include <ariadne.h>

#include "check.h"

/* A test function R^n -> R^m: row r mixes three inputs. */
static void func(size_t m, size_t n, const ad_real *x, ad_real *y) {
  for (size_t r = 0; r < m; r++) {
    ad_real a = x[r % n], b = x[(3 * r + 1) % n], c = x[(5 * r + 2) % n];
    ad_real t = ad_add(ad_mul(ad_sin(a), b), ad_div(ad_exp(ad_mul(c, 0.3)), ad_add(ad_mul(a, a), 1)));
    y[r] = ad_add(t, ad_mul((double)r, ad_tanh(ad_sub(b, c))));
  }
}

/* func at plain values, through ad_real code with passive inputs. */
static void func_eval(size_t m, size_t n, const double *xv, double *yv) {
  ad_real *x = malloc(n * sizeof *x), *y = malloc(m * sizeof *y);
  for (size_t k = 0; k < n; k++) x[k] = ad_const(xv[k]);
  func(m, n, x, y);
  for (size_t r = 0; r < m; r++) yv[r] = ad_value(y[r]);
  free(x);
  free(y);
}

/* Column k of the Jacobian by Richardson-extrapolated central differences. */
static void fd_column(size_t m, size_t n, const double *xv, size_t k, double *col) {
  double *xp = malloc(n * sizeof *xp), *fp = malloc(m * sizeof *fp), *fm = malloc(m * sizeof *fm);
  double *d1 = malloc(m * sizeof *d1), h = 1e-3;
  for (int s = 0; s < 2; s++) {
    double hs = s ? h / 2 : h;
    memcpy(xp, xv, n * sizeof *xp);
    xp[k] = xv[k] + hs;
    func_eval(m, n, xp, fp);
    xp[k] = xv[k] - hs;
    func_eval(m, n, xp, fm);
    for (size_t r = 0; r < m; r++) {
      double d = (fp[r] - fm[r]) / (2 * hs);
      if (s == 0)
        d1[r] = d;
      else
        col[r] = (4 * d - d1[r]) / 3;
    }
  }
  free(xp);
  free(fp);
  free(fm);
  free(d1);
}

/* ------------------------------------------------------------------------ */
/* Jacobians                                                                 */
/* ------------------------------------------------------------------------ */

/* Record func on `tape` with input `pcol` passive and output `prow` made
 * passive (either may be out of range: none), and check ad_jacobian. */
static void check_jacobian(ad_tape *tape, size_t m, size_t n, size_t prow, size_t pcol) {
  CHECK_CONTEXT("jacobian %zu x %zu, passive row %zu, passive column %zu", m, n, prow, pcol);
  double *xv = malloc(n * sizeof *xv);
  for (size_t k = 0; k < n; k++) xv[k] = 0.3 + 0.7 * sin(1.7 * (double)k + 0.4);
  ad_real *x = malloc(n * sizeof *x), *y = malloc(m * sizeof *y);
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  for (size_t k = 0; k < n; k++) x[k] = k == pcol ? ad_const(xv[k]) : ad_input(xv[k]);
  func(m, n, x, y);
  if (prow < m) y[prow] = ad_floor(ad_mul(y[prow], 1e6)); /* passive: piecewise constant */
  ad_tape_end(tape);

  double *J = malloc(m * n * sizeof *J), *col = malloc(m * sizeof *col), *g = malloc(n * sizeof *g);
  for (size_t k = 0; k < m * n; k++) J[k] = NAN;
  CHECK_INT(ad_jacobian(tape, m, y, n, x, J), AD_OK);

  /* Against finite differences; the passive row and column are 0. */
  size_t fd_good = 0;
  for (size_t k = 0; k < n; k++) {
    fd_column(m, n, xv, k, col);
    for (size_t r = 0; r < m; r++) {
      double want = (r == prow || k == pcol) ? 0.0 : col[r];
      double got = J[r * n + k];
      fd_good += (r == prow || k == pcol) ? got == 0.0 : fabs(got - want) <= 1e-7 * (1 + fabs(want));
    }
  }
  CHECK_INT(fd_good, m * n);

  /* Row r against ad_gradient, column k against a tangent sweep. */
  size_t row_good = 0, col_good = 0;
  for (size_t r = 0; r < m; r++) {
    int rc = ad_gradient(tape, y[r], n, x, g);
    CHECK_INT(rc, r == prow ? AD_ERR_PASSIVE : AD_OK);
    for (size_t k = 0; k < n; k++) row_good += fabs(g[k] - J[r * n + k]) <= 1e-14 * (1 + fabs(g[k]));
  }
  for (size_t k = 0; k < n; k++) {
    if (k == pcol) continue;
    ad_tangents_zero(tape);
    ad_tangent_seed(tape, x[k], 1.0);
    CHECK_INT(ad_forward(tape), AD_OK);
    for (size_t r = 0; r < m; r++) {
      double t = ad_tangent(tape, y[r]);
      col_good += fabs(t - J[r * n + k]) <= 1e-14 * (1 + fabs(t));
    }
  }
  CHECK_INT(row_good, m * n);
  CHECK_INT(col_good, m * (n - (pcol < n)));
  free(J);
  free(col);
  free(g);
  free(x);
  free(y);
  free(xv);
}

/* Outputs that are inputs, and an input listed twice. */
static void test_jacobian_special(ad_tape *tape) {
  CHECK_CONTEXT("jacobian with identity rows and repeated columns");
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  ad_real a = ad_input(2.0), b = ad_input(-1.0);
  ad_real y[3] = {a, ad_mul(a, b), b};
  ad_tape_end(tape);
  ad_real x[3] = {a, b, a};
  double J[9];
  double want[9] = {1, 0, 1, -1, 2, -1, 0, 1, 0};
  CHECK_INT(ad_jacobian(tape, 3, y, 3, x, J), AD_OK); /* m <= n */
  for (int k = 0; k < 9; k++) CHECK_SAME(J[k], want[k]);
  double J2[6];
  CHECK_INT(ad_jacobian(tape, 3, y, 2, x, J2), AD_OK); /* m > n */
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 2; k++) CHECK_SAME(J2[r * 2 + k], want[r * 3 + k]);
  /* Empty shapes are fine. */
  CHECK_INT(ad_jacobian(tape, 0, y, 3, x, J), AD_OK);
  CHECK_INT(ad_jacobian(tape, 3, y, 0, x, J), AD_OK);
  double g0;
  CHECK_INT(ad_gradient(tape, y[1], 0, x, &g0), AD_OK);
  /* The gradient of an input with respect to itself. */
  double g[2];
  CHECK_INT(ad_gradient(tape, a, 2, x, g), AD_OK);
  CHECK_SAME(g[0], 1.0);
  CHECK_SAME(g[1], 0.0);
}

/* ------------------------------------------------------------------------ */
/* One recording, many sweeps                                                */
/* ------------------------------------------------------------------------ */

/* Entry i of J v for the matrix whose (i, j) entry is J[i * si + j * sj]
 * (J^T v with the strides swapped), j < n; *mag is the sum of the terms'
 * magnitudes, the scale of the rounding error in the result. */
static double strided_dot(const double *J, int i, int si, int sj, const double *v, int n, double *mag) {
  double sum = 0.0;
  *mag = 0.0;
  for (int j = 0; j < n; j++) {
    sum += J[i * si + j * sj] * v[j];
    *mag += fabs(J[i * si + j * sj] * v[j]);
  }
  return sum;
}

static void test_many_sweeps(ad_tape *tape) {
  enum { M = 6, N = 5 };
  CHECK_CONTEXT("many sweeps of one recording");
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  ad_real x[N], y[M];
  for (int k = 0; k < N; k++) x[k] = ad_input(0.1 * k - 0.2);
  func(M, N, x, y);
  ad_tape_end(tape);
  ad_stats before;
  CHECK_INT(ad_tape_stats(tape, &before), AD_OK);
  double J[M * N];
  CHECK_INT(ad_jacobian(tape, M, y, N, x, J), AD_OK);

  check_rng rng = {77};
  int sweeps = check_small() ? 5 : 40;
  for (int s = 0; s < sweeps; s++) {
    double ybar[M], xdot[N];
    for (int r = 0; r < M; r++) ybar[r] = check_rng_range(&rng, -1, 1);
    for (int k = 0; k < N; k++) xdot[k] = check_rng_range(&rng, -1, 1);
    ad_adjoints_zero(tape);
    for (int r = 0; r < M; r++) ad_seed(tape, y[r], ybar[r]);
    CHECK_INT(ad_reverse(tape), AD_OK);
    for (int k = 0; k < N; k++) {
      double mag, want = strided_dot(J, k, 1, N, ybar, M, &mag); /* (J^T ybar)_k */
      CHECK_CLOSE2(ad_adjoint(tape, x[k]), want, 1e-14, 1e-14 * mag);
    }
    ad_tangents_zero(tape);
    for (int k = 0; k < N; k++) ad_tangent_seed(tape, x[k], xdot[k]);
    CHECK_INT(ad_forward(tape), AD_OK);
    for (int r = 0; r < M; r++) {
      double mag, want = strided_dot(J, r, N, 1, xdot, N, &mag); /* (J xdot)_r */
      CHECK_CLOSE2(ad_tangent(tape, y[r]), want, 1e-14, 1e-14 * mag);
    }
    /* A gradient in between does not disturb the next sweeps. */
    double g[N];
    CHECK_INT(ad_gradient(tape, y[s % M], N, x, g), AD_OK);
    for (int k = 0; k < N; k++) CHECK_CLOSE2(g[k], J[(s % M) * N + k], 1e-14, 1e-300);
  }
  /* Sweeping records nothing. */
  ad_stats after;
  CHECK_INT(ad_tape_stats(tape, &after), AD_OK);
  CHECK_INT(after.statements, before.statements);
  CHECK_INT(after.arguments, before.arguments);

  CHECK_CONTEXT("ad_adjoints_zero and ad_tangents_zero");
  ad_adjoints_zero(tape);
  ad_seed(tape, y[0], 1.0);
  CHECK_INT(ad_reverse(tape), AD_OK);
  CHECK(ad_adjoint(tape, x[0]) != 0.0);
  ad_adjoints_zero(tape);
  size_t zero = 0;
  for (int k = 0; k < N; k++) zero += ad_adjoint(tape, x[k]) == 0.0;
  for (int r = 0; r < M; r++) zero += ad_adjoint(tape, y[r]) == 0.0;
  CHECK_INT(zero, N + M);
  for (int k = 0; k < N; k++) ad_tangent_seed(tape, x[k], 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK(ad_tangent(tape, y[0]) != 0.0);
  ad_tangents_zero(tape);
  zero = 0;
  for (int k = 0; k < N; k++) zero += ad_tangent(tape, x[k]) == 0.0;
  for (int r = 0; r < M; r++) zero += ad_tangent(tape, y[r]) == 0.0;
  CHECK_INT(zero, N + M);
  /* With every seed gone, a tangent sweep gives zeros everywhere. */
  CHECK_INT(ad_forward(tape), AD_OK);
  zero = 0;
  for (int r = 0; r < M; r++) zero += ad_tangent(tape, y[r]) == 0.0;
  CHECK_INT(zero, M);
  /* Without zeroing, a second reverse sweep adds to the adjoints. */
  ad_adjoints_zero(tape);
  ad_seed(tape, x[1], 2.0);
  ad_seed(tape, x[1], 0.5);
  CHECK_INT(ad_reverse(tape), AD_OK);
  CHECK_SAME(ad_adjoint(tape, x[1]), 2.5);
}

/* ------------------------------------------------------------------------ */
/* Positions                                                                 */
/* ------------------------------------------------------------------------ */

/* u = sin(x0) x1 before the position, y = u^2 + x0 exp(u) after it. */
static void test_positions(ad_tape *tape) {
  CHECK_CONTEXT("ad_reverse_to");
  double x0v = 0.8, x1v = -1.7, uv = sin(x0v) * x1v;
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  ad_real x0 = ad_input(x0v), x1 = ad_input(x1v);
  ad_real u = ad_mul(ad_sin(x0), x1);
  ad_tape_pos pos = ad_tape_position(tape);
  ad_stats st;
  CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
  CHECK_INT(pos.index, st.statements);
  ad_real y = ad_add(ad_mul(u, u), ad_mul(x0, ad_exp(u)));

  ad_adjoints_zero(tape);
  ad_seed(tape, y, 1.0);
  CHECK_INT(ad_reverse_to(tape, pos), AD_OK);
  /* Only the part after the position ran: u and x0 hold the partials of y. */
  CHECK_CLOSE(ad_adjoint(tape, u), 2 * uv + x0v * exp(uv), 1e-14);
  CHECK_CLOSE(ad_adjoint(tape, x0), exp(uv), 1e-14);
  CHECK_SAME(ad_adjoint(tape, x1), 0.0);

  /* The full gradient for comparison: the chain through u too. */
  ad_real x[2] = {x0, x1};
  double g[2];
  CHECK_INT(ad_gradient(tape, y, 2, x, g), AD_OK);
  double dydu = 2 * uv + x0v * exp(uv);
  CHECK_CLOSE(g[0], exp(uv) + dydu * cos(x0v) * x1v, 1e-14);
  CHECK_CLOSE(g[1], dydu * sin(x0v), 1e-14);

  CHECK_CONTEXT("ad_tape_reset_to and re-recording");
  /* Drop y, then record an input after the position and give it a tangent
   * seed and an adjoint. */
  CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
  ad_real w = ad_input(3.0);
  ad_real yw = ad_mul(ad_mul(u, u), w);
  ad_tangent_seed(tape, w, 5.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  ad_adjoints_zero(tape);
  ad_seed(tape, yw, 1.0);
  CHECK_INT(ad_reverse(tape), AD_OK);
  CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
  CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
  CHECK_INT(st.statements, pos.index);
  /* Record something else after the position; its handles reuse those of
   * the discarded part (w2 gets the handle w had), which must leave no
   * adjoint or tangent behind. */
  ad_real w2 = ad_input(-2.0);
  CHECK_INT(w2.i, w.i);
  ad_real y2 = ad_div(ad_mul(u, w2), ad_add(1, ad_mul(x0, x0)));
  CHECK_SAME(ad_adjoint(tape, w2), 0.0);
  CHECK_SAME(ad_adjoint(tape, y2), 0.0);
  CHECK_SAME(ad_tangent(tape, w2), 0.0);
  ad_real x3[3] = {x0, x1, w2};
  double g3[3];
  CHECK_INT(ad_gradient(tape, y2, 3, x3, g3), AD_OK);
  double den = 1 + x0v * x0v;
  double t1 = (-2.0 * cos(x0v) * x1v) / den, t2 = (uv * -2.0) * 2 * x0v / (den * den);
  CHECK_CLOSE2(g3[0], t1 - t2, 1e-14, 1e-14 * (fabs(t1) + fabs(t2)));
  CHECK_CLOSE(g3[1], -2.0 * sin(x0v) / den, 1e-14);
  CHECK_CLOSE(g3[2], uv / den, 1e-14);
  /* A tangent sweep seeded on x0 only: the discarded seed on the reused
   * handle of w must not leak into it. */
  ad_tangents_zero(tape);
  ad_tangent_seed(tape, x0, 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_CLOSE2(ad_tangent(tape, y2), g3[0], 1e-14, 1e-14 * (fabs(t1) + fabs(t2)));
  /* Reset to the position by ad_tape_reset_to a second time. */
  ad_tape_pos pos2 = ad_tape_position(tape);
  ad_real y3 = ad_mul(y2, y2);
  (void)y3;
  CHECK_INT(ad_tape_reset_to(tape, pos2), AD_OK);
  CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
  CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
  CHECK_INT(st.statements, pos.index);
  ad_real y4 = ad_mul(u, 3.0);
  CHECK_INT(ad_gradient(tape, y4, 2, x, g), AD_OK);
  CHECK_CLOSE(g[0], 3.0 * cos(x0v) * x1v, 1e-14);
  CHECK_CLOSE(g[1], 3.0 * sin(x0v), 1e-14);
  ad_tape_end(tape);

  /* A position beyond the end of the tape is refused. */
  CHECK_CONTEXT("a position beyond the end");
  ad_tape_begin(tape);
  ad_real extra = ad_mul(y4, y4);
  (void)extra;
  ad_tape_pos late = ad_tape_position(tape);
  CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
  CHECK_INT(ad_tape_reset_to(tape, late), AD_ERR_ARG);
  CHECK_INT(ad_reverse_to(tape, late), AD_ERR_ARG);
  ad_tape_end(tape);
}

/* Positions on a small-block tape, at and around block boundaries. */
static void test_positions_blocks(void) {
  ad_tape *tape = check_tape_blocks(1024, 1024);
  if (!tape) return;
  int fills[] = {2, 1022, 1023, 1024, 1025, 2048, 3000};
  for (size_t f = 0; f < sizeof fills / sizeof *fills; f++) {
    int fill = fills[f];
    CHECK_CONTEXT("positions after %d statements on 1024-statement blocks", fill);
    ad_tape_reset(tape);
    ad_tape_begin(tape);
    ad_real x = ad_input(0.5);
    ad_real a = x;
    for (int k = 1; k < fill; k++) a = ad_mul(a, 1.0001);
    ad_tape_pos pos = ad_tape_position(tape);
    CHECK_INT(pos.index, (uint64_t)fill);
    ad_stats at_pos;
    CHECK_INT(ad_tape_stats(tape, &at_pos), AD_OK);
    double scale = ad_value(a) / 0.5; /* da/dx */
    for (int round = 0; round < 3; round++) {
      /* After the position: 1500 statements, across a block boundary. */
      ad_real b = a;
      for (int k = 0; k < 1500; k++) b = ad_add(ad_mul(b, 0.999), ad_sin(x));
      double gb = 1.0;
      /* db/da = 0.999^1500, db/dx adds sum of cos(x) 0.999^j. */
      double p = pow(0.999, 1500), s = 0.0;
      for (int j = 0; j < 1500; j++) s += pow(0.999, j);
      ad_adjoints_zero(tape);
      ad_seed(tape, b, 1.0);
      CHECK_INT(ad_reverse_to(tape, pos), AD_OK);
      CHECK_CLOSE(ad_adjoint(tape, a), p, 1e-12);
      CHECK_CLOSE(ad_adjoint(tape, x), cos(0.5) * s, 1e-12);
      CHECK_INT(ad_gradient(tape, b, 1, &x, &gb), AD_OK);
      CHECK_CLOSE(gb, p * scale + cos(0.5) * s, 1e-12);
      CHECK_INT(ad_tape_reset_to(tape, pos), AD_OK);
      ad_stats st;
      CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
      CHECK_INT(st.statements, (uint64_t)fill);
      CHECK_INT(st.blocks, at_pos.blocks);
      CHECK_INT(st.arguments, at_pos.arguments);
      CHECK_INT(st.bytes_used, at_pos.bytes_used);
    }
    ad_tape_end(tape);
  }
  ad_tape_destroy(tape);
}

/* ------------------------------------------------------------------------ */
/* Statistics and memory reuse                                               */
/* ------------------------------------------------------------------------ */

static void test_stats(void) {
  CHECK_CONTEXT("statistics");
  ad_stats s;
  CHECK_INT(ad_tape_stats(NULL, &s), AD_ERR_ARG);
  ad_tape *tape = check_tape_blocks(1024, 2048);
  if (!tape) return;
  CHECK_INT(ad_tape_stats(tape, NULL), AD_ERR_ARG);
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  CHECK_INT(s.statements, 0);
  CHECK_INT(s.arguments, 0);
  CHECK_INT(s.records, 0);
  CHECK_INT(s.blocks, 1);
  CHECK_INT(s.bytes_adjoints, 0);
  CHECK(s.bytes_reserved > 0 && s.bytes_reserved >= s.bytes_used);
  CHECK(s.bytes_peak >= s.bytes_reserved);

  ad_tape_begin(tape);
  ad_real x = ad_input(1.0), y = ad_input(2.0);
  ad_stats prev = s;
  int n = 5000;
  ad_real a = x;
  int monotone = 1;
  for (int k = 0; k < n; k++) {
    a = (k % 2) ? ad_sin(a) : ad_mul(a, y); /* 1 and 2 arguments alternately */
    CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
    monotone &= s.statements > prev.statements && s.arguments > prev.arguments && s.bytes_used > prev.bytes_used &&
                s.blocks >= prev.blocks && s.bytes_reserved >= s.bytes_used && s.bytes_reserved >= prev.bytes_reserved;
    prev = s;
  }
  CHECK(monotone);
  CHECK_INT(s.statements, 2 + n);
  CHECK_INT(s.arguments, n / 2 * 2 + n / 2);
  CHECK(s.blocks >= (uint64_t)(2 + n) / 1024);
  CHECK(s.blocks <= (uint64_t)(2 + n) / 1024 + 2);
  /* At least the bytes of the statements' handles and partials. */
  CHECK(s.bytes_used >= s.arguments * (sizeof(double) + sizeof(ad_index)));
  CHECK_INT(s.bytes_adjoints, 0);
  double g;
  CHECK_INT(ad_gradient(tape, a, 1, &x, &g), AD_OK);
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  CHECK(s.bytes_adjoints >= (s.statements + 1) * sizeof(double));
  CHECK(s.bytes_peak >= s.bytes_reserved + s.bytes_adjoints);

  ad_tape_reset(tape);
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  CHECK_INT(s.statements, 0);
  CHECK_INT(s.arguments, 0);
  CHECK_INT(s.blocks, 1);
  CHECK(s.bytes_reserved >= prev.bytes_reserved); /* memory kept for reuse */
  ad_tape_end(tape);
  ad_tape_destroy(tape);
}

/* Record the same computation again and again: after the first round no
 * more memory is taken. */
static void test_memory_reuse(void) {
  CHECK_CONTEXT("memory reuse after ad_tape_reset");
  ad_tape *tape = check_tape_blocks(4096, 8192);
  if (!tape) return;
  int n = check_small() ? 20000 : 200000;
  ad_stats first = {0}, s;
  for (int round = 0; round < 4; round++) {
    ad_tape_reset(tape);
    ad_tape_begin(tape);
    ad_real x[3] = {ad_input(0.1), ad_input(0.2), ad_input(0.3)};
    ad_real a = ad_const(0.0);
    /* A shorter recording in round 2: the kept blocks cover it. */
    int len = round == 2 ? n / 3 : n;
    for (int k = 0; k < len; k++) a = ad_add(ad_mul(a, 0.5), ad_sin(x[k % 3]));
    ad_real terms[3] = {a, x[0], x[1]};
    ad_real y = ad_sum(3, terms);
    ad_stmt_begin();
    y = ad_stmt_end(ad_mul(ad_exp(y), x[2]));
    ad_tape_end(tape);
    double g[3];
    CHECK_INT(ad_gradient(tape, y, 3, x, g), AD_OK);
    double J[3];
    CHECK_INT(ad_jacobian(tape, 1, &y, 3, x, J), AD_OK);
    CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
    if (round == 0) {
      first = s;
      CHECK(s.blocks > 10);
    } else {
      CHECK_INT(s.bytes_reserved, first.bytes_reserved);
      CHECK_INT(s.bytes_adjoints, first.bytes_adjoints);
      CHECK_INT(s.bytes_peak, first.bytes_peak);
      if (round != 2) {
        CHECK_INT(s.blocks, first.blocks);
        CHECK_INT(s.statements, first.statements);
        CHECK_INT(s.bytes_used, first.bytes_used);
      }
    }
  }
  ad_tape_destroy(tape);
}

/* Two tapes recording in turn (t1, t2, t1, t2) keep their recordings apart. */
static void test_two_tapes(void) {
  CHECK_CONTEXT("two tapes");
  ad_tape *t1, *t2;
  if (!check_two_tapes(&t1, &t2)) return;
  ad_real a = check_input_on(t1, 2.0), b = check_input_on(t2, 3.0);
  ad_tape_begin(t1);
  ad_real ya = ad_mul(ad_mul(a, a), a);
  ad_tape_end(t1);
  ad_tape_begin(t2);
  ad_real yb = ad_mul(b, b);
  ad_tape_end(t2);
  double ga, gb;
  CHECK_INT(ad_gradient(t1, ya, 1, &a, &ga), AD_OK);
  CHECK_INT(ad_gradient(t2, yb, 1, &b, &gb), AD_OK);
  CHECK_SAME(ga, 12.0);
  CHECK_SAME(gb, 6.0);
  ad_stats s1, s2;
  CHECK_INT(ad_tape_stats(t1, &s1), AD_OK);
  CHECK_INT(ad_tape_stats(t2, &s2), AD_OK);
  CHECK_INT(s1.statements, 3);
  CHECK_INT(s2.statements, 2);
  ad_tape_destroy(t1);
  ad_tape_destroy(t2);
}

int main(void) {
  ad_tape *tape = ad_tape_create();
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_drivers");

  static const size_t shapes[][2] = {{1, 1}, {2, 5}, {3, 20}, {4, 4}, {10, 10}, {9, 17},
                                     {7, 3}, {20, 3}, {17, 9}, {8, 8}, {16, 16}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    size_t m = shapes[s][0], n = shapes[s][1];
    check_jacobian(tape, m, n, SIZE_MAX, SIZE_MAX);
    if (m > 1 && n > 1) {
      check_jacobian(tape, m, n, 1, SIZE_MAX);
      check_jacobian(tape, m, n, SIZE_MAX, n - 1);
      check_jacobian(tape, m, n, m - 1, 0);
    }
  }
  test_jacobian_special(tape);
  test_many_sweeps(tape);
  test_positions(tape);
  ad_tape_destroy(tape);

  test_positions_blocks();
  test_stats();
  test_memory_reuse();
  test_two_tapes();
  return check_finish("test_drivers");
}
