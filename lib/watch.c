/* SPDX-License-Identifier: BSD-3-Clause */
/* Watching a recording: the finite check (ad_tape_set_check_finite,
 * ARIADNE_CHECK_FINITE=1) and the operation names and values kept for
 * ad_tape_dump and for the check's messages (ad_tape_set_record_names,
 * ARIADNE_RECORD_NAMES=1).
 *
 * Neither costs the inline recording anything while off: a watching tape
 * sets its recorder's AD__FWD_WATCH bit, whose only effect on the fast path
 * is a zero argument limit, so that every operation leaves it by the branch
 * that full blocks and preaccumulation regions already take, and reaches
 * the library with its value and partials (lib/fused.c, fwd_op). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tape_impl.h"

static int env_on(const char *name) {
  const char *e = getenv(name);
  return e && e[0] == '1' && e[1] == '\0';
}

void ad__watch_arm(ad_tape *t) {
  if (ad__watching(t) && t->err == AD_OK)
    t->rec.fwd |= AD__FWD_WATCH;
  else
    t->rec.fwd &= ~AD__FWD_WATCH;
  /* The inline region path then finds no room and hands every operation
   * of a region to the library too. */
  t->rec.fwd_lim = (t->rec.fwd & AD__FWD_WATCH) ? 0 : t->rec.fwd_cap;
  ad__recorder_arm(t);
}

/* Names kept from before a reset, or from before the watch was turned on,
 * name nothing that is recorded now. */
static void names_forget(ad_tape *t) {
  if (t->names) memset((void *)t->names, 0, t->names_cap * sizeof *t->names);
  t->watch_rec = NULL;
}

void ad__watch_init(ad_tape *t) {
  t->check_finite = env_on("ARIADNE_CHECK_FINITE");
  t->record_names = env_on("ARIADNE_RECORD_NAMES");
  ad__watch_arm(t);
}

void ad__watch_free(ad_tape *t) {
  ad__free(t, (void *)t->names, t->names_cap * sizeof *t->names);
  ad__free(t, t->vals, t->vals_cap * sizeof *t->vals);
  t->names = NULL;
  t->vals = NULL;
  t->names_cap = t->vals_cap = 0;
}

void ad__watch_reset(ad_tape *t) {
  names_forget(t);
  ad__watch_arm(t);
}

static void watch_set(ad_tape *t, int *flag, int on, const char *fn) {
  if (!t) {
    ad__fail_notape(AD_ERR_ARG, "%s: tape is NULL", fn);
    return;
  }
  int was = ad__watching(t);
  *flag = on != 0;
  if (!ad__watching(t))
    ad__watch_free(t);
  else if (!was)
    names_forget(t);
  ad__watch_arm(t);
}

void ad_tape_set_check_finite(ad_tape *t, int on) {
  watch_set(t, t ? &t->check_finite : NULL, on, "ad_tape_set_check_finite");
}
void ad_tape_set_record_names(ad_tape *t, int on) {
  watch_set(t, t ? &t->record_names : NULL, on, "ad_tape_set_record_names");
}

void ad__watch_note(ad_tape *t, ad_index h, const char *op, double v) {
  if (!ad__watching(t)) return;
  if ((size_t)h >= t->names_cap || (size_t)h >= t->vals_cap) {
    void *a = (void *)t->names, *b = t->vals;
    int rc = ad__grow(t, &a, &t->names_cap, (size_t)h + 1, sizeof *t->names);
    t->names = a;
    if (rc == AD_OK) rc = ad__grow(t, &b, &t->vals_cap, (size_t)h + 1, sizeof *t->vals);
    t->vals = b;
    if (rc != AD_OK) return; /* the tape holds AD_ERR_NOMEM */
  }
  t->names[h] = op;
  t->vals[h] = v;
}

const char *ad__watch_name(const ad_tape *t, ad_index h, double *v) {
  if ((size_t)h >= t->names_cap || (size_t)h >= t->vals_cap || !t->names[h]) return NULL;
  if (v) *v = t->vals[h];
  return t->names[h];
}

/* A NaN's sign means nothing: print "nan", never "-nan". */
static double shown(double v) { return isnan(v) ? fabs(v) : v; }

/* " %H = value (op)" for handle h, with what is known of it. */
static void describe_handle(const ad_tape *t, char *buf, size_t size, ad_index h, const double *value) {
  double v = 0.0;
  const char *name = ad__watch_name(t, h, &v);
  if (value) v = *value;
  if (value || name)
    snprintf(buf, size, "%%%llu = %g%s%s%s", (unsigned long long)h, shown(v), name ? " (" : "", name ? name : "",
             name ? ")" : "");
  else
    snprintf(buf, size, "%%%llu", (unsigned long long)h);
}

int ad__watch_value(ad_tape *t, const char *op, double v, uint32_t n, const ad_real *args, const ad_index *idx,
                    const double *par) {
  if (!t->check_finite) return 1;
  uint32_t bad = n; /* the argument whose partial is not finite */
  if (isfinite(v)) {
    for (uint32_t k = 0; k < n && bad == n; k++)
      if ((args ? args[k].i : idx[k]) != 0 && par && !isfinite(par[k])) bad = k;
    if (bad == n) return 1;
  }
  char what[96], list[320];
  if (bad == n)
    snprintf(what, sizeof what, "the value is %g", shown(v));
  else
    snprintf(what, sizeof what, "the partial with respect to argument %u is %g (the value is %g)", bad + 1,
             shown(par[bad]), shown(v));
  list[0] = '\0';
  size_t len = 0;
  for (uint32_t k = 0, shown = 0; k < n && shown < 4 && len < sizeof list; k++) {
    ad_index h = args ? args[k].i : idx[k];
    if (h == 0) continue;
    char one[128];
    describe_handle(t, one, sizeof one, h, args ? &args[k].v : NULL);
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", shown++ ? ", " : "", one);
  }
  /* Inside a region that propagates forward, values are numbered after
   * the region's start (see ad__fwd_issue). */
  ad_index next =
      (t->rec.fwd & AD__FWD_REGION) && ad__reg.rec == &t->rec ? ad__reg.start + 1 + ad__reg.nloc : t->rec.next + 1;
  ad__fail(t, AD_ERR_NONFINITE, "%s: %s, at what would be statement %%%llu%s%s", op, what, (unsigned long long)next,
           list[0] ? "; arguments " : "", list);
  return 0;
}

int ad__watch_input(ad_tape *t, double v, const char *op) {
  const char *name = op ? op : t->watch_rec ? t->watch_rec : "ad_input";
  if (op) t->watch_rec = NULL; /* a record's outputs come right after it */
  if (t->check_finite && !isfinite(v)) {
    ad__fail(t, AD_ERR_NONFINITE, "%s: a value entering the tape is %g, at what would be statement %%%llu%s", name,
             shown(v), (unsigned long long)t->rec.next + 1, op ? "" : " (an output of the record)");
    return 0;
  }
  ad__watch_note(t, t->rec.next + 1, name, v);
  return 1;
}

int ad__watch_adjoint_report(ad_tape *t, const ad__adj_watch *w) {
  if (!w->found) return AD_OK;
  char s[160];
  describe_handle(t, s, sizeof s, w->stmt, NULL);
  if (w->target) {
    char g[160];
    describe_handle(t, g, sizeof g, w->target, NULL);
    ad__pending(t, AD_ERR_NONFINITE,
                "reverse sweep: the adjoint of %s became %g at statement %s: its partial %g times its adjoint %g (the "
                "first statement whose adjoint became non-finite)",
                g, shown(w->result), s, shown(w->partial), shown(w->adjoint));
  } else {
    ad__pending(t, AD_ERR_NONFINITE,
                "reverse sweep: the adjoint of statement %s is %g where the sweep reaches it: it was seeded so "
                "(ad_seed) or made so by a record (external function, MPI) after it",
                s, shown(w->adjoint));
  }
  return AD_ERR_NONFINITE;
}

int ad__watch_tangent_report(ad_tape *t, const ad__adj_watch *w) {
  if (!w->found) return AD_OK;
  char s[160], g[160];
  describe_handle(t, s, sizeof s, w->stmt, NULL);
  describe_handle(t, g, sizeof g, w->target, NULL);
  ad__pending(t, AD_ERR_NONFINITE,
              "tangent sweep: the tangent of statement %s became %g: the partial %g for its argument %s times "
              "that argument's tangent %g (the first statement whose tangent became non-finite)",
              s, shown(w->result), shown(w->partial), g, shown(w->adjoint));
  return AD_ERR_NONFINITE;
}
