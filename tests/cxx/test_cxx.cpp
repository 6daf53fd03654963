/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * C++ use of Ariadne (ariadne.hpp): operators and math functions on the
 * C struct ad_real. A diffusion kernel written once as a template with
 * plain operators must give the gradient of the same kernel written in C
 * with ad_* calls: to round-off with the header's expressions (one
 * statement per assignment, whose partials are products taken in another
 * order than the per-operation sweep's, so no longer bit for bit), and bit
 * for bit with the same statements when built with
 * ARIADNE_CXX_PER_OPERATION (test_cxx_perop); its
 * gradient must match central differences of the template run on double,
 * every operator must give its closed-form derivative, and checkpointed
 * loops and external functions work from C++ unchanged. Built with every C++ compiler and
 * standard the test suite has (CMake: test_cxx17, test_cxx20, and clang++
 * through tests/cxx/other_compiler.sh). test_cxx_et.cpp tests the
 * expressions themselves.
 */
#include <ariadne.hpp>
#include <ariadne_checkpoint.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../check.h"
#include "shared.h"

static const int N = 24, T = 30;
static const double C = 0.3;

/* The same step as cxx_shared_step_c, in C++'s notation, for any T. */
template <class R> static void step(std::vector<R> &u, const std::vector<R> &old, double c) {
  int n = (int)u.size();
  for (int k = 1; k + 1 < n; k++) {
    R lap = old[k - 1] + old[k + 1] - 2.0 * old[k];
    u[k] = old[k] + c * lap + 0.01 * sin(old[k]);
  }
  u[0] = old[0];
  u[n - 1] = old[n - 1];
}

template <class R> static R energy(const std::vector<R> &u) {
  R s = R(0.0);
  for (const R &x : u) s = s + 0.5 * x * x;
  return s;
}

static double initial(int k) { return 0.2 + 0.5 * std::sin(0.4 * k); }

/* J of the template kernel in double, from x0 + h d. */
static double primal(const double *d, double h) {
  std::vector<double> u(N), old(N);
  for (int k = 0; k < N; k++) u[k] = initial(k) + h * d[k];
  for (int t = 0; t < T; t++) {
    old = u;
    step(u, old, C);
  }
  return energy(u);
}

/* Record the kernel, with C++ operators (cxx) or the C calls, and return the
 * gradient and the statement count. */
static void gradient(bool cxx, double *g, uint64_t *statements) {
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  std::vector<ad_real> x(N), u(N), old(N);
  for (int k = 0; k < N; k++) x[k] = u[k] = ad_input(initial(k));
  for (int s = 0; s < T; s++) {
    old = u;
    if (cxx)
      step(u, old, C);
    else
      cxx_shared_step_c(u.data(), old.data(), N, C);
  }
  ad_real J = cxx ? energy(u) : cxx_shared_energy(u.data(), N);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, J, (size_t)N, x.data(), g), AD_OK);
  ad_stats st;
  ad_tape_stats(t, &st);
  *statements = st.statements;
  ad_tape_destroy(t);
}

static void test_same_as_c(void) {
  CHECK_CONTEXT("operators against the C calls");
  double g_cxx[N], g_c[N];
  uint64_t s_cxx = 0, s_c = 0;
  gradient(true, g_cxx, &s_cxx);
  gradient(false, g_c, &s_c);
#ifdef ARIADNE_CXX_PER_OPERATION
  /* energy() in C++ is 0.5 * x * x per term, the C one ad_mul(ad_mul(0.5, u), u): the same */
  CHECK_INT(s_cxx, s_c);
  for (int k = 0; k < N; k++) CHECK(std::memcmp(&g_cxx[k], &g_c[k], sizeof(double)) == 0);
#else
  /* One statement per assignment: the N inputs, lap and u[k] for each inner
   * cell and step, and one per term of the energy. */
  CHECK_INT(s_cxx, 2 * N + 2 * (N - 2) * T);
  CHECK(s_cxx < s_c);
  for (int k = 0; k < N; k++) CHECK_CLOSE(g_cxx[k], g_c[k], 1e-13);
#endif
  /* and right: central differences of the double instantiation */
  double d[N], dot = 0.0;
  for (int k = 0; k < N; k++) {
    d[k] = std::cos(1.3 * k + 0.2);
    dot += g_cxx[k] * d[k];
  }
  double h = 1e-6, fd = (primal(d, h) - primal(d, -h)) / (2 * h);
  CHECK_CLOSE(dot, fd, 1e-7);
  CHECK(std::fabs(dot) > 1e-3);
}

/* Each operator and function against its closed-form derivative. */
static void test_operators(void) {
  CHECK_CONTEXT("operators and functions");
  const double a = 0.7, b = 1.9;
  struct Case {
    const char *name;
    ad_real (*f)(ad_real, ad_real);
    double dx, dy;
  };
  const Case cases[] = {
      {"x*y+x/3-2*y", [](ad_real x, ad_real y) -> ad_real { return x * y + x / 3.0 - 2.0 * y; }, b + 1.0 / 3.0, a - 2.0},
      {"-(x-y)+(+x)", [](ad_real x, ad_real y) -> ad_real { return -(x - y) + (+x); }, 0.0, 1.0},
      {"1/x - y/x", [](ad_real x, ad_real y) -> ad_real { return 1.0 / x - y / x; }, -1.0 / (a * a) + b / (a * a), -1.0 / a},
      {"compound", [](ad_real x, ad_real y) -> ad_real {
         ad_real z = x; /* z = ((x + y) * x - 1) / 2 */
         z += y;
         z *= x;
         z -= 1.0;
         z /= 2.0;
         z += 0.5;
         z -= 0.5;
         z *= 1.0;
         z /= 1.0;
         return z;
       }, (2 * a + b) / 2, a / 2},
      {"sin cos exp log", [](ad_real x, ad_real y) -> ad_real { return sin(x) * cos(y) + exp(x) - log(y); },
       std::cos(a) * std::cos(b) + std::exp(a), -std::sin(a) * std::sin(b) - 1.0 / b},
      {"sqrt tanh atan", [](ad_real x, ad_real y) -> ad_real { return sqrt(x) + tanh(y) + atan(x * y); },
       0.5 / std::sqrt(a) + b / (1 + a * a * b * b), 1 - std::tanh(b) * std::tanh(b) + a / (1 + a * a * b * b)},
      {"pow", [](ad_real x, ad_real y) -> ad_real { return pow(x, y) + pow(x, 3) + pow(2.0, y); },
       b * std::pow(a, b - 1) + 3 * a * a, std::pow(a, b) * std::log(a) + std::pow(2.0, b) * std::log(2.0)},
      {"atan2 hypot", [](ad_real x, ad_real y) -> ad_real { return atan2(x, y) + hypot(x, y); },
       b / (a * a + b * b) + a / std::hypot(a, b), -a / (a * a + b * b) + b / std::hypot(a, b)},
      {"fmin fmax abs fma", [](ad_real x, ad_real y) -> ad_real { return fmin(x, y) + 2.0 * fmax(x, y) + abs(-x) + fma(x, y, x); },
       1.0 + 1.0 + b + 1.0, 2.0 + a},
  };
  for (const Case &c : cases) {
    CHECK_CONTEXT("%s", c.name);
    ad_tape *t = ad_tape_create();
    ad_tape_begin(t);
    ad_real x = ad_input(a), y = ad_input(b);
    ad_real r = c.f(x, y);
    ad_tape_end(t);
    ad_real in[2] = {x, y};
    double g[2];
    CHECK_INT(ad_gradient(t, r, 2, in, g), AD_OK);
    CHECK_CLOSE(g[0], c.dx, 1e-13);
    CHECK_CLOSE(g[1], c.dy, 1e-13);
    ad_tape_destroy(t);
  }
  CHECK_CONTEXT("values");
  ad_real x = 0.7, y = ad_const(1.9);
  CHECK(x < y && y > x && x <= 0.7 && 0.7 >= x && x == 0.7 && x != y && 2.0 > x && !(x > 2.0));
  CHECK(static_cast<double>(x) == 0.7);
  CHECK(ad_value(x + 1) == 1.7); /* an int operand is a double */
  std::ostringstream os;
  os << x << " " << -y;
  CHECK(os.str() == "0.7 -1.9");
  CHECK_CONTEXT("");
}

/* A checkpointed loop from C++: the C API, a step written with operators. */
static int loop_step(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *p) {
  (void)ud;
  (void)i;
  (void)pb;
  (void)p;
  static std::vector<ad_real> old, v;
  old.assign(u, u + *n);
  v = old;
  step(v, old, C);
  for (size_t k = 0; k < *n; k++) u[k] = v[k];
  return 0;
}

static void test_checkpoint(void) {
  CHECK_CONTEXT("checkpointed loop");
  double g_ckpt[N], g_taped[N];
  uint64_t statements;
  gradient(true, g_taped, &statements);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  std::vector<ad_real> x(N), u(N);
  for (int k = 0; k < N; k++) x[k] = u[k] = ad_input(initial(k));
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = T;
  o.snapshots = 4;
  CHECK_INT(ad_checkpoint_loop(&o, loop_step, nullptr, (size_t)N, u.data(), 0, nullptr), AD_OK);
  ad_real J = energy(u);
  ad_tape_end(t);
  CHECK_INT(ad_gradient(t, J, (size_t)N, x.data(), g_ckpt), AD_OK);
  for (int k = 0; k < N; k++) CHECK(std::memcmp(&g_ckpt[k], &g_taped[k], sizeof(double)) == 0);
  ad_tape_destroy(t);
}

/* An external function from C++: y = (x0 x1, x0 + x1) with its own adjoint,
 * inside operator code. */
static int ext_reverse(void *, size_t, const double *x, double *xbar, size_t, const double *, const double *ybar) {
  xbar[0] += ybar[0] * x[1] + ybar[1];
  xbar[1] += ybar[0] * x[0] + ybar[1];
  return 0;
}

static void test_external(void) {
  CHECK_CONTEXT("external function");
  static const ad_external_ops ops = {ext_reverse, nullptr, nullptr, "product and sum"};
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[2] = {ad_input(0.6), ad_input(1.7)};
  ad_real in[2] = {2.0 * x[0], x[1]};
  ad_real y[2] = {ad_value(in[0]) * ad_value(in[1]), ad_value(in[0]) + ad_value(in[1])};
  CHECK_INT(ad_external(&ops, nullptr, 2, in, 2, y), AD_OK);
  ad_real J = y[0] * y[1] + sin(y[1]);
  ad_tape_end(t);
  double g[2];
  CHECK_INT(ad_gradient(t, J, 2, x, g), AD_OK);
  /* J = p s + sin s, p = 2 x0 x1, s = 2 x0 + x1 */
  double p = 2 * 0.6 * 1.7, sm = 2 * 0.6 + 1.7;
  CHECK_CLOSE(g[0], 2 * 1.7 * sm + (p + std::cos(sm)) * 2, 1e-14);
  CHECK_CLOSE(g[1], 2 * 0.6 * sm + (p + std::cos(sm)), 1e-14);
  ad_tape_destroy(t);
}

int main() {
  test_same_as_c();
  test_operators();
  test_checkpoint();
  test_external();
  return check_finish("test_cxx");
}
