/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpointed loops on several ranks with a passive twin whose steps
 * communicate through plain MPI (ckpt_twin_mpi_step.c compiled passive):
 * every schedule gives the gradient of the loop without the twin and of the
 * fully taped loop bit for bit on every rank, which central differences of
 * the passive program confirm; without the forward check the loop needs its
 * communicator (ad_mpi_ckpt_comm); a twin that disagrees on one rank only
 * fails every rank, in the loop or in the sweep, instead of hanging. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <unistd.h>

#include "ckpt_twin_mpi_step.h"
#include "mtest.h"

#define STEPS 30

static double initial(int k) { return 0.4 + 0.3 * sin(0.7 * (mt_rank * MT_NL + k)); }
static double weight(int k) { return 1.0 + 0.25 * ((mt_rank * MT_NL + k) % 7); }

static mpi_twin_params params(int64_t last) {
  mpi_twin_params q = {mt_rank, mt_size, last, 0, 0};
  return q;
}

/* The global J of the passive program from initial + h * xdot. */
static double J_passive(const double *xdot, double h) {
  mpi_twin_params q = params(-1);
  double u[MT_NL], time = 0.0, local = 0.0, J = 0.0;
  for (int k = 0; k < MT_NL; k++) u[k] = initial(k) + h * xdot[k];
  for (int64_t i = 0; i < STEPS; i++) {
    size_t n = MT_NL, pb = sizeof time;
    MT_CHECK(mpi_twin_step_passive(&q, i, &n, u, &pb, &time) == 0);
  }
  for (int k = 0; k < MT_NL; k++) local += weight(k) * u[k] * u[k];
  MPI_Allreduce(&local, &J, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return J;
}

/* Record the loop (step by step if o is NULL) and J's share, and sweep. The
 * codes of the loop and of the gradient go to rc_loop and rc_grad. */
static void record(const ad_ckpt_options *o, mpi_twin_params *q, double *g, int *rc_loop, int *rc_grad, char *msg,
                   size_t msize) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[MT_NL], u[MT_NL];
  for (int k = 0; k < MT_NL; k++) x[k] = u[k] = ad_input(initial(k));
  double time = 0.0;
  int rc = AD_OK;
  if (!o) {
    for (int64_t i = 0; i < STEPS; i++) {
      size_t n = MT_NL, pb = sizeof time;
      MT_CHECK(mpi_twin_step(q, i, &n, u, &pb, &time) == 0);
    }
  } else {
    rc = ad_checkpoint_loop(o, mpi_twin_step, q, MT_NL, u, sizeof time, &time);
  }
  ad_real J = ad_const(0.0);
  for (int k = 0; k < MT_NL; k++) J = ad_add(J, ad_mul(weight(k), ad_mul(u[k], u[k])));
  ad_tape_end(t);
  *rc_loop = rc;
  *rc_grad = rc == AD_OK ? ad_gradient(t, J, MT_NL, x, g) : rc;
  snprintf(msg, msize, "%s", ad_tape_error_message(t));
  ad_tape_destroy(t);
}

static void check_bits(const double *g, const double *ref, const char *what) {
  for (int k = 0; k < MT_NL; k++) {
    if (memcmp(&g[k], &ref[k], sizeof g[k]) != 0)
      fprintf(stderr, "[%d] %s: g[%d] = %.17g, expected %.17g\n", mt_rank, what, k, g[k], ref[k]);
    MT_CHECK(memcmp(&g[k], &ref[k], sizeof g[k]) == 0);
  }
}

/* A twin that goes wrong on rank `rank` in step `at` (one ulp off). */
typedef struct bad_twin {
  mpi_twin_params q;
  int rank;
  int64_t at;
} bad_twin;

static int bad_step(void *ud, int64_t i, size_t *n, double *u, size_t *pb, void *p) {
  bad_twin *b = ud;
  int rc = mpi_twin_step_passive(&b->q, i, n, u, pb, p);
  if (i == b->at && mt_rank == b->rank) u[1] = nextafter(u[1], 2.0);
  return rc;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  MT_CHECK(ad_mpi_comm_prepare(MPI_COMM_WORLD) == MPI_SUCCESS);
  char dir[256] = "/tmp/ariadne-mpitwin-XXXXXX";
  if (!mt_share_dir(dir, sizeof dir, mt_rank != 0 || mkdtemp(dir))) return mt_finalize();

  /* References: the fully taped loop, and central differences of the
   * passive program in one direction, against <g, xdot> over the ranks. */
  double gref[MT_NL], xdot[MT_NL];
  char msg[400];
  int rl, rg;
  mpi_twin_params q = params(-1);
  record(NULL, &q, gref, &rl, &rg, msg, sizeof msg);
  MT_CHECK(rg == AD_OK);
  for (int k = 0; k < MT_NL; k++) xdot[k] = 0.3 + 0.1 * ((mt_rank * MT_NL + k) % 5);
  const double h = 1e-6;
  double fd = (J_passive(xdot, h) - J_passive(xdot, -h)) / (2 * h), dot = 0.0, local = 0.0;
  for (int k = 0; k < MT_NL; k++) local += gref[k] * xdot[k];
  MPI_Allreduce(&local, &dot, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CLOSE(dot, fd, 1e-7);

  struct {
    const char *name;
    ad_ckpt_schedule sch;
    int snaps, disk, check, comm;
  } cases[] = {
      {"binomial", AD_CKPT_BINOMIAL, 3, 0, AD_CKPT_CHECK_FIRST, 0},
      {"binomial, every forward step checked", AD_CKPT_BINOMIAL, 3, 0, AD_CKPT_CHECK_FORWARD, 0},
      {"binomial, no forward check, the loop's communicator", AD_CKPT_BINOMIAL, 3, 0, AD_CKPT_CHECK_OFF, 1},
      {"multistage", AD_CKPT_MULTISTAGE, 2, 4, AD_CKPT_CHECK_FIRST, 0},
      {"store_all", AD_CKPT_STORE_ALL, 0, 0, AD_CKPT_CHECK_FIRST, 0},
      {"online", AD_CKPT_ONLINE, 3, 0, AD_CKPT_CHECK_FIRST, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ad_ckpt_options o;
    ad_ckpt_stats st;
    ckpt_case_options(&o, cases[c].sch, STEPS, cases[c].snaps, cases[c].disk, dir, &st);
    if (cases[c].comm) MT_CHECK(ad_mpi_ckpt_comm(&o, MPI_COMM_WORLD) == MPI_SUCCESS);
    int64_t last = cases[c].sch == AD_CKPT_ONLINE ? STEPS - 1 : -1;
    double g0[MT_NL], g1[MT_NL];
    q = params(last);
    record(&o, &q, g0, &rl, &rg, msg, sizeof msg);
    MT_CHECK(rl == AD_OK && rg == AD_OK);
    o.step_passive = mpi_twin_step_passive;
    o.passive_check = cases[c].check;
    q = params(last);
    record(&o, &q, g1, &rl, &rg, msg, sizeof msg);
    if (rl != AD_OK || rg != AD_OK) fprintf(stderr, "[%d] %s: %s\n", mt_rank, cases[c].name, msg);
    MT_CHECK(rl == AD_OK && rg == AD_OK);
    check_bits(g1, g0, cases[c].name);
    check_bits(g1, gref, cases[c].name);
    /* the twin ran every passive step, the step function the recorded ones */
    int64_t fwd = st.advances + st.output_steps;
    int64_t checked = cases[c].check == AD_CKPT_CHECK_OFF     ? 0
                      : cases[c].check == AD_CKPT_CHECK_FIRST ? 1
                                                              : st.steps; /* the forward run's steps */
    MT_CHECK(q.passive_calls == fwd);
    MT_CHECK(q.active_calls == checked + STEPS);
  }

  /* A twin that disagrees on the last rank only: in the first step (the
   * forward check finds it, every rank's loop fails), and in the last step
   * (the sweep's check finds it, every rank's sweep fails). */
  for (int late = 0; late < 2; late++) {
    ad_ckpt_options o;
    ad_ckpt_options_default(&o);
    o.steps = STEPS;
    o.snapshots = 3;
    o.step_passive = bad_step;
    bad_twin b = {params(-1), mt_size - 1, late ? STEPS - 1 : 0};
    o.passive_ud = &b;
    q = params(-1);
    double g[MT_NL];
    record(&o, &q, g, &rl, &rg, msg, sizeof msg);
    /* The other ranks learn that one failed, not why (the forward run's
     * agreement reports AD_ERR_IO). */
    if (late) MT_CHECK(rl == AD_OK && rg == AD_ERR_CALLBACK);
    if (!late) MT_CHECK(mt_rank == b.rank ? rl == AD_ERR_CALLBACK : rl != AD_OK);
    MT_CHECK(strstr(msg, mt_rank == mt_size - 1 ? "passive twin disagrees" : "another rank of the loop") != NULL);
    if (!strstr(msg, "twin")) fprintf(stderr, "[%d] bad twin %d: %s\n", mt_rank, late, msg);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) MT_CHECK(nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
  return mt_finalize();
}
