/* SPDX-License-Identifier: BSD-3-Clause */
/* Progress reports: callbacks of reverse and tangent sweeps and of a checkpointed loop
 * fire in order, from done = 0 to done = total, with fractions, times and
 * recomputation counts that agree with what is known independently (the
 * statement count, the loop's steps, the binomial optimum); and the default
 * report, asked for with ARIADNE_PROGRESS=1, writes its line. */
#define _POSIX_C_SOURCE 200809L
#include <ariadne_checkpoint.h>
#include <ariadne_tools.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAXCALLS 4096

typedef struct log {
  int n;
  ad_progress p[MAXCALLS];
  char what[MAXCALLS][32];
} call_log;

static void record_call(const ad_progress *p, void *ud) {
  call_log *l = ud;
  if (l->n < MAXCALLS) {
    l->p[l->n] = *p;
    snprintf(l->what[l->n], sizeof l->what[l->n], "%s", p->what);
  }
  l->n++;
}

/* In order, monotone, sane: shared by both kinds. */
static void check_sequence(const call_log *l, const char *what, uint64_t total) {
  CHECK(l->n >= 2 && l->n <= MAXCALLS);
  if (l->n < 2 || l->n > MAXCALLS) return;
  CHECK_INT(l->p[0].done, 0);
  CHECK(!l->p[0].finished);
  CHECK_INT(l->p[l->n - 1].done, total);
  CHECK(l->p[l->n - 1].finished);
  CHECK_SAME(l->p[l->n - 1].remaining, 0.0);
  CHECK_SAME(l->p[l->n - 1].fraction, 1.0);
  int bad = 0;
  for (int k = 0; k < l->n; k++) {
    const ad_progress *p = &l->p[k];
    bad += strcmp(l->what[k], what) != 0;
    bad += p->total != total;
    bad += p->fraction != (double)p->done / (double)total;
    bad += !(p->elapsed >= 0.0 && p->remaining >= 0.0);
    bad += p->finished != (k == l->n - 1);
    if (k) {
      bad += p->done < l->p[k - 1].done;
      bad += p->elapsed < l->p[k - 1].elapsed;
      bad += p->recomputed < l->p[k - 1].recomputed;
    }
  }
  CHECK_INT(bad, 0);
}

static void test_sweep(void) {
  CHECK_CONTEXT("reverse sweep");
  call_log *l = calloc(1, sizeof *l);
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.progress = record_call;
  o.progress_ud = l;
  ad_tape *t = ad_tape_create_with(&o);
  ad_tape_begin(t);
  ad_real x = ad_input(0.5), y = x;
  int n = check_small() ? 5000 : 20000;
  for (int k = 0; k < n; k++) y = ad_sin(ad_add(y, x));
  ad_tape_end(t);
  ad_stats st;
  ad_tape_stats(t, &st);
  CHECK_INT(st.statements, 2 * (uint64_t)n + 1);
  double g;
  CHECK_INT(ad_gradient(t, y, 1, &x, &g), AD_OK);
  check_sequence(l, "reverse sweep", 2 * (uint64_t)n + 1);
  /* at least one report per block swept, besides the first and last */
  CHECK(l->n >= (int)(st.blocks + 1));
  /* a second sweep reports again, from 0 */
  int first = l->n;
  CHECK_INT(ad_reverse(t), AD_OK);
  CHECK(l->n > first && l->p[first].done == 0);
  /* and so does a tangent sweep */
  l->n = 0;
  ad_tangent_seed(t, x, 1.0);
  CHECK_INT(ad_forward(t), AD_OK);
  check_sequence(l, "tangent sweep", 2 * (uint64_t)n + 1);
  CHECK(l->n >= (int)(st.blocks + 1));
  CHECK_CLOSE(ad_tangent(t, y), g, 1e-12);
  ad_tape_destroy(t);
  free(l);
}

static int step(void *ud, int64_t i, size_t *n, ad_real *s, size_t *pb, void *ps) {
  (void)ud, (void)i, (void)n, (void)pb, (void)ps;
  s[0] = ad_add(ad_mul(0.9, s[0]), ad_mul(0.1, ad_sin(s[1])));
  s[1] = ad_mul(s[1], 1.01);
  return 0;
}

/* Records the checkpointed loop under o from x = (0.3, 0.7), and J, the
 * sum of its two values. */
static ad_tape *record_loop(const ad_ckpt_options *o, ad_real x[2], ad_real *J) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  x[0] = ad_input(0.3);
  x[1] = ad_input(0.7);
  ad_real s[2] = {x[0], x[1]};
  CHECK_INT(ad_checkpoint_loop(o, step, NULL, 2, s, 0, NULL), AD_OK);
  *J = ad_add(s[0], s[1]);
  ad_tape_end(t);
  return t;
}

static void test_loop(void) {
  CHECK_CONTEXT("checkpointed loop");
  call_log *l = calloc(1, sizeof *l);
  const int64_t steps = 40;
  const int snaps = 3;
  ad_ckpt_stats cs;
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = steps;
  o.snapshots = snaps;
  o.progress = record_call;
  o.progress_ud = l;
  o.stats = &cs;
  ad_real x[2], J;
  ad_tape *t = record_loop(&o, x, &J);
  CHECK_INT(l->n, 0); /* nothing to report before the sweep */
  int64_t forward = cs.advances;
  double g[2];
  CHECK_INT(ad_gradient(t, J, 2, x, g), AD_OK);
  check_sequence(l, "checkpointed loop", (uint64_t)steps);
  /* one call per step reversed, plus the first and the last */
  CHECK_INT(l->n, steps + 2);
  for (int k = 1; k <= steps; k++) CHECK_INT(l->p[k].done, k < steps ? k : steps);
  /* the forward run's advances and those reported make revolve's optimum */
  CHECK_INT(forward + l->p[l->n - 1].recomputed, ad_revolve_optimum(steps, snaps));
  CHECK(l->p[l->n - 1].recomputed > 0);
  ad_tape_destroy(t);
  free(l);
}

/* ARIADNE_PROGRESS=1: the default report on standard error (rank 0 of a
 * serial program), caught in a file. */
static void test_default(void) {
  CHECK_CONTEXT("default report");
  char path[] = "/tmp/ariadne_progress_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  fflush(stderr);
  FILE *err = freopen(path, "w", stderr);
  CHECK(err != NULL);
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = 12;
  o.snapshots = 2;
  ad_real x[2], J;
  ad_tape *t = record_loop(&o, x, &J);
  double g[2];
  CHECK_INT(ad_gradient(t, J, 2, x, g), AD_OK);
  ad_tape_destroy(t);
  fflush(stderr);
  FILE *f = fopen(path, "r");
  char line[512] = "";
  int lines = 0, found = 0;
  while (f && fgets(line, sizeof line, f)) {
    lines++;
    found += strstr(line, "ariadne: checkpointed loop 100% (12/12 steps reversed") != NULL &&
             strstr(line, "recomputed), elapsed") != NULL && strstr(line, "remaining 0.0 s") != NULL;
  }
  if (f) fclose(f);
  remove(path);
  CHECK_INT(found, 1);
  CHECK(lines >= 1);
}

int main(void) {
  /* The environment decides the default report once per process: this
   * program asks for it; the callbacks below override it. */
  setenv("ARIADNE_PROGRESS", "1", 1);
  test_sweep();
  test_loop();
  test_default();
  return check_finish("test_progress");
}
