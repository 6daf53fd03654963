/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne-port: ports double C code to Ariadne's ad_real through libclang.
 *
 * main.c reads the command line and the compile flags, rewrite.c analyses one
 * translation unit and produces the ported text, fused.c turns assignments
 * into one tape statement each (--fused).
 */
#ifndef ARIADNE_PORT_H
#define ARIADNE_PORT_H

#include <clang-c/Index.h>
#include <stddef.h>
#include <stdio.h>

/* A growable string. */
typedef struct port_str {
  char *s;
  size_t n, cap;
} port_str;
void port_str_add(port_str *b, const char *s);
void port_str_addn(port_str *b, const char *s, size_t n);
void port_str_addf(port_str *b, const char *fmt, ...);
char *port_str_take(port_str *b); /* the string (never NULL); b is empty afterwards */
char *port_strdup(const char *s);
char *port_strndup(const char *s, size_t n);

/* What --fused did: the assignments with two or more active operations and
 * how many became one statement; `file` (NULL: none) receives a line for
 * each one that stayed per operation, and why. */
typedef struct port_fuse_report {
  FILE *file;
  long candidates, fused;
  long preaccumulated; /* local temporaries not taped: their partials folded into their readers */
} port_fuse_report;

typedef struct port_options {
  int fused;
  int keep_going;
  int format;          /* run clang-format on changed lines when installed */
  const char **active; /* active type names */
  int nactive;
  const char *suffix; /* appended to the names of functions and globals defined here */
  char **ported;      /* functions defined in an input or named by --ported: their calls pass ad_real */
  int nported;
  int nported_given; /* how many of ported[] --ported named (first): the project is ported in several runs */
  char **globals;    /* variables with external linkage that an input defines (for --suffix) */
  int nglobals;
  int verbose;
  int all_active; /* --all-active: every double is ad_real, local timers and constants too */
  /* Decided for the whole run, so that every file sizes and stores requests
   * alike: an input posts a nonblocking call (or a matched receive) on active
   * data, so MPI_Request (MPI_Message) is ad_mpi_request (ad_mpi_message) in all. */
  int mpi_requests, mpi_messages;
  char **inputs; /* the real paths of the inputs */
  int ninputs;
  port_fuse_report *fuse; /* --fused: counts, and the --report file */
} port_options;

/* Port one file: parse `unit` (the file itself, or a file that includes
 * it) with `args`, write the ported text of `path` to *out (malloc'd) and the
 * changed lines as clang-format --lines options to *lines. Returns the number
 * of constructs reported as errors on stderr (0: *out is complete), or -1 if
 * the file could not be parsed. */
int port_file(const port_options *o, const char *unit, const char *path, const char *const *args, int nargs, char **out,
              char **lines);

/* Add the names of the functions `path` (parsed in `unit`) defines to
 * o->ported (the inputs are ported together, so calls between
 * them stay active), and note in o whether it makes requests or messages of
 * active data. Returns -1 if the file does not parse. */
int port_collect_functions(port_options *o, const char *unit, const char *path, const char *const *args, int nargs);

/* The files of the translation unit `unit`, the unit first: each file's real
 * path, whether it belongs to the unit's code (the unit and the .c files it
 * includes, unity builds) and then where its port goes, relative to the
 * output directory. Returns how many (*out malloc'd), 0 if it does not parse. */
typedef struct port_included {
  char *path;
  char *rel; /* NULL unless unity */
  int unity;
} port_included;
int port_unit_files(const char *unit, const char *const *args, int nargs, port_included **out);

/* Count `name` as a ported function (defined in an input, or ported by
 * another run of the tool: --ported). */
void port_add_ported(port_options *o, const char *name);

/* Did the types of the files ported so far use the i-th --active-type name?
 * A name none used (a typo, a macro such as `#define DTYPE double`) ported
 * nothing, which main reports. */
int port_active_type_seen(int i);

#endif
