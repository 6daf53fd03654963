/* SPDX-License-Identifier: BSD-3-Clause */
/* The real type of type_macro.c, spelled as a macro (as many older codes
 * do), and a helper and a struct written with it. Ported with its source. */
#ifndef PORT_TYPE_MACRO_H
#define PORT_TYPE_MACRO_H

#define DTYPE double

typedef struct particle {
  DTYPE pos[2];
  DTYPE mass;
  int id;
} particle;

static inline DTYPE tm_norm2(const DTYPE *v) { return v[0] * v[0] + v[1] * v[1]; }

#endif
