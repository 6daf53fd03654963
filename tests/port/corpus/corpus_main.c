/* SPDX-License-Identifier: BSD-3-Clause */
/* The entry point of the serial corpus programs that print nothing but
 * their objective: they include it after the objective (a unity include,
 * ported with each includer). It evaluates the objective at x_start, whose
 * NX values the includer defines, and prints it under the program's name,
 * PROGRAM. */
int main(void) {
  double x[NX];
  for (int i = 0; i < NX; i++) x[i] = x_start[i];
  printf("%s: J = %.17g\n", PROGRAM, objective(x));
  return 0;
}
