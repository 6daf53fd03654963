/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI layer infrastructure: set-up and clean-up, private communicators,
 * message sequencing, per-tape participation and the sweep handshake,
 * waiting with a timeout, and the buffer and vector helpers. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ariadne_checkpoint.h>

#include "mpi_impl.h"

ad_mpi_stats ad__mpi_counters;

static int initialized;
static MPI_Datatype real_type = MPI_DATATYPE_NULL;
static int comm_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static ad__comm *comms;
/* The chapters that joined (see ad__mpi_chapter_join). They stay joined
 * across MPI_Finalize: their hooks find nothing to do until they hold state
 * again. */
static ad__mpi_chapter *chapters;
static double timeout_s = 60.0;
/* A sweep timed out, or left a send or collective pending, since the last
 * taint(): MPI may still pair what it left with a later operation. */
static int left_pending;
static int timeout_set; /* ad_mpi_set_timeout was called: the environment does not override it */
/* Sweep messages take the tags 0 .. sweep_tags - 1 of the private
 * communicators; the two above are the handshake's and the agreement's. */
static int sweep_tags, handshake_tag;

/* ------------------------------------------------------------------------ */
/* Set-up and clean-up                                                       */
/* ------------------------------------------------------------------------ */

/* The private duplicate may still be under way when the user frees the
 * communicator (right after a wrapper call, or a rank never used it): MPICH
 * then defers the user's free until the duplicate completes and runs our
 * delete callback from inside whatever MPI call completes it, possibly a
 * wait on that very request. So a wait on the duplicate marks the info as
 * settling: a release that happens meanwhile only marks the info freed, and
 * the waiter frees the duplicates when its wait is over. */
static void drain(MPI_Comm comm);

static void free_dups(ad__comm *c) {
  if (c->settling || c->idup != MPI_REQUEST_NULL) return;
  if (c->priv != MPI_COMM_NULL) drain(c->priv);
  if (c->rev != MPI_COMM_NULL) MPI_Comm_free(&c->rev);
  if (c->tposed != MPI_COMM_NULL) MPI_Comm_free(&c->tposed);
  if (c->priv != MPI_COMM_NULL) MPI_Comm_free(&c->priv);
  for (int i = 0; i < c->nretired; i++) MPI_Comm_free(&c->retired[i]);
  c->nretired = 0;
}

/* Wait for the duplicate: with a tape through ad__mpi_wait (a timeout is
 * reported on it), without one (clean-up) bounded by the timeout, silently. */
static int settle(ad_tape *t, ad__comm *c, int report) {
  if (c->idup == MPI_REQUEST_NULL) return AD_OK;
  if (c->settling) return AD_ERR_MPI;
  c->settling = 1;
  int rc = AD_OK;
  if (report) {
    rc = ad__mpi_wait(t, &c->idup, MPI_STATUS_IGNORE, "the private duplicate of a communicator");
  } else {
    double t0 = MPI_Wtime();
    int done = 0;
    while (MPI_Test(&c->idup, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && MPI_Wtime() - t0 < timeout_s) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
    if (!done) rc = AD_ERR_MPI; /* left to MPI */
  }
  c->settling = 0;
  if (c->freed) free_dups(c);
  return rc;
}

/* Receive and drop what arrived for sweeps that gave up (a partner's
 * adjoints or handshake for a sweep this rank abandoned): nothing is left in
 * MPI's queues when the duplicate goes. */
static void drain(MPI_Comm comm) {
  for (int guard = 0; guard < 1 << 20; guard++) {
    int flag = 0, n = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &st) != MPI_SUCCESS || !flag) return;
    MPI_Get_count(&st, MPI_BYTE, &n);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf) return;
    MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
    free(buf);
  }
}

static void comm_release(ad__comm *c) {
  if (c->freed) return;
  c->freed = 1;
  if (!c->settling) settle(NULL, c, 0);
  free_dups(c);
}

/* The user freed a communicator: free its duplicate; the info stays (records
 * may point to it) and a sweep that needs it reports the communicator gone. */
static int comm_delete(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)extra;
  comm_release(attr);
  return MPI_SUCCESS;
}

void ad__kmap_free(ad__kmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: free everything.
 * Every other communicator's attribute is deleted here too, MPI_COMM_WORLD's
 * included: MPI_Finalize deletes MPI_COMM_WORLD's attributes later, and its
 * callback must not find a pointer to the info freed below. MPI_COMM_SELF's
 * own attribute is gone already, since MPI deletes its attributes in the
 * reverse order of setting and ours was set after the one that calls this. */
static int self_delete(MPI_Comm comm, int keyval, void *attr, void *extra) {
  (void)comm;
  (void)keyval;
  (void)attr;
  (void)extra;
  for (ad__comm *c = comms, *n; c; c = n) {
    n = c->next;
    /* completing a duplicate may run a deferred free of its user
     * communicator (and our callback): only then is the handle still valid */
    int settled = c->freed || settle(NULL, c, 0) == AD_OK;
    if (!c->freed) {
      if (settled && c->user != MPI_COMM_SELF) MPI_Comm_delete_attr(c->user, comm_keyval);
      if (settled)
        comm_release(c);
      else
        c->freed = 1; /* a duplicate some rank never joined: left to MPI */
    }
    ad__kmap_free(&c->sendk);
    ad__kmap_free(&c->prunedk);
    ad__kmap_free(&c->tapes);
    free(c->retired);
    free(c->rq);
    free(c);
  }
  comms = NULL;
  for (ad__mpi_chapter *ch = chapters; ch; ch = ch->next)
    if (ch->finalize) ch->finalize();
  if (real_type != MPI_DATATYPE_NULL) MPI_Type_free(&real_type);
  if (comm_keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&comm_keyval);
  initialized = 0;
  return MPI_SUCCESS;
}

void ad__mpi_chapter_join(ad__mpi_chapter *ch) {
  if (ch->joined) return;
  ch->joined = 1;
  ch->next = chapters;
  chapters = ch;
}

int ad__mpi_chapters_barrier(int after) {
  int rc = MPI_SUCCESS;
  for (ad__mpi_chapter *ch = chapters; ch; ch = ch->next) {
    int e = ch->barrier ? ch->barrier(after) : MPI_SUCCESS;
    if (rc == MPI_SUCCESS) rc = e;
  }
  return rc;
}

/* The chapters' sweep checks: 1 as soon as one says t cannot be swept. */
static int chapters_sweep_check(ad_tape *t) {
  for (ad__mpi_chapter *ch = chapters; ch; ch = ch->next)
    if (ch->sweep_check && ch->sweep_check(t)) return 1;
  return 0;
}

static int world_rank;

static int64_t agree_min_world(int64_t v) {
  if (!initialized && ad__mpi_setup() != MPI_SUCCESS) return v; /* no MPI: one process */
  int64_t out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  return out;
}

static int process_rank_world(void) {
  if (!initialized && ad__mpi_setup() != MPI_SUCCESS) return 0;
  return world_rank;
}

/* The communicators a checkpointed loop's steps use, noted while its
 * forward run goes on (see ad__loop_comm_ops): one collector per loop in
 * flight on this thread, innermost first; a use is noted in all of them. */
typedef struct collector {
  ad__comm **c;
  size_t n, cap;
  struct collector *outer;
} collector;
static _Thread_local collector *collecting;

static void collect(ad__comm *c) {
  for (collector *s = collecting; s; s = s->outer) {
    size_t i = 0;
    while (i < s->n && s->c[i] != c) i++;
    if (i < s->n) continue;
    if (s->n == s->cap) {
      size_t ncap = s->cap ? 2 * s->cap : 4;
      ad__comm **n = realloc(s->c, ncap * sizeof *n);
      if (!n) continue; /* the loop then agrees over fewer communicators */
      s->c = n;
      s->cap = ncap;
    }
    s->c[s->n++] = c;
  }
}

static void *collect_begin(void) {
  collector *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->outer = collecting;
  collecting = s;
  return s;
}

static size_t collect_end(void *mark, void ***out) {
  collector *s = mark;
  *out = NULL;
  if (!s) return 0;
  collecting = s->outer;
  size_t n = s->n;
  if (n)
    *out = (void **)s->c;
  else
    free(s->c);
  free(s);
  return n;
}

static void error_text(int mpirc, char s[MPI_MAX_ERROR_STRING]);

/* A minimum over the ranks of a loop's communicators: a reduction over
 * each in turn, as many passes as there are communicators (enough to cross
 * a chain of them), every wait bounded by the timeout. */
static int loop_agree(void *const *cs, size_t n, int64_t *v, char *why, size_t size) {
  int64_t *buf = malloc(sizeof *buf);
  if (!buf) {
    snprintf(why, size, "out of memory");
    return AD_ERR_NOMEM;
  }
  for (size_t pass = 0; pass < n; pass++) {
    for (size_t i = 0; i < n; i++) {
      ad__comm *c = cs[i];
      if (c->freed || c->tainted || ad__mpi_comm_ready(NULL, c) != AD_OK) {
        snprintf(why, size, "a communicator the loop's steps used was freed, or an earlier sweep over it gave up");
        free(buf);
        return AD_ERR_MPI;
      }
      *buf = *v;
      MPI_Request r;
      int e = MPI_Iallreduce(MPI_IN_PLACE, buf, 1, MPI_INT64_T, MPI_MIN, c->priv, &r);
      if (e != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        error_text(e, s);
        snprintf(why, size, "%s", s);
        free(buf);
        return AD_ERR_MPI;
      }
      if (ad__mpi_wait(NULL, &r, MPI_STATUS_IGNORE, "the other ranks of a checkpointed loop") != AD_OK) {
        c->tainted = 1; /* the reduction stays pending there */
        ad__mpi_keep(buf);
        snprintf(why, size,
                 "waited %.0f s for the other ranks of a communicator the loop's steps use: a rank did not sweep the "
                 "loop, or ran into an error before it",
                 timeout_s);
        return AD_ERR_MPI;
      }
      *v = *buf;
    }
  }
  free(buf);
  return AD_OK;
}

static const ad__loop_comm_ops loop_comm_ops = {collect_begin, collect_end, loop_agree};

int ad_mpi_ckpt_comm(ad_ckpt_options *o, MPI_Comm comm) {
  if (!o) return MPI_ERR_ARG;
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  o->comm = c;
  return MPI_SUCCESS;
}

/* Resumable checkpointing may run before any wrapper has set the layer up
 * (a loop's first halo exchange comes after its files are named): give it
 * the rank and the agreement from the start. */
__attribute__((constructor)) static void checkpoint_hooks(void) {
  ad__process_rank = process_rank_world;
  ad__agree_min = agree_min_world;
  ad__loop_comm = &loop_comm_ops;
}

int ad__mpi_setup(void) {
  if (initialized) return MPI_SUCCESS;
  int flag = 0, rc;
  MPI_Initialized(&flag);
  if (!flag) return MPI_ERR_OTHER;
  /* One double, built in a way no program builds its own types (a double
   * resized to its own extent), so that types.c can recognise it inside a
   * derived type where MPI hands back another handle for it (Open MPI). */
  MPI_Datatype one;
  if ((rc = MPI_Type_contiguous(1, MPI_DOUBLE, &one)) != MPI_SUCCESS) return rc;
  rc = MPI_Type_create_resized(one, 0, (MPI_Aint)sizeof(double), &real_type);
  MPI_Type_free(&one);
  if (rc != MPI_SUCCESS) return rc;
  if ((rc = MPI_Type_commit(&real_type)) != MPI_SUCCESS) return rc;
  if ((rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &comm_keyval, NULL)) != MPI_SUCCESS) return rc;
  if (self_keyval == MPI_KEYVAL_INVALID &&
      (rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_keyval, NULL)) != MPI_SUCCESS)
    return rc;
  if ((rc = MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL)) != MPI_SUCCESS) return rc;

  int *ub = NULL, wrank = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  handshake_tag = flag && ub && *ub >= 32767 ? *ub : 32767; /* MPI promises 32767 */
  sweep_tags = handshake_tag - 1;

  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  /* A launcher of one MPI runs a program linked with another as N separate
   * one-rank programs, each of which would "work". Whoever launches knows
   * how many ranks it asked for: ARIADNE_EXPECT_RANKS=N makes that an error. */
  const char *expect = getenv("ARIADNE_EXPECT_RANKS");
  if (expect && *expect) {
    int wsize = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (atoi(expect) != wsize) {
      fprintf(stderr,
              "ariadne: [%d] MPI_COMM_WORLD has %d rank(s), but ARIADNE_EXPECT_RANKS=%s: the launcher (mpiexec) "
              "and the MPI library this program is linked with probably belong to different MPIs\n",
              wrank, wsize, expect);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  char prefix[32];
  snprintf(prefix, sizeof prefix, "[%d] ", wrank);
  ad__set_message_prefix(prefix);
  /* Resumable checkpointing names its files by rank and makes every rank
   * resume at the same point. */
  world_rank = wrank;
  const char *env = getenv("ARIADNE_MPI_TIMEOUT");
  if (env && atof(env) > 0 && !timeout_set) timeout_s = atof(env);
  initialized = 1;
  return MPI_SUCCESS;
}

MPI_Datatype ad_mpi_real_datatype(void) {
  if (!initialized && ad__mpi_setup() != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  return real_type;
}

void ad_mpi_set_timeout(double seconds) {
  if (seconds > 0) {
    timeout_s = seconds;
    timeout_set = 1;
  }
}

void ad_mpi_stats_get(ad_mpi_stats *out) {
  if (out) *out = ad__mpi_counters;
}
void ad_mpi_stats_reset(void) { memset(&ad__mpi_counters, 0, sizeof ad__mpi_counters); }

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

static ad__comm *comm_info(MPI_Comm comm, int *err) {
  *err = ad__mpi_setup();
  if (*err != MPI_SUCCESS) return NULL;
  if (comm == MPI_COMM_NULL) {
    *err = MPI_ERR_COMM;
    return NULL;
  }
  void *attr = NULL;
  int flag = 0;
  *err = MPI_Comm_get_attr(comm, comm_keyval, &attr, &flag);
  if (*err != MPI_SUCCESS) return NULL;
  if (flag) return attr;
  int inter = 0;
  MPI_Comm_test_inter(comm, &inter);
  if (inter) { /* the sweeps' handshakes and the collectives' rules assume one group */
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (seen)
      ad__fail(seen, AD_ERR_MPI,
               "an intercommunicator carries active data; Ariadne's wrappers take intracommunicators");
    *err = MPI_ERR_COMM;
    return NULL;
  }
  ad__comm *c = calloc(1, sizeof *c);
  if (!c) {
    *err = MPI_ERR_NO_MEM;
    return NULL;
  }
  c->user = comm;
  c->priv = MPI_COMM_NULL;
  c->rev = MPI_COMM_NULL;
  c->tposed = MPI_COMM_NULL;
  MPI_Comm_rank(comm, &c->rank);
  MPI_Comm_size(comm, &c->size);
  if ((*err = MPI_Comm_idup(comm, &c->priv, &c->idup)) != MPI_SUCCESS ||
      (*err = MPI_Comm_set_attr(comm, comm_keyval, c)) != MPI_SUCCESS) {
    free(c);
    return NULL;
  }
  c->next = comms;
  comms = c;
  return c;
}

/* Every wrapper on AD_MPI_REAL data comes here: a checkpointed loop's
 * forward run notes its communicators. */
ad__comm *ad__mpi_comm(MPI_Comm comm, int *err) {
  ad__comm *c = comm_info(comm, err);
  if (c && collecting) collect(c);
  return c;
}

static int comm_renew(ad_tape *seen, ad__comm *c);

int ad_mpi_comm_prepare(MPI_Comm comm) {
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  if (ad__mpi_comm_ready(NULL, c) != AD_OK) return MPI_ERR_OTHER;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  return comm_renew(seen, c);
}

int ad__mpi_comm_ready(ad_tape *t, ad__comm *c) {
  if (c->freed) return AD_ERR_MPI;
  if (c->idup == MPI_REQUEST_NULL) return AD_OK;
  int rc = settle(t, c, 1);
  if (rc != AD_OK) return rc;
  if (c->freed) return AD_ERR_MPI; /* a deferred free ran meanwhile */
  MPI_Comm_set_errhandler(c->priv, MPI_ERRORS_RETURN);
  return AD_OK;
}

int ad__mpi_comm_settled(ad__comm *c) {
  if (c->idup == MPI_REQUEST_NULL || c->settling) return MPI_SUCCESS;
  c->settling = 1;
  int rc = MPI_Wait(&c->idup, MPI_STATUS_IGNORE);
  c->settling = 0;
  if (c->freed) {
    free_dups(c);
    return rc;
  }
  if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(c->priv, MPI_ERRORS_RETURN);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Sequencing                                                                */
/* ------------------------------------------------------------------------ */

static uint64_t kkey(int peer, int tag) { return ((uint64_t)(uint32_t)peer << 32 | (uint32_t)tag) + 1; }

static size_t kmap_home(uint64_t key, size_t cap) { return (key * 0x9E3779B97F4A7C15ull) >> 7 & (cap - 1); }

int *ad__kmap_slot(ad__kmap *m, uint64_t key) {
  if (2 * (m->n + 1) > m->cap) {
    size_t ncap = m->cap ? 2 * m->cap : 64;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    int *nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
      free(nk);
      free(nv);
      return NULL;
    }
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = kmap_home(m->keys[i], ncap);
      while (nk[j]) j = (j + 1) & (ncap - 1);
      nk[j] = m->keys[i];
      nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
  }
  size_t j = kmap_home(key, m->cap);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) {
    m->keys[j] = key;
    m->vals[j] = 0;
    m->n++;
  }
  return &m->vals[j];
}

const int *ad__kmap_find(const ad__kmap *m, uint64_t key) {
  if (!m->cap) return NULL;
  size_t j = kmap_home(key, m->cap);
  while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
  return m->keys[j] ? &m->vals[j] : NULL;
}

int ad__send_seq(ad__comm *c, int dest, int tag) {
  int *v = ad__kmap_slot(&c->sendk, kkey(dest, tag));
  return v ? (*v)++ : -1;
}

uint64_t ad__recv_post(ad__comm *c, int src, int tag) {
  if (c->rq_n == c->rq_cap) {
    size_t ncap = c->rq_cap ? 2 * c->rq_cap : 16;
    ad__rentry *n = realloc(c->rq, ncap * sizeof *n);
    if (!n) return UINT64_MAX;
    c->rq = n;
    c->rq_cap = ncap;
  }
  ad__rentry *e = &c->rq[c->rq_n++];
  memset(e, 0, sizeof *e);
  e->src = src;
  e->tag = tag;
  e->slot = -1;
  return c->rq_next++;
}

void ad__recv_attach(ad__comm *c, uint64_t post, int slot, unsigned gen) {
  if (post < c->rq_base || post >= c->rq_next) return;
  ad__rentry *e = &c->rq[post - c->rq_base];
  e->slot = slot;
  e->gen = gen;
}

/* Where the message of an earlier wildcard receive came from. It is
 * matched already (a later receive that accepts fewer messages got one), so
 * it completes without anybody else's help; 0 if that cannot be seen. */
static int wildcard_source(const ad__rentry *e, int *asrc, int *atag) {
  MPI_Request r = e->slot >= 0 ? ad__p2p_request(e->slot, e->gen) : MPI_REQUEST_NULL;
  if (r == MPI_REQUEST_NULL) return 0;
  double t0 = MPI_Wtime();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Request_get_status(r, &flag, &st) != MPI_SUCCESS) return 0;
    if (flag) {
      *asrc = st.MPI_SOURCE;
      *atag = st.MPI_TAG;
      return 1;
    }
    if (MPI_Wtime() - t0 > timeout_s) return 0;
  }
}

/* k of a receive = the receives posted before it that got (or will get) a
 * message of the same (source, tag) stream. Messages of one stream match
 * receives in posting order, so an earlier receive still pending whose
 * pattern is this stream holds an earlier message of it. An earlier pending
 * wildcard receive that accepts the stream holds some message too, but
 * maybe another stream's (MPI_ANY_SOURCE took rank 2's message, this one
 * rank 1's): its status says which. */
int ad__recv_complete(ad__comm *c, uint64_t post, int asrc, int atag) {
  if (post < c->rq_base || post >= c->rq_next) return -1;
  size_t me = (size_t)(post - c->rq_base);
  int *pr = ad__kmap_slot(&c->prunedk, kkey(asrc, atag));
  if (!pr) return -1;
  int k = *pr;
  for (size_t i = 0; i < me; i++) {
    const ad__rentry *e = &c->rq[i];
    int esrc, etag;
    if (e->done)
      k += e->asrc == asrc && e->atag == atag;
    else if (!((e->src == MPI_ANY_SOURCE || e->src == asrc) && (e->tag == MPI_ANY_TAG || e->tag == atag)))
      continue;
    else if ((e->src == MPI_ANY_SOURCE || e->tag == MPI_ANY_TAG) && wildcard_source(e, &esrc, &etag))
      k += esrc == asrc && etag == atag;
    else
      k++;
  }
  c->rq[me].done = 1;
  c->rq[me].asrc = asrc;
  c->rq[me].atag = atag;
  size_t drop = 0;
  while (drop < c->rq_n && c->rq[drop].done) {
    int *d = ad__kmap_slot(&c->prunedk, kkey(c->rq[drop].asrc, c->rq[drop].atag));
    if (!d) break;
    (*d)++;
    drop++;
  }
  if (drop) {
    memmove(c->rq, c->rq + drop, (c->rq_n - drop) * sizeof *c->rq);
    c->rq_n -= drop;
    c->rq_base += drop;
  }
  return k;
}

/* ------------------------------------------------------------------------ */
/* Per-tape participation and the sweep handshake                            */
/* ------------------------------------------------------------------------ */

typedef struct peer_note {
  ad__comm *c;
  int peer;        /* -1: collective over c */
  int sent, recvd; /* active messages to and from peer on this tape */
  /* Order-free signatures of those messages (tag and length of each), so
   * that two tapes with the same number of messages, or a message recorded
   * with another length on each side, are told apart. */
  unsigned sig_sent, sig_recvd;
  /* The tags of those messages with the range of sequence numbers in each
   * tag's stream, sent [0] and received [1]: they number the sweep messages
   * (sweeptag.c). Both sides have the same tags and ranges, or the handshake
   * fails on the signatures. */
  ad__chans chans[2];
  /* How many tapes of this process communicated with peer on c (peer -1:
   * used c collectively) before this one: both sides, or all ranks of c,
   * count the same tapes, so a rank that sweeps another of its tapes than
   * its partners do is found out. */
  int serial;
  /* c->gen when this recording used c: a recording older than c's private
   * duplicate is never swept (see ad__mpi_comm_renew). */
  int gen;
  /* Collectively (peer -1): the collective records' numbers, and the
   * reverse sweep's order of adjoint collectives (see coll.c). */
  ad__corder order;
} peer_note;

typedef struct tape_ctx {
  peer_note *notes;
  size_t n, cap;
  /* lazy sends of the running sweep */
  MPI_Request *lazy;
  double **lazy_buf;
  size_t nlazy, caplazy;
} tape_ctx;

/* A sweep that timed out, or gave up with a send or a collective still
 * pending on a private communicator, leaves messages behind: MPI cannot
 * cancel a collective, a send that completed locally may not have been
 * received, and a partner's later messages land unmatched. A partner's next
 * sweep could pair its own operations with the leftovers. Such a communicator is never swept over again on this rank:
 * later sweeps of tapes that used it fail at once with AD_ERR_MPI, and their
 * partners, which cannot tell, fail too (by the handshake or the timeout)
 * rather than mix leftovers into a gradient. */
static int taint(ad_tape *t, tape_ctx *x) {
  if (!left_pending) return 0;
  left_pending = 0;
  for (size_t i = 0; i < x->n; i++) x->notes[i].c->tainted = 1;
  (void)t;
  return 1;
}

/* What each side says in the handshake, per partner. */
enum { HS_STATUS, HS_SENT, HS_RECVD, HS_SIG_SENT, HS_SIG_RECVD, HS_DIR, HS_SERIAL, HS_W };

/* A rank that refuses a sweep over a retired communicator still tells its
 * point-to-point partners, so that they fail at once instead of after a
 * timeout. Only an error status is sent (a partner that takes an older
 * leftover first takes this one in its next sweep, and fails then); nothing
 * is received, and nothing joins a collective, where a leftover would pair
 * with it. */
static void tell_partners(tape_ctx *x, int status) {
  int *msg = calloc(HS_W, sizeof *msg);
  if (!msg) return;
  msg[HS_STATUS] = status;
  int sent = 0;
  for (size_t i = 0; i < x->n; i++) {
    peer_note *p = &x->notes[i];
    /* A recording older than the duplicate: its partners refuse it too. */
    if (p->peer < 0 || p->c->priv == MPI_COMM_NULL || p->gen != p->c->gen) continue;
    MPI_Request r;
    if (MPI_Isend(msg, HS_W, MPI_INT, p->peer, handshake_tag, p->c->priv, &r) != MPI_SUCCESS) continue;
    MPI_Request_free(&r);
    sent = 1;
  }
  if (sent)
    ad__mpi_keep(msg);
  else
    free(msg);
}

/* 1 if no sweep of this recording can be trusted: an earlier sweep over
 * one of its communicators gave up on this rank, or on some rank before
 * the communicator was renewed (then this recording is older than the
 * private duplicate and none of the ranks sweeps it). */
static int untrusted(const tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].c->tainted || x->notes[i].gen != x->notes[i].c->gen) return 1;
  return 0;
}

static int tainted_check(ad_tape *t, tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].gen != x->notes[i].c->gen) {
      ad__pending(t, AD_ERR_MPI,
                  "this recording is older than the private duplicate of a communicator it used (an earlier sweep "
                  "over it gave up on some rank, so a later recording got a fresh one); no sweep of it can be "
                  "trusted, so none was done: record again");
      return AD_ERR_MPI;
    }
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].c->tainted) {
      ad__pending(t, AD_ERR_MPI,
                  "an earlier sweep over a communicator this tape used gave up with communication still pending "
                  "there (a partner that never swept, or a timeout); no sweep of a recording made before can be "
                  "trusted, so none was done: record again (a collective over the communicator, or "
                  "ad_mpi_comm_prepare, gives a new recording a fresh private duplicate)");
      return AD_ERR_MPI;
    }
  return AD_OK;
}

/* Complete the sweep's sends. After a failure (this sweep's or an earlier
 * send's) a send is only tested, not waited for: its partner may be gone. A
 * send that is still pending keeps its buffer, which MPI may still read. */
static void lazy_finish(ad_tape *t, tape_ctx *x, int *rc) {
  for (size_t i = 0; i < x->nlazy; i++) {
    if (x->lazy[i] != MPI_REQUEST_NULL) {
      if (*rc == AD_OK) {
        *rc = ad__mpi_wait(t, &x->lazy[i], MPI_STATUS_IGNORE, "an adjoint or tangent send to complete");
      } else {
        int done = 0;
        MPI_Test(&x->lazy[i], &done, MPI_STATUS_IGNORE);
      }
    }
    if (ad__mpi_abandon(&x->lazy[i], 0))
      free(x->lazy_buf[i]);
    else
      ad__mpi_keep(x->lazy_buf[i]);
  }
  x->nlazy = 0;
}

/* Every partner says whether it is fine to sweep, which way it sweeps,
 * which of its recordings it sweeps (the serial) and,
 * pairwise, what it recorded with this rank: in[HS_W*i ..] is what partner i
 * says and out[HS_W*i ..] what this rank says. A count or signature that
 * does not match means one side recorded a message the other did not (a
 * passive send met by an active receive) or the two sides sweep different
 * tapes, which would pair adjoints with the wrong messages. Over a
 * communicator used collectively the ranks agree on the direction and the
 * recording by a minimum of (status, direction, -direction, serial,
 * -serial). */
static int handshake(ad_tape *t, tape_ctx *x, int status, int reverse, int *peer_status, int *peer_rank) {
  int rc = AD_OK;
  size_t n = x->n;
  MPI_Request *req = malloc((2 * n + 1) * sizeof *req);
  char *is_recv = malloc(2 * n + 1);
  /* Both halves live on the heap, so that a handshake that gives up can
   * leave them to MPI (see below). */
  int *in = malloc((2 * HS_W * n + 1) * sizeof *in), *out = in + HS_W * n;
  if (!req || !in || !is_recv) {
    free(req);
    free(in);
    free(is_recv);
    return AD_ERR_NOMEM;
  }
  int dir = reverse ? 1 : 2;
  size_t nr = 0;
  for (size_t i = 0; i < n; i++) {
    peer_note *p = &x->notes[i];
    if ((rc = ad__mpi_comm_ready(t, p->c)) != AD_OK) {
      if (p->c->freed) ad__pending(t, AD_ERR_MPI, "a communicator used on this tape was freed before the sweep");
      break;
    }
    int *o = &out[HS_W * i], *v = &in[HS_W * i];
    o[HS_STATUS] = v[HS_STATUS] = status;
    o[HS_SENT] = p->sent;
    o[HS_RECVD] = p->recvd;
    o[HS_SIG_SENT] = (int)(p->sig_sent & 0x7fffffffu);
    o[HS_SIG_RECVD] = (int)(p->sig_recvd & 0x7fffffffu);
    o[HS_DIR] = dir;
    o[HS_SERIAL] = p->serial;
    /* what a silent partner would have to say */
    v[HS_SENT] = o[HS_RECVD];
    v[HS_RECVD] = o[HS_SENT];
    v[HS_SIG_SENT] = o[HS_SIG_RECVD];
    v[HS_SIG_RECVD] = o[HS_SIG_SENT];
    v[HS_DIR] = dir;
    v[HS_SERIAL] = p->serial;
    int e;
    if (p->peer < 0) {
      is_recv[nr] = 0;
      v[1] = dir;
      v[2] = -dir;
      v[3] = p->serial;
      v[4] = -p->serial;
      e = MPI_Iallreduce(MPI_IN_PLACE, v, 5, MPI_INT, MPI_MIN, p->c->priv, &req[nr]);
      if (e == MPI_SUCCESS) nr++;
    } else {
      is_recv[nr] = 0;
      e = MPI_Isend(o, HS_W, MPI_INT, p->peer, handshake_tag, p->c->priv, &req[nr]);
      if (e == MPI_SUCCESS) {
        nr++;
        is_recv[nr] = 1;
        e = MPI_Irecv(v, HS_W, MPI_INT, p->peer, handshake_tag, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) nr++;
      }
    }
    if (e != MPI_SUCCESS) {
      rc = ad__mpi_fail(t, e, "the sweep handshake");
      break;
    }
  }
  for (size_t i = 0; i < nr && rc == AD_OK; i++)
    rc = ad__mpi_wait(t, &req[i], MPI_STATUS_IGNORE, "the other ranks to start their sweep");
  for (size_t i = 0; rc == AD_OK && i < n; i++) {
    /* The first cause wins over a partner's report of an MPI failure,
     * which may only be the consequence of another rank's. */
    if (in[HS_W * i] < 0 && (*peer_status == AD_OK || (*peer_status == AD_ERR_MPI && in[HS_W * i] != AD_ERR_MPI))) {
      *peer_status = in[HS_W * i];
      *peer_rank = x->notes[i].peer;
    }
  }
  for (size_t i = 0; rc == AD_OK && *peer_status == AD_OK && i < n; i++) {
    peer_note *p = &x->notes[i];
    const int *v = &in[HS_W * i], *o = &out[HS_W * i];
    int other_dir = p->peer < 0 ? (v[1] != -v[2] ? -1 : v[1]) : v[HS_DIR];
    if (other_dir != dir) {
      const char *mine = reverse ? "reverse" : "tangent";
      if (p->peer >= 0)
        ad__pending(t, AD_ERR_MPI, "rank %d runs a %s sweep while this rank runs a %s sweep; no sweep was done",
                    p->peer, reverse ? "tangent" : "reverse", mine);
      else
        ad__pending(t, AD_ERR_MPI,
                    "the ranks of a communicator this tape used do not all run a %s sweep; no sweep was done", mine);
      rc = AD_ERR_MPI;
    } else if (p->peer < 0 && v[3] != -v[4]) {
      /* Collectives pair by their order on the communicator alone: without
       * this, two tapes swept in different orders would exchange each
       * other's adjoints. */
      ad__pending(t, AD_ERR_MPI,
                  "the ranks of a communicator this tape used collectively do not all sweep the same recording "
                  "(this rank sweeps number %d of its tapes that used it, the ranks numbers %d to %d); no sweep was "
                  "done",
                  p->serial + 1, v[3] + 1, -v[4] + 1);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && (v[HS_SENT] != o[HS_RECVD] || v[HS_RECVD] != o[HS_SENT])) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d recorded %d active messages to and %d from this rank, which recorded %d from and %d to "
                  "it (a message sent with another datatype than it was received with?); no sweep was done",
                  p->peer, v[HS_SENT], v[HS_RECVD], p->recvd, p->sent);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && v[HS_SERIAL] != o[HS_SERIAL]) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d sweeps its tape number %d of those that communicated with this rank, this rank its number "
                  "%d; no sweep was done",
                  p->peer, v[HS_SERIAL] + 1, o[HS_SERIAL] + 1);
      rc = AD_ERR_MPI;
    } else if (p->peer >= 0 && (v[HS_SIG_SENT] != o[HS_SIG_RECVD] || v[HS_SIG_RECVD] != o[HS_SIG_SENT])) {
      ad__pending(t, AD_ERR_MPI,
                  "rank %d recorded messages with this rank of other tags or lengths than this tape did (does it "
                  "sweep another tape?); no sweep was done",
                  p->peer);
      rc = AD_ERR_MPI;
    }
  }
  /* A partner that never started its sweep leaves operations pending, which
   * MPI may still complete when it starts late: the receives are cancelled,
   * the sends and reductions keep the buffers for good. */
  int keep = 0;
  for (size_t i = 0; i < nr; i++) keep |= !ad__mpi_abandon(&req[i], is_recv[i]);
  taint(t, x);
  free(req);
  free(is_recv);
  if (keep)
    ad__mpi_keep(in);
  else
    free(in);
  return rc;
}

static void order_free(ad__corder *o) {
  free(o->started);
  free(o->ready);
  memset(o, 0, sizeof *o);
}

/* Number every partner's messages for the sweep's tags. A tape that
 * exchanged more messages with one partner in one direction than there
 * are tags cannot be swept: a tag of two messages could pair an adjoint
 * with the wrong one. 1 with an error on t, else 0. */
static int chans_number(ad_tape *t, tape_ctx *x) {
  for (size_t i = 0; i < x->n; i++)
    for (int d = 0; d < 2; d++) {
      ad__chans *s = &x->notes[i].chans[d];
      if (ad__chans_number(s) != AD_OK) {
        ad__pending(t, AD_ERR_NOMEM, "cannot number the messages of a sweep");
        return 1;
      }
      if (s->total > sweep_tags) {
        ad__fail(t, AD_ERR_MPI,
                 "this tape %s %lld messages %s rank %d (counting from the first to the last of each tag), more "
                 "than the %d tags below MPI_TAG_UB that tell their sweep messages apart; no sweep is possible",
                 d ? "received" : "sent", (long long)s->total, d ? "from" : "to", x->notes[i].peer, sweep_tags);
        return 1;
      }
    }
  return 0;
}

static int ctx_sweep_begin(ad_tape *t, void *ctx, int reverse, int err) {
  tape_ctx *x = ctx;
  x->nlazy = 0;
  for (size_t i = 0; i < x->n; i++) {
    ad__corder *o = &x->notes[i].order;
    if (o->started) memset(o->started, 0, (size_t)o->n);
    o->nready = 0;
  }
  int peer_status = AD_OK, peer_rank = -1;
  /* One-sided operations of an epoch that was not closed on this tape are
   * missing from it: the partners learn of it through the handshake. */
  if (err == AD_OK && chapters_sweep_check(t)) err = ad__driver_check(t);
  if (err == AD_OK && chans_number(t, x)) err = ad__driver_check(t);
  if (untrusted(x)) {
    tell_partners(x, err != AD_OK ? err : AD_ERR_MPI);
    if (err != AD_OK) return err;
    tainted_check(t, x);
    return ad__driver_check(t);
  }
  int rc = handshake(t, x, err, reverse, &peer_status, &peer_rank);
  if (err != AD_OK) return err;
  if (rc != AD_OK) {
    /* Reported by this call: the next sweep starts clean (the message
     * stays readable). */
    ad__driver_check(t);
    return rc;
  }
  if (peer_status != AD_OK) {
    if (peer_rank >= 0)
      ad__pending(t, AD_ERR_MPI, "rank %d of a communicator this tape used reported %s; no sweep was done", peer_rank,
                  ad_errname(peer_status));
    else
      ad__pending(t, AD_ERR_MPI, "a rank of a communicator this tape used reported %s; no sweep was done",
                  ad_errname(peer_status));
    return ad__driver_check(t);
  }
  return AD_OK;
}

static int ctx_sweep_end(ad_tape *t, void *ctx, int reverse, int rc) {
  (void)reverse;
  tape_ctx *x = ctx;
  /* A sweep that stopped between a nonblocking collective's start and its
   * finish leaves it running on the private communicator. */
  for (size_t i = 0; i < x->n; i++)
    if (x->notes[i].order.inflight > 0) {
      x->notes[i].order.inflight = 0;
      left_pending = 1;
    }
  lazy_finish(t, ctx, &rc);
  taint(t, ctx);
  return rc;
}

static void ctx_reset(ad_tape *t, void *ctx) {
  (void)t;
  tape_ctx *x = ctx;
  for (size_t i = 0; i < x->n; i++) {
    ad__chans_free(&x->notes[i].chans[0]);
    ad__chans_free(&x->notes[i].chans[1]);
    order_free(&x->notes[i].order);
  }
  x->n = 0;
}

static void ctx_destroy(void *ctx) {
  tape_ctx *x = ctx;
  for (size_t i = 0; i < x->nlazy; i++) free(x->lazy_buf[i]);
  for (size_t i = 0; i < x->n; i++) {
    ad__chans_free(&x->notes[i].chans[0]);
    ad__chans_free(&x->notes[i].chans[1]);
    order_free(&x->notes[i].order);
  }
  free(x->lazy);
  free(x->lazy_buf);
  free(x->notes);
  free(x);
}

/* A maximum over the ranks connected to this one by the tape's
 * communication: partners exchange what they know, as many rounds as there
 * are processes (a bound on the distance between any two of them), and
 * communicators used collectively reduce at once. Every rank of the
 * component runs the same rounds, so their messages pair up. */
static int ctx_agree_max(ad_tape *t, void *ctx, int64_t *v, int n) {
  tape_ctx *x = ctx;
  int wsize = 1, rc = AD_OK;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  size_t nn = x->n;
  MPI_Request *req = malloc((2 * nn + 1) * sizeof *req);
  char *is_recv = malloc(2 * nn + 1);
  int64_t *buf = malloc((2 * nn + 1) * (size_t)n * sizeof *buf);
  if (!req || !is_recv || !buf) {
    free(req);
    free(is_recv);
    free(buf);
    return AD_ERR_NOMEM;
  }
  for (size_t i = 0; i < nn && rc == AD_OK; i++) rc = ad__mpi_comm_ready(t, x->notes[i].c);
  for (int round = 0; rc == AD_OK && round < (wsize > 1 ? wsize - 1 : 1); round++) {
    size_t nr = 0;
    for (size_t i = 0; i < nn && rc == AD_OK; i++) {
      peer_note *p = &x->notes[i];
      int64_t *o = buf + 2 * i * (size_t)n, *in = o + n;
      memcpy(o, v, (size_t)n * sizeof *v);
      memcpy(in, v, (size_t)n * sizeof *v);
      int e;
      is_recv[nr] = 0;
      if (p->peer < 0) {
        e = MPI_Iallreduce(o, in, n, MPI_INT64_T, MPI_MAX, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) nr++;
      } else {
        e = MPI_Isend(o, n, MPI_INT64_T, p->peer, handshake_tag - 1, p->c->priv, &req[nr]);
        if (e == MPI_SUCCESS) {
          nr++;
          is_recv[nr] = 1;
          e = MPI_Irecv(in, n, MPI_INT64_T, p->peer, handshake_tag - 1, p->c->priv, &req[nr]);
          if (e == MPI_SUCCESS) nr++;
        }
      }
      if (e != MPI_SUCCESS) rc = ad__mpi_fail(t, e, "agreeing with the other ranks");
    }
    for (size_t i = 0; i < nr && rc == AD_OK; i++)
      rc = ad__mpi_wait(t, &req[i], MPI_STATUS_IGNORE, "the other ranks to agree on the sweeps");
    int keep = 0;
    for (size_t i = 0; i < nr; i++) keep |= !ad__mpi_abandon(&req[i], is_recv[i]);
    taint(t, x);
    if (keep) {
      ad__mpi_keep(buf);
      buf = NULL;
      break;
    }
    for (size_t i = 0; rc == AD_OK && i < nn; i++)
      for (int j = 0; j < n; j++)
        if (buf[(2 * i + 1) * (size_t)n + j] > v[j]) v[j] = buf[(2 * i + 1) * (size_t)n + j];
  }
  free(req);
  free(is_recv);
  free(buf);
  if (rc != AD_OK) ad__driver_check(t); /* reported by the caller's return value */
  return rc;
}

static const ad__ext_ops ctx_ops = {ctx_sweep_begin, ctx_sweep_end, ctx_reset, ctx_destroy, ctx_agree_max};

static tape_ctx *ctx_of(ad_tape *t) {
  if (t->ext_ops == &ctx_ops) return t->ext_ctx;
  if (t->ext_ops) return NULL; /* another extension owns the slot */
  tape_ctx *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  t->ext_ops = &ctx_ops;
  t->ext_ctx = x;
  return x;
}

/* One message's part of a signature: a hash of its tag and length. */
static unsigned sig_of(int tag, int count) {
  uint64_t h = ((uint64_t)(uint32_t)tag << 32 | (uint32_t)count) * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 33);
}

static void note(ad_tape *t, ad__comm *c, int peer, int recv, int tag, int count, int k) {
  tape_ctx *x = ctx_of(t);
  if (!x) {
    ad__fail(t, AD_ERR_NOMEM, "cannot attach the MPI layer's state to the tape");
    return;
  }
  size_t i = 0;
  while (i < x->n && (x->notes[i].c != c || x->notes[i].peer != peer)) i++;
  if (i == x->n) {
    if (x->n == x->cap) {
      size_t ncap = x->cap ? 2 * x->cap : 8;
      peer_note *nn = realloc(x->notes, ncap * sizeof *nn);
      if (!nn) {
        ad__fail(t, AD_ERR_NOMEM, "cannot note a communication partner");
        return;
      }
      x->notes = nn;
      x->cap = ncap;
    }
    memset(&x->notes[x->n], 0, sizeof x->notes[x->n]);
    x->notes[x->n].c = c;
    x->notes[x->n].peer = peer;
    x->notes[x->n].gen = c->gen;
    int *ns = ad__kmap_slot(&c->tapes, kkey(peer, 0)); /* peer -1 has a key of its own */
    x->notes[x->n].serial = ns ? (*ns)++ : -1;
    x->n++;
  }
  if (peer >= 0) {
    if (ad__chans_note(&x->notes[i].chans[recv != 0], tag, k) != AD_OK) {
      ad__fail(t, AD_ERR_NOMEM, "cannot note a message tag");
      return;
    }
    if (recv) {
      x->notes[i].recvd++;
      x->notes[i].sig_recvd += sig_of(tag, count);
    } else {
      x->notes[i].sent++;
      x->notes[i].sig_sent += sig_of(tag, count);
    }
  }
}

void ad__mpi_note_coll(ad_tape *t, ad__comm *c) {
  if (t) note(t, c, -1, 0, 0, 0, -1);
}

ad__corder *ad__coll_order(ad_tape *t, ad__comm *c) {
  tape_ctx *x = t->ext_ops == &ctx_ops ? t->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++)
    if (x->notes[i].c == c && x->notes[i].peer < 0) return &x->notes[i].order;
  return NULL;
}

/* After a sweep over c gave up on some rank, MPI may still pair what that
 * sweep left on the private duplicate with any later sweep over it. Every
 * rank of c takes part here, so they agree (on the user's communicator,
 * where all of them are) whether one of them retired the duplicate, and if
 * so all move to a fresh one together. The recording under way is the
 * first over the fresh duplicate: what it noted on c before moves with it,
 * while every older recording over c stays refused, on every rank. */
static int comm_renew(ad_tape *seen, ad__comm *c) {
  if (c->freed) return MPI_SUCCESS;
  int mine = c->tainted, any = 0;
  int e = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, c->user);
  if (e != MPI_SUCCESS || !any) return e;
  if ((e = ad__mpi_comm_settled(c)) != MPI_SUCCESS) return e;
  MPI_Comm fresh;
  if ((e = MPI_Comm_dup(c->user, &fresh)) != MPI_SUCCESS) return e;
  MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
  MPI_Comm *old[3] = {&c->priv, &c->rev, &c->tposed};
  MPI_Comm *keep = realloc(c->retired, (size_t)(c->nretired + 3) * sizeof *keep);
  if (keep) c->retired = keep; /* else the old duplicates are merely never freed */
  for (int i = 0; i < 3; i++) {
    if (*old[i] == MPI_COMM_NULL) continue;
    if (keep) c->retired[c->nretired++] = *old[i];
    *old[i] = MPI_COMM_NULL;
  }
  c->priv = fresh;
  c->gen++;
  c->tainted = 0;
  tape_ctx *x = seen && seen->ext_ops == &ctx_ops ? seen->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++)
    if (x->notes[i].c == c) x->notes[i].gen = c->gen;
  return MPI_SUCCESS;
}

int ad__mpi_comm_renew(ad_tape *seen, ad__comm *c) {
  if (!seen || ad__coll_order(seen, c)) return MPI_SUCCESS; /* no recording, or not its first collective over c */
  return comm_renew(seen, c);
}

int ad__coll_number(ad_tape *t, ad__comm *c) {
  ad__corder *o = ad__coll_order(t, c);
  if (!o) return -1;
  if (o->n == o->cap) {
    int ncap = o->cap ? 2 * o->cap : 16;
    unsigned char *n = realloc(o->started, (size_t)ncap);
    if (!n) {
      ad__fail(t, AD_ERR_NOMEM, "cannot number a collective record");
      return -1;
    }
    o->started = n;
    o->cap = ncap;
  }
  o->started[o->n] = 0;
  return o->n++;
}
void ad__mpi_note_peer(ad_tape *t, ad__comm *c, int peer, int recv, int tag, int count, int k) {
  if (t && peer >= 0) note(t, c, peer, recv, tag, count, k);
}

int ad__sweep_tag(ad_tape *t, ad__comm *c, int peer, int tag, int k, int was_recv) {
  tape_ctx *x = t->ext_ops == &ctx_ops ? t->ext_ctx : NULL;
  for (size_t i = 0; x && i < x->n; i++) {
    peer_note *p = &x->notes[i];
    if (p->c != c || p->peer != peer) continue;
    int64_t place = ad__chans_place(&p->chans[was_recv != 0], tag, k);
    if (place < 0 || place >= sweep_tags) break; /* the sweep's start numbered them all */
    return (int)place;
  }
  ad__pending(t, AD_ERR_MPI, "no record of the messages with rank %d (tag %d) that this sweep needs", peer, tag);
  return -1;
}

ad_tape *ad__mpi_tape(ad_tape **seen) {
  ad_tape *t = ad_tape_current();
  *seen = t && t->recording ? t : NULL;
  if (t && t->recording) ad__region_flush(t); /* communication inside a region: record the region */
  return t && t->recording && t->rec.active ? t : NULL;
}

int ad__mpi_lazy(ad_tape *t, MPI_Request r, double *buf) {
  tape_ctx *x = ctx_of(t);
  if (!x) {
    free(buf);
    return AD_ERR_NOMEM;
  }
  if (x->nlazy == x->caplazy) {
    size_t ncap = x->caplazy ? 2 * x->caplazy : 16;
    MPI_Request *nr = realloc(x->lazy, ncap * sizeof *nr);
    if (nr) x->lazy = nr;
    double **nb = realloc(x->lazy_buf, ncap * sizeof *nb);
    if (nb) x->lazy_buf = nb;
    if (!nr || !nb) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      free(buf);
      return AD_OK;
    }
    x->caplazy = ncap;
  }
  x->lazy[x->nlazy] = r;
  x->lazy_buf[x->nlazy] = buf;
  x->nlazy++;
  return AD_OK;
}

/* ------------------------------------------------------------------------ */
/* Errors and waiting                                                        */
/* ------------------------------------------------------------------------ */

/* MPI's text for an error code, or the code itself if MPI has none. */
static void error_text(int mpirc, char s[MPI_MAX_ERROR_STRING]) {
  int len = 0;
  if (MPI_Error_string(mpirc, s, &len) != MPI_SUCCESS) snprintf(s, MPI_MAX_ERROR_STRING, "MPI error %d", mpirc);
}

int ad__mpi_fail(ad_tape *t, int mpirc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  error_text(mpirc, s);
  if (t)
    ad__pending(t, AD_ERR_MPI, "%s: %s", what, s);
  else
    ad__fail_notape(AD_ERR_MPI, "%s: %s", what, s);
  return AD_ERR_MPI;
}

int ad__mpi_forward_error(ad_tape *t, int mpirc, const char *fn) {
  char s[MPI_MAX_ERROR_STRING];
  error_text(mpirc, s);
  if (t)
    ad__fail(t, AD_ERR_MPI, "%s: %s", fn, s);
  else
    ad__fail_notape(AD_ERR_MPI, "%s: %s", fn, s);
  return mpirc;
}

double ad__mpi_timeout(void) { return timeout_s; }

int ad__mpi_wait(ad_tape *t, MPI_Request *r, MPI_Status *st, const char *what) {
  double t0 = MPI_Wtime();
  unsigned spins = 0;
  for (;;) {
    int flag = 0;
    int e = MPI_Test(r, &flag, st);
    if (e != MPI_SUCCESS) return ad__mpi_fail(t, e, what);
    if (flag) return AD_OK;
    double el = MPI_Wtime() - t0;
    if (el > timeout_s) {
      /* what this side already sent may still arrive after the partner
       * moved on, and what the partner sends later lands here unmatched */
      left_pending = 1;
      if (t)
        ad__pending(t, AD_ERR_MPI,
                    "waited %.0f s for %s: a partner rank did not start its sweep, or recorded different communication",
                    el, what);
      else
        ad__fail_notape(AD_ERR_MPI, "waited %.0f s for %s", el, what);
      return AD_ERR_MPI;
    }
    /* Yield once spinning is clearly not enough: ranks oversubscribed on
     * few cores need the time to make progress themselves. */
    if (++spins > 256) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

/* Buffers of abandoned operations: kept, and reachable from here, for the
 * life of the process. */
static void **kept;
static size_t nkept, capkept;

void ad__mpi_keep(void *p) {
  if (!p) return;
  if (nkept == capkept) {
    size_t ncap = capkept ? 2 * capkept : 16;
    void **n = realloc(kept, ncap * sizeof *n);
    if (!n) return; /* then it is merely lost */
    kept = n;
    capkept = ncap;
  }
  kept[nkept++] = p;
}

int ad__mpi_abandon(MPI_Request *r, int is_recv) {
  if (*r == MPI_REQUEST_NULL) return 1;
  if (is_recv) {
    MPI_Cancel(r);
    MPI_Wait(r, MPI_STATUS_IGNORE);
    return 1;
  }
  left_pending = 1;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Buffers and vectors                                                       */
/* ------------------------------------------------------------------------ */

void ad__pack(const ad_real *x, int n, double *v) {
  for (int i = 0; i < n; i++) v[i] = x[i].v;
}

void ad__unpack(ad_tape *t, ad_real *x, int n, const double *v, ad_index *out) {
  for (int i = 0; i < n; i++) {
    x[i] = t ? ad__new_input(t, v[i]) : ad__const(v[i]);
    if (out) out[i] = x[i].i;
  }
}

int ad__handles(ad_tape *t, const ad_real *x, int n, ad_index *in, const char *op) {
  for (int i = 0; i < n; i++) {
    if (x[i].i && (x[i].e != t->rec.epoch || x[i].i > t->rec.next)) {
      ad__fail(t, AD_ERR_STALE_HANDLE, "%s: buffer element %d has a handle from another tape or recording", op, i);
      return AD_ERR_STALE_HANDLE;
    }
    in[i] = x[i].i;
  }
  return AD_OK;
}

void ad__adj_take(ad_tape *t, const ad_index *h, int n, double *buf) {
  double *adj = t->adj;
  for (int i = 0; i < n; i++) {
    buf[i] = h[i] ? adj[h[i]] : 0.0;
    if (h[i]) adj[h[i]] = 0.0;
  }
}

void ad__adj_add(ad_tape *t, const ad_index *h, int n, const double *buf, const double *w) {
  double *adj = t->adj;
  for (int i = 0; i < n; i++)
    if (h[i]) adj[h[i]] += w ? w[i] * buf[i] : buf[i];
}

void ad__tan_get(ad_tape *t, const ad_index *h, int n, double *buf) {
  for (int i = 0; i < n; i++) buf[i] = h[i] ? t->tan[h[i]] : 0.0;
}

void ad__tan_set(ad_tape *t, const ad_index *h, int n, const double *buf) {
  for (int i = 0; i < n; i++)
    if (h[i]) t->tan[h[i]] = buf[i];
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

static void mrec_destroy(void *data) {
  ad__mrec *r = data;
  /* A sweep that failed half-way left a receive behind: cancel it before
   * its buffer goes. */
  int was = left_pending;
  if (!ad__mpi_abandon(&r->sreq, !r->ops->coll)) { /* a collective MPI may still use: its communicator is retired */
    r->c->tainted = 1;
    left_pending = was;
    ad__mpi_keep(r->sbuf);
    ad__mpi_keep(r->sbuf2);
    ad__mpi_keep(r->keep);
    r->sbuf = r->sbuf2 = NULL;
    r->keep = NULL;
  }
  if (r->ops->lost) r->ops->lost(r);
  if (r->link) r->link->link = NULL;
  free(r->sbuf);
  free(r->sbuf2);
  free(r->keep);
  free(r->in);
  free(r->out);
  free(r->w);
  free(r->cnt);
  free(r->dsp);
  free(r->cnt2);
  free(r->dsp2);
  if (r->ops->free) r->ops->free(r);
  free(r);
}

/* A sweep's action of record r: its kind's reverse or tangent action, on a
 * communicator that still exists. */
static int mrec_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  if (r->c->freed) {
    ad__pending(t, AD_ERR_MPI, "a communicator recorded on this tape was freed before the sweep");
    return AD_ERR_MPI;
  }
  return reverse ? r->ops->reverse(t, r) : r->ops->tangent(t, r);
}
static int mrec_reverse(ad_tape *t, void *data) { return mrec_sweep(t, data, 1); }
static int mrec_forward(ad_tape *t, void *data) { return mrec_sweep(t, data, 0); }

static const ad__record_ops mrec_ops = {"MPI communication", mrec_reverse, mrec_forward, mrec_destroy,
                                        ad__mrec_describe};

ad__mrec *ad__mrec_push(ad_tape *t, const ad__mkind *kind, ad__comm *c, int nin, int nout) {
  ad__mrec *r = calloc(1, sizeof *r);
  if (r) {
    ad__mrec_rekind(r, kind);
    r->c = c;
    r->sreq = MPI_REQUEST_NULL;
    r->nin = nin;
    r->nout = nout;
    if (nin) r->in = calloc((size_t)nin, sizeof *r->in);
    if (nout) r->out = calloc((size_t)nout, sizeof *r->out);
  }
  if (!r || (nin && !r->in) || (nout && !r->out)) {
    if (r) mrec_destroy(r);
    ad__fail(t, AD_ERR_NOMEM, "no memory for an MPI communication record");
    return NULL;
  }
  if (kind->coll && (r->seq = ad__coll_number(t, c)) < 0) {
    mrec_destroy(r);
    return NULL;
  }
  size_t bytes = sizeof *r + (size_t)(nin + nout) * sizeof(ad_index);
  if (ad__record_push(t, &mrec_ops, r, bytes) != AD_OK) return NULL;
  ad__mpi_counters.records++;
  return r;
}

const ad__mkind *ad__mkind_find(const ad__mkind *tab, size_t n, int kind) {
  for (size_t i = 0; i < n; i++)
    if (tab[i].kind == kind) return &tab[i];
  return NULL;
}

void ad__mrec_rekind(ad__mrec *r, const ad__mkind *kind) {
  r->kind = kind->kind;
  r->ops = kind;
}

int ad__mpi_comm_transposed(ad__comm *c, MPI_Comm *out) {
  int topo = MPI_UNDEFINED, rc = MPI_Topo_test(c->priv, &topo);
  if (rc != MPI_SUCCESS) return rc;
  if (topo != MPI_DIST_GRAPH) { /* Cartesian and graph neighbourhoods are symmetric */
    *out = c->priv;
    return MPI_SUCCESS;
  }
  if (c->tposed == MPI_COMM_NULL) {
    int indeg, outdeg, weighted;
    rc = MPI_Dist_graph_neighbors_count(c->priv, &indeg, &outdeg, &weighted);
    if (rc != MPI_SUCCESS) return rc;
    int *src = malloc(sizeof(int) * (size_t)(indeg + 1)), *dst = malloc(sizeof(int) * (size_t)(outdeg + 1));
    if (!src || !dst) {
      free(src);
      free(dst);
      return MPI_ERR_NO_MEM;
    }
    /* GCC 12 takes MPICH's MPI_UNWEIGHTED (a pointer to an empty object) for
     * an array too small for the weights these calls are declared to access. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
    rc = MPI_Dist_graph_neighbors(c->priv, indeg, src, MPI_UNWEIGHTED, outdeg, dst, MPI_UNWEIGHTED);
    if (rc == MPI_SUCCESS)
      rc = MPI_Dist_graph_create_adjacent(c->priv, outdeg, dst, MPI_UNWEIGHTED, indeg, src, MPI_UNWEIGHTED,
                                          MPI_INFO_NULL, 0, &c->tposed);
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic pop
#endif
    free(src);
    free(dst);
    if (rc != MPI_SUCCESS) {
      c->tposed = MPI_COMM_NULL;
      return rc;
    }
    MPI_Comm_set_errhandler(c->tposed, MPI_ERRORS_RETURN);
  }
  *out = c->tposed;
  return MPI_SUCCESS;
}

int ad__mpi_comm_reversed(ad__comm *c, MPI_Comm *rev) {
  if (c->rev == MPI_COMM_NULL) {
    int rc = MPI_Comm_split(c->priv, 0, c->size - 1 - c->rank, &c->rev);
    if (rc != MPI_SUCCESS) {
      c->rev = MPI_COMM_NULL;
      return rc;
    }
    MPI_Comm_set_errhandler(c->rev, MPI_ERRORS_RETURN);
  }
  *rev = c->rev;
  return MPI_SUCCESS;
}
