/* What the integrity check costs a load (docs/executable.md, "Cost"):
 *
 *   build/bench/digest/bench_load_check FILE.nimble [RUNS]
 *
 * For one executable file, medians over RUNS (default 31) of
 *   - nimble_executable_load_file with NIMBLE_LOAD_VERIFY_ALL, which checks
 *     every part's digest, and without it (the default: weights with chunk
 *     digests are verified on first use);
 *   - the part digest of the file's bytes (nimble_part_digest, chunks on
 *     the threads this process may use), and the same pinned to one CPU;
 *   - reading every page of the mapped file (the memory-read floor that any
 *     check pays, and that an unchecked load defers to the first run);
 *   - what a default load hashes, replayed alone with the same calls: every
 *     part whole but the CPU kernels and the constants, and of those, with
 *     chunk digests, the table alone (a list with the table's digest) or
 *     the chunks up to the table's end (a list without), and the share of
 *     the default load that is; the default load minus it estimates the
 *     unchecked rest;
 *   - what the first VM of a default load hashes: the CPU kernel part;
 *   - a fresh load, the first VM's creation (a default load's maps the
 *     kernels after checking them), then the first invoke of entry 0
 *     (inputs of its declared shape, symbolic dims 8, all zeros) and a
 *     second one, both ways: the first invoke of a default load pays for
 *     the weights' check.
 * The load without any check is about the verify-all load minus the digest. */
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

/* Zero inputs for entry 0, set on `vm`; 0 when they could not be. */
static int set_zero_inputs(nimble_executable *exe, nimble_vm *vm, void **bufs) {
  const nimble_entry_info_t *e = nimble_executable_entry_at(exe, 0);
  if (!e) return 0;
  for (uint32_t i = 0; i < e->num_inputs && i < 16; i++) {
    const nimble_tensor_info_t *in = &e->inputs[i];
    if (in->ndim < 0 || in->ndim > 8 || in->dtype.code == kDLOpaqueHandle) return 0;
    static int64_t shapes[16][8];
    size_t n = 1;
    for (int32_t d = 0; d < in->ndim; d++) {
      shapes[i][d] = in->dims[d].value >= 0 ? in->dims[d].value : 8;
      n *= (size_t)shapes[i][d];
    }
    size_t bytes = n * (size_t)((in->dtype.bits * in->dtype.lanes + 7) / 8);
    if (!bufs[i]) bufs[i] = calloc(1, bytes ? bytes : 1);
    DLTensor t = {.data = bufs[i], .device = {kDLCPU, 0}, .ndim = in->ndim, .dtype = in->dtype, .shape = shapes[i]};
    nimble_status_t s = nimble_vm_set_input(vm, e->name, i, &t);
    if (s) {
      fprintf(stderr, "input %u: %s\n", i, nimble_status_message(s));
      nimble_status_free(s);
      return 0;
    }
  }
  return 1;
}

/* A fresh load with `flags`, a VM, then two invokes: the time of each
 * (seconds); 0 on failure. */
static int load_and_invoke(const char *path, uint32_t flags, void **bufs, double *load, double *create,
                           double *first, double *second);

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

  double load_mode[2];
  for (int mode = 0; mode < 2; mode++) {
    for (int i = 0; i < runs; i++) {
      nimble_executable *exe = NULL;
      double t0 = now();
      nimble_status_t s = nimble_executable_load_file_flags(argv[1], mode ? NIMBLE_LOAD_VERIFY_ALL : 0, &exe);
      t[i] = now() - t0;
      if (s) {
        fprintf(stderr, "%s\n", nimble_status_message(s));
        return 1;
      }
      nimble_executable_release(exe);
    }
    load_mode[mode] = median(t, runs);
  }
  double load = load_mode[1];

  /* Load and first invokes, both ways, alternating so that a noisy
   * neighbour hits both alike. */
  void *bufs[16] = {0};
  double *tl[2], *tc[2], *tf[2], *ts[2];
  int invoked = 1;
  for (int mode = 0; mode < 2; mode++) {
    tl[mode] = malloc(sizeof(double) * (size_t)runs);
    tc[mode] = malloc(sizeof(double) * (size_t)runs);
    tf[mode] = malloc(sizeof(double) * (size_t)runs);
    ts[mode] = malloc(sizeof(double) * (size_t)runs);
    if (!tl[mode] || !tc[mode] || !tf[mode] || !ts[mode]) return 1;
  }
  for (int i = 0; i < runs && invoked; i++)
    for (int mode = 0; mode < 2 && invoked; mode++)
      invoked = load_and_invoke(argv[1], mode ? NIMBLE_LOAD_VERIFY_ALL : 0, bufs, &tl[mode][i], &tc[mode][i],
                                &tf[mode][i], &ts[mode][i]);

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

  /* What a default load hashes: every section but the constants whole; of
   * the constants, when the file has their chunk digests, the table alone
   * (a list with the table's digest) or the chunks up to the end of the
   * table (chunk 0 at least; a list without it). Read from the documented
   * layout. */
  const uint8_t *eager[16], *kernels = NULL;
  size_t eager_size[16], ne = 0, eager_bytes = 0, kernels_size = 0;
  uint32_t count = *(const uint32_t *)(map + 12);
  int has_list = 0, has_table = 0;
  for (uint32_t i = 0; i < count && i < 16; i++)
    if (*(const uint32_t *)(map + 56 + 24 * i) == NIMBLE_PART_CHUNK_DIGESTS) {
      has_list = 1;
      uint64_t off = *(const uint64_t *)(map + 56 + 24 * i + 8);
      has_table = (*(const uint32_t *)(map + off + 20) & NIMBLE_CHUNK_DIGESTS_HAS_TABLE) != 0;
    }
  for (uint32_t i = 0; i < count && i < 16; i++) {
    const uint8_t *e = map + 56 + 24 * i;
    uint32_t kind = *(const uint32_t *)e;
    uint64_t off = *(const uint64_t *)(e + 8), len = *(const uint64_t *)(e + 16);
    if (kind == NIMBLE_PART_CONSTANTS && has_list) {
      uint64_t table_end = *(const uint64_t *)(map + off + 24);
      len = has_table ? table_end
                      : (table_end + NIMBLE_PART_CHUNK_SIZE - 1) / NIMBLE_PART_CHUNK_SIZE * NIMBLE_PART_CHUNK_SIZE;
      if (len == 0) len = NIMBLE_PART_CHUNK_SIZE;
      if (len > *(const uint64_t *)(e + 16) - 32) len = *(const uint64_t *)(e + 16) - 32;
    }
    if (kind == NIMBLE_PART_KERNELS_CPU) {
      kernels = map + off;
      kernels_size = (size_t)len - 32;
      continue;
    }
    eager[ne] = map + off;
    eager_size[ne++] = (size_t)len;
    eager_bytes += (size_t)len;
  }
  for (int i = 0; i < runs; i++) {
    double t0 = now();
    for (size_t k = 0; k < ne; k++) nimble_part_digest(eager[k], eager_size[k], digest);
    t[i] = now() - t0;
  }
  double eager_hash = median(t, runs);
  for (int i = 0; i < runs; i++) {
    double t0 = now();
    if (kernels) nimble_part_digest(kernels, kernels_size, digest);
    t[i] = now() - t0;
  }
  double kernels_hash = median(t, runs);

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
  printf("  load, verify all           %8.2f ms\n", load);
  printf("  load, default              %8.2f ms (weights with chunk digests: checked on first use)\n",
         load_mode[0]);
  printf("  part digest, %d threads     %8.2f ms (%.0f%% of the verify-all load)\n", cpus < 8 ? cpus : 8, all,
         100.0 * all / load);
  printf("  load, no check (estimate)  %8.2f ms (verify-all load minus the digest)\n", load - all);
  printf("  hashed by a default load   %8.2f ms (%.2f MB; %.0f%% of the default load: every part but the "
         "cpu kernels and the constants, %s)\n",
         eager_hash, (double)eager_bytes / 1e6, 100.0 * eager_hash / load_mode[0],
         !has_list    ? "and the constants whole"
         : has_table ? "and the constants' table alone"
                     : "and the constants' chunks to their table's end");
  printf("  load, no check (estimate)  %8.2f ms (default load minus what it hashes)\n", load_mode[0] - eager_hash);
  printf("  hashed by the first VM     %8.2f ms (%.2f MB: the cpu kernels, checked before they are mapped)\n",
         kernels_hash, (double)kernels_size / 1e6);
  printf("  part digest, 1 thread      %8.2f ms\n", single);
  printf("  reading every page         %8.2f ms\n", touch);
  if (invoked)
    for (int mode = 1; mode >= 0; mode--) {
      double l = median(tl[mode], runs), c = median(tc[mode], runs), f = median(tf[mode], runs),
             s2 = median(ts[mode], runs);
      printf("  %s: load %.2f + first VM %.2f + first invoke %.2f ms (second invoke %.2f ms)\n",
             mode ? "verify all" : "default   ", l, c, f, s2);
      if (!mode)
        printf("  default hashing before the first output: %.2f of %.2f ms (%.1f%%; %.0f%% of load + first VM)\n",
               eager_hash + kernels_hash, l + c + f, 100.0 * (eager_hash + kernels_hash) / (l + c + f),
               100.0 * (eager_hash + kernels_hash) / (l + c));
    }
  else
    printf("  (entry 0 could not be invoked on zero inputs: no invoke times)\n");
  (void)sink;
  free(t);
  return 0;
}

static int load_and_invoke(const char *path, uint32_t flags, void **bufs, double *load, double *create,
                           double *first, double *second) {
  nimble_executable *exe = NULL;
  nimble_vm *vm = NULL;
  double t0 = now();
  nimble_status_t s = nimble_executable_load_file_flags(path, flags, &exe);
  *load = now() - t0;
  t0 = now();
  if (!s) s = nimble_vm_create(exe, NULL, &vm);
  *create = now() - t0;
  const nimble_entry_info_t *e = s ? NULL : nimble_executable_entry_at(exe, 0);
  int ok = !s && e && set_zero_inputs(exe, vm, bufs);
  if (ok) {
    t0 = now();
    s = nimble_vm_invoke(vm, e->name);
    *first = now() - t0;
    if (!s && set_zero_inputs(exe, vm, bufs)) {
      t0 = now();
      s = nimble_vm_invoke(vm, e->name);
      *second = now() - t0;
    }
  }
  if (s) {
    fprintf(stderr, "%s\n", nimble_status_message(s));
    nimble_status_free(s);
    ok = 0;
  }
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  return ok;
}
