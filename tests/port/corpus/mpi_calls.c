/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI: calls in every syntactic position (a declaration's initializer, a
 * condition, a return, an argument of another call, a macro body), a
 * datatype named through a macro, requests malloc'd by sizeof(MPI_Request)
 * and kept in a struct, and a timer macro. A 1-D reaction-diffusion chain
 * split in blocks; the objective is summed over the ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NG 18
#define NX (NG + 2)
#define REAL_MPI_TYPE MPI_DOUBLE
#define SEND_GHOST(b, to, tag) MPI_Send(b, 1, REAL_MPI_TYPE, to, tag, MPI_COMM_WORLD)
#define RECV_GHOST(b, from, tag) MPI_Recv(b, 1, MPI_DOUBLE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
#define TIMER_START(t) ((t) = MPI_Wtime())
#define TIMER_STOP(t, acc) ((acc) += MPI_Wtime() - (t))
int n_inputs = NX;
double x_start[NX] = {0.2, 0.35, 0.3, 0.5,  0.45, 0.4, 0.6,  0.55, 0.7,  0.65,
                      0.5, 0.4,  0.3, 0.35, 0.5,  0.6, 0.45, 0.3,  0.25, 0.8};

typedef struct exchange {
  int nreq;
  MPI_Request *req;
} exchange;

static int checked(int rc) { return rc == MPI_SUCCESS ? 0 : 1; }

/* Broadcast from rank 0 in a return statement. */
static int share(double *v, int n) { return MPI_Bcast(v, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); }

double objective(double *x) {
  int rank, size, errs = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double t0 = 0.0, elapsed = 0.0;
  TIMER_START(t0);
  int lo = rank * NG / size, hi = (rank + 1) * NG / size, m = hi - lo;
  double *u = malloc((size_t)(m + 2) * sizeof(double)), *v = malloc((size_t)(m + 2) * sizeof(double));
  for (int i = 0; i < m; i++) u[i + 1] = x[lo + i];
  u[0] = u[m + 1] = 0.0;
  double par[2] = {x[NG], x[NG + 1]};
  errs += share(par, 2);
  exchange ex;
  MPI_Status st[2];
  ex.nreq = 2;
  ex.req = malloc((size_t)ex.nreq * sizeof(MPI_Request));
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL, right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  for (int t = 0; t < 6; t++) {
    /* Right-going ghosts with blocking calls in conditions and macros,
     * left-going ones nonblocking. */
    if (rank % 2 == 0) {
      if (SEND_GHOST(&u[m], right, 1) != MPI_SUCCESS) errs++;
      if (MPI_Recv(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) errs++;
    } else {
      RECV_GHOST(&u[0], left, 1);
      errs += checked(SEND_GHOST(&u[m], right, 1));
    }
    int ierr = MPI_Irecv(&u[m + 1], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &ex.req[0]);
    errs += ierr != MPI_SUCCESS;
    ierr = MPI_Isend(&u[1], 1, REAL_MPI_TYPE, left, 2, MPI_COMM_WORLD, &ex.req[1]);
    errs += checked(ierr) + checked(MPI_Waitall(ex.nreq, ex.req, st));
    for (int i = 1; i <= m; i++)
      v[i] = u[i] + par[0] * (u[i - 1] - 2.0 * u[i] + u[i + 1]) + par[1] * u[i] * (1.0 - u[i]);
    for (int i = 1; i <= m; i++) u[i] = v[i];
  }
  double loc[2] = {0.0, 0.0}, glob[2];
  for (int i = 1; i <= m; i++) {
    loc[0] += u[i] * u[i];
    loc[1] += (lo + i) * u[i];
  }
  int rc = MPI_Allreduce(loc, glob, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  errs += rc != MPI_SUCCESS;
  TIMER_STOP(t0, elapsed);
  free(ex.req);
  free(u);
  free(v);
  if (errs) fprintf(stderr, "mpi_calls: %d MPI errors\n", errs);
  return glob[0] * glob[1];
}

#define PROGRAM "mpi_calls"
#include "mpi_main.c"
