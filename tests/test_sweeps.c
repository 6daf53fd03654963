/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sweeps: the dot-product test on random programs.
 *
 * A seeded generator writes random straight-line programs over n inputs that
 * mix every kind of operation (elementary functions, passive constants,
 * fused statements, preaccumulated regions). Every operation is composed so
 * that it maps bounded values to bounded values inside its domain, so that
 * programs of any length stay finite. For random xdot and ybar the tangent
 * sweep and the reverse sweep must agree:
 *     <ybar, J xdot> (ad_forward) == <J^T ybar, xdot> (ad_reverse),
 * and on smooth programs both match finite differences. Long programs are
 * recorded on tapes with small blocks, so that sweeps cross hundreds of
 * block boundaries.
 */
#include <ariadne.h>

#include "check.h"

/* ------------------------------------------------------------------------ */
/* Random programs                                                           */
/* ------------------------------------------------------------------------ */

enum {
  OP_AVG,      /* (a + b) / 2 */
  OP_HALFDIFF, /* (a - b) / 2 */
  OP_SINMUL,   /* sin(a) * b */
  OP_DIVSQ,    /* a / (b^2 + 1) */
  OP_SIN,
  OP_COS,
  OP_TAN,   /* tan(sin(a) / 2) */
  OP_TANH,
  OP_ATAN,
  OP_ATAN2, /* atan2(a, b^2 + 1) */
  OP_ASIN,  /* asin(0.9 sin a) */
  OP_ACOS,  /* acos(0.5 cos a) */
  OP_SINH,  /* sinh(sin a) */
  OP_COSH,  /* cosh(sin a) */
  OP_ASINH,
  OP_ACOSH, /* acosh(a^2 + 2) */
  OP_ATANH, /* atanh(tanh(a) / 2) */
  OP_EXP,   /* exp(-a^2) */
  OP_EXP2,  /* exp2(sin a) */
  OP_EXPM1, /* expm1(sin a) */
  OP_LOG,   /* log(a^2 + 1) */
  OP_LOG2,  /* log2(a^2 + 1) */
  OP_LOG10, /* log10(a^2 + 1) */
  OP_LOG1P, /* log1p(a^2) */
  OP_LOGEXP, /* log(exp(a)) */
  OP_SQRT,  /* sqrt(a^2 + 1) / 2 */
  OP_CBRT,  /* sin(a) cbrt(b^2 + 1) / 4 */
  OP_POW,   /* atan(pow(exp(a / 4), sin b)) */
  OP_HYPOT, /* hypot(a, b) / 2 */
  OP_FMA,   /* fma(sin a, b, c) / 2 */
  OP_ERF,
  OP_ERFC,
  OP_CONST, /* passive constants and int literals on both sides */
  OP_SUM,   /* sum of k values / k */
  OP_LINCOMB,
  OP_DOT,    /* dot(a_k, sin b_k) / k */
  OP_CUSTOM, /* sin(a) b with user partials */
  OP_REGION, /* a preaccumulated region */
  OP_NEG,
  OP_SMOOTH_COUNT,
  /* Operations with kinks or jumps: fine for the dot-product test, which
   * compares two exact derivatives, but not for finite differences. */
  OP_FABS = OP_SMOOTH_COUNT,
  OP_FMIN,
  OP_FMAX,
  OP_FMOD, /* fmod(a, 3) */
  OP_FLOOR, /* a + floor(b): a passive part */
  OP_COUNT
};

typedef struct instr {
  uint8_t op;
  uint32_t a, b, c; /* pool indices */
  uint32_t k, list; /* fused operations: k entries at list[...] and weight[...] */
} instr;

typedef struct program {
  size_t n, m, len;
  instr *code;
  uint32_t *list;
  double *weight;
  size_t nlist;
  uint32_t *out;
} program;

/* A pool index: mostly one of the last few values (deep chains), sometimes
 * any earlier value (long-range dependencies across many blocks), and
 * sometimes an input. Most operations contract, so without the short paths
 * from the inputs the derivatives of a deep chain would underflow to 0. */
static uint32_t pick(check_rng *r, size_t n, size_t pool) {
  unsigned u = check_rng_below(r, 10);
  if (u < 6) {
    size_t w = pool < 16 ? pool : 16;
    return (uint32_t)(pool - 1 - check_rng_below(r, (unsigned)w));
  }
  if (u < 8) return (uint32_t)check_rng_below(r, (unsigned)pool);
  return (uint32_t)check_rng_below(r, (unsigned)n);
}

static void program_make(program *p, unsigned long long seed, size_t n, size_t m, size_t len, int smooth,
                         size_t big_k) {
  check_rng r = {seed};
  p->n = n;
  p->m = m;
  p->len = len;
  p->code = malloc(len * sizeof *p->code);
  size_t cap = len * 8 + big_k * (len / 1000 + 1) + 16;
  p->list = malloc(cap * sizeof *p->list);
  p->weight = malloc(cap * sizeof *p->weight);
  p->out = malloc(m * sizeof *p->out);
  p->nlist = 0;
  unsigned nops = smooth ? OP_SMOOTH_COUNT : OP_COUNT;
  for (size_t i = 0; i < len; i++) {
    size_t pool = n + i;
    instr *in = &p->code[i];
    in->op = (uint8_t)check_rng_below(&r, nops);
    in->a = pick(&r, n, pool);
    in->b = pick(&r, n, pool);
    in->c = pick(&r, n, pool);
    in->k = 0;
    in->list = (uint32_t)p->nlist;
    if ((in->op == OP_SUM || in->op == OP_LINCOMB || in->op == OP_DOT) && p->nlist + 2 * 6 > cap) in->op = OP_AVG;
    if (in->op == OP_SUM || in->op == OP_LINCOMB || in->op == OP_DOT) {
      /* Mostly short; now and then more than AD_STMT_MAX_ARGS entries, which the library
       * splits into chained statements. */
      in->k = 1 + check_rng_below(&r, 6);
      if (big_k && check_rng_below(&r, 1000) == 0 && p->nlist + 2 * big_k < cap) in->k = (uint32_t)big_k;
      double wsum = 0.0;
      for (uint32_t j = 0; j < 2 * in->k; j++) {
        p->list[p->nlist + j] = pick(&r, n, pool);
        p->weight[p->nlist + j] = check_rng_range(&r, -1.0, 1.0);
        wsum += fabs(p->weight[p->nlist + j]);
      }
      for (uint32_t j = 0; j < 2 * in->k; j++) p->weight[p->nlist + j] /= wsum;
      p->nlist += 2 * in->k;
    }
  }
  /* Outputs: the last value and others from the second half. */
  size_t total = n + len;
  p->out[0] = (uint32_t)(total - 1);
  for (size_t j = 1; j < m; j++) p->out[j] = (uint32_t)(total / 2 + check_rng_below(&r, (unsigned)(total - total / 2)));
}

static void program_free(program *p) {
  free(p->code);
  free(p->list);
  free(p->weight);
  free(p->out);
}

static ad_real apply(const program *p, const instr *in, const ad_real *v) {
  ad_real a = v[in->a], b = v[in->b], c = v[in->c];
  switch (in->op) {
  case OP_AVG: return ad_mul(ad_add(a, b), 0.5);
  case OP_HALFDIFF: return ad_div(ad_sub(a, b), 2);
  case OP_SINMUL: return ad_mul(ad_sin(a), b);
  case OP_DIVSQ: return ad_div(a, ad_add(ad_mul(b, b), 1));
  case OP_SIN: return ad_sin(a);
  case OP_COS: return ad_cos(a);
  case OP_TAN: return ad_tan(ad_mul(ad_sin(a), 0.5));
  case OP_TANH: return ad_tanh(a);
  case OP_ATAN: return ad_atan(a);
  case OP_ATAN2: return ad_atan2(a, ad_add(ad_mul(b, b), 1.0));
  case OP_ASIN: return ad_asin(ad_mul(0.9, ad_sin(a)));
  case OP_ACOS: return ad_acos(ad_mul(ad_cos(a), 0.5));
  case OP_SINH: return ad_sinh(ad_sin(a));
  case OP_COSH: return ad_cosh(ad_sin(a));
  case OP_ASINH: return ad_asinh(a);
  case OP_ACOSH: return ad_acosh(ad_add(ad_mul(a, a), 2));
  case OP_ATANH: return ad_atanh(ad_mul(ad_tanh(a), 0.5));
  case OP_EXP: return ad_exp(ad_neg(ad_mul(a, a)));
  case OP_EXP2: return ad_exp2(ad_sin(a));
  case OP_EXPM1: return ad_expm1(ad_sin(a));
  case OP_LOG: return ad_log(ad_add(ad_mul(a, a), 1));
  case OP_LOG2: return ad_log2(ad_add(1, ad_mul(a, a)));
  case OP_LOG10: return ad_log10(ad_add(ad_mul(a, a), 1.0));
  case OP_LOG1P: return ad_log1p(ad_mul(a, a));
  case OP_LOGEXP: return ad_log(ad_exp(a));
  case OP_SQRT: return ad_mul(ad_sqrt(ad_add(ad_mul(a, a), 1)), 0.5);
  case OP_CBRT: return ad_div(ad_mul(ad_sin(a), ad_cbrt(ad_add(ad_mul(b, b), 1))), 4);
  case OP_POW: return ad_atan(ad_pow(ad_exp(ad_div(a, 4)), ad_sin(b)));
  case OP_HYPOT: return ad_mul(ad_hypot(a, b), 0.5);
  case OP_FMA: return ad_mul(ad_fma(ad_sin(a), b, c), 0.5);
  case OP_ERF: return ad_erf(a);
  case OP_ERFC: return ad_erfc(a);
  case OP_CONST: return ad_sub(ad_mul(2, ad_sin(ad_add(0.25, a))), ad_div(1, ad_add(ad_mul(b, b), 3)));
  case OP_SUM: {
    ad_real t[300];
    uint32_t k = in->k < 300 ? in->k : 300;
    for (uint32_t j = 0; j < k; j++) t[j] = v[p->list[in->list + j]];
    return ad_div(ad_sum(k, t), (double)k);
  }
  case OP_LINCOMB: {
    ad_real t[300];
    uint32_t k = in->k < 300 ? in->k : 300;
    for (uint32_t j = 0; j < k; j++) t[j] = v[p->list[in->list + j]];
    return ad_lincomb(k, p->weight + in->list, t);
  }
  case OP_DOT: {
    ad_real s[300], t[300];
    uint32_t k = in->k < 300 ? in->k : 300;
    for (uint32_t j = 0; j < k; j++) {
      s[j] = v[p->list[in->list + j]];
      t[j] = ad_sin(v[p->list[in->list + k + j]]);
    }
    return ad_div(ad_dot(k, s, t), (double)k);
  }
  case OP_CUSTOM: {
    double av = ad_value(a), bv = ad_value(b);
    ad_real args[2] = {a, b};
    double par[2] = {cos(av) * bv, sin(av)};
    return ad_custom(sin(av) * bv, 2, args, par);
  }
  case OP_REGION: {
    ad_stmt_begin();
    ad_real t = ad_mul(a, b);
    ad_real u = ad_add(ad_sin(t), ad_mul(a, c));
    ad_real w = ad_mul(ad_tanh(u), ad_cos(ad_sub(b, a)));
    return ad_stmt_end(ad_mul(ad_add(w, ad_exp(ad_neg(ad_mul(c, c)))), 0.5));
  }
  case OP_NEG: return ad_neg(a);
  case OP_FABS: return ad_sub(ad_fabs(a), 1);
  case OP_FMIN: return ad_fmin(a, b);
  case OP_FMAX: return ad_fmax(a, ad_sin(b));
  case OP_FMOD: return ad_fmod(a, 3);
  default: return ad_add(ad_mul(a, 0.5), ad_floor(b));
  }
}

/* Run the program: v[0..n) = x, then one value per instruction. */
static void program_run(const program *p, ad_real *v) {
  for (size_t i = 0; i < p->len; i++) v[p->n + i] = apply(p, &p->code[i], v);
}

/* The primal alone, with passive inputs: the values of ad_real code run
 * without a tape. */
static double program_eval(const program *p, const double *x, const double *ybar, ad_real *v) {
  for (size_t j = 0; j < p->n; j++) v[j] = ad_const(x[j]);
  program_run(p, v);
  double s = 0.0;
  for (size_t j = 0; j < p->m; j++) s += ybar[j] * ad_value(v[p->out[j]]);
  return s;
}

/* ------------------------------------------------------------------------ */
/* The dot-product test                                                      */
/* ------------------------------------------------------------------------ */

static int vacuous, directions;

typedef struct dot_result {
  double lhs, rhs, mag; /* <ybar, J xdot>, <J^T ybar, xdot>, scale for the tolerance */
} dot_result;

/* Record p at x on `tape` (reset first) and compare the two sweeps in the
 * direction xdot with weights ybar. v receives the recorded values. */
static dot_result dot_test(ad_tape *tape, const program *p, const double *x, const double *xdot,
                           const double *ybar, ad_real *v) {
  dot_result d = {0, 0, 0};
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  for (size_t j = 0; j < p->n; j++) v[j] = ad_input(x[j]);
  program_run(p, v);
  ad_tape_end(tape);
  CHECK_INT(ad_tape_error(tape), AD_OK);

  ad_tangents_zero(tape);
  for (size_t j = 0; j < p->n; j++) ad_tangent_seed(tape, v[j], xdot[j]);
  CHECK_INT(ad_forward(tape), AD_OK);
  double mag_l = 0.0, mag_r = 0.0;
  for (size_t j = 0; j < p->m; j++) {
    double t = ybar[j] * ad_tangent(tape, v[p->out[j]]);
    d.lhs += t;
    mag_l += fabs(t);
  }
  ad_adjoints_zero(tape);
  for (size_t j = 0; j < p->m; j++) ad_seed(tape, v[p->out[j]], ybar[j]);
  CHECK_INT(ad_reverse(tape), AD_OK);
  for (size_t j = 0; j < p->n; j++) {
    double t = ad_adjoint(tape, v[j]) * xdot[j];
    d.rhs += t;
    mag_r += fabs(t);
  }
  d.mag = mag_l > mag_r ? mag_l : mag_r;
  return d;
}

static void random_vec(check_rng *r, double *x, size_t n, double lo, double hi) {
  for (size_t j = 0; j < n; j++) x[j] = check_rng_range(r, lo, hi);
}

/* One program: record, compare the recorded values with the passive run
 * bit for bit, and run the dot-product test for a few directions. */
static dot_result check_program(ad_tape *tape, unsigned long long seed, size_t n, size_t m, size_t len, int smooth,
                                size_t big_k, int fd) {
  dot_result first = {0, 0, 0};
  program p;
  program_make(&p, seed, n, m, len, smooth, big_k);
  check_rng r = {seed ^ 0xA5A5A5A5ull};
  ad_real *v = malloc((n + len) * sizeof *v);
  ad_real *w = malloc((n + len) * sizeof *w);
  double *x = malloc(n * sizeof *x), *xdot = malloc(n * sizeof *xdot), *ybar = malloc(m * sizeof *ybar);
  random_vec(&r, x, n, -2.0, 2.0);

  for (int dir = 0; dir < 3; dir++) {
    CHECK_CONTEXT("program seed %llu (n %zu, m %zu, len %zu), direction %d", seed, n, m, len, dir);
    random_vec(&r, xdot, n, -1.0, 1.0);
    random_vec(&r, ybar, m, -1.0, 1.0);
    dot_result d = dot_test(tape, &p, x, xdot, ybar, v);
    CHECK(isfinite(d.lhs) && isfinite(d.rhs));
    /* A deep chain of contractions can make a derivative underflow to 0;
     * such directions still check that both sweeps agree on 0, but they
     * are counted so that the test cannot become vacuous. */
    vacuous += d.mag == 0.0;
    directions++;
    if (getenv("ARIADNE_TEST_VERBOSE")) printf("seed %llu dir %d: rel %.3g mag %.3g\n", seed, dir, fabs(d.lhs - d.rhs) / d.mag, d.mag);
    CHECK_CLOSE2(d.lhs, d.rhs, 1e-12, 1e-12 * d.mag);
    if (dir == 0) first = d;

    if (dir == 0) {
      /* Recording changes no value: the passive run is bit-identical. */
      double ignored = program_eval(&p, x, ybar, w);
      (void)ignored;
      size_t same = 0;
      for (size_t i = 0; i < n + len; i++) same += ad_value(v[i]) == ad_value(w[i]);
      CHECK_INT(same, n + len);
    }
    if (fd && dir < 2) {
      /* d/dt <ybar, f(x + t xdot)> at t = 0, Richardson-extrapolated. */
      double *xp = malloc(n * sizeof *xp);
      double h = 1e-3, est[2];
      for (int s = 0; s < 2; s++) {
        double hs = s ? h / 2 : h;
        for (size_t j = 0; j < n; j++) xp[j] = x[j] + hs * xdot[j];
        double fp = program_eval(&p, xp, ybar, w);
        for (size_t j = 0; j < n; j++) xp[j] = x[j] - hs * xdot[j];
        double fm = program_eval(&p, xp, ybar, w);
        est[s] = (fp - fm) / (2 * hs);
      }
      double fdv = (4 * est[1] - est[0]) / 3;
      CHECK_CLOSE2(fdv, d.lhs, 1e-6, 1e-8 * d.mag);
      free(xp);
    }
  }
  free(x);
  free(xdot);
  free(ybar);
  free(v);
  free(w);
  program_free(&p);
  return first;
}

/* The vector-mode sweeps of ad_jacobian against the scalar sweeps: for a
 * random program, ybar^T J xdot from the Jacobian equals the dot products
 * of the scalar forward and reverse sweeps. */
static void check_jacobian_program(ad_tape *tape, unsigned long long seed, size_t n, size_t m, size_t len) {
  program p;
  program_make(&p, seed, n, m, len, 0, 0);
  check_rng r = {seed + 99};
  ad_real *v = malloc((n + len) * sizeof *v);
  double *x = malloc(n * sizeof *x), *xdot = malloc(n * sizeof *xdot), *ybar = malloc(m * sizeof *ybar);
  double *J = malloc(m * n * sizeof *J);
  ad_real *X = malloc(n * sizeof *X), *Y = malloc(m * sizeof *Y);
  random_vec(&r, x, n, -2.0, 2.0);
  random_vec(&r, xdot, n, -1.0, 1.0);
  random_vec(&r, ybar, m, -1.0, 1.0);
  CHECK_CONTEXT("jacobian of program seed %llu (n %zu, m %zu, len %zu)", seed, n, m, len);
  dot_result d = dot_test(tape, &p, x, xdot, ybar, v);
  for (size_t j = 0; j < n; j++) X[j] = v[j];
  for (size_t i = 0; i < m; i++) Y[i] = v[p.out[i]];

  /* All outputs (m > n: tangent sweeps) and the first rows only (m' < n:
   * reverse sweeps); both must give the same numbers. */
  CHECK_INT(ad_jacobian(tape, m, Y, n, X, J), AD_OK);
  double s = 0.0, mag = 0.0;
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      s += ybar[i] * J[i * n + j] * xdot[j];
      mag += fabs(ybar[i] * J[i * n + j] * xdot[j]);
    }
  CHECK_CLOSE2(s, d.lhs, 1e-12, 1e-12 * (mag + d.mag));
  size_t rows = n > 1 ? n - 1 : 1;
  if (rows > m) rows = m;
  double *J2 = malloc(rows * n * sizeof *J2);
  CHECK_INT(ad_jacobian(tape, rows, Y, n, X, J2), AD_OK);
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < n; j++) CHECK_CLOSE2(J2[i * n + j], J[i * n + j], 1e-12, 1e-12 * (1 + fabs(J[i * n + j])));
  free(J2);
  free(J);
  free(X);
  free(Y);
  free(x);
  free(xdot);
  free(ybar);
  free(v);
  program_free(&p);
}

int main(void) {
  int small = check_small();

  /* Many short programs on a default tape, checked against finite
   * differences too. */
  ad_tape *tape = ad_tape_create();
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_sweeps");
  int nshort = small ? 8 : 40;
  for (int k = 0; k < nshort; k++) check_program(tape, 1000 + (unsigned)k, 1 + (size_t)k % 7, 1 + (size_t)k % 5, 200, 1, 0, 1);
  /* With kinks and jumps: the sweeps must still agree exactly. */
  for (int k = 0; k < nshort; k++) check_program(tape, 2000 + (unsigned)k, 2 + (size_t)k % 9, 1 + (size_t)k % 11, 500, 0, 0, 0);
  /* One input, many outputs, and many inputs, one output. */
  check_program(tape, 3001, 1, 40, 2000, 1, 0, 1);
  check_program(tape, 3002, 60, 1, 2000, 1, 0, 1);
  ad_tape_destroy(tape);

  /* Long programs on tapes with the smallest blocks: hundreds of blocks,
   * fused statements of more than AD_STMT_MAX_ARGS arguments, regions that straddle
   * block boundaries. */
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.block_arguments = 1024;
  tape = ad_tape_create_with(&o);
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_sweeps");
  size_t long_len = small ? 4000 : 150000;
  dot_result small_blocks = check_program(tape, 4001, 8, 6, long_len, 0, 300, 0);
  ad_stats st;
  CHECK_INT(ad_tape_stats(tape, &st), AD_OK);
  CHECK(st.blocks >= (small ? 5u : 200u));
  CHECK(st.statements >= 2 * long_len);
  check_program(tape, 4002, 5, 3, long_len / 4, 1, 300, 1);
  check_jacobian_program(tape, 5001, 9, 23, small ? 2000 : 30000);
  check_jacobian_program(tape, 5002, 17, 4, small ? 2000 : 30000);
  ad_tape_destroy(tape);

  CHECK_CONTEXT("non-vacuous directions");
  CHECK(directions >= (small ? 40 : 100));
  CHECK(vacuous * 20 <= directions);

  /* The same long program on a default tape gives the same numbers to the
   * last bit: block boundaries change where the sweeps pause, not the order
   * in which they accumulate. */
  tape = ad_tape_create();
  dot_result big_blocks = check_program(tape, 4001, 8, 6, long_len, 0, 300, 0);
  CHECK_CONTEXT("block size independence");
  CHECK_SAME(big_blocks.lhs, small_blocks.lhs);
  CHECK_SAME(big_blocks.rhs, small_blocks.rhs);
  ad_tape_destroy(tape);
  return check_finish("test_sweeps");
}
