/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Tiny test harness for Ariadne's tests. Checks never compile out: each one
 * counts, a failure prints file:line, the expression and the values, and
 * check_finish() turns the count into the program's exit status.
 *
 * A test may set a context string (CHECK_CONTEXT) that is printed with every
 * failure, so that a check inside a loop over operations and points says
 * which operation and point failed.
 */
#ifndef ARIADNE_TEST_CHECK_H
#define ARIADNE_TEST_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long check__count;
static long check__failed;
static char check__context[256];

/* Describe what the following checks are about (printf format). */
static inline void check_context(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(check__context, sizeof check__context, fmt, ap);
  va_end(ap);
}
#define CHECK_CONTEXT(...) check_context(__VA_ARGS__)

static inline void check__where(const char *file, int line) {
  fprintf(stderr, "%s:%d: ", file, line);
  if (check__context[0]) fprintf(stderr, "[%s] ", check__context);
}

static inline int check__bool(int ok, const char *expr, const char *file, int line) {
  check__count++;
  if (ok) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK(%s) failed\n", expr);
  return 0;
}

static inline int check__int(long long got, long long want, const char *gexpr, const char *wexpr, const char *file,
                      int line) {
  check__count++;
  if (got == want) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK_INT(%s, %s) failed: got %lld, want %lld\n", gexpr, wexpr, got, want);
  return 0;
}

/* |got - want| <= atol + rtol * max(|got|, |want|). Equal values pass, so
 * that two equal infinities compare as expected; a NaN never passes. */
static inline int check__close(double got, double want, double rtol, double atol, const char *gexpr, const char *wexpr,
                        const char *file, int line) {
  check__count++;
  double err = fabs(got - want);
  double mag = fabs(got) > fabs(want) ? fabs(got) : fabs(want);
  if (got == want || err <= atol + rtol * mag) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK_CLOSE(%s, %s) failed: got %.17g, want %.17g (abs err %.3g, rel err %.3g; rtol %.3g, atol %.3g)\n",
          gexpr, wexpr, got, want, err, mag > 0 ? err / mag : err, rtol, atol);
  return 0;
}

static inline int check__same(double got, double want, const char *gexpr, const char *wexpr, const char *file, int line) {
  check__count++;
  /* Bitwise equal up to the sign of zero; NaN equals NaN. */
  if (got == want || (isnan(got) && isnan(want))) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK_SAME(%s, %s) failed: got %.17g, want %.17g\n", gexpr, wexpr, got, want);
  return 0;
}

static inline int check__str(const char *got, const char *want, const char *gexpr, const char *file, int line) {
  check__count++;
  if (got && want && strcmp(got, want) == 0) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK_STR(%s) failed: got \"%s\", want \"%s\"\n", gexpr, got ? got : "(null)",
          want ? want : "(null)");
  return 0;
}

static inline int check__contains(const char *hay, const char *needle, const char *hexpr, const char *file, int line) {
  check__count++;
  if (hay && needle && strstr(hay, needle)) return 1;
  check__failed++;
  check__where(file, line);
  fprintf(stderr, "CHECK_CONTAINS(%s) failed: \"%s\" does not contain \"%s\"\n", hexpr, hay ? hay : "(null)",
          needle ? needle : "(null)");
  return 0;
}

#define CHECK(cond) check__bool(!!(cond), #cond, __FILE__, __LINE__)
#define CHECK_INT(got, want) check__int((long long)(got), (long long)(want), #got, #want, __FILE__, __LINE__)
/* Relative tolerance only: right for values that are not expected near 0. */
#define CHECK_CLOSE(got, want, rtol) check__close((got), (want), (rtol), 0.0, #got, #want, __FILE__, __LINE__)
/* Relative and absolute tolerance, for values that may be 0 or cancel. */
#define CHECK_CLOSE2(got, want, rtol, atol) \
  check__close((got), (want), (rtol), (atol), #got, #want, __FILE__, __LINE__)
/* Exactly the same double (NaN matches NaN). */
#define CHECK_SAME(got, want) check__same((got), (want), #got, #want, __FILE__, __LINE__)
#define CHECK_STR(got, want) check__str((got), (want), #got, __FILE__, __LINE__)
#define CHECK_CONTAINS(hay, needle) check__contains((hay), (needle), #hay, __FILE__, __LINE__)

/* Print the summary line and return the exit status for main. */
static inline int check_finish(const char *name) {
  printf("%s: %ld checks, %ld failed\n", name, check__count, check__failed);
  fflush(stdout);
  return check__failed ? 1 : 0;
}

/* The central difference of f along coordinate k of x (n values) with step
 * h: f(x + h e_k) - f(x - h e_k) over the step as it is represented. */
static inline double check_central_difference(double (*f)(const double *), const double *x, size_t n, size_t k,
                                              double h) {
  double *xs = (double *)malloc(n * sizeof *xs);
  memcpy(xs, x, n * sizeof *xs);
  xs[k] = x[k] + h;
  double fp = f(xs), step = xs[k];
  xs[k] = x[k] - h;
  double fm = f(xs);
  step -= xs[k];
  free(xs);
  return (fp - fm) / step;
}

/* True when the test runs under a slow checker (valgrind): tests then shrink
 * their problem sizes so that the whole memcheck set stays within minutes.
 * The CMake memcheck tests set ARIADNE_TEST_SMALL=1. */
static inline int check_small(void) {
  const char *s = getenv("ARIADNE_TEST_SMALL");
  return s && *s && strcmp(s, "0") != 0;
}

#if defined(ARIADNE_H) && !defined(ARIADNE_PASSIVE)
/* A tape with small storage blocks (the rest of its options the defaults),
 * for tests at and across block boundaries; a failure to make it counts.
 * Include ariadne.h before this header to have it. */
static inline ad_tape *check_tape_blocks(uint32_t statements, uint32_t arguments) {
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = statements;
  o.block_arguments = arguments;
  ad_tape *t = ad_tape_create_with(&o);
  check__bool(t != NULL, "check_tape_blocks", __FILE__, __LINE__);
  return t;
}

/* Two new tapes in *a and *b; 0 (a failed check, nothing left to free) when
 * either could not be made. */
static inline int check_two_tapes(ad_tape **a, ad_tape **b) {
  *a = ad_tape_create();
  *b = ad_tape_create();
  if (check__bool(*a && *b, "check_two_tapes", __FILE__, __LINE__)) return 1;
  ad_tape_destroy(*a);
  ad_tape_destroy(*b);
  *a = *b = NULL;
  return 0;
}

/* A value recorded as an input of tape t, which then stops recording: a
 * handle of another tape for the tests that mix tapes. */
static inline ad_real check_input_on(ad_tape *t, double value) {
  ad_tape_begin(t);
  ad_real x = ad_input(value);
  ad_tape_end(t);
  return x;
}
#endif

/* splitmix64: a small, well-mixed, seedable generator, so that every random
 * test is reproducible from its seed on every platform. */
typedef struct check_rng {
  unsigned long long s;
} check_rng;

static inline unsigned long long check_rng_next(check_rng *r) {
  unsigned long long z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [0, 1). */
static inline double check_rng_unit(check_rng *r) { return (double)(check_rng_next(r) >> 11) * 0x1.0p-53; }
/* Uniform in [lo, hi). */
static inline double check_rng_range(check_rng *r, double lo, double hi) { return lo + (hi - lo) * check_rng_unit(r); }
/* Uniform integer in [0, n). */
static inline unsigned check_rng_below(check_rng *r, unsigned n) { return (unsigned)(check_rng_next(r) % n); }

#endif
