/* SPDX-License-Identifier: BSD-3-Clause */
/* Private: the gradient checker's hooks. The checker (adjoint/check.c) is
 * written once for a set of ranks and reaches the other ranks only through
 * the environment below; ad_check_gradient fills it for one process, the MPI
 * layer (mpi/check.c) for the ranks of a communicator. Declared here, below
 * both, so that the MPI layer depends on lib/ only, as for the loop hooks
 * (ad__loop_comm_ops). Not installed. */
#ifndef ARIADNE_CHECK_HOOKS_H
#define ARIADNE_CHECK_HOOKS_H

#include <ariadne_tools.h>

/* Where the checker runs: one process, or one rank of a communicator. The
 * reductions are collective and combine v[0..k) in place over all ranks. */
typedef struct ad__check_env {
  int rank, size;
  uint64_t first;  /* global index of this rank's first input */
  uint64_t ntotal; /* inputs on all ranks */
  void *ctx;
  void (*sum)(void *ctx, double *v, size_t k);
  void (*max)(void *ctx, double *v, size_t k);
} ad__check_env;

int ad__check_run(const ad__check_env *env, ad_check_fn f, void *ud, size_t n, const double *x0, size_t m,
                  const ad_check_options *opts, ad_check_result *res);

#endif
