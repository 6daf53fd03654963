/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point patterns: each is a parallel program checked by the
 * dot-product test and by finite differences of the whole program. */
#include "mtest.h"

#define N 3 /* values per message */


/* Ring with sendrecv: send x^2 right, receive from the left. */
static void ring_sendrecv(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N];
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], x[i]);
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, mt_right(), 7, r, n, AD_MPI_REAL, mt_left(), 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_mul(ad_sin(r[i]), x[i]);
}

/* Ring of blocking sends, ordered so that it needs no buffering: even ranks
 * send first, odd ranks receive first (a single rank talks to itself with
 * sendrecv_replace instead). */
static void ring_blocking(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N];
  for (int i = 0; i < n; i++) s[i] = ad_exp(ad_mul(0.3, x[i]));
  if (mt_size == 1) {
    for (int i = 0; i < n; i++) r[i] = s[i];
    ad_mpi_sendrecv_replace(r, n, AD_MPI_REAL, 0, 1, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (mt_rank % 2 == 0) {
    ad_mpi_send(s, n, AD_MPI_REAL, mt_right(), 1, MPI_COMM_WORLD);
    ad_mpi_recv(r, n, AD_MPI_REAL, mt_left(), 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    ad_mpi_recv(r, n, AD_MPI_REAL, mt_left(), 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ad_mpi_ssend(s, n, AD_MPI_REAL, mt_right(), 1, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], x[i]), r[(i + 1) % n]);
}

/* Isend/Irecv/Waitall with both ring neighbours, twice with the same tag, so
 * that two messages of one stream are in flight at once. */
static void ring_nonblocking(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s1[N], s2[N], rl[N], rr[N], rl2[N], rr2[N];
  for (int i = 0; i < n; i++) {
    s1[i] = ad_mul(x[i], 2.0 + mt_rank);
    s2[i] = ad_sqrt(ad_add(x[i], 1.0));
  }
  ad_mpi_request q[8];
  ad_mpi_irecv(rl, n, AD_MPI_REAL, mt_left(), 5, MPI_COMM_WORLD, &q[0]);
  ad_mpi_irecv(rr, n, AD_MPI_REAL, mt_right(), 6, MPI_COMM_WORLD, &q[1]);
  ad_mpi_irecv(rl2, n, AD_MPI_REAL, mt_left(), 5, MPI_COMM_WORLD, &q[2]);
  ad_mpi_irecv(rr2, n, AD_MPI_REAL, mt_right(), 6, MPI_COMM_WORLD, &q[3]);
  ad_mpi_isend(s1, n, AD_MPI_REAL, mt_right(), 5, MPI_COMM_WORLD, &q[4]);
  ad_mpi_isend(s2, n, AD_MPI_REAL, mt_left(), 6, MPI_COMM_WORLD, &q[5]);
  ad_mpi_isend(s2, n, AD_MPI_REAL, mt_right(), 5, MPI_COMM_WORLD, &q[6]);
  ad_mpi_isend(s1, n, AD_MPI_REAL, mt_left(), 6, MPI_COMM_WORLD, &q[7]);
  /* complete the second message of each stream first */
  ad_mpi_wait(&q[3], MPI_STATUS_IGNORE);
  ad_mpi_wait(&q[2], MPI_STATUS_IGNORE);
  ad_mpi_waitall(8, q, MPI_STATUSES_IGNORE);
  for (int i = 0; i < n; i++)
    y[i] = ad_add(ad_add(ad_mul(rl[i], rr[i]), ad_mul(3.0, rl2[i])), ad_mul(rr2[i], x[i]));
}

/* Rank 0 receives from every other rank with wildcards, in arrival order;
 * the tag names the sender's rank. */
static void wildcard(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  for (int i = 0; i < n; i++) y[i] = ad_mul(x[i], x[i]);
  if (mt_rank == 0) {
    for (int k = 1; k < mt_size; k++) {
      ad_real r[N];
      MPI_Status st;
      ad_mpi_recv(r, n, AD_MPI_REAL, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      MT_CHECK(st.MPI_TAG == st.MPI_SOURCE);
      int cnt = -1;
      MPI_Get_count(&st, AD_MPI_REAL, &cnt);
      MT_CHECK(cnt == n);
      for (int i = 0; i < n; i++) y[i] = ad_add(y[i], ad_mul(r[i], 1.0 + st.MPI_SOURCE));
    }
  } else {
    ad_real s[N];
    for (int i = 0; i < n; i++) s[i] = ad_cos(x[i]);
    ad_mpi_send(s, n, AD_MPI_REAL, 0, mt_rank, MPI_COMM_WORLD);
  }
}

/* Irecv with wildcards completed by waitany in completion order. */
static void waitany_fanin(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  for (int i = 0; i < n; i++) y[i] = ad_sin(x[i]);
  if (mt_rank == 0) {
    int k = mt_size - 1;
    ad_real *r = calloc((size_t)(k * n + 1), sizeof *r);
    ad_mpi_request *q = calloc((size_t)k + 1, sizeof *q);
    for (int j = 0; j < k; j++) ad_mpi_irecv(r + j * n, n, AD_MPI_REAL, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &q[j]);
    for (int done = 0; done < k; done++) {
      int idx;
      MPI_Status st;
      ad_mpi_waitany(k, q, &idx, &st);
      for (int i = 0; i < n; i++) y[i] = ad_add(y[i], ad_mul(r[idx * n + i], r[idx * n + i]));
    }
    free(r);
    free(q);
  } else {
    ad_real s[N];
    for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], 1.0 + mt_rank);
    ad_mpi_request q;
    ad_mpi_isend(s, n, AD_MPI_REAL, 0, 3, MPI_COMM_WORLD, &q);
    int flag = 0;
    while (!flag) ad_mpi_test(&q, &flag, MPI_STATUS_IGNORE);
  }
}

/* Two-way exchange with buffered sends: both ranks send first. */
static void bsend_exchange(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N];
  int peer = mt_rank ^ 1;
  for (int i = 0; i < n; i++) y[i] = x[i];
  if (peer >= mt_size) return;
  for (int i = 0; i < n; i++) s[i] = ad_log(ad_add(2.0, x[i]));
  ad_mpi_bsend(s, n, AD_MPI_REAL, peer, 9, MPI_COMM_WORLD);
  ad_mpi_recv(r, n, AD_MPI_REAL, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_mul(r[i], ad_add(x[i], r[i]));
}

/* Irecv first, then ready sends from the root to all others. */
static void rsend_fanout(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real r[N];
  for (int i = 0; i < n; i++) y[i] = ad_mul(x[i], 0.5);
  if (mt_rank != 0) {
    ad_mpi_request q;
    ad_mpi_irecv(r, n, AD_MPI_REAL, 0, 4, MPI_COMM_WORLD, &q);
    MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted: rsend is legal */
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) y[i] = ad_add(y[i], ad_mul(r[i], x[i]));
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    ad_real s[N];
    for (int i = 0; i < n; i++) s[i] = ad_tanh(x[i]);
    for (int k = 1; k < mt_size; k++) ad_mpi_rsend(s, n, AD_MPI_REAL, k, 4, MPI_COMM_WORLD);
  }
}

/* User messages in plain MPI interleaved with active ones on the same tags. */
static void mixed_user(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_real s[N], r[N];
  double plain_out = 1.0 + mt_rank, plain_in = 0.0;
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], x[i]);
  ad_mpi_request q[2];
  /* Same stream (neighbour, tag 2) for both: posted in the same order on
   * both sides, active first, as MPI's matching rules require. */
  ad_mpi_irecv(r, n, AD_MPI_REAL, mt_left(), 2, MPI_COMM_WORLD, &q[0]);
  ad_mpi_isend(s, n, AD_MPI_REAL, mt_right(), 2, MPI_COMM_WORLD, &q[1]);
  MPI_Sendrecv(&plain_out, 1, MPI_DOUBLE, mt_right(), 2, &plain_in, 1, MPI_DOUBLE, mt_left(), 2, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  int other = 0;
  ad_mpi_allreduce(MPI_IN_PLACE, &other, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* passive: untouched */
  ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_mul(r[i], plain_in);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  mt_bsend_buffer(1 << 16);
  mt_check_prog("ring_sendrecv", ring_sendrecv, N, N, NULL, 1e-6);
  mt_check_prog("ring_blocking", ring_blocking, N, N, NULL, 1e-6);
  mt_check_prog("ring_nonblocking", ring_nonblocking, N, N, NULL, 1e-6);
  mt_check_prog("mixed_user", mixed_user, N, N, NULL, 1e-6);
  if (mt_size > 1) {
    mt_check_prog("wildcard", wildcard, N, N, NULL, 1e-6);
    mt_check_prog("waitany_fanin", waitany_fanin, N, N, NULL, 1e-6);
    mt_check_prog("bsend_exchange", bsend_exchange, N, N, NULL, 1e-6);
    mt_check_prog("rsend_fanout", rsend_fanout, N, N, NULL, 1e-6);
  }
  mt_bsend_buffer(0);
  return mt_finalize();
}
