/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_heat_ckpt: the reference heat kernel over a long run
 * (T = 2000 by default), its gradient taken with checkpointing (see the
 * "Checkpointing" section of README.md beside this file).
 *
 * The step function (heat_ckpt_step.c) advances the whole N x N state by one
 * explicit step, each cell update one ad_custom statement (as the
 * ariadne_custom variant of ariadne_bench_heat), and ad_checkpoint_loop runs
 * the T steps:
 *
 *   primal          plain double: the denominator of every gradient ratio
 *   hand            hand-written adjoint, every state stored: the reference gradient
 *   taped           the same step function on one tape, no checkpointing
 *   binomial s=K    AD_CKPT_BINOMIAL with K snapshots (K = 2, 5, 10, 50)
 *   store_all       AD_CKPT_STORE_ALL: every state kept, nothing recomputed
 *   multistage      AD_CKPT_MULTISTAGE: 20 states on disk, 10 in memory
 *   online s=10     AD_CKPT_ONLINE: the loop length found by running
 *   ..._twin        the same schedules with the passive twin: the step's source
 *                   (heat_ckpt_step.c) compiled again with ARIADNE_PASSIVE runs
 *                   every step that is not recorded, on double values
 *   binomial_s10_plain[_twin]  binomial s=10 with the step as written without
 *                   its value-only path for unrecorded steps, without and
 *                   with the twin
 *   adolc           ADOL-C, the whole tape in memory, where memory allows
 *   adolc_ckpt_s10  ADOL-C's own checkpointing with 10 checkpoints
 *
 * Each variant runs in a forked child, so that its peak resident memory is
 * its own; each repetition there times the primal and then the variant, in
 * wall-clock and in processor time, and the minimum of each phase is kept,
 * because the machines it runs on are shared. Checkpointed gradients are
 * expected to equal the fully taped one bit for bit (the same statements are
 * swept in the same order); the program reports the largest relative
 * difference and exits non-zero if any J or gradient disagrees, or a
 * binomial run's number of recomputed steps is not ad_revolve_optimum's.
 */
#define _DEFAULT_SOURCE
#include <ariadne_checkpoint.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "heat_ckpt_step.h"

#ifdef HEAT_HAVE_ADOLC
/* heat_adolc_ckpt.cpp: the kernel with ADOL-C's checkpointing, `snaps` snapshots. */
int heat_adolc_ckpt_run(int n, int steps, int snaps, const char *dir, const double *u0, double *grad, heat_result *out);
#endif

#define TOL_J 1e-12
#define TOL_GRAD 1e-10

/* Memory estimates per cell update, to decide whether a variant that keeps
 * its whole tape fits: Ariadne's one-statement cell is 61 bytes of tape and
 * 8 of adjoint; ADOL-C's tape and taylors are 336 bytes (both measured by
 * ariadne_bench_heat at N = 128, T = 100). */
#define TAPED_BYTES_PER_CELL 70.0
#define ADOLC_BYTES_PER_CELL 336.0

/* ------------------------------------------------------------------------ */
/* Variants                                                                  */
/* ------------------------------------------------------------------------ */

enum kind { K_PRIMAL, K_HAND, K_TAPED, K_CKPT, K_ADOLC, K_ADOLC_CKPT };

typedef struct variant {
  const char *name;
  enum kind kind;
  ad_ckpt_schedule schedule;
  int snapshots, disk;
  int twin;  /* checkpointing: the passive twin heat_step_passive runs the passive steps */
  int plain; /* checkpointing: the step without its value-only path (stepper.plain) */
} variant;

static const variant variants[] = {
    {"primal", K_PRIMAL, 0, 0, 0, 0, 0},
    {"hand", K_HAND, 0, 0, 0, 0, 0},
    {"taped", K_TAPED, 0, 0, 0, 0, 0},
    {"binomial_s2", K_CKPT, AD_CKPT_BINOMIAL, 2, 0, 0, 0},
    {"binomial_s5", K_CKPT, AD_CKPT_BINOMIAL, 5, 0, 0, 0},
    {"binomial_s10", K_CKPT, AD_CKPT_BINOMIAL, 10, 0, 0, 0},
    {"binomial_s50", K_CKPT, AD_CKPT_BINOMIAL, 50, 0, 0, 0},
    {"store_all", K_CKPT, AD_CKPT_STORE_ALL, 0, 0, 0, 0},
    {"multistage_s10_d20", K_CKPT, AD_CKPT_MULTISTAGE, 10, 20, 0, 0},
    {"online_s10", K_CKPT, AD_CKPT_ONLINE, 10, 0, 0, 0},
    {"binomial_s10_twin", K_CKPT, AD_CKPT_BINOMIAL, 10, 0, 1, 0},
    {"binomial_s10_plain", K_CKPT, AD_CKPT_BINOMIAL, 10, 0, 0, 1},
    {"binomial_s10_plain_twin", K_CKPT, AD_CKPT_BINOMIAL, 10, 0, 1, 1},
    {"binomial_s50_twin", K_CKPT, AD_CKPT_BINOMIAL, 50, 0, 1, 0},
    {"store_all_twin", K_CKPT, AD_CKPT_STORE_ALL, 0, 0, 1, 0},
    {"multistage_s10_d20_twin", K_CKPT, AD_CKPT_MULTISTAGE, 10, 20, 1, 0},
    {"online_s10_twin", K_CKPT, AD_CKPT_ONLINE, 10, 0, 1, 0},
    {"adolc", K_ADOLC, 0, 0, 0, 0, 0},
    {"adolc_ckpt_s10", K_ADOLC_CKPT, AD_CKPT_BINOMIAL, 10, 0, 0, 0},
};
#define NVAR ((int)(sizeof variants / sizeof variants[0]))

/* What a variant's child hands back through shared memory. */
typedef struct slot {
  int done, selected, skipped, rc;
  char msg[240];
  double J;
  double primal_s, record_s, reverse_s; /* wall-clock, minimum over the repetitions */
  double primal_cpu_s, grad_cpu_s;      /* processor time of the primal and of record + reverse, minimum */
  double cold_record_s, cold_reverse_s; /* the first repetition */
  double rss_start_mb, rss_peak_mb;
  double outer_bytes;   /* bytes_used of the recording tape without the checkpoint record (or ADOL-C's
                           tape and taylors, or the hand adjoint's stored states) */
  double record_bytes;  /* checkpointing: the record's data in bytes_used (its snapshots at the time) */
  double scratch_bytes; /* checkpointing: the scratch tape's memory at its peak */
  double snapshot_bytes;
  double adjoint_bytes; /* the recording tape's adjoint vector */
  ad_ckpt_stats ck;
  int in_memory;
} slot;

typedef struct options {
  bench_options b; /* grid, steps, repetitions, variants, process per variant */
  double mem_limit_gb;
  const char *dir;
} options;

/* The Ariadne context of one variant: the tape, kept between repetitions as
 * a program that takes many gradients keeps it, and the arrays. */
typedef struct actx {
  ad_tape *tape;
  ad_real *x, *u;
  stepper st;
  ad_ckpt_stats ck;
} actx;

/* Record and sweep one Ariadne variant once. */
static int run_ariadne(const options *o, const variant *v, actx *a, const double *u0, double *grad, slot *s,
                       double *record_s, double *reverse_s) {
  int n = o->b.n;
  size_t nn = (size_t)n * (size_t)n;
  double t0 = bench_now();
  ad_tape_reset(a->tape);
  ad_tape_begin(a->tape);
  for (size_t k = 0; k < nn; k++) a->x[k] = a->u[k] = ad_input(u0[k]);
  int rc = AD_OK;
  double rec_bytes = 0.0;
  a->st.last = -1;
  if (v->kind == K_TAPED) {
    for (int64_t i = 0; i < o->b.steps; i++) {
      size_t ns = nn, pb = 0;
      heat_step(&a->st, i, &ns, a->u, &pb, NULL);
    }
  } else {
    ad_ckpt_options co;
    ad_ckpt_options_default(&co);
    co.schedule = v->schedule;
    co.steps = o->b.steps;
    co.snapshots = v->snapshots;
    co.disk_snapshots = v->disk;
    co.dir = o->dir;
    co.stats = &a->ck;
    if (v->twin) co.step_passive = heat_step_passive;
    a->st.plain = v->plain;
    if (v->schedule == AD_CKPT_ONLINE) a->st.last = o->b.steps - 1;
    ad_stats before, after;
    ad_tape_stats(a->tape, &before);
    rc = ad_checkpoint_loop(&co, heat_step, &a->st, nn, a->u, 0, NULL);
    ad_tape_stats(a->tape, &after);
    /* The loop adds one record and one statement (of one byte, without
     * arguments) per output. Ariadne counts the record's data, snapshots
     * included, in bytes_used; keep it apart so that the tape column holds
     * the tape and the snapshot column the snapshots. */
    rec_bytes = (double)(after.bytes_used - before.bytes_used) - (double)(after.statements - before.statements);
  }
  ad_real J = ad_dot(nn, a->u, a->u);
  ad_tape_end(a->tape);
  double t1 = bench_now();
  s->J = ad_value(J);
  if (rc == AD_OK) rc = ad_gradient(a->tape, J, nn, a->x, grad);
  double t2 = bench_now();
  *record_s = t1 - t0;
  *reverse_s = t2 - t1;
  if (rc != AD_OK) {
    snprintf(s->msg, sizeof s->msg, "%s: %s", ad_errname(rc), ad_tape_error_message(a->tape));
    return rc;
  }
  ad_stats st;
  ad_tape_stats(a->tape, &st);
  s->outer_bytes = (double)st.bytes_used - rec_bytes;
  s->record_bytes = rec_bytes;
  s->adjoint_bytes = (double)st.bytes_adjoints;
  if (v->kind == K_CKPT) {
    s->ck = a->ck;
    s->scratch_bytes = (double)a->ck.scratch_bytes;
    s->snapshot_bytes = (double)a->ck.snapshot_bytes;
  }
  return AD_OK;
}

/* Run variant v `reps` times, each repetition timing the primal first. */
static void measure(const options *o, const variant *v, const double *u0, double *grad, slot *s) {
  int n = o->b.n;
  size_t nn = (size_t)n * (size_t)n;
  s->rss_start_mb = bench_maxrss_mb();
  s->in_memory = 1;
  double *a = malloc(nn * sizeof(double)), *b = malloc(nn * sizeof(double));
  double *states = NULL, *ubar = NULL, *vbar = NULL;
  actx ac;
  memset(&ac, 0, sizeof ac);
  int rc = a && b ? 0 : ENOMEM;
  if (!rc && v->kind == K_HAND) {
    states = malloc((size_t)(o->b.steps + 1) * nn * sizeof(double));
    ubar = malloc(nn * sizeof(double));
    vbar = malloc(nn * sizeof(double));
    if (!states || !ubar || !vbar) rc = ENOMEM;
  }
  if (!rc && (v->kind == K_TAPED || v->kind == K_CKPT)) {
    ac.tape = ad_tape_create();
    ac.x = malloc(nn * sizeof(ad_real));
    ac.u = malloc(nn * sizeof(ad_real));
    ac.st.n = n;
    ac.st.v = malloc(nn * sizeof(ad_real));
    if (!ac.tape || !ac.x || !ac.u || !ac.st.v) rc = ENOMEM;
  }
  if (rc) snprintf(s->msg, sizeof s->msg, "out of memory setting up the variant");
  for (int rep = 0; rep < o->b.reps && !rc; rep++) {
    double t0 = bench_now(), c0 = bench_cpu_now();
    double Jp = heat_primal(n, o->b.steps, u0, a, b);
    double tp = bench_now() - t0, cp = bench_cpu_now() - c0, rec = 0.0, rev = 0.0;
    c0 = bench_cpu_now();
    switch (v->kind) {
    case K_PRIMAL:
      s->J = Jp;
      rec = tp;
      break;
    case K_HAND: {
      double t1 = bench_now();
      s->J = heat_hand_forward(n, o->b.steps, u0, states);
      double t2 = bench_now();
      heat_hand_reverse(n, o->b.steps, states, ubar, vbar, grad);
      rec = t2 - t1;
      rev = bench_now() - t2;
      s->outer_bytes = (double)(o->b.steps + 1) * (double)nn * sizeof(double);
      break;
    }
    case K_TAPED:
    case K_CKPT:
      rc = run_ariadne(o, v, &ac, u0, grad, s, &rec, &rev);
      break;
    case K_ADOLC:
    case K_ADOLC_CKPT: {
#ifdef HEAT_HAVE_ADOLC
      heat_result hr;
      rc = v->kind == K_ADOLC ? heat_adolc_run(n, o->b.steps, u0, grad, &hr)
                              : heat_adolc_ckpt_run(n, o->b.steps, v->snapshots, o->dir, u0, grad, &hr);
      if (v->kind == K_ADOLC_CKPT) s->snapshot_bytes = hr.extra_bytes;
      s->J = hr.J;
      rec = hr.record_s;
      rev = hr.reverse_s;
      s->outer_bytes = hr.tape_bytes;
      s->in_memory = hr.in_memory;
      if (hr.msg[0])
        snprintf(s->msg, sizeof s->msg, "%s", hr.msg);
      else if (!hr.in_memory)
        snprintf(s->msg, sizeof s->msg, "ADOL-C wrote its step tape to a file");
#endif
      break;
    }
    }
    double cv = v->kind == K_PRIMAL ? cp : bench_cpu_now() - c0;
    if (o->b.verbose)
      fprintf(stderr, "%-23s rep %d: primal %.1f ms (cpu %.1f), record %.1f ms, reverse %.1f ms (cpu %.1f)\n", v->name,
              rep, 1e3 * tp, 1e3 * cp, 1e3 * rec, 1e3 * rev, 1e3 * cv);
    if (rep == 0) {
      s->primal_s = tp;
      s->primal_cpu_s = cp;
      s->grad_cpu_s = cv;
      s->record_s = s->cold_record_s = rec;
      s->reverse_s = s->cold_reverse_s = rev;
    } else {
      s->primal_s = fmin(s->primal_s, tp);
      s->primal_cpu_s = fmin(s->primal_cpu_s, cp);
      s->grad_cpu_s = fmin(s->grad_cpu_s, cv);
      s->record_s = fmin(s->record_s, rec);
      s->reverse_s = fmin(s->reverse_s, rev);
    }
  }
  ad_tape_destroy(ac.tape);
  free(ac.x);
  free(ac.u);
  free(ac.st.v);
  free(a);
  free(b);
  free(states);
  free(ubar);
  free(vbar);
  s->rc = rc;
  s->rss_peak_mb = bench_maxrss_mb();
  s->done = 1;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

static void json_num(const char *key, double x) {
  putchar(',');
  bench_json_num(key, x);
}

static void json_str(const char *key, const char *str) {
  putchar(',');
  bench_json_str(key, str);
}

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--N n] [--T steps] [--reps r] [--only v1,v2] [--mem-limit-gb g] [--dir d]\n"
          "          [--no-fork] [--verbose]\n"
          "  --N      grid size (default 128)\n"
          "  --T      time steps (default 2000)\n"
          "  --reps   repetitions per variant; the minimum time is reported (default 3)\n"
          "  --only   run only these variants (primal and hand always run: they are the references)\n"
          "  --mem-limit-gb  skip a variant that keeps its whole tape if its estimated memory\n"
          "           exceeds this many GB (default 8)\n"
          "  --dir    where the multistage variant makes its temporary directory (default $TMPDIR or /tmp)\n"
          "  --no-fork  run the variants in this process (for profilers); peak RSS is then cumulative\n"
          "  --verbose  print the times of every repetition to stderr\n",
          prog);
}

int main(int argc, char **argv) {
  options o = {{128, 2000, 3, 1, 0, NULL}, 8.0, NULL};
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  for (int a = 1; a < argc; a++) {
    const char *arg;
    if (bench_option(&o.b, argc, argv, &a, &arg))
      continue;
    else if (a + 1 < argc && !strcmp(arg, "mem-limit-gb"))
      o.mem_limit_gb = atof(argv[++a]);
    else if (a + 1 < argc && !strcmp(arg, "dir"))
      base = argv[++a];
    else {
      usage(argv[0]);
      return !strcmp(arg, "help") || !strcmp(arg, "h") ? 0 : 2;
    }
  }
  if (!bench_options_valid(&o.b, "heat_ckpt")) return 2;
  size_t nn = (size_t)o.b.n * (size_t)o.b.n;
  double cells = (double)(o.b.n - 2) * (double)(o.b.n - 2) * (double)o.b.steps;

  /* The multistage variant's snapshot files go to a fresh directory. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/ariadne-heat-ckpt-XXXXXX", base);
  if (!mkdtemp(dir)) {
    fprintf(stderr, "heat_ckpt: cannot make a directory under %s: %s\n", base, strerror(errno));
    return 1;
  }
  o.dir = dir;

  /* Shared with the variants' processes, which write their slot and gradient. */
  double *u0 = heat_initial(nn), *grads = NULL;
  size_t shared_bytes = 0;
  slot *slots = bench_shared("heat_ckpt", sizeof(slot), NVAR, nn, &grads, &shared_bytes);
  if (!u0 || !slots) return 1;

  for (int v = 0; v < NVAR; v++) {
    slot *s = &slots[v];
    const variant *va = &variants[v];
    memset(s, 0, sizeof *s);
    s->selected = v < 2 || bench_selected(&o.b, va->name);
    if (!s->selected) continue;
    /* Variants that keep every cell's record in memory run only where it fits. */
    double est = va->kind == K_TAPED   ? TAPED_BYTES_PER_CELL * cells
                 : va->kind == K_ADOLC ? ADOLC_BYTES_PER_CELL * cells
                                       : 0.0;
    if (est > o.mem_limit_gb * 1e9) {
      s->skipped = 1;
      snprintf(s->msg, sizeof s->msg, "skipped: its tape would take about %.1f GB (limit %.1f GB, --mem-limit-gb)",
               est / 1e9, o.mem_limit_gb);
      continue;
    }
#ifndef HEAT_HAVE_ADOLC
    if (va->kind == K_ADOLC || va->kind == K_ADOLC_CKPT) {
      s->skipped = 1;
      snprintf(s->msg, sizeof s->msg, "skipped: ADOL-C was not found when the benchmark was configured");
      continue;
    }
#endif
    pid_t pid = bench_spawn("heat_ckpt", o.b.fork);
    if (pid < 0) return 1;
    if (pid == 0) {
      measure(&o, va, u0, grads + (size_t)v * nn, s);
      bench_child_exit(o.b.fork);
    }
    if (bench_reap(pid, &s->done, s->msg, sizeof s->msg)) s->rc = -1;
  }
  /* The multistage files are gone with their tape; ADOL-C may leave tape
   * files behind in the directory (its processes end without cleaning up). */
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char fn[4400];
    snprintf(fn, sizeof fn, "%s/%s", dir, e->d_name);
    remove(fn);
  }
  if (d) closedir(d);
  rmdir(dir);

  /* Checks: J against the primal; gradients against the fully taped run
   * (expected bit for bit) where it ran, and against the hand adjoint. */
  const double Jp = slots[0].J;
  const double *gh = grads + 1 * nn, *gt = grads + 2 * nn;
  int have_taped = slots[2].selected && !slots[2].skipped && slots[2].done && slots[2].rc == 0;
  double ghmax = 0.0;
  for (size_t k = 0; k < nn; k++) ghmax = fmax(ghmax, fabs(gh[k]));
  double err_hand[NVAR], err_taped[NVAR];
  int ok[NVAR], all_ok = 1;
  for (int v = 0; v < NVAR; v++) {
    const slot *s = &slots[v];
    const variant *va = &variants[v];
    err_hand[v] = err_taped[v] = NAN;
    ok[v] = 1;
    if (!s->selected || s->skipped) continue;
    ok[v] = s->done && s->rc == 0 && s->in_memory && fabs(s->J - Jp) <= TOL_J * fabs(Jp);
    if (va->kind != K_PRIMAL) {
      const double *g = grads + (size_t)v * nn;
      double eh = 0.0, et = 0.0;
      for (size_t k = 0; k < nn; k++) {
        eh = fmax(eh, fabs(g[k] - gh[k]));
        if (have_taped) et = fmax(et, fabs(g[k] - gt[k]));
      }
      err_hand[v] = eh / ghmax;
      if (!(err_hand[v] <= TOL_GRAD)) ok[v] = 0; /* NaN fails too */
      if (have_taped && va->kind != K_HAND) {
        err_taped[v] = et / ghmax;
        if (!(err_taped[v] <= TOL_GRAD)) ok[v] = 0;
      }
    }
    if (va->kind == K_CKPT && s->rc == 0) {
      int64_t want = va->schedule == AD_CKPT_BINOMIAL    ? ad_revolve_optimum(o.b.steps, va->snapshots)
                     : va->schedule == AD_CKPT_STORE_ALL ? o.b.steps - 1
                                                         : -1;
      if (want >= 0 && s->ck.advances != want) ok[v] = 0;
      if (s->ck.taped != o.b.steps) ok[v] = 0;
    }
    all_ok &= ok[v];
  }
  all_ok &= ok[0] && ok[1] && slots[0].done && slots[1].done;

  printf("heat kernel with checkpointing: N=%d T=%d (%.0f cell updates), reps=%d, %s\n", o.b.n, o.b.steps, cells, o.b.reps,
         o.b.fork ? "one process per variant" : "all variants in one process");
  printf("%-23s %10s %9s %9s %9s %9s %9s %9s %9s %9s %9s %10s %10s %4s\n", "variant", "peakRSS_MB", "tape_MB",
         "snap_MB", "advances", "optimum", "primal_ms", "record_ms", "rev_ms", "wall_ratio", "cpu_ratio", "rel_vs_tape",
         "rel_vs_hand", "ok");
  for (int v = 0; v < NVAR; v++) {
    const slot *s = &slots[v];
    const variant *va = &variants[v];
    if (!s->selected) continue;
    if (s->skipped) {
      printf("%-23s %s\n", va->name, s->msg);
      continue;
    }
    double t = s->record_s + s->reverse_s;
    double tape = s->outer_bytes + s->scratch_bytes, snap = s->snapshot_bytes;
    char adv[24] = "-", opt[24] = "-", eh[24] = "-", et[24] = "-";
    if (va->kind == K_CKPT) {
      snprintf(adv, sizeof adv, "%lld", (long long)s->ck.advances);
      int64_t want = va->schedule == AD_CKPT_BINOMIAL    ? ad_revolve_optimum(o.b.steps, va->snapshots)
                     : va->schedule == AD_CKPT_STORE_ALL ? o.b.steps - 1
                                                         : -1;
      if (want >= 0) snprintf(opt, sizeof opt, "%lld", (long long)want);
    }
    if (isfinite(err_taped[v])) snprintf(et, sizeof et, err_taped[v] == 0.0 ? "0 (bits)" : "%.1e", err_taped[v]);
    if (isfinite(err_hand[v])) snprintf(eh, sizeof eh, "%.1e", err_hand[v]);
    printf("%-23s %10.1f %9.2f %9.2f %9s %9s %9.1f %9.1f %9.1f %9.2f %9.2f %10s %10s %4s%s%s\n", va->name,
           s->rss_peak_mb - s->rss_start_mb, tape / 1e6, snap / 1e6, adv, opt, 1e3 * s->primal_s, 1e3 * s->record_s,
           1e3 * s->reverse_s, va->kind == K_PRIMAL ? 1.0 : t / s->primal_s, s->grad_cpu_s / s->primal_cpu_s, et, eh,
           ok[v] ? "yes" : "NO", s->msg[0] ? "  " : "", s->msg);
  }

  for (int v = 0; v < NVAR; v++) {
    const slot *s = &slots[v];
    const variant *va = &variants[v];
    if (!s->selected) continue;
    printf("{\"variant\":\"%s\",\"N\":%d,\"T\":%d,\"reps\":%d,\"skipped\":%s", va->name, o.b.n, o.b.steps, o.b.reps,
           s->skipped ? "true" : "false");
    if (va->kind == K_CKPT) {
      printf(",\"schedule\":\"%s\"", va->schedule == AD_CKPT_BINOMIAL     ? "binomial"
                                     : va->schedule == AD_CKPT_STORE_ALL  ? "store_all"
                                     : va->schedule == AD_CKPT_MULTISTAGE ? "multistage"
                                                                          : "online");
      printf(",\"snapshots\":%d,\"disk_snapshots\":%d,\"twin\":%s,\"plain_step\":%s", va->snapshots, va->disk,
             va->twin ? "true" : "false", va->plain ? "true" : "false");
    }
    if (!s->skipped) {
      double t = s->record_s + s->reverse_s;
      json_num("J", s->J);
      json_num("primal_s", s->primal_s);
      json_num("record_s", s->record_s);
      json_num("reverse_s", s->reverse_s);
      json_num("cold_record_s", s->cold_record_s);
      json_num("cold_reverse_s", s->cold_reverse_s);
      json_num("gradient_ratio", va->kind == K_PRIMAL ? 1.0 : t / s->primal_s);
      json_num("primal_cpu_s", s->primal_cpu_s);
      json_num("grad_cpu_s", s->grad_cpu_s);
      json_num("gradient_ratio_cpu", s->grad_cpu_s / s->primal_cpu_s);
      json_num("peak_rss_mb", s->rss_peak_mb - s->rss_start_mb);
      json_num("outer_tape_bytes", s->outer_bytes);
      json_num("adjoint_bytes", s->adjoint_bytes);
      if (va->kind == K_CKPT) {
        int64_t want = va->schedule == AD_CKPT_BINOMIAL ? ad_revolve_optimum(o.b.steps, va->snapshots) : -1;
        json_num("scratch_tape_bytes", s->scratch_bytes);
        json_num("record_bytes", s->record_bytes);
        json_num("tape_bytes", s->outer_bytes + s->scratch_bytes);
        json_num("snapshot_bytes", s->snapshot_bytes);
        json_num("advances", (double)s->ck.advances);
        json_num("revolve_optimum", want >= 0 ? (double)want : NAN);
        json_num("taped_steps", (double)s->ck.taped);
        json_num("stores", (double)s->ck.stores);
        json_num("restores", (double)s->ck.restores);
        json_num("disk_writes", (double)s->ck.disk_writes);
        json_num("disk_reads", (double)s->ck.disk_reads);
      } else {
        json_num("tape_bytes", s->outer_bytes);
      }
      json_num("grad_rel_err_vs_taped", err_taped[v]);
      json_num("grad_rel_err_vs_hand", err_hand[v]);
      json_num("J_rel_err_vs_primal", fabs(s->J - Jp) / fabs(Jp));
    }
    json_str("message", s->msg);
    printf(",\"ok\":%s}\n", ok[v] ? "true" : "false");
  }
  fflush(stdout);
  if (!all_ok) fprintf(stderr, "heat_ckpt: a check failed (see the ok column)\n");
  munmap(slots, shared_bytes);
  free(u0);
  return all_ok ? 0 : 1;
}
