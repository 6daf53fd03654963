/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI tools: ad_mpi_check_gradient on a ring program (passes, with the
 * derivatives it compares equal to the closed form; fails on every rank when
 * one rank's external function has a wrong adjoint, naming that rank), and
 * ad_mpi_tape_dump (one file per rank, whose communication records name the
 * partners, tags, counts and communicator the program used). */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "mtest.h"

static int bad_rank = -1;

/* w = x0 x1; the bad rank forgets x0 in d/dx1. */
static int prod_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                        const double *ybar) {
  (void)ud, (void)nin, (void)nout, (void)y;
  xbar[0] += ybar[0] * x[1];
  xbar[1] += ybar[0] * (mt_rank == bad_rank ? 1.0 : x[0]);
  return 0;
}
static int prod_forward(void *ud, size_t nin, const double *x, const double *xdot, size_t nout, const double *y,
                        double *ydot) {
  (void)ud, (void)nin, (void)nout, (void)y;
  ydot[0] = xdot[0] * x[1] + x[0] * xdot[1];
  return 0;
}
static const ad_external_ops prod_ops = {prod_reverse, prod_forward, NULL, "product"};

/* Each rank owns x0, x1; u_k = x_k^2; v = u_1 of the left neighbour (ring);
 * y = (sin u0 + sin u1) v + x0 x1 summed over the ranks, twice: as a local
 * part (output 0) and reduced onto rank 0 (output 1). */
static int ring(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  (void)ud;
  if (n != 2 || m != 2) return 1;
  int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  ad_real u[2] = {ad_mul(x[0], x[0]), ad_mul(x[1], x[1])}, v = ad_const(0.0);
  ad_mpi_sendrecv(&u[1], 1, AD_MPI_REAL, right, 7, &v, 1, AD_MPI_REAL, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  ad_real w = ad_const(ad_value(x[0]) * ad_value(x[1]));
  if (ad_external(&prod_ops, NULL, 2, x, 1, &w) != AD_OK) return 1;
  y[0] = ad_add(ad_mul(ad_add(ad_sin(u[0]), ad_sin(u[1])), v), w);
  y[1] = ad_const(0.0);
  ad_mpi_reduce(&y[0], &y[1], 1, AD_MPI_REAL, MPI_SUM, 0, MPI_COMM_WORLD);
  return 0;
}

static double xval(int r, int k) { return 0.3 + 0.1 * r + 0.45 * k; }

/* dy/dx of global input i = 2 r + k, in closed form. */
static double grad(int i) {
  int r = i / 2, k = i % 2, R = (r + 1) % mt_size, l = (r + mt_size - 1) % mt_size;
  double x = xval(r, k), v = xval(l, 1) * xval(l, 1), g = cos(x * x) * 2.0 * x * v;
  if (k == 1) g += (sin(xval(R, 0) * xval(R, 0)) + sin(xval(R, 1) * xval(R, 1))) * 2.0 * x;
  g += xval(r, 1 - k);
  return g;
}

static void test_check(void) {
  double x0[2] = {xval(mt_rank, 0), xval(mt_rank, 1)};
  ad_check_options o;
  ad_check_options_default(&o);
  o.print = 2;
  o.title = "ring";
  o.table_rows = 4;
  ad_check_result r;
  bad_rank = -1;
  int rc = ad_mpi_check_gradient(MPI_COMM_WORLD, ring, NULL, 2, x0, 2, &o, &r);
  MT_CHECK(rc == AD_OK);
  MT_CHECK(r.passed);
  MT_CHECK(r.n == (size_t)(2 * mt_size));
  MT_CHECK(r.checked == 2 * (size_t)(2 * mt_size < 8 ? 2 * mt_size : 8));
  MT_CHECK(r.dot_done && r.dot_rel < 1e-12);
  for (size_t k = 0; k < r.nworst; k++) {
    MT_CLOSE(r.worst[k].ad, grad((int)r.worst[k].col), 1e-13);
    MT_CHECK(r.worst[k].rank == (int)r.worst[k].col / 2);
  }

  /* One rank's external function has a wrong adjoint: every rank learns. */
  bad_rank = mt_size - 1;
  o.print = 1;
  o.title = "ring, wrong adjoint on the last rank";
  rc = ad_mpi_check_gradient(MPI_COMM_WORLD, ring, NULL, 2, x0, 2, &o, &r);
  MT_CHECK(rc == AD_ERR_CHECK);
  MT_CHECK(!r.passed);
  MT_CHECK(r.failed == 2); /* d/dx1 of the bad rank, in both outputs */
  MT_CHECK(r.worst[0].rank == bad_rank && r.worst[0].col == (size_t)(2 * bad_rank + 1));
  MT_CLOSE(r.worst[0].fd, grad(2 * bad_rank + 1), 1e-6);
  MT_CHECK(r.dot_done && r.dot_rel > 1e-6);
  bad_rank = -1;
}

static void test_dump(void) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[2] = {ad_input(xval(mt_rank, 0)), ad_input(xval(mt_rank, 1))}, y[2];
  MT_CHECK(ring(NULL, 2, x, 2, y) == 0);
  ad_tape_end(t);
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  char prefix[256], path[300];
  snprintf(prefix, sizeof prefix, "/tmp/ariadne_mpi_dump_%ld", pid);
  MT_CHECK(ad_mpi_tape_dump(t, MPI_COMM_WORLD, prefix, AD_DUMP_TEXT) == AD_OK);
  snprintf(path, sizeof path, "%s.%d.txt", prefix, mt_rank);
  FILE *f = fopen(path, "r");
  MT_CHECK(f != NULL);
  int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
  int sendrecv = 0, reduce = 0, external = 0, received = 0;
  char line[1024];
  unsigned long long v_handle = 0;
  while (f && fgets(line, sizeof line, f)) {
    char want[256];
    if (strstr(line, "MPI communication: sendrecv")) {
      snprintf(want, sizeof want, "sendrecv to=%d tag=7 from=%d rtag=7 count=1 comm=MPI_COMM_WORLD size=%d", right,
               left, mt_size);
      MT_CHECK(strstr(line, want) != NULL);
      const char *o = strstr(line, " out=%");
      MT_CHECK(o != NULL);
      if (o) v_handle = strtoull(o + 6, NULL, 10);
      sendrecv++;
    } else if (strstr(line, "MPI communication: reduce")) {
      snprintf(want, sizeof want, "reduce op=sum root=0 count=1 comm=MPI_COMM_WORLD size=%d", mt_size);
      MT_CHECK(strstr(line, want) != NULL);
      reduce++;
    } else if (strstr(line, "external function: name=\"product\"")) {
      external++;
    } else if (strstr(line, "= output of record 0")) {
      received++;
    }
  }
  if (f) fclose(f);
  remove(path);
  MT_CHECK(sendrecv == 1 && reduce == 1 && external == 1);
  MT_CHECK(received == 1 && v_handle != 0);
  /* the other formats land next to it */
  MT_CHECK(ad_mpi_tape_dump(t, MPI_COMM_WORLD, prefix, AD_DUMP_DOT) == AD_OK);
  snprintf(path, sizeof path, "%s.%d.dot", prefix, mt_rank);
  f = fopen(path, "r");
  MT_CHECK(f != NULL && fgets(line, sizeof line, f) && strncmp(line, "digraph tape {", 14) == 0);
  if (f) fclose(f);
  remove(path);
  MT_CHECK(ad_mpi_tape_dump(t, MPI_COMM_WORLD, NULL, AD_DUMP_DOT) == AD_ERR_ARG);
  ad_tape_destroy(t);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  (void)mt_check_prog; /* mtest.h's, used by other tests */
  test_check();
  test_dump();
  return mt_finalize();
}
