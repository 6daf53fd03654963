/* SPDX-License-Identifier: BSD-3-Clause */
/* Datatypes derived from AD_MPI_REAL (MPI_Type_contiguous(3, AD_MPI_REAL,
 * &t), the natural port of a type built on MPI_DOUBLE) are not
 * differentiated: passed to MPI they would copy raw ad_real structs (values
 * with foreign handles). Every wrapper refuses them with MPI_ERR_TYPE and a
 * sticky error on the recording tape naming the call. The answer is cached
 * on the datatype as an attribute. */
#include <stdint.h>
#include <stdlib.h>

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

int ad__types_refuse(const char *fn, int n, ...) {
  va_list ap;
  va_start(ap, n);
  int rc = MPI_SUCCESS;
  for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
    MPI_Datatype t = va_arg(ap, MPI_Datatype);
    if (t == AD_MPI_REAL || t == MPI_DATATYPE_NULL) continue;
    if (derived_from_real(t, 0) == 1) {
      ad_tape *seen = NULL;
      ad__mpi_tape(&seen);
      if (seen)
        ad__fail(seen, AD_ERR_MPI,
                 "%s: a datatype built from AD_MPI_REAL (MPI_Type_contiguous, _vector, _indexed, _create_struct, ...) "
                 "is not differentiated; send AD_MPI_REAL with a count instead",
                 fn);
      else
        ad__fail_notape(AD_ERR_MPI, "%s: a datatype built from AD_MPI_REAL is not differentiated", fn);
      rc = MPI_ERR_TYPE;
    }
  }
  va_end(ap);
  return rc;
}
