# SPDX-License-Identifier: BSD-3-Clause
# Which MPI this build uses (ARIADNE_MPI_VENDOR: MPICH, OpenMPI or unknown),
# from the headers FindMPI found, and a check that the launcher the tests use
# comes from the same MPI: a launcher of one MPI runs a program linked with
# the other as N independent one-rank programs, and every test would "pass".
set(_ariadne_mpi_dirs "${MPI_C_HEADER_DIR};${MPI_C_INCLUDE_DIRS};${MPI_C_COMPILER};${MPI_mpi_LIBRARY}")
set(ARIADNE_MPI_VENDOR unknown)
find_file(_ariadne_mpi_h mpi.h PATHS ${MPI_C_HEADER_DIR} ${MPI_C_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
if(_ariadne_mpi_h)
  file(STRINGS "${_ariadne_mpi_h}" _ariadne_mpi_defs REGEX "define (MPICH_VERSION|OMPI_MAJOR_VERSION)")
  if(_ariadne_mpi_defs MATCHES "MPICH_VERSION")
    set(ARIADNE_MPI_VENDOR MPICH)
  elseif(_ariadne_mpi_defs MATCHES "OMPI_MAJOR_VERSION")
    set(ARIADNE_MPI_VENDOR OpenMPI)
  endif()
endif()
if(ARIADNE_MPI_VENDOR STREQUAL "unknown")
  if(_ariadne_mpi_dirs MATCHES "openmpi")
    set(ARIADNE_MPI_VENDOR OpenMPI)
  elseif(_ariadne_mpi_dirs MATCHES "mpich")
    set(ARIADNE_MPI_VENDOR MPICH)
  endif()
endif()
message(STATUS "Ariadne: MPI is ${ARIADNE_MPI_VENDOR} (${MPI_C_COMPILER}; launcher ${MPIEXEC_EXECUTABLE})")
# Open MPI refuses to run as root, and to start more ranks than cores (the
# tests run up to 7), unless told to; say so where the choice is made
# (docs/start-from-install.md, "Which MPI, and how to choose it").
if(ARIADNE_MPI_VENDOR STREQUAL "OpenMPI" AND NOT MPIEXEC_PREFLAGS MATCHES "oversubscribe")
  message(STATUS "Ariadne: Open MPI's mpiexec needs --oversubscribe for the tests (and --allow-run-as-root as "
    "root): configure with -DMPIEXEC_PREFLAGS=--oversubscribe, or set OMPI_MCA_rmaps_base_oversubscribe=1 "
    "(and OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); MPICH needs neither: "
    "-DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich")
endif()

if(MPIEXEC_EXECUTABLE AND NOT ARIADNE_MPI_VENDOR STREQUAL "unknown")
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _ariadne_mpiexec_out
    ERROR_VARIABLE _ariadne_mpiexec_out RESULT_VARIABLE _ariadne_mpiexec_rc TIMEOUT 20)
  set(_ariadne_launcher unknown)
  if(_ariadne_mpiexec_out MATCHES "Open MPI|OpenRTE")
    set(_ariadne_launcher OpenMPI)
  elseif(_ariadne_mpiexec_out MATCHES "HYDRA|MPICH")
    set(_ariadne_launcher MPICH)
  endif()
  if(NOT _ariadne_launcher STREQUAL "unknown" AND NOT _ariadne_launcher STREQUAL ARIADNE_MPI_VENDOR)
    message(FATAL_ERROR "Ariadne: the MPI launcher ${MPIEXEC_EXECUTABLE} belongs to ${_ariadne_launcher}, but the "
      "MPI library found (${MPI_C_COMPILER}) is ${ARIADNE_MPI_VENDOR}: programs would run as independent one-rank "
      "jobs. Choose one MPI explicitly, e.g. -DMPI_C_COMPILER=/usr/bin/mpicc.mpich "
      "-DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich (or .openmpi for both).")
  endif()
endif()
