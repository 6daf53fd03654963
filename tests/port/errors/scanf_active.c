/* SPDX-License-Identifier: BSD-3-Clause */
/* A table read from a file straight into active storage: scanf stores
 * doubles, so the report says to read into a double first. */
/* expect-line: 11 'fscanf', which stores doubles; read into a double */
#include <stdio.h>
#include <stdlib.h>

double *read_table(FILE *in, int n) {
  double *t = malloc((size_t)n * sizeof *t);
  for (int i = 0; i < n; i++)
    if (fscanf(in, "%lg", t + i) != 1) break;
  return t;
}
