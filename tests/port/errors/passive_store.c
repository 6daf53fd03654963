/* SPDX-License-Identifier: BSD-3-Clause */
/* With only real_t active, active values stored into plain double storage
 * would lose their derivatives: a variable, a field, a parameter, a return
 * value. An explicit cast says only the value is wanted, and is ported. */
/* options: --active-type real_t */
/* expect-line: 20 an active value is stored into 'r2', of the passive type 'double' */
/* expect-line: 21 an active value is stored into 'q', of the passive type 'double' */
/* expect-line: 23 an active value is stored into the field 'energy' */
/* expect-line: 24 an active value is stored into the parameter 'scale' of 'passive_scale' */
/* expect-line: 28 an active value is stored into the return value */
/* expect: or port with --active-type double */
typedef double real_t;
struct atom {
  real_t v;
  double energy;
};
double passive_scale(double scale) { return 2.0 * scale; }
real_t pair(const real_t *dr, struct atom *a) {
  double r2 = 0.0;
  for (int k = 0; k < 3; k++) r2 += dr[k] * dr[k];
  double q = dr[0];
  double fine = (double)dr[1] + passive_scale((double)dr[2]);
  a->energy = a->v * dr[0];
  return dr[1] * passive_scale(dr[2]) + r2 + q + fine;
}
double velocity(const struct atom *a) {
  if (a->v > 1.0) return (double)a->v;
  return a->v;
}
