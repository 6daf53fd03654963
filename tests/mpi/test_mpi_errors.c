/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to the MPI layer: the affected ranks get a clear error (an MPI
 * error code from the wrapper, AD_ERR_MPI on the tape with a message that
 * starts "[rank] ariadne: "), never a silently wrong gradient, and no rank
 * hangs: the sweep timeout is a few seconds here, so a rank that waits for a
 * silent partner gives up quickly, and every scenario ends with all ranks
 * meeting again in a plain barrier.
 *
 * Each scenario runs on a communicator of its own, so that messages a failed
 * sweep leaves behind can never match anything of a later scenario. They are
 * freed only at the end: MPI may give a new communicator the identity of a
 * freed one, and with it the messages still queued there. */
#include "mtest.h"

#define TIMEOUT 3.0 /* seconds a sweep waits for a silent partner in this test */

/* A sweep that learnt of an error through the handshake says so in its
 * message ("reported ...") and returns before the timeout; one that waited
 * for a partner returns after one or a few timeouts (a rank waiting on a rank
 * that itself waited). Ranks oversubscribed on a loaded machine can be late
 * by seconds, so the limits are generous: what proves the handshake is the
 * message, and what proves "no hang" is the bound. */
#define QUICK (TIMEOUT + 10)
#define BOUNDED (6 * TIMEOUT + 20)

static MPI_Comm comms[64];
static int ncomms;
static const char *scenario = "";

static MPI_Comm scenario_begin(const char *name) {
  scenario = name;
  return mt_scenario_comm(name);
}

/* Ranks that gave up early meet the stragglers here before the next scenario. */
static void scenario_end(MPI_Comm *c) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (ncomms < 64) comms[ncomms++] = *c;
}

/* The start of most scenarios: their communicator in *comm and a new tape,
 * recording. */
static ad_tape *scenario_recording(const char *name, MPI_Comm *comm) {
  *comm = scenario_begin(name);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  return t;
}

/* Their end: the tape destroyed, then scenario_end. */
static void scenario_finish(MPI_Comm *comm, ad_tape *t) {
  ad_tape_destroy(t);
  scenario_end(comm);
}

static int error_class(int rc) {
  int cls = rc;
  MPI_Error_class(rc, &cls);
  return cls;
}

/* The tape holds AD_ERR_MPI (or `code`) with a rank-prefixed message that
 * mentions `what`. */
static void check_tape_error(const ad_tape *t, int code, const char *what) {
  const char *msg = ad_tape_error_message(t);
  MT_CHECK(ad_tape_error(t) == code);
  MT_CHECK(mt_has_rank_prefix(msg));
  if (what && !strstr(msg, what)) {
    mt_errors++;
    fprintf(stderr, "[%d] message \"%s\" does not mention \"%s\"\n", mt_rank, msg, what);
  }
}

/* A sweep result: the code, a rank-prefixed message, and how long it took. */
static void check_sweep(const ad_tape *t, int rc, int code, double seconds, double limit, const char *what) {
  if (rc != code) {
    mt_errors++;
    fprintf(stderr, "[%d] %s: sweep returned %s, expected %s: %s\n", mt_rank, scenario, ad_errname(rc),
            ad_errname(code), ad_tape_error_message(t));
  }
  if (code != AD_OK) {
    MT_CHECK(mt_has_rank_prefix(ad_tape_error_message(t)));
    if (what && !strstr(ad_tape_error_message(t), what)) {
      mt_errors++;
      fprintf(stderr, "[%d] %s: message \"%s\" does not mention \"%s\"\n", mt_rank, scenario,
              ad_tape_error_message(t), what);
    }
  }
  if (!(seconds < limit)) {
    mt_errors++;
    fprintf(stderr, "[%d] %s: sweep took %.1f s, limit %.1f s\n", mt_rank, scenario, seconds, limit);
  }
}

static int timed_reverse(ad_tape *t, double *seconds) {
  double t0 = MPI_Wtime();
  int rc = ad_reverse(t);
  *seconds = MPI_Wtime() - t0;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* (a) A receive count smaller than the message                              */
/* ------------------------------------------------------------------------ */

/* ad_gradient, which must succeed: the tape's message on stderr if not. */
static void gradient_ok(ad_tape *t, ad_real y, size_t n, ad_real *x, double *g) {
  int rc = ad_gradient(t, y, n, x, g);
  if (rc != AD_OK) fprintf(stderr, "[%d] %s\n", mt_rank, ad_tape_error_message(t));
  MT_CHECK(rc == AD_OK);
}

/* The start of the truncate scenarios: even ranks send to the next odd rank,
 * a rank without a partner is its own (self); the tape, recording, has the
 * four inputs x[i] = x0 + 0.1 i + rank. */
static ad_tape *truncate_start(const char *name, double x0, MPI_Comm *comm, int *partner, int *self, int *sender,
                               ad_real *x) {
  ad_tape *t = scenario_recording(name, comm);
  *partner = mt_rank ^ 1;
  *self = *partner >= mt_size;
  *sender = mt_rank % 2 == 0 && !*self;
  if (*self) *partner = mt_rank;
  for (int i = 0; i < 4; i++) x[i] = ad_input(x0 + 0.1 * i + mt_rank);
  return t;
}

/* Even ranks send four values to the next odd rank, which receives two; a
 * rank without a partner does the same with itself through sendrecv. The
 * receiver gets MPI_ERR_TRUNCATE and a sticky tape error; the sender's sweep
 * learns of it in the sweep handshake. Afterwards a correct message on the
 * same stream, on a new recording, must still get the right adjoint: the
 * truncated message was consumed and counts in the stream's sequence. */
static void scenario_truncate(void) {
  MPI_Comm comm;
  int partner, self, sender;
  ad_real x[4], r[4], y;
  ad_tape *t = truncate_start("truncate", 0.5, &comm, &partner, &self, &sender, x);
  MPI_Status st;
  int rc, let_through = 0;
  if (self) {
    rc = ad_mpi_sendrecv(x, 4, AD_MPI_REAL, mt_rank, 1, r, 2, AD_MPI_REAL, mt_rank, 1, comm, &st);
    /* Open MPI 4.1 delivers a message to oneself truncated and reports
     * success: then the sweep must find the lengths differ (below). */
    let_through = rc == MPI_SUCCESS;
    if (!let_through) {
      MT_CHECK(error_class(rc) == MPI_ERR_TRUNCATE);
      check_tape_error(t, AD_ERR_MPI, "ad_mpi_sendrecv");
    }
  } else if (sender) {
    MT_CHECK(ad_mpi_send(x, 4, AD_MPI_REAL, partner, 1, comm) == MPI_SUCCESS);
    MT_CHECK(ad_tape_error(t) == AD_OK);
  } else {
    rc = ad_mpi_recv(r, 2, AD_MPI_REAL, partner, 1, comm, &st);
    MT_CHECK(error_class(rc) == MPI_ERR_TRUNCATE);
    check_tape_error(t, AD_ERR_MPI, "ad_mpi_recv");
  }
  y = ad_mul(x[0], x[1]);
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  double sec;
  rc = timed_reverse(t, &sec);
  if (sender)
    check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, "reported AD_ERR_MPI");
  else
    check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, let_through ? "lengths" : "ad_mpi_");

  /* The same stream again, correctly, on a new recording. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < 4; i++) x[i] = ad_input(0.5 + 0.1 * i + mt_rank);
  if (self) {
    MT_CHECK(ad_mpi_sendrecv(x, 2, AD_MPI_REAL, mt_rank, 1, r, 2, AD_MPI_REAL, mt_rank, 1, comm, &st) == MPI_SUCCESS);
    y = ad_add(ad_mul(r[0], r[1]), x[0]);
  } else if (sender) {
    MT_CHECK(ad_mpi_send(x, 2, AD_MPI_REAL, partner, 1, comm) == MPI_SUCCESS);
    y = ad_mul(x[0], 3.0);
  } else {
    MT_CHECK(ad_mpi_recv(r, 2, AD_MPI_REAL, partner, 1, comm, &st) == MPI_SUCCESS);
    y = ad_add(ad_mul(r[0], r[1]), x[0]);
  }
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  double g[4];
  gradient_ok(t, y, 4, x, g);
  /* d(y_sender + y_receiver)/dx on the sender: 3 + (x1, x0); on the receiver: 1. */
  if (self) {
    MT_CLOSE(g[0], 1.0 + ad_value(x[1]), 1e-14);
    MT_CLOSE(g[1], ad_value(x[0]), 1e-14);
  } else if (sender) {
    MT_CLOSE(g[0], 3.0 + ad_value(x[1]), 1e-14);
    MT_CLOSE(g[1], ad_value(x[0]), 1e-14);
  } else {
    MT_CLOSE(g[0], 1.0, 1e-14);
    MT_CLOSE(g[1], 0.0, 1e-14);
  }
  scenario_finish(&comm, t);
}

/* The same with a nonblocking receive: the error comes from ad_mpi_wait. */
static void scenario_truncate_wait(void) {
  MPI_Comm comm;
  int partner, self, sender;
  ad_real x[4], r[4], y;
  ad_tape *t = truncate_start("truncate_wait", 1.5, &comm, &partner, &self, &sender, x);
  ad_mpi_request q[2] = {AD_MPI_REQUEST_NULL, AD_MPI_REQUEST_NULL};
  MPI_Status st;
  int rc, let_through = 0;
  if (!sender) MT_CHECK(ad_mpi_irecv(r, 2, AD_MPI_REAL, partner, 2, comm, &q[0]) == MPI_SUCCESS);
  if (sender || self) MT_CHECK(ad_mpi_isend(x, 4, AD_MPI_REAL, partner, 2, comm, &q[1]) == MPI_SUCCESS);
  if (!sender) {
    rc = ad_mpi_wait(&q[0], &st);
    let_through = self && rc == MPI_SUCCESS; /* Open MPI 4.1, as in scenario_truncate */
    if (!let_through) {
      MT_CHECK(error_class(rc) == MPI_ERR_TRUNCATE);
      check_tape_error(t, AD_ERR_MPI, "ad_mpi_wait");
    }
  }
  if (sender || self) MT_CHECK(ad_mpi_wait(&q[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
  y = ad_sin(x[2]);
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  double sec;
  rc = timed_reverse(t, &sec);
  check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, sender ? "reported AD_ERR_MPI" : let_through ? "lengths" : "ad_mpi_wait");

  /* The stream is still in step: a correct message, a correct adjoint. */
  ad_tape_reset(t);
  ad_tape_begin(t);
  for (int i = 0; i < 4; i++) x[i] = ad_input(1.5 + 0.1 * i + mt_rank);
  if (!sender) MT_CHECK(ad_mpi_irecv(r, 2, AD_MPI_REAL, partner, 2, comm, &q[0]) == MPI_SUCCESS);
  if (sender || self) MT_CHECK(ad_mpi_isend(x, 2, AD_MPI_REAL, partner, 2, comm, &q[1]) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_waitall(2, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  y = sender ? ad_mul(x[0], 2.0) : ad_add(ad_mul(r[0], r[1]), x[0]);
  ad_tape_end(t);
  double g[4];
  gradient_ok(t, y, 4, x, g);
  if (self) {
    MT_CLOSE(g[0], 1.0 + ad_value(x[1]), 1e-14);
  } else if (sender) {
    MT_CLOSE(g[0], 2.0 + ad_value(x[1]), 1e-14);
    MT_CLOSE(g[1], ad_value(x[0]), 1e-14);
  } else {
    MT_CLOSE(g[0], 1.0, 1e-14);
  }
  scenario_finish(&comm, t);
}

/* ------------------------------------------------------------------------ */
/* (b) AD_MPI_REAL on one side, MPI_DOUBLE on the other                      */
/* ------------------------------------------------------------------------ */

/* Both types put doubles on the wire, so the values arrive; but only one
 * side recorded the message. The active side's sweep must fail (its partner
 * never answers the handshake or never sends the adjoint), never return a
 * gradient that silently lacks the message. With `shared`, the pair also
 * takes part in an allreduce after the message, so the handshake passes and
 * the failure comes from the missing adjoint itself. */
static void scenario_type_mismatch(int active_sender, int shared) {
  MPI_Comm comm = scenario_begin(active_sender ? "type_mismatch_sender" : "type_mismatch_receiver");
  int partner = mt_rank ^ 1, paired = partner < mt_size, sender = mt_rank % 2 == 0;
  int active = paired && (sender == active_sender);
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x[3], r[3], y;
  double xv[3], rv[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    x[i] = ad_input(0.25 * i + mt_rank);
    xv[i] = ad_value(x[i]);
  }
  y = ad_mul(x[0], x[1]);
  if (paired && sender) {
    if (active_sender)
      MT_CHECK(ad_mpi_send(x, 3, AD_MPI_REAL, partner, 4, comm) == MPI_SUCCESS);
    else
      MT_CHECK(ad_mpi_send(xv, 3, MPI_DOUBLE, partner, 4, comm) == MPI_SUCCESS);
  } else if (paired) {
    if (active_sender) {
      MT_CHECK(ad_mpi_recv(rv, 3, MPI_DOUBLE, partner, 4, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      for (int i = 0; i < 3; i++) MT_CHECK(rv[i] == 0.25 * i + partner);
      y = ad_add(y, rv[2]);
    } else {
      MT_CHECK(ad_mpi_recv(r, 3, AD_MPI_REAL, partner, 4, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
      for (int i = 0; i < 3; i++) MT_CHECK(ad_value(r[i]) == 0.25 * i + partner);
      y = ad_add(y, ad_mul(r[2], x[2]));
    }
  }
  if (shared) {
    ad_real s = ad_sin(x[2]), sum;
    MT_CHECK(ad_mpi_allreduce(&s, &sum, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
    y = ad_add(y, sum);
  }
  ad_tape_end(t);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  ad_seed(t, y, 1.0);
  double sec;
  int rc = timed_reverse(t, &sec);
  if (active) {
    check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, NULL);
  } else if (shared && rc != AD_OK) {
    /* The active partner stops at the handshake (the message counts do not
     * match), so the shared allreduce's adjoint fails here too: an error,
     * never a wrong gradient. */
    check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, NULL);
  } else {
    /* The passive side recorded nothing of the message; with the allreduce
     * its sweep does that part and returns its (correct) gradient. */
    check_sweep(t, rc, AD_OK, sec, BOUNDED, NULL);
    if (rc == AD_OK) {
      MT_CLOSE(ad_adjoint(t, x[0]), ad_value(x[1]), 1e-14);
      MT_CLOSE(ad_adjoint(t, x[2]), shared ? mt_size * cos(ad_value(x[2])) : 0.0, 1e-14);
    }
  }
  scenario_finish(&comm, t);
}

/* Passive values sent (MPI_DOUBLE) and received active (AD_MPI_REAL) while
 * the pair also shares a collective, so that the handshake passes: the
 * receiver's sweep sends an adjoint that nobody takes, and its stream
 * sequence runs one ahead of the sender's. The next active message on the
 * same stream must not take that stale adjoint: the sweep handshake
 * compares the message counts each side recorded, so both sides fail. */
static void scenario_mixed_stream(void) {
  MPI_Comm comm = scenario_begin("mixed_stream");
  int partner = mt_rank ^ 1, paired = partner < mt_size, sender = mt_rank % 2 == 0;
  ad_tape *t = ad_tape_create();
  for (int round = 0; round < 2; round++) {
    ad_tape_reset(t);
    ad_tape_begin(t);
    ad_real x = ad_input(2.0 + mt_rank), r = ad_const(0.0), s;
    double xv = ad_value(x);
    if (paired && sender) {
      if (round == 0)
        MT_CHECK(ad_mpi_send(&xv, 1, MPI_DOUBLE, partner, 3, comm) == MPI_SUCCESS);
      else
        MT_CHECK(ad_mpi_send(&x, 1, AD_MPI_REAL, partner, 3, comm) == MPI_SUCCESS);
    } else if (paired) {
      MT_CHECK(ad_mpi_recv(&r, 1, AD_MPI_REAL, partner, 3, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    }
    MT_CHECK(ad_mpi_allreduce(&x, &s, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
    /* Different weights, so that a stale adjoint cannot pass for a new one. */
    ad_real y = ad_add(ad_mul(r, round == 0 ? 1.0 : 10.0), s);
    ad_tape_end(t);
    ad_seed(t, y, 1.0);
    double sec;
    int rc = timed_reverse(t, &sec);
    if (round == 0 && paired && !sender) {
      /* The active side of a message its partner did not record. */
      check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, NULL);
    } else if (round == 1 && paired && sender && rc == AD_OK) {
      /* Either an error or the right gradient: 10 from the partner, and one
       * from each rank's allreduce result. */
      MT_CLOSE(ad_adjoint(t, x), 10.0 + mt_size, 1e-14);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  scenario_finish(&comm, t);
}

/* ------------------------------------------------------------------------ */
/* (c) A copy of a completed request used again                              */
/* ------------------------------------------------------------------------ */

/* Every rank exchanges with rank 0 (a star, so that every rank is rank 0's
 * partner); rank 0 then waits on a copy of a request it already completed,
 * even after the request's slot has been reused by a new request. Every use
 * of the stale copy gives MPI_ERR_REQUEST and rank 0's tape keeps AD_ERR_MPI,
 * which every partner's sweep learns of in the handshake. */
static void scenario_stale_request(void) {
  MPI_Comm comm = scenario_begin("stale_request");
  int p = mt_size;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(1.0 + mt_rank), y = ad_mul(x, x), back;
  ad_real *in = calloc((size_t)p, sizeof *in);
  ad_mpi_request *q = malloc(sizeof *q * (size_t)(2 * p + 2));
  int nq = 0;
  if (mt_rank == 0) {
    for (int r = 0; r < p; r++) MT_CHECK(ad_mpi_irecv(&in[r], 1, AD_MPI_REAL, r, 5, comm, &q[nq++]) == MPI_SUCCESS);
    for (int r = 0; r < p; r++) MT_CHECK(ad_mpi_isend(&x, 1, AD_MPI_REAL, r, 6, comm, &q[nq++]) == MPI_SUCCESS);
  }
  /* Every rank, rank 0 included, plays the outer end of the star too. */
  MT_CHECK(ad_mpi_irecv(&back, 1, AD_MPI_REAL, 0, 6, comm, &q[nq++]) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_isend(&x, 1, AD_MPI_REAL, 0, 5, comm, &q[nq++]) == MPI_SUCCESS);
  ad_mpi_request copy = q[0];
  MT_CHECK(ad_mpi_waitall(nq, q, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_tape_error(t) == AD_OK);
  y = ad_add(y, ad_mul(back, x));
  if (mt_rank == 0)
    for (int r = 0; r < p; r++) y = ad_add(y, ad_mul(in[r], x));
  if (mt_rank == 0) {
    int flag = 0;
    MT_CHECK(ad_mpi_wait(&copy, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
    check_tape_error(t, AD_ERR_MPI, "already completed");
    MT_CHECK(ad_mpi_test(&copy, &flag, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
    MT_CHECK(ad_mpi_waitall(1, &copy, MPI_STATUSES_IGNORE) == MPI_ERR_REQUEST);
    /* As many new requests as were completed take all the freed slots, the
     * stale copy's included; the copy must still not complete one. */
    ad_real *v = calloc((size_t)nq, sizeof *v), w = ad_const(2.0);
    ad_mpi_request *n2 = malloc(sizeof *n2 * (size_t)(2 * nq));
    for (int i = 0; i < nq; i++) {
      MT_CHECK(ad_mpi_irecv(&v[i], 1, AD_MPI_REAL, 0, 7, comm, &n2[2 * i]) == MPI_SUCCESS);
      MT_CHECK(ad_mpi_isend(&w, 1, AD_MPI_REAL, 0, 7, comm, &n2[2 * i + 1]) == MPI_SUCCESS);
    }
    MT_CHECK(ad_mpi_wait(&copy, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
    MT_CHECK(ad_mpi_waitall(2 * nq, n2, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < nq; i++) MT_CHECK(ad_value(v[i]) == 2.0);
    free(v);
    free(n2);
  }
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  double sec;
  int rc = timed_reverse(t, &sec);
  check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, mt_rank == 0 ? "already completed" : "reported AD_ERR_MPI");

  /* Without a recording tape the misuse is reported as the last error. */
  ad_real a = ad_const(1.0), b;
  ad_mpi_request s[2];
  MT_CHECK(ad_mpi_irecv(&b, 1, AD_MPI_REAL, mt_rank, 8, comm, &s[0]) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_isend(&a, 1, AD_MPI_REAL, mt_rank, 8, comm, &s[1]) == MPI_SUCCESS);
  ad_mpi_request stale = s[1];
  MT_CHECK(ad_mpi_waitall(2, s, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
  ad_clear_last_error();
  MT_CHECK(ad_mpi_wait(&stale, MPI_STATUS_IGNORE) == MPI_ERR_REQUEST);
  MT_CHECK(ad_last_error() == AD_ERR_MPI);
  ad_clear_last_error();
  ad_tape_destroy(t);
  free(in);
  free(q);
  scenario_end(&comm);
}

/* ------------------------------------------------------------------------ */
/* (d) A sweep started on some ranks only                                    */
/* ------------------------------------------------------------------------ */

/* A ring exchange and an allreduce, recorded everywhere; rank 1 does not
 * sweep with the others. They must all fail within a few timeouts. With
 * `late`, rank 1 sweeps after the others have given up (a straggler): it
 * fails too, and the messages it sends then must do no harm to the ranks
 * that gave up. Either way everyone meets again and carries on. */
static void scenario_partial_sweep(int late) {
  MPI_Comm comm = scenario_begin(late ? "partial_sweep_late" : "partial_sweep");
  int p = mt_size, skip = 1;
  ad_tape *t = ad_tape_create();
  ad_tape_begin(t);
  ad_real x = ad_input(0.3 + mt_rank), s = ad_exp(x), r, sum;
  MT_CHECK(ad_mpi_sendrecv(&s, 1, AD_MPI_REAL, (mt_rank + 1) % p, 9, &r, 1, AD_MPI_REAL, (mt_rank + p - 1) % p, 9,
                           comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
  MT_CHECK(ad_mpi_allreduce(&r, &sum, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
  ad_real y = ad_mul(sum, x);
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  double sec;
  if (mt_rank != skip) {
    int rc = timed_reverse(t, &sec);
    check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, "waited");
  }
  /* Everyone else has given up once this barrier completes. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (mt_rank == skip && late) {
    int rc = timed_reverse(t, &sec);
    check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, "waited");
  }
  /* Give a late straggler's messages time to arrive where the others gave up. */
  MPI_Barrier(MPI_COMM_WORLD);
  scenario_finish(&comm, t);
}

/* ------------------------------------------------------------------------ */
/* (e) A rank whose tape is in the sticky error state                        */
/* ------------------------------------------------------------------------ */

/* The last rank runs out of tape memory, either while recording (`when` 0)
 * or when its sweep allocates the adjoints (`when` 1). It returns
 * AD_ERR_NOMEM; every partner learns of it in the handshake and returns
 * AD_ERR_MPI at once. The program is a ring sendrecv (partners: the two
 * neighbours) followed, with `coll`, by an allreduce (partners: everyone).
 * A rank that is no partner may finish its sweep, but then with the right
 * gradient: y_r = sin(x_{r-1}) x_r, so dJ/dx_r = sin(x_{r-1}) + cos(x_r) x_{r+1}. */
static void scenario_sticky(int when, int coll) {
  MPI_Comm comm = scenario_begin(when ? "sticky_sweep" : "sticky_record");
  int p = mt_size, bad = p - 1, me = mt_rank;
  int left = (me + p - 1) % p, right = (me + 1) % p;
  ad_tape_options o;
  ad_tape_options_default(&o);
  o.block_statements = 1024;
  o.block_arguments = 1024;
  ad_tape *t = ad_tape_create_with(&o);
  ad_stats stats;
  ad_tape_stats(t, &stats);
  if (me == bad && when == 0) ad_tape_set_memory_limit(t, stats.bytes_reserved + 64);
  ad_tape_begin(t);
  ad_real x = ad_input(0.4 + 0.1 * me), in, y;
  /* Work enough to need a second storage block. */
  ad_real w = x;
  for (int i = 0; i < 3000; i++) w = ad_add(ad_mul(w, 0.999), 0.0001);
  MT_CHECK(ad_mpi_sendrecv(&x, 1, AD_MPI_REAL, right, 11, &in, 1, AD_MPI_REAL, left, 11, comm, MPI_STATUS_IGNORE) ==
           MPI_SUCCESS);
  y = ad_mul(ad_sin(in), x);
  if (coll) {
    ad_real s = ad_mul(w, 1e-3), sum;
    MT_CHECK(ad_mpi_allreduce(&s, &sum, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
    y = ad_add(y, ad_mul(sum, 0.0));
  }
  ad_tape_end(t);
  if (me == bad && when == 0) MT_CHECK(ad_tape_error(t) == AD_ERR_NOMEM);
  if (me == bad && when == 1) {
    ad_tape_stats(t, &stats);
    ad_tape_set_memory_limit(t, stats.bytes_reserved + stats.bytes_adjoints + 64);
  }
  if (y.i) ad_seed(t, y, 1.0);
  double sec;
  int rc = timed_reverse(t, &sec);
  int partner = coll || me == (bad + p - 1) % p || me == (bad + 1) % p;
  if (me == bad) {
    check_sweep(t, rc, AD_ERR_NOMEM, sec, QUICK, NULL);
  } else if (partner) {
    check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, "reported AD_ERR_NOMEM");
  } else if (rc == AD_OK) {
    double xl = 0.4 + 0.1 * left, xr = 0.4 + 0.1 * right, xm = ad_value(x);
    MT_CLOSE(ad_adjoint(t, x), sin(xl) + cos(xm) * xr, 1e-14);
    MT_CHECK(sec < BOUNDED);
  } else {
    check_sweep(t, rc, AD_ERR_MPI, sec, BOUNDED, NULL);
  }
  /* The tangent sweep must fail the same way. It starts together on all
   * ranks: a rank that is no partner may have spent a timeout above waiting
   * for a partner's adjoint, and would be late for the handshake. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (x.i) ad_tangent_seed(t, x, 1.0);
  double t0 = MPI_Wtime();
  rc = ad_forward(t);
  sec = MPI_Wtime() - t0;
  if (me == bad)
    check_sweep(t, rc, AD_ERR_NOMEM, sec, QUICK, NULL);
  else if (partner)
    check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, "reported AD_ERR_NOMEM");
  else
    MT_CHECK(sec < BOUNDED);
  scenario_finish(&comm, t);
}

/* ------------------------------------------------------------------------ */
/* (f) A reduction operation that has no derivative rule                     */
/* ------------------------------------------------------------------------ */

static void scenario_bad_op(void) {
  MPI_Comm comm;
  ad_tape *t = scenario_recording("bad_op", &comm);
  ad_real x[2] = {ad_input(1.0), ad_input(2.0)}, r[2 * 8];
  ad_real *big = calloc((size_t)(2 * mt_size), sizeof *big);
  for (int i = 0; i < 2 * mt_size; i++) big[i] = x[i % 2];
  MT_CHECK(ad_mpi_allreduce(x, r, 2, AD_MPI_REAL, MPI_LAND, comm) == MPI_ERR_OP);
  check_tape_error(t, AD_ERR_MPI, "ad_mpi_allreduce");
  MT_CHECK(ad_mpi_reduce(x, r, 2, AD_MPI_REAL, MPI_BAND, 0, comm) == MPI_ERR_OP);
  MT_CHECK(ad_mpi_scan(x, r, 2, AD_MPI_REAL, MPI_PROD, comm) == MPI_ERR_OP);
  MT_CHECK(ad_mpi_exscan(x, r, 2, AD_MPI_REAL, MPI_MAX, comm) == MPI_ERR_OP);
  MT_CHECK(ad_mpi_reduce_scatter_block(big, r, 2, AD_MPI_REAL, MPI_MAXLOC, comm) == MPI_ERR_OP);
  /* The first error is the one kept. */
  check_tape_error(t, AD_ERR_MPI, "ad_mpi_allreduce");
  ad_real y = ad_mul(x[0], x[1]);
  ad_tape_end(t);
  ad_seed(t, y, 1.0);
  double sec;
  int rc = timed_reverse(t, &sec);
  check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, "ad_mpi_allreduce");
  /* Without a recording tape: the wrapper's code and the last error. */
  ad_clear_last_error();
  ad_real c = ad_const(1.0), d;
  MT_CHECK(ad_mpi_allreduce(&c, &d, 1, AD_MPI_REAL, MPI_LOR, comm) == MPI_ERR_OP);
  MT_CHECK(ad_last_error() == AD_ERR_MPI);
  ad_clear_last_error();
  ad_tape_destroy(t);
  free(big);
  scenario_end(&comm);
}

/* ------------------------------------------------------------------------ */
/* A communicator freed before the sweep                                     */
/* ------------------------------------------------------------------------ */

static void scenario_freed_comm(void) {
  MPI_Comm comm;
  ad_tape *t = scenario_recording("freed_comm", &comm);
  ad_real x = ad_input(2.0 + mt_rank), s;
  MT_CHECK(ad_mpi_allreduce(&x, &s, 1, AD_MPI_REAL, MPI_SUM, comm) == MPI_SUCCESS);
  ad_real y = ad_mul(s, x);
  ad_tape_end(t);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&comm);
  ad_seed(t, y, 1.0);
  double sec;
  int rc = timed_reverse(t, &sec);
  check_sweep(t, rc, AD_ERR_MPI, sec, QUICK, "freed");
  ad_tape_destroy(t);
  MPI_Barrier(MPI_COMM_WORLD);
}

/* After all of the above, a correct program on MPI_COMM_WORLD (which every
 * scenario used for its barriers) still gets exact derivatives. */
static void after_errors(ad_real *x, int n, ad_real *y, int m, void *ctx) {
  (void)ctx;
  (void)m;
  int p = mt_size;
  ad_real s[2], r[2], sum[2];
  for (int i = 0; i < n; i++) s[i] = ad_sin(x[i]);
  ad_mpi_sendrecv(s, n, AD_MPI_REAL, (mt_rank + 1) % p, 1, r, n, AD_MPI_REAL, (mt_rank + p - 1) % p, 1, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
  ad_mpi_allreduce(r, sum, n, AD_MPI_REAL, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) y[i] = ad_mul(sum[i], x[i]);
}

/* Two tags that agree in their low 12 bits, between the same ranks, used to
 * be refused; any tag MPI allows now works, and each adjoint goes back on its
 * own message (J = 3 y1 + 5 y2 on rank 1). */
static void scenario_tag_alias(void) {
  MPI_Comm comm;
  ad_tape *t = scenario_recording("tag_alias", &comm);
  ad_real x[2] = {ad_input(1.0 + mt_rank), ad_input(2.0 + mt_rank)}, y1, y2, J = ad_const(0.0);
  if (mt_rank == 0) {
    MT_CHECK(ad_mpi_send(&x[0], 1, AD_MPI_REAL, 1, 1, comm) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_send(&x[1], 1, AD_MPI_REAL, 1, 1 + 4096, comm) == MPI_SUCCESS);
  } else if (mt_rank == 1) {
    MT_CHECK(ad_mpi_recv(&y2, 1, AD_MPI_REAL, 0, 1 + 4096, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    MT_CHECK(ad_mpi_recv(&y1, 1, AD_MPI_REAL, 0, 1, comm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    J = ad_add(ad_mul(3.0, y1), ad_mul(5.0, y2));
  }
  ad_tape_end(t);
  if (mt_rank < 2) {
    double g[2] = {-1, -1};
    MT_CHECK(ad_gradient(t, J, 2, x, g) == AD_OK);
    MT_CHECK(g[0] == (mt_rank == 0 ? 3.0 : 0.0));
    MT_CHECK(g[1] == (mt_rank == 0 ? 5.0 : 0.0));
  }
  scenario_finish(&comm, t);
}

int main(int argc, char **argv) {
  mt_init(&argc, &argv);
  /* Set before any other call of the MPI layer: it must win over the
   * environment's ARIADNE_MPI_TIMEOUT, which the test harness sets to 60
   * (the sweeps that time out below would take a minute each otherwise,
   * and fail their limits). */
  ad_mpi_set_timeout(TIMEOUT);
  double t0 = MPI_Wtime();
  scenario_truncate();
  scenario_truncate_wait();
  if (mt_size > 1) {
    scenario_type_mismatch(1, 0);
    scenario_type_mismatch(0, 0);
    scenario_type_mismatch(1, 1);
    scenario_mixed_stream();
  }
  scenario_stale_request();
  if (mt_size > 1) {
    scenario_partial_sweep(0);
    scenario_partial_sweep(1);
    scenario_sticky(0, 0);
    scenario_sticky(1, 0);
    scenario_sticky(0, 1);
  }
  scenario_bad_op();
  if (mt_size > 1) scenario_tag_alias();
  scenario_freed_comm();
  mt_check_prog("after_errors", after_errors, 2, 2, NULL, 1e-6);
  for (int i = 0; i < ncomms; i++) MPI_Comm_free(&comms[i]);
  if (mt_rank == 0) printf("errors: %d ranks, %.1f s\n", mt_size, MPI_Wtime() - t0);
  return mt_finalize();
}
