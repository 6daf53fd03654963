/* SPDX-License-Identifier: BSD-3-Clause */
/* One expression nested 40 deep, as the porting tool writes a long sum or a
 * stencil: ad_add(ad_mul(ad_add(x[0], x[1]), x[2]), ...). Each ad_* macro
 * names its operands once in the expansion (include/ariadne.h), so this
 * compiles in linear time; with operands named twice it would be 2^40 copies
 * of x[0] and the build would never finish. The gradient is checked against
 * the same expression differentiated by hand. */
#include <ariadne.h>
#include <math.h>
#include <stdio.h>

#include "check.h"

#define N 40

static ad_real deep(const ad_real *x) {
  return ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(ad_mul(ad_add(ad_add(x[0], x[1]), x[2]), x[3]), x[4]), x[5]), x[6]), x[7]), x[8]), x[9]), x[10]), x[11]), x[12]), x[13]), x[14]), x[15]), x[16]), x[17]), x[18]), x[19]), x[20]), x[21]), x[22]), x[23]), x[24]), x[25]), x[26]), x[27]), x[28]), x[29]), x[30]), x[31]), x[32]), x[33]), x[34]), x[35]), x[36]), x[37]), x[38]), x[39]);
}

int main(void) {
  ad_tape *t = ad_tape_create();
  ad_real x[N];
  double xv[N], g[N];
  for (int i = 0; i < N; i++) xv[i] = 1.0 + 0.01 * i;
  ad_tape_begin(t);
  for (int i = 0; i < N; i++) x[i] = ad_input(xv[i]);
  ad_real y = deep(x);
  ad_tape_end(t);
  CHECK(ad_gradient(t, y, N, x, g) == AD_OK);
  /* By hand: v_0 = x_0; v_i = v_(i-1) + x_i, or v_(i-1) * x_i when i % 3 == 0.
   * dy/dx_j is the product of the multipliers x_i (i % 3 == 0, i > j) after j,
   * times v_(j-1) for a product step j. */
  double v[N];
  v[0] = xv[0];
  for (int i = 1; i < N; i++) v[i] = i % 3 ? v[i - 1] + xv[i] : v[i - 1] * xv[i];
  CHECK(fabs(ad_value(y) - v[N - 1]) <= 1e-12 * fabs(v[N - 1]));
  for (int j = 0; j < N; j++) {
    double d = j > 0 && j % 3 == 0 ? v[j - 1] : 1.0;
    for (int i = j + 1; i < N; i++)
      if (i % 3 == 0) d *= xv[i];
    CHECK(fabs(g[j] - d) <= 1e-12 * fmax(1.0, fabs(d)));
  }
  ad_tape_destroy(t);
  return check_finish("test_deep_expr");
}
