/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * From a double program to its gradient with ariadne-port: projectile.c is
 * plain double C; CMake runs ariadne-port on it at build time and compiles
 * the port, whose functions carry the suffix _ad, into this program beside
 * the original:
 *
 *   add_executable(port_gradient port_gradient.c projectile.c)
 *   ariadne_port_sources(TARGET port_gradient SOURCES projectile.c SUFFIX _ad FUSED)
 *
 * What is left to write by hand is this driver: the inputs, the seeding
 * and reading the gradient. It checks the gradient against central finite
 * differences of the original.
 */
#include <ariadne.h>
#include <math.h>
#include <stdio.h>

#include "projectile.h"

/* The port of projectile_range, generated at build time. */
ad_real projectile_range_ad(const ad_real *p);

int main(void) {
  const double p0[PROJECTILE_INPUTS] = {40.0, 0.7, 0.002};
  const char *names[PROJECTILE_INPUTS] = {"speed", "angle", "drag"};
  double R = projectile_range(p0);

  ad_tape *tape = ad_tape_create();
  ad_real p[PROJECTILE_INPUTS];
  double g[PROJECTILE_INPUTS];
  ad_tape_begin(tape);
  for (int i = 0; i < PROJECTILE_INPUTS; i++) p[i] = ad_input(p0[i]);
  ad_real r = projectile_range_ad(p);
  ad_tape_end(tape);
  int rc = ad_gradient(tape, r, PROJECTILE_INPUTS, p, g);
  if (rc != AD_OK) {
    fprintf(stderr, "ad_gradient: %s\n", ad_tape_error_message(tape));
    return 1;
  }
  printf("range %.12g m (port: %.12g m, %s)\n", R, ad_value(r), R == ad_value(r) ? "bit-identical" : "DIFFERENT");
  int ok = R == ad_value(r);
  printf("%-6s %22s %22s %10s\n", "input", "Ariadne dR/dp", "central FD", "rel.diff");
  for (int i = 0; i < PROJECTILE_INPUTS; i++) {
    double q[PROJECTILE_INPUTS] = {p0[0], p0[1], p0[2]}, h = 1e-6 * fabs(p0[i]);
    q[i] = p0[i] + h;
    double rp = projectile_range(q);
    q[i] = p0[i] - h;
    double fd = (rp - projectile_range(q)) / (2.0 * h);
    double rel = fabs(g[i] - fd) / fabs(fd);
    printf("%-6s %22.14e %22.14e %10.2e\n", names[i], g[i], fd, rel);
    ok &= rel < 1e-5;
  }
  ad_tape_destroy(tape);
  printf("port_gradient: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
