/* Generated kernels through the real runtime: the .so is packed into an
 * executable with the runtime's builder, loaded by its loader and called by
 * the VM, whose kernel env (thread pool parallel_for, set_error) is the one
 * artifacts meet in production. */
#include "codegen_harness.h"

#include "nimble/bytecode.h"
#include "nimble/executable_builder.h"
#include "nimble/runtime.h"

static const DLDataType F32 = {kDLFloat, 32, 1};

static void emit(nimble_executable_builder *b, uint32_t f, int op, const int64_t *ops, uint32_t n) {
  NIMBLE_ASSERT_OK(nimble_builder_emit(b, f, op, ops, n));
}
#define EMIT(b, f, op, ...) \
  emit((b), (f), (op), (const int64_t[]){__VA_ARGS__}, (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* dst = a new f32 tensor of `shape` (registers t1, t2 are scratch). */
static void emit_alloc(nimble_executable_builder *b, uint32_t f, int64_t dst, int64_t t1, int64_t t2, int32_t ndim,
                       const int64_t *shape) {
  int64_t bytes = 4;
  for (int32_t d = 0; d < ndim; d++) bytes *= shape[d];
  EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t1, bytes);
  EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, t1, t1, 64, kDLCPU, 0, kDLFloat, 32, 1);
  EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, t2, 0);
  int64_t ops[6 + 8] = {dst, t1, t2, kDLFloat, 32, 1};
  for (int32_t d = 0; d < ndim; d++) ops[6 + d] = shape[d];
  emit(b, f, NIMBLE_OP_ALLOC_TENSOR, ops, 6 + (uint32_t)ndim);
}

/* A signature entry; dims NULL means every extent is Any. */
static nimble_tensor_info_t info(const char *name, int32_t ndim, const int64_t *dims, nimble_sig_dim_t *storage) {
  nimble_tensor_info_t t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dtype = F32;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  for (int32_t i = 0; i < ndim; i++) {
    storage[i].value = dims ? dims[i] : -1;
    storage[i].symbol = dims ? NULL : "";
  }
  t.dims = storage;
  return t;
}

static nimble_ln_arena *arena;
static nimble_codegen_output_t lib_out;

static void build(void) {
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&arena));
  nimble_ln_kernel *vadd, *dense;
  int r[2] = {1, 1};
  static const nimble_ln_op_t add = NIMBLE_LN_ADD;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(arena, "vadd", 2, r, 1, nimble_codegen_combine_binary, (void *)&add, &vadd));
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(arena, "dense_relu", NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU, &dense));
  const nimble_ln_kernel *ks[] = {vadd, dense};
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 2, NULL, &lib_out));
}

static void unbuild(void) {
  nimble_codegen_output_deinit(&lib_out);
  nimble_ln_arena_destroy(arena);
}

/* main(a, b) -> vadd(a, b) into an output of out_n elements; inputs are
 * declared with extent in_n (-1: Any). */
static nimble_vm *vadd_vm(int64_t out_n, int64_t in_n, uint32_t threads) {
  nimble_executable_builder *b;
  NIMBLE_ASSERT_OK(nimble_builder_create("x86_64-linux-gnu", &b));
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, lib_out.shared_object,
                                                     lib_out.shared_object_size));
  uint32_t k, f;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "vadd", kDLCPU, &k));
  NIMBLE_ASSERT_OK(nimble_builder_add_function(b, "main", 2, 6, &f));
  emit_alloc(b, f, 2, 3, 4, 1, &out_n);
  EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_sig_dim_t d0[1], d1[1], d2[1];
  nimble_tensor_info_t in[2] = {info("a", 1, in_n >= 0 ? &in_n : NULL, d0), info("b", 1, in_n >= 0 ? &in_n : NULL, d1)};
  nimble_tensor_info_t out = info("c", 1, &out_n, d2);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  void *data;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, &size));
  nimble_builder_destroy(b);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(data, size, 0, &exe));
  free(data);
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.num_threads = threads;
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &o, &vm));
  nimble_executable_release(exe);
  return vm;
}

START_TEST(test_vm_runs_generated_vector_add_on_its_thread_pool) {
  const int64_t n = 100003;
  nimble_vm *vm = vadd_vm(n, n, 4);
  float *a = malloc(n * sizeof(float)), *bb = malloc(n * sizeof(float));
  for (int64_t i = 0; i < n; i++) a[i] = (float)i * 0.5f, bb[i] = (float)(i % 11) - 5.0f;
  int64_t shape[1] = {n};
  DLTensor ta = {a, {kDLCPU, 0}, 1, F32, shape, NULL, 0}, tb = {bb, {kDLCPU, 0}, 1, F32, shape, NULL, 0};
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *c;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &c));
  const float *y = c->dl_tensor.data;
  for (int64_t i = 0; i < n; i++)
    if (y[i] != a[i] + bb[i]) ck_abort_msg("c[%lld] = %g, want %g", (long long)i, (double)y[i], (double)(a[i] + bb[i]));
  c->deleter(c);
  nimble_vm_destroy(vm);
  free(a);
  free(bb);
}
END_TEST

START_TEST(test_kernel_shape_error_reaches_the_vm_status) {
  /* Inputs are declared Any, so the VM lets a 5-element input reach a
   * kernel whose output has 4: the kernel's own check reports it. */
  nimble_vm *vm = vadd_vm(4, -1, 2);
  float a[5] = {1, 2, 3, 4, 5};
  int64_t shape[1] = {5};
  DLTensor t = {a, {kDLCPU, 0}, 1, F32, shape, NULL, 0};
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &t));
  nimble_status_t s = nimble_vm_invoke(vm, "main");
  ck_assert_ptr_nonnull(s);
  /* The kernel's message, after the VM's naming of the kernel it called. */
  ck_assert_msg(strstr(nimble_status_message(s), "kernel 'vadd' failed with code 1: input 0 axis 0: extent is neither 1 "
                                                 "nor the output's") != NULL,
                "message: %s", nimble_status_message(s));
  nimble_status_free(s);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_vm_runs_fused_dense_bias_relu) {
  const int64_t M = 37, N = 300, K = 129;
  nimble_executable_builder *b;
  NIMBLE_ASSERT_OK(nimble_builder_create("x86_64-linux-gnu", &b));
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CPU, lib_out.shared_object,
                                                     lib_out.shared_object_size));
  uint32_t k, f;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "dense_relu", kDLCPU, &k));
  NIMBLE_ASSERT_OK(nimble_builder_add_function(b, "main", 3, 7, &f));
  int64_t ys[2] = {M, N}, xs[2] = {M, K}, ws[2] = {K, N};
  emit_alloc(b, f, 3, 4, 5, 2, ys);
  EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2, 3);
  EMIT(b, f, NIMBLE_OP_RET, 3);
  nimble_sig_dim_t d[4][2];
  nimble_tensor_info_t in[3] = {info("x", 2, xs, d[0]), info("w", 2, ws, d[1]), info("b", 1, &N, d[2])};
  nimble_tensor_info_t out = info("y", 2, ys, d[3]);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 3, &out, 1));
  void *data;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, &size));
  nimble_builder_destroy(b);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(data, size, 0, &exe));
  free(data);
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.num_threads = 3;
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &o, &vm));
  nimble_executable_release(exe);
  unsigned seed = 3;
  harness_tensor x, w, bias;
  harness_tensor_init(&x, 2, xs, &seed, -1, 1);
  harness_tensor_init(&w, 2, ws, &seed, -1, 1);
  harness_tensor_init(&bias, 1, &N, &seed, -1, 1);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &x.t));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &w.t));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 2, &bias.t));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *y;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &y));
  double *want = malloc((size_t)(M * N) * sizeof *want);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = bias.f[j];
      for (int64_t kk = 0; kk < K; kk++) acc += (double)x.f[i * K + kk] * w.f[kk * N + j];
      want[i * N + j] = acc > 0 ? acc : 0;
    }
  harness_expect_close(y->dl_tensor.data, want, (size_t)(M * N), 1e-4, 1e-4, "dense_relu via VM");
  free(want);
  y->deleter(y);
  nimble_vm_destroy(vm);
  harness_tensor_deinit(&x);
  harness_tensor_deinit(&w);
  harness_tensor_deinit(&bias);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_runtime");
  TCase *tc = tcase_create("vm");
  tcase_add_unchecked_fixture(tc, build, unbuild);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_vm_runs_generated_vector_add_on_its_thread_pool);
  tcase_add_test(tc, test_kernel_shape_error_reaches_the_vm_status);
  tcase_add_test(tc, test_vm_runs_fused_dense_bias_relu);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
