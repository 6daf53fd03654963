/* SPDX-License-Identifier: BSD-3-Clause */
/* The step function of ariadne_bench_heat_ckpt, compiled active (heat_step)
 * and passive (heat_step_passive, with ARIADNE_PASSIVE: ad_real is double),
 * as a user builds a checkpointed loop's passive twin. */
#include <string.h>

#include "heat_ad.h"
#include "heat_ckpt_step.h"

/* Advance the whole n x n state by one step in place. The boundary is part
 * of the state and passes through unchanged (its handles too), so the
 * adjoint of the fixed boundary values reaches u0 as in the other variants. */
int AD_CKPT_TWIN(heat_step)(void *ud, int64_t i, size_t *nstate, ad_real *u, size_t *pbytes, void *pstate) {
  stepper *s = ud;
  ad_real *v = s->v;
  int n = s->n;
  (void)nstate, (void)pbytes, (void)pstate;
  /* Each cell update is one ad_custom statement (heat_ad.h). Checkpointing
   * re-runs most steps passively, with nothing recording: the local partials
   * (a cos per cell) are then wasted work, so such a step computes values
   * only (in the passive build, always), unless the benchmark asks for the
   * plain step. */
  int mode = s->plain || ad_tape_is_recording(ad_tape_current()) ? HEAT_MODE_CUSTOM : HEAT_MODE_VALUES;
  heat_ad_rows(mode, n, 1, n - 1, u, v);
  for (int r = 1; r < n - 1; r++) memcpy(u + r * n + 1, v + r * n + 1, (size_t)(n - 2) * sizeof(ad_real));
  return i == s->last ? AD_CKPT_LAST : 0;
}
