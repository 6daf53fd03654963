/* SPDX-License-Identifier: BSD-3-Clause */
/* Collectives on datatypes derived from AD_MPI_REAL: reductions, gather,
 * scatter, allgather, alltoall(v, w) and the neighbourhood collectives
 * (see types.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types_impl.h"

/* ------------------------------------------------------------------------ */
/* Nonblocking collectives on derived types: the gathered buffers live until */
/* the request completes, and the received elements are scattered then      */
/* ------------------------------------------------------------------------ */

typedef struct later {
  side s[2];
  void *sbase[2]; /* scatter s[i] into this buffer at completion (NULL: no) */
  vside v[2];
  void *vbase[2]; /* scatter v[i] into this buffer, slots at vdsp[i] */
  int *vdsp[2], p;
  int *keep[2];     /* count arrays handed to the call */
  MPI_Request preq; /* the passive fields' collective, MPI_REQUEST_NULL if none */
  const char *fn;
  int started; /* the AD_MPI_REAL call started (whatever became of the passive one) */
  int nb;      /* nonblocking */
} later;

/* Complete the passive fields' collective that runs beside an AD_MPI_REAL
 * one (nothing if none): 1, or 0 with MPI's error on the tape naming fn. */
static int passive_done(MPI_Request *preq, const char *fn) {
  if (*preq == MPI_REQUEST_NULL) return 1;
  int rc = MPI_Wait(preq, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) return 1;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  ad__mpi_forward_error(seen, rc, fn);
  return 0;
}

/* Release L's buffers (ok), or keep them when MPI may still use them. */
static void later_close(later *L, int ok) {
  for (int i = 0; i < 2; i++) {
    if (ok) {
      ad__types_side_close(&L->s[i]);
      ad__types_vside_close(&L->v[i]);
      AD__FREE_EACH(L->vdsp[i], L->keep[i]);
    } else { /* MPI may still use them */
      AD__EACH(ad__mpi_keep, L->s[i].tmp, L->s[i].pas, L->v[i].s.pas, L->v[i].s.tmp, L->v[i].cnt, L->vdsp[i],
               L->keep[i]);
    }
  }
  free(L);
}

static void later_run(void *ctx, int ok) {
  later *L = ctx;
  ok = ok && passive_done(&L->preq, L->fn);
  for (int i = 0; ok && i < 2; i++) {
    if (L->sbase[i] && L->s[i].d) ad__types_side_scatter(&L->s[i], L->sbase[i]);
    if (L->vbase[i] && L->v[i].s.d) ad__types_vside_scatter(&L->v[i], L->vbase[i], L->vdsp[i], L->p, -1);
  }
  later_close(L, ok);
}

/* After the call returned rc: a nonblocking one (on req) hands the buffers
 * to the request, a blocking one scatters what arrived at once; or, if
 * nothing started, they are released now. */
static int later_arm(later *L, int rc, ad_mpi_request *req) {
  if (L->nb && (rc == MPI_SUCCESS || L->started))
    ad__req_then(req, later_run, L);
  else if (!L->nb && rc == MPI_SUCCESS)
    later_run(L, 1);
  else
    later_close(L, 1);
  return rc;
}

/* The passive fields' collective after the AD_MPI_REAL one returned *rc:
 * prc is what starting it returned. A failure after the active call started
 * leaves the active request to complete (its buffers go with it); the call
 * returns the error. */
static int passive_after(later *L, int rc, int prc, const char *fn) {
  if (L) L->fn = fn;
  if (rc != MPI_SUCCESS || prc == MPI_SUCCESS) return rc;
  ad_tape *seen;
  ad__mpi_tape(&seen);
  if (L) {
    L->preq = MPI_REQUEST_NULL;
    L->started = 1;
  }
  return ad__mpi_forward_error(seen, prc, fn);
}

static int *icopy_n(const int *a, int n) {
  int *b = malloc((size_t)(n > 0 ? n : 1) * sizeof *b);
  if (b && a) memcpy(b, a, (size_t)n * sizeof *b);
  return b;
}

/* The blocking call, or its nonblocking twin when req is not NULL. */
static int call_gatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rc, const int *rd,
                        MPI_Datatype rt, int root, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_igatherv(sb, sc, st, rb, rc, rd, rt, root, comm, req)
             : ad_mpi_gatherv(sb, sc, st, rb, rc, rd, rt, root, comm);
}
static int call_scatterv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb, int rc,
                         MPI_Datatype rt, int root, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_iscatterv(sb, sc, sd, st, rb, rc, rt, root, comm, req)
             : ad_mpi_scatterv(sb, sc, sd, st, rb, rc, rt, root, comm);
}
static int call_allgatherv(const void *sb, int sc, MPI_Datatype st, void *rb, const int *rc, const int *rd,
                           MPI_Datatype rt, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_iallgatherv(sb, sc, st, rb, rc, rd, rt, comm, req)
             : ad_mpi_allgatherv(sb, sc, st, rb, rc, rd, rt, comm);
}
static int call_alltoallv(const void *sb, const int *sc, const int *sd, MPI_Datatype st, void *rb, const int *rc,
                          const int *rd, MPI_Datatype rt, MPI_Comm comm, ad_mpi_request *req) {
  return req ? ad_mpi_ialltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm, req)
             : ad_mpi_alltoallv(sb, sc, sd, st, rb, rc, rd, rt, comm);
}

/* Set up the part of a call that follows MPI's: at once for a blocking one,
 * at completion for a nonblocking one (req); *rc = MPI_ERR_NO_MEM on
 * failure. */
static later *later_new(ad_mpi_request *req, const int *dsp, int p, int *rc) {
  later *L = calloc(1, sizeof *L);
  if (L) {
    L->preq = MPI_REQUEST_NULL;
    L->nb = req != NULL;
    L->p = p;
  }
  if (L && dsp && !(L->vdsp[0] = icopy_n(dsp, p))) {
    free(L);
    L = NULL;
  }
  if (!L) *rc = MPI_ERR_NO_MEM;
  return L;
}

/* The end of a gather or scatter: its side of one block (s) and of a block
 * per rank (v), each unpacked at completion into its base if not NULL, and
 * the count array it made (keep) go to L, which arms (later_arm); with no L
 * (nothing started) they are released now. rc is returned. */
static int later_hand(later *L, int rc, ad_mpi_request *req, side *s, void *sbase, vside *v, void *vbase, int *keep) {
  if (!L) {
    ad__types_side_close(s);
    ad__types_vside_close(v);
    free(keep);
    return rc;
  }
  L->s[0] = *s;
  L->sbase[0] = sbase;
  L->v[0] = *v;
  L->vbase[0] = vbase;
  L->keep[0] = keep;
  return later_arm(L, rc, req);
}

/* The passive fields of a gather or allgather (root AD__ROOT_ALL), as bytes
 * beside the values: started nonblocking if L, else complete. What MPI
 * returned. */
static int gather_passive(const side *a, vside *b, int sendcount, int inplace, int rank, int root, MPI_Comm comm,
                          later *L) {
  if (root != AD__ROOT_ALL) {
    const void *psb = inplace ? MPI_IN_PLACE : (const void *)a->pas;
    int psc = inplace ? 0 : sendcount * a->pbytes;
    return L->nb ? MPI_Igatherv(psb, psc, MPI_BYTE, b->s.pas, b->pcnt, b->pdsp, MPI_BYTE, root, comm, &L->preq)
                 : MPI_Gatherv(psb, psc, MPI_BYTE, b->s.pas, b->pcnt, b->pdsp, MPI_BYTE, root, comm);
  }
  /* the own slot in place, as allgatherv_any does for the values */
  if (a->pas && b->s.pas && b->pcnt[rank] == sendcount * a->pbytes)
    memcpy(b->s.pas + b->pdsp[rank], a->pas, (size_t)b->pcnt[rank]);
  return L->nb ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, b->s.pas, b->pcnt, b->pdsp, MPI_BYTE, comm, &L->preq)
               : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, b->s.pas, b->pcnt, b->pdsp, MPI_BYTE, comm);
}

/* Gather, and allgather (root AD__ROOT_ALL): only the ranks that receive
 * open the receive side. */
int ad__dt_gatherv(int v, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], int recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm, ad_mpi_request *req) {
  static const char *const names[2][2] = {{"ad_mpi_gather", "ad_mpi_gatherv"},
                                          {"ad_mpi_allgather", "ad_mpi_allgatherv"}};
  int all = root == AD__ROOT_ALL;
  const char *fn = names[all][v != 0];
  int rank, p, *uc;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  if (ad__mpi_as_v(v, comm, recvcount, &recvcounts, &displs, &uc) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
  int me = all || rank == root, inplace = me && sendbuf == MPI_IN_PLACE;
  side a;
  vside b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = inplace ? 0 : ad__types_side_open(&a, fn, sendtype, sendbuf, sendcount, 1);
  if (rc == 0 && me) rc = ad__types_vside_open(&b, fn, recvtype, recvbuf, recvcounts, displs, p, inplace);
  later *L = rc == 0 ? later_new(req, me ? displs : NULL, p, &rc) : NULL;
  if (rc == 0) {
    int sc = inplace ? (b.s.d ? sendcount * b.s.d->n : sendcount) : ad__types_side_count(&a, sendcount);
    MPI_Datatype stype = inplace ? ad__types_unused(sendtype) : ad__types_side_type(&a, sendtype);
    const void *sb = inplace ? MPI_IN_PLACE : ad__types_side_buf(&a);
    /* The gathered elements arrive in b's buffer, or where the user wants them. */
    void *rb = b.s.d ? b.s.tmp : recvbuf;
    const int *rcnt = b.s.d ? b.cnt : recvcounts, *rdsp = b.s.d ? b.dsp : displs;
    MPI_Datatype rtype = b.s.d ? AD_MPI_REAL : me ? recvtype : ad__types_unused(recvtype);
    rc = all ? call_allgatherv(sb, sc, stype, rb, rcnt, rdsp, rtype, comm, req)
             : call_gatherv(sb, sc, stype, rb, rcnt, rdsp, rtype, root, comm, req);
    if (rc == MPI_SUCCESS && (a.pas || b.s.pas))
      rc = passive_after(L, rc, gather_passive(&a, &b, sendcount, inplace, rank, root, comm, L), fn);
  }
  return later_hand(L, rc, req, &a, NULL, &b, b.s.d ? recvbuf : NULL, uc);
}

int ad__dt_scatterv(int v, const void *sendbuf, const int sendcounts[], const int displs[], int sendcount,
                    MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                    ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_scatterv" : "ad_mpi_scatter";
  int rank, p, *uc;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &p);
  if (ad__mpi_as_v(v, comm, sendcount, &sendcounts, &displs, &uc) != MPI_SUCCESS) return MPI_ERR_NO_MEM;
  int me = rank == root, inplace = me && recvbuf == MPI_IN_PLACE;
  vside a;
  side b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = me ? ad__types_vside_open(&a, fn, sendtype, sendbuf, sendcounts, displs, p, 1) : 0;
  if (rc == 0 && !inplace) rc = ad__types_side_open(&b, fn, recvtype, recvbuf, recvcount, 0);
  later *L = rc == 0 ? later_new(req, NULL, p, &rc) : NULL;
  if (rc == 0) {
    int rcnt = inplace ? (a.s.d ? recvcount * a.s.d->n : recvcount) : ad__types_side_count(&b, recvcount);
    void *rb = inplace ? MPI_IN_PLACE : ad__types_side_buf(&b);
    MPI_Datatype rtype = inplace ? ad__types_unused(recvtype) : ad__types_side_type(&b, recvtype);
    if (a.s.d)
      rc = call_scatterv(a.s.tmp, a.cnt, a.dsp, AD_MPI_REAL, rb, rcnt, rtype, root, comm, req);
    else
      rc = call_scatterv(sendbuf, sendcounts, displs, me ? sendtype : ad__types_unused(sendtype), rb, rcnt, rtype, root,
                         comm, req);
    if (rc == MPI_SUCCESS && (a.s.pas || b.pas)) { /* passive fields: as bytes, alongside */
      void *prb = inplace ? MPI_IN_PLACE : (void *)b.pas;
      int prc = inplace ? 0 : recvcount * b.pbytes;
      rc = passive_after(
          L, rc,
          L->nb ? MPI_Iscatterv(a.s.pas, a.pcnt, a.pdsp, MPI_BYTE, prb, prc, MPI_BYTE, root, comm, &L->preq)
                : MPI_Scatterv(a.s.pas, a.pcnt, a.pdsp, MPI_BYTE, prb, prc, MPI_BYTE, root, comm),
          fn);
    }
  }
  return later_hand(L, rc, req, &b, b.d ? recvbuf : NULL, &a, NULL, uc);
}

int ad__dt_alltoallv(int v, const void *sendbuf, const int sendcounts[], const int sdispls[], int sendcount,
                     MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], int recvcount,
                     MPI_Datatype recvtype, MPI_Comm comm, ad_mpi_request *req) {
  const char *fn = v ? "ad_mpi_alltoallv" : "ad_mpi_alltoall";
  int p, *us, *ur = NULL;
  MPI_Comm_size(comm, &p);
  if (ad__mpi_as_v(v, comm, sendcount, &sendcounts, &sdispls, &us) != MPI_SUCCESS ||
      ad__mpi_as_v(v, comm, recvcount, &recvcounts, &rdispls, &ur) != MPI_SUCCESS) {
    free(us);
    return MPI_ERR_NO_MEM;
  }
  int inplace = sendbuf == MPI_IN_PLACE;
  vside a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = inplace ? 0 : ad__types_vside_open(&a, fn, sendtype, sendbuf, sendcounts, sdispls, p, 1);
  if (rc == 0) rc = ad__types_vside_open(&b, fn, recvtype, recvbuf, recvcounts, rdispls, p, inplace);
  later *L = rc == 0 ? later_new(req, rdispls, p, &rc) : NULL;
  if (rc == 0) {
    const void *sb = inplace ? MPI_IN_PLACE : a.s.d ? (void *)a.s.tmp : sendbuf;
    const int *sc = a.s.d ? a.cnt : sendcounts, *sd = a.s.d ? a.dsp : sdispls;
    rc = call_alltoallv(sb, sc, sd, a.s.d || inplace ? ad__types_unused(sendtype) : sendtype,
                        b.s.d ? (void *)b.s.tmp : recvbuf, b.s.d ? b.cnt : recvcounts, b.s.d ? b.dsp : rdispls,
                        b.s.d ? AD_MPI_REAL : recvtype, comm, req);
    if (rc == MPI_SUCCESS && (a.s.pas || b.s.pas)) { /* passive fields: as bytes, alongside */
      const void *psb = inplace ? MPI_IN_PLACE : (const void *)a.s.pas;
      const int *pc = inplace ? b.pcnt : a.pcnt, *pd = inplace ? b.pdsp : a.pdsp;
      rc =
          passive_after(L, rc,
                        L->nb ? MPI_Ialltoallv(psb, pc, pd, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm, &L->preq)
                              : MPI_Alltoallv(psb, pc, pd, MPI_BYTE, b.s.pas, b.pcnt, b.pdsp, MPI_BYTE, comm),
                        fn);
    }
    L->v[1] = a;
    L->v[0] = b;
    L->vbase[0] = b.s.d ? recvbuf : NULL;
    L->keep[0] = us;
    L->keep[1] = ur;
    return later_arm(L, rc, req);
  }
  ad__types_vside_close(&a);
  ad__types_vside_close(&b);
  free(us);
  free(ur);
  return rc;
}

int ad__dt_ibcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, ad_mpi_request *req) {
  side s;
  int rank;
  MPI_Comm_rank(comm, &rank);
  int rc = ad__types_side_open(&s, "ad_mpi_ibcast", type, buffer, count, rank == root);
  later *L = rc == 0 ? later_new(req, NULL, 0, &rc) : NULL;
  if (rc != 0) {
    ad__types_side_close(&s);
    return rc;
  }
  rc = ad_mpi_ibcast(s.tmp, ad__types_side_count(&s, count), AD_MPI_REAL, root, comm, req);
  if (rc == MPI_SUCCESS && s.pas) /* passive fields: as bytes, alongside */
    rc = passive_after(L, rc, MPI_Ibcast(s.pas, count * s.pbytes, MPI_BYTE, root, comm, &L->preq), "ad_mpi_ibcast");
  L->s[0] = s;
  L->sbase[0] = rank != root ? buffer : NULL;
  return later_arm(L, rc, req);
}

/* ------------------------------------------------------------------------ */
/* Alltoallw and the neighbourhood collectives: a slot per peer, each with   */
/* its own datatype, count and byte displacement                              */
/* ------------------------------------------------------------------------ */

/* One side of such a call, gathered into a packed ad_real buffer: slot j
 * holds cnt[j] elements from dsp[j] on. The user's arrays are copied, so
 * that a nonblocking call can scatter at completion. */
typedef struct wside {
  int n; /* slots */
  ad_real *tmp;
  int *cnt, *dsp;     /* elements, packed */
  char *pas;          /* passive fields of the slots, as bytes (NULL: none) */
  int *pcnt, *pdsp;   /* bytes, packed */
  int *ucnt;          /* items of the user's type */
  MPI_Aint *udsp;     /* bytes */
  MPI_Datatype *type; /* per slot */
} wside;

static void wside_close(wside *w) {
  AD__FREE_EACH(w->tmp, w->pas, w->cnt, w->ucnt, w->udsp, w->type);
  memset(w, 0, sizeof *w);
}

/* Gather (to_tmp) or scatter the slots in use. */
static void wside_move(const wside *w, void *buf, int to_tmp) {
  for (int j = 0; j < w->n; j++) {
    if (!w->ucnt[j]) continue;
    char *base = (char *)buf + w->udsp[j];
    ad_real *at = w->tmp + w->dsp[j];
    const ad__dtype *d = w->type[j] == AD_MPI_REAL ? NULL : ad__dtype_get(w->type[j]);
    if (!d)
      memcpy(to_tmp ? (void *)at : base, to_tmp ? (void *)base : at, (size_t)w->ucnt[j] * sizeof(ad_real));
    else if (to_tmp)
      ad__types_dt_gather(d, base, w->ucnt[j], at);
    else
      ad__types_dt_scatter(d, base, at, w->cnt[j]);
    if (d && d->npass && w->pas) ad__types_pas_move(d, base, w->ucnt[j], w->pas + w->pdsp[j], to_tmp);
  }
}

static int wside_open(wside *w, const char *fn, const void *buf, const int *cnt, const MPI_Aint *dsp,
                      const MPI_Datatype *types, int n, int fill, int mixed_ok) {
  memset(w, 0, sizeof *w);
  w->n = n;
  size_t k = (size_t)(n > 0 ? n : 1);
  w->cnt = malloc(4 * k * sizeof *w->cnt);
  w->ucnt = malloc(k * sizeof *w->ucnt);
  w->udsp = malloc(k * sizeof *w->udsp);
  w->type = malloc(k * sizeof *w->type);
  if (!w->cnt || !w->ucnt || !w->udsp || !w->type) return MPI_ERR_NO_MEM;
  w->dsp = w->cnt + k;
  w->pcnt = w->cnt + 2 * k;
  w->pdsp = w->cnt + 3 * k;
  long long at = 0, pat = 0;
  int anypas = 0;
  for (int j = 0; j < n; j++) {
    w->ucnt[j] = cnt[j];
    w->udsp[j] = dsp[j];
    w->type[j] = types[j];
    w->cnt[j] = w->pcnt[j] = 0;
    w->dsp[j] = (int)at;
    w->pdsp[j] = (int)pat;
    if (cnt[j] < 0) return MPI_ERR_COUNT;
    if (!cnt[j]) continue;
    int per = 1;
    if (types[j] != AD_MPI_REAL) {
      if (types[j] == MPI_DATATYPE_NULL || ad__types_derived_from_real(types[j], 0) != 1)
        return ad__dtype_refuse(fn,
                                "slot %d: with AD_MPI_REAL data in the call, every datatype in use must be "
                                "AD_MPI_REAL or built from it (move passive data in a call of its own)",
                                j);
      const ad__dtype *d = ad__dtype_get(types[j]);
      if (!d) return MPI_ERR_NO_MEM;
      if (d->why)
        return ad__dtype_refuse(fn, "a datatype built from AD_MPI_REAL with %s is not differentiated", d->why);
      if (d->npass && !mixed_ok)
        return ad__dtype_refuse(fn, "a datatype that mixes AD_MPI_REAL with passive fields is not supported with a "
                                    "datatype per slot (every rank could not tell whether passive fields move)");
      if (d->npass) {
        anypas = 1;
        int pb = d->wire - (int)sizeof(double) * d->n;
        w->pcnt[j] = cnt[j] * pb;
        pat += (long long)cnt[j] * pb;
        if (pat > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 passive bytes in one call");
      }
      per = d->n;
    }
    w->cnt[j] = cnt[j] * per;
    at += (long long)cnt[j] * per;
    if (at > 0x7fffffff) return ad__dtype_refuse(fn, "more than 2^31-1 ad_real elements in one call");
  }
  w->tmp = calloc((size_t)at + 1, sizeof(ad_real));
  if (!w->tmp) return MPI_ERR_NO_MEM;
  if (anypas && !(w->pas = calloc((size_t)pat + 1, 1))) return MPI_ERR_NO_MEM;
  if (fill) wside_move(w, (void *)buf, 1);
  return 0;
}

typedef struct wlater {
  wside s, r;
  void *recvbuf;
  MPI_Request preq; /* the passive fields' call, MPI_REQUEST_NULL if none */
  const char *fn;
} wlater;

static void wlater_run(void *ctx, int ok) {
  wlater *L = ctx;
  ok = ok && passive_done(&L->preq, L->fn);
  if (ok) {
    wside_move(&L->r, L->recvbuf, 0);
    wside_close(&L->s);
    wside_close(&L->r);
  } else { /* MPI may still use them */
    ad__mpi_keep(L->s.tmp);
    ad__mpi_keep(L->r.tmp);
    ad__mpi_keep(L->s.pas);
    ad__mpi_keep(L->r.pas);
    ad__mpi_keep(L->s.cnt);
    ad__mpi_keep(L->r.cnt);
    L->s.tmp = L->r.tmp = NULL;
    L->s.pas = L->r.pas = NULL;
    L->s.cnt = L->r.cnt = NULL;
    wside_close(&L->s);
    wside_close(&L->r);
  }
  free(L);
}

int ad__dt_alltoallw(int neighbor, int one_type, const char *fn, const void *sendbuf, const int *scnt,
                     const MPI_Aint *sdsp, const MPI_Datatype *stypes, int ns, void *recvbuf, const int *rcnt,
                     const MPI_Aint *rdsp, const MPI_Datatype *rtypes, int nr, MPI_Comm comm, ad_mpi_request *req) {
  int inplace = sendbuf == MPI_IN_PLACE;
  wlater *L = calloc(1, sizeof *L);
  if (!L) return MPI_ERR_NO_MEM;
  L->preq = MPI_REQUEST_NULL;
  L->fn = fn;
  /* The receive side is gathered too: a slot that receives nothing (a
   * Cartesian neighbour MPI_PROC_NULL) keeps what it holds. */
  int rc = inplace ? 0 : wside_open(&L->s, fn, sendbuf, scnt, sdsp, stypes, ns, 1, one_type);
  if (rc == 0) rc = wside_open(&L->r, fn, recvbuf, rcnt, rdsp, rtypes, nr, 1, one_type);
  if (rc == 0) {
    const void *sb = inplace ? MPI_IN_PLACE : (const void *)L->s.tmp;
    const int *sc = inplace ? L->r.cnt : L->s.cnt, *sd = inplace ? L->r.dsp : L->s.dsp;
    if (neighbor)
      rc = req ? ad_mpi_ineighbor_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm,
                                            req)
               : ad_mpi_neighbor_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm);
    else
      rc = req ? ad_mpi_ialltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm, req)
               : ad_mpi_alltoallv(sb, sc, sd, AD_MPI_REAL, L->r.tmp, L->r.cnt, L->r.dsp, AD_MPI_REAL, comm);
    int started = rc == MPI_SUCCESS;
    if (started && (L->s.pas || L->r.pas)) {
      /* One datatype on each side, the same on every rank by MPI's rules:
       * every rank moves passive fields here, as bytes, with MPI's own
       * call (nonblocking, routed as the values are). */
      const void *psb = inplace ? MPI_IN_PLACE : (const void *)L->s.pas;
      const int *pc = inplace ? L->r.pcnt : L->s.pcnt, *pd = inplace ? L->r.pdsp : L->s.pdsp;
      rc = neighbor ? MPI_Ineighbor_alltoallv(psb, pc, pd, MPI_BYTE, L->r.pas, L->r.pcnt, L->r.pdsp, MPI_BYTE, comm,
                                              &L->preq)
                    : MPI_Ialltoallv(psb, pc, pd, MPI_BYTE, L->r.pas, L->r.pcnt, L->r.pdsp, MPI_BYTE, comm, &L->preq);
      if (rc == MPI_SUCCESS && !req) rc = MPI_Wait(&L->preq, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        ad_tape *seen;
        ad__mpi_tape(&seen);
        L->preq = MPI_REQUEST_NULL;
        ad__mpi_forward_error(seen, rc, fn);
      }
    }
    if (started && req) {
      L->recvbuf = recvbuf;
      ad__req_then(req, wlater_run, L);
      return rc;
    }
    if (rc == MPI_SUCCESS) wside_move(&L->r, recvbuf, 0);
  }
  wside_close(&L->s);
  wside_close(&L->r);
  free(L);
  return rc;
}
