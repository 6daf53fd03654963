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

# The vendor of an MPI launcher, from its --version: MPICH, OpenMPI or unknown.
function(ariadne_mpi_launcher_vendor exe out)
  execute_process(COMMAND ${exe} --version OUTPUT_VARIABLE _out ERROR_VARIABLE _out RESULT_VARIABLE _rc TIMEOUT 20)
  set(_vendor unknown)
  if(_out MATCHES "Open MPI|OpenRTE")
    set(_vendor OpenMPI)
  elseif(_out MATCHES "HYDRA|MPICH")
    set(_vendor MPICH)
  endif()
  set(${out} ${_vendor} PARENT_SCOPE)
endfunction()

if(MPIEXEC_EXECUTABLE AND NOT ARIADNE_MPI_VENDOR STREQUAL "unknown")
  ariadne_mpi_launcher_vendor(${MPIEXEC_EXECUTABLE} _ariadne_launcher)
  # FindMPI takes the mpiexec beside the compiler wrapper, which on Debian is
  # the alternatives' (Open MPI's when both are installed) even for
  # mpicc.mpich. The wrapper's own launcher, mpiexec.mpich or
  # mpiexec.openmpi, is taken instead when it is there, so that choosing the
  # compiler wrapper chooses the MPI.
  if(NOT _ariadne_launcher STREQUAL "unknown" AND NOT _ariadne_launcher STREQUAL ARIADNE_MPI_VENDOR)
    get_filename_component(_ariadne_cc_name "${MPI_C_COMPILER}" NAME)
    get_filename_component(_ariadne_cc_dir "${MPI_C_COMPILER}" DIRECTORY)
    set(_ariadne_own "")
    if(_ariadne_cc_name MATCHES "[.](mpich|openmpi)$")
      set(_ariadne_own "${_ariadne_cc_dir}/mpiexec.${CMAKE_MATCH_1}")
    endif()
    if(_ariadne_own AND EXISTS "${_ariadne_own}")
      ariadne_mpi_launcher_vendor(${_ariadne_own} _ariadne_own_vendor)
      if(_ariadne_own_vendor STREQUAL ARIADNE_MPI_VENDOR)
        message(STATUS "Ariadne: the launcher ${MPIEXEC_EXECUTABLE} is ${_ariadne_launcher}'s; using "
          "${_ariadne_own}, the launcher of ${MPI_C_COMPILER}")
        set(MPIEXEC_EXECUTABLE "${_ariadne_own}" CACHE FILEPATH "Executable for running MPI programs." FORCE)
        set(_ariadne_launcher ${_ariadne_own_vendor})
      endif()
    endif()
  endif()
  if(NOT _ariadne_launcher STREQUAL "unknown" AND NOT _ariadne_launcher STREQUAL ARIADNE_MPI_VENDOR)
    message(FATAL_ERROR "Ariadne: the MPI launcher ${MPIEXEC_EXECUTABLE} belongs to ${_ariadne_launcher}, but the "
      "MPI library found (${MPI_C_COMPILER}) is ${ARIADNE_MPI_VENDOR}: programs would run as independent one-rank "
      "jobs. Choose one MPI explicitly, e.g. -DMPI_C_COMPILER=/usr/bin/mpicc.mpich "
      "-DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich (or .openmpi for both).")
  endif()
endif()
