/* SPDX-License-Identifier: BSD-3-Clause */
/* Tags as step counters: a ring halo exchange over many steps. Rightwards
 * each step sends F fields, one message each, tagged F * step + field, so
 * that one recording exchanges 4200 distinct tags with a partner in one
 * direction; leftwards it sends the F fields in one message tagged
 * MPI_TAG_UB - step, from MPI_TAG_UB itself down. The steps rotate through
 * blocking, nonblocking and sendrecv receives with MPI_ANY_TAG and
 * MPI_ANY_SOURCE, each arranged so that what it matches is determined
 * (finite differences rerun the program). The gradient is checked by the
 * dot-product test and by central finite differences of the whole parallel
 * program. */
#include "mtest.h"

#define STEPS 700
#define F 6 /* fields: rightward messages per step, values of the leftward one */

static int tag_ub;


/* x = (u[F], v[F], acc): u travels right, v travels left, and every step
 * adds products of what arrived, with weights of their own, to acc. The
 * rotation keeps every message's adjoint of order one and the weights make
 * each one different, so an adjoint delivered to another message shows.
 *
 * A wildcard receive can only take the message meant for it: tags are
 * unique per step and direction, so MPI_ANY_SOURCE with a tag names one
 * message, and MPI_ANY_TAG from one side is posted when the earliest
 * message from there not yet received is the one it wants (with two ranks
 * both directions come from the one partner, rightwards first). */
static void halo(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  ad_real u[F], v[F], a[F], b[F], acc = x[2 * F];
  for (int f = 0; f < F; f++) {
    u[f] = x[f];
    v[f] = x[F + f];
  }
  for (int s = 0; s < STEPS; s++) {
    int rtag[F], ltag = tag_ub - s;
    for (int f = 0; f < F; f++) rtag[f] = F * s + f;
    MPI_Status sa[F], sb;
    ad_mpi_request q[2 * F + 2];
    int pattern = s % 5;
    if (pattern == 4) {
      for (int f = 0; f < F; f++)
        ad_mpi_sendrecv(&u[f], 1, AD_MPI_REAL, mt_right(), rtag[f], &a[f], 1, AD_MPI_REAL, mt_left(), rtag[f],
                        MPI_COMM_WORLD, &sa[f]);
      ad_mpi_sendrecv(v, F, AD_MPI_REAL, mt_left(), ltag, b, F, AD_MPI_REAL, mt_right(), MPI_ANY_TAG, MPI_COMM_WORLD,
                      &sb);
    } else {
      for (int f = 0; f < F; f++) ad_mpi_isend(&u[f], 1, AD_MPI_REAL, mt_right(), rtag[f], MPI_COMM_WORLD, &q[f]);
      ad_mpi_isend(v, F, AD_MPI_REAL, mt_left(), ltag, MPI_COMM_WORLD, &q[F]);
      for (int f = 0; f < F; f++) {
        if (pattern == 0)
          ad_mpi_recv(&a[f], 1, AD_MPI_REAL, mt_left(), rtag[f], MPI_COMM_WORLD, &sa[f]);
        else if (pattern == 1)
          ad_mpi_recv(&a[f], 1, AD_MPI_REAL, mt_left(), f == 0 ? MPI_ANY_TAG : rtag[f], MPI_COMM_WORLD, &sa[f]);
        else if (pattern == 2)
          ad_mpi_recv(&a[f], 1, AD_MPI_REAL, MPI_ANY_SOURCE, rtag[f], MPI_COMM_WORLD, &sa[f]);
        else
          ad_mpi_irecv(&a[f], 1, AD_MPI_REAL, mt_left(), f == 0 ? MPI_ANY_TAG : rtag[f], MPI_COMM_WORLD, &q[F + 1 + f]);
      }
      if (pattern == 0)
        ad_mpi_recv(b, F, AD_MPI_REAL, mt_right(), ltag, MPI_COMM_WORLD, &sb);
      else if (pattern == 1)
        ad_mpi_recv(b, F, AD_MPI_REAL, MPI_ANY_SOURCE, ltag, MPI_COMM_WORLD, &sb);
      else if (pattern == 2)
        ad_mpi_recv(b, F, AD_MPI_REAL, mt_right(), MPI_ANY_TAG, MPI_COMM_WORLD, &sb);
      else
        ad_mpi_irecv(b, F, AD_MPI_REAL, MPI_ANY_SOURCE, ltag, MPI_COMM_WORLD, &q[2 * F + 1]);
      if (pattern == 3) { /* completed in the opposite order */
        ad_mpi_wait(&q[2 * F + 1], &sb);
        for (int f = F - 1; f >= 0; f--) ad_mpi_wait(&q[F + 1 + f], &sa[f]);
      }
      ad_mpi_waitall(F + 1, q, MPI_STATUSES_IGNORE);
    }
    for (int f = 0; f < F; f++) MT_CHECK(sa[f].MPI_SOURCE == mt_left() && sa[f].MPI_TAG == rtag[f]);
    MT_CHECK(sb.MPI_SOURCE == mt_right() && sb.MPI_TAG == ltag);
    for (int f = 0; f < F; f++) {
      double w = cos(0.37 * s + 1.3 * f + mt_rank) / STEPS;
      acc = ad_add(acc, ad_mul(w, ad_mul(ad_sin(a[f]), b[f])));
      u[f] = ad_add(a[f], ad_mul(1e-4, ad_sin(b[(f + 1) % F])));
      v[f] = b[f];
    }
  }
  for (int f = 0; f < F; f++) {
    y[f] = ad_add(u[f], acc);
    y[F + f] = ad_mul(v[f], ad_add(1.0, ad_mul(0.1, acc)));
  }
  y[2 * F] = acc;
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  MT_CHECK(flag && ub && *ub >= 32767);
  tag_ub = flag && ub ? *ub : 32767;
  if (mt_size >= 2) mt_check_prog("halo exchange tagged by step", halo, 2 * F + 1, 2 * F + 1, NULL, 1e-6);
  return mt_finalize();
}
