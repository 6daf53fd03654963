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

#include "mpi_impl.h"

static int type_keyval = MPI_KEYVAL_INVALID;

/* MPI_Type_get_contents returns new references to the derived types it
 * names (named ones are not counted): give one back. */
static void release(MPI_Datatype *t) {
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
    release(&d);
  }
  release(&in);
  return is;
}

/* 1 if t is, or is built from, AD_MPI_REAL; 0 if not; -1 on an MPI error. */
static int derived_from_real(MPI_Datatype t, int depth) {
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
      int d = found ? 0 : derived_from_real(types[i], depth + 1);
      if (d) found = d;
      release(&types[i]);
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

/* A flattened typemap: the elements of one item in typemap order, each at a
 * byte offset in memory, with AD_MPI_REAL occupying sizeof(ad_real) bytes
 * there (8 on the wire). */
typedef struct fel {
  MPI_Aint off;
  int size; /* 0: an ad_real; else the passive element's size in bytes */
} fel;

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
  for (int i = 0; i < nd; i++) release(&types[i]);
  free(ints);
  free(aints);
  free(types);
  return rc;
}

/* The cached description of a type derived from AD_MPI_REAL. */
struct ad__dtype {
  int n;         /* ad_real elements per item */
  int npass;     /* passive elements per item */
  MPI_Aint ext;  /* memory extent of one item (sizeof(ad_real) per AD_MPI_REAL) */
  MPI_Aint *off; /* byte offsets of the ad_real elements, in typemap order */
  fel *e;        /* the whole typemap, passive elements too */
  size_t ne;
  int wire;        /* bytes of one item on the wire */
  const char *why; /* not handled: why (a constructor's name) */
};

static int dtype_keyval = MPI_KEYVAL_INVALID;

static void dtype_free(ad__dtype *d) {
  if (!d) return;
  free(d->off);
  free(d->e);
  free(d);
}

static int dtype_delete(MPI_Datatype t, int key, void *val, void *extra) {
  (void)t;
  (void)key;
  (void)extra;
  dtype_free(val);
  return MPI_SUCCESS;
}

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
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || derived_from_real(t, 0) != 1) return NULL;
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
    if (t != AD_MPI_REAL && t != MPI_DATATYPE_NULL && derived_from_real(t, 0) == 1) any = 1;
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
    if (derived_from_real(t, 0) == 1)
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

/* One buffer argument of a wrapper, seen as AD_MPI_REAL. */
typedef struct side {
  const ad__dtype *d; /* NULL: passed through unchanged */
  void *buf;          /* the user's buffer */
  ad_real *tmp;
  int items;    /* items of the user's type */
  long long ne; /* ad_real elements */
  char *pas;    /* a type with passive fields: their bytes, item after item */
  int pbytes;   /* passive bytes per item */
} side;

/* The passive fields of `items` items into (or out of) a packed buffer. */
static void pas_move(const ad__dtype *d, void *base, long long items, char *pas, int to_pas) {
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

static void dt_gather(const ad__dtype *d, const void *base, long long items, ad_real *tmp) {
  const char *b = base;
  for (long long i = 0; i < items; i++)
    for (int j = 0; j < d->n; j++) memcpy(&tmp[i * d->n + j], b + i * d->ext + d->off[j], sizeof(ad_real));
}

/* The first ne elements of tmp into the items of base, in typemap order. */
static void dt_scatter(const ad__dtype *d, void *base, const ad_real *tmp, long long ne) {
  char *b = base;
  for (long long k = 0; k < ne; k++) memcpy(b + (k / d->n) * d->ext + d->off[k % d->n], &tmp[k], sizeof(ad_real));
}

/* Set up s for (buf, items, t); fill: gather the user's elements now. 0, or
 * an MPI error code (MPI_ERR_TYPE with the tape's error naming fn). */
static int side_open(side *s, const char *fn, MPI_Datatype t, const void *buf, long long items, int fill) {
  memset(s, 0, sizeof *s);
  s->buf = (void *)buf;
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || buf == MPI_IN_PLACE || derived_from_real(t, 0) != 1) return 0;
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
  if (fill && buf) dt_gather(d, buf, items, s->tmp);
  if (d->npass) { /* (point to point sends these types whole, see mixed()) */
    s->pbytes = d->wire - (int)sizeof(double) * d->n;
    if (items * s->pbytes > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 passive bytes in one call");
    if (!(s->pas = calloc((size_t)(items * s->pbytes) + 1, 1))) return MPI_ERR_NO_MEM;
    if (fill && buf) pas_move(d, (void *)buf, items, s->pas, 1);
  }
  return 0;
}
static void *side_buf(const side *s) { return s->d ? (void *)s->tmp : s->buf; }
static MPI_Datatype side_type(const side *s, MPI_Datatype t) { return s->d ? AD_MPI_REAL : t; }
static int side_count(const side *s, int count) { return s->d ? count * s->d->n : count; }
static void side_close(side *s) {
  free(s->tmp);
  free(s->pas);
}
/* Scatter what arrived in a side (active and passive) into buf. */
static void side_scatter(const side *s, void *buf) {
  dt_scatter(s->d, buf, s->tmp, s->ne);
  if (s->pas) pas_move(s->d, buf, s->items, s->pas, 0);
}
/* A datatype argument MPI does not look at here (a non-root's receive type,
 * the send type of an in-place call): AD_MPI_REAL if it is derived, so that
 * the inner call does not come back here. */
static MPI_Datatype unused(MPI_Datatype t) { return ad__dtype_any(1, t) ? AD_MPI_REAL : t; }

/* ------------------------------------------------------------------------ */
/* Types mixing AD_MPI_REAL with passive fields (point to point, bcast)     */
/* ------------------------------------------------------------------------ */

/* One message carries both: the typemap's elements in order, an active one
 * as its 8-byte value, a passive one as its bytes, sent as MPI_BYTE. So the
 * wire has the size of the same type built on MPI_DOUBLE (MPI_Get_count on
 * the status counts items of the type), matching works as for any message
 * (wildcards included), and the active values are recorded like an
 * AD_MPI_REAL message of their number. */
static const ad__dtype *mixed(MPI_Datatype t) {
  if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL || derived_from_real(t, 0) != 1) return NULL;
  const ad__dtype *d = ad__dtype_get(t);
  return d && !d->why && d->npass ? d : NULL;
}

static void mixed_pack(const ad__dtype *d, const void *buf, int items, char *wire, ad_real *act) {
  const char *b = buf;
  size_t pos = 0, k = 0;
  for (int i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      const char *at = b + (MPI_Aint)i * d->ext + d->e[j].off;
      if (d->e[j].size == 0) {
        memcpy(&act[k], at, sizeof(ad_real));
        memcpy(wire + pos, &act[k].v, sizeof(double));
        pos += sizeof(double);
        k++;
      } else {
        memcpy(wire + pos, at, (size_t)d->e[j].size);
        pos += (size_t)d->e[j].size;
      }
    }
}

/* The passive bytes of the first `bytes` of the wire into buf, the active
 * values into v; returns how many active values arrived. */
static int mixed_unpack(const ad__dtype *d, void *buf, int items, const char *wire, long long bytes, double *v) {
  char *b = buf;
  long long pos = 0;
  int k = 0;
  for (int i = 0; i < items; i++)
    for (size_t j = 0; j < d->ne; j++) {
      char *at = b + (MPI_Aint)i * d->ext + d->e[j].off;
      int sz = d->e[j].size ? d->e[j].size : (int)sizeof(double);
      if (pos + sz > bytes) return k;
      if (d->e[j].size == 0)
        memcpy(&v[k++], wire + pos, sizeof(double));
      else
        memcpy(at, wire + pos, (size_t)sz);
      pos += sz;
    }
  return k;
}

typedef struct mbuf {
  char *wire;
  ad_real *act;
  double *v;
  int nact;
  long long bytes;
} mbuf;

static int mbuf_open(mbuf *m, const char *fn, const ad__dtype *d, int count) {
  memset(m, 0, sizeof *m);
  if (count < 0) return MPI_ERR_COUNT;
  long long nact = (long long)count * d->n, bytes = (long long)count * d->wire;
  if (nact > 0x7fffffff || bytes > 0x7fffffff) return ad__dtype_refuse(fn, "a message of more than 2^31-1 bytes");
  m->nact = (int)nact;
  m->bytes = bytes;
  m->wire = malloc((size_t)bytes + 1);
  m->act = malloc((size_t)(nact + 1) * sizeof *m->act);
  m->v = malloc((size_t)(nact + 1) * sizeof *m->v);
  return m->wire && m->act && m->v ? 0 : MPI_ERR_NO_MEM;
}

static void mbuf_close(mbuf *m) {
  free(m->wire);
  free(m->act);
  free(m->v);
}

/* The send half: pack, sequence, record; the caller sends m->wire. */
static void mixed_send_note(ad__comm *c, ad_tape *t, ad_tape *seen, const char *fn, const ad__dtype *d, const void *buf,
                            int count, int dest, int tag, mbuf *m) {
  mixed_pack(d, buf, count, m->wire, m->act);
  if (dest == MPI_PROC_NULL) return;
  int k = ad__send_seq(c, dest, tag);
  ad__mpi_note_peer(seen, c, dest, 0, tag, m->nact, k);
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_SEND), c, m->nact, 0) : NULL;
  if (r) {
    r->peer = dest;
    r->tag = tag;
    r->k = k;
    ad__handles(t, m->act, m->nact, r->in, fn);
  }
}

/* The receive half once MPI_Recv returned rc with status st. */
static int mixed_recv_done(ad__comm *c, ad_tape *t, ad_tape *seen, const char *fn, const ad__dtype *d, void *buf,
                           int count, uint64_t post, int rc, const MPI_Status *st, mbuf *m) {
  if (rc != MPI_SUCCESS) {
    int cls = MPI_ERR_OTHER;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE && st->MPI_SOURCE >= 0) {
      ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
      ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, -1, -1);
    } else {
      ad__recv_complete(c, post, -2, -2);
    }
    return ad__mpi_forward_error(seen, rc, fn);
  }
  int got = 0;
  MPI_Get_count(st, MPI_BYTE, &got);
  if (got == MPI_UNDEFINED || got < 0) got = 0;
  int n = mixed_unpack(d, buf, count, m->wire, got, m->v);
  int k = ad__recv_complete(c, post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_RECV), c, 0, n) : NULL;
  if (r) {
    r->peer = st->MPI_SOURCE;
    r->tag = st->MPI_TAG;
    r->k = k;
  }
  ad__unpack(r ? t : NULL, m->act, n, m->v, r ? r->out : NULL);
  dt_scatter(d, buf, m->act, n);
  return MPI_SUCCESS;
}

static int mixed_send(ad__dt_send_fn fn, const char *name, const ad__dtype *d, const void *buf, int count, int dest,
                      int tag, MPI_Comm comm) {
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  mbuf m;
  int rc = mbuf_open(&m, name, d, count);
  if (rc == 0) {
    mixed_send_note(c, t, seen, name, d, buf, count, dest, tag, &m);
    rc = fn(m.wire, (int)m.bytes, MPI_BYTE, dest, tag, comm);
    if (rc != MPI_SUCCESS)
      ad__mpi_forward_error(seen, rc, name);
    else if (dest != MPI_PROC_NULL)
      ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
  }
  mbuf_close(&m);
  return rc;
}

static int mixed_recv(const ad__dtype *d, void *buf, int count, int source, int tag, MPI_Comm comm, MPI_Status *status,
                      const char *fn) {
  if (source == MPI_PROC_NULL) return MPI_Recv(NULL, 0, MPI_BYTE, source, tag, comm, status);
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc == 0) {
    MPI_Status st;
    st.MPI_SOURCE = st.MPI_TAG = -1;
    uint64_t post = ad__recv_post(c, source, tag);
    rc = MPI_Recv(m.wire, (int)m.bytes, MPI_BYTE, source, tag, comm, &st);
    rc = mixed_recv_done(c, t, seen, fn, d, buf, count, post, rc, &st, &m);
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st;
  }
  mbuf_close(&m);
  return rc;
}

/* Sendrecv with a mixed type on either side: the send half starts
 * nonblocking (recorded as a send), the receive half completes, then the
 * send; a side that is not mixed goes through its own wrapper. */
static int mixed_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                          void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                          MPI_Status *status, const char *fn) {
  const ad__dtype *ds = mixed(sendtype), *dr = mixed(recvtype);
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  mbuf m;
  memset(&m, 0, sizeof m);
  MPI_Request q = MPI_REQUEST_NULL;
  ad_mpi_request aq = AD_MPI_REQUEST_NULL;
  int rc;
  if (ds) {
    rc = mbuf_open(&m, fn, ds, sendcount);
    if (rc == 0) {
      mixed_send_note(c, t, seen, fn, ds, sendbuf, sendcount, dest, sendtag, &m);
      rc = MPI_Isend(m.wire, (int)m.bytes, MPI_BYTE, dest, sendtag, comm, &q);
      if (rc != MPI_SUCCESS)
        ad__mpi_forward_error(seen, rc, fn);
      else if (dest != MPI_PROC_NULL)
        ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
    }
  } else {
    rc = ad_mpi_isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &aq);
  }
  if (rc == MPI_SUCCESS)
    rc = dr ? mixed_recv(dr, recvbuf, recvcount, source, recvtag, comm, status, fn)
            : ad_mpi_recv(recvbuf, recvcount, recvtype, source, recvtag, comm, status);
  /* the send half is waited for whatever became of the receive */
  int rc2 = ds ? (q == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Wait(&q, MPI_STATUS_IGNORE))
               : (aq.slot < 0 && aq.mpi == MPI_REQUEST_NULL ? MPI_SUCCESS : ad_mpi_wait(&aq, MPI_STATUS_IGNORE));
  if (ds && rc2 != MPI_SUCCESS) ad__mpi_forward_error(seen, rc2, fn);
  mbuf_close(&m);
  return rc != MPI_SUCCESS ? rc : rc2;
}

static int mixed_bcast(const ad__dtype *d, void *buffer, int count, int root, MPI_Comm comm) {
  const char *fn = "ad_mpi_bcast";
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if ((err = ad__mpi_comm_renew(seen, c)) != MPI_SUCCESS) return err;
  ad__mpi_note_coll(seen, c);
  int me = c->rank == root;
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc == 0) {
    ad__mrec *r = t ? ad__mrec_push(t, ad__coll_kind(AD__M_BCAST), c, me ? m.nact : 0, 0) : NULL;
    if (r) r->root = root;
    if (me) {
      mixed_pack(d, buffer, count, m.wire, m.act);
      if (r) ad__handles(t, m.act, m.nact, r->in, fn);
    }
    rc = MPI_Bcast(m.wire, (int)m.bytes, MPI_BYTE, root, comm);
    if (me) ad__mpi_counters.forward_bytes += (uint64_t)(c->size - 1) * (uint64_t)m.nact * sizeof(double);
    if (rc == MPI_SUCCESS && !me) {
      if (r && !(r->out = calloc((size_t)m.nact + 1, sizeof *r->out)))
        ad__fail(t, AD_ERR_NOMEM, "ad_mpi_bcast: no memory");
      if (r && r->out) r->nout = m.nact;
      int n = mixed_unpack(d, buffer, count, m.wire, m.bytes, m.v);
      ad__unpack(r && r->out ? t : NULL, m.act, n, m.v, r && r->out ? r->out : NULL);
      dt_scatter(d, buffer, m.act, n);
    }
    if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, fn);
  }
  mbuf_close(&m);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Nonblocking point to point on derived types                               */
/* ------------------------------------------------------------------------ */

/* A receive: its elements arrive in a wire buffer (doubles for a type of
 * active values only, the mixed layout otherwise) and are scattered into the
 * user's layout when a completion call completes the request. */
typedef struct nbrecv {
  const ad__dtype *d;
  ad__comm *c;
  void *ubuf;
  int count;
  uint64_t post;
  mbuf m;
} nbrecv;

static void nbrecv_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  nbrecv *q = ctx;
  int n = 0;
  if (q->d->npass) {
    int got = 0;
    MPI_Get_count(st, MPI_BYTE, &got);
    n = mixed_unpack(q->d, q->ubuf, q->count, q->m.wire, got == MPI_UNDEFINED || got < 0 ? 0 : got, q->m.v);
  } else {
    MPI_Get_count(st, MPI_DOUBLE, &n);
    if (n == MPI_UNDEFINED || n < 0) n = 0;
    memcpy(q->m.v, q->m.wire, (size_t)n * sizeof(double));
  }
  int k = ad__recv_complete(q->c, q->post, st->MPI_SOURCE, st->MPI_TAG);
  ad__mpi_note_peer(seen, q->c, st->MPI_SOURCE, 1, st->MPI_TAG, n, k);
  ad__mrec *r = t && start ? ad__mrec_push(t, ad__p2p_kind(AD__M_IRECV_DONE), q->c, 0, n) : NULL;
  if (r) {
    r->peer = st->MPI_SOURCE;
    r->tag = st->MPI_TAG;
    r->k = k;
    r->link = start;
    start->link = r;
  }
  ad__unpack(r ? t : NULL, q->m.act, n, q->m.v, r ? r->out : NULL);
  dt_scatter(q->d, q->ubuf, q->m.act, n);
  mbuf_close(&q->m);
  free(q);
}

static void nbrecv_failed(void *ctx, int rc) {
  nbrecv *q = ctx;
  /* At MPI_Finalize (MPI_ERR_PENDING) the communicators are gone already. */
  if (rc != MPI_ERR_PENDING) ad__recv_complete(q->c, q->post, -2, -2);
  ad__mpi_keep(q->m.wire);
  free(q->m.act);
  free(q->m.v);
  free(q);
}

static const ad__req_ops nbrecv_ops = {nbrecv_complete, nbrecv_failed};

/* An irecv (message NULL) or an imrecv of a probed message. */
static int dt_irecv_any(const char *fn, void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                        ad_mpi_message *message, ad_mpi_request *request) {
  const ad__dtype *d = ad__dtype_get(type);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  if (count < 0) return MPI_ERR_COUNT;
  if (!message && source == MPI_PROC_NULL) {
    MPI_Request mq;
    int rc = MPI_Irecv(NULL, 0, MPI_BYTE, source, tag, comm, &mq);
    return rc == MPI_SUCCESS ? ad__req_new(request, mq, NULL, NULL, NULL, NULL) : rc;
  }
  ad__comm *c = NULL;
  if (!message) {
    int err;
    if (!(c = ad__mpi_comm(comm, &err))) return err;
  }
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  nbrecv *q = calloc(1, sizeof *q);
  if (!q) return MPI_ERR_NO_MEM;
  int rc = mbuf_open(&q->m, fn, d, count);
  if (rc != 0) {
    mbuf_close(&q->m);
    free(q);
    return rc;
  }
  MPI_Message mm = MPI_MESSAGE_NULL;
  uint64_t post = 0;
  if (message) { /* taken once nothing else can fail before it is received */
    int got = ad__msg_take(message, fn, &c, &post, &mm);
    if (got <= 0) {
      mbuf_close(&q->m);
      free(q);
      if (got < 0) return -got;
      MPI_Request mq;
      rc = MPI_Imrecv(NULL, 0, MPI_BYTE, &message->mpi, &mq);
      return rc == MPI_SUCCESS ? ad__req_new(request, mq, NULL, NULL, NULL, NULL) : rc;
    }
  } else {
    post = ad__recv_post(c, source, tag);
  }
  q->d = d;
  q->c = c;
  q->ubuf = buf;
  q->count = count;
  q->post = post;
  ad__mrec *r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_IRECV), c, 0, 0) : NULL;
  MPI_Request mq = MPI_REQUEST_NULL;
  MPI_Datatype wt = d->npass ? MPI_BYTE : MPI_DOUBLE;
  int wn = d->npass ? (int)q->m.bytes : q->m.nact;
  rc = message ? MPI_Imrecv(q->m.wire, wn, wt, &mm, &mq) : MPI_Irecv(q->m.wire, wn, wt, source, tag, comm, &mq);
  if (rc == MPI_SUCCESS) rc = ad__req_new(request, mq, r ? t : NULL, r, &nbrecv_ops, q);
  if (rc != MPI_SUCCESS) {
    /* MPI_ERR_NO_MEM from the slot table leaves a posted receive: it cannot
     * be taken back, so its buffer stays */
    ad__recv_complete(c, q->post, -2, -2);
    if (mq != MPI_REQUEST_NULL)
      ad__mpi_keep(q->m.wire);
    else
      free(q->m.wire);
    free(q->m.act);
    free(q->m.v);
    free(q);
    return ad__mpi_forward_error(seen, rc, fn);
  }
  ad__recv_attach(c, q->post, request->slot, request->gen);
  return MPI_SUCCESS;
}

int ad__dt_irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, ad_mpi_request *request) {
  return dt_irecv_any("ad_mpi_irecv", buf, count, type, source, tag, comm, NULL, request);
}

int ad__dt_imrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, ad_mpi_request *request) {
  return dt_irecv_any("ad_mpi_imrecv", buf, count, type, 0, 0, MPI_COMM_NULL, message, request);
}

int ad__dt_mrecv(void *buf, int count, MPI_Datatype type, ad_mpi_message *message, MPI_Status *status) {
  const char *fn = "ad_mpi_mrecv";
  const ad__dtype *d = ad__dtype_get(type);
  if (!d) return MPI_ERR_NO_MEM;
  if (d->why) return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc != 0) {
    mbuf_close(&m);
    return rc;
  }
  ad__comm *c;
  uint64_t post;
  MPI_Message mm;
  int got = ad__msg_take(message, fn, &c, &post, &mm);
  if (got <= 0) {
    mbuf_close(&m);
    return got < 0 ? -got : MPI_Mrecv(NULL, 0, MPI_BYTE, &message->mpi, status);
  }
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  MPI_Status st;
  st.MPI_SOURCE = st.MPI_TAG = -1;
  rc = d->npass ? MPI_Mrecv(m.wire, (int)m.bytes, MPI_BYTE, &mm, &st) : MPI_Mrecv(m.wire, m.nact, MPI_DOUBLE, &mm, &st);
  rc = mixed_recv_done(c, t, seen, fn, d, buf, count, post, rc, &st, &m);
  if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st;
  mbuf_close(&m);
  return rc;
}

/* A send of a type with passive fields: the wire buffer lives until the
 * request completes. */
static void nbsend_complete(void *ctx, ad_tape *t, ad_tape *seen, ad__mrec *start, const MPI_Status *st) {
  (void)seen;
  (void)st;
  ad__mrec *d = t && start ? ad__mrec_push(t, ad__p2p_kind(AD__M_ISEND_DONE), start->c, 0, 0) : NULL;
  if (d) {
    d->link = start;
    start->link = d;
  }
  free(ctx);
}

static void nbsend_failed(void *ctx, int rc) {
  (void)rc;
  ad__mpi_keep(ctx);
}

static const ad__req_ops nbsend_ops = {nbsend_complete, nbsend_failed};

static int mixed_isend(ad__dt_mpi_isend_fn mpifn, const char *fn, const ad__dtype *d, const void *buf, int count,
                       int dest, int tag, MPI_Comm comm, ad_mpi_request *request) {
  int err;
  ad__comm *c = ad__mpi_comm(comm, &err);
  if (!c) return err;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  mbuf m;
  int rc = mbuf_open(&m, fn, d, count);
  if (rc != 0) {
    mbuf_close(&m);
    return rc;
  }
  mixed_pack(d, buf, count, m.wire, m.act);
  ad__mrec *r = NULL;
  if (dest != MPI_PROC_NULL) {
    int k = ad__send_seq(c, dest, tag);
    ad__mpi_note_peer(seen, c, dest, 0, tag, m.nact, k);
    r = t ? ad__mrec_push(t, ad__p2p_kind(AD__M_ISEND), c, m.nact, 0) : NULL;
    if (r) {
      r->peer = dest;
      r->tag = tag;
      r->k = k;
      ad__handles(t, m.act, m.nact, r->in, fn);
    }
  }
  MPI_Request mq = MPI_REQUEST_NULL;
  rc = mpifn(m.wire, (int)m.bytes, MPI_BYTE, dest, tag, comm, &mq);
  if (rc == MPI_SUCCESS) rc = ad__req_new(request, mq, r ? t : NULL, r, &nbsend_ops, m.wire);
  if (rc == MPI_SUCCESS) {
    if (dest != MPI_PROC_NULL) ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
    free(m.act);
    free(m.v);
    return MPI_SUCCESS;
  }
  if (mq != MPI_REQUEST_NULL)
    ad__mpi_keep(m.wire);
  else
    free(m.wire);
  free(m.act);
  free(m.v);
  return ad__mpi_forward_error(seen, rc, fn);
}

int ad__dt_send(ad__dt_send_fn fn, const char *name, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_send(fn, name, md, buf, count, dest, tag, comm);
  side s;
  int rc = side_open(&s, name, type, buf, count, 1);
  if (rc == 0) rc = fn(side_buf(&s), side_count(&s, count), side_type(&s, type), dest, tag, comm);
  side_close(&s);
  return rc;
}

int ad__dt_isend(ad__dt_mpi_isend_fn mpifn, ad__dt_isend_fn fn, const char *name, const void *buf, int count,
                 MPI_Datatype type, int dest, int tag, MPI_Comm comm, ad_mpi_request *request) {
  /* The wrapper on AD_MPI_REAL takes the values and handles at once: the
   * gathered copy can go when it returns. */
  const ad__dtype *md = mixed(type);
  if (md) return mixed_isend(mpifn, name, md, buf, count, dest, tag, comm, request);
  side s;
  int rc = side_open(&s, name, type, buf, count, 1);
  if (rc == 0) rc = fn(side_buf(&s), side_count(&s, count), side_type(&s, type), dest, tag, comm, request);
  side_close(&s);
  return rc;
}

/* The elements that arrived, from a status of an AD_MPI_REAL receive. */
static long long arrived(const MPI_Status *st, long long max) {
  int n = 0;
  if (MPI_Get_count(st, AD_MPI_REAL, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) return max;
  return n < max ? n : max;
}

int ad__dt_recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_recv(md, buf, count, source, tag, comm, status, "ad_mpi_recv");
  side s;
  MPI_Status st;
  int rc = side_open(&s, "ad_mpi_recv", type, buf, count, 0);
  if (rc == 0) rc = ad_mpi_recv(s.tmp, side_count(&s, count), AD_MPI_REAL, source, tag, comm, &st);
  if (rc == MPI_SUCCESS) {
    dt_scatter(s.d, buf, s.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, s.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  side_close(&s);
  return rc;
}

int ad__dt_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                    int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  if (mixed(sendtype) || mixed(recvtype))
    return mixed_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                          comm, status, "ad_mpi_sendrecv");
  side a, b;
  MPI_Status st;
  int rc = side_open(&a, "ad_mpi_sendrecv", sendtype, sendbuf, sendcount, 1);
  if (rc == 0)
    rc = side_open(&b, "ad_mpi_sendrecv", recvtype, recvbuf, recvcount, 0);
  else
    memset(&b, 0, sizeof b);
  if (rc == 0)
    rc = ad_mpi_sendrecv(side_buf(&a), side_count(&a, sendcount), side_type(&a, sendtype), dest, sendtag, side_buf(&b),
                         side_count(&b, recvcount), side_type(&b, recvtype), source, recvtag, comm, &st);
  if (rc == MPI_SUCCESS) {
    if (b.d) dt_scatter(b.d, recvbuf, b.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, b.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  side_close(&a);
  side_close(&b);
  return rc;
}

int ad__dt_sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source, int recvtag,
                            MPI_Comm comm, MPI_Status *status) {
  const ad__dtype *md = mixed(type);
  if (md) {
    /* The send half is packed from buf before the receive half writes it. */
    int err;
    ad__comm *c = ad__mpi_comm(comm, &err);
    if (!c) return err;
    ad_tape *seen, *t = ad__mpi_tape(&seen);
    const char *fn = "ad_mpi_sendrecv_replace";
    mbuf m;
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = mbuf_open(&m, fn, md, count);
    if (rc == 0) {
      mixed_send_note(c, t, seen, fn, md, buf, count, dest, sendtag, &m);
      rc = MPI_Isend(m.wire, (int)m.bytes, MPI_BYTE, dest, sendtag, comm, &q);
      if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL)
        ad__mpi_counters.forward_bytes += (uint64_t)m.nact * sizeof(double);
      if (rc != MPI_SUCCESS) ad__mpi_forward_error(seen, rc, fn);
    }
    if (rc == MPI_SUCCESS) {
      mbuf m2;
      rc = mbuf_open(&m2, fn, md, count);
      if (rc == 0 && source == MPI_PROC_NULL) {
        rc = MPI_Recv(NULL, 0, MPI_BYTE, source, recvtag, comm, status);
      } else if (rc == 0) {
        MPI_Status st;
        st.MPI_SOURCE = st.MPI_TAG = -1;
        uint64_t post = ad__recv_post(c, source, recvtag);
        rc = MPI_Recv(m2.wire, (int)m2.bytes, MPI_BYTE, source, recvtag, comm, &st);
        rc = mixed_recv_done(c, t, seen, fn, md, buf, count, post, rc, &st, &m2);
        if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE) *status = st;
      }
      mbuf_close(&m2);
    }
    int rc2 = q == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Wait(&q, MPI_STATUS_IGNORE);
    if (rc2 != MPI_SUCCESS) ad__mpi_forward_error(seen, rc2, fn);
    mbuf_close(&m);
    return rc != MPI_SUCCESS ? rc : rc2;
  }
  side s;
  MPI_Status st;
  int rc = side_open(&s, "ad_mpi_sendrecv_replace", type, buf, count, 1);
  if (rc == 0)
    rc = ad_mpi_sendrecv_replace(s.tmp, side_count(&s, count), AD_MPI_REAL, dest, sendtag, source, recvtag, comm, &st);
  if (rc == MPI_SUCCESS) {
    dt_scatter(s.d, buf, s.tmp, source == MPI_PROC_NULL ? 0 : arrived(&st, s.ne));
    if (status != MPI_STATUS_IGNORE) *status = st;
  }
  side_close(&s);
  return rc;
}

int ad__dt_bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  const ad__dtype *md = mixed(type);
  if (md) return mixed_bcast(md, buffer, count, root, comm);
  side s;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int rc = side_open(&s, "ad_mpi_bcast", type, buffer, count, rank == root);
  if (rc == 0) rc = ad_mpi_bcast(s.tmp, side_count(&s, count), AD_MPI_REAL, root, comm);
  if (rc == MPI_SUCCESS && rank != root) dt_scatter(s.d, buffer, s.tmp, s.ne);
  side_close(&s);
  return rc;
}

/* Reductions. MPI defines its predefined operations on predefined datatypes
 * only (MPICH and Open MPI return MPI_ERR_OP for a derived type of
 * MPI_DOUBLE), so the same holds here; AD_MPI_REAL_INT with MINLOC/MAXLOC
 * is the twin of a predefined type. A user-defined operation sees items of
 * the user's type, as in MPI (reduce_ext.c). */
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

static int predefined_refused(const char *fn) {
  ad__dtype_refuse(fn, "MPI defines its predefined operations on predefined datatypes only, so a datatype built from "
                       "AD_MPI_REAL is refused as MPI refuses the same type built from MPI_DOUBLE; reduce AD_MPI_REAL "
                       "with a count, or use an operation made by ad_mpi_op_create");
  return MPI_ERR_OP;
}

int ad__dt_reduce(int kind, const void *sendbuf, void *recvbuf, int count, const int *recvcounts, MPI_Datatype type,
                  MPI_Op op, int root, MPI_Comm comm, ad_mpi_request *req) {
  static const char *const names[2][6] = {{"ad_mpi_reduce", "ad_mpi_allreduce", "ad_mpi_scan", "ad_mpi_exscan",
                                           "ad_mpi_reduce_scatter_block", "ad_mpi_reduce_scatter"},
                                          {"ad_mpi_ireduce", "ad_mpi_iallreduce", "ad_mpi_iscan", "ad_mpi_iexscan",
                                           "ad_mpi_ireduce_scatter_block", "ad_mpi_ireduce_scatter"}};
  const char *fn = names[req != NULL][kind];
  if (type == AD_MPI_REAL_INT && (op == MPI_MINLOC || op == MPI_MAXLOC)) {
    if (!req && kind < 2) return ad__loc_reduce(kind, sendbuf, recvbuf, count, op, root, comm);
    return ad__user_reduce(kind, sendbuf, recvbuf, count, recvcounts, type, op, root, comm, req);
  }
  if (ad__op_user(op)) return ad__user_reduce(kind, sendbuf, recvbuf, count, recvcounts, type, op, root, comm, req);
  if (type == AD_MPI_REAL_INT) {
    ad__dtype_refuse(fn, "AD_MPI_REAL_INT is differentiated with MPI_MINLOC and MPI_MAXLOC only (or an operation "
                         "made by ad_mpi_op_create)");
    return MPI_ERR_OP;
  }
  return predefined_refused(fn);
}

/* v-collectives: a derived side's counts and displacements in elements, its
 * slots packed in rank order in the gathered buffer. */
typedef struct vside {
  side s;
  int *cnt, *dsp;   /* in ad_real elements, packed */
  int *pcnt, *pdsp; /* passive fields: in bytes, packed */
} vside;

static int vside_open(vside *v, const char *fn, MPI_Datatype t, const void *buf, const int *cnt, const int *dsp, int p,
                      int fill) {
  memset(v, 0, sizeof *v);
  v->s.buf = (void *)buf;
  if (t == AD_MPI_REAL || buf == MPI_IN_PLACE || derived_from_real(t, 0) != 1) return 0;
  long long items = 0;
  for (int j = 0; j < p; j++) items += cnt[j];
  int rc = side_open(&v->s, fn, t, buf, items, 0);
  if (rc != 0) return rc;
  v->cnt = malloc(4 * (size_t)p * sizeof *v->cnt);
  if (!v->cnt) return MPI_ERR_NO_MEM;
  v->dsp = v->cnt + p;
  v->pcnt = v->cnt + 2 * p;
  v->pdsp = v->cnt + 3 * p;
  int n = v->s.d->n, at = 0, pat = 0, pb = v->s.pbytes;
  for (int j = 0; j < p; j++) {
    char *base = (char *)buf + (MPI_Aint)dsp[j] * v->s.d->ext;
    v->cnt[j] = cnt[j] * n;
    v->dsp[j] = at;
    v->pcnt[j] = cnt[j] * pb;
    v->pdsp[j] = pat;
    if (fill) dt_gather(v->s.d, base, cnt[j], v->s.tmp + at);
    if (fill && v->s.pas) pas_move(v->s.d, base, cnt[j], v->s.pas + pat, 1);
    at += cnt[j] * n;
    pat += cnt[j] * pb;
  }
  return 0;
}

static void vside_scatter(const vside *v, void *buf, const int *dsp, int p, int only) {
  for (int j = 0; j < p; j++)
    if (only < 0 || j == only) {
      char *base = (char *)buf + (MPI_Aint)dsp[j] * v->s.d->ext;
      dt_scatter(v->s.d, base, v->s.tmp + v->dsp[j], v->cnt[j]);
      if (v->s.pas) pas_move(v->s.d, base, v->cnt[j] / v->s.d->n, v->s.pas + v->pdsp[j], 0);
    }
}

static void vside_close(vside *v) {
  side_close(&v->s);
  free(v->cnt);
}

/* ------------------------------------------------------------------------ */
/* Nonblocking collectives on derived types: the gathered buffers live until */
/* the request completes, and the received elements are scattered then      */
/* ------------------------------------------------------------------------ */

typedef struct later {
  side s[2];
  void *sbase[2]; /* scatter s[i] into this buffer at completion (NULL: no) */
  vside v[2];
  void *vbase[2]; /* scatter v[i] into this buffer, slots at vdsp[i] */
  int *vdsp[2], p;
  int *keep[2];     /* count arrays handed to the call */
  MPI_Request preq; /* the passive fields' collective, MPI_REQUEST_NULL if none */
  const char *fn;
  int started; /* the AD_MPI_REAL call started (whatever became of the passive one) */
} later;

/* Complete the passive fields' collective that runs beside an AD_MPI_REAL
 * one (nothing if none): 1, or 0 with MPI's error on the tape naming fn. */
static int passive_done(MPI_Request *preq, const char *fn) {
  if (*preq == MPI_REQUEST_NULL) return 1;
  int rc = MPI_Wait(preq, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) return 1;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  ad__mpi_forward_error(seen, rc, fn);
  return 0;
}

static void later_run(void *ctx, int ok) {
  later *L = ctx;
  ok = ok && passive_done(&L->preq, L->fn);
  for (int i = 0; i < 2; i++) {
    if (ok && L->sbase[i] && L->s[i].d) side_scatter(&L->s[i], L->sbase[i]);
    if (ok && L->vbase[i] && L->v[i].s.d) vside_scatter(&L->v[i], L->vbase[i], L->vdsp[i], L->p, -1);
    if (ok) {
      side_close(&L->s[i]);
      vside_close(&L->v[i]);
      free(L->vdsp[i]);
      free(L->keep[i]);
    } else { /* MPI may still use them */
      ad__mpi_keep(L->s[i].tmp);
      ad__mpi_keep(L->s[i].pas);
      ad__mpi_keep(L->v[i].s.pas);
      ad__mpi_keep(L->v[i].s.tmp);
      ad__mpi_keep(L->v[i].cnt);
      ad__mpi_keep(L->vdsp[i]);
      ad__mpi_keep(L->keep[i]);
    }
  }
  free(L);
}

/* After a nonblocking call returned rc on request req: hand the buffers to
 * the request (success) or release them now. */
static int later_arm(later *L, int rc, ad_mpi_request *req) {
  if (rc == MPI_SUCCESS || L->started) {
    ad__req_then(req, later_run, L);
    return rc;
  }
  for (int i = 0; i < 2; i++) {
    side_close(&L->s[i]);
    vside_close(&L->v[i]);
    free(L->vdsp[i]);
    free(L->keep[i]);
  }
  free(L);
  return rc;
}

/* The passive fields' collective after the AD_MPI_REAL one returned *rc:
 * prc is what starting it returned. A failure after the active call started
 * leaves the active request to complete (its buffers go with it); the call
 * returns the error. */
static int passive_after(later *L, int rc, int prc, const char *fn) {
  if (L) L->fn = fn;
  if (rc != MPI_SUCCESS || prc == MPI_SUCCESS) return rc;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (L) {
    L->preq = MPI_REQUEST_NULL;
    L->started = 1;
  }
  return ad__mpi_forward_error(seen, prc, fn);
}

static int *icopy_n(const int *a, int n) {
  int *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
  if (b && a) memcpy(b, a, (size_t)n * sizeof *b);
  return b;
}

/* The blocking call, or its nonblocking twin when req is not NULL. */
static int call_gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rc, const int *rd,
                        MPI_Datatype rt, int root, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_igatherv(sb, sc, st, rb, rc, rd, rt, root, comm, req)
             : ad_mpi_gatherv(sb, sc, st, rb, rc, rd, rt, root, comm);
}
static int call_scatterv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb, int rc,
                         MPI_Datatype rt, int root, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_iscatterv(sb, sc, sd, st, rb, rc, rt, root, comm, req)
             : ad_mpi_scatterv(sb, sc, sd, st, rb, rc, rt, root, comm);
}
static int call_allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rc, const int *rd,
                           MPI_Datatype rt, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_iallgatherv(sb, sc, st, rb, rc, rd, rt, comm, req)
             : ad_mpi_allgatherv(sb, sc, st, rb, rc, rd, rt, comm);
}
static int call_alltoallv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb, const int *rc,
                          const int *rd, MPI_Datatype rt, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_ialltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm, req)
             : ad_mpi_alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm);
}

/* Set up the deferred part of a nonblocking call (NULL for a blocking one);
 * *rc = MPI_ERR_NO_MEM on failure. */
static later *later_new(ad_mpi_request *req, const int *dsp, int p, int *rc) {
  if (!req) return NULL;
  later *L = calloc(1, sizeof *L);
  if (L) L->preq = MPI_REQUEST_NULL;
  if (L && dsp && !(L->vdsp[0] = icopy_n(dsp, p))) {
    free(L);
    L = NULL;
  }
  if (!L) *rc = MPI_ERR_NO_MEM;
  return L;
}

/* Uniform counts as v-arguments. */
static int uniform(int p, int count, int **cnt, int **dsp) {
  int *a = malloc(2 * (size_t)(p ? p : 1) * sizeof *a);
  if (!a) return MPI_ERR_NO_MEM;
  for (int j = 0; j < p; j++) {
    a[j] = count;
    a[p + j] = j * count;
  }
  *cnt = a;
  *dsp = a + p;
  return 0;
}

int ad__dt_gatherv(int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], int recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm, ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_gatherv" : "ad_mpi_gather";
  int rank, p, *uc = NULL, *ud = NULL;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  if (!v) {
    if (uniform(p, recvcount, &uc, &ud)) return MPI_ERR_NO_MEM;
    recvcounts = uc;
    displs = ud;
  }
  int me = rank == root, inplace = me && sendbuf == MPI_IN_PLACE;
  side a;
  vside b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = inplace ? 0 : side_open(&a, fn, sendtype, sendbuf, sendcount, 1);
  if (rc == 0 && me) rc = vside_open(&b, fn, recvtype, recvbuf, recvcounts, displs, p, inplace);
  later *L = rc == 0 ? later_new(req, me ? displs : NULL, p, &rc) : NULL;
  if (rc == 0) {
    int sc = inplace ? (b.s.d ? sendcount * b.s.d->n : sendcount) : side_count(&a, sendcount);
    MPI_Datatype stype = inplace ? unused(sendtype) : side_type(&a, sendtype);
    if (b.s.d)
      rc = call_gatherv(inplace ? MPI_IN_PLACE : side_buf(&a), sc, stype, b.s.tmp, b.cnt, b.dsp, AD_MPI_REAL, root,
                        comm, req);
    else
      rc = call_gatherv(inplace ? MPI_IN_PLACE : side_buf(&a), sc, stype, recvbuf, recvcounts, displs,
                        me ? recvtype : unused(recvtype), root, comm, req);
    if (rc == MPI_SUCCESS && (a.pas || b.s.pas)) { /* passive fields: as bytes, alongside */
      const void *psb = inplace ? MPI_IN_PLACE : (const void *)a.pas;
      int psc = inplace ? 0 : sendcount * a.pbytes;
      rc = passive_after(L, rc,
                         L ? MPI_Igatherv(psb, psc, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, root, comm, &L->preq)
                           : MPI_Gatherv(psb, psc, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, root, comm),
                         fn);
    }
    if (L) {
      L->s[0] = a;
      L->v[0] = b;
      L->vbase[0] = b.s.d ? recvbuf : NULL;
      L->p = p;
      L->keep[0] = uc;
      return later_arm(L, rc, req);
    }
    if (rc == MPI_SUCCESS && b.s.d) vside_scatter(&b, recvbuf, displs, p, -1);
  }
  side_close(&a);
  vside_close(&b);
  free(uc);
  return rc;
}

int ad__dt_scatterv(int v, const void *sendbuf, const int sendcounts[], const int displs[], int sendcount,
                    MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                    ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_scatterv" : "ad_mpi_scatter";
  int rank, p, *uc = NULL, *ud = NULL;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  if (!v) {
    if (uniform(p, sendcount, &uc, &ud)) return MPI_ERR_NO_MEM;
    sendcounts = uc;
    displs = ud;
  }
  int me = rank == root, inplace = me && recvbuf == MPI_IN_PLACE;
  vside a;
  side b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = me ? vside_open(&a, fn, sendtype, sendbuf, sendcounts, displs, p, 1) : 0;
  if (rc == 0 && !inplace) rc = side_open(&b, fn, recvtype, recvbuf, recvcount, 0);
  later *L = rc == 0 ? later_new(req, NULL, p, &rc) : NULL;
  if (rc == 0) {
    int rcnt = inplace ? (a.s.d ? recvcount * a.s.d->n : recvcount) : side_count(&b, recvcount);
    void *rb = inplace ? MPI_IN_PLACE : side_buf(&b);
    MPI_Datatype rtype = inplace ? unused(recvtype) : side_type(&b, recvtype);
    if (a.s.d)
      rc = call_scatterv(a.s.tmp, a.cnt, a.dsp, AD_MPI_REAL, rb, rcnt, rtype, root, comm, req);
    else
      rc = call_scatterv(sendbuf, sendcounts, displs, me ? sendtype : unused(sendtype), rb, rcnt, rtype, root, comm,
                         req);
    if (rc == MPI_SUCCESS && (a.s.pas || b.pas)) { /* passive fields: as bytes, alongside */
      void *prb = inplace ? MPI_IN_PLACE : (void *)b.pas;
      int prc = inplace ? 0 : recvcount * b.pbytes;
      rc = passive_after(L, rc,
                         L ? MPI_Iscatterv(a.s.pas, a.pcnt, a.pdsp, MPI_BYTE, prb, prc, MPI_BYTE, root, comm, &L->preq)
                           : MPI_Scatterv(a.s.pas, a.pcnt, a.pdsp, MPI_BYTE, prb, prc, MPI_BYTE, root, comm),
                         fn);
    }
    if (L) {
      L->v[0] = a;
      L->s[0] = b;
      L->sbase[0] = b.d ? recvbuf : NULL;
      L->keep[0] = uc;
      return later_arm(L, rc, req);
    }
    if (rc == MPI_SUCCESS && b.d) side_scatter(&b, recvbuf);
  }
  vside_close(&a);
  side_close(&b);
  free(uc);
  return rc;
}

int ad__dt_allgatherv(int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      const int recvcounts[], const int displs[], int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                      ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_allgatherv" : "ad_mpi_allgather";
  int rank, p, *uc = NULL, *ud = NULL;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  if (!v) {
    if (uniform(p, recvcount, &uc, &ud)) return MPI_ERR_NO_MEM;
    recvcounts = uc;
    displs = ud;
  }
  int inplace = sendbuf == MPI_IN_PLACE;
  side a;
  vside b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = inplace ? 0 : side_open(&a, fn, sendtype, sendbuf, sendcount, 1);
  if (rc == 0) rc = vside_open(&b, fn, recvtype, recvbuf, recvcounts, displs, p, inplace);
  later *L = rc == 0 ? later_new(req, displs, p, &rc) : NULL;
  if (rc == 0) {
    int sc = inplace ? (b.s.d ? sendcount * b.s.d->n : sendcount) : side_count(&a, sendcount);
    MPI_Datatype stype = inplace ? unused(sendtype) : side_type(&a, sendtype);
    if (b.s.d)
      rc = call_allgatherv(inplace ? MPI_IN_PLACE : side_buf(&a), sc, stype, b.s.tmp, b.cnt, b.dsp, AD_MPI_REAL, comm,
                           req);
    else
      rc = call_allgatherv(inplace ? MPI_IN_PLACE : side_buf(&a), sc, stype, recvbuf, recvcounts, displs, recvtype,
                           comm, req);
    if (rc == MPI_SUCCESS && (a.pas || b.s.pas)) { /* passive fields: as bytes, alongside */
      /* the own slot in place, as allgatherv_any does for the values */
      if (a.pas && b.s.pas && b.pcnt[rank] == sendcount * a.pbytes)
        memcpy(b.s.pas + b.pdsp[rank], a.pas, (size_t)b.pcnt[rank]);
      rc = passive_after(
          L, rc,
          L ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm, &L->preq)
            : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm),
          fn);
    }
    if (L) {
      L->s[0] = a;
      L->v[0] = b;
      L->vbase[0] = b.s.d ? recvbuf : NULL;
      L->p = p;
      L->keep[0] = uc;
      return later_arm(L, rc, req);
    }
    if (rc == MPI_SUCCESS && b.s.d) vside_scatter(&b, recvbuf, displs, p, -1);
  }
  side_close(&a);
  vside_close(&b);
  free(uc);
  return rc;
}

int ad__dt_alltoallv(int v, const void *sendbuf, const int sendcounts[], const int sdispls[], int sendcount,
                     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_alltoallv" : "ad_mpi_alltoall";
  int p, *us = NULL, *usd = NULL, *ur = NULL, *urd = NULL;
  MPI_Comm_size(comm, &p);
  if (!v) {
    if (uniform(p, sendcount, &us, &usd) || uniform(p, recvcount, &ur, &urd)) {
      free(us);
      return MPI_ERR_NO_MEM;
    }
    sendcounts = us;
    sdispls = usd;
    recvcounts = ur;
    rdispls = urd;
  }
  int inplace = sendbuf == MPI_IN_PLACE;
  vside a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = inplace ? 0 : vside_open(&a, fn, sendtype, sendbuf, sendcounts, sdispls, p, 1);
  if (rc == 0) rc = vside_open(&b, fn, recvtype, recvbuf, recvcounts, rdispls, p, inplace);
  later *L = rc == 0 ? later_new(req, rdispls, p, &rc) : NULL;
  if (rc == 0) {
    const void *sb = inplace ? MPI_IN_PLACE : a.s.d ? (void *)a.s.tmp : sendbuf;
    const int *sc = a.s.d ? a.cnt : sendcounts, *sd = a.s.d ? a.dsp : sdispls;
    rc = call_alltoallv(sb, sc, sd, a.s.d || inplace ? unused(sendtype) : sendtype, b.s.d ? (void *)b.s.tmp : recvbuf,
                        b.s.d ? b.cnt : recvcounts, b.s.d ? b.dsp : rdispls, b.s.d ? AD_MPI_REAL : recvtype, comm, req);
    if (rc == MPI_SUCCESS && (a.s.pas || b.s.pas)) { /* passive fields: as bytes, alongside */
      const void *psb = inplace ? MPI_IN_PLACE : (const void *)a.s.pas;
      const int *pc = inplace ? b.pcnt : a.pcnt, *pd = inplace ? b.pdsp : a.pdsp;
      rc = passive_after(L, rc,
                         L ? MPI_Ialltoallv(psb, pc, pd, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm, &L->preq)
                           : MPI_Alltoallv(psb, pc, pd, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm),
                         fn);
    }
    if (L) {
      L->v[1] = a;
      L->v[0] = b;
      L->vbase[0] = b.s.d ? recvbuf : NULL;
      L->p = p;
      L->keep[0] = us;
      L->keep[1] = ur;
      return later_arm(L, rc, req);
    }
    if (rc == MPI_SUCCESS && b.s.d) vside_scatter(&b, recvbuf, rdispls, p, -1);
  }
  vside_close(&a);
  vside_close(&b);
  free(us);
  free(ur);
  return rc;
}

int ad__dt_ibcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *req) {
  side s;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int rc = side_open(&s, "ad_mpi_ibcast", type, buffer, count, rank == root);
  later *L = rc == 0 ? later_new(req, NULL, 0, &rc) : NULL;
  if (rc != 0) {
    side_close(&s);
    return rc;
  }
  rc = ad_mpi_ibcast(s.tmp, side_count(&s, count), AD_MPI_REAL, root, comm, req);
  if (rc == MPI_SUCCESS && s.pas) /* passive fields: as bytes, alongside */
    rc = passive_after(L, rc, MPI_Ibcast(s.pas, count * s.pbytes, MPI_BYTE, root, comm, &L->preq), "ad_mpi_ibcast");
  L->s[0] = s;
  L->sbase[0] = rank != root ? buffer : NULL;
  return later_arm(L, rc, req);
}

/* ------------------------------------------------------------------------ */
/* Alltoallw and the neighbourhood collectives: a slot per peer, each with   */
/* its own datatype, count and byte displacement                              */
/* ------------------------------------------------------------------------ */

/* One side of such a call, gathered into a packed ad_real buffer: slot j
 * holds cnt[j] elements from dsp[j] on. The user's arrays are copied, so
 * that a nonblocking call can scatter at completion. */
typedef struct wside {
  int n; /* slots */
  ad_real *tmp;
  int *cnt, *dsp;     /* elements, packed */
  char *pas;          /* passive fields of the slots, as bytes (NULL: none) */
  int *pcnt, *pdsp;   /* bytes, packed */
  int *ucnt;          /* items of the user's type */
  MPI_Aint *udsp;     /* bytes */
  MPI_Datatype *type; /* per slot */
} wside;

static void wside_close(wside *w) {
  free(w->tmp);
  free(w->pas);
  free(w->cnt);
  free(w->ucnt);
  free(w->udsp);
  free(w->type);
  memset(w, 0, sizeof *w);
}

/* Gather (to_tmp) or scatter the slots in use. */
static void wside_move(const wside *w, void *buf, int to_tmp) {
  for (int j = 0; j < w->n; j++) {
    if (!w->ucnt[j]) continue;
    char *base = (char *)buf + w->udsp[j];
    ad_real *at = w->tmp + w->dsp[j];
    const ad__dtype *d = w->type[j] == AD_MPI_REAL ? NULL : ad__dtype_get(w->type[j]);
    if (!d)
      memcpy(to_tmp ? (void *)at : base, to_tmp ? (void *)base : at, (size_t)w->ucnt[j] * sizeof(ad_real));
    else if (to_tmp)
      dt_gather(d, base, w->ucnt[j], at);
    else
      dt_scatter(d, base, at, w->cnt[j]);
    if (d && d->npass && w->pas) pas_move(d, base, w->ucnt[j], w->pas + w->pdsp[j], to_tmp);
  }
}

static int wside_open(wside *w, const char *fn, const void *buf, const int *cnt, const MPI_Aint *dsp,
                      const MPI_Datatype *types, int n, int fill, int mixed_ok) {
  memset(w, 0, sizeof *w);
  w->n = n;
  size_t k = (size_t)(n > 0 ? n : 1);
  w->cnt = malloc(4 * k * sizeof *w->cnt);
  w->ucnt = malloc(k * sizeof *w->ucnt);
  w->udsp = malloc(k * sizeof *w->udsp);
  w->type = malloc(k * sizeof *w->type);
  if (!w->cnt || !w->ucnt || !w->udsp || !w->type) return MPI_ERR_NO_MEM;
  w->dsp = w->cnt + k;
  w->pcnt = w->cnt + 2 * k;
  w->pdsp = w->cnt + 3 * k;
  long long at = 0, pat = 0;
  int anypas = 0;
  for (int j = 0; j < n; j++) {
    w->ucnt[j] = cnt[j];
    w->udsp[j] = dsp[j];
    w->type[j] = types[j];
    w->cnt[j] = w->pcnt[j] = 0;
    w->dsp[j] = (int)at;
    w->pdsp[j] = (int)pat;
    if (cnt[j] < 0) return MPI_ERR_COUNT;
    if (!cnt[j]) continue;
    int per = 1;
    if (types[j] != AD_MPI_REAL) {
      if (types[j] == MPI_DATATYPE_NULL || derived_from_real(types[j], 0) != 1)
        return ad__dtype_refuse(fn,
                                "slot %d: with AD_MPI_REAL data in the call, every datatype in use must be "
                                "AD_MPI_REAL or built from it (move passive data in a call of its own)",
                                j);
      const ad__dtype *d = ad__dtype_get(types[j]);
      if (!d) return MPI_ERR_NO_MEM;
      if (d->why)
        return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
      if (d->npass && !mixed_ok)
        return ad__dtype_refuse(fn, "a datatype that mixes AD_MPI_REAL with passive fields is not supported with a "
                                    "datatype per slot (every rank could not tell whether passive fields move)");
      if (d->npass) {
        anypas = 1;
        int pb = d->wire - (int)sizeof(double) * d->n;
        w->pcnt[j] = cnt[j] * pb;
        pat += (long long)cnt[j] * pb;
        if (pat > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 passive bytes in one call");
      }
      per = d->n;
    }
    w->cnt[j] = cnt[j] * per;
    at += (long long)cnt[j] * per;
    if (at > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 ad_real elements in one call");
  }
  w->tmp = calloc((size_t)at + 1, sizeof(ad_real));
  if (!w->tmp) return MPI_ERR_NO_MEM;
  if (anypas && !(w->pas = calloc((size_t)pat + 1, 1))) return MPI_ERR_NO_MEM;
  if (fill) wside_move(w, (void *)buf, 1);
  return 0;
}

typedef struct wlater {
  wside s, r;
  void *recvbuf;
  MPI_Request preq; /* the passive fields' call, MPI_REQUEST_NULL if none */
  const char *fn;
} wlater;

static void wlater_run(void *ctx, int ok) {
  wlater *L = ctx;
  ok = ok && passive_done(&L->preq, L->fn);
  if (ok) {
    wside_move(&L->r, L->recvbuf, 0);
    wside_close(&L->s);
    wside_close(&L->r);
  } else { /* MPI may still use them */
    ad__mpi_keep(L->s.tmp);
    ad__mpi_keep(L->r.tmp);
    ad__mpi_keep(L->s.pas);
    ad__mpi_keep(L->r.pas);
    ad__mpi_keep(L->s.cnt);
    ad__mpi_keep(L->r.cnt);
    L->s.tmp = L->r.tmp = NULL;
    L->s.pas = L->r.pas = NULL;
    L->s.cnt = L->r.cnt = NULL;
    wside_close(&L->s);
    wside_close(&L->r);
  }
  free(L);
}

int ad__dt_alltoallw(int neighbor, int one_type, const char *fn, const void *sendbuf, const int *scnt,
                     const MPI_Aint *sdsp, const MPI_Datatype *stypes, int ns, void *recvbuf, const int *rcnt,
                     const MPI_Aint *rdsp, const MPI_Datatype *rtypes, int nr, MPI_Comm comm, ad_mpi_request *req) {
  int inplace = sendbuf == MPI_IN_PLACE;
  wlater *L = calloc(1, sizeof *L);
  if (!L) return MPI_ERR_NO_MEM;
  L->preq = MPI_REQUEST_NULL;
  L->fn = fn;
  /* The receive side is gathered too: a slot that receives nothing (a
   * Cartesian neighbour MPI_PROC_NULL) keeps what it holds. */
  int rc = inplace ? 0 : wside_open(&L->s, fn, sendbuf, scnt, sdsp, stypes, ns, 1, one_type);
  if (rc == 0) rc = wside_open(&L->r, fn, recvbuf, rcnt, rdsp, rtypes, nr, 1, one_type);
  if (rc == 0) {
    const void *sb = inplace ? MPI_IN_PLACE : (const void *)L->s.tmp;
    const int *sc = inplace ? L->r.cnt : L->s.cnt, *sd = inplace ? L->r.dsp : L->s.dsp;
    if (neighbor)
      rc = req ? ad_mpi_ineighbor_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm,
                                            req)
               : ad_mpi_neighbor_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm);
    else
      rc = req ? ad_mpi_ialltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm, req)
               : ad_mpi_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm);
    int started = rc == MPI_SUCCESS;
    if (started && (L->s.pas || L->r.pas)) {
      /* One datatype on each side, the same on every rank by MPI's rules:
       * every rank moves passive fields here, as bytes, with MPI's own
       * call (nonblocking, routed as the values are). */
      const void *psb = inplace ? MPI_IN_PLACE : (const void *)L->s.pas;
      const int *pc = inplace ? L->r.pcnt : L->s.pcnt, *pd = inplace ? L->r.pdsp : L->s.pdsp;
      rc = neighbor ? MPI_Ineighbor_alltoallv(psb, pc, pd, MPI_BYTE, L->r.pas, L->r.pcnt, L->r.pdsp, MPI_BYTE, comm,
                                              &L->preq)
                    : MPI_Ialltoallv(psb, pc, pd, MPI_BYTE, L->r.pas, L->r.pcnt, L->r.pdsp, MPI_BYTE, comm, &L->preq);
      if (rc == MPI_SUCCESS && !req) rc = MPI_Wait(&L->preq, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        ad_tape *seen;
        ad__mpi_tape(&seen);
        L->preq = MPI_REQUEST_NULL;
        ad__mpi_forward_error(seen, rc, fn);
      }
    }
    if (started && req) {
      L->recvbuf = recvbuf;
      ad__req_then(req, wlater_run, L);
      return rc;
    }
    if (rc == MPI_SUCCESS) wside_move(&L->r, recvbuf, 0);
  }
  wside_close(&L->s);
  wside_close(&L->r);
  free(L);
  return rc;
}
