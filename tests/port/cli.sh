#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The command line of ariadne-port, driven exactly as documented:
#   ariadne-port [--fused] [--all-active] [--active-type NAME]... -o OUTDIR FILE.c... [-- COMPILER-FLAGS...]
# usage: cli.sh TOOL SOURCE-DIR WORK-DIR CC INCLUDE-DIR...
tool=$1
src=$2
work=$3
cc=$4
shift 4
incs=""
for d in "$@"; do incs="$incs -I$d"; done
checks=0
failed=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  checks=$((checks + 1))
  if ! "$@"; then
    failed=$((failed + 1))
    echo "FAILED: $desc" >&2
  fi
}
status_is() { # status_is WANT COMMAND...
  want_status=$1
  shift
  "$@" >"$work/out.txt" 2>"$work/err.txt"
  got=$?
  [ "$got" = "$want_status" ] || { echo "exit status $got, want $want_status: $*" >&2; cat "$work/err.txt" >&2; return 1; }
}
compiles() { # compiles FILE [FLAGS]: active and passive, warning-free
  f=$1
  shift
  $cc -std=c11 -Wall -Wextra -Werror -fsyntax-only $incs "$@" "$f" &&
    $cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -DARIADNE_PASSIVE $incs "$@" "$f"
}
rm -rf "$work"
mkdir -p "$work"

# Usage errors: status 2.
check "no arguments" status_is 2 "$tool"
check "missing -o" status_is 2 "$tool" "$src/corpus/macros.c"
check "no input" status_is 2 "$tool" -o "$work/o"
check "unknown option" status_is 2 "$tool" --frobnicate -o "$work/o" "$src/corpus/macros.c"
check "--active-type without a name" status_is 2 "$tool" -o "$work/o" "$src/corpus/macros.c" --active-type
check "missing input file" status_is 2 "$tool" -o "$work/o" "$work/no-such-file.c"
check "--help" status_is 0 "$tool" --help

# -o with several files; the outputs compile active and passive.
check "two files" status_is 0 "$tool" -o "$work/two" "$src/corpus/macros.c" "$src/corpus/cg.c"
check "macros.c written" test -f "$work/two/macros.c"
check "cg.c written" test -f "$work/two/cg.c"
check "macros.c compiles" compiles "$work/two/macros.c"
check "cg.c compiles" compiles "$work/two/cg.c"
check "SQR rewritten at the expansion" grep -q "ad_mul" "$work/two/macros.c"
check "IDX left alone" grep -q "IDX(i, j)" "$work/two/macros.c"

# Idempotent: the port of the port is the port.
check "port of the port" status_is 0 "$tool" -o "$work/again" "$work/two/macros.c" "$work/two/cg.c"
check "macros.c unchanged" cmp -s "$work/two/macros.c" "$work/again/macros.c"
check "cg.c unchanged" cmp -s "$work/two/cg.c" "$work/again/cg.c"

# Local doubles no active value reaches stay double: the timer macro on them
# is kept as written; --all-active makes them ad_real (and expands it).
check "activity" status_is 0 "$tool" -o "$work/activity" "$src/corpus/activity.c"
check "activity compiles" compiles "$work/activity/activity.c"
check "the timers stay double" grep -q "^  double t0, t1;" "$work/activity/activity.c"
check "the timer macro stays as written" grep -q "^  TIC(t0);" "$work/activity/activity.c"
check "a passive constant stays double" grep -q "^  double half = 0.5;" "$work/activity/activity.c"
check "the accumulator is active" grep -q "^  ad_real acc = " "$work/activity/activity.c"
check "a local active on one branch is active" grep -q "^  ad_real w = " "$work/activity/activity.c"
check "an address-taken local is active" grep -q "^  ad_real via = " "$work/activity/activity.c"
check "a ported function's result is active" grep -q "^  ad_real r = " "$work/activity/activity.c"
check "activity: port of the port" status_is 0 "$tool" -o "$work/activity2" "$work/activity/activity.c"
check "activity.c unchanged" cmp -s "$work/activity/activity.c" "$work/activity2/activity.c"
check "activity --fused" status_is 0 "$tool" --fused -o "$work/activity_fused" "$src/corpus/activity.c"
check "fused: the timer macro stays as written" grep -q "^  TIC(t1);" "$work/activity_fused/activity.c"
check "activity --all-active" status_is 0 "$tool" --all-active -o "$work/all_active" "$src/corpus/activity.c"
check "--all-active: the timers are ad_real" grep -q "^  ad_real t0, t1;" "$work/all_active/activity.c"
check "--all-active compiles" compiles "$work/all_active/activity.c"

# --fused output compiles warning-free too.
check "fused" status_is 0 "$tool" --fused -o "$work/fused" "$src/corpus/heat2d.c" "$src/corpus/flux.c"
check "fused heat2d compiles" compiles "$work/fused/heat2d.c"
check "fused flux compiles" compiles "$work/fused/flux.c"
# The fused port of the fused port is the fused port: its helpers (ad__f_*),
# their doubles and the ad_custom calls are code already ported.
check "fused: port of the port" status_is 0 "$tool" --fused -o "$work/fused2" "$work/fused/heat2d.c" "$work/fused/flux.c"
check "fused heat2d unchanged" cmp -s "$work/fused/heat2d.c" "$work/fused2/heat2d.c"
check "fused flux unchanged" cmp -s "$work/fused/flux.c" "$work/fused2/flux.c"
check "fused activity: port of the port" status_is 0 "$tool" --fused -o "$work/activity_fused2" "$work/activity_fused/activity.c"
check "fused activity.c unchanged" cmp -s "$work/activity_fused/activity.c" "$work/activity_fused2/activity.c"

# --active-type, repeated: both typedefs become ad_real, plain double stays.
cat >"$work/types.c" <<'EOT'
typedef double real_t;
typedef double scalar_t;
double tolerance = 1e-8;
real_t f(real_t a, scalar_t b) {
  double t = tolerance;
  return a * b + t;
}
EOT
check "--active-type twice" status_is 0 "$tool" --active-type real_t --active-type scalar_t -o "$work/types" "$work/types.c"
check "real_t active" grep -q "typedef ad_real real_t;" "$work/types/types.c"
check "scalar_t active" grep -q "typedef ad_real scalar_t;" "$work/types/types.c"
check "double stays passive" grep -q "^double tolerance = 1e-8;" "$work/types/types.c"
check "mixed arithmetic" grep -q "ad_add(ad_mul(a, b), t)" "$work/types/types.c"
check "types.c compiles" compiles "$work/types/types.c"

# Value tests, integer asserts and integer casts to the active type port
# (they were refused, or did not compile).
cat >"$work/values.c" <<'EOT'
#include <assert.h>
#include <math.h>
typedef double real_t;
struct cell { real_t u; };
static int count(void) { return 3; }
double cell_value(const struct cell *c) { return (double)c->u; }
real_t f(int n, real_t x) {
  assert(n == count());
  real_t a = (real_t)n;
  if (isnan(x) || isinf(x) || !isfinite(x) || signbit(x) || fpclassify(x) == FP_ZERO) return 0.0;
  return a * x + (real_t)(n + 1) * x / (real_t)n;
}
EOT
check "value tests, assert, casts" status_is 0 "$tool" --active-type real_t -o "$work/values" "$work/values.c"
check "the assert stays" grep -q "assert(n == count());" "$work/values/values.c"
check "isnan tests the value" grep -q "if (isnan(ad_value(x)) || isinf(ad_value(x))" "$work/values/values.c"
check "(real_t)n is a double" grep -q "real_t a = ad_const((double)n);" "$work/values/values.c"
check "(double) of an active field" grep -q "return (double)ad_value(c->u);" "$work/values/values.c"
check "values.c compiles" compiles "$work/values/values.c"

# Asserts on active values: the condition is read with ad_value in place
# (assert stringizes its argument and depends on NDEBUG: it cannot be
# expanded), ported functions in it keep their suffix; one that passes
# active arithmetic to a ported function is refused with a way out.
cat >"$work/asserts.c" <<'EOT'
#include <assert.h>
#include <math.h>
double scale(double a, double b) { return a * b; }
double run(const double *u, int n, double dt) {
  double s = 0.0;
  assert(dt > 0.0 && n > 0);
  for (int i = 0; i < n; i++) {
    assert(isfinite(u[i]) && fabs(u[i] * dt) < 1e3);
    assert(scale(u[i], dt) == scale(dt, u[i]));
    s += u[i] * dt;
  }
  return s;
}
EOT
check "asserts on active values" status_is 0 "$tool" --suffix _ad -o "$work/asserts" "$work/asserts.c"
check "a comparison reads values" grep -q "assert(ad_value(dt) > 0.0 && n > 0);" "$work/asserts/asserts.c"
check "library calls take values" grep -q "assert(isfinite(ad_value(u\[i\])) && fabs(ad_value(u\[i\]) \* ad_value(dt)) < 1e3);" "$work/asserts/asserts.c"
check "a ported call keeps its suffix" grep -q "assert(ad_value(scale_ad(u\[i\], dt)) == ad_value(scale_ad(dt, u\[i\])));" "$work/asserts/asserts.c"
check "asserts.c compiles" compiles "$work/asserts/asserts.c" -UNDEBUG
sed 's/scale(u\[i\], dt) ==/scale(u[i] * 2.0, dt) ==/' "$work/asserts.c" >"$work/assert_bad.c"
check "active arithmetic into a ported call in an assert" status_is 1 "$tool" -o "$work/assert_bad" "$work/assert_bad.c"
check "its message" grep -q "assert_bad.c:9:5: error: assert whose condition cannot be ported in place" "$work/err.txt"

# Files ported together: a header and two sources that call each other.
mkdir -p "$work/multi"
cat >"$work/multi/model.h" <<'EOT'
double model_square(double v);
double model_sum(const double *x, int n);
EOT
cat >"$work/multi/model.c" <<'EOT'
#include "model.h"
double model_square(double v) { return v * v; }
EOT
cat >"$work/multi/sum.c" <<'EOT'
#include "model.h"
double model_sum(const double *x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += model_square(x[i]) + 1.0;
  return s;
}
EOT
check "sum.c alone: model_square is external" status_is 1 "$tool" -o "$work/multi-one" "$work/multi/sum.c"
check "says external" grep -q "external function 'model_square'" "$work/err.txt"
check "three files together" status_is 0 "$tool" -o "$work/multi-out" "$work/multi/model.h" "$work/multi/model.c" "$work/multi/sum.c"
check "the header is ported" grep -q "ad_real model_square(ad_real v);" "$work/multi-out/model.h"
check "the call passes ad_real" grep -q "ad_add(model_square(x\[i\]), 1.0)" "$work/multi-out/sum.c"
check "sum.c compiles beside the ported header" compiles "$work/multi-out/sum.c"
check "model.c compiles beside the ported header" compiles "$work/multi-out/model.c"

# A header that is not self-contained is ported in the unit of the file that
# includes it; a unity build's included .c files land where its #include finds them.
mkdir -p "$work/ctx/ops"
cat >"$work/ctx/cells.h" <<'EOT'
double cell_sum(const cell *c, int n);
EOT
cat >"$work/ctx/main.c" <<'EOT'
typedef struct cell {
  double v;
} cell;
#include "cells.h"
#include "ops/sum.c"
double run(cell *c) { return 2.0 * cell_sum(c, 3); }
EOT
cat >"$work/ctx/ops/sum.c" <<'EOT'
double cell_sum(const cell *c, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += c[i].v;
  return s;
}
EOT
check "a header that needs its includer" status_is 0 "$tool" -o "$work/ctx-out" "$work/ctx/main.c" "$work/ctx/cells.h"
check "the header is ported" grep -q "ad_real cell_sum(const cell \*c, int n);" "$work/ctx-out/cells.h"
check "the included .c is written beside its #include" grep -q "s = ad_add(s, c\[i\].v)" "$work/ctx-out/ops/sum.c"
check "the includer calls it with ad_real" grep -q "ad_mul(2.0, cell_sum(c, 3))" "$work/ctx-out/main.c"
check "the unity build compiles" compiles "$work/ctx-out/main.c"

# A function ported by another run: --ported NAME, --ported-file FILE.
check "--ported" status_is 0 "$tool" --ported model_square -o "$work/multi-ported" "$work/multi/sum.c"
check "--ported: the call passes ad_real" grep -q "ad_add(model_square(x\[i\]), 1.0)" "$work/multi-ported/sum.c"
printf '# ported by the model run\n  model_square  \n\n' >"$work/ported.txt"
rm -rf "$work/multi-ported"
check "--ported-file" status_is 0 "$tool" --ported-file "$work/ported.txt" -o "$work/multi-ported" "$work/multi/sum.c"
check "--ported-file: the call passes ad_real" grep -q "ad_add(model_square(x\[i\]), 1.0)" "$work/multi-ported/sum.c"
check "--ported-file missing" status_is 2 "$tool" --ported-file "$work/no-such-file" -o "$work/o" "$work/multi/sum.c"
printf 'model square\n' >"$work/bad-ported.txt"
check "--ported-file with a line that is no name" status_is 2 "$tool" --ported-file "$work/bad-ported.txt" -o "$work/o" "$work/multi/sum.c"
# A function an input defines but a header that is not an input declares:
# that declaration would stay double and conflict with the port.
mkdir -p "$work/clock"
printf 'extern double now(void);\n' >"$work/clock/clock.h"
printf '#include "clock.h"\ndouble elapsed(double t0) { double t = now(); return t - t0; }\n' >"$work/clock/a.c"
printf '#include "clock.h"\ndouble now(void) { return 1.0; }\n' >"$work/clock/b.c"
check "declared in a header that is not an input" status_is 1 "$tool" -o "$work/clock-out" "$work/clock/a.c" "$work/clock/b.c"
check "the call names the header" grep -q "a.c:2:[0-9]*: error: 'now' is ported (an input defines it), but it is declared in .*clock.h, which is not an input" "$work/err.txt"
check "the definition names the header" grep -q "b.c:2:[0-9]*: error: 'now' is ported" "$work/err.txt"
check "with the header as an input" status_is 0 "$tool" -o "$work/clock-out" "$work/clock/a.c" "$work/clock/b.c" "$work/clock/clock.h"
check "the header's declaration is ported" grep -q "extern ad_real now(void);" "$work/clock-out/clock.h"
check "the ported pair compiles" compiles "$work/clock-out/a.c"
# A function only declared keeps its double declaration (--keep-going writes it).
check "declared only" status_is 1 "$tool" --keep-going -o "$work/declared" "$src/errors/external_declared.c"
check "its declaration stays double" grep -q "^extern double ext(double);" "$work/declared/external_declared.c"
check "the caller is ported" grep -q "^ad_real f(ad_real x) {" "$work/declared/external_declared.c"
# --active-type names a type the inputs use: a macro (#define DTYPE double)
# or a typo would port nothing, which is reported.
printf '#define DTYPE double\nDTYPE twice(DTYPE x) { return 2.0 * x; }\n' >"$work/dtype.c"
check "--active-type naming a macro" status_is 1 "$tool" --active-type DTYPE -o "$work/dtype" "$work/dtype.c"
check "says no type of that name" grep -q "error: --active-type DTYPE: no type of that name is used by the inputs" "$work/err.txt"
# A type macro names its type: with double active, every declaration spelled
# with it that holds active data is ported there (the definition stays, for a
# DTYPE no active value reaches), also when the macro comes from a header that
# is not an input; with --active-type real_t, so is `typedef REAL real_t;`.
mkdir -p "$work/tmacro/inc"
printf '#define DTYPE double\n' >"$work/tmacro/inc/prec.h"
cat >"$work/tmacro/t.c" <<'EOT'
#include <stdlib.h>
#include "prec.h"
struct pt { DTYPE x; int id; };
static DTYPE sq(DTYPE v) { return v * v; }
DTYPE energy(const DTYPE *u, int n) {
  DTYPE scale = 0.5;
  DTYPE *w = (DTYPE *)malloc((size_t)n * sizeof(DTYPE));
  struct pt p = {u[0], 1};
  DTYPE e = sq(p.x) * (DTYPE)n;
  for (int i = 0; i < n; i++) w[i] = scale * u[i];
  for (int i = 0; i < n; i++) e += sq(w[i]);
  free(w);
  return e;
}
EOT
check "type macro" status_is 0 "$tool" -o "$work/tmacro/out" "$work/tmacro/t.c" -- -I"$work/tmacro/inc"
check "type macro: a field" grep -q "^  ad_real x;" "$work/tmacro/out/t.c"
check "type macro: parameters and returns" grep -q "^static ad_real sq(ad_real v) {" "$work/tmacro/out/t.c"
check "type macro: a pointer, a cast and sizeof" grep -q "^  ad_real \*w = (ad_real \*)malloc((size_t)n \* sizeof(ad_real));" "$work/tmacro/out/t.c"
check "type macro: a passive local stays" grep -q "^  DTYPE scale = 0.5;" "$work/tmacro/out/t.c"
check "type macro: compiles" compiles "$work/tmacro/out/t.c" -I"$work/tmacro/inc"
check "type macro: port of the port" status_is 0 "$tool" -o "$work/tmacro/again" "$work/tmacro/out/t.c" -- -I"$work/tmacro/inc"
check "type macro: unchanged" cmp -s "$work/tmacro/out/t.c" "$work/tmacro/again/t.c"
# A type macro that names another (#define REAL DTYPE) names the same type.
cat >"$work/tmacro/chain.c" <<'EOT'
#include <math.h>
#define DTYPE double
#define REAL DTYPE
REAL f(const REAL *x, int n) {
  REAL s = 0.0;
  for (int i = 0; i < n; i++) s += sin(x[i]) * x[i];
  return s;
}
EOT
check "a macro naming a type macro" status_is 0 "$tool" -o "$work/tmacro/out" "$work/tmacro/chain.c"
check "its declarations are ported" grep -q "^ad_real f(const ad_real \*x, int n) {" "$work/tmacro/out/chain.c"
check "chain.c compiles" compiles "$work/tmacro/out/chain.c"
# The active type passed to a macro (ALLOC(double, n), ALLOC(DTYPE, n)) would
# size and cast ad_real data as double: the invocation is expanded and ported.
cat >"$work/tmacro/alloc.c" <<'EOT'
#include <stdlib.h>
#define DTYPE double
#define ALLOC(T, n) (T *)malloc((size_t)(n) * sizeof(T))
DTYPE sum2(const DTYPE *x, int n) {
  DTYPE *u = ALLOC(DTYPE, n);
  double *v = ALLOC(double, n);
  DTYPE s = 0;
  for (int i = 0; i < n; i++) {
    u[i] = x[i] * x[i];
    v[i] = u[i];
    s += v[i];
  }
  free(u);
  free(v);
  return s;
}
EOT
check "a type passed to a macro" status_is 0 "$tool" -o "$work/tmacro/out" "$work/tmacro/alloc.c"
check "its expansion sizes ad_real" test "$(grep -c 'ad_real \*)malloc((size_t)(n) \* sizeof(ad_real))' "$work/tmacro/out/alloc.c")" = 2
check "alloc.c compiles" compiles "$work/tmacro/out/alloc.c"
printf '#define REAL double\ntypedef REAL real_t;\nreal_t twice(real_t x, REAL c) { return c * x; }\n' >"$work/tmacro/r.c"
check "typedef of a type macro" status_is 0 "$tool" --active-type real_t -o "$work/tmacro/out" "$work/tmacro/r.c"
check "the typedef is ported" grep -q "^typedef ad_real real_t;" "$work/tmacro/out/r.c"
check "a REAL parameter stays passive" grep -q "^real_t twice(real_t x, REAL c)" "$work/tmacro/out/r.c"
check "r.c compiles" compiles "$work/tmacro/out/r.c"
# (real_t)d of a passive double in a passive macro's argument is written
# (double)d, the macro kept; a cast in the macro's body expands it.
cat >"$work/tmacro/cast.c" <<'EOT'
typedef double real_t;
#define SQ(a) ((a) * (a))
#define TWICE_R(a) ((real_t)(a) * 2.0)
real_t f(real_t x, double d) {
  double e = SQ((real_t)d);
  return x * SQ((real_t)d) + SQ(x + (real_t)e) * TWICE_R(d);
}
EOT
check "cast in a macro argument" status_is 0 "$tool" --active-type real_t -o "$work/tmacro/out" "$work/tmacro/cast.c"
check "the macro is kept, the cast is (double)" grep -q "^  double e = SQ((double)d);" "$work/tmacro/out/cast.c"
check "cast.c compiles" compiles "$work/tmacro/out/cast.c"
printf 'typedef double real_t;\nreal_t twice(real_t x) { return 2.0 * x; }\n' >"$work/realt.c"
check "--active-type naming a typedef" status_is 0 "$tool" --active-type real_t -o "$work/realt" "$work/realt.c"
# Static functions of a project header: reported while the header is left
# out (errors/external_header.c), ported when it is given with its includer.
check "header given with its includer" status_is 0 "$tool" -o "$work/hdr" "$src/errors/external_header.c" "$src/errors/grid_util.h"
check "the header's helper is ported" grep -q "^static void vec3_clear(vec3 v) {" "$work/hdr/grid_util.h"
check "its typedef is ported" grep -q "^typedef ad_real vec3\[3\];" "$work/hdr/grid_util.h"

# OpenMP: the tape is per thread, so pragmas are kept for the passive build only.
cat >"$work/omp.c" <<'EOT'
double sum(const double *x, int n) {
  double s = 0.0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
EOT
check "openmp" status_is 0 "$tool" -o "$work/omp" "$work/omp.c"
check "pragma kept for the passive build" grep -B1 "^#pragma omp parallel for" "$work/omp/omp.c" | grep -q "^#ifdef ARIADNE_PASSIVE"
check "openmp port compiles" compiles "$work/omp/omp.c" -fopenmp

# Flags after --, and from a compilation database with -p.
mkdir -p "$work/inc"
echo "#define SCALE 3.0" >"$work/inc/scale.h"
cat >"$work/flags.c" <<'EOT'
#ifndef NEED_FLAG
#error NEED_FLAG is not defined
#endif
#include "scale.h"
double g(double x) { return SCALE * x; }
EOT
check "without its flags" status_is 1 "$tool" -o "$work/flags" "$work/flags.c"
check "says it does not compile" grep -q "error: the file does not compile" "$work/err.txt"
check "flags after --" status_is 0 "$tool" -o "$work/flags" "$work/flags.c" -- -DNEED_FLAG "-I$work/inc"
check "flags.c written" grep -q "ad_mul(SCALE, x)" "$work/flags/flags.c"
mkdir -p "$work/build"
cat >"$work/build/compile_commands.json" <<EOT
[{"directory": "$work", "file": "$work/flags.c",
  "command": "cc -DNEED_FLAG -Iinc -O2 -c $work/flags.c -o flags.o"}]
EOT
rm -rf "$work/flags"
check "-p BUILD-DIR" status_is 0 "$tool" -p "$work/build" -o "$work/flags" "$work/flags.c"
check "flags.c written from -p" grep -q "ad_mul(SCALE, x)" "$work/flags/flags.c"
check "-p without a database" status_is 2 "$tool" -p "$work/inc" -o "$work/flags" "$work/flags.c"

# Every construct that is reported: status 1, file:line:col: error: and the
# expected words, nothing written; --keep-going writes anyway. In each file,
# `/* expect: WORDS */` must be said somewhere, `/* expect-line: N WORDS */`
# at line N, and `/* options: ... */` are the tool's options for the file.
mpiflags=""
if command -v mpicc >/dev/null 2>&1; then mpiflags=$(mpicc -show); fi
said_at() { # said_at LINE WORDS: an error at line LINE of $f says WORDS
  grep "^$f:$1:[0-9]*: error: " "$work/err.txt" | grep -qF "$2"
}
for f in "$src"/errors/*.c; do
  name=$(basename "$f")
  opts=$(sed -n 's|^/\* options: \(.*\) \*/$|\1|p' "$f")
  flags=""
  case $name in mpi_*) [ -n "$mpiflags" ] || continue; flags=$mpiflags ;; esac
  rm -rf "$work/err"
  # shellcheck disable=SC2086
  check "$name: status 1" status_is 1 "$tool" $opts -o "$work/err" "$f" -- $flags
  check "$name: located diagnostic" grep -q "^$f:[0-9]*:[0-9]*: error: " "$work/err.txt"
  sed -n 's|^/\* expect: \(.*\) \*/$|\1|p' "$f" >"$work/want.txt"
  while IFS= read -r want; do
    check "$name: says '$want'" grep -qF "$want" "$work/err.txt"
  done <"$work/want.txt"
  sed -n 's|^/\* expect-line: \([0-9]*\) \(.*\) \*/$|\1 \2|p' "$f" >"$work/want.txt"
  while IFS= read -r want; do
    check "$name: line ${want%% *} says '${want#* }'" said_at "${want%% *}" "${want#* }"
  done <"$work/want.txt"
  check "$name: nothing written" test ! -e "$work/err/$name"
done
check "--keep-going" status_is 1 "$tool" --keep-going -o "$work/kg" "$src/errors/union.c"
check "--keep-going writes" test -f "$work/kg/union.c"
# A macro that cannot be expanded: reported, and the rest still written.
cat >"$work/paste.c" <<'EOT'
#define ADD(a, b) (a##_v + b)
double f(double x_v, double y) { return ADD(x, y) * y; }
double g(double x) { return x * x; }
EOT
check "--keep-going with a macro that cannot be expanded" status_is 1 "$tool" --keep-going -o "$work/kg" "$work/paste.c"
check "says the macro cannot be expanded" grep -q "cannot be expanded in place" "$work/err.txt"
check "--keep-going writes the rest" grep -q "ad_mul(x, x)" "$work/kg/paste.c"

# Idempotent with --active-type: the typedef is ad_real in the output.
check "port of the port, --active-type" status_is 0 "$tool" --active-type real_t --active-type scalar_t -o "$work/types-again" "$work/types/types.c"
check "types.c unchanged" cmp -s "$work/types/types.c" "$work/types-again/types.c"

# The include goes before the first use, not after the last #include.
cat >"$work/late.c" <<'EOT'
static double scale = 2.0;
#include <math.h>
double h(double x) { return scale * sqrt(x); }
EOT
check "an #include after code" status_is 0 "$tool" -o "$work/late" "$work/late.c"
check "ariadne.h before the first declaration" sh -c "head -1 '$work/late/late.c' | grep -q '^#include <ariadne.h>'"
check "late.c compiles" compiles "$work/late/late.c"

# mpicc -show's words anywhere among the flags; a file that does not parse
# reported once.
if [ -n "$mpiflags" ]; then
  cat >"$work/mpiflags.c" <<'EOT'
#include <mpi.h>
double total(double *v, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += v[i];
  double g = 0.0;
  int ierr = MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return ierr == MPI_SUCCESS ? g : 0.0;
}
EOT
  # shellcheck disable=SC2086
  check "mpicc -show after other flags" status_is 0 "$tool" -o "$work/mpiflags" "$work/mpiflags.c" -- -std=c99 -DX=1 $mpiflags
  check "an initializer gets AD_MPI_REAL" grep -q "int ierr = ad_mpi_allreduce(&s, &g, 1, AD_MPI_REAL, MPI_SUM" "$work/mpiflags/mpiflags.c"
fi
# --suffix renames what has external linkage only: a function declared static
# and defined later without the keyword keeps its name at both, so its calls
# (and a pointer taken to it) still find it.
cat >"$work/linkage.c" <<'EOT'
static double half(double v);
static double (*pick)(double) = half;
double twice_half(double v) { return 2.0 * pick(v) + half(v); }
double half(double v) { return 0.5 * v; }
EOT
check "--suffix with a static function" status_is 0 "$tool" --suffix _ad -o "$work/linkage" "$work/linkage.c"
check "its definition keeps the name" grep -q "^ad_real half(ad_real v)" "$work/linkage/linkage.c"
check "the external function is renamed" grep -q "^ad_real twice_half_ad(ad_real v)" "$work/linkage/linkage.c"
check "linkage.c compiles" compiles "$work/linkage/linkage.c"
# A global that one input defines and another reads through a header's
# extern declaration gets the suffix in both (and in the header).
mkdir -p "$work/glob"
cat >"$work/glob/count.h" <<'EOT'
extern int evaluations;
double square(double v);
EOT
cat >"$work/glob/count.c" <<'EOT'
#include "count.h"
int evaluations = 0;
double square(double v) { evaluations++; return v * v; }
EOT
cat >"$work/glob/use.c" <<'EOT'
#include "count.h"
double quartic(double v) { evaluations++; return square(square(v)); }
EOT
check "--suffix with a global of another input" status_is 0 "$tool" --suffix _ad -o "$work/glob/out" "$work/glob/count.c" "$work/glob/use.c" "$work/glob/count.h"
check "the reader renames it" grep -q "evaluations_ad++" "$work/glob/out/use.c"
check "the header renames it" grep -q "extern int evaluations_ad;" "$work/glob/out/count.h"
check "use.c compiles" compiles "$work/glob/out/use.c"
echo "int broken(void) { return undeclared; }" >"$work/broken.c"
check "a file that does not compile, with another" status_is 1 "$tool" -o "$work/broken" "$work/broken.c" "$work/late.c"
check "its message once" test "$(grep -c "broken.c:1:" "$work/err.txt")" = 1

echo "port_cli: $checks checks, $failed failed"
[ "$failed" = 0 ]
