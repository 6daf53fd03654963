/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad arguments to every public call that returns an error code: each
 * returns AD_ERR_ARG before touching anything (a count of (size_t)-1 must
 * not be used to clear an array), and leaves a message that names the call
 * and the argument, where the README's idiom prints it:
 * ad_tape_error_message(tape), which for a NULL tape is the thread's last
 * error. The tape loses nothing: its gradient is right afterwards. */
#include <ariadne.h>
#include <ariadne_checkpoint.h>
#include <ariadne_tools.h>
#include <stdint.h>

#include "check.h"

#define HUGE_COUNT ((size_t)-1)

/* The recording every case runs against: y = x0 x1 sin(x0). */
typedef struct fixture {
  ad_tape *t;
  ad_real x[2], y;
  ad_tape_pos pos;
  double g[2];
} fixture;

static int step_fn(void *ud, int64_t i, size_t *n, ad_real *u, size_t *pb, void *ps) {
  (void)ud, (void)i, (void)n, (void)pb, (void)ps;
  u[0] = ad_mul(u[0], 1.5);
  return 0;
}
static int check_fn(void *ud, size_t n, const ad_real *x, size_t m, ad_real *y) {
  (void)ud, (void)n, (void)m;
  y[0] = ad_mul(x[0], x[0]);
  return 0;
}
static int ext_rev(void *ud, size_t nin, const double *x, double *xbar, size_t nout, const double *y,
                   const double *ybar) {
  (void)ud, (void)nin, (void)x, (void)xbar, (void)nout, (void)y, (void)ybar;
  return 0;
}
static const ad_external_ops ext_ok = {ext_rev, NULL, NULL, "test external"};
static const ad_external_ops ext_no_reverse = {NULL, NULL, NULL, "test external"};

/* One bad call. `on_tape`: the message is the tape's (else the thread's
 * last error); `recording`: the call is made while the fixture's tape
 * records (ad_external). */
typedef struct bad_call {
  const char *what; /* must appear in the message: the call and the argument */
  int on_tape, recording;
  int (*call)(fixture *f);
} bad_call;

static int grad_null_tape(fixture *f) { return ad_gradient(NULL, f->y, 2, f->x, f->g); }
static int grad_huge_n(fixture *f) { return ad_gradient(f->t, f->y, HUGE_COUNT, f->x, f->g); }
static int grad_null_x(fixture *f) { return ad_gradient(f->t, f->y, 2, NULL, f->g); }
static int grad_null_g(fixture *f) { return ad_gradient(f->t, f->y, 2, f->x, NULL); }
static int jac_null_tape(fixture *f) { return ad_jacobian(NULL, 1, &f->y, 2, f->x, f->g); }
static int jac_null_y(fixture *f) { return ad_jacobian(f->t, 1, NULL, 2, f->x, f->g); }
static int jac_null_x(fixture *f) { return ad_jacobian(f->t, 1, &f->y, 2, NULL, f->g); }
static int jac_null_j(fixture *f) { return ad_jacobian(f->t, 1, &f->y, 2, f->x, NULL); }
static int jac_huge_m(fixture *f) { return ad_jacobian(f->t, HUGE_COUNT, &f->y, 2, f->x, f->g); }
static int jac_huge_n(fixture *f) { return ad_jacobian(f->t, 1, &f->y, HUGE_COUNT, f->x, f->g); }
static int jac_huge_mn(fixture *f) {
  size_t big = (size_t)1 << (sizeof(size_t) * 4); /* m n overflows */
  return ad_jacobian(f->t, big, &f->y, big, f->x, f->g);
}
static int rev_null(fixture *f) {
  (void)f;
  return ad_reverse(NULL);
}
static int rev_to_null(fixture *f) { return ad_reverse_to(NULL, f->pos); }
static int fwd_null(fixture *f) {
  (void)f;
  return ad_forward(NULL);
}
static int reset_to_null(fixture *f) { return ad_tape_reset_to(NULL, f->pos); }
static int stats_null_tape(fixture *f) {
  ad_stats s;
  (void)f;
  return ad_tape_stats(NULL, &s);
}
static int stats_null_out(fixture *f) { return ad_tape_stats(f->t, NULL); }
static int error_null(fixture *f) {
  (void)f;
  return ad_tape_error(NULL);
}
static int dump_null_tape(fixture *f) {
  (void)f;
  return ad_tape_dump(NULL, stdout, AD_DUMP_TEXT);
}
static int dump_null_out(fixture *f) { return ad_tape_dump(f->t, NULL, AD_DUMP_TEXT); }
static int dump_bad_format(fixture *f) { return ad_tape_dump(f->t, stdout, (ad_dump_format)99); }
static int dump_path_null(fixture *f) { return ad_tape_dump_path(f->t, NULL, AD_DUMP_TEXT); }
static int ext_null_ops(fixture *f) {
  ad_real out = ad_const(1.0);
  return ad_external(NULL, NULL, 2, f->x, 1, &out);
}
static int ext_null_reverse(fixture *f) {
  ad_real out = ad_const(1.0);
  return ad_external(&ext_no_reverse, NULL, 2, f->x, 1, &out);
}
static int ext_null_in(fixture *f) {
  ad_real out = ad_const(1.0);
  (void)f;
  return ad_external(&ext_ok, NULL, 2, NULL, 1, &out);
}
static int ext_null_out(fixture *f) { return ad_external(&ext_ok, NULL, 2, f->x, 1, NULL); }
static int ext_huge_nin(fixture *f) {
  ad_real out = ad_const(1.0);
  return ad_external(&ext_ok, NULL, HUGE_COUNT, f->x, 1, &out);
}
static int check_null_f(fixture *f) {
  double x0 = 1.0;
  (void)f;
  return ad_check_gradient(NULL, NULL, 1, &x0, 1, NULL, NULL);
}
static int check_null_x0(fixture *f) {
  (void)f;
  return ad_check_gradient(check_fn, NULL, 1, NULL, 1, NULL, NULL);
}
static int check_zero_m(fixture *f) {
  double x0 = 1.0;
  (void)f;
  return ad_check_gradient(check_fn, NULL, 1, &x0, 0, NULL, NULL);
}
static int check_huge_n(fixture *f) {
  double x0 = 1.0;
  (void)f;
  return ad_check_gradient(check_fn, NULL, HUGE_COUNT, &x0, 1, NULL, NULL);
}
static int ckpt_null_opts(fixture *f) {
  ad_real u = ad_const(1.0);
  (void)f;
  return ad_checkpoint_loop(NULL, step_fn, NULL, 1, &u, 0, NULL);
}
/* ad_checkpoint_loop with the default options, one state value (none: a
 * NULL state array) and npassive bytes of passive state but no array. */
static int ckpt_default(ad_ckpt_step step, int with_state, size_t npassive) {
  ad_ckpt_options o;
  ad_real u = ad_const(1.0);
  ad_ckpt_options_default(&o);
  return ad_checkpoint_loop(&o, step, NULL, 1, with_state ? &u : NULL, npassive, NULL);
}
static int ckpt_null_step(fixture *f) {
  (void)f;
  return ckpt_default(NULL, 1, 0);
}
static int ckpt_null_state(fixture *f) {
  (void)f;
  return ckpt_default(step_fn, 0, 0);
}
static int ckpt_null_pstate(fixture *f) {
  (void)f;
  return ckpt_default(step_fn, 1, 8);
}
static int revolve_save_null(fixture *f) {
  char buf[256];
  (void)f;
  return ad_revolve_save(NULL, buf, sizeof buf);
}
static int revolve_save_small(fixture *f) {
  char buf[8];
  (void)f;
  ad_revolve *r = ad_revolve_create(10, 3);
  int rc = ad_revolve_save(r, buf, sizeof buf);
  ad_revolve_destroy(r);
  return rc;
}
static int revolve_save_null_buf(fixture *f) {
  (void)f;
  ad_revolve *r = ad_revolve_create(10, 3);
  int rc = ad_revolve_save(r, NULL, 256);
  ad_revolve_destroy(r);
  return rc;
}

static const bad_call calls[] = {
    {"ad_gradient: tape is NULL", 0, 0, grad_null_tape},
    {"ad_gradient: n = ", 1, 0, grad_huge_n},
    {"ad_gradient: x is NULL", 1, 0, grad_null_x},
    {"ad_gradient: g is NULL", 1, 0, grad_null_g},
    {"ad_jacobian: tape is NULL", 0, 0, jac_null_tape},
    {"ad_jacobian: y is NULL", 1, 0, jac_null_y},
    {"ad_jacobian: x is NULL", 1, 0, jac_null_x},
    {"ad_jacobian: J is NULL", 1, 0, jac_null_j},
    {"ad_jacobian: m = ", 1, 0, jac_huge_m},
    {"ad_jacobian: n = ", 1, 0, jac_huge_n},
    {"ad_jacobian: m x n = ", 1, 0, jac_huge_mn},
    {"ad_reverse: tape is NULL", 0, 0, rev_null},
    {"ad_reverse_to: tape is NULL", 0, 0, rev_to_null},
    {"ad_forward: tape is NULL", 0, 0, fwd_null},
    {"ad_tape_reset_to: tape is NULL", 0, 0, reset_to_null},
    {"ad_tape_stats: tape is NULL", 0, 0, stats_null_tape},
    {"ad_tape_stats: out is NULL", 1, 0, stats_null_out},
    {"ad_tape_error: tape is NULL", 0, 0, error_null},
    {"ad_tape_dump: tape is NULL", 0, 0, dump_null_tape},
    {"ad_tape_dump: out is NULL", 1, 0, dump_null_out},
    {"ad_tape_dump: format", 1, 0, dump_bad_format},
    {"ad_tape_dump_path: path is NULL", 1, 0, dump_path_null},
    {"ad_external: ops is NULL", 1, 1, ext_null_ops},
    {"ad_external: ops->reverse is NULL", 1, 1, ext_null_reverse},
    {"ad_external: in is NULL", 1, 1, ext_null_in},
    {"ad_external: out is NULL", 1, 1, ext_null_out},
    {"ad_external: nin = ", 1, 1, ext_huge_nin},
    {"ad_check_gradient: f is NULL", 0, 0, check_null_f},
    {"ad_check_gradient: x0 is NULL", 0, 0, check_null_x0},
    {"ad_check_gradient: m = 0", 0, 0, check_zero_m},
    {"ad_check_gradient: n = ", 0, 0, check_huge_n}, /* with m */
    {"ad_checkpoint_loop: opts is NULL", 0, 0, ckpt_null_opts},
    {"ad_checkpoint_loop: step is NULL", 0, 0, ckpt_null_step},
    {"ad_checkpoint_loop: state is NULL", 0, 0, ckpt_null_state},
    {"ad_checkpoint_loop: pstate is NULL", 0, 0, ckpt_null_pstate},
    {"ad_revolve_save: r is NULL", 0, 0, revolve_save_null},
    {"ad_revolve_save: buf is NULL", 0, 0, revolve_save_null_buf},
    {"ad_revolve_save: size", 0, 0, revolve_save_small},
};

static void fixture_record(fixture *f) {
  f->t = ad_tape_create();
  ad_tape_begin(f->t);
  f->x[0] = ad_input(0.6);
  f->x[1] = ad_input(-1.7);
  f->pos = ad_tape_position(f->t);
  f->y = ad_mul(ad_mul(f->x[0], f->x[1]), ad_sin(f->x[0]));
  ad_tape_end(f->t);
}

int main(void) {
  for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
    const bad_call *b = &calls[c];
    CHECK_CONTEXT("%s", b->what);
    fixture f;
    fixture_record(&f);
    f.g[0] = f.g[1] = 42.0;
    ad_clear_last_error();
    if (b->recording) ad_tape_begin(f.t);
    int rc = b->call(&f);
    if (b->recording) ad_tape_end(f.t);
    CHECK_INT(rc, AD_ERR_ARG);
    const char *msg = ad_tape_error_message(b->on_tape ? f.t : NULL);
    CHECK(msg != NULL && msg[0] != '\0');
    CHECK_CONTAINS(msg, b->what);
    CHECK_CONTAINS(msg, "AD_ERR_ARG");
    if (!b->on_tape) CHECK_INT(ad_last_error(), AD_ERR_ARG);
    /* Nothing written, and the tape is unharmed: y = x0 x1 sin(x0). */
    CHECK_SAME(f.g[0], 42.0);
    CHECK_INT(ad_tape_error(f.t), AD_OK);
    CHECK_INT(ad_gradient(f.t, f.y, 2, f.x, f.g), AD_OK);
    double x0 = 0.6, x1 = -1.7;
    CHECK_CLOSE(f.g[0], x1 * sin(x0) + x0 * x1 * cos(x0), 1e-15);
    CHECK_CLOSE(f.g[1], x0 * sin(x0), 1e-15);
    ad_tape_destroy(f.t);
  }
  ad_clear_last_error();
  return check_finish("test_args");
}
