/* SPDX-License-Identifier: BSD-3-Clause */
/* The entry point of the MPI corpus programs, which include it after their
 * objective (a unity include: it is ported with each includer). Every rank
 * evaluates the objective at x_start; rank 0 prints it under the program's
 * name, PROGRAM. */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  double J = objective(x);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("%s: J = %.17g\n", PROGRAM, J);
  MPI_Finalize();
  return 0;
}
