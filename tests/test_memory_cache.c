/* SPDX-License-Identifier: BSD-3-Clause */
/* The process-wide memory cache: a tape destroyed leaves its large arrays to
 * the tapes created after it, within ad_memory_cache_limit; gradients on
 * reused (dirty) memory are the same bits; a tape's own memory limit still
 * holds; the environment variable sets the limit.
 *
 * Usage: test_memory_cache [expected limit in bytes] (default 1 GiB: the test
 * runs once without ARIADNE_MEMORY_CACHE and once with it set). */
#include <ariadne.h>
#include <stdint.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_MAPPINGS 1 /* AddressSanitizer builds take every array from malloc */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_MAPPINGS 1
#endif
#endif
#if !defined(__linux__)
#define NO_MAPPINGS 1
#endif

#define M 64      /* inputs */
#define N 1200000 /* products: a tape of some 60 MB, its large blocks mapped */

static double x0(int i) { return 0.3 + 0.01 * i; }

/* f = sum_k sin(x[k % M]) * x[(k + 1) % M], one statement per operation. */
static int record(ad_tape *t, double *g, double *f) {
  ad_real x[M];
  ad_tape_begin(t);
  for (int i = 0; i < M; i++) x[i] = ad_input(x0(i));
  ad_real acc = ad_const(0.0);
  for (long k = 0; k < N; k++) acc = ad_add(acc, ad_mul(ad_sin(x[k % M]), x[(k + 1) % M]));
  ad_tape_end(t);
  *f = ad_value(acc);
  return ad_gradient(t, acc, M, x, g);
}

/* d f / d x_i = (N / M) (cos x_i x_{i+1} + sin x_{i-1}). */
static void check_gradient(const double *g) {
  for (int i = 0; i < M; i++) {
    double want = (double)(N / M) * (cos(x0(i)) * x0((i + 1) % M) + sin(x0((i + M - 1) % M)));
    CHECK_CLOSE(g[i], want, 1e-10);
  }
}


/* A user allocator that counts, over malloc. */
typedef struct counts {
  long allocs, frees;
} counts;
static void *count_alloc(size_t size, void *ud) {
  ((counts *)ud)->allocs++;
  return malloc(size);
}
static void count_free(void *p, void *ud) {
  ((counts *)ud)->frees++;
  free(p);
}

/* ad_tape_options' allocator with one member left NULL. Memory from .alloc
 * is released by .free, or by free() when .free is NULL, and never enters
 * the cache (its arrays have the sizes asked, not whole huge pages); memory
 * the library allocated itself (no .alloc) is released by the library and
 * never handed to .free. */
static void test_half_allocator(const double *g1, double f1) {
  double g2[M], f2;
  for (int which = 0; which < 3; which++) {
    CHECK_CONTEXT("allocator with %s", which == 0 ? ".alloc only" : which == 1 ? ".free only" : "both");
    counts c = {0, 0};
    ad_tape_options o;
    ad_tape_options_default(&o);
    if (which != 1) o.alloc = count_alloc;
    if (which != 0) o.free = count_free;
    o.alloc_ud = &c;
    size_t before = ad_memory_cache_bytes();
    ad_tape *t = ad_tape_create_with(&o);
    CHECK(t != NULL);
    if (!t) continue;
    CHECK_INT(record(t, g2, &f2), AD_OK);
    CHECK_SAME(f2, f1);
    for (int i = 0; i < M; i++) CHECK_SAME(g2[i], g1[i]);
    ad_tape_destroy(t);
    if (which == 1) {
      CHECK_INT(c.allocs, 0);
      CHECK_INT(c.frees, 0); /* the library's own memory is never handed to .free */
    } else {
      CHECK(c.allocs > 0);
      CHECK_INT(c.frees, which == 2 ? c.allocs : 0);
      CHECK_INT(ad_memory_cache_bytes(), before); /* nothing of the user's was kept */
    }
    /* The next tape, on what the cache holds, is sound. */
    ad_tape *u = ad_tape_create();
    CHECK_INT(record(u, g2, &f2), AD_OK);
    for (int i = 0; i < M; i++) CHECK_SAME(g2[i], g1[i]);
    ad_tape_destroy(u);
  }
}

/* A fused statement's two scratch arrays (handles, then partials) grow one
 * after the other: the memory limit reached between them must leave each
 * array's size known, so that ad_tape_destroy releases each as it was
 * allocated (a mapping of whole huge pages, not through free()). */
static void test_scratch_limit(void) {
  CHECK_CONTEXT("memory limit between the scratch arrays of ad_sum");
  enum { K = 600000 }; /* handles of 2^20 entries: 4 or 8 MiB, mapped */
  ad_real *x = malloc(K * sizeof *x);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  for (int k = 0; k < K; k++) x[k] = ad_input(1.0);
  ad_stats st;
  ad_tape_stats(t, &st);
  /* room for the handles (4 MiB with 32-bit handles, 8 with 64-bit ones), not for the partials (8 MiB) */
  ad_tape_set_memory_limit(t, st.bytes_reserved + st.bytes_adjoints + ((size_t)10 << 20));
  ad_real s = ad_sum(K, x);
  CHECK_INT(s.i, 0);
  CHECK_INT(ad_tape_error(t), AD_ERR_NOMEM);
  CHECK_CONTAINS(ad_tape_error_message(t), "memory limit");
  ad_tape_end(t);
  ad_tape_destroy(t);
  /* and the same with the limit lifted: the sum of K ones */
  t = ad_tape_create();
  ad_tape_begin(t);
  for (int k = 0; k < 4; k++) x[k] = ad_input(1.0 + k);
  s = ad_sum(4, x);
  ad_tape_end(t);
  double g[4];
  CHECK_INT(ad_gradient(t, s, 4, x, g), AD_OK);
  for (int k = 0; k < 4; k++) CHECK_SAME(g[k], 1.0);
  ad_tape_destroy(t);
  free(x);
}

int main(int argc, char **argv) {
  size_t expect = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)1 << 30;
  double g1[M], g2[M], f1, f2;

  CHECK_CONTEXT("limit");
  CHECK_INT(ad_memory_cache_limit(expect), expect); /* the default, or the environment's */
  CHECK_INT(ad_memory_cache_bytes(), 0);

  CHECK_CONTEXT("first tape");
  ad_tape *a = ad_tape_create();
  CHECK_INT(record(a, g1, &f1), AD_OK);
  check_gradient(g1);
  ad_stats st;
  CHECK_INT(ad_tape_stats(a, &st), AD_OK);
  ad_tape_destroy(a);
  size_t kept = ad_memory_cache_bytes();
#ifdef NO_MAPPINGS
  CHECK_INT(kept, 0);
#else
  /* Most of the tape is in blocks of whole huge pages: they are kept, as
   * far as the limit allows. */
  if (expect >= st.bytes_reserved) CHECK(kept >= st.bytes_reserved / 2);
  CHECK(kept <= expect);
#endif

  CHECK_CONTEXT("second tape, on the first one's memory");
  ad_tape *b = ad_tape_create();
  CHECK_INT(record(b, g2, &f2), AD_OK);
  CHECK_SAME(f2, f1);
  for (int i = 0; i < M; i++) CHECK_SAME(g2[i], g1[i]);
#ifndef NO_MAPPINGS
  if (kept > 0) CHECK(ad_memory_cache_bytes() < kept); /* taken from the cache */
#endif
  ad_tape_destroy(b);

  CHECK_CONTEXT("limit 0 keeps nothing and releases what is kept");
  CHECK_INT(ad_memory_cache_limit(0), expect);
  CHECK_INT(ad_memory_cache_bytes(), 0);
  ad_tape *c = ad_tape_create();
  CHECK_INT(record(c, g2, &f2), AD_OK);
  for (int i = 0; i < M; i++) CHECK_SAME(g2[i], g1[i]);
  ad_tape_destroy(c);
  CHECK_INT(ad_memory_cache_bytes(), 0);

  CHECK_CONTEXT("a small limit");
  size_t small = (size_t)6 << 20;
  CHECK_INT(ad_memory_cache_limit(small), 0);
  c = ad_tape_create();
  CHECK_INT(record(c, g2, &f2), AD_OK);
  ad_tape_destroy(c);
  CHECK(ad_memory_cache_bytes() <= small);
#ifndef NO_MAPPINGS
  CHECK(ad_memory_cache_bytes() > 0);
#endif

  CHECK_CONTEXT("a tape's memory limit holds with memory in the cache");
  CHECK_INT(ad_memory_cache_limit((size_t)1 << 30), small);
  c = ad_tape_create();
  CHECK_INT(record(c, g2, &f2), AD_OK);
  ad_tape_destroy(c); /* the cache now holds a whole tape */
  ad_tape *d = ad_tape_create();
  ad_tape_set_memory_limit(d, (size_t)8 << 20);
  CHECK_INT(record(d, g2, &f2), AD_ERR_NOMEM);
  CHECK_INT(ad_tape_error(d), AD_ERR_NOMEM);
  CHECK_CONTAINS(ad_tape_error_message(d), "memory limit");
  ad_tape_destroy(d);
  ad_tape *e = ad_tape_create();
  CHECK_INT(record(e, g2, &f2), AD_OK);
  for (int i = 0; i < M; i++) CHECK_SAME(g2[i], g1[i]);
  ad_tape_destroy(e);

  test_half_allocator(g1, f1);
  test_scratch_limit();
  return check_finish("test_memory_cache");
}
