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
