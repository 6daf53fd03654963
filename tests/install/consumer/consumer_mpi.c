/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI consumer of an installed Ariadne: on a ring of ranks, rank r holds x_r
 * and the objective is
 *     f = sum_r sin(x_r) x_{r-1},
 * with x_{r-1} received from the previous rank and f reduced onto rank 0.
 * Its gradient, df/dx_r = cos(x_r) x_{r-1} + sin(x_{r+1}), is checked on every
 * rank. Exits non-zero on any mismatch (every rank knows the error count). */
#include <ariadne_mpi.h>
#include <math.h>
#include <stdio.h>

static double value_of(int rank) { return 0.3 + 0.7 * rank; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, errors = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;

  ad_tape *tape = ad_tape_create();
  ad_tape_begin(tape);
  ad_real x = ad_input(value_of(rank)), left = ad_const(0.0), f = ad_const(0.0);
  ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next, 0, &left, 1, AD_MPI_REAL, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_real term = ad_mul(ad_sin(x), left);
  ad_mpi_reduce(&term, &f, 1, AD_MPI_REAL, MPI_SUM, 0, MPI_COMM_WORLD);
  ad_tape_end(tape);

  double want_f = 0.0;
  for (int r = 0; r < size; r++) want_f += sin(value_of(r)) * value_of((r + size - 1) % size);
  if (rank == 0 && fabs(ad_value(f) - want_f) > 1e-14 * (1.0 + fabs(want_f))) {
    fprintf(stderr, "[%d] consumer_mpi: f = %.17g, expected %.17g\n", rank, ad_value(f), want_f);
    errors++;
  }
#ifndef ARIADNE_PASSIVE
  /* f lives on rank 0; every rank sweeps, since the sweep is collective. */
  double g = 0.0, want_g = cos(value_of(rank)) * value_of(prev) + sin(value_of(next));
  int rc = ad_gradient(tape, f, 1, &x, &g);
  if (rc != AD_OK) {
    fprintf(stderr, "[%d] consumer_mpi: ad_gradient: %s\n", rank, ad_tape_error_message(tape));
    errors++;
  } else if (fabs(g - want_g) > 1e-14 * (1.0 + fabs(want_g))) {
    fprintf(stderr, "[%d] consumer_mpi: df/dx = %.17g, expected %.17g\n", rank, g, want_g);
    errors++;
  }
#endif
  ad_tape_destroy(tape);
  int total = 0;
  MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
#ifdef ARIADNE_PASSIVE
  const char *build = "passive";
#else
  const char *build = "active";
#endif
  if (rank == 0) printf("consumer_mpi (%s) on %d ranks: %s\n", build, size, total ? "FAILED" : "OK");
  MPI_Finalize();
  return total != 0;
}
