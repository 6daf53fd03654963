/* SPDX-License-Identifier: BSD-3-Clause */
/* The layer's tables: every record kind with the chapter whose actions sweep
 * and free it, and the calls a wrapper hands over to another chapter. A
 * chapter that records another's kinds (derived types record point-to-point
 * and collective kinds, user reductions collective ones, request completions
 * point-to-point ones) names the kind, never the chapter that sweeps it; a
 * wrapper that hands a call over names the entry, never the chapter. */
#include "mpi_impl.h"

static const ad__mkind kinds[] = {
    /* point to point (p2p.c) */
    {AD__M_SEND, 0, &ad__p2p_actions},
    {AD__M_RECV, 0, &ad__p2p_actions},
    {AD__M_ISEND, 0, &ad__p2p_actions},
    {AD__M_ISEND_DONE, 0, &ad__p2p_actions},
    {AD__M_IRECV, 0, &ad__p2p_actions},
    {AD__M_IRECV_DONE, 0, &ad__p2p_actions},
    {AD__M_SENDRECV, 0, &ad__p2p_actions},
    {AD__M_CANCELLED, 0, &ad__p2p_actions},
    /* collectives (coll.c): every one but the completion of a nonblocking
     * collective is numbered on its (tape, communicator) */
    {AD__M_BARRIER, 1, &ad__coll_actions},
    {AD__M_BCAST, 1, &ad__coll_actions},
    {AD__M_REDUCE, 1, &ad__coll_actions},
    {AD__M_ALLREDUCE, 1, &ad__coll_actions},
    {AD__M_GATHERV, 1, &ad__coll_actions},
    {AD__M_SCATTERV, 1, &ad__coll_actions},
    {AD__M_ALLGATHERV, 1, &ad__coll_actions},
    {AD__M_ALLTOALLV, 1, &ad__coll_actions},
    {AD__M_RSB, 1, &ad__coll_actions},
    {AD__M_SCAN, 1, &ad__coll_actions},
    {AD__M_EXSCAN, 1, &ad__coll_actions},
    {AD__M_ICOLL_DONE, 0, &ad__coll_actions},
    {AD__M_NEIGHBOR, 1, &ad__coll_actions},
    /* one-sided communication (rma.c, rma_passive.c) */
    {AD__M_RMA_FENCE, 0, &ad__rma_actions},
    {AD__M_RMA_OPEN, 0, &ad__rma_actions},
    {AD__M_RMA_PBEGIN, 0, &ad__rma_actions},
    {AD__M_RMA_PEND, 0, &ad__rma_actions},
    {AD__M_RMA_BATCH, 0, &ad__rma_actions},
    {AD__M_RMA_SYNC, 0, &ad__rma_actions},
};

const ad__handoff_ops ad__handoff = {
    /* derived datatypes (types_p2p.c, types_coll.c) */
    .dt_send = ad__dt_send,
    .dt_isend = ad__dt_isend,
    .dt_recv = ad__dt_recv,
    .dt_irecv = ad__dt_irecv,
    .dt_mrecv = ad__dt_mrecv,
    .dt_imrecv = ad__dt_imrecv,
    .dt_sendrecv = ad__dt_sendrecv,
    .dt_sendrecv_replace = ad__dt_sendrecv_replace,
    .dt_bcast = ad__dt_bcast,
    .dt_ibcast = ad__dt_ibcast,
    .dt_reduce = ad__dt_reduce,
    .dt_gatherv = ad__dt_gatherv,
    .dt_scatterv = ad__dt_scatterv,
    .dt_alltoallv = ad__dt_alltoallv,
    .dt_alltoallw = ad__dt_alltoallw,
    /* user-defined reductions (reduce_ext.c) */
    .op_user = ad__op_user,
    .user_reduce = ad__user_reduce,
    .loc_reduce = ad__loc_reduce,
};

const ad__mkind *ad__mkind_of(int kind) {
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (kinds[i].kind == kind) return &kinds[i];
  return NULL;
}
