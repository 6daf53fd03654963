/* SPDX-License-Identifier: BSD-3-Clause */
/* The hydro kernel recorded one statement per operation (ARIADNE_CXX_PER_OPERATION). */
#define ARIADNE_CXX_PER_OPERATION
#include <ariadne.hpp>

#include "hydro.h"
#define HYDRO_NS hydro_op
#define HYDRO_RECORDER hydro_record_op
#include "hydro_kernel.h"
