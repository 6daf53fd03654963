/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the benchmark drivers share: clocks, peak memory, the options every
 * driver of several variants takes, a variant run in a process of its own,
 * and the JSON lines the drivers print. Plain C, static inline: each driver
 * is one program. POSIX: define _DEFAULT_SOURCE before any #include.
 */
#ifndef ARIADNE_BENCH_H
#define ARIADNE_BENCH_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Wall-clock seconds. */
static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Processor time of this process. The machines these figures come from are
 * shared, often with more runnable processes than cores: wall-clock times
 * then include the time other processes ran, which varies between
 * variants, while processor time does not. */
static inline double bench_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The peak resident memory of this process so far, in MB. */
static inline double bench_maxrss_mb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0; /* Linux reports kilobytes */
}

/* The options of a driver that runs several variants. */
typedef struct bench_options {
  int n, steps, reps, fork, verbose;
  const char *only; /* comma-separated variant names, or NULL for all */
} bench_options;

/* Takes argv[*a] (and its value, advancing *a) if it is one of the options
 * every driver has: --N, --T, --reps, --only, --no-fork, --verbose (one dash
 * or none also do). *name is the option without its dashes, for the
 * driver's own options. Returns 1 if it took the option. */
static inline int bench_option(bench_options *o, int argc, char **argv, int *a, const char **name) {
  const char *arg = argv[*a];
  if (!strncmp(arg, "--", 2))
    arg += 2;
  else if (arg[0] == '-')
    arg += 1;
  *name = arg;
  int value = *a + 1 < argc;
  if (!strcmp(arg, "no-fork"))
    o->fork = 0;
  else if (!strcmp(arg, "verbose") || !strcmp(arg, "v"))
    o->verbose = 1;
  else if (value && (!strcmp(arg, "N") || !strcmp(arg, "n")))
    o->n = atoi(argv[++*a]);
  else if (value && (!strcmp(arg, "T") || !strcmp(arg, "t")))
    o->steps = atoi(argv[++*a]);
  else if (value && !strcmp(arg, "reps"))
    o->reps = atoi(argv[++*a]);
  else if (value && !strcmp(arg, "only"))
    o->only = argv[++*a];
  else
    return 0;
  return 1;
}

/* 1 if the options allow a run: a grid of 3 to 8192 points a side, a step
 * and a repetition at least; otherwise says so, naming the program. */
static inline int bench_options_valid(const bench_options *o, const char *prog) {
  if (o->n >= 3 && o->n <= 8192 && o->steps >= 1 && o->reps >= 1) return 1;
  fprintf(stderr, "%s: need N >= 3 (and <= 8192), T >= 1, reps >= 1\n", prog);
  return 0;
}

/* 1 if the variant `name` is to run. */
static inline int bench_selected(const bench_options *o, const char *name) {
  if (!o->only) return 1;
  size_t len = strlen(name);
  for (const char *p = o->only; *p;) {
    const char *q = strchr(p, ',');
    size_t l = q ? (size_t)(q - p) : strlen(p);
    if (l == len && strncmp(p, name, len) == 0) return 1;
    if (!q) break;
    p = q + 1;
  }
  return 0;
}

/* The memory the variants' processes share with the driver, where they
 * leave their results: nvar slots of slot_bytes each, then each variant's
 * gradient of nn values (*grads); *bytes for munmap. NULL, said on stderr
 * naming prog, if there is none to be had. */
static inline void *bench_shared(const char *prog, size_t slot_bytes, int nvar, size_t nn, double **grads,
                                 size_t *bytes) {
  *bytes = (size_t)nvar * (slot_bytes + nn * sizeof(double));
  char *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "%s: out of memory\n", prog);
    return NULL;
  }
  *grads = (double *)(void *)(p + (size_t)nvar * slot_bytes);
  return p;
}

/* A variant runs in a process of its own when `fork_it` (its peak memory is
 * then its own, and a crash takes only that variant), else in this one:
 *
 *   pid_t pid = bench_spawn("heat", o.fork);
 *   if (pid < 0) return 1;
 *   if (pid == 0) { run the variant, set done in shared memory; bench_child_exit(o.fork); }
 *   if (bench_reap(pid, &done, msg, sizeof msg)) the variant's process died;
 *
 * bench_spawn returns the child's pid in the driver, 0 where the variant is
 * to run, and -1 when no process could be made (said on stderr). */
static inline pid_t bench_spawn(const char *prog, int fork_it) {
  fflush(stdout);
  if (!fork_it) return 0;
  pid_t pid = fork();
  if (pid < 0) fprintf(stderr, "%s: fork failed: %s\n", prog, strerror(errno));
  return pid;
}

/* The end of a variant's run: its process ends, if it has one of its own. */
static inline void bench_child_exit(int fork_it) {
  if (fork_it) _exit(0);
}

/* Waits for the variant's process (none when pid is 0). Returns 0 if the
 * variant set *done; 1 if its process died first, with why in msg. */
static inline int bench_reap(pid_t pid, const int *done, char *msg, size_t size) {
  int status = 0;
  if (pid > 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  if (*(const volatile int *)done) return 0;
  snprintf(msg, size, "the variant's process died (%s %d)", WIFSIGNALED(status) ? "signal" : "exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  return 1;
}

/* "key":value, null for a value JSON cannot hold. */
static inline void bench_json_num(const char *key, double x) {
  if (isfinite(x))
    printf("\"%s\":%.12g", key, x);
  else
    printf("\"%s\":null", key);
}

/* "key":"str". Messages come from libraries; the JSON stays valid whatever
 * they hold. */
static inline void bench_json_str(const char *key, const char *str) {
  printf("\"%s\":\"", key);
  for (const char *p = str; *p; p++) {
    if (*p == '"' || *p == '\\') putchar('\\');
    putchar((unsigned char)*p < 0x20 ? ' ' : *p);
  }
  putchar('"');
}

#endif
