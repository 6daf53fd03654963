/* SPDX-License-Identifier: BSD-3-Clause */
/* Derived datatypes of active values: types built on AD_MPI_REAL with every
 * supported constructor (nested too) in every blocking wrapper.
 *
 * - Values: each wrapper on ad_real buffers with the type built on
 *   AD_MPI_REAL gives the values plain MPI gives on double buffers with the
 *   same type built on MPI_DOUBLE, and leaves the gaps of the layout alone.
 * - Derivatives: a column halo exchange on a 2-D grid (MPI_Type_vector) and
 *   a chain of collectives on each type, by the dot-product test and central
 *   finite differences of the whole parallel program.
 * - Refusals: a type Ariadne does not handle is refused with MPI_ERR_TYPE and
 *   a sticky error naming the call.
 *
 * The same file is compiled with ARIADNE_PASSIVE: then every wrapper is its
 * MPI twin, and the value comparison runs against plain MPI. */
#include "mtest.h"

#define NKINDS 14
#define BUF 512

/* Type `kind`, built on `base` whose elements take esz bytes in memory. */
static MPI_Datatype make(int kind, MPI_Datatype base, MPI_Aint esz) {
  MPI_Datatype t = MPI_DATATYPE_NULL, in = MPI_DATATYPE_NULL;
  switch (kind) {
  case 0:
    MPI_Type_contiguous(3, base, &t);
    break;
  case 1:
    MPI_Type_vector(3, 1, 2, base, &t);
    break;
  case 2: /* nested: a vector of contiguous pairs */
    MPI_Type_contiguous(2, base, &in);
    MPI_Type_vector(2, 1, 2, in, &t);
    break;
  case 3:
    MPI_Type_create_hvector(2, 2, 3 * esz, base, &t);
    break;
  case 4: {
    int bl[2] = {2, 1}, d[2] = {3, 0}; /* out of order */
    MPI_Type_indexed(2, bl, d, base, &t);
    break;
  }
  case 5: {
    int d[3] = {4, 0, 2};
    MPI_Type_create_indexed_block(3, 1, d, base, &t);
    break;
  }
  case 6: {
    int bl[2] = {1, 2};
    MPI_Aint d[2] = {5 * esz, esz};
    MPI_Type_create_hindexed(2, bl, d, base, &t);
    break;
  }
  case 7:
  case 8: {
    int sizes[2] = {3, 4}, sub[2] = {2, 2}, start[2] = {1, 1};
    MPI_Type_create_subarray(2, sizes, sub, start, kind == 7 ? MPI_ORDER_C : MPI_ORDER_FORTRAN, base, &t);
    break;
  }
  case 9: /* resized: items interleave (0 3, 2 5, 4 7, ...) */
    MPI_Type_vector(2, 1, 3, base, &in);
    MPI_Type_create_resized(in, 0, 2 * esz, &t);
    break;
  case 10: { /* a struct of active values only, one member a derived type */
    MPI_Type_vector(2, 1, 2, base, &in);
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {0, 2 * esz};
    MPI_Datatype ty[2] = {base, in};
    MPI_Type_create_struct(2, bl, d, ty, &t);
    break;
  }
  case 12: { /* a duplicate of an indexed type */
    int bl[2] = {1, 2}, d[2] = {4, 1};
    MPI_Type_indexed(2, bl, d, base, &in);
    MPI_Type_dup(in, &t);
    break;
  }
  case 13: {
    MPI_Aint d[3] = {4 * esz, 0, 7 * esz};
    MPI_Type_create_hindexed_block(3, 1, d, base, &t);
    break;
  }
  default: { /* resized subarray of a hvector: three levels */
    MPI_Datatype h;
    MPI_Type_create_hvector(2, 1, 2 * esz, base, &h);
    int sizes[1] = {3}, sub[1] = {2}, start[1] = {1};
    MPI_Type_create_subarray(1, sizes, sub, start, MPI_ORDER_C, h, &in);
    MPI_Type_free(&h);
    MPI_Type_create_resized(in, 0, 7 * esz, &t);
    break;
  }
  }
  if (in != MPI_DATATYPE_NULL) MPI_Type_free(&in);
  MPI_Type_commit(&t);
  return t;
}

/* ------------------------------------------------------------------------ */
/* Values against plain MPI                                                   */
/* ------------------------------------------------------------------------ */

static ad_real a[BUF], b[BUF];
static double pa[BUF], pb[BUF];

static void fill(void) {
  for (int i = 0; i < BUF; i++) {
    pa[i] = 1.0 + 0.01 * i + mt_rank;
    pb[i] = -1.0 - 0.5 * i;
    a[i] = ad_const(pa[i]);
    b[i] = ad_const(pb[i]);
  }
}

static int same(const ad_real *x, const double *y, int n) {
  for (int i = 0; i < n; i++)
    if (ad_value(x[i]) != y[i]) {
      if (getenv("MT_VERBOSE"))
        fprintf(stderr, "[%d] element %d: %.17g vs MPI %.17g\n", mt_rank, i, ad_value(x[i]), y[i]);
      return 0;
    }
  return 1;
}

static void check_values(int kind) {
  MPI_Datatype t = make(kind, AD_MPI_REAL, (MPI_Aint)sizeof(ad_real)), pt = make(kind, MPI_DOUBLE, sizeof(double));
  MPI_Comm w = MPI_COMM_WORLD;
  int p = mt_size, me = mt_rank, right = (me + 1) % p, left = (me + p - 1) % p;
  int before = mt_errors;
  MPI_Status st, pst;
  fill();
  MT_CHECK(ad_mpi_sendrecv(a, 2, t, right, 1, b, 2, t, left, 1, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(pa, 2, pt, right, 1, pb, 2, pt, left, 1, w, &pst);
  MT_CHECK(same(b, pb, BUF));
  int n1 = -1, n2 = -2;
  MPI_Get_count(&st, t, &n1);
  MPI_Get_count(&pst, pt, &n2);
  MT_CHECK(n1 == 2 && n2 == 2);
  /* a type on one side, AD_MPI_REAL on the other: only signatures match */
  int te;
  MPI_Type_size(pt, &te);
  te /= (int)sizeof(double);
  fill();
  MT_CHECK(ad_mpi_sendrecv(a, 2, t, right, 2, b, 2 * te, AD_MPI_REAL, left, 2, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(pa, 2, pt, right, 2, pb, 2 * te, MPI_DOUBLE, left, 2, w, &pst);
  MT_CHECK(same(b, pb, BUF));
  fill();
  MT_CHECK(ad_mpi_sendrecv(a, 2 * te, AD_MPI_REAL, right, 3, b, 2, t, left, 3, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(pa, 2 * te, MPI_DOUBLE, right, 3, pb, 2, pt, left, 3, w, &pst);
  MT_CHECK(same(b, pb, BUF));
  /* a shorter message than the receive: one item and a half */
  fill();
  MT_CHECK(ad_mpi_sendrecv(a, te + 1, AD_MPI_REAL, right, 4, b, 2, t, left, 4, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(pa, te + 1, MPI_DOUBLE, right, 4, pb, 2, pt, left, 4, w, &pst);
  MT_CHECK(same(b, pb, BUF));
  MPI_Get_elements(&st, t, &n1);
  MT_CHECK(n1 == te + 1);
  fill();
  MT_CHECK(ad_mpi_sendrecv_replace(a, 2, t, right, 5, left, 5, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv_replace(pa, 2, pt, right, 5, left, 5, w, &pst);
  MT_CHECK(same(a, pa, BUF));
  fill();
  {
    ad_mpi_request q = AD_MPI_REQUEST_NULL;
    MPI_Request pq;
    MT_CHECK(ad_mpi_isend(a, 2, t, right, 6, w, &q) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_recv(b, 2, t, left, 6, w, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MPI_Isend(pa, 2, pt, right, 6, w, &pq);
    MPI_Recv(pb, 2, pt, left, 6, w, MPI_STATUS_IGNORE);
    MPI_Wait(&pq, MPI_STATUS_IGNORE);
    MT_CHECK(same(b, pb, BUF));
  }
  fill();
  { /* irecv completed by waitall, and by test */
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    MPI_Request pq[2];
    MPI_Status sts[2];
    MT_CHECK(ad_mpi_irecv(b, 2, t, MPI_ANY_SOURCE, 7, w, &q[0]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_isend(a, 2, t, right, 7, w, &q[1]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_waitall(2, q, sts) == MPI_SUCCESS);
    MPI_Get_count(&sts[0], t, &n1);
    MT_CHECK(n1 == 2 && sts[0].MPI_SOURCE == left);
    MPI_Irecv(pb, 2, pt, MPI_ANY_SOURCE, 7, w, &pq[0]);
    MPI_Isend(pa, 2, pt, right, 7, w, &pq[1]);
    MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
    MT_CHECK(same(b, pb, BUF));
  }
  fill();
  MT_CHECK(ad_mpi_bcast(a, 2, t, p - 1, w) == MPI_SUCCESS);
  MPI_Bcast(pa, 2, pt, p - 1, w);
  MT_CHECK(same(a, pa, BUF));
  /* Predefined operations on a derived type: MPI refuses them (MPI_ERR_OP),
   * and so do the wrappers, whatever the build. */
  {
    int cls = -1, pcls = -2;
    fill();
    MPI_Error_class(ad_mpi_allreduce(a, b, 2, t, MPI_SUM, w), &cls);
    MPI_Error_class(MPI_Allreduce(pa, pb, 2, pt, MPI_SUM, w), &pcls);
    MT_CHECK(cls == MPI_ERR_OP && pcls == MPI_ERR_OP);
    MT_CHECK(same(b, pb, BUF));
    MPI_Error_class(ad_mpi_scan(a, b, 2, t, MPI_SUM, w), &cls);
    MT_CHECK(cls == MPI_ERR_OP);
    MPI_Error_class(ad_mpi_reduce_scatter_block(a, b, 1, t, MPI_MAX, w), &cls);
    MT_CHECK(cls == MPI_ERR_OP);
  }
  fill();
  MT_CHECK(ad_mpi_gather(a, 1, t, b, 1, t, 0, w) == MPI_SUCCESS);
  MPI_Gather(pa, 1, pt, pb, 1, pt, 0, w);
  MT_CHECK(same(b, pb, BUF));
  fill();
  MT_CHECK(ad_mpi_scatter(a, 1, t, b, 1, t, p - 1, w) == MPI_SUCCESS);
  MPI_Scatter(pa, 1, pt, pb, 1, pt, p - 1, w);
  MT_CHECK(same(b, pb, BUF));
  fill();
  MT_CHECK(ad_mpi_allgather(MPI_IN_PLACE, 0, t, a, 1, t, w) == MPI_SUCCESS);
  MPI_Allgather(MPI_IN_PLACE, 0, pt, pa, 1, pt, w);
  MT_CHECK(same(a, pa, BUF));
  fill();
  MT_CHECK(ad_mpi_alltoall(a, 1, t, b, te, AD_MPI_REAL, w) == MPI_SUCCESS);
  MPI_Alltoall(pa, 1, pt, pb, te, MPI_DOUBLE, w);
  MT_CHECK(same(b, pb, BUF));
  {
    int cnt[8], dsp[8], at = 0;
    for (int j = 0; j < p; j++) {
      cnt[j] = 1 + j % 2;
      dsp[j] = at + 1; /* a gap of one item before each slot */
      at += cnt[j] + 1;
    }
    fill();
    MT_CHECK(ad_mpi_gatherv(a, cnt[me], t, b, cnt, dsp, t, p - 1, w) == MPI_SUCCESS);
    MPI_Gatherv(pa, cnt[me], pt, pb, cnt, dsp, pt, p - 1, w);
    MT_CHECK(same(b, pb, BUF));
    fill();
    MT_CHECK(ad_mpi_scatterv(a, cnt, dsp, t, b, cnt[me], t, 0, w) == MPI_SUCCESS);
    MPI_Scatterv(pa, cnt, dsp, pt, pb, cnt[me], pt, 0, w);
    MT_CHECK(same(b, pb, BUF));
    fill();
    MT_CHECK(ad_mpi_allgatherv(a, cnt[me], t, b, cnt, dsp, t, w) == MPI_SUCCESS);
    { /* Plain MPI in place: some MPI libraries (MPICH 4.0) put a separate
       * contribution at displacement 0 on a one-rank communicator. */
      MPI_Aint lb, ext;
      MPI_Type_get_extent(pt, &lb, &ext);
      MPI_Sendrecv(pa, cnt[me], pt, 0, 9, (char *)pb + dsp[me] * ext, cnt[me], pt, 0, 9, MPI_COMM_SELF,
                   MPI_STATUS_IGNORE);
      MPI_Allgatherv(MPI_IN_PLACE, cnt[me], pt, pb, cnt, dsp, pt, w);
    }
#ifdef ARIADNE_PASSIVE
    if (p > 1) /* the wrapper is MPI_Allgatherv itself, with that behaviour */
#endif
      MT_CHECK(same(b, pb, BUF));
    int sc[8], sd[8];
    at = 0;
    for (int j = 0; j < p; j++) { /* symmetric counts: what me sends j, j expects from me */
      sc[j] = 1 + (me + j) % 2;
      sd[j] = at;
      at += sc[j] + 1;
    }
    fill();
    MT_CHECK(ad_mpi_alltoallv(a, sc, sd, t, b, sc, sd, t, w) == MPI_SUCCESS);
    MPI_Alltoallv(pa, sc, sd, pt, pb, sc, sd, pt, w);
    MT_CHECK(same(b, pb, BUF));
  }
  { /* nonblocking collectives, completed together */
    ad_mpi_request q[5];
    for (int i = 0; i < 5; i++) q[i] = (ad_mpi_request)AD_MPI_REQUEST_NULL;
    static ad_real c[BUF], d[BUF], e[BUF], f[BUF];
    static double pc[BUF], pd[BUF], pe[BUF], pf[BUF];
    fill();
    for (int i = 0; i < BUF; i++) {
      c[i] = d[i] = e[i] = f[i] = ad_const(-3.0);
      pc[i] = pd[i] = pe[i] = pf[i] = -3.0;
    }
    int cnt[8], dsp[8];
    for (int j = 0; j < p; j++) {
      cnt[j] = 1 + j % 2;
      dsp[j] = 4 * j + 1;
    }
    MT_CHECK(ad_mpi_ibcast(a, 2, t, 0, w, &q[0]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_igather(b, 1, t, c, 1, t, p - 1, w, &q[1]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_iscatterv(b, cnt, dsp, t, d, cnt[me], t, 0, w, &q[2]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_iallgather(b, 1, t, e, 1, t, w, &q[3]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_ialltoall(b, 1, t, f, te, AD_MPI_REAL, w, &q[4]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_waitall(5, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    MPI_Bcast(pa, 2, pt, 0, w);
    MPI_Gather(pb, 1, pt, pc, 1, pt, p - 1, w);
    MPI_Scatterv(pb, cnt, dsp, pt, pd, cnt[me], pt, 0, w);
    MPI_Allgather(pb, 1, pt, pe, 1, pt, w);
    MPI_Alltoall(pb, 1, pt, pf, te, MPI_DOUBLE, w);
    MT_CHECK(same(a, pa, BUF));
    MT_CHECK(same(c, pc, BUF));
    MT_CHECK(same(d, pd, BUF));
    MT_CHECK(same(e, pe, BUF));
    MT_CHECK(same(f, pf, BUF));
  }
  if (mt_errors > before) fprintf(stderr, "[%d] values of type kind %d: FAILED\n", mt_rank, kind);
  MPI_Type_free(&t);
  MPI_Type_free(&pt);
}

/* ------------------------------------------------------------------------ */
/* A struct mixing active and passive fields                                 */
/* ------------------------------------------------------------------------ */

/* The port of struct { double x; int id; double y[2]; double w; } with w
 * passive data: x and y are active, id and w travel as they are. */
typedef struct particle {
  ad_real x;
  int id;
  ad_real y[2];
  double w;
} particle;
typedef struct pparticle {
  double x;
  int id;
  double y[2];
  double w;
} pparticle;

static MPI_Datatype particle_type(int active) {
  int bl[4] = {1, 1, 2, 1};
  MPI_Aint d[4];
  MPI_Datatype ty[4] = {active ? AD_MPI_REAL : MPI_DOUBLE, MPI_INT, active ? AD_MPI_REAL : MPI_DOUBLE, MPI_DOUBLE}, s,
               t;
  if (active) {
    d[0] = offsetof(particle, x);
    d[1] = offsetof(particle, id);
    d[2] = offsetof(particle, y);
    d[3] = offsetof(particle, w);
  } else {
    d[0] = offsetof(pparticle, x);
    d[1] = offsetof(pparticle, id);
    d[2] = offsetof(pparticle, y);
    d[3] = offsetof(pparticle, w);
  }
  MPI_Type_create_struct(4, bl, d, ty, &s);
  MPI_Type_create_resized(s, 0, active ? (MPI_Aint)sizeof(particle) : (MPI_Aint)sizeof(pparticle), &t);
  MPI_Type_free(&s);
  MPI_Type_commit(&t);
  return t;
}

#define NP 3
static particle pa_[NP], pb_[NP];
static pparticle qa[NP], qb[NP];

static void pfill(void) {
  for (int i = 0; i < NP; i++) {
    qa[i].x = 1.0 + i + 10 * mt_rank;
    qa[i].id = 100 * mt_rank + i;
    qa[i].y[0] = 0.5 * i;
    qa[i].y[1] = -0.25 * i - mt_rank;
    qa[i].w = 3.0 + i + mt_rank;
    qb[i].x = qb[i].y[0] = qb[i].y[1] = qb[i].w = -7.0;
    qb[i].id = -7;
    pa_[i].x = ad_const(qa[i].x);
    pa_[i].id = qa[i].id;
    pa_[i].y[0] = ad_const(qa[i].y[0]);
    pa_[i].y[1] = ad_const(qa[i].y[1]);
    pa_[i].w = qa[i].w;
    pb_[i].x = pb_[i].y[0] = pb_[i].y[1] = ad_const(-7.0);
    pb_[i].w = -7.0;
    pb_[i].id = -7;
  }
}

static int psame(const particle *a, const pparticle *b) {
  for (int i = 0; i < NP; i++)
    if (ad_value(a[i].x) != b[i].x || a[i].id != b[i].id || ad_value(a[i].y[0]) != b[i].y[0] ||
        ad_value(a[i].y[1]) != b[i].y[1] || a[i].w != b[i].w)
      return 0;
  return 1;
}

static void check_struct_values(void) {
  MPI_Datatype t = particle_type(1), pt = particle_type(0);
  MPI_Comm w = MPI_COMM_WORLD;
  int p = mt_size, me = mt_rank, right = (me + 1) % p, left = (me + p - 1) % p, partner = me ^ 1;
  MPI_Status st, pst;
  pfill();
  MT_CHECK(ad_mpi_sendrecv(pa_, NP, t, right, 1, pb_, NP, t, left, 1, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(qa, NP, pt, right, 1, qb, NP, pt, left, 1, w, &pst);
  MT_CHECK(psame(pb_, qb));
  int n1 = -1, n2 = -2;
  MPI_Get_count(&st, t, &n1);
  MPI_Get_count(&pst, pt, &n2);
  MT_CHECK(n1 == NP && n2 == NP);
  pfill(); /* fewer items than the receive can hold, from any source */
  MT_CHECK(ad_mpi_sendrecv(pa_, NP - 1, t, right, 2, pb_, NP, t, MPI_ANY_SOURCE, 2, w, &st) == MPI_SUCCESS);
  MPI_Sendrecv(qa, NP - 1, pt, right, 2, qb, NP, pt, MPI_ANY_SOURCE, 2, w, &pst);
  MT_CHECK(psame(pb_, qb));
  MPI_Get_count(&st, t, &n1);
  MT_CHECK(n1 == NP - 1 && st.MPI_SOURCE == left);
  pfill();
  MT_CHECK(ad_mpi_sendrecv_replace(pa_, NP, t, right, 3, left, 3, w, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MPI_Sendrecv_replace(qa, NP, pt, right, 3, left, 3, w, MPI_STATUS_IGNORE);
  MT_CHECK(psame(pa_, qa));
  pfill();
  MT_CHECK(ad_mpi_bcast(pa_, NP, t, p - 1, w) == MPI_SUCCESS);
  MPI_Bcast(qa, NP, pt, p - 1, w);
  MT_CHECK(psame(pa_, qa));
  if (partner < p) { /* blocking send and receive, in parity order */
    pfill();
    if (me % 2 == 0) {
      MT_CHECK(ad_mpi_send(pa_, NP, t, partner, 4, w) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_recv(pb_, NP, t, partner, 4, w, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      MPI_Send(qa, NP, pt, partner, 4, w);
      MPI_Recv(qb, NP, pt, partner, 4, w, MPI_STATUS_IGNORE);
    } else {
      MT_CHECK(ad_mpi_recv(pb_, NP, t, partner, 4, w, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_send(pa_, NP, t, partner, 4, w) == MPI_SUCCESS);
      MPI_Recv(qb, NP, pt, partner, 4, w, MPI_STATUS_IGNORE);
      MPI_Send(qa, NP, pt, partner, 4, w);
    }
    MT_CHECK(psame(pb_, qb));
  }
  pfill();
  {
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    MPI_Request pq[2];
    MT_CHECK(ad_mpi_irecv(pb_, NP, t, left, 6, w, &q[0]) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_isend(pa_, NP, t, right, 6, w, &q[1]) == MPI_SUCCESS);
    int idx = -1;
    MT_CHECK(ad_mpi_waitany(2, q, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_waitany(2, q, &idx, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MPI_Irecv(qb, NP, pt, left, 6, w, &pq[0]);
    MPI_Isend(qa, NP, pt, right, 6, w, &pq[1]);
    MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
    MT_CHECK(psame(pb_, qb));
  }
  /* AD_MPI_REAL_INT moves like MPI_DOUBLE_INT */
  ad_real_int ri[2] = {{ad_const(1.5 + me), me}, {ad_const(-2.0), 7 * me}}, ro[2];
  struct {
    double v;
    int i;
  } pi[2] = {{1.5 + me, me}, {-2.0, 7 * me}}, po[2];
  MT_CHECK(ad_mpi_sendrecv(ri, 2, AD_MPI_REAL_INT, right, 5, ro, 2, AD_MPI_REAL_INT, left, 5, w, MPI_STATUS_IGNORE) ==
           MPI_SUCCESS);
  MPI_Sendrecv(pi, 2, MPI_DOUBLE_INT, right, 5, po, 2, MPI_DOUBLE_INT, left, 5, w, MPI_STATUS_IGNORE);
  for (int k = 0; k < 2; k++) MT_CHECK(ad_value(ro[k].value) == po[k].v && ro[k].index == po[k].i);
  MPI_Type_free(&t);
  MPI_Type_free(&pt);
}

#ifndef ARIADNE_PASSIVE

/* ------------------------------------------------------------------------ */
/* Derivatives                                                               */
/* ------------------------------------------------------------------------ */

/* A column halo exchange on a 2-D grid: each rank owns ROWS x COLS cells of
 * a grid split by columns, with a ghost column on each side (periodic over
 * the ranks); a column is one MPI_Type_vector of AD_MPI_REAL. Three steps of a
 * nonlinear stencil, the first exchanging with sendrecv, the second with
 * isend, recv and wait, the third with irecv, isend and waitall. */
#define ROWS 4
#define COLS 3
#define LD (COLS + 2)

static void exchange(ad_real *u, MPI_Datatype col, int step) {
  int p = mt_size, left = (mt_rank + p - 1) % p, right = (mt_rank + 1) % p;
  if (step == 0) {
    ad_mpi_sendrecv(u + 1, 1, col, left, 10, u + COLS + 1, 1, col, right, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ad_mpi_sendrecv(u + COLS, 1, col, right, 11, u, 1, col, left, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (step == 1) {
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_isend(u + 1, 1, col, left, 12, MPI_COMM_WORLD, &q[0]);
    ad_mpi_isend(u + COLS, 1, col, right, 13, MPI_COMM_WORLD, &q[1]);
    ad_mpi_recv(u + COLS + 1, 1, col, right, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ad_mpi_recv(u, 1, col, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
  } else { /* irecv into the ghost columns, completed by waitall */
    ad_mpi_request q[4] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_irecv(u + COLS + 1, 1, col, right, 14, MPI_COMM_WORLD, &q[0]);
    ad_mpi_irecv(u, 1, col, MPI_ANY_SOURCE, 15, MPI_COMM_WORLD, &q[1]);
    ad_mpi_isend(u + 1, 1, col, left, 14, MPI_COMM_WORLD, &q[2]);
    ad_mpi_isend(u + COLS, 1, col, right, 15, MPI_COMM_WORLD, &q[3]);
    ad_mpi_waitall(4, q, MPI_STATUSES_IGNORE);
  }
}

static void halo_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  MPI_Datatype col;
  MPI_Type_vector(ROWS, 1, LD, AD_MPI_REAL, &col);
  MPI_Type_commit(&col);
  ad_real u[ROWS * LD], v[ROWS * LD];
  for (int i = 0; i < ROWS * LD; i++) u[i] = ad_const(0.0);
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) u[r * LD + c + 1] = x[r * COLS + c];
  for (int step = 0; step < 3; step++) {
    exchange(u, col, step);
    for (int i = 0; i < ROWS * LD; i++) v[i] = u[i];
    for (int r = 0; r < ROWS; r++)
      for (int c = 1; c <= COLS; c++) {
        ad_real w = u[r * LD + c - 1], e = u[r * LD + c + 1], s = u[((r + 1) % ROWS) * LD + c];
        v[r * LD + c] = ad_add(u[r * LD + c], ad_add(ad_mul(0.3, ad_mul(w, e)), ad_mul(0.2, ad_sin(s))));
      }
    for (int i = 0; i < ROWS * LD; i++) u[i] = v[i];
  }
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) y[r * COLS + c] = u[r * LD + c + 1];
  MPI_Type_free(&col);
}

/* A chain of collectives on a derived type: sendrecv, bcast, gather,
 * scatter, alltoall, allgatherv and allreduce with a user-defined
 * operation on the derived type (it sees items of the type, as in MPI). */
#define NX 12
static ad_real c0[BUF], c1[BUF], c2[BUF];
static MPI_Op prod_op;

/* Where the elements of the current type are (indices in one item, in
 * typemap order) and its extent in elements, found with plain MPI: packing
 * one item of the same type built on MPI_DOUBLE from an array holding its
 * own indices. */
static int type_nel, type_el[64];
static long type_ext;

static void layout(int kind) {
  MPI_Datatype pt = make(kind, MPI_DOUBLE, sizeof(double));
  double idx[64], packed[64];
  for (int i = 0; i < 64; i++) idx[i] = i;
  int pos = 0, size;
  MPI_Type_size(pt, &size);
  MPI_Pack(idx, 1, pt, packed, (int)sizeof packed, &pos, MPI_COMM_SELF);
  type_nel = size / (int)sizeof(double);
  for (int j = 0; j < type_nel; j++) type_el[j] = (int)packed[j];
  MPI_Aint lb, ext;
  MPI_Type_get_extent(pt, &lb, &ext);
  type_ext = (long)(ext / (MPI_Aint)sizeof(double));
  MPI_Type_free(&pt);
}

/* The elementwise product of items of the current type, as an
 * MPI_User_function on a derived type computes it. */
static void typed_prod(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  ad_real *x = in, *y = inout;
  for (int i = 0; i < *len; i++)
    for (int j = 0; j < type_nel; j++) {
      long k = i * type_ext + type_el[j];
      y[k] = ad_mul(x[k], y[k]);
    }
}

static void coll_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int kind = *(int *)ctx, p = mt_size, me = mt_rank;
  MPI_Datatype t = make(kind, AD_MPI_REAL, (MPI_Aint)sizeof(ad_real));
  MPI_Comm w = MPI_COMM_WORLD;
  for (int i = 0; i < BUF; i++) c0[i] = c1[i] = c2[i] = ad_const(0.5);
  for (int i = 0; i < 4 * NX; i++) c0[i] = ad_mul(x[i % n], 1.0 + 0.01 * i);
  ad_mpi_sendrecv(c0, 2, t, (me + 1) % p, 1, c1, 2, t, (me + p - 1) % p, 1, w, MPI_STATUS_IGNORE);
  ad_mpi_allreduce(c1, c2, 2, t, prod_op, w);
  ad_mpi_bcast(c2, 1, t, p - 1, w);
  for (int i = 0; i < 4 * NX; i++) c1[i] = ad_add(c2[i], ad_mul(c0[i], c0[i]));
  ad_mpi_gather(c1, 1, t, c2, 1, t, 0, w);
  for (int i = 0; i < BUF; i++) c0[i] = ad_sin(c2[i]);
  ad_mpi_scatter(c0, 1, t, c1, 1, t, 0, w);
  ad_mpi_scan(MPI_IN_PLACE, c1, 2, t, prod_op, w);
  { /* nonblocking: an alltoall and an allgather completed together */
    static ad_real c3[BUF];
    for (int i = 0; i < BUF; i++) c3[i] = ad_const(0.25);
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_ialltoall(c1, 1, t, c2, 1, t, w, &q[0]);
    ad_mpi_iallgather(c1, 1, t, c3, 1, t, w, &q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 4 * NX; i++) c2[i] = ad_add(c2[i], ad_mul(c3[i], c3[i]));
  }
  ad_mpi_reduce_scatter_block(c2, c0, 1, t, prod_op, w);
  ad_mpi_allgather(c0, 1, t, c1, 1, t, w);
  for (int k = 0; k < NX; k++) y[k] = ad_add(ad_mul(c1[k], c0[k]), c2[k + NX]);
  MPI_Type_free(&t);
}

/* Particles with passive fields around a ring and broadcast: the passive
 * weight w and id scale the active coordinates after they arrive. */
static void particle_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  MPI_Datatype t = particle_type(1);
  int p = mt_size, me = mt_rank;
  particle a[NP], b[NP];
  for (int i = 0; i < NP; i++) {
    a[i].x = ad_sin(x[3 * i]);
    a[i].y[0] = ad_mul(x[3 * i + 1], x[3 * i + 2]);
    a[i].y[1] = x[3 * i + 2];
    a[i].id = me * 10 + i;
    a[i].w = 1.0 + 0.5 * me + i;
  }
  ad_mpi_sendrecv(a, NP, t, (me + 1) % p, 7, b, NP, t, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < NP; i++) {
    b[i].x = ad_mul(b[i].x, b[i].w + b[i].id);
    b[i].y[1] = ad_mul(b[i].y[1], b[i].y[0]);
  }
  ad_mpi_bcast(b, NP, t, 0, MPI_COMM_WORLD);
  { /* and back around the ring, nonblocking */
    particle c[NP];
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_irecv(c, NP, t, (me + 1) % p, 9, MPI_COMM_WORLD, &q[0]);
    ad_mpi_isend(b, NP, t, (me + p - 1) % p, 9, MPI_COMM_WORLD, &q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < NP; i++) b[i].y[0] = ad_add(b[i].y[0], ad_mul(c[i].y[0], c[i].w));
  }
  ad_mpi_sendrecv_replace(b, NP, t, (me + p - 1) % p, 8, (me + 1) % p, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < NP; i++) {
    y[3 * i] = ad_add(b[i].x, a[i].y[1]);
    y[3 * i + 1] = ad_mul(b[i].y[0], b[i].w);
    y[3 * i + 2] = ad_cos(b[i].y[1]);
  }
  MPI_Type_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Refusals                                                                  */
/* ------------------------------------------------------------------------ */

static void check_refused_as(int rc, int want, ad_tape *t, const char *call) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  MT_CHECK(cls == want);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  MT_CHECK(strstr(ad_tape_error_message(t), call) != NULL);
}

static void check_refused(int rc, ad_tape *t, const char *call) { check_refused_as(rc, MPI_ERR_TYPE, t, call); }

static void test_refused(void) {
  MPI_Datatype da;
  int gs[1] = {4 * mt_size}, distrib[1] = {MPI_DISTRIBUTE_BLOCK}, dargs[1] = {MPI_DISTRIBUTE_DFLT_DARG},
      psizes[1] = {mt_size};
  MPI_Type_create_darray(mt_size, mt_rank, 1, gs, distrib, dargs, psizes, MPI_ORDER_C, AD_MPI_REAL, &da);
  MPI_Type_commit(&da);
  ad_real u[64];
  for (int which = 0; which < 3; which++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    for (int i = 0; i < 64; i++) u[i] = ad_input(i);
    if (which == 0) {
      check_refused(ad_mpi_bcast(u, 1, da, 0, MPI_COMM_WORLD), t, "ad_mpi_bcast");
      MT_CHECK(strstr(ad_tape_error_message(t), "darray") != NULL);
    } else if (which == 2) { /* passive fields: no predefined reduction, as in MPI */
      MPI_Datatype pt = particle_type(1);
      particle q[2 * 8];
      memset(q, 0, sizeof q);
      check_refused_as(ad_mpi_allreduce(q, q + 8, 1, pt, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP, t, "ad_mpi_allreduce");
      MT_CHECK(strstr(ad_tape_error_message(t), "predefined") != NULL);
      MPI_Type_free(&pt);
    } else { /* every rank refuses before posting anything: nothing waits */
      MPI_Datatype c;
      MPI_Type_contiguous(2, AD_MPI_REAL, &c);
      MPI_Type_commit(&c);
      ad_mpi_request q = AD_MPI_REQUEST_NULL;
      /* a predefined operation on a derived type, as MPI (and the blocking reduce) */
      check_refused_as(ad_mpi_ireduce(u, u + 8, 1, c, MPI_SUM, 0, MPI_COMM_WORLD, &q), MPI_ERR_OP, t, "ad_mpi_ireduce");
      MPI_Type_free(&c);
    }
    ad_tape_end(t);
    ad_tape_destroy(t);
  }
  MPI_Type_free(&da);
}

/* Bytes: a derived type moves exactly the values the same count of
 * AD_MPI_REAL would, forward and backward. */
static void test_bytes(void) {
  MPI_Datatype v;
  MPI_Type_vector(3, 1, 4, AD_MPI_REAL, &v); /* extent 9 elements */
  MPI_Type_commit(&v);
  ad_tape *t = ad_tape_create();
  ad_real x[20], y[20];
  ad_tape_begin(t);
  for (int i = 0; i < 20; i++) {
    x[i] = ad_input(1.0 + i);
    y[i] = ad_const(0.0);
  }
  ad_mpi_stats_reset();
  int p = mt_size;
  ad_mpi_sendrecv(x, 2, v, (mt_rank + 1) % p, 3, y, 2, v, (mt_rank + p - 1) % p, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_real s = ad_const(0.0);
  for (int i = 0; i < 20; i++) s = ad_add(s, ad_mul(y[i], y[i]));
  ad_tape_end(t);
  double g[20];
  MT_CHECK(ad_gradient(t, s, 20, x, g) == AD_OK);
  ad_mpi_stats st;
  ad_mpi_stats_get(&st);
  MT_CHECK(st.forward_bytes == 6 * sizeof(double));
  MT_CHECK(st.adjoint_bytes == st.forward_bytes);
  /* s = sum of the squares of the received elements, which are the sender's
   * x at 0, 4, 8 (item 0) and 9, 13, 17 (item 1), equal on every rank */
  for (int i = 0; i < 20; i++) {
    int sent = i == 0 || i == 4 || i == 8 || i == 9 || i == 13 || i == 17;
    MT_CLOSE(g[i], sent ? 2.0 * (1.0 + i) : 0.0, 0.0);
  }
  ad_tape_destroy(t);
  MPI_Type_free(&v);
}

#endif /* ARIADNE_PASSIVE */

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  for (int k = 0; k < NKINDS; k++) check_values(k);
  check_struct_values();
#ifndef ARIADNE_PASSIVE
  mt_check_prog("halo", halo_prog, ROWS * COLS, ROWS * COLS, NULL, 1e-6);
  ad_mpi_op_create(typed_prod, 1, &prod_op);
  for (int k = 0; k < NKINDS; k++) {
    layout(k);
    char name[32];
    snprintf(name, sizeof name, "collectives kind %d", k);
    mt_check_prog(name, coll_prog, NX, NX, &k, 1e-6);
  }
  ad_mpi_op_free(&prod_op);
  mt_check_prog("particles", particle_prog, 3 * NP, 3 * NP, NULL, 1e-6);
  test_refused();
  test_bytes();
#endif
  return mt_finalize();
}
