/* SPDX-License-Identifier: BSD-3-Clause */
/* The step function of test_checkpoint_twin.c, compiled twice from
 * ckpt_twin_step.c: twin_step (active) and twin_step_passive (with
 * ARIADNE_PASSIVE). Its ud has the same layout in both builds. */
#ifndef CKPT_TWIN_STEP_H
#define CKPT_TWIN_STEP_H

#include <ariadne_checkpoint.h>

#include "ckpt_case.h"

#define TWIN_NS 7

typedef struct twin_params {
  int64_t last;          /* the step that returns AD_CKPT_LAST (online); -1: none */
  int64_t active_calls;  /* calls of the active build */
  int64_t passive_calls; /* calls of the passive build */
} twin_params;

/* The passive state: a step counter and a mode that cycles. */
typedef struct twin_pstate {
  int64_t count;
  int64_t mode;
} twin_pstate;

int twin_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p);
AD_CKPT_TWIN_DECL(twin_step);

#endif
