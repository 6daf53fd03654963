/* --fused: placeholder until the statement generator lands. */
#include "port_impl.h"

char *pt_fused_assign(pt_ctx *x, CXCursor stmt, CXCursor lhs, const char *op, CXCursor rhs) {
  (void)x; (void)stmt; (void)lhs; (void)op; (void)rhs;
  return NULL;
}
char *pt_fused_decl(pt_ctx *x, CXCursor var, CXCursor init, const char *type_text, const char *name) {
  (void)x; (void)var; (void)init; (void)type_text; (void)name;
  return NULL;
}
