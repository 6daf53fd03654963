/* SPDX-License-Identifier: BSD-3-Clause */
/* Resumable multistage checkpointing against real crashes: a child process
 * records a checkpointed loop and computes its gradient, the parent kills it
 * with SIGKILL at chosen points of the forward run and of the reverse sweep,
 * starts it again in the same directory, and compares the restarted run's
 * gradient with an uninterrupted run's bit for bit. A file corrupted between
 * the two runs must be reported as AD_ERR_CORRUPT, never used.
 *
 * The child reports every call of the step function through a pipe ('F' for
 * a passive call, 'T' for a call that records a step) and, in the exact mode,
 * waits for the parent's acknowledgement before it goes on. The parent kills
 * it instead of acknowledging, so the kill lands at a known step and the
 * number of segments the restart may skip is known exactly. A free-running
 * mode (no acknowledgement) lets the kill land anywhere, file writes
 * included.
 *
 * Children are started with exec, like a real restart. Under the memcheck
 * twin valgrind therefore checks the parent only, since it follows exec only
 * when told to; with --trace-children=yes every child is checked too, in
 * about a minute.
 *
 * Usage: test_checkpoint_kill                  the test
 *        test_checkpoint_kill --child DIR RESULT PROGRESS_FD ACK_FD
 *                                               one run (ACK_FD -1: free-running) */
#define _XOPEN_SOURCE 700
#include <ariadne_checkpoint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define NS 32      /* state values */
#define STEPS 400  /* steps of the loop */
#define DISK 20    /* disk snapshots: segments of STEPS / DISK steps */
#define SNAPS 3    /* snapshots in memory within a segment */
#define SEG (STEPS / DISK)

/* ------------------------------------------------------------------------ */
/* The child: one run of the checkpointed loop                               */
/* ------------------------------------------------------------------------ */

typedef struct progress {
  int out; /* where each step call is reported; -1: nowhere */
  int ack; /* where the parent's go-ahead is read; -1: do not wait */
} progress;

/* Tell the parent about a step call and, in the exact mode, wait until it
 * lets the step run; a parent that went away makes the step fail. */
static int report(const progress *pr, char what) {
  if (pr->out < 0) return 0;
  ssize_t w;
  do w = write(pr->out, &what, 1);
  while (w < 0 && errno == EINTR);
  if (w != 1) return -1;
  if (pr->ack < 0) return 0;
  char go;
  ssize_t r;
  do r = read(pr->ack, &go, 1);
  while (r < 0 && errno == EINTR);
  return r == 1 ? 0 : -1;
}

/* A nonlinear 1-D reaction-diffusion step with a passive clock. A call that
 * finds a recording tape is taping a step for the reverse sweep: the forward
 * run and the recomputations run passive. */
static int step_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  (void)i;
  (void)pb;
  if (report(ud, ad_tape_current() ? 'T' : 'F') != 0) return -1;
  double *time = p;
  ad_real v[NS];
  for (size_t k = 0; k < *n; k++) {
    ad_real l = k > 0 ? u[k - 1] : ad_const(0.3), r = k + 1 < NS ? u[k + 1] : ad_const(-0.2);
    ad_real lap = ad_sub(ad_add(l, r), ad_mul(2.0, u[k]));
    v[k] = ad_add(u[k], ad_mul(0.2, lap));
    v[k] = ad_add(v[k], ad_mul(0.05 * (1.0 + 0.1 * *time), ad_sin(u[k])));
    v[k] = ad_sub(v[k], ad_mul(0.02, ad_mul(u[k], ad_mul(u[k], u[k]))));
  }
  for (size_t k = 0; k < NS; k++) u[k] = v[k];
  *time += 0.01;
  return 0;
}

static double initial(int k) { return 0.4 + 0.3 * sin(0.7 * k); }

/* J = sum_k w_k u_k^2 over the final state. */
static ad_real objective(const ad_real *u) {
  ad_real acc = ad_const(0.0);
  for (int k = 0; k < NS; k++) acc = ad_add(acc, ad_mul(1.0 + 0.25 * k, ad_mul(u[k], u[k])));
  return acc;
}

static void hex(FILE *f, const char *tag, double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  fprintf(f, "%s %016" PRIx64 "\n", tag, b);
}

/* Record the checkpointed loop, take the gradient, and write the return
 * codes, the figures and the exact bits of J and of the gradient. */
static int child_main(const char *dir, const char *result, int out, int ack) {
  progress pr = {out, ack};
  ad_ckpt_options o;
  ad_ckpt_stats st;
  memset(&st, 0, sizeof st);
  ad_ckpt_options_default(&o);
  o.schedule = AD_CKPT_MULTISTAGE;
  o.steps = STEPS;
  o.snapshots = SNAPS;
  o.disk_snapshots = DISK;
  o.dir = dir;
  o.resumable = 1;
  o.stats = &st;

  ad_tape *t = ad_tape_create();
  ad_real x[NS], u[NS];
  ad_tape_begin(t);
  for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(initial(k));
  double time = 0.0;
  int rc_loop = ad_checkpoint_loop(&o, step_fn, &pr, NS, u, sizeof time, &time);
  ad_real J = objective(u);
  ad_tape_end(t);
  double g[NS];
  int rc_grad = rc_loop == AD_OK ? ad_gradient(t, J, NS, x, g) : rc_loop;

  FILE *f = fopen(result, "w");
  if (!f) return 2;
  fprintf(f, "loop %d grad %d resumed %" PRId64 " taped %" PRId64 " output %" PRId64 "\n", rc_loop, rc_grad,
          st.resumed_segments, st.taped, st.output_steps);
  /* A failed run writes no bits, so a wrong gradient can never be read as
   * a result. */
  if (rc_grad == AD_OK) {
    hex(f, "J", ad_value(J));
    for (int k = 0; k < NS; k++) hex(f, "g", g[k]);
  } else {
    fprintf(f, "msg %s\n", ad_tape_error_message(t));
  }
  int ok = fclose(f) == 0;
  ad_tape_destroy(t);
  return ok ? 0 : 2;
}

/* ------------------------------------------------------------------------ */
/* The parent                                                                */
/* ------------------------------------------------------------------------ */

static char self[4096];

/* How one child run ended. */
typedef struct outcome {
  int killed;     /* died of our SIGKILL */
  int exit_code;  /* exit status if it exited; -1 otherwise */
  long f, t;      /* step calls it reported, passive and taped */
} outcome;

/* What one child run wrote. */
typedef struct result {
  int loop, grad;
  long long resumed, taped, output;
  int nbits;
  uint64_t J, g[NS];
  char msg[600];
} result;

/* Start a child on `dir`; kill it once it has reported `kill_at` calls of
 * kind `kill_kind` ('F' or 'T'; 0: never). `exact` makes the child wait for
 * an acknowledgement of every call, so that the kill lands on that call. */
static outcome spawn(const char *dir, const char *res, char kill_kind, long kill_at, int exact) {
  outcome oc = {0, -1, 0, 0};
  int prog[2], ack[2] = {-1, -1};
  int piped = pipe(prog) == 0 && (!exact || pipe(ack) == 0);
  CHECK(piped);
  if (!piped) return oc;
  pid_t pid = fork();
  if (pid == 0) {
    close(prog[0]);
    if (exact) close(ack[1]);
    char fd_out[16], fd_ack[16];
    snprintf(fd_out, sizeof fd_out, "%d", prog[1]);
    snprintf(fd_ack, sizeof fd_ack, "%d", ack[0]);
    execl(self, self, "--child", dir, res, fd_out, fd_ack, (char *)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  close(prog[1]);
  if (exact) close(ack[0]);
  if (pid < 0) {
    close(prog[0]);
    if (exact) close(ack[1]);
    return oc;
  }
  char c;
  ssize_t r;
  int sent = 0;
  while ((r = read(prog[0], &c, 1)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    long seen = c == 'T' ? ++oc.t : ++oc.f;
    if (!sent && c == kill_kind && seen == kill_at) {
      kill(pid, SIGKILL);
      sent = 1;
    }
    /* Once the signal is sent, the child gets no go-ahead: it dies waiting. */
    if (exact && !sent) {
      char go = 'g';
      if (write(ack[1], &go, 1) != 1) break;
    }
  }
  close(prog[0]);
  if (exact) close(ack[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  oc.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  oc.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return oc;
}

static int read_result(const char *res, result *r) {
  memset(r, 0, sizeof *r);
  FILE *f = fopen(res, "r");
  if (!f) return -1;
  int ok = fscanf(f, "loop %d grad %d resumed %lld taped %lld output %lld ", &r->loop, &r->grad, &r->resumed,
                  &r->taped, &r->output) == 5;
  char tag[8];
  uint64_t b;
  while (ok && fscanf(f, "%7s", tag) == 1) {
    if (strcmp(tag, "msg") == 0) {
      if (!fgets(r->msg, sizeof r->msg, f)) r->msg[0] = 0;
      break;
    }
    if (fscanf(f, "%" SCNx64, &b) != 1) {
      ok = 0;
      break;
    }
    if (strcmp(tag, "J") == 0)
      r->J = b;
    else if (strcmp(tag, "g") == 0 && r->nbits < NS)
      r->g[r->nbits++] = b;
  }
  fclose(f);
  remove(res);
  return ok ? 0 : -1;
}

/* A run that must complete: exit 0, a result, a gradient. */
static int run_complete(const char *dir, const char *res, result *r) {
  outcome oc = spawn(dir, res, 0, 0, 0);
  CHECK(!oc.killed);
  CHECK_INT(oc.exit_code, 0);
  if (oc.exit_code != 0) return -1;
  int rc = read_result(res, r);
  CHECK_INT(rc, 0);
  return rc;
}

static void check_same_bits(const result *r, const result *ref) {
  CHECK_INT(r->loop, AD_OK);
  CHECK_INT(r->grad, AD_OK);
  CHECK_INT(r->nbits, NS);
  CHECK(r->J == ref->J);
  int differ = 0;
  for (int k = 0; k < NS && k < r->nbits; k++) differ += r->g[k] != ref->g[k];
  CHECK_INT(differ, 0);
}

static double from_bits(uint64_t b) {
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* The same loop fully taped, in this process: the reference the
 * checkpointed gradient must reproduce exactly. */
static void taped_gradient(double *J, double *g) {
  progress quiet = {-1, -1};
  ad_tape *t = ad_tape_create();
  ad_real x[NS], u[NS];
  ad_tape_begin(t);
  for (int k = 0; k < NS; k++) x[k] = u[k] = ad_input(initial(k));
  double time = 0.0;
  for (int64_t i = 0; i < STEPS; i++) {
    size_t n = NS, pb = sizeof time;
    step_fn(&quiet, i, &n, u, &pb, &time);
  }
  ad_real y = objective(u);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, y, NS, x, g), AD_OK);
  *J = ad_value(y);
  ad_tape_destroy(t);
}

static char root[] = "/tmp/ariadne-kill-XXXXXX";
static int case_no;

/* A fresh directory for one case and a result file name beside it. */
static void fresh_case(char *dir, char *res, size_t size) {
  case_no++;
  snprintf(dir, size, "%s/case%d", root, case_no);
  snprintf(res, size, "%s/result%d.txt", root, case_no);
  CHECK_INT(mkdir(dir, 0700), 0);
}

/* Segments a restart may skip after `taped` taped steps ran to completion:
 * a segment counts once all its steps are reversed and its adjoint written. */
static long long segments_after(long taped) { return taped / SEG; }

/* Kill one run at an exact call, start it again, compare the bits. `then`
 * (if > 0) kills the second run too, at its `then`-th taped step. */
static void kill_and_resume(const result *ref, char kind, long at, long then) {
  char dir[600], res[600];
  fresh_case(dir, res, sizeof dir);
  CHECK_CONTEXT("exact kill at %c call %ld%s", kind, at, then > 0 ? ", then again" : "");
  outcome oc = spawn(dir, res, kind, at, 1);
  CHECK(oc.killed);
  /* Taped steps that finished: the one being started when killed did not. */
  long done = oc.t - (kind == 'T');
  if (then > 0) {
    long base = segments_after(done) * SEG;
    outcome oc2 = spawn(dir, res, 'T', then, 1);
    CHECK(oc2.killed);
    done = base + oc2.t - 1;
  }
  result r;
  if (run_complete(dir, res, &r) != 0) return;
  check_same_bits(&r, ref);
  long long want = segments_after(done);
  CHECK_INT(r.resumed, want);
  /* Only the segments not skipped are taped again. */
  CHECK_INT(r.taped, STEPS - want * SEG);
  /* A forward run that had finished is not run again: no output step. */
  int forward_done = kind == 'T' || at > STEPS;
  CHECK_INT(r.output, forward_done ? 0 : 1);
}

/* Kill a free-running child once it has reported `at` taped steps: the
 * signal lands wherever the child is by then, often inside a file write. */
static void kill_anywhere(const result *ref, long at) {
  char dir[600], res[600];
  fresh_case(dir, res, sizeof dir);
  CHECK_CONTEXT("free-running kill after %ld taped steps", at);
  outcome oc = spawn(dir, res, 'T', at, 0);
  if (!oc.killed) {
    /* The child won the race and finished: nothing was interrupted. */
    CHECK_INT(oc.exit_code, 0);
    remove(res);
  }
  result r;
  if (run_complete(dir, res, &r) != 0) return;
  check_same_bits(&r, ref);
  CHECK(r.resumed >= segments_after(at - 1) && r.resumed <= DISK);
  CHECK_INT(r.taped, STEPS - r.resumed * SEG);
}

/* Flip one byte of a file: at `offset`, or `from_end` bytes before its end. */
static void flip_byte(const char *fn, long offset, long from_end) {
  FILE *f = fopen(fn, "r+b");
  CHECK(f != NULL);
  if (!f) return;
  if (from_end > 0) {
    fseek(f, 0, SEEK_END);
    offset = ftell(f) - from_end;
  }
  fseek(f, offset, SEEK_SET);
  int c = fgetc(f);
  CHECK(c != EOF);
  fseek(f, offset, SEEK_SET);
  fputc((c ^ 0x10) & 0xff, f);
  CHECK_INT(fclose(f), 0);
}

/* Kill a run in the reverse sweep, damage one of its files, restart: the
 * restart must report AD_ERR_CORRUPT, from the loop itself or from the
 * gradient, and print no bits. */
static void corrupt_and_resume(const char *file, long offset, long from_end, int in_loop) {
  char dir[600], res[600], fn[800];
  fresh_case(dir, res, sizeof dir);
  CHECK_CONTEXT("corrupt %s (offset %ld, from the end %ld)", file, offset, from_end);
  /* After 137 taped steps, segments 19..14 are done: the restart would
   * start from adj-6 and read base-13 down to base-0. */
  outcome oc = spawn(dir, res, 'T', 137, 1);
  CHECK(oc.killed);
  snprintf(fn, sizeof fn, "%s/%s", dir, file);
  flip_byte(fn, offset, from_end);
  outcome rerun = spawn(dir, res, 0, 0, 0);
  CHECK_INT(rerun.exit_code, 0);
  result r;
  CHECK_INT(read_result(res, &r), 0);
  CHECK_INT(r.grad, AD_ERR_CORRUPT);
  CHECK_INT(r.loop, in_loop ? AD_ERR_CORRUPT : AD_OK);
  CHECK_INT(r.nbits, 0);
  CHECK_CONTAINS(r.msg, "corrupt");
}

/* Kill a run in the reverse sweep and delete the adjoint it would resume
 * from (as a partial copy of the directory would): the restart cannot skip
 * anything, so it must start the reverse sweep over from the loop's seed and
 * still give the reference bits. */
static void lose_and_resume(const result *ref) {
  char dir[600], res[600], fn[800];
  fresh_case(dir, res, sizeof dir);
  CHECK_CONTEXT("the adjoint file to resume from is missing");
  outcome oc = spawn(dir, res, 'T', 137, 1);
  CHECK(oc.killed);
  snprintf(fn, sizeof fn, "%s/ariadne-r0-adj-6.dat", dir);
  CHECK_INT(remove(fn), 0);
  result r;
  if (run_complete(dir, res, &r) != 0) return;
  check_same_bits(&r, ref);
  CHECK_INT(r.resumed, 0);
  CHECK_INT(r.taped, STEPS);
  CHECK_INT(r.output, 0);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "--child") == 0) return child_main(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));

  /* Children are this program again, started fresh as after a crash. */
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0)
    self[len] = 0;
  else
    snprintf(self, sizeof self, "%s", argv[0]);
  /* A child that dies while we acknowledge must not take us with it. */
  signal(SIGPIPE, SIG_IGN);
  CHECK(mkdtemp(root) != NULL);

  /* (a) The uninterrupted run, and the fully taped loop it must match. */
  CHECK_CONTEXT("uninterrupted run");
  char dir[600], res[600];
  fresh_case(dir, res, sizeof dir);
  result ref;
  if (run_complete(dir, res, &ref) == 0) {
    CHECK_INT(ref.loop, AD_OK);
    CHECK_INT(ref.grad, AD_OK);
    CHECK_INT(ref.resumed, 0);
    CHECK_INT(ref.taped, STEPS);
    CHECK_INT(ref.nbits, NS);
    double Jt, gt[NS];
    taped_gradient(&Jt, gt);
    CHECK_SAME(from_bits(ref.J), Jt);
    for (int k = 0; k < NS; k++) CHECK_SAME(from_bits(ref.g[k]), gt[k]);
    /* A second run in the same directory finds everything done. */
    CHECK_CONTEXT("run over a finished run");
    result again;
    if (run_complete(dir, res, &again) == 0) {
      check_same_bits(&again, &ref);
      CHECK_INT(again.resumed, DISK);
      CHECK_INT(again.taped, 0);
    }

    /* (b) Exact kills. The forward run makes STEPS passive calls (the last
     * one makes the output); the reverse sweep then recomputes passively
     * and tapes each step once, segment by segment from the last. */
    kill_and_resume(&ref, 'F', 150, 0);          /* in the forward run */
    kill_and_resume(&ref, 'F', STEPS, 0);        /* at the output step */
    kill_and_resume(&ref, 'F', STEPS + 1, 0);    /* the reverse sweep's first recomputation */
    kill_and_resume(&ref, 'T', 1, 0);            /* the first taped step */
    kill_and_resume(&ref, 'T', SEG, 0);          /* the last step of the first segment */
    kill_and_resume(&ref, 'T', SEG + 1, 0);      /* the first step of the second */
    kill_and_resume(&ref, 'T', 137, 0);          /* in the middle */
    kill_and_resume(&ref, 'F', STEPS + 455, 0);  /* a recomputation in the eleventh segment reversed */
    kill_and_resume(&ref, 'T', STEPS, 0);        /* the very last taped step */
    kill_and_resume(&ref, 'T', 137, 100);        /* killed twice */

    /* Kills that may land inside a file write. */
    kill_anywhere(&ref, 50);
    kill_anywhere(&ref, 250);
    kill_anywhere(&ref, 390);
    lose_and_resume(&ref);
  }

  /* (c) Damaged files. Files are a 64-byte header and the data. */
  corrupt_and_resume("ariadne-r0-adj-6.dat", 64 + 8 * 5 + 3, 0, 0);  /* the adjoint to resume from */
  corrupt_and_resume("ariadne-r0-base-5.dat", 0, 2, 0);              /* a base state still needed */
  corrupt_and_resume("ariadne-r0-base-9.dat", 40, 0, 0);             /* a header field */
  corrupt_and_resume("ariadne-r0-final-0.dat", 64 + 17, 0, 1);       /* the loop's output */
  corrupt_and_resume("ariadne-r0-manifest-0.dat", 64 + 41, 0, 1);    /* the manifest */

  CHECK_CONTEXT("clean-up");
  CHECK_INT(nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
  return check_finish("test_checkpoint_kill");
}
