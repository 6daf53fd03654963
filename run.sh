#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Ariadne quick start.
#
#   ./run.sh example   install what is missing, build in build/, run the flagship example
#                      (examples/heat_mpi on 4 MPI ranks)
#   ./run.sh test      the same set-up, then the API reference (Doxygen, warnings as errors)
#                      and the whole test suite: Release with MPICH (with memcheck), Release
#                      with Open MPI, ASan+UBSan, ThreadSanitizer, 64-bit handles, and the
#                      passive build
#   ./run.sh bench     build Release in build/ and run the benchmarks (extra arguments
#                      are passed to every benchmark program)
#
# Environment:
#   ARIADNE_BUILD_ROOT  directory that receives build/, build-asan/, ... (default: this repository)
#   ARIADNE_JOBS        parallel build and test jobs (default: nproc)
#   ARIADNE_SKIP_DEPS=1 do not check or install system packages
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_ROOT=${ARIADNE_BUILD_ROOT:-$ROOT}
JOBS=${ARIADNE_JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD=$BUILD_ROOT/build

# Debian packages: compiler and tools, MPI, valgrind for the memcheck tests,
# ADOL-C for the benchmarks' comparison, libclang for ariadne-port (and
# clang-format, which formats the lines it changes), Doxygen for the API
# reference, libpng and cairo for the examples' pictures.
PACKAGES=(build-essential cmake pkg-config valgrind libmpich-dev mpich libopenmpi-dev openmpi-bin libadolc-dev
  gcc-multilib libclang-dev clang-format doxygen libpng-dev libcairo2-dev)

# Both MPIs are installed; every build names its MPI explicitly (the vendor's
# own compiler wrapper and launcher), so that what the Debian alternatives
# point at does not matter. Open MPI also needs --oversubscribe to run more
# ranks than cores.
MPICH_OPTIONS=(-DMPI_C_COMPILER=/usr/bin/mpicc.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich -DMPIEXEC_PREFLAGS=)
OPENMPI_OPTIONS=(-DMPI_C_COMPILER=/usr/bin/mpicc.openmpi -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.openmpi
  -DMPIEXEC_PREFLAGS=--oversubscribe)

# The options every build sets explicitly, so that a build directory left
# over from another configuration is put right.
BASE_OPTIONS=(-DARIADNE_INDEX_64=OFF -DARIADNE_PASSIVE=OFF -DARIADNE_ASAN=OFF -DARIADNE_UBSAN=OFF -DARIADNE_TSAN=OFF -DARIADNE_MPI=ON
  -DARIADNE_BUILD_TESTS=ON -DARIADNE_BUILD_EXAMPLES=ON -DARIADNE_BUILD_BENCHMARKS=ON)

# Open MPI refuses to run as root, or more ranks than cores, unless told to;
# MPICH (the Debian packages above) needs neither. These only inform Open MPI,
# in case its mpiexec is the one found.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# The mpiexec that CMake found for the build (the one the tests use), else the one on PATH.
mpiexec_of() {
  local build=$1 exe=''
  if [[ -f $build/CMakeCache.txt ]]; then
    exe=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  fi
  if [[ -z $exe || $exe == *NOTFOUND* ]]; then
    exe=$(command -v mpiexec || true)
  fi
  if [[ -z $exe ]]; then
    echo "run.sh: no mpiexec found (install mpich)" >&2
    return 1
  fi
  printf '%s\n' "$exe"
}

# The flagship example: what `./run.sh example` runs once the build is done.
flagship() {
  local build=$1
  local mpiexec
  mpiexec=$(mpiexec_of "$build") || return 1
  if [[ ! -x $build/examples/heat_mpi ]]; then
    echo "run.sh: $build/examples/heat_mpi was not built: was MPI found? (see the configure output)" >&2
    return 1
  fi
  # ---- FLAGSHIP COMMAND (the one line to change) ----
  "$mpiexec" -n 4 "$build/examples/heat_mpi"
}

SUMMARY=()

die() {
  printf '\nrun.sh: FAILED: %s\n' "$*" >&2
  print_summary >&2
  exit 1
}

print_summary() {
  if ((${#SUMMARY[@]})); then
    printf '\nrun.sh: steps completed:\n'
    printf '  %s\n' "${SUMMARY[@]}"
  fi
}

# step DESCRIPTION COMMAND...: run one command, stop everything if it fails.
step() {
  local what=$1 t0=$SECONDS
  shift
  printf '\n==> %s\n    $ %s\n' "$what" "$*"
  local rc=0
  "$@" || rc=$?
  if ((rc != 0)); then
    die "$what (exit status $rc; see the output above)"
  fi
  SUMMARY+=("$(printf '%-52s %5ds' "$what" $((SECONDS - t0)))")
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_deps() {
  if [[ ${ARIADNE_SKIP_DEPS:-0} == 1 ]]; then
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "run.sh: not a Debian-based system: make sure the equivalents of these are installed: ${PACKAGES[*]}"
    return 0
  fi
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "run.sh: system packages present (${PACKAGES[*]})"
    return 0
  fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "installing ${missing[*]} needs root or sudo"
    sudo=(sudo)
  fi
  step "apt-get update" "${sudo[@]}" apt-get update
  step "apt-get install ${missing[*]}" \
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
}

# configure_build DIR CMAKE-OPTIONS...: configure and build everything in DIR.
configure_build() {
  local dir=$1
  shift
  step "configure ${dir#"$BUILD_ROOT"/}" cmake -S "$ROOT" -B "$dir" "${BASE_OPTIONS[@]}" "$@"
  step "build ${dir#"$BUILD_ROOT"/}" cmake --build "$dir" --parallel "$JOBS"
}

# run_ctest DIR CTEST-OPTIONS...
run_ctest() {
  local dir=$1
  shift
  step "ctest in ${dir#"$BUILD_ROOT"/}${*:+ $*}" ctest --test-dir "$dir" --output-on-failure --parallel "$JOBS" "$@"
}

cmd_example() {
  install_deps
  configure_build "$BUILD" -DCMAKE_BUILD_TYPE=Release "${MPICH_OPTIONS[@]}"
  step "flagship example" flagship "$BUILD"
}

cmd_test() {
  install_deps
  # (i) Release with everything, the valgrind memcheck tests included (MPICH).
  configure_build "$BUILD" -DCMAKE_BUILD_TYPE=Release "${MPICH_OPTIONS[@]}"
  # The API reference from the headers' comments; a Doxygen warning fails it.
  command -v doxygen >/dev/null 2>&1 || die "doxygen not found: the API reference needs it (Debian: doxygen)"
  step "API reference (Doxygen, warnings as errors)" cmake --build "$BUILD" --target ariadne_doc
  run_ctest "$BUILD"
  # (ii) The same against Open MPI: the MPI tests, the examples and the
  # install test (the serial tests do not depend on the MPI).
  configure_build "$BUILD_ROOT/build-openmpi" -DCMAKE_BUILD_TYPE=Release "${OPENMPI_OPTIONS[@]}" \
    -DARIADNE_BUILD_BENCHMARKS=OFF
  run_ctest "$BUILD_ROOT/build-openmpi" -LE 'serial|memcheck|fuzz'
  # (iii) AddressSanitizer + UndefinedBehaviorSanitizer. valgrind and
  # sanitizers do not mix; benchmarks are not run here.
  # Stages (i) and (ii) run every MPI test at all its rank counts; this one
  # and (v) stop at 3 ranks (1, 2 and an odd count), which keeps the suite
  # well inside CI's time.
  configure_build "$BUILD_ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug -DARIADNE_ASAN=ON -DARIADNE_UBSAN=ON \
    -DARIADNE_BUILD_BENCHMARKS=OFF -DARIADNE_MPI_RANKS_MAX=3 "${MPICH_OPTIONS[@]}"
  # MPI_Init loads hwloc's PCI plugin, whose allocations LeakSanitizer would
  # report as leaks in every MPI program; MPI on one machine does not need the
  # PCI topology, so the plugin stays out.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci} \
    run_ctest "$BUILD_ROOT/build-asan" -LE 'memcheck|install|bench-smoke|fuzz'
  # (iv) ThreadSanitizer: threads recording and sweeping tapes of their own
  # at once, and the other serial tests (no MPI, examples or benchmarks).
  configure_build "$BUILD_ROOT/build-tsan" -DCMAKE_BUILD_TYPE=Debug -DARIADNE_TSAN=ON -DARIADNE_MPI=OFF \
    -DARIADNE_BUILD_BENCHMARKS=OFF -DARIADNE_BUILD_EXAMPLES=OFF
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1} run_ctest "$BUILD_ROOT/build-tsan" -L serial -LE 'memcheck|install'
  # (v) 64-bit tape handles, everything compiled with -pedantic-errors.
  configure_build "$BUILD_ROOT/build-idx64" -DCMAKE_BUILD_TYPE=Release -DARIADNE_INDEX_64=ON "${MPICH_OPTIONS[@]}" \
    -DCMAKE_C_FLAGS=-pedantic-errors -DARIADNE_MPI_RANKS_MAX=3
  run_ctest "$BUILD_ROOT/build-idx64" -LE 'memcheck|fuzz'
  # (vi) The library for a 32-bit target (gcc -m32): it must compile there;
  # this kernel may not run 32-bit programs, so only the libraries are built.
  step "configure build-m32" cmake -S "$ROOT" -B "$BUILD_ROOT/build-m32" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS=-m32 -DARIADNE_MPI=OFF -DARIADNE_BUILD_TESTS=OFF -DARIADNE_BUILD_EXAMPLES=OFF \
    -DARIADNE_BUILD_BENCHMARKS=OFF -DARIADNE_INDEX_64=OFF -DARIADNE_PASSIVE=OFF -DARIADNE_ASAN=OFF \
    -DARIADNE_UBSAN=OFF -DARIADNE_TSAN=OFF
  step "build build-m32 (libraries)" cmake --build "$BUILD_ROOT/build-m32" --parallel "$JOBS" \
    --target ariadne ariadne_static
  # (vii) Passive: every ad_* operation is plain double arithmetic.
  configure_build "$BUILD_ROOT/build-passive" -DCMAKE_BUILD_TYPE=Release -DARIADNE_PASSIVE=ON "${MPICH_OPTIONS[@]}"
  run_ctest "$BUILD_ROOT/build-passive" -L example
}

cmd_bench() {
  install_deps
  configure_build "$BUILD" -DCMAKE_BUILD_TYPE=Release "${MPICH_OPTIONS[@]}"
  local benches=() b
  if [[ -d $BUILD/benchmarks ]]; then
    # The reference-kernel (heat) benchmark first, then the others.
    while IFS= read -r b; do benches+=("$b"); done < <(
      find "$BUILD/benchmarks" -maxdepth 2 -type f -perm -u+x -name '*bench*' -name '*heat*' | sort
      find "$BUILD/benchmarks" -maxdepth 2 -type f -perm -u+x -name '*bench*' ! -name '*heat*' | sort)
  fi
  ((${#benches[@]})) || die "no benchmark programs found under $BUILD/benchmarks"
  # MPI benchmarks start their own sub-communicators of 1, 2 and 4 ranks.
  local mpiexec=''
  for b in "${benches[@]}"; do
    if [[ $(basename "$b") == *_mpi ]]; then
      [[ -n $mpiexec ]] || mpiexec=$(mpiexec_of "$BUILD") || die "cannot run $b without mpiexec"
      step "benchmark ${b#"$BUILD"/} (4 MPI processes)" "$mpiexec" -n 4 "$b" "$@"
    else
      step "benchmark ${b#"$BUILD"/}" "$b" "$@"
    fi
  done
}

usage() {
  sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

main() {
  local cmd=${1:-}
  (($#)) && shift
  local t0=$SECONDS
  case $cmd in
    example) cmd_example ;;
    test) cmd_test ;;
    bench) cmd_bench "$@" ;;
    -h | --help | help) usage; return 0 ;;
    *) usage >&2; return 2 ;;
  esac
  print_summary
  printf '\nrun.sh %s: OK (%ds)\n' "$cmd" $((SECONDS - t0))
}

main "$@"
