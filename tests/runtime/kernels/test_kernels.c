/* Kernels for the runtime tests, written against nimble/kernel_abi.h the
 * way generated code will be: inputs then outputs, outputs preallocated,
 * no allocation of their own, errors through the return code and
 * env->set_error. Built as a MODULE library whose bytes the tests embed in
 * executables. */
#include <stdint.h>
#include <string.h>

#include "nimble/kernel_abi.h"

#define EXPORT __attribute__((visibility("default")))

static int64_t numel(const DLTensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static int same_shape(const DLTensor *a, const DLTensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static int is_f32(const DLTensor *t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32; }
static int is_i64(const DLTensor *t) { return t->dtype.code == kDLInt && t->dtype.bits == 64; }

typedef struct vadd_job {
  const float *a, *b;
  float *c;
  int64_t n;
} vadd_job;

static int32_t vadd_task(int64_t task, int64_t n_tasks, void *closure) {
  vadd_job *j = closure;
  int64_t lo = j->n * task / n_tasks, hi = j->n * (task + 1) / n_tasks;
#ifdef NIMBLE_ALT_KERNELS
  /* The alternative library differs observably from the main one. */
  for (int64_t i = lo; i < hi; i++) j->c[i] = j->a[i] + j->b[i] + 1000.0f;
#else
  for (int64_t i = lo; i < hi; i++) j->c[i] = j->a[i] + j->b[i];
#endif
  return 0;
}

/* c = a + b, float32, any equal shapes; split over the thread pool. */
EXPORT int32_t vadd_f32(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 3) {
    env->set_error(env, "vadd_f32 takes 3 arguments");
    return 1;
  }
  if (!is_f32(args[0]) || !is_f32(args[1]) || !is_f32(args[2]) || !same_shape(args[0], args[1]) ||
      !same_shape(args[0], args[2])) {
    env->set_error(env, "vadd_f32: operands must be float32 of one shape");
    return 2;
  }
  vadd_job j = {args[0]->data, args[1]->data, args[2]->data, numel(args[0])};
  int64_t tasks = j.n >= 4096 ? 8 : 1;
  return env->parallel_for(env, tasks, vadd_task, &j);
}

/* c[m,n] = a[m,k] @ b[k,n], float32; uses a scratch row from the workspace
 * to exercise workspace_alloc. */
EXPORT int32_t matmul_f32(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 3) return 1;
  const DLTensor *A = args[0], *B = args[1], *C = args[2];
  if (A->ndim != 2 || B->ndim != 2 || C->ndim != 2 || A->shape[1] != B->shape[0] ||
      C->shape[0] != A->shape[0] || C->shape[1] != B->shape[1]) {
    env->set_error(env, "matmul_f32: shapes do not agree");
    return 2;
  }
  int64_t m = A->shape[0], k = A->shape[1], n = B->shape[1];
  const float *a = A->data, *b = B->data;
  float *c = C->data;
  float *row = env->workspace_alloc(env, (size_t)n * sizeof(float), 64);
  if (!row && n) {
    env->set_error(env, "matmul_f32: no workspace");
    return 3;
  }
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) row[j] = 0.0f;
    for (int64_t p = 0; p < k; p++)
      for (int64_t j = 0; j < n; j++) row[j] += a[i * k + p] * b[p * n + j];
    memcpy(c + i * n, row, (size_t)n * sizeof(float));
  }
  env->workspace_free(env, row);
  return 0;
}

#define I64_BINARY(name, expr)                                                                   \
  EXPORT int32_t name(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) { \
    if (num_args != 3 || !is_i64(args[0]) || !is_i64(args[1]) || !is_i64(args[2]) ||            \
        numel(args[0]) != numel(args[2]) || numel(args[1]) != numel(args[2])) {                  \
      env->set_error(env, #name ": expects three int64 tensors of one size");                    \
      return 2;                                                                                  \
    }                                                                                            \
    const int64_t *a = args[0]->data, *b = args[1]->data;                                        \
    int64_t *c = args[2]->data;                                                                  \
    for (int64_t i = 0; i < numel(args[2]); i++) c[i] = (expr);                                  \
    return 0;                                                                                    \
  }

I64_BINARY(add_i64, a[i] + b[i])
I64_BINARY(sub_i64, a[i] - b[i])
I64_BINARY(mul_i64, a[i] * b[i])
I64_BINARY(lt_i64, a[i] < b[i] ? 1 : 0)

/* out = sum of all elements of a float32 tensor (a float32 scalar). */
EXPORT int32_t sum_f32(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 2 || !is_f32(args[0]) || !is_f32(args[1]) || numel(args[1]) != 1) return 2;
  const float *a = args[0]->data;
  double s = 0;
  for (int64_t i = 0; i < numel(args[0]); i++) s += a[i];
  *(float *)args[1]->data = (float)s;
  return 0;
}

/* Fills its output with 1.0f: a producer for dynamically shaped tensors. */
EXPORT int32_t ones_f32(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 1 || !is_f32(args[0])) return 2;
  float *o = args[0]->data;
  for (int64_t i = 0; i < numel(args[0]); i++) o[i] = 1.0f;
  return 0;
}

/* Always fails, with a message. */
EXPORT int32_t failing_kernel(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  env->set_error(env, "the failing kernel failed on purpose");
  return 7;
}

/* Reports the environment's version fields: out[0] = struct_size,
 * out[1] = abi_version, out[2] = 1 when sgemm is NULL. */
EXPORT int32_t env_probe(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 1 || !is_i64(args[0]) || numel(args[0]) != 3) return 2;
  int64_t *o = args[0]->data;
  o[0] = env->struct_size;
  o[1] = env->abi_version;
  o[2] = env->sgemm == NULL;
  return 0;
}

/* A shape function: out = prod(shape) * elem_size, all int64 (the byte size
 * of a tensor of that shape). */
EXPORT int32_t nbytes_i64(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 3 || !is_i64(args[0]) || args[0]->ndim != 1 || !is_i64(args[1]) || !is_i64(args[2]))
    return 2;
  const int64_t *shape = args[0]->data;
  int64_t n = *(const int64_t *)args[1]->data;
  for (int64_t i = 0; i < args[0]->shape[0]; i++) n *= shape[i];
  *(int64_t *)args[2]->data = n;
  return 0;
}

/* y = x, float32 of any shape, with y[0] set to env->num_threads: what a
 * kernel was told it may use (test_vm_adapt). */
EXPORT int32_t note_threads_f32(DLTensor *const *args, int32_t num_args, const nimble_kernel_env_t *env) {
  if (num_args != 2 || !is_f32(args[0]) || !is_f32(args[1]) || !same_shape(args[0], args[1]) || !numel(args[0])) {
    env->set_error(env, "note_threads_f32 takes a non-empty float32 x and y of its shape");
    return 1;
  }
  memcpy(args[1]->data, args[0]->data, (size_t)numel(args[0]) * sizeof(float));
  ((float *)args[1]->data)[0] = (float)env->num_threads;
  return 0;
}
