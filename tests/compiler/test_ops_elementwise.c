/* Element-wise operators (ops/elementwise.c): NumPy broadcasting and where.
 * Shapes are computed by hand; see the comments. */
#include <stdint.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_broadcast_shapes_follow_numpy) {
  /* NumPy's broadcasting documentation: 8x1x6x1 with 7x1x5 is 8x7x6x5. */
  ck_assert_str_eq(SHAPES2("add", "", "8x1x6x1", "7x1x5"), "(8, 7, 6, 5)");
  ck_assert_str_eq(SHAPES2("multiply", "", "", "3x4"), "(3, 4)");
  ck_assert_str_eq(SHAPES2("less", "", "5x4", "4"), "(5, 4)");
  ck_assert_str_eq(SHAPES2("add", "", "3x4", "5"),
                   "error: in shape function of 'add': cannot broadcast Tensor[(3, 4), float32] with "
                   "Tensor[(5,), float32]");
  ck_assert_str_eq(shapes("where", "", 3,
                          IN(in_values(NIMBLE_DTYPE_BOOL, "4x1", NULL), in_shape("1x5"), in_shape(""))),
                   "(4, 5)");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_elementwise");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_broadcast_shapes_follow_numpy);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
