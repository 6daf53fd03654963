/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI: a 1-D diffusion split in blocks, ghost cells exchanged with
 * Isend/Irecv/Waitall, a parameter broadcast from rank 0 and the objective
 * summed with Allreduce. Passive data (the step count) stays plain MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NG 24
#define NX (NG + 1)
int n_inputs = NX;
double x_start[NX] = {0.1,  0.3,  0.2,  0.5,  0.4, 0.45, 0.6,  0.55, 0.7, 0.65, 0.5, 0.35, 0.3,
                      0.25, 0.4,  0.55, 0.5,  0.6, 0.7,  0.75, 0.6,  0.5, 0.4,  0.3, 0.15};

double objective(double *x) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int lo = rank * NG / size, hi = (rank + 1) * NG / size, m = hi - lo;
  double *u = malloc((size_t)(m + 2) * sizeof(double)), *v = malloc((size_t)(m + 2) * sizeof(double));
  for (int i = 0; i < m; i++) u[i + 1] = x[lo + i];
  u[0] = u[m + 1] = 0.0;
  double kappa = x[NG];
  MPI_Bcast(&kappa, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int steps = 0;
  if (rank == 0) steps = 12;
  MPI_Bcast(&steps, 1, MPI_INT, 0, MPI_COMM_WORLD);
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  for (int t = 0; t < steps; t++) {
    MPI_Request req[4];
    MPI_Status st[4];
    MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&u[m + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&u[m], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, st);
    for (int i = 1; i <= m; i++) v[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1]) - 0.05 * u[i] * u[i];
    for (int i = 1; i <= m; i++) u[i] = v[i];
  }
  double local = 0.0, J = 0.0;
  for (int i = 1; i <= m; i++) local += u[i] * u[i] * (lo + i);
  MPI_Allreduce(&local, &J, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(u);
  free(v);
  return J;
}

#define PROGRAM "mpi_halo"
#include "mpi_main.c"
