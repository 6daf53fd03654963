/* SPDX-License-Identifier: BSD-3-Clause */
/* Descriptions of communication records for ad_tape_dump, and the dump into
 * one file per rank. */
#include <stdio.h>
#include <string.h>

#include "../lib/describe.h"
#include "mpi_impl.h"

static const char *const kind_names[] = {"?",
                                         "send",
                                         "recv",
                                         "isend",
                                         "isend_wait",
                                         "irecv",
                                         "irecv_wait",
                                         "sendrecv",
                                         "barrier",
                                         "bcast",
                                         "reduce",
                                         "allreduce",
                                         "gatherv",
                                         "scatterv",
                                         "allgatherv",
                                         "alltoallv",
                                         "reduce_scatter_block",
                                         "scan",
                                         "exscan",
                                         "icoll_wait",
                                         "neighbor_alltoallv",
                                         "cancelled"};
static const char *const op_names[] = {"sum", "prod", "min", "max"};

/* The communicator as its MPI name (spaces made '_') and size. */
static void comm_field(ad__line *l, const ad__comm *c) {
  char name[MPI_MAX_OBJECT_NAME] = "";
  int len = 0;
  if (!c) {
    ad__line_printf(l, " comm=?");
    return;
  }
  if (!c->freed) MPI_Comm_get_name(c->user, name, &len);
  for (int k = 0; k < len; k++)
    if (name[k] == ' ') name[k] = '_';
  if (len == 0) snprintf(name, sizeof name, c->freed ? "freed" : "unnamed");
  ad__line_printf(l, " comm=%s size=%d", name, c->size);
}

int ad__mrec_describe(const void *data, char *buf, size_t size) {
  const ad__mrec *r = data;
  ad__line l = {buf, size, 0};
  int kind = r->kind >= AD__M_SEND && r->kind <= AD__M_CANCELLED ? r->kind : 0;
  if (r->kind >= AD__M_RMA_FENCE && r->kind <= AD__M_RMA_SYNC) {
    static const char *rma_names[] = {"win_fence", "win_epoch_open", "win_create",
                                      "win_free",  "win_unlock",     "win_sync"};
    ad__line_printf(&l, "%s", rma_names[r->kind - AD__M_RMA_FENCE]);
    comm_field(&l, r->c);
    return (int)l.len;
  }
  ad__line_printf(&l, "%s%s", r->nb ? "i" : "", kind_names[kind]);
  int count = r->count ? r->count : (r->nin > r->nout ? r->nin : r->nout);
  switch (r->kind) {
  case AD__M_SEND:
  case AD__M_ISEND:
    ad__line_printf(&l, " to=%d tag=%d count=%d seq=%d", r->peer, r->tag, count, r->k);
    break;
  case AD__M_RECV:
  case AD__M_IRECV_DONE:
    ad__line_printf(&l, " from=%d tag=%d count=%d seq=%d", r->peer, r->tag, count, r->k);
    break;
  case AD__M_IRECV:
  case AD__M_ISEND_DONE:
    if (r->link) ad__line_printf(&l, " peer=%d tag=%d", r->link->peer, r->link->tag);
    break;
  case AD__M_SENDRECV:
    ad__line_printf(&l, " to=%d tag=%d from=%d rtag=%d count=%d", r->peer, r->tag, r->rpeer, r->rtag, count);
    break;
  case AD__M_BARRIER:
    break;
  case AD__M_REDUCE:
  case AD__M_ALLREDUCE:
  case AD__M_SCAN:
  case AD__M_EXSCAN:
  case AD__M_RSB:
    ad__line_printf(&l, " op=%s", op_names[r->op & 3]);
    /* fall through */
  default:
    if (r->kind == AD__M_BCAST || r->kind == AD__M_REDUCE || r->kind == AD__M_GATHERV || r->kind == AD__M_SCATTERV)
      ad__line_printf(&l, " root=%d", r->root);
    ad__line_printf(&l, " count=%d", count);
  }
  comm_field(&l, r->c);
  ad__line_handles(&l, "in", r->in, (size_t)(r->nin > 0 ? r->nin : 0));
  ad__line_handles(&l, "out", r->out, (size_t)(r->nout > 0 ? r->nout : 0));
  return (int)l.len;
}

int ad_mpi_tape_dump(const ad_tape *tape, MPI_Comm comm, const char *prefix, ad_dump_format format) {
  int rank = 0;
  if (!tape || !prefix) return AD_ERR_ARG;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) return AD_ERR_MPI;
  static const char *const ext[] = {"txt", "dot", "stats.txt"};
  if (format < AD_DUMP_TEXT || format > AD_DUMP_STATS) return AD_ERR_ARG;
  char path[4096];
  if (snprintf(path, sizeof path, "%s.%d.%s", prefix, rank, ext[format]) >= (int)sizeof path) return AD_ERR_ARG;
  return ad_tape_dump_path(tape, path, format);
}
