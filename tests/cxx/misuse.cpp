/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiled, not run, by compile_fail.sh: with MISUSE=0 it must compile;
 * with MISUSE=1..5 an operand of the wrong type, with 6..8 an expression
 * kept with auto and then recorded, must stop the compiler with
 * ariadne.hpp's one-sentence static assertion, and little else.
 */
#include <ariadne.hpp>

#include <string>

ad_real misuse(ad_real x, ad_real y);

ad_real misuse(ad_real x, ad_real y) {
  std::string s("1.0");
  (void)s;
#if MISUSE == 0
  ad_real r = x * y + 2.0;
#elif MISUSE == 1
  ad_real r = x * s;
#elif MISUSE == 2
  ad_real r = x;
  r += s;
#elif MISUSE == 3
  ad_real r = x;
  if (s < x * y) r = y;
#elif MISUSE == 4
  ad_real r = pow(x + y, s);
#elif MISUSE == 5
  ad_real r = fma(x, s, y);
#elif MISUSE == 6
  auto e = x * y;
  ad_real r = e;
#elif MISUSE == 7
  auto e = x * y + 1.0;
  ad_real r = sin(e) + y;
#elif MISUSE == 8
  auto e = x * y;
  ad_real r = y;
  r += e;
#endif
  return r;
}
