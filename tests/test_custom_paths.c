/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The paths of the inline ad_custom and of the reverse sweep's statement
 * loop: statements of a count known at compile time (as the fused port
 * writes them), every argument active, one passive at each place, a handle
 * named twice, a stale handle at each place; and a tape large enough that
 * ad_custom writes its later blocks with streaming stores, swept in both
 * directions and checked against an adjoint and a tangent computed by hand.
 */
#include <ariadne.h>

#include "check.h"

static ad_tape *tape;

static ad_stats stats(void) {
  ad_stats s;
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  return s;
}

/* y = ad_custom over x[0..N) with partials p, N a constant after inlining;
 * `passive` (< N) replaces that argument by a constant, `twice` (< N)
 * names x[0] again in that place. Checks the statement and the gradient
 * (the partials themselves, added where a handle repeats) and the tangent
 * along xdot (the sum of p[k] xdot[k] over the active arguments). */
#define CUSTOM_CASE(N)                                                                                                 \
  static void custom_##N(size_t passive, size_t twice) {                                                               \
    CHECK_CONTEXT("ad_custom of %d arguments, passive %zu, twice %zu", N, passive, twice);                             \
    ad_tape_reset(tape);                                                                                               \
    ad_real x[N], a[N];                                                                                                \
    double p[N], xdot[N], g[N], want[N], tan = 0.0;                                                                    \
    for (size_t k = 0; k < N; k++) {                                                                                   \
      x[k] = ad_input(0.25 * (double)k - 1.0);                                                                         \
      a[k] = x[k];                                                                                                     \
      p[k] = 1.5 - 0.75 * (double)k;                                                                                   \
      xdot[k] = 0.5 + (double)k;                                                                                       \
      want[k] = 0.0;                                                                                                   \
    }                                                                                                                  \
    if (passive < N) a[passive] = ad_const(3.0);                                                                       \
    if (twice < N) a[twice] = x[0];                                                                                    \
    size_t active = 0;                                                                                                 \
    for (size_t k = 0; k < N; k++) {                                                                                   \
      if (a[k].i == 0) continue;                                                                                       \
      active++;                                                                                                        \
      size_t j = a[k].i == x[0].i ? 0 : k;                                                                             \
      want[j] += p[k];                                                                                                 \
      tan += p[k] * xdot[j];                                                                                           \
    }                                                                                                                  \
    ad_stats s0 = stats();                                                                                             \
    ad_real y = ad_custom(7.0, N, a, p);                                                                               \
    ad_stats s1 = stats();                                                                                             \
    CHECK_INT(s1.statements - s0.statements, active ? 1 : 0);                                                          \
    CHECK_INT(s1.arguments - s0.arguments, active);                                                                    \
    CHECK_SAME(ad_value(y), 7.0);                                                                                      \
    CHECK_INT(ad_gradient(tape, y, N, x, g), active ? AD_OK : AD_ERR_PASSIVE);                                         \
    size_t good = 0;                                                                                                   \
    for (size_t k = 0; k < N; k++) good += g[k] == want[k];                                                            \
    CHECK_INT(good, N);                                                                                                \
    ad_tangents_zero(tape);                                                                                            \
    for (size_t k = 0; k < N; k++) ad_tangent_seed(tape, x[k], xdot[k]);                                               \
    CHECK_INT(ad_forward(tape), AD_OK);                                                                                \
    CHECK_CLOSE(ad_tangent(tape, y), tan, 1e-15);                                                                      \
  }                                                                                                                    \
  /* A handle of the recording before a reset, at place `stale`: the tape's                                            \
   * sticky error names it and nothing is recorded. */                                                                 \
  static void custom_stale_##N(size_t stale) {                                                                         \
    CHECK_CONTEXT("ad_custom of %d arguments, stale %zu", N, stale);                                                   \
    ad_tape_reset(tape);                                                                                               \
    ad_real old = ad_input(2.0);                                                                                       \
    ad_tape_reset(tape);                                                                                               \
    ad_real a[N];                                                                                                      \
    double p[N];                                                                                                       \
    for (size_t k = 0; k < N; k++) {                                                                                   \
      a[k] = ad_input((double)k);                                                                                      \
      p[k] = 1.0;                                                                                                      \
    }                                                                                                                  \
    a[stale] = old;                                                                                                    \
    ad_stats s0 = stats();                                                                                             \
    ad_real y = ad_custom(5.0, N, a, p);                                                                               \
    CHECK_INT(stats().statements, s0.statements);                                                                      \
    CHECK_SAME(ad_value(y), 5.0);                                                                                      \
    CHECK_INT(ad_tape_error(tape), AD_ERR_STALE_HANDLE);                                                               \
    CHECK(strstr(ad_tape_error_message(tape), "ad_custom") != NULL);                                                   \
    ad_tape_reset(tape);                                                                                               \
  }                                                                                                                    \
  static void custom_all_##N(void) {                                                                                   \
    for (size_t j = 0; j <= N; j++) custom_##N(j, N);                                                                 \
    for (size_t j = 1; j < N; j++) custom_##N(N, j);                                                                   \
    for (size_t j = 0; j < N; j++) custom_stale_##N(j);                                                                \
  }

/* The counts the reverse sweep writes out (1 to 8), the first it loops for
 * (9), and the largest inline statement. */
CUSTOM_CASE(1)
CUSTOM_CASE(2)
CUSTOM_CASE(3)
CUSTOM_CASE(4)
CUSTOM_CASE(5)
CUSTOM_CASE(6)
CUSTOM_CASE(7)
CUSTOM_CASE(8)
CUSTOM_CASE(9)
CUSTOM_CASE(63)

/* NSTEP steps of NCELL cells, each cell one statement of itself and its
 * two neighbours as the fused port writes it (where k % 7 == 3 the west
 * neighbour is a constant, so a passive argument is dropped): 37 bytes of
 * tape per cell, 19 MB in all, well past the point where ad_custom starts
 * to stream (AD__STREAM_AFTER, 8 MiB; blocks double in size, so the last
 * ones are streamed). The memcheck run records all of it too: the streamed
 * stores are what it is there to see. The adjoint and the tangent are
 * computed by hand from the same partials. */
#define NCELL 512
#define NSTEP 1000

static double weight(int k, int j) { return 0.1 + 0.01 * (double)((k * 5 + j) % 11); }

static void test_stream(void) {
  CHECK_CONTEXT("streamed tape");
  int steps = NSTEP;
  ad_tape_reset(tape);
  ad_real *u = malloc(NCELL * sizeof *u), *v = malloc(NCELL * sizeof *v), *x = malloc(NCELL * sizeof *x);
  double *ub = calloc((size_t)(steps + 1) * NCELL, sizeof *ub), *ud = calloc((size_t)(steps + 1) * NCELL, sizeof *ud);
  double *g = malloc(NCELL * sizeof *g), *seed = malloc(NCELL * sizeof *seed);
  for (int k = 0; k < NCELL; k++) x[k] = u[k] = ad_input(1.0 + 0.001 * k);
  int streamed = 0;
  for (int t = 0; t < steps; t++) {
    for (int k = 0; k < NCELL; k++) {
      int w = (k + NCELL - 1) % NCELL, e = (k + 1) % NCELL;
      ad_real a[3] = {u[k], k % 7 == 3 ? ad_const(0.0) : u[w], u[e]};
      double p[3] = {weight(k, 0), weight(k, 1), weight(k, 2)};
      v[k] = ad_custom(p[0] * a[0].v + p[1] * a[1].v + p[2] * a[2].v, 3, a, p);
    }
    ad_real *s = u;
    u = v;
    v = s;
    streamed |= (int)ad__rec->stream;
  }
  CHECK(streamed);
  ad_stats s = stats();
  uint64_t passive = 0;
  for (int k = 0; k < NCELL; k++) passive += k % 7 == 3;
  CHECK_INT(s.arguments, (uint64_t)steps * (3 * NCELL - passive));
  CHECK_INT(s.statements, (uint64_t)(steps + 1) * NCELL);
  ad_real J = ad_const(0.0);
  for (int k = 0; k < NCELL; k++) J = ad_add(J, ad_mul(u[k], 1.0 + 0.5 * k));
  CHECK_INT(ad_gradient(tape, J, NCELL, x, g), AD_OK);
  /* By hand, backwards: ub[t][k] is the adjoint of cell k after step t. */
  for (int k = 0; k < NCELL; k++) ub[(size_t)steps * NCELL + k] = 1.0 + 0.5 * k;
  for (int t = steps; t > 0; t--)
    for (int k = NCELL - 1; k >= 0; k--) {
      int w = (k + NCELL - 1) % NCELL, e = (k + 1) % NCELL;
      double b = ub[(size_t)t * NCELL + k];
      double *up = ub + (size_t)(t - 1) * NCELL;
      up[k] += weight(k, 0) * b;
      if (k % 7 != 3) up[w] += weight(k, 1) * b;
      up[e] += weight(k, 2) * b;
    }
  double err = 0.0, gmax = 0.0;
  for (int k = 0; k < NCELL; k++) {
    err = fmax(err, fabs(g[k] - ub[k]));
    gmax = fmax(gmax, fabs(ub[k]));
  }
  CHECK(err <= 1e-13 * gmax);
  /* The tangent sweep along seed, by hand forwards, and the dot product of
   * the two sweeps: J's tangent is the gradient times the seed. */
  double dot = 0.0;
  ad_tangents_zero(tape);
  for (int k = 0; k < NCELL; k++) {
    seed[k] = cos(0.1 * k);
    ud[k] = seed[k];
    dot += seed[k] * g[k];
    ad_tangent_seed(tape, x[k], seed[k]);
  }
  CHECK_INT(ad_forward(tape), AD_OK);
  for (int t = 1; t <= steps; t++)
    for (int k = 0; k < NCELL; k++) {
      int w = (k + NCELL - 1) % NCELL, e = (k + 1) % NCELL;
      const double *up = ud + (size_t)(t - 1) * NCELL;
      ud[(size_t)t * NCELL + k] =
          weight(k, 0) * up[k] + (k % 7 == 3 ? 0.0 : weight(k, 1) * up[w]) + weight(k, 2) * up[e];
    }
  double jt = 0.0;
  for (int k = 0; k < NCELL; k++) jt += (1.0 + 0.5 * k) * ud[(size_t)steps * NCELL + k];
  CHECK_CLOSE(ad_tangent(tape, J), jt, 1e-13);
  CHECK_CLOSE(ad_tangent(tape, J), dot, 1e-13);
  free(u);
  free(v);
  free(x);
  free(ub);
  free(ud);
  free(g);
  free(seed);
}

int main(void) {
  tape = ad_tape_create();
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_custom_paths");
  ad_tape_begin(tape);
  custom_all_1();
  custom_all_2();
  custom_all_3();
  custom_all_4();
  custom_all_5();
  custom_all_6();
  custom_all_7();
  custom_all_8();
  custom_all_9();
  custom_all_63();
  test_stream();
  ad_tape_end(tape);
  ad_tape_destroy(tape);
  return check_finish("test_custom_paths");
}
