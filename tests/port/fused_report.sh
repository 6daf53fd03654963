#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# --fused never falls back silently: every assignment with two or more active
# operations is either one tape statement or listed by --report FILE with its
# reason, and stderr carries a one-line summary per file.
# usage: fused_report.sh TOOL SOURCE-DIR WORK-DIR
tool=$1
src=$2
work=$3
failed=0
fail() {
  echo "FAILED: $*" >&2
  failed=$((failed + 1))
}
rm -rf "$work"
mkdir -p "$work"

# Index macros in the operands (v[IDX(i, j)] = ... u[IDX(i - 1, j)] ...) are fused.
"$tool" --fused --no-format --report "$work/stencil.txt" -o "$work/out" "$src/corpus/stencil_idx.c" 2>"$work/err.txt" ||
  fail "stencil_idx.c: exit status $?"
[ -s "$work/stencil.txt" ] && fail "stencil_idx.c: assignments left per operation: $(cat "$work/stencil.txt")"
grep -q "stencil_idx.c: 5 of 5 assignments with two or more active operations fused$" "$work/err.txt" ||
  fail "stencil_idx.c: summary line missing or wrong: $(cat "$work/err.txt")"
[ "$(grep -c 'ad_custom(' "$work/out/stencil_idx.c")" = 5 ] || fail "stencil_idx.c: not 5 ad_custom statements"

# floor, ceil, trunc and round have a zero partial: fused like other math
# (a periodic wrap, as molecular dynamics codes write it).
cat >"$work/wrap.c" <<'EOT'
#include <math.h>
double wrap(double d, double box) { return d - box * floor(d / box + 0.5) + ceil(d) * trunc(d) - round(d); }
EOT
"$tool" --fused --no-format --report "$work/wrap.txt" -o "$work/out" "$work/wrap.c" 2>"$work/err.txt" ||
  fail "wrap.c: exit status $?"
[ -s "$work/wrap.txt" ] && fail "wrap.c: left per operation: $(cat "$work/wrap.txt")"
grep -q "= floor(ad__v" "$work/out/wrap.c" || fail "wrap.c: floor not in the fused value: $(cat "$work/out/wrap.c")"

# A variable declared at the top of a function and assigned once in an inner
# block, read only after that assignment in the block, is preaccumulated
# there; one read before it, assigned twice, or assigned in the block that
# declares it stays an ordinary variable.
"$tool" --fused --no-format --report "$work/blocks.txt" -o "$work/out" "$src/corpus/blocks.c" 2>"$work/err.txt" ||
  fail "blocks.c: exit status $?"
for v in d2 rho vel; do
  grep -q "blocks.c:[0-9]*:[0-9]*: preaccumulated '$v'" "$work/blocks.txt" || fail "blocks.c: '$v' not preaccumulated"
done
for v in e prev acc out; do
  grep -q "preaccumulated '$v'" "$work/blocks.txt" && fail "blocks.c: '$v' preaccumulated, but it is not a temporary"
done
grep -q "^ *const double rho = " "$work/out/blocks.c" || fail "blocks.c: 'rho' not declared where it is assigned"

# What stays per operation is listed, each with its line and reason.
cat >"$work/mixed.c" <<'EOT'
#include <math.h>
#define N 4
#define BUMP(i) ((i)++)
#define UPDATE(a, b) ((a) = (a) * (b) + (b) * (b))
double f(double *v, double x, double y) {
  int k = 0;
  double s = x * y + y;
  s = x > y ? x * y + s : y * y - s;
  v[k] = y;
  UPDATE(s, x);
  for (double t = x * y + x; t < 3.0; t = t * 2.0 + y) s += t;
  v[k] = s * s + x;
  return s * v[k] + x * y;
}
EOT
"$tool" --fused --no-format --report "$work/mixed.txt" -o "$work/out" "$work/mixed.c" 2>"$work/err.txt" ||
  fail "mixed.c: exit status $?"
expect() { # expect LINE REASON
  grep -q "^$work/mixed.c:$1:[0-9]*: not fused ([0-9]* active operations): $2" "$work/mixed.txt" ||
    fail "mixed.c:$1 not reported as '$2'"
}
expect 8 "a conditional expression"
expect 11 "a declaration in a for header"
expect 11 "an assignment in a for header"
[ "$(wc -l <"$work/mixed.txt")" = 3 ] || fail "mixed.c: want 3 report lines: $(cat "$work/mixed.txt")"
grep -q "mixed.c: 4 of 7 assignments with two or more active operations fused; 3 stay per operation" "$work/err.txt" ||
  fail "mixed.c: summary line missing or wrong: $(cat "$work/err.txt")"

# A compound assignment whose index has side effects inside a macro would be
# evaluated twice (a[BUMP(k)] = ad_add(a[BUMP(k)], ...)): refused, as outside one.
cat >"$work/bump.c" <<'EOT'
#define BUMP(i) ((i)++)
#define AT(v, i) ((v)[(i)])
double f(double *v, double x, double y) {
  int k = 0;
  v[BUMP(k)] += x * y;
  AT(v, k) += x * y;
  return v[0];
}
EOT
for mode in "" --fused; do
  "$tool" $mode --no-format -o "$work/out" "$work/bump.c" 2>"$work/err.txt"
  [ $? = 1 ] || fail "bump.c $mode: the side effect in a macro index is not refused"
  grep -q "bump.c:5:3: error: compound assignment to an active lvalue with side effects" "$work/err.txt" ||
    fail "bump.c $mode: no located error: $(cat "$work/err.txt")"
  [ "$(grep -c error: "$work/err.txt")" = 1 ] || fail "bump.c $mode: AT(v, k) += ... refused too: $(cat "$work/err.txt")"
done

# Temporaries are preaccumulated: not taped, listed by --report; a value
# only compared (a cutoff) costs no tape; a variable assigned again is taped.
cat >"$work/block.c" <<'EOT'
double f(double *v, const double *x, double rc) {
  double dx = x[0] - x[1];
  double r2 = dx * dx + x[2] * x[2];
  if (r2 > rc) return 0.0;
  double inv = 1.0 / r2;
  double s = x[3] * x[4];
  s = s * x[5];
  v[0] += dx * inv * s;
  v[1] -= dx * inv;
  return v[0] + v[1];
}
EOT
"$tool" --fused --no-format --report "$work/block.txt" -o "$work/out" "$work/block.c" 2>"$work/err.txt" ||
  fail "block.c: exit status $?"
for t in 2:10:dx 3:10:r2 5:10:inv; do
  grep -q "^$work/block.c:${t%:*}: preaccumulated '${t##*:}': not taped" "$work/block.txt" ||
    fail "block.c: temporary ${t##*:} not listed: $(cat "$work/block.txt")"
done
grep -q "preaccumulated 's'" "$work/block.txt" && fail "block.c: s is assigned again, yet preaccumulated"
grep -q "block.c: 3 local temporaries preaccumulated" "$work/err.txt" || fail "block.c: no summary: $(cat "$work/err.txt")"
# v[0] and v[1] are one statement each over x[0], x[1], x[2] (and s, v[i]);
# the temporaries none; s is taped per operation.
[ "$(grep -c 'ad_custom(' "$work/out/block.c")" = 2 ] || fail "block.c: not 2 ad_custom statements: $(cat "$work/out/block.c")"
grep -q "s = ad_mul(s, x\[5\]);" "$work/out/block.c" || fail "block.c: s not taped: $(cat "$work/out/block.c")"

# A file-scope static const double stays double: no partial (here log(r * t))
# is computed for it.
cat >"$work/kappa.c" <<'EOT'
#include <math.h>
static const double kappa = 1.4;
double f(double r, double t) { return 2.5 * pow(r * t, kappa) + r; }
EOT
"$tool" --fused --no-format -o "$work/out" "$work/kappa.c" 2>"$work/err.txt" || fail "kappa.c: exit status $?"
grep -q "^static const double kappa = 1.4;" "$work/out/kappa.c" || fail "kappa.c: kappa retyped: $(cat "$work/out/kappa.c")"
grep -q "log(" "$work/out/kappa.c" && fail "kappa.c: a partial with respect to the constant: $(cat "$work/out/kappa.c")"

# A loop body that leaves early after storing active values only into its
# own locals takes back what it recorded (continue, break, a final if); one
# whose every store before the exit goes to a local runs first on values.
# Bodies that store outside before the exit keep their statements.
"$tool" --fused --no-format --report "$work/cutoff.txt" -o "$work/out" "$src/corpus/cutoff.c" 2>"$work/err.txt" ||
  fail "cutoff.c: exit status $?"
taken() { # taken LINE WHAT
  grep -q "cutoff.c:$1:[0-9]*: taken back: $2" "$work/cutoff.txt" || fail "cutoff.c:$1: no 'taken back: $2'"
}
taken 45 "what the loop body recorded before this \`continue\`"
taken 45 "the loop body up to this exit is tried first on values"
taken 68 "what the loop body recorded before this \`break\`"
taken 92 "what the loop body recorded before this \`if\` when its condition is false"
taken 88 "what the loop body recorded before this \`continue\`"
taken 109 "what the loop body recorded before this \`continue\`"
for l in 37 68 88 109 122 127 133 138; do
  grep -q "cutoff.c:$l:[0-9]*: taken back: the loop body up to this exit is tried first" "$work/cutoff.txt" &&
    fail "cutoff.c:$l: tried first on values, but the body stores outside it or records nothing before"
done
for l in 37 122 127 133 138; do
  grep -q "cutoff.c:$l:[0-9]*: taken back" "$work/cutoff.txt" && fail "cutoff.c:$l: taken back, but must stay"
done
[ "$(grep -c 'ad__spec_drop' "$work/out/cutoff.c")" = 5 ] || fail "cutoff.c: not 5 drops: $(grep -c ad__spec_drop "$work/out/cutoff.c")"

# --report needs --fused.
"$tool" --report "$work/r.txt" -o "$work/out" "$work/mixed.c" 2>/dev/null
[ $? = 2 ] || fail "--report without --fused is not a usage error"

if [ "$failed" -gt 0 ]; then
  echo "fused_report: $failed failed" >&2
  exit 1
fi
echo "fused_report: all checks passed"
