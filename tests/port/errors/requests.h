/* SPDX-License-Identifier: BSD-3-Clause */
/* A header that keeps requests, not given to the tool with the file that
 * posts them. */
#include <mpi.h>
typedef struct exchange {
  MPI_Request *req;
} exchange;
