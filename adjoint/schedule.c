/* SPDX-License-Identifier: BSD-3-Clause */
/* The binomial checkpointing schedule (revolve) as a state machine over
 * 64-bit step numbers.
 *
 * Reversing [cur, fine) with the working state at `cur` and s' snapshots
 * (the one holding `cur` included) costs T(l, s') = r l - C(s' + r, s' + 1)
 * advances, l = fine - cur, and the recursion
 *   T(l, s') = min_m  m + T(l - m, s' - 1) + T(m, s')
 * (advance m steps, store, reverse the right part with one snapshot fewer,
 * restore, reverse the left part) attains it for
 *   m = min(C(s' + r - 1, s'), l - C(s' + r - 2, s' - 1)),
 * the largest optimal split (checked against the recursion for all l < 600,
 * s' < 12). Snapshots form a stack ordered by step; the top one is dropped
 * once every step after it is reversed. */
#include <stdlib.h>
#include <string.h>

#include <ariadne_checkpoint.h>

#include "tape_impl.h"

struct ad_revolve {
  int64_t steps, fine, cur, advances;
  int snaps, k; /* slots, slots in use */
  int64_t ch[]; /* ch[i]: step held by slot i */
};

#define REVOLVE_MAGIC 0x5245564f4c564531ull /* "REVOLVE1" */

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* C(n, k), saturating at INT64_MAX. Each partial product C(n-k+i, i) =
 * C(n-k+i-1, i-1) (n-k+i) / i is an integer; dividing r and i by their
 * common factor first leaves an i that divides n-k+i, so the product is
 * formed exactly in 64 bits or found to exceed them. */
static int64_t binom(int64_t n, int64_t k) {
  if (k < 0 || n < k) return 0;
  if (k > n - k) k = n - k;
  uint64_t r = 1;
  for (int64_t i = 1; i <= k; i++) {
    uint64_t g = gcd_u64(r, (uint64_t)i), m = (uint64_t)(n - k + i) / ((uint64_t)i / g);
    r /= g;
    if (r > (uint64_t)INT64_MAX / m) return INT64_MAX;
    r *= m;
  }
  return (int64_t)r;
}

/* beta(s, r) = C(s + r, s); 0 for r < 0. */
static int64_t beta(int64_t s, int64_t r) { return r < 0 ? 0 : binom(s + r, s); }

static int64_t reps(int64_t l, int64_t s) {
  int64_t r = 0;
  while (beta(s, r) < l) r++;
  return r;
}

int64_t ad_revolve_optimum(int64_t l, int snaps) {
  if (snaps < 1 || l < 0) return -1;
  if (l <= 1) return 0;
  int64_t s = snaps, r = reps(l, s);
  int64_t c = binom(s + r, s + 1);
  if (c == INT64_MAX || r > INT64_MAX / l) return -1;
  return r * l - c;
}

/* The first advance when reversing l steps with s snapshots. */
static int64_t split(int64_t l, int64_t s) {
  if (s <= 1) return l - 1;
  int64_t r = reps(l, s);
  int64_t m = beta(s, r - 1), m2 = l - beta(s - 1, r - 1);
  if (m2 < m) m = m2;
  if (m > l - 1) m = l - 1;
  return m < 1 ? 1 : m;
}

ad_revolve *ad_revolve_create(int64_t steps, int snaps) {
  if (snaps < 1 || steps < 0) {
    ad__arg_error(NULL, "ad_revolve_create: %s", snaps < 1 ? "snaps < 1" : "steps < 0");
    return NULL;
  }
  ad_revolve *r = calloc(1, sizeof *r + (size_t)snaps * sizeof(int64_t));
  if (!r) return NULL;
  r->steps = steps;
  r->fine = steps;
  r->cur = 0;
  r->snaps = snaps;
  return r;
}

void ad_revolve_destroy(ad_revolve *r) { free(r); }

int64_t ad_revolve_advances(const ad_revolve *r) { return r ? r->advances : 0; }

ad_ckpt_action ad_revolve_next(ad_revolve *r) {
  ad_ckpt_action a = {AD_CKPT_DONE, 0, 0, -1};
  if (!r || r->fine <= 0) return a;
  if (r->cur < 0) { /* the working state was used up: restore the latest snapshot */
    a.op = AD_CKPT_RESTORE;
    a.slot = r->k - 1;
    a.step = a.to = r->cur = r->ch[r->k - 1];
    return a;
  }
  if (r->cur == r->fine - 1) {
    a.op = AD_CKPT_REVERSE;
    a.step = a.to = r->cur;
    r->fine = r->cur;
    r->cur = -1;
    if (r->k > 0 && r->ch[r->k - 1] == r->fine) r->k--;
    return a;
  }
  int stored = r->k > 0 && r->ch[r->k - 1] == r->cur;
  if (!stored && r->k < r->snaps) {
    a.op = AD_CKPT_STORE;
    a.slot = r->k;
    a.step = a.to = r->cur;
    r->ch[r->k++] = r->cur;
    return a;
  }
  int64_t s = stored ? r->snaps - r->k + 1 : r->snaps - r->k;
  int64_t m = split(r->fine - r->cur, s);
  a.op = AD_CKPT_ADVANCE;
  a.step = r->cur;
  a.to = r->cur + m;
  r->cur += m;
  r->advances += m;
  return a;
}

size_t ad_revolve_state_size(const ad_revolve *r) { return r ? (6 + (size_t)r->snaps) * sizeof(int64_t) : 0; }

int ad_revolve_save(const ad_revolve *r, void *buf, size_t size) {
  if (!r || !buf) return ad__arg_error(NULL, "ad_revolve_save: %s is NULL", !r ? "r" : "buf");
  if (size < ad_revolve_state_size(r))
    return ad__arg_error(NULL, "ad_revolve_save: size = %zu is less than ad_revolve_state_size(r) = %zu", size,
                         ad_revolve_state_size(r));
  int64_t *w = buf;
  w[0] = (int64_t)REVOLVE_MAGIC;
  w[1] = r->steps;
  w[2] = r->fine;
  w[3] = r->cur;
  w[4] = r->advances;
  w[5] = (int64_t)r->snaps << 32 | (uint32_t)r->k;
  memcpy(w + 6, r->ch, (size_t)r->snaps * sizeof(int64_t));
  return AD_OK;
}

/* A state ad_revolve_next can reach: 0 <= fine <= steps; the snapshots
 * ch[0..k) strictly increasing below fine, the first at step 0; the working
 * state (cur) either used up (-1, with a snapshot to restore unless all is
 * reversed) or at or after the latest snapshot and before fine, or, with no
 * snapshot yet, at step 0. */
static int reachable(const ad_revolve *r) {
  if (r->fine < 0 || r->fine > r->steps || r->advances < 0 || r->k < 0 || r->k > r->snaps) return 0;
  for (int i = 0; i < r->k; i++) {
    if (r->ch[i] < 0 || r->ch[i] >= r->fine) return 0;
    if (i > 0 && r->ch[i] <= r->ch[i - 1]) return 0;
  }
  if (r->k > 0 && r->ch[0] != 0) return 0;
  if (r->cur == -1) return r->fine == 0 || r->k > 0;
  if (r->cur < 0 || r->cur >= r->fine) return 0;
  return r->k > 0 ? r->cur >= r->ch[r->k - 1] : r->cur == 0;
}

ad_revolve *ad_revolve_load(const void *buf, size_t size) {
  if (!buf || size < 6 * sizeof(int64_t)) {
    ad__fail_notape(AD_ERR_CORRUPT, "ad_revolve_load: %zu bytes are too few for a schedule state", size);
    return NULL;
  }
  const int64_t *w = buf;
  if (w[0] != (int64_t)REVOLVE_MAGIC) {
    ad__fail_notape(AD_ERR_CORRUPT, "ad_revolve_load: not a schedule state (wrong magic number)");
    return NULL;
  }
  int snaps = (int)(w[5] >> 32), k = (int)(uint32_t)w[5];
  if (snaps < 1 || k < 0 || k > snaps || w[1] < 0 || size < (6 + (size_t)snaps) * sizeof(int64_t)) {
    ad__fail_notape(AD_ERR_CORRUPT, "ad_revolve_load: inconsistent sizes (%d snapshots, %d in use, %zu bytes)", snaps,
                    k, size);
    return NULL;
  }
  ad_revolve *r = ad_revolve_create(w[1], snaps);
  if (!r) return NULL;
  r->fine = w[2];
  r->cur = w[3];
  r->advances = w[4];
  r->k = k;
  memcpy(r->ch, w + 6, (size_t)snaps * sizeof(int64_t));
  if (!reachable(r)) {
    ad__fail_notape(AD_ERR_CORRUPT, "ad_revolve_load: a state no schedule of %lld steps and %d snapshots reaches",
                    (long long)r->steps, snaps);
    ad_revolve_destroy(r);
    return NULL;
  }
  return r;
}
