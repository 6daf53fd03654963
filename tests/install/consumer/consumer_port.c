/* SPDX-License-Identifier: BSD-3-Clause */
/* The port of port_model.c (suffix _ad), generated through the installed
 * ariadne_port_sources, against the closed-form gradient. The ported header
 * declares port_model_ad: angle brackets find it first on the include path,
 * before the primal port_model.h beside this file. */
#include <ariadne.h>
#include <math.h>
#include <stdio.h>

#include <port_model.h>

double port_model(const double *x);

int main(void) {
  const double x0[2] = {1.5, 0.25};
  ad_tape *tape = ad_tape_create();
  ad_real x[2];
  double g[2];
  ad_tape_begin(tape);
  x[0] = ad_input(x0[0]);
  x[1] = ad_input(x0[1]);
  ad_real y = port_model_ad(x);
  ad_tape_end(tape);
  int ok = ad_gradient(tape, y, 2, x, g) == AD_OK;
  ok &= ad_value(y) == port_model(x0);
  ok &= fabs(g[0] - 2.0 * x0[0] * x0[1]) <= 1e-15 && fabs(g[1] - (x0[0] * x0[0] + cos(x0[1]))) <= 1e-15;
  ad_tape_destroy(tape);
  printf("consumer_port: %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
