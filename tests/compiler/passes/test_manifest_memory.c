/* Explicit memory: allocation and destination passing for each primitive
 * call; sizes computed by hand (float32 is 4 bytes). */
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

#define DENSE_PRIM(IN0)                                                                     \
  "def @\"fused.dense_add_relu\"(%p0: Tensor[(" IN0 ", 8), float32], %p1: Tensor[(16, 8), float32],\n" \
  "                            %p2: Tensor[(16,), float32]) -> Tensor[(" IN0 ", 16), float32] {\n"      \
  "  relu(add(dense(%p0, %p1, transB=1), %p2))\n"                                             \
  "}\n"

START_TEST(test_a_static_output_gets_a_constant_size_and_destination_passing) {
  /* (4, 16) float32 = 4 * 16 * 4 = 256 bytes. */
  pt_expect(nimble_passes_manifest_memory,
            "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  let %y = @\"fused.dense_add_relu\"(%x, %w, %b);\n"
            "  %y\n"
            "}\n" DENSE_PRIM("4"),
            "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  let %s = alloc_storage(256, alignment=64);\n"
            "  let %y = alloc_tensor(%s, 0, shape=[4, 16], dtype=\"float32\");\n"
            "  let %u = invoke(%x, %w, %b, %y, kernel=\"fused.dense_add_relu\", num_outputs=1);\n"
            "  %y\n"
            "}\n" DENSE_PRIM("4"));
}
END_TEST

START_TEST(test_a_dynamic_output_is_sized_by_the_shape_function_on_input_shapes) {
  /* Only %x's shape is read at run time; the weights' shapes are
   * constants. Bytes = prod(shape) * 4, computed by a small host kernel
   * (one per rank and element size) into an int64 scalar of 8 bytes. */
  pt_expect(nimble_passes_manifest_memory,
            "def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  let %y = @\"fused.dense_add_relu\"(%x, %w, %b);\n"
            "  %y\n"
            "}\n" DENSE_PRIM("?"),
            "def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  let %xs = shape_of(%x);\n"
            "  let %shapes = invoke_shape_func(%xs, const[(2,), int64]{16, 8}, const[(1,), int64]{16},\n"
            "                                  kernel=\"fused.dense_add_relu\", out_ranks=[2]);\n"
            "  let %shape = %shapes.0;\n"
            "  let %ss = alloc_storage(8, alignment=64);\n"
            "  let %size = alloc_tensor(%ss, 0, shape=[], dtype=\"int64\");\n"
            "  let %us = invoke(%shape, %size, kernel=\"fused.storage_size_r2_e4\", num_outputs=1);\n"
            "  let %s = alloc_storage(%size);\n"
            "  let %y: Tensor[(?, 16), float32] = alloc_tensor(%s, 0, %shape);\n"
            "  let %u = invoke(%x, %w, %b, %y, kernel=\"fused.dense_add_relu\");\n"
            "  %y\n"
            "}\n" DENSE_PRIM("?")
            "def @\"fused.storage_size_r2_e4\"(%p0: Tensor[(2,), int64]) -> int64 {\n"
            "  multiply(prod(%p0), 4)\n"
            "}\n");
}
END_TEST

#define VIEW_PRIMS                                                                              \
  "def @\"fused.unique\"(%p0: Tensor[(6,), float32]) -> Tensor[(?,), float32] { unique(%p0) }\n" \
  "def @\"fused.dyn_reshape\"(%p0: Tensor[(2, 3), float32], %p1: Tensor[(2,), int64])\n"          \
  "    -> Tensor[(?, ?), float32] { dyn_reshape(%p0, %p1) }\n"                                    \
  "def @\"fused.reshape\"(%p0: Tensor[(2, 3), float32]) -> Tensor[(3, 2), float32] {\n"          \
  "  reshape(%p0, newshape=[3, 2])\n"                                                            \
  "}\n"

START_TEST(test_upper_bound_data_dependent_and_reshape_outputs) {
  /* unique: allocated at its bound from the upper-bound shape function,
   * plus an int64 [1] (8 bytes) for the real shape, then viewed at it.
   * dyn_reshape reads %s's values: a view from the data-dependent shape
   * function. reshape to a static shape: a view with a constant shape. */
  pt_expect(nimble_passes_manifest_memory,
            "def @main(%x: Tensor[(6,), float32], %a: Tensor[(2, 3), float32], %s: Tensor[(2,), int64]) {\n"
            "  let %u = @\"fused.unique\"(%x);\n"
            "  let %v = @\"fused.dyn_reshape\"(%a, %s);\n"
            "  let %r = @\"fused.reshape\"(%a);\n"
            "  (%u, %v, %r)\n"
            "}\n" VIEW_PRIMS,
            "def @main(%x: Tensor[(6,), float32], %a: Tensor[(2, 3), float32], %s: Tensor[(2,), int64]) {\n"
            "  let %us = invoke_shape_func(%x, kernel=\"fused.unique\", out_ranks=[1], mode=\"upper_bound\");\n"
            "  let %ushape = %us.0;\n"
            "  let %ss = alloc_storage(8);\n"
            "  let %size = alloc_tensor(%ss, 0, dtype=\"int64\");\n"
            "  let %su = invoke(%ushape, %size, kernel=\"fused.storage_size_r1_e4\");\n"
            "  let %st = alloc_storage(%size);\n"
            "  let %bound: Tensor[(?,), float32] = alloc_tensor(%st, 0, %ushape);\n"
            "  let %st2 = alloc_storage(8);\n"
            "  let %real = alloc_tensor(%st2, 0, shape=[1], dtype=\"int64\");\n"
            "  let %done = invoke(%x, %bound, %real, kernel=\"fused.unique\", num_outputs=2);\n"
            "  let %u: Tensor[(?,), float32] = reshape_tensor(%bound, %real);\n"
            "  let %vs = invoke_shape_func(%a, %s, kernel=\"fused.dyn_reshape\", out_ranks=[2],\n"
            "                              mode=\"data_dependent\");\n"
            "  let %vshape = %vs.0;\n"
            "  let %v: Tensor[(?, ?), float32] = reshape_tensor(%a, %vshape);\n"
            "  let %r = reshape_tensor(%a, const[(2,), int64]{3, 2});\n"
            "  (%u, %v, %r)\n"
            "}\n" VIEW_PRIMS
            "def @\"fused.storage_size_r1_e4\"(%p0: Tensor[(1,), int64]) -> int64 {\n"
            "  multiply(prod(%p0), 4)\n"
            "}\n");
}
END_TEST

START_TEST(test_a_tuple_result_gets_one_allocation_per_field) {
  /* split of (4, 6) float32 into sizes 2 and 4 along axis 1: (4, 2) is
   * 32 bytes, (4, 4) 64 bytes; the invoke has two outputs and the result
   * is the tuple of both tensors. */
  pt_expect(nimble_passes_manifest_memory,
            "def @main(%x: Tensor[(4, 6), float32]) {\n"
            "  let %p = @\"fused.split\"(%x);\n"
            "  %p.1\n"
            "}\n"
            "def @\"fused.split\"(%p0: Tensor[(4, 6), float32])\n"
            "    -> (Tensor[(4, 2), float32], Tensor[(4, 4), float32]) {\n"
            "  split(%p0, axis=1, sizes=[2, 4])\n"
            "}\n",
            "def @main(%x: Tensor[(4, 6), float32]) {\n"
            "  let %s0 = alloc_storage(32);\n"
            "  let %a = alloc_tensor(%s0, 0, shape=[4, 2]);\n"
            "  let %s1 = alloc_storage(64);\n"
            "  let %b = alloc_tensor(%s1, 0, shape=[4, 4]);\n"
            "  let %u = invoke(%x, %a, %b, kernel=\"fused.split\", num_outputs=2);\n"
            "  let %p = (%a, %b);\n"
            "  %p.1\n"
            "}\n"
            "def @\"fused.split\"(%p0: Tensor[(4, 6), float32])\n"
            "    -> (Tensor[(4, 2), float32], Tensor[(4, 4), float32]) {\n"
            "  split(%p0, axis=1, sizes=[2, 4])\n"
            "}\n");
}
END_TEST

START_TEST(test_a_primitive_call_outside_a_let_is_an_error_naming_it) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a,
                              "def @main(%x: Tensor[(3,), float32]) { @\"fused.exp\"(%x) }\n"
                              "def @\"fused.exp\"(%p0: Tensor[(3,), float32]) -> Tensor[(3,), float32] {\n"
                              "  exp(%p0)\n"
                              "}\n");
  NIMBLE_ASSERT_ERROR(nimble_passes_manifest_memory(m), NIMBLE_FAILED_PRECONDITION,
                      "in @main: a call of fused.exp outside a let");
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_memory_operators_check_their_inputs) {
  /* The relations reject what the VM could not run: a tensor that does
   * not fit its storage, a bad alignment, an invoke with more outputs than
   * arguments, a view larger than its tensor. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"def @main() { alloc_tensor(alloc_storage(16), 8, shape=[4], dtype=\"float32\") }",
       "(16 bytes) at offset 8 does not fit in a storage of 16 bytes"},
      {"def @main() { alloc_storage(16, alignment=3) }", "alignment 3 is not a power of two"},
      {"def @main(%x: Tensor[(2,), float32]) { invoke(%x, kernel=\"k\", num_outputs=2) }",
       "invoke of 'k': 2 outputs among 1 arguments"},
      {"def @main(%x: Tensor[(2,), float32]) { reshape_tensor(%x, const[(1,), int64]{3}) }",
       "a view Tensor[(3,), float32] is larger than the tensor Tensor[(2,), float32]"},
      {"def @main(%x: Tensor[(2,), float32]) { invoke_shape_func(%x, kernel=\"k\", out_ranks=[1]) }",
       "input 0 must be a shape (1-D int64)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nimble_module *m;
    NIMBLE_ASSERT_OK(nimble_nir_parse(a, "m.nir", cases[i].text, strlen(cases[i].text), &m));
    nimble_typing *t;
    NIMBLE_ASSERT_ERROR(nimble_typing_infer_module(m, &t),
                        i == 0 ? NIMBLE_OUT_OF_RANGE : NIMBLE_INVALID_ARGUMENT, cases[i].msg);
  }
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("manifest_memory");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_a_static_output_gets_a_constant_size_and_destination_passing);
  tcase_add_test(tc, test_a_dynamic_output_is_sized_by_the_shape_function_on_input_shapes);
  tcase_add_test(tc, test_upper_bound_data_dependent_and_reshape_outputs);
  tcase_add_test(tc, test_a_tuple_result_gets_one_allocation_per_field);
  tcase_add_test(tc, test_a_primitive_call_outside_a_let_is_an_error_naming_it);
  tcase_add_test(tc, test_memory_operators_check_their_inputs);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
