/* The BLAS behind the kernel environment's sgemm slot, found at run time.
 *
 * The runtime stays thin and artifacts link nothing but libm, so OpenBLAS is
 * never a link-time dependency: the first VM a process creates dlopen()s it
 * (libopenblas.so.0, then libblas.so.3, Debian's alternatives link; or the
 * library named by the environment variable NIMBLE_BLAS, or none when it
 * says "none"), looks up cblas_sgemm, and from then on every VM's
 * env->sgemm is an adapter with the kernel ABI's signature. When nothing
 * is found the slot stays NULL and kernels use their own loops; nothing
 * fails.
 *
 * The library is loaded once per process and never unloaded.
 */
#ifndef NIMBLE_RUNTIME_BLAS_LOADER_H
#define NIMBLE_RUNTIME_BLAS_LOADER_H

#include <stdint.h>

#include "nimble/kernel_abi.h"
#include "nimble/status.h"

/* CBLAS's cblas_sgemm with 32-bit integers (CBLAS_ORDER and
 * CBLAS_TRANSPOSE are ints: 101 row-major, 111 no transpose, 112
 * transpose). ILP64 builds export it under other names and are not used. */
typedef void (*nimble_cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                                      float alpha, const float *a, int lda, const float *b, int ldb,
                                      float beta, float *c, int ldc);

/* CBLAS's cblas_sgemv (order, trans, m, n, alpha, a, lda, x, incx, beta, y,
 * incy), 32-bit integers. Optional: the adapter sends products with one
 * row or one column of C there, where sgemm would pack a whole operand for
 * a single matrix-vector product. */
typedef void (*nimble_cblas_sgemv_fn)(int order, int trans, int m, int n, float alpha, const float *a,
                                      int lda, const float *x, int incx, float beta, float *y, int incy);

/* The process-wide sgemm for env->sgemm (thread-safe, decided once per
 * process; the first call loads the library). By NIMBLE_SGEMM:
 *   unset, "" or "auto": per call, the runtime's own kernels
 *     (vm/sgemm_own.h) or the BLAS, whichever was measured faster for that
 *     instruction set and shape; the own kernels alone when there is no BLAS;
 *   "own": the own kernels; "blas": the BLAS (adapter below);
 *   "none": NULL (kernels use their own loops).
 * NULL also when the setting cannot be honoured (an unknown value, "blas"
 * with no BLAS): nimble_sgemm_check() then says why. */
nimble_sgemm_fn nimble_blas_sgemm(void);

/* The function nimble_blas_sgemm()'s choice computes this product with:
 * under "auto", the own kernels or the BLAS adapter as measured for its
 * shape; else nimble_blas_sgemm() itself. The kernel environment cuts a
 * product into blocks over threads and computes every block with this
 * one choice (vm/sgemm_threads.h). */
nimble_sgemm_fn nimble_blas_sgemm_pick(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                       const float *a, int64_t lda, const float *b, int64_t ldb);

/* NIMBLE_INVALID_ARGUMENT naming NIMBLE_SGEMM when its value is unknown or
 * asks for a BLAS that did not load; OK otherwise. VM creation fails with
 * it, so a benchmark that asked for the BLAS never measures something else. */
nimble_status_t nimble_sgemm_check(void);

/* nimble_runtime_blas_name() (runtime.h) says what nimble_blas_sgemm()
 * found, and is defined with it. */

/* One opened library. */
typedef struct nimble_blas_lib_t {
  void *handle;                /* from dlopen; NULL when nothing is open */
  nimble_cblas_sgemm_fn sgemm; /* inside handle */
  nimble_cblas_sgemv_fn sgemv; /* inside handle; NULL when it has none */
  char file[192];              /* the name it was opened by */
  char name[384];              /* as nimble_runtime_blas_name() describes it */
} nimble_blas_lib_t;

/* Opens a BLAS as NIMBLE_BLAS = `spec` would: NULL or "" searches the
 * default names, "none" refuses (NIMBLE_NOT_FOUND), anything else is a
 * file name for dlopen. Does not touch the process-wide choice or OpenBLAS's
 * thread count. NIMBLE_NOT_FOUND names each library tried and why it was
 * not used. On success the caller closes *out with nimble_blas_close. */
nimble_status_t nimble_blas_open(const char *spec, nimble_blas_lib_t *out);

/* dlclose()s what nimble_blas_open opened. NULL or an empty lib is fine. */
void nimble_blas_close(nimble_blas_lib_t *lib);

/* The adapter's body: C = alpha * op(A) * op(B) + beta * C with the kernel
 * ABI's 64-bit sizes, through `fn` in calls whose m, n and k are at most
 * `limit` (INT32_MAX for a real BLAS; smaller in tests). Empty products
 * (m, n or k zero, or alpha zero) only scale C by beta, with beta == 0
 * clearing C as BLAS does; leading dimensions over INT32_MAX or smaller
 * than CBLAS accepts are computed with plain loops here, so the call is
 * never refused. */
void nimble_blas_sgemm_split(nimble_cblas_sgemm_fn fn, int64_t limit, int32_t trans_a, int32_t trans_b,
                             int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                             const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* C = alpha * op(A) * op(B) + beta * C as one cblas_sgemv call when m or n
 * is 1 (a matrix-vector product), with the kernel ABI's conventions (beta
 * == 0 clears C, NaNs included). Returns 0, having done nothing, when the
 * product is not of that form or does not fit CBLAS's ints or leading
 * dimension rules; the caller then goes on with nimble_blas_sgemm_split. */
int nimble_blas_sgemm_as_gemv(nimble_cblas_sgemv_fn fn, int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                              float beta, float *c, int64_t ldc);

#endif
