/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The heat kernel's step in C++ with ariadne.hpp's expressions (the cxx_et
 * variant): the cell update is heat_kernel.h's HEAT_CELL itself, the formula
 * the primal runs on double, here on ad_real. The assignment records one
 * statement per cell, on the cell and its four neighbours (the cell's four
 * uses merged into one argument), as ariadne_custom's hand-written
 * statement does. Linked into the same program as heat_cxx.cpp, which uses
 * the per-operation recording: the two modes of the header coexist.
 */
#include <ariadne.hpp>

#include "heat.h"
/* heat_kernel.h declares C functions with C's restrict. */
#define restrict __restrict__
#include "heat_kernel.h"
#undef restrict

extern "C" void heat_cxx_et_step(int n, const ad_real *u, ad_real *v) {
  for (int i = 1; i < n - 1; i++) {
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      v[k] = HEAT_CELL(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
    }
  }
}
