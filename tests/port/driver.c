/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gradient check of one corpus program: the original (primal) against its
 * port and its fused port, all three linked into this program (the ports
 * carry the name suffixes _ad and _fd). Values must be bit-identical; the
 * port's gradient must match central finite differences of the original,
 * and the fused gradient the port's to round-off.
 *
 * Built with CORPUS_MPI for an MPI program, run at any number of ranks: the
 * objective is replicated (an allreduce), every rank holds all inputs and
 * uses some, so the total derivative is the sum of the ranks' gradients and
 * the differences are those of the whole parallel program. Each rank counts
 * its checks (every failure names its rank); rank 0 prints the totals.
 */
#ifdef CORPUS_MPI
#include <ariadne_mpi.h>
#else
#include <ariadne.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "../check.h"

extern int n_inputs;
extern double x_start[];
double objective(double *x);
ad_real objective_ad(ad_real *x);
ad_real objective_fd(ad_real *x);

#ifndef CORPUS_NAME
#define CORPUS_NAME "corpus"
#endif

/* The gradient of the whole program: the sum of the ranks' gradients. */
static void sum_over_ranks(const double *g, double *total, int n) {
#ifdef CORPUS_MPI
  MPI_Allreduce(g, total, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
  memcpy(total, g, (size_t)n * sizeof *g);
#endif
}

/* The summary line (the checks of all ranks) and the exit status. */
static int finish(int rank) {
#ifdef CORPUS_MPI
  long counts[2] = {check__count, check__failed}, totals[2] = {0, 0};
  MPI_Allreduce(counts, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("port_%s: %ld checks, %ld failed\n", CORPUS_NAME, totals[0], totals[1]);
  MPI_Finalize();
  return totals[1] ? 1 : 0;
#else
  (void)rank;
  return check_finish("port_" CORPUS_NAME);
#endif
}

int main(int argc, char **argv) {
  int rank = 0;
#ifdef CORPUS_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#else
  (void)argc;
  (void)argv;
#endif
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
    CHECK_CONTEXT("%s on rank %d: %s", CORPUS_NAME, rank, p ? "fused port" : "port");
    ad_tape_reset(tape);
    ad_tape_begin(tape);
    for (int i = 0; i < n; i++) xa[i] = ad_input(x_start[i]);
    ad_real y = port[p](xa);
    ad_tape_end(tape);
    CHECK_SAME(ad_value(y), J);
    /* J is replicated over the ranks: seed one copy. */
    CHECK_INT(ad_gradient(tape, rank == 0 ? y : ad_const(ad_value(y)), (size_t)n, xa, g), AD_OK);
    sum_over_ranks(g, gs[p], n);
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
    CHECK_CONTEXT("%s on rank %d: input %d", CORPUS_NAME, rank, i);
    CHECK_CLOSE2(gs[0][i], fd, 1e-6, 1e-7 * (1.0 + gmax));
    CHECK_CLOSE2(gs[1][i], gs[0][i], 1e-12, 1e-14 * (1.0 + gmax));
  }
  ad_tape_destroy(tape);
  free(x);
  free(g);
  free(xa);
  free(gs[0]);
  free(gs[1]);
  return finish(rank);
}
