/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Declarations and statements: the walk over one translation unit that
 * collects the edits, then the edited text (macro expansion in place, the
 * include of ariadne.h, MPI request names).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

void pt_add_edit(pt_ctx *x, unsigned b, unsigned e, char *text) {
  for (int i = 0; i < x->nedits; i++)
    if (x->edits[i].b == b && x->edits[i].e == e) {
      free(text);
      return;
    }
  if (x->nedits == x->capedits) {
    x->capedits = x->capedits ? 2 * x->capedits : 64;
    x->edits = realloc(x->edits, (size_t)x->capedits * sizeof *x->edits);
    if (!x->edits) abort();
  }
  x->edits[x->nedits].b = b;
  x->edits[x->nedits].e = e;
  x->edits[x->nedits].text = text;
  x->nedits++;
}

/* An edit for expression c if its text changes. */
static void edit_expr(pt_ctx *x, CXCursor c, char *text) {
  char *o = pt_orig(x, c);
  if (strcmp(o, text))
    pt_add_edit(x, pt_b(c), pt_e(c), text);
  else
    free(text);
  free(o);
}

static int is_ident(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* The start of the first identifier in p[i, e) outside comments and string
 * or character literals (e if none); *end is where it ends. A literal ends
 * at its closing quote or at the end of its line. */
static size_t next_ident(const char *p, size_t i, size_t e, size_t *end) {
  while (i < e) {
    char ch = p[i];
    if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      while (j < e && p[j] != ch && p[j] != '\n') j += p[j] == '\\' ? 2 : 1;
      i = j + 1;
    } else if (ch == '/' && i + 1 < e && p[i + 1] == '*') {
      const char *q = strstr(p + i + 2, "*/");
      i = q ? (size_t)(q - p) + 2 : e;
    } else if (ch == '/' && i + 1 < e && p[i + 1] == '/') {
      while (i < e && p[i] != '\n') i++;
    } else if (is_ident(ch)) {
      size_t j = i;
      while (j < e && is_ident(p[j])) j++;
      *end = j;
      return i;
    } else {
      i++;
    }
  }
  *end = e;
  return e;
}

/* Replace the active type keywords in [b, e): `double` when it is active,
 * and also `float` for a typedef that names an active type (force). */
static void retype(pt_ctx *x, unsigned b, unsigned e, int force) {
  const char *p = x->buf;
  size_t end = e < x->len ? e : x->len;
  for (size_t i = b, j; (i = next_ident(p, i, end, &j)) < end; i = j) {
    if (i > 0 && is_ident(p[i - 1])) continue;
    /* The keyword, or a macro that names it (#define DTYPE double). */
    const char *kw = NULL;
    if (j - i == 6 && !strncmp(p + i, "double", 6))
      kw = "double";
    else if (j - i == 5 && !strncmp(p + i, "float", 5))
      kw = "float";
    else
      kw = pt_type_macro(x, p, i, j);
    if (!kw) continue;
    if (!strcmp(kw, "double") && (x->double_active || force) && !pt_near_complex(p, (unsigned)i, (unsigned)j, x->len))
      pt_add_edit(x, (unsigned)i, (unsigned)j, port_strdup("ad_real"));
    else if (force && !strcmp(kw, "float"))
      pt_add_edit(x, (unsigned)i, (unsigned)j, port_strdup("ad_real"));
  }
}

int pt_suffixed(pt_ctx *x, CXCursor d) {
  if (!x->o->suffix || !x->o->suffix[0]) return 0;
  enum CXCursorKind k = clang_getCursorKind(d);
  if (k != CXCursor_FunctionDecl && k != CXCursor_VarDecl) return 0;
  if (k == CXCursor_VarDecl && clang_getCursorKind(clang_getCursorSemanticParent(d)) != CXCursor_TranslationUnit)
    return 0;
  /* Internal linkage, not the storage class of this declaration: a function
   * declared static and then defined without the keyword is still static,
   * and its definition must keep the name its calls use. */
  if (clang_Cursor_getStorageClass(d) == CX_SC_Static || clang_getCursorLinkage(d) == CXLinkage_Internal) return 0;
  CXString s = clang_getCursorSpelling(d);
  int is_main = !strcmp(clang_getCString(s), "main");
  clang_disposeString(s);
  if (is_main) return 0;
  if (k == CXCursor_FunctionDecl) return pt_ported_function(x, d);
  CXCursor def = clang_getCursorDefinition(d);
  if (clang_Cursor_isNull(def)) def = d;
  if (pt_own_location(x, clang_getCursorLocation(def))) return 1;
  /* Defined by another input: only an extern declaration is seen here. */
  char *name = pt_spelling(d);
  int found = 0;
  for (int i = 0; i < x->o->nglobals && !found; i++) found = !strcmp(x->o->globals[i], name);
  free(name);
  return found;
}

/* 'name' of a declaration, for messages. */
static char *spelling_of(CXCursor d) {
  CXString s = clang_getCursorSpelling(d);
  char *r = pt_cat("'", clang_getCString(s), "'");
  clang_disposeString(s);
  return r;
}

static void suffix_name(pt_ctx *x, CXCursor d) {
  if (!pt_suffixed(x, d) || pt_in_macro(x, d)) return;
  unsigned at = pt_off(clang_getCursorLocation(d));
  CXString s = clang_getCursorSpelling(d);
  size_t n = strlen(clang_getCString(s));
  /* A name made by a macro (-Dmain=driver_main) is not written here. */
  if (at + n <= x->len && !strncmp(x->buf + at, clang_getCString(s), n) &&
      (at + n == x->len || !is_ident(x->buf[at + n])))
    pt_add_edit(x, at, at + (unsigned)n, pt_cat(clang_getCString(s), x->o->suffix, NULL));
  clang_disposeString(s);
}

/* ------------------------------------------------------------------------ */
/* Statements                                                                */
/* ------------------------------------------------------------------------ */

enum { ROOT_STMT, ROOT_COND, ROOT_ACTIVE, ROOT_VALUE };

static void root(pt_ctx *x, CXCursor c, int mode) {
  if (mode == ROOT_STMT && x->o->fused && pt_in_macro(x, c))
    pt_fused_skip(x, c, c, 0, "a statement inside a macro expansion");
  if (mode == ROOT_STMT && x->o->fused && !pt_in_macro(x, c)) {
    /* ((a) = ...); as a macro expanded in place writes it */
    CXCursor e = c;
    while (clang_getCursorKind(e) == CXCursor_ParenExpr && !clang_Cursor_isNull(pt_last_expr(e))) e = pt_last_expr(e);
    enum CXCursorKind k = clang_getCursorKind(e);
    if (k == CXCursor_BinaryOperator || k == CXCursor_CompoundAssignOperator) {
      CXCursor *kk;
      int n = pt_children(e, &kk);
      const char *op = pt_binop(x, e);
      if (n == 2 && pt_act(x, kk[0]) && (k == CXCursor_CompoundAssignOperator || !strcmp(op, "="))) {
        char *t = clang_equalCursors(e, c) && pt_block_assign_temp(c) >= 0
                      ? pt_fused_temp_assign(x, c, clang_getCursorReferenced(kk[0]), kk[1])
                      : NULL;
        if (!t) t = pt_fused_assign(x, c, kk[0], op, kk[1]);
        if (t) {
          free(kk);
          free(t);
          return;
        }
      }
      free(kk);
    }
  }
  char *t;
  if (mode == ROOT_STMT)
    t = pt_emit(x, c, 1);
  else if (mode == ROOT_COND)
    t = pt_emit_to(x, c, 0);
  else if (mode == ROOT_ACTIVE)
    t = pt_emit_to(x, c, 1);
  else
    t = pt_emit(x, c, 0);
  edit_expr(x, c, t);
}

static void walk_stmt(pt_ctx *x, CXCursor c);
static void port_var(pt_ctx *x, CXCursor v, int file_scope);
static void port_decl(pt_ctx *x, CXCursor c, int file_scope);

static void stmt_or_expr(pt_ctx *x, CXCursor c) {
  pt_block_stmt(c, 0);
  if (clang_isExpression(clang_getCursorKind(c)))
    root(x, c, ROOT_STMT);
  else
    walk_stmt(x, c);
  pt_block_stmt(c, 1);
}

/* The offsets of the two semicolons and the closing parenthesis of a for header. */
static int for_header(pt_ctx *x, CXCursor c, unsigned *s1, unsigned *s2, unsigned *close) {
  unsigned i = pt_b(c) + 3;
  while (i < x->len && x->buf[i] != '(') i++;
  int depth = 0, semis = 0;
  for (; i < x->len; i++) {
    char ch = x->buf[i];
    if (ch == '(' || ch == '[' || ch == '{')
      depth++;
    else if (ch == ')' || ch == ']' || ch == '}') {
      if (--depth == 0) {
        *close = i;
        return semis == 2;
      }
    } else if (ch == ';' && depth == 1) {
      if (semis == 0)
        *s1 = i;
      else
        *s2 = i;
      semis++;
    }
  }
  return 0;
}

/* --fused: `T v = rhs;` of an active scalar as `T v; { ... v = ad_custom(...); }`. */
static int fuse_decl(pt_ctx *x, CXCursor ds, CXCursor v) {
  if (clang_getCursorKind(v) != CXCursor_VarDecl || pt_in_macro(x, ds) || pt_port_own(v)) return 0;
  if (!pt_type_active(x, clang_getCursorType(v)) || clang_Cursor_getStorageClass(v) == CX_SC_Static ||
      pt_local_passive(x, v))
    return 0;
  unsigned b = pt_b(ds), name = pt_off(clang_getCursorLocation(v));
  CXString sp = clang_getCursorSpelling(v);
  unsigned name_end = name + (unsigned)strlen(clang_getCString(sp));
  clang_disposeString(sp);
  CXCursor init = pt_block_init(x, v);
  if (clang_Cursor_isNull(init)) return 0;
  if (x->no_fuse) {
    pt_fused_skip(x, ds, init, 0, "a declaration in a for header");
    return 0;
  }
  char *decl = pt_retype_text(x, x->buf + b, name_end - b);
  /* const goes: the variable is assigned in the block that follows. */
  char *c = strstr(decl, "const ");
  if (c && (c == decl || c[-1] == ' ')) memmove(c, c + 6, strlen(c + 6) + 1);
  char *t = pt_fused_decl(x, ds, v, init, decl);
  free(decl);
  if (!t) return 0;
  free(t);
  return 1;
}

static void walk_stmt(pt_ctx *x, CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  enum CXCursorKind kind = clang_getCursorKind(c);
  switch (kind) {
  case CXCursor_DeclStmt:
    if (x->o->fused && n == 1 && fuse_decl(x, c, k[0])) break;
    for (int i = 0; i < n; i++) {
      if (clang_getCursorKind(k[i]) == CXCursor_VarDecl)
        port_var(x, k[i], 0);
      else
        port_decl(x, k[i], 0);
    }
    break;
  case CXCursor_IfStmt:
  case CXCursor_WhileStmt:
    if (kind == CXCursor_WhileStmt) pt_spec_loop(x, c);
    for (int i = 0; i < n; i++) {
      if (i == 0 && clang_isExpression(clang_getCursorKind(k[i])))
        root(x, k[i], ROOT_COND);
      else
        stmt_or_expr(x, k[i]);
    }
    break;
  case CXCursor_DoStmt:
    pt_spec_loop(x, c);
    for (int i = 0; i < n; i++) {
      if (i == n - 1 && clang_isExpression(clang_getCursorKind(k[i])))
        root(x, k[i], ROOT_COND);
      else
        stmt_or_expr(x, k[i]);
    }
    break;
  case CXCursor_SwitchStmt:
    for (int i = 0; i < n; i++) {
      if (i == 0 && clang_isExpression(clang_getCursorKind(k[i])))
        root(x, k[i], ROOT_VALUE);
      else
        stmt_or_expr(x, k[i]);
    }
    break;
  case CXCursor_CaseStmt:
    for (int i = 1; i < n; i++) stmt_or_expr(x, k[i]);
    break;
  case CXCursor_ForStmt: {
    unsigned s1 = 0, s2 = 0, close = 0;
    if (!for_header(x, c, &s1, &s2, &close)) {
      pt_error(x, c, "cannot read this for statement's header");
      break;
    }
    pt_spec_loop(x, c);
    for (int i = 0; i < n; i++) {
      unsigned b = pt_b(k[i]);
      x->no_fuse = b < close;
      if (b < s1)
        stmt_or_expr(x, k[i]);
      else if (b < s2)
        root(x, k[i], ROOT_COND);
      else if (b < close)
        root(x, k[i], ROOT_STMT);
      else
        stmt_or_expr(x, k[i]);
    }
    x->no_fuse = 0;
    break;
  }
  case CXCursor_ReturnStmt:
    if (n == 1 && x->o->fused && pt_type_active(x, x->fn_ret) && !pt_in_macro(x, c)) {
      char *t = pt_fused_return(x, c, k[0]);
      if (t) {
        free(t);
        break;
      }
    }
    if (n == 1 && clang_isExpression(clang_getCursorKind(k[0]))) {
      if (!pt_type_active(x, x->fn_ret)) pt_passive_store(x, k[0], x->fn_ret, k[0], "the return value");
      root(x, k[0], pt_type_active(x, x->fn_ret) ? ROOT_ACTIVE : ROOT_COND);
    }
    break;
  case CXCursor_GCCAsmStmt:
  case CXCursor_MSAsmStmt:
    pt_error(x, c, "inline assembly cannot be ported; move it into a function of passive code");
    break;
  default:
    if (clang_isExpression(kind))
      root(x, c, ROOT_STMT);
    else
      for (int i = 0; i < n; i++) stmt_or_expr(x, k[i]);
    break;
  }
  free(k);
}

/* ------------------------------------------------------------------------ */
/* Declarations                                                              */
/* ------------------------------------------------------------------------ */

static void port_var(pt_ctx *x, CXCursor v, int file_scope) {
  if (pt_port_own(v)) return;
  if (pt_in_macro(x, v)) {
    if (pt_type_holds_active(x, clang_getCursorType(v)))
      pt_error(x, v, "declaration of active data inside a macro expansion; write it out");
    return;
  }
  unsigned b = pt_b(v), e = pt_e(v), name = pt_off(clang_getCursorLocation(v));
  CXString sp = clang_getCursorSpelling(v);
  unsigned name_end = name + (unsigned)strlen(clang_getCString(sp));
  clang_disposeString(sp);
  /* The declarator's own part before the name, and the shared type specifier. */
  unsigned first_sep = name, last_comma = b;
  int depth = 0;
  for (unsigned i = b; i < name && i < x->len; i++) {
    char ch = x->buf[i];
    if (ch == '(' || ch == '[' || ch == '{')
      depth++;
    else if (ch == ')' || ch == ']' || ch == '}')
      depth--;
    else if (depth == 0 && (ch == ',' || ch == '=')) {
      if (first_sep == name) first_sep = i;
      if (ch == ',') last_comma = i + 1;
    }
  }
  /* The initializer starts after a top-level '=' behind the name. */
  unsigned init_at = e;
  depth = 0;
  for (unsigned i = name_end; i < e && i < x->len; i++) {
    char ch = x->buf[i];
    if (ch == '(' || ch == '[' || ch == '{')
      depth++;
    else if (ch == ')' || ch == ']' || ch == '}')
      depth--;
    else if (depth == 0 && ch == '=') {
      init_at = i + 1;
      break;
    }
  }
  /* A local double no active value reaches keeps its type (activity.c). */
  int passive = pt_local_passive(x, v);
  if (!passive) {
    retype(x, b, first_sep, 0);
    if (last_comma > b) retype(x, last_comma, name, 0);
    retype(x, name_end, init_at, 0);
  }
  if (file_scope) suffix_name(x, v);

  CXCursor *k;
  int n = pt_children(v, &k);
  CXCursor init = clang_getNullCursor();
  for (int i = 0; i < n; i++)
    if (clang_isExpression(clang_getCursorKind(k[i])) && pt_b(k[i]) >= init_at && init_at < e) {
      init = k[i];
      break;
    }
  free(k);
  if (clang_Cursor_isNull(init)) return;
  CXType t = clang_getCursorType(v);
  x->static_init = file_scope || clang_Cursor_getStorageClass(v) == CX_SC_Static;
  char *text;
  if (pt_type_active(x, t) && !passive) {
    if (x->static_init && pt_act(x, init)) {
      pt_error(x, init, "an active value initializes a variable of static storage; assign it in code instead");
      x->static_init = 0;
      return;
    }
    text = NULL;
    if (!text) text = pt_emit_to(x, init, 1);
  } else if (pt_is_float(t)) {
    char *name = spelling_of(v);
    pt_passive_store(x, init, t, init, name);
    free(name);
    text = pt_emit_to(x, init, 0);
  } else {
    text = pt_emit(x, init, 0);
  }
  x->static_init = 0;
  edit_expr(x, init, text);
}

static void port_function(pt_ctx *x, CXCursor f) {
  if (pt_port_own(f)) return; /* a helper of a fused port: ported already */
  CXCursor *k;
  int n = pt_children(f, &k);
  unsigned body = pt_e(f);
  int has_body = 0;
  for (int i = 0; i < n; i++)
    if (clang_getCursorKind(k[i]) == CXCursor_CompoundStmt) {
      body = pt_b(k[i]);
      has_body = 1;
    }
  /* A declaration of a function no input defines stays double: the code it
   * links against is double code (calls with active values are reported). */
  if (!pt_in_macro(x, f) && pt_ported_function(x, f)) {
    retype(x, pt_b(f), body, 0);
    suffix_name(x, f);
    if (has_body) pt_check_foreign_decl(x, f, f);
  }
  if (clang_isFunctionTypeVariadic(clang_getCursorType(f)) && has_body) {
    /* A variadic function of this file that reads active values with va_arg
     * is reported where it is called with one. */
  }
  if (has_body) {
    CXType saved = x->fn_ret;
    x->fn_ret = clang_getCursorResultType(f);
    x->in_function = 1;
    x->fn_begin = pt_b(f);
    for (int i = 0; i < n; i++)
      if (clang_getCursorKind(k[i]) == CXCursor_CompoundStmt) {
        pt_activity(x, k[i]);
        pt_block_plan(x, k[i]);
        walk_stmt(x, k[i]);
        x->block_redo |= pt_block_end(x);
        pt_activity_end(x);
      }
    x->in_function = 0;
    x->fn_ret = saved;
  }
  free(k);
}

/* Is name[0, n) a macro that names double (#define DTYPE double), as one of
 * its expansions in the file shows? For a macro's body, where no expansion is. */
static int type_macro_named(pt_ctx *x, const char *name, size_t n) {
  for (int i = 0; i < x->nmacros; i++) {
    const pt_macro *m = &x->macros[i];
    if (m->e - m->b != n || strncmp(x->buf + m->b, name, n)) continue;
    const char *kw = pt_type_macro(x, x->buf, m->b, m->e);
    return kw && !strcmp(kw, "double");
  }
  return 0;
}

static void port_decl(pt_ctx *x, CXCursor c, int file_scope) {
  enum CXCursorKind k = clang_getCursorKind(c);
  switch (k) {
  case CXCursor_FunctionDecl:
    port_function(x, c);
    break;
  case CXCursor_VarDecl:
    port_var(x, c, file_scope);
    break;
  case CXCursor_TypedefDecl: {
    CXString s = clang_getCursorSpelling(c);
    int force = pt_active_name(x, clang_getCString(s));
    clang_disposeString(s);
    if (!pt_in_macro(x, c)) retype(x, pt_b(c), pt_e(c), force);
    CXCursor *kk;
    int n = pt_children(c, &kk);
    for (int i = 0; i < n; i++) port_decl(x, kk[i], file_scope);
    free(kk);
    break;
  }
  case CXCursor_StructDecl:
  case CXCursor_UnionDecl: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    for (int i = 0; i < n; i++) {
      enum CXCursorKind kk_kind = clang_getCursorKind(kk[i]);
      if (kk_kind == CXCursor_FieldDecl) {
        if (k == CXCursor_UnionDecl && pt_type_holds_active(x, clang_getCursorType(kk[i])))
          pt_error(x, kk[i],
                   "a union with an active member (type punning of active values) cannot be ported; use a "
                   "struct or keep the union's data passive");
        if (!pt_in_macro(x, kk[i])) retype(x, pt_b(kk[i]), pt_e(kk[i]), 0);
      } else {
        port_decl(x, kk[i], file_scope);
      }
    }
    free(kk);
    break;
  }
  case CXCursor_MacroDefinition: {
    /* sizeof(double) in a macro body becomes sizeof(ad_real), as does
     * sizeof(DTYPE) of a macro that names double. */
    if (!x->double_active) break;
    unsigned b = pt_b(c), e = pt_e(c);
    for (unsigned i = b; i + 6 <= e; i++) {
      if (strncmp(x->buf + i, "sizeof", 6) || (i > 0 && is_ident(x->buf[i - 1]))) continue;
      unsigned j = i + 6;
      while (j < e && isspace((unsigned char)x->buf[j])) j++;
      if (j < e && x->buf[j] == '(') {
        j++;
        while (j < e && isspace((unsigned char)x->buf[j])) j++;
        unsigned w = j;
        while (w < e && is_ident(x->buf[w])) w++;
        if ((w - j == 6 && !strncmp(x->buf + j, "double", 6)) || type_macro_named(x, x->buf + j, w - j))
          pt_add_edit(x, j, w, port_strdup("ad_real"));
      }
    }
    break;
  }
  default:
    break;
  }
}

/* ------------------------------------------------------------------------ */
/* The translation unit                                                      */
/* ------------------------------------------------------------------------ */

typedef struct tu_scan {
  pt_ctx *x;
  unsigned *at; /* the starts of top-level declarations and the ends of #includes, in file order */
  char *is_include;
  int nat, capat;
  int has_ariadne, has_ariadne_mpi;
  int collect_only;
} tu_scan;

static void note_top(tu_scan *s, unsigned at, int is_include) {
  if (s->nat == s->capat) {
    s->capat = s->capat ? 2 * s->capat : 64;
    s->at = realloc(s->at, (size_t)s->capat * sizeof *s->at);
    s->is_include = realloc(s->is_include, (size_t)s->capat);
    if (!s->at || !s->is_include) abort();
  }
  s->at[s->nat] = at;
  s->is_include[s->nat++] = (char)is_include;
}

/* Where #include <ariadne.h> goes: after the last #include before the first
 * use of Ariadne (offset `use`), or at the start of the line of the
 * declaration holding that use when no #include comes before it, so that the
 * header precedes every name it declares. */
static unsigned include_point(const tu_scan *s, const char *text, size_t len, unsigned use, int *after_include) {
  unsigned best = 0;
  int found = 0;
  for (int i = 0; i < s->nat; i++)
    if (s->is_include[i] && s->at[i] <= use) {
      best = s->at[i];
      found = 1;
    }
  *after_include = found;
  if (found) {
    while (best < len && text[best] != '\n') best++;
    return best;
  }
  unsigned top = use;
  for (int i = 0; i < s->nat; i++)
    if (!s->is_include[i] && s->at[i] <= use) top = s->at[i];
  while (top > 0 && text[top - 1] != '\n') top--;
  return top;
}

/* The first whole identifier `name` in text outside comments and strings
 * (len if none). */
static unsigned find_ident(const char *text, size_t len, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0, j; (i = next_ident(text, i, len, &j)) < len; i = j)
    if (j - i == n && !strncmp(text + i, name, n)) return (unsigned)i;
  return (unsigned)len;
}

static int macro_cmp(const void *a, const void *b) {
  const pt_macro *p = a, *q = b;
  return p->b < q->b ? -1 : p->b > q->b;
}

static enum CXChildVisitResult top_visit(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  tu_scan *s = d;
  pt_ctx *x = s->x;
  CXFile f = NULL;
  clang_getExpansionLocation(clang_getCursorLocation(c), &f, NULL, NULL, NULL);
  if (!f || !clang_File_isEqual(f, x->file)) return CXChildVisit_Continue;
  enum CXCursorKind k = clang_getCursorKind(c);
  if (s->collect_only != (k == CXCursor_MacroExpansion)) return CXChildVisit_Continue;
  if (k == CXCursor_InclusionDirective) {
    CXString f = clang_getCursorSpelling(c);
    const char *name = clang_getCString(f);
    if (!strcmp(name, "ariadne.h")) s->has_ariadne = 1;
    if (!strcmp(name, "ariadne_mpi.h")) s->has_ariadne_mpi = 1;
    clang_disposeString(f);
    note_top(s, pt_e(c), 1);
  } else if (k == CXCursor_MacroExpansion) {
    if (x->nmacros == x->capmacros) {
      x->capmacros = x->capmacros ? 2 * x->capmacros : 64;
      x->macros = realloc(x->macros, (size_t)x->capmacros * sizeof *x->macros);
      if (!x->macros) abort();
    }
    x->macros[x->nmacros].b = pt_b(c);
    x->macros[x->nmacros].e = pt_e(c);
    x->macros[x->nmacros].cur = c;
    x->nmacros++;
  } else {
    if (k != CXCursor_MacroDefinition) note_top(s, pt_b(c), 0);
    port_decl(x, c, 1);
  }
  return CXChildVisit_Continue;
}

/* The expansion of macro m, its arguments as written. NULL (reported) if it
 * uses # or ## or cannot be read. */
static char *expand_macro(pt_ctx *x, const pt_macro *m) {
  CXCursor def = clang_getCursorReferenced(m->cur);
  if (clang_Cursor_isNull(def)) return NULL;
  CXToken *dt = NULL, *it = NULL;
  unsigned ndt = 0, nit = 0;
  clang_tokenize(x->tu, clang_getCursorExtent(def), &dt, &ndt);
  clang_tokenize(x->tu, clang_getCursorExtent(m->cur), &it, &nit);
  char *params[64];
  int np = 0;
  unsigned body = 1;
  int fnlike = clang_Cursor_isMacroFunctionLike(def);
  int ok = ndt >= 1;
  if (fnlike && ok) {
    unsigned i = 2; /* name ( */
    for (; i < ndt; i++) {
      CXString s = clang_getTokenSpelling(x->tu, dt[i]);
      const char *t = clang_getCString(s);
      if (!strcmp(t, ")")) {
        clang_disposeString(s);
        break;
      }
      if (!strcmp(t, "...")) ok = 0;
      if (strcmp(t, ",") && np < 64) params[np++] = port_strdup(t);
      clang_disposeString(s);
    }
    body = i + 1;
  }
  /* Arguments: the text between the invocation's top-level commas. */
  char *args[64];
  int nargs = 0;
  if (fnlike && ok) {
    int depth = 0;
    unsigned start = 0;
    for (unsigned i = 1; i < nit; i++) {
      CXString s = clang_getTokenSpelling(x->tu, it[i]);
      const char *t = clang_getCString(s);
      unsigned off = pt_off(clang_getTokenLocation(x->tu, it[i]));
      if (!strcmp(t, "(")) {
        if (depth++ == 0) start = off + 1;
      } else if (!strcmp(t, ")") || (!strcmp(t, ",") && depth == 1)) {
        if (!strcmp(t, ")")) depth--;
        if (depth == 0 || !strcmp(t, ",")) {
          if (nargs < 64) args[nargs++] = port_strndup(x->buf + start, off - start);
          start = off + 1;
        }
      }
      clang_disposeString(s);
      if (depth == 0) break;
    }
    if (nargs == 1 && np == 0) {
      free(args[0]);
      nargs = 0;
    }
    if (nargs != np) ok = 0;
  }
  port_str out = {0};
  for (unsigned i = body; ok && i < ndt; i++) {
    CXString s = clang_getTokenSpelling(x->tu, dt[i]);
    const char *t = clang_getCString(s);
    if (!strcmp(t, "#") || !strcmp(t, "##")) ok = 0;
    int sub = -1;
    for (int p = 0; p < np; p++)
      if (!strcmp(params[p], t)) sub = p;
    const char *piece = sub >= 0 ? args[sub] : t;
    /* A space only where tokens would otherwise merge. */
    if (out.n > 0 && piece[0]) {
      char a = out.s[out.n - 1], b = piece[0];
      const char *ops = "+-*/&|<>=!%^.";
      if ((is_ident(a) && is_ident(b)) || (strchr(ops, a) && strchr(ops, b)) || a == ',') port_str_add(&out, " ");
    }
    port_str_add(&out, piece);
    clang_disposeString(s);
  }
  for (int p = 0; p < np; p++) free(params[p]);
  for (int a = 0; a < nargs; a++) free(args[a]);
  clang_disposeTokens(x->tu, dt, ndt);
  clang_disposeTokens(x->tu, it, nit);
  char *r = port_str_take(&out);
  if (!ok) {
    free(r);
    return NULL;
  }
  return r;
}

static int edit_cmp(const void *a, const void *b) {
  const pt_edit *p = a, *q = b;
  if (p->b != q->b) return p->b < q->b ? -1 : 1;
  /* An insertion goes before a replacement that starts at the same place. */
  if ((p->e == p->b) != (q->e == q->b)) return p->e == p->b ? -1 : 1;
  return p->e > q->e ? -1 : p->e < q->e;
}

/* Replace whole identifiers `from` by `to` outside strings and comments. */
static char *rename_ident(const char *s, const char *from, const char *to) {
  port_str o = {0};
  size_t n = strlen(s), fl = strlen(from);
  size_t i = 0;
  while (i < n) {
    char ch = s[i];
    if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      while (j < n && s[j] != ch) j += s[j] == '\\' ? 2 : 1;
      j = j < n ? j + 1 : n;
      port_str_addn(&o, s + i, j - i);
      i = j;
    } else if (ch == '/' && i + 1 < n && s[i + 1] == '*') {
      const char *q = strstr(s + i + 2, "*/");
      size_t j = q ? (size_t)(q - s) + 2 : n;
      port_str_addn(&o, s + i, j - i);
      i = j;
    } else if (ch == '/' && i + 1 < n && s[i + 1] == '/') {
      size_t j = i;
      while (j < n && s[j] != '\n') j++;
      port_str_addn(&o, s + i, j - i);
      i = j;
    } else if (is_ident(ch)) {
      size_t j = i;
      while (j < n && is_ident(s[j])) j++;
      if (j - i == fl && !strncmp(s + i, from, fl))
        port_str_add(&o, to);
      else
        port_str_addn(&o, s + i, j - i);
      i = j;
    } else {
      port_str_addn(&o, s + i, 1);
      i++;
    }
  }
  return port_str_take(&o);
}

static void dispose(pt_ctx *x) {
  for (int i = 0; i < x->nmpi_types; i++) free(x->mpi_types[i]);
  x->nmpi_types = 0;
  if (x->tu) clang_disposeTranslationUnit(x->tu);
  if (x->index) clang_disposeIndex(x->index);
  x->tu = NULL;
  x->index = NULL;
}

/* OpenMP: the tape is per thread, so an active computation in a parallel
 * region would lose its derivatives on the other threads. Each `#pragma omp`
 * line of a ported file is kept for the passive build only: the active build
 * records serially. */
static char *guard_openmp(const char *s) {
  port_str o = {0};
  const char *line = s;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    int is_omp = 0;
    if (*p == '#') {
      p++;
      while (*p == ' ' || *p == '\t') p++;
      if (!strncmp(p, "pragma", 6)) {
        p += 6;
        while (*p == ' ' || *p == '\t') p++;
        is_omp = !strncmp(p, "omp", 3) && !is_ident(p[3]);
      }
    }
    /* already guarded (the port of a port) */
    int already = o.n >= 23 && !strcmp(o.s + o.n - 23, "#ifdef ARIADNE_PASSIVE\n");
    if (is_omp && !already) {
      port_str_add(&o, "#ifdef ARIADNE_PASSIVE\n");
      /* the pragma with its continuation lines */
      size_t m = n;
      while (m >= 2 && line[m - 2] == '\\' && line[m - 1] == '\n' && line[m]) {
        const char *e2 = strchr(line + m, '\n');
        m = e2 ? (size_t)(e2 - line) + 1 : strlen(line);
      }
      port_str_addn(&o, line, m);
      if (m == 0 || line[m - 1] != '\n') port_str_add(&o, "\n");
      port_str_add(&o, "#endif\n");
      line += m;
      continue;
    }
    port_str_addn(&o, line, n);
    line += n;
  }
  return port_str_take(&o);
}

/* Parse `unit`, with `text` as the contents of `path` (the file ported, the
 * unit itself or a file it includes) once macros were expanded in it. */
static int parse(pt_ctx *x, const char *unit, const char *path, const char *text, size_t len, const char *const *args,
                 int nargs) {
  CXIndex idx = x->index = clang_createIndex(0, 0);
  struct CXUnsavedFile uf;
  uf.Filename = path;
  uf.Contents = text;
  uf.Length = (unsigned long)len;
  enum CXErrorCode ec =
      clang_parseTranslationUnit2(idx, unit, args, nargs, text ? &uf : NULL, text ? 1 : 0,
                                  CXTranslationUnit_DetailedPreprocessingRecord | CXTranslationUnit_KeepGoing, &x->tu);
  if (ec != CXError_Success || !x->tu) {
    fprintf(stderr, "%s:1:1: error: libclang could not parse the file (code %d)\n", unit, (int)ec);
    return -1;
  }
  int bad = 0;
  unsigned nd = clang_getNumDiagnostics(x->tu);
  for (unsigned i = 0; i < nd; i++) {
    CXDiagnostic d = clang_getDiagnostic(x->tu, i);
    if (clang_getDiagnosticSeverity(d) >= CXDiagnostic_Error) {
      CXString s = clang_formatDiagnostic(d, CXDiagnostic_DisplaySourceLocation | CXDiagnostic_DisplayColumn);
      const char *m = clang_getCString(s);
      const char *e = strstr(m, "error: ");
      fprintf(stderr,
              "%.*serror: the file does not compile as given (%s); pass its compiler flags after -- or with "
              "-p BUILD-DIR\n",
              e ? (int)(e - m) : 0, m, e ? e + 7 : m);
      clang_disposeString(s);
      bad++;
    }
    clang_disposeDiagnostic(d);
  }
  x->file = clang_getFile(x->tu, path);
  if (!x->file) {
    fprintf(stderr, "%s:1:1: error: %s does not include this file\n", path, unit);
    return -1;
  }
  pt_own_files(x, unit);
  return bad ? -1 : 0;
}

/* The output lines (1-based, inclusive) that edits touched, as clang-format
 * --lines options. */
static char *changed_lines(const char *res, const unsigned *spans, int nspans) {
  port_str o = {0};
  for (int i = 0; i < nspans; i++) {
    unsigned a = spans[2 * i], b = spans[2 * i + 1];
    unsigned la = 1, lb;
    for (unsigned j = 0; j < a && res[j]; j++) la += res[j] == '\n';
    lb = la;
    for (unsigned j = a; j < b && res[j]; j++) lb += res[j] == '\n';
    port_str_addf(&o, " --lines=%u:%u", la, lb);
  }
  return port_str_take(&o);
}

/* What one round of port_file holds: the edits, the macros, the scan. */
static void round_free(pt_ctx *x, tu_scan *s) {
  for (int i = 0; i < x->nedits; i++) free(x->edits[i].text);
  free(x->edits);
  free(x->macros);
  free(x->macro_reach);
  free(s->at);
  free(s->is_include);
  dispose(x);
}

int port_file(const port_options *o, const char *unit, const char *path, const char *const *args, int nargs, char **out,
              char **lines) {
  char *text = NULL;
  size_t len = 0;
  for (int round = 0; round < 16; round++) {
    pt_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.path = path;
    pt_fused_round();
    for (int i = 0; i < o->nactive; i++) x.double_active |= !strcmp(o->active[i], "double");
    if (parse(&x, unit, path, text, len, args, nargs) < 0) {
      free(text);
      dispose(&x);
      return -1;
    }
    size_t flen = 0;
    const char *fbuf = clang_getFileContents(x.tu, x.file, &flen);
    if (!text) {
      text = port_strndup(fbuf ? fbuf : "", fbuf ? flen : 0);
      len = fbuf ? flen : 0;
    }
    x.buf = text;
    x.len = len;
    pt_block_round(&x);
    CXCursor tu = clang_getTranslationUnitCursor(x.tu);
    pt_mpi_prescan(&x, tu);
    x.mpi_requests |= o->mpi_requests;
    x.mpi_messages |= o->mpi_messages;
    tu_scan s;
    memset(&s, 0, sizeof s);
    s.x = &x;
    /* Macro expansions first (sorted, with their reach), then the walk. */
    s.collect_only = 1;
    clang_visitChildren(tu, top_visit, &s);
    qsort(x.macros, (size_t)x.nmacros, sizeof *x.macros, macro_cmp);
    x.macro_reach = malloc(sizeof *x.macro_reach * ((size_t)x.nmacros + 1));
    for (int i = 0; i < x.nmacros; i++)
      x.macro_reach[i] = i && x.macro_reach[i - 1] > x.macros[i].e ? x.macro_reach[i - 1] : x.macros[i].e;
    s.collect_only = 0;
    clang_visitChildren(tu, top_visit, &s);

    int result = x.errors;
    if (x.block_redo && !x.errors && !x.nexpand) {
      /* A temporary could not be preaccumulated everywhere it is read: the
       * same text again, with it an ordinary variable. */
      round_free(&x, &s);
      continue;
    }
    if (x.nexpand > 0 && !x.errors) {
      /* Expand the requested macros in place and parse again. */
      port_str nt = {0};
      unsigned at = 0;
      int *order = x.expand;
      for (int i = 0; i < x.nexpand; i++)
        for (int j = i + 1; j < x.nexpand; j++)
          if (x.macros[order[j]].b < x.macros[order[i]].b) {
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
          }
      int failed = 0;
      for (int i = 0; i < x.nexpand; i++) {
        const pt_macro *m = &x.macros[order[i]];
        if (m->b < at) continue;
        char *ex = expand_macro(&x, m);
        if (!ex) {
          char *mname = pt_spelling(m->cur);
          pt_error(&x, m->cur, "%s",
                   !strcmp(mname, "assert")
                       ? "assert whose condition cannot be ported in place (only values are read there: active "
                         "arithmetic passed to a ported function, or a call that changes, is not); compute it "
                         "into a variable before the assert"
                       : "macro with active arithmetic that cannot be expanded in place (it uses # or ##, or "
                         "variadic arguments); write the expression out");
          free(mname);
          failed = 1;
          continue;
        }
        port_str_addn(&nt, text + at, m->b - at);
        port_str_add(&nt, ex);
        free(ex);
        at = m->e;
      }
      port_str_addn(&nt, text + at, len - at);
      if (!failed) {
        round_free(&x, &s);
        free(text);
        len = nt.n;
        text = port_str_take(&nt);
        continue;
      }
      /* A macro that cannot be expanded was reported: the rest of the port
       * is still written with --keep-going, the macro left as it is. */
      free(nt.s);
      result = x.errors;
    }

    pt_fused_commit(&x);
    /* Apply the edits. Nested edits (a type inside a rewritten expression) are
     * dropped: the outer one already carries them. */
    qsort(x.edits, (size_t)x.nedits, sizeof *x.edits, edit_cmp);
    port_str r = {0};
    unsigned at = 0;
    int changed = 0;
    /* The first use of Ariadne: an edit, or a request or message renamed below. */
    unsigned ren = (unsigned)len;
    static const char *const renamed[] = {"MPI_Request", "MPI_REQUEST_NULL", "MPI_Message", "MPI_MESSAGE_NULL"};
    for (int i = 0; i < 4; i++)
      if (i < 2 ? x.mpi_requests : x.mpi_messages) {
        unsigned r1 = find_ident(text, len, renamed[i]);
        ren = r1 < ren ? r1 : ren;
      }
    unsigned use = x.nedits > 0 && x.edits[0].b < ren ? x.edits[0].b : ren;
    int after_include = 0;
    unsigned insert_at = include_point(&s, text, len, use, &after_include);
    /* Requests and messages renamed below need ariadne_mpi.h too. */
    int renames = ren < len;
    int want_mpi = (x.uses_mpi || renames) && !s.has_ariadne_mpi;
    int want_core = !s.has_ariadne && !s.has_ariadne_mpi && !want_mpi;
    int inserted = 0;
    unsigned *spans = malloc(sizeof *spans * (2 * (size_t)x.nedits + 4));
    int nspans = 0;
    for (int i = 0; i <= x.nedits; i++) {
      unsigned b = i < x.nedits ? x.edits[i].b : (unsigned)len;
      if (i < x.nedits && b < at) continue;
      if (!inserted && insert_at <= b && (x.nedits > 0 || x.uses_mpi || renames)) {
        port_str_addn(&r, text + at, insert_at - at);
        at = insert_at;
        if (want_mpi || want_core) {
          const char *inc = want_mpi ? "#include <ariadne_mpi.h>" : "#include <ariadne.h>";
          if (after_include)
            port_str_addf(&r, "\n%s", inc);
          else
            port_str_addf(&r, "%s\n", inc);
        }
        inserted = 1;
      }
      if (i == x.nedits) break;
      port_str_addn(&r, text + at, b - at);
      spans[2 * nspans] = (unsigned)r.n;
      port_str_add(&r, x.edits[i].text);
      spans[2 * nspans + 1] = (unsigned)r.n;
      nspans++;
      at = x.edits[i].e;
      changed = 1;
    }
    port_str_addn(&r, text + at, len - at);
    (void)changed;
    char *res = port_str_take(&r);
    if (x.mpi_requests) {
      char *t1 = rename_ident(res, "MPI_Request", "ad_mpi_request");
      char *t2 = rename_ident(t1, "MPI_REQUEST_NULL", "(ad_mpi_request)AD_MPI_REQUEST_NULL");
      free(res);
      free(t1);
      res = t2;
    }
    if (x.mpi_messages) {
      char *t1 = rename_ident(res, "MPI_Message", "ad_mpi_message");
      char *t2 = rename_ident(t1, "MPI_MESSAGE_NULL", "(ad_mpi_message)AD_MPI_MESSAGE_NULL");
      free(res);
      free(t1);
      res = t2;
    }
    if (x.nedits > 0) {
      char *g = guard_openmp(res);
      free(res);
      res = g;
    }
    *lines = changed_lines(res, spans, nspans);
    free(spans);
    round_free(&x, &s);
    free(text);
    *out = res;
    return result;
  }
  free(text);
  fprintf(stderr, "%s:1:1: error: macros nest too deeply to be expanded\n", path);
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Several inputs                                                            */
/* ------------------------------------------------------------------------ */

typedef struct collect {
  port_options *o;
  pt_ctx *x;
} collect;

static void add_name(char ***v, int *n, const char *name) {
  for (int i = 0; i < *n; i++)
    if (!strcmp((*v)[i], name)) return;
  *v = realloc(*v, sizeof **v * ((size_t)*n + 1));
  if (!*v) abort();
  (*v)[(*n)++] = port_strdup(name);
}

static enum CXChildVisitResult collect_visit(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  collect *k = d;
  /* A global another input uses through an extern declaration gets the
   * suffix there too. */
  if (clang_getCursorKind(c) == CXCursor_VarDecl && clang_isCursorDefinition(c) &&
      clang_getCursorLinkage(c) == CXLinkage_External && pt_own_location(k->x, clang_getCursorLocation(c))) {
    char *name = pt_spelling(c);
    add_name(&k->o->globals, &k->o->nglobals, name);
    free(name);
  }
  if (clang_getCursorKind(c) != CXCursor_FunctionDecl) return CXChildVisit_Continue;
  if (!pt_own_location(k->x, clang_getCursorLocation(c))) return CXChildVisit_Continue;
  /* Definitions only: a declaration says nothing about the code it links
   * against. Static definitions count too, for the static (inline) helpers
   * of a header that is an input. */
  if (!clang_isCursorDefinition(c)) return CXChildVisit_Continue;
  CXString s = clang_getCursorSpelling(c);
  const char *name = clang_getCString(s);
  if (strcmp(name, "main")) port_add_ported(k->o, name);
  clang_disposeString(s);
  return CXChildVisit_Continue;
}

void port_add_ported(port_options *o, const char *name) { add_name(&o->ported, &o->nported, name); }

int port_collect_functions(port_options *o, const char *unit, const char *path, const char *const *args, int nargs) {
  pt_ctx x;
  memset(&x, 0, sizeof x);
  x.o = o;
  if (parse(&x, unit, path, NULL, 0, args, nargs) < 0) {
    dispose(&x);
    return -1;
  }
  collect k = {o, &x};
  clang_visitChildren(clang_getTranslationUnitCursor(x.tu), collect_visit, &k);
  for (int i = 0; i < o->nactive; i++) x.double_active |= !strcmp(o->active[i], "double");
  pt_mpi_prescan(&x, clang_getTranslationUnitCursor(x.tu));
  o->mpi_requests |= x.mpi_requests;
  o->mpi_messages |= x.mpi_messages;
  dispose(&x);
  return 0;
}
