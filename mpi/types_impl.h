/* SPDX-License-Identifier: BSD-3-Clause */
/* What the wrappers on datatypes derived from AD_MPI_REAL share: the
 * description of a type (types.c), and a buffer argument seen as
 * AD_MPI_REAL, gathered before the call and scattered after it. Point to
 * point and broadcast: types_p2p.c; the other collectives: types_coll.c. */
#ifndef ARIADNE_MPI_TYPES_IMPL_H
#define ARIADNE_MPI_TYPES_IMPL_H

#include "mpi_impl.h"

/* A flattened typemap: the elements of one item in typemap order, each at a
 * byte offset in memory, with AD_MPI_REAL occupying sizeof(ad_real) bytes
 * there (8 on the wire). */
typedef struct fel {
  MPI_Aint off;
  int size; /* 0: an ad_real; else the passive element's size in bytes */
} fel;

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

/* v-collectives: a derived side's counts and displacements in elements, its
 * slots packed in rank order in the gathered buffer. */
typedef struct vside {
  side s;
  int *cnt, *dsp;   /* in ad_real elements, packed */
  int *pcnt, *pdsp; /* passive fields: in bytes, packed */
} vside;

/* types.c */
int ad__types_derived_from_real(MPI_Datatype t, int depth);
void ad__types_dt_gather(const ad__dtype *d, const void *base, long long items, ad_real *tmp);
void ad__types_dt_scatter(const ad__dtype *d, void *base, const ad_real *tmp, long long ne);
void ad__types_pas_move(const ad__dtype *d, void *base, long long items, char *pas, int to_pas);
void ad__types_release(MPI_Datatype *t);
void *ad__types_side_buf(const side *s);
void ad__types_side_close(side *s);
int ad__types_side_count(const side *s, int count);
int ad__types_side_open(side *s, const char *fn, MPI_Datatype t, const void *buf, long long items, int fill);
void ad__types_side_scatter(const side *s, void *buf);
MPI_Datatype ad__types_side_type(const side *s, MPI_Datatype t);
MPI_Datatype ad__types_unused(MPI_Datatype t);

/* types_p2p.c */
int ad__types_vside_open(vside *v, const char *fn, MPI_Datatype t, const void *buf, const int *cnt, const int *dsp,
                         int p, int fill);
void ad__types_vside_close(vside *v);
void ad__types_vside_scatter(const vside *v, void *buf, const int *dsp, int p, int only);

#endif
