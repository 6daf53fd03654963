/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef ARIADNE_TEST_CXX_SHARED_H
#define ARIADNE_TEST_CXX_SHARED_H
#include <ariadne.h>
#ifdef __cplusplus
extern "C" {
#endif
/* sum of u_k^2 / 2 */
ad_real cxx_shared_energy(const ad_real *u, int n);
/* one explicit step of u_t = c u_xx + 0.01 sin(u), written with ad_* calls */
void cxx_shared_step_c(ad_real *u, const ad_real *old, int n, double c);
#ifdef __cplusplus
}
#endif
#endif
