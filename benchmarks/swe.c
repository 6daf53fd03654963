/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_swe: a multi-output kernel (see README.md beside this file).
 *
 * 1-D shallow water equations, finite volumes, periodic, explicit Euler in
 * time, Rusanov (local Lax-Friedrichs) flux: each face computes its two
 * fluxes (mass and momentum) from shared intermediates (velocities, wave
 * speeds, their maximum). J = sum_i h_T[i]^2 + hu_T[i]^2, gradient with
 * respect to the initial state (h0, hu0).
 *
 * Variants: the plain double primal; a hand-written adjoint (every state
 * stored, the face Jacobians transposed backwards), itself checked against
 * central finite differences; Ariadne per operation (op); the same code with
 * one region per face ended by ad_stmt_end_n (2 results), the cell update
 * per operation (stmt); the face fluxes and the update as statements with
 * hand-computed local partials through ad_custom (custom). Every figure is a ratio measured in
 * one process: each repetition times the primal and then the variant, and
 * the minimum of each is kept. Exits non-zero if a value or gradient is off.
 */
#define _DEFAULT_SOURCE
#include <ariadne.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define G 9.81
#define PI 3.14159265358979323846
#define TOL_J 1e-12
#define TOL_GRAD 1e-10
#define TOL_FD 1e-6

typedef struct problem {
  int n, steps;
  double lam; /* dt / dx */
  double *q0; /* h0[0..n), hu0[0..n) */
} problem;

static void problem_init(problem *p, int n, int steps) {
  p->n = n;
  p->steps = steps;
  p->q0 = malloc(2 * (size_t)n * sizeof(double));
  double hmax = 0.0;
  for (int i = 0; i < n; i++) {
    double x = (i + 0.5) / n;
    double h = 1.0 + 0.2 * exp(-100.0 * (x - 0.5) * (x - 0.5)) + 0.05 * sin(2.0 * PI * x);
    p->q0[i] = h;
    p->q0[n + i] = 0.1 * sin(4.0 * PI * x) * h;
    hmax = fmax(hmax, h);
  }
  /* CFL 0.4 for the largest wave speed, with room for its growth */
  p->lam = 0.4 / (0.2 + sqrt(G * hmax) * 1.2);
}

/* ------------------------------------------------------------------------ */
/* Primal and hand-written adjoint                                           */
/* ------------------------------------------------------------------------ */

/* The Rusanov flux between states (hl, ul) and (hr, ur), ul and ur the
 * momenta, in the order of operations the ad_real variants use; with dF
 * (if not NULL) its Jacobian: dF[c][k] = d F_c / d (hl, hul, hr, hur)_k. */
static void flux_d(double hl, double hul, double hr, double hur, double F[2], double dF[2][4]) {
  double ul = hul / hl, ur = hur / hr;
  double phil = hul * ul + 0.5 * G * (hl * hl), phir = hur * ur + 0.5 * G * (hr * hr);
  double cl = sqrt(G * hl), cr = sqrt(G * hr);
  double sl = fabs(ul) + cl, sr = fabs(ur) + cr;
  int left = sl >= sr || isnan(sr);
  double s = left ? sl : sr;
  double dh = hr - hl, dhu = hur - hul;
  F[0] = 0.5 * ((hul + hur) - s * dh);
  F[1] = 0.5 * ((phil + phir) - s * dhu);
  if (!dF) return;
  double sgl = ul > 0.0 ? 1.0 : ul < 0.0 ? -1.0 : 0.0, sgr = ur > 0.0 ? 1.0 : ur < 0.0 ? -1.0 : 0.0;
  double ds[4] = {0.0, 0.0, 0.0, 0.0}; /* ds / d (hl, hul, hr, hur) */
  if (left) {
    ds[0] = sgl * (-ul / hl) + 0.5 * G / cl;
    ds[1] = sgl / hl;
  } else {
    ds[2] = sgr * (-ur / hr) + 0.5 * G / cr;
    ds[3] = sgr / hr;
  }
  double dphi[4] = {-ul * ul + G * hl, 2.0 * ul, -ur * ur + G * hr, 2.0 * ur};
  for (int k = 0; k < 4; k++) {
    dF[0][k] = -0.5 * ds[k] * dh;
    dF[1][k] = 0.5 * dphi[k] - 0.5 * ds[k] * dhu;
  }
  dF[0][0] += 0.5 * s;
  dF[0][1] += 0.5;
  dF[0][2] -= 0.5 * s;
  dF[0][3] += 0.5;
  dF[1][1] += 0.5 * s;
  dF[1][3] -= 0.5 * s;
}

/* One step from q to r (face k lies between cells k and k + 1 mod n). */
static void step_primal(const problem *p, const double *q, double *r, double *F) {
  int n = p->n;
  for (int k = 0; k < n; k++) {
    int k1 = k + 1 == n ? 0 : k + 1;
    flux_d(q[k], q[n + k], q[k1], q[n + k1], &F[2 * k], NULL);
  }
  for (int i = 0; i < n; i++) {
    int km = i == 0 ? n - 1 : i - 1;
    for (int c = 0; c < 2; c++) r[c * n + i] = q[c * n + i] - p->lam * (F[2 * i + c] - F[2 * km + c]);
  }
}

static double objective(int n, const double *q) {
  double J = 0.0;
  for (int k = 0; k < 2 * n; k++) J += q[k] * q[k];
  return J;
}

static double run_primal(const problem *p, const double *q0, double *work) {
  int n = p->n;
  double *q = work, *r = work + 2 * n, *F = work + 4 * n;
  memcpy(q, q0, 2 * (size_t)n * sizeof(double));
  for (int t = 0; t < p->steps; t++) {
    step_primal(p, q, r, F);
    double *w = q;
    q = r;
    r = w;
  }
  return objective(n, q);
}

/* Hand adjoint: states stored forward, then each step transposed. */
static double run_hand(const problem *p, double *states, double *g, double *F) {
  int n = p->n, m = 2 * n;
  memcpy(states, p->q0, (size_t)m * sizeof(double));
  for (int t = 0; t < p->steps; t++) step_primal(p, states + (size_t)t * m, states + (size_t)(t + 1) * m, F);
  const double *qT = states + (size_t)p->steps * m;
  double J = objective(n, qT);
  double *qb = g, *Fb = F;
  for (int k = 0; k < m; k++) qb[k] = 2.0 * qT[k];
  for (int t = p->steps - 1; t >= 0; t--) {
    const double *q = states + (size_t)t * m;
    /* r_i = q_i - lam (F_i - F_{i-1}): Fbar_k = lam (rbar_{k+1} - rbar_k) */
    for (int k = 0; k < n; k++) {
      int k1 = k + 1 == n ? 0 : k + 1;
      for (int c = 0; c < 2; c++) Fb[2 * k + c] = p->lam * (qb[c * n + k1] - qb[c * n + k]);
    }
    for (int k = 0; k < n; k++) {
      int k1 = k + 1 == n ? 0 : k + 1;
      double f[2], d[2][4];
      flux_d(q[k], q[n + k], q[k1], q[n + k1], f, d);
      double b0 = Fb[2 * k], b1 = Fb[2 * k + 1];
      qb[k] += b0 * d[0][0] + b1 * d[1][0];
      qb[n + k] += b0 * d[0][1] + b1 * d[1][1];
      qb[k1] += b0 * d[0][2] + b1 * d[1][2];
      qb[n + k1] += b0 * d[0][3] + b1 * d[1][3];
    }
  }
  return J;
}

/* ------------------------------------------------------------------------ */
/* Ariadne                                                                   */
/* ------------------------------------------------------------------------ */

enum { MODE_OP, MODE_STMT, MODE_CUSTOM };

/* The flux with one Ariadne operation per C operation of flux_d. */
static void flux_op(ad_real hl, ad_real hul, ad_real hr, ad_real hur, ad_real F[2]) {
  ad_real ul = ad_div(hul, hl), ur = ad_div(hur, hr);
  ad_real phil = ad_add(ad_mul(hul, ul), ad_mul(0.5 * G, ad_mul(hl, hl)));
  ad_real phir = ad_add(ad_mul(hur, ur), ad_mul(0.5 * G, ad_mul(hr, hr)));
  ad_real cl = ad_sqrt(ad_mul(G, hl)), cr = ad_sqrt(ad_mul(G, hr));
  ad_real s = ad_fmax(ad_add(ad_fabs(ul), cl), ad_add(ad_fabs(ur), cr));
  F[0] = ad_mul(0.5, ad_sub(ad_add(hul, hur), ad_mul(s, ad_sub(hr, hl))));
  F[1] = ad_mul(0.5, ad_sub(ad_add(phil, phir), ad_mul(s, ad_sub(hur, hul))));
}

static void step_ad(int mode, const problem *p, const ad_real *q, ad_real *r, ad_real *F) {
  int n = p->n;
  double lam = p->lam;
  for (int k = 0; k < n; k++) {
    int k1 = k + 1 == n ? 0 : k + 1;
    ad_real *f = &F[2 * k];
    if (mode == MODE_CUSTOM) {
      double v[2], d[2][4];
      flux_d(ad_value(q[k]), ad_value(q[n + k]), ad_value(q[k1]), ad_value(q[n + k1]), v, d);
      ad_real a[4] = {q[k], q[n + k], q[k1], q[n + k1]};
      f[0] = ad_custom(v[0], 4, a, d[0]);
      f[1] = ad_custom(v[1], 4, a, d[1]);
    } else if (mode == MODE_STMT) {
      /* both fluxes from one region: two statements of four arguments */
      ad_stmt_begin();
      flux_op(q[k], q[n + k], q[k1], q[n + k1], f);
      ad_stmt_end_n(2, f);
    } else {
      flux_op(q[k], q[n + k], q[k1], q[n + k1], f);
    }
  }
  for (int i = 0; i < n; i++) {
    int km = i == 0 ? n - 1 : i - 1;
    for (int c = 0; c < 2; c++) {
      ad_real qi = q[c * n + i], fr = F[2 * i + c], fl = F[2 * km + c];
      if (mode == MODE_CUSTOM) {
        ad_real a[3] = {qi, fr, fl};
        double d[3] = {1.0, -lam, lam};
        r[c * n + i] = ad_custom(ad_value(qi) - lam * (ad_value(fr) - ad_value(fl)), 3, a, d);
      } else {
        r[c * n + i] = ad_sub(qi, ad_mul(lam, ad_sub(fr, fl)));
      }
    }
  }
}

typedef struct result {
  double J, record_s, reverse_s, tape_bytes;
  int rc;
} result;

static void run_ad(int mode, const problem *p, ad_tape *tape, ad_real *x, ad_real *work, double *g, result *out) {
  int n = p->n, m = 2 * n;
  ad_real *q = work, *r = work + m, *F = work + 2 * m;
  double t0 = bench_now();
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  for (int k = 0; k < m; k++) x[k] = q[k] = ad_input(p->q0[k]);
  for (int t = 0; t < p->steps; t++) {
    step_ad(mode, p, q, r, F);
    ad_real *w = q;
    q = r;
    r = w;
  }
  ad_real J = ad_dot((size_t)m, q, q);
  ad_tape_end(tape);
  double t1 = bench_now();
  out->rc = ad_gradient(tape, J, (size_t)m, x, g);
  double t2 = bench_now();
  out->J = ad_value(J);
  out->record_s = t1 - t0;
  out->reverse_s = t2 - t1;
  ad_stats st;
  ad_tape_stats(tape, &st);
  out->tape_bytes = (double)st.bytes_used;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                    */
/* ------------------------------------------------------------------------ */

static const char *const names[] = {"op", "stmt", "custom"};

static double max_rel_diff(int m, const double *a, const double *b) {
  double scale = 0.0, diff = 0.0;
  for (int k = 0; k < m; k++) {
    scale = fmax(scale, fabs(b[k]));
    diff = fmax(diff, fabs(a[k] - b[k]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

int main(int argc, char **argv) {
  int n = 4096, steps = 200, reps = 5;
  const char *only = NULL;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--N") && a + 1 < argc)
      n = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--T") && a + 1 < argc)
      steps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
      reps = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--only") && a + 1 < argc)
      only = argv[++a];
    else {
      fprintf(stderr, "usage: %s [--N cells] [--T steps] [--reps r] [--only op,stmt,custom]\n", argv[0]);
      return 2;
    }
  }
  if (n < 4 || steps < 1 || reps < 1) {
    fprintf(stderr, "ariadne_bench_swe: need N >= 4, T >= 1, reps >= 1\n");
    return 2;
  }
  problem p;
  problem_init(&p, n, steps);
  int m = 2 * n, fails = 0;
  double cells = (double)n * steps;
  double *work = malloc(6 * (size_t)m * sizeof(double));
  double *states = malloc((size_t)(steps + 1) * m * sizeof(double));
  double *gh = malloc((size_t)m * sizeof(double)), *g = malloc((size_t)m * sizeof(double));
  ad_real *x = malloc((size_t)m * sizeof(ad_real)), *aw = malloc(4 * (size_t)m * sizeof(ad_real));
  if (!p.q0 || !work || !states || !gh || !g || !x || !aw) {
    fprintf(stderr, "ariadne_bench_swe: out of memory\n");
    return 1;
  }

  /* The primal, and the hand adjoint against central differences. */
  double Jp = 0.0, tp = 1e30, th = 1e30, Jh = 0.0;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now();
    Jp = run_primal(&p, p.q0, work);
    double t1 = bench_now();
    Jh = run_hand(&p, states, gh, work);
    double t2 = bench_now();
    tp = fmin(tp, t1 - t0);
    th = fmin(th, t2 - t1);
  }
  double fd_err = 0.0, scale = 0.0;
  for (int k = 0; k < m; k++) scale = fmax(scale, fabs(gh[k]));
  int probes[4] = {0, n / 2, n + n / 3, m - 1};
  for (int k = 0; k < 4; k++) {
    int j = probes[k];
    double save = p.q0[j], h = 1e-5 * fmax(1.0, fabs(save));
    p.q0[j] = save + h;
    double Jplus = run_primal(&p, p.q0, work);
    p.q0[j] = save - h;
    double Jminus = run_primal(&p, p.q0, work);
    p.q0[j] = save;
    double fd = (Jplus - Jminus) / (2.0 * h);
    fd_err = fmax(fd_err, fabs(fd - gh[j]) / scale);
  }
  int hand_ok = fabs(Jh - Jp) <= TOL_J * fabs(Jp) && fd_err <= TOL_FD;
  fails += !hand_ok;

  printf("shallow water, Rusanov flux: N=%d T=%d (%.0f cell updates), reps=%d\n", n, steps, cells, reps);
  printf("%-8s %10s %10s %10s %10s %9s %12s %5s  %s\n", "variant", "primal_ms", "record_ms", "reverse_ms", "grad_ratio",
         "B/cell", "rel_vs_hand", "ok", "J");
  printf("%-8s %10.2f %10.2f %10.2f %10.2f %9s %12s %5s  %.13g\n", "primal", 1e3 * tp, 1e3 * tp, 0.0, 1.0, "-", "-",
         "yes", Jp);
  printf("%-8s %10.2f %10.2f %10.2f %10.2f %9.1f %12s %5s  %.13g   (vs central differences: %.1e)\n", "hand", 1e3 * tp,
         1e3 * th, 0.0, th / tp, (double)m * sizeof(double) * (steps + 1) / cells, "-", hand_ok ? "yes" : "NO", Jh,
         fd_err);
  char json[3][512];
  int njson = 0;
  ad_tape *tape = ad_tape_create();
  for (int v = 0; v < 3; v++) {
    if (only && !strstr(only, names[v])) continue;
    result best = {0, 1e30, 1e30, 0, 0}, res;
    double tpv = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = bench_now();
      run_primal(&p, p.q0, work);
      tpv = fmin(tpv, bench_now() - t0);
      run_ad(v, &p, tape, x, aw, g, &res);
      best.record_s = fmin(best.record_s, res.record_s);
      best.reverse_s = fmin(best.reverse_s, res.reverse_s);
      best.J = res.J;
      best.rc = best.rc ? best.rc : res.rc;
      best.tape_bytes = res.tape_bytes;
    }
    double rel_J = fabs(best.J - Jp) / fabs(Jp), rel_g = max_rel_diff(m, g, gh);
    int ok = best.rc == AD_OK && rel_J <= TOL_J && rel_g <= TOL_GRAD;
    fails += !ok;
    double ratio = (best.record_s + best.reverse_s) / tpv;
    printf("%-8s %10.2f %10.2f %10.2f %10.2f %9.1f %12.1e %5s  %.13g%s%s\n", names[v], 1e3 * tpv, 1e3 * best.record_s,
           1e3 * best.reverse_s, ratio, best.tape_bytes / cells, rel_g, ok ? "yes" : "NO", best.J, best.rc ? "  " : "",
           best.rc ? ad_tape_error_message(tape) : "");
    snprintf(json[njson++], sizeof json[0],
             "{\"bench\":\"swe\",\"variant\":\"%s\",\"N\":%d,\"T\":%d,\"reps\":%d,\"J\":%.13g,\"primal_s\":%.6g,"
             "\"record_s\":%.6g,\"reverse_s\":%.6g,\"gradient_ratio\":%.4g,\"tape_bytes\":%.0f,"
             "\"bytes_per_cell\":%.1f,\"J_rel_err_vs_primal\":%.3g,\"grad_rel_err_vs_hand\":%.3g,"
             "\"hand_rel_err_vs_fd\":%.3g,\"ok\":%s}",
             names[v], n, steps, reps, best.J, tpv, best.record_s, best.reverse_s, ratio, best.tape_bytes,
             best.tape_bytes / cells, rel_J, rel_g, fd_err, ok ? "true" : "false");
  }
  for (int k = 0; k < njson; k++) puts(json[k]);
  ad_tape_destroy(tape);
  free(p.q0);
  free(work);
  free(states);
  free(gh);
  free(g);
  free(x);
  free(aw);
  if (fails) fprintf(stderr, "ariadne_bench_swe: %d check(s) failed\n", fails);
  return fails ? 1 : 0;
}
