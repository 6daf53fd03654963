/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * --fused: an assignment whose right-hand side holds two or more active
 * operations becomes straight-line code that computes the value in C's
 * order (so the value is the original's to the bit), then the local partial
 * derivatives with respect to the distinct active operands by a reverse
 * sweep over the expression tree, then one tape statement (ad_custom).
 * Reads of the same side-effect-free lvalue become one argument.
 *
 *   { const ad_real ad__a[2] = {x, y};
 *     const double ad__v0 = ad_value(ad__a[0]), ad__v1 = ad_value(ad__a[1]);
 *     const double ad__v2 = ad__v0 * ad__v1; ...
 *     double ad__d[2]; ad__d[0] = ...; ad__d[1] = ...;
 *     lhs = ad_custom(ad__vN, 2, ad__a, ad__d); }
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

/* F_TEMP: a preaccumulated temporary (block.c), a value whose partials with
 * respect to its own operands come in with it. */
enum { F_LEAF, F_PASSIVE, F_ADD, F_SUB, F_MUL, F_DIV, F_NEG, F_FN, F_TEMP };

#define F_MAX_NODES 512

typedef struct fnode {
  int kind;
  char fn[16];
  int a, b;   /* children (-1 none) */
  int arg;    /* F_LEAF: argument index; F_TEMP: the temporary (block.c) */
  char *text; /* F_LEAF, F_PASSIVE: the expression */
  int *targ;  /* F_TEMP: the argument index of each of the temporary's operands */
  int pbase;  /* F_TEMP: where its value and partials start in ad__p */
  int temp;   /* the temporary read here (F_TEMP, or a leaf that tapes it), else -1 */
} fnode;

typedef struct ftree {
  fnode n[F_MAX_NODES];
  int nn;
  char *args[AD_STMT_MAX_ARGS_PORT];
  char *keys[AD_STMT_MAX_ARGS_PORT]; /* the epoch and the text of a shareable operand (block.c), else NULL */
  int nargs;
  int ops;    /* active operations */
  int ntemps; /* F_TEMP nodes */
  int fail;
  const char *why; /* the first reason it cannot be fused */
} ftree;

static void fail(ftree *t, const char *why) {
  if (!t->fail) t->why = why;
  t->fail = 1;
}

static int node(ftree *t, int kind) {
  if (t->nn >= F_MAX_NODES) {
    fail(t, "more than 512 operations in one expression");
    return 0;
  }
  fnode *f = &t->n[t->nn];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  f->a = f->b = -1;
  f->temp = -1;
  return t->nn++;
}

/* The argument with this key, added if new (key NULL: always new; both are
 * taken); -1 when the statement is full. */
static int arg_of(ftree *t, char *text, char *key) {
  if (key)
    for (int k = 0; k < t->nargs; k++)
      if (t->keys[k] && !strcmp(t->keys[k], key)) {
        free(text);
        free(key);
        return k;
      }
  if (t->nargs >= AD_STMT_MAX_ARGS_PORT) {
    fail(t, "more than 63 distinct active operands");
    free(text);
    free(key);
    return -1;
  }
  t->args[t->nargs] = text;
  t->keys[t->nargs] = key;
  return t->nargs++;
}

/* Reads of the same side-effect-free text share an argument while no store
 * can come between them (block.c's epoch). */
static char *operand_key(const char *text) {
  port_str k = {0};
  port_str_addf(&k, "%ld:%s", pt_block_epoch(), text);
  return port_str_take(&k);
}

static int leaf_text(ftree *t, char *text, int shareable) {
  int k = arg_of(t, text, shareable ? operand_key(text) : NULL);
  if (k < 0) return 0;
  int i = node(t, F_LEAF);
  t->n[i].arg = k;
  return i;
}

static int fn_supported(const char *name, int nargs) {
  static const char *const one[] = {"sin",   "cos",   "tan",  "exp",  "exp2", "expm1", "log",  "log2",
                                    "log10", "log1p", "sqrt", "cbrt", "fabs", "tanh",  "sinh", "cosh",
                                    "atan",  "asin",  "acos", "erf",  "erfc", "asinh", "floor", "ceil",
                                    "trunc", "round", NULL};
  static const char *const two[] = {"pow", "hypot", "atan2", "fmin", "fmax", NULL};
  const char *const *list = nargs == 1 ? one : nargs == 2 ? two : NULL;
  if (!list) return 0;
  for (int i = 0; list[i]; i++)
    if (!strcmp(list[i], name)) return 1;
  return 0;
}

static int build(pt_ctx *x, ftree *t, CXCursor c);

/* Has the temporary's declaration been generated (its operands known)? */
static int temp_ready(int ti) {
  int id, n;
  char *const *args, *const *keys;
  pt_block_operands(ti, &id, &n, &args, &keys);
  return n > 0;
}

static int build_passive(pt_ctx *x, ftree *t, CXCursor c) {
  int i = node(t, F_PASSIVE);
  if (!t->fail) t->n[i].text = pt_emit(x, c, 0);
  return i;
}

static int build(pt_ctx *x, ftree *t, CXCursor c) {
  if (t->fail) return 0;
  if (!pt_act(x, c)) return build_passive(x, t, c);
  if (pt_in_macro(x, c)) return leaf_text(t, pt_emit(x, c, 0), 0);
  enum CXCursorKind k = clang_getCursorKind(c);
  switch (k) {
  case CXCursor_ParenExpr:
  case CXCursor_UnexposedExpr:
  case CXCursor_CStyleCastExpr: {
    CXCursor e = pt_last_expr(c);
    if (clang_Cursor_isNull(e)) break;
    return build(x, t, e);
  }
  case CXCursor_BinaryOperator: {
    const char *op = pt_binop(x, c);
    int kind = !strcmp(op, "+")   ? F_ADD
               : !strcmp(op, "-") ? F_SUB
               : !strcmp(op, "*") ? F_MUL
               : !strcmp(op, "/") ? F_DIV
                                  : -1;
    if (kind < 0) {
      fail(t, "an operator other than + - * / on active values");
      return 0;
    }
    CXCursor *kk;
    int n = pt_children(c, &kk);
    if (n != 2) {
      free(kk);
      fail(t, "an operator the tool cannot read");
      return 0;
    }
    int a = build(x, t, kk[0]);
    int b = build(x, t, kk[1]);
    free(kk);
    int i = node(t, kind);
    if (t->fail) return 0;
    t->n[i].a = a;
    t->n[i].b = b;
    t->ops++;
    return i;
  }
  case CXCursor_UnaryOperator: {
    CXCursor e = pt_last_expr(c);
    if (clang_Cursor_isNull(e)) break;
    const char *op = pt_unop(x, c, e);
    if (!strcmp(op, "+")) return build(x, t, e);
    if (!strcmp(op, "-")) {
      int a = build(x, t, e);
      int i = node(t, F_NEG);
      if (t->fail) return 0;
      t->n[i].a = a;
      t->ops++;
      return i;
    }
    if (!strcmp(op, "*")) return leaf_text(t, pt_emit(x, c, 0), !pt_side_effects(x, c));
    fail(t, "an increment, decrement or other unary operator on an active value");
    return 0;
  }
  case CXCursor_CallExpr: {
    CXCursor fd = clang_getCursorReferenced(c);
    int na = clang_Cursor_getNumArguments(c);
    if (clang_getCursorKind(fd) == CXCursor_FunctionDecl && !pt_ported_function(x, fd)) {
      CXString s = clang_getCursorSpelling(fd);
      char name[16];
      snprintf(name, sizeof name, "%s", clang_getCString(s));
      clang_disposeString(s);
      if (!fn_supported(name, na)) {
        fail(t, "a call of a function whose partials the fused form does not know");
        return 0;
      }
      int a = build(x, t, clang_Cursor_getArgument(c, 0));
      int b = na > 1 ? build(x, t, clang_Cursor_getArgument(c, 1)) : -1;
      int i = node(t, F_FN);
      if (t->fail) return 0;
      snprintf(t->n[i].fn, sizeof t->n[i].fn, "%s", name);
      t->n[i].a = a;
      t->n[i].b = b;
      t->ops++;
      return i;
    }
    /* A ported function's result: one operand, evaluated once. */
    return leaf_text(t, pt_emit(x, c, 0), 0);
  }
  case CXCursor_DeclRefExpr: {
    int ti = pt_block_temp(clang_getCursorReferenced(c));
    if (ti >= 0 && temp_ready(ti)) {
      int i = node(t, F_TEMP);
      if (t->fail) return 0;
      t->n[i].arg = ti;
      t->n[i].temp = ti;
      t->ntemps++;
      return i;
    }
  }
    /* fall through */
  case CXCursor_MemberRefExpr:
  case CXCursor_ArraySubscriptExpr:
    return leaf_text(t, pt_emit(x, c, 0), !pt_side_effects(x, c));
  case CXCursor_ConditionalOperator:
    fail(t, "a conditional expression (?:) with active branches");
    return 0;
  default:
    break;
  }
  fail(t, "an expression the fused form does not handle");
  return 0;
}

static int is_active_node(const ftree *t, int i) { return i >= 0 && t->n[i].kind != F_PASSIVE; }

/* Value names: ad__v<i>. Emit the values in post-order (the tree's order is
 * already post-order: children are built before their parent). */
static void emit_values(ftree *t, port_str *s, port_str *passive) {
  /* The operands a temporary brings in are read only by the partials. */
  for (int k = 0; k < t->nargs; k++) {
    int read = 0;
    for (int i = 0; i < t->nn && !read; i++) read = t->n[i].kind == F_LEAF && t->n[i].arg == k;
    if (read) port_str_addf(s, "const double ad__w%d = ad_value(ad__a[%d]);\n", k, k);
  }
  int np = 0;
  for (int i = 0; i < t->nn; i++) {
    fnode *f = &t->n[i];
    switch (f->kind) {
    case F_LEAF:
      port_str_addf(s, "const double ad__v%d = ad__w%d;\n", i, f->arg);
      break;
    case F_TEMP: {
      /* The statement passes the temporary's value and its partials. */
      int id, n;
      char *const *args, *const *keys;
      char name[256];
      pt_block_operands(f->arg, &id, &n, &args, &keys);
      pt_block_name(f->arg, name, sizeof name);
      int seen = -1; /* the temporary read again: its value and partials are passed once */
      for (int j = 0; j < i && seen < 0; j++)
        if (t->n[j].kind == F_TEMP && t->n[j].arg == f->arg) seen = j;
      if (seen >= 0) {
        f->pbase = t->n[seen].pbase;
        port_str_addf(s, "const double ad__v%d = ad__p[%d];\n", i, f->pbase);
        break;
      }
      port_str_addf(passive, "%s%s", np ? ", " : "", name);
      for (int j = 0; j < n; j++) port_str_addf(passive, ", ad__t%d_d[%d]", id, j);
      f->pbase = np;
      port_str_addf(s, "const double ad__v%d = ad__p[%d];\n", i, np);
      np += 1 + n;
      break;
    }
    case F_PASSIVE:
      /* The statement evaluates it and passes it in ad__p. */
      port_str_addf(passive, "%s(%s)", np ? ", " : "", f->text);
      port_str_addf(s, "const double ad__v%d = ad__p[%d];\n", i, np++);
      break;
    case F_ADD:
      port_str_addf(s, "const double ad__v%d = ad__v%d + ad__v%d;\n", i, f->a, f->b);
      break;
    case F_SUB:
      port_str_addf(s, "const double ad__v%d = ad__v%d - ad__v%d;\n", i, f->a, f->b);
      break;
    case F_MUL:
      port_str_addf(s, "const double ad__v%d = ad__v%d * ad__v%d;\n", i, f->a, f->b);
      break;
    case F_DIV:
      port_str_addf(s, "const double ad__v%d = ad__v%d / ad__v%d;\n", i, f->a, f->b);
      break;
    case F_NEG:
      port_str_addf(s, "const double ad__v%d = -ad__v%d;\n", i, f->a);
      break;
    case F_FN:
      if (f->b >= 0)
        port_str_addf(s, "const double ad__v%d = %s(ad__v%d, ad__v%d);\n", i, f->fn, f->a, f->b);
      else
        port_str_addf(s, "const double ad__v%d = %s(ad__v%d);\n", i, f->fn, f->a);
      break;
    }
  }
}

/* The local partial of node i with respect to its operand (which = 0: a,
 * 1: b), in terms of the operands' values A, B and the result R. */
static void partial(const ftree *t, int i, int which, port_str *s) {
  const fnode *f = &t->n[i];
  char A[24], B[24], R[24];
  snprintf(A, sizeof A, "ad__v%d", f->a);
  snprintf(B, sizeof B, "ad__v%d", f->b >= 0 ? f->b : f->a);
  snprintf(R, sizeof R, "ad__v%d", i);
  const char *fn = f->fn;
  switch (f->kind) {
  case F_ADD:
    port_str_add(s, "1.0");
    return;
  case F_SUB:
    port_str_add(s, which ? "-1.0" : "1.0");
    return;
  case F_MUL:
    port_str_add(s, which ? A : B);
    return;
  case F_DIV:
    if (!which)
      port_str_addf(s, "(1.0 / %s)", B);
    else
      port_str_addf(s, "(-%s * (1.0 / %s))", R, B);
    return;
  case F_NEG:
    port_str_add(s, "-1.0");
    return;
  default:
    break;
  }
  if (!strcmp(fn, "sin"))
    port_str_addf(s, "cos(%s)", A);
  else if (!strcmp(fn, "cos"))
    port_str_addf(s, "(-sin(%s))", A);
  else if (!strcmp(fn, "tan"))
    port_str_addf(s, "(1.0 + %s * %s)", R, R);
  else if (!strcmp(fn, "exp"))
    port_str_add(s, R);
  else if (!strcmp(fn, "exp2"))
    port_str_addf(s, "(0.69314718055994530942 * %s)", R);
  else if (!strcmp(fn, "expm1"))
    port_str_addf(s, "exp(%s)", A);
  else if (!strcmp(fn, "log"))
    port_str_addf(s, "(isnan(%s) ? %s : 1.0 / %s)", R, R, A);
  else if (!strcmp(fn, "log2"))
    port_str_addf(s, "(isnan(%s) ? %s : 1.0 / (0.69314718055994530942 * %s))", R, R, A);
  else if (!strcmp(fn, "log10"))
    port_str_addf(s, "(isnan(%s) ? %s : 1.0 / (2.30258509299404568402 * %s))", R, R, A);
  else if (!strcmp(fn, "log1p"))
    port_str_addf(s, "(isnan(%s) ? %s : 1.0 / (1.0 + %s))", R, R, A);
  else if (!strcmp(fn, "sqrt"))
    port_str_addf(s, "(0.5 / %s)", R);
  else if (!strcmp(fn, "cbrt"))
    port_str_addf(s, "(1.0 / (3.0 * %s * %s))", R, R);
  else if (!strcmp(fn, "fabs"))
    port_str_addf(s, "(%s > 0.0 ? 1.0 : (%s < 0.0 ? -1.0 : 0.0))", A, A);
  else if (!strcmp(fn, "tanh"))
    port_str_addf(s, "(fabs(%s) < 0.9 ? 1.0 - %s * %s : 1.0 / (cosh(%s) * cosh(%s)))", R, R, R, A, A);
  else if (!strcmp(fn, "sinh"))
    port_str_addf(s, "cosh(%s)", A);
  else if (!strcmp(fn, "cosh"))
    port_str_addf(s, "sinh(%s)", A);
  else if (!strcmp(fn, "atan"))
    port_str_addf(s, "(1.0 / (1.0 + %s * %s))", A, A);
  else if (!strcmp(fn, "asin"))
    port_str_addf(s, "(1.0 / sqrt((1.0 - %s) * (1.0 + %s)))", A, A);
  else if (!strcmp(fn, "acos"))
    port_str_addf(s, "(-1.0 / sqrt((1.0 - %s) * (1.0 + %s)))", A, A);
  else if (!strcmp(fn, "erf"))
    port_str_addf(s, "(1.12837916709551257390 * exp(-%s * %s))", A, A);
  else if (!strcmp(fn, "erfc"))
    port_str_addf(s, "(-1.12837916709551257390 * exp(-%s * %s))", A, A);
  else if (!strcmp(fn, "floor") || !strcmp(fn, "ceil") || !strcmp(fn, "trunc") || !strcmp(fn, "round"))
    port_str_add(s, "0.0"); /* piecewise constant, as ad_floor and its kin */
  else if (!strcmp(fn, "asinh"))
    port_str_addf(s, "(1.0 / hypot(%s, 1.0))", A);
  else if (!strcmp(fn, "pow")) {
    if (!which)
      port_str_addf(s, "(%s != 0.0 ? %s * pow(%s, %s - 1.0) : 0.0)", B, B, A, B);
    else
      port_str_addf(s, "(%s > 0.0 ? log(%s) * %s : 0.0)", A, A, R);
  } else if (!strcmp(fn, "hypot")) {
    port_str_addf(s, "(%s != 0.0 ? %s / %s : 0.0)", R, which ? B : A, R);
  } else if (!strcmp(fn, "atan2")) {
    /* atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2); 0 at the origin */
    if (!which)
      port_str_addf(s, "(%s * %s + %s * %s != 0.0 ? %s / (%s * %s + %s * %s) : 0.0)", B, B, A, A, B, B, B, A, A);
    else
      port_str_addf(s, "(%s * %s + %s * %s != 0.0 ? -%s / (%s * %s + %s * %s) : 0.0)", B, B, A, A, A, B, B, A, A);
  } else if (!strcmp(fn, "fmax")) {
    port_str_addf(s, "((%s >= %s || isnan(%s)) ? %s : %s)", A, B, B, which ? "0.0" : "1.0", which ? "1.0" : "0.0");
  } else if (!strcmp(fn, "fmin")) {
    port_str_addf(s, "((%s <= %s || isnan(%s)) ? %s : %s)", A, B, B, which ? "0.0" : "1.0", which ? "1.0" : "0.0");
  }
}

/* The adjoints, top-down: ad__b<i> for every active node; contributions to
 * each argument collected in order. */
static void emit_reverse(const ftree *t, int root, port_str *s, port_str *contrib) {
  /* Children come before parents in n[], so walking down from the root in
   * reverse index order visits parents before children. */
  port_str_addf(s, "const double ad__b%d = 1.0;\n", root);
  for (int i = root; i >= 0; i--) {
    const fnode *f = &t->n[i];
    if (f->kind == F_PASSIVE || f->kind == F_LEAF || f->kind == F_TEMP) continue;
    int kids[2] = {f->a, f->b};
    for (int w = 0; w < 2; w++) {
      int c = kids[w];
      if (c < 0 || !is_active_node(t, c)) continue;
      port_str_addf(s, "const double ad__b%d = ad__b%d * ", c, i);
      partial(t, i, w, s);
      port_str_add(s, ";\n");
    }
  }
  for (int i = 0; i <= root; i++)
    if (t->n[i].kind == F_LEAF) {
      port_str *p = &contrib[t->n[i].arg];
      port_str_addf(p, "%sad__b%d", p->n ? " + " : "", i);
    } else if (t->n[i].kind == F_TEMP) {
      /* The chain rule through the temporary: its partials, computed where it
       * was declared, times its adjoint here. */
      int id, n;
      char *const *args, *const *keys;
      pt_block_operands(t->n[i].arg, &id, &n, &args, &keys);
      for (int j = 0; j < n; j++) {
        port_str *p = &contrib[t->n[i].targ[j]];
        port_str_addf(p, "%sad__b%d * ad__p[%d]", p->n ? " + " : "", i, t->n[i].pbase + 1 + j);
      }
    }
}

/* The operands of each temporary become arguments of the statement, one per
 * distinct operand. When they do not fit in one statement, each temporary is
 * instead taped once, as one argument (its value with its partials). */
static void flatten(ftree *t) {
  if (!t->ntemps || t->fail) return;
  int direct = t->nargs;
  for (int i = 0; i < t->nn && !t->fail; i++) {
    fnode *f = &t->n[i];
    if (f->kind != F_TEMP) continue;
    int id, n;
    char *const *args, *const *keys;
    pt_block_operands(f->arg, &id, &n, &args, &keys);
    f->targ = malloc((size_t)n * sizeof *f->targ);
    if (!f->targ) abort();
    for (int j = 0; j < n && !t->fail; j++)
      f->targ[j] = arg_of(t, port_strdup(args[j]), keys[j] ? port_strdup(keys[j]) : NULL);
  }
  if (!t->fail) return;
  t->fail = 0;
  t->why = NULL;
  for (int k = direct; k < t->nargs; k++) {
    free(t->args[k]);
    free(t->keys[k]);
  }
  t->nargs = direct;
  for (int i = 0; i < t->nn && !t->fail; i++) {
    fnode *f = &t->n[i];
    if (f->kind != F_TEMP) continue;
    free(f->targ);
    f->targ = NULL;
    int id, n;
    char *const *args, *const *keys;
    char name[256];
    pt_block_operands(f->arg, &id, &n, &args, &keys);
    pt_block_name(f->arg, name, sizeof name);
    port_str text = {0}, key = {0};
    port_str_addf(&text, "ad_custom(%s, %d, ad__t%d_a, ad__t%d_d)", name, n, id, id);
    port_str_addf(&key, "temporary %d", id);
    int k = arg_of(t, port_str_take(&text), port_str_take(&key));
    f->kind = F_LEAF;
    f->arg = k < 0 ? 0 : k;
  }
}

/* Count each read of a temporary in a statement that was generated. */
static void temps_handled(const ftree *t) {
  for (int i = 0; i < t->nn; i++)
    if (t->n[i].temp >= 0) pt_block_handled(t->n[i].temp);
}

/* Nodes not reachable from the root (none in a tree) are fine; the adjoints
 * of unused nodes are never emitted because every node has one parent. */
/* The helpers of the current round: each distinct body once, so that
 * statements of the same shape (a stencil's cells, say) share their code, and
 * every statement is a call rather than a long straight-line block, which
 * keeps large fused files as quick to compile as plain ports. */
static struct {
  char **bodies;
  int n, cap;
  port_str defs; /* the definitions not yet placed */
  unsigned defs_at; /* before the function that first uses them */
} helpers;

static void helpers_reset(void) {
  for (int i = 0; i < helpers.n; i++) free(helpers.bodies[i]);
  free(helpers.bodies);
  free(helpers.defs.s);
  memset(&helpers, 0, sizeof helpers);
}

/* Place the pending definitions before the function that uses them. */
static void helpers_place(pt_ctx *x) {
  if (helpers.defs.n) pt_add_edit(x, helpers.defs_at, helpers.defs_at, port_str_take(&helpers.defs));
}

/* Helper names carry the ported file's name, so that a file #included by
 * another (a unity build) does not define the same names again. */
static const char *helper_prefix(pt_ctx *x) {
  static char prefix[64];
  const char *base = strrchr(x->path, '/');
  base = base ? base + 1 : x->path;
  unsigned h = 2166136261u; /* FNV-1a of the whole path: two ops.c in two folders differ */
  for (const char *p = x->path; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  int n = snprintf(prefix, sizeof prefix, "ad__f_");
  for (const char *p = base; *p && *p != '.' && n < 40; p++)
    prefix[n++] = (char)(((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p : '_');
  snprintf(prefix + n, sizeof prefix - (size_t)n, "_%04x_", h & 0xffffu);
  return prefix;
}

/* The number of the helper with this body, defined on first use. */
static int helper(pt_ctx *x, char *body) {
  for (int i = 0; i < helpers.n; i++)
    if (!strcmp(helpers.bodies[i], body)) {
      free(body);
      return i;
    }
  if (helpers.n == helpers.cap) {
    int ncap = helpers.cap ? 2 * helpers.cap : 64;
    char **nb = realloc(helpers.bodies, (size_t)ncap * sizeof *nb);
    if (!nb) abort();
    helpers.bodies = nb;
    helpers.cap = ncap;
  }
  if (helpers.defs.n && helpers.defs_at != x->fn_begin) helpers_place(x);
  helpers.defs_at = x->fn_begin;
  port_str_addf(&helpers.defs, "static double %s%d(const ad_real *ad__a, const double *ad__p, double *ad__d) {\n%s}\n",
                helper_prefix(x), helpers.n, body);
  helpers.bodies[helpers.n] = body;
  return helpers.n++;
}

/* The helper that computes the value of t and its partials into ad__d; the
 * passive values it reads (in ad__p) are listed in *passive. A passive build
 * (ARIADNE_PASSIVE) skips the partials, so that it runs at the original's
 * speed: the calls they make (pow, log) may set errno and would otherwise
 * stay. */
static int helper_of(pt_ctx *x, ftree *t, int root, port_str *passive) {
  port_str h = {0}, values = {0};
  emit_values(t, &values, passive);
  port_str_add(&h, "(void)ad__a;\n");
  if (!passive->n) port_str_add(&h, "(void)ad__p;\n");
  port_str_add(&h, values.s);
  free(values.s);
  port_str_addf(&h, "#ifdef ARIADNE_PASSIVE\n(void)ad__d;\n#else\n");
  port_str contrib[AD_STMT_MAX_ARGS_PORT];
  memset(contrib, 0, sizeof contrib);
  emit_reverse(t, root, &h, contrib);
  for (int k = 0; k < t->nargs; k++) {
    port_str_addf(&h, "ad__d[%d] = %s;\n", k, contrib[k].s ? contrib[k].s : "0.0");
    free(contrib[k].s);
  }
  port_str_addf(&h, "#endif\nreturn ad__v%d;\n", root);
  return helper(x, port_str_take(&h));
}

static char *generate(pt_ctx *x, ftree *t, int root, const char *assign_to, const char *prefix, const char *suffix) {
  port_str passive = {0};
  int f = helper_of(x, t, root, &passive);
  port_str s = {0};
  port_str_add(&s, prefix);
  port_str_addf(&s, "{\nconst ad_real ad__a[%d] = {", t->nargs);
  for (int k = 0; k < t->nargs; k++) port_str_addf(&s, "%s%s", k ? ", " : "", t->args[k]);
  port_str_add(&s, "};\n");
  if (passive.n) port_str_addf(&s, "const double ad__p[] = {%s};\n", passive.s);
  port_str_addf(&s, "double ad__d[%d];\n", t->nargs);
  port_str_addf(&s, "const double ad__v = %s%d(ad__a, %s, ad__d);\n", helper_prefix(x), f, passive.n ? "ad__p" : "NULL");
  port_str_addf(&s, "%sad_custom(ad__v, %d, ad__a, ad__d);\n}%s", assign_to, t->nargs, suffix);
  free(passive.s);
  return port_str_take(&s);
}

/* A temporary's declaration (block.c): its operands captured, its value and
 * partials computed, nothing taped. The names stay in the enclosing block,
 * where the statements that read the temporary find them. */
static char *generate_temp(pt_ctx *x, ftree *t, int root, int ti, const char *name) {
  int id = pt_block_new_id();
  port_str passive = {0};
  int f = helper_of(x, t, root, &passive);
  port_str s = {0};
  port_str_addf(&s, "const ad_real ad__t%d_a[%d] = {", id, t->nargs);
  for (int k = 0; k < t->nargs; k++) port_str_addf(&s, "%s%s", k ? ", " : "", t->args[k]);
  port_str_add(&s, "};\n");
  if (passive.n) port_str_addf(&s, "const double ad__t%d_p[] = {%s};\n", id, passive.s);
  port_str_addf(&s, "double ad__t%d_d[%d];\n", id, t->nargs);
  port_str_addf(&s, "const double %s = %s%d(ad__t%d_a, ", name, helper_prefix(x), f, id);
  if (passive.n)
    port_str_addf(&s, "ad__t%d_p, ad__t%d_d);", id, id);
  else
    port_str_addf(&s, "NULL, ad__t%d_d);", id);
  free(passive.s);
  /* The temporary's operands, as its readers name them. */
  char **args = malloc((size_t)t->nargs * sizeof *args), **keys = malloc((size_t)t->nargs * sizeof *keys);
  if (!args || !keys) abort();
  for (int k = 0; k < t->nargs; k++) {
    port_str a = {0};
    port_str_addf(&a, "ad__t%d_a[%d]", id, k);
    args[k] = port_str_take(&a);
    keys[k] = t->keys[k] ? port_strdup(t->keys[k]) : NULL;
  }
  pt_block_generated(ti, id, t->nargs, args, keys);
  return port_str_take(&s);
}

static void tree_free(ftree *t) {
  for (int i = 0; i < t->nn; i++) {
    free(t->n[i].text);
    free(t->n[i].targ);
  }
  for (int k = 0; k < t->nargs; k++) {
    free(t->args[k]);
    free(t->keys[k]);
  }
}

/* The active operations of c: what the per-operation port tapes. */
static int count_ops(pt_ctx *x, CXCursor c) {
  if (!pt_act(x, c)) return 0;
  enum CXCursorKind k = clang_getCursorKind(c);
  int n = k == CXCursor_BinaryOperator || k == CXCursor_CompoundAssignOperator || k == CXCursor_CallExpr ||
          k == CXCursor_UnaryOperator;
  if (k == CXCursor_UnaryOperator && !pt_in_macro(x, c)) {
    CXCursor e = pt_last_expr(c);
    const char *op = clang_Cursor_isNull(e) ? "?" : pt_unop(x, c, e);
    n = strcmp(op, "+") && strcmp(op, "*") && strcmp(op, "&");
  }
  CXCursor *kk;
  int m = pt_children(c, &kk);
  for (int i = 0; i < m; i++) n += count_ops(x, kk[i]);
  free(kk);
  return n;
}

static void helpers_reset(void);
static void helpers_place(pt_ctx *x);

/* What the current round of port_file found (a round that expands macros in
 * place is followed by another over the new text: only the last counts). */
static struct {
  long candidates, fused, preaccumulated;
  port_str lines;
} round_report;

void pt_fused_round(void) {
  free(round_report.lines.s);
  memset(&round_report, 0, sizeof round_report);
  helpers_reset();
}

void pt_fused_commit(pt_ctx *x) {
  helpers_place(x);
  port_fuse_report *r = x->o->fuse;
  if (r) {
    r->candidates += round_report.candidates;
    r->fused += round_report.fused;
    r->preaccumulated += round_report.preaccumulated;
    if (r->file && round_report.lines.s) fputs(round_report.lines.s, r->file);
  }
  pt_fused_round();
}

/* Count an assignment with `ops` active operations (only two or more make
 * fusing worth it), and report it when it stays per operation. */
static void outcome(pt_ctx *x, CXCursor stmt, int ops, const char *why) {
  if (!x->o->fuse || ops < 2) return;
  round_report.candidates++;
  if (!why) {
    round_report.fused++;
    return;
  }
  CXFile f;
  unsigned line, col;
  clang_getExpansionLocation(clang_getCursorLocation(stmt), &f, &line, &col, NULL);
  char *text = pt_orig(x, stmt);
  for (char *p = text; *p; p++)
    if (*p == '\n' || *p == '\t') *p = ' ';
  port_str_addf(&round_report.lines, "%s:%u:%u: not fused (%d active operations): %s: %.160s\n", x->path, line, col,
                ops, why, text);
  free(text);
}

void pt_fused_preaccumulated(pt_ctx *x, CXCursor decl, unsigned line, unsigned col, int nargs, int reads) {
  if (!x->o->fuse) return;
  round_report.preaccumulated++;
  char *name = pt_spelling(decl);
  port_str_addf(&round_report.lines,
                "%s:%u:%u: preaccumulated '%s': not taped; its partials with respect to %d operand%s folded into the "
                "%d statement%s that read it\n",
                x->path, line, col, name, nargs, nargs == 1 ? "" : "s", reads, reads == 1 ? "" : "s");
  free(name);
}

void pt_fused_note(pt_ctx *x, const char *fmt, ...) {
  if (!x->o->fuse) return;
  va_list ap;
  va_start(ap, fmt);
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  port_str_add(&round_report.lines, line);
}

void pt_fused_skip(pt_ctx *x, CXCursor stmt, CXCursor rhs, int compound, const char *why) {
  outcome(x, stmt, count_ops(x, rhs) + (compound != 0), why);
}

/* Build the tree of rhs (of lhs op= rhs when lhs is given); NULL if it is
 * not worth fusing or holds something the generator does not handle, with
 * the reason in *why when it is worth it. A tree that reads a temporary, or
 * defines one (force), is always worth it: the temporary is taped nowhere
 * else. */
static ftree *tree_of(pt_ctx *x, CXCursor lhs, const char *op, CXCursor rhs, int force, int *root, const char **why) {
  *why = NULL;
  ftree *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  int r;
  if (!clang_Cursor_isNull(lhs) && strcmp(op, "=")) {
    int kind = !strcmp(op, "+=")   ? F_ADD
               : !strcmp(op, "-=") ? F_SUB
               : !strcmp(op, "*=") ? F_MUL
               : !strcmp(op, "/=") ? F_DIV
                                   : -1;
    if (kind < 0) fail(t, "a compound assignment other than += -= *= /=");
    if (pt_side_effects(x, lhs)) fail(t, "a left-hand side with side effects");
    int a = t->fail ? 0 : leaf_text(t, pt_emit(x, lhs, 0), 1);
    int b = build(x, t, rhs);
    r = node(t, kind < 0 ? F_ADD : kind);
    if (!t->fail) {
      t->n[r].a = a;
      t->n[r].b = b;
      t->ops++;
    }
  } else {
    r = build(x, t, rhs);
  }
  flatten(t);
  if (t->fail || (t->ops < 2 && !t->ntemps && !force) || !is_active_node(t, r)) {
    *why = t->fail ? t->why : NULL;
    tree_free(t);
    free(t);
    return NULL;
  }
  *root = r;
  return t;
}

/* The ';' that ends the statement whose expression ends at `end`. */
static unsigned semicolon_after(pt_ctx *x, unsigned end) {
  unsigned i = end;
  while (i < x->len && (x->buf[i] == ' ' || x->buf[i] == '\t' || x->buf[i] == '\n' || x->buf[i] == '\r')) i++;
  return i < x->len && x->buf[i] == ';' ? i + 1 : 0;
}

/* The tree of an assignment, or NULL with the assignment counted and, if it
 * was worth fusing, reported. */
static ftree *fusable(pt_ctx *x, CXCursor stmt, CXCursor lhs, const char *op, CXCursor rhs, int force, int *root,
                      const char *why) {
  int compound = !clang_Cursor_isNull(lhs) && strcmp(op, "=");
  if (why) {
    pt_fused_skip(x, stmt, rhs, compound, why);
    return NULL;
  }
  ftree *t = tree_of(x, lhs, op, rhs, force, root, &why);
  if (!t && why) pt_fused_skip(x, stmt, rhs, compound, why);
  if (t) outcome(x, stmt, t->ops, NULL);
  return t;
}

static const char *const in_for_header = "an assignment in a for header";

char *pt_fused_assign(pt_ctx *x, CXCursor stmt, CXCursor lhs, const char *op, CXCursor rhs) {
  unsigned semi = semicolon_after(x, pt_e(stmt));
  const char *why = x->no_fuse                ? in_for_header
                    : pt_side_effects(x, lhs) ? "a left-hand side with side effects"
                    : !semi                    ? "a statement whose ';' comes from a macro"
                                               : NULL;
  int root;
  ftree *t = fusable(x, stmt, lhs, op, rhs, 0, &root, why);
  if (!t) return NULL;
  char *l = pt_emit(x, lhs, 0);
  char *assign = pt_cat(l, " = ", NULL);
  char *r = generate(x, t, root, assign, "", "");
  free(l);
  free(assign);
  temps_handled(t);
  tree_free(t);
  free(t);
  pt_add_edit(x, pt_b(stmt), semi, r);
  return port_strdup(""); /* the edit is made; nothing more for the expression */
}

char *pt_fused_return(pt_ctx *x, CXCursor ret, CXCursor value) {
  int root;
  ftree *t = fusable(x, ret, clang_getNullCursor(), "=", value, 0, &root, x->no_fuse ? in_for_header : NULL);
  if (!t) return NULL;
  unsigned e = pt_e(ret);
  unsigned semi = semicolon_after(x, e);
  char *r = generate(x, t, root, "return ", "", "");
  temps_handled(t);
  tree_free(t);
  free(t);
  pt_add_edit(x, pt_b(ret), semi ? semi : e, r);
  return port_strdup("");
}

/* A temporary computed from four or more operands of the block (no other
 * temporary) and read by two or more statements is a narrow waist: taped once,
 * it is one argument of each reader, where folding it in would give each
 * reader all its operands (a face's interpolated states, read by every flux
 * of the face). */
static int worth_taping(const ftree *t, int ti) { return !t->ntemps && t->nargs >= 4 && pt_block_reads(ti) >= 2; }

/* A temporary's value and partials, or, when it is worth taping, an
 * ordinary statement `name = ad_custom(...)` after `prefix`. */
static char *generate_temp_or_taped(pt_ctx *x, ftree *t, int root, int ti, const char *name, const char *prefix) {
  if (ti >= 0 && worth_taping(t, ti)) {
    pt_block_taped(ti);
    ti = -1;
  }
  if (ti >= 0) return generate_temp(x, t, root, ti, name);
  char *assign = pt_cat(name, " = ", NULL);
  char *r = generate(x, t, root, assign, prefix, "");
  free(assign);
  return r;
}

char *pt_fused_decl(pt_ctx *x, CXCursor declstmt, CXCursor var, CXCursor init, const char *decl_text) {
  int root;
  int ti = pt_block_temp(var);
  ftree *t = fusable(x, declstmt, clang_getNullCursor(), "=", init, ti >= 0, &root, x->no_fuse ? in_for_header : NULL);
  if (!t) return NULL;
  CXString sp = clang_getCursorSpelling(var);
  char *prefix = pt_cat(decl_text, ";\n", NULL);
  char *r = generate_temp_or_taped(x, t, root, ti, clang_getCString(sp), prefix);
  free(prefix);
  clang_disposeString(sp);
  temps_handled(t);
  tree_free(t);
  free(t);
  pt_add_edit(x, pt_b(declstmt), pt_e(declstmt), r);
  return port_strdup("");
}

/* `v = rhs;` that defines a temporary (block.c): the temporary is declared
 * here, shadowing v for the rest of the block, where all its reads are. */
char *pt_fused_temp_assign(pt_ctx *x, CXCursor stmt, CXCursor var, CXCursor rhs) {
  unsigned semi = semicolon_after(x, pt_e(stmt));
  if (!semi) return NULL;
  int root;
  ftree *t = fusable(x, stmt, clang_getNullCursor(), "=", rhs, 1, &root, NULL);
  if (!t) return NULL;
  CXString sp = clang_getCursorSpelling(var);
  int ti = pt_block_temp(var);
  char *r = generate_temp_or_taped(x, t, root, ti, clang_getCString(sp), "");
  /* The shadowed variable is no longer read: say so, or compilers warn that it is unused. */
  if (ti >= 0 && !pt_block_is_taped(ti)) {
    char *with = pt_cat("(void)", clang_getCString(sp), ";\n");
    char *both = pt_cat(with, r, NULL);
    free(with);
    free(r);
    r = both;
  }
  clang_disposeString(sp);
  temps_handled(t);
  tree_free(t);
  free(t);
  pt_add_edit(x, pt_b(stmt), semi, r);
  return port_strdup("");
}
