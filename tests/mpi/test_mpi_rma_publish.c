/* SPDX-License-Identifier: BSD-3-Clause */
/* A rank's stores into its window published by ad_mpi_barrier, before and
 * after the rank's first passive-target call: another rank gets them under
 * a shared lock right after the barrier, and a later put into the same
 * elements is no conflict. Each program is checked by the dot-product test
 * and by central finite differences of the whole parallel program, and its
 * values against the same program on plain MPI (a window of doubles).
 *
 * The programs are written once, below, and included twice: with ad_real
 * and the ad_mpi_* wrappers, and with double and plain MPI. */
#ifndef PUBLISH_PROGS
#include "mtest.h"

#define N 2

enum { FIRST_SYNC_BARRIER, AFTER_OWN_LOCK, THEN_PUT, CASES };
static const char *case_name[CASES] = {"publish_first_sync_barrier", "publish_after_own_lock", "publish_then_put"};

#define PUBLISH_PROGS
#include "twins.h"
#include "test_mpi_rma_publish.c"
#define MT_PLAIN
#include "twins.h"
#include "test_mpi_rma_publish.c"

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  if (mt_size < 2) {
    if (mt_rank == 0) printf("skipped: needs two ranks\n");
    return mt_finalize();
  }
  for (int c = 0; c < CASES; c++) {
    mt_values(case_name[c], publish_ad, publish_plain, &c, N);
#ifndef ARIADNE_PASSIVE
    mt_check_prog(case_name[c], publish_ad, N, N, &c, 1e-6);
#endif
  }
  return mt_finalize();
}

#else /* PUBLISH_PROGS: the programs, on R */

/* Rank 1 stores into both elements of its window; after a barrier rank 0
 * gets them under a shared lock. AFTER_OWN_LOCK: every rank locked and
 * unlocked its own part first (the barrier is then not its first
 * synchronisation). THEN_PUT: after a second barrier rank 0 puts into
 * rank 1's first element under an exclusive lock, and after a third rank 1
 * reads its window. */
static void F(publish)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  int mode = *(const int *)ctx, me = mt_rank;
  MPI_Win win;
  R *u, g[N], s;
  WIN_ALLOCATE((MPI_Aint)(N * sizeof(R)), (int)sizeof(R), MPI_INFO_NULL, MPI_COMM_WORLD, &u, &win);
  if (mode == AFTER_OWN_LOCK) {
    LOCK(MPI_LOCK_SHARED, me, 0, win);
    UNLOCK(me, win);
  }
  if (me == 1) {
    u[0] = MUL(x[0], 3.0);
    u[1] = MUL(x[1], x[1]);
  }
  BARRIER();
  for (int i = 0; i < n; i++) y[i] = x[i];
  if (me == 0) {
    LOCK(MPI_LOCK_SHARED, 1, 0, win);
    GET(g, N, RT, 1, 0, N, RT, win);
    UNLOCK(1, win);
    y[0] = ADD(MUL(g[0], g[1]), x[0]);
    y[1] = ADD(g[0], MUL(x[1], g[1]));
  }
  if (mode == THEN_PUT) {
    BARRIER();
    if (me == 0) {
      s = SIN(x[1]);
      LOCK(MPI_LOCK_EXCLUSIVE, 1, 0, win);
      PUT(&s, 1, RT, 1, 0, 1, RT, win);
      UNLOCK(1, win);
    }
    BARRIER();
    if (me == 1) {
      y[0] = MUL(u[0], ADD(u[1], x[0]));
      y[1] = ADD(u[0], x[1]);
    }
  }
  WIN_FREE(&win);
}

#endif /* PUBLISH_PROGS */
