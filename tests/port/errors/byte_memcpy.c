/* SPDX-License-Identifier: BSD-3-Clause */
/* Structs with active fields copied as bytes into an untyped buffer (through
 * void * casts and a void * variable): an ad_real is not a double in memory. */
/* expect-line: 16 copies the bytes of '(const void *)p' into 'buf' */
/* expect-line: 18 copies the bytes of 'src' into 'buf' */
/* expect-line: 19 the active data 'p' is passed to 'copy_bytes', which moves its parameter 'from' as bytes */
#include <string.h>
struct particle {
  double x, v;
  int id;
};
static void copy_bytes(void *to, const void *from, size_t n) { memcpy(to, from, n); }
/* Two arrays of the same active type (line 15): bytes are fine. */
void pack(const struct particle *p, int n, void *buf, struct particle *copy) {
  memcpy(copy, p, (size_t)n * sizeof *p);
  memcpy(buf, (const void *)p, (size_t)n * sizeof *p);
  const void *src = p;
  memcpy(buf, src, (size_t)n * sizeof *p);
  copy_bytes(buf, p, (size_t)n * sizeof *p);
}
