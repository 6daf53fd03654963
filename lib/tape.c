/* SPDX-License-Identifier: BSD-3-Clause */
/* Tape storage: blocks, the recording slow paths, special records, positions,
 * memory accounting and statistics. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include <sys/mman.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tape_impl.h"

/* The recorder every thread starts with: not recording, so the inline fast
 * paths fall through to passive results without touching any tape. */
static ad__recorder idle_recorder;
_Thread_local ad__recorder *ad__rec AD__TLS_MODEL = &idle_recorder;
static _Thread_local ad_tape *current_tape;

/* The partials of statements that store none, by kind, as arrays: the
 * sweeps and preaccumulation read partials from one pointer whatever the
 * kind, without a branch on it. Constant, so concurrent sweeps share it. */
#define P8(v) v, v, v, v, v, v, v, v
#define P63(v) P8(v), P8(v), P8(v), P8(v), P8(v), P8(v), P8(v), v, v, v, v, v, v, v
const double ad__unit_partials[4][AD_STMT_MAX_ARGS] = {
    {0.0},
    {P63(1.0)},
    {1.0, P8(-1.0), P8(-1.0), P8(-1.0), P8(-1.0), P8(-1.0), P8(-1.0), P8(-1.0), -1.0, -1.0, -1.0, -1.0, -1.0, -1.0},
    {P63(-1.0)}};
#undef P8
#undef P63

/* Epochs identify recordings across all tapes; 0 is never issued. */
static atomic_uint_least32_t epoch_counter = 1;

static uint32_t new_epoch(void) {
  uint32_t e;
  do e = (uint32_t)atomic_fetch_add(&epoch_counter, 1);
  while (e == 0);
  return e;
}

/* Blocks of automatic size (the default) start small, so that a small tape
 * costs little, and double up to AUTO_BLOCK_MAX statements, so that a large
 * one is a few large arrays (huge pages, see big_alloc). */
#define AUTO_BLOCK_FIRST (1u << 12)
#define AUTO_BLOCK_MAX (1u << 18)
#define MIN_BLOCK 1024u
#define MAX_STMT_ARGS 255u

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

static size_t bytes_recorded(const ad_tape *t);

/* Large arrays (blocks, adjoint vectors) come straight from the kernel, on
 * Linux with transparent huge pages asked for: a recording writes memory it
 * never touched before, and a fault per 2 MiB instead of per 4 KiB halves
 * what that first touch costs; the sweeps' scattered adjoint updates miss
 * the TLB less too. Everything else goes through malloc. Only ad__free knows
 * a pointer's size, and it passes the size it was allocated with. */
#define BIG_ALLOC ((size_t)2 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

/* The bytes of whole huge pages that `size` bytes occupy. */
static size_t huge_round(size_t size) { return (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1); }

#if defined(__SANITIZE_ADDRESS__)
#define AD__NO_BIG_ALLOC 1 /* AddressSanitizer checks malloc'd memory only */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AD__NO_BIG_ALLOC 1
#endif
#endif

#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(AD__NO_BIG_ALLOC)
#define AD__MAPPED 1
#endif

/* The process-wide cache of mappings that tapes let go (ad_tape_destroy, an
 * array outgrown), kept for the tapes that come next: a process that records
 * one tape after another, or checks derivatives on tapes of their own, then
 * touches fresh memory once. Taken once per block or vector, under a spin
 * lock; a mapping is split when a smaller one is asked, and the rest stays. */
#define CACHE_SLOTS 512
#define CACHE_DEFAULT ((size_t)1 << 30)
typedef struct mapping {
  char *p;
  size_t len;
} mapping;
static mapping cache[CACHE_SLOTS];
static size_t cache_n, cache_bytes, cache_limit;
static int cache_configured;
static atomic_flag cache_busy = ATOMIC_FLAG_INIT;

static void cache_lock(void) {
  while (atomic_flag_test_and_set_explicit(&cache_busy, memory_order_acquire)) {
  }
}
static void cache_unlock(void) { atomic_flag_clear_explicit(&cache_busy, memory_order_release); }

/* ARIADNE_MEMORY_CACHE: bytes, with an optional K, M or G (binary). Under the lock. */
static void cache_configure(void) {
  if (cache_configured) return;
  cache_configured = 1;
  cache_limit = CACHE_DEFAULT;
  const char *e = getenv("ARIADNE_MEMORY_CACHE");
  if (!e || !*e) return;
  char *end;
  unsigned long long v = strtoull(e, &end, 10);
  unsigned shift = *end == 'K' || *end == 'k'   ? 10
                   : *end == 'M' || *end == 'm' ? 20
                   : *end == 'G' || *end == 'g' ? 30
                                                : 0;
  if (end == e || (shift && end[1]) || (!shift && *end) || v > (unsigned long long)(SIZE_MAX >> shift)) {
    fprintf(stderr,
            "ariadne: ARIADNE_MEMORY_CACHE=%s is not a size (bytes, with an optional K, M or G); the limit stays "
            "1 GiB\n",
            e);
    return;
  }
  cache_limit = (size_t)v << shift;
}

#ifdef AD__MAPPED
/* Take a cached mapping of len bytes (the smallest that fits), or NULL. */
static void *cache_take(size_t len) {
  cache_lock();
  cache_configure();
  size_t best = cache_n;
  for (size_t i = 0; i < cache_n; i++)
    if (cache[i].len >= len && (best == cache_n || cache[i].len < cache[best].len)) best = i;
  char *p = NULL;
  if (best < cache_n) {
    p = cache[best].p;
    if (cache[best].len > len) {
      cache[best].p += len; /* the rest stays, on huge-page bounds */
      cache[best].len -= len;
    } else {
      cache[best] = cache[--cache_n];
    }
    cache_bytes -= len;
  }
  cache_unlock();
  return p;
}

/* Keep a mapping if the limit allows; 1 if kept. */
static int cache_put(char *p, size_t len) {
  cache_lock();
  cache_configure();
  int kept = cache_n < CACHE_SLOTS && len <= cache_limit - cache_bytes; /* cache_bytes <= cache_limit */
  if (kept) {
    cache[cache_n].p = p;
    cache[cache_n].len = len;
    cache_n++;
    cache_bytes += len;
  }
  cache_unlock();
  return kept;
}
#endif

size_t ad_memory_cache_limit(size_t bytes) {
  mapping drop[CACHE_SLOTS];
  size_t nd = 0;
  cache_lock();
  cache_configure();
  size_t old = cache_limit;
  cache_limit = bytes;
  while (cache_bytes > cache_limit) { /* release the largest first */
    size_t big = 0;
    for (size_t i = 1; i < cache_n; i++)
      if (cache[i].len > cache[big].len) big = i;
    drop[nd++] = cache[big];
    cache_bytes -= cache[big].len;
    cache[big] = cache[--cache_n];
  }
  cache_unlock();
#ifdef AD__MAPPED
  for (size_t i = 0; i < nd; i++) munmap(drop[i].p, drop[i].len);
#else
  (void)drop;
#endif
  return old;
}

size_t ad_memory_cache_bytes(void) {
  cache_lock();
  size_t b = cache_bytes;
  cache_unlock();
  return b;
}

static void *big_alloc(size_t size) {
#ifdef AD__MAPPED
  if (size >= BIG_ALLOC) {
    size_t len = huge_round(size);
    void *c = cache_take(len);
    if (c) return c;
    /* Over-allocate by a huge page to align, and give back the slack. */
    char *m = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (a > m) munmap(m, (size_t)(a - m));
    if (a + len < m + len + HUGE_PAGE) munmap(a + len, (size_t)(m + len + HUGE_PAGE - (a + len)));
    madvise(a, len, MADV_HUGEPAGE);
    return a;
  }
#endif
  return malloc(size);
}

static void big_free(void *p, size_t size) {
  (void)size;
#ifdef AD__MAPPED
  if (size >= BIG_ALLOC) {
    size_t len = huge_round(size);
    if (!cache_put(p, len)) munmap(p, len);
    return;
  }
#endif
  free(p);
}

/* Each array is released by the counterpart of what allocated it: memory
 * from the user's .alloc goes to .free, or to free() when .free is NULL,
 * and never into the cache (its sizes are the sizes asked, not whole huge
 * pages); memory the library took itself (no .alloc) goes back to the
 * library, and .free never sees it. */
static void *opt_alloc(const ad_tape_options *o, size_t size) {
  return o->alloc ? o->alloc(size, o->alloc_ud) : big_alloc(size);
}
static void opt_free(const ad_tape_options *o, void *p, size_t size) {
  if (!o->alloc)
    big_free(p, size);
  else if (o->free)
    o->free(p, o->alloc_ud);
  else
    free(p);
}

void *ad__alloc(ad_tape *t, size_t size) {
  if (t->opt.memory_limit && (size > t->opt.memory_limit || t->bytes_alloc > t->opt.memory_limit - size)) {
    ad__fail(t, AD_ERR_NOMEM,
             "tape memory limit of %zu bytes reached: %zu bytes allocated (%zu of them recorded data, %zu "
             "adjoint and tangent vectors), %zu more asked",
             t->opt.memory_limit, t->bytes_alloc, bytes_recorded(t), (t->adj_cap + t->tan_cap) * sizeof(double), size);
    return NULL;
  }
  void *p = opt_alloc(&t->opt, size);
  if (!p) {
    ad__fail(t, AD_ERR_NOMEM, "allocation of %zu bytes failed (%zu in use)", size, t->bytes_alloc);
    return NULL;
  }
  t->bytes_alloc += size;
  if (t->bytes_alloc > t->bytes_peak) t->bytes_peak = t->bytes_alloc;
  return p;
}

void ad__each(void (*fn)(void *), size_t n, void *const *blocks) {
  for (size_t i = 0; i < n; i++) fn(blocks[i]);
}

void ad__free(ad_tape *t, void *p, size_t size) {
  if (!p) return;
  t->bytes_alloc -= size;
  opt_free(&t->opt, p, size);
}

/* Grow by allocate-copy-free rather than realloc so that every byte goes
 * through the tape's allocator and limit, and a failure leaves *arr intact.
 * ad__grow_to sets the capacity exactly; ad__grow doubles. */
int ad__grow_to(ad_tape *t, void **arr, size_t *cap, size_t ncap, size_t elem) {
  if (ncap <= *cap) return AD_OK;
  if (ncap > SIZE_MAX / elem) {
    ad__fail(t, AD_ERR_NOMEM, "array of %zu elements is too large", ncap);
    return AD_ERR_NOMEM;
  }
  void *p = ad__alloc(t, ncap * elem);
  if (!p) return AD_ERR_NOMEM;
  if (*cap) memcpy(p, *arr, *cap * elem);
  memset((char *)p + *cap * elem, 0, (ncap - *cap) * elem);
  ad__free(t, *arr, *cap * elem);
  *arr = p;
  *cap = ncap;
  return AD_OK;
}

int ad__grow(ad_tape *t, void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return AD_OK;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) ncap = ncap < SIZE_MAX / 2 ? ncap * 2 : need;
  return ad__grow_to(t, arr, cap, ncap, elem);
}

static size_t block_bytes(uint32_t ns, uint32_t na, uint32_t np) {
  return sizeof(ad__block) + (size_t)np * sizeof(double) + (size_t)na * sizeof(ad_index) + ns;
}

/* The smallest block: room for any one statement (a fused statement takes up
 * to AD__MAX_ARGS arguments plus a link to the previous one). */
#define BLOCK_FLOOR 64u

static ad__block *block_alloc(ad_tape *t, uint32_t ns, uint32_t na, uint32_t np) {
  ad__block *b = ad__alloc(t, block_bytes(ns, na, np));
  if (!b) return NULL;
  memset(b, 0, sizeof *b);
  b->ns_alloc = ns;
  b->na_alloc = na;
  b->np_alloc = np;
  b->par = (double *)(b + 1);
  b->idx = (ad_index *)(b->par + np);
  b->cnt = (uint8_t *)(b->idx + na);
  b->id = t->nblocks++;
  return b;
}

/* A new block after `full`, which the recording has just filled. The first
 * block has the sizes of the options (room for 4 arguments with partials per
 * statement by default); later ones take the arguments per statement and the
 * partials per argument that `full` actually used, with an eighth to spare,
 * so that what a tape reserves stays close to what it records. Under a
 * memory limit the block shrinks to what the limit leaves, so that a
 * recording can fill the limit with data. */
static ad__block *block_new(ad_tape *t, const ad__block *full) {
  uint64_t ns = t->opt.block_statements, na = t->opt.block_arguments;
  if (!ns)
    ns =
        full ? (full->ns_alloc < AUTO_BLOCK_MAX / 2 ? 2 * (uint64_t)full->ns_alloc : AUTO_BLOCK_MAX) : AUTO_BLOCK_FIRST;
  if (!na) na = 4 * ns;
  uint64_t np = na;
  if (full && full->ns >= 256) {
    uint64_t a = (uint64_t)full->na * ns / full->ns;
    a += a / 8 + BLOCK_FLOOR;
    uint64_t p = full->na ? (uint64_t)full->np * a / full->na : 0;
    p += p / 8 + BLOCK_FLOOR;
    na = a < (uint64_t)AD__MAX_ARGS * ns ? a : (uint64_t)AD__MAX_ARGS * ns;
    if (na > UINT32_MAX / 2) na = UINT32_MAX / 2;
    np = p < na ? p : na;
  }
  size_t limit = t->opt.memory_limit;
  size_t want = block_bytes((uint32_t)ns, (uint32_t)na, (uint32_t)np);
  if (limit && (t->bytes_alloc > limit || want > limit - t->bytes_alloc)) {
    size_t avail = t->bytes_alloc < limit ? limit - t->bytes_alloc : 0;
    size_t fixed = sizeof(ad__block);
    double f = avail > fixed ? (double)(avail - fixed) / (double)(want - fixed) : 0.0;
    uint64_t ns2 = (uint64_t)((double)ns * f), na2 = (uint64_t)((double)na * f), np2 = (uint64_t)((double)np * f);
    if (ns2 >= BLOCK_FLOOR && na2 >= BLOCK_FLOOR && np2 >= BLOCK_FLOOR) {
      ns = ns2;
      na = na2;
      np = np2;
    }
    /* else: too little is left for a block; the allocation fails below with the limit's message */
  } else if (!t->opt.alloc && want >= BIG_ALLOC && (want & (HUGE_PAGE - 1))) {
    /* A block from big_alloc occupies whole huge pages: make it fill them. */
    size_t len = huge_round(want);
    double f = (double)(len - sizeof(ad__block)) / (double)(want - sizeof(ad__block));
    uint64_t ns2 = (uint64_t)((double)ns * f), na2 = (uint64_t)((double)na * f), np2 = (uint64_t)((double)np * f);
    if (na2 <= UINT32_MAX / 2 && ns2 <= UINT32_MAX / 2 &&
        block_bytes((uint32_t)ns2, (uint32_t)na2, (uint32_t)np2) <= len) {
      ns = ns2;
      na = na2;
      np = np2;
    }
  }
  return block_alloc(t, (uint32_t)ns, (uint32_t)na, (uint32_t)np);
}

/* Point the recorder at block b, whose first statement follows handle `base`.
 * The statement capacity is cut so that the index limit is hit exactly at a
 * block's end, where the slow path checks it. */
static void recorder_enter(ad_tape *t, ad__block *b, uint32_t ns, uint32_t na, uint32_t np) {
  ad__recorder *R = &t->rec;
  t->cur = b;
  R->cnt = b->cnt;
  R->idx = b->idx;
  R->par = b->par;
  R->ns = ns;
  R->na = na;
  R->np = np;
  R->na_cap = b->na_alloc;
  R->np_cap = b->np_alloc;
  R->stream = b->before >= AD__STREAM_AFTER;
  ad__recorder_arm(t);
}

/* Statement capacity of the current block, cut so that the index limit is
 * hit exactly at a block's end, where the slow path checks it; 0 while the
 * tape does not record, so the fast path's capacity test catches that too. */
void ad__recorder_arm(ad_tape *t) {
  ad__recorder *R = &t->rec;
  if (!R->active) {
    R->ns_cap = 0;
    R->lim = 0;
    return;
  }
  uint64_t room = t->index_limit - (uint64_t)R->next; /* statements left in index space */
  uint64_t cap = (uint64_t)R->ns + room;
  R->ns_cap = cap < t->cur->ns_alloc ? (uint32_t)cap : t->cur->ns_alloc;
  ad__recorder_lim(R);
}

/* Open the next block (a kept spare if there is one). */
static int block_advance(ad_tape *t) {
  ad__sync(t);
  ad__block *b = t->cur->next;
  if (!b) {
    b = block_new(t, t->cur);
    if (!b) return 0;
    b->prev = t->cur;
    t->cur->next = b;
  }
  b->base = t->rec.next;
  b->before = t->cur->before + block_bytes(t->cur->ns, t->cur->na, t->cur->np);
  b->ns = b->na = b->np = 0;
  recorder_enter(t, b, 0, 0, 0);
  return 1;
}

int ad__need(ad__recorder *R, uint32_t nargs, const ad_real *args, const char *op) {
  if (!R->active) return 0;
  ad_tape *t = ad__tape_of(R);
  ad__region_flush(t); /* new inputs, fused statements inside a region */
  for (uint32_t k = 0; args && k < nargs; k++) {
    if (args[k].i != 0 && !ad__handle_live(t, args[k].i, args[k].e)) {
      if (t->err == AD_OK) {
        t->stale_i = args[k].i;
        t->stale_e = args[k].e;
      }
      ad__fail(t, AD_ERR_STALE_HANDLE,
               "%s: argument %u has handle %llu of recording %u, %s (this tape is recording %u)", op, k + 1,
               (unsigned long long)args[k].i, args[k].e, ad__stale_reason(t, args[k].i, args[k].e), R->epoch);
      return 0;
    }
  }
  if (R->ns < R->ns_cap && R->na + nargs <= R->na_cap && R->np + nargs <= R->np_cap) {
    ad__recorder_lim(R);
    return 1;
  }
  if ((uint64_t)R->next >= t->index_limit) {
    ad__fail(t, AD_ERR_INDEX_OVERFLOW, "%s: the tape has issued %llu handles, its index limit", op,
             (unsigned long long)R->next);
    return 0;
  }
  if (!block_advance(t)) return 0;
  ad__recorder_lim(R);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Creation, begin/end, reset                                                */
/* ------------------------------------------------------------------------ */

void ad_tape_options_default(ad_tape_options *o) {
  memset(o, 0, sizeof *o);
  o->block_statements = 0; /* automatic */
  o->block_arguments = 0;
}

ad_tape *ad_tape_create(void) { return ad_tape_create_with(NULL); }

ad_tape *ad_tape_create_with(const ad_tape_options *opts) {
  ad_tape_options o;
  if (opts)
    o = *opts;
  else
    ad_tape_options_default(&o);
  if (o.block_statements && o.block_statements < MIN_BLOCK) o.block_statements = MIN_BLOCK;
  if (o.block_arguments && o.block_arguments < MIN_BLOCK) o.block_arguments = MIN_BLOCK;
  uint64_t max_index = (uint64_t)AD_INDEX_MAX - 1; /* keep AD_INDEX_MAX unissued: no wrap anywhere */
  if (o.index_limit == 0 || o.index_limit > max_index) o.index_limit = max_index;
  ad_tape *t = o.alloc ? o.alloc(sizeof *t, o.alloc_ud) : malloc(sizeof *t); /* small: malloc, not big_alloc */
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  t->opt = o;
  t->index_limit = o.index_limit;
  t->bytes_alloc = t->bytes_peak = sizeof *t;
  t->head = block_new(t, NULL);
  if (!t->head) {
    opt_free(&o, t, sizeof *t);
    return NULL;
  }
  t->rec.epoch = new_epoch();
  recorder_enter(t, t->head, 0, 0, 0);
  ad__watch_init(t);
  return t;
}

static void records_clear(ad_tape *t, size_t keep) {
  for (size_t k = t->nrec; k-- > keep;) {
    ad__record *r = &t->recs[k];
    if (r->ops->destroy) r->ops->destroy(r->data);
    t->rec_bytes -= r->bytes;
  }
  t->nrec = keep;
}

/* The extension's state describes one recording (the MPI layer: whom it
 * communicated with): a reset or destroyed tape lets go of it, and a reset
 * tape counts as communicating again only once its new recording does. */
static void ext_detach(ad_tape *t) {
  if (t->ext_ops && t->ext_ops->destroy) t->ext_ops->destroy(t->ext_ctx);
  t->ext_ops = NULL;
  t->ext_ctx = NULL;
}

void ad_tape_destroy(ad_tape *t) {
  if (!t) return;
  if (t->recording) ad_tape_end(t);
  records_clear(t, 0);
  ext_detach(t);
  ad__free(t, t->recs, t->caprec * sizeof *t->recs);
  ad__free(t, t->hist, t->caphist * sizeof *t->hist);
  ad__free(t, t->adj, t->adj_cap * sizeof(double));
  ad__free(t, t->tan, t->tan_cap * sizeof(double));
  ad__free(t, t->sc_idx, t->sc_idx_cap * sizeof(ad_index));
  ad__free(t, t->sc_par, t->sc_par_cap * sizeof(double));
  ad__free(t, t->sc_cnt, t->sc_cnt_cap * sizeof(size_t));
  ad__free(t, t->loc, t->loc_cap * sizeof(double));
  ad__watch_free(t);
  if (t->rec.fwd_rows)
    ad__free(t, t->rec.fwd_rows, (AD__FWD_FIRST + (size_t)t->rec.fwd_cap) * AD__FWD_INPUTS * sizeof(double));
  for (ad__block *b = t->head, *n; b; b = n) {
    n = b->next;
    ad__free(t, b, block_bytes(b->ns_alloc, b->na_alloc, b->np_alloc));
  }
  ad_tape_options o = t->opt;
  opt_free(&o, t, sizeof *t);
}

void ad_tape_begin(ad_tape *t) {
  if (!t) {
    ad__fail_notape(AD_ERR_ARG, "ad_tape_begin: tape is NULL");
    return;
  }
  if (t->recording) return;
  t->prev_rec = ad__rec;
  t->prev_tape = current_tape;
  t->recording = 1;
  t->rec.active = (t->err == AD_OK);
  ad__recorder_arm(t);
  ad__rec = &t->rec;
  current_tape = t;
}

/* Tapes that record on a thread form a stack through prev_tape, the current
 * one on top. Ending a tape takes it out of the stack wherever it is, so that
 * no tape (and no recorder) left current refers to a tape that was ended and
 * may be destroyed. */
void ad_tape_end(ad_tape *t) {
  if (!t || !t->recording) return;
  ad__stream_fence();
  ad__region_flush(t); /* the region is left as recorded */
  /* ... and forgets the tape, which may be destroyed before the region ends. */
  if (ad__reg.rec == &t->rec) ad__reg.rec = NULL;
  t->recording = 0;
  t->rec.active = 0;
  ad__recorder_arm(t);
  if (current_tape == t) {
    ad__rec = t->prev_rec ? t->prev_rec : &idle_recorder;
    current_tape = t->prev_tape;
  } else {
    for (ad_tape *u = current_tape; u; u = u->prev_tape) {
      if (u->prev_tape == t) {
        u->prev_tape = t->prev_tape;
        u->prev_rec = t->prev_rec;
        break;
      }
    }
  }
  t->prev_rec = NULL;
  t->prev_tape = NULL;
}

static int64_t agree_identity(int64_t v) { return v; }
static int rank_zero(void) { return 0; }
int (*ad__process_rank)(void) = rank_zero;
int64_t (*ad__agree_min)(int64_t v) = agree_identity;
const ad__loop_comm_ops *ad__loop_comm;

ad__suspended ad__suspend(void) {
  ad__suspended s = {ad__rec, current_tape};
  ad__rec = &idle_recorder;
  current_tape = NULL;
  return s;
}

void ad__resume(ad__suspended s) {
  ad__rec = s.rec;
  current_tape = s.tape;
}

int ad_tape_is_recording(const ad_tape *t) { return t && t->recording && current_tape == t; }
ad_tape *ad_tape_current(void) { return current_tape; }

void ad_tape_reset(ad_tape *t) {
  if (!t) return;
  records_clear(t, 0);
  ext_detach(t);
  size_t used = ad__span(t);
  if (t->adj) t->adj_dirty = ad__max_size(t->adj_dirty, used < t->adj_cap ? used : t->adj_cap);
  if (t->tan) t->tan_dirty = ad__max_size(t->tan_dirty, used < t->tan_cap ? used : t->tan_cap);
  t->err = t->pending = AD_OK;
  t->stale_i = 0;
  t->stale_e = 0;
  t->msg[0] = t->pmsg[0] = '\0';
  t->loop_comm = 0;
  t->rec.fwd = 0; /* a region open across the reset is ended by the new epoch */
  t->rec.next = 0;
  t->rec.records = 0;
  t->rec.epoch = new_epoch();
  t->nhist = 0;
  t->epoch_start = 0;
  t->hwm = 0;
  t->pos_in_region = 0;
  t->rec.active = t->recording;
  t->head->base = 0;
  t->head->ns = t->head->na = t->head->np = 0;
  recorder_enter(t, t->head, 0, 0, 0);
  ad__watch_reset(t); /* a failed recording turned the watch off */
}

void ad_tape_set_memory_limit(ad_tape *t, size_t bytes) {
  if (t) t->opt.memory_limit = bytes;
}

/* ------------------------------------------------------------------------ */
/* Positions                                                                 */
/* ------------------------------------------------------------------------ */

ad_tape_pos ad_tape_position(const ad_tape *t) {
  ad_tape_pos p;
  memset(&p, 0, sizeof p);
  if (!t) return p;
  /* A position inside a region is a position on its recorded statements. */
  ad__region_flush((ad_tape *)(uintptr_t)t);
  if (ad__reg.depth > 0 && ad__reg.rec == &t->rec) ((ad_tape *)(uintptr_t)t)->pos_in_region = 1;
  p.index = t->rec.next;
  p.records = t->nrec;
  p.block = t->cur->id;
  p.ns = t->rec.ns;
  p.na = t->rec.na;
  p.np = t->rec.np;
  p.epoch = t->rec.epoch;
  return p;
}

/* The lineage entry of epoch e, or NULL. */
static const ad__lineage *lineage_of(const ad_tape *t, uint32_t e) {
  for (size_t k = t->nhist; k-- > 0;)
    if (t->hist[k].epoch == e) return &t->hist[k];
  return NULL;
}

int ad__handle_live(const ad_tape *t, ad_index i, uint32_t e) {
  /* A value of a region that propagates forward, handed to a call that reads
   * handles (drivers, external functions, checkpointing): record the region. */
  if (AD__UNLIKELY(t->rec.fwd & AD__FWD_REGION) && e == t->rec.epoch && i > t->rec.next)
    ad__region_spill((ad_tape *)(uintptr_t)t);
  if (e == t->rec.epoch) return i <= t->rec.next;
  const ad__lineage *l = lineage_of(t, e);
  return l && i > l->start && i <= l->cut;
}

const char *ad__stale_reason(const ad_tape *t, ad_index i, uint32_t e) {
  if ((e == t->rec.epoch && i > t->rec.next) || lineage_of(t, e))
    return "discarded by ad_tape_reset_to (or by the preaccumulation region it was computed in)";
  return "from another tape, or from before ad_tape_reset";
}

int ad__pos_check(ad_tape *t, ad_tape_pos p, const char *fn) {
  char why[320];
  why[0] = '\0';
  /* The start of the tape is a position of every recording. */
  int live = (p.index == 0 && p.records == 0 && p.block == 0 && p.ns == 0 && p.na == 0 && p.np == 0) ||
             (p.epoch == t->rec.epoch && p.index <= t->rec.next);
  if (!live && p.epoch != t->rec.epoch) {
    const ad__lineage *l = lineage_of(t, p.epoch);
    live = l && p.index >= l->start && p.index <= l->cut;
  }
  if (!live) {
    snprintf(why, sizeof why,
             "%s: the position (handle %llu, recording %u) is not on this tape's recording: it was taken on another "
             "tape, before ad_tape_reset, in a part discarded by ad_tape_reset_to, or inside a preaccumulation region "
             "that has ended",
             fn, (unsigned long long)p.index, p.epoch);
  } else if (p.index > t->rec.next || p.records > t->nrec || p.block > t->cur->id) {
    snprintf(why, sizeof why, "%s: the position (handle %llu) lies beyond the tape's end (handle %llu)", fn,
             (unsigned long long)p.index, (unsigned long long)t->rec.next);
  } else {
    ad__block *b = t->cur;
    while (b->id != p.block) b = b->prev;
    if (p.ns > (b == t->cur ? t->rec.ns : b->ns) || (ad_index)(b->base + p.ns) != p.index ||
        p.na > (b == t->cur ? t->rec.na : b->na) || p.np > p.na)
      snprintf(why, sizeof why, "%s: the position does not belong to this recording", fn);
  }
  if (!why[0]) return AD_OK;
  ad__pending(t, AD_ERR_ARG, "%s", why);
  return AD_ERR_ARG;
}

void ad__rewind(ad_tape *t, ad_tape_pos p) {
  ad__block *b = t->cur;
  while (b->id != p.block) b = b->prev;
  records_clear(t, p.records);
  size_t span = ad__span(t);
  if (t->rec.next > t->hwm) t->hwm = t->rec.next;
  if (t->adj && t->adj_cap > p.index + 1) {
    size_t top = span < t->adj_cap ? span : t->adj_cap;
    memset(t->adj + p.index + 1, 0, (top - p.index - 1) * sizeof(double));
  }
  /* Tangents too: a new input that reuses a discarded input's handle must
   * not inherit its tangent seed. */
  if (t->tan && t->tan_cap > p.index + 1) {
    size_t top = span < t->tan_cap ? span : t->tan_cap;
    memset(t->tan + p.index + 1, 0, (top - p.index - 1) * sizeof(double));
  }
  t->rec.next = (ad_index)p.index;
  t->rec.records = p.records;
  recorder_enter(t, b, p.ns, p.na, p.np);
}

/* End the current epoch at a reset to position `cut`: the earlier epochs
 * keep their handles up to the cut, those with none left are dropped, and
 * the current epoch joins them. Stays within the lowest cuts seen, so that
 * repeated resets to one position keep the list short. */
static int lineage_cut(ad_tape *t, ad_index cut) {
  size_t n = 0;
  for (size_t k = 0; k < t->nhist; k++) {
    ad__lineage l = t->hist[k];
    if (l.cut > cut) l.cut = cut;
    if (l.cut > l.start) t->hist[n++] = l;
  }
  t->nhist = n;
  if (cut > t->epoch_start) {
    if (t->nhist == t->caphist) {
      void *a = t->hist;
      if (ad__grow(t, &a, &t->caphist, t->nhist + 1, sizeof *t->hist) != AD_OK) return AD_ERR_NOMEM;
      t->hist = a;
    }
    ad__lineage cur = {t->rec.epoch, t->epoch_start, cut};
    t->hist[t->nhist++] = cur;
  }
  t->rec.epoch = new_epoch();
  t->epoch_start = cut;
  return AD_OK;
}

int ad__region_discard(ad_tape *t, ad_index start) {
  if (!t->pos_in_region) return AD_OK;
  t->pos_in_region = 0;
  return lineage_cut(t, start);
}

int ad_tape_reset_to(ad_tape *t, ad_tape_pos p) {
  if (!t) return ad__arg_tape(t, "ad_tape_reset_to");
  ad__region_flush(t);
  int rc = ad__pos_check(t, p, "ad_tape_reset_to");
  if (rc != AD_OK) return rc;
  /* A region open across the reset is ended by the new epoch (ad_stmt_end
   * then leaves it as recorded). */
  if ((rc = lineage_cut(t, (ad_index)p.index)) != AD_OK) return rc;
  ad__rewind(t, p);
  t->hwm = 0; /* the discarded handles belong to the old epoch now */
  return AD_OK;
}

/* ------------------------------------------------------------------------ */
/* Inputs and records                                                        */
/* ------------------------------------------------------------------------ */

ad_real ad__new_input(ad_tape *t, double value) { return ad__new_value(t, value, NULL); }

ad_real ad__new_value(ad_tape *t, double value, const char *op) {
  ad_real r;
  r.v = value;
  r.i = 0;
  r.e = 0;
  ad__recorder *R = &t->rec;
  if (!ad__need(R, 0, NULL, op ? op : "ad_input")) return r;
  if (AD__UNLIKELY(R->fwd & AD__FWD_WATCH) && !ad__watch_input(t, value, op)) return r;
  R->cnt[R->ns++] = 0;
  r.i = ++R->next;
  r.e = R->epoch;
  ad__recorder_lim(R); /* a statement without arguments: keep the fast path's invariant */
  return r;
}

ad_real ad_input(double value) {
  ad_tape *t = current_tape;
  if (!t) {
    ad__fail_notape(AD_ERR_NO_TAPE, "ad_input(%g): no tape is recording on this thread; call ad_tape_begin first",
                    value);
    return ad__const(value);
  }
  return ad__new_value(t, value, "ad_input");
}

int ad__record_push(ad_tape *t, const ad__record_ops *ops, void *data, size_t bytes) {
  ad__region_flush(t);
  if (!t->rec.active) {
    if (ops->destroy) ops->destroy(data);
    return t->err != AD_OK ? t->err : AD_ERR_STATE;
  }
  if (t->nrec == t->caprec) {
    void *arr = t->recs;
    if (ad__grow(t, &arr, &t->caprec, t->nrec + 1, sizeof *t->recs) != AD_OK) {
      if (ops->destroy) ops->destroy(data);
      return AD_ERR_NOMEM;
    }
    t->recs = arr;
  }
  ad__record *r = &t->recs[t->nrec++];
  r->pos = t->rec.next;
  r->ops = ops;
  r->data = data;
  r->bytes = bytes;
  t->rec_bytes += bytes;
  if (ad__watching(t)) t->watch_rec = ops->name; /* the values entering next are its outputs */
  t->rec.records++;
  return AD_OK;
}

/* ------------------------------------------------------------------------ */
/* Adjoint and tangent vectors                                               */
/* ------------------------------------------------------------------------ */

/* The adjoint and tangent vectors grow to the exact size the recording
 * needs (they are sized after recording, so doubling would only waste). */
static int vector_ready(ad_tape *t, double **v, size_t *cap, size_t *dirty) {
  size_t need = ad__span(t);
  if (need > *cap) {
    void *a = *v;
    size_t c = *cap;
    size_t want = (need + 1023) & ~(size_t)1023;
    if (ad__grow_to(t, &a, &c, want, sizeof(double)) != AD_OK) return AD_ERR_NOMEM;
    *v = a;
    *cap = c;
  }
  if (*dirty) {
    memset(*v, 0, *dirty * sizeof(double));
    *dirty = 0;
  }
  return AD_OK;
}

int ad__adjoints_ready(ad_tape *t) { return vector_ready(t, &t->adj, &t->adj_cap, &t->adj_dirty); }
int ad__tangents_ready(ad_tape *t) { return vector_ready(t, &t->tan, &t->tan_cap, &t->tan_dirty); }

int ad__handle_check(const ad_tape *t, ad_real x) {
  if (x.i == 0) return 0;
  return ad__handle_live(t, x.i, x.e) ? 1 : -1;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

/* One byte per statement, a handle per argument, a double per stored
 * partial, and the special records. */
static size_t bytes_recorded(const ad_tape *t) {
  uint64_t args = 0, pars = 0;
  for (const ad__block *b = t->head; b; b = b->next) {
    args += b == t->cur ? t->rec.na : b->na;
    pars += b == t->cur ? t->rec.np : b->np;
    if (b == t->cur) break;
  }
  return (size_t)t->rec.next + (size_t)args * sizeof(ad_index) + (size_t)pars * sizeof(double) +
         t->nrec * sizeof(ad__record) + t->rec_bytes;
}

int ad_tape_stats(const ad_tape *t, ad_stats *s) {
  if (!t || !s) return !t ? ad__arg_tape(t, "ad_tape_stats") : ad__arg_error(t, "ad_tape_stats: out is NULL");
  memset(s, 0, sizeof *s);
  uint64_t args = 0;
  for (const ad__block *b = t->head; b; b = b->next) {
    args += b == t->cur ? t->rec.na : b->na;
    if (b == t->cur) break;
  }
  s->statements = t->rec.next;
  s->arguments = args;
  s->records = t->nrec;
  s->blocks = t->cur->id + 1;
  s->bytes_used = bytes_recorded(t);
  s->bytes_adjoints = (t->adj_cap + t->tan_cap) * sizeof(double);
  s->bytes_reserved = t->bytes_alloc - s->bytes_adjoints;
  s->bytes_peak = t->bytes_peak;
  return AD_OK;
}
