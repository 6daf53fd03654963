#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Differential fuzzing of ariadne-port: for each seed, fz_gen writes a random
# program in the subset the tool claims, and this script checks that
#   - the tool exits 0 in both modes (plain and --fused), or 1 with located
#     errors (file:line:col: error:), which counts the program as refused;
#   - each port built with -DARIADNE_PASSIVE prints exactly what the original
#     prints, and compiles warning-free when the original does;
#   - harness.c, linked with the original and both ports, finds the ports'
#     values bit-identical, the gradient equal to central differences, the
#     tangent sweep equal to the gradient, the fused gradient equal to the
#     port's;
#   - porting each port again changes nothing (idempotence).
# A failing program is kept in WORK/fail-SEED with what differed.
#
# usage: run.sh BUILD-DIR FIRST-SEED COUNT [GENERATOR-OPTION...]
#   environment: FZ_CC (default cc), FZ_WORK (default BUILD-DIR/tests/port/fuzz/work-FIRST[-OPTIONS]),
#   FZ_TOOL and FZ_LIBDIR (default BUILD-DIR/port/ariadne-port and BUILD-DIR), FZ_LIBNAME and
#   FZ_MPILIBNAME (the libraries' names: ariadne64 and ariadne_mpi64 with 64-bit handles), FZ_CFLAGS,
#   FZ_FORMAT=1 lets the tool run clang-format, FZ_VERBOSE=1 prints every seed,
#   FZ_TIMEOUT (seconds, default 300) bounds each command, so a deadlock fails.
set -u
if [ $# -lt 3 ]; then
  echo "usage: run.sh BUILD-DIR FIRST-SEED COUNT [GENERATOR-OPTION...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
first=$2
count=$3
shift 3
# idem-typedef and idem-fused switch on the idempotence checks of typedef and fused ports (README);
# every other option goes to the generator.
genopts=""
idem_typedef=0
idem_fused=0
for o in "$@"; do
  case $o in
  idem-typedef) idem_typedef=1 ;;
  idem-fused) idem_fused=1 ;;
  *) genopts="$genopts $o" ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
cc=${FZ_CC:-cc}
# One work directory per seed range and options, so that runs may overlap.
work=${FZ_WORK:-$build/tests/port/fuzz/work-$first$(echo "$*" | tr -c 'a-z0-9\n' '-' | sed 's/^\(.\)/-\1/')}
tool=${FZ_TOOL:-$build/port/ariadne-port}
libdir=${FZ_LIBDIR:-$build}
inc="-I$src/include -I$build/include"
lib="-L$libdir -l${FZ_LIBNAME:-ariadne} -Wl,-rpath,$libdir -lm"
# FZ_CFLAGS: flags every program is built with too (a sanitized build's, whose
# library needs its runtime in the program).
cflags="-std=c11 -O0 ${FZ_CFLAGS:-}"
warn="-Wall -Wextra -Werror"
run="timeout ${FZ_TIMEOUT:-300}"
# clang-format costs most of a port's time; FZ_FORMAT=1 runs it as a user would.
format=--no-format
[ "${FZ_FORMAT:-0}" = 1 ] && format=""

[ -x "$tool" ] || { echo "run.sh: no $tool (build the ariadne_port target)" >&2; exit 2; }
rm -rf "$work"
mkdir -p "$work"
gen=$build/tests/port/fuzz/fz_gen
if [ ! -x "$gen" ]; then
  gen=$work/fz_gen
  $cc -std=c11 -O1 "$here/gen.c" -o "$gen" -lm || exit 2
fi
$cc $cflags $inc -c "$here/harness.c" -o "$work/harness.o" || exit 2
# MPI programs (generator option mpi): built with mpicc, linked with
# libariadne_mpi, run at 1 and 2 ranks.
mpicc=${FZ_MPICC:-mpicc.mpich}
mpiexec=${FZ_MPIEXEC:-mpiexec.mpich}
mpilibdir=${FZ_MPILIBDIR:-$libdir/mpi}
case " $genopts " in
*" mpi"*)
  $mpicc $cflags $inc -DFZ_MPI -c "$here/harness.c" -o "$work/harness_mpi.o" || exit 2
  mpishow=$($mpicc -show)
  ;;
esac

programs=0
refused=0
passed=0
failed=0
classes=""

seed=$first
last=$((first + count))
while [ "$seed" -lt "$last" ]; do
  d=$work/s$seed
  mkdir -p "$d"
  programs=$((programs + 1))
  status=pass
  why=""
  # fail CLASS DETAIL: the first failure of a program is its class.
  fail() {
    if [ "$status" = pass ]; then
      status=fail
      cls=$1
      why=$2
    fi
  }
  atype=$("$gen" "$seed" "$d" $genopts) || fail generator "fz_gen exited $?"
  files="$d/p.c"
  [ -f "$d/fz_h.h" ] && files="$files $d/fz_h.h"
  tflags=""
  [ "$atype" = real_t ] && tflags="--active-type real_t"
  # The compiler, the library, the tool's flags and the launcher of this program.
  if grep -q '<mpi.h>' "$d/p.c"; then
    pcc=$mpicc
    plib="-L$mpilibdir -l${FZ_MPILIBNAME:-ariadne_mpi} -Wl,-rpath,$mpilibdir -lm"
    ttail="-- $mpishow"
    hobj=$work/harness_mpi.o
    nps="1 2"
  else
    pcc=$cc
    plib=$lib
    ttail=""
    hobj=$work/harness.o
    nps=""
  fi
  # launch EXE: runs it (at each rank count for MPI, each output headed by it).
  launch() {
    if [ -z "$nps" ]; then
      $run "$1"
      return
    fi
    for np in $nps; do
      echo "np $np"
      $run $mpiexec -n $np "$1" || return
    done
  }

  # port OUTDIR MODE-FLAGS FILES...: 0 ported, 1 refused (located errors), 2 failed.
  port() {
    outdir=$1
    mode=$2
    shift 2
    $run "$tool" $mode $tflags $format -o "$outdir" "$@" $ttail >"$outdir.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then return 0; fi
    if [ $rc = 1 ] && grep -Eq '^[^ :]+:[0-9]+:[0-9]+: error: ' "$outdir.log"; then
      return 1
    fi
    fail tool "ariadne-port $mode exited $rc: $(head -c 300 "$outdir.log")"
    return 2
  }

  if [ "$status" = pass ]; then
    # clean: the original builds warning-free, so its ports must too.
    clean=1
    wflags=$warn
    if ! $pcc $cflags $warn "$d/p.c" -o "$d/orig" -lm 2>/dev/null; then
      clean=0
      wflags=""
    fi
    if [ $clean = 1 ] || $pcc $cflags "$d/p.c" -o "$d/orig" -lm 2>"$d/orig.log"; then
      launch "$d/orig" >"$d/orig.out" || fail original "the original exits $?"
    else
      fail original "the original does not build: $(head -c 300 "$d/orig.log")"
    fi
  fi
  refusal=0
  if [ "$status" = pass ]; then
    port "$d/P" "" $files
    r1=$?
    port "$d/F" --fused $files
    r2=$?
    if [ $r1 = 1 ] || [ $r2 = 1 ]; then refusal=1; fi
    if [ $r1 != $r2 ] && [ "$status" = pass ]; then
      fail tool "the plain port exited $r1 and the fused port $r2: $(cat "$d/P.log" "$d/F.log" | head -c 300)"
    fi
  fi
  if [ "$status" = pass ] && [ $refusal = 0 ]; then
    for m in P F; do
      [ "$status" = pass ] || break
      # Warning-free when the original is: -Werror, and without it to tell a warning from an error.
      if ! $pcc $cflags $wflags -DARIADNE_PASSIVE $inc "$d/$m/p.c" -o "$d/$m.passive" $plib 2>"$d/$m.cc.log"; then
        if [ $clean = 1 ] && $pcc $cflags -DARIADNE_PASSIVE $inc "$d/$m/p.c" -o "$d/$m.passive" $plib 2>/dev/null; then
          fail warning "the $m port warns built passive (the original does not): $(grep -m1 'warning\|error' "$d/$m.cc.log")"
        else
          fail compile "the $m port does not compile passive: $(grep -m3 'error' "$d/$m.cc.log")"
        fi
      elif ! launch "$d/$m.passive" >"$d/$m.passive.out"; then
        fail passive "the $m port built passive exits $?"
      elif ! cmp -s "$d/orig.out" "$d/$m.passive.out"; then
        fail passive "the $m port built passive prints $(tr '\n' ' ' <"$d/$m.passive.out"), the original $(tr '\n' ' ' <"$d/orig.out")"
      fi
    done
  fi
  if [ "$status" = pass ] && [ $refusal = 0 ]; then
    ren="-Dfz_n=fz_n_SFX -Dfz_x0=fz_x0_SFX -Dfz_gl=fz_gl_SFX -Dmain=fz_main_SFX"
    ren="$ren -Dfz_f0=fz_f0_SFX -Dfz_f1=fz_f1_SFX -Dfz_f2=fz_f2_SFX -Dfz_f3=fz_f3_SFX"
    if ! $pcc $cflags -c -Dmain=fz_main_orig "$d/p.c" -o "$d/p.o" 2>"$d/link.log" ||
      ! $pcc $cflags -Wall -Wextra $inc -c $(echo "$ren" | sed s/SFX/ad/g) "$d/P/p.c" -o "$d/P.o" 2>>"$d/link.log" ||
      ! $pcc $cflags -Wall -Wextra $inc -c $(echo "$ren" | sed s/SFX/fd/g) "$d/F/p.c" -o "$d/F.o" 2>>"$d/link.log" ||
      ! $pcc $cflags "$d/p.o" "$d/P.o" "$d/F.o" "$hobj" -o "$d/grad" $plib 2>"$d/ld.log"; then
      # The linker's own warnings (a sanitizer runtime's, say) are not the port's.
      fail compile "the ports do not compile active: $(cat "$d/link.log" "$d/ld.log" | grep -m3 'error')"
    elif [ $clean = 1 ] && grep -q 'warning:' "$d/link.log"; then
      fail warning "a port warns built active (the original does not): $(grep -m1 'warning:' "$d/link.log")"
    else
      launch "$d/grad" >"$d/grad.out" 2>&1
      rc=$?
      if [ $rc != 0 ]; then
        c=$(sed -n 's/^FAIL \([a-z]*\):.*/\1/p' "$d/grad.out" | head -n 1)
        fail "${c:-crash}" "$(head -n 3 "$d/grad.out" | tr '\n' ' ') (exit $rc)"
      fi
      grep '^note:' "$d/grad.out" | sed "s/^/seed $seed: /"
    fi
  fi
  if [ "$status" = pass ] && [ $refusal = 0 ]; then
    pfiles="$d/P/p.c"
    [ -f "$d/P/fz_h.h" ] && pfiles="$pfiles $d/P/fz_h.h"
    ffiles="$d/F/p.c"
    [ -f "$d/F/fz_h.h" ] && ffiles="$ffiles $d/F/fz_h.h"
    if [ -n "$tflags" ] && [ $idem_typedef = 0 ]; then
      : # open defect: a port with --active-type is not idempotent (README)
    elif port "$d/PP" "" $pfiles; then
      for f in $pfiles; do
        b=$(basename "$f")
        cmp -s "$f" "$d/PP/$b" || fail idempotence "porting the port changes $b: $(diff "$f" "$d/PP/$b" | head -n 4 | tr '\n' ' ')"
      done
    elif [ "$status" = pass ]; then
      fail idempotence "the port of the port is refused: $(head -c 300 "$d/PP.log")"
    fi
    if [ $idem_fused = 0 ]; then
      : # the check is off unless asked for (idem-fused)
    elif [ "$status" = pass ] && port "$d/FF" --fused $ffiles; then
      for f in $ffiles; do
        b=$(basename "$f")
        cmp -s "$f" "$d/FF/$b" || fail idempotence-fused "porting the fused port changes $b: $(diff "$f" "$d/FF/$b" | head -n 4 | tr '\n' ' ')"
      done
    elif [ "$status" = pass ]; then
      fail idempotence-fused "the fused port of the fused port is refused: $(head -c 300 "$d/FF.log")"
    fi
  fi

  if [ "$status" = fail ]; then
    failed=$((failed + 1))
    case " $classes " in *" $cls "*) ;; *) classes="$classes $cls" ;; esac
    eval "n_$(echo "$cls" | tr -c 'a-z\n' '_')=\$((\${n_$(echo "$cls" | tr -c 'a-z\n' '_'):-0} + 1))"
    rm -rf "$work/fail-$seed"
    mv "$d" "$work/fail-$seed"
    printf '%s\n' "$why" >"$work/fail-$seed/WHY"
    echo "seed $seed: FAIL $cls: $why (kept in $work/fail-$seed)"
  elif [ $refusal = 1 ]; then
    refused=$((refused + 1))
    echo "seed $seed: refused: $(grep -m1 'error:' "$d/P.log" "$d/F.log" | head -n 1 | sed 's/^[^:]*:[^ ]*: //')"
    rm -rf "$d"
  else
    passed=$((passed + 1))
    [ "${FZ_VERBOSE:-0}" = 1 ] && echo "seed $seed: pass"
    rm -rf "$d"
  fi
  seed=$((seed + 1))
done

summary="port fuzz: seeds $first..$((last - 1)): $programs programs, $passed passed, $refused refused, $failed failed"
for c in $classes; do
  v=$(echo "$c" | tr -c 'a-z\n' '_')
  eval "k=\${n_$v}"
  summary="$summary; $c $k"
done
echo "$summary"
[ $failed = 0 ]
