/* SPDX-License-Identifier: BSD-3-Clause */
/* Nonblocking collectives, blocking reduce_scatter and alltoallw: each is a
 * parallel program checked by the dot-product test and by finite
 * differences of the whole program; plus programs that combine them as real
 * codes do (a pipelined CG whose dot products overlap the matrix-vector
 * product, requests completed in a different order on each rank, point-to-
 * point and collective requests in one waitall). */
#include "mtest.h"

#define N 3

static void ibcast_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int root = mt_size - 1;
  ad_real b[N];
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  for (int i = 0; i < n; i++) b[i] = ad_mul(x[i], x[i]);
  ad_mpi_ibcast(b, n, AD_MPI_REAL, root, MPI_COMM_WORLD, &q);
  ad_real local = ad_sin(x[0]); /* work while it runs */
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(b[i], ad_add(x[i], 1.0 + mt_rank)), local);
}

typedef struct redctx {
  MPI_Op op;
  int all, inplace;
} redctx;

static void ireduce_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  redctx *c = ctx;
  ad_real s[N], r[N];
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  for (int i = 0; i < n; i++) {
    s[i] = ad_sin(ad_mul(x[i], 1.0 + 0.1 * i));
    r[i] = ad_const(0.0);
  }
  if (c->inplace && c->all) {
    for (int i = 0; i < n; i++) r[i] = s[i];
    ad_mpi_iallreduce(MPI_IN_PLACE, r, n, AD_MPI_REAL, c->op, MPI_COMM_WORLD, &q);
  } else if (c->inplace && mt_rank == 0) {
    for (int i = 0; i < n; i++) r[i] = s[i];
    ad_mpi_ireduce(MPI_IN_PLACE, r, n, AD_MPI_REAL, c->op, 0, MPI_COMM_WORLD, &q);
  } else if (c->all) {
    ad_mpi_iallreduce(s, r, n, AD_MPI_REAL, c->op, MPI_COMM_WORLD, &q);
  } else {
    ad_mpi_ireduce(s, r, n, AD_MPI_REAL, c->op, 0, MPI_COMM_WORLD, &q);
  }
  int flag = 0;
  while (!flag) ad_mpi_test(&q, &flag, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], r[i]), x[i]);
}

typedef struct rsctx {
  MPI_Op op;
  int nb, counts;
} rsctx;

/* Reduce_scatter(_block), blocking or not, with uneven counts. */
static void rs_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)n;
  (void)m;
  rsctx *c = ctx;
  int p = mt_size, *cnt = malloc(sizeof(int) * (size_t)p), tot = 0;
  for (int j = 0; j < p; j++) tot += cnt[j] = c->counts ? 1 + j % 2 : 2;
  ad_real *s = calloc((size_t)tot, sizeof *s), r[2] = {ad_const(0.0), ad_const(0.0)};
  for (int k = 0; k < tot; k++) s[k] = ad_mul(x[k % N], ad_cos(ad_mul(x[(k + 1) % N], 0.3 * (k + 1))));
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  if (c->counts && c->nb)
    ad_mpi_ireduce_scatter(s, r, cnt, AD_MPI_REAL, c->op, MPI_COMM_WORLD, &q);
  else if (c->counts)
    ad_mpi_reduce_scatter(s, r, cnt, AD_MPI_REAL, c->op, MPI_COMM_WORLD);
  else if (c->nb)
    ad_mpi_ireduce_scatter_block(s, r, 2, AD_MPI_REAL, c->op, MPI_COMM_WORLD, &q);
  else
    ad_mpi_reduce_scatter_block(s, r, 2, AD_MPI_REAL, c->op, MPI_COMM_WORLD);
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  for (int i = 0; i < N; i++) y[i] = ad_add(ad_mul(r[i % cnt[mt_rank]], x[i]), x[i]);
  free(s);
  free(cnt);
}

static void iscan_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int ex = *(int *)ctx;
  ad_real s[N], r[N];
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  for (int i = 0; i < n; i++) {
    s[i] = ad_exp(ad_mul(0.5, x[i]));
    r[i] = ad_const(0.0);
  }
  if (ex)
    ad_mpi_iexscan(s, r, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q);
  else
    ad_mpi_iscan(s, r, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q);
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  if (ex && mt_rank == 0)
    for (int i = 0; i < n; i++) r[i] = ad_const(0.0);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], r[i]), x[i]);
}

/* Gather to a root, work there, scatter back; then allgather and alltoall
 * (v-variants with uneven counts and gaps when v is set), all nonblocking
 * and completed together. */
static void gsa_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int v = *(int *)ctx;
  int root = mt_size > 1 ? 1 : 0, p = mt_size;
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  int ext = 0;
  for (int j = 0; j < p; j++) {
    cnt[j] = v ? 1 + j % n : n;
    dsp[j] = ext;
    ext += cnt[j] + (v ? 1 : 0);
  }
  int mine = cnt[mt_rank];
  ad_real *all = calloc((size_t)ext + 1, sizeof *all), *ag = calloc((size_t)ext + 1, sizeof *ag);
  ad_real s[N], r[N], t[N];
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], ad_add(x[i], 0.5));
  ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
  if (v) {
    ad_mpi_igatherv(s, mine, AD_MPI_REAL, all, cnt, dsp, AD_MPI_REAL, root, MPI_COMM_WORLD, &q[0]);
    ad_mpi_iallgatherv(s, mine, AD_MPI_REAL, ag, cnt, dsp, AD_MPI_REAL, MPI_COMM_WORLD, &q[1]);
  } else {
    ad_mpi_igather(s, n, AD_MPI_REAL, all, n, AD_MPI_REAL, root, MPI_COMM_WORLD, &q[0]);
    ad_mpi_iallgather(s, n, AD_MPI_REAL, ag, n, AD_MPI_REAL, MPI_COMM_WORLD, &q[1]);
  }
  ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
  if (mt_rank == root)
    for (int j = 0; j < p; j++)
      for (int k = 0; k < cnt[j]; k++) all[dsp[j] + k] = ad_sin(all[dsp[j] + k]);
  for (int i = 0; i < n; i++) r[i] = ad_const(0.0);
  if (v)
    ad_mpi_iscatterv(all, cnt, dsp, AD_MPI_REAL, r, mine, AD_MPI_REAL, root, MPI_COMM_WORLD, &q[0]);
  else
    ad_mpi_iscatter(all, n, AD_MPI_REAL, r, n, AD_MPI_REAL, root, MPI_COMM_WORLD, &q[0]);
  /* alltoall of the allgathered values: rank j gets element j of each block */
  ad_real *sa = calloc((size_t)p + 1, sizeof *sa), *ra = calloc((size_t)p + 1, sizeof *ra);
  for (int j = 0; j < p; j++) sa[j] = ad_mul(ag[dsp[j]], 1.0 + mt_rank);
  if (v) {
    int *one = malloc(sizeof(int) * (size_t)p), *d = malloc(sizeof(int) * (size_t)p);
    for (int j = 0; j < p; j++) {
      one[j] = 1;
      d[j] = j;
    }
    ad_mpi_ialltoallv(sa, one, d, AD_MPI_REAL, ra, one, d, AD_MPI_REAL, MPI_COMM_WORLD, &q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
    free(one);
    free(d);
  } else {
    ad_mpi_ialltoall(sa, 1, AD_MPI_REAL, ra, 1, AD_MPI_REAL, MPI_COMM_WORLD, &q[1]);
    ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE);
  }
  for (int i = 0; i < n; i++) t[i] = ad_const(0.0);
  for (int j = 0; j < p; j++) t[j % n] = ad_add(t[j % n], ad_mul(ra[j], ra[j]));
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_add(ad_mul(r[i < mine ? i : 0], x[i]), t[i]), x[i]);
  free(all);
  free(ag);
  free(sa);
  free(ra);
  free(cnt);
  free(dsp);
}

/* Alltoallw, blocking and not, every type AD_MPI_REAL, byte displacements. */
static void alltoallw_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int nb = *(int *)ctx, p = mt_size;
  int *sc = malloc(sizeof(int) * (size_t)p * 4), *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
  MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)p);
  ad_real *sa = calloc((size_t)(2 * p) + 1, sizeof *sa), *ra = calloc((size_t)(2 * p) + 1, sizeof *ra);
  for (int j = 0; j < p; j++) {
    sc[j] = rc[j] = 1 + (j + mt_rank) % 2 == 2 ? 1 : 1;
    sd[j] = rd[j] = (int)(2 * (size_t)j * sizeof(ad_real));
    ty[j] = AD_MPI_REAL;
    sa[2 * j] = ad_mul(x[j % n], 1.0 + j);
  }
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  if (nb)
    ad_mpi_ialltoallw(sa, sc, sd, ty, ra, rc, rd, ty, MPI_COMM_WORLD, &q);
  else
    ad_mpi_alltoallw(sa, sc, sd, ty, ra, rc, rd, ty, MPI_COMM_WORLD);
  ad_mpi_wait(&q, MPI_STATUS_IGNORE);
  for (int i = 0; i < n; i++) y[i] = x[i];
  for (int j = 0; j < p; j++) y[j % n] = ad_add(y[j % n], ad_mul(ra[2 * j], ra[2 * j]));
  free(sa);
  free(ra);
  free(sc);
  free(ty);
}

/* Two nonblocking allreduces and a barrier, completed in an order that
 * depends on the rank, with a blocking allreduce in between on odd ranks'
 * side of the completions: the reverse sweep must start the adjoints in
 * one order everywhere. A point-to-point ring shares one waitall with them. */
static void order_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  int p = mt_size, right = (mt_rank + 1) % p, left = (mt_rank + p - 1) % p;
  ad_real a[N], b[N], ra[N], rb[N], sendv = ad_mul(x[0], x[1]), recvv = ad_const(0.0), c = ad_mul(x[2], 2.0), rc;
  for (int i = 0; i < n; i++) {
    a[i] = ad_mul(x[i], x[i]);
    b[i] = ad_sin(x[i]);
  }
  ad_mpi_request q[5];
  for (int i = 0; i < 5; i++) q[i] = (ad_mpi_request)AD_MPI_REQUEST_NULL;
  ad_mpi_iallreduce(a, ra, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[0]);
  ad_mpi_iallreduce(b, rb, n, AD_MPI_REAL, MPI_MAX, MPI_COMM_WORLD, &q[1]);
  ad_mpi_ibarrier(MPI_COMM_WORLD, &q[2]);
  if (mt_rank % 2) {
    ad_mpi_wait(&q[1], MPI_STATUS_IGNORE);
    ad_mpi_wait(&q[2], MPI_STATUS_IGNORE);
    ad_mpi_wait(&q[0], MPI_STATUS_IGNORE);
    ad_mpi_allreduce(&c, &rc, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  } else {
    ad_mpi_wait(&q[0], MPI_STATUS_IGNORE);
    ad_mpi_allreduce(&c, &rc, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
    ad_mpi_irecv(&recvv, 1, AD_MPI_REAL, left, 7, MPI_COMM_WORLD, &q[3]);
    ad_mpi_isend(&sendv, 1, AD_MPI_REAL, right, 7, MPI_COMM_WORLD, &q[4]);
    ad_mpi_waitall(5, q, MPI_STATUSES_IGNORE);
  }
  if (mt_rank % 2) {
    ad_mpi_irecv(&recvv, 1, AD_MPI_REAL, left, 7, MPI_COMM_WORLD, &q[3]);
    ad_mpi_isend(&sendv, 1, AD_MPI_REAL, right, 7, MPI_COMM_WORLD, &q[4]);
    ad_mpi_waitall(5, q, MPI_STATUSES_IGNORE);
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(ra[i], rb[i]), ad_mul(recvv, rc));
}

/* A pipelined CG on the 1-D Laplacian (block rows per rank): the dot
 * product's iallreduce runs while the matrix-vector product's halo exchange
 * and local work proceed. y = the solution after a few iterations, x = the
 * right-hand side. */
static void matvec(const ad_real *v, ad_real *w, int n, ad_real lo, ad_real hi) {
  for (int i = 0; i < n; i++) {
    ad_real l = i > 0 ? v[i - 1] : lo, r = i < n - 1 ? v[i + 1] : hi;
    w[i] = ad_sub(ad_mul(2.5, v[i]), ad_add(l, r));
  }
}

static void halo(const ad_real *v, int n, ad_real *lo, ad_real *hi, ad_mpi_request q[4]) {
  int left = mt_rank > 0 ? mt_rank - 1 : MPI_PROC_NULL, right = mt_rank < mt_size - 1 ? mt_rank + 1 : MPI_PROC_NULL;
  *lo = *hi = ad_const(0.0);
  ad_mpi_irecv(lo, 1, AD_MPI_REAL, left, 1, MPI_COMM_WORLD, &q[0]);
  ad_mpi_irecv(hi, 1, AD_MPI_REAL, right, 2, MPI_COMM_WORLD, &q[1]);
  ad_mpi_isend(&v[0], 1, AD_MPI_REAL, left, 2, MPI_COMM_WORLD, &q[2]);
  ad_mpi_isend(&v[n - 1], 1, AD_MPI_REAL, right, 1, MPI_COMM_WORLD, &q[3]);
}

static void cg_prog(ad_real *b, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  (void)ctx;
  ad_real xs[N], r[N], pv[N], ap[N], lo, hi, rr, pap;
  ad_mpi_request q[5];
  for (int i = 0; i < n; i++) {
    xs[i] = ad_const(0.0);
    r[i] = pv[i] = b[i];
  }
  ad_real loc = ad_dot((size_t)n, r, r);
  ad_mpi_iallreduce(&loc, &rr, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[4]);
  for (int it = 0; it < 4; it++) {
    halo(pv, n, &lo, &hi, q);
    ad_mpi_waitall(5, q, MPI_STATUSES_IGNORE); /* rr's reduction and the halo together */
    matvec(pv, ap, n, lo, hi);
    ad_real lp = ad_dot((size_t)n, pv, ap);
    ad_mpi_iallreduce(&lp, &pap, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[4]);
    ad_mpi_wait(&q[4], MPI_STATUS_IGNORE);
    ad_real alpha = ad_div(rr, pap);
    for (int i = 0; i < n; i++) {
      xs[i] = ad_add(xs[i], ad_mul(alpha, pv[i]));
      r[i] = ad_sub(r[i], ad_mul(alpha, ap[i]));
    }
    ad_real rr_old = rr;
    loc = ad_dot((size_t)n, r, r);
    ad_mpi_iallreduce(&loc, &rr, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[4]);
    ad_mpi_wait(&q[4], MPI_STATUS_IGNORE);
    ad_real beta = ad_div(rr, rr_old);
    for (int i = 0; i < n; i++) pv[i] = ad_add(r[i], ad_mul(beta, pv[i]));
    loc = ad_dot((size_t)n, r, r);
    if (it < 3) ad_mpi_iallreduce(&loc, &rr, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q[4]);
  }
  for (int i = 0; i < n; i++) y[i] = xs[i];
}

/* The nonblocking call on passive data is MPI's, and its request is one
 * of ours. */
static void test_passive_types(void) {
  int v = mt_rank + 1, s = 0;
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  MT_CHECK(ad_mpi_iallreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(s == mt_size * (mt_size + 1) / 2);
  /* waited: null now, and waiting for it again returns at once, as in MPI */
  MT_CHECK(q.mpi == MPI_REQUEST_NULL);
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  /* a stale copy of a completed active request is an error, not a hang */
  ad_real a = ad_const(1.0), r;
  MT_CHECK(ad_mpi_iallreduce(&a, &r, 1, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &q) == MPI_SUCCESS);
  ad_mpi_request copy = q;
  MT_CHECK(ad_mpi_wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_value(r) == mt_size);
  MT_CHECK(ad_mpi_wait(&copy, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
}

/* Values: a nonblocking reduction gives what the blocking one gives. */
static void test_values(void) {
  ad_real a[N], r1[N], r2[N];
  for (int i = 0; i < N; i++) a[i] = ad_const(i == 1 && mt_rank == mt_size - 1 ? NAN : 0.5 * mt_rank - i);
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  for (int k = 0; k < 4; k++) {
    ad_mpi_request q = AD_MPI_REQUEST_NULL;
    ad_mpi_allreduce(a, r1, N, AD_MPI_REAL, ops[k], MPI_COMM_WORLD);
    ad_mpi_iallreduce(a, r2, N, AD_MPI_REAL, ops[k], MPI_COMM_WORLD, &q);
    ad_mpi_wait(&q, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; i++) {
      double u = ad_value(r1[i]), w = ad_value(r2[i]);
      MT_CHECK((isnan(u) && isnan(w)) || u == w);
    }
  }
}

/* Misuse: an op Ariadne cannot differentiate is refused with an error. */
static void test_errors(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(1.0), r;
  ad_mpi_request q = AD_MPI_REQUEST_NULL;
  MT_CHECK(ad_mpi_iallreduce(&a, &r, 1, AD_MPI_REAL, MPI_LAND, MPI_COMM_WORLD, &q) == MPI_ERR_OP);
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  ad_tape_destroy(t);
  /* An intercommunicator is refused with active data, passed through with
   * passive data. */
  if (mt_size >= 2) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, mt_rank % 2 ? 0 : 1, 9, &inter);
    t = ad_tape_create();
    ad_tape_begin(t);
    ad_real v = ad_input(2.0), w;
    MT_CHECK(ad_mpi_iallreduce(&v, &w, 1, AD_MPI_REAL, MPI_SUM, inter, &q) == MPI_ERR_COMM);
    ad_tape_end(t);
    MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
    ad_tape_destroy(t);
    int one = 1, sum = 0;
    MT_CHECK(ad_mpi_allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, inter) == MPI_SUCCESS);
    int rsize;
    MPI_Comm_remote_size(inter, &rsize);
    MT_CHECK(sum == rsize);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  ad_mpi_set_timeout(60);
  mt_check_prog("ibcast", ibcast_prog, N, N, NULL, 1e-6);
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  for (int k = 0; k < 4; k++)
    for (int all = 0; all < 2; all++)
      for (int inplace = 0; inplace < 2; inplace++) {
        redctx c = {ops[k], all, inplace};
        mt_check_prog("ireduce", ireduce_prog, N, N, &c, 1e-5);
      }
  for (int k = 0; k < 4; k += 3)
    for (int nb = 0; nb < 2; nb++)
      for (int counts = 0; counts < 2; counts++) {
        rsctx c = {ops[k], nb, counts};
        mt_check_prog("reduce_scatter", rs_prog, N, N, &c, 1e-5);
      }
  for (int ex = 0; ex < 2; ex++) mt_check_prog("iscan", iscan_prog, N, N, &ex, 1e-6);
  for (int v = 0; v < 2; v++) mt_check_prog("igather_iscatter_iall", gsa_prog, N, N, &v, 1e-6);
  for (int nb = 0; nb < 2; nb++) mt_check_prog("alltoallw", alltoallw_prog, N, N, &nb, 1e-6);
  mt_check_prog("order", order_prog, N, N, NULL, 1e-6);
  mt_check_prog("pipelined_cg", cg_prog, N, N, NULL, 1e-5);
  test_passive_types();
  test_values();
  test_errors();
  return mt_finalize();
}
