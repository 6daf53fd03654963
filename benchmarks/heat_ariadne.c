/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The Ariadne variants of the heat kernel. This file is compiled twice: once
 * active (functions heat_ariadne_*) and once with ARIADNE_PASSIVE (functions
 * heat_passive_*), which shows that the ported code keeps compiling, and
 * runs at the speed of plain double, when the AD is switched off.
 */
#define _DEFAULT_SOURCE
#include <ariadne.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "heat_ad.h"

#ifdef ARIADNE_PASSIVE
#define HEAT_AD(name) heat_passive_##name
#else
#define HEAT_AD(name) heat_ariadne_##name
#endif

struct heat_ad {
  ad_tape *tape;
  ad_real *x; /* the independent variables u0 */
  ad_real *u, *v;
};

#if defined(HEAT_HAVE_PORT) && !defined(ARIADNE_PASSIVE)
/* heat_kernel.c, the plain double step, ported at build time by ariadne-port
 * op by op (suffix _port) and with --fused (suffix _fused). */
void heat_kernel_step_port(int n, const ad_real *restrict u, ad_real *restrict v);
void heat_kernel_step_fused(int n, const ad_real *restrict u, ad_real *restrict v);
#endif

#if defined(HEAT_HAVE_CXX) && !defined(ARIADNE_PASSIVE)
/* heat_cxx.cpp: the op code's cell update with C++ operators. */
void heat_cxx_step(int n, const ad_real *u, ad_real *v);
/* heat_cxx_et.cpp: the cell as one C++ expression, one statement. */
void heat_cxx_et_step(int n, const ad_real *u, ad_real *v);
#endif

/* One explicit step on the interior; the boundary handles of u and v are the
 * inputs themselves and never change. The op, stmt and custom cells are
 * heat_ad.h's; the tape-off variants run the op and the custom cell. */
static void step(int mode, int n, const ad_real *u, ad_real *v) {
  /* The variants built elsewhere (C++, ported) bring a whole step each. */
  void (*kernel)(int, const ad_real *, ad_real *) = NULL;
#if defined(HEAT_HAVE_CXX) && !defined(ARIADNE_PASSIVE)
  if (mode == HEAT_MODE_CXX) kernel = heat_cxx_step;
  if (mode == HEAT_MODE_CXX_ET) kernel = heat_cxx_et_step;
#endif
#if defined(HEAT_HAVE_PORT) && !defined(ARIADNE_PASSIVE)
  if (mode == HEAT_MODE_PORT) kernel = heat_kernel_step_port;
  if (mode == HEAT_MODE_PORT_FUSED) kernel = heat_kernel_step_fused;
#endif
  if (kernel) {
    kernel(n, u, v);
    return;
  }
  heat_ad_rows(mode == HEAT_MODE_TAPEOFF          ? HEAT_MODE_OP
               : mode == HEAT_MODE_TAPEOFF_CUSTOM ? HEAT_MODE_CUSTOM
                                                  : mode,
               n, 1, n - 1, u, v);
}

heat_ad *HEAT_AD(create)(int n) {
  size_t nn = (size_t)n * (size_t)n;
  heat_ad *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->tape = ad_tape_create();
  h->x = malloc(nn * sizeof *h->x);
  h->u = malloc(nn * sizeof *h->u);
  h->v = malloc(nn * sizeof *h->v);
  if (!h->tape || !h->x || !h->u || !h->v) {
    HEAT_AD(destroy)(h);
    return NULL;
  }
  return h;
}

void HEAT_AD(destroy)(heat_ad *h) {
  if (!h) return;
  ad_tape_destroy(h->tape);
  free(h->x);
  free(h->u);
  free(h->v);
  free(h);
}

int HEAT_AD(run)(heat_ad *h, int mode, int n, int steps, const double *u0, double *grad, heat_result *out) {
  size_t nn = (size_t)n * (size_t)n;
  memset(out, 0, sizeof *out);
  out->in_memory = 1;

  /* Record. Resetting keeps the tape's blocks for reuse, so repetitions after
   * the first measure recording into warm memory. */
  double t0 = bench_now();
  ad_tape_reset(h->tape);
  double t1 = bench_now();
  int off = mode == HEAT_MODE_TAPEOFF || mode == HEAT_MODE_TAPEOFF_CUSTOM;
  if (!off) ad_tape_begin(h->tape);
  for (size_t k = 0; k < nn; k++) h->x[k] = h->u[k] = h->v[k] = ad_input(u0[k]);
  ad_real *u = h->u, *v = h->v;
  for (int t = 0; t < steps; t++) {
    step(mode, n, u, v);
    ad_real *w = u;
    u = v;
    v = w;
  }
  ad_real J = ad_dot(nn, u, u);
  if (!off) ad_tape_end(h->tape);
  double t2 = bench_now();
  out->J = ad_value(J);
  out->reset_s = t1 - t0;
  out->record_s = t2 - t0;
  if (off) {
    ad_clear_last_error(); /* ad_input without a recording tape */
    return 0;
  }

#ifndef ARIADNE_PASSIVE
  /* Reverse: one sweep, adjoints zeroed and seeded by the driver. */
  int rc = ad_gradient(h->tape, J, nn, h->x, grad);
  double t3 = bench_now();
  out->reverse_s = t3 - t2;
  if (rc != AD_OK) {
    snprintf(out->msg, sizeof out->msg, "ad_gradient: %s (%s)", ad_strerror(rc), ad_tape_error_message(h->tape));
    out->rc = rc;
    return rc;
  }
  ad_stats st;
  ad_tape_stats(h->tape, &st);
  out->tape_bytes = (double)st.bytes_used;
  out->extra_bytes = (double)st.bytes_adjoints;
  out->reserved_bytes = (double)st.bytes_reserved;
  out->statements = (double)st.statements;
  out->arguments = (double)st.arguments;
#else
  (void)grad;
#endif
  return 0;
}
