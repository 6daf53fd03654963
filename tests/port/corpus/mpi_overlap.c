/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI beyond the textbook: a 1-D diffusion whose halo exchange is set up
 * once with persistent requests and run every step with Startall/Waitall,
 * a residual norm reduced with Iallreduce while the interior updates, a
 * message of unknown length taken with Probe and Get_count, and a block
 * of results gathered with a matched probe (Mprobe/Mrecv). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NG 18
#define NX (NG + 1)
int n_inputs = NX;
double x_start[NX] = {0.2, 0.35, 0.3, 0.5,  0.45, 0.4,  0.6, 0.55, 0.7, 0.65,
                      0.5, 0.35, 0.3, 0.25, 0.4,  0.55, 0.5, 0.6,  0.1};

double objective(double *x) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int lo = rank * NG / size, hi = (rank + 1) * NG / size, m = hi - lo;
  double *u = malloc((size_t)(m + 2) * sizeof(double)), *v = malloc((size_t)(m + 2) * sizeof(double));
  for (int i = 0; i < m; i++) u[i + 1] = x[lo + i];
  u[0] = u[m + 1] = 0.0;
  double kappa = 0.2 + 0.1 * x[NG];
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  MPI_Request halo[4];
  MPI_Recv_init(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &halo[0]);
  MPI_Recv_init(&u[m + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &halo[1]);
  MPI_Send_init(&u[1], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &halo[2]);
  MPI_Send_init(&u[m], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &halo[3]);
  double res = 0.0, norm = 0.0;
  MPI_Status st4[4];
  for (int t = 0; t < 8; t++) {
    MPI_Startall(4, halo);
    MPI_Waitall(4, halo, st4);
    for (int i = 1; i <= m; i++) v[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1]) - 0.05 * u[i] * u[i] * norm;
    res = 0.0;
    for (int i = 1; i <= m; i++) res += (v[i] - u[i]) * (v[i] - u[i]);
    MPI_Request q;
    MPI_Iallreduce(&res, &norm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
    for (int i = 1; i <= m; i++) u[i] = v[i];
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  }
  for (int k = 0; k < 4; k++) MPI_Request_free(&halo[k]);
  /* Each rank sends its first rank+1 cells to rank 0, which does not know
   * how many: Probe and Get_count, or Mprobe and Mrecv. */
  double J = 0.0;
  if (rank == 0) {
    for (int i = 1; i <= m; i++) J += u[i] * u[i];
    for (int r = 1; r < size; r++) {
      MPI_Status st;
      int n;
      double *buf = malloc((size_t)(r + 2) * sizeof(double));
      if (r % 2) {
        MPI_Probe(r, 5, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        MPI_Recv(buf, n, MPI_DOUBLE, r, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Message msg;
        MPI_Mprobe(r, 5, MPI_COMM_WORLD, &msg, &st);
        MPI_Get_count(&st, MPI_DOUBLE, &n);
        MPI_Mrecv(buf, n, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
      }
      for (int i = 0; i < n; i++) J += buf[i] * buf[i] * (1.0 + r);
      free(buf);
    }
  } else {
    int n = rank + 1 < m ? rank + 1 : m;
    MPI_Send(&u[1], n, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD);
    for (int i = n + 1; i <= m; i++) J += u[i] * u[i];
  }
  double total = 0.0;
  MPI_Allreduce(&J, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  free(u);
  free(v);
  return total;
}

#define PROGRAM "mpi_overlap"
#include "mpi_main.c"
