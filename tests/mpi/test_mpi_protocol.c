/* SPDX-License-Identifier: BSD-3-Clause */
/* The sweep protocol: seeding, tags, sequence numbers, the handshake's view
 * of the two sides, requests across ad_tape_reset_to, and the messages failed
 * sweeps leave. Derivatives are judged by closed forms. */
#include "mtest.h"

#ifndef ARIADNE_PASSIVE

/* Partners in a ring. */
static int next_rank(void) { return (mt_rank + 1) % mt_size; }
static int prev_rank(void) { return (mt_rank + mt_size - 1) % mt_size; }

/* A passive seed on a tape with communication records is not an error: the
 * rank still sweeps, as with ad_gradient. */
static void test_passive_seed(void) {
  ad_tape *t = ad_tape_create();
  double x0 = 1.5 + 0.25 * mt_rank;
  ad_tape_begin(t);
  ad_real x = ad_input(x0), r;
  ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next_rank(), 7, &r, 1, AD_MPI_REAL, prev_rank(), 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
  int owner = mt_rank % 2 == 1 || mt_size == 1;
  ad_real y = owner ? ad_mul(3.0, ad_mul(r, r)) : ad_const(0.0);
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  int rc = ad_reverse(t);
  MT_CHECK(rc == AD_OK);
  /* dy_{next}/dx = 6 x on this rank if the next rank owns an output. */
  int next_owns = next_rank() % 2 == 1 || mt_size == 1;
  MT_CLOSE(ad_adjoint(t, x), next_owns ? 6.0 * x0 : 0.0, 1e-14);
  ad_tape_destroy(t);
}

/* Tags that agree in their low 12 bits (and differ only above bit 12) with
 * the same partner: each adjoint goes back on its own message. */
static void test_high_tags(void) {
  int tags[] = {4, 4 + 4096, 4 + 2 * 4096, 4 + (1 << 14), 0};
  int nt = (int)(sizeof tags / sizeof tags[0]);
  int ub_flag = 0, *ub = NULL;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &ub_flag);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[5], r[5], y = ad_const(0.0);
  for (int i = 0; i < nt; i++) x[i] = ad_input(1.0 + i + mt_rank);
  ad_mpi_request q[10];
  for (int i = 0; i < nt; i++) ad_mpi_irecv(&r[nt - 1 - i], 1, AD_MPI_REAL, prev_rank(), tags[nt - 1 - i], MPI_COMM_WORLD, &q[i]);
  for (int i = 0; i < nt; i++) ad_mpi_isend(&x[i], 1, AD_MPI_REAL, next_rank(), tags[i], MPI_COMM_WORLD, &q[nt + i]);
  ad_mpi_waitall(2 * nt, q, MPI_STATUSES_IGNORE);
  /* y = sum_i (i+1) r_i^2 */
  for (int i = 0; i < nt; i++) y = ad_add(y, ad_mul((double)(i + 1), ad_mul(r[i], r[i])));
  ad_tape_end(t);
  double g[5];
  int rc = ad_gradient(t, y, (size_t)nt, x, g);
  MT_CHECK(rc == AD_OK);
  if (rc != AD_OK) fprintf(stderr, "[%d] high tags: %s\n", mt_rank, ad_tape_error_message(t));
  for (int i = 0; i < nt; i++) MT_CLOSE(g[i], 2.0 * (i + 1) * (1.0 + i + mt_rank), 1e-14); /* y on the next rank */
  ad_tape_destroy(t);
  (void)ub;
}

/* A message sent active and received as MPI_DOUBLE outside any recording
 * does not shift the streams of a later recording. */
static void test_sequence_per_recording(void) {
  if (mt_size < 2) return;
  if (mt_rank == 0) {
    ad_real v = ad_const(2.0);
    ad_mpi_send(&v, 1, AD_MPI_REAL, 1, 11, MPI_COMM_WORLD);
  } else if (mt_rank == 1) {
    double v;
    MPI_Recv(&v, 1, MPI_DOUBLE, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(2.0 + mt_rank), y = ad_const(0.0);
  if (mt_rank == 0) {
    ad_mpi_send(&x, 1, AD_MPI_REAL, 1, 11, MPI_COMM_WORLD);
  } else if (mt_rank == 1) {
    ad_real r;
    ad_mpi_recv(&r, 1, AD_MPI_REAL, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    y = ad_mul(r, ad_mul(r, r));
  }
  ad_tape_end(t);
  double g = -1;
  int rc = ad_gradient(t, y, 1, &x, &g);
  MT_CHECK(rc == (mt_rank < 2 ? AD_OK : AD_ERR_PASSIVE)); /* the others recorded nothing */
  if (rc != AD_OK && mt_rank < 2) fprintf(stderr, "[%d] per recording: %s\n", mt_rank, ad_tape_error_message(t));
  if (mt_rank < 2) MT_CLOSE(g, mt_rank == 0 ? 3.0 * 2.0 * 2.0 : 0.0, 1e-14);
  ad_tape_destroy(t);
}

/* One rank runs a reverse sweep while its partner runs a tangent sweep of
 * the same program: both fail, neither returns a number. */
static void test_direction_mismatch(void) {
  if (mt_size < 2) return;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0 + mt_rank), r;
  ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next_rank(), 3, &r, 1, AD_MPI_REAL, prev_rank(), 3, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
  ad_real y = ad_mul(r, x);
  ad_tape_end(t);
  int rc;
  if (mt_rank == 0) {
    double g;
    rc = ad_gradient(t, y, 1, &x, &g);
  } else {
    ad_tangent_seed(t, x, 1.0);
    rc = ad_forward(t);
  }
  /* Ranks away from rank 0 may legitimately agree among themselves. */
  if (mt_rank == 0 || mt_rank == 1 || mt_rank == mt_size - 1) {
    MT_CHECK(rc == AD_ERR_MPI);
    MT_CHECK(strlen(ad_tape_error_message(t)) > 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* y_r = x_{r-1} x_r; dJ/dx_r with J = sum of y over ranks seeded locally:
   * x_{r-1} + x_{r+1} (2 x_r when they coincide). */
  double expect = (1.0 + prev_rank()) + (1.0 + next_rank());
  /* The next sweep, the same on all ranks, is right where every rank found
   * the mismatch in the handshake (up to 3 ranks, all neighbours of rank 0).
   * With more, two tangent ranks away from rank 0 agreed and one of them
   * waited in vain for its partner's tangent: that rank retired the
   * communicator, and every later sweep over it fails rather than pair with
   * what the failed sweep left behind. */
  double g = 0;
  rc = ad_gradient(t, y, 1, &x, &g);
  if (mt_size <= 3) {
    MT_CHECK(rc == AD_OK);
    MT_CLOSE(g, expect, 1e-14);
  } else {
    MT_CHECK(rc == AD_ERR_MPI);
  }
  ad_tape_destroy(t);
  /* The same program recorded over a fresh communicator is right everywhere. */
  MPI_Comm fresh;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  t = ad_tape_create();
  ad_tape_begin(t);
  x = ad_input(1.0 + mt_rank);
  ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next_rank(), 3, &r, 1, AD_MPI_REAL, prev_rank(), 3, fresh, MPI_STATUS_IGNORE);
  y = ad_mul(r, x);
  ad_tape_end(t);
  g = 0;
  MT_CHECK(ad_gradient(t, y, 1, &x, &g) == AD_OK);
  MT_CLOSE(g, expect, 1e-14);
  ad_tape_destroy(t);
  MPI_Comm_free(&fresh);
}

/* Two tapes with the same communication swept in opposite orders. */
static void test_tape_order(void) {
  if (mt_size != 2) return;
  ad_tape *a = ad_tape_create(), *b = ad_tape_create();
  ad_real xa, ya, xb, yb;
  for (int k = 0; k < 2; k++) {
    ad_tape *t = k ? b : a;
    ad_tape_begin(t);
    ad_real x = ad_input(1.0 + mt_rank + 10 * k), r;
    ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next_rank(), 3, &r, 1, AD_MPI_REAL, prev_rank(), 3, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE);
    ad_real y = ad_mul(r, ad_mul(r, (double)(k + 1)));
    ad_tape_end(t);
    if (k) { xb = x; yb = y; } else { xa = x; ya = y; }
  }
  double ga = 0, gb = 0;
  int rca, rcb;
  if (mt_rank == 0) {
    rca = ad_gradient(a, ya, 1, &xa, &ga);
    rcb = ad_gradient(b, yb, 1, &xb, &gb);
  } else {
    rcb = ad_gradient(b, yb, 1, &xb, &gb);
    rca = ad_gradient(a, ya, 1, &xa, &ga);
  }
  /* Either an error, or the right numbers: y_r = (k+1) x_{r-1}^2, and the
   * gradient on rank r is 2 (k+1) x_r (the partner is seeded). */
  if (rca == AD_OK) MT_CLOSE(ga, 2.0 * (1.0 + mt_rank), 1e-14);
  if (rcb == AD_OK) MT_CLOSE(gb, 4.0 * (11.0 + mt_rank), 1e-14);
  MT_CHECK(rca == AD_ERR_MPI || rcb == AD_ERR_MPI);
  ad_tape_destroy(a);
  ad_tape_destroy(b);
}

/* ad_jacobian with 3 inputs and 1 output on even ranks and 1 input and 3
 * outputs on odd ones: the ranks agree on one mode (3 reverse sweeps, the
 * largest m and n being 3 and 3) and the Jacobian is right. Rank p: inputs
 * x (n_p of them), sends s_p = sum_i (i+1) x_i to the next rank, receives
 * r_p = s_{p-1}, outputs y_j = (j+1) r_p s_p. Reverse sweep j seeds y_j on
 * every rank that has it, so this rank's row j is
 * d(y_j on this rank + y_j on the next rank)/dx
 * = (j+1)(i+1) (r_p [j < m_p] + s_{p+1} [j < m_{p+1}]). */
static double s_of(int p) {
  double s = 0;
  for (int i = 0; i < (p % 2 == 0 ? 3 : 1); i++) s += (i + 1) * (0.5 + i + p);
  return s;
}

static void test_jacobian_mode(void) {
  int n = mt_rank % 2 == 0 ? 3 : 1, m = mt_rank % 2 == 0 ? 1 : 3;
  int m_next = next_rank() % 2 == 0 ? 1 : 3;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[3], y[3], s = ad_const(0.0), r;
  for (int i = 0; i < n; i++) {
    x[i] = ad_input(0.5 + i + mt_rank);
    s = ad_add(s, ad_mul((double)(i + 1), x[i]));
  }
  ad_mpi_sendrecv(&s, 1, AD_MPI_REAL, next_rank(), 9, &r, 1, AD_MPI_REAL, prev_rank(), 9, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
  for (int j = 0; j < m; j++) y[j] = ad_mul((double)(j + 1), ad_mul(r, s));
  ad_tape_end(t);
  double J[9];
  int rc = ad_jacobian(t, (size_t)m, y, (size_t)n, x, J);
  MT_CHECK(rc == AD_OK);
  if (rc != AD_OK) fprintf(stderr, "[%d] jacobian: %s\n", mt_rank, ad_tape_error_message(t));
  MT_CLOSE(ad_value(r), s_of(prev_rank()), 1e-15);
  for (int j = 0; j < m; j++)
    for (int i = 0; i < n; i++) {
      double e = (j + 1) * (i + 1) * (ad_value(r) + (j < m_next ? s_of(next_rank()) : 0.0));
      MT_CLOSE(J[j * n + i], e, 1e-14);
    }
  ad_tape_destroy(t);
}

/* Requests started while recording, then ad_tape_reset_to a position before
 * them, then the wait: a clean error or correct behaviour, never a use of
 * freed records. */
static void test_reset_before_requests(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(2.0 + mt_rank), r = ad_const(0.0);
  ad_tape_pos p = ad_tape_position(t);
  ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
  ad_mpi_irecv(&r, 1, AD_MPI_REAL, prev_rank(), 21, MPI_COMM_WORLD, &q[0]);
  ad_mpi_isend(&x, 1, AD_MPI_REAL, next_rank(), 21, MPI_COMM_WORLD, &q[1]);
  MT_CHECK(ad_tape_reset_to(t, p) == AD_OK);
  ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
  MT_CLOSE(ad_value(r), 2.0 + prev_rank(), 0.0);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  ad_tape_destroy(t);
  MPI_Barrier(MPI_COMM_WORLD);
}

/* A sweep that gives up on a communicator's private duplicate (a partner
 * never called a wrapper on the communicator) leaves its message on the tape. */
static void test_failed_sweep_message(void) {
  if (mt_size < 2) return;
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  ad_mpi_set_timeout(2.0);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0), y = x;
  if (mt_rank == 0) /* a message to itself starts the duplicate, which the others never join */
    ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, 0, 5, &y, 1, AD_MPI_REAL, 0, 5, c, MPI_STATUS_IGNORE);
  ad_tape_end(t);
  if (mt_rank == 0) {
    double g;
    int rc = ad_gradient(t, y, 1, &x, &g);
    MT_CHECK(rc == AD_ERR_MPI);
    MT_CHECK(strstr(ad_tape_error_message(t), "duplicate") != NULL);
    if (!strstr(ad_tape_error_message(t), "duplicate"))
      fprintf(stderr, "[%d] message after a failed sweep: '%s'\n", mt_rank, ad_tape_error_message(t));
  }
  ad_tape_destroy(t);
  MPI_Barrier(MPI_COMM_WORLD);
  ad_mpi_comm_prepare(c); /* the others join the duplicate, so that it completes */
  ad_mpi_set_timeout(5.0);
  MPI_Comm_free(&c);
}

#endif

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
#ifndef ARIADNE_PASSIVE
  /* Ranks two partners away from a mismatched sweep wait for a partner that
   * gave up: keep that short. */
  ad_mpi_set_timeout(5.0);
  test_passive_seed(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done passive_seed\n", mt_rank);
  test_high_tags(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done high_tags\n", mt_rank);
  test_sequence_per_recording(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done sequence_per_recording\n", mt_rank);
  test_jacobian_mode(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done jacobian_mode\n", mt_rank);
  test_reset_before_requests(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done reset_before_requests\n", mt_rank);
  test_direction_mismatch(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done direction_mismatch\n", mt_rank);
  test_tape_order(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done tape_order\n", mt_rank);
  test_failed_sweep_message(); if (getenv("MT_TRACE")) fprintf(stderr, "[%d] done failed_sweep_message\n", mt_rank);
#endif
  return mt_finalize();
}
