/* SPDX-License-Identifier: BSD-3-Clause */
/* Included by unity.c after ops/stencil.c. */
double field_energy(const field *f) {
  double e = 0.0;
  for (int i = 0; i < f->n; i++) e += f->h * sqrt(1.0 + f->u[i] * f->u[i]) + reaction(f->u[i], 0.1);
  return e;
}
