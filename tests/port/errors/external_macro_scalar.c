/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: external function 'lib_scale' */
#include "blas.h"
#define SCALED(v) (lib_scale(v) + 1.0)
double f(double x) { return SCALED(x) * x; }
