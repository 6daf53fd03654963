/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * figure.h: self-explanatory figures for the examples, drawn with cairo
 * (Debian: libcairo2-dev; compile with ARIADNE_HAVE_CAIRO and link cairo).
 * A figure has a title, axes with labels and readable tick values, and as
 * needed a colour bar with its scale or a legend. The file's extension picks
 * the format: .png, .pdf or .svg. Copy it into your own program.
 *
 * A figure is drawn in steps:
 *
 *     figure f;
 *     figure_open(&f, "map.png", 640, 520, "title", "subtitle");
 *     figure_axes(&f, x0, x1, y0, y1, FIGURE_LINEAR, "column j", "row i");
 *     ... figure_raster, figure_polyline, figure_dot ...
 *     figure_colourbar(&f, vmax, "dJ/du0");   or   figure_legend(&f, ...);
 *     figure_close(&f);                        (writes the file: 0 or -1)
 *
 * Signed fields use the diverging colour map of sensitivity_image.h, centred
 * on zero: white at 0, red for positive values, blue for negative ones, on
 * the symmetric scale [-vmax, vmax] that the colour bar shows.
 */
#ifndef ARIADNE_FIGURE_H
#define ARIADNE_FIGURE_H

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sensitivity_image.h"

#define FIGURE_PI 3.14159265358979323846

enum { FIGURE_LINEAR = 0, FIGURE_LOG = 1 };
enum { FIGURE_LINE = 0, FIGURE_DOT = 1, FIGURE_PATCH = 2 }; /* legend entry kinds */

typedef struct figure {
  cairo_surface_t *surface;
  cairo_t *cr;
  char path[1024];
  int png;                        /* write the surface as PNG when closing */
  double w, h;                    /* page size (pixels, or points for PDF and SVG) */
  double left, right, top, bottom; /* the plot frame on the page */
  double x0, x1, y0, y1;          /* data coordinates at the frame's edges (x0 left, y0 bottom) */
  int ylog;
} figure;

static inline void figure__font(cairo_t *cr, double size, int bold) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

/* Text at (x, y), aligned by ax in [0, 1] (left .. right) and ay (top .. bottom,
 * as a fraction of the font's height), turned by angle radians. */
static inline void figure__text(cairo_t *cr, double x, double y, double ax, double ay, double angle, const char *s) {
  cairo_text_extents_t te;
  cairo_font_extents_t fe;
  cairo_text_extents(cr, s, &te);
  cairo_font_extents(cr, &fe);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  cairo_move_to(cr, -ax * te.x_advance, fe.ascent - ay * (fe.ascent + fe.descent));
  cairo_show_text(cr, s);
  cairo_restore(cr);
}

/* Page coordinates of data coordinates. */
static inline double figure_px(const figure *f, double x) { return f->left + (x - f->x0) / (f->x1 - f->x0) * (f->right - f->left); }
static inline double figure_py(const figure *f, double y) {
  double t = f->ylog ? (log10(y) - log10(f->y0)) / (log10(f->y1) - log10(f->y0)) : (y - f->y0) / (f->y1 - f->y0);
  return f->bottom - t * (f->bottom - f->top);
}

/* A page of w x h with the title (and a smaller subtitle, or NULL) on top;
 * the plot frame leaves room for the axes' labels and, on the right, for a
 * colour bar or legend. Returns 0, or -1 (unknown extension, no memory). */
static inline int figure_open(figure *f, const char *path, double w, double h, const char *title,
                              const char *subtitle) {
  memset(f, 0, sizeof *f);
  const char *ext = strrchr(path, '.');
  if (strlen(path) >= sizeof f->path) {
    fprintf(stderr, "figure: the file name '%s' is longer than %zu characters\n", path, sizeof f->path - 1);
    return -1;
  }
  snprintf(f->path, sizeof f->path, "%s", path);
  if (!ext) ext = "";
  if (strcmp(ext, ".png") == 0) {
    f->png = 1;
    f->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h);
  } else if (strcmp(ext, ".pdf") == 0) {
    f->surface = cairo_pdf_surface_create(path, w, h);
  } else if (strcmp(ext, ".svg") == 0) {
    f->surface = cairo_svg_surface_create(path, w, h);
  } else {
    fprintf(stderr, "figure: '%s': the file name must end in .png, .pdf or .svg\n", path);
    return -1;
  }
  if (cairo_surface_status(f->surface) != CAIRO_STATUS_SUCCESS) {
    fprintf(stderr, "figure: '%s': %s\n", path, cairo_status_to_string(cairo_surface_status(f->surface)));
    cairo_surface_destroy(f->surface);
    return -1;
  }
  f->cr = cairo_create(f->surface);
  f->w = w, f->h = h;
  cairo_set_source_rgb(f->cr, 1, 1, 1);
  cairo_paint(f->cr);
  cairo_set_source_rgb(f->cr, 0, 0, 0);
  figure__font(f->cr, 16, 1);
  figure__text(f->cr, w / 2, 10, 0.5, 0.0, 0.0, title);
  double top = 40;
  if (subtitle) {
    figure__font(f->cr, 12, 0);
    figure__text(f->cr, w / 2, 32, 0.5, 0.0, 0.0, subtitle);
    top = 58;
  }
  f->left = 78, f->right = w - 150, f->top = top, f->bottom = h - 66;
  return 0;
}

/* Tick positions for [lo, hi]: multiples of 1, 2 or 5 times a power of ten,
 * about `want` of them. Returns how many were written to t (at most max). */
static inline int figure__ticks(double lo, double hi, int want, double *t, int max) {
  if (hi < lo) {
    double s = lo;
    lo = hi, hi = s;
  }
  double raw = (hi - lo) / (want > 1 ? want - 1 : 1), mag = pow(10.0, floor(log10(raw))), step = mag;
  if (raw / mag >= 7.0) step = 10.0 * mag;
  else if (raw / mag >= 3.0) step = 5.0 * mag;
  else if (raw / mag >= 1.5) step = 2.0 * mag;
  int n = 0;
  for (double v = ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step && n < max; v += step)
    t[n++] = fabs(v) < 1e-12 * step ? 0.0 : v;
  return n;
}

static inline void figure__number(char *buf, size_t size, double v) {
  if (v != 0.0 && (fabs(v) >= 1e5 || fabs(v) < 1e-3))
    snprintf(buf, size, "%.3g", v);
  else
    snprintf(buf, size, "%.6g", v);
}

/* The frame, its axes and tick values, and the axes' labels. x runs from x0
 * (left) to x1, y from y0 (bottom) to y1 (top; y0 > y1 turns it upside down,
 * as for the rows of a matrix). FIGURE_LOG: a logarithmic y axis with a
 * tick at each power of ten (y0, y1 > 0). */
static inline void figure_axes(figure *f, double x0, double x1, double y0, double y1, int ylog, const char *xlabel,
                               const char *ylabel) {
  cairo_t *cr = f->cr;
  f->x0 = x0, f->x1 = x1, f->y0 = y0, f->y1 = y1, f->ylog = ylog;
  double t[64];
  char buf[32];
  figure__font(cr, 11, 0);
  cairo_set_line_width(cr, 1.0);
  int nx = figure__ticks(x0, x1, 6, t, 64);
  for (int k = 0; k < nx; k++) {
    double px = figure_px(f, t[k]);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, px, f->bottom);
    cairo_line_to(cr, px, f->bottom + 5);
    cairo_stroke(cr);
    figure__number(buf, sizeof buf, t[k]);
    figure__text(cr, px, f->bottom + 8, 0.5, 0.0, 0.0, buf);
  }
  int ny = 0;
  if (ylog) { /* each power of ten, and 2 and 5 times it over at most two decades */
    double lo = fmin(y0, y1), hi = fmax(y0, y1);
    int minor = log10(hi / lo) <= 2.0 + 1e-9;
    for (double d = floor(log10(lo)); d <= log10(hi) + 1e-9 && ny < 61; d++)
      for (int m = 1; m <= 5; m += m == 1 ? 1 : 3)
        if ((m == 1 || minor) && m * pow(10.0, d) >= lo * (1 - 1e-9) && m * pow(10.0, d) <= hi * (1 + 1e-9))
          t[ny++] = m * pow(10.0, d);
  } else {
    ny = figure__ticks(y0, y1, 6, t, 64);
  }
  for (int k = 0; k < ny; k++) {
    double py = figure_py(f, t[k]);
    cairo_set_source_rgb(cr, 0.85, 0.85, 0.85); /* a light grid line */
    cairo_move_to(cr, f->left, py);
    cairo_line_to(cr, f->right, py);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, f->left - 5, py);
    cairo_line_to(cr, f->left, py);
    cairo_stroke(cr);
    figure__number(buf, sizeof buf, t[k]);
    figure__text(cr, f->left - 8, py, 1.0, 0.5, 0.0, buf);
  }
  cairo_rectangle(cr, f->left, f->top, f->right - f->left, f->bottom - f->top);
  cairo_stroke(cr);
  figure__font(cr, 13, 0);
  figure__text(cr, (f->left + f->right) / 2, f->bottom + 26, 0.5, 0.0, 0.0, xlabel);
  figure__text(cr, 16, (f->top + f->bottom) / 2, 0.5, 0.0, -FIGURE_PI / 2, ylabel);
}

/* An nx x ny picture of RGB bytes, row by row, stretched over the data
 * rectangle from (ax, ay) to (bx, by): its first row lies at y = ay, its
 * first column at x = ax. Pixels stay sharp (no smoothing). */
static inline void figure_raster(figure *f, int nx, int ny, const unsigned char *rgb, double ax, double bx, double ay,
                                 double by) {
  cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, nx, ny);
  unsigned char *data = cairo_image_surface_get_data(img);
  int stride = cairo_image_surface_get_stride(img);
  cairo_surface_flush(img);
  for (int r = 0; r < ny; r++)
    for (int c = 0; c < nx; c++) {
      const unsigned char *p = rgb + 3 * ((size_t)r * nx + c);
      uint32_t px = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
      memcpy(data + (size_t)r * stride + 4 * (size_t)c, &px, 4);
    }
  cairo_surface_mark_dirty(img);
  cairo_t *cr = f->cr;
  double px0 = figure_px(f, ax), px1 = figure_px(f, bx), py0 = figure_py(f, ay), py1 = figure_py(f, by);
  cairo_save(cr);
  cairo_rectangle(cr, fmin(px0, px1), fmin(py0, py1), fabs(px1 - px0), fabs(py1 - py0));
  cairo_clip(cr);
  cairo_translate(cr, px0, py0);
  cairo_scale(cr, (px1 - px0) / nx, (py1 - py0) / ny);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_paint(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, f->left, f->top, f->right - f->left, f->bottom - f->top);
  cairo_stroke(cr);
}

/* A field of nx x ny values in the diverging map on [-vmax, vmax] (values
 * beyond saturate), cell (r, c) centred on data (c, r): the axes should run
 * from -0.5 to n - 0.5. */
static inline void figure_field(figure *f, int nx, int ny, const double *v, double vmax) {
  unsigned char *rgb = malloc((size_t)nx * ny * 3);
  if (!rgb) return;
  for (size_t k = 0; k < (size_t)nx * ny; k++) image_colour(image_symlog(v[k], vmax, 0.0), rgb + 3 * k);
  figure_raster(f, nx, ny, rgb, -0.5, nx - 0.5, -0.5, ny - 0.5);
  free(rgb);
}

static inline void figure_polyline(figure *f, int n, const double *x, const double *y, const double rgb[3],
                                   double width) {
  cairo_t *cr = f->cr;
  cairo_save(cr);
  cairo_rectangle(cr, f->left, f->top, f->right - f->left, f->bottom - f->top);
  cairo_clip(cr);
  cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width(cr, width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  for (int i = 0; i < n; i++) {
    if (i == 0)
      cairo_move_to(cr, figure_px(f, x[i]), figure_py(f, y[i]));
    else
      cairo_line_to(cr, figure_px(f, x[i]), figure_py(f, y[i]));
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

/* A dot of radius r (page units) with a dark outline. */
static inline void figure_dot(figure *f, double x, double y, double r, const double rgb[3]) {
  cairo_t *cr = f->cr;
  cairo_new_path(cr);
  cairo_arc(cr, figure_px(f, x), figure_py(f, y), r, 0, 2 * FIGURE_PI);
  cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 0.8);
  cairo_stroke(cr);
}

/* The colour bar of figure_field's map right of the frame: -vmax at the
 * bottom, 0 (white) in the middle, vmax at the top, with tick values and
 * the quantity's name. */
static inline void figure_colourbar(figure *f, double vmax, const char *label) {
  cairo_t *cr = f->cr;
  double bx = f->right + 22, bw = 18, by0 = f->bottom, by1 = f->top;
  int steps = 256;
  for (int k = 0; k < steps; k++) {
    unsigned char c[3];
    image_colour(-1.0 + 2.0 * (k + 0.5) / steps, c);
    cairo_set_source_rgb(cr, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
    double ya = by0 + (by1 - by0) * k / steps, yb = by0 + (by1 - by0) * (k + 1) / steps;
    cairo_rectangle(cr, bx, yb, bw, ya - yb + 0.5);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1.0);
  cairo_rectangle(cr, bx, by1, bw, by0 - by1);
  cairo_stroke(cr);
  double t[32];
  char buf[32];
  figure__font(cr, 11, 0);
  int n = figure__ticks(-vmax, vmax, 7, t, 32);
  for (int k = 0; k < n; k++) {
    double py = by0 + (by1 - by0) * (t[k] + vmax) / (2 * vmax);
    cairo_move_to(cr, bx + bw, py);
    cairo_line_to(cr, bx + bw + 4, py);
    cairo_stroke(cr);
    figure__number(buf, sizeof buf, t[k]);
    figure__text(cr, bx + bw + 7, py, 0.0, 0.5, 0.0, buf);
  }
  figure__font(cr, 13, 0);
  figure__text(cr, bx + bw + 62, (by0 + by1) / 2, 0.5, 1.0, -FIGURE_PI / 2, label);
}

/* A legend right of the frame, at its top: one entry per label, drawn as a
 * line, a dot or a patch of its colour. */
static inline void figure_legend(figure *f, int n, const char *const *labels, const int *kinds,
                                 const double (*rgb)[3]) {
  cairo_t *cr = f->cr;
  figure__font(cr, 11, 0);
  double x = f->right + 12, y = f->top + 4;
  for (int k = 0; k < n; k++, y += 20) {
    cairo_set_source_rgb(cr, rgb[k][0], rgb[k][1], rgb[k][2]);
    if (kinds[k] == FIGURE_LINE) {
      cairo_set_line_width(cr, 2.0);
      cairo_move_to(cr, x, y + 8);
      cairo_line_to(cr, x + 20, y + 8);
      cairo_stroke(cr);
    } else if (kinds[k] == FIGURE_DOT) {
      cairo_new_path(cr);
      cairo_arc(cr, x + 10, y + 8, 4, 0, 2 * FIGURE_PI);
      cairo_fill_preserve(cr);
      cairo_set_source_rgb(cr, 0, 0, 0);
      cairo_set_line_width(cr, 0.8);
      cairo_stroke(cr);
    } else {
      cairo_rectangle(cr, x + 2, y + 2, 16, 12);
      cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    figure__text(cr, x + 26, y + 8, 0.0, 0.5, 0.0, labels[k]);
  }
}

/* A line of small print under the frame's x label. */
static inline void figure_note(figure *f, const char *note) {
  figure__font(f->cr, 10, 0);
  cairo_set_source_rgb(f->cr, 0.3, 0.3, 0.3);
  figure__text(f->cr, f->w / 2, f->h - 18, 0.5, 0.0, 0.0, note);
  cairo_set_source_rgb(f->cr, 0, 0, 0);
}

/* Writes the file and frees the figure. Returns 0, or -1 if drawing or
 * writing failed. */
static inline int figure_close(figure *f) {
  cairo_status_t st = cairo_status(f->cr);
  cairo_destroy(f->cr);
  if (f->png && st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(f->surface, f->path);
  cairo_surface_finish(f->surface);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(f->surface);
  cairo_surface_destroy(f->surface);
  if (st != CAIRO_STATUS_SUCCESS) fprintf(stderr, "figure: '%s': %s\n", f->path, cairo_status_to_string(st));
  return st == CAIRO_STATUS_SUCCESS ? 0 : -1;
}

/* figure_map's page, and its frame for an n x n field on a page from
 * figure_open: square cells, cell (i, j) centred on data (j, i), row 0 at
 * the top. (A reader of the figure finds the cells with it.) */
enum { FIGURE_MAP_W = 640, FIGURE_MAP_H = 560 };
static inline void figure_map_frame(figure *f, int n) {
  double side = fmin(f->right - f->left, f->bottom - f->top);
  f->right = f->left + side, f->bottom = f->top + side;
  f->x0 = -0.5, f->x1 = n - 0.5, f->y0 = n - 0.5, f->y1 = -0.5, f->ylog = FIGURE_LINEAR;
}

/* The sensitivity map of an n x n field (row-major, row i of the grid drawn
 * as row i from the top) in the diverging map on [-vmax, vmax], with
 * column and row indices on the axes and the colour bar of `quantity`;
 * `note`, if not NULL, is printed under the figure (say what saturates).
 * Returns 0 or -1. */
static inline int figure_map(const char *path, int n, const double *v, double vmax, const char *title,
                             const char *subtitle, const char *quantity, const char *note) {
  figure f;
  if (figure_open(&f, path, FIGURE_MAP_W, FIGURE_MAP_H, title, subtitle) != 0) return -1;
  figure_map_frame(&f, n);
  figure_axes(&f, f.x0, f.x1, f.y0, f.y1, FIGURE_LINEAR, "column j", "row i");
  figure_field(&f, n, n, v, vmax);
  figure_colourbar(&f, vmax, quantity);
  if (note) figure_note(&f, note);
  return figure_close(&f);
}

/* figure_map for a field whose outermost cells are held fixed (the heat
 * examples): the colours span the interior, and the note under the figure
 * says how far the boundary exceeds them. */
static inline int figure_sensitivity_map(const char *path, int n, const double *v, const char *title,
                                         const char *subtitle, const char *quantity) {
  double top = image_interior_max(n, v), all = image_max_abs((size_t)n * n, v);
  char note[160] = "";
  if (all > top)
    snprintf(note, sizeof note, "Boundary cells (held fixed) reach |%s| = %.3g and saturate the colours.", quantity,
             all);
  return figure_map(path, n, v, top, title, subtitle, quantity, note[0] ? note : NULL);
}

#endif
