/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example_util.h: what the serial examples (and the benchmark built from
 * implicit_cg's model) do the same way: memory that ends the program when
 * there is none, and integer arguments checked against their range.
 */
#ifndef ARIADNE_EXAMPLE_UTIL_H
#define ARIADNE_EXAMPLE_UTIL_H

#include <stdio.h>
#include <stdlib.h>

/* count * size zeroed bytes, or the end of the program (status 1) with a
 * message naming prog. */
static inline void *example_alloc(const char *prog, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory (%zu x %zu bytes)\n", prog, count, size);
    exit(1);
  }
  return p;
}

/* The integer s spells, or the end of the program (status 2) with a message
 * naming prog, the argument (what), its range [lo, hi] and s. */
static inline int example_parse_int(const char *prog, const char *s, int lo, int hi, const char *what) {
  char *end;
  long x = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || x < lo || x > hi) {
    fprintf(stderr, "%s: %s must be an integer in [%d, %d], got '%s'\n", prog, what, lo, hi, s);
    exit(2);
  }
  return (int)x;
}

#endif
