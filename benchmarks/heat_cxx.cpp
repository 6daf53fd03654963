/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The heat kernel's step in C++ with ariadne.hpp's operators: the cell
 * update of heat_ad.h's heat_cell_op (the formula of HEAT_CELL in
 * heat_kernel.h) written again as plain arithmetic, on purpose: this
 * variant measures the operators. C++
 * evaluates it in the same order as the nested ad_* calls, so it records the
 * same statements and gives the same gradient bits (the benchmark's
 * cxx_op variant, checked against the hand adjoint like the others). It
 * uses the per-operation recording of ARIADNE_CXX_PER_OPERATION;
 * heat_cxx_et.cpp is the cxx_et variant, the header's expressions.
 */
#define ARIADNE_CXX_PER_OPERATION
#include <ariadne.hpp>

#include "heat.h"

extern "C" void heat_cxx_step(int n, const ad_real *u, ad_real *v) {
  for (int i = 1; i < n - 1; i++) {
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      ad_real x = u[k];
      ad_real lap = u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4.0 * x;
      ad_real r = x + HEAT_C * lap;
      r = r + HEAT_DT * x * (1.0 - x);
      v[k] = r + HEAT_SIN_WEIGHT * sin(x);
    }
  }
}
