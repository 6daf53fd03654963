/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of ariadne-port shared by rewrite.c, decl.c, mpi.c and fused.c. */
#ifndef ARIADNE_PORT_IMPL_H
#define ARIADNE_PORT_IMPL_H

#include "port.h"

#define PT_MAX_EXPAND 256
#define PT_MAX_OWN 256
#define AD_STMT_MAX_ARGS_PORT 63 /* ad_custom's arguments in one statement (AD_STMT_MAX_ARGS) */

typedef struct pt_edit {
  unsigned b, e; /* replace [b, e) of the file */
  char *text;
} pt_edit;

typedef struct pt_macro {
  unsigned b, e; /* the expansion's text */
  CXCursor cur;
} pt_macro;

typedef struct pt_ctx {
  const port_options *o;
  const char *path;
  CXIndex index;
  CXTranslationUnit tu;
  CXFile file;
  const char *buf;
  size_t len;
  int double_active;
  int errors;
  unsigned reported[4096];
  int nreported;
  int record_depth;
  pt_edit *edits;
  int nedits, capedits;
  pt_macro *macros;      /* sorted by start */
  unsigned *macro_reach; /* macro_reach[i]: the largest end of macros[0..i] */
  int nmacros, capmacros;
  int expand[PT_MAX_EXPAND]; /* indices into macros[] to expand in place */
  int nexpand;
  int static_init; /* emitting an initializer of static storage */
  CXType fn_ret;   /* return type of the function being ported */
  int in_function;
  unsigned fn_begin; /* where the function being ported starts */
  int uses_mpi;        /* an MPI call was renamed: include ariadne_mpi.h */
  int mpi_requests;    /* an active nonblocking call exists: requests become ad_mpi_request */
  int mpi_messages;    /* an active matched receive exists: MPI_Message becomes ad_mpi_message */
  int mpi_windows;     /* a window on active data exists: fences and frees become ad_mpi_* */
  char *mpi_types[64]; /* datatypes built on MPI_DOUBLE (then AD_MPI_REAL) by the file's constructors */
  int nmpi_types;
  int no_fuse;            /* inside a for header: statements cannot be blocks */
  CXFile own[PT_MAX_OWN]; /* the files whose code is ported in this unit (unity.c) */
  int nown;
  CXCursor *passive; /* the local doubles of the function being ported that stay double (activity.c) */
  int npassive;
  int block_redo; /* a preaccumulated temporary was demoted: port the text again (block.c) */
} pt_ctx;

void pt_own_files(pt_ctx *x, const char *unit);
int pt_own_location(pt_ctx *x, CXSourceLocation loc);

unsigned pt_off(CXSourceLocation loc);
unsigned pt_b(CXCursor c);
unsigned pt_e(CXCursor c);
int pt_in_macro(pt_ctx *x, CXCursor c);
char *pt_orig(pt_ctx *x, CXCursor c);
char *pt_cat(const char *a, const char *b, const char *c);
int pt_children(CXCursor c, CXCursor **out);
void pt_error(pt_ctx *x, CXCursor c, const char *fmt, ...);
int pt_type_active(pt_ctx *x, CXType t);
int pt_type_holds_active(pt_ctx *x, CXType t);
int pt_type_active_float_loss(pt_ctx *x, CXType t);
char *pt_spelling(CXCursor c); /* the cursor's spelling, malloc'd */
/* The last definition of the object-like macro NAME in the translation unit,
 * or a null cursor; the one token such a definition stands for (`#define REAL
 * DTYPE` gives "DTYPE"; a keyword only when `keywords`), malloc'd, or NULL. */
CXCursor pt_macro_named(pt_ctx *x, const char *name);
char *pt_macro_alias(pt_ctx *x, CXCursor def, int keywords);
int pt_pointer_like(CXType t); /* a pointer or an array */

/* checks.c: what would compile but differentiate wrongly.
 * Storing the active `value` into passive floating storage of type `target`
 * (`what` names it) would drop its derivative: reported at `at`, unless the
 * value went through an explicit cast, which says only the value is wanted.
 * pt_passive_store_lvalue does so for an assignment `lhs = value`. */
void pt_passive_store(pt_ctx *x, CXCursor at, CXType target, CXCursor value, const char *what);
void pt_passive_store_lvalue(pt_ctx *x, CXCursor at, CXCursor lhs, CXCursor value);
/* Active data moved as bytes: memcpy/memmove `call` between storage of
 * different types; an MPI call with a byte datatype on a buffer whose active
 * data hides behind a cast or a void * variable; argument `a` (number i) of
 * a call of the ported function `fd` that moves that parameter as bytes. */
void pt_check_byte_copy(pt_ctx *x, CXCursor call, const char *name);
void pt_check_byte_mpi(pt_ctx *x, CXCursor call, const char *name, int na);
void pt_check_byte_helper(pt_ctx *x, CXCursor fd, const char *name, CXCursor a, unsigned i);
int pt_is_float(CXType t);
CXType pt_fn_type(CXType t);
const char *pt_binop(pt_ctx *x, CXCursor c);
const char *pt_unop(pt_ctx *x, CXCursor c, CXCursor child);
CXCursor pt_last_expr(CXCursor c);
CXCursor pt_strip(CXCursor c);
int pt_same_expr(CXCursor a, CXCursor b);
int pt_ported_function(pt_ctx *x, CXCursor fd);
/* Is d a declaration the port itself writes (named ad__...)? It is left as it is. */
int pt_port_own(CXCursor d);
/* Is name one of the --active-type names? (Counts it as used by the inputs.) */
int pt_active_name(pt_ctx *x, const char *name);
int pt_math_twin(const char *name);
int pt_act(pt_ctx *x, CXCursor c);
int pt_pointer_of_file(pt_ctx *x, CXCursor callee);
char *pt_splice(pt_ctx *x, CXCursor c, int n, const CXCursor *k, char **texts, int types);
char *pt_emit(pt_ctx *x, CXCursor c, int stmt);
char *pt_emit_to(pt_ctx *x, CXCursor c, int want_active);
int pt_suffixed(pt_ctx *x, CXCursor d);
char *pt_emit_mpi(pt_ctx *x, CXCursor c, const char *name, int n, const CXCursor *k, int na, const int *argk);
void pt_mpi_prescan(pt_ctx *x, CXCursor root);
int pt_mpi_changes(pt_ctx *x, CXCursor call, const char *name);
void pt_add_edit(pt_ctx *x, unsigned b, unsigned e, char *text);
/* Whether c assigns, increments or calls anything (macro expansions included). */
int pt_side_effects(pt_ctx *x, CXCursor c);
char *pt_foreign_file(pt_ctx *x, CXCursor d);
void pt_check_foreign_decl(pt_ctx *x, CXCursor fd, CXCursor at);

/* --fused: replace a whole statement by a block that computes the value and
 * the partials and pushes one tape statement. Each adds its edit and returns
 * non-NULL, or returns NULL when the statement is better left op by op. */
char *pt_fused_assign(pt_ctx *x, CXCursor stmt, CXCursor lhs, const char *op, CXCursor rhs);
char *pt_fused_return(pt_ctx *x, CXCursor ret, CXCursor value);
char *pt_fused_decl(pt_ctx *x, CXCursor declstmt, CXCursor var, CXCursor init, const char *decl_text);
char *pt_fused_temp_assign(pt_ctx *x, CXCursor stmt, CXCursor var, CXCursor rhs);
/* Count an assignment that --fused leaves per operation (why: the reason, for --report). */
void pt_fused_skip(pt_ctx *x, CXCursor stmt, CXCursor rhs, int compound, const char *why);
/* port_file's rounds: each starts afresh; the last one's counts and report lines are kept. */
void pt_fused_round(void);
void pt_fused_commit(pt_ctx *x);
/* activity.c: before a function's body is ported, find its local doubles
 * that no active value reaches (they stay double); pt_activity_end forgets
 * them. pt_local_passive: is declaration d one of them? */
void pt_activity(pt_ctx *x, CXCursor body);
void pt_activity_end(pt_ctx *x);
int pt_local_passive(pt_ctx *x, CXCursor d);
char *pt_retype_text(pt_ctx *x, const char *p, size_t n);
/* The keyword ("double", "float") that the identifier p[i, j) of the file's
 * text stands for, as an object-like macro expanding to it; NULL if none. */
const char *pt_type_macro(pt_ctx *x, const char *p, size_t i, size_t j);

/* block.c (--fused): temporaries that are preaccumulated, not taped.
 * pt_block_round starts a round of port_file; pt_block_plan finds a function
 * body's temporaries (after pt_activity), pt_block_end checks that every
 * active read of each was folded into a generated statement and returns
 * nonzero when one was not (it is demoted: port the text again).
 * pt_block_stmt(c, end) is called before and after each statement walked. */
void pt_block_round(pt_ctx *x);
void pt_block_plan(pt_ctx *x, CXCursor body);
int pt_block_end(pt_ctx *x);
void pt_block_stmt(CXCursor c, int end);
CXCursor pt_block_init(pt_ctx *x, CXCursor v); /* `v = init` of a scalar declaration, or null */
int pt_block_temp(CXCursor d);                /* the temporary declared by d, or -1 */
int pt_block_assign_temp(CXCursor stmt);      /* the temporary this assignment defines, or -1 */
long pt_block_epoch(void);
int pt_block_new_id(void);
void pt_block_generated(int i, int id, int nargs, char **args, char **keys);
void pt_block_operands(int i, int *id, int *nargs, char *const **args, char *const **keys);
void pt_block_handled(int i);
int pt_block_reads(int i);  /* the active reads the plan counted */
void pt_block_taped(int i); /* generated as an ordinary taped variable after all */
int pt_block_is_taped(int i);
void pt_block_name(int i, char *out, size_t n);
/* fused.c: count (and for --report, list) a preaccumulated temporary. */
void pt_fused_preaccumulated(pt_ctx *x, CXCursor decl, unsigned line, unsigned col, int nargs, int reads);
/* fused.c: a line for --report (printf-style), kept with the round's. */
void pt_fused_note(pt_ctx *x, const char *fmt, ...);
/* spec.c (--fused): a loop whose body's statements before an early exit
 * can be taken back when the exit is taken (see spec.c). */
void pt_spec_loop(pt_ctx *x, CXCursor loop);
int pt_near_complex(const char *p, size_t b, size_t e, size_t len);

#endif
