/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_real data given to the wrappers under a passive datatype (MPI_DOUBLE,
 * MPI_BYTE) is refused with MPI_ERR_TYPE and a tape error that names the
 * call and AD_MPI_REAL, on every rank that gives it; passive double buffers
 * under MPI_DOUBLE still move, recorded or not. */
#include <string.h>

#include "mtest.h"

#define N 8

/* The call was refused with MPI_ERR_TYPE and a tape error naming it. */
static void refused(ad_tape *t, int rc, const char *fn) {
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  MT_CHECK(cls == MPI_ERR_TYPE);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  const char *m = ad_tape_error_message(t);
  MT_CHECK(m && strstr(m, fn) && strstr(m, "AD_MPI_REAL"));
  if (cls != MPI_ERR_TYPE) fprintf(stderr, "[%d] %s on ad_real data under MPI_DOUBLE was not refused\n", mt_rank, fn);
  MT_CHECK(ad_reverse(t) == AD_ERR_MPI); /* the sweep reports it too */
}

/* Active values from the third element on: the first two are constants
 * (a boundary, say), which only check mode looks past. */
static void fill(ad_real *x) {
  for (int i = 0; i < N; i++) x[i] = i < 2 ? ad_const(1.0 + i) : ad_input(0.5 * i + mt_rank);
}

static void reductions(ad_tape *t, MPI_Comm comm) {
  ad_real x[N], y[N];
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_allreduce(x, y, N, MPI_DOUBLE, MPI_SUM, comm), "ad_mpi_allreduce");
  ad_tape_end(t);

  /* The dt of a time step, reduced in place: the call that ported codes leave
   * on MPI_DOUBLE most often. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_allreduce(MPI_IN_PLACE, x, N, MPI_DOUBLE, MPI_MIN, comm), "ad_mpi_allreduce");
  ad_tape_end(t);

  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_reduce(x, y, N, MPI_DOUBLE, MPI_SUM, 0, comm), "ad_mpi_reduce");
  ad_tape_end(t);

  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_scan(x, y, N, MPI_DOUBLE, MPI_SUM, comm), "ad_mpi_scan");
  ad_tape_end(t);

  /* Bytes of ad_real elements are refused as well. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_allreduce(x, y, (int)sizeof x, MPI_BYTE, MPI_BOR, comm), "ad_mpi_allreduce");
  ad_tape_end(t);
}

/* Sends to the right, receives from the left: a rank receives only if its
 * left neighbour's send went out, which is the same on every rank. */
static void sends(ad_tape *t, MPI_Comm comm) {
  int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  ad_real x[N];
  double got[2 * N];
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  ad_mpi_request q;
  int rc = ad_mpi_isend(x, N, MPI_DOUBLE, right, 7, comm, &q);
  if (rc == MPI_SUCCESS) {
    MPI_Recv(got, 2 * N, MPI_DOUBLE, left, 7, comm, MPI_STATUS_IGNORE);
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  }
  refused(t, rc, "ad_mpi_isend");
  ad_tape_end(t);

  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  rc = ad_mpi_sendrecv(x, N, MPI_DOUBLE, right, 8, got, 2 * N, MPI_DOUBLE, left, 8, comm, MPI_STATUS_IGNORE);
  refused(t, rc, "ad_mpi_sendrecv");
  ad_tape_end(t);

  /* Blocking send to itself would need buffering: rank 0 sends to the last
   * rank, which receives only if rank 0 says it sent. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  int last = mt_size - 1, sent = 0;
  if (mt_rank == 0 && last > 0) {
    rc = ad_mpi_send(x, N, MPI_DOUBLE, last, 9, comm);
    sent = rc == MPI_SUCCESS;
    refused(t, rc, "ad_mpi_send");
  }
  MPI_Bcast(&sent, 1, MPI_INT, 0, comm);
  if (sent && mt_rank == last) MPI_Recv(got, 2 * N, MPI_DOUBLE, 0, 9, comm, MPI_STATUS_IGNORE);
  ad_tape_end(t);
}

/* Outside check mode the wrappers look at the first elements only: a live
 * handle further on goes through (documented), and is caught in check mode.
 * 128 doubles are the bytes of 64 ad_real. */
static void default_mode(ad_tape *t, MPI_Comm comm) {
  ad_real x[64], y[64];
  int old = ad_mpi_set_check(0);
  MT_CHECK(ad_mpi_check_enabled() == 0);
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < 64; i++) x[i] = i < 40 ? ad_const(1.0) : ad_input(1.0);
  MT_CHECK(ad_mpi_allreduce(x, y, 128, MPI_DOUBLE, MPI_MAX, comm) == MPI_SUCCESS);
  ad_tape_end(t);
  /* An active value at the front is seen in either mode. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < 64; i++) x[i] = ad_input(1.0);
  refused(t, ad_mpi_allreduce(x, y, 128, MPI_DOUBLE, MPI_MAX, comm), "ad_mpi_allreduce");
  ad_tape_end(t);
  MT_CHECK(ad_mpi_set_check(1) == 0);
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < 64; i++) x[i] = i < 40 ? ad_const(1.0) : ad_input(1.0);
  refused(t, ad_mpi_allreduce(x, y, 128, MPI_DOUBLE, MPI_MAX, comm), "ad_mpi_allreduce");
  ad_tape_end(t);
  ad_mpi_set_check(old);
}

/* Passive doubles under MPI_DOUBLE, while a tape records: the data moves as
 * MPI moves it and the tape stays clean, whatever the values (subnormals and
 * numbers whose bits look like small integers included). */
static void passive(ad_tape *t, MPI_Comm comm) {
  double v[N], s[N], w[N];
  uint64_t bits = ((uint64_t)1 << 32) | 3u; /* a subnormal */
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real a = ad_input(2.0);
  for (int i = 0; i < N; i++) v[i] = i % 2 ? 0.25 * i + mt_rank : 0.0;
  memcpy(&v[N - 1], &bits, sizeof bits);
  memcpy(w, v, sizeof v);
  MT_CHECK(ad_mpi_allreduce(v, s, N, MPI_DOUBLE, MPI_MAX, comm) == MPI_SUCCESS);
  for (int i = 0; i < N - 1; i++) MT_CHECK(s[i] == (i % 2 ? 0.25 * i + mt_size - 1 : 0.0));
  MT_CHECK(ad_mpi_allreduce(MPI_IN_PLACE, w, N, MPI_DOUBLE, MPI_SUM, comm) == MPI_SUCCESS);
  int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  double got[N];
  MT_CHECK(ad_mpi_sendrecv(v, N, MPI_DOUBLE, right, 5, got, N, MPI_DOUBLE, left, 5, comm, MPI_STATUS_IGNORE) ==
           MPI_SUCCESS);
  for (int i = 0; i < N - 1; i++) MT_CHECK(got[i] == (i % 2 ? 0.25 * i + left : 0.0));
  ad_real y = ad_mul(a, ad_const(s[1]));
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  ad_seed(t, y, 1.0);
  MT_CHECK(ad_reverse(t) == AD_OK);
  MT_CLOSE(ad_adjoint(t, a), 0.25 + mt_size - 1, 0);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  ad_mpi_set_check(1);
  ad_tape *t = ad_tape_create();
  reductions(t, comm);
  sends(t, comm);
  default_mode(t, comm);
  passive(t, comm);
  ad_tape_destroy(t);
  return mt_finalize();
}
