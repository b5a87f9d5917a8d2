/* What the integrity check costs a load (docs/executable.md, "Cost"):
 *
 *   build/bench/digest/bench_load_check FILE.nimble [RUNS]
 *
 * For one executable file, medians over RUNS (default 31) of
 *   - nimble_executable_load_file, which checks every part's digest;
 *   - the part digest of the file's bytes (nimble_part_digest, chunks on
 *     the threads this process may use), and the same pinned to one CPU;
 *   - reading every page of the mapped file (the memory-read floor that any
 *     check pays, and that an unchecked load defers to the first run).
 * The load without the check is about the load minus the digest. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/layout.h"
#include "nimble/runtime.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], by_value);
  return t[n / 2] * 1e3;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_load_check FILE.nimble [RUNS]\n");
    return 2;
  }
  int runs = argc > 2 ? atoi(argv[2]) : 31;
  if (runs < 1 || runs > 10000) runs = 31;
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
    perror(argv[1]);
    return 1;
  }
  size_t size = (size_t)st.st_size;
  const uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  double *t = malloc(sizeof(double) * (size_t)runs);
  if (!t) return 1;
  uint8_t digest[32];
  volatile uint8_t sink = 0;

  for (int i = 0; i < runs; i++) {
    nimble_executable *exe = NULL;
    double t0 = now();
    nimble_status_t s = nimble_executable_load_file(argv[1], &exe);
    t[i] = now() - t0;
    if (s) {
      fprintf(stderr, "%s\n", nimble_status_message(s));
      return 1;
    }
    nimble_executable_release(exe);
  }
  double load = median(t, runs);

  for (int i = 0; i < runs; i++) {
    double t0 = now();
    nimble_part_digest(map, size, digest);
    t[i] = now() - t0;
  }
  double all = median(t, runs);

  for (int i = 0; i < runs; i++) {
    double t0 = now();
    for (size_t off = 0; off < size; off += 4096) sink ^= map[off];
    t[i] = now() - t0;
  }
  double touch = median(t, runs);

  cpu_set_t mine, one;
  sched_getaffinity(0, sizeof mine, &mine);
  int cpus = CPU_COUNT(&mine), first = 0;
  while (!CPU_ISSET(first, &mine)) first++;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  sched_setaffinity(0, sizeof one, &one);
  for (int i = 0; i < runs; i++) {
    double t0 = now();
    nimble_part_digest(map, size, digest);
    t[i] = now() - t0;
  }
  double single = median(t, runs);
  sched_setaffinity(0, sizeof mine, &mine);

  printf("%s: %.1f MB, %zu chunks, %d usable CPUs, medians of %d runs\n", argv[1], (double)size / 1e6,
         (size + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE, cpus, runs);
  printf("  load (with the check)      %8.2f ms\n", load);
  printf("  part digest, %d threads     %8.2f ms (%.0f%% of the load)\n", cpus < 8 ? cpus : 8, all,
         100.0 * all / load);
  printf("  part digest, 1 thread      %8.2f ms\n", single);
  printf("  reading every page         %8.2f ms\n", touch);
  (void)sink;
  free(t);
  return 0;
}
