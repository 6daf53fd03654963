/* SPDX-License-Identifier: BSD-3-Clause */
/* Reductions beyond MPI_SUM, MPI_PROD, MPI_MIN and MPI_MAX on AD_MPI_REAL.
 *
 * MINLOC / MAXLOC on AD_MPI_REAL_INT pairs: the pairs are reduced by MPI as
 * MPI_DOUBLE_INT, then a second allreduce names the lowest rank whose pair is
 * the result (its owner); the record is an ordinary reduction whose weights
 * are 1 at the owner and 0 elsewhere, so the sweeps of coll.c apply: the
 * whole adjoint goes to the owner of the location.
 *
 * The other calls with MINLOC / MAXLOC (scan, exscan, reduce_scatter(_block)
 * and every nonblocking form) gather the pairs as a user-defined operation
 * does (below), the values with the differentiated collective and the
 * indices with MPI's, and apply MINLOC / MAXLOC locally: the result and its
 * owner are the same.
 *
 * User-defined operations (ad_mpi_op_create): the contributions are gathered
 * with the differentiated gather, allgather, alltoall or alltoallv, and the user's
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

/* Joined when the first type or operation is made, freed at MPI_Finalize. */
static void reduce_ext_finalize(void);
static ad__mpi_chapter chapter = {NULL, NULL, reduce_ext_finalize, NULL, 0};

MPI_Datatype ad_mpi_real_int_datatype(void) {
  if (real_int_type != MPI_DATATYPE_NULL) return real_int_type;
  if (ad__mpi_setup() != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  ad__mpi_chapter_join(&chapter);
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
  ad__mpi_chapter_join(&chapter);
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

static void reduce_ext_finalize(void) {
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

static const char *const kind_names[2][6] = {{"ad_mpi_reduce", "ad_mpi_allreduce", "ad_mpi_scan", "ad_mpi_exscan",
                                              "ad_mpi_reduce_scatter_block", "ad_mpi_reduce_scatter"},
                                             {"ad_mpi_ireduce", "ad_mpi_iallreduce", "ad_mpi_iscan", "ad_mpi_iexscan",
                                              "ad_mpi_ireduce_scatter_block", "ad_mpi_ireduce_scatter"}};

/* MINLOC and MAXLOC on ad_real_int items as operations of their own, for
 * the calls the blocking reduce and allreduce below do not cover: applied
 * like a user operation (invec on the lower ranks), they keep the item of
 * the lower index on equal values and, on equal pairs, the lower rank's:
 * MPI's result, with the whole adjoint going to the owner of the location,
 * as in ad__loc_reduce. */
static void loc_apply(const void *in, void *inout, int len, int max) {
  const ad_real_int *a = in;
  ad_real_int *b = inout;
  for (int k = 0; k < len; k++) {
    double x = ad_value(a[k].value), y = ad_value(b[k].value);
    int take = x == y ? a[k].index <= b[k].index : max ? x > y : x < y;
    if (take) b[k] = a[k];
  }
}
static void loc_min(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  loc_apply(in, inout, *len, 0);
}
static void loc_max(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  loc_apply(in, inout, *len, 1);
}
static const uop loc_ops[2] = {{MPI_OP_NULL, loc_min, 1}, {MPI_OP_NULL, loc_max, 1}};

/* The contributions' movement: kind 0 a gather to the root, 4 an alltoall,
 * 5 an alltoallv (counts c), else an allgather; nonblocking if req. */
static int move(int kind, const void *own, void *all, int count, const int *c, MPI_Datatype type, int root,
                MPI_Comm comm, ad_mpi_request *req) {
  switch (kind) {
  case 0:
    return req ? ad_mpi_igather(own, count, type, all, count, type, root, comm, req)
               : ad_mpi_gather(own, count, type, all, count, type, root, comm);
  case 4:
    return req ? ad_mpi_ialltoall(own, count, type, all, count, type, comm, req)
               : ad_mpi_alltoall(own, count, type, all, count, type, comm);
  case 5:
    return req ? ad_mpi_ialltoallv(own, c + 1, c + 1 + c[0], type, all, c + 1 + 2 * c[0], c + 1 + 3 * c[0], type, comm,
                                   req)
               : ad_mpi_alltoallv(own, c + 1, c + 1 + c[0], type, all, c + 1 + 2 * c[0], c + 1 + 3 * c[0], type, comm);
  default:
    return req ? ad_mpi_iallgather(own, count, type, all, count, type, comm, req)
               : ad_mpi_allgather(own, count, type, all, count, type, comm);
  }
}

/* A gathered reduction: this rank's contributions, every contributing
 * rank's blocks once they arrived, and what to do with them. */
typedef struct ufold {
  const uop *u;
  int loc;                   /* MINLOC/MAXLOC: values and indices move apart */
  char *own, *all, *acc;     /* items of the type (all: a block per rank) */
  ad_real *vown, *vall;      /* loc: the values ... */
  int *iown, *iall;          /* ... and the indices */
  ad_mpi_request ireq;       /* loc, nonblocking: the indices' collective */
  int *c;                    /* alltoallv counts (kind 5) */
  size_t bytes;              /* one rank's block */
  int hi, count, gets, nall; /* fold blocks 0..hi of count items; items in all */
  MPI_Datatype type;
  void *recvbuf;
} ufold;

static void ufold_free(ufold *f, int ok) {
  /* Unless MPI is done with the blocks, it may still use them. */
  AD__EACH(ok ? free : ad__mpi_keep, f->own, f->all, f->vown, f->vall, f->iown, f->iall, f->c);
  AD__FREE_EACH(f->acc, f);
}

/* The blocks have arrived: fold them into recvbuf. */
static void ufold_finish(ufold *f) {
  if (f->loc) {
    ad_real_int *all = (ad_real_int *)f->all;
    for (int k = 0; k < f->nall; k++) {
      all[k].value = f->vall[k];
      all[k].index = f->iall[k];
    }
  }
  if (f->gets && f->count > 0) {
    fold(f->u, f->all, f->bytes, 0, f->hi, f->count, f->type, f->acc);
    ad__dtype_copy(f->type, f->recvbuf, f->acc, f->count);
  }
}

static void ufold_run(void *ctx, int ok) {
  ufold *f = ctx;
  if (ok && f->loc && f->ireq.slot >= 0) ok = ad_mpi_wait(&f->ireq, MPI_STATUS_IGNORE) == MPI_SUCCESS;
  if (ok) ufold_finish(f);
  ufold_free(f, ok);
}

int ad__user_reduce(int kind, const void *sendbuf, void *recvbuf, int count, const int *recvcounts, MPI_Datatype type,
                    MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req) {
  const char *fn = kind_names[req != NULL][kind];
  int loc = type == AD_MPI_REAL_INT && (op == MPI_MINLOC || op == MPI_MAXLOC);
  const uop *u = loc ? &loc_ops[op == MPI_MAXLOC] : uop_find(op);
  if (!u) return MPI_ERR_OP;
  if (count < 0) return MPI_ERR_COUNT;
  int rank, p, rc;
  if (!loc && type != AD_MPI_REAL && (rc = ad__dtype_check(fn, type)) != 0) return rc;
  if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(comm, &p)) != MPI_SUCCESS) return rc;
  ufold *f = calloc(1, sizeof *f);
  if (!f) return MPI_ERR_NO_MEM;
  f->ireq.slot = -1;
  f->ireq.mpi = MPI_REQUEST_NULL;
  long long own_items = kind == 4 ? (long long)p * count : count;
  if (kind == 5) { /* rank r's block of recvcounts[r] items from every rank */
    if (!(f->c = malloc((4 * (size_t)p + 1) * sizeof *f->c))) {
      ufold_free(f, 1);
      return MPI_ERR_NO_MEM;
    }
    int *c = f->c, at = 0;
    c[0] = p;
    count = recvcounts[rank];
    own_items = 0;
    for (int j = 0; j < p; j++) {
      if (recvcounts[j] < 0) {
        ufold_free(f, 1);
        return MPI_ERR_COUNT;
      }
      c[1 + j] = recvcounts[j];
      c[1 + p + j] = at;
      at += recvcounts[j];
      c[1 + 2 * p + j] = count;
      c[1 + 3 * p + j] = j * count;
    }
    own_items = at;
  }
  const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  size_t ext = (size_t)ad__dtype_extent(type), bytes = (size_t)count * ext;
  /* zeroed, so that the gaps of a layout hold passive zeros */
  size_t tail = (size_t)ad__dtype_tail(type) + 1;
  f->u = u;
  f->loc = loc;
  f->bytes = bytes;
  f->count = count;
  f->nall = p * count;
  f->type = type;
  f->recvbuf = recvbuf;
  f->gets = kind == 0 ? rank == root : kind == 3 ? rank != 0 : 1;
  f->hi = kind == 2 ? rank : kind == 3 ? rank - 1 : p - 1;
  f->own = calloc((size_t)own_items * ext + tail, 1);
  f->all = calloc((size_t)p * bytes + tail, 1);
  f->acc = calloc(bytes + tail, 1);
  if (!f->own || !f->all || !f->acc) {
    ufold_free(f, 1);
    return MPI_ERR_NO_MEM;
  }
  ad__dtype_copy(type, f->own, src, own_items);
  if (loc) {
    f->vown = calloc((size_t)own_items + 1, sizeof *f->vown);
    f->iown = calloc((size_t)own_items + 1, sizeof *f->iown);
    f->vall = calloc((size_t)f->nall + 1, sizeof *f->vall);
    f->iall = calloc((size_t)f->nall + 1, sizeof *f->iall);
    if (!f->vown || !f->iown || !f->vall || !f->iall) {
      ufold_free(f, 1);
      return MPI_ERR_NO_MEM;
    }
    const ad_real_int *o = (const ad_real_int *)f->own;
    for (long long k = 0; k < own_items; k++) {
      f->vown[k] = o[k].value;
      f->iown[k] = o[k].index;
    }
    rc = move(kind, f->vown, f->vall, count, f->c, AD_MPI_REAL, root, comm, req);
    if (rc == MPI_SUCCESS) rc = move(kind, f->iown, f->iall, count, f->c, MPI_INT, root, comm, req ? &f->ireq : NULL);
  } else {
    rc = move(kind, f->own, f->all, count, f->c, type, root, comm, req);
  }
  if (rc == MPI_SUCCESS && req) return ad__req_then(req, ufold_run, f);
  if (rc == MPI_SUCCESS) ufold_finish(f);
  ufold_free(f, rc == MPI_SUCCESS || !req);
  if (rc != MPI_SUCCESS) {
    ad_tape *seen;
    ad__mpi_tape(&seen);
    return ad__mpi_forward_error(seen, rc, fn);
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
  ad__comm *c;
  ad_tape *seen, *t;
  int err = ad__mpi_coll_enter(comm, &c, &t, &seen);
  if (err != MPI_SUCCESS) return err;
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
