/* SPDX-License-Identifier: BSD-3-Clause */
/* Progress reports: the figures passed to a callback, and the default
 * one-line report on rank 0's standard error. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ariadne_tools.h>

#include "progress.h"
#include "tape_impl.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The environment's choice, decided once: 0 off, 1 on a terminal, 2 asked for. */
static atomic_int env_mode = -1;

static int default_mode(void) {
  int m = atomic_load_explicit(&env_mode, memory_order_relaxed);
  if (m >= 0) return m;
  const char *e = getenv("ARIADNE_PROGRESS");
  if (e && *e)
    m = strcmp(e, "0") != 0 ? 2 : 0;
  else
    m = isatty(STDERR_FILENO) ? 1 : 0;
  atomic_store_explicit(&env_mode, m, memory_order_relaxed);
  return m;
}

static void fmt_time(char *buf, size_t size, double s) {
  if (s < 100.0)
    snprintf(buf, size, "%.1f s", s);
  else if (s < 6000.0)
    snprintf(buf, size, "%ld min %02ld s", (long)s / 60, (long)s % 60);
  else
    snprintf(buf, size, "%.1f h", s / 3600.0);
}

void ad_progress_print(const ad_progress *p, void *ud) {
  (void)ud;
  if (!p || ad__process_rank() != 0) return;
  char el[32], rem[32];
  fmt_time(el, sizeof el, p->elapsed);
  fmt_time(rem, sizeof rem, p->remaining);
  int tty = isatty(STDERR_FILENO);
  if (p->recomputed || strcmp(p->what, "checkpointed loop") == 0)
    fprintf(stderr, "%sariadne: %s %3.0f%% (%llu/%llu steps reversed, %lld recomputed), elapsed %s, remaining %s%s",
            tty ? "\r" : "", p->what, 100.0 * p->fraction, (unsigned long long)p->done, (unsigned long long)p->total,
            (long long)p->recomputed, el, rem, tty && !p->finished ? "" : "\n");
  else
    fprintf(stderr, "%sariadne: %s %3.0f%% (%llu/%llu statements), elapsed %s, remaining %s%s", tty ? "\r" : "",
            p->what, 100.0 * p->fraction, (unsigned long long)p->done, (unsigned long long)p->total, el, rem,
            tty && !p->finished ? "" : "\n");
  fflush(stderr);
}

/* The default report, at most twice a second; on a terminal only for runs
 * that last a second or more. */
static void report(ad__prog *g) {
  if (g->fn) {
    g->fn(&g->p, g->ud);
    return;
  }
  double t = g->p.elapsed;
  if (!g->p.finished && (t - g->last < 0.5 || (!g->explicit_env && t < 1.0))) return;
  if (g->p.finished && !g->printed && !g->explicit_env && t < 1.0) return;
  if (g->p.done == 0 && !g->p.finished) return;
  g->last = t;
  g->printed = 1;
  ad_progress_print(&g->p, NULL);
}

static void fill(ad__prog *g, uint64_t done, int64_t recomputed) {
  if (done > g->p.total) done = g->p.total;
  if (done < g->p.done) done = g->p.done; /* never backwards */
  g->p.done = done;
  g->p.recomputed = recomputed - g->rbase;
  g->p.fraction = g->p.total ? (double)done / (double)g->p.total : 1.0;
  g->p.elapsed = now() - g->t0;
  g->p.remaining = done && done < g->p.total ? g->p.elapsed * (double)(g->p.total - done) / (double)done : 0.0;
}

void ad__prog_start(ad__prog *g, ad_progress_fn fn, void *ud, const char *what, uint64_t total, int64_t recomputed,
                    uint64_t min_total) {
  memset(g, 0, sizeof *g);
  int mode = fn ? 0 : default_mode();
  if (!fn && (mode == 0 || total < min_total)) return;
  g->on = 1;
  g->fn = fn;
  g->ud = ud;
  g->explicit_env = mode == 2;
  g->p.what = what;
  g->p.total = total;
  g->rbase = recomputed;
  g->t0 = now();
  fill(g, 0, recomputed);
  report(g);
}

void ad__prog_step(ad__prog *g, uint64_t done, int64_t recomputed) {
  if (!g->on) return;
  fill(g, done, recomputed);
  report(g);
}

void ad__prog_end(ad__prog *g, int64_t recomputed) {
  if (!g->on) return;
  fill(g, g->p.total, recomputed);
  g->p.finished = 1;
  g->p.remaining = 0.0;
  report(g);
  g->on = 0;
}
