/* SPDX-License-Identifier: BSD-3-Clause */
/* What point-to-point communication (p2p.c) and the requests (request.c)
 * share: the table of request slots, and the starts and deliveries of
 * point-to-point operations that the completion calls run. */
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
int ad__req_refuse(int mpicode, const char *fmt, ...);
void ad__req_slot_complete(int s, const MPI_Status *st);
void ad__req_slot_failed(int s, int rc, const MPI_Status *st);

/* p2p.c */
int ad__p2p_received(const MPI_Status *st);
void ad__p2p_recv_finish(ad__comm *c, ad_tape *t, ad_tape *seen, uint64_t post, const MPI_Status *st, ad_real *buf,
                         const double *v, int n, int kind, ad__mrec **rec);
void ad__p2p_recv_start(int s, int source, int tag, int posted);
void ad__p2p_send_start(rslot *q, const ad_real *buf, int dest, int tag, const char *fn);
double *ad__p2p_scratch(int n);

#endif
