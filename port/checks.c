/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What would compile but differentiate wrongly: an active value stored into
 * passive floating storage, active data moved as bytes (memcpy, MPI byte
 * datatypes, void * helpers). Each is reported where it happens.
 */
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

/* ------------------------------------------------------------------------ */
/* Stores into passive storage                                               */
/* ------------------------------------------------------------------------ */

/* What an lvalue names, for messages: 'r2', the field 'v', or its text. */
static char *lvalue_name(pt_ctx *x, CXCursor lv) {
  CXCursor e = pt_strip(lv);
  enum CXCursorKind k = clang_getCursorKind(e);
  char *name = pt_spelling(clang_getCursorReferenced(e));
  char *r;
  if (k == CXCursor_MemberRefExpr && name[0])
    r = pt_cat("the field '", name, "'");
  else if (k == CXCursor_DeclRefExpr && name[0])
    r = pt_cat("'", name, "'");
  else {
    char *t = pt_orig(x, lv);
    r = pt_cat("'", t, "'");
    free(t);
  }
  free(name);
  return r;
}

void pt_passive_store(pt_ctx *x, CXCursor at, CXType target, CXCursor value, const char *what) {
  if (!pt_is_float(target) || pt_type_active(x, target)) return;
  if (clang_getCanonicalType(target).kind == CXType_Float) return; /* reported as a float conversion */
  if (!pt_act(x, pt_strip(value))) return;
  CXString ts = clang_getTypeSpelling(target);
  pt_error(x, at,
           "an active value is stored into %s, of the passive type '%s', which drops its derivative; give it the "
           "active type (%s)%s, or write an explicit cast such as (%s)(...) where only the value is wanted",
           what, clang_getCString(ts), x->o->active[0], x->double_active ? "" : ", or port with --active-type double",
           clang_getCString(ts));
  clang_disposeString(ts);
}

void pt_passive_store_lvalue(pt_ctx *x, CXCursor at, CXCursor lhs, CXCursor value) {
  if (!pt_is_float(clang_getCursorType(lhs)) || pt_act(x, lhs)) return;
  char *what = lvalue_name(x, lhs);
  pt_passive_store(x, at, clang_getCursorType(lhs), value, what);
  free(what);
}

/* ------------------------------------------------------------------------ */
/* Byte moves                                                                */
/* ------------------------------------------------------------------------ */

/* The expression below every cast and parenthesis. */
static CXCursor strip_casts(CXCursor c) {
  for (int g = 0; g < 64; g++) {
    enum CXCursorKind k = clang_getCursorKind(c);
    if (k != CXCursor_UnexposedExpr && k != CXCursor_ParenExpr && k != CXCursor_CStyleCastExpr) break;
    CXCursor e = pt_last_expr(c);
    if (clang_Cursor_isNull(e)) break;
    c = e;
  }
  return c;
}

/* A pointer to untyped bytes: void *, char *, unsigned char *. */
static int bytes_pointer(CXType t) {
  CXType c = clang_getCanonicalType(t);
  if (c.kind != CXType_Pointer) return 0;
  enum CXTypeKind p = clang_getCanonicalType(clang_getPointeeType(c)).kind;
  return p == CXType_Void || p == CXType_Char_S || p == CXType_Char_U || p == CXType_SChar || p == CXType_UChar;
}

/* Where the data behind a buffer argument comes from: below the casts, and
 * through a local `void *` (or char *) initialized with another pointer. */
static CXCursor data_origin(CXCursor c) {
  for (int g = 0; g < 8; g++) {
    c = strip_casts(c);
    if (clang_getCursorKind(c) != CXCursor_DeclRefExpr) break;
    CXCursor d = clang_getCursorReferenced(c);
    if (clang_getCursorKind(d) != CXCursor_VarDecl || !bytes_pointer(clang_getCursorType(d))) break;
    CXCursor init = pt_last_expr(d);
    if (clang_Cursor_isNull(init)) break;
    c = init;
  }
  return c;
}

/* The element type of a buffer: below pointers and arrays, canonical. */
static CXType data_element(CXType t) {
  t = clang_getCanonicalType(t);
  if (t.kind == CXType_Pointer) t = clang_getCanonicalType(clang_getPointeeType(t));
  for (int g = 0; g < 16; g++) {
    if (t.kind != CXType_ConstantArray && t.kind != CXType_IncompleteArray && t.kind != CXType_VariableArray) break;
    t = clang_getCanonicalType(clang_getArrayElementType(t));
  }
  return t;
}

/* memcpy/memmove move bytes: only between buffers of the same active type
 * (or both passive). Active data copied to or from any other storage (a
 * void * buffer, a struct without the active fields, a double array while
 * only a typedef is active) would be reinterpreted. */
void pt_check_byte_copy(pt_ctx *x, CXCursor call, const char *name) {
  CXCursor a[2], o[2];
  int h[2];
  for (int i = 0; i < 2; i++) {
    a[i] = clang_Cursor_getArgument(call, (unsigned)i);
    o[i] = data_origin(a[i]);
    h[i] = pt_type_holds_active(x, clang_getCursorType(o[i]));
  }
  if (!h[0] && !h[1]) return;
  /* The same element type, qualifiers aside (a struct: the same declaration). */
  CXType e0 = data_element(clang_getCursorType(o[0])), e1 = data_element(clang_getCursorType(o[1]));
  int same = e0.kind == e1.kind && (e0.kind != CXType_Record ||
                                    clang_equalCursors(clang_getTypeDeclaration(e0), clang_getTypeDeclaration(e1)));
  if (h[0] == h[1] && same) return;
  char *dst = pt_orig(x, a[0]), *src = pt_orig(x, a[1]);
  pt_error(x, call,
           "%s between active and non-active data: it copies the bytes of '%s' into '%s', and only one of them "
           "is storage of this active type; an ad_real is not a double in memory: copy element by element or "
           "field by field (ad_value / ad_const), or send the values with AD_MPI_REAL or a datatype built on it",
           name, src, dst);
  free(src);
  free(dst);
}

/* The text of c as written, in whichever file it is (a function of a header). */
static char *written_text(pt_ctx *x, CXCursor c) {
  CXSourceRange r = clang_getCursorExtent(c);
  CXFile f = NULL, f2 = NULL;
  unsigned b = 0, e = 0;
  clang_getExpansionLocation(clang_getRangeStart(r), &f, NULL, NULL, &b);
  clang_getExpansionLocation(clang_getRangeEnd(r), &f2, NULL, NULL, &e);
  size_t len = 0;
  const char *buf = f ? clang_getFileContents(x->tu, f, &len) : NULL;
  if (!buf || !f2 || !clang_File_isEqual(f, f2) || e < b || e > len) return port_strdup("");
  return port_strndup(buf + b, e - b);
}

/* Is argument i of the call a datatype of untyped bytes? Returns its name. */
static const char *byte_datatype(pt_ctx *x, CXCursor call, int i) {
  static const char *const bytes[] = {"MPI_BYTE",          "MPI_CHAR",        "MPI_PACKED",
                                      "MPI_UNSIGNED_CHAR", "MPI_SIGNED_CHAR", NULL};
  char *t = written_text(x, clang_Cursor_getArgument(call, (unsigned)i));
  const char *r = NULL;
  for (int j = 0; bytes[j] && !r; j++)
    if (!strcmp(t, bytes[j])) r = bytes[j];
  free(t);
  return r;
}

/* Is argument i of an MPI call a buffer its datatype moves as bytes: the
 * buffer precedes its count and datatype, (buf, count, type), or (buf,
 * counts, displs, type)? Returns the datatype's name. */
static const char *byte_buffer(pt_ctx *x, CXCursor call, int i, int na) {
  for (int back = 2; back <= 3; back++)
    if (i + back < na) {
      const char *t = byte_datatype(x, call, i + back);
      if (t) return t;
    }
  return NULL;
}

/* An MPI call that moves a buffer of active data as bytes (MPI_BYTE,
 * MPI_CHAR, MPI_PACKED) sends the ad_real structs, not their values, and
 * loses the derivative on the other rank. */
void pt_check_byte_mpi(pt_ctx *x, CXCursor call, const char *name, int na) {
  for (int i = 0; i < na; i++) {
    CXCursor b = clang_Cursor_getArgument(call, (unsigned)i);
    CXType bt = clang_getCursorType(data_origin(b));
    if (!pt_pointer_like(bt) || !pt_type_holds_active(x, bt)) continue;
    /* A buffer typed active is reported with its datatype by pt_emit_mpi;
     * here the active data hides behind a cast or a void * variable. */
    if (pt_type_holds_active(x, clang_getCursorType(pt_strip(b)))) continue;
    const char *t = byte_buffer(x, call, i, na);
    if (!t) continue;
    char *bs = pt_orig(x, b);
    pt_error(x, b,
             "%s moves the active data '%s' as %s bytes, which drops its derivative and is not a double on the "
             "wire; send it as AD_MPI_REAL (counting ad_real values), a datatype built on AD_MPI_REAL, or a struct "
             "type whose active fields are AD_MPI_REAL",
             name, bs, t);
    free(bs);
  }
}

/* Does a function move its untyped pointer parameter as bytes: memcpy or
 * memmove it, send it with a byte datatype, or pass it on to a function that
 * does? (A `void *` round trip: bcast_bytes(void *buf, int n) called with
 * active data.) */
typedef struct byte_use {
  pt_ctx *x;
  CXCursor parm;
  int depth;
  int found;
} byte_use;

static int moves_bytes(pt_ctx *x, CXCursor def, unsigned i, int depth);

static enum CXChildVisitResult byte_use_visit(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  byte_use *u = d;
  if (clang_getCursorKind(c) != CXCursor_CallExpr) return CXChildVisit_Recurse;
  CXCursor fd = clang_getCursorReferenced(c);
  char *name = pt_spelling(fd);
  int na = clang_Cursor_getNumArguments(c);
  for (int i = 0; i < na && !u->found; i++) {
    CXCursor o = data_origin(clang_Cursor_getArgument(c, (unsigned)i));
    if (clang_getCursorKind(o) != CXCursor_DeclRefExpr || !clang_equalCursors(clang_getCursorReferenced(o), u->parm))
      continue;
    if ((!strcmp(name, "memcpy") || !strcmp(name, "memmove")) && i < 2)
      u->found = 1;
    else if (!strncmp(name, "MPI_", 4) && byte_buffer(u->x, c, i, na))
      u->found = 1;
    else if (clang_getCursorKind(fd) == CXCursor_FunctionDecl)
      u->found = moves_bytes(u->x, clang_getCursorDefinition(fd), (unsigned)i, u->depth + 1);
  }
  free(name);
  return u->found ? CXChildVisit_Break : CXChildVisit_Recurse;
}

static int moves_bytes(pt_ctx *x, CXCursor def, unsigned i, int depth) {
  if (clang_Cursor_isNull(def) || depth > 4 || (int)i >= clang_Cursor_getNumArguments(def)) return 0;
  CXCursor parm = clang_Cursor_getArgument(def, i);
  if (!bytes_pointer(clang_getCursorType(parm))) return 0;
  byte_use u = {x, parm, depth, 0};
  clang_visitChildren(def, byte_use_visit, &u);
  return u.found;
}

void pt_check_byte_helper(pt_ctx *x, CXCursor fd, const char *name, CXCursor a, unsigned i) {
  CXType ot = clang_getCursorType(data_origin(a));
  if (pt_pointer_like(ot) && pt_type_holds_active(x, ot) &&
      moves_bytes(x, clang_getCursorDefinition(fd), (unsigned)i, 0)) {
    char *as = pt_orig(x, a);
    char *pn = pt_spelling(clang_Cursor_getArgument(clang_getCursorDefinition(fd), (unsigned)i));
    pt_error(x, a,
             "the active data '%s' is passed to '%s', which moves its parameter '%s' as bytes (memcpy, or MPI "
             "with a byte datatype); an ad_real is not a double in memory: give '%s' a typed parameter and "
             "send with AD_MPI_REAL or a datatype built on it",
             as, name, pn, name);
    free(as);
    free(pn);
  }
}
