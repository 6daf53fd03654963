/* SPDX-License-Identifier: BSD-3-Clause */
/* Private: the gradient checker's core, shared by ad_check_gradient and the
 * MPI layer's ad_mpi_check_gradient. Not installed. */
#ifndef ARIADNE_CHECK_IMPL_H
#define ARIADNE_CHECK_IMPL_H

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
