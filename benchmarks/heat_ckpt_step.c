/* SPDX-License-Identifier: BSD-3-Clause */
/* The step function of ariadne_bench_heat_ckpt, compiled active (heat_step)
 * and passive (heat_step_passive, with ARIADNE_PASSIVE: ad_real is double),
 * as a user builds a checkpointed loop's passive twin. */
#include <math.h>
#include <string.h>

#include "heat_ckpt_step.h"

/* One cell update as one statement with hand-computed local partials, the
 * value written as the primal writes it so that every variant computes the
 * same bits. */
static ad_real cell_custom(ad_real x, ad_real n, ad_real s, ad_real w, ad_real e) {
  double xv = ad_value(x);
  double value = heat_cell(xv, ad_value(n), ad_value(s), ad_value(w), ad_value(e));
  ad_real args[5] = {x, n, s, w, e};
  double partials[5] = {1.0 - 4.0 * HEAT_C + HEAT_DT * (1.0 - 2.0 * xv) + HEAT_SIN_WEIGHT * cos(xv), HEAT_C, HEAT_C,
                        HEAT_C, HEAT_C};
  return ad_custom(value, 5, args, partials);
}

/* Advance the whole n x n state by one step in place. The boundary is part
 * of the state and passes through unchanged (its handles too), so the
 * adjoint of the fixed boundary values reaches u0 as in the other variants. */
int AD_CKPT_TWIN(heat_step)(void *ud, int64_t i, size_t *nstate, ad_real *u, size_t *pbytes, void *pstate) {
  stepper *s = ud;
  ad_real *v = s->v;
  int n = s->n;
  (void)nstate, (void)pbytes, (void)pstate;
  /* Checkpointing re-runs most steps passively, with nothing recording: the
   * local partials (a cos per cell) are then wasted work, so such a step
   * computes values only (in the passive build, always), unless the
   * benchmark asks for the plain step. */
  if (s->plain || ad_tape_is_recording(ad_tape_current())) {
    for (int r = 1; r < n - 1; r++)
      for (int c = 1; c < n - 1; c++) {
        int k = r * n + c;
        v[k] = cell_custom(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
      }
  } else {
    for (int r = 1; r < n - 1; r++)
      for (int c = 1; c < n - 1; c++) {
        int k = r * n + c;
        v[k] = ad_const(
            heat_cell(ad_value(u[k]), ad_value(u[k - n]), ad_value(u[k + n]), ad_value(u[k - 1]), ad_value(u[k + 1])));
      }
  }
  for (int r = 1; r < n - 1; r++) memcpy(u + r * n + 1, v + r * n + 1, (size_t)(n - 2) * sizeof(ad_real));
  return i == s->last ? AD_CKPT_LAST : 0;
}
