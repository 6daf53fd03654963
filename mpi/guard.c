/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_real data given to a wrapper under a passive datatype (MPI_DOUBLE,
 * MPI_BYTE, ...): MPI would move the raw bytes, so the receiver would get
 * the sender's handles, and a reduction would reduce the values and leave
 * the handles behind. Either way the recording loses the dependence and the
 * gradient is wrong with no error. The wrappers look at the buffer MPI
 * would read: an ad_real's handle word holding a handle that is live on the
 * recording tape, with its recording's number, is what no double, float or
 * character data looks like in practice (as a double it is a subnormal
 * number whose high word is a small counter). By default a few elements
 * are looked at, which costs nothing measurable; check mode
 * (ARIADNE_MPI_CHECK=1, ad_mpi_set_check) looks at the whole buffer, and
 * makes the ranks of a collective agree on the verdict. */
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

/* Elements looked at outside check mode. */
#define GUARD_DEFAULT_ELEMENTS 4

static int check_mode = -1; /* -1: not decided yet (environment read on first use) */

int ad_mpi_set_check(int on) {
  int old = ad_mpi_check_enabled();
  check_mode = on != 0;
  return old;
}

int ad_mpi_check_enabled(void) {
  if (check_mode < 0) {
    const char *env = getenv("ARIADNE_MPI_CHECK");
    check_mode = env && atoi(env) > 0;
  }
  return check_mode;
}

/* Bytes of one element of the datatypes that ad_real data can hide behind
 * without anything else being likely; 0 for any other type. Integers are
 * left out: small integers look like handles. Character types pass raw
 * bytes of anything, so they are looked at more strictly (below). */
static int guard_width(MPI_Datatype type, int *bytes) {
  *bytes = 0;
  if (type == MPI_DOUBLE || type == MPI_FLOAT || type == MPI_LONG_DOUBLE) return 1;
  if (type == MPI_BYTE || type == MPI_CHAR || type == MPI_UNSIGNED_CHAR || type == MPI_SIGNED_CHAR) *bytes = 1;
  return *bytes;
}

/* 1 if the handle word of an element-sized slot holds a handle live on t;
 * -1 if it is passive (0, recording 0); 0 otherwise. */
static int slot_kind(const ad_tape *t, const unsigned char *p) {
  ad_index i;
  uint32_t e;
  memcpy(&i, p + offsetof(ad_real, i), sizeof i);
  memcpy(&e, p + offsetof(ad_real, e), sizeof e);
  if (i == 0) return e == 0 ? -1 : 0;
  if (e == 0) return 0;
  /* The current recording is compared here, not in ad__handle_live, which
   * records an open preaccumulation region for a handle it has not seen. */
  if (e == t->rec.epoch) return i <= t->rec.next;
  return ad__handle_live(t, i, e);
}

int ad__mpi_guard(const char *fn, const char *what, const void *buf, int count, MPI_Datatype type) {
  int bytes;
  if (!buf || buf == MPI_IN_PLACE || count <= 0 || !guard_width(type, &bytes)) return MPI_SUCCESS;
  ad_tape *seen, *t = ad__mpi_tape(&seen);
  if (!t) return MPI_SUCCESS;
  int size = 0;
  if (MPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return MPI_SUCCESS;
  size_t len = (size_t)count * (size_t)size, n = len / sizeof(ad_real);
  /* An ad_real array is aligned as its double is; data that is not cannot
   * be one. Character data must be whole elements and nothing but passive
   * values and live handles to count as ad_real data. */
  if (n == 0 || (uintptr_t)buf % _Alignof(ad_real) != 0) return MPI_SUCCESS;
  if (bytes && len % sizeof(ad_real) != 0) return MPI_SUCCESS;
  size_t look = ad_mpi_check_enabled() || n < GUARD_DEFAULT_ELEMENTS ? n : GUARD_DEFAULT_ELEMENTS;
  const unsigned char *p = buf;
  size_t live = 0, first = 0;
  for (size_t k = 0; k < look; k++) {
    int s = slot_kind(t, p + k * sizeof(ad_real));
    if (s == 0 && bytes) return MPI_SUCCESS;
    if (s == 1 && live++ == 0) first = k;
  }
  if (!live) return MPI_SUCCESS;
  ad_real x;
  memcpy(&x, p + first * sizeof(ad_real), sizeof x);
  char tname[MPI_MAX_OBJECT_NAME] = "a passive datatype";
  int tlen = 0;
  MPI_Type_get_name(type, tname, &tlen);
  ad__fail(t, AD_ERR_MPI,
           "%s: the %s holds ad_real values (element %zu has handle %llu of this recording) but the datatype is %s, "
           "which would move their bytes, handles included, and lose their derivatives; use AD_MPI_REAL with the "
           "number of ad_real elements",
           fn, what, first, (unsigned long long)x.i, tlen > 0 ? tname : "a passive datatype");
  return MPI_ERR_TYPE;
}

int ad__mpi_guard_blocks(const char *fn, const char *what, const void *buf, int n, const int *counts, const int *displs,
                         int bytes, const MPI_Aint *adispls, const MPI_Datatype *types, MPI_Datatype type) {
  if (!buf || buf == MPI_IN_PLACE || !counts) return MPI_SUCCESS;
  int all = ad_mpi_check_enabled();
  for (int j = 0; j < n; j++) {
    if (counts[j] <= 0) continue;
    MPI_Datatype tj = types ? types[j] : type;
    MPI_Aint off = 0, lb, ext = 1;
    if (adispls) {
      off = adispls[j];
    } else if (displs) {
      if (!bytes && MPI_Type_get_extent(tj, &lb, &ext) != MPI_SUCCESS) continue;
      off = (MPI_Aint)displs[j] * ext;
    }
    int rc = ad__mpi_guard(fn, what, (const char *)buf + off, counts[j], tj);
    /* A few elements by default: the first block in use stands for the rest. */
    if (rc != MPI_SUCCESS || !all) return rc;
  }
  return MPI_SUCCESS;
}

/* Only the rank that holds the data can see it: the root of a broadcast or
 * a scatter, or one rank of many whose buffer alone is active. A refusal on
 * that rank alone would leave the others waiting in the collective, so in
 * check mode the ranks agree first, with one small reduction; outside check
 * mode that reduction would cost every passive collective a round trip, and
 * the refusal stays on the ranks that see the data (docs/mpi.md). An
 * intercommunicator's reduction would give each group the other's verdict
 * only, so it keeps the local one. */
int ad__mpi_guard_agree(const char *fn, MPI_Comm comm, int rc) {
  if (!ad_mpi_check_enabled() || comm == MPI_COMM_NULL) return rc;
  int inter = 0;
  if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return rc;
  int mine = rc != MPI_SUCCESS, any = mine;
  if (MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return rc;
  if (mine || !any) return rc;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (seen)
    ad__fail(seen, AD_ERR_MPI,
             "%s: refused on another rank, whose send data holds ad_real values under a passive datatype; use "
             "AD_MPI_REAL there with the number of ad_real elements",
             fn);
  return MPI_ERR_TYPE;
}
