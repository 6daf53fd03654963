/* SPDX-License-Identifier: BSD-3-Clause */
/* What the checkpointing tests, serial and MPI, share: the options of one
 * row of a table of schedules, and the count a twin step keeps of its calls
 * in each build. */
#ifndef ARIADNE_TEST_CKPT_CASE_H
#define ARIADNE_TEST_CKPT_CASE_H

#include <ariadne_checkpoint.h>

/* Options for a loop of `steps` steps under `schedule`, with `snapshots` in
 * memory and `disk` on disk (in dir), its statistics to *st (NULL: none). */
static inline void ckpt_case_options(ad_ckpt_options *o, ad_ckpt_schedule schedule, int64_t steps, int snapshots,
                                     int disk, const char *dir, ad_ckpt_stats *st) {
  ad_ckpt_options_default(o);
  o->schedule = schedule;
  o->steps = steps;
  o->snapshots = snapshots;
  o->disk_snapshots = disk;
  o->dir = dir;
  o->stats = st;
}

/* A twin step counts its calls (q->active_calls, q->passive_calls) in the
 * build it is compiled in. */
#ifdef ARIADNE_PASSIVE
#define CKPT_TWIN_COUNT(q) ((q)->passive_calls++)
#else
#define CKPT_TWIN_COUNT(q) ((q)->active_calls++)
#endif

#endif
