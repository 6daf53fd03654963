/* SPDX-License-Identifier: BSD-3-Clause */
/* The step of test_mpi_checkpoint_twin.c (ckpt_twin_mpi_step.c), compiled
 * twice; its ud has the same layout in both builds. */
#ifndef CKPT_TWIN_MPI_STEP_H
#define CKPT_TWIN_MPI_STEP_H

#include <ariadne_checkpoint.h>
#include <ariadne_mpi.h>

#define MT_NL 5 /* values per rank */

typedef struct mpi_twin_params {
  int rank, size;
  int64_t last; /* the step that returns AD_CKPT_LAST (online); -1: none */
  int64_t active_calls, passive_calls;
} mpi_twin_params;

int mpi_twin_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p);
AD_CKPT_TWIN_DECL(mpi_twin_step);

#endif
