/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: derived datatypes */
#include <mpi.h>
/* Packing active values has no twin (a type built on MPI_DOUBLE is ported
 * to AD_MPI_REAL; packed bytes are not). */
void f(double *x, MPI_Comm comm) {
  char buf[64];
  int pos = 0;
  MPI_Pack(x, 3, MPI_DOUBLE, buf, (int)sizeof buf, &pos, comm);
  MPI_Send(buf, pos, MPI_PACKED, 1, 0, comm);
}
