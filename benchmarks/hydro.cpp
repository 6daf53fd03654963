/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_hydro: the C++ header on a Lagrangian hydro kernel
 * (hydro_kernel.h), one statement per operation (op, with
 * ARIADNE_CXX_PER_OPERATION) against one statement per expression (et).
 * For each: the first recording and sweep of the process on a fresh tape
 * (cold), the best of --reps recordings and sweeps on the reused tape
 * (warm), both over the double primal's time, the tape's statements,
 * arguments and bytes, and the gradient checked against central differences
 * of the primal in a fixed direction (h = 1e-6; their own error is a few
 * 1e-6 at the default size, hence the tolerance 1e-5) and against the
 * per-operation variant (to round-off).
 *
 *   ariadne_bench_hydro [--n elements_per_side] [--T steps] [--reps r]
 */
#include <ariadne.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hydro.h"
#define HYDRO_NS hydro_primal
#include "hydro_kernel.h"

static double primal(int n, int T, const double *e0, const double *v0) {
  hydro_primal::mesh<double> m;
  hydro_primal::init(m, n, e0, v0);
  for (int s = 0; s < T; s++) hydro_primal::step(m);
  return hydro_primal::energy(m);
}

typedef void (*recorder)(ad_tape *, int, int, const double *, const double *, hydro_run *);

int main(int argc, char **argv) {
  int n = 12, T = 20, reps = 5;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (!std::strcmp(argv[k], "--n")) n = std::atoi(argv[k + 1]);
    else if (!std::strcmp(argv[k], "--T")) T = std::atoi(argv[k + 1]);
    else if (!std::strcmp(argv[k], "--reps")) reps = std::atoi(argv[k + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--n elements_per_side] [--T steps] [--reps r]\n", argv[0]);
      return 2;
    }
  }
  if (n < 2 || T < 1 || reps < 1) {
    std::fprintf(stderr, "ariadne_bench_hydro: --n must be >= 2, --T and --reps >= 1\n");
    return 2;
  }
  int ne = n * n * n, nn = (n + 1) * (n + 1) * (n + 1), ni = ne + nn;
  std::vector<double> e0(ne), v0(nn), dir(ni);
  for (int k = 0; k < ne; k++) e0[k] = 1.0 + 0.5 * std::exp(-20.0 * ((k % n) - n / 2) * ((k % n) - n / 2) / (n * n));
  for (int a = 0; a < nn; a++) v0[a] = -0.05 * std::sin(0.3 * a);
  for (int k = 0; k < ni; k++) dir[k] = std::cos(0.7 * k + 0.1);

  double tp = 1e30, J0 = 0.0;
  for (int r = 0; r < reps; r++) {
    double t0 = hydro_now();
    J0 = primal(n, T, e0.data(), v0.data());
    tp = std::fmin(tp, hydro_now() - t0);
  }
  /* central differences of the primal in direction dir */
  double h = 1e-6;
  std::vector<double> ep(ne), vp(nn), em(ne), vm(nn);
  for (int k = 0; k < ne; k++) ep[k] = e0[k] + h * dir[k], em[k] = e0[k] - h * dir[k];
  for (int a = 0; a < nn; a++) vp[a] = v0[a] + h * dir[ne + a], vm[a] = v0[a] - h * dir[ne + a];
  double fd = (primal(n, T, ep.data(), vp.data()) - primal(n, T, em.data(), vm.data())) / (2 * h);

  std::printf("hydro kernel: %d^3 elements, %d nodes, T=%d (%d element updates), reps=%d, primal %.2f ms, J=%.12g\n",
              n, nn, T, ne * T, reps, tp * 1e3, J0);
  std::printf("%-8s %10s %10s %10s %10s %11s %11s %9s %8s %10s %10s\n", "variant", "record_ms", "reverse_ms",
              "grad_ratio", "cold_ratio", "statements", "arguments", "tape_MB", "B/elem", "fd_relerr",
              "vs_op");
  const char *names[2] = {"op", "et"};
  recorder rec[2] = {hydro_record_op, hydro_record_et};
  std::vector<double> g[2] = {std::vector<double>(ni), std::vector<double>(ni)};
  int fail = 0;
  for (int v = 0; v < 2; v++) {
    hydro_run run;
    run.g = g[v].data();
    ad_tape *t = ad_tape_create();
    rec[v](t, n, T, e0.data(), v0.data(), &run);
    double cold = run.record_s + run.reverse_s, best_rec = 1e30, best_rev = 1e30;
    for (int r = 0; r < reps; r++) {
      rec[v](t, n, T, e0.data(), v0.data(), &run);
      best_rec = std::fmin(best_rec, run.record_s);
      best_rev = std::fmin(best_rev, run.reverse_s);
    }
    ad_tape_destroy(t);
    double dot = 0.0, vs = 0.0, gn = 0.0;
    for (int k = 0; k < ni; k++) {
      dot += g[v][k] * dir[k];
      vs = std::fmax(vs, std::fabs(g[v][k] - g[0][k]));
      gn = std::fmax(gn, std::fabs(g[0][k]));
    }
    double fderr = std::fabs(dot - fd) / std::fmax(std::fabs(fd), 1e-300);
    bool ok = run.rc == AD_OK && std::fabs(run.J - J0) <= 1e-13 * std::fabs(J0) && fderr < 1e-5 && vs <= 1e-12 * gn;
    fail |= !ok;
    std::printf("%-8s %10.2f %10.2f %10.2f %10.2f %11llu %11llu %9.1f %8.1f %10.2e %10.2e%s\n", names[v],
                best_rec * 1e3, best_rev * 1e3, (best_rec + best_rev) / tp, cold / tp,
                (unsigned long long)run.stats.statements, (unsigned long long)run.stats.arguments,
                run.stats.bytes_used / 1048576.0, (double)run.stats.bytes_used / ((double)ne * T), fderr, vs / gn,
                ok ? "" : "  FAILED");
  }
  return fail;
}
