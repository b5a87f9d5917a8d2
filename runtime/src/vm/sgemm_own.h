/* The runtime's own single-precision GEMM: packed panels and a
 * register-blocked micro-kernel, compiled for AVX-512, for AVX2 with FMA
 * and as portable C (GCC vector extensions: SSE2 on x86_64, NEON on
 * aarch64), the variant chosen at run time by what the CPU has.
 *
 * It stands beside the BLAS the runtime may load (vm/blas_loader.h), which
 * decides per call which of the two computes a product (docs/vm.md, "Own
 * sgemm"). Same contract as the kernel ABI's sgemm: C = alpha * op(A) *
 * op(B) + beta * C, row-major, CBLAS semantics; beta == 0 clears C (NaNs
 * included); m, n or k of 0 or alpha == 0 only scale C. Any leading
 * dimension is accepted (row lengths are the caller's business), every
 * call computes something: the function cannot fail.
 *
 * Packing buffers are per thread, grown on first need and kept until the
 * thread ends, so a warm caller allocates nothing. */
#ifndef NIMBLE_RUNTIME_SGEMM_OWN_H
#define NIMBLE_RUNTIME_SGEMM_OWN_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/kernel_abi.h"

/* What may follow the product on each element of C: the kernel ABI's
 * epilogue (+ row bias, + column bias, + residual, then a clamp keeping
 * NaN). The own kernels apply it to a tile while it is in registers. */
typedef nimble_sgemm_epilogue_t nimble_sgemm_epi;

/* The epilogue as a pass over C[0:m, 0:n] (for products computed another
 * way: a BLAS, the matrix-vector paths). */
void nimble_sgemm_apply_epi(int64_t m, int64_t n, float *c, int64_t ldc, const nimble_sgemm_epi *epi);

/* The instruction sets the own sgemm is compiled for. */
typedef enum nimble_sgemm_isa {
  NIMBLE_SGEMM_ISA_PORTABLE = 0, /* GCC vector extensions, any CPU */
  NIMBLE_SGEMM_ISA_AVX2 = 1,     /* x86_64 with AVX2 and FMA */
  NIMBLE_SGEMM_ISA_AVX512 = 2,   /* x86_64 with AVX-512 F */
} nimble_sgemm_isa;

/* The kernel ABI's sgemm on the best variant this CPU runs. */
void nimble_sgemm_own(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                      int64_t ldc);

/* nimble_sgemm_own, then `epi` (NULL: none) on every element of C. */
void nimble_sgemm_own_epi(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc, const nimble_sgemm_epi *epi);

/* The variant nimble_sgemm_own uses on this CPU. */
nimble_sgemm_isa nimble_sgemm_own_best_isa(void);

/* "avx512", "avx2" or "portable". */
const char *nimble_sgemm_isa_name(nimble_sgemm_isa isa);

/* Whether this CPU (and build) can run `isa`. */
int nimble_sgemm_isa_available(nimble_sgemm_isa isa);

/* The same product on a given variant (tests and benchmarks compare them);
 * returns 0 having done nothing when nimble_sgemm_isa_available(isa) is 0,
 * else 1. */
int nimble_sgemm_own_isa(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float beta, float *c, int64_t ldc);

/* The same with an epilogue (NULL: none). */
int nimble_sgemm_own_isa_epi(nimble_sgemm_isa isa, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                             int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc, const nimble_sgemm_epi *epi);

/* A's panels made once by their owner (the Winograd convolution's
 * transformed weights, vm/conv_winograd.h) rather than by the constants
 * cache below: op(A) = A (m x k, stored [m, k], lda apart) packed for
 * `isa` into _packed_a_size floats at dst (64-byte aligned). */
size_t nimble_sgemm_own_packed_a_size(nimble_sgemm_isa isa, int64_t m, int64_t k);
void nimble_sgemm_own_pack_a(nimble_sgemm_isa isa, const float *a, int64_t lda, int64_t m, int64_t k, float *dst);

/* C = A * B + beta * C (no transposes) with A's panels from
 * nimble_sgemm_own_pack_a for the same isa; `a` is A itself, read when a
 * product of one row or column takes the matrix-vector path. Returns 0
 * having done nothing when the isa is unavailable, else 1. */
int nimble_sgemm_own_isa_packed_a(nimble_sgemm_isa isa, int64_t m, int64_t n, int64_t k, const float *a,
                                  int64_t lda, const float *apk, const float *b, int64_t ldb, float beta, float *c,
                                  int64_t ldc);

/* Memory that stays unchanged from now until the matching _remove (an
 * executable's constants): a transposed B operand wholly inside it is
 * packed once and its panels reused by every later call (per variant, up
 * to 512 MiB in all). _remove drops the panels of operands inside the
 * range; call it before the memory changes or goes. Thread-safe. */
void nimble_sgemm_own_constants_add(const void *base, size_t bytes);
void nimble_sgemm_own_constants_remove(const void *base, size_t bytes);

/* Whether op(B) (k x n; stored [n, k] when trans_b) lies wholly inside
 * memory registered above. For op(A) (m x k) ask with (!trans_a, a, lda,
 * k, m): A stored [m, k] lies in memory as a transposed k x m B would. */
int nimble_sgemm_own_is_constant(int32_t trans_b, const float *b, int64_t ldb, int64_t k, int64_t n);

#endif
