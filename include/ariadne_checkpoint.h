/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ariadne checkpointing: the gradient of a long time loop with the memory of
 * a few stored states.
 *
 * ad_checkpoint_loop runs `steps` steps of a user step function that advances
 * an ad_real state (plus an optional passive state given as bytes). Called
 * while a tape records, the whole loop becomes one record: the forward run
 * is passive (nothing is taped) and stores snapshots; the record's reverse
 * action follows a checkpointing schedule that restores snapshots, re-runs
 * steps passively, records one step at a time on a scratch tape and sweeps
 * it, so the tape never holds more than one step.
 *
 * Schedules:
 * - AD_CKPT_BINOMIAL: revolve (Griewank & Walther 2000), the least number of
 *   recomputed steps for `snapshots` stored states; the count equals
 *   ad_revolve_optimum(steps, snapshots).
 * - AD_CKPT_MULTISTAGE: `disk_snapshots` states written to files in `dir`
 *   during the forward run (written once, read once), and binomial
 *   checkpointing with `snapshots` states in memory between two of them.
 *   With `resumable`, the progress of the reverse run is kept on disk too.
 * - AD_CKPT_STORE_ALL: every state in memory; no recomputation (baseline).
 * - AD_CKPT_ONLINE: the number of steps is not known in advance: the step
 *   function returns AD_CKPT_LAST after the last step. Up to `snapshots`
 *   segment bases are kept evenly spaced, thinned as the loop grows; the
 *   reverse action reverses each segment with a binomial schedule in the
 *   slots the later segments no longer need, so at most 2 * snapshots + 1
 *   states are in memory at once (kept for further sweeps).
 *
 * Rules for the step function:
 * - It advances state[0..n) and pstate[0..pbytes) in place by step `step`
 *   (0-based) and is deterministic: the same inputs give the same outputs,
 *   since steps are re-run.
 * - Every active value a step depends on must be part of the state: values
 *   recorded outside the loop (or kept from an earlier step) are not on the
 *   tape the step is recorded on. The forward run records nothing and cannot
 *   see it; the first sweep that records the step fails with
 *   AD_ERR_STALE_HANDLE, naming the step, the operation and the value. Pass
 *   such a value in the state (an element the step leaves unchanged), or
 *   use its ad_value.
 * - It may call ad_mpi_* (halo exchanges, reductions): every rank follows the
 *   same deterministic schedule, so communication matches; disk files are per
 *   rank. A loop whose steps communicate on AD_MPI_REAL data (or that has
 *   `comm` set) is swept on every rank, a passive output included, since its
 *   reverse re-runs the communication; before re-running steps the ranks
 *   agree that each can (its files read), within the MPI layer's timeout, so
 *   a rank that cannot, or that does not sweep, makes the others fail
 *   instead of hang. Steps that communicate only through plain MPI calls
 *   need `comm` set for that.
 * - It returns 0 (AD_CKPT_LAST in online mode after the last step), or any
 *   negative value to fail: the loop stops with AD_ERR_CALLBACK.
 * - It must not change *n or *pbytes (a changed size is an error).
 *
 * The passive twin (optional, `step_passive`): most steps of a checkpointed
 * loop are run passively (the forward run and the schedule's recomputations),
 * and the step function then costs about twice plain double code (ad_real
 * arithmetic with nothing recorded). A twin is the same step on double
 * values: the step's source compiled a second time with ARIADNE_PASSIVE
 * (ad_real is double there), its function renamed by AD_CKPT_TWIN so that
 * both builds link into one program. The loop runs every passive step with
 * the twin, directly on the stored double values, and keeps the step
 * function for the steps it records. Snapshots store values either way.
 * - The twin must compute the very same doubles as the step function (and
 *   the same passive state bytes and return value): the gradient is then the
 *   same bit for bit. Compile both with the same floating-point options
 *   (with FMA hardware, -ffp-contract=off on both, or the passive build may
 *   contract what the active one cannot).
 * - The loop checks it, in the tape's error on a mismatch (AD_ERR_CALLBACK,
 *   naming the step and the first value that differs): the forward run's
 *   first step is run by both and compared (`passive_check`), and every
 *   reverse sweep compares the step function's recorded last step with the
 *   twin's output (no extra step). A twin that differs only in later steps
 *   is caught by AD_CKPT_CHECK_FORWARD, which compares every step of the
 *   forward run (it costs one more passive step per step).
 * - Steps that call ad_mpi_*: the twin's calls are plain MPI calls (the
 *   passive build's ad_mpi_* macros), made in the same order on every rank,
 *   so the messages match. The loop learns the communicators the steps use
 *   from the step function's ad_mpi_* calls in the forward run, i.e. from
 *   the first-step check: with AD_CKPT_CHECK_OFF set `comm`
 *   (ad_mpi_ckpt_comm). A twin that disagrees on one rank fails every rank
 *   of the loop (the others learn that a rank failed, not why).
 * - The twin runs only in a recorded loop: without a recording tape (the
 *   plain loop) and in the tangent action the step function runs.
 * - The twin's ud is `passive_ud`, or the step's ud if that is NULL; the
 *   twin sees the same passive state bytes. A ud struct whose layout
 *   depends on ad_real (ad_real members) needs a passive_ud of its own.
 *
 * Building a twin with the CMake package (find_package(Ariadne)):
 *
 *   add_library(mystep_passive OBJECT mystep.c)   # the step's source again
 *   target_link_libraries(mystep_passive PRIVATE Ariadne::passive)
 *   add_executable(app main.c mystep.c)
 *   target_link_libraries(app PRIVATE Ariadne::ariadne mystep_passive)
 *
 * mystep.c defines `int AD_CKPT_TWIN(mystep)(void *ud, int64_t i, size_t *n,
 * ad_real *u, size_t *pb, void *p)` (its helpers static): that is mystep in
 * the active build and mystep_passive in the passive one. The caller
 * declares the twin with AD_CKPT_TWIN_DECL(mystep); and sets
 * `opts.step_passive = mystep_passive`.
 */
#ifndef ARIADNE_CHECKPOINT_H
#define ARIADNE_CHECKPOINT_H

#include "ariadne.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AD_CKPT_LAST 1
/* ad_ckpt_options.steps of a loop meant to run no step. steps = 0 is refused
 * (AD_ERR_ARG): it is what a forgotten field holds, and an empty loop would
 * return AD_OK with the state unchanged and no step's derivative in the
 * gradient. A number no arithmetic on step counts gives by accident. */
#define AD_CKPT_NO_STEPS INT64_MIN

typedef int (*ad_ckpt_step)(void *ud, int64_t step, size_t *n, ad_real *state, size_t *pbytes, void *pstate);
/* The passive twin of a step function: the same step on double values. */
typedef int (*ad_ckpt_step_passive)(void *ud, int64_t step, size_t *n, double *state, size_t *pbytes, void *pstate);

/* The name of a step function whose source is compiled twice: `name` in the
 * active build, `name_passive` in the ARIADNE_PASSIVE build. */
#ifdef ARIADNE_PASSIVE
#define AD_CKPT_TWIN(name) name##_passive
#else
#define AD_CKPT_TWIN(name) name
#endif
/* A declaration of the passive twin `name_passive`, for the active caller. */
#define AD_CKPT_TWIN_DECL(name)                                                                                        \
  int name##_passive(void *ud, int64_t step, size_t *n, double *state, size_t *pbytes, void *pstate)

/* ad_ckpt_options.passive_check: how the twin is compared with the step. */
#define AD_CKPT_CHECK_FIRST 0   /* the forward run's first step (default) */
#define AD_CKPT_CHECK_FORWARD 1 /* every step of the forward run */
#define AD_CKPT_CHECK_OFF (-1)  /* no extra step (the reverse sweep's check stays) */

typedef enum ad_ckpt_schedule {
  AD_CKPT_BINOMIAL = 0,
  AD_CKPT_MULTISTAGE = 1,
  AD_CKPT_STORE_ALL = 2,
  AD_CKPT_ONLINE = 3
} ad_ckpt_schedule;

/* Figures of one checkpointed loop, updated by the forward run and by every
 * sweep through its record. */
typedef struct ad_ckpt_stats {
  int64_t steps;        /* steps of the loop */
  int64_t advances;     /* passive step evaluations directed by the schedule, forward run
                             included, the run's last step (which makes the output) not:
                             revolve's count, = ad_revolve_optimum for AD_CKPT_BINOMIAL */
  int64_t output_steps; /* passive steps that only make the loop's output (1 per forward run) */
  int64_t taped;        /* steps recorded on the scratch tape and swept */
  int64_t stores, restores;
  int64_t disk_writes, disk_reads;
  int64_t resumed_segments; /* segments skipped because a previous run had done them */
  size_t snapshot_bytes;    /* memory held by snapshots, at the peak */
  size_t scratch_bytes;     /* tape memory of one taped step, at the peak */
  int replaced_foreign;     /* files of another run were found in dir and replaced */
} ad_ckpt_stats;

typedef struct ad_ckpt_options {
  ad_ckpt_schedule schedule;
  int64_t steps;      /* number of steps, >= 1, or AD_CKPT_NO_STEPS (not used by AD_CKPT_ONLINE) */
  int snapshots;      /* states kept in memory (>= 1; >= 2 for AD_CKPT_ONLINE) */
  int disk_snapshots; /* AD_CKPT_MULTISTAGE: states written to dir (>= 1) */
  /* AD_CKPT_MULTISTAGE: an existing, writable directory. Loops of one
   * process may share it: each live loop takes its own file namespace, the
   * smallest number no other live loop with that directory holds, in the
   * order the program records its loops (so a run started again finds its
   * files); destroying a loop's tape frees its number. */
  const char *dir;
  int resumable;       /* AD_CKPT_MULTISTAGE: keep the adjoint progress on disk */
  int replace_foreign; /* files of a different run in dir: replace them (1) or fail (0) */
  int rank;            /* for file names; -1: the MPI rank if the MPI layer runs, else 0 */
  /* The communicator the loop's ranks agree over (where to resume, whether
   * every rank has its files), set by ad_mpi_ckpt_comm (ariadne_mpi.h).
   * NULL: the communicators the steps' ad_mpi_* calls use, and
   * MPI_COMM_WORLD for what must be agreed before the first step (where a
   * resumable run resumes). Set it for loops on part of the ranks. */
  void *comm;
  ad_ckpt_stats *stats; /* optional: filled in and kept up to date while the tape lives */
  /* Progress of the reverse action, once per step reversed. NULL: the default
   * report if ARIADNE_PROGRESS=1 or standard error is a terminal. */
  ad_progress_fn progress;
  void *progress_ud;
  /* Optional: the step function's passive twin (see above), run for every
   * step that is not recorded; NULL: the step function runs them. */
  ad_ckpt_step_passive step_passive;
  void *passive_ud;  /* the twin's ud; NULL: the step function's */
  int passive_check; /* AD_CKPT_CHECK_FIRST, AD_CKPT_CHECK_FORWARD or AD_CKPT_CHECK_OFF */
} ad_ckpt_options;

void ad_ckpt_options_default(ad_ckpt_options *o);

/* Run the loop. state[0..n) is updated to the final state (fresh handles on
 * a recording tape) and pstate to the final passive state. Without a
 * recording tape, or with a passive state, it is a plain loop.
 * Returns AD_OK, AD_ERR_ARG (bad options, e.g. zero snapshots or steps = 0
 * (AD_CKPT_NO_STEPS is the empty loop), with the
 * reason in the tape's message or ad_last_error()), AD_ERR_CALLBACK (the step
 * failed or changed the state size), AD_ERR_IO (a snapshot file could not be
 * written or read), AD_ERR_CORRUPT (files in dir that fail their checksums,
 * or belong to another run while replace_foreign is 0), AD_ERR_NOMEM. On a
 * recording tape the error is also the tape's, so later sweeps report it;
 * ad_tape_reset makes the tape usable again. */
#ifndef ARIADNE_PASSIVE
int ad_checkpoint_loop(const ad_ckpt_options *opts, ad_ckpt_step step, void *ud, size_t n, ad_real *state,
                       size_t pbytes, void *pstate);
#else
/* Passive build: the plain loop. */
static inline int ad_checkpoint_loop(const ad_ckpt_options *opts, ad_ckpt_step step, void *ud, size_t n, ad_real *state,
                                     size_t pbytes, void *pstate) {
  if (opts->schedule != AD_CKPT_ONLINE && opts->steps <= 0 && opts->steps != AD_CKPT_NO_STEPS) return AD_ERR_ARG;
  for (int64_t i = 0; opts->schedule == AD_CKPT_ONLINE || i < opts->steps; i++) {
    size_t n1 = n, p1 = pbytes;
    int rc = step(ud, i, &n1, state, &p1, pstate);
    if (rc < 0 || n1 != n || p1 != pbytes) return AD_ERR_CALLBACK;
    if (rc == AD_CKPT_LAST && opts->schedule == AD_CKPT_ONLINE) break;
  }
  return AD_OK;
}
#endif

/* ------------------------------------------------------------------------ */
/* The binomial schedule as a state machine                                  */
/* ------------------------------------------------------------------------ */

/* Actions over step numbers; where snapshots live is the caller's business.
 * ADVANCE: run the working state from `step` to `to` (to - step steps).
 * STORE: keep the working state (at `step`) in snapshot `slot`.
 * RESTORE: make snapshot `slot` (state at `step`) the working state.
 * REVERSE: record step `step` from the working state and sweep it; the
 *          working state is used up.
 * DONE: every step is reversed. */
typedef enum ad_ckpt_op { AD_CKPT_ADVANCE, AD_CKPT_STORE, AD_CKPT_RESTORE, AD_CKPT_REVERSE, AD_CKPT_DONE } ad_ckpt_op;

typedef struct ad_ckpt_action {
  ad_ckpt_op op;
  int64_t step, to;
  int slot;
} ad_ckpt_action;

typedef struct ad_revolve ad_revolve;

/* A schedule for reversing `steps` steps with `snaps` snapshots (the initial
 * state's included). NULL for snaps < 1 or steps < 0 (with AD_ERR_ARG in
 * ad_last_error()), or no memory. */
ad_revolve *ad_revolve_create(int64_t steps, int snaps);
void ad_revolve_destroy(ad_revolve *r);
ad_ckpt_action ad_revolve_next(ad_revolve *r);
/* Steps advanced so far. */
int64_t ad_revolve_advances(const ad_revolve *r);
/* The state as bytes and back, for a run that must survive being killed.
 * ad_revolve_save returns AD_OK, or AD_ERR_ARG (r or buf NULL, size less
 * than ad_revolve_state_size(r)) with the reason in ad_last_error(). */
size_t ad_revolve_state_size(const ad_revolve *r);
int ad_revolve_save(const ad_revolve *r, void *buf, size_t size);
/* NULL, with AD_ERR_CORRUPT in ad_last_error(), for data that is not a
 * state ad_revolve_next can reach. */
ad_revolve *ad_revolve_load(const void *buf, size_t size);
/* The binomial optimum t(l, s) = r l - C(s + r, s + 1), r the least integer
 * with C(s + r, s) >= l: advances needed to reverse l steps with s snapshots.
 * -1 if it does not fit in 64 bits or s < 1. */
int64_t ad_revolve_optimum(int64_t steps, int snaps);

#ifdef __cplusplus
}
#endif

#endif /* ARIADNE_CHECKPOINT_H */
