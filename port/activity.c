/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Activity of local doubles: a pre-pass over each function body that finds
 * the local scalar doubles no derivative can reach (timers, constants,
 * counters of time), so that they stay double in the port. Such a variable
 * costs no tape operand, and a passive macro that assigns it (a timer) is no
 * longer expanded in place.
 *
 * The analysis is flow-insensitive and conservative. A candidate is a local
 * variable declared `double` (not static, not extern, not made by a macro)
 * when double is active; the variables of one declaration statement share
 * its type specifier, so they stay double together or not at all (a
 * statement that also declares something else keeps today's types). It
 * stays passive when
 * its address is never taken and every value stored into it (initializer,
 * =, compound assignment) is passive: built from literals, integers,
 * passive candidates and calls of functions that are not ported, with no
 * active data anywhere inside. A candidate that gets an active value becomes
 * active, which may make others active: this repeats until nothing changes.
 * Since control flow is ignored, goto and branches cannot hide a store.
 * File-scope `static const double` constants stay double too.
 */
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

typedef struct cand {
  CXCursor decl;
  int active;
  int group; /* the candidates of one declaration statement share its type specifier */
} cand;

typedef struct store {
  int cand;       /* the candidate written */
  CXCursor value; /* what is stored (null: an unknown value, active) */
} store;

typedef struct scan {
  pt_ctx *x;
  cand *c;
  int nc, capc;
  store *s;
  int ns, caps;
} scan;

static int find_cand(const cand *c, int nc, CXCursor d) {
  if (clang_getCursorKind(d) != CXCursor_VarDecl) return -1;
  CXSourceLocation at = clang_getCursorLocation(d);
  for (int i = 0; i < nc; i++)
    if (clang_equalLocations(clang_getCursorLocation(c[i].decl), at)) return i;
  return -1;
}

/* The candidate an lvalue names (below parentheses), or -1. */
static int lvalue_cand(scan *s, CXCursor lv) {
  CXCursor e = pt_strip(lv);
  if (clang_getCursorKind(e) != CXCursor_DeclRefExpr) return -1;
  return find_cand(s->c, s->nc, clang_getCursorReferenced(e));
}

static void add_store(scan *s, int c, CXCursor value) {
  if (c < 0) return;
  if (s->ns == s->caps) {
    s->caps = s->caps ? 2 * s->caps : 32;
    s->s = realloc(s->s, (size_t)s->caps * sizeof *s->s);
    if (!s->s) abort();
  }
  s->s[s->ns].cand = c;
  s->s[s->ns].value = value;
  s->ns++;
}

/* A local scalar declared `double`. */
static int candidate(pt_ctx *x, CXCursor v) {
  if (clang_getCursorKind(v) != CXCursor_VarDecl || pt_in_macro(x, v)) return 0;
  CXType t = clang_getCursorType(v);
  if (t.kind != CXType_Double || !x->double_active) return 0;
  enum CX_StorageClass sc = clang_Cursor_getStorageClass(v);
  return sc == CX_SC_None || sc == CX_SC_Auto || sc == CX_SC_Register;
}

/* The candidates of each declaration statement whose declarators all are
 * candidates (`double t0, t1;`): one type specifier, kept or retyped for all. */
static void collect_decls(scan *s, CXCursor c, int *groups) {
  CXCursor *k;
  int n = pt_children(c, &k);
  int all = clang_getCursorKind(c) == CXCursor_DeclStmt;
  for (int i = 0; i < n && all; i++) all = candidate(s->x, k[i]);
  if (all) ++*groups;
  for (int i = 0; i < n; i++) {
    if (all) {
      if (s->nc == s->capc) {
        s->capc = s->capc ? 2 * s->capc : 16;
        s->c = realloc(s->c, (size_t)s->capc * sizeof *s->c);
        if (!s->c) abort();
      }
      s->c[s->nc].decl = k[i];
      s->c[s->nc].active = 0;
      s->c[s->nc].group = *groups;
      s->nc++;
    }
    collect_decls(s, k[i], groups);
  }
  free(k);
}

/* Every store into a candidate. Operators inside macro expansions have no
 * readable spelling: any binary operator on a candidate counts as a store
 * there, which only makes more variables active. */
static void collect_stores(scan *s, CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  enum CXCursorKind kind = clang_getCursorKind(c);
  if (kind == CXCursor_VarDecl) {
    int ci = find_cand(s->c, s->nc, c);
    for (int i = 0; ci >= 0 && i < n; i++)
      if (clang_isExpression(clang_getCursorKind(k[i]))) add_store(s, ci, k[i]);
  } else if ((kind == CXCursor_BinaryOperator || kind == CXCursor_CompoundAssignOperator) && n == 2) {
    const char *op = kind == CXCursor_BinaryOperator ? pt_binop(s->x, c) : "op=";
    if (!strcmp(op, "=") || !strcmp(op, "op=") || !strcmp(op, "?")) add_store(s, lvalue_cand(s, k[0]), k[1]);
  } else if (kind == CXCursor_UnaryOperator && n == 1) {
    /* &v: the only unary operator that makes a pointer of a double. */
    CXType t = clang_getCanonicalType(clang_getCursorType(c));
    if (t.kind == CXType_Pointer) add_store(s, lvalue_cand(s, k[0]), clang_getNullCursor());
  }
  for (int i = 0; i < n; i++) collect_stores(s, k[i]);
  free(k);
}

/* Is every part of expression c passive? */
static int value_passive(scan *s, CXCursor c) {
  pt_ctx *x = s->x;
  enum CXCursorKind kind = clang_getCursorKind(c);
  if (!clang_isExpression(kind)) return 0; /* a statement expression, say */
  switch (kind) {
  case CXCursor_DeclRefExpr: {
    CXCursor d = clang_getCursorReferenced(c);
    enum CXCursorKind dk = clang_getCursorKind(d);
    if (dk != CXCursor_VarDecl && dk != CXCursor_ParmDecl && dk != CXCursor_FieldDecl) return 1;
    int ci = find_cand(s->c, s->nc, d);
    if (ci >= 0) return !s->c[ci].active;
    return !pt_type_holds_active(x, clang_getCursorType(d));
  }
  case CXCursor_MemberRefExpr:
    if (pt_type_holds_active(x, clang_getCursorType(c))) return 0;
    break;
  case CXCursor_CallExpr: {
    CXCursor fd = clang_getCursorReferenced(c);
    /* The fused port's own helper gives a preaccumulated temporary's value,
     * a double whose partials the port already passes on: on the tool's
     * own output it stays the double it is. */
    if (clang_getCursorKind(fd) == CXCursor_FunctionDecl && pt_port_own(fd)) return 1;
    if (clang_getCursorKind(fd) != CXCursor_FunctionDecl || pt_ported_function(x, fd)) return 0;
    break;
  }
  case CXCursor_UnexposedExpr:
  case CXCursor_ParenExpr:
  case CXCursor_UnaryOperator:
  case CXCursor_BinaryOperator:
  case CXCursor_ConditionalOperator:
  case CXCursor_CStyleCastExpr:
  case CXCursor_ArraySubscriptExpr:
  case CXCursor_UnaryExpr:
  case CXCursor_IntegerLiteral:
  case CXCursor_FloatingLiteral:
  case CXCursor_CharacterLiteral:
  case CXCursor_StringLiteral:
    break;
  default:
    return 0; /* assignments inside values, compound literals, va_arg: not followed */
  }
  if (pt_act(x, c)) return 0;
  CXCursor *k;
  int n = pt_children(c, &k);
  int p = 1;
  for (int i = 0; i < n && p; i++) p = clang_isExpression(clang_getCursorKind(k[i])) ? value_passive(s, k[i]) : 1;
  free(k);
  return p;
}

/* x->passive: the candidates not (yet) active, as pt_act sees them. */
static void publish(pt_ctx *x, const scan *s) {
  x->npassive = 0;
  for (int i = 0; i < s->nc; i++)
    if (!s->c[i].active) x->passive[x->npassive++] = s->c[i].decl;
}

void pt_activity(pt_ctx *x, CXCursor body) {
  pt_activity_end(x);
  if (x->o->all_active || !x->double_active) return;
  scan s = {0};
  s.x = x;
  int groups = 0;
  collect_decls(&s, body, &groups);
  if (!s.nc) return;
  collect_stores(&s, body);
  x->passive = malloc((size_t)s.nc * sizeof *x->passive);
  if (!x->passive) abort();
  publish(x, &s);
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < s.ns; i++) {
      cand *c = &s.c[s.s[i].cand];
      if (c->active) continue;
      if (clang_Cursor_isNull(s.s[i].value) || !value_passive(&s, s.s[i].value)) {
        for (int j = 0; j < s.nc; j++) s.c[j].active |= s.c[j].group == c->group;
        changed = 1;
        publish(x, &s);
      }
    }
  }
  free(s.c);
  free(s.s);
}

void pt_activity_end(pt_ctx *x) {
  free(x->passive);
  x->passive = NULL;
  x->npassive = 0;
}

/* A file-scope `static const double` is a constant for the whole run (C
 * initializes it with a constant expression and nothing may store into it):
 * it stays double, so that no partial is computed for it in any expression
 * that reads it (`c0 * pow(r * t, kappa)` would otherwise also compute
 * log(r * t)). Only the file sees it, so every use is ported alike. */
static int constant_global(pt_ctx *x, CXCursor d) {
  if (x->o->all_active || !x->double_active || clang_getCursorKind(d) != CXCursor_VarDecl) return 0;
  if (clang_Cursor_getStorageClass(d) != CX_SC_Static) return 0;
  if (clang_getCursorKind(clang_getCursorSemanticParent(d)) != CXCursor_TranslationUnit) return 0;
  CXType t = clang_getCursorType(d);
  return t.kind == CXType_Double && clang_isConstQualifiedType(t);
}

int pt_local_passive(pt_ctx *x, CXCursor d) {
  if (constant_global(x, d)) return 1;
  if (!x->npassive || clang_getCursorKind(d) != CXCursor_VarDecl) return 0;
  CXSourceLocation at = clang_getCursorLocation(d);
  for (int i = 0; i < x->npassive; i++)
    if (clang_equalLocations(clang_getCursorLocation(x->passive[i]), at)) return 1;
  return 0;
}
