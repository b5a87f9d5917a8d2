/* The kernel environment's sgemm, spread over the calling VM's thread pool.
 *
 * env->sgemm has no environment argument (kernel ABI 1), so the pool is
 * found through a thread-local that the interpreter sets around each kernel
 * call (nimble_sgemm_threads_swap). A product large enough to pay for a
 * second thread is cut into blocks of whole columns of C (or of whole
 * rows, when C has too few columns or its rows cut into more even work),
 * one per thread, each computed by the implementation chosen for the
 * whole product (vm/blas_loader.h), so every
 * element of C sums the same terms in the same order as one call would.
 * Called from inside a parallel task, from a thread with no pool, or for
 * a small product, it is one call on the calling thread. */
#ifndef NIMBLE_RUNTIME_SGEMM_THREADS_H
#define NIMBLE_RUNTIME_SGEMM_THREADS_H

#include <stdint.h>

#include "vm/thread_pool.h"

/* Makes `pool` (NULL: none) the calling thread's pool for sgemm; returns
 * the one it replaces, for the caller to put back. */
nimble_thread_pool *nimble_sgemm_threads_swap(nimble_thread_pool *pool);

/* The pool set by nimble_sgemm_threads_swap on this thread (NULL: none):
 * other runtime services a kernel calls (vm/conv_winograd.h) cut their
 * work over it too. */
nimble_thread_pool *nimble_sgemm_threads_pool(void);

/* The kernel ABI's sgemm (nimble_sgemm_fn) over the thread's pool. Only
 * for a runtime whose nimble_blas_sgemm() is not NULL. */
void nimble_sgemm_threads(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc);

/* The kernel ABI's sgemm_epilogue (nimble_sgemm_epilogue_fn) the same
 * way: each block's product, then the epilogue (biases, residual, clamp
 * keeping NaN) inside the own kernels' tiles or as a pass over the block. */
void nimble_sgemm_threads_epilogue(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                   int64_t ldc, const nimble_sgemm_epilogue_t *epi);

/* How nimble_sgemm_threads would cut a product over `threads` threads:
 * the number of blocks (1: not cut), whether they are column blocks, and
 * the columns or rows per block (the last may be shorter). pack_a,
 * pack_b: whether the product packs that operand on every call (a cut
 * that makes each block pack all of it costs that much more). Tests use
 * it. */
int64_t nimble_sgemm_threads_plan(uint32_t threads, int64_t m, int64_t n, int64_t k, int pack_a, int pack_b,
                                  int *by_columns, int64_t *step);

#endif
