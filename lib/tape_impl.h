/* SPDX-License-Identifier: BSD-3-Clause */
/* Private definitions shared by lib/, adjoint/ and mpi/. Not installed. */
#ifndef ARIADNE_TAPE_IMPL_H
#define ARIADNE_TAPE_IMPL_H

#include <ariadne.h>
#include <stdarg.h>

/* One storage block: the statement stream (argument counts) and the
 * argument stream (handles, partials) of a run of consecutive statements.
 * A statement never spans two blocks, so a sweep runs a tight loop per block. */
typedef struct ad__block {
  struct ad__block *prev, *next;
  uint64_t id;                           /* position in the tape's block list, from 0 */
  ad_index base;                         /* handle of the statement before the block's first */
  uint32_t ns, na, np;                   /* used; for the current block the recorder holds the truth */
  uint32_t ns_alloc, na_alloc, np_alloc; /* capacities, sized from what recordings use */
  size_t before;                         /* bytes the recording used in the blocks before this one */
  uint8_t *cnt;
  ad_index *idx;
  double *par;
} ad__block;

/* A special record (external function, MPI communication) interleaved with
 * the statements: it runs after the statements up to handle `pos` in a
 * forward sweep and before them in a reverse sweep. */
typedef struct ad__record_ops {
  const char *name;
  /* Reverse action: read/modify adjoints. Returns AD_OK or an AD_ERR_*. */
  int (*reverse)(ad_tape *tape, void *data);
  /* Tangent action; NULL means the record has no tangent (ad_forward fails). */
  int (*forward)(ad_tape *tape, void *data);
  /* Free `data`; may be NULL. */
  void (*destroy)(void *data);
  /* For ad_tape_dump (optional): one line of key=value fields into buf, with
   * in= and out= handle lists (lib/describe.h). Returns what snprintf would. */
  int (*describe)(const void *data, char *buf, size_t size);
} ad__record_ops;

typedef struct ad__record {
  ad_index pos;
  const ad__record_ops *ops;
  void *data;
  size_t bytes; /* memory the record holds, for statistics */
} ad__record;

/* An extension attached to a tape (the MPI layer): told when a sweep starts
 * and ends so that it can agree with other ranks. Its state belongs to one
 * recording: a reset or destroyed tape destroys it and lets go of it. */
typedef struct ad__ext_ops {
  /* err: the error the sweep is about to fail with (AD_OK if none), so that
   * peers can be told. Returns AD_OK or an error that stops the sweep. */
  int (*sweep_begin)(ad_tape *t, void *ctx, int reverse, int err);
  /* rc: the sweep's result. Returns the result to report. */
  int (*sweep_end)(ad_tape *t, void *ctx, int reverse, int rc);
  void (*destroy)(void *ctx);
  /* Replace v[0..n) by its maximum over every rank this tape communicated
   * with, directly or through others (collective over them, like a sweep).
   * Used by drivers that must run the same sweeps on all ranks. May be NULL. */
  int (*agree_max)(ad_tape *t, void *ctx, int64_t *v, int n);
} ad__ext_ops;

/* An earlier part of the current recording: a reset to a position ends the
 * recording's epoch and starts a new one. Handles of epoch `epoch` above
 * `start` and up to `cut` (the lowest position reset to since) are live. */
/* Forward propagation bounds (see ad__region_spill). */
#define AD__FWD_VALUES 2048

typedef struct ad__lineage {
  uint32_t epoch;
  ad_index start, cut;
} ad__lineage;

struct ad_tape {
  ad__recorder rec;
  ad__recorder *prev_rec; /* recorder current before ad_tape_begin */
  ad_tape *prev_tape;
  int recording;

  ad__block *head, *cur; /* blocks after cur are spares kept for reuse */
  uint64_t nblocks;

  ad__record *recs;
  size_t nrec, caprec;
  size_t rec_bytes;

  double *adj; /* adjoints, index = handle */
  size_t adj_cap;
  double *tan; /* tangents */
  size_t tan_cap;
  /* Leading entries left over from a recording that was reset: they read as
   * zero and are cleared when the vector is next needed, so that a reset
   * costs nothing in proportion to the tape. */
  size_t adj_dirty, tan_dirty;

  /* scratch for fused statements and preaccumulation */
  ad_index *sc_idx;
  double *sc_par;
  size_t sc_idx_cap, sc_par_cap;
  size_t sc_cap; /* the smaller of the two: what both can hold */
  size_t *sc_cnt; /* per-result counts of ad_stmt_end_n */
  size_t sc_cnt_cap;
  double *loc;
  size_t loc_cap;
  /* Forward propagation in a preaccumulation region: the partials of value j
   * of the region with respect to its inputs fwd_in[k] are fwd[j *
   * AD__FWD_INPUTS + k] (0 for inputs not met yet). */
  double *fwd;
  size_t fwd_cap; /* rows */
  ad_index fwd_in[AD__FWD_INPUTS];

  /* The epochs before the current one whose handles are partly live, oldest
   * first, and the last handle before the current epoch's first. */
  ad__lineage *hist;
  size_t nhist, caphist;
  ad_index epoch_start;
  /* The highest handle issued in the current epoch: a preaccumulation region
   * discards statements without ending the epoch, and a value it discarded
   * that is used anyway must still index inside the adjoint vector. */
  ad_index hwm;
  /* A position was taken inside the preaccumulation region open on this
   * tape: ending the region by replacing its statements ends the epoch (see
   * ad__region_discard). */
  int pos_in_region;

  int err;
  char msg[512];
  /* The handle and recording of the argument that set a stale-handle error
   * while recording (0 if none), for callers that explain it (a
   * checkpointed loop's step that used a value from outside its state). */
  ad_index stale_i;
  uint32_t stale_e;
  int pending;
  char pmsg[512];

  const ad__ext_ops *ext_ops;
  void *ext_ctx;
  /* A checkpointed loop recorded here communicates: every rank sweeps the
   * tape, even with a passive output, since the loop's reverse re-runs that
   * communication. Cleared by ad_tape_reset. */
  int loop_comm;

  /* Watching what is recorded (see ad__watch_value): the finite check and
   * the operation names, each statement's name and value indexed by its
   * handle (names[h] NULL: not known). `watch_rec` names the record whose
   * outputs the next values entering the tape are. */
  int check_finite, record_names;
  const char **names;
  double *vals;
  size_t names_cap, vals_cap;
  const char *watch_rec;

  ad_tape_options opt;
  uint64_t index_limit;
  size_t bytes_alloc, bytes_peak;
};

/* A region that holds special records, new inputs, more than
 * AD__FWD_INPUTS inputs or AD__FWD_VALUES values, a non-finite partial or
 * partial with respect to its inputs, or
 * meets any call that reads the recording (positions, sweeps, the MPI
 * layer) is spilled: its values so far become statements on its inputs, and
 * the rest is recorded operation by operation and preaccumulated at the end
 * by a local reverse sweep, as before. No-op unless a region propagates
 * forward on t. */
void ad__region_spill(ad_tape *t);
static inline void ad__region_flush(ad_tape *t) {
  if (AD__UNLIKELY(t->rec.fwd & AD__FWD_REGION)) ad__region_spill(t);
}

/* Watching a recording (lib/watch.c). The recorder's AD__FWD_WATCH bit
 * sends every operation to the library, which calls these before recording
 * it: 1 if the statement may be recorded, else 0 with the sticky error
 * AD_ERR_NONFINITE naming `op` (finite check). Arguments are given as
 * ad_real (values known) or, with args NULL, as handles; par NULL means
 * partials of +1. ad__watch_note keeps the name and value of handle h. */
static inline int ad__watching(const ad_tape *t) { return t->check_finite | t->record_names; }
int ad__watch_value(ad_tape *t, const char *op, double v, uint32_t n, const ad_real *args, const ad_index *idx,
                    const double *par);
void ad__watch_note(ad_tape *t, ad_index h, const char *op, double v);
/* The name and value recorded for handle h: the name, or NULL if unknown. */
const char *ad__watch_name(const ad_tape *t, ad_index h, double *v);
/* Set the recorder's AD__FWD_WATCH bit from the tape's options. */
void ad__watch_arm(ad_tape *t);
/* At creation (the environment's options), reset and destruction. */
void ad__watch_init(ad_tape *t);
void ad__watch_reset(ad_tape *t);
void ad__watch_free(ad_tape *t);
/* A value entering the tape without an operation (an input, a record's
 * output): the finite check, and its note. 1 if it may be recorded. */
int ad__watch_input(ad_tape *t, double v, const char *op);
/* The reverse sweep's finite check: the first statement whose adjoint
 * became non-finite, found after the sweep ran its course. */
typedef struct ad__adj_watch {
  int found;
  ad_index stmt, target; /* the statement swept, the handle whose adjoint it made non-finite (0: its own) */
  double partial, adjoint, result;
} ad__adj_watch;
int ad__watch_adjoint_report(ad_tape *t, const ad__adj_watch *w);
/* The same for the tangent sweep: `stmt` is the first statement whose
 * tangent became non-finite, `target` the argument whose term made it so,
 * `adjoint` that argument's tangent, `result` the statement's tangent. */
int ad__watch_tangent_report(ad_tape *t, const ad__adj_watch *w);

/* Memory through the tape's allocator and limit. NULL (and a sticky
 * AD_ERR_NOMEM if `fail` is set) when it cannot be had. */
void *ad__alloc(ad_tape *t, size_t size);
void ad__free(ad_tape *t, void *p, size_t size);
/* Grow *arr (elements of `elem` bytes, zero-filled) to at least `need` elements. */
int ad__grow(ad_tape *t, void **arr, size_t *cap, size_t need, size_t elem);
int ad__grow_to(ad_tape *t, void **arr, size_t *cap, size_t ncap, size_t elem);

/* fn on each of n blocks: the arrays of a struct that allocates each of
 * them on its own, freed (AD__FREE_EACH) or otherwise disposed of
 * (AD__EACH(fn, a, b, ...)); fn takes NULL. */
void ad__each(void (*fn)(void *), size_t n, void *const *blocks);
#define AD__EACH(fn, ...)                                                                                              \
  ad__each(fn, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *), (void *const[]){__VA_ARGS__})
#define AD__FREE_EACH(...) AD__EACH(free, __VA_ARGS__)

/* Sticky error: the first one wins; recording stops. */
void ad__fail(ad_tape *t, int code, const char *fmt, ...);
/* Usage error of a void call, reported once by the next sweep or driver
 * (with t NULL: the thread's last error, as ad__fail_notape); returns code. */
int ad__pending(ad_tape *t, int code, const char *fmt, ...);
/* Error with no tape to keep it: thread-local last error and the handler.
 * ad_tape_error_message(NULL) reads the message. */
void ad__fail_notape(int code, const char *fmt, ...);
/* A bad argument of a call that returns a code: returns AD_ERR_ARG, and the
 * message (which names the argument) becomes the one
 * ad_tape_error_message(t) reads, or, with t NULL, the thread's last error.
 * The tape does not enter an error state, so the next call is not failed by
 * it; an error the tape already holds (sticky or pending) keeps its
 * message, as it is reported first. */
int ad__arg_error(const ad_tape *t, const char *fmt, ...);
/* Counts no array can have: (size_t)-1, a negative int converted. Bounded
 * by the largest element a count here is of (an ad_real), so that a check
 * passed leaves no multiplication by an element size to overflow. */
#define AD__COUNT_MAX (SIZE_MAX / 32)
/* The common argument checks of a call `fn`: AD_OK, or AD_ERR_ARG with a
 * message naming the argument (ad__arg_error). */
static inline int ad__arg_count(const ad_tape *t, const char *fn, const char *name, size_t n) {
  return n > AD__COUNT_MAX ? ad__arg_error(t, "%s: %s = %zu is more elements than any array holds", fn, name, n)
                           : AD_OK;
}
static inline int ad__arg_array(const ad_tape *t, const char *fn, const char *name, const void *p, size_t n) {
  return n && !p ? ad__arg_error(t, "%s: %s is NULL for %zu element%s", fn, name, n, n == 1 ? "" : "s") : AD_OK;
}
static inline int ad__arg_tape(const ad_tape *t, const char *fn) {
  return t ? AD_OK : ad__arg_error(NULL, "%s: tape is NULL", fn);
}
/* Message prefix, e.g. "[3] " set by the MPI layer; "" by default. */
void ad__set_message_prefix(const char *prefix);
/* Suspend recording on this thread (passive re-runs inside a sweep or a
 * recording) and resume it. */
typedef struct ad__suspended {
  ad__recorder *rec;
  ad_tape *tape;
} ad__suspended;
ad__suspended ad__suspend(void);
void ad__resume(ad__suspended s);
/* This process's rank and a minimum over all ranks, set by the MPI layer
 * (rank 0 and the identity without it); used by resumable checkpointing. */
extern int (*ad__process_rank)(void);
extern int64_t (*ad__agree_min)(int64_t v);
/* Communication inside checkpointed loops, filled by the MPI layer (NULL
 * without it). collect_begin starts noting the communicators this thread's
 * wrappers use and returns a mark (nested loops nest); collect_end(mark,
 * &comms) stops and returns how many there were, in *comms (malloc'd, the
 * caller frees it; the communicators' records live as long as the MPI
 * layer). agree sets *v to its minimum over the ranks of those
 * communicators, bounded by the layer's timeout: AD_OK, or AD_ERR_MPI (a
 * rank that never came, a freed communicator) with the reason in why. */
typedef struct ad__loop_comm_ops {
  void *(*collect_begin)(void);
  size_t (*collect_end)(void *mark, void ***comms);
  int (*agree)(void *const *comms, size_t n, int64_t *v, char *why, size_t size);
} ad__loop_comm_ops;
static inline int ad__sweeps_everywhere(const ad_tape *t) { return t->ext_ops || t->loop_comm; }
extern const ad__loop_comm_ops *ad__loop_comm;
/* Report through the error handler (used by the MPI layer too). */
void ad__report(const ad_tape *t, int code, const char *msg);
void ad__vformat(char *buf, size_t size, int code, const char *fmt, va_list ap);

/* The partials of the kinds that store none, [kind][argument] (kind 0 unused). */
extern const double ad__unit_partials[4][AD_STMT_MAX_ARGS];
/* The partial of argument j of a statement of a kind without stored partials. */
static inline double ad__unit(uint32_t kind, uint32_t j) {
  return kind == AD__KIND_PLUS || (kind == AD__KIND_DIFF && j == 0) ? 1.0 : -1.0;
}
static inline size_t ad__max_size(size_t a, size_t b) { return a > b ? a : b; }
/* Entries the adjoint and tangent vectors need: every handle of the epoch. */
static inline size_t ad__span(const ad_tape *t) { return (size_t)(t->hwm > t->rec.next ? t->hwm : t->rec.next) + 1; }
static inline ad_tape *ad__tape_of(ad__recorder *R) { return (ad_tape *)(void *)((char *)R - offsetof(ad_tape, rec)); }
/* The fast path's argument limit: as much room as the block has for
 * statements, arguments and partials (each inline statement has at least one
 * argument, and stores at most one partial per argument). */
static inline void ad__recorder_lim(ad__recorder *R) {
  uint32_t rs = R->ns < R->ns_cap ? R->ns_cap - R->ns : 0, ra = R->na_cap - R->na, rp = R->np_cap - R->np;
  uint32_t r = rs < ra ? rs : ra;
  R->lim = rs && !R->fwd ? R->na + (r < rp ? r : rp) : 0;
}
/* Recompute the recorder's statement capacity (0 while not recording). */
void ad__recorder_arm(ad_tape *t);
/* A block that starts this far into a recording is written by ad_custom
 * with streaming stores (see ad__stream_index in ariadne.h): twice the
 * second-level cache of the machine of benchmarks/README.md. A tape below it
 * is found in the caches by its sweep, and streaming it measured slower. */
#define AD__STREAM_AFTER ((size_t)8 << 20)
/* Streaming stores are ordered with later ones only after a fence: taken
 * where a recording hands its blocks on (ad_tape_end, a sweep, a new
 * block), so that another thread that takes the tape sees them. */
static inline void ad__stream_fence(void) {
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_ia32_sfence();
#endif
}
/* Write the recorder's counters back to the current block. */
static inline void ad__sync(ad_tape *t) {
  ad__stream_fence();
  t->cur->ns = t->rec.ns;
  t->cur->na = t->rec.na;
  t->cur->np = t->rec.np;
}
/* Ensure the adjoint (tangent) vector covers every handle issued. */
int ad__adjoints_ready(ad_tape *t);
int ad__tangents_ready(ad_tape *t);
/* First error to report from a driver: sticky, then pending (cleared). */
int ad__driver_check(ad_tape *t);
/* Validate a handle against the tape: 0 passive, 1 valid, -1 stale. */
int ad__handle_check(const ad_tape *t, ad_real x);
/* 1 if handle i of recording epoch e is live on t (i != 0). */
int ad__handle_live(const ad_tape *t, ad_index i, uint32_t e);
/* Why a handle is not live, for messages: "discarded by ad_tape_reset_to" or
 * "from another tape, or from before ad_tape_reset". */
const char *ad__stale_reason(const ad_tape *t, ad_index i, uint32_t e);
/* Move the recording back to p without ending its epoch (preaccumulation,
 * which replaces what it discards by one statement). p must be valid. */
void ad__rewind(ad_tape *t, ad_tape_pos p);
/* A preaccumulation region that starts after handle `start` is about to
 * replace its statements. If a position was taken inside it, the epoch ends
 * at `start`, as ad_tape_reset_to does, so that the position (and the
 * handles of the statements replaced) read as discarded instead of naming
 * the statements recorded later under the same numbers. */
int ad__region_discard(ad_tape *t, ad_index start);
/* AD_OK if p is a position of the tape's current recording, else AD_ERR_ARG
 * with a pending error naming `fn`. */
int ad__pos_check(ad_tape *t, ad_tape_pos p, const char *fn);

/* Push a special record at the current position of the recording tape `t`.
 * On failure (no memory) the tape gets a sticky error, `destroy(data)` is
 * called, and AD_ERR_NOMEM is returned. */
int ad__record_push(ad_tape *t, const ad__record_ops *ops, void *data, size_t bytes);
/* A new statement with no arguments (an input, or a value received from
 * elsewhere); passive if the tape is not recording. */
ad_real ad__new_input(ad_tape *t, double value);
/* The same, named `op` for the finite check and the dump (NULL: the output
 * of the last record, or "ad_input"). */
ad_real ad__new_value(ad_tape *t, double value, const char *op);

/* Sweeps (adjoint/sweep.c): report the tape's error first (telling the
 * extension, so other ranks learn of it), then run the extension's begin
 * hook, the sweep and the end hook. */
int ad__sweep_reverse(ad_tape *t, ad_tape_pos lo);
int ad__sweep_forward(ad_tape *t);
/* Vector mode: adj/tan arrays of width w (element [h*w + l]), tapes without records only. */
void ad__sweep_reverse_vec(ad_tape *t, double *adj, size_t w);
void ad__sweep_forward_vec(ad_tape *t, double *tan, size_t w);

#endif
