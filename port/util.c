/* SPDX-License-Identifier: BSD-3-Clause */
/* Strings for ariadne-port. Allocation failures end the program: the tool is
 * a short-lived command and has nothing to roll back. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port.h"

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) {
    fprintf(stderr, "ariadne-port: out of memory\n");
    exit(2);
  }
  return q;
}

void port_str_addn(port_str *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void port_str_add(port_str *b, const char *s) { port_str_addn(b, s, strlen(s)); }

void port_str_addf(port_str *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    port_str_addn(b, tmp, (size_t)n);
    return;
  }
  char *big = xrealloc(NULL, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  port_str_addn(b, big, (size_t)n);
  free(big);
}

char *port_str_take(port_str *b) {
  char *s = b->s ? b->s : port_strdup("");
  b->s = NULL;
  b->n = b->cap = 0;
  return s;
}

char *port_strndup(const char *s, size_t n) {
  char *d = xrealloc(NULL, n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *port_strdup(const char *s) { return port_strndup(s, strlen(s)); }
