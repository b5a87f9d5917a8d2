/* Shared helpers of the runtime suites (see rt_test_util.h). */
#include "rt_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const DLDataType RT_F32 = {kDLFloat, 32, 1};
const DLDataType RT_I64 = {kDLInt, 64, 1};
const DLDevice RT_CPU = {kDLCPU, 0};

void *rt_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  ck_assert(n >= 0);
  void *data = malloc((size_t)n + 1);
  ck_assert(data != NULL);
  ck_assert(fread(data, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return data;
}

static void *kernels, *kernels_alt;
static size_t kernels_size, kernels_alt_size;

static void free_kernels(void) {
  free(kernels);
  free(kernels_alt);
}

const void *rt_kernels(size_t *size) {
  if (!kernels) {
    kernels = rt_read_file(NIMBLE_TEST_KERNELS_PATH, &kernels_size);
    atexit(free_kernels);
  }
  *size = kernels_size;
  return kernels;
}

const void *rt_kernels_alt(size_t *size) {
  if (!kernels_alt) {
    rt_kernels(size);
    kernels_alt = rt_read_file(NIMBLE_TEST_KERNELS_ALT_PATH, &kernels_alt_size);
  }
  *size = kernels_alt_size;
  return kernels_alt;
}

nimble_executable_builder *rt_builder(void) {
  nimble_executable_builder *b;
  size_t n;
  const void *k = rt_kernels(&n);
  NIMBLE_ASSERT_OK(nimble_builder_create("test", &b));
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, k, n));
  return b;
}

int64_t rt_kernel(nimble_executable_builder *b, const char *symbol) {
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, symbol, kDLCPU, &k));
  return k;
}

uint32_t rt_function(nimble_executable_builder *b, const char *name, uint32_t params, uint32_t regs) {
  uint32_t f;
  NIMBLE_ASSERT_OK(nimble_builder_add_function(b, name, params, regs, &f));
  return f;
}

void rt_emit_alloc(nimble_executable_builder *b, uint32_t f, int64_t dst, int64_t t1, int64_t t2,
                   DLDataType dt, int32_t ndim, const int64_t *shape) {
  int64_t bytes = dt.bits / 8 * dt.lanes;
  for (int32_t d = 0; d < ndim; d++) bytes *= shape[d];
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t1, bytes);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, t1, t1, 64, kDLCPU, 0, dt.code, dt.bits, dt.lanes);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t2, 0);
  int64_t ops[6 + NIMBLE_MAX_NDIM] = {dst, t1, t2, dt.code, dt.bits, dt.lanes};
  for (int32_t d = 0; d < ndim; d++) ops[6 + d] = shape[d];
  NIMBLE_ASSERT_OK(nimble_builder_emit(b, f, NIMBLE_OP_ALLOC_TENSOR, ops, 6 + (uint32_t)ndim));
}

nimble_tensor_info_t rt_info(const char *name, DLDataType dt, int32_t ndim, const int64_t *dims,
                             const char *const *symbols) {
  nimble_tensor_info_t t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = dt;
  t.device = RT_CPU;
  t.ndim = ndim;
  nimble_sig_dim_t *d = calloc(ndim ? (size_t)ndim : 1, sizeof *d);
  for (int32_t i = 0; i < ndim; i++) {
    d[i].value = dims ? dims[i] : -1;
    d[i].symbol = symbols ? symbols[i] : NULL;
  }
  t.dims = d;
  return t;
}

void rt_info_free(nimble_tensor_info_t *info) { free((nimble_sig_dim_t *)info->dims); }

nimble_status_t rt_try_load(nimble_executable_builder *b, nimble_executable **out) {
  void *data;
  size_t size;
  NIMBLE_RETURN_IF_ERROR(nimble_builder_serialize(b, &data, &size));
  nimble_status_t s = nimble_executable_load_memory(data, size, 0, out);
  free(data);
  return s;
}

nimble_executable *rt_load(nimble_executable_builder *b) {
  nimble_executable *exe = NULL;
  NIMBLE_ASSERT_OK(rt_try_load(b, &exe));
  return exe;
}

DLTensor rt_tensor(void *data, DLDataType dt, int32_t ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device = RT_CPU;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

int64_t rt_run_i64(nimble_vm *vm, const char *entry, const int64_t *inputs, uint32_t n) {
  int64_t copies[16];
  ck_assert(n <= 16);
  for (uint32_t i = 0; i < n; i++) {
    copies[i] = inputs[i];
    DLTensor t = rt_tensor(&copies[i], RT_I64, 0, NULL);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, entry, i, &t));
  }
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, entry));
  ck_assert_uint_eq(nimble_vm_num_outputs(vm), 1);
  DLManagedTensor *out;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &out));
  ck_assert_int_eq(out->dl_tensor.ndim, 0);
  int64_t v = *(int64_t *)out->dl_tensor.data;
  out->deleter(out);
  return v;
}

void rt_add_scalar_entry(nimble_executable_builder *b, const char *name, uint32_t func, uint32_t n) {
  static const char *names[] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"};
  nimble_tensor_info_t in[8], out;
  ck_assert(n <= 8);
  for (uint32_t i = 0; i < n; i++) in[i] = rt_info(names[i], RT_I64, 0, NULL, NULL);
  out = rt_info("out", RT_I64, 0, NULL, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, name, func, in, n, &out, 1));
  for (uint32_t i = 0; i < n; i++) rt_info_free(&in[i]);
  rt_info_free(&out);
}


/* ---- A queue to a thread of its own ----------------------------------- */

static void *handoff_main(void *arg) {
  rt_handoff *h = arg;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (h->head == h->tail && !h->done) pthread_cond_wait(&h->cv, &h->mu);
    if (h->head == h->tail) break;
    void *item = h->items[h->tail % RT_HANDOFF_RING];
    h->tail++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    h->take(item, h->ctx);
    pthread_mutex_lock(&h->mu);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

void rt_handoff_start(rt_handoff *h, void (*take)(void *item, void *ctx), void *ctx) {
  memset(h, 0, sizeof *h);
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->take = take;
  h->ctx = ctx;
  ck_assert_int_eq(pthread_create(&h->thread, NULL, handoff_main, h), 0);
}

void rt_handoff_push(rt_handoff *h, void *item) {
  pthread_mutex_lock(&h->mu);
  while (h->head - h->tail == RT_HANDOFF_RING) pthread_cond_wait(&h->cv, &h->mu);
  h->items[h->head % RT_HANDOFF_RING] = item;
  h->head++;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

void rt_handoff_finish(rt_handoff *h) {
  pthread_mutex_lock(&h->mu);
  h->done = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  ck_assert_int_eq(pthread_join(h->thread, NULL), 0);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}
