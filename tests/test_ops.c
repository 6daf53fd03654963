/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Elementary operations: every ad_* operation of ariadne.h, with active,
 * double and int arguments. For each operation and point:
 *   - the value equals the <math.h> (or plain C) result exactly;
 *   - the derivative from ad_gradient and from the tangent sweep matches a
 *     closed form written here to 1e-12 relative;
 *   - the closed form itself is confirmed by Richardson-extrapolated central
 *     finite differences to 1e-6 relative.
 * The documented kink and edge rules of the header are checked one by one.
 */
#include <ariadne.h>

#include "check.h"

static ad_tape *tape;

/* Points go through a volatile so that the compiler cannot evaluate a
 * <math.h> call on a constant at compile time: its correctly rounded result
 * may differ in the last bit from the library call the operation makes. */
static double opaque(double x) {
  volatile double v = x;
  return v;
}

static double pi(void) { return acos(-1.0); }

static uint64_t statements(void) {
  ad_stats s;
  CHECK_INT(ad_tape_stats(tape, &s), AD_OK);
  return s.statements;
}

/* Central difference on the exact step (xp - xm), Richardson-extrapolated:
 * the error is O(h^4), so h = 1e-3 of the local length scale leaves both the
 * truncation and the rounding error far below the 1e-6 tolerance. */
static double fd1(double (*f)(double), double x, double h) {
  double xp = x + h, xm = x - h;
  double d1 = (f(xp) - f(xm)) / (xp - xm);
  xp = x + h / 2;
  xm = x - h / 2;
  double d2 = (f(xp) - f(xm)) / (xp - xm);
  return (4.0 * d2 - d1) / 3.0;
}

/* ------------------------------------------------------------------------ */
/* Unary operations                                                          */
/* ------------------------------------------------------------------------ */

typedef struct unary_case {
  const char *name;
  ad_real (*op)(ad_real);
  double (*f)(double);
  double (*df)(double); /* closed form, written from the calculus */
  double (*step)(double);
  double pts[12];
  int npts;
} unary_case;

#define UNARY_WRAPPER(NAME) \
  static ad_real op_##NAME(ad_real x) { return ad_##NAME(x); }
UNARY_WRAPPER(neg)
UNARY_WRAPPER(sin)
UNARY_WRAPPER(cos)
UNARY_WRAPPER(tan)
UNARY_WRAPPER(asin)
UNARY_WRAPPER(acos)
UNARY_WRAPPER(atan)
UNARY_WRAPPER(sinh)
UNARY_WRAPPER(cosh)
UNARY_WRAPPER(tanh)
UNARY_WRAPPER(asinh)
UNARY_WRAPPER(acosh)
UNARY_WRAPPER(atanh)
UNARY_WRAPPER(exp)
UNARY_WRAPPER(exp2)
UNARY_WRAPPER(expm1)
UNARY_WRAPPER(log)
UNARY_WRAPPER(log2)
UNARY_WRAPPER(log10)
UNARY_WRAPPER(log1p)
UNARY_WRAPPER(sqrt)
UNARY_WRAPPER(cbrt)
UNARY_WRAPPER(fabs)
UNARY_WRAPPER(erf)
UNARY_WRAPPER(erfc)

static double f_neg(double x) { return -x; }

static double d_neg(double x) { (void)x; return -1.0; }
static double d_sin(double x) { return cos(x); }
static double d_cos(double x) { return -sin(x); }
static double d_tan(double x) { return 1.0 / (cos(x) * cos(x)); }
static double d_asin(double x) { return 1.0 / sqrt((1.0 - x) * (1.0 + x)); }
static double d_acos(double x) { return -1.0 / sqrt((1.0 - x) * (1.0 + x)); }
static double d_atan(double x) { return 1.0 / (1.0 + x * x); }
static double d_sinh(double x) { return cosh(x); }
static double d_cosh(double x) { return sinh(x); }
/* sech^2 x = 4 / (e^x + e^-x)^2, which keeps full relative accuracy where
 * tanh saturates. */
static double d_tanh(double x) {
  double s = exp(x) + exp(-x);
  return 4.0 / (s * s);
}
static double d_asinh(double x) { return 1.0 / hypot(x, 1.0); }
static double d_acosh(double x) { return 1.0 / sqrt((x - 1.0) * (x + 1.0)); }
static double d_atanh(double x) { return 1.0 / ((1.0 - x) * (1.0 + x)); }
static double d_exp(double x) { return exp(x); }
static double d_exp2(double x) { return exp2(x) * log(2.0); }
static double d_expm1(double x) { return exp(x); }
static double d_log(double x) { return 1.0 / x; }
static double d_log2(double x) { return 1.0 / (x * log(2.0)); }
static double d_log10(double x) { return 1.0 / (x * log(10.0)); }
static double d_log1p(double x) { return 1.0 / (1.0 + x); }
static double d_sqrt(double x) { return sqrt(x) / (2.0 * x); }
static double d_cbrt(double x) { return cbrt(x) / (3.0 * x); }
static double d_fabs(double x) { return x > 0 ? 1.0 : -1.0; }
static double d_erf(double x) { return 2.0 / sqrt(pi()) * exp(-x * x); }
static double d_erfc(double x) { return -2.0 / sqrt(pi()) * exp(-x * x); }

/* Finite-difference steps: a thousandth of the distance over which the
 * function changes character at x. */
static double step_abs(double x) { (void)x; return 1e-3; }
static double step_mag(double x) { return 1e-3 * fmax(1.0, fabs(x)); }
static double step_rel(double x) { return 1e-3 * fabs(x); }
static double step_unit(double x) { return 1e-3 * fmin(1.0, 1.0 - fabs(x)); }
static double step_acosh(double x) { return 1e-3 * fmin(x, x - 1.0); }
static double step_log1p(double x) { return 1e-3 * fmin(fmax(1.0, fabs(x)), 1.0 + x); }

#define PTS(...) {__VA_ARGS__}, (sizeof((double[]){__VA_ARGS__}) / sizeof(double))

static const unary_case unary_cases[] = {
    {"neg", op_neg, f_neg, d_neg, step_mag, PTS(-1e300, -1.0, 0.0, 2.5, 1e300)},
    {"sin", op_sin, sin, d_sin, step_abs, PTS(-1e6, -3.5, -1.0, 0.0, 0.5, 1.5707963267948966, 3.141592653589793, 12.0, 1e6)},
    {"cos", op_cos, cos, d_cos, step_abs, PTS(-1e6, -3.5, -1.0, 0.0, 0.5, 1.5707963267948966, 3.141592653589793, 12.0, 1e6)},
    {"tan", op_tan, tan, d_tan, step_abs, PTS(-1.5, -0.7, 0.0, 0.3, 1.0, 1.5, 100.0)},
    {"asin", op_asin, asin, d_asin, step_unit, PTS(-0.999, -0.5, 0.0, 1e-8, 0.3, 0.9, 0.999)},
    {"acos", op_acos, acos, d_acos, step_unit, PTS(-0.999, -0.5, 0.0, 1e-8, 0.3, 0.9, 0.999)},
    {"atan", op_atan, atan, d_atan, step_mag, PTS(-1e6, -2.0, -0.5, 0.0, 0.5, 3.0, 1e6)},
    {"sinh", op_sinh, sinh, d_sinh, step_abs, PTS(-700.0, -20.0, -1.0, 0.0, 0.5, 3.0, 20.0, 700.0)},
    {"cosh", op_cosh, cosh, d_cosh, step_abs, PTS(-700.0, -20.0, -1.0, 0.0, 0.5, 3.0, 20.0, 700.0)},
    {"tanh", op_tanh, tanh, d_tanh, step_abs, PTS(-20.0, -3.0, -0.5, 0.0, 0.5, 3.0, 8.0, 20.0, 400.0)},
    {"asinh", op_asinh, asinh, d_asinh, step_mag, PTS(-1e6, -3.0, -0.5, 0.0, 0.5, 3.0, 1e6)},
    {"acosh", op_acosh, acosh, d_acosh, step_acosh, PTS(1.0001, 1.5, 3.0, 100.0, 1e6)},
    {"atanh", op_atanh, atanh, d_atanh, step_unit, PTS(-0.99, -0.5, 0.0, 0.5, 0.99)},
    {"exp", op_exp, exp, d_exp, step_abs, PTS(-700.0, -20.0, -1.0, 0.0, 1.0, 20.0, 700.0)},
    {"exp2", op_exp2, exp2, d_exp2, step_abs, PTS(-1000.0, -3.5, 0.0, 1.0, 10.5, 1000.0)},
    {"expm1", op_expm1, expm1, d_expm1, step_abs, PTS(-30.0, -1.0, -1e-10, 0.0, 1e-10, 1.0, 30.0, 700.0)},
    {"log", op_log, log, d_log, step_rel, PTS(1e-300, 1e-5, 0.5, 1.0, 2.0, 1e5, 1e300)},
    {"log2", op_log2, log2, d_log2, step_rel, PTS(1e-300, 1e-5, 0.5, 1.0, 2.0, 1e5, 1e300)},
    {"log10", op_log10, log10, d_log10, step_rel, PTS(1e-300, 1e-5, 0.5, 1.0, 2.0, 1e5, 1e300)},
    {"log1p", op_log1p, log1p, d_log1p, step_log1p, PTS(-0.999, -0.5, -1e-10, 0.0, 1e-10, 1.0, 1e6)},
    {"sqrt", op_sqrt, sqrt, d_sqrt, step_rel, PTS(1e-300, 1e-8, 0.25, 2.0, 1e8, 1e300)},
    {"cbrt", op_cbrt, cbrt, d_cbrt, step_rel, PTS(-1e300, -8.0, -1e-6, 1e-9, 0.5, 27.0, 1e300)},
    {"fabs", op_fabs, fabs, d_fabs, step_rel, PTS(-1e300, -2.0, -1e-300, 1e-300, 3.0, 1e300)},
    {"erf", op_erf, erf, d_erf, step_abs, PTS(-5.0, -1.0, -1e-3, 0.0, 0.5, 2.0, 5.0)},
    {"erfc", op_erfc, erfc, d_erfc, step_abs, PTS(-5.0, -1.0, 0.0, 0.5, 2.0, 5.0, 20.0)},
};

static void check_unary(const unary_case *c, double x) {
  CHECK_CONTEXT("ad_%s at x = %.17g", c->name, x);
  ad_tape_reset(tape);
  ad_real X = ad_input(x);
  uint64_t before = statements();
  ad_real Y = c->op(X);
  CHECK_SAME(ad_value(Y), c->f(x));
  CHECK_INT(statements() - before, 1);

  double want = c->df(x);
  double g = NAN;
  CHECK_INT(ad_gradient(tape, Y, 1, &X, &g), AD_OK);
  CHECK_CLOSE2(g, want, 1e-12, 1e-300);

  /* The tangent sweep from two different seeds: linear in the seed. */
  ad_tangents_zero(tape);
  ad_tangent_seed(tape, X, 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_CLOSE2(ad_tangent(tape, Y), want, 1e-12, 1e-300);
  ad_tangent_seed(tape, X, -2.5);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_CLOSE2(ad_tangent(tape, Y), -2.5 * want, 1e-12, 1e-300);

  /* The closed form against finite differences; the absolute floor is the
   * rounding noise of a difference quotient of values of size |f|. */
  double h = c->step(x);
  double fd = fd1(c->f, x, h);
  CHECK_CLOSE2(fd, want, 1e-6, 1e-12 * fmax(1.0, fabs(c->f(x))) / h);
}

/* ------------------------------------------------------------------------ */
/* Binary and ternary operations                                             */
/* ------------------------------------------------------------------------ */

typedef struct binary_case {
  const char *name;
  ad_real (*aa)(ad_real, ad_real);
  ad_real (*ad)(ad_real, double);
  ad_real (*da)(double, ad_real);
  ad_real (*ai)(ad_real, int);
  ad_real (*ia)(int, ad_real);
  double (*f)(double, double);
  void (*df)(double a, double b, double *da, double *db);
  void (*step)(double a, double b, double *ha, double *hb);
  int selects; /* returns one of its arguments (fmin, fmax) */
  double pts[8][2];
  int npts;
} binary_case;

#define BINARY_WRAPPERS(NAME)                                                   \
  static ad_real NAME##_aa(ad_real a, ad_real b) { return ad_##NAME(a, b); }    \
  static ad_real NAME##_ad(ad_real a, double b) { return ad_##NAME(a, b); }     \
  static ad_real NAME##_da(double a, ad_real b) { return ad_##NAME(a, b); }     \
  static ad_real NAME##_ai(ad_real a, int b) { return ad_##NAME(a, b); }        \
  static ad_real NAME##_ia(int a, ad_real b) { return ad_##NAME(a, b); }
BINARY_WRAPPERS(add)
BINARY_WRAPPERS(sub)
BINARY_WRAPPERS(mul)
BINARY_WRAPPERS(div)
BINARY_WRAPPERS(atan2)
BINARY_WRAPPERS(pow)
BINARY_WRAPPERS(hypot)
BINARY_WRAPPERS(fmin)
BINARY_WRAPPERS(fmax)
BINARY_WRAPPERS(fmod)

static double f_add(double a, double b) { return a + b; }
static double f_sub(double a, double b) { return a - b; }
static double f_mul(double a, double b) { return a * b; }
static double f_div(double a, double b) { return a / b; }

static void d_add(double a, double b, double *da, double *db) { (void)a; (void)b; *da = 1.0; *db = 1.0; }
static void d_sub(double a, double b, double *da, double *db) { (void)a; (void)b; *da = 1.0; *db = -1.0; }
static void d_mul(double a, double b, double *da, double *db) { *da = b; *db = a; }
static void d_div(double a, double b, double *da, double *db) {
  *da = 1.0 / b;
  *db = -(a / b) / b;
}
/* atan2(y, x) is the angle of (x, y): d/dy = x / r^2, d/dx = -y / r^2. */
static void d_atan2(double y, double x, double *dy, double *dx) {
  double r = hypot(x, y);
  *dy = (x / r) / r;
  *dx = -(y / r) / r;
}
/* d/da a^b = b a^b / a, d/db a^b = a^b ln a, for a > 0. */
static void d_pow(double a, double b, double *da, double *db) {
  *da = b * pow(a, b) / a;
  *db = pow(a, b) * log(a);
}
static void d_hypot(double a, double b, double *da, double *db) {
  double r = sqrt(a * a + b * b);
  if (!isfinite(r) || r == 0.0 || r < 1e-150) {
    /* Out of the range of the plain formula: scale first. */
    double s = fmax(fabs(a), fabs(b));
    r = s * sqrt((a / s) * (a / s) + (b / s) * (b / s));
  }
  *da = a / r;
  *db = b / r;
}
static void d_fmin(double a, double b, double *da, double *db) {
  *da = a < b ? 1.0 : 0.0;
  *db = a < b ? 0.0 : 1.0;
}
static void d_fmax(double a, double b, double *da, double *db) {
  *da = a > b ? 1.0 : 0.0;
  *db = a > b ? 0.0 : 1.0;
}
/* fmod(a, b) = a - q b with q = a/b rounded toward zero, constant between jumps. */
static void d_fmod(double a, double b, double *da, double *db) {
  *da = 1.0;
  *db = -(a - fmod(a, b)) / b;
}

static void step_mag2(double a, double b, double *ha, double *hb) {
  *ha = 1e-3 * fmax(1.0, fabs(a));
  *hb = 1e-3 * fmax(1.0, fabs(b));
}
static void step_rel2(double a, double b, double *ha, double *hb) {
  *ha = a != 0.0 ? 1e-3 * fabs(a) : 1e-3;
  *hb = b != 0.0 ? 1e-3 * fabs(b) : 1e-3;
}
/* a^b changes by a factor e^(b h/a) over a step h in a and by a^h in b. */
static void step_pow(double a, double b, double *ha, double *hb) {
  *ha = 1e-3 * fabs(a) / fmax(1.0, fabs(b));
  *hb = 1e-3 / fmax(1.0, fabs(log(fabs(a))));
}
static void step_hypot(double a, double b, double *ha, double *hb) {
  *ha = *hb = 1e-3 * fmax(fabs(a), fabs(b));
}
static void step_minmax(double a, double b, double *ha, double *hb) {
  *ha = *hb = 1e-3 * fabs(a - b);
}
/* Steps small enough that neither a nor b crosses a jump of fmod. */
static void step_fmod(double a, double b, double *ha, double *hb) {
  double r = fabs(fmod(a, b)), q = fmax(1.0, fabs(a / b));
  double room = fmin(r, fabs(b) - r);
  *ha = 1e-3 * room;
  *hb = 1e-3 * room / q;
}

#define BCASE(NAME, F, STEP, SEL, ...)                                                                \
  {                                                                                                    \
    #NAME, NAME##_aa, NAME##_ad, NAME##_da, NAME##_ai, NAME##_ia, F, d_##NAME, STEP,                   \
        SEL, {__VA_ARGS__},                                                                            \
        (int)(sizeof((double[][2]){__VA_ARGS__}) / sizeof(double[2]))                                  \
  }

static const binary_case binary_cases[] = {
    BCASE(add, f_add, step_mag2, 0, {-3, 2}, {0, 0}, {2.5, -0.5}, {1e300, -1e299}, {-1e-300, 1e-300}, {7, 1e-17}),
    BCASE(sub, f_sub, step_mag2, 0, {-3, 2}, {0, 0}, {2.5, -0.5}, {1e300, 1e299}, {-1e-300, 1e-300}, {7, 1e-17}),
    BCASE(mul, f_mul, step_rel2, 0, {-3, 2}, {0, 5}, {2.5, -0.5}, {1e150, -1e150}, {1e-150, 1e150}, {-4, -4}),
    BCASE(div, f_div, step_rel2, 0, {-3, 2}, {0, 5}, {2.5, -0.5}, {1e100, -1e-100}, {1, 1e300}, {-4, -4}),
    BCASE(atan2, atan2, step_hypot, 0, {1, 1}, {-1, 1}, {1, -1}, {-1, -1}, {0, 2}, {3, -1e-3}, {1e6, 1e-6}, {-2, 0}),
    BCASE(pow, pow, step_pow, 0, {2, 3}, {0.5, -1.5}, {3, 0.5}, {10, 100}, {1e-3, 2}, {1e6, -2}, {7, 0}, {1, -3}),
    BCASE(hypot, hypot, step_hypot, 0, {3, 4}, {-3, 4}, {0, 2}, {1e200, 1e200}, {-1e-200, 1e-200}, {5, -12}),
    BCASE(fmin, fmin, step_minmax, 1, {1, 2}, {2, 1}, {-3, -1}, {-1e300, 1e300}, {0, -0.5}, {-2, 5}),
    BCASE(fmax, fmax, step_minmax, 1, {1, 2}, {2, 1}, {-3, -1}, {-1e300, 1e300}, {0, -0.5}, {-2, 5}),
    BCASE(fmod, fmod, step_fmod, 0, {5.5, 2}, {-5.5, 2}, {5.5, -2}, {0.3, 7}, {100.25, 3}, {1e10 + 0.5, 3}, {-7.75, -2}),
};

/* Does v hold a value an int can carry exactly? */
static int int_valued(double v) { return v == trunc(v) && fabs(v) < 1e9; }

enum { MIX_AA, MIX_AD, MIX_DA, MIX_AI, MIX_IA, MIX_COUNT };
static const char *const mix_name[MIX_COUNT] = {"ad_real, ad_real", "ad_real, double", "double, ad_real",
                                                "ad_real, int", "int, ad_real"};

static void check_binary(const binary_case *c, double a, double b, int mix) {
  CHECK_CONTEXT("ad_%s(%s) at (%.17g, %.17g)", c->name, mix_name[mix], a, b);
  ad_tape_reset(tape);
  int act_a = mix != MIX_DA && mix != MIX_IA, act_b = mix != MIX_AD && mix != MIX_AI;
  ad_real A = act_a ? ad_input(a) : ad_const(a);
  ad_real B = act_b ? ad_input(b) : ad_const(b);
  uint64_t before = statements();
  ad_real R;
  switch (mix) {
  case MIX_AA: R = c->aa(A, B); break;
  case MIX_AD: R = c->ad(A, opaque(b)); break;
  case MIX_DA: R = c->da(opaque(a), B); break;
  case MIX_AI: R = c->ai(A, (int)b); break;
  default: R = c->ia((int)a, B); break;
  }
  CHECK_SAME(ad_value(R), c->f(a, b));

  double wa, wb;
  c->df(a, b, &wa, &wb);
  if (!act_a) wa = 0.0;
  if (!act_b) wb = 0.0;
  if (c->selects && wa == 0.0 && wb == 0.0) {
    /* fmin/fmax returned the passive argument: a constant, nothing recorded. */
    CHECK_INT(statements() - before, 0);
    CHECK_INT(R.i, 0);
    return;
  }
  CHECK_INT(statements() - before, 1);
  ad_real X[2] = {A, B};
  double g[2] = {NAN, NAN};
  CHECK_INT(ad_gradient(tape, R, 2, X, g), AD_OK);
  CHECK_CLOSE2(g[0], wa, 1e-12, 1e-300);
  CHECK_CLOSE2(g[1], wb, 1e-12, 1e-300);

  /* Tangent in a generic direction; the floor allows for cancellation. */
  ad_tangents_zero(tape);
  if (act_a) ad_tangent_seed(tape, A, 0.7);
  if (act_b) ad_tangent_seed(tape, B, -1.3);
  CHECK_INT(ad_forward(tape), AD_OK);
  double tw = 0.7 * wa - 1.3 * wb;
  CHECK_CLOSE2(ad_tangent(tape, R), tw, 1e-12, 1e-12 * (fabs(0.7 * wa) + fabs(1.3 * wb)) + 1e-300);

  if (mix != MIX_AA) return;
  double ha, hb;
  c->step(a, b, &ha, &hb);
  double ap = a + ha, am = a - ha, ap2 = a + ha / 2, am2 = a - ha / 2;
  double fda = (4.0 * (c->f(ap2, b) - c->f(am2, b)) / (ap2 - am2) - (c->f(ap, b) - c->f(am, b)) / (ap - am)) / 3.0;
  double bp = b + hb, bm = b - hb, bp2 = b + hb / 2, bm2 = b - hb / 2;
  double fdb = (4.0 * (c->f(a, bp2) - c->f(a, bm2)) / (bp2 - bm2) - (c->f(a, bp) - c->f(a, bm)) / (bp - bm)) / 3.0;
  double fmag = fmax(1.0, fabs(c->f(a, b)));
  CHECK_CLOSE2(fda, wa, 1e-6, 1e-12 * fmag / ha);
  CHECK_CLOSE2(fdb, wb, 1e-6, 1e-12 * fmag / hb);
}

static void test_binary(void) {
  for (size_t k = 0; k < sizeof binary_cases / sizeof *binary_cases; k++) {
    const binary_case *c = &binary_cases[k];
    CHECK(c->npts > 0);
    for (int p = 0; p < c->npts; p++) {
      double a = opaque(c->pts[p][0]), b = opaque(c->pts[p][1]);
      for (int mix = 0; mix < MIX_COUNT; mix++) {
        if (mix == MIX_AI && !int_valued(b)) continue;
        if (mix == MIX_IA && !int_valued(a)) continue;
        check_binary(c, a, b, mix);
      }
    }
  }
}

static ad_real fma_mix(int mask, ad_real A, ad_real B, ad_real C) {
  /* Every combination of active and double arguments. */
  switch (mask) {
  case 0: return ad_fma(ad_value(A), ad_value(B), ad_value(C));
  case 1: return ad_fma(A, ad_value(B), ad_value(C));
  case 2: return ad_fma(ad_value(A), B, ad_value(C));
  case 3: return ad_fma(A, B, ad_value(C));
  case 4: return ad_fma(ad_value(A), ad_value(B), C);
  case 5: return ad_fma(A, ad_value(B), C);
  case 6: return ad_fma(ad_value(A), B, C);
  default: return ad_fma(A, B, C);
  }
}

static void test_fma(void) {
  static const double pts[][3] = {{2, 3, 4}, {-1.5, 0.5, -2}, {0, 0, 0}, {1e150, 1e150, -1e300}, {0.1, 10, -1}};
  for (size_t p = 0; p < sizeof pts / sizeof *pts; p++) {
    double a = opaque(pts[p][0]), b = opaque(pts[p][1]), c = opaque(pts[p][2]);
    for (int mask = 0; mask < 8; mask++) {
      CHECK_CONTEXT("ad_fma(%.17g, %.17g, %.17g), active mask %d", a, b, c, mask);
      ad_tape_reset(tape);
      ad_real A = (mask & 1) ? ad_input(a) : ad_const(a);
      ad_real B = (mask & 2) ? ad_input(b) : ad_const(b);
      ad_real C = (mask & 4) ? ad_input(c) : ad_const(c);
      uint64_t before = statements();
      ad_real R = fma_mix(mask, A, B, C);
      CHECK_SAME(ad_value(R), fma(a, b, c));
      CHECK_INT(statements() - before, mask ? 1 : 0);
      CHECK_INT(R.i != 0, mask != 0);
      if (!mask) continue;
      double want[3] = {(mask & 1) ? b : 0.0, (mask & 2) ? a : 0.0, (mask & 4) ? 1.0 : 0.0};
      ad_real X[3] = {A, B, C};
      double g[3];
      CHECK_INT(ad_gradient(tape, R, 3, X, g), AD_OK);
      for (int k = 0; k < 3; k++) CHECK_SAME(g[k], want[k]);
      ad_tangents_zero(tape);
      if (mask & 1) ad_tangent_seed(tape, A, 1.0);
      if (mask & 2) ad_tangent_seed(tape, B, 2.0);
      if (mask & 4) ad_tangent_seed(tape, C, 4.0);
      CHECK_INT(ad_forward(tape), AD_OK);
      double tw = want[0] + 2.0 * want[1] + 4.0 * want[2];
      CHECK_CLOSE2(ad_tangent(tape, R), tw, 1e-12, 1e-12 * (fabs(want[0]) + fabs(2 * want[1]) + 4));
    }
  }
  /* fma against finite differences in each argument at a generic point. */
  CHECK_CONTEXT("ad_fma finite differences");
  double a = opaque(1.25), b = opaque(-0.75), c = opaque(3.0), h = 1e-3;
  CHECK_CLOSE((fma(a + h, b, c) - fma(a - h, b, c)) / (2 * h), b, 1e-9);
  CHECK_CLOSE((fma(a, b + h, c) - fma(a, b - h, c)) / (2 * h), a, 1e-9);
  CHECK_CLOSE((fma(a, b, c + h) - fma(a, b, c - h)) / (2 * h), 1.0, 1e-9);
}

/* ------------------------------------------------------------------------ */
/* Arithmetic with literal operands                                          */
/* ------------------------------------------------------------------------ */

/* The arithmetic macros accept int literals on either side; the literal is
 * passive, so only the active operand has a partial. */
static void test_literals(void) {
  double x = opaque(1.75);
  CHECK_CONTEXT("int literals");
  ad_tape_reset(tape);
  ad_real X = ad_input(x);
  ad_real r[12];
  double want_v[12], want_d[12];
  int n = 0;
  r[n] = ad_add(X, 2), want_v[n] = x + 2.0, want_d[n++] = 1.0;
  r[n] = ad_add(2, X), want_v[n] = 2.0 + x, want_d[n++] = 1.0;
  r[n] = ad_sub(X, 3), want_v[n] = x - 3.0, want_d[n++] = 1.0;
  r[n] = ad_sub(3, X), want_v[n] = 3.0 - x, want_d[n++] = -1.0;
  r[n] = ad_mul(X, -4), want_v[n] = x * -4.0, want_d[n++] = -4.0;
  r[n] = ad_mul(-4, X), want_v[n] = -4.0 * x, want_d[n++] = -4.0;
  r[n] = ad_div(X, 8), want_v[n] = x / 8.0, want_d[n++] = 0.125;
  r[n] = ad_div(8, X), want_v[n] = 8.0 / x, want_d[n++] = -8.0 / (x * x);
  r[n] = ad_add(X, 1.5f), want_v[n] = x + 1.5, want_d[n++] = 1.0;
  r[n] = ad_mul(2u, X), want_v[n] = 2.0 * x, want_d[n++] = 2.0;
  r[n] = ad_neg(X), want_v[n] = -x, want_d[n++] = -1.0;
  r[n] = ad_sub(X, 10L), want_v[n] = x - 10.0, want_d[n++] = 1.0;
  for (int k = 0; k < n; k++) {
    CHECK_CONTEXT("int literals, case %d", k);
    CHECK_SAME(ad_value(r[k]), want_v[k]);
    double g;
    CHECK_INT(ad_gradient(tape, r[k], 1, &X, &g), AD_OK);
    CHECK_CLOSE(g, want_d[k], 1e-15);
  }

  /* Only numbers: the result is passive and nothing is recorded. */
  CHECK_CONTEXT("passive arithmetic");
  uint64_t before = statements();
  int i = 3;
  ad_real p1 = ad_add(i, 4), p2 = ad_mul(2.5, i), p3 = ad_div(1, 4), p4 = ad_neg(i), p5 = ad_sin(i);
  ad_real p6 = ad_pow(ad_const(2), 10), p7 = ad_sub(ad_const(1.0), ad_const(0.25));
  CHECK_INT(statements(), before);
  CHECK_SAME(ad_value(p1), 7.0);
  CHECK_SAME(ad_value(p2), 7.5);
  CHECK_SAME(ad_value(p3), 0.25); /* not an integer division */
  CHECK_SAME(ad_value(p4), -3.0);
  CHECK_SAME(ad_value(p5), sin(opaque(3.0)));
  CHECK_SAME(ad_value(p6), 1024.0);
  CHECK_SAME(ad_value(p7), 0.75);
  CHECK(p1.i == 0 && p2.i == 0 && p3.i == 0 && p4.i == 0 && p5.i == 0 && p6.i == 0 && p7.i == 0);

  /* A const-qualified active operand selects the active path too. */
  CHECK_CONTEXT("const ad_real operand");
  const ad_real CX = X;
  before = statements();
  ad_real q = ad_mul(CX, CX);
  CHECK_INT(statements() - before, 1);
  double g;
  CHECK_INT(ad_gradient(tape, q, 1, &X, &g), AD_OK);
  CHECK_CLOSE(g, 2.0 * x, 1e-15);
}

/* ------------------------------------------------------------------------ */
/* Documented kink and edge rules                                            */
/* ------------------------------------------------------------------------ */

/* Gradient of a one-operation recording at the given point(s). */
static double grad1(ad_real (*op)(ad_real), double x) {
  ad_tape_reset(tape);
  ad_real X = ad_input(x);
  ad_real Y = op(X);
  double g = NAN;
  CHECK_INT(ad_gradient(tape, Y, 1, &X, &g), AD_OK);
  return g;
}

static void grad2(ad_real (*op)(ad_real, ad_real), double a, double b, double *ga, double *gb) {
  ad_tape_reset(tape);
  ad_real X[2] = {ad_input(a), ad_input(b)};
  ad_real Y = op(X[0], X[1]);
  double g[2] = {NAN, NAN};
  CHECK_INT(ad_gradient(tape, Y, 2, X, g), AD_OK);
  *ga = g[0];
  *gb = g[1];
  /* The tangent sweep applies the same rule. An infinite partial times a
   * zero tangent is NaN in any sum, so only finite rules are compared. */
  if (!isfinite(g[0]) || !isfinite(g[1])) return;
  ad_tangents_zero(tape);
  ad_tangent_seed(tape, X[0], 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_SAME(ad_tangent(tape, Y), g[0]);
  ad_tangents_zero(tape);
  ad_tangent_seed(tape, X[1], 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_SAME(ad_tangent(tape, Y), g[1]);
}

static void test_edges(void) {
  double ga, gb;

  CHECK_CONTEXT("fabs'(0) = 0");
  CHECK_SAME(grad1(op_fabs, 0.0), 0.0);
  CHECK_SAME(grad1(op_fabs, -0.0), 0.0);
  CHECK_SAME(grad1(op_fabs, -1e-320), -1.0); /* subnormals are not zero */

  CHECK_CONTEXT("fmin/fmax ties go to the first argument");
  grad2(fmin_aa, 2.0, 2.0, &ga, &gb);
  CHECK_SAME(ga, 1.0);
  CHECK_SAME(gb, 0.0);
  grad2(fmax_aa, -3.0, -3.0, &ga, &gb);
  CHECK_SAME(ga, 1.0);
  CHECK_SAME(gb, 0.0);
  grad2(fmin_aa, 0.0, -0.0, &ga, &gb);
  CHECK_SAME(ga, 1.0);
  CHECK_SAME(gb, 0.0);

  CHECK_CONTEXT("fmin/fmax ignore a NaN argument as C does");
  ad_tape_reset(tape);
  ad_real X = ad_input(1.5), N = ad_input(NAN);
  ad_real m1 = ad_fmin(X, N), m2 = ad_fmin(N, X), m3 = ad_fmax(X, N), m4 = ad_fmax(N, X);
  CHECK_SAME(ad_value(m1), 1.5);
  CHECK_SAME(ad_value(m2), 1.5);
  CHECK_SAME(ad_value(m3), 1.5);
  CHECK_SAME(ad_value(m4), 1.5);
  ad_real in[2] = {X, N};
  double g[2];
  ad_real ms[4] = {m1, m2, m3, m4};
  for (int k = 0; k < 4; k++) {
    CHECK_INT(ad_gradient(tape, ms[k], 2, in, g), AD_OK);
    CHECK_SAME(g[0], 1.0);
    CHECK_SAME(g[1], 0.0);
  }

  /* Where both partials are exactly zero. */
  static const struct {
    const char *what;
    ad_real (*op)(ad_real, ad_real);
    double a, b;
  } flat[] = {{"atan2 at the origin", atan2_aa, 0.0, 0.0},        {"hypot at the origin", hypot_aa, 0.0, 0.0},
              {"hypot at the origin", hypot_aa, -0.0, 0.0},       {"pow: d/db = 0 for a <= 0", pow_aa, 0.0, 2.0},
              {"pow: d/da x^0 = 0, also at 0", pow_aa, 0.0, 0.0}, {"pow: d/da x^0 = 0", pow_aa, -5.0, 0.0}};
  for (size_t k = 0; k < sizeof flat / sizeof flat[0]; k++) {
    CHECK_CONTEXT("%s: (%g, %g)", flat[k].what, flat[k].a, flat[k].b);
    grad2(flat[k].op, flat[k].a, flat[k].b, &ga, &gb);
    CHECK_SAME(ga, 0.0);
    CHECK_SAME(gb, 0.0);
  }

  CHECK_CONTEXT("pow: d/db = 0 for a <= 0");
  grad2(pow_aa, -2.0, 3.0, &ga, &gb);
  CHECK_CLOSE(ga, 3.0 * 4.0, 1e-15); /* b a^(b-1) */
  CHECK_SAME(gb, 0.0);
  grad2(pow_aa, -0.5, -2.0, &ga, &gb);
  CHECK_CLOSE(ga, -2.0 * pow(-0.5, -3.0), 1e-15);
  CHECK_SAME(gb, 0.0);

  CHECK_CONTEXT("pow: d/da x^0 = 0");
  grad2(pow_aa, 5.0, 0.0, &ga, &gb);
  CHECK_SAME(ga, 0.0);
  CHECK_CLOSE(gb, log(5.0), 1e-15);

  CHECK_CONTEXT("pow: exact at a = 0");
  grad2(pow_aa, 0.0, 1.0, &ga, &gb);
  CHECK_SAME(ga, 1.0);
  grad2(pow_aa, 0.0, 3.0, &ga, &gb);
  CHECK_SAME(ga, 0.0);
  grad2(pow_aa, 0.0, 0.5, &ga, &gb);
  CHECK_SAME(ga, INFINITY);

  CHECK_CONTEXT("infinite derivatives at the domain edges");
  CHECK_SAME(grad1(op_sqrt, 0.0), INFINITY);
  CHECK_SAME(grad1(op_cbrt, 0.0), INFINITY);
  CHECK_SAME(grad1(op_log, 0.0), INFINITY);
  CHECK_SAME(grad1(op_asin, 1.0), INFINITY);
  CHECK_SAME(grad1(op_asin, -1.0), INFINITY);
  CHECK_SAME(grad1(op_acos, 1.0), -INFINITY);
  CHECK_SAME(grad1(op_acosh, 1.0), INFINITY);
  CHECK_SAME(grad1(op_atanh, 1.0), INFINITY);
  CHECK_SAME(grad1(op_atanh, -1.0), INFINITY);
  CHECK_SAME(grad1(op_log1p, -1.0), INFINITY);

  CHECK_CONTEXT("NaN derivatives outside the domain");
  CHECK(isnan(grad1(op_asin, 1.5)));
  CHECK(isnan(grad1(op_acosh, 0.5)));
  CHECK(isnan(grad1(op_log, -1.0)));
  CHECK(isnan(grad1(op_log2, -1.0)));
  CHECK(isnan(grad1(op_log10, -1.0)));
  CHECK(isnan(grad1(op_log1p, -2.0)));
  CHECK(isnan(grad1(op_atanh, 2.0)));
  CHECK(isnan(grad1(op_atanh, -1.5)));
  CHECK(isnan(grad1(op_acos, -1.5)));
  CHECK(isnan(grad1(op_sqrt, -1.0)));

  CHECK_CONTEXT("an unused sqrt(0) does not poison the gradient");
  ad_tape_reset(tape);
  ad_real Z = ad_input(0.0);
  ad_real unused = ad_sqrt(Z);
  ad_real Y = ad_mul(Z, 3);
  (void)unused;
  double gz = NAN;
  CHECK_INT(ad_gradient(tape, Y, 1, &Z, &gz), AD_OK);
  CHECK_SAME(gz, 3.0);
  ad_tangents_zero(tape);
  ad_tangent_seed(tape, Z, 1.0);
  CHECK_INT(ad_forward(tape), AD_OK);
  CHECK_SAME(ad_tangent(tape, Y), 3.0);

  CHECK_CONTEXT("fmod partial -trunc(a/b) with a negative quotient");
  grad2(fmod_aa, -7.5, 2.0, &ga, &gb);
  CHECK_SAME(ga, 1.0);
  CHECK_SAME(gb, 3.0);
}

/* floor, ceil, round and trunc are piecewise constant: passive results. */
static void test_rounding(void) {
  static const double pts[] = {-2.5, -1.5, -0.5, -0.0, 0.0, 0.4, 0.5, 1.5, 2.5, 4503599627370495.5, 1e300};
  for (size_t k = 0; k < sizeof pts / sizeof *pts; k++) {
    double x = opaque(pts[k]);
    CHECK_CONTEXT("rounding at %.17g", x);
    ad_tape_reset(tape);
    ad_real X = ad_input(x);
    uint64_t before = statements();
    ad_real f = ad_floor(X), c = ad_ceil(X), r = ad_round(X), t = ad_trunc(X);
    CHECK_INT(statements(), before);
    CHECK(f.i == 0 && c.i == 0 && r.i == 0 && t.i == 0);
    CHECK_SAME(ad_value(f), floor(x));
    CHECK_SAME(ad_value(c), ceil(x));
    CHECK_SAME(ad_value(r), round(x));
    CHECK_SAME(ad_value(t), trunc(x));
    CHECK(signbit(ad_value(t)) == signbit(trunc(x)));
    /* Used in an expression, they contribute nothing to the derivative. */
    ad_real y = ad_add(ad_mul(X, 2), ad_add(ad_add(f, c), ad_add(r, t)));
    double g;
    CHECK_INT(ad_gradient(tape, y, 1, &X, &g), AD_OK);
    CHECK_SAME(g, 2.0);
    double gp = 1.0;
    CHECK_INT(ad_gradient(tape, f, 1, &X, &gp), AD_ERR_PASSIVE);
    CHECK_SAME(gp, 0.0);
  }
}

/* ------------------------------------------------------------------------ */
/* Comparisons                                                               */
/* ------------------------------------------------------------------------ */

static void test_comparisons(void) {
  static const double pairs[][2] = {{1, 2}, {2, 1}, {2, 2}, {-0.0, 0.0}, {-1e300, 1e300}};
  ad_tape_reset(tape);
  for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++) {
    double a = opaque(pairs[k][0]), b = opaque(pairs[k][1]);
    CHECK_CONTEXT("comparisons of %g and %g", a, b);
    ad_real A = ad_input(a), B = ad_input(b);
    uint64_t before = statements();
#define CMP(OP, COP)                         \
  CHECK_INT(ad_##OP(A, B), a COP b);         \
  CHECK_INT(ad_##OP(A, b), a COP b);         \
  CHECK_INT(ad_##OP(a, B), a COP b);         \
  CHECK_INT(ad_##OP(a, b), a COP b);         \
  CHECK_INT(ad_##OP(A, ad_const(b)), a COP b);
    CMP(lt, <)
    CMP(le, <=)
    CMP(gt, >)
    CMP(ge, >=)
    CMP(eq, ==)
    CMP(ne, !=)
#undef CMP
    CHECK_INT(statements(), before);
  }
  /* Int literals on either side. */
  CHECK_CONTEXT("comparisons with int literals");
  ad_real T = ad_input(2.0);
  CHECK(ad_lt(T, 3) && !ad_lt(T, 2) && ad_le(T, 2) && ad_gt(3, T) && ad_ge(2, T) && !ad_ge(1, T));
  CHECK(ad_eq(T, 2) && ad_eq(2, T) && ad_ne(T, 3) && !ad_ne(2, T));
  ad_real NaN = ad_input(NAN);
  CHECK(!ad_lt(NaN, 1) && !ad_ge(NaN, 1) && !ad_eq(NaN, NaN) && ad_ne(NaN, NaN));
}

int main(void) {
  tape = ad_tape_create();
  CHECK(tape != NULL);
  if (!tape) return check_finish("test_ops");
  ad_tape_begin(tape);

  for (size_t k = 0; k < sizeof unary_cases / sizeof *unary_cases; k++) {
    const unary_case *c = &unary_cases[k];
    CHECK(c->npts > 0);
    for (int p = 0; p < c->npts; p++) check_unary(c, opaque(c->pts[p]));
  }
  test_binary();
  test_fma();
  test_literals();
  test_edges();
  test_rounding();
  test_comparisons();

  ad_tape_end(tape);
  ad_tape_destroy(tape);
  return check_finish("test_ops");
}
