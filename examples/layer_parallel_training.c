/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * layer_parallel_training: a deep residual network trained with its layers
 * distributed over the ranks, forward and backward solved by a
 * parallel-in-time iteration (the approach of torchbraid with XBraid).
 *
 * The network. A residual network is a time-stepping scheme: with step
 * h = T / L, layers k = 0 .. L-1 map the state x_k (width W) to
 *
 *     x_{k+1} = Phi_k(x_k) = x_k + h tanh(W_k x_k + b_k),
 *
 * forward Euler for dx/dt = tanh(W(t) x + b(t)) on [0, T]. A sample p in R^2
 * enters as x_0 = (p_1, p_2, 0, ..., 0); a logistic readout z = c . x_L + d
 * classifies it, and the loss over the N samples (p_s, y_s), y_s = +-1, is
 *
 *     J(theta) = (1/N) sum_s log(1 + exp(-y_s z_s)),
 *
 * theta = (W_0, b_0, ..., W_{L-1}, b_{L-1}, c, d). The data are two
 * interleaved spirals, made in the program. Every layer propagates all N
 * samples at once: the "state" of the time-stepping scheme is the N x W
 * matrix of the batch.
 *
 * Layer-parallel forward: two-level parareal (MGRIT with F-relaxation and
 * one coarse level). The layers form NC = L / cf coarse intervals of cf
 * layers; rank r owns a contiguous block of intervals (and their layers'
 * parameters; the last rank owns the readout). U_n is the state at the start
 * of interval n, F_n the exact propagation through its cf layers, G_n a
 * single coarse step x + cf h tanh(W x + b) with (W, b) the mean of the
 * interval's layers' parameters (with the first layer's alone, as plain
 * injection would take, the change fell by a factor of about 2 per iteration
 * on this problem instead of 20 to 50). Iteration 0 is a serial coarse
 * sweep, U_{n+1} = G_n(U_n); iteration j+1 computes F_n(U_n^j) on every rank
 * at once, then corrects along a serial pipeline of cheap coarse steps:
 *
 *     U_{n+1}^{j+1} = G_n(U_n^{j+1}) + F_n(U_n^j) - G_n(U_n^j).
 *
 * After j iterations U_0 .. U_j are exact, so NC - 1 iterations reproduce
 * serial propagation to round-off; in practice far fewer reach a
 * tolerance (the iteration stops when the largest change of any U_n,
 * relative to the largest state, is below --tol, or after NC - 1
 * iterations). A last F-relaxation gives every layer's state and x_L.
 *
 * Gradient (a): differentiate through the parallel iteration. Each rank
 * records its share of the whole iteration on its own tape: its parameters
 * are inputs, the pipeline messages are ad_mpi_send / ad_mpi_recv. One
 * collective ad_gradient on all ranks gives every rank dJ/d(its parameters).
 * It is the exact gradient of the loss as computed by j iterations, so it
 * approaches the true gradient as j grows and equals it (to round-off) from
 * j = NC - 1 on.
 *
 * Gradient (b): the adjoint equations, solved backwards in layer-time by
 * the same parallel iteration (torchbraid's way). With lambda_L = dJ/dx_L,
 *
 *     lambda_k = Phi_k'(x_k)^T lambda_{k+1},   dJ/d(W_k, b_k) = (dPhi_k/d(W_k, b_k))^T lambda_{k+1}.
 *
 * The adjoint is a linear time-stepping scheme run from k = L down to 0:
 * parareal applies to it unchanged, with the fine propagator the
 * vector-Jacobian products of the interval's cf layers and the coarse one
 * that of G_n (linearized at the forward state U_n); it stops by the same
 * test as the forward. Each vector-Jacobian product is a reverse sweep of a small
 * Ariadne tape of that one layer (recorded once per epoch at the forward
 * states x_k, then swept on demand with a new seed for every iteration).
 * The parameter gradients come from the final fine relaxation.
 *
 * Checks (independent of the parallel code): the serial gradient, the whole
 * network on one tape on rank 0, against central finite differences of the
 * loss on a few parameters; the converged parallel forward against serial
 * propagation of every layer; the gradients (a) and (b) after NC - 1
 * iterations against the serial gradient (they must agree to round-off);
 * and training must lower the loss. Then the network is trained with Adam,
 * and rank 0 draws the loss curve and the learned decision boundary as PNG
 * figures (with cairo, figure.h) beside a text summary.
 *
 * Usage: mpiexec -n P layer_parallel_training [options]
 *   --layers L    layers (default 16)           --width W     state width (8)
 *   --samples N   samples, even (64)            --cf C        layers per coarse interval (4)
 *   --epochs E    Adam epochs (30; 0: none)     --lr A        Adam step (0.05)
 *   --tol T       parareal tolerance (1e-8)     --method M    a, b or serial (b) for training
 *   --T T         final layer-time, h = T / L (4)
 *   --time E      time E epochs of (a), (b) and serial: the fastest epoch of each
 *   --out DIR     where the pictures and summary go (default .; it must exist)
 * L must be a multiple of C, and L / C at least P.
 *
 * Built with -DARIADNE_PASSIVE there is no tape: the parallel forward is still
 * checked against serial propagation; the gradients, training and pictures
 * are skipped.
 */
#include <ariadne_mpi.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef ARIADNE_HAVE_CAIRO
#include "example_util.h"
#include "figure.h"
#endif

#define PI 3.14159265358979323846
enum { TAG_FWD = 11, TAG_ADJ = 12 };

typedef struct net {
  MPI_Comm comm;
  int rank, size;
  int L, W, N, cf, NC; /* layers, width, samples, layers per interval, intervals */
  double h;            /* layer step T / L */
  int i0, i1;          /* this rank's coarse intervals [i0, i1) */
  int k0, k1;          /* and layers [k0, k1) = [i0 cf, i1 cf) */
  int npl, npar;       /* parameters per layer (W x W + W) and in all */
  int off, cnt;        /* this rank's parameters: [off, off + cnt) */
  double *pts, *y;     /* samples (N x 2) and labels (+-1) */
} net;

static void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "layer_parallel_training: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* Rank 0 prints, to standard output and to the summary file. */
static FILE *summary;
static void say(const net *nt, const char *fmt, ...) {
  if (nt->rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (summary) {
    va_start(ap, fmt);
    vfprintf(summary, fmt, ap);
    va_end(ap);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* The network, on ad_real: recorded when a tape records, plain otherwise.   */
/* ------------------------------------------------------------------------ */

/* One residual step of size hh for ns samples: y = x + hh tanh(Wk x + bk),
 * with th = (Wk row-major, bk). y must not alias x. */
static void step(int w, int ns, double hh, const ad_real *th, const ad_real *x, ad_real *y) {
  for (int s = 0; s < ns; s++) {
    const ad_real *xs = x + (size_t)s * w;
    ad_real *ys = y + (size_t)s * w;
    for (int i = 0; i < w; i++) {
      ad_real z = ad_add(ad_dot((size_t)w, th + (size_t)i * w, xs), th[w * w + i]);
      ys[i] = ad_add(xs[i], ad_mul(hh, ad_tanh(z)));
    }
  }
}

/* The inputs of ns samples: x_0 = (p_1, p_2, 0, ..., 0). */
static void embed(int w, int ns, const double *pts, ad_real *x) {
  for (int s = 0; s < ns; s++)
    for (int i = 0; i < w; i++) x[(size_t)s * w + i] = ad_const(i < 2 ? pts[2 * s + i] : 0.0);
}

/* Layers [ka, kb) on ns samples, serially: x (in) becomes x_kb; tmp is scratch. */
static void propagate(const net *nt, int ns, const ad_real *theta, int ka, int kb, ad_real *x, ad_real *tmp) {
  size_t m = (size_t)ns * nt->W;
  for (int k = ka; k < kb; k++) {
    step(nt->W, ns, nt->h, theta + (size_t)k * nt->npl, x, tmp);
    memcpy(x, tmp, m * sizeof *x);
  }
}

/* The readout of one sample: z = c . x + d, with ro = (c, d). */
static ad_real readout(int w, const ad_real *ro, const ad_real *xs) { return ad_add(ad_dot((size_t)w, ro, xs), ro[w]); }

/* J = (1/N) sum_s log(1 + exp(-y_s z_s)), written so that exp never overflows. */
static ad_real loss(const net *nt, const ad_real *ro, const ad_real *xl) {
  ad_real sum = ad_const(0.0);
  for (int s = 0; s < nt->N; s++) {
    ad_real m = ad_mul(readout(nt->W, ro, xl + (size_t)s * nt->W), -nt->y[s]);
    ad_real sp = ad_gt(m, 0.0) ? ad_add(m, ad_log1p(ad_exp(ad_neg(m)))) : ad_log1p(ad_exp(m));
    sum = ad_add(sum, sp);
  }
  return ad_mul(sum, 1.0 / nt->N);
}

static void to_const(size_t n, const double *v, ad_real *x) {
  for (size_t i = 0; i < n; i++) x[i] = ad_const(v[i]);
}

/* ------------------------------------------------------------------------ */
/* The parallel forward: parareal over the coarse intervals                  */
/* ------------------------------------------------------------------------ */

/* The coarse step's parameters for interval n: the mean of its layers'. */
static void coarse_params(const net *nt, const ad_real *theta, int n, ad_real *cth) {
  for (int i = 0; i < nt->npl; i++) {
    ad_real sum = ad_const(0.0);
    for (int c = 0; c < nt->cf; c++) sum = ad_add(sum, theta[(size_t)(n * nt->cf + c) * nt->npl + i]);
    cth[i] = ad_mul(sum, 1.0 / nt->cf);
  }
}

/* Largest |a - b| and |a| over m values, into mx[0], mx[1]. */
static void track(size_t m, const ad_real *a, const ad_real *b, double mx[2]) {
  for (size_t i = 0; i < m; i++) {
    mx[0] = fmax(mx[0], fabs(ad_value(a[i]) - ad_value(b[i])));
    mx[1] = fmax(mx[1], fabs(ad_value(a[i])));
  }
}

/* Runs the forward iteration: at most max_iter parareal iterations, fewer if
 * the relative change falls to tol (tol 0: exactly max_iter). Records on the
 * current tape if one records (the messages are ad_mpi_* calls). theta holds
 * every parameter slot (only this rank's are used). On the last rank xl
 * receives x_L. If states is not NULL it receives x_k (values) for k in
 * [k0, k1]. hist[j] (if not NULL) the relative change of iteration j + 1.
 * Collective; returns the iterations done. */
static int forward(const net *nt, const ad_real *theta, int max_iter, double tol, ad_real *xl, double *states,
                   double *hist) {
  int nI = nt->i1 - nt->i0, w = nt->W, cf = nt->cf;
  size_t m = (size_t)nt->N * w;
  ad_real *U = xmalloc((size_t)(nI + 1) * m * sizeof *U), *F = xmalloc((size_t)nI * m * sizeof *F);
  ad_real *G = xmalloc((size_t)nI * m * sizeof *G), *g = xmalloc(m * sizeof *g), *tmp = xmalloc(m * sizeof *tmp);
  double H = cf * nt->h;
  ad_real *cth = xmalloc((size_t)nI * nt->npl * sizeof *cth);
  for (int q = 0; q < nI; q++) coarse_params(nt, theta, nt->i0 + q, cth + (size_t)q * nt->npl);
#define COARSE(q, in, out) step(w, nt->N, H, cth + (size_t)(q)*nt->npl, in, out)

  /* Iteration 0: the coarse propagator alone, along the pipeline. */
  if (nt->rank == 0)
    embed(w, nt->N, nt->pts, U);
  else
    ad_mpi_recv(U, (int)m, AD_MPI_REAL, nt->rank - 1, TAG_FWD, nt->comm, MPI_STATUS_IGNORE);
  for (int q = 0; q < nI; q++) {
    COARSE(q, U + q * m, G + q * m);
    memcpy(U + (q + 1) * m, G + q * m, m * sizeof *U);
  }
  if (nt->rank < nt->size - 1) ad_mpi_send(U + nI * m, (int)m, AD_MPI_REAL, nt->rank + 1, TAG_FWD, nt->comm);

  int it = 0;
  while (it < max_iter) {
    /* Fine propagation of every interval from the current U: the parallel part. */
    for (int q = 0; q < nI; q++) {
      memcpy(F + q * m, U + q * m, m * sizeof *U);
      propagate(nt, nt->N, theta, (nt->i0 + q) * cf, (nt->i0 + q + 1) * cf, F + q * m, tmp);
    }
    /* The coarse correction, along the pipeline. */
    double mx[2] = {0.0, 0.0};
    if (nt->rank > 0) ad_mpi_recv(U, (int)m, AD_MPI_REAL, nt->rank - 1, TAG_FWD, nt->comm, MPI_STATUS_IGNORE);
    for (int q = 0; q < nI; q++) {
      COARSE(q, U + q * m, g);
      ad_real *u = U + (q + 1) * m, *f = F + q * m, *go = G + q * m;
      for (size_t i = 0; i < m; i++) tmp[i] = ad_add(g[i], ad_sub(f[i], go[i]));
      track(m, tmp, u, mx);
      memcpy(u, tmp, m * sizeof *u);
      memcpy(go, g, m * sizeof *go);
    }
    if (nt->rank < nt->size - 1) ad_mpi_send(U + nI * m, (int)m, AD_MPI_REAL, nt->rank + 1, TAG_FWD, nt->comm);
    it++;
    /* The stopping test is passive control flow: plain MPI. */
    MPI_Allreduce(MPI_IN_PLACE, mx, 2, MPI_DOUBLE, MPI_MAX, nt->comm);
    double rel = mx[0] / (mx[1] > 0.0 ? mx[1] : 1.0);
    if (hist) hist[it - 1] = rel;
    if (tol > 0.0 && rel <= tol) break;
  }
#undef COARSE

  /* F-relaxation: every layer's state from the latest U. Interval q's start
   * state overwrites the end state of interval q - 1 (they agree to the
   * tolerance), since it is the one the layers after it started from. */
  for (int q = 0; q < nI; q++) {
    memcpy(F + q * m, U + q * m, m * sizeof *U);
    for (int c = 0; c < cf; c++) {
      int k = (nt->i0 + q) * cf + c;
      if (states)
        for (size_t i = 0; i < m; i++) states[(size_t)(k - nt->k0) * m + i] = ad_value(F[q * m + i]);
      step(w, nt->N, nt->h, theta + (size_t)k * nt->npl, F + q * m, tmp);
      memcpy(F + q * m, tmp, m * sizeof *tmp);
    }
    if (states && q == nI - 1)
      for (size_t i = 0; i < m; i++) states[(size_t)(nt->k1 - nt->k0) * m + i] = ad_value(F[q * m + i]);
  }
  if (nt->rank == nt->size - 1) memcpy(xl, F + (nI - 1) * m, m * sizeof *xl);
  free(U);
  free(F);
  free(G);
  free(g);
  free(tmp);
  free(cth);
  return it;
}

/* J at the parameters p (all of them), serially, not recorded. */
static double serial_loss(const net *nt, const double *p) {
  size_t m = (size_t)nt->N * nt->W;
  ad_real *theta = xmalloc((size_t)nt->npar * sizeof *theta), *x = xmalloc(m * sizeof *x);
  ad_real *tmp = xmalloc(m * sizeof *tmp);
  to_const((size_t)nt->npar, p, theta);
  embed(nt->W, nt->N, nt->pts, x);
  propagate(nt, nt->N, theta, 0, nt->L, x, tmp);
  double J = ad_value(loss(nt, theta + (size_t)nt->L * nt->npl, x));
  free(theta);
  free(x);
  free(tmp);
  return J;
}

#ifndef ARIADNE_PASSIVE
/* ------------------------------------------------------------------------ */
/* Gradient (a): straight through the parallel iteration                     */
/* ------------------------------------------------------------------------ */

/* J (on every rank) and dJ/d(this rank's parameters) into g_own[0 .. cnt),
 * from a recording of `iters` forward iterations (tol as in forward()).
 * Collective. */
static int gradient_a(const net *nt, ad_tape *tape, const double *p, int iters, double tol, double *J, double *g_own,
                      int *done) {
  size_t m = (size_t)nt->N * nt->W;
  ad_real *theta = xmalloc((size_t)nt->npar * sizeof *theta), *xl = xmalloc(m * sizeof *xl);
  int last = nt->rank == nt->size - 1;
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  for (int i = 0; i < nt->npar; i++) theta[i] = i >= nt->off && i < nt->off + nt->cnt ? ad_input(p[i]) : ad_const(p[i]);
  int it = forward(nt, theta, iters, tol, xl, NULL, NULL);
  ad_real Jr = last ? loss(nt, theta + (size_t)nt->L * nt->npl, xl) : ad_const(0.0);
  ad_tape_end(tape);
  /* The loss lives on the last rank; the others sweep with a passive output. */
  int rc = ad_gradient(tape, Jr, (size_t)nt->cnt, theta + nt->off, g_own);
  if (rc != AD_OK)
    fprintf(stderr, "[%d] gradient (a): %s: %s\n", nt->rank, ad_errname(rc), ad_tape_error_message(tape));
  double Jv = ad_value(Jr);
  MPI_Bcast(&Jv, 1, MPI_DOUBLE, nt->size - 1, nt->comm);
  *J = Jv;
  if (done) *done = it;
  free(theta);
  free(xl);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Gradient (b): the adjoint, backwards in layer-time, by parareal           */
/* ------------------------------------------------------------------------ */

/* One small tape per layer of this rank (and per coarse step), recorded at
 * the forward states: X inputs, Th the layer's parameters (inputs), Y outputs. */
typedef struct layer_tape {
  ad_tape *tape;
  ad_real *X, *Th, *Y;
} layer_tape;

typedef struct adj_ws {
  layer_tape *fine, *coarse; /* k1 - k0 and i1 - i0 of them */
  ad_tape *head;             /* the readout and loss */
} adj_ws;

static void layer_tape_record(const net *nt, layer_tape *lt, double hh, const double *th, int params_active,
                              const double *x) {
  size_t m = (size_t)nt->N * nt->W;
  ad_tape_reset(lt->tape);
  ad_tape_begin(lt->tape);
  for (size_t i = 0; i < m; i++) lt->X[i] = ad_input(x[i]);
  for (int i = 0; i < nt->npl; i++) lt->Th[i] = params_active ? ad_input(th[i]) : ad_const(th[i]);
  step(nt->W, nt->N, hh, lt->Th, lt->X, lt->Y);
  ad_tape_end(lt->tape);
}

/* The vector-Jacobian product of a recorded layer: lam_in = (dY/dX)^T lam_out,
 * and g += (dY/dTh)^T lam_out if g is not NULL. lam_in may alias lam_out. */
static int layer_tape_vjp(const net *nt, layer_tape *lt, const double *lam_out, double *lam_in, double *g) {
  size_t m = (size_t)nt->N * nt->W;
  ad_adjoints_zero(lt->tape);
  for (size_t i = 0; i < m; i++) ad_seed(lt->tape, lt->Y[i], lam_out[i]);
  int rc = ad_reverse(lt->tape);
  for (size_t i = 0; i < m; i++) lam_in[i] = ad_adjoint(lt->tape, lt->X[i]);
  if (g)
    for (int i = 0; i < nt->npl; i++) g[i] += ad_adjoint(lt->tape, lt->Th[i]);
  return rc;
}

static adj_ws *adj_ws_create(const net *nt) {
  adj_ws *ws = xmalloc(sizeof *ws);
  int nf = nt->k1 - nt->k0, nc = nt->i1 - nt->i0;
  size_t m = (size_t)nt->N * nt->W;
  ws->fine = xmalloc((size_t)nf * sizeof *ws->fine);
  ws->coarse = xmalloc((size_t)nc * sizeof *ws->coarse);
  for (int k = 0; k < nf + nc; k++) {
    layer_tape *lt = k < nf ? &ws->fine[k] : &ws->coarse[k - nf];
    lt->tape = ad_tape_create();
    lt->X = xmalloc(m * sizeof *lt->X);
    lt->Y = xmalloc(m * sizeof *lt->Y);
    lt->Th = xmalloc((size_t)nt->npl * sizeof *lt->Th);
    if (!lt->tape) MPI_Abort(nt->comm, 1);
  }
  ws->head = ad_tape_create();
  if (!ws->head) MPI_Abort(nt->comm, 1);
  return ws;
}

static void adj_ws_destroy(const net *nt, adj_ws *ws) {
  int nf = nt->k1 - nt->k0, nc = nt->i1 - nt->i0;
  for (int k = 0; k < nf + nc; k++) {
    layer_tape *lt = k < nf ? &ws->fine[k] : &ws->coarse[k - nf];
    ad_tape_destroy(lt->tape);
    free(lt->X);
    free(lt->Y);
    free(lt->Th);
  }
  ad_tape_destroy(ws->head);
  free(ws->fine);
  free(ws->coarse);
  free(ws);
}

/* The adjoint iteration. lam_L (last rank) is dJ/dx_L; at most max_iter
 * parareal iterations (tol as in forward()), backwards from the last rank
 * to rank 0, then the final fine relaxation adds each layer's parameter
 * gradient to g_layers[(k - k0) npl ...]. Collective. */
static int adjoint(const net *nt, adj_ws *ws, const double *lam_L, int max_iter, double tol, double *g_layers,
                   int *done, double *hist) {
  int nI = nt->i1 - nt->i0, cf = nt->cf, rc = AD_OK;
  size_t m = (size_t)nt->N * nt->W;
  double *Lam = xmalloc((size_t)(nI + 1) * m * sizeof *Lam), *F = xmalloc((size_t)nI * m * sizeof *F);
  double *G = xmalloc((size_t)nI * m * sizeof *G), *g = xmalloc(m * sizeof *g);
  int last = nt->rank == nt->size - 1;

  /* Iteration 0: the coarse adjoint alone, from the last rank down to rank 0. */
  if (last)
    memcpy(Lam + nI * m, lam_L, m * sizeof *Lam);
  else
    MPI_Recv(Lam + nI * m, (int)m, MPI_DOUBLE, nt->rank + 1, TAG_ADJ, nt->comm, MPI_STATUS_IGNORE);
  for (int q = nI - 1; q >= 0; q--) {
    rc |= layer_tape_vjp(nt, &ws->coarse[q], Lam + (q + 1) * m, G + q * m, NULL);
    memcpy(Lam + q * m, G + q * m, m * sizeof *Lam);
  }
  if (nt->rank > 0) MPI_Send(Lam, (int)m, MPI_DOUBLE, nt->rank - 1, TAG_ADJ, nt->comm);

  int it = 0;
  while (it < max_iter) {
    for (int q = 0; q < nI; q++) { /* the fine adjoint of every interval, in parallel */
      memcpy(F + q * m, Lam + (q + 1) * m, m * sizeof *F);
      for (int c = cf - 1; c >= 0; c--) rc |= layer_tape_vjp(nt, &ws->fine[q * cf + c], F + q * m, F + q * m, NULL);
    }
    double mx[2] = {0.0, 0.0};
    if (!last) MPI_Recv(Lam + nI * m, (int)m, MPI_DOUBLE, nt->rank + 1, TAG_ADJ, nt->comm, MPI_STATUS_IGNORE);
    for (int q = nI - 1; q >= 0; q--) {
      rc |= layer_tape_vjp(nt, &ws->coarse[q], Lam + (q + 1) * m, g, NULL);
      for (size_t i = 0; i < m; i++) {
        double v = g[i] + (F[q * m + i] - G[q * m + i]);
        mx[0] = fmax(mx[0], fabs(v - Lam[q * m + i]));
        mx[1] = fmax(mx[1], fabs(v));
        Lam[q * m + i] = v;
      }
      memcpy(G + q * m, g, m * sizeof *G);
    }
    if (nt->rank > 0) MPI_Send(Lam, (int)m, MPI_DOUBLE, nt->rank - 1, TAG_ADJ, nt->comm);
    it++;
    MPI_Allreduce(MPI_IN_PLACE, mx, 2, MPI_DOUBLE, MPI_MAX, nt->comm);
    double rel = mx[0] / (mx[1] > 0.0 ? mx[1] : 1.0);
    if (hist) hist[it - 1] = rel;
    if (tol > 0.0 && rel <= tol) break;
  }

  /* Final fine relaxation: lambda_{k+1} -> lambda_k through every layer,
   * collecting (dPhi_k/dtheta_k)^T lambda_{k+1}. */
  memset(g_layers, 0, (size_t)(nt->k1 - nt->k0) * nt->npl * sizeof *g_layers);
  for (int q = 0; q < nI; q++) {
    memcpy(g, Lam + (q + 1) * m, m * sizeof *g);
    for (int c = cf - 1; c >= 0; c--)
      rc |= layer_tape_vjp(nt, &ws->fine[q * cf + c], g, g, g_layers + (size_t)(q * cf + c) * nt->npl);
  }
  free(Lam);
  free(F);
  free(G);
  free(g);
  if (done) *done = it;
  return rc ? AD_ERR_CALLBACK : AD_OK;
}

/* J and dJ/d(this rank's parameters) by (b): a passive parallel forward to
 * tol (at most fwd_iters iterations), the loss's own small tape on the last
 * rank, the layer tapes, then the parallel adjoint. Collective. */
static int gradient_b(const net *nt, adj_ws *ws, const double *p, int fwd_iters, int adj_iters, double tol, double *J,
                      double *g_own, int *fdone, int *adone, double *ahist) {
  size_t m = (size_t)nt->N * nt->W;
  int nf = nt->k1 - nt->k0, last = nt->rank == nt->size - 1, rc = AD_OK;
  ad_real *theta = xmalloc((size_t)nt->npar * sizeof *theta), *xl = xmalloc(m * sizeof *xl);
  double *states = xmalloc((size_t)(nf + 1) * m * sizeof *states), *lam = xmalloc(m * sizeof *lam);
  to_const((size_t)nt->npar, p, theta);
  int it = forward(nt, theta, fwd_iters, tol, xl, states, NULL);
  if (fdone) *fdone = it;

  double Jv = 0.0;
  if (last) { /* lambda_L and the readout's gradient from the loss's tape */
    ad_tape *t = ws->head;
    ad_real *ro = theta + (size_t)nt->L * nt->npl;
    ad_tape_reset(t);
    ad_tape_begin(t);
    for (size_t i = 0; i < m; i++) xl[i] = ad_input(ad_value(xl[i]));
    for (int i = 0; i <= nt->W; i++) ro[i] = ad_input(p[nt->L * nt->npl + i]);
    ad_real Jr = loss(nt, ro, xl);
    ad_tape_end(t);
    Jv = ad_value(Jr);
    ad_adjoints_zero(t);
    ad_seed(t, Jr, 1.0);
    rc |= ad_reverse(t);
    for (size_t i = 0; i < m; i++) lam[i] = ad_adjoint(t, xl[i]);
    for (int i = 0; i <= nt->W; i++) g_own[(size_t)nf * nt->npl + i] = ad_adjoint(t, ro[i]);
  }
  MPI_Bcast(&Jv, 1, MPI_DOUBLE, nt->size - 1, nt->comm);
  *J = Jv;

  /* The layer tapes at the forward states; coarse steps at each interval's start. */
  for (int k = nt->k0; k < nt->k1; k++)
    layer_tape_record(nt, &ws->fine[k - nt->k0], nt->h, p + (size_t)k * nt->npl, 1, states + (size_t)(k - nt->k0) * m);
  double *cth = xmalloc((size_t)nt->npl * sizeof *cth);
  ad_real *cth_r = xmalloc((size_t)nt->npl * sizeof *cth_r);
  for (int n = nt->i0; n < nt->i1; n++) {
    coarse_params(nt, theta, n, cth_r);
    for (int i = 0; i < nt->npl; i++) cth[i] = ad_value(cth_r[i]);
    layer_tape_record(nt, &ws->coarse[n - nt->i0], nt->cf * nt->h, cth, 0, states + (size_t)(n * nt->cf - nt->k0) * m);
  }
  free(cth);
  free(cth_r);
  if (adjoint(nt, ws, lam, adj_iters, tol, g_own, adone, ahist) != AD_OK) rc = AD_ERR_CALLBACK;
  if (rc != AD_OK) fprintf(stderr, "[%d] gradient (b): a layer's reverse sweep failed\n", nt->rank);
  free(theta);
  free(xl);
  free(states);
  free(lam);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The reference: the whole network on one tape, on one rank                */
/* ------------------------------------------------------------------------ */

/* J and dJ/dp (all parameters) by serial backpropagation: one tape. */
static int serial_gradient(const net *nt, ad_tape *tape, const double *p, double *J, double *g) {
  size_t m = (size_t)nt->N * nt->W;
  ad_real *theta = xmalloc((size_t)nt->npar * sizeof *theta), *x = xmalloc(m * sizeof *x);
  ad_real *tmp = xmalloc(m * sizeof *tmp);
  ad_tape_reset(tape);
  ad_tape_begin(tape);
  for (int i = 0; i < nt->npar; i++) theta[i] = ad_input(p[i]);
  embed(nt->W, nt->N, nt->pts, x);
  propagate(nt, nt->N, theta, 0, nt->L, x, tmp);
  ad_real Jr = loss(nt, theta + (size_t)nt->L * nt->npl, x);
  ad_tape_end(tape);
  *J = ad_value(Jr);
  int rc = ad_gradient(tape, Jr, (size_t)nt->npar, theta, g);
  free(theta);
  free(x);
  free(tmp);
  return rc;
}
#endif /* ARIADNE_PASSIVE */

#if !defined(ARIADNE_PASSIVE) && defined(ARIADNE_HAVE_CAIRO)
/* ------------------------------------------------------------------------ */
/* Figures, drawn with cairo (figure.h)                                      */
/* ------------------------------------------------------------------------ */

static const double BLUE[3] = {0.12, 0.35, 0.67}, ORANGE[3] = {0.86, 0.43, 0.08}, BLACK[3] = {0, 0, 0};

/* The loss per epoch on a logarithmic axis; `what` says how the network was
 * trained. Returns 0 or -1. */
static int plot_loss(const char *path, int epochs, const double *J, const char *what) {
  figure f;
  if (figure_open(&f, path, 680, 430, "Training loss per epoch", what) != 0) return -1;
  double lo = INFINITY, hi = -INFINITY;
  for (int e = 0; e < epochs; e++) lo = fmin(lo, J[e]), hi = fmax(hi, J[e]);
  double y0 = pow(10.0, floor(log10(lo))), y1 = pow(10.0, ceil(log10(hi)));
  if (y1 <= y0) y1 = 10.0 * y0;
  f.right = f.w - 24; /* no colour bar or legend: the plot takes the width */
  figure_axes(&f, 0, epochs > 1 ? epochs - 1 : 1, y0, y1, FIGURE_LOG, "epoch", "loss J (log scale)");
  double *x = xmalloc((size_t)epochs * sizeof *x);
  for (int e = 0; e < epochs; e++) x[e] = e;
  figure_polyline(&f, epochs, x, J, BLUE, 2.0);
  free(x);
  return figure_close(&f);
}

#define VIEW 1.3 /* the decision map shows [-VIEW, VIEW]^2 */

/* The classifier's output z over a G x G grid of [-VIEW, VIEW]^2, the
 * samples as dots: orange the class y = +1, blue y = -1, the background
 * tinted by the predicted class and how sure it is, the decision boundary
 * z = 0 dark; a legend says which is which. Returns 0 or -1. */
static int plot_boundary(const char *path, const net *nt, const double *p, const char *what) {
  const int G = 121, S = 400;
  size_t ng = (size_t)G * G, m = ng * nt->W;
  double *pts = xmalloc(2 * ng * sizeof *pts), *z = xmalloc(ng * sizeof *z);
  ad_real *theta = xmalloc((size_t)nt->npar * sizeof *theta), *x = xmalloc(m * sizeof *x);
  ad_real *tmp = xmalloc(m * sizeof *tmp);
  for (int i = 0; i < G; i++)
    for (int j = 0; j < G; j++) {
      pts[2 * ((size_t)i * G + j)] = -VIEW + 2.0 * VIEW * j / (G - 1);
      pts[2 * ((size_t)i * G + j) + 1] = VIEW - 2.0 * VIEW * i / (G - 1);
    }
  to_const((size_t)nt->npar, p, theta);
  embed(nt->W, (int)ng, pts, x);
  propagate(nt, (int)ng, theta, 0, nt->L, x, tmp);
  for (size_t s = 0; s < ng; s++) z[s] = ad_value(readout(nt->W, theta + (size_t)nt->L * nt->npl, x + s * nt->W));

  /* The background, S x S pixels, row 0 at the top: z interpolated
   * bilinearly in the grid. */
  double *v = xmalloc((size_t)S * S * sizeof *v);
  unsigned char *rgb = xmalloc((size_t)S * S * 3);
  for (int y = 0; y < S; y++)
    for (int xp = 0; xp < S; xp++) {
      double gy = (G - 1) * (y + 0.5) / S, gx = (G - 1) * (xp + 0.5) / S;
      int iy = (int)gy, ix = (int)gx;
      double fy = gy - iy, fx = gx - ix;
      if (iy >= G - 1) iy = G - 2, fy = 1.0;
      if (ix >= G - 1) ix = G - 2, fx = 1.0;
      const double *r0 = z + (size_t)iy * G + ix, *r1 = r0 + G;
      v[(size_t)y * S + xp] = (1 - fy) * ((1 - fx) * r0[0] + fx * r0[1]) + fy * ((1 - fx) * r1[0] + fx * r1[1]);
    }
  for (int y = 0; y < S; y++)
    for (int xp = 0; xp < S; xp++) {
      double vv = v[(size_t)y * S + xp], sure = fabs(2.0 / (1.0 + exp(-vv)) - 1.0), a = 0.15 + 0.35 * sure;
      const double *col = vv > 0.0 ? ORANGE : BLUE;
      unsigned char *px = rgb + 3 * ((size_t)y * S + xp);
      for (int k = 0; k < 3; k++) px[k] = (unsigned char)lround(255.0 * (1.0 - a + col[k] * a));
      /* The boundary z = 0: a pixel whose right or lower neighbour has the other sign. */
      if ((xp + 1 < S && (v[(size_t)y * S + xp + 1] > 0.0) != (vv > 0.0)) ||
          (y + 1 < S && (v[(size_t)(y + 1) * S + xp] > 0.0) != (vv > 0.0)))
        memset(px, 0, 3);
    }
  figure f;
  int rc = figure_open(&f, path, 720, 560, "Decision boundary of the trained network", what);
  if (rc == 0) {
    double side = fmin(f.right - f.left, f.bottom - f.top);
    f.right = f.left + side, f.bottom = f.top + side;
    figure_axes(&f, -VIEW, VIEW, -VIEW, VIEW, FIGURE_LINEAR, "first coordinate x\u2081", "second coordinate x\u2082");
    figure_raster(&f, S, S, rgb, -VIEW, VIEW, VIEW, -VIEW);
    for (int s = 0; s < nt->N; s++) figure_dot(&f, nt->pts[2 * s], nt->pts[2 * s + 1], 3.5, nt->y[s] > 0 ? ORANGE : BLUE);
    const double tint[2][3] = {{1 - 0.4 + ORANGE[0] * 0.4, 1 - 0.4 + ORANGE[1] * 0.4, 1 - 0.4 + ORANGE[2] * 0.4},
                               {1 - 0.4 + BLUE[0] * 0.4, 1 - 0.4 + BLUE[1] * 0.4, 1 - 0.4 + BLUE[2] * 0.4}};
    const double colours[5][3] = {{ORANGE[0], ORANGE[1], ORANGE[2]}, {BLUE[0], BLUE[1], BLUE[2]},
                                  {tint[0][0], tint[0][1], tint[0][2]}, {tint[1][0], tint[1][1], tint[1][2]},
                                  {BLACK[0], BLACK[1], BLACK[2]}};
    const char *labels[5] = {"class +1 (sample)", "class -1 (sample)", "predicted +1", "predicted -1",
                             "boundary z = 0"};
    const int kinds[5] = {FIGURE_DOT, FIGURE_DOT, FIGURE_PATCH, FIGURE_PATCH, FIGURE_LINE};
    figure_legend(&f, 5, labels, kinds, colours);
    figure_note(&f, "Background: the network's prediction, darker where it is surer (|tanh(z/2)| from 0 to 1).");
    rc = figure_close(&f);
  }
  free(v);
  free(rgb);
  free(pts);
  free(z);
  free(theta);
  free(x);
  free(tmp);
  return rc;
}

#endif /* ARIADNE_PASSIVE */

/* ------------------------------------------------------------------------ */
/* Set-up                                                                    */
/* ------------------------------------------------------------------------ */

/* Two interleaved spirals: class y = +1 and its copy turned by pi (y = -1),
 * radius from 0.2 to 1 over 1.25 turns, with a little noise. */
static void make_spirals(net *nt) {
  nt->pts = xmalloc(2 * (size_t)nt->N * sizeof *nt->pts);
  nt->y = xmalloc((size_t)nt->N * sizeof *nt->y);
  int half = nt->N / 2;
  for (int s = 0; s < nt->N; s++) {
    int cls = s % 2, j = s / 2;
    double t = (j + 0.5) / half, r = 0.2 + 0.8 * t, a = 2.5 * PI * t + cls * PI;
    nt->pts[2 * s] = r * cos(a) + 0.03 * example_hash_unit(2ull * s);
    nt->pts[2 * s + 1] = r * sin(a) + 0.03 * example_hash_unit(2ull * s + 1);
    nt->y[s] = cls ? -1.0 : 1.0;
  }
}

/* The starting parameters, the same on any number of ranks: weights of
 * size about 1 / sqrt(W), small biases, a readout of size 1 / sqrt(W). */
static void init_params(const net *nt, double *p) {
  double sw = 1.0 / sqrt((double)nt->W);
  for (int k = 0; k < nt->L; k++)
    for (int i = 0; i < nt->npl; i++)
      p[(size_t)k * nt->npl + i] =
          (i < nt->W * nt->W ? 1.5 * sw : 0.2) * example_hash_unit(1000003ull + (size_t)k * nt->npl + i);
  for (int i = 0; i <= nt->W; i++) p[(size_t)nt->L * nt->npl + i] = i < nt->W ? sw * example_hash_unit(7ull + i) : 0.0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) return 0;
  *out = (int)v;
  return 1;
}

static int parse_real(const char *s, double lo, double hi, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) return 0;
  *out = v;
  return 1;
}

#ifndef ARIADNE_PASSIVE
/* Every rank's parameter range, in rank order, for gathering. */
static void param_ranges(const net *nt, int *counts, int *displs) {
  int base = nt->NC / nt->size, extra = nt->NC % nt->size;
  for (int r = 0; r < nt->size; r++) {
    int i0 = r * base + (r < extra ? r : extra), i1 = i0 + base + (r < extra);
    displs[r] = i0 * nt->cf * nt->npl;
    counts[r] = (i1 - i0) * nt->cf * nt->npl + (r == nt->size - 1 ? nt->W + 1 : 0);
  }
}

/* Every rank's part of v (its range) onto every rank's copy of v. */
static void allgather_params(const net *nt, double *v) {
  int *counts = xmalloc((size_t)nt->size * sizeof *counts), *displs = xmalloc((size_t)nt->size * sizeof *displs);
  param_ranges(nt, counts, displs);
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v, counts, displs, MPI_DOUBLE, nt->comm);
  free(counts);
  free(displs);
}

/* max |g - ref| / max |ref| over all parameters, on every rank; g_own is
 * this rank's range, ref all parameters (on every rank). */
static double gradient_error(const net *nt, const double *g_own, const double *ref) {
  double mx[2] = {0.0, 0.0};
  for (int i = 0; i < nt->cnt; i++) mx[0] = fmax(mx[0], fabs(g_own[i] - ref[nt->off + i]));
  for (int i = 0; i < nt->npar; i++) mx[1] = fmax(mx[1], fabs(ref[i]));
  MPI_Allreduce(MPI_IN_PLACE, mx, 2, MPI_DOUBLE, MPI_MAX, nt->comm);
  return mx[0] / mx[1];
}

enum { METHOD_A, METHOD_B, METHOD_SERIAL };

typedef struct trainer {
  ad_tape *tape;
  adj_ws *ws;
  double *gall;                   /* all parameters' gradient (serial method) */
  int fwd_iters, adj_iters, runs; /* iterations summed over the runs, for averages */
} trainer;

/* One loss and gradient by `method` at p (this rank's range of g_own). Collective. */
static int epoch_gradient(const net *nt, trainer *tr, int method, const double *p, double tol, double *J,
                          double *g_own) {
  int f = 0, a = 0, rc;
  if (method == METHOD_A) {
    rc = gradient_a(nt, tr->tape, p, nt->NC - 1, tol, J, g_own, &f);
  } else if (method == METHOD_B) {
    rc = gradient_b(nt, tr->ws, p, nt->NC - 1, nt->NC - 1, tol, J, g_own, &f, &a, NULL);
  } else {
    rc = serial_gradient(nt, tr->tape, p, J, tr->gall);
    memcpy(g_own, tr->gall, (size_t)nt->npar * sizeof *g_own);
  }
  tr->fwd_iters += f;
  tr->adj_iters += a;
  tr->runs++;
  return rc;
}
#endif

int main(int argc, char **argv) {
  net nt;
  memset(&nt, 0, sizeof nt);
  example_mpi_start(&argc, &argv, &nt.comm, &nt.rank, &nt.size);
  nt.L = 16, nt.W = 8, nt.N = 64, nt.cf = 4;
  int epochs = 30, time_epochs = 0, method_arg = 1;
  double lr = 0.05, tol = 1e-8, T = 4.0;
  const char *out = ".";
  int ok = 1;
  for (int a = 1; a < argc && ok; a++) {
    const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
    ok = v != NULL;
    if (!ok) break;
    if (!strcmp(o, "--layers"))
      ok = parse_int(v, 1, 100000, &nt.L);
    else if (!strcmp(o, "--width"))
      ok = parse_int(v, 2, 256, &nt.W);
    else if (!strcmp(o, "--samples"))
      ok = parse_int(v, 2, 1000000, &nt.N) && nt.N % 2 == 0;
    else if (!strcmp(o, "--cf"))
      ok = parse_int(v, 1, 100000, &nt.cf);
    else if (!strcmp(o, "--epochs"))
      ok = parse_int(v, 0, 10000000, &epochs);
    else if (!strcmp(o, "--time"))
      ok = parse_int(v, 0, 100000, &time_epochs);
    else if (!strcmp(o, "--lr"))
      ok = parse_real(v, 1e-12, 10.0, &lr);
    else if (!strcmp(o, "--tol"))
      ok = parse_real(v, 0.0, 1.0, &tol);
    else if (!strcmp(o, "--T"))
      ok = parse_real(v, 1e-6, 1000.0, &T);
    else if (!strcmp(o, "--out"))
      out = v;
    else if (!strcmp(o, "--method"))
      ok = (method_arg = !strcmp(v, "a") ? 0 : !strcmp(v, "b") ? 1 : !strcmp(v, "serial") ? 2 : -1) >= 0;
    else
      ok = 0;
    a++;
  }
  if (ok) ok = nt.L % nt.cf == 0 && nt.L / nt.cf >= nt.size && (method_arg != 2 || nt.size == 1);
  if (!ok) {
    if (nt.rank == 0)
      fprintf(stderr,
              "usage: mpiexec -n P %s [--layers L] [--width W] [--samples N (even)] [--cf C] [--epochs E]\n"
              "       [--lr A] [--tol T] [--T FINAL_TIME] [--method a|b|serial] [--time E] [--out DIR]\n"
              "  L must be a multiple of C with L / C >= P; --method serial needs one rank\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  nt.NC = nt.L / nt.cf;
  nt.h = T / nt.L;
  nt.npl = nt.W * nt.W + nt.W;
  nt.npar = nt.L * nt.npl + nt.W + 1;
  {
    int base = nt.NC / nt.size, extra = nt.NC % nt.size;
    nt.i0 = nt.rank * base + (nt.rank < extra ? nt.rank : extra);
    nt.i1 = nt.i0 + base + (nt.rank < extra);
    nt.k0 = nt.i0 * nt.cf, nt.k1 = nt.i1 * nt.cf;
    nt.off = nt.k0 * nt.npl;
    nt.cnt = (nt.k1 - nt.k0) * nt.npl + (nt.rank == nt.size - 1 ? nt.W + 1 : 0);
  }
  make_spirals(&nt);
  /* The forward messages are ad_mpi_* calls, the stopping tests plain MPI
   * collectives on the same communicator: set its private twin up first. */
  ad_mpi_comm_prepare(nt.comm);

  char path[4096];
  if (nt.rank == 0) {
    snprintf(path, sizeof path, "%s/layer_parallel_training.txt", out);
    summary = fopen(path, "w");
    if (!summary) fprintf(stderr, "layer_parallel_training: cannot write %s\n", path);
  }
  int failures = summary || nt.rank != 0 ? 0 : 1;
  size_t m = (size_t)nt.N * nt.W;
  say(&nt, "residual network x_{k+1} = x_k + h tanh(W_k x_k + b_k): %d layers of width %d, h = %g, %d parameters\n",
      nt.L, nt.W, nt.h, nt.npar);
  char each[32];
  if (nt.NC % nt.size == 0)
    snprintf(each, sizeof each, "%d", nt.NC / nt.size);
  else
    snprintf(each, sizeof each, "%d-%d", nt.NC / nt.size, nt.NC / nt.size + 1);
  say(&nt, "two spirals, %d samples; %d rank%s, %d coarse intervals of %d layers (%s per rank)\n\n", nt.N, nt.size,
      nt.size > 1 ? "s" : "", nt.NC, nt.cf, each);

  double *p = xmalloc((size_t)nt.npar * sizeof *p);
  init_params(&nt, p);

  /* Check 1: the parallel forward against serial propagation of every layer,
   * after the iterations the tolerance needs and after NC - 1. */
  {
    ad_real *theta = xmalloc((size_t)nt.npar * sizeof *theta), *xl = xmalloc(m * sizeof *xl);
    ad_real *x = xmalloc(m * sizeof *x), *tmp = xmalloc(m * sizeof *tmp);
    double *states = xmalloc((size_t)(nt.k1 - nt.k0 + 1) * m * sizeof *states);
    double *hist = xmalloc((size_t)nt.NC * sizeof *hist);
    to_const((size_t)nt.npar, p, theta);
    for (int pass = 0; pass < 2; pass++) {
      int it = forward(&nt, theta, nt.NC - 1, pass == 0 ? tol : 0.0, xl, states, hist);
      double err = 0.0;
      embed(nt.W, nt.N, nt.pts, x);
      propagate(&nt, nt.N, theta, 0, nt.k0, x, tmp);
      for (int k = nt.k0; k <= nt.k1; k++) {
        for (size_t i = 0; i < m; i++) err = fmax(err, fabs(ad_value(x[i]) - states[(size_t)(k - nt.k0) * m + i]));
        if (k < nt.k1) propagate(&nt, nt.N, theta, k, k + 1, x, tmp);
      }
      MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, nt.comm);
      /* And the loss, from the last rank's x_L. */
      double J = nt.rank == nt.size - 1 ? ad_value(loss(&nt, theta + (size_t)nt.L * nt.npl, xl)) : 0.0;
      MPI_Bcast(&J, 1, MPI_DOUBLE, nt.size - 1, nt.comm);
      double Jerr = fabs(J - serial_loss(&nt, p));
      if (pass == 0) {
        say(&nt, "forward parareal, relative change per iteration:");
        for (int j = 0; j < it; j++) say(&nt, " %.1e", hist[j]);
        say(&nt, "\n");
      }
      /* The change is an estimate of the error; allow a margin over the tolerance. */
      double bound = pass == 0 ? 100.0 * tol + 1e-13 : 1e-12;
      say(&nt,
          "forward after %2d iterations%s: max |x_k - serial x_k| over all layers = %.2e, |J - serial J| = %.2e (bound "
          "%.0e)\n",
          it, pass == 0 ? " (to tol)" : "", err, Jerr, bound);
      if (!(err <= bound && Jerr <= bound)) {
        say(&nt, "FAILED: the parallel forward disagrees with serial propagation\n");
        failures++;
      }
    }
    say(&nt, "\n");
    free(theta);
    free(xl);
    free(x);
    free(tmp);
    free(states);
    free(hist);
  }

#ifdef ARIADNE_PASSIVE
  say(&nt, "passive build (ARIADNE_PASSIVE): no tapes, so the gradients, the training and the pictures are skipped\n");
#else
  ad_tape *tape = ad_tape_create();
  if (!tape) MPI_Abort(nt.comm, 1);
  adj_ws *ws = adj_ws_create(&nt);
  double *gser = xmalloc((size_t)nt.npar * sizeof *gser), *gown = xmalloc((size_t)nt.npar * sizeof *gown);

  /* Check 2: the serial gradient (whole network, one tape, rank 0) against
   * central differences of the loss, on parameters all over the network. */
  double Jser = 0.0;
  if (nt.rank == 0) {
    if (serial_gradient(&nt, tape, p, &Jser, gser) != AD_OK) failures++;
    int L = nt.L, W = nt.W, npl = nt.npl;
    int idx[6] = {0, 1 * npl + W * W, (L / 2) * npl + W + 1, (L - 1) * npl + W * W - 1, L * npl, L * npl + W};
    const char *what[6] = {"W_0[0][0]", "b_1[0]", "W_L/2[1][1]", "W_L-1[W-1][W-1]", "c[0]", "d"};
    say(&nt, "serial gradient (one tape) against central differences, J = %.12f:\n", Jser);
    say(&nt, "  %-16s %18s %18s %10s\n", "parameter", "tape", "finite diff.", "rel. diff");
    for (int q = 0; q < 6; q++) {
      double *pp = xmalloc((size_t)nt.npar * sizeof *pp), e = 1e-5 * (1.0 + fabs(p[idx[q]]));
      memcpy(pp, p, (size_t)nt.npar * sizeof *pp);
      pp[idx[q]] = p[idx[q]] + e;
      double jp = serial_loss(&nt, pp);
      pp[idx[q]] = p[idx[q]] - e;
      double jm = serial_loss(&nt, pp), fd = (jp - jm) / (2.0 * e);
      double rel = fabs(fd - gser[idx[q]]) / fmax(fabs(gser[idx[q]]), 1e-4);
      say(&nt, "  %-16s %18.10e %18.10e %10.1e\n", what[q], gser[idx[q]], fd, rel);
      if (!(rel < 1e-5)) {
        say(&nt, "FAILED: the serial gradient disagrees with finite differences\n");
        failures++;
      }
      free(pp);
    }
    say(&nt, "\n");
  }
  MPI_Bcast(gser, nt.npar, MPI_DOUBLE, 0, nt.comm);
  MPI_Bcast(&Jser, 1, MPI_DOUBLE, 0, nt.comm);

  /* Check 3: the gradients (a) and (b) against the serial one as the
   * iterations grow. (a) runs j forward iterations, (b) a forward converged
   * to round-off and j adjoint iterations. Parareal is exact after NC - 1
   * iterations; the table stops earlier once both errors are at round-off
   * (the tape of (a) holds j + 1 fine propagations, so it grows with j).
   * The last row must agree with serial backpropagation to round-off. */
  {
    say(&nt, "gradient error max|g - g_serial| / max|g_serial| against parallel iterations j:\n");
    say(&nt, "  %4s %14s %14s\n", "j", "(a) through", "(b) adjoint");
    int jmax = nt.NC - 1, done = 0;
    for (int j = 0; j <= jmax && !done; j++) {
      double Ja, Jb, ea, eb;
      int rc = gradient_a(&nt, tape, p, j, 0.0, &Ja, gown, NULL);
      ea = gradient_error(&nt, gown, gser);
      rc |= gradient_b(&nt, ws, p, jmax, j, 1e-15, &Jb, gown, NULL, NULL, NULL);
      eb = gradient_error(&nt, gown, gser);
      MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_BOR, nt.comm);
      say(&nt, "  %4d %14.3e %14.3e\n", j, ea, eb);
      if (rc) failures++;
      done = j == jmax || (ea < 1e-13 && eb < 1e-13);
      if (done && !(ea < 1e-11 && eb < 1e-11 && fabs(Ja - Jser) < 1e-12 && fabs(Jb - Jser) < 1e-12)) {
        say(&nt, "FAILED: after %d iterations the parallel gradients differ from the serial one\n", j);
        failures++;
      }
    }
    /* And at the tolerance used for training. */
    int fa = 0, fb = 0, ab = 0;
    double Ja, Jb, ea, eb;
    int rc = gradient_a(&nt, tape, p, jmax, tol, &Ja, gown, &fa);
    ea = gradient_error(&nt, gown, gser);
    rc |= gradient_b(&nt, ws, p, jmax, jmax, tol, &Jb, gown, &fb, &ab, NULL);
    eb = gradient_error(&nt, gown, gser);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_BOR, nt.comm);
    if (rc) failures++;
    say(&nt,
        "  at tol %.0e: (a) %d forward iterations, error %.3e; (b) %d forward + %d adjoint iterations, error %.3e\n\n",
        tol, fa, ea, fb, ab, eb);
  }

  trainer tr = {tape, ws, gser, 0, 0, 0};
  /* Timing: time per epoch (loss and gradient; the Adam update is
   * negligible), the fastest of time_epochs, so that other work on the
   * machine disturbs it less. Serial runs on rank 0 while the others wait. */
  if (time_epochs > 0) {
    double tm[3] = {INFINITY, INFINITY, INFINITY};
    int iters[3][2];
    for (int meth = 0; meth < 3; meth++) {
      tr.fwd_iters = tr.adj_iters = tr.runs = 0;
      for (int e = 0; e < time_epochs; e++) {
        double J;
        MPI_Barrier(nt.comm);
        double t0 = MPI_Wtime();
        if ((meth != METHOD_SERIAL || nt.rank == 0) && epoch_gradient(&nt, &tr, meth, p, tol, &J, gown) != AD_OK)
          failures++;
        MPI_Barrier(nt.comm);
        tm[meth] = fmin(tm[meth], MPI_Wtime() - t0);
      }
      iters[meth][0] = tr.runs ? tr.fwd_iters / tr.runs : 0;
      iters[meth][1] = tr.runs ? tr.adj_iters / tr.runs : 0;
    }
    say(&nt, "time per epoch (loss and gradient, fastest of %d), iterations per epoch in brackets:\n", time_epochs);
    say(&nt, "  %5s %20s %24s %16s\n", "ranks", "(a) through [fwd]", "(b) adjoint [fwd + adj]", "serial (rank 0)");
    say(&nt, "  %5d %14.2f ms [%d] %15.2f ms [%d + %d] %13.2f ms\n\n", nt.size, 1e3 * tm[0], iters[0][0], 1e3 * tm[1],
        iters[1][0], iters[1][1], 1e3 * tm[2]);
  }

  /* Training: Adam on each rank's own parameters. */
  if (epochs > 0) {
    const char *names[3] = {"(a) through the parallel iteration", "(b) parallel adjoint", "serial backpropagation"};
    double *mo = xmalloc((size_t)nt.npar * sizeof *mo), *ve = xmalloc((size_t)nt.npar * sizeof *ve);
    double *Jh = xmalloc((size_t)epochs * sizeof *Jh);
    int off = method_arg == METHOD_SERIAL ? 0 : nt.off, cnt = method_arg == METHOD_SERIAL ? nt.npar : nt.cnt;
    say(&nt, "training with Adam (step %g), gradient by %s:\n", lr, names[method_arg]);
    tr.fwd_iters = tr.adj_iters = tr.runs = 0;
    double t0 = MPI_Wtime();
    for (int e = 0; e < epochs; e++) {
      double J;
      if (epoch_gradient(&nt, &tr, method_arg, p, tol, &J, gown) != AD_OK) {
        failures++;
        break;
      }
      Jh[e] = J;
      double b1 = 0.9, b2 = 0.999, c1 = 1.0 - pow(b1, e + 1), c2 = 1.0 - pow(b2, e + 1);
      for (int i = 0; i < cnt; i++) {
        mo[i] = b1 * mo[i] + (1 - b1) * gown[i];
        ve[i] = b2 * ve[i] + (1 - b2) * gown[i] * gown[i];
        p[off + i] -= lr * (mo[i] / c1) / (sqrt(ve[i] / c2) + 1e-8);
      }
      if (e % (epochs / 10 > 0 ? epochs / 10 : 1) == 0 || e == epochs - 1) say(&nt, "  epoch %6d  loss %.6f\n", e, J);
    }
    double ttrain = MPI_Wtime() - t0;
    if (method_arg != METHOD_SERIAL) allgather_params(&nt, p);
    int right = 0;
    {
      ad_real *theta = xmalloc((size_t)nt.npar * sizeof *theta), *x = xmalloc(m * sizeof *x);
      ad_real *tmp = xmalloc(m * sizeof *tmp);
      to_const((size_t)nt.npar, p, theta);
      embed(nt.W, nt.N, nt.pts, x);
      propagate(&nt, nt.N, theta, 0, nt.L, x, tmp);
      for (int s = 0; s < nt.N; s++)
        right += ad_value(readout(nt.W, theta + (size_t)nt.L * nt.npl, x + (size_t)s * nt.W)) * nt.y[s] > 0.0;
      free(theta);
      free(x);
      free(tmp);
    }
    double Jend = serial_loss(&nt, p);
    say(&nt, "final loss %.6f (start %.6f), %d of %d samples classified right; %.3f s, %.2f ms per epoch", Jend, Jh[0],
        right, nt.N, ttrain, 1e3 * ttrain / epochs);
    say(&nt, "\n");
    if (tr.runs && method_arg != METHOD_SERIAL)
      say(&nt, "  parallel iterations per epoch: %.1f forward", (double)tr.fwd_iters / tr.runs);
    if (tr.runs && method_arg == METHOD_B) say(&nt, ", %.1f adjoint", (double)tr.adj_iters / tr.runs);
    if (tr.runs && method_arg != METHOD_SERIAL) say(&nt, " (at most %d)\n", nt.NC - 1);
    /* Check 4: training lowers the loss (the final loss recomputed serially). */
    if (nt.rank == 0 && !(Jend < 0.8 * Jh[0])) {
      say(&nt, "FAILED: training did not lower the loss by 20%%\n");
      failures++;
    }
    if (nt.rank == 0) {
#ifdef ARIADNE_HAVE_CAIRO
      char what[200];
      snprintf(what, sizeof what, "%d layers of width %d, %d samples, Adam step %g, gradient by %s on %d ranks", nt.L,
               nt.W, nt.N, lr, names[method_arg], nt.size);
      snprintf(path, sizeof path, "%s/layer_parallel_training_loss.png", out);
      int rl = plot_loss(path, epochs, Jh, what);
      snprintf(path, sizeof path, "%s/layer_parallel_training_boundary.png", out);
      int rb = plot_boundary(path, &nt, p, what);
      if (rl || rb) {
        say(&nt, "FAILED: cannot write the figures into %s\n", out);
        failures++;
      } else {
        say(&nt,
            "figures: %s/layer_parallel_training_loss.png (loss per epoch, log scale), "
            "%s/layer_parallel_training_boundary.png (decision boundary)\n",
            out, out);
      }
#else
      say(&nt, "built without cairo: no figures\n");
#endif
    }
    free(mo);
    free(ve);
    free(Jh);
  }
  adj_ws_destroy(&nt, ws);
  ad_tape_destroy(tape);
  free(gser);
  free(gown);
#endif

  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, nt.comm);
  if (nt.rank == 0) {
    if (failures)
      fprintf(stderr, "layer_parallel_training: %d check(s) failed\n", failures);
    else
      say(&nt, "layer_parallel_training: OK\n");
    if (summary) fclose(summary);
  }
  free(p);
  free(nt.pts);
  free(nt.y);
  MPI_Finalize();
  return failures != 0;
}
