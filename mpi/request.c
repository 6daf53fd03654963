/* SPDX-License-Identifier: BSD-3-Clause */
/* Requests: every nonblocking or persistent operation of the layer (point to
 * point, collectives, derived types, user reductions) lives in a slot of
 * one table, so that every completion call (wait, test and their -all, -any
 * and -some forms), ad_mpi_request_free, ad_mpi_cancel and the starts of
 * persistent requests take them all. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p2p_impl.h"

/* Nonblocking wrappers and requests                                         */
/* ------------------------------------------------------------------------ */

rslot *ad__req_slots;
static void p2p_finalize(void);
static ad__mpi_chapter chapter = {NULL, NULL, p2p_finalize, NULL, 0};
int ad__req_nslots;
static int capslots, free_slot = -1, norphans;

static void orphans_poll(void);

int ad__req_slot_new(void) {
  ad__mpi_chapter_join(&chapter); /* the slots are freed at MPI_Finalize */
  orphans_poll();
  int s = free_slot;
  if (s >= 0) {
    free_slot = ad__req_slots[s].next_free;
  } else {
    if (ad__req_nslots == capslots) {
      int ncap = capslots ? 2 * capslots : 16;
      rslot *n = realloc(ad__req_slots, (size_t)ncap * sizeof *n);
      if (!n) return -1;
      ad__req_slots = n;
      capslots = ncap;
    }
    s = ad__req_nslots++;
    ad__req_slots[s].gen = 0;
  }
  unsigned gen = ad__req_slots[s].gen;
  memset(&ad__req_slots[s], 0, sizeof ad__req_slots[s]);
  ad__req_slots[s].gen = gen;
  ad__req_slots[s].live = 1;
  ad__req_slots[s].mpi = MPI_REQUEST_NULL;
  ad__req_slots[s].msg = MPI_MESSAGE_NULL;
  return s;
}

void ad__req_forget(const ad__mrec *r) {
  for (int s = 0; s < ad__req_nslots; s++) {
    if (ad__req_slots[s].live && ad__req_slots[s].start == r) {
      ad__req_slots[s].start = NULL;
      ad__req_slots[s].lost = 1;
    }
  }
}

/* At MPI_Finalize: the table. The buffer of a request never completed may
 * still be MPI's, so it is kept (reachable) rather than freed. */
static void p2p_finalize(void) {
  for (int s = 0; s < ad__req_nslots; s++) {
    if (!ad__req_slots[s].live) continue;
    ad__mpi_keep(ad__req_slots[s].v);
    if (ad__req_slots[s].ops) ad__req_slots[s].ops->failed(ad__req_slots[s].ctx, MPI_ERR_PENDING);
    for (int i = 0; i < 2; i++)
      if (ad__req_slots[s].then[i]) ad__req_slots[s].then[i](ad__req_slots[s].then_ctx[i], 0);
  }
  free(ad__req_slots);
  ad__req_slots = NULL;
  ad__req_nslots = capslots = 0;
  free_slot = -1;
  norphans = 0;
}

void ad__req_slot_free(int s) {
  if (ad__req_slots[s].pops) ad__req_slots[s].pops->release(ad__req_slots[s].pctx);
  ad__req_slots[s].pops = NULL;
  free(ad__req_slots[s].v);
  ad__req_slots[s].v = NULL;
  ad__req_slots[s].live = 0;
  ad__req_slots[s].gen++;
  ad__req_slots[s].next_free = free_slot;
  free_slot = s;
}

/* The request in slot s is finished: a persistent one becomes inactive,
 * anything else goes. Then its ad__req_then actions run (after the slot is
 * free, so that they may start requests of their own), told whether it
 * completed (ok) or failed. */
static void slot_retire(int s, int ok) {
  rslot *q = &ad__req_slots[s];
  void (*then[2])(void *, int) = {q->then[0], q->then[1]};
  void *ctx[2] = {q->then_ctx[0], q->then_ctx[1]};
  q->then[0] = q->then[1] = NULL;
  if (q->pers && !q->orphan) {
    if (q->pops) { /* its nonblocking collective is done with */
      q->ops = NULL;
      q->ctx = NULL;
      q->active = 0;
    }
    q->started = 0;
    q->cancelled = 0;
    q->start = NULL;
    q->tape = NULL;
    q->lost = 0;
  } else {
    if (q->orphan) norphans--;
    if (q->pers && q->mpi != MPI_REQUEST_NULL) MPI_Request_free(&q->mpi);
    ad__req_slot_free(s);
  }
  for (int i = 0; i < 2; i++)
    if (then[i]) then[i](ctx[i], ok);
}

/* The persistent request whose start runs (see start_one), -1 if none. */
static int pstarting = -1;

int ad__req_then(const ad_mpi_request *request, void (*fn)(void *ctx, int ok), void *ctx) {
  int starting = request->slot == AD__SLOT_STARTING, s = starting ? pstarting : request->slot;
  if (s < 0 || s >= ad__req_nslots || !ad__req_slots[s].live || (!starting && ad__req_slots[s].gen != request->gen)) {
    fn(ctx, 1); /* nothing pending */
    return MPI_SUCCESS;
  }
  int i = ad__req_slots[s].then[0] ? 1 : 0;
  if (ad__req_slots[s].then[i]) return MPI_ERR_INTERN;
  ad__req_slots[s].then[i] = fn;
  ad__req_slots[s].then_ctx[i] = ctx;
  return MPI_SUCCESS;
}

/* Sends the user freed while active (ad_mpi_request_free): their buffers go
 * once MPI has finished with them. */
static void orphans_poll(void) {
  for (int s = 0; norphans > 0 && s < ad__req_nslots; s++) {
    if (!ad__req_slots[s].live || !ad__req_slots[s].orphan) continue;
    int flag = 0, ok = 1;
    MPI_Status st;
    if (MPI_Test(&ad__req_slots[s].mpi, &flag, &st) != MPI_SUCCESS) {
      ad__mpi_keep(ad__req_slots[s].v); /* MPI may not be done with it */
      ad__req_slots[s].v = NULL;
      flag = 1;
      ok = 0;
    }
    if (flag) slot_retire(s, ok);
  }
}

void ad__req_set(ad_mpi_request *q, int s) {
  q->mpi = ad__req_slots[s].mpi;
  q->slot = s;
  q->gen = ad__req_slots[s].gen;
}

static void req_clear(ad_mpi_request *q) {
  q->mpi = MPI_REQUEST_NULL;
  q->slot = -1;
  q->gen = 0;
}

/* After a completion of the request in slot s: the user's request names the
 * slot still if it is persistent, and is null otherwise. */
static void req_after(ad_mpi_request *q, int s) {
  if (s >= 0 && ad__req_slots[s].live && ad__req_slots[s].gen == q->gen && !ad__req_slots[s].is_msg)
    q->mpi = ad__req_slots[s].mpi;
  else
    req_clear(q);
}

/* ------------------------------------------------------------------------ */
/* Starts of point-to-point requests                                         */
/* ------------------------------------------------------------------------ */

/* Slot q's request started on tape t with start record r (if recorded). */
static void slot_recorded(rslot *q, ad_tape *t, ad__mrec *r) {
  if (!t || !r) return;
  q->tape = t;
  q->epoch = t->rec.epoch;
  q->start = r;
}

void ad__req_send_start(rslot *q, const ad_real *buf, int dest, int tag, const char *fn) {
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  ad__pack(buf, q->count, q->v);
  slot_recorded(q, t, ad__mpi_send_record(q->c, t, seen, dest, tag, buf, q->count, AD__M_ISEND, fn));
}

void ad__req_recv_start(int s, int source, int tag, int posted) {
  rslot *q = &ad__req_slots[s];
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if (!posted) q->post = ad__recv_post(q->c, source, tag);
  ad__recv_attach(q->c, q->post, s, q->gen);
  slot_recorded(q, t, t ? ad__mrec_push(t, AD__M_IRECV, q->c, 0, 0) : NULL);
}

/* ------------------------------------------------------------------------ */
/* Probed messages                                                           */
/* ------------------------------------------------------------------------ */

int ad__req_msg_check(const ad_mpi_message *m) {
  if (m->slot < 0) return m->mpi == MPI_MESSAGE_NO_PROC ? 0 : -1;
  if (m->slot >= ad__req_nslots || !ad__req_slots[m->slot].live || ad__req_slots[m->slot].gen != m->gen ||
      !ad__req_slots[m->slot].is_msg)
    return -1;
  return 1;
}

int ad__req_msg_misuse(const char *fn) {
  return ad__mpi_refuse(MPI_ERR_REQUEST, "%s: message was already received (a copy used twice?) or never probed", fn);
}

int ad__msg_take(ad_mpi_message *message, const char *fn, ad__comm **c, uint64_t *post, MPI_Message *m) {
  int mc = ad__req_msg_check(message);
  if (mc < 0) return -ad__req_msg_misuse(fn);
  if (mc == 0) return 0;
  int s = message->slot;
  *c = ad__req_slots[s].c;
  *post = ad__req_slots[s].post;
  *m = ad__req_slots[s].msg;
  ad__req_slot_free(s);
  message->mpi = MPI_MESSAGE_NULL;
  message->slot = -1;
  message->gen = 0;
  return 1;
}

/* 1 live slot, 0 a null request, -1 a request used after it completed. */
static int req_check(const ad_mpi_request *q) {
  if (q->slot < 0) return q->mpi == MPI_REQUEST_NULL ? 0 : -1;
  if (q->slot >= ad__req_nslots || !ad__req_slots[q->slot].live || ad__req_slots[q->slot].gen != q->gen ||
      ad__req_slots[q->slot].is_msg || ad__req_slots[q->slot].orphan)
    return -1;
  return 1;
}

MPI_Request ad__req_mpi(int slot, unsigned gen) {
  if (slot < 0 || slot >= ad__req_nslots || !ad__req_slots[slot].live || ad__req_slots[slot].gen != gen)
    return MPI_REQUEST_NULL;
  /* The persistent request holds the MPI request that completion calls use. */
  if (ad__req_slots[slot].outer) return ad__req_slots[ad__req_slots[slot].outer - 1].mpi;
  return ad__req_slots[slot].mpi;
}

static int req_misuse(const char *fn) {
  return ad__mpi_refuse(MPI_ERR_REQUEST,
                        "%s: request was already completed or freed (a copy used twice?) or never started", fn);
}

int ad__req_new(ad_mpi_request *request, MPI_Request mpi, ad_tape *t, ad__mrec *start, const ad__req_ops *ops,
                void *ctx) {
  int s = ad__req_slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  rslot *q = &ad__req_slots[s];
  q->mpi = mpi;
  q->active = ops != NULL; /* without ops: a passive request, nothing to do at completion */
  q->ops = ops;
  q->ctx = ctx;
  slot_recorded(q, t, start);
  ad__req_set(request, s);
  return MPI_SUCCESS;
}

/* The request in slot s has completed with status st: deliver received
 * values and push the completion record (nothing for a receive that was
 * cancelled: its start record becomes no action). */
static void slot_deliver(int s, const MPI_Status *st) {
  rslot *q = &ad__req_slots[s];
  if (!q->active) return;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  int recorded = q->start && q->tape == t && t && t->rec.epoch == q->epoch;
  if (q->cancelled) return; /* see ad_mpi_cancel */
  if (q->lost && seen) {
    ad__fail(seen, AD_ERR_MPI,
             "a request started while recording completed after ad_tape_reset_to discarded its start; the "
             "recording cannot be differentiated");
  } else if (q->start && !recorded) {
    if (seen) ad__fail(seen, AD_ERR_MPI, "a request started while recording completed on another tape or recording");
  }
  if (q->ops) {
    q->ops->complete(q->ctx, recorded ? t : NULL, seen, recorded ? q->start : NULL, st);
  } else if (q->is_recv) {
    ad__mrec *d = ad__mpi_recv_deliver(q->c, recorded ? t : NULL, seen, q->post, st, q->ubuf, q->v, AD__M_IRECV_DONE);
    if (recorded) ad__mrec_link(q->start, d);
  } else if (recorded) {
    ad__mrec_link(q->start, ad__mrec_push(t, AD__M_ISEND_DONE, q->c, 0, 0));
  }
}

/* The request in slot s has completed: deliver and retire it. An inactive
 * persistent request completes at once with an empty status and no record. */
void ad__req_slot_complete(int s, const MPI_Status *st) {
  if (ad__req_slots[s].pers && !ad__req_slots[s].started) return;
  slot_deliver(s, st);
  slot_retire(s, 1);
}

/* The request in slot s failed with error rc and MPI has freed it (or made
 * a persistent one inactive): retire the slot (see ad__mpi_recv_failed). */
void ad__req_slot_failed(int s, int rc, const MPI_Status *st) {
  rslot *q = &ad__req_slots[s];
  if (q->pers && !q->started) return;
  if (q->ops) {
    q->ops->failed(q->ctx, rc);
  } else if (q->active && q->is_recv) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_recv_failed(q->c, seen, q->post, rc, st);
  }
  slot_retire(s, 0);
}

/* MPI is done with a request that failed: it freed a nonpersistent one;
 * a persistent one stays, inactive. */
static int done_after_error(int s, MPI_Request mr) { return mr == MPI_REQUEST_NULL || ad__req_slots[s].pers; }

/* A completion call failed for the single request q in slot s: report it on
 * the tape, and retire the slot if MPI is done with the request. */
static int single_failed(ad_mpi_request *q, int s, int rc, const MPI_Status *st, const char *fn) {
  ad_tape *seen;
  ad__mpi_tape(&seen);
  ad__mpi_forward_error(seen, rc, fn);
  if (done_after_error(s, ad__req_slots[s].mpi)) {
    ad__req_slot_failed(s, rc, st);
    req_after(q, s);
  }
  return rc;
}

int ad_mpi_wait(ad_mpi_request *request, MPI_Status *status) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_wait");
  if (c == 0) return MPI_Wait(&request->mpi, status);
  int s = request->slot;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int rc = MPI_Wait(&ad__req_slots[s].mpi, &st);
  if (rc != MPI_SUCCESS) return single_failed(request, s, rc, &st, "ad_mpi_wait");
  ad__req_slot_complete(s, &st);
  req_after(request, s);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

int ad_mpi_test(ad_mpi_request *request, int *flag, MPI_Status *status) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_test");
  if (c == 0) return MPI_Test(&request->mpi, flag, status);
  int s = request->slot;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int rc = MPI_Test(&ad__req_slots[s].mpi, flag, &st);
  if (rc != MPI_SUCCESS) return single_failed(request, s, rc, &st, "ad_mpi_test");
  if (!*flag) return MPI_SUCCESS;
  ad__req_slot_complete(s, &st);
  req_after(request, s);
  if (status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

/* MPI request array view of user requests (null for null requests). */
static int gather_reqs(int count, ad_mpi_request reqs[], MPI_Request *mr, const char *fn) {
  for (int i = 0; i < count; i++) {
    int c = req_check(&reqs[i]);
    if (c < 0) return req_misuse(fn);
    mr[i] = c ? ad__req_slots[reqs[i].slot].mpi : MPI_REQUEST_NULL;
  }
  return MPI_SUCCESS;
}

static void finish_one(ad_mpi_request *q, MPI_Request mr, const MPI_Status *st) {
  int s = q->slot;
  if (s >= 0) {
    ad__req_slots[s].mpi = mr;
    ad__req_slot_complete(s, st);
  }
  req_after(q, s);
}

/* Request i of a multiple completion call failed with error e (its status's
 * MPI_ERROR); retire it if MPI is done with it. */
static void fail_one(ad_mpi_request *q, MPI_Request mr, int e, const MPI_Status *st) {
  int s = q->slot;
  if (s < 0 || !done_after_error(s, mr)) return;
  ad__req_slots[s].mpi = mr;
  ad__req_slot_failed(s, e, st);
  req_after(q, s);
}

/* Waitall or testall failed with MPI_ERR_IN_STATUS: finish the requests that
 * completed, retire those that failed, leave the pending ones pending, and
 * pass the statuses (with their MPI_ERROR fields) on. */
static void finish_in_status(int count, ad_mpi_request reqs[], MPI_Request *mr, const int *live, MPI_Status *st,
                             MPI_Status *statuses) {
  for (int i = 0; i < count; i++) {
    if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st[i];
    if (!live[i] || st[i].MPI_ERROR == MPI_ERR_PENDING) continue;
    if (!ad__req_slots[reqs[i].slot].pers && mr[i] != MPI_REQUEST_NULL) continue;
    if (st[i].MPI_ERROR == MPI_SUCCESS)
      finish_one(&reqs[i], mr[i], &st[i]);
    else
      fail_one(&reqs[i], mr[i], st[i].MPI_ERROR, &st[i]);
  }
}

static int in_status(int rc) {
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls == MPI_ERR_IN_STATUS;
}

/* Waitall and testall (flag non-NULL): complete every request, or none. */
static int complete_all(int count, ad_mpi_request reqs[], int *flag, MPI_Status *statuses, const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  MPI_Status *st = malloc((size_t)(count ? count : 1) * sizeof *st);
  int rc = mr && st ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  int live[count > 0 ? count : 1];
  for (int i = 0; rc == MPI_SUCCESS && i < count; i++) live[i] = reqs[i].slot >= 0;
  if (rc == MPI_SUCCESS) rc = flag ? MPI_Testall(count, mr, flag, st) : MPI_Waitall(count, mr, st);
  if (rc == MPI_SUCCESS && (!flag || *flag)) {
    for (int i = 0; i < count; i++) {
      if (live[i])
        finish_one(&reqs[i], mr[i], &st[i]);
      else
        req_clear(&reqs[i]);
      if (statuses != MPI_STATUSES_IGNORE) statuses[i] = st[i];
    }
  } else if (rc != MPI_SUCCESS && rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    if (in_status(rc)) finish_in_status(count, reqs, mr, live, st, statuses);
  }
  free(mr);
  free(st);
  return rc;
}

int ad_mpi_waitall(int count, ad_mpi_request reqs[], MPI_Status *statuses) {
  return complete_all(count, reqs, NULL, statuses, "ad_mpi_waitall");
}

int ad_mpi_testall(int count, ad_mpi_request reqs[], int *flag, MPI_Status *statuses) {
  return complete_all(count, reqs, flag, statuses, "ad_mpi_testall");
}

/* Waitany and testany (flag non-NULL). */
static int complete_any(int count, ad_mpi_request reqs[], int *index, int *flag, MPI_Status *status, const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  int rc = mr ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  int done = 1;
  if (rc == MPI_SUCCESS) rc = flag ? MPI_Testany(count, mr, index, flag, &st) : MPI_Waitany(count, mr, index, &st);
  if (rc == MPI_SUCCESS && flag) done = *flag;
  if (rc == MPI_SUCCESS && done) {
    if (*index != MPI_UNDEFINED) finish_one(&reqs[*index], mr[*index], &st);
    if (status != MPI_STATUS_IGNORE) *status = st;
  } else if (rc != MPI_SUCCESS && rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    /* The request that failed is named by index. */
    int i = *index;
    if (i >= 0 && i < count) fail_one(&reqs[i], mr[i], rc, &st);
  }
  free(mr);
  return rc;
}

int ad_mpi_waitany(int count, ad_mpi_request reqs[], int *index, MPI_Status *status) {
  return complete_any(count, reqs, index, NULL, status, "ad_mpi_waitany");
}

int ad_mpi_testany(int count, ad_mpi_request reqs[], int *index, int *flag, MPI_Status *status) {
  return complete_any(count, reqs, index, flag, status, "ad_mpi_testany");
}

/* Waitsome and testsome. */
static int complete_some(int count, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses, int test,
                         const char *fn) {
  if (count < 0) return MPI_ERR_COUNT;
  MPI_Request *mr = malloc((size_t)(count ? count : 1) * sizeof *mr);
  MPI_Status *st = malloc((size_t)(count ? count : 1) * sizeof *st);
  int rc = mr && st ? gather_reqs(count, reqs, mr, fn) : MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS)
    rc = test ? MPI_Testsome(count, mr, outcount, indices, st) : MPI_Waitsome(count, mr, outcount, indices, st);
  if (rc == MPI_SUCCESS) {
    for (int j = 0; *outcount != MPI_UNDEFINED && j < *outcount; j++) {
      finish_one(&reqs[indices[j]], mr[indices[j]], &st[j]);
      if (statuses != MPI_STATUSES_IGNORE) statuses[j] = st[j];
    }
  } else if (rc != MPI_ERR_REQUEST) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    ad__mpi_forward_error(seen, rc, fn);
    for (int j = 0; in_status(rc) && *outcount != MPI_UNDEFINED && j < *outcount; j++) {
      int i = indices[j];
      if (statuses != MPI_STATUSES_IGNORE) statuses[j] = st[j];
      if (st[j].MPI_ERROR == MPI_SUCCESS)
        finish_one(&reqs[i], mr[i], &st[j]);
      else
        fail_one(&reqs[i], mr[i], st[j].MPI_ERROR, &st[j]);
    }
  }
  free(mr);
  free(st);
  return rc;
}

int ad_mpi_waitsome(int incount, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses) {
  return complete_some(incount, reqs, outcount, indices, statuses, 0, "ad_mpi_waitsome");
}

int ad_mpi_testsome(int incount, ad_mpi_request reqs[], int *outcount, int indices[], MPI_Status *statuses) {
  return complete_some(incount, reqs, outcount, indices, statuses, 1, "ad_mpi_testsome");
}

/* ------------------------------------------------------------------------ */
/* Freeing and cancelling requests                                           */
/* ------------------------------------------------------------------------ */

int ad_mpi_request_free(ad_mpi_request *request) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_request_free");
  if (c == 0) return ad__mpi_refuse(MPI_ERR_REQUEST, "ad_mpi_request_free: the request is null");
  int s = request->slot;
  rslot *q = &ad__req_slots[s];
  if (q->ops)
    return ad__mpi_refuse(
        MPI_ERR_REQUEST,
        "ad_mpi_request_free: the request of a nonblocking collective, or an active persistent request on "
        "a derived datatype, cannot be freed; complete it with a wait or test");
  if (q->pops && !q->started) { /* an inactive persistent collective: nothing of MPI's to free */
    ad__req_slot_free(s);
    req_clear(request);
    return MPI_SUCCESS;
  }
  if (!q->active || (q->pers && !q->started)) {
    int rc = MPI_Request_free(&q->mpi);
    if (rc != MPI_SUCCESS) {
      ad_tape *seen;
      ad__mpi_tape(&seen);
      return ad__mpi_forward_error(seen, rc, "ad_mpi_request_free");
    }
    ad__req_slot_free(s);
    req_clear(request);
    return MPI_SUCCESS;
  }
  if (q->is_recv)
    return ad__mpi_refuse(
        MPI_ERR_REQUEST,
        "ad_mpi_request_free: the receive is active; its values would arrive after nobody can differentiate "
        "them (complete it with a wait or test, or cancel it first)");
  /* An active send: the message goes out all the same, so its completion
   * record is pushed here, and the slot stays until MPI is done with the
   * packed values. */
  MPI_Status st;
  memset(&st, 0, sizeof st);
  slot_deliver(s, &st);
  q->orphan = 1;
  q->started = 0;
  norphans++;
  req_clear(request);
  return MPI_SUCCESS;
}

int ad_mpi_cancel(ad_mpi_request *request) {
  int c = req_check(request);
  if (c < 0) return req_misuse("ad_mpi_cancel");
  if (c == 0) return ad__mpi_refuse(MPI_ERR_REQUEST, "ad_mpi_cancel: the request is null");
  rslot *q = &ad__req_slots[request->slot];
  if (q->ops)
    return ad__mpi_refuse(MPI_ERR_REQUEST,
                          "ad_mpi_cancel: a nonblocking collective, or a request on a derived datatype, "
                          "cannot be cancelled");
  if (q->pers && !q->started)
    return ad__mpi_refuse(MPI_ERR_REQUEST, "ad_mpi_cancel: the persistent request is not active (not started)");
  if (!q->active) return MPI_Cancel(&q->mpi);
  if (!q->is_recv)
    return ad__mpi_refuse(
        MPI_ERR_REQUEST,
        "ad_mpi_cancel: a send of AD_MPI_REAL data cannot be cancelled (the receiver could not tell which "
        "messages it missed)");
  if (q->cancelled) return MPI_SUCCESS; /* cancelled already */
  int flag = 0;
  MPI_Status st;
  int rc = MPI_Request_get_status(q->mpi, &flag, &st);
  if (rc == MPI_SUCCESS && flag)
    return ad__mpi_refuse(MPI_ERR_REQUEST,
                          "ad_mpi_cancel: the receive has already matched a message; complete it with a wait or test");
  if (rc == MPI_SUCCESS) rc = MPI_Cancel(&q->mpi);
  /* A receive marked for cancellation completes without anybody else's
   * help; whether it was cancelled is known once it has. Find out now: a
   * cancelled receive then leaves the receive order at once (so that a
   * later receive's number does not wait for it), and its start record
   * becomes no action. One that matched meanwhile completes as usual in the
   * user's completion call. */
  while (rc == MPI_SUCCESS && !flag) rc = MPI_Request_get_status(q->mpi, &flag, &st);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return ad__mpi_forward_error(seen, rc, "ad_mpi_cancel");
  }
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  if (cancelled) {
    q->cancelled = 1;
    ad__recv_complete(q->c, q->post, -2, -2);
    if (q->start) ad__mrec_rekind(q->start, AD__M_CANCELLED);
    q->start = NULL;
  }
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Persistent requests                                                       */
/* ------------------------------------------------------------------------ */

/* 1 if the request can be started, else an MPI error code (negated: MPI
 * error codes are positive) after refusing. */
static int start_check(const ad_mpi_request *request, const char *fn) {
  int c = req_check(request);
  if (c < 0) return -req_misuse(fn);
  const rslot *q = c ? &ad__req_slots[request->slot] : NULL;
  if (!q || !q->pers) return -ad__mpi_refuse(MPI_ERR_REQUEST, "%s: not a persistent request", fn);
  if (q->started)
    return -ad__mpi_refuse(MPI_ERR_REQUEST,
                           "%s: the persistent request is active already (started twice without a completion)", fn);
  return 1;
}

static int start_one(ad_mpi_request *request, const char *fn) {
  int c = start_check(request, fn);
  if (c < 0) return -c;
  int s = request->slot;
  rslot *q = &ad__req_slots[s];
  if (q->pops) { /* a persistent collective: each start is a nonblocking collective */
    ad_tape *t = NULL;
    ad__mrec *rec = NULL;
    MPI_Request mq = MPI_REQUEST_NULL;
    const ad__req_ops *ops = NULL;
    void *ctx = NULL;
    /* The start may take slots of its own (the table may move). */
    pstarting = s;
    int rc = q->pops->start(q->pctx, &mq, &ops, &ctx, &t, &rec);
    pstarting = -1;
    if (rc != MPI_SUCCESS) return rc;
    q = &ad__req_slots[s];
    q->mpi = mq;
    q->ops = ops;
    q->ctx = ctx;
    q->active = q->ops != NULL;
    q->tape = t && rec ? t : NULL;
    q->epoch = t && rec ? t->rec.epoch : 0;
    q->start = t ? rec : NULL;
    q->lost = 0;
    q->started = 1;
    request->mpi = q->mpi;
    return MPI_SUCCESS;
  }
  if (q->active) {
    if (q->is_recv)
      ad__req_recv_start(s, q->peer, q->tag, 0);
    else
      ad__req_send_start(q, q->ubuf, q->peer, q->tag, fn);
  }
  int rc = MPI_Start(&q->mpi);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    if (q->active && q->is_recv) ad__recv_complete(q->c, q->post, -2, -2);
    q->start = NULL;
    return ad__mpi_forward_error(seen, rc, fn);
  }
  q->started = 1;
  if (q->active && !q->is_recv && q->peer != MPI_PROC_NULL)
    ad__mpi_counters.forward_bytes += (uint64_t)q->count * sizeof(double);
  request->mpi = q->mpi;
  return MPI_SUCCESS;
}

int ad__preq_new(ad_mpi_request *request, const ad__preq_ops *pops, void *pctx) {
  int s = ad__req_slot_new();
  if (s < 0) return MPI_ERR_NO_MEM;
  ad__req_slots[s].pers = 1;
  ad__req_slots[s].pops = pops;
  ad__req_slots[s].pctx = pctx;
  ad__req_set(request, s);
  return MPI_SUCCESS;
}

int ad_mpi_start(ad_mpi_request *request) { return start_one(request, "ad_mpi_start"); }

int ad_mpi_startall(int count, ad_mpi_request reqs[]) {
  if (count < 0) return MPI_ERR_COUNT;
  /* Nothing starts unless everything can. */
  for (int i = 0; i < count; i++) {
    int c = start_check(&reqs[i], "ad_mpi_startall");
    if (c < 0) return -c;
    for (int j = 0; j < i; j++)
      if (reqs[j].slot == reqs[i].slot)
        return ad__mpi_refuse(MPI_ERR_REQUEST, "ad_mpi_startall: request %d is request %d again (started twice)", i, j);
  }
  for (int i = 0; i < count; i++) {
    int rc = start_one(&reqs[i], "ad_mpi_startall");
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
