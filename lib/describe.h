/* SPDX-License-Identifier: BSD-3-Clause */
/* Private: building the one-line descriptions of records for ad_tape_dump
 * (the `describe` member of ad__record_ops). Not installed. */
#ifndef ARIADNE_DESCRIBE_H
#define ARIADNE_DESCRIBE_H

#include <stddef.h>

#include "tape_impl.h"

/* A line being written into buf[0..size): appends are cut at the end, and
 * `len` counts what would have been written, as snprintf does. */
typedef struct ad__line {
  char *buf;
  size_t size, len;
} ad__line;

void ad__line_printf(ad__line *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* " key=%A,%B,-" : handles, with "-" for a passive (0) one; at most 64
 * listed, then ",...(N)" with the total. */
void ad__line_handles(ad__line *l, const char *key, const ad_index *h, size_t n);

#endif
