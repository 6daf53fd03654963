/* SPDX-License-Identifier: BSD-3-Clause */
/* A function the file declares but no input defines links against double
 * code: its declaration stays double and a call with an active value is
 * reported (it was ported as ad_real, and linked against the double one). */
/* expect-line: 8 external function 'ext', which no input defines */
extern double ext(double);
double f(double x) {
  return ext(x) * x;
}
