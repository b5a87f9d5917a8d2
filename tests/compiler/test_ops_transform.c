/* Layout operators (ops/transform.c): reshape with 0/-1, slices with negative and clamped indices, concatenate, transpose and the rest.
 * Shapes are computed by hand; see the comments. */
#include <stdint.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_reshape_copies_zero_and_infers_minus_one) {
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[0, -1]", "2x3x4"), "(2, 12)");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[-1]", "2x3x4"), "(24)");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[4, 0, 2]", "2x3x4"), "(4, 3, 2)");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[-1, 8]", "2x3x4"), "(3, 8)");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[5, 5]", "2x3x4"),
                   "error: in shape function of 'reshape': cannot reshape Tensor[(2, 3, 4), float32] (24 "
                   "elements) to Tensor[(5, 5), float32] (25 elements)");
  /* A dim both shapes share (3) is left out of the comparison, not of
   * the counts the message gives: 36 against 45, not 12 against 15. */
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[15, 3]", "1x12x3"),
                   "error: in shape function of 'reshape': cannot reshape Tensor[(1, 12, 3), float32] (36 "
                   "elements) to Tensor[(15, 3), float32] (45 elements)");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[-1, 5]", "2x3x4"),
                   "error: in shape function of 'reshape': cannot reshape Tensor[(2, 3, 4), float32]: 24 "
                   "elements do not divide into parts of 5");
  ck_assert_str_eq(SHAPES1("reshape", "newshape=[-1, -1]", "2x3x4"),
                   "error: in shape function of 'reshape': new shape has more than one -1");
}
END_TEST

START_TEST(test_strided_slice_with_negative_and_clamped_indices) {
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[-3], end=[100]", "10"), "(3)");
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[-100], end=[5]", "10"), "(5)");
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[0], end=[-1]", "10"), "(9)");
  /* 8, 6, 4 going down to (not including) 2. */
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[8], end=[2], strides=[-2]", "10"), "(3)");
  /* The whole axis reversed: begin -1 is 9, end -11 clamps below 0. */
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[-1], end=[-11], strides=[-1]", "10"), "(10)");
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[5], end=[5]", "10"), "(0)");
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[1, 0], end=[3, 100], strides=[1, 3], axes=[2, 0]", "7x4x5"),
                   "(3, 4, 2)");
  ck_assert_str_eq(SHAPES1("strided_slice", "begin=[0], end=[1], strides=[0]", "10"),
                   "error: in shape function of 'strided_slice': stride of axis 0 is 0");
}
END_TEST

START_TEST(test_concatenate_and_transpose) {
  ck_assert_str_eq(SHAPES2("concatenate", "axis=1", "2x3", "2x5"), "(2, 8)");
  ck_assert_str_eq(shapes("concatenate", "axis=-1", 3, IN(in_shape("2x1"), in_shape("2x2"), in_shape("2x3"))), "(2, 6)");
  ck_assert_str_eq(SHAPES2("concatenate", "axis=0", "2x3", "2x5"),
                   "error: in shape function of 'concatenate': cannot concatenate Tensor[(2, 3), float32] with "
                   "Tensor[(2, 5), float32] along axis 0: dim 1 differs");
  ck_assert_str_eq(SHAPES1("transpose", "axes=[1, 0, 2]", "2x3x4"), "(3, 2, 4)");
  ck_assert_str_eq(SHAPES1("transpose", "", "2x3x4"), "(4, 3, 2)");
  ck_assert_str_eq(SHAPES1("transpose", "axes=[0, 0, 1]", "2x3x4"),
                   "error: in shape function of 'transpose': axes is not a permutation: 0 repeats");
}
END_TEST

START_TEST(test_layout_operators) {
  ck_assert_str_eq(shapes("take", "axis=1", 2, IN(in_shape("5x6"), in_values(NIMBLE_DTYPE_INT64, "2x3", NULL))),
                   "(5, 2, 3)");
  ck_assert_str_eq(SHAPES1("split", "sections=3", "6x4"), "(2, 4) (2, 4) (2, 4)");
  ck_assert_str_eq(SHAPES1("split", "axis=1, sizes=[1, 3]", "6x4"), "(6, 1) (6, 3)");
  ck_assert_str_eq(SHAPES1("split", "sections=4", "6x4"),
                   "error: in shape function of 'split': axis 0 of 6 does not split into 4 equal parts");
  ck_assert_str_eq(SHAPES1("squeeze", "axes=[0, -1]", "1x3x1"), "(3)");
  ck_assert_str_eq(SHAPES1("squeeze", "", "1x3x1x2"), "(3, 2)");
  ck_assert_str_eq(SHAPES1("squeeze", "axes=[1]", "1x3"),
                   "error: in shape function of 'squeeze': cannot squeeze axis 1 of Tensor[(1, 3), float32]: not 1");
  ck_assert_str_eq(SHAPES1("expand_dims", "axis=1, num_newaxis=2", "4x5"), "(4, 1, 1, 5)");
  ck_assert_str_eq(SHAPES1("expand_dims", "axis=-1", "4x5"), "(4, 5, 1)");
  ck_assert_str_eq(SHAPES1("broadcast_to", "shape=[2, 1, 6]", "3x1"), "(2, 3, 6)");
  ck_assert_str_eq(SHAPES1("tile", "reps=[2, 3]", "4x5"), "(8, 15)");
  ck_assert_str_eq(SHAPES1("pad", "pads=[1, 0, 2, -1]", "4x5"), "(7, 4)");
  ck_assert_str_eq(SHAPES1("pad", "pads=[1, 1]", "4x5"),
                   "error: in shape function of 'pad': pads needs 2 x rank = 4 entries (all begins, then all ends), got 2");
  ck_assert_str_eq(SHAPES1("flatten", "", "2x3x4"), "(2, 12)");
  ck_assert_str_eq(SHAPES1("flatten", "axis=0", "2x3x4"), "(1, 24)");
  ck_assert_str_eq(SHAPES1("shape_of", "", "2x3x4"), "(3)");
  /* check_rank: the shape of a tensor (here a shape of 3 entries) checked
   * to have `rank` entries; at run time a mismatch is an error naming it. */
  nimble_shape_input_t sh3 = in_values(NIMBLE_DTYPE_INT64, "3", NULL);
  ck_assert_str_eq(shapes("check_rank", "rank=3", 1, &sh3), "(3)");
  ck_assert_str_eq(shapes("check_rank", "rank=2, what=\"input 'y' of node 'n'\"", 1, &sh3),
                   "error: in shape function of 'check_rank': input 'y' of node 'n' has rank 3, expected rank 2");
  ck_assert_str_eq(shapes("check_rank", "rank=9", 1, &sh3),
                   "error: in shape function of 'check_rank': rank 9 is not in 0 to 8");
}
END_TEST

START_TEST(test_gather_nd_follows_onnx) {
  nimble_shape_input_t idx = in_values(NIMBLE_DTYPE_INT64, "5x2", NULL);
  ck_assert_str_eq(shapes("gather_nd", "", 2, IN(in_shape("2x3x4"), idx)), "(5, 4)");
  /* ONNX's example: batch_dims 1, data [2, 2, 2], indices [2, 1] -> [2, 2]. */
  ck_assert_str_eq(shapes("gather_nd", "batch_dims=1", 2,
                          IN(in_shape("2x2x2"), in_values(NIMBLE_DTYPE_INT64, "2x1", NULL))),
                   "(2, 2)");
  ck_assert_str_eq(shapes("gather_nd", "batch_dims=1", 2,
                          IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT64, "2x5x1", NULL))),
                   "(2, 5, 4)");
  ck_assert_str_eq(shapes("gather_nd", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "5x3", NULL))),
                   "error: in shape function of 'gather_nd': indices of depth 3 after 0 batch dims do not fit "
                   "Tensor[(2, 3), float32]");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_transform");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_reshape_copies_zero_and_infers_minus_one);
  tcase_add_test(tc, test_strided_slice_with_negative_and_clamped_indices);
  tcase_add_test(tc, test_concatenate_and_transpose);
  tcase_add_test(tc, test_layout_operators);
  tcase_add_test(tc, test_gather_nd_follows_onnx);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
