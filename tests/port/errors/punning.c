/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: type punning */
double f(double *x) {
  unsigned char *bytes = (unsigned char *)x;
  bytes[7] ^= 0x80;
  return x[0];
}
