/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heat_mpi: the gradient of a 2-D reaction-diffusion simulation distributed
 * over MPI ranks.
 *
 * An explicit scheme on an N x N grid runs T steps with the boundary held
 * fixed; each interior cell is updated by
 *
 *     v = x + c (u_N + u_S + u_W + u_E - 4 x) + dt x (1 - x) + 0.01 sin(x),
 *
 * where x is the cell's old value, from u0[k] = 0.5 + 0.4 sin(0.37 k),
 * k = i N + j. The objective is J = sum_k u_T[k]^2 and we want dJ/du0.
 *
 * The grid is split into blocks of whole rows, one per rank. Before each step
 * a rank sends its first row to the rank above and its last row to the rank
 * below, and receives one ghost row from each (MPI_PROC_NULL past the edges
 * of the grid); J is summed onto rank 0. The MPI calls of the double code
 * become ad_mpi_* calls with AD_MPI_REAL: that is the whole port of the
 * communication. The reverse sweep runs on every rank at once and sends the
 * adjoints of the ghost rows back to their owners.
 *
 * Usage: mpiexec -n P heat_mpi [N T] [--png FILE] [--vtk FILE] [--figure FILE]
 *        (default 24 x 24 cells, 40 steps)
 *
 * ad_mpi_check_gradient compares a few entries of the gradient, on both
 * sides of the boundaries between blocks included, with central finite
 * differences of the whole parallel program, and runs the dot-product test;
 * for N = 128, T = 100 the program also checks the published reference
 * values of this kernel. --png and --vtk gather the sensitivity map dJ/du0
 * on rank 0 and write it as data (a picture whose colours read back as the
 * values, with libpng; VTK image data); --figure draws it to show (with
 * cairo; .png, .pdf or .svg).
 * Built with -DARIADNE_PASSIVE the program only prints (and at the reference
 * size checks) J.
 */
#include <ariadne_mpi.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heat_example.h"
#include "example_util.h"

/* This rank's block: global rows [row0, row0 + rows) of an n x n grid. */
typedef struct block {
  MPI_Comm comm;
  int rank, size, n, steps;
  int row0, rows;
  int up, down; /* neighbour ranks, MPI_PROC_NULL past the edge of the grid */
} block;

static void block_rows(int n, int size, int rank, int *row0, int *rows) {
  int base = n / size, extra = n % size;
  *rows = base + (rank < extra);
  *row0 = rank * base + (rank < extra ? rank : extra);
}

/* Exchange ghost rows. The local array has rows + 2 rows: a ghost row above
 * (local row 0), the block, and a ghost row below (local row rows + 1). */
static void halo(const block *b, ad_real *u) {
  int n = b->n;
  ad_mpi_sendrecv(u + n, n, AD_MPI_REAL, b->up, 0, u + (size_t)(b->rows + 1) * n, n, AD_MPI_REAL, b->down, 0, b->comm,
                  MPI_STATUS_IGNORE);
  ad_mpi_sendrecv(u + (size_t)b->rows * n, n, AD_MPI_REAL, b->down, 1, u, n, AD_MPI_REAL, b->up, 1, b->comm,
                  MPI_STATUS_IGNORE);
}

/* The simulation on this rank's block: u0 holds the block's initial values,
 * u and v are scratch arrays of (rows + 2) * n values. Collective: returns J
 * on rank 0 (a passive zero on the others). */
static ad_real simulate(const block *b, const ad_real *u0, ad_real *u, ad_real *v) {
  int n = b->n;
  size_t own = (size_t)b->rows * n;
  for (size_t k = 0; k < (size_t)(b->rows + 2) * n; k++) u[k] = v[k] = ad_const(0.0);
  memcpy(u + n, u0, own * sizeof *u);
  memcpy(v + n, u0, own * sizeof *v); /* the boundary stays as it was */
  for (int s = 0; s < b->steps; s++) {
    halo(b, u);
    for (int li = 1; li <= b->rows; li++) {
      int i = b->row0 + li - 1; /* the global row */
      if (i != 0 && i != n - 1) heat_row(u, v, li * n, n);
    }
    heat_swap(&u, &v);
  }
  ad_real Jl = ad_dot(own, u + n, u + n), J = ad_const(0.0);
  ad_mpi_reduce(&Jl, &J, 1, AD_MPI_REAL, MPI_SUM, 0, b->comm);
  return J;
}

#ifndef ARIADNE_PASSIVE
/* What ad_mpi_check_gradient records and re-runs: J from this rank's block
 * of the initial state. Collective. */
typedef struct sim {
  const block *b;
  ad_real *u, *v;
} sim;

static int heat_fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  sim *s = ud;
  (void)n, (void)m;
  y[0] = simulate(s->b, x, s->u, s->v); /* on rank 0; a passive zero elsewhere */
  return 0;
}

/* Global entry k of a per-rank array `mine` (this rank's block), on every
 * rank: its owner contributes it to a sum. Collective; *owner gets its rank. */
static double entry(const block *b, const double *mine, size_t k, int *owner) {
  size_t first = (size_t)b->row0 * b->n, own = (size_t)b->rows * b->n;
  int is_mine = k >= first && k < first + own;
  double x = is_mine ? mine[k - first] : 0.0, sum = 0.0;
  int who = is_mine ? b->rank : 0, o = 0;
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, b->comm);
  MPI_Allreduce(&who, &o, 1, MPI_INT, MPI_MAX, b->comm);
  if (owner) *owner = o;
  return sum;
}
#endif

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "heat_mpi: out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

static int parse(const char *s, int lo, int hi, int *out) {
  char *end;
  long x = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || x < lo || x > hi) return 0;
  *out = (int)x;
  return 1;
}

int main(int argc, char **argv) {
  block b = {MPI_COMM_WORLD, 0, 1, 24, 40, 0, 0, MPI_PROC_NULL, MPI_PROC_NULL};
  example_mpi_start(&argc, &argv, &b.comm, &b.rank, &b.size);
  const char *png, *vtk, *fig, *pos[2] = {NULL, NULL};
  int npos = heat_args(argc, argv, &png, &vtk, &fig, pos);
  int args_ok = npos == 0 || (npos == 2 && parse(pos[0], 3, 4096, &b.n) && parse(pos[1], 0, 1000000, &b.steps));
  if (!args_ok || b.n < b.size) {
    if (b.rank == 0)
      fprintf(stderr, "usage: mpiexec -n P %s [N T] [--png FILE] [--vtk FILE] [--figure FILE]   (3 <= N <= 4096, N >= P, 0 <= T)\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  int n = b.n;
  block_rows(n, b.size, b.rank, &b.row0, &b.rows);
  b.up = b.rank > 0 ? b.rank - 1 : MPI_PROC_NULL;
  b.down = b.rank < b.size - 1 ? b.rank + 1 : MPI_PROC_NULL;
  size_t own = (size_t)b.rows * n, local = own + 2 * (size_t)n, first = (size_t)b.row0 * n;

  double *u0 = xmalloc(own * sizeof *u0), *g = xmalloc(own * sizeof *g);
  ad_real *x = xmalloc(own * sizeof *x), *u = xmalloc(local * sizeof *u), *v = xmalloc(local * sizeof *v);
  for (size_t m = 0; m < own; m++) u0[m] = 0.5 + 0.4 * sin(0.37 * (double)(first + m));

  ad_tape *tape = ad_tape_create();
  if (!tape) {
    fprintf(stderr, "[%d] heat_mpi: cannot create a tape\n", b.rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ad_tape_begin(tape);
  for (size_t m = 0; m < own; m++) x[m] = ad_input(u0[m]);
  ad_real J = simulate(&b, x, u, v);
  ad_tape_end(tape);

  int failures = 0;
  if (b.rank == 0) {
    char rows[32];
    if (n % b.size == 0)
      snprintf(rows, sizeof rows, "%d", n / b.size);
    else
      snprintf(rows, sizeof rows, "%d-%d", n / b.size, n / b.size + 1);
    printf("reaction-diffusion %d x %d, %d steps on %d ranks (blocks of %s rows): J = %.12g\n", n, n, b.steps, b.size,
           rows, ad_value(J));
  }

#ifndef ARIADNE_PASSIVE
  /* J exists on rank 0 only; on the other ranks it is a passive zero. Every
   * rank calls ad_gradient all the same: the sweep is collective, and theirs
   * sends the adjoints of the rows they received back to their owners. */
  int rc = ad_gradient(tape, J, own, x, g);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, b.comm);
  if (rc != AD_OK) fprintf(stderr, "[%d] heat_mpi: ad_gradient: %s: %s\n", b.rank, ad_errname(rc), ad_tape_error_message(tape));
  if (worst != AD_OK) {
    ad_tape_destroy(tape);
    MPI_Finalize();
    return 1;
  }
  ad_stats st;
  ad_tape_stats(tape, &st);
  double mib = st.bytes_used / 1048576.0, total_mib = 0.0;
  MPI_Reduce(&mib, &total_mib, 1, MPI_DOUBLE, MPI_SUM, 0, b.comm);
  if (b.rank == 0) printf("tapes: %.1f MiB recorded on %d ranks\n\n", total_mib, b.size);

  /* Entries to check: a corner (never read by the stencil), the first
   * interior cell, the last row of rank 0's block and the first row of rank
   * 1's (whose derivatives cross the block boundary through the ghost rows),
   * the centre, and an interior cell near the far corner. */
  int r1 = b.size > 1 ? n / b.size + (n % b.size > 0) : n / 2; /* first row of rank 1 */
  size_t cells = (size_t)n * n;
  size_t pick[6] = {0, (size_t)n + 1, (size_t)(r1 - 1) * n + n / 3, (size_t)r1 * n + n / 3, cells / 2 + n / 2,
                    cells - n - 2};
  double Jd = ad_value(J);
  MPI_Bcast(&Jd, 1, MPI_DOUBLE, 0, b.comm);
  /* Central differences are only as good as the rounding noise in J, which
   * grows roughly like the square root of the number of operations, divided
   * by the step: that is the absolute tolerance. */
  sim sm = {&b, u, v};
  ad_check_options co;
  example_check_columns(&co, pick, 6, 1e-6, DBL_EPSILON * fabs(Jd) * sqrt((double)cells * (b.steps + 1)) / 1e-4,
                        "dJ/du0 of the parallel heat kernel");
  ad_check_result cr;
  rc = ad_mpi_check_gradient(b.comm, heat_fn, &sm, own, u0, 1, &co, &cr);
  if (rc != AD_OK && b.rank == 0) failures++;

  if (png || vtk || fig) {
    /* The map on rank 0: blocks of whole rows, in rank order. */
    int *counts = xmalloc((size_t)b.size * sizeof *counts), *displs = xmalloc((size_t)b.size * sizeof *displs);
    int mine = (int)own;
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, b.comm);
    for (int r = 0; r < b.size && b.rank == 0; r++) displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    double *map = b.rank == 0 ? xmalloc(cells * sizeof *map) : NULL;
    MPI_Gatherv(g, mine, MPI_DOUBLE, map, counts, displs, MPI_DOUBLE, 0, b.comm);
    if (b.rank == 0) {
      printf("\n");
      char sub[160];
      snprintf(sub, sizeof sub, "J = \u03a3 u\u209c\u00b2 after T = %d steps on %d x %d cells, %d ranks; red: raising u0 raises J",
               b.steps, n, n, b.size);
      failures += heat_maps_write("heat_mpi", n, map, vtk, png, fig, sub);
    }
    free(map), free(counts), free(displs);
  }
#endif

  if (n == 128 && b.steps == 100) {
    /* The published values of this kernel, to 12 significant digits. */
    struct reference { const char *what; double got, want; } ref[3] = {{"J", ad_value(J), 18150.0729665}};
    int nref = 1;
#ifndef ARIADNE_PASSIVE
    ref[nref++] = (struct reference){"dJ/du0[N+1]", entry(&b, g, (size_t)n + 1, NULL), 3.24572929612e-06};
    ref[nref++] = (struct reference){"dJ/du0[N*N/2+N/2]", entry(&b, g, cells / 2 + n / 2, NULL), 8.41379276415e-05};
#endif
    if (b.rank == 0) printf("\nreference values (N = 128, T = 100):\n");
    for (int r = 0; r < nref && b.rank == 0; r++) {
      double rel = fabs(ref[r].got - ref[r].want) / fabs(ref[r].want);
      int ok = rel < 1e-10;
      printf("  %-18s %.12g (reference %.12g)%s\n", ref[r].what, ref[r].got, ref[r].want, ok ? "" : "  MISMATCH");
      failures += !ok;
    }
  }

  ad_tape_destroy(tape);
  free(u0), free(g), free(x), free(u), free(v);
  return example_mpi_finish(b.comm, "heat_mpi", failures);
}
