/* The runtime's profiling hook (nimble_vm_kernel_times): off by default,
 * counts every InvokePacked per kernel while on, resets when read, and
 * times what it counts. The program is built by hand, so every count is
 * known: main(a, b) = (a @ b) + b + b runs matmul once and vadd twice, and
 * never runs the third kernel it declares. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_test_util.h"

enum { M = 128 };

static nimble_executable *build_program(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t mm = rt_kernel(b, "matmul_f32"), add = rt_kernel(b, "vadd_f32");
  rt_kernel(b, "ones_f32"); /* declared, never invoked */
  uint32_t f = rt_function(b, "main", 2, 9);
  int64_t shape[2] = {M, M};
  rt_emit_alloc(b, f, 2, 3, 4, RT_F32, 2, shape);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, mm, 1, 0, 1, 2);
  rt_emit_alloc(b, f, 5, 3, 4, RT_F32, 2, shape);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 2, 1, 5);
  rt_emit_alloc(b, f, 6, 3, 4, RT_F32, 2, shape);
  RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, add, 1, 5, 1, 6);
  RT_EMIT(b, f, NIMBLE_OP_RET, 6);
  nimble_tensor_info_t in[2] = {rt_info("a", RT_F32, 2, shape, NULL), rt_info("b", RT_F32, 2, shape, NULL)};
  nimble_tensor_info_t out = rt_info("e", RT_F32, 2, shape, NULL);
  NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, "main", f, in, 2, &out, 1));
  rt_info_free(&in[0]);
  rt_info_free(&in[1]);
  rt_info_free(&out);
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

static float g_a[M * M], g_b[M * M];

static nimble_vm *make_vm(void) {
  for (int i = 0; i < M; i++)
    for (int j = 0; j < M; j++) {
      g_a[i * M + j] = i == j ? 1.0f : 0.0f; /* the identity: a @ b = b */
      g_b[i * M + j] = (float)(i - j);
    }
  nimble_executable *exe = build_program();
  nimble_vm *vm;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, NULL, &vm));
  nimble_executable_release(exe);
  return vm;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs main once and checks e = 3b, element by element. */
static void run_once(nimble_vm *vm) {
  int64_t shape[2] = {M, M};
  DLTensor ta = rt_tensor(g_a, RT_F32, 2, shape), tb = rt_tensor(g_b, RT_F32, 2, shape);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 0, &ta));
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, "main", 1, &tb));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, "main"));
  DLManagedTensor *e;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &e));
  const float *y = e->dl_tensor.data;
  for (int k = 0; k < M * M; k++) ck_assert_float_eq(y[k], 3.0f * g_b[k]);
  e->deleter(e);
}

START_TEST(test_timing_is_off_by_default_and_reads_zero_counts_for_every_kernel) {
  nimble_vm *vm = make_vm();
  run_once(vm);
  run_once(vm);
  nimble_kernel_time_t t[3];
  memset(t, 0xab, sizeof t);
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 0, t, 3, &n));
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(t[0].symbol, "matmul_f32");
  ck_assert_str_eq(t[1].symbol, "vadd_f32");
  ck_assert_str_eq(t[2].symbol, "ones_f32");
  for (int i = 0; i < 3; i++) {
    ck_assert_uint_eq(t[i].calls, 0);
    ck_assert_uint_eq(t[i].total_ns, 0);
    ck_assert_uint_eq(t[i].out_elements, 0);
  }
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_timed_invokes_count_each_kernel_call_and_fit_in_the_wall_time) {
  nimble_vm *vm = make_vm();
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, NULL, 0, NULL));
  uint64_t t0 = now_ns();
  for (int r = 0; r < 3; r++) run_once(vm);
  uint64_t wall = now_ns() - t0;
  nimble_kernel_time_t t[3];
  uint32_t n;
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 0, t, 3, &n));
  ck_assert_uint_eq(t[0].calls, 3); /* one matmul per run */
  ck_assert_uint_eq(t[1].calls, 6); /* two vadds per run */
  ck_assert_uint_eq(t[2].calls, 0);
  ck_assert_uint_eq(t[2].total_ns, 0);
  ck_assert(t[0].total_ns > 0 && t[1].total_ns > 0);
  /* Each writes an M x M matrix; the kernel that never ran reports none. */
  ck_assert_uint_eq(t[0].out_elements, M * M);
  ck_assert_uint_eq(t[1].out_elements, M * M);
  ck_assert_uint_eq(t[2].out_elements, 0);
  ck_assert_msg(t[0].total_ns + t[1].total_ns <= wall, "kernels %llu + %llu ns > wall %llu ns",
                (unsigned long long)t[0].total_ns, (unsigned long long)t[1].total_ns,
                (unsigned long long)wall);
  /* 128^3 multiply-adds against 128^2 additions: the matmul is by far the
   * slower kernel, per call. */
  ck_assert_msg(t[0].total_ns / 3 > t[1].total_ns / 6, "matmul %llu ns/call, vadd %llu ns/call",
                (unsigned long long)(t[0].total_ns / 3), (unsigned long long)(t[1].total_ns / 6));
  /* Off again: later invokes count nothing. */
  run_once(vm);
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 0, t, 3, &n));
  ck_assert_uint_eq(t[0].calls, 0);
  ck_assert_uint_eq(t[1].calls, 0);
  nimble_vm_destroy(vm);
}
END_TEST

START_TEST(test_reading_while_on_resets_the_counts) {
  nimble_vm *vm = make_vm();
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, NULL, 0, NULL));
  run_once(vm);
  nimble_kernel_time_t t[3];
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, t, 3, NULL));
  ck_assert_uint_eq(t[0].calls, 1);
  ck_assert_uint_eq(t[1].calls, 2);
  run_once(vm);
  run_once(vm);
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, t, 3, NULL));
  ck_assert_uint_eq(t[0].calls, 2);
  ck_assert_uint_eq(t[1].calls, 4);
  nimble_vm_destroy(vm); /* with timing still on: nothing leaks */
}
END_TEST

START_TEST(test_a_short_array_gets_the_first_kernels_and_null_out_is_refused) {
  nimble_vm *vm = make_vm();
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, NULL, 0, NULL));
  run_once(vm);
  nimble_kernel_time_t t[2];
  memset(t, 0, sizeof t);
  uint32_t n = 0;
  NIMBLE_ASSERT_OK(nimble_vm_kernel_times(vm, 1, t, 1, &n));
  ck_assert_uint_eq(n, 3);
  ck_assert_str_eq(t[0].symbol, "matmul_f32");
  ck_assert_uint_eq(t[0].calls, 1);
  ck_assert_ptr_null(t[1].symbol); /* untouched */
  NIMBLE_ASSERT_ERROR(nimble_vm_kernel_times(vm, 1, NULL, 2, NULL), NIMBLE_INVALID_ARGUMENT,
                      "kernel_times: NULL out with capacity 2");
  NIMBLE_ASSERT_ERROR(nimble_vm_kernel_times(NULL, 1, NULL, 0, NULL), NIMBLE_INVALID_ARGUMENT,
                      "kernel_times: NULL vm");
  nimble_vm_destroy(vm);
}
END_TEST

int main(void) {
  Suite *s = suite_create("kernel_times");
  TCase *tc = tcase_create("profiling hook");
  tcase_add_test(tc, test_timing_is_off_by_default_and_reads_zero_counts_for_every_kernel);
  tcase_add_test(tc, test_timed_invokes_count_each_kernel_call_and_fit_in_the_wall_time);
  tcase_add_test(tc, test_reading_while_on_resets_the_counts);
  tcase_add_test(tc, test_a_short_array_gets_the_first_kernels_and_null_out_is_refused);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
