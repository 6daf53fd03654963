/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sensitivity_image.h: write a field on an N x N grid (a gradient such as
 * dJ/du0) as a PNG picture and as VTK image data for ParaView. Used by the
 * heat examples; copy it into your own program.
 *
 * PNG (needs libpng: compile with ARIADNE_HAVE_PNG and link it): one pixel
 * per cell, grid row i is image row i, in a diverging colour map: red for
 * positive values, blue for negative ones, white for zero, on a linear scale
 * up to `vmax` (larger magnitudes saturate: useful when a few entries dwarf
 * the rest) or a symmetric logarithmic one over `decades` decades below vmax
 * (a gradient often spans many orders of magnitude). The scale is stored in
 * the file's text chunks ("ariadne:max" and "ariadne:decades", 0 = linear),
 * so the colours can be read back as values.
 *
 * VTK: an XML ImageData file (.vti) with the values as one Float64 point
 * array, exact to 17 digits; point (x, y) = (j, i) holds cell k = i N + j.
 */
#ifndef ARIADNE_SENSITIVITY_IMAGE_H
#define ARIADNE_SENSITIVITY_IMAGE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef ARIADNE_HAVE_PNG
#include <png.h>
#include <setjmp.h>
#endif

/* Position in [-1, 1] of value v on the symmetric log scale of largest
 * magnitude vmax over `decades` decades; decades <= 0: linear in v / vmax.
 * Values beyond vmax saturate. */
static inline double image_symlog(double v, double vmax, double decades) {
  if (!(vmax > 0.0) || v == 0.0) return 0.0;
  if (decades <= 0.0) return v >= vmax ? 1.0 : v <= -vmax ? -1.0 : v / vmax; /* linear */
  double floor_ = vmax * pow(10.0, -decades), a = fabs(v);
  double s = a <= floor_ ? 0.0 : log10(a / floor_) / decades;
  if (s > 1.0) s = 1.0;
  return v < 0.0 ? -s : s;
}

/* The colour of position s in [-1, 1]: white at 0, red (+1), blue (-1). */
static inline void image_colour(double s, unsigned char rgb[3]) {
  double a = fabs(s);
  unsigned char fade = (unsigned char)lround(255.0 * (1.0 - a)), dark = (unsigned char)lround(255.0 - 75.0 * a);
  if (s >= 0.0) {
    rgb[0] = dark, rgb[1] = fade, rgb[2] = fade;
  } else {
    rgb[0] = fade, rgb[1] = fade, rgb[2] = dark;
  }
}

static inline double image_max_abs(size_t count, const double *v) {
  double m = 0.0;
  for (size_t k = 0; k < count; k++) m = fmax(m, fabs(v[k]));
  return m;
}

/* The largest magnitude among the interior cells of the n x n field v (all
 * but the outermost rows and columns): the heat examples' boundary cells are
 * held fixed, and their derivatives (2 u0 at the corners) dwarf the
 * interior's, so the colour scale spans the interior and the boundary
 * saturates. */
static inline double image_interior_max(int n, const double *v) {
  double m = 0.0;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) m = fmax(m, fabs(v[(size_t)i * n + j]));
  return m;
}

/* Write the n x n field v (row-major) as a .vti file. Returns 0 or -1. */
static inline int image_write_vti(const char *path, int n, const double *v, const char *name) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "<?xml version=\"1.0\"?>\n<VTKFile type=\"ImageData\" version=\"0.1\" byte_order=\"LittleEndian\">\n");
  fprintf(f, "  <ImageData WholeExtent=\"0 %d 0 %d 0 0\" Origin=\"0 0 0\" Spacing=\"1 1 1\">\n", n - 1, n - 1);
  fprintf(f, "    <Piece Extent=\"0 %d 0 %d 0 0\">\n      <PointData Scalars=\"%s\">\n", n - 1, n - 1, name);
  fprintf(f, "        <DataArray type=\"Float64\" Name=\"%s\" format=\"ascii\">\n", name);
  for (int i = 0; i < n; i++) {
    fputs("         ", f);
    for (int j = 0; j < n; j++) fprintf(f, " %.17g", v[(size_t)i * n + j]);
    fputc('\n', f);
  }
  fprintf(f, "        </DataArray>\n      </PointData>\n      <CellData/>\n    </Piece>\n  </ImageData>\n</VTKFile>\n");
  return fclose(f) == 0 ? 0 : -1;
}

#ifdef ARIADNE_HAVE_PNG
/* libpng reports errors by longjmp: everything it may jump over lives in a
 * struct that is not touched after setjmp. */
typedef struct image__png {
  FILE *f;
  int n;
  const double *v;
  double top, decades;
  const char *what;
  unsigned char *row;
  png_structp png;
  png_infop info;
} image__png;

static int image__png_write(image__png *p) {
  if (setjmp(png_jmpbuf(p->png))) return -1;
  png_init_io(p->png, p->f);
  png_set_IHDR(p->png, p->info, (png_uint_32)p->n, (png_uint_32)p->n, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  char smax[64], sdec[32];
  snprintf(smax, sizeof smax, "%.17g", p->top);
  snprintf(sdec, sizeof sdec, "%.17g", p->decades > 0.0 ? p->decades : 0.0);
  png_text text[3];
  memset(text, 0, sizeof text);
  text[0].compression = text[1].compression = text[2].compression = PNG_TEXT_COMPRESSION_NONE;
  text[0].key = (png_charp) "ariadne:quantity";
  text[0].text = (png_charp)p->what;
  text[1].key = (png_charp) "ariadne:max";
  text[1].text = smax;
  text[2].key = (png_charp) "ariadne:decades";
  text[2].text = sdec;
  png_set_text(p->png, p->info, text, 3);
  png_write_info(p->png, p->info);
  for (int i = 0; i < p->n; i++) {
    for (int j = 0; j < p->n; j++)
      image_colour(image_symlog(p->v[(size_t)i * p->n + j], p->top, p->decades), p->row + 3 * j);
    png_write_row(p->png, p->row);
  }
  png_write_end(p->png, NULL);
  return 0;
}

/* Write the n x n field v as an RGB PNG (see above); vmax <= 0: the largest
 * magnitude in v. Returns 0 or -1. */
static inline int image_write_png(const char *path, int n, const double *v, double vmax, double decades,
                                  const char *what) {
  image__png p = {NULL, n, v, vmax > 0.0 ? vmax : image_max_abs((size_t)n * n, v), decades, what, NULL, NULL, NULL};
  p.f = fopen(path, "wb");
  if (!p.f) return -1;
  p.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  p.info = p.png ? png_create_info_struct(p.png) : NULL;
  p.row = malloc((size_t)n * 3);
  int rc = p.png && p.info && p.row ? image__png_write(&p) : -1;
  png_destroy_write_struct(&p.png, &p.info);
  free(p.row);
  if (fclose(p.f) != 0) rc = -1;
  return rc;
}
#endif

#endif
