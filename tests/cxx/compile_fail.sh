#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Readable errors for wrong operand types: compile tests/cxx/misuse.cpp once
# as it should compile (MISUSE=0, active and passive), then once per misuse, each of which must
# fail with ariadne.hpp's static assertion and at most a few error lines:
# an operand of a wrong type (1-5), an expression kept with auto (6-8).
#   compile_fail.sh CXX SOURCE_DIR CONFIG_INCLUDE_DIR
set -u
cxx=$1 src=$2 cfg=$3
flags="-std=c++17 -fsyntax-only -I$src/include -I$cfg"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
if ! "$cxx" $flags -DMISUSE=0 "$src/tests/cxx/misuse.cpp" >"$out" 2>&1; then
  echo "compile_fail: the correct use does not compile:"; cat "$out"; exit 1
fi
if ! "$cxx" $flags -DARIADNE_PASSIVE -DMISUSE=0 "$src/tests/cxx/misuse.cpp" >"$out" 2>&1; then
  echo "compile_fail: the correct use does not compile passive:"; cat "$out"; exit 1
fi
for k in 1 2 3 4 5 6 7 8; do
  want="an operand of an ad_real operator or function must be"
  [ $k -ge 6 ] && want="cannot be recorded later"
  if "$cxx" $flags -DMISUSE=$k "$src/tests/cxx/misuse.cpp" >"$out" 2>&1; then
    echo "compile_fail: misuse $k compiled"; fail=1; continue
  fi
  if ! grep -q "$want" "$out"; then
    echo "compile_fail: misuse $k without the static assertion:"; cat "$out"; fail=1; continue
  fi
  errors=$(grep -c "error" "$out")
  if [ "$errors" -gt 3 ]; then
    echo "compile_fail: misuse $k gives $errors error lines:"; cat "$out"; fail=1
  fi
done
[ $fail = 0 ] && echo "compile_fail: every misuse refused with the static assertion"
exit $fail
