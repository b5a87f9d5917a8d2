/* Threads by measurement (docs/vm.md, "Threads"; runtime/src/vm/vm_adapt.c):
 * what a VM of two threads tells its kernels, invoke by invoke. A kernel
 * writes env->num_threads into its output, so the test sees the probe's
 * blocks (three invokes on the pool, three alone, ...), the choice it
 * keeps, the probe starting over for new shapes and ending for good after
 * eight of them, and the option and the switch that turn it off. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_test_util.h"

enum { ENTRIES = 10 };

/* Entries s0..s9: x f32[16 (i + 1)] -> note_threads_f32(x). */
static nimble_executable *build(void) {
  nimble_executable_builder *b = rt_builder();
  int64_t k = rt_kernel(b, "note_threads_f32");
  for (int i = 0; i < ENTRIES; i++) {
    char name[16];
    snprintf(name, sizeof name, "s%d", i);
    int64_t dims[1] = {16 * (i + 1)};
    uint32_t f = rt_function(b, name, 1, 5);
    rt_emit_alloc(b, f, 1, 2, 3, RT_F32, 1, dims);
    RT_EMIT(b, f, NIMBLE_OP_INVOKE_PACKED, k, 1, 0, 1);
    RT_EMIT(b, f, NIMBLE_OP_RET, 1);
    nimble_tensor_info_t in = rt_info("x", RT_F32, 1, dims, NULL), out = rt_info("y", RT_F32, 1, dims, NULL);
    NIMBLE_ASSERT_OK(nimble_builder_add_entry(b, name, f, &in, 1, &out, 1));
    rt_info_free(&in);
    rt_info_free(&out);
  }
  nimble_executable *exe = rt_load(b);
  nimble_builder_destroy(b);
  return exe;
}

static nimble_vm *vm_of(nimble_executable *exe, uint32_t threads, uint32_t fixed) {
  nimble_vm_options_t o;
  nimble_vm_options_init(&o);
  o.num_threads = threads;
  o.fixed_threads = fixed;
  nimble_vm *vm = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_create(exe, &o, &vm));
  return vm;
}

/* The threads entry s<i>'s kernel was told it has; the rest of y is x. */
static int threads_seen(nimble_vm *vm, int i) {
  float x[16 * ENTRIES];
  int64_t n[1] = {16 * (i + 1)};
  for (int j = 0; j < n[0]; j++) x[j] = (float)j + 0.5f;
  char name[16];
  snprintf(name, sizeof name, "s%d", i);
  DLTensor t = rt_tensor(x, RT_F32, 1, n);
  NIMBLE_ASSERT_OK(nimble_vm_set_input(vm, name, 0, &t));
  NIMBLE_ASSERT_OK(nimble_vm_invoke(vm, name));
  DLManagedTensor *o = NULL;
  NIMBLE_ASSERT_OK(nimble_vm_take_output(vm, 0, &o));
  const float *y = o->dl_tensor.data;
  for (int j = 1; j < n[0]; j++) ck_assert_float_eq(y[j], x[j]);
  int seen = (int)y[0];
  o->deleter(o);
  return seen;
}

/* Past the 40 ms in which a new pool's worker may still be moved to its
 * own core (no probe before). */
static void settle(void) {
  struct timespec ts = {0, 60 * 1000000L};
  nanosleep(&ts, NULL);
}

/* A VM that never probes: once settled, 24 invokes all tell the kernel
 * `want` threads, and the VM says it has settled. Destroys vm. */
static void expect_no_probe(nimble_vm *vm, int want) {
  settle();
  for (int r = 0; r < 24; r++) ck_assert_msg(threads_seen(vm, 0) == want, "invoke %d", r);
  ck_assert(nimble_vm_threads_settled(vm));
  nimble_vm_destroy(vm);
}

/* The probe's first four blocks: pool, alone, pool, alone. */
static const int kProbe[12] = {2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1};

START_TEST(test_the_probe_tries_both_then_keeps_one) {
  unsetenv("NIMBLE_ADAPTIVE_THREADS");
  nimble_executable *exe = build();
  nimble_vm *vm = vm_of(exe, 2, 0);
  /* Before the pool has settled: the pool, unmeasured, and not settled. */
  ck_assert(!nimble_vm_threads_settled(vm));
  for (int r = 0; r < 5; r++) ck_assert_int_eq(threads_seen(vm, 0), 2);
  ck_assert(!nimble_vm_threads_settled(vm));
  settle();
  for (int r = 0; r < 12; r++) ck_assert_msg(threads_seen(vm, 0) == kProbe[r], "invoke %d of the probe", r);
  /* Mixed and pool blocks: each invoke's kernel on 1 or 2. */
  for (int r = 12; r < 21; r++) {
    int t = threads_seen(vm, 0);
    ck_assert_msg(t == 1 || t == 2, "invoke %d: %d threads", r, t);
  }
  /* Then one choice, kept. */
  ck_assert(nimble_vm_threads_settled(vm));
  int kept = threads_seen(vm, 0);
  for (int r = 0; r < 20; r++) ck_assert_int_eq(threads_seen(vm, 0), kept);
  /* New shapes: the probe starts over. */
  for (int r = 0; r < 12; r++) ck_assert_msg(threads_seen(vm, 1) == kProbe[r], "new shapes, invoke %d", r);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_shapes_that_keep_changing_end_the_probe_on_the_pool) {
  unsetenv("NIMBLE_ADAPTIVE_THREADS");
  nimble_executable *exe = build();
  nimble_vm *vm = vm_of(exe, 2, 0);
  settle();
  /* The first shapes, then eight new ones: each starts a probe (its first
   * invoke on the pool) ... */
  for (int i = 0; i < 9; i++) ck_assert_int_eq(threads_seen(vm, i), 2);
  /* ... and a ninth new one ends probing: the pool from then on, where a
   * probe would have run invokes 3-5 alone. */
  for (int r = 0; r < 12; r++) ck_assert_msg(threads_seen(vm, 9) == 2, "invoke %d", r);
  for (int r = 0; r < 12; r++) ck_assert_msg(threads_seen(vm, 0) == 2, "back to s0, invoke %d", r);
  nimble_vm_destroy(vm);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_nimble_adaptive_threads_0_keeps_the_pool) {
  setenv("NIMBLE_ADAPTIVE_THREADS", "0", 1);
  nimble_executable *exe = build();
  expect_no_probe(vm_of(exe, 2, 0), 2);
  unsetenv("NIMBLE_ADAPTIVE_THREADS");
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_the_fixed_threads_option_keeps_the_pool) {
  unsetenv("NIMBLE_ADAPTIVE_THREADS");
  nimble_executable *exe = build();
  expect_no_probe(vm_of(exe, 2, 1), 2);
  nimble_executable_release(exe);
}
END_TEST

START_TEST(test_one_thread_is_never_probed) {
  unsetenv("NIMBLE_ADAPTIVE_THREADS");
  nimble_executable *exe = build();
  expect_no_probe(vm_of(exe, 1, 0), 1);
  nimble_executable_release(exe);
}
END_TEST

int main(void) {
  Suite *s = suite_create("vm_adapt");
  TCase *tc = tcase_create("adapt");
  tcase_add_test(tc, test_the_probe_tries_both_then_keeps_one);
  tcase_add_test(tc, test_shapes_that_keep_changing_end_the_probe_on_the_pool);
  tcase_add_test(tc, test_nimble_adaptive_threads_0_keeps_the_pool);
  tcase_add_test(tc, test_the_fixed_threads_option_keeps_the_pool);
  tcase_add_test(tc, test_one_thread_is_never_probed);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
