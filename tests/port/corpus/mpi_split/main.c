/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI over several files: a wide-stencil diffusion whose ghost exchange
 * (packed buffers, requests in a struct) lives in halo.c and exchange.c. */
#include <stdio.h>
#include <stdlib.h>

#include "halo.h"

#define NG 16
#define NX (NG + 1)
int n_inputs = NX;
double x_start[NX] = {0.1, 0.3, 0.2, 0.5, 0.4, 0.45, 0.6, 0.55, 0.7, 0.65, 0.5, 0.35, 0.3, 0.25, 0.4, 0.55, 0.5};

double objective(double *x) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int lo = rank * NG / size, hi = (rank + 1) * NG / size, m = hi - lo;
  double *u = malloc((size_t)(m + 2 * GHOSTS) * sizeof(double));
  double *v = malloc((size_t)(m + 2 * GHOSTS) * sizeof(double));
  for (int i = 0; i < m; i++) u[GHOSTS + i] = x[lo + i];
  double kappa = x[NG];
  halo h;
  halo_create(&h, MPI_COMM_WORLD);
  for (int t = 0; t < 5; t++) {
    halo_exchange(&h, u, m, MPI_COMM_WORLD);
    for (int i = GHOSTS; i < m + GHOSTS; i++)
      v[i] = u[i] + kappa * (u[i - 2] + u[i - 1] - 4.0 * u[i] + u[i + 1] + u[i + 2]) - 0.1 * u[i] * u[i];
    for (int i = GHOSTS; i < m + GHOSTS; i++) u[i] = v[i];
  }
  double local = field_energy(u, m, lo), J = 0.0;
  MPI_Allreduce(&local, &J, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  halo_destroy(&h);
  free(u);
  free(v);
  return J;
}

#define PROGRAM "mpi_split"
#include "../mpi_main.c"
