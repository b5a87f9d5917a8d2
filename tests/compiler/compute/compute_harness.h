/* Test harness of the compute suites: parse a .nir program, run the
 * default pass pipeline, build one primitive's kernel (or shape function)
 * with nimble_compute, compile it for x86_64 with the codegen, load it
 * from a memfd, and call it with DLTensors and a test env (tasks of
 * parallel loops run in reverse order, so a kernel whose tasks depend on
 * each other's order fails; sgemm optionally OpenBLAS). */
#ifndef NIMBLE_COMPUTE_HARNESS_H
#define NIMBLE_COMPUTE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/codegen.h"
#include "nimble/compute.h"
#include "nimble/ir.h"
#include "nimble/kernel_abi.h"

/* Parses `text`, type-checks and runs nimble_passes_run_default at level 2
 * (the test fails on error). The module lives in `arena`. */
nimble_module *ch_compile_module(nimble_arena *arena, const char *text);

/* The name of the first primitive whose name starts with `prefix` (test
 * fails when none). */
const char *ch_find_primitive(const nimble_module *m, const char *prefix);

typedef struct ch_kernel {
  nimble_ln_arena *arena;
  nimble_ln_kernel *kernel;
  void *handle;
  int fd;
  nimble_kernel_fn fn;
} ch_kernel;

/* The code generator's options for the compute suites: the defaults, with
 * the suite's kernel cache (tests/support/nimble_test_kernel_cache.h).
 * These suites test the loop nests and what the kernels compute; the code
 * generator's own suites (tests/codegen) compile without a cache. */
nimble_codegen_options_t ch_codegen_options(void);

/* Builds, compiles and loads primitive `name` (shape_func: its shape
 * function). Fails the test on error. */
void ch_kernel_build(const nimble_module *m, const char *name, bool shape_func, const nimble_compute_options_t *o,
                     ch_kernel *k);
void ch_kernel_free(ch_kernel *k);

typedef struct ch_tensor {
  DLTensor t;
  int64_t shape[8];
  void *data; /* malloc'ed, one spare element */
  size_t n;
} ch_tensor;

/* Random f32 values in [lo, hi) from *seed. */
void ch_tensor_f32(ch_tensor *t, int rank, const int64_t *shape, unsigned *seed, float lo, float hi);
/* int64 tensor with the given values (NULL: zeros). */
void ch_tensor_i64(ch_tensor *t, int rank, const int64_t *shape, const int64_t *values);
/* bool tensor ({kDLUInt, 8, 1}, one byte per element) with the given
 * bytes (NULL: zeros). */
void ch_tensor_u8(ch_tensor *t, int rank, const int64_t *shape, const uint8_t *values);
void ch_tensor_free(ch_tensor *t);
static inline float *ch_f(const ch_tensor *t) { return (float *)t->data; }
static inline int64_t *ch_i(const ch_tensor *t) { return (int64_t *)t->data; }
static inline uint8_t *ch_u8(const ch_tensor *t) { return (uint8_t *)t->data; }

typedef struct ch_env {
  nimble_kernel_env_t env;
  char error[512];
  long tasks; /* tasks run (atomically updated) */
  int threads;
} ch_env;
void ch_env_init(ch_env *e, bool with_sgemm);
/* Also offers env->sgemm_epilogue (needs with_sgemm): the BLAS's sgemm,
 * then the row bias and clamp written here; each call counts in
 * ch_epilogue_calls. */
void ch_env_epilogue(ch_env *e);
extern long ch_epilogue_calls;
/* Gives the environment a conv3x3 (nimble/kernel_abi.h): the definition
 * as direct loops in double, then the epilogue, counting its calls in
 * ch_conv3x3_calls (the runtime's Winograd convolution is tested on its
 * own, tests/runtime/test_conv_winograd.c). */
void ch_env_conv3x3(ch_env *e);
extern long ch_conv3x3_calls;
/* Runs parallel loops' tasks on `threads` pthreads at once (plus counting). */
void ch_env_threads(ch_env *e, int threads);
/* Says num_threads = threads but runs each loop's tasks on the caller, last
 * first: a task that writes into a later task's part (which that task
 * would rewrite when run after it) then leaves wrong values, every time,
 * where threads racing do so only now and then. */
void ch_env_threads_reversed(ch_env *e, int threads);

/* Calls the kernel on tensors ts[0..n). Returns its code. */
int32_t ch_call(const ch_kernel *k, ch_env *e, ch_tensor *const *ts, int n);

/* Asserts |got - want| <= atol + rtol*|want| elementwise, naming `what`
 * and the first bad index. */
void ch_assert_close(const char *what, const float *got, const float *want, size_t n, float atol, float rtol);

#endif
