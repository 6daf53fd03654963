/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI wrappers from C++ with ariadne.hpp's operators, unchanged: a ring
 * exchange and an allreduce of y_r = x_r x_{r-1} + sin(x_r), J = sum of y.
 * dJ/dx_r = x_{r-1} + x_{r+1} + cos(x_r) in closed form (one rank: 2 x +
 * cos x). Prints " No Errors" or " Found N errors", as mtest.h does.
 */
#include <ariadne.hpp>
#include <ariadne_mpi.h>

#include <cmath>
#include <cstdio>

static int errors, rank, size;

#define CHECK(cond)                                                                                                    \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      errors++;                                                                                                        \
      std::fprintf(stderr, "[%d] %s:%d: check failed: %s\n", rank, __FILE__, __LINE__, #cond);                        \
    }                                                                                                                  \
  } while (0)

static double start(int r) { return 0.3 + 0.2 * r; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(start(rank)), left, J;
  CHECK(ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, next, 0, &left, 1, AD_MPI_REAL, prev, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE) == MPI_SUCCESS);
  ad_real y = x * left + sin(x);
  CHECK(ad_mpi_allreduce(&y, &J, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
  ad_tape_end(t);
  /* J is replicated: seed one copy */
  double g = 0.0;
  int rc = ad_gradient(t, rank == 0 ? J : ad_real(ad_value(J)), 1, &x, &g);
  if (rc != AD_OK) std::fprintf(stderr, "[%d] %s\n", rank, ad_tape_error_message(t));
  CHECK(rc == AD_OK);
  double want = start(prev) + start(next) + std::cos(start(rank));
  CHECK(std::fabs(g - want) <= 1e-14 * (1.0 + std::fabs(want)));
  ad_tape_destroy(t);
  int all = 0;
  MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf(all ? " Found %d errors\n" : " No Errors\n", all);
  MPI_Finalize();
  return all != 0;
}
