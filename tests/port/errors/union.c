/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: union with an active member */
union bits {
  double d;
  unsigned long long u;
};
double f(double x) {
  union bits b;
  b.d = x;
  return b.d;
}
