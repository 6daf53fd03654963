/* SPDX-License-Identifier: BSD-3-Clause */
/* A nonlinear step with a passive state, compiled active (twin_step) and
 * passive (twin_step_passive) by tests/CMakeLists.txt: the same source,
 * renamed by AD_CKPT_TWIN. */
#include "ckpt_twin_step.h"

int AD_CKPT_TWIN(twin_step)(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  twin_params *q = ud;
  twin_pstate *ps = p;
  (void)pb;
  CKPT_TWIN_COUNT(q);
  double coef = 0.04 * (1.0 + ps->mode);
  ad_real v[TWIN_NS];
  for (size_t k = 0; k < *n && k < TWIN_NS; k++) {
    ad_real l = k > 0 ? u[k - 1] : ad_const(0.3), r = k + 1 < TWIN_NS ? u[k + 1] : ad_const(-0.2);
    ad_real lap = ad_sub(ad_add(l, r), ad_mul(2.0, u[k]));
    v[k] = ad_add(u[k], ad_mul(0.2, lap));
    v[k] = ad_add(v[k], ad_mul(coef, ad_sin(ad_mul(u[k], l))));
    if (ps->mode == 2) v[k] = ad_sub(v[k], ad_mul(0.01, ad_exp(ad_mul(-1.0, ad_mul(u[k], u[k])))));
  }
  for (size_t k = 0; k < TWIN_NS; k++) u[k] = v[k];
  ps->count++;
  ps->mode = ps->count % 3;
  return i == q->last ? AD_CKPT_LAST : 0;
}
