/* SPDX-License-Identifier: BSD-3-Clause */
/* Collective patterns: each is a parallel program checked by the dot-product
 * test and by finite differences of the whole program. */
#include "mtest.h"

#define N 3

static void bcast_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int root = mt_size - 1;
  ad_real b[N];
  for (int i = 0; i < n; i++) b[i] = ad_mul(x[i], x[i]);
  ad_mpi_bcast(b, n, AD_MPI_REAL, root, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ad_mul(b[i], ad_add(x[i], 1.0 + mt_rank));
}

typedef struct redctx {
  MPI_Op op;
  int all, inplace, zero, tie;
} redctx;

static void reduce_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  redctx *c = ctx;
  ad_real s[N], r[N];
  for (int i = 0; i < n; i++) {
    s[i] = ad_sin(x[i]);
    if (c->zero && mt_rank == mt_size / 2 && i == 0) s[i] = ad_mul(s[i], 0.0); /* an exact zero contribution */
    if (c->tie) s[i] = ad_add(ad_mul(x[i], 1e-30), 0.25);                        /* equal on every rank */
  }
  int root = 0;
  if (c->inplace && (c->all || mt_rank == root)) {
    for (int i = 0; i < n; i++) r[i] = s[i];
    if (c->all)
      ad_mpi_allreduce(MPI_IN_PLACE, r, n, AD_MPI_REAL, c->op, MPI_COMM_WORLD);
    else
      ad_mpi_reduce(MPI_IN_PLACE, r, n, AD_MPI_REAL, c->op, root, MPI_COMM_WORLD);
  } else if (c->all) {
    ad_mpi_allreduce(s, r, n, AD_MPI_REAL, c->op, MPI_COMM_WORLD);
  } else {
    for (int i = 0; i < n; i++) r[i] = ad_const(0.0);
    ad_mpi_reduce(s, r, n, AD_MPI_REAL, c->op, root, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], r[i]), x[i]);
}

static void scan_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int ex = *(int *)ctx;
  ad_real s[N], r[N];
  for (int i = 0; i < n; i++) {
    s[i] = ad_exp(ad_mul(0.5, x[i]));
    r[i] = ad_const(0.0);
  }
  if (ex)
    ad_mpi_exscan(s, r, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  else
    ad_mpi_scan(s, r, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  if (ex && mt_rank == 0)
    for (int i = 0; i < n; i++) r[i] = ad_const(0.0);
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], r[i]), x[i]);
}

/* Gather to a root, work there, scatter back; v-variants with uneven counts. */
static void gather_scatter_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int mode = *(int *)ctx; /* 0 plain, 1 in place, 2 v-variants */
  int root = mt_size > 1 ? 1 : 0, p = mt_size;
  ad_real *all = calloc((size_t)(p * n + 1), sizeof *all);
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  for (int j = 0, d = 0; j < p; j++) {
    cnt[j] = mode == 2 ? 1 + j % n : n;
    dsp[j] = d;
    d += cnt[j] + (mode == 2 ? 1 : 0); /* gaps between slots */
  }
  int mine = cnt[mt_rank];
  ad_real s[N], r[N];
  for (int i = 0; i < n; i++) s[i] = ad_mul(x[i], ad_add(x[i], 0.5));
  if (mode == 1 && mt_rank == root) {
    for (int i = 0; i < n; i++) all[root * n + i] = s[i];
    ad_mpi_gather(MPI_IN_PLACE, n, AD_MPI_REAL, all, n, AD_MPI_REAL, root, MPI_COMM_WORLD);
  } else if (mode == 2) {
    ad_mpi_gatherv(s, mine, AD_MPI_REAL, all, cnt, dsp, AD_MPI_REAL, root, MPI_COMM_WORLD);
  } else {
    ad_mpi_gather(s, n, AD_MPI_REAL, all, n, AD_MPI_REAL, root, MPI_COMM_WORLD);
  }
  if (mt_rank == root) {
    ad_real acc = ad_const(0.0);
    for (int j = 0; j < p; j++)
      for (int i = 0; i < cnt[j]; i++) acc = ad_add(acc, all[dsp[j] + i]);
    for (int j = 0; j < p; j++)
      for (int i = 0; i < cnt[j]; i++) all[dsp[j] + i] = ad_mul(all[dsp[j] + i], ad_sin(acc));
  }
  for (int i = 0; i < n; i++) r[i] = ad_const(0.0);
  if (mode == 1 && mt_rank == root) {
    ad_mpi_scatter(all, n, AD_MPI_REAL, MPI_IN_PLACE, n, AD_MPI_REAL, root, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) r[i] = all[root * n + i];
  } else if (mode == 2) {
    ad_mpi_scatterv(all, cnt, dsp, AD_MPI_REAL, r, mine, AD_MPI_REAL, root, MPI_COMM_WORLD);
  } else {
    ad_mpi_scatter(all, n, AD_MPI_REAL, r, n, AD_MPI_REAL, root, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; i++) y[i] = ad_add(ad_mul(r[i], x[i]), x[i]);
  free(all);
  free(cnt);
  free(dsp);
}

static void allgather_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int mode = *(int *)ctx; /* 0 plain, 1 in place, 2 v */
  int p = mt_size;
  ad_real *all = calloc((size_t)(p * (n + 1) + 1), sizeof *all);
  int *cnt = malloc(sizeof(int) * (size_t)p), *dsp = malloc(sizeof(int) * (size_t)p);
  for (int j = 0, d = 0; j < p; j++) {
    cnt[j] = mode == 2 ? 1 + (j + 1) % n : n;
    dsp[j] = d;
    d += cnt[j] + (mode == 2);
  }
  ad_real s[N];
  for (int i = 0; i < n; i++) s[i] = ad_cos(x[i]);
  if (mode == 1) {
    for (int i = 0; i < n; i++) all[mt_rank * n + i] = s[i];
    ad_mpi_allgather(MPI_IN_PLACE, n, AD_MPI_REAL, all, n, AD_MPI_REAL, MPI_COMM_WORLD);
  } else if (mode == 2) {
    ad_mpi_allgatherv(s, cnt[mt_rank], AD_MPI_REAL, all, cnt, dsp, AD_MPI_REAL, MPI_COMM_WORLD);
  } else {
    ad_mpi_allgather(s, n, AD_MPI_REAL, all, n, AD_MPI_REAL, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; i++) {
    y[i] = x[i];
    for (int j = 0; j < p; j++)
      if (i < cnt[j]) y[i] = ad_add(y[i], ad_mul(all[dsp[j] + i], 1.0 + j + mt_rank));
  }
  free(all);
  free(cnt);
  free(dsp);
}

static void alltoall_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  int mode = *(int *)ctx; /* 0 plain, 1 in place, 2 v */
  int p = mt_size;
  ad_real *sb = calloc((size_t)(2 * p + 1), sizeof *sb), *rb = calloc((size_t)(2 * p + 1), sizeof *rb);
  int *sc = malloc(sizeof(int) * (size_t)p), *sd = malloc(sizeof(int) * (size_t)p);
  int *rc = malloc(sizeof(int) * (size_t)p), *rd = malloc(sizeof(int) * (size_t)p);
  for (int j = 0; j < p; j++) {
    /* v: rank a sends (a + b) % 2 + 1 values to rank b */
    sc[j] = mode == 2 ? (mt_rank + j) % 2 + 1 : 1;
    rc[j] = sc[j];
    sd[j] = 2 * j;
    rd[j] = 2 * (p - 1 - j);
  }
  for (int j = 0; j < 2 * p; j++) sb[j] = ad_mul(x[j % n], 1.0 + j);
  if (mode == 1) {
    for (int j = 0; j < p; j++) rb[j] = sb[j];
    ad_mpi_alltoall(MPI_IN_PLACE, 1, AD_MPI_REAL, rb, 1, AD_MPI_REAL, MPI_COMM_WORLD);
  } else if (mode == 2) {
    ad_mpi_alltoallv(sb, sc, sd, AD_MPI_REAL, rb, rc, rd, AD_MPI_REAL, MPI_COMM_WORLD);
  } else {
    ad_mpi_alltoall(sb, 1, AD_MPI_REAL, rb, 1, AD_MPI_REAL, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; i++) y[i] = x[i];
  for (int j = 0; j < p; j++) {
    int base = mode == 2 ? rd[j] : j;
    int c = mode == 2 ? rc[j] : 1;
    for (int l = 0; l < c; l++) y[(j + l) % n] = ad_add(y[(j + l) % n], ad_mul(rb[base + l], rb[base + l]));
  }
  free(sb);
  free(rb);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

static void rsb_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)m;
  MPI_Op op = *(MPI_Op *)ctx;
  int p = mt_size;
  ad_real *s = calloc((size_t)(p * n + 1), sizeof *s), r[N];
  for (int j = 0; j < p * n; j++) s[j] = ad_add(ad_mul(x[j % n], 0.1 * (j + 1)), 0.3 * mt_rank);
  ad_mpi_reduce_scatter_block(s, r, n, AD_MPI_REAL, op, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ad_mul(r[i], ad_add(x[i], 2.0));
  free(s);
}

static void barrier_prog(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  ad_mpi_barrier(MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ad_mul(x[i], x[i]);
  ad_mpi_barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  char name[64];
  mt_check_prog("bcast", bcast_prog, N, N, NULL, 1e-6);
  mt_check_prog("barrier", barrier_prog, N, N, NULL, 1e-6);
  MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  const char *opn[4] = {"sum", "prod", "min", "max"};
  for (int o = 0; o < 4; o++)
    for (int all = 0; all < 2; all++)
      for (int inplace = 0; inplace < 2; inplace++) {
        redctx c = {ops[o], all, inplace, 0, 0};
        snprintf(name, sizeof name, "%s_%s%s", all ? "allreduce" : "reduce", opn[o], inplace ? "_inplace" : "");
        mt_check_prog(name, reduce_prog, N, N, &c, 1e-6);
      }
  {
    redctx c = {MPI_PROD, 1, 0, 1, 0};
    mt_check_prog("allreduce_prod_with_zero", reduce_prog, N, N, &c, 1e-6);
  }
  for (int o = 2; o < 4; o++) {
    /* Ties: every rank contributes exactly 0.25 with derivative 1; the lowest
     * rank owns the extremum, so it gets the adjoints of all ranks' results. */
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(0.5 + mt_rank), s, r;
    s = ad_add(ad_sub(x, ad_value(x)), 0.25);
    ad_mpi_allreduce(&s, &r, 1, AD_MPI_REAL, ops[o], MPI_COMM_WORLD);
    ad_tape_end(t);
    MT_CHECK(ad_value(r) == 0.25);
    ad_seed(t, r, 1.0);
    MT_CHECK(ad_reverse(t) == AD_OK);
    MT_CHECK(ad_adjoint(t, x) == (mt_rank == 0 ? (double)mt_size : 0.0));
    ad_tape_destroy(t);
  }
  for (int ex = 0; ex < 2; ex++) mt_check_prog(ex ? "exscan" : "scan", scan_prog, N, N, &ex, 1e-6);
  for (int mode = 0; mode < 3; mode++) {
    snprintf(name, sizeof name, "gather_scatter_%d", mode);
    mt_check_prog(name, gather_scatter_prog, N, N, &mode, 1e-6);
    snprintf(name, sizeof name, "allgather_%d", mode);
    mt_check_prog(name, allgather_prog, N, N, &mode, 1e-6);
    snprintf(name, sizeof name, "alltoall_%d", mode);
    mt_check_prog(name, alltoall_prog, N, N, &mode, 1e-6);
  }
  for (int o = 0; o < 4; o++) {
    snprintf(name, sizeof name, "reduce_scatter_block_%s", opn[o]);
    mt_check_prog(name, rsb_prog, N, N, &ops[o], 1e-6);
  }
  return mt_finalize();
}
