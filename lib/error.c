/* SPDX-License-Identifier: BSD-3-Clause */
/* Error codes, messages, the error handler and the sticky/pending error state. */
#include <stdio.h>
#include <string.h>

#include "tape_impl.h"

#ifdef ARIADNE_INDEX_64
#define AD__HANDLE_WIDTH "64-bit handles"
#else
#define AD__HANDLE_WIDTH "32-bit handles"
#endif

const char *ad_version(void) { return ARIADNE_VERSION " (" AD__HANDLE_WIDTH ")"; }
int ad_version_number(void) { return ARIADNE_VERSION_NUMBER; }

const char *ad_strerror(int code) {
  switch (code) {
#define AD__ERRNO_MSG(name, c, msg)                                                                                    \
  case c:                                                                                                              \
    return msg;
    AD_ERRNO_MAP(AD__ERRNO_MSG)
#undef AD__ERRNO_MSG
  default:
    return "unknown error";
  }
}

const char *ad_errname(int code) {
  switch (code) {
#define AD__ERRNO_NAME(name, c, msg)                                                                                   \
  case c:                                                                                                              \
    return #name;
    AD_ERRNO_MAP(AD__ERRNO_NAME)
#undef AD__ERRNO_NAME
  default:
    return "AD_ERR_UNKNOWN";
  }
}

static ad_error_handler handler;
static void *handler_ud;
static char msg_prefix[32];
static _Thread_local int last_error;
static _Thread_local char last_msg[512];

void ad_set_error_handler(ad_error_handler h, void *ud) {
  handler = h;
  handler_ud = ud;
}

void ad_error_handler_print(const ad_tape *tape, int code, const char *message, void *ud) {
  (void)tape;
  (void)code;
  (void)ud;
  fprintf(stderr, "%s\n", message);
}

int ad_last_error(void) { return last_error; }
void ad_clear_last_error(void) {
  last_error = AD_OK;
  last_msg[0] = '\0';
}

void ad__set_message_prefix(const char *prefix) { snprintf(msg_prefix, sizeof msg_prefix, "%s", prefix ? prefix : ""); }

void ad__report(const ad_tape *t, int code, const char *msg) {
  if (handler) handler(t, code, msg, handler_ud);
}

/* "[rank] ariadne: <detail> (AD_ERR_X: <generic message>)" */
void ad__vformat(char *buf, size_t size, int code, const char *fmt, va_list ap) {
  int n = snprintf(buf, size, "%sariadne: ", msg_prefix);
  if (n < 0 || (size_t)n >= size) return;
  int m = vsnprintf(buf + n, size - (size_t)n, fmt, ap);
  if (m < 0 || (size_t)(n + m) >= size) return;
  snprintf(buf + n + m, size - (size_t)(n + m), " (%s: %s)", ad_errname(code), ad_strerror(code));
}

/* An error with no tape to keep it. */
static void notape(int code, const char *fmt, va_list ap) {
  ad__vformat(last_msg, sizeof last_msg, code, fmt, ap);
  last_error = code;
  ad__report(NULL, code, last_msg);
}

void ad__fail(ad_tape *t, int code, const char *fmt, ...) {
  if (t->err != AD_OK) return;
  va_list ap;
  va_start(ap, fmt);
  ad__vformat(t->msg, sizeof t->msg, code, fmt, ap);
  va_end(ap);
  t->err = code;
  t->rec.active = 0;
  t->rec.fwd = 0;
  ad__recorder_arm(t);
  ad__report(t, code, t->msg);
}

int ad__pending(ad_tape *t, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (!t) {
    notape(code, fmt, ap);
  } else if (t->pending == AD_OK) {
    ad__vformat(t->pmsg, sizeof t->pmsg, code, fmt, ap);
    t->pending = code;
    ad__report(t, code, t->pmsg);
  }
  va_end(ap);
  return code;
}

void ad__fail_notape(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  notape(code, fmt, ap);
  va_end(ap);
}

int ad__arg_error(const ad_tape *ct, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (!ct) {
    notape(AD_ERR_ARG, fmt, ap);
  } else if (ct->err == AD_OK && ct->pending == AD_OK) {
    /* The tape's state is not the caller's mistake: only its message. */
    ad_tape *t = (ad_tape *)(uintptr_t)ct;
    ad__vformat(t->pmsg, sizeof t->pmsg, AD_ERR_ARG, fmt, ap);
    ad__report(t, AD_ERR_ARG, t->pmsg);
  }
  va_end(ap);
  return AD_ERR_ARG;
}

int ad_tape_error(const ad_tape *t) {
  if (!t) return ad__arg_tape(t, "ad_tape_error");
  return t->err != AD_OK ? t->err : t->pending;
}

const char *ad_tape_error_message(const ad_tape *t) {
  if (!t) return last_msg[0] ? last_msg : "ariadne: no tape (AD_ERR_ARG)";
  if (t->err != AD_OK) return t->msg;
  return t->pmsg; /* the last usage error, even once reported; "" if none */
}

int ad__driver_check(ad_tape *t) {
  ad__region_flush(t); /* a sweep inside a region sees its statements */
  if (t->err != AD_OK) return t->err;
  if (t->pending != AD_OK) {
    int e = t->pending;
    t->pending = AD_OK;
    return e;
  }
  return AD_OK;
}
