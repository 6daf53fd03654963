/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ADOL-C variant of the heat kernel: operator-overloading taping with
 * adouble, the tape kept in memory, gradient by one first-order scalar
 * reverse sweep (fos_reverse) over the taylors kept by the taping run.
 */
#include "adolc_sweep.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "heat.h"

static double now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ADOL-C keeps a tape in memory only if each of its streams fits in one
 * buffer; otherwise it spills to files in the working directory and the
 * comparison would measure the disk. The sizes below are upper bounds per
 * cell update and per grid point: tapestats on this kernel counts about 15
 * operations, 38 locations, 5 values and 16 taylors per cell update. A buffer
 * is malloc'ed whole but only the part written is touched, so the slack
 * costs address space, not memory. The run checks afterwards that nothing
 * was written to a file. */
static unsigned buffer_size(double per_cell, double per_point, double cells, double points) {
  double b = per_cell * cells + per_point * points + 4096.0;
  return b > 4.0e9 ? 4000000000u : (unsigned)b;
}

extern "C" int heat_adolc_run(int n, int steps, const double *u0, double *grad, heat_result *out) {
  const short tag = 17;
  const int nn = n * n;
  const double cells = (double)(n - 2) * (double)(n - 2) * (double)steps, points = (double)nn;
  memset(out, 0, sizeof *out);

  unsigned obs = buffer_size(20.0, 8.0, cells, points);
  unsigned lbs = buffer_size(48.0, 24.0, cells, points);
  unsigned vbs = buffer_size(8.0, 4.0, cells, points);
  unsigned tbs = buffer_size(24.0, 8.0, cells, points);

  double t0 = now();
  trace_on(tag, 1, obs, lbs, vbs, tbs);
  {
    adouble *u = new adouble[nn];
    adouble *v = new adouble[nn];
    for (int k = 0; k < nn; k++) {
      u[k] <<= u0[k];
      v[k] = u[k];
    }
    for (int t = 0; t < steps; t++) {
      for (int i = 1; i < n - 1; i++) {
        for (int j = 1; j < n - 1; j++) {
          int k = i * n + j;
          /* HEAT_CELL of heat_kernel.h (a C header) written again for
           * adouble, in the same order so that it computes the same bits. */
          const adouble &x = u[k];
          v[k] = x + HEAT_C * (u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4.0 * x) + HEAT_DT * x * (1.0 - x) +
                 HEAT_SIN_WEIGHT * sin(x);
        }
      }
      adouble *w = u;
      u = v;
      v = w;
    }
    adouble J = 0.0;
    for (int k = 0; k < nn; k++) J += u[k] * u[k];
    J >>= out->J;
    delete[] u;
    delete[] v;
  }
  trace_off();
  out->record_s = now() - t0;

  adolc_sweep s = adolc_sweep_run(tag, nn, grad, now);
  const size_t *st = s.st;
  out->reverse_s = s.reverse_s;
  out->statements = s.statements;
  out->arguments = s.arguments;
  out->tape_bytes = s.tape_bytes;
  out->extra_bytes = s.taylor_bytes;
  out->in_memory = !s.to_files && st[TAY_STACK_SIZE] <= (size_t)tbs;
  if (s.rc < 0) {
    snprintf(out->msg, sizeof out->msg, "fos_reverse returned %d", s.rc);
    out->rc = 1;
    return 1;
  }
  if (!out->in_memory) {
    snprintf(out->msg, sizeof out->msg,
             "ADOL-C wrote the tape to files (ops %zu/%u, locs %zu/%u, vals %zu/%u, taylors %zu/%u)",
             st[NUM_OPERATIONS], obs, st[NUM_LOCATIONS], lbs, st[NUM_VALUES], vbs, st[TAY_STACK_SIZE], tbs);
  }
  return 0;
}
