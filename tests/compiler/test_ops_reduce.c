/* Reductions (ops/reduce.c): axes, keepdims, arg reductions.
 * Shapes are computed by hand; see the comments. */
#include <stdint.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_reductions_with_axes_and_keepdims) {
  ck_assert_str_eq(SHAPES1("sum", "axes=[1]", "2x3x4"), "(2, 4)");
  ck_assert_str_eq(SHAPES1("mean", "axes=[1], keepdims=1", "2x3x4"), "(2, 1, 4)");
  ck_assert_str_eq(SHAPES1("max", "axes=[-1, 0]", "2x3x4"), "(3)");
  ck_assert_str_eq(SHAPES1("prod", "", "2x3x4"), "()");
  ck_assert_str_eq(SHAPES1("argmax", "axis=2", "2x3x4"), "(2, 3, 1)");
  ck_assert_str_eq(SHAPES1("argmin", "axis=0, keepdims=0", "2x3x4"), "(3, 4)");
  ck_assert_str_eq(SHAPES1("sum", "axes=[3]", "2x3x4"),
                   "error: in shape function of 'sum': axis 3 is out of range for rank 3");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_reduce");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_reductions_with_axes_and_keepdims);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
