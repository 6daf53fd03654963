/* SPDX-License-Identifier: BSD-3-Clause */
/* Fused n-ary statements (sum, linear combination, dot product, user partials)
 * and statement-level preaccumulation. */
#include <math.h>
#include <string.h>

#include "tape_impl.h"

#define MAX_STMT_ARGS AD__MAX_ARGS

/* Each scratch array keeps its own capacity: the memory limit may be reached
 * between growing one and the other, and each must be released with the
 * size it was allocated with. */
static int scratch(ad_tape *t, size_t n) {
  if (n <= t->sc_cap) return AD_OK;
  void *a = t->sc_idx, *b = t->sc_par;
  int rc = ad__grow(t, &a, &t->sc_idx_cap, n, sizeof(ad_index));
  t->sc_idx = a;
  if (rc == AD_OK) rc = ad__grow(t, &b, &t->sc_par_cap, n, sizeof(double));
  t->sc_par = b;
  t->sc_cap = t->sc_idx_cap < t->sc_par_cap ? t->sc_idx_cap : t->sc_par_cap;
  return rc;
}

/* The operation name of the statements a spilled region writes: their
 * values were watched as they were computed, and are not known here. */
static const char spill_op[] = "ad_stmt_begin";

/* Push one statement with k validated active arguments (par NULL: every
 * partial is +1, stored as a PLUS statement). More than 63 arguments become a
 * chain of statements, each taking the previous one as an argument with
 * partial 1: the same derivative, one byte per statement. */
static ad_real emit(ad__recorder *R, double value, size_t k, const ad_index *idx, const double *par, const char *op) {
  ad_real r = ad__const(value);
  if (k == 0) return r;
  /* A watching tape checks the statement's value and partials (the values
   * of a spilled region were checked as they were computed). */
  ad_tape *t = ad__tape_of(R);
  int watch = (R->fwd & AD__FWD_WATCH) && op != spill_op;
  if (watch && R->active && !ad__watch_value(t, op, value, (uint32_t)k, NULL, idx, par)) return r;
  if (watch) t->watch_rec = NULL;
  ad_index prev = 0;
  size_t done = 0;
  while (done < k) {
    uint32_t room = prev ? MAX_STMT_ARGS - 1 : MAX_STMT_ARGS;
    uint32_t m = (k - done) < room ? (uint32_t)(k - done) : room;
    if (!ad__need(R, m + (prev != 0), NULL, op)) return r;
    uint32_t na = R->na, np = R->np;
    if (prev) {
      R->idx[na++] = prev;
      if (par) R->par[np++] = 1.0;
    }
    memcpy(R->idx + na, idx + done, m * sizeof(ad_index));
    if (par) {
      memcpy(R->par + np, par + done, m * sizeof(double));
      np += m;
    }
    R->cnt[R->ns++] = (uint8_t)((na + m - R->na) | ((par ? AD__KIND_GENERAL : AD__KIND_PLUS) << 6));
    R->na = na + m;
    R->np = np;
    prev = ++R->next;
    done += m;
    if (watch) ad__watch_note(t, prev, op, value);
  }
  r.i = prev;
  r.e = R->epoch;
  return r;
}

/* Gather the active arguments of a fused statement into the scratch arrays,
 * checking their handles. Returns the count, or (size_t)-1 on error. */
typedef struct gather {
  ad__recorder *R;
  ad_tape *t;
  size_t k;
  const char *op;
} gather;

static int gather_start(gather *g, size_t n, const char *op) {
  g->R = ad__rec;
  g->k = 0;
  g->op = op;
  if (!g->R->active) return 0;
  g->t = ad__tape_of(g->R);
  ad__region_flush(g->t); /* a fused statement inside a region: record the region */
  return scratch(g->t, n) == AD_OK;
}

static int gather_add(gather *g, ad_real x, double p) {
  if (x.i == 0) return 1;
  if ((x.e != g->R->epoch || x.i > g->R->next) && !ad__handle_live(g->t, x.i, x.e))
    return ad__need(g->R, 1, &x, g->op); /* reports it stale */
  g->t->sc_idx[g->k] = x.i;
  g->t->sc_par[g->k] = p;
  g->k++;
  return 1;
}

static ad_real gather_emit(gather *g, double value, int unit) {
  return emit(g->R, value, g->k, g->t->sc_idx, unit ? NULL : g->t->sc_par, g->op);
}

ad_real ad_sum(size_t n, const ad_real *x) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += x[k].v;
  gather g;
  if (!gather_start(&g, n, "ad_sum")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, x[k], 1.0)) return ad__const(v);
  return gather_emit(&g, v, 1);
}

ad_real ad_lincomb(size_t n, const double *w, const ad_real *x) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += w[k] * x[k].v;
  gather g;
  if (!gather_start(&g, n, "ad_lincomb")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, x[k], w[k])) return ad__const(v);
  return gather_emit(&g, v, 0);
}

ad_real ad_dot(size_t n, const ad_real *a, const ad_real *b) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += a[k].v * b[k].v;
  gather g;
  if (!gather_start(&g, 2 * n, "ad_dot")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, a[k], b[k].v) || !gather_add(&g, b[k], a[k].v)) return ad__const(v);
  return gather_emit(&g, v, 0);
}

/* The general path of the inline ad_custom: not recording, stale handles, a
 * full block, or more than 63 arguments. */
ad_real ad__custom_n(double value, size_t n, const ad_real *args, const double *partials) {
  ad__recorder *R = ad__rec;
  if (R->fwd && n <= AD__MAX_ARGS) return ad__fwd(R, value, (uint32_t)n, args, partials, "ad_custom");
  gather g;
  if (!gather_start(&g, n, "ad_custom")) return ad__const(value);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, args[k], partials[k])) return ad__const(value);
  return gather_emit(&g, value, 0);
}

/* ------------------------------------------------------------------------ */
/* Preaccumulation                                                           */
/* ------------------------------------------------------------------------ */

_Thread_local ad__region ad__reg AD__TLS_MODEL;

/* ------------------------------------------------------------------------ */
/* Forward propagation inside a region                                      */
/* ------------------------------------------------------------------------ */

/* A region starts by propagating partials forward: value j of the region
 * (handle start + 1 + j) carries a dense vector of its partials with respect
 * to the region's inputs, the outside values it uses, numbered in the order
 * in which they are met. Nothing goes on the tape until the end, which writes
 * one statement per result from its vector. Whatever this cannot do exactly
 * (see ad__region_spill) turns the region back into one recorded operation
 * by operation. */

#define FWD AD__FWD_INPUTS

/* Room for `need` values: the rows of the unit vectors and the zero row come
 * first (ad__fwd_row). */
static int fwd_grow(ad__recorder *R, size_t need) {
  ad_tape *t = ad__tape_of(R);
  size_t vals = R->fwd_cap ? 2 * (size_t)R->fwd_cap : 64;
  while (vals < need) vals *= 2;
  size_t c = R->fwd_rows ? (AD__FWD_FIRST + (size_t)R->fwd_cap) * FWD : 0;
  void *a = R->fwd_rows;
  if (ad__grow_to(t, &a, &c, (AD__FWD_FIRST + vals) * FWD, sizeof(double)) != AD_OK) return 0;
  R->fwd_rows = a;
  R->fwd_cap = (uint32_t)vals;
  R->fwd_lim = (R->fwd & AD__FWD_WATCH) ? 0 : R->fwd_cap;
  for (unsigned k = 0; k < FWD; k++) R->fwd_rows[k * FWD + k] = 1.0; /* the rest is zero */
  return 1;
}

/* One operation recorded as usual, with a partial per active argument (the
 * operation that made a region spill). */
static ad_real record_general(ad__recorder *R, double v, uint32_t n, const ad_real *args, const double *par,
                              const char *op) {
  if (!ad__need(R, n, args, op)) return ad__const(v);
  uint32_t na = R->na, np = R->np;
  for (uint32_t k = 0; k < n; k++) {
    if (args[k].i == 0) continue;
    R->idx[na++] = args[k].i;
    R->par[np++] = par[k];
  }
  if (na == R->na) return ad__const(v);
  /* Partials that a kind without stored partials holds (sums and
   * differences, which every operation on a watching tape brings here) are
   * stored as that kind, as the inline path stores them. */
  unsigned kind = AD__KIND_GENERAL;
  for (unsigned q = AD__KIND_PLUS; q <= AD__KIND_MINUS && kind == AD__KIND_GENERAL; q++) {
    uint32_t j = 0;
    while (j < na - R->na && R->par[R->np + j] == ad__unit(q, j)) j++;
    if (j == na - R->na && (q != AD__KIND_DIFF || j == 2)) kind = q;
  }
  if (kind != AD__KIND_GENERAL) np = R->np;
  ad_real r = ad__emit(R, v, R->ns, R->na, na, np, kind);
  ad__recorder_lim(R);
  if (R->fwd & AD__FWD_WATCH) {
    ad_tape *t = ad__tape_of(R);
    t->watch_rec = NULL;
    ad__watch_note(t, r.i, op, v);
  }
  return r;
}

static ad_real fwd_stale(ad_tape *t, double v, uint32_t k, ad_real a, const char *op) {
  ad__fail(t, AD_ERR_STALE_HANDLE, "%s: argument %u has handle %llu of recording %u, %s (this tape is recording %u)",
           op, k + 1, (unsigned long long)a.i, a.e, ad__stale_reason(t, a.i, a.e), t->rec.epoch);
  return ad__const(v);
}

/* The library's side of ad__fwd_op1/2 (ariadne.h): every case. */
static ad_real fwd_op(ad__recorder *R, double v, uint32_t n, const ad_real *args, const double *par, const char *op) {
  ad__region *g = &ad__reg;
  ad_tape *t = ad__tape_of(R);
  if (R->fwd & AD__FWD_WATCH) { /* a watching tape: every operation comes here */
    if (R->active && !ad__watch_value(t, op, v, n, args, NULL, par)) return ad__const(v);
    if (!(R->fwd & AD__FWD_REGION)) return record_general(R, v, n, args, par, op);
  }
  uint32_t j = g->nloc, ep = R->epoch;
  ad_index start = g->start;
  if (AD__UNLIKELY(g->rec != R || g->depth == 0)) goto spill;
  if (j >= R->fwd_cap && (j >= AD__FWD_VALUES || !fwd_grow(R, (size_t)j + 1))) goto spill;
  double acc[FWD] = {0};
  for (uint32_t m = 0; m < n; m++) {
    ad_real a = args[m];
    double p = par[m];
    if (a.i == 0) continue;
    const double *src;
    if (a.e == ep && a.i > start) { /* a value of the region */
      ad_index q = a.i - start - 1;
      if (q >= j) return fwd_stale(t, v, m, a, op);
      src = R->fwd_rows + (size_t)(AD__FWD_FIRST + q) * FWD;
    } else { /* an input of the region */
      if (a.e != ep && !ad__handle_live(t, a.i, a.e)) return fwd_stale(t, v, m, a, op);
      uint32_t s = 0, k = g->nin;
      while (s < k && g->in[s] != a.i) s++;
      if (s == k) {
        if (k == FWD) goto spill;
        g->in[k] = a.i;
        g->nin = (uint16_t)(k + 1);
      }
      src = R->fwd_rows + (size_t)s * FWD;
    }
    if (p == 0.0) continue; /* no 0 * inf, as the reverse sweep skips zero adjoints */
    if (!isfinite(p)) goto spill;
    for (uint32_t k = 0; k < FWD; k++) acc[k] += p * src[k];
  }
  /* Finite partials can still overflow a row (see ad__fwd_finite). */
  if (!ad__fwd_finite(acc)) goto spill;
  double *row = R->fwd_rows + (size_t)(AD__FWD_FIRST + j) * FWD;
  for (uint32_t k = 0; k < FWD; k++) row[k] = acc[k];
  ad_real r = ad__fwd_issue(R, v);
  if (R->fwd & AD__FWD_WATCH) ad__watch_note(t, r.i, op, v); /* kept if the region spills */
  return r;
spill:
  ad__region_spill(t);
  return record_general(R, v, n, args, par, op);
}

/* The inline operations call these with their arguments in registers: an
 * array built by the caller would be read back in pieces of other sizes than
 * it was written in, which stalls. */
ad_real ad__fwd(ad__recorder *R, double v, uint32_t n, const ad_real *args, const double *par, const char *op) {
  return fwd_op(R, v, n, args, par, op);
}
ad_real ad__fwd1(ad__recorder *R, double v, ad_real a, double da, const char *op) {
  return fwd_op(R, v, 1, &a, &da, op);
}
ad_real ad__fwd2(ad__recorder *R, double v, ad_real a, double da, ad_real b, double db, const char *op) {
  ad_real ab[2] = {a, b};
  double d[2] = {da, db};
  return fwd_op(R, v, 2, ab, d, op);
}

void ad__region_spill(ad_tape *t) {
  ad__recorder *R = &t->rec;
  if (!(R->fwd & AD__FWD_REGION)) return;
  ad__region *g = &ad__reg;
  R->fwd &= ~AD__FWD_REGION;
  ad__recorder_arm(t);
  uint32_t nloc = g->rec == R ? g->nloc : 0, L = g->nin;
  g->nloc = g->nin = 0;
  ad_index in[FWD];
  memcpy(in, g->in, sizeof in);
  if (!R->active || nloc == 0) return;
  if (R->next != g->start) {
    ad__fail(t, AD_ERR_STATE, "ad_stmt_begin: the tape moved while a region propagated partials");
    return;
  }
  /* Value j becomes statement start + 1 + j on the region's inputs, the
   * handle it already has. */
  for (uint32_t j = 0; j < nloc; j++) {
    ad_real r = L ? emit(R, 0.0, L, in, R->fwd_rows + (size_t)(AD__FWD_FIRST + j) * FWD, spill_op)
                  : ad__new_value(t, 0.0, spill_op);
    if (r.i != g->start + 1 + j) return; /* the tape failed (out of memory) */
  }
}

/* The end of a region that still propagates forward: each result computed in
 * it becomes one statement on the inputs it depends on (non-zero partials
 * only), in the order of the results. */
static void fwd_end(ad__recorder *R, ad__region *g, size_t m, ad_real *results, const char *op) {
  ad_tape *t = ad__tape_of(R);
  ad_index start = g->start, top = start + g->nloc;
  uint32_t nin = g->nin;
  R->fwd &= ~AD__FWD_REGION;
  ad__recorder_lim(R); /* nothing else changed while the region propagated */
  /* A discarded value used anyway must still index inside the adjoint vector. */
  if (top > t->hwm) t->hwm = top;
  for (size_t i = 0; i < m; i++) {
    ad_real r = results[i];
    if (r.e != R->epoch || r.i <= start || r.i > top) continue;
    const double *row = R->fwd_rows + (size_t)(AD__FWD_FIRST + (r.i - start - 1)) * FWD;
    uint32_t na = R->na, np = R->np, k = 0;
    if (na + FWD <= R->lim) { /* straight into the block, as ad_custom */
      for (uint32_t q = 0; q < nin; q++) {
        R->idx[na + k] = g->in[q];
        R->par[np + k] = row[q];
        k += row[q] != 0.0;
      }
      results[i] = k ? ad__emit(R, r.v, R->ns, na, na + k, np + k, AD__KIND_GENERAL) : ad__new_value(t, r.v, op);
      continue;
    }
    ad_index idx[FWD];
    double par[FWD];
    for (uint32_t q = 0; q < nin; q++) {
      idx[k] = g->in[q];
      par[k] = row[q];
      k += row[q] != 0.0;
    }
    results[i] = k ? emit(R, r.v, k, idx, par, op) : ad__new_value(t, r.v, op);
  }
}

/* Regions up to this many statements and outside arguments use stack arrays. */
#define SMALL 64

/* The common case: the region lies in one block, holds no special records
 * and is small. Its statements are swept backwards with local adjoints,
 * dropped, and replaced in place by one statement; it always fits, since it
 * has fewer arguments than the statements it replaces. Returns 0 if the
 * region is not of that kind. */
static int stmt_end_small(ad__recorder *R, const ad__region *g, ad_real result, ad_real *out) {
  ad_index start = g->start;
  size_t len = (size_t)(result.i - start);
  if (R->cnt != g->cnt || R->records != g->records || len > SMALL) return 0;
  const uint8_t *cnt = R->cnt;
  const ad_index *idx = R->idx;
  const double *par = R->par;
  /* statement s of the block has handle start + 1 + (s - g->ns) */
  uint32_t s = g->ns + (uint32_t)len, a = R->na, p = R->np;
  for (uint32_t q = R->ns; q > s; q--) {
    a -= cnt[q - 1] & AD__MAX_ARGS;
    if (!(cnt[q - 1] >> 6)) p -= cnt[q - 1];
  }
  /* Local adjoints of the region's statements; outside arguments are merged
   * as they come, in the order of first appearance, into oidx/opar. */
  double loc[SMALL];
  ad_index oidx[AD__MAX_ARGS];
  double opar[AD__MAX_ARGS];
  memset(loc, 0, len * sizeof *loc);
  loc[len - 1] = 1.0;
  const double *locb = loc - (size_t)start - 1; /* locb[h] for handles start+1 .. result */
  size_t k = 0;
  while (s > g->ns) {
    s--;
    uint32_t c = cnt[s] & AD__MAX_ARGS, kind = cnt[s] >> 6;
    a -= c;
    p -= kind == AD__KIND_GENERAL ? c : 0;
    double w = loc[s - g->ns];
    if (w == 0.0) continue; /* a dead intermediate: no 0 * inf */
    const double *d = kind == AD__KIND_GENERAL ? par + p : ad__unit_partials[kind];
    const ad_index *h = idx + a;
    for (uint32_t j = 0; j < c; j++) {
      ad_index hj = h[j];
      double dj = d[j] * w;
      if (hj > start) {
        ((double *)locb)[hj] += dj;
        continue;
      }
      size_t q = 0;
      while (q < k && oidx[q] != hj) q++;
      if (q == k) {
        if (k == AD__MAX_ARGS) return 0; /* too many for one statement: the general path chains */
        oidx[k] = hj;
        opar[k++] = dj;
      } else {
        opar[q] += dj;
      }
    }
  }
  /* Fewer arguments than the region's, but maybe more partials (a region of
   * sums stores none): the block must have room for them. */
  if (g->np + k > R->np_cap) return 0;
  /* Replace the region by one statement. */
  ad_tape *t = ad__tape_of(R);
  if (ad__region_discard(t, start) != AD_OK) return 1; /* out of memory: the tape holds the error */
  uint32_t na = g->na, np = g->np;
  memcpy(R->idx + na, oidx, k * sizeof *oidx);
  memcpy(R->par + np, opar, k * sizeof *opar);
  if (R->next > t->hwm) t->hwm = R->next;
  R->next = start;
  R->ns = g->ns;
  R->na = na;
  R->np = np;
  if (k == 0) { /* every path to an outside value had a zero partial */
    *out = ad__new_value(t, result.v, "ad_stmt_end");
    return 1;
  }
  /* Finite partials can add up to an infinite one. */
  if ((R->fwd & AD__FWD_WATCH) && !ad__watch_value(t, "ad_stmt_end", result.v, (uint32_t)k, NULL, oidx, opar)) {
    *out = ad__const(result.v);
    return 1;
  }
  *out = ad__emit(R, result.v, g->ns, na, na + (uint32_t)k, np + (uint32_t)k, AD__KIND_GENERAL);
  if (R->fwd & AD__FWD_WATCH) ad__watch_note(t, out->i, "ad_stmt_end", result.v);
  /* The region may have freed more arguments than statements (fused
   * statements, merged repeats): the fast path's limit must count the
   * statements left, not the arguments. */
  ad__recorder_lim(R);
  return 1;
}

/* The partials of handle `res` (inside the region that starts at p) with
 * respect to the region's outside arguments, by a local reverse sweep: they
 * are merged, in the order of first appearance, into the scratch arrays from
 * index `off` on, and their number is left in *k. */
static int region_partials(ad_tape *t, ad_tape_pos p, ad_index res, size_t off, size_t *k) {
  ad_index start = (ad_index)p.index;
  size_t len = (size_t)(res - start), n = 0;
  {
    void *l = t->loc;
    if (ad__grow(t, &l, &t->loc_cap, len + 1, sizeof(double)) != AD_OK) return AD_ERR_NOMEM;
    t->loc = l;
  }
  if (scratch(t, off + 64) != AD_OK) return AD_ERR_NOMEM;
  double *loc = t->loc - (size_t)start - 1; /* loc[h] for handles start+1 .. res */
  memset(t->loc, 0, len * sizeof(double));
  loc[res] = 1.0;

  ad__sync(t);
  ad__block *b = t->cur;
  while (b->base >= res) b = b->prev;
  uint32_t na = b->na, np = b->np;
  for (uint32_t s = b->ns; s > (uint32_t)(res - b->base); s--) {
    na -= b->cnt[s - 1] & AD__MAX_ARGS;
    if (!(b->cnt[s - 1] >> 6)) np -= b->cnt[s - 1];
  }
  uint32_t s = (uint32_t)(res - b->base);
  for (;;) {
    uint32_t lo = b->id == p.block ? p.ns : 0;
    const uint8_t *cnt = b->cnt;
    const ad_index *idx = b->idx;
    const double *par = b->par;
    while (s > lo) {
      s--;
      uint32_t c = cnt[s] & AD__MAX_ARGS, kind = cnt[s] >> 6;
      na -= c;
      if (kind == AD__KIND_GENERAL) np -= c;
      double w = loc[b->base + s + 1];
      if (w == 0.0) continue;
      const double *d = kind == AD__KIND_GENERAL ? par + np : ad__unit_partials[kind];
      for (uint32_t j = 0; j < c; j++) {
        ad_index h = idx[na + j];
        double dj = d[j] * w;
        if (h > start) {
          loc[h] += dj;
          continue;
        }
        size_t q = 0;
        while (q < n && t->sc_idx[off + q] != h) q++;
        if (q == n) {
          if (off + n == t->sc_cap && scratch(t, off + n + 1) != AD_OK) return AD_ERR_NOMEM;
          t->sc_idx[off + n] = h;
          t->sc_par[off + n] = 0.0;
          n++;
        }
        t->sc_par[off + q] += dj;
      }
    }
    if (b->id == p.block) break;
    b = b->prev;
    s = b->ns;
    na = b->na;
    np = b->np;
  }
  *k = n;
  return AD_OK;
}

/* Any region: across blocks, large, with many outside arguments. */
static ad_real stmt_end_general(ad_tape *t, ad_tape_pos p, ad_real result) {
  size_t k = 0;
  if (region_partials(t, p, result.i, 0, &k) != AD_OK) return result;
  if (ad__region_discard(t, (ad_index)p.index) != AD_OK) return result;
  ad__rewind(t, p);
  if (k == 0) return ad__new_value(t, result.v, "ad_stmt_end");
  return emit(&t->rec, result.v, k, t->sc_idx, t->sc_par, "ad_stmt_end");
}

/* The region's state when it can be preaccumulated: the recorder, the tape
 * and the region's start; NULL when the region is to be left as recorded
 * (not recording, a reset inside it, special records inside it). */
static ad__recorder *region_close(ad__region *g, ad_tape_pos *p) {
  ad__recorder *R = g->rec;
  g->rec = NULL;
  if (!R || !R->active || ad__rec != R) return NULL;
  if (R->epoch != g->epoch) return NULL; /* the tape was reset inside the region */
  if (R->records != g->records) return NULL;
  ad_tape *t = ad__tape_of(R);
  ad__sync(t);
  ad__block *b = t->cur;
  while (b && b->cnt != g->cnt) b = b->prev;
  if (!b) return NULL;
  ad_tape_pos q = {g->start, g->records, b->id, g->ns, g->na, g->np, R->epoch};
  *p = q;
  return R;
}

/* 1 if the region ended by forward propagation; otherwise it was spilled
 * (or never propagated) and ends as recorded. */
static int region_fwd_end(ad__region *g, size_t m, ad_real *results, const char *op) {
  ad__recorder *R = g->rec;
  if (!R || !(R->fwd & AD__FWD_REGION)) return 0;
  if (ad__rec == R && R->active && R->epoch == g->epoch && R->records == g->records) {
    g->rec = NULL;
    if (results)
      fwd_end(R, g, m, results, op);
    else {
      R->fwd &= ~AD__FWD_REGION;
      ad__recorder_arm(ad__tape_of(R));
    }
    return 1;
  }
  ad__region_spill(ad__tape_of(R));
  return 0;
}

void ad_stmt_end_n(size_t m, ad_real *results) {
  ad__region *g = &ad__reg;
  if (g->depth == 0) return; /* unmatched end: nothing to do */
  if (--g->depth > 0) return;
  if (region_fwd_end(g, m, results, "ad_stmt_end_n")) return;
  ad_tape_pos p;
  ad__recorder *R = region_close(g, &p);
  if (!R || !results || R->next == g->start) return;
  ad_tape *t = ad__tape_of(R);
  /* Only live results computed inside the region are replaced; the others
   * (passive, from before the region, stale) are left as they are. */
  size_t total = 0, inside = 0;
  for (size_t i = 0; i < m; i++) {
    ad_real r = results[i];
    if (r.i > g->start && ad__handle_live(t, r.i, r.e)) inside++;
  }
  if (inside == 0) {
    if (ad__region_discard(t, g->start) == AD_OK) ad__rewind(t, p);
    return;
  }
  /* Counts per result, then the pairs of all results one after another. */
  size_t *cnt = NULL;
  {
    void *a = t->sc_cnt;
    if (ad__grow(t, &a, &t->sc_cnt_cap, m, sizeof(size_t)) != AD_OK) return;
    t->sc_cnt = a;
    cnt = t->sc_cnt;
  }
  const size_t keep = (size_t)-1; /* a result left as it is */
  for (size_t i = 0; i < m; i++) {
    ad_real r = results[i];
    cnt[i] = keep;
    if (!(r.i > g->start && ad__handle_live(t, r.i, r.e))) continue;
    if (region_partials(t, p, r.i, total, &cnt[i]) != AD_OK) return; /* left as recorded */
    total += cnt[i];
  }
  if (ad__region_discard(t, g->start) != AD_OK) return;
  ad__rewind(t, p);
  size_t off = 0;
  for (size_t i = 0; i < m; i++) {
    ad_real r = results[i];
    if (cnt[i] == keep) continue;
    results[i] = cnt[i] ? emit(R, r.v, cnt[i], t->sc_idx + off, t->sc_par + off, "ad_stmt_end_n")
                        : ad__new_value(t, r.v, "ad_stmt_end_n");
    off += cnt[i];
  }
}

ad_real ad_stmt_end(ad_real result) {
  ad__region *g = &ad__reg;
  if (g->depth == 0) return result; /* unmatched end: nothing to do */
  if (--g->depth > 0) return result;
  if (region_fwd_end(g, 1, &result, "ad_stmt_end")) return result;
  ad__recorder *R = g->rec;
  g->rec = NULL;
  if (!R || !R->active || ad__rec != R) return result;
  if (R->epoch != g->epoch) return result; /* the tape was reset inside the region */
  if (R->next == g->start) return result;
  ad_tape *t = ad__tape_of(R);
  if (result.i != 0 && !ad__handle_live(t, result.i, result.e)) return result; /* stale: reported when used */
  ad_tape_pos p = {g->start, g->records, 0, g->ns, g->na, g->np, R->epoch};
  if (result.i <= g->start) {
    /* The result does not come from the region: drop the region's work. */
    if (R->cnt == g->cnt && R->records == g->records) {
      if (ad__region_discard(t, g->start) != AD_OK) return result;
      R->ns = g->ns;
      R->na = g->na;
      R->np = g->np;
      if (R->next > t->hwm) t->hwm = R->next;
      R->next = g->start;
      ad__recorder_lim(R);
      return result;
    }
  } else {
    ad_real out;
    if (stmt_end_small(R, g, result, &out)) return out;
  }
  /* find the block the region began in */
  ad__sync(t);
  ad__block *b = t->cur;
  while (b && b->cnt != g->cnt) b = b->prev;
  if (!b || R->records != g->records) return result; /* records inside: leave it as recorded */
  p.block = b->id;
  if (result.i <= g->start) {
    if (ad__region_discard(t, g->start) == AD_OK) ad__rewind(t, p);
    return result;
  }
  return stmt_end_general(t, p, result);
}
