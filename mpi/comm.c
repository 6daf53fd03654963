/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI layer infrastructure, the hub every chapter uses: set-up and
 * clean-up, private communicators, message sequencing, waiting with a
 * timeout, the buffer and vector helpers, and the records with their table
 * of kinds (ad__mkind) and the chapters' hooks (ad__mpi_chapter). The
 * per-tape participation and the sweep handshake are handshake.c's. */
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
int ad__mpi_left_pending;
static int timeout_set; /* ad_mpi_set_timeout was called: the environment does not override it */
/* Sweep messages take the tags 0 .. ad__mpi_sweep_tags - 1 of the private
 * communicators; the two above are the handshake's and the agreement's. */
int ad__mpi_sweep_tags;
int ad__mpi_handshake_tag;

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
AD__MPI_ATTR_DELETE(comm_delete, MPI_Comm, comm_release)

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
int ad__mpi_chapters_sweep_check(ad_tape *t) {
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
  ad__mpi_handshake_tag = flag && ub && *ub >= 32767 ? *ub : 32767; /* MPI promises 32767 */
  ad__mpi_sweep_tags = ad__mpi_handshake_tag - 1;

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

uint64_t ad__kmap_key(int peer, int tag) { return ((uint64_t)(uint32_t)peer << 32 | (uint32_t)tag) + 1; }

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
  int *v = ad__kmap_slot(&c->sendk, ad__kmap_key(dest, tag));
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
  MPI_Request r = e->slot >= 0 ? ad__req_mpi(e->slot, e->gen) : MPI_REQUEST_NULL;
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
  int *pr = ad__kmap_slot(&c->prunedk, ad__kmap_key(asrc, atag));
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
    int *d = ad__kmap_slot(&c->prunedk, ad__kmap_key(c->rq[drop].asrc, c->rq[drop].atag));
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
/* Errors and waiting                                                        */
/* ------------------------------------------------------------------------ */

/* MPI's text for an error code, or the code itself if MPI has none. */
static void error_text(int mpirc, char s[MPI_MAX_ERROR_STRING]) {
  int len = 0;
  if (MPI_Error_string(mpirc, s, &len) != MPI_SUCCESS) snprintf(s, MPI_MAX_ERROR_STRING, "MPI error %d", mpirc);
}

/* MPI's error mpirc in `what` as an error on t (pending for a sweep's
 * report, else sticky), or as the thread's error without a tape. */
static void mpi_error(ad_tape *t, int pending, int mpirc, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  error_text(mpirc, s);
  if (!t)
    ad__fail_notape(AD_ERR_MPI, "%s: %s", what, s);
  else if (pending)
    ad__pending(t, AD_ERR_MPI, "%s: %s", what, s);
  else
    ad__fail(t, AD_ERR_MPI, "%s: %s", what, s);
}

int ad__mpi_fail(ad_tape *t, int mpirc, const char *what) {
  mpi_error(t, 1, mpirc, what);
  return AD_ERR_MPI;
}

int ad__mpi_forward_error(ad_tape *t, int mpirc, const char *fn) {
  mpi_error(t, 0, mpirc, fn);
  return mpirc;
}

int ad__mpi_refuse(int mpicode, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (seen)
    ad__fail(seen, AD_ERR_MPI, "%s", msg);
  else
    ad__fail_notape(AD_ERR_MPI, "%s", msg);
  return mpicode;
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
      ad__mpi_left_pending = 1;
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
  ad__mpi_left_pending = 1;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Messages on active data: their numbers and records                        */
/* ------------------------------------------------------------------------ */

ad__mrec *ad__mpi_send_record(ad__comm *c, ad_tape *t, ad_tape *seen, int dest, int tag, const ad_real *buf, int n,
                              int kind, const char *fn) {
  if (dest == MPI_PROC_NULL) return NULL;
  int k = ad__send_seq(c, dest, tag);
  ad__mpi_note_peer(seen, c, dest, 0, tag, n, k);
  ad__mrec *r = t ? ad__mrec_push(t, kind, c, n, 0) : NULL;
  if (r) {
    r->peer = dest;
    r->tag = tag;
    r->k = k;
    ad__handles(t, buf, n, r->in, fn);
  }
  return r;
}

/* Finish an active receive of n values from (asrc, atag): sequence it, and
 * record it with fresh handles for the received elements. */
ad__mrec *ad__mpi_recv_record(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st, int n,
                              int kind) {
  int k = ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t ? ad__mrec_push(t, kind, c, 0, n) : NULL;
  if (r) {
    r->peer = st->MPI_SOURCE;
    r->tag = st->MPI_TAG;
    r->k = k;
  }
  return r;
}

ad__mrec *ad__mpi_recv_deliver(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st,
                               ad_real *buf, const double *v, int kind) {
  int n = ad__mpi_received(st);
  ad__mrec *r = ad__mpi_recv_record(c, t, seen, post, st, n, kind);
  ad__unpack(r ? t : NULL, buf, n, v, r ? r->out : NULL);
  return r;
}

int ad__mpi_received(const MPI_Status *st) {
  int n = 0;
  MPI_Get_count(st, MPI_DOUBLE, &n);
  return n == MPI_UNDEFINED ? 0 : n;
}

/* An active receive that failed with MPI error `rc`. A truncated message was
 * taken off the wire all the same: count it in its stream, so that later
 * messages keep their sequence numbers, and note its sender, so that the
 * sender's sweep learns of this rank's error in the handshake instead of
 * waiting for it. Any other failure took no message. */
void ad__mpi_recv_failed(ad__comm *c, ad_tape *seen, uint64_t post, int rc, const MPI_Status *st) {
  int cls = MPI_ERR_OTHER;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_TRUNCATE && st->MPI_SOURCE >= 0) {
    ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
    ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, -1, -1);
  } else {
    ad__recv_complete(c, post, -2, -2);
  }
}

void ad__mrec_link(ad__mrec *start, ad__mrec *done) {
  if (!start || !done) return;
  done->link = start;
  start->link = done;
}

/* ------------------------------------------------------------------------ */
/* Buffers and vectors                                                       */
/* ------------------------------------------------------------------------ */

int ad__mpi_as_v(int v, MPI_Comm comm, int n, const int **cnt, const int **dsp, int **block) {
  *block = NULL;
  if (v) return MPI_SUCCESS;
  int size = 0;
  MPI_Comm_size(comm, &size);
  int *a = malloc(2 * (size_t)(size > 0 ? size : 1) * sizeof *a);
  if (!a) return MPI_ERR_NO_MEM;
  for (int j = 0; j < size; j++) {
    a[j] = n;
    a[size + j] = j * n;
  }
  *cnt = *block = a;
  *dsp = a + size;
  return MPI_SUCCESS;
}

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
  int was = ad__mpi_left_pending;
  if (!ad__mpi_abandon(&r->sreq, !r->ops->coll)) { /* a collective MPI may still use: its communicator is retired */
    r->c->tainted = 1;
    ad__mpi_left_pending = was;
    ad__mpi_keep(r->sbuf);
    ad__mpi_keep(r->sbuf2);
    ad__mpi_keep(r->keep);
    r->sbuf = r->sbuf2 = NULL;
    r->keep = NULL;
  }
  if (r->ops->act->lost) r->ops->act->lost(r);
  if (r->link) r->link->link = NULL;
  if (r->ops->act->free) r->ops->act->free(r);
  AD__FREE_EACH(r->sbuf, r->sbuf2, r->keep, r->in, r->out, r->w, r->cnt, r->dsp, r->cnt2, r->dsp2, r);
}

/* A sweep's action of record r: its kind's reverse or tangent action, on a
 * communicator that still exists. */
static int mrec_sweep(ad_tape *t, ad__mrec *r, int reverse) {
  if (r->c->freed) {
    ad__pending(t, AD_ERR_MPI, "a communicator recorded on this tape was freed before the sweep");
    return AD_ERR_MPI;
  }
  return reverse ? r->ops->act->reverse(t, r) : r->ops->act->tangent(t, r);
}
static int mrec_reverse(ad_tape *t, void *data) { return mrec_sweep(t, data, 1); }
static int mrec_forward(ad_tape *t, void *data) { return mrec_sweep(t, data, 0); }

static const ad__record_ops mrec_ops = {"MPI communication", mrec_reverse, mrec_forward, mrec_destroy,
                                        ad__mrec_describe};

ad__mrec *ad__mrec_push(ad_tape *t, int kind, ad__comm *c, int nin, int nout) {
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
  if (r->ops->coll && (r->seq = ad__coll_number(t, c)) < 0) {
    mrec_destroy(r);
    return NULL;
  }
  size_t bytes = sizeof *r + (size_t)(nin + nout) * sizeof(ad_index);
  if (ad__record_push(t, &mrec_ops, r, bytes) != AD_OK) return NULL;
  ad__mpi_counters.records++;
  return r;
}

void ad__mrec_rekind(ad__mrec *r, int kind) {
  r->kind = kind;
  r->ops = ad__mkind_of(kind);
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
