/* SPDX-License-Identifier: BSD-3-Clause */
/* expect: derived datatypes */
#include <mpi.h>
/* A struct type may mix active and passive doubles, which the tool cannot
 * tell apart: the type is left to be written by hand. */
struct particle {
  double x, v;
  int id;
};
void f(struct particle *p, MPI_Comm comm) {
  int len[2] = {2, 1};
  MPI_Aint dsp[2] = {0, 2 * (MPI_Aint)sizeof(double)};
  MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, pt;
  MPI_Type_create_struct(2, len, dsp, types, &pt);
  MPI_Type_commit(&pt);
  MPI_Send(p, 1, pt, 1, 0, comm);
}
