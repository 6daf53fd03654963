/* SPDX-License-Identifier: BSD-3-Clause */
/* The helpers of md.c: static functions of a header that is ported with it
 * (listed among the sources), a real type of the code's own. */
#ifndef PORT_MD_H
#define PORT_MD_H

typedef double real_t;

#define NATOMS 5

static inline real_t md_sq(real_t v) { return v * v; }

/* Linear interpolation in a passive table of f(r) sampled every dr. */
static real_t md_lerp(const double *tab, double dr, real_t r) {
  int i = (int)(r / dr);
  real_t t = r / dr - (real_t)i;
  return (1.0 - t) * tab[i] + t * tab[i + 1];
}

static inline int md_count_pairs(int n) { return n * (n - 1) / 2; }

#endif
