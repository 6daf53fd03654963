/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpointed time loops: the binomial schedule against the closed-form
 * optimum and a simulation of its actions; checkpointed gradients against
 * the fully taped loop (bit for bit: the same operations in the same order)
 * and the tangent sweep; every schedule; and the error paths. */
#define _POSIX_C_SOURCE 200809L
#include <ariadne_checkpoint.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_case.h"

/* ------------------------------------------------------------------------ */
/* The schedule                                                              */
/* ------------------------------------------------------------------------ */

/* t(l, s) computed here independently: the recursion T(l,s) = min_m m +
 * T(l-m, s-1) + T(m, s), T(1, s) = 0, T(l, 1) = l(l-1)/2, for small sizes. */
static int64_t memo[200][8];
static int64_t T_rec(int64_t l, int s) {
  if (l <= 1) return 0;
  if (s == 1) return l * (l - 1) / 2;
  if (memo[l][s]) return memo[l][s] - 1;
  int64_t best = INT64_MAX;
  for (int64_t m = 1; m < l; m++) {
    int64_t v = m + T_rec(l - m, s - 1) + T_rec(m, s);
    if (v < best) best = v;
  }
  memo[l][s] = best + 1;
  return best;
}

/* Run a schedule on "states" that are just step numbers, checking that every
 * action is legal and every step is reversed once, from last to first. */
static int64_t simulate(int64_t l, int s, int save_at) {
  ad_revolve *r = ad_revolve_create(l, s);
  CHECK(r != NULL);
  if (!r) return -1;
  int64_t cur = 0, *slot = calloc((size_t)s, sizeof *slot), next_rev = l - 1, actions = 0;
  int valid = 1, ok = 1;
  for (;;) {
    if (actions == save_at) { /* serialize and continue from the copy */
      size_t sz = ad_revolve_state_size(r);
      void *buf = malloc(sz);
      CHECK_INT(ad_revolve_save(r, buf, sz), AD_OK);
      ad_revolve_destroy(r);
      r = ad_revolve_load(buf, sz);
      CHECK(r != NULL);
      free(buf);
      if (!r) break;
    }
    ad_ckpt_action a = ad_revolve_next(r);
    actions++;
    if (a.op == AD_CKPT_DONE) break;
    switch (a.op) {
    case AD_CKPT_ADVANCE:
      ok &= valid && a.step == cur && a.to > cur && a.to < l;
      cur = a.to;
      break;
    case AD_CKPT_STORE:
      ok &= valid && a.step == cur && a.slot >= 0 && a.slot < s;
      slot[a.slot] = cur;
      break;
    case AD_CKPT_RESTORE:
      ok &= a.slot >= 0 && a.slot < s && slot[a.slot] == a.step;
      cur = a.step;
      valid = 1;
      break;
    case AD_CKPT_REVERSE:
      ok &= valid && a.step == cur && a.step == next_rev;
      next_rev--;
      valid = 0;
      break;
    default:
      ok = 0;
    }
    if (!ok) break;
  }
  CHECK(ok);
  CHECK_INT(next_rev, -1);
  int64_t adv = r ? ad_revolve_advances(r) : -1;
  ad_revolve_destroy(r);
  free(slot);
  return adv;
}

static void test_schedule(void) {
  CHECK_CONTEXT("binomial schedule");
  /* the examples in DESIGN.md */
  CHECK_INT(ad_revolve_optimum(10, 2), 20);
  CHECK_INT(ad_revolve_optimum(100, 10), 222);
  CHECK_INT(ad_revolve_optimum(1000, 10), 3636);
  CHECK_INT(ad_revolve_optimum(10000, 20), 37976);
  CHECK_INT(simulate(10, 2, -1), 20);
  CHECK_INT(simulate(100, 10, -1), 222);
  CHECK_INT(simulate(1000, 10, 37), 3636);
  CHECK_INT(simulate(10000, 20, 5000), 37976);
  for (int s = 1; s < 8; s++)
    for (int64_t l = 1; l < 200; l += (l < 40 ? 1 : 7)) {
      CHECK_CONTEXT("binomial schedule l=%lld s=%d", (long long)l, s);
      int64_t want = T_rec(l, s);
      CHECK_INT(ad_revolve_optimum(l, s), want);
      CHECK_INT(simulate(l, s, (int)(l % 5)), want);
    }
  CHECK_CONTEXT("binomial schedule edge cases");
  CHECK(ad_revolve_create(10, 0) == NULL);
  CHECK(ad_revolve_create(-1, 3) == NULL);
  CHECK_INT(ad_revolve_optimum(10, 0), -1);
  CHECK_INT(simulate(0, 3, -1), 0);
  CHECK_INT(simulate(1, 1, -1), 0);
  char junk[64] = {0};
  CHECK(ad_revolve_load(junk, sizeof junk) == NULL);
  /* a large loop: no overflow, and s >= l needs only the forward run */
  CHECK_INT(ad_revolve_optimum(1000000, 1000000), 1000000 - 1);
  CHECK(ad_revolve_optimum(1000000000000LL, 30) > 0);
}

/* ------------------------------------------------------------------------ */
/* Checkpointed loops                                                        */
/* ------------------------------------------------------------------------ */

#define NS 12 /* state values */

typedef struct stepper {
  int64_t steps;
  int fail_at;     /* step that fails (-1: none) */
  int grow_at;     /* step that changes the state size (-1: none) */
  int64_t calls;
} stepper;

/* A 1-D nonlinear diffusion step with a passive time counter in pstate. */
static int step_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  stepper *s = ud;
  s->calls++;
  if (i == s->fail_at) return -3;
  if (i == s->grow_at) (*n)++;
  double *time = p;
  (void)pb;
  ad_real v[NS];
  for (size_t k = 0; k < *n && k < NS; k++) {
    ad_real l = k > 0 ? u[k - 1] : ad_const(0.3), r = k + 1 < NS ? u[k + 1] : ad_const(-0.2);
    ad_real lap = ad_sub(ad_add(l, r), ad_mul(2.0, u[k]));
    v[k] = ad_add(u[k], ad_mul(0.2, lap));
    v[k] = ad_add(v[k], ad_mul(0.05 * (1.0 + 0.1 * *time), ad_sin(u[k])));
  }
  for (size_t k = 0; k < NS; k++) u[k] = v[k];
  *time += 0.1;
  return 0;
}

static int online_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  stepper *s = ud;
  int rc = step_fn(ud, i, n, u, pb, p);
  return rc == 0 && i == s->steps - 1 ? AD_CKPT_LAST : rc;
}

static double objective_weights(int k) { return 1.0 + 0.25 * k; }

/* Record: inputs, the loop (checkpointed or taped step by step), J. */
/* The gradient of the recording on t is the reference's, bit for bit. */
static void check_gradient(ad_tape *t, ad_real J, const ad_real *x, const double *gref) {
  double g[NS];
  CHECK_INT(ad_gradient(t, J, NS, x, g), AD_OK);
  for (int k = 0; k < NS; k++) CHECK_SAME(g[k], gref[k]);
}

static int run(const ad_ckpt_options *o, stepper *s, ad_tape *t, ad_real *x, ad_real *J, int taped) {
  ad_tape_begin(t);
  ad_real u[NS];
  for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(0.4 + 0.05 * k);
  double time = 0.0;
  int rc = AD_OK;
  if (taped) {
    for (int64_t i = 0; i < s->steps; i++) {
      size_t n = NS, pb = sizeof time;
      step_fn(s, i, &n, u, &pb, &time);
    }
  } else {
    rc = ad_checkpoint_loop(o, o->schedule == AD_CKPT_ONLINE ? online_fn : step_fn, s, NS, u, sizeof time, &time);
  }
  ad_real acc = ad_const(0.0);
  for (int k = 0; k < NS; k++) acc = ad_add(acc, ad_mul(objective_weights(k), ad_mul(u[k], u[k])));
  *J = acc;
  ad_tape_end(t);
  if (rc == AD_OK) CHECK_CLOSE(time, 0.1 * (double)s->steps, 1e-9);
  return rc;
}

static void reference(int64_t steps, double *g, double *J) {
  stepper s = {steps, -1, -1, 0};
  ad_tape *t = ad_tape_create();
  ad_real x[NS], y;
  run(NULL, &s, t, x, &y, 1);
  CHECK_INT(ad_gradient(t, y, NS, x, g), AD_OK);
  *J = ad_value(y);
  ad_tape_destroy(t);
}

static void test_schedules(const char *dir) {
  const int64_t steps = 57;
  double gref[NS], Jref;
  reference(steps, gref, &Jref);
  struct {
    ad_ckpt_schedule sch;
    int snaps, disk;
    const char *name;
  } cases[] = {{AD_CKPT_BINOMIAL, 1, 0, "binomial s=1"},   {AD_CKPT_BINOMIAL, 3, 0, "binomial s=3"},
               {AD_CKPT_BINOMIAL, 10, 0, "binomial s=10"}, {AD_CKPT_BINOMIAL, 100, 0, "binomial s=100"},
               {AD_CKPT_STORE_ALL, 0, 0, "store all"},      {AD_CKPT_MULTISTAGE, 3, 4, "multistage 3+4"},
               {AD_CKPT_MULTISTAGE, 2, 100, "multistage 2+100"}, {AD_CKPT_ONLINE, 2, 0, "online s=2"},
               {AD_CKPT_ONLINE, 5, 0, "online s=5"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    CHECK_CONTEXT("%s", cases[c].name);
    ad_ckpt_options o;
    ad_ckpt_stats st;
    ckpt_case_options(&o, cases[c].sch, steps, cases[c].snaps, cases[c].disk, dir, &st);
    stepper s = {steps, -1, -1, 0};
    ad_tape *t = ad_tape_create();
    ad_real x[NS], J;
    CHECK_INT(run(&o, &s, t, x, &J, 0), AD_OK);
    CHECK_SAME(ad_value(J), Jref);
    ad_stats ts;
    ad_tape_stats(t, &ts);
    CHECK_INT((long long)ts.records, 1);
    /* the outer tape holds no step: inputs, outputs, and J */
    CHECK(ts.statements < 6 * NS);
    double g[NS];
    CHECK_INT(ad_gradient(t, J, NS, x, g), AD_OK);
    for (int k = 0; k < NS; k++) CHECK_SAME(g[k], gref[k]);
    CHECK_INT(st.steps, steps);
    CHECK_INT(st.taped, steps);
    CHECK_INT(st.output_steps, 1);
    if (o.schedule == AD_CKPT_BINOMIAL) CHECK_INT(st.advances, ad_revolve_optimum(steps, o.snapshots));
    if (o.schedule == AD_CKPT_STORE_ALL) CHECK_INT(st.advances, steps - 1);
    if (o.schedule == AD_CKPT_MULTISTAGE) {
      int d = o.disk_snapshots < steps ? o.disk_snapshots : (int)steps;
      CHECK_INT(st.disk_writes, d);
      CHECK_INT(st.disk_reads, d);
    }
    /* every step runs once forward, once taped, plus the recomputations */
    CHECK_INT(s.calls, st.advances + st.output_steps + st.taped);
    /* a second sweep gives the same bits */
    double g2[NS];
    CHECK_INT(ad_gradient(t, J, NS, x, g2), AD_OK);
    for (int k = 0; k < NS; k++) CHECK_SAME(g2[k], gref[k]);
    /* dot-product test through the record's tangent action */
    double xdot[NS], dir_deriv = 0.0;
    for (int k = 0; k < NS; k++) {
      xdot[k] = sin(1.0 + k);
      dir_deriv += g[k] * xdot[k];
    }
    ad_tangents_zero(t);
    for (int k = 0; k < NS; k++) ad_tangent_seed(t, x[k], xdot[k]);
    CHECK_INT(ad_forward(t), AD_OK);
    CHECK_CLOSE(ad_tangent(t, J), dir_deriv, 1e-13);
    ad_tape_destroy(t);
  }
  /* a multistage run without `resumable` leaves no file behind */
  char probe[512];
  snprintf(probe, sizeof probe, "%s/ariadne-r0-base-0.dat", dir);
  CHECK(access(probe, F_OK) != 0);
}

/* A finite-difference check of the checkpointed gradient itself. */
static void test_fd(void) {
  CHECK_CONTEXT("checkpointed gradient against central differences");
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = 40;
  o.snapshots = 4;
  stepper s = {40, -1, -1, 0};
  ad_tape *t = ad_tape_create();
  ad_real x[NS], J;
  run(&o, &s, t, x, &J, 0);
  double g[NS];
  CHECK_INT(ad_gradient(t, J, NS, x, g), AD_OK);
  for (int k = 0; k < NS; k += 3) {
    double h = 1e-6, val[2];
    for (int sgn = 0; sgn < 2; sgn++) {
      ad_real u[NS];
      for (int q = 0; q < NS; q++) u[q] = ad_const(0.4 + 0.05 * q + (q == k ? (sgn ? -h : h) : 0.0));
      double time = 0.0;
      for (int64_t i = 0; i < 40; i++) {
        size_t n = NS, pb = sizeof time;
        step_fn(&s, i, &n, u, &pb, &time);
      }
      double acc = 0.0;
      for (int q = 0; q < NS; q++) acc += objective_weights(q) * ad_value(u[q]) * ad_value(u[q]);
      val[sgn] = acc;
    }
    CHECK_CLOSE((val[0] - val[1]) / (2 * h), g[k], 1e-7);
  }
  ad_tape_destroy(t);
}

static void test_errors(const char *dir) {
  ad_ckpt_options o;
  ad_real x[NS], J;
  double g[NS], gref[NS], Jref;
  reference(20, gref, &Jref);
  ad_tape *t = ad_tape_create();

  struct {
    const char *name;
    ad_ckpt_schedule sch;
    int snaps, disk, fail_at, grow_at;
    const char *dir;
    int want;
  } cases[] = {
      {"zero snapshots", AD_CKPT_BINOMIAL, 0, 0, -1, -1, NULL, AD_ERR_ARG},
      {"online with one snapshot", AD_CKPT_ONLINE, 1, 0, -1, -1, NULL, AD_ERR_ARG},
      {"multistage without a directory", AD_CKPT_MULTISTAGE, 2, 2, -1, -1, NULL, AD_ERR_ARG},
      {"multistage with zero disk snapshots", AD_CKPT_MULTISTAGE, 2, 0, -1, -1, dir, AD_ERR_ARG},
      {"a directory that does not exist", AD_CKPT_MULTISTAGE, 2, 2, -1, -1, "/nonexistent/ariadne", AD_ERR_IO},
      {"a step that fails", AD_CKPT_BINOMIAL, 3, 0, 7, -1, NULL, AD_ERR_CALLBACK},
      {"a step that changes the state size", AD_CKPT_BINOMIAL, 3, 0, -1, 4, NULL, AD_ERR_CALLBACK},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    CHECK_CONTEXT("%s", cases[c].name);
    ckpt_case_options(&o, cases[c].sch, 20, cases[c].snaps, cases[c].disk, cases[c].dir, NULL);
    stepper s = {20, cases[c].fail_at, cases[c].grow_at, 0};
    ad_tape_reset(t);
    CHECK_INT(run(&o, &s, t, x, &J, 0), cases[c].want);
    CHECK_INT(ad_tape_error(t), cases[c].want);
    CHECK(strlen(ad_tape_error_message(t)) > 20);
    CHECK_INT(ad_gradient(t, J, NS, x, g), cases[c].want);
    /* the tape is usable again after a reset */
    ad_tape_reset(t);
    ad_ckpt_options_default(&o);
    o.steps = 20;
    stepper ok = {20, -1, -1, 0};
    CHECK_INT(run(&o, &ok, t, x, &J, 0), AD_OK);
    check_gradient(t, J, x, gref);
  }

  /* A failure in the reverse action: the step fails only when re-run. */
  CHECK_CONTEXT("a step that fails during the reverse sweep");
  ad_ckpt_options_default(&o);
  o.steps = 20;
  o.snapshots = 2;
  stepper s = {20, -1, -1, 0};
  ad_tape_reset(t);
  CHECK_INT(run(&o, &s, t, x, &J, 0), AD_OK);
  s.fail_at = 3;
  CHECK_INT(ad_gradient(t, J, NS, x, g), AD_ERR_CALLBACK);
  s.fail_at = -1;
  check_gradient(t, J, x, gref);

  /* A full disk: writes beyond a file-size limit fail like ENOSPC would. */
  CHECK_CONTEXT("a full disk");
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 100;
  signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &lim);
  ckpt_case_options(&o, AD_CKPT_MULTISTAGE, 20, 2, 3, dir, NULL);
  ad_tape_reset(t);
  stepper s2 = {20, -1, -1, 0};
  CHECK_INT(run(&o, &s2, t, x, &J, 0), AD_ERR_IO);
  CHECK(strstr(ad_tape_error_message(t), "cannot write") != NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  ad_tape_reset(t);
  CHECK_INT(run(&o, &s2, t, x, &J, 0), AD_OK);
  check_gradient(t, J, x, gref);

  /* Without a recording tape the loop is a plain loop. */
  CHECK_CONTEXT("no recording tape");
  ad_ckpt_options_default(&o);
  o.steps = 20;
  ad_real u[NS];
  for (int k = 0; k < NS; k++) u[k] = ad_const(0.4 + 0.05 * k);
  double time = 0.0;
  stepper s3 = {20, -1, -1, 0};
  CHECK_INT(ad_checkpoint_loop(&o, step_fn, &s3, NS, u, sizeof time, &time), AD_OK);
  CHECK_INT(s3.calls, 20);
  double acc = 0.0;
  for (int k = 0; k < NS; k++) acc += objective_weights(k) * ad_value(u[k]) * ad_value(u[k]);
  CHECK_SAME(acc, Jref);
  o.snapshots = 0;
  CHECK_INT(ad_checkpoint_loop(&o, step_fn, &s3, NS, u, sizeof time, &time), AD_ERR_ARG);
  CHECK_INT(ad_last_error(), AD_ERR_ARG);
  ad_clear_last_error();
  ad_tape_destroy(t);
}

/* steps = 0, what a forgotten field holds, is refused; AD_CKPT_NO_STEPS asks
 * for the empty loop, whose output is its input: J = u0 u1 has the gradient
 * (x1, x0). */
static void test_zero_steps(void) {
  const ad_ckpt_schedule sch[] = {AD_CKPT_BINOMIAL, AD_CKPT_STORE_ALL};
  for (int s = 0; s < 2; s++) {
    CHECK_CONTEXT("steps not set, schedule %d", (int)sch[s]);
    ad_ckpt_options o;
    ad_ckpt_options_default(&o);
    o.schedule = sch[s];
    stepper st = {0, -1, -1, 0};
    double time = 0.0, g[2];
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[2] = {ad_input(1.5), ad_input(-2.0)}, u[2] = {x[0], x[1]};
    CHECK_INT(ad_checkpoint_loop(&o, step_fn, &st, 2, u, sizeof time, &time), AD_ERR_ARG);
    CHECK(strstr(ad_tape_error_message(t), "steps is 0") != NULL);
    CHECK(strstr(ad_tape_error_message(t), "AD_CKPT_NO_STEPS") != NULL);
    ad_real J = ad_mul(u[0], u[1]);
    ad_tape_end(t);
    CHECK_INT(ad_gradient(t, J, 2, x, g), AD_ERR_ARG);
    /* Without a recording tape: the plain loop refuses it too. */
    ad_real v[2] = {ad_const(1.0), ad_const(2.0)};
    ad_clear_last_error();
    CHECK_INT(ad_checkpoint_loop(&o, step_fn, &st, 2, v, sizeof time, &time), AD_ERR_ARG);
    CHECK_INT(ad_last_error(), AD_ERR_ARG);
    ad_clear_last_error();

    CHECK_CONTEXT("AD_CKPT_NO_STEPS, schedule %d", (int)sch[s]);
    o.steps = AD_CKPT_NO_STEPS;
    ad_tape_reset(t);
    ad_tape_begin(t);
    x[0] = u[0] = ad_input(1.5);
    x[1] = u[1] = ad_input(-2.0);
    CHECK_INT(ad_checkpoint_loop(&o, step_fn, &st, 2, u, sizeof time, &time), AD_OK);
    CHECK_INT(st.calls, 0);
    J = ad_mul(u[0], u[1]);
    ad_tape_end(t);
    CHECK_INT(ad_gradient(t, J, 2, x, g), AD_OK);
    CHECK_SAME(g[0], -2.0);
    CHECK_SAME(g[1], 1.5);
    CHECK_INT(ad_checkpoint_loop(&o, step_fn, &st, 2, v, sizeof time, &time), AD_OK);
    CHECK_SAME(ad_value(v[1]), 2.0);
    ad_tape_destroy(t);
  }
}

/* A step that reads an active value recorded before the loop (a coefficient
 * captured through ud) instead of carrying it in the state. */
typedef struct outside {
  ad_real coef;
  int64_t until; /* the steps before it use it */
} outside;

static int outside_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  outside *o = ud;
  (void)pb;
  (void)p;
  for (size_t k = 0; k < *n; k++) u[k] = ad_mul(u[k], i < o->until ? o->coef : ad_const(0.9));
  return 0;
}

/* How often `what` occurs in s. */
static int occurrences(const char *s, const char *what) {
  int c = 0;
  for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what)) c++;
  return c;
}

/* The rule that a step depends on active values only through its state:
 * the sweep fails naming the step that broke it, the value and the rule, in
 * one message that says each thing once. */
static void test_outside_value(void) {
  const int64_t untils[] = {8, 3};
  for (size_t f = 0; f < sizeof untils / sizeof *untils; f++) {
    CHECK_CONTEXT("steps before %lld use an active value from outside the state", (long long)untils[f]);
    long before = check__failed;
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    outside o = {ad_input(0.5), untils[f]};
    ad_real x[2] = {ad_input(1.0), ad_input(2.0)}, u[2] = {x[0], x[1]};
    ad_ckpt_options opts;
    ad_ckpt_options_default(&opts);
    opts.steps = 8;
    opts.snapshots = 3;
    CHECK_INT(ad_checkpoint_loop(&opts, outside_fn, &o, 2, u, 0, NULL), AD_OK);
    ad_real J = ad_add(u[0], u[1]);
    ad_tape_end(t);
    double g[2];
    CHECK_INT(ad_gradient(t, J, 2, x, g), AD_ERR_STALE_HANDLE);
    const char *m = ad_tape_error_message(t);
    char want[64];
    /* Steps are reversed from the last: the first one reversed that uses it. */
    snprintf(want, sizeof want, "step %lld ", (long long)untils[f] - 1);
    CHECK(strstr(m, want) != NULL);
    CHECK(strstr(m, "not part of the loop's state") != NULL);
    CHECK(strstr(m, "handle 1 of the tape the loop is recorded on") != NULL);
    CHECK_INT(occurrences(m, "ariadne: "), 1);
    CHECK_INT(occurrences(m, "(AD_ERR_STALE_HANDLE"), 1);
    if (check__failed > before) fprintf(stderr, "message: %s\n", m);
    ad_tape_destroy(t);
  }
}

/* Resumable runs, in one process: a second run with the same arguments
 * reuses the files; corrupt and foreign files are reported. */
static void test_resumable(const char *dir) {
  double gref[NS], Jref;
  reference(30, gref, &Jref);
  ad_ckpt_options o;
  ad_ckpt_stats st;
  ckpt_case_options(&o, AD_CKPT_MULTISTAGE, 30, 2, 5, dir, &st);
  o.resumable = 1;
  ad_real x[NS], J;
  double g[NS];
  for (int pass = 0; pass < 2; pass++) {
    CHECK_CONTEXT("resumable run, pass %d", pass);
    stepper s = {30, -1, -1, 0};
    ad_tape *t = ad_tape_create();
    CHECK_INT(run(&o, &s, t, x, &J, 0), AD_OK);
    CHECK_SAME(ad_value(J), Jref);
    check_gradient(t, J, x, gref);
    /* the second pass finds everything done: no step runs at all */
    if (pass == 1) {
      CHECK_INT(s.calls, 0);
      CHECK_INT(st.resumed_segments, 5);
    }
    ad_tape_destroy(t);
  }
  /* corrupt a base file: reported, never used */
  CHECK_CONTEXT("resumable run with a corrupt file");
  char fn[512];
  snprintf(fn, sizeof fn, "%s/ariadne-r0-adj-5.dat", dir);
  FILE *f = fopen(fn, "r+b");
  CHECK(f != NULL);
  if (f) {
    fseek(f, 80, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
  }
  {
    stepper s = {30, -1, -1, 0};
    ad_tape *t = ad_tape_create();
    CHECK_INT(run(&o, &s, t, x, &J, 0), AD_OK);
    CHECK_INT(ad_gradient(t, J, NS, x, g), AD_ERR_CORRUPT);
    CHECK(strstr(ad_tape_error_message(t), "corrupt") != NULL);
    ad_tape_destroy(t);
  }
  /* another run's files: an error unless replace_foreign */
  CHECK_CONTEXT("resumable run over another run's files");
  o.steps = 31;
  {
    stepper s = {31, -1, -1, 0};
    ad_tape *t = ad_tape_create();
    CHECK_INT(run(&o, &s, t, x, &J, 0), AD_ERR_CORRUPT);
    CHECK(strstr(ad_tape_error_message(t), "another run") != NULL);
    ad_tape_destroy(t);
    o.replace_foreign = 1;
    double g31[NS], J31;
    reference(31, g31, &J31);
    t = ad_tape_create();
    CHECK_INT(run(&o, &s, t, x, &J, 0), AD_OK);
    CHECK_INT(st.replaced_foreign, 1);
    CHECK_INT(ad_gradient(t, J, NS, x, g), AD_OK);
    for (int k = 0; k < NS; k++) CHECK_SAME(g[k], g31[k]);
    ad_tape_destroy(t);
  }
}

/* Two multistage loops sharing a directory: chained on one tape (a
 * spin-up and a main loop), and on two tapes alive at once. Each loop keeps
 * its own files; judged by the same two loops taped step by step. */
static void chained(const ad_ckpt_options *o1, const ad_ckpt_options *o2, stepper *sp1, stepper *sp2, ad_tape *t,
                    ad_real *x, ad_real *J, int taped, int *rc1, int *rc2) {
  stepper s1 = {o1->steps, -1, -1, 0}, s2 = {o2->steps, -1, -1, 0};
  *sp1 = s1;
  *sp2 = s2;
  ad_tape_begin(t);
  ad_real u[NS];
  for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(0.4 + 0.05 * k);
  double time = 0.0;
  *rc1 = *rc2 = AD_OK;
  if (taped) {
    for (int64_t i = 0; i < o1->steps + o2->steps; i++) {
      size_t n = NS, pb = sizeof time;
      step_fn(&s1, i, &n, u, &pb, &time);
    }
  } else {
    /* the steppers live as long as the tape: the sweeps call them */
    *rc1 = ad_checkpoint_loop(o1, step_fn, sp1, NS, u, sizeof time, &time);
    for (int k = 0; k < NS; k++) u[k] = ad_mul(u[k], 1.0 + 0.01 * k); /* between the loops */
    *rc2 = ad_checkpoint_loop(o2, step_fn, sp2, NS, u, sizeof time, &time);
  }
  if (taped) {
    /* the same scaling, between the same steps: re-tape from the start */
    ad_tape_reset(t);
    ad_tape_begin(t);
    for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(0.4 + 0.05 * k);
    time = 0.0;
    for (int64_t i = 0; i < o1->steps; i++) {
      size_t n = NS, pb = sizeof time;
      step_fn(&s1, i, &n, u, &pb, &time);
    }
    for (int k = 0; k < NS; k++) u[k] = ad_mul(u[k], 1.0 + 0.01 * k);
    for (int64_t i = 0; i < o2->steps; i++) {
      size_t n = NS, pb = sizeof time;
      step_fn(&s2, i, &n, u, &pb, &time);
    }
  }
  ad_real acc = ad_const(0.0);
  for (int k = 0; k < NS; k++) acc = ad_add(acc, ad_mul(objective_weights(k), ad_mul(u[k], u[k])));
  *J = acc;
  ad_tape_end(t);
}

static void test_shared_dir(const char *parent) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/shared", parent);
  CHECK_INT(mkdir(dir, 0700), 0);
  ad_ckpt_options o1, o2;
  ckpt_case_options(&o1, AD_CKPT_MULTISTAGE, 14, 2, 3, dir, NULL);
  o1.resumable = 1;
  o1.replace_foreign = 0;
  o2 = o1;
  o2.steps = 23;
  o2.disk_snapshots = 4;
  ad_real x[NS], J;
  double gref[NS], g[NS], Jref;
  int rc1, rc2;
  stepper s1, s2;
  ad_tape *t = ad_tape_create();
  chained(&o1, &o2, &s1, &s2, t, x, &J, 1, &rc1, &rc2);
  CHECK_INT(ad_gradient(t, J, NS, x, gref), AD_OK);
  Jref = ad_value(J);
  ad_tape_destroy(t);
  CHECK_CONTEXT("two chained multistage loops in one directory");
  for (int pass = 0; pass < 2; pass++) {
    t = ad_tape_create();
    chained(&o1, &o2, &s1, &s2, t, x, &J, 0, &rc1, &rc2);
    CHECK_INT(rc1, AD_OK);
    CHECK_INT(rc2, AD_OK);
    CHECK_SAME(ad_value(J), Jref);
    CHECK_INT(ad_gradient(t, J, NS, x, g), AD_OK);
    for (int k = 0; k < NS; k++) CHECK_CLOSE(g[k], gref[k], 1e-13);
    if (pass == 1) CHECK_INT(s1.calls + s2.calls, 0); /* both loops resumed from their own files */
    ad_tape_destroy(t);
  }
  /* two tapes at once, one loop each: destroying one leaves the other's files */
  CHECK_CONTEXT("multistage loops of two tapes in one directory");
  ad_tape *ta = ad_tape_create(), *tb = ad_tape_create();
  ad_real xa[NS], xb[NS], Ja, Jb;
  double ga[NS], gb[NS], g14[NS], g23[NS], J14, J23;
  reference(14, g14, &J14);
  reference(23, g23, &J23);
  o1.steps = 23; /* the other way round from above: each replaces the files */
  o2.steps = 14; /* of the other's length */
  o1.replace_foreign = o2.replace_foreign = 1;
  stepper sa = {23, -1, -1, 0}, sb = {14, -1, -1, 0};
  CHECK_INT(run(&o1, &sa, ta, xa, &Ja, 0), AD_OK);
  CHECK_INT(run(&o2, &sb, tb, xb, &Jb, 0), AD_OK);
  CHECK_INT(ad_gradient(ta, Ja, NS, xa, ga), AD_OK);
  ad_tape_destroy(ta);
  CHECK_INT(ad_gradient(tb, Jb, NS, xb, gb), AD_OK);
  for (int k = 0; k < NS; k++) {
    CHECK_CLOSE(ga[k], g23[k], 1e-13);
    CHECK_CLOSE(gb[k], g14[k], 1e-13);
  }
  CHECK_SAME(ad_value(Ja), J23);
  CHECK_SAME(ad_value(Jb), J14);
  ad_tape_destroy(tb);
}

int main(void) {
  char dir[] = "/tmp/ariadne-ckpt-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  test_schedule();
  test_schedules(dir);
  test_fd();
  test_errors(dir);
  test_outside_value();
  test_zero_steps();
  test_resumable(dir);
  test_shared_dir(dir);
  /* leave nothing behind */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK_INT(system(cmd), 0);
  return check_finish("test_checkpoint");
}
