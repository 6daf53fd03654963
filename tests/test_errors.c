/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bad input and resource exhaustion. Each case must give its documented
 * error code with a specific message, never crash, keep computing values,
 * and leave a tape that gives correct gradients again after ad_tape_reset.
 */
#include <ariadne.h>
#include <limits.h>

#include "check.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* An error handler that records its calls. */
typedef struct handler_log {
  int calls;
  int code;
  const ad_tape *tape;
  char msg[512];
} handler_log;

static void log_handler(const ad_tape *tape, int code, const char *message, void *ud) {
  handler_log *h = ud;
  h->calls++;
  h->code = code;
  h->tape = tape;
  snprintf(h->msg, sizeof h->msg, "%s", message ? message : "");
}

/* After an error: reset, record y = x^3 sin(x) and check the gradient, so
 * that every error case ends by showing that the tape works again. */
static void check_usable(ad_tape *t) {
  ad_tape_reset(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  CHECK_STR(ad_tape_error_message(t), "");
  ad_tape_begin(t);
  double xv = 0.9;
  ad_real x = ad_input(xv);
  ad_real y = ad_mul(ad_mul(ad_mul(x, x), x), ad_sin(x));
  ad_tape_end(t);
  double g = NAN;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
  CHECK_CLOSE(g, 3 * xv * xv * sin(xv) + xv * xv * xv * cos(xv), 1e-14);
}

/* ------------------------------------------------------------------------ */
/* Stale handles                                                             */
/* ------------------------------------------------------------------------ */

static void test_other_tape(void) {
  CHECK_CONTEXT("a handle from another tape");
  ad_tape *a, *b;
  if (!check_two_tapes(&a, &b)) return;
  ad_real x = check_input_on(a, 2.0);

  ad_tape_begin(b);
  ad_real y = ad_input(3.0);
  ad_real z = ad_mul(y, x);
  CHECK_SAME(ad_value(z), 6.0);
  CHECK_INT(ad_tape_error(b), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(b), "ad_mul");
  CHECK_CONTAINS(ad_tape_error_message(b), "argument 2");
  CHECK_CONTAINS(ad_tape_error_message(b), "AD_ERR_STALE_HANDLE");
  /* Recording has stopped, values go on. */
  ad_real w = ad_add(ad_sin(y), 1);
  CHECK_SAME(ad_value(w), sin(3.0) + 1);
  CHECK_INT(w.i, 0);
  ad_tape_end(b);
  double g = 1.0;
  CHECK_INT(ad_gradient(b, y, 1, &y, &g), AD_ERR_STALE_HANDLE);
  CHECK_SAME(g, 0.0);
  CHECK_INT(ad_reverse(b), AD_ERR_STALE_HANDLE);
  CHECK_INT(ad_forward(b), AD_ERR_STALE_HANDLE);
  double J = 1.0;
  CHECK_INT(ad_jacobian(b, 1, &y, 1, &y, &J), AD_ERR_STALE_HANDLE);
  /* The sticky error stays until the reset. */
  CHECK_INT(ad_tape_error(b), AD_ERR_STALE_HANDLE);
  check_usable(b);

  /* The first tape is untouched. */
  CHECK_INT(ad_tape_error(a), AD_OK);
  CHECK_INT(ad_gradient(a, x, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 1.0);

  /* A foreign handle in a fused statement, and as a driver argument. */
  CHECK_CONTEXT("a foreign handle in ad_sum and ad_gradient");
  ad_tape_reset(b);
  ad_tape_begin(b);
  ad_real v = ad_input(1.0);
  ad_real terms[3] = {v, x, v};
  ad_real s = ad_sum(3, terms);
  CHECK_SAME(ad_value(s), 4.0);
  CHECK_INT(ad_tape_error(b), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(b), "ad_sum");
  ad_tape_end(b);
  check_usable(b);
  ad_tape_begin(b);
  ad_real q = ad_input(1.5);
  ad_real r = ad_mul(q, q);
  ad_tape_end(b);
  ad_real in[2] = {q, x};
  double g2[2] = {NAN, NAN};
  CHECK_INT(ad_gradient(b, r, 2, in, g2), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(b), "ad_gradient");
  /* A usage error of a driver is reported once; the recording is intact. */
  CHECK_INT(ad_gradient(b, r, 1, in, g2), AD_OK);
  CHECK_SAME(g2[0], 3.0);
  /* Reading the adjoint of a foreign value: NaN, and the next sweep says why. */
  CHECK(isnan(ad_adjoint(b, x)));
  CHECK_INT(ad_reverse(b), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(b), "ad_adjoint");
  CHECK_INT(ad_reverse(b), AD_OK);
  ad_tape_destroy(a);
  ad_tape_destroy(b);
}

static void test_before_reset(void) {
  CHECK_CONTEXT("a handle from before ad_tape_reset");
  ad_tape *t = ad_tape_create();
  CHECK(t != NULL);
  if (!t) return;
  ad_tape_begin(t);
  ad_real old = ad_input(0.5);
  ad_real old2 = ad_exp(old);
  ad_tape_reset(t);
  ad_real x = ad_input(0.25);
  ad_real y = ad_add(x, ad_sin(old2));
  CHECK_SAME(ad_value(y), 0.25 + sin(exp(0.5)));
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_sin");
  CHECK_CONTAINS(ad_tape_error_message(t), "before ad_tape_reset");
  ad_tape_end(t);
  double g;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_ERR_STALE_HANDLE);
  check_usable(t);

  /* Inside a preaccumulated region. */
  CHECK_CONTEXT("a stale handle inside a region");
  ad_tape_begin(t);
  ad_real z = ad_input(1.0);
  ad_stmt_begin();
  ad_real u = ad_mul(z, old);
  ad_real r = ad_stmt_end(ad_add(u, z));
  CHECK_SAME(ad_value(r), 1.5);
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  ad_tape_end(t);
  check_usable(t);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Passive values where active ones are needed                               */
/* ------------------------------------------------------------------------ */

static void test_passive(void) {
  ad_tape *t = ad_tape_create();
  CHECK(t != NULL);
  if (!t) return;
  ad_tape_begin(t);
  ad_real x = ad_input(2.0);
  ad_real y = ad_mul(x, x);
  ad_real c = ad_mul(ad_const(3.0), 4);
  ad_tape_end(t);

  CHECK_CONTEXT("ad_seed of a passive value");
  ad_seed(t, c, 1.0);
  CHECK_INT(ad_tape_error(t), AD_ERR_PASSIVE);
  CHECK_INT(ad_reverse(t), AD_ERR_PASSIVE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_seed");
  CHECK_CONTAINS(ad_tape_error_message(t), "passive");
  /* Reported once: the next sweep runs. */
  CHECK_INT(ad_tape_error(t), AD_OK);
  ad_adjoints_zero(t);
  ad_seed(t, y, 1.0);
  CHECK_INT(ad_reverse(t), AD_OK);
  CHECK_SAME(ad_adjoint(t, x), 4.0);

  CHECK_CONTEXT("ad_tangent_seed of a passive value");
  ad_tangent_seed(t, c, 1.0);
  CHECK_INT(ad_forward(t), AD_ERR_PASSIVE);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_tangent_seed");
  CHECK_INT(ad_forward(t), AD_OK);

  CHECK_CONTEXT("ad_gradient of a passive output");
  double g[1] = {NAN};
  CHECK_INT(ad_gradient(t, c, 1, &x, g), AD_ERR_PASSIVE);
  CHECK_SAME(g[0], 0.0);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_gradient");
  CHECK_CONTAINS(ad_tape_error_message(t), "passive");
  CHECK_INT(ad_gradient(t, y, 1, &x, g), AD_OK);
  CHECK_SAME(g[0], 4.0);
  /* A passive value's adjoint and tangent read as 0. */
  CHECK_SAME(ad_adjoint(t, c), 0.0);
  CHECK_SAME(ad_tangent(t, c), 0.0);
  check_usable(t);
  ad_tape_destroy(t);
}

static void test_no_tape(void) {
  CHECK_CONTEXT("ad_input without a recording tape");
  CHECK(ad_tape_current() == NULL);
  ad_clear_last_error();
  CHECK_INT(ad_last_error(), AD_OK);
  handler_log h = {0, 0, NULL, ""};
  ad_set_error_handler(log_handler, &h);
  ad_real x = ad_input(1.5);
  CHECK_INT(x.i, 0);
  CHECK_SAME(ad_value(x), 1.5);
  CHECK_INT(ad_last_error(), AD_ERR_NO_TAPE);
  CHECK_INT(h.calls, 1);
  CHECK_INT(h.code, AD_ERR_NO_TAPE);
  CHECK(h.tape == NULL);
  CHECK_CONTAINS(h.msg, "ad_input");
  ad_set_error_handler(NULL, NULL);
  /* Operations on it are plain arithmetic. */
  ad_real y = ad_mul(ad_sin(x), 2);
  CHECK_INT(y.i, 0);
  CHECK_SAME(ad_value(y), sin(1.5) * 2);
  ad_clear_last_error();
  CHECK_INT(ad_last_error(), AD_OK);

  /* A tape that exists but has ended is not recording either. */
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_tape_end(t);
  ad_real z = ad_input(2.0);
  CHECK_INT(z.i, 0);
  CHECK_INT(ad_last_error(), AD_ERR_NO_TAPE);
  ad_clear_last_error();
  ad_stats s;
  CHECK_INT(ad_tape_stats(t, &s), AD_OK);
  CHECK_INT(s.statements, 0);
  check_usable(t);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

/* An allocator that fails once `limit` allocations have been made, and
 * counts what is still live so that leaks show without valgrind. */
typedef struct counting_alloc {
  long allocs, frees, limit;
} counting_alloc;

static void *ca_alloc(size_t size, void *ud) {
  counting_alloc *c = ud;
  if (c->allocs >= c->limit) return NULL;
  void *p = malloc(size);
  if (p) c->allocs++;
  return p;
}

static void ca_free(void *p, void *ud) {
  counting_alloc *c = ud;
  if (p) c->frees++;
  free(p);
}

/* A workload that touches every kind of allocation: blocks, the adjoint and
 * tangent vectors, the scratch of fused statements and of preaccumulation,
 * the Jacobian workspace. Returns the value it computed; *rc gets the first
 * error. The plain double twin is workload_value. */
static double workload(ad_tape *t, int n, double *grad, int *rc) {
  ad_tape_begin(t);
  ad_real x[2] = {ad_input(0.3), ad_input(-0.4)};
  ad_real a = x[0];
  for (int k = 0; k < n; k++) a = ad_add(ad_mul(a, 0.999), ad_mul(ad_sin(x[1]), 1e-3));
  ad_real big[300];
  for (int k = 0; k < 300; k++) big[k] = k % 2 ? a : x[1];
  ad_real s = ad_sum(300, big);
  ad_stmt_begin();
  ad_real y = ad_stmt_end(ad_mul(ad_exp(ad_mul(s, 1e-3)), x[0]));
  ad_tape_end(t);
  *rc = ad_gradient(t, y, 2, x, grad);
  if (*rc == AD_OK) {
    double J[2];
    *rc = ad_jacobian(t, 1, &y, 2, x, J);
    if (*rc == AD_OK) {
      ad_tangent_seed(t, x[0], 1.0);
      *rc = ad_forward(t);
    }
  }
  return ad_value(y);
}

static double workload_value(int n) {
  double x0 = 0.3, x1 = -0.4, a = x0;
  for (int k = 0; k < n; k++) a = a * 0.999 + sin(x1) * 1e-3;
  double s = 0.0;
  for (int k = 0; k < 300; k++) s += k % 2 ? a : x1;
  return exp(s * 1e-3) * x0;
}

static void test_allocator(void) {
  int n = check_small() ? 3000 : 20000;
  double want = workload_value(n);
  /* The gradient with an unlimited allocator, as the reference. */
  counting_alloc ref = {0, 0, LONG_MAX};
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.block_arguments = 1024;
  o.alloc = ca_alloc;
  o.free = ca_free;
  o.alloc_ud = &ref;
  ad_tape *t = ad_tape_create_with(&o);
  CHECK(t != NULL);
  if (!t) return;
  double gref[2];
  int rc;
  CHECK_SAME(workload(t, n, gref, &rc), want);
  CHECK_INT(rc, AD_OK);
  ad_tape_destroy(t);
  CHECK_INT(ref.allocs, ref.frees);
  long needed = ref.allocs;
  CHECK(needed > 10);

  /* Fail at every allocation in turn. */
  int failures = 0, created = 0, refused = 0;
  for (long k = 0; k <= needed; k++) {
    CHECK_CONTEXT("allocator failing after %ld allocations", k);
    counting_alloc c = {0, 0, k};
    o.alloc_ud = &c;
    t = ad_tape_create_with(&o);
    if (!t) {
      CHECK_INT(c.allocs, c.frees);
      refused++;
      continue;
    }
    created++;
    double g[2] = {NAN, NAN};
    double v = workload(t, n, g, &rc);
    /* Values are computed whatever happened to the recording. */
    CHECK_SAME(v, want);
    if (k < needed) {
      CHECK_INT(rc, AD_ERR_NOMEM);
      CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
      CHECK_CONTAINS(ad_tape_error_message(t), "allocation");
      CHECK_CONTAINS(ad_tape_error_message(t), "AD_ERR_NOMEM");
      failures += rc == AD_ERR_NOMEM;
    } else {
      CHECK_INT(rc, AD_OK);
      CHECK_SAME(g[0], gref[0]);
      CHECK_SAME(g[1], gref[1]);
    }
    /* With memory again, the same tape records and differentiates. */
    c.limit = LONG_MAX;
    ad_tape_reset(t);
    double g2[2];
    CHECK_SAME(workload(t, n, g2, &rc), want);
    CHECK_INT(rc, AD_OK);
    CHECK_SAME(g2[0], gref[0]);
    CHECK_SAME(g2[1], gref[1]);
    ad_tape_destroy(t);
    CHECK_INT(c.allocs, c.frees);
  }
  /* Every limit short of the need either refused the tape or failed with
   * AD_ERR_NOMEM; the full need succeeded. */
  CHECK_INT(created + refused, needed + 1);
  CHECK_INT(failures + refused, needed);
  CHECK(failures >= 10);
}

/* A tape with the given limits (0: none), its blocks of 1024 statements and
 * arguments when small_blocks is set; NULL after a failed check. */
static ad_tape *tape_with_limits(int small_blocks, size_t memory_limit, uint64_t index_limit) {
  ad_tape_options o;
  ad_tape_options_default(&o);
  if (small_blocks) o.block_statements = o.block_arguments = 1024;
  o.memory_limit = memory_limit;
  o.index_limit = index_limit;
  ad_tape *t = ad_tape_create_with(&o);
  CHECK(t != NULL);
  return t;
}

static void test_memory_limit(void) {
  int n = check_small() ? 20000 : 100000;
  size_t limit = 200000;
  ad_tape *t = tape_with_limits(1, limit, 0);
  if (!t) return;

  CHECK_CONTEXT("memory_limit option");
  ad_tape_begin(t);
  ad_real x = ad_input(0.5);
  ad_real a = x;
  double av = 0.5;
  for (int k = 0; k < n; k++) {
    a = ad_add(ad_mul(a, 0.5), ad_cos(x));
    av = av * 0.5 + cos(0.5);
  }
  ad_tape_end(t);
  CHECK_SAME(ad_value(a), av);
  CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
  CHECK_CONTAINS(ad_tape_error_message(t), "memory limit");
  ad_stats s;
  CHECK_INT(ad_tape_stats(t, &s), AD_OK);
  CHECK(s.bytes_reserved + s.bytes_adjoints <= limit);
  CHECK(s.bytes_peak <= limit);
  CHECK(s.statements > 1000 && s.statements < (uint64_t)n);
  double g;
  CHECK_INT(ad_gradient(t, a, 1, &x, &g), AD_ERR_NOMEM);
  ad_tape_set_memory_limit(t, 0);
  check_usable(t);

  /* The same through ad_tape_set_memory_limit on a running tape. */
  CHECK_CONTEXT("ad_tape_set_memory_limit");
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(0.5);
  ad_tape_set_memory_limit(t, limit);
  a = x;
  for (int k = 0; k < n; k++) a = ad_add(ad_mul(a, 0.5), ad_cos(x));
  ad_tape_end(t);
  CHECK_SAME(ad_value(a), av);
  CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
  ad_tape_set_memory_limit(t, 0);
  check_usable(t);

  /* A limit that leaves room for the recording but not for the adjoints. */
  CHECK_CONTEXT("memory limit hit by the adjoint vector");
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(0.5);
  a = x;
  for (int k = 0; k < 4000; k++) a = ad_add(ad_mul(a, 0.5), ad_cos(x));
  ad_tape_end(t);
  CHECK_INT(ad_tape_stats(t, &s), AD_OK);
  ad_tape_set_memory_limit(t, s.bytes_reserved + s.bytes_adjoints + 1024);
  CHECK_INT(ad_gradient(t, a, 1, &x, &g), AD_ERR_NOMEM);
  CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
  ad_tape_set_memory_limit(t, 0);
  check_usable(t);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Index overflow                                                            */
/* ------------------------------------------------------------------------ */

static void test_index_limit(uint64_t limit, int small_blocks) {
  CHECK_CONTEXT("index_limit %llu%s", (unsigned long long)limit, small_blocks ? ", small blocks" : "");
  ad_tape *t = tape_with_limits(small_blocks, 0, limit);
  if (!t) return;

  /* Exactly `limit` statements fit. */
  ad_tape_begin(t);
  ad_real x = ad_input(1.0);
  ad_real a = x;
  for (uint64_t k = 1; k < limit; k++) a = ad_mul(a, 1.0);
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_OK);
  double g = NAN;
  CHECK_INT(ad_gradient(t, a, 1, &x, &g), AD_OK);
  CHECK_SAME(g, 1.0);

  /* One more does not. */
  ad_tape_begin(t);
  ad_real b = ad_mul(a, 3.0);
  ad_real c = ad_add(b, x);
  ad_tape_end(t);
  CHECK_SAME(ad_value(c), 4.0);
  CHECK_INT(b.i, 0);
  CHECK_INT(ad_tape_error(t), AD_ERR_INDEX_OVERFLOW);
  CHECK_CONTAINS(ad_tape_error_message(t), "index limit");
  ad_stats s;
  CHECK_INT(ad_tape_stats(t, &s), AD_OK);
  CHECK_INT(s.statements, limit); /* nothing wrapped */
  CHECK_INT(ad_gradient(t, a, 1, &x, &g), AD_ERR_INDEX_OVERFLOW);
  if (limit >= 8) check_usable(t);

  /* A fused statement at the limit: with limit - 1 handles issued, a sum
   * of up to AD_STMT_MAX_ARGS values is one statement and fits; a longer one needs a
   * chain of statements and does not. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  size_t n = (size_t)limit - 1;
  ad_real *v = malloc((n ? n : 1) * sizeof *v);
  for (size_t k = 0; k < n; k++) v[k] = ad_input((double)k);
  size_t m = n < 600 ? n : 600;
  ad_real sum = ad_sum(m, v);
  ad_tape_end(t);
  CHECK_SAME(ad_value(sum), (double)m * ((double)m - 1) / 2);
  CHECK_INT(ad_tape_stats(t, &s), AD_OK);
  CHECK(s.statements <= limit);
  if (m > AD_STMT_MAX_ARGS) {
    CHECK_INT(ad_tape_error(t), AD_ERR_INDEX_OVERFLOW);
  } else {
    CHECK_INT(ad_tape_error(t), AD_OK);
    if (m > 0) {
      CHECK_INT(s.statements, limit);
      double *gs = malloc(m * sizeof *gs);
      CHECK_INT(ad_gradient(t, sum, m, v, gs), AD_OK);
      size_t ones = 0;
      for (size_t k = 0; k < m; k++) ones += gs[k] == 1.0;
      CHECK_INT(ones, m);
      free(gs);
    }
  }
  free(v);
  if (limit >= 8) check_usable(t);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Error handler, messages, NULL arguments                                   */
/* ------------------------------------------------------------------------ */

static void test_handler(void) {
  CHECK_CONTEXT("error handler");
  handler_log h = {0, 0, NULL, ""};
  ad_set_error_handler(log_handler, &h);
  ad_tape *t = ad_tape_create(), *other = ad_tape_create();
  ad_real foreign = check_input_on(other, 1.0);
  ad_tape_begin(t);
  ad_real x = ad_input(2.0), y = ad_mul(x, x), z = x;
  for (int k = 0; k < 10; k++) z = ad_mul(z, foreign);
  ad_tape_end(t);
  CHECK_SAME(ad_value(z), 2.0);
  double g;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_ERR_STALE_HANDLE);
  CHECK_INT(ad_reverse(t), AD_ERR_STALE_HANDLE);
  /* One failure, one call, however often it shows afterwards. */
  CHECK_INT(h.calls, 1);
  CHECK_INT(h.code, AD_ERR_STALE_HANDLE);
  CHECK(h.tape == t);
  CHECK_STR(h.msg, ad_tape_error_message(t));

  /* After the reset a new failure calls it again. */
  ad_tape_reset(t);
  ad_seed(t, ad_const(1.0), 1.0);
  CHECK_INT(h.calls, 2);
  CHECK_INT(h.code, AD_ERR_PASSIVE);
  CHECK_INT(ad_reverse(t), AD_ERR_PASSIVE);
  CHECK_INT(h.calls, 2);

  /* Uninstalled, it is not called. */
  ad_set_error_handler(NULL, NULL);
  ad_seed(t, ad_const(1.0), 1.0);
  CHECK_INT(ad_reverse(t), AD_ERR_PASSIVE);
  CHECK_INT(h.calls, 2);

  /* The ready-made printing handler takes any tape, even none. */
  ad_error_handler_print(NULL, AD_ERR_ARG, "ariadne: test message from test_errors (expected)", NULL);
  ad_error_handler_print(t, AD_ERR_NOMEM, "ariadne: another test message (expected)", NULL);
  ad_tape_destroy(t);
  ad_tape_destroy(other);
}

static void test_messages(void) {
  CHECK_CONTEXT("ad_strerror and ad_errname");
  static const struct {
    int code;
    const char *name;
  } codes[] = {
      {AD_OK, "AD_OK"},
      {AD_ERR_NOMEM, "AD_ERR_NOMEM"},
      {AD_ERR_INDEX_OVERFLOW, "AD_ERR_INDEX_OVERFLOW"},
      {AD_ERR_STALE_HANDLE, "AD_ERR_STALE_HANDLE"},
      {AD_ERR_NO_TAPE, "AD_ERR_NO_TAPE"},
      {AD_ERR_PASSIVE, "AD_ERR_PASSIVE"},
      {AD_ERR_ARG, "AD_ERR_ARG"},
      {AD_ERR_STATE, "AD_ERR_STATE"},
      {AD_ERR_CALLBACK, "AD_ERR_CALLBACK"},
      {AD_ERR_MPI, "AD_ERR_MPI"},
      {AD_ERR_PASSIVE_BUILD, "AD_ERR_PASSIVE_BUILD"},
      {AD_ERR_IO, "AD_ERR_IO"},
      {AD_ERR_CORRUPT, "AD_ERR_CORRUPT"},
      {AD_ERR_CHECK, "AD_ERR_CHECK"},
      {AD_ERR_NONFINITE, "AD_ERR_NONFINITE"},
  };
  size_t n = sizeof codes / sizeof *codes;
  /* The codes are 0, -1, ..., up to the end marker, with no gaps. */
  CHECK_INT(AD__ERR_LAST, -(int)n);
  for (size_t k = 0; k < n; k++) {
    CHECK_INT(codes[k].code, -(int)k);
    CHECK_STR(ad_errname(codes[k].code), codes[k].name);
    const char *m = ad_strerror(codes[k].code);
    CHECK(m != NULL && strlen(m) > 3);
    CHECK(strcmp(m, "unknown error") != 0);
    for (size_t j = 0; j < k; j++) CHECK(strcmp(m, ad_strerror(codes[j].code)) != 0);
  }
  CHECK_CONTAINS(ad_strerror(AD_ERR_NOMEM), "memory");
  CHECK_CONTAINS(ad_strerror(AD_ERR_NO_TAPE), "tape");
  int unknown[] = {1, 42, AD__ERR_LAST, -100, INT_MIN, INT_MAX};
  for (size_t k = 0; k < sizeof unknown / sizeof *unknown; k++) {
    CHECK_STR(ad_strerror(unknown[k]), "unknown error");
    CHECK_STR(ad_errname(unknown[k]), "AD_ERR_UNKNOWN");
  }
}

static void test_null_arguments(void) {
  CHECK_CONTEXT("NULL tapes and arguments");
  ad_tape_destroy(NULL);
  ad_tape_reset(NULL);
  ad_tape_end(NULL);
  ad_clear_last_error();
  ad_tape_begin(NULL);
  CHECK_INT(ad_last_error(), AD_ERR_ARG);
  ad_clear_last_error();
  CHECK(ad_tape_current() == NULL);
  CHECK_INT(ad_tape_error(NULL), AD_ERR_ARG);
  CHECK(strlen(ad_tape_error_message(NULL)) > 0);
  CHECK_INT(ad_tape_is_recording(NULL), 0);
  ad_tape_set_memory_limit(NULL, 10);
  ad_real x = ad_const(1.0);
  double g = 7.0;
  CHECK_INT(ad_gradient(NULL, x, 1, &x, &g), AD_ERR_ARG);
  CHECK_INT(ad_jacobian(NULL, 1, &x, 1, &x, &g), AD_ERR_ARG);
  CHECK_INT(ad_reverse(NULL), AD_ERR_ARG);
  CHECK_INT(ad_forward(NULL), AD_ERR_ARG);
  ad_tape_pos p = ad_tape_position(NULL);
  CHECK_INT(p.index, 0);
  CHECK_INT(ad_reverse_to(NULL, p), AD_ERR_ARG);
  CHECK_INT(ad_tape_reset_to(NULL, p), AD_ERR_ARG);
  ad_seed(NULL, x, 1.0);
  ad_tangent_seed(NULL, x, 1.0);
  ad_adjoints_zero(NULL);
  ad_tangents_zero(NULL);
  CHECK_SAME(ad_adjoint(NULL, x), 0.0);
  CHECK_SAME(ad_tangent(NULL, x), 0.0);

  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real y = ad_input(1.0);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, y, 1, NULL, &g), AD_ERR_ARG);
  CHECK_INT(ad_gradient(t, y, 1, &y, NULL), AD_ERR_ARG);
  CHECK_INT(ad_jacobian(t, 1, NULL, 1, &y, &g), AD_ERR_ARG);
  CHECK_INT(ad_jacobian(t, 1, &y, 1, &y, NULL), AD_ERR_ARG);
  CHECK_INT(ad_jacobian(t, SIZE_MAX, &y, 2, &y, &g), AD_ERR_ARG); /* m n overflows */

  /* A position from a longer recording. */
  CHECK_CONTEXT("a position beyond the end");
  ad_tape_begin(t);
  ad_real z = ad_mul(y, y);
  ad_tape_pos late = ad_tape_position(t);
  ad_tape_end(t);
  (void)z;
  ad_tape_reset(t);
  CHECK_INT(ad_tape_reset_to(t, late), AD_ERR_ARG);
  CHECK_CONTAINS(ad_tape_error_message(t), "ad_tape_reset_to");
  CHECK_INT(ad_reverse_to(t, late), AD_ERR_ARG);
  check_usable(t);
  ad_tape_destroy(t);
}

static void test_nesting(void) {
  CHECK_CONTEXT("ad_tape_begin / ad_tape_end nesting");
  ad_tape *a, *b;
  if (!check_two_tapes(&a, &b)) return;
  ad_tape_begin(a);
  CHECK(ad_tape_current() == a);
  CHECK(ad_tape_is_recording(a));
  ad_real xa = ad_input(1.0);
  ad_tape_begin(b);
  CHECK(ad_tape_current() == b);
  CHECK(ad_tape_is_recording(b));
  CHECK(!ad_tape_is_recording(a));
  ad_real xb = ad_input(2.0);
  ad_real yb = ad_mul(xb, xb);
  /* Beginning the current tape again changes nothing. */
  ad_tape_begin(b);
  CHECK(ad_tape_current() == b);
  ad_tape_end(b);
  CHECK(ad_tape_current() == a);
  CHECK(ad_tape_is_recording(a));
  CHECK(!ad_tape_is_recording(b));
  ad_real ya = ad_mul(xa, 5);
  ad_tape_end(a);
  CHECK(ad_tape_current() == NULL);
  ad_stats sa, sb;
  CHECK_INT(ad_tape_stats(a, &sa), AD_OK);
  CHECK_INT(ad_tape_stats(b, &sb), AD_OK);
  CHECK_INT(sa.statements, 2);
  CHECK_INT(sb.statements, 2);
  double g;
  CHECK_INT(ad_gradient(a, ya, 1, &xa, &g), AD_OK);
  CHECK_SAME(g, 5.0);
  CHECK_INT(ad_gradient(b, yb, 1, &xb, &g), AD_OK);
  CHECK_SAME(g, 4.0);

  /* Destroying the inner, recording tape also restores the outer one. */
  ad_tape_begin(a);
  ad_tape_begin(b);
  ad_tape_destroy(b);
  CHECK(ad_tape_current() == a);
  CHECK(ad_tape_is_recording(a));
  ad_tape_end(a);
  CHECK(ad_tape_current() == NULL);
  ad_tape_destroy(a);
}

/* The version at run time is the version of the headers compiled in. */
static void test_version(void) {
  CHECK_CONTEXT("ad_version");
  char want[64];
  snprintf(want, sizeof want, "%d.%d.%d", ARIADNE_VERSION_MAJOR, ARIADNE_VERSION_MINOR, ARIADNE_VERSION_PATCH);
  CHECK(strncmp(ad_version(), want, strlen(want)) == 0);
  CHECK_CONTAINS(ad_version(), sizeof(ad_index) == 8 ? "64-bit handles" : "32-bit handles");
  CHECK_INT(ad_version_number(), ARIADNE_VERSION_MAJOR * 10000 + ARIADNE_VERSION_MINOR * 100 + ARIADNE_VERSION_PATCH);
  CHECK_INT(ad_version_number(), ARIADNE_VERSION_NUMBER);
}

int main(void) {
  test_version();
  test_other_tape();
  test_before_reset();
  test_passive();
  test_no_tape();
  test_allocator();
  test_memory_limit();
  test_index_limit(2000, 1);
  test_index_limit(2000, 0);
  test_index_limit(5, 0);
  test_index_limit(1024, 1);
  test_index_limit(200, 0);
  test_index_limit(1, 0);
  test_handler();
  test_messages();
  test_null_arguments();
  test_nesting();
  return check_finish("test_errors");
}
