/* SPDX-License-Identifier: BSD-3-Clause */
/* The finite check on received values: rank 0 (check off) sends a NaN to
 * its right neighbour, whose tape (check on) stops at the receive with
 * AD_ERR_NONFINITE naming the communication record; every other rank
 * receives a finite value and records on. */
#include "mtest.h"

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  ad_tape *t = ad_tape_create();
  ad_tape_set_check_finite(t, mt_rank != 0);
  ad_tape_begin(t);
  ad_real x = ad_input(mt_rank == 0 ? NAN : 1.0 + mt_rank), y = ad_const(0.0);
  int rc =
      ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, right, 7, &y, 1, AD_MPI_REAL, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_tape_end(t);
  int gets_nan = left == 0 && mt_rank != 0;
  MT_CHECK(left == 0 ? isnan(ad_value(y)) : ad_value(y) == 1.0 + left);
  MT_CHECK(ad_tape_error(t) == (gets_nan ? AD_ERR_NONFINITE : AD_OK));
  if (gets_nan) {
    MT_CHECK(rc != MPI_SUCCESS || ad_tape_error(t) == AD_ERR_NONFINITE);
    const char *m = ad_tape_error_message(t);
    MT_CHECK(strstr(m, "MPI communication: a value entering the tape is nan") != NULL);
    if (!strstr(m, "MPI communication")) fprintf(stderr, "[%d] message: %s\n", mt_rank, m);
  } else {
    MT_CHECK(rc == MPI_SUCCESS);
  }
  ad_tape_destroy(t);
  return mt_finalize();
}
