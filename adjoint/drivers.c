/* SPDX-License-Identifier: BSD-3-Clause */
/* Seeding, reading results, and the gradient and Jacobian drivers. */
#include <stdlib.h>
#include <string.h>

#include "tape_impl.h"

/* Vector-mode width: lanes swept together by ad_jacobian. */
#define AD_VEC_WIDTH 8

static int check_use(ad_tape *t, ad_real x, const char *fn, const char *what) {
  int c = ad__handle_check(t, x);
  if (c < 0)
    ad__pending(t, AD_ERR_STALE_HANDLE, "%s: %s has handle %llu of recording %u, %s (this tape is recording %u)", fn,
                what, (unsigned long long)x.i, x.e, ad__stale_reason(t, x.i, x.e), t->rec.epoch);
  return c;
}

/* A value without a handle that carries this recording's epoch: a C++
 * expression of active operands whose partials were all exactly zero
 * (ariadne.hpp). Its derivative is zero here; it is not a misuse. */
static int zero_derivative(const ad_tape *t, ad_real y) { return y.i == 0 && y.e != 0 && y.e == t->rec.epoch; }

void ad_seed(ad_tape *t, ad_real y, double ybar) {
  if (!t) return;
  int c = check_use(t, y, "ad_seed", "the seeded value");
  if (c == 0 && zero_derivative(t, y)) return;
  /* On a tape with communication records a passive seed is fine, as for
   * ad_gradient: the rank still sweeps, since the others need its adjoint
   * messages. */
  if (c == 0 && !ad__sweeps_everywhere(t))
    ad__pending(t, AD_ERR_PASSIVE, "ad_seed: the seeded value (%g) is passive, so no input can influence it", y.v);
  if (c <= 0) return;
  if (ad__adjoints_ready(t) != AD_OK) return;
  t->adj[y.i] += ybar;
}

int ad_reverse(ad_tape *t) {
  if (!t) return ad__arg_tape(t, "ad_reverse");
  ad_tape_pos start;
  memset(&start, 0, sizeof start);
  return ad__sweep_reverse(t, start);
}

int ad_reverse_to(ad_tape *t, ad_tape_pos pos) {
  if (!t) return ad__arg_tape(t, "ad_reverse_to");
  ad__pos_check(t, pos, "ad_reverse_to"); /* reported by the sweep, which tells the other ranks */
  return ad__sweep_reverse(t, pos);
}

/* x's entry of the adjoint or tangent vector v (cap entries, those below
 * dirty pending a reset): 0 for a passive value or one the vector does not
 * reach, NaN for a stale one. */
static double vec_entry(const ad_tape *t, ad_real x, const double *v, size_t cap, size_t dirty, const char *fn) {
  int c = check_use((ad_tape *)t, x, fn, "the value");
  if (c < 0) return NAN;
  if (c == 0 || x.i >= cap || x.i < dirty) return 0.0;
  return v[x.i];
}

/* Zero the adjoint or tangent vector v. Entries past the recording are zero
 * already, or pending (dirty). */
static void vec_zero(const ad_tape *t, double *v, size_t cap, size_t *dirty) {
  if (!v) return;
  size_t n = ad__max_size(*dirty, ad__span(t) < cap ? ad__span(t) : cap);
  memset(v, 0, n * sizeof(double));
  *dirty = 0;
}

double ad_adjoint(const ad_tape *t, ad_real x) {
  return t ? vec_entry(t, x, t->adj, t->adj_cap, t->adj_dirty, "ad_adjoint") : 0.0;
}

void ad_adjoints_zero(ad_tape *t) {
  if (t) vec_zero(t, t->adj, t->adj_cap, &t->adj_dirty);
}

void ad_tangent_seed(ad_tape *t, ad_real x, double xdot) {
  if (!t) return;
  int c = check_use(t, x, "ad_tangent_seed", "the seeded value");
  if (c == 0 && !ad__sweeps_everywhere(t)) /* as ad_seed */
    ad__pending(t, AD_ERR_PASSIVE, "ad_tangent_seed: the seeded value (%g) is passive", x.v);
  if (c <= 0) return;
  if (ad__tangents_ready(t) != AD_OK) return;
  t->tan[x.i] = xdot;
}

int ad_forward(ad_tape *t) {
  if (!t) return ad__arg_tape(t, "ad_forward");
  return ad__sweep_forward(t);
}

double ad_tangent(const ad_tape *t, ad_real y) {
  return t ? vec_entry(t, y, t->tan, t->tan_cap, t->tan_dirty, "ad_tangent") : 0.0;
}

void ad_tangents_zero(ad_tape *t) {
  if (t) vec_zero(t, t->tan, t->tan_cap, &t->tan_dirty);
}

int ad_gradient(ad_tape *t, ad_real y, size_t n, const ad_real *x, double *g) {
  static const char fn[] = "ad_gradient";
  int rc;
  if ((rc = ad__arg_tape(t, fn)) != AD_OK || (rc = ad__arg_count(t, fn, "n", n)) != AD_OK ||
      (rc = ad__arg_array(t, fn, "x", x, n)) != AD_OK || (rc = ad__arg_array(t, fn, "g", g, n)) != AD_OK)
    return rc;
  for (size_t k = 0; k < n; k++) g[k] = 0.0;
  int c = check_use(t, y, "ad_gradient", "the output");
  /* On a tape with communication records the sweep runs even for a passive
   * output: the other ranks need this rank's adjoint messages. */
  if (c == 0 && !ad__sweeps_everywhere(t) && !zero_derivative(t, y))
    ad__pending(t, AD_ERR_PASSIVE,
                "ad_gradient: the output (%g) is passive: it depends on no input recorded on this tape", y.v);
  for (size_t k = 0; k < n; k++)
    if (check_use(t, x[k], "ad_gradient", "an input") < 0) break;
  rc = ad__adjoints_ready(t);
  if (rc == AD_OK) {
    ad_adjoints_zero(t);
    if (c > 0) t->adj[y.i] = 1.0;
  }
  ad_tape_pos start;
  memset(&start, 0, sizeof start);
  /* The finite check's error comes after a complete sweep: the gradient,
   * NaN and all, is there to be looked at. */
  if ((rc = ad__sweep_reverse(t, start)) != AD_OK && rc != AD_ERR_NONFINITE) return rc;
  for (size_t k = 0; k < n; k++) g[k] = x[k].i ? t->adj[x[k].i] : 0.0;
  return rc;
}

/* Jacobian through scalar sweeps: for tapes with special records, whose
 * actions are scalar. */
static int jacobian_scalar(ad_tape *t, size_t m, const ad_real *y, size_t n, const ad_real *x, double *J) {
  int rc;
  ad_tape_pos start;
  memset(&start, 0, sizeof start);
  /* With communication records the sweeps are collective: all ranks run
   * the same number of sweeps in the same direction, chosen from the largest
   * m and n of any rank (a rank with fewer rows or columns sweeps with no
   * seed for the rest). */
  size_t rows = m, cols = n;
  int reverse = m <= n;
  if (t->ext_ops && t->ext_ops->agree_max) {
    int64_t v[2] = {(int64_t)m, (int64_t)n};
    if ((rc = t->ext_ops->agree_max(t, t->ext_ctx, v, 2)) != AD_OK) return rc;
    reverse = v[0] <= v[1];
    rows = (size_t)v[0];
    cols = (size_t)v[1];
  }
  if (reverse) {
    for (size_t r = 0; r < rows; r++) {
      if ((r >= m || !y[r].i) && !ad__sweeps_everywhere(t)) continue; /* with MPI records every rank sweeps */
      if ((rc = ad__adjoints_ready(t)) != AD_OK) return rc;
      ad_adjoints_zero(t);
      if (r < m && y[r].i) t->adj[y[r].i] = 1.0;
      if ((rc = ad__sweep_reverse(t, start)) != AD_OK) return rc;
      if (r < m)
        for (size_t k = 0; k < n; k++) J[r * n + k] = x[k].i ? t->adj[x[k].i] : 0.0;
    }
  } else {
    for (size_t k = 0; k < cols; k++) {
      if ((k >= n || !x[k].i) && !ad__sweeps_everywhere(t)) continue;
      if ((rc = ad__tangents_ready(t)) != AD_OK) return rc;
      ad_tangents_zero(t);
      if (k < n && x[k].i) t->tan[x[k].i] = 1.0;
      if ((rc = ad__sweep_forward(t)) != AD_OK) return rc;
      if (k < n)
        for (size_t r = 0; r < m; r++) J[r * n + k] = y[r].i ? t->tan[y[r].i] : 0.0;
    }
  }
  return AD_OK;
}

int ad_jacobian(ad_tape *t, size_t m, const ad_real *y, size_t n, const ad_real *x, double *J) {
  static const char fn[] = "ad_jacobian";
  int rc;
  if ((rc = ad__arg_tape(t, fn)) != AD_OK || (rc = ad__arg_count(t, fn, "m", m)) != AD_OK ||
      (rc = ad__arg_count(t, fn, "n", n)) != AD_OK)
    return rc;
  if (n && m > AD__COUNT_MAX / n)
    return ad__arg_error(t, "%s: m x n = %zu x %zu is more entries than any array holds", fn, m, n);
  if ((rc = ad__arg_array(t, fn, "y", y, m)) != AD_OK || (rc = ad__arg_array(t, fn, "x", x, n)) != AD_OK ||
      (rc = ad__arg_array(t, fn, "J", J, m * n)) != AD_OK)
    return rc;
  for (size_t k = 0; k < m * n; k++) J[k] = 0.0;
  /* On a tape with MPI records, errors are reported by the sweeps, which
   * tell the other ranks; elsewhere they are reported at once. */
  for (size_t r = 0; r < m; r++) check_use(t, y[r], "ad_jacobian", "an output");
  for (size_t k = 0; k < n; k++) check_use(t, x[k], "ad_jacobian", "an input");
  /* The vector sweeps have no finite check: under it the scalar ones run. */
  if (t->nrec || t->ext_ops || t->check_finite) return jacobian_scalar(t, m, y, n, x, J);
  rc = ad__driver_check(t);
  if (rc != AD_OK) return rc;

  size_t len = ad__span(t);
  if (len > SIZE_MAX / (AD_VEC_WIDTH * sizeof(double))) return AD_ERR_NOMEM;
  size_t bytes = len * AD_VEC_WIDTH * sizeof(double);
  double *v = ad__alloc(t, bytes);
  if (!v) return AD_ERR_NOMEM;
  if (m <= n) {
    for (size_t r0 = 0; r0 < m; r0 += AD_VEC_WIDTH) {
      size_t w = m - r0 < AD_VEC_WIDTH ? m - r0 : AD_VEC_WIDTH;
      memset(v, 0, len * w * sizeof(double));
      for (size_t l = 0; l < w; l++)
        if (y[r0 + l].i) v[(size_t)y[r0 + l].i * w + l] += 1.0;
      ad__sweep_reverse_vec(t, v, w);
      for (size_t l = 0; l < w; l++)
        if (y[r0 + l].i)
          for (size_t k = 0; k < n; k++) J[(r0 + l) * n + k] = x[k].i ? v[(size_t)x[k].i * w + l] : 0.0;
    }
  } else {
    for (size_t k0 = 0; k0 < n; k0 += AD_VEC_WIDTH) {
      size_t w = n - k0 < AD_VEC_WIDTH ? n - k0 : AD_VEC_WIDTH;
      memset(v, 0, len * w * sizeof(double));
      for (size_t l = 0; l < w; l++)
        if (x[k0 + l].i) v[(size_t)x[k0 + l].i * w + l] = 1.0;
      ad__sweep_forward_vec(t, v, w);
      for (size_t r = 0; r < m; r++)
        if (y[r].i)
          for (size_t l = 0; l < w; l++) J[r * n + k0 + l] = v[(size_t)y[r].i * w + l];
    }
  }
  ad__free(t, v, bytes);
  return AD_OK;
}
