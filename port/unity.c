/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unity builds: a .c file that #includes other .c files (operators, solvers)
 * is one code with them. The included files are ported in the translation
 * unit of their includer, their functions count as the file's own, and each
 * is written where the ported includer's #include finds it. A header that is
 * not self-contained is ported the same way, in the unit of a file that
 * includes it.
 */
#define _DEFAULT_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

static int ends_with_c(CXFile f) {
  CXString s = clang_getFileName(f);
  const char *n = clang_getCString(s);
  size_t len = n ? strlen(n) : 0;
  int r = len > 2 && !strcmp(n + len - 2, ".c");
  clang_disposeString(s);
  return r;
}

static int own_index(const pt_ctx *x, CXFile f) {
  for (int i = 0; i < x->nown; i++)
    if (clang_File_isEqual(x->own[i], f)) return i;
  return -1;
}

static void add_own(pt_ctx *x, CXFile f) {
  if (f && own_index(x, f) < 0 && x->nown < PT_MAX_OWN) x->own[x->nown++] = f;
}

typedef struct incl_walk {
  pt_ctx *x;
  int added;
} incl_walk;

static void incl_visit(CXFile included, CXSourceLocation *stack, unsigned depth, CXClientData d) {
  incl_walk *w = d;
  if (depth == 0 || own_index(w->x, included) >= 0 || !ends_with_c(included)) return;
  CXFile includer = NULL;
  clang_getExpansionLocation(stack[0], &includer, NULL, NULL, NULL);
  if (includer && own_index(w->x, includer) >= 0) {
    add_own(w->x, included);
    w->added = 1;
  }
}

void pt_own_files(pt_ctx *x, const char *unit) {
  x->nown = 0;
  add_own(x, clang_getFile(x->tu, unit));
  add_own(x, x->file);
  for (int round = 0; round < 64; round++) {
    incl_walk w = {x, 0};
    clang_getInclusions(x->tu, incl_visit, &w);
    if (!w.added) break;
  }
}

int pt_own_location(pt_ctx *x, CXSourceLocation loc) {
  CXFile f = NULL;
  clang_getExpansionLocation(loc, &f, NULL, NULL, NULL);
  return f && own_index(x, f) >= 0;
}

/* ------------------------------------------------------------------------ */
/* The files of a unit, for the command line                                 */
/* ------------------------------------------------------------------------ */

typedef struct unit_walk {
  port_included *v;
  int n, cap;
  int added;
} unit_walk;

static int find_path(const unit_walk *w, const char *path) {
  for (int i = 0; i < w->n; i++)
    if (!strcmp(w->v[i].path, path)) return i;
  return -1;
}

static char *real_name(CXFile f) {
  CXString s = clang_getFileName(f);
  char buf[PATH_MAX];
  const char *n = clang_getCString(s);
  char *r = port_strdup(realpath(n ? n : "", buf) ? buf : (n ? n : ""));
  clang_disposeString(s);
  return r;
}

static enum CXChildVisitResult unit_visit(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  unit_walk *w = d;
  if (clang_getCursorKind(c) != CXCursor_InclusionDirective) return CXChildVisit_Continue;
  CXFile included = clang_getIncludedFile(c), includer = NULL;
  if (!included) return CXChildVisit_Continue;
  clang_getExpansionLocation(clang_getCursorLocation(c), &includer, NULL, NULL, NULL);
  if (!includer) return CXChildVisit_Continue;
  char *from = real_name(includer), *to = real_name(included);
  int at = find_path(w, from);
  if (at >= 0 && find_path(w, to) < 0) {
    if (w->n == w->cap) {
      w->cap = w->cap ? 2 * w->cap : 16;
      w->v = realloc(w->v, (size_t)w->cap * sizeof *w->v);
      if (!w->v) abort();
    }
    port_included *e = &w->v[w->n++];
    e->path = to;
    to = NULL;
    e->rel = NULL;
    e->unity = w->v[at].unity && ends_with_c(included);
    if (e->unity) {
      /* beside the includer's output, as its #include "sub/x.c" spells it */
      CXString s = clang_getCursorSpelling(c);
      const char *rel = w->v[at].rel, *slash = strrchr(rel, '/');
      port_str r = {0};
      if (slash) port_str_addn(&r, rel, (size_t)(slash - rel) + 1);
      port_str_add(&r, clang_getCString(s));
      e->rel = port_str_take(&r);
      clang_disposeString(s);
    }
    w->added = 1;
  }
  free(from);
  free(to);
  return CXChildVisit_Continue;
}

int port_unit_files(const char *unit, const char *const *args, int nargs, port_included **out) {
  CXIndex idx = clang_createIndex(0, 0);
  CXTranslationUnit tu = NULL;
  enum CXErrorCode ec =
      clang_parseTranslationUnit2(idx, unit, args, nargs, NULL, 0,
                                  CXTranslationUnit_DetailedPreprocessingRecord | CXTranslationUnit_KeepGoing, &tu);
  unit_walk w = {0};
  if (ec == CXError_Success && tu) {
    w.v = calloc(16, sizeof *w.v);
    w.cap = 16;
    char buf[PATH_MAX];
    w.v[0].path = port_strdup(realpath(unit, buf) ? buf : unit);
    const char *slash = strrchr(unit, '/');
    w.v[0].rel = port_strdup(slash ? slash + 1 : unit);
    w.v[0].unity = 1;
    w.n = 1;
    /* Inclusion directives come in file order; nested units need more rounds. */
    for (int round = 0; round < 64; round++) {
      w.added = 0;
      clang_visitChildren(clang_getTranslationUnitCursor(tu), unit_visit, &w);
      if (!w.added) break;
    }
    clang_disposeTranslationUnit(tu);
  }
  clang_disposeIndex(idx);
  *out = w.v;
  return w.n;
}
