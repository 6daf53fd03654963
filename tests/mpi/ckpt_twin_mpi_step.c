/* SPDX-License-Identifier: BSD-3-Clause */
/* The step of test_mpi_checkpoint_twin.c with a halo exchange and a global
 * reduction, compiled active (mpi_twin_step, ad_mpi_* wrappers) and passive
 * (mpi_twin_step_passive, where every ad_mpi_* is its plain MPI twin). */
#include "ckpt_twin_mpi_step.h"

int AD_CKPT_TWIN(mpi_twin_step)(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  mpi_twin_params *q = ud;
  double *time = p;
  (void)pb;
  CKPT_TWIN_COUNT(q);
  (void)n; /* MT_NL values */
  if (mt_line_step(u, MT_NL, q->rank, q->size, time, 21) != 0) return -1;
  return i == q->last ? AD_CKPT_LAST : 0;
}
