/* SPDX-License-Identifier: BSD-3-Clause */
/* The step of test_mpi_checkpoint_twin.c with a halo exchange and a global
 * reduction, compiled active (mpi_twin_step, ad_mpi_* wrappers) and passive
 * (mpi_twin_step_passive, where every ad_mpi_* is its plain MPI twin). */
#include "ckpt_twin_mpi_step.h"

int AD_CKPT_TWIN(mpi_twin_step)(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  mpi_twin_params *q = ud;
  double *time = p;
  (void)pb;
#ifdef ARIADNE_PASSIVE
  q->passive_calls++;
#else
  q->active_calls++;
#endif
  int lo = q->rank > 0 ? q->rank - 1 : MPI_PROC_NULL, hi = q->rank + 1 < q->size ? q->rank + 1 : MPI_PROC_NULL;
  ad_real left = ad_const(0.3), right = ad_const(-0.2), local = ad_const(0.0), norm2;
  int rc = ad_mpi_sendrecv(&u[MT_NL - 1], 1, AD_MPI_REAL, hi, 21, &left, 1, AD_MPI_REAL, lo, 21, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS)
    rc = ad_mpi_sendrecv(&u[0], 1, AD_MPI_REAL, lo, 22, &right, 1, AD_MPI_REAL, hi, 22, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
  for (size_t k = 0; k < *n; k++) local = ad_add(local, ad_mul(u[k], u[k]));
  if (rc == MPI_SUCCESS) rc = ad_mpi_allreduce(&local, &norm2, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return -1;
  ad_real damp = ad_mul(0.02 / (MT_NL * q->size), norm2), v[MT_NL];
  for (size_t k = 0; k < MT_NL; k++) {
    ad_real l = k > 0 ? u[k - 1] : left, r = k + 1 < MT_NL ? u[k + 1] : right;
    ad_real lap = ad_sub(ad_add(l, r), ad_mul(2.0, u[k]));
    v[k] = ad_add(u[k], ad_mul(0.2, lap));
    v[k] = ad_add(v[k], ad_mul(0.05 * (1.0 + 0.1 * *time), ad_sin(u[k])));
    v[k] = ad_sub(v[k], ad_mul(damp, u[k]));
  }
  for (size_t k = 0; k < MT_NL; k++) u[k] = v[k];
  *time += 0.1;
  return i == q->last ? AD_CKPT_LAST : 0;
}
