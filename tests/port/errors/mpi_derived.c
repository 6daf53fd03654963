/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: derived datatypes */
#include <mpi.h>
void f(double *x, MPI_Comm comm) {
  MPI_Datatype three;
  MPI_Type_contiguous(3, MPI_DOUBLE, &three);
  MPI_Type_commit(&three);
  MPI_Send(x, 1, three, 1, 0, comm);
}
