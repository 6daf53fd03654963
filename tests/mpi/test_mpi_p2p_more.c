/* SPDX-License-Identifier: BSD-3-Clause */
/* Point to point beyond the basics: the other nonblocking send modes,
 * waitsome/testany/testsome, request_free, cancel, probes and matched
 * receives, and persistent requests (a persistent halo exchange). Each
 * program is a whole parallel program checked by the dot-product test and
 * by central finite differences; then bad input, which must give an MPI
 * error code and a sticky tape error naming the call.
 *
 * The same file is also compiled with ARIADNE_PASSIVE, where every wrapper
 * is its MPI twin: then each program runs once, with its checks of statuses
 * and counts, and the persistent halo exchange is compared value for value
 * with the same update written with plain MPI_Sendrecv (as in the active
 * build). */
#include "mtest.h"

#define N 3 /* values per message */


/* Statuses of the programs' multiple completions (MPI_STATUSES_IGNORE
 * would do, but GCC warns about it through the passive build's MPI calls). */
static MPI_Status sts[8];

/* Ring: Issend, Ibsend and Irsend to the right (the receives are posted
 * before a barrier, so the ready send is legal), completed by waitsome. */
static void send_modes(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s1[N], s2[N], s3[N], r1[N], r2[N], r3[N];
  for (int i = 0; i < n; i++) {
    s1[i] = ad_mul(x[i], x[i]);
    s2[i] = ad_sin(x[i]);
    s3[i] = ad_exp(ad_mul(0.5, x[i]));
  }
  ad_mpi_request q[6];
  ad_mpi_irecv(r1, n, AD_MPI_REAL, mt_left(), 1, MPI_COMM_WORLD, &q[0]);
  ad_mpi_irecv(r2, n, AD_MPI_REAL, mt_left(), 2, MPI_COMM_WORLD, &q[1]);
  ad_mpi_irecv(r3, n, AD_MPI_REAL, mt_left(), 3, MPI_COMM_WORLD, &q[2]);
  MPI_Barrier(MPI_COMM_WORLD);
  ad_mpi_issend(s1, n, AD_MPI_REAL, mt_right(), 1, MPI_COMM_WORLD, &q[3]);
  ad_mpi_ibsend(s2, n, AD_MPI_REAL, mt_right(), 2, MPI_COMM_WORLD, &q[4]);
  ad_mpi_irsend(s3, n, AD_MPI_REAL, mt_right(), 3, MPI_COMM_WORLD, &q[5]);
  int left_to = 6;
  while (left_to > 0) {
    int out, idx[6];
    MPI_Status st[6];
    MT_CHECK(ad_mpi_waitsome(6, q, &out, idx, st) == MPI_SUCCESS);
    MT_CHECK(out >= 1 && out <= left_to);
    left_to -= out;
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r1[i], x[i]), ad_mul(r2[i], r3[(i + 1) % n]));
}

/* Both neighbours, completed by testany for the receives and testsome for
 * the sends. */
static void test_calls(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real sl[N], sr[N], rl[N], rr[N];
  for (int i = 0; i < n; i++) {
    sl[i] = ad_mul(x[i], 1.0 + mt_rank);
    sr[i] = ad_cos(x[i]);
  }
  ad_mpi_request rq[2], sq[2];
  ad_mpi_irecv(rl, n, AD_MPI_REAL, mt_left(), 4, MPI_COMM_WORLD, &rq[0]);
  ad_mpi_irecv(rr, n, AD_MPI_REAL, mt_right(), 5, MPI_COMM_WORLD, &rq[1]);
  ad_mpi_isend(sr, n, AD_MPI_REAL, mt_right(), 4, MPI_COMM_WORLD, &sq[0]);
  ad_mpi_isend(sl, n, AD_MPI_REAL, mt_left(), 5, MPI_COMM_WORLD, &sq[1]);
  for (int got = 0; got < 2;) {
    int idx, flag = 0;
    MPI_Status st;
    MT_CHECK(ad_mpi_testany(2, rq, &idx, &flag, &st) == MPI_SUCCESS);
    if (flag) {
      MT_CHECK(idx == 0 || idx == 1);
      MT_CHECK(st.MPI_TAG == 4 + idx);
      got++;
    }
  }
  int idx, flag = 0;
  MT_CHECK(ad_mpi_testany(2, rq, &idx, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS); /* all null now */
  MT_CHECK(flag && idx == MPI_UNDEFINED);
  for (int done = 0; done < 2;) {
    int out, ix[2];
    MT_CHECK(ad_mpi_testsome(2, sq, &out, ix, sts) == MPI_SUCCESS);
    done += out;
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(rl[i], rr[i]), ad_mul(x[i], rl[(i + 2) % n]));
}

/* Nonblocking collectives and point-to-point requests in one array,
 * completed by testsome and then waitsome. */
static void mixed_collective(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N], sum[N], b[N];
  for (int i = 0; i < n; i++) {
    s[i] = ad_mul(x[i], ad_exp(ad_mul(0.1, x[i])));
    b[i] = mt_rank == 0 ? ad_sin(x[i]) : ad_const(0.0);
  }
  ad_mpi_request q[4];
  ad_mpi_irecv(r, n, AD_MPI_REAL, mt_left(), 9, MPI_COMM_WORLD, &q[0]);
  ad_mpi_iallreduce(s, sum, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[1]);
  ad_mpi_isend(s, n, AD_MPI_REAL, mt_right(), 9, MPI_COMM_WORLD, &q[2]);
  ad_mpi_ibcast(b, n, AD_MPI_REAL, 0, MPI_COMM_WORLD, &q[3]);
  int out = 0, idx[4];
  MT_CHECK(ad_mpi_testsome(4, q, &out, idx, sts) == MPI_SUCCESS);
  for (int done = out; done < 4; done += out) MT_CHECK(ad_mpi_waitsome(4, q, &out, idx, sts) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_waitsome(4, q, &out, idx, sts) == MPI_SUCCESS && out == MPI_UNDEFINED);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], sum[i]), ad_mul(b[i], x[i]));
}

/* Receives that never match are cancelled among live traffic: a wildcard
 * one, cancelled before anything is sent and completed only after a
 * receive that it would have accepted, and one on another tag of the live
 * stream. The send request of the real message is freed before it
 * completes. */
static void cancel_free(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N], never[N], any[N];
  for (int i = 0; i < n; i++) s[i] = ad_sqrt(ad_add(x[i], 2.0));
  ad_mpi_request wq;
  ad_mpi_irecv(any, n, AD_MPI_REAL, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &wq);
  MT_CHECK(ad_mpi_cancel(&wq) == MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD); /* nothing was sent before: the wildcard receive cannot have matched */
  ad_mpi_request q[3];
  ad_mpi_irecv(never, n, AD_MPI_REAL, mt_left(), 99, MPI_COMM_WORLD, &q[0]);
  ad_mpi_irecv(r, n, AD_MPI_REAL, mt_left(), 6, MPI_COMM_WORLD, &q[1]);
  ad_mpi_isend(s, n, AD_MPI_REAL, mt_right(), 6, MPI_COMM_WORLD, &q[2]);
  MT_CHECK(ad_mpi_request_free(&q[2]) == MPI_SUCCESS);
#ifndef ARIADNE_PASSIVE
  MT_CHECK(q[2].slot == -1 && q[2].mpi == MPI_REQUEST_NULL);
#else
  MT_CHECK(q[2] == MPI_REQUEST_NULL);
#endif
  MT_CHECK(ad_mpi_cancel(&q[0]) == MPI_SUCCESS);
  MPI_Status st;
  MT_CHECK(ad_mpi_wait(&q[0], &st) == MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MT_CHECK(cancelled);
  MT_CHECK(ad_mpi_wait(&q[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_wait(&wq, &st) == MPI_SUCCESS);
  cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MT_CHECK(cancelled);
  for (int i = 0; i < n; i++) y[i] = ad_mul(r[i], ad_add(x[i], r[(i + 1) % n]));
  /* Everybody has received, so every freed send has completed. */
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Messages of unknown length: rank r sends 1 + (r % 3) values to the right
 * three times; the receiver takes them with probe + recv, mprobe + mrecv and
 * improbe + imrecv, sizing the buffer from MPI_Get_count. */
static void unknown_length(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int len = 1 + mt_rank % 3;
  ad_real s[3][N];
  for (int i = 0; i < len; i++) {
    s[0][i] = ad_mul(x[i], x[i]);
    s[1][i] = ad_tanh(x[i]);
    s[2][i] = ad_mul(x[i], ad_sin(x[(i + 1) % n]));
  }
  ad_mpi_request sq[3];
  for (int k = 0; k < 3; k++) ad_mpi_isend(s[k], len, AD_MPI_REAL, mt_right(), 10 + k, MPI_COMM_WORLD, &sq[k]);
  for (int i = 0; i < n; i++) y[i] = ad_mul(0.1, x[i]);
  ad_real r[3][N];
  int got[3];
  MPI_Status st;
  MT_CHECK(ad_mpi_probe(mt_left(), 10, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
  MPI_Get_count(&st, AD_MPI_REAL, &got[0]);
  ad_mpi_recv(r[0], got[0], AD_MPI_REAL, mt_left(), 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_mpi_message msg = AD_MPI_MESSAGE_NULL;
  MT_CHECK(ad_mpi_mprobe(mt_left(), MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st) == MPI_SUCCESS);
  MT_CHECK(st.MPI_TAG == 11);
  MPI_Get_count(&st, AD_MPI_REAL, &got[1]);
  MT_CHECK(ad_mpi_mrecv(r[1], got[1], AD_MPI_REAL, &msg, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int flag = 0;
  while (!flag) {
    MT_CHECK(ad_mpi_improbe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &flag, &msg, &st) == MPI_SUCCESS);
    int f2 = 0;
    if (!flag) MT_CHECK(ad_mpi_iprobe(mt_left(), 12, MPI_COMM_WORLD, &f2, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  }
  MPI_Get_count(&st, AD_MPI_REAL, &got[2]);
  ad_mpi_request rq;
  MT_CHECK(ad_mpi_imrecv(r[2], got[2], AD_MPI_REAL, &msg, &rq) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int want = 1 + mt_left() % 3;
  for (int k = 0; k < 3; k++) {
    MT_CHECK(got[k] == want);
    for (int i = 0; i < got[k] && i < N; i++) y[i] = ad_add(y[i], ad_mul(ad_mul(r[k][i], 1.0 + k), x[i]));
  }
  ad_mpi_waitall(3, sq, sts);
}

/* The numbering of a matched probe: three messages of one stream (left, 7),
 * the first passive. The receiver takes the passive one through mprobe and
 * mrecv as MPI_DOUBLE, mprobes the second, receives the third with a plain
 * receive (which completes first), and only then receives the second. The
 * second and third carry different functions of x, so pairing their
 * adjoints the wrong way round fails the checks. */
static void mprobe_order(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real a[N], b[N], ra[N], rb[N];
  double pas = 1.0 + mt_rank, rpas = 0.0;
  for (int i = 0; i < n; i++) {
    a[i] = ad_mul(x[i], 3.0);
    b[i] = ad_mul(x[i], x[i]);
  }
  MPI_Request pq;
  ad_mpi_request sq[2];
  MPI_Isend(&pas, 1, MPI_DOUBLE, mt_right(), 7, MPI_COMM_WORLD, &pq);
  ad_mpi_isend(a, n, AD_MPI_REAL, mt_right(), 7, MPI_COMM_WORLD, &sq[0]);
  ad_mpi_isend(b, n, AD_MPI_REAL, mt_right(), 7, MPI_COMM_WORLD, &sq[1]);
  ad_mpi_message mp = AD_MPI_MESSAGE_NULL, ma = AD_MPI_MESSAGE_NULL;
  MT_CHECK(ad_mpi_mprobe(mt_left(), 7, MPI_COMM_WORLD, &mp, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_mrecv(&rpas, 1, MPI_DOUBLE, &mp, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(rpas == 1.0 + mt_left());
  MT_CHECK(ad_mpi_mprobe(mt_left(), 7, MPI_COMM_WORLD, &ma, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  ad_mpi_recv(rb, n, AD_MPI_REAL, mt_left(), 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MT_CHECK(ad_mpi_mrecv(ra, n, AD_MPI_REAL, &ma, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Wait(&pq, MPI_STATUS_IGNORE);
  ad_mpi_waitall(2, sq, sts);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(ra[i], ad_sin(rb[i])), ad_mul(x[i], rpas));
}

/* A persistent 1-D halo exchange: each rank owns N cells of a periodic
 * line; Send_init/Recv_init once, then Startall and Waitall in every step of
 * a nonlinear explicit update. Tag 0 travels right, tag 1 left. */
#define STEPS 4
static void halo(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real u[N + 2], sl[1], sr[1], gl[1], gr[1];
  for (int i = 0; i < n; i++) u[i + 1] = x[i];
  ad_mpi_request q[4];
  ad_mpi_recv_init(gl, 1, AD_MPI_REAL, mt_left(), 0, MPI_COMM_WORLD, &q[0]);
  ad_mpi_recv_init(gr, 1, AD_MPI_REAL, mt_right(), 1, MPI_COMM_WORLD, &q[1]);
  ad_mpi_send_init(sr, 1, AD_MPI_REAL, mt_right(), 0, MPI_COMM_WORLD, &q[2]);
  ad_mpi_send_init(sl, 1, AD_MPI_REAL, mt_left(), 1, MPI_COMM_WORLD, &q[3]);
  for (int step = 0; step < STEPS; step++) {
    sr[0] = u[n];
    sl[0] = u[1];
    MT_CHECK(ad_mpi_startall(4, q) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_waitall(4, q, sts) == MPI_SUCCESS);
    u[0] = gl[0];
    u[n + 1] = gr[0];
    ad_real v[N + 2];
    for (int i = 1; i <= n; i++)
      v[i] = ad_add(
          u[i], ad_mul(0.2, ad_add(ad_sub(ad_add(u[i - 1], u[i + 1]), ad_mul(2.0, u[i])), ad_mul(0.3, ad_sin(u[i])))));
    for (int i = 1; i <= n; i++) u[i] = v[i];
  }
  /* An inactive persistent request completes at once with an empty status
   * and records nothing. */
  MPI_Status st;
#ifndef ARIADNE_PASSIVE
  ad_mpi_stats before, after;
  ad_mpi_stats_get(&before);
#endif
  MT_CHECK(ad_mpi_wait(&q[0], &st) == MPI_SUCCESS);
  MT_CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
#ifndef ARIADNE_PASSIVE
  ad_mpi_stats_get(&after);
  MT_CHECK(after.records == before.records);
  MT_CHECK(q[0].slot >= 0);
#endif
  for (int k = 0; k < 4; k++) MT_CHECK(ad_mpi_request_free(&q[k]) == MPI_SUCCESS);
  for (int i = 0; i < n; i++) y[i] = u[i + 1];
}

/* The same update with plain MPI_Sendrecv on doubles. */
static void halo_reference(const double *x, int n, double *y) {
  double u[N + 2];
  for (int i = 0; i < n; i++) u[i + 1] = x[i];
  for (int step = 0; step < STEPS; step++) {
    MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, mt_right(), 0, &u[0], 1, MPI_DOUBLE, mt_left(), 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, mt_left(), 1, &u[n + 1], 1, MPI_DOUBLE, mt_right(), 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    double v[N + 2];
    for (int i = 1; i <= n; i++) v[i] = u[i] + 0.2 * ((u[i - 1] + u[i + 1] - 2.0 * u[i]) + 0.3 * sin(u[i]));
    for (int i = 1; i <= n; i++) u[i] = v[i];
  }
  for (int i = 0; i < n; i++) y[i] = u[i + 1];
}

/* The persistent halo's values, untaped, equal the reference's: the
 * persistent requests move the current values at every start. */
static void halo_values(void) {
  double x0[N], ref[N];
  ad_real x[N], y[N];
  for (int i = 0; i < N; i++) {
    x0[i] = 0.1 * (i + 1) + 0.37 * mt_rank;
    x[i] = ad_const(x0[i]);
  }
  halo(x, N, y, N, NULL);
  halo_reference(x0, N, ref);
  for (int i = 0; i < N; i++) MT_CLOSE(ad_value(y[i]), ref[i], 1e-14);
}

/* Every persistent send mode, restarted in every step; the receive starts
 * before a barrier, so the ready send is legal. */
static void persistent_modes(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N], acc[N];
  for (int i = 0; i < n; i++) acc[i] = x[i];
  ad_mpi_request rq, sq[4];
  ad_mpi_recv_init(r, n, AD_MPI_REAL, mt_left(), 8, MPI_COMM_WORLD, &rq);
  ad_mpi_send_init(s, n, AD_MPI_REAL, mt_right(), 8, MPI_COMM_WORLD, &sq[0]);
  ad_mpi_ssend_init(s, n, AD_MPI_REAL, mt_right(), 8, MPI_COMM_WORLD, &sq[1]);
  ad_mpi_bsend_init(s, n, AD_MPI_REAL, mt_right(), 8, MPI_COMM_WORLD, &sq[2]);
  ad_mpi_rsend_init(s, n, AD_MPI_REAL, mt_right(), 8, MPI_COMM_WORLD, &sq[3]);
  for (int step = 0; step < 5; step++) {
    for (int i = 0; i < n; i++) s[i] = ad_mul(acc[i], ad_cos(acc[(i + step) % n]));
    ad_mpi_start(&rq);
    MPI_Barrier(MPI_COMM_WORLD);
    ad_mpi_start(&sq[step % 4]);
    ad_mpi_request both[2] = {rq, sq[step % 4]};
    MT_CHECK(ad_mpi_waitall(2, both, sts) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) acc[i] = ad_add(acc[i], ad_mul(0.5, r[i]));
  }
  ad_mpi_request_free(&rq);
  for (int k = 0; k < 4; k++) ad_mpi_request_free(&sq[k]);
  for (int i = 0; i < n; i++) y[i] = acc[i];
}

#ifndef ARIADNE_PASSIVE
/* Adjoint and tangent bytes on the wire equal the forward bytes, summed over
 * the ranks. */
static void check_bytes(const char *name, mt_prog f) {
  uint64_t bytes[3];
  mt_sweep_bytes(f, N, NULL, 0.3, 0.05, bytes);
  double mine[3] = {(double)bytes[0], (double)bytes[1], (double)bytes[2]}, all[3];
  MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CHECK(all[0] > 0);
  MT_CHECK(all[1] == all[0]);
  MT_CHECK(all[2] == all[0]);
  if (all[1] != all[0] || all[2] != all[0])
    fprintf(stderr, "[%d] %s: bytes forward %g adjoint %g tangent %g\n", mt_rank, name, all[0], all[1], all[2]);
}

/* ------------------------------------------------------------------------ */
/* Bad input: each case on a tape of its own, so that its sticky error is    */
/* the first one                                                             */
/* ------------------------------------------------------------------------ */

static ad_tape *bad_begin(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  return t;
}

static void bad_end(ad_tape *t, const char *what) {
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  const char *msg = ad_tape_error_message(t);
  if (!msg || !strstr(msg, what)) {
    mt_errors++;
    fprintf(stderr, "[%d] expected an error naming %s, got: %s\n", mt_rank, what, msg ? msg : "(none)");
  }
  ad_tape_destroy(t);
}

static void fresh(ad_real *v) {
  v[0] = ad_input(3.0);
  v[1] = ad_input(4.0);
}

static void bad_input(void) {
  MPI_Comm self = MPI_COMM_SELF;
  ad_real v[2], w[2];

  /* A persistent request started twice, alone and in one startall. */
  ad_tape *t = bad_begin();
  v[0] = ad_input(1.0);
  v[1] = ad_input(2.0);
  ad_mpi_request rq, sq;
  ad_mpi_recv_init(w, 2, AD_MPI_REAL, 0, 50, self, &rq);
  ad_mpi_send_init(v, 2, AD_MPI_REAL, 0, 50, self, &sq);
  MT_CHECK(ad_mpi_start(&rq) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_start(&rq) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_start(&sq) == MPI_SUCCESS);
  ad_mpi_request both[2] = {rq, sq};
  MT_CHECK(ad_mpi_waitall(2, both, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_value(w[1]) == 2.0);
  bad_end(t, "ad_mpi_start");
  t = bad_begin();
  ad_mpi_request twice[2] = {sq, sq};
  MT_CHECK(ad_mpi_startall(2, twice) == MPI_ERR_REQUEST);
  bad_end(t, "ad_mpi_startall");

  /* A null request started or freed. */
  t = bad_begin();
  ad_mpi_request null = AD_MPI_REQUEST_NULL;
  MT_CHECK(ad_mpi_start(&null) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_request_free(&null) == MPI_ERR_REQUEST);
  bad_end(t, "ad_mpi_start: not a persistent request");

  /* A stale copy of a freed persistent request. */
  t = bad_begin();
  ad_mpi_request copy = sq;
  MT_CHECK(ad_mpi_request_free(&sq) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_start(&copy) == MPI_ERR_REQUEST);
  bad_end(t, "ad_mpi_start");
  ad_mpi_request_free(&rq);

  /* Freeing an active receive; it can be cancelled and completed instead. */
  t = bad_begin();
  ad_mpi_request q;
  ad_mpi_irecv(w, 2, AD_MPI_REAL, 0, 51, self, &q);
  MT_CHECK(ad_mpi_request_free(&q) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_cancel(&q) == MPI_SUCCESS);
  MPI_Status st;
  MT_CHECK(ad_mpi_wait(&q, &st) == MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MT_CHECK(cancelled);
  bad_end(t, "ad_mpi_request_free");

  /* Cancel of a receive that has matched: refused, and the values arrive. */
  t = bad_begin();
  fresh(v);
  ad_mpi_request pair[2];
  ad_mpi_irecv(w, 2, AD_MPI_REAL, 0, 52, self, &pair[0]);
  ad_mpi_isend(v, 2, AD_MPI_REAL, 0, 52, self, &pair[1]);
  for (int flag = 0; !flag;) MPI_Request_get_status(pair[0].mpi, &flag, MPI_STATUS_IGNORE);
  MT_CHECK(ad_mpi_cancel(&pair[0]) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_waitall(2, pair, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_value(w[0]) == 3.0);
  bad_end(t, "ad_mpi_cancel");

  /* Cancel of a send of AD_MPI_REAL data. */
  t = bad_begin();
  fresh(v);
  ad_mpi_isend(v, 2, AD_MPI_REAL, 0, 53, self, &pair[1]);
  MT_CHECK(ad_mpi_cancel(&pair[1]) == MPI_ERR_REQUEST);
  ad_mpi_recv(w, 2, AD_MPI_REAL, 0, 53, self, MPI_STATUS_IGNORE);
  MT_CHECK(ad_mpi_wait(&pair[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
  bad_end(t, "ad_mpi_cancel");

  /* A stale copy of a nonblocking request, through the new completion calls. */
  t = bad_begin();
  fresh(v);
  ad_mpi_isend(v, 2, AD_MPI_REAL, 0, 54, self, &q);
  copy = q;
  ad_mpi_recv(w, 2, AD_MPI_REAL, 0, 54, self, MPI_STATUS_IGNORE);
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  int idx, flag, out, ix[1];
  MT_CHECK(ad_mpi_testany(1, &copy, &idx, &flag, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_waitsome(1, &copy, &out, ix, MPI_STATUSES_IGNORE) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_request_free(&copy) == MPI_ERR_REQUEST);
  bad_end(t, "ad_mpi_testany");

  /* A stale copy of a matched-probe message. */
  t = bad_begin();
  fresh(v);
  ad_mpi_isend(v, 2, AD_MPI_REAL, 0, 55, self, &q);
  ad_mpi_message msg = AD_MPI_MESSAGE_NULL, mcopy;
  MT_CHECK(ad_mpi_mprobe(0, 55, self, &msg, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  mcopy = msg;
  MT_CHECK(ad_mpi_mrecv(w, 2, AD_MPI_REAL, &msg, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_mrecv(w, 2, AD_MPI_REAL, &mcopy, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  bad_end(t, "ad_mpi_mrecv");

  /* A probed message received as passive data after a later active message
   * of its stream: that message's number would be wrong. */
  t = bad_begin();
  fresh(v);
  double pas = 5.0, rpas = 0.0;
  MPI_Request pq;
  MPI_Isend(&pas, 1, MPI_DOUBLE, 0, 57, self, &pq);
  ad_mpi_isend(v, 2, AD_MPI_REAL, 0, 57, self, &q);
  MT_CHECK(ad_mpi_mprobe(0, 57, self, &msg, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  ad_mpi_recv(w, 2, AD_MPI_REAL, 0, 57, self, MPI_STATUS_IGNORE);
  MT_CHECK(ad_mpi_mrecv(&rpas, 1, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(rpas == 5.0 && ad_value(w[1]) == 4.0);
  MPI_Wait(&pq, MPI_STATUS_IGNORE);
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  bad_end(t, "ad_mpi_mrecv: a message probed");

  /* The request of a nonblocking collective cannot be freed or cancelled;
   * it completes as usual afterwards. */
  t = bad_begin();
  fresh(v);
  ad_mpi_iallreduce(v, w, 2, AD_MPI_REAL, MPI_SUM, self, &q);
  MT_CHECK(ad_mpi_request_free(&q) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_cancel(&q) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_value(w[0]) == 3.0);
  bad_end(t, "ad_mpi_request_free");

  /* A tape in error refuses to sweep: no wrong number. */
  t = bad_begin();
  v[0] = ad_input(1.0);
  ad_mpi_recv_init(w, 1, AD_MPI_REAL, 0, 56, self, &rq);
  ad_mpi_send_init(v, 1, AD_MPI_REAL, 0, 56, self, &sq);
  ad_mpi_start(&rq);
  ad_mpi_start(&rq);
  ad_mpi_start(&sq);
  ad_mpi_wait(&rq, MPI_STATUS_IGNORE);
  ad_mpi_wait(&sq, MPI_STATUS_IGNORE);
  ad_real y = ad_mul(w[0], w[0]);
  ad_tape_end(t);
  double g = 0.0;
  MT_CHECK(ad_gradient(t, y, 1, v, &g) != AD_OK);
  ad_tape_destroy(t);
  ad_mpi_request_free(&rq);
  ad_mpi_request_free(&sq);
}
#endif /* ARIADNE_PASSIVE */

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  mt_bsend_buffer(1 << 16);
  halo_values();
  static const struct {
    const char *name;
    mt_ad_prog f;
  } progs[] = {{"send_modes", send_modes},         {"test_calls", test_calls},
               {"cancel_free", cancel_free},       {"mixed_collective", mixed_collective},
               {"unknown_length", unknown_length}, {"mprobe_order", mprobe_order},
               {"halo", halo},                     {"persistent_modes", persistent_modes}};
  for (size_t k = 0; k < sizeof progs / sizeof progs[0]; k++) {
#ifdef ARIADNE_PASSIVE
    ad_real x[N], y[N];
    unsigned long long seed = 99ull + (unsigned long long)mt_rank;
    for (int i = 0; i < N; i++) x[i] = 0.5 + 0.4 * mt_rand(&seed);
    progs[k].f(x, N, y, N, NULL);
#else
    mt_check_prog(progs[k].name, progs[k].f, N, N, NULL, 1e-6);
#endif
  }
#ifndef ARIADNE_PASSIVE
  check_bytes("halo", halo);
  check_bytes("unknown_length", unknown_length);
  check_bytes("send_modes", send_modes);
  bad_input();
#endif
  mt_bsend_buffer(0);
  return mt_finalize();
}
