/* SPDX-License-Identifier: BSD-3-Clause */
/* The code both guard checks compile, in C (guard_c.c) and in C++
 * (guard_cxx.cpp), after their own headers: plain MPI calls on doubles,
 * MPI_IN_PLACE and void * that must compile, and with AD_BAD_CALL an
 * MPI_Allreduce on ad_real values (a time step left unported) that must
 * not. */
int guard_sample(MPI_Comm comm, ad_real dt, double *v, void *any, int n);

int guard_sample(MPI_Comm comm, ad_real dt, double *v, void *any, int n) {
  ad_real dtmin = dt;
  double w[4] = {0, 0, 0, 0};
  int rc = MPI_Allreduce(v, w, n, MPI_DOUBLE, MPI_SUM, comm);
  rc |= MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, comm);
  rc |= MPI_Send(any, n, MPI_BYTE, 0, 1, comm);
  rc |= MPI_Gather(v, 1, MPI_DOUBLE, w, 1, MPI_DOUBLE, 0, comm);
  rc |= MPI_Sendrecv(v, 1, MPI_DOUBLE, 0, 2, w, 1, MPI_DOUBLE, 0, 2, comm, MPI_STATUS_IGNORE);
  rc |= ad_mpi_allreduce(&dt, &dtmin, 1, AD_MPI_REAL, MPI_MIN, comm);
#ifdef AD_BAD_CALL
  rc |= MPI_Allreduce(&dt, &dtmin, 1, MPI_DOUBLE, MPI_MIN, comm);
#endif
  return rc;
}
