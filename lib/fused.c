/* SPDX-License-Identifier: BSD-3-Clause */
/* Fused n-ary statements (sum, linear combination, dot product, user partials)
 * and statement-level preaccumulation. */
#include <string.h>

#include "tape_impl.h"

#define MAX_STMT_ARGS AD__MAX_ARGS

static int scratch(ad_tape *t, size_t n) {
  if (n <= t->sc_cap) return AD_OK;
  size_t c1 = t->sc_cap, c2 = t->sc_cap;
  void *a = t->sc_idx, *b = t->sc_par;
  if (ad__grow(t, &a, &c1, n, sizeof(ad_index)) != AD_OK) return AD_ERR_NOMEM;
  t->sc_idx = a;
  if (ad__grow(t, &b, &c2, n, sizeof(double)) != AD_OK) {
    t->sc_cap = c1 < c2 ? c1 : c2;
    return AD_ERR_NOMEM;
  }
  t->sc_par = b;
  t->sc_cap = c1 < c2 ? c1 : c2;
  return AD_OK;
}

/* Push one statement with k validated active arguments (par NULL: every
 * partial is +1, stored as a PLUS statement). More than 63 arguments become a
 * chain of statements, each taking the previous one as an argument with
 * partial 1: the same derivative, one byte per statement. */
static ad_real emit(ad__recorder *R, double value, size_t k, const ad_index *idx, const double *par, const char *op) {
  ad_real r = ad__const(value);
  if (k == 0) return r;
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
  uint32_t na = g->na, np = g->np;
  memcpy(R->idx + na, oidx, k * sizeof *oidx);
  memcpy(R->par + np, opar, k * sizeof *opar);
  ad_tape *t = ad__tape_of(R);
  if (R->next > t->hwm) t->hwm = R->next;
  R->next = start;
  R->ns = g->ns;
  R->na = na;
  R->np = np;
  if (k == 0) { /* every path to an outside value had a zero partial */
    *out = ad__new_input(t, result.v);
    return 1;
  }
  *out = ad__emit(R, result.v, g->ns, na, na + (uint32_t)k, np + (uint32_t)k, AD__KIND_GENERAL);
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
  ad__rewind(t, p);
  if (k == 0) return ad__new_input(t, result.v);
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

void ad_stmt_end_n(size_t m, ad_real *results) {
  ad__region *g = &ad__reg;
  if (g->depth == 0) return; /* unmatched end: nothing to do */
  if (--g->depth > 0) return;
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
    ad__rewind(t, p);
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
  ad__rewind(t, p);
  size_t off = 0;
  for (size_t i = 0; i < m; i++) {
    ad_real r = results[i];
    if (cnt[i] == keep) continue;
    results[i] =
        cnt[i] ? emit(R, r.v, cnt[i], t->sc_idx + off, t->sc_par + off, "ad_stmt_end_n") : ad__new_input(t, r.v);
    off += cnt[i];
  }
}

ad_real ad_stmt_end(ad_real result) {
  ad__region *g = &ad__reg;
  if (g->depth == 0) return result; /* unmatched end: nothing to do */
  if (--g->depth > 0) return result;
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
    ad__rewind(t, p);
    return result;
  }
  return stmt_end_general(t, p, result);
}
