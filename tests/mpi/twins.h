/* SPDX-License-Identifier: BSD-3-Clause */
/* The two builds of a test program written once: test_mpi_rma.c,
 * test_mpi_lock.c, test_mpi_rma_publish.c and test_mpi_slots.c include
 * their programs twice, after this header each time. Without MT_PLAIN the
 * programs run on ad_real through the ad_mpi_* wrappers (F(name) is
 * name_ad); with MT_PLAIN defined, on double through plain MPI (name_plain),
 * the reference their values are compared with. Without an include guard on
 * purpose: each inclusion replaces the macros of the one before. */
#undef R
#undef F
#undef RT
#undef WIN_ALLOCATE
#undef WIN_FREE
#undef LOCK
#undef UNLOCK
#undef LOCK_ALL
#undef UNLOCK_ALL
#undef FLUSH
#undef FLUSH_ALL
#undef FLUSH_LOCAL
#undef FLUSH_LOCAL_ALL
#undef WIN_SYNC
#undef PLAIN_SYNC
#undef BARRIER
#undef PUT
#undef GET
#undef ACC
#undef GACC
#undef ADD
#undef MUL
#undef SIN
#undef COS
#undef CST
#undef WIN_CREATE
#undef FENCE
#undef EXP
#undef REQ
#undef ALLTOALLW
#undef IALLTOALLW
#undef ALLTOALLW_INIT
#undef ALLTOALLV
#undef IALLTOALLV
#undef NEIGHBOR_W
#undef INEIGHBOR_W
#undef NEIGHBOR_V
#undef REDUCE_SCATTER
#undef START
#undef WAIT
#undef REQUEST_FREE

#ifndef MT_PLAIN
#define R ad_real
#define F(name) name##_ad
#define RT AD_MPI_REAL
#define WIN_ALLOCATE ad_mpi_win_allocate
#define WIN_FREE ad_mpi_win_free
#define LOCK ad_mpi_win_lock
#define UNLOCK ad_mpi_win_unlock
#define LOCK_ALL ad_mpi_win_lock_all
#define UNLOCK_ALL ad_mpi_win_unlock_all
#define FLUSH ad_mpi_win_flush
#define FLUSH_ALL ad_mpi_win_flush_all
#define FLUSH_LOCAL ad_mpi_win_flush_local
#define FLUSH_LOCAL_ALL ad_mpi_win_flush_local_all
#define WIN_SYNC ad_mpi_win_sync
#define PLAIN_SYNC(win) ((void)0)
#define BARRIER() ad_mpi_barrier(MPI_COMM_WORLD)
#define PUT ad_mpi_put
#define GET ad_mpi_get
#define ACC ad_mpi_accumulate
#define GACC ad_mpi_get_accumulate
#define ADD(a, b) ad_add(a, b)
#define MUL(a, b) ad_mul(a, b)
#define SIN(a) ad_sin(a)
#define COS(a) ad_cos(a)
#define CST(v) ad_const(v)
#define WIN_CREATE ad_mpi_win_create
#define FENCE ad_mpi_win_fence
#define EXP(a) ad_exp(a)
#define REQ ad_mpi_request
#define ALLTOALLW ad_mpi_alltoallw
#define IALLTOALLW ad_mpi_ialltoallw
#define ALLTOALLW_INIT ad_mpi_alltoallw_init
#define ALLTOALLV ad_mpi_alltoallv
#define IALLTOALLV ad_mpi_ialltoallv
#define NEIGHBOR_W ad_mpi_neighbor_alltoallw
#define INEIGHBOR_W ad_mpi_ineighbor_alltoallw
#define NEIGHBOR_V ad_mpi_neighbor_alltoallv
#define REDUCE_SCATTER ad_mpi_reduce_scatter
#define START ad_mpi_start
#define WAIT ad_mpi_wait
#define REQUEST_FREE ad_mpi_request_free
#else
#define R double
#define F(name) name##_plain
#define RT MPI_DOUBLE
#define WIN_ALLOCATE MPI_Win_allocate
#define WIN_FREE MPI_Win_free
#define LOCK MPI_Win_lock
#define UNLOCK MPI_Win_unlock
#define LOCK_ALL MPI_Win_lock_all
#define UNLOCK_ALL MPI_Win_unlock_all
#define FLUSH MPI_Win_flush
#define FLUSH_ALL MPI_Win_flush_all
#define FLUSH_LOCAL MPI_Win_flush_local
#define FLUSH_LOCAL_ALL MPI_Win_flush_local_all
#define WIN_SYNC MPI_Win_sync
#define PLAIN_SYNC(win) MPI_Win_sync(win)
#define BARRIER() MPI_Barrier(MPI_COMM_WORLD)
#define PUT MPI_Put
#define GET MPI_Get
#define ACC MPI_Accumulate
#define GACC MPI_Get_accumulate
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define SIN(a) sin(a)
#define COS(a) cos(a)
#define CST(v) (v)
#define WIN_CREATE MPI_Win_create
#define FENCE MPI_Win_fence
#define EXP(a) exp(a)
#define REQ MPI_Request
#define ALLTOALLW MPI_Alltoallw
#define IALLTOALLW MPI_Ialltoallw
#define ALLTOALLW_INIT MPI_Alltoallw_init
#define ALLTOALLV MPI_Alltoallv
#define IALLTOALLV MPI_Ialltoallv
#define NEIGHBOR_W MPI_Neighbor_alltoallw
#define INEIGHBOR_W MPI_Ineighbor_alltoallw
#define NEIGHBOR_V MPI_Neighbor_alltoallv
#define REDUCE_SCATTER MPI_Reduce_scatter
#define START MPI_Start
#define WAIT MPI_Wait
#define REQUEST_FREE MPI_Request_free
#endif
