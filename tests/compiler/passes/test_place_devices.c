/* Device placement (cuda): which invokes run on the GPU, and how many
 * device_copy calls are inserted. Every expected number is counted by
 * hand from the program in the test, in its comment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

#define EXP(name, shape)                                                                         \
  "def @\"" name "\"(%p0: Tensor[" shape ", float32]) -> Tensor[" shape ", float32] { exp(%p0) }\n"
#define LOG(name, shape)                                                                         \
  "def @\"" name "\"(%p0: Tensor[" shape ", float32]) -> Tensor[" shape ", float32] { log(%p0) }\n"

typedef struct counts {
  size_t gpu_invokes, cpu_invokes, to_gpu, to_cpu, gpu_storages;
} counts;

/* Counts in the printed module (an independent reading of the result,
 * next to the pass's own statistics). */
static counts count_printed(const nimble_module *m) {
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  counts c = {0};
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    bool cuda = strstr(line, "device=\"cuda\"") != NULL;
    if (strstr(line, " invoke(")) {
      if (cuda) c.gpu_invokes++;
      else c.cpu_invokes++;
    }
    if (strstr(line, "device_copy(")) {
      if (cuda) c.to_gpu++;
      else c.to_cpu++;
    }
    if (strstr(line, "alloc_storage(") && cuda) c.gpu_storages++;
  }
  free(text);
  return c;
}

/* Runs place_devices (then the type checker and the printer), checks the
 * statistics against the printed program and both against `want`. */
static void expect_placement(const char *program, counts want) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_run(a, program, NULL, 0);
  nimble_device_placement_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_place_devices_stats(m, &st));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  counts got = count_printed(m);
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_msg(got.gpu_invokes == want.gpu_invokes && got.cpu_invokes == want.cpu_invokes &&
                    got.to_gpu == want.to_gpu && got.to_cpu == want.to_cpu &&
                    got.gpu_storages == want.gpu_storages,
                "want gpu %zu cpu %zu to_gpu %zu to_cpu %zu gpu storages %zu, got %zu %zu %zu %zu %zu in\n%s",
                want.gpu_invokes, want.cpu_invokes, want.to_gpu, want.to_cpu, want.gpu_storages, got.gpu_invokes,
                got.cpu_invokes, got.to_gpu, got.to_cpu, got.gpu_storages, text);
  ck_assert_uint_eq(st.gpu_invokes, got.gpu_invokes);
  ck_assert_uint_eq(st.cpu_invokes, got.cpu_invokes);
  ck_assert_uint_eq(st.copies_to_gpu, got.to_gpu);
  ck_assert_uint_eq(st.copies_to_cpu, got.to_cpu);
  /* The printed form parses back. */
  nimble_arena *b;
  NIMBLE_ASSERT_OK(nimble_arena_create(&b));
  pt_parse(b, text);
  nimble_arena_destroy(b);
  free(text);
  nimble_arena_destroy(a);
}

START_TEST(test_a_chain_of_gpu_kernels_copies_the_input_in_and_the_result_out_once) {
  /* x (host) -> a -> b: both on the GPU with GPU storages; x is copied in
   * once, t2 out once (the entry returns host tensors); t1 never moves. */
  expect_placement("def @main(%x: Tensor[(4, 64), float32]) {\n"
                   "  let %s1 = alloc_storage(1024);\n"
                   "  let %t1 = alloc_tensor(%s1, 0, shape=[4, 64]);\n"
                   "  let %u1 = invoke(%x, %t1, kernel=\"fused.a\");\n"
                   "  let %s2 = alloc_storage(1024);\n"
                   "  let %t2 = alloc_tensor(%s2, 0, shape=[4, 64]);\n"
                   "  let %u2 = invoke(%t1, %t2, kernel=\"fused.b\");\n"
                   "  %t2\n"
                   "}\n" EXP("fused.a", "(4, 64)") EXP("fused.b", "(4, 64)"),
                   (counts){.gpu_invokes = 2, .cpu_invokes = 0, .to_gpu = 1, .to_cpu = 1, .gpu_storages = 2});
}
END_TEST

START_TEST(test_a_value_read_on_the_other_device_twice_is_copied_once) {
  /* a (GPU) writes t1; l1 and l2 use log (refused by the PTX generator:
   * CPU) and both read t1: one host copy of t1, reused. add (GPU) reads
   * t2 and t3 (host): two copies in. x: one copy in. t4: one copy out.
   * GPU 2 (a, add), CPU 2 (l1, l2); to GPU 3 (x, t2, t3); to CPU 2 (t1,
   * t4); GPU storages 2 (t1, t4). */
  expect_placement(
      "def @main(%x: Tensor[(4, 64), float32]) {\n"
      "  let %s1 = alloc_storage(1024);\n"
      "  let %t1 = alloc_tensor(%s1, 0, shape=[4, 64]);\n"
      "  let %u1 = invoke(%x, %t1, kernel=\"fused.a\");\n"
      "  let %s2 = alloc_storage(1024);\n"
      "  let %t2 = alloc_tensor(%s2, 0, shape=[4, 64]);\n"
      "  let %u2 = invoke(%t1, %t2, kernel=\"fused.l1\");\n"
      "  let %s3 = alloc_storage(1024);\n"
      "  let %t3 = alloc_tensor(%s3, 0, shape=[4, 64]);\n"
      "  let %u3 = invoke(%t1, %t3, kernel=\"fused.l2\");\n"
      "  let %s4 = alloc_storage(1024);\n"
      "  let %t4 = alloc_tensor(%s4, 0, shape=[4, 64]);\n"
      "  let %u4 = invoke(%t2, %t3, %t4, kernel=\"fused.add\");\n"
      "  %t4\n"
      "}\n" EXP("fused.a", "(4, 64)") LOG("fused.l1", "(4, 64)") LOG("fused.l2", "(4, 64)")
      "def @\"fused.add\"(%p0: Tensor[(4, 64), float32], %p1: Tensor[(4, 64), float32]) -> Tensor[(4, 64), float32] "
      "{ add(%p0, %p1) }\n",
      (counts){.gpu_invokes = 2, .cpu_invokes = 2, .to_gpu = 3, .to_cpu = 2, .gpu_storages = 2});
}
END_TEST

START_TEST(test_det_stays_on_the_host_where_its_scratch_buffer_exists) {
  /* a (GPU) writes t1; d (det: a scratch buffer, none on nvptx64) runs on
   * the CPU and reads t1: one copy in (x), one out (t1); d's result is on
   * the host already. GPU 1, CPU 1, GPU storages 1 (t1). */
  expect_placement("def @main(%x: Tensor[(3, 4, 4), float32]) {\n"
                   "  let %s1 = alloc_storage(192);\n"
                   "  let %t1 = alloc_tensor(%s1, 0, shape=[3, 4, 4]);\n"
                   "  let %u1 = invoke(%x, %t1, kernel=\"fused.a\");\n"
                   "  let %s2 = alloc_storage(12);\n"
                   "  let %t2 = alloc_tensor(%s2, 0, shape=[3]);\n"
                   "  let %u2 = invoke(%t1, %t2, kernel=\"fused.d\");\n"
                   "  %t2\n"
                   "}\n" EXP("fused.a", "(3, 4, 4)")
                   "def @\"fused.d\"(%p0: Tensor[(3, 4, 4), float32]) -> Tensor[(3,), float32] { det(%p0) }\n",
                   (counts){.gpu_invokes = 1, .cpu_invokes = 1, .to_gpu = 1, .to_cpu = 1, .gpu_storages = 1});
}
END_TEST

START_TEST(test_an_if_condition_from_a_gpu_kernel_is_copied_to_the_host) {
  /* pos (sum > 0 over a float vector: GPU) writes the condition c, which
   * the host's If reads: one copy out. a (GPU) writes t; the then branch
   * returns t: one copy out inside the branch. x is copied in once and
   * reused by both kernels; the else branch returns x as it is.
   * GPU 2, CPU 0, to GPU 1, to CPU 2, GPU storages 2 (c, t). */
  expect_placement("def @main(%x: Tensor[(4,), float32]) {\n"
                   "  let %s1 = alloc_storage(1);\n"
                   "  let %c = alloc_tensor(%s1, 0, dtype=\"bool\");\n"
                   "  let %u1 = invoke(%x, %c, kernel=\"fused.pos\");\n"
                   "  let %s2 = alloc_storage(16);\n"
                   "  let %t = alloc_tensor(%s2, 0, shape=[4]);\n"
                   "  let %u2 = invoke(%x, %t, kernel=\"fused.a\");\n"
                   "  if (%c) { %t } else { %x }\n"
                   "}\n"
                   "def @\"fused.pos\"(%p0: Tensor[(4,), float32]) -> Tensor[(), bool] {\n"
                   "  greater(sum(%p0), 0.0)\n"
                   "}\n" EXP("fused.a", "(4,)"),
                   (counts){.gpu_invokes = 2, .cpu_invokes = 0, .to_gpu = 1, .to_cpu = 2, .gpu_storages = 2});
}
END_TEST

START_TEST(test_a_loop_keeps_its_counter_on_the_host_and_moves_the_tensor_once_per_iteration) {
  /* @loop: the condition i < 3 and the increment are scalar arithmetic
   * (CPU); a (GPU) reads x: one copy in; the recursive call takes host
   * tensors: t copied out once. main only calls @loop: nothing.
   * GPU 1, CPU 2, to GPU 1, to CPU 1, GPU storages 1. */
  expect_placement(
      "def @loop(%i: Tensor[(), int64], %x: Tensor[(4,), float32]) -> Tensor[(4,), float32] {\n"
      "  let %s0 = alloc_storage(1);\n"
      "  let %c = alloc_tensor(%s0, 0, dtype=\"bool\");\n"
      "  let %u0 = invoke(%i, %c, kernel=\"fused.lt\");\n"
      "  if (%c) {\n"
      "    let %s1 = alloc_storage(8);\n"
      "    let %i1 = alloc_tensor(%s1, 0, dtype=\"int64\");\n"
      "    let %u1 = invoke(%i, %i1, kernel=\"fused.inc\");\n"
      "    let %s2 = alloc_storage(16);\n"
      "    let %t = alloc_tensor(%s2, 0, shape=[4]);\n"
      "    let %u2 = invoke(%x, %t, kernel=\"fused.a\");\n"
      "    @loop(%i1, %t)\n"
      "  } else {\n"
      "    %x\n"
      "  }\n"
      "}\n"
      "def @main(%x: Tensor[(4,), float32]) { @loop(0, %x) }\n"
      "def @\"fused.lt\"(%p0: Tensor[(), int64]) -> Tensor[(), bool] { less(%p0, 3) }\n"
      "def @\"fused.inc\"(%p0: Tensor[(), int64]) -> Tensor[(), int64] { add(%p0, 1) }\n" EXP("fused.a", "(4,)"),
      (counts){.gpu_invokes = 1, .cpu_invokes = 2, .to_gpu = 1, .to_cpu = 1, .gpu_storages = 1});
}
END_TEST

START_TEST(test_shapes_never_travel_and_storage_sizes_stay_on_the_host) {
  /* A dynamic batch: shape_of(x) and the shape function read the host
   * header (no copy), the storage size is a host kernel, the kernel a
   * runs on the GPU. Copies: x in, y out. GPU 1, CPU 1 (storage size),
   * GPU storages 1 (y's; the 8-byte size scalar stays on the host). */
  expect_placement(
      "def @main(%x: Tensor[(?, 4), float32]) {\n"
      "  let %sh = shape_of(%x);\n"
      "  let %shapes = invoke_shape_func(%sh, kernel=\"fused.a\", out_ranks=[2]);\n"
      "  let %shp = %shapes.0;\n"
      "  let %ss = alloc_storage(8);\n"
      "  let %size = alloc_tensor(%ss, 0, dtype=\"int64\");\n"
      "  let %us = invoke(%shp, %size, kernel=\"fused.storage_size_r2_e4\");\n"
      "  let %s = alloc_storage(%size);\n"
      "  let %y: Tensor[(?, 4), float32] = alloc_tensor(%s, 0, %shp);\n"
      "  let %u = invoke(%x, %y, kernel=\"fused.a\");\n"
      "  %y\n"
      "}\n"
      "def @\"fused.a\"(%p0: Tensor[(?, 4), float32]) -> Tensor[(?, 4), float32] { exp(%p0) }\n"
      "def @\"fused.storage_size_r2_e4\"(%p0: Tensor[(2,), int64]) -> Tensor[(), int64] {\n"
      "  multiply(prod(%p0), 4)\n"
      "}\n",
      (counts){.gpu_invokes = 1, .cpu_invokes = 1, .to_gpu = 1, .to_cpu = 1, .gpu_storages = 1});
}
END_TEST

START_TEST(test_an_upper_bound_shape_function_reads_the_host_copy_its_kernel_reads_too) {
  /* e = exp(x) runs on the GPU; nonzero(e) has an upper-bound shape, so
   * it and its shape function run on the host. Both read one host copy of
   * e, made before the shape function: x in, e out, once each. GPU 1 (the
   * exp), CPU 1 (the nonzero), GPU storages 1 (e's). */
  const char *program =
      "def @main(%x: Tensor[(8,), float32]) {\n"
      "  let %s1 = alloc_storage(32);\n"
      "  let %e = alloc_tensor(%s1, 0, shape=[8]);\n"
      "  let %u1 = invoke(%x, %e, kernel=\"fused.e\");\n"
      "  let %b = invoke_shape_func(%e, kernel=\"fused.nz\", out_ranks=[2], mode=\"upper_bound\");\n"
      "  let %bound = %b.0;\n"
      "  let %s2 = alloc_storage(128);\n"
      "  let %o = alloc_tensor(%s2, 0, %bound, dtype=\"int64\");\n"
      "  let %s3 = alloc_storage(16);\n"
      "  let %r = alloc_tensor(%s3, 0, shape=[2], dtype=\"int64\");\n"
      "  let %u2 = invoke(%e, %o, %r, kernel=\"fused.nz\", num_outputs=2);\n"
      "  reshape_tensor(%o, %r)\n"
      "}\n"
      "def @\"fused.e\"(%p0: Tensor[(8,), float32]) -> Tensor[(8,), float32] { exp(%p0) }\n"
      "def @\"fused.nz\"(%p0: Tensor[(8,), float32]) -> Tensor[(1, ?), int64] { nonzero(%p0) }\n";
  expect_placement(program, (counts){.gpu_invokes = 1, .cpu_invokes = 1, .to_gpu = 1, .to_cpu = 1, .gpu_storages = 1});
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_run(a, program, NULL, 0);
  NIMBLE_ASSERT_OK(nimble_passes_place_devices(m));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_msg(strstr(text, "invoke_shape_func(%e_host") != NULL, "the shape function reads e on the GPU:\n%s", text);
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("place_devices");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_a_chain_of_gpu_kernels_copies_the_input_in_and_the_result_out_once);
  tcase_add_test(tc, test_an_upper_bound_shape_function_reads_the_host_copy_its_kernel_reads_too);
  tcase_add_test(tc, test_a_value_read_on_the_other_device_twice_is_copied_once);
  tcase_add_test(tc, test_det_stays_on_the_host_where_its_scratch_buffer_exists);
  tcase_add_test(tc, test_an_if_condition_from_a_gpu_kernel_is_copied_to_the_host);
  tcase_add_test(tc, test_a_loop_keeps_its_counter_on_the_host_and_moves_the_tensor_once_per_iteration);
  tcase_add_test(tc, test_shapes_never_travel_and_storage_sizes_stay_on_the_host);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
