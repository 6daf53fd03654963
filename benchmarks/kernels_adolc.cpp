/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ADOL-C variant of the fv and lj kernels: fv_kernel.c and lj_kernel.c
 * themselves, with `double` read as adouble (CMakeLists.txt writes the copies
 * at configure time, file-scope constants kept double), taped in memory and
 * swept by fos_reverse.
 */
#include "adolc_sweep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

namespace adolc_fv {
#include "fv_kernel_adolc.inc"
}
namespace adolc_lj {
#include "lj_kernel_adolc.inc"
}

static double now() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* as kernels.c */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double weight(int k) { return 1.0 + 0.001 * (k % 97); }

/* The buffers are sized so that the tape stays in memory (see heat_adolc.cpp). */
static unsigned size_of(double bytes) { return bytes > 4.0e9 ? 4000000000u : (unsigned)(bytes + 4096.0); }

extern "C" int kernels_adolc_run(const kernels_problem *p, const double *in, double *grad, kernels_result *r) {
  const short tag = 23;
  const int nin = p->kind == KERNELS_FV ? 4 * p->n * p->n : 3 * p->n;
  const double work = p->kind == KERNELS_FV ? 120.0 * nin * p->steps : 8000.0 * nin * p->steps;
  unsigned obs = size_of(work), lbs = size_of(3.0 * work), vbs = size_of(work), tbs = size_of(work);
  double t0 = now();
  trace_on(tag, 1, obs, lbs, vbs, tbs);
  {
    adouble *x0 = new adouble[nin];
    for (int k = 0; k < nin; k++) x0[k] <<= in[k];
    adouble J = 0.0;
    if (p->kind == KERNELS_FV) {
      adouble *a = new adouble[nin], *b = new adouble[nin], *fx = new adouble[nin], *fy = new adouble[nin];
      for (int k = 0; k < nin; k++) a[k] = b[k] = x0[k];
      adouble dt = p->dt;
      for (int t = 0; t < p->steps; t++) {
        adolc_fv::fv_step(p->n, p->n, dt, a, fx, fy, b);
        adouble *s = a;
        a = b;
        b = s;
      }
      for (int k = 0; k < nin; k++) J += weight(k) * a[k];
      delete[] a;
      delete[] b;
      delete[] fx;
      delete[] fy;
    } else {
      adouble *x = new adouble[nin], *f = new adouble[nin];
      for (int k = 0; k < nin; k++) x[k] = x0[k];
      adouble box = p->box;
      for (int t = 0; t < p->steps; t++) {
        J += adolc_lj::lj_forces(p->n, box, p->ncell, p->head, p->next, p->cell_of, x, f);
        for (int k = 0; k < nin; k++) x[k] += 1e-4 * f[k];
      }
      for (int k = 0; k < nin; k++) J += 1e-3 * weight(k) * f[k];
      delete[] x;
      delete[] f;
    }
    J >>= r->J;
    delete[] x0;
  }
  trace_off();
  r->record_s = now() - t0;
  adolc_sweep s = adolc_sweep_run(tag, nin, grad, now);
  r->reverse_s = s.reverse_s;
  r->statements = s.statements;
  r->arguments = s.arguments;
  r->tape_bytes = s.tape_bytes;
  if (s.to_files) fprintf(stderr, "kernels: ADOL-C wrote its tape to files: its times measure the disk\n");
  return s.rc < 0;
}
