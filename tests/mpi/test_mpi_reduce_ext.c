/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI_MINLOC / MPI_MAXLOC on AD_MPI_REAL_INT pairs and user-defined
 * reductions (ad_mpi_op_create).
 *
 * - Values: the wrappers give what plain MPI gives with MPI_DOUBLE_INT and
 *   with the same operation on doubles.
 * - Derivatives: dot-product test and central finite differences of the
 *   whole parallel program; closed forms where the owner of an extremum is
 *   known (ties: the lowest index, then the lowest rank holding the pair).
 *
 * The same file is compiled with ARIADNE_PASSIVE: every wrapper is its MPI
 * twin, AD_MPI_REAL_INT is MPI_DOUBLE_INT, ad_mpi_op_create is
 * MPI_Op_create, and the operations below are the same source on doubles. */
#include "mtest.h"

#define N 3

/* Operations on ad_real (double in the passive build), written once as
 * MPI_User_function. */

/* The Euclidean norm of the contributions: sqrt(a^2 + b^2). */
static void norm_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  ad_real *a = in, *b = inout;
  for (int i = 0; i < *len; i++) b[i] = ad_sqrt(ad_add(ad_mul(a[i], a[i]), ad_mul(b[i], b[i])));
}

/* 2x2 matrix products, row-major, on items of MAT (four reals):
 * associative, not commutative. */
static void matmul_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  ad_real *a = in, *b = inout;
  for (int k = 0; k < *len; k++, a += 4, b += 4) {
    ad_real c0 = ad_add(ad_mul(a[0], b[0]), ad_mul(a[1], b[2]));
    ad_real c1 = ad_add(ad_mul(a[0], b[1]), ad_mul(a[1], b[3]));
    ad_real c2 = ad_add(ad_mul(a[2], b[0]), ad_mul(a[3], b[2]));
    ad_real c3 = ad_add(ad_mul(a[2], b[1]), ad_mul(a[3], b[3]));
    b[0] = c0;
    b[1] = c1;
    b[2] = c2;
    b[3] = c3;
  }
}

/* The same on doubles, for plain MPI. */
static void norm_d(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  double *a = in, *b = inout;
  for (int i = 0; i < *len; i++) b[i] = sqrt(a[i] * a[i] + b[i] * b[i]);
}
static void matmul_d(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  double *a = in, *b = inout;
  for (int k = 0; k < *len; k++, a += 4, b += 4) {
    double c0 = a[0] * b[0] + a[1] * b[2], c1 = a[0] * b[1] + a[1] * b[3];
    double c2 = a[2] * b[0] + a[3] * b[2], c3 = a[2] * b[1] + a[3] * b[3];
    b[0] = c0;
    b[1] = c1;
    b[2] = c2;
    b[3] = c3;
  }
}

static MPI_Op norm_op, matmul_op, pnorm_op, pmatmul_op;
static MPI_Datatype mat, pmat; /* four reals, on AD_MPI_REAL and on MPI_DOUBLE */

static int close_to(double a, double b) { return fabs(a - b) <= 1e-13 * (1.0 + fabs(a) + fabs(b)); }

/* ------------------------------------------------------------------------ */
/* Values against plain MPI                                                   */
/* ------------------------------------------------------------------------ */

/* The reductions without a root that share MPI's signature (kinds 1 to 4 of
 * the user-operation cases), each wrapper with the plain call it must agree
 * with. */
typedef int (*reduction_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
static const struct {
  reduction_fn ad, plain;
} rootless[] = {
    {ad_mpi_allreduce, MPI_Allreduce},
    {ad_mpi_scan, MPI_Scan},
    {ad_mpi_exscan, MPI_Exscan},
    {ad_mpi_reduce_scatter_block, MPI_Reduce_scatter_block},
};

static void check_values(void) {
  MPI_Comm w = MPI_COMM_WORLD;
  int me = mt_rank, p = mt_size;
  /* MAXLOC / MINLOC with a tie on the value between ranks 0 and 1 */
  ad_real_int s[N], r[N];
  struct {
    double v;
    int i;
  } ps[N], pr[N];
  for (int k = 0; k < N; k++) {
    double v = k == 0 ? 1.5 : sin(1.0 + me * 0.7 + k);
    s[k].value = ad_const(v);
    s[k].index = 100 - me;
    ps[k].v = v;
    ps[k].i = 100 - me;
  }
  MPI_Op lops[2] = {MPI_MAXLOC, MPI_MINLOC};
  for (int o = 0; o < 2; o++) {
    MT_CHECK(ad_mpi_allreduce(s, r, N, AD_MPI_REAL_INT, lops[o], w) == MPI_SUCCESS);
    MPI_Allreduce(ps, pr, N, MPI_DOUBLE_INT, lops[o], w);
    for (int k = 0; k < N; k++) MT_CHECK(ad_value(r[k].value) == pr[k].v && r[k].index == pr[k].i);
    for (int k = 0; k < N; k++) r[k] = s[k];
    MT_CHECK(ad_mpi_reduce(me == p - 1 ? MPI_IN_PLACE : (void *)s, r, N, AD_MPI_REAL_INT, lops[o], p - 1, w) ==
             MPI_SUCCESS);
    MPI_Reduce(ps, pr, N, MPI_DOUBLE_INT, lops[o], p - 1, w);
    if (me == p - 1)
      for (int k = 0; k < N; k++) MT_CHECK(ad_value(r[k].value) == pr[k].v && r[k].index == pr[k].i);
  }
  /* user-defined operations */
  ad_real a[4 * N * 8], b[4 * N * 8];
  double pa[4 * N * 8], pb[4 * N * 8];
  for (int i = 0; i < 4 * N * p; i++) {
    pa[i] = 0.5 + 0.3 * sin(1.0 + i + 3.0 * me);
    a[i] = ad_const(pa[i]);
  }
  int rcnts[8];
  for (int j = 0; j < p; j++) rcnts[j] = 1 + j % 2;
  for (int kind = 0; kind < 6; kind++)
    for (int m = 0; m < 2; m++) {
      MPI_Op op = m ? matmul_op : norm_op, pop = m ? pmatmul_op : pnorm_op;
      MPI_Datatype t = m ? mat : AD_MPI_REAL, pt = m ? pmat : MPI_DOUBLE;
      int cnt = m ? N : 4 * N, rc = -1;
      for (int i = 0; i < 4 * N * p; i++) {
        b[i] = ad_const(-1.0);
        pb[i] = -1.0;
      }
      if (kind == 0) {
        rc = ad_mpi_reduce(a, b, cnt, t, op, 0, w);
        MPI_Reduce(pa, pb, cnt, pt, pop, 0, w);
      } else if (kind < 5) {
        rc = rootless[kind - 1].ad(a, b, cnt, t, op, w);
        rootless[kind - 1].plain(pa, pb, cnt, pt, pop, w);
      } else { /* items of 4 reals (m = 1) or single reals */
        rc = ad_mpi_reduce_scatter(a, b, rcnts, t, op, w);
        MPI_Reduce_scatter(pa, pb, rcnts, pt, pop, w);
      }
      MT_CHECK(rc == MPI_SUCCESS);
      if (kind < 5) { /* the nonblocking twin gives the same values */
        static ad_real nb[4 * N * 8];
        ad_mpi_request q = AD_MPI_REQUEST_NULL;
        for (int i = 0; i < 4 * N * p; i++) nb[i] = ad_const(-1.0);
        rc = kind == 0   ? ad_mpi_ireduce(a, nb, cnt, t, op, 0, w, &q)
             : kind == 1 ? ad_mpi_iallreduce(a, nb, cnt, t, op, w, &q)
             : kind == 2 ? ad_mpi_iscan(a, nb, cnt, t, op, w, &q)
             : kind == 3 ? ad_mpi_iexscan(a, nb, cnt, t, op, w, &q)
                         : ad_mpi_ireduce_scatter_block(a, nb, cnt, t, op, w, &q);
        MT_CHECK(rc == MPI_SUCCESS);
        MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        int g = kind == 0 ? me == 0 : kind == 3 ? me > 0 : 1;
        for (int i = 0; g && i < 4 * N; i++)
          if (!close_to(ad_value(nb[i]), ad_value(b[i]))) {
            fprintf(stderr, "[%d] nonblocking user op %d kind %d element %d differs\n", me, m, kind, i);
            mt_errors++;
            break;
          }
      }
      int gets = kind == 0 ? me == 0 : kind == 3 ? me > 0 : 1;
      int nb = kind == 5 ? rcnts[me] * (m ? 4 : 1) : 4 * N;
      for (int i = 0; gets && i < nb; i++)
        if (!close_to(ad_value(b[i]), pb[i])) {
          fprintf(stderr, "[%d] user op %d kind %d element %d: %.17g vs MPI %.17g\n", me, m, kind, i, ad_value(b[i]),
                  pb[i]);
          mt_errors++;
          break;
        }
    }
}

#ifndef ARIADNE_PASSIVE

/* ------------------------------------------------------------------------ */
/* Derivatives                                                               */
/* ------------------------------------------------------------------------ */

/* The global maximum and where it is: each rank holds N values; the
 * maximum of each column over the ranks and its (rank, k) location, by
 * allreduce MAXLOC; then MINLOC reduced to the last rank, in place there. */
static void maxloc_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  ad_real_int s[N], r[N], q[N];
  for (int k = 0; k < N; k++) {
    s[k].value = ad_mul(ad_sin(ad_add(x[k], 0.37 * mt_rank)), x[k]);
    s[k].index = mt_rank * N + k;
  }
  ad_mpi_allreduce(s, r, N, AD_MPI_REAL_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  for (int k = 0; k < N; k++) q[k] = s[k];
  int root = mt_size - 1;
  ad_mpi_reduce(mt_rank == root ? MPI_IN_PLACE : (void *)q, q, N, AD_MPI_REAL_INT, MPI_MINLOC, root, MPI_COMM_WORLD);
  for (int k = 0; k < N; k++) {
    /* the maximum is replicated: weight one copy (rank 0's) */
    y[k] = mt_rank == 0 ? ad_mul(r[k].value, 1.0 + r[k].index) : ad_const(0.0);
    if (mt_rank == root) y[k] = ad_add(y[k], ad_mul(q[k].value, q[k].value));
  }
}

/* A user-defined reduction (the norm) in every collective, and the
 * non-commutative matrix product on a derived type, in reduce, allreduce,
 * scan, exscan, reduce_scatter_block and reduce_scatter. */
static void userop_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int kind = *(int *)ctx, me = mt_rank, p = mt_size;
  ad_real a[4 * N * 8], b[4 * N * 8], c[4 * N * 8];
  for (int i = 0; i < 4 * N * p; i++) {
    a[i] = ad_add(ad_mul(x[i % (4 * N)], 0.3), 0.5 + 0.01 * i);
    b[i] = c[i] = ad_const(1.0);
  }
  MPI_Comm w = MPI_COMM_WORLD;
  switch (kind) {
  case 0:
    ad_mpi_reduce(a, b, 4 * N, AD_MPI_REAL, norm_op, 0, w);
    ad_mpi_reduce(me == 0 ? MPI_IN_PLACE : (void *)a, me == 0 ? a : NULL, N, mat, matmul_op, 0, w);
    if (me == 0)
      for (int i = 0; i < 4 * N; i++) c[i] = a[i];
    break;
  case 1:
    ad_mpi_allreduce(a, b, 4 * N, AD_MPI_REAL, norm_op, w);
    ad_mpi_allreduce(MPI_IN_PLACE, a, N, mat, matmul_op, w);
    for (int i = 0; i < 4 * N; i++) c[i] = me == 0 ? a[i] : ad_const(0.0); /* replicated: one copy */
    if (me != 0)
      for (int i = 0; i < 4 * N; i++) b[i] = ad_const(0.0);
    break;
  case 2:
    ad_mpi_scan(a, b, 4 * N, AD_MPI_REAL, norm_op, w);
    ad_mpi_scan(a, c, N, mat, matmul_op, w);
    break;
  case 3:
    ad_mpi_exscan(a, b, 4 * N, AD_MPI_REAL, norm_op, w);
    ad_mpi_exscan(a, c, N, mat, matmul_op, w);
    break;
  case 6: { /* nonblocking: iallreduce (norm) and iscan (matrix product) completed together */
    ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
    ad_mpi_iallreduce(a, b, 4 * N, AD_MPI_REAL, norm_op, w, &q[0]);
    ad_mpi_iscan(a, c, N, mat, matmul_op, w, &q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    if (me != 0)
      for (int i = 0; i < 4 * N; i++) b[i] = ad_const(0.0); /* replicated: one copy */
    break;
  }
  case 5: {
    int rc5[8];
    for (int j = 0; j < p; j++) rc5[j] = 4 * N - j % 2; /* uneven blocks */
    ad_mpi_reduce_scatter(a, b, rc5, AD_MPI_REAL, norm_op, w);
    for (int j = 0; j < p; j++) rc5[j] = N - j % 2;
    ad_mpi_reduce_scatter(MPI_IN_PLACE, a, rc5, mat, matmul_op, w);
    for (int i = 0; i < 4 * rc5[me]; i++) c[i] = a[i];
    break;
  }
  default:
    ad_mpi_reduce_scatter_block(a, b, 4 * N, AD_MPI_REAL, norm_op, w);
    ad_mpi_reduce_scatter_block(MPI_IN_PLACE, a, N, mat, matmul_op, w);
    for (int i = 0; i < 4 * N; i++) c[i] = a[i];
    break;
  }
  for (int i = 0; i < 4 * N; i++) y[i] = ad_add(ad_mul(b[i], 1.0 + 0.1 * i), ad_mul(c[i], c[i]));
}

/* Closed forms: a tie on the value goes to the lowest index, and among
 * ranks holding the same pair to the lowest rank. */
static void test_owner(void) {
  for (int tie = 0; tie < 2; tie++) {
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(2.0); /* the same value on every rank */
    ad_real_int s, r;
    s.value = ad_mul(x, x);
    s.index = tie ? 7 : 10 - mt_rank; /* tie 1: the same pair everywhere */
    ad_mpi_allreduce(&s, &r, 1, AD_MPI_REAL_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    ad_real y = mt_rank == 0 ? r.value : ad_const(ad_value(r.value));
    ad_tape_end(t);
    MT_CHECK(r.index == (tie ? 7 : 10 - (mt_size - 1)));
    double g = -1;
    MT_CHECK(ad_gradient(t, y, 1, &x, &g) == AD_OK);
    int owner = tie ? 0 : mt_size - 1;
    MT_CHECK(g == (mt_rank == owner ? 4.0 : 0.0));
    ad_tape_destroy(t);
  }
}

/* Operations other than MINLOC/MAXLOC on AD_MPI_REAL_INT are refused. */
static void test_refused(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real_int s = {ad_input(1.0), 0}, r;
  int cls = -1;
  MPI_Error_class(ad_mpi_allreduce(&s, &r, 1, AD_MPI_REAL_INT, MPI_SUM, MPI_COMM_WORLD), &cls);
  MT_CHECK(cls == MPI_ERR_OP);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI && strstr(ad_tape_error_message(t), "ad_mpi_allreduce"));
  ad_tape_end(t);
  ad_tape_destroy(t);
}

#endif /* ARIADNE_PASSIVE */

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  MPI_Type_contiguous(4, AD_MPI_REAL, &mat);
  MPI_Type_commit(&mat);
  MPI_Type_contiguous(4, MPI_DOUBLE, &pmat);
  MPI_Type_commit(&pmat);
  MT_CHECK(ad_mpi_op_create(norm_fn, 1, &norm_op) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_op_create(matmul_fn, 0, &matmul_op) == MPI_SUCCESS);
  MPI_Op_create(norm_d, 1, &pnorm_op);
  MPI_Op_create(matmul_d, 0, &pmatmul_op);
  check_values();
#ifndef ARIADNE_PASSIVE
  mt_check_prog("maxloc", maxloc_prog, N, N, NULL, 1e-6);
  static const char *const names[] = {
      "user op reduce",        "user op allreduce", "user op scan", "user op exscan", "user op reduce_scatter_block",
      "user op reduce_scatter"};
  for (int k = 0; k < 6; k++) {
    if (k == 3 && mt_size == 1) continue; /* an exscan on one rank computes nothing */
    mt_check_prog(names[k], userop_prog, 4 * N, 4 * N, &k, 1e-6);
  }
  test_owner();
  test_refused();
#endif
  ad_mpi_op_free(&norm_op);
  ad_mpi_op_free(&matmul_op);
  MPI_Op_free(&pnorm_op);
  MPI_Op_free(&pmatmul_op);
  MPI_Type_free(&mat);
  MPI_Type_free(&pmat);
  return mt_finalize();
}
