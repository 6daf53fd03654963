/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reference benchmark kernel: nonlinear 2-D reaction-diffusion, explicit,
 * on an n x n grid for `steps` steps with fixed boundary values,
 *
 *   v = x + c*(uN + uS + uW + uE - 4*x) + dt*x*(1 - x) + 0.01*sin(x),  x = u[i][j],
 *   J = sum_k u_T[k]^2,  gradient dJ/du0,  u0[k] = 0.5 + 0.4*sin(0.37*k).
 *
 * This header is shared by the drivers (heat.c, heat_mpi.c, heat_ckpt.c),
 * the kernel's sources (heat_kernel.c, heat_hand.c, heat_ad.h), the Ariadne
 * variants (heat_ariadne.c, compiled once active and once passive) and the
 * ADOL-C and C++ variants, so it is plain C that C++ also accepts. Where each
 * piece of the kernel lives:
 *
 *   heat_kernel.h  the cell update (HEAT_CELL), the one place its formula is
 *                  written, its local partial, and the primal step over a
 *                  range of rows
 *   heat_kernel.c  the primal step; compiled as plain double for the primal
 *                  and the hand adjoint, and ported by ariadne-port
 *   heat_hand.c    the primal run, J and the hand-written adjoint
 *   heat_ad.h      the Ariadne cell updates (op, statement, ad_custom, values
 *                  only) and the step over a range of rows on ad_real
 */
#ifndef ARIADNE_BENCH_HEAT_H
#define ARIADNE_BENCH_HEAT_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEAT_C 0.2
#define HEAT_DT 0.1
#define HEAT_SIN_WEIGHT 0.01

/* Published values for n = 128, steps = 100 (12 significant digits). */
#define REF_N 128
#define REF_T 100
#define REF_J 18150.0729665
#define REF_G1 3.24572929612e-06 /* dJ/du0[n + 1] */
#define REF_G2 8.41379276415e-05 /* dJ/du0[n*n/2 + n/2] */

/* The initial state u0[k] of the grid point k in row-major order. */
static inline double heat_u0(double k) { return 0.5 + 0.4 * sin(0.37 * k); }

/* The initial state of a whole grid of nn points, or NULL (said on stderr)
 * without the memory. */
static inline double *heat_initial(size_t nn) {
  double *u0 = (double *)malloc(nn * sizeof(double));
  if (!u0) fprintf(stderr, "heat: no memory for an initial state of %zu points\n", nn);
  for (size_t k = 0; u0 && k < nn; k++) u0[k] = heat_u0((double)k);
  return u0;
}

/* What one run of a variant (record and reverse once) reports. */
typedef struct heat_result {
  double J;              /* the objective computed by the variant */
  double reset_s;        /* part of record_s spent forgetting the previous recording */
  double record_s;       /* forward run that records (or stores states) */
  double reverse_s;      /* reverse sweep and gradient extraction */
  double tape_bytes;     /* bytes the reverse sweep reads: tape, stored states or taylors */
  double extra_bytes;    /* variant specific: ADOL-C taylor bytes, Ariadne adjoint vector bytes */
  double reserved_bytes; /* Ariadne: tape storage allocated (bytes_reserved) at the end of the recording */
  double statements;     /* tape statements (Ariadne) or operations (ADOL-C); 0 if none */
  double arguments;      /* tape arguments (Ariadne) or locations (ADOL-C); 0 if none */
  int in_memory;         /* 1 if the whole tape stayed in memory */
  int rc;                /* 0 on success */
  char msg[200];         /* what went wrong when rc != 0 */
} heat_result;

/* Ariadne variants; `mode` is one of these. */
enum {
  HEAT_MODE_OP = 0,
  HEAT_MODE_STMT = 1,
  HEAT_MODE_CUSTOM = 2,
  HEAT_MODE_TAPEOFF = 3,
  HEAT_MODE_PORT = 4,
  HEAT_MODE_PORT_FUSED = 5,
  HEAT_MODE_CXX = 6,
  HEAT_MODE_VALUES = 7,
  HEAT_MODE_TAPEOFF_CUSTOM = 8,
  HEAT_MODE_CXX_ET = 9
};
/* HEAT_MODE_TAPEOFF: the op code in the active build with no tape recording,
 * as checkpointed loops recompute steps and finite differences run: no
 * gradient, record_s is the time of the run; HEAT_MODE_TAPEOFF_CUSTOM the
 * same with the custom cell. HEAT_MODE_PORT(_FUSED): the
 * plain double kernel heat_kernel.c ported by ariadne-port at build time.
 * HEAT_MODE_CXX: the op code's cell update in C++ with ariadne.hpp's
 * operators, one statement per operation (heat_cxx.cpp, HEAT_HAVE_CXX);
 * HEAT_MODE_CXX_ET: the cell as one C++ expression, one statement
 * (heat_cxx_et.cpp). HEAT_MODE_VALUES: the cell's
 * value only, as a constant (heat_ad.h): what a checkpointed step computes
 * when nothing records. */

/* heat_hand.c: the whole runs in plain double (the step is heat_kernel.h's). */

/* J = sum_k u[k]^2. */
double heat_objective(size_t nn, const double *u);

/* The primal: `steps` steps from u0 in the buffers a and b (n * n each, the
 * boundary of both holds u0 and is never written); returns J. */
double heat_primal(int n, int steps, const double *u0, double *a, double *b);

/* The hand-written adjoint, forward part: every state stored in `states`
 * ((steps + 1) * n * n), returns J. */
double heat_hand_forward(int n, int steps, const double *u0, double *states);

/* The hand-written adjoint, reverse part: the transposed steps backwards
 * over the stored states, dJ/du0 to grad; ubar and vbar are n * n each. */
void heat_hand_reverse(int n, int steps, const double *states, double *ubar, double *vbar, double *grad);

/* heat_ariadne.c compiled active. The context keeps the tape and the arrays
 * between repetitions, as a user that takes many gradients would. */
typedef struct heat_ad heat_ad;
heat_ad *heat_ariadne_create(int n);
void heat_ariadne_destroy(heat_ad *h);
int heat_ariadne_run(heat_ad *h, int mode, int n, int steps, const double *u0, double *grad, heat_result *out);

/* heat_ariadne.c compiled with ARIADNE_PASSIVE: the same source as plain
 * double arithmetic; grad is left untouched. */
heat_ad *heat_passive_create(int n);
void heat_passive_destroy(heat_ad *h);
int heat_passive_run(heat_ad *h, int mode, int n, int steps, const double *u0, double *grad, heat_result *out);

/* heat_adolc.cpp, built only when ADOL-C is found (HEAT_HAVE_ADOLC). */
int heat_adolc_run(int n, int steps, const double *u0, double *grad, heat_result *out);

#ifdef __cplusplus
}
#endif

#endif
