/* SPDX-License-Identifier: BSD-3-Clause */
/* Alltoall(v/w) and its neighbourhood forms with slots that differ per rank:
 * send counts that depend on the receiver, send slots that overlap (one
 * value sent to two ranks, whose adjoints must add up), receive slots with
 * gaps in a buffer of passive values. Each form (blocking, nonblocking,
 * persistent, neighbourhood) is checked by the dot-product test and by
 * central finite differences of the whole parallel program, and its values
 * against the same program on plain MPI.
 *
 * The program is written once, below, and included twice: with ad_real and
 * the ad_mpi_* wrappers, and with double and plain MPI. */
#ifndef SLOTS_PROG
#include "mtest.h"

#define N 3

/* The forms of the exchange; persistent ones need MPI 4.0. */
enum {
  FORM_ALLTOALLW,
  FORM_IALLTOALLW,
  FORM_ALLTOALLW_INIT,
  FORM_ALLTOALLV,
  FORM_IALLTOALLV,
  FORM_NEIGHBOR_W,
  FORM_INEIGHBOR_W,
  FORM_NEIGHBOR_V,
  FORMS
};
static const char *form_name[FORMS] = {"alltoallw",  "ialltoallw",         "alltoallw_init",      "alltoallv",
                                       "ialltoallv", "neighbor_alltoallw", "ineighbor_alltoallw", "neighbor_alltoallv"};

typedef struct slots_ctx {
  int form;
  MPI_Comm graph; /* every rank a source and a destination, in rank order */
} slots_ctx;

#define SLOTS_PROG
#include "twins.h"
#include "test_mpi_slots.c"
#define MT_PLAIN
#include "twins.h"
#include "test_mpi_slots.c"

static int form_available(int form) {
#if MPI_VERSION >= 4
  (void)form;
  return 1;
#else
  return form != FORM_ALLTOALLW_INIT;
#endif
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  int p = mt_size, *all = malloc(sizeof(int) * (size_t)p);
  for (int j = 0; j < p; j++) all[j] = j;
  slots_ctx c;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, p, all, MPI_UNWEIGHTED, p, all, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &c.graph);
  for (int form = 0; form < FORMS; form++) {
    if (!form_available(form)) {
      if (mt_rank == 0) printf("%s: not in this MPI library (MPI_VERSION %d)\n", form_name[form], MPI_VERSION);
      continue;
    }
    c.form = form;
    mt_values(form_name[form], slots_ad, slots_plain, &c, N);
#ifndef ARIADNE_PASSIVE
    mt_check_prog(form_name[form], slots_ad, N, N, &c, 1e-6);
#endif
  }
  MPI_Comm_free(&c.graph);
  free(all);
  return mt_finalize();
}

#else /* SLOTS_PROG: the program, on R */

/* Rank j sends 1 + k % 2 values to rank k from element k % 3 of its three
 * (the slots of ranks 0 and 3, 1 and 3, 1 and 2 overlap), and rank k
 * receives them at element 3 j of a buffer of passive values (gaps after
 * every slot). A reduce_scatter then mixes every received value and gap
 * into every rank's outputs. */
static void F(slots)(R *x, int n, R *y, int m, void *ctx) {
  (void)m;
  const slots_ctx *c = ctx;
  int p = mt_size, me = mt_rank;
  R sb[3], r[3], *rb = malloc(sizeof(R) * (size_t)(3 * p));
  int *a = malloc(sizeof(int) * (size_t)(5 * p));
  int *sc = a, *sd = a + p, *rc = a + 2 * p, *rd = a + 3 * p, *three = a + 4 * p;
  int *sdb = malloc(sizeof(int) * (size_t)(2 * p)), *rdb = sdb + p;
  MPI_Aint *ad = malloc(sizeof(MPI_Aint) * (size_t)(2 * p));
  MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)p);
  for (int k = 0; k < p; k++) {
    sc[k] = 1 + k % 2;
    sd[k] = k % 3;
    rc[k] = 1 + me % 2;
    rd[k] = 3 * k;
    three[k] = 3;
    sdb[k] = sd[k] * (int)sizeof(R);
    rdb[k] = rd[k] * (int)sizeof(R);
    ad[k] = sdb[k];
    ad[p + k] = rdb[k];
    ty[k] = RT;
  }
  for (int i = 0; i < 3; i++) sb[i] = MUL(x[i % n], ADD(x[(i + 1) % n], 0.5 + i));
  for (int j = 0; j < 3 * p; j++) rb[j] = CST(0.25 * (j + 1));
  REQ q;
  switch (c->form) {
  case FORM_ALLTOALLW:
    ALLTOALLW(sb, sc, sdb, ty, rb, rc, rdb, ty, MPI_COMM_WORLD);
    break;
  case FORM_IALLTOALLW:
    IALLTOALLW(sb, sc, sdb, ty, rb, rc, rdb, ty, MPI_COMM_WORLD, &q);
    WAIT(&q, MPI_STATUS_IGNORE);
    break;
#if MPI_VERSION >= 4
  case FORM_ALLTOALLW_INIT:
    ALLTOALLW_INIT(sb, sc, sdb, ty, rb, rc, rdb, ty, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    START(&q);
    WAIT(&q, MPI_STATUS_IGNORE);
    REQUEST_FREE(&q);
    break;
#endif
  case FORM_ALLTOALLV:
    ALLTOALLV(sb, sc, sd, RT, rb, rc, rd, RT, MPI_COMM_WORLD);
    break;
  case FORM_IALLTOALLV:
    IALLTOALLV(sb, sc, sd, RT, rb, rc, rd, RT, MPI_COMM_WORLD, &q);
    WAIT(&q, MPI_STATUS_IGNORE);
    break;
  case FORM_NEIGHBOR_W:
    NEIGHBOR_W(sb, sc, ad, ty, rb, rc, ad + p, ty, c->graph);
    break;
  case FORM_INEIGHBOR_W:
    INEIGHBOR_W(sb, sc, ad, ty, rb, rc, ad + p, ty, c->graph, &q);
    WAIT(&q, MPI_STATUS_IGNORE);
    break;
  default:
    NEIGHBOR_V(sb, sc, sd, RT, rb, rc, rd, RT, c->graph);
    break;
  }
  REDUCE_SCATTER(rb, r, three, RT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ADD(MUL(r[i], SIN(r[(i + 1) % 3])), x[i]);
  free(rb);
  free(a);
  free(sdb);
  free(ad);
  free(ty);
}

#endif /* SLOTS_PROG */
