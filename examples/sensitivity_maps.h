/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sensitivity_maps.h: a sensitivity map dJ/du0 on an N x N grid written
 * where a heat example's command line asks for it: VTK image data, a PNG
 * picture (sensitivity_image.h) and a figure (figure.h, with cairo).
 */
#ifndef ARIADNE_SENSITIVITY_MAPS_H
#define ARIADNE_SENSITIVITY_MAPS_H

#include <stdio.h>

#include "sensitivity_image.h"
#ifdef ARIADNE_HAVE_CAIRO
#include "figure.h"
#endif

/* Writes the map g to each path that is not NULL: vtk (.vti), png, and fig
 * (a figure with the subtitle sub), and prints where each went. Returns the
 * number that failed; a format the program was built without counts as a
 * failure, and prog names the program in what it says. */
static inline int sensitivity_maps_write(const char *prog, int n, const double *g, const char *vtk, const char *png,
                                         const char *fig, const char *sub) {
  (void)prog, (void)sub; /* unused when a library is missing */
  int failures = 0;
  if (vtk) {
    int ok = image_write_vti(vtk, n, g, "dJ_du0") == 0;
    printf("sensitivity map dJ/du0 written to %s%s\n", vtk, ok ? "" : " FAILED");
    failures += !ok;
  }
  if (png) {
#ifdef ARIADNE_HAVE_PNG
    double top = image_interior_max(n, g);
    int ok = image_write_png(png, n, g, top, 0.0, "dJ/du0") == 0;
    printf("sensitivity map dJ/du0 written to %s (red > 0, blue < 0, linear up to %.3g)%s\n", png, top,
           ok ? "" : " FAILED");
    failures += !ok;
#else
    fprintf(stderr, "%s: built without libpng, no PNG written\n", prog);
    failures++;
#endif
  }
  if (fig) {
#ifdef ARIADNE_HAVE_CAIRO
    int ok = figure_sensitivity_map(fig, n, g, "Sensitivity of J to the initial state", sub, "dJ/du0") == 0;
    printf("sensitivity map dJ/du0 drawn in %s%s\n", fig, ok ? "" : " FAILED");
    failures += !ok;
#else
    fprintf(stderr, "%s: built without cairo, no figure drawn\n", prog);
    failures++;
#endif
  }
  return failures;
}

#endif
