#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Build and run the C++ tests with another compiler than the build's:
#   other_compiler.sh CXX CC STD SOURCE_DIR CONFIG_INCLUDE_DIR STATIC_LIB WORK_DIR
# Warnings are errors, as in the build's own C++ tests.
set -eu
cxx=$1 cc=$2 std=$3 src=$4 cfg=$5 lib=$6 work=$7
mkdir -p "$work"
"$cc" -std=c11 -Wall -Wextra -pedantic -Werror -I"$src/include" -I"$cfg" -c "$src/tests/cxx/shared.c" -o "$work/shared.o"
"$cxx" -std="$std" -Wall -Wextra -pedantic -Werror -I"$src/include" -I"$cfg" "$src/tests/cxx/test_cxx.cpp" \
  "$work/shared.o" "$lib" -lm -o "$work/test_cxx_$std"
"$cxx" -std="$std" -Wall -Wextra -pedantic -Werror -I"$src/include" -I"$cfg" "$src/tests/cxx/test_cxx_et.cpp" \
  "$lib" -lm -o "$work/test_cxx_et_$std"
"$work/test_cxx_et_$std"
"$work/test_cxx_$std"
"$cxx" -std="$std" -Wall -Wextra -pedantic -Werror -I"$src/include" -I"$cfg" "$src/tests/cxx/test_cxx_et.cpp" \
  "$lib" -lm -o "$work/test_cxx_et_$std"
"$work/test_cxx_et_$std"
