/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heat_example.h: what the two heat examples (heat_gradient.c, heat_mpi.c)
 * share: the cell update of the model on ad_real, and the sensitivity map
 * dJ/du0 written where the command line asks for it: VTK image data, a PNG
 * picture (sensitivity_image.h) and a figure (figure.h, with cairo).
 */
#ifndef ARIADNE_HEAT_EXAMPLE_H
#define ARIADNE_HEAT_EXAMPLE_H

#include <ariadne.h>
#include <stdio.h>
#include <string.h>

#include "sensitivity_image.h"
#ifdef ARIADNE_HAVE_CAIRO
#include "figure.h"
#endif

static const double C = 0.2, DT = 0.1;

/* The new value of the interior cell k of a grid n cells wide, from u. Its
 * dozen operations are one tape statement with five arguments (the cell and
 * its four neighbours): everything between ad_stmt_begin and ad_stmt_end is
 * preaccumulated. */
static inline ad_real heat_cell(const ad_real *u, int k, int n) {
  ad_stmt_begin();
  ad_real x = u[k];
  ad_real lap = ad_sub(ad_add(ad_add(u[k - n], u[k + n]), ad_add(u[k - 1], u[k + 1])), ad_mul(4.0, x));
  ad_real react = ad_add(ad_mul(DT, ad_mul(x, ad_sub(1.0, x))), ad_mul(0.01, ad_sin(x)));
  return ad_stmt_end(ad_add(ad_add(x, ad_mul(C, lap)), react));
}

/* The interior cells of the grid row that starts at u[row], new values into
 * v; the row's first and last cells are boundary and stay as they were. */
static inline void heat_row(const ad_real *u, ad_real *v, int row, int n) {
  for (int k = row + 1; k < row + n - 1; k++) v[k] = heat_cell(u, k, n);
}

/* One step's new state becomes the old one. */
static inline void heat_swap(ad_real **u, ad_real **v) {
  ad_real *w = *u;
  *u = *v;
  *v = w;
}

/* The heat examples' command line, [N T] [--png FILE] [--vtk FILE]
 * [--figure FILE]: the files asked for (NULL otherwise) and the positional
 * arguments in pos. Returns how many of those there are (0 or 2), or -1 for
 * a command line of another form. */
static inline int heat_args(int argc, char **argv, const char **png, const char **vtk, const char **fig,
                            const char *pos[2]) {
  int npos = 0;
  *png = *vtk = *fig = NULL;
  for (int a = 1; a < argc; a++) {
    if ((strcmp(argv[a], "--png") == 0 || strcmp(argv[a], "--vtk") == 0 || strcmp(argv[a], "--figure") == 0) &&
        a + 1 < argc) {
      *(argv[a][2] == 'p' ? png : argv[a][2] == 'v' ? vtk : fig) = argv[a + 1];
      a++;
    } else if (argv[a][0] != '-' && npos < 2) {
      pos[npos++] = argv[a];
    } else {
      return -1;
    }
  }
  return npos == 0 || npos == 2 ? npos : -1;
}

/* Writes the map g to each path that is not NULL: vtk (.vti), png, and fig
 * (a figure with the subtitle sub), and prints where each went. Returns the
 * number that failed; a format the program was built without counts as a
 * failure, and prog names the program in what it says. */
static inline int heat_maps_write(const char *prog, int n, const double *g, const char *vtk, const char *png,
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
