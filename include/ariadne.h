/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ariadne: tape-based reverse-mode algorithmic differentiation for C.
 *
 * `#include <ariadne.h>` is all a serial user needs. Port a `double` code by
 * changing its type to `ad_real` and its arithmetic to `ad_add`, `ad_mul`,
 * `ad_sin`, ...; record it between `ad_tape_begin` and `ad_tape_end`; seed and
 * sweep the tape. Define ARIADNE_PASSIVE before including this header (or use
 * the CMake target Ariadne::passive) and the very same source compiles to
 * plain `double` arithmetic at zero cost.
 *
 * Error model: calls that can fail return AD_OK (0) or a negative AD_ERR_*
 * code. Elementary operations cannot return codes, so a tape keeps a *sticky*
 * error: the first failure while recording is stored with a message,
 * recording stops (values are still computed), and every later driver call on
 * that tape returns the error until `ad_tape_reset`.
 *
 * A bad argument (a NULL array, a count no array can have such as
 * (size_t)-1) makes the call return AD_ERR_ARG before it touches anything;
 * the message naming the call and the argument is what
 * ad_tape_error_message(tape) returns (unless the tape already holds an
 * error, which is reported first), and with a NULL tape, or in a call that
 * takes none, the thread's last error (ad_last_error,
 * ad_tape_error_message(NULL)). The tape does not enter an error state.
 */
#ifndef ARIADNE_H
#define ARIADNE_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ariadne_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Error codes: one list generates the enum, ad_strerror and ad_errname.     */
/* ------------------------------------------------------------------------ */

#define AD_ERRNO_MAP(X)                                                                                                \
  X(AD_OK, 0, "success")                                                                                               \
  X(AD_ERR_NOMEM, -1, "out of memory: an allocation failed or the tape's memory limit was reached")                    \
  X(AD_ERR_INDEX_OVERFLOW, -2, "tape index space exhausted (rebuild with -DARIADNE_INDEX_64=ON or record less)")       \
  X(AD_ERR_STALE_HANDLE, -3, "active value from another tape or from a recording that was reset")                      \
  X(AD_ERR_NO_TAPE, -4, "no tape is recording on this thread")                                                         \
  X(AD_ERR_PASSIVE, -5, "value is passive: it was never recorded on this tape")                                        \
  X(AD_ERR_ARG, -6, "invalid argument")                                                                                \
  X(AD_ERR_STATE, -7, "operation not allowed in the tape's current state")                                             \
  X(AD_ERR_CALLBACK, -8, "a user callback reported an error")                                                          \
  X(AD_ERR_MPI, -9, "MPI error")                                                                                       \
  X(AD_ERR_PASSIVE_BUILD, -10, "not available in a passive (ARIADNE_PASSIVE) build")                                   \
  X(AD_ERR_IO, -11, "I/O error")                                                                                       \
  X(AD_ERR_CORRUPT, -12, "corrupt or foreign data")                                                                    \
  X(AD_ERR_CHECK, -13, "derivative check failed: the tape disagrees with finite differences or its tangent")           \
  X(AD_ERR_NONFINITE, -14, "non-finite value, partial or adjoint (the tape's finite check)")

/* clang-format off */
typedef enum ad_errcode {
#define AD__ERRNO_ENUM(name, code, msg) name = code,
  AD_ERRNO_MAP(AD__ERRNO_ENUM)
#undef AD__ERRNO_ENUM
  AD__ERR_LAST = -15
} ad_errcode;
/* clang-format on */

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

#ifdef ARIADNE_INDEX_64
typedef uint64_t ad_index;
#define AD_INDEX_MAX UINT64_MAX
#else
typedef uint32_t ad_index;
#define AD_INDEX_MAX UINT32_MAX
#endif

typedef struct ad_tape ad_tape;

/* Tape statistics, filled by ad_tape_stats. */
typedef struct ad_stats {
  uint64_t statements;   /* handles issued: inputs and recorded operations */
  uint64_t arguments;    /* (handle, partial) pairs on the tape */
  uint64_t records;      /* special records: external functions, MPI */
  uint64_t blocks;       /* storage blocks in use */
  size_t bytes_used;     /* bytes of recorded data (statements, arguments, records) */
  size_t bytes_reserved; /* bytes of tape storage allocated, kept for reuse included */
  size_t bytes_adjoints; /* bytes of the adjoint and tangent vectors */
  size_t bytes_peak;     /* highest bytes_reserved + bytes_adjoints since creation */
} ad_stats;

/* What a progress callback learns about a long sweep or checkpointed loop
 * (see ariadne_tools.h). Calls come in order: the first with done = 0, the
 * last with finished = 1 and done = total. */
typedef struct ad_progress {
  const char *what;     /* "reverse sweep", "tangent sweep", "checkpointed loop" */
  uint64_t done, total; /* statements swept, or steps of the loop reversed */
  int64_t recomputed;   /* checkpointed loops: steps re-run so far (advances) */
  double fraction;      /* done / total, in [0, 1] */
  double elapsed;       /* seconds since the first call */
  double remaining;     /* estimated seconds left (from the rate so far; 0 when finished) */
  int finished;
} ad_progress;
typedef void (*ad_progress_fn)(const ad_progress *p, void *ud);

/* Options for ad_tape_create_with; start from ad_tape_options_default. */
typedef struct ad_tape_options {
  /* Storage blocks. 0 (the default): automatic, from 4096 statements doubling
   * up to 2^18, with the arguments and partials per statement of what was
   * recorded. Otherwise statements per block (>= 1024), and arguments of the
   * first block (>= 1024; later ones follow what was recorded). */
  uint32_t block_statements;
  uint32_t block_arguments;
  size_t memory_limit;  /* bytes the tape may allocate; 0 = unlimited */
  uint64_t index_limit; /* largest handle the tape may issue; 0 = the index width's maximum */
  /* Allocator for all of the tape's memory. Each array is released by the
   * counterpart of what allocated it: what .alloc returned goes to .free,
   * or to free() if .free is NULL, and is never kept in the memory cache
   * (see ad_memory_cache_limit). With .alloc NULL the library allocates
   * (malloc, or the kernel for large arrays) and releases its memory
   * itself, and .free is never called. */
  void *(*alloc)(size_t size, void *ud);
  void (*free)(void *ptr, void *ud);
  void *alloc_ud;
  /* Progress of this tape's sweeps. NULL: the default report (ad_progress_print
   * of ariadne_tools.h) if ARIADNE_PROGRESS=1 or standard error is a terminal. */
  ad_progress_fn progress;
  void *progress_ud;
} ad_tape_options;

/* A position on a tape (see ad_tape_position). Fields are read-only. */
typedef struct ad_tape_pos {
  uint64_t index;      /* handle of the last statement before the position */
  uint64_t records;    /* number of special records before the position */
  uint64_t block;      /* storage block */
  uint32_t ns, na, np; /* statements, arguments and stored partials used in that block */
  uint32_t epoch;      /* the recording the position was taken in */
} ad_tape_pos;

/* Error handler, called once when a tape (or, with tape NULL, a call that has
 * no tape) enters an error state. It may print, log or abort. */
typedef void (*ad_error_handler)(const ad_tape *tape, int code, const char *message, void *ud);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* The library's version at run time, e.g. "0.1.0 (32-bit handles)", and as a
 * number, major * 10000 + minor * 100 + patch; compare with ARIADNE_VERSION
 * and ARIADNE_VERSION_NUMBER from ariadne_config.h, the headers compiled in. */
const char *ad_version(void);
int ad_version_number(void);

/* Message for an error code ("unknown error" for codes not in the table). */
const char *ad_strerror(int code);
/* Name of an error code ("AD_ERR_NOMEM"), or "AD_ERR_UNKNOWN". */
const char *ad_errname(int code);
/* Install a process-wide error handler (NULL: none, the default). */
void ad_set_error_handler(ad_error_handler handler, void *ud);
/* A ready-made handler that prints "ariadne: <message>" to stderr. */
void ad_error_handler_print(const ad_tape *tape, int code, const char *message, void *ud);
/* The last error raised on this thread by a call that had no tape to keep it
 * (ad_input without a recording tape, a NULL tape, ad_check_gradient's
 * arguments); AD_OK if none. Its message is ad_tape_error_message(NULL).
 * ad_clear_last_error resets both. */
int ad_last_error(void);
void ad_clear_last_error(void);

/* Callbacks of an external function: see ad_external. */
typedef struct ad_external_ops {
  int (*reverse)(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y, const double *ybar);
  int (*forward)(void *ud, size_t nin, const double *x, const double *xdot, size_t nout, const double *y, double *ydot);
  void (*destroy)(void *ud);
  const char *name; /* for messages; may be NULL */
} ad_external_ops;

#ifndef ARIADNE_PASSIVE

/* The active scalar: a value and a handle on the tape that recorded it.
 * Fields are read-only for users; handle 0 means passive (a constant). */
typedef struct ad_real {
  double v;   /* read-only: the value */
  ad_index i; /* read-only: the handle, 0 = passive */
  uint32_t e; /* read-only: the recording (epoch) that issued the handle */
#ifdef __cplusplus
  /* C++: the same struct (C and C++ share arrays and tapes), constructed
   * from a double as a passive value; see ariadne.hpp for the operators. */
  ad_real() = default;
  ad_real(double x) : v(x), i(0), e(0) {}
  explicit operator double() const { return v; }
#endif
} ad_real;

/* ------------------------------------------------------------------------ */
/* Tapes                                                                     */
/* ------------------------------------------------------------------------ */

/* Create a tape with default options; NULL if out of memory. */
ad_tape *ad_tape_create(void);
/* Create a tape with the given options (NULL: defaults); NULL on failure. */
ad_tape *ad_tape_create_with(const ad_tape_options *opts);
void ad_tape_options_default(ad_tape_options *opts);
/* Destroy a tape and everything it holds. NULL is fine. A tape that is
 * recording is ended first. */
void ad_tape_destroy(ad_tape *tape);
/* Make `tape` this thread's current tape and start (or resume) recording.
 * Begins nest: ad_tape_end restores the tape that was current before. */
void ad_tape_begin(ad_tape *tape);
/* Stop recording on `tape`; values are still computed, results are passive. */
void ad_tape_end(ad_tape *tape);
/* Forget the recording, the adjoints and any error; keep memory for reuse.
 * Handles issued before the reset become stale (detected when used). */
void ad_tape_reset(ad_tape *tape);
/* The tape's sticky error code (AD_OK if none) and its detailed message:
 * the sticky error's, else the last usage error's (a bad argument, a pending
 * error), else "". With tape NULL: AD_ERR_ARG, and the message of this
 * thread's last error (ad_last_error). */
int ad_tape_error(const ad_tape *tape);
const char *ad_tape_error_message(const ad_tape *tape);
/* 1 if `tape` is this thread's current, recording tape. */
int ad_tape_is_recording(const ad_tape *tape);
/* This thread's current tape (NULL if none). */
ad_tape *ad_tape_current(void);
/* Statistics. Returns AD_OK or AD_ERR_ARG. */
int ad_tape_stats(const ad_tape *tape, ad_stats *out);
/* Limit the bytes the tape may allocate (0 = unlimited). Exceeding it while
 * recording sets the sticky error AD_ERR_NOMEM. */
void ad_tape_set_memory_limit(ad_tape *tape, size_t bytes);
/* Finite check (on: non-zero; a tape starts with it on if the environment
 * variable ARIADNE_CHECK_FINITE=1 when it is created). While recording, the
 * first operation whose value or partial is a NaN or an infinity (sqrt or log
 * at 0, 1/0, log(-1)), and the first value entering the tape so (ad_input,
 * an external function's output, a received MPI value), sets the sticky error
 * AD_ERR_NONFINITE naming the operation, its arguments and the handle it
 * would have made; recording stops there, as for any sticky error. A reverse
 * sweep (ad_reverse, ad_reverse_to, ad_gradient, which fills g all the
 * same) runs to its end and then returns AD_ERR_NONFINITE, its message
 * naming the first statement whose adjoint became non-finite and its
 * operation; a tangent sweep (ad_forward) likewise names the first statement
 * whose tangent became non-finite, and ad_jacobian runs checked scalar
 * sweeps instead of its vector ones. The check implies
 * ad_tape_set_record_names. Cost: nothing while off; while on, every
 * operation is recorded by the library's general path (docs/debugging.md
 * gives the measured factor). Takes effect for what is recorded next. */
void ad_tape_set_check_finite(ad_tape *tape, int on);
/* Record each statement's operation name ("ad_mul") and value too (on:
 * non-zero; also on at creation if ARIADNE_RECORD_NAMES=1), for
 * ad_tape_dump and the finite check's messages: 16 more bytes per statement,
 * and recording by the library's general path, as the finite check. */
void ad_tape_set_record_names(ad_tape *tape, int on);

/* Memory kept for the next tapes (process-wide). The large arrays a tape lets
 * go (blocks and vectors at ad_tape_destroy, a vector it outgrows) are kept,
 * up to a limit, and reused by the tapes created later: a process that
 * records one tape after another pays for fresh memory once. Arrays from an
 * allocator of ad_tape_options (.alloc) are not kept. The limit is 1 GiB unless the
 * environment variable ARIADNE_MEMORY_CACHE (bytes, with an optional K, M or
 * G suffix) says otherwise when the cache is first used; 0 keeps nothing.
 * ad_memory_cache_limit sets it, releases what is over it, and returns the
 * previous limit; ad_memory_cache_bytes is what is kept now. */
size_t ad_memory_cache_limit(size_t bytes);
size_t ad_memory_cache_bytes(void);

/* Positions: record something, remember where, then sweep or discard only
 * the part after it. ad_tape_reset_to(tape, pos) discards what was recorded
 * after pos: handles issued after pos become stale (AD_ERR_STALE_HANDLE
 * wherever they are used again, even though later statements reuse their
 * numbers), and so do positions taken after pos (AD_ERR_ARG). Handles and
 * positions from before pos stay valid. A position taken inside a
 * preaccumulation region names statements the region's end replaces: once
 * the region has ended it is refused too (AD_ERR_ARG). */
ad_tape_pos ad_tape_position(const ad_tape *tape);
/* Discard everything recorded after `pos` (adjoints and tangents of later handles too). */
int ad_tape_reset_to(ad_tape *tape, ad_tape_pos pos);

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

/* A new independent variable on this thread's recording tape. Without one,
 * the result is passive and ad_last_error() reports AD_ERR_NO_TAPE. */
ad_real ad_input(double value);
/* A passive value (a constant), and the value of an ad_real or a number. */
#define ad_const(x) ad__const((double)(x))
/* A constant initializer of static storage: `static ad_real c = AD_REAL_INIT(0.5);`
 * (ad_const is a function call, which C does not allow there). */
#define AD_REAL_INIT(x)                                                                                                \
  { (double)(x), 0, 0 }
#define ad_value(x) ad__val(x)

/* ------------------------------------------------------------------------ */
/* Adjoints, tangents, drivers                                               */
/* ------------------------------------------------------------------------ */

/* Add ybar to the adjoint of y. A passive or stale y sets an error that the
 * next ad_reverse returns. */
void ad_seed(ad_tape *tape, ad_real y, double ybar);
/* Reverse sweep over the whole tape: adjoints of all arguments accumulate.
 * Returns AD_OK or the tape's error. The tape can be swept again. */
int ad_reverse(ad_tape *tape);
/* Reverse sweep over the part of the tape after `pos` only. */
int ad_reverse_to(ad_tape *tape, ad_tape_pos pos);
/* Adjoint of x after a sweep (0 for a passive x; NaN and an error for a stale one). */
double ad_adjoint(const ad_tape *tape, ad_real x);
/* Set every adjoint to zero. */
void ad_adjoints_zero(ad_tape *tape);
/* Set the tangent (direction) of x, typically an input. */
void ad_tangent_seed(ad_tape *tape, ad_real x, double xdot);
/* Forward (tangent) sweep: tangents of all recorded values from the seeds. */
int ad_forward(ad_tape *tape);
/* Tangent of y after ad_forward (0 for a passive y). */
double ad_tangent(const ad_tape *tape, ad_real y);
/* Set every tangent (seeds included) to zero. */
void ad_tangents_zero(ad_tape *tape);

/* Gradient of scalar y with respect to x[0..n): one reverse sweep. Adjoints
 * are zeroed first. A passive y gives AD_ERR_PASSIVE and g = 0, except on a
 * tape with communication records (ariadne_mpi.h): there the sweep is
 * collective, and a rank whose output is not its own passes a passive y
 * and sweeps for the others (AD_OK; docs/mpi.md). Bad
 * arguments (a NULL tape, x or g, n = (size_t)-1) give AD_ERR_ARG with g
 * untouched. */
int ad_gradient(ad_tape *tape, ad_real y, size_t n, const ad_real *x, double *g);
/* Jacobian dy/dx, row-major m x n. Chooses vector-mode reverse sweeps
 * (m <= n) or vector-mode tangent sweeps (m > n). The x must be independent
 * variables (from ad_input): a tangent sweep recomputes every other value.
 * Passive outputs give zero rows and passive inputs zero columns. */
int ad_jacobian(ad_tape *tape, size_t m, const ad_real *y, size_t n, const ad_real *x, double *J);

/* ------------------------------------------------------------------------ */
/* Fused statements and preaccumulation                                      */
/* ------------------------------------------------------------------------ */

/* Arguments one statement can take. A fused statement with more active
 * arguments is recorded as a chain of statements (the same derivative). */
#define AD_STMT_MAX_ARGS 63
/* One tape statement each, up to AD_STMT_MAX_ARGS active arguments. */
ad_real ad_sum(size_t n, const ad_real *x);
ad_real ad_lincomb(size_t n, const double *w, const ad_real *x);
ad_real ad_dot(size_t n, const ad_real *a, const ad_real *b);
/* value with user-supplied partials d value / d args[k]: see ad_custom below. */

/* Statement-level preaccumulation: the operations between ad_stmt_begin and
 * ad_stmt_end are replaced by one statement whose arguments are the distinct
 * active inputs of the region (the values from before it that it uses), with
 * the result's partials with respect to them. Nothing is recorded inside the
 * region: each value computed there carries its partials with respect to
 * the region's inputs, propagated forward, and ad_stmt_end writes the one
 * statement (inputs whose partial is exactly 0 are left out; a result that
 * depends on none becomes a statement without arguments, as an input).
 * Only `result` may be used after ad_stmt_end; other values computed inside
 * the region are discarded with it. Regions nest (inner pairs do nothing).
 *
 * A region with more than 8 inputs or more than 2048 operations, one with an
 * operation whose partial is not finite (sqrt at 0) or whose partials with
 * respect to the region's inputs overflow although each partial is finite
 * (1e200 * (1e200 * x)), and one that meets a
 * call that must see its statements (a special record: MPI, external
 * functions, checkpointed loops; ad_input; ad_sum, ad_lincomb, ad_dot;
 * ad_tape_position, a sweep, ad_tape_end) is recorded operation by
 * operation from that point on and reduced at the end by a local reverse
 * sweep, which gives the same statement; the gradient is that of the
 * per-operation recording to round-off either way, infinite partials on
 * unused paths included. A region that contains special records is left as
 * recorded. The tape's sticky error (a stale handle inside the region, say)
 * ends the region's work as it ends all recording. */
/* void ad_stmt_begin(void) is inline, below. */
ad_real ad_stmt_end(ad_real result);
/* A region with several results (a kernel computing several outputs from
 * shared intermediates, e.g. the fluxes of a finite-volume face): each of
 * results[0..m) that was computed inside the region is replaced by one
 * statement on the region's outside arguments; the others are left as they
 * are. Only the results may be used after it. */
void ad_stmt_end_n(size_t m, ad_real *results);

/* Statements recorded on a path that turns out to reach nothing (internal:
 * what ariadne-port writes around a loop body's early `continue`, not API).
 * ad__spec_mark() notes the recording's end; ad__spec_drop(&m) takes back
 * the statements recorded since, so that their handles are issued again:
 * the caller guarantees that no value computed since the mark is used
 * afterwards (the port proves it: every active store in between goes to a
 * local of the loop body that the jump leaves). Nothing is dropped, which is
 * always right, when anything but statements was recorded in between (a
 * special record, a new block, a reset), on a watching tape (the checks see
 * every statement), inside a preaccumulation region, or with no recording. */
typedef struct ad__spec {
  const void *rec;     /* the recorder marked */
  const uint8_t *cnt;  /* its block */
  ad_index next;       /* its last handle */
  uint32_t ns, na, np; /* its block position */
  uint32_t epoch;
  uint64_t records;
} ad__spec;

/* ------------------------------------------------------------------------ */
/* External functions                                                        */
/* ------------------------------------------------------------------------ */

/* A piece of code with its own derivative instead of a taped one: a linear
 * solve, a library call. The user computes the outputs (passive values) and
 * calls ad_external, which makes each output a new active value depending on
 * the inputs through the callbacks. Sweeps call them at the record's place:
 *
 *   reverse: xbar[i] += sum_j ybar[j] * dy_j/dx_i   (xbar arrives zeroed;
 *            Ariadne adds it to the inputs' adjoints afterwards)
 *   forward: ydot[j]  = sum_i dy_j/dx_i * xdot[i]   (optional; without it
 *            ad_forward on the tape fails with AD_ERR_STATE)
 *
 * x and y are copies of the input and output values at the call. Callbacks
 * return 0 on success; anything else fails the sweep with AD_ERR_CALLBACK.
 * They may call MPI (plain or ad_mpi_*) and may record and sweep a nested
 * tape of their own. `destroy` (optional) frees `ud` when the record goes
 * (tape reset or destroyed), or at once if nothing was recorded. The ops
 * struct is declared above (it is shared with the passive build). */

/* Record an external function with inputs in[0..nin) and outputs
 * out[0..nout) (their values set by the caller; their handles are replaced).
 * If no input is active or no tape records, the outputs stay passive.
 * Returns AD_OK, AD_ERR_ARG (no reverse callback, NULL arrays), or the tape's
 * error. `ops` must stay valid while the record lives (a static struct). */
int ad_external(const ad_external_ops *ops, void *ud, size_t nin, const ad_real *in, size_t nout, ad_real *out);

/* ------------------------------------------------------------------------ */
/* Recording fast path (internal; used by the inline operations below)       */
/* ------------------------------------------------------------------------ */

/* A statement is one byte: its argument count (bits 0-5, at most 63) and its
 * kind (bits 6-7). Kind 0 stores a partial per argument; the others store
 * none: 1 = every partial is +1 (sums), 2 = +1 then -1 (a - b), 3 = every
 * partial is -1. Sums and differences are most of a stencil's operations,
 * and a partial is two thirds of an argument's bytes. */
#define AD__MAX_ARGS ((unsigned)AD_STMT_MAX_ARGS)
#define AD__KIND_GENERAL 0u
#define AD__KIND_PLUS 1u
#define AD__KIND_DIFF 2u
#define AD__KIND_MINUS 3u
/* Inputs a preaccumulation region propagates partials for; a region with
 * more is recorded operation by operation and swept at its end. */
#define AD__FWD_INPUTS 8u
/* Why every operation goes to the library (ad__recorder.fwd): a
 * preaccumulation region propagates partials forward, or the tape watches
 * what is recorded (the finite check, operation names). The inline paths
 * test the whole field once, on their slow branch only. */
#define AD__FWD_REGION 1
#define AD__FWD_WATCH 2

typedef struct ad__recorder {
  uint8_t *cnt;        /* statement bytes (count and kind) of the current block */
  ad_index *idx;       /* argument handles */
  double *par;         /* partial derivatives (kind 0 statements only) */
  uint32_t ns, ns_cap; /* statements used / available; ns_cap is 0 while not recording */
  uint32_t na, na_cap; /* arguments used / available in the current block */
  uint32_t np, np_cap; /* partials used (never more than arguments) / available */
  uint32_t lim;        /* fast-path argument limit: na + room for statements, arguments and partials, 0 if none */
  ad_index next;       /* handle of the last statement issued */
  uint32_t epoch;      /* recording identity, checked against handles */
  int active;          /* recording with no error */
  int fwd;             /* AD__FWD_* bits: every operation takes the library's path (lim is then 0) */
  uint64_t records;    /* special records pushed so far */
  double *fwd_rows;    /* rows of forward propagation in a region (see ad__fwd_row) */
  uint32_t fwd_cap;    /* values they have room for */
  uint32_t fwd_lim;    /* values the inline region path may issue: fwd_cap, or 0 on a watching tape */
  uint32_t stream;     /* ad_custom writes this block with streaming stores (see ad__stream_index) */
} ad__recorder;

#if defined(__GNUC__)
#define AD__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AD__TLS_MODEL __attribute__((tls_model("initial-exec")))
#define AD__ALWAYS_INLINE __attribute__((always_inline))
#define AD__NOINLINE __attribute__((noinline, unused))
#else
#define AD__NOINLINE
#define AD__UNLIKELY(x) (x)
#define AD__TLS_MODEL
#define AD__ALWAYS_INLINE
#endif

/* C11's thread storage, spelled so that the header compiles as C++ too. In
 * C++ with GCC or Clang it is __thread: an extern thread_local variable may
 * have a dynamic initialiser in another translation unit, so every use of
 * it tests for (and may call) a wrapper that runs it, once per recorded
 * statement here; the C variable has none, which __thread says. */
#if defined(__cplusplus) && defined(__GNUC__)
#define AD__THREAD_LOCAL __thread
#elif defined(__cplusplus)
#define AD__THREAD_LOCAL thread_local
#else
#define AD__THREAD_LOCAL _Thread_local
#endif

extern AD__THREAD_LOCAL ad__recorder *ad__rec AD__TLS_MODEL;

/* Slow paths: not recording, new block, stale handle, index overflow. Return
 * 0 if the statement must not be recorded (the tape then holds an error, or
 * is not recording). */
int ad__need(ad__recorder *r, uint32_t nargs, const ad_real *args, const char *op);
/* The operation inside a preaccumulation region (R->fwd): nothing is
 * recorded; the result's partials with respect to the region's inputs are
 * propagated forward (lib/fused.c). */
ad_real ad__fwd(ad__recorder *R, double v, uint32_t n, const ad_real *args, const double *partials, const char *op);
ad_real ad__fwd1(ad__recorder *R, double v, ad_real a, double da, const char *op);
ad_real ad__fwd2(ad__recorder *R, double v, ad_real a, double da, ad_real b, double db, const char *op);

static inline ad_real ad__const(double v) {
  ad_real r;
  r.v = v;
  r.i = 0;
  r.e = 0;
  return r;
}
static inline ad_real ad__lift_r(ad_real x) { return x; }
static inline ad_real ad__lift_d(double x) { return ad__const(x); }
static inline double ad__val_r(ad_real x) { return x.v; }
static inline double ad__val_d(double x) { return x; }
#ifdef __cplusplus
} /* extern "C": overloads instead of _Generic */
static inline ad_real ad__lift(ad_real x) { return x; }
static inline ad_real ad__lift(double x) { return ad__const(x); }
static inline double ad__val(ad_real x) { return x.v; }
static inline double ad__val(double x) { return x; }
extern "C" {
#elif defined(__GNUC__) && !defined(ARIADNE_NO_GNU_LIFT)
/* _Generic needs its operand twice, as the controlling expression and as the
 * argument, so ad_add(ad_add(ad_add(a, b), c), d) would hold a 2^depth copies
 * of its innermost operands: a 27-point stencil written out in one expression
 * becomes hundreds of millions of tokens and exhausts the compiler. A
 * statement expression evaluates the operand once into a temporary and
 * selects on that, so the text grows linearly. (__extension__ keeps
 * -pedantic builds quiet; other compilers take the portable form below.) */
#define ad__cat2(a, b) a##b
#define ad__cat(a, b) ad__cat2(a, b)
/* Each expansion names its temporary apart (__COUNTER__), so that nested
 * ones do not shadow each other under -Wshadow. */
#define ad__lift(x) ad__lift_as(x, ad__cat(ad__x, __COUNTER__))
#define ad__val(x) ad__val_as(x, ad__cat(ad__x, __COUNTER__))
#define ad__lift_as(x, t)                                                                                              \
  __extension__({                                                                                                      \
    __auto_type t = (x);                                                                                               \
    _Generic(t, ad_real : ad__lift_r, default : ad__lift_d)(t);                                                        \
  })
#define ad__val_as(x, t)                                                                                               \
  __extension__({                                                                                                      \
    __auto_type t = (x);                                                                                               \
    _Generic(t, ad_real : ad__val_r, default : ad__val_d)(t);                                                          \
  })
#else
#define ad__lift(x) _Generic((x), ad_real : ad__lift_r, default : ad__lift_d)(x)
#define ad__val(x) _Generic((x), ad_real : ad__val_r, default : ad__val_d)(x)
#endif

/* Preaccumulation region state of this thread (internal). */
typedef struct ad__region {
  int depth;
  ad__recorder *rec;   /* recorder at the outermost begin; NULL if not recording */
  ad_index start;      /* last handle before the region */
  uint32_t ns, na, np; /* block position at the begin */
  uint8_t *cnt;        /* block at the begin */
  uint64_t records;
  uint32_t epoch; /* recording at the begin: a reset inside the region ends it */
  /* Forward propagation: values computed and inputs met so far, and the
   * inputs' handles (see ad__fwd_row). */
  uint16_t nloc, nin; /* no alias of the handles in[] or of R's counters: kept in registers */
  ad_index in[AD__FWD_INPUTS];
} ad__region;
extern AD__THREAD_LOCAL ad__region ad__reg AD__TLS_MODEL;

/* Forward propagation inside a preaccumulation region. A region's values
 * are not recorded: value j (handle start + 1 + j) carries the row
 * R->fwd_rows[(AD__FWD_FIRST + j) * AD__FWD_INPUTS ...] of its partials with
 * respect to the region's inputs, the outside values it uses, numbered in
 * the order they are met. Rows 0 .. AD__FWD_INPUTS - 1 are the inputs' unit
 * rows (row AD__FWD_INPUTS is left zero). The common cases are inline; the
 * rest (the first rows, a stale handle, a value of an older epoch, more
 * inputs, a non-finite partial or row entry) is lib/fused.c's. */
#define AD__FWD_FIRST (AD__FWD_INPUTS + 1)

/* The row of argument a, or NULL for the library's path. */
static inline AD__ALWAYS_INLINE const double *ad__fwd_row(const ad__recorder *R, ad_real a) {
  ad__region *g = &ad__reg;
  if (AD__UNLIKELY(a.e != R->epoch)) return (const double *)0;
  ad_index d = a.i - g->start - 1; /* wraps for an input */
  if (d < g->nloc) return R->fwd_rows + (size_t)(AD__FWD_FIRST + d) * AD__FWD_INPUTS;
  if (AD__UNLIKELY(a.i > g->start)) return (const double *)0; /* stale */
  /* Newest first: a stencil uses its centre value most, and meets it last. */
  uint32_t k = g->nin, s = k;
  while (s > 0 && g->in[s - 1] != a.i) s--;
  if (s == 0) {
    if (AD__UNLIKELY(k == AD__FWD_INPUTS)) return (const double *)0;
    g->in[k] = a.i;
    g->nin = (uint16_t)(k + 1);
    s = k + 1;
  }
  return R->fwd_rows + (size_t)(s - 1) * AD__FWD_INPUTS;
}

/* 1 if every entry of a region's row is finite. A row can overflow although
 * every partial is finite (1e200 times a row entry of 1e200), and an
 * infinite entry would then turn 0 * it into NaN where the per-operation
 * sweep, which skips zero adjoints, gives 0: such an operation takes the
 * library's path, which records the region operation by operation. */
static inline AD__ALWAYS_INLINE int ad__fwd_finite(const double *row) {
  double z[AD__FWD_INPUTS]; /* x - x is 0 for a finite x and NaN otherwise */
  for (unsigned k = 0; k < AD__FWD_INPUTS; k++) z[k] = row[k] - row[k];
  /* halves added pairwise, which vectorizes, rather than one chain */
  for (unsigned w = AD__FWD_INPUTS / 2; w > 0; w /= 2)
    for (unsigned k = 0; k < w; k++) z[k] += z[k + w];
  return z[0] == 0.0;
}

/* Fill the row of the region's next value: partial da for row ra, and db
 * for rb if rb is not NULL. 1 if every entry is finite, else 0 (the value is
 * then not issued). Needs finite partials: 0 * a partial may not hide an
 * infinite one, as the reverse sweep's skipping of zero adjoints would; the
 * row test catches any that is not. */
static inline AD__ALWAYS_INLINE int ad__fwd_fill(const ad__recorder *R, const double *ra, double da, const double *rb,
                                                 double db) {
  double *row = R->fwd_rows + (size_t)(AD__FWD_FIRST + ad__reg.nloc) * AD__FWD_INPUTS;
  if (rb)
    for (unsigned k = 0; k < AD__FWD_INPUTS; k++) row[k] = da * ra[k] + db * rb[k];
  else
    for (unsigned k = 0; k < AD__FWD_INPUTS; k++) row[k] = da * ra[k];
  return ad__fwd_finite(row);
}

/* Issue the region's next value, whose row has been filled. */
static inline AD__ALWAYS_INLINE ad_real ad__fwd_issue(const ad__recorder *R, double v) {
  ad__region *g = &ad__reg;
  uint32_t j = g->nloc;
  g->nloc = (uint16_t)(j + 1);
  ad_real r;
  r.v = v;
  r.i = g->start + 1 + j;
  r.e = R->epoch;
  return r;
}

/* 1 if an operation can take the inline path: room for a row (and a tape
 * that does not watch its recording: fwd_lim is then 0, so that the test
 * the inline path makes anyway sends every operation to the library). */
static inline AD__ALWAYS_INLINE int ad__fwd_ok(const ad__recorder *R) { return ad__reg.nloc < R->fwd_lim; }

static AD__NOINLINE ad_real ad__fwd_op1(ad__recorder *R, double v, ad_real a, double da, const char *op) {
  const double *ra;
  if (ad__fwd_ok(R) && (ra = ad__fwd_row(R, a)) != (const double *)0 && ad__fwd_fill(R, ra, da, (const double *)0, 0.0))
    return ad__fwd_issue(R, v);
  return ad__fwd1(R, v, a, da, op);
}

/* A passive side (often a constant the compiler sees) costs nothing. */
static AD__NOINLINE ad_real ad__fwd_op2(ad__recorder *R, double v, ad_real a, double da, ad_real b, double db,
                                        const char *op) {
  if (a.i == 0) return ad__fwd_op1(R, v, b, db, op);
  if (b.i == 0) return ad__fwd_op1(R, v, a, da, op);
  const double *ra, *rb;
  if (ad__fwd_ok(R) && (ra = ad__fwd_row(R, a)) != (const double *)0 && (rb = ad__fwd_row(R, b)) != (const double *)0 &&
      ad__fwd_fill(R, ra, da, rb, db))
    return ad__fwd_issue(R, v);
  return ad__fwd2(R, v, a, da, b, db, op);
}

/* a + b and a - b: rows added or subtracted, no products. */
static AD__NOINLINE ad_real ad__fwd_op_pm(ad__recorder *R, double v, ad_real a, ad_real b, int minus, const char *op) {
  double db = minus ? -1.0 : 1.0;
  if (a.i == 0) return ad__fwd_op1(R, v, b, db, op);
  if (b.i == 0) return ad__fwd_op1(R, v, a, 1.0, op);
  const double *ra, *rb;
  if (ad__fwd_ok(R) && (ra = ad__fwd_row(R, a)) != (const double *)0 && (rb = ad__fwd_row(R, b)) != (const double *)0) {
    double *row = R->fwd_rows + (size_t)(AD__FWD_FIRST + ad__reg.nloc) * AD__FWD_INPUTS;
    if (minus)
      for (unsigned k = 0; k < AD__FWD_INPUTS; k++) row[k] = ra[k] - rb[k];
    else
      for (unsigned k = 0; k < AD__FWD_INPUTS; k++) row[k] = ra[k] + rb[k];
    if (ad__fwd_finite(row)) return ad__fwd_issue(R, v);
  }
  return ad__fwd2(R, v, a, 1.0, b, db, op);
}

/* ad__fwd_op1, ad__fwd_op2 and ad__fwd_op_pm are not inlined: inlined, they
 * made each operation so large that the compiler stopped inlining the
 * recording fast path into its callers (per-operation recording got 15%
 * slower). Within them everything is inline. */

/* The recording fast path. Everything is read from the recorder before the
 * first store: the statement stream is bytes, which may alias anything, so
 * reading after writing would reload every field. Passive arguments are
 * written too and then dropped by not advancing, which keeps it branch-free.
 * One test guards the block: `lim` leaves room for as many statements as
 * arguments, and every statement recorded here has at least one argument;
 * it is 0 while the tape does not record. AD__STALE is non-zero for an
 * active argument of another recording epoch; the slow path tells a handle
 * of an earlier part of this recording (before a position the tape was reset
 * to) from a stale one. */
#ifdef ARIADNE_INDEX_64
#define AD__STALE(x, ep) ((x).i != 0 && (x).e != (ep))
#else
#define AD__STALE(x, ep) ((uint64_t)((x).e ^ (ep)) * (uint64_t)(x).i)
#endif

static inline ad_real ad__emit(ad__recorder *R, double v, uint32_t ns, uint32_t na0, uint32_t na, uint32_t np,
                               unsigned kind) {
  ad_real r;
  ad_index h = R->next + 1;
  uint32_t ep = R->epoch;
  uint8_t *cnt = R->cnt;
  cnt[ns] = (uint8_t)((na - na0) | (kind << 6));
  R->ns = ns + 1;
  R->na = na;
  R->np = np;
  R->next = h;
  r.v = v;
  r.i = h;
  r.e = ep;
  return r;
}

/* The slow path's room for nargs arguments (ad__need), and where the
 * statement then goes: 0 if it must not be recorded. */
static inline int ad__room(ad__recorder *R, uint32_t nargs, const ad_real *args, const char *op, uint32_t *ns,
                           uint32_t *na, uint32_t *np) {
  if (!ad__need(R, nargs, args, op)) return 0;
  *ns = R->ns;
  *na = R->na;
  *np = R->np;
  return 1;
}

/* Argument a with partial da goes at idx[*n], par[*p]; a passive one is
 * written over by the next. */
static inline void ad__arg(ad_index *idx, double *par, uint32_t *n, uint32_t *p, ad_real a, double da) {
  idx[*n] = a.i;
  par[*p] = da;
  *n += (a.i != 0);
  *p += (a.i != 0);
}

static inline ad_real ad__op1(double v, ad_real a, double da, const char *op) {
  if (a.i == 0) return ad__const(v);
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np;
  if (AD__UNLIKELY((na + 1 > R->lim) | (a.e != R->epoch))) {
    if (R->fwd) return ad__fwd_op1(R, v, a, da, op);
    if (!ad__room(R, 1, &a, op, &ns, &na, &np)) return ad__const(v);
  }
  R->idx[na] = a.i;
  R->par[np] = da;
  return ad__emit(R, v, ns, na, na + 1, np + 1, AD__KIND_GENERAL);
}

static inline ad_real ad__op2(double v, ad_real a, double da, ad_real b, double db, const char *op) {
  if ((a.i | b.i) == 0) return ad__const(v);
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np, ep = R->epoch;
  if (AD__UNLIKELY((na + 2 > R->lim) | ((AD__STALE(a, ep) | AD__STALE(b, ep)) != 0))) {
    if (R->fwd) return ad__fwd_op2(R, v, a, da, b, db, op);
    ad_real ab[2] = {a, b};
    if (!ad__room(R, 2, ab, op, &ns, &na, &np)) return ad__const(v);
  }
  ad_index *idx = R->idx;
  double *par = R->par;
  uint32_t n = na, p = np;
  ad__arg(idx, par, &n, &p, a, da);
  ad__arg(idx, par, &n, &p, b, db);
  return ad__emit(R, v, ns, na, n, p, AD__KIND_GENERAL);
}

/* a + b (kind PLUS) and a - b (kind DIFF, or PLUS / MINUS with a passive
 * side): no partials stored. */
static inline ad_real ad__op_pm(double v, ad_real a, ad_real b, int minus, const char *op) {
  if ((a.i | b.i) == 0) return ad__const(v);
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np, ep = R->epoch;
  if (AD__UNLIKELY((na + 2 > R->lim) | ((AD__STALE(a, ep) | AD__STALE(b, ep)) != 0))) {
    if (R->fwd) return ad__fwd_op_pm(R, v, a, b, minus, op);
    ad_real ab[2] = {a, b};
    if (!ad__room(R, 2, ab, op, &ns, &na, &np)) return ad__const(v);
  }
  ad_index *idx = R->idx;
  uint32_t n = na;
  idx[n] = a.i;
  n += (a.i != 0);
  idx[n] = b.i;
  n += (b.i != 0);
  unsigned kind = !minus ? AD__KIND_PLUS : a.i == 0 ? AD__KIND_MINUS : b.i == 0 ? AD__KIND_PLUS : AD__KIND_DIFF;
  return ad__emit(R, v, ns, na, n, np, kind);
}

/* One argument with partial +1 or -1. */
static inline ad_real ad__op_unit(double v, ad_real a, int minus, const char *op) {
  if (a.i == 0) return ad__const(v);
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np;
  if (AD__UNLIKELY((na + 1 > R->lim) | (a.e != R->epoch))) {
    if (R->fwd) return ad__fwd_op1(R, v, a, minus ? -1.0 : 1.0, op);
    if (!ad__room(R, 1, &a, op, &ns, &na, &np)) return ad__const(v);
  }
  R->idx[na] = a.i;
  return ad__emit(R, v, ns, na, na + 1, np, minus ? AD__KIND_MINUS : AD__KIND_PLUS);
}

static inline ad_real ad__op3(double v, ad_real a, double da, ad_real b, double db, ad_real c, double dc,
                              const char *op) {
  if ((a.i | b.i | c.i) == 0) return ad__const(v);
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np, ep = R->epoch;
  if (AD__UNLIKELY((na + 3 > R->lim) | ((AD__STALE(a, ep) | AD__STALE(b, ep) | AD__STALE(c, ep)) != 0))) {
    ad_real abc[3] = {a, b, c};
    if (R->fwd) {
      double dabc[3] = {da, db, dc};
      return ad__fwd(R, v, 3, abc, dabc, op);
    }
    if (!ad__room(R, 3, abc, op, &ns, &na, &np)) return ad__const(v);
  }
  ad_index *idx = R->idx;
  double *par = R->par;
  uint32_t n = na, p = np;
  ad__arg(idx, par, &n, &p, a, da);
  ad__arg(idx, par, &n, &p, b, db);
  ad__arg(idx, par, &n, &p, c, dc);
  return ad__emit(R, v, ns, na, n, p, AD__KIND_GENERAL);
}

/* Streaming stores for ad_custom's arguments and partials. A large tape
 * is written once and read once, by the sweep, long after: an ordinary
 * store first reads each line of it into the cache, which doubles the
 * memory traffic of a recording and evicts what the computation uses. Once
 * the tape is larger than the caches (lib/tape.c sets R->stream per block),
 * the arguments and partials go straight to memory; the first megabytes of
 * every tape, which a small tape's sweep finds in the cache, do not. Only
 * when ARIADNE_STREAM is defined (x86-64, GCC or Clang): a code whose
 * statements also come from the other paths (per-operation recording, the
 * library's fused statements), which store as usual, interleaves the two
 * kinds of store on the same lines, and each line then goes to memory and
 * back (CoMD's fused port recorded 14 times slower). Define it for code that
 * records through ad_custom alone (a fused port of straight stencils). */
#if defined(__GNUC__) && defined(__x86_64__) && defined(ARIADNE_STREAM)
static inline AD__ALWAYS_INLINE void ad__stream_index(ad_index *p, ad_index v) {
#ifdef ARIADNE_INDEX_64
  __builtin_ia32_movnti64((long long *)(void *)p, (long long)v);
#else
  __builtin_ia32_movnti((int *)(void *)p, (int)v);
#endif
}
static inline AD__ALWAYS_INLINE void ad__stream_double(double *p, double v) {
  long long b;
  memcpy(&b, &v, sizeof b);
  __builtin_ia32_movnti64((long long *)(void *)p, b);
}
#define AD__STREAMING(R) ((R)->stream)
#else
static inline void ad__stream_index(ad_index *p, ad_index v) { *p = v; }
static inline void ad__stream_double(double *p, double v) { *p = v; }
/* Not compiled in: no test of the recorder's flag on the inline path. */
#define AD__STREAMING(R) 0u
#endif

/* ad_custom: inline for the statement sizes a cell update has; larger ones
 * (which become chains of statements) go out of line. */
ad_real ad__custom_n(double value, size_t n, const ad_real *args, const double *partials);
static inline ad_real ad_custom(double value, size_t n, const ad_real *args, const double *partials) {
  ad__recorder *R = ad__rec;
  uint32_t ns = R->ns, na = R->na, np = R->np, ep = R->epoch, stream = AD__STREAMING(R);
  if (AD__UNLIKELY(n > AD__MAX_ARGS || na + n > R->lim)) return ad__custom_n(value, n, args, partials);
  /* A passive argument is written, then written over by the next. The
   * count is a size_t from the block's first free slots: no 32-bit
   * position to widen on every store. */
  ad_index *idx = R->idx + na;
  double *par = R->par + np;
  size_t m = 0;
  uint64_t stale = 0;
  for (size_t k = 0; k < n; k++) {
    if (stream) {
      ad__stream_index(idx + m, args[k].i);
      ad__stream_double(par + m, partials[k]);
    } else {
      idx[m] = args[k].i;
      par[m] = partials[k];
    }
    stale |= (uint64_t)AD__STALE(args[k], ep);
    m += (args[k].i != 0);
  }
  if (AD__UNLIKELY(stale)) return ad__custom_n(value, n, args, partials);
  if (m == 0) return ad__const(value);
  return ad__emit(R, value, ns, na, na + (uint32_t)m, np + (uint32_t)m, AD__KIND_GENERAL);
}

static inline ad__spec ad__spec_mark(void) {
  const ad__recorder *R = ad__rec;
  ad__spec m;
  m.rec = R;
  m.cnt = R->cnt;
  m.next = R->next;
  m.ns = R->ns;
  m.na = R->na;
  m.np = R->np;
  m.epoch = R->epoch;
  m.records = R->records;
  return m;
}

static inline void ad__spec_drop(const ad__spec *m) {
  ad__recorder *R = ad__rec;
  if ((const void *)R != m->rec || R->cnt != m->cnt || R->epoch != m->epoch || R->records != m->records ||
      !R->active || R->fwd || R->ns < m->ns)
    return;
  R->next = m->next;
  R->ns = m->ns;
  R->na = m->na;
  R->np = m->np;
}

static inline void ad_stmt_begin(void) {
  if (ad__reg.depth++ > 0) return;
  ad__recorder *R = ad__rec;
  ad__reg.rec = R->active ? R : (ad__recorder *)0;
  ad__reg.start = R->next;
  ad__reg.ns = R->ns;
  ad__reg.na = R->na;
  ad__reg.np = R->np;
  ad__reg.cnt = R->cnt;
  ad__reg.records = R->records;
  ad__reg.epoch = R->epoch;
  ad__reg.nloc = 0;
  ad__reg.nin = 0;
  /* Every operation now takes the slow path, which propagates partials. */
  if (R->active) {
    R->fwd |= AD__FWD_REGION;
    R->lim = 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Arithmetic                                                                */
/* ------------------------------------------------------------------------ */

static inline ad_real ad__add(ad_real a, ad_real b) { return ad__op_pm(a.v + b.v, a, b, 0, "ad_add"); }
static inline ad_real ad__sub(ad_real a, ad_real b) { return ad__op_pm(a.v - b.v, a, b, 1, "ad_sub"); }
static inline ad_real ad__mul(ad_real a, ad_real b) { return ad__op2(a.v * b.v, a, b.v, b, a.v, "ad_mul"); }
/* d(a/b)/db = -r/b, computed as -r * (1/b) except where 1/b overflows (b
 * subnormal), where the product would be 0 * inf or lose the finite result. */
/* The partials of a / b given r = a / b. */
static inline void ad__d_div(double b, double r, double *da, double *db) {
  double inv = 1.0 / b;
  *da = inv;
  *db = AD__UNLIKELY(isinf(inv)) ? -r / b : -r * inv;
}
static inline ad_real ad__div(ad_real a, ad_real b) {
  double r = a.v / b.v, da, db;
  if ((a.i | b.i) == 0) return ad__const(r);
  ad__d_div(b.v, r, &da, &db);
  return ad__op2(r, a, da, b, db, "ad_div");
}
static inline ad_real ad__neg(ad_real a) { return ad__op_unit(-a.v, a, 1, "ad_neg"); }

/* Either argument may be ad_real or any arithmetic type. */
#define ad_add(a, b) ad__add(ad__lift(a), ad__lift(b))
#define ad_sub(a, b) ad__sub(ad__lift(a), ad__lift(b))
#define ad_mul(a, b) ad__mul(ad__lift(a), ad__lift(b))
#define ad_div(a, b) ad__div(ad__lift(a), ad__lift(b))
#define ad_neg(a) ad__neg(ad__lift(a))

/* ------------------------------------------------------------------------ */
/* <math.h> functions. Derivative rules where the function has a kink or    */
/* the derivative is not finite are documented at each function. Each one  */
/* returns at once for passive arguments, before computing any partial, so */
/* that code run with no tape recording (recomputation in checkpointed     */
/* loops, finite differences) costs little more than double arithmetic.    */
/* ------------------------------------------------------------------------ */

#define AD__PI 3.14159265358979323846
#define AD__LN2 0.69314718055994530942
#define AD__LN10 2.30258509299404568402

/* The functions of one argument, each with its derivative written in terms
 * of the argument x and the value r: the list generates ad__d_NAME(x, r),
 * the derivative, and ad__NAME, the recorded operation (ariadne.hpp's
 * expressions use the same derivatives). Rules where the function has a kink
 * or the derivative is not finite:
 *   asin, acos: +-inf at +-1 (the exact one-sided limit), NaN outside
 *     [-1, 1]; (1 - x)(1 + x) rather than 1 - x^2: no cancellation near +-1.
 *   tanh: see ad__d_tanh. asinh: hypot(x, 1) = sqrt(x^2 + 1) without
 *     overflow for large |x|. acosh: +inf at 1, NaN below. atanh: +inf at
 *     +-1, NaN outside.
 *   log family: +inf at 0 (the limit from the right), NaN below (where the
 *     value is NaN, the plain formula would give a finite number).
 *   sqrt, cbrt: +inf at 0 (the limit from the right). A zero adjoint skips
 *     the statement in the reverse sweep, so an unused sqrt(0) does no harm.
 *   fabs: sign(x), and 0 at x = 0. */
#define AD__UNARY_MATH(X)                                                                                               \
  X(sin, cos(x))                                                                                                       \
  X(cos, -sin(x))                                                                                                      \
  X(tan, 1.0 + r * r)                                                                                                  \
  X(asin, 1.0 / sqrt((1.0 - x) * (1.0 + x)))                                                                           \
  X(acos, -1.0 / sqrt((1.0 - x) * (1.0 + x)))                                                                          \
  X(atan, 1.0 / (1.0 + x * x))                                                                                         \
  X(sinh, cosh(x))                                                                                                     \
  X(cosh, sinh(x))                                                                                                     \
  X(tanh, ad__tanh_slope(x, r))                                                                                            \
  X(asinh, 1.0 / hypot(x, 1.0))                                                                                        \
  X(acosh, 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0)))                                                                      \
  X(atanh, isnan(r) ? r : 1.0 / ((1.0 - x) * (1.0 + x)))                                                               \
  X(exp, r)                                                                                                            \
  X(exp2, AD__LN2 * r)                                                                                                 \
  X(expm1, exp(x))                                                                                                     \
  X(log, isnan(r) ? r : 1.0 / x)                                                                                       \
  X(log2, isnan(r) ? r : 1.0 / (AD__LN2 * x))                                                                          \
  X(log10, isnan(r) ? r : 1.0 / (AD__LN10 * x))                                                                        \
  X(log1p, isnan(r) ? r : 1.0 / (1.0 + x))                                                                             \
  X(sqrt, 0.5 / r)                                                                                                     \
  X(cbrt, 1.0 / (3.0 * r * r))                                                                                         \
  X(fabs, x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0))                                                                      \
  X(erf, 1.12837916709551257390 * exp(-x * x))                                                                         \
  X(erfc, -1.12837916709551257390 * exp(-x * x))

/* tanh: where tanh saturates, 1 - tanh^2 cancels to nothing (0 for |x| > 19),
 * so there the derivative is 1 / cosh^2, accurate to the last bit. */
static inline double ad__tanh_slope(double x, double t) {
  double c = fabs(t) < 0.9 ? 0.0 : cosh(x);
  return c == 0.0 ? 1.0 - t * t : 1.0 / (c * c);
}

#define AD__UNARY_DEFINE(name, derivative)                                                                             \
  static inline double ad__d_##name(double x, double r) {                                                              \
    (void)x;                                                                                                           \
    (void)r;                                                                                                           \
    return derivative;                                                                                                 \
  }                                                                                                                    \
  static inline ad_real ad__##name(ad_real a) {                                                                        \
    double r = name(a.v);                                                                                              \
    if (a.i == 0) return ad__const(r);                                                                                 \
    return ad__op1(r, a, ad__d_##name(a.v, r), "ad_" #name);                                                           \
  }
AD__UNARY_MATH(AD__UNARY_DEFINE)
#undef AD__UNARY_DEFINE

/* atan2(y, x): partials x / (x^2 + y^2) and -y / (x^2 + y^2), with x and y
 * scaled by a power of two first, so that the squares neither overflow nor
 * underflow anywhere in the double range. At the origin, where atan2 is not
 * differentiable, both partials are 0. */
static inline void ad__d_atan2(double y, double x, double *pdy, double *pdx) {
  double m = fmax(fabs(x), fabs(y)), dy = 0.0, dx = 0.0;
  if (m != 0.0 && m <= DBL_MAX) {
    int e;
    (void)frexp(m, &e);
    double xs = ldexp(x, -e), ys = ldexp(y, -e), d = xs * xs + ys * ys; /* d in [1/4, 2] */
    /* v / d / 2^(2e), scaling the smaller of v and v / d so as to stay normal */
    dy = fabs(x) >= DBL_MIN ? ldexp(x / d, -2 * e) : ldexp(xs / d, -e);
    dx = fabs(y) >= DBL_MIN ? ldexp(-y / d, -2 * e) : ldexp(-ys / d, -e);
  } else if (m != 0.0) { /* an infinite or NaN argument */
    double d = x * x + y * y;
    dy = x / d;
    dx = -y / d;
  }
  *pdy = dy;
  *pdx = dx;
}
static inline ad_real ad__atan2(ad_real y, ad_real x) {
  double dy, dx;
  if ((y.i | x.i) == 0) return ad__const(atan2(y.v, x.v));
  ad__d_atan2(y.v, x.v, &dy, &dx);
  return ad__op2(atan2(y.v, x.v), y, dy, x, dx, "ad_atan2");
}
/* pow(a, b) = r: d/da = b * a^(b-1) (exact at a = 0, e.g. 1 for b = 1; 0 for
 * b = 0); d/db = log(a) * a^b for a > 0 and 0 for a <= 0 (where it is
 * undefined or, at a = 0 with b > 0, the limit from the right). Each partial
 * is computed only if its argument is active. */
static inline double ad__d_pow_a(double a, double b) { return b != 0.0 ? b * pow(a, b - 1.0) : 0.0; }
static inline double ad__d_pow_b(double a, double r) { return a > 0.0 ? log(a) * r : 0.0; }
static inline ad_real ad__pow(ad_real a, ad_real b) {
  double r = pow(a.v, b.v);
  if ((a.i | b.i) == 0) return ad__const(r);
  double da = 0.0, db = 0.0;
  if (a.i != 0) da = ad__d_pow_a(a.v, b.v);
  if (b.i != 0) db = ad__d_pow_b(a.v, r);
  return ad__op2(r, a, da, b, db, "ad_pow");
}
/* hypot(a, b) = h: at the origin both partials are 0. */
static inline void ad__d_hypot(double a, double b, double h, double *da, double *db) {
  *da = h != 0.0 ? a / h : 0.0;
  *db = h != 0.0 ? b / h : 0.0;
}
static inline ad_real ad__hypot(ad_real a, ad_real b) {
  double h = hypot(a.v, b.v), da, db;
  if ((a.i | b.i) == 0) return ad__const(h);
  ad__d_hypot(a.v, b.v, h, &da, &db);
  return ad__op2(h, a, da, b, db, "ad_hypot");
}
/* fmin/fmax: the derivative follows the argument whose value is returned;
 * on a tie the first argument gets it. A NaN argument is ignored as in C. */
static inline int ad__fmin_first(double a, double b) { return (a <= b) || isnan(b); }
static inline int ad__fmax_first(double a, double b) { return (a >= b) || isnan(b); }
static inline ad_real ad__fmin(ad_real a, ad_real b) {
  return ad__fmin_first(a.v, b.v) ? ad__op_unit(a.v, a, 0, "ad_fmin") : ad__op_unit(b.v, b, 0, "ad_fmin");
}
static inline ad_real ad__fmax(ad_real a, ad_real b) {
  return ad__fmax_first(a.v, b.v) ? ad__op_unit(a.v, a, 0, "ad_fmax") : ad__op_unit(b.v, b, 0, "ad_fmax");
}
static inline ad_real ad__fma(ad_real a, ad_real b, ad_real c) {
  return ad__op3(fma(a.v, b.v, c.v), a, b.v, b, a.v, c, 1.0, "ad_fma");
}
/* fmod(a, b) = a - trunc(a/b) b: d/da = 1, d/db = -trunc(a/b). */
static inline double ad__d_fmod_b(double a, double b) { return -trunc(a / b); }
static inline ad_real ad__fmod(ad_real a, ad_real b) {
  if ((a.i | b.i) == 0) return ad__const(fmod(a.v, b.v));
  return ad__op2(fmod(a.v, b.v), a, 1.0, b, ad__d_fmod_b(a.v, b.v), "ad_fmod");
}
/* Piecewise constant: derivative 0 everywhere, so the result is passive. */
static inline ad_real ad__floor(ad_real a) { return ad__const(floor(a.v)); }
static inline ad_real ad__ceil(ad_real a) { return ad__const(ceil(a.v)); }
static inline ad_real ad__round(ad_real a) { return ad__const(round(a.v)); }
static inline ad_real ad__trunc(ad_real a) { return ad__const(trunc(a.v)); }

#define ad_sin(a) ad__sin(ad__lift(a))
#define ad_cos(a) ad__cos(ad__lift(a))
#define ad_tan(a) ad__tan(ad__lift(a))
#define ad_asin(a) ad__asin(ad__lift(a))
#define ad_acos(a) ad__acos(ad__lift(a))
#define ad_atan(a) ad__atan(ad__lift(a))
#define ad_atan2(y, x) ad__atan2(ad__lift(y), ad__lift(x))
#define ad_sinh(a) ad__sinh(ad__lift(a))
#define ad_cosh(a) ad__cosh(ad__lift(a))
#define ad_tanh(a) ad__tanh(ad__lift(a))
#define ad_asinh(a) ad__asinh(ad__lift(a))
#define ad_acosh(a) ad__acosh(ad__lift(a))
#define ad_atanh(a) ad__atanh(ad__lift(a))
#define ad_exp(a) ad__exp(ad__lift(a))
#define ad_exp2(a) ad__exp2(ad__lift(a))
#define ad_expm1(a) ad__expm1(ad__lift(a))
#define ad_log(a) ad__log(ad__lift(a))
#define ad_log2(a) ad__log2(ad__lift(a))
#define ad_log10(a) ad__log10(ad__lift(a))
#define ad_log1p(a) ad__log1p(ad__lift(a))
#define ad_sqrt(a) ad__sqrt(ad__lift(a))
#define ad_cbrt(a) ad__cbrt(ad__lift(a))
#define ad_pow(a, b) ad__pow(ad__lift(a), ad__lift(b))
#define ad_hypot(a, b) ad__hypot(ad__lift(a), ad__lift(b))
#define ad_fabs(a) ad__fabs(ad__lift(a))
#define ad_fmin(a, b) ad__fmin(ad__lift(a), ad__lift(b))
#define ad_fmax(a, b) ad__fmax(ad__lift(a), ad__lift(b))
#define ad_fma(a, b, c) ad__fma(ad__lift(a), ad__lift(b), ad__lift(c))
#define ad_fmod(a, b) ad__fmod(ad__lift(a), ad__lift(b))
#define ad_erf(a) ad__erf(ad__lift(a))
#define ad_erfc(a) ad__erfc(ad__lift(a))
#define ad_floor(a) ad__floor(ad__lift(a))
#define ad_ceil(a) ad__ceil(ad__lift(a))
#define ad_round(a) ad__round(ad__lift(a))
#define ad_trunc(a) ad__trunc(ad__lift(a))

/* Comparisons on values; either side may be ad_real or a number. */
#define ad_lt(a, b) (ad__val(a) < ad__val(b))
#define ad_le(a, b) (ad__val(a) <= ad__val(b))
#define ad_gt(a, b) (ad__val(a) > ad__val(b))
#define ad_ge(a, b) (ad__val(a) >= ad__val(b))
#define ad_eq(a, b) (ad__val(a) == ad__val(b))
#define ad_ne(a, b) (ad__val(a) != ad__val(b))

#else /* ARIADNE_PASSIVE: the same source as plain double arithmetic. */

typedef double ad_real;

static inline ad_tape *ad_tape_create(void) {
  static char ad__passive_tape;
  return (ad_tape *)(void *)&ad__passive_tape;
}
static inline ad_tape *ad_tape_create_with(const ad_tape_options *o) {
  (void)o;
  return ad_tape_create();
}
static inline void ad_tape_destroy(ad_tape *t) { (void)t; }
static inline void ad_tape_begin(ad_tape *t) { (void)t; }
static inline void ad_tape_end(ad_tape *t) { (void)t; }
static inline void ad_tape_reset(ad_tape *t) { (void)t; }
static inline int ad_tape_error(const ad_tape *t) {
  (void)t;
  return AD_OK;
}
static inline int ad_tape_is_recording(const ad_tape *t) {
  (void)t;
  return 0;
}
static inline int ad_tape_stats(const ad_tape *t, ad_stats *s) {
  (void)t;
  if (s) {
    memset(s, 0, sizeof *s);
  }
  return AD_OK;
}
static inline void ad_tape_set_memory_limit(ad_tape *t, size_t b) {
  (void)t;
  (void)b;
}
static inline void ad_tape_set_check_finite(ad_tape *t, int on) {
  (void)t;
  (void)on;
}
static inline void ad_tape_set_record_names(ad_tape *t, int on) {
  (void)t;
  (void)on;
}
static inline size_t ad_memory_cache_limit(size_t b) {
  (void)b;
  return 0;
}
static inline size_t ad_memory_cache_bytes(void) { return 0; }
/* The rest of the tape API, so that a port keeps its tape and error calls. */
static inline void ad_tape_options_default(ad_tape_options *o) {
  if (o) {
    memset(o, 0, sizeof *o);
  }
}
static inline const char *ad_tape_error_message(const ad_tape *t) {
  (void)t;
  return "";
}
static inline ad_tape *ad_tape_current(void) { return NULL; }
static inline ad_tape_pos ad_tape_position(const ad_tape *t) {
  ad_tape_pos p;
  memset(&p, 0, sizeof p);
  (void)t;
  return p;
}
static inline int ad_tape_reset_to(ad_tape *t, ad_tape_pos p) {
  (void)t;
  (void)p;
  return AD_OK;
}
static inline int ad_reverse_to(ad_tape *t, ad_tape_pos p) {
  (void)t;
  (void)p;
  return AD_ERR_PASSIVE_BUILD;
}
static inline double ad_input(double x) { return x; }
#define ad_const(x) ((double)(x))
#define AD_REAL_INIT(x) ((double)(x))
#define ad_value(x) ((double)(x))
static inline void ad_seed(ad_tape *t, double y, double yb) {
  (void)t;
  (void)y;
  (void)yb;
}
static inline int ad_reverse(ad_tape *t) {
  (void)t;
  return AD_ERR_PASSIVE_BUILD;
}
static inline double ad_adjoint(const ad_tape *t, double x) {
  (void)t;
  (void)x;
  return 0.0;
}
static inline void ad_adjoints_zero(ad_tape *t) { (void)t; }
static inline void ad_tangent_seed(ad_tape *t, double x, double xd) {
  (void)t;
  (void)x;
  (void)xd;
}
static inline int ad_forward(ad_tape *t) {
  (void)t;
  return AD_ERR_PASSIVE_BUILD;
}
static inline double ad_tangent(const ad_tape *t, double y) {
  (void)t;
  (void)y;
  return 0.0;
}
static inline void ad_tangents_zero(ad_tape *t) { (void)t; }
static inline int ad_gradient(ad_tape *t, double y, size_t n, const double *x, double *g) {
  (void)t;
  (void)y;
  (void)x;
  for (size_t k = 0; k < n; k++) g[k] = 0.0;
  return AD_ERR_PASSIVE_BUILD;
}
static inline int ad_jacobian(ad_tape *t, size_t m, const double *y, size_t n, const double *x, double *J) {
  (void)t;
  (void)y;
  (void)x;
  for (size_t k = 0; k < m * n; k++) J[k] = 0.0;
  return AD_ERR_PASSIVE_BUILD;
}
static inline double ad_sum(size_t n, const double *x) {
  double s = 0.0;
  for (size_t k = 0; k < n; k++) s += x[k];
  return s;
}
static inline double ad_lincomb(size_t n, const double *w, const double *x) {
  double s = 0.0;
  for (size_t k = 0; k < n; k++) s += w[k] * x[k];
  return s;
}
static inline double ad_dot(size_t n, const double *a, const double *b) {
  double s = 0.0;
  for (size_t k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}
static inline double ad_custom(double v, size_t n, const double *a, const double *p) {
  (void)n;
  (void)a;
  (void)p;
  return v;
}
typedef struct ad__spec {
  char unused;
} ad__spec;
static inline ad__spec ad__spec_mark(void) {
  ad__spec m = {0};
  return m;
}
static inline void ad__spec_drop(const ad__spec *m) { (void)m; }
static inline void ad_stmt_begin(void) {}
static inline double ad_stmt_end(double r) { return r; }
static inline void ad_stmt_end_n(size_t m, double *r) {
  (void)m;
  (void)r;
}
static inline int ad_external(const ad_external_ops *ops, void *ud, size_t nin, const double *in, size_t nout,
                              double *out) {
  (void)nin;
  (void)in;
  (void)nout;
  (void)out;
  if (ops && ops->destroy) ops->destroy(ud);
  return AD_OK;
}

#define ad_add(a, b) ((double)(a) + (double)(b))
#define ad_sub(a, b) ((double)(a) - (double)(b))
#define ad_mul(a, b) ((double)(a) * (double)(b))
#define ad_div(a, b) ((double)(a) / (double)(b))
#define ad_neg(a) (-(double)(a))
#define ad_sin(a) sin(a)
#define ad_cos(a) cos(a)
#define ad_tan(a) tan(a)
#define ad_asin(a) asin(a)
#define ad_acos(a) acos(a)
#define ad_atan(a) atan(a)
#define ad_atan2(y, x) atan2((y), (x))
#define ad_sinh(a) sinh(a)
#define ad_cosh(a) cosh(a)
#define ad_tanh(a) tanh(a)
#define ad_asinh(a) asinh(a)
#define ad_acosh(a) acosh(a)
#define ad_atanh(a) atanh(a)
#define ad_exp(a) exp(a)
#define ad_exp2(a) exp2(a)
#define ad_expm1(a) expm1(a)
#define ad_log(a) log(a)
#define ad_log2(a) log2(a)
#define ad_log10(a) log10(a)
#define ad_log1p(a) log1p(a)
#define ad_sqrt(a) sqrt(a)
#define ad_cbrt(a) cbrt(a)
#define ad_pow(a, b) pow((a), (b))
#define ad_hypot(a, b) hypot((a), (b))
#define ad_fabs(a) fabs(a)
#define ad_fmin(a, b) fmin((a), (b))
#define ad_fmax(a, b) fmax((a), (b))
#define ad_fma(a, b, c) fma((a), (b), (c))
#define ad_fmod(a, b) fmod((a), (b))
#define ad_erf(a) erf(a)
#define ad_erfc(a) erfc(a)
#define ad_floor(a) floor(a)
#define ad_ceil(a) ceil(a)
#define ad_round(a) round(a)
#define ad_trunc(a) trunc(a)
#define ad_lt(a, b) ((double)(a) < (double)(b))
#define ad_le(a, b) ((double)(a) <= (double)(b))
#define ad_gt(a, b) ((double)(a) > (double)(b))
#define ad_ge(a, b) ((double)(a) >= (double)(b))
#define ad_eq(a, b) ((double)(a) == (double)(b))
#define ad_ne(a, b) ((double)(a) != (double)(b))

#endif /* ARIADNE_PASSIVE */

#ifdef __cplusplus
}
#endif

#endif /* ARIADNE_H */
