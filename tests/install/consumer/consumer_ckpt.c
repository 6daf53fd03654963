/* SPDX-License-Identifier: BSD-3-Clause */
/* Consumer of an installed Ariadne: a checkpointed loop with the passive
 * twin of its step (consumer_ckpt_step.c built a second time with
 * Ariadne::passive). The gradient with the twin must equal the one without
 * it bit for bit, and central differences of the twin's loop. */
#include <ariadne_checkpoint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 4
#define STEPS 40

int ckpt_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p);
AD_CKPT_TWIN_DECL(ckpt_step);

static double J_passive(const double *x) {
  double u[N], J = 0.0;
  memcpy(u, x, sizeof u);
  for (int64_t i = 0; i < STEPS; i++) {
    size_t n = N, pb = 0;
    ckpt_step_passive(NULL, i, &n, u, &pb, NULL);
  }
  for (int k = 0; k < N; k++) J += u[k] * u[k];
  return J;
}

static int gradient(int twin, const double *x0, double *g) {
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = STEPS;
  o.snapshots = 3;
  if (twin) o.step_passive = ckpt_step_passive;
  ad_tape *t = ad_tape_create();
  ad_real x[N], u[N];
  ad_tape_begin(t);
  for (int k = 0; k < N; k++) x[k] = u[k] = ad_input(x0[k]);
  int rc = ad_checkpoint_loop(&o, ckpt_step, NULL, N, u, 0, NULL);
  ad_real J = ad_dot(N, u, u);
  ad_tape_end(t);
  if (rc == AD_OK) rc = ad_gradient(t, J, N, x, g);
  if (rc != AD_OK) fprintf(stderr, "consumer_ckpt: %s\n", ad_tape_error_message(t));
  ad_tape_destroy(t);
  return rc;
}

int main(void) {
  const double x0[N] = {0.3, 0.7, -0.4, 1.1};
  double g0[N], g1[N];
  int errors = gradient(0, x0, g0) != AD_OK;
  errors += gradient(1, x0, g1) != AD_OK;
  for (int k = 0; k < N && !errors; k++) {
    double xp[N], xm[N], h = 1e-6;
    memcpy(xp, x0, sizeof xp);
    memcpy(xm, x0, sizeof xm);
    xp[k] += h;
    xm[k] -= h;
    double fd = (J_passive(xp) - J_passive(xm)) / (2 * h);
    if (memcmp(&g0[k], &g1[k], sizeof g0[k]) != 0 || fabs(g1[k] - fd) > 1e-7 * (1.0 + fabs(fd))) {
      fprintf(stderr, "consumer_ckpt: g[%d] = %.17g with the twin, %.17g without, %.17g by differences\n", k, g1[k],
              g0[k], fd);
      errors++;
    }
  }
  printf("consumer_ckpt: checkpointed gradient with a passive twin %s\n", errors ? "FAILED" : "ok");
  return errors != 0;
}
