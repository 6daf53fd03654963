/* SPDX-License-Identifier: BSD-3-Clause */
/* Reductions beyond MPI_SUM, MPI_PROD, MPI_MIN and MPI_MAX on AD_MPI_REAL.
 *
 * MINLOC / MAXLOC on AD_MPI_REAL_INT pairs: the pairs are reduced by MPI as
 * MPI_DOUBLE_INT, then a second allreduce names the lowest rank whose pair is
 * the result (its owner); the record is an ordinary reduction whose weights
 * are 1 at the owner and 0 elsewhere, so the sweeps of coll.c apply: the
 * whole adjoint goes to the owner of the location.
 *
 * User-defined operations (ad_mpi_op_create): the contributions are gathered
 * with the differentiated gather, allgather or alltoall, and the user's
 * function is applied locally on ad_real values, in rank order, so that its
 * arithmetic is recorded on the tape like any other. Costs: every rank that
 * gets a result receives all size contributions (size * count values instead
 * of count) and applies the function size - 1 times; the adjoint and tangent
 * sweeps move what the gathers' sweeps move. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

/* ------------------------------------------------------------------------ */
/* AD_MPI_REAL_INT                                                           */
/* ------------------------------------------------------------------------ */

static MPI_Datatype real_int_type = MPI_DATATYPE_NULL;

MPI_Datatype ad_mpi_real_int_datatype(void) {
  if (real_int_type != MPI_DATATYPE_NULL) return real_int_type;
  if (ad__mpi_setup() != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  int bl[2] = {1, 1};
  MPI_Aint dsp[2] = {(MPI_Aint)offsetof(ad_real_int, value), (MPI_Aint)offsetof(ad_real_int, index)};
  MPI_Datatype ty[2] = {AD_MPI_REAL, MPI_INT}, s;
  if (MPI_Type_create_struct(2, bl, dsp, ty, &s) != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  int rc = MPI_Type_create_resized(s, 0, (MPI_Aint)sizeof(ad_real_int), &real_int_type);
  MPI_Type_free(&s);
  if (rc != MPI_SUCCESS || MPI_Type_commit(&real_int_type) != MPI_SUCCESS) real_int_type = MPI_DATATYPE_NULL;
  return real_int_type;
}

/* ------------------------------------------------------------------------ */
/* User-defined operations                                                   */
/* ------------------------------------------------------------------------ */

typedef struct uop {
  MPI_Op op;
  MPI_User_function *fn;
  int commute;
} uop;

static uop *uops;
static int nuops, capuops;

static const uop *uop_find(MPI_Op op) {
  if (op == MPI_OP_NULL) return NULL;
  for (int i = 0; i < nuops; i++)
    if (uops[i].op == op) return &uops[i];
  return NULL;
}

int ad__op_user(MPI_Op op) { return uop_find(op) != NULL; }

int ad_mpi_op_create(MPI_User_function *function, int commute, MPI_Op *op) {
  if (!function || !op) return MPI_ERR_ARG;
  int rc = ad__mpi_setup();
  if (rc != MPI_SUCCESS) return rc;
  if (nuops == capuops) {
    int nc = capuops ? 2 * capuops : 8;
    uop *n = realloc(uops, (size_t)nc * sizeof *n);
    if (!n) return MPI_ERR_NO_MEM;
    uops = n;
    capuops = nc;
  }
  /* A real MPI operation, so that the handle is unique and valid; Ariadne
   * never hands it to MPI with data. */
  if ((rc = MPI_Op_create(function, commute, op)) != MPI_SUCCESS) return rc;
  uops[nuops].op = *op;
  uops[nuops].fn = function;
  uops[nuops].commute = commute;
  nuops++;
  return MPI_SUCCESS;
}

int ad_mpi_op_free(MPI_Op *op) {
  if (!op) return MPI_ERR_ARG;
  for (int i = 0; i < nuops; i++)
    if (uops[i].op == *op) {
      uops[i] = uops[--nuops];
      break;
    }
  return MPI_Op_free(op);
}

void ad__reduce_ext_finalize(void) {
  if (real_int_type != MPI_DATATYPE_NULL) MPI_Type_free(&real_int_type);
  free(uops);
  uops = NULL;
  nuops = capuops = 0;
}

/* acc = all[lo] op all[lo+1] op ... op all[hi], blocks of `count` items of
 * `bytes` bytes, applied in place on acc as MPI applies it (inoutvec =
 * invec op inoutvec), from the right so that a non-commutative operation
 * keeps the rank order. */
static void fold(const uop *u, char *all, size_t bytes, int lo, int hi, int count, MPI_Datatype type, char *acc) {
  ad__dtype_copy(type, acc, all + (size_t)hi * bytes, count);
  for (int j = hi - 1; j >= lo; j--) {
    int len = count;
    MPI_Datatype dt = type;
    u->fn(all + (size_t)j * bytes, acc, &len, &dt);
  }
}

static const char *const kind_names[] = {"ad_mpi_reduce", "ad_mpi_allreduce", "ad_mpi_scan", "ad_mpi_exscan",
                                         "ad_mpi_reduce_scatter_block"};

/* The deferred part of a nonblocking reduction: fold once the gather has
 * completed. */
typedef struct ufold {
  const uop *u;
  char *own, *all, *acc;
  size_t bytes;
  int hi, count, gets;
  MPI_Datatype type;
  void *recvbuf;
} ufold;

static void ufold_run(void *ctx, int ok) {
  ufold *f = ctx;
  if (ok && f->gets && f->count > 0) {
    fold(f->u, f->all, f->bytes, 0, f->hi, f->count, f->type, f->acc);
    ad__dtype_copy(f->type, f->recvbuf, f->acc, f->count);
  }
  if (ok) {
    free(f->own);
    free(f->all);
  } else { /* MPI may still use them */
    ad__mpi_keep(f->own);
    ad__mpi_keep(f->all);
  }
  free(f->acc);
  free(f);
}

int ad__user_reduce(int kind, const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                    MPI_Comm comm, ad_mpi_request *req) {
  const uop *u = uop_find(op);
  if (!u) return MPI_ERR_OP;
  if (count < 0) return MPI_ERR_COUNT;
  int rank, p, rc;
  if (type != AD_MPI_REAL && (rc = ad__dtype_check(kind_names[kind], type)) != 0) return rc;
  if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(comm, &p)) != MPI_SUCCESS) return rc;
  int inplace = sendbuf == MPI_IN_PLACE;
  const void *src = inplace ? recvbuf : sendbuf;
  size_t bytes = (size_t)count * (size_t)ad__dtype_extent(type); /* one rank's block */
  int own_blocks = kind == 4 ? p : 1;
  int gets = kind == 0 ? rank == root : kind == 3 ? rank != 0 : 1;
  /* zeroed, so that the gaps of a layout hold passive zeros */
  size_t tail = (size_t)ad__dtype_tail(type) + 1;
  char *own = calloc((size_t)own_blocks * bytes + tail, 1), *all = calloc((size_t)p * bytes + tail, 1),
       *acc = calloc(bytes + tail, 1);
  if (!own || !all || !acc) {
    free(own);
    free(all);
    free(acc);
    return MPI_ERR_NO_MEM;
  }
  ad__dtype_copy(type, own, src, (long long)own_blocks * count);
  int hi = kind == 2 ? rank : kind == 3 ? rank - 1 : p - 1;
  if (req) {
    ufold *f = calloc(1, sizeof *f);
    if (!f) {
      rc = MPI_ERR_NO_MEM;
    } else {
      switch (kind) {
      case 0:
        rc = ad_mpi_igather(own, count, type, all, count, type, root, comm, req);
        break;
      case 4:
        rc = ad_mpi_ialltoall(own, count, type, all, count, type, comm, req);
        break;
      default:
        rc = ad_mpi_iallgather(own, count, type, all, count, type, comm, req);
        break;
      }
    }
    if (rc == MPI_SUCCESS) {
      *f = (ufold){u, own, all, acc, bytes, hi, count, gets, type, recvbuf};
      return ad__req_then(req, ufold_run, f);
    }
    free(f);
    free(own);
    free(all);
    free(acc);
    return rc;
  }
  switch (kind) {
  case 0:
    rc = ad_mpi_gather(own, count, type, all, count, type, root, comm);
    break;
  case 4:
    rc = ad_mpi_alltoall(own, count, type, all, count, type, comm);
    break;
  default:
    rc = ad_mpi_allgather(own, count, type, all, count, type, comm);
    break;
  }
  if (rc == MPI_SUCCESS && gets && count > 0) {
    fold(u, all, bytes, 0, hi, count, type, acc);
    ad__dtype_copy(type, recvbuf, acc, count);
  }
  free(own);
  free(all);
  free(acc);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return ad__mpi_forward_error(seen, rc, kind_names[kind]);
  }
  return MPI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* MINLOC / MAXLOC                                                           */
/* ------------------------------------------------------------------------ */

static int same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

int ad__loc_reduce(int all, const void *sendbuf, void *recvbuf, int count, MPI_Op op, int root, MPI_Comm comm) {
  const char *fn = all ? "ad_mpi_allreduce" : "ad_mpi_reduce";
  if (count < 0) return MPI_ERR_COUNT;
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  ad__mpi_note_coll(seen, c);
  int me = c->rank, p = c->size, gets = all || me == root;
  const ad_real_int *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  struct pair {
    double v;
    int i;
  } *mine = malloc(((size_t)count + 1) * sizeof *mine), *res = malloc(((size_t)count + 1) * sizeof *res);
  int *owner = malloc(((size_t)count + 1) * sizeof *owner);
  double *w = calloc((size_t)count + 1, sizeof *w);
  ad_real *vals = malloc(((size_t)count + 1) * sizeof *vals);
  double *rv = malloc(((size_t)count + 1) * sizeof *rv);
  int rc = MPI_SUCCESS;
  if (!mine || !res || !owner || !w || !vals || !rv) rc = MPI_ERR_NO_MEM;
  for (int k = 0; rc == MPI_SUCCESS && k < count; k++) {
    vals[k] = src[k].value;
    mine[k].v = src[k].value.v;
    mine[k].i = src[k].index;
  }
  /* The result on every rank, then its owner: the lowest rank whose pair it is. */
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(mine, res, count, MPI_DOUBLE_INT, op, comm);
  if (rc == MPI_SUCCESS) {
    for (int k = 0; k < count; k++) owner[k] = same(mine[k].v, res[k].v) && mine[k].i == res[k].i ? me : p;
    rc = MPI_Allreduce(MPI_IN_PLACE, owner, count, MPI_INT, MPI_MIN, comm);
  }
  if (rc == MPI_SUCCESS) {
    for (int k = 0; k < count; k++) w[k] = owner[k] == me ? 1.0 : 0.0;
    ad__mrec *r = t ? ad__mrec_push(t, all ? AD__M_ALLREDUCE : AD__M_REDUCE, c, count, gets ? count : 0) : NULL;
    if (r) {
      r->root = root;
      r->op = op == MPI_MINLOC ? 2 : 3;
      r->w = w;
      w = NULL;
      ad__handles(t, vals, count, r->in, fn);
    }
    ad__mpi_counters.forward_bytes += (uint64_t)count * sizeof(double) * (uint64_t)(all ? p - 1 : me == root ? 0 : 1);
    if (gets) {
      for (int k = 0; k < count; k++) rv[k] = res[k].v;
      ad__unpack(r ? t : NULL, vals, count, rv, r ? r->out : NULL);
      ad_real_int *dst = recvbuf;
      for (int k = 0; k < count; k++) {
        dst[k].value = vals[k];
        dst[k].index = res[k].i;
      }
    }
  }
  free(mine);
  free(res);
  free(owner);
  free(w);
  free(vals);
  free(rv);
  return rc == MPI_SUCCESS ? rc : ad__mpi_forward_error(seen, rc, fn);
}

/* Reduce_scatter with a user-defined operation: rank r's block of
 * recvcounts[r] items comes from every rank by an alltoallv and is folded
 * locally in rank order. */
int ad__user_reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                            MPI_Comm comm) {
  const char *fn = "ad_mpi_reduce_scatter";
  const uop *u = uop_find(op);
  if (!u) return MPI_ERR_OP;
  int rank, p, rc;
  if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(comm, &p)) != MPI_SUCCESS) return rc;
  if (type != AD_MPI_REAL && (rc = ad__dtype_check(fn, type)) != 0) return rc;
  long long items = 0;
  for (int j = 0; j < p; j++) {
    if (recvcounts[j] < 0) return MPI_ERR_COUNT;
    items += recvcounts[j];
  }
  int mine = recvcounts[rank];
  size_t ext = (size_t)ad__dtype_extent(type), tail = (size_t)ad__dtype_tail(type) + 1;
  size_t bytes = (size_t)mine * ext;
  const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  int *a = malloc(4 * (size_t)p * sizeof *a);
  char *own = calloc((size_t)items * ext + tail, 1), *all = calloc((size_t)p * bytes + tail, 1),
       *acc = calloc(bytes + tail, 1);
  if (!a || !own || !all || !acc) {
    free(a);
    free(own);
    free(all);
    free(acc);
    return MPI_ERR_NO_MEM;
  }
  int *sc = a, *sd = a + p, *rc_ = a + 2 * p, *rd = a + 3 * p, at = 0;
  for (int j = 0; j < p; j++) {
    sc[j] = recvcounts[j];
    sd[j] = at;
    at += recvcounts[j];
    rc_[j] = mine;
    rd[j] = j * mine;
  }
  ad__dtype_copy(type, own, src, items);
  rc = ad_mpi_alltoallv(own, sc, sd, type, all, rc_, rd, type, comm);
  if (rc == MPI_SUCCESS && mine > 0) {
    fold(u, all, bytes, 0, p - 1, mine, type, acc);
    ad__dtype_copy(type, recvbuf, acc, mine);
  }
  free(a);
  free(own);
  free(all);
  free(acc);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  return MPI_SUCCESS;
}
