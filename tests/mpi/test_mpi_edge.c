/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Edge cases of the collectives: scan adjoints that a total-minus-prefix
 * formula would cancel, MIN/MAX with NaN contributions and ties (exactly one
 * owner, consistent with the returned value), and datatypes built from
 * AD_MPI_REAL (refused with MPI_ERR_TYPE, never passed through as raw
 * structs), communicators freed while their private duplicate is under way,
 * a sweep after a sweep that timed out, a tape reset after it communicated.
 * Derivatives are judged by closed forms.
 */
#include "mtest.h"

/* y = scan(x) (or exscan); rank k's objective c_k y_k, c_0 = 1e16, others 1;
 * every rank seeds its own: dJ/dx_r = sum of c_k over k >= r (k > r for
 * exscan). Formed as total - prefix + own, rank 1 of three would get 0. */
static void test_scan_cancellation(void) {
  for (int ex = 0; ex < 2; ex++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(1.0 + mt_rank), y = ad_const(0.0);
    if (ex)
      MT_CHECK(ad_mpi_exscan(&x, &y, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    else
      MT_CHECK(ad_mpi_scan(&x, &y, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (ex && mt_rank == 0) y = ad_const(0.0); /* undefined there */
    double c = mt_rank == 0 ? 1e16 : 1.0;
    ad_real J = ad_mul(y, c);
    ad_tape_end(t);
    double g = -1.0;
    MT_CHECK(ad_gradient(t, J, 1, &x, &g) == AD_OK);
    /* ranks above 0 sum ones only: exact. Rank 0's scan adjoint is
     * 1e16 + (size - 1), rounded once in whatever order the ranks add. */
    double want = 0.0, tol = 0.0;
    for (int k = mt_size - 1; k >= (ex ? mt_rank + 1 : mt_rank); k--) want += k == 0 ? 1e16 : 1.0;
    if (!ex && mt_rank == 0) tol = 4.0; /* two units in the last place of 1e16 */
    if (!(fabs(g - want) <= tol)) {
      mt_errors++;
      fprintf(stderr, "[%d] %s adjoint %.17g, want %.17g\n", mt_rank, ex ? "exscan" : "scan", g, want);
    }
    ad_tape_destroy(t);
  }
}

/* MAX and MIN with a NaN on some ranks, and with ties: the result is NaN
 * everywhere when any contribution is NaN, and the whole adjoint goes to one
 * rank: the lowest with a NaN, or (no NaN) the lowest owner of the extremum. */
static void test_minmax_nan(void) {
  for (int pattern = 0; pattern < 3; pattern++) {
    for (int opi = 0; opi < 2; opi++) {
      MPI_Op op = opi ? MPI_MIN : MPI_MAX;
      double v = 2.0; /* pattern 0: all tie */
      int nan_rank = -1;
      if (pattern == 1) {
        nan_rank = mt_size > 1 ? 1 : 0; /* one NaN */
        v = mt_rank == nan_rank ? NAN : 1.0 + mt_rank;
      } else if (pattern == 2) {
        nan_rank = mt_size > 2 ? mt_size - 2 : 0; /* NaNs from a middle rank on */
        v = mt_rank >= nan_rank ? NAN : 3.0 - mt_rank;
      }
      for (int all = 0; all < 2; all++) {
        ad_tape *t = ad_tape_create();
        ad_tape_begin(t);
        ad_real x = ad_input(v), y = ad_const(0.0);
        int rc = all ? ad_mpi_allreduce(&x, &y, 1, AD_MPI_REAL, op, MPI_COMM_WORLD)
                     : ad_mpi_reduce(&x, &y, 1, AD_MPI_REAL, op, 0, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS);
        ad_tape_end(t);
        if (all || mt_rank == 0) {
          if (nan_rank >= 0)
            MT_CHECK(isnan(ad_value(y)));
          else
            MT_CHECK(ad_value(y) == 2.0);
        }
        double g = -1.0;
        MT_CHECK(ad_gradient(t, mt_rank == 0 ? y : ad_const(0.0), 1, &x, &g) == AD_OK);
        int owner = nan_rank >= 0 ? nan_rank : 0;
        double want = mt_rank == owner ? 1.0 : 0.0;
        if (!(g == want)) {
          mt_errors++;
          fprintf(stderr, "[%d] %s %s pattern %d: adjoint %g, want %g\n", mt_rank, all ? "allreduce" : "reduce",
                  opi ? "MIN" : "MAX", pattern, g, want);
        }
        ad_tape_destroy(t);
      }
    }
  }
}

/* Datatypes built from AD_MPI_REAL that Ariadne cannot differentiate are
 * refused (every rank calls, so nothing waits for a partner): a darray, and
 * a predefined reduction on a derived type, which MPI refuses too. The same
 * types built from MPI_DOUBLE pass through. (test_mpi_types covers the
 * derived types that work.) */
static void test_derived_types(void) {
  MPI_Datatype c3, v2, dc3, da;
  MPI_Type_contiguous(3, AD_MPI_REAL, &c3);
  MPI_Type_commit(&c3);
  MPI_Type_vector(2, 1, 2, c3, &v2); /* nested */
  MPI_Type_commit(&v2);
  MPI_Type_contiguous(3, MPI_DOUBLE, &dc3);
  MPI_Type_commit(&dc3);
  int gs[1] = {2 * mt_size}, distrib[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
      psizes[1] = {mt_size};
  MPI_Type_create_darray(mt_size, mt_rank, 1, gs, distrib, dargs, psizes, MPI_ORDER_C, c3, &da);
  MPI_Type_commit(&da);
  int partner = (mt_rank ^ 1) < mt_size ? (mt_rank ^ 1) : mt_rank;
  for (int which = 0; which < 3; which++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real a[64], b[64];
    for (int i = 0; i < 64; i++) {
      a[i] = ad_input(i + 0.5);
      b[i] = ad_const(0.0);
    }
    int rc;
    if (which == 0)
      rc = ad_mpi_sendrecv(a, 1, da, partner, 5, b, 1, da, partner, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (which == 1)
      rc = ad_mpi_allreduce(a, b, 1, v2, MPI_SUM, MPI_COMM_WORLD);
    else
      rc = ad_mpi_bcast(a, 1, da, 0, MPI_COMM_WORLD);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    MT_CHECK(cls == (which == 1 ? MPI_ERR_OP : MPI_ERR_TYPE));
    MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
    const char *want = which == 0 ? "ad_mpi_sendrecv" : which == 1 ? "ad_mpi_allreduce" : "ad_mpi_bcast";
    MT_CHECK(strstr(ad_tape_error_message(t), want) != NULL);
    MT_CHECK(strstr(ad_tape_error_message(t), "AD_MPI_REAL") != NULL);
    ad_tape_end(t);
    ad_tape_destroy(t);
  }
  /* passive derived type of doubles: plain MPI */
  double pa[3] = {1.0 + mt_rank, 2.0, 3.0}, pb[3] = {0, 0, 0};
  MT_CHECK(ad_mpi_sendrecv(pa, 1, dc3, partner, 6, pb, 1, dc3, partner, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
           MPI_SUCCESS);
  MT_CHECK(pb[0] == 1.0 + partner && pb[2] == 3.0);
  MPI_Type_free(&da);
  MPI_Type_free(&v2);
  MPI_Type_free(&c3);
  MPI_Type_free(&dc3);
}

/* A tape recording its input x = 1 + rank, s = the sum of x over c and its
 * output y = s * x (s * s when square is set). */
static ad_tape *record_sum(MPI_Comm c, int square, ad_real *x, ad_real *y) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real s = ad_const(0.0);
  *x = ad_input(1.0 + mt_rank);
  MT_CHECK(ad_mpi_allreduce(x, &s, 1, AD_MPI_REAL, MPI_SUM, c) == MPI_SUCCESS);
  *y = ad_mul(s, square ? s : *x);
  ad_tape_end(t);
  return t;
}

/* A communicator freed right after a wrapper call, while its private
 * duplicate is still under way (MPICH then defers the free): no tape, a
 * recording tape swept after the free (a clean AD_ERR_MPI), and MPI_Finalize
 * with such communicators behind. */
static void test_freed_comms(void) {
  for (int it = 0; it < 20; it++) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    ad_real x = ad_const(1.0 + mt_rank), s = ad_const(0.0);
    MT_CHECK(ad_mpi_allreduce(&x, &s, 1, AD_MPI_REAL, MPI_SUM, c) == MPI_SUCCESS);
    MT_CHECK(ad_value(s) == mt_size * (mt_size + 1) / 2.0);
    MPI_Comm_free(&c);
    MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - mt_rank, &c);
    ad_real a[2] = {ad_const(mt_rank), ad_const(2.0)};
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    MT_CHECK(ad_mpi_sendrecv_replace(a, 2, AD_MPI_REAL, (r + 1) % n, it, (r + n - 1) % n, it, c, MPI_STATUS_IGNORE) ==
             MPI_SUCCESS);
    MPI_Comm_free(&c);
  }
  ad_mpi_set_timeout(10.0);
  for (int it = 0; it < 3; it++) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    ad_real x, y;
    ad_tape *t = record_sum(c, 0, &x, &y);
    MPI_Comm_free(&c);
    double g = 0.0, t0 = MPI_Wtime();
    int rc = ad_gradient(t, y, 1, &x, &g);
    MT_CHECK(rc == AD_ERR_MPI);
    MT_CHECK(MPI_Wtime() - t0 < 9.0); /* refused, not timed out */
    MT_CHECK(strstr(ad_tape_error_message(t), "freed") != NULL);
    if (rc != AD_ERR_MPI || !strstr(ad_tape_error_message(t), "freed"))
      fprintf(stderr, "[%d] sweep after a free: %d '%s'\n", mt_rank, rc, ad_tape_error_message(t));
    ad_tape_destroy(t);
  }
  ad_mpi_set_timeout(60.0);
  /* the last one is left for MPI_Finalize, its duplicate under way */
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  ad_real x = ad_const(1.0), s;
  MT_CHECK(ad_mpi_allreduce(&x, &s, 1, AD_MPI_REAL, MPI_SUM, c) == MPI_SUCCESS);
  MPI_Comm_free(&c);
}

/* A sweep that timed out must not poison the next one: rank 0 sweeps alone
 * and gives up, then every rank sweeps a correct tape over the same
 * communicator. Each rank either gets the right gradient or an error; rank 0,
 * which left a handshake pending there, refuses at once. Collective and
 * point-to-point tapes. */
static void test_sweep_after_timeout(void) {
  if (mt_size < 2) return;
  ad_mpi_set_timeout(2.0);
  for (int p2p = 0; p2p < 2; p2p++) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    ad_mpi_comm_prepare(c);
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    ad_tape *t[2];
    ad_real x[2], y[2];
    for (int k = 0; k < 2; k++) {
      t[k] = ad_tape_create();
      ad_tape_begin(t[k]);
      x[k] = ad_input(1.0 + mt_rank);
      ad_real s = ad_const(0.0);
      if (p2p)
        MT_CHECK(ad_mpi_sendrecv(&x[k], 1, AD_MPI_REAL, right, 3, &s, 1, AD_MPI_REAL, left, 3, c, MPI_STATUS_IGNORE) ==
                 MPI_SUCCESS);
      else
        MT_CHECK(ad_mpi_allreduce(&x[k], &s, 1, AD_MPI_REAL, MPI_SUM, c) == MPI_SUCCESS);
      y[k] = ad_mul(s, s); /* every rank seeds its own */
      ad_tape_end(t[k]);
    }
    double g = 0.0;
    if (mt_rank == 0) MT_CHECK(ad_gradient(t[0], y[0], 1, &x[0], &g) == AD_ERR_MPI); /* alone */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = ad_gradient(t[1], y[1], 1, &x[1], &g);
    double sec = MPI_Wtime() - t0;
    /* closed forms: allreduce y_r = S^2, dJ/dx_r = sum over ranks 2S = 2 S n;
     * ring: y_r = x_left^2, so dJ/dx_r = 2 x_r (from the right neighbour) */
    double S = mt_size * (mt_size + 1) / 2.0;
    double want = p2p ? 2.0 * (1.0 + mt_rank) : 2.0 * S * mt_size;
    if (rc == AD_OK) {
      MT_CHECK(g == want);
      if (g != want)
        fprintf(stderr, "[%d] %s after a timeout: AD_OK with %g, want %g\n", mt_rank, p2p ? "ring" : "allreduce", g,
                want);
    }
    if (mt_rank == 0) {
      MT_CHECK(rc == AD_ERR_MPI && sec < 1.0);
      MT_CHECK(strstr(ad_tape_error_message(t[1]), "pending") != NULL);
    }
    for (int k = 0; k < 2; k++) ad_tape_destroy(t[k]);
    /* a fresh communicator works again */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    ad_real xu, yu;
    ad_tape *u = record_sum(d, 1, &xu, &yu);
    MT_CHECK(ad_gradient(u, yu, 1, &xu, &g) == AD_OK);
    MT_CHECK(g == 2.0 * S * mt_size);
    ad_tape_destroy(u);
    MPI_Comm_free(&d);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&c);
  }
  ad_mpi_set_timeout(60.0);
}

/* Wildcard receives completed out of order. Rank 0 posts an MPI_ANY_SOURCE
 * receive A, then a receive B from rank 1 (same tag), and waits for B first.
 * Rank 1 sends two values; with three or more ranks, rank 2 sends one too,
 * before rank 1, so that A may take rank 2's message and B rank 1's first.
 * MPI decides; the adjoints must follow whatever it decided: J = sum of
 * w_i * (value received by i), and each sender's dJ/dx is the weight of the
 * receive its message reached (read from the statuses and values). */
static void test_wildcard_order(void) {
  if (mt_size < 2) return;
  for (int order = 0; order < 2; order++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[2] = {ad_input(10.0 + mt_rank), ad_input(20.0 + mt_rank)};
    double g[2] = {0, 0};
    ad_real J = ad_const(0.0);
    const int tag = 7;
    if (mt_rank == 0) {
      int nrecv = mt_size > 2 ? 3 : 2;
      ad_real r[3];
      ad_mpi_request q[3];
      MT_CHECK(ad_mpi_irecv(&r[0], 1, AD_MPI_REAL, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &q[0]) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_irecv(&r[1], 1, AD_MPI_REAL, 1, tag, MPI_COMM_WORLD, &q[1]) == MPI_SUCCESS);
      if (nrecv == 3)
        MT_CHECK(ad_mpi_irecv(&r[2], 1, AD_MPI_REAL, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &q[2]) == MPI_SUCCESS);
      MPI_Barrier(MPI_COMM_WORLD); /* the receives are posted */
      MPI_Barrier(MPI_COMM_WORLD); /* rank 2 (if any) has sent */
      MPI_Status st[3];
      if (order == 0) {
        MT_CHECK(ad_mpi_wait(&q[1], &st[1]) == MPI_SUCCESS);
        MT_CHECK(ad_mpi_wait(&q[0], &st[0]) == MPI_SUCCESS);
      } else {
        if (nrecv == 3) MT_CHECK(ad_mpi_wait(&q[2], &st[2]) == MPI_SUCCESS);
        MT_CHECK(ad_mpi_wait(&q[1], &st[1]) == MPI_SUCCESS);
        MT_CHECK(ad_mpi_wait(&q[0], &st[0]) == MPI_SUCCESS);
      }
      if (nrecv == 3 && order == 0) MT_CHECK(ad_mpi_wait(&q[2], &st[2]) == MPI_SUCCESS);
      const double w[3] = {3.0, 5.0, 7.0};
      for (int i = 0; i < nrecv; i++) J = ad_add(J, ad_mul(w[i], r[i]));
      ad_tape_end(t);
      /* what each sender's values reached, from the values themselves */
      double want[3][2] = {{0}};
      for (int i = 0; i < nrecv; i++) {
        double v = ad_value(r[i]);
        int src = st[i].MPI_SOURCE, which = v >= 20.0 ? 1 : 0;
        MT_CHECK(v == (which ? 20.0 : 10.0) + src);
        if (src == 1 || src == 2) want[src][which] = w[i];
      }
      MT_CHECK(ad_gradient(t, J, 0, NULL, NULL) == AD_OK);
      double wsend[2][2] = {{want[1][0], want[1][1]}, {want[2][0], want[2][1]}};
      MPI_Send(wsend, 4, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD);
      if (mt_size > 2) MPI_Send(wsend[1], 2, MPI_DOUBLE, 2, 99, MPI_COMM_WORLD);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      if (mt_rank == 2) MT_CHECK(ad_mpi_send(&x[0], 1, AD_MPI_REAL, 0, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
      MPI_Barrier(MPI_COMM_WORLD);
      if (mt_rank == 1) {
        MT_CHECK(ad_mpi_send(&x[0], 1, AD_MPI_REAL, 0, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
        MT_CHECK(ad_mpi_send(&x[1], 1, AD_MPI_REAL, 0, tag, MPI_COMM_WORLD) == MPI_SUCCESS);
      }
      ad_tape_end(t);
      int rc = ad_gradient(t, J, 2, x, g);
      MT_CHECK(rc == (mt_rank <= 2 ? AD_OK : AD_ERR_PASSIVE)); /* the others recorded nothing */
      if (mt_rank <= 2) {
        /* rank 1: the weights its two values reached; rank 2: its one value's */
        double want[2][2] = {{0}};
        MPI_Recv(want, mt_rank == 1 ? 4 : 2, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double w0 = want[0][0], w1 = mt_rank == 1 ? want[0][1] : 0.0;
        if (!(g[0] == w0 && g[1] == w1)) {
          mt_errors++;
          fprintf(stderr, "[%d] wildcard order %d: adjoints %g %g, want %g %g\n", mt_rank, order, g[0], g[1], w0, w1);
        }
      }
    }
    ad_tape_destroy(t);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

/* A tape that communicated, reset and recorded again without communicating,
 * is a tape without communication records: each rank sweeps it alone (rank
 * 0 first, the others only after it: a collective sweep would hang), and a
 * passive output is a misuse again (AD_ERR_PASSIVE), as on a new tape.
 * Communicating again makes the sweep collective again. */
static void test_reset_after_comm(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0 + mt_rank), s = ad_mul(x, x), r = ad_const(0.0);
  MT_CHECK(ad_mpi_allreduce(&s, &r, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  ad_tape_end(t);
  double g = 0.0;
  MT_CHECK(ad_gradient(t, mt_rank == 0 ? r : ad_const(ad_value(r)), 1, &x, &g) == AD_OK);
  MT_CHECK(g == 2.0 * (1.0 + mt_rank)); /* rank 0 seeds the sum of every rank's x^2 */
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real z = ad_input(2.0), w = ad_mul(z, z);
  ad_tape_end(t);
  for (int turn = 0; turn < 2; turn++) {
    if ((mt_rank == 0) == (turn == 0)) {
      double gz = 0.0, gp = 7.0;
      MT_CHECK(ad_gradient(t, w, 1, &z, &gz) == AD_OK && gz == 4.0);
      MT_CHECK(ad_gradient(t, ad_const(3.0), 1, &z, &gp) == AD_ERR_PASSIVE && gp == 0.0);
      MT_CHECK(ad_gradient(t, w, 1, &z, &gz) == AD_OK && gz == 4.0); /* not sticky */
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  /* and a third recording that communicates is collective again */
  ad_tape_reset(t);
  ad_tape_begin(t);
  x = ad_input(1.0 + mt_rank);
  s = ad_mul(x, x);
  MT_CHECK(ad_mpi_allreduce(&s, &r, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  ad_tape_end(t);
  g = 0.0;
  MT_CHECK(ad_gradient(t, mt_rank == 0 ? r : ad_const(ad_value(r)), 1, &x, &g) == AD_OK);
  MT_CHECK(g == 2.0 * (1.0 + mt_rank));
  ad_tape_destroy(t);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  test_scan_cancellation();
  test_minmax_nan();
  test_derived_types();
  test_freed_comms();
  test_wildcard_order();
  test_sweep_after_timeout();
  test_reset_after_comm();
  return mt_finalize();
}
