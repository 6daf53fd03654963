/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The analysis and the rewrite of one translation unit.
 *
 * The port is a list of edits on the file's text: declarations get their
 * active type tokens replaced, and each expression that needs a change is
 * printed again from the AST, with untouched subexpressions copied from the
 * source, so that lines that need no change stay as they were. An expression
 * is *active* if its value will be an ad_real: a variable, field, element or
 * call result of an active type, or arithmetic on one. Active arithmetic
 * becomes ad_* calls that follow the AST, which is C's evaluation order, so
 * the port computes the very same doubles as the original.
 *
 * Function-like macros whose expansion does active arithmetic are expanded
 * in place (their arguments as written) and the file is parsed again, so the
 * rewrite happens at the expansion's spelling.
 */
#define _DEFAULT_SOURCE /* realpath */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port.h"
#include "port_impl.h"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

unsigned pt_off(CXSourceLocation loc) {
  unsigned o = 0;
  clang_getExpansionLocation(loc, NULL, NULL, NULL, &o);
  return o;
}
unsigned pt_b(CXCursor c) { return pt_off(clang_getRangeStart(clang_getCursorExtent(c))); }
unsigned pt_e(CXCursor c) { return pt_off(clang_getRangeEnd(clang_getCursorExtent(c))); }
/* Is c written inside one macro invocation (its body or its arguments):
 * does its extent lie within the invocation's text? Invocations nest or are
 * disjoint, so the furthest reach of those starting at or before c's start
 * tells. */
int pt_in_macro(pt_ctx *x, CXCursor c) {
  unsigned b = pt_b(c), e = pt_e(c);
  int lo = 0, hi = x->nmacros - 1, at = -1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (x->macros[mid].b <= b) {
      at = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return at >= 0 && x->macro_reach[at] >= e && x->macro_reach[at] > b;
}

char *pt_orig(pt_ctx *x, CXCursor c) {
  unsigned b = pt_b(c), e = pt_e(c);
  if (e < b || e > x->len) return port_strdup("");
  return port_strndup(x->buf + b, e - b);
}

char *pt_cat(const char *a, const char *b, const char *c) {
  port_str s = {0};
  port_str_add(&s, a);
  port_str_add(&s, b);
  if (c) port_str_add(&s, c);
  return port_str_take(&s);
}

typedef struct kids {
  CXCursor *c;
  int n, cap;
} kids;

static enum CXChildVisitResult kid_visit(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  kids *k = d;
  if (k->n == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 8;
    k->c = realloc(k->c, (size_t)k->cap * sizeof *k->c);
    if (!k->c) abort();
  }
  k->c[k->n++] = c;
  return CXChildVisit_Continue;
}

int pt_children(CXCursor c, CXCursor **out) {
  kids k = {0};
  clang_visitChildren(c, kid_visit, &k);
  *out = k.c;
  return k.n;
}

char *pt_spelling(CXCursor c) {
  CXString s = clang_getCursorSpelling(c);
  char *r = port_strdup(clang_getCString(s));
  clang_disposeString(s);
  return r;
}

void pt_error(pt_ctx *x, CXCursor c, const char *fmt, ...) {
  unsigned line = 0, col = 0;
  clang_getExpansionLocation(clang_getCursorLocation(c), NULL, &line, &col, NULL);
  for (int i = 0; i < x->nreported; i++)
    if (x->reported[i] == pt_off(clang_getCursorLocation(c))) return; /* one report per place */
  if (x->nreported < (int)(sizeof x->reported / sizeof x->reported[0]))
    x->reported[x->nreported++] = pt_off(clang_getCursorLocation(c));
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s:%u:%u: error: ", x->path, line, col);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  x->errors++;
}

/* ------------------------------------------------------------------------ */
/* Types                                                                     */
/* ------------------------------------------------------------------------ */

/* Which --active-type names some input's types used (bit i for name i), so
 * that a name no input declares, a typo or a macro such as
 * `#define DTYPE double`, is reported instead of porting nothing. */
static unsigned long long active_seen;

int port_active_type_seen(int i) { return i >= 64 || (active_seen >> i & 1u); }

int pt_active_name(pt_ctx *x, const char *name) {
  for (int i = 0; i < x->o->nactive; i++)
    if (!strcmp(x->o->active[i], name)) {
      if (i < 64) active_seen |= 1ull << i;
      return 1;
    }
  return 0;
}

/* Does t name an ad_ type through typedefs: `typedef ad_real real_t;` in a
 * file already ported, whose values are no longer doubles to port? */
static int typedef_of_ported(CXType t) {
  for (int guard = 0; guard < 64; guard++) {
    if (t.kind == CXType_Elaborated) {
      t = clang_Type_getNamedType(t);
    } else if (t.kind == CXType_Typedef) {
      CXString s = clang_getTypedefName(t);
      int ported = !strncmp(clang_getCString(s), "ad_", 3);
      clang_disposeString(s);
      if (ported) return 1;
      t = clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t));
    } else {
      return 0;
    }
  }
  return 0;
}

/* Is t (a scalar type) one of the active types, through typedefs? */
int pt_type_active(pt_ctx *x, CXType t) {
  for (int guard = 0; guard < 64; guard++) {
    switch (t.kind) {
    case CXType_Elaborated:
      t = clang_Type_getNamedType(t);
      break;
    case CXType_Typedef: {
      CXString s = clang_getTypedefName(t);
      int a = pt_active_name(x, clang_getCString(s));
      int ported = !strncmp(clang_getCString(s), "ad_", 3); /* ad_real and friends: already ported */
      clang_disposeString(s);
      if (a) return !typedef_of_ported(clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t)));
      if (ported) return 0;
      t = clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t));
      break;
    }
    case CXType_Double:
      return x->double_active;
    default:
      return 0;
    }
  }
  return 0;
}

/* Does t hold active data: an active scalar, or a pointer to, array of or
 * struct with one (struct fields are checked one level deep). */
static enum CXVisitorResult field_visit(CXCursor c, CXClientData d) {
  void **pd = d;
  pt_ctx *x = pd[0];
  if (pt_type_holds_active(x, clang_getCursorType(c))) {
    *(int *)pd[1] = 1;
    return CXVisit_Break;
  }
  return CXVisit_Continue;
}

int pt_type_holds_active(pt_ctx *x, CXType t) {
  for (int guard = 0; guard < 64; guard++) {
    if (pt_type_active(x, t)) return 1;
    switch (t.kind) {
    case CXType_Elaborated:
      t = clang_Type_getNamedType(t);
      break;
    case CXType_Typedef: {
      CXString s = clang_getTypedefName(t);
      int ported = !strncmp(clang_getCString(s), "ad_", 3);
      clang_disposeString(s);
      if (ported) return 0;
      t = clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t));
      break;
    }
    case CXType_Pointer:
      t = clang_getPointeeType(t);
      break;
    case CXType_ConstantArray:
    case CXType_IncompleteArray:
    case CXType_VariableArray:
    case CXType_DependentSizedArray:
      t = clang_getArrayElementType(t);
      break;
    case CXType_Record: {
      CXString s = clang_getCursorSpelling(clang_getTypeDeclaration(t));
      int ported = !strncmp(clang_getCString(s), "ad_", 3);
      clang_disposeString(s);
      if (ported || x->record_depth > 2) return 0;
      int found = 0;
      void *pd[2] = {x, &found};
      x->record_depth++;
      clang_Type_visitFields(t, field_visit, pd);
      x->record_depth--;
      return found;
    }
    default:
      return 0;
    }
  }
  return 0;
}

static CXType strip_sugar(CXType t) {
  for (int g = 0; g < 64; g++) {
    if (t.kind == CXType_Elaborated)
      t = clang_Type_getNamedType(t);
    else if (t.kind == CXType_Typedef)
      t = clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t));
    else
      break;
  }
  return t;
}

int pt_is_float(CXType t) {
  CXType c = clang_getCanonicalType(t);
  return c.kind == CXType_Double || c.kind == CXType_Float || c.kind == CXType_LongDouble;
}

int pt_pointer_like(CXType t) {
  CXType c = clang_getCanonicalType(t);
  return c.kind == CXType_Pointer || c.kind == CXType_ConstantArray || c.kind == CXType_IncompleteArray ||
         c.kind == CXType_VariableArray;
}

/* The function type behind a callee: a function, a pointer to one, a typedef of either. */
CXType pt_fn_type(CXType t) {
  for (int g = 0; g < 64; g++) {
    switch (t.kind) {
    case CXType_Elaborated:
      t = clang_Type_getNamedType(t);
      break;
    case CXType_Typedef:
      t = clang_getTypedefDeclUnderlyingType(clang_getTypeDeclaration(t));
      break;
    case CXType_Pointer:
      t = clang_getPointeeType(t);
      break;
    case CXType_Unexposed: {
      CXType c = clang_getCanonicalType(t);
      if (c.kind == t.kind) return t;
      t = c;
      break;
    }
    default:
      return t;
    }
  }
  return t;
}

/* ------------------------------------------------------------------------ */
/* Operators                                                                 */
/* ------------------------------------------------------------------------ */

static const char *skip_space(const char *p, const char *end) {
  while (p < end) {
    if (isspace((unsigned char)*p))
      p++;
    else if (p + 1 < end && p[0] == '/' && p[1] == '*') {
      const char *q = strstr(p + 2, "*/");
      p = q ? q + 2 : end;
    } else if (p + 1 < end && p[0] == '/' && p[1] == '/') {
      while (p < end && *p != '\n') p++;
    } else if (*p == '\\' && p + 1 < end && p[1] == '\n')
      p += 2;
    else
      break;
  }
  return p;
}

static const char *const binops[] = {"<<=", ">>=", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=",
                                     "-=",  "*=",  "/=", "%=", "&=", "|=", "^=", "+",  "-",  "*",  "/",
                                     "%",   "<",   ">",  "&",  "|",  "^",  "=",  ",",  NULL};

/* The binary operator written after the left operand. */
static const char *binop_of(pt_ctx *x, CXCursor l) {
  const char *p = skip_space(x->buf + pt_e(l), x->buf + x->len);
  for (int i = 0; binops[i]; i++)
    if (!strncmp(p, binops[i], strlen(binops[i]))) return binops[i];
  return "?";
}

const char *pt_binop(pt_ctx *x, CXCursor c) {
  if (pt_in_macro(x, c)) return "?";
  CXCursor *k;
  int n = pt_children(c, &k);
  const char *op = n == 2 ? binop_of(x, k[0]) : "?";
  free(k);
  return op;
}

/* A unary operator: "-", "+", "!", "~", "*", "&", "++", "--" (prefix) or "p++", "p--". */
const char *pt_unop(pt_ctx *x, CXCursor c, CXCursor child) {
  if (pt_in_macro(x, c)) return "?";
  if (pt_b(c) == pt_b(child)) {
    const char *p = skip_space(x->buf + pt_e(child), x->buf + x->len);
    if (!strncmp(p, "++", 2)) return "p++";
    if (!strncmp(p, "--", 2)) return "p--";
    return "?";
  }
  const char *p = x->buf + pt_b(c);
  static const char *const ops[] = {"++", "--", "-", "+", "!", "~", "*", "&", NULL};
  for (int i = 0; ops[i]; i++)
    if (!strncmp(p, ops[i], strlen(ops[i]))) return ops[i];
  return "?";
}

/* ------------------------------------------------------------------------ */
/* Activity                                                                  */
/* ------------------------------------------------------------------------ */

static int is_expr_kind(enum CXCursorKind k) { return clang_isExpression(k); }

/* The last expression child (the operand of a cast, say). */
CXCursor pt_last_expr(CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  CXCursor r = clang_getNullCursor();
  for (int i = n - 1; i >= 0; i--)
    if (is_expr_kind(clang_getCursorKind(k[i]))) {
      r = k[i];
      break;
    }
  free(k);
  return r;
}

/* The expression below implicit casts and parentheses. */
CXCursor pt_strip(CXCursor c) {
  for (int g = 0; g < 64; g++) {
    enum CXCursorKind k = clang_getCursorKind(c);
    if (k != CXCursor_UnexposedExpr && k != CXCursor_ParenExpr) break;
    CXCursor *kk;
    int n = pt_children(c, &kk);
    if (n != 1 || !is_expr_kind(clang_getCursorKind(kk[0]))) {
      free(kk);
      break;
    }
    c = kk[0];
    free(kk);
  }
  return c;
}

/* A function that is ported: defined in this file (or a file ported with it
 * in its unit), or in another input (static helpers of an input header too),
 * or named ported elsewhere (--ported). Its calls pass ad_real. A function
 * the inputs only declare (`extern double ext(double);`, a Fortran routine, a
 * library) keeps its double declaration: it links against double code. */
/* The names the port writes itself (the fused port's helpers ad__f_* and the
 * locals of its blocks, ad__a, ad__d, ad__v) start with ad__, a prefix C
 * code outside Ariadne does not use: on the tool's own output they are code
 * already ported, whose doubles are values and partials, not active data. */
int pt_port_own(CXCursor d) {
  CXString s = clang_getCursorSpelling(d);
  int own = !strncmp(clang_getCString(s), "ad__", 4);
  clang_disposeString(s);
  return own;
}

int pt_ported_function(pt_ctx *x, CXCursor fd) {
  if (clang_getCursorKind(fd) != CXCursor_FunctionDecl || pt_port_own(fd)) return 0;
  CXCursor def = clang_getCursorDefinition(fd);
  if (!clang_Cursor_isNull(def) && pt_own_location(x, clang_getCursorLocation(def))) return 1;
  if (x->o->nported == 0) return 0;
  CXString s = clang_getCursorSpelling(fd);
  const char *name = clang_getCString(s);
  int found = 0;
  for (int i = 0; i < x->o->nported && !found; i++) found = !strcmp(x->o->ported[i], name);
  clang_disposeString(s);
  return found;
}

int pt_math_twin(const char *name) {
  static const char *const twins[] = {"sin",   "cos",   "tan",   "asin",  "acos",  "atan",  "atan2", "sinh",  "cosh",
                                      "tanh",  "asinh", "acosh", "atanh", "exp",   "exp2",  "expm1", "log",   "log2",
                                      "log10", "log1p", "sqrt",  "cbrt",  "pow",   "hypot", "fabs",  "fmin",  "fmax",
                                      "fma",   "fmod",  "erf",   "erfc",  "floor", "ceil",  "round", "trunc", NULL};
  for (int i = 0; twins[i]; i++)
    if (!strcmp(twins[i], name)) return 1;
  return 0;
}

static int is_math_name(const char *name) {
  static const char *const others[] = {"tgamma",    "lgamma",    "ldexp",    "frexp",     "modf",   "scalbn", "logb",
                                       "ilogb",     "nearbyint", "rint",     "lrint",     "llrint", "lround", "llround",
                                       "remainder", "remquo",    "copysign", "nextafter", "fdim",   "sincos", "j0",
                                       "j1",        "y0",        "y1",       "jn",        "yn",     NULL};
  for (int i = 0; others[i]; i++)
    if (!strcmp(others[i], name)) return 1;
  return 0;
}

/* A callee that is a function pointer variable, parameter or field declared
 * in this file (its type is ported with it). */
int pt_pointer_of_file(pt_ctx *x, CXCursor callee) {
  CXCursor e = pt_strip(callee);
  enum CXCursorKind k = clang_getCursorKind(e);
  if (k != CXCursor_DeclRefExpr && k != CXCursor_MemberRefExpr) return 0;
  CXCursor d = clang_getCursorReferenced(e);
  enum CXCursorKind dk = clang_getCursorKind(d);
  if (dk != CXCursor_VarDecl && dk != CXCursor_ParmDecl && dk != CXCursor_FieldDecl) return 0;
  return pt_own_location(x, clang_getCursorLocation(d));
}

/* Are a and b the same expression? clang_equalCursors also compares the
 * declaration a cursor was reached from, which differs between a call's
 * children and its arguments when the call initializes a variable. */
int pt_same_expr(CXCursor a, CXCursor b) {
  return clang_getCursorKind(a) == clang_getCursorKind(b) &&
         clang_equalRanges(clang_getCursorExtent(a), clang_getCursorExtent(b));
}

static CXCursor callee_decl(CXCursor call) {
  CXCursor r = clang_getCursorReferenced(call);
  return r;
}

int pt_act(pt_ctx *x, CXCursor c) {
  CXType t = clang_getCursorType(c);
  if (!pt_is_float(t)) return 0;
  enum CXCursorKind k = clang_getCursorKind(c);
  switch (k) {
  case CXCursor_DeclRefExpr: {
    CXCursor d = clang_getCursorReferenced(c);
    enum CXCursorKind dk = clang_getCursorKind(d);
    if (dk == CXCursor_VarDecl || dk == CXCursor_ParmDecl || dk == CXCursor_FieldDecl)
      return pt_type_active(x, clang_getCursorType(d)) && !pt_local_passive(x, d) && !pt_port_own(d);
    return 0;
  }
  case CXCursor_MemberRefExpr:
  case CXCursor_ArraySubscriptExpr: {
    /* ad__d[i]: an element of the port's own arrays of partials is passive. */
    CXCursor *kk;
    int n = pt_children(c, &kk);
    CXCursor base = n > 0 ? pt_strip(kk[0]) : clang_getNullCursor();
    free(kk);
    if (clang_getCursorKind(base) == CXCursor_DeclRefExpr && pt_port_own(clang_getCursorReferenced(base))) return 0;
    return pt_type_active(x, t);
  }
  case CXCursor_ParenExpr: {
    CXCursor e = pt_last_expr(c);
    return !clang_Cursor_isNull(e) && pt_act(x, e);
  }
  case CXCursor_UnaryOperator: {
    CXCursor e = pt_last_expr(c);
    if (clang_Cursor_isNull(e)) return 0;
    if (pt_pointer_like(clang_getCursorType(e))) return pt_type_active(x, t);
    return pt_act(x, e);
  }
  case CXCursor_BinaryOperator: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int a = 0;
    if (n == 2) {
      const char *op = pt_binop(x, c);
      if (!strcmp(op, "="))
        a = pt_act(x, kk[0]);
      else if (!strcmp(op, ","))
        a = pt_act(x, kk[1]);
      else
        a = pt_act(x, kk[0]) || pt_act(x, kk[1]);
    }
    free(kk);
    return a;
  }
  case CXCursor_CompoundAssignOperator: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int a = n == 2 && pt_act(x, kk[0]);
    free(kk);
    return a;
  }
  case CXCursor_ConditionalOperator: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int a = n == 3 && (pt_act(x, kk[1]) || pt_act(x, kk[2]));
    free(kk);
    return a;
  }
  case CXCursor_UnexposedExpr: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int a = n == 1 && is_expr_kind(clang_getCursorKind(kk[0])) && pt_act(x, kk[0]);
    /* An implicit conversion to a passive floating type (float, or double
     * when only a typedef is active) is not active. */
    if (a && pt_is_float(clang_getCursorType(kk[0])) &&
        clang_getCanonicalType(t).kind != clang_getCanonicalType(clang_getCursorType(kk[0])).kind)
      a = 0;
    free(kk);
    return a;
  }
  case CXCursor_CStyleCastExpr: {
    CXCursor e = pt_last_expr(c);
    return !clang_Cursor_isNull(e) && pt_type_active(x, t) && pt_act(x, e);
  }
  case CXCursor_CallExpr: {
    CXCursor fd = callee_decl(c);
    if (clang_getCursorKind(fd) == CXCursor_FunctionDecl && !pt_ported_function(x, fd)) {
      char *name = pt_spelling(fd);
      int a = 0;
      if (pt_math_twin(name)) {
        int na = clang_Cursor_getNumArguments(c);
        for (int i = 0; i < na; i++) a |= pt_act(x, clang_Cursor_getArgument(c, (unsigned)i));
      }
      free(name);
      return a;
    }
    if (clang_getCursorKind(fd) == CXCursor_FunctionDecl) return pt_type_active(x, clang_getCursorResultType(fd));
    /* Through a pointer of this file: the pointer's function type. */
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int a = 0;
    if (n > 0 && pt_pointer_of_file(x, kk[0]))
      a = pt_type_active(x, clang_getResultType(pt_fn_type(clang_getCursorType(kk[0]))));
    free(kk);
    return a;
  }
  default:
    return 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Macros                                                                    */
/* ------------------------------------------------------------------------ */

static int library_known(const char *name);

/* Does the function take or return active data? */
static int signature_active(pt_ctx *x, CXCursor fd) {
  CXType ft = clang_getCursorType(fd);
  if (pt_type_holds_active(x, clang_getResultType(ft))) return 1;
  int np = clang_getNumArgTypes(ft);
  for (int i = 0; i < np; i++)
    if (pt_type_holds_active(x, clang_getArgType(ft, (unsigned)i))) return 1;
  return 0;
}

/* Is c a cast of a passive value to an active type spelled otherwise than
 * `double` (`(real_t)d`)? emit_cast writes it `(double)d`: the written cast
 * would convert to the struct ad_real. */
static int passive_to_active_cast(pt_ctx *x, CXCursor c) {
  if (clang_getCursorKind(c) != CXCursor_CStyleCastExpr) return 0;
  CXCursor e = pt_last_expr(c);
  CXType t = clang_getCursorType(c);
  if (clang_Cursor_isNull(e) || !pt_is_float(t) || !pt_type_active(x, t) || pt_act(x, e)) return 0;
  CXString ts = clang_getTypeSpelling(t);
  int is_double = !strcmp(clang_getCString(ts), "double");
  clang_disposeString(ts);
  return !is_double;
}

/* Where the cast c is written in a macro's argument, [*b, *e) the text of
 * its `(type)`: then it can be rewritten there and the macro kept. */
static int cast_in_argument(pt_ctx *x, CXCursor c, unsigned lo, unsigned hi, unsigned *b, unsigned *e) {
  CXCursor op = pt_last_expr(c);
  CXFile f1 = NULL, f2 = NULL;
  clang_getSpellingLocation(clang_getRangeStart(clang_getCursorExtent(c)), &f1, NULL, NULL, b);
  clang_getSpellingLocation(clang_getRangeStart(clang_getCursorExtent(op)), &f2, NULL, NULL, e);
  if (!f1 || !f2 || !clang_File_isEqual(f1, x->file) || !clang_File_isEqual(f2, x->file)) return 0;
  if (*b < lo || *e > hi || *b >= *e || x->buf[*b] != '(') return 0;
  /* In an invocation's text (an argument), not in a #define's body. */
  int in_call = 0;
  for (int i = 0; i < x->nmacros && x->macros[i].b <= *b && !in_call; i++) in_call = x->macros[i].e > *b;
  if (!in_call) return 0;
  unsigned k = *e;
  while (k > *b && isspace((unsigned char)x->buf[k - 1])) k--;
  if (k <= *b + 1 || x->buf[k - 1] != ')') return 0;
  *e = k;
  return 1;
}

/* Does the expansion that c belongs to do active arithmetic, or call a
 * function of this file, so that it must be expanded to be ported? */
static int macro_needs(pt_ctx *x, CXCursor c) {
  enum CXCursorKind k = clang_getCursorKind(c);
  int self = 0;
  if (k == CXCursor_BinaryOperator || k == CXCursor_CompoundAssignOperator) {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    for (int i = 0; i < n; i++) self |= pt_act(x, kk[i]);
    free(kk);
  } else if (k == CXCursor_UnaryOperator || k == CXCursor_ConditionalOperator) {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    for (int i = 0; i < n; i++) self |= pt_act(x, kk[i]) && !pt_pointer_like(clang_getCursorType(kk[i]));
    free(kk);
  } else if (k == CXCursor_CallExpr) {
    CXCursor fd = callee_decl(c);
    /* A call of a ported function changes only if its signature has active
     * values or its name gets a suffix: `assert(n == count())` stays. */
    if (pt_ported_function(x, fd) && (signature_active(x, fd) || pt_suffixed(x, fd))) self = 1;
    int na = clang_Cursor_getNumArguments(c);
    for (int i = 0; i < na; i++) self |= pt_act(x, clang_Cursor_getArgument(c, (unsigned)i));
    /* An MPI call that changes or an external call on active data: expanded
     * so that it is ported, or reported, where it is written out. */
    if (!self && clang_getCursorKind(fd) == CXCursor_FunctionDecl) {
      char *name = pt_spelling(fd);
      if (!strncmp(name, "MPI_", 4))
        self = pt_mpi_changes(x, c, name);
      else if (!library_known(name))
        for (int i = 0; i < na && !self; i++) {
          CXType t = clang_getCursorType(pt_strip(clang_Cursor_getArgument(c, (unsigned)i)));
          self = pt_pointer_like(t) && pt_type_holds_active(x, t);
        }
      free(name);
    }
  } else if (k == CXCursor_UnexposedExpr || k == CXCursor_CStyleCastExpr) {
    CXCursor e = pt_last_expr(c);
    if (!clang_Cursor_isNull(e) && pt_act(x, e) && !pt_act(x, c)) self = 1;
    /* (real_t)d written in the macro's body: only expanded can it become (double)d. */
    unsigned cb, ce;
    if (passive_to_active_cast(x, c) && !cast_in_argument(x, c, 0, (unsigned)x->len, &cb, &ce)) self = 1;
  }
  if (self) return 1;
  CXCursor *kk;
  int n = pt_children(c, &kk);
  int r = 0;
  for (int i = 0; i < n && !r; i++) r = macro_needs(x, kk[i]);
  free(kk);
  return r;
}

/* c lies in a macro expansion: copy its text if nothing in it changes,
 * otherwise ask for the expansion to be expanded in place. */
static int ariadne_macro(pt_ctx *x, unsigned at) {
  for (int i = 0; i < x->nmacros && x->macros[i].b <= at; i++) {
    if (x->macros[i].e <= at) continue;
    CXString s = clang_getCursorSpelling(x->macros[i].cur);
    const char *n = clang_getCString(s);
    int ours = !strncmp(n, "ad_", 3) || !strncmp(n, "AD_", 3);
    clang_disposeString(s);
    if (ours) return 1;
  }
  return 0;
}

static int value_test(const char *name);

/* isnan(r), fpclassify(s->u), ...: a value test of an active lvalue is
 * written isnan(ad_value(r)) at the invocation, the macro kept; an argument
 * with active arithmetic has the macro expanded like any other. */
static char *value_test_macro(pt_ctx *x, CXCursor c) {
  if (clang_getCursorKind(c) != CXCursor_CallExpr) return NULL;
  char *fname = pt_spelling(callee_decl(c));
  int test = value_test(fname);
  free(fname);
  int na = clang_Cursor_getNumArguments(c);
  if (!test || na < 1) return NULL;
  CXCursor arg = clang_Cursor_getArgument(c, (unsigned)(na - 1));
  if (!pt_act(x, arg) || macro_needs(x, arg)) return NULL;
  unsigned b = pt_b(c), e = pt_e(c);
  for (int i = 0; i < x->nmacros; i++) {
    const pt_macro *m = &x->macros[i];
    if (m->b != b || m->e < e || m->e > x->len) continue;
    char *mname = pt_spelling(m->cur);
    int ok = value_test(mname);
    free(mname);
    const char *open = memchr(x->buf + m->b, '(', m->e - m->b);
    const char *close = x->buf + m->e - 1;
    if (!ok || !open || *close != ')' || e != m->e) return NULL;
    port_str o = {0};
    port_str_addn(&o, x->buf + m->b, (size_t)(open + 1 - (x->buf + m->b)));
    port_str_add(&o, "ad_value(");
    port_str_addn(&o, open + 1, (size_t)(close - open - 1));
    port_str_add(&o, "))");
    return port_str_take(&o);
  }
  return NULL;
}

typedef struct cast_edits {
  pt_ctx *x;
  unsigned lo, hi;
  unsigned at[2 * 32];
  int n;
} cast_edits;

static enum CXChildVisitResult find_casts(CXCursor c, CXCursor parent, CXClientData d) {
  (void)parent;
  cast_edits *ce = d;
  unsigned b, e;
  if (passive_to_active_cast(ce->x, c) && ce->n < 32 && cast_in_argument(ce->x, c, ce->lo, ce->hi, &b, &e)) {
    ce->at[2 * ce->n] = b;
    ce->at[2 * ce->n + 1] = e;
    ce->n++;
  }
  return CXChildVisit_Recurse;
}

/* The text of a macro invocation kept as written, each `(real_t)` cast of a
 * passive value in its arguments written `(double)` (FZ_SQ((real_t)d)). */
static char *passive_macro_text(pt_ctx *x, CXCursor c) {
  cast_edits ce = {x, pt_b(c), pt_e(c), {0}, 0};
  find_casts(c, clang_getNullCursor(), &ce);
  clang_visitChildren(c, find_casts, &ce);
  if (ce.n == 0) return pt_orig(x, c);
  /* Children are visited in order, but a cast nested in another's operand
   * comes after it: sort by start and skip overlaps. */
  for (int i = 0; i < ce.n; i++)
    for (int j = i + 1; j < ce.n; j++)
      if (ce.at[2 * j] < ce.at[2 * i]) {
        unsigned t0 = ce.at[2 * i], t1 = ce.at[2 * i + 1];
        ce.at[2 * i] = ce.at[2 * j];
        ce.at[2 * i + 1] = ce.at[2 * j + 1];
        ce.at[2 * j] = t0;
        ce.at[2 * j + 1] = t1;
      }
  port_str s = {0};
  unsigned at = ce.lo;
  for (int i = 0; i < ce.n; i++) {
    if (ce.at[2 * i] < at) continue;
    port_str_addn(&s, x->buf + at, ce.at[2 * i] - at);
    port_str_add(&s, "(double)");
    at = ce.at[2 * i + 1];
  }
  port_str_addn(&s, x->buf + at, ce.hi - at);
  return port_str_take(&s);
}

static int is_ident(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* Does an invocation written in [lo, hi) pass the active type as an argument
 * (`ALLOC(double, n)`, `ALLOC(DTYPE, n)` with double active)? Its body then
 * casts or sizes with double where the data is ad_real: the invocation is
 * expanded, and the types in it are ported like any others. */
static int type_argument(pt_ctx *x, unsigned lo, unsigned hi) {
  if (!x->double_active) return 0;
  for (int i = 0; i < x->nmacros; i++) {
    const pt_macro *m = &x->macros[i];
    if (m->b < lo || m->e > hi || m->e > x->len) continue;
    unsigned k = m->b;
    while (k < m->e && is_ident(x->buf[k])) k++;
    while (k < m->e && isspace((unsigned char)x->buf[k])) k++;
    if (k >= m->e || x->buf[k] != '(') continue;
    int depth = 0;
    unsigned ab = k + 1;
    for (unsigned j = k; j < m->e; j++) {
      char ch = x->buf[j];
      if (ch == '(' || ch == '[' || ch == '{') {
        depth++;
      } else if ((ch == ',' && depth == 1) || ((ch == ')' || ch == ']' || ch == '}') && --depth == 0)) {
        unsigned b = ab, e = j;
        while (b < e && isspace((unsigned char)x->buf[b])) b++;
        while (e > b && isspace((unsigned char)x->buf[e - 1])) e--;
        const char *kw = e - b == 6 && !strncmp(x->buf + b, "double", 6) ? "double" : pt_type_macro(x, x->buf, b, e);
        if (kw && !strcmp(kw, "double")) return 1;
        ab = j + 1;
        if (depth == 0) break;
      }
    }
  }
  return 0;
}

/* assert(E): only E's truth value is used, so E is computed on values:
 * each active variable, array element, member and call of a ported
 * function in it is read with ad_value, and library calls (sqrt, isfinite)
 * then take doubles. The invocation stays as written (assert stringizes E
 * and depends on NDEBUG, so it cannot be expanded). */
/* An insertion into the argument's text. */
typedef struct assert_ins {
  unsigned at;
  const char *text; /* "ad_value(", ")" or the suffix */
} assert_ins;

typedef struct assert_edits {
  pt_ctx *x;
  unsigned lo, hi; /* the argument's text */
  assert_ins ins[128];
  int n, bad;
} assert_edits;

static int spelled_in(assert_edits *a, CXCursor c, unsigned *b, unsigned *e) {
  CXSourceRange r = clang_getCursorExtent(c);
  CXFile f1 = NULL, f2 = NULL;
  clang_getSpellingLocation(clang_getRangeStart(r), &f1, NULL, NULL, b);
  clang_getSpellingLocation(clang_getRangeEnd(r), &f2, NULL, NULL, e);
  return f1 && f2 && clang_File_isEqual(f1, a->x->file) && clang_File_isEqual(f2, a->x->file) && *b >= a->lo &&
         *e <= a->hi && *b < *e;
}

/* Wraps do not nest and insertions never meet, so each place has at most
 * one; the same one again is E's second expansion. */
static void assert_insert(assert_edits *a, unsigned at, const char *text) {
  for (int i = 0; i < a->n; i++)
    if (a->ins[i].at == at) return;
  if (a->n == 128) {
    a->bad = 1;
    return;
  }
  a->ins[a->n++] = (assert_ins){at, text};
}

static int assert_ins_cmp(const void *p, const void *q) {
  const assert_ins *a = p, *b = q;
  return (a->at > b->at) - (a->at < b->at);
}

static enum CXChildVisitResult assert_visit(CXCursor c, CXCursor parent, CXClientData d) {
  (void)parent;
  assert_edits *a = d;
  pt_ctx *x = a->x;
  unsigned b, e;
  if (!spelled_in(a, c, &b, &e)) return CXChildVisit_Recurse;
  enum CXCursorKind k = clang_getCursorKind(c);
  int call = k == CXCursor_CallExpr;
  CXCursor fd = call ? callee_decl(c) : clang_getNullCursor();
  if (call && pt_suffixed(x, fd)) {
    /* after the callee's name, the call's first token */
    unsigned ne;
    clang_getSpellingLocation(clang_getCursorLocation(c), NULL, NULL, NULL, &ne);
    while (ne < a->hi && is_ident(x->buf[ne])) ne++;
    assert_insert(a, ne, x->o->suffix);
  }
  if (!pt_act(x, c) ||
      !(k == CXCursor_DeclRefExpr || k == CXCursor_ArraySubscriptExpr || k == CXCursor_MemberRefExpr ||
        (call && pt_ported_function(x, fd))))
    return CXChildVisit_Recurse;
  if (call) /* an argument with active arithmetic would need the port's own operations */
    for (int i = 0; i < clang_Cursor_getNumArguments(c); i++) {
      CXCursor g = pt_strip(clang_Cursor_getArgument(c, (unsigned)i));
      enum CXCursorKind gk = clang_getCursorKind(g);
      if (pt_act(x, g) && gk != CXCursor_DeclRefExpr && gk != CXCursor_ArraySubscriptExpr &&
          gk != CXCursor_MemberRefExpr)
        a->bad = 1;
    }
  assert_insert(a, b, "ad_value(");
  assert_insert(a, e, ")");
  return CXChildVisit_Continue;
}

static char *assert_macro(pt_ctx *x, CXCursor c) {
  unsigned b = pt_b(c), e = pt_e(c);
  for (int i = 0; i < x->nmacros; i++) {
    const pt_macro *m = &x->macros[i];
    if (m->b != b || m->e != e || m->e > x->len) continue;
    char *name = pt_spelling(m->cur);
    int ok = !strcmp(name, "assert");
    free(name);
    const char *open = memchr(x->buf + m->b, '(', m->e - m->b);
    if (!ok || !open || x->buf[m->e - 1] != ')') return NULL;
    assert_edits a = {.x = x, .lo = (unsigned)(open + 1 - x->buf), .hi = m->e - 1};
    clang_visitChildren(c, assert_visit, &a);
    if (a.bad || a.n == 0) return NULL;
    qsort(a.ins, (size_t)a.n, sizeof *a.ins, assert_ins_cmp);
    port_str o = {0};
    unsigned at = m->b;
    for (int k = 0; k < a.n; k++) {
      port_str_addn(&o, x->buf + at, a.ins[k].at - at);
      port_str_add(&o, a.ins[k].text);
      at = a.ins[k].at;
    }
    port_str_addn(&o, x->buf + at, m->e - at);
    return port_str_take(&o);
  }
  return NULL;
}

static char *emit_macro(pt_ctx *x, CXCursor c) {
  char *vt = value_test_macro(x, c);
  if (vt) return vt;
  char *am = assert_macro(x, c);
  if (am) return am;
  if (!ariadne_macro(x, pt_off(clang_getCursorLocation(c))) &&
      (macro_needs(x, c) || type_argument(x, pt_b(c), pt_e(c)))) {
    unsigned at = pt_off(clang_getCursorLocation(c));
    int found = 0;
    for (int i = 0; i < x->nmacros; i++)
      if (x->macros[i].b <= at && at < x->macros[i].e) {
        /* the outermost expansion that holds it */
        int j = i;
        for (int m = 0; m < x->nmacros; m++)
          if (x->macros[m].b <= x->macros[j].b && x->macros[m].e >= x->macros[j].e &&
              (x->macros[m].e - x->macros[m].b) > (x->macros[j].e - x->macros[j].b))
            j = m;
        int dup = 0;
        for (int m = 0; m < x->nexpand; m++) dup |= x->expand[m] == j;
        if (!dup && x->nexpand < PT_MAX_EXPAND) x->expand[x->nexpand++] = j;
        found = 1;
        break;
      }
    if (!found)
      pt_error(x, c, "active arithmetic in a macro expansion that cannot be located; expand the macro by hand");
    return pt_orig(x, c);
  }
  return passive_macro_text(x, c);
}

/* ------------------------------------------------------------------------ */
/* Emission                                                                  */
/* ------------------------------------------------------------------------ */


/* Is the `double` at [b, e) part of a complex type (`double _Complex`,
 * `_Complex double`, `complex double`)? Complex data stays passive. */
int pt_near_complex(const char *p, size_t b, size_t e, size_t len) {
  size_t i = b;
  while (i > 0 && (p[i - 1] == ' ' || p[i - 1] == '\t')) i--;
  size_t k = i;
  while (k > 0 && is_ident(p[k - 1])) k--;
  if ((i - k == 8 && !strncmp(p + k, "_Complex", 8)) || (i - k == 7 && !strncmp(p + k, "complex", 7))) return 1;
  size_t j = e;
  while (j < len && (p[j] == ' ' || p[j] == '\t')) j++;
  return (j + 8 <= len && !strncmp(p + j, "_Complex", 8) && !is_ident(p[j + 8])) ||
         (j + 7 <= len && !strncmp(p + j, "complex", 7) && !is_ident(p[j + 7]));
}

typedef struct {
  const char *name;
  CXCursor def;
} macro_find;

static enum CXChildVisitResult find_macro_def(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  macro_find *f = data;
  if (clang_getCursorKind(c) != CXCursor_MacroDefinition || clang_Cursor_isMacroFunctionLike(c))
    return CXChildVisit_Continue;
  CXString s = clang_getCursorSpelling(c);
  if (!strcmp(clang_getCString(s), f->name)) f->def = c;
  clang_disposeString(s);
  return CXChildVisit_Continue;
}

CXCursor pt_macro_named(pt_ctx *x, const char *name) {
  macro_find f = {name, clang_getNullCursor()};
  clang_visitChildren(clang_getTranslationUnitCursor(x->tu), find_macro_def, &f);
  return f.def;
}

char *pt_macro_alias(pt_ctx *x, CXCursor def, int keywords) {
  if (clang_Cursor_isNull(def) || clang_Cursor_isMacroFunctionLike(def)) return NULL;
  CXToken *t = NULL;
  unsigned nt = 0;
  clang_tokenize(x->tu, clang_getCursorExtent(def), &t, &nt);
  char *body = NULL;
  if (nt == 2 &&
      (clang_getTokenKind(t[1]) == CXToken_Identifier || (keywords && clang_getTokenKind(t[1]) == CXToken_Keyword))) {
    CXString sp = clang_getTokenSpelling(x->tu, t[1]);
    body = port_strdup(clang_getCString(sp));
    clang_disposeString(sp);
  }
  clang_disposeTokens(x->tu, t, nt);
  return body;
}

/* The keyword ("double", "float") an object-like macro's definition stands
 * for, following a body that is the name of another such macro
 * (`#define REAL DTYPE`), to a bounded depth; NULL if none. */
static const char *macro_keyword(pt_ctx *x, CXCursor def, int depth) {
  if (depth > 8) return NULL;
  char *body = pt_macro_alias(x, def, 1);
  if (!body) return NULL;
  const char *kw = !strcmp(body, "double")  ? "double"
                   : !strcmp(body, "float") ? "float"
                                            : macro_keyword(x, pt_macro_named(x, body), depth + 1);
  free(body);
  return kw;
}

/* Which floating keyword the identifier p[i, j) stands for when it is an
 * object-like macro that expands to exactly that keyword (`#define DTYPE
 * double`): "double", "float", or NULL. Such a macro is the type it names,
 * so a declaration spelled with it is retyped like one spelled `double`; the
 * definition itself stays, for whatever keeps the type passive. Only an
 * expansion in the file's own text counts (p must point into x->buf). */
const char *pt_type_macro(pt_ctx *x, const char *p, size_t i, size_t j) {
  if (!x->buf || p + i < x->buf || p + j > x->buf + x->len) return NULL;
  unsigned b = (unsigned)(p + i - x->buf), e = (unsigned)(p + j - x->buf);
  int lo = 0, hi = x->nmacros - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (x->macros[mid].b < b)
      lo = mid + 1;
    else
      hi = mid - 1;
  }
  if (lo >= x->nmacros || x->macros[lo].b != b || x->macros[lo].e != e) return NULL;
  return macro_keyword(x, clang_getCursorReferenced(x->macros[lo].cur), 0);
}

/* Copy text, replacing the keyword `double` by ad_real when double is active. */
static void add_types(pt_ctx *x, port_str *s, const char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    char ch = p[i];
    if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      while (j < n && p[j] != ch) j += p[j] == '\\' ? 2 : 1;
      j = j < n ? j + 1 : n;
      port_str_addn(s, p + i, j - i);
      i = j;
    } else if (ch == '/' && i + 1 < n && (p[i + 1] == '*' || p[i + 1] == '/')) {
      size_t j = i + 2;
      if (p[i + 1] == '*') {
        while (j + 1 < n && !(p[j] == '*' && p[j + 1] == '/')) j++;
        j = j + 2 <= n ? j + 2 : n;
      } else {
        while (j < n && p[j] != '\n') j++;
      }
      port_str_addn(s, p + i, j - i);
      i = j;
    } else if (is_ident(ch)) {
      size_t j = i;
      while (j < n && is_ident(p[j])) j++;
      const char *kw = j - i == 6 && !strncmp(p + i, "double", 6) ? "double" : NULL;
      if (!kw && (i == 0 || !is_ident(p[i - 1]))) kw = pt_type_macro(x, p, i, j);
      if (x->double_active && kw && !strcmp(kw, "double") && (i == 0 || !is_ident(p[i - 1])) &&
          !pt_near_complex(p, i, j, n))
        port_str_add(s, "ad_real");
      else
        port_str_addn(s, p + i, j - i);
      i = j;
    } else {
      port_str_addn(s, p + i, 1);
      i++;
    }
  }
}

char *pt_retype_text(pt_ctx *x, const char *p, size_t n) {
  port_str s = {0};
  add_types(x, &s, p, n);
  return port_str_take(&s);
}

/* The text of c with each child replaced by texts[i] (NULL: the child's own
 * emission) and, if `types`, active type keywords replaced in between. */
char *pt_splice(pt_ctx *x, CXCursor c, int n, const CXCursor *k, char **texts, int types) {
  unsigned b = pt_b(c), e = pt_e(c);
  port_str s = {0};
  unsigned at = b;
  for (int i = 0; i < n; i++) {
    unsigned kb = pt_b(k[i]), ke = pt_e(k[i]);
    char *t = texts && texts[i] ? texts[i] : NULL;
    if (kb < at || ke > e || ke < kb) continue; /* overlapping (macro) children keep the text */
    if (!t) {
      if (!is_expr_kind(clang_getCursorKind(k[i]))) continue;
      t = pt_emit(x, k[i], 0);
      if (types)
        add_types(x, &s, x->buf + at, kb - at);
      else
        port_str_addn(&s, x->buf + at, kb - at);
      port_str_add(&s, t);
      free(t);
    } else {
      if (types)
        add_types(x, &s, x->buf + at, kb - at);
      else
        port_str_addn(&s, x->buf + at, kb - at);
      port_str_add(&s, t);
    }
    at = ke;
  }
  if (types)
    add_types(x, &s, x->buf + at, e - at);
  else
    port_str_addn(&s, x->buf + at, e - at);
  return port_str_take(&s);
}

static char *splice_kids(pt_ctx *x, CXCursor c, int types) {
  CXCursor *k;
  int n = pt_children(c, &k);
  char *r = pt_splice(x, c, n, k, NULL, types);
  free(k);
  return r;
}

char *pt_emit_to(pt_ctx *x, CXCursor c, int want_active) {
  char *t = pt_emit(x, c, 0);
  int a = pt_act(x, c);
  if (want_active && !a) {
    char *r = pt_cat(x->static_init ? "AD_REAL_INIT(" : "ad_const(", t, ")");
    free(t);
    return r;
  }
  if (!want_active && a) {
    char *r = pt_cat("ad_value(", t, ")");
    free(t);
    return r;
  }
  return t;
}

/* Has the expression side effects (so that it must not be evaluated twice)? */
static int side_effects(pt_ctx *x, CXCursor c) { return pt_side_effects(x, c); }

static const char *arith_name(const char *op) {
  if (!strcmp(op, "+") || !strcmp(op, "+=")) return "ad_add";
  if (!strcmp(op, "-") || !strcmp(op, "-=")) return "ad_sub";
  if (!strcmp(op, "*") || !strcmp(op, "*=")) return "ad_mul";
  if (!strcmp(op, "/") || !strcmp(op, "/=")) return "ad_div";
  return NULL;
}

static const char *cmp_name(const char *op) {
  if (!strcmp(op, "<")) return "ad_lt";
  if (!strcmp(op, "<=")) return "ad_le";
  if (!strcmp(op, ">")) return "ad_gt";
  if (!strcmp(op, ">=")) return "ad_ge";
  if (!strcmp(op, "==")) return "ad_eq";
  if (!strcmp(op, "!=")) return "ad_ne";
  return NULL;
}

static char *call2(const char *fn, char *a, char *b) {
  port_str s = {0};
  port_str_addf(&s, "%s(%s, %s)", fn, a, b);
  free(a);
  free(b);
  return port_str_take(&s);
}

static char *emit_binary(pt_ctx *x, CXCursor c, int stmt) {
  (void)stmt;
  CXCursor *k;
  int n = pt_children(c, &k);
  if (n != 2) {
    free(k);
    return splice_kids(x, c, 0);
  }
  const char *op = binop_of(x, k[0]);
  int al = pt_act(x, k[0]), ar = pt_act(x, k[1]);
  char *r = NULL;
  const char *fn;
  if (!strcmp(op, "=")) pt_passive_store_lvalue(x, c, k[0], k[1]);
  if ((fn = arith_name(op)) && strlen(op) == 1 && pt_act(x, c)) {
    r = call2(fn, pt_emit(x, k[0], 0), pt_emit(x, k[1], 0));
  } else if ((fn = cmp_name(op)) && (al || ar)) {
    r = call2(fn, pt_emit(x, k[0], 0), pt_emit(x, k[1], 0));
  } else if (!strcmp(op, "&&") || !strcmp(op, "||")) {
    char *t[2] = {pt_emit_to(x, k[0], 0), pt_emit_to(x, k[1], 0)};
    r = pt_splice(x, c, 2, k, t, 0);
    free(t[0]);
    free(t[1]);
  } else if (!strcmp(op, "=") && (al || ar) && pt_is_float(clang_getCursorType(k[0]))) {
    char *t[2] = {pt_emit(x, k[0], 0), pt_emit_to(x, k[1], al)};
    if (!al && pt_type_active_float_loss(x, clang_getCursorType(k[0])))
      pt_error(x, c, "assigning an active value to a float drops its derivative; make the variable double");
    r = pt_splice(x, c, 2, k, t, 0);
    free(t[0]);
    free(t[1]);
  } else {
    r = pt_splice(x, c, 2, k, NULL, 0);
  }
  free(k);
  return r;
}

int pt_type_active_float_loss(pt_ctx *x, CXType t) {
  (void)x;
  return clang_getCanonicalType(t).kind == CXType_Float;
}

static char *emit_compound(pt_ctx *x, CXCursor c, int stmt) {
  CXCursor *k;
  int n = pt_children(c, &k);
  if (n != 2) {
    free(k);
    return splice_kids(x, c, 0);
  }
  const char *op = binop_of(x, k[0]);
  char *r;
  pt_passive_store_lvalue(x, c, k[0], k[1]);
  if (pt_act(x, k[0]) && arith_name(op)) {
    if (side_effects(x, k[0]))
      pt_error(x, c,
               "compound assignment to an active lvalue with side effects; compute the address or index in a "
               "statement of its own first");
    char *l = pt_emit(x, k[0], 0);
    char *rhs = pt_emit(x, k[1], 0);
    port_str s = {0};
    port_str_addf(&s, stmt ? "%s = %s(%s, %s)" : "(%s = %s(%s, %s))", l, arith_name(op), l, rhs);
    free(l);
    free(rhs);
    r = port_str_take(&s);
  } else if (pt_act(x, k[1])) {
    if (pt_type_active_float_loss(x, clang_getCursorType(k[0])))
      pt_error(x, c, "compound assignment of an active value to a float drops its derivative; make it double");
    char *t[2] = {NULL, pt_emit_to(x, k[1], 0)};
    r = pt_splice(x, c, 2, k, t, 0);
    free(t[1]);
  } else {
    r = pt_splice(x, c, 2, k, NULL, 0);
  }
  free(k);
  return r;
}

static char *emit_unary(pt_ctx *x, CXCursor c, int stmt) {
  CXCursor e = pt_last_expr(c);
  if (clang_Cursor_isNull(e)) return splice_kids(x, c, 1);
  const char *op = pt_unop(x, c, e);
  int a = pt_act(x, e) && !pt_pointer_like(clang_getCursorType(e));
  if (a && !strcmp(op, "-")) {
    char *t = pt_emit(x, e, 0);
    char *r = pt_cat("ad_neg(", t, ")");
    free(t);
    return r;
  }
  if (a && !strcmp(op, "+")) return pt_emit(x, e, 0);
  if (a && !strcmp(op, "!")) {
    char *t[1] = {pt_emit_to(x, e, 0)};
    char *r = pt_splice(x, c, 1, &e, t, 0);
    free(t[0]);
    return r;
  }
  if (a && (strstr(op, "++") || strstr(op, "--"))) {
    int post = op[0] == 'p';
    if (side_effects(x, e))
      pt_error(x, c, "%s on an active lvalue with side effects; compute the address or index first", op + post);
    if (post && !stmt)
      pt_error(x, c, "the value of %s on an active variable is used; write the increment as a statement of its own",
               op + post);
    char *l = pt_emit(x, e, 0);
    port_str s = {0};
    port_str_addf(&s, stmt ? "%s = %s(%s, 1)" : "(%s = %s(%s, 1))", l, strstr(op, "++") ? "ad_add" : "ad_sub", l);
    free(l);
    return port_str_take(&s);
  }
  /* sizeof, alignof, *, & and friends: types inside get the active name. */
  return splice_kids(x, c, 1);
}

static char *emit_conditional(pt_ctx *x, CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  if (n != 3) {
    free(k);
    return splice_kids(x, c, 0);
  }
  int a = pt_act(x, c);
  char *t[3] = {pt_emit_to(x, k[0], 0), a ? pt_emit_to(x, k[1], 1) : NULL, a ? pt_emit_to(x, k[2], 1) : NULL};
  char *r = pt_splice(x, c, 3, k, t, 0);
  for (int i = 0; i < 3; i++) free(t[i]);
  free(k);
  return r;
}

static char *emit_implicit(pt_ctx *x, CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  if (n == 1 && is_expr_kind(clang_getCursorKind(k[0])) && pt_act(x, k[0]) && !pt_act(x, c)) {
    CXType t = clang_getCursorType(c);
    if (pt_type_active_float_loss(x, t))
      pt_error(x, c, "conversion of an active value to float drops its derivative; use double");
    char *r = pt_splice(x, c, 0, k, NULL, 0);
    char *inner = pt_emit(x, k[0], 0);
    free(r);
    r = pt_cat("ad_value(", inner, ")");
    free(inner);
    free(k);
    return r;
  }
  char *r = pt_splice(x, c, n, k, NULL, 0);
  free(k);
  return r;
}

static char *emit_cast(pt_ctx *x, CXCursor c) {
  CXCursor e = pt_last_expr(c);
  if (clang_Cursor_isNull(e)) return splice_kids(x, c, 1);
  CXType t = clang_getCursorType(c);
  int a = pt_act(x, e);
  if (pt_is_float(t) && pt_type_active(x, t)) {
    if (a) {
      char *inner = pt_emit(x, e, 0);
      char *r = pt_cat("(", inner, ")");
      free(inner);
      return r;
    }
    /* A passive value cast to the active type stays a double (ad_const
     * where an active value is needed): the cast is written (double), since
     * a cast of an integer to a typedef of ad_real would not compile. */
    CXString ts = clang_getTypeSpelling(t);
    int is_double = !strcmp(clang_getCString(ts), "double");
    clang_disposeString(ts);
    if (is_double) return splice_kids(x, c, 0);
    char *inner = pt_emit(x, e, 0);
    char *r = pt_cat("(double)", inner, NULL);
    free(inner);
    return r;
  }
  if (a) {
    if (pt_type_active_float_loss(x, t))
      pt_error(x, c, "casting an active value to float drops its derivative; use double");
    char *tt[1] = {pt_emit_to(x, e, 0)};
    CXCursor *k;
    int n = pt_children(c, &k);
    char **texts = calloc((size_t)n, sizeof *texts);
    for (int i = 0; i < n; i++)
      if (clang_equalCursors(k[i], e)) texts[i] = tt[0];
    char *r = pt_splice(x, c, n, k, texts, 0);
    free(texts);
    free(k);
    free(tt[0]);
    return r;
  }
  /* Pointer casts: punning between active data and other data is reported. */
  CXType from = clang_getCursorType(pt_strip(e));
  if (clang_getCanonicalType(t).kind == CXType_Pointer && pt_pointer_like(from)) {
    CXType tp = clang_getCanonicalType(clang_getPointeeType(clang_getCanonicalType(t)));
    CXType fc = clang_getCanonicalType(from);
    CXType fp = fc.kind == CXType_Pointer ? clang_getPointeeType(fc) : clang_getArrayElementType(fc);
    fp = clang_getCanonicalType(fp);
    int ta = pt_type_holds_active(x, clang_getPointeeType(t)) || pt_type_holds_active(x, tp);
    int fa = pt_type_holds_active(x, from);
    if (ta != fa && tp.kind != CXType_Void && fp.kind != CXType_Void)
      pt_error(x, c,
               "pointer cast between active data and another type (type punning); an ad_real is not a "
               "double in memory: copy the values with ad_value/ad_const instead");
  }
  return splice_kids(x, c, 1);
}

/* Initializer lists: each element converted to its target type. */
typedef struct fieldlist {
  CXType t[256];
  int n;
} fieldlist;
static enum CXVisitorResult collect_field(CXCursor c, CXClientData d) {
  fieldlist *f = d;
  if (f->n < 256) f->t[f->n++] = clang_getCursorType(c);
  return CXVisit_Continue;
}

static char *emit_initlist(pt_ctx *x, CXCursor c) {
  CXType t = strip_sugar(clang_getCursorType(c));
  CXCursor *k;
  int n = pt_children(c, &k);
  char **texts = calloc((size_t)n + 1, sizeof *texts);
  fieldlist fl;
  fl.n = 0;
  int is_array = t.kind == CXType_ConstantArray || t.kind == CXType_IncompleteArray;
  if (strip_sugar(t).kind == CXType_Record) clang_Type_visitFields(t, collect_field, &fl);
  for (int i = 0; i < n; i++) {
    if (!is_expr_kind(clang_getCursorKind(k[i]))) continue;
    if (clang_getCursorKind(k[i]) == CXCursor_InitListExpr) continue; /* emitted by splice */
    CXType target = is_array ? clang_getArrayElementType(t) : (i < fl.n ? fl.t[i] : clang_getCursorType(k[i]));
    const char *p = x->buf + pt_b(k[i]);
    if (!pt_in_macro(x, k[i]) && (*p == '.' || *p == '[')) target = clang_getCursorType(k[i]); /* designated */
    if (pt_type_active(x, target) && pt_is_float(clang_getCursorType(k[i])))
      texts[i] = pt_emit_to(x, k[i], 1);
    else if (pt_act(x, k[i]) && !pt_type_holds_active(x, target) && !pt_pointer_like(target)) {
      pt_passive_store(x, k[i], target, k[i], "a passive field or element");
      texts[i] = pt_emit_to(x, k[i], 0);
    }
  }
  char *r = pt_splice(x, c, n, k, texts, 0);
  for (int i = 0; i < n; i++) free(texts[i]);
  free(texts);
  free(k);
  return r;
}

/* printf-like functions of the C library: variadic arguments are passed as values. */
static int print_fixed(const char *name) {
  if (!strcmp(name, "printf")) return 1;
  if (!strcmp(name, "fprintf") || !strcmp(name, "sprintf")) return 2;
  if (!strcmp(name, "snprintf")) return 3;
  return -1;
}

/* Functions of the C library that take active data as plain memory. */
/* The project header that defines the function fd, when it is a static
 * function of a header that was not given as an input (no library, but the
 * port would leave it double); NULL otherwise. The caller frees it. */
static char *header_home(CXCursor fd) {
  CXCursor def = clang_getCursorDefinition(fd);
  if (clang_Cursor_isNull(def) || clang_Location_isInSystemHeader(clang_getCursorLocation(def))) return NULL;
  CXFile f;
  clang_getExpansionLocation(clang_getCursorLocation(def), &f, NULL, NULL, NULL);
  CXString fn = clang_getFileName(f);
  char *home = clang_getCString(fn) ? port_strdup(clang_getCString(fn)) : NULL;
  clang_disposeString(fn);
  return home;
}

/* The file that declares d when it is a project file the port does not
 * write (not in this unit, not an input, not a system header), else NULL:
 * a declaration there keeps its double types. malloc'd. */
char *pt_foreign_file(pt_ctx *x, CXCursor d) {
  CXSourceLocation loc = clang_getCursorLocation(d);
  if (clang_Cursor_isNull(d) || pt_own_location(x, loc) || clang_Location_isInSystemHeader(loc)) return NULL;
  CXFile f = NULL;
  clang_getExpansionLocation(loc, &f, NULL, NULL, NULL);
  if (!f) return NULL;
  CXString fn = clang_getFileName(f);
  const char *path = clang_getCString(fn);
  char real[4096];
  int input = 0;
  if (path && realpath(path, real))
    for (int j = 0; j < x->o->ninputs && !input; j++) input = !strcmp(x->o->inputs[j], real);
  char *r = !input && path ? port_strdup(path) : NULL;
  clang_disposeString(fn);
  return r;
}

/* A ported function (an input defines it) whose first declaration is in a
 * header the port does not write: that declaration stays double and
 * conflicts with the ported definition and calls. Reported at `at`. */
void pt_check_foreign_decl(pt_ctx *x, CXCursor fd, CXCursor at) {
  if (clang_getCursorKind(fd) != CXCursor_FunctionDecl || !pt_ported_function(x, fd) || !signature_active(x, fd))
    return;
  /* A project ported in several runs (--ported) may port its headers in
   * another run: then the header is not this run's to judge. */
  if (x->o->nported_given > 0) return;
  /* With --suffix the port's names differ from the header's, which keeps
   * declaring the primal. */
  if (x->o->suffix && x->o->suffix[0]) return;
  char *name = pt_spelling(fd);
  char *h = pt_foreign_file(x, clang_getCanonicalCursor(fd));
  if (!h) {
    free(name);
    return;
  }
  pt_error(x, at,
           "'%s' is ported (an input defines it), but it is declared in %s, which is not an input, so that "
           "declaration would stay double and conflict with the port; give %s as an input too",
           name, h, h);
  free(name);
  free(h);
}

static int library_known(const char *name) {
  return !strcmp(name, "memcpy") || !strcmp(name, "memmove") || !strcmp(name, "memset") || !strcmp(name, "free") ||
         !strcmp(name, "realloc") || !strcmp(name, "qsort") || print_fixed(name) >= 0;
}

/* Classification macros of <math.h> and the builtins they expand to: they
 * test a value (NaN, infinite, sign), so an active argument passes its value. */
static int value_test(const char *name) {
  static const char *const tests[] = {"isnan",    "isinf",   "isinf_sign", "isfinite", "finite",
                                      "isnormal", "signbit", "fpclassify", NULL};
  if (!strncmp(name, "__builtin_", 10))
    name += 10;
  else if (!strncmp(name, "__", 2))
    name += 2;
  for (int i = 0; tests[i]; i++)
    if (!strcmp(tests[i], name)) return 1;
  return 0;
}

static char *emit_call(pt_ctx *x, CXCursor c) {
  CXCursor fd = callee_decl(c);
  char *name = clang_getCursorKind(fd) == CXCursor_FunctionDecl ? pt_spelling(fd) : port_strdup("");
  int na = clang_Cursor_getNumArguments(c);
  CXCursor *k;
  int n = pt_children(c, &k);
  char **texts = calloc((size_t)n + 1, sizeof *texts);
  char *r = NULL;
  /* texts[] is indexed like k[]; find each argument among the children. */
  int *argk = calloc((size_t)na + 1, sizeof *argk);
  for (int i = 0; i < na; i++) {
    CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
    argk[i] = -1;
    for (int j = 0; j < n; j++)
      if (pt_same_expr(a, k[j])) argk[i] = j;
  }
  int ported = pt_ported_function(x, fd);
  pt_check_foreign_decl(x, fd, c);
  int any_act = 0;
  for (int i = 0; i < na; i++) any_act |= pt_act(x, clang_Cursor_getArgument(c, (unsigned)i));

  if (!strncmp(name, "ad_", 3)) {
    /* Ariadne's own functions (ad_custom, the fused port's ad__f_* helpers):
     * the file is Ariadne code already, and the call stays as written. */
    r = pt_splice(x, c, n, k, texts, 0);
  } else if (value_test(name) && !ported) {
    for (int i = 0; i < na; i++)
      if (argk[i] >= 0) texts[argk[i]] = pt_emit_to(x, clang_Cursor_getArgument(c, (unsigned)i), 0);
    r = pt_splice(x, c, n, k, texts, 0);
  } else if (!strncmp(name, "MPI_", 4) && !ported) {
    pt_check_byte_mpi(x, c, name, na);
    r = pt_emit_mpi(x, c, name, n, k, na, argk);
  } else if (clang_getCursorKind(fd) == CXCursor_FunctionDecl && !ported && pt_math_twin(name) && any_act) {
    port_str s = {0};
    port_str_addf(&s, "ad_%s(", name);
    for (int i = 0; i < na; i++) {
      char *t = pt_emit(x, clang_Cursor_getArgument(c, (unsigned)i), 0);
      port_str_addf(&s, "%s%s", i ? ", " : "", t);
      free(t);
    }
    port_str_add(&s, ")");
    r = port_str_take(&s);
  } else if (clang_getCursorKind(fd) == CXCursor_FunctionDecl && !ported) {
    int fixed = print_fixed(name);
    CXType ft = clang_getCursorType(fd);
    int np = clang_getNumArgTypes(ft);
    if (is_math_name(name) && any_act)
      pt_error(x, c,
               "Ariadne has no derivative of the math function '%s'; write it with the functions Ariadne has "
               "or as an ad_custom statement with its partial derivatives",
               name);
    char *home = header_home(fd);
    int scanf_like = !strcmp(name, "scanf") || !strcmp(name, "fscanf") || !strcmp(name, "sscanf");
    int memfn = !strcmp(name, "memcpy") || !strcmp(name, "memmove");
    int known = library_known(name);
    if (memfn && na >= 2) pt_check_byte_copy(x, c, name);
    for (int i = 0; i < na; i++) {
      CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
      int variadic_pos = i >= np;
      if (fixed >= 0 && i >= fixed) {
        if (argk[i] >= 0) texts[argk[i]] = pt_emit_to(x, a, 0);
        continue;
      }
      if (is_math_name(name)) continue; /* reported above */
      int value = pt_act(x, a) && (variadic_pos || pt_is_float(clang_getArgType(ft, (unsigned)i)));
      int data = !value && !known && pt_pointer_like(clang_getCursorType(pt_strip(a))) &&
                 pt_type_holds_active(x, clang_getCursorType(pt_strip(a)));
      if ((value || data) && home)
        pt_error(x, a,
                 "active %s passed to '%s', which is defined in %s, a header that is not an input, so it "
                 "stays double; give %s as an input too (headers are ported in their includer's context)",
                 value ? "value" : "data", name, home, home);
      else if (value)
        pt_error(x, a,
                 "active value passed to the external function '%s', which no input defines, so its derivative "
                 "would be lost; port the file that defines '%s' with this one (or name it with --ported if "
                 "another run ports it), or record the call with ad_external",
                 name, name);
      else if (data && scanf_like)
        pt_error(x, a,
                 "active data passed to '%s', which stores doubles; read into a double and store it with "
                 "ad_const",
                 name);
      else if (data)
        pt_error(x, a,
                 "active data passed to the external function '%s' (a library such as BLAS or FFTW cannot "
                 "differentiate it); record the call with ad_external and its adjoint",
                 name);
    }
    free(home);
    r = pt_splice(x, c, n, k, texts, 0);
  } else if (!ported && !pt_pointer_of_file(x, k[0])) {
    r = pt_splice(x, c, n, k, texts, 0); /* a _Generic selection or the like: left alone */
  } else {
    /* A function of this file, or a call through a function pointer. */
    CXType ft = ported ? clang_getCursorType(fd) : pt_fn_type(clang_getCursorType(k[0]));
    int np = clang_getNumArgTypes(ft);
    if (np < 0) np = 0;
    for (int i = 0; i < na; i++) {
      CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
      if (argk[i] < 0) continue;
      if (i >= np) {
        if (pt_act(x, a) || pt_type_holds_active(x, clang_getCursorType(pt_strip(a))))
          pt_error(x, a, "active value passed to the variadic function '%s'; give it a fixed parameter list",
                   name[0] ? name : "(pointer)");
        continue;
      }
      CXType pt = clang_getArgType(ft, (unsigned)i);
      if (ported) pt_check_byte_helper(x, fd, name, a, (unsigned)i);
      if (pt_type_active(x, pt))
        texts[argk[i]] = pt_emit_to(x, a, 1);
      else if (pt_act(x, a) && !pt_pointer_like(pt)) {
        char *pn = ported ? pt_spelling(clang_Cursor_getArgument(fd, (unsigned)i)) : port_strdup("");
        port_str w = {0};
        if (pn[0])
          port_str_addf(&w, "the parameter '%s' of '%s'", pn, name[0] ? name : "(pointer)");
        else
          port_str_addf(&w, "parameter %d of '%s'", i + 1, name[0] ? name : "(pointer)");
        char *what = port_str_take(&w);
        pt_passive_store(x, a, pt, a, what);
        free(what);
        free(pn);
        texts[argk[i]] = pt_emit_to(x, a, 0);
      }
    }
    r = pt_splice(x, c, n, k, texts, 0);
  }
  for (int i = 0; i < n; i++) free(texts[i]);
  free(texts);
  free(argk);
  free(k);
  free(name);
  return r;
}

static char *emit_declref(pt_ctx *x, CXCursor c) {
  CXCursor d = clang_getCursorReferenced(c);
  if (pt_suffixed(x, d)) {
    char *s = pt_orig(x, c);
    char *r = pt_cat(s, x->o->suffix, NULL);
    free(s);
    return r;
  }
  return pt_orig(x, c);
}

/* stmt: the expression is a whole statement (its value is unused). */
char *pt_emit(pt_ctx *x, CXCursor c, int stmt) {
  if (pt_in_macro(x, c)) return emit_macro(x, c);
  switch (clang_getCursorKind(c)) {
  case CXCursor_BinaryOperator:
    return emit_binary(x, c, stmt);
  case CXCursor_CompoundAssignOperator:
    return emit_compound(x, c, stmt);
  case CXCursor_UnaryOperator:
    return emit_unary(x, c, stmt);
  case CXCursor_ConditionalOperator:
    return emit_conditional(x, c);
  case CXCursor_UnexposedExpr:
    return emit_implicit(x, c);
  case CXCursor_CStyleCastExpr:
    return emit_cast(x, c);
  case CXCursor_CallExpr:
    return emit_call(x, c);
  case CXCursor_InitListExpr:
    return emit_initlist(x, c);
  case CXCursor_DeclRefExpr:
    return emit_declref(x, c);
  case CXCursor_UnaryExpr:
  case CXCursor_CompoundLiteralExpr:
    return splice_kids(x, c, 1);
  case CXCursor_IntegerLiteral:
  case CXCursor_FloatingLiteral:
  case CXCursor_StringLiteral:
  case CXCursor_CharacterLiteral:
    return pt_orig(x, c);
  default:
    return splice_kids(x, c, 0);
  }
}
