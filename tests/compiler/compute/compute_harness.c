#include "compute_harness.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nimble/codegen.h"
#include "nimble/nir.h"
#include "nimble/passes.h"
#include "nimble_test.h"
#include "nimble_test_kernel_cache.h"

nimble_module *ch_compile_module(nimble_arena *arena, const char *text) {
  nimble_module *m = NULL;
  NIMBLE_ASSERT_OK(nimble_nir_parse(arena, "test.nir", text, strlen(text), &m));
  NIMBLE_ASSERT_OK(nimble_passes_run_default(m, 2, true, NULL, NULL));
  return m;
}

const char *ch_find_primitive(const nimble_module *m, const char *prefix) {
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const char *n = nimble_module_func_at(m, i)->name;
    if (nimble_passes_is_primitive(n) && strncmp(n, prefix, strlen(prefix)) == 0) return n;
  }
  char *txt = NULL;
  nimble_status_free(nimble_ir_print_module(m, &txt));
  ck_abort_msg("no primitive named %s* in:\n%s", prefix, txt ? txt : "?");
  return NULL;
}

nimble_codegen_options_t ch_codegen_options(void) {
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.cache = nimble_test_kernel_cache();
  return o;
}

void ch_kernel_build(const nimble_module *m, const char *name, bool shape_func, const nimble_compute_options_t *o,
                     ch_kernel *k) {
  memset(k, 0, sizeof *k);
  k->fd = -1;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&k->arena));
  if (shape_func) NIMBLE_ASSERT_OK(nimble_compute_shape_func(m, name, o, k->arena, &k->kernel));
  else NIMBLE_ASSERT_OK(nimble_compute_primitive(m, name, o, k->arena, &k->kernel));
  nimble_codegen_output_t out;
  const nimble_ln_kernel *ks[1] = {k->kernel};
  nimble_codegen_options_t co = ch_codegen_options();
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &co, &out));
  k->fd = memfd_create("nimble-compute", MFD_CLOEXEC);
  ck_assert_int_ge(k->fd, 0);
  size_t done = 0;
  while (done < out.shared_object_size) {
    ssize_t w = write(k->fd, out.shared_object + done, out.shared_object_size - done);
    ck_assert_int_gt(w, 0);
    done += (size_t)w;
  }
  nimble_codegen_output_deinit(&out);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", k->fd);
  k->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(k->handle != NULL, "dlopen: %s", dlerror());
  void *p = dlsym(k->handle, k->kernel->name);
  ck_assert_msg(p != NULL, "dlsym %s: %s", k->kernel->name, dlerror());
  memcpy(&k->fn, &p, sizeof p);
}

void ch_kernel_free(ch_kernel *k) {
  if (k->handle) dlclose(k->handle);
  if (k->fd >= 0) close(k->fd);
  if (k->arena) nimble_ln_arena_destroy(k->arena);
  memset(k, 0, sizeof *k);
  k->fd = -1;
}

static void tensor_init(ch_tensor *t, int rank, const int64_t *shape, uint8_t code, size_t esize) {
  memset(t, 0, sizeof *t);
  t->n = 1;
  for (int i = 0; i < rank; i++) {
    t->shape[i] = shape[i];
    t->n *= (size_t)shape[i];
  }
  t->data = calloc(t->n + 1, esize);
  ck_assert_ptr_nonnull(t->data);
  t->t.data = t->data;
  t->t.device.device_type = kDLCPU;
  t->t.ndim = rank;
  t->t.dtype.code = code;
  t->t.dtype.bits = (uint8_t)(esize * 8);
  t->t.dtype.lanes = 1;
  t->t.shape = t->shape;
}

void ch_tensor_f32(ch_tensor *t, int rank, const int64_t *shape, unsigned *seed, float lo, float hi) {
  tensor_init(t, rank, shape, kDLFloat, 4);
  float *f = t->data;
  for (size_t i = 0; i < t->n + 1; i++) f[i] = lo + (hi - lo) * ((float)rand_r(seed) / (float)RAND_MAX);
}

void ch_tensor_i64(ch_tensor *t, int rank, const int64_t *shape, const int64_t *values) {
  tensor_init(t, rank, shape, kDLInt, 8);
  if (values) memcpy(t->data, values, t->n * sizeof(int64_t));
}

void ch_tensor_u8(ch_tensor *t, int rank, const int64_t *shape, const uint8_t *values) {
  tensor_init(t, rank, shape, kDLUInt, 1);
  if (values) memcpy(t->data, values, t->n);
}

void ch_tensor_free(ch_tensor *t) {
  free(t->data);
  t->data = NULL;
}

/* Tasks in reverse order: a kernel must not depend on task order. */
static int32_t reverse_parallel_for(const nimble_kernel_env_t *env, int64_t n, nimble_parallel_body_fn body,
                                    void *closure) {
  ch_env *e = (ch_env *)env;
  for (int64_t t = n - 1; t >= 0; t--) {
    e->tasks++;
    int32_t rc = body(t, n, closure);
    if (rc) return rc;
  }
  return 0;
}

typedef struct job {
  ch_env *env;
  nimble_parallel_body_fn body;
  void *closure;
  int64_t n;
  atomic_llong next;
  atomic_int rc;
} job;

static void *worker(void *arg) {
  job *j = arg;
  for (;;) {
    long long t = atomic_fetch_add(&j->next, 1);
    if (t >= j->n) break;
    __atomic_fetch_add(&j->env->tasks, 1, __ATOMIC_RELAXED);
    int32_t rc = j->body(t, j->n, j->closure);
    if (rc) {
      int zero = 0;
      atomic_compare_exchange_strong(&j->rc, &zero, rc);
    }
  }
  return NULL;
}

static int32_t threaded_parallel_for(const nimble_kernel_env_t *env, int64_t n, nimble_parallel_body_fn body,
                                     void *closure) {
  ch_env *e = (ch_env *)env;
  job j = {.env = e, .body = body, .closure = closure, .n = n};
  atomic_init(&j.next, 0);
  atomic_init(&j.rc, 0);
  pthread_t th[8];
  int nt = e->threads < 8 ? e->threads : 8, started = 0;
  for (int i = 0; i < nt; i++)
    if (pthread_create(&th[i], NULL, worker, &j) == 0) started++;
  worker(&j); /* the calling thread takes part */
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  return atomic_load(&j.rc);
}

static int32_t reversed_parallel_for(const nimble_kernel_env_t *env, int64_t n, nimble_parallel_body_fn body,
                                     void *closure) {
  ch_env *e = (ch_env *)env;
  for (int64_t t = n - 1; t >= 0; t--) {
    __atomic_fetch_add(&e->tasks, 1, __ATOMIC_RELAXED);
    int32_t rc = body(t, n, closure);
    if (rc) return rc;
  }
  return 0;
}

void ch_env_threads_reversed(ch_env *e, int threads) {
  e->threads = threads;
  e->env.parallel_for = reversed_parallel_for;
  e->env.num_threads = (uint32_t)threads;
}

void ch_env_threads(ch_env *e, int threads) {
  e->threads = threads;
  e->env.parallel_for = threaded_parallel_for;
  e->env.num_threads = (uint32_t)threads;
}

static void set_error(const nimble_kernel_env_t *env, const char *msg) {
  ch_env *e = (ch_env *)env;
  snprintf(e->error, sizeof e->error, "%s", msg);
}

static void *ws_alloc(const nimble_kernel_env_t *env, size_t bytes, size_t align) {
  void *p = NULL;
  return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, bytes ? bytes : 1) ? NULL : p;
}
static void ws_free(const nimble_kernel_env_t *env, void *p) { free(p); }

static void blas_sgemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
              alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

long ch_epilogue_calls;

static void blas_sgemm_epilogue(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                                const nimble_sgemm_epilogue_t *e) {
  __atomic_fetch_add(&ch_epilogue_calls, 1, __ATOMIC_RELAXED);
  blas_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float v = c[i * ldc + j];
      if (e->row_bias) v += e->row_bias[i];
      if (e->col_bias) v += e->col_bias[j];
      if (e->residual) v += e->residual[i * e->ldr + j];
      c[i * ldc + j] = isnan(v) ? v : fminf(fmaxf(v, e->lo), e->hi);
    }
}

void ch_env_epilogue(ch_env *e) { e->env.sgemm_epilogue = blas_sgemm_epilogue; }

long ch_conv3x3_calls;

static void ref_conv3x3(int64_t c, int64_t h, int64_t w, int64_t k, int64_t pad_t, int64_t pad_l, int64_t oh,
                        int64_t ow, const float *x, const float *wt, float *y, const nimble_sgemm_epilogue_t *e) {
  __atomic_fetch_add(&ch_conv3x3_calls, 1, __ATOMIC_RELAXED);
  for (int64_t kk = 0; kk < k; kk++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        double acc = 0;
        for (int64_t cc = 0; cc < c; cc++)
          for (int64_t u = 0; u < 3; u++)
            for (int64_t v = 0; v < 3; v++) {
              int64_t r = i - pad_t + u, q = j - pad_l + v;
              if (r >= 0 && r < h && q >= 0 && q < w)
                acc += (double)wt[((kk * c + cc) * 3 + u) * 3 + v] * x[(cc * h + r) * w + q];
            }
        float f = (float)acc;
        if (e) {
          if (e->row_bias) f += e->row_bias[kk];
          if (e->residual) f += e->residual[kk * e->ldr + i * ow + j];
          f = isnan(f) ? f : fminf(fmaxf(f, e->lo), e->hi);
        }
        y[(kk * oh + i) * ow + j] = f;
      }
}

void ch_env_conv3x3(ch_env *e) { e->env.conv3x3 = ref_conv3x3; }

void ch_env_init(ch_env *e, bool with_sgemm) {
  memset(e, 0, sizeof *e);
  e->env.struct_size = sizeof e->env;
  e->env.abi_version = NIMBLE_KERNEL_ABI_VERSION;
  e->env.parallel_for = reverse_parallel_for;
  e->env.workspace_alloc = ws_alloc;
  e->env.workspace_free = ws_free;
  e->env.set_error = set_error;
  e->env.sgemm = with_sgemm ? blas_sgemm : NULL;
}

int32_t ch_call(const ch_kernel *k, ch_env *e, ch_tensor *const *ts, int n) {
  DLTensor *args[16];
  ck_assert_int_le(n, 16);
  for (int i = 0; i < n; i++) args[i] = &ts[i]->t;
  e->error[0] = '\0';
  return k->fn(args, n, &e->env);
}

void ch_assert_close(const char *what, const float *got, const float *want, size_t n, float atol, float rtol) {
  for (size_t i = 0; i < n; i++) {
    float d = fabsf(got[i] - want[i]);
    if (!(d <= atol + rtol * fabsf(want[i])))
      ck_abort_msg("%s: element %zu is %.9g, want %.9g (of %zu)", what, i, (double)got[i], (double)want[i], n);
  }
}
