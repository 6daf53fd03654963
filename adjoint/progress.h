/* SPDX-License-Identifier: BSD-3-Clause */
/* Private: progress reports of sweeps and checkpointed loops. Not installed. */
#ifndef ARIADNE_PROGRESS_H
#define ARIADNE_PROGRESS_H

#include <ariadne.h>

/* One run being reported: ad__prog_start, then ad__prog_step as work gets
 * done (only while `on`), then ad__prog_end. */
typedef struct ad__prog {
  int on;
  ad_progress_fn fn;
  void *ud;
  ad_progress p;
  double t0, last;  /* start and last report (seconds, monotonic) */
  int64_t rbase;    /* recomputed steps before the start */
  int printed;      /* the default report has written a line */
  int explicit_env; /* ARIADNE_PROGRESS=1 asked for the default report */
} ad__prog;

/* fn NULL: the default report if ARIADNE_PROGRESS=1, or if standard error is
 * a terminal (and ARIADNE_PROGRESS is not 0), for runs of at least
 * `min_total` units; otherwise off. */
void ad__prog_start(ad__prog *g, ad_progress_fn fn, void *ud, const char *what, uint64_t total, int64_t recomputed,
                    uint64_t min_total);
void ad__prog_step(ad__prog *g, uint64_t done, int64_t recomputed);
void ad__prog_end(ad__prog *g, int64_t recomputed);

#endif
