/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --fused preaccumulation: local temporaries that are not taped.
 *
 * A temporary is a local scalar of the active type declared with an
 * initializer (`double dx = x[i] - x[j];`), alone in its declaration, that is
 * never assigned again, incremented or addressed. A variable declared without
 * an initializer in an enclosing block is one too when a single statement of
 * an inner block assigns it (`r2 = dx * dx + dy * dy;`) and every read comes
 * after that statement in the same block, with no label between that a jump
 * could enter by: the port then declares the temporary at the assignment,
 * shadowing the variable for the rest of the block, which is exactly where it
 * is read. The fused port computes its
 * value as a double, together with its partials with respect to the active
 * operands it reads (captured as ad_real copies at the declaration, so that a
 * later store to those operands changes nothing), and tapes nothing. A
 * statement that reads it folds those partials into its own: the statement
 * that leaves the block (a store to an array, to a variable that is not a
 * temporary, a return) is one tape statement over the block's inputs, and a
 * value used only in comparisons (`if (r2 > rcut2) continue;`) costs no tape.
 *
 * Every active read of a temporary must therefore land in a statement that
 * the fused form generates; a read compared directly (`r2 > rcut2`) only
 * needs the value. The plan counts the reads each temporary must have handled;
 * a temporary whose reads were not all handled (a statement the fused form
 * could not generate, a read inside a macro, a cast) is demoted after the
 * walk and the round runs again with it an ordinary active variable, so the
 * port never loses a derivative to a temporary.
 *
 * Operands are deduplicated across the block by their text and an epoch: the
 * epoch advances after every statement that is not a temporary's declaration
 * and before every statement that can be entered other than from the one
 * before it (blocks, loops, branches, labels), so two reads share an argument
 * only when no store can come between them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

typedef struct btemp {
  CXCursor decl;
  unsigned off; /* the declaration's offset in the text (the demotion key) */
  int expected; /* active reads to be folded into generated statements */
  int handled;
  int generated;
  int taped; /* generated as an ordinary taped variable (fused.c chose it): its reads need nothing */
  int id;    /* ad__t<id>_ names */
  int assigned;          /* defined by an assignment statement, not by the declaration */
  unsigned asg_b, asg_e; /* that assignment's extent */
  unsigned scope_e;      /* the end of the block that holds it: the reads come before */
  int nargs;
  char **args; /* the captured operands, as the port writes them */
  char **keys; /* their epoch-qualified texts (NULL: never shared) */
  unsigned line, col;
} btemp;

static struct {
  btemp *t;
  int n, cap;
  long epoch;
  int next_id;
  /* Demoted declarations (offsets) of the current text. */
  unsigned *demoted;
  int ndemoted, capdemoted;
  unsigned long text_hash;
  size_t text_len;
  int same_text; /* rounds over the same text so far */
} B;

static void temps_free(void) {
  for (int i = 0; i < B.n; i++) {
    for (int k = 0; k < B.t[i].nargs; k++) {
      free(B.t[i].args[k]);
      free(B.t[i].keys[k]);
    }
    free(B.t[i].args);
    free(B.t[i].keys);
  }
  B.n = 0;
}

void pt_block_round(pt_ctx *x) {
  unsigned long h = 1469598103934665603ul;
  for (size_t i = 0; i < x->len; i++) h = (h ^ (unsigned char)x->buf[i]) * 1099511628211ul;
  if (h != B.text_hash || x->len != B.text_len) {
    B.ndemoted = 0; /* new text: offsets moved */
    B.same_text = 0;
  } else {
    B.same_text++;
  }
  B.text_hash = h;
  B.text_len = x->len;
  temps_free();
  B.next_id = 0;
  B.epoch = 0;
}

static int demoted(unsigned off) {
  for (int i = 0; i < B.ndemoted; i++)
    if (B.demoted[i] == off) return 1;
  return 0;
}

static void demote(unsigned off) {
  if (demoted(off)) return;
  if (B.ndemoted == B.capdemoted) {
    B.capdemoted = B.capdemoted ? 2 * B.capdemoted : 16;
    B.demoted = realloc(B.demoted, (size_t)B.capdemoted * sizeof *B.demoted);
    if (!B.demoted) abort();
  }
  B.demoted[B.ndemoted++] = off;
}

static int find_temp(CXCursor d) {
  if (clang_getCursorKind(d) != CXCursor_VarDecl) return -1;
  unsigned off = pt_off(clang_getCursorLocation(d));
  for (int i = 0; i < B.n; i++)
    if (B.t[i].off == off && clang_equalCursors(B.t[i].decl, d)) return i;
  return -1;
}

/* The initializer of v when it is written `name = init` (not an array, not
 * a list, not inside a macro). */
CXCursor pt_block_init(pt_ctx *x, CXCursor v) {
  CXCursor none = clang_getNullCursor();
  unsigned name = pt_off(clang_getCursorLocation(v));
  CXString sp = clang_getCursorSpelling(v);
  unsigned name_end = name + (unsigned)strlen(clang_getCString(sp));
  clang_disposeString(sp);
  if (name_end >= x->len || x->buf[name_end] == '[') return none;
  unsigned eq = name_end;
  while (eq < x->len && (x->buf[eq] == ' ' || x->buf[eq] == '\t')) eq++;
  if (eq >= x->len || x->buf[eq] != '=') return none;
  CXCursor *k;
  int n = pt_children(v, &k);
  CXCursor init = none;
  for (int i = 0; i < n; i++)
    if (clang_isExpression(clang_getCursorKind(k[i])) && pt_b(k[i]) > eq) init = k[i];
  free(k);
  return init;
}

static btemp *add_temp(CXCursor v, unsigned off) {
  if (B.n == B.cap) {
    B.cap = B.cap ? 2 * B.cap : 32;
    B.t = realloc(B.t, (size_t)B.cap * sizeof *B.t);
    if (!B.t) abort();
  }
  btemp *b = &B.t[B.n++];
  memset(b, 0, sizeof *b);
  b->decl = v;
  b->off = off;
  b->id = -1;
  return b;
}

/* A declaration statement in a block that may declare a temporary. */
static void consider(pt_ctx *x, CXCursor ds) {
  CXCursor *k;
  int n = pt_children(ds, &k);
  CXCursor v = n == 1 ? k[0] : clang_getNullCursor();
  free(k);
  if (clang_Cursor_isNull(v) || clang_getCursorKind(v) != CXCursor_VarDecl || pt_in_macro(x, ds)) return;
  CXType t = clang_getCursorType(v);
  enum CX_StorageClass sc = clang_Cursor_getStorageClass(v);
  if (!pt_is_float(t) || !pt_type_active(x, t) || pt_local_passive(x, v) ||
      (sc != CX_SC_None && sc != CX_SC_Auto && sc != CX_SC_Register))
    return;
  if (clang_Cursor_isNull(pt_block_init(x, v))) return;
  unsigned off = pt_off(clang_getCursorLocation(v));
  if (demoted(off)) return;
  btemp *b = add_temp(v, off);
  clang_getExpansionLocation(clang_getCursorLocation(v), NULL, &b->line, &b->col, NULL);
}

/* A label, case or default in c at or after offset `from`: a jump there
 * would skip an assignment before it. */
static int label_after(CXCursor c, unsigned from) {
  enum CXCursorKind k = clang_getCursorKind(c);
  if ((k == CXCursor_LabelStmt || k == CXCursor_CaseStmt || k == CXCursor_DefaultStmt) && pt_b(c) >= from) return 1;
  CXCursor *kk;
  int n = pt_children(c, &kk);
  int found = 0;
  for (int i = 0; i < n && !found; i++) found = label_after(kk[i], from);
  free(kk);
  return found;
}

/* An expression statement of a block that may define a temporary by
 * assignment: `v = rhs;` of a local declared, without an initializer, in an
 * enclosing block (so that a declaration here may shadow it). */
static void consider_assign(pt_ctx *x, CXCursor block, CXCursor *stmts, int nstmts, int at) {
  CXCursor e = stmts[at];
  if (clang_getCursorKind(e) != CXCursor_BinaryOperator || pt_in_macro(x, e) || strcmp(pt_binop(x, e), "=")) return;
  CXCursor *k;
  int n = pt_children(e, &k);
  CXCursor lhs = n == 2 ? k[0] : clang_getNullCursor();
  free(k);
  if (clang_Cursor_isNull(lhs) || clang_getCursorKind(lhs) != CXCursor_DeclRefExpr) return;
  CXCursor v = clang_getCursorReferenced(lhs);
  if (clang_getCursorKind(v) != CXCursor_VarDecl) return;
  CXType t = clang_getCursorType(v);
  enum CX_StorageClass sc = clang_Cursor_getStorageClass(v);
  if (!pt_is_float(t) || !pt_type_active(x, t) || pt_local_passive(x, v) || pt_in_macro(x, v) ||
      (sc != CX_SC_None && sc != CX_SC_Auto && sc != CX_SC_Register) ||
      clang_getCursorKind(clang_getCursorSemanticParent(v)) == CXCursor_TranslationUnit)
    return;
  int n_init = pt_children(v, &k);
  int has_init = 0;
  for (int i = 0; i < n_init; i++) has_init |= clang_isExpression(clang_getCursorKind(k[i]));
  free(k);
  if (has_init) return;
  /* A name this very block declares (v itself, or another variable declared
   * after the assignment): a second declaration here would be an error. */
  char *name = pt_spelling(v);
  int here = 0;
  for (int i = 0; i < nstmts && !here; i++) {
    if (clang_getCursorKind(stmts[i]) != CXCursor_DeclStmt) continue;
    int nd = pt_children(stmts[i], &k);
    for (int j = 0; j < nd; j++) {
      char *other = pt_spelling(k[j]);
      here |= !strcmp(other, name);
      free(other);
    }
    free(k);
  }
  free(name);
  if (here) return;
  unsigned off = pt_off(clang_getCursorLocation(v));
  if (demoted(off) || label_after(block, pt_e(e))) return;
  btemp *b = add_temp(v, off);
  b->assigned = 1;
  b->asg_b = pt_b(e);
  b->asg_e = pt_e(e);
  b->scope_e = pt_e(block);
  clang_getExpansionLocation(clang_getCursorLocation(e), NULL, &b->line, &b->col, NULL);
}

static void collect(pt_ctx *x, CXCursor c) {
  CXCursor *k;
  int n = pt_children(c, &k);
  int block = clang_getCursorKind(c) == CXCursor_CompoundStmt;
  for (int i = 0; i < n; i++) {
    if (block && clang_getCursorKind(k[i]) == CXCursor_DeclStmt) consider(x, k[i]);
    if (block && x->o->fused) consider_assign(x, c, k, n, i);
    collect(x, k[i]);
  }
  free(k);
}

static int temp_of(CXCursor e) {
  e = pt_strip(e);
  if (clang_getCursorKind(e) != CXCursor_DeclRefExpr) return -1;
  return find_temp(clang_getCursorReferenced(e));
}

static int is_comparison(const char *op) {
  return !strcmp(op, "<") || !strcmp(op, ">") || !strcmp(op, "<=") || !strcmp(op, ">=") || !strcmp(op, "==") ||
         !strcmp(op, "!=");
}

/* Count the reads: `compared` says the expression is an operand of a
 * comparison (through parentheses and conversions only). */
static void reads(pt_ctx *x, CXCursor c, int compared) {
  enum CXCursorKind kind = clang_getCursorKind(c);
  CXCursor *k;
  int n = pt_children(c, &k);
  if (kind == CXCursor_DeclRefExpr) {
    int i = find_temp(clang_getCursorReferenced(c));
    /* A temporary defined by assignment is read only after it, in its block. */
    if (i >= 0 && B.t[i].assigned && (pt_b(c) < B.t[i].asg_e || pt_b(c) >= B.t[i].scope_e)) demote(B.t[i].off);
    if (i >= 0 && !compared) B.t[i].expected++;
  } else if ((kind == CXCursor_BinaryOperator || kind == CXCursor_CompoundAssignOperator) && n == 2) {
    const char *op = kind == CXCursor_BinaryOperator ? pt_binop(x, c) : "op=";
    int i = temp_of(k[0]);
    if (i >= 0 && B.t[i].assigned && !strcmp(op, "=") && pt_b(c) == B.t[i].asg_b) {
      reads(x, k[1], 0); /* the defining assignment: only its right-hand side reads */
      free(k);
      return;
    }
    if (i >= 0 && (!strcmp(op, "=") || !strcmp(op, "op="))) demote(B.t[i].off); /* assigned again */
    int cmp = kind == CXCursor_BinaryOperator && is_comparison(op);
    for (int j = 0; j < n; j++) reads(x, k[j], cmp);
    free(k);
    return;
  } else if (kind == CXCursor_UnaryOperator && n == 1) {
    const char *op = pt_unop(x, c, k[0]);
    int i = temp_of(k[0]);
    if (i >= 0 && (!strcmp(op, "++") || !strcmp(op, "--") || !strcmp(op, "&"))) demote(B.t[i].off);
  } else if (pt_in_macro(x, c) && kind != CXCursor_UnexposedExpr && kind != CXCursor_ParenExpr) {
    compared = 0; /* what a macro writes cannot be read back here */
  }
  int keep = kind == CXCursor_UnexposedExpr || kind == CXCursor_ParenExpr;
  for (int j = 0; j < n; j++) reads(x, k[j], keep && compared);
  free(k);
}

void pt_block_plan(pt_ctx *x, CXCursor body) {
  temps_free();
  /* Demotions come all at once after a round, so a second round nearly
   * always suffices; should they keep coming, port_file's rounds (16) must
   * not run out: the last ones preaccumulate nothing. */
  if (!x->o->fused || B.same_text >= 8) return;
  collect(x, body);
  reads(x, body, 0);
  /* Those assigned, incremented or addressed were demoted by the scan. */
  int m = 0;
  for (int i = 0; i < B.n; i++) {
    if (demoted(B.t[i].off)) continue;
    B.t[m++] = B.t[i];
  }
  B.n = m;
}

int pt_block_end(pt_ctx *x) {
  int redo = 0;
  for (int i = 0; i < B.n; i++) {
    btemp *b = &B.t[i];
    if (b->taped) continue;
    if (b->generated && b->handled == b->expected) {
      pt_fused_preaccumulated(x, b->decl, b->line, b->col, b->nargs, b->expected);
      continue;
    }
    demote(b->off);
    redo = 1;
  }
  temps_free();
  return redo;
}

int pt_block_temp(CXCursor d) { return find_temp(d); }

int pt_block_assign_temp(CXCursor stmt) {
  if (clang_getCursorKind(stmt) != CXCursor_BinaryOperator) return -1;
  unsigned b = pt_b(stmt);
  for (int i = 0; i < B.n; i++)
    if (B.t[i].assigned && B.t[i].asg_b == b) return i;
  return -1;
}

long pt_block_epoch(void) { return B.epoch; }

/* Statements that can be entered other than from the one before them. */
void pt_block_stmt(CXCursor c, int end) {
  enum CXCursorKind k = clang_getCursorKind(c);
  if (!end) {
    if (k != CXCursor_DeclStmt && !clang_isExpression(k)) B.epoch++;
    return;
  }
  if (k == CXCursor_DeclStmt) {
    CXCursor *kk;
    int n = pt_children(c, &kk);
    int temp = n == 1 && find_temp(kk[0]) >= 0 && !B.t[find_temp(kk[0])].assigned;
    free(kk);
    if (temp) return;
  }
  if (pt_block_assign_temp(c) >= 0) return; /* it stores nothing an operand could read */
  B.epoch++;
}

int pt_block_new_id(void) { return B.next_id++; }

void pt_block_generated(int i, int id, int nargs, char **args, char **keys) {
  btemp *b = &B.t[i];
  b->generated = 1;
  b->id = id;
  b->nargs = nargs;
  b->args = args;
  b->keys = keys;
}

void pt_block_operands(int i, int *id, int *nargs, char *const **args, char *const **keys) {
  const btemp *b = &B.t[i];
  *id = b->id;
  *nargs = b->generated ? b->nargs : -1;
  *args = b->args;
  *keys = b->keys;
}

void pt_block_handled(int i) { B.t[i].handled++; }

int pt_block_reads(int i) { return B.t[i].expected; }

int pt_block_is_taped(int i) { return B.t[i].taped; }

void pt_block_taped(int i) {
  B.t[i].generated = 1;
  B.t[i].taped = 1;
}

void pt_block_name(int i, char *out, size_t n) {
  CXString s = clang_getCursorSpelling(B.t[i].decl);
  snprintf(out, n, "%s", clang_getCString(s));
  clang_disposeString(s);
}
