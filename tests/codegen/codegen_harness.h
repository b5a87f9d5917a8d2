/* Test harness for generated kernels: build kernels into a shared object,
 * load it from a memfd, make DLTensors, and a test env whose parallel_for
 * runs tasks on pthreads and whose sgemm (optional) is OpenBLAS. */
#ifndef NIMBLE_CODEGEN_HARNESS_H
#define NIMBLE_CODEGEN_HARNESS_H

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cblas.h>

#include "nimble/codegen.h"
#include "op_builders.h"
#include "nimble/kernel_abi.h"
#include "nimble_test.h"

/* ---- loading ---- */

typedef struct harness_lib {
  void *handle;
  int fd;
} harness_lib;

static inline void harness_load_bytes(const uint8_t *so, size_t n, harness_lib *lib) {
  lib->fd = memfd_create("nimble-kernels", MFD_CLOEXEC);
  ck_assert_int_ge(lib->fd, 0);
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(lib->fd, so + done, n - done);
    ck_assert_int_gt(w, 0);
    done += (size_t)w;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", lib->fd);
  lib->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(lib->handle != NULL, "dlopen: %s", dlerror());
}

/* Builds the kernels for x86_64 and loads the result. */
static inline void harness_build_and_load(const nimble_ln_kernel *const *ks, size_t n, harness_lib *lib) {
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, n, NULL, &out));
  ck_assert_ptr_nonnull(out.shared_object);
  harness_load_bytes(out.shared_object, out.shared_object_size, lib);
  nimble_codegen_output_deinit(&out);
}

static inline nimble_kernel_fn harness_sym(harness_lib *lib, const char *name) {
  void *p = dlsym(lib->handle, name);
  ck_assert_msg(p != NULL, "dlsym %s: %s", name, dlerror());
  nimble_kernel_fn fn;
  memcpy(&fn, &p, sizeof fn);
  return fn;
}

static inline void harness_unload(harness_lib *lib) {
  if (lib->handle) dlclose(lib->handle);
  if (lib->fd >= 0) close(lib->fd);
  lib->handle = NULL;
  lib->fd = -1;
}

/* ---- tensors ---- */

typedef struct harness_tensor {
  DLTensor t;
  int64_t shape[8];
  float *f;
  size_t n;
} harness_tensor;

static inline size_t harness_numel(int rank, const int64_t *shape) {
  size_t n = 1;
  for (int i = 0; i < rank; i++) n *= (size_t)shape[i];
  return n;
}

/* A float tensor, filled with uniform values in [lo, hi) from *seed. */
static inline void harness_tensor_init(harness_tensor *h, int rank, const int64_t *shape, unsigned *seed,
                                       float lo, float hi) {
  memset(h, 0, sizeof *h);
  if (rank > 0) memcpy(h->shape, shape, (size_t)rank * sizeof *shape);
  h->n = harness_numel(rank, shape);
  /* One extra element so a zero-size tensor still has a valid pointer. */
  h->f = malloc((h->n + 1) * sizeof(float));
  ck_assert_ptr_nonnull(h->f);
  for (size_t i = 0; i < h->n + 1; i++) h->f[i] = lo + (hi - lo) * ((float)rand_r(seed) / (float)RAND_MAX);
  h->t.data = h->f;
  h->t.device.device_type = kDLCPU;
  h->t.ndim = rank;
  h->t.dtype.code = kDLFloat;
  h->t.dtype.bits = 32;
  h->t.dtype.lanes = 1;
  h->t.shape = h->shape;
}

static inline void harness_tensor_deinit(harness_tensor *h) {
  free(h->f);
  h->f = NULL;
}

/* ---- env ---- */

typedef struct harness_env {
  nimble_kernel_env_t env;
  char error[512];
  int threads;
  atomic_long parallel_calls;
  atomic_long tasks_run;
} harness_env;

typedef struct harness_job {
  const harness_env *he;
  nimble_parallel_body_fn body;
  void *closure;
  int64_t n;
  atomic_long next;
  atomic_int rc;
} harness_job;

static inline void *harness_worker(void *arg) {
  harness_job *job = arg;
  for (;;) {
    long t = atomic_fetch_add(&job->next, 1);
    if (t >= job->n) break;
    int32_t rc = job->body(t, job->n, job->closure);
    atomic_fetch_add((atomic_long *)&job->he->tasks_run, 1);
    if (rc) {
      int zero = 0;
      atomic_compare_exchange_strong(&job->rc, &zero, rc);
    }
  }
  return NULL;
}

static inline int32_t harness_parallel_for(const nimble_kernel_env_t *env, int64_t n, nimble_parallel_body_fn body,
                                           void *closure) {
  const harness_env *he = (const harness_env *)env;
  atomic_fetch_add((atomic_long *)&he->parallel_calls, 1);
  harness_job job = {.he = he, .body = body, .closure = closure, .n = n};
  atomic_init(&job.next, 0);
  atomic_init(&job.rc, 0);
  pthread_t th[8];
  int nt = he->threads < 8 ? he->threads : 8;
  for (int i = 0; i < nt; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, harness_worker, &job), 0);
  harness_worker(&job); /* the calling thread takes part */
  for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
  return atomic_load(&job.rc);
}

static inline void *harness_ws_alloc(const nimble_kernel_env_t *env, size_t bytes, size_t align) {
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}
static inline void harness_ws_free(const nimble_kernel_env_t *env, void *p) { free(p); }
static inline void harness_set_error(const nimble_kernel_env_t *env, const char *msg) {
  harness_env *he = (harness_env *)env;
  snprintf(he->error, sizeof he->error, "%s", msg);
}

static inline void harness_blas_sgemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha,
                                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                                      float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
              (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

/* threads: extra worker threads (0: parallel_for runs tasks on the caller
 * only; -1: parallel_for is NULL). with_sgemm: provide OpenBLAS. */
static inline void harness_env_init(harness_env *he, int threads, int with_sgemm) {
  memset(he, 0, sizeof *he);
  he->env.struct_size = sizeof(nimble_kernel_env_t);
  he->env.abi_version = NIMBLE_KERNEL_ABI_VERSION;
  he->env.parallel_for = threads >= 0 ? harness_parallel_for : NULL;
  he->env.workspace_alloc = harness_ws_alloc;
  he->env.workspace_free = harness_ws_free;
  he->env.set_error = harness_set_error;
  he->env.sgemm = with_sgemm ? harness_blas_sgemm : NULL;
  he->threads = threads > 0 ? threads : 0;
  atomic_init(&he->parallel_calls, 0);
  atomic_init(&he->tasks_run, 0);
}

/* ---- comparison ---- */

static inline void harness_expect_close(const float *got, const double *want, size_t n, double rel, double abs_tol,
                                        const char *what) {
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    /* Plain ifs: Check's assertions record a mark point (a write to a
     * pipe) each time they pass, which is slow in loops over millions. */
    if (isnan(want[i])) {
      if (!isnan(got[i])) ck_abort_msg("%s[%zu]: got %g, want NaN", what, i, (double)got[i]);
      continue;
    }
    if (!(d <= abs_tol + rel * fabs(want[i])))
      ck_abort_msg("%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i], want[i]);
  }
}

#endif
