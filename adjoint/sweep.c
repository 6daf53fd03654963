/* SPDX-License-Identifier: BSD-3-Clause */
/* Reverse (adjoint) and forward (tangent) sweeps over a recorded tape, scalar
 * and vector mode. Special records run at their recorded positions. */
#include <math.h>
#include <string.h>

#include "progress.h"
#include "tape_impl.h"

/* adj[idx[j]] += d[j] * w for the c arguments of one statement. A cell
 * update's statement has a handful of arguments: for counts up to 8 the
 * loop is written out for that count (one indirect jump per statement
 * instead of a loop branch and its counter per argument); repeated handles
 * in one statement still add in order, as each update is a read, an add
 * and a store of its own. */
#define SWEEP_UNROLLED(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8)
static inline AD__ALWAYS_INLINE void reverse_args(double *restrict adj, const ad_index *idx, const double *d,
                                                  uint32_t c, double w) {
  switch (c) {
#define SWEEP_CASE(n)                                                                                                  \
  case n:                                                                                                              \
    for (uint32_t j = 0; j < n; j++) adj[idx[j]] += d[j] * w;                                                          \
    return;
    SWEEP_UNROLLED(SWEEP_CASE)
#undef SWEEP_CASE
  default:
    for (uint32_t j = 0; j < c; j++) adj[idx[j]] += d[j] * w;
  }
}

/* Statements s-1 down to stop of one block; *na and *np are the argument and
 * partial cursors. The zero test skips dead statements, which also keeps an
 * infinite partial (sqrt at 0) from turning an unused branch into NaN. With
 * `watch` (the finite check) the first statement whose adjoint, or an
 * argument's adjoint after it, is not finite is noted; the sweep goes on.
 * Always inlined, so that the plain sweep (watch NULL) has no test left. */
static inline AD__ALWAYS_INLINE void reverse_run(double *restrict adj, ad_index base, const uint8_t *cnt,
                                                 const ad_index *idx, const double *par, uint32_t s, uint32_t stop,
                                                 uint32_t *na, uint32_t *np, ad__adj_watch *watch) {
  uint32_t a = *na, p = *np;
  while (s > stop) {
    --s;
    uint32_t c = cnt[s] & AD__MAX_ARGS, kind = cnt[s] >> 6;
    a -= c;
    p -= kind == AD__KIND_GENERAL ? c : 0;
    const double *d = kind == AD__KIND_GENERAL ? par + p : ad__unit_partials[kind];
    double w = adj[(size_t)base + s + 1];
    if (w == 0.0) continue;
    if (!watch) {
      reverse_args(adj, idx + a, d, c, w);
      continue;
    }
    if (!watch->found && !isfinite(w)) {
      watch->found = 1;
      watch->stmt = base + s + 1;
      watch->target = 0;
      watch->adjoint = w;
    }
    for (uint32_t j = 0; j < c; j++) {
      adj[idx[a + j]] += d[j] * w;
      if (!watch->found && !isfinite(adj[idx[a + j]])) {
        watch->found = 1;
        watch->stmt = base + s + 1;
        watch->target = idx[a + j];
        watch->partial = d[j];
        watch->adjoint = w;
        watch->result = adj[idx[a + j]];
      }
    }
  }
  *na = a;
  *np = p;
}

static int run_record(ad_tape *t, ad__record *r, int reverse) {
  int (*fn)(ad_tape *, void *) = reverse ? r->ops->reverse : r->ops->forward;
  if (!fn) {
    ad__pending(t, AD_ERR_STATE, "%s record has no %s action", r->ops->name, reverse ? "reverse" : "tangent");
    return ad__driver_check(t);
  }
  int rc = fn(t, r->data);
  if (rc != AD_OK && t->pending == AD_OK && t->err == AD_OK)
    ad__pending(t, rc, "%s record failed in the %s sweep", r->ops->name, reverse ? "reverse" : "tangent");
  return rc;
}

static int sweep_begin(ad_tape *t, int reverse) {
  int err = ad__driver_check(t);
  if (err == AD_OK) err = reverse ? ad__adjoints_ready(t) : ad__tangents_ready(t);
  if (t->ext_ops) {
    int rc = t->ext_ops->sweep_begin(t, t->ext_ctx, reverse, err);
    if (err == AD_OK) err = rc;
  }
  return err;
}

static int sweep_end(ad_tape *t, int reverse, int rc) {
  rc = t->ext_ops ? t->ext_ops->sweep_end(t, t->ext_ctx, reverse, rc) : rc;
  /* A failure inside the sweep is reported by its return value; it must not
   * fail the next sweep too (its message stays readable). */
  t->pending = AD_OK;
  return rc;
}

static int reverse_body(ad_tape *t, ad_tape_pos lo);
static int forward_body(ad_tape *t);

int ad__sweep_reverse(ad_tape *t, ad_tape_pos lo) {
  int rc = sweep_begin(t, 1);
  if (rc != AD_OK) return rc;
  return sweep_end(t, 1, reverse_body(t, lo));
}

int ad__sweep_forward(ad_tape *t) {
  int rc = sweep_begin(t, 0);
  if (rc != AD_OK) return rc;
  return sweep_end(t, 0, forward_body(t));
}

static int reverse_body(ad_tape *t, ad_tape_pos lo) {
  int rc;
  ad__sync(t);
  ad__prog pg; /* reported per block; the default report only for large tapes */
  ad__prog_start(&pg, t->opt.progress, t->opt.progress_ud, "reverse sweep", t->rec.next - lo.index, 0, 1u << 22);
  double *adj = t->adj;
  size_t ri = t->nrec;
  ad__adj_watch watch = {0};
  for (ad__block *b = t->cur; b; b = b->prev) {
    uint32_t s = b->ns, na = b->na, np = b->np, s_lo = b->id == lo.block ? lo.ns : 0;
    for (;;) {
      /* Records made after statement base+s ran after it forward: run them first. */
      while (ri > lo.records && t->recs[ri - 1].pos >= b->base + s) {
        ri--;
        if ((rc = run_record(t, &t->recs[ri], 1)) != AD_OK) return rc;
        adj = t->adj; /* a record may have grown the vector */
      }
      if (s == s_lo) break;
      uint32_t stop = s_lo;
      if (ri > lo.records && t->recs[ri - 1].pos > b->base + s_lo) stop = (uint32_t)(t->recs[ri - 1].pos - b->base);
      if (AD__UNLIKELY(t->check_finite))
        reverse_run(adj, b->base, b->cnt, b->idx, b->par, s, stop, &na, &np, &watch);
      else
        reverse_run(adj, b->base, b->cnt, b->idx, b->par, s, stop, &na, &np, NULL);
      s = stop;
    }
    if (b->id == lo.block) break;
    if (pg.on) ad__prog_step(&pg, t->rec.next - b->base, 0);
  }
  while (ri > lo.records) {
    ri--;
    if ((rc = run_record(t, &t->recs[ri], 1)) != AD_OK) return rc;
  }
  ad__prog_end(&pg, 0);
  /* A record's outputs on inputs of the tape are swept by no statement:
   * their adjoints are looked at last. */
  if (AD__UNLIKELY(t->check_finite) && !watch.found)
    for (ad_index h = (ad_index)lo.index + 1; h <= t->rec.next && !watch.found; h++)
      if (!isfinite(t->adj[h])) watch = (ad__adj_watch){1, h, 0, 0.0, t->adj[h], 0.0};
  return ad__watch_adjoint_report(t, &watch);
}

/* Statements s to stop-1 of one block, forward. With `watch` (the finite
 * check) the first statement whose tangent is not finite is noted, with the
 * first argument that made it so; the sweep goes on. Always inlined, as
 * reverse_run. */
static inline AD__ALWAYS_INLINE void forward_run(double *restrict tan, ad_index base, const uint8_t *cnt,
                                                 const ad_index *idx, const double *par, uint32_t s, uint32_t stop,
                                                 uint32_t *na, uint32_t *np, ad__adj_watch *watch) {
  uint32_t a = *na, p = *np;
  for (; s < stop; s++) {
    uint32_t c = cnt[s] & AD__MAX_ARGS, kind = cnt[s] >> 6;
    if (c == 0) continue; /* an input or a received value keeps its seed */
    const double *d = kind == AD__KIND_GENERAL ? par + p : ad__unit_partials[kind];
    p += kind == AD__KIND_GENERAL ? c : 0;
    /* A zero tangent contributes nothing, even through an infinite partial. */
    double y = 0.0;
    for (uint32_t j = 0; j < c; j++) {
      double x = tan[idx[a + j]];
      if (x != 0.0) y += d[j] * x;
      if (watch && !watch->found && !isfinite(y)) {
        watch->found = 1;
        watch->stmt = base + s + 1;
        watch->target = idx[a + j];
        watch->partial = d[j];
        watch->adjoint = x;
      }
    }
    tan[(size_t)base + s + 1] = y;
    if (watch && watch->found && watch->stmt == base + s + 1) watch->result = y;
    a += c;
  }
  *na = a;
  *np = p;
}

static int forward_body(ad_tape *t) {
  int rc;
  ad__sync(t);
  ad__prog pg;
  ad__prog_start(&pg, t->opt.progress, t->opt.progress_ud, "tangent sweep", t->rec.next, 0, 1u << 22);
  ad__adj_watch watch = {0};
  size_t ri = 0;
  for (ad__block *b = t->head;; b = b->next) {
    uint32_t s = 0, na = 0, np = 0, s_hi = b->ns;
    for (;;) {
      while (ri < t->nrec && t->recs[ri].pos <= b->base + s) {
        if ((rc = run_record(t, &t->recs[ri], 0)) != AD_OK) return rc;
        ri++;
      }
      if (s == s_hi) break;
      uint32_t stop = s_hi;
      if (ri < t->nrec && t->recs[ri].pos < b->base + s_hi) stop = (uint32_t)(t->recs[ri].pos - b->base);
      if (AD__UNLIKELY(t->check_finite))
        forward_run(t->tan, b->base, b->cnt, b->idx, b->par, s, stop, &na, &np, &watch);
      else
        forward_run(t->tan, b->base, b->cnt, b->idx, b->par, s, stop, &na, &np, NULL);
      s = stop;
    }
    if (b == t->cur) break;
    if (pg.on) ad__prog_step(&pg, b->base + b->ns, 0);
  }
  while (ri < t->nrec) {
    if ((rc = run_record(t, &t->recs[ri], 0)) != AD_OK) return rc;
    ri++;
  }
  ad__prog_end(&pg, 0);
  return ad__watch_tangent_report(t, &watch);
}

void ad__sweep_reverse_vec(ad_tape *t, double *restrict adj, size_t w) {
  ad__sync(t);
  for (ad__block *b = t->cur; b; b = b->prev) {
    uint32_t na = b->na, np = b->np;
    for (uint32_t s = b->ns; s-- > 0;) {
      uint32_t c = b->cnt[s] & AD__MAX_ARGS, kind = b->cnt[s] >> 6;
      na -= c;
      if (kind == AD__KIND_GENERAL) np -= c;
      const double *ws = adj + ((size_t)b->base + s + 1) * w;
      int nz = 0;
      for (size_t l = 0; l < w; l++) nz |= ws[l] != 0.0;
      if (!nz) continue;
      /* Per lane, as the scalar sweep: a lane whose adjoint is zero takes
       * nothing, even through an infinite partial another lane needs. */
      for (uint32_t j = 0; j < c; j++) {
        double p = kind == AD__KIND_GENERAL ? b->par[np + j] : ad__unit(kind, j);
        double *x = adj + (size_t)b->idx[na + j] * w;
        for (size_t l = 0; l < w; l++)
          if (ws[l] != 0.0) x[l] += p * ws[l];
      }
    }
  }
}

void ad__sweep_forward_vec(ad_tape *t, double *restrict tan, size_t w) {
  ad__sync(t);
  for (ad__block *b = t->head;; b = b->next) {
    uint32_t na = 0, np = 0;
    for (uint32_t s = 0; s < b->ns; s++) {
      uint32_t c = b->cnt[s] & AD__MAX_ARGS, kind = b->cnt[s] >> 6;
      if (c == 0) continue;
      double *y = tan + ((size_t)b->base + s + 1) * w;
      for (size_t l = 0; l < w; l++) y[l] = 0.0;
      for (uint32_t j = 0; j < c; j++) {
        double p = kind == AD__KIND_GENERAL ? b->par[np + j] : ad__unit(kind, j);
        const double *x = tan + (size_t)b->idx[na + j] * w;
        for (size_t l = 0; l < w; l++)
          if (x[l] != 0.0) y[l] += p * x[l];
      }
      na += c;
      if (kind == AD__KIND_GENERAL) np += c;
    }
    if (b == t->cur) break;
  }
}
