/* SPDX-License-Identifier: BSD-3-Clause */
/* Static functions of a project header that is not an input are not a
 * library: the report names the header to give, rather than ad_external. */
/* expect-line: 13 'vec3_clear', which is defined in */
/* expect-line: 14 'vec3_norm2', which is defined in */
/* expect-line: 15 'grid_release', which is defined in */
/* expect: grid_util.h, a header that is not an input */
#include "grid_util.h"

double energy(int n) {
  vec3 *f = malloc((size_t)n * sizeof *f);
  double e = 0.0;
  for (int i = 0; i < n; i++) vec3_clear(f[i]);
  for (int i = 0; i < n; i++) e += vec3_norm2(f[i]);
  grid_release(f);
  return e;
}
