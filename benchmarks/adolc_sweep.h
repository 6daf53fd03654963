/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * adolc_sweep.h: what the ADOL-C variants of the benchmarks do alike once a
 * scalar output is taped: one first-order reverse sweep (fos_reverse), timed
 * with the caller's clock, and the tape's sizes from tapestats. C++ only.
 */
#ifndef ARIADNE_BENCH_ADOLC_SWEEP_H
#define ARIADNE_BENCH_ADOLC_SWEEP_H

#include <adolc/adolc.h>
#include <adolc/taping.h>

#include <stddef.h>

typedef struct adolc_sweep {
  int rc;               /* what fos_reverse returned (negative: failure) */
  double reverse_s;     /* its time */
  size_t st[STAT_SIZE]; /* tapestats of the tape */
  double statements;    /* operations */
  double arguments;     /* locations */
  double tape_bytes;    /* operations 1 byte, locations, values and the taylors read back */
  double taylor_bytes;  /* the taylors alone: they play the role of Ariadne's stored partials */
  int to_files;         /* ADOL-C wrote a stream of the tape to files */
} adolc_sweep;

/* The gradient of the one output of tape tag with respect to its nin inputs
 * into grad, and what the sweep cost. */
static inline adolc_sweep adolc_sweep_run(short tag, int nin, double *grad, double (*clock)()) {
  adolc_sweep s;
  double ybar = 1.0, t0 = clock();
  s.rc = fos_reverse(tag, 1, nin, &ybar, grad);
  s.reverse_s = clock() - t0;
  tapestats(tag, s.st);
  s.statements = (double)s.st[NUM_OPERATIONS];
  s.arguments = (double)s.st[NUM_LOCATIONS];
  s.taylor_bytes = (double)s.st[TAY_STACK_SIZE] * sizeof(double);
  s.tape_bytes = (double)s.st[NUM_OPERATIONS] + (double)s.st[NUM_LOCATIONS] * sizeof(locint) +
                 (double)s.st[NUM_VALUES] * sizeof(double) + s.taylor_bytes;
  s.to_files = s.st[OP_FILE_ACCESS] || s.st[LOC_FILE_ACCESS] || s.st[VAL_FILE_ACCESS];
  return s;
}

#endif
