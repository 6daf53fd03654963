/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: math function 'tgamma' */
#include <math.h>
double f(double x) { return tgamma(x) * x; }
