/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: variadic function 'sum' */
#include <stdarg.h>
static double sum(int n, ...) {
  va_list ap;
  va_start(ap, n);
  double s = 0.0;
  for (int i = 0; i < n; i++) s += va_arg(ap, double);
  va_end(ap);
  return s;
}
double f(double x, double y) { return sum(2, x, y); }
