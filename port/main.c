/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ariadne-port [--fused] [--all-active] [--active-type NAME]... -o OUTDIR FILE.c... [-- COMPILER-FLAGS...]
 *
 * Writes OUTDIR/<basename of FILE> for each input. Exit status: 0 when every
 * input was ported completely, 1 when something could not be ported (one
 * "file:line:col: error: ..." per construct on stderr, nothing written for
 * that file unless --keep-going), 2 for usage errors.
 */
#define _DEFAULT_SOURCE
#include <clang-c/CXCompilationDatabase.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "port.h"
#include "port_config.h"

#ifndef ARIADNE_PORT_INCLUDE_DIRS
#define ARIADNE_PORT_INCLUDE_DIRS ""
#endif
#ifndef ARIADNE_PORT_VERSION
#define ARIADNE_PORT_VERSION "0"
#endif

static void usage(FILE *f) {
  fprintf(f, "usage: ariadne-port [--fused] [--active-type NAME]... -o OUTDIR FILE.c... [-- COMPILER-FLAGS...]\n"
             "       ariadne-port [options] -p BUILD-DIR -o OUTDIR FILE.c...\n"
             "Ports double C code to Ariadne's ad_real; writes OUTDIR/<basename of FILE> for each input.\n"
             "Files given together (headers too) are ported as one code: calls between them pass ad_real.\n"
             "  -o OUTDIR            where the ported files go (created if missing)\n"
             "  --active-type NAME   a floating type that becomes ad_real (repeatable; default double);\n"
             "                       a typedef such as real_t keeps plain double passive\n"
             "  --fused              tape each assignment with an active right-hand side as one statement\n"
             "                       (partials computed in the generated code): the fast build\n"
             "  --all-active         every double becomes ad_real, also the local doubles no active\n"
             "                       value reaches (timers, constants), which otherwise stay double\n"
             "  --report FILE        with --fused: list each assignment left per operation, and why, and the\n"
             "                       temporaries preaccumulated\n"
             "  --suffix SUFFIX      append SUFFIX to the functions and globals the file defines, so that\n"
             "                       the primal and the port link into one program\n"
             "  -p BUILD-DIR         read each file's compiler flags from BUILD-DIR/compile_commands.json\n"
             "  --ported NAME        the function NAME is ported by another run: its calls pass ad_real\n"
             "                       (repeatable; functions the inputs define need not be named)\n"
             "  --ported-file FILE   the same for each name in FILE (one a line, # starts a comment)\n"
             "  --keep-going         write the output even when constructs were reported\n"
             "  --no-format          do not run clang-format on the changed lines\n"
             "  -- FLAGS...          the flags the files compile with (-I, -D, mpicc -show's flags)\n"
             "Exit status: 0 ported completely, 1 something could not be ported (file:line:col: error: ...\n"
             "on stderr), 2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "ariadne-port: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n");
  usage(stderr);
  return 2;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* mkdir -p */
static int mkdir_p(const char *dir) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
      *s = '/';
    }
  return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  ok &= fclose(f) == 0;
  return ok ? 0 : -1;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  port_str s = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) port_str_addn(&s, buf, n);
  fclose(f);
  return port_str_take(&s);
}

/* clang-format on the changed lines only, with the style of the input's
 * project; the output is kept unformatted if clang-format is missing or fails. */
static char *format(const char *input, const char *outdir, const char *text, const char *lines) {
  const char *cf = getenv("ARIADNE_PORT_CLANG_FORMAT");
  if (!cf || !cf[0]) cf = "clang-format";
  if (!lines[0]) return NULL;
  port_str cmd = {0};
  port_str_addf(&cmd, "command -v '%s' >/dev/null 2>&1", cf);
  char *c = port_str_take(&cmd);
  int have = system(c) == 0;
  free(c);
  if (!have) return NULL;
  char tmp_in[PATH_MAX], tmp_out[PATH_MAX];
  snprintf(tmp_in, sizeof tmp_in, "%s/.ariadne-port-%ld.in.c", outdir, (long)getpid());
  snprintf(tmp_out, sizeof tmp_out, "%s/.ariadne-port-%ld.out.c", outdir, (long)getpid());
  if (write_file(tmp_in, text) < 0) return NULL;
  char abs_in[PATH_MAX];
  if (!realpath(input, abs_in)) snprintf(abs_in, sizeof abs_in, "%s", input);
  /* The project's style if it has one, else a wide LLVM style that keeps
   * short statements on their lines. */
  const char *style = "{BasedOnStyle: LLVM, ColumnLimit: 120, AllowShortIfStatementsOnASingleLine: WithoutElse, "
                      "AllowShortLoopsOnASingleLine: true}";
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", abs_in);
  for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
    *slash = 0;
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.clang-format", dir);
    int found = access(probe, R_OK) == 0;
    snprintf(probe, sizeof probe, "%s/_clang-format", dir);
    found |= access(probe, R_OK) == 0;
    if (found) {
      style = "file";
      break;
    }
  }
  port_str_addf(&cmd, "'%s' '--style=%s' '--assume-filename=%s'%s < '%s' > '%s' 2>/dev/null", cf, style, abs_in, lines,
                tmp_in, tmp_out);
  c = port_str_take(&cmd);
  int rc = system(c);
  free(c);
  char *r = rc == 0 ? read_file(tmp_out) : NULL;
  remove(tmp_in);
  remove(tmp_out);
  if (r && !r[0]) {
    free(r);
    r = NULL;
  }
  return r;
}

/* Does the compiler flag f take the next word as its value (`-I dir`)? */
static int flag_takes_value(const char *f) {
  static const char *const with_value[] = {
      "-I",  "-D",  "-U",      "-include", "-imacros", "-isystem",  "-iquote",   "-idirafter", "-x", "-o", "-MF",
      "-MT", "-MQ", "-Xclang", "-Xlinker", "-target",  "--sysroot", "-isysroot", "-arch",      "-L", "-l", NULL};
  for (int i = 0; with_value[i]; i++)
    if (!strcmp(f, with_value[i])) return 1;
  return 0;
}

/* The flags of `file` in a compilation database, without the compiler, the
 * output and the file itself. */
/* --ported-file: one function name a line; blank lines and # comments are
 * skipped. Returns -1 if the file cannot be read or a line is not a name. */
static int read_ported(port_options *o, const char *path) {
  char *text = read_file(path);
  if (!text) return -1;
  int rc = 0;
  for (char *line = strtok(text, "\n"); line && rc == 0; line = strtok(NULL, "\n")) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *b = line, *e = line + strlen(line);
    while (*b == ' ' || *b == '\t' || *b == '\r') b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    *e = 0;
    if (!*b) continue;
    for (const char *c = b; *c && rc == 0; c++)
      if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) rc = -1;
    if (rc == 0) port_add_ported(o, b);
  }
  free(text);
  return rc;
}

static int db_flags(CXCompilationDatabase db, const char *file, char ***out, int *nout) {
  char abs_path[PATH_MAX];
  if (!realpath(file, abs_path)) snprintf(abs_path, sizeof abs_path, "%s", file);
  CXCompileCommands cmds = clang_CompilationDatabase_getCompileCommands(db, abs_path);
  if (!cmds || clang_CompileCommands_getSize(cmds) == 0) {
    if (cmds) clang_CompileCommands_dispose(cmds);
    return -1;
  }
  CXCompileCommand cmd = clang_CompileCommands_getCommand(cmds, 0);
  unsigned n = clang_CompileCommand_getNumArgs(cmd);
  char **a = calloc((size_t)n + 3, sizeof *a);
  int m = 0;
  CXString dir = clang_CompileCommand_getDirectory(cmd);
  a[m++] = port_strdup("-working-directory");
  a[m++] = port_strdup(clang_getCString(dir));
  clang_disposeString(dir);
  CXString fname = clang_CompileCommand_getFilename(cmd);
  const char *fn = clang_getCString(fname);
  for (unsigned i = 1; i < n; i++) {
    CXString s = clang_CompileCommand_getArg(cmd, i);
    const char *t = clang_getCString(s);
    int skip_next = !strcmp(t, "-o") || !strcmp(t, "-MF") || !strcmp(t, "-MT") || !strcmp(t, "-MQ");
    int skip = skip_next || !strcmp(t, "-c") || !strcmp(t, "-MD") || !strcmp(t, "-MMD") || !strcmp(t, fn) ||
               !strcmp(base_name(t), base_name(fn));
    if (!skip) a[m++] = port_strdup(t);
    clang_disposeString(s);
    if (skip_next) i++;
  }
  clang_disposeString(fname);
  clang_CompileCommands_dispose(cmds);
  *out = a;
  *nout = m;
  return 0;
}

int main(int argc, char **argv) {
  port_options o;
  memset(&o, 0, sizeof o);
  o.format = 1;
  const char **active = calloc((size_t)argc + 1, sizeof *active);
  const char **files = calloc((size_t)argc + 1, sizeof *files);
  int nfiles = 0;
  const char *outdir = NULL, *builddir = NULL, *report = NULL;
  port_fuse_report fuse = {0};
  int flags_at = argc;
  o.active = active;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      flags_at = i + 1;
      break;
    } else if (!strcmp(a, "--fused")) {
      o.fused = 1;
    } else if (!strcmp(a, "--all-active")) {
      o.all_active = 1;
    } else if (!strcmp(a, "--keep-going")) {
      o.keep_going = 1;
    } else if (!strcmp(a, "--no-format")) {
      o.format = 0;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--version")) {
      printf("ariadne-port %s\n", ARIADNE_PORT_VERSION);
      return 0;
    } else if (!strncmp(a, "--active-type=", 14)) {
      if (!a[14]) return usage_error("%s: empty type name", a);
      active[o.nactive++] = a + 14;
    } else if (!strncmp(a, "--suffix=", 9)) {
      o.suffix = a + 9;
    } else if (!strcmp(a, "--active-type") || !strcmp(a, "-o") || !strcmp(a, "-p") || !strcmp(a, "--suffix") ||
               !strcmp(a, "--report") || !strcmp(a, "--ported") || !strcmp(a, "--ported-file")) {
      if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("%s needs an argument", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--ported"))
        port_add_ported(&o, v);
      else if (!strcmp(a, "--ported-file")) {
        if (read_ported(&o, v) < 0)
          return usage_error("--ported-file %s: cannot be read, or a line is not a function name", v);
      } else if (!strcmp(a, "--active-type"))
        active[o.nactive++] = v;
      else if (!strcmp(a, "-o"))
        outdir = v;
      else if (!strcmp(a, "-p"))
        builddir = v;
      else if (!strcmp(a, "--report"))
        report = v;
      else
        o.suffix = v;
    } else if (a[0] == '-') {
      return usage_error("unknown option %s", a);
    } else {
      files[nfiles++] = a;
    }
  }
  if (!outdir) return usage_error("%s", "missing -o OUTDIR");
  if (report && !o.fused) return usage_error("%s", "--report lists what --fused left per operation: give --fused");
  if (report) {
    fuse.file = fopen(report, "w");
    if (!fuse.file) {
      fprintf(stderr, "ariadne-port: cannot write %s: %s\n", report, strerror(errno));
      return 2;
    }
  }
  if (o.fused) o.fuse = &fuse;
  if (nfiles == 0) return usage_error("%s", "no input files");
  if (o.nactive == 0) active[o.nactive++] = "double";
  for (int i = 0; i < o.nactive; i++) {
    const char *t = active[i];
    for (const char *p = t; *p; p++)
      if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
        return usage_error("--active-type %s: not a type name", t);
    if (!strcmp(t, "float") || !strcmp(t, "long"))
      return usage_error("--active-type %s: Ariadne differentiates double (and typedefs of it)", t);
  }
  for (int i = 0; i < nfiles; i++) {
    if (access(files[i], R_OK) != 0) return usage_error("cannot read %s", files[i]);
    for (int j = 0; j < i; j++)
      if (!strcmp(base_name(files[i]), base_name(files[j])))
        return usage_error("two inputs share the name %s, which would be written twice", base_name(files[i]));
  }
  if (mkdir_p(outdir) != 0) {
    fprintf(stderr, "ariadne-port: cannot create %s: %s\n", outdir, strerror(errno));
    return 2;
  }

  CXCompilationDatabase db = NULL;
  if (builddir) {
    CXCompilationDatabase_Error err;
    db = clang_CompilationDatabase_fromDirectory(builddir, &err);
    if (err != CXCompilationDatabase_NoError || !db)
      return usage_error("-p %s: no compile_commands.json there (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)",
                         builddir);
  }

  /* Ariadne's headers, so that a file that already includes ariadne.h parses. */
  char incs[4][PATH_MAX + 32];
  int nincs = 0;
  {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = 0;
      char *s = strrchr(exe, '/');
      if (s) {
        *s = 0;
        snprintf(incs[nincs++], sizeof incs[0], "-I%s/../include", exe);
      }
    }
    char dirs[4 * PATH_MAX];
    snprintf(dirs, sizeof dirs, "%s", ARIADNE_PORT_INCLUDE_DIRS);
    for (char *d = strtok(dirs, ";"); d && nincs < 4; d = strtok(NULL, ";"))
      snprintf(incs[nincs++], sizeof incs[0], "-I%s", d);
  }

  /* The flags of each file: from the database, then after --, then Ariadne's headers. */
  const char ***fargs = calloc((size_t)nfiles, sizeof *fargs);
  int *fnargs = calloc((size_t)nfiles, sizeof *fnargs);
  char ***dbargs = calloc((size_t)nfiles, sizeof *dbargs);
  int *ndb = calloc((size_t)nfiles, sizeof *ndb);
  int status = 0;
  for (int f = 0; f < nfiles; f++) {
    if (db && db_flags(db, files[f], &dbargs[f], &ndb[f]) < 0) {
      fprintf(stderr, "%s:1:1: error: not in %s/compile_commands.json; pass its flags after -- instead\n", files[f],
              builddir);
      status = 1;
      fnargs[f] = -1;
      continue;
    }
    int nargs = 0;
    const char **args = calloc((size_t)(ndb[f] + (argc - flags_at) + nincs + 4), sizeof *args);
    args[nargs++] = "-xc";
    for (int i = 0; i < ndb[f]; i++) args[nargs++] = dbargs[f][i];
    for (int i = flags_at; i < argc; i++) {
      /* `mpicc -show` names the compiler and links, wherever it stands among
       * the flags: a word that is neither a flag nor a flag's value is the
       * compiler (or a file to link), and links are no flags for parsing. */
      if (argv[i][0] != '-' && !(i > flags_at && flag_takes_value(argv[i - 1]))) continue;
      if (!strncmp(argv[i], "-l", 2) || !strncmp(argv[i], "-L", 2) || !strncmp(argv[i], "-Wl,", 4)) {
        if (!strcmp(argv[i], "-L") || !strcmp(argv[i], "-l")) i++;
        continue;
      }
      args[nargs++] = argv[i];
    }
    for (int i = 0; i < nincs; i++) args[nargs++] = incs[i];
    args[nargs++] = "-Wno-everything";
    fargs[f] = args;
    fnargs[f] = nargs;
  }
  /* What is ported, and in which unit (the file parsed): each input in its
   * own, except a header or .c file that an input .c includes, which is
   * ported in that file's unit (it need not be self-contained), plus the .c
   * files the inputs include (unity builds), written where the ported
   * includer's #include finds them. */
  o.inputs = calloc((size_t)nfiles, sizeof *o.inputs);
  for (int f = 0; f < nfiles; f++) {
    char real[PATH_MAX];
    if (realpath(files[f], real)) o.inputs[o.ninputs++] = port_strdup(real);
  }
  port_included **inc = calloc((size_t)nfiles, sizeof *inc);
  int *ninc = calloc((size_t)nfiles, sizeof *ninc);
  int *unit_of = calloc((size_t)nfiles, sizeof *unit_of);
  const char **rel_of = calloc((size_t)nfiles, sizeof *rel_of);
  for (int f = 0; f < nfiles; f++) {
    size_t l = strlen(files[f]);
    if (fnargs[f] >= 0 && l > 2 && !strcmp(files[f] + l - 2, ".c"))
      ninc[f] = port_unit_files(files[f], fargs[f], fnargs[f], &inc[f]);
  }
  for (int f = 0; f < nfiles; f++) {
    unit_of[f] = f;
    rel_of[f] = base_name(files[f]);
    char real[PATH_MAX];
    if (!realpath(files[f], real)) continue;
    for (int g = 0; g < nfiles && unit_of[f] == f; g++)
      for (int i = 1; g != f && i < ninc[g]; i++)
        if (!strcmp(inc[g][i].path, real)) {
          unit_of[f] = g;
          if (inc[g][i].unity) rel_of[f] = inc[g][i].rel;
          break;
        }
  }
  typedef struct job {
    int unit;
    const char *path, *rel;
  } job;
  job *jobs = calloc((size_t)nfiles + 1, sizeof *jobs);
  int njobs = 0, capjobs = nfiles + 1;
  for (int f = 0; f < nfiles; f++)
    if (fnargs[f] >= 0 && fnargs[unit_of[f]] >= 0) jobs[njobs++] = (job){unit_of[f], files[f], rel_of[f]};
  for (int g = 0; g < nfiles; g++) {
    if (unit_of[g] != g) continue;
    for (int i = 1; i < ninc[g]; i++) {
      if (!inc[g][i].unity) continue;
      int input = 0;
      for (int f = 0; f < nfiles && !input; f++) {
        char real[PATH_MAX];
        input = realpath(files[f], real) && !strcmp(real, inc[g][i].path);
      }
      if (input) continue;
      if (njobs == capjobs) {
        capjobs *= 2;
        jobs = realloc(jobs, (size_t)capjobs * sizeof *jobs);
        if (!jobs) return 2;
      }
      jobs[njobs++] = (job){g, inc[g][i].path, inc[g][i].rel};
    }
  }
  /* Inputs ported together: calls from one to another pass ad_real. A unit
   * that does not parse is reported once, here, and not parsed again. */
  char *unit_bad = calloc((size_t)nfiles, 1);
  o.nported_given = o.nported; /* --ported names come first */
  if (njobs > 1)
    for (int j = 0; j < njobs; j++) {
      int u = jobs[j].unit;
      if (!unit_bad[u] && port_collect_functions(&o, files[u], jobs[j].path, fargs[u], fnargs[u]) < 0) {
        status = 1;
        unit_bad[u] = 1;
      }
    }

  for (int j = 0; j < njobs; j++) {
    int u = jobs[j].unit;
    if (unit_bad[u]) continue;
    char *out = NULL, *lines = NULL;
    long cand0 = fuse.candidates, fused0 = fuse.fused, pre0 = fuse.preaccumulated;
    int rc = port_file(&o, files[u], jobs[j].path, fargs[u], fnargs[u], &out, &lines);
    if ((rc == 0 || (rc > 0 && o.keep_going)) && fuse.preaccumulated > pre0)
      fprintf(stderr, "ariadne-port: %s: %ld local temporaries preaccumulated, not taped (%s)\n", jobs[j].path,
              fuse.preaccumulated - pre0, report ? report : "--report FILE lists them");
    if ((rc == 0 || (rc > 0 && o.keep_going)) && fuse.candidates > cand0) {
      long n = fuse.candidates - cand0, k = fuse.fused - fused0;
      fprintf(stderr, "ariadne-port: %s: %ld of %ld assignments with two or more active operations fused",
              jobs[j].path, k, n);
      if (k < n)
        fprintf(stderr, "; %ld %s per operation (%s)", n - k, n - k == 1 ? "stays" : "stay",
                report ? report : "--report FILE lists them");
      fputc('\n', stderr);
    }
    if (rc != 0) status = 1;
    if (rc < 0 || (rc > 0 && !o.keep_going) || !out) {
      free(out);
      free(lines);
      continue;
    }
    if (o.format && out) {
      char *fmt = format(jobs[j].path, outdir, out, lines);
      if (fmt) {
        free(out);
        out = fmt;
      }
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", outdir, jobs[j].rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    int made = mkdir_p(path);
    *slash = '/';
    if (made < 0 || write_file(path, out) < 0) {
      fprintf(stderr, "ariadne-port: cannot write %s: %s\n", path, strerror(errno));
      status = 1;
    }
    free(out);
    free(lines);
  }
  for (int i = 0; i < o.nactive && status == 0; i++)
    if (strcmp(o.active[i], "double") && !port_active_type_seen(i)) {
      fprintf(stderr,
              "ariadne-port: error: --active-type %s: no type of that name is used by the inputs, so nothing of "
              "it was ported; name a typedef of double (a macro such as #define %s double is no type: without "
              "--active-type, double is active and the declarations spelled %s are ported; to make only those "
              "active, write typedef double %s; instead)\n",
              o.active[i], o.active[i], o.active[i], o.active[i]);
      status = 1;
    }
  if (fuse.file && fclose(fuse.file) != 0) {
    fprintf(stderr, "ariadne-port: cannot write %s: %s\n", report, strerror(errno));
    status = 1;
  }
  for (int f = 0; f < nfiles; f++) {
    for (int i = 0; i < ndb[f]; i++) free(dbargs[f][i]);
    free(dbargs[f]);
    free(fargs[f]);
    for (int i = 0; i < ninc[f]; i++) {
      free(inc[f][i].path);
      free(inc[f][i].rel);
    }
    free(inc[f]);
  }
  free(inc);
  free(ninc);
  free(unit_of);
  free(rel_of);
  free(jobs);
  free(unit_bad);
  for (int i = 0; i < o.ninputs; i++) free(o.inputs[i]);
  free(o.inputs);
  if (db) clang_CompilationDatabase_dispose(db);
  for (int i = 0; i < o.nported; i++) free(o.ported[i]);
  free(o.ported);
  for (int i = 0; i < o.nglobals; i++) free(o.globals[i]);
  free(o.globals);
  free(fargs);
  free(fnargs);
  free(dbargs);
  free(ndb);
  free(active);
  free(files);
  return status;
}
