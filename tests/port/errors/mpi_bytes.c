/* SPDX-License-Identifier: BSD-3-Clause */
/* Active data sent as MPI_BYTE: the ad_real structs travel, not their values. */
/* expect-line: 16 MPI_Send on active data with the datatype 'MPI_BYTE' */
/* expect-line: 17 MPI_Bcast moves the active data '(void *)p' as MPI_BYTE bytes */
/* expect-line: 19 MPI_Recv moves the active data 'raw' as MPI_CHAR bytes */
/* expect-line: 20 the active data 'p' is passed to 'bcast_bytes', which moves its parameter 'buf' as bytes */
/* expect: AD_MPI_REAL */
#include <mpi.h>
struct particle {
  double x, v;
  int id;
};
static void bcast_bytes(void *buf, int n) { MPI_Bcast(buf, n, MPI_BYTE, 0, MPI_COMM_WORLD); }
void exchange(struct particle *p, int n, int rank) {
  int bytes = n * (int)sizeof *p;
  if (rank == 0) MPI_Send(p, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
  MPI_Bcast((void *)p, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  void *raw = p;
  if (rank == 1) MPI_Recv(raw, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  bcast_bytes(p, bytes);
}
