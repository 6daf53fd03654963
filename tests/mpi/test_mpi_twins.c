/* SPDX-License-Identifier: BSD-3-Clause */
/* The nonblocking, neighbourhood and persistent collectives, and
 * reduce_scatter and alltoallw, against plain MPI on doubles: the same
 * values, bit for bit (the data are small integers and halves, so every
 * sum is exact whatever order MPI adds in). Compiled twice: active (the
 * wrappers on passive ad_real values) and with ARIADNE_PASSIVE (every
 * wrapper is its MPI twin, ad_real is double). */
#include "mtest.h"

#define C 3

static double val(int rank, int i) { return 0.5 * (rank + 1) + i; }

static void same(const ad_real *a, const double *b, int n, const char *what) {
  for (int i = 0; i < n; i++)
    if (ad_value(a[i]) != b[i]) {
      mt_errors++;
      fprintf(stderr, "[%d] %s: element %d is %.17g, plain MPI gives %.17g\n", mt_rank, what, i, ad_value(a[i]), b[i]);
      return;
    }
}

static void fill(ad_real *a, double *b, int n, int salt) {
  for (int i = 0; i < n; i++) {
    b[i] = val(mt_rank, i + salt);
    a[i] = ad_const(b[i]);
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int p = mt_size, me = mt_rank, n = C * p;
  MPI_Comm w = MPI_COMM_WORLD;
  ad_real *as = calloc((size_t)n, sizeof *as), *ar = calloc((size_t)n, sizeof *ar);
  double *ds = calloc((size_t)n, sizeof *ds), *dr = calloc((size_t)n, sizeof *dr);
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  int *ddsp = malloc(sizeof(int) * (size_t)p), *bdsp = malloc(sizeof(int) * (size_t)p);
  MPI_Datatype *ta = malloc(sizeof(MPI_Datatype) * (size_t)p), *td = malloc(sizeof(MPI_Datatype) * (size_t)p);
  for (int j = 0; j < p; j++) {
    cnt[j] = C;
    dsp[j] = j * C;
    bdsp[j] = (int)(dsp[j] * sizeof(ad_real));
    ddsp[j] = (int)(dsp[j] * sizeof(double));
    ta[j] = AD_MPI_REAL;
    td[j] = MPI_DOUBLE;
  }
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  MPI_Request r;
#define RUN(what, adcall, mpicall, cnt_out)                                                                            \
  do {                                                                                                                 \
    fill(as, ds, n, 0);                                                                                                \
    for (int i_ = 0; i_ < n; i_++) {                                                                                   \
      ar[i_] = ad_const(-1.0);                                                                                         \
      dr[i_] = -1.0;                                                                                                   \
    }                                                                                                                  \
    MT_CHECK((adcall) == MPI_SUCCESS);                                                                                 \
    MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);                                                       \
    MT_CHECK((mpicall) == MPI_SUCCESS);                                                                                \
    MPI_Wait(&r, MPI_STATUS_IGNORE);                                                                                   \
    same(ar, dr, cnt_out, what);                                                                                       \
  } while (0)
  RUN("iallreduce sum", ad_mpi_iallreduce(as, ar, C, AD_MPI_REAL, MPI_SUM, w, &q),
      MPI_Iallreduce(ds, dr, C, MPI_DOUBLE, MPI_SUM, w, &r), C);
  RUN("iallreduce max", ad_mpi_iallreduce(as, ar, C, AD_MPI_REAL, MPI_MAX, w, &q),
      MPI_Iallreduce(ds, dr, C, MPI_DOUBLE, MPI_MAX, w, &r), C);
  RUN("ireduce prod", ad_mpi_ireduce(as, ar, C, AD_MPI_REAL, MPI_PROD, 0, w, &q),
      MPI_Ireduce(ds, dr, C, MPI_DOUBLE, MPI_PROD, 0, w, &r), me == 0 ? C : 0);
  RUN("ibcast", ad_mpi_ibcast(as, C, AD_MPI_REAL, p - 1, w, &q), MPI_Ibcast(ds, C, MPI_DOUBLE, p - 1, w, &r), 0);
  same(as, ds, C, "ibcast");
  RUN("igather", ad_mpi_igather(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, 0, w, &q),
      MPI_Igather(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, 0, w, &r), me == 0 ? n : 0);
  RUN("igatherv", ad_mpi_igatherv(as, C, AD_MPI_REAL, ar, cnt, dsp, AD_MPI_REAL, 0, w, &q),
      MPI_Igatherv(ds, C, MPI_DOUBLE, dr, cnt, dsp, MPI_DOUBLE, 0, w, &r), me == 0 ? n : 0);
  RUN("iscatter", ad_mpi_iscatter(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, p - 1, w, &q),
      MPI_Iscatter(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, p - 1, w, &r), C);
  RUN("iscatterv", ad_mpi_iscatterv(as, cnt, dsp, AD_MPI_REAL, ar, C, AD_MPI_REAL, p - 1, w, &q),
      MPI_Iscatterv(ds, cnt, dsp, MPI_DOUBLE, dr, C, MPI_DOUBLE, p - 1, w, &r), C);
  RUN("iallgather", ad_mpi_iallgather(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, w, &q),
      MPI_Iallgather(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, w, &r), n);
  RUN("iallgatherv", ad_mpi_iallgatherv(as, C, AD_MPI_REAL, ar, cnt, dsp, AD_MPI_REAL, w, &q),
      MPI_Iallgatherv(ds, C, MPI_DOUBLE, dr, cnt, dsp, MPI_DOUBLE, w, &r), n);
  RUN("ialltoall", ad_mpi_ialltoall(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, w, &q),
      MPI_Ialltoall(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, w, &r), n);
  RUN("ialltoallv", ad_mpi_ialltoallv(as, cnt, dsp, AD_MPI_REAL, ar, cnt, dsp, AD_MPI_REAL, w, &q),
      MPI_Ialltoallv(ds, cnt, dsp, MPI_DOUBLE, dr, cnt, dsp, MPI_DOUBLE, w, &r), n);
  RUN("ialltoallw", ad_mpi_ialltoallw(as, cnt, bdsp, ta, ar, cnt, bdsp, ta, w, &q),
      MPI_Ialltoallw(ds, cnt, ddsp, td, dr, cnt, ddsp, td, w, &r), n);
  RUN("ireduce_scatter", ad_mpi_ireduce_scatter(as, ar, cnt, AD_MPI_REAL, MPI_SUM, w, &q),
      MPI_Ireduce_scatter(ds, dr, cnt, MPI_DOUBLE, MPI_SUM, w, &r), C);
  RUN("ireduce_scatter_block", ad_mpi_ireduce_scatter_block(as, ar, C, AD_MPI_REAL, MPI_MAX, w, &q),
      MPI_Ireduce_scatter_block(ds, dr, C, MPI_DOUBLE, MPI_MAX, w, &r), C);
  RUN("iscan", ad_mpi_iscan(as, ar, C, AD_MPI_REAL, MPI_SUM, w, &q), MPI_Iscan(ds, dr, C, MPI_DOUBLE, MPI_SUM, w, &r),
      C);
  RUN("iexscan", ad_mpi_iexscan(as, ar, C, AD_MPI_REAL, MPI_SUM, w, &q),
      MPI_Iexscan(ds, dr, C, MPI_DOUBLE, MPI_SUM, w, &r), me == 0 ? 0 : C);
  RUN("ibarrier", ad_mpi_ibarrier(w, &q), MPI_Ibarrier(w, &r), 0);
  /* Blocking ones: r stays null. */
  r = MPI_REQUEST_NULL;
  RUN("reduce_scatter", ad_mpi_reduce_scatter(as, ar, cnt, AD_MPI_REAL, MPI_SUM, w),
      MPI_Reduce_scatter(ds, dr, cnt, MPI_DOUBLE, MPI_SUM, w), C);
  RUN("alltoallw", ad_mpi_alltoallw(as, cnt, bdsp, ta, ar, cnt, bdsp, ta, w),
      MPI_Alltoallw(ds, cnt, ddsp, td, dr, cnt, ddsp, td, w), n);
  /* A directed ring, one edge each way (no repeated edges: there MPI
   * libraries route differently between their own calls). */
  int src = (me + p - 1) % p, dst = (me + 1) % p;
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(w, 1, &src, MPI_UNWEIGHTED, 1, &dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g);
  RUN("neighbor_allgather", ad_mpi_neighbor_allgather(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, g),
      MPI_Neighbor_allgather(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, g), C);
  RUN("neighbor_alltoallv", ad_mpi_neighbor_alltoallv(as, cnt, dsp, AD_MPI_REAL, ar, cnt, dsp, AD_MPI_REAL, g),
      MPI_Neighbor_alltoallv(ds, cnt, dsp, MPI_DOUBLE, dr, cnt, dsp, MPI_DOUBLE, g), C);
  RUN("ineighbor_alltoall", ad_mpi_ineighbor_alltoall(as, C, AD_MPI_REAL, ar, C, AD_MPI_REAL, g, &q),
      MPI_Ineighbor_alltoall(ds, C, MPI_DOUBLE, dr, C, MPI_DOUBLE, g, &r), C);
  r = MPI_REQUEST_NULL;
  MPI_Aint ab[1] = {0};
  RUN("neighbor_alltoallw", ad_mpi_neighbor_alltoallw(as, cnt, ab, ta, ar, cnt, ab, ta, g),
      MPI_Neighbor_alltoallw(ds, cnt, ab, td, dr, cnt, ab, td, g), C);
  MPI_Comm_free(&g);
#if MPI_VERSION >= 4
  /* A persistent allreduce started twice, against MPI's own. */
  MPI_Request pr;
  MT_CHECK(ad_mpi_allreduce_init(as, ar, C, AD_MPI_REAL, MPI_SUM, w, MPI_INFO_NULL, &q) == MPI_SUCCESS);
  MPI_Allreduce_init(ds, dr, C, MPI_DOUBLE, MPI_SUM, w, MPI_INFO_NULL, &pr);
  for (int k = 0; k < 2; k++) {
    fill(as, ds, n, k);
    ad_mpi_start(&q);
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
    MPI_Start(&pr);
    MPI_Wait(&pr, MPI_STATUS_IGNORE);
    same(ar, dr, C, "allreduce_init");
  }
  MT_CHECK(ad_mpi_request_free(&q) == MPI_SUCCESS);
  MPI_Request_free(&pr);
#endif
  free(as);
  free(ar);
  free(ds);
  free(dr);
  free(cnt);
  free(dsp);
  free(ddsp);
  free(bdsp);
  free(ta);
  free(td);
  return mt_finalize();
}
