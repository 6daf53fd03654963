#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Install a built Ariadne into a fresh prefix, then build and run a consumer
# against it twice: as a CMake project (find_package(Ariadne)) and with a
# plain compiler command line from pkg-config. With the MPI layer (mpicc=
# given), an MPI consumer too, run on 2 ranks both ways. Then: a serial
# find_package(Ariadne) must not look for MPI; the installed consumer runs
# from its run path; the installed examples build against the install; the
# commands of the installed docs/start-from-install.md run as written.
# Arguments are NAME=VALUE:
#   cmake=  the cmake executable          build=  Ariadne's build tree
#   work=   scratch directory (wiped)     source= the consumer project
#   cc=     C compiler                    config= build configuration
#   libdir= CMAKE_INSTALL_LIBDIR          sanitize= extra compile/link flags
#   mpicc=  MPI C compiler wrapper, if Ariadne was built with MPI (may be empty)
#   mpiexec= MPI launcher (required with mpicc=)
# Exits 0 on success, 77 (skipped) if only pkg-config is missing, 1 otherwise.
set -eu

cmake=cmake build='' work='' source='' cc=cc config=Release libdir=lib sanitize='' mpicc='' mpiexec=''
for arg in "$@"; do
  case $arg in
    cmake=* | build=* | work=* | source=* | cc=* | config=* | libdir=* | sanitize=* | mpicc=* | mpiexec=*)
      eval "${arg%%=*}=\${arg#*=}" ;;
    *) echo "run_install_test.sh: unknown argument '$arg'" >&2; exit 1 ;;
  esac
done
if [ -z "$build" ] || [ -z "$work" ] || [ -z "$source" ]; then
  echo "run_install_test.sh: build=, work= and source= are required" >&2
  exit 1
fi
if [ -n "$mpicc" ] && [ -z "$mpiexec" ]; then
  echo "run_install_test.sh: mpiexec= is required with mpicc=" >&2
  exit 1
fi

# Every MPI run below is on 2 ranks: the MPI layer checks that it got them
# (a launcher of another MPI would start 2 one-rank programs).
ARIADNE_EXPECT_RANKS=2
export ARIADNE_EXPECT_RANKS

step() { echo "--- $*"; }
fail() { echo "install test FAILED: $*" >&2; exit 1; }

prefix=$work/prefix
ctest=$(dirname "$cmake")/ctest
rm -rf "$work"
mkdir -p "$work"

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" --config "$config" || fail "cmake --install"
[ -f "$prefix/$libdir/cmake/Ariadne/AriadneConfig.cmake" ] || fail "no AriadneConfig.cmake under $prefix/$libdir/cmake/Ariadne"
[ -f "$prefix/$libdir/pkgconfig/ariadne.pc" ] || fail "no ariadne.pc under $prefix/$libdir/pkgconfig"
if [ -n "$mpicc" ]; then
  [ -f "$prefix/include/ariadne_mpi.h" ] || fail "no ariadne_mpi.h under $prefix/include"
  [ -f "$prefix/$libdir/pkgconfig/ariadne-mpi.pc" ] || fail "no ariadne-mpi.pc under $prefix/$libdir/pkgconfig"
  grep -q 'Ariadne::ariadne_mpi' "$prefix/$libdir/cmake/Ariadne/AriadneMPITargets.cmake" ||
    fail "the installed MPI export set has no Ariadne::ariadne_mpi"
  ! grep -q 'MPI::\|ariadne_mpi' "$prefix/$libdir/cmake/Ariadne/AriadneTargets.cmake" ||
    fail "the serial export set AriadneTargets.cmake names MPI"
fi

step "configure the consumer with find_package(Ariadne)"
set -- -S "$source" -B "$work/consumer-build" -DCMAKE_BUILD_TYPE="$config" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_C_COMPILER="$cc"
if [ -n "$sanitize" ]; then
  set -- "$@" -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize"
fi
if [ -n "$mpicc" ]; then
  set -- "$@" -DMPI_C_COMPILER="$mpicc" -DCONSUMER_MPI=ON
fi
"$cmake" "$@" || fail "configuring the consumer"
found=$(sed -n 's/^Ariadne_DIR:[A-Z]*=//p' "$work/consumer-build/CMakeCache.txt")
[ "$found" = "$prefix/$libdir/cmake/Ariadne" ] || fail "find_package found Ariadne in '$found', not in $prefix"

step "build and run the consumer"
"$cmake" --build "$work/consumer-build" --config "$config" || fail "building the consumer"
for exe in consumer consumer_static consumer_passive consumer_ckpt; do
  path=$work/consumer-build/$exe
  [ -x "$path" ] || path=$work/consumer-build/$config/$exe
  "$path" || fail "$exe"
done
if [ -x "$prefix/bin/ariadne-port" ]; then
  grep -q 'Ariadne::port' "$prefix/$libdir/cmake/Ariadne/AriadneTargets.cmake" ||
    fail "the installed export set has no Ariadne::port"
  path=$work/consumer-build/consumer_port
  [ -x "$path" ] || path=$work/consumer-build/$config/consumer_port
  [ -x "$path" ] || fail "consumer_port was not built: no ariadne_port_sources from the installed package"
  "$path" || fail "consumer_port"
fi
if [ -n "$mpicc" ]; then
  for exe in consumer_mpi consumer_mpi_static consumer_mpi_passive; do
    path=$work/consumer-build/$exe
    [ -x "$path" ] || path=$work/consumer-build/$config/$exe
    [ -x "$path" ] || fail "$exe was not built: find_package(Ariadne) gave no Ariadne::ariadne_mpi"
    "$mpiexec" -n 2 "$path" || fail "mpiexec -n 2 $exe"
  done
fi

if [ -n "$mpicc" ]; then
  step "configure a serial consumer: find_package(Ariadne) does not look for MPI"
  set -- -S "$source" -B "$work/consumer-serial" -DCMAKE_BUILD_TYPE="$config" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_C_COMPILER="$cc"
  if [ -n "$sanitize" ]; then
    set -- "$@" -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize"
  fi
  "$cmake" "$@" || fail "configuring a serial consumer"
  ! grep -q '^MPI_C_COMPILER' "$work/consumer-serial/CMakeCache.txt" || fail "a serial find_package(Ariadne) searched for MPI"
fi

# Installed programs run from their run path alone, without LD_LIBRARY_PATH.
step "install the consumer and run it without LD_LIBRARY_PATH"
"$cmake" --install "$work/consumer-build" --prefix "$work/app" --config "$config" || fail "installing the consumer"
env -u LD_LIBRARY_PATH "$work/app/bin/consumer" || fail "installed consumer (INSTALL_RPATH \${Ariadne_LIBRARY_DIR})"
if [ -n "$mpicc" ]; then
  env -u LD_LIBRARY_PATH "$mpiexec" -n 2 "$work/app/bin/consumer_mpi" ||
    fail "installed consumer_mpi (INSTALL_RPATH_USE_LINK_PATH)"
fi

step "compile the consumer with pkg-config"
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "pkg-config not found: skipping the pkg-config part" >&2
  exit 77
fi
PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs ariadne) || fail "pkg-config --cflags --libs ariadne"
includedir=$(pkg-config --variable=includedir ariadne)
[ -f "$includedir/ariadne.h" ] || fail "pkg-config's includedir '$includedir' has no ariadne.h"
echo "pkg-config --cflags --libs ariadne: $flags"
# With a shared libariadne the plain compiler line sets no run path.
run_pc() { LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }
# $flags and $sanitize are word-split on purpose: they are lists of options.
# shellcheck disable=SC2086
"$cc" $sanitize -o "$work/consumer_pc" "$source/consumer.c" $flags || fail "cc \$(pkg-config --cflags --libs ariadne)"
run_pc "$work/consumer_pc" || fail "consumer built with pkg-config"
# shellcheck disable=SC2086
"$cc" $sanitize -o "$work/consumer_pc_rpath" "$source/consumer.c" $flags -Wl,-rpath,"$(pkg-config --variable=libdir ariadne)" ||
  fail "cc \$(pkg-config --cflags --libs ariadne) -Wl,-rpath,..."
env -u LD_LIBRARY_PATH "$work/consumer_pc_rpath" || fail "consumer built with pkg-config and -Wl,-rpath"
# shellcheck disable=SC2086
"$cc" $sanitize -DARIADNE_PASSIVE -o "$work/consumer_pc_passive" "$source/consumer.c" $flags || fail "passive compile with pkg-config"
run_pc "$work/consumer_pc_passive" || fail "passive consumer built with pkg-config"
# Static: the archive by path, with the flags pkg-config gives.
libdir_pc=$(pkg-config --variable=libdir ariadne)
cflags=$(pkg-config --cflags ariadne)
static_lib=$(ls "$libdir_pc"/libariadne*.a | grep -v _mpi | head -n 1)
# shellcheck disable=SC2086
"$cc" $sanitize -o "$work/consumer_pc_static" "$source/consumer.c" $cflags "$static_lib" -lm ||
  fail "static link with pkg-config's paths"
"$work/consumer_pc_static" || fail "consumer linked statically"
if command -v nm >/dev/null 2>&1 && nm -D "$work/consumer_pc_static" 2>/dev/null | grep -q ' ad_tape_create'; then
  fail "the statically linked consumer still imports ad_tape_create"
fi

if [ -n "$mpicc" ]; then
  step "compile the MPI consumer with pkg-config"
  mflags=$(pkg-config --cflags --libs ariadne-mpi) || fail "pkg-config --cflags --libs ariadne-mpi"
  echo "pkg-config --cflags --libs ariadne-mpi: $mflags"
  # ariadne-mpi.pc carries MPI's flags when it requires the MPI's own module;
  # otherwise the MPI compiler wrapper adds them.
  mcc=$cc
  pkg-config --print-requires ariadne-mpi | grep -Eq '^(mpich|ompi-c)' || mcc=$mpicc
  # shellcheck disable=SC2086
  "$mcc" $sanitize -o "$work/consumer_mpi_pc" "$source/consumer_mpi.c" $mflags || fail "$mcc \$(pkg-config --cflags --libs ariadne-mpi)"
  run_pc "$mpiexec" -n 2 "$work/consumer_mpi_pc" || fail "MPI consumer built with pkg-config"
  # shellcheck disable=SC2086
  "$mcc" $sanitize -DARIADNE_PASSIVE -o "$work/consumer_mpi_pc_passive" "$source/consumer_mpi.c" $mflags ||
    fail "passive MPI compile with pkg-config"
  run_pc "$mpiexec" -n 2 "$work/consumer_mpi_pc_passive" || fail "passive MPI consumer built with pkg-config"
  # Static: both archives (the MPI layer, then the core), MPI's own flags.
  sflags=$(pkg-config --static --libs ariadne-mpi | sed "s/-lariadne_mpi\([0-9]*\)/-l:libariadne_mpi\1.a/; s/-lariadne\([0-9]*\)\( \|$\)/-l:libariadne\1.a\2/")
  echo "static MPI link: $sflags"
  # shellcheck disable=SC2086
  "$mcc" $sanitize -o "$work/consumer_mpi_pc_static" "$source/consumer_mpi.c" $(pkg-config --cflags ariadne-mpi) $sflags ||
    fail "static MPI link with pkg-config"
  "$mpiexec" -n 2 "$work/consumer_mpi_pc_static" || fail "MPI consumer linked statically"
fi

# The installed examples, built against the installed package by their own
# CMakeLists.txt; a few of them run (the others are the build's tests).
examples=$prefix/share/doc/Ariadne/examples
step "build the installed examples ($examples)"
[ -f "$examples/CMakeLists.txt" ] || fail "no examples installed under $examples"
set -- -S "$examples" -B "$work/examples" -DCMAKE_BUILD_TYPE="$config" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_C_COMPILER="$cc"
if [ -n "$sanitize" ]; then
  set -- "$@" -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize"
fi
if [ -n "$mpicc" ]; then
  set -- "$@" -DMPI_C_COMPILER="$mpicc" -DMPIEXEC_EXECUTABLE="$mpiexec"
fi
"$cmake" "$@" || fail "configuring the installed examples"
"$cmake" --build "$work/examples" --config "$config" || fail "building the installed examples"
run_examples='^example[.](port_example|heat_gradient|implicit_cg|port_gradient)$'
if [ -n "$mpicc" ]; then
  [ -x "$work/examples/heat_mpi" ] || [ -x "$work/examples/$config/heat_mpi" ] ||
    fail "the installed examples built no MPI example: find_package(Ariadne OPTIONAL_COMPONENTS mpi) found no mpi"
  run_examples='^example[.](port_example|heat_gradient|implicit_cg|port_gradient|layer_parallel_training[.]np2)$'
fi
"$ctest" --test-dir "$work/examples" -C "$config" -R "$run_examples" --output-on-failure ||
  fail "the installed examples' tests"
# With cairo, layer_parallel_training drew its figures.
if [ -n "$mpicc" ] && grep -q '^ARIADNE_CAIRO_FOUND:INTERNAL=1' "$work/examples/CMakeCache.txt"; then
  for png in loss boundary; do
    [ -s "$work/examples/layer_parallel_training.np2/layer_parallel_training_$png.png" ] ||
      fail "the installed layer_parallel_training drew no $png figure"
  done
fi

# docs/start-from-install.md, as installed: its blocks marked
# `<!-- test: file PATH -->` are written to PATH, those marked
# `<!-- test: run [mpi|port] -->` run in order (mpi ones when there is MPI,
# port ones when there is ariadne-port), as a user would type them.
doc=$prefix/share/doc/Ariadne/docs/start-from-install.md
step "run the commands of $doc"
[ -f "$doc" ] || fail "no $doc"
docwork=$work/doc
mkdir -p "$docwork/bin"
awk -v dir="$docwork" '
  /^<!-- test: / { kind = $3; arg = $4; pending = 1; next }
  pending && /^```/ { pending = 0; inblock = 1
    if (kind == "file") { out = dir "/" arg; d = out; sub(/\/[^\/]*$/, "", d); system("mkdir -p \"" d "\"") }
    else { n++; out = sprintf("%s/block%03d-%s.sh", dir, n, arg == "-->" ? "all" : arg) }
    next }
  inblock && /^```/ { inblock = 0; close(out); next }
  inblock { print > out }
' "$doc" || fail "extracting the blocks of $doc"
ls "$docwork"/block*.sh >/dev/null 2>&1 || fail "$doc has no blocks marked to run"
# The page's commands use cc, MPIEXEC and MPICC: this build's compiler and
# MPI. A sanitized library needs its flags at link time: cc adds them, and
# CMake takes them from CFLAGS and LDFLAGS.
printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$cc" "$sanitize" >"$docwork/bin/cc"
chmod +x "$docwork/bin/cc"
doc_mpicc=''
if [ -n "$mpicc" ]; then
  doc_mpicc=$docwork/bin/mpicc-of-this-build
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$mpicc" "$sanitize" >"$doc_mpicc"
  chmod +x "$doc_mpicc"
fi
for block in "$docwork"/block*.sh; do
  case $block in
    *-mpi.sh) [ -n "$mpicc" ] || continue ;;
    *-port.sh) [ -x "$prefix/bin/ariadne-port" ] || continue ;;
  esac
  echo "--- $(basename "$block"):"
  cat "$block"
  (cd "$docwork" && env -u LD_LIBRARY_PATH PATH="$docwork/bin:$PATH" PREFIX="$prefix" MPICC="$doc_mpicc" \
    MPIEXEC="$mpiexec" CFLAGS="$sanitize" LDFLAGS="$sanitize" CMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
    sh -eu "$block") ||
    fail "the commands of $(basename "$block") from $doc"
done

echo "install test: OK"
