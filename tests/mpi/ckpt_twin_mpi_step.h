/* SPDX-License-Identifier: BSD-3-Clause */
/* The step of test_mpi_checkpoint_twin.c (ckpt_twin_mpi_step.c), compiled
 * twice; its ud has the same layout in both builds. Its model, a line split
 * over the ranks, is test_mpi_checkpoint.c's too. */
#ifndef CKPT_TWIN_MPI_STEP_H
#define CKPT_TWIN_MPI_STEP_H

#include <ariadne_checkpoint.h>
#include <ariadne_mpi.h>

#include "../ckpt_case.h"

#define MT_NL 5 /* values per rank */

/* One step of a nonlinear reaction-diffusion equation on the global line,
 * nl <= 16 values per rank: the ghost values come from the neighbours
 * (fixed boundary values at the ends, which MPI_PROC_NULL leaves untouched;
 * messages tagged tag and tag + 1), and every value is damped by the global
 * mean square, an allreduce. The clock *time enters the step and advances
 * by 0.1, so that the step depends on its number through the passive state.
 * Returns 0, or -1 when an MPI call failed. */
static inline int mt_line_step(ad_real *u, int nl, int rank, int size, double *time, int tag) {
  int lo = rank > 0 ? rank - 1 : MPI_PROC_NULL, hi = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
  ad_real left = ad_const(0.3), right = ad_const(-0.2), local = ad_const(0.0), norm2;
  int rc = ad_mpi_sendrecv(&u[nl - 1], 1, AD_MPI_REAL, hi, tag, &left, 1, AD_MPI_REAL, lo, tag, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS)
    rc = ad_mpi_sendrecv(&u[0], 1, AD_MPI_REAL, lo, tag + 1, &right, 1, AD_MPI_REAL, hi, tag + 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
  for (int k = 0; k < nl; k++) local = ad_add(local, ad_mul(u[k], u[k]));
  if (rc == MPI_SUCCESS) rc = ad_mpi_allreduce(&local, &norm2, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return -1;
  ad_real damp = ad_mul(0.02 / (nl * size), norm2), v[16];
  for (int k = 0; k < nl; k++) {
    ad_real l = k > 0 ? u[k - 1] : left, r = k + 1 < nl ? u[k + 1] : right;
    ad_real lap = ad_sub(ad_add(l, r), ad_mul(2.0, u[k]));
    v[k] = ad_add(u[k], ad_mul(0.2, lap));
    v[k] = ad_add(v[k], ad_mul(0.05 * (1.0 + 0.1 * *time), ad_sin(u[k])));
    v[k] = ad_sub(v[k], ad_mul(damp, u[k]));
  }
  for (int k = 0; k < nl; k++) u[k] = v[k];
  *time += 0.1;
  return 0;
}

typedef struct mpi_twin_params {
  int rank, size;
  int64_t last; /* the step that returns AD_CKPT_LAST (online); -1: none */
  int64_t active_calls, passive_calls;
} mpi_twin_params;

int mpi_twin_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p);
AD_CKPT_TWIN_DECL(mpi_twin_step);

#endif
