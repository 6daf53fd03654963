/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What fresh memory costs on this machine: the price a one-shot gradient pays
 * for every byte its tape and adjoints touch first (see "Fresh memory" in
 * benchmarks/README.md). For each way of mapping -- 4 KiB pages, transparent
 * huge pages asked for with madvise (what Ariadne's large arrays use), 4 KiB
 * pages populated by mmap -- it maps and writes `--mib` MiB in 8 MiB pieces
 * twice: `first` right after `--idle` seconds of rest, `again` at once, in
 * memory the first run has just given back. On a virtual machine whose host
 * takes back the guest's free memory, `first` pays the host too.
 *
 * Usage: ariadne_bench_touch [--mib n] [--idle seconds]
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "bench.h"

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define PIECE ((size_t)8 << 20)
#define HUGE ((size_t)2 << 20)

/* Seconds per GiB to map and write `bytes` in pieces, then unmap them. */
static double touch(size_t bytes, int how) {
  size_t n = (bytes + PIECE - 1) / PIECE;
  char **p = calloc(n, sizeof *p);
  if (!p) return -1.0;
  double t0 = bench_now();
  for (size_t k = 0; k < n; k++) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (how == 2 ? MAP_POPULATE : 0);
    char *m = mmap(NULL, PIECE + HUGE, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) {
      n = k;
      t0 = -1.0;
      break;
    }
    char *a = (char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (how == 1) madvise(a, PIECE, MADV_HUGEPAGE);
    for (size_t i = 0; i < PIECE; i += 4096) a[i] = (char)i;
    p[k] = m;
  }
  double t = bench_now() - t0;
  for (size_t k = 0; k < n; k++) munmap(p[k], PIECE + HUGE);
  free(p);
  return t0 < 0 ? -1.0 : t / ((double)(n * PIECE) / (double)(1u << 30));
}
#endif

int main(int argc, char **argv) {
  size_t mib = 512;
  unsigned idle = 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = (size_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--idle") && i + 1 < argc)
      idle = (unsigned)strtoul(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: %s [--mib n] [--idle seconds]\n", argv[0]);
      return 2;
    }
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const char *name[] = {"4k_pages", "huge_pages_madvise", "4k_pages_populate"};
  printf("fresh memory: %zu MiB written once per 4 KiB, after %u s idle (first) and at once again (again)\n", mib, idle);
  printf("%-20s %12s %12s\n", "mapping", "first_s/GiB", "again_s/GiB");
  for (int how = 0; how < 3; how++) {
    if (idle) sleep(idle);
    double first = touch(mib << 20, how), again = touch(mib << 20, how);
    if (first < 0 || again < 0) {
      printf("%-20s mmap failed\n", name[how]);
      return 1;
    }
    printf("%-20s %12.3f %12.3f\n", name[how], first, again);
  }
  return 0;
#else
  (void)now;
  printf("fresh memory: skipped (Linux only)\n");
  return 0;
#endif
}
