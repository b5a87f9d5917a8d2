/* The CUDA device (runtime/src/device/cuda/).
 *
 * Without arguments: what holds with or without a CUDA driver — a CPU
 * executable never touches the driver, an executable with CUDA kernels is
 * refused at load with the driver's error where none loads, loads without
 * its kernels for inspection, kernels are checked against their device's
 * memory, and the launch rule. The cases that need a driver to be absent
 * say `skipped: a CUDA driver is present` where one is.
 *
 * With "needs-cuda": a hand-written PTX kernel (kernels/test_vadd.ptx,
 * JIT-compiled by the driver) adds two vectors on the GPU between
 * DeviceCopy in and out, compared with the sum computed here in C. Exits 77
 * (ctest: skipped) printing `skipped: no CUDA driver` where the driver
 * does not load.
 *
 * With "wrong-driver" (NIMBLE_CUDA_DRIVER set by ctest to a library that is
 * no CUDA driver): the error names the missing entry point. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_driver.h"
#include "rt_test_util.h"

static const char *kPtxPath = NIMBLE_TEST_PTX_PATH;

/* Whether libcuda.so.1 opens, asked without initialising CUDA (a process
 * that forks test cases must not). */
static int driver_present(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 0;
  dlclose(h);
  return 1;
}

static void *ptx(size_t *size) { return rt_read_file(kPtxPath, size); }

/* main(a, b) -> a + b on the GPU, float32 [n]: both inputs copied to the
 * device, the sum into device storage, copied within the device, then back
 * to the host. `kernel` is the CUDA kernel's symbol. */
static nimble_executable_builder *cuda_vadd_builder(const char *kernel, const void *module,
                                                    size_t module_size, int64_t n) {
  nimble_executable_builder *b = rt_builder(); /* with the CPU kernels too */
  if (module)
    NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, module, module_size));
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, kernel, kDLCUDA, &k));
  uint32_t f = rt_function(b, "main", 2, 10);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 2, 0, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 1, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 4, n * 4);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 7, 5, 6, kDLFloat, 32, 1, n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 2, 3, 7);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 8, 7, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 9, 8, kDLCPU, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 9);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, &n, NULL), rt_info("b", RT_F32, 1, &n, NULL)};
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  return b;
}

/* main(a, b) -> a + b with the CPU kernel vadd_f32, float32 [n]. */
static nimble_executable_builder *cpu_vadd_builder(int64_t n, DLDeviceType input_device) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "vadd_f32");
  uint32_t f = rt_function(b, "main", 2, 5);
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 1, &n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1, 2);
  RT_EMIT(b, f, NIMBLE_OP_RET, 2);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, &n, NULL), rt_info("b", RT_F32, 1, &n, NULL)};
  in[0].device.device_type = input_device;
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  return b;
}

static void fill(float *a, float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    a[i] = (float)((i * 7919) % 1000) * 0.25f - 100.0f;
    b[i] = (float)((i * 104729) % 997) * 0.5f + 0.125f;
  }
}

/* Runs main(a, b) and checks the output against the sum computed here. */
static void run_and_check_vadd(nimble_vm *vm, int64_t n) {
  float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  ck_assert(a && b);
  fill(a, b, n);
  int64_t shape[1] = {n};
  DLTensor ta = rt_tensor(a, RT_F32, 1, shape), tb = rt_tensor(b, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *out;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &out));
  ck_assert_int_eq(out->dl_tensor.device.device_type, kDLCPU);
  ck_assert_int_eq(out->dl_tensor.ndim, 1);
  ck_assert_int_eq(out->dl_tensor.shape[0], n);
  const float *c = out->dl_tensor.data;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < n; i++) {
    float want = a[i] + b[i];
    if (memcmp(&c[i], &want, sizeof want) != 0) {
      if (first < 0) first = i;
      wrong++;
    }
  }
  ck_assert_msg(wrong == 0, "%lld of %lld elements differ, the first at %lld: %g, want %g",
                (long long)wrong, (long long)n, (long long)first, first >= 0 ? c[first] : 0.0,
                first >= 0 ? a[first] + b[first] : 0.0);
  out->deleter(out);
  free(a);
  free(b);
}

/* ---- without a driver (or whatever the machine has) ---- */

START_TEST(test_a_cpu_executable_runs_without_touching_the_driver) {
  nimble_executable_builder *b = cpu_vadd_builder(1000, kDLCPU);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  run_and_check_vadd(vm, 1000);
  nimble_memory_stats_t st;
  NIMBLE_ASSERT_ERROR(nimble_vm_memory_stats(vm, kDLCUDA, &st), NIMBLE_NOT_FOUND,
                      "the VM has no cuda pool");
  NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCPU, &st));
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  ck_assert_msg(!nimble_cuda_driver_tried(), "a CPU executable asked for the CUDA driver");
}
END_TEST

START_TEST(test_a_cuda_executable_is_refused_at_load_without_a_driver) {
  if (driver_present()) {
    printf("test_a_cuda_executable_is_refused_at_load_without_a_driver: skipped: a CUDA driver is "
           "present\n");
    return;
  }
  size_t n;
  void *module = ptx(&n);
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", module, n, 1000);
  nimble_executable *exe = NULL;
  nimble_status_t s = rt_try_load(b, &exe);
  ck_assert_msg(s != NULL, "a CUDA executable loaded without a driver");
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_FAILED_PRECONDITION);
  const char *msg = nimble_status_message(s);
  ck_assert_msg(strncmp(msg, "cuda: cannot load libcuda.so.1 (", 32) == 0, "message: %s", msg);
  const char *tail = "): this executable has cuda kernels";
  ck_assert_msg(strlen(msg) > strlen(tail) && strcmp(msg + strlen(msg) - strlen(tail), tail) == 0,
                "message: %s", msg);
  nimble_status_free(s);

  /* The same through separate parts, as the artifact store keeps them. */
  nimble_executable_part_t parts[5];
  void *blobs[5];
  static const nimble_part_kind_t kinds[5] = {NIMBLE_PART_METADATA, NIMBLE_PART_BYTECODE,
                                              NIMBLE_PART_CONSTANTS, NIMBLE_PART_KERNELS_CPU,
                                              NIMBLE_PART_KERNELS_CUDA};
  for (int i = 0; i < 5; i++) {
    size_t size;
    NIMBLE_ASSERT_OK(nimble_builder_serialize_part(b, kinds[i], &blobs[i], &size));
    parts[i].kind = kinds[i];
    parts[i].data = blobs[i];
    parts[i].size = size;
  }
  NIMBLE_ASSERT_ERROR(nimble_executable_load_parts(parts, 5, 0, &exe), NIMBLE_FAILED_PRECONDITION,
                      "): this executable has cuda kernels");
  for (int i = 0; i < 5; i++) free(blobs[i]);
  nimble_builder_destroy(b);
  free(module);
}
END_TEST

START_TEST(test_a_cuda_executable_loads_for_inspection_without_its_kernels) {
  size_t n;
  void *module = ptx(&n);
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", module, n, 1000);
  void *data;
  size_t size;
  NIMBLE_ASSERT_OK(nimble_builder_serialize(b, &data, &size));
  nimble_builder_destroy(b);
  nimble_executable *exe;
  NIMBLE_ASSERT_OK(nimble_executable_load_memory(data, size, NIMBLE_LOAD_NO_KERNELS, &exe));
  ck_assert_uint_eq(nimble_executable_num_entries(exe), 1);
  ck_assert_str_eq(nimble_executable_entry_at(exe, 0)->name, "main");
  nimble_vm *vm;
  NIMBLE_ASSERT_ERROR(nimble_vm_create(exe, NULL, &vm), NIMBLE_FAILED_PRECONDITION,
                      "loaded without its kernels");
  nimble_executable_release(exe);
  free(data);
  free(module);
  ck_assert_msg(!nimble_cuda_driver_tried(), "loading without kernels asked for the CUDA driver");
}
END_TEST

START_TEST(test_a_cuda_kernel_without_a_cuda_part_is_refused) {
  nimble_executable *exe;
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", NULL, 0, 1000);
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_INVALID_ARGUMENT,
                      "kernel 'nimble_test_vadd' needs a cuda kernel library, and the executable "
                      "has none");
  nimble_builder_destroy(b);
  ck_assert(!nimble_cuda_driver_tried());
}
END_TEST

START_TEST(test_a_cpu_kernel_refuses_a_tensor_on_cuda) {
  /* The entry declares input 'a' on cuda and hands it to a CPU kernel; the
   * VM refuses before any kernel could read device memory as host memory.
   * The data pointer is never dereferenced. */
  nimble_executable_builder *builder = cpu_vadd_builder(4, kDLCUDA);
  nimble_executable *exe = rt_load(builder);
  nimble_builder_destroy(builder);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float host[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor a = rt_tensor((void *)(uintptr_t)0x1000, RT_F32, 1, shape);
  a.device.device_type = kDLCUDA;
  DLTensor b = rt_tensor(host, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &a));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &b));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_INVALID_ARGUMENT,
                      "pc 4 (InvokePacked): argument 0 of cpu kernel 'vadd_f32' is on cuda");
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  ck_assert(!nimble_cuda_driver_tried());
}
END_TEST

START_TEST(test_cuda_memory_without_a_driver_names_the_instruction) {
  if (driver_present()) {
    printf("test_cuda_memory_without_a_driver_names_the_instruction: skipped: a CUDA driver is "
           "present\n");
    return;
  }
  /* No CUDA kernels, so the executable loads; its first CUDA allocation
   * asks for the driver. */
  nimble_executable_builder *b = rt_builder();
  uint32_t f = rt_function(b, "main", 1, 3);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 1, 16);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 2, 1, 64, kDLCUDA, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_RET, 0);
  rt_add_scalar_entry(b, "main", f, 1);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  int64_t x = 3;
  DLTensor t = rt_tensor(&x, RT_I64, 0, NULL);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_FAILED_PRECONDITION,
                      "entry 'main': function 'main' pc 1 (AllocStorage): cuda: cannot load "
                      "libcuda.so.1 (");
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &t));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "main"), NIMBLE_FAILED_PRECONDITION,
                      "): this executable uses cuda memory");
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_the_launch_rule_gives_blocks_of_256_and_at_most_65535_blocks) {
  static const struct {
    uint64_t elements;
    uint32_t grid;
  } cases[] = {
      {0, 1},        {1, 1},         {255, 1},          {256, 1},         {257, 2},
      {1000, 4},     {65536, 256},   {16776960, 65535}, {16776961, 65535}, {UINT64_MAX, 65535},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t grid = 0, block = 0;
    nimble_cuda_launch_dims(cases[i].elements, &grid, &block);
    ck_assert_uint_eq(block, 256);
    ck_assert_msg(grid == cases[i].grid, "%llu elements: %u blocks, want %u",
                  (unsigned long long)cases[i].elements, grid, cases[i].grid);
  }
}
END_TEST

/* ---- "wrong-driver": NIMBLE_CUDA_DRIVER names a library without cuInit ---- */

START_TEST(test_a_library_that_is_no_cuda_driver_is_named) {
  const char *lib = getenv("NIMBLE_CUDA_DRIVER");
  ck_assert_msg(lib && lib[0], "ctest sets NIMBLE_CUDA_DRIVER for this case");
  size_t n;
  void *module = ptx(&n);
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", module, n, 8);
  nimble_executable *exe;
  char want[256];
  snprintf(want, sizeof want,
           "cuda: %s has no cuInit (not a CUDA driver, or too old): this executable has cuda "
           "kernels",
           lib);
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_FAILED_PRECONDITION, want);
  nimble_builder_destroy(b);
  free(module);
}
END_TEST

/* ---- "needs-cuda": on a GPU ---- */

START_TEST(test_vadd_on_the_gpu_matches_the_sum_computed_here) {
  size_t size;
  void *module = ptx(&size);
  /* 1000: a partial block; 256 * 65535 + 1000: more elements than the
   * largest grid has threads, so the kernel's grid-stride loop goes round. */
  static const int64_t sizes[] = {1000, 256 * 65535 + 1000};
  for (size_t i = 0; i < 2; i++) {
    int64_t n = sizes[i];
    nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", module, size, n);
    nimble_executable *exe = rt_load(b);
    nimble_builder_destroy(b);
    nimble_vm *vm;
    NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
    nimble_memory_stats_t st;
    NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
    ck_assert_uint_eq(st.bytes_reserved, 0);
    run_and_check_vadd(vm, n);
    /* Four device tensors of n floats (two inputs, the sum, its copy), all
     * back in the pool after the invoke. */
    uint64_t block = 64;
    while (block < (uint64_t)n * 4) block *= 2;
    NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
    ck_assert_uint_eq(st.bytes_in_use, 0);
    ck_assert_uint_eq(st.system_allocations, 4);
    ck_assert_uint_eq(st.bytes_reserved, 4 * block);
    /* Again: served from the pool. */
    run_and_check_vadd(vm, n);
    NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
    ck_assert_uint_eq(st.system_allocations, 4);
    ck_assert_uint_ge(st.pool_hits, 4);
    nimble_vm_destroy(vm);
    nimble_executable_release(exe);
  }
  free(module);
}
END_TEST

START_TEST(test_many_launches_in_one_invoke_run_in_order) {
  /* c = a + b, then c = c + b 299 more times, ping-ponging between two
   * device tensors: 300 launches in one invoke, more than the first
   * argument staging buffer holds, each reading the previous one's result. */
  enum { kLaunches = 300 };
  const int64_t n = 1000;
  size_t size;
  void *module = ptx(&size);
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, module, size));
  uint32_t k;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "nimble_test_vadd", kDLCUDA, &k));
  uint32_t f = rt_function(b, "main", 2, 11);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 2, 0, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 1, kDLCUDA, 0);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 4, n * 4);
  RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 7, 5, 6, kDLFloat, 32, 1, n);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 8, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
  RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 9, 8, 6, kDLFloat, 32, 1, n);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 2, 3, 7);
  for (int i = 1; i < kLaunches; i++) {
    if (i % 2)
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 7, 3, 9);
    else
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 9, 3, 7);
  }
  RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 10, kLaunches % 2 ? 7 : 9, kDLCPU, 0);
  RT_EMIT(b, f, NIMBLE_OP_RET, 10);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 1, &n, NULL), rt_info("b", RT_F32, 1, &n, NULL)};
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  float *want = malloc((size_t)n * sizeof *want);
  ck_assert(x && y && want);
  fill(x, y, n);
  for (int64_t i = 0; i < n; i++) {
    want[i] = x[i] + y[i];
    for (int j = 1; j < kLaunches; j++) want[i] = want[i] + y[i];
  }
  int64_t shape[1] = {n};
  for (int round = 0; round < 2; round++) {
    DLTensor tx = rt_tensor(x, RT_F32, 1, shape), ty = rt_tensor(y, RT_F32, 1, shape);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &ty));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
    DLManagedTensor *o;
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
    const float *c = o->dl_tensor.data;
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(memcmp(&c[i], &want[i], sizeof want[i]) == 0, "round %d element %lld: %g, want %g",
                    round, (long long)i, c[i], want[i]);
    o->deleter(o);
  }
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  free(x);
  free(y);
  free(want);
  free(module);
}
END_TEST

START_TEST(test_a_constant_goes_to_the_device_once_per_vm) {
  /* main(a) -> a + c with c a constant; bad(a) writes into c's device copy. */
  const int64_t n = 1000;
  size_t size;
  void *module = ptx(&size);
  float *x = malloc((size_t)n * sizeof *x), *c = malloc((size_t)n * sizeof *c);
  ck_assert(x && c);
  fill(x, c, n);
  nimble_executable_builder *b = rt_builder();
  NIMBLE_ASSERT_OK(nimble_builder_set_kernel_library(b, NIMBLE_PART_KERNELS_CUDA, module, size));
  uint32_t k, kc;
  NIMBLE_ASSERT_OK(nimble_builder_add_kernel(b, "nimble_test_vadd", kDLCUDA, &k));
  int64_t shape[1] = {n};
  DLTensor ct = rt_tensor(c, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_builder_add_constant(b, &ct, &kc));
  nimble_tensor_info_t in = rt_info("a", RT_F32, 1, &n, NULL);
  nimble_tensor_info_t out = rt_info("out", RT_F32, 1, &n, NULL);
  for (int bad = 0; bad < 2; bad++) {
    uint32_t f = rt_function(b, bad ? "bad" : "main", 1, 9);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 1, 0, kDLCUDA, 0);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONST, 2, kc);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 3, 2, kDLCUDA, 0);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 4, n * 4);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_STORAGE, 5, 4, 64, kDLCUDA, 0, kDLFloat, 32, 1);
    RT_EMIT(b, f, NIMBLE_OP_LOAD_CONSTI, 6, 0);
    RT_EMIT(b, f, NIMBLE_OP_ALLOC_TENSOR, 7, 5, 6, kDLFloat, 32, 1, n);
    if (bad)
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 1, 1, 3);
    else
      RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 1, 3, 7);
    RT_EMIT(b, f, NIMBLE_OP_DEVICE_COPY, 8, 7, kDLCPU, 0);
    RT_EMIT(b, f, NIMBLE_OP_RET, 8);
    NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, bad ? "bad" : "main", f, &in, 1, &out, 1));
  }
  rt_info_free(&in);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  for (int round = 0; round < 3; round++) {
    DLTensor tx = rt_tensor(x, RT_F32, 1, shape);
    NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &tx));
    NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
    DLManagedTensor *o;
    NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
    const float *r = o->dl_tensor.data;
    for (int64_t i = 0; i < n; i++) {
      float want = x[i] + c[i];
      ck_assert_msg(memcmp(&r[i], &want, sizeof want) == 0, "round %d element %lld: %g, want %g",
                    round, (long long)i, r[i], want);
    }
    o->deleter(o);
    /* The input's copy and the sum went back to the pool; the constant's
     * copy (a 4096-byte block) stays, uploaded in the first round only. */
    nimble_memory_stats_t st;
    NIMBLE_ASSERT_OK(nimble_vm_memory_stats(vm, kDLCUDA, &st));
    ck_assert_uint_eq(st.bytes_in_use, 4096);
    ck_assert_uint_eq(st.system_allocations, 3);
  }
  DLTensor tx = rt_tensor(x, RT_F32, 1, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "bad", 0, &tx));
  NIMBLE_ASSERT_ERROR(nimble_vm_invoke(vm, "bad"), NIMBLE_INVALID_ARGUMENT,
                      "output 0 of kernel 'nimble_test_vadd' is the device copy of a constant");
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
  free(x);
  free(c);
  free(module);
}
END_TEST

START_TEST(test_a_kernel_missing_from_the_module_is_named) {
  size_t size;
  void *module = ptx(&size);
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_nope", module, size, 8);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_NOT_FOUND,
                      "kernel 'nimble_test_nope' (kernel 0): the cuda kernel module has no entry "
                      "'nimble_test_nope'");
  nimble_builder_destroy(b);
  free(module);
}
END_TEST

START_TEST(test_ptx_the_driver_refuses_is_reported_with_its_log) {
  static const char bad[] = ".version 6.0\n.target sm_50\n.address_size 64\nthis is not ptx\n";
  nimble_executable_builder *b = cuda_vadd_builder("nimble_test_vadd", bad, sizeof bad - 1, 8);
  nimble_executable *exe;
  NIMBLE_ASSERT_ERROR(rt_try_load(b, &exe), NIMBLE_INTERNAL, "cuda: loading the PTX module failed: ");
  nimble_builder_destroy(b);
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "needs-cuda") == 0) {
    const nimble_cuda_driver_t *d;
    nimble_status_t st = nimble_cuda_driver_get(&d);
    if (st) {
      printf("test_cuda_device: skipped: no CUDA driver (%s)\n", nimble_status_message(st));
      nimble_status_free(st);
      return 77;
    }
  }
  Suite *s = suite_create("cuda_device");
  TCase *tc = tcase_create(mode[0] ? mode : "any_driver");
  tcase_set_timeout(tc, 120);
  SRunner *sr;
  if (strcmp(mode, "needs-cuda") == 0) {
    tcase_add_test(tc, test_vadd_on_the_gpu_matches_the_sum_computed_here);
    tcase_add_test(tc, test_many_launches_in_one_invoke_run_in_order);
    tcase_add_test(tc, test_a_constant_goes_to_the_device_once_per_vm);
    tcase_add_test(tc, test_a_kernel_missing_from_the_module_is_named);
    tcase_add_test(tc, test_ptx_the_driver_refuses_is_reported_with_its_log);
    suite_add_tcase(s, tc);
    /* CUDA does not survive fork: the cases run in this process. */
    sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
  } else {
    if (strcmp(mode, "wrong-driver") == 0) {
      tcase_add_test(tc, test_a_library_that_is_no_cuda_driver_is_named);
    } else {
      /* First: under CK_FORK=no the later cases may have asked for it. */
      tcase_add_test(tc, test_a_cpu_executable_runs_without_touching_the_driver);
      tcase_add_test(tc, test_a_cuda_executable_loads_for_inspection_without_its_kernels);
      tcase_add_test(tc, test_a_cuda_kernel_without_a_cuda_part_is_refused);
      tcase_add_test(tc, test_a_cpu_kernel_refuses_a_tensor_on_cuda);
      tcase_add_test(tc, test_the_launch_rule_gives_blocks_of_256_and_at_most_65535_blocks);
      tcase_add_test(tc, test_a_cuda_executable_is_refused_at_load_without_a_driver);
      tcase_add_test(tc, test_cuda_memory_without_a_driver_names_the_instruction);
    }
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
  }
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
