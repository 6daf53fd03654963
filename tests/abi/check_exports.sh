#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shared libraries export the public API and only the internal symbols
# that the inline operations of ariadne.h need; a build with 64-bit handles
# has its own library names. Arguments: index64 (ON/OFF), then the libraries.
set -eu
index64=$1
shift
allowed='^(ad__rec|ad__reg|ad__need|ad__custom_n|ad__fwd|ad__fwd1|ad__fwd2)$'
status=0
for lib in "$@"; do
  [ -f "$lib" ] || { echo "no such library: $lib" >&2; exit 1; }
  syms=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
  extra=$(printf '%s\n' "$syms" | grep '^ad__' | grep -Ev "$allowed" || true)
  if [ -n "$extra" ]; then
    echo "$lib exports internal symbols:" $extra >&2
    status=1
  fi
  other=$(printf '%s\n' "$syms" | grep -Ev '^(ad_|_init$|_fini$|_edata$|_end$|__bss_start$)' || true)
  if [ -n "$other" ]; then
    echo "$lib exports symbols outside the ad_ namespace:" $other >&2
    status=1
  fi
  printf '%s\n' "$syms" | grep -q '^ad_tape_create$' || { echo "$lib does not export ad_tape_create" >&2; status=1; }
  base=$(basename "$lib")
  case $index64 in
    ON) case $base in *64.so*) ;; *) echo "$base: a 64-bit-handle build must have its own name (…64.so)" >&2; status=1 ;; esac ;;
    *) case $base in *64.so*) echo "$base: a 32-bit-handle build is named without 64" >&2; status=1 ;; esac ;;
  esac
  soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
  echo "$base: soname $soname, $(printf '%s\n' "$syms" | grep -c '^ad_') ad_ symbols exported"
done
exit $status
