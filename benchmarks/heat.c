/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_heat: the reference benchmark (see README.md beside this file).
 *
 * Runs the heat kernel as plain double (primal), with a hand-written adjoint,
 * with Ariadne recording per operation, with statement preaccumulation, with
 * user-supplied local partials, compiled passive, and with ADOL-C; prints a
 * table, then one JSON object per line and variant; exits non-zero if any
 * value or gradient disagrees with the primal, the hand adjoint or (at the
 * default size) the published reference values.
 *
 * Every figure is a ratio measured side by side in one process: each
 * repetition times the primal and then the variant, and the minimum of each
 * is kept, because the machines it runs on are shared and noisy. Each
 * variant runs in a forked child so that its peak resident memory is its own.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "heat.h"

/* Tolerances. Values agree to the last bit where variants evaluate the same
 * expression; gradients may differ in the order of accumulation only. */
#define TOL_J 1e-12
#define TOL_GRAD 1e-10
#define TOL_REF 5e-11

/* ------------------------------------------------------------------------ */
/* Primal and hand-written adjoint                                           */
/* ------------------------------------------------------------------------ */

typedef struct work {
  int n, steps;
  double *a, *b;  /* primal state buffers */
  double *states; /* hand adjoint: all states, (steps + 1) * n * n */
  double *ubar, *vbar;
  void *ad; /* Ariadne context */
} work;

/* The primal: the boundary of both buffers holds u0 and is never written. */
static double primal(work *w, const double *u0) { return heat_primal(w->n, w->steps, u0, w->a, w->b); }

/* Hand-written adjoint (heat_hand.c): store every state forward, then run
 * the transposed step backwards. */
static int run_hand(work *w, int mode, const double *u0, double *grad, heat_result *out) {
  (void)mode;
  size_t nn = (size_t)w->n * (size_t)w->n;
  memset(out, 0, sizeof *out);
  out->in_memory = 1;
  double t0 = bench_now();
  out->J = heat_hand_forward(w->n, w->steps, u0, w->states);
  double t1 = bench_now();
  heat_hand_reverse(w->n, w->steps, w->states, w->ubar, w->vbar, grad);
  double t2 = bench_now();
  out->record_s = t1 - t0;
  out->reverse_s = t2 - t1;
  out->tape_bytes = (double)(w->steps + 1) * (double)nn * sizeof(double);
  return 0;
}

static int run_primal(work *w, int mode, const double *u0, double *grad, heat_result *out) {
  (void)mode;
  (void)grad;
  memset(out, 0, sizeof *out);
  out->in_memory = 1;
  double t0 = bench_now();
  out->J = primal(w, u0);
  out->record_s = bench_now() - t0;
  return 0;
}

static int run_ariadne(work *w, int mode, const double *u0, double *grad, heat_result *out) {
  return heat_ariadne_run(w->ad, mode, w->n, w->steps, u0, grad, out);
}

static int run_passive(work *w, int mode, const double *u0, double *grad, heat_result *out) {
  return heat_passive_run(w->ad, mode, w->n, w->steps, u0, grad, out);
}

#ifdef HEAT_HAVE_ADOLC
static int run_adolc(work *w, int mode, const double *u0, double *grad, heat_result *out) {
  (void)mode;
  return heat_adolc_run(w->n, w->steps, u0, grad, out);
}
#endif

/* ------------------------------------------------------------------------ */
/* Variants                                                                  */
/* ------------------------------------------------------------------------ */

typedef int (*run_fn)(work *w, int mode, const double *u0, double *grad, heat_result *out);

typedef struct variant {
  const char *name;
  run_fn run; /* NULL: not built */
  int mode;
  int gradient; /* computes dJ/du0 */
  int context;  /* 0 none, 1 Ariadne active, 2 Ariadne passive */
  const char *about;
} variant;

/* A variant that needs an optional part of the build is listed once: where
 * the part is missing it has no run function, and the reason stands in place
 * of its description. */
#ifdef HEAT_HAVE_PORT
#define PORT_RUN run_ariadne
#define PORT_ABOUT(about) about
#else
#define PORT_RUN NULL
#define PORT_ABOUT(about) "ariadne-port was not built (libclang not found)"
#endif
#ifdef HEAT_HAVE_CXX
#define CXX_RUN run_ariadne
#define CXX_ABOUT(about) about
#else
#define CXX_RUN NULL
#define CXX_ABOUT(about) "no C++ compiler was found when the benchmark was configured"
#endif
#ifdef HEAT_HAVE_ADOLC
#define ADOLC_RUN run_adolc
#define ADOLC_ABOUT(about) about
#else
#define ADOLC_RUN NULL
#define ADOLC_ABOUT(about) "ADOL-C was not found when the benchmark was configured"
#endif

/* Ordered so that the cheap references run first: the hand adjoint's
 * gradient is what every later variant is checked against. */
static const variant variants[] = {
    {"primal", run_primal, 0, 0, 0, "plain double"},
    {"hand", run_hand, 0, 1, 0, "hand-written adjoint, all states stored"},
    {"ariadne_passive", run_passive, HEAT_MODE_OP, 0, 2, "op code compiled with ARIADNE_PASSIVE"},
    {"ariadne_op", run_ariadne, HEAT_MODE_OP, 1, 1, "one statement per operation"},
    {"ariadne_stmt", run_ariadne, HEAT_MODE_STMT, 1, 1, "ad_stmt_begin/end around each cell"},
    {"ariadne_custom", run_ariadne, HEAT_MODE_CUSTOM, 1, 1, "ad_custom with hand partials"},
    {"ariadne_tapeoff", run_ariadne, HEAT_MODE_TAPEOFF, 0, 1, "op code, active build, no tape recording"},
    {"ariadne_tapeoff_custom", run_ariadne, HEAT_MODE_TAPEOFF_CUSTOM, 0, 1,
     "custom code, active build, no tape recording"},
    {"port", PORT_RUN, HEAT_MODE_PORT, 1, 1, PORT_ABOUT("heat_kernel.c ported by ariadne-port")},
    {"port_fused", PORT_RUN, HEAT_MODE_PORT_FUSED, 1, 1, PORT_ABOUT("heat_kernel.c ported by ariadne-port --fused")},
    {"cxx_op", CXX_RUN, HEAT_MODE_CXX, 1, 1, CXX_ABOUT("the op code's cell in C++, ARIADNE_CXX_PER_OPERATION")},
    {"cxx_et", CXX_RUN, HEAT_MODE_CXX_ET, 1, 1, CXX_ABOUT("HEAT_CELL in C++ with ariadne.hpp's expressions")},
    {"adolc", ADOLC_RUN, 0, 1, 0, ADOLC_ABOUT("ADOL-C adouble, tape in memory, fos_reverse")},
};
#define NVAR ((int)(sizeof variants / sizeof variants[0]))

/* What a variant's child hands back through shared memory. */
typedef struct slot {
  heat_result r;                        /* minimum times over repetitions; values of the last one */
  double cold_record_s, cold_reverse_s; /* the first repetition: fresh memory */
  double new_record_s, new_reverse_s;   /* a second tape after the first is destroyed: its memory, kept */
  double primal_s;                      /* minimum primal time measured in the same child */
  double rss_start_mb;                  /* peak RSS when the variant started */
  double rss_peak_mb;                   /* peak RSS when it ended */
  int done, selected;
} slot;

typedef bench_options options;

/* Run variant v `reps` times, each repetition timing the primal first, and
 * leave the result in *s and the gradient of the last repetition in grad. */
static int measure(const options *o, const variant *v, const double *u0, double *grad, slot *s) {
  work w;
  memset(&w, 0, sizeof w);
  w.n = o->n;
  w.steps = o->steps;
  size_t nn = (size_t)o->n * (size_t)o->n;
  s->rss_start_mb = bench_maxrss_mb();
  w.a = malloc(nn * sizeof(double));
  w.b = malloc(nn * sizeof(double));
  if (!w.a || !w.b) goto nomem;
  if (v->run == run_hand) {
    w.states = malloc((size_t)(o->steps + 1) * nn * sizeof(double));
    w.ubar = malloc(nn * sizeof(double));
    w.vbar = malloc(nn * sizeof(double));
    if (!w.states || !w.ubar || !w.vbar) goto nomem;
  }
  if (v->context == 1 && !(w.ad = heat_ariadne_create(o->n))) goto nomem;
  if (v->context == 2 && !(w.ad = heat_passive_create(o->n))) goto nomem;

  int rc = 0;
  heat_result r, best;
  memset(&best, 0, sizeof best);
  double pbest = INFINITY;
  for (int rep = 0; rep < o->reps; rep++) {
    double t0 = bench_now();
    double Jp = primal(&w, u0);
    double tp = bench_now() - t0;
    (void)Jp;
    if (tp < pbest) pbest = tp;
    rc = v->run(&w, v->mode, u0, grad, &r);
    if (o->verbose)
      fprintf(stderr, "%-16s rep %d: primal %.2f ms, record %.2f ms (reset %.2f ms), reverse %.2f ms\n", v->name, rep,
              1e3 * tp, 1e3 * r.record_s, 1e3 * r.reset_s, 1e3 * r.reverse_s);
    if (rep == 0) {
      best = r;
      s->cold_record_s = r.record_s;
      s->cold_reverse_s = r.reverse_s;
    } else {
      /* Keep the minimum of each phase and the values of the latest run. */
      double rec = best.record_s < r.record_s ? best.record_s : r.record_s;
      double rev = best.reverse_s < r.reverse_s ? best.reverse_s : r.reverse_s;
      /* The first repetition has nothing to forget, so its reset says nothing. */
      double res = rep > 1 && best.reset_s < r.reset_s ? best.reset_s : r.reset_s;
      best = r;
      best.record_s = rec;
      best.reverse_s = rev;
      best.reset_s = res;
    }
    if (rc != 0) break;
  }
  s->r = best;
  s->r.rc = rc;
  s->primal_s = pbest;
  /* A new tape, the first destroyed: what a process that records tapes one
   * after another pays, its memory kept by the library (ad_memory_cache_limit).
   * Its gradient is the one checked. */
  s->new_record_s = s->new_reverse_s = NAN;
  if (v->context == 1 && v->gradient && rc == 0) {
    heat_ariadne_destroy(w.ad);
    if (!(w.ad = heat_ariadne_create(o->n))) goto nomem;
    rc = v->run(&w, v->mode, u0, grad, &r);
    s->new_record_s = r.record_s;
    s->new_reverse_s = r.reverse_s;
    s->r.rc = rc;
    if (rc != 0) snprintf(s->r.msg, sizeof s->r.msg, "%s", r.msg);
  }

  if (v->context == 1) heat_ariadne_destroy(w.ad);
  if (v->context == 2) heat_passive_destroy(w.ad);
  free(w.a);
  free(w.b);
  free(w.states);
  free(w.ubar);
  free(w.vbar);
  s->rss_peak_mb = bench_maxrss_mb();
  s->done = 1;
  return rc;
nomem:
  memset(&s->r, 0, sizeof s->r);
  s->r.rc = ENOMEM;
  snprintf(s->r.msg, sizeof s->r.msg, "out of memory setting up the variant");
  s->done = 1;
  return ENOMEM;
}

/* ------------------------------------------------------------------------ */
/* Checks and output                                                         */
/* ------------------------------------------------------------------------ */

typedef struct check {
  double J_err;    /* |J - J_primal| / |J_primal| */
  double grad_err; /* max_k |g_k - g_hand_k| / max_k |g_hand_k| */
  double g1, g2;   /* dJ/du0[n + 1], dJ/du0[n*n/2 + n/2] */
  int ref;         /* the published values apply (default size) */
  double ref_J_err, ref_g1_err, ref_g2_err;
  int ok;
} check;

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 0.0 ? fabs(b) : 1.0); }

static void json_num(const char *key, double x, int last) {
  bench_json_num(key, x);
  if (!last) putchar(',');
}

static void json_str(const char *key, const char *str) {
  bench_json_str(key, str);
  putchar(',');
}

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--N n] [--T steps] [--reps r] [--only v1,v2,...] [--no-fork] [--verbose]\n"
          "  --N      grid size (default 128)\n"
          "  --T      time steps (default 100)\n"
          "  --reps   repetitions per variant; the minimum time is reported (default 5)\n"
          "  --only   run only these variants (primal and hand always run, they are the references)\n"
          "  --no-fork  run the variants in this process (for profilers); peak RSS is then cumulative\n"
          "  --verbose  print the times of every repetition to stderr\n",
          prog);
}

int main(int argc, char **argv) {
  options o = {REF_N, REF_T, 5, 1, 0, NULL};
  for (int a = 1; a < argc; a++) {
    const char *arg;
    if (bench_option(&o, argc, argv, &a, &arg)) continue;
    usage(argv[0]);
    return !strcmp(arg, "help") || !strcmp(arg, "h") ? 0 : 2;
  }
  if (!bench_options_valid(&o, "heat")) return 2;
  size_t nn = (size_t)o.n * (size_t)o.n;
  double cells = (double)(o.n - 2) * (double)(o.n - 2) * (double)o.steps;
  size_t i1 = (size_t)o.n + 1, i2 = nn / 2 + (size_t)o.n / 2;

  /* Shared with the variants' processes, which write their slot and gradient. */
  double *u0 = heat_initial(nn), *grads = NULL;
  size_t shared_bytes = 0;
  slot *slots = bench_shared("heat", sizeof(slot), NVAR, nn, &grads, &shared_bytes);
  if (!u0 || !slots) return 1;

  for (int v = 0; v < NVAR; v++) {
    slot *s = &slots[v];
    memset(s, 0, sizeof *s);
    s->selected = v < 2 || bench_selected(&o, variants[v].name);
    if (!s->selected || !variants[v].run) continue;
    pid_t pid = bench_spawn("heat", o.fork);
    if (pid < 0) return 1;
    if (pid == 0) {
      measure(&o, &variants[v], u0, grads + (size_t)v * nn, s);
      bench_child_exit(o.fork);
    }
    if (bench_reap(pid, &s->done, s->r.msg, sizeof s->r.msg)) s->r.rc = -1;
  }

  /* Checks against the primal value, the hand gradient and the references. */
  const double Jp = slots[0].r.J;
  const double *gh = grads + 1 * nn;
  double ghmax = 0.0;
  for (size_t k = 0; k < nn; k++) ghmax = fmax(ghmax, fabs(gh[k]));
  int ref = o.n == REF_N && o.steps == REF_T;
  check chk[NVAR];
  int all_ok = 1;
  for (int v = 0; v < NVAR; v++) {
    check *c = &chk[v];
    const slot *s = &slots[v];
    memset(c, 0, sizeof *c);
    c->g1 = c->g2 = NAN;
    c->ref_g1_err = c->ref_g2_err = NAN;
    if (!s->selected || !variants[v].run) continue;
    c->ok = s->done && s->r.rc == 0 && s->r.in_memory;
    c->J_err = rel(s->r.J, Jp);
    c->ok &= c->J_err <= TOL_J;
    c->ref = ref;
    if (ref) {
      c->ref_J_err = rel(s->r.J, REF_J);
      c->ok &= c->ref_J_err <= TOL_REF;
    }
    if (variants[v].gradient) {
      const double *g = grads + (size_t)v * nn;
      double e = 0.0;
      for (size_t k = 0; k < nn; k++) e = fmax(e, fabs(g[k] - gh[k]));
      c->grad_err = ghmax > 0.0 ? e / ghmax : e;
      if (!(c->grad_err <= TOL_GRAD)) c->ok = 0; /* NaN fails too */
      c->g1 = g[i1];
      c->g2 = g[i2];
      if (ref) {
        c->ref_g1_err = rel(c->g1, REF_G1);
        c->ref_g2_err = rel(c->g2, REF_G2);
        c->ok &= c->ref_g1_err <= TOL_REF && c->ref_g2_err <= TOL_REF;
      }
    }
    all_ok &= c->ok;
  }
  /* primal and hand always run: without them nothing is checked. */
  all_ok &= chk[0].ok && chk[1].ok;

  /* The table. */
  printf("heat kernel: N=%d T=%d (%.0f cell updates), reps=%d, %s\n", o.n, o.steps, cells, o.reps,
         o.fork ? "one process per variant" : "all variants in one process");
  printf("%-22s %10s %10s %10s %10s %10s %9s %8s %9s %9s %10s %9s  %s\n", "variant", "primal_ms", "record_ms",
         "reverse_ms", "grad_ratio", "cold_ratio", "new_ratio", "vs_adolc", "B/cell", "resv/used", "peakRSS_MB", "ok",
         "J");
  const slot *sa = &slots[NVAR - 1];
  double adolc_t = (sa->done && sa->r.rc == 0) ? sa->r.record_s + sa->r.reverse_s : NAN;
  for (int v = 0; v < NVAR; v++) {
    const slot *s = &slots[v];
    if (!s->selected) continue;
    if (!variants[v].run) {
      printf("%-22s skipped: %s\n", variants[v].name, variants[v].about);
      continue;
    }
    double t = s->r.record_s + s->r.reverse_s;
    char speedup[32] = "-";
    if (variants[v].gradient && isfinite(adolc_t / t)) snprintf(speedup, sizeof speedup, "%.1f", adolc_t / t);
    char resv[32] = "-";
    if (s->r.reserved_bytes > 0 && s->r.tape_bytes > 0)
      snprintf(resv, sizeof resv, "%.2f", s->r.reserved_bytes / s->r.tape_bytes);
    char fresh[32] = "-";
    if (isfinite(s->new_record_s))
      snprintf(fresh, sizeof fresh, "%.2f", (s->new_record_s + s->new_reverse_s) / s->primal_s);
    printf("%-22s %10.2f %10.2f %10.2f %10.2f %10.2f %9s %8s %9.1f %9s %10.1f %9s  %.12g%s%s\n", variants[v].name,
           1e3 * s->primal_s, 1e3 * s->r.record_s, 1e3 * s->r.reverse_s, t / s->primal_s,
           (s->cold_record_s + s->cold_reverse_s) / s->primal_s, fresh, speedup, s->r.tape_bytes / cells, resv,
           s->rss_peak_mb - s->rss_start_mb, chk[v].ok ? "yes" : "NO", s->r.J, s->r.msg[0] ? "  " : "", s->r.msg);
  }
  if (ref)
    printf("reference (N=128, T=100): J=%.12g dJ/du0[N+1]=%.12g dJ/du0[N*N/2+N/2]=%.12g\n", REF_J, REF_G1, REF_G2);

  /* One JSON object per line and variant. */
  for (int v = 0; v < NVAR; v++) {
    const slot *s = &slots[v];
    const check *c = &chk[v];
    if (!s->selected) continue;
    if (!variants[v].run) {
      printf("{\"variant\":\"%s\",\"N\":%d,\"T\":%d,\"skipped\":true,\"reason\":\"%s\",\"ok\":true}\n",
             variants[v].name, o.n, o.steps, variants[v].about);
      continue;
    }
    double t = s->r.record_s + s->r.reverse_s;
    printf("{\"variant\":\"%s\",\"N\":%d,\"T\":%d,\"reps\":%d,\"skipped\":false,", variants[v].name, o.n, o.steps,
           o.reps);
    json_num("J", s->r.J, 0);
    json_num("primal_s", s->primal_s, 0);
    json_num("record_s", s->r.record_s, 0);
    json_num("reset_s", s->r.reset_s, 0);
    json_num("reverse_s", s->r.reverse_s, 0);
    json_num("cold_record_s", s->cold_record_s, 0);
    json_num("cold_reverse_s", s->cold_reverse_s, 0);
    json_num("gradient_ratio", t / s->primal_s, 0);
    json_num("cold_gradient_ratio", (s->cold_record_s + s->cold_reverse_s) / s->primal_s, 0);
    json_num("new_tape_gradient_ratio", (s->new_record_s + s->new_reverse_s) / s->primal_s, 0);
    json_num("bytes_reserved", s->r.reserved_bytes, 0);
    json_num("speedup_vs_adolc", variants[v].gradient ? adolc_t / t : NAN, 0);
    json_num("tape_bytes", s->r.tape_bytes, 0);
    json_num("bytes_per_cell", s->r.tape_bytes / cells, 0);
    json_num("statements", s->r.statements, 0);
    json_num("arguments", s->r.arguments, 0);
    json_num("extra_bytes", s->r.extra_bytes, 0);
    json_num("peak_rss_mb", s->rss_peak_mb - s->rss_start_mb, 0);
    json_num("rss_at_start_mb", s->rss_start_mb, 0);
    printf("\"in_memory\":%s,", s->r.in_memory ? "true" : "false");
    json_num("J_rel_err_vs_primal", c->J_err, 0);
    if (variants[v].gradient) {
      json_num("grad_rel_err_vs_hand", c->grad_err, 0);
      json_num("dJdu0_N_plus_1", c->g1, 0);
      json_num("dJdu0_center", c->g2, 0);
    }
    if (c->ref) {
      json_num("J_rel_err_vs_ref", c->ref_J_err, 0);
      if (variants[v].gradient) {
        json_num("g1_rel_err_vs_ref", c->ref_g1_err, 0);
        json_num("g2_rel_err_vs_ref", c->ref_g2_err, 0);
      }
    }
    json_str("message", s->r.msg);
    printf("\"ok\":%s}\n", c->ok ? "true" : "false");
  }
  fflush(stdout);
  if (!all_ok) fprintf(stderr, "heat: a check failed (see the ok column)\n");
  munmap(slots, shared_bytes);
  free(u0);
  return all_ok ? 0 : 1;
}
