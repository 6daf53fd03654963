/* SPDX-License-Identifier: BSD-3-Clause */
/* A checkpointed loop's step, compiled twice by the consumer project: active
 * (ckpt_step) and with Ariadne::passive (ckpt_step_passive, the twin). */
#include <ariadne_checkpoint.h>

int AD_CKPT_TWIN(ckpt_step)(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  (void)ud, (void)i, (void)pb, (void)p;
  ad_real first = u[0];
  for (size_t k = 0; k + 1 < *n; k++) u[k] = ad_add(u[k], ad_mul(0.1, ad_sin(ad_mul(u[k], u[k + 1]))));
  u[*n - 1] = ad_sub(u[*n - 1], ad_mul(0.05, ad_mul(first, u[*n - 1])));
  return 0;
}
