/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Random C programs in the subset ariadne-port claims, for the differential
 * fuzzer (run.sh). Given a seed, writes DIR/p.c and DIR/fz_h.h: four
 * objectives (which share the program's compilations and ports)
 *
 *     double fz_f0(const double *x, int n) ... fz_f3
 *
 * (real_t in the typedef mode) built from every arithmetic operator and the
 * math functions the tool has twins for, compound assignments, ++/--,
 * ternaries, comparisons, branches, loops (some on active conditions),
 * conversions to int, switch, arrays (one and two dimensions), heap memory, a
 * struct with an array member (by value, by pointer, copied whole), pointers
 * into locals and arrays (aliasing), static helpers and a function pointer,
 * macros (in the file or a header), a global, loop bodies that leave early
 * after filling locals, and in the typedef mode
 * passive doubles mixed in; with the option mpi, MPI calls on active data;
 * plus a main that evaluates each objective at fz_x0 and prints with %a, and
 * the file's parameters (fz_n, fz_x0).
 *
 * Every value is kept in a range where the objective is smooth enough for
 * central differences: each expression carries a bound on its magnitude,
 * operands whose bound grows too large are squashed (tanh, sin, x/(1+|x|)),
 * and the arguments of log, sqrt, division, pow, asin, acos, acosh, atanh
 * are positive or inside their domain by construction.
 *
 * usage: fz_gen SEED DIR [OPTION...]; prints the active type to use
 * ("double" or "real_t") on stdout. The option mpi writes MPI programs; the
 * others switch on constructs that hit open defects of the tool (README.md).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Objectives per program, fz_f0 ... fz_f3 (harness.c checks as many): they
 * share one program's compilations and ports. */
#define FZ_BATCH 4

static uint64_t rng_state;

static uint64_t rng_next(void) {
  /* splitmix64: deterministic across platforms, which a seed needs. */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int rnd(int n) { return (int)(rng_next() % (uint64_t)n); }
static int chance(int percent) { return rnd(100) < percent; }

/* A constant with two decimals in [lo, hi], printed so it reads back exactly as written. */
static double rconst(double lo, double hi) { return lo + (hi - lo) * rnd(101) / 100.0; }

/* Every string fmt makes lives until the program ends; they are kept in one
 * list so that they are freed at exit and a leak checker sees no leak. */
static char **fmt_all;
static size_t fmt_n, fmt_cap;

static void fmt_free_all(void) {
  for (size_t i = 0; i < fmt_n; i++) free(fmt_all[i]);
  free(fmt_all);
}

static char *fmt_keep(char *s) {
  if (fmt_n == fmt_cap) {
    if (!fmt_all) atexit(fmt_free_all);
    size_t cap = fmt_cap ? 2 * fmt_cap : 256;
    char **all = realloc(fmt_all, cap * sizeof *all);
    if (!all) exit(2);
    fmt_all = all;
    fmt_cap = cap;
  }
  return fmt_all[fmt_n++] = s;
}

static char *fmt(const char *f, ...) {
  va_list ap, aq;
  va_start(ap, f);
  va_copy(aq, ap);
  int len = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  char *s = malloc((size_t)len + 1);
  if (!s) exit(2);
  vsnprintf(s, (size_t)len + 1, f, aq);
  va_end(aq);
  return fmt_keep(s);
}

/* An expression and a bound on its magnitude. */
typedef struct {
  char *s;
  double b;
} ex;

/* The active lvalues in scope, which leaves read and statements write. */
#define MAXV 64
static struct {
  char *name;
  double b;
} vars[MAXV];
static int nvars;

static struct {
  int typedef_mode; /* real_t active, double passive */
  int macros, header, helpers, structs, pointers, global;
  int isnan_calls;   /* open defect: isnan/isinf on active values */
  int passive_store; /* open defect: active values stored into passive storage */
  int byte_moves;    /* open defect: memcpy of active arrays */
  int real_cast;     /* (real_t) casts of passive doubles, also in macro arguments */
  int type_macro;    /* the real type spelled through #define FZ_REAL double */
  int passive_call;  /* open defect: passive arguments of ported functions (initializers) */
  int header_helper; /* open defect: static inline functions defined in a header */
  int mpi;           /* an MPI program: collectives and point-to-point on active data */
  int mpi_init;      /* open defect: an MPI call as a declaration's initializer */
  int mpi_cond;      /* open defect: an MPI call in a condition */
  int mpi_macro;     /* open defect: an MPI call in a macro */
} opt;

static const char *R = "double"; /* the active type's spelling */
static int n_inputs;
static int loop_depth;  /* inside a loop over i: x[i] is a leaf */
static int passive_dbl; /* typedef mode: a passive double 'd' is in scope */

static void push_var(char *name, double b) {
  if (nvars < MAXV) {
    vars[nvars].name = name;
    vars[nvars].b = b;
    nvars++;
  }
}

static ex mk(char *s, double b) {
  ex e = {s, b};
  return e;
}

static ex gen(int depth);

/* Whether an expression reads an active value: an input or a variable in scope. */
static int is_active(const char *s) {
  if (strstr(s, "x[")) return 1;
  for (int i = 0; i < nvars; i++)
    if (strstr(s, vars[i].name)) return 1;
  return 0;
}

/* A leaf: an active lvalue in scope, an input, or a passive constant. */
static ex leaf(void) {
  int r = rnd(100);
  if (r < 55 && nvars) {
    int k = rnd(nvars);
    return mk(vars[k].name, vars[k].b);
  }
  if (r < 75) {
    if (loop_depth && chance(60)) return mk("x[i]", 2.0);
    return mk(fmt("x[%d]", rnd(n_inputs)), 2.0);
  }
  if (r < 83 && loop_depth) return mk(chance(50) ? "(0.25 * i)" : "(double)(i + 1)", 8.0);
  if (r < 88 && opt.macros) return mk("FZ_K", 0.75);
  if (r < 92 && passive_dbl) return mk(opt.real_cast && chance(50) ? fmt("(%s)d", R) : "d", 2.0);
  if (r < 95) return mk(chance(50) ? "(0.5 * n)" : "((double)n / 4)", 4.0);
  double c = rconst(-2.0, 2.0);
  return mk(fmt("%.2f", c), 2.0);
}

/* A bounded version of e: |result| <= 1.6 or so. */
static ex squash(ex e) {
  switch (rnd(5)) {
  case 0: return mk(fmt("tanh(%s)", e.s), 1.0);
  case 1: return mk(fmt("sin(%s)", e.s), 1.0);
  case 2: return mk(fmt("cos(%s)", e.s), 1.0);
  case 3: return mk(fmt("atan(%s)", e.s), 1.6);
  default: return mk(fmt("(%s) / (1.0 + fabs(%s))", e.s, e.s), 1.0);
  }
}

static ex small(int depth) {
  ex e = gen(depth);
  return e.b > 4.0 ? squash(e) : e;
}

static ex bounded(int depth) {
  ex e = gen(depth);
  return e.b > 1.6 ? squash(e) : e;
}

/* A comparison of active values (an int). */
static char *comparison(int depth) {
  static const char *ops[] = {"<", "<=", ">", ">=", "!=", "=="};
  ex a = gen(depth), b = gen(depth);
  int k = rnd(chance(90) ? 5 : 6);
  char *c = fmt("%s %s %s", a.s, ops[k], b.s);
  switch (rnd(8)) {
  case 0: return fmt("!(%s)", c);
  case 1: return fmt("%s && %s > %.2f", c, gen(depth).s, rconst(-1, 1));
  case 2: return fmt("(%s) || %s", c, vars[rnd(nvars)].name); /* an active value as a truth value */
  default: return c;
  }
}

static ex gen(int depth) {
  if (depth <= 0 || chance(20)) return leaf();
  int d = depth - 1;
  ex a, b, c;
  double k = rconst(1.0, 3.0);
  switch (rnd(48)) {
  case 0:
  case 1:
  case 2:
  case 3: a = small(d), b = small(d); return mk(fmt("(%s + %s)", a.s, b.s), a.b + b.b);
  case 4:
  case 5:
  case 6: a = small(d), b = small(d); return mk(fmt("(%s - %s)", a.s, b.s), a.b + b.b);
  case 7:
  case 8:
  case 9:
  case 10: a = small(d), b = small(d); return mk(fmt("(%s * %s)", a.s, b.s), a.b * b.b);
  case 11:
  case 12:
    /* "-%s" of "-x" would read as a decrement. */
    a = small(d);
    return mk(fmt(a.s[0] == '-' || a.s[0] == '+' ? "(%c(%s))" : "(%c%s)", "-+"[rnd(2)], a.s), a.b);
  case 13: a = small(d), b = small(d); return mk(fmt("(%s / (%.2f + %s * %s))", a.s, k, b.s, b.s), a.b / k);
  case 14: a = small(d), b = small(d); return mk(fmt("(%s / (%.2f + fabs(%s)))", a.s, k, b.s), a.b / k);
  case 15: a = small(d); return mk(fmt("(%s / %.2f)", a.s, k), a.b / k);
  case 16: a = small(d); return mk(fmt("sqrt(%.2f + %s * %s)", k, a.s, a.s), 1.8 + a.b);
  case 17: a = small(d); return mk(fmt("log(%.2f + %s * %s)", k, a.s, a.s), 1.1 + 2 * log(1 + a.b) + 1);
  case 18: a = gen(d); return mk(fmt("log(2.0 + sin(%s))", a.s), 1.1);
  case 19: a = small(d); return mk(fmt("log1p(%s * %s)", a.s, a.s), 2 * log(1 + a.b) + 1);
  case 20: a = gen(d); return mk(fmt("log2(1.5 + cos(%s))", a.s), 1.4);
  case 21: a = small(d); return mk(fmt("log10(%.2f + %s * %s)", k, a.s, a.s), 2.0);
  case 22: a = bounded(d); return mk(fmt("exp(%s)", a.s), exp(a.b));
  case 23: a = bounded(d); return mk(fmt("exp2(%s)", a.s), exp2(a.b));
  case 24: a = bounded(d); return mk(fmt("expm1(%s)", a.s), exp(a.b));
  case 25: a = gen(d); return mk(fmt("sin(%s)", a.s), 1.0);
  case 26: a = gen(d); return mk(fmt("cos(%s)", a.s), 1.0);
  case 27: a = gen(d); return mk(fmt("tan(0.7 * tanh(%s))", a.s), 1.0);
  case 28: a = gen(d); return mk(fmt("asin(0.8 * tanh(%s))", a.s), 1.0);
  case 29: a = gen(d); return mk(fmt("acos(0.8 * sin(%s))", a.s), 2.6);
  case 30: a = gen(d), b = small(d); return mk(fmt("atan2(%s, %.2f + %s * %s)", a.s, k, b.s, b.s), 1.6);
  case 31: a = bounded(d); return mk(fmt(chance(50) ? "sinh(%s)" : "cosh(%s)", a.s), 2.6);
  case 32: a = gen(d); return mk(fmt(chance(50) ? "tanh(%s)" : "erf(%s)", a.s), 1.0);
  case 33: a = small(d); return mk(fmt("asinh(%s)", a.s), 1 + log(1 + a.b));
  case 34: a = small(d); return mk(fmt("acosh(%.2f + %s * %s)", k, a.s, a.s), 2 + log(1 + a.b));
  case 35: a = gen(d); return mk(fmt("atanh(0.8 * tanh(%s))", a.s), 1.1);
  case 36: a = small(d); return mk(fmt("cbrt(%.2f + %s * %s)", k, a.s, a.s), 2 + a.b);
  case 37: a = small(d); return mk(fmt("pow(%s, %d)", a.s, 2 + rnd(2)), pow(a.b, 3));
  case 38: a = small(d), b = bounded(d);
    return mk(fmt("pow(%.2f + %s * %s, %s)", k, a.s, a.s, b.s), pow(k + a.b * a.b, 1.6) + 1);
  case 39: a = small(d), b = small(d); return mk(fmt("hypot(%s, %.2f + %s * %s)", a.s, k, b.s, b.s), a.b + k + b.b * b.b);
  case 40: a = small(d); return mk(fmt("fabs(%s)", a.s), a.b);
  case 41: a = small(d), b = small(d); return mk(fmt("%s(%s, %s)", chance(50) ? "fmin" : "fmax", a.s, b.s), a.b + b.b);
  case 42: a = small(d), b = small(d), c = small(d);
    return mk(fmt("fma(%s, %s, %s)", a.s, b.s, c.s), a.b * b.b + c.b);
  case 43: a = small(d); return mk(fmt("fmod(%s, %.2f)", a.s, k + 2.0), a.b);
  case 44: {
    static const char *pw[] = {"floor", "ceil", "round", "trunc"};
    a = small(d);
    /* Piecewise constant: derivative 0, a jump only exactly at integers. */
    return mk(fmt("(0.125 * %s(%s))", pw[rnd(4)], a.s), a.b + 1);
  }
  case 45:
    a = small(d), b = small(d), c = small(d);
    return mk(fmt("(%s ? %s : %s)", comparison(d), b.s, c.s), b.b > c.b ? b.b : c.b);
  case 46:
    if (opt.macros) {
      a = small(d);
      if (chance(50)) return mk(fmt("FZ_SQ(%s)", a.s), a.b * a.b);
      b = small(d);
      return mk(fmt("FZ_MIX(%s, %s)", a.s, b.s), a.b + b.b);
    }
    a = small(d);
    return mk(fmt("(%s * %s)", a.s, a.s), a.b * a.b);
  default:
    if (opt.helpers && chance(60)) {
      a = small(d), b = small(d);
      /* Open defect: a passive argument of a ported function, in a declaration's initializer. */
      if (!opt.passive_call && !is_active(a.s)) a = mk(fmt("x[%d]", rnd(n_inputs)), 2.0);
      if (!opt.passive_call && !is_active(b.s)) b = mk(fmt("x[%d]", rnd(n_inputs)), 2.0);
      if (opt.header_helper && chance(50)) return mk(fmt("fz_hdr_sq(%s)", a.s), 1.0 + a.b * a.b);
      return mk(fmt("fz_h0(%s, %s)", a.s, b.s), 1.6 * 1.5 + a.b);
    }
    a = small(d), b = small(d);
    return mk(fmt("((%s > %s) * %s)", a.s, b.s, a.s), a.b); /* a comparison's int in arithmetic */
  }
}

/* Output: the body of fz_f, with indentation. */
static FILE *out;
static int ind = 1;

static void line(const char *f, ...) {
  for (int i = 0; i < ind; i++) fputs("  ", out);
  va_list ap;
  va_start(ap, f);
  vfprintf(out, f, ap);
  va_end(ap);
  fputc('\n', out);
}

static int ntemps;
static int branch_depth;

/* The index of a writable scalar variable; 0 if none yet. */
static int writable(void) {
  int cands[MAXV], nc = 0;
  for (int i = 0; i < nvars; i++)
    if (vars[i].name[0] != '(') cands[nc++] = i;
  return nc ? cands[rnd(nc)] : -1;
}

static void assign(int v, ex e) {
  /* Keep the variable bounded: what grows is squashed before it is stored. */
  if (e.b > 30.0) e = squash(e);
  /* In a branch the other path keeps the old value: keep the larger bound. */
  vars[v].b = branch_depth && vars[v].b > e.b ? vars[v].b : e.b;
  line("%s = %s;", vars[v].name, e.s);
}

static void stmt(int depth, int budget);

static int base_var; /* t0, declared first, in scope everywhere */

/* Leave a scope: each temporary declared in it is read once more, into t0,
 * so that nothing is set but unused (the original compiles warning-free). */
static void fold(int from) {
  for (int i = from; i < nvars; i++)
    if (vars[i].name[0] == 't') {
      line("%s += 0.25 * tanh(%s);", vars[base_var].name, vars[i].name);
      vars[base_var].b += 0.25;
    }
  nvars = from;
}

static void block(int depth, int budget) {
  int saved = nvars;
  for (int i = 0; i < budget; i++) stmt(depth, budget / 2);
  fold(saved);
}

/* Less frequent statement forms, one each. */
static void extra(int depth, int v) {
  char *n = vars[v].name;
  switch (rnd(10)) {
  case 9: /* a struct by value and by pointer to helpers */
    if (opt.structs && opt.helpers) {
      line("fz_hp(ps, %s);", n);
      line("%s = fz_hs(s) * 0.5;", n);
      vars[v].b = 1.0;
      for (int i = 0; i < nvars; i++)
        if (!strcmp(vars[i].name, "s.v")) {
          vars[i].b += vars[v].b;
          if (vars[i].b > 30.0) assign(i, squash(mk("s.v", vars[i].b)));
        }
    }
    break;
  case 0: /* chained assignment */ {
    int w = writable();
    ex e = small(depth);
    if (w == v || !strcmp(vars[w].name, n)) w = base_var; /* t = t = e modifies t twice unsequenced */
    if (w == v) break;
    line("%s = %s = %s;", vars[w].name, n, e.s);
    vars[w].b = vars[v].b = e.b;
    break;
  }
  case 1: /* conversion to an integer, then an index */
    line("{");
    ind++;
    /* (int) of a value out of int's range is undefined: an infinite t gave
     * k = INT_MIN and an index below the array, so the original read garbage
     * (the port, reading a garbage ad_real, then failed with a stale handle). */
    line("int k = %s > -1e6 && %s < 1e6 ? (int)(%s * 2.0) : 0;", n, n, n);
    line("%s += 0.5 * (k %% 3) + x[(k < 0 ? -k : k) %% n];", n);
    ind--;
    line("}");
    vars[v].b += 3.0;
    break;
  case 2: /* a loop whose condition is active */
    line("{");
    ind++;
    line("int k = 0;");
    line("while (%s > 0.25 && k < 4) {", n);
    line("  %s = %s * 0.5 - 0.01;", n, n);
    line("  k++;");
    line("}");
    ind--;
    line("}");
    break;
  case 3: /* heap memory */
    line("{");
    ind++;
    line("%s *h = malloc(3 * sizeof(%s));", R, R);
    line("for (int k = 0; k < 3; k++) h[k] = %s * (k + 1);", small(depth - 1).s);
    line("%s = h[0] - h[2] * 0.5 + h[1];", n);
    line("free(h);");
    ind--;
    line("}");
    vars[v].b = 24.0;
    break;
  case 4: /* the negation of an active value, as a truth value */
    line("if (!%s) %s = 0.5;", n, n);
    break;
  case 5: /* a switch on a conversion */
    line("switch ((int)(%s) %% 3) {", small(depth - 1).s);
    line("case 0: %s += 0.25; break;", n);
    line("case 1: %s *= 0.5; /* fall through */", n);
    line("default: %s -= 0.125;", n);
    line("}");
    vars[v].b += 0.25;
    break;
  case 6: /* a call through a function pointer */
    if (opt.helpers) {
      line("{");
      ind++;
      line("%s (*fp)(%s, %s) = fz_h0;", R, R, R);
      line("%s = fp(%s, x[%d]);", n, n, rnd(n_inputs));
      ind--;
      line("}");
      vars[v].b = 4.0;
    }
    break;
  case 7: /* a two-dimensional array */
    line("{");
    ind++;
    line("%s m2[2][3];", R);
    line("for (int j = 0; j < 2; j++)");
    line("  for (int k = 0; k < 3; k++) m2[j][k] = x[(j + k) %% n] * (j - k) + %s;", n);
    line("%s = m2[1][2] * m2[0][1] - m2[1][0];", n);
    ind--;
    line("}");
    vars[v].b = vars[v].b * vars[v].b + 20.0;
    if (vars[v].b > 30.0) assign(v, squash(mk(n, vars[v].b)));
    break;
  case 8: /* a loop body that leaves early after filling locals (the fused
            * port takes back what it recorded; a store to an outer variable
            * before the exit keeps it) */ {
    int form = rnd(4); /* continue, break, a final if, an outer store first */
    line("for (int k = 0; k < 3; k++) {");
    ind++;
    line("%s d[2];", R);
    line("d[0] = sin(x[(k + %d) %% n]) - 0.5 * tanh(%s);", rnd(n_inputs), n);
    line("d[1] = d[0] * cos(x[k %% n]);");
    line("%s q = d[0] * d[0] + d[1];", R);
    if (form == 3) line("%s -= 0.125 * d[0];", n);
    double c = rconst(0.5, 2.5);
    if (form == 2) {
      line("if (q < %g) {", c);
      line("  %s += 0.25 * q * d[1];", n);
      line("}");
    } else {
      line("if (q > %g) %s;", c, form == 1 ? "break" : "continue");
      line("%s += 0.25 * q * d[1];", n);
    }
    ind--;
    line("}");
    vars[v].b += 4.8;
    if (vars[v].b > 30.0) assign(v, squash(mk(n, vars[v].b)));
    break;
  }
  default: /* a struct copied whole */
    if (opt.structs) {
      line("{");
      ind++;
      line("struct fz_s c = *ps;");
      line("c.u = c.u * %s;", n);
      line("s = c;");
      ind--;
      line("}");
      /* s.u is now bounded by the product. */
      for (int i = 0; i < nvars; i++)
        if (!strcmp(vars[i].name, "s.u")) {
          vars[i].b *= vars[v].b;
          if (vars[i].b > 30.0) assign(i, squash(mk("s.u", vars[i].b)));
        }
    }
    break;
  }
}

static void stmt(int depth, int budget) {
  int v = writable();
  int r = rnd(100);
  if (v >= 0 && chance(12)) {
    extra(depth, v);
    return;
  }
  if (v < 0 || r < 14) { /* a new local */
    ex e = gen(depth);
    if (e.b > 30.0) e = squash(e);
    char *name = fmt("t%d", ntemps++);
    line("%s %s = %s;", R, name, e.s);
    push_var(name, e.b);
    return;
  }
  if (r < 30) {
    assign(v, gen(depth));
    return;
  }
  if (r < 42) { /* compound assignment */
    ex e = small(depth);
    double b = vars[v].b;
    switch (rnd(4)) {
    case 0: line("%s += %s;", vars[v].name, e.s), b += e.b; break;
    case 1: line("%s -= %s;", vars[v].name, e.s), b += e.b; break;
    case 2:
      e = bounded(depth);
      line("%s *= %s;", vars[v].name, e.s), b *= e.b;
      break;
    default:
      line("%s /= (2.0 + %s);", vars[v].name, bounded(depth).s);
      b *= 2.0;
      break;
    }
    vars[v].b = b;
    if (b > 30.0) assign(v, squash(mk(vars[v].name, b)));
    return;
  }
  if (r < 46) { /* ++ and -- as statements */
    static const char *f[] = {"%s++;", "++%s;", "%s--;", "--%s;"};
    line(f[rnd(4)], vars[v].name);
    vars[v].b += 1.0;
    return;
  }
  if (r < 54) { /* a ternary */
    ex a = gen(depth - 1), b = gen(depth - 1);
    if (a.b > 30.0) a = squash(a);
    if (b.b > 30.0) b = squash(b);
    line("%s = %s ? %s : %s;", vars[v].name, comparison(depth - 1), a.s, b.s);
    double nb = a.b > b.b ? a.b : b.b;
    vars[v].b = branch_depth && vars[v].b > nb ? vars[v].b : nb;
    return;
  }
  if (r < 66 && budget > 1) { /* a branch */
    line("if (%s) {", comparison(depth - 1));
    ind++;
    branch_depth++;
    block(depth, budget / 2 + 1);
    ind--;
    if (chance(60)) {
      line("} else {");
      ind++;
      block(depth, budget / 2 + 1);
      ind--;
    }
    branch_depth--;
    line("}");
    /* Bounds after the branch: the larger of both sides, which the
     * statements already capped. */
    return;
  }
  if (r < 76 && budget > 1 && loop_depth == 0) { /* a loop over the inputs */
    int kind = rnd(3);
    if (kind == 0)
      line("for (int i = 0; i < n; i++) {");
    else if (kind == 1) {
      line("{");
      ind++;
      line("int i = 0;");
      line("while (i < n) {");
    } else {
      line("{");
      ind++;
      line("int i = n - 1;");
      line("do {");
    }
    ind++;
    loop_depth++;
    int s = nvars;
    for (int k = 0; k < budget / 2 + 1; k++) {
      int w = writable();
      if (chance(50)) { /* t0 exists, so w >= 0 */
        ex e = small(depth - 1);
        line("%s %s(%s);", vars[w].name, chance(50) ? "+=" : "-=", e.s);
        vars[w].b += e.b * n_inputs;
      } else
        stmt(depth - 1, 1);
    }
    fold(s);
    loop_depth--;
    if (kind == 1) line("i++;");
    if (kind == 2) line("i--;");
    ind--;
    if (kind == 0)
      line("}");
    else if (kind == 1) {
      line("}");
      ind--;
      line("}");
    } else {
      line("} while (i >= 0);");
      ind--;
      line("}");
    }
    for (int i = 0; i < nvars; i++)
      if (vars[i].b > 30.0 && vars[i].name[0] != '(') assign(i, squash(mk(vars[i].name, vars[i].b)));
    return;
  }
  if (r < 79 && opt.isnan_calls) {
    line("if (!isnan(%s) && !isinf(%s)) %s += %s;", vars[v].name, vars[v].name, vars[v].name, small(depth - 1).s);
    vars[v].b += 4.0;
    return;
  }
  if (r < 80 && opt.passive_store && passive_dbl) { /* an active value into passive storage */
    line("d = 0.5 * %s;", vars[v].name);
    return;
  }
  if (r < 82 && opt.pointers) { /* writes through a pointer into a local */
    char *p = fmt("q%d", ntemps++);
    line("%s *%s = &%s;", R, p, vars[v].name);
    ex e = small(depth - 1);
    line("*%s %s %s;", p, chance(50) ? "=" : "+=", e.s);
    vars[v].b += e.b;
    return;
  }
  if (r < 88 && opt.helpers) { /* a helper writing through its pointer argument, aliased */
    line("fz_h1(&%s, %s);", vars[v].name, chance(50) ? vars[v].name : small(depth - 1).s);
    vars[v].b = 1.6 + 2.0;
    return;
  }
  assign(v, gen(depth));
}

/* A scalar temporary other than `not` (-1: none): MPI buffers must not alias. */
static int temp_other(int not) {
  int cands[MAXV], nc = 0;
  for (int i = 0; i < nvars; i++)
    if (vars[i].name[0] == 't' && i != not) cands[nc++] = i;
  return nc ? cands[rnd(nc)] : -1;
}

static int temp_new(int depth) {
  ex e = small(depth);
  char *name = fmt("t%d", ntemps++);
  line("%s %s = %s;", R, name, e.s);
  push_var(name, e.b);
  return nvars - 1;
}

/* One MPI call on the active temporaries, at the top level of fz_f where
 * every rank runs it, in one of the syntactic positions. */
static void mpi_stmt(int depth) {
  int v = temp_other(-1);
  if (v < 0) v = temp_new(depth);
  int w = temp_other(v);
  if (w < 0) w = temp_new(depth);
  char *V = vars[v].name, *W = vars[w].name;
  const char *C = "MPI_COMM_WORLD", *D = "MPI_DOUBLE";
  static const char *ops[] = {"MPI_SUM", "MPI_MAX", "MPI_MIN"};
  char *call = NULL; /* a single call, placed in a random position below */
  double bw = vars[v].b * 4.0;
  switch (rnd(9)) {
  case 0: call = fmt("MPI_Allreduce(MPI_IN_PLACE, &%s, 1, %s, MPI_SUM, %s)", V, D, C); w = v; break;
  case 1: call = fmt("MPI_Allreduce(&%s, &%s, 1, %s, %s, %s)", V, W, D, ops[rnd(3)], C); break;
  case 2: call = fmt("MPI_Bcast(&%s, 1, %s, size - 1, %s)", V, D, C); w = v; bw = vars[v].b; break;
  case 3:
    call = fmt("MPI_Sendrecv(&%s, 1, %s, (rank + 1) %% size, 3, &%s, 1, %s, (rank + size - 1) %% size, 3, %s, "
               "MPI_STATUS_IGNORE)", V, D, W, D, C);
    bw = vars[v].b;
    break;
  case 4:
    line("{");
    ind++;
    line("MPI_Request rq[2];");
    line("MPI_Status st[2];");
    line("MPI_Irecv(&%s, 1, %s, (rank + size - 1) %% size, 4, %s, &rq[0]);", W, D, C);
    line("MPI_Isend(&%s, 1, %s, (rank + 1) %% size, 4, %s, &rq[1]);", V, D, C);
    line("MPI_Waitall(2, rq, st);");
    ind--;
    line("}");
    bw = vars[v].b;
    break;
  case 5:
    line("MPI_Reduce(&%s, &%s, 1, %s, MPI_SUM, 0, %s);", V, W, D, C);
    call = fmt("MPI_Bcast(&%s, 1, %s, 0, %s)", W, D, C);
    break;
  case 6:
    line("{");
    ind++;
    line("%s ag[4];", R);
    line("MPI_Allgather(&%s, 1, %s, ag, 1, %s, %s);", V, D, D, C);
    line("%s = 0.0;", W);
    line("for (int k = 0; k < size; k++) %s += ag[k] * (k + 1);", W);
    ind--;
    line("}");
    bw = vars[v].b * 10.0;
    break;
  case 7: call = fmt("MPI_Scan(&%s, &%s, 1, %s, MPI_SUM, %s)", V, W, D, C); break;
  default:
    line("if (size > 1) {");
    line("  if (rank == 0) MPI_Send(&%s, 1, %s, 1, 5, %s);", V, D, C);
    line("  else if (rank == 1) MPI_Recv(&%s, 1, %s, 0, 5, %s, MPI_STATUS_IGNORE);", W, D, C);
    line("}");
    bw = vars[v].b > vars[w].b ? vars[v].b : vars[w].b;
    break;
  }
  if (call) {
    int pos = rnd(opt.mpi_init && opt.mpi_cond ? 6 : opt.mpi_init || opt.mpi_cond ? 5 : 4);
    if (pos == 4 && !opt.mpi_init) pos = 5;
    if (pos == 1 && w == v && strstr(call, "MPI_IN_PLACE") && opt.mpi_macro) {
      line("FZ_ALLSUM(%s);", V); /* the call in a macro */
    } else if (pos == 1) {
      line("fz_check(%s);", call); /* an argument */
    } else if (pos == 2 && w == v && strstr(call, "MPI_IN_PLACE")) {
      line("fz_check(fz_allsum(&%s));", V); /* returned by a helper */
    } else if (pos == 4) {
      char *rc = fmt("rc%d", ntemps++);
      line("int %s = %s;", rc, call); /* a declaration's initializer */
      line("if (%s != MPI_SUCCESS) MPI_Abort(%s, 1);", rc, C);
    } else if (pos == 5 && opt.mpi_cond) {
      line("if (%s != MPI_SUCCESS) MPI_Abort(%s, 1);", call, C); /* a condition */
    } else {
      line("%s;", call);
    }
  }
  vars[w].b = bw;
  if (bw > 30.0) assign(w, squash(mk(vars[w].name, bw)));
}

static void emit_macros(FILE *f) {
  fprintf(f, "#define FZ_SQ(a) ((a) * (a))\n");
  fprintf(f, "#define FZ_MIX(a, b) (0.5 * (a) + 0.25 * (b))\n");
  fprintf(f, "#define FZ_K 0.75\n\n");
}

/* The program's real type: typedef double real_t; and with type-macro the
 * macro FZ_REAL that names double, which spells the active declarations in
 * the double mode and the typedef in the other. */
static void emit_real_type(FILE *f) {
  if (opt.type_macro) fprintf(f, "#define FZ_REAL double\n");
  if (opt.typedef_mode) fprintf(f, "typedef %s real_t;\n", opt.type_macro ? "FZ_REAL" : "double");
}

static void emit_prelude(FILE *f) {
  fprintf(f, "/* Generated by fz_gen; a program in the subset ariadne-port claims. */\n");
  fprintf(f, "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
  if (opt.mpi) fprintf(f, "#include <mpi.h>\n");
  if (opt.header) fprintf(f, "#include \"fz_h.h\"\n");
  fprintf(f, "\n");
  if ((opt.typedef_mode || opt.type_macro) && !opt.header) {
    emit_real_type(f);
    fprintf(f, "\n");
  }
  if (opt.mpi) {
    fprintf(f, "static void fz_check(int rc) {\n  if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 1);\n}\n\n");
    fprintf(f, "static int fz_allsum(%s *v) {\n  return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_SUM, "
               "MPI_COMM_WORLD);\n}\n\n",
            opt.typedef_mode ? "real_t" : "double");
    if (opt.mpi_macro)
      fprintf(f, "#define FZ_ALLSUM(v) MPI_Allreduce(MPI_IN_PLACE, &(v), 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD)\n\n");
  }
  if (opt.macros && !opt.header) emit_macros(f);
  if (opt.structs) fprintf(f, "struct fz_s {\n  %s u, v;\n  %s w[3];\n  int k;\n};\n\n", R, R);
  if (opt.global) fprintf(f, "%s fz_gl = 0.5;\n\n", R);
  if (opt.helpers) {
    fprintf(f, "static %s fz_h0(%s a, %s b) {\n", R, R, R);
    fprintf(f, "  %s s = a * 0.5;\n  if (a > b) s += tanh(b);\n  else s -= atan(b);\n", R);
    fprintf(f, "  return s + 1.5 * sin(a * b);\n}\n\n");
    fprintf(f, "static void fz_h1(%s *p, %s a) {\n  *p = 1.6 * cos(*p) + atan(a);\n", R, R);
    if (opt.global) fprintf(f, "  fz_gl += 0.25 * sin(*p);\n");
    fprintf(f, "}\n\n");
    if (opt.structs) {
      fprintf(f, "static %s fz_hs(struct fz_s q) { return tanh(q.u * q.w[1] + q.v); }\n\n", R);
      fprintf(f, "static void fz_hp(struct fz_s *q, %s v) { q->v = 0.5 * q->v + sin(v * q->u); }\n\n", R);
    }
    fprintf(f, "static %s fz_h2(const %s *v, int m) {\n  %s s = 0.0;\n", R, R, R);
    fprintf(f, "  for (int i = 0; i < m; i++) s += v[i] * (i + 1);\n  return s / (1.0 + fabs(s));\n}\n\n");
  }
}

static void emit_header(const char *dir) {
  char *path = fmt("%s/fz_h.h", dir);
  FILE *h = fopen(path, "w");
  if (!h) {
    perror(path);
    exit(2);
  }
  fprintf(h, "/* Generated by fz_gen: helpers defined in a header. */\n#ifndef FZ_H_H\n#define FZ_H_H\n#include <math.h>\n");
  emit_real_type(h);
  if (opt.macros) emit_macros(h);
  if (opt.header_helper) fprintf(h, "static inline %s fz_hdr_sq(%s a) { return 1.0 + a * a; }\n", R, R);
  fprintf(h, "#endif\n");
  fclose(h);
}

/* One objective, fz_fK. */
static void emit_objective(int k) {
  char *t0;
  nvars = ntemps = loop_depth = branch_depth = passive_dbl = 0;
  fprintf(out, "%s fz_f%d(const %s *x, int n) {\n", R, k, R);
  ind = 1;
  if (opt.global) {
    line("fz_gl = 0.5 * x[0];"); /* a static active value is reset at each recording */
    push_var("fz_gl", 1.0);
  }
  if (opt.typedef_mode) {
    line("double d = 0.5 + 0.25 * n;");
    passive_dbl = 1;
  }
  t0 = fmt("t%d", ntemps++);
  if (opt.mpi) {
    line("int rank, size;");
    line("MPI_Comm_rank(MPI_COMM_WORLD, &rank);");
    line("MPI_Comm_size(MPI_COMM_WORLD, &size);");
    line("%s %s = x[rank %% n] * %.2f;", R, t0, rconst(0.5, 1.5));
  } else
    line("%s %s = x[0] * %.2f;", R, t0, rconst(0.5, 1.5));
  base_var = nvars;
  push_var(t0, 3.0);
  if (opt.typedef_mode) {
    line("%s *= d;", t0); /* a passive double into active arithmetic */
    vars[base_var].b *= 1.75;
  }
  int arr = chance(60);
  if (arr) {
    line("%s a[4];", R);
    line("for (int k = 0; k < 4; k++) a[k] = sin(x[k %% n] + 0.5 * k);");
    for (int k = 0; k < 4; k++) push_var(fmt("a[%d]", k), 1.0);
    if (opt.byte_moves) {
      line("%s b[4];", R);
      line("memcpy(b, a, sizeof a);");
      line("memmove(a + 1, b, 3 * sizeof(%s));", R);
      for (int k = 0; k < 4; k++) push_var(fmt("b[%d]", k), 1.0);
    }
    if (opt.pointers) {
      line("%s *r = a + 1;", R); /* r[j] aliases a[j + 1] */
      line("r[0] += a[0] * r[2];");
      push_var("r[1]", 1.0);
    }
  }
  if (opt.structs) {
    line("struct fz_s s = {x[0], 0.5, {0.0, 0.0, 0.0}, 2};");
    line("struct fz_s *ps = &s;");
    line("ps->w[1] = x[n - 1] * 0.5;");
    push_var("s.u", 2.0);
    push_var("s.v", 0.5);
    push_var("ps->w[1]", 1.0);
    push_var("s.w[s.k]", 0.0);
  }
  int nstmts = 4 + rnd(8);
  for (int i = 0; i < nstmts; i++) {
    stmt(3, 4);
    if (opt.mpi && chance(50)) mpi_stmt(2);
  }
  if (opt.helpers) { /* every helper is used */
    if (arr) line("%s = fz_h2(a, 4);", vars[writable()].name);
    line("%s += fz_h2(x, n) + 0.125 * fz_h0(x[0], %s);", t0, t0);
    line("fz_h1(&%s, x[n - 1]);", t0);
    if (opt.structs) {
      line("fz_hp(&s, %s);", t0);
      line("%s += fz_hs(*ps);", t0);
    }
  }
  /* The result depends on every variable in scope. */
  fprintf(out, opt.mpi ? "  %s res =" : "  return", R);
  for (int i = 0; i < nvars; i++) {
    ex e = vars[i].b > 30.0 ? squash(mk(vars[i].name, vars[i].b)) : mk(vars[i].name, vars[i].b);
    fprintf(out, "%s%s", i ? " + " : " ", e.s);
  }
  fprintf(out, ";\n");
  if (opt.mpi) fprintf(out, "  fz_check(fz_allsum(&res)); /* the objective is replicated */\n  return res;\n");
  fprintf(out, "}\n\n");
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fz_gen SEED DIR [mpi|isnan|passive-store|memcpy|real-cast|type-macro|passive-call|header-helper|mpi-init|mpi-cond|mpi-macro]...\n");
    return 2;
  }
  unsigned long long seed = strtoull(argv[1], NULL, 10);
  const char *dir = argv[2];
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "isnan")) opt.isnan_calls = 1;
    else if (!strcmp(argv[i], "passive-store")) opt.passive_store = 1;
    else if (!strcmp(argv[i], "memcpy")) opt.byte_moves = 1;
    else if (!strcmp(argv[i], "real-cast")) opt.real_cast = 1;
    else if (!strcmp(argv[i], "type-macro")) opt.type_macro = 1;
    else if (!strcmp(argv[i], "passive-call")) opt.passive_call = 1;
    else if (!strcmp(argv[i], "header-helper")) opt.header_helper = 1;
    else if (!strcmp(argv[i], "mpi")) opt.mpi = 1;
    else if (!strcmp(argv[i], "mpi-init")) opt.mpi = opt.mpi_init = 1;
    else if (!strcmp(argv[i], "mpi-cond")) opt.mpi = opt.mpi_cond = 1;
    else if (!strcmp(argv[i], "mpi-macro")) opt.mpi = opt.mpi_macro = 1;
    else {
      fprintf(stderr, "fz_gen: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  rng_state = seed * 0x2545F4914F6CDD1Dull + 1;
  opt.typedef_mode = chance(30);
  opt.macros = chance(60);
  opt.header = chance(40);
  opt.helpers = chance(70);
  opt.structs = chance(60);
  opt.pointers = chance(60);
  opt.global = chance(40);
  if (opt.typedef_mode)
    R = "real_t";
  else if (opt.type_macro)
    R = "FZ_REAL";
  n_inputs = 2 + rnd(4);

  char *path = fmt("%s/p.c", dir);
  out = fopen(path, "w");
  if (!out) {
    perror(path);
    return 2;
  }
  if (opt.header) emit_header(dir);
  emit_prelude(out);

  for (int k = 0; k < FZ_BATCH; k++) emit_objective(k);

  fprintf(out, "int fz_n = %d;\ndouble fz_x0[%d] = {", n_inputs, n_inputs);
  /* Inputs differ from each other and from every constant (two decimals), so
   * that no comparison of inputs or with a constant is a tie, a jump at x0. */
  for (int i = 0; i < n_inputs; i++) fprintf(out, "%s%.4f", i ? ", " : "", rconst(-1.5, 1.5) + 0.0137 * (i + 1));
  fprintf(out, "};\n\n");
  if (opt.mpi) {
    fprintf(out, "int main(int argc, char **argv) {\n  MPI_Init(&argc, &argv);\n  int rank;\n");
    fprintf(out, "  MPI_Comm_rank(MPI_COMM_WORLD, &rank);\n");
  } else
    fprintf(out, "int main(void) {\n");
  fprintf(out, "  %s x[%d];\n", R, n_inputs);
  fprintf(out, "  for (int i = 0; i < fz_n; i++) x[i] = fz_x0[i];\n");
  const char *guard = opt.mpi ? "if (rank == 0) " : "";
  for (int k = 0; k < FZ_BATCH; k++) {
    fprintf(out, "  %s y%d = fz_f%d(x, fz_n);\n", R, k, k);
    fprintf(out, "  %sprintf(\"%%a\\n\", y%d);\n", guard, k);
    if (opt.global) fprintf(out, "  %sprintf(\"%%a\\n\", fz_gl);\n", guard);
  }
  if (opt.mpi) fprintf(out, "  MPI_Finalize();\n");
  fprintf(out, "  return 0;\n}\n");
  fclose(out);
  printf("%s\n", opt.typedef_mode ? "real_t" : "double");
  return 0;
}
