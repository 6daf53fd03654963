/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reference kernel's cell update and primal step as plain double code.
 * HEAT_CELL is the one place the formula of the cell update is written: the
 * primal step, the hand adjoint, the ad_custom and value-only cells of
 * heat_ad.h and the ported step all use it, so that every variant computes
 * the same bits.
 */
#ifndef ARIADNE_BENCH_HEAT_KERNEL_H
#define ARIADNE_BENCH_HEAT_KERNEL_H

#include <math.h>

#include "heat.h"

/* The cell update, v = x + c*(uN + uS + uW + uE - 4*x) + dt*x*(1 - x) +
 * 0.01*sin(x), written once. A macro, so that ariadne-port expands it in
 * place where heat_kernel.c uses it (the tool ports the file it is given,
 * and a function of this header would be a call it cannot see into). */
#define HEAT_CELL(x, n, s, w, e)                                                                                       \
  ((x) + HEAT_C * ((n) + (s) + (w) + (e)-4.0 * (x)) + HEAT_DT * (x) * (1.0 - (x)) + HEAT_SIN_WEIGHT * sin(x))

/* The same as a function of double values, for the codes that compute a
 * cell's value outside the primal step: the ad_custom and value-only cells
 * of heat_ad.h. */
static inline double heat_cell(double x, double n, double s, double w, double e) { return HEAT_CELL(x, n, s, w, e); }

/* The local partial of the cell update with respect to the cell's old value
 * x, for the hand adjoint and the ad_custom cell; with respect to each
 * neighbour it is HEAT_C. */
static inline double heat_cell_dx(double x) {
  return 1.0 - 4.0 * HEAT_C + HEAT_DT * (1.0 - 2.0 * x) + HEAT_SIN_WEIGHT * cos(x);
}

/* One explicit step on rows [i0, i1) of a grid n cells wide, the columns
 * 1 .. n-2 of each: v[k] from u[k] and its four neighbours, which rows i0 - 1
 * and i1 must hold. The serial step passes the interior rows of the whole
 * grid; a rank of the MPI benchmark the interior rows of its block, between
 * its ghost rows. */
void heat_kernel_rows(int n, int i0, int i1, const double *restrict u, double *restrict v);

/* One explicit step on the interior of the whole n x n grid; the boundary of
 * v is left as it is. */
void heat_kernel_step(int n, const double *restrict u, double *restrict v);

#endif
