/* SPDX-License-Identifier: BSD-3-Clause */
/* A library header: its functions are not ported. */
double lib_dot(int n, const double *x, const double *y);
double lib_scale(double v);
