/* SPDX-License-Identifier: BSD-3-Clause */
#include "halo.h"

/* Pack the GHOSTS values next to each side, exchange them, unpack into the
 * ghost cells. */
void halo_exchange(halo *h, double *u, int m, MPI_Comm comm) {
  for (int g = 0; g < GHOSTS; g++) {
    h->send[0][g] = u[GHOSTS + g];
    h->send[1][g] = u[m + g];
  }
  MPI_Irecv(h->recv[0], GHOSTS, MPI_DOUBLE, h->left, 1, comm, &h->req[0]);
  MPI_Irecv(h->recv[1], GHOSTS, MPI_DOUBLE, h->right, 0, comm, &h->req[1]);
  MPI_Isend(h->send[0], GHOSTS, MPI_DOUBLE, h->left, 0, comm, &h->req[2]);
  MPI_Isend(h->send[1], GHOSTS, MPI_DOUBLE, h->right, 1, comm, &h->req[3]);
  halo_wait(h);
  for (int g = 0; g < GHOSTS; g++) {
    u[g] = h->left == MPI_PROC_NULL ? 0.0 : h->recv[0][g];
    u[m + GHOSTS + g] = h->right == MPI_PROC_NULL ? 0.0 : h->recv[1][g];
  }
}
