/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_mpi_check_gradient: the gradient checker over the ranks of a
 * communicator. Inputs are numbered globally in rank order, outputs are sums
 * over the ranks, and only rank 0 prints. */
#include "mpi_impl.h"
#include "check_hooks.h"

static void sum_comm(void *ctx, double *v, size_t k) {
  MPI_Allreduce(MPI_IN_PLACE, v, (int)k, MPI_DOUBLE, MPI_SUM, *(MPI_Comm *)ctx);
}
static void max_comm(void *ctx, double *v, size_t k) {
  MPI_Allreduce(MPI_IN_PLACE, v, (int)k, MPI_DOUBLE, MPI_MAX, *(MPI_Comm *)ctx);
}

int ad_mpi_check_gradient(MPI_Comm comm, ad_check_fn f, void *ud, size_t n, const double *x0, size_t m,
                          const ad_check_options *opts, ad_check_result *res) {
  ad__check_env env = {0, 1, 0, 0, &comm, sum_comm, max_comm};
  unsigned long long mine = n, first = 0, total = 0;
  int rc = MPI_Comm_rank(comm, &env.rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm, &env.size);
  if (rc == MPI_SUCCESS) rc = MPI_Exscan(&mine, &first, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
  if (rc != MPI_SUCCESS) return AD_ERR_MPI;
  env.first = env.rank == 0 ? 0 : first; /* MPI_Exscan leaves rank 0's undefined */
  env.ntotal = total;
  return ad__check_run(&env, f, ud, n, x0, m, opts, res);
}
