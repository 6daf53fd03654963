/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_cg: gradients through implicit time steps, with the linear
 * solver taped iteration by iteration or given to Ariadne as an external
 * function (see README.md beside this file).
 *
 * The problem is the one of examples/implicit_cg.c at a larger size: 2-D
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
#define _POSIX_C_SOURCE 199309L
#include <ariadne.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CG_MAX_ITER 20000

enum { NORTH, SOUTH, WEST, EAST };

typedef struct problem {
  int m, n, steps;
  double dt, r, tol;
  double *diag, *off, *res, *dir, *prod, *lam, *rhs, *kv, *sol, *b, *u;
  long fwd_iters, adj_iters; /* CG iterations of the last run, forward and adjoint */
} problem;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Processor time of this process: on a shared machine with more runnable
 * processes than cores, wall-clock times include the time others ran. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int neighbour(const problem *P, int k, int d) {
  int i = k / P->m, j = k % P->m;
  switch (d) {
  case NORTH: return i > 0 ? k - P->m : -1;
  case SOUTH: return i < P->m - 1 ? k + P->m : -1;
  case WEST: return j > 0 ? k - 1 : -1;
  default: return j < P->m - 1 ? k + 1 : -1;
  }
}

/* ------------------------------------------------------------------------ */
/* Plain double: the primal, and the external function's callbacks          */
/* ------------------------------------------------------------------------ */

/* A(kappa): off[4k+d] = -r kf for an interior face (kf the mean of the two
 * kappas), 0 for a boundary face; diag[k] = 1 + r * (sum of the point's kf). */
static void assemble(const problem *P, const double *kappa, double *diag, double *off) {
  for (int k = 0; k < P->n; k++) {
    double kf[4], sum = 0.0;
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      kf[d] = nb >= 0 ? 0.5 * (kappa[k] + kappa[nb]) : kappa[k];
      off[4 * k + d] = nb >= 0 ? -P->r * kf[d] : 0.0;
      sum += kf[d];
    }
    diag[k] = 1.0 + P->r * sum;
  }
}

static void matvec(const problem *P, const double *p, double *q) {
  int m = P->m;
  for (int k = 0; k < P->n; k++) {
    int i = k / m, j = k % m;
    const double *o = P->off + 4 * k;
    double s = P->diag[k] * p[k];
    if (i > 0) s += o[NORTH] * p[k - m];
    if (i < m - 1) s += o[SOUTH] * p[k + m];
    if (j > 0) s += o[WEST] * p[k - 1];
    if (j < m - 1) s += o[EAST] * p[k + 1];
    q[k] = s;
  }
}

static double dot(int n, const double *a, const double *b) {
  double s = 0.0;
  for (int k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}

/* CG on the assembled matrix from the guess in x; iterations, or -1. */
static int cg(problem *P, const double *b, double *x) {
  int n = P->n;
  double *r = P->res, *p = P->dir, *q = P->prod;
  matvec(P, x, q);
  for (int k = 0; k < n; k++) p[k] = r[k] = b[k] - q[k];
  double rr = dot(n, r, r), stop = P->tol * P->tol * dot(n, b, b);
  int it = 0;
  for (; rr > stop; it++) {
    if (it == CG_MAX_ITER) return -1;
    matvec(P, p, q);
    double alpha = rr / dot(n, p, q);
    for (int k = 0; k < n; k++) {
      x[k] = fma(alpha, p[k], x[k]);
      r[k] = fma(-alpha, q[k], r[k]);
    }
    double rr1 = dot(n, r, r), beta = rr1 / rr;
    for (int k = 0; k < n; k++) p[k] = fma(beta, p[k], r[k]);
    rr = rr1;
  }
  return it;
}

/* T steps, each solved from the previous state, and J; NAN if CG fails. */
static double primal(problem *P, const double *u0, const double *kappa) {
  int n = P->n;
  double *u = P->u, *b = P->b;
  memcpy(u, u0, (size_t)n * sizeof *u);
  assemble(P, kappa, P->diag, P->off);
  P->fwd_iters = 0;
  for (int s = 0; s < P->steps; s++) {
    for (int k = 0; k < n; k++) b[k] = u[k] + P->dt * (u[k] * (1.0 - u[k]));
    int it = cg(P, b, u);
    if (it < 0) return NAN;
    P->fwd_iters += it;
  }
  return dot(n, u, u);
}

/* Adjoint of u = A(kappa)^-1 b with inputs (b, kappa): A lambda = ubar,
 * bbar += lambda, kappabar -= lambda^T (dA/dkappa) u (an interior face's
 * diffusivity is the mean of two kappas: each end takes half). */
static int solve_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                         const double *ybar) {
  problem *P = ud;
  int n = P->n;
  if (nin != 2 * (size_t)n || nout != (size_t)n) return 1;
  assemble(P, x + n, P->diag, P->off);
  memset(P->lam, 0, (size_t)n * sizeof *P->lam);
  int it = cg(P, ybar, P->lam);
  if (it < 0) return 2;
  P->adj_iters += it;
  const double *lam = P->lam;
  for (int k = 0; k < n; k++) {
    xbar[k] += lam[k];
    double kb = 0.0;
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      kb -= nb >= 0 ? 0.5 * P->r * (lam[k] - lam[nb]) * (y[k] - y[nb]) : P->r * lam[k] * y[k];
    }
    xbar[n + k] += kb;
  }
  return 0;
}

static const ad_external_ops solve_ops = {solve_reverse, NULL, NULL, "CG solve"};

/* ------------------------------------------------------------------------ */
/* The Ariadne variants                                                     */
/* ------------------------------------------------------------------------ */

typedef struct ad_work {
  ad_tape *tape;
  ad_real *x, *u, *b, *r, *p, *q, *diag, *off, *in;
} ad_work;

/* The matrix from active kappa, so that its entries carry dA/dkappa. */
static void assemble_ad(const problem *P, const ad_real *kappa, ad_real *diag, ad_real *off) {
  for (int k = 0; k < P->n; k++) {
    ad_real kf[4];
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      kf[d] = nb >= 0 ? ad_mul(0.5, ad_add(kappa[k], kappa[nb])) : kappa[k];
      off[4 * k + d] = nb >= 0 ? ad_mul(-P->r, kf[d]) : ad_const(0.0);
    }
    diag[k] = ad_add(1.0, ad_mul(P->r, ad_sum(4, kf)));
  }
}

/* q = A p: each row one ad_dot statement of its entries and p's. */
static void matvec_ad(const problem *P, const ad_real *diag, const ad_real *off, const ad_real *p, ad_real *q) {
  for (int k = 0; k < P->n; k++) {
    ad_real a[5], x[5];
    int c = 0;
    a[c] = diag[k];
    x[c++] = p[k];
    for (int d = 0; d < 4; d++) {
      int nb = neighbour(P, k, d);
      if (nb < 0) continue;
      a[c] = off[4 * k + d];
      x[c++] = p[nb];
    }
    q[k] = ad_dot((size_t)c, a, x);
  }
}

/* The same CG as cg() on active values, every operation taped; b is W->b. */
static int cg_ad(problem *P, ad_work *W, ad_real *x) {
  int n = P->n;
  ad_real *b = W->b, *r = W->r, *p = W->p, *q = W->q;
  matvec_ad(P, W->diag, W->off, x, q);
  for (int k = 0; k < n; k++) p[k] = r[k] = ad_sub(b[k], q[k]);
  ad_real rr = ad_dot((size_t)n, r, r);
  double bb = 0.0;
  for (int k = 0; k < n; k++) bb += ad_value(b[k]) * ad_value(b[k]);
  double stop = P->tol * P->tol * bb;
  int it = 0;
  for (; ad_gt(rr, stop); it++) {
    if (it == CG_MAX_ITER) return -1;
    matvec_ad(P, W->diag, W->off, p, q);
    ad_real alpha = ad_div(rr, ad_dot((size_t)n, p, q)), nalpha = ad_neg(alpha);
    for (int k = 0; k < n; k++) {
      x[k] = ad_fma(alpha, p[k], x[k]);
      r[k] = ad_fma(nalpha, q[k], r[k]);
    }
    ad_real rr1 = ad_dot((size_t)n, r, r), beta = ad_div(rr1, rr);
    for (int k = 0; k < n; k++) p[k] = ad_fma(beta, p[k], r[k]);
    rr = rr1;
  }
  return it;
}

/* u <- A(kappa)^-1 b: solved passively from the guess in u, then recorded as
 * one external function with inputs (b, kappa). Iterations, or -1. */
static int solve_external(problem *P, ad_work *W, const ad_real *kappa, ad_real *u) {
  int n = P->n;
  for (int k = 0; k < n; k++) {
    P->kv[k] = ad_value(kappa[k]);
    P->rhs[k] = ad_value(W->b[k]);
    P->sol[k] = ad_value(u[k]);
  }
  assemble(P, P->kv, P->diag, P->off);
  int it = cg(P, P->rhs, P->sol);
  if (it < 0) return -1;
  for (int k = 0; k < n; k++) {
    W->in[k] = W->b[k];
    W->in[n + k] = kappa[k];
    u[k] = ad_const(P->sol[k]);
  }
  return ad_external(&solve_ops, P, 2 * (size_t)n, W->in, (size_t)n, u) == AD_OK ? it : -1;
}

typedef struct result {
  double J, record_s, reverse_s, primal_s; /* wall-clock */
  double primal_cpu_s, grad_cpu_s;         /* processor time of the primal and of record + reverse */
  ad_stats st;
  long fwd_iters, adj_iters;
  int rc;
  char msg[200];
} result;

/* Record and sweep once; the gradient goes to g (dJ/du0, then dJ/dkappa). */
static int run_ad(problem *P, ad_work *W, int external, const double *u0, const double *kappa0, double *g,
                  result *out) {
  int n = P->n;
  double t0 = now();
  ad_tape_reset(W->tape);
  ad_tape_begin(W->tape);
  for (int k = 0; k < 2 * n; k++) W->x[k] = ad_input(k < n ? u0[k] : kappa0[k - n]);
  const ad_real *kappa = W->x + n;
  ad_real *u = W->u;
  memcpy(u, W->x, (size_t)n * sizeof *u);
  if (!external) assemble_ad(P, kappa, W->diag, W->off);
  out->fwd_iters = 0;
  int it = 0;
  for (int s = 0; s < P->steps && it >= 0; s++) {
    for (int k = 0; k < n; k++) W->b[k] = ad_add(u[k], ad_mul(P->dt, ad_mul(u[k], ad_sub(1.0, u[k]))));
    it = external ? solve_external(P, W, kappa, u) : cg_ad(P, W, u);
    out->fwd_iters += it;
  }
  ad_real J = ad_dot((size_t)n, u, u);
  ad_tape_end(W->tape);
  double t1 = now();
  out->J = ad_value(J);
  if (it < 0) {
    snprintf(out->msg, sizeof out->msg, "CG did not converge in %d iterations", CG_MAX_ITER);
    return out->rc = 1;
  }
  P->adj_iters = 0;
  int rc = ad_gradient(W->tape, J, 2 * (size_t)n, W->x, g);
  double t2 = now();
  out->adj_iters = P->adj_iters;
  out->record_s = t1 - t0;
  out->reverse_s = t2 - t1;
  ad_tape_stats(W->tape, &out->st);
  if (rc != AD_OK) {
    snprintf(out->msg, sizeof out->msg, "%s: %s", ad_errname(rc), ad_tape_error_message(W->tape));
    return out->rc = 1;
  }
  return out->rc = 0;
}

/* ------------------------------------------------------------------------ */

static void *xcalloc(size_t count, size_t size) {
  void *p = calloc(count, size);
  if (!p) {
    fprintf(stderr, "cg: out of memory\n");
    exit(1);
  }
  return p;
}

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
  problem P;
  memset(&P, 0, sizeof P);
  P.m = 48;
  P.steps = 10;
  P.dt = 0.02;
  P.tol = 1e-12;
  int reps = 3;
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (!strncmp(arg, "--", 2)) arg += 2;
    else if (arg[0] == '-') arg += 1;
    if (a + 1 < argc && !strcmp(arg, "m")) P.m = atoi(argv[++a]);
    else if (a + 1 < argc && (!strcmp(arg, "T") || !strcmp(arg, "t"))) P.steps = atoi(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "reps")) reps = atoi(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "dt")) P.dt = atof(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "tol")) P.tol = atof(argv[++a]);
    else {
      usage(argv[0]);
      return !strcmp(arg, "help") || !strcmp(arg, "h") ? 0 : 2;
    }
  }
  if (P.m < 2 || P.m > 4096 || P.steps < 1 || reps < 1 || !(P.dt > 0.0) || !(P.tol > 0.0)) {
    fprintf(stderr, "cg: need m in [2, 4096], T >= 1, reps >= 1, dt > 0, tol > 0\n");
    return 2;
  }
  int n = P.n = P.m * P.m;
  double h = 1.0 / (P.m + 1);
  P.r = P.dt / (h * h);
  size_t nn = (size_t)n;
  P.diag = xcalloc(nn, sizeof(double));
  P.off = xcalloc(4 * nn, sizeof(double));
  P.res = xcalloc(nn, sizeof(double));
  P.dir = xcalloc(nn, sizeof(double));
  P.prod = xcalloc(nn, sizeof(double));
  P.lam = xcalloc(nn, sizeof(double));
  P.rhs = xcalloc(nn, sizeof(double));
  P.kv = xcalloc(nn, sizeof(double));
  P.sol = xcalloc(nn, sizeof(double));
  P.b = xcalloc(nn, sizeof(double));
  P.u = xcalloc(nn, sizeof(double));
  ad_work W;
  W.x = xcalloc(2 * nn, sizeof(ad_real));
  W.in = xcalloc(2 * nn, sizeof(ad_real));
  W.u = xcalloc(nn, sizeof(ad_real));
  W.b = xcalloc(nn, sizeof(ad_real));
  W.r = xcalloc(nn, sizeof(ad_real));
  W.p = xcalloc(nn, sizeof(ad_real));
  W.q = xcalloc(nn, sizeof(ad_real));
  W.diag = xcalloc(nn, sizeof(ad_real));
  W.off = xcalloc(4 * nn, sizeof(ad_real));
  double *u0 = xcalloc(nn, sizeof(double)), *kappa = xcalloc(nn, sizeof(double));
  double *g[2] = {xcalloc(2 * nn, sizeof(double)), xcalloc(2 * nn, sizeof(double))};
  for (int k = 0; k < n; k++) {
    int i = k / P.m, j = k % P.m;
    u0[k] = 0.5 + 0.4 * sin(0.37 * k);
    kappa[k] = 1.0 + 0.5 * sin(1.3 * i + 0.4) * cos(0.7 * j);
  }

  static const char *names[2] = {"taped", "external"};
  result best[2];
  memset(best, 0, sizeof best);
  double Jp = NAN;
  long primal_iters = 0;
  for (int v = 0; v < 2; v++) {
    /* A fresh tape per variant, kept over the repetitions as a program that
     * takes many gradients would keep it. */
    W.tape = ad_tape_create();
    if (!W.tape) {
      fprintf(stderr, "cg: cannot create a tape\n");
      return 1;
    }
    for (int rep = 0; rep < reps; rep++) {
      double t0 = now(), c0 = cpu_now();
      Jp = primal(&P, u0, kappa);
      double tp = now() - t0, cp = cpu_now() - c0;
      primal_iters = P.fwd_iters;
      result r;
      memset(&r, 0, sizeof r);
      r.primal_s = tp;
      r.primal_cpu_s = cp;
      c0 = cpu_now();
      run_ad(&P, &W, v, u0, kappa, g[v], &r);
      r.grad_cpu_s = cpu_now() - c0;
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
    ad_tape_destroy(W.tape);
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

  printf("implicit CG: m=%d (%d unknowns), T=%d, dt/h^2=%.3g, CG to %.0e, reps=%d; primal: %ld CG iterations\n",
         P.m, n, P.steps, P.r, P.tol, reps, primal_iters);
  printf("%-9s %10s %10s %11s %10s %10s %12s %12s %9s %9s %5s  %s\n", "variant", "primal_ms", "record_ms",
         "reverse_ms", "wall_ratio", "cpu_ratio", "tape_MB", "peak_MB", "fwd_it", "adj_it", "ok", "J");
  for (int v = 0; v < 2; v++) {
    const result *r = &best[v];
    printf("%-9s %10.2f %10.2f %11.2f %10.2f %10.2f %12.3f %12.3f %9ld %9ld %5s  %.15g%s%s\n", names[v],
           1e3 * r->primal_s, 1e3 * r->record_s, 1e3 * r->reverse_s, (r->record_s + r->reverse_s) / r->primal_s,
           r->grad_cpu_s / r->primal_cpu_s, r->st.bytes_used / 1e6, r->st.bytes_peak / 1e6, r->fwd_iters,
           r->adj_iters, ok[v] ? "yes" : "NO", r->J,
           r->msg[0] ? "  " : "", r->msg);
  }
  printf("max |g_taped - g_external| / max |g| = %.2e (limit %.0e); tape ratio taped/external = %.0f\n", gdiff,
         glimit, (double)best[0].st.bytes_used / (double)(best[1].st.bytes_used ? best[1].st.bytes_used : 1));
  for (int v = 0; v < 2; v++) {
    const result *r = &best[v];
    printf("{\"variant\":\"%s\",\"m\":%d,\"unknowns\":%d,\"T\":%d,\"dt\":%.6g,\"tol\":%.3g,\"reps\":%d,", names[v],
           P.m, n, P.steps, P.dt, P.tol, reps);
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

  free(P.diag), free(P.off), free(P.res), free(P.dir), free(P.prod), free(P.lam), free(P.rhs), free(P.kv);
  free(P.sol), free(P.b), free(P.u);
  free(W.x), free(W.in), free(W.u), free(W.b), free(W.r), free(W.p), free(W.q), free(W.diag), free(W.off);
  free(u0), free(kappa), free(g[0]), free(g[1]);
  return all_ok ? 0 : 1;
}
