/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne_bench_heat_mpi: the reference kernel on MPI ranks (see README.md beside this file).
 *
 * The N x N grid is cut into blocks of whole rows, one block per rank; before
 * each step every rank exchanges one ghost row with each neighbour through
 * ad_mpi_sendrecv (MPI_PROC_NULL beyond the first and the last block), and
 * J = sum_k u_T[k]^2 is summed over the ranks with ad_mpi_allreduce. Each
 * rank takes the gradient dJ/du0 of its own rows with ad_gradient.
 *
 * Launched on P processes (mpiexec -n 4), the program runs the kernel on
 * sub-communicators of 1, 2 and 4 ranks in turn (those that fit in P; the
 * other ranks wait), and reports for each:
 *   - the time of the plain double program (same decomposition, MPI_Sendrecv
 *     and MPI_Allreduce), the time to record and to sweep, and the gradient
 *     ratio (record + reverse) / primal, each time the minimum over the
 *     repetitions of the slowest rank, measured side by side in one run;
 *   - the payload the adjoint sweep sends over the payload the recording
 *     sends (ad_mpi_stats, summed over the ranks), which must be exactly 1;
 *   - the gathered gradient's largest difference from the serial gradient,
 *     relative to its largest entry. The serial gradient comes from a
 *     hand-written adjoint on rank 0; at the default size J and two entries
 *     are also checked against the published reference values.
 * It prints a table, then one JSON object per line and rank count, and exits
 * non-zero if any check fails.
 */
#define _DEFAULT_SOURCE
#include <ariadne_mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "heat_ad.h"

/* Values differ from the serial ones only in the order of the sums (the
 * allreduce, the adjoints of ghost cells added on their owner), so they agree
 * to rounding; the rounding of J grows with its number of terms, hence TOL_J
 * per 128 x 128 cells. The reference values carry 12 digits. */
#define TOL_J 1e-12
#define TOL_GRAD 1e-10
#define TOL_REF 5e-11

#define MAX_COUNTS 16

enum { VAR_OP, VAR_CUSTOM };
static const char *const variant_names[] = {"op", "custom"};

typedef struct options {
  int n, steps, reps, variant;
  int counts[MAX_COUNTS], ncounts;
} options;

/* What one rank count measured, as rank 0 of its sub-communicator sees it. */
typedef struct result {
  int ranks, ran;
  double primal_s, record_s, reverse_s, grad_s; /* minima over the repetitions of the slowest rank */
  double J, J_primal;
  uint64_t forward_bytes, adjoint_bytes; /* summed over the ranks, last repetition */
  int bytes_equal;                       /* adjoint == forward in every repetition */
  double tape_bytes;                     /* summed over the ranks */
  double J_err, grad_err, ref_J_err, ref_g1_err, ref_g2_err, g1, g2;
  int ref, failures;
  char msg[160];
} result;

static int world_rank;

static double rel(double a, double b) { return fabs(a - b) / (fabs(b) > 0.0 ? fabs(b) : 1.0); }

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "[%d] heat_mpi: out of memory (%zu bytes)\n", world_rank, n * size);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* Waiting ranks sleep instead of spinning in MPI: with more processes than
 * cores, a rank that polls takes the core from one that computes. */
static void polite_barrier(MPI_Comm comm) {
  MPI_Request q;
  int done = 0;
  MPI_Ibarrier(comm, &q);
  for (;;) {
    MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    if (done) return;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* ------------------------------------------------------------------------ */
/* The serial reference: primal and hand-written adjoint on the whole grid   */
/* ------------------------------------------------------------------------ */

/* Every state is stored forward, then the transposed steps run backwards
 * (heat_hand.c). */
static double serial_gradient(int n, int steps, const double *u0, double *grad) {
  size_t nn = (size_t)n * (size_t)n;
  double *states = xcalloc((size_t)(steps + 1) * nn, sizeof *states);
  double *ubar = xcalloc(nn, sizeof *ubar), *vbar = xcalloc(nn, sizeof *vbar);
  double J = heat_hand_forward(n, steps, u0, states);
  heat_hand_reverse(n, steps, states, ubar, vbar, grad);
  free(states);
  free(ubar);
  free(vbar);
  return J;
}

/* ------------------------------------------------------------------------ */
/* The distributed kernel                                                    */
/* ------------------------------------------------------------------------ */

/* One rank's block: global rows [row0, row0 + rows), stored with a ghost row
 * above (local row 0) and below (local row rows + 1). */
typedef struct block {
  MPI_Comm comm;
  int rank, size, n, steps, variant;
  int row0, rows;
  int li0, li1;  /* the local rows [li0, li1) that a step updates: the own rows but the grid's boundary */
  int up, down;  /* neighbour ranks, MPI_PROC_NULL beyond the grid */
  double *u, *v; /* primal state */
  ad_tape *tape;
  ad_real *x, *ua, *va; /* inputs (own rows) and active state */
  double *g;            /* dJ/du0 of the own rows */
} block;

static void block_rows(int n, int size, int rank, int *row0, int *rows) {
  int base = n / size, extra = n % size;
  *rows = base + (rank < extra);
  *row0 = rank * base + (rank < extra ? rank : extra);
}

static void initial_rows(const block *b, double *u0) {
  for (int li = 0; li < b->rows; li++)
    for (int j = 0; j < b->n; j++) {
      int k = (b->row0 + li) * b->n + j;
      u0[li * b->n + j] = heat_u0(k);
    }
}

/* Plain double program: the denominator of the gradient ratio. */
static double primal(block *b, const double *u0) {
  int n = b->n;
  size_t own = (size_t)b->rows * (size_t)n;
  memcpy(b->u + n, u0, own * sizeof *b->u);
  memcpy(b->v + n, u0, own * sizeof *b->v); /* the fixed boundary of the next state */
  double *u = b->u, *v = b->v;
  for (int t = 0; t < b->steps; t++) {
    MPI_Sendrecv(u + n, n, MPI_DOUBLE, b->up, 0, u + (size_t)(b->rows + 1) * n, n, MPI_DOUBLE, b->down, 0, b->comm,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(u + (size_t)b->rows * n, n, MPI_DOUBLE, b->down, 1, u, n, MPI_DOUBLE, b->up, 1, b->comm,
                 MPI_STATUS_IGNORE);
    heat_kernel_rows(n, b->li0, b->li1, u, v);
    double *w = u;
    u = v;
    v = w;
  }
  double Jl = 0.0, J = 0.0;
  for (size_t k = 0; k < own; k++) Jl += u[n + k] * u[n + k];
  MPI_Allreduce(&Jl, &J, 1, MPI_DOUBLE, MPI_SUM, b->comm);
  return J;
}

/* The port of primal(): record, then one reverse sweep on every rank. */
static int gradient(block *b, const double *u0, double *J, double *record_s, double *reverse_s) {
  int n = b->n, rc = MPI_SUCCESS;
  size_t own = (size_t)b->rows * (size_t)n;
  double t0 = bench_now();
  ad_tape_reset(b->tape);
  ad_tape_begin(b->tape);
  for (size_t k = 0; k < own; k++) b->x[k] = b->ua[n + k] = b->va[n + k] = ad_input(u0[k]);
  ad_real *u = b->ua, *v = b->va;
  for (int t = 0; t < b->steps && rc == MPI_SUCCESS; t++) {
    rc = ad_mpi_sendrecv(u + n, n, AD_MPI_REAL, b->up, 0, u + (size_t)(b->rows + 1) * n, n, AD_MPI_REAL, b->down, 0,
                         b->comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
      rc = ad_mpi_sendrecv(u + (size_t)b->rows * n, n, AD_MPI_REAL, b->down, 1, u, n, AD_MPI_REAL, b->up, 1, b->comm,
                           MPI_STATUS_IGNORE);
    heat_ad_rows(b->variant == VAR_OP ? HEAT_MODE_OP : HEAT_MODE_CUSTOM, n, b->li0, b->li1, u, v);
    ad_real *w = u;
    u = v;
    v = w;
  }
  ad_real Jl = ad_dot(own, u + n, u + n), Jall = ad_const(0.0);
  if (rc == MPI_SUCCESS) rc = ad_mpi_allreduce(&Jl, &Jall, 1, AD_MPI_REAL, MPI_SUM, b->comm);
  ad_tape_end(b->tape);
  double t1 = bench_now();
  if (rc != MPI_SUCCESS) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    fprintf(stderr, "[%d] heat_mpi: communication failed while recording: %s\n", world_rank, s);
  }
  /* The allreduce leaves a copy of J on every rank, and the reverse sweep
   * adds up the adjoints of all copies: seeding every copy would give
   * size * dJ/du0. Rank 0 differentiates its copy; the others pass a passive
   * value, for which ad_gradient still runs their part of the sweep. */
  ad_real y = b->rank == 0 ? Jall : ad_const(ad_value(Jall));
  int arc = ad_gradient(b->tape, y, own, b->x, b->g);
  double t2 = bench_now();
  if (arc != AD_OK)
    fprintf(stderr, "[%d] heat_mpi: ad_gradient: %s: %s\n", world_rank, ad_errname(arc),
            ad_tape_error_message(b->tape));
  *J = ad_value(Jall);
  *record_s = t1 - t0;
  *reverse_s = t2 - t1;
  return rc == MPI_SUCCESS && arc == AD_OK ? 0 : 1;
}

static double max_over(double x, MPI_Comm comm) {
  double m;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

static uint64_t sum_over(uint64_t x, MPI_Comm comm) {
  uint64_t s;
  MPI_Allreduce(&x, &s, 1, MPI_UINT64_T, MPI_SUM, comm);
  return s;
}

/* Run the kernel on `comm` (this rank is one of its ranks) and fill *r on its
 * rank 0. ref_g and ref_J: the serial gradient and J (rank 0 only). */
static void run_on(const options *o, MPI_Comm comm, const double *ref_g, double ref_J, result *r) {
  block b;
  memset(&b, 0, sizeof b);
  b.comm = comm;
  MPI_Comm_rank(comm, &b.rank);
  MPI_Comm_size(comm, &b.size);
  b.n = o->n;
  b.steps = o->steps;
  b.variant = o->variant;
  block_rows(o->n, b.size, b.rank, &b.row0, &b.rows);
  b.li0 = b.row0 == 0 ? 2 : 1;
  b.li1 = b.row0 + b.rows == o->n ? b.rows : b.rows + 1;
  b.up = b.rank > 0 ? b.rank - 1 : MPI_PROC_NULL;
  b.down = b.rank < b.size - 1 ? b.rank + 1 : MPI_PROC_NULL;
  int n = o->n;
  size_t own = (size_t)b.rows * (size_t)n, local = own + 2 * (size_t)n;
  double *u0 = xcalloc(own, sizeof *u0);
  b.u = xcalloc(local, sizeof *b.u);
  b.v = xcalloc(local, sizeof *b.v);
  b.x = xcalloc(own, sizeof *b.x);
  b.ua = xcalloc(local, sizeof *b.ua);
  b.va = xcalloc(local, sizeof *b.va);
  b.g = xcalloc(own, sizeof *b.g);
  for (size_t k = 0; k < local; k++) b.ua[k] = b.va[k] = ad_const(0.0);
  initial_rows(&b, u0);
  b.tape = ad_tape_create();
  if (!b.tape) {
    fprintf(stderr, "[%d] heat_mpi: cannot create a tape\n", world_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int failures = 0, bytes_equal = 1;
  double pbest = INFINITY, rbest = INFINITY, vbest = INFINITY, gbest = INFINITY, J = 0.0, Jp = 0.0;
  uint64_t fwd = 0, adj = 0;
  for (int rep = 0; rep < o->reps; rep++) {
    MPI_Barrier(comm);
    double t0 = bench_now();
    Jp = primal(&b, u0);
    double tp = max_over(bench_now() - t0, comm);
    MPI_Barrier(comm);
    ad_mpi_stats_reset();
    double rec, rev;
    failures += gradient(&b, u0, &J, &rec, &rev);
    ad_mpi_stats st;
    ad_mpi_stats_get(&st);
    /* The slowest rank sets the pace of a parallel program. */
    double tr = max_over(rec, comm), tv = max_over(rev, comm), tg = max_over(rec + rev, comm);
    fwd = sum_over(st.forward_bytes, comm);
    adj = sum_over(st.adjoint_bytes, comm);
    if (adj != fwd) bytes_equal = 0;
    if (tp < pbest) pbest = tp;
    if (tr < rbest) rbest = tr;
    if (tv < vbest) vbest = tv;
    if (tg < gbest) gbest = tg;
  }
  ad_stats ts;
  ad_tape_stats(b.tape, &ts);
  double tape_bytes = 0.0, mine = (double)ts.bytes_used;
  MPI_Reduce(&mine, &tape_bytes, 1, MPI_DOUBLE, MPI_SUM, 0, comm);

  /* The whole gradient on rank 0, in global order. */
  double *g = NULL;
  int *counts = NULL, *displs = NULL;
  if (b.rank == 0) {
    g = xcalloc((size_t)n * (size_t)n, sizeof *g);
    counts = xcalloc((size_t)b.size, sizeof *counts);
    displs = xcalloc((size_t)b.size, sizeof *displs);
    for (int p = 0; p < b.size; p++) {
      int r0, rows;
      block_rows(n, b.size, p, &r0, &rows);
      counts[p] = rows * n;
      displs[p] = r0 * n;
    }
  }
  MPI_Gatherv(b.g, (int)own, MPI_DOUBLE, g, counts, displs, MPI_DOUBLE, 0, comm);
  int all_failures = 0;
  MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, comm);

  if (b.rank == 0) {
    memset(r, 0, sizeof *r);
    r->ranks = b.size;
    r->ran = 1;
    r->primal_s = pbest;
    r->record_s = rbest;
    r->reverse_s = vbest;
    r->grad_s = gbest;
    r->J = J;
    r->J_primal = Jp;
    r->forward_bytes = fwd;
    r->adjoint_bytes = adj;
    r->bytes_equal = bytes_equal;
    r->tape_bytes = tape_bytes;
    r->failures = all_failures;
    if (all_failures) snprintf(r->msg, sizeof r->msg, "recording or sweep failed on %d rank(s)", all_failures);
    r->J_err = fmax(rel(J, ref_J), rel(Jp, ref_J));
    double gmax = 0.0, dmax = 0.0;
    for (size_t k = 0; k < (size_t)n * (size_t)n; k++) {
      gmax = fmax(gmax, fabs(ref_g[k]));
      dmax = fmax(dmax, fabs(g[k] - ref_g[k]));
    }
    r->grad_err = dmax / (gmax > 0.0 ? gmax : 1.0);
    r->g1 = g[n + 1];
    r->g2 = g[(size_t)n * (size_t)n / 2 + (size_t)n / 2];
    r->ref = n == REF_N && o->steps == REF_T;
    if (r->ref) {
      r->ref_J_err = rel(J, REF_J);
      r->ref_g1_err = rel(r->g1, REF_G1);
      r->ref_g2_err = rel(r->g2, REF_G2);
    }
    if (!(r->J_err <= TOL_J * fmax(1.0, (double)n * n / (REF_N * REF_N))))
      r->failures++, snprintf(r->msg, sizeof r->msg, "J differs from the serial J");
    if (!(r->grad_err <= TOL_GRAD))
      r->failures++, snprintf(r->msg, sizeof r->msg, "the gradient differs from the serial gradient");
    if (r->ref && !(r->ref_J_err <= TOL_REF && r->ref_g1_err <= TOL_REF && r->ref_g2_err <= TOL_REF))
      r->failures++, snprintf(r->msg, sizeof r->msg, "J or dJ/du0 differs from the reference values");
    if (!bytes_equal)
      r->failures++, snprintf(r->msg, sizeof r->msg, "adjoint payload %llu bytes != forward payload %llu bytes",
                              (unsigned long long)adj, (unsigned long long)fwd);
  }
  free(g);
  free(counts);
  free(displs);
  ad_tape_destroy(b.tape);
  free(u0);
  free(b.u);
  free(b.v);
  free(b.x);
  free(b.ua);
  free(b.va);
  free(b.g);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

static void json_num(const char *key, double x) {
  if (isfinite(x))
    printf("\"%s\":%.12g,", key, x);
  else
    printf("\"%s\":null,", key);
}

static void report(const options *o, int world_size, const result *res, int nres) {
  double cells = (double)(o->n - 2) * (double)(o->n - 2) * (double)o->steps;
  printf("heat kernel on MPI: N=%d T=%d (%.0f cell updates), reps=%d, variant %s, %d processes\n", o->n, o->steps,
         cells, o->reps, variant_names[o->variant], world_size);
  printf("%5s %10s %10s %10s %10s %10s %11s %8s %8s %13s %4s  %s\n", "ranks", "primal_ms", "record_ms", "reverse_ms",
         "grad_ms", "grad_ratio", "fwd_KiB", "adj/fwd", "B/cell", "max_rel_diff", "ok", "J");
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    if (!r->ran) {
      printf("%5d  skipped: only %d processes were launched\n", r->ranks, world_size);
      continue;
    }
    printf("%5d %10.2f %10.2f %10.2f %10.2f %10.2f %11.1f %8.3f %8.1f %13.2e %4s  %.12g\n", r->ranks, 1e3 * r->primal_s,
           1e3 * r->record_s, 1e3 * r->reverse_s, 1e3 * r->grad_s, r->grad_s / r->primal_s,
           (double)r->forward_bytes / 1024.0,
           r->forward_bytes ? (double)r->adjoint_bytes / (double)r->forward_bytes : NAN, r->tape_bytes / cells,
           r->grad_err, r->failures ? "NO" : "yes", r->J);
    if (r->failures) printf("      %s\n", r->msg);
  }
  for (int i = 0; i < nres; i++) {
    const result *r = &res[i];
    printf("{\"bench\":\"heat_mpi\",\"ranks\":%d,\"N\":%d,\"T\":%d,\"reps\":%d,\"variant\":\"%s\",\"skipped\":%s,",
           r->ranks, o->n, o->steps, o->reps, variant_names[o->variant], r->ran ? "false" : "true");
    if (r->ran) {
      json_num("J", r->J);
      json_num("primal_s", r->primal_s);
      json_num("record_s", r->record_s);
      json_num("reverse_s", r->reverse_s);
      json_num("gradient_s", r->grad_s);
      json_num("gradient_ratio", r->grad_s / r->primal_s);
      printf("\"forward_bytes\":%llu,\"adjoint_bytes\":%llu,", (unsigned long long)r->forward_bytes,
             (unsigned long long)r->adjoint_bytes);
      json_num("bytes_ratio", r->forward_bytes ? (double)r->adjoint_bytes / (double)r->forward_bytes : NAN);
      json_num("tape_bytes", r->tape_bytes);
      json_num("bytes_per_cell", r->tape_bytes / cells);
      json_num("J_rel_err_vs_serial", r->J_err);
      json_num("grad_rel_err_vs_serial", r->grad_err);
      json_num("dJdu0_N_plus_1", r->g1);
      json_num("dJdu0_center", r->g2);
      if (r->ref) {
        json_num("J_rel_err_vs_ref", r->ref_J_err);
        json_num("g1_rel_err_vs_ref", r->ref_g1_err);
        json_num("g2_rel_err_vs_ref", r->ref_g2_err);
      }
      printf("\"message\":\"%s\",\"ok\":%s}\n", r->msg, r->failures ? "false" : "true");
    } else {
      printf("\"ok\":true}\n");
    }
  }
}

/* ------------------------------------------------------------------------ */

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long x = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || x < lo || x > hi) return 0;
  *out = (int)x;
  return 1;
}

static int parse_counts(const char *s, options *o) {
  o->ncounts = 0;
  while (*s) {
    char item[16];
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof item || o->ncounts == MAX_COUNTS) return 0;
    memcpy(item, s, len);
    item[len] = '\0';
    if (!parse_int(item, 1, 1 << 20, &o->counts[o->ncounts++])) return 0;
    s += len + (s[len] == ',');
  }
  return o->ncounts > 0;
}

static int usage(const char *prog, int bad) {
  if (world_rank == 0)
    fprintf(bad ? stderr : stdout,
            "usage: mpiexec -n P %s [--N n] [--T steps] [--reps r] [--ranks 1,2,4] [--variant custom|op]\n"
            "  Runs the reference kernel on sub-communicators of each rank count that fits in P\n"
            "  (default N=128, T=100, reps=5, ranks 1,2,4, variant custom).\n",
            prog);
  return bad ? 2 : 0;
}

static int parse_options(int argc, char **argv, options *o) {
  o->n = REF_N;
  o->steps = REF_T;
  o->reps = 5;
  o->variant = VAR_CUSTOM;
  o->counts[0] = 1, o->counts[1] = 2, o->counts[2] = 4, o->ncounts = 3;
  for (int a = 1; a < argc; a++) {
    const char *opt = argv[a], *arg = opt;
    while (*arg == '-') arg++;
    const char *val = a + 1 < argc ? argv[a + 1] : "";
    int ok = 1;
    if (!strcmp(arg, "help") || !strcmp(arg, "h")) return usage(argv[0], 0) - 1;
    if (!strcmp(arg, "N") || !strcmp(arg, "n"))
      ok = parse_int(val, 3, 1 << 15, &o->n), a++;
    else if (!strcmp(arg, "T") || !strcmp(arg, "t"))
      ok = parse_int(val, 0, 1 << 24, &o->steps), a++;
    else if (!strcmp(arg, "reps"))
      ok = parse_int(val, 1, 1000, &o->reps), a++;
    else if (!strcmp(arg, "ranks"))
      ok = parse_counts(val, o), a++;
    else if (!strcmp(arg, "variant")) {
      if (!strcmp(val, "op"))
        o->variant = VAR_OP;
      else if (!strcmp(val, "custom"))
        o->variant = VAR_CUSTOM;
      else
        ok = 0;
      a++;
    } else
      ok = 0;
    if (!ok) {
      if (world_rank == 0) fprintf(stderr, "heat_mpi: bad option or value: %s %s\n", opt, val);
      return usage(argv[0], 1);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int world_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  options o;
  int prc = parse_options(argc, argv, &o);
  if (prc != 0) {
    MPI_Finalize();
    return prc < 0 ? 0 : prc;
  }

  /* The serial reference, computed once on rank 0 while the others wait. */
  size_t nn = (size_t)o.n * (size_t)o.n;
  double *ref_g = NULL, ref_J = 0.0;
  if (world_rank == 0) {
    double *u0 = xcalloc(nn, sizeof *u0);
    for (size_t k = 0; k < nn; k++) u0[k] = heat_u0((double)k);
    ref_g = xcalloc(nn, sizeof *ref_g);
    ref_J = serial_gradient(o.n, o.steps, u0, ref_g);
    free(u0);
  }
  polite_barrier(MPI_COMM_WORLD);

  result res[MAX_COUNTS];
  memset(res, 0, sizeof res);
  for (int i = 0; i < o.ncounts; i++) {
    int p = o.counts[i];
    res[i].ranks = p;
    if (p > world_size || p > o.n) continue;
    /* Ranks 0 .. p-1 of MPI_COMM_WORLD, in order, so that rank 0 of the
     * sub-communicator is rank 0 of the world and holds the reference. */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < p ? 0 : MPI_UNDEFINED, world_rank, &sub);
    if (sub != MPI_COMM_NULL) {
      /* Create the private duplicate now, on every rank at the same point:
       * the primal below runs plain MPI collectives on `sub` before the
       * first ad_mpi_* call there (see ariadne_mpi.h). */
      if (ad_mpi_comm_prepare(sub) != MPI_SUCCESS) {
        fprintf(stderr, "[%d] heat_mpi: ad_mpi_comm_prepare failed\n", world_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      run_on(&o, sub, ref_g, ref_J, &res[i]);
      MPI_Comm_free(&sub);
    }
    polite_barrier(MPI_COMM_WORLD);
  }

  int failures = 0;
  if (world_rank == 0) {
    report(&o, world_size, res, o.ncounts);
    for (int i = 0; i < o.ncounts; i++) failures += res[i].failures;
    if (failures) fprintf(stderr, "heat_mpi: %d check(s) failed\n", failures);
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(ref_g);
  MPI_Finalize();
  return failures != 0;
}
