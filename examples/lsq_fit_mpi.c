/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lsq_fit_mpi: a data-parallel nonlinear least-squares fit.
 *
 * The model y(t) = a exp(-b t) + c sin(d t) is fitted to M noisy samples of
 * it. The samples are spread over the ranks in contiguous blocks: each rank
 * makes (deterministically) and owns only its own block. One evaluation of
 * the loss
 *
 *     L(a, b, c, d) = (1/M) sum_i (y(t_i) - y_i)^2
 *
 * broadcasts the parameters from rank 0 (ad_mpi_bcast), sums the squared
 * residuals of each block locally and adds the blocks up with
 * ad_mpi_allreduce. Recording this and sweeping it backwards gives dL/dp on
 * rank 0: the reverse of the allreduce hands every block its share of the
 * adjoint, and the reverse of the broadcast adds the blocks' parameter
 * adjoints up on rank 0.
 *
 * Rank 0 runs gradient descent with an adaptive step (grow it after a step
 * that lowered the loss, halve it and retry from the last good point after
 * one that did not). Every iteration records a fresh tape into the memory of
 * the previous one (ad_tape_reset). ad_mpi_check_gradient checks the
 * gradient at the starting point against central finite differences of the
 * parallel loss.
 *
 * Usage: mpiexec -n P lsq_fit_mpi [iterations]     (at most; default 2000)
 *
 * Built with -DARIADNE_PASSIVE there is no tape: the descent then uses the
 * finite-difference gradient, and the check is skipped.
 */
#include <ariadne_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"

#define NPAR 4
#define SAMPLES 1200
#define NOISE 0.05

static const double TRUE_P[NPAR] = {2.0, 0.7, 0.5, 3.0};
static const double START_P[NPAR] = {1.0, 0.3, 1.0, 2.6};
static const char *const NAMES[NPAR] = {"a", "b", "c", "d"};

/* This rank's samples: global indices [first, first + count). */
typedef struct data {
  MPI_Comm comm;
  int rank, size;
  int first, count;
  double *t, *y;
} data;

static ad_real model(const ad_real *p, double t) {
  return ad_add(ad_mul(p[0], ad_exp(ad_mul(ad_neg(p[1]), t))), ad_mul(p[2], ad_sin(ad_mul(p[3], t))));
}

/* The parallel loss. On rank 0, p holds the parameters; on the other ranks
 * it receives them. Collective; every rank returns L. */
static ad_real loss(const data *d, ad_real *p) {
  ad_mpi_bcast(p, NPAR, AD_MPI_REAL, 0, d->comm);
  ad_real local = ad_const(0.0), total = ad_const(0.0);
  for (int i = 0; i < d->count; i++) {
    ad_real r = ad_sub(model(p, d->t[i]), d->y[i]);
    local = ad_add(local, ad_mul(r, r));
  }
  ad_mpi_allreduce(&local, &total, 1, AD_MPI_REAL, MPI_SUM, d->comm);
  return ad_div(total, (double)SAMPLES);
}

#ifdef ARIADNE_PASSIVE
/* L at the parameters `at` (meaningful on rank 0), not recorded. Collective. */
static double loss_at(const data *d, const double *at) {
  ad_real p[NPAR];
  for (int k = 0; k < NPAR; k++) p[k] = ad_const(at[k]);
  return ad_value(loss(d, p));
}

/* Central differences of the whole parallel loss. Collective; g on rank 0. */
static void fd_gradient(const data *d, const double *at, double *g) {
  for (int k = 0; k < NPAR; k++) {
    double q[NPAR], h = 1e-6 * (1.0 + fabs(at[k]));
    memcpy(q, at, sizeof q);
    q[k] = at[k] + h;
    double lp = loss_at(d, q);
    q[k] = at[k] - h;
    double lm = loss_at(d, q);
    g[k] = (lp - lm) / (2.0 * h);
  }
}
#else
/* The loss as ad_mpi_check_gradient wants it: rank 0 owns the parameters
 * (the others have none), and the output counts once, on rank 0 (every rank
 * holds a copy of L after the allreduce; the checker sums over the ranks). */
static int loss_fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  const data *d = ud;
  ad_real p[NPAR];
  (void)m;
  for (int k = 0; k < NPAR; k++) p[k] = n == NPAR ? x[k] : ad_const(0.0);
  ad_real L = loss(d, p);
  y[0] = d->rank == 0 ? L : ad_const(0.0);
  return 0;
}
#endif

/* L and dL/dp at `at` (rank 0's). Collective. */
static int loss_and_gradient(const data *d, ad_tape *tape, const double *at, double *L, double *g) {
#ifndef ARIADNE_PASSIVE
  ad_real p[NPAR];
  ad_tape_reset(tape); /* forget the previous iteration, keep its memory */
  ad_tape_begin(tape);
  for (int k = 0; k < NPAR; k++) p[k] = d->rank == 0 ? ad_input(at[k]) : ad_const(0.0);
  ad_real Lr = loss(d, p);
  ad_tape_end(tape);
  *L = ad_value(Lr);
  /* The allreduce leaves a copy of L on every rank, and the reverse sweep
   * adds the adjoints of all copies up: seeding each would give size * dL/dp.
   * Rank 0 differentiates its copy. The other ranks pass a passive value and
   * no inputs; their ad_gradient runs their part of the (collective) sweep. */
  int rc = ad_gradient(tape, d->rank == 0 ? Lr : ad_const(*L), d->rank == 0 ? NPAR : 0, p, g);
  if (rc != AD_OK) fprintf(stderr, "[%d] lsq_fit_mpi: ad_gradient: %s: %s\n", d->rank, ad_errname(rc), ad_tape_error_message(tape));
  return rc;
#else
  (void)tape;
  *L = loss_at(d, at);
  fd_gradient(d, at, g);
  return AD_OK;
#endif
}

int main(int argc, char **argv) {
  int iterations = 2000;
  data d;
  memset(&d, 0, sizeof d);
  example_mpi_start(&argc, &argv, &d.comm, &d.rank, &d.size);
  if (argc > 2 || (argc == 2 && (iterations = atoi(argv[1])) <= 0)) {
    if (d.rank == 0) fprintf(stderr, "usage: mpiexec -n P %s [iterations]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }

  /* This rank's block of the data set: t in [0, 6], model plus noise. */
  int base = SAMPLES / d.size, extra = SAMPLES % d.size;
  d.count = base + (d.rank < extra);
  d.first = d.rank * base + (d.rank < extra ? d.rank : extra);
  d.t = malloc((size_t)(d.count + 1) * sizeof *d.t);
  d.y = malloc((size_t)(d.count + 1) * sizeof *d.y);
  if (!d.t || !d.y) MPI_Abort(d.comm, 1);
  for (int i = 0; i < d.count; i++) {
    int gi = d.first + i;
    double t = 6.0 * gi / (SAMPLES - 1);
    d.t[i] = t;
    d.y[i] = TRUE_P[0] * exp(-TRUE_P[1] * t) + TRUE_P[2] * sin(TRUE_P[3] * t) +
             NOISE * example_hash_unit((unsigned long long)gi);
  }
  if (d.rank == 0) {
    char each[32];
    if (extra == 0)
      snprintf(each, sizeof each, "%d", base);
    else
      snprintf(each, sizeof each, "%d-%d", base, base + 1);
    printf("fitting y = a exp(-b t) + c sin(d t) to %d samples on %d ranks (%s samples each)\n\n", SAMPLES, d.size,
           each);
  }

  ad_tape *tape = ad_tape_create();
  if (!tape) MPI_Abort(d.comm, 1);
  int failures = 0;
  double p[NPAR], g[NPAR], L;
  memcpy(p, START_P, sizeof p);

#ifndef ARIADNE_PASSIVE
  /* The gradient check, once, at the starting point: the tape's gradient
   * against central differences of the whole parallel loss at three step
   * sizes, and the dot-product test. Collective; rank 0 prints. Inputs 0..3
   * are a, b, c, d. */
  ad_check_options co;
  example_check_report(&co, NPAR, 1e-6, "dL/d(a, b, c, d) at the start");
  if (ad_mpi_check_gradient(d.comm, loss_fn, &d, d.rank == 0 ? NPAR : 0, p, 1, &co, NULL) != AD_OK &&
      d.rank == 0)
    failures++;
  if (d.rank == 0) printf("\n");
#endif

  /* Gradient descent on rank 0; the other ranks follow the loop, since every
   * iteration is one collective evaluation of the loss and its gradient. It
   * stops when no step, however short, lowers the loss any more. */
  double good[NPAR], good_g[NPAR] = {0.0}, good_L = INFINITY, step = 0.05, L0 = 0.0;
  int it = 0, stop = 0;
  memcpy(good, p, sizeof good);
  if (d.rank == 0) printf("%9s %16s %12s\n", "iteration", "loss", "step");
  for (it = 0; it <= iterations && !stop; it++) {
    if (loss_and_gradient(&d, tape, p, &L, g) != AD_OK) {
      failures++;
      break;
    }
    if (it == 0) L0 = L;
    if (d.rank == 0) {
      if (L < good_L) { /* a better point: take it and be bolder */
        good_L = L;
        memcpy(good, p, sizeof good);
        memcpy(good_g, g, sizeof good_g);
        step *= 1.2;
      } else {
        step *= 0.5;
      }
      stop = step < 1e-10;
      if (it % 25 == 0 || stop || it == iterations) printf("%9d %16.10g %12.4g\n", it, good_L, step);
      for (int k = 0; k < NPAR; k++) p[k] = good[k] - step * good_g[k];
    }
    MPI_Bcast(&stop, 1, MPI_INT, 0, d.comm);
  }

  if (d.rank == 0) {
    printf("\n%-9s %12s %12s\n", "parameter", "fitted", "true");
    for (int k = 0; k < NPAR; k++) printf("%-9s %12.6f %12.6f\n", NAMES[k], good[k], TRUE_P[k]);
    /* The noise is uniform in [-NOISE, NOISE]: at the optimum the loss is
     * close to its variance, NOISE^2 / 3. */
    printf("final loss %.6g after %d iterations (start %.6g; the noise alone gives about %.6g)\n", good_L, it, L0,
           NOISE * NOISE / 3.0);
    if (!(good_L < 2.0 * NOISE * NOISE / 3.0)) {
      fprintf(stderr, "lsq_fit_mpi: the fit did not converge\n");
      failures++;
    }
  }
  ad_tape_destroy(tape);
  free(d.t);
  free(d.y);
  return example_mpi_finish(d.comm, "lsq_fit_mpi", failures);
}
