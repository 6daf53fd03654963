/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Whether an expression has side effects (assigns, increments, calls), which
 * decides whether the port may evaluate an lvalue twice (`a[i] += e` as
 * `a[i] = ad_add(a[i], e)`) and whether --fused may read it once for several
 * uses.
 */
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

/* Inside a macro expansion the operators cannot be read from the file's
 * text, so whether an expression assigns is decided from tokens instead: the
 * macro invocation as written (its arguments) and the bodies of the macros
 * it expands, nested ones included, must hold no assignment, increment or
 * decrement. Calls are seen by their cursor kind wherever they are. The
 * verdicts are kept per translation unit. */
typedef struct macro_purity {
  CXTranslationUnit tu;
  char **names; /* macro definitions of the translation unit */
  CXCursor *defs;
  signed char *pure; /* -1 unknown, 0 modifies, 1 pure */
  int n, cap;
} macro_purity;

static macro_purity purity;

static enum CXChildVisitResult collect_defs(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  (void)d;
  if (clang_getCursorKind(c) != CXCursor_MacroDefinition) return CXChildVisit_Continue;
  if (purity.n == purity.cap) {
    int ncap = purity.cap ? 2 * purity.cap : 256;
    char **nn = realloc(purity.names, (size_t)ncap * sizeof *nn);
    if (nn) purity.names = nn;
    CXCursor *nd = realloc(purity.defs, (size_t)ncap * sizeof *nd);
    if (nd) purity.defs = nd;
    signed char *np = realloc(purity.pure, (size_t)ncap);
    if (np) purity.pure = np;
    if (!nn || !nd || !np) return CXChildVisit_Break;
    purity.cap = ncap;
  }
  CXString s = clang_getCursorSpelling(c);
  purity.names[purity.n] = port_strdup(clang_getCString(s));
  clang_disposeString(s);
  purity.defs[purity.n] = c;
  purity.pure[purity.n] = -1;
  purity.n++;
  return CXChildVisit_Continue;
}

static void purity_reset(CXTranslationUnit tu) {
  if (purity.tu == tu) return;
  for (int i = 0; i < purity.n; i++) free(purity.names[i]);
  purity.n = 0;
  purity.tu = tu;
  clang_visitChildren(clang_getTranslationUnitCursor(tu), collect_defs, NULL);
}

static int modifies_token(const char *t) {
  size_t n = strlen(t);
  if (!strcmp(t, "++") || !strcmp(t, "--")) return 1;
  if (n == 0 || t[n - 1] != '=') return 0;
  return strcmp(t, "==") && strcmp(t, "<=") && strcmp(t, ">=") && strcmp(t, "!=");
}

static int range_pure(CXTranslationUnit tu, CXSourceRange r, int depth, int skip_first);

/* Whether the macro named `name` (if it is one) expands to nothing that assigns. */
static int name_pure(CXTranslationUnit tu, const char *name, int depth) {
  for (int i = 0; i < purity.n; i++) {
    if (strcmp(purity.names[i], name)) continue;
    if (purity.pure[i] < 0) {
      purity.pure[i] = 0; /* a recursive macro is not expanded again: assume the worst meanwhile */
      purity.pure[i] = (signed char)range_pure(tu, clang_getCursorExtent(purity.defs[i]), depth + 1, 1);
    }
    return purity.pure[i];
  }
  return 1; /* not a macro */
}

static int range_pure(CXTranslationUnit tu, CXSourceRange r, int depth, int skip_first) {
  if (depth > 32) return 0;
  CXToken *tok = NULL;
  unsigned n = 0;
  clang_tokenize(tu, r, &tok, &n);
  int pure = 1;
  for (unsigned i = 0; i < n && pure; i++) {
    CXTokenKind k = clang_getTokenKind(tok[i]);
    if (k != CXToken_Punctuation && k != CXToken_Identifier) continue;
    CXString s = clang_getTokenSpelling(tu, tok[i]);
    const char *t = clang_getCString(s);
    if (k == CXToken_Punctuation)
      pure = !modifies_token(t);
    else if (i > 0 || !skip_first) /* a definition's own name is not a use */
      pure = name_pure(tu, t, depth);
    clang_disposeString(s);
  }
  clang_disposeTokens(tu, tok, n);
  return pure;
}

/* Whether the macro expansions around c (whose operators the file's text
 * does not show) leave nothing that assigns. */
static int macro_pure(pt_ctx *x, CXCursor c) {
  purity_reset(x->tu);
  unsigned b = pt_b(c), e = pt_e(c);
  for (int i = 0; i < x->nmacros && x->macros[i].b <= b; i++) {
    const pt_macro *m = &x->macros[i];
    if (m->e < e) continue;
    /* The invocation as written: its name, then the arguments. */
    if (!range_pure(x->tu, clang_getCursorExtent(m->cur), 0, 0)) return 0;
  }
  return 1;
}

int pt_side_effects(pt_ctx *x, CXCursor c) {
  enum CXCursorKind k = clang_getCursorKind(c);
  if (k == CXCursor_CallExpr || k == CXCursor_CompoundAssignOperator) return 1;
  if (pt_in_macro(x, c)) {
    if (!macro_pure(x, c)) return 1;
  } else if (k == CXCursor_UnaryOperator) {
    CXCursor e = pt_last_expr(c);
    const char *op = clang_Cursor_isNull(e) ? "?" : pt_unop(x, c, e);
    if (strstr(op, "++") || strstr(op, "--") || !strcmp(op, "?")) return 1;
  } else if (k == CXCursor_BinaryOperator) {
    const char *op = pt_binop(x, c);
    if (!strcmp(op, "=") || !strcmp(op, "?")) return 1;
  }
  CXCursor *kk;
  int n = pt_children(c, &kk);
  int r = 0;
  for (int i = 0; i < n && !r; i++) r = pt_side_effects(x, kk[i]);
  free(kk);
  return r;
}

