/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers a code keeps in a header as static functions: they are the
 * project's own, not a library's, and are ported only when the header is
 * given as an input (external_header.c leaves it out). */
#ifndef GRID_UTIL_H
#define GRID_UTIL_H
#include <stdlib.h>

typedef double vec3[3];

static void grid_release(void *p) { free(p); }

static void vec3_clear(vec3 v) {
  v[0] = 0.0;
  v[1] = 0.0;
  v[2] = 0.0;
}

static double vec3_norm2(const vec3 v) { return v[0] * v[0] + v[1] * v[1] + v[2] * v[2]; }
#endif
