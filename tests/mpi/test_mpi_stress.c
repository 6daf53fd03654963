/* SPDX-License-Identifier: BSD-3-Clause */
/* Randomized stress test of the MPI layer.
 *
 * A seed (the same on every rank) generates a communication program of 20 to
 * 60 steps. Each step is one complete, matched communication pattern that
 * every rank derives from the step's own seed: point-to-point messages
 * between random pairs (blocking in a globally agreed order, sendrecv,
 * nonblocking with a random completion style, wildcard receives) or one
 * collective with random roots, counts, operations and in-place variants.
 * Between steps every rank mixes its state vector with nonlinear arithmetic.
 * The program is recorded and checked with the dot-product test, and a few
 * programs also with finite differences of the whole parallel program.
 * Steps also split the ranks into sub-communicators (freed after the
 * checks), and wildcard receives are mixed with receives from a source and
 * completed out of order. Every other program is also recorded with another
 * number of inputs and outputs on every rank for ad_jacobian, and every
 * fourth once more with one rank running out of tape memory: that sweep
 * fails everywhere, and the next program must be right. Every fourth is
 * also recorded two or three times, and the recordings are swept in orders
 * that differ between the ranks: each sweep is right everywhere or fails
 * everywhere.
 *
 * Deadlock freedom holds by construction: every message of a step is received
 * within that step; blocking messages are handled by every rank in the order
 * of the step's message list, so the lowest unfinished message always has
 * both of its ends ready; nonblocking steps post everything before completing
 * anything; tags are unique per step, so a receive from MPI_ANY_SOURCE can
 * never take a message of a later step from a rank that ran ahead, and a
 * receive with both wildcards is fenced by a barrier.
 *
 * ARIADNE_STRESS_SEEDS (count) and ARIADNE_STRESS_SEED0 (first seed) choose
 * the programs, ARIADNE_STRESS_VERBOSE prints each; a failure prints the seed
 * and the program so that it can be rerun alone. The programs depend on the
 * seed and the number of ranks only. (With other seeds than the fixed ones, a
 * finite-difference mismatch alone, with the dot-product test passing, can
 * also be a MIN or MAX step whose contributions nearly tie.) */
#include <stdint.h>

#include "mtest.h"

#define S 6 /* state values per rank: the program's inputs and outputs */
#define MAXSTEPS 60
#define TAG_TOKEN 32000 /* plain MPI "receive posted" notes before a ready send */

/* ------------------------------------------------------------------------ */
/* Random numbers: one stream per step shared by all ranks, one per rank     */
/* ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int rng_int(uint64_t *s, int n) { return n <= 1 ? 0 : (int)(rng_next(s) % (uint64_t)n); }

enum kind {
  K_BLOCKING,
  K_SENDRECV,
  K_NONBLOCKING,
  K_WILDCARD,
  K_BCAST,
  K_REDUCE,
  K_ALLREDUCE,
  K_GATHER,
  K_GATHERV,
  K_SCATTER,
  K_SCATTERV,
  K_ALLGATHER,
  K_ALLGATHERV,
  K_ALLTOALL,
  K_ALLTOALLV,
  K_SCAN,
  K_EXSCAN,
  K_RSB,
  K_BARRIER,
  K_SUBCOMM,
  K_NBCOLL,
  K_PERSIST,
  K_RMA,
  K_ALLTOALLW_GAPS,
  K_RMA_BARRIER,
  K_COUNT
};
static const char *kind_name[K_COUNT] = {"blocking",   "sendrecv",  "nonblocking",
                                         "wildcard",   "bcast",     "reduce",
                                         "allreduce",  "gather",    "gatherv",
                                         "scatter",    "scatterv",  "allgather",
                                         "allgatherv", "alltoall",  "alltoallv",
                                         "scan",       "exscan",    "reduce_scatter_block",
                                         "barrier",    "subcomm",   "nonblocking collectives",
                                         "persistent", "one-sided", "alltoallw gaps",
                                         "rma barrier"};
/* Point-to-point steps are drawn more often: they have the most variants. */
static const int kind_weight[K_COUNT] = {4, 3, 4, 3, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1};

typedef struct program {
  unsigned long long seed;
  int nsteps;
  int kind[MAXSTEPS];
  uint64_t sub[MAXSTEPS]; /* each step's own seed */
} program;

static void program_make(program *p, unsigned long long seed) {
  uint64_t g = seed * 0xD1B54A32D192ED03ull + 17;
  int wsum = 0;
  for (int k = 0; k < K_COUNT; k++) wsum += kind_weight[k];
  p->seed = seed;
  p->nsteps = 20 + rng_int(&g, MAXSTEPS - 20 + 1);
  for (int s = 0; s < p->nsteps; s++) {
    int w = rng_int(&g, wsum), k = 0;
    while (w >= kind_weight[k]) w -= kind_weight[k++];
    p->kind[s] = k;
    p->sub[s] = rng_next(&g);
  }
}

static void program_print(const program *p) {
  fprintf(stderr, "[%d] program of seed %llu (%d steps):", mt_rank, p->seed, p->nsteps);
  for (int s = 0; s < p->nsteps; s++) fprintf(stderr, " %s", kind_name[p->kind[s]]);
  fprintf(stderr, "\n");
}

/* ------------------------------------------------------------------------ */
/* Checked calls and shared helpers                                          */
/* ------------------------------------------------------------------------ */

static unsigned long long cur_seed;
static int cur_step;

#define CALL(expr)                                                                                                     \
  do {                                                                                                                 \
    int call_rc = (expr);                                                                                              \
    if (call_rc != MPI_SUCCESS) {                                                                                      \
      mt_errors++;                                                                                                     \
      fprintf(stderr, "[%d] seed %llu step %d: %s returned %d\n", mt_rank, cur_seed, cur_step, #expr, call_rc);        \
    }                                                                                                                  \
  } while (0)

/* Tags up to MPI_TAG_UB: of three consecutive steps the first takes small
 * tags, the second tags at MPI_TAG_UB and just below, the third tags drawn
 * from its own slice of the range in between (a twenty-second of it per
 * step, so that no two steps share a tag). A step's tags differ in sub
 * (below 4); in the middle slices they are 4 + sub above a multiple of 8,
 * so that they never meet TAG_TOKEN. */
static int tag_ub = 32767;
static int stress_tag(int step, int sub) {
  int j = 8 * (step / 3) + sub;
  if (step % 3 == 0) return 100 + j;
  if (step % 3 == 1) return tag_ub - j;
  uint64_t h = cur_seed * 0x9E3779B97F4A7C15ull + (uint64_t)step;
  int slice = tag_ub / 22;
  return slice * (1 + step / 3) + 8 * rng_int(&h, slice / 8 - 2) + 4 + sub;
}
#define TAG(step, sub) stress_tag(step, sub)

static ad_real *reals(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(ad_real)); }
static int *ints(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(int)); }

/* Mix received values into the state. The state's own part passes with a
 * gain near one and the received part through a bounded function, so that
 * neither the values nor the derivatives grow or fade over sixty steps. */
static void fold(ad_real *st, const ad_real *b, int n, int off) {
  for (int i = 0; i < n; i++) {
    int j = (off + i) % S;
    switch ((off + i) % 3) {
    case 0:
      st[j] = ad_add(ad_mul(0.7, st[j]), ad_mul(0.5, ad_sin(b[i])));
      break;
    case 1:
      st[j] = ad_add(ad_mul(st[j], ad_add(0.8, ad_mul(0.2, ad_tanh(b[i])))), ad_mul(0.3, ad_sin(ad_mul(2.0, b[i]))));
      break;
    default:
      st[j] = ad_add(st[j], ad_div(b[i], ad_add(1.0, ad_mul(b[i], b[i]))));
      break;
    }
  }
}

/* Local nonlinear arithmetic after every step, chosen per rank and slot. Each
 * map keeps most of its own slot (gain near one), mixes in the next slot, and
 * pulls large values back, for the same reason as in fold(). */
static void local_step(ad_real *st, uint64_t *mine) {
  ad_real nw[S];
  for (int j = 0; j < S; j++) {
    ad_real a = st[j], b = st[(j + 1) % S];
    switch (rng_int(mine, 6)) {
    case 0:
      nw[j] = ad_add(ad_mul(0.9, a), ad_mul(0.3, ad_sin(b)));
      break;
    case 1:
      nw[j] = ad_add(ad_mul(0.9, a), ad_mul(0.2, ad_tanh(ad_mul(a, b))));
      break;
    case 2:
      nw[j] = ad_add(ad_mul(a, ad_cos(ad_mul(0.3, b))), ad_mul(0.1, ad_sin(a)));
      break;
    case 3:
      nw[j] = ad_mul(1.5, ad_sin(ad_add(a, ad_mul(0.5, b))));
      break;
    case 4:
      nw[j] = ad_add(ad_sub(a, ad_div(ad_mul(0.2, ad_mul(a, ad_mul(a, a))), ad_add(1.0, ad_mul(a, a)))),
                     ad_mul(0.2, ad_atan(b)));
      break;
    default:
      nw[j] = ad_add(ad_mul(0.95, a), ad_sub(ad_mul(0.3, ad_exp(ad_neg(ad_mul(b, b)))), 0.1));
      break;
    }
  }
  for (int j = 0; j < S; j++) st[j] = nw[j];
}

/* Passive (MPI_INT) payloads travel with some messages; their values must
 * arrive exactly. */
static int passive_value(int step, int m, int i) { return 1000 * step + 10 * m + i; }

/* ------------------------------------------------------------------------ */
/* Point-to-point steps                                                      */
/* ------------------------------------------------------------------------ */

/* Blocking messages: every rank walks the step's message list in order and
 * does its part, so the lowest unfinished message always has both ends
 * ready, even for synchronous and ready sends. */
static void step_blocking(ad_real *st, uint64_t *g, int k) {
  if (mt_size < 2) return;
  int nmsg = 1 + rng_int(g, 2 * mt_size);
  for (int m = 0; m < nmsg; m++) {
    int src = rng_int(g, mt_size), dst = (src + 1 + rng_int(g, mt_size - 1)) % mt_size;
    int cnt = rng_int(g, S + 1), soff = rng_int(g, S - cnt + 1), roff = rng_int(g, S - cnt + 1);
    int mode = rng_int(g, 4), passive = rng_int(g, 6) == 0, direct = rng_int(g, 2), extra = rng_int(g, 2);
    int tag = TAG(k, rng_int(g, 3)); /* a few messages share a stream */
    if (direct && roff + cnt + extra > S) extra = 0;
    int rcount = cnt + extra;
    if (mt_rank == src) {
      if (mode == 3) CALL(MPI_Recv(NULL, 0, MPI_INT, dst, TAG_TOKEN, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      int iv[S];
      for (int i = 0; i < cnt; i++) iv[i] = passive_value(k, m, i);
      const void *buf = passive ? (const void *)iv : (const void *)&st[soff];
      MPI_Datatype ty = passive ? MPI_INT : AD_MPI_REAL;
      switch (mode) {
      case 0:
        CALL(ad_mpi_send(buf, cnt, ty, dst, tag, MPI_COMM_WORLD));
        break;
      case 1:
        CALL(ad_mpi_ssend(buf, cnt, ty, dst, tag, MPI_COMM_WORLD));
        break;
      case 2:
        CALL(ad_mpi_bsend(buf, cnt, ty, dst, tag, MPI_COMM_WORLD));
        break;
      default:
        CALL(ad_mpi_rsend(buf, cnt, ty, dst, tag, MPI_COMM_WORLD));
        break;
      }
    } else if (mt_rank == dst) {
      MPI_Status status;
      int got = -1;
      if (passive) {
        int iv[S + 1];
        if (mode == 3) {
          ad_mpi_request q = AD_MPI_REQUEST_NULL;
          CALL(ad_mpi_irecv(iv, rcount, MPI_INT, src, tag, MPI_COMM_WORLD, &q));
          CALL(MPI_Send(NULL, 0, MPI_INT, src, TAG_TOKEN, MPI_COMM_WORLD));
          CALL(ad_mpi_wait(&q, &status));
        } else {
          CALL(ad_mpi_recv(iv, rcount, MPI_INT, src, tag, MPI_COMM_WORLD, &status));
        }
        MPI_Get_count(&status, MPI_INT, &got);
        for (int i = 0; i < cnt; i++) MT_CHECK(iv[i] == passive_value(k, m, i));
      } else {
        ad_real tmp[S + 1];
        ad_real *buf = direct ? &st[roff] : tmp;
        if (mode == 3) {
          ad_mpi_request q = AD_MPI_REQUEST_NULL;
          CALL(ad_mpi_irecv(buf, rcount, AD_MPI_REAL, src, tag, MPI_COMM_WORLD, &q));
          CALL(MPI_Send(NULL, 0, MPI_INT, src, TAG_TOKEN, MPI_COMM_WORLD));
          CALL(ad_mpi_wait(&q, &status));
        } else {
          CALL(ad_mpi_recv(buf, rcount, AD_MPI_REAL, src, tag, MPI_COMM_WORLD, &status));
        }
        MPI_Get_count(&status, AD_MPI_REAL, &got);
        if (!direct) fold(st, tmp, cnt, roff);
      }
      MT_CHECK(got == cnt);
      MT_CHECK(status.MPI_SOURCE == src && status.MPI_TAG == tag);
    }
  }
}

/* One sendrecv per rank: a periodic shift, random pairs, or a non-periodic
 * shift whose ends talk to MPI_PROC_NULL; sometimes sendrecv_replace straight
 * on the state, sometimes a receive count larger than the message, and
 * sometimes a wildcard on the source or on the tag (never both: that could
 * match a message of a later step). */
static void step_sendrecv(ad_real *st, uint64_t *g, int k) {
  int p = mt_size, variant = rng_int(g, 3), replace = rng_int(g, 3) == 0;
  int *dest = ints(p), *src = ints(p), *cnt = ints(p), *soff = ints(p), *perm = ints(p);
  if (variant == 0) {
    int s = rng_int(g, p);
    for (int r = 0; r < p; r++) {
      dest[r] = (r + s) % p;
      src[r] = (r - s + p) % p;
    }
  } else if (variant == 1) {
    for (int r = 0; r < p; r++) perm[r] = r;
    for (int r = p - 1; r > 0; r--) {
      int j = rng_int(g, r + 1), t = perm[r];
      perm[r] = perm[j];
      perm[j] = t;
    }
    for (int r = 0; r < p; r++) dest[r] = src[r] = MPI_PROC_NULL;
    for (int r = 0; r + 1 < p; r += 2) {
      dest[perm[r]] = src[perm[r]] = perm[r + 1];
      dest[perm[r + 1]] = src[perm[r + 1]] = perm[r];
    }
  } else {
    int s = 1 + rng_int(g, p > 1 ? p - 1 : 1);
    for (int r = 0; r < p; r++) {
      dest[r] = r + s < p ? r + s : MPI_PROC_NULL;
      src[r] = r - s >= 0 ? r - s : MPI_PROC_NULL;
    }
  }
  int common = rng_int(g, S + 1);
  for (int r = 0; r < p; r++) {
    cnt[r] = replace ? common : rng_int(g, S + 1);
    soff[r] = rng_int(g, S - cnt[r] + 1);
  }
  int extra = rng_int(g, 2), wild = rng_int(g, 4); /* 1: any source, 2: any tag */
  int tag = TAG(k, 0), me = mt_rank, from = src[me];
  int rsource = wild == 1 && from != MPI_PROC_NULL ? MPI_ANY_SOURCE : from;
  int rtag = wild == 2 ? MPI_ANY_TAG : tag;
  int expect = from == MPI_PROC_NULL ? 0 : cnt[from];
  MPI_Status status;
  int got = -1;
  if (replace) {
    CALL(ad_mpi_sendrecv_replace(&st[soff[me]], cnt[me], AD_MPI_REAL, dest[me], tag, rsource, rtag, MPI_COMM_WORLD,
                                 &status));
  } else {
    ad_real tmp[S + 1];
    CALL(ad_mpi_sendrecv(&st[soff[me]], cnt[me], AD_MPI_REAL, dest[me], tag, tmp, expect + extra, AD_MPI_REAL, rsource,
                         rtag, MPI_COMM_WORLD, &status));
    fold(st, tmp, expect, (soff[me] + 1) % S);
  }
  MPI_Get_count(&status, AD_MPI_REAL, &got);
  MT_CHECK(got == expect);
  MT_CHECK(status.MPI_SOURCE == from);
  free(dest);
  free(src);
  free(cnt);
  free(soff);
  free(perm);
}

typedef struct msg {
  int src, dst, cnt, soff, tag, passive;
} msg;

typedef struct op {
  int m, recv; /* message index; receive (1) or send (0) half */
  uint64_t key;
} op;

static int op_cmp(const void *a, const void *b) {
  const op *x = a, *y = b;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* Nonblocking messages, self-messages included: each rank posts its halves
 * in a random order of its own (keeping the order within each stream, as
 * MPI's matching needs) and completes them with a style of its own. */
static void step_nonblocking(ad_real *st, uint64_t *g, int k, uint64_t *mine) {
  int p = mt_size, me = mt_rank, nmsg = 1 + rng_int(g, 3 * p);
  msg *ms = calloc((size_t)nmsg, sizeof *ms);
  for (int m = 0; m < nmsg; m++) {
    ms[m].src = rng_int(g, p);
    ms[m].dst = rng_int(g, p);
    ms[m].cnt = rng_int(g, S + 1);
    ms[m].soff = rng_int(g, S - ms[m].cnt + 1);
    ms[m].tag = TAG(k, rng_int(g, 2));
    ms[m].passive = rng_int(g, 5) == 0;
  }
  op *ops = calloc((size_t)(2 * nmsg), sizeof *ops);
  int nops = 0;
  for (int m = 0; m < nmsg; m++) {
    if (ms[m].dst == me) ops[nops++] = (op){m, 1, rng_next(mine)};
    if (ms[m].src == me) ops[nops++] = (op){m, 0, rng_next(mine)};
  }
  /* Within a stream (same side, partner and tag) the halves must be posted
   * in list order: hand the stream's sorted keys out in list order. */
  for (int i = 0; i < nops; i++) {
    for (int j = i + 1; j < nops; j++) {
      const msg *a = &ms[ops[i].m], *b = &ms[ops[j].m];
      int same = ops[i].recv == ops[j].recv && a->tag == b->tag && (ops[i].recv ? a->src == b->src : a->dst == b->dst);
      if (same && ops[i].key > ops[j].key) {
        uint64_t t = ops[i].key;
        ops[i].key = ops[j].key;
        ops[j].key = t;
      }
    }
  }
  qsort(ops, (size_t)nops, sizeof *ops, op_cmp);
  ad_real *rbuf = reals(nmsg * S);
  int *ibuf = ints(nmsg * S), iv[S];
  for (int i = 0; i < S; i++) iv[i] = passive_value(k, me, i);
  ad_mpi_request *q = malloc(sizeof *q * (size_t)(nops + 1));
  MPI_Status *sts = malloc(sizeof *sts * (size_t)(nops + 1));
  for (int i = 0; i < nops; i++) {
    const msg *a = &ms[ops[i].m];
    q[i] = (ad_mpi_request)AD_MPI_REQUEST_NULL;
    if (ops[i].recv) {
      if (a->passive)
        CALL(ad_mpi_irecv(ibuf + ops[i].m * S, a->cnt, MPI_INT, a->src, a->tag, MPI_COMM_WORLD, &q[i]));
      else
        CALL(ad_mpi_irecv(rbuf + ops[i].m * S, a->cnt, AD_MPI_REAL, a->src, a->tag, MPI_COMM_WORLD, &q[i]));
    } else {
      if (a->passive)
        CALL(ad_mpi_isend(iv, a->cnt, MPI_INT, a->dst, a->tag, MPI_COMM_WORLD, &q[i]));
      else
        CALL(ad_mpi_isend(&st[a->soff], a->cnt, AD_MPI_REAL, a->dst, a->tag, MPI_COMM_WORLD, &q[i]));
    }
  }
  int style = rng_int(mine, 6), *done = ints(nops), left = nops, idx, flag;
  for (int i = 0; i < nops; i++) sts[i].MPI_SOURCE = -99;
  switch (style) {
  case 0:
    CALL(ad_mpi_waitall(nops, q, sts));
    break;
  case 1:
    while (left > 0) {
      MPI_Status s1;
      CALL(ad_mpi_waitany(nops, q, &idx, &s1));
      if (idx == MPI_UNDEFINED) break;
      sts[idx] = s1;
      left--;
    }
    break;
  case 2: { /* spin on ad_mpi_test, visiting the requests in a random order */
    /* How often this spins depends on timing: draw from a stream of its own,
     * so that the rest of the program stays the same in every run. */
    uint64_t spin = rng_next(mine);
    while (left > 0) {
      int i = rng_int(&spin, nops);
      if (done[i]) continue;
      CALL(ad_mpi_test(&q[i], &flag, &sts[i]));
      if (flag) {
        done[i] = 1;
        left--;
      }
    }
    break;
  }
  case 3: /* wait for each in a random order */
    for (int i = nops - 1; i >= 0; i--) {
      int j = rng_int(mine, i + 1);
      for (int l = 0; l < nops; l++)
        if (!done[l] && j-- == 0) {
          CALL(ad_mpi_wait(&q[l], &sts[l]));
          done[l] = 1;
          break;
        }
    }
    break;
  case 4:
    for (flag = 0; !flag;) CALL(ad_mpi_testall(nops, q, &flag, sts));
    break;
  default: /* a few single waits, then the rest (some now null) at once */
    for (int i = 0; i < nops; i++)
      if (rng_int(mine, 2)) CALL(ad_mpi_wait(&q[i], &sts[i]));
    {
      MPI_Status *rest = malloc(sizeof *rest * (size_t)(nops + 1));
      CALL(ad_mpi_waitall(nops, q, rest));
      for (int i = 0; i < nops; i++)
        if (sts[i].MPI_SOURCE == -99) sts[i] = rest[i];
      free(rest);
    }
    break;
  }
  for (int i = 0; i < nops; i++) {
    const msg *a = &ms[ops[i].m];
    if (!ops[i].recv) continue;
    int got = -1;
    MPI_Get_count(&sts[i], a->passive ? MPI_INT : AD_MPI_REAL, &got);
    MT_CHECK(got == a->cnt);
    MT_CHECK(sts[i].MPI_SOURCE == a->src);
    if (a->passive)
      for (int l = 0; l < a->cnt; l++) MT_CHECK(ibuf[ops[i].m * S + l] == passive_value(k, a->src, l));
  }
  /* Fold in message order, which every run shares, not completion order. */
  for (int m = 0; m < nmsg; m++)
    if (ms[m].dst == me && !ms[m].passive) fold(st, rbuf + m * S, ms[m].cnt, m % S);
  free(ms);
  free(ops);
  free(rbuf);
  free(ibuf);
  free(q);
  free(sts);
  free(done);
}

/* Nonblocking collectives, started in one order everywhere, with a ring of
 * point-to-point messages among them, completed in an order each rank draws
 * for itself (waitall, waits in a random order, testany, waitsome): the
 * reverse sweep must start the adjoint collectives in one order anyway. */
static void step_nbcoll(ad_real *st, uint64_t *g, int k, uint64_t *mine) {
  int p = mt_size, me = mt_rank, nc = 1 + rng_int(g, 3);
  ad_real *in = reals(nc * p * S), *out = reals(nc * p * S), ringv = ad_const(0.0);
  ad_mpi_request q[6];
  int kinds[3];
  for (int i = 0; i < 6; i++) q[i] = (ad_mpi_request)AD_MPI_REQUEST_NULL;
  for (int c = 0; c < nc; c++) {
    ad_real *a = in + c * p * S, *b = out + c * p * S;
    for (int j = 0; j < S; j++) a[j] = ad_mul(st[(j + c) % S], 0.5 + 0.1 * c);
    kinds[c] = rng_int(g, 6);
    switch (kinds[c]) {
    case 0:
      CALL(ad_mpi_iallreduce(a, b, S, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[c]));
      break;
    case 1:
      CALL(ad_mpi_iallreduce(a, b, S, AD_MPI_REAL, MPI_MAX, MPI_COMM_WORLD, &q[c]));
      break;
    case 2:
      for (int j = 0; j < S; j++) b[j] = a[j];
      CALL(ad_mpi_ibcast(b, S, AD_MPI_REAL, rng_int(g, p), MPI_COMM_WORLD, &q[c]));
      break;
    case 3:
      CALL(ad_mpi_iallgather(a, 1, AD_MPI_REAL, b, 1, AD_MPI_REAL, MPI_COMM_WORLD, &q[c]));
      break;
    case 4:
      CALL(ad_mpi_ialltoall(a, 1, AD_MPI_REAL, b, 1, AD_MPI_REAL, MPI_COMM_WORLD, &q[c]));
      break;
    default:
      CALL(ad_mpi_iscan(a, b, S, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[c]));
      break;
    }
  }
  int right = (me + 1) % p, left = (me + p - 1) % p;
  CALL(ad_mpi_irecv(&ringv, 1, AD_MPI_REAL, left, TAG(k, 0), MPI_COMM_WORLD, &q[nc]));
  CALL(ad_mpi_isend(&st[0], 1, AD_MPI_REAL, right, TAG(k, 0), MPI_COMM_WORLD, &q[nc + 1]));
  int n = nc + 2, style = rng_int(mine, 4), left_n = n, idx, outc, ids[6], flag;
  switch (style) {
  case 0:
    CALL(ad_mpi_waitall(n, q, MPI_STATUSES_IGNORE));
    break;
  case 1: /* single waits in a random order */
    for (int i = n - 1; i >= 0; i--) {
      int j = rng_int(mine, n);
      while (q[j].slot < 0 && q[j].mpi == MPI_REQUEST_NULL) j = (j + 1) % n;
      CALL(ad_mpi_wait(&q[j], MPI_STATUS_IGNORE));
    }
    break;
  case 2: /* testany until everything is done */
    while (left_n > 0) {
      CALL(ad_mpi_testany(n, q, &idx, &flag, MPI_STATUS_IGNORE));
      if (flag && idx != MPI_UNDEFINED) left_n--;
      if (flag && idx == MPI_UNDEFINED) break;
    }
    break;
  default:
    while (left_n > 0) {
      CALL(ad_mpi_waitsome(n, q, &outc, ids, MPI_STATUSES_IGNORE));
      if (outc == MPI_UNDEFINED) break;
      left_n -= outc;
    }
    break;
  }
  for (int c = 0; c < nc; c++) fold(st, out + c * p * S, kinds[c] == 3 || kinds[c] == 4 ? (p < S ? p : S) : S, c);
  fold(st, &ringv, 1, (k + 1) % S);
  free(in);
  free(out);
}

/* A persistent ring exchange, set up once and started a few times, each
 * start's values folded in before the next. */
static void step_persist(ad_real *st, uint64_t *g, int k) {
  int p = mt_size, me = mt_rank, reps = 1 + rng_int(g, 3), cnt = 1 + rng_int(g, S);
  int right = (me + 1) % p, left = (me + p - 1) % p;
  ad_real sbuf[S], rbuf[S];
  ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
  CALL(ad_mpi_recv_init(rbuf, cnt, AD_MPI_REAL, left, TAG(k, 1), MPI_COMM_WORLD, &q[0]));
  CALL(ad_mpi_send_init(sbuf, cnt, AD_MPI_REAL, right, TAG(k, 1), MPI_COMM_WORLD, &q[1]));
  for (int r = 0; r < reps; r++) {
    for (int j = 0; j < cnt; j++) sbuf[j] = st[(j + r) % S];
    CALL(ad_mpi_startall(2, q));
    CALL(ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE));
    fold(st, rbuf, cnt, r % S);
  }
  CALL(ad_mpi_request_free(&q[0]));
  CALL(ad_mpi_request_free(&q[1]));
}

/* One-sided: a window of p + 1 elements per rank, made and freed in the
 * step, synchronised by fences, by lock epochs (exclusive or shared), or by
 * one lock_all epoch with flushes. Every rank stores into its own part, puts
 * a value into element 1 + me of a random rank and adds one into element 0
 * of another; after the synchronisation it reads its part and fetches one
 * element of a third rank. Nothing conflicts, so the values do not depend
 * on the order in which MPI applies the operations. */
static void step_rma(ad_real *st, uint64_t *g, int k) {
  (void)k;
  int p = mt_size, me = mt_rank, sync = rng_int(g, 3), excl = rng_int(g, 2), n = p + 1 + ((p + 1) & 1);
  int *tput = ints(p), *tacc = ints(p), *tget = ints(p), *eget = ints(p);
  for (int r = 0; r < p; r++) {
    tput[r] = rng_int(g, p);
    tacc[r] = rng_int(g, p);
    tget[r] = rng_int(g, p);
    eget[r] = rng_int(g, p + 1);
  }
  ad_real *u = NULL, got, v[2] = {ad_sin(st[0]), ad_mul(st[1], st[2])};
  MPI_Win win;
  CALL(ad_mpi_win_allocate((MPI_Aint)n * (MPI_Aint)sizeof(ad_real), (int)sizeof(ad_real), MPI_INFO_NULL, MPI_COMM_WORLD,
                           &u, &win));
  if (sync == 0) {
    for (int j = 0; j < n; j++) u[j] = ad_mul(st[(j + 3) % S], 0.5);
    CALL(ad_mpi_win_fence(0, win));
    CALL(ad_mpi_put(&v[0], 1, AD_MPI_REAL, tput[me], 1 + me, 1, AD_MPI_REAL, win));
    CALL(ad_mpi_accumulate(&v[1], 1, AD_MPI_REAL, tacc[me], 0, 1, AD_MPI_REAL, MPI_SUM, win));
    CALL(ad_mpi_win_fence(0, win));
    CALL(ad_mpi_get(&got, 1, AD_MPI_REAL, tget[me], eget[me], 1, AD_MPI_REAL, win));
    CALL(ad_mpi_win_fence(MPI_MODE_NOSUCCEED, win));
  } else if (sync == 1) {
    CALL(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    for (int j = 0; j < n; j++) u[j] = ad_mul(st[(j + 3) % S], 0.5);
    CALL(ad_mpi_win_unlock(me, win));
    CALL(ad_mpi_barrier(MPI_COMM_WORLD));
    CALL(ad_mpi_win_lock(excl ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, tput[me], 0, win));
    CALL(ad_mpi_put(&v[0], 1, AD_MPI_REAL, tput[me], 1 + me, 1, AD_MPI_REAL, win));
    CALL(ad_mpi_win_unlock(tput[me], win));
    CALL(ad_mpi_win_lock(excl ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, tacc[me], 0, win));
    CALL(ad_mpi_accumulate(&v[1], 1, AD_MPI_REAL, tacc[me], 0, 1, AD_MPI_REAL, MPI_SUM, win));
    CALL(ad_mpi_win_unlock(tacc[me], win));
    CALL(ad_mpi_barrier(MPI_COMM_WORLD));
    CALL(ad_mpi_win_lock(MPI_LOCK_SHARED, tget[me], 0, win));
    CALL(ad_mpi_get(&got, 1, AD_MPI_REAL, tget[me], eget[me], 1, AD_MPI_REAL, win));
    CALL(ad_mpi_win_unlock(tget[me], win));
    CALL(ad_mpi_win_lock(MPI_LOCK_SHARED, me, 0, win));
    CALL(ad_mpi_win_unlock(me, win));
  } else {
    CALL(ad_mpi_win_lock_all(0, win));
    for (int j = 0; j < n; j++) u[j] = ad_mul(st[(j + 3) % S], 0.5);
    CALL(ad_mpi_win_sync(win));
    CALL(ad_mpi_barrier(MPI_COMM_WORLD));
    CALL(ad_mpi_put(&v[0], 1, AD_MPI_REAL, tput[me], 1 + me, 1, AD_MPI_REAL, win));
    CALL(ad_mpi_accumulate(&v[1], 1, AD_MPI_REAL, tacc[me], 0, 1, AD_MPI_REAL, MPI_SUM, win));
    CALL(ad_mpi_win_flush_all(win));
    CALL(ad_mpi_barrier(MPI_COMM_WORLD));
    CALL(ad_mpi_get(&got, 1, AD_MPI_REAL, tget[me], eget[me], 1, AD_MPI_REAL, win));
    CALL(ad_mpi_win_flush(tget[me], win));
    CALL(ad_mpi_win_sync(win));
    CALL(ad_mpi_win_unlock_all(win));
  }
  ad_real b[4] = {got, u[0], u[1 + (me + 1) % p], u[1 + me]};
  CALL(ad_mpi_barrier(MPI_COMM_WORLD)); /* every get is done before the free */
  fold(st, b, 4, me % S);
  CALL(ad_mpi_win_free(&win));
  free(tput);
  free(tacc);
  free(tget);
  free(eget);
}

/* Alltoallw (blocking or not) or alltoallv with counts that differ per pair
 * of ranks, send slots at random displacements that may overlap (one value
 * sent to several ranks: its adjoints add up) and receive slots with gaps
 * in a buffer of passive values, all of which is folded into the state. */
static void step_alltoallw_gaps(ad_real *st, uint64_t *g) {
  int p = mt_size, me = mt_rank, form = rng_int(g, 3);
  int *m = ints(p * p), *sd = ints(p * p), *c = ints(p), *d = ints(p), *c2 = ints(p), *d2 = ints(p);
  int *db = ints(p), *db2 = ints(p);
  MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)p);
  for (int i = 0; i < p * p; i++) {
    m[i] = rng_int(g, 3);  /* m[a p + b]: what rank a sends to rank b */
    sd[i] = rng_int(g, 3); /* where rank a's slot for rank b starts */
  }
  int sext = 1, rext = 1;
  for (int r = 0; r < p; r++) {
    c[r] = m[me * p + r];
    d[r] = sd[me * p + r];
    c2[r] = m[r * p + me];
    if (d[r] + c[r] > sext) sext = d[r] + c[r];
    ty[r] = AD_MPI_REAL;
  }
  for (int r = 0, at = 0; r < p; r++) { /* a gap of one or two after every slot */
    d2[r] = at;
    at += c2[r] + 1 + rng_int(g, 2);
    rext = at;
  }
  for (int r = 0; r < p; r++) {
    db[r] = d[r] * (int)sizeof(ad_real);
    db2[r] = d2[r] * (int)sizeof(ad_real);
  }
  ad_real *a = reals(sext), *b = reals(rext);
  for (int i = 0; i < sext; i++) a[i] = ad_sin(ad_add(st[(i + me) % S], 0.1 * i));
  for (int i = 0; i < rext; i++) b[i] = ad_const(0.01 * (i + 1));
  if (form == 0) {
    CALL(ad_mpi_alltoallw(a, c, db, ty, b, c2, db2, ty, MPI_COMM_WORLD));
  } else if (form == 1) {
    ad_mpi_request q = AD_MPI_REQUEST_NULL;
    CALL(ad_mpi_ialltoallw(a, c, db, ty, b, c2, db2, ty, MPI_COMM_WORLD, &q));
    CALL(ad_mpi_wait(&q, MPI_STATUS_IGNORE));
  } else {
    CALL(ad_mpi_alltoallv(a, c, d, AD_MPI_REAL, b, c2, d2, AD_MPI_REAL, MPI_COMM_WORLD));
  }
  fold(st, b, rext, me);
  free(m);
  free(sd);
  free(c);
  free(d);
  free(c2);
  free(d2);
  free(db);
  free(db2);
  free(ty);
  free(a);
  free(b);
}

/* A passive-target epoch whose first synchronisation is a barrier: every
 * rank stores into its part of a fresh window without any lock, passes a
 * barrier (which must publish the stores), and gets an element of a random
 * rank under a shared lock. Sometimes each rank then puts into element
 * 1 + me of a random rank under an exclusive lock, overwriting a published
 * store (no conflict: a barrier lies between them), and after another
 * barrier every rank reads its own part. */
static void step_rma_barrier(ad_real *st, uint64_t *g) {
  int p = mt_size, me = mt_rank, n = p + 1 + ((p + 1) & 1), puts = rng_int(g, 2);
  int *tget = ints(p), *eget = ints(p), *tput = ints(p);
  for (int r = 0; r < p; r++) {
    tget[r] = rng_int(g, p);
    eget[r] = rng_int(g, n);
    tput[r] = rng_int(g, p);
  }
  ad_real *u = NULL, got, v = ad_cos(st[3]);
  MPI_Win win;
  CALL(ad_mpi_win_allocate((MPI_Aint)n * (MPI_Aint)sizeof(ad_real), (int)sizeof(ad_real), MPI_INFO_NULL, MPI_COMM_WORLD,
                           &u, &win));
  for (int j = 0; j < n; j++) u[j] = ad_mul(st[(j + me) % S], 0.6);
  CALL(ad_mpi_barrier(MPI_COMM_WORLD));
  CALL(ad_mpi_win_lock(MPI_LOCK_SHARED, tget[me], 0, win));
  CALL(ad_mpi_get(&got, 1, AD_MPI_REAL, tget[me], eget[me], 1, AD_MPI_REAL, win));
  CALL(ad_mpi_win_unlock(tget[me], win));
  if (puts) {
    CALL(ad_mpi_barrier(MPI_COMM_WORLD)); /* every get is done before a put */
    CALL(ad_mpi_win_lock(MPI_LOCK_EXCLUSIVE, tput[me], 0, win));
    CALL(ad_mpi_put(&v, 1, AD_MPI_REAL, tput[me], 1 + me, 1, AD_MPI_REAL, win));
    CALL(ad_mpi_win_unlock(tput[me], win));
  }
  CALL(ad_mpi_barrier(MPI_COMM_WORLD));
  ad_real b[3] = {got, u[0], u[1 + (me + 1) % p]};
  fold(st, b, 3, me % S);
  CALL(ad_mpi_win_free(&win));
  free(tget);
  free(eget);
  free(tput);
}

/* Fan-in to a random root that receives with MPI_ANY_SOURCE, knowing only how
 * many messages come: blocking receives, or irecvs completed by waitany, or
 * (fenced by a barrier, so no later message can be taken) MPI_ANY_SOURCE with
 * MPI_ANY_TAG. The root orders what it got by (source, arrival from that
 * source), which MPI's non-overtaking rule makes the same in every run. */
static void step_wildcard(ad_real *st, uint64_t *g, int k) {
  int p = mt_size, root = rng_int(g, p), variant = rng_int(g, 4);
  int *nsend = ints(p), *cnt = ints(2 * p), total = 0;
  for (int r = 0; r < p; r++) {
    nsend[r] = r == root ? 0 : rng_int(g, 3);
    for (int j = 0; j < 2; j++) cnt[2 * r + j] = rng_int(g, S + 1);
    total += nsend[r];
  }
  if (mt_rank == root) {
    ad_real *buf = reals(total * S);
    int *from = ints(total), *order = ints(total);
    MPI_Status *sts = malloc(sizeof *sts * (size_t)(total + 1));
    if (variant == 3) {
      /* Wildcard receives first, then receives from each source of what
       * the wildcards cannot have taken from it, then wildcards for the
       * rest; completed in a random order, later receives often first. */
      ad_mpi_request *q = malloc(sizeof *q * (size_t)(total + 1));
      int *src = ints(total), *perm = ints(total), front = rng_int(g, total + 1), np = 0;
      for (int i = 0; i < front; i++) src[np++] = MPI_ANY_SOURCE;
      for (int r = 0; r < p; r++)
        for (int j = 0; j < nsend[r] - front; j++) src[np++] = r;
      while (np < total) src[np++] = MPI_ANY_SOURCE;
      for (int i = 0; i < total; i++)
        CALL(ad_mpi_irecv(buf + i * S, S, AD_MPI_REAL, src[i], TAG(k, 0), MPI_COMM_WORLD, &q[i]));
      for (int i = 0; i < total; i++) perm[i] = total - 1 - i;
      for (int i = total - 1; i > 0; i--) {
        int j = rng_int(g, i + 1), t = perm[i];
        if (rng_int(g, 2)) {
          perm[i] = perm[j];
          perm[j] = t;
        }
      }
      for (int i = 0; i < total; i++) CALL(ad_mpi_wait(&q[perm[i]], &sts[perm[i]]));
      free(src);
      free(perm);
      free(q);
    } else if (variant == 1) {
      ad_mpi_request *q = malloc(sizeof *q * (size_t)(total + 1));
      for (int i = 0; i < total; i++)
        CALL(ad_mpi_irecv(buf + i * S, S, AD_MPI_REAL, MPI_ANY_SOURCE, TAG(k, 0), MPI_COMM_WORLD, &q[i]));
      for (int d = 0; d < total; d++) {
        int idx;
        MPI_Status s1;
        CALL(ad_mpi_waitany(total, q, &idx, &s1));
        if (idx != MPI_UNDEFINED) sts[idx] = s1;
      }
      free(q);
    } else {
      for (int i = 0; i < total; i++)
        CALL(ad_mpi_recv(buf + i * S, S, AD_MPI_REAL, MPI_ANY_SOURCE, variant == 2 ? MPI_ANY_TAG : TAG(k, 0),
                         MPI_COMM_WORLD, &sts[i]));
    }
    /* The j-th message from a source is the j-th receive (in posting order)
     * that it matched. */
    int *seen = ints(p);
    for (int i = 0; i < total; i++) {
      int s = sts[i].MPI_SOURCE, j = seen[s]++, got = -1;
      MT_CHECK(s >= 0 && s < p && s != root && j < nsend[s]);
      MPI_Get_count(&sts[i], AD_MPI_REAL, &got);
      MT_CHECK(got == cnt[2 * s + j]);
      MT_CHECK(sts[i].MPI_TAG == (variant == 2 ? TAG(k, 1 + j) : TAG(k, 0)));
      from[i] = 2 * s + j;
    }
    for (int i = 0; i < total; i++) order[i] = i;
    for (int i = 1; i < total; i++) /* insertion sort by (source, j) */
      for (int j = i; j > 0 && from[order[j - 1]] > from[order[j]]; j--) {
        int t = order[j];
        order[j] = order[j - 1];
        order[j - 1] = t;
      }
    for (int i = 0; i < total; i++) fold(st, buf + order[i] * S, cnt[from[order[i]]], i);
    free(seen);
    free(buf);
    free(from);
    free(order);
    free(sts);
  } else {
    for (int j = 0; j < nsend[mt_rank]; j++) {
      int c = cnt[2 * mt_rank + j], tag = variant == 2 ? TAG(k, 1 + j) : TAG(k, 0);
      CALL(ad_mpi_send(&st[S - c], c, AD_MPI_REAL, root, tag, MPI_COMM_WORLD));
    }
  }
  if (variant == 2) CALL(ad_mpi_barrier(MPI_COMM_WORLD));
  free(nsend);
  free(cnt);
}

/* ------------------------------------------------------------------------ */
/* Collective steps                                                          */
/* ------------------------------------------------------------------------ */

static MPI_Op random_op(uint64_t *g) {
  MPI_Op o[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return o[rng_int(g, 4)];
}

/* Displacements with random gaps, so that the layouts are not contiguous. */
static int layout(uint64_t *g, const int *cnt, int *dsp, int n) {
  int d = 0;
  for (int j = 0; j < n; j++) {
    d += rng_int(g, 2);
    dsp[j] = d;
    d += cnt[j];
  }
  return d;
}

/* The contribution of state slots to a reduction: the slots themselves, or
 * for MPI_PROD values in [0.8, 1.2], so that a product over seven ranks stays
 * of moderate size. */
static void contribution(MPI_Op op, const ad_real *st, int n, ad_real *out) {
  for (int i = 0; i < n; i++) out[i] = op == MPI_PROD ? ad_add(1.0, ad_mul(0.2, ad_sin(st[i]))) : st[i];
}

static void step_collective(ad_real *st, uint64_t *g, int kind) {
  int p = mt_size, me = mt_rank;
  int root = rng_int(g, p), cnt = rng_int(g, S + 1), off = rng_int(g, S - cnt + 1), inplace = rng_int(g, 2);
  MPI_Op op = random_op(g);
  int *c = ints(p), *d = ints(p), *c2 = ints(p), *d2 = ints(p), *offs = ints(p);
  ad_real *a = reals(2 * p * S + 2), *b = reals(2 * p * S + 2);
  MPI_Comm w = MPI_COMM_WORLD;
  switch (kind) {
  case K_BCAST:
    if (inplace) { /* straight into the state: the non-roots' values are replaced */
      CALL(ad_mpi_bcast(&st[off], cnt, AD_MPI_REAL, root, w));
    } else {
      for (int i = 0; i < cnt; i++) a[i] = ad_mul(st[off + i], st[(off + i + 1) % S]);
      CALL(ad_mpi_bcast(a, cnt, AD_MPI_REAL, root, w));
      fold(st, a, cnt, off + 1);
    }
    break;
  case K_REDUCE:
    contribution(op, &st[off], cnt, a);
    if (inplace && me == root) {
      for (int i = 0; i < cnt; i++) b[i] = a[i];
      CALL(ad_mpi_reduce(MPI_IN_PLACE, b, cnt, AD_MPI_REAL, op, root, w));
    } else {
      CALL(ad_mpi_reduce(a, b, cnt, AD_MPI_REAL, op, root, w));
    }
    if (me == root) fold(st, b, cnt, off + 2);
    break;
  case K_ALLREDUCE: {
    int direct = rng_int(g, 2) && op != MPI_PROD;
    if (inplace && direct) { /* straight on the state; a sum is scaled back to a mean */
      CALL(ad_mpi_allreduce(MPI_IN_PLACE, &st[off], cnt, AD_MPI_REAL, op, w));
      if (op == MPI_SUM)
        for (int i = 0; i < cnt; i++) st[off + i] = ad_mul(st[off + i], 1.0 / p);
    } else if (inplace) {
      contribution(op, &st[off], cnt, b);
      CALL(ad_mpi_allreduce(MPI_IN_PLACE, b, cnt, AD_MPI_REAL, op, w));
      fold(st, b, cnt, off);
    } else {
      contribution(op, &st[off], cnt, a);
      CALL(ad_mpi_allreduce(a, b, cnt, AD_MPI_REAL, op, w));
      fold(st, b, cnt, off + 1);
    }
    break;
  }
  case K_GATHER:
    if (inplace && me == root) {
      for (int i = 0; i < cnt; i++) b[root * cnt + i] = st[off + i];
      CALL(ad_mpi_gather(MPI_IN_PLACE, cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, root, w));
    } else {
      CALL(ad_mpi_gather(&st[off], cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, root, w));
    }
    if (me == root) fold(st, b, p * cnt, off);
    break;
  case K_GATHERV: {
    for (int r = 0; r < p; r++) {
      c[r] = rng_int(g, S + 1);
      offs[r] = rng_int(g, S - c[r] + 1);
    }
    layout(g, c, d, p);
    if (inplace && me == root) {
      for (int i = 0; i < c[me]; i++) b[d[me] + i] = st[offs[me] + i];
      CALL(ad_mpi_gatherv(MPI_IN_PLACE, c[me], AD_MPI_REAL, b, c, d, AD_MPI_REAL, root, w));
    } else {
      CALL(ad_mpi_gatherv(&st[offs[me]], c[me], AD_MPI_REAL, b, c, d, AD_MPI_REAL, root, w));
    }
    if (me == root)
      for (int r = 0; r < p; r++) fold(st, b + d[r], c[r], r);
    break;
  }
  case K_SCATTER: {
    int direct = rng_int(g, 2);
    if (me == root)
      for (int i = 0; i < p * cnt; i++) a[i] = ad_mul(st[i % S], ad_add(1.0, ad_mul(0.1, ad_sin(st[(i + 1) % S]))));
    if (inplace && me == root) {
      CALL(ad_mpi_scatter(a, cnt, AD_MPI_REAL, MPI_IN_PLACE, cnt, AD_MPI_REAL, root, w));
      fold(st, a + root * cnt, cnt, off);
    } else if (direct) {
      CALL(ad_mpi_scatter(a, cnt, AD_MPI_REAL, &st[off], cnt, AD_MPI_REAL, root, w));
    } else {
      CALL(ad_mpi_scatter(a, cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, root, w));
      fold(st, b, cnt, off);
    }
    break;
  }
  case K_SCATTERV: {
    for (int r = 0; r < p; r++) {
      c[r] = rng_int(g, S + 1);
      offs[r] = rng_int(g, S - c[r] + 1);
    }
    int ext = layout(g, c, d, p);
    if (me == root)
      for (int i = 0; i < ext; i++) a[i] = ad_sin(ad_add(st[i % S], 0.01 * i));
    if (inplace && me == root) {
      CALL(ad_mpi_scatterv(a, c, d, AD_MPI_REAL, MPI_IN_PLACE, c[me], AD_MPI_REAL, root, w));
      fold(st, a + d[me], c[me], offs[me]);
    } else {
      CALL(ad_mpi_scatterv(a, c, d, AD_MPI_REAL, &st[offs[me]], c[me], AD_MPI_REAL, root, w));
    }
    break;
  }
  case K_ALLGATHER:
    if (inplace) {
      for (int i = 0; i < cnt; i++) b[me * cnt + i] = st[off + i];
      CALL(ad_mpi_allgather(MPI_IN_PLACE, cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, w));
    } else {
      CALL(ad_mpi_allgather(&st[off], cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, w));
    }
    fold(st, b, p * cnt, off + me);
    break;
  case K_ALLGATHERV: {
    for (int r = 0; r < p; r++) {
      c[r] = rng_int(g, S + 1);
      offs[r] = rng_int(g, S - c[r] + 1);
    }
    layout(g, c, d, p);
    if (inplace) {
      for (int i = 0; i < c[me]; i++) b[d[me] + i] = st[offs[me] + i];
      CALL(ad_mpi_allgatherv(MPI_IN_PLACE, c[me], AD_MPI_REAL, b, c, d, AD_MPI_REAL, w));
    } else {
      CALL(ad_mpi_allgatherv(&st[offs[me]], c[me], AD_MPI_REAL, b, c, d, AD_MPI_REAL, w));
    }
    for (int r = 0; r < p; r++) fold(st, b + d[r], c[r], r + me);
    break;
  }
  case K_ALLTOALL:
    for (int i = 0; i < p * cnt; i++) a[i] = ad_mul(st[(i + me) % S], 1.0 - 0.05 * i);
    if (inplace) {
      CALL(ad_mpi_alltoall(MPI_IN_PLACE, cnt, AD_MPI_REAL, a, cnt, AD_MPI_REAL, w));
      fold(st, a, p * cnt, off);
    } else {
      CALL(ad_mpi_alltoall(a, cnt, AD_MPI_REAL, b, cnt, AD_MPI_REAL, w));
      fold(st, b, p * cnt, off);
    }
    break;
  case K_ALLTOALLV: {
    /* cnt[a][b]: what rank a sends to rank b; symmetric for the in-place
     * variant, where each slot is both sent and overwritten. */
    int *m = ints(p * p);
    for (int x = 0; x < p; x++)
      for (int y = 0; y < p; y++) m[x * p + y] = rng_int(g, 3);
    if (inplace)
      for (int x = 0; x < p; x++)
        for (int y = 0; y < x; y++) m[x * p + y] = m[y * p + x];
    for (int r = 0; r < p; r++) {
      c[r] = m[me * p + r];  /* send counts */
      c2[r] = m[r * p + me]; /* receive counts */
    }
    int sext = layout(g, c, d, p), rext = layout(g, c2, d2, p);
    if (inplace) {
      for (int i = 0; i < rext; i++) b[i] = ad_add(st[i % S], 0.1 * me);
      CALL(ad_mpi_alltoallv(MPI_IN_PLACE, c2, d2, AD_MPI_REAL, b, c2, d2, AD_MPI_REAL, w));
    } else {
      for (int i = 0; i < sext; i++) a[i] = ad_cos(st[(i + 1) % S]);
      CALL(ad_mpi_alltoallv(a, c, d, AD_MPI_REAL, b, c2, d2, AD_MPI_REAL, w));
    }
    for (int r = 0; r < p; r++) fold(st, b + d2[r], c2[r], r);
    free(m);
    break;
  }
  case K_SCAN:
  case K_EXSCAN: {
    int ex = kind == K_EXSCAN;
    if (inplace) {
      for (int i = 0; i < cnt; i++) b[i] = st[off + i];
      if (ex)
        CALL(ad_mpi_exscan(MPI_IN_PLACE, b, cnt, AD_MPI_REAL, MPI_SUM, w));
      else
        CALL(ad_mpi_scan(MPI_IN_PLACE, b, cnt, AD_MPI_REAL, MPI_SUM, w));
    } else if (ex) {
      CALL(ad_mpi_exscan(&st[off], b, cnt, AD_MPI_REAL, MPI_SUM, w));
    } else {
      CALL(ad_mpi_scan(&st[off], b, cnt, AD_MPI_REAL, MPI_SUM, w));
    }
    if (!(ex && me == 0)) fold(st, b, cnt, off + 1); /* exscan leaves rank 0's result undefined */
    break;
  }
  case K_RSB:
    for (int i = 0; i < p * cnt; i++) b[i] = ad_add(ad_mul(st[(i + 2) % S], 0.9), 0.01 * (i + me));
    contribution(op, b, p * cnt, a);
    if (inplace) {
      CALL(ad_mpi_reduce_scatter_block(MPI_IN_PLACE, a, cnt, AD_MPI_REAL, op, w));
      fold(st, a, cnt, off);
    } else {
      CALL(ad_mpi_reduce_scatter_block(a, b, cnt, AD_MPI_REAL, op, w));
      fold(st, b, cnt, off);
    }
    break;
  case K_BARRIER:
    CALL(ad_mpi_barrier(w));
    break;
  default:
    break;
  }
  free(c);
  free(d);
  free(c2);
  free(d2);
  free(offs);
  free(a);
  free(b);
}

/* ------------------------------------------------------------------------ */
/* Sub-communicators                                                         */
/* ------------------------------------------------------------------------ */

/* Communicators made by the programs, freed once the program's checks are
 * done (a tape's communicators must live until its sweeps): their private
 * duplicates may still be under way then, for the passive runs. */
static MPI_Comm made[3 * MAXSTEPS + 8];
static int nmade;

static void free_made(void) {
  for (int i = 0; i < nmade; i++) MPI_Comm_free(&made[i]);
  nmade = 0;
}

/* The ranks split into groups of random colours; each group reduces a slice
 * of the state and passes another around its ring. */
static void step_subcomm(ad_real *st, uint64_t *g, int k) {
  int p = mt_size, ncolor = 1 + rng_int(g, p < 3 ? p : 3), color = 0;
  for (int r = 0; r < p; r++) {
    int c = rng_int(g, ncolor);
    if (r == mt_rank) color = c;
  }
  int cnt = 1 + rng_int(g, S), off = rng_int(g, S - cnt + 1);
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, color, mt_rank, &c);
  int r, n;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &n);
  ad_real a[S], b[S], in;
  for (int i = 0; i < cnt; i++) a[i] = st[off + i];
  CALL(ad_mpi_allreduce(a, b, cnt, AD_MPI_REAL, MPI_SUM, c));
  fold(st, b, cnt, off + 1);
  CALL(ad_mpi_sendrecv(&st[off], 1, AD_MPI_REAL, (r + 1) % n, TAG(k, 0), &in, 1, AD_MPI_REAL, (r + n - 1) % n,
                       TAG(k, 0), c, MPI_STATUS_IGNORE));
  fold(st, &in, 1, off + 2);
  if (nmade < (int)(sizeof made / sizeof *made))
    made[nmade++] = c;
  else
    MPI_Comm_free(&c);
}

/* ------------------------------------------------------------------------ */
/* The program                                                               */
/* ------------------------------------------------------------------------ */

static void run_program(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  const program *pr = ctx;
  ad_real st[S];
  /* n inputs (1 to S) fill the state, m outputs (up to S) are read from it */
  for (int j = 0; j < S; j++) st[j] = j < n ? x[j] : ad_mul(x[j % n], 0.5 + 0.1 * j);
  cur_seed = pr->seed;
  for (int s = 0; s < pr->nsteps; s++) {
    uint64_t g = pr->sub[s], mine = pr->sub[s] ^ (0xA24BAED4963EE407ull * (uint64_t)(mt_rank + 1));
    cur_step = s;
    switch (pr->kind[s]) {
    case K_BLOCKING:
      step_blocking(st, &g, s);
      break;
    case K_SENDRECV:
      step_sendrecv(st, &g, s);
      break;
    case K_NONBLOCKING:
      step_nonblocking(st, &g, s, &mine);
      break;
    case K_WILDCARD:
      step_wildcard(st, &g, s);
      break;
    case K_SUBCOMM:
      step_subcomm(st, &g, s);
      break;
    case K_NBCOLL:
      step_nbcoll(st, &g, s, &mine);
      break;
    case K_PERSIST:
      step_persist(st, &g, s);
      break;
    case K_RMA:
      step_rma(st, &g, s);
      break;
    case K_ALLTOALLW_GAPS:
      step_alltoallw_gaps(st, &g);
      break;
    case K_RMA_BARRIER:
      step_rma_barrier(st, &g);
      break;
    default:
      step_collective(st, &g, pr->kind[s]);
      break;
    }
    local_step(st, &mine);
  }
  for (int j = 0; j < m; j++) y[j] = st[j];
}

/* ad_jacobian with another number of inputs and outputs on every rank. The
 * ranks agree on the mode, reverse if the largest m is at most the largest
 * n. Row r of a reverse Jacobian is the sweep seeded with output r on every
 * rank that has one (column k of a tangent one likewise), so the rows (or
 * columns) that every rank has, combined with weights that are the same on
 * every rank, must equal one sweep of that mode seeded with those weights. */
static void check_jacobian(const program *pr) {
  uint64_t s = pr->seed * 0x9E3779B97F4A7C15ull + 7919ull * (uint64_t)(mt_rank + 1);
  int n = 1 + rng_int(&s, S), m = 1 + rng_int(&s, S), M = 0, N = 0, mmin = 0, nmin = 0;
  MPI_Allreduce(&m, &M, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&n, &N, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&m, &mmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&n, &nmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  ad_tape *t = ad_tape_create();
  ad_real x[S], y[S];
  ad_tape_begin(t);
  for (int i = 0; i < n; i++) x[i] = ad_input(0.5 + 0.1 * i + 0.05 * mt_rank);
  run_program(x, n, y, m, (void *)pr);
  ad_tape_end(t);
  double J[S * S], sweep = 0.0;
  int rc = ad_jacobian(t, (size_t)m, y, (size_t)n, x, J);
  if (rc != AD_OK) fprintf(stderr, "[%d] seed %llu: ad_jacobian: %s\n", mt_rank, pr->seed, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
  if (M <= N) {
    ad_adjoints_zero(t);
    for (int r = 0; r < mmin; r++) ad_seed(t, y[r], 1.0 + 0.25 * r);
    MT_CHECK(ad_reverse(t) == AD_OK);
    for (int k = 0; k < n; k++) {
      double comb = 0.0;
      for (int r = 0; r < mmin; r++) comb += (1.0 + 0.25 * r) * J[r * n + k];
      MT_CLOSE(comb, ad_adjoint(t, x[k]), 1e-12);
      sweep += fabs(comb);
    }
  } else {
    ad_tangents_zero(t);
    for (int k = 0; k < nmin; k++) ad_tangent_seed(t, x[k], 1.0 + 0.25 * k);
    MT_CHECK(ad_forward(t) == AD_OK);
    for (int r = 0; r < m; r++) {
      double comb = 0.0;
      for (int k = 0; k < nmin; k++) comb += J[r * n + k] * (1.0 + 0.25 * k);
      MT_CLOSE(comb, ad_tangent(t, y[r]), 1e-12);
      sweep += fabs(comb);
    }
  }
  double all = 0.0;
  MPI_Allreduce(&sweep, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MT_CHECK(all > 1e-8); /* a zero matrix proves nothing */
  ad_tape_destroy(t);
}

/* A sweep that fails on every rank: one rank's tape runs out of memory,
 * and a closing allreduce makes every rank its partner, so all learn of it
 * in the handshake. That leaves nothing behind: the next program is right. */
static void check_failed_sweep(const program *pr) {
  int bad = (int)(pr->seed % (unsigned long long)mt_size);
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.block_arguments = 1024;
  ad_tape *t = ad_tape_create_with(&o);
  if (mt_rank == bad) {
    ad_stats st;
    ad_tape_stats(t, &st);
    ad_tape_set_memory_limit(t, st.bytes_reserved + 64);
  }
  ad_tape_begin(t);
  ad_real x[S], y[S], sum;
  for (int i = 0; i < S; i++) x[i] = ad_input(0.5 + 0.1 * i);
  ad_real w = x[0];
  if (mt_rank == bad) /* enough work for a second storage block */
    for (int i = 0; i < 3000; i++) w = ad_add(ad_mul(w, 0.999), 0.0001);
  run_program(x, S, y, S, (void *)pr);
  ad_real part = ad_add(y[0], ad_mul(w, 1e-3));
  CALL(ad_mpi_allreduce(&part, &sum, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD));
  ad_tape_end(t);
  double g[S];
  int rc = ad_gradient(t, sum, S, x, g);
  if (rc != (mt_rank == bad ? AD_ERR_NOMEM : AD_ERR_MPI))
    fprintf(stderr, "[%d] seed %llu: failed sweep: %d: %s\n", mt_rank, pr->seed, rc, ad_tape_error_message(t));
  MT_CHECK(rc == (mt_rank == bad ? AD_ERR_NOMEM : AD_ERR_MPI));
  ad_tape_destroy(t);
}

/* Several recordings of one program swept in rank-dependent orders. Each
 * recording's result is a weighted sum over the ranks with its own weights
 * and inputs, so two recordings' adjoints differ. First every rank sweeps
 * them in one order (the reference), then rank 0 in that order and the
 * others in the reverse one, then each rank in its own random order: after
 * every step either all ranks got AD_OK with the reference gradient or all
 * got an error; then the common order once more, which must still be
 * right. Sub-communicator steps become allreduces here: each recording
 * would make communicators of its own, whose handshakes on different
 * recordings never meet (a timeout, not a mismatch). With `coll_only`,
 * every step that has point-to-point traffic becomes a collective one:
 * then only the collectives tell the recordings apart. */
#define NTAPES 3
static void check_tape_orders(const program *pr, int coll_only) {
  program q = *pr;
  for (int s = 0; s < q.nsteps; s++) {
    int k = q.kind[s];
    if (k == K_SUBCOMM || (coll_only && k == K_BLOCKING))
      q.kind[s] = K_ALLREDUCE;
    else if (coll_only && (k == K_SENDRECV || k == K_WILDCARD))
      q.kind[s] = K_ALLGATHER;
    else if (coll_only && (k == K_NONBLOCKING || k == K_NBCOLL)) /* the latter has a ring */
      q.kind[s] = K_SCAN;
    else if (coll_only && k == K_PERSIST)
      q.kind[s] = K_BCAST;
  }
  uint64_t g = pr->seed * 0x2545F4914F6CDD1Dull + 3, mine = g ^ (0x632BE59BD9B4E019ull * (uint64_t)(mt_rank + 1));
  int nt = 2 + rng_int(&g, NTAPES - 1);
  ad_tape *t[NTAPES];
  ad_real x[NTAPES][S], sum[NTAPES];
  double ref[NTAPES][S];
  for (int j = 0; j < nt; j++) {
    ad_real y[S], part = ad_const(0.0);
    t[j] = ad_tape_create();
    ad_tape_begin(t[j]);
    for (int i = 0; i < S; i++) x[j][i] = ad_input(0.5 + 0.1 * i + 0.05 * mt_rank + 0.03 * j);
    run_program(x[j], S, y, S, &q);
    for (int i = 0; i < S; i++) part = ad_add(part, ad_mul(y[i], 1.0 + 0.25 * i + j));
    /* every rank a partner of every other: a mismatch is seen everywhere */
    CALL(ad_mpi_allreduce(&part, &sum[j], 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD));
    ad_tape_end(t[j]);
  }
  for (int j = 0; j < nt; j++) {
    int rc = ad_gradient(t[j], sum[j], S, x[j], ref[j]);
    if (rc != AD_OK)
      fprintf(stderr, "[%d] seed %llu: tape %d: %s\n", mt_rank, pr->seed, j, ad_tape_error_message(t[j]));
    MT_CHECK(rc == AD_OK);
  }
  for (int round = 0; round < 2; round++) {
    int order[NTAPES];
    for (int j = 0; j < nt; j++) order[j] = round == 0 && mt_rank > 0 ? nt - 1 - j : j;
    for (int j = nt - 1; round > 0 && j > 0; j--) {
      int k = rng_int(&mine, j + 1), tmp = order[j];
      order[j] = order[k];
      order[k] = tmp;
    }
    for (int s = 0; s < nt; s++) {
      int j = order[s];
      double gr[S];
      int rc = ad_gradient(t[j], sum[j], S, x[j], gr), right = rc == AD_OK, v[2];
      for (int i = 0; right && i < S; i++) right = fabs(gr[i] - ref[j][i]) <= 1e-12 * (1.0 + fabs(ref[j][i]));
      if (rc == AD_OK && !right) {
        mt_errors++;
        fprintf(stderr, "[%d] seed %llu: tape %d, step %d of a random order: AD_OK with a wrong gradient\n", mt_rank,
                pr->seed, j, s);
      }
      if (rc != AD_OK && rc != AD_ERR_MPI) {
        mt_errors++;
        fprintf(stderr, "[%d] seed %llu: tape %d: %s\n", mt_rank, pr->seed, j, ad_tape_error_message(t[j]));
      }
      v[0] = rc == AD_OK;
      v[1] = -v[0];
      MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (v[0] != -v[1]) {
        mt_errors++;
        fprintf(stderr, "[%d] seed %llu: step %d of a random order: AD_OK on some ranks only (here %s)\n", mt_rank,
                pr->seed, s, rc == AD_OK ? "AD_OK" : ad_tape_error_message(t[j]));
      }
    }
  }
  for (int j = 0; j < nt; j++) {
    double gr[S];
    MT_CHECK(ad_gradient(t[j], sum[j], S, x[j], gr) == AD_OK);
    for (int i = 0; i < S; i++) MT_CLOSE(gr[i], ref[j][i], 1e-12);
    ad_tape_destroy(t[j]);
  }
}

static unsigned long long env_ull(const char *name, unsigned long long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : dflt;
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub = *ub;
  /* Room for every buffered send of a step, with MPI's per-message overhead. */
  mt_bsend_buffer(1 << 20);
  unsigned long long nseeds = env_ull("ARIADNE_STRESS_SEEDS", 10), seed0 = env_ull("ARIADNE_STRESS_SEED0", 1);
  int verbose = getenv("ARIADNE_STRESS_VERBOSE") != NULL, failed = 0;
  double t0 = MPI_Wtime();
  for (unsigned long long i = 0; i < nseeds; i++) {
    program pr;
    char name[64];
    program_make(&pr, seed0 + i);
    if (verbose && mt_rank == 0) program_print(&pr);
    snprintf(name, sizeof name, "stress seed %llu", pr.seed);
    /* Finite differences on every third program: they triple the cost. */
    int before = mt_errors;
    mt_check_prog(name, run_program, S, S, &pr, i % 3 == 0 ? 1e-6 : 0.0);
    free_made();
    /* Uneven Jacobian shapes on every other program; a sweep that fails
     * everywhere, before the next program, on every fourth. */
    if (i % 2 == 1) check_jacobian(&pr);
    free_made();
    if (i % 4 == 2) check_failed_sweep(&pr);
    free_made();
    /* Several recordings swept in rank-dependent orders on every fourth,
     * every other time with collectives only. */
    if (i % 4 == 0) check_tape_orders(&pr, i % 8 == 0);
    free_made();
    int bad = mt_errors - before, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad) {
      failed++;
      if (mt_rank == 0) {
        fprintf(stderr,
                "[0] stress: seed %llu FAILED at %d ranks; rerun it alone with ARIADNE_STRESS_SEED0=%llu "
                "ARIADNE_STRESS_SEEDS=1\n",
                pr.seed, mt_size, pr.seed);
        program_print(&pr);
      }
    }
  }
  if (mt_rank == 0)
    printf("stress: %llu programs from seed %llu at %d ranks, %d failed, %.1f s\n", nseeds, seed0, mt_size, failed,
           MPI_Wtime() - t0);
  mt_bsend_buffer(0);
  return mt_finalize();
}
