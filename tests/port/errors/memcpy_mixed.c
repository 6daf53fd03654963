/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: memcpy between active and non-active data */
#include <string.h>
double f(const float *in, int n) {
  double buf[8];
  memcpy(buf, in, (size_t)n * sizeof(float));
  return buf[0] * buf[1];
}
