/* Operator fusion: group boundaries on small graphs, an MLP and an
 * attention block. */
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_dense_bias_relu_becomes_one_primitive_called_once) {
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  relu(add(dense(%x, %w, transB=1), %b))\n"
            "}\n",
            "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32],\n"
            "          %b: Tensor[(16,), float32]) {\n"
            "  let %y = @\"fused.dense_add_relu\"(%x, %w, %b);\n"
            "  %y\n"
            "}\n"
            "def @\"fused.dense_add_relu\"(%p0: Tensor[(4, 8), float32], %p1: Tensor[(16, 8), float32],\n"
            "                            %p2: Tensor[(16,), float32]) -> Tensor[(4, 16), float32] {\n"
            "  relu(add(dense(%p0, %p1, transB=1), %p2))\n"
            "}\n");
}
END_TEST

START_TEST(test_a_reduction_takes_its_input_chain_and_its_epilogue) {
  /* mean by hand: exp -> sum (reduction) -> divide by 4 (epilogue); the
   * scalar 4.0 stays inside the primitive. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(2, 4), float32]) {\n"
            "  divide(sum(exp(%x), axes=[1]), 4.0)\n"
            "}\n",
            "def @main(%x: Tensor[(2, 4), float32]) {\n"
            "  let %y = @\"fused.exp_sum_divide\"(%x);\n"
            "  %y\n"
            "}\n"
            "def @\"fused.exp_sum_divide\"(%p0: Tensor[(2, 4), float32]) -> Tensor[(2,), float32] {\n"
            "  divide(sum(exp(%p0), axes=[1]), 4.0)\n"
            "}\n");
}
END_TEST

START_TEST(test_an_empty_constant_is_passed_in_not_inlined) {
  /* Only one-element constants are inlined; an empty one (a Concat piece
   * exporters write) is an argument like any other tensor. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%s: Tensor[(2,), int64]) {\n"
            "  add(concatenate(%s, const[(0,), int64]{}, axis=0), 1)\n"
            "}\n",
            "def @main(%s: Tensor[(2,), int64]) {\n"
            "  let %y = @\"fused.concatenate_add\"(%s, const[(0,), int64]{});\n"
            "  %y\n"
            "}\n"
            "def @\"fused.concatenate_add\"(%p0: Tensor[(2,), int64], %p1: Tensor[(0,), int64]) -> Tensor[(2,), int64] {\n"
            "  add(concatenate(%p0, %p1, axis=0), 1)\n"
            "}\n");
}
END_TEST

START_TEST(test_a_concatenation_of_convolutions_takes_them_as_parts) {
  /* squeezenet's fire module: the expand pair (a 1x1 and a 3x3 of the same
   * input, each with its Relu) concatenated along the channels becomes one
   * primitive, whose convolutions write their channels of the output in
   * place (compute's emit_conv_parts). */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(1, 16, 5, 5), float32], %a: Tensor[(8, 16, 1, 1), float32],\n"
            "          %b: Tensor[(4, 16, 3, 3), float32]) {\n"
            "  concatenate(relu(conv2d(%x, %a)), relu(conv2d(%x, %b, pads=[1, 1, 1, 1])), axis=1)\n"
            "}\n",
            "def @main(%x: Tensor[(1, 16, 5, 5), float32], %a: Tensor[(8, 16, 1, 1), float32],\n"
            "          %b: Tensor[(4, 16, 3, 3), float32]) {\n"
            "  let %y = @\"fused.conv2d_relu_conv2d_relu_concatenate\"(%x, %a, %b);\n"
            "  %y\n"
            "}\n"
            "def @\"fused.conv2d_relu_conv2d_relu_concatenate\"(%p0: Tensor[(1, 16, 5, 5), float32],\n"
            "    %p1: Tensor[(8, 16, 1, 1), float32], %p2: Tensor[(4, 16, 3, 3), float32]) -> Tensor[(1, 12, 5, 5), float32] {\n"
            "  concatenate(relu(conv2d(%p0, %p1)), relu(conv2d(%p0, %p2, pads=[1, 1, 1, 1])), axis=1)\n"
            "}\n");
}
END_TEST

START_TEST(test_a_concatenation_takes_convolutions_only_when_each_part_can_write_in_place) {
  /* The concatenation stays a copy of its own when: two parts need an
   * im2col copy (a kernel has one scratch buffer), a part is used again,
   * a part is not a convolution (or a Relu or Clip of one), a convolution
   * is grouped, or the axis is not the channels'. */
  static const char *const kPrograms[] = {
      "concatenate(relu(conv2d(%x, %c, pads=[1, 1, 1, 1])), relu(conv2d(%x, %c, pads=[1, 1, 1, 1])), axis=1)",
      "let %u = relu(conv2d(%x, %a)); add(concatenate(%u, relu(conv2d(%x, %a)), axis=1), "
      "concatenate(%u, %u, axis=1))",
      "concatenate(relu(conv2d(%x, %a)), sigmoid(conv2d(%x, %a)), axis=1)",
      "concatenate(relu(conv2d(%x, %a)), relu(conv2d(%x, %g, groups=4)), axis=1)",
      "concatenate(relu(conv2d(%x, %a)), relu(conv2d(%x, %a)), axis=2)",
  };
  for (size_t i = 0; i < sizeof kPrograms / sizeof kPrograms[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(1, 16, 5, 5), float32], %%a: Tensor[(8, 16, 1, 1), float32],\n"
             "          %%c: Tensor[(8, 16, 3, 3), float32], %%g: Tensor[(8, 4, 1, 1), float32]) {\n  %s\n}\n",
             kPrograms[i]);
    nimble_arena *a;
    NIMBLE_ASSERT_OK(nimble_arena_create(&a));
    pt_pass_fn passes[1] = {nimble_passes_fuse_ops};
    nimble_module *m = pt_run(a, text, passes, 1);
    ck_assert_msg(pt_count_global_calls(m, "fused.concatenate") >= 1, "program %zu: the concatenation was fused:\n%s",
                  i, text);
    nimble_arena_destroy(a);
  }
}
END_TEST

START_TEST(test_a_value_used_twice_joins_its_first_reader_as_a_second_output) {
  /* %a is read by negative and by tanh: it cannot be computed inside
   * either alone, so it joins negative's group as a side output (one
   * kernel writes both, nothing is computed twice), and tanh reads it. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(3,), float32]) {\n"
            "  let %a = exp(%x);\n"
            "  let %b = negative(%a);\n"
            "  (tanh(%a), %b)\n"
            "}\n",
            "def @main(%x: Tensor[(3,), float32]) {\n"
            "  let %b_outs = @\"fused.exp_negative\"(%x);\n"
            "  let %a = %b_outs.1;\n"
            "  let %b = %b_outs.0;\n"
            "  let %t = @\"fused.tanh\"(%a);\n"
            "  (%t, %b)\n"
            "}\n"
            "def @\"fused.exp_negative\"(%p0: Tensor[(3,), float32]) -> (Tensor[(3,), float32], Tensor[(3,), float32]) {\n"
            "  let %s0: Tensor[(3,), float32] = exp(%p0);\n"
            "  (negative(%s0), %s0)\n"
            "}\n"
            "def @\"fused.tanh\"(%p0: Tensor[(3,), float32]) -> Tensor[(3,), float32] { tanh(%p0) }\n");
}
END_TEST

START_TEST(test_an_lstm_state_read_again_later_is_a_side_output_of_the_next_state) {
  /* c is read twice by h's group and returned: one primitive returns (h, c). */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(3,), float32], %y: Tensor[(3,), float32]) {\n"
            "  let %c = add(exp(%x), %y);\n"
            "  let %h = multiply(tanh(%c), sigmoid(%c));\n"
            "  (%h, %c)\n"
            "}\n",
            "def @main(%x: Tensor[(3,), float32], %y: Tensor[(3,), float32]) {\n"
            "  let %h_outs = @\"fused.exp_add_tanh_sigmoid_multiply\"(%x, %y);\n"
            "  let %c = %h_outs.1;\n"
            "  let %h = %h_outs.0;\n"
            "  (%h, %c)\n"
            "}\n"
            "def @\"fused.exp_add_tanh_sigmoid_multiply\"(%p0: Tensor[(3,), float32], %p1: Tensor[(3,), float32])\n"
            "    -> (Tensor[(3,), float32], Tensor[(3,), float32]) {\n"
            "  let %s0: Tensor[(3,), float32] = add(exp(%p0), %p1);\n"
            "  (multiply(tanh(%s0), sigmoid(%s0)), %s0)\n"
            "}\n");
}
END_TEST

START_TEST(test_no_side_output_across_a_use_in_between_or_with_an_anchor) {
  /* A call between the two groups reads %c: %c cannot move to %h's place. */
  pt_expect(nimble_passes_fuse_ops,
            "def @id(%a: Tensor[(3,), float32]) -> Tensor[(3,), float32] { %a }\n"
            "def @main(%x: Tensor[(3,), float32], %y: Tensor[(3,), float32]) {\n"
            "  let %c = add(exp(%x), %y);\n"
            "  let %k = @id(%c);\n"
            "  let %h = multiply(tanh(%c), %k);\n"
            "  (%h, %c)\n"
            "}\n",
            "def @id(%a: Tensor[(3,), float32]) -> Tensor[(3,), float32] { %a }\n"
            "def @main(%x: Tensor[(3,), float32], %y: Tensor[(3,), float32]) {\n"
            "  let %c = @\"fused.exp_add\"(%x, %y);\n"
            "  let %k = @id(%c);\n"
            "  let %h = @\"fused.tanh_multiply\"(%c, %k);\n"
            "  (%h, %c)\n"
            "}\n"
            "def @\"fused.exp_add\"(%p0: Tensor[(3,), float32], %p1: Tensor[(3,), float32]) -> Tensor[(3,), float32] {\n"
            "  add(exp(%p0), %p1)\n"
            "}\n"
            "def @\"fused.tanh_multiply\"(%p0: Tensor[(3,), float32], %p1: Tensor[(3,), float32]) -> Tensor[(3,), float32] {\n"
            "  multiply(tanh(%p0), %p1)\n"
            "}\n");
  /* A reduction on either side: no second output next to an anchor. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(2, 3), float32]) {\n"
            "  let %s = sum(exp(%x), axes=[1]);\n"
            "  let %h = tanh(%s);\n"
            "  let %m = sum(multiply(%x, %x), axes=[1]);\n"
            "  let %r = add(%m, %h);\n"
            "  (%r, %s, %h)\n"
            "}\n",
            "def @main(%x: Tensor[(2, 3), float32]) {\n"
            "  let %s = @\"fused.exp_sum\"(%x);\n"
            "  let %h = @\"fused.tanh\"(%s);\n"
            "  let %r = @\"fused.multiply_sum_add\"(%x, %h);\n"
            "  (%r, %s, %h)\n"
            "}\n"
            "def @\"fused.exp_sum\"(%p0: Tensor[(2, 3), float32]) -> Tensor[(2,), float32] { sum(exp(%p0), axes=[1]) }\n"
            "def @\"fused.tanh\"(%p0: Tensor[(2,), float32]) -> Tensor[(2,), float32] { tanh(%p0) }\n"
            "def @\"fused.multiply_sum_add\"(%p0: Tensor[(2, 3), float32], %p1: Tensor[(2,), float32]) -> Tensor[(2,), float32] {\n"
            "  add(sum(multiply(%p0, %p0), axes=[1]), %p1)\n"
            "}\n");
}
END_TEST

START_TEST(test_nothing_fuses_across_a_data_dependent_shape_function) {
  /* dyn_reshape's output shape needs the values of %s: exp before it and
   * relu after it stay apart; shape_of stays a VM-level call. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(2, 3), float32], %s: Tensor[(2,), int64]) {\n"
            "  relu(dyn_reshape(exp(%x), %s))\n"
            "}\n",
            "def @main(%x: Tensor[(2, 3), float32], %s: Tensor[(2,), int64]) {\n"
            "  let %a = @\"fused.exp\"(%x);\n"
            "  let %b = @\"fused.dyn_reshape\"(%a, %s);\n"
            "  let %c = @\"fused.relu\"(%b);\n"
            "  %c\n"
            "}\n"
            "def @\"fused.exp\"(%p0: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] { exp(%p0) }\n"
            "def @\"fused.dyn_reshape\"(%p0: Tensor[(2, 3), float32], %p1: Tensor[(2,), int64])\n"
            "    -> Tensor[(?, ?), float32] { dyn_reshape(%p0, %p1) }\n"
            "def @\"fused.relu\"(%p0: Tensor[(?, ?), float32]) -> Tensor[(?, ?), float32] { relu(%p0) }\n");
}
END_TEST

START_TEST(test_a_group_keeps_one_anchor_and_injective_ops_take_no_dense) {
  /* add(dense, dense): the first dense joins the add, the second (a second
   * anchor) stays alone; transpose after dense does not take it. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  pt_pass_fn p = nimble_passes_fuse_ops;
  nimble_module *m = pt_run(a,
                            "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {\n"
                            "  let %s = add(dense(%x, %w), dense(%x, %w));\n"
                            "  transpose(dense(%s, %w))\n"
                            "}\n",
                            &p, 1);
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense_dense_add") ? NULL : (void *)1);
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense_add"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense.1"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.transpose"));
  ck_assert_uint_eq(pt_count_global_calls(m, NIMBLE_PRIMITIVE_PREFIX), 4);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_mlp_layers_fuse_to_one_primitive_each_and_softmax_stays_alone) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp3.nir");
  pt_pass_fn p = nimble_passes_fuse_ops;
  nimble_module *m = pt_run(a, text, &p, 1);
  free(text);
  /* 3 layers + softmax = 4 kernels; dense_add_relu is shared by name
   * pattern but each call has its own primitive. */
  ck_assert_uint_eq(pt_count_global_calls(m, NIMBLE_PRIMITIVE_PREFIX), 4);
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense_add_relu"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense_add_relu.1"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense_add"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.softmax"));
  ck_assert_uint_eq(pt_count_op(m, "dense"), 3);
  /* @main calls only primitives now. */
  const nimble_expr *body = nimble_module_find_func(m, "main")->u.func.body;
  size_t lets = 0;
  for (; body->kind == NIMBLE_EXPR_LET; body = body->u.let.body) {
    ck_assert_int_eq(body->u.let.value->u.call.callee->kind, NIMBLE_EXPR_GLOBAL);
    lets++;
  }
  ck_assert_uint_eq(lets, 4);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_attention_groups_respect_dynamic_shapes) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("attention.nir");
  pt_pass_fn p = nimble_passes_fuse_ops;
  nimble_module *m = pt_run(a, text, &p, 1);
  free(text);
  /* By hand: the q/k/v matmuls are used once each, but their consumers
   * take no matmul (dyn_reshape is opaque, reshape injective): 3 lone
   * matmuls. transpose(dyn_reshape(...)) is alone (dyn_reshape is opaque);
   * reshape+transpose chains fuse (k and v); matmul then divide fuse;
   * softmax alone; matmul(probs, vh) alone; transpose+reshape join the
   * residual add (broadcast takes injective); layer_norm (opaque) alone;
   * the GELU tail is element-wise: multiply, divide, erf, add, multiply in
   * one group. The shape arithmetic (take, expand_dims, concatenate) is a
   * small kernel of its own. */
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.matmul"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.matmul.2"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.take_expand_dims_concatenate"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dyn_reshape"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.transpose"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.reshape_transpose"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.reshape_transpose.1"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.matmul_divide"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.softmax"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.matmul.3"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.transpose_reshape_add"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.layer_norm"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.multiply_divide_erf_add_multiply"));
  ck_assert_uint_eq(pt_count_global_calls(m, NIMBLE_PRIMITIVE_PREFIX), 14);
  ck_assert_uint_eq(nimble_module_num_funcs(m), 15);
  /* shape_of stays a call in @attention. */
  ck_assert_uint_eq(pt_count_op(m, "shape_of"), 1);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_fusion_works_inside_branches_and_closures_but_not_across_them) {
  /* exp is used once, inside the branch: the branch's chain cannot take it
   * (different block), so exp stays alone; inside the branch and the
   * closure, chains fuse. */
  pt_expect(nimble_passes_fuse_ops,
            "def @main(%x: Tensor[(3,), float32], %c: bool) {\n"
            "  let %e = exp(%x);\n"
            "  let %f = fn (%y: Tensor[(3,), float32]) { negative(tanh(%y)) };\n"
            "  if (%c) { relu(sigmoid(%e)) } else { %f(%x) }\n"
            "}\n",
            "def @main(%x: Tensor[(3,), float32], %c: bool) {\n"
            "  let %e = @\"fused.exp\"(%x);\n"
            "  let %f = fn (%y: Tensor[(3,), float32]) { let %n = @\"fused.tanh_negative\"(%y); %n };\n"
            "  if (%c) { let %r = @\"fused.sigmoid_relu\"(%e); %r } else { let %z = %f(%x); %z }\n"
            "}\n"
            "def @\"fused.exp\"(%p0: Tensor[(3,), float32]) -> Tensor[(3,), float32] { exp(%p0) }\n"
            "def @\"fused.tanh_negative\"(%p0: Tensor[(3,), float32]) -> Tensor[(3,), float32] {\n"
            "  negative(tanh(%p0))\n"
            "}\n"
            "def @\"fused.sigmoid_relu\"(%p0: Tensor[(3,), float32]) -> Tensor[(3,), float32] {\n"
            "  relu(sigmoid(%p0))\n"
            "}\n");
}
END_TEST

int main(void) {
  Suite *s = suite_create("fuse_ops");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_dense_bias_relu_becomes_one_primitive_called_once);
  tcase_add_test(tc, test_a_reduction_takes_its_input_chain_and_its_epilogue);
  tcase_add_test(tc, test_a_value_used_twice_joins_its_first_reader_as_a_second_output);
  tcase_add_test(tc, test_an_lstm_state_read_again_later_is_a_side_output_of_the_next_state);
  tcase_add_test(tc, test_no_side_output_across_a_use_in_between_or_with_an_anchor);
  tcase_add_test(tc, test_a_concatenation_of_convolutions_takes_them_as_parts);
  tcase_add_test(tc, test_a_concatenation_takes_convolutions_only_when_each_part_can_write_in_place);
  tcase_add_test(tc, test_an_empty_constant_is_passed_in_not_inlined);
  tcase_add_test(tc, test_nothing_fuses_across_a_data_dependent_shape_function);
  tcase_add_test(tc, test_a_group_keeps_one_anchor_and_injective_ops_take_no_dense);
  tcase_add_test(tc, test_mlp_layers_fuse_to_one_primitive_each_and_softmax_stays_alone);
  tcase_add_test(tc, test_attention_groups_respect_dynamic_shapes);
  tcase_add_test(tc, test_fusion_works_inside_branches_and_closures_but_not_across_them);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
