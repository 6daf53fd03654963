/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ariadne MPI layer: differentiable MPI communication.
 *
 * Every wrapper has the argument list of its MPI twin, so porting is a rename:
 * MPI_Send(buf, n, MPI_DOUBLE, ...) becomes ad_mpi_send(buf, n, AD_MPI_REAL, ...)
 * with `buf` an array of ad_real. Datatypes built on AD_MPI_REAL
 * (MPI_Type_contiguous, _vector, _create_hvector, _indexed,
 * _create_indexed_block, _create_hindexed(_block), _create_subarray,
 * _create_resized, _dup, _create_struct, nested) work in every wrapper
 * that moves data, blocking, nonblocking and persistent (alltoallw, the
 * neighbourhood collectives and the one-sided accesses included), as their
 * MPI_DOUBLE twins work; byte displacements and extents are written with
 * sizeof(ad_real) and offsetof.
 * A struct mixing AD_MPI_REAL with passive fields works wherever data moves
 * without being reduced, except in (neighbor_)alltoallw and one-sided
 * accesses. Predefined
 * reductions on derived types are refused with MPI_ERR_OP, as MPI refuses
 * them; types Ariadne cannot handle are refused with MPI_ERR_TYPE
 * (docs/mpi.md). Buffers of any other datatype pass through to MPI untouched
 * and record nothing, except ad_real data under a passive datatype
 * (MPI_DOUBLE for AD_MPI_REAL), which is refused (ad_mpi_set_check below).
 * Plain MPI calls on ad_real buffers can be refused at compile time (the end
 * of this header). Wrappers return MPI error codes.
 *
 * The forward call moves values (only values: the wire carries doubles) and
 * pushes a communication record on this thread's recording tape; the reverse
 * sweep (ad_reverse, ad_gradient, ...) and the tangent sweep (ad_forward) run
 * the matching adjoint and tangent communication at that record's position.
 * Sweeps of a tape with communication records are collective: every rank that
 * communicated must sweep its tape too. A rank whose objective lives on
 * another rank seeds nothing: it passes a passive output, which is not an
 * error on such a tape (ad_gradient(tape, rank == 0 ? J :
 * ad_const(ad_value(J)), n, x, g), docs/mpi.md). A tape that is reset
 * counts as communicating again only once its new recording communicates.
 *
 * Set-up: nothing beyond MPI_Init/MPI_Init_thread. The first wrapper call on a
 * communicator starts a nonblocking duplicate of it (MPI_Comm_idup) that
 * carries all adjoint and tangent traffic, so it never matches the user's own
 * messages. MPI requires nonblocking collectives on a communicator to be
 * started in the same order on all its ranks: if a rank can call a plain MPI
 * collective on a communicator before its first ad_mpi_* call there while
 * another rank has already made one, call ad_mpi_comm_prepare(comm) on all
 * ranks right after creating the communicator. Everything is freed at
 * MPI_Finalize (or when the user frees the communicator).
 *
 * Threads: call the wrappers from one thread per process (MPI_THREAD_FUNNELED
 * or above is fine).
 */
#ifndef ARIADNE_MPI_H
#define ARIADNE_MPI_H

/* C++ programs use MPI's C API, as the wrappers do: Open MPI's and MPICH's
 * headers would otherwise declare their deprecated C++ bindings, which need
 * a library of their own (libmpi_cxx). */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#if defined(__cplusplus) && !defined(MPICH_SKIP_MPICXX)
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "ariadne.h"
#include "ariadne_tools.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARIADNE_PASSIVE

/* The datatype of ad_real buffers: a committed type of one double's size,
 * so MPI_Get_count(status, AD_MPI_REAL, &n) counts elements. */
#define AD_MPI_REAL (ad_mpi_real_datatype())
MPI_Datatype ad_mpi_real_datatype(void);

/* Pairs for MPI_MINLOC / MPI_MAXLOC: AD_MPI_REAL_INT is the twin of
 * MPI_DOUBLE_INT, and its C layout is this struct (a value and an int, in
 * this order; in the passive build the value is a double, which is
 * MPI_DOUBLE_INT's layout). Every reduction (reduce, allreduce,
 * reduce_scatter(_block), scan, exscan; blocking, nonblocking and
 * persistent) with MPI_MINLOC or MPI_MAXLOC on it gives MPI's result (the
 * extremum, and on a tie the lowest index); the whole adjoint of a result
 * goes to the rank whose pair it is (the lowest such rank if several hold
 * the same pair). */
typedef struct ad_real_int {
  ad_real value;
  int index;
} ad_real_int;
#define AD_MPI_REAL_INT (ad_mpi_real_int_datatype())
MPI_Datatype ad_mpi_real_int_datatype(void);

/* A user-defined reduction, the port of MPI_Op_create: the function has
 * MPI's MPI_User_function type in both builds,
 *   void f(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype),
 * and computes inoutvec[i] = invec[i] op inoutvec[i] for the *len items of
 * *datatype, on ad_real data written with Ariadne's arithmetic, which is
 * recorded (doubles in the passive build, where it is MPI_Op_create and MPI
 * calls it with the MPI_DOUBLE type; in the active build Ariadne calls it
 * with AD_MPI_REAL or the user's type built from it). Usable in
 * ad_mpi_reduce, _allreduce, _reduce_scatter, _reduce_scatter_block, _scan
 * and _exscan, and their nonblocking and persistent forms (there the
 * function runs when a completion call completes the request). Cost: the contributions are gathered (to the root for reduce,
 * to every rank otherwise; an alltoall(v) for the reduce_scatters) and the
 * function is applied size - 1 times on every rank that gets a result: a
 * result costs size * count values received and size - 1 local applications
 * on the tape instead of MPI's tree. The operands keep MPI's (rank) order, so
 * commute may be 0. Free the operation with ad_mpi_op_free (MPI_Op_free in
 * the passive build); never give it to a plain MPI call. */
int ad_mpi_op_create(MPI_User_function *function, int commute, MPI_Op *op);
int ad_mpi_op_free(MPI_Op *op);

/* A request of a nonblocking wrapper. Initialize with AD_MPI_REQUEST_NULL or
 * let ad_mpi_isend/irecv fill it. Fields are read-only. */
typedef struct ad_mpi_request {
  MPI_Request mpi; /* the MPI request; MPI_REQUEST_NULL once completed */
  int slot;        /* internal bookkeeping, -1 if none */
  unsigned gen;
} ad_mpi_request;
#define AD_MPI_REQUEST_NULL                                                                                            \
  { MPI_REQUEST_NULL, -1, 0u }

/* Communication statistics of this process: payload bytes of ad_real values
 * sent by the forward wrappers, by reverse sweeps and by tangent sweeps
 * (handshakes and bookkeeping not counted). Point-to-point messages count
 * their data (nothing for MPI_PROC_NULL); a collective counts what this rank
 * would send to the others if it were made of direct messages, so that,
 * summed over the ranks, a reverse sweep moves exactly the bytes of the
 * forward run it reverses. */
typedef struct ad_mpi_stats {
  uint64_t forward_bytes;
  uint64_t adjoint_bytes;
  uint64_t tangent_bytes;
  uint64_t records;
} ad_mpi_stats;
void ad_mpi_stats_get(ad_mpi_stats *out);
void ad_mpi_stats_reset(void);

/* Collective over comm: create the private duplicate now (see above). If a
 * sweep over comm gave up on some rank (a timeout), give it a fresh private
 * duplicate for the recordings made from now on (the first collective over
 * comm in a recording does the same); recordings made before are refused.
 * MPI_SUCCESS or an MPI error code. */
int ad_mpi_comm_prepare(MPI_Comm comm);
/* Seconds a sweep waits for another rank's adjoint or tangent data before it
 * fails with AD_ERR_MPI (a rank that never started its sweep, or that
 * recorded a different communication). Default 60, or the environment
 * variable ARIADNE_MPI_TIMEOUT. */
void ad_mpi_set_timeout(double seconds);
/* Check mode. ad_real data given to a wrapper under a passive datatype
 * (MPI_DOUBLE, MPI_FLOAT, MPI_BYTE, ... instead of AD_MPI_REAL) is refused
 * with MPI_ERR_TYPE and a sticky tape error naming the call: MPI would move
 * its bytes, handles included, and the gradient would be wrong without an
 * error. The wrappers recognise such data by the handles of the recording
 * tape in the buffers MPI reads; they look at a few elements by default and
 * at every element in check mode, which the environment variable
 * ARIADNE_MPI_CHECK=1 turns on (see docs/mpi.md for what is and is not
 * seen). In check mode the ranks of a collective on passive data also agree
 * on the verdict before it (one small reduction), so that all of them
 * refuse when the data of one is refused; outside check mode a rank refuses
 * alone what it sees. Set it alike on every rank. ad_mpi_set_check turns it
 * on (1) or off (0) and returns the previous setting; ad_mpi_check_enabled
 * returns the current one. */
int ad_mpi_set_check(int on);
int ad_mpi_check_enabled(void);
/* A checkpointed loop (ariadne_checkpoint.h) run by the ranks of comm only,
 * or whose steps communicate through plain MPI calls: its ranks agree over
 * comm (where a resumable run resumes, whether every rank has its files,
 * that every rank sweeps the loop). Sets opts->comm; collective over comm
 * the first time comm is used by the MPI layer. MPI_SUCCESS or an MPI error
 * code. */
struct ad_ckpt_options;
int ad_mpi_ckpt_comm(struct ad_ckpt_options *opts, MPI_Comm comm);

/* Point to point. Any send mode's adjoint is a receive and vice versa. */
int ad_mpi_send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int ad_mpi_ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int ad_mpi_bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int ad_mpi_rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
/* Wildcards (MPI_ANY_SOURCE, MPI_ANY_TAG) are fine: the sweeps use the
 * source and tag that actually matched. */
int ad_mpi_recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status);
int ad_mpi_isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 ad_mpi_request *request);
int ad_mpi_irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                 ad_mpi_request *request);
/* Completion. A request that was already completed (a copy waited twice)
 * gives MPI_ERR_REQUEST; a null request completes at once, as in MPI. */
int ad_mpi_wait(ad_mpi_request *request, MPI_Status *status);
int ad_mpi_waitall(int count, ad_mpi_request array_of_requests[], MPI_Status *array_of_statuses);
int ad_mpi_waitany(int count, ad_mpi_request array_of_requests[], int *index, MPI_Status *status);
int ad_mpi_test(ad_mpi_request *request, int *flag, MPI_Status *status);
int ad_mpi_testall(int count, ad_mpi_request array_of_requests[], int *flag, MPI_Status *array_of_statuses);
int ad_mpi_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int ad_mpi_sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                            MPI_Comm comm, MPI_Status *status);

/* More point to point. Issend, Ibsend and Irsend record as Isend does: any
 * send mode's adjoint is a receive. Waitsome, Testany and Testsome complete
 * requests of every kind, as Wait does. */
int ad_mpi_issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  ad_mpi_request *request);
int ad_mpi_ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  ad_mpi_request *request);
int ad_mpi_irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  ad_mpi_request *request);
int ad_mpi_waitsome(int incount, ad_mpi_request array_of_requests[], int *outcount, int array_of_indices[],
                    MPI_Status *array_of_statuses);
int ad_mpi_testany(int count, ad_mpi_request array_of_requests[], int *index, int *flag, MPI_Status *status);
int ad_mpi_testsome(int incount, ad_mpi_request array_of_requests[], int *outcount, int array_of_indices[],
                    MPI_Status *array_of_statuses);
/* Frees a request. An active send goes on and is differentiated (its
 * completion is recorded here); an active receive of AD_MPI_REAL data, and
 * the request of a nonblocking collective, give MPI_ERR_REQUEST and a
 * sticky tape error: complete (or cancel, then complete) them first. So does
 * a null request. */
int ad_mpi_request_free(ad_mpi_request *request);
/* Cancels a receive that has not matched a message yet; complete it with a
 * wait or test as in MPI (MPI_Test_cancelled on its status). A cancelled
 * receive leaves no record. A receive that already matched, a send of
 * AD_MPI_REAL data, an inactive persistent request, a nonblocking collective
 * and a null request give MPI_ERR_REQUEST and a sticky tape error. */
int ad_mpi_cancel(ad_mpi_request *request);

/* Persistent requests: set up once (no record), then every ad_mpi_start
 * takes the buffer's current values (a send) and records one
 * communication, exactly as the nonblocking call with these arguments
 * would; complete each start with a wait or test. ad_mpi_request_free
 * releases the request. Starting an active request, or a request that is
 * not persistent (a null one included), gives MPI_ERR_REQUEST and a sticky
 * tape error; ad_mpi_startall then starts none. */
int ad_mpi_send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                     ad_mpi_request *request);
int ad_mpi_ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      ad_mpi_request *request);
int ad_mpi_bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      ad_mpi_request *request);
int ad_mpi_rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                      ad_mpi_request *request);
int ad_mpi_recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                     ad_mpi_request *request);
int ad_mpi_start(ad_mpi_request *request);
int ad_mpi_startall(int count, ad_mpi_request array_of_requests[]);

/* Probes. Probe and Iprobe record nothing; MPI_Get_count(&status,
 * AD_MPI_REAL, &n) counts the elements of a probed message. A matched probe
 * fills an ad_mpi_message (MPI_Message in the passive build); receive it
 * with ad_mpi_mrecv or ad_mpi_imrecv, which record as ad_mpi_recv and
 * ad_mpi_irecv do. The message takes its place among the receives of its
 * source and tag at the probe, as in MPI. A message received already (a
 * stale copy) gives MPI_ERR_REQUEST and a sticky tape error. Matched probes
 * set up the communicator's private duplicate on first use, whatever the
 * type of the later receive (see ad_mpi_comm_prepare). */
typedef struct ad_mpi_message {
  MPI_Message mpi; /* the MPI message; MPI_MESSAGE_NULL once received */
  int slot;        /* internal bookkeeping, -1 if none */
  unsigned gen;
} ad_mpi_message;
#define AD_MPI_MESSAGE_NULL                                                                                            \
  { MPI_MESSAGE_NULL, -1, 0u }
int ad_mpi_probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int ad_mpi_iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int ad_mpi_mprobe(int source, int tag, MPI_Comm comm, ad_mpi_message *message, MPI_Status *status);
int ad_mpi_improbe(int source, int tag, MPI_Comm comm, int *flag, ad_mpi_message *message, MPI_Status *status);
int ad_mpi_mrecv(void *buf, int count, MPI_Datatype datatype, ad_mpi_message *message, MPI_Status *status);
int ad_mpi_imrecv(void *buf, int count, MPI_Datatype datatype, ad_mpi_message *message, ad_mpi_request *request);

/* Collectives. MPI_IN_PLACE works wherever MPI allows it. Reductions on
 * AD_MPI_REAL support MPI_SUM, MPI_PROD (zeros are fine: the partials are
 * products of the other contributions, never a division), MPI_MIN and MPI_MAX
 * (the whole adjoint goes to the rank that owns the extremum; on a tie, the
 * lowest rank; NaN propagates: if any contribution is NaN the result is NaN,
 * whatever MPI's own MIN/MAX would give, and the lowest rank with a NaN owns
 * it). Scan and Exscan support MPI_SUM. */
int ad_mpi_barrier(MPI_Comm comm);
int ad_mpi_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int ad_mpi_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                  MPI_Comm comm);
int ad_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int ad_mpi_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm);
int ad_mpi_gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm);
int ad_mpi_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm);
int ad_mpi_scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                    void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int ad_mpi_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                     void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm);
int ad_mpi_scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int ad_mpi_exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int ad_mpi_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm);
/* Alltoallw is differentiated when every datatype in use is AD_MPI_REAL
 * (displacements in bytes, whole ad_real elements); with none it is MPI's;
 * a mix gives MPI_ERR_TYPE. */
int ad_mpi_alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                     void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                     MPI_Comm comm);

/* Nonblocking collectives: the same rules as the blocking ones, completed by
 * any completion call (ad_mpi_wait, ad_mpi_waitall with point-to-point
 * requests mixed in, ad_mpi_test, ...). The tangent sweep mirrors the
 * forward call; the reverse sweep starts each adjoint collective where the
 * forward call completed and waits for it where the forward call started,
 * in the order MPI requires on every rank. A nonblocking MPI_PROD, MPI_MIN
 * or MPI_MAX reduction gathers every rank's contributions (p times the data
 * of the reduction) and reduces them at completion; MPI_SUM runs as MPI's
 * own reduction. */
int ad_mpi_ibarrier(MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                   MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                      ad_mpi_request *request);
int ad_mpi_igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                     ad_mpi_request *request);
int ad_mpi_iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                       const int displs[], MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                      void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                      ad_mpi_request *request);
int ad_mpi_ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                      void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                      MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                           MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 ad_mpi_request *request);
int ad_mpi_iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   ad_mpi_request *request);

/* Neighbourhood collectives on Cartesian, graph and distributed-graph
 * communicators: the adjoint sends each received slot's adjoint back along
 * its edge (a distributed graph's edges reversed on a private communicator
 * made at the first sweep), and allgather(v)'s adjoint sums what comes back
 * along every edge. Alltoallw: every datatype in use AD_MPI_REAL, or none. */
int ad_mpi_neighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_neighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                               const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_neighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, MPI_Comm comm);
int ad_mpi_neighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                              void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                              MPI_Comm comm);
int ad_mpi_neighbor_alltoallw(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                              const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                              const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int ad_mpi_ineighbor_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                               MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ineighbor_allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                ad_mpi_request *request);
int ad_mpi_ineighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ineighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                               void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                               MPI_Comm comm, ad_mpi_request *request);
int ad_mpi_ineighbor_alltoallw(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                               const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                               const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                               ad_mpi_request *request);

#if MPI_VERSION >= 4
/* Persistent collectives (MPI 4.0; declared when the MPI library has them):
 * the arguments are kept, and every ad_mpi_start (or ad_mpi_startall) runs
 * the nonblocking twin, which records one collective; complete each start
 * with any completion call, release with ad_mpi_request_free. The info
 * argument is accepted and not used. */
int ad_mpi_barrier_init(MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_bcast_init(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                      ad_mpi_request *request);
int ad_mpi_reduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                       MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_allreduce_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_reduce_scatter_init(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_scan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, ad_mpi_request *request);
int ad_mpi_exscan_init(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                       MPI_Info info, ad_mpi_request *request);
int ad_mpi_gather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                       MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_gatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                        MPI_Info info, ad_mpi_request *request);
int ad_mpi_scatter_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_scatterv_init(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                         ad_mpi_request *request);
int ad_mpi_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Info info, ad_mpi_request *request);
int ad_mpi_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                          void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                          MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_alltoallw_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[],
                          const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_neighbor_allgather_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                   ad_mpi_request *request);
int ad_mpi_neighbor_allgatherv_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                    MPI_Info info, ad_mpi_request *request);
int ad_mpi_neighbor_alltoall_init(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                  ad_mpi_request *request);
int ad_mpi_neighbor_alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[],
                                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, ad_mpi_request *request);
int ad_mpi_neighbor_alltoallw_init(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                                   const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                                   MPI_Info info, ad_mpi_request *request);
#endif

/* ---- One-sided communication (docs/mpi-onesided.md) ----------------------
 * Windows on ad_real memory, synchronised by fences. The window handle is
 * MPI's own MPI_Win: a window created here is an MPI window over a private
 * array of doubles kept next to the user's ad_real array; the fences move
 * values between the two. Such a window counts in elements: its
 * displacement unit is sizeof(ad_real) and its size a multiple of it (in the
 * passive build ad_real is double, so the same source is right for both).
 * Other displacement units or sizes give MPI_ERR_DISP / MPI_ERR_SIZE on
 * every rank. All calls return MPI error codes; a refused call leaves a
 * sticky error naming it on the recording tape.
 *
 * Access epochs are opened and closed by ad_mpi_win_fence (or are
 * passive-target epochs, below). Inside one, only AD_MPI_REAL data and
 * datatypes built on it without passive fields, with as many elements at
 * the origin as at the target (MPI_ERR_TYPE, MPI_ERR_COUNT otherwise); a window that these calls did not create takes
 * other data and passes it to MPI (AD_MPI_REAL there is MPI_ERR_WIN). An
 * epoch's operations belong to one recording (MPI_ERR_RMA_SYNC otherwise),
 * and a sweep of a tape with an epoch still open fails (AD_ERR_MPI) on every
 * rank: close it with a fence before ad_tape_end. The results of gets are
 * in the origin buffer after the fence, as in MPI; that buffer may not lie
 * in a window (MPI_ERR_BUFFER). */
/* Collective over comm. `base` holds size / sizeof(ad_real) elements. */
int ad_mpi_win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win);
/* Collective over comm: *(ad_real **)baseptr gets size / sizeof(ad_real)
 * elements (zero in the active build; MPI leaves them unset in the passive
 * one), freed by ad_mpi_win_free. */
int ad_mpi_win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win);
/* Collective. MPI_ERR_RMA_SYNC on every rank if any rank has operations not
 * yet completed by a fence (or an unlock), or holds a lock. Records of
 * fence epochs do not need the window: it may be freed before the sweeps;
 * a window used in passive-target epochs is freed in the recording. */
int ad_mpi_win_free(MPI_Win *win);
/* Collective over the window's ranks; closes the epoch begun by the
 * previous fence and opens one (unless MPI_MODE_NOSUCCEED). It refuses, on
 * every rank, with MPI_ERR_RMA_CONFLICT an epoch whose accesses MPI leaves
 * undefined: an element written by two operations, or written and read,
 * except accumulates with MPI_SUM (which may overlap each other), and a
 * rank's own store into an element of its window that another operation of
 * the epoch accessed. The sweeps run the epoch's adjoint or tangent
 * communication at this fence's place on the tape. */
int ad_mpi_win_fence(int assert, MPI_Win win);
int ad_mpi_put(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
               MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win);
int ad_mpi_get(void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
               int target_count, MPI_Datatype target_datatype, MPI_Win win);
/* MPI_SUM and MPI_REPLACE (MPI_ERR_OP otherwise). */
int ad_mpi_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                      MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);
/* MPI_SUM, MPI_REPLACE and MPI_NO_OP (a get). */
int ad_mpi_get_accumulate(const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr,
                          int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                          int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win);
/* Passive-target synchronisation (docs/mpi-onesided.md, "Passive target").
 * On a window of ad_real: a rank's array changes only at its
 * synchronisation points, ad_mpi_win_sync, its lock and unlock of its own
 * part, ad_mpi_win_lock_all and ad_mpi_win_unlock_all, ad_mpi_barrier and
 * the window's free: there it takes in what completed operations of other
 * ranks wrote, and its own stores become visible to them (after ordering
 * writer and reader by a message rather than a barrier, call
 * ad_mpi_win_sync before reading, as MPI's separate memory model requires).
 * ad_mpi_barrier publishes the stores before MPI's barrier, also before the
 * rank's first passive-target call on the window, and takes in after it.
 * An origin's operations on one target complete
 * at ad_mpi_win_unlock, ad_mpi_win_unlock_all or a flush (flush_local is a
 * flush here); fetched values are in the result buffer then. Accumulates
 * with MPI_REPLACE and get_accumulates other than MPI_NO_OP need an
 * exclusive lock (MPI_ERR_RMA_SYNC otherwise). A window used so while
 * recording is created and freed in that recording; a window is used
 * either with fences or with locks (MPI_ERR_RMA_SYNC). On other windows,
 * MPI's own calls. */
int ad_mpi_win_lock(int lock_type, int rank, int assert, MPI_Win win);
int ad_mpi_win_unlock(int rank, MPI_Win win);
int ad_mpi_win_lock_all(int assert, MPI_Win win);
int ad_mpi_win_unlock_all(MPI_Win win);
int ad_mpi_win_flush(int rank, MPI_Win win);
int ad_mpi_win_flush_all(MPI_Win win);
int ad_mpi_win_flush_local(int rank, MPI_Win win);
int ad_mpi_win_flush_local_all(MPI_Win win);
int ad_mpi_win_sync(MPI_Win win);
/* ---- end of one-sided communication ------------------------------------- */

#else /* ARIADNE_PASSIVE: every wrapper is its MPI twin. */

#define AD_MPI_REAL MPI_DOUBLE
#define AD_MPI_REAL_INT MPI_DOUBLE_INT
typedef struct ad_real_int {
  double value;
  int index;
} ad_real_int;
#define ad_mpi_op_create MPI_Op_create
#define ad_mpi_op_free MPI_Op_free
typedef MPI_Request ad_mpi_request;
#define AD_MPI_REQUEST_NULL MPI_REQUEST_NULL
static inline int ad_mpi_comm_prepare(MPI_Comm comm) {
  (void)comm;
  return MPI_SUCCESS;
}
static inline void ad_mpi_set_timeout(double s) { (void)s; }
static inline int ad_mpi_set_check(int on) {
  (void)on;
  return 0;
}
static inline int ad_mpi_check_enabled(void) { return 0; }
struct ad_ckpt_options;
static inline int ad_mpi_ckpt_comm(struct ad_ckpt_options *o, MPI_Comm comm) {
  (void)o;
  (void)comm;
  return MPI_SUCCESS;
}
#define ad_mpi_send MPI_Send
#define ad_mpi_ssend MPI_Ssend
#define ad_mpi_bsend MPI_Bsend
#define ad_mpi_rsend MPI_Rsend
#define ad_mpi_recv MPI_Recv
#define ad_mpi_isend MPI_Isend
#define ad_mpi_irecv MPI_Irecv
#define ad_mpi_wait MPI_Wait
#define ad_mpi_waitall MPI_Waitall
#define ad_mpi_waitany MPI_Waitany
#define ad_mpi_test MPI_Test
#define ad_mpi_testall MPI_Testall
#define ad_mpi_sendrecv MPI_Sendrecv
#define ad_mpi_sendrecv_replace MPI_Sendrecv_replace
typedef MPI_Message ad_mpi_message;
#define AD_MPI_MESSAGE_NULL MPI_MESSAGE_NULL
#define ad_mpi_issend MPI_Issend
#define ad_mpi_ibsend MPI_Ibsend
#define ad_mpi_irsend MPI_Irsend
#define ad_mpi_waitsome MPI_Waitsome
#define ad_mpi_testany MPI_Testany
#define ad_mpi_testsome MPI_Testsome
#define ad_mpi_request_free MPI_Request_free
#define ad_mpi_cancel MPI_Cancel
#define ad_mpi_send_init MPI_Send_init
#define ad_mpi_ssend_init MPI_Ssend_init
#define ad_mpi_bsend_init MPI_Bsend_init
#define ad_mpi_rsend_init MPI_Rsend_init
#define ad_mpi_recv_init MPI_Recv_init
#define ad_mpi_start MPI_Start
#define ad_mpi_startall MPI_Startall
#define ad_mpi_probe MPI_Probe
#define ad_mpi_iprobe MPI_Iprobe
#define ad_mpi_mprobe MPI_Mprobe
#define ad_mpi_improbe MPI_Improbe
#define ad_mpi_mrecv MPI_Mrecv
#define ad_mpi_imrecv MPI_Imrecv
#define ad_mpi_barrier MPI_Barrier
#define ad_mpi_bcast MPI_Bcast
#define ad_mpi_reduce MPI_Reduce
#define ad_mpi_allreduce MPI_Allreduce
#define ad_mpi_gather MPI_Gather
#define ad_mpi_gatherv MPI_Gatherv
#define ad_mpi_scatter MPI_Scatter
#define ad_mpi_scatterv MPI_Scatterv
#define ad_mpi_allgather MPI_Allgather
#define ad_mpi_allgatherv MPI_Allgatherv
#define ad_mpi_alltoall MPI_Alltoall
#define ad_mpi_alltoallv MPI_Alltoallv
#define ad_mpi_reduce_scatter_block MPI_Reduce_scatter_block
#define ad_mpi_scan MPI_Scan
#define ad_mpi_exscan MPI_Exscan
#define ad_mpi_reduce_scatter MPI_Reduce_scatter
#define ad_mpi_alltoallw MPI_Alltoallw
#define ad_mpi_ibarrier MPI_Ibarrier
#define ad_mpi_ibcast MPI_Ibcast
#define ad_mpi_ireduce MPI_Ireduce
#define ad_mpi_iallreduce MPI_Iallreduce
#define ad_mpi_igather MPI_Igather
#define ad_mpi_igatherv MPI_Igatherv
#define ad_mpi_iscatter MPI_Iscatter
#define ad_mpi_iscatterv MPI_Iscatterv
#define ad_mpi_iallgather MPI_Iallgather
#define ad_mpi_iallgatherv MPI_Iallgatherv
#define ad_mpi_ialltoall MPI_Ialltoall
#define ad_mpi_ialltoallv MPI_Ialltoallv
#define ad_mpi_ialltoallw MPI_Ialltoallw
#define ad_mpi_ireduce_scatter MPI_Ireduce_scatter
#define ad_mpi_ireduce_scatter_block MPI_Ireduce_scatter_block
#define ad_mpi_iscan MPI_Iscan
#define ad_mpi_iexscan MPI_Iexscan
#define ad_mpi_neighbor_allgather MPI_Neighbor_allgather
#define ad_mpi_neighbor_allgatherv MPI_Neighbor_allgatherv
#define ad_mpi_neighbor_alltoall MPI_Neighbor_alltoall
#define ad_mpi_neighbor_alltoallv MPI_Neighbor_alltoallv
#define ad_mpi_neighbor_alltoallw MPI_Neighbor_alltoallw
#define ad_mpi_ineighbor_allgather MPI_Ineighbor_allgather
#define ad_mpi_ineighbor_allgatherv MPI_Ineighbor_allgatherv
#define ad_mpi_ineighbor_alltoall MPI_Ineighbor_alltoall
#define ad_mpi_ineighbor_alltoallv MPI_Ineighbor_alltoallv
#define ad_mpi_ineighbor_alltoallw MPI_Ineighbor_alltoallw
#if MPI_VERSION >= 4
#define ad_mpi_barrier_init MPI_Barrier_init
#define ad_mpi_bcast_init MPI_Bcast_init
#define ad_mpi_reduce_init MPI_Reduce_init
#define ad_mpi_allreduce_init MPI_Allreduce_init
#define ad_mpi_reduce_scatter_init MPI_Reduce_scatter_init
#define ad_mpi_reduce_scatter_block_init MPI_Reduce_scatter_block_init
#define ad_mpi_scan_init MPI_Scan_init
#define ad_mpi_exscan_init MPI_Exscan_init
#define ad_mpi_gather_init MPI_Gather_init
#define ad_mpi_gatherv_init MPI_Gatherv_init
#define ad_mpi_scatter_init MPI_Scatter_init
#define ad_mpi_scatterv_init MPI_Scatterv_init
#define ad_mpi_allgather_init MPI_Allgather_init
#define ad_mpi_allgatherv_init MPI_Allgatherv_init
#define ad_mpi_alltoall_init MPI_Alltoall_init
#define ad_mpi_alltoallv_init MPI_Alltoallv_init
#define ad_mpi_alltoallw_init MPI_Alltoallw_init
#define ad_mpi_neighbor_allgather_init MPI_Neighbor_allgather_init
#define ad_mpi_neighbor_allgatherv_init MPI_Neighbor_allgatherv_init
#define ad_mpi_neighbor_alltoall_init MPI_Neighbor_alltoall_init
#define ad_mpi_neighbor_alltoallv_init MPI_Neighbor_alltoallv_init
#define ad_mpi_neighbor_alltoallw_init MPI_Neighbor_alltoallw_init
#endif
/* ---- One-sided communication ---- */
#define ad_mpi_win_create MPI_Win_create
#define ad_mpi_win_allocate MPI_Win_allocate
#define ad_mpi_win_free MPI_Win_free
#define ad_mpi_win_fence MPI_Win_fence
#define ad_mpi_put MPI_Put
#define ad_mpi_get MPI_Get
#define ad_mpi_accumulate MPI_Accumulate
#define ad_mpi_get_accumulate MPI_Get_accumulate
#define ad_mpi_win_lock MPI_Win_lock
#define ad_mpi_win_unlock MPI_Win_unlock
#define ad_mpi_win_lock_all MPI_Win_lock_all
#define ad_mpi_win_unlock_all MPI_Win_unlock_all
#define ad_mpi_win_flush MPI_Win_flush
#define ad_mpi_win_flush_all MPI_Win_flush_all
#define ad_mpi_win_flush_local MPI_Win_flush_local
#define ad_mpi_win_flush_local_all MPI_Win_flush_local_all
#define ad_mpi_win_sync MPI_Win_sync
/* ---- end of one-sided communication ---- */

#endif /* ARIADNE_PASSIVE */

/* ------------------------------------------------------------------------ */
/* Tools over the ranks (see ariadne_tools.h)                                */
/* ------------------------------------------------------------------------ */

#ifndef ARIADNE_PASSIVE
/* ad_check_gradient for a collective f: each rank gives its n inputs x0
 * (numbered globally in rank order), the outputs are sums over the ranks,
 * the sweeps and the finite differences run on all ranks at once, and rank 0
 * prints (with the owner rank of each entry). Collective over comm; every
 * rank gets the same result and return code (AD_ERR_MPI if comm is bad). */
int ad_mpi_check_gradient(MPI_Comm comm, ad_check_fn f, void *ud, size_t n, const double *x0, size_t m,
                          const ad_check_options *opts, ad_check_result *res);
/* ad_tape_dump into one file per rank: "<prefix>.<rank>.txt" (AD_DUMP_TEXT),
 * ".dot" or ".stats.txt". Not collective. */
int ad_mpi_tape_dump(const ad_tape *tape, MPI_Comm comm, const char *prefix, ad_dump_format format);
#endif

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------ */
/* Plain MPI calls on ad_real buffers, refused at compile time               */
/* ------------------------------------------------------------------------ */

/* A plain MPI call given an ad_real buffer moves its bytes: the receiver
 * gets the sender's handles, and a reduction on MPI_DOUBLE reduces the
 * values and leaves the handles where they were, so every printed number is
 * right and the gradient is not. Where the compiler sees the buffer's type,
 * the call is turned into a compile error naming the ad_mpi_* call to use:
 *
 * - C++: always (ARIADNE_MPI_NO_GUARD turns it off). The calls below get an
 *   overload that wins for an ad_real * or const ad_real * argument and fails
 *   with "static assertion failed: MPI_Allreduce on ad_real data: use
 *   ad_mpi_allreduce with AD_MPI_REAL".
 * - C: when ARIADNE_MPI_GUARD is defined before this header is included.
 *   The calls below become macros that pass other buffers through unchanged
 *   and turn an ad_real * buffer into a value of type `struct
 *   ad_real_buffer__use_ad_mpi_allreduce_with_AD_MPI_REAL`, which the
 *   compiler refuses as the call's buffer ("incompatible type for argument
 *   1 of 'MPI_Allreduce'"). A file that takes the address of one of these
 *   functions (&MPI_Send) is unaffected; one that defines its own macro of
 *   the same name must leave the guard off.
 *
 * A buffer seen through void * (a generic routine's argument) escapes both;
 * the wrappers' run-time check (ad_mpi_set_check) covers ad_mpi_* calls. */
#define AD__MPI_GUARDED(X)                                                                                             \
  X(MPI_Send, ad_mpi_send)                                                                                             \
  X(MPI_Ssend, ad_mpi_ssend)                                                                                           \
  X(MPI_Bsend, ad_mpi_bsend)                                                                                           \
  X(MPI_Rsend, ad_mpi_rsend)                                                                                           \
  X(MPI_Recv, ad_mpi_recv)                                                                                             \
  X(MPI_Isend, ad_mpi_isend)                                                                                           \
  X(MPI_Issend, ad_mpi_issend)                                                                                         \
  X(MPI_Ibsend, ad_mpi_ibsend)                                                                                         \
  X(MPI_Irsend, ad_mpi_irsend)                                                                                         \
  X(MPI_Irecv, ad_mpi_irecv)                                                                                           \
  X(MPI_Send_init, ad_mpi_send_init)                                                                                   \
  X(MPI_Recv_init, ad_mpi_recv_init)                                                                                   \
  X(MPI_Mrecv, ad_mpi_mrecv)                                                                                           \
  X(MPI_Imrecv, ad_mpi_imrecv)                                                                                         \
  X(MPI_Sendrecv, ad_mpi_sendrecv)                                                                                     \
  X(MPI_Sendrecv_replace, ad_mpi_sendrecv_replace)                                                                     \
  X(MPI_Bcast, ad_mpi_bcast)                                                                                           \
  X(MPI_Ibcast, ad_mpi_ibcast)                                                                                         \
  X(MPI_Reduce, ad_mpi_reduce)                                                                                         \
  X(MPI_Ireduce, ad_mpi_ireduce)                                                                                       \
  X(MPI_Allreduce, ad_mpi_allreduce)                                                                                   \
  X(MPI_Iallreduce, ad_mpi_iallreduce)                                                                                 \
  X(MPI_Reduce_scatter_block, ad_mpi_reduce_scatter_block)                                                             \
  X(MPI_Reduce_scatter, ad_mpi_reduce_scatter)                                                                         \
  X(MPI_Scan, ad_mpi_scan)                                                                                             \
  X(MPI_Exscan, ad_mpi_exscan)                                                                                         \
  X(MPI_Iscan, ad_mpi_iscan)                                                                                           \
  X(MPI_Iexscan, ad_mpi_iexscan)                                                                                       \
  X(MPI_Gather, ad_mpi_gather)                                                                                         \
  X(MPI_Igather, ad_mpi_igather)                                                                                       \
  X(MPI_Gatherv, ad_mpi_gatherv)                                                                                       \
  X(MPI_Igatherv, ad_mpi_igatherv)                                                                                     \
  X(MPI_Scatter, ad_mpi_scatter)                                                                                       \
  X(MPI_Iscatter, ad_mpi_iscatter)                                                                                     \
  X(MPI_Scatterv, ad_mpi_scatterv)                                                                                     \
  X(MPI_Iscatterv, ad_mpi_iscatterv)                                                                                   \
  X(MPI_Allgather, ad_mpi_allgather)                                                                                   \
  X(MPI_Iallgather, ad_mpi_iallgather)                                                                                 \
  X(MPI_Allgatherv, ad_mpi_allgatherv)                                                                                 \
  X(MPI_Iallgatherv, ad_mpi_iallgatherv)                                                                               \
  X(MPI_Alltoall, ad_mpi_alltoall)                                                                                     \
  X(MPI_Ialltoall, ad_mpi_ialltoall)                                                                                   \
  X(MPI_Alltoallv, ad_mpi_alltoallv)                                                                                   \
  X(MPI_Ialltoallv, ad_mpi_ialltoallv)

#if defined(__cplusplus) && !defined(ARIADNE_PASSIVE) && !defined(ARIADNE_MPI_NO_GUARD)
/* An overload that takes any arguments and exists only when one of them is
 * an ad_real pointer: it is then a better match than MPI's (no conversion to
 * const void *), and instantiating it fails with the message. */
template <class... A> struct ad__mpi_any_real { static const bool value = false; };
template <class T, class... A> struct ad__mpi_any_real<T, A...> {
  static const bool value = ad__mpi_any_real<A...>::value;
};
template <class... A> struct ad__mpi_any_real<ad_real *, A...> { static const bool value = true; };
template <class... A> struct ad__mpi_any_real<const ad_real *, A...> { static const bool value = true; };
template <bool B> struct ad__mpi_enable {};
template <> struct ad__mpi_enable<true> { typedef int type; };
#define AD__MPI_CXX_GUARD(mpi, ad)                                                                                     \
  template <class... A, typename ad__mpi_enable<ad__mpi_any_real<A...>::value>::type = 0> int mpi(A...) {              \
    static_assert(!ad__mpi_any_real<A...>::value, #mpi " on ad_real data: use " #ad " with AD_MPI_REAL");              \
    return MPI_ERR_TYPE;                                                                                               \
  }
AD__MPI_GUARDED(AD__MPI_CXX_GUARD)
#undef AD__MPI_CXX_GUARD
#endif

#if !defined(__cplusplus) && !defined(ARIADNE_PASSIVE) && defined(ARIADNE_MPI_GUARD)
#define AD__MPI_GUARD_TYPE(mpi, ad)                                                                                    \
  struct ad_real_buffer__use_##ad##_with_AD_MPI_REAL {                                                                 \
    char unused;                                                                                                       \
  };
AD__MPI_GUARDED(AD__MPI_GUARD_TYPE)
#undef AD__MPI_GUARD_TYPE
/* The buffer b of a call whose wrapper is ad, or the error's value. */
#define AD__MPI_GUARD(b, ad)                                                                                           \
  _Generic((b), ad_real *                                                                                              \
           : (struct ad_real_buffer__use_##ad##_with_AD_MPI_REAL){0}, const ad_real *                                  \
           : (struct ad_real_buffer__use_##ad##_with_AD_MPI_REAL){0}, default                                          \
           : (b))
/* Calls by the places of their buffers: the first argument; the first and
 * second; the first and the fourth, fifth or sixth. */
#define AD__MPI_G1(f, ad, b, ...) f(AD__MPI_GUARD(b, ad), __VA_ARGS__)
#define AD__MPI_G12(f, ad, s, r, ...) f(AD__MPI_GUARD(s, ad), AD__MPI_GUARD(r, ad), __VA_ARGS__)
#define AD__MPI_G14(f, ad, s, a1, a2, r, ...) f(AD__MPI_GUARD(s, ad), a1, a2, AD__MPI_GUARD(r, ad), __VA_ARGS__)
#define AD__MPI_G15(f, ad, s, a1, a2, a3, r, ...) f(AD__MPI_GUARD(s, ad), a1, a2, a3, AD__MPI_GUARD(r, ad), __VA_ARGS__)
#define AD__MPI_G16(f, ad, s, a1, a2, a3, a4, r, ...)                                                                  \
  f(AD__MPI_GUARD(s, ad), a1, a2, a3, a4, AD__MPI_GUARD(r, ad), __VA_ARGS__)
#define MPI_Send(...) AD__MPI_G1(MPI_Send, ad_mpi_send, __VA_ARGS__)
#define MPI_Ssend(...) AD__MPI_G1(MPI_Ssend, ad_mpi_ssend, __VA_ARGS__)
#define MPI_Bsend(...) AD__MPI_G1(MPI_Bsend, ad_mpi_bsend, __VA_ARGS__)
#define MPI_Rsend(...) AD__MPI_G1(MPI_Rsend, ad_mpi_rsend, __VA_ARGS__)
#define MPI_Recv(...) AD__MPI_G1(MPI_Recv, ad_mpi_recv, __VA_ARGS__)
#define MPI_Isend(...) AD__MPI_G1(MPI_Isend, ad_mpi_isend, __VA_ARGS__)
#define MPI_Issend(...) AD__MPI_G1(MPI_Issend, ad_mpi_issend, __VA_ARGS__)
#define MPI_Ibsend(...) AD__MPI_G1(MPI_Ibsend, ad_mpi_ibsend, __VA_ARGS__)
#define MPI_Irsend(...) AD__MPI_G1(MPI_Irsend, ad_mpi_irsend, __VA_ARGS__)
#define MPI_Irecv(...) AD__MPI_G1(MPI_Irecv, ad_mpi_irecv, __VA_ARGS__)
#define MPI_Send_init(...) AD__MPI_G1(MPI_Send_init, ad_mpi_send_init, __VA_ARGS__)
#define MPI_Recv_init(...) AD__MPI_G1(MPI_Recv_init, ad_mpi_recv_init, __VA_ARGS__)
#define MPI_Mrecv(...) AD__MPI_G1(MPI_Mrecv, ad_mpi_mrecv, __VA_ARGS__)
#define MPI_Imrecv(...) AD__MPI_G1(MPI_Imrecv, ad_mpi_imrecv, __VA_ARGS__)
#define MPI_Sendrecv(...) AD__MPI_G16(MPI_Sendrecv, ad_mpi_sendrecv, __VA_ARGS__)
#define MPI_Sendrecv_replace(...) AD__MPI_G1(MPI_Sendrecv_replace, ad_mpi_sendrecv_replace, __VA_ARGS__)
#define MPI_Bcast(...) AD__MPI_G1(MPI_Bcast, ad_mpi_bcast, __VA_ARGS__)
#define MPI_Ibcast(...) AD__MPI_G1(MPI_Ibcast, ad_mpi_ibcast, __VA_ARGS__)
#define MPI_Reduce(...) AD__MPI_G12(MPI_Reduce, ad_mpi_reduce, __VA_ARGS__)
#define MPI_Ireduce(...) AD__MPI_G12(MPI_Ireduce, ad_mpi_ireduce, __VA_ARGS__)
#define MPI_Allreduce(...) AD__MPI_G12(MPI_Allreduce, ad_mpi_allreduce, __VA_ARGS__)
#define MPI_Iallreduce(...) AD__MPI_G12(MPI_Iallreduce, ad_mpi_iallreduce, __VA_ARGS__)
#define MPI_Reduce_scatter_block(...) AD__MPI_G12(MPI_Reduce_scatter_block, ad_mpi_reduce_scatter_block, __VA_ARGS__)
#define MPI_Reduce_scatter(...) AD__MPI_G12(MPI_Reduce_scatter, ad_mpi_reduce_scatter, __VA_ARGS__)
#define MPI_Scan(...) AD__MPI_G12(MPI_Scan, ad_mpi_scan, __VA_ARGS__)
#define MPI_Exscan(...) AD__MPI_G12(MPI_Exscan, ad_mpi_exscan, __VA_ARGS__)
#define MPI_Iscan(...) AD__MPI_G12(MPI_Iscan, ad_mpi_iscan, __VA_ARGS__)
#define MPI_Iexscan(...) AD__MPI_G12(MPI_Iexscan, ad_mpi_iexscan, __VA_ARGS__)
#define MPI_Gather(...) AD__MPI_G14(MPI_Gather, ad_mpi_gather, __VA_ARGS__)
#define MPI_Igather(...) AD__MPI_G14(MPI_Igather, ad_mpi_igather, __VA_ARGS__)
#define MPI_Gatherv(...) AD__MPI_G14(MPI_Gatherv, ad_mpi_gatherv, __VA_ARGS__)
#define MPI_Igatherv(...) AD__MPI_G14(MPI_Igatherv, ad_mpi_igatherv, __VA_ARGS__)
#define MPI_Scatter(...) AD__MPI_G14(MPI_Scatter, ad_mpi_scatter, __VA_ARGS__)
#define MPI_Iscatter(...) AD__MPI_G14(MPI_Iscatter, ad_mpi_iscatter, __VA_ARGS__)
#define MPI_Scatterv(...) AD__MPI_G15(MPI_Scatterv, ad_mpi_scatterv, __VA_ARGS__)
#define MPI_Iscatterv(...) AD__MPI_G15(MPI_Iscatterv, ad_mpi_iscatterv, __VA_ARGS__)
#define MPI_Allgather(...) AD__MPI_G14(MPI_Allgather, ad_mpi_allgather, __VA_ARGS__)
#define MPI_Iallgather(...) AD__MPI_G14(MPI_Iallgather, ad_mpi_iallgather, __VA_ARGS__)
#define MPI_Allgatherv(...) AD__MPI_G14(MPI_Allgatherv, ad_mpi_allgatherv, __VA_ARGS__)
#define MPI_Iallgatherv(...) AD__MPI_G14(MPI_Iallgatherv, ad_mpi_iallgatherv, __VA_ARGS__)
#define MPI_Alltoall(...) AD__MPI_G14(MPI_Alltoall, ad_mpi_alltoall, __VA_ARGS__)
#define MPI_Ialltoall(...) AD__MPI_G14(MPI_Ialltoall, ad_mpi_ialltoall, __VA_ARGS__)
#define MPI_Alltoallv(...) AD__MPI_G15(MPI_Alltoallv, ad_mpi_alltoallv, __VA_ARGS__)
#define MPI_Ialltoallv(...) AD__MPI_G15(MPI_Ialltoallv, ad_mpi_ialltoallv, __VA_ARGS__)
#endif

#endif /* ARIADNE_MPI_H */
