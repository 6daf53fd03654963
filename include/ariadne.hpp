/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne.hpp: C++ operators and math functions on Ariadne's ad_real.
 *
 * The same struct as in C (ariadne.h), so C and C++ code share arrays,
 * tapes, the MPI wrappers (ariadne_mpi.h), checkpointed loops and external
 * functions.
 *
 *   #include <ariadne.hpp>
 *   ad_real y = x * x + sin(x);   // one tape statement; sin found by ADL
 *   y += 2.0;
 *   std::cout << y << "\n";       // the value
 *   double v = static_cast<double>(y);
 *
 * One statement per expression. An operator or function on ad_real values
 * does not record anything: it builds a small expression object, which
 * holds its value, refers to its ad_real operands and holds its other
 * operands (numbers, smaller expressions) by value. Constructing or
 * assigning an ad_real from it (and +=, -=, *=, /=) records one tape
 * statement, by ad_custom's inline path, inlined where the assignment is
 * (always_inline): its arguments are the
 * active ad_real operands of the whole expression (an ad_real object named
 * twice gets one argument with the sum of the partials; see ad__et_merge for
 * when two names of one object are not found the same, and get an argument
 * each, which the sweep adds), its partials the chain rule's products along
 * the expression, computed from the root down only then. With no tape
 * recording, an assignment computes the value alone, as the double code
 * does (on LULESH the loop on ad_real with no tape costs about half of
 * what it costs on CoDiPack's type; benchmarks/README.md).
 * Numbers and passive values are not arguments, and neither is an operand
 * whose partial is exactly zero (y * x where y = 0, the operand fmin does
 * not return): it would add nothing in the sweep, and a statement left with
 * no argument is not recorded. On LULESH, where most of the mesh is at rest
 * in the first cycles, that leaves 1.1 M of 6.3 M statements. The
 * differences it makes: an infinite or NaN adjoint is not carried through a
 * zero partial (0 * inf), and a result all of whose partials are zero has no
 * handle: it is passive to the operations that read it, and ad_seed or
 * ad_gradient of it gives a zero derivative with AD_OK (ad__et_zero). The
 * gradient is the per-operation recording's to round-off (the partials are
 * multiplied in another order). A partial is tested for zero only where
 * it may be zero (under a product, a quotient or a function; not under sums,
 * differences and negations alone, where it is +1 or -1). Where a product
 * of partials is not finite (a * sqrt(b) with a = 0 and b = 0, whose
 * per-operation sweep skips the sqrt's infinite partial), the expression is
 * recorded operation by operation instead, which gives what the
 * per-operation recording gives. x = x * y + x is right: the
 * statement is made before x is written.
 *
 * An expression lives as long as the statement that makes it: it refers to
 * the temporaries of that statement. `auto e = a * b;` therefore keeps an
 * expression whose value may be read (ad_value(e), static_cast<double>(e),
 * comparisons, <<) but which may not be recorded: `ad_real r = e;`,
 * `e + 1` and `sin(e)` stop the compiler with a static assertion that says
 * so. Write `ad_real e = a * b;`. The same holds for an expression passed as
 * a template argument (template <class T> f(const T &x) called with a * b).
 * What the compiler cannot see is an expression returned from a function or
 * lambda whose return type is deduced (`auto f(ad_real x) { return x * x; }`):
 * it refers to the function's locals, which are gone; declare `-> ad_real`
 * (GCC's -Wall warns of some of these).
 *
 * Not supported, with a compile error: std::max(a, b * c) and other
 * templates that deduce one type from an ad_real and an expression (write
 * std::max<ad_real>, or convert the expression); `c ? a * b : a + b` (two
 * expression types; convert one); an operand that is neither ad_real, an
 * expression nor an arithmetic or enumeration type (a static assertion says
 * so); int(x) for an ad_real or an expression (convert to double first, as
 * ad_real itself requires). Comparisons compare values, as ad_lt and friends
 * do.
 *
 * With ARIADNE_CXX_PER_OPERATION defined before the include, each operator
 * is the C call it stands for instead (`a * b + c` is
 * ad_add(ad_mul(a, b), c), one statement per operation, bit for bit the C
 * version's gradient): the recording of earlier versions, to compare
 * against. After mpi.h, plain MPI calls on ad_real buffers do not compile
 * (see ariadne_mpi.h). With ARIADNE_PASSIVE ad_real is double and
 * everything here is the language's own.
 */
#ifndef ARIADNE_HPP
#define ARIADNE_HPP

#include <cmath>
#include <ostream>

#include "ariadne.h"

/* A program that includes mpi.h before this header gets the MPI layer's
 * declarations, and with them the guard that refuses plain MPI calls on
 * ad_real buffers at compile time (see ariadne_mpi.h; ARIADNE_MPI_NO_GUARD
 * turns it off). */
#if defined(MPI_VERSION) && !defined(ARIADNE_PASSIVE)
#include "ariadne_mpi.h"
#endif

#ifndef ARIADNE_PASSIVE
#ifdef ARIADNE_CXX_PER_OPERATION

/* One overload per operator and function: a double (or integer) operand
 * converts through ad_real's constructor to a passive value, exactly the
 * ad_const(d) that the C calls lift it to. */
inline ad_real operator+(ad_real a, ad_real b) { return ad__add(a, b); }
inline ad_real operator-(ad_real a, ad_real b) { return ad__sub(a, b); }
inline ad_real operator*(ad_real a, ad_real b) { return ad__mul(a, b); }
inline ad_real operator/(ad_real a, ad_real b) { return ad__div(a, b); }
inline ad_real operator-(ad_real a) { return ad__neg(a); }
inline ad_real operator+(ad_real a) { return a; }

inline ad_real &operator+=(ad_real &a, ad_real b) { return a = a + b; }
inline ad_real &operator-=(ad_real &a, ad_real b) { return a = a - b; }
inline ad_real &operator*=(ad_real &a, ad_real b) { return a = a * b; }
inline ad_real &operator/=(ad_real &a, ad_real b) { return a = a / b; }

/* Comparisons of values. */
inline bool operator==(ad_real a, ad_real b) { return a.v == b.v; }
inline bool operator!=(ad_real a, ad_real b) { return a.v != b.v; }
inline bool operator<(ad_real a, ad_real b) { return a.v < b.v; }
inline bool operator<=(ad_real a, ad_real b) { return a.v <= b.v; }
inline bool operator>(ad_real a, ad_real b) { return a.v > b.v; }
inline bool operator>=(ad_real a, ad_real b) { return a.v >= b.v; }

/* Math functions, found by argument-dependent lookup (ad_real is in the
 * global namespace): write sin(x), not std::sin(x). */
inline ad_real sin(ad_real a) { return ad__sin(a); }
inline ad_real cos(ad_real a) { return ad__cos(a); }
inline ad_real tan(ad_real a) { return ad__tan(a); }
inline ad_real asin(ad_real a) { return ad__asin(a); }
inline ad_real acos(ad_real a) { return ad__acos(a); }
inline ad_real atan(ad_real a) { return ad__atan(a); }
inline ad_real sinh(ad_real a) { return ad__sinh(a); }
inline ad_real cosh(ad_real a) { return ad__cosh(a); }
inline ad_real tanh(ad_real a) { return ad__tanh(a); }
inline ad_real asinh(ad_real a) { return ad__asinh(a); }
inline ad_real acosh(ad_real a) { return ad__acosh(a); }
inline ad_real atanh(ad_real a) { return ad__atanh(a); }
inline ad_real exp(ad_real a) { return ad__exp(a); }
inline ad_real exp2(ad_real a) { return ad__exp2(a); }
inline ad_real expm1(ad_real a) { return ad__expm1(a); }
inline ad_real log(ad_real a) { return ad__log(a); }
inline ad_real log2(ad_real a) { return ad__log2(a); }
inline ad_real log10(ad_real a) { return ad__log10(a); }
inline ad_real log1p(ad_real a) { return ad__log1p(a); }
inline ad_real sqrt(ad_real a) { return ad__sqrt(a); }
inline ad_real cbrt(ad_real a) { return ad__cbrt(a); }
inline ad_real fabs(ad_real a) { return ad__fabs(a); }
inline ad_real erf(ad_real a) { return ad__erf(a); }
inline ad_real erfc(ad_real a) { return ad__erfc(a); }
inline ad_real floor(ad_real a) { return ad__floor(a); }
inline ad_real ceil(ad_real a) { return ad__ceil(a); }
inline ad_real round(ad_real a) { return ad__round(a); }
inline ad_real trunc(ad_real a) { return ad__trunc(a); }
inline ad_real abs(ad_real a) { return ad__fabs(a); }
inline ad_real atan2(ad_real a, ad_real b) { return ad__atan2(a, b); }
inline ad_real pow(ad_real a, ad_real b) { return ad__pow(a, b); }
inline ad_real hypot(ad_real a, ad_real b) { return ad__hypot(a, b); }
inline ad_real fmin(ad_real a, ad_real b) { return ad__fmin(a, b); }
inline ad_real fmax(ad_real a, ad_real b) { return ad__fmax(a, b); }
inline ad_real fmod(ad_real a, ad_real b) { return ad__fmod(a, b); }
inline ad_real fma(ad_real a, ad_real b, ad_real c) { return ad__fma(a, b, c); }

/* The value, as a double. */
inline std::ostream &operator<<(std::ostream &o, ad_real x) { return o << x.v; }

#else /* expressions */

#include <cstring>
#include <type_traits>

/* Leaves up to which an expression's repeated operands are also looked for
 * at run time where the compiler cannot tell (see ad__et_merge). */
#ifndef AD__ET_MERGE_MAX
#define AD__ET_MERGE_MAX 8u
#endif
/* The recording path is inlined where the assignment is, whatever the
 * compiler's own limits say: out of line, an expression's tree and leaves
 * are passed through memory, and a function shared by assignments of one
 * shape cannot tell their repeated operands apart at compile time. It has
 * two parts: what runs for every assignment (the no-tape test, and while
 * recording the test that some operand is active; AD__ET_INLINE) and the
 * statement's recording (partials, tests, merging, stores;
 * AD__ET_INLINE_ACTIVE, by default the same). Defining either empty leaves
 * it to the compiler. -DAD__ET_INLINE_ACTIVE= halves lulesh.cc's compile
 * time (6.7 s against 11.6 s, g++ 12 -O3) at no measurable cost on LULESH,
 * most of whose assignments have no active operand, but records the hydro
 * benchmark's kernel, all of whose do, in 1.38 times the time. */
#ifndef AD__ET_INLINE
#define AD__ET_INLINE AD__ALWAYS_INLINE
#endif
#ifndef AD__ET_INLINE_ACTIVE
#define AD__ET_INLINE_ACTIVE AD__ET_INLINE
#endif
/* Leaves up to which an expression's repeated operands are looked for at
 * all (see ad__et_merge): the comparisons are inlined, and their number,
 * quadratic in the leaves, costs compile time even where it costs no run
 * time. */
#ifndef AD__ET_MERGE_LEAVES
#define AD__ET_MERGE_LEAVES 16u
#endif

/* Every expression type derives from ad__et<itself>. An operand of an
 * expression is a node (an expression), a leaf (a reference to an ad_real) or a
 * constant (a number): each has n, the ad_real leaves under it; zm, which of
 * their partials may be zero (ad__et_zmask); val(), its value; put<K>(a, w,
 * s), which writes its leaves to a[K..K+n) with their partials times s to w;
 * and op(), which records it operation by operation. */
struct ad__et_tag {};
template <class E> inline ad_real ad__et_eval(const E &e);

#define AD__ET_LVALUE_MESSAGE                                                                                          \
  "ariadne.hpp: an expression of ad_real values kept in a variable (auto e = a * b;) or passed on as one refers to "  \
  "temporaries that end with its statement, so it cannot be recorded later; write ad_real e = a * b; instead (its "  \
  "value, ad_value(e), may be read)"

template <class D> struct ad__et : ad__et_tag {
  /* One statement: see ad__et_eval. Only where the expression is made: a
   * named one (auto e = a * b) refers to temporaries that are gone. */
  AD__ET_INLINE operator ad_real() const && { return ad__et_eval(static_cast<const D &>(*this)); }
  operator ad_real() const & {
    static_assert(sizeof(D) == 0, AD__ET_LVALUE_MESSAGE);
    return ad_real(0.0);
  }
  /* The value, without recording, as ad_real's own explicit conversion. */
  explicit operator double() const { return static_cast<const D &>(*this).val(); }
};

struct ad__et_leaf {
  static const unsigned n = 1;
  static const uint64_t zm = 0;
  const ad_real &x;
  explicit ad__et_leaf(const ad_real &a) : x(a) {}
  double val() const { return x.v; }
  template <unsigned K> void put(const ad_real **a, double *w, double s) const {
    a[K] = &x;
    w[K] = s;
  }
  bool live() const { return x.i != 0; }
  ad_real op() const { return x; }
};

struct ad__et_const {
  static const unsigned n = 0;
  static const uint64_t zm = 0;
  double c;
  explicit ad__et_const(double v) : c(v) {}
  double val() const { return c; }
  template <unsigned K> void put(const ad_real **, double *, double) const {}
  bool live() const { return false; }
  ad_real op() const { return ad__const(c); }
};

/* What a C++ type is as an operand: ours (ad_real or an expression), a
 * number, or nothing. */
template <class T>
struct ad__et_is_ours
    : std::integral_constant<bool, std::is_same<T, ad_real>::value || std::is_base_of<ad__et_tag, T>::value> {};
template <class T>
struct ad__et_is_operand
    : std::integral_constant<bool, ad__et_is_ours<T>::value || std::is_arithmetic<T>::value || std::is_enum<T>::value> {
};
#define AD__ET_OPERAND_MESSAGE                                                                                         \
  "ariadne.hpp: an operand of an ad_real operator or function must be an ad_real, an expression of ad_real values, "   \
  "or an arithmetic type (int, double, ...); convert this operand to ad_real or double first"

template <class T, class = void> struct ad__et_of {
  typedef ad__et_const type;
  static type make(const T &x) { return type(static_cast<double>(x)); }
  static double value(const T &x) { return static_cast<double>(x); }
};
template <> struct ad__et_of<ad_real> {
  typedef ad__et_leaf type;
  static type make(const ad_real &x) { return type(x); }
  static double value(const ad_real &x) { return x.v; }
};
template <class T> struct ad__et_of<T, typename std::enable_if<std::is_base_of<ad__et_tag, T>::value>::type> {
  typedef T type;
  static const T &make(const T &x) { return x; }
  static double value(const T &x) { return x.val(); }
};

/* An operand that may be used: anything but a named expression (A is the
 * deduced type of a forwarding reference). */
template <class A>
struct ad__et_fresh : std::integral_constant<bool, !(std::is_lvalue_reference<A>::value &&
                                                     std::is_base_of<ad__et_tag, typename std::decay<A>::type>::value)> {
};
#define AD__ET_D(A) typename std::decay<A>::type

/* Enabled where an operator or function is ours: one operand at least is. */
template <class A, class B = double, class C = double>
struct ad__et_enable : std::enable_if<ad__et_is_ours<AD__ET_D(A)>::value || ad__et_is_ours<AD__ET_D(B)>::value ||
                                      ad__et_is_ours<AD__ET_D(C)>::value> {};

/* Which leaves' partials may be exactly zero or not finite, a bit per leaf
 * (zero bits from the 64th on: such a leaf is always tested): a leaf under
 * a product, a quotient, a function other than negation. Under sums,
 * differences and negations alone a partial is +1 or -1, so it is tested
 * for neither: only the leaf's own handle can make it nothing. */
template <unsigned N, unsigned K = 0> struct ad__et_bits {
  static const uint64_t all = K >= 64 ? 0 : N - K >= 64 ? ~(uint64_t)0 << K : ((((uint64_t)1 << (N - K)) - 1) << K);
};
template <bool Z, class T, unsigned K> struct ad__et_zmask {
  static const uint64_t m = Z ? ad__et_bits<K + T::n, K>::all : (K >= 64 ? 0 : T::zm << K);
};

/* A node of two operands: its value is computed when it is built, the
 * partials only when a tape records the statement (Op::d, from the
 * operands' values, which the node keeps). A node holds its operands by
 * value, a leaf being a reference to the ad_real and a constant a number:
 * the whole expression is then one object of references and values, which
 * the compiler keeps in registers. (Held by reference, every node was a
 * temporary in memory, written on every statement, recorded or not,
 * because the slow path's call could read it.) */
template <class Op, class L, class R> struct ad__et_bin : ad__et<ad__et_bin<Op, L, R> > {
  static const unsigned n = L::n + R::n;
  static const uint64_t zm = ad__et_zmask<Op::zl, L, 0>::m | ad__et_zmask<Op::zr, R, L::n>::m;
  L l;
  R r;
  double v;
  ad__et_bin(const L &a, const R &b) : l(a), r(b), v(Op::val(a.val(), b.val())) {}
  double val() const { return v; }
  template <unsigned K> void put(const ad_real **a, double *w, double s) const {
    double dl, dr;
    Op::d(l, r, v, dl, dr);
    l.template put<K>(a, w, s * dl);
    r.template put<K + L::n>(a, w, s * dr);
  }
  bool live() const { return l.live() || r.live(); }
  ad_real op() const { return Op::rec(l.op(), r.op()); }
};

/* A node of one operand: F has the value and the derivative. */
template <class F, class A> struct ad__et_un : ad__et<ad__et_un<F, A> > {
  static const unsigned n = A::n;
  static const uint64_t zm = ad__et_zmask<F::z, A, 0>::m;
  A a;
  double v;
  explicit ad__et_un(const A &x) : a(x), v(F::val(x.val())) {}
  double val() const { return v; }
  template <unsigned K> void put(const ad_real **to, double *w, double s) const {
    a.template put<K>(to, w, s * F::d(a.val(), v));
  }
  bool live() const { return a.live(); }
  ad_real op() const { return F::rec(a.op()); }
};

/* fma(a, b, c), the one function of three operands. */
template <class A, class B, class C> struct ad__et_fma : ad__et<ad__et_fma<A, B, C> > {
  static const unsigned n = A::n + B::n + C::n;
  static const uint64_t zm =
      ad__et_zmask<true, A, 0>::m | ad__et_zmask<true, B, A::n>::m | ad__et_zmask<false, C, A::n + B::n>::m;
  A a;
  B b;
  C c;
  double v;
  ad__et_fma(const A &x, const B &y, const C &z) : a(x), b(y), c(z), v(::fma(x.val(), y.val(), z.val())) {}
  double val() const { return v; }
  template <unsigned K> void put(const ad_real **to, double *w, double s) const {
    a.template put<K>(to, w, s * b.val());
    b.template put<K + A::n>(to, w, s * a.val());
    c.template put<K + A::n + B::n>(to, w, s);
  }
  bool live() const { return a.live() || b.live() || c.live(); }
  ad_real op() const { return ad__fma(a.op(), b.op(), c.op()); }
};

/* Merge repeated leaves: a leaf that is the same ad_real object as an earlier
 * one adds its partial to the first and gets handle 0 (dropped when
 * written); the bits returned say which partials are such sums (x - x may
 * be zero). Leaves are compared by address, not by handle, and where the
 * optimiser can tell the answer (u[k] named twice is the same object; u[k]
 * and u[k + 1], or two parameters, are not) the comparison costs nothing at
 * run time. One it cannot tell is made at run time in expressions of up to
 * AD__ET_MERGE_MAX leaves, and none in expressions of more than
 * AD__ET_MERGE_LEAVES. A larger expression keeps the rest as they are: its
 * quadratic number of comparisons would cost more than the arguments they
 * save. On LULESH (-s 6 -i 10, callgrind), run-time comparisons up to 16
 * leaves cost 18% of the recording's instructions, up to 8 leaves 2%; either
 * saves about 0.4% of the arguments. Leaves not merged (and two copies
 * of one value, y = x; x * y) are arguments each, which the sweep adds. */
#if defined(__GNUC__) && defined(__OPTIMIZE__)
#define AD__ET_KNOWN(x) __builtin_constant_p(x)
#else
#define AD__ET_KNOWN(x) 0
#endif
#if defined(__GNUC__) && !defined(__INTEL_COMPILER)
#define AD__ET_UNROLL _Pragma("GCC unroll 64")
#else
#define AD__ET_UNROLL
#endif
template <unsigned N> inline AD__ET_INLINE uint64_t ad__et_merge(const ad_real *const *a, double *w, ad_index *h) {
  uint64_t summed = 0;
  AD__ET_UNROLL
  for (unsigned j = 1; j < (N <= AD__ET_MERGE_LEAVES ? N : 0); j++) {
    AD__ET_UNROLL
    for (unsigned k = 0; k < j; k++) {
      bool same = a[k] == a[j];
      if (!AD__ET_KNOWN(same) && N > AD__ET_MERGE_MAX) continue;
      if (same) {
        /* The first occurrence is never dropped: it is found first. */
        w[k] += w[j];
        h[j] = 0;
        summed |= (uint64_t)1 << (k & 63);
        break;
      }
    }
  }
  return summed;
}

/* Whether a partial is not finite: its exponent bits are all set, so that
 * adding one to the exponent carries into bit 63. An integer test: a chain
 * of floating-point tests would be as long as the expression. */
inline uint64_t ad__et_nonfinite(double w) {
  uint64_t b;
  std::memcpy(&b, &w, sizeof b);
  return (b & 0x7ff0000000000000u) + 0x0010000000000000u;
}
/* The finite test of a statement's partials, summed: w - w is 0 for a
 * finite w and NaN otherwise, and a NaN stays in a sum (two instructions a
 * partial, where the integer test takes four: on LULESH 4% of the recording's
 * instructions). Where the compiler may take w - w for 0
 * (-ffinite-math-only, part of -ffast-math), the integer test. */
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
typedef uint64_t ad__et_finite_sum;
inline uint64_t ad__et_finite_add(uint64_t s, double w) { return s | ad__et_nonfinite(w); }
inline bool ad__et_finite_all(uint64_t s) { return (s >> 63) == 0; }
#else
typedef double ad__et_finite_sum;
inline double ad__et_finite_add(double s, double w) { return s + (w - w); }
inline bool ad__et_finite_all(double s) { return s == 0.0; }
#endif

/* Whether a (finite) partial is +0 or -0, as an integer test. */
inline bool ad__et_is_zero(double w) {
  uint64_t b;
  std::memcpy(&b, &w, sizeof b);
  return (b << 1) == 0;
}

/* The library's path: a partial that is not finite, a new block, a
 * preaccumulation region, a stale handle, more arguments than a statement
 * takes. It computes the leaves and partials again from the expression, so
 * that the inline path's arrays stay in registers: passed here, they would
 * have to be in memory on every statement. A partial that is not finite
 * sends the expression operation by operation (e.op()), which gives what
 * the per-operation recording gives (a * sqrt(b) at a = b = 0, whose sweep
 * skips the infinite partial). */
template <class E> AD__NOINLINE ad_real ad__et_slow(const E &e) {
  const unsigned N = E::n > 0 ? E::n : 1; /* n is 0 in no expression an operator makes */
  const ad_real *a[N];
  double w[N];
  ad_index h[N];
  e.template put<0>(a, w, 1.0);
  uint64_t bad = 0;
  for (unsigned k = 0; k < N; k++) bad |= ad__et_nonfinite(w[k]);
  if (bad >> 63) return e.op();
  if (!ad__rec->active && !ad__rec->fwd) return ad__const(e.val());
  for (unsigned k = 0; k < N; k++) h[k] = a[k]->i;
  ad__et_merge<N>(a, w, h);
  ad_real args[N];
  for (unsigned k = 0; k < N; k++) {
    args[k] = *a[k];
    args[k].i = h[k];
  }
  return ad__custom_n(e.val(), N, args, w);
}

/* The result of an expression whose operands are all passive (handle 0).
 * If one of them has this recording's epoch, it is the result of a
 * statement whose partials were all exactly zero, and so is this one: it
 * keeps the recording's epoch with handle 0, which ad_seed and ad_gradient
 * take as an output whose derivative is zero here (a least squares
 * residual at an exact fit), not as a value no input reaches, which they
 * refuse. Numbers and passive values have epoch 0. (Inline: on LULESH 81%
 * of the assignments of a recording end here.) */
inline ad_real ad__et_zero(double v, const ad_real *const *a, unsigned n, uint32_t ep) {
  ad_real r = ad__const(v);
  for (unsigned k = 0; k < n; k++)
    if (a[k]->e == ep) r.e = ep;
  return r;
}

/* The statement of an expression with an active operand: its leaves'
 * handles with their partials, repeated ones merged, passive ones and
 * those whose partial is exactly zero dropped (a partial is tested only
 * where it may be zero, E::zm); the fast path of ad_custom, specialised for
 * a count known at compile time. The partials are computed here, from the
 * root down, and only here: a program that runs on ad_real with no tape
 * recording pays for the values alone. */
template <class E> inline AD__ET_INLINE_ACTIVE ad_real ad__et_record_active(const E &e, ad__recorder *R) {
  const unsigned N = E::n > 0 ? E::n : 1; /* n is 0 in no expression an operator makes */
  const ad_real *a[N];
  double w[N];
  ad_index h[N];
  e.template put<0>(a, w, 1.0);
  uint32_t ns = R->ns, na = R->na, np = R->np, ep = R->epoch;
  uint64_t stale = 0;
  ad__et_finite_sum bad = 0;
  AD__ET_UNROLL
  for (unsigned k = 0; k < N; k++) {
    h[k] = a[k]->i;
    /* AD__STALE's test, as a select on the handle: here one instruction a
     * leaf fewer than its product (the handle is tested anyway); in the C
     * operations' paths the product is the shorter (LULESH per operation,
     * 1.03 G instructions against 0.98 G). */
    stale |= h[k] != 0 ? a[k]->e ^ ep : 0u;
    /* A partial of sums and differences alone is +1 or -1. */
    if (k >= 64 || ((E::zm >> (k & 63)) & 1u)) bad = ad__et_finite_add(bad, w[k]);
  }
  /* A sum of partials (x - x) may be zero where its terms are not. */
  uint64_t tested = E::zm | ad__et_merge<N>(a, w, h);
  if (AD__UNLIKELY(!ad__et_finite_all(bad) | (N > AD__MAX_ARGS) | (na + N > R->lim) | (stale != 0))) {
    const E copy = e;
    return ad__et_slow(copy);
  }
  /* Positions from the block's first free slots, counted in a size_t: no
   * 32-bit position widened on every store (LULESH: 5% of the recording's
   * instructions). Partials advance with arguments. */
  ad_index *idx = R->idx + na;
  double *par = R->par + np;
  size_t m = 0;
  AD__ET_UNROLL
  for (unsigned k = 0; k < N; k++) {
    idx[m] = h[k];
    par[m] = w[k];
    bool zero = (k >= 64 || ((tested >> (k & 63)) & 1u)) && ad__et_is_zero(w[k]);
    m += (h[k] != 0) & !zero;
  }
  if (m == 0) {
    /* Partials all zero: an active operand, not stale, has this epoch. */
    ad_real r = ad__const(e.val());
    r.e = ep;
    return r;
  }
  return ad__emit(R, e.val(), ns, na, na + (uint32_t)m, np + (uint32_t)m, AD__KIND_GENERAL);
}

/* An expression while a tape records. With no active operand, no
 * statement, and nothing of the rest to compute (the partials, the tests,
 * the stores): as the C operations, which return a constant when no
 * operand is active. This is most assignments in code where part of the
 * state does not depend on the inputs (LULESH: 6.2 M of 7.6 M; recording
 * 37% faster with this exit); the partials computed by put are unused
 * here, and the compiler drops them. */
template <class E> inline AD__ET_INLINE ad_real ad__et_record(const E &e, ad__recorder *R) {
  const unsigned N = E::n > 0 ? E::n : 1;
  const ad_real *a[N];
  double w[N];
  e.template put<0>(a, w, 1.0);
  ad_index any = 0;
  AD__ET_UNROLL
  for (unsigned k = 0; k < N; k++) any |= a[k]->i;
  if (any == 0) return ad__et_zero(e.val(), a, N, R->epoch);
  return ad__et_record_active(e, R);
}

/* Constructing or assigning an ad_real from an expression. With no tape
 * recording (the recorder neither active nor propagating a region), the
 * value alone: the expression's nodes computed it when they were built. */
template <class E> inline AD__ET_INLINE ad_real ad__et_eval(const E &e) {
  if (E::n == 0) return ad__const(e.val());
  ad__recorder *R = ad__rec;
  if ((R->active | R->fwd) == 0) return ad__const(e.val());
  return ad__et_record(e, R);
}

/* The operations of two operands: val, the value; d, the partials (from
 * the operands, which a node holds, and the value); zl and zr, whether
 * each partial may be exactly zero (see ad__et_zmask); rec, the C call. */
struct ad__et_add {
  static const bool zl = false, zr = false;
  static double val(double a, double b) { return a + b; }
  template <class L, class R> static void d(const L &, const R &, double, double &dl, double &dr) {
    dl = 1.0;
    dr = 1.0;
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__add(a, b); }
};
struct ad__et_sub {
  static const bool zl = false, zr = false;
  static double val(double a, double b) { return a - b; }
  template <class L, class R> static void d(const L &, const R &, double, double &dl, double &dr) {
    dl = 1.0;
    dr = -1.0;
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__sub(a, b); }
};
struct ad__et_mul {
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return a * b; }
  template <class L, class R> static void d(const L &l, const R &r, double, double &dl, double &dr) {
    dl = r.val();
    dr = l.val();
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__mul(a, b); }
};
struct ad__et_div {
  /* 1 / b is not zero, but it is infinite at b = 0. */
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return a / b; }
  template <class L, class R> static void d(const L &, const R &r, double v, double &dl, double &dr) {
    ad__d_div(r.val(), v, &dl, &dr);
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__div(a, b); }
};
struct ad__et_atan2 {
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return ::atan2(a, b); }
  template <class L, class R> static void d(const L &l, const R &r, double, double &dl, double &dr) {
    ad__d_atan2(l.val(), r.val(), &dl, &dr);
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__atan2(a, b); }
};
/* As ad_pow: each partial only where its side is active (a log saved). */
struct ad__et_pow {
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return ::pow(a, b); }
  template <class L, class R> static void d(const L &l, const R &r, double v, double &dl, double &dr) {
    dl = L::n > 0 && l.live() ? ad__d_pow_a(l.val(), r.val()) : 0.0;
    dr = R::n > 0 && r.live() ? ad__d_pow_b(l.val(), v) : 0.0;
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__pow(a, b); }
};
struct ad__et_hypot {
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return ::hypot(a, b); }
  template <class L, class R> static void d(const L &l, const R &r, double v, double &dl, double &dr) {
    ad__d_hypot(l.val(), r.val(), v, &dl, &dr);
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__hypot(a, b); }
};
struct ad__et_fmod {
  static const bool zl = false, zr = true;
  static double val(double a, double b) { return ::fmod(a, b); }
  template <class L, class R> static void d(const L &l, const R &r, double, double &dl, double &dr) {
    dl = 1.0;
    dr = R::n > 0 ? ad__d_fmod_b(l.val(), r.val()) : 0.0;
  }
  static ad_real rec(ad_real a, ad_real b) { return ad__fmod(a, b); }
};
/* fmin/fmax: the partial follows the operand whose value is returned, as
 * ad_fmin/ad_fmax (First says whether that is the first); the other gets 0. */
template <int (*First)(double, double), ad_real (*Rec)(ad_real, ad_real)> struct ad__et_pick {
  static const bool zl = true, zr = true;
  static double val(double a, double b) { return First(a, b) ? a : b; }
  template <class L, class R> static void d(const L &l, const R &r, double, double &dl, double &dr) {
    int first = First(l.val(), r.val());
    dl = first ? 1.0 : 0.0;
    dr = first ? 0.0 : 1.0;
  }
  static ad_real rec(ad_real a, ad_real b) { return Rec(a, b); }
};
typedef ad__et_pick<ad__fmin_first, ad__fmin> ad__et_fmin;
typedef ad__et_pick<ad__fmax_first, ad__fmax> ad__et_fmax;

/* The node an operator builds from its operands; with an operand that is
 * not one, the static assertion in the operator speaks and this gives a
 * plain ad_real, so that nothing else is reported. */
template <class Op, class A, class B, bool ok = ad__et_is_operand<A>::value &&ad__et_is_operand<B>::value>
struct ad__et_bin_of {
  typedef ad__et_bin<Op, typename ad__et_of<A>::type, typename ad__et_of<B>::type> type;
  static type make(const A &a, const B &b) { return type(ad__et_of<A>::make(a), ad__et_of<B>::make(b)); }
};
template <class Op, class A, class B> struct ad__et_bin_of<Op, A, B, false> {
  typedef ad_real type;
  static type make(const A &, const B &) { return ad_real(0.0); }
};

#define AD__ET_BINARY(name, Op)                                                                                        \
  template <class A, class B, class = typename ad__et_enable<A, B>::type>                                              \
  inline typename ad__et_bin_of<Op, AD__ET_D(A), AD__ET_D(B)>::type name(A &&a, B &&b) {                               \
    static_assert(ad__et_is_operand<AD__ET_D(A)>::value && ad__et_is_operand<AD__ET_D(B)>::value,                      \
                  AD__ET_OPERAND_MESSAGE);                                                                             \
    static_assert(ad__et_fresh<A>::value && ad__et_fresh<B>::value, AD__ET_LVALUE_MESSAGE);                            \
    return ad__et_bin_of<Op, AD__ET_D(A), AD__ET_D(B)>::make(a, b);                                                    \
  }
AD__ET_BINARY(operator+, ad__et_add)
AD__ET_BINARY(operator-, ad__et_sub)
AD__ET_BINARY(operator*, ad__et_mul)
AD__ET_BINARY(operator/, ad__et_div)
AD__ET_BINARY(atan2, ad__et_atan2)
AD__ET_BINARY(pow, ad__et_pow)
AD__ET_BINARY(hypot, ad__et_hypot)
AD__ET_BINARY(fmod, ad__et_fmod)
AD__ET_BINARY(fmin, ad__et_fmin)
AD__ET_BINARY(fmax, ad__et_fmax)
#undef AD__ET_BINARY

template <class A, class B, class C> struct ad__et_fma_of {
  typedef ad__et_of<AD__ET_D(A)> OA;
  typedef ad__et_of<AD__ET_D(B)> OB;
  typedef ad__et_of<AD__ET_D(C)> OC;
  typedef ad__et_fma<typename OA::type, typename OB::type, typename OC::type> type;
};
template <class A, class B, class C, class = typename ad__et_enable<A, B, C>::type>
inline typename ad__et_fma_of<A, B, C>::type fma(A &&a, B &&b, C &&c) {
  static_assert(ad__et_is_operand<AD__ET_D(A)>::value && ad__et_is_operand<AD__ET_D(B)>::value &&
                    ad__et_is_operand<AD__ET_D(C)>::value,
                AD__ET_OPERAND_MESSAGE);
  static_assert(ad__et_fresh<A>::value && ad__et_fresh<B>::value && ad__et_fresh<C>::value, AD__ET_LVALUE_MESSAGE);
  typedef ad__et_fma_of<A, B, C> f;
  return typename f::type(f::OA::make(a), f::OB::make(b), f::OC::make(c));
}

/* The functions of one operand, from ariadne.h's list (the same
 * derivatives), and negation. */
struct ad__et_neg {
  static const bool z = false;
  static double val(double x) { return -x; }
  static double d(double, double) { return -1.0; }
  static ad_real rec(ad_real a) { return ad__neg(a); }
};
template <class F, class A> struct ad__et_un_of {
  typedef ad__et_of<AD__ET_D(A)> O;
  typedef ad__et_un<F, typename O::type> type;
  static type make(const AD__ET_D(A) & a) {
    static_assert(ad__et_fresh<A>::value, AD__ET_LVALUE_MESSAGE);
    return type(O::make(a));
  }
};
template <class A, class = typename ad__et_enable<A>::type>
inline typename ad__et_un_of<ad__et_neg, A>::type operator-(A &&a) {
  return ad__et_un_of<ad__et_neg, A>::make(a);
}
/* +x names x itself (a copy would be another leaf, which the merge by
 * address would not see as x); +expression is the expression. */
template <class A>
struct ad__et_plus
    : std::conditional<std::is_lvalue_reference<A>::value && std::is_same<AD__ET_D(A), ad_real>::value,
                       const ad_real &, AD__ET_D(A)> {};
template <class A, class = typename ad__et_enable<A>::type>
inline typename ad__et_plus<A>::type operator+(A &&a) {
  static_assert(ad__et_fresh<A>::value, AD__ET_LVALUE_MESSAGE);
  return a;
}

#define AD__ET_UNARY(name, derivative)                                                                                 \
  struct ad__et_f_##name {                                                                                             \
    static const bool z = true;                                                                                        \
    static double val(double x) { return ::name(x); }                                                                  \
    static double d(double x, double r) { return ad__d_##name(x, r); }                                                 \
    static ad_real rec(ad_real a) { return ad__##name(a); }                                                            \
  };                                                                                                                   \
  template <class A, class = typename ad__et_enable<A>::type>                                                          \
  inline typename ad__et_un_of<ad__et_f_##name, A>::type name(A &&a) {                                                 \
    return ad__et_un_of<ad__et_f_##name, A>::make(a);                                                                  \
  }
AD__UNARY_MATH(AD__ET_UNARY)
#undef AD__ET_UNARY
template <class A, class = typename ad__et_enable<A>::type>
inline typename ad__et_un_of<ad__et_f_fabs, A>::type abs(A &&a) {
  return ad__et_un_of<ad__et_f_fabs, A>::make(a);
}

/* Piecewise constant: derivative 0, so the result is a passive ad_real. */
#define AD__ET_STEP(name)                                                                                              \
  template <class A, class = typename ad__et_enable<A>::type> inline ad_real name(const A &a) {                        \
    return ad__const(::name(ad__et_of<AD__ET_D(A)>::value(a)));                                                        \
  }
AD__ET_STEP(floor)
AD__ET_STEP(ceil)
AD__ET_STEP(round)
AD__ET_STEP(trunc)
#undef AD__ET_STEP

/* Compound assignment: one statement, a = a op b. */
#define AD__ET_COMPOUND(name, op)                                                                                      \
  template <class B> inline ad_real &name(ad_real &a, B &&b) {                                                                      \
    static_assert(ad__et_is_operand<AD__ET_D(B)>::value, AD__ET_OPERAND_MESSAGE);                                      \
    static_assert(ad__et_fresh<B>::value, AD__ET_LVALUE_MESSAGE);                                                      \
    return a = ad_real(ad__et_bin_of<op, ad_real, AD__ET_D(B)>::make(a, b));                                           \
  }
AD__ET_COMPOUND(operator+=, ad__et_add)
AD__ET_COMPOUND(operator-=, ad__et_sub)
AD__ET_COMPOUND(operator*=, ad__et_mul)
AD__ET_COMPOUND(operator/=, ad__et_div)
#undef AD__ET_COMPOUND

/* Comparisons of values. */
#define AD__ET_COMPARE(name, op)                                                                                       \
  template <class A, class B, class = typename ad__et_enable<A, B>::type> inline bool name(const A &a, const B &b) {   \
    static_assert(ad__et_is_operand<A>::value && ad__et_is_operand<B>::value, AD__ET_OPERAND_MESSAGE);                 \
    return ad__et_of<A>::value(a) op ad__et_of<B>::value(b);                                                           \
  }
AD__ET_COMPARE(operator==, ==)
AD__ET_COMPARE(operator!=, !=)
AD__ET_COMPARE(operator<, <)
AD__ET_COMPARE(operator<=, <=)
AD__ET_COMPARE(operator>, >)
AD__ET_COMPARE(operator>=, >=)
#undef AD__ET_COMPARE

/* The value, as a double (an expression is not recorded), and ad_value. */
template <class A, class = typename ad__et_enable<A>::type>
inline std::ostream &operator<<(std::ostream &o, const A &x) {
  return o << ad__et_of<A>::value(x);
}
template <class D> inline double ad__val(const ad__et<D> &x) { return static_cast<const D &>(x).val(); }

#endif /* ARIADNE_CXX_PER_OPERATION */
#endif /* ARIADNE_PASSIVE */

#endif /* ARIADNE_HPP */
