/* SPDX-License-Identifier: BSD-3-Clause */
/* Combinations of datatypes, operations and calls beyond the basic ones:
 *
 * - datatypes built on AD_MPI_REAL (a vector, and a struct with passive
 *   fields) in issend, ibsend, irsend, the persistent sends and receives,
 *   mrecv and imrecv;
 * - datatypes built on AD_MPI_REAL in the neighbourhood collectives
 *   (blocking and nonblocking, periodic and not), alltoallw and ialltoallw
 *   with a type per peer, and the persistent collectives (MPI 4.0);
 * - MINLOC/MAXLOC on AD_MPI_REAL_INT in scan, exscan, reduce_scatter(_block)
 *   and the nonblocking and persistent reductions;
 * - a user-defined operation in ireduce_scatter;
 * - what stays refused.
 *
 * Every program is written once and compiled twice (this file includes
 * itself): on ad_real with the twins and types built on AD_MPI_REAL, and on
 * double with MPI's calls and the same types built on MPI_DOUBLE. The first
 * is checked against central finite differences of the whole parallel
 * program and by the dot-product test (tangent against reverse sweep); its
 * values, run without a tape, against the second. */
#ifndef COMBOS_BODY
#include <stddef.h>

#include "mtest.h"

/* A particle: active and passive fields mixed. */
typedef struct particle_ad {
  ad_real x;
  int id;
  ad_real y[2];
  double w;
} particle_ad;
typedef struct particle_pl {
  double x;
  int id;
  double y[2];
  double w;
} particle_pl;
/* MPI_DOUBLE_INT's layout. */
typedef struct dint {
  double value;
  int index;
} dint;

static MPI_Datatype particle_type(MPI_Datatype base, MPI_Aint x, MPI_Aint id, MPI_Aint y, MPI_Aint w, MPI_Aint ext) {
  int bl[4] = {1, 1, 2, 1};
  MPI_Aint d[4] = {x, id, y, w};
  MPI_Datatype ty[4] = {base, MPI_INT, base, MPI_DOUBLE}, s, t;
  MPI_Type_create_struct(4, bl, d, ty, &s);
  MPI_Type_create_resized(s, 0, ext, &t);
  MPI_Type_free(&s);
  MPI_Type_commit(&t);
  return t;
}

static MPI_Comm ring[2]; /* a 1-D Cartesian ring: periodic, and not */

#define COMBOS_BODY
/* ---- the active variant ---- */
#define V(name) name##_ad
#define PLAIN 0
#define REAL ad_real
#define RT AD_MPI_REAL
#define REQ ad_mpi_request
#define REQNULL AD_MPI_REQUEST_NULL
#define MSG ad_mpi_message
#define C(a, b) ad_mpi_##a
#define MUL(a, b) ad_mul(a, b)
#define ADD(a, b) ad_add(a, b)
#define SIN(a) ad_sin(a)
#define K(v) ad_const(v)
#define VAL(a) ad_value(a)
#define PART particle_ad
#define RINT ad_real_int
#define RINT_T AD_MPI_REAL_INT
#include "test_mpi_combos.c"
#undef V
#undef PLAIN
#undef REAL
#undef RT
#undef REQ
#undef REQNULL
#undef MSG
#undef C
#undef MUL
#undef ADD
#undef SIN
#undef K
#undef VAL
#undef PART
#undef RINT
#undef RINT_T
/* ---- the plain MPI variant ---- */
#define V(name) name##_pl
#define PLAIN 1
#define REAL double
#define RT MPI_DOUBLE
#define REQ MPI_Request
#define REQNULL MPI_REQUEST_NULL
#define MSG MPI_Message
#define C(a, b) MPI_##b
#define MUL(a, b) ((a) * (b))
#define ADD(a, b) ((a) + (b))
#define SIN(a) sin(a)
#define K(v) ((double)(v))
#define VAL(a) (a)
#define PART particle_pl
#define RINT dint
#define RINT_T MPI_DOUBLE_INT
#include "test_mpi_combos.c"

typedef void (*prog_pl)(double *x, int n, double *y, int m, void *ctx);
typedef void (*prog_ad)(ad_real *x, int n, ad_real *y, int m, void *ctx);

/* The active program run without a tape against the plain one. */
static void compare(const char *name, prog_ad fa, prog_pl fp, int n, int m, void *ctx) {
  double *x = malloc(sizeof(double) * (size_t)n), *y = calloc((size_t)m, sizeof(double));
  ad_real *xa = malloc(sizeof(ad_real) * (size_t)n), *ya = calloc((size_t)m, sizeof(ad_real));
  unsigned long long seed = 99ull + 31ull * (unsigned long long)mt_rank;
  for (int i = 0; i < n; i++) {
    x[i] = 0.5 + 0.4 * mt_rand(&seed) + 0.1 * mt_rank;
    xa[i] = ad_const(x[i]);
  }
  for (int i = 0; i < m; i++) ya[i] = ad_const(0.0);
  fa(xa, n, ya, m, ctx);
  fp(x, n, y, m, ctx);
  int bad = 0;
  for (int i = 0; i < m; i++)
    if (!(fabs(ad_value(ya[i]) - y[i]) <= 1e-13 * (1.0 + fabs(y[i])))) {
      if (!bad++ || getenv("MT_VERBOSE"))
        fprintf(stderr, "[%d] %s: y[%d] = %.17g, MPI gives %.17g\n", mt_rank, name, i, ad_value(ya[i]), y[i]);
    }
  MT_CHECK(bad == 0);
  free(x);
  free(y);
  free(xa);
  free(ya);
}

/* values: 0 where plain MPI is no reference (see main). */
static void run_as(const char *name, prog_ad fa, prog_pl fp, int n, int m, int ctx, int values) {
  if (getenv("MT_VERBOSE") && mt_rank == 0) fprintf(stderr, "%s\n", name);
  if (values) compare(name, fa, fp, n, m, &ctx);
#ifndef ARIADNE_PASSIVE
  mt_check_prog(name, (mt_prog)fa, n, m, &ctx, 1e-6);
#endif
}

static void run(const char *name, prog_ad fa, prog_pl fp, int n, int m, int ctx) { run_as(name, fa, fp, n, m, ctx, 1); }

#ifndef ARIADNE_PASSIVE
static void check_refused(int rc, int cls_want, ad_tape *t, const char *call, const char *what) {
  int cls = -1;
  MPI_Error_class(rc, &cls);
  MT_CHECK(cls == cls_want);
  MT_CHECK(ad_tape_error(t) == AD_ERR_MPI);
  MT_CHECK(strstr(ad_tape_error_message(t), call) != NULL);
  if (what) MT_CHECK(strstr(ad_tape_error_message(t), what) != NULL);
}

/* Every rank refuses before anything is posted, so nothing waits. */
static void test_refused(void) {
  init_types_ad();
  MPI_Op uop;
  ad_mpi_op_create(uop_fn_ad, 1, &uop);
  for (int which = 0; which < 7; which++) {
    if (which == 2 && mt_size == 1) continue; /* needs a second slot */
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real u[64];
    PART_AD_DECL(q, 8);
    for (int i = 0; i < 64; i++) u[i] = ad_input(i);
    ad_mpi_request r = AD_MPI_REQUEST_NULL;
    int p = mt_size, cnt[64];
    MPI_Aint dsp[64];
    MPI_Datatype ty[64];
    for (int j = 0; j < p; j++) {
      cnt[j] = 1;
      dsp[j] = 0;
      ty[j] = j == 0 ? MPI_INT : vec_ad;
    }
    int idsp[64] = {0};
    switch (which) {
    case 0: { /* passive fields with a datatype per slot */
      int nc[2] = {1, 1};
      MPI_Aint nd[2] = {0, (MPI_Aint)sizeof(particle_ad)};
      MPI_Datatype nt[2] = {part_ad, part_ad};
      check_refused(ad_mpi_neighbor_alltoallw(q, nc, nd, nt, q + 4, nc, nd, nt, ring[0]), MPI_ERR_TYPE, t,
                    "ad_mpi_neighbor_alltoallw", "passive");
      break;
    }
    case 1: /* a predefined operation on a derived type, as MPI */
      check_refused(ad_mpi_ireduce_scatter(u, u + 32, cnt, vec_ad, MPI_SUM, MPI_COMM_WORLD, &r), MPI_ERR_OP, t,
                    "ad_mpi_ireduce_scatter", NULL);
      break;
    case 2: /* a passive slot among active ones */
      check_refused(ad_mpi_alltoallw(u, cnt, idsp, ty, u + 32, cnt, idsp, ty, MPI_COMM_WORLD), MPI_ERR_TYPE, t,
                    "ad_mpi_alltoallw", "slot 0");
      (void)dsp;
      break;
    case 3: /* a reduction on a struct with passive fields */
      check_refused(ad_mpi_iallreduce(q, q + 4, 1, part_ad, MPI_MAX, MPI_COMM_WORLD, &r), MPI_ERR_OP, t,
                    "ad_mpi_iallreduce", "predefined");
      break;
    case 4: /* AD_MPI_REAL_INT with another operation */
      check_refused(ad_mpi_iscan(u, u + 32, 1, AD_MPI_REAL_INT, MPI_SUM, MPI_COMM_WORLD, &r), MPI_ERR_OP, t,
                    "ad_mpi_iscan", "MINLOC");
      break;
    case 5: /* a user operation on a struct with passive fields */
      check_refused(ad_mpi_allreduce(q, q + 4, 1, part_ad, uop, MPI_COMM_WORLD), MPI_ERR_TYPE, t, "ad_mpi_allreduce",
                    "passive");
      break;
    default: { /* an active persistent request on a derived type cannot be freed */
      ad_mpi_request ps = AD_MPI_REQUEST_NULL;
      MT_CHECK(ad_mpi_send_init(u, 1, vec_ad, mt_rank, 11, MPI_COMM_WORLD, &ps) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_irecv(u + 16, 1, vec_ad, mt_rank, 11, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_start(&ps) == MPI_SUCCESS);
      check_refused(ad_mpi_request_free(&ps), MPI_ERR_REQUEST, t, "ad_mpi_request_free", "persistent");
      MT_CHECK(ad_mpi_wait(&ps, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_request_free(&ps) == MPI_SUCCESS);
      break;
    }
    }
    ad_tape_end(t);
    ad_tape_destroy(t);
  }
  ad_mpi_op_free(&uop);
  free_types_ad();
}
#endif

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  mt_bsend_buffer(1 << 16);
  int dims[1] = {mt_size};
  for (int per = 0; per < 2; per++) {
    int periods[1] = {per == 0};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring[per]);
  }
  static const char *const modes[] = {"issend", "ibsend", "irsend", "isend"};
  for (int k = 0; k < 3; k++) run(modes[k], p_modes_ad, p_modes_pl, NX, NX, k);
  static const char *const pers[] = {"send_init", "ssend_init", "bsend_init", "rsend_init"};
  for (int k = 0; k < 4; k++) run(pers[k], p_persist_ad, p_persist_pl, NX, NX, k);
  run("mrecv, imrecv", p_mrecv_ad, p_mrecv_pl, NX, NX, 0);
  static const char *const nb[] = {"neighbour collectives, periodic", "neighbour collectives, not periodic",
                                   "nonblocking neighbour collectives, periodic",
                                   "nonblocking neighbour collectives, not periodic"};
  /* On a periodic ring of one or two ranks both neighbours are one rank,
   * and MPI libraries differ on which slot gets which message. */
  for (int k = 0; k < 4; k++)
    if ((k & 1) || mt_size > 2) run(nb[k], p_neighbor_ad, p_neighbor_pl, NX, NY, k);
  static const char *const mx[] = {"passive fields in collectives", "passive fields in nonblocking collectives",
                                   "passive fields in collectives, in place"};
  for (int k = 0; k < 3; k++) run(mx[k], p_mixed_ad, p_mixed_pl, NX, NY, k);
  int w_values = 1;
#ifdef OPEN_MPI
  w_values = mt_size > 1; /* Open MPI 4.1's MPI_Alltoallw on one rank moves nothing */
#endif
  run_as("alltoallw", p_alltoallw_ad, p_alltoallw_pl, NX, NY, 0, w_values);
  run("ialltoallw", p_alltoallw_ad, p_alltoallw_pl, NX, NY, 1);
  run("alltoallw in place", p_alltoallw_ad, p_alltoallw_pl, NX, NY, 2);
#if MPI_VERSION >= 4
  run("persistent collectives", p_pcoll_ad, p_pcoll_pl, NX, NY, 0);
#endif
  static const char *const locs[] = {"scan MINLOC",
                                     "exscan MAXLOC",
                                     "reduce_scatter_block MINLOC",
                                     "reduce_scatter MAXLOC",
                                     "ireduce MINLOC",
                                     "iallreduce MAXLOC",
                                     "iscan MAXLOC",
                                     "iexscan MINLOC",
                                     "ireduce_scatter_block MAXLOC",
                                     "ireduce_scatter MINLOC",
                                     "allreduce_init MINLOC",
                                     "scan_init MAXLOC",
                                     "reduce_scatter_init MAXLOC"};
  for (int k = 0; k < 13; k++) {
#if MPI_VERSION < 4
    if (k >= 10) continue;
#endif
    if ((k == 1 || k == 7) && mt_size == 1) continue; /* an exscan on one rank computes nothing */
    run(locs[k], p_loc_ad, p_loc_pl, NL, NL, k);
  }
  run("ireduce_scatter, user operation", p_userop_ad, p_userop_pl, NX, NX, 0);
#if MPI_VERSION >= 4
  run("reduce_scatter_init, user operation", p_userop_ad, p_userop_pl, NX, NX, 1);
#endif
#ifndef ARIADNE_PASSIVE
  test_refused();
#endif
  for (int per = 0; per < 2; per++) MPI_Comm_free(&ring[per]);
  mt_bsend_buffer(0);
  return mt_finalize();
}

#else /* COMBOS_BODY: the programs, once per variant */

#ifndef NX
#define NX 12 /* inputs (and outputs) per rank */
#define NY 24
#define NL 6
#define PART_AD_DECL(q, n)                                                                                             \
  particle_ad q[n];                                                                                                    \
  memset(q, 0, sizeof q)
#endif

static MPI_Datatype V(vec), V(c3), V(part);

static void V(init_types)(void) {
  MPI_Type_vector(3, 1, 2, RT, &V(vec)); /* 3 elements over 5 */
  MPI_Type_commit(&V(vec));
  MPI_Type_contiguous(3, RT, &V(c3));
  MPI_Type_commit(&V(c3));
  V(part) = particle_type(RT, offsetof(PART, x), offsetof(PART, id), offsetof(PART, y), offsetof(PART, w),
                          (MPI_Aint)sizeof(PART));
}
static void V(free_types)(void) {
  MPI_Type_free(&V(vec));
  MPI_Type_free(&V(c3));
  MPI_Type_free(&V(part));
}

/* Two vector items (10 elements, 6 in the type) and two particles from x. */
static void V(fill)(REAL *x, REAL *a, PART *pa) {
  for (int i = 0; i < 10; i++) a[i] = MUL(x[i], x[(i + 1) % 12]);
  for (int i = 0; i < 2; i++) {
    pa[i].x = MUL(x[10 + i], x[i]);
    pa[i].id = 7 * mt_rank + i;
    pa[i].y[0] = SIN(x[10 + i]);
    pa[i].y[1] = MUL(x[11 - i], x[5]);
    pa[i].w = 1.5 + mt_rank + i;
  }
}

/* What arrived, into y: the gaps of b keep their constants. */
static void V(out)(REAL *x, const REAL *b, const PART *pb, REAL *y) {
  for (int i = 0; i < 10; i++) y[i] = ADD(MUL(b[i], x[i]), SIN(b[i]));
  for (int i = 0; i < 2; i++) y[10 + i] = ADD(MUL(pb[i].x, K(pb[i].w + pb[i].id)), MUL(pb[i].y[0], pb[i].y[1]));
}

/* The start of the point-to-point programs: the types made, what to send
 * filled from x, the receive buffers b (constants, which the gaps keep) and
 * pb (zeros). */
static void V(start)(REAL *x, REAL *a, PART *pa, REAL *b, PART *pb) {
  V(init_types)();
  memset(pb, 0, 2 * sizeof *pb);
  V(fill)(x, a, pa);
  for (int i = 0; i < 10; i++) b[i] = K(0.25 * i);
}

/* Their end: what arrived into y, the types freed. */
static void V(finish)(REAL *x, const REAL *b, const PART *pb, REAL *y) {
  V(out)(x, b, pb, y);
  V(free_types)();
}

static void V(p_modes)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int mode = *(int *)ctx, p = mt_size, right = (mt_rank + 1) % p, left = (mt_rank + p - 1) % p;
  REAL a[10], b[10];
  PART pa[2], pb[2];
  V(start)(x, a, pa, b, pb);
  REQ q[4] = {REQNULL, REQNULL, REQNULL, REQNULL};
  C(irecv, Irecv)(b, 2, V(vec), left, 3, MPI_COMM_WORLD, &q[0]);
  C(irecv, Irecv)(pb, 2, V(part), left, 4, MPI_COMM_WORLD, &q[1]);
  MPI_Barrier(MPI_COMM_WORLD); /* the receives are posted (ready mode) */
  if (mode == 0) {
    C(issend, Issend)(a, 2, V(vec), right, 3, MPI_COMM_WORLD, &q[2]);
    C(issend, Issend)(pa, 2, V(part), right, 4, MPI_COMM_WORLD, &q[3]);
  } else if (mode == 1) {
    C(ibsend, Ibsend)(a, 2, V(vec), right, 3, MPI_COMM_WORLD, &q[2]);
    C(ibsend, Ibsend)(pa, 2, V(part), right, 4, MPI_COMM_WORLD, &q[3]);
  } else {
    C(irsend, Irsend)(a, 2, V(vec), right, 3, MPI_COMM_WORLD, &q[2]);
    C(irsend, Irsend)(pa, 2, V(part), right, 4, MPI_COMM_WORLD, &q[3]);
  }
  C(waitall, Waitall)(4, q, MPI_STATUSES_IGNORE);
  V(finish)(x, b, pb, y);
}

/* Persistent requests started twice, the values changing in between. */
static void V(p_persist)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int mode = *(int *)ctx, p = mt_size, right = (mt_rank + 1) % p, left = (mt_rank + p - 1) % p;
  REAL a[10], b[10], acc[10];
  PART pa[2], pb[2], pacc[2];
  V(start)(x, a, pa, b, pb);
  for (int i = 0; i < 10; i++) acc[i] = b[i];
  REQ q[4] = {REQNULL, REQNULL, REQNULL, REQNULL};
  C(recv_init, Recv_init)(b, 2, V(vec), left, 5, MPI_COMM_WORLD, &q[0]);
  C(recv_init, Recv_init)(pb, 2, V(part), left, 6, MPI_COMM_WORLD, &q[1]);
  switch (mode) {
  case 0:
    C(send_init, Send_init)(a, 2, V(vec), right, 5, MPI_COMM_WORLD, &q[2]);
    C(send_init, Send_init)(pa, 2, V(part), right, 6, MPI_COMM_WORLD, &q[3]);
    break;
  case 1:
    C(ssend_init, Ssend_init)(a, 2, V(vec), right, 5, MPI_COMM_WORLD, &q[2]);
    C(ssend_init, Ssend_init)(pa, 2, V(part), right, 6, MPI_COMM_WORLD, &q[3]);
    break;
  case 2:
    C(bsend_init, Bsend_init)(a, 2, V(vec), right, 5, MPI_COMM_WORLD, &q[2]);
    C(bsend_init, Bsend_init)(pa, 2, V(part), right, 6, MPI_COMM_WORLD, &q[3]);
    break;
  default:
    C(rsend_init, Rsend_init)(a, 2, V(vec), right, 5, MPI_COMM_WORLD, &q[2]);
    C(rsend_init, Rsend_init)(pa, 2, V(part), right, 6, MPI_COMM_WORLD, &q[3]);
    break;
  }
  for (int it = 0; it < 2; it++) {
    C(startall, Startall)(2, q);
    MPI_Barrier(MPI_COMM_WORLD); /* ready mode */
    C(startall, Startall)(2, q + 2);
    C(waitall, Waitall)(4, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 10; i++) {
      acc[i] = ADD(acc[i], MUL(b[i], K(it + 1)));
      a[i] = MUL(a[i], x[(i + 3) % 12]);
    }
    for (int i = 0; i < 2; i++) {
      pacc[i] = pb[i];
      pa[i].x = SIN(pa[i].x);
      pa[i].w += 1.0;
    }
  }
  for (int k = 0; k < 4; k++) C(request_free, Request_free)(&q[k]);
  V(finish)(x, acc, pacc, y);
}

/* Matched probes: mprobe + mrecv on the vector, improbe + imrecv on the
 * particles. */
static void V(p_mrecv)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  int p = mt_size, right = (mt_rank + 1) % p, left = (mt_rank + p - 1) % p;
  REAL a[10], b[10];
  PART pa[2], pb[2];
  V(start)(x, a, pa, b, pb);
  REQ q[3] = {REQNULL, REQNULL, REQNULL};
  C(isend, Isend)(a, 2, V(vec), right, 7, MPI_COMM_WORLD, &q[0]);
  C(isend, Isend)(pa, 2, V(part), right, 8, MPI_COMM_WORLD, &q[1]);
  MSG msg;
  MPI_Status st;
  C(mprobe, Mprobe)(left, 7, MPI_COMM_WORLD, &msg, &st);
  int cnt = -1;
  MPI_Get_count(&st, V(vec), &cnt);
  MT_CHECK(cnt == 2);
  C(mrecv, Mrecv)(b, 2, V(vec), &msg, &st);
  int flag = 0;
  while (!flag) C(improbe, Improbe)(left, 8, MPI_COMM_WORLD, &flag, &msg, &st);
  C(imrecv, Imrecv)(pb, 2, V(part), &msg, &q[2]);
  C(waitall, Waitall)(3, q, MPI_STATUSES_IGNORE);
  V(finish)(x, b, pb, y);
}

/* Particles (active and passive fields) in the collectives that move data:
 * ctx 0 blocking, 1 nonblocking, 2 in place where MPI allows it. */
static void V(p_mixed)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int k = *(int *)ctx, p = mt_size, me = mt_rank, root = p - 1;
  V(init_types)();
  PART mine[2], *all = calloc((size_t)(2 * p + 1), sizeof(PART)), *all2 = calloc((size_t)(2 * p + 1), sizeof(PART));
  PART *all3 = calloc((size_t)(2 * p + 1), sizeof(PART)), got[2];
  REAL a[10];
  V(fill)(x, a, mine);
  memset(got, 0, sizeof got);
  int *cnt = malloc(sizeof(int) * 4 * (size_t)p), *dsp = cnt + p, *rc = cnt + 2 * p, *rd = cnt + 3 * p;
  for (int j = 0; j < p; j++) {
    cnt[j] = 1 + j % 2;
    dsp[j] = 2 * (p - 1 - j);
    rc[j] = 1 + me % 2; /* what rank j sends here */
    rd[j] = 2 * j;
  }
  for (int i = 0; i < 2 * p; i++) {
    all[i].x = MUL(x[i % 12], K(1.0 + i));
    all[i].id = 1000 * me + i;
    all[i].y[0] = all[i].y[1] = K(0.5 * i);
    all[i].w = -1.0 - i;
    all3[i] = all2[i] = all[i];
  }
  REQ q[5] = {REQNULL, REQNULL, REQNULL, REQNULL, REQNULL};
  if (k == 2) { /* in place */
    all[2 * me] = mine[0];
    all[2 * me + 1] = mine[1];
    C(allgather, Allgather)(MPI_IN_PLACE, 0, V(part), all, 2, V(part), MPI_COMM_WORLD);
    if (me == root) {
      all2[dsp[root]] = mine[0];
      if (cnt[root] > 1) all2[dsp[root] + 1] = mine[1];
    }
    C(gatherv, Gatherv)
    (me == root ? MPI_IN_PLACE : (void *)mine, cnt[me], V(part), all2, cnt, dsp, V(part), root, MPI_COMM_WORLD);
    C(alltoall, Alltoall)(MPI_IN_PLACE, 0, V(part), all3, 2, V(part), MPI_COMM_WORLD);
    C(scatter, Scatter)(all, 2, V(part), me == root ? MPI_IN_PLACE : (void *)got, 2, V(part), root, MPI_COMM_WORLD);
  } else if (k == 1) {
    C(iallgather, Iallgather)(mine, 2, V(part), all, 2, V(part), MPI_COMM_WORLD, &q[0]);
    C(igatherv, Igatherv)(mine, cnt[me], V(part), all2, cnt, dsp, V(part), root, MPI_COMM_WORLD, &q[1]);
    C(ialltoall, Ialltoall)(all + 2 * p, 0, V(part), all3, 0, V(part), MPI_COMM_WORLD, &q[2]);
    C(iscatterv, Iscatterv)(all3, cnt, dsp, V(part), got, cnt[me], V(part), root, MPI_COMM_WORLD, &q[3]);
    C(ibcast, Ibcast)(mine, 2, V(part), 0, MPI_COMM_WORLD, &q[4]);
    C(waitall, Waitall)(5, q, MPI_STATUSES_IGNORE);
  } else {
    C(allgather, Allgather)(mine, 2, V(part), all, 2, V(part), MPI_COMM_WORLD);
    C(gatherv, Gatherv)(mine, cnt[me], V(part), all2, cnt, dsp, V(part), root, MPI_COMM_WORLD);
    C(alltoallv, Alltoallv)(all, cnt, dsp, V(part), all3, rc, rd, V(part), MPI_COMM_WORLD);
    C(scatterv, Scatterv)(all3, cnt, dsp, V(part), got, cnt[me], V(part), root, MPI_COMM_WORLD);
  }
  for (int i = 0; i < 12; i++) {
    const PART *u = &all[i % (2 * p)], *v = &all2[(i + 1) % (2 * p)], *w = &all3[(i + 2) % (2 * p)];
    y[i] = ADD(MUL(u->x, K(u->w + u->id % 7)), MUL(v->y[1], K(v->w - v->id % 5)));
    y[12 + i] = ADD(MUL(w->y[0], K(w->id % 11 + w->w)), SIN(got[i % 2].x));
  }
  y[0] = ADD(y[0], MUL(mine[1].y[0], K(mine[1].w + mine[0].id)));
  /* neighbours on the ring that is not periodic: its ends keep what they hold */
  PART nb[2];
  for (int i = 0; i < 2; i++) {
    nb[i].x = nb[i].y[0] = nb[i].y[1] = K(3.0 + i);
    nb[i].id = -5 - i;
    nb[i].w = 0.25;
  }
  if (k == 1) {
    C(ineighbor_alltoall, Ineighbor_alltoall)(mine, 1, V(part), nb, 1, V(part), ring[1], &q[0]);
    C(wait, Wait)(&q[0], MPI_STATUS_IGNORE);
  } else {
    C(neighbor_allgather, Neighbor_allgather)(mine + 1, 1, V(part), nb, 1, V(part), ring[1]);
  }
  for (int i = 0; i < 2; i++) y[1 + i] = ADD(y[1 + i], MUL(nb[i].x, ADD(nb[i].y[1], K(nb[i].w * nb[i].id))));
  free(all);
  free(all2);
  free(all3);
  free(cnt);
  V(free_types)();
}

/* The neighbourhood collectives on the vector type around the ring (ctx: 1
 * and 3 not periodic, where the ends keep what they hold; 2 and 3
 * nonblocking). */
static void V(p_neighbor)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int k = *(int *)ctx, nonb = k >= 2;
  MPI_Comm comm = ring[k & 1];
  V(init_types)();
  REAL a[15], b[15], c[15], d[15];
  for (int i = 0; i < 15; i++) {
    a[i] = MUL(x[i % 12], x[(i + 5) % 12]);
    b[i] = c[i] = d[i] = K(0.5 + i);
  }
  REQ q[4] = {REQNULL, REQNULL, REQNULL, REQNULL};
  int sc[2] = {1, 2}, sd[2] = {0, 1}, rc[2] = {2, 1}, rd[2] = {0, 2}, gc[2] = {1, 1}, gd[2] = {1, 0};
  if (nonb) {
    C(ineighbor_allgather, Ineighbor_allgather)(a, 1, V(vec), b, 1, V(vec), comm, &q[0]);
    C(ineighbor_alltoall, Ineighbor_alltoall)(a + 5, 1, V(vec), c, 1, V(vec), comm, &q[1]);
    C(ineighbor_alltoallv, Ineighbor_alltoallv)(a, sc, sd, V(vec), d, rc, rd, V(vec), comm, &q[2]);
    C(waitall, Waitall)(3, q, MPI_STATUSES_IGNORE);
  } else {
    C(neighbor_allgather, Neighbor_allgather)(a, 1, V(vec), b, 1, V(vec), comm);
    C(neighbor_alltoall, Neighbor_alltoall)(a + 5, 1, V(vec), c, 1, V(vec), comm);
    C(neighbor_alltoallv, Neighbor_alltoallv)(a, sc, sd, V(vec), d, rc, rd, V(vec), comm);
  }
  for (int i = 0; i < 12; i++) y[i] = ADD(MUL(b[i], c[i + 1]), SIN(d[i]));
  /* allgatherv with the slots swapped, and alltoallw with a type per slot */
  REAL e[15], f[15];
  for (int i = 0; i < 15; i++) e[i] = f[i] = K(1.0 - 0.1 * i);
  MPI_Datatype st[2] = {V(vec), V(c3)}, rt[2] = {V(c3), V(vec)};
  int wc[2] = {1, 1};
  MPI_Aint wsd[2] = {0, 9 * (MPI_Aint)sizeof(REAL)}, wrd[2] = {5 * (MPI_Aint)sizeof(REAL), 0};
  if (nonb) {
    C(ineighbor_allgatherv, Ineighbor_allgatherv)(a + 2, 1, V(vec), e, gc, gd, V(vec), comm, &q[0]);
    C(ineighbor_alltoallw, Ineighbor_alltoallw)(a, wc, wsd, st, f, wc, wrd, rt, comm, &q[1]);
    C(waitall, Waitall)(2, q, MPI_STATUSES_IGNORE);
  } else {
    C(neighbor_allgatherv, Neighbor_allgatherv)(a + 2, 1, V(vec), e, gc, gd, V(vec), comm);
    C(neighbor_alltoallw, Neighbor_alltoallw)(a, wc, wsd, st, f, wc, wrd, rt, comm);
  }
  for (int i = 0; i < 12; i++) y[12 + i] = ADD(MUL(e[i], x[i]), MUL(f[i], f[i + 1]));
  V(free_types)();
}

/* Alltoallw with a type per peer: the vector to even ranks, three
 * contiguous elements to odd ones; received as three AD_MPI_REAL, or one
 * contiguous triple. ctx: 0 blocking, 1 nonblocking, 2 in place. */
static void V(p_alltoallw)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int k = *(int *)ctx, p = mt_size;
  V(init_types)();
  REAL *a = malloc(sizeof(REAL) * (size_t)(5 * p + 1)), *b = malloc(sizeof(REAL) * (size_t)(5 * p + 1));
  int *sc = malloc(sizeof(int) * 4 * (size_t)p), *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
  MPI_Datatype *st = malloc(sizeof(MPI_Datatype) * 2 * (size_t)p), *rt = st + p;
  for (int i = 0; i < 5 * p; i++) {
    a[i] = MUL(x[i % 12], x[(i + mt_rank) % 12]);
    b[i] = K(2.0 - 0.125 * i);
  }
  for (int j = 0; j < p; j++) {
    sc[j] = 1;
    st[j] = j % 2 ? V(c3) : V(vec);
    sd[j] = 5 * j * (int)sizeof(REAL);
    rc[j] = mt_rank % 3 == 0 ? 3 : 1;
    rt[j] = mt_rank % 3 == 0 ? RT : V(c3);
    rd[j] = (5 * (p - 1 - j) + 1) * (int)sizeof(REAL);
  }
  if (k == 2) { /* in place: the receive layout holds what is sent */
    for (int i = 0; i < 5 * p; i++) b[i] = a[i];
    C(alltoallw, Alltoallw)(MPI_IN_PLACE, sc, sd, st, b, rc, rd, rt, MPI_COMM_WORLD);
  } else if (k == 1) {
    REQ q = REQNULL;
    C(ialltoallw, Ialltoallw)(a, sc, sd, st, b, rc, rd, rt, MPI_COMM_WORLD, &q);
    C(wait, Wait)(&q, MPI_STATUS_IGNORE);
  } else {
    C(alltoallw, Alltoallw)(a, sc, sd, st, b, rc, rd, rt, MPI_COMM_WORLD);
  }
  for (int i = 0; i < 24; i++) y[i] = i < 5 * p ? ADD(MUL(b[i], x[i % 12]), SIN(b[i])) : x[i % 12];
  free(a);
  free(b);
  free(sc);
  free(st);
  V(free_types)();
}

#if MPI_VERSION >= 4
/* Persistent collectives on derived types, each started twice. */
static void V(p_pcoll)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  (void)ctx;
  int p = mt_size;
  V(init_types)();
  REAL a[10], *b = malloc(sizeof(REAL) * (size_t)(5 * p + 1)), c[15];
  for (int i = 0; i < 10; i++) a[i] = MUL(x[i], x[i + 2]);
  for (int i = 0; i < 5 * p; i++) b[i] = K(0.5 * i);
  for (int i = 0; i < 15; i++) c[i] = K(1.0 + i);
  REQ q[2] = {REQNULL, REQNULL};
#if !PLAIN
  C(allgather_init, Allgather_init)(a, 1, V(vec), b, 1, V(vec), MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
  C(neighbor_alltoall_init, Neighbor_alltoall_init)(a, 1, V(c3), c, 1, V(vec), ring[1], MPI_INFO_NULL, &q[1]);
#endif
  for (int i = 0; i < 24; i++) y[i] = K(0.0);
  for (int it = 0; it < 2; it++) {
#if PLAIN
    /* Each start is the nonblocking call (MPI 4.0, 6.12). MPICH 4.0's own
     * persistent collectives on derived types reuse the first start's send
     * data and drop a reference of the types: not a reference here. */
    MPI_Iallgather(a, 1, V(vec), b, 1, V(vec), MPI_COMM_WORLD, &q[0]);
    MPI_Ineighbor_alltoall(a, 1, V(c3), c, 1, V(vec), ring[1], &q[1]);
#else
    C(startall, Startall)(2, q);
#endif
    C(waitall, Waitall)(2, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < 12; i++) {
      y[i] = ADD(y[i], MUL(b[i % (5 * p)], K(it + 1)));
      y[12 + i] = ADD(y[12 + i], SIN(c[i]));
    }
    for (int i = 0; i < 10; i++) a[i] = MUL(a[i], x[i]);
  }
#if !PLAIN
  for (int k = 0; k < 2; k++) C(request_free, Request_free)(&q[k]);
#endif
  free(b);
  V(free_types)();
}
#endif

/* MINLOC/MAXLOC on pairs. Values are distinct (no ties), so that the
 * finite differences see the owner the derivative goes to. */
static void V(p_loc)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int k = *(int *)ctx, p = mt_size, me = mt_rank;
  MPI_Op op = (k == 0 || k == 2 || k == 4 || k == 7 || k == 9 || k == 10) ? MPI_MINLOC : MPI_MAXLOC;
  int total = NL * p;
  RINT *s = malloc(sizeof(RINT) * (size_t)total), *r = malloc(sizeof(RINT) * (size_t)total);
  int *counts = malloc(sizeof(int) * (size_t)p);
  for (int i = 0; i < total; i++) {
    s[i].value = MUL(x[i % NL], K(1.0 + 0.37 * ((i * 7 + me * 3) % 11)));
    s[i].index = 100 * me + i;
    r[i].value = K(-1.0 - i);
    r[i].index = -1;
  }
  for (int j = 0; j < p; j++) counts[j] = 1 + (j % 2) * (NL - 2);
  int got = NL; /* pairs received */
  REQ q = REQNULL;
  switch (k) {
  case 0:
    C(scan, Scan)(s, r, NL, RINT_T, op, MPI_COMM_WORLD);
    break;
  case 1:
    C(exscan, Exscan)(s, r, NL, RINT_T, op, MPI_COMM_WORLD);
    if (me == 0) got = 0; /* undefined on rank 0 */
    break;
  case 2:
    C(reduce_scatter_block, Reduce_scatter_block)(s, r, NL, RINT_T, op, MPI_COMM_WORLD);
    break;
  case 3:
    C(reduce_scatter, Reduce_scatter)(s, r, counts, RINT_T, op, MPI_COMM_WORLD);
    got = counts[me];
    break;
  case 4:
    C(ireduce, Ireduce)(s, r, NL, RINT_T, op, p - 1, MPI_COMM_WORLD, &q);
    if (me != p - 1) got = 0;
    break;
  case 5:
    C(iallreduce, Iallreduce)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, &q);
    break;
  case 6:
    C(iscan, Iscan)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, &q);
    break;
  case 7:
    C(iexscan, Iexscan)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, &q);
    if (me == 0) got = 0;
    break;
  case 8:
    C(ireduce_scatter_block, Ireduce_scatter_block)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, &q);
    break;
  case 9:
    C(ireduce_scatter, Ireduce_scatter)(s, r, counts, RINT_T, op, MPI_COMM_WORLD, &q);
    got = counts[me];
    break;
#if MPI_VERSION >= 4
  case 10:
    C(allreduce_init, Allreduce_init)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    break;
  case 11:
    C(scan_init, Scan_init)(s, r, NL, RINT_T, op, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    break;
  case 12:
    C(reduce_scatter_init, Reduce_scatter_init)(s, r, counts, RINT_T, op, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    got = counts[me];
    break;
#endif
  default:
    break;
  }
  if (k >= 10) {
    for (int it = 0; it < 2; it++) { /* the second start sees new values */
      C(start, Start)(&q);
      C(wait, Wait)(&q, MPI_STATUS_IGNORE);
      for (int i = 0; i < total; i++) s[i].value = MUL(s[i].value, x[(i + 1) % NL]);
    }
    C(request_free, Request_free)(&q);
  } else if (k >= 4) {
    C(wait, Wait)(&q, MPI_STATUS_IGNORE);
  }
  for (int i = 0; i < NL; i++)
    y[i] = i < got ? ADD(MUL(r[i].value, K(1 + r[i].index % 13)), SIN(r[i].value)) : MUL(x[i], x[i]);
  free(s);
  free(r);
  free(counts);
}

/* (1 + a)(1 + b) - 1: associative and commutative, so that MPI's order of
 * application does not matter. */
static void V(uop_fn)(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  REAL *a = in, *b = inout;
  for (int i = 0; i < *len; i++) b[i] = ADD(ADD(a[i], b[i]), MUL(a[i], b[i]));
}

/* ctx: 0 ireduce_scatter, 1 reduce_scatter_init started twice. */
static void V(p_userop)(REAL *x, int n, REAL *y, int m, void *ctx) {
  (void)n;
  (void)m;
  int k = *(int *)ctx, p = mt_size, me = mt_rank;
  MPI_Op op;
  C(op_create, Op_create)(V(uop_fn), 1, &op);
  int *counts = malloc(sizeof(int) * (size_t)p), total = 0;
  for (int j = 0; j < p; j++) total += counts[j] = 1 + (j + 1) % 3;
  REAL *s = malloc(sizeof(REAL) * (size_t)total), r[4];
  for (int i = 0; i < total; i++) s[i] = MUL(x[i % 12], K(0.1 * (1 + (i + me) % 5)));
  for (int i = 0; i < 4; i++) r[i] = K(-2.0);
  REQ q = REQNULL;
  if (k == 0) {
    C(ireduce_scatter, Ireduce_scatter)(s, r, counts, RT, op, MPI_COMM_WORLD, &q);
    C(wait, Wait)(&q, MPI_STATUS_IGNORE);
  }
#if MPI_VERSION >= 4
  else {
    C(reduce_scatter_init, Reduce_scatter_init)(s, r, counts, RT, op, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    for (int it = 0; it < 2; it++) {
      C(start, Start)(&q);
      C(wait, Wait)(&q, MPI_STATUS_IGNORE);
      for (int i = 0; i < total; i++) s[i] = MUL(s[i], ADD(r[i % counts[me]], K(1.0)));
    }
    C(request_free, Request_free)(&q);
  }
#endif
  for (int i = 0; i < 12; i++) y[i] = i < counts[me] ? MUL(r[i], x[i]) : x[i];
  C(op_free, Op_free)(&op);
  free(counts);
  free(s);
}

#endif /* COMBOS_BODY */
