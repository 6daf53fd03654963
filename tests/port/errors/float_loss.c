/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: float drops its derivative */
double f(double x) {
  float g = x * 2.0;
  return g + x;
}
