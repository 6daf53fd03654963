/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The heat kernel with ADOL-C's own checkpointing (CP_Context, binomial
 * revolve): the comparison for Ariadne's ad_checkpoint_loop in
 * ariadne_bench_heat_ckpt. The step function advances the whole n x n state
 * in place, in an adouble and a double version; the one-step tape is
 * recorded once and reused (setAlwaysRetaping(false)), since every step
 * performs the same operations. The gradient is ADOL-C's `gradient` driver
 * (a forward run that keeps taylors, then the reverse sweep), because the
 * checkpointing record needs the forward run's snapshots.
 */
#include <adolc/adolc.h>
#include <adolc/checkpointing.h>
#include <adolc/taping.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "heat.h"

static double now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The grid side, for the step functions, whose signature has only the state. */
static int grid_n;
static double *dbuf;

/* The same expression, in the same order, as the primal's cell update
 * (HEAT_CELL in heat_kernel.h, a C header), written again for adouble. */
template <typename T> static T cell(const T &x, const T &n, const T &s, const T &w, const T &e) {
  return x + HEAT_C * (n + s + w + e - 4.0 * x) + HEAT_DT * x * (1.0 - x) + HEAT_SIN_WEIGHT * sin(x);
}

static int step_double(int nstate, double *u) {
  int n = grid_n;
  (void)nstate;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      dbuf[k] = cell(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
    }
  for (int i = 1; i < n - 1; i++) memcpy(u + i * n + 1, dbuf + i * n + 1, (size_t)(n - 2) * sizeof(double));
  return 1;
}

static int step_adouble(int nstate, adouble *u) {
  int n = grid_n;
  (void)nstate;
  adouble *v = new adouble[(size_t)n * (size_t)n];
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) {
      int k = i * n + j;
      v[k] = cell<adouble>(u[k], u[k - n], u[k + n], u[k - 1], u[k + 1]);
    }
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) u[i * n + j] = v[i * n + j];
  delete[] v;
  return 1;
}

/* Return to the working directory kept open as `back`; report a failure. */
static int back_to(int back, heat_result *out) {
  int rc = fchdir(back);
  close(back);
  if (rc != 0) {
    snprintf(out->msg, sizeof out->msg, "cannot return to the working directory");
    out->rc = 1;
  }
  return rc;
}

#ifdef HEAT_ADOLC_READCONFIG
/* ADOL-C 2.x: reads .adolcrc from the working directory; exported by the
 * library, not declared in its installed headers. */
extern "C" void readConfigFile();
#endif

extern "C" int heat_adolc_ckpt_run(int n, int steps, int snaps, const char *dir, const double *u0, double *grad,
                                   heat_result *out) {
  const short tag = 18, tag_step = 19;
  const int nn = n * n;
  memset(out, 0, sizeof *out);
  grid_n = n;
  dbuf = new double[nn];

  /* ADOL-C tapes the step with its default buffer sizes, 524288 entries per
   * stream unless a file .adolcrc in the working directory says otherwise,
   * and reads that file once, when the library loads. One step at N = 128
   * needs about 600000 locations, so its tape would spill to a file. Where
   * the library exports its reader (ADOL-C 2.x), write a .adolcrc with room
   * for one step into `dir` and read it; the process is this variant's own.
   * Any tape file that still appears is written to `dir` too. */
  int back = open(".", O_RDONLY);
  if (back < 0 || chdir(dir) != 0) {
    snprintf(out->msg, sizeof out->msg, "cannot change to %s", dir);
    out->rc = 1;
    if (back >= 0) close(back);
    delete[] dbuf;
    return 1;
  }
#ifdef HEAT_ADOLC_READCONFIG
  {
    const double cells = (double)(n - 2) * (double)(n - 2), points = (double)nn;
    FILE *f = fopen(".adolcrc", "w");
    if (f) {
      fprintf(f, "\"OBUFSIZE\" = \"%.0f\"\n\"LBUFSIZE\" = \"%.0f\"\n\"VBUFSIZE\" = \"%.0f\"\n\"TBUFSIZE\" = \"%.0f\"\n",
              20.0 * cells + 8.0 * points + 4096.0, 48.0 * cells + 24.0 * points + 4096.0,
              8.0 * cells + 4.0 * points + 4096.0, 24.0 * cells + 8.0 * points + 4096.0);
      fclose(f);
      /* ADOL-C reports what it parsed on stderr; keep the output clean. */
      fflush(stderr);
      int keep = dup(2), null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, 2);
      readConfigFile();
      fflush(stderr);
      if (keep >= 0) dup2(keep, 2);
      if (keep >= 0) close(keep);
      if (null >= 0) close(null);
      remove(".adolcrc");
    }
  }
#endif

  double t0 = now();
  {
    adouble *u = new adouble[nn];
    CP_Context cpc(step_adouble);
    cpc.setDoubleFct(step_double);
    cpc.setNumberOfSteps(steps);
    cpc.setNumberOfCheckpoints(snaps);
    cpc.setDimensionXY(nn);
    cpc.setInput(u);
    cpc.setOutput(u);
    cpc.setTapeNumber(tag_step);
    cpc.setAlwaysRetaping(false);
    trace_on(tag);
    for (int k = 0; k < nn; k++) u[k] <<= u0[k];
    int rc = cpc.checkpointing();
    adouble J = 0.0;
    for (int k = 0; k < nn; k++) J += u[k] * u[k];
    J >>= out->J;
    trace_off();
    delete[] u;
    if (rc < 0) {
      snprintf(out->msg, sizeof out->msg, "ADOL-C checkpointing returned %d", rc);
      out->rc = 1;
      back_to(back, out);
      delete[] dbuf;
      return 1;
    }
  }
  double t1 = now();
  int rc = gradient(tag, nn, u0, grad);
  double t2 = now();
  out->record_s = t1 - t0;
  out->reverse_s = t2 - t1;

  size_t st[STAT_SIZE];
  tapestats(tag_step, st);
  if (back_to(back, out) != 0) {
    delete[] dbuf;
    return 1;
  }
  /* The one-step tape and its taylors: what the reverse sweep of one step reads. */
  out->tape_bytes = (double)st[NUM_OPERATIONS] * sizeof(unsigned char) + (double)st[NUM_LOCATIONS] * sizeof(locint) +
                    (double)st[NUM_VALUES] * sizeof(double) + (double)st[TAY_STACK_SIZE] * sizeof(double);
  out->extra_bytes = (double)snaps * nn * sizeof(double);
  out->in_memory = !st[OP_FILE_ACCESS] && !st[LOC_FILE_ACCESS] && !st[VAL_FILE_ACCESS];
  delete[] dbuf;
  if (rc < 0) {
    snprintf(out->msg, sizeof out->msg, "ADOL-C gradient returned %d", rc);
    out->rc = 1;
    return 1;
  }
  return 0;
}
