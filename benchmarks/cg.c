/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_cg: gradients through implicit time steps, with the linear
 * solver taped iteration by iteration or given to Ariadne as an external
 * function (see README.md beside this file).
 *
 * The problem is the one of examples/implicit_cg.c at a larger size, with
 * its code (examples/implicit_cg_model.c, shared with the example): 2-D
 * diffusion with a logistic reaction, m x m interior points, u = 0 on the
 * boundary, T steps of
 *
 *     (I - dt L_kappa) u_{n+1} = u_n + dt u_n (1 - u_n),
 *
 * each solved with conjugate gradients (CG) from the previous state to a
 * relative residual `tol`; J = sum_k u_T[k]^2, gradient with respect to u0
 * and the diffusivity kappa (2 m^2 inputs).
 *
 *   primal    plain double: the denominator of the gradient ratios
 *   taped     every CG iteration recorded (ad_dot for matrix rows and inner
 *             products, ad_fma for the vector updates)
 *   external  each solve one ad_external record; its adjoint is one CG solve
 *             with A^T = A plus the kappa term -lambda^T (dA/dkappa) u
 *
 * Each repetition times the primal and then each variant in the same
 * process, in wall-clock and in processor time; the minimum of each phase
 * over the repetitions is reported, since the machines it runs on are
 * shared. The program exits non-zero if a
 * value of J differs from the primal's or the two gradients disagree by
 * more than the CG tolerance allows.
 */
#define _DEFAULT_SOURCE
#include <ariadne.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "example_util.h"
#include "implicit_cg_model.h"

#define CG_MAX_ITER 20000

typedef struct result {
  double J, record_s, reverse_s, primal_s; /* wall-clock */
  double primal_cpu_s, grad_cpu_s;         /* processor time of the primal and of record + reverse */
  ad_stats st;
  long fwd_iters, adj_iters;
  int rc;
  char msg[200];
} result;

/* The tape and the active inputs and state of the Ariadne variants. */
typedef struct tape_work {
  ad_tape *tape;
  ad_real *x, *u;
} tape_work;

/* Record and sweep once; the gradient goes to g (dJ/du0, then dJ/dkappa). */
static int run_ad(cg_problem *P, cg_ad_work *W, tape_work *T, int external, const double *u0, const double *kappa0,
                  double *g, result *out) {
  int n = P->n;
  double t0 = bench_now();
  ad_tape_reset(T->tape);
  ad_tape_begin(T->tape);
  for (int k = 0; k < 2 * n; k++) T->x[k] = ad_input(k < n ? u0[k] : kappa0[k - n]);
  memcpy(T->u, T->x, (size_t)n * sizeof *T->u);
  ad_real J = cg_simulate_ad(P, W, T->x + n, T->u, external, &out->fwd_iters);
  ad_tape_end(T->tape);
  double t1 = bench_now();
  out->J = ad_value(J);
  if (out->fwd_iters < 0) {
    snprintf(out->msg, sizeof out->msg, "CG did not converge in %d iterations", P->max_iter);
    return out->rc = 1;
  }
  P->iterations = 0;
  int rc = ad_gradient(T->tape, J, 2 * (size_t)n, T->x, g);
  double t2 = bench_now();
  out->adj_iters = P->iterations;
  out->record_s = t1 - t0;
  out->reverse_s = t2 - t1;
  ad_tape_stats(T->tape, &out->st);
  if (rc != AD_OK) {
    snprintf(out->msg, sizeof out->msg, "%s: %s", ad_errname(rc), ad_tape_error_message(T->tape));
    return out->rc = 1;
  }
  return out->rc = 0;
}

/* ------------------------------------------------------------------------ */

static void *xcalloc(size_t count, size_t size) { return example_alloc("cg", count, size); }

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--m points] [--T steps] [--reps r] [--dt dt] [--tol tol]\n"
          "  --m     interior points per side (default 48)\n"
          "  --T     backward Euler steps (default 10)\n"
          "  --reps  repetitions; the minimum time of each phase is reported (default 3)\n"
          "  --dt    time step (default 0.02)\n"
          "  --tol   CG relative residual (default 1e-12)\n",
          prog);
}

int main(int argc, char **argv) {
  int m = 48, steps = 10, reps = 3;
  double dt = 0.02, tol = 1e-12;
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (!strncmp(arg, "--", 2))
      arg += 2;
    else if (arg[0] == '-')
      arg += 1;
    if (a + 1 < argc && !strcmp(arg, "m"))
      m = atoi(argv[++a]);
    else if (a + 1 < argc && (!strcmp(arg, "T") || !strcmp(arg, "t")))
      steps = atoi(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "reps"))
      reps = atoi(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "dt"))
      dt = atof(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "tol"))
      tol = atof(argv[++a]);
    else {
      usage(argv[0]);
      return !strcmp(arg, "help") || !strcmp(arg, "h") ? 0 : 2;
    }
  }
  if (m < 2 || m > 4096 || steps < 1 || reps < 1 || !(dt > 0.0) || !(tol > 0.0)) {
    fprintf(stderr, "cg: need m in [2, 4096], T >= 1, reps >= 1, dt > 0, tol > 0\n");
    return 2;
  }
  cg_problem P;
  cg_ad_work W;
  example_need_memory("cg", cg_problem_init(&P, &W, m, steps, dt, tol, CG_MAX_ITER) == 0);
  int n = P.n;
  size_t nn = (size_t)n;
  tape_work T;
  T.x = xcalloc(2 * nn, sizeof(ad_real));
  T.u = xcalloc(nn, sizeof(ad_real));
  const double *u0 = P.u0, *kappa = P.kappa;
  double *g[2] = {xcalloc(2 * nn, sizeof(double)), xcalloc(2 * nn, sizeof(double))};

  static const char *names[2] = {"taped", "external"};
  result best[2];
  memset(best, 0, sizeof best);
  double Jp = NAN;
  long primal_iters = 0;
  for (int v = 0; v < 2; v++) {
    /* A fresh tape per variant, kept over the repetitions as a program that
     * takes many gradients would keep it. */
    T.tape = ad_tape_create();
    if (!T.tape) {
      fprintf(stderr, "cg: cannot create a tape\n");
      return 1;
    }
    for (int rep = 0; rep < reps; rep++) {
      double t0 = bench_now(), c0 = bench_cpu_now();
      Jp = cg_simulate(&P, u0, kappa, P.tol, &primal_iters);
      double tp = bench_now() - t0, cp = bench_cpu_now() - c0;
      result r;
      memset(&r, 0, sizeof r);
      r.primal_s = tp;
      r.primal_cpu_s = cp;
      c0 = bench_cpu_now();
      run_ad(&P, &W, &T, v, u0, kappa, g[v], &r);
      r.grad_cpu_s = bench_cpu_now() - c0;
      if (rep == 0) {
        best[v] = r;
      } else {
        result keep = r;
        keep.primal_s = fmin(best[v].primal_s, r.primal_s);
        keep.primal_cpu_s = fmin(best[v].primal_cpu_s, r.primal_cpu_s);
        keep.grad_cpu_s = fmin(best[v].grad_cpu_s, r.grad_cpu_s);
        keep.record_s = fmin(best[v].record_s, r.record_s);
        keep.reverse_s = fmin(best[v].reverse_s, r.reverse_s);
        best[v] = keep;
      }
      if (r.rc) break;
    }
    ad_tape_destroy(T.tape);
  }

  /* Checks: J as the primal's (the same arithmetic, up to the order of a few
   * sums), and the two gradients to within what the CG tolerance allows. */
  double gmax = 0.0, dmax = 0.0;
  for (size_t k = 0; k < 2 * nn; k++) {
    gmax = fmax(gmax, fabs(g[0][k]));
    dmax = fmax(dmax, fabs(g[0][k] - g[1][k]));
  }
  double gdiff = gmax > 0.0 ? dmax / gmax : dmax, glimit = 1e3 * P.tol;
  int ok[2], all_ok = 1;
  for (int v = 0; v < 2; v++) {
    ok[v] = best[v].rc == 0 && fabs(best[v].J - Jp) <= 1e-11 * fabs(Jp) && gdiff <= glimit;
    all_ok &= ok[v];
  }

  printf("implicit CG: m=%d (%d unknowns), T=%d, dt/h^2=%.3g, CG to %.0e, reps=%d; primal: %ld CG iterations\n", P.m, n,
         P.steps, P.r, P.tol, reps, primal_iters);
  printf("%-9s %10s %10s %11s %10s %10s %12s %12s %9s %9s %5s  %s\n", "variant", "primal_ms", "record_ms", "reverse_ms",
         "wall_ratio", "cpu_ratio", "tape_MB", "peak_MB", "fwd_it", "adj_it", "ok", "J");
  for (int v = 0; v < 2; v++) {
    const result *r = &best[v];
    printf("%-9s %10.2f %10.2f %11.2f %10.2f %10.2f %12.3f %12.3f %9ld %9ld %5s  %.15g%s%s\n", names[v],
           1e3 * r->primal_s, 1e3 * r->record_s, 1e3 * r->reverse_s, (r->record_s + r->reverse_s) / r->primal_s,
           r->grad_cpu_s / r->primal_cpu_s, r->st.bytes_used / 1e6, r->st.bytes_peak / 1e6, r->fwd_iters, r->adj_iters,
           ok[v] ? "yes" : "NO", r->J, r->msg[0] ? "  " : "", r->msg);
  }
  printf("max |g_taped - g_external| / max |g| = %.2e (limit %.0e); tape ratio taped/external = %.0f\n", gdiff, glimit,
         (double)best[0].st.bytes_used / (double)(best[1].st.bytes_used ? best[1].st.bytes_used : 1));
  for (int v = 0; v < 2; v++) {
    const result *r = &best[v];
    printf("{\"variant\":\"%s\",\"m\":%d,\"unknowns\":%d,\"T\":%d,\"dt\":%.6g,\"tol\":%.3g,\"reps\":%d,", names[v], P.m,
           n, P.steps, P.dt, P.tol, reps);
    printf("\"J\":%.15g,\"primal_s\":%.6g,\"record_s\":%.6g,\"reverse_s\":%.6g,\"gradient_ratio\":%.6g,", r->J,
           r->primal_s, r->record_s, r->reverse_s, (r->record_s + r->reverse_s) / r->primal_s);
    printf("\"primal_cpu_s\":%.6g,\"grad_cpu_s\":%.6g,\"gradient_ratio_cpu\":%.6g,", r->primal_cpu_s, r->grad_cpu_s,
           r->grad_cpu_s / r->primal_cpu_s);
    printf("\"tape_bytes\":%zu,\"tape_peak_bytes\":%zu,\"statements\":%llu,\"arguments\":%llu,\"records\":%llu,",
           r->st.bytes_used, r->st.bytes_peak, (unsigned long long)r->st.statements,
           (unsigned long long)r->st.arguments, (unsigned long long)r->st.records);
    printf("\"primal_cg_iterations\":%ld,\"forward_cg_iterations\":%ld,\"adjoint_cg_iterations\":%ld,", primal_iters,
           r->fwd_iters, r->adj_iters);
    printf("\"grad_max_rel_diff_taped_vs_external\":%.3g,\"ok\":%s}\n", gdiff, ok[v] ? "true" : "false");
  }
  if (!all_ok) fprintf(stderr, "cg: a check failed (see the ok column)\n");

  cg_problem_free(&P, &W);
  free(T.x), free(T.u);
  free(g[0]), free(g[1]);
  return all_ok ? 0 : 1;
}
