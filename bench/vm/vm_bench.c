/* VM micro-benchmark: the interpreter's cost per instruction and per
 * InvokePacked, in nanoseconds (median of several runs).
 *
 * Three straight-line programs of K instructions each are timed: K Moves,
 * K InvokePackeds of a kernel that does nothing, and a bare Ret (the cost
 * of a call). Per-instruction cost = (time(program) - time(Ret)) / K.
 *
 *   vm_bench [RUNS] [CALLS]      defaults 7 runs of 2000 calls */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nimble/executable_builder.h"
#include "nimble/runtime.h"

enum { K = 1000 };

static void check(nimble_status_t s, const char *what) {
  if (!s) return;
  fprintf(stderr, "vm_bench: %s: %s\n", what, nimble_status_message(s));
  exit(1);
}

static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *d = malloc((size_t)n);
  if (fread(d, 1, (size_t)n, f) != (size_t)n) exit(1);
  fclose(f);
  *size = (size_t)n;
  return d;
}

/* Entries "ret", "move" and "packed", each taking one int64 scalar. */
static nimble_executable *build(void) {
  nimble_executable_builder *b;
  size_t ksize;
  void *k = read_file(NIMBLE_BENCH_KERNELS_PATH, &ksize);
  check(nimble_builder_create("bench", &b), "builder");
  check(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, k, ksize), "kernels");
  free(k);
  uint32_t kn, fret, fmove, fpacked;
  check(nimble_builder_add_kernel(b, "noop", kDLCPU, &kn), "kernel");
  check(nimble_builder_add_function(b, "ret", 1, 2, &fret), "fn");
  check(nimble_builder_add_function(b, "move", 1, 2, &fmove), "fn");
  check(nimble_builder_add_function(b, "packed", 1, 2, &fpacked), "fn");
  check(NIMBLE_BUILDER_EMIT(b, fret, NIMBLE_OP_RET, 0), "emit");
  for (int i = 0; i < K; i++) {
    check(NIMBLE_BUILDER_EMIT(b, fmove, NIMBLE_OP_MOVE, 1, 0), "emit");
    check(NIMBLE_BUILDER_EMIT(b, fpacked, NIMBLE_OP_INVOKE_PACKED, kn, 1, 0, 0), "emit");
  }
  check(NIMBLE_BUILDER_EMIT(b, fmove, NIMBLE_OP_RET, 0), "emit");
  check(NIMBLE_BUILDER_EMIT(b, fpacked, NIMBLE_OP_RET, 0), "emit");
  nimble_sig_dim_t none = {0, NULL};
  nimble_tensor_info_t io = {"x", {kDLInt, 64, 1}, {kDLCPU, 0}, 0, &none};
  check(nimble_builder_add_entry(b, "ret", fret, &io, 1, &io, 1), "entry");
  check(nimble_builder_add_entry(b, "move", fmove, &io, 1, &io, 1), "entry");
  check(nimble_builder_add_entry(b, "packed", fpacked, &io, 1, &io, 1), "entry");
  void *img;
  size_t size;
  check(nimble_builder_serialize(b, &img, &size), "serialize");
  nimble_builder_destroy(b);
  nimble_executable *exe;
  check(nimble_executable_load_memory(img, size, 0, &exe), "load");
  free(img);
  return exe;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Mean nanoseconds per call of `entry` over `calls` calls. */
static double time_calls(nimble_vm *vm, const char *entry, int calls) {
  int64_t x = 1;
  DLTensor t = {&x, {kDLCPU, 0}, 0, {kDLInt, 64, 1}, NULL, NULL, 0};
  double start = now_ns();
  for (int i = 0; i < calls; i++) {
    check(nimble_vm_set_input(vm, entry, 0, &t), "set_input");
    check(nimble_vm_invoke(vm, entry), "invoke");
  }
  return (now_ns() - start) / calls;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7, calls = argc > 2 ? atoi(argv[2]) : 2000;
  if (runs < 1 || runs > 101 || calls < 1) {
    fprintf(stderr, "usage: %s [RUNS 1..101] [CALLS]\n", argv[0]);
    return 2;
  }
  nimble_executable *exe = build();
  nimble_vm *vm;
  check(nimble_vm_create(exe, NULL, &vm), "vm");
  double per_move[101], per_packed[101], per_call[101];
  time_calls(vm, "move", calls / 10 + 1); /* warm the pool and caches */
  time_calls(vm, "packed", calls / 10 + 1);
  for (int r = 0; r < runs; r++) {
    /* Interleaved, so machine noise hits all three alike. */
    double ret = time_calls(vm, "ret", calls);
    double move = time_calls(vm, "move", calls);
    double packed = time_calls(vm, "packed", calls);
    per_call[r] = ret;
    per_move[r] = (move - ret) / K;
    per_packed[r] = (packed - ret) / K;
  }
  qsort(per_call, (size_t)runs, sizeof(double), cmp);
  qsort(per_move, (size_t)runs, sizeof(double), cmp);
  qsort(per_packed, (size_t)runs, sizeof(double), cmp);
  printf("vm_bench: median of %d runs x %d calls\n", runs, calls);
  printf("  call overhead (set_input + invoke + Ret): %8.1f ns\n", per_call[runs / 2]);
  printf("  per instruction (Move):                   %8.2f ns\n", per_move[runs / 2]);
  printf("  per InvokePacked (no-op kernel, 2 args):  %8.2f ns\n", per_packed[runs / 2]);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  return 0;
}
