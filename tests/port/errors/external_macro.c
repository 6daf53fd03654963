/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: external function 'lib_dot' */
#include "blas.h"
/* A call inside a macro body is reported like one written out. */
#define DOT(n, a, b) lib_dot(n, a, b)
double f(const double *x, const double *y) { return DOT(3, x, y) * 2.0; }
