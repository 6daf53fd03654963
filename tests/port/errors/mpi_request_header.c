/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: 'req' is declared as MPI_Request in */
#include "requests.h"
void post(exchange *e, double *u) {
  MPI_Isend(u, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, &e->req[0]);
  MPI_Wait(&e->req[0], MPI_STATUS_IGNORE);
}
