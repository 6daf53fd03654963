/* SPDX-License-Identifier: BSD-3-Clause */
/* A Fortran BLAS routine declared by hand: its arrays stay double, and active
 * arrays passed to it are reported. */
/* expect-line: 10 active data passed to the external function 'daxpy_' */
void daxpy_(const int *n, const double *a, const double *x, const int *incx, double *y, const int *incy);
double f(double *x, double *y) {
  int n = 3, one = 1;
  double a = 2.0;
  /* y = a x + y */
  daxpy_(&n, &a, x, &one, y, &one);
  return y[0];
}
