/* SPDX-License-Identifier: BSD-3-Clause */
/* The hydro kernel recorded with ariadne.hpp's expressions: one statement per assignment. */
#include <ariadne.hpp>

#include "hydro.h"
#define HYDRO_NS hydro_et
#define HYDRO_RECORDER hydro_record_et
#include "hydro_kernel.h"
