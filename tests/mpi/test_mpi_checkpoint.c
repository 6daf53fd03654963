/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpointed time loops on several ranks: a 1-D distributed state with
 * halo exchanges and a global norm in every step, reversed by every
 * schedule. Each checkpointed gradient must equal the fully taped loop's bit
 * for bit on every rank (the same operations in the same order, the same
 * deterministic communication), pass the dot-product test through the
 * loop's tangent action, and agree with central differences of the whole
 * parallel program. Binomial runs must take revolve's optimal number of
 * advances; a resumable multistage run started again in the same directory
 * must skip every segment and still give the same bits, and a damaged file
 * on one rank must fail every rank with AD_ERR_CORRUPT while the ranks go on
 * making the same collective calls. An objective on one rank sweeps the
 * loop on every rank; a missing file or a rank that does not sweep fails
 * every rank instead of hanging; two groups of ranks each run a resumable
 * loop over their own communicator. */
#define _XOPEN_SOURCE 700
#include <ariadne_checkpoint.h>
#include <ftw.h>
#include <stdint.h>
#include <unistd.h>

#include "ckpt_twin_mpi_step.h"
#include "mtest.h"

#define NL 6     /* values per rank */
#define STEPS 60 /* steps of the loop */

/* The loop's step: the line of ckpt_twin_mpi_step.h, NL values per rank. */
static int step_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  (void)ud;
  (void)i;
  (void)n;
  (void)pb;
  return mt_line_step(u, NL, mt_rank, mt_size, p, 11);
}

/* The same step for the online schedule, which learns the loop's length from
 * the step function. */
static int online_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  int rc = step_fn(ud, i, n, u, pb, p);
  return rc == 0 && i == *(const int64_t *)ud - 1 ? AD_CKPT_LAST : rc;
}

/* Global indices, so that the problem is the same line for any rank count. */
static double initial(int k) { return 0.4 + 0.3 * sin(0.7 * (mt_rank * NL + k)); }
static double weight(int k) { return 1.0 + 0.25 * ((mt_rank * NL + k) % 7); }

/* This rank's share of J = sum over the line of w_k u_k^2. */
static ad_real objective(const ad_real *u) {
  ad_real acc = ad_const(0.0);
  for (int k = 0; k < NL; k++) acc = ad_add(acc, ad_mul(weight(k), ad_mul(u[k], u[k])));
  return acc;
}

/* Run the loop from x0 + h xdot (xdot NULL: from x0): checkpointed with `o`,
 * or step by step when o is NULL. On a recording tape the inputs x are
 * created; without one it is the passive program. Returns the loop's code. */
static int run(const ad_ckpt_options *o, const double *xdot, double h, ad_real *x, ad_real *J) {
  ad_real u[NL];
  for (int k = 0; k < NL; k++) {
    double v = initial(k) + (xdot ? h * xdot[k] : 0.0);
    x[k] = u[k] = ad_tape_current() ? ad_input(v) : ad_const(v);
  }
  double time = 0.0;
  int rc = AD_OK;
  if (!o) {
    for (int64_t i = 0; i < STEPS && rc == AD_OK; i++) {
      size_t n = NL, pb = sizeof time;
      if (step_fn(NULL, i, &n, u, &pb, &time) != 0) rc = AD_ERR_CALLBACK;
    }
  } else {
    int64_t steps = STEPS;
    rc = ad_checkpoint_loop(o, o->schedule == AD_CKPT_ONLINE ? online_fn : step_fn, &steps, NL, u, sizeof time, &time);
  }
  if (rc == AD_OK) MT_CLOSE(time, 0.1 * STEPS, 1e-12);
  *J = objective(u);
  return rc;
}

/* Record the loop on a fresh tape and take the gradient of the global J:
 * every rank seeds its own share, and the sweep, being collective, adds the
 * shares through the adjoint communication. */
static ad_tape *record(const ad_ckpt_options *o, ad_real *x, ad_real *J, double *g, const char *name) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  int rc = run(o, NULL, 0.0, x, J);
  ad_tape_end(t);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: ad_checkpoint_loop: %s\n", mt_rank, name, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  rc = ad_gradient(t, *J, NL, x, g);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: ad_gradient: %s\n", mt_rank, name, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  return t;
}

/* Exact equality of every gradient element, reported per element and rank. */
static void check_bits(const double *g, const double *ref, const char *name, const char *what) {
  for (int k = 0; k < NL; k++) {
    if (memcmp(&g[k], &ref[k], sizeof g[k]) != 0) {
      fprintf(stderr, "[%d] %s: %s: g[%d] = %.17g, fully taped %.17g\n", mt_rank, name, what, k, g[k], ref[k]);
    }
    MT_CHECK(memcmp(&g[k], &ref[k], sizeof g[k]) == 0);
  }
}

/* Central differences of the whole parallel program in two directions,
 * computed once: without a tape the checkpointed loop is a plain loop, so
 * the differences are the same for every schedule, and each schedule's
 * gradient is held against them through <g, xdot> summed over the ranks. */
#define NDIR 2
static double fd_xdot[NDIR][NL], fd_value[NDIR];

static void fd_prepare(void) {
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = STEPS;
  for (int d = 0; d < NDIR; d++) {
    unsigned long long seed = 977ull * (unsigned long long)(d + 1) + 7919ull * (unsigned long long)mt_rank;
    for (int k = 0; k < NL; k++) fd_xdot[d][k] = mt_rand(&seed);
    const double h = 1e-6;
    double val[2];
    for (int s = 0; s < 2; s++) {
      ad_real x[NL], J;
      MT_CHECK(run(&o, fd_xdot[d], s ? -h : h, x, &J) == AD_OK);
      double mine = ad_value(J);
      MPI_Allreduce(&mine, &val[s], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    fd_value[d] = (val[0] - val[1]) / (2 * h);
  }
}

static void check_fd(const double *g, const char *name) {
  for (int d = 0; d < NDIR; d++) {
    double dot = 0.0, dot_all = 0.0;
    for (int k = 0; k < NL; k++) dot += g[k] * fd_xdot[d][k];
    MPI_Allreduce(&dot, &dot_all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (!(fabs(fd_value[d] - dot_all) <= 1e-7 * (1.0 + fabs(fd_value[d]) + fabs(dot_all))))
      fprintf(stderr, "[%d] %s: direction %d: central differences %.17g, gradient %.17g\n", mt_rank, name, d,
              fd_value[d], dot_all);
    MT_CLOSE(fd_value[d], dot_all, 1e-7);
    /* A vanishing derivative would prove nothing. */
    MT_CHECK(fabs(dot_all) > 1e-6);
  }
}

typedef struct ckpt_case {
  const char *name;
  ad_ckpt_schedule schedule;
  int snapshots, disk_snapshots, resumable;
} ckpt_case;

static void check_case(const ckpt_case *cs, const char *dir, const double *gref, double Jref) {
  ad_ckpt_options o;
  ad_ckpt_stats st;
  ckpt_case_options(&o, cs->schedule, STEPS, cs->snapshots, cs->disk_snapshots, dir, &st);
  o.resumable = cs->resumable;
  ad_real x[NL], J;
  double g[NL], g2[NL];
  ad_tape *t = record(&o, x, &J, g, cs->name);
  MT_CHECK(ad_value(J) == Jref);
  check_bits(g, gref, cs->name, "first sweep");
  MT_CHECK(st.steps == STEPS);
  MT_CHECK(st.taped == STEPS);
  MT_CHECK(st.output_steps == 1);
  if (cs->schedule == AD_CKPT_BINOMIAL) {
    if (st.advances != ad_revolve_optimum(STEPS, cs->snapshots))
      fprintf(stderr, "[%d] %s: %lld advances, the optimum is %lld\n", mt_rank, cs->name, (long long)st.advances,
              (long long)ad_revolve_optimum(STEPS, cs->snapshots));
    MT_CHECK(st.advances == ad_revolve_optimum(STEPS, cs->snapshots));
  }
  if (cs->schedule == AD_CKPT_STORE_ALL) MT_CHECK(st.advances == STEPS - 1);
  if (cs->schedule == AD_CKPT_MULTISTAGE) {
    MT_CHECK(st.disk_writes >= cs->disk_snapshots);
    MT_CHECK(st.disk_reads >= cs->disk_snapshots);
  }

  /* The record can be swept again: the same bits. With two snapshots the
   * second sweep repeats the first one's 380 recomputations, each a halo
   * exchange and a reduction, for nothing that five snapshots do not test. */
  if (cs->schedule != AD_CKPT_BINOMIAL || cs->snapshots > 2) {
    MT_CHECK(ad_gradient(t, J, NL, x, g2) == AD_OK);
    check_bits(g2, gref, cs->name, "second sweep");
  }

  if (cs->resumable) {
    /* A new run with the same arguments finds every segment done on every
     * rank: nothing is taped, and the adjoint comes from the files. The
     * second sweep above used the same seed, so the files still match. */
    ad_tape_destroy(t);
    t = record(&o, x, &J, g2, cs->name);
    check_bits(g2, gref, cs->name, "resumed run");
    MT_CHECK(ad_value(J) == Jref);
    if (st.resumed_segments != cs->disk_snapshots)
      fprintf(stderr, "[%d] %s: resumed %lld segments of %d\n", mt_rank, cs->name, (long long)st.resumed_segments,
              cs->disk_snapshots);
    MT_CHECK(st.resumed_segments == cs->disk_snapshots);
    MT_CHECK(st.taped == 0);
    MT_CHECK(st.output_steps == 0);
  }

  /* The dot-product test through the record's tangent action: with one
   * output per rank weighted 1, <ybar, J xdot> is the sum over the ranks of
   * J's tangent, and <J^T ybar, xdot> that of <g, xdot>, g from the reverse
   * sweep above (the test with random weights on many outputs is
   * loop_prog's, below). */
  unsigned long long seed = 4242ull + 7919ull * (unsigned long long)mt_rank;
  double xdot[NL], sides[2], all[2];
  sides[1] = 0.0;
  ad_tangents_zero(t);
  for (int k = 0; k < NL; k++) {
    xdot[k] = mt_rand(&seed);
    ad_tangent_seed(t, x[k], xdot[k]);
    sides[1] += g[k] * xdot[k];
  }
  int rc = ad_forward(t);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s: ad_forward: %s\n", mt_rank, cs->name, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  sides[0] = ad_tangent(t, J);
  MPI_Allreduce(sides, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CLOSE(all[0], all[1], 1e-12);
  MT_CHECK(fabs(all[1]) > 1e-6);
  ad_tape_destroy(t);

  check_fd(g, cs->name);

  if (cs->schedule == AD_CKPT_MULTISTAGE && !cs->resumable) {
    /* A run that cannot be resumed cleans up after itself. */
    char probe[600];
    snprintf(probe, sizeof probe, "%s/ariadne-r%d-base-0.dat", dir, mt_rank);
    MT_CHECK(access(probe, F_OK) != 0);
  }
}

/* Flip one byte of a file of the last rank, after every rank is done with
 * its files. */
static void damage_last_rank(const char *dir, const char *what, long offset) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == mt_size - 1) {
    char fn[600];
    snprintf(fn, sizeof fn, "%s/ariadne-r%d-%s.dat", dir, mt_rank, what);
    FILE *f = fopen(fn, "r+b");
    MT_CHECK(f != NULL);
    if (f) {
      fseek(f, offset, SEEK_SET);
      int c = fgetc(f);
      fseek(f, offset, SEEK_SET);
      fputc((c ^ 0x20) & 0xff, f);
      MT_CHECK(fclose(f) == 0);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* A damaged file on one rank fails every rank with AD_ERR_CORRUPT: the
 * others must not resume without it, nor wait for it forever, and all ranks
 * must still make the same collective calls, so the program goes on. */
static void check_corrupt(const ckpt_case *cs, const char *dir) {
  ad_ckpt_options o;
  ckpt_case_options(&o, cs->schedule, STEPS, cs->snapshots, cs->disk_snapshots, dir, NULL);
  o.resumable = 1;
  for (int what = 0; what < 2; what++) {
    const char *name = what == 0 ? "a corrupt adjoint file on the last rank" : "a corrupt manifest on the last rank";
    char file[64];
    /* The finished run resumes from the adjoint after its last segment;
     * past the 64-byte header a byte of data, else of the header. */
    if (what == 0)
      snprintf(file, sizeof file, "adj-%d", cs->disk_snapshots);
    else
      snprintf(file, sizeof file, "manifest-0");
    damage_last_rank(dir, file, what == 0 ? 64 + 3 : 64 + 42);
    ad_tape *t = ad_tape_create();
    ad_real x[NL], J;
    ad_tape_begin(t);
    int rc_loop = run(&o, NULL, 0.0, x, &J);
    ad_tape_end(t);
    double g[NL];
    int rc_grad = ad_gradient(t, J, NL, x, g);
    if (rc_loop != (what == 0 ? AD_OK : AD_ERR_CORRUPT) || rc_grad != AD_ERR_CORRUPT)
      fprintf(stderr, "[%d] %s: loop %d, gradient %d: %s\n", mt_rank, name, rc_loop, rc_grad,
              ad_tape_error_message(t));
    MT_CHECK(rc_loop == (what == 0 ? AD_OK : AD_ERR_CORRUPT));
    MT_CHECK(rc_grad == AD_ERR_CORRUPT);
    MT_CHECK(strstr(ad_tape_error_message(t), "corrupt") != NULL);
    MT_CHECK(mt_has_rank_prefix(ad_tape_error_message(t)));
    ad_tape_destroy(t);
    int one = 1, ranks = 0;
    MPI_Allreduce(&one, &ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK(ranks == mt_size);
  }
}

/* The loop as a parallel program from the initial state to the final one,
 * for mtest.h's checks at a random point with every final value weighted:
 * a short loop under the binomial schedule, `ctx` its number of steps. */
static void loop_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = *(const int64_t *)ctx;
  o.snapshots = 3;
  double time = 0.0;
  for (int k = 0; k < n; k++) y[k] = x[k];
  MT_CHECK(ad_checkpoint_loop(&o, step_fn, NULL, (size_t)n, y, sizeof time, &time) == AD_OK);
}

/* The objective on rank 0 only, and no communication outside the loop:
 * every rank must sweep the loop (its reverse re-runs the halo exchanges),
 * a passive output included, and every rank's gradient is that of the
 * fully taped program, bit for bit. Then a base file missing on the last
 * rank: every rank fails with AD_ERR_IO instead of waiting for it. */
static void check_one_objective(const char *dir) {
  double gref[NL];
  const char *names[3] = {"fully taped, objective on rank 0", "binomial s=5, objective on rank 0",
                          "multistage 3+4, objective on rank 0"};
  for (int variant = 0; variant < 3; variant++) {
    ad_ckpt_options o;
    ad_ckpt_options_default(&o);
    o.steps = STEPS;
    o.snapshots = variant == 1 ? 5 : 3;
    if (variant == 2) {
      o.schedule = AD_CKPT_MULTISTAGE;
      o.disk_snapshots = 4;
      o.dir = dir;
    }
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[NL], J;
    MT_CHECK(run(variant ? &o : NULL, NULL, 0.0, x, &J) == AD_OK);
    if (mt_rank != 0) J = ad_const(0.0);
    ad_tape_end(t);
    double g[NL];
    int rc = ad_gradient(t, J, NL, x, g);
    if (rc != AD_OK) fprintf(stderr, "[%d] %s: %s\n", mt_rank, names[variant], ad_tape_error_message(t));
    MT_CHECK(rc == AD_OK);
    if (variant == 0)
      memcpy(gref, g, sizeof g);
    else
      check_bits(g, gref, names[variant], "gradient");
    if (variant == 2 && mt_size > 1) {
      /* The last rank loses the base state of segment 1 (reversed third). */
      MPI_Barrier(MPI_COMM_WORLD);
      if (mt_rank == mt_size - 1) {
        char fn[600];
        snprintf(fn, sizeof fn, "%s/ariadne-r%d-base-1.dat", dir, mt_rank);
        MT_CHECK(remove(fn) == 0);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      rc = ad_gradient(t, J, NL, x, g);
      const char *msg = ad_tape_error_message(t);
      if (rc != AD_ERR_IO) fprintf(stderr, "[%d] missing base file: %d: %s\n", mt_rank, rc, msg);
      MT_CHECK(rc == AD_ERR_IO);
      MT_CHECK(strstr(msg, mt_rank == mt_size - 1 ? "base" : "another rank") != NULL);
    }
    ad_tape_destroy(t);
  }
}

/* Loops on part of the ranks: the ranks split into two groups
 * (even and odd world ranks), each running its own resumable loop over its
 * own communicator, in one directory. The step is like step_fn, on the
 * group's line. The groups' second runs differ: the odd group lost its
 * manifest and starts over, the even group resumes every segment. Agreeing
 * over MPI_COMM_WORLD would make the even group start over too. */
typedef struct group { MPI_Comm comm; int rank, size; } group;

static int group_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  (void)i;
  (void)pb;
  const group *gr = ud;
  double *time = p;
  int lo = gr->rank > 0 ? gr->rank - 1 : MPI_PROC_NULL, hi = gr->rank + 1 < gr->size ? gr->rank + 1 : MPI_PROC_NULL;
  ad_real left = ad_const(0.3), right = ad_const(-0.2), local = ad_const(0.0), norm2;
  int rc = ad_mpi_sendrecv(&u[NL - 1], 1, AD_MPI_REAL, hi, 11, &left, 1, AD_MPI_REAL, lo, 11, gr->comm,
                           MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS)
    rc = ad_mpi_sendrecv(&u[0], 1, AD_MPI_REAL, lo, 12, &right, 1, AD_MPI_REAL, hi, 12, gr->comm, MPI_STATUS_IGNORE);
  for (size_t k = 0; k < *n; k++) local = ad_add(local, ad_mul(u[k], u[k]));
  if (rc == MPI_SUCCESS) rc = ad_mpi_allreduce(&local, &norm2, 1, AD_MPI_REAL, MPI_SUM, gr->comm);
  if (rc != MPI_SUCCESS) return -1;
  for (size_t k = 0; k < NL; k++) {
    ad_real l = k > 0 ? u[k - 1] : left, r = k + 1 < NL ? u[k + 1] : right;
    ad_real v = ad_add(u[k], ad_mul(0.2, ad_sub(ad_add(l, r), ad_mul(2.0, u[k]))));
    u[k] = ad_sub(v, ad_mul(ad_mul(0.01, norm2), u[k]));
  }
  *time += 0.1;
  return 0;
}

static void check_groups(const char *dir) {
  if (mt_size < 2) return;
  group gr;
  MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &gr.comm);
  MPI_Comm_rank(gr.comm, &gr.rank);
  MPI_Comm_size(gr.comm, &gr.size);
  ad_ckpt_options o;
  ad_ckpt_stats st;
  ad_ckpt_options_default(&o);
  o.schedule = AD_CKPT_MULTISTAGE;
  o.steps = mt_rank % 2 ? 30 : 24; /* the groups' loops differ */
  o.snapshots = 3;
  o.disk_snapshots = 3;
  o.resumable = 1;
  o.dir = dir;
  o.stats = &st;
  MT_CHECK(ad_mpi_ckpt_comm(&o, gr.comm) == MPI_SUCCESS);
  double g[2][NL];
  for (int runs = 0; runs < 2; runs++) {
    if (runs == 1 && mt_rank % 2) {
      char fn[600];
      snprintf(fn, sizeof fn, "%s/ariadne-r%d-manifest-0.dat", dir, mt_rank);
      MT_CHECK(remove(fn) == 0);
    }
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x[NL], u[NL];
    for (int k = 0; k < NL; k++) x[k] = u[k] = ad_input(initial(k));
    double time = 0.0;
    int rc = ad_checkpoint_loop(&o, group_step, &gr, NL, u, sizeof time, &time);
    if (rc != AD_OK) fprintf(stderr, "[%d] groups: loop: %s\n", mt_rank, ad_tape_error_message(t));
    MT_CHECK(rc == AD_OK);
    ad_real J = objective(u);
    ad_tape_end(t);
    rc = ad_gradient(t, J, NL, x, g[runs]);
    if (rc != AD_OK) fprintf(stderr, "[%d] groups: gradient: %s\n", mt_rank, ad_tape_error_message(t));
    MT_CHECK(rc == AD_OK);
    if (runs == 1) {
      int64_t want = mt_rank % 2 ? 0 : o.disk_snapshots;
      if (st.resumed_segments != want)
        fprintf(stderr, "[%d] groups: resumed %lld segments, want %lld\n", mt_rank, (long long)st.resumed_segments,
                (long long)want);
      MT_CHECK(st.resumed_segments == want);
      check_bits(g[1], g[0], "groups", "second run");
    }
    ad_tape_destroy(t);
  }
  /* The group's gradient against central differences of its program in one
   * direction, summed over the group. */
  unsigned long long seed = 99ull + 31ull * (unsigned long long)mt_rank;
  double xdot[NL], side[3] = {0, 0, 0}, all[3];
  for (int k = 0; k < NL; k++) {
    xdot[k] = mt_rand(&seed);
    side[0] += g[0][k] * xdot[k];
  }
  const double h = 1e-6;
  for (int sgn = 0; sgn < 2; sgn++) {
    ad_real u[NL];
    for (int k = 0; k < NL; k++) u[k] = ad_const(initial(k) + (sgn ? -h : h) * xdot[k]);
    double time = 0.0;
    for (int64_t i = 0; i < o.steps; i++) {
      size_t n = NL, pb = sizeof time;
      MT_CHECK(group_step(&gr, i, &n, u, &pb, &time) == 0);
    }
    side[1 + sgn] = ad_value(objective(u));
  }
  MPI_Allreduce(side, all, 3, MPI_DOUBLE, MPI_SUM, gr.comm);
  MT_CLOSE(all[0], (all[1] - all[2]) / (2 * h), 1e-6 * (1 + fabs(all[0])));
  MPI_Comm_free(&gr.comm);
}

/* Last, since it retires MPI_COMM_WORLD's private duplicate on rank 0:
 * rank 0 sweeps a loop the other ranks never sweep, and fails within the
 * timeout instead of waiting in a re-run halo exchange for ever. */
static void check_rank_missing(void) {
  if (mt_size < 2) return;
  ad_mpi_set_timeout(2.0);
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = STEPS;
  o.snapshots = 5;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[NL], J;
  MT_CHECK(run(&o, NULL, 0.0, x, &J) == AD_OK);
  ad_tape_end(t);
  if (mt_rank == 0) {
    double g[NL], t0 = MPI_Wtime();
    int rc = ad_gradient(t, J, NL, x, g);
    double sec = MPI_Wtime() - t0;
    if (rc != AD_ERR_MPI) fprintf(stderr, "[0] rank missing: %d: %s\n", rc, ad_tape_error_message(t));
    MT_CHECK(rc == AD_ERR_MPI);
    MT_CHECK(strstr(ad_tape_error_message(t), "did not sweep") != NULL);
    MT_CHECK(sec < 30.0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  ad_tape_destroy(t);
  ad_mpi_set_timeout(60.0);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

/* A step that communicates and also scales the state by an active value
 * recorded before the loop (through ud), against the rule that steps depend
 * on active values only through their state: every rank's sweep fails with
 * one message naming the last step and the value, and none hangs. */
static int outside_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  int rc = step_fn(NULL, i, n, u, pb, p);
  for (size_t k = 0; k < *n; k++) u[k] = ad_mul(u[k], *(const ad_real *)ud);
  return rc;
}

static void check_outside_value(void) {
  int before = mt_errors;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real coef = ad_input(0.99), x[NL], u[NL];
  for (int k = 0; k < NL; k++) x[k] = u[k] = ad_input(initial(k));
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = 10;
  o.snapshots = 3;
  double time = 0.0, g[NL];
  MT_CHECK(ad_checkpoint_loop(&o, outside_fn, &coef, NL, u, sizeof time, &time) == AD_OK);
  ad_real J = objective(u);
  ad_tape_end(t);
  MT_CHECK(ad_gradient(t, J, NL, x, g) == AD_ERR_STALE_HANDLE);
  const char *m = ad_tape_error_message(t), *a = strstr(m, "ariadne: ");
  MT_CHECK(strstr(m, "step 9 uses an active value that is not part of the loop's state") != NULL);
  MT_CHECK(strstr(m, "of the tape the loop is recorded on") != NULL);
  MT_CHECK(a && !strstr(a + 1, "ariadne: "));
  if (mt_errors > before) fprintf(stderr, "[%d] outside value: %s\n", mt_rank, m);
  ad_tape_destroy(t);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  /* The loop's files carry the rank, which the MPI layer learns when it is
   * set up; set it up before any loop runs, whatever runs first. */
  MT_CHECK(ad_mpi_comm_prepare(MPI_COMM_WORLD) == MPI_SUCCESS);

  /* One directory for every rank's files, made by rank 0. */
  char dir[256] = "/tmp/ariadne-mpickpt-XXXXXX";
  if (!mt_share_dir(dir, sizeof dir, mt_rank != 0 || mkdtemp(dir))) return mt_finalize();

  /* The fully taped loop: the reference for every schedule. */
  ad_real x[NL], J;
  double gref[NL];
  ad_tape *t = record(NULL, x, &J, gref, "fully taped");
  double Jref = ad_value(J);
  ad_tape_destroy(t);
  fd_prepare();
  check_fd(gref, "fully taped");

  const ckpt_case cases[] = {
      {"binomial s=2", AD_CKPT_BINOMIAL, 2, 0, 0},
      {"binomial s=5", AD_CKPT_BINOMIAL, 5, 0, 0},
      {"multistage 2+6", AD_CKPT_MULTISTAGE, 2, 6, 0},
      {"resumable multistage 3+5", AD_CKPT_MULTISTAGE, 3, 5, 1},
      {"online s=4", AD_CKPT_ONLINE, 4, 0, 0},
      {"store all", AD_CKPT_STORE_ALL, 0, 0, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    check_case(&cases[c], dir, gref, Jref);
    if (cases[c].resumable) check_corrupt(&cases[c], dir);
  }
  int64_t short_loop = 24;
  mt_check_prog("the loop's Jacobian at a random point", loop_prog, NL, NL, &short_loop, 1e-6);
  check_one_objective(dir);
  check_groups(dir);
  check_outside_value();
  check_rank_missing();

  /* Every rank is done with the files before rank 0 removes them. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == 0) MT_CHECK(nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
  return mt_finalize();
}
