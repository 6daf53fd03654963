/* SPDX-License-Identifier: BSD-3-Clause */
/* Consumer of an installed Ariadne: the gradient of
 *     f(x, y, z) = x y sin(z) + exp(x) / y + sqrt(z)
 * against its closed form. Exits non-zero on any mismatch. */
#include <ariadne.h>
#include <math.h>
#include <stdio.h>

static ad_real f(ad_real x, ad_real y, ad_real z) {
  return ad_add(ad_add(ad_mul(ad_mul(x, y), ad_sin(z)), ad_div(ad_exp(x), y)), ad_sqrt(z));
}

int main(void) {
  const double x = 0.7, y = 1.9, z = 2.3;
  const double want_f = x * y * sin(z) + exp(x) / y + sqrt(z);
  const double want_g[3] = {y * sin(z) + exp(x) / y, x * sin(z) - exp(x) / (y * y), x * y * cos(z) + 0.5 / sqrt(z)};
  int errors = 0;

#ifdef ARIADNE_PASSIVE
  printf("Ariadne %s, passive\n", ARIADNE_VERSION);
#else
  printf("Ariadne %s, %d-bit handles\n", ARIADNE_VERSION, (int)(8 * sizeof(ad_index)));
#endif
  ad_tape *tape = ad_tape_create();
  if (!tape) {
    fprintf(stderr, "consumer: ad_tape_create failed\n");
    return 1;
  }
  ad_real in[3];
  ad_tape_begin(tape);
  in[0] = ad_input(x);
  in[1] = ad_input(y);
  in[2] = ad_input(z);
  ad_real out = f(in[0], in[1], in[2]);
  ad_tape_end(tape);

  if (fabs(ad_value(out) - want_f) > 1e-14 * fabs(want_f)) {
    fprintf(stderr, "consumer: f = %.17g, expected %.17g\n", ad_value(out), want_f);
    errors++;
  }
#ifndef ARIADNE_PASSIVE
  double g[3];
  int rc = ad_gradient(tape, out, 3, in, g);
  if (rc != AD_OK) {
    fprintf(stderr, "consumer: ad_gradient: %s (%s)\n", ad_strerror(rc), ad_errname(rc));
    errors++;
  } else {
    for (int k = 0; k < 3; k++)
      if (fabs(g[k] - want_g[k]) > 1e-13 * fabs(want_g[k])) {
        fprintf(stderr, "consumer: g[%d] = %.17g, expected %.17g\n", k, g[k], want_g[k]);
        errors++;
      }
  }
#else
  (void)want_g;
  if (ad_gradient(tape, out, 0, in, NULL) != AD_ERR_PASSIVE_BUILD) {
    fprintf(stderr, "consumer: a passive build must answer AD_ERR_PASSIVE_BUILD\n");
    errors++;
  }
#endif
  ad_tape_destroy(tape);
  printf("consumer: %s\n", errors ? "FAILED" : "OK");
  return errors != 0;
}
