/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI calls: a call whose buffer holds active data becomes its ad_mpi_ twin
 * with AD_MPI_REAL for MPI_DOUBLE; calls on passive buffers stay plain MPI.
 * Requests become ad_mpi_request once an active nonblocking call exists. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "port_impl.h"

typedef struct mpi_fn {
  const char *name;
  int buf[2], type[2]; /* argument positions of (buffer, datatype) pairs; -1: none */
  int buf3;            /* a second buffer sharing type[0] (reductions), -1: none */
  int request;         /* 1: Isend/Irecv, 2: Wait/Test family */
} mpi_fn;

static const mpi_fn fns[] = {
    {"MPI_Send", {0, -1}, {2, -1}, -1, 0},      {"MPI_Ssend", {0, -1}, {2, -1}, -1, 0},
    {"MPI_Bsend", {0, -1}, {2, -1}, -1, 0},     {"MPI_Rsend", {0, -1}, {2, -1}, -1, 0},
    {"MPI_Recv", {0, -1}, {2, -1}, -1, 0},      {"MPI_Isend", {0, -1}, {2, -1}, -1, 1},
    {"MPI_Irecv", {0, -1}, {2, -1}, -1, 1},     {"MPI_Wait", {-1, -1}, {-1, -1}, -1, 2},
    {"MPI_Waitall", {-1, -1}, {-1, -1}, -1, 2}, {"MPI_Waitany", {-1, -1}, {-1, -1}, -1, 2},
    {"MPI_Test", {-1, -1}, {-1, -1}, -1, 2},    {"MPI_Testall", {-1, -1}, {-1, -1}, -1, 2},
    {"MPI_Sendrecv", {0, 5}, {2, 7}, -1, 0},    {"MPI_Sendrecv_replace", {0, -1}, {2, -1}, -1, 0},
    {"MPI_Bcast", {0, -1}, {2, -1}, -1, 0},     {"MPI_Reduce", {0, -1}, {3, -1}, 1, 0},
    {"MPI_Allreduce", {0, -1}, {3, -1}, 1, 0},  {"MPI_Reduce_scatter_block", {0, -1}, {3, -1}, 1, 0},
    {"MPI_Scan", {0, -1}, {3, -1}, 1, 0},       {"MPI_Exscan", {0, -1}, {3, -1}, 1, 0},
    {"MPI_Gather", {0, 3}, {2, 5}, -1, 0},      {"MPI_Scatter", {0, 3}, {2, 5}, -1, 0},
    {"MPI_Allgather", {0, 3}, {2, 5}, -1, 0},   {"MPI_Alltoall", {0, 3}, {2, 5}, -1, 0},
    {"MPI_Gatherv", {0, 3}, {2, 6}, -1, 0},     {"MPI_Allgatherv", {0, 3}, {2, 6}, -1, 0},
    {"MPI_Scatterv", {0, 4}, {3, 6}, -1, 0},    {"MPI_Alltoallv", {0, 4}, {3, 7}, -1, 0},
    {NULL, {-1, -1}, {-1, -1}, -1, 0},
};

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

static enum CXChildVisitResult prescan(CXCursor c, CXCursor p, CXClientData d) {
  (void)p;
  pt_ctx *x = d;
  if (clang_getCursorKind(c) == CXCursor_CallExpr) {
    CXCursor fd = clang_getCursorReferenced(c);
    CXString s = clang_getCursorSpelling(fd);
    const mpi_fn *f = lookup(clang_getCString(s));
    if (f && f->request == 1 && buffer_active(x, c, f->buf[0])) x->mpi_requests = 1;
    clang_disposeString(s);
  }
  return CXChildVisit_Recurse;
}

void pt_mpi_prescan(pt_ctx *x, CXCursor root) { clang_visitChildren(root, prescan, x); }

char *pt_emit_mpi(pt_ctx *x, CXCursor c, const char *name, int n, const CXCursor *k, int na, const int *argk) {
  const mpi_fn *f = lookup(name);
  char **texts = calloc((size_t)n + 1, sizeof *texts);
  int rename = 0;
  if (f) {
    for (int p = 0; p < 2; p++) {
      if (f->buf[p] < 0) continue;
      int act = buffer_active(x, c, f->buf[p]) || (p == 0 && f->buf3 >= 0 && buffer_active(x, c, f->buf3));
      if (!act) continue;
      char *dt = arg_text(x, c, f->type[p]);
      if (strcmp(dt, "MPI_DOUBLE") && strcmp(dt, "AD_MPI_REAL")) {
        pt_error(x, clang_Cursor_getArgument(c, (unsigned)f->type[p]),
                 "%s on active data with the datatype '%s': derived datatypes and packed buffers of active data are "
                 "not supported; send the ad_real values as AD_MPI_REAL",
                 name, dt);
      } else if (f->type[p] < na && argk[f->type[p]] >= 0) {
        texts[argk[f->type[p]]] = port_strdup("AD_MPI_REAL");
      }
      free(dt);
      rename = 1;
    }
    if (f->request && x->mpi_requests) rename = 1;
  } else {
    for (int i = 0; i < na; i++) {
      CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
      char *t = pt_orig(x, a);
      int dbl = x->double_active && !strcmp(t, "MPI_DOUBLE");
      free(t);
      if (buffer_active(x, c, i) || (dbl && (!strncmp(name, "MPI_Type_", 9) || !strncmp(name, "MPI_Pack", 8)))) {
        pt_error(x, a,
                 "%s on active data has no Ariadne twin (derived datatypes, packing, one-sided or file I/O); "
                 "communicate ad_real buffers with the ad_mpi_* wrappers and AD_MPI_REAL",
                 name);
        break;
      }
    }
    if (x->mpi_requests &&
        (!strcmp(name, "MPI_Request_free") || !strcmp(name, "MPI_Cancel") || !strcmp(name, "MPI_Waitsome") ||
         !strcmp(name, "MPI_Testany") || !strcmp(name, "MPI_Testsome") || !strcmp(name, "MPI_Startall")))
      pt_error(x, c, "%s has no Ariadne twin for ad_mpi_request; use ad_mpi_wait/waitall/waitany/test/testall", name);
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
