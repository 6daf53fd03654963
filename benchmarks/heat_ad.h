/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Ariadne versions of the heat kernel's cell update and step, written
 * once for the serial (heat_ariadne.c), MPI (heat_mpi.c) and checkpointing
 * (heat_ckpt_step.c) benchmarks. Static inline, so that each including file
 * compiles them the way it is compiled: active, or with ARIADNE_PASSIVE
 * (ad_real is double) for the passive variant and the checkpointing twin.
 */
#ifndef ARIADNE_BENCH_HEAT_AD_H
#define ARIADNE_BENCH_HEAT_AD_H

#include <ariadne.h>

#include "heat_kernel.h"

/* One cell update, one Ariadne operation per C operation, in the order in
 * which C evaluates HEAT_CELL, so that all variants compute bit-identical
 * values. */
static inline ad_real heat_cell_op(ad_real x, ad_real n, ad_real s, ad_real w, ad_real e) {
  ad_real lap = ad_sub(ad_add(ad_add(ad_add(n, s), w), e), ad_mul(4.0, x));
  ad_real v = ad_add(x, ad_mul(HEAT_C, lap));
  v = ad_add(v, ad_mul(ad_mul(HEAT_DT, x), ad_sub(1.0, x)));
  return ad_add(v, ad_mul(HEAT_SIN_WEIGHT, ad_sin(x)));
}

/* The same update as one statement with hand-computed local partials
 * (heat_cell_dx, and HEAT_C for each neighbour), the value computed as the
 * primal computes it. */
static inline ad_real heat_cell_custom(ad_real x, ad_real n, ad_real s, ad_real w, ad_real e) {
  double xv = ad_value(x);
  double value = heat_cell(xv, ad_value(n), ad_value(s), ad_value(w), ad_value(e));
  ad_real args[5] = {x, n, s, w, e};
  double partials[5] = {heat_cell_dx(xv), HEAT_C, HEAT_C, HEAT_C, HEAT_C};
  return ad_custom(value, 5, args, partials);
}

/* One explicit step on rows [i0, i1) of a grid n cells wide (columns
 * 1 .. n-2), as heat_kernel_rows, each cell by `mode`:
 *   HEAT_MODE_OP      heat_cell_op
 *   HEAT_MODE_STMT    heat_cell_op preaccumulated into one statement with
 *                     five arguments (ad_stmt_begin/end)
 *   HEAT_MODE_VALUES  the value only, as a constant: what a checkpointed
 *                     step computes when nothing records
 *   any other         heat_cell_custom */
static inline void heat_ad_rows(int mode, int n, int i0, int i1, const ad_real *u, ad_real *v) {
  for (int i = i0; i < i1; i++) {
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      switch (mode) {
      case HEAT_MODE_OP:
        v[k] = heat_cell_op(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
        break;
      case HEAT_MODE_STMT:
        ad_stmt_begin();
        v[k] = ad_stmt_end(heat_cell_op(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]));
        break;
      case HEAT_MODE_VALUES:
        v[k] = ad_const(
            heat_cell(ad_value(u[k]), ad_value(u[k - n]), ad_value(u[k + n]), ad_value(u[k - 1]), ad_value(u[k + 1])));
        break;
      default:
        v[k] = heat_cell_custom(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
        break;
      }
    }
  }
}

#endif
