/* SPDX-License-Identifier: BSD-3-Clause */
/* Compiled, not run: with ARIADNE_MPI_GUARD, plain MPI calls on doubles,
 * MPI_IN_PLACE and void * compile; with AD_BAD_CALL an MPI_Allreduce on
 * ad_real values (a time step left unported) must not. */
#define ARIADNE_MPI_GUARD
#include <ariadne_mpi.h>

#include "guard_sample.h"
