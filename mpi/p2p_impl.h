/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of request slots (request.c), a service of the layer: point to
 * point (p2p.c) fills slots and starts its requests through it; the
 * completion calls deliver what arrived and record the completions. */
#ifndef ARIADNE_MPI_P2P_IMPL_H
#define ARIADNE_MPI_P2P_IMPL_H

#include "mpi_impl.h"

/* Every request lives in a slot; the user's ad_mpi_request names the slot and
 * its generation, so a stale copy of a completed request is caught. A
 * persistent request's slot stays live from its init call to
 * ad_mpi_request_free, inactive between a completion and the next start. A
 * message of ad_mpi_mprobe (is_msg) lives in a slot too, until it is
 * received. */
typedef struct rslot {
  int live;
  unsigned gen;
  MPI_Request mpi;
  int active, is_recv;
  ad__comm *c;
  ad_real *ubuf;
  int count;
  double *v;
  uint64_t post;
  ad_tape *tape; /* the tape that recorded the start, if any */
  uint32_t epoch;
  ad__mrec *start;
  int lost;               /* its start record was discarded (ad_tape_reset_to) */
  const ad__req_ops *ops; /* another kind of request (a nonblocking collective): its actions */
  void *ctx;
  int pers, started; /* persistent, and started since its last completion */
  int peer, tag;     /* persistent: destination, or source pattern, and tag */
  int orphan;        /* a send the user freed while active: goes when MPI is done with it */
  int is_msg;        /* a probed message not yet received */
  int cancelled;     /* a receive cancelled, waiting for its completion call */
  MPI_Message msg;
  const ad__preq_ops *pops; /* a persistent collective: how to start it */
  void *pctx;
  void (*then[2])(void *ctx, int ok); /* see ad__req_then, run in order */
  void *then_ctx[2];
  int outer; /* a start of a persistent request on a derived type: its slot + 1 (see pp2p) */
  int next_free;
} rslot;

/* The slots (request.c); ad__req_nslots of them have been used. */
extern rslot *ad__req_slots;
extern int ad__req_nslots;

/* request.c */
int ad__req_slot_new(void);
void ad__req_slot_free(int s);
void ad__req_set(ad_mpi_request *q, int s);
void ad__req_slot_complete(int s, const MPI_Status *st);
void ad__req_slot_failed(int s, int rc, const MPI_Status *st);

/* An active send from slot q starts: the values of buf packed, the message
 * numbered and its start recorded. */
void ad__req_send_start(rslot *q, const ad_real *buf, int dest, int tag, const char *fn);
/* An active receive into slot s starts: its place in the receive order
 * (post, unless it has one already: an ad_mpi_imrecv), and its start
 * record. */
void ad__req_recv_start(int s, int source, int tag, int posted);

/* A message of ad_mpi_mprobe: 1 live, 0 MPI_MESSAGE_NO_PROC, -1 received
 * already or never probed (ad__req_msg_misuse refuses it naming fn). */
int ad__req_msg_check(const ad_mpi_message *m);
int ad__req_msg_misuse(const char *fn);

/* p2p.c */
double *ad__p2p_scratch(int n);

#endif
