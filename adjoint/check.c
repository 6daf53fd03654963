/* SPDX-License-Identifier: BSD-3-Clause */
/* The gradient checker: the tape's Jacobian against central finite
 * differences at several steps, and the tangent sweep against the reverse
 * sweep (the dot-product test) and against finite differences along a
 * direction. Written once for a set of ranks: in a serial program the
 * reductions are the identity (see ad__check_env). */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_hooks.h"
#include "tape_impl.h"

void ad_check_options_default(ad_check_options *o) {
  memset(o, 0, sizeof *o);
  o->nsteps = 3;
  o->steps[0] = 1e-3;
  o->steps[1] = 1e-5;
  o->steps[2] = 1e-7;
  o->max_columns = 8;
  o->rtol = 1e-5;
  o->atol = -1.0;
  o->dot_test = 1;
  o->dot_tol = 1e-8;
  o->seed = 12345;
  o->print = 1;
  o->table_rows = 5;
}

static void sum_none(void *ctx, double *v, size_t k) { (void)ctx, (void)v, (void)k; }

/* splitmix64, so that the directions are the same on every platform. */
static double rng_unit(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53 * 2.0 - 1.0; /* in [-1, 1) */
}

typedef struct run {
  const ad__check_env *env;
  ad_check_fn f;
  void *ud;
  size_t n, m;
  ad_real *xa, *ya; /* scratch for passive evaluations */
} run;

/* f at x (passive), summed over the ranks. Collective. Returns 0 or -1 if f
 * failed on some rank. */
static int eval(run *r, const double *x, double *y) {
  for (size_t i = 0; i < r->n; i++) r->xa[i] = ad__const(x[i]);
  for (size_t j = 0; j < r->m; j++) r->ya[j] = ad__const(0.0);
  ad__suspended s = ad__suspend();
  int rc = r->f(r->ud, r->n, r->xa, r->m, r->ya);
  ad__resume(s);
  double v[1] = {rc != 0};
  r->env->max(r->env->ctx, v, 1);
  for (size_t j = 0; j < r->m; j++) y[j] = r->ya[j].v;
  r->env->sum(r->env->ctx, y, r->m);
  return v[0] != 0.0 ? -1 : 0;
}

/* The same, failing on every rank if it failed on one. */
static int agree(const ad__check_env *env, int bad) {
  double v[1] = {bad != 0};
  env->max(env->ctx, v, 1);
  return v[0] != 0.0;
}

/* A non-finite number met in a comparison: counted, and the first one's
 * origin kept in words. Each one fails the check. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
nonfinite(ad_check_result *res, const char *fmt, ...) {
  if (res->nonfinite++ > 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->nonfinite_at, sizeof res->nonfinite_at, fmt, ap);
  va_end(ap);
  /* A NaN's sign means nothing: "-nan" reads as "nan". */
  for (char *p = res->nonfinite_at; (p = strstr(p, "-nan")) != NULL;) memmove(p, p + 1, strlen(p));
}

/* The report's last line after FAILED: which comparisons failed, and what
 * that pattern of failures usually means. */
static void verdict(const ad_check_options *o, ad_check_result *res) {
  char *v = res->verdict;
  size_t size = sizeof res->verdict;
  v[0] = '\0';
  res->kink = 0;
  if (res->passed) return;
  int cols = res->failed > 0, dot = res->dot_done && !(res->dot_rel <= o->dot_tol);
  int tan = res->dot_done && !(res->tangent_rel <= 1.0);
  if (res->nonfinite) {
    snprintf(v, size, "a NaN or infinity in the comparisons (%zu of them; the first: %s)", res->nonfinite,
             res->nonfinite_at[0] ? res->nonfinite_at : "on another rank");
  } else if (!cols && !dot && tan) {
    res->kink = 1;
    snprintf(v, size,
             "only the tangent against central differences along xdot failed (err/tol %.2g); the columns and the "
             "dot-product test agree, so the sweeps are consistent and f is probably not differentiable at x0 (a "
             "kink: fabs, fmin/fmax, a branch): move the point off the kink and check again",
             res->tangent_rel);
  } else if (cols && res->dot_done && !dot) {
    snprintf(v, size,
             "the columns disagree with central differences (%zu of %zu entries over the tolerance) while the tangent "
             "and reverse sweeps agree with each other: a wrong partial (an ad_custom partial, a derivative rule) or a "
             "kink at x0 (fabs, fmin/fmax, a branch)",
             res->failed, res->checked);
  } else {
    size_t k = 0;
    if (cols)
      k += (size_t)snprintf(v, size, "the columns against central differences (%zu of %zu entries over the tolerance)",
                            res->failed, res->checked);
    if (dot && k < size)
      k += (size_t)snprintf(v + k, size - k, "%sthe dot-product test (reverse against tangent, rel. diff %.1e)",
                            k ? "; " : "", res->dot_rel);
    if (tan && k < size)
      k += (size_t)snprintf(v + k, size - k, "%sthe tangent against central differences along xdot (err/tol %.2g)",
                            k ? "; " : "", res->tangent_rel);
    if (dot && k < size)
      snprintf(v + k, size - k,
               ": the reverse and tangent sweeps disagree, a wrong hand-written adjoint or tangent "
               "(an external function's callback)");
  }
}

static int entry_cmp(const void *a, const void *b) {
  const ad_check_entry *x = a, *y = b;
  if (x->err != y->err) return x->err < y->err ? 1 : -1;
  if (x->col != y->col) return x->col < y->col ? -1 : 1;
  return x->row < y->row ? -1 : (x->row > y->row);
}

static void print_report(const ad__check_env *env, const ad_check_options *o, const ad_check_result *res,
                         const ad_check_entry *all, size_t nall) {
  printf("ad_check_gradient%s%s: %llu input%s, %zu output%s; %zu entr%s against central differences, steps",
         o->title ? ": " : "", o->title ? o->title : "", (unsigned long long)res->n, res->n == 1 ? "" : "s", res->m,
         res->m == 1 ? "" : "s", res->checked, res->checked == 1 ? "y" : "ies");
  for (int s = 0; s < o->nsteps; s++) printf("%s%g", s ? ", " : " ", o->steps[s]);
  printf(" x max(1, |x|)\n");
  size_t rows = nall < (size_t)o->table_rows ? nall : (size_t)o->table_rows;
  if (rows) {
    printf("  %6s %8s", "output", "input");
    if (env->size > 1) printf(" %5s", "rank");
    printf(" %22s %22s %8s %9s %8s\n", "tape (AD)", "best central FD", "step", "|AD-FD|", "err/tol");
    for (size_t k = 0; k < rows; k++) {
      const ad_check_entry *e = &all[k];
      printf("  %6zu %8zu", e->row, e->col);
      if (env->size > 1) printf(" %5d", e->rank);
      printf(" %22.14e %22.14e %8.1e %9.2e %8.2g%s\n", e->ad, e->fd, e->step, fabs(e->ad - e->fd), e->err,
             e->err > 1.0 ? "  MISMATCH" : "");
    }
    if (rows < nall) printf("  (the %zu worst of %zu entries)\n", rows, nall);
  }
  printf("  tolerance: rtol %g relative + atol %.2g\n", o->rtol, res->atol);
  if (res->dot_done) {
    printf("  dot-product test: <ybar, J xdot> = %.15e, <J^T ybar, xdot> = %.15e, rel. diff %.1e%s\n", res->dot_lhs,
           res->dot_rhs, res->dot_rel, !(res->dot_rel <= o->dot_tol) ? "  MISMATCH" : "");
    printf("  tangent J xdot against central differences along xdot: err/tol %.2g%s\n", res->tangent_rel,
           !(res->tangent_rel <= 1.0) ? "  MISMATCH" : "");
  } else if (o->dot_test) {
    printf("  dot-product test skipped: the tape has no tangent (an external function without forward callback?)\n");
  }
  if (res->nonfinite)
    printf("  not finite: %s%s\n", res->nonfinite_at[0] ? res->nonfinite_at : "on another rank",
           res->nonfinite > 1 ? " (the first of several)" : "");
  if (res->passed)
    printf("ad_check_gradient%s%s: PASSED (%zu entries within the tolerance%s)\n", o->title ? ": " : "",
           o->title ? o->title : "", res->checked, res->dot_done ? ", dot-product and tangent tests agree" : "");
  else
    printf("ad_check_gradient%s%s: FAILED: %s\n", o->title ? ": " : "", o->title ? o->title : "", res->verdict);
  fflush(stdout);
}

static int size_cmp(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Column selection: given, all, or spread evenly with the largest
 * derivative's. Given columns are checked once each, in increasing order,
 * however often they are repeated; cols has room for all of them. */
static size_t pick_columns(const ad__check_env *env, const ad_check_options *o, const double *G, size_t n, size_t m,
                           size_t *cols) {
  uint64_t N = env->ntotal;
  if (o->columns) {
    size_t k = 0, u = 0;
    for (size_t c = 0; c < o->ncolumns; c++)
      if (o->columns[c] < N) cols[k++] = o->columns[c];
    qsort(cols, k, sizeof *cols, size_cmp);
    for (size_t c = 0; c < k; c++)
      if (u == 0 || cols[c] != cols[u - 1]) cols[u++] = cols[c];
    return u;
  }
  size_t want = o->max_columns ? o->max_columns : 8;
  if (N <= want) {
    for (size_t c = 0; c < N; c++) cols[c] = c;
    return N;
  }
  /* the largest |derivative| on any rank, and its global column */
  double best[2] = {-1.0, 0.0};
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < m; j++)
      if (fabs(G[j * n + i]) > best[0]) best[0] = fabs(G[j * n + i]), best[1] = (double)(env->first + i);
  double v[1] = {best[0]};
  env->max(env->ctx, v, 1);
  double at[1] = {best[0] == v[0] && best[0] >= 0.0 ? best[1] : -1.0};
  env->max(env->ctx, at, 1);
  size_t k = 0;
  for (size_t c = 0; c + 1 < want; c++) cols[k++] = want > 2 ? (size_t)(c * (N - 1) / (want - 2)) : 0;
  size_t top = at[0] >= 0.0 ? (size_t)at[0] : 0;
  int dup = 0;
  for (size_t c = 0; c < k; c++) dup |= cols[c] == top;
  if (!dup) cols[k++] = top;
  return k;
}

int ad__check_run(const ad__check_env *env, ad_check_fn f, void *ud, size_t n, const double *x0, size_t m,
                  const ad_check_options *opts, ad_check_result *res) {
  ad_check_options o;
  ad_check_result rdummy;
  if (!opts)
    ad_check_options_default(&o);
  else
    o = *opts;
  if (!res) res = &rdummy;
  memset(res, 0, sizeof *res);
  if (o.nsteps < 1 || o.nsteps > AD_CHECK_MAX_STEPS) o.nsteps = o.nsteps < 1 ? 1 : AD_CHECK_MAX_STEPS;
  if (o.table_rows < 0) o.table_rows = 0;
  if (o.table_rows > AD_CHECK_TABLE) o.table_rows = AD_CHECK_TABLE;
  /* Every rank learns that the check cannot run; each names its own bad
   * argument (the thread's last error, ad_tape_error_message(NULL)). */
  char why[160];
  why[0] = '\0';
  if (!f)
    snprintf(why, sizeof why, "f is NULL");
  else if (m == 0)
    snprintf(why, sizeof why, "m = 0: there is no output to check");
  else if (n > AD__COUNT_MAX || m > AD__COUNT_MAX || (n && m > AD__COUNT_MAX / n))
    snprintf(why, sizeof why, "n = %zu and m = %zu are more than any array holds", n, m);
  else if (n && !x0)
    snprintf(why, sizeof why, "x0 is NULL for %zu element%s", n, n == 1 ? "" : "s");
  if (agree(env, why[0] != '\0'))
    return ad__arg_error(NULL, "ad_check_gradient: %s", why[0] ? why : "a bad argument on another rank");
  res->n = (size_t)env->ntotal;
  res->m = m;

  size_t N = (size_t)env->ntotal, ncolmax = (o.max_columns ? o.max_columns : 8) + 1;
  if (ncolmax > N + 1) ncolmax = N + 1;
  if (o.columns) ncolmax = o.ncolumns ? o.ncolumns : 1; /* before duplicates are dropped */
  ad_real *x = malloc((n ? n : 1) * sizeof *x), *y = malloc(m * sizeof *y);
  ad_real *xa = malloc((n ? n : 1) * sizeof *xa), *ya = malloc(m * sizeof *ya);
  double *G = malloc((n * m > 0 ? n * m : 1) * sizeof *G), *xp = malloc((n ? n : 1) * sizeof *xp);
  double *yp = malloc(m * sizeof *yp), *ym = malloc(m * sizeof *ym), *adc = malloc(m * sizeof *adc);
  double *ydot = malloc(m * sizeof *ydot), *ybar = malloc(m * sizeof *ybar), *d = malloc((n ? n : 1) * sizeof *d);
  size_t *cols = malloc(ncolmax * sizeof *cols);
  size_t ncolall = ncolmax < N + 1 ? ncolmax : N + 1; /* distinct columns */
  ad_check_entry *all = malloc((ncolall * m > 0 ? ncolall * m : 1) * sizeof *all);
  ad_tape *T = ad_tape_create();
  int rc = AD_OK;
  if (agree(env,
            !x || !y || !xa || !ya || !G || !xp || !yp || !ym || !adc || !ydot || !ybar || !d || !cols || !all || !T)) {
    rc = AD_ERR_NOMEM;
    goto done;
  }
  run r = {env, f, ud, n, m, xa, ya};

  /* Record f once, on a tape of its own. */
  ad__suspended s = ad__suspend();
  ad_tape_begin(T);
  for (size_t i = 0; i < n; i++) x[i] = ad_input(x0[i]);
  for (size_t j = 0; j < m; j++) y[j] = ad__const(0.0);
  int frc = f(ud, n, x, m, y);
  ad_tape_end(T);
  ad__resume(s);
  if (agree(env, frc != 0)) {
    rc = AD_ERR_CALLBACK;
    goto done;
  }
  if (agree(env, ad_tape_error(T) != AD_OK)) {
    rc = ad_tape_error(T) != AD_OK ? ad_tape_error(T) : AD_ERR_STATE;
    goto done;
  }

  for (size_t j = 0; j < m; j++)
    if (!isfinite(y[j].v)) nonfinite(res, "f(x0): output %zu is %g", j, y[j].v);

  /* The Jacobian's rows by reverse sweeps (collective in MPI programs). */
  for (size_t j = 0; j < m; j++) {
    ad_adjoints_zero(T);
    if (y[j].i) ad_seed(T, y[j], 1.0);
    int src = ad_reverse(T);
    if (agree(env, src != AD_OK)) {
      rc = src != AD_OK ? src : AD_ERR_STATE;
      goto done;
    }
    for (size_t i = 0; i < n; i++) G[j * n + i] = ad_adjoint(T, x[i]);
  }
  /* The tolerance scales with the largest finite derivative: an infinite
   * one (sqrt at 0) is a failure of its own, not a tolerance. */
  double gmax[1] = {0.0};
  for (size_t k = 0; k < n * m; k++) {
    if (isfinite(G[k]))
      gmax[0] = fmax(gmax[0], fabs(G[k]));
    else
      nonfinite(res, "the tape's derivative of output %zu with respect to input %llu is %g", k / (n ? n : 1),
                (unsigned long long)(env->first + k % (n ? n : 1)), G[k]);
  }
  env->max(env->ctx, gmax, 1);
  res->atol = o.atol >= 0.0 ? o.atol : (gmax[0] > 0.0 ? 1e-7 * gmax[0] : 1e-12);

  /* Columns against central differences. */
  size_t ncol = pick_columns(env, &o, G, n, m, cols), nall = 0;
  memcpy(xp, x0, n * sizeof *xp);
  for (size_t c = 0; c < ncol; c++) {
    size_t col = cols[c];
    int mine = col >= env->first && col < env->first + n;
    size_t li = mine ? (size_t)(col - env->first) : 0;
    double who[1] = {mine ? (double)env->rank : 0.0};
    env->sum(env->ctx, who, 1);
    for (size_t j = 0; j < m; j++) adc[j] = mine ? G[j * n + li] : 0.0;
    env->sum(env->ctx, adc, m);
    ad_check_entry *e = all + nall;
    for (size_t j = 0; j < m; j++) {
      e[j].row = j;
      e[j].col = col;
      e[j].rank = (int)who[0];
      e[j].ad = adc[j];
      e[j].err = INFINITY;
      e[j].fd = NAN;
      e[j].step = 0.0;
    }
    for (int si = 0; si < o.nsteps; si++) {
      double hw[1] = {0.0}, xi = mine ? x0[li] : 0.0;
      double h = o.steps[si] * fmax(1.0, fabs(xi)), hp = 0.0, hm = 0.0;
      if (mine) xp[li] = xi + h;
      hp = mine ? xp[li] - xi : 0.0; /* the step actually taken */
      if (eval(&r, xp, yp)) goto fail;
      if (mine) xp[li] = xi - h;
      hm = mine ? xi - xp[li] : 0.0;
      if (eval(&r, xp, ym)) goto fail;
      if (mine) xp[li] = xi;
      hw[0] = hp + hm;
      env->sum(env->ctx, hw, 1);
      for (size_t j = 0; j < m; j++) {
        double fd = (yp[j] - ym[j]) / hw[0], diff = fabs(adc[j] - fd);
        if (!isfinite(fd) && si == o.nsteps - 1 && !isfinite(e[j].fd))
          nonfinite(res,
                    "the central difference of output %zu along input %zu is %g at every step (f(x0 + h e) = %g, "
                    "f(x0 - h e) = %g at h = %g)",
                    j, col, fd, yp[j], ym[j], o.steps[si]);
        double err = diff / (o.rtol * fmax(fabs(adc[j]), fabs(fd)) + res->atol);
        if (isnan(err)) err = INFINITY; /* a NaN difference or derivative fails */
        if (err < e[j].err || e[j].step == 0.0) {
          e[j].err = err;
          e[j].fd = fd;
          e[j].step = o.steps[si];
        }
      }
    }
    for (size_t j = 0; j < m; j++) {
      double mag = fmax(fabs(e[j].ad), fabs(e[j].fd)), rel = mag > 0.0 ? fabs(e[j].ad - e[j].fd) / mag : 0.0;
      if (isnan(rel)) rel = INFINITY;
      if (!(e[j].err <= 1.0)) {
        if (res->failed == 0 || rel > res->worst_rel) res->worst_rel = rel;
        res->failed++;
      } else if (res->failed == 0 && rel > res->worst_rel) {
        res->worst_rel = rel;
      }
    }
    nall += m;
  }
  res->checked = nall;
  qsort(all, nall, sizeof *all, entry_cmp);
  res->nworst = nall < AD_CHECK_TABLE ? nall : AD_CHECK_TABLE;
  memcpy(res->worst, all, res->nworst * sizeof *all);
  res->passed = res->failed == 0;

  /* The dot-product test, and the tangent against differences along xdot. */
  if (o.dot_test) {
    uint64_t sx = o.seed * 0x2545F4914F6CDD1Dull + (uint64_t)env->rank + 1, sy = o.seed;
    for (size_t i = 0; i < n; i++) d[i] = rng_unit(&sx) * fmax(1.0, fabs(x0[i]));
    for (size_t j = 0; j < m; j++) ybar[j] = rng_unit(&sy);
    ad_tangents_zero(T);
    for (size_t i = 0; i < n; i++) ad_tangent_seed(T, x[i], d[i]);
    int frc2 = ad_forward(T);
    if (agree(env, frc2 == AD_ERR_STATE)) {
      res->dot_done = 0; /* no tangent on some rank: skipped */
    } else if (agree(env, frc2 != AD_OK)) {
      rc = frc2 != AD_OK ? frc2 : AD_ERR_STATE;
      goto done;
    } else {
      for (size_t j = 0; j < m; j++) ydot[j] = y[j].i ? ad_tangent(T, y[j]) : 0.0;
      env->sum(env->ctx, ydot, m);
      ad_adjoints_zero(T);
      for (size_t j = 0; j < m; j++)
        if (y[j].i) ad_seed(T, y[j], ybar[j]);
      int rrc = ad_reverse(T);
      if (agree(env, rrc != AD_OK)) {
        rc = rrc != AD_OK ? rrc : AD_ERR_STATE;
        goto done;
      }
      double dots[1] = {0.0}, lhs = 0.0;
      for (size_t i = 0; i < n; i++) dots[0] += ad_adjoint(T, x[i]) * d[i];
      env->sum(env->ctx, dots, 1);
      for (size_t j = 0; j < m; j++) lhs += ybar[j] * ydot[j];
      res->dot_done = 1;
      res->dot_lhs = lhs;
      res->dot_rhs = dots[0];
      double mag = fmax(fabs(lhs), fabs(dots[0]));
      res->dot_rel = mag > 0.0 ? fabs(lhs - dots[0]) / mag : 0.0;
      /* fmax drops a NaN, and NaN - NaN compares as nothing: name it. */
      if (!isfinite(lhs) || !isfinite(dots[0])) {
        res->dot_rel = INFINITY;
        size_t jn = 0, in = 0;
        while (jn < m && isfinite(ydot[jn])) jn++;
        while (in < n && isfinite(ad_adjoint(T, x[in]))) in++;
        if (jn < m)
          nonfinite(res, "dot-product test: the tangent of output %zu is %g", jn, ydot[jn]);
        else if (in < n)
          nonfinite(res, "dot-product test: the adjoint of input %llu is %g", (unsigned long long)(env->first + in),
                    ad_adjoint(T, x[in]));
        else
          nonfinite(res, "dot-product test: <ybar, J xdot> = %g, <J^T ybar, xdot> = %g", lhs, dots[0]);
      }
      if (!(res->dot_rel <= o.dot_tol)) res->passed = 0;
      /* Along d: the directional derivative is J d = ydot. */
      double best = INFINITY, atol_dir = res->atol * sqrt((double)(N ? N : 1)), bad[4] = {0};
      size_t bad_j = m; /* the first non-finite difference along d */
      for (int si = 0; si < o.nsteps; si++) {
        double h = o.steps[si], worst = 0.0;
        for (size_t i = 0; i < n; i++) xp[i] = x0[i] + h * d[i];
        if (eval(&r, xp, yp)) goto fail;
        for (size_t i = 0; i < n; i++) xp[i] = x0[i] - h * d[i];
        if (eval(&r, xp, ym)) goto fail;
        for (size_t j = 0; j < m; j++) {
          double fd = (yp[j] - ym[j]) / (2.0 * h);
          if (!isfinite(fd) && bad_j == m) {
            bad_j = j;
            bad[0] = fd, bad[1] = yp[j], bad[2] = ym[j], bad[3] = h;
          }
          double err = fabs(ydot[j] - fd) / (o.rtol * fmax(fabs(ydot[j]), fabs(fd)) + atol_dir);
          worst = isnan(err) ? INFINITY : fmax(worst, err);
        }
        best = fmin(best, worst);
      }
      memcpy(xp, x0, n * sizeof *xp);
      if (!isfinite(best) && bad_j < m)
        nonfinite(res,
                  "the central difference of output %zu along xdot is %g at every step (the first: f(x0 + h xdot) = "
                  "%g, f(x0 - h xdot) = %g at h = %g)",
                  bad_j, bad[0], bad[1], bad[2], bad[3]);
      res->tangent_rel = best;
      if (!(best <= 1.0)) res->passed = 0;
    }
  }
  {
    double nf[1] = {(double)res->nonfinite};
    env->max(env->ctx, nf, 1);
    if (nf[0] > 0.0) {
      res->passed = 0;
      if (res->nonfinite == 0) res->nonfinite = (size_t)nf[0];
    }
  }
  verdict(&o, res);
  rc = res->passed ? AD_OK : AD_ERR_CHECK;
  if (env->rank == 0 && (o.print >= 2 || (o.print == 1 && !res->passed))) print_report(env, &o, res, all, nall);
  goto done;
fail:
  rc = AD_ERR_CALLBACK;
done:
  if (rc != AD_OK && rc != AD_ERR_CHECK && env->rank == 0 && o.print)
    printf("ad_check_gradient%s%s: could not check: %s%s%s\n", o.title ? ": " : "", o.title ? o.title : "",
           ad_errname(rc), T && ad_tape_error(T) ? ": " : "", T && ad_tape_error(T) ? ad_tape_error_message(T) : "");
  ad_tape_destroy(T);
  free(x), free(y), free(xa), free(ya), free(G), free(xp), free(yp), free(ym), free(adc), free(ydot), free(ybar),
      free(d), free(cols), free(all);
  return rc;
}

int ad_check_gradient(ad_check_fn f, void *ud, size_t n, const double *x0, size_t m, const ad_check_options *opts,
                      ad_check_result *res) {
  ad__check_env env = {0, 1, 0, n, NULL, sum_none, sum_none};
  return ad__check_run(&env, f, ud, n, x0, m, opts, res);
}
