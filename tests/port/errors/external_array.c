/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: external function 'lib_dot' */
#include "blas.h"
double f(const double *x, const double *y) { return lib_dot(3, x, y) * 2.0; }
