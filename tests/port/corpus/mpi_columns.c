/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI with a derived datatype: a 2-D diffusion on an NY x NG grid split by
 * columns over the ranks, row-major with one ghost column on each side; the
 * ghost columns are exchanged as one MPI_Type_vector each with Sendrecv. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NY 4
#define NG 9
#define NX (NY * NG + 1)
int n_inputs = NX;
double x_start[NX] = {0.3,    0.4273, 0.3545, 0.4818, 0.4091, 0.3364, 0.4636, 0.3909, 0.3182, 0.4455,
                      0.3727, 0.3,    0.4273, 0.3545, 0.4818, 0.4091, 0.3364, 0.4636, 0.3909, 0.3182,
                      0.4455, 0.3727, 0.3,    0.4273, 0.3545, 0.4818, 0.4091, 0.3364, 0.4636, 0.3909,
                      0.3182, 0.4455, 0.3727, 0.3,    0.4273, 0.3545, 0.4818};

double objective(double *x) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int lo = rank * NG / size, hi = (rank + 1) * NG / size, m = hi - lo, ld = m + 2;
  double *u = calloc((size_t)(NY * ld), sizeof(double)), *v = calloc((size_t)(NY * ld), sizeof(double));
  for (int i = 0; i < NY; i++)
    for (int j = 0; j < m; j++) u[i * ld + j + 1] = x[i * NG + lo + j];
  double kappa = 0.15 + 0.1 * x[NX - 1];
  MPI_Datatype col;
  MPI_Type_vector(NY, 1, ld, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  for (int t = 0; t < 6; t++) {
    MPI_Sendrecv(&u[1], 1, col, left, 0, &u[ld - 1], 1, col, right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[m], 1, col, right, 1, &u[0], 1, col, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < NY; i++)
      for (int j = 1; j <= m; j++) {
        double c = u[i * ld + j], up = i > 0 ? u[(i - 1) * ld + j] : 0.0, dn = i < NY - 1 ? u[(i + 1) * ld + j] : 0.0;
        v[i * ld + j] = c + kappa * (up + dn + u[i * ld + j - 1] + u[i * ld + j + 1] - 4.0 * c) - 0.03 * c * c;
      }
    for (int i = 0; i < NY; i++)
      for (int j = 1; j <= m; j++) u[i * ld + j] = v[i * ld + j];
  }
  MPI_Type_free(&col);
  double local = 0.0, J = 0.0;
  for (int i = 0; i < NY; i++)
    for (int j = 1; j <= m; j++) local += u[i * ld + j] * u[i * ld + j] * (1 + i + lo + j);
  MPI_Allreduce(&local, &J, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(u);
  free(v);
  return J;
}

#define PROGRAM "mpi_columns"
#include "mpi_main.c"
