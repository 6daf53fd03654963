/* SPDX-License-Identifier: BSD-3-Clause */
/* Plain double code, ported at build time by the installed ariadne-port. */
#include <math.h>

#include "port_model.h"

double port_model(const double *x) { return x[0] * x[0] * x[1] + sin(x[1]); }
