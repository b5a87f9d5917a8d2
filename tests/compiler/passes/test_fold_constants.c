/* Constant folding: values checked by hand. */
#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_fold_evaluates_elementwise_chains_through_lets) {
  /* {1, 2} + 0.5 = {1.5, 2.5}; squared = {2.25, 6.25}. */
  pt_expect(nimble_passes_fold_constants,
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %a = const[(2,), float32]{1, 2};\n"
            "  let %b = add(%a, 0.5);\n"
            "  let %c = multiply(%b, %b);\n"
            "  add(%x, %c)\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  add(%x, const[(2,), float32]{2.25, 6.25})\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_broadcasts_like_numpy) {
  /* [[1],[2]] + [10, 20, 30] = [[11, 21, 31], [12, 22, 32]]. */
  pt_expect(nimble_passes_fold_constants,
            "def @main() {\n"
            "  add(const[(2, 1), int64]{1, 2}, const[(3,), int64]{10, 20, 30})\n"
            "}\n",
            "def @main() {\n"
            "  const[(2, 3), int64]{11, 21, 31, 12, 22, 32}\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_does_integer_shape_arithmetic_and_truncates_division) {
  /* 4 * 8 - 2 = 30; -7 / 2 truncates to -3; max(30, -3) = 30. */
  pt_expect(nimble_passes_fold_constants,
            "def @main() {\n"
            "  let %n = subtract(multiply(4, 8), 2);\n"
            "  let %d = divide(-7, 2);\n"
            "  (%n, %d, maximum(%n, %d))\n"
            "}\n",
            "def @main() { (30, -3, 30) }\n");
}
END_TEST

START_TEST(test_fold_leaves_division_by_zero_and_overflow_to_run_time) {
  const char *p =
      "def @main() {\n"
      "  (divide(7, 0), multiply(9223372036854775807, 2))\n"
      "}\n";
  pt_expect(nimble_passes_fold_constants, p, p);
}
END_TEST

START_TEST(test_fold_computes_small_types_and_propagates_nan) {
  /* uint8: 200 + 55 = 255 fits and folds; 200 + 56 wraps at run time, so
   * it stays. uint16 7 / 2 = 3. float16 1 + 2^-10 (0x3c00 + 0x1400) is
   * 0x3c01; 1 + 2^-11 (0x1000) is a tie that rounds to even, 0x3c00. maximum and
   * relu of NaN are NaN (NumPy), not the other operand or 0. */
  pt_expect(nimble_passes_fold_constants,
            "def @main() {\n"
            "  (add(const[(1,), uint8]{200}, const[(1,), uint8]{55}),\n"
            "   add(const[(1,), uint8]{200}, const[(1,), uint8]{56}),\n"
            "   divide(const[(1,), uint16]{7}, const[(1,), uint16]{2}),\n"
            "   add(const[(2,), float16]{0x3c00, 0x3c00}, const[(2,), float16]{0x1400, 0x1000}),\n"
            "   maximum(const[(2,), float32]{nan, 1}, const[(2,), float32]{1, nan}),\n"
            "   relu(const[(2,), float32]{nan, -1}))\n"
            "}\n",
            "def @main() {\n"
            "  (const[(1,), uint8]{255}, add(const[(1,), uint8]{200}, const[(1,), uint8]{56}), "
            "const[(1,), uint16]{3}, const[(2,), float16]{0x3c01, 0x3c00}, const[(2,), float32]{nan, nan}, "
            "const[(2,), float32]{nan, 0.0})\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_resolves_if_on_a_constant_condition) {
  /* less(2, 3) is true: the then branch stays; the comparison of a cast
   * 2.75 -> 2 with 2 is true too. */
  pt_expect(nimble_passes_fold_constants,
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %y = if (less(2, 3)) { %x } else { negative(%x) };\n"
            "  let %z = if (equal(cast(2.75, dtype=\"int64\"), 2)) { exp(%y) } else { %y };\n"
            "  %z\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %z = exp(%x);\n"
            "  %z\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_reshapes_and_indexes_constant_shapes) {
  /* reshape keeps the bytes: {1,2,3,4} as (4,); take element 2 -> 3;
   * concatenate {3} and {4, 16} -> {3, 4, 16}; shape_of gives (2, 2). */
  pt_expect(nimble_passes_fold_constants,
            "def @main() {\n"
            "  let %c = const[(2, 2), int64]{1, 2, 3, 4};\n"
            "  let %r = reshape(%c, newshape=[4]);\n"
            "  let %t = take(%r, 2, axis=0);\n"
            "  let %s = concatenate(expand_dims(%t, axis=0), const[(2,), int64]{4, 16}, axis=0);\n"
            "  (%r, %s, shape_of(%c))\n"
            "}\n",
            "def @main() {\n"
            "  (const[(4,), int64]{1, 2, 3, 4}, const[(3,), int64]{3, 4, 16},\n"
            "   const[(2,), int64]{2, 2})\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_keeps_large_constants_bound_and_unevaluated) {
  /* 5000 elements: above the folding limit (4096) and the propagation
   * limit (64): the binding stays and the operator stays. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m;
  NIMBLE_ASSERT_OK(nimble_module_create(a, &m));
  static float big[5000];
  int64_t dims[1] = {5000};
  const nimble_expr *c = nimble_ir_constant(a, NIMBLE_DTYPE_FLOAT32, 1, dims, big, NULL);
  const nimble_expr *w = nimble_ir_var(a, "w", NULL, NULL);
  const nimble_expr *e;
  NIMBLE_ASSERT_OK(nimble_ir_call_op(a, nimble_op_find("exp"), 1, &w, NULL, 0, NULL, &e));
  const nimble_expr *body = nimble_ir_let(a, w, c, e, NULL);
  NIMBLE_ASSERT_OK(nimble_module_add_func(m, "main", nimble_ir_func(a, 0, NULL, 0, NULL, NULL, body, NULL)));
  NIMBLE_ASSERT_OK(nimble_passes_fold_constants(m));
  const nimble_expr *after = nimble_module_find_func(m, "main")->u.func.body;
  ck_assert_int_eq(after->kind, NIMBLE_EXPR_LET);
  ck_assert_ptr_eq(after->u.let.value, c);
  ck_assert_uint_eq(pt_count_op(m, "exp"), 1);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_fold_takes_fields_of_known_tuples) {
  /* %t.1 is %y; (%x, 2).1 is the constant 2, which then folds into the
   * add: 2 + 3 = 5; a field that is a call is not duplicated. */
  pt_expect(nimble_passes_fold_constants,
            "def @main(%x: Tensor[(2,), float32], %y: Tensor[(2,), float32]) {\n"
            "  let %t = (%x, %y);\n"
            "  let %u = (exp(%x), 2);\n"
            "  (%t.1, add((%x, 2).1, 3), %u.0)\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %y: Tensor[(2,), float32]) {\n"
            "  let %t = (%x, %y);\n"
            "  let %u = (exp(%x), 2);\n"
            "  (%y, 5, %u.0)\n"
            "}\n");
}
END_TEST

START_TEST(test_fold_unary_operators_match_hand_values) {
  /* sigmoid(0) = 0.5, sqrt(6.25) = 2.5, relu(-1) = 0, floor(-1.5) = -2,
   * round(2.5) = 2 (half to even), abs(-3) = 3 on int64, 1 < 2 is true,
   * logical_and(true, false) is false, -(7) / 2 = -3 (truncation), 0.5
   * as bool is true, -2.75 as int32 truncates to -2. */
  pt_expect(nimble_passes_fold_constants,
            "def @main() {\n"
            "  (sigmoid(0.0), sqrt(6.25), relu(-1.0), floor(-1.5), round(2.5), abs(-3),\n"
            "   less(1, 2), logical_and(true, false), divide(negative(7), 2),\n"
            "   cast(0.5, dtype=\"bool\"), cast(-2.75, dtype=\"int32\"))\n"
            "}\n",
            "def @main() {\n"
            "  (0.5, 2.5, 0.0, -2.0, 2.0, 3, true, false, -3, true, const[(), int32]{-2})\n"
            "}\n");
}
END_TEST

int main(void) {
  Suite *s = suite_create("fold_constants");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_fold_evaluates_elementwise_chains_through_lets);
  tcase_add_test(tc, test_fold_broadcasts_like_numpy);
  tcase_add_test(tc, test_fold_does_integer_shape_arithmetic_and_truncates_division);
  tcase_add_test(tc, test_fold_leaves_division_by_zero_and_overflow_to_run_time);
  tcase_add_test(tc, test_fold_resolves_if_on_a_constant_condition);
  tcase_add_test(tc, test_fold_computes_small_types_and_propagates_nan);
  tcase_add_test(tc, test_fold_reshapes_and_indexes_constant_shapes);
  tcase_add_test(tc, test_fold_keeps_large_constants_bound_and_unevaluated);
  tcase_add_test(tc, test_fold_takes_fields_of_known_tuples);
  tcase_add_test(tc, test_fold_unary_operators_match_hand_values);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
