/* SPDX-License-Identifier: BSD-3-Clause */
/* The step function of ariadne_bench_heat_ckpt (heat_ckpt_step.c), compiled
 * twice: heat_step (active) and heat_step_passive (ARIADNE_PASSIVE), the
 * passive twin that checkpointing runs for the steps it does not record. */
#ifndef ARIADNE_BENCH_HEAT_CKPT_STEP_H
#define ARIADNE_BENCH_HEAT_CKPT_STEP_H

#include <ariadne_checkpoint.h>

#include "heat.h"

/* The same layout in both builds: the scratch row buffer is untyped. */
typedef struct stepper {
  int n;
  int64_t last; /* online schedule: the step after which to stop; -1 otherwise */
  void *v;      /* the new interior of one step: n * n ad_real (active), enough for the passive build */
  int plain;    /* 1: no value-only path when nothing records (a step written without regard to
                   checkpointing): every cell through ad_custom, partials included */
} stepper;

int heat_step(void *ud, int64_t i, size_t *nstate, ad_real *u, size_t *pbytes, void *pstate);
AD_CKPT_TWIN_DECL(heat_step);

#endif
