/* SPDX-License-Identifier: BSD-3-Clause */
/* C half of the C++ test: C code working on the same ad_real arrays and
 * the same tape as the C++ code that calls it. */
#include <ariadne.h>

#include "shared.h"

ad_real cxx_shared_energy(const ad_real *u, int n) {
  ad_real s = ad_const(0.0);
  for (int k = 0; k < n; k++) s = ad_add(s, ad_mul(ad_mul(0.5, u[k]), u[k]));
  return s;
}

void cxx_shared_step_c(ad_real *u, const ad_real *old, int n, double c) {
  for (int k = 1; k + 1 < n; k++) {
    ad_real lap = ad_sub(ad_add(old[k - 1], old[k + 1]), ad_mul(2.0, old[k]));
    u[k] = ad_add(ad_add(old[k], ad_mul(c, lap)), ad_mul(0.01, ad_sin(old[k])));
  }
  u[0] = old[0];
  u[n - 1] = old[n - 1];
}
