/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne.hpp's expressions: one tape statement per assignment, with the
 * right partials. Every operator and function against central differences
 * of the same generic code run on double; repeated operands merged into one
 * argument; numbers and passive values costing no argument; aliasing
 * (x = x * y + x); `auto` expressions read but not recorded; mixed
 * types on both sides; a partial that is not finite (recorded operation by
 * operation, as the per-operation sweep gives it); expressions inside a
 * preaccumulation region; the containers and library templates that
 * LULESH-style code uses.
 */
#include <ariadne.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../check.h"

static_assert(std::is_trivially_copyable<ad_real>::value, "ad_real stays a C struct");
static_assert(std::is_standard_layout<ad_real>::value, "ad_real stays a C struct");

/* Statements and arguments recorded so far on t. */
static std::pair<uint64_t, uint64_t> counts(const ad_tape *t) {
  ad_stats s;
  ad_tape_stats(t, &s);
  return std::make_pair(s.statements, s.arguments);
}

/* f(x, y) on ad_real: one statement, its gradient against central
 * differences of f on double. */
template <class F> static void check_fd(const char *name, F f, double a, double b) {
  CHECK_CONTEXT("%s at (%g, %g)", name, a, b);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(a), y = ad_input(b);
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  ad_real r = f(x, y);
  std::pair<uint64_t, uint64_t> c1 = counts(t);
  ad_tape_end(t);
  CHECK_INT(c1.first - c0.first, 1);
  CHECK(c1.second - c0.second <= 2); /* x and y at most once each */
  CHECK_CLOSE(ad_value(r), (double)f(a, b), 1e-15);
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
  double h = 1e-6;
  double fx = ((double)f(a + h, b) - (double)f(a - h, b)) / (2 * h);
  double fy = ((double)f(a, b + h) - (double)f(a, b - h)) / (2 * h);
  CHECK_CLOSE2(g[0], fx, 1e-7, 1e-8);
  CHECK_CLOSE2(g[1], fy, 1e-7, 1e-8);
  ad_tape_destroy(t);
}

#define CASE(expr) #expr, [](auto x, auto y) -> decltype(x) { return expr; }

static void test_functions(void) {
  const double a = 0.4, b = 0.7;
  check_fd(CASE(x + y * 2 - 3.5 / x + (-y) + (+x) - x / y), a, b);
  check_fd(CASE(2 * x - y * 3 + 1 / x - 4 - x), a, b); /* int on both sides */
  check_fd(CASE(1.5f * x + y * 2u - 3L / y), a, b);
  check_fd(CASE(sin(x * y) + cos(x - y) * tan(x + y)), a, b);
  check_fd(CASE(asin(x * y) + acos(x - y) + atan(x / y)), a, b);
  check_fd(CASE(sinh(x * y) + cosh(x - y) + tanh(x + y)), a, b);
  check_fd(CASE(tanh(30.0 * x) + tanh(x - 25.0 * y)), a, b); /* saturated */
  check_fd(CASE(asinh(x * y) + acosh(1.0 + x + y) + atanh(x - y)), a, b);
  check_fd(CASE(exp(x * y) + exp2(x - y) + expm1(x + y)), a, b);
  check_fd(CASE(log(x * y) + log2(x + y) + log10(y - x) + log1p(x - y)), a, b);
  check_fd(CASE(sqrt(x * y) + cbrt(x - y) * fabs(x - y) + abs(y - x)), a, b);
  check_fd(CASE(erf(x * y) + erfc(x - y)), a, b);
  check_fd(CASE(atan2(x, y) + atan2(y - x, 0.5) + atan2(2.0, x)), a, b);
  check_fd(CASE(pow(x, y) + pow(x, 3) + pow(2.0, y) + pow(x * y, 0.5)), a, b);
  check_fd(CASE(hypot(x, y) + hypot(x, 2.0) + hypot(3, y)), a, b);
  check_fd(CASE(fmod(7.0 * x, y) + fmod(x, 0.3) + fmod(2.0, y)), 0.43, 0.71); /* off the jumps */
  check_fd(CASE(fmin(x, y) + 2.0 * fmax(x, y) + fmin(x, 0.1) + fmax(1.0, y)), a, b);
  check_fd(CASE(fma(x, y, x) + fma(2.0, x, y) + fma(x, x, 1)), a, b);
  check_fd(CASE(floor(5.0 * x) * y + ceil(x) * x + round(y) + trunc(3 * y) * x), 0.43, 0.71);
  check_fd(CASE(x * x * x * y + y * y / x), a, b); /* repeated operands */
  CHECK_CONTEXT("");
}

/* One statement per expression, each distinct active operand once. */
static void test_statement_shape(void) {
  CHECK_CONTEXT("statement shape");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.5), y = ad_input(1.5), p = 2.0; /* p passive */
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  ad_real z = x * y + x * x + sin(x) - 3.0 * p * y + p;
  std::pair<uint64_t, uint64_t> c1 = counts(t);
  CHECK_INT(c1.first - c0.first, 1);
  CHECK_INT(c1.second - c0.second, 2);
  ad_real q = p * p + 3.0 / p; /* nothing active: no statement, a passive result */
  std::pair<uint64_t, uint64_t> c2 = counts(t);
  CHECK_INT(c2.first - c1.first, 0);
  CHECK(q.i == 0 && ad_value(q) == 5.5);
  z += x * y; /* compound: one statement on z, x, y */
  std::pair<uint64_t, uint64_t> c3 = counts(t);
  CHECK_INT(c3.first - c2.first, 1);
  CHECK_INT(c3.second - c2.second, 3);
  ad_tape_end(t);
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, z, 2, in, g), AD_OK);
  CHECK_CLOSE(g[0], 1.5 + 1.0 + std::cos(0.5) + 1.5, 1e-15);
  CHECK_CLOSE(g[1], 0.5 - 6.0 + 0.5, 1e-15);
  ad_tape_destroy(t);
}

/* The result of an assignment may be one of its operands. */
static void test_aliasing(void) {
  CHECK_CONTEXT("aliasing");
  const double a = 0.8, b = 1.3;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x0 = ad_input(a), y = ad_input(b);
  ad_real x = x0;
  x = x * y + x;   /* x1 = a b + a */
  x *= x + y;      /* x2 = x1 (x1 + b) */
  x = sin(x) / x;  /* x3 = sin(x2) / x2 */
  std::vector<ad_real> v(2, x);
  v[1] = v[0] * v[1] - v[1] * y;
  ad_tape_end(t);
  double x1 = a * b + a, x2 = x1 * (x1 + b), x3 = std::sin(x2) / x2;
  double dx3 = (std::cos(x2) * x2 - std::sin(x2)) / (x2 * x2);
  /* d x1 = (b + 1) da + a db; d x2 = (2 x1 + b) dx1 + x1 db; v1 = x3^2 - x3 b */
  double dx1a = b + 1, dx1b = a;
  double dx2a = (2 * x1 + b) * dx1a, dx2b = (2 * x1 + b) * dx1b + x1;
  double dv = 2 * x3 - b;
  CHECK_CLOSE(ad_value(v[1]), x3 * x3 - x3 * b, 1e-15);
  ad_real in[2] = {x0, y};
  double g[2];
  CHECK_INT(ad_gradient(t, v[1], 2, in, g), AD_OK);
  CHECK_CLOSE(g[0], dv * dx3 * dx2a, 1e-13);
  CHECK_CLOSE(g[1], dv * dx3 * dx2b - x3, 1e-13);
  ad_tape_destroy(t);
}

/* `auto e = a * b;` keeps an expression, which refers to temporaries that
 * end with its statement: its value may be read, but recording it does not
 * compile (misuse.cpp, MISUSE=6 to 8). An expression passed straight on is
 * recorded where it becomes an ad_real. */
static ad_real twice(ad_real p) { return 2.0 * p; }

static void test_auto(void) {
  CHECK_CONTEXT("auto");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(3.0), b = ad_input(5.0);
  auto e = a * b + 1.0;
  static_assert(!std::is_same<decltype(e), ad_real>::value, "auto keeps the expression");
  CHECK(ad_value(e) == 16.0 && static_cast<double>(e) == 16.0 && e > 15.0);
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  ad_real r = twice(a * b + 1.0) + b * b; /* two statements: twice's argument, then r */
  std::pair<uint64_t, uint64_t> c1 = counts(t);
  CHECK_INT(c1.first - c0.first, 3); /* and twice's own */
  ad_tape_end(t);
  CHECK(ad_value(r) == 32.0 + 25.0);
  ad_real in[2] = {a, b};
  double g[2];
  CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
  CHECK_CLOSE(g[0], 2 * 5.0, 1e-15);
  CHECK_CLOSE(g[1], 2 * 3.0 + 2 * 5.0, 1e-15);
  ad_tape_destroy(t);
}

/* a * sqrt(b) with a = b = 0: the per-operation sweep never multiplies by
 * sqrt's infinite partial (the adjoint reaching it is 0), so neither may
 * the expression's product 0 * inf. */
static void test_nonfinite(void) {
  CHECK_CONTEXT("non-finite partial");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real a = ad_input(0.0), b = ad_input(0.0), c = ad_input(2.0);
  ad_real r = a * sqrt(b) + c * c;
  ad_real r_c = ad_add(ad_mul(a, ad_sqrt(b)), ad_mul(c, c));
  ad_tape_end(t);
  ad_real in[3] = {a, b, c};
  double g[3], g_c[3];
  CHECK_INT(ad_gradient(t, r, 3, in, g), AD_OK);
  CHECK_INT(ad_gradient(t, r_c, 3, in, g_c), AD_OK);
  for (int k = 0; k < 3; k++) CHECK(std::memcmp(&g[k], &g_c[k], sizeof(double)) == 0);
  CHECK(g[0] == 0.0 && g[1] == 0.0 && g[2] == 4.0);
  ad_tape_destroy(t);
}

/* Expressions in a preaccumulation region, and more operands than a
 * statement takes or than are merged. */
template <class... T> static ad_real sum_of(const T &...t) { return (t + ...); }
template <std::size_t... K> static ad_real sum70(const ad_real *v, std::index_sequence<K...>) {
  return sum_of(v[K]...);
}

static void test_region_and_size(void) {
  CHECK_CONTEXT("region and size");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.3), y = ad_input(0.9);
  ad_stmt_begin();
  ad_real u = x * y + 1.0;
  ad_real w = sin(u) * x;
  w = ad_stmt_end(w);
  std::vector<ad_real> v(70);
  for (int k = 0; k < 70; k++) v[k] = ad_input(k);
  ad_real s = sum70(v.data(), std::make_index_sequence<70>()); /* a chain of statements */
  ad_real d = sum_of(x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, y); /* 19 x, not merged */
  ad_tape_end(t);
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, w, 2, in, g), AD_OK);
  double uu = 0.3 * 0.9 + 1.0;
  CHECK_CLOSE(g[0], std::cos(uu) * 0.9 * 0.3 + std::sin(uu), 1e-14);
  CHECK_CLOSE(g[1], std::cos(uu) * 0.3 * 0.3, 1e-14);
  std::vector<double> gv(70);
  CHECK_INT(ad_gradient(t, s, 70, v.data(), gv.data()), AD_OK);
  CHECK(ad_value(s) == 69.0 * 70.0 / 2);
  for (int k = 0; k < 70; k++) CHECK(gv[k] == 1.0);
  CHECK_INT(ad_gradient(t, d, 2, in, g), AD_OK);
  CHECK(g[0] == 19.0 && g[1] == 1.0);
  ad_tape_destroy(t);
}

/* A handle of a reset recording is refused as in C. */
/* Enough statements to fill several blocks: at each new block the
 * statement takes the slow path, which finds the leaves and merges the
 * repeated operand again, and must record what the inline path does. */
static void test_many_blocks(void) {
  CHECK_CONTEXT("many blocks");
  const double a = 0.7, b = 1.1, c = 0.999;
  const int n = 400000;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(a), y = ad_input(b);
  ad_real z = x;
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  for (int k = 0; k < n; k++) z = c * z + x * y + x; /* arguments z, x (named twice), y */
  std::pair<uint64_t, uint64_t> c1 = counts(t);
  ad_tape_end(t);
  CHECK_INT(c1.first - c0.first, n);
  CHECK_INT(c1.second - c0.second, 3 * (long long)n);
  /* The tangents by hand, on double. */
  double zv = a, dx = 1.0, dy = 0.0;
  for (int k = 0; k < n; k++) {
    zv = c * zv + a * b + a;
    dx = c * dx + b + 1.0;
    dy = c * dy + a;
  }
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, z, 2, in, g), AD_OK);
  CHECK_CLOSE(ad_value(z), zv, 1e-12);
  CHECK_CLOSE(g[0], dx, 1e-12);
  CHECK_CLOSE(g[1], dy, 1e-12);
  ad_tape_destroy(t);
}

static void test_stale(void) {
  CHECK_CONTEXT("stale handle");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0);
  ad_tape_reset(t);
  ad_real y = ad_input(2.0);
  ad_real z = x * y + y;
  (void)z;
  ad_tape_end(t);
  CHECK_INT(ad_tape_error(t), AD_ERR_STALE_HANDLE);
  ad_tape_destroy(t);
}

enum colour { red = 1, green = 2 };

/* What a hydro code written for double uses, with ad_real. */
static void test_language(void) {
  CHECK_CONTEXT("language");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.7), y = ad_input(1.9);
  ad_real i = 3, d = 2.5, z; /* construction from int and double */
  z = 4;
  CHECK(z == 4 && 4 == z && d < i && d > 2 && 2.5 <= d && x * y > x && x < x * y && x * y != y * x + 1.0);
  CHECK(x * green == 1.4 && red + x == 1.7);
  CHECK(std::max(x, y) == y && std::min(x, y) == x && std::max<ad_real>(x, x * y) == x * y);
  ad_real c = x < y ? x * y : x; /* the conditional operator takes an expression and an ad_real */
  CHECK(c == x * y);
  std::vector<ad_real> v(4, 0.0);
  v[2] = x * y;
  v.push_back(sin(x));
  ad_real *m = static_cast<ad_real *>(std::malloc(3 * sizeof(ad_real)));
  CHECK(m != nullptr);
  m[0] = x;
  m[1] = m[0] * y;
  std::memcpy(&m[2], &m[1], sizeof(ad_real));
  ad_real j = m[2] + v[2] + v[4];
  std::free(m);
  std::ostringstream os;
  os << x << " " << x * 2 << " " << -y;
  CHECK(os.str() == "0.7 1.4 -1.9");
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  CHECK(ad_value(x * y) == 0.7 * 1.9 && static_cast<double>(x - y) == 0.7 - 1.9 && (double)x == 0.7);
  CHECK(counts(t) == c0); /* values are read without recording */
  ad_tape_end(t);
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, j, 2, in, g), AD_OK);
  CHECK_CLOSE(g[0], 2 * 1.9 + std::cos(0.7), 1e-15);
  CHECK_CLOSE(g[1], 2 * 0.7, 1e-15);
  ad_tape_destroy(t);
}

/* With no tape recording (after ad_tape_end, or before any tape), an
 * expression of values that were active is a passive value, as in C, and
 * leaves the tape as it was. */
static void test_not_recording(void) {
  CHECK_CONTEXT("not recording");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.5), y = ad_input(2.0);
  ad_tape_end(t);
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  ad_real z = x * y + sin(x) * x - y / x;
  ad_real big = x * y + x * x + y * y + x * y * x + y * x * y + x + y + x * x * x + y * y * y;
  CHECK(counts(t) == c0);
  CHECK(z.i == 0 && big.i == 0);
  CHECK_CLOSE(ad_value(z), 0.5 * 2.0 + std::sin(0.5) * 0.5 - 2.0 / 0.5, 1e-15);
  CHECK_CLOSE(ad_value(big), 1.0 + 0.25 + 4.0 + 0.5 + 2.0 + 2.5 + 0.125 + 8.0, 1e-14);
  CHECK_INT(ad_tape_error(t), AD_OK);
  ad_tape_destroy(t);
}

/* A partial that is exactly zero is not an argument (it adds nothing in the
 * sweep), and a statement left with none is not recorded: its result has no
 * handle, but its gradient is a zero gradient, not a misuse. */
static void test_zero_partials(void) {
  CHECK_CONTEXT("zero partials");
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(3.0), y = ad_input(0.0);
  std::pair<uint64_t, uint64_t> c0 = counts(t);
  ad_real z = x * y + 2.0 * y; /* dz/dx = y = 0: only y */
  std::pair<uint64_t, uint64_t> c1 = counts(t);
  CHECK_INT(c1.first - c0.first, 1);
  CHECK_INT(c1.second - c0.second, 1);
  ad_real q = x * 0.0 + fmin(x, 5.0) * 0.0; /* every partial 0: nothing recorded */
  std::pair<uint64_t, uint64_t> c2 = counts(t);
  CHECK(c2 == c1);
  CHECK(q.i == 0 && ad_value(q) == 0.0);
  ad_real m = fmax(x, y) * y + x; /* fmax picks x; d/dx = y + 1 = 1, d/dy = x = 3 */
  ad_tape_end(t);
  ad_real in[2] = {x, y};
  double g[2];
  CHECK_INT(ad_gradient(t, z, 2, in, g), AD_OK);
  CHECK(g[0] == 0.0 && g[1] == 3.0 + 2.0);
  CHECK_INT(ad_gradient(t, m, 2, in, g), AD_OK);
  CHECK(g[0] == 1.0 && g[1] == 3.0);
  /* q depends on x through partials that are all zero: its gradient is
   * zero, not a misuse (a passive value is: AD_ERR_PASSIVE). */
  g[0] = g[1] = 7.0;
  CHECK_INT(ad_gradient(t, q, 2, in, g), AD_OK);
  CHECK(g[0] == 0.0 && g[1] == 0.0);
  ad_seed(t, q, 1.0);
  CHECK_INT(ad_tape_error(t), AD_OK);
  CHECK_INT(ad_gradient(t, ad_real(2.0) * 3.0, 2, in, g), AD_ERR_PASSIVE);
  ad_tape_destroy(t);

  /* A least-squares objective at an exact fit: r = 0, J = r * r / 2. Every
   * partial of J is zero there, and so is the gradient; recorded again by
   * the C operations (which keep zero partials), the same. */
  for (int c = 0; c < 2; c++) {
    t = ad_tape_create();
    ad_tape_begin(t);
    ad_real p = ad_input(2.0);
    ad_real r = c ? ad_sub(ad_mul(p, 1.5), 3.0) : p * 1.5 - 3.0;
    ad_real J = c ? ad_mul(ad_mul(r, r), 0.5) : r * r * 0.5;
    ad_real J2 = c ? ad_add(J, J) : J + J; /* and a result of such a result */
    ad_tape_end(t);
    double gp = 7.0;
    CHECK_INT(ad_gradient(t, J, 1, &p, &gp), AD_OK);
    CHECK(gp == 0.0);
    gp = 7.0;
    CHECK_INT(ad_gradient(t, J2, 1, &p, &gp), AD_OK);
    CHECK(gp == 0.0);
    ad_tape_destroy(t);
  }
}

/* An expression with no active operand is no statement and is not looked
 * at further, as a C operation with no active operand: not on a tape that
 * checks for non-finite values either (sqrt at 0 of a passive value has an
 * infinite partial that nothing records), and not inside a region. Its
 * value is right, and it enters later statements as a number. */
static void test_passive_operands(void) {
  CHECK_CONTEXT("passive operands");
  for (int watch = 0; watch < 2; watch++) {
    ad_tape *t = ad_tape_create();
    ad_tape_set_check_finite(t, watch);
    ad_tape_begin(t);
    ad_real x = ad_input(2.0), p = 0.0, s = 4.0;
    std::pair<uint64_t, uint64_t> c0 = counts(t);
    ad_real q = sqrt(p) * s + 1.0 / (s + 1.0) + p * p; /* 0.2 */
    ad_real qc = ad_add(ad_add(ad_mul(ad_sqrt(p), s), ad_div(1.0, ad_add(s, 1.0))), ad_mul(p, p));
    std::pair<uint64_t, uint64_t> c1 = counts(t);
    CHECK(c1 == c0);
    CHECK(q.i == 0 && q.e == 0 && ad_value(q) == ad_value(qc));
    CHECK_INT(ad_tape_error(t), AD_OK);
    ad_stmt_begin();
    ad_real r = s * s + q; /* inside a region: a number, too */
    CHECK(r.i == 0 && ad_value(r) == 16.2);
    ad_real z = ad_stmt_end(x * r + sqrt(s) * x);
    ad_tape_end(t);
    double g = 0.0;
    CHECK_INT(ad_gradient(t, z, 1, &x, &g), AD_OK);
    CHECK_CLOSE(g, 16.2 + 2.0, 1e-15);
    ad_tape_destroy(t);
  }
}

int main() {
  test_functions();
  test_statement_shape();
  test_aliasing();
  test_auto();
  test_nonfinite();
  test_region_and_size();
  test_many_blocks();
  test_stale();
  test_language();
  test_not_recording();
  test_zero_partials();
  test_passive_operands();
  return check_finish("test_cxx_et");
}
