/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Threads: every thread records and sweeps tapes of its own at the same
 * time (the recorder and the current tape are per thread; the sweeps share
 * only constant tables). Run under ThreadSanitizer (-DARIADNE_TSAN=ON) this
 * finds data races; in any build it checks every thread's gradients and
 * Jacobians against closed forms. Large tapes made and destroyed in every
 * thread at once share the process-wide memory cache.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <ariadne.h>

#include <pthread.h>

#include "check.h"

enum { THREADS = 8, N = 6 };

/* All threads start their first sweeps together, so that anything the
 * sweeps set up lazily is set up concurrently. */
static pthread_barrier_t start_line;

typedef struct job {
  int id;
  long checks, failed;
} job;

/* f(x) = sum_k sin(x_k) x_{k+1} + exp(x_0 / 4), with closed-form partials;
 * y2 = x_0 * x_1 + id for a Jacobian with two rows. */
static void *work(void *arg) {
  job *j = arg;
  int rounds = check_small() ? 5 : 50;
  for (int r = 0; r < rounds; r++) {
    double xv[N];
    for (int k = 0; k < N; k++) xv[k] = 0.1 * (k + 1) + 0.01 * j->id + 0.001 * r;
    ad_tape *t = ad_tape_create();
    if (!t) {
      j->failed++;
      return NULL;
    }
    ad_tape_begin(t);
    ad_real x[N];
    for (int k = 0; k < N; k++) x[k] = ad_input(xv[k]);
    ad_real f = ad_exp(ad_div(x[0], 4.0));
    for (int k = 0; k + 1 < N; k++) f = ad_add(f, ad_mul(ad_sin(x[k]), x[k + 1]));
    ad_stmt_begin();
    ad_real y2 = ad_stmt_end(ad_add(ad_mul(x[0], x[1]), (double)j->id));
    ad_tape_end(t);
    double want[N];
    for (int k = 0; k < N; k++) {
      want[k] = (k > 0 ? sin(xv[k - 1]) : 0.0) + (k + 1 < N ? cos(xv[k]) * xv[k + 1] : 0.0);
    }
    want[0] += exp(xv[0] / 4.0) / 4.0;
    double g[N], J[2 * N];
    if (r == 0) pthread_barrier_wait(&start_line);
    j->checks += 2;
    if (ad_gradient(t, f, N, x, g) != AD_OK) j->failed++;
    ad_real ys[2] = {f, y2};
    if (ad_jacobian(t, 2, ys, N, x, J) != AD_OK) j->failed++;
    for (int k = 0; k < N; k++) {
      double w2 = k == 0 ? xv[1] : k == 1 ? xv[0] : 0.0;
      j->checks += 3;
      if (fabs(g[k] - want[k]) > 1e-14 * (1 + fabs(want[k]))) j->failed++;
      if (fabs(J[k] - want[k]) > 1e-14 * (1 + fabs(want[k]))) j->failed++;
      if (fabs(J[N + k] - w2) > 1e-14 * (1 + fabs(w2))) j->failed++;
    }
    ad_tape_destroy(t);
  }
  /* Large tapes one after another: their blocks (whole huge pages) go to the
   * process-wide memory cache and come back from it in every thread at once.
   * a_{k+1} = c a_k + x, a_0 = x: d a_K / dx = c^K + (1 - c^K) / (1 - c). */
  int big = check_small() ? 1 : 3;
  for (int r = 0; r < big; r++) {
    const double c = 0.999;
    const long K = 150000;
    ad_tape *t = ad_tape_create();
    if (!t) {
      j->failed++;
      return NULL;
    }
    ad_tape_begin(t);
    ad_real x = ad_input(0.5 + 0.01 * j->id), a = x;
    for (long k = 0; k < K; k++) a = ad_add(ad_mul(a, c), x);
    ad_tape_end(t);
    double g, cK = pow(c, (double)K), want = cK + (1.0 - cK) / (1.0 - c);
    j->checks += 2;
    if (ad_gradient(t, a, 1, &x, &g) != AD_OK) j->failed++;
    if (fabs(g - want) > 1e-9 * want) j->failed++;
    ad_tape_destroy(t);
  }
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  job jobs[THREADS];
  CHECK_INT(pthread_barrier_init(&start_line, NULL, THREADS), 0);
  for (int i = 0; i < THREADS; i++) {
    jobs[i].id = i;
    jobs[i].checks = jobs[i].failed = 0;
    CHECK_INT(pthread_create(&th[i], NULL, work, &jobs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    CHECK_INT(pthread_join(th[i], NULL), 0);
    CHECK_CONTEXT("thread %d", i);
    CHECK(jobs[i].checks > 0);
    CHECK_INT(jobs[i].failed, 0);
  }
  pthread_barrier_destroy(&start_line);
  return check_finish("test_threads");
}
