/* Simplification of shape code (then folding, as the pipeline does). */
#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_shape_of_a_static_tensor_becomes_a_constant) {
  pt_expect(nimble_passes_simplify_shapes,
            "def @main(%x: Tensor[(2, 3), float32]) { shape_of(%x) }\n",
            "def @main(%x: Tensor[(2, 3), float32]) { const[(2,), int64]{2, 3} }\n");
}
END_TEST

START_TEST(test_a_static_dim_of_a_dynamic_shape_folds_and_its_arithmetic_too) {
  /* dim 1 of (?, 4) is 4; 4 * 2 = 8 after folding; dim 0 stays dynamic. */
  pt_pass_fn passes[] = {nimble_passes_simplify_shapes, nimble_passes_fold_constants};
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_run(a,
                            "def @main(%x: Tensor[(?, 4), float32]) {\n"
                            "  let %s = shape_of(%x);\n"
                            "  let %n = take(%s, 1, axis=0);\n"
                            "  let %m = multiply(%n, 2);\n"
                            "  let %b = take(%s, 0, axis=0);\n"
                            "  (%m, multiply(%b, 1))\n"
                            "}\n",
                            passes, 2);
  pt_assert_equal(m,
                  "def @main(%x: Tensor[(?, 4), float32]) {\n"
                  "  let %s = shape_of(%x);\n"
                  "  let %b = take(%s, 0, axis=0);\n"
                  "  (8, %b)\n"
                  "}\n");
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_reshape_to_the_same_shape_disappears) {
  /* (2, 3) -> [2, 3] is the same shape; (n, 3) -> [0, 3] copies n; a
   * reshape to (3, 2) stays, and so does one of an Any dim (nothing
   * proves it unchanged). */
  pt_expect(nimble_passes_simplify_shapes,
            "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(n, 3), float32],\n"
            "          %z: Tensor[(?, 3), float32]) {\n"
            "  (reshape(%x, newshape=[2, 3]), reshape(%y, newshape=[0, 3]),\n"
            "   reshape(%x, newshape=[3, 2]), reshape(%z, newshape=[-1, 3]),\n"
            "   cast(%x, dtype=\"float32\"))\n"
            "}\n",
            "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(n, 3), float32],\n"
            "          %z: Tensor[(?, 3), float32]) {\n"
            "  (%x, %y, reshape(%x, newshape=[3, 2]), reshape(%z, newshape=[-1, 3]), %x)\n"
            "}\n");
}
END_TEST

START_TEST(test_integer_identities_only_where_the_type_is_unchanged) {
  /* x + 0 is x; 0 - x is not; x * 1 where 1 broadcasts x to a larger
   * shape is not x; float x * 1 is left alone (it is not shape code). */
  pt_expect(nimble_passes_simplify_shapes,
            "def @main(%n: int64, %v: Tensor[(2,), int64], %f: float32) {\n"
            "  (add(%n, 0), subtract(0, %n), multiply(%n, const[(2,), int64]{1, 1}),\n"
            "   divide(%v, 1), multiply(%f, 1.0))\n"
            "}\n",
            "def @main(%n: int64, %v: Tensor[(2,), int64], %f: float32) {\n"
            "  (%n, subtract(0, %n), multiply(%n, const[(2,), int64]{1, 1}), %v, multiply(%f, 1.0))\n"
            "}\n");
}
END_TEST

int main(void) {
  Suite *s = suite_create("simplify_shapes");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_shape_of_a_static_tensor_becomes_a_constant);
  tcase_add_test(tc, test_a_static_dim_of_a_dynamic_shape_folds_and_its_arithmetic_too);
  tcase_add_test(tc, test_reshape_to_the_same_shape_disappears);
  tcase_add_test(tc, test_integer_identities_only_where_the_type_is_unchanged);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
