# SPDX-License-Identifier: BSD-3-Clause
# Configure Ariadne naming only the MPI compiler wrapper (as
# docs/start-from-install.md does): the launcher must be the same MPI's.
# Run with cmake -DSOURCE=... -DWORK=... -DMPICC=... -DVENDOR=... -P.
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}" -DMPI_C_COMPILER=${MPICC}
    -DARIADNE_BUILD_TESTS=OFF -DARIADNE_BUILD_EXAMPLES=OFF -DARIADNE_BUILD_BENCHMARKS=OFF -DARIADNE_PORT=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with -DMPI_C_COMPILER=${MPICC} alone failed")
endif()
file(STRINGS "${WORK}/CMakeCache.txt" launcher REGEX "^MPIEXEC_EXECUTABLE:")
string(REGEX REPLACE "^[^=]*=" "" launcher "${launcher}")
execute_process(COMMAND ${launcher} --version OUTPUT_VARIABLE version ERROR_VARIABLE version TIMEOUT 20)
if(VENDOR STREQUAL "MPICH" AND NOT version MATCHES "HYDRA|MPICH")
  message(FATAL_ERROR "MPI_C_COMPILER=${MPICC} (MPICH) got the launcher ${launcher}, not MPICH's")
elseif(VENDOR STREQUAL "OpenMPI" AND NOT version MATCHES "Open MPI|OpenRTE")
  message(FATAL_ERROR "MPI_C_COMPILER=${MPICC} (Open MPI) got the launcher ${launcher}, not Open MPI's")
endif()
message(STATUS "MPI_C_COMPILER=${MPICC}: launcher ${launcher}")
file(REMOVE_RECURSE "${WORK}")
