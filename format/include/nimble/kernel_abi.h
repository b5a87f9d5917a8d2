/* The kernel ABI: the contract between the code generator and the runtime.
 *
 * Every fused primitive function becomes one kernel, exported by name from
 * the executable's kernel library:
 *
 *   int32_t name(DLTensor *const *args, int32_t num_args,
 *                const nimble_kernel_env_t *env);
 *
 * `args` holds the inputs, then the outputs (destination passing: the VM
 * allocates every output before the call). A kernel returns 0 on success or
 * a nonzero error code, after optionally calling env->set_error with a
 * message (which need not name the kernel: the VM's status names the
 * kernel it called, "kernel 'NAME' failed with code 1: MESSAGE"). A kernel never allocates on its own (env->workspace_alloc is
 * there for scratch memory), keeps no state between calls and depends on
 * nothing but `env` and libm, so an artifact links no other library.
 *
 * The environment is versioned: struct_size comes first, and new members
 * are only ever appended. A kernel that needs a member checks that
 * struct_size covers it.
 */
#ifndef NIMBLE_KERNEL_ABI_H
#define NIMBLE_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_KERNEL_ABI_VERSION 1u

/* An x86_64 kernel library may also export NAME + this suffix: the same
 * kernel built for x86-64-v4 (AVX-512, 16 float32 lanes), which the
 * runtime calls instead of NAME on a CPU with x86-64-v4's AVX-512
 * (docs/targets.md, "x86"). Same arguments, same results. */
#define NIMBLE_KERNEL_AVX512_SUFFIX "__avx512"

typedef struct nimble_kernel_env nimble_kernel_env_t;

typedef int32_t (*nimble_kernel_fn)(DLTensor *const *args, int32_t num_args,
                                    const nimble_kernel_env_t *env);

/* One task of a parallel loop: task in [0, n_tasks). Returns 0 or an error
 * code. Tasks run concurrently on the runtime's threads. */
typedef int32_t (*nimble_parallel_body_fn)(int64_t task, int64_t n_tasks, void *closure);

/* Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C,
 * op(X) = X or its transpose when trans_x is nonzero (CBLAS semantics with
 * CblasRowMajor). */
typedef void (*nimble_sgemm_fn)(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float *a, int64_t lda, const float *b,
                                int64_t ldb, float beta, float *c, int64_t ldc);

/* What nimble_kernel_env_t.sgemm_epilogue does to each C[i, j] after the
 * product, in this order: + row_bias[i], + col_bias[j], + residual[i * ldr
 * + j] (each skipped when its pointer is NULL), then a clamp to [lo, hi]
 * that keeps NaN (-INFINITY / INFINITY for no bound). */
typedef struct nimble_sgemm_epilogue {
  const float *row_bias;
  const float *col_bias;
  const float *residual;
  int64_t ldr;
  float lo, hi;
} nimble_sgemm_epilogue_t;

/* nimble_kernel_env_t.sgemm_epilogue: sgemm's arguments, then the epilogue. */
typedef void (*nimble_sgemm_epilogue_fn)(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                         float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                                         float beta, float *c, int64_t ldc, const nimble_sgemm_epilogue_t *epi);

/* nimble_kernel_env_t.conv3x3: one image of a 3x3 convolution with unit
 * strides and dilations, one group: y[k][oh][ow] = sum over c and the
 * window of wt[k][c][u][v] * x[c][i - pad_t + u][j - pad_l + v] (0 outside
 * the h x w image), then `epi` (NULL: none) on each output as on C[k, i*ow
 * + j] of a product with ldc = oh*ow (col_bias must be NULL). x, wt and y
 * are contiguous ([c][h][w], [k][c][3][3], [k][oh][ow]). It cannot fail. */
typedef void (*nimble_conv3x3_fn)(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_t, int64_t pad_l,
                                  int64_t oh, int64_t ow, const float *x, const float *wt, float *y,
                                  const nimble_sgemm_epilogue_t *epi);

struct nimble_kernel_env {
  uint32_t struct_size; /* sizeof(nimble_kernel_env_t) of the runtime */
  uint32_t abi_version; /* NIMBLE_KERNEL_ABI_VERSION */

  /* Runs body(i, n_tasks, closure) for every i in [0, n_tasks) over the
   * runtime's thread pool and waits for all. Returns 0, or the first nonzero
   * code a task returned. The calling thread takes part. */
  int32_t (*parallel_for)(const nimble_kernel_env_t *env, int64_t n_tasks,
                          nimble_parallel_body_fn body, void *closure);

  /* Scratch memory for the duration of the call, aligned to `alignment` (a
   * power of two, at most 4096). NULL when the memory cap forbids it. Freed
   * with workspace_free, by the same kernel call, on any thread. */
  void *(*workspace_alloc)(const nimble_kernel_env_t *env, size_t bytes, size_t alignment);
  void (*workspace_free)(const nimble_kernel_env_t *env, void *ptr);

  /* Records a message for the error the kernel is about to return; the VM
   * puts it into the status it reports. The text is copied. */
  void (*set_error)(const nimble_kernel_env_t *env, const char *message);

  /* A BLAS sgemm the runtime may provide; NULL when it does not, and the
   * kernel then uses its own loops. */
  nimble_sgemm_fn sgemm;

  /* The runtime's private context; kernels leave it alone. */
  void *runtime_ctx;

  /* Appended; a kernel reads it only when struct_size covers it. sgemm,
   * then the epilogue on each element of C (nimble_sgemm_epilogue_t: a
   * convolution's or a dense layer's bias, a residual add, Clip or Relu),
   * applied while a tile of C is still in registers instead of in a
   * second pass over C. NULL when sgemm is. */
  nimble_sgemm_epilogue_fn sgemm_epilogue;

  /* Appended: how many threads parallel_for may run tasks on (the caller
   * included), at least 1. A kernel cutting work into per-thread parts
   * (with a buffer each) reads it, and takes 1 when struct_size does not
   * cover it. */
  uint32_t num_threads;

  /* Appended: a 3x3 convolution (nimble_conv3x3_fn) by a faster
   * algorithm than the kernel's own product (Winograd's, in the
   * runtime), over the VM's threads; NULL when the runtime has none. A
   * kernel reads it only when struct_size covers it. */
  nimble_conv3x3_fn conv3x3;
};

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_KERNEL_ABI_H */
