/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ariadne tools: checking derivatives, looking inside a tape, and progress
 * reports of long sweeps.
 *
 * - ad_check_gradient records a user function on a tape of its own and
 *   compares its derivative with central finite differences at several step
 *   sizes and with the tangent sweep (the dot-product test). The MPI layer has
 *   the collective twin ad_mpi_check_gradient (ariadne_mpi.h).
 * - ad_tape_dump writes a small tape as a text listing, a Graphviz graph or a
 *   statistics breakdown (ad_mpi_tape_dump: one file per rank).
 * - ad_progress: the figures a progress callback receives (see the
 *   `progress` members of ad_tape_options and ad_ckpt_options); the default
 *   report is a line on rank 0's standard error, shown when ARIADNE_PROGRESS=1
 *   or standard error is a terminal (ARIADNE_PROGRESS=0 turns it off).
 *
 * docs/debugging.md shows how to use them to find the usual mistakes.
 */
#ifndef ARIADNE_TOOLS_H
#define ARIADNE_TOOLS_H

#include <stdio.h>

#include "ariadne.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Gradient checker                                                          */
/* ------------------------------------------------------------------------ */

/* The user's computation: from the inputs x[0..n) compute the outputs
 * y[0..m) with ad_* operations (and ad_mpi_*, external functions,
 * checkpointed loops). It is called once on a recording tape, with x active,
 * and many times more with x passive for the finite differences, so it must
 * be deterministic and must not keep handles between calls. In an MPI
 * program it is collective; n is this rank's share of the inputs and each
 * output is the sum over the ranks of their y[j] (a value that lives on one
 * rank, e.g. after ad_mpi_reduce to rank 0, is 0 elsewhere). Return 0 on
 * success; anything else stops the check with AD_ERR_CALLBACK. */
typedef int (*ad_check_fn)(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y);

#define AD_CHECK_MAX_STEPS 8

typedef struct ad_check_options {
  /* Finite-difference steps, relative: input i moves by steps[s] * max(1, |x_i|). */
  int nsteps;
  double steps[AD_CHECK_MAX_STEPS];
  /* Inputs (global indices) whose Jacobian columns are compared with finite
   * differences, each once however often it is listed (indices past the last
   * input are ignored); NULL: all of them if there are at most max_columns,
   * else max_columns spread evenly, the one of the largest derivative
   * included. */
  const size_t *columns;
  size_t ncolumns;
  size_t max_columns;
  /* An entry passes if, for its best step, |AD - FD| <= rtol * max(|AD|, |FD|)
   * + atol. atol < 0 (the default): 1e-7 times the largest derivative. */
  double rtol, atol;
  /* The dot-product test <ybar, J xdot> = <J^T ybar, xdot> with random
   * directions passes within dot_tol relative; run it if dot_test is set.
   * A tape without tangent (an external function without a forward
   * callback) skips it. */
  int dot_test;
  double dot_tol;
  uint64_t seed;
  /* Print a summary and the table_rows worst entries to stdout (rank 0):
   * 0 quiet, 1 on failure only, 2 always. `title` heads the report. */
  int print;
  int table_rows;
  const char *title;
} ad_check_options;

/* The worst entries, worst first. */
typedef struct ad_check_entry {
  size_t row, col; /* output, input (global index) */
  int rank;        /* owner of the input (0 in serial programs) */
  double ad, fd;   /* the taped derivative and the best finite difference */
  double step;     /* the step that gave fd */
  double err;      /* |ad - fd| / (rtol-scale), 1 = at the tolerance */
} ad_check_entry;

#define AD_CHECK_TABLE 16

typedef struct ad_check_result {
  size_t n, m;                      /* inputs (all ranks), outputs */
  size_t checked;                   /* entries compared with finite differences */
  size_t failed;                    /* of them, over the tolerance */
  double worst_rel;                 /* largest |AD - FD| / max(|AD|, |FD|) over the failed entries, else over all */
  double atol;                      /* the absolute tolerance used */
  int dot_done;                     /* the dot-product test ran */
  double dot_lhs, dot_rhs, dot_rel; /* <ybar, J xdot>, <J^T ybar, xdot>, their relative difference */
  double tangent_rel;               /* the tangent J xdot against finite differences along xdot */
  int passed;                       /* every comparison within its tolerance */
  size_t nworst;
  ad_check_entry worst[AD_CHECK_TABLE];
  /* Why: which comparisons failed, in words, as the report's last line
   * prints it ("" when everything passed). */
  char verdict[400];
  /* Only the tangent against differences along xdot failed, while the
   * columns and the dot-product test agree: the sweeps are consistent and f
   * is probably not differentiable at x0 (a kink: fabs, fmin/fmax, a
   * branch). Move the point and check again. */
  int kink;
  /* Non-finite numbers met (a NaN or infinite value of f, derivative,
   * difference, tangent or adjoint): each one fails the check. `nonfinite_at`
   * says where the first came from (on this rank; "" if none). */
  size_t nonfinite;
  char nonfinite_at[200];
} ad_check_result;

void ad_check_options_default(ad_check_options *o);

#ifndef ARIADNE_PASSIVE
/* Record f at x0[0..n) on a tape of its own (the current tape, if any, is
 * left alone), compute the m x n Jacobian's rows by reverse sweeps, compare
 * the chosen columns with central finite differences of f at every step,
 * and run the dot-product test. `res` (may be NULL) gets the figures.
 * Returns AD_OK if everything agrees, AD_ERR_CHECK if a comparison failed,
 * AD_ERR_CALLBACK if f failed, AD_ERR_ARG on bad arguments, or the tape's
 * error (a failed recording or sweep). */
int ad_check_gradient(ad_check_fn f, void *ud, size_t n, const double *x0, size_t m, const ad_check_options *opts,
                      ad_check_result *res);

#endif

/* ------------------------------------------------------------------------ */
/* Looking inside a tape                                                     */
/* ------------------------------------------------------------------------ */

typedef enum ad_dump_format {
  AD_DUMP_TEXT = 0, /* one line per statement and record */
  AD_DUMP_DOT = 1,  /* a Graphviz digraph: dot -Tsvg tape.dot > tape.svg */
  AD_DUMP_STATS = 2 /* counts by statement kind and record type */
} ad_dump_format;

#ifndef ARIADNE_PASSIVE
/* Write `tape` (recorded, not necessarily swept) to `out` in `format`. Meant
 * for small tapes: every statement is a line (a node). The text lines are
 *   %H = input                            [# NOTES]
 *   %H = output of record R               [# NOTES]
 *   %H = [OP:] P*%A + P*%B ...            [# NOTES]  (partials times arguments)
 *   record R after %H: NAME: DESCRIPTION
 * and lines starting with '#' are comments. OP is the operation ("ad_mul",
 * "ad_stmt_end") and NOTES (after three spaces and "# ", separated by "; ")
 * hold "value V", when the tape recorded names and values
 * (ad_tape_set_record_names, ARIADNE_RECORD_NAMES=1, or the finite check);
 * the kind of a statement without stored partials ("plus", "diff", "minus",
 * explained at its first statement when no name is known); and "output"
 * for a statement that no later statement or record uses ("unused" for such
 * an input). The
 * description of a record lists key=value fields: in= and out= handle lists,
 * and for MPI records the kind, partner, tag, count and communicator. In the
 * graph, a node's label holds the handle, the operation (or the kind) and
 * the value when known; inputs are blue boxes and outputs are drawn with a
 * double green border. Returns AD_OK, AD_ERR_ARG, AD_ERR_NOMEM or
 * AD_ERR_IO. */
int ad_tape_dump(const ad_tape *tape, FILE *out, ad_dump_format format);
/* The same into the file `path` (created or replaced). */
int ad_tape_dump_path(const ad_tape *tape, const char *path, ad_dump_format format);
#endif

/* ------------------------------------------------------------------------ */
/* Progress of long sweeps and checkpointed loops                            */
/* ------------------------------------------------------------------------ */

/* ad_progress and ad_progress_fn are declared in ariadne.h (the options
 * structs hold the callback). The ready-made report: one line on standard
 * error, rewritten in place on a terminal, on rank 0 only. */
void ad_progress_print(const ad_progress *p, void *ud);

#ifdef ARIADNE_PASSIVE
/* A passive build has no tapes: the tools report so. */
static inline int ad_check_gradient(ad_check_fn f, void *ud, size_t n, const double *x0, size_t m,
                                    const ad_check_options *opts, ad_check_result *res) {
  (void)f, (void)ud, (void)n, (void)x0, (void)m, (void)opts, (void)res;
  return AD_ERR_PASSIVE_BUILD;
}
static inline int ad_tape_dump(const ad_tape *tape, FILE *out, ad_dump_format format) {
  (void)tape, (void)out, (void)format;
  return AD_ERR_PASSIVE_BUILD;
}
static inline int ad_tape_dump_path(const ad_tape *tape, const char *path, ad_dump_format format) {
  (void)tape, (void)path, (void)format;
  return AD_ERR_PASSIVE_BUILD;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* ARIADNE_TOOLS_H */
