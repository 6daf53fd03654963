/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: MPI_Send on active data with the datatype 'MPI_FLOAT' */
#include <mpi.h>
/* An MPI call in a macro body is checked like one written out. */
#define SEND(b, n) MPI_Send(b, n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD)
void f(double *u) { SEND(u, 4); }
