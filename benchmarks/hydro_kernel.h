/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A small Lagrangian hydro step in the style of LULESH-like codes, written
 * once as a template on the real type: plain double for the primal, ad_real
 * through ariadne.hpp for the gradient. A structured mesh of n^3 hexahedral
 * elements on (n+1)^3 nodes; each step gathers the 8 nodes of every element,
 * computes its Jacobian, volume, velocity divergence, an ideal-gas pressure
 * and a quadratic-plus-linear artificial viscosity, updates its energy and
 * scatters corner forces to the nodes; a node loop then moves the nodes.
 * Many short-lived temporaries per element, as such codes have.
 *
 * hydro.cpp includes this file in several translation units, each inside its
 * own namespace HYDRO_NS (the recordings of ariadne.hpp differ between them).
 */
#ifndef HYDRO_NS
#error "define HYDRO_NS before including hydro_kernel.h"
#endif

#include <cmath>
#include <vector>

namespace HYDRO_NS {

template <class R> struct mesh {
  int n;                      /* elements per direction */
  std::vector<R> x, y, z;     /* node positions */
  std::vector<R> xd, yd, zd;  /* node velocities */
  std::vector<R> fx, fy, fz;  /* node forces of the step */
  std::vector<R> e;           /* element specific energy */
  std::vector<R> vol;         /* element volume of the last step */
  std::vector<double> mel;    /* element mass (passive) */
  std::vector<double> mnode;  /* node mass (passive) */
};

static const double gamma_gas = 1.4, q_quad = 1.5, q_lin = 0.3, dt = 2e-4;

inline int node_of(int n, int i, int j, int k) { return (k * (n + 1) + j) * (n + 1) + i; }

/* The 8 nodes of element (i, j, k), in the usual hexahedron order. */
inline void corners(int n, int i, int j, int k, int *c) {
  c[0] = node_of(n, i, j, k);
  c[1] = node_of(n, i + 1, j, k);
  c[2] = node_of(n, i + 1, j + 1, k);
  c[3] = node_of(n, i, j + 1, k);
  c[4] = node_of(n, i, j, k + 1);
  c[5] = node_of(n, i + 1, j, k + 1);
  c[6] = node_of(n, i + 1, j + 1, k + 1);
  c[7] = node_of(n, i, j + 1, k + 1);
}

/* Signs of the corners in the three logical directions. */
static const double sx[8] = {-1, 1, 1, -1, -1, 1, 1, -1};
static const double sy[8] = {-1, -1, 1, 1, -1, -1, 1, 1};
static const double sz[8] = {-1, -1, -1, -1, 1, 1, 1, 1};

/* One entry of the Jacobian at the element's centre: the derivative of the
 * corner values p in the logical direction whose corner signs are s. One
 * sum of 8 terms, a single expression (one statement with ariadne.hpp). */
template <class R> inline R centre_derivative(const double *s, const R *p) {
  return 0.125 * (s[0] * p[0] + s[1] * p[1] + s[2] * p[2] + s[3] * p[3] + s[4] * p[4] + s[5] * p[5] + s[6] * p[6] +
                  s[7] * p[7]);
}

/* The initial state: a unit cube, slightly distorted, with a hot centre and
 * a velocity field that compresses it a little. */
template <class R> void init(mesh<R> &m, int n, const R *e0, const R *v0) {
  int nn = (n + 1) * (n + 1) * (n + 1), ne = n * n * n;
  m.n = n;
  m.x.assign(nn, R(0.0));
  m.y = m.z = m.xd = m.yd = m.zd = m.fx = m.fy = m.fz = m.x;
  m.e.assign(ne, R(0.0));
  m.vol = m.e;
  m.mel.assign(ne, 0.0);
  m.mnode.assign(nn, 0.0);
  double h = 1.0 / n;
  for (int k = 0; k <= n; k++)
    for (int j = 0; j <= n; j++)
      for (int i = 0; i <= n; i++) {
        int a = node_of(n, i, j, k);
        m.x[a] = i * h + 0.01 * h * std::sin(1.3 * a);
        m.y[a] = j * h + 0.01 * h * std::cos(0.7 * a);
        m.z[a] = k * h;
        m.xd[a] = v0[a];
        m.yd[a] = -0.1 * (j * h - 0.5);
        m.zd[a] = -0.1 * (k * h - 0.5);
      }
  for (int el = 0; el < ne; el++) {
    m.e[el] = e0[el];
    m.mel[el] = h * h * h;
  }
  for (int el = 0; el < ne; el++) {
    int c[8];
    corners(n, el % n, (el / n) % n, el / (n * n), c);
    for (int a = 0; a < 8; a++) m.mnode[c[a]] += m.mel[el] / 8.0;
  }
}

/* One step. */
template <class R> void step(mesh<R> &m) {
  int n = m.n, ne = n * n * n, nn = (n + 1) * (n + 1) * (n + 1);
  for (int a = 0; a < nn; a++) m.fx[a] = m.fy[a] = m.fz[a] = 0.0;
  for (int el = 0; el < ne; el++) {
    int c[8];
    corners(n, el % n, (el / n) % n, el / (n * n), c);
    R px[8], py[8], pz[8], ux[8], uy[8], uz[8];
    for (int a = 0; a < 8; a++) {
      px[a] = m.x[c[a]];
      py[a] = m.y[c[a]];
      pz[a] = m.z[c[a]];
      ux[a] = m.xd[c[a]];
      uy[a] = m.yd[c[a]];
      uz[a] = m.zd[c[a]];
    }
    /* The Jacobian at the centre: d(x,y,z)/d(xi,eta,zeta). */
    R j11 = centre_derivative(sx, px);
    R j12 = centre_derivative(sy, px);
    R j13 = centre_derivative(sz, px);
    R j21 = centre_derivative(sx, py);
    R j22 = centre_derivative(sy, py);
    R j23 = centre_derivative(sz, py);
    R j31 = centre_derivative(sx, pz);
    R j32 = centre_derivative(sy, pz);
    R j33 = centre_derivative(sz, pz);
    /* Cofactors, determinant, volume (8 det for the reference cube [-1,1]^3). */
    R c11 = j22 * j33 - j23 * j32, c12 = j23 * j31 - j21 * j33, c13 = j21 * j32 - j22 * j31;
    R c21 = j13 * j32 - j12 * j33, c22 = j11 * j33 - j13 * j31, c23 = j12 * j31 - j11 * j32;
    R c31 = j12 * j23 - j13 * j22, c32 = j13 * j21 - j11 * j23, c33 = j11 * j22 - j12 * j21;
    R det = j11 * c11 + j12 * c12 + j13 * c13;
    R v = 8.0 * det;
    /* The gradient of each corner's shape function, B = J^-T dN/dxi, times the volume. */
    R bx[8], by[8], bz[8];
    for (int a = 0; a < 8; a++) {
      bx[a] = (c11 * sx[a] + c12 * sy[a] + c13 * sz[a]) * (1.0 / 8.0);
      by[a] = (c21 * sx[a] + c22 * sy[a] + c23 * sz[a]) * (1.0 / 8.0);
      bz[a] = (c31 * sx[a] + c32 * sy[a] + c33 * sz[a]) * (1.0 / 8.0);
    }
    /* Velocity divergence times volume. */
    R divv = bx[0] * ux[0] + by[0] * uy[0] + bz[0] * uz[0];
    for (int a = 1; a < 8; a++) divv += bx[a] * ux[a] + by[a] * uy[a] + bz[a] * uz[a];
    R div = divv / v;
    /* Equation of state and artificial viscosity. */
    R rho = m.mel[el] / v;
    R p = (gamma_gas - 1.0) * rho * m.e[el];
    R cs = sqrt(gamma_gas * p / rho);
    R len = cbrt(v);
    R q = 0.0;
    if (div < 0.0) q = rho * len * (q_quad * len * div * div - q_lin * cs * div);
    R pq = p + q;
    m.e[el] -= dt * pq * divv / m.mel[el];
    m.vol[el] = v;
    /* Corner forces. */
    for (int a = 0; a < 8; a++) {
      m.fx[c[a]] += pq * bx[a];
      m.fy[c[a]] += pq * by[a];
      m.fz[c[a]] += pq * bz[a];
    }
  }
  for (int a = 0; a < nn; a++) {
    double s = dt / m.mnode[a];
    m.xd[a] += s * m.fx[a];
    m.yd[a] += s * m.fy[a];
    m.zd[a] += s * m.fz[a];
    m.x[a] += dt * m.xd[a];
    m.y[a] += dt * m.yd[a];
    m.z[a] += dt * m.zd[a];
  }
}

/* The objective: internal plus kinetic energy. */
template <class R> R energy(const mesh<R> &m) {
  int ne = m.n * m.n * m.n, nn = (m.n + 1) * (m.n + 1) * (m.n + 1);
  R s = 0.0;
  for (int el = 0; el < ne; el++) s += m.mel[el] * m.e[el];
  for (int a = 0; a < nn; a++) s += 0.5 * m.mnode[a] * (m.xd[a] * m.xd[a] + m.yd[a] * m.yd[a] + m.zd[a] * m.zd[a]);
  return s;
}

#ifdef HYDRO_RECORDER
/* Record T steps from (e0, v0) on tape t (reset first) and sweep it: the
 * gradient of the energy with respect to e0 and v0 in g[0 .. ne + nn). */
inline void record_and_sweep(ad_tape *t, int n, int T, const double *e0, const double *v0, hydro_run *out) {
  int ne = n * n * n, nn = (n + 1) * (n + 1) * (n + 1);
  ad_tape_reset(t);
  double t0 = hydro_now();
  ad_tape_begin(t);
  std::vector<ad_real> in(ne + nn);
  for (int k = 0; k < ne + nn; k++) in[k] = ad_input(k < ne ? e0[k] : v0[k - ne]);
  mesh<ad_real> m;
  init(m, n, in.data(), in.data() + ne);
  for (int s = 0; s < T; s++) step(m);
  ad_real J = energy(m);
  ad_tape_end(t);
  double t1 = hydro_now();
  out->rc = ad_gradient(t, J, in.size(), in.data(), out->g);
  out->record_s = t1 - t0;
  out->reverse_s = hydro_now() - t1;
  out->J = ad_value(J);
  ad_tape_stats(t, &out->stats);
}
#endif

} // namespace HYDRO_NS

#ifdef HYDRO_RECORDER
void HYDRO_RECORDER(ad_tape *t, int n, int T, const double *e0, const double *v0, hydro_run *out) {
  HYDRO_NS::record_and_sweep(t, n, T, e0, v0, out);
}
#endif
