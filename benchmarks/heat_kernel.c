/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The heat kernel as plain double code, nothing else: the benchmark builds
 * its `port` and `port_fused` variants from this file with ariadne-port at
 * build time (ariadne_port_sources in CMakeLists.txt), without manual edits.
 */
#include <math.h>

#include "heat.h"

static inline double cell(double x, double n, double s, double w, double e) {
  return x + HEAT_C * (n + s + w + e - 4.0 * x) + HEAT_DT * x * (1.0 - x) + HEAT_SIN_WEIGHT * sin(x);
}

void heat_kernel_step(int n, const double *restrict u, double *restrict v) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      v[k] = cell(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
    }
}
