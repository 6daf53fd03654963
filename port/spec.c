/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --fused: statements a loop body records before an early exit whose values
 * then reach nothing are taken back when the exit is taken.
 *
 *   for (...) {                          for (...) { ad__spec ad__spec12 = ad__spec_mark();
 *     double d[3]; double r2 = 0.0;        double d[3]; double r2 = 0.0;
 *     for (m = 0; m < 3; m++) {...}        for (m = 0; m < 3; m++) {...}
 *     if (r2 > rc2) continue;              if (r2 > rc2) { ad__spec_drop(&ad__spec12); continue; }
 *     ...                                  ...
 *   }                                    }
 *
 * The same for `break`, and for a body that ends in `if (c) { ... }` with no
 * else (the drop becomes the else). It is right when everything the body
 * does before the exit stores active values only into variables declared in
 * the body (whose lifetime the exit ends) and calls nothing but the math
 * functions: then no value recorded since the mark survives the jump, and
 * the pair rejected by a cutoff costs no tape. The runtime keeps what it
 * cannot take back safely (a special record in between, a new block, a
 * watching tape), so the drop is always an optimisation, never a change of
 * the derivative. A temporary that block.c preaccumulates is a local of the
 * block that assigns it, whatever its declaration says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

typedef struct scan {
  pt_ctx *x;
  unsigned b, e; /* the loop body's extent */
  int safe;
  int records; /* an active value is computed and stored (something is taped) */
} scan;

/* Is d a variable of automatic storage declared inside the body [b, e)? */
static int body_local(unsigned b, unsigned e, CXCursor d) {
  if (clang_getCursorKind(d) != CXCursor_VarDecl) return 0;
  enum CX_StorageClass sc = clang_Cursor_getStorageClass(d);
  if (sc != CX_SC_None && sc != CX_SC_Auto && sc != CX_SC_Register) return 0;
  unsigned at = pt_off(clang_getCursorLocation(d));
  return at > b && at < e;
}

/* The variable at the root of an lvalue reached through `.` and array
 * subscripts (not through a pointer), or null. */
static CXCursor lvalue_root(CXCursor lv) {
  CXCursor ref = pt_strip(lv);
  for (int guard = 0; guard < 16; guard++) {
    enum CXCursorKind k = clang_getCursorKind(ref);
    if (k == CXCursor_DeclRefExpr) return clang_getCursorReferenced(ref);
    if (k != CXCursor_ArraySubscriptExpr && k != CXCursor_MemberRefExpr) break;
    CXCursor *kk;
    int n = pt_children(ref, &kk);
    CXCursor base = n >= 1 ? pt_strip(kk[0]) : clang_getNullCursor();
    free(kk);
    if (clang_Cursor_isNull(base) || clang_getCanonicalType(clang_getCursorType(base)).kind == CXType_Pointer) break;
    ref = base;
  }
  return clang_getNullCursor();
}

/* A store to lhs: passive storage may be anything; active storage must be
 * a body local, an element of a body-local array or a member of a body-local
 * structure (never through a pointer). */
static void store(scan *s, CXCursor lhs) {
  CXType t = clang_getCursorType(lhs);
  CXCursor root = lvalue_root(lhs);
  if (!clang_Cursor_isNull(root) && pt_local_passive(s->x, root)) return;
  if (!pt_is_float(t) && !pt_type_holds_active(s->x, t)) return;
  s->records = 1;
  if (clang_Cursor_isNull(root) || !body_local(s->b, s->e, root)) s->safe = 0;
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data);

static void walk(scan *s, CXCursor c) {
  enum CXCursorKind k = clang_getCursorKind(c);
  switch (k) {
  case CXCursor_LabelStmt:
  case CXCursor_CaseStmt:
  case CXCursor_DefaultStmt:
  case CXCursor_GotoStmt:
  case CXCursor_IndirectGotoStmt:
  case CXCursor_GCCAsmStmt:
  case CXCursor_MSAsmStmt:
    s->safe = 0;
    return;
  case CXCursor_VarDecl: {
    enum CX_StorageClass sc = clang_Cursor_getStorageClass(c);
    if (sc != CX_SC_None && sc != CX_SC_Auto && sc != CX_SC_Register) s->safe = 0;
    if (pt_type_holds_active(s->x, clang_getCursorType(c)) && !pt_local_passive(s->x, c) &&
        !clang_Cursor_isNull(clang_Cursor_getVarDeclInitializer(c)))
      s->records = 1;
    break;
  }
  case CXCursor_CallExpr: {
    CXCursor fd = clang_getCursorReferenced(c);
    char *name = clang_getCursorKind(fd) == CXCursor_FunctionDecl ? pt_spelling(fd) : NULL;
    if (!name || !pt_math_twin(name)) s->safe = 0;
    free(name);
    break;
  }
  case CXCursor_BinaryOperator:
  case CXCursor_CompoundAssignOperator: {
    const char *op = k == CXCursor_BinaryOperator ? pt_binop(s->x, c) : "op=";
    if (!strcmp(op, "?")) s->safe = 0;
    CXCursor *kk;
    int n = pt_children(c, &kk);
    /* The assignment that defines a preaccumulated temporary declares it here. */
    if (n == 2 && (!strcmp(op, "=") || !strcmp(op, "op=")) && pt_block_assign_temp(c) < 0) store(s, kk[0]);
    free(kk);
    break;
  }
  case CXCursor_UnaryOperator: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    if (n == 1) {
      const char *op = pt_unop(s->x, c, kk[0]);
      if (!strcmp(op, "?"))
        s->safe = 0;
      else if (!strcmp(op, "++") || !strcmp(op, "--") || !strcmp(op, "p++") || !strcmp(op, "p--"))
        store(s, kk[0]);
      else if (!strcmp(op, "&") && pt_type_holds_active(s->x, clang_getCursorType(kk[0])))
        s->safe = 0; /* the address of active storage may outlive the body */
    }
    free(kk);
    break;
  }
  default:
    break;
  }
  if (s->safe) clang_visitChildren(c, visit, s);
}

static enum CXChildVisitResult visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  scan *s = data;
  walk(s, c);
  return s->safe ? CXChildVisit_Continue : CXChildVisit_Break;
}

/* The offset just past the `;` that ends the statement ending at `end`, or 0. */
static unsigned past_semicolon(pt_ctx *x, unsigned end) {
  while (end < x->len && (x->buf[end] == ' ' || x->buf[end] == '\t' || x->buf[end] == '\n')) end++;
  return end < x->len && x->buf[end] == ';' ? end + 1 : 0;
}

/* `continue;` or `break;`, alone or alone in braces: the jump, else null. */
static CXCursor early_jump(CXCursor then) {
  enum CXCursorKind k = clang_getCursorKind(then);
  if (k == CXCursor_ContinueStmt || k == CXCursor_BreakStmt) return then;
  if (k != CXCursor_CompoundStmt) return clang_getNullCursor();
  CXCursor *kk;
  int n = pt_children(then, &kk);
  CXCursor j = n == 1 ? early_jump(kk[0]) : clang_getNullCursor();
  free(kk);
  return clang_getCursorKind(j) == CXCursor_CompoundStmt ? clang_getNullCursor() : j;
}

/* The passive twin of a region (clone below): the region's own text with
 * each read of active storage from outside the body as ad_value(...) and
 * each active local declared double, so that it computes the original's
 * values and takes its exits without recording anything. */
typedef struct twin {
  pt_ctx *x;
  unsigned b, e; /* the loop body */
  int ok;
  pt_edit *ed;
  int n, cap;
} twin;

static void twin_edit(twin *w, unsigned b, unsigned e, char *text) {
  if (w->n == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 16;
    w->ed = realloc(w->ed, (size_t)w->cap * sizeof *w->ed);
    if (!w->ed) abort();
  }
  w->ed[w->n].b = b;
  w->ed[w->n].e = e;
  w->ed[w->n].text = text;
  w->n++;
}

static int active_scalar(pt_ctx *x, CXType t) { return pt_is_float(t) && pt_type_active(x, t); }

/* An active scalar, or an array of them: what a twin declares double. */
static int active_scalar_or_array(CXType t) {
  t = clang_getCanonicalType(t);
  while (t.kind == CXType_ConstantArray) t = clang_getCanonicalType(clang_getArrayElementType(t));
  return t.kind == CXType_Double;
}

static enum CXChildVisitResult twin_visit(CXCursor c, CXCursor parent, CXClientData data);

/* A local of the body that the twin declares double (and renames). */
static int twin_local(const twin *w, CXCursor d) {
  return body_local(w->b, w->e, d) && pt_type_holds_active(w->x, clang_getCursorType(d));
}

static enum CXChildVisitResult twin_renamed(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  void **d = data;
  if (clang_getCursorKind(c) == CXCursor_DeclRefExpr && twin_local(d[0], clang_getCursorReferenced(c))) {
    *(int *)d[1] = 1;
    return CXChildVisit_Break;
  }
  return CXChildVisit_Recurse;
}

/* `T name[...]` of the declaration ds as double with the dimensions of its
 * type (which a typedef may hold: `real3 d;` is `double d[3]`). */
static void twin_decl(twin *w, CXCursor ds, CXCursor v) {
  pt_ctx *x = w->x;
  char *name = pt_spelling(v);
  unsigned p = pt_off(clang_getCursorLocation(v)) + (unsigned)strlen(name);
  for (;;) { /* past the declarator's own dimensions */
    unsigned q = p;
    while (q < x->len && (x->buf[q] == ' ' || x->buf[q] == '\t')) q++;
    if (q >= x->len || x->buf[q] != '[') break;
    while (q < x->len && x->buf[q] != ']') q++;
    p = q + 1;
  }
  port_str d = {0};
  port_str_addf(&d, "double ad__s_%s", name);
  free(name);
  for (CXType t = clang_getCanonicalType(clang_getCursorType(v)); t.kind != CXType_Double;
       t = clang_getCanonicalType(clang_getArrayElementType(t))) {
    if (t.kind != CXType_ConstantArray) {
      w->ok = 0;
      break;
    }
    port_str_addf(&d, "[%lld]", clang_getArraySize(t));
  }
  twin_edit(w, pt_b(ds), p, port_str_take(&d));
}

static void twin_walk(twin *w, CXCursor c) {
  pt_ctx *x = w->x;
  enum CXCursorKind k = clang_getCursorKind(c);
  if (pt_in_macro(x, c)) {
    w->ok = 0; /* a macro's expansion is not in the text a twin copies */
    return;
  }
  switch (k) {
  case CXCursor_DeclStmt: {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int active = 0;
    for (int i = 0; i < n; i++)
      if (clang_getCursorKind(kk[i]) == CXCursor_VarDecl && pt_type_holds_active(x, clang_getCursorType(kk[i])))
        active = 1;
    if (active) {
      /* One active scalar or array: its type (whatever the text calls it) is double. */
      if (n != 1 || clang_getCursorKind(kk[0]) != CXCursor_VarDecl ||
          !active_scalar_or_array(clang_getCursorType(kk[0])))
        w->ok = 0;
      else
        twin_decl(w, c, kk[0]);
    }
    free(kk);
    break;
  }
  case CXCursor_BinaryOperator:
  case CXCursor_CompoundAssignOperator:
  case CXCursor_UnaryOperator: {
    /* Every store, passive ones too, goes to a local of the body: the twin
     * runs before the body and must change nothing else. */
    CXCursor *kk;
    int n = pt_children(c, &kk);
    const char *op = k == CXCursor_BinaryOperator     ? pt_binop(x, c)
                     : k == CXCursor_UnaryOperator && n == 1 ? pt_unop(x, c, kk[0])
                                                           : "op=";
    int stores = !strcmp(op, "=") || !strcmp(op, "op=") || !strcmp(op, "++") || !strcmp(op, "--") ||
                 !strcmp(op, "p++") || !strcmp(op, "p--");
    if (stores && n >= 1) {
      CXCursor root = lvalue_root(kk[0]);
      if (clang_Cursor_isNull(root) || !body_local(w->b, w->e, root) || pt_block_assign_temp(c) >= 0)
        w->ok = 0;
    }
    if (!strcmp(op, "&")) w->ok = 0;
    free(kk);
    break;
  }
  case CXCursor_CStyleCastExpr:
  case CXCursor_CompoundLiteralExpr:
  case CXCursor_UnaryExpr: /* sizeof: an active type's size differs from double's */
    if (pt_type_holds_active(x, clang_getCursorType(c))) w->ok = 0;
    if (k == CXCursor_UnaryExpr) w->ok = 0;
    break;
  case CXCursor_DeclRefExpr:
  case CXCursor_ArraySubscriptExpr:
  case CXCursor_MemberRefExpr: {
    if (k == CXCursor_DeclRefExpr && twin_local(w, clang_getCursorReferenced(c))) {
      /* A local the twin declares double: under a name of the port's own,
       * which porting the output again leaves as it is. */
      char *name = pt_spelling(clang_getCursorReferenced(c));
      twin_edit(w, pt_b(c), pt_e(c), pt_cat("ad__s_", name, ""));
      free(name);
      return;
    }
    if (!active_scalar(x, clang_getCursorType(c))) break;
    CXCursor root = lvalue_root(c);
    if (!clang_Cursor_isNull(root) && body_local(w->b, w->e, root)) break;
    /* Active storage from outside the body: its value, as the port writes
     * it (which must not name a local the twin renames). */
    int renamed = 0;
    clang_visitChildren(c, twin_renamed, &(void *[2]){w, &renamed});
    if (renamed) {
      w->ok = 0;
      return;
    }
    char *t = pt_emit(x, c, 0);
    twin_edit(w, pt_b(c), pt_e(c), pt_cat("ad_value(", t, ")"));
    free(t);
    return;
  }
  default:
    break;
  }
  if (w->ok) clang_visitChildren(c, twin_visit, w);
}

static enum CXChildVisitResult twin_visit(CXCursor c, CXCursor parent, CXClientData data) {
  (void)parent;
  twin *w = data;
  twin_walk(w, c);
  return w->ok ? CXChildVisit_Continue : CXChildVisit_Break;
}

static int edit_order(const void *a, const void *b) {
  const pt_edit *p = a, *q = b;
  return p->b < q->b ? -1 : p->b > q->b;
}

/* The twin of the body's statements st[0..n) whose text ends at `end`, as a
 * block; NULL if a statement is not one a twin can copy. */
static char *twin_of(pt_ctx *x, unsigned body_b, unsigned body_e, CXCursor *st, int n, unsigned end) {
  twin w = {x, body_b, body_e, 1, NULL, 0, 0};
  for (int i = 0; i < n && w.ok; i++) twin_walk(&w, st[i]);
  unsigned b = pt_b(st[0]);
  for (unsigned p = b; p < end && w.ok; p++)
    if (x->buf[p] == '#') w.ok = 0; /* a directive (or a stringizing macro) inside */
  char *out = NULL;
  if (w.ok) {
    qsort(w.ed, (size_t)w.n, sizeof *w.ed, edit_order);
    port_str r = {0};
    port_str_add(&r, "{ ");
    unsigned at = b;
    for (int i = 0; i < w.n; i++) {
      if (w.ed[i].b < at) continue; /* inside one already replaced */
      port_str_addn(&r, x->buf + at, w.ed[i].b - at);
      port_str_add(&r, w.ed[i].text);
      at = w.ed[i].e;
    }
    port_str_addn(&r, x->buf + at, end - at);
    port_str_add(&r, " }");
    out = port_str_take(&r);
  }
  for (int i = 0; i < w.n; i++) free(w.ed[i].text);
  free(w.ed);
  return out;
}

static void report(pt_ctx *x, CXCursor at, const char *what) {
  unsigned line, col;
  clang_getExpansionLocation(clang_getCursorLocation(at), NULL, &line, &col, NULL);
  pt_fused_note(x, "%s:%u:%u: taken back: %s\n", x->path, line, col, what);
}

void pt_spec_loop(pt_ctx *x, CXCursor loop) {
  if (!x->o->fused) return;
  CXCursor *kk;
  int n = pt_children(loop, &kk);
  enum CXCursorKind lk = clang_getCursorKind(loop);
  CXCursor body = n == 0 ? clang_getNullCursor() : lk == CXCursor_DoStmt ? kk[0] : kk[n - 1];
  free(kk);
  if (clang_getCursorKind(body) != CXCursor_CompoundStmt || pt_in_macro(x, body) || x->buf[pt_b(body)] != '{') return;
  scan s = {x, pt_b(body), pt_e(body), 1, 0};
  CXCursor *st;
  int ns = pt_children(body, &st);
  char mark[48];
  snprintf(mark, sizeof mark, "ad__spec%u", s.b);
  int drops = 0, twin_n = 0;
  unsigned twin_end = 0;
  for (int i = 0; i < ns && s.safe; i++) {
    CXCursor *ik;
    int ni = clang_getCursorKind(st[i]) == CXCursor_IfStmt ? pt_children(st[i], &ik) : 0;
    CXCursor jump = ni == 2 ? early_jump(ik[1]) : clang_getNullCursor();
    int last = ni == 2 && i == ns - 1 && clang_getCursorKind(ik[1]) == CXCursor_CompoundStmt;
    if ((!clang_Cursor_isNull(jump) || last) && s.records && !pt_in_macro(x, st[i])) {
      scan cond = s;
      walk(&cond, ik[0]);
      if (cond.safe && !clang_Cursor_isNull(jump) && !pt_in_macro(x, jump)) {
        unsigned semi = past_semicolon(x, pt_e(jump));
        if (semi) {
          twin_n = i + 1;
          twin_end = semi;
          port_str d = {0};
          port_str_addf(&d, "{ ad__spec_drop(&%s); ", mark);
          pt_add_edit(x, pt_b(jump), pt_b(jump), port_str_take(&d));
          pt_add_edit(x, semi, semi, pt_cat(" }", "", ""));
          report(x, jump, clang_getCursorKind(jump) == CXCursor_BreakStmt
                              ? "what the loop body recorded before this `break` when it is taken"
                              : "what the loop body recorded before this `continue` when it is taken");
          drops++;
        }
      } else if (cond.safe && last && x->buf[pt_e(ik[1]) - 1] == '}') {
        port_str d = {0};
        port_str_addf(&d, " else ad__spec_drop(&%s);", mark);
        pt_add_edit(x, pt_e(ik[1]), pt_e(ik[1]), port_str_take(&d));
        report(x, st[i], "what the loop body recorded before this `if` when its condition is false");
        drops++;
      }
    }
    if (ni) free(ik);
    walk(&s, st[i]);
  }
  /* The statements up to the last early exit run first on values alone:
   * a pair that the twin rejects records nothing at all. */
  char *tw = twin_n ? twin_of(x, s.b, s.e, st, twin_n, twin_end) : NULL;
  if (tw) report(x, st[twin_n - 1], "the loop body up to this exit is tried first on values, recording nothing");
  free(st);
  if (!drops) return;
  port_str m = {0};
  port_str_addf(&m, " %s ad__spec %s = ad__spec_mark();", tw ? tw : "", mark);
  free(tw);
  pt_add_edit(x, s.b + 1, s.b + 1, port_str_take(&m));
}
