/* SPDX-License-Identifier: BSD-3-Clause */
/* A ghost exchange through packed buffers: the requests live in the struct,
 * allocated by halo.c, posted by exchange.c, completed by halo.c. */
#ifndef MPI_SPLIT_HALO_H
#define MPI_SPLIT_HALO_H
#include <mpi.h>

#define GHOSTS 2

typedef struct halo {
  int left, right, nreq;
  MPI_Request *req;
  double *send[2], *recv[2]; /* GHOSTS values to and from each side */
} halo;

int halo_create(halo *h, MPI_Comm comm);
void halo_wait(halo *h);
void halo_destroy(halo *h);
void halo_exchange(halo *h, double *u, int m, MPI_Comm comm);
double field_energy(const double *u, int m, int lo);
#endif
