/* SPDX-License-Identifier: BSD-3-Clause */
/* Checkpointed time loops: the driver that runs a schedule (adjoint/
 * schedule.c) against snapshots in memory or in per-rank files, and records
 * the loop as one record whose reverse and tangent actions re-run it.
 *
 * A loop of l steps is split into segments [b_j, b_j+1): one segment for the
 * binomial and store-all schedules, one per disk snapshot (multistage) or per
 * kept snapshot (online). The reverse action reverses the segments from the
 * last to the first, each with a binomial schedule; with the binomial
 * schedule, the forward run already executed the schedule's forward part, so
 * the reverse picks it up where it stopped (revolve's count of advances).
 *
 * Resumable runs (multistage with `resumable`) keep, per rank, the segment
 * base states, the final state, and the adjoint at the last finished segment
 * boundary, each in a file with a header and checksum, plus a manifest. A
 * run started again with the same arguments skips what the files cover. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ariadne_checkpoint.h>

#include "describe.h"
#include "progress.h"
#include "tape_impl.h"

void ad_ckpt_options_default(ad_ckpt_options *o) {
  memset(o, 0, sizeof *o);
  o->schedule = AD_CKPT_BINOMIAL;
  o->snapshots = 10;
  o->disk_snapshots = 10;
  o->rank = -1;
}

/* ------------------------------------------------------------------------ */
/* The loop's record                                                         */
/* ------------------------------------------------------------------------ */

typedef struct state_buf {
  double *v;
  unsigned char *p;
} state_buf;

typedef struct ckpt {
  ad_ckpt_options o;
  char *dir;
  int ns; /* multistage: the loop's file namespace in dir (see ns_take) */
  ad_ckpt_step step;
  void *ud;
  ad_ckpt_step_passive twin; /* the passive twin, or NULL */
  void *twin_ud;
  int checking;  /* compare the twin with the step in the next passive step(s) */
  int twin_bad;  /* the forward run's check failed: its error, reported when the run ends */
  state_buf fin; /* with a twin: the forward run's output, for the reverse's check */
  size_t n, pb;
  int64_t l;
  ad_index *in, *out;

  state_buf work;   /* the working state */
  state_buf turn;   /* binomial: the state at step l-1, kept by the forward run */
  state_buf *slots; /* the schedule's snapshots in memory */
  int nslots;
  state_buf *bases; /* online: segment base states in memory */
  int64_t *bnd;     /* segment boundaries b_0 = 0 < ... < b_nseg = l */
  int nseg;

  ad_revolve *rv; /* binomial: the schedule, paused at its first reversal */
  int fresh;      /* the forward run's snapshots are intact */
  int resumed_forward;
  ad_real *xs; /* n active values for the step function */
  double *lam; /* adjoint (or tangent) of the working state */
  unsigned char *ptmp;
  ad_tape *scratch;
  int rank;
  uint64_t fp; /* fingerprint of the run (resumable) */
  ad_ckpt_stats st;
  ad__prog pg; /* progress of the reverse action */
  /* The communicators the forward run's steps used (see loop_agree);
   * comms_unknown until a forward run has been watched. */
  void **comms;
  size_t ncomms;
  int comms_unknown;
} ckpt;

static void stats_publish(ckpt *c) {
  if (c->o.stats) *c->o.stats = c->st;
}

static int state_alloc(ckpt *c, state_buf *s) {
  if (s->v) return AD_OK;
  s->v = malloc((c->n ? c->n : 1) * sizeof(double));
  s->p = malloc(c->pb ? c->pb : 1);
  if (!s->v || !s->p) {
    free(s->v);
    free(s->p);
    s->v = NULL;
    s->p = NULL;
    return AD_ERR_NOMEM;
  }
  c->st.snapshot_bytes += c->n * sizeof(double) + c->pb;
  return AD_OK;
}

static void state_copy(ckpt *c, state_buf *dst, const state_buf *src) {
  memcpy(dst->v, src->v, c->n * sizeof(double));
  if (c->pb) memcpy(dst->p, src->p, c->pb);
}

static void state_free(state_buf *s) {
  free(s->v);
  free(s->p);
  s->v = NULL;
  s->p = NULL;
}

/* File namespaces. Two multistage loops of one process may share a
 * directory (a spin-up and the main loop, chained on one tape, or two
 * tapes): each live loop takes the smallest namespace number not held by
 * another live loop with that directory, and its file names carry it
 * (number 0 keeps the plain names). The numbers follow the order in which a
 * program records its loops, so a run started again finds its files. */
typedef struct ns_ent {
  char *dir; /* canonical path */
  int ns;
  struct ns_ent *next;
} ns_ent;
static ns_ent *ns_list;
static atomic_flag ns_lock = ATOMIC_FLAG_INIT;

static void ns_acquire(void) {
  while (atomic_flag_test_and_set_explicit(&ns_lock, memory_order_acquire)) {
  }
}
static void ns_release(void) { atomic_flag_clear_explicit(&ns_lock, memory_order_release); }

static char *ns_canon(const char *dir) {
  char *r = realpath(dir, NULL);
  return r ? r : strdup(dir);
}

/* The smallest free number for dir, or -1 when out of memory. */
static int ns_take(const char *dir) {
  ns_ent *e = malloc(sizeof *e);
  char *canon = ns_canon(dir);
  if (!e || !canon) {
    free(e);
    free(canon);
    return -1;
  }
  ns_acquire();
  int ns = 0;
  for (int again = 1; again;) {
    again = 0;
    for (ns_ent *q = ns_list; q; q = q->next)
      if (q->ns == ns && strcmp(q->dir, canon) == 0) {
        ns++;
        again = 1;
        break;
      }
  }
  e->dir = canon;
  e->ns = ns;
  e->next = ns_list;
  ns_list = e;
  ns_release();
  return ns;
}

static void ns_give(const char *dir, int ns) {
  char *canon = ns_canon(dir);
  ns_acquire();
  for (ns_ent **q = &ns_list; *q; q = &(*q)->next)
    if ((*q)->ns == ns && canon && strcmp((*q)->dir, canon) == 0) {
      ns_ent *e = *q;
      *q = e->next;
      free(e->dir);
      free(e);
      break;
    }
  ns_release();
  free(canon);
}

static void ckpt_free(ckpt *c) {
  if (!c) return;
  if (c->ns >= 0 && c->dir) ns_give(c->dir, c->ns);
  state_free(&c->work);
  state_free(&c->turn);
  state_free(&c->fin);
  for (int i = 0; i < c->nslots; i++) state_free(&c->slots[i]);
  free(c->slots);
  for (int i = 0; c->bases && i < c->nseg; i++) state_free(&c->bases[i]);
  free(c->bases);
  free(c->bnd);
  ad_revolve_destroy(c->rv);
  ad_tape_destroy(c->scratch);
  AD__FREE_EACH(c->xs, c->lam, c->ptmp, c->in, c->dir, c->comms, c);
}

/* The detail of a failure on the scratch tape, for a message of the loop:
 * without the scratch message's "[rank] ariadne: " prefix and its
 * " (AD_ERR_...: ...)" suffix, which the loop's message adds again. */
static const char *scratch_detail(const ad_tape *sc, char *buf, size_t size) {
  const char *m = ad_tape_error_message(sc), *p = strstr(m, "ariadne: ");
  snprintf(buf, size, "%s", p ? p + strlen("ariadne: ") : m);
  char tail[200];
  int code = ad_tape_error(sc);
  snprintf(tail, sizeof tail, " (%s: %s)", ad_errname(code), ad_strerror(code));
  size_t n = strlen(buf), k = strlen(tail);
  if (n >= k && strcmp(buf + n - k, tail) == 0) buf[n - k] = '\0';
  return buf;
}

/* ------------------------------------------------------------------------ */
/* Agreeing with the loop's other ranks                                      */
/* ------------------------------------------------------------------------ */

/* Whether the loop's reverse re-runs communication: its steps used the MPI
 * layer, or the options name a communicator. Before a forward run has been
 * watched (a resumed run) that is not known, and assumed. */
static int communicates(const ckpt *c) { return ad__loop_comm && (c->o.comm || c->ncomms || c->comms_unknown); }

/* *v <- its minimum over the loop's ranks: over the options' communicator,
 * else those the steps used, else (not known yet) over MPI_COMM_WORLD as
 * ad__agree_min does. A loop that does not communicate is its rank's own
 * business. A rank that never comes makes the others fail after the MPI
 * layer's timeout instead of waiting for it in a re-run step for ever. */
static int loop_agree(ckpt *c, ad_tape *t, int64_t *v) {
  if (!communicates(c)) return AD_OK;
  if (!c->o.comm && !c->ncomms) {
    *v = ad__agree_min(*v);
    return AD_OK;
  }
  char why[300] = "";
  int rc = ad__loop_comm->agree(c->o.comm ? &c->o.comm : c->comms, c->o.comm ? 1 : c->ncomms, v, why, sizeof why);
  if (rc != AD_OK) return ad__pending(t, rc, "ad_checkpoint_loop: agreeing with the loop's other ranks: %s", why);
  return AD_OK;
}

/* Every rank of the loop goes on only if every rank's `rc` is AD_OK; the
 * others' failure is reported as `code` with `what`. */
static int loop_agree_ok(ckpt *c, ad_tape *t, int rc, int code, const char *what) {
  int64_t ok = rc == AD_OK;
  int arc = loop_agree(c, t, &ok);
  if (rc != AD_OK) return rc;
  if (arc != AD_OK) return arc;
  return ok ? AD_OK : ad__pending(t, code, "ad_checkpoint_loop: another rank of the loop %s", what);
}

/* ------------------------------------------------------------------------ */
/* Running steps                                                             */
/* ------------------------------------------------------------------------ */

/* Check what a step function (`who`) returned in step i and that the sizes
 * stay. */
static int step_result(ckpt *c, ad_tape *t, const char *who, int64_t i, int rc, size_t n, size_t pb, int *last) {
  if (rc < 0)
    return ad__pending(t, AD_ERR_CALLBACK, "ad_checkpoint_loop: the %s failed (%d) in step %lld", who, rc,
                       (long long)i);
  if (n != c->n || pb != c->pb)
    return ad__pending(
        t, AD_ERR_CALLBACK,
        "ad_checkpoint_loop: the %s changed the state size in step %lld from %zu to %zu values and %zu to %zu "
        "bytes",
        who, (long long)i, c->n, n, c->pb, pb);
  if (last) *last = rc == AD_CKPT_LAST;
  return AD_OK;
}

/* Call the step function. */
static int call_step(ckpt *c, ad_tape *t, int64_t i, ad_real *x, unsigned char *p, int *last) {
  size_t n = c->n, pb = c->pb;
  int rc = c->step(c->ud, i, &n, x, &pb, p);
  return step_result(c, t, "step function", i, rc, n, pb, last);
}

/* The twin's result (values v, bytes p, last) against the step function's
 * (c->xs, ptmp, alast) from the same state: the very same bits, or the loop
 * fails naming the first difference. `where` says which check it is. */
static int twin_compare(ckpt *c, ad_tape *t, int64_t i, const double *v, const unsigned char *p, int last, int alast,
                        const char *where) {
  for (size_t k = 0; k < c->n; k++) {
    double a = c->xs[k].v;
    if (memcmp(&a, &v[k], sizeof a) != 0)
      return ad__pending(
          t, AD_ERR_CALLBACK,
          "ad_checkpoint_loop: the passive twin disagrees with the step function in step %lld (%s): state "
          "element %zu is %.17g, the step function's %.17g",
          (long long)i, where, k, v[k], a);
  }
  for (size_t k = 0; k < c->pb; k++)
    if (p[k] != c->ptmp[k])
      return ad__pending(
          t, AD_ERR_CALLBACK,
          "ad_checkpoint_loop: the passive twin disagrees with the step function in step %lld (%s): passive "
          "state byte %zu is %u, the step function's %u",
          (long long)i, where, k, (unsigned)p[k], (unsigned)c->ptmp[k]);
  if (last != alast)
    return ad__pending(t, AD_ERR_CALLBACK,
                       "ad_checkpoint_loop: the passive twin disagrees with the step function in step %lld (%s): it "
                       "returned %s AD_CKPT_LAST",
                       (long long)i, where, last ? "" : "not");
  return AD_OK;
}

/* Run step i passively on the working state: with the twin on the values
 * themselves, else with the step function on constants. While c->checking,
 * the step function runs too, from a copy, and the two must agree. The
 * caller has suspended recording. */
static int passive_step(ckpt *c, ad_tape *t, int64_t i, int *last) {
  int rc;
  if (!c->twin) {
    for (size_t k = 0; k < c->n; k++) c->xs[k] = ad__const(c->work.v[k]);
    rc = call_step(c, t, i, c->xs, c->work.p, last);
    for (size_t k = 0; k < c->n; k++) c->work.v[k] = c->xs[k].v;
    return rc;
  }
  int check = c->checking, alast = 0, tlast = 0;
  if (check) {
    if (c->o.passive_check != AD_CKPT_CHECK_FORWARD) c->checking = 0;
    for (size_t k = 0; k < c->n; k++) c->xs[k] = ad__const(c->work.v[k]);
    if (c->pb) memcpy(c->ptmp, c->work.p, c->pb);
    if ((rc = call_step(c, t, i, c->xs, c->ptmp, &alast)) != AD_OK) return rc;
  }
  size_t n = c->n, pb = c->pb;
  rc = c->twin(c->twin_ud, i, &n, c->work.v, &pb, c->work.p);
  if ((rc = step_result(c, t, "passive twin", i, rc, n, pb, &tlast)) != AD_OK) return rc;
  if (last) *last = tlast;
  /* A mismatch fails the forward run at its end: the other ranks' steps
   * need this rank's messages until then, and they fail with it. */
  if (check && (rc = twin_compare(c, t, i, c->work.v, c->work.p, tlast, alast, "the forward run's check")) != AD_OK) {
    if (c->twin_bad == AD_OK) c->twin_bad = rc;
    c->checking = 0;
  }
  return AD_OK;
}

/* Advance the working state passively from step `from` to `to`. Recording is
 * suspended, so nothing is taped whatever tape is current. */
static int advance(ckpt *c, ad_tape *t, int64_t from, int64_t to) {
  ad__suspended s = ad__suspend();
  int rc = AD_OK;
  for (int64_t i = from; i < to && rc == AD_OK; i++) rc = passive_step(c, t, i, NULL);
  ad__resume(s);
  return rc;
}

static int scratch_ready(ckpt *c) {
  if (!c->scratch) c->scratch = ad_tape_create();
  if (!c->scratch) return AD_ERR_NOMEM;
  ad_tape_reset(c->scratch);
  return AD_OK;
}

/* Step i failed while it was recorded on the scratch tape. A stale handle
 * there is a value that is not on the scratch tape: the step used an
 * active value from outside its state, which the loop's forward run (not
 * recorded) could not see. Say so, naming the value and the rule. */
static int tape_step_failed(ckpt *c, ad_tape *t, int64_t i) {
  ad_tape *sc = c->scratch;
  int code = ad_tape_error(sc);
  char detail[512];
  scratch_detail(sc, detail, sizeof detail);
  if (code != AD_ERR_STALE_HANDLE || sc->stale_i == 0)
    return ad__pending(t, code, "ad_checkpoint_loop: taping step %lld: %s", (long long)i, detail);
  /* The operation that met it: the scratch message starts with its name. */
  size_t op = strcspn(detail, ":");
  detail[op] = '\0';
  char whose[128] = "a value of another recording (another tape, or one kept from an earlier step)";
  if (ad__handle_live(t, sc->stale_i, sc->stale_e))
    snprintf(whose, sizeof whose, "handle %llu of the tape the loop is recorded on, computed outside the loop",
             (unsigned long long)sc->stale_i);
  return ad__pending(
      t, code,
      "ad_checkpoint_loop: step %lld uses an active value that is not part of the loop's state (in %s: %s). "
      "A step may depend on active values only through its state (steps are re-run and recorded on a tape "
      "of their own): pass the value in the state, or use its ad_value",
      (long long)i, detail, whose);
}

/* Record step i from the working state on the scratch tape. Inputs are the
 * first n statements, so input k has handle k + 1. */
static int tape_step(ckpt *c, ad_tape *t, int64_t i) {
  int rc = scratch_ready(c);
  if (rc != AD_OK) return rc;
  ad__suspended s = ad__suspend();
  ad_tape_begin(c->scratch);
  for (size_t k = 0; k < c->n; k++) c->xs[k] = ad_input(c->work.v[k]);
  if (c->pb) memcpy(c->ptmp, c->work.p, c->pb);
  rc = call_step(c, t, i, c->xs, c->ptmp, NULL);
  ad_tape_end(c->scratch);
  ad__resume(s);
  if (rc == AD_OK && ad_tape_error(c->scratch) != AD_OK) rc = tape_step_failed(c, t, i);
  ad_stats st;
  ad_tape_stats(c->scratch, &st);
  if (st.bytes_reserved > c->st.scratch_bytes) c->st.scratch_bytes = st.bytes_reserved;
  c->st.taped++;
  return rc;
}

/* lam <- (d step_i / d state)^T lam, from the working state at step i. */
static int reverse_step(ckpt *c, ad_tape *t, int64_t i) {
  int rc = tape_step(c, t, i);
  if (rc != AD_OK) return rc;
  /* The recorded last step must give what the twin gave in the forward run:
   * the loop's output, whose adjoint is being swept. */
  if (c->twin && i == c->l - 1 && c->fin.v) {
    rc = twin_compare(c, t, i, c->fin.v, c->fin.p, 0, 0, "the loop's output against the recorded last step");
    /* Every rank of the loop stops here, or none. */
    if ((rc = loop_agree_ok(c, t, rc, AD_ERR_CALLBACK,
                            "found that its passive twin disagrees with the step function")) != AD_OK)
      return rc;
  }
  ad_tape *sc = c->scratch;
  if ((rc = ad__adjoints_ready(sc)) != AD_OK) return rc;
  ad_adjoints_zero(sc);
  for (size_t k = 0; k < c->n; k++) {
    ad_real y = c->xs[k];
    if (y.i) sc->adj[y.i] += c->lam[k];
  }
  ad_tape_pos start;
  memset(&start, 0, sizeof start);
  rc = ad__sweep_reverse(sc, start);
  if (rc != AD_OK) {
    char detail[512];
    return ad__pending(t, rc, "ad_checkpoint_loop: sweeping step %lld: %s", (long long)i,
                       scratch_detail(sc, detail, sizeof detail));
  }
  for (size_t k = 0; k < c->n; k++) c->lam[k] = sc->adj[k + 1];
  ad__prog_step(&c->pg, c->pg.p.done + 1, c->st.advances);
  return AD_OK;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

#define FILE_MAGIC 0x314e4441494441ull /* "ADIADN1" */

typedef struct file_head {
  uint64_t magic, fp, kind, index, n, pb, step, sum;
} file_head;

static uint64_t fnv(uint64_t h, const void *data, size_t size) {
  const unsigned char *p = data;
  for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
#define FNV0 0xcbf29ce484222325ull

static char *path(const ckpt *c, const char *what, long long k) {
  size_t len = strlen(c->dir) + 64;
  char *s = malloc(len);
  if (s && c->ns > 0)
    snprintf(s, len, "%s/ariadne-r%d-l%d-%s-%lld.dat", c->dir, c->rank, c->ns, what, k);
  else if (s)
    snprintf(s, len, "%s/ariadne-r%d-%s-%lld.dat", c->dir, c->rank, what, k);
  return s;
}

/* Write a file atomically: a temporary file, flushed, then renamed. */
static int file_write(ckpt *c, ad_tape *t, const char *what, long long k, uint64_t kind, int64_t step, const double *v,
                      size_t nv, const unsigned char *p, size_t np) {
  char *fn = path(c, what, k), *tmp = fn ? malloc(strlen(fn) + 8) : NULL;
  if (!fn || !tmp) {
    free(fn);
    return AD_ERR_NOMEM;
  }
  sprintf(tmp, "%s.tmp", fn);
  file_head h = {FILE_MAGIC, c->fp, kind, (uint64_t)k, nv, np, (uint64_t)step, 0};
  h.sum = fnv(fnv(FNV0, v, nv * sizeof(double)), p, np);
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(&h, sizeof h, 1, f) == 1 && (nv == 0 || fwrite(v, sizeof(double), nv, f) == nv) &&
           (np == 0 || fwrite(p, 1, np, f) == np);
  if (f) ok = (fflush(f) == 0) & ok;
  if (f) ok = (fsync(fileno(f)) == 0) & ok;
  if (f) ok = (fclose(f) == 0) & ok;
  if (ok) ok = rename(tmp, fn) == 0;
  int rc = AD_OK;
  if (!ok) {
    rc = ad__pending(t, AD_ERR_IO, "ad_checkpoint_loop: cannot write %s: %s", fn, strerror(errno));
    remove(tmp);
  } else {
    c->st.disk_writes++;
  }
  free(fn);
  free(tmp);
  return rc;
}

/* Read a file written by file_write; a missing file gives AD_ERR_IO, a file
 * that fails its header or checksum AD_ERR_CORRUPT. *missing tells which. */
static int file_read(ckpt *c, ad_tape *t, const char *what, long long k, uint64_t kind, int64_t *step, double *v,
                     size_t nv, unsigned char *p, size_t np, int *missing) {
  char *fn = path(c, what, k);
  if (!fn) return AD_ERR_NOMEM;
  if (missing) *missing = 0;
  FILE *f = fopen(fn, "rb");
  if (!f) {
    int rc = AD_ERR_IO;
    if (missing) /* the caller expected it might be absent */
      *missing = 1;
    else
      rc = ad__pending(t, AD_ERR_IO, "ad_checkpoint_loop: cannot read %s: %s", fn, strerror(errno));
    free(fn);
    return rc;
  }
  file_head h;
  int ok = fread(&h, sizeof h, 1, f) == 1 && h.magic == FILE_MAGIC && h.fp == c->fp && h.kind == kind &&
           h.index == (uint64_t)k && h.n == nv && h.pb == np;
  ok = ok && (nv == 0 || fread(v, sizeof(double), nv, f) == nv) && (np == 0 || fread(p, 1, np, f) == np);
  ok = ok && fgetc(f) == EOF && h.sum == fnv(fnv(FNV0, v, nv * sizeof(double)), p, np);
  fclose(f);
  int rc = AD_OK;
  if (!ok)
    rc = ad__pending(t, AD_ERR_CORRUPT, "ad_checkpoint_loop: %s is corrupt or belongs to another run", fn);
  else {
    c->st.disk_reads++;
    if (step) *step = (int64_t)h.step;
  }
  free(fn);
  return rc;
}

static void file_remove(ckpt *c, const char *what, long long k) {
  char *fn = path(c, what, k);
  if (fn) remove(fn);
  free(fn);
}

/* The manifest: the run's fingerprint and how far it got. */
typedef struct manifest {
  uint64_t magic, fp, steps, nseg, forward_done, segments_done, seed_sum;
} manifest;

static int manifest_write(ckpt *c, ad_tape *t, const manifest *m) {
  return file_write(c, t, "manifest", 0, 9, 0, (const double *)(const void *)m, sizeof *m / sizeof(double), NULL, 0);
}

/* 1 a manifest of this run, 0 none, -1 another run's, -2 corrupt. */
static int manifest_read(ckpt *c, manifest *m) {
  char *fn = path(c, "manifest", 0);
  if (!fn) return 0;
  FILE *f = fopen(fn, "rb");
  free(fn);
  if (!f) return 0;
  file_head h;
  int ok = fread(&h, sizeof h, 1, f) == 1 && fread(m, sizeof *m, 1, f) == 1 && fgetc(f) == EOF;
  fclose(f);
  if (!ok || h.magic != FILE_MAGIC || m->magic != FILE_MAGIC || h.sum != fnv(FNV0, m, sizeof *m)) return -2;
  return h.fp == c->fp && m->fp == c->fp ? 1 : -1;
}

/* Remove this rank's files of any run (a foreign run being replaced). */
static void files_clear(ckpt *c, int64_t nseg_hint) {
  file_remove(c, "manifest", 0);
  file_remove(c, "final", 0);
  for (long long k = 0; k <= nseg_hint + 1; k++) {
    file_remove(c, "base", k);
    file_remove(c, "adj", k);
  }
}

/* ------------------------------------------------------------------------ */
/* Forward run                                                               */
/* ------------------------------------------------------------------------ */

static int slots_ready(ckpt *c, int n) {
  if (c->nslots >= n) return AD_OK;
  state_buf *s = realloc(c->slots, (size_t)n * sizeof *s);
  if (!s) return AD_ERR_NOMEM;
  memset(s + c->nslots, 0, (size_t)(n - c->nslots) * sizeof *s);
  c->slots = s;
  c->nslots = n;
  return AD_OK;
}

/* Execute a schedule action (not REVERSE) with segment offset b. */
static int act(ckpt *c, ad_tape *t, ad_ckpt_action a, int64_t b) {
  int rc;
  switch (a.op) {
  case AD_CKPT_ADVANCE:
    c->st.advances += a.to - a.step;
    return advance(c, t, b + a.step, b + a.to);
  case AD_CKPT_STORE:
    if ((rc = slots_ready(c, a.slot + 1)) != AD_OK || (rc = state_alloc(c, &c->slots[a.slot])) != AD_OK) return rc;
    state_copy(c, &c->slots[a.slot], &c->work);
    c->st.stores++;
    return AD_OK;
  case AD_CKPT_RESTORE:
    state_copy(c, &c->work, &c->slots[a.slot]);
    c->st.restores++;
    return AD_OK;
  default:
    return AD_OK;
  }
}

/* Binomial forward run: the schedule's actions up to its first reversal,
 * which needs the state at l-1: keep it, and make the output with one more
 * step. */
static int forward_binomial(ckpt *c, ad_tape *t) {
  ad_revolve_destroy(c->rv);
  int snaps = c->o.schedule == AD_CKPT_STORE_ALL ? (int)(c->l < 1 ? 1 : c->l) : c->o.snapshots;
  c->rv = ad_revolve_create(c->l, snaps);
  if (!c->rv) return AD_ERR_NOMEM;
  for (;;) {
    ad_ckpt_action a = ad_revolve_next(c->rv);
    if (a.op == AD_CKPT_REVERSE) break;
    int rc = act(c, t, a, 0);
    if (rc != AD_OK) return rc;
  }
  /* Slot 0 keeps the initial state, for the tangent sweep and the forward
   * run of a second sweep. A one-step loop reverses at once, with nothing
   * stored: the working state is the initial state then. */
  if (c->nslots < 1 || !c->slots[0].v) {
    int rc = slots_ready(c, 1);
    if (rc == AD_OK) rc = state_alloc(c, &c->slots[0]);
    if (rc != AD_OK) return rc;
    state_copy(c, &c->slots[0], &c->work);
  }
  int rc = state_alloc(c, &c->turn);
  if (rc != AD_OK) return rc;
  state_copy(c, &c->turn, &c->work);
  c->st.output_steps++;
  return advance(c, t, c->l - 1, c->l);
}

/* Segment boundaries for multistage: nseg segments of nearly equal length. */
static int segments_even(ckpt *c, int nseg) {
  if (nseg > c->l) nseg = (int)c->l;
  if (nseg < 1) nseg = 1;
  free(c->bnd);
  c->bnd = malloc((size_t)(nseg + 1) * sizeof *c->bnd);
  if (!c->bnd) return AD_ERR_NOMEM;
  /* floor(l j / nseg) without a 128-bit product: l = q nseg + r. */
  int64_t q = c->l / nseg, r = c->l % nseg;
  for (int j = 0; j <= nseg; j++) c->bnd[j] = q * j + r * j / nseg;
  c->nseg = nseg;
  return AD_OK;
}

/* Multistage forward run: write each segment's base state to disk on the way. */
static int forward_multistage(ckpt *c, ad_tape *t) {
  /* A write that fails does not stop the steps: the other ranks' steps
   * need this rank's messages. The failure is agreed on afterwards. */
  int rc, wrc = AD_OK;
  for (int j = 0; j < c->nseg; j++) {
    if (wrc == AD_OK) wrc = file_write(c, t, "base", j, 1, c->bnd[j], c->work.v, c->n, c->work.p, c->pb);
    int64_t end = c->bnd[j + 1];
    if (j == c->nseg - 1) end--; /* the last step makes the output */
    c->st.advances += end - c->bnd[j];
    if ((rc = advance(c, t, c->bnd[j], end)) != AD_OK) return rc;
  }
  c->st.output_steps++;
  rc = advance(c, t, c->l - 1, c->l);
  return rc != AD_OK ? rc : wrc;
}

/* Online forward run: the length is found by running. Bases are kept every
 * d steps in at most `snapshots` slots; when they fill, every other one is
 * dropped and d doubles. */
static int forward_online(ckpt *c, ad_tape *t, int record) {
  int cap = c->o.snapshots, nb = 0, rc;
  int64_t d = 1, *pos = malloc((size_t)cap * sizeof *pos);
  state_buf *b = calloc((size_t)cap, sizeof *b);
  if (!pos || !b) {
    free(pos);
    free(b);
    return AD_ERR_NOMEM;
  }
  int last = 0;
  int64_t i = 0;
  rc = AD_OK;
  ad__suspended s = ad__suspend();
  for (; !last && rc == AD_OK; i++) {
    if (i % d == 0) {
      if (nb == cap) { /* thin: keep the even ones */
        int w = 0;
        for (int r = 0; r < nb; r++) {
          if (r % 2 == 0) {
            state_buf keep = b[r];
            b[r] = b[w];
            b[w] = keep;
            pos[w++] = pos[r];
          }
        }
        nb = w;
        d *= 2;
      }
      if (i % d == 0) {
        if ((rc = state_alloc(c, &b[nb])) != AD_OK) break;
        state_copy(c, &b[nb], &c->work);
        pos[nb++] = i;
        c->st.stores++;
      }
    }
    rc = passive_step(c, t, i, &last);
    c->st.advances++;
  }
  ad__resume(s);
  c->l = i;
  c->st.steps = i;
  c->st.advances--; /* the last step made the output */
  c->st.output_steps++;
  if (rc == AD_OK && record) {
    c->nseg = nb;
    c->bnd = malloc((size_t)(nb + 1) * sizeof *c->bnd);
    if (!c->bnd) rc = AD_ERR_NOMEM;
    for (int j = 0; rc == AD_OK && j < nb; j++) c->bnd[j] = pos[j];
    if (rc == AD_OK) c->bnd[nb] = c->l;
    for (int j = nb; j < cap; j++) state_free(&b[j]); /* dropped by thinning */
    c->bases = b;
    b = NULL;
  }
  if (b)
    for (int j = 0; j < cap; j++) state_free(&b[j]);
  free(b);
  free(pos);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Reverse and tangent actions                                               */
/* ------------------------------------------------------------------------ */

/* Reverse one segment [b, e) whose base state is the working state. */
static int reverse_segment(ckpt *c, ad_tape *t, int64_t b, int64_t e, int snaps) {
  ad_revolve *rv = ad_revolve_create(e - b, snaps < 1 ? 1 : snaps);
  if (!rv) return AD_ERR_NOMEM;
  int rc = AD_OK;
  for (;;) {
    ad_ckpt_action a = ad_revolve_next(rv);
    if (a.op == AD_CKPT_DONE) break;
    rc = a.op == AD_CKPT_REVERSE ? reverse_step(c, t, b + a.step) : act(c, t, a, b);
    if (rc != AD_OK) break;
  }
  ad_revolve_destroy(rv);
  return rc;
}

static uint64_t seed_sum(const ckpt *c) { return fnv(FNV0, c->lam, c->n * sizeof(double)); }

static int reverse_multistage(ckpt *c, ad_tape *t) {
  int rc, start = 0; /* segments already done, from the end */
  manifest m;
  memset(&m, 0, sizeof m);
  if (c->o.resumable) {
    /* The seed's checksum identifies the sweep; take it before a resumed
     * adjoint replaces the seed, so that every manifest of this sweep
     * carries the same one and a run killed twice still resumes. */
    uint64_t seed = seed_sum(c);
    int64_t have = manifest_read(c, &m) == 1 && m.seed_sum == seed && m.forward_done ? (int64_t)m.segments_done : 0;
    /* Every rank must resume at the same segment, with its adjoint there:
     * ranks keep the last two, and a kill leaves them at most one apart. */
    int64_t k = have;
    if ((rc = loop_agree(c, t, &k)) != AD_OK) return rc;
    if (k > 0) {
      /* Read into the working state (free until the first base state is
       * read), so that the seed is still there if some rank cannot resume. */
      int missing = 0;
      rc = file_read(c, t, "adj", k, 2, NULL, c->work.v, c->n, NULL, 0, &missing);
      /* Every rank takes part in the agreement whatever its own read gave,
       * so that the collective calls match: 1 all read, 0 some file is
       * missing (start over), -1 some file is corrupt (every rank fails:
       * the others would wait for it in the sweep). */
      int64_t all = rc == AD_OK ? 1 : rc == AD_ERR_CORRUPT ? -1 : 0;
      int arc = loop_agree(c, t, &all);
      if (rc == AD_ERR_CORRUPT) return rc;
      if (arc != AD_OK) return arc;
      if (all < 0) return ad__pending(t, AD_ERR_CORRUPT, "ad_checkpoint_loop: another rank's adjoint file is corrupt");
      if (all > 0)
        memcpy(c->lam, c->work.v, c->n * sizeof(double));
      else
        k = 0; /* start over from the seed */
    }
    start = (int)k;
    c->st.resumed_segments += start;
    m.magic = FILE_MAGIC;
    m.fp = c->fp;
    m.steps = (uint64_t)c->l;
    m.nseg = (uint64_t)c->nseg;
    m.forward_done = 1;
    m.seed_sum = seed;
    m.segments_done = (uint64_t)start;
    if (start == 0 && (rc = manifest_write(c, t, &m)) != AD_OK) return rc;
  }
  for (int j = c->nseg - 1 - start; j >= 0; j--) {
    int64_t step;
    rc = file_read(c, t, "base", j, 1, &step, c->work.v, c->n, c->work.p, c->pb, NULL);
    if (rc == AD_OK && step != c->bnd[j])
      rc = ad__pending(t, AD_ERR_CORRUPT, "ad_checkpoint_loop: base state %d is at the wrong step", j);
    /* Every rank re-runs the segment's steps, with their messages, or none. */
    if ((rc = loop_agree_ok(c, t, rc, AD_ERR_IO, "could not read its base state")) != AD_OK) return rc;
    if ((rc = reverse_segment(c, t, c->bnd[j], c->bnd[j + 1], c->o.snapshots)) != AD_OK) return rc;
    if (c->o.resumable) {
      long long done = c->nseg - j;
      if ((rc = file_write(c, t, "adj", done, 2, c->bnd[j], c->lam, c->n, NULL, 0)) != AD_OK) return rc;
      m.segments_done = (uint64_t)done;
      if ((rc = manifest_write(c, t, &m)) != AD_OK) return rc;
      if (done >= 2) file_remove(c, "adj", done - 2);
    }
    stats_publish(c);
  }
  return AD_OK;
}

static int forward_again(ckpt *c, ad_tape *t);

static int ckpt_reverse(ad_tape *t, void *data) {
  ckpt *c = data;
  int rc;
  ad__prog_start(&c->pg, c->o.progress, c->o.progress_ud, "checkpointed loop", (uint64_t)c->l, c->st.advances, 0);
  for (size_t k = 0; k < c->n; k++) {
    c->lam[k] = t->adj[c->out[k]];
    t->adj[c->out[k]] = 0.0;
  }
  /* Every rank of a communicating loop is here: a rank that does not sweep
   * the loop makes the others fail within the timeout. */
  if ((rc = loop_agree_ok(c, t, AD_OK, AD_ERR_MPI, "did not start its reverse")) != AD_OK) return rc;
  if (!c->fresh && (rc = forward_again(c, t)) != AD_OK) return rc;
  c->fresh = 0;
  switch (c->o.schedule) {
  case AD_CKPT_BINOMIAL:
  case AD_CKPT_STORE_ALL:
    /* Pick the schedule up at its first reversal, from the kept state. */
    state_copy(c, &c->work, &c->turn);
    if ((rc = reverse_step(c, t, c->l - 1)) != AD_OK) return rc;
    for (;;) {
      ad_ckpt_action a = ad_revolve_next(c->rv);
      if (a.op == AD_CKPT_DONE) break;
      rc = a.op == AD_CKPT_REVERSE ? reverse_step(c, t, a.step) : act(c, t, a, 0);
      if (rc != AD_OK) return rc;
    }
    break;
  case AD_CKPT_MULTISTAGE:
    if ((rc = reverse_multistage(c, t)) != AD_OK) return rc;
    break;
  case AD_CKPT_ONLINE:
    for (int j = c->nseg - 1; j >= 0; j--) {
      state_copy(c, &c->work, &c->bases[j]);
      c->st.restores++;
      int snaps = c->o.snapshots - j;
      if ((rc = reverse_segment(c, t, c->bnd[j], c->bnd[j + 1], snaps)) != AD_OK) return rc;
    }
    break;
  }
  for (size_t k = 0; k < c->n; k++)
    if (c->in[k]) t->adj[c->in[k]] += c->lam[k];
  stats_publish(c);
  ad__prog_end(&c->pg, c->st.advances);
  return AD_OK;
}

/* The forward run again, for a second sweep: the first one used up the
 * snapshots. The initial state is kept by every schedule: slot 0, disk base
 * 0, or online base 0. */
static int forward_again(ckpt *c, ad_tape *t) {
  switch (c->o.schedule) {
  case AD_CKPT_BINOMIAL:
  case AD_CKPT_STORE_ALL: {
    state_copy(c, &c->work, &c->slots[0]);
    c->checking = c->twin && c->o.passive_check != AD_CKPT_CHECK_OFF;
    int rc = forward_binomial(c, t);
    c->checking = 0;
    return rc != AD_OK ? rc : c->twin_bad;
  }
  default:
    return AD_OK; /* disk and online bases survive a sweep */
  }
}

/* Tangent: run the loop forward from the initial state, taping each step
 * and pushing the tangents through it. */
static int ckpt_forward(ad_tape *t, void *data) {
  ckpt *c = data;
  int rc;
  for (size_t k = 0; k < c->n; k++) c->lam[k] = c->in[k] ? t->tan[c->in[k]] : 0.0;
  if ((rc = loop_agree_ok(c, t, AD_OK, AD_ERR_MPI, "did not start its tangent")) != AD_OK) return rc;
  switch (c->o.schedule) {
  case AD_CKPT_MULTISTAGE:
    rc = file_read(c, t, "base", 0, 1, NULL, c->work.v, c->n, c->work.p, c->pb, NULL);
    if ((rc = loop_agree_ok(c, t, rc, AD_ERR_IO, "could not read its initial state")) != AD_OK) return rc;
    break;
  case AD_CKPT_ONLINE:
    state_copy(c, &c->work, &c->bases[0]);
    break;
  default:
    if (!c->fresh && (rc = forward_again(c, t)) != AD_OK) return rc;
    state_copy(c, &c->work, &c->slots[0]);
  }
  for (int64_t i = 0; i < c->l; i++) {
    if ((rc = tape_step(c, t, i)) != AD_OK) return rc;
    ad_tape *sc = c->scratch;
    if ((rc = ad__tangents_ready(sc)) != AD_OK) return rc;
    ad_tangents_zero(sc);
    for (size_t k = 0; k < c->n; k++) sc->tan[k + 1] = c->lam[k];
    if ((rc = ad__sweep_forward(sc)) != AD_OK) {
      ad__pending(t, rc, "ad_checkpoint_loop: tangent of step %lld: %s", (long long)i, ad_tape_error_message(sc));
      return rc;
    }
    for (size_t k = 0; k < c->n; k++) {
      c->lam[k] = c->xs[k].i ? sc->tan[c->xs[k].i] : 0.0;
      c->work.v[k] = c->xs[k].v;
    }
    if (c->pb) memcpy(c->work.p, c->ptmp, c->pb);
  }
  for (size_t k = 0; k < c->n; k++) t->tan[c->out[k]] = c->lam[k];
  /* The snapshots were not touched, except the working state. */
  return AD_OK;
}

static void ckpt_destroy(void *data) {
  ckpt *c = data;
  if (c->o.schedule == AD_CKPT_MULTISTAGE && !c->o.resumable) files_clear(c, c->nseg);
  ckpt_free(c);
}

/* For ad_tape_dump: the schedule and the loop's state handles. */
static int ckpt_describe(const void *data, char *buf, size_t size) {
  static const char *const names[] = {"binomial", "multistage", "store_all", "online"};
  const ckpt *c = data;
  ad__line l = {buf, size, 0};
  ad__line_printf(&l, "schedule=%s steps=%lld snapshots=%d state=%zu pbytes=%zu recomputed=%lld taped=%lld",
                  names[c->o.schedule], (long long)c->l, c->o.snapshots, c->n, c->pb, (long long)c->st.advances,
                  (long long)c->st.taped);
  ad__line_handles(&l, "in", c->in, c->n);
  ad__line_handles(&l, "out", c->out, c->n);
  return (int)l.len;
}

static const ad__record_ops ckpt_ops = {"checkpointed loop", ckpt_reverse, ckpt_forward, ckpt_destroy, ckpt_describe};

/* ------------------------------------------------------------------------ */
/* Entry point                                                               */
/* ------------------------------------------------------------------------ */

static int bad_options(ad_tape *t, const ad_ckpt_options *o, size_t n) {
  const char *why = NULL;
  if (o->schedule < AD_CKPT_BINOMIAL || o->schedule > AD_CKPT_ONLINE)
    why = "opts->schedule is not an ad_ckpt_schedule";
  else if (o->schedule != AD_CKPT_ONLINE && o->steps == 0)
    why = "opts->steps is 0, which would run no step and leave the state as it is (steps not set?); set steps, "
          "or AD_CKPT_NO_STEPS for a loop meant to run none";
  else if (o->schedule != AD_CKPT_ONLINE && o->steps < 0 && o->steps != AD_CKPT_NO_STEPS)
    why = "opts->steps is negative";
  else if (o->schedule != AD_CKPT_STORE_ALL && o->snapshots < 1)
    why = "opts->snapshots is 0 (at least 1 is needed)";
  else if (o->schedule == AD_CKPT_ONLINE && o->snapshots < 2)
    why = "opts->snapshots: the online schedule needs at least 2";
  else if (o->schedule == AD_CKPT_MULTISTAGE && o->disk_snapshots < 1)
    why = "opts->disk_snapshots is 0: the multistage schedule needs at least 1";
  else if (o->schedule == AD_CKPT_MULTISTAGE && !o->dir)
    why = "opts->dir is NULL: the multistage schedule needs a directory";
  else if (o->resumable && o->schedule != AD_CKPT_MULTISTAGE)
    why = "opts->resumable: only the multistage schedule is resumable";
  else if (o->passive_check < AD_CKPT_CHECK_OFF || o->passive_check > AD_CKPT_CHECK_FORWARD)
    why = "opts->passive_check is not AD_CKPT_CHECK_OFF, _FIRST or _FORWARD";
  else if (n > SIZE_MAX / 4 / sizeof(double))
    why = "n: a state too large";
  return why ? ad__pending(t, AD_ERR_ARG, "ad_checkpoint_loop: %s", why) : AD_OK;
}

/* A plain loop: no tape records, or the state is passive. */
static int plain_loop(const ad_ckpt_options *o, ad_ckpt_step step, void *ud, size_t n, ad_real *state, size_t pb,
                      void *pstate, ad_tape *t) {
  int last = 0;
  for (int64_t i = 0; !last && (o->schedule == AD_CKPT_ONLINE || i < o->steps); i++) {
    size_t n1 = n, p1 = pb;
    int rc = step(ud, i, &n1, state, &p1, pstate);
    if (rc < 0)
      return ad__pending(t, AD_ERR_CALLBACK, "ad_checkpoint_loop: the step function failed (%d) in step %lld", rc,
                         (long long)i);
    if (n1 != n || p1 != pb)
      return ad__pending(t, AD_ERR_CALLBACK, "ad_checkpoint_loop: step %lld changed the state size", (long long)i);
    last = o->schedule == AD_CKPT_ONLINE && rc == AD_CKPT_LAST;
  }
  return AD_OK;
}

/* Make a failure of the forward run the tape's sticky error, keeping the
 * detailed (pending) message as it is. */
static int sticky(ad_tape *t, int rc) {
  if (t && rc != AD_OK && t->err == AD_OK) {
    if (t->pmsg[0])
      memcpy(t->msg, t->pmsg, sizeof t->msg);
    else
      snprintf(t->msg, sizeof t->msg, "ariadne: ad_checkpoint_loop: %s", ad_strerror(rc));
    t->pending = AD_OK;
    t->err = rc;
    t->rec.active = 0;
    ad__recorder_arm(t);
  }
  return rc;
}

int ad_checkpoint_loop(const ad_ckpt_options *o, ad_ckpt_step step, void *ud, size_t n, ad_real *state, size_t pb,
                       void *pstate) {
  ad_tape *t = ad_tape_current(); /* the recording tape, possibly in error; NULL if none records */
  if (t && !t->recording) t = NULL;
  const char *null = !o ? "opts" : !step ? "step" : n && !state ? "state" : pb && !pstate ? "pstate" : NULL;
  if (null) return sticky(t, ad__pending(t, AD_ERR_ARG, "ad_checkpoint_loop: %s is NULL", null));
  int rc = bad_options(t, o, n);
  if (rc != AD_OK) return sticky(t, rc);
  if (t && t->err != AD_OK) return t->err;
  int active = 0;
  for (size_t k = 0; t && k < n; k++) active |= state[k].i != 0;
  if (!t || !active) return sticky(t, plain_loop(o, step, ud, n, state, pb, pstate, t));
  for (size_t k = 0; k < n; k++)
    if (ad__handle_check(t, state[k]) < 0)
      return sticky(t,
                    ad__pending(t, AD_ERR_STALE_HANDLE, "ad_checkpoint_loop: state element %zu has a stale handle", k));

  ckpt *c = calloc(1, sizeof *c);
  if (!c) return sticky(t, AD_ERR_NOMEM);
  c->o = *o;
  c->step = step;
  c->ud = ud;
  c->twin = o->step_passive;
  c->twin_ud = o->passive_ud ? o->passive_ud : ud;
  c->n = n;
  c->pb = pb;
  c->l = o->schedule == AD_CKPT_ONLINE || o->steps == AD_CKPT_NO_STEPS ? 0 : o->steps;
  c->st.steps = c->l;
  c->rank = o->rank >= 0 ? o->rank : ad__process_rank();
  c->dir = o->dir ? strdup(o->dir) : NULL;
  c->o.dir = c->dir;
  c->ns = -1;
  c->comms_unknown = 1;
  c->in = malloc(2 * (n ? n : 1) * sizeof *c->in);
  c->xs = malloc((n ? n : 1) * sizeof *c->xs);
  c->lam = malloc((n ? n : 1) * sizeof *c->lam);
  c->ptmp = malloc(pb ? pb : 1);
  if (!c->in || !c->xs || !c->lam || !c->ptmp || (o->dir && !c->dir) || state_alloc(c, &c->work) != AD_OK) {
    ckpt_free(c);
    return sticky(t, AD_ERR_NOMEM);
  }
  c->out = c->in + n;
  for (size_t k = 0; k < n; k++) {
    c->in[k] = state[k].i;
    c->work.v[k] = state[k].v;
  }
  if (pb) memcpy(c->work.p, pstate, pb);

  if (o->schedule == AD_CKPT_MULTISTAGE) {
    struct stat sb;
    if (stat(c->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      rc = ad__pending(t, AD_ERR_IO, "ad_checkpoint_loop: %s is not a directory", c->dir);
      ckpt_free(c);
      return sticky(t, rc);
    }
    if ((c->ns = ns_take(c->dir)) < 0) {
      ckpt_free(c);
      return sticky(t, AD_ERR_NOMEM);
    }
    /* The run's fingerprint: its arguments and its initial state. */
    int64_t key[6] = {o->steps, (int64_t)n, (int64_t)pb, o->snapshots, o->disk_snapshots, c->rank};
    c->fp = fnv(fnv(fnv(FNV0, key, sizeof key), c->work.v, n * sizeof(double)), c->work.p, pb);
    rc = segments_even(c, o->disk_snapshots);
    if (rc == AD_OK && o->resumable) {
      manifest m;
      int mr = manifest_read(c, &m);
      if (mr == -2 || (mr == -1 && !o->replace_foreign)) {
        rc =
            ad__pending(t, AD_ERR_CORRUPT,
                        "ad_checkpoint_loop: %s holds a checkpoint manifest that is %s (set replace_foreign, or use an "
                        "empty directory)",
                        c->dir, mr == -2 ? "corrupt" : "of another run");
      } else if (mr == -1) {
        files_clear(c, c->nseg);
        c->st.replaced_foreign = 1;
      }
      /* Skip the forward run if every rank has it on disk. A rank that
       * failed still takes part (-1), so that the collective calls match and
       * every rank fails with it instead of waiting for it. */
      int64_t all = rc != AD_OK ? -1 : mr == 1 && m.forward_done;
      int arc = loop_agree(c, t, &all);
      if (rc == AD_OK) rc = arc;
      if (rc == AD_OK && all < 0)
        rc = ad__pending(t, AD_ERR_CORRUPT,
                         "ad_checkpoint_loop: another rank's checkpoint manifest is corrupt or of another run");
      if (all > 0) {
        rc = file_read(c, t, "final", 0, 3, NULL, c->work.v, n, c->work.p, pb, NULL);
        int64_t read = rc == AD_OK;
        int arc = loop_agree(c, t, &read);
        if (rc == AD_OK) rc = arc;
        if (rc == AD_OK && !read)
          rc = ad__pending(t, AD_ERR_CORRUPT, "ad_checkpoint_loop: another rank cannot read its final state");
        if (rc == AD_OK) c->resumed_forward = 1;
      }
    }
  }
  if (rc == AD_OK && !c->resumed_forward) {
    c->checking = c->twin && o->passive_check != AD_CKPT_CHECK_OFF;
    void *mark = ad__loop_comm ? ad__loop_comm->collect_begin() : NULL;
    switch (o->schedule) {
    case AD_CKPT_BINOMIAL:
    case AD_CKPT_STORE_ALL:
      rc = c->l > 0 ? forward_binomial(c, t) : AD_OK;
      break;
    case AD_CKPT_MULTISTAGE:
      rc = c->l > 0 ? forward_multistage(c, t) : AD_OK;
      if (rc == AD_OK && o->resumable) {
        rc = file_write(c, t, "final", 0, 3, c->l, c->work.v, n, c->work.p, pb);
        manifest m = {FILE_MAGIC, c->fp, (uint64_t)c->l, (uint64_t)c->nseg, 1, 0, 0};
        if (rc == AD_OK) rc = manifest_write(c, t, &m);
      }
      break;
    case AD_CKPT_ONLINE:
      rc = forward_online(c, t, 1);
      break;
    }
    c->checking = 0;
    if (rc == AD_OK) rc = c->twin_bad;
    if (mark) {
      c->ncomms = ad__loop_comm->collect_end(mark, &c->comms);
      c->comms_unknown = 0;
    }
    /* A rank whose files could not be written fails, and so do the others:
     * its loop would not sweep with theirs. */
    if (communicates(c))
      rc = loop_agree_ok(c, t, rc, AD_ERR_IO,
                         "could not write its checkpoint files or run its steps (or its passive twin disagrees)");
  }
  c->fresh = 1;
  stats_publish(c);
  if (rc != AD_OK) {
    ckpt_free(c);
    return sticky(t, rc);
  }
  if (pb) memcpy(pstate, c->work.p, pb);
  if (c->l == 0) { /* no step: the state is unchanged */
    ckpt_free(c);
    return AD_OK;
  }
  if (c->twin) { /* the output, for the reverse's check */
    if (state_alloc(c, &c->fin) != AD_OK) {
      ckpt_free(c);
      return sticky(t, AD_ERR_NOMEM);
    }
    state_copy(c, &c->fin, &c->work);
  }
  size_t bytes = sizeof *c + c->st.snapshot_bytes;
  double *final = malloc((n ? n : 1) * sizeof *final);
  if (!final) {
    ckpt_free(c);
    return sticky(t, AD_ERR_NOMEM);
  }
  memcpy(final, c->work.v, n * sizeof *final);
  t->loop_comm |= communicates(c);
  if ((rc = ad__record_push(t, &ckpt_ops, c, bytes)) != AD_OK) {
    free(final);
    return rc; /* ckpt_destroy has run */
  }
  for (size_t k = 0; k < n; k++) {
    state[k] = ad__new_input(t, final[k]);
    c->out[k] = state[k].i;
  }
  free(final);
  return ad_tape_error(t);
}
