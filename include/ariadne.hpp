/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne.hpp: C++ operators and math functions on Ariadne's ad_real.
 *
 * The same struct as in C (ariadne.h), so C and C++ code share arrays,
 * tapes, the MPI wrappers (ariadne_mpi.h), checkpointed loops and external
 * functions. Every operator records exactly what the C call it stands for
 * records, in C++'s evaluation order: `a * b + c` is
 * ad_add(ad_mul(a, b), c), one tape statement per operation, bit for bit the
 * C version's gradient.
 *
 *   #include <ariadne.hpp>
 *   ad_real y = x * x + sin(x);   // sin found by argument-dependent lookup
 *   y += 2.0;
 *   std::cout << y << "\n";       // the value
 *   double v = static_cast<double>(y);
 *
 * Comparisons compare values, as ad_lt and friends do. After mpi.h, plain
 * MPI calls on ad_real buffers do not compile (see ariadne_mpi.h). With ARIADNE_PASSIVE
 * ad_real is double and everything here is the language's own.
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

#endif /* ARIADNE_PASSIVE */

#endif /* ARIADNE_HPP */
