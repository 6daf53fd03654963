/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI calls: a call whose buffer holds active data becomes its ad_mpi_ twin
 * with AD_MPI_REAL for MPI_DOUBLE; calls on passive buffers stay plain MPI.
 * Requests become ad_mpi_request once an active nonblocking call exists. */
#define _DEFAULT_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

typedef struct mpi_fn {
  const char *name;
  int buf[2], type[2]; /* argument positions of (buffer, datatype) pairs; -1: none */
  int buf3;            /* a second buffer sharing type[0] (reductions), -1: none */
  int request;         /* 1: starts a request on its buffers, 2: works on requests, 3: makes a matched message */
  int type3;           /* a one-sided call's target datatype, replaced with the rest; -1: none */
} mpi_fn;

/* Positions follow MPI's argument lists. */
#define P2P {0, -1}, {2, -1}, -1
#define RED {0, -1}, {3, -1}, 1
#define GATHER {0, 3}, {2, 5}, -1
#define GATHERV {0, 3}, {2, 6}, -1
#define SCATTERV {0, 4}, {3, 6}, -1
#define ALLTOALLV {0, 4}, {3, 7}, -1
#define NONE {-1, -1}, {-1, -1}, -1
static const mpi_fn fns[] = {
    {"MPI_Send", P2P, 0, -1},
    {"MPI_Ssend", P2P, 0, -1},
    {"MPI_Bsend", P2P, 0, -1},
    {"MPI_Rsend", P2P, 0, -1},
    {"MPI_Recv", P2P, 0, -1},
    {"MPI_Mrecv", P2P, 0, -1},
    {"MPI_Isend", P2P, 1, -1},
    {"MPI_Issend", P2P, 1, -1},
    {"MPI_Ibsend", P2P, 1, -1},
    {"MPI_Irsend", P2P, 1, -1},
    {"MPI_Irecv", P2P, 1, -1},
    {"MPI_Imrecv", P2P, 1, -1},
    {"MPI_Send_init", P2P, 1, -1},
    {"MPI_Ssend_init", P2P, 1, -1},
    {"MPI_Bsend_init", P2P, 1, -1},
    {"MPI_Rsend_init", P2P, 1, -1},
    {"MPI_Recv_init", P2P, 1, -1},
    {"MPI_Wait", NONE, 2, -1},
    {"MPI_Waitall", NONE, 2, -1},
    {"MPI_Waitany", NONE, 2, -1},
    {"MPI_Waitsome", NONE, 2, -1},
    {"MPI_Test", NONE, 2, -1},
    {"MPI_Testall", NONE, 2, -1},
    {"MPI_Testany", NONE, 2, -1},
    {"MPI_Testsome", NONE, 2, -1},
    {"MPI_Start", NONE, 2, -1},
    {"MPI_Startall", NONE, 2, -1},
    {"MPI_Request_free", NONE, 2, -1},
    {"MPI_Cancel", NONE, 2, -1},
    {"MPI_Ibarrier", NONE, 2, -1},
    {"MPI_Barrier_init", NONE, 2, -1},
    {"MPI_Mprobe", NONE, 3, -1},
    {"MPI_Improbe", NONE, 3, -1},
    {"MPI_Sendrecv", {0, 5}, {2, 7}, -1, 0, -1},
    {"MPI_Sendrecv_replace", P2P, 0, -1},
    {"MPI_Bcast", P2P, 0, -1},
    {"MPI_Ibcast", P2P, 1, -1},
    {"MPI_Bcast_init", P2P, 1, -1},
    {"MPI_Reduce", RED, 0, -1},
    {"MPI_Allreduce", RED, 0, -1},
    {"MPI_Reduce_scatter", RED, 0, -1},
    {"MPI_Reduce_scatter_block", RED, 0, -1},
    {"MPI_Scan", RED, 0, -1},
    {"MPI_Exscan", RED, 0, -1},
    {"MPI_Ireduce", RED, 1, -1},
    {"MPI_Iallreduce", RED, 1, -1},
    {"MPI_Ireduce_scatter", RED, 1, -1},
    {"MPI_Ireduce_scatter_block", RED, 1, -1},
    {"MPI_Iscan", RED, 1, -1},
    {"MPI_Iexscan", RED, 1, -1},
    {"MPI_Reduce_init", RED, 1, -1},
    {"MPI_Allreduce_init", RED, 1, -1},
    {"MPI_Reduce_scatter_init", RED, 1, -1},
    {"MPI_Reduce_scatter_block_init", RED, 1, -1},
    {"MPI_Scan_init", RED, 1, -1},
    {"MPI_Exscan_init", RED, 1, -1},
    {"MPI_Gather", GATHER, 0, -1},
    {"MPI_Scatter", GATHER, 0, -1},
    {"MPI_Allgather", GATHER, 0, -1},
    {"MPI_Alltoall", GATHER, 0, -1},
    {"MPI_Neighbor_allgather", GATHER, 0, -1},
    {"MPI_Neighbor_alltoall", GATHER, 0, -1},
    {"MPI_Igather", GATHER, 1, -1},
    {"MPI_Iscatter", GATHER, 1, -1},
    {"MPI_Iallgather", GATHER, 1, -1},
    {"MPI_Ialltoall", GATHER, 1, -1},
    {"MPI_Ineighbor_allgather", GATHER, 1, -1},
    {"MPI_Ineighbor_alltoall", GATHER, 1, -1},
    {"MPI_Gather_init", GATHER, 1, -1},
    {"MPI_Scatter_init", GATHER, 1, -1},
    {"MPI_Allgather_init", GATHER, 1, -1},
    {"MPI_Alltoall_init", GATHER, 1, -1},
    {"MPI_Neighbor_allgather_init", GATHER, 1, -1},
    {"MPI_Neighbor_alltoall_init", GATHER, 1, -1},
    {"MPI_Gatherv", GATHERV, 0, -1},
    {"MPI_Allgatherv", GATHERV, 0, -1},
    {"MPI_Neighbor_allgatherv", GATHERV, 0, -1},
    {"MPI_Igatherv", GATHERV, 1, -1},
    {"MPI_Iallgatherv", GATHERV, 1, -1},
    {"MPI_Ineighbor_allgatherv", GATHERV, 1, -1},
    {"MPI_Gatherv_init", GATHERV, 1, -1},
    {"MPI_Allgatherv_init", GATHERV, 1, -1},
    {"MPI_Neighbor_allgatherv_init", GATHERV, 1, -1},
    {"MPI_Scatterv", SCATTERV, 0, -1},
    {"MPI_Iscatterv", SCATTERV, 1, -1},
    {"MPI_Scatterv_init", SCATTERV, 1, -1},
    {"MPI_Alltoallv", ALLTOALLV, 0, -1},
    {"MPI_Neighbor_alltoallv", ALLTOALLV, 0, -1},
    {"MPI_Ialltoallv", ALLTOALLV, 1, -1},
    {"MPI_Ineighbor_alltoallv", ALLTOALLV, 1, -1},
    {"MPI_Alltoallv_init", ALLTOALLV, 1, -1},
    {"MPI_Neighbor_alltoallv_init", ALLTOALLV, 1, -1},
    /* One-sided: origin buffer and datatype, target datatype. */
    {"MPI_Put", P2P, 0, 6},
    {"MPI_Get", P2P, 0, 6},
    {"MPI_Accumulate", P2P, 0, 6},
    {"MPI_Get_accumulate", {0, 3}, {2, 5}, -1, 0, 9},
    {"MPI_Win_create", NONE, 4, -1},
    {"MPI_Win_allocate", NONE, 4, -1},
    {"MPI_Win_fence", NONE, 5, -1},
    {"MPI_Win_free", NONE, 5, -1},
    {"MPI_Win_lock", NONE, 5, -1},
    {"MPI_Win_unlock", NONE, 5, -1},
    {"MPI_Win_lock_all", NONE, 5, -1},
    {"MPI_Win_unlock_all", NONE, 5, -1},
    {"MPI_Win_flush", NONE, 5, -1},
    {"MPI_Win_flush_all", NONE, 5, -1},
    {"MPI_Win_flush_local", NONE, 5, -1},
    {"MPI_Win_flush_local_all", NONE, 5, -1},
    {"MPI_Win_sync", NONE, 5, -1},
    {NULL, NONE, 0, -1},
};
#undef P2P
#undef RED
#undef GATHER
#undef GATHERV
#undef SCATTERV
#undef ALLTOALLV
#undef NONE

static const mpi_fn *lookup(const char *name) {
  for (int i = 0; fns[i].name; i++)
    if (!strcmp(fns[i].name, name)) return &fns[i];
  return NULL;
}

static int buffer_active(pt_ctx *x, CXCursor call, int pos) {
  if (pos < 0 || pos >= clang_Cursor_getNumArguments(call)) return 0;
  CXCursor a = pt_strip(clang_Cursor_getArgument(call, (unsigned)pos));
  return pt_type_holds_active(x, clang_getCursorType(a));
}

static char *arg_text(pt_ctx *x, CXCursor call, int pos) {
  if (pos < 0 || pos >= clang_Cursor_getNumArguments(call)) return port_strdup("");
  return pt_orig(x, clang_Cursor_getArgument(call, (unsigned)pos));
}

/* The datatype argument at pos as written, with an object-like macro that
 * names another identifier (`#define REAL_MPI_TYPE MPI_DOUBLE`) followed to
 * what it names: such a macro is that datatype, not a derived one. */
static char *datatype_arg(pt_ctx *x, CXCursor call, int pos) {
  char *t = arg_text(x, call, pos);
  for (int depth = 0; depth < 8; depth++) {
    if (!t[0] || !strcmp(t, "MPI_DOUBLE") || !strcmp(t, "AD_MPI_REAL")) break;
    for (const char *p = t; *p; p++)
      if (!isalnum((unsigned char)*p) && *p != '_') return t;
    char *next = pt_macro_alias(x, pt_macro_named(x, t), 0);
    if (!next) break;
    free(t);
    t = next;
  }
  return t;
}

static int is_real_type(const char *t) { return !strcmp(t, "MPI_DOUBLE") || !strcmp(t, "AD_MPI_REAL"); }

/* Datatype constructors that Ariadne takes on AD_MPI_REAL (docs/mpi.md):
 * with `double` active, one built on MPI_DOUBLE (or on such a type) is
 * built on AD_MPI_REAL, and the calls that use it with active buffers
 * become their twins. Structs are not: their MPI_DOUBLE fields may be
 * passive data, which the tool cannot tell. */
static int type_ctor(const char *name) {
  static const char *const ctors[] = {"MPI_Type_contiguous",
                                      "MPI_Type_vector",
                                      "MPI_Type_create_hvector",
                                      "MPI_Type_indexed",
                                      "MPI_Type_create_indexed_block",
                                      "MPI_Type_create_hindexed",
                                      "MPI_Type_create_hindexed_block",
                                      "MPI_Type_create_subarray",
                                      "MPI_Type_create_resized",
                                      "MPI_Type_dup",
                                      NULL};
  for (int i = 0; ctors[i]; i++)
    if (!strcmp(name, ctors[i])) return 1;
  return 0;
}

static int known_type(const pt_ctx *x, const char *t) {
  for (int i = 0; i < x->nmpi_types; i++)
    if (!strcmp(x->mpi_types[i], t)) return 1;
  return 0;
}

/* A constructor call whose old type is MPI_DOUBLE or a type already known:
 * note the new type's variable (its last argument, `&name`). */
static void note_type(pt_ctx *x, CXCursor call, const char *name) {
  int na = clang_Cursor_getNumArguments(call), on_real = 0;
  if (!x->double_active || !type_ctor(name) || na < 2) return;
  for (int i = 0; i < na - 1 && !on_real; i++) {
    char *t = datatype_arg(x, call, i);
    on_real = !strcmp(t, "MPI_DOUBLE") || known_type(x, t);
    free(t);
  }
  char *last = arg_text(x, call, na - 1);
  const char *v = last[0] == '&' ? last + 1 : NULL;
  while (v && *v == ' ') v++;
  if (on_real && v && *v && x->nmpi_types < (int)(sizeof x->mpi_types / sizeof x->mpi_types[0]) && !known_type(x, v))
    x->mpi_types[x->nmpi_types++] = port_strdup(v);
  free(last);
}

static enum CXChildVisitResult prescan(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  pt_ctx *x = d;
  if (clang_getCursorKind(c) == CXCursor_CallExpr) {
    CXCursor fd = clang_getCursorReferenced(c);
    CXString s = clang_getCursorSpelling(fd);
    const char *name = clang_getCString(s);
    const mpi_fn *f = lookup(name);
    if (f && f->request == 1 && buffer_active(x, c, f->buf[0])) x->mpi_requests = 1;
    if (f && (!strcmp(name, "MPI_Mrecv") || !strcmp(name, "MPI_Imrecv")) && buffer_active(x, c, f->buf[0]))
      x->mpi_messages = 1;
    if (f && f->request == 4 && buffer_active(x, c, !strcmp(name, "MPI_Win_create") ? 0 : 4)) x->mpi_windows = 1;
    if (!f) note_type(x, c, name);
    clang_disposeString(s);
  }
  return CXChildVisit_Recurse;
}

void pt_mpi_prescan(pt_ctx *x, CXCursor root) { clang_visitChildren(root, prescan, x); }

/* The first argument of an MPI call without a twin (packing, a datatype
 * constructor outside the list) that carries active data or, with double
 * active, MPI_DOUBLE; -1 if none. */
static int unsupported_arg(pt_ctx *x, CXCursor c, const char *name) {
  int na = clang_Cursor_getNumArguments(c);
  for (int i = 0; i < na; i++) {
    char *t = datatype_arg(x, c, i);
    int dbl = x->double_active && !strcmp(t, "MPI_DOUBLE");
    free(t);
    if (buffer_active(x, c, i) || (dbl && (!strncmp(name, "MPI_Type_", 9) || !strncmp(name, "MPI_Pack", 8)))) return i;
  }
  return -1;
}

/* Does the port change (or report) this MPI call? Then a macro whose body
 * makes it is expanded in place. */
int pt_mpi_changes(pt_ctx *x, CXCursor c, const char *name) {
  const mpi_fn *f = lookup(name);
  if (f) {
    for (int p = 0; p < 2; p++)
      if (f->buf[p] >= 0 &&
          (buffer_active(x, c, f->buf[p]) || (p == 0 && f->buf3 >= 0 && buffer_active(x, c, f->buf3))))
        return 1;
    if ((f->request == 1 || f->request == 2) && x->mpi_requests) return 1;
    if (f->request == 3 && x->mpi_messages) return 1;
    if (f->request == 4 && buffer_active(x, c, !strcmp(name, "MPI_Win_create") ? 0 : 4)) return 1;
    return f->request == 5 && x->mpi_windows;
  }
  if (x->double_active && type_ctor(name)) {
    int na = clang_Cursor_getNumArguments(c), on_real = 0;
    for (int i = 0; i < na && !on_real; i++) {
      char *t = datatype_arg(x, c, i);
      on_real = !strcmp(t, "MPI_DOUBLE");
      free(t);
    }
    return on_real;
  }
  return unsupported_arg(x, c, name) >= 0;
}

/* Is t MPI_Request, or a pointer to or an array of it? */
static int request_type(CXType t) {
  for (int g = 0; g < 16; g++) {
    if (t.kind == CXType_Pointer)
      t = clang_getPointeeType(t);
    else if (t.kind == CXType_ConstantArray || t.kind == CXType_IncompleteArray || t.kind == CXType_VariableArray)
      t = clang_getArrayElementType(t);
    else if (t.kind == CXType_Elaborated)
      t = clang_Type_getNamedType(t);
    else
      break;
  }
  if (t.kind != CXType_Typedef) return 0;
  CXString s = clang_getTypedefName(t);
  int r = !strcmp(clang_getCString(s), "MPI_Request");
  clang_disposeString(s);
  return r;
}

/* The variable or field an lvalue names: `req` in `&h->req[i]`. */
static CXCursor named_decl(CXCursor e) {
  for (int g = 0; g < 16; g++) {
    e = pt_strip(e);
    enum CXCursorKind k = clang_getCursorKind(e);
    if (k == CXCursor_DeclRefExpr || k == CXCursor_MemberRefExpr) return clang_getCursorReferenced(e);
    if (k == CXCursor_ArraySubscriptExpr) {
      CXCursor *kk;
      int n = pt_children(e, &kk);
      CXCursor base = n > 0 ? kk[0] : clang_getNullCursor();
      free(kk);
      e = base;
    } else if (k == CXCursor_UnaryOperator || k == CXCursor_CStyleCastExpr) {
      e = pt_last_expr(e);
    } else {
      break;
    }
    if (clang_Cursor_isNull(e)) break;
  }
  return clang_getNullCursor();
}

/* Requests of active calls are ad_mpi_request: one declared in a header
 * that is not ported keeps MPI_Request there, and the program would size
 * and store them wrongly. Reported, naming the header. */
static void check_request_args(pt_ctx *x, CXCursor c, const char *name) {
  int na = clang_Cursor_getNumArguments(c);
  for (int i = 0; i < na; i++) {
    CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
    if (!request_type(clang_getCursorType(pt_strip(a)))) continue;
    char *path = pt_foreign_file(x, named_decl(a));
    if (path) {
      CXString dn = clang_getCursorSpelling(named_decl(a));
      pt_error(x, a,
               "%s on requests of active data: '%s' is declared as MPI_Request in '%s', which is not ported; the "
               "requests are ad_mpi_request, so give '%s' as an input",
               name, clang_getCString(dn), path, path);
      clang_disposeString(dn);
      free(path);
    }
  }
}

char *pt_emit_mpi(pt_ctx *x, CXCursor c, const char *name, int n, const CXCursor *k, int na, const int *argk) {
  const mpi_fn *f = lookup(name);
  char **texts = calloc((size_t)n + 1, sizeof *texts);
  int rename = 0;
  if (f) {
    for (int p = 0; p < 2; p++) {
      if (f->buf[p] < 0) continue;
      int act = buffer_active(x, c, f->buf[p]) || (p == 0 && f->buf3 >= 0 && buffer_active(x, c, f->buf3));
      if (!act) continue;
      char *dt = datatype_arg(x, c, f->type[p]);
      if (known_type(x, dt)) {
        /* built on AD_MPI_REAL by its constructor's port */
      } else if (!is_real_type(dt)) {
        pt_error(x, clang_Cursor_getArgument(c, (unsigned)f->type[p]),
                 "%s on active data with the datatype '%s': derived datatypes and packed buffers of active data are "
                 "not supported; send the ad_real values as AD_MPI_REAL",
                 name, dt);
      } else if (f->type[p] < na && argk[f->type[p]] >= 0) {
        texts[argk[f->type[p]]] = port_strdup("AD_MPI_REAL");
      }
      free(dt);
      rename = 1;
      if (p == 0 && f->type3 >= 0 && f->type3 < na && argk[f->type3] >= 0) {
        char *t3 = datatype_arg(x, c, f->type3);
        if (!strcmp(t3, "MPI_DOUBLE")) texts[argk[f->type3]] = port_strdup("AD_MPI_REAL");
        free(t3);
      }
    }
    if ((f->request == 1 || f->request == 2) && x->mpi_requests) {
      rename = 1;
      check_request_args(x, c, name);
    }
    if (f->request == 3 && x->mpi_messages) rename = 1;
    if (f->request == 4 && buffer_active(x, c, !strcmp(name, "MPI_Win_create") ? 0 : 4)) rename = 1;
    if (f->request == 5 && x->mpi_windows) rename = 1;
  } else if (x->double_active && type_ctor(name)) {
    for (int i = 0; i < na; i++) {
      char *t = datatype_arg(x, c, i);
      if (!strcmp(t, "MPI_DOUBLE") && argk[i] >= 0) texts[argk[i]] = port_strdup("AD_MPI_REAL");
      free(t);
    }
  } else {
    int i = unsupported_arg(x, c, name);
    if (i >= 0)
      pt_error(x, clang_Cursor_getArgument(c, (unsigned)i),
               "%s on active data has no Ariadne twin (derived datatypes, packing, one-sided or file I/O); "
               "communicate ad_real buffers with the ad_mpi_* wrappers and AD_MPI_REAL",
               name);
  }
  /* Arguments: their own emission (an active count, say) unless replaced. */
  for (int i = 0; i < na; i++) {
    if (argk[i] < 0 || texts[argk[i]]) continue;
    CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
    if (pt_act(x, a)) texts[argk[i]] = pt_emit_to(x, a, 0);
  }
  if (rename && n > 0) {
    char low[64];
    size_t m = strlen(name + 4);
    if (m > 50) m = 50;
    for (size_t i = 0; i < m; i++) low[i] = (char)tolower((unsigned char)name[4 + i]);
    low[m] = 0;
    port_str s = {0};
    port_str_addf(&s, "ad_mpi_%s", low);
    /* The callee is the first child; it may be wrapped in an implicit cast. */
    if (!texts[0])
      texts[0] = port_str_take(&s);
    else
      free(port_str_take(&s));
    x->uses_mpi = 1;
  }
  char *r = pt_splice(x, c, n, k, texts, 0);
  for (int i = 0; i < n; i++) free(texts[i]);
  free(texts);
  return r;
}
