/* SPDX-License-Identifier: BSD-3-Clause */
/* Included by unity.c: uses its field type. */
static double reaction(double v, double r) { return r * v * (1.0 - v); }

void field_step(field *f, double kappa, double r) {
  double c = kappa * f->h * f->h * (N + 1) * (N + 1);
  for (int i = 0; i < f->n; i++) {
    double l = i > 0 ? f->u[i - 1] : 0.0, rt = i < f->n - 1 ? f->u[i + 1] : 0.0;
    f->w[i] = f->u[i] + c * (l - 2.0 * f->u[i] + rt) + reaction(f->u[i], r);
  }
  for (int i = 0; i < f->n; i++) f->u[i] = f->w[i];
}
