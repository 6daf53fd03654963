/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Straight-line blocks with temporaries, for the fused port's preaccumulation:
 * chains of temporaries, a temporary read after the data it was computed from
 * is overwritten (directly and through a pointer), a variable assigned again
 * (not a temporary), values that leave the block through a loop, temporaries
 * read on both sides of a branch, values used only in comparisons (a cutoff),
 * reads the fused form cannot fold (a conditional, a call of a ported
 * function, a cast, a macro), more operands than one statement holds, a
 * file-scope constant that stays double, and variables declared at the top
 * of a function and assigned once in an inner block.
 */
#include <math.h>
#include <stdio.h>

#define N 12
#define SQ(a) ((a) * (a))
int n_inputs = N;
double x_start[N] = {0.7, 1.3, -0.4, 2.1, 0.9, -1.2, 0.35, 1.7, -0.8, 0.55, 1.05, -0.25};

static const double kappa = 1.4; /* a constant: stays double in the port */

static double twice(double v) { return 2.0 * v; }

static double chain(const double *x) {
  double a = x[0] * x[1];
  double b = a + sin(x[2]);
  double c = b * b - a;
  return a * b + c / (1.0 + x[3] * x[3]) + pow(1.0 + b * b, kappa);
}

/* A temporary computed from u[0] and u[1], then u[0] stored, then read
 * again: the read after the store must see the new value, the temporary the
 * old one. */
static double overwrite(double *u) {
  double t = u[0] * u[1];
  u[0] = 2.0 * t + u[1];
  double s = u[0] * t + u[1] * u[1];
  u[1] = s + u[0] * t;
  double *p = &u[2];
  double q = u[2] * u[3];
  *p = 3.0 * q - u[3];
  double r = u[2] * q + u[3];
  return u[0] + u[1] + r;
}

/* Not a temporary: assigned again. */
static double reassigned(const double *x) {
  double t = x[4] * x[5];
  t = t * x[6] + x[4];
  double w = t * t;
  return w - x[5] * t;
}

/* A temporary read inside a loop that stores what it was computed from:
 * the loop's reads are new values on every trip. */
static double loop_carried(double *u, const double *x) {
  double t = u[4] * x[7];
  double acc = 0.0;
  for (int k = 0; k < 3; k++) {
    u[4] = u[4] * t + x[8];
    double v = u[4] * u[4] + t;
    acc += v * t;
  }
  return acc;
}

/* Temporaries read on both paths of a branch, and a value used only in a
 * comparison. */
static double branches(const double *x, double cut) {
  double t = x[0] * x[9] - x[10];
  double g = x[1] * x[1] + x[2] * x[2];
  double out;
  if (g > cut) return t * x[11];
  if (t > 0.0)
    out = t * x[3] + g;
  else
    out = t * x[4] - g;
  return out;
}

/* A cutoff: r2 decides, and only accepted pairs read it. */
static double pairs(const double *x) {
  double e = 0.0;
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) {
      double d = x[i] - x[j];
      double d2 = d * d;
      if (d2 > 1.5) continue;
      double inv = 1.0 / (d2 + 0.5);
      double inv3 = inv * inv * inv;
      e += inv3 * inv3 - inv3;
    }
  return e;
}

/* Reads the fused form cannot fold: the temporaries stay taped. */
static double unfoldable(const double *x, int flag) {
  double t1 = x[0] * x[5];
  double z = flag ? t1 : x[1];
  double t2 = x[2] * x[6];
  double y = twice(t2) * x[3];
  double t3 = x[4] * x[7];
  double m = x[8] * (double)(int)(t3 * 10.0);
  double t4 = x[9] * x[10];
  double s = SQ(t4) + x[11];
  return z + y + m * t3 + s;
}

/* Temporaries whose operands, all read by the return statement, are more
 * than one statement holds: each is then taped once, as one argument. */
static double wide(const double *x) {
  double a0 = x[0] * x[1] + x[2] * x[3], a1 = x[1] * x[2] + x[3] * x[4];
  double t0 = x[0] * x[1] + x[2] * x[3];
  double t1 = x[1] * x[2] + x[3] * x[4];
  double t2 = x[2] * x[3] + x[4] * x[5];
  double t3 = x[3] * x[4] + x[5] * x[6];
  double t4 = x[4] * x[5] + x[6] * x[7];
  double t5 = x[5] * x[6] + x[7] * x[8];
  double t6 = x[6] * x[7] + x[8] * x[9];
  double t7 = x[7] * x[8] + x[9] * x[10];
  double t8 = x[8] * x[9] + x[10] * x[11];
  double t9 = x[9] * x[10] + x[11] * x[0];
  double u0 = sin(x[0]) + cos(x[1]) + exp(0.1 * x[2]) + x[3];
  double u1 = sin(x[4]) + cos(x[5]) + exp(0.1 * x[6]) + x[7];
  double u2 = sin(x[8]) + cos(x[9]) + exp(0.1 * x[10]) + x[11];
  /* 72 distinct operands: more than one statement holds. */
  double w[72];
  for (int i = 0; i < 72; i++) w[i] = x[i % 12] * (1.0 + 0.01 * i);
  double v0 = w[0] * w[1] + w[2] * w[3] + w[4] * w[5] + w[6] * w[7];
  double v1 = w[8] * w[9] + w[10] * w[11] + w[12] * w[13] + w[14] * w[15];
  double v2 = w[16] * w[17] + w[18] * w[19] + w[20] * w[21] + w[22] * w[23];
  double v3 = w[24] * w[25] + w[26] * w[27] + w[28] * w[29] + w[30] * w[31];
  double v4 = w[32] * w[33] + w[34] * w[35] + w[36] * w[37] + w[38] * w[39];
  double v5 = w[40] * w[41] + w[42] * w[43] + w[44] * w[45] + w[46] * w[47];
  double v6 = w[48] * w[49] + w[50] * w[51] + w[52] * w[53] + w[54] * w[55];
  double v7 = w[56] * w[57] + w[58] * w[59] + w[60] * w[61] + w[62] * w[63];
  double v8 = w[64] * w[65] + w[66] * w[67] + w[68] * w[69] + w[70] * w[71];
  return a0 * a1 + t0 * t1 + t2 * t3 + t4 * t5 + t6 * t7 + t8 * t9 + u0 * u1 * u2 + v0 * v1 + v2 * v3 + v4 * v5 +
         v6 * v7 + v8 + v0 * v8;
}

/* A temporary of four operands read by several statements is taped once
 * (each reader then takes it as one argument); it is still compared. */
static double waist(double *u, const double *x) {
  const double m = x[0] * x[1] + x[2] * x[3];
  const double n = m * x[4];
  if (m > 100.0) return 0.0;
  u[0] = m * n;
  u[1] = m + n * x[5];
  return u[0] * u[1] + m;
}

/* Variables declared at the top of the function, as older C code declares
 * them, each assigned once in the loop's block and read after that in the
 * same block: temporaries from the assignment on. `d2` is only compared;
 * `rho` is read by two stores. `e` is assigned in the block that declares
 * it, `prev` is read before its assignment (the previous iteration's value),
 * `acc` is assigned twice and `out` is read after the loop: those four are
 * ordinary variables. */
static double assigned_later(double *u, const double *x) {
  double rho, vel, d2, e, prev, acc, out;
  int i;
  e = x[0] * x[1];
  prev = x[2];
  out = 0.0;
  for (i = 0; i < 5; i++) {
    d2 = x[i] * x[i] + x[i + 1] * x[i + 1];
    if (d2 > 4.0) continue;
    rho = x[i] * e + x[i + 2] * x[i + 2];
    vel = x[i + 1] / (1.0 + rho * rho);
    u[i] = rho * vel * vel + e * d2;
    u[i + 1] = u[i + 1] + rho * sin(vel) - prev * d2;
    prev = x[i + 3] * x[i + 4] + vel;
    acc = u[i] * x[i + 5];
    acc = acc * acc + x[i];
    out = out + acc * prev;
  }
  return out + prev * e;
}

double objective(double *x) {
  double u[6];
  for (int i = 0; i < 6; i++) u[i] = x[i] + 0.5 * x[i + 6];
  double J = chain(x);
  J += overwrite(u);
  J += reassigned(x);
  J += loop_carried(u, x);
  J += branches(x, 2.0) + branches(x, 100.0);
  J += pairs(x);
  J += unfoldable(x, 1) + unfoldable(x, 0);
  J += 1e-3 * wide(x);
  J += waist(u, x);
  J += assigned_later(u, x);
  for (int i = 0; i < 6; i++) J += 0.1 * u[i] * u[i];
  return J;
}

#define NX N
#define PROGRAM "blocks"
#include "corpus_main.c"
