/* SPDX-License-Identifier: BSD-3-Clause */
/* The sensitivity maps the heat examples write: the PNG decodes (libpng)
 * to an N x N RGB picture whose text chunks give its scale and whose pixels
 * are the colours of the values in the VTK file; the VTK file parses to N*N
 * values that hold the gradient: 2 u0 at the corners (which the stencil never
 * reads) and, at a few interior cells, central differences of a plain double
 * copy of the kernel.
 *
 * With cairo, the figure drawn to show the same map (examples/figure.h): a
 * page of FIGURE_MAP_W x FIGURE_MAP_H whose cell centres have the colours of
 * the values on the scale of the interior, with a colour bar from dark blue
 * to dark red; the same figure as PDF and SVG.
 *
 * Usage: test_images N T FILE.png FILE.vti [FIGURE.png SCRATCH.png [FIGURE.pdf FIGURE.svg]]
 * (SCRATCH.png: where the test may write a page of its own). */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/sensitivity_image.h"
#ifdef ARIADNE_HAVE_CAIRO
#include "../examples/figure.h"
#endif
#include "check.h"

static double kernel(int n, int steps, const double *u0) {
  size_t cells = (size_t)n * n;
  double *u = malloc(cells * sizeof *u), *v = malloc(cells * sizeof *v);
  memcpy(u, u0, cells * sizeof *u);
  memcpy(v, u0, cells * sizeof *v);
  for (int s = 0; s < steps; s++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) {
        int k = i * n + j;
        double x = u[k], lap = u[k - n] + u[k + n] + u[k - 1] + u[k + 1] - 4.0 * x;
        v[k] = x + 0.2 * lap + 0.1 * x * (1.0 - x) + 0.01 * sin(x);
      }
    double *w = u;
    u = v;
    v = w;
  }
  double J = 0.0;
  for (size_t k = 0; k < cells; k++) J += u[k] * u[k];
  free(u), free(v);
  return J;
}

static double *read_vti(const char *path, int n) {
  FILE *f = fopen(path, "r");
  if (!CHECK(f != NULL)) return NULL;
  static char text[1 << 22];
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = '\0';
  fclose(f);
  char extent[64];
  snprintf(extent, sizeof extent, "WholeExtent=\"0 %d 0 %d 0 0\"", n - 1, n - 1);
  CHECK_CONTAINS(text, extent);
  CHECK_CONTAINS(text, "<DataArray type=\"Float64\" Name=\"dJ_du0\" format=\"ascii\">");
  char *p = strstr(text, "format=\"ascii\">");
  if (!CHECK(p != NULL)) return NULL;
  p += strlen("format=\"ascii\">");
  double *v = malloc((size_t)n * n * sizeof *v);
  size_t k = 0;
  for (;;) {
    char *end;
    double x = strtod(p, &end);
    if (end == p) break;
    if (k < (size_t)n * n) v[k] = x;
    k++;
    p = end;
  }
  CHECK_INT(k, (long long)n * n);
  CHECK(strncmp(p + strspn(p, " \n"), "</DataArray>", 12) == 0);
  return v;
}

typedef struct png_read {
  FILE *f;
  png_structp png;
  png_infop info;
  png_bytepp rows;
  int w, h, depth, type;
  double max, decades;
  char quantity[64];
} png_read;

static int read_png_inner(png_read *r) {
  if (setjmp(png_jmpbuf(r->png))) return -1;
  png_init_io(r->png, r->f);
  png_read_png(r->png, r->info, PNG_TRANSFORM_IDENTITY, NULL);
  r->w = (int)png_get_image_width(r->png, r->info);
  r->h = (int)png_get_image_height(r->png, r->info);
  r->depth = png_get_bit_depth(r->png, r->info);
  r->type = png_get_color_type(r->png, r->info);
  r->rows = png_get_rows(r->png, r->info);
  png_textp text;
  int nt = 0;
  png_get_text(r->png, r->info, &text, &nt);
  r->max = r->decades = NAN;
  for (int k = 0; k < nt; k++) {
    if (strcmp(text[k].key, "ariadne:max") == 0) r->max = strtod(text[k].text, NULL);
    if (strcmp(text[k].key, "ariadne:decades") == 0) r->decades = strtod(text[k].text, NULL);
    if (strcmp(text[k].key, "ariadne:quantity") == 0) snprintf(r->quantity, sizeof r->quantity, "%s", text[k].text);
  }
  return 0;
}

#ifdef ARIADNE_HAVE_CAIRO
static int near(const unsigned char *got, const unsigned char want[3], int tol) {
  for (int k = 0; k < 3; k++)
    if (abs((int)got[k] - (int)want[k]) > tol) return 0;
  return 1;
}

/* The pixel (x, y) of an RGB24 cairo surface, as R, G, B. */
static void pixel(cairo_surface_t *s, int x, int y, unsigned char rgb[3]) {
  uint32_t px;
  memcpy(&px, cairo_image_surface_get_data(s) + (size_t)y * cairo_image_surface_get_stride(s) + 4 * (size_t)x, 4);
  rgb[0] = (unsigned char)(px >> 16), rgb[1] = (unsigned char)(px >> 8), rgb[2] = (unsigned char)px;
}

static void check_figure(int n, const double *g, double top, const char *png, const char *scratch, const char *pdf,
                         const char *svg) {
  CHECK_CONTEXT("figure");
  cairo_surface_t *s = cairo_image_surface_create_from_png(png);
  if (!CHECK(cairo_surface_status(s) == CAIRO_STATUS_SUCCESS)) return;
  CHECK_INT(cairo_image_surface_get_width(s), FIGURE_MAP_W);
  CHECK_INT(cairo_image_surface_get_height(s), FIGURE_MAP_H);
  cairo_surface_flush(s);
  /* Where the cells are: the frame of a page laid out as figure_map's (a
   * title and a subtitle). */
  figure f;
  CHECK_INT(figure_open(&f, scratch, FIGURE_MAP_W, FIGURE_MAP_H, "title", "subtitle"), 0);
  figure_map_frame(&f, n);
  int bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      unsigned char got[3], want[3];
      pixel(s, (int)floor(figure_px(&f, j)), (int)floor(figure_py(&f, i)), got);
      image_colour(image_symlog(g[(size_t)i * n + j], top, 0.0), want);
      bad += !near(got, want, 1);
    }
  CHECK_INT(bad, 0);
  /* The colour bar, right of the frame: both ends of the scale. */
  int red = 0, blue = 0;
  const unsigned char dark_red[3] = {180, 0, 0}, dark_blue[3] = {0, 0, 180};
  for (int x = (int)f.right + 1; x < FIGURE_MAP_W; x++)
    for (int y = (int)f.top; y < (int)f.bottom; y++) {
      unsigned char c[3];
      pixel(s, x, y, c);
      red += near(c, dark_red, 3), blue += near(c, dark_blue, 3);
    }
  CHECK(red > 0 && blue > 0);
  CHECK_INT(figure_close(&f), 0);
  cairo_surface_destroy(s);
  /* The other formats, by their first bytes. */
  if (!pdf) return;
  char head[64] = "";
  FILE *fp = fopen(pdf, "rb");
  if (CHECK(fp != NULL)) {
    CHECK(fread(head, 1, 5, fp) == 5 && memcmp(head, "%PDF-", 5) == 0);
    fclose(fp);
  }
  fp = fopen(svg, "r");
  if (CHECK(fp != NULL)) {
    size_t len = fread(head, 1, sizeof head - 1, fp);
    head[len] = '\0';
    CHECK_CONTAINS(head, "<?xml");
    fclose(fp);
  }
}
#endif

int main(int argc, char **argv) {
  if (argc != 5 && argc != 7 && argc != 9) {
    fprintf(stderr, "usage: %s N T FILE.png FILE.vti [FIGURE.png SCRATCH.png [FIGURE.pdf FIGURE.svg]]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[1]), steps = atoi(argv[2]);
  size_t cells = (size_t)n * n;
  double *u0 = malloc(cells * sizeof *u0);
  for (size_t k = 0; k < cells; k++) u0[k] = 0.5 + 0.4 * sin(0.37 * (double)k);

  CHECK_CONTEXT("vti");
  double *g = read_vti(argv[4], n);
  if (!g) return check_finish("test_images");
  size_t corners[4] = {0, (size_t)n - 1, cells - n, cells - 1};
  for (int c = 0; c < 4; c++) CHECK_CLOSE(g[corners[c]], 2.0 * u0[corners[c]], 1e-15);
  size_t inner[3] = {(size_t)n + 1, cells / 2 + (size_t)n / 2, cells - (size_t)n - 2};
  for (int c = 0; c < 3; c++) {
    size_t k = inner[c];
    double keep = u0[k], h = 1e-4;
    u0[k] = keep + h;
    double jp = kernel(n, steps, u0);
    u0[k] = keep - h;
    double jm = kernel(n, steps, u0);
    u0[k] = keep;
    CHECK_CLOSE2(g[k], (jp - jm) / (2.0 * h), 1e-6, 1e-9);
  }

  /* The colour scale: linear, up to the largest interior magnitude. */
  double top = 0.0;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) top = fmax(top, fabs(g[(size_t)i * n + j]));

  CHECK_CONTEXT("png");
  png_read r;
  memset(&r, 0, sizeof r);
  r.f = fopen(argv[3], "rb");
  if (CHECK(r.f != NULL)) {
    unsigned char sig[8];
    CHECK(fread(sig, 1, 8, r.f) == 8 && png_sig_cmp(sig, 0, 8) == 0);
    rewind(r.f);
    r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    r.info = png_create_info_struct(r.png);
    CHECK_INT(read_png_inner(&r), 0);
    CHECK_INT(r.w, n);
    CHECK_INT(r.h, n);
    CHECK_INT(r.depth, 8);
    CHECK_INT(r.type, PNG_COLOR_TYPE_RGB);
    CHECK_STR(r.quantity, "dJ/du0");
    CHECK_SAME(r.decades, 0.0);
    CHECK_CLOSE(r.max, top, 1e-15);
    /* every pixel is the colour of its value; corners saturate to dark red */
    int bad = 0;
    for (int i = 0; i < n && r.rows; i++)
      for (int j = 0; j < n; j++) {
        unsigned char want[3];
        image_colour(image_symlog(g[(size_t)i * n + j], r.max, 0.0), want);
        bad += memcmp(r.rows[i] + 3 * j, want, 3) != 0;
      }
    CHECK_INT(bad, 0);
    if (r.rows) {
      const unsigned char *c = r.rows[0];
      CHECK(c[0] == 180 && c[1] == 0 && c[2] == 0);
      /* an interior cell: positive, below the top, so a lighter red */
      const unsigned char *m = r.rows[n / 2] + 3 * (n / 2);
      CHECK(m[0] >= m[1] && m[1] == m[2]);
    }
    png_destroy_read_struct(&r.png, &r.info, NULL);
    fclose(r.f);
  }
  if (argc > 5) {
#ifdef ARIADNE_HAVE_CAIRO
    check_figure(n, g, top, argv[5], argv[6], argc > 7 ? argv[7] : NULL, argc > 8 ? argv[8] : NULL);
#else
    CHECK(!"figures given, but this test was built without cairo");
#endif
  }
  free(g), free(u0);
  return check_finish("test_images");
}
