/* The kernel cache for suites that compile in-process: the folder in
 * $NIMBLE_KERNEL_CACHE (ctest sets one per suite, BUILD/test-kernel-cache/
 * SUITE; scripts/test.sh seeds the sanitizer stage's folders from the
 * release stage's). A hit skips LLVM, which the sanitizers do not
 * instrument anyway, and leaves everything the suites test (import,
 * passes, lowering, the runtime, what the kernels compute) to run as
 * before: the object is the one LLVM made for the same kernel, target and
 * code generator. Suites that test the code generator itself compile
 * without it.
 *
 * Header-only (the compiler's test programs have no common library):
 * opened on first use, once per source file that includes it (a suite's
 * files share it through their helpers: compute_harness.c's
 * ch_codegen_options, driver_test_util.c's dt_compile_options); NULL
 * without the variable or when the folder cannot be opened (said on stderr: the suite compiles
 * without a cache, only slower). */
#ifndef NIMBLE_TEST_KERNEL_CACHE_H_
#define NIMBLE_TEST_KERNEL_CACHE_H_

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "nimble/kernel_cache.h"

static nimble_kernel_cache_t *nimble_test_kernel_cache_ = NULL;
static pthread_once_t nimble_test_kernel_cache_once_ = PTHREAD_ONCE_INIT;

static void nimble_test_kernel_cache_open_(void) {
  const char *dir = getenv("NIMBLE_KERNEL_CACHE");
  if (!dir || !*dir) return;
  nimble_status_t s = nimble_kernel_cache_open_local(dir, &nimble_test_kernel_cache_);
  if (s) {
    fprintf(stderr, "kernel cache %s: %s (compiling without it)\n", dir, nimble_status_message(s));
    nimble_status_free(s);
    nimble_test_kernel_cache_ = NULL;
  }
}

static inline nimble_kernel_cache_t *nimble_test_kernel_cache(void) {
  pthread_once(&nimble_test_kernel_cache_once_, nimble_test_kernel_cache_open_);
  return nimble_test_kernel_cache_;
}

#endif /* NIMBLE_TEST_KERNEL_CACHE_H_ */
