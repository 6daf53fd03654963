/* SPDX-License-Identifier: BSD-3-Clause */
/* External functions: one record whose adjoint and tangent are user
 * callbacks. The outputs become statements without arguments placed right
 * after the record, like values received from another rank: the reverse
 * sweep reaches the record once every use of the outputs has been swept. */
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "tape_impl.h"

typedef struct ext_rec {
  const ad_external_ops *ops;
  void *ud;
  size_t nin, nout;
  ad_index *in, *out; /* handles (0 for passive inputs) */
  double *x, *y;      /* values at the call */
  double *work;       /* xbar/ybar or xdot/ydot during a sweep */
  void *mem;          /* one allocation holding the arrays above */
} ext_rec;

static const char *ext_name(const ext_rec *e) { return e->ops->name ? e->ops->name : "external function"; }

/* For ad_tape_dump: name="..." in=... out=... tangent=yes|no. */
static int ext_describe(const void *data, char *buf, size_t size) {
  const ext_rec *e = data;
  ad__line l = {buf, size, 0};
  ad__line_printf(&l, "name=\"%s\"", ext_name(e));
  ad__line_handles(&l, "in", e->in, e->nin);
  ad__line_handles(&l, "out", e->out, e->nout);
  ad__line_printf(&l, " tangent=%s", e->ops->forward ? "yes" : "no");
  return (int)l.len;
}

static int ext_reverse(ad_tape *t, void *data) {
  ext_rec *e = data;
  double *xbar = e->work, *ybar = e->work + e->nin;
  memset(xbar, 0, e->nin * sizeof *xbar);
  for (size_t j = 0; j < e->nout; j++) {
    ybar[j] = t->adj[e->out[j]];
    t->adj[e->out[j]] = 0.0; /* consumed: the outputs have no other predecessor */
  }
  int rc = e->ops->reverse(e->ud, e->nin, e->x, xbar, e->nout, e->y, ybar);
  if (rc != 0) {
    ad__pending(t, AD_ERR_CALLBACK, "%s: reverse callback returned %d", ext_name(e), rc);
    return AD_ERR_CALLBACK;
  }
  for (size_t i = 0; i < e->nin; i++)
    if (e->in[i]) t->adj[e->in[i]] += xbar[i];
  return AD_OK;
}

static int ext_forward(ad_tape *t, void *data) {
  ext_rec *e = data;
  if (!e->ops->forward) {
    ad__pending(t, AD_ERR_STATE, "%s has no tangent (forward) callback", ext_name(e));
    return AD_ERR_STATE;
  }
  double *xdot = e->work, *ydot = e->work + e->nin;
  for (size_t i = 0; i < e->nin; i++) xdot[i] = e->in[i] ? t->tan[e->in[i]] : 0.0;
  memset(ydot, 0, e->nout * sizeof *ydot);
  int rc = e->ops->forward(e->ud, e->nin, e->x, xdot, e->nout, e->y, ydot);
  if (rc != 0) {
    ad__pending(t, AD_ERR_CALLBACK, "%s: tangent callback returned %d", ext_name(e), rc);
    return AD_ERR_CALLBACK;
  }
  for (size_t j = 0; j < e->nout; j++) t->tan[e->out[j]] = ydot[j];
  return AD_OK;
}

static void ext_destroy(void *data) {
  ext_rec *e = data;
  if (e->ops->destroy) e->ops->destroy(e->ud);
  free(e->mem);
  free(e);
}

static const ad__record_ops ext_ops = {"external function", ext_reverse, ext_forward, ext_destroy, ext_describe};

int ad_external(const ad_external_ops *ops, void *ud, size_t nin, const ad_real *in, size_t nout, ad_real *out) {
  static const char fn[] = "ad_external";
  ad_tape *cur = ad_tape_current(); /* where the message goes; NULL: the thread's last error */
  int rc = AD_OK;
  if (!ops)
    rc = ad__arg_error(cur, "%s: ops is NULL", fn);
  else if (!ops->reverse)
    rc = ad__arg_error(cur, "%s: ops->reverse is NULL (%s)", fn, ops->name ? ops->name : "no name");
  else if ((rc = ad__arg_count(cur, fn, "nin", nin)) == AD_OK && (rc = ad__arg_count(cur, fn, "nout", nout)) == AD_OK &&
           (rc = ad__arg_count(cur, fn, "nin + nout", nin + nout)) == AD_OK &&
           (rc = ad__arg_array(cur, fn, "in", in, nin)) == AD_OK)
    rc = ad__arg_array(cur, fn, "out", out, nout);
  if (rc != AD_OK) {
    if (ops && ops->destroy) ops->destroy(ud);
    return rc;
  }
  for (size_t j = 0; j < nout; j++) out[j] = ad__const(out[j].v);
  ad__recorder *R = ad__rec;
  int any = 0;
  for (size_t i = 0; i < nin; i++) any |= in[i].i != 0;
  if (!R->active || !any) {
    /* Nothing to record: passive outputs. A tape that stopped recording
     * because of an error reports it. */
    if (ops->destroy) ops->destroy(ud);
    return cur && cur->recording ? ad_tape_error(cur) : AD_OK;
  }
  ad_tape *t = ad__tape_of(R);
  for (size_t i = 0; i < nin; i++) {
    if (in[i].i && !ad__handle_live(t, in[i].i, in[i].e)) {
      ad__fail(t, AD_ERR_STALE_HANDLE, "%s: input %zu has handle %llu of recording %u, %s",
               ops->name ? ops->name : "ad_external", i, (unsigned long long)in[i].i, in[i].e,
               ad__stale_reason(t, in[i].i, in[i].e));
      if (ops->destroy) ops->destroy(ud);
      return AD_ERR_STALE_HANDLE;
    }
  }
  /* One allocation for the record's arrays: handles, values and sweep work. */
  size_t n = nin + nout;
  ext_rec *e = calloc(1, sizeof *e);
  char *mem = e ? malloc(n * sizeof(ad_index) + 3 * n * sizeof(double) + 1) : NULL;
  if (!e || !mem) {
    free(e);
    if (ops->destroy) ops->destroy(ud);
    ad__fail(t, AD_ERR_NOMEM, "ad_external: no memory for the record");
    return AD_ERR_NOMEM;
  }
  e->mem = mem;
  e->ops = ops;
  e->ud = ud;
  e->nin = nin;
  e->nout = nout;
  e->x = (double *)(void *)mem;
  e->y = e->x + nin;
  e->work = e->y + nout;
  e->in = (ad_index *)(void *)(e->work + n);
  e->out = e->in + nin;
  for (size_t i = 0; i < nin; i++) {
    e->x[i] = in[i].v;
    e->in[i] = in[i].i;
  }
  for (size_t j = 0; j < nout; j++) e->y[j] = out[j].v;
  rc = ad__record_push(t, &ext_ops, e, sizeof *e + n * sizeof(ad_index) + 3 * n * sizeof(double));
  if (rc != AD_OK) return rc; /* ext_destroy has run */
  for (size_t j = 0; j < nout; j++) {
    out[j] = ad__new_input(t, e->y[j]);
    e->out[j] = out[j].i;
  }
  return ad_tape_error(t);
}
