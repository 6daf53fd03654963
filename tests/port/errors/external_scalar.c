/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: external function 'lib_scale' */
#include "blas.h"
double f(double x) { return lib_scale(x) + x; }
