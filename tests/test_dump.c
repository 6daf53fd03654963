/* SPDX-License-Identifier: BSD-3-Clause */
/* ad_tape_dump: the text listing, the Graphviz graph and the statistics of a
 * small tape whose structure is known from the program that recorded it
 * (handles from the ad_real values, partials in closed form), read back by a
 * parser of the documented line formats. */
#define _POSIX_C_SOURCE 200809L
#include <ariadne_checkpoint.h>
#include <ariadne_tools.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int ext_reverse(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                       const double *ybar) {
  (void)ud, (void)nin, (void)nout, (void)x, (void)y;
  xbar[0] += ybar[0] + ybar[1];
  xbar[1] += ybar[0] - ybar[1];
  return 0;
}
static const ad_external_ops ext_ops = {ext_reverse, NULL, NULL, "sum and difference"};

static int step(void *ud, int64_t i, size_t *n, ad_real *s, size_t *pb, void *ps) {
  (void)ud, (void)i, (void)n, (void)pb, (void)ps;
  s[0] = ad_mul(1.5, s[0]);
  return 0;
}

/* What a parsed statement line holds. */
typedef struct stmt {
  int seen, input, from_record;
  int nargs;
  unsigned long long arg[8];
  double par[8];
  char op[32];      /* "OP:" before the terms, "" if none */
  int has_value;    /* "value V" among the notes */
  double value;
  int output, unused;
  char notes[256];  /* everything after "   # " */
} stmt;

#define MAXH 64
static stmt S[MAXH];
static char rec_line[4][1024];
static int nrec;

/* The notes after "   # ", separated by "; ": "value V", a kind, "output",
 * "unused". */
static void parse_notes(stmt *s, const char *p) {
  snprintf(s->notes, sizeof s->notes, "%s", p);
  while (*p) {
    size_t k = strcspn(p, ";");
    if (sscanf(p, "value %lg", &s->value) == 1) s->has_value = 1;
    if (k == 6 && strncmp(p, "output", 6) == 0) s->output = 1;
    if (k == 6 && strncmp(p, "unused", 6) == 0) s->unused = 1;
    p += k;
    while (*p == ';' || *p == ' ') p++;
  }
}

/* Parse the text dump: "%H = input", "%H = output of record R",
 * "%H = [OP:] P*%A + P*%B ...", each with optional "   # NOTES", and
 * "record R after %H: NAME: DESC". */
static void parse_text(FILE *f) {
  char line[1024];
  memset(S, 0, sizeof S);
  nrec = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '#') continue;
    unsigned long long h;
    int r, used;
    if (sscanf(line, "record %d after %%%llu: %n", &r, &h, &used) == 2) {
      CHECK_INT(r, nrec);
      if (nrec < 4) snprintf(rec_line[nrec], sizeof rec_line[nrec], "%s", line);
      nrec++;
      continue;
    }
    if (!CHECK(sscanf(line, "%%%llu = %n", &h, &used) == 1 && h < MAXH)) continue;
    stmt *s = &S[h];
    s->seen++;
    char *notes = strstr(line, "   # ");
    if (notes) {
      parse_notes(s, notes + 5);
      *notes = '\0';
    }
    const char *p = line + used;
    if (strcmp(p, "input") == 0) {
      s->input = 1;
      continue;
    }
    if (sscanf(p, "output of record %d", &r) == 1) {
      s->from_record = r + 1;
      continue;
    }
    int opn = -1;
    if (*p >= 'a' && *p <= 'z' && sscanf(p, "%31[a-z_0-9]:%n", s->op, &opn) == 1 && opn > 0)
      p += opn;
    else
      s->op[0] = '\0';
    while (*p && *p != '#') {
      double par;
      unsigned long long a;
      if (!CHECK(sscanf(p, "%lg*%%%llu%n", &par, &a, &used) == 2)) break;
      if (s->nargs < 8) {
        s->par[s->nargs] = par;
        s->arg[s->nargs] = a;
      }
      s->nargs++;
      p += used;
      while (*p == ' ' || *p == '+') p++;
    }
  }
}

static double partial_of(const stmt *s, ad_real a) {
  double sum = 0.0;
  int found = 0;
  for (int k = 0; k < s->nargs && k < 8; k++)
    if (s->arg[k] == a.i) sum += s->par[k], found = 1;
  return found ? sum : NAN;
}

/* A handle list "key=%A,%B" in a record line, as handles. */
static int handles_of(const char *line, const char *key, unsigned long long *h, int max) {
  char pat[16];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *p = strstr(line, pat);
  if (!p) return -1;
  p += strlen(pat);
  int n = 0;
  while (*p && *p != ' ') {
    if (*p == '%' && n < max) h[n++] = strtoull(p + 1, (char **)&p, 10);
    else p++;
  }
  return n;
}

static void dump_tape(int names) {
  ad_tape *t = ad_tape_create();
  ad_tape_set_record_names(t, names);
  ad_tape_begin(t);
  ad_real x1 = ad_input(2.0), x2 = ad_input(3.0);
  ad_real a = ad_mul(x1, x2);    /* partials 3, 2 */
  ad_real b = ad_add(a, x1);     /* plus: 1, 1 */
  ad_real c = ad_sin(b);         /* cos(8) */
  ad_real in[2] = {x1, c}, out[2] = {ad_const(2.0 + sin(8.0)), ad_const(2.0 - sin(8.0))};
  CHECK_INT(ad_external(&ext_ops, NULL, 2, in, 2, out), AD_OK);
  ad_real d = ad_sub(out[0], out[1]); /* diff: 1, -1 */
  ad_ckpt_options o;
  ad_ckpt_options_default(&o);
  o.steps = 3;
  o.snapshots = 2;
  ad_real st[1] = {d};
  CHECK_INT(ad_checkpoint_loop(&o, step, NULL, 1, st, 0, NULL), AD_OK);
  ad_real J = ad_mul(st[0], x2); /* partials x2 = 3, value of st */
  ad_tape_end(t);

  /* ---- text ---- */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK_INT(ad_tape_dump(t, f, AD_DUMP_TEXT), AD_OK);
  fclose(f);
  f = fmemopen(buf, len, "r");
  parse_text(f);
  fclose(f);
  if (getenv("ARIADNE_TEST_VERBOSE")) fputs(buf, stdout);
  free(buf);

  CHECK(S[x1.i].input && S[x2.i].input);
  CHECK_INT(S[a.i].nargs, 2);
  CHECK_SAME(partial_of(&S[a.i], x1), 3.0);
  CHECK_SAME(partial_of(&S[a.i], x2), 2.0);
  CHECK_INT(S[b.i].nargs, 2);
  CHECK_SAME(partial_of(&S[b.i], a), 1.0);
  CHECK_SAME(partial_of(&S[b.i], x1), 1.0);
  CHECK_INT(S[c.i].nargs, 1);
  CHECK_CLOSE(partial_of(&S[c.i], b), cos(8.0), 1e-15);
  CHECK_INT(S[out[0].i].from_record, 1);
  CHECK_INT(S[out[1].i].from_record, 1);
  CHECK_INT(S[d.i].nargs, 2);
  CHECK_SAME(partial_of(&S[d.i], out[0]), 1.0);
  CHECK_SAME(partial_of(&S[d.i], out[1]), -1.0);
  CHECK_INT(S[st[0].i].from_record, 2);
  CHECK_SAME(partial_of(&S[J.i], x2), ad_value(st[0]));
  CHECK_SAME(partial_of(&S[J.i], st[0]), 3.0);
  /* Outputs: J only, which no later statement or record uses. */
  for (unsigned long long h = 1; h <= J.i; h++) CHECK_INT(S[h].output, h == J.i);
  for (unsigned long long h = 1; h <= J.i; h++) CHECK_INT(S[h].unused, 0);
  if (!names) {
    /* no operation names or values, and the kinds without partials explained */
    for (unsigned long long h = 1; h <= J.i; h++) CHECK(S[h].op[0] == '\0' && !S[h].has_value);
    CHECK_CONTAINS(S[b.i].notes, "plus: every partial +1 (ad_add");
    CHECK_CONTAINS(S[d.i].notes, "diff: partials +1 and -1 (ad_sub)");
  } else {
    /* each statement's operation, and its value as the program computed it */
    const struct {
      ad_real v;
      const char *op;
    } want[] = {{a, "ad_mul"}, {b, "ad_add"}, {c, "ad_sin"}, {d, "ad_sub"}, {J, "ad_mul"}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
      CHECK_STR(S[want[k].v.i].op, want[k].op);
      CHECK(S[want[k].v.i].has_value);
      CHECK_SAME(S[want[k].v.i].value, ad_value(want[k].v));
    }
    const ad_real known[] = {x1, x2, out[0], out[1], st[0]};
    for (size_t k = 0; k < sizeof known / sizeof *known; k++) CHECK_SAME(S[known[k].i].value, ad_value(known[k]));
    CHECK_CONTAINS(S[b.i].notes, "plus");
  }
  /* every handle listed once, and nothing else */
  for (unsigned long long h = 1; h < MAXH; h++) CHECK_INT(S[h].seen, h <= J.i ? 1 : 0);
  CHECK_INT(nrec, 2);
  unsigned long long hin[4], hout[4];
  CHECK_CONTAINS(rec_line[0], "external function: name=\"sum and difference\"");
  CHECK_INT(handles_of(rec_line[0], "in", hin, 4), 2);
  CHECK_INT(hin[0], x1.i);
  CHECK_INT(hin[1], c.i);
  CHECK_INT(handles_of(rec_line[0], "out", hout, 4), 2);
  CHECK_INT(hout[0], out[0].i);
  CHECK_INT(hout[1], out[1].i);
  CHECK_CONTAINS(rec_line[0], " tangent=no");
  unsigned long long after;
  CHECK(sscanf(rec_line[0], "record 0 after %%%llu", &after) == 1 && after == c.i);
  CHECK_CONTAINS(rec_line[1], "checkpointed loop: schedule=binomial steps=3 snapshots=2 state=1");
  CHECK_INT(handles_of(rec_line[1], "in", hin, 4), 1);
  CHECK_INT(hin[0], d.i);
  CHECK_INT(handles_of(rec_line[1], "out", hout, 4), 1);
  CHECK_INT(hout[0], st[0].i);

  /* ---- statistics ---- */
  f = open_memstream(&buf, &len);
  CHECK_INT(ad_tape_dump(t, f, AD_DUMP_STATS), AD_OK);
  fclose(f);
  struct { const char *key; long long want; } want[] = {
      {"statements", 10}, {"inputs", 2}, {"record_outputs", 3}, {"general", 3}, {"plus", 1}, {"diff", 1},
      {"minus", 0}, {"arguments", 9}, {"partials", 5}, {"records", 2}, {"external function", 1},
      {"checkpointed loop", 1}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    CHECK_CONTEXT("stats key %s", want[k].key);
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s ", want[k].key);
    const char *p = strstr(buf, pat);
    if (!p) {
      snprintf(pat, sizeof pat, "\n  %s ", want[k].key);
      p = strstr(buf, pat);
    }
    if (CHECK(p != NULL)) CHECK_INT(atoll(p + strlen(pat)), want[k].want);
  }
  CHECK_CONTEXT("dot");
  ad_stats s;
  ad_tape_stats(t, &s);
  CHECK_INT(s.statements, 10);
  CHECK_INT(s.arguments, 9);
  free(buf);

  /* ---- Graphviz: one node per statement and record, one edge per argument
   * and per record input or output ---- */
  f = open_memstream(&buf, &len);
  CHECK_INT(ad_tape_dump(t, f, AD_DUMP_DOT), AD_OK);
  fclose(f);
  CHECK(strncmp(buf, "digraph tape {", 14) == 0);
  int nodes = 0, edges = 0, dashed = 0, braces = 0, lines = 0;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    lines++;
    unsigned long long u, v;
    char kind;
    if (sscanf(line, " n%llu -> n%llu", &u, &v) == 2) {
      edges++;
      CHECK(u < v && v <= J.i);
    } else if (sscanf(line, " n%llu -> r%llu", &u, &v) == 2 || sscanf(line, " r%llu -> n%llu", &u, &v) == 2) {
      dashed++;
    } else if (sscanf(line, " %c%llu [", &kind, &u) == 2 && (kind == 'n' || kind == 'r')) {
      nodes++;
      /* labels: the handle, what made it, the value when known; J drawn as the output */
      if (kind == 'n' && u == a.i) CHECK_CONTAINS(line, names ? "\\nad_mul\\n= 6\"" : "\\nstatement\"");
      if (kind == 'n' && u == b.i) CHECK_CONTAINS(line, names ? "\\nad_add\\n= 8\"" : "\\nsum\"");
      if (kind == 'n' && u == x1.i) CHECK_CONTAINS(line, names ? "\\ninput\\n= 2\"" : "\\ninput\"");
      if (kind == 'n') CHECK_INT(strstr(line, "peripheries=2") != NULL, u == J.i);
      if (kind == 'n' && u == J.i) CHECK_CONTAINS(line, "\\noutput\"");
    } else if (strcmp(line, "}") == 0) {
      braces++;
    }
  }
  CHECK_INT(nodes, 10 + 2);
  CHECK_INT(edges, 9);
  CHECK_INT(dashed, 2 + 2 + 1 + 1);
  CHECK_INT(braces, 1);
  /* nothing else: the header, one line per node and edge, the closing brace */
  CHECK_INT(lines, 3 + nodes + edges + dashed + braces);
  free(buf);

  /* Into a file, and bad arguments. */
  char path[] = "/tmp/ariadne_dump_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK_INT(ad_tape_dump_path(t, path, AD_DUMP_TEXT), AD_OK);
  f = fopen(path, "r");
  parse_text(f);
  fclose(f);
  remove(path);
  CHECK_INT(S[a.i].nargs, 2);
  CHECK_INT(ad_tape_dump(NULL, stdout, AD_DUMP_TEXT), AD_ERR_ARG);
  CHECK_INT(ad_tape_dump(t, stdout, (ad_dump_format)7), AD_ERR_ARG);
  CHECK_INT(ad_tape_dump_path(t, "/nonexistent-dir/x.txt", AD_DUMP_TEXT), AD_ERR_IO);
  ad_tape_destroy(t);
}

int main(void) {
  unsetenv("ARIADNE_RECORD_NAMES");
  unsetenv("ARIADNE_CHECK_FINITE");
  CHECK_CONTEXT("without names");
  dump_tape(0);
  CHECK_CONTEXT("with names and values");
  dump_tape(1);
  return check_finish("test_dump");
}
