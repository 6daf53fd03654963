/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A projectile with quadratic air drag, integrated with explicit Euler steps
 * until it lands: plain double C, the one source of truth. The example
 * port_gradient.c differentiates it through a port that CMake generates at
 * build time (ariadne_port_sources in CMakeLists.txt); this file is never
 * edited for it.
 */
#include <math.h>

#include "projectile.h"

static double drag(double speed, double cd) { return cd * speed * speed; }

/* The horizontal distance flown by a projectile launched at speed p[0] and
 * angle p[1] (radians) with drag coefficient p[2]. */
double projectile_range(const double *p) {
  double x = 0.0, y = 0.0;
  double vx = p[0] * cos(p[1]), vy = p[0] * sin(p[1]);
  const double g = 9.81, dt = 1e-3;
  double xprev = x, yprev = y;
  while (y >= 0.0) {
    double speed = sqrt(vx * vx + vy * vy);
    double a = drag(speed, p[2]);
    xprev = x;
    yprev = y;
    x += dt * vx;
    y += dt * vy;
    vx -= dt * a * vx / speed;
    vy -= dt * (g + a * vy / speed);
  }
  /* Where the last step crossed y = 0, by linear interpolation. */
  return xprev + (x - xprev) * yprev / (yprev - y);
}
