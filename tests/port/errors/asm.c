/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: inline assembly */
double f(double x) {
  __asm__ volatile("" ::: "memory");
  return x * x;
}
