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

/* One cell update of the primal, written once for every variant. */
static inline double heat_cell(double x, double n, double s, double w, double e) {
  return x + HEAT_C * (n + s + w + e - 4.0 * x) + HEAT_DT * x * (1.0 - x) + HEAT_SIN_WEIGHT * sin(x);
}

int heat_step(void *ud, int64_t i, size_t *nstate, ad_real *u, size_t *pbytes, void *pstate);
AD_CKPT_TWIN_DECL(heat_step);

#endif
