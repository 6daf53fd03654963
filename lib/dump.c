/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_tape_dump: a small tape as text, as a Graphviz graph, or as counts by
 * statement kind and record type. Reads the tape only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ariadne_tools.h>

#include "describe.h"
#include "tape_impl.h"

void ad__line_printf(ad__line *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = l->len < l->size ? l->size - l->len : 0;
  int k = vsnprintf(room ? l->buf + l->len : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) l->len += (size_t)k;
}

void ad__line_handles(ad__line *l, const char *key, const ad_index *h, size_t n) {
  ad__line_printf(l, " %s=", key);
  size_t shown = n < 64 ? n : 64;
  for (size_t k = 0; k < shown; k++) {
    if (h[k])
      ad__line_printf(l, "%s%%%llu", k ? "," : "", (unsigned long long)h[k]);
    else
      ad__line_printf(l, "%s-", k ? "," : "");
  }
  if (shown < n) ad__line_printf(l, ",...(%zu)", n);
}

static const char *const kind_names[4] = {"general", "plus", "diff", "minus"};
/* What a statement of each kind is, for a dump without operation names:
 * the kinds that store no partials say which operations make them. */
static const char *const kind_notes[4] = {
    NULL, "plus: every partial +1 (ad_add, ad_sum; with one argument a copy: ad_fmin, ad_fmax, a + constant)",
    "diff: partials +1 and -1 (ad_sub)", "minus: every partial -1 (ad_neg, constant - a)"};
/* The same in a word, for the graph's nodes. */
static const char *const kind_words[4] = {"statement", "sum", "difference", "negation"};

/* The description of record r (its ops' describe, or nothing). */
static const char *describe(const ad__record *r, char *buf, size_t size) {
  buf[0] = '\0';
  if (r->ops->describe) r->ops->describe(r->data, buf, size);
  return buf;
}

/* Walks the statements in order, with the records at their places. */
typedef struct walker {
  const ad_tape *t;
  FILE *out;
  int format;
  char desc[1024];
  /* statistics */
  uint64_t stmts, inputs, outputs, by_kind[4], args, partials, maxargs;
  /* handles some later statement or record uses (NULL if out of memory) */
  uint8_t *used;
  size_t nused;
  int explained[4]; /* a kind's note is written out at its first statement */
  /* handles made by records (their out= lists), as ranges */
  struct {
    uint64_t lo, hi;
    size_t rec;
  } made[256];
  int nmade;
  struct {
    char key[96];
    uint64_t count;
  } rtype[64];
  int nrtype;
} walker;

/* Where the list named key (" in=", " out=") of a record's description d
 * starts, or NULL: after a space, or at the start of d without it. */
static const char *list_of(const char *d, const char *key) {
  const char *p = strstr(d, key);
  if (p) return p + strlen(key);
  key++;
  return strncmp(d, key, strlen(key)) == 0 ? d + strlen(key) : NULL;
}

/* Remember the handles a record made (out=%A,%B,... or a truncated
 * consecutive list ",...(N)"), to tell them from inputs. */
static void note_outputs(walker *w, size_t ri, const char *d) {
  const char *p = list_of(d, " out=");
  if (!p) return;
  uint64_t first = 0, prev = 0, count = 0;
  int consecutive = 1;
  while (*p && *p != ' ') {
    if (*p == '%') {
      uint64_t h = strtoull(p + 1, (char **)&p, 10);
      if (count == 0)
        first = h;
      else if (h != prev + 1)
        consecutive = 0;
      prev = h;
      count++;
      if (!consecutive && w->nmade < 256) {
        w->made[w->nmade].lo = w->made[w->nmade].hi = h;
        w->made[w->nmade++].rec = ri;
      }
    } else if (*p == '(') {
      count = strtoull(p + 1, (char **)&p, 10);
    } else {
      p++;
    }
  }
  if (consecutive && count && w->nmade < 256) {
    w->made[w->nmade].lo = first;
    w->made[w->nmade].hi = first + count - 1;
    w->made[w->nmade++].rec = ri;
  } else if (!consecutive && w->nmade < 256) {
    w->made[w->nmade].lo = first; /* the first one too */
    w->made[w->nmade].hi = first;
    w->made[w->nmade++].rec = ri;
  }
}

/* The record that made handle h, or -1 for an input. Ranges older than h's
 * record are dropped as the walk passes them. */
static long made_by(walker *w, uint64_t h) {
  long r = -1;
  int j = 0;
  for (int k = 0; k < w->nmade; k++) {
    if (w->made[k].hi < h) continue;
    if (h >= w->made[k].lo) r = (long)w->made[k].rec;
    w->made[j++] = w->made[k];
  }
  w->nmade = j;
  return r;
}

static void record_out(walker *w, size_t ri) {
  const ad__record *r = &w->t->recs[ri];
  const char *d = describe(r, w->desc, sizeof w->desc);
  note_outputs(w, ri, d);
  if (w->format == AD_DUMP_TEXT) {
    fprintf(w->out, "record %zu after %%%llu: %s: %s\n", ri, (unsigned long long)r->pos, r->ops->name, d);
  } else if (w->format == AD_DUMP_DOT) {
    fprintf(w->out, "  r%zu [shape=box3d, style=filled, fillcolor=lightyellow, label=\"record %zu: %s\\n", ri, ri,
            r->ops->name);
    /* one field per label line ("\\n" in DOT), quotes and backslashes escaped */
    for (const char *p = d; *p; p++) {
      if (*p == ' ' && p != d) {
        fputs("\\n", w->out);
        continue;
      }
      if (*p == '"' || *p == '\\') fputc('\\', w->out);
      fputc(*p, w->out);
    }
    fputs("\"];\n", w->out);
    /* edges from the in= handles and to the out= handles */
    for (int io = 0; io < 2; io++) {
      const char *key = io ? " out=" : " in=", *p = strstr(d, key);
      if (!p && strncmp(d, key + 1, strlen(key + 1)) == 0) p = d - 1;
      if (!p) continue;
      p += strlen(key);
      while (*p && *p != ' ') {
        if (*p == '%') {
          unsigned long long h = strtoull(p + 1, (char **)&p, 10);
          if (io)
            fprintf(w->out, "  r%zu -> n%llu [style=dashed];\n", ri, h);
          else
            fprintf(w->out, "  n%llu -> r%zu [style=dashed];\n", h, ri);
        } else {
          p++;
        }
      }
    }
  } else {
    /* type: the ops name, and the description's first word if it is a kind (no '=') */
    char key[96];
    size_t k = strcspn(d, " ");
    if (k && !memchr(d, '=', k))
      snprintf(key, sizeof key, "%s: %.*s", r->ops->name, (int)(k < 40 ? k : 40), d);
    else
      snprintf(key, sizeof key, "%s", r->ops->name);
    int j = 0;
    while (j < w->nrtype && strcmp(w->rtype[j].key, key) != 0) j++;
    if (j == w->nrtype && j < 64) {
      snprintf(w->rtype[j].key, sizeof w->rtype[j].key, "%s", key);
      w->rtype[j].count = 0;
      w->nrtype++;
    }
    if (j < 64) w->rtype[j].count++;
  }
}

/* Mark the handles of a record's in= list as used. */
static void note_inputs(walker *w, const char *d) {
  const char *p = list_of(d, " in=");
  if (!p) return;
  while (*p && *p != ' ') {
    if (*p == '%') {
      unsigned long long h = strtoull(p + 1, (char **)&p, 10);
      if (w->used && h < w->nused) w->used[h] = 1;
    } else {
      p++;
    }
  }
}

/* An output: a statement whose value no later statement or record uses. */
static int is_output(const walker *w, ad_index h) { return w->used && h < w->nused && !w->used[h]; }

/* A label text for DOT: quotes and backslashes escaped. */
static void dot_text(FILE *out, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', out);
    fputc(*s, out);
  }
}

static void statement_out(walker *w, ad_index h, uint32_t c, uint32_t kind, const ad_index *idx, const double *par) {
  w->stmts++;
  double v = 0.0;
  const char *name = ad__watch_name(w->t, h, &v);
  int output = is_output(w, h);
  long from = c == 0 ? made_by(w, h) : -1;
  if (c == 0 && from < 0)
    w->inputs++;
  else if (c == 0)
    w->outputs++;
  else
    w->by_kind[kind]++;
  w->args += c;
  if (kind == AD__KIND_GENERAL) w->partials += c;
  if (c > w->maxargs) w->maxargs = c;
  if (w->format == AD_DUMP_TEXT) {
    fprintf(w->out, "%%%llu =", (unsigned long long)h);
    if (c == 0 && from < 0) fputs(" input", w->out);
    if (c == 0 && from >= 0) fprintf(w->out, " output of record %ld", from);
    if (c && name) fprintf(w->out, " %s:", name);
    for (uint32_t j = 0; j < c; j++) {
      double p = kind == AD__KIND_GENERAL ? par[j] : ad__unit(kind, j);
      fprintf(w->out, "%s%.17g*%%%llu", j ? " + " : " ", p, (unsigned long long)idx[j]);
    }
    /* "   # value V; what the kind is; output", each part when known */
    int notes = 0;
    if (name) fprintf(w->out, "%svalue %.17g", notes++ ? "; " : "   # ", v);
    if (c && kind != AD__KIND_GENERAL) {
      int explain = !name && !w->explained[kind];
      w->explained[kind] |= explain;
      fprintf(w->out, "%s%s", notes++ ? "; " : "   # ", explain ? kind_notes[kind] : kind_names[kind]);
    }
    if (output) fprintf(w->out, "%s%s", notes++ ? "; " : "   # ", c == 0 && from < 0 ? "unused" : "output");
    fputc('\n', w->out);
  } else if (w->format == AD_DUMP_DOT) {
    /* label: the handle, what made it, its value; outputs drawn double */
    char what[128];
    if (c == 0 && from < 0)
      snprintf(what, sizeof what, "input");
    else if (c == 0)
      snprintf(what, sizeof what, "output of record %ld", from);
    else
      snprintf(what, sizeof what, "%s", name ? name : kind_words[kind]);
    fprintf(w->out, "  n%llu [%s%slabel=\"%%%llu\\n", (unsigned long long)h,
            c == 0 && from < 0 ? "shape=box, style=filled, fillcolor=lightblue, "
            : c == 0           ? "shape=box, "
                               : "",
            output ? "peripheries=2, color=darkgreen, " : "", (unsigned long long)h);
    dot_text(w->out, what);
    if (name) fprintf(w->out, "\\n= %.6g", v);
    if (output) fputs(c == 0 && from < 0 ? "\\nunused" : "\\noutput", w->out);
    fputs("\"];\n", w->out);
    for (uint32_t j = 0; j < c; j++) {
      double p = kind == AD__KIND_GENERAL ? par[j] : ad__unit(kind, j);
      fprintf(w->out, "  n%llu -> n%llu [label=\"%.6g\"];\n", (unsigned long long)idx[j], (unsigned long long)h, p);
    }
  }
}

int ad_tape_dump(const ad_tape *t, FILE *out, ad_dump_format format) {
  static const char fn[] = "ad_tape_dump";
  if (!t) return ad__arg_tape(t, fn);
  if (!out) return ad__arg_error(t, "%s: out is NULL", fn);
  if (format < AD_DUMP_TEXT || format > AD_DUMP_STATS)
    return ad__arg_error(t, "%s: format %d is not an ad_dump_format", fn, (int)format);
  walker *w = calloc(1, sizeof *w);
  if (!w) return AD_ERR_NOMEM;
  w->t = t;
  w->out = out;
  w->format = format;
  ad_stats st;
  ad_tape_stats(t, &st);
  if (format == AD_DUMP_TEXT)
    fprintf(out, "# Ariadne tape: %llu statements, %llu arguments, %llu records%s%s\n%s\n",
            (unsigned long long)st.statements, (unsigned long long)st.arguments, (unsigned long long)st.records,
            t->err ? "; error: " : "", t->err ? t->msg : "",
            ad__watching(t) ? "# operation names and values recorded; output: used by no later statement or record"
                            : "# output: used by no later statement or record; operation names and values: "
                              "ad_tape_set_record_names(tape, 1) or ARIADNE_RECORD_NAMES=1 before recording");
  else if (format == AD_DUMP_DOT)
    fputs("digraph tape {\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontsize=8];\n", out);
  /* Which values are used later: a statement no one uses is an output. */
  w->nused = (size_t)t->rec.next + 1;
  w->used = calloc(w->nused, 1);
  if (w->used) {
    for (const ad__block *b = t->head; b; b = b->next) {
      uint32_t na = b == t->cur ? t->rec.na : b->na;
      for (uint32_t a = 0; a < na; a++)
        if (b->idx[a] < w->nused) w->used[b->idx[a]] = 1;
      if (b == t->cur) break;
    }
    for (size_t k = 0; k < t->nrec; k++) note_inputs(w, describe(&t->recs[k], w->desc, sizeof w->desc));
  }
  size_t ri = 0;
  /* The current block's counts live in the recorder while it records. */
  for (const ad__block *b = t->head; b; b = b->next) {
    uint32_t ns = b == t->cur ? t->rec.ns : b->ns, na = 0, np = 0;
    for (uint32_t s = 0; s < ns; s++) {
      ad_index h = b->base + s + 1;
      while (ri < t->nrec && t->recs[ri].pos < h) record_out(w, ri++);
      uint32_t c = b->cnt[s] & AD__MAX_ARGS, kind = b->cnt[s] >> 6;
      statement_out(w, h, c, kind, b->idx + na, b->par + np);
      na += c;
      if (kind == AD__KIND_GENERAL) np += c;
    }
    if (b == t->cur) break;
  }
  while (ri < t->nrec) record_out(w, ri++);

  if (format == AD_DUMP_DOT) {
    fputs("}\n", out);
  } else if (format == AD_DUMP_STATS) {
    fprintf(out, "# Ariadne tape statistics\n");
    fprintf(out, "statements %llu\n", (unsigned long long)w->stmts);
    fprintf(out, "  inputs %llu\n", (unsigned long long)w->inputs);
    fprintf(out, "  record_outputs %llu\n", (unsigned long long)w->outputs);
    for (int k = 0; k < 4; k++) fprintf(out, "  %s %llu\n", kind_names[k], (unsigned long long)w->by_kind[k]);
    fprintf(out, "arguments %llu\n", (unsigned long long)w->args);
    fprintf(out, "partials %llu\n", (unsigned long long)w->partials);
    fprintf(out, "max_arguments %llu\n", (unsigned long long)w->maxargs);
    fprintf(out, "records %zu\n", t->nrec);
    for (int j = 0; j < w->nrtype; j++)
      fprintf(out, "  %s %llu\n", w->rtype[j].key, (unsigned long long)w->rtype[j].count);
    fprintf(out, "bytes_used %zu\n", st.bytes_used);
    fprintf(out, "bytes_reserved %zu\n", st.bytes_reserved);
    fprintf(out, "bytes_adjoints %zu\n", st.bytes_adjoints);
  }
  free(w->used);
  free(w);
  return ferror(out) ? AD_ERR_IO : AD_OK;
}

int ad_tape_dump_path(const ad_tape *t, const char *path, ad_dump_format format) {
  if (!t) return ad__arg_tape(t, "ad_tape_dump_path");
  if (!path) return ad__arg_error(t, "ad_tape_dump_path: path is NULL");
  FILE *f = fopen(path, "w");
  if (!f) return AD_ERR_IO;
  int rc = ad_tape_dump(t, f, format);
  if (fclose(f) != 0 && rc == AD_OK) rc = AD_ERR_IO;
  return rc;
}
