/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A 2-D finite-volume step for the compressible Euler equations, plain double
 * code written the way such codes are: a fourth-order interpolation of the
 * conserved variables to each face through local temporaries, the primitive
 * variables and the sound speed from them, a central flux with a Rusanov
 * dissipation, then the update of each cell from its four faces. The
 * benchmark compiles it as it is for the primal and ports it with
 * ariadne-port (op by op and --fused) at build time.
 *
 * Layout: q[v * ncell + c] with v = 0..3 (density, x and y momentum, total
 * energy) and c = i * nx + j on an nx x ny grid whose two outer rings are
 * ghost cells, which the step does not write.
 */
#include <math.h>

void fv_step(int nx, int ny, double dt, const double *q, double *fx, double *fy, double *qn);

static const double gamma_gas = 1.4;
static const double c12 = 1.0 / 12.0;

/* The flux through one face between cells a (minus side) and b, with the
 * cells am and bp beyond them: F(q) in direction (nx, ny), one of (1, 0) and
 * (0, 1). */
static void face_flux(const double *q, int ncell, int am, int a, int b, int bp, int nx, int ny, double *f,
                      int at, int nface) {
  const double r = c12 * (7.0 * (q[a] + q[b]) - (q[am] + q[bp]));
  const double mx = c12 * (7.0 * (q[ncell + a] + q[ncell + b]) - (q[ncell + am] + q[ncell + bp]));
  const double my = c12 * (7.0 * (q[2 * ncell + a] + q[2 * ncell + b]) - (q[2 * ncell + am] + q[2 * ncell + bp]));
  const double e = c12 * (7.0 * (q[3 * ncell + a] + q[3 * ncell + b]) - (q[3 * ncell + am] + q[3 * ncell + bp]));
  const double u = mx / r;
  const double v = my / r;
  const double un = u * nx + v * ny;
  const double p = (gamma_gas - 1.0) * (e - 0.5 * r * (u * u + v * v));
  const double c = sqrt(gamma_gas * p / r);
  const double s = 0.5 * (fabs(un) + c);
  f[at] = r * un - s * (q[b] - q[a]);
  f[nface + at] = mx * un + p * nx - s * (q[ncell + b] - q[ncell + a]);
  f[2 * nface + at] = my * un + p * ny - s * (q[2 * ncell + b] - q[2 * ncell + a]);
  f[3 * nface + at] = (e + p) * un - s * (q[3 * ncell + b] - q[3 * ncell + a]);
}

void fv_step(int nx, int ny, double dt, const double *q, double *fx, double *fy, double *qn) {
  const int ncell = nx * ny, nface = nx * ny;
  /* x faces: face (i, j) lies between cells (i, j - 1) and (i, j). */
  for (int i = 2; i < ny - 2; i++)
    for (int j = 2; j < nx - 1; j++) {
      int c = i * nx + j;
      face_flux(q, ncell, c - 2, c - 1, c, c + 1, 1, 0, fx, c, nface);
    }
  /* y faces: face (i, j) lies between cells (i - 1, j) and (i, j). */
  for (int i = 2; i < ny - 1; i++)
    for (int j = 2; j < nx - 2; j++) {
      int c = i * nx + j;
      face_flux(q, ncell, c - 2 * nx, c - nx, c, c + nx, 0, 1, fy, c, nface);
    }
  for (int v = 0; v < 4; v++)
    for (int i = 2; i < ny - 2; i++)
      for (int j = 2; j < nx - 2; j++) {
        int c = i * nx + j;
        qn[v * ncell + c] = q[v * ncell + c] - dt * (fx[v * nface + c + 1] - fx[v * nface + c]) -
                            dt * (fy[v * nface + c + nx] - fy[v * nface + c]);
      }
}
