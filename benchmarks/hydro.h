/* SPDX-License-Identifier: BSD-3-Clause */
/* The hydro benchmark's pieces (hydro.cpp, hydro_kernel.h): one recorder per
 * recording mode of ariadne.hpp, each in its own translation unit. */
#ifndef ARIADNE_BENCH_HYDRO_H
#define ARIADNE_BENCH_HYDRO_H

#include <ariadne.h>

#include <chrono>

struct hydro_run {
  double J, record_s, reverse_s;
  double *g; /* ne + nn entries, given by the caller */
  int rc;
  ad_stats stats;
};

inline double hydro_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* hydro_et.cpp: ariadne.hpp's expressions; hydro_op.cpp: the same source
 * with ARIADNE_CXX_PER_OPERATION. */
void hydro_record_et(ad_tape *t, int n, int T, const double *e0, const double *v0, hydro_run *out);
void hydro_record_op(ad_tape *t, int n, int T, const double *e0, const double *v0, hydro_run *out);

#endif
