/* SPDX-License-Identifier: BSD-3-Clause */
/* Datatypes derived from AD_MPI_REAL (MPI_Type_contiguous(3, AD_MPI_REAL,
 * &t), the natural port of a type built on MPI_DOUBLE). Passed to MPI they
 * would copy raw ad_real structs (values with foreign handles), so they never
 * reach MPI: a type is flattened into the memory offsets of its ad_real
 * elements (its typemap, with AD_MPI_REAL taking sizeof(ad_real) bytes in
 * memory), cached on the type as an attribute, and a wrapper called with it
 * gathers the elements into a contiguous ad_real buffer, runs the AD_MPI_REAL
 * path on it and scatters what it received back into the user's layout. The
 * wire carries exactly the values the same type built on MPI_DOUBLE would.
 * Types that cannot be handled are refused with MPI_ERR_TYPE and a sticky
 * error on the recording tape naming the call. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types_impl.h"

static int type_keyval = MPI_KEYVAL_INVALID;

/* MPI_Type_get_contents returns new references to the derived types it
 * names (named ones are not counted): give one back. */
void ad__types_release(MPI_Datatype *t) {
  int ni, na, nd, comb;
  if (MPI_Type_get_envelope(*t, &ni, &na, &nd, &comb) == MPI_SUCCESS && comb != MPI_COMBINER_NAMED) MPI_Type_free(t);
}

/* 1 if t has AD_MPI_REAL's construction (comm.c): a contiguous run of one
 * MPI_DOUBLE resized to lower bound 0 and extent 8. MPICH hands back
 * AD_MPI_REAL's own handle from MPI_Type_get_contents, Open MPI another one
 * (without its attributes), so a type nested in a derived type is known by
 * how it was built. */
static int built_like_real(MPI_Datatype t) {
  int ni, na, nd, comb, none[1], count;
  MPI_Aint a[2], anone[1];
  MPI_Datatype in, d;
  if (MPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_RESIZED || ni != 0 ||
      na != 2 || nd != 1 || MPI_Type_get_contents(t, 0, 2, 1, none, a, &in) != MPI_SUCCESS)
    return 0;
  int is = a[0] == 0 && a[1] == (MPI_Aint)sizeof(double) &&
           MPI_Type_get_envelope(in, &ni, &na, &nd, &comb) == MPI_SUCCESS && comb == MPI_COMBINER_CONTIGUOUS &&
           ni == 1 && na == 0 && nd == 1 && MPI_Type_get_contents(in, 1, 0, 1, &count, anone, &d) == MPI_SUCCESS;
  if (is) {
    is = count == 1 && d == MPI_DOUBLE;
    ad__types_release(&d);
  }
  ad__types_release(&in);
  return is;
}

/* 1 if t is, or is built from, AD_MPI_REAL; 0 if not; -1 on an MPI error. */
int ad__types_derived_from_real(MPI_Datatype t, int depth) {
  if (t == AD_MPI_REAL) return 1;
  if (t == MPI_DATATYPE_NULL || depth > 64) return 0;
  int ni, na, nd, comb;
  if (MPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) return -1;
  if (comb == MPI_COMBINER_NAMED) return 0;
  if (depth > 0 && built_like_real(t)) return 1;
  if (type_keyval == MPI_KEYVAL_INVALID &&
      MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_keyval, NULL) != MPI_SUCCESS)
    type_keyval = MPI_KEYVAL_INVALID;
  if (type_keyval != MPI_KEYVAL_INVALID) {
    void *v;
    int flag = 0;
    if (MPI_Type_get_attr(t, type_keyval, &v, &flag) == MPI_SUCCESS && flag) return (int)(intptr_t)v - 1;
  }
  int *ints = malloc((size_t)(ni ? ni : 1) * sizeof *ints);
  MPI_Aint *aints = malloc((size_t)(na ? na : 1) * sizeof *aints);
  MPI_Datatype *types = malloc((size_t)(nd ? nd : 1) * sizeof *types);
  int found = -1;
  if (ints && aints && types && MPI_Type_get_contents(t, ni, na, nd, ints, aints, types) == MPI_SUCCESS) {
    found = 0;
    for (int i = 0; i < nd; i++) {
      int d = found ? 0 : ad__types_derived_from_real(types[i], depth + 1);
      if (d) found = d;
      ad__types_release(&types[i]);
    }
  }
  free(ints);
  free(aints);
  free(types);
  if (found >= 0 && type_keyval != MPI_KEYVAL_INVALID) MPI_Type_set_attr(t, type_keyval, (void *)(intptr_t)(found + 1));
  return found;
}

/* ------------------------------------------------------------------------ */
/* Typemaps of types built from AD_MPI_REAL                                  */
/* ------------------------------------------------------------------------ */

typedef struct flat {
  fel *e;
  size_t n, cap;
  MPI_Aint lb, ub;
  int align;
  int bad; /* a combiner Ariadne does not handle (its name in why) */
  const char *why;
} flat;

static int flat_push(flat *f, MPI_Aint off, int size) {
  if (f->n == f->cap) {
    size_t nc = f->cap ? 2 * f->cap : 16;
    fel *ne = realloc(f->e, nc * sizeof *ne);
    if (!ne) return -1;
    f->e = ne;
    f->cap = nc;
  }
  f->e[f->n].off = off;
  f->e[f->n].size = size;
  f->n++;
  return 0;
}

/* Append `count` copies of `in` at displacements disp + i * stride. */
static int flat_place(flat *f, const flat *in, MPI_Aint disp, int count, MPI_Aint stride, int *first) {
  for (int i = 0; i < count; i++) {
    MPI_Aint d = disp + (MPI_Aint)i * stride;
    for (size_t j = 0; j < in->n; j++)
      if (flat_push(f, d + in->e[j].off, in->e[j].size)) return -1;
    if (*first || d + in->lb < f->lb) f->lb = d + in->lb;
    if (*first || d + in->ub > f->ub) f->ub = d + in->ub;
    *first = 0;
  }
  if (in->align > f->align) f->align = in->align;
  return 0;
}

static const char *combiner_name(int comb) {
  switch (comb) {
  case MPI_COMBINER_DARRAY:
    return "MPI_Type_create_darray";
  case MPI_COMBINER_F90_REAL:
  case MPI_COMBINER_F90_COMPLEX:
  case MPI_COMBINER_F90_INTEGER:
    return "a Fortran 90 type";
  default:
    return "an unknown type constructor";
  }
}

static int flatten(MPI_Datatype t, flat *out, int depth);

/* Alignments of members inside a struct, as the C compiler lays them out
 * (a double is aligned to 4 inside a struct on i386). */
struct double_member {
  char c;
  double d;
};
struct real_member {
  char c;
  ad_real r;
};
static const int align_double = (int)offsetof(struct double_member, d);
static const int align_real = (int)offsetof(struct real_member, r);

/* The typemap of the old type of a constructor. */
static int flatten_old(MPI_Datatype t, flat *in, int depth) {
  memset(in, 0, sizeof *in);
  return flatten(t, in, depth + 1);
}

static int flatten(MPI_Datatype t, flat *f, int depth) {
  f->n = 0;
  f->lb = f->ub = 0;
  f->align = 1;
  if (depth > 64) {
    f->bad = 1;
    f->why = "a type nested more than 64 deep";
    return 0;
  }
  if (t == AD_MPI_REAL || (depth > 0 && built_like_real(t))) {
    f->ub = (MPI_Aint)sizeof(ad_real);
    f->align = align_real;
    return flat_push(f, 0, 0);
  }
  int ni, na, nd, comb;
  if (MPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) return -1;
  if (comb == MPI_COMBINER_NAMED) {
    int size;
    MPI_Aint lb, ext;
    if (MPI_Type_size(t, &size) != MPI_SUCCESS || MPI_Type_get_extent(t, &lb, &ext) != MPI_SUCCESS) return -1;
    f->lb = lb;
    f->ub = lb + ext;
    f->align = size >= 8 ? align_double : size >= 4 ? 4 : size >= 2 ? 2 : 1;
    /* A passive pair type (MPI_DOUBLE_INT, ...) is moved as its bytes. */
    return size > 0 ? flat_push(f, 0, size) : 0;
  }
  int *ints = malloc((size_t)(ni ? ni : 1) * sizeof *ints);
  MPI_Aint *aints = malloc((size_t)(na ? na : 1) * sizeof *aints);
  MPI_Datatype *types = malloc((size_t)(nd ? nd : 1) * sizeof *types);
  int rc = -1, first = 1;
  flat in;
  memset(&in, 0, sizeof in);
  if (!ints || !aints || !types || MPI_Type_get_contents(t, ni, na, nd, ints, aints, types) != MPI_SUCCESS) {
    free(ints);
    free(aints);
    free(types);
    return -1;
  }
  if (comb != MPI_COMBINER_STRUCT && nd >= 1) {
    if (flatten_old(types[0], &in, depth) != 0) goto done;
    if (in.bad) {
      f->bad = 1;
      f->why = in.why;
      rc = 0;
      goto done;
    }
  }
  MPI_Aint ext = in.ub - in.lb;
  rc = 0;
  switch (comb) {
  case MPI_COMBINER_DUP:
    rc = flat_place(f, &in, 0, 1, 0, &first);
    break;
  case MPI_COMBINER_CONTIGUOUS:
    rc = flat_place(f, &in, 0, ints[0], ext, &first);
    break;
  case MPI_COMBINER_VECTOR:
    for (int i = 0; i < ints[0] && !rc; i++) rc = flat_place(f, &in, (MPI_Aint)i * ints[2] * ext, ints[1], ext, &first);
    break;
  case MPI_COMBINER_HVECTOR:
    for (int i = 0; i < ints[0] && !rc; i++) rc = flat_place(f, &in, (MPI_Aint)i * aints[0], ints[1], ext, &first);
    break;
  case MPI_COMBINER_INDEXED:
    for (int i = 0; i < ints[0] && !rc; i++)
      rc = flat_place(f, &in, (MPI_Aint)ints[1 + ints[0] + i] * ext, ints[1 + i], ext, &first);
    break;
  case MPI_COMBINER_HINDEXED:
    for (int i = 0; i < ints[0] && !rc; i++) rc = flat_place(f, &in, aints[i], ints[1 + i], ext, &first);
    break;
  case MPI_COMBINER_INDEXED_BLOCK:
    for (int i = 0; i < ints[0] && !rc; i++) rc = flat_place(f, &in, (MPI_Aint)ints[2 + i] * ext, ints[1], ext, &first);
    break;
  case MPI_COMBINER_HINDEXED_BLOCK:
    for (int i = 0; i < ints[0] && !rc; i++) rc = flat_place(f, &in, aints[i], ints[1], ext, &first);
    break;
  case MPI_COMBINER_STRUCT:
    for (int i = 0; i < ints[0] && !rc; i++) {
      flat b;
      if (flatten_old(types[i], &b, depth) != 0) {
        rc = -1;
        break;
      }
      if (b.bad) {
        f->bad = 1;
        f->why = b.why;
      } else {
        rc = flat_place(f, &b, aints[i], ints[1 + i], b.ub - b.lb, &first);
      }
      free(b.e);
    }
    /* MPI pads a struct's extent to the alignment of its widest member, as
     * a C compiler does; with ad_real members it is alignof(ad_real). */
    if (!rc && f->align > 1) {
      MPI_Aint span = f->ub - f->lb, a = f->align;
      f->ub = f->lb + (span + a - 1) / a * a;
    }
    break;
  case MPI_COMBINER_SUBARRAY: {
    int nds = ints[0], *sizes = ints + 1, *sub = ints + 1 + nds, *start = ints + 1 + 2 * nds, order = ints[1 + 3 * nds];
    long long total = 1, nsub = 1;
    for (int d = 0; d < nds; d++) {
      total *= sizes[d];
      nsub *= sub[d];
    }
    int idx[32] = {0};
    if (nds > 32) {
      f->bad = 1;
      f->why = "a subarray of more than 32 dimensions";
      break;
    }
    for (long long k = 0; k < nsub && !rc; k++) {
      /* linear index of the element in the full array */
      long long lin = 0;
      if (order == MPI_ORDER_C)
        for (int d = 0; d < nds; d++) lin = lin * sizes[d] + start[d] + idx[d];
      else
        for (int d = nds - 1; d >= 0; d--) lin = lin * sizes[d] + start[d] + idx[d];
      rc = flat_place(f, &in, (MPI_Aint)lin * ext, 1, 0, &first);
      /* next index: the last dimension fastest in C order, the first in Fortran order */
      for (int s = 0; s < nds; s++) {
        int d = order == MPI_ORDER_C ? nds - 1 - s : s;
        if (++idx[d] < sub[d]) break;
        idx[d] = 0;
      }
    }
    f->lb = 0;
    f->ub = (MPI_Aint)total * ext;
    break;
  }
  case MPI_COMBINER_RESIZED:
    rc = flat_place(f, &in, 0, 1, 0, &first);
    f->lb = aints[0];
    f->ub = aints[0] + aints[1];
    break;
  default:
    f->bad = 1;
    f->why = combiner_name(comb);
    break;
  }
  if (first && !f->bad && comb != MPI_COMBINER_RESIZED && comb != MPI_COMBINER_SUBARRAY) f->lb = f->ub = 0;
done:
  free(in.e);
  for (int i = 0; i < nd; i++) ad__types_release(&types[i]);
  free(ints);
  free(aints);
  free(types);
  return rc;
}

static int dtype_keyval = MPI_KEYVAL_INVALID;

static void dtype_free(ad__dtype *d) {
  if (!d) return;
  free(d->off);
  free(d->e);
  free(d);
}

AD__MPI_ATTR_DELETE(dtype_delete, MPI_Datatype, dtype_free)

static ad__dtype *dtype_build(MPI_Datatype t) {
  flat f;
  memset(&f, 0, sizeof f);
  ad__dtype *d = calloc(1, sizeof *d);
  if (!d || flatten(t, &f, 0) != 0) {
    free(f.e);
    free(d);
    return NULL;
  }
  if (f.bad) {
    d->why = f.why;
    free(f.e);
    return d;
  }
  d->ext = f.ub - f.lb;
  d->e = f.e;
  d->ne = f.n;
  for (size_t i = 0; i < f.n; i++) {
    if (f.e[i].size == 0) {
      d->n++;
      d->wire += (int)sizeof(double);
    } else {
      d->npass++;
      d->wire += f.e[i].size;
    }
  }
  d->off = malloc((size_t)(d->n ? d->n : 1) * sizeof *d->off);
  if (!d->off) {
    dtype_free(d);
    return NULL;
  }
  for (size_t i = 0, k = 0; i < f.n; i++)
    if (f.e[i].size == 0) d->off[k++] = f.e[i].off;
  return d;
}

const ad__dtype *ad__dtype_get(MPI_Datatype t) {
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || ad__types_derived_from_real(t, 0) != 1) return NULL;
  if (dtype_keyval == MPI_KEYVAL_INVALID &&
      MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, dtype_delete, &dtype_keyval, NULL) != MPI_SUCCESS)
    dtype_keyval = MPI_KEYVAL_INVALID;
  void *v = NULL;
  int flag = 0;
  if (dtype_keyval != MPI_KEYVAL_INVALID && MPI_Type_get_attr(t, dtype_keyval, &v, &flag) == MPI_SUCCESS && flag)
    return v;
  ad__dtype *d = dtype_build(t);
  if (d && dtype_keyval != MPI_KEYVAL_INVALID && MPI_Type_set_attr(t, dtype_keyval, d) != MPI_SUCCESS) {
    /* not cached: kept for the process's life rather than freed under a caller */
    ad__mpi_keep(d->off);
    ad__mpi_keep(d->e);
    ad__mpi_keep(d);
  }
  return d;
}

int ad__dtype_any(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int any = 0;
  for (int i = 0; i < n; i++) {
    MPI_Datatype t = va_arg(ap, MPI_Datatype);
    if (t != AD_MPI_REAL && t != MPI_DATATYPE_NULL && ad__types_derived_from_real(t, 0) == 1) any = 1;
  }
  va_end(ap);
  return any;
}

int ad__dtype_refuse(const char *fn, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ad_tape *seen = NULL;
  ad__mpi_tape(&seen);
  if (seen)
    ad__fail(seen, AD_ERR_MPI, "%s: %s", fn, msg);
  else
    ad__fail_notape(AD_ERR_MPI, "%s: %s", fn, msg);
  return MPI_ERR_TYPE;
}

int ad__types_refuse(const char *fn, int n, ...) {
  va_list ap;
  va_start(ap, n);
  int rc = MPI_SUCCESS;
  for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
    MPI_Datatype t = va_arg(ap, MPI_Datatype);
    if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL) continue;
    if (ad__types_derived_from_real(t, 0) == 1)
      rc = ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL is not supported by this call yet; use AD_MPI_REAL "
                                "with a count");
  }
  va_end(ap);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Wrappers on derived types: gather the elements into a contiguous ad_real  */
/* buffer, run the AD_MPI_REAL wrapper on it, scatter what was received      */
/* ------------------------------------------------------------------------ */

/* The passive fields of `items` items into (or out of) a packed buffer. */
void ad__types_pas_move(const ad__dtype *d, void *base, long long items, char *pas, int to_pas) {
  char *b = base;
  size_t pos = 0;
  for (long long i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      if (!d->e[j].size) continue;
      char *at = b + i * d->ext + d->e[j].off;
      memcpy(to_pas ? pas + pos : at, to_pas ? at : pas + pos, (size_t)d->e[j].size);
      pos += (size_t)d->e[j].size;
    }
}

void ad__types_dt_gather(const ad__dtype *d, const void *base, long long items, ad_real *tmp) {
  const char *b = base;
  for (long long i = 0; i < items; i++)
    for (int j = 0; j < d->n; j++) memcpy(&tmp[i * d->n + j], b + i * d->ext + d->off[j], sizeof(ad_real));
}

/* The first ne elements of tmp into the items of base, in typemap order. */
void ad__types_dt_scatter(const ad__dtype *d, void *base, const ad_real *tmp, long long ne) {
  char *b = base;
  for (long long k = 0; k < ne; k++) memcpy(b + (k / d->n) * d->ext + d->off[k % d->n], &tmp[k], sizeof(ad_real));
}

/* Set up s for (buf, items, t); fill: gather the user's elements now. 0, or
 * an MPI error code (MPI_ERR_TYPE with the tape's error naming fn). */
int ad__types_side_open(side *s, const char *fn, MPI_Datatype t, const void *buf, long long items, int fill) {
  memset(s, 0, sizeof *s);
  s->buf = (void *)buf;
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || buf == MPI_IN_PLACE || ad__types_derived_from_real(t, 0) != 1)
    return 0;
  const ad__dtype *d = ad__dtype_get(t);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  if (items < 0) return MPI_ERR_COUNT;
  s->d = d;
  s->ne = items * d->n;
  if (s->ne > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 ad_real elements in one call");
  s->items = (int)items;
  s->tmp = calloc((size_t)(s->ne ? s->ne : 1), sizeof(ad_real));
  if (!s->tmp) return MPI_ERR_NO_MEM;
  if (fill && buf) ad__types_dt_gather(d, buf, items, s->tmp);
  if (d->npass) { /* (point to point sends these types whole, see mixed()) */
    s->pbytes = d->wire - (int)sizeof(double) * d->n;
    if (items * s->pbytes > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 passive bytes in one call");
    if (!(s->pas = calloc((size_t)(items * s->pbytes) + 1, 1))) return MPI_ERR_NO_MEM;
    if (fill && buf) ad__types_pas_move(d, (void *)buf, items, s->pas, 1);
  }
  return 0;
}
void *ad__types_side_buf(const side *s) { return s->d ? (void *)s->tmp : s->buf; }
MPI_Datatype ad__types_side_type(const side *s, MPI_Datatype t) { return s->d ? AD_MPI_REAL : t; }
int ad__types_side_count(const side *s, int count) { return s->d ? count * s->d->n : count; }
void ad__types_side_close(side *s) {
  free(s->tmp);
  free(s->pas);
}
/* Scatter what arrived in a side (active and passive) into buf. */
void ad__types_side_scatter(const side *s, void *buf) {
  ad__types_dt_scatter(s->d, buf, s->tmp, s->ne);
  if (s->pas) ad__types_pas_move(s->d, buf, s->items, s->pas, 0);
}
/* A datatype argument MPI does not look at here (a non-root's receive type,
 * the send type of an in-place call): AD_MPI_REAL if it is derived, so that
 * the inner call does not come back here. */
MPI_Datatype ad__types_unused(MPI_Datatype t) { return ad__dtype_any(1, t) ? AD_MPI_REAL : t; }

/* ------------------------------------------------------------------------ */
/* Typemap queries for one-sided communication and user-defined reductions  */
/* ------------------------------------------------------------------------ */

int ad__dtype_check(const char *fn, MPI_Datatype t) {
  const ad__dtype *d = ad__dtype_get(t);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  if (d->npass)
    return ad__dtype_refuse(fn, "a datatype that mixes AD_MPI_REAL with passive fields is not differentiated here");
  for (int j = 0; j < d->n; j++)
    if (d->off[j] < 0)
      return ad__dtype_refuse(fn, "a user-defined operation on a datatype with elements before its start (a negative "
                                  "displacement) is not differentiated");
  return 0;
}

MPI_Aint ad__dtype_tail(MPI_Datatype t) {
  const ad__dtype *d = t == AD_MPI_REAL ? NULL : ad__dtype_get(t);
  MPI_Aint tail = 0;
  for (int j = 0; d && j < d->n; j++)
    if (d->off[j] + (MPI_Aint)sizeof(ad_real) - d->ext > tail) tail = d->off[j] + (MPI_Aint)sizeof(ad_real) - d->ext;
  return tail;
}

void ad__dtype_copy(MPI_Datatype t, void *dst, const void *src, long long items) {
  const ad__dtype *d = t == AD_MPI_REAL ? NULL : ad__dtype_get(t);
  if (!d) {
    memcpy(dst, src, (size_t)items * sizeof(ad_real));
    return;
  }
  for (long long i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      MPI_Aint at = i * d->ext + d->e[j].off;
      memcpy((char *)dst + at, (const char *)src + at, d->e[j].size ? (size_t)d->e[j].size : sizeof(ad_real));
    }
}

long ad__dtype_offsets(const char *fn, MPI_Datatype t, int count, MPI_Aint **off) {
  *off = NULL;
  const ad__dtype *d = t == AD_MPI_REAL ? NULL : ad__dtype_get(t);
  if (t != AD_MPI_REAL) {
    if (!d) return ad__dtype_refuse(fn, "no memory for the datatype's layout"), -1;
    if (d->why)
      return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why), -1;
    if (d->npass)
      return ad__dtype_refuse(fn, "a datatype that mixes AD_MPI_REAL with passive fields is not differentiated in "
                                  "one-sided communication"),
             -1;
  }
  long per = d ? d->n : 1, n = per * (long)count;
  MPI_Aint ext = d ? d->ext : (MPI_Aint)sizeof(ad_real);
  MPI_Aint *o = malloc(((size_t)n + 1) * sizeof *o);
  if (!o) return ad__dtype_refuse(fn, "no memory"), -1;
  for (long i = 0; i < count; i++)
    for (long j = 0; j < per; j++) o[i * per + j] = (MPI_Aint)i * ext + (d ? d->off[j] : 0);
  *off = o;
  return n;
}

MPI_Aint ad__dtype_extent(MPI_Datatype t) {
  const ad__dtype *d = t == AD_MPI_REAL ? NULL : ad__dtype_get(t);
  return d ? d->ext : (MPI_Aint)sizeof(ad_real);
}
