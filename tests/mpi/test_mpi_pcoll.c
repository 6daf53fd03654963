/* SPDX-License-Identifier: BSD-3-Clause */
/* Persistent collectives (MPI 4.0): set up once, started every step, mixed
 * with persistent point-to-point requests in one startall and waitall. Each
 * program is checked by the dot-product test and by finite differences of
 * the whole program. Skipped where the MPI library has no persistent
 * collectives (Open MPI 4.1). */
#include "mtest.h"

#if MPI_VERSION >= 4

#define N 3

/* Explicit steps whose coupling is a persistent allreduce and a persistent
 * broadcast, started together every step. */
static void steps_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  ad_real u[N], loc[N], sum[N], b[N];
  ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
  ad_mpi_allreduce_init(loc, sum, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
  ad_mpi_bcast_init(b, n, AD_MPI_REAL, mt_size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
  for (int i = 0; i < n; i++) u[i] = x[i];
  for (int step = 0; step < 3; step++) {
    for (int i = 0; i < n; i++) {
      loc[i] = ad_mul(u[i], u[i]);
      b[i] = ad_sin(u[i]);
    }
    ad_mpi_startall(2, q);
    ad_real w = ad_mul(u[0], 0.5); /* work while they run */
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; i++) u[i] = ad_add(ad_add(ad_mul(u[i], 0.9), ad_mul(sum[i], 0.01)), ad_mul(b[i], w));
  }
  MT_CHECK(ad_mpi_request_free(&q[0]) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_request_free(&q[1]) == MPI_SUCCESS);
  for (int i = 0; i < n; i++) y[i] = u[i];
}

/* A persistent MAX reduction (gathered and reduced at completion), a
 * persistent gather and scatter, and a persistent barrier. */
static void misc_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  int p = mt_size;
  ad_real s[N], mx[N], r[N], *all = calloc((size_t)(p * n), sizeof *all);
  ad_mpi_request q[4];
  for (int i = 0; i < 4; i++) q[i] = (ad_mpi_request)AD_MPI_REQUEST_NULL;
  ad_mpi_allreduce_init(s, mx, n, AD_MPI_REAL, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
  ad_mpi_gather_init(s, n, AD_MPI_REAL, all, n, AD_MPI_REAL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
  ad_mpi_scatter_init(all, n, AD_MPI_REAL, r, n, AD_MPI_REAL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &q[2]);
  ad_mpi_barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &q[3]);
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], ad_add(x[(i + 1) % n], 0.3 * mt_rank));
  for (int step = 0; step < 2; step++) {
    ad_mpi_start(&q[0]);
    ad_mpi_start(&q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    if (mt_rank == 0)
      for (int k = 0; k < p * n; k++) all[k] = ad_exp(ad_mul(all[k], 0.5));
    ad_mpi_start(&q[2]);
    ad_mpi_start(&q[3]);
    ad_mpi_waitall(2, q + 2, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; i++) s[i] = ad_add(ad_mul(r[i], 0.5), ad_mul(mx[i], 0.25));
  }
  for (int i = 0; i < 4; i++) ad_mpi_request_free(&q[i]);
  for (int i = 0; i < n; i++) y[i] = s[i];
  free(all);
}

/* A persistent neighbourhood halo exchange on a periodic ring. */
static void halo_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  MPI_Comm ring = *(MPI_Comm *)ctx;
  ad_real u[N], send[2], recv[2];
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  ad_mpi_neighbor_alltoall_init(send, 1, AD_MPI_REAL, recv, 1, AD_MPI_REAL, ring, MPI_INFO_NULL, &q);
  for (int i = 0; i < n; i++) u[i] = x[i];
  for (int step = 0; step < 3; step++) {
    send[0] = u[0];
    send[1] = u[n - 1];
    ad_mpi_start(&q);
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
    ad_real nu[N];
    for (int i = 0; i < n; i++) {
      ad_real l = i > 0 ? u[i - 1] : recv[0], r = i < n - 1 ? u[i + 1] : recv[1];
      nu[i] = ad_add(ad_mul(u[i], 0.5), ad_mul(ad_add(l, r), 0.25));
    }
    for (int i = 0; i < n; i++) u[i] = ad_sin(nu[i]);
  }
  ad_mpi_request_free(&q);
  for (int i = 0; i < n; i++) y[i] = u[i];
}

/* The one-block family (allgather, alltoall, neighbour allgather) and the
 * reductions kept by reduce_init (reduce_scatter, its block form, scan),
 * started together: each gives what its nonblocking twin gives on the same
 * values, and the whole program's derivatives are checked by the caller. */
static void family_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  MPI_Comm ring = *(MPI_Comm *)ctx;
  int p = mt_size, *ones = malloc(sizeof(int) * (size_t)p);
  ad_real *v = calloc((size_t)p, sizeof *v), *ag = calloc((size_t)p, sizeof *ag), *aa = calloc((size_t)p, sizeof *aa);
  ad_real *twin = calloc((size_t)p, sizeof *twin), rs, rsb, sc, nb[2], t1, t2[2];
  for (int k = 0; k < p; k++) {
    ones[k] = 1;
    v[k] = ad_mul(x[k % n], 1.0 + mt_rank + 0.5 * k);
  }
  ad_mpi_request q[6];
  ad_mpi_allgather_init(v, 1, AD_MPI_REAL, ag, 1, AD_MPI_REAL, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
  ad_mpi_alltoall_init(v, 1, AD_MPI_REAL, aa, 1, AD_MPI_REAL, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
  ad_mpi_neighbor_allgather_init(v, 1, AD_MPI_REAL, nb, 1, AD_MPI_REAL, ring, MPI_INFO_NULL, &q[2]);
  ad_mpi_reduce_scatter_init(v, &rs, ones, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[3]);
  ad_mpi_reduce_scatter_block_init(v, &rsb, 1, AD_MPI_REAL, MPI_PROD, MPI_COMM_WORLD, MPI_INFO_NULL, &q[4]);
  ad_mpi_scan_init(v, &sc, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[5]);
  ad_mpi_startall(6, q);
  ad_mpi_waitall(6, q, MPI_STATUSES_IGNORE);
  for (int i = 0; i < 6; i++) MT_CHECK(ad_mpi_request_free(&q[i]) == MPI_SUCCESS);

  ad_mpi_request w;
  ad_mpi_iallgather(v, 1, AD_MPI_REAL, twin, 1, AD_MPI_REAL, MPI_COMM_WORLD, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  for (int k = 0; k < p; k++) MT_CHECK(ad_value(ag[k]) == ad_value(twin[k]));
  ad_mpi_ialltoall(v, 1, AD_MPI_REAL, twin, 1, AD_MPI_REAL, MPI_COMM_WORLD, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  for (int k = 0; k < p; k++) MT_CHECK(ad_value(aa[k]) == ad_value(twin[k]));
  ad_mpi_ineighbor_allgather(v, 1, AD_MPI_REAL, t2, 1, AD_MPI_REAL, ring, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  MT_CHECK(ad_value(nb[0]) == ad_value(t2[0]) && ad_value(nb[1]) == ad_value(t2[1]));
  ad_mpi_ireduce_scatter(v, &t1, ones, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  MT_CHECK(ad_value(rs) == ad_value(t1));
  ad_mpi_ireduce_scatter_block(v, &t1, 1, AD_MPI_REAL, MPI_PROD, MPI_COMM_WORLD, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  MT_CHECK(ad_value(rsb) == ad_value(t1));
  ad_mpi_iscan(v, &t1, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &w);
  ad_mpi_wait(&w, MPI_STATUS_IGNORE);
  MT_CHECK(ad_value(sc) == ad_value(t1));

  ad_real sg = ad_const(0.0), sa = ad_const(0.0);
  for (int k = 0; k < p; k++) {
    sg = ad_add(sg, ad_mul(ag[k], 0.5 + k));
    sa = ad_add(sa, ad_sin(aa[k]));
  }
  y[0] = ad_add(ad_mul(sg, nb[0]), rs);
  y[1] = ad_add(ad_mul(sa, nb[1]), rsb);
  for (int i = 2; i < n; i++) y[i] = ad_mul(x[i], sc);
  free(ones);
  free(v);
  free(ag);
  free(aa);
  free(twin);
}

/* Misuse: starting an active persistent collective again is an error. */
static void test_errors(void) {
  ad_real a = ad_const(1.0), b;
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  MT_CHECK(ad_mpi_allreduce_init(&a, &b, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_start(&q) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_start(&q) == MPI_ERR_REQUEST);
  MT_CHECK(ad_mpi_request_free(&q) == MPI_ERR_REQUEST); /* active */
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_value(b) == mt_size);
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS); /* inactive: at once */
  MT_CHECK(ad_mpi_request_free(&q) == MPI_SUCCESS);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  ad_mpi_set_timeout(60);
  mt_check_prog("persistent_steps", steps_prog, N, N, NULL, 1e-6);
  mt_check_prog("persistent_misc", misc_prog, N, N, NULL, 1e-5);
  int dims[1] = {mt_size}, per[1] = {1};
  MPI_Comm ring;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &ring);
  mt_check_prog("persistent_halo", halo_prog, N, N, &ring, 1e-6);
  mt_check_prog("persistent_family", family_prog, N, N, &ring, 1e-5);
  MPI_Comm_free(&ring);
  test_errors();
  return mt_finalize();
}

#else

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("skipped: no persistent collectives in this MPI library (MPI_VERSION %d)\n", MPI_VERSION);
  MPI_Finalize();
  return 0;
}

#endif
