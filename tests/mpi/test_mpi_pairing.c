/* SPDX-License-Identifier: BSD-3-Clause */
/* Which recording a sweep pairs with, and recovery after a failed sweep.
 *
 * Several tapes record communication over the same communicators; ranks
 * then sweep them in different orders. A sweep must pair with the same
 * recording on every rank or fail on every rank: after each sweep the ranks
 * compare, and either all of them return AD_OK with the closed-form
 * gradient or all of them return an error (never AD_OK with a wrong
 * number). Then a sweep that times out (a rank never sweeps) must not stop
 * a new recording over the same communicator from being swept right, while
 * the old recording stays refused.
 *
 * Every tape has one input x per rank (x_r = 1 + r / 4) and its output y
 * is seeded with the same weight w on every rank, so J = w (sum over ranks
 * of y); w = 10^(k-2) differs between the tapes (k is the power of x they
 * use), so that a sweep that pairs one tape's adjoints with another's on
 * the other ranks gets a wrong number. */
#include <stdio.h>
#include <string.h>

#include "mtest.h"

/* Short, so that the sweeps that time out on purpose take little time. */
#define TIMEOUT 2.0

static const char *scenario = "";

static double x_of(int rank) { return 1.0 + 0.25 * rank; }

static ad_real power(ad_real x, int k) {
  ad_real y = x;
  for (int i = 1; i < k; i++) y = ad_mul(y, x);
  return y;
}

/* One recording and what its sweep must give on this rank. */
typedef struct rec {
  ad_tape *t;
  ad_real x, y;
  double w;    /* the seed of y */
  double grad; /* dJ/dx on this rank, in closed form */
} rec;

static void rec_begin(rec *r) {
  r->t = ad_tape_create();
  ad_tape_begin(r->t);
  r->x = ad_input(x_of(mt_rank));
}

static void rec_end(rec *r, ad_real y, int k, double grad) {
  r->y = y;
  ad_tape_end(r->t);
  r->w = pow(10.0, k - 2);
  r->grad = r->w * grad;
}

/* y = allreduce_comm(x^k): dJ/dx = size(comm) k x^(k-1). */
static void rec_coll(rec *r, MPI_Comm comm, int k) {
  int p;
  MPI_Comm_size(comm, &p);
  rec_begin(r);
  ad_real f = power(r->x, k), s;
  MT_CHECK(ad_mpi_allreduce(&f, &s, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
  rec_end(r, s, k, p * k * pow(x_of(mt_rank), k - 1));
}

/* A ring over comm: x^k goes to the right, y = (what came from the left) x,
 * so dJ/dx_r = x_{r-1}^k + k x_r^(k-1) x_{r+1}. With `coll` the products
 * are summed over comm afterwards: every rank's y is that sum, and dJ/dx_r
 * is p times the above. */
static void rec_ring(rec *r, MPI_Comm comm, int k, int coll) {
  int p, me;
  MPI_Comm_size(comm, &p);
  MPI_Comm_rank(comm, &me);
  int left = (me + p - 1) % p, right = (me + 1) % p;
  rec_begin(r);
  ad_real f = power(r->x, k), g;
  MT_CHECK(ad_mpi_sendrecv(&f, 1, AD_MPI_REAL, right, 5, &g, 1, AD_MPI_REAL, left, 5, comm, MPI_STATUS_IGNORE) ==
           MPI_SUCCESS);
  ad_real y = ad_mul(g, r->x);
  if (coll) {
    ad_real s;
    MT_CHECK(ad_mpi_allreduce(&y, &s, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
    y = s;
  }
  /* comm's ranks are world ranks here (the ring runs over a duplicate of
   * MPI_COMM_WORLD) */
  double xl = x_of(left), xm = x_of(mt_rank), xr = x_of(right);
  rec_end(r, y, k, (coll ? p : 1) * (pow(xl, k) + k * pow(xm, k - 1) * xr));
}

/* y = allreduce_sub(x^k) + allreduce_world(x^(k+1)). */
static void rec_sub(rec *r, MPI_Comm sub, MPI_Comm world, int k) {
  int ps, p;
  MPI_Comm_size(sub, &ps);
  MPI_Comm_size(world, &p);
  rec_begin(r);
  ad_real f = power(r->x, k), g = power(r->x, k + 1), s1, s2;
  MT_CHECK(ad_mpi_allreduce(&f, &s1, 1, AD_MPI_REAL, MPI_SUM, sub) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_allreduce(&g, &s2, 1, AD_MPI_REAL, MPI_SUM, world) == MPI_SUCCESS);
  double x = x_of(mt_rank);
  rec_end(r, ad_add(s1, s2), k, ps * k * pow(x, k - 1) + p * (k + 1) * pow(x, k));
}

/* Sweep r on this rank; returns 1 if it returned AD_OK, and notes whether
 * the gradient was right. A failure must be AD_ERR_MPI with a message that
 * names the rank. */
static int sweep(rec *r, int *right, double *seconds) {
  ad_adjoints_zero(r->t);
  ad_seed(r->t, r->y, r->w);
  double t0 = MPI_Wtime();
  int rc = ad_reverse(r->t);
  if (seconds) *seconds = MPI_Wtime() - t0;
  double g = ad_adjoint(r->t, r->x);
  *right = rc == AD_OK && fabs(g - r->grad) <= 1e-12 * (1.0 + fabs(r->grad));
  if (rc == AD_OK && !*right) {
    mt_errors++;
    fprintf(stderr, "[%d] %s: AD_OK with dJ/dx = %.17g, the closed form is %.17g\n", mt_rank, scenario, g, r->grad);
  }
  if (rc != AD_OK && rc != AD_ERR_MPI) {
    mt_errors++;
    fprintf(stderr, "[%d] %s: sweep returned %s: %s\n", mt_rank, scenario, ad_errname(rc), ad_tape_error_message(r->t));
  }
  if (rc != AD_OK && !mt_has_rank_prefix(ad_tape_error_message(r->t))) {
    mt_errors++;
    fprintf(stderr, "[%d] %s: message without the rank: %s\n", mt_rank, scenario, ad_tape_error_message(r->t));
  }
  return rc == AD_OK;
}

/* Each rank sweeps tapes[order[i]] in step i: after every step either all
 * ranks got the right gradient or none got AD_OK. Returns how many steps
 * succeeded everywhere. */
static int sweep_steps(rec *tapes, const int *order, int n) {
  int good = 0;
  for (int i = 0; i < n; i++) {
    int right;
    int ok = sweep(&tapes[order[i]], &right, NULL), v[2] = {ok, -ok};
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (v[0] != -v[1]) {
      mt_errors++;
      fprintf(stderr, "[%d] %s: step %d: AD_OK on some ranks, an error on others (here: %s)\n", mt_rank, scenario, i,
              ok ? "AD_OK" : ad_tape_error_message(tapes[order[i]].t));
    }
    good += v[0];
    /* a rank that failed early meets the others here */
    MPI_Barrier(MPI_COMM_WORLD);
  }
  return good;
}

static MPI_Comm scenario_begin(const char *name) {
  scenario = name;
  return mt_scenario_comm(name);
}

static void destroy_all(rec *tapes, int n) {
  for (int i = 0; i < n; i++) ad_tape_destroy(tapes[i].t);
}

/* ------------------------------------------------------------------------ */
/* Tapes swept in different orders                                           */
/* ------------------------------------------------------------------------ */

/* The report's case: A = allreduce of x^2, B = allreduce of x^3, rank 0
 * sweeps A then B, the other ranks B then A. Both steps mix recordings, so
 * both fail everywhere (at once: the handshake sees it); then every rank
 * sweeps A, then B, and gets them right. */
static void scenario_two_tapes(void) {
  MPI_Comm comm = scenario_begin("two_tapes");
  rec tp[2];
  rec_coll(&tp[0], comm, 2);
  rec_coll(&tp[1], comm, 3);
  int order[4] = {mt_rank == 0 ? 0 : 1, mt_rank == 0 ? 1 : 0, 0, 1};
  MT_CHECK(sweep_steps(tp, order, 2) == 0);
  MT_CHECK(sweep_steps(tp, order + 2, 2) == 2);
  destroy_all(tp, 2);
  MPI_Comm_free(&comm);
}

/* Three tapes over one communicator, each rank starting at another one. */
static void scenario_three_tapes(void) {
  MPI_Comm comm = scenario_begin("three_tapes");
  rec tp[3];
  for (int i = 0; i < 3; i++) rec_coll(&tp[i], comm, i + 2);
  int order[6] = {mt_rank % 3, (mt_rank + 1) % 3, (mt_rank + 2) % 3, 0, 1, 2};
  MT_CHECK(sweep_steps(tp, order, 3) == 0); /* ranks 0 and 1 differ in every step */
  MT_CHECK(sweep_steps(tp, order + 3, 3) == 3);
  destroy_all(tp, 3);
  MPI_Comm_free(&comm);
}

/* A tape that uses the communicator both ways (a ring, then an allreduce)
 * next to another such tape: the ring's partners of rank 0 see a mismatch
 * pairwise, the others only through the collective. */
static void scenario_mixed_tapes(void) {
  MPI_Comm comm = scenario_begin("mixed_tapes");
  rec tp[2];
  rec_ring(&tp[0], comm, 2, 1);
  rec_ring(&tp[1], comm, 3, 1);
  int order[4] = {mt_rank == 0 ? 0 : 1, mt_rank == 0 ? 1 : 0, 0, 1};
  sweep_steps(tp, order, 2);
  destroy_all(tp, 2);
  MPI_Comm_free(&comm);
  /* Whether the mismatch is seen at once or by a timeout, a new recording
   * over a new communicator goes right. */
  comm = scenario_begin("mixed_tapes_after");
  rec_ring(&tp[0], comm, 2, 1);
  MT_CHECK(sweep_steps(tp, order + 2, 1) == 1);
  destroy_all(tp, 1);
  MPI_Comm_free(&comm);
}

/* A tape with point-to-point traffic only next to one with collectives only,
 * rank 0 sweeping them in the other order: nobody may get AD_OK with a
 * mixed pairing (here the handshakes cannot meet: all time out). */
static void scenario_p2p_beside_coll(void) {
  MPI_Comm comm = scenario_begin("p2p_beside_coll");
  rec tp[2];
  rec_ring(&tp[0], comm, 2, 0);
  rec_coll(&tp[1], comm, 3);
  int order[2] = {mt_rank == 0 ? 0 : 1, mt_rank == 0 ? 1 : 0};
  MT_CHECK(sweep_steps(tp, order, 2) == 0);
  destroy_all(tp, 2);
  MPI_Comm_free(&comm);
}

/* Sub-communicators: each tape uses its half (split by rank parity) and the
 * world; rank 0 sweeps A then B, the others B then A.
 * Then tapes on the halves only next to one on the world only, the halves
 * taking them in opposite orders: that pairs every recording with itself
 * (the halves' handshakes do not meet the world's), so all of it goes
 * right. */
static void scenario_subcomms(void) {
  MPI_Comm world = scenario_begin("subcomms"), sub;
  MPI_Comm_split(world, mt_rank % 2, mt_rank, &sub);
  rec tp[2];
  rec_sub(&tp[0], sub, world, 2);
  rec_sub(&tp[1], sub, world, 3);
  int order[4] = {mt_rank == 0 ? 0 : 1, mt_rank == 0 ? 1 : 0, 0, 1};
  MT_CHECK(sweep_steps(tp, order, 2) == 0);
  MT_CHECK(sweep_steps(tp, order + 2, 2) == 2);
  destroy_all(tp, 2);

  scenario = "subcomms_disjoint";
  rec_coll(&tp[0], sub, 2);
  rec_coll(&tp[1], world, 3);
  int half[2] = {mt_rank % 2 ? 1 : 0, mt_rank % 2 ? 0 : 1};
  /* The ranks of one half sweep A while the other half's sweep of B waits
   * for them: the steps are not in lock-step here. */
  int right[2];
  for (int i = 0; i < 2; i++) {
    MT_CHECK(sweep(&tp[half[i]], &right[i], NULL) == 1);
    MT_CHECK(right[i]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  destroy_all(tp, 2);
  MPI_Comm_free(&sub);
  MPI_Comm_free(&world);
}

/* ------------------------------------------------------------------------ */
/* Recovery after a sweep that timed out                                     */
/* ------------------------------------------------------------------------ */

/* Rank 1 does not sweep tape A; the others time out. A new recording over
 * the same communicator (a ring, then an allreduce: the first collective
 * comes after point-to-point traffic), swept by all ranks, gives the closed
 * form, and A's sweep is refused on every rank, at once. With `p2p`, the
 * tapes use the ring only, and ad_mpi_comm_prepare, collective, renews the
 * communicator before the new recording. */
static void scenario_recover(int p2p) {
  MPI_Comm comm = scenario_begin(p2p ? "recover_p2p" : "recover");
  rec a, b;
  if (p2p)
    rec_ring(&a, comm, 2, 0);
  else
    rec_coll(&a, comm, 2);
  if (mt_rank != 1) {
    int right;
    MT_CHECK(sweep(&a, &right, NULL) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (p2p) MT_CHECK(ad_mpi_comm_prepare(comm) == MPI_SUCCESS);
  rec_ring(&b, comm, 3, !p2p);
  int order = 0;
  MT_CHECK(sweep_steps(&b, &order, 1) == 1);
  /* the old recording: refused everywhere, without waiting */
  int right;
  double sec;
  MT_CHECK(sweep(&a, &right, &sec) == 0);
  MT_CHECK(sec < TIMEOUT / 2);
  MT_CHECK(strstr(ad_tape_error_message(a.t), "record again") != NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  /* and the new one again, still right */
  MT_CHECK(sweep_steps(&b, &order, 1) == 1);
  ad_tape_destroy(a.t);
  ad_tape_destroy(b.t);
  MPI_Comm_free(&comm);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  /* Before any other call of the MPI layer: it wins over the harness's
   * ARIADNE_MPI_TIMEOUT. */
  ad_mpi_set_timeout(TIMEOUT);
  if (mt_size > 1) {
    scenario_two_tapes();
    scenario_three_tapes();
    scenario_mixed_tapes();
    scenario_p2p_beside_coll();
    scenario_subcomms();
    scenario_recover(0);
    scenario_recover(1);
  }
  return mt_finalize();
}
