/* SPDX-License-Identifier: BSD-3-Clause */
/* Sweep tags: the tag on the private communicator of each adjoint or
 * tangent message.
 *
 * The messages a tape exchanged with one partner in one direction are
 * numbered in an order that both sides know without telling each other: by
 * tag, then by sequence number within the tag's stream, counted from the
 * recording's first message of that stream. The sender's and the receiver's
 * notes hold the same tags with the same ranges of sequence numbers (the
 * handshake compares counts and signatures of tags and lengths), so both
 * give a message the same number, and no two messages of one sweep share
 * one. That number is the sweep tag: it does not depend on how many tags the
 * program uses or how large they are, only on how many messages the tape
 * exchanged with the partner, which MPI_TAG_UB bounds (see comm.c).
 *
 * Numbering in the order of the partner's own recording would be as good,
 * but a receiver cannot know it: messages of different tags may be received
 * in another order than they were sent. */
#include <stdlib.h>
#include <string.h>

#include "mpi_impl.h"

int ad__chans_note(ad__chans *s, int tag, int k) {
  uint64_t key = (uint64_t)(uint32_t)tag + 1;
  const int *found = ad__kmap_find(&s->at, key);
  int i = found ? *found - 1 : s->n;
  if (!found) {
    if (s->n == s->cap) {
      int ncap = s->cap ? 2 * s->cap : 4;
      ad__chan *nv = realloc(s->v, (size_t)ncap * sizeof *nv);
      if (!nv) return AD_ERR_NOMEM;
      s->v = nv;
      s->cap = ncap;
    }
    int *at = ad__kmap_slot(&s->at, key);
    if (!at) return AD_ERR_NOMEM;
    *at = ++s->n;
    s->v[i].tag = tag;
    s->v[i].kmin = s->v[i].kmax = -1;
    s->v[i].base = 0;
  }
  ad__chan *e = &s->v[i];
  if (k >= 0) {
    if (e->kmin < 0 || k < e->kmin) e->kmin = k;
    if (k > e->kmax) e->kmax = k;
  }
  s->stale = 1;
  return AD_OK;
}

typedef struct by_tag {
  int tag, i;
} by_tag;

static int by_tag_cmp(const void *a, const void *b) {
  int x = ((const by_tag *)a)->tag, y = ((const by_tag *)b)->tag;
  return (x > y) - (x < y);
}

/* Each stream takes the sequence numbers from its first to its last noted
 * message, including numbers of messages the tape did not note (exchanged
 * while another tape recorded), which keeps the numbering a sum of ranges
 * that both sides see alike. */
int ad__chans_number(ad__chans *s) {
  if (!s->stale) return AD_OK;
  by_tag *o = malloc((size_t)(s->n ? s->n : 1) * sizeof *o);
  if (!o) return AD_ERR_NOMEM;
  for (int i = 0; i < s->n; i++) {
    o[i].tag = s->v[i].tag;
    o[i].i = i;
  }
  qsort(o, (size_t)s->n, sizeof *o, by_tag_cmp);
  int64_t next = 0;
  for (int j = 0; j < s->n; j++) {
    ad__chan *e = &s->v[o[j].i];
    e->base = next;
    if (e->kmin >= 0) next += (int64_t)e->kmax - e->kmin + 1;
  }
  free(o);
  s->total = next;
  s->stale = 0;
  return AD_OK;
}

int64_t ad__chans_place(const ad__chans *s, int tag, int k) {
  uint64_t key = (uint64_t)(uint32_t)tag + 1;
  const int *at = ad__kmap_find(&s->at, key);
  if (!at || s->stale) return -1;
  const ad__chan *e = &s->v[*at - 1];
  if (e->kmin < 0 || k < e->kmin || k > e->kmax) return -1;
  return e->base + (k - e->kmin);
}

void ad__chans_free(ad__chans *s) {
  free(s->v);
  ad__kmap_free(&s->at);
  memset(s, 0, sizeof *s);
}
