/* Fused n-ary statements (sum, linear combination, dot product, user partials)
 * and statement-level preaccumulation. */
#include <string.h>

#include "tape_impl.h"

#define MAX_STMT_ARGS 255u

static ad_tape *tape_of(ad__recorder *R) {
  return (ad_tape *)((char *)R - offsetof(ad_tape, rec));
}

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

/* Push one statement with k validated active arguments. More than 255
 * arguments become a chain of statements, each taking the previous one as an
 * argument with partial 1: the same derivative, one byte per argument count. */
static ad_real emit(ad__recorder *R, double value, size_t k, const ad_index *idx, const double *par,
                    const char *op) {
  ad_real r = ad__const(value);
  if (k == 0) return r;
  ad_index prev = 0;
  size_t done = 0;
  while (done < k) {
    uint32_t room = prev ? MAX_STMT_ARGS - 1 : MAX_STMT_ARGS;
    uint32_t m = (k - done) < room ? (uint32_t)(k - done) : room;
    if (!ad__need(R, m + (prev != 0), NULL, op)) return r;
    uint32_t na = R->na;
    if (prev) {
      R->idx[na] = prev;
      R->par[na] = 1.0;
      na++;
    }
    memcpy(R->idx + na, idx + done, m * sizeof(ad_index));
    memcpy(R->par + na, par + done, m * sizeof(double));
    R->cnt[R->ns++] = (uint8_t)(na + m - R->na);
    R->na = na + m;
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
  g->t = tape_of(g->R);
  return scratch(g->t, n) == AD_OK;
}

static int gather_add(gather *g, ad_real x, double p) {
  if (x.i == 0) return 1;
  if (x.e != g->R->epoch || x.i > g->R->next) return ad__need(g->R, 1, &x, g->op); /* reports stale */
  g->t->sc_idx[g->k] = x.i;
  g->t->sc_par[g->k] = p;
  g->k++;
  return 1;
}

static ad_real gather_emit(gather *g, double value) {
  return emit(g->R, value, g->k, g->t->sc_idx, g->t->sc_par, g->op);
}

ad_real ad_sum(size_t n, const ad_real *x) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += x[k].v;
  gather g;
  if (!gather_start(&g, n, "ad_sum")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, x[k], 1.0)) return ad__const(v);
  return gather_emit(&g, v);
}

ad_real ad_lincomb(size_t n, const double *w, const ad_real *x) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += w[k] * x[k].v;
  gather g;
  if (!gather_start(&g, n, "ad_lincomb")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, x[k], w[k])) return ad__const(v);
  return gather_emit(&g, v);
}

ad_real ad_dot(size_t n, const ad_real *a, const ad_real *b) {
  double v = 0.0;
  for (size_t k = 0; k < n; k++) v += a[k].v * b[k].v;
  gather g;
  if (!gather_start(&g, 2 * n, "ad_dot")) return ad__const(v);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, a[k], b[k].v) || !gather_add(&g, b[k], a[k].v)) return ad__const(v);
  return gather_emit(&g, v);
}

ad_real ad_custom(double value, size_t n, const ad_real *args, const double *partials) {
  gather g;
  if (!gather_start(&g, n, "ad_custom")) return ad__const(value);
  for (size_t k = 0; k < n; k++)
    if (!gather_add(&g, args[k], partials[k])) return ad__const(value);
  return gather_emit(&g, value);
}

/* ------------------------------------------------------------------------ */
/* Preaccumulation                                                           */
/* ------------------------------------------------------------------------ */

typedef struct stmt_region {
  int depth;
  ad_tape *tape; /* tape recording at the outermost begin, NULL if none */
  ad_tape_pos pos;
} stmt_region;

static _Thread_local stmt_region region;

void ad_stmt_begin(void) {
  if (region.depth++ > 0) return;
  ad__recorder *R = ad__rec;
  region.tape = R->active ? tape_of(R) : NULL;
  if (region.tape) region.pos = ad_tape_position(region.tape);
}

ad_real ad_stmt_end(ad_real result) {
  if (region.depth == 0) return result; /* unmatched end: nothing to do */
  if (--region.depth > 0) return result;
  ad_tape *t = region.tape;
  region.tape = NULL;
  if (!t || !t->rec.active || ad__rec != &t->rec) return result;
  ad_tape_pos p = region.pos;
  ad__recorder *R = &t->rec;
  if (t->nrec != p.records || R->next == p.index) return result;
  ad_index start = (ad_index)p.index;
  if (result.i != 0 && (result.e != R->epoch || result.i > R->next)) return result; /* stale: reported when used */
  if (result.i <= start) {
    /* The result does not come from the region: drop the region's work. */
    ad_tape_reset_to(t, p);
    return result;
  }
  size_t len = (size_t)(result.i - start);
  {
    void *l = t->loc;
    if (ad__grow(t, &l, &t->loc_cap, len + 1, sizeof(double)) != AD_OK) return result;
    t->loc = l;
  }
  if (scratch(t, 64) != AD_OK) return result;
  double *loc = t->loc - (size_t)start - 1; /* loc[h] for handles start+1 .. result */
  memset(t->loc, 0, len * sizeof(double));
  loc[result.i] = 1.0;
  size_t k = 0;

  /* Local reverse sweep over the statements start+1 .. result.i. */
  ad__sync(t);
  ad__block *b = t->cur;
  while (b->base >= result.i) b = b->prev;
  uint32_t na = b->na;
  /* skip statements after the result in its block */
  for (uint32_t s = b->ns; s > (uint32_t)(result.i - b->base); s--) na -= b->cnt[s - 1];
  uint32_t s = (uint32_t)(result.i - b->base);
  for (;;) {
    uint32_t lo = b->id == p.block ? p.ns : 0;
    const uint8_t *cnt = b->cnt;
    const ad_index *idx = b->idx;
    const double *par = b->par;
    while (s > lo) {
      s--;
      uint32_t c = cnt[s];
      na -= c;
      double w = loc[b->base + s + 1];
      if (w == 0.0) continue;
      for (uint32_t j = na; j < na + c; j++) {
        ad_index h = idx[j];
        double d = par[j] * w;
        if (h > start) {
          loc[h] += d;
          continue;
        }
        size_t q = 0;
        while (q < k && t->sc_idx[q] != h) q++;
        if (q == k) {
          if (k == t->sc_cap && scratch(t, k + 1) != AD_OK) return result;
          t->sc_idx[k] = h;
          t->sc_par[k] = 0.0;
          k++;
        }
        t->sc_par[q] += d;
      }
    }
    if (b->id == p.block) break;
    b = b->prev;
    s = b->ns;
    na = b->na;
  }
  ad_tape_reset_to(t, p);
  /* Every path to an outside value had a zero partial: the result is still
   * active (as it is without the region), a statement with no arguments. */
  if (k == 0) return ad__new_input(t, result.v);
  return emit(R, result.v, k, t->sc_idx, t->sc_par, "ad_stmt_end");
}
