/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A molecular-dynamics energy in the style of real codes: its own real type
 * (--active-type real_t) beside plain double for passive data, a
 * minimum-image wrap with floor, a Lennard-Jones pair loop with a cutoff left
 * by `continue`, a tabulated correction interpolated in a passive table,
 * explicit (double) casts where only a value is wanted, (real_t) casts of
 * integers, isnan/isinf/fpclassify guards, an integer assert calling a ported
 * function, asserts on active values (compiled in whatever the build type),
 * and static helpers in a header ported with the file.
 */
#undef NDEBUG
#include <assert.h>
#include <math.h>
#include <stdio.h>

#include "md.h"

int n_inputs = 3 * NATOMS;
real_t x_start[3 * NATOMS] = {0.0, 0.0,  0.0, 1.1, 0.1, 0.0, 0.2, 1.2, 0.1,
                              1.0, 1.1, 0.9, 3.2, 0.3, 0.2};

static const double cutoff = 2.5; /* passive parameters */
static const double box = 7.0;    /* periodic box edge */
static const double table_dr = 0.05;
static double table[64];

struct stats {
  real_t epot;
  double rmin; /* passive: only printed */
  int pairs;
};

static void fill_table(void) {
  for (int i = 0; i < 64; i++) table[i] = 0.1 * exp(-(double)i * table_dr);
}

/* A passive read-out of an active field: the cast says only the value is wanted. */
static double stats_energy(const struct stats *s) { return (double)s->epot; }

real_t objective(real_t *x) {
  fill_table();
  struct stats st = {0.0, 1e30, 0};
  int visited = 0;
  for (int i = 0; i < NATOMS; i++)
    for (int j = i + 1; j < NATOMS; j++) {
      visited++;
      real_t dr[3];
      for (int k = 0; k < 3; k++) {
        dr[k] = x[3 * j + k] - x[3 * i + k];
        dr[k] = dr[k] - box * floor(dr[k] / box + 0.5); /* minimum image */
      }
      real_t r2 = md_sq(dr[0]) + md_sq(dr[1]) + md_sq(dr[2]);
      double r2d = (double)r2;
      if (r2d > cutoff * cutoff) continue;
      if (fpclassify(r2) == FP_ZERO) continue;
      real_t r = sqrt(r2);
      if (isnan(r) || isinf(r) || !isfinite(r2)) continue;
      assert(r > 0.0 && fabs(r * r - r2) <= 1e-12 * r2 && isfinite(md_sq(r)));
      real_t inv6 = 1.0 / (r2 * r2 * r2);
      st.epot += 4.0 * (inv6 * inv6 - inv6) + md_lerp(table, table_dr, r) * (real_t)(j - i);
      if ((double)r < st.rmin) st.rmin = (double)r;
      st.pairs++;
    }
  assert(visited == md_count_pairs(NATOMS));
  assert(st.pairs > 0 && st.epot < 1e300);
  real_t scale = (real_t)NATOMS;
  return st.epot / (real_t)st.pairs * scale + (real_t)st.pairs * 0.125 * md_sq(x[0] - x[3]);
}

int main(void) {
  real_t x[3 * NATOMS];
  for (int i = 0; i < 3 * NATOMS; i++) x[i] = x_start[i];
  real_t J = objective(x);
  struct stats st = {J, 0.0, 0};
  printf("md: J = %.17g, epot %.17g\n", J, stats_energy(&st));
  return 0;
}
