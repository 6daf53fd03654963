/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI layer beyond single patterns: sub-communicators, tapes swept many
 * times and re-recorded, the gradient and Jacobian drivers on tapes with
 * communication records, passive datatypes through every wrapper,
 * MPI_PROC_NULL partners, ad_mpi_testall, sendrecv_replace, communication
 * statistics, and communication on MPI_COMM_SELF.
 *
 * The same file is also compiled with ARIADNE_PASSIVE: then every wrapper is
 * its MPI twin and only the comparison of values with plain MPI runs. */
#include "mtest.h"

#define N 3


/* ------------------------------------------------------------------------ */
/* Values: every wrapper on AD_MPI_REAL against plain MPI on MPI_DOUBLE      */
/* ------------------------------------------------------------------------ */

static int same(const ad_real *a, const double *b, int n) {
  for (int i = 0; i < n; i++)
    if (ad_value(a[i]) != b[i]) return 0;
  return 1;
}

/* The wrappers' values equal plain MPI's, element for element, for data that
 * depends on the rank. Active or passive build alike; in the active build
 * the wrappers record too (on `t`), which must not change any value. */
static void values_vs_plain(void) {
  int p = mt_size, me = mt_rank, partner = me ^ 1;
  if (partner >= p) partner = me;
  MPI_Comm w = MPI_COMM_WORLD;
  int np = p * N;
  ad_real *a = calloc((size_t)np + 1, sizeof *a), *b = calloc((size_t)np + 1, sizeof *b);
  double *pa = calloc((size_t)np + 1, sizeof *pa), *pb = calloc((size_t)np + 1, sizeof *pb);
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  for (int j = 0; j < p; j++) {
    cnt[j] = 1 + j % N;
    dsp[j] = j * N;
  }
  unsigned long long seed = 99 + (unsigned long long)me;
#define FILL()                                                                                                         \
  for (int i = 0; i < np; i++) {                                                                                       \
    pa[i] = 1.0 + 0.5 * i + 10.0 * me + mt_rand(&seed);                                                                \
    a[i] = ad_input(pa[i]);                                                                                            \
    pb[i] = -1.0;                                                                                                      \
    b[i] = ad_const(-1.0);                                                                                             \
  }
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);

  FILL();
  MPI_Status st;
  MT_CHECK(ad_mpi_sendrecv(a, N, AD_MPI_REAL, mt_right(), 1, b, N, AD_MPI_REAL, mt_left(), 1, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(pa, N, MPI_DOUBLE, mt_right(), 1, pb, N, MPI_DOUBLE, mt_left(), 1, w, MPI_STATUS_IGNORE);
  MT_CHECK(same(b, pb, N));
  FILL();
  MT_CHECK(ad_mpi_sendrecv_replace(a, N, AD_MPI_REAL, mt_right(), 2, mt_left(), 2, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv_replace(pa, N, MPI_DOUBLE, mt_right(), 2, mt_left(), 2, w, MPI_STATUS_IGNORE);
  MT_CHECK(same(a, pa, N));
  FILL();
  {
    ad_mpi_request q[2];
    MPI_Request pq[2];
    MPI_Status sts[2];
    MT_CHECK(ad_mpi_irecv(b, N, AD_MPI_REAL, partner, 3, w, &q[0]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_isend(a, N, AD_MPI_REAL, partner, 3, w, &q[1]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_waitall(2, q, sts) == MPI_SUCCESS);
    MPI_Irecv(pb, N, MPI_DOUBLE, partner, 3, w, &pq[0]);
    MPI_Isend(pa, N, MPI_DOUBLE, partner, 3, w, &pq[1]);
    MPI_Waitall(2, pq, sts);
    MT_CHECK(same(b, pb, N));
  }
  FILL();
  MT_CHECK(ad_mpi_bcast(a, N, AD_MPI_REAL, p - 1, w) == MPI_SUCCESS);
  MPI_Bcast(pa, N, MPI_DOUBLE, p - 1, w);
  MT_CHECK(same(a, pa, N));
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  for (int o = 0; o < 4; o++) {
    FILL();
    MT_CHECK(ad_mpi_allreduce(a, b, N, AD_MPI_REAL, ops[o], w) == MPI_SUCCESS);
    MPI_Allreduce(pa, pb, N, MPI_DOUBLE, ops[o], w);
    MT_CHECK(same(b, pb, N));
    FILL();
    MT_CHECK(ad_mpi_reduce(a, b, N, AD_MPI_REAL, ops[o], 0, w) == MPI_SUCCESS);
    MPI_Reduce(pa, pb, N, MPI_DOUBLE, ops[o], 0, w);
    MT_CHECK(same(b, pb, N));
    FILL();
    MT_CHECK(ad_mpi_reduce_scatter_block(a, b, 1, AD_MPI_REAL, ops[o], w) == MPI_SUCCESS);
    MPI_Reduce_scatter_block(pa, pb, 1, MPI_DOUBLE, ops[o], w);
    MT_CHECK(same(b, pb, 1));
  }
  FILL();
  MT_CHECK(ad_mpi_scan(a, b, N, AD_MPI_REAL, MPI_SUM, w) == MPI_SUCCESS);
  MPI_Scan(pa, pb, N, MPI_DOUBLE, MPI_SUM, w);
  MT_CHECK(same(b, pb, N));
  FILL();
  MT_CHECK(ad_mpi_exscan(a, b, N, AD_MPI_REAL, MPI_SUM, w) == MPI_SUCCESS);
  MPI_Exscan(pa, pb, N, MPI_DOUBLE, MPI_SUM, w);
  if (me > 0) MT_CHECK(same(b, pb, N)); /* rank 0's result is undefined */
  FILL();
  MT_CHECK(ad_mpi_gather(a, N, AD_MPI_REAL, b, N, AD_MPI_REAL, 0, w) == MPI_SUCCESS);
  MPI_Gather(pa, N, MPI_DOUBLE, pb, N, MPI_DOUBLE, 0, w);
  if (me == 0) MT_CHECK(same(b, pb, np));
  FILL();
  MT_CHECK(ad_mpi_gatherv(a, cnt[me], AD_MPI_REAL, b, cnt, dsp, AD_MPI_REAL, 0, w) == MPI_SUCCESS);
  MPI_Gatherv(pa, cnt[me], MPI_DOUBLE, pb, cnt, dsp, MPI_DOUBLE, 0, w);
  if (me == 0) MT_CHECK(same(b, pb, np));
  FILL();
  MT_CHECK(ad_mpi_scatter(a, N, AD_MPI_REAL, b, N, AD_MPI_REAL, 0, w) == MPI_SUCCESS);
  MPI_Scatter(pa, N, MPI_DOUBLE, pb, N, MPI_DOUBLE, 0, w);
  MT_CHECK(same(b, pb, N));
  FILL();
  MT_CHECK(ad_mpi_scatterv(a, cnt, dsp, AD_MPI_REAL, b, cnt[me], AD_MPI_REAL, 0, w) == MPI_SUCCESS);
  MPI_Scatterv(pa, cnt, dsp, MPI_DOUBLE, pb, cnt[me], MPI_DOUBLE, 0, w);
  MT_CHECK(same(b, pb, cnt[me]));
  FILL();
  MT_CHECK(ad_mpi_allgather(a, N, AD_MPI_REAL, b, N, AD_MPI_REAL, w) == MPI_SUCCESS);
  MPI_Allgather(pa, N, MPI_DOUBLE, pb, N, MPI_DOUBLE, w);
  MT_CHECK(same(b, pb, np));
  FILL();
  /* Plain MPI in place here: some MPI libraries (MPICH 4.0) put a separate
   * contribution at displacement 0 on a one-rank communicator, which the MPI
   * layer works around; the passive build is plain MPI and inherits it. */
  for (int i = 0; i < cnt[me]; i++) pb[dsp[me] + i] = pa[i];
  MT_CHECK(ad_mpi_allgatherv(a, cnt[me], AD_MPI_REAL, b, cnt, dsp, AD_MPI_REAL, w) == MPI_SUCCESS);
  MPI_Allgatherv(MPI_IN_PLACE, cnt[me], MPI_DOUBLE, pb, cnt, dsp, MPI_DOUBLE, w);
#ifdef ARIADNE_PASSIVE
  if (p > 1)
#endif
    for (int j = 0; j < p; j++) MT_CHECK(same(b + dsp[j], pb + dsp[j], cnt[j]));
  FILL();
  MT_CHECK(ad_mpi_alltoall(a, 1, AD_MPI_REAL, b, 1, AD_MPI_REAL, w) == MPI_SUCCESS);
  MPI_Alltoall(pa, 1, MPI_DOUBLE, pb, 1, MPI_DOUBLE, w);
  MT_CHECK(same(b, pb, p));
  /* Rank a sends 1 + (a + b) % 2 values to rank b: counts that match pairwise. */
  {
    int *c1 = malloc(sizeof(int) * (size_t)p);
    for (int j = 0; j < p; j++) c1[j] = 1 + (me + j) % 2;
    FILL();
    MT_CHECK(ad_mpi_alltoallv(a, c1, dsp, AD_MPI_REAL, b, c1, dsp, AD_MPI_REAL, w) == MPI_SUCCESS);
    MPI_Alltoallv(pa, c1, dsp, MPI_DOUBLE, pb, c1, dsp, MPI_DOUBLE, w);
    for (int j = 0; j < p; j++) MT_CHECK(same(b + dsp[j], pb + dsp[j], c1[j]));
    free(c1);
  }
  MT_CHECK(ad_mpi_barrier(w) == MPI_SUCCESS);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  ad_tape_destroy(t);
#undef FILL
  free(a);
  free(b);
  free(pa);
  free(pb);
  free(cnt);
  free(dsp);
}

#ifndef ARIADNE_PASSIVE

/* ------------------------------------------------------------------------ */
/* Sub-communicators                                                         */
/* ------------------------------------------------------------------------ */

static MPI_Comm half; /* even or odd ranks of MPI_COMM_WORLD */

/* Traffic on both halves and on the world, interleaved, with the same tags:
 * a ring and an allreduce within each half, a broadcast over the world, and
 * messages between partners in different halves. */
static void halves_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  ad_real s[N], r[N], sum[N], b[N];
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], ad_add(x[i], 1.0));
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, (hr + 1) % hs, 1, r, n, AD_MPI_REAL, (hr + hs - 1) % hs, 1, half,
                  MPI_STATUS_IGNORE);
  ad_mpi_allreduce(r, sum, n, AD_MPI_REAL, MPI_SUM, half);
  for (int i = 0; i < n; i++) b[i] = ad_sin(sum[i]);
  ad_mpi_bcast(b, n, AD_MPI_REAL, 0, MPI_COMM_WORLD);
  int partner = mt_rank ^ 1;
  ad_real q[N];
  for (int i = 0; i < n; i++) q[i] = b[i];
  if (partner < mt_size) {
    /* Same tag as the ring above, on a different communicator. */
    ad_mpi_sendrecv_replace(q, n, AD_MPI_REAL, partner, 1, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  ad_mpi_allreduce(MPI_IN_PLACE, q, n, AD_MPI_REAL, MPI_MAX, half);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(q[i], x[i]), ad_mul(sum[i], b[i]));
}

/* ------------------------------------------------------------------------ */
/* Communication inside preaccumulation regions                              */
/* ------------------------------------------------------------------------ */

/* A ring sendrecv of values computed inside a region, and an allreduce of
 * values from before one: a region that communicates is recorded operation
 * by operation (it cannot propagate partials across ranks), and a region
 * around plain arithmetic next to it is not. */
static void region_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N], sum[N];
  ad_stmt_begin();
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], ad_add(x[i], 1.0));
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, (mt_rank + 1) % mt_size, 3, r, n, AD_MPI_REAL, (mt_rank + mt_size - 1) % mt_size,
                  3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_real first = ad_add(ad_mul(r[0], s[0]), ad_sin(x[0]));
  first = ad_stmt_end(first);
  ad_stmt_begin();
  ad_mpi_allreduce(x, sum, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  ad_real second = ad_stmt_end(ad_mul(ad_exp(ad_mul(sum[1], 0.1)), x[1]));
  for (int i = 0; i < n; i++) {
    ad_stmt_begin();
    y[i] = ad_stmt_end(ad_add(ad_mul(ad_mul(first, x[i]), 0.5), ad_mul(second, ad_cos(x[i]))));
  }
}

/* ------------------------------------------------------------------------ */
/* MPI_PROC_NULL, testall, sendrecv_replace, MPI_COMM_SELF                   */
/* ------------------------------------------------------------------------ */

/* A non-periodic shift: the ends talk to MPI_PROC_NULL with every kind of
 * call. A receive from MPI_PROC_NULL leaves its buffer (values and handles)
 * as it was, so the old values' derivatives still flow through it. */
static void procnull_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int up = mt_rank + 1 < mt_size ? mt_rank + 1 : MPI_PROC_NULL;
  int down = mt_rank > 0 ? mt_rank - 1 : MPI_PROC_NULL;
  ad_real s[N], r1[N], r2[N], r3[N], r4[N];
  MPI_Status st;
  for (int i = 0; i < n; i++) {
    s[i] = ad_exp(ad_mul(0.5, x[i]));
    r1[i] = r2[i] = r3[i] = ad_mul(x[i], 2.0);
    r4[i] = ad_cos(x[i]);
  }
  /* blocking: up the chain in order, so it needs no buffering */
  ad_mpi_recv(r1, n, AD_MPI_REAL, down, 1, MPI_COMM_WORLD, &st);
  if (down == MPI_PROC_NULL) {
    int c = -1;
    MPI_Get_count(&st, AD_MPI_REAL, &c);
    MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && c == 0);
  }
  ad_mpi_ssend(s, n, AD_MPI_REAL, up, 1, MPI_COMM_WORLD);
  /* sendrecv down the chain */
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, down, 2, r2, n, AD_MPI_REAL, up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  /* nonblocking both ways, completed by testall */
  ad_mpi_request q[4];
  ad_mpi_irecv(r3, n, AD_MPI_REAL, down, 3, MPI_COMM_WORLD, &q[0]);
  ad_mpi_irecv(r3 + n, 0, AD_MPI_REAL, up, 4, MPI_COMM_WORLD, &q[1]);
  ad_mpi_isend(s, n, AD_MPI_REAL, up, 3, MPI_COMM_WORLD, &q[2]);
  ad_mpi_isend(s, 0, AD_MPI_REAL, down, 4, MPI_COMM_WORLD, &q[3]);
  for (int flag = 0; !flag;) MT_CHECK(ad_mpi_testall(4, q, &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  /* sendrecv_replace up the chain */
  ad_mpi_sendrecv_replace(r4, n, AD_MPI_REAL, up, 5, down, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++)
    y[i] = ad_add(ad_add(ad_mul(r1[i], x[i]), ad_sin(r2[i])), ad_add(ad_mul(r3[i], r3[i]), ad_mul(r4[i], 3.0)));
}

/* Nonblocking exchanges completed by testall, twice on the same streams, and
 * a ring through sendrecv_replace; plus a message to this rank itself on
 * MPI_COMM_SELF. */
static void testall_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], a[N], b[N], c[N], self[N];
  for (int i = 0; i < n; i++) {
    s[i] = ad_tanh(x[i]);
    c[i] = ad_mul(x[i], x[i]);
  }
  for (int round = 0; round < 2; round++) {
    ad_mpi_request q[4] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_irecv(a, n, AD_MPI_REAL, mt_left(), 7, MPI_COMM_WORLD, &q[0]);
    ad_mpi_irecv(b, n, AD_MPI_REAL, mt_right(), 8, MPI_COMM_WORLD, &q[1]);
    ad_mpi_isend(s, n, AD_MPI_REAL, mt_right(), 7, MPI_COMM_WORLD, &q[2]);
    ad_mpi_isend(s, n, AD_MPI_REAL, mt_left(), 8, MPI_COMM_WORLD, &q[3]);
    for (int flag = 0; !flag;) MT_CHECK(ad_mpi_testall(4, q, &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) s[i] = ad_add(ad_mul(a[i], 0.5), ad_sin(b[i]));
  }
  ad_mpi_sendrecv_replace(c, n, AD_MPI_REAL, mt_right(), 9, mt_left(), 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_mpi_sendrecv(c, n, AD_MPI_REAL, 0, 1, self, n, AD_MPI_REAL, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(s[i], self[i]), x[i]);
}

/* ------------------------------------------------------------------------ */
/* One tape, many sweeps; reset and record again                             */
/* ------------------------------------------------------------------------ */

static void ring_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int dir = ctx ? *(int *)ctx : 1;
  ad_real s[N], r[N], sum[N];
  for (int i = 0; i < n; i++) s[i] = ad_mul(ad_sin(x[i]), x[(i + 1) % n]);
  int to = dir > 0 ? mt_right() : mt_left(), from = dir > 0 ? mt_left() : mt_right();
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, to, 4, r, n, AD_MPI_REAL, from, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_mpi_allreduce(r, sum, n, AD_MPI_REAL, dir > 0 ? MPI_SUM : MPI_PROD, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(sum[i], x[i]), ad_exp(ad_mul(0.1, r[i])));
}

static void record(ad_tape *t, mt_prog f, void *ctx, ad_real *x, ad_real *y, double shift) {
  ad_tape_begin(t);
  for (int i = 0; i < N; i++) x[i] = ad_input(0.3 + 0.1 * i + 0.05 * mt_rank + shift);
  f(x, N, y, N, ctx);
  ad_tape_end(t);
}

static void dot_ok(ad_tape *t, ad_real *x, ad_real *y, unsigned long long seed, const char *what) {
  double a = 0.0, b = 0.0;
  int rc = mt_dot_test(t, x, N, y, N, seed, &a, &b);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: %s\n", mt_rank, what, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  MT_CLOSE(a, b, 1e-12);
  MT_CHECK(fabs(b) > 1e-8);
}

static void sweeps_and_resets(void) {
  ad_tape *t = ad_tape_create();
  ad_real x[N], y[N];
  double first[N];
  int back = -1;
  record(t, ring_prog, NULL, x, y, 0.0);
  /* The same recording, swept with different directions and weights. */
  for (unsigned long long seed = 1; seed <= 4; seed++) dot_ok(t, x, y, seed, "sweep again");
  /* The same weights twice give the same adjoints, to the bit. */
  for (int rep = 0; rep < 2; rep++) {
    ad_adjoints_zero(t);
    for (int i = 0; i < N; i++) ad_seed(t, y[i], 1.0 + i);
    MT_CHECK(ad_reverse(t) == AD_OK);
    for (int i = 0; i < N; i++) {
      if (rep == 0)
        first[i] = ad_adjoint(t, x[i]);
      else
        MT_CHECK(ad_adjoint(t, x[i]) == first[i]);
    }
  }
  /* Reset and record a different program, then the first one again. */
  ad_tape_reset(t);
  record(t, ring_prog, &back, x, y, 0.2);
  dot_ok(t, x, y, 5, "after reset");
  ad_tape_reset(t);
  record(t, ring_prog, NULL, x, y, 0.0);
  dot_ok(t, x, y, 6, "after second reset");
  ad_adjoints_zero(t);
  for (int i = 0; i < N; i++) ad_seed(t, y[i], 1.0 + i);
  MT_CHECK(ad_reverse(t) == AD_OK);
  for (int i = 0; i < N; i++) MT_CHECK(ad_adjoint(t, x[i]) == first[i]);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Drivers                                                                   */
/* ------------------------------------------------------------------------ */

static void drivers(void) {
  int p = mt_size, me = mt_rank;
  ad_tape *t = ad_tape_create();
  /* ad_gradient of a reduction to rank 0: the other ranks' output is
   * passive, yet they must sweep, and they get their inputs' gradient. */
  ad_real x[N], y[3], s = ad_const(0.0), tot = ad_const(0.0);
  ad_tape_begin(t);
  for (int i = 0; i < N; i++) x[i] = ad_input(0.5 + 0.25 * i + 0.1 * me);
  for (int i = 0; i < N; i++) s = ad_add(s, ad_mul(x[i], x[i]));
  MT_CHECK(ad_mpi_reduce(&s, &tot, 1, AD_MPI_REAL, MPI_SUM, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  ad_tape_end(t);
  MT_CHECK((tot.i != 0) == (me == 0));
  double g[N];
  int rc = ad_gradient(t, tot, N, x, g);
  if (rc != AD_OK) fprintf(stderr, "[%d] ad_gradient: %s\n", me, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  for (int i = 0; i < N; i++) MT_CLOSE(g[i], 2.0 * ad_value(x[i]), 1e-14);

  /* ad_jacobian by reverse sweeps (2 outputs, 3 inputs): row r on this rank
   * holds d(sum over ranks of y_r)/dx. y0 = allreduce of x0^2 + sin x1 (the
   * same on every rank), y1 = x0 x2 on even ranks and passive on odd ones. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < N; i++) x[i] = ad_input(0.5 + 0.25 * i + 0.1 * me);
  s = ad_add(ad_mul(x[0], x[0]), ad_sin(x[1]));
  MT_CHECK(ad_mpi_allreduce(&s, &y[0], 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  y[1] = me % 2 == 0 ? ad_mul(x[0], x[2]) : ad_const(7.0);
  ad_tape_end(t);
  double J[3 * N];
  rc = ad_jacobian(t, 2, y, N, x, J);
  if (rc != AD_OK) fprintf(stderr, "[%d] ad_jacobian: %s\n", me, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  double x0 = ad_value(x[0]), x1 = ad_value(x[1]), x2 = ad_value(x[2]);
  MT_CLOSE(J[0], p * 2.0 * x0, 1e-14);
  MT_CLOSE(J[1], p * cos(x1), 1e-14);
  MT_CLOSE(J[2], 0.0, 1e-14);
  MT_CLOSE(J[3], me % 2 == 0 ? x2 : 0.0, 1e-14);
  MT_CLOSE(J[4], 0.0, 1e-14);
  MT_CLOSE(J[5], me % 2 == 0 ? x0 : 0.0, 1e-14);

  /* ad_jacobian by tangent sweeps (3 outputs, 1 input): column 0 on this rank
   * holds the outputs' derivatives when every rank moves its input.
   * y0 = allreduce of x^2, y1 = x^3 on even ranks (passive on odd ones),
   * y2 = rank 0's x, broadcast. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  x[0] = ad_input(0.7 + 0.1 * me);
  s = ad_mul(x[0], x[0]);
  MT_CHECK(ad_mpi_allreduce(&s, &y[0], 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  y[1] = me % 2 == 0 ? ad_mul(s, x[0]) : ad_const(1.0);
  y[2] = x[0];
  MT_CHECK(ad_mpi_bcast(&y[2], 1, AD_MPI_REAL, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
  ad_tape_end(t);
  rc = ad_jacobian(t, 3, y, 1, x, J);
  if (rc != AD_OK) fprintf(stderr, "[%d] ad_jacobian (tangent): %s\n", me, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  double xs = ad_value(x[0]), twice_sum = 0.0, mine = 2.0 * xs;
  MPI_Allreduce(&mine, &twice_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CLOSE(J[0], twice_sum, 1e-14);
  MT_CLOSE(J[1], me % 2 == 0 ? 3.0 * xs * xs : 0.0, 1e-14);
  MT_CLOSE(J[2], 1.0, 1e-14);
  ad_tape_destroy(t);
}

/* ------------------------------------------------------------------------ */
/* Passive datatypes: untouched, nothing recorded                            */
/* ------------------------------------------------------------------------ */

static int iv(int rank, int i) { return 100 * rank + i; }

/* Every wrapper with MPI_INT data while a tape records: the values are
 * plain MPI's and the tape gains no statement and no record (the barrier,
 * which has no data, is the one call that records). */
static void passive_types(void) {
  int p = mt_size, me = mt_rank, partner = me ^ 1;
  if (partner >= p) partner = me;
  MPI_Comm w = MPI_COMM_WORLD;
  int np = p * N, *a = calloc((size_t)np + 1, sizeof(int)), *b = calloc((size_t)np + 1, sizeof(int));
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  for (int j = 0; j < p; j++) {
    cnt[j] = 1 + j % N;
    dsp[j] = j * N;
  }
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0), z = ad_mul(x, x);
  (void)z;
  ad_stats before, after;
  ad_mpi_stats mb, ma;
  MT_CHECK(ad_tape_stats(t, &before) == AD_OK);
  ad_mpi_stats_get(&mb);
#define RESET()                                                                                                        \
  for (int i = 0; i < np; i++) {                                                                                       \
    a[i] = iv(me, i);                                                                                                  \
    b[i] = -1;                                                                                                         \
  }
  MPI_Status st;
  /* Each send mode, into a receive posted beforehand (a ready send needs it). */
  for (int mode = 0; mode < 4; mode++) {
    RESET();
    ad_mpi_request q;
    MT_CHECK(ad_mpi_irecv(b, N, MPI_INT, partner, 10 + mode, w, &q) == MPI_SUCCESS);
    MPI_Sendrecv(NULL, 0, MPI_INT, partner, 20, NULL, 0, MPI_INT, partner, 20, w, MPI_STATUS_IGNORE);
    int rc = mode == 0   ? ad_mpi_send(a, N, MPI_INT, partner, 10, w)
             : mode == 1 ? ad_mpi_ssend(a, N, MPI_INT, partner, 11, w)
             : mode == 2 ? ad_mpi_bsend(a, N, MPI_INT, partner, 12, w)
                         : ad_mpi_rsend(a, N, MPI_INT, partner, 13, w);
    MT_CHECK(rc == MPI_SUCCESS);
    MT_CHECK(ad_mpi_wait(&q, &st) == MPI_SUCCESS);
    for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(partner, i));
  }
  /* Blocking receive: the lower rank of a pair sends first. */
  RESET();
  if (partner == me) {
    ad_mpi_request q;
    MT_CHECK(ad_mpi_isend(a, N, MPI_INT, me, 14, w, &q) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_recv(b, N, MPI_INT, me, 14, w, &st) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  } else if (me < partner) {
    MT_CHECK(ad_mpi_send(a, N, MPI_INT, partner, 14, w) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_recv(b, N, MPI_INT, partner, 14, w, &st) == MPI_SUCCESS);
  } else {
    MT_CHECK(ad_mpi_recv(b, N, MPI_INT, partner, 14, w, &st) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_send(a, N, MPI_INT, partner, 14, w) == MPI_SUCCESS);
  }
  for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(partner, i));
  /* Nonblocking with each completion call. */
  for (int how = 0; how < 4; how++) {
    RESET();
    ad_mpi_request q[2];
    MT_CHECK(ad_mpi_irecv(b, N, MPI_INT, partner, 15, w, &q[0]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_isend(a, N, MPI_INT, partner, 15, w, &q[1]) == MPI_SUCCESS);
    int flag = 0, idx;
    switch (how) {
    case 0:
      MT_CHECK(ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
      break;
    case 1:
      for (int k = 0; k < 2; k++) MT_CHECK(ad_mpi_waitany(2, q, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      break;
    case 2:
      for (int k = 0; k < 2; k++)
        for (flag = 0; !flag;) MT_CHECK(ad_mpi_test(&q[k], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      break;
    default:
      for (flag = 0; !flag;) MT_CHECK(ad_mpi_testall(2, q, &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
      break;
    }
    for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(partner, i));
  }
  RESET();
  MT_CHECK(ad_mpi_sendrecv(a, N, MPI_INT, mt_right(), 16, b, N, MPI_INT, mt_left(), 16, w, &st) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(mt_left(), i));
  RESET();
  MT_CHECK(ad_mpi_sendrecv_replace(a, N, MPI_INT, mt_right(), 17, mt_left(), 17, w, &st) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(a[i] == iv(mt_left(), i));
  /* Collectives. */
  RESET();
  MT_CHECK(ad_mpi_bcast(a, N, MPI_INT, 0, w) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(a[i] == iv(0, i));
  RESET();
  MT_CHECK(ad_mpi_reduce(a, b, N, MPI_INT, MPI_SUM, 0, w) == MPI_SUCCESS);
  if (me == 0)
    for (int i = 0; i < N; i++) MT_CHECK(b[i] == 100 * p * (p - 1) / 2 + p * i);
  RESET();
  MT_CHECK(ad_mpi_allreduce(a, b, N, MPI_INT, MPI_MAX, w) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(p - 1, i));
  RESET();
  MT_CHECK(ad_mpi_allreduce(MPI_IN_PLACE, a, N, MPI_INT, MPI_BOR, w) == MPI_SUCCESS);
  RESET();
  MT_CHECK(ad_mpi_scan(a, b, N, MPI_INT, MPI_SUM, w) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(b[i] == 100 * me * (me + 1) / 2 + (me + 1) * i);
  RESET();
  MT_CHECK(ad_mpi_exscan(a, b, N, MPI_INT, MPI_SUM, w) == MPI_SUCCESS);
  if (me > 0)
    for (int i = 0; i < N; i++) MT_CHECK(b[i] == 100 * (me - 1) * me / 2 + me * i);
  RESET();
  MT_CHECK(ad_mpi_reduce_scatter_block(a, b, 1, MPI_INT, MPI_SUM, w) == MPI_SUCCESS);
  MT_CHECK(b[0] == 100 * p * (p - 1) / 2 + p * me);
  RESET();
  MT_CHECK(ad_mpi_gather(a, N, MPI_INT, b, N, MPI_INT, 0, w) == MPI_SUCCESS);
  if (me == 0)
    for (int j = 0; j < p; j++) MT_CHECK(b[j * N] == iv(j, 0));
  RESET();
  MT_CHECK(ad_mpi_gatherv(a, cnt[me], MPI_INT, b, cnt, dsp, MPI_INT, 0, w) == MPI_SUCCESS);
  if (me == 0)
    for (int j = 0; j < p; j++) MT_CHECK(b[dsp[j] + cnt[j] - 1] == iv(j, cnt[j] - 1));
  RESET();
  MT_CHECK(ad_mpi_scatter(a, N, MPI_INT, b, N, MPI_INT, 0, w) == MPI_SUCCESS);
  for (int i = 0; i < N; i++) MT_CHECK(b[i] == iv(0, me * N + i));
  RESET();
  MT_CHECK(ad_mpi_scatterv(a, cnt, dsp, MPI_INT, b, cnt[me], MPI_INT, 0, w) == MPI_SUCCESS);
  for (int i = 0; i < cnt[me]; i++) MT_CHECK(b[i] == iv(0, dsp[me] + i));
  RESET();
  MT_CHECK(ad_mpi_allgather(a, N, MPI_INT, b, N, MPI_INT, w) == MPI_SUCCESS);
  for (int j = 0; j < p; j++) MT_CHECK(b[j * N + N - 1] == iv(j, N - 1));
  RESET();
  for (int i = 0; i < cnt[me]; i++) b[dsp[me] + i] = a[i];
  MT_CHECK(ad_mpi_allgatherv(MPI_IN_PLACE, cnt[me], MPI_INT, b, cnt, dsp, MPI_INT, w) == MPI_SUCCESS);
  for (int j = 0; j < p; j++) MT_CHECK(b[dsp[j]] == iv(j, 0));
  RESET();
  MT_CHECK(ad_mpi_alltoall(a, 1, MPI_INT, b, 1, MPI_INT, w) == MPI_SUCCESS);
  for (int j = 0; j < p; j++) MT_CHECK(b[j] == iv(j, me));
  RESET();
  {
    int *one = malloc(sizeof(int) * (size_t)p), *at = malloc(sizeof(int) * (size_t)p);
    for (int j = 0; j < p; j++) {
      one[j] = 1;
      at[j] = j;
    }
    MT_CHECK(ad_mpi_alltoallv(a, one, at, MPI_INT, b, one, at, MPI_INT, w) == MPI_SUCCESS);
    for (int j = 0; j < p; j++) MT_CHECK(b[j] == iv(j, me));
    free(one);
    free(at);
  }
#undef RESET
  MT_CHECK(ad_tape_stats(t, &after) == AD_OK);
  ad_mpi_stats_get(&ma);
  MT_CHECK(after.statements == before.statements);
  MT_CHECK(after.records == before.records);
  MT_CHECK(after.arguments == before.arguments);
  MT_CHECK(ma.records == mb.records);
  MT_CHECK(ma.forward_bytes == mb.forward_bytes);
  /* The barrier is the one call without data, and it does record. */
  MT_CHECK(ad_mpi_barrier(w) == MPI_SUCCESS);
  MT_CHECK(ad_tape_stats(t, &after) == AD_OK);
  MT_CHECK(after.records == before.records + 1);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  ad_tape_destroy(t);
  free(a);
  free(b);
  free(cnt);
  free(dsp);
}

/* ------------------------------------------------------------------------ */
/* Statistics: the adjoint moves the bytes the forward run moved             */
/* ------------------------------------------------------------------------ */

/* A halo exchange on a 1-D chain of ranks, for some steps: each rank holds
 * `cells` values and trades `halo` of them with each neighbour. The ends are
 * MPI_PROC_NULL unless periodic. */
static void halo_run(int periodic, int nonblocking) {
  enum { cells = 8, halo = 2, steps = 3 };
  int p = mt_size, me = mt_rank;
  int lo = me > 0 ? me - 1 : (periodic ? p - 1 : MPI_PROC_NULL);
  int hi = me + 1 < p ? me + 1 : (periodic ? 0 : MPI_PROC_NULL);
  ad_tape *t = ad_tape_create();
  ad_real u[cells + 2 * halo], x[cells];
  ad_mpi_stats_reset();
  ad_tape_begin(t);
  for (int i = 0; i < cells; i++) u[halo + i] = x[i] = ad_input(0.5 + 0.1 * i + 0.01 * me);
  for (int i = 0; i < halo; i++) u[i] = u[halo + cells + i] = ad_const(0.0);
  for (int s = 0; s < steps; s++) {
    if (nonblocking) {
      ad_mpi_request q[4];
      ad_mpi_irecv(u, halo, AD_MPI_REAL, lo, 1, MPI_COMM_WORLD, &q[0]);
      ad_mpi_irecv(u + halo + cells, halo, AD_MPI_REAL, hi, 2, MPI_COMM_WORLD, &q[1]);
      ad_mpi_isend(u + cells, halo, AD_MPI_REAL, hi, 1, MPI_COMM_WORLD, &q[2]);
      ad_mpi_isend(u + halo, halo, AD_MPI_REAL, lo, 2, MPI_COMM_WORLD, &q[3]);
      ad_mpi_waitall(4, q, MPI_STATUSES_IGNORE);
    } else {
      ad_mpi_sendrecv(u + cells, halo, AD_MPI_REAL, hi, 1, u, halo, AD_MPI_REAL, lo, 1, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
      ad_mpi_sendrecv(u + halo, halo, AD_MPI_REAL, lo, 2, u + halo + cells, halo, AD_MPI_REAL, hi, 2, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE);
    }
    ad_real v[cells];
    for (int i = 0; i < cells; i++)
      v[i] =
          ad_add(u[halo + i], ad_mul(0.1, ad_sub(ad_add(u[halo + i - 1], u[halo + i + 1]), ad_mul(2.0, u[halo + i]))));
    for (int i = 0; i < cells; i++) u[halo + i] = ad_sin(v[i]);
  }
  ad_real y = ad_sum(cells, u + halo);
  ad_tape_end(t);
  ad_mpi_stats fwd, rev, tan;
  ad_mpi_stats_get(&fwd);
  /* Exactly the ad_real values that left for a real partner. */
  int partners = (lo != MPI_PROC_NULL) + (hi != MPI_PROC_NULL);
  uint64_t expect = (uint64_t)steps * (uint64_t)partners * halo * sizeof(double);
  if (fwd.forward_bytes != expect) {
    mt_errors++;
    fprintf(stderr, "[%d] halo (%s, %s): forward_bytes %llu, expected %llu\n", me, periodic ? "periodic" : "chain",
            nonblocking ? "isend/irecv" : "sendrecv", (unsigned long long)fwd.forward_bytes,
            (unsigned long long)expect);
  }
  MT_CHECK(fwd.adjoint_bytes == 0 && fwd.tangent_bytes == 0);
  ad_seed(t, y, 1.0);
  MT_CHECK(ad_reverse(t) == AD_OK);
  ad_mpi_stats_get(&rev);
  if (rev.adjoint_bytes != fwd.forward_bytes) {
    mt_errors++;
    fprintf(stderr, "[%d] halo (%s, %s): adjoint_bytes %llu != forward_bytes %llu\n", me,
            periodic ? "periodic" : "chain", nonblocking ? "isend/irecv" : "sendrecv",
            (unsigned long long)rev.adjoint_bytes, (unsigned long long)fwd.forward_bytes);
  }
  for (int i = 0; i < cells; i++) ad_tangent_seed(t, x[i], 1.0);
  MT_CHECK(ad_forward(t) == AD_OK);
  ad_mpi_stats_get(&tan);
  MT_CHECK(tan.tangent_bytes == fwd.forward_bytes);
  MT_CHECK(tan.forward_bytes == fwd.forward_bytes);
  ad_tape_destroy(t);
}

/* Collectives, in place and not, with uneven counts: a tangent sweep moves
 * on each rank what its forward calls moved, and a reverse sweep, summed
 * over the ranks, moves what the forward run moved in total. */
static void collective_bytes(void) {
  int p = mt_size, me = mt_rank, root = p - 1;
  int *c = malloc(sizeof(int) * (size_t)p), *d = malloc(sizeof(int) * (size_t)p);
  int *one = malloc(sizeof(int) * (size_t)p), *at = malloc(sizeof(int) * (size_t)p);
  for (int j = 0; j < p; j++) {
    c[j] = 1 + j % 2;
    d[j] = 2 * j;
    one[j] = 1;
    at[j] = j;
  }
  ad_real x[N], a[2 * 8 * N], b[2 * 8 * N], *big = calloc((size_t)(4 * p + 4), sizeof *big);
  ad_real *big2 = calloc((size_t)(4 * p + 4), sizeof *big2);
  ad_tape *t = ad_tape_create();
  ad_mpi_stats_reset();
  ad_tape_begin(t);
  for (int i = 0; i < N; i++) x[i] = ad_input(0.2 * (i + 1) + 0.1 * me);
  for (int i = 0; i < 2 * 8 * N; i++) a[i] = b[i] = x[i % N];
  for (int i = 0; i < 4 * p + 4; i++) big[i] = big2[i] = ad_sin(x[i % N]);
  ad_mpi_bcast(a, N, AD_MPI_REAL, root, MPI_COMM_WORLD);
  ad_mpi_reduce(x, b, N, AD_MPI_REAL, MPI_SUM, root, MPI_COMM_WORLD);
  ad_mpi_allreduce(MPI_IN_PLACE, a, N, AD_MPI_REAL, MPI_PROD, MPI_COMM_WORLD);
  ad_mpi_scan(x, b, N, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  ad_mpi_exscan(MPI_IN_PLACE, a, N, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  ad_mpi_reduce_scatter_block(big, b, 2, AD_MPI_REAL, MPI_MAX, MPI_COMM_WORLD);
  ad_mpi_gatherv(x, c[me], AD_MPI_REAL, big, c, d, AD_MPI_REAL, root, MPI_COMM_WORLD);
  if (me == root)
    ad_mpi_scatterv(big, c, d, AD_MPI_REAL, MPI_IN_PLACE, c[me], AD_MPI_REAL, root, MPI_COMM_WORLD);
  else
    ad_mpi_scatterv(big, c, d, AD_MPI_REAL, a, c[me], AD_MPI_REAL, root, MPI_COMM_WORLD);
  ad_mpi_allgatherv(x, c[me], AD_MPI_REAL, big2, c, d, AD_MPI_REAL, MPI_COMM_WORLD);
  ad_mpi_alltoallv(big2, one, at, AD_MPI_REAL, big, one, at, AD_MPI_REAL, MPI_COMM_WORLD);
  ad_mpi_alltoall(MPI_IN_PLACE, 1, AD_MPI_REAL, big, 1, AD_MPI_REAL, MPI_COMM_WORLD);
  ad_real y = ad_add(ad_add(ad_sum((size_t)(2 * p), big), ad_sum(2 * N, a)), ad_sum(2 * N, b));
  ad_tape_end(t);
  ad_mpi_stats fwd, rev, tan;
  ad_mpi_stats_get(&fwd);
  ad_seed(t, y, 1.0);
  MT_CHECK(ad_reverse(t) == AD_OK);
  ad_mpi_stats_get(&rev);
  for (int i = 0; i < N; i++) ad_tangent_seed(t, x[i], 1.0);
  MT_CHECK(ad_forward(t) == AD_OK);
  ad_mpi_stats_get(&tan);
  double mine[2] = {(double)fwd.forward_bytes, (double)rev.adjoint_bytes}, sum[2];
  MPI_Allreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (sum[0] != sum[1]) {
    mt_errors++;
    fprintf(stderr, "[%d] collectives: adjoint bytes %.0f != forward bytes %.0f, summed over the ranks\n", me, sum[1],
            sum[0]);
  }
  MT_CHECK(tan.tangent_bytes == fwd.forward_bytes);
  MT_CHECK(p == 1 || sum[0] > 0);
  ad_tape_destroy(t);
  free(c);
  free(d);
  free(one);
  free(at);
  free(big);
  free(big2);
}

#endif /* ARIADNE_PASSIVE */

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  mt_bsend_buffer(1 << 16);
  values_vs_plain();
#ifndef ARIADNE_PASSIVE
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
  /* The halves are new communicators: prepare them on every rank at once. */
  MT_CHECK(ad_mpi_comm_prepare(half) == MPI_SUCCESS);
  mt_check_prog("halves", halves_prog, N, N, NULL, 1e-6);
  mt_check_prog("procnull", procnull_prog, N, N, NULL, 1e-6);
  mt_check_prog("testall", testall_prog, N, N, NULL, 1e-6);
  mt_check_prog("regions", region_prog, N, N, NULL, 1e-6);
  sweeps_and_resets();
  drivers();
  passive_types();
  for (int periodic = 0; periodic < 2; periodic++)
    for (int nb = 0; nb < 2; nb++) halo_run(periodic, nb);
  collective_bytes();
  MPI_Comm_free(&half);
#endif
  mt_bsend_buffer(0);
  return mt_finalize();
}
