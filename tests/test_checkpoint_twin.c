/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpointed loops with a passive twin (ad_ckpt_options.step_passive):
 * the step of ckpt_twin_step.c compiled active and passive. With the twin
 * every schedule gives the same gradient bit for bit as without it and as
 * the fully taped loop, which central differences of the passive loop
 * confirm; the twin runs every passive step; a twin that disagrees with the
 * step function is reported, never a wrong gradient with success. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ckpt_twin_step.h"

#define NS TWIN_NS
#define STEPS 23

static double weight(int k) { return 1.0 + 0.25 * k; }
static double x0(int k) { return 0.4 + 0.05 * k; }

/* J of the loop run in doubles with the passive build, from x. */
static double J_passive(const double *x) {
  twin_params q = {-1, 0, 0};
  twin_pstate ps = {0, 0};
  double u[NS];
  memcpy(u, x, sizeof u);
  for (int64_t i = 0; i < STEPS; i++) {
    size_t n = NS, pb = sizeof ps;
    twin_step_passive(&q, i, &n, u, &pb, &ps);
  }
  double J = 0.0;
  for (int k = 0; k < NS; k++) J += weight(k) * u[k] * u[k];
  return J;
}

/* Record the inputs, the loop (taped step by step if o is NULL) and J. A
 * loop whose twin is right (not one of test_mismatch's) ends with the
 * passive state of STEPS steps. */
static int record(const ad_ckpt_options *o, twin_params *q, ad_tape *t, ad_real *x, ad_real *J) {
  ad_tape_begin(t);
  ad_real u[NS];
  for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(x0(k));
  twin_pstate ps = {0, 0};
  int rc = AD_OK;
  if (!o) {
    for (int64_t i = 0; i < STEPS; i++) {
      size_t n = NS, pb = sizeof ps;
      twin_step(q, i, &n, u, &pb, &ps);
    }
  } else {
    rc = ad_checkpoint_loop(o, twin_step, q, NS, u, sizeof ps, &ps);
  }
  ad_real acc = ad_const(0.0);
  for (int k = 0; k < NS; k++) acc = ad_add(acc, ad_mul(weight(k), ad_mul(u[k], u[k])));
  *J = acc;
  ad_tape_end(t);
  if (rc == AD_OK && !(o && o->passive_ud)) {
    CHECK_INT(ps.count, STEPS);
    CHECK_INT(ps.mode, STEPS % 3);
  }
  return rc;
}

static int same_bits(const double *a, const double *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void test_gradients(const char *dir) {
  /* References: the fully taped loop and central differences of the
   * passive loop. */
  double gtaped[NS], gfd[NS], Jtaped;
  twin_params q = {-1, 0, 0};
  ad_tape *t = ad_tape_create();
  ad_real x[NS], J;
  record(NULL, &q, t, x, &J);
  CHECK_INT(ad_gradient(t, J, NS, x, gtaped), AD_OK);
  Jtaped = ad_value(J);
  ad_tape_destroy(t);
  double xv[NS];
  for (int k = 0; k < NS; k++) xv[k] = x0(k);
  CHECK_SAME(J_passive(xv), Jtaped);
  for (int k = 0; k < NS; k++) gfd[k] = check_central_difference(J_passive, xv, NS, (size_t)k, 1e-6);

  struct {
    const char *name;
    ad_ckpt_schedule sch;
    int snaps, disk;
  } cases[] = {{"binomial", AD_CKPT_BINOMIAL, 3, 0},
               {"binomial s=1", AD_CKPT_BINOMIAL, 1, 0},
               {"multistage", AD_CKPT_MULTISTAGE, 2, 4},
               {"store_all", AD_CKPT_STORE_ALL, 0, 0},
               {"online", AD_CKPT_ONLINE, 3, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int check = AD_CKPT_CHECK_OFF; check <= AD_CKPT_CHECK_FORWARD; check++) {
      CHECK_CONTEXT("%s, passive_check %d", cases[c].name, check);
      ad_ckpt_options o;
      ad_ckpt_stats st;
      ckpt_case_options(&o, cases[c].sch, STEPS, cases[c].snaps, cases[c].disk, dir, &st);
      twin_params qa = {cases[c].sch == AD_CKPT_ONLINE ? STEPS - 1 : -1, 0, 0};
      twin_params qb = qa;
      /* without the twin */
      double g0[NS], g1[NS], g2[NS];
      t = ad_tape_create();
      CHECK_INT(record(&o, &qa, t, x, &J), AD_OK);
      double J0 = ad_value(J);
      CHECK_INT(ad_gradient(t, J, NS, x, g0), AD_OK);
      ad_tape_destroy(t);
      CHECK_INT(qa.passive_calls, 0);
      /* with it */
      o.step_passive = twin_step_passive;
      o.passive_check = check;
      t = ad_tape_create();
      CHECK_INT(record(&o, &qb, t, x, &J), AD_OK);
      CHECK_SAME(ad_value(J), J0);
      CHECK_SAME(ad_value(J), Jtaped);
      int64_t fwd = st.advances + st.output_steps; /* passive steps of the forward run */
      int64_t checked = check == AD_CKPT_CHECK_OFF ? 0 : check == AD_CKPT_CHECK_FIRST ? 1 : fwd;
      CHECK_INT(qb.passive_calls, fwd);
      CHECK_INT(qb.active_calls, checked);
      CHECK_INT(ad_gradient(t, J, NS, x, g1), AD_OK);
      /* every step recorded once by the step function; every other step the twin's */
      CHECK_INT(st.taped, STEPS);
      CHECK_INT(qb.active_calls, checked + STEPS);
      CHECK_INT(qb.passive_calls, st.advances + st.output_steps);
      CHECK(same_bits(g1, g0, NS));
      CHECK(same_bits(g1, gtaped, NS));
      for (int k = 0; k < NS; k++) CHECK_CLOSE2(g1[k], gfd[k], 1e-7, 1e-8);
      /* a second sweep (the binomial schedule runs its forward part again) */
      CHECK_INT(ad_gradient(t, J, NS, x, g2), AD_OK);
      CHECK(same_bits(g2, g0, NS));
      ad_tape_destroy(t);
    }
  }
}

/* Twins that disagree with the step function. */
typedef struct bad_twin {
  twin_params q;
  int64_t at; /* the step that goes wrong */
  int how;    /* 0 a value off by one ulp, 1 a passive state byte, 2 AD_CKPT_LAST too early */
} bad_twin;

static int bad_step(void *ud, int64_t i, size_t *n, double *u, size_t *pb, void *p) {
  bad_twin *b = ud;
  int rc = twin_step_passive(&b->q, i, n, u, pb, p);
  if (i != b->at) return rc;
  if (b->how == 0) u[3] = nextafter(u[3], 1.0);
  if (b->how == 1) ((twin_pstate *)p)->mode ^= 4;
  if (b->how == 2) rc = AD_CKPT_LAST;
  return rc;
}

static void test_mismatch(void) {
  struct {
    const char *name;
    ad_ckpt_schedule sch;
    int64_t at;
    int how, check;
    int fails_in; /* 1 the loop, 2 the sweep */
  } cases[] = {
      {"a value in the first step", AD_CKPT_BINOMIAL, 0, 0, AD_CKPT_CHECK_FIRST, 1},
      {"a value in step 5, every forward step checked", AD_CKPT_BINOMIAL, 5, 0, AD_CKPT_CHECK_FORWARD, 1},
      {"a value in the last step, no forward check", AD_CKPT_BINOMIAL, STEPS - 1, 0, AD_CKPT_CHECK_OFF, 2},
      {"a value in the last step, store_all", AD_CKPT_STORE_ALL, STEPS - 1, 0, AD_CKPT_CHECK_FIRST, 2},
      {"a value in the last step, online", AD_CKPT_ONLINE, STEPS - 1, 0, AD_CKPT_CHECK_FIRST, 2},
      {"a passive state byte in the first step", AD_CKPT_BINOMIAL, 0, 1, AD_CKPT_CHECK_FIRST, 1},
      {"a passive state byte in the last step", AD_CKPT_BINOMIAL, STEPS - 1, 1, AD_CKPT_CHECK_OFF, 2},
      {"the return value in step 4", AD_CKPT_ONLINE, 4, 2, AD_CKPT_CHECK_FORWARD, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    CHECK_CONTEXT("a twin that disagrees: %s", cases[c].name);
    ad_ckpt_options o;
    ad_ckpt_options_default(&o);
    o.schedule = cases[c].sch;
    o.steps = STEPS;
    o.snapshots = 3;
    o.step_passive = bad_step;
    o.passive_check = cases[c].check;
    bad_twin b = {{cases[c].sch == AD_CKPT_ONLINE ? STEPS - 1 : -1, 0, 0}, cases[c].at, cases[c].how};
    o.passive_ud = &b;
    twin_params q = b.q;
    ad_tape *t = ad_tape_create();
    ad_real x[NS], J;
    int rc = record(&o, &q, t, x, &J);
    double g[NS];
    if (cases[c].fails_in == 1) {
      CHECK_INT(rc, AD_ERR_CALLBACK);
    } else {
      CHECK_INT(rc, AD_OK);
      CHECK_INT(ad_gradient(t, J, NS, x, g), AD_ERR_CALLBACK);
    }
    CHECK_CONTAINS(ad_tape_error_message(t), "passive twin disagrees");
    ad_tape_destroy(t);
  }
  CHECK_CONTEXT("a bad passive_check");
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = STEPS;
  o.step_passive = twin_step_passive;
  o.passive_check = 7;
  twin_params q = {-1, 0, 0};
  ad_tape *t = ad_tape_create();
  ad_real x[NS], J;
  CHECK_INT(record(&o, &q, t, x, &J), AD_ERR_ARG);
  CHECK_CONTAINS(ad_tape_error_message(t), "passive_check");
  ad_tape_destroy(t);
  CHECK_CONTEXT("a failing twin");
  ad_ckpt_options_default(&o);
  o.steps = STEPS;
  o.step_passive = bad_step;
  bad_twin b = {{-1, 0, 0}, 2, 2}; /* AD_CKPT_LAST outside the online schedule is ignored */
  o.passive_ud = &b;
  o.passive_check = AD_CKPT_CHECK_OFF;
  t = ad_tape_create();
  CHECK_INT(record(&o, &q, t, x, &J), AD_OK);
  ad_tape_destroy(t);
}

int main(void) {
  char dir[] = "/tmp/ariadne-ckpt-twin-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  test_gradients(dir);
  test_mismatch();
  CHECK(rmdir(dir) == 0); /* the multistage files are gone with their tapes */
  return check_finish("test_checkpoint_twin");
}
