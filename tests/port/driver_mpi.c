/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient check of an MPI corpus program at any number of ranks: the
 * objective is replicated (an allreduce), every rank holds all inputs and
 * uses some, so the total derivative is the sum of the ranks' gradients.
 * Values must be bit-identical to the original's; the port's gradient must
 * match central finite differences of the original parallel program, and
 * the fused gradient the port's to round-off.
 */
#include <ariadne_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Each rank counts its checks and failures (every failure names its rank);
 * rank 0 prints the totals. */
static int mt_rank, mt_errors, mt_checks;

#define MT_CHECK(cond)                                                                       \
  do {                                                                                       \
    mt_checks++;                                                                             \
    if (!(cond)) {                                                                           \
      mt_errors++;                                                                           \
      fprintf(stderr, "[%d] %s:%d: check failed: %s\n", mt_rank, __FILE__, __LINE__, #cond); \
    }                                                                                        \
  } while (0)

extern int n_inputs;
extern double x_start[];
double objective(double *x);
ad_real objective_ad(ad_real *x);
ad_real objective_fd(ad_real *x);

#ifndef CORPUS_NAME
#define CORPUS_NAME "corpus"
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
  int n = n_inputs;
  double *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g), *gs[2];
  ad_real *xa = malloc((size_t)n * sizeof *xa);
  gs[0] = malloc((size_t)n * sizeof(double));
  gs[1] = malloc((size_t)n * sizeof(double));
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
    MT_CHECK(ad_value(y) == J);
    /* J is replicated: seed one copy. */
    MT_CHECK(ad_gradient(tape, mt_rank == 0 ? y : ad_const(ad_value(y)), (size_t)n, xa, g) == AD_OK);
    MPI_Allreduce(g, gs[p], n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  double gmax = 0.0;
  for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(gs[0][i]));
  for (int i = 0; i < n; i++) {
    double h = 1e-6 * fmax(1.0, fabs(x_start[i]));
    for (int k = 0; k < n; k++) x[k] = x_start[k];
    x[i] = x_start[i] + h;
    double fp = objective(x);
    x[i] = x_start[i] - h;
    double fm = objective(x);
    double fd = (fp - fm) / (2.0 * h);
    mt_checks += 2;
    if (!(fabs(gs[0][i] - fd) <= 1e-6 * fabs(fd) + 1e-7 * (1.0 + gmax))) {
      mt_errors++;
      fprintf(stderr, "[%d] %s: input %d: gradient %.17g, central differences %.17g\n", mt_rank, CORPUS_NAME, i,
              gs[0][i], fd);
    }
    if (!(fabs(gs[1][i] - gs[0][i]) <= 1e-12 * fabs(gs[0][i]) + 1e-14 * (1.0 + gmax))) {
      mt_errors++;
      fprintf(stderr, "[%d] %s: input %d: fused gradient %.17g, port %.17g\n", mt_rank, CORPUS_NAME, i, gs[1][i],
              gs[0][i]);
    }
  }
  ad_tape_destroy(tape);
  free(x);
  free(g);
  free(xa);
  free(gs[0]);
  free(gs[1]);
  int counts[2] = {mt_checks, mt_errors}, totals[2] = {0, 0};
  MPI_Reduce(counts, totals, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (mt_rank == 0) printf("port_%s: %d checks, %d failed\n", CORPUS_NAME, totals[0], totals[1]);
  int failed = 0;
  MPI_Allreduce(&mt_errors, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed ? 1 : 0;
}
