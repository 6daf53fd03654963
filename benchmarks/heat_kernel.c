/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The heat kernel's primal step as plain double code, nothing else. The
 * benchmarks compile it as it is for their primal and hand adjoint, and
 * ariadne_bench_heat builds its `port` and `port_fused` variants from this
 * file with ariadne-port at build time (ariadne_port_sources in
 * CMakeLists.txt), without manual edits: the tool expands heat_kernel.h's
 * HEAT_CELL in place.
 */
#include "heat_kernel.h"

/* heat_cell of heat_kernel.h, defined again here: ariadne-port ports the
 * functions of the file it is given, and a call into the header's would be
 * a call it cannot differentiate. */
static inline double cell(double x, double n, double s, double w, double e) { return HEAT_CELL(x, n, s, w, e); }

void heat_kernel_rows(int n, int i0, int i1, const double *restrict u, double *restrict v) {
  for (int i = i0; i < i1; i++)
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      v[k] = cell(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
    }
}

void heat_kernel_step(int n, const double *restrict u, double *restrict v) { heat_kernel_rows(n, 1, n - 1, u, v); }
