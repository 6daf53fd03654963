/* SPDX-License-Identifier: BSD-3-Clause */
/* Point to point and broadcast on datatypes derived from AD_MPI_REAL,
 * blocking, nonblocking and persistent (see types.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types_impl.h"

/* ------------------------------------------------------------------------ */
/* Types mixing AD_MPI_REAL with passive fields (point to point, bcast)     */
/* ------------------------------------------------------------------------ */

/* One message carries both: the typemap's elements in order, an active one
 * as its 8-byte value, a passive one as its bytes, sent as MPI_BYTE. So the
 * wire has the size of the same type built on MPI_DOUBLE (MPI_Get_count on
 * the status counts items of the type), matching works as for any message
 * (wildcards included), and the active values are recorded like an
 * AD_MPI_REAL message of their number. */
static const ad__dtype *mixed(MPI_Datatype t) {
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || ad__types_derived_from_real(t, 0) != 1) return NULL;
  const ad__dtype *d = ad__dtype_get(t);
  return d && !d->why && d->npass ? d : NULL;
}

static void mixed_pack(const ad__dtype *d, const void *buf, int items, char *wire, ad_real *act) {
  const char *b = buf;
  size_t pos = 0, k = 0;
  for (int i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      const char *at = b + (MPI_Aint)i * d->ext + d->e[j].off;
      if (d->e[j].size == 0) {
        memcpy(&act[k], at, sizeof(ad_real));
        memcpy(wire + pos, &act[k].v, sizeof(double));
        pos += sizeof(double);
        k++;
      } else {
        memcpy(wire + pos, at, (size_t)d->e[j].size);
        pos += (size_t)d->e[j].size;
      }
    }
}

/* The passive bytes of the first `bytes` of the wire into buf, the active
 * values into v; returns how many active values arrived. */
static int mixed_unpack(const ad__dtype *d, void *buf, int items, const char *wire, long long bytes, double *v) {
  char *b = buf;
  long long pos = 0;
  int k = 0;
  for (int i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      char *at = b + (MPI_Aint)i * d->ext + d->e[j].off;
      int sz = d->e[j].size ? d->e[j].size : (int)sizeof(double);
      if (pos + sz > bytes) return k;
      if (d->e[j].size == 0)
        memcpy(&v[k++], wire + pos, sizeof(double));
      else
        memcpy(at, wire + pos, (size_t)sz);
      pos += sz;
    }
  return k;
}

typedef struct mbuf {
  char *wire;
  ad_real *act;
  double *v;
  int nact;
  long long bytes;
} mbuf;

static int mbuf_open(mbuf *m, const char *fn, const ad__dtype *d, int count) {
  memset(m, 0, sizeof *m);
  if (count < 0) return MPI_ERR_COUNT;
  long long nact = (long long)count * d->n, bytes = (long long)count * d->wire;
  if (nact > 0x7fffffff || bytes > 0x7fffffff) return ad__dtype_refuse(fn, "a message of more than 2^31-1 bytes");
  m->nact = (int)nact;
  m->bytes = bytes;
  m->wire = malloc((size_t)bytes + 1);
  m->act = malloc((size_t)(nact + 1) * sizeof *m->act);
  m->v = malloc((size_t)(nact + 1) * sizeof *m->v);
  return m->wire && m->act && m->v ? 0 : MPI_ERR_NO_MEM;
}

static void mbuf_close(mbuf *m) {
  free(m->wire);
  free(m->act);
  free(m->v);
}

/* What a call on a mixed type needs: its communicator's record, the tapes
 * and the buffers of count items. 0 or the error to return; the caller
 * closes m either way. */
static int mixed_begin(MPI_Comm comm, const char *fn, const ad__dtype *d, int count, ad__comm **c, ad_tape **t,
                       ad_tape **seen, mbuf *m) {
  int err;
  memset(m, 0, sizeof *m);
  *t = *seen = NULL;
  if (!(*c = ad__mpi_comm(comm, &err))) return err;
  *t = ad__mpi_tape(seen);
  return mbuf_open(m, fn, d, count);
}

/* The send half: pack, sequence, record; the caller sends m->wire. */
static void mixed_send_note(ad__comm *c, ad_tape *t, ad_tape *seen, const char *fn, const ad__dtype *d, const void *buf,
                            int count, int dest, int tag, mbuf *m) {
  mixed_pack(d, buf, count, m->wire, m->act);
  ad__mpi_send_record(c, t, seen, dest, tag, m->act, m->nact, AD__M_SEND, fn);
}

/* The receive half once MPI_Recv returned rc with status st. */
static int mixed_recv_done(ad__comm *c, ad_tape *t, ad_tape *seen, const char *fn, const ad__dtype *d, void *buf,
                           int count, uint64_t post, int rc, const MPI_Status *st, mbuf *m) {
  if (rc != MPI_SUCCESS) {
    ad__mpi_recv_failed(c, seen, post, rc, st);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  int got = 0;
  MPI_Get_count(st, MPI_BYTE, &got);
  if (got == MPI_UNDEFINED || got < 0) got = 0;
  int n = mixed_unpack(d, buf, count, m->wire, got, m->v);
  ad__mrec *r = ad__mpi_recv_record(c, t, seen, post, st, n, AD__M_RECV);
  ad__unpack(r ? t : NULL, m->act, n, m->v, r ? r->out : NULL);
  ad__types_dt_scatter(d, buf, m->act, n);
  return MPI_SUCCESS;
}

static int mixed_send(ad__dt_send_fn fn, const char *name, const ad__dtype *d, const void *buf, int count, int dest,
                      int tag, MPI_Comm comm) {
  ad__comm *c;
  ad_tape *t, *seen;
  mbuf m;
  int rc = mixed_begin(comm, name, d, count, &c, &t, &seen, &m);
  if (rc == 0) {
    mixed_send_note(c, t, seen, name, d, buf, count, dest, tag, &m);
    rc = fn(m.wire, (int)m.bytes, MPI_BYTE, dest, tag, comm);
    if (rc != MPI_SUCCESS)
      ad__mpi_forward_error(seen, rc, name);
    else if (dest != MPI_PROC_NULL)
      ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
  }
  mbuf_close(&m);
  return rc;
}

static int mixed_recv(const ad__dtype *d, void *buf, int count, int source, int tag, MPI_Comm comm, MPI_Status *status,
                      const char *fn) {
  if (source == MPI_PROC_NULL) return MPI_Recv(NULL, 0, MPI_BYTE, source, tag, comm, status);
  ad__comm *c;
  ad_tape *t, *seen;
  mbuf m;
  int rc = mixed_begin(comm, fn, d, count, &c, &t, &seen, &m);
  if (rc == 0) {
    MPI_Status st;
    st.MPI_SOURCE = st.MPI_TAG = -1;
    uint64_t post = ad__recv_post(c, source, tag);
    rc = MPI_Recv(m.wire, (int)m.bytes, MPI_BYTE, source, tag, comm, &st);
    rc = mixed_recv_done(c, t, seen, fn, d, buf, count, post, rc, &st, &m);
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st;
  }
  mbuf_close(&m);
  return rc;
}

/* Sendrecv with a mixed type on either side: the send half starts
 * nonblocking (recorded as a send), the receive half completes, then the
 * send; a side that is not mixed goes through its own wrapper. */
static int mixed_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                          MPI_Status *status, const char *fn) {
  const ad__dtype *ds = mixed(sendtype), *dr = mixed(recvtype);
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  mbuf m;
  memset(&m, 0, sizeof m);
  MPI_Request q = MPI_REQUEST_NULL;
  ad_mpi_request aq = AD_MPI_REQUEST_NULL;
  int rc;
  if (ds) {
    rc = mbuf_open(&m, fn, ds, sendcount);
    if (rc == 0) {
      mixed_send_note(c, t, seen, fn, ds, sendbuf, sendcount, dest, sendtag, &m);
      rc = MPI_Isend(m.wire, (int)m.bytes, MPI_BYTE, dest, sendtag, comm, &q);
      if (rc != MPI_SUCCESS)
        ad__mpi_forward_error(seen, rc, fn);
      else if (dest != MPI_PROC_NULL)
        ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
    }
  } else {
    rc = ad_mpi_isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &aq);
  }
  if (rc == MPI_SUCCESS)
    rc = dr ? mixed_recv(dr, recvbuf, recvcount, source, recvtag, comm, status, fn)
            : ad_mpi_recv(recvbuf, recvcount, recvtype, source, recvtag, comm, status);
  /* the send half is waited for whatever became of the receive */
  int rc2 = ds ? (q == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Wait(&q, MPI_STATUS_IGNORE))
               : (aq.slot < 0 && aq.mpi == MPI_REQUEST_NULL ? MPI_SUCCESS : ad_mpi_wait(&aq, MPI_STATUS_IGNORE));
  if (ds && rc2 != MPI_SUCCESS) ad__mpi_forward_error(seen, rc2, fn);
  mbuf_close(&m);
  return rc != MPI_SUCCESS ? rc : rc2;
}

static int mixed_bcast(const ad__dtype *d, void *buffer, int count, int root, MPI_Comm comm) {
  const char *fn = "ad_mpi_bcast";
  ad__comm *c;
  ad_tape *seen, *t;
  int err = ad__mpi_coll_enter(comm, &c, &t, &seen);
  if (err != MPI_SUCCESS) return err;
  int me = c->rank == root;
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc == 0) {
    ad__mrec *r = t ? ad__mrec_push(t, AD__M_BCAST, c, me ? m.nact : 0, 0) : NULL;
    if (r) r->root = root;
    if (me) {
      mixed_pack(d, buffer, count, m.wire, m.act);
      if (r) ad__handles(t, m.act, m.nact, r->in, fn);
    }
    rc = MPI_Bcast(m.wire, (int)m.bytes, MPI_BYTE, root, comm);
    if (me) ad__mpi_counters.forward_bytes += (uint64_t)(c->size - 1) * (uint64_t)m.nact * sizeof(double);
    if (rc == MPI_SUCCESS && !me) {
      if (r && !(r->out = calloc((size_t)m.nact + 1, sizeof *r->out)))
        ad__fail(t, AD_ERR_NOMEM, "ad_mpi_bcast: no memory");
      if (r && r->out) r->nout = m.nact;
      int n = mixed_unpack(d, buffer, count, m.wire, m.bytes, m.v);
      ad__unpack(r && r->out ? t : NULL, m.act, n, m.v, r && r->out ? r->out : NULL);
      ad__types_dt_scatter(d, buffer, m.act, n);
    }
    if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, fn);
  }
  mbuf_close(&m);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Nonblocking point to point on derived types                               */
/* ------------------------------------------------------------------------ */

/* A receive: its elements arrive in a wire buffer (doubles for a type of
 * active values only, the mixed layout otherwise) and are scattered into the
 * user's layout when a completion call completes the request. */
typedef struct nbrecv {
  const ad__dtype *d;
  ad__comm *c;
  void *ubuf;
  int count;
  uint64_t post;
  mbuf m;
} nbrecv;

static void nbrecv_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  nbrecv *q = ctx;
  int n = 0;
  if (q->d->npass) {
    int got = 0;
    MPI_Get_count(st, MPI_BYTE, &got);
    n = mixed_unpack(q->d, q->ubuf, q->count, q->m.wire, got == MPI_UNDEFINED || got < 0 ? 0 : got, q->m.v);
  } else {
    MPI_Get_count(st, MPI_DOUBLE, &n);
    if (n == MPI_UNDEFINED || n < 0) n = 0;
    memcpy(q->m.v, q->m.wire, (size_t)n * sizeof(double));
  }
  int k = ad__recv_complete(q->c, q->post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, q->c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t && start ? ad__mrec_push(t, AD__M_IRECV_DONE, q->c, 0, n) : NULL;
  if (r) {
    r->peer = st->MPI_SOURCE;
    r->tag = st->MPI_TAG;
    r->k = k;
    r->link = start;
    start->link = r;
  }
  ad__unpack(r ? t : NULL, q->m.act, n, q->m.v, r ? r->out : NULL);
  ad__types_dt_scatter(q->d, q->ubuf, q->m.act, n);
  mbuf_close(&q->m);
  free(q);
}

static void nbrecv_failed(void *ctx, int rc) {
  nbrecv *q = ctx;
  /* At MPI_Finalize (MPI_ERR_PENDING) the communicators are gone already. */
  if (rc != MPI_ERR_PENDING) ad__recv_complete(q->c, q->post, -2, -2);
  ad__mpi_keep(q->m.wire);
  free(q->m.act);
  free(q->m.v);
  free(q);
}

static const ad__req_ops nbrecv_ops = {nbrecv_complete, nbrecv_failed};

/* An irecv (message NULL) or an imrecv of a probed message. */
static int dt_irecv_any(const char *fn, void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        ad_mpi_message *message, ad_mpi_request *request) {
  const ad__dtype *d = ad__dtype_get(type);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  if (count < 0) return MPI_ERR_COUNT;
  if (!message && source == MPI_PROC_NULL) {
    MPI_Request mq;
    int rc = MPI_Irecv(NULL, 0, MPI_BYTE, source, tag, comm, &mq);
    return rc == MPI_SUCCESS ? ad__req_new(request, mq, NULL, NULL, NULL, NULL) : rc;
  }
  ad__comm *c = NULL;
  if (!message) {
    int err;
    if (!(c = ad__mpi_comm(comm, &err))) return err;
  }
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  nbrecv *q = calloc(1, sizeof *q);
  if (!q) return MPI_ERR_NO_MEM;
  int rc = mbuf_open(&q->m, fn, d, count);
  if (rc != 0) {
    mbuf_close(&q->m);
    free(q);
    return rc;
  }
  MPI_Message mm = MPI_MESSAGE_NULL;
  uint64_t post = 0;
  if (message) { /* taken once nothing else can fail before it is received */
    int got = ad__msg_take(message, fn, &c, &post, &mm);
    if (got <= 0) {
      mbuf_close(&q->m);
      free(q);
      if (got < 0) return -got;
      MPI_Request mq;
      rc = MPI_Imrecv(NULL, 0, MPI_BYTE, &message->mpi, &mq);
      return rc == MPI_SUCCESS ? ad__req_new(request, mq, NULL, NULL, NULL, NULL) : rc;
    }
  } else {
    post = ad__recv_post(c, source, tag);
  }
  q->d = d;
  q->c = c;
  q->ubuf = buf;
  q->count = count;
  q->post = post;
  ad__mrec *r = t ? ad__mrec_push(t, AD__M_IRECV, c, 0, 0) : NULL;
  MPI_Request mq = MPI_REQUEST_NULL;
  MPI_Datatype wt = d->npass ? MPI_BYTE : MPI_DOUBLE;
  int wn = d->npass ? (int)q->m.bytes : q->m.nact;
  rc = message ? MPI_Imrecv(q->m.wire, wn, wt, &mm, &mq) : MPI_Irecv(q->m.wire, wn, wt, source, tag, comm, &mq);
  if (rc == MPI_SUCCESS) rc = ad__req_new(request, mq, r ? t : NULL, r, &nbrecv_ops, q);
  if (rc != MPI_SUCCESS) {
    /* MPI_ERR_NO_MEM from the slot table leaves a posted receive: it cannot
     * be taken back, so its buffer stays */
    ad__recv_complete(c, q->post, -2, -2);
    if (mq != MPI_REQUEST_NULL)
      ad__mpi_keep(q->m.wire);
    else
      free(q->m.wire);
    free(q->m.act);
    free(q->m.v);
    free(q);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  ad__recv_attach(c, q->post, request->slot, request->gen);
  return MPI_SUCCESS;
}

int ad__dt_irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, ad_mpi_request *request) {
  return dt_irecv_any("ad_mpi_irecv", buf, count, type, source, tag, comm, NULL, request);
}

int ad__dt_imrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, ad_mpi_request *request) {
  return dt_irecv_any("ad_mpi_imrecv", buf, count, type, 0, 0, MPI_COMM_NULL, message, request);
}

int ad__dt_mrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, MPI_Status *status) {
  const char *fn = "ad_mpi_mrecv";
  const ad__dtype *d = ad__dtype_get(type);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc != 0) {
    mbuf_close(&m);
    return rc;
  }
  ad__comm *c;
  uint64_t post;
  MPI_Message mm;
  int got = ad__msg_take(message, fn, &c, &post, &mm);
  if (got <= 0) {
    mbuf_close(&m);
    return got < 0 ? -got : MPI_Mrecv(NULL, 0, MPI_BYTE, &message->mpi, status);
  }
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  rc = d->npass ? MPI_Mrecv(m.wire, (int)m.bytes, MPI_BYTE, &mm, &st) : MPI_Mrecv(m.wire, m.nact, MPI_DOUBLE, &mm, &st);
  rc = mixed_recv_done(c, t, seen, fn, d, buf, count, post, rc, &st, &m);
  if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st;
  mbuf_close(&m);
  return rc;
}

/* A send of a type with passive fields: the wire buffer lives until the
 * request completes. */
static void nbsend_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  (void)seen;
  (void)st;
  if (t && start) ad__mrec_link(start, ad__mrec_push(t, AD__M_ISEND_DONE, start->c, 0, 0));
  free(ctx);
}

static void nbsend_failed(void *ctx, int rc) {
  (void)rc;
  ad__mpi_keep(ctx);
}

static const ad__req_ops nbsend_ops = {nbsend_complete, nbsend_failed};

static int mixed_isend(ad__dt_mpi_isend_fn mpifn, const char *fn, const ad__dtype *d, const void *buf, int count,
                       int dest, int tag, MPI_Comm comm, ad_mpi_request *request) {
  ad__comm *c;
  ad_tape *t, *seen;
  mbuf m;
  int rc = mixed_begin(comm, fn, d, count, &c, &t, &seen, &m);
  if (rc != 0) {
    mbuf_close(&m);
    return rc;
  }
  mixed_pack(d, buf, count, m.wire, m.act);
  ad__mrec *r = ad__mpi_send_record(c, t, seen, dest, tag, m.act, m.nact, AD__M_ISEND, fn);
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = mpifn(m.wire, (int)m.bytes, MPI_BYTE, dest, tag, comm, &mq);
  if (rc == MPI_SUCCESS) rc = ad__req_new(request, mq, r ? t : NULL, r, &nbsend_ops, m.wire);
  if (rc == MPI_SUCCESS) {
    if (dest != MPI_PROC_NULL) ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
    free(m.act);
    free(m.v);
    return MPI_SUCCESS;
  }
  if (mq != MPI_REQUEST_NULL)
    ad__mpi_keep(m.wire);
  else
    free(m.wire);
  free(m.act);
  free(m.v);
  return ad__mpi_forward_error(seen, rc, fn);
}

int ad__dt_send(ad__dt_send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_send(fn, name, md, buf, count, dest, tag, comm);
  side s;
  int rc = ad__types_side_open(&s, name, type, buf, count, 1);
  if (rc == 0)
    rc = fn(ad__types_side_buf(&s), ad__types_side_count(&s, count), ad__types_side_type(&s, type), dest, tag, comm);
  ad__types_side_close(&s);
  return rc;
}

int ad__dt_isend(ad__dt_mpi_isend_fn mpifn, ad__dt_isend_fn fn, const char *name, const void *buf, int count,
                 MPI_Datatype type, int dest, int tag, MPI_Comm comm, ad_mpi_request *request) {
  /* The wrapper on AD_MPI_REAL takes the values and handles at once: the
   * gathered copy can go when it returns. */
  const ad__dtype *md = mixed(type);
  if (md) return mixed_isend(mpifn, name, md, buf, count, dest, tag, comm, request);
  side s;
  int rc = ad__types_side_open(&s, name, type, buf, count, 1);
  if (rc == 0)
    rc = fn(ad__types_side_buf(&s), ad__types_side_count(&s, count), ad__types_side_type(&s, type), dest, tag, comm,
            request);
  ad__types_side_close(&s);
  return rc;
}

/* The elements that arrived, from a status of an AD_MPI_REAL receive. */
static long long arrived(const MPI_Status *st, long long max) {
  int n = 0;
  if (MPI_Get_count(st, AD_MPI_REAL, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) return max;
  return n < max ? n : max;
}

int ad__dt_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_recv(md, buf, count, source, tag, comm, status, "ad_mpi_recv");
  side s;
  MPI_Status st;
  int rc = ad__types_side_open(&s, "ad_mpi_recv", type, buf, count, 0);
  if (rc == 0) rc = ad_mpi_recv(s.tmp, ad__types_side_count(&s, count), AD_MPI_REAL, source, tag, comm, &st);
  if (rc == MPI_SUCCESS) {
    ad__types_dt_scatter(s.d, buf, s.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, s.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  ad__types_side_close(&s);
  return rc;
}

int ad__dt_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (mixed(sendtype) || mixed(recvtype))
    return mixed_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status, "ad_mpi_sendrecv");
  side a, b;
  MPI_Status st;
  int rc = ad__types_side_open(&a, "ad_mpi_sendrecv", sendtype, sendbuf, sendcount, 1);
  if (rc == 0)
    rc = ad__types_side_open(&b, "ad_mpi_sendrecv", recvtype, recvbuf, recvcount, 0);
  else
    memset(&b, 0, sizeof b);
  if (rc == 0)
    rc = ad_mpi_sendrecv(ad__types_side_buf(&a), ad__types_side_count(&a, sendcount), ad__types_side_type(&a, sendtype),
                         dest, sendtag, ad__types_side_buf(&b), ad__types_side_count(&b, recvcount),
                         ad__types_side_type(&b, recvtype), source, recvtag, comm, &st);
  if (rc == MPI_SUCCESS) {
    if (b.d) ad__types_dt_scatter(b.d, recvbuf, b.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, b.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  ad__types_side_close(&a);
  ad__types_side_close(&b);
  return rc;
}

int ad__dt_sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                            MPI_Comm comm, MPI_Status *status) {
  /* mixed_sendrecv packs the send half from buf before the receive half
   * writes it. */
  if (mixed(type))
    return mixed_sendrecv(buf, count, type, dest, sendtag, buf, count, type, source, recvtag, comm, status,
                          "ad_mpi_sendrecv_replace");
  side s;
  MPI_Status st;
  int rc = ad__types_side_open(&s, "ad_mpi_sendrecv_replace", type, buf, count, 1);
  if (rc == 0)
    rc = ad_mpi_sendrecv_replace(s.tmp, ad__types_side_count(&s, count), AD_MPI_REAL, dest, sendtag, source, recvtag,
                                 comm, &st);
  if (rc == MPI_SUCCESS) {
    ad__types_dt_scatter(s.d, buf, s.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, s.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  ad__types_side_close(&s);
  return rc;
}

int ad__dt_bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_bcast(md, buffer, count, root, comm);
  side s;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int rc = ad__types_side_open(&s, "ad_mpi_bcast", type, buffer, count, rank == root);
  if (rc == 0) rc = ad_mpi_bcast(s.tmp, ad__types_side_count(&s, count), AD_MPI_REAL, root, comm);
  if (rc == MPI_SUCCESS && rank != root) ad__types_dt_scatter(s.d, buffer, s.tmp, s.ne);
  ad__types_side_close(&s);
  return rc;
}

/* Reductions. MPI defines its predefined operations on predefined datatypes
 * only (MPICH and Open MPI return MPI_ERR_OP for a derived type of
 * MPI_DOUBLE), so the same holds here; AD_MPI_REAL_INT with MINLOC/MAXLOC
 * is the twin of a predefined type. A user-defined operation sees items of
 * the user's type, as in MPI (reduce_ext.c). */
static int predefined_refused(const char *fn) {
  ad__dtype_refuse(fn, "MPI defines its predefined operations on predefined datatypes only, so a datatype built from "
                       "AD_MPI_REAL is refused as MPI refuses the same type built from MPI_DOUBLE; reduce AD_MPI_REAL "
                       "with a count, or use an operation made by ad_mpi_op_create");
  return MPI_ERR_OP;
}

int ad__dt_reduce(int kind, const void *sendbuf, void *recvbuf, int count, const int *recvcounts, MPI_Datatype type,
                  MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req) {
  static const char *const names[2][6] = {{"ad_mpi_reduce", "ad_mpi_allreduce", "ad_mpi_scan", "ad_mpi_exscan",
                                           "ad_mpi_reduce_scatter_block", "ad_mpi_reduce_scatter"},
                                          {"ad_mpi_ireduce", "ad_mpi_iallreduce", "ad_mpi_iscan", "ad_mpi_iexscan",
                                           "ad_mpi_ireduce_scatter_block", "ad_mpi_ireduce_scatter"}};
  const char *fn = names[req != NULL][kind];
  if (type == AD_MPI_REAL_INT && (op == MPI_MINLOC || op == MPI_MAXLOC)) {
    if (!req && kind < 2) return ad__handoff.loc_reduce(kind, sendbuf, recvbuf, count, op, root, comm);
    return ad__handoff.user_reduce(kind, sendbuf, recvbuf, count, recvcounts, type, op, root, comm, req);
  }
  if (ad__handoff.op_user(op))
    return ad__handoff.user_reduce(kind, sendbuf, recvbuf, count, recvcounts, type, op, root, comm, req);
  if (type == AD_MPI_REAL_INT) {
    ad__dtype_refuse(fn, "AD_MPI_REAL_INT is differentiated with MPI_MINLOC and MPI_MAXLOC only (or an operation "
                         "made by ad_mpi_op_create)");
    return MPI_ERR_OP;
  }
  return predefined_refused(fn);
}

int ad__types_vside_open(vside *v, const char *fn, MPI_Datatype t, const void *buf, const int *cnt, const int *dsp,
                         int p, int fill) {
  memset(v, 0, sizeof *v);
  v->s.buf = (void *)buf;
  if (t == AD_MPI_REAL || buf == MPI_IN_PLACE || ad__types_derived_from_real(t, 0) != 1) return 0;
  long long items = 0;
  for (int j = 0; j < p; j++) items += cnt[j];
  int rc = ad__types_side_open(&v->s, fn, t, buf, items, 0);
  if (rc != 0) return rc;
  v->cnt = malloc(4 * (size_t)p * sizeof *v->cnt);
  if (!v->cnt) return MPI_ERR_NO_MEM;
  v->dsp = v->cnt + p;
  v->pcnt = v->cnt + 2 * p;
  v->pdsp = v->cnt + 3 * p;
  int n = v->s.d->n, at = 0, pat = 0, pb = v->s.pbytes;
  for (int j = 0; j < p; j++) {
    char *base = (char *)buf + (MPI_Aint)dsp[j] * v->s.d->ext;
    v->cnt[j] = cnt[j] * n;
    v->dsp[j] = at;
    v->pcnt[j] = cnt[j] * pb;
    v->pdsp[j] = pat;
    if (fill) ad__types_dt_gather(v->s.d, base, cnt[j], v->s.tmp + at);
    if (fill && v->s.pas) ad__types_pas_move(v->s.d, base, cnt[j], v->s.pas + pat, 1);
    at += cnt[j] * n;
    pat += cnt[j] * pb;
  }
  return 0;
}

void ad__types_vside_scatter(const vside *v, void *buf, const int *dsp, int p, int only) {
  for (int j = 0; j < p; j++)
    if (only < 0 || j == only) {
      char *base = (char *)buf + (MPI_Aint)dsp[j] * v->s.d->ext;
      ad__types_dt_scatter(v->s.d, base, v->s.tmp + v->dsp[j], v->cnt[j]);
      if (v->s.pas) ad__types_pas_move(v->s.d, base, v->cnt[j] / v->s.d->n, v->s.pas + v->pdsp[j], 0);
    }
}

void ad__types_vside_close(vside *v) {
  ad__types_side_close(&v->s);
  free(v->cnt);
}
