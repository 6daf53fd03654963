/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef PROJECTILE_H
#define PROJECTILE_H
/* The inputs: launch speed (m/s), angle (radians), drag coefficient (1/m). */
#define PROJECTILE_INPUTS 3
double projectile_range(const double *p);
#endif
