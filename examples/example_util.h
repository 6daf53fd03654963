/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example_util.h: what the examples (and the benchmark built from
 * implicit_cg's model) do the same way: memory that ends the program when
 * there is none, integer arguments checked against their range, the options
 * of their gradient checks and, in the MPI ones, the verdict at the end.
 */
#ifndef ARIADNE_EXAMPLE_UTIL_H
#define ARIADNE_EXAMPLE_UTIL_H

#include <ariadne_tools.h>
#include <stdio.h>
#include <stdlib.h>

/* count * size zeroed bytes, or the end of the program (status 1) with a
 * message naming prog. */
static inline void *example_alloc(const char *prog, size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory (%zu x %zu bytes)\n", prog, count, size);
    exit(1);
  }
  return p;
}

/* The end of the program (status 1) with a message naming prog when a
 * set-up that allocates reports by ok == 0 that there was no memory. */
static inline void example_need_memory(const char *prog, int ok) {
  if (!ok) {
    fprintf(stderr, "%s: out of memory\n", prog);
    exit(1);
  }
}

/* The integer s spells, or the end of the program (status 2) with a message
 * naming prog, the argument (what), its range [lo, hi] and s. */
static inline int example_parse_int(const char *prog, const char *s, int lo, int hi, const char *what) {
  char *end;
  long x = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || x < lo || x > hi) {
    fprintf(stderr, "%s: %s must be an integer in [%d, %d], got '%s'\n", prog, what, lo, hi, s);
    exit(2);
  }
  return (int)x;
}

/* A deterministic value in [-1, 1) for index i (a splitmix64 hash), the same
 * on any number of ranks: the examples' data without a random generator. */
static inline double example_hash_unit(unsigned long long i) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* The options of a gradient check that always prints its summary and its
 * rows worst entries under title, an entry passing within rtol (relative). */
static inline void example_check_report(ad_check_options *co, int rows, double rtol, const char *title) {
  ad_check_options_default(co);
  co->print = 2;
  co->table_rows = rows;
  co->rtol = rtol;
  co->title = title;
}

/* The same for the ncolumns inputs pick of a long simulation, compared with
 * central differences at relative steps 1e-3, 1e-4 and 1e-5 and passing
 * within rtol or atol, the rounding noise of the objective over the step. */
static inline void example_check_columns(ad_check_options *co, const size_t *pick, int ncolumns, double rtol,
                                         double atol, const char *title) {
  example_check_report(co, ncolumns, rtol, title);
  co->columns = pick;
  co->ncolumns = (size_t)ncolumns;
  co->steps[0] = 1e-3, co->steps[1] = 1e-4, co->steps[2] = 1e-5;
  co->atol = atol;
}

#ifdef MPI_VERSION
/* The start of an MPI example: MPI initialized, *comm the world's
 * communicator, *rank and *size this process's place in it. */
static inline void example_mpi_start(int *argc, char ***argv, MPI_Comm *comm, int *rank, int *size) {
  MPI_Init(argc, argv);
  *comm = MPI_COMM_WORLD;
  MPI_Comm_rank(*comm, rank);
  MPI_Comm_size(*comm, size);
}

/* The end of an MPI example: the failures of all ranks summed, the verdict
 * printed by rank 0 naming prog, MPI finalized; the exit status. */
static inline int example_mpi_finish(MPI_Comm comm, const char *prog, int failures) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, comm);
  if (rank == 0) {
    if (failures)
      fprintf(stderr, "%s: %d check(s) failed\n", prog, failures);
    else
      printf("%s: OK\n", prog);
  }
  MPI_Finalize();
  return failures != 0;
}
#endif

#endif
