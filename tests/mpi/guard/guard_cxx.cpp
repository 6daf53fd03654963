// SPDX-License-Identifier: BSD-3-Clause
// Compiled, not run: with mpi.h and ariadne.hpp, plain MPI calls on doubles,
// MPI_IN_PLACE and void * compile; with AD_BAD_CALL an MPI_Allreduce on
// ad_real values (a time step left unported) must not.
// The C API only, as ariadne_mpi.h would ask for.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <ariadne.hpp>

#include "guard_sample.h"
