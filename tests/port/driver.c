/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient check of one corpus program: the original (primal) against its
 * port and its fused port, all three linked into this program (the ports
 * carry the name suffixes _ad and _fd). Values must be bit-identical; the
 * port's gradient must match central finite differences of the original,
 * and the fused gradient the port's to round-off.
 */
#include <ariadne.h>
#include <stdlib.h>

#include "../check.h"

extern int n_inputs;
extern double x_start[];
double objective(double *x);
ad_real objective_ad(ad_real *x);
ad_real objective_fd(ad_real *x);

#ifndef CORPUS_NAME
#define CORPUS_NAME "corpus"
#endif

int main(void) {
  int n = n_inputs;
  double *x = malloc((size_t)n * sizeof *x), *g[2], *fd = malloc((size_t)n * sizeof *fd);
  ad_real *xa = malloc((size_t)n * sizeof *xa);
  g[0] = malloc((size_t)n * sizeof(double));
  g[1] = malloc((size_t)n * sizeof(double));
  for (int i = 0; i < n; i++) x[i] = x_start[i];
  double J = objective(x);

  ad_tape *tape = ad_tape_create();
  ad_real (*port[2])(ad_real *) = {objective_ad, objective_fd};
  for (int p = 0; p < 2; p++) {
    ad_tape_reset(tape);
    ad_tape_begin(tape);
    for (int i = 0; i < n; i++) xa[i] = ad_input(x_start[i]);
    ad_real y = port[p](xa);
    ad_tape_end(tape);
    CHECK_SAME(ad_value(y), J);
    CHECK_INT(ad_gradient(tape, y, (size_t)n, xa, g[p]), AD_OK);
  }
  double gmax = 0.0;
  for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[0][i]));
  for (int i = 0; i < n; i++) {
    double h = 1e-6 * fmax(1.0, fabs(x_start[i]));
    for (int k = 0; k < n; k++) x[k] = x_start[k];
    x[i] = x_start[i] + h;
    double fp = objective(x);
    x[i] = x_start[i] - h;
    double fm = objective(x);
    fd[i] = (fp - fm) / (2.0 * h);
    CHECK_CONTEXT("%s: input %d", CORPUS_NAME, i);
    CHECK_CLOSE2(g[0][i], fd[i], 1e-6, 1e-7 * (1.0 + gmax));
    CHECK_CLOSE2(g[1][i], g[0][i], 1e-12, 1e-14 * (1.0 + gmax));
  }
  ad_tape_destroy(tape);
  free(x);
  free(fd);
  free(xa);
  free(g[0]);
  free(g[1]);
  return check_finish("port_" CORPUS_NAME);
}
