/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: the value of ++ on an active variable is used */
double f(double x) {
  double y = x++;
  return x * y;
}
