/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two kernels in the style of real codes, each written once in plain double
 * (fv_kernel.c: a 2-D finite-volume Euler step with a fourth-order face
 * interpolation through temporaries; lj_kernel.c: Lennard-Jones forces over
 * link cells with a cutoff) and differentiated by ariadne-port at build time,
 * op by op (`port`) and fused (`port_fused`), beside the primal and ADOL-C.
 * The fused output is also built passive (ARIADNE_PASSIVE), to be timed
 * against the primal. Each variant's cost is (record + reverse) / primal,
 * measured in this one process in CPU time; the gradient is the gradient of
 * a scalar J of the final state with respect to the initial one.
 *
 *   ariadne_bench_kernels [--kernel fv|lj|all] [--n N] [--steps T] [--reps R] [--check]
 *
 * prints a table, then one JSON object per line and variant. --check compares
 * the gradients at a small size: port against central finite differences of
 * the primal, fused and ADOL-C against the port; it exits non-zero on a
 * mismatch.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <ariadne.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

void fv_step(int nx, int ny, double dt, const double *q, double *fx, double *fy, double *qn);
void fv_step_port(int nx, int ny, ad_real dt, const ad_real *q, ad_real *fx, ad_real *fy, ad_real *qn);
void fv_step_fused(int nx, int ny, ad_real dt, const ad_real *q, ad_real *fx, ad_real *fy, ad_real *qn);
void fv_step_fusedp(int nx, int ny, double dt, const double *q, double *fx, double *fy, double *qn);
double lj_forces(int n, double box, int ncell, const int *head, const int *next, const int *cell_of, const double *x,
                 double *f);
ad_real lj_forces_port(int n, ad_real box, int ncell, const int *head, const int *next, const int *cell_of,
                       const ad_real *x, ad_real *f);
ad_real lj_forces_fused(int n, ad_real box, int ncell, const int *head, const int *next, const int *cell_of,
                        const ad_real *x, ad_real *f);
double lj_forces_fusedp(int n, double box, int ncell, const int *head, const int *next, const int *cell_of,
                        const double *x, double *f);

/* The process's CPU time (user and system, page faults included): the
 * benchmark is single-threaded, and on a shared machine the time other
 * processes take would otherwise land at random in one phase or another. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* The problems                                                              */
/* ------------------------------------------------------------------------ */

/* A smooth density and pressure bump in a uniform flow, ghost rings
 * included (the step leaves them as they are). */
void kernels_fv_init(const kernels_problem *p, double *q) {
  int nx = p->n, ny = p->n, nc = nx * ny;
  for (int i = 0; i < ny; i++)
    for (int j = 0; j < nx; j++) {
      double x = (j + 0.5) / nx - 0.5, y = (i + 0.5) / ny - 0.5;
      double bump = exp(-40.0 * (x * x + y * y));
      double rho = 1.0 + 0.2 * bump, u = 0.3 + 0.05 * sin(6.0 * y), v = 0.1 * cos(5.0 * x), pr = 1.0 + 0.3 * bump;
      int c = i * nx + j;
      q[c] = rho;
      q[nc + c] = rho * u;
      q[2 * nc + c] = rho * v;
      q[3 * nc + c] = pr / 0.4 + 0.5 * rho * (u * u + v * v);
    }
}

/* Atoms on a jittered cubic lattice at density 0.8; link cells at least a
 * cutoff (2.5) wide, built once from the initial positions (integer data:
 * the atoms move little over the steps timed). */
void kernels_lj_init(kernels_problem *p, double *x) {
  int m = 1;
  while (m * m * m < p->n) m++;
  p->box = cbrt((double)p->n / 0.8);
  double a = p->box / m;
  unsigned s = 12345u;
  for (int i = 0; i < p->n; i++) {
    int ix = i % m, iy = (i / m) % m, iz = i / (m * m);
    int idx[3] = {ix, iy, iz};
    for (int k = 0; k < 3; k++) {
      s = s * 1103515245u + 12345u;
      x[3 * i + k] = (idx[k] + 0.5) * a + 0.08 * a * ((double)(s >> 8) / 16777216.0 - 0.5);
    }
  }
  p->ncell = (int)floor(p->box / 2.5);
  if (p->ncell < 3) p->ncell = 3;
  int nc3 = p->ncell * p->ncell * p->ncell;
  p->head = malloc((size_t)nc3 * sizeof *p->head);
  p->next = malloc((size_t)p->n * sizeof *p->next);
  p->cell_of = malloc((size_t)p->n * sizeof *p->cell_of);
  for (int c = 0; c < nc3; c++) p->head[c] = -1;
  for (int i = 0; i < p->n; i++) {
    int cc[3];
    for (int k = 0; k < 3; k++) {
      double w = x[3 * i + k] - p->box * floor(x[3 * i + k] / p->box);
      cc[k] = (int)(w / p->box * p->ncell) % p->ncell;
    }
    int c = (cc[2] * p->ncell + cc[1]) * p->ncell + cc[0];
    p->cell_of[i] = c;
    p->next[i] = p->head[c];
    p->head[c] = i;
  }
}

static double fv_weight(int k) { return 1.0 + 0.001 * (k % 97); }

typedef void fv_step_fn(int nx, int ny, double dt, const double *q, double *fx, double *fy, double *qn);
typedef double lj_forces_fn(int n, double box, int ncell, const int *head, const int *next, const int *cell_of,
                            const double *x, double *f);

/* J of the final state: a weighted sum of the conserved variables. */
static double fv_primal(const kernels_problem *p, const double *q0, double *w, fv_step_fn *step) {
  int nn = 4 * p->n * p->n;
  double *a = w, *b = w + nn, *fx = w + 2 * nn, *fy = w + 3 * nn;
  memcpy(a, q0, (size_t)nn * sizeof *a);
  memcpy(b, q0, (size_t)nn * sizeof *b);
  for (int t = 0; t < p->steps; t++) {
    step(p->n, p->n, p->dt, a, fx, fy, b);
    double *s = a;
    a = b;
    b = s;
  }
  double J = 0.0;
  for (int k = 0; k < nn; k++) J += fv_weight(k) * a[k];
  return J;
}

/* J: the energy and a weighted sum of the forces, over `steps` force
 * evaluations of a step that moves the atoms along the forces. */
static double lj_primal(const kernels_problem *p, const double *x0, double *w, lj_forces_fn *forces) {
  int n3 = 3 * p->n;
  double *x = w, *f = w + n3;
  memcpy(x, x0, (size_t)n3 * sizeof *x);
  double J = 0.0;
  for (int t = 0; t < p->steps; t++) {
    J += forces(p->n, p->box, p->ncell, p->head, p->next, p->cell_of, x, f);
    for (int k = 0; k < n3; k++) x[k] += 1e-4 * f[k];
  }
  for (int k = 0; k < n3; k++) J += 1e-3 * fv_weight(k) * f[k];
  return J;
}

static double primal(const kernels_problem *p, const double *in, double *w) {
  return p->kind == KERNELS_FV ? fv_primal(p, in, w, fv_step) : lj_primal(p, in, w, lj_forces);
}

/* The passive build of the fused port: the same computation in double. */
static double fused_passive(const kernels_problem *p, const double *in, double *w) {
  return p->kind == KERNELS_FV ? fv_primal(p, in, w, fv_step_fusedp) : lj_primal(p, in, w, lj_forces_fusedp);
}

/* ------------------------------------------------------------------------ */
/* Ariadne: record and reverse                                               */
/* ------------------------------------------------------------------------ */

static int ariadne_run(const kernels_problem *p, int fused, const double *in, double *grad, kernels_result *r) {
  int nin = p->kind == KERNELS_FV ? 4 * p->n * p->n : 3 * p->n;
  int nw = p->kind == KERNELS_FV ? 4 * nin : 2 * nin;
  ad_real *x0 = malloc((size_t)nin * sizeof *x0), *w = malloc((size_t)nw * sizeof *w);
  if (!x0 || !w) {
    free(x0);
    free(w);
    return 1;
  }
  ad_tape *tape = ad_tape_create();
  double t0 = now();
  ad_tape_begin(tape);
  for (int k = 0; k < nin; k++) x0[k] = ad_input(in[k]);
  ad_real J = ad_const(0.0);
  if (p->kind == KERNELS_FV) {
    ad_real *a = w, *b = w + nin, *fx = w + 2 * nin, *fy = w + 3 * nin;
    for (int k = 0; k < nin; k++) a[k] = b[k] = x0[k];
    for (int k = 0; k < 2 * nin; k++) fx[k] = ad_const(0.0);
    ad_real dt = ad_const(p->dt);
    for (int t = 0; t < p->steps; t++) {
      (fused ? fv_step_fused : fv_step_port)(p->n, p->n, dt, a, fx, fy, b);
      ad_real *s = a;
      a = b;
      b = s;
    }
    double *wt = malloc((size_t)nin * sizeof *wt);
    for (int k = 0; k < nin; k++) wt[k] = fv_weight(k);
    J = ad_lincomb((size_t)nin, wt, a);
    free(wt);
  } else {
    ad_real *x = w, *f = w + nin;
    for (int k = 0; k < nin; k++) x[k] = x0[k];
    ad_real box = ad_const(p->box);
    for (int t = 0; t < p->steps; t++) {
      J = ad_add(J, (fused ? lj_forces_fused : lj_forces_port)(p->n, box, p->ncell, p->head, p->next, p->cell_of, x, f));
      for (int k = 0; k < nin; k++) x[k] = ad_add(x[k], ad_mul(ad_const(1e-4), f[k]));
    }
    for (int k = 0; k < nin; k++) J = ad_add(J, ad_mul(ad_const(1e-3 * fv_weight(k)), f[k]));
  }
  ad_tape_end(tape);
  double t1 = now();
  int rc = ad_gradient(tape, J, (size_t)nin, x0, grad);
  double t2 = now();
  ad_stats st;
  ad_tape_stats(tape, &st);
  r->J = ad_value(J);
  r->record_s = t1 - t0;
  r->reverse_s = t2 - t1;
  r->statements = (double)st.statements;
  r->arguments = (double)st.arguments;
  r->tape_bytes = (double)st.bytes_used;
  ad_tape_destroy(tape);
  free(x0);
  free(w);
  return rc != AD_OK;
}

/* ------------------------------------------------------------------------ */
/* Variants and measurement                                                  */
/* ------------------------------------------------------------------------ */

enum { V_PRIMAL, V_PORT, V_FUSED, V_FUSED_PASSIVE, V_ADOLC, NV };
static const char *const vname[NV] = {"primal", "port", "port_fused", "port_fused_passive", "adolc"};

static int run_variant(const kernels_problem *p, int v, const double *in, double *grad, double *w, kernels_result *r) {
  memset(r, 0, sizeof *r);
  switch (v) {
  case V_PORT:
  case V_FUSED:
    return ariadne_run(p, v == V_FUSED, in, grad, r);
  case V_FUSED_PASSIVE: {
    double t0 = now();
    r->J = fused_passive(p, in, w);
    r->record_s = now() - t0;
    return 0;
  }
  case V_ADOLC:
#ifdef KERNELS_HAVE_ADOLC
    return kernels_adolc_run(p, in, grad, r);
#else
    return -1;
#endif
  default:
    return 0;
  }
}

typedef struct slot {
  kernels_result best, cold;
  double primal_s;
  int rc;
} slot;

static int measure(const kernels_problem *p, int v, int reps, const double *in, double *grad, double *w, slot *s) {
  memset(s, 0, sizeof *s);
  s->primal_s = INFINITY;
  for (int rep = 0; rep < reps; rep++) {
    double t0 = now();
    volatile double Jp = primal(p, in, w);
    (void)Jp;
    double tp = now() - t0;
    if (tp < s->primal_s) s->primal_s = tp;
    if (v == V_PRIMAL) continue;
    kernels_result r;
    int rc = run_variant(p, v, in, grad, w, &r);
    if (rc) return s->rc = rc;
    if (rep == 0) {
      s->cold = r;
      s->best = r;
    }
    if (r.record_s + r.reverse_s < s->best.record_s + s->best.reverse_s) s->best = r;
  }
  return 0;
}

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 0.0 ? fabs(b) : 1.0); }

static double grad_err(const double *g, const double *ref, int n) {
  double m = 0.0, e = 0.0;
  for (int k = 0; k < n; k++) m = fmax(m, fabs(ref[k]));
  for (int k = 0; k < n; k++) e = fmax(e, fabs(g[k] - ref[k]));
  return e / (m > 0.0 ? m : 1.0);
}

/* The port's gradient against central differences of the primal, at
 * every 7th input; the others against the port's to round-off. */
static int check(const kernels_problem *p, const double *in, double *const grad[NV], double *w, int nin) {
  int bad = 0;
  double *x = malloc((size_t)nin * sizeof *x);
  memcpy(x, in, (size_t)nin * sizeof *x);
  double gmax = 0.0;
  for (int k = 0; k < nin; k++) gmax = fmax(gmax, fabs(grad[V_PORT][k]));
  for (int k = 0; k < nin; k += 7) {
    double h = 1e-6 * fmax(1.0, fabs(in[k]));
    x[k] = in[k] + h;
    double fp = primal(p, x, w);
    x[k] = in[k] - h;
    double fm = primal(p, x, w);
    x[k] = in[k];
    double fd = (fp - fm) / (2.0 * h);
    if (fabs(fd - grad[V_PORT][k]) > 1e-5 * fabs(fd) + 1e-7 * gmax) {
      fprintf(stderr, "%s: input %d: port %.12g, finite differences %.12g\n", p->name, k, grad[V_PORT][k], fd);
      bad++;
    }
  }
  for (int v = V_FUSED; v < NV; v++) {
    if (!grad[v] || v == V_FUSED_PASSIVE) continue;
    double e = grad_err(grad[v], grad[V_PORT], nin);
    if (e > 1e-10) {
      fprintf(stderr, "%s: %s gradient differs from the port's: max relative error %.3g\n", p->name, vname[v], e);
      bad++;
    }
  }
  free(x);
  return bad;
}

static int bench(kernels_problem *p, int reps, int do_check) {
  int nin = p->kind == KERNELS_FV ? 4 * p->n * p->n : 3 * p->n;
  double *in = malloc((size_t)nin * sizeof *in), *w = malloc((size_t)4 * (size_t)nin * sizeof *w);
  double *grad[NV] = {0};
  if (p->kind == KERNELS_FV)
    kernels_fv_init(p, in);
  else
    kernels_lj_init(p, in);
  double Jp = primal(p, in, w);
  slot s[NV];
  int bad = 0;
  for (int v = 0; v < NV; v++) {
    grad[v] = calloc((size_t)nin, sizeof(double));
    measure(p, v, reps, in, grad[v], w, &s[v]);
    if (s[v].rc > 0) {
      fprintf(stderr, "%s: variant %s failed\n", p->name, vname[v]);
      bad++;
    }
    if (s[v].rc) {
      free(grad[v]);
      grad[v] = NULL;
    }
    if (v != V_PRIMAL && !s[v].rc && rel(s[v].best.J, Jp) > 1e-12) {
      fprintf(stderr, "%s: %s J = %.17g, primal %.17g\n", p->name, vname[v], s[v].best.J, Jp);
      bad++;
    }
  }
  if (do_check) bad += check(p, in, grad, w, nin);
  double units = p->kind == KERNELS_FV ? (double)(p->n - 4) * (p->n - 4) * p->steps : 0.0;
  if (p->kind == KERNELS_LJ) {
    /* Pairs within the cutoff, each met from both atoms, per force call. */
    long pairs = 0;
    for (int i = 0; i < p->n; i++)
      for (int j = 0; j < p->n; j++) {
        if (i == j) continue;
        double r2 = 0.0;
        for (int k = 0; k < 3; k++) {
          double d = in[3 * i + k] - in[3 * j + k];
          d -= p->box * floor(d / p->box + 0.5);
          r2 += d * d;
        }
        pairs += r2 <= 6.25;
      }
    units = (double)pairs * p->steps;
  }
  const char *unit = p->kind == KERNELS_FV ? "cell" : "pair";
  printf("%s (%s), primal %.3f ms; ratios (record + reverse) / primal\n", p->name, p->what, 1e3 * s[V_PRIMAL].primal_s);
  printf("  %-20s %8s %8s %10s %10s %12s %12s\n", "variant", "warm", "first", "record ms", "reverse ms", "bytes/", "stmts/");
  for (int v = 1; v < NV; v++) {
    if (s[v].rc) {
      printf("  %-20s skipped\n", vname[v]);
      continue;
    }
    double warm = (s[v].best.record_s + s[v].best.reverse_s) / s[v].primal_s;
    double first = (s[v].cold.record_s + s[v].cold.reverse_s) / s[v].primal_s;
    printf("  %-20s %8.2f %8.2f %10.2f %10.2f %8.0f/%s %8.1f/%s\n", vname[v], warm, first, 1e3 * s[v].best.record_s,
           1e3 * s[v].best.reverse_s, s[v].best.tape_bytes / units, unit, s[v].best.statements / units, unit);
  }
  for (int v = 0; v < NV; v++) {
    if (s[v].rc) continue;
    printf("{\"benchmark\":\"%s\",\"variant\":\"%s\",\"n\":%d,\"steps\":%d,\"J\":%.17g,\"primal_s\":%.6g,"
           "\"record_s\":%.6g,\"reverse_s\":%.6g,\"cold_record_s\":%.6g,\"cold_reverse_s\":%.6g,"
           "\"gradient_ratio\":%.4g,\"cold_gradient_ratio\":%.4g,\"tape_bytes\":%.0f,\"bytes_per_%s\":%.1f,"
           "\"statements\":%.0f,\"statements_per_%s\":%.2f,\"arguments\":%.0f}\n",
           p->name, vname[v], p->n, p->steps, v ? s[v].best.J : Jp, s[v].primal_s, s[v].best.record_s,
           s[v].best.reverse_s, s[v].cold.record_s, s[v].cold.reverse_s,
           v ? (s[v].best.record_s + s[v].best.reverse_s) / s[v].primal_s : 1.0,
           v ? (s[v].cold.record_s + s[v].cold.reverse_s) / s[v].primal_s : 1.0, s[v].best.tape_bytes, unit,
           s[v].best.tape_bytes / units, s[v].best.statements, unit, s[v].best.statements / units,
           s[v].best.arguments);
  }
  for (int v = 0; v < NV; v++) free(grad[v]);
  free(in);
  free(w);
  free(p->head);
  free(p->next);
  free(p->cell_of);
  return bad;
}

int main(int argc, char **argv) {
  const char *which = "all";
  int n = 0, steps = 0, reps = 5, do_check = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
      which = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--check"))
      do_check = 1;
    else {
      fprintf(stderr, "usage: %s [--kernel fv|lj|all] [--n N] [--steps T] [--reps R] [--check]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  int bad = 0;
  if (!strcmp(which, "fv") || !strcmp(which, "all")) {
    kernels_problem p = {KERNELS_FV, "fv", "finite-volume Euler, fourth-order faces", n ? n : 132, steps ? steps : 10,
                         0.0, 0.0, 0, NULL, NULL, NULL};
    p.dt = 0.2 / p.n;
    bad += bench(&p, reps, do_check);
  }
  if (!strcmp(which, "lj") || !strcmp(which, "all")) {
    kernels_problem p = {KERNELS_LJ, "lj", "Lennard-Jones over link cells, cutoff 2.5", n ? n : 2048,
                         steps ? steps : 5, 0.0, 0.0, 0, NULL, NULL, NULL};
    bad += bench(&p, reps, do_check);
  }
  if (bad) fprintf(stderr, "kernels: %d checks failed\n", bad);
  return bad ? 1 : 0;
}
