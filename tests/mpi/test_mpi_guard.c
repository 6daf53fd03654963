/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_real data given to the wrappers under a passive datatype (MPI_DOUBLE,
 * MPI_BYTE) is refused with MPI_ERR_TYPE and a tape error that names the
 * call and AD_MPI_REAL, on every rank that gives it; passive double buffers
 * under MPI_DOUBLE still move, recorded or not. */
#include <math.h>
#include <string.h>

#include "mtest.h"

#define N 12 /* with 64-bit handles an ad_real is three doubles: MPI reads the first four of N under MPI_DOUBLE */

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

/* ------------------------------------------------------------------------ */
/* Collectives that move blocks, and one-sided origin buffers               */
/* ------------------------------------------------------------------------ */

/* Each call moves B doubles per rank: the bytes of N ad_real. Block j of a
 * send buffer is meant for rank j (or neighbour j); passive data holds
 * 1000 * rank + 100 * j + k at element k of block j. */
#define B (2 * N)
#define PMAX 4
#define ROOT (mt_size - 1)

typedef int (*call_fn)(void *s, double *r, MPI_Comm comm);

static int counts[PMAX], displs[PMAX], bdispls[PMAX];
static MPI_Datatype types[PMAX];
static MPI_Comm ring; /* a periodic line: neighbour 0 on the left, 1 on the right */

static int c_bcast(void *s, double *r, MPI_Comm comm) {
  memcpy(r, s, B * sizeof(double));
  return ad_mpi_bcast(r, B, MPI_DOUBLE, ROOT, comm);
}
static int c_ibcast(void *s, double *r, MPI_Comm comm) {
  ad_mpi_request q;
  memcpy(r, s, B * sizeof(double));
  int rc = ad_mpi_ibcast(r, B, MPI_DOUBLE, ROOT, comm, &q);
  return rc == MPI_SUCCESS ? ad_mpi_wait(&q, MPI_STATUS_IGNORE) : rc;
}
#if MPI_VERSION >= 4
static int c_bcast_init(void *s, double *r, MPI_Comm comm) {
  ad_mpi_request q;
  memcpy(r, s, B * sizeof(double));
  int rc = ad_mpi_bcast_init(r, B, MPI_DOUBLE, ROOT, comm, MPI_INFO_NULL, &q);
  if (rc != MPI_SUCCESS) return rc;
  rc = ad_mpi_start(&q);
  if (rc == MPI_SUCCESS) rc = ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  ad_mpi_request_free(&q);
  return rc;
}
#endif
static int c_gather(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_gather(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, ROOT, comm);
}
static int c_igatherv(void *s, double *r, MPI_Comm comm) {
  ad_mpi_request q;
  int rc = ad_mpi_igatherv(s, B, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, ROOT, comm, &q);
  return rc == MPI_SUCCESS ? ad_mpi_wait(&q, MPI_STATUS_IGNORE) : rc;
}
static int c_scatter(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_scatter(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, ROOT, comm);
}
static int c_scatterv(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_scatterv(s, counts, displs, MPI_DOUBLE, r, B, MPI_DOUBLE, ROOT, comm);
}
static int c_allgather(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_allgather(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, comm);
}
static int c_allgatherv(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_allgatherv(s, B, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, comm);
}
static int c_alltoall(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_alltoall(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, comm);
}
static int c_ialltoallv(void *s, double *r, MPI_Comm comm) {
  ad_mpi_request q;
  int rc = ad_mpi_ialltoallv(s, counts, displs, MPI_DOUBLE, r, counts, displs, MPI_DOUBLE, comm, &q);
  return rc == MPI_SUCCESS ? ad_mpi_wait(&q, MPI_STATUS_IGNORE) : rc;
}
static int c_alltoallw(void *s, double *r, MPI_Comm comm) {
  return ad_mpi_alltoallw(s, counts, bdispls, types, r, counts, bdispls, types, comm);
}
static int c_neighbor_allgather(void *s, double *r, MPI_Comm comm) {
  (void)comm;
  return ad_mpi_neighbor_allgather(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, ring);
}
static int c_neighbor_alltoall(void *s, double *r, MPI_Comm comm) {
  (void)comm;
  return ad_mpi_neighbor_alltoall(s, B, MPI_DOUBLE, r, B, MPI_DOUBLE, ring);
}

/* What a call leaves in r[i] on this rank with passive data; NAN: nothing. */
static double from(int rank, int j, int k) { return 1000.0 * rank + 100.0 * j + k; }
static double w_bcast(int i) { return i < B ? from(ROOT, 0, i) : NAN; }
static double w_gather(int i) { return mt_rank == ROOT && i < B * mt_size ? from(i / B, 0, i % B) : NAN; }
static double w_scatter(int i) { return i < B ? from(ROOT, mt_rank, i) : NAN; }
static double w_allgather(int i) { return i < B * mt_size ? from(i / B, 0, i % B) : NAN; }
static double w_alltoall(int i) { return i < B * mt_size ? from(i / B, mt_rank, i % B) : NAN; }
static double w_neighbor_allgather(int i) {
  int left = (mt_rank + mt_size - 1) % mt_size, right = (mt_rank + 1) % mt_size;
  return i < 2 * B ? from(i < B ? left : right, 0, i % B) : NAN;
}
static double w_neighbor_alltoall(int i) {
  int left = (mt_rank + mt_size - 1) % mt_size, right = (mt_rank + 1) % mt_size;
  return i < 2 * B ? (i < B ? from(left, 1, i) : from(right, 0, i - B)) : NAN;
}

static const struct {
  const char *fn;
  call_fn call;
  double (*want)(int i);
  int rooted; /* only the root's data is sent */
} calls[] = {
    {"ad_mpi_bcast", c_bcast, w_bcast, 1},
    {"ad_mpi_ibcast", c_ibcast, w_bcast, 1},
#if MPI_VERSION >= 4
    {"ad_mpi_ibcast", c_bcast_init, w_bcast, 1}, /* a persistent broadcast starts one */
#endif
    {"ad_mpi_gather", c_gather, w_gather, 0},
    {"ad_mpi_igatherv", c_igatherv, w_gather, 0},
    {"ad_mpi_scatter", c_scatter, w_scatter, 1},
    {"ad_mpi_scatterv", c_scatterv, w_scatter, 1},
    {"ad_mpi_allgather", c_allgather, w_allgather, 0},
    {"ad_mpi_allgatherv", c_allgatherv, w_allgather, 0},
    {"ad_mpi_alltoall", c_alltoall, w_alltoall, 0},
    {"ad_mpi_ialltoallv", c_ialltoallv, w_alltoall, 0},
    {"ad_mpi_alltoallw", c_alltoallw, w_alltoall, 0},
    {"ad_mpi_neighbor_allgather", c_neighbor_allgather, w_neighbor_allgather, 0},
    {"ad_mpi_neighbor_alltoall", c_neighbor_alltoall, w_neighbor_alltoall, 0},
};
#define NCALLS (int)(sizeof calls / sizeof calls[0])

/* ad_real data under MPI_DOUBLE on one rank only (the root, or the last
 * rank), in the blocks that rank sends: in check mode every rank refuses,
 * so none waits in a collective another rank never entered. */
static void blocks_refused(ad_tape *t, MPI_Comm comm) {
  ad_real x[PMAX * N];
  double r[PMAX * B];
  for (int c = 0; c < NCALLS; c++) {
    ad_tape_reset(t);
    ad_tape_begin(t);
    for (int i = 0; i < PMAX * N; i++) x[i] = ad_input(1.0 + i + mt_rank);
    if (mt_rank != ROOT) /* the others send passive doubles */
      for (int i = 0; i < PMAX * B; i++) ((double *)x)[i] = 0.5 * i;
    refused(t, calls[c].call(x, r, comm), calls[c].fn);
    ad_tape_end(t);
  }
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < PMAX * N; i++) x[i] = ad_input(1.0 + i + mt_rank);
  refused(t, ad_mpi_reduce_scatter(x, r, counts, MPI_DOUBLE, MPI_SUM, comm), "ad_mpi_reduce_scatter");
  ad_tape_end(t);
  /* Outside check mode a rank refuses what it sees by itself: here every
   * rank sends ad_real data, so every rank refuses. */
  int old = ad_mpi_set_check(0);
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < PMAX * N; i++) x[i] = ad_input(1.0 + i + mt_rank);
  refused(t, c_alltoall(x, r, comm), "ad_mpi_alltoall");
  ad_tape_end(t);
  ad_mpi_set_check(old);
}

/* Passive doubles still move as MPI moves them, while a tape records. */
static void blocks_passive(ad_tape *t, MPI_Comm comm) {
  double s[PMAX * B], r[PMAX * B];
  for (int c = 0; c < NCALLS; c++) {
    ad_tape_reset(t);
    ad_tape_begin(t);
    ad_real a = ad_input(1.0);
    for (int i = 0; i < PMAX * B; i++) s[i] = from(mt_rank, i / B, i % B);
    for (int i = 0; i < PMAX * B; i++) r[i] = -1.0;
    int rc = calls[c].call(s, r, comm);
    MT_CHECK(rc == MPI_SUCCESS);
    int bad = 0;
    for (int i = 0; i < PMAX * B; i++) bad += !isnan(calls[c].want(i)) && r[i] != calls[c].want(i);
    MT_CHECK(bad == 0);
    if (rc != MPI_SUCCESS || bad)
      fprintf(stderr, "[%d] %s on passive doubles: rc %d, %d wrong\n", mt_rank, calls[c].fn, rc, bad);
    ad_real y = ad_mul(a, a);
    ad_tape_end(t);
    MT_CHECK(ad_tape_error(t) == AD_OK);
    ad_seed(t, y, 1.0);
    MT_CHECK(ad_reverse(t) == AD_OK);
    MT_CLOSE(ad_adjoint(t, a), 2.0, 0);
  }
}

/* One-sided calls on a plain window of doubles (MPI's own): the origin
 * buffer is what moves. A refusal is this rank's alone, and no other rank
 * waits for it: the fences are entered by every rank. */
static void origin_refused(ad_tape *t, MPI_Comm comm) {
  /* Allocated, not created: Open MPI 4.1 cannot create a window on one
   * rank's own memory (see test_mpi_rma.c). */
  double *mem = NULL;
  MPI_Win win;
  int ok = MPI_Win_allocate(B * sizeof(double), sizeof(double), MPI_INFO_NULL, comm, &mem, &win) == MPI_SUCCESS;
  MT_CHECK(ok);
  if (!ok) return;
  for (int i = 0; i < B; i++) mem[i] = 0.0;
  ad_real x[N];
  double res[B], d[B];
  int right = (mt_rank + 1) % mt_size;
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  MPI_Win_fence(0, win);
  refused(t, ad_mpi_put(x, B, MPI_DOUBLE, right, 0, B, MPI_DOUBLE, win), "ad_mpi_put");
  ad_tape_end(t);
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_accumulate(x, B, MPI_DOUBLE, right, 0, B, MPI_DOUBLE, MPI_SUM, win), "ad_mpi_accumulate");
  ad_tape_end(t);
  ad_tape_reset(t);
  ad_tape_begin(t);
  fill(x);
  refused(t, ad_mpi_get_accumulate(x, B, MPI_DOUBLE, res, B, MPI_DOUBLE, right, 0, B, MPI_DOUBLE, MPI_SUM, win),
          "ad_mpi_get_accumulate");
  ad_tape_end(t);
  MPI_Win_fence(0, win);
  /* Passive doubles still go: each rank adds its own into its right
   * neighbour's window. */
  for (int i = 0; i < B; i++) d[i] = from(mt_rank, 0, i);
  MT_CHECK(ad_mpi_accumulate(d, B, MPI_DOUBLE, right, 0, B, MPI_DOUBLE, MPI_SUM, win) == MPI_SUCCESS);
  MPI_Win_fence(0, win);
  int left = (mt_rank + mt_size - 1) % mt_size;
  for (int i = 0; i < B; i++) MT_CHECK(mem[i] == from(left, 0, i));
  MPI_Win_free(&win);
}

/* After the refusals the tape records a correct call: an allgather of one
 * value per rank, f = sum of the squares on every rank, so that the
 * adjoint of x on this rank is 2 p x. */
static void recovers(ad_tape *t, MPI_Comm comm) {
  ad_real y[PMAX];
  ad_tape_reset(t);
  ad_tape_begin(t);
  ad_real x = ad_input(1.0 + mt_rank);
  MT_CHECK(ad_mpi_allgather(&x, 1, AD_MPI_REAL, y, 1, AD_MPI_REAL, comm) == MPI_SUCCESS);
  ad_real f = ad_const(0.0);
  for (int j = 0; j < mt_size; j++) f = ad_add(f, ad_mul(y[j], y[j]));
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  ad_seed(t, f, 1.0);
  MT_CHECK(ad_reverse(t) == AD_OK);
  MT_CLOSE(ad_adjoint(t, x), 2.0 * mt_size * (1.0 + mt_rank), 1e-14);
}

static void blocks(ad_tape *t, MPI_Comm comm) {
  for (int j = 0; j < PMAX; j++) {
    counts[j] = B;
    displs[j] = j * B;
    bdispls[j] = j * B * (int)sizeof(double);
    types[j] = MPI_DOUBLE;
  }
  int dims[1] = {mt_size}, periods[1] = {1};
  MPI_Cart_create(comm, 1, dims, periods, 0, &ring);
  blocks_refused(t, comm);
  blocks_passive(t, comm);
  origin_refused(t, comm);
  recovers(t, comm);
  MPI_Comm_free(&ring);
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
  blocks(t, comm);
  ad_tape_destroy(t);
  return mt_finalize();
}
