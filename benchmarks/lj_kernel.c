/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lennard-Jones forces and energy over link cells, plain double code: atoms
 * in a periodic cubic box are sorted into cells at least a cutoff wide
 * (head/next lists, built by the caller from the positions: integer data);
 * each atom meets the atoms of its own and the 26 neighbouring cells, the
 * minimum image is taken, and a pair beyond the cutoff is left at once.
 * The benchmark compiles it as it is for the primal and ports it with
 * ariadne-port (op by op and --fused) at build time.
 */
#include <math.h>

double lj_forces(int n, double box, int ncell, const int *head, const int *next, const int *cell_of, const double *x,
                 double *f);

static const double rcut = 2.5;
static const double ecut = -0.016316891136; /* 4 (rcut^-12 - rcut^-6): the energy is zero at the cutoff */

/* The energy; f (3 n) receives the forces. Each pair is met twice (from
 * either atom), so each atom's force is its own sum and the energy counts
 * each pair half. */
double lj_forces(int n, double box, int ncell, const int *head, const int *next, const int *cell_of, const double *x,
                 double *f) {
  const double rc2 = rcut * rcut;
  const double inv_box = 1.0 / box;
  double epot = 0.0;
  for (int i = 0; i < n; i++) {
    const double xi = x[3 * i], yi = x[3 * i + 1], zi = x[3 * i + 2];
    double fx = 0.0, fy = 0.0, fz = 0.0, ei = 0.0;
    const int ci = cell_of[i];
    const int cx = ci % ncell, cy = (ci / ncell) % ncell, cz = ci / (ncell * ncell);
    for (int dz = -1; dz <= 1; dz++)
      for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
          const int c = ((cz + dz + ncell) % ncell * ncell + (cy + dy + ncell) % ncell) * ncell + (cx + dx + ncell) % ncell;
          for (int j = head[c]; j >= 0; j = next[j]) {
            if (j == i) continue;
            const double sx = xi - x[3 * j];
            const double sy = yi - x[3 * j + 1];
            const double sz = zi - x[3 * j + 2];
            const double rx = sx - box * floor(sx * inv_box + 0.5);
            const double ry = sy - box * floor(sy * inv_box + 0.5);
            const double rz = sz - box * floor(sz * inv_box + 0.5);
            const double r2 = rx * rx + ry * ry + rz * rz;
            if (r2 > rc2) continue;
            const double s2 = 1.0 / r2;
            const double s6 = s2 * s2 * s2;
            const double ff = 48.0 * s6 * (s6 - 0.5) * s2;
            fx += ff * rx;
            fy += ff * ry;
            fz += ff * rz;
            ei += 2.0 * s6 * (s6 - 1.0) - 0.5 * ecut;
          }
        }
    f[3 * i] = fx;
    f[3 * i + 1] = fy;
    f[3 * i + 2] = fz;
    epot += ei;
  }
  return epot;
}
