/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batch_gradients_mpi: the value and gradient of one function at many points,
 * spread over MPI ranks with dynamic load balancing, again and again inside
 * an outer loop (multi-start gradient descent on all points at once).
 *
 * The function. A ball is thrown from the ground with speed v = 10 x0 m/s at
 * the angle theta = x1 (radians) and flies under gravity and quadratic air
 * drag until it lands; RK4 with a fixed step of DT seconds integrates
 *
 *     x' = u,  y' = w,  u' = -K |(u, w)| u,  w' = -G - K |(u, w)| w
 *
 * until y < 0, and the landing point is interpolated linearly inside the
 * last step (which keeps the range continuous in the parameters). The
 * objective is how far the ball misses a target at distance R:
 *
 *     f(x0, x1) = (range / R - 1)^2.
 *
 * The number of steps is the flight time over DT: it depends on the point
 * (from a few steps for a flat, slow throw to a few hundred for a fast lob),
 * so is the control flow, and so the tape must be recorded afresh at every
 * point. Each rank has one tape and reuses it for all its points:
 * ad_tape_reset forgets the previous point but keeps the tape's memory for
 * the next one.
 *
 * The points. M starting throws sweep the angle upwards along the index
 * (from 0.1 to 1.45 rad) with scrambled speeds (5 to 25 m/s), as a parameter
 * sweep would list them. Splitting them statically into one contiguous block
 * per rank gives the last rank the steepest throws, the longest flights and
 * most of the work, and it stays so during the descent, which keeps each
 * throw near its starting angle. The program measures how uneven that is
 * (load imbalance = the largest busy time of a rank over the mean busy time;
 * also the same ratio for RK4 steps, which under the static split depends
 * on the points alone) and uses a dynamic split instead.
 *
 * The dynamic split. Rank 0 owns the points and the results. It hands out
 * chunks of consecutive points on request and works on points itself in
 * between, one point at a time, answering requests after each. A worker asks
 * for two chunks at the start and for one more with every chunk of results
 * it returns, so it always has the next chunk at hand while it computes. The
 * chunks shrink as the batch runs out (a quarter of what is left shared by
 * the ranks, at most CHUNK_MAX points) so that the ranks finish together.
 * Results go straight into their place in rank 0's arrays: they come back in
 * input order, whichever rank computed them. Only plain point-to-point MPI is
 * used (rank 0 sends with MPI_Isend, so it never waits for a busy worker).
 * Rank 0 works too because a rank that only hands out work would leave a
 * core idle on a small machine; answering between points costs it at most
 * one point's time of delay, which the workers' second chunk covers.
 *
 * The results are the same bit for bit at every number of ranks and with
 * either split: a point's value and gradient depend only on the point (the
 * same code on every rank, the tape reset before each point), and nothing
 * is summed across points in an order that depends on who computed what.
 *
 * The split lives in this file, not in Ariadne's MPI layer, on purpose: it
 * is plain MPI with no ad_real in it (nothing to differentiate, no MPI twin
 * for the passive build), and its choices belong to the application: chunk
 * sizes, points shipped with the work or held by every rank, results
 * wanted on one rank or on all. Copy it and adapt those.
 *
 * Why no ad_mpi_* calls: every gradient is computed on one rank from its own
 * tape, and MPI only moves inputs and finished values and gradients around.
 * That traffic is not part of the function being differentiated, so there is
 * nothing to record (the differentiable wrappers would only add their cost).
 *
 * The outer loop. Every point descends on its own with an adaptive step: a
 * step that lowered f is kept and the next one is 1.2 times longer; one that
 * did not is undone and the step halved. Each outer step is one distributed
 * batch: M values and gradients. The throws that end up hitting the target
 * form a family from flat to steep; the program prints a few of them.
 *
 * Checks (the program prints "batch_gradients_mpi: OK" and exits 0 only if all pass):
 *   - the gradients at CHECK_POINTS points spread over the batch, at the
 *     start and at step CHECK_STEP (while the throws still move: at a
 *     minimum the gradient vanishes and the check would say little),
 *     against central finite differences of f;
 *   - the first batch computed with the static and with the dynamic split
 *     is the same bit for bit (values, gradients and step counts);
 *   - --write FILE stores the final points, values and gradients;
 *     --compare FILE checks that this run produced exactly those bits.
 *     CTest runs one rank with --write and 2, 3 and 4 ranks with --compare:
 *     the results do not depend on the number of ranks.
 *
 * Usage: mpiexec -n P batch_gradients_mpi [-m M] [-s STEPS] [--static]
 *                                         [--write FILE] [--compare FILE]
 *   -m M       points (at least CHECK_POINTS = 24; default 1000)
 *   -s STEPS   outer descent steps after the first batch (default 3)
 *   --static   run the descent with the static split (for comparison)
 * It prints, among others, gradients per second over the descent's batches
 * (wall time; the first batch and the checks not counted) and the load
 * imbalance of each split.
 *
 * Built with -DARIADNE_PASSIVE there is no tape: the gradients are then
 * central differences, and the finite-difference check is skipped.
 */
#include <ariadne.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIM 2                  /* parameters of a throw: speed / 10 m/s, angle */
#define NRES (DIM + 2)         /* per point: f, gradient, RK4 steps */
#define CHUNK_MAX 64           /* points in one message at most */
#define PREFETCH 2             /* chunks a worker asks for ahead */
#define CHECK_POINTS 24        /* points whose gradient is checked */
#define CHECK_STEP 3           /* at the start, and again at this step */
#define MAX_STEPS 20000        /* a flight longer than 400 s is cut short */
static const double G = 9.81;  /* m/s^2 */
static const double K = 0.02;  /* drag / mass, 1/m */
static const double DT = 0.02; /* s */
static const double R = 20.0;  /* distance to the target, m */

enum { TAG_ASK = 1, TAG_RESULTS, TAG_WORK, TAG_POINTS };

/* ------------------------------------------------------------------------ */
/* The function                                                              */
/* ------------------------------------------------------------------------ */

static void accel(const ad_real *s, ad_real *ds) {
  ad_real speed = ad_sqrt(ad_add(ad_mul(s[2], s[2]), ad_mul(s[3], s[3])));
  ad_real drag = ad_mul(K, speed);
  ds[0] = s[2];
  ds[1] = s[3];
  ds[2] = ad_neg(ad_mul(drag, s[2]));
  ds[3] = ad_sub(ad_neg(ad_mul(drag, s[3])), G);
}

/* The miss f(x) of the throw x; *steps gets the RK4 steps it took. */
static ad_real miss(const ad_real *x, int *steps) {
  ad_real v = ad_mul(x[0], 10.0);
  ad_real s[4] = {ad_const(0.0), ad_const(0.0), ad_mul(v, ad_cos(x[1])), ad_mul(v, ad_sin(x[1]))};
  ad_real range = s[0];
  int n;
  for (n = 1; n <= MAX_STEPS; n++) {
    ad_real k1[4], k2[4], k3[4], k4[4], t[4], next[4];
    accel(s, k1);
    for (int j = 0; j < 4; j++) t[j] = ad_add(s[j], ad_mul(0.5 * DT, k1[j]));
    accel(t, k2);
    for (int j = 0; j < 4; j++) t[j] = ad_add(s[j], ad_mul(0.5 * DT, k2[j]));
    accel(t, k3);
    for (int j = 0; j < 4; j++) t[j] = ad_add(s[j], ad_mul(DT, k3[j]));
    accel(t, k4);
    for (int j = 0; j < 4; j++) {
      ad_real sum = ad_add(ad_add(k1[j], k4[j]), ad_mul(2.0, ad_add(k2[j], k3[j])));
      next[j] = ad_add(s[j], ad_mul(DT / 6.0, sum));
    }
    if (ad_lt(next[1], 0.0)) { /* landed inside this step: where y = 0 on the chord */
      ad_real frac = ad_div(s[1], ad_sub(s[1], next[1]));
      range = ad_add(s[0], ad_mul(frac, ad_sub(next[0], s[0])));
      break;
    }
    memcpy(s, next, sizeof s);
    range = s[0];
  }
  *steps = n <= MAX_STEPS ? n : MAX_STEPS;
  ad_real e = ad_sub(ad_div(range, R), 1.0);
  return ad_mul(e, e);
}

/* f at x, not recorded (a passive evaluation, as finite differences need). */
static double miss_at(const double *x, int *steps) {
  ad_real xa[DIM];
  for (int k = 0; k < DIM; k++) xa[k] = ad_const(x[k]);
  return ad_value(miss(xa, steps));
}

/* Central differences of f at x. */
static void fd_gradient(const double *x, double *g) {
  for (int k = 0; k < DIM; k++) {
    double q[DIM], h = 1e-6 * (1.0 + fabs(x[k]));
    int steps;
    memcpy(q, x, sizeof q);
    q[k] = x[k] + h;
    double fp = miss_at(q, &steps);
    q[k] = x[k] - h;
    double fm = miss_at(q, &steps);
    g[k] = (fp - fm) / (2.0 * h);
  }
}

/* f and its gradient at x into res[0..NRES): f, df/dx, steps. The tape is
 * this rank's one tape, reset and re-recorded for every point because the
 * number of steps depends on the point. Returns 0 or 1 (an error, printed). */
static int point_eval(ad_tape *tape, int rank, const double *x, double *res) {
  int steps = 0, failed = 0;
#ifndef ARIADNE_PASSIVE
  ad_real xa[DIM];
  ad_tape_reset(tape); /* forget the previous point, keep the memory */
  ad_tape_begin(tape);
  for (int k = 0; k < DIM; k++) xa[k] = ad_input(x[k]);
  ad_real f = miss(xa, &steps);
  ad_tape_end(tape);
  res[0] = ad_value(f);
  int rc = ad_gradient(tape, f, DIM, xa, res + 1);
  if (rc != AD_OK) {
    fprintf(stderr, "[%d] batch_gradients_mpi: ad_gradient at (%g, %g): %s: %s\n", rank, x[0], x[1], ad_errname(rc),
            ad_tape_error_message(tape));
    failed = 1;
  }
#else
  (void)tape;
  (void)rank;
  res[0] = miss_at(x, &steps);
  fd_gradient(x, res + 1);
#endif
  res[DIM + 1] = steps;
  return failed;
}

/* ------------------------------------------------------------------------ */
/* Batches over the ranks                                                    */
/* ------------------------------------------------------------------------ */

typedef struct batch {
  MPI_Comm comm; /* a duplicate of the program's communicator: its own tags */
  int rank, size, m;
  ad_tape *tape;
  double *chunk_x, *chunk_res; /* a worker's chunk of points and their results */
  double busy;                 /* seconds spent evaluating points, this batch */
  double cpu;                  /* processor seconds of those, all batches */
  double work;                 /* RK4 steps of the points evaluated, this batch */
  int evaluated;               /* points evaluated, this batch */
  int errors;                  /* points whose evaluation failed, all batches */
} batch;

static void eval_range(batch *b, int count, const double *x, double *res) {
  double t0 = MPI_Wtime();
  clock_t c0 = clock();
  for (int i = 0; i < count; i++) {
    b->errors += point_eval(b->tape, b->rank, x + (size_t)i * DIM, res + (size_t)i * NRES);
    b->work += res[(size_t)i * NRES + DIM + 1];
  }
  b->busy += MPI_Wtime() - t0;
  b->cpu += (double)(clock() - c0) / CLOCKS_PER_SEC;
  b->evaluated += count;
}

static void block_of(int m, int size, int rank, int *first, int *count) {
  int base = m / size, extra = m % size;
  *count = base + (rank < extra);
  *first = rank * base + (rank < extra ? rank : extra);
}

/* The static split: one contiguous block per rank, scattered from rank 0 and
 * gathered back. X (m x DIM) and res (m x NRES) are rank 0's. Collective. */
static void batch_static(batch *b, const double *X, double *res) {
  int first, count, *xc = NULL, *xd = NULL, *rc = NULL, *rd = NULL;
  block_of(b->m, b->size, b->rank, &first, &count);
  double *x = malloc(((size_t)count * DIM + 1) * sizeof *x), *r = malloc(((size_t)count * NRES + 1) * sizeof *r);
  if (b->rank == 0) {
    xc = malloc(4 * (size_t)b->size * sizeof *xc);
    if (!xc) MPI_Abort(b->comm, 1);
    xd = xc + b->size;
    rc = xd + b->size;
    rd = rc + b->size;
    for (int p = 0; p < b->size; p++) {
      block_of(b->m, b->size, p, &xd[p], &xc[p]);
      rc[p] = xc[p] * NRES;
      rd[p] = xd[p] * NRES;
      xc[p] *= DIM;
      xd[p] *= DIM;
    }
  }
  if (!x || !r) MPI_Abort(b->comm, 1);
  b->busy = b->work = 0.0;
  b->evaluated = 0;
  MPI_Scatterv(X, xc, xd, MPI_DOUBLE, x, count * DIM, MPI_DOUBLE, 0, b->comm);
  eval_range(b, count, x, r);
  MPI_Gatherv(r, count * NRES, MPI_DOUBLE, res, rc, rd, MPI_DOUBLE, 0, b->comm);
  free(xc);
  free(x);
  free(r);
}

/* Points in the next chunk: a quarter of what is left, shared by the ranks. */
static int chunk_size(int left, int size) {
  int c = left / (4 * size);
  return c < 1 ? 1 : c > CHUNK_MAX ? CHUNK_MAX : c;
}

/* Rank 0 of the dynamic split: hand out chunks on request, take results in,
 * and evaluate points itself in between, one at a time. */
static void dynamic_root(batch *b, const double *X, double *res) {
  int size = b->size, m = b->m, next = 0;
  /* Per worker: messages heard, and the reply slots (a header and the
   * chunk's points, one slot per request a worker may have open). Every
   * worker sends PREFETCH requests, and one more message with the results
   * of each chunk it is sent; every message gets a reply. */
  int *heard = calloc((size_t)size, sizeof *heard), *hdr = calloc((size_t)size * PREFETCH * 2, sizeof *hdr);
  MPI_Request *req = malloc((size_t)size * PREFETCH * 2 * sizeof *req);
  if (!heard || !hdr || !req) MPI_Abort(b->comm, 1);
  for (int k = 0; k < size * PREFETCH * 2; k++) req[k] = MPI_REQUEST_NULL;
  long expected = (long)(size - 1) * PREFETCH, received = 0;

  for (;;) {
    /* Answer whoever has asked. */
    while (received < expected) {
      MPI_Status st;
      int flag;
      if (next < m) {
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, b->comm, &flag, &st);
        if (!flag) break;
      } else {
        MPI_Probe(MPI_ANY_SOURCE, TAG_ASK, b->comm, &st); /* nothing left to do but wait */
      }
      int w = st.MPI_SOURCE, got[2];
      MPI_Recv(got, 2, MPI_INT, w, TAG_ASK, b->comm, MPI_STATUS_IGNORE);
      if (got[1] > 0) /* the results of a chunk, into their place */
        MPI_Recv(res + (size_t)got[0] * NRES, got[1] * NRES, MPI_DOUBLE, w, TAG_RESULTS, b->comm, MPI_STATUS_IGNORE);
      /* The worker has received the reply this slot held before (it asks
       * again only after a chunk it was sent), so the wait is immediate. */
      int s = (w * PREFETCH + heard[w]++ % PREFETCH) * 2, c = next < m ? chunk_size(m - next, size) : 0;
      received++;
      for (int k = s; k < s + 2; k++) MPI_Wait(&req[k], MPI_STATUS_IGNORE);
      hdr[s] = next;
      hdr[s + 1] = c;
      MPI_Isend(hdr + s, 2, MPI_INT, w, TAG_WORK, b->comm, req + s);
      if (c > 0) {
        MPI_Isend(X + (size_t)next * DIM, c * DIM, MPI_DOUBLE, w, TAG_POINTS, b->comm, req + s + 1);
        next += c;
        expected++; /* its results will come back */
      }
    }
    if (next < m) {
      eval_range(b, 1, X + (size_t)next * DIM, res + (size_t)next * NRES);
      next++;
    } else if (received == expected) {
      break;
    }
  }
  for (int k = 0; k < size * PREFETCH * 2; k++) MPI_Wait(&req[k], MPI_STATUS_IGNORE);
  free(heard);
  free(hdr);
  free(req);
}

/* A worker of the dynamic split: ask, evaluate, return results and ask again. */
static void dynamic_worker(batch *b) {
  int none[2] = {0, 0}, open = PREFETCH;
  for (int k = 0; k < PREFETCH; k++) MPI_Send(none, 2, MPI_INT, 0, TAG_ASK, b->comm);
  while (open > 0) {
    int got[2];
    MPI_Recv(got, 2, MPI_INT, 0, TAG_WORK, b->comm, MPI_STATUS_IGNORE);
    open--;
    if (got[1] == 0) continue; /* no more work: this answers one open request */
    MPI_Recv(b->chunk_x, got[1] * DIM, MPI_DOUBLE, 0, TAG_POINTS, b->comm, MPI_STATUS_IGNORE);
    eval_range(b, got[1], b->chunk_x, b->chunk_res);
    MPI_Send(got, 2, MPI_INT, 0, TAG_ASK, b->comm);
    MPI_Send(b->chunk_res, got[1] * NRES, MPI_DOUBLE, 0, TAG_RESULTS, b->comm);
    open++;
  }
}

/* The dynamic split. X (m x DIM) and res (m x NRES) are rank 0's. Collective. */
static void batch_dynamic(batch *b, const double *X, double *res) {
  b->busy = b->work = 0.0;
  b->evaluated = 0;
  if (b->rank == 0)
    dynamic_root(b, X, res);
  else
    dynamic_worker(b);
}

/* Load imbalance of the last batch: the largest busy time of a rank over
 * the mean (1 is perfect); *work gets the same for the RK4 steps each rank
 * took (under a static split they depend on the points alone, not on the
 * machine or on what else runs on it). Collective; meaningful on rank 0. */
static double imbalance(const batch *b, double *work) {
  double mine[2] = {b->busy, b->work}, mx[2], sum[2];
  MPI_Reduce(mine, mx, 2, MPI_DOUBLE, MPI_MAX, 0, b->comm);
  MPI_Reduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, 0, b->comm);
  if (work) *work = sum[1] > 0.0 ? mx[1] / (sum[1] / b->size) : 1.0;
  return sum[0] > 0.0 ? mx[0] / (sum[0] / b->size) : 1.0;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */

/* The gradients of CHECK_POINTS points spread over the batch against central
 * differences. Rank 0 only. Returns the number of failures; *worst gets the
 * largest error |g - fd| / max(1, |fd|). */
static int check_fd(int m, const double *X, const double *res, int it, double *worst) {
  char when[32];
  if (it == 0)
    snprintf(when, sizeof when, "at the start");
  else
    snprintf(when, sizeof when, "at step %d", it);
#ifndef ARIADNE_PASSIVE
  int failures = 0;
  *worst = 0.0;
  for (int j = 0; j < CHECK_POINTS; j++) {
    int i = (int)((long)j * (m - 1) / (CHECK_POINTS - 1));
    double fd[DIM];
    fd_gradient(X + (size_t)i * DIM, fd);
    for (int k = 0; k < DIM; k++) {
      double g = res[(size_t)i * NRES + 1 + k], err = fabs(g - fd[k]) / fmax(1.0, fabs(fd[k]));
      if (!(err <= 1e-6)) {
        fprintf(stderr, "batch_gradients_mpi: %s, point %d: df/dx%d = %.10g, finite differences %.10g\n", when, i, k, g,
                fd[k]);
        failures++;
      }
      if (!(err <= *worst)) *worst = err;
    }
  }
  printf("gradients at %d points %s against central differences: largest error %.2e (tolerance 1e-6)\n", CHECK_POINTS,
         when, *worst);
  return failures;
#else
  (void)m;
  (void)X;
  (void)res;
  *worst = 0.0;
  printf("passive build: the gradients are central differences, not checked against themselves (%s)\n", when);
  return 0;
#endif
}

static const char MAGIC[16] = "ARIADNE-BATCH-1";

/* Write, or compare with a file, the final state: m, steps, then the best
 * points, their values and gradients and the last batch's results. Rank 0.
 * Returns the number of failures. */
static int result_file(const char *path, int write, int m, int steps, const double *data, size_t n) {
  int head[2] = {m, steps}, failures = 0;
  FILE *fp = fopen(path, write ? "wb" : "rb");
  if (!fp) {
    fprintf(stderr, "batch_gradients_mpi: cannot open %s\n", path);
    return 1;
  }
  if (write) {
    if (fwrite(MAGIC, 1, sizeof MAGIC, fp) != sizeof MAGIC || fwrite(head, sizeof head, 1, fp) != 1 ||
        fwrite(data, sizeof *data, n, fp) != n) {
      fprintf(stderr, "batch_gradients_mpi: cannot write %s\n", path);
      failures = 1;
    } else {
      printf("results written to %s\n", path);
    }
  } else {
    char magic[sizeof MAGIC];
    int fhead[2];
    double *ref = malloc(n * sizeof *ref);
    if (!ref) MPI_Abort(MPI_COMM_WORLD, 1);
    if (fread(magic, 1, sizeof magic, fp) != sizeof magic || memcmp(magic, MAGIC, sizeof magic) != 0 ||
        fread(fhead, sizeof fhead, 1, fp) != 1 || fread(ref, sizeof *ref, n, fp) != n) {
      fprintf(stderr, "batch_gradients_mpi: %s is not a result file of this program\n", path);
      failures = 1;
    } else if (fhead[0] != m || fhead[1] != steps) {
      fprintf(stderr, "batch_gradients_mpi: %s holds %d points after %d steps, this run %d after %d\n", path, fhead[0],
              fhead[1], m, steps);
      failures = 1;
    } else {
      size_t differ = 0, first = 0;
      for (size_t i = 0; i < n; i++)
        if (memcmp(&ref[i], &data[i], sizeof *data) != 0 && differ++ == 0) first = i;
      if (differ) {
        fprintf(stderr,
                "batch_gradients_mpi: %zu of %zu numbers differ from %s, the first at %zu: %.17g here, %.17g there\n",
                differ, n, path, first, data[first], ref[first]);
        failures = 1;
      } else {
        printf("results identical, bit for bit, to %s\n", path);
      }
    }
    free(ref);
  }
  fclose(fp);
  return failures;
}

/* ------------------------------------------------------------------------ */
/* The program                                                               */
/* ------------------------------------------------------------------------ */

/* Starting throw i of m: angle 0.1 to 1.45 rad rising with i, speed 5 to
 * 25 m/s scrambled. */
static void start_point(int i, int m, double *x) {
  double u = m > 1 ? (double)i / (m - 1) : 0.0, a = fmod(0.6180339887498949 * (i + 1), 1.0);
  x[0] = 0.5 + 2.0 * a;
  x[1] = 0.1 + 1.35 * u;
}

static int usage(int rank, const char *prog) {
  if (rank == 0)
    fprintf(stderr, "usage: mpiexec -n P %s [-m POINTS] [-s STEPS] [--static] [--write FILE] [--compare FILE]\n", prog);
  return 2;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  batch b;
  memset(&b, 0, sizeof b);
  MPI_Comm_dup(MPI_COMM_WORLD, &b.comm);
  MPI_Comm_rank(b.comm, &b.rank);
  MPI_Comm_size(b.comm, &b.size);

  /* A launcher of one MPI starts a program built with another as separate
   * one-rank programs, and each would pass. Ariadne's MPI layer catches that
   * (ARIADNE_EXPECT_RANKS), but this program makes no ad_mpi_* call, so it
   * checks itself. */
  const char *expect = getenv("ARIADNE_EXPECT_RANKS");
  if (expect && *expect && atoi(expect) != b.size) {
    fprintf(stderr, "[%d] batch_gradients_mpi: %d rank(s), but ARIADNE_EXPECT_RANKS=%s\n", b.rank, b.size, expect);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }

  int m = 1000, steps = 3, split_static = 0, bad = 0;
  const char *write_path = NULL, *compare_path = NULL;
  for (int a = 1; a < argc && !bad; a++) {
    if (!strcmp(argv[a], "-m") && a + 1 < argc)
      bad = (m = atoi(argv[++a])) < 2;
    else if (!strcmp(argv[a], "-s") && a + 1 < argc)
      bad = (steps = atoi(argv[++a])) < 0;
    else if (!strcmp(argv[a], "--static"))
      split_static = 1;
    else if (!strcmp(argv[a], "--write") && a + 1 < argc)
      write_path = argv[++a];
    else if (!strcmp(argv[a], "--compare") && a + 1 < argc)
      compare_path = argv[++a];
    else
      bad = 1;
  }
  if (bad || m < CHECK_POINTS) {
    int rc = usage(b.rank, argv[0]);
    MPI_Comm_free(&b.comm);
    MPI_Finalize();
    return rc;
  }
  b.m = m;
  b.tape = ad_tape_create();
  b.chunk_x = malloc((size_t)CHUNK_MAX * DIM * sizeof *b.chunk_x);
  b.chunk_res = malloc((size_t)CHUNK_MAX * NRES * sizeof *b.chunk_res);
  if (!b.tape || !b.chunk_x || !b.chunk_res) MPI_Abort(MPI_COMM_WORLD, 1);

  /* Rank 0's state of the descent: the trial points X and the results there,
   * the best point of each throw so far with its value and gradient, and its
   * step length. */
  double *X = NULL, *res = NULL, *res_static = NULL, *best = NULL, *step = NULL;
  int failures = 0;
  if (b.rank == 0) {
    X = malloc((size_t)m * DIM * sizeof *X);
    res = malloc((size_t)m * NRES * sizeof *res);
    res_static = malloc((size_t)m * NRES * sizeof *res_static);
    best = malloc((size_t)m * (DIM + NRES) * sizeof *best); /* point, then f, gradient, steps */
    step = malloc((size_t)m * sizeof *step);
    if (!X || !res || !res_static || !best || !step) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < m; i++) {
      start_point(i, m, X + (size_t)i * DIM);
      best[(size_t)i * (DIM + NRES) + DIM] = INFINITY;
      step[i] = 0.05;
    }
    printf("batch_gradients_mpi: %d throws, %d descent steps, %d rank(s), %s split\n\n", m, steps, b.size,
           split_static ? "static" : "dynamic");
  }

  /* The first batch twice: statically split, then dynamically. */
  double worst, imb_static, imb_dynamic, work_static, work_dynamic;
  batch_static(&b, X, res_static);
  imb_static = imbalance(&b, &work_static);
  batch_dynamic(&b, X, res);
  imb_dynamic = imbalance(&b, &work_dynamic);
  if (b.rank == 0) {
    long total_steps = 0;
    for (int i = 0; i < m; i++) total_steps += (long)res[(size_t)i * NRES + DIM + 1];
    printf("first batch: %.1f RK4 steps per throw on average\n", (double)total_steps / m);
    printf("load imbalance of the first batch, the largest share of a rank over the mean:\n");
    printf("  static split:  busy time %.2f, RK4 steps %.2f\n", imb_static, work_static);
    printf("  dynamic split: busy time %.2f, RK4 steps %.2f\n", imb_dynamic, work_dynamic);
    if (memcmp(res, res_static, (size_t)m * NRES * sizeof *res) != 0) {
      fprintf(stderr, "batch_gradients_mpi: the static and the dynamic split gave different results\n");
      failures++;
    } else {
      printf("static and dynamic split: identical results, bit for bit\n");
    }
    failures += check_fd(m, X, res, 0, &worst);
    printf("\n%5s %12s %12s %10s\n", "step", "mean f", "hits (1 cm)", "imbalance");
  }

  /* The descent: every step is one batch at the trial points X, then each
   * throw keeps or rejects its trial and takes its next one. */
  b.cpu = 0.0;                                                           /* the descent's only */
  double t_batches = 0.0, imb_sum = 0.0, mine[4] = {0.0, 0.0, 0.0, 0.0}; /* points, RK4 steps, busy, CPU */
  for (int it = 0; it <= steps; it++) {
    double imb = imb_dynamic;
    if (it > 0) {
      MPI_Barrier(b.comm);
      double t0 = MPI_Wtime();
      if (split_static)
        batch_static(&b, X, res);
      else
        batch_dynamic(&b, X, res);
      t_batches += MPI_Wtime() - t0;
      mine[0] += b.evaluated;
      mine[1] += b.work;
      mine[2] += b.busy;
      imb = imbalance(&b, NULL);
      imb_sum += imb;
    }
    if (b.rank != 0) continue;
    if (it == (steps < CHECK_STEP ? steps : CHECK_STEP) && it > 0) failures += check_fd(m, X, res, it, &worst);
    double mean = 0.0;
    int hits = 0;
    for (int i = 0; i < m; i++) {
      double *x = X + (size_t)i * DIM, *r = res + (size_t)i * NRES, *bp = best + (size_t)i * (DIM + NRES);
      if (r[0] < bp[DIM]) { /* better: keep it, and be bolder */
        memcpy(bp, x, DIM * sizeof *x);
        memcpy(bp + DIM, r, NRES * sizeof *r);
        step[i] *= 1.2;
      } else {
        step[i] *= 0.5;
      }
      for (int k = 0; k < DIM; k++) x[k] = bp[k] - step[i] * bp[DIM + 1 + k];
      mean += bp[DIM];
      hits += sqrt(bp[DIM]) * R < 0.01;
    }
    if (it == 0 || it == steps || it % 10 == 0) printf("%5d %12.4e %12d %10.2f\n", it, mean / m, hits, imb);
  }

  /* Who did how much, and how fast. */
  double *all_of = b.rank == 0 ? malloc((size_t)b.size * 4 * sizeof *all_of) : NULL;
  if (b.rank == 0 && !all_of) MPI_Abort(MPI_COMM_WORLD, 1);
  mine[3] = b.cpu;
  MPI_Gather(mine, 4, MPI_DOUBLE, all_of, 4, MPI_DOUBLE, 0, b.comm);
  if (b.rank == 0 && steps > 0) {
    printf("\nthe descent, %s split:\n", split_static ? "static" : "dynamic");
    for (int p = 0; p < b.size; p++)
      printf("  rank %d: %8.0f points, %10.0f RK4 steps, busy %7.3f s (processor %7.3f s)\n", p, all_of[4 * p],
             all_of[4 * p + 1], all_of[4 * p + 2], all_of[4 * p + 3]);
    double work_max = 0.0, work_sum = 0.0;
    for (int p = 0; p < b.size; p++) {
      work_max = fmax(work_max, all_of[4 * p + 1]);
      work_sum += all_of[4 * p + 1];
    }
    printf("load imbalance: busy time %.2f (mean over the batches), RK4 steps %.2f\n", imb_sum / steps,
           work_max / (work_sum / b.size));
    printf("%d gradients in %.3f s: %.0f gradients per second on %d rank(s)\n", m * steps, t_batches,
           m * steps / t_batches, b.size);
  }
  free(all_of);

  if (b.rank == 0) {
    /* The throws that hit: a family from flat to steep. */
    int hits = 0, lo = -1, hi = -1, slow = -1;
    for (int i = 0; i < m; i++) {
      const double *bp = best + (size_t)i * (DIM + NRES);
      if (!(sqrt(bp[DIM]) * R < 0.01)) continue;
      const double *lp = best + (size_t)lo * (DIM + NRES), *hp = best + (size_t)hi * (DIM + NRES),
                   *sp = best + (size_t)slow * (DIM + NRES);
      if (hits++ == 0 || bp[1] < lp[1]) lo = i;
      if (hits == 1 || bp[1] > hp[1]) hi = i;
      if (hits == 1 || bp[0] < sp[0]) slow = i;
    }
    printf("\n%d of %d throws land within 1 cm of the target at %g m", hits, m, R);
    if (hits) {
      printf(", among them:\n%12s %12s %12s %12s\n", "", "speed m/s", "angle deg", "flight s");
      const char *what[3] = {"flattest", "steepest", "slowest"};
      int which[3] = {lo, hi, slow};
      for (int j = 0; j < 3; j++) {
        const double *bp = best + (size_t)which[j] * (DIM + NRES);
        printf("%12s %12.3f %12.2f %12.2f\n", what[j], 10.0 * bp[0], bp[1] * 180.0 / 3.141592653589793,
               bp[DIM + 1 + DIM] * DT);
      }
    } else {
      printf("\n");
    }

    /* The final state, for the comparison between rank counts: the best
     * points with their values, gradients and steps, the next trial points
     * and the last batch's results. */
    size_t n = (size_t)m * (DIM + NRES) + (size_t)m * DIM + (size_t)m * NRES;
    double *all = malloc(n * sizeof *all);
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
    memcpy(all, best, (size_t)m * (DIM + NRES) * sizeof *all);
    memcpy(all + (size_t)m * (DIM + NRES), X, (size_t)m * DIM * sizeof *all);
    memcpy(all + (size_t)m * (2 * DIM + NRES), res, (size_t)m * NRES * sizeof *all);
    if (write_path) failures += result_file(write_path, 1, m, steps, all, n);
    if (compare_path) failures += result_file(compare_path, 0, m, steps, all, n);
    free(all);
  }

  /* Failed evaluations anywhere count too. */
  int errors = 0;
  MPI_Reduce(&b.errors, &errors, 1, MPI_INT, MPI_SUM, 0, b.comm);
  if (b.rank == 0) {
    if (errors) fprintf(stderr, "batch_gradients_mpi: %d evaluation(s) failed\n", errors);
    failures += errors;
    if (failures)
      fprintf(stderr, "batch_gradients_mpi: %d check(s) failed\n", failures);
    else
      printf("batch_gradients_mpi: OK\n");
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, b.comm);
  free(X);
  free(res);
  free(res_static);
  free(best);
  free(step);
  free(b.chunk_x);
  free(b.chunk_res);
  ad_tape_destroy(b.tape);
  MPI_Comm_free(&b.comm);
  MPI_Finalize();
  return failures != 0;
}
