/* SPDX-License-Identifier: BSD-3-Clause */
/* Neighbourhood collectives: halo exchanges on Cartesian grids (periodic,
 * where two ranks are each other's neighbours twice, and not periodic) and
 * on a directed distributed graph, blocking and nonblocking. Each is a
 * parallel program checked by the dot-product test and by finite
 * differences of the whole program. */
#include "mtest.h"

#define N 4 /* cells per rank */

typedef struct cartctx {
  int periodic, nb, dims2;
  MPI_Comm cart; /* made in main: a communicator must outlive the sweeps of tapes that used it */
} cartctx;

/* Cells in a ring (1-D) or a row of a 2-D process grid; halo values come
 * from the neighbours along every dimension. */
static void cart_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  cartctx *c = ctx;
  int nd = c->dims2 ? 2 : 1;
  MPI_Comm cart = c->cart;
  int deg = 2 * nd;
  ad_real u[N], send[4], recv[4];
  for (int i = 0; i < n; i++) u[i] = x[i];
  for (int step = 0; step < 3; step++) {
    for (int k = 0; k < deg; k++) {
      send[k] = k % 2 ? u[n - 1] : u[0]; /* -1 neighbour gets the first cell, +1 the last */
      send[k] = ad_mul(send[k], 1.0 + 0.1 * k);
      recv[k] = ad_const(0.0);
    }
    int one[4] = {1, 1, 1, 1}, d[4] = {0, 1, 2, 3};
    ad_mpi_request q = AD_MPI_REQUEST_NULL;
    if (c->nb)
      ad_mpi_ineighbor_alltoall(send, 1, AD_MPI_REAL, recv, 1, AD_MPI_REAL, cart, &q);
    else
      ad_mpi_neighbor_alltoallv(send, one, d, AD_MPI_REAL, recv, one, d, AD_MPI_REAL, cart);
    ad_real interior = ad_mul(u[1], u[2]); /* work while it runs */
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
    ad_real halo = ad_const(0.0);
    for (int k = 0; k < deg; k++) halo = ad_add(halo, ad_mul(recv[k], 0.25 + 0.05 * k));
    for (int i = 0; i < n; i++) u[i] = ad_add(ad_mul(ad_sin(u[i]), 0.9), ad_mul(halo, 0.1 * (i + 1)));
    u[0] = ad_add(u[0], ad_mul(interior, 0.01));
  }
  for (int i = 0; i < n; i++) y[i] = u[i];
}

/* A directed graph: rank r sends to r+1 and r+2, receives from r-1 and r-2
 * (mod p): the adjoint must run the edges backwards. */
typedef struct graphctx {
  int mode; /* 0 allgather, 1 alltoallv, 2 alltoallw, 3 iallgatherv */
  MPI_Comm g;
} graphctx;

static void graph_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int mode = ((graphctx *)ctx)->mode;
  MPI_Comm g = ((graphctx *)ctx)->g;
  ad_real s[4], r[4];
  for (int i = 0; i < 4; i++) {
    s[i] = ad_mul(x[i % n], ad_add(x[(i + 1) % n], 0.5 * i));
    r[i] = ad_const(0.0);
  }
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  if (mode == 0) {
    ad_mpi_neighbor_allgather(s, 2, AD_MPI_REAL, r, 2, AD_MPI_REAL, g);
  } else if (mode == 1) {
    int sc[2] = {1, 2}, sd[2] = {0, 1}, rc[2] = {1, 2}, rd[2] = {2, 0};
    /* what rank r sends to r+1 (1 value) arrives from r-1: counts agree */
    ad_mpi_neighbor_alltoallv(s, sc, sd, AD_MPI_REAL, r, rc, rd, AD_MPI_REAL, g);
  } else if (mode == 2) {
    int sc[2] = {2, 1}, rc[2] = {2, 1};
    MPI_Aint sd[2] = {0, 2 * (MPI_Aint)sizeof(ad_real)}, rd[2] = {(MPI_Aint)sizeof(ad_real), 0};
    MPI_Datatype ty[2] = {AD_MPI_REAL, AD_MPI_REAL};
    int scv[2] = {sc[0], sc[1]}, rcv[2] = {rc[0], rc[1]};
    ad_mpi_ineighbor_alltoallw(s, scv, sd, ty, r, rcv, rd, ty, g, &q);
  } else {
    int rc[2] = {2, 2}, rd[2] = {2, 0};
    ad_mpi_ineighbor_allgatherv(s, 2, AD_MPI_REAL, r, rc, rd, AD_MPI_REAL, g, &q);
  }
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], r[(i + 1) % 4]), x[i]);
}

/* Passive data is MPI's own call. */
static void test_passive(void) {
  int p = mt_size, src = (mt_rank + p - 1) % p, dst = (mt_rank + 1) % p, v = mt_rank, got = -1;
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &src, MPI_UNWEIGHTED, 1, &dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &g);
  MT_CHECK(ad_mpi_neighbor_allgather(&v, 1, MPI_INT, &got, 1, MPI_INT, g) == MPI_SUCCESS);
  MT_CHECK(got == src);
  /* a communicator without a topology is MPI's error */
  ad_real a = ad_const(1.0), b;
  MT_CHECK(ad_mpi_neighbor_allgather(&a, 1, AD_MPI_REAL, &b, 1, AD_MPI_REAL, MPI_COMM_WORLD) != MPI_SUCCESS);
  MPI_Comm_free(&g);
  /* A slot of MPI_PROC_NULL is left as it was, and counts no bytes. */
  int dims[1] = {mt_size}, per[1] = {0};
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &cart);
  ad_real s2[2] = {ad_const(1.0 + mt_rank), ad_const(2.0 + mt_rank)}, r2[2] = {ad_const(7.0), ad_const(7.0)};
  ad_mpi_stats st0, st1;
  ad_mpi_stats_get(&st0);
  MT_CHECK(ad_mpi_neighbor_alltoall(s2, 1, AD_MPI_REAL, r2, 1, AD_MPI_REAL, cart) == MPI_SUCCESS);
  ad_mpi_stats_get(&st1);
  MT_CHECK(ad_value(r2[0]) == (mt_rank == 0 ? 7.0 : 2.0 + (mt_rank - 1)));
  MT_CHECK(ad_value(r2[1]) == (mt_rank == mt_size - 1 ? 7.0 : 1.0 + (mt_rank + 1)));
  int out = (mt_rank > 0) + (mt_rank < mt_size - 1);
  MT_CHECK(st1.forward_bytes - st0.forward_bytes == (uint64_t)out * sizeof(double));
  MPI_Comm_free(&cart);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  ad_mpi_set_timeout(60);
  for (int periodic = 0; periodic < 2; periodic++)
    for (int nb = 0; nb < 2; nb++)
      for (int d2 = 0; d2 < 2; d2++) {
        int nd = d2 ? 2 : 1, dims[2] = {0, 0}, per[2] = {periodic, periodic};
        MPI_Dims_create(mt_size, nd, dims);
        cartctx c = {periodic, nb, d2, MPI_COMM_NULL};
        MPI_Cart_create(MPI_COMM_WORLD, nd, dims, per, 0, &c.cart);
        mt_check_prog("cart", cart_prog, N, N, &c, 1e-6);
        MPI_Comm_free(&c.cart);
      }
  int p = mt_size, src[2] = {(mt_rank + p - 1) % p, (mt_rank + p - 2) % p},
      dst[2] = {(mt_rank + 1) % p, (mt_rank + 2) % p};
  graphctx gc;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, MPI_UNWEIGHTED, 2, dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &gc.g);
  for (gc.mode = 0; gc.mode < 4; gc.mode++) mt_check_prog("graph", graph_prog, N, N, &gc, 1e-6);
  MPI_Comm_free(&gc.g);
  test_passive();
  return mt_finalize();
}
