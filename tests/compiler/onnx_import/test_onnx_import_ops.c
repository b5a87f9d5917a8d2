/* Shape functions of the registry operators added for the importer
 * (compile-workers/compiler/ops/{indexing,vision,dyn_layout,math_extra}.c),
 * against shapes computed by hand from the ONNX operator specification. */
#include <string.h>

#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_gather_and_scatter_elements_follow_indices_and_data) {
  static const int64_t idx[6] = {0};
  /* GatherElements: the result is shaped like the indices. */
  ck_assert_str_eq(shapes("gather_elements", "axis=1", 2,
                          IN(in_shape("3x4"), in_values(NIMBLE_DTYPE_INT64, "3x2", idx))), "(3, 2)");
  ck_assert_str_eq(shapes("gather_elements", "axis=0", 2,
                          IN(in_shape("3x4"), in_values(NIMBLE_DTYPE_INT64, "2", idx))),
                   "error: in shape function of 'gather_elements': data Tensor[(3, 4), float32] and indices Tensor[(2,), int64] must have the same rank >= 1");
  /* ScatterElements and ScatterND keep data's shape. */
  ck_assert_str_eq(shapes("scatter_elements", "axis=1", 3,
                          IN(in_shape("3x4"), in_values(NIMBLE_DTYPE_INT64, "3x2", idx), in_shape("3x2"))), "(3, 4)");
  ck_assert_str_eq(shapes("scatter_nd", "", 3,
                          IN(in_shape("4x4x4"), in_values(NIMBLE_DTYPE_INT64, "2x1", idx), in_shape("2x4x4"))),
                   "(4, 4, 4)");
  /* indices [2, 1] index one axis of a rank-3 data: updates need rank 1 + 2. */
  ck_assert_str_eq(shapes("scatter_nd", "", 3,
                          IN(in_shape("4x4x4"), in_values(NIMBLE_DTYPE_INT64, "2x1", idx), in_shape("2x4"))),
                   "error: in shape function of 'scatter_nd': updates Tensor[(2, 4), float32] should have rank 3");
}
END_TEST

START_TEST(test_one_hot_inserts_the_depth_at_axis) {
  static const int64_t depth = 10;
  ck_assert_str_eq(shapes("one_hot", "axis=1", 3,
                          IN(in_values(NIMBLE_DTYPE_INT64, "2x3", NULL), in_values(NIMBLE_DTYPE_INT64, "", &depth),
                             in_shape("2"))), "(2, 10, 3)");
  ck_assert_str_eq(shapes("one_hot", "", 3,
                          IN(in_values(NIMBLE_DTYPE_INT64, "2x3", NULL), in_values(NIMBLE_DTYPE_INT64, "", &depth),
                             in_shape("2"))), "(2, 3, 10)");
}
END_TEST

START_TEST(test_conv2d_transpose_output_extent_matches_the_onnx_formula) {
  /* (in - 1) * stride - pads + dilation * (k - 1) + 1 + output_padding:
   * (3 - 1) * 3 + 3 + 1 = 10 and (3 - 1) * 2 + 3 + 1 = 8; channels 2 * 1. */
  ck_assert_str_eq(shapes("conv2d_transpose", "strides=[3, 2], output_padding=[1, 1]", 2,
                          IN(in_shape("1x1x3x3"), in_shape("1x2x3x3"))), "(1, 2, 10, 8)");
  /* groups multiply the weight's channels per group. */
  ck_assert_str_eq(shapes("conv2d_transpose", "groups=2, pads=[1, 1, 1, 1]", 2,
                          IN(in_shape("1x4x5x5"), in_shape("4x3x3x3"))), "(1, 6, 5, 5)");
}
END_TEST

START_TEST(test_resize_and_dyn_resize_give_the_requested_extents) {
  ck_assert_str_eq(SHAPES1("resize", "sizes=[1, 3, -1, 8]", "1x3x4x4"), "(1, 3, 4, 8)");
  static const float scales[4] = {1.0f, 1.0f, 2.0f, 3.0f};
  /* floor(4 * 2), floor(4 * 3) */
  ck_assert_str_eq(shapes("dyn_resize", "", 2, IN(in_shape("1x3x4x4"), in_values(NIMBLE_DTYPE_FLOAT32, "4", scales))),
                   "(1, 3, 8, 12)");
  static const int64_t sizes[4] = {1, 3, 7, 5};
  ck_assert_str_eq(shapes("dyn_resize", "", 2, IN(in_shape("1x3x4x4"), in_values(NIMBLE_DTYPE_INT64, "4", sizes))),
                   "(1, 3, 7, 5)");
}
END_TEST

START_TEST(test_non_max_suppression_bounds_by_batches_classes_and_boxes) {
  /* Upper bound: 2 batches x 3 classes x 5 boxes = 30 triples. */
  ck_assert_str_eq(SHAPES2("non_max_suppression", "", "2x5x4", "2x3x5"), "(30, 3)");
  ck_assert_str_eq(SHAPES2("non_max_suppression", "", "2x5x3", "2x3x5"),
                   "error: in shape function of 'non_max_suppression': dimension 3 does not match 4");
}
END_TEST

START_TEST(test_dyn_layout_ops_read_their_run_time_tensors) {
  static const int64_t axes[2] = {0, 3}, sq[1] = {1}, reps[2] = {2, 3}, pads[4] = {1, 0, 2, -1}, split[2] = {1, 3},
                       red[1] = {1};
  ck_assert_str_eq(shapes("dyn_expand_dims", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "2", axes))),
                   "(1, 2, 3, 1)");
  ck_assert_str_eq(shapes("dyn_squeeze", "", 2, IN(in_shape("2x1x3"), in_values(NIMBLE_DTYPE_INT64, "1", sq))),
                   "(2, 3)");
  ck_assert_str_eq(shapes("dyn_tile", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "2", reps))), "(4, 9)");
  ck_assert_str_eq(shapes("dyn_pad", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "4", pads))), "(5, 2)");
  ck_assert_str_eq(shapes("dyn_split", "axis=1", 2, IN(in_shape("2x4"), in_values(NIMBLE_DTYPE_INT64, "2", split))),
                   "(2, 1) (2, 3)");
  ck_assert_str_eq(shapes("dyn_sum", "keepdims=0", 2, IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT64, "1", red))),
                   "(2, 4)");
  ck_assert_str_eq(shapes("dyn_sum", "", 2, IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT64, "1", red))),
                   "(2, 1, 4)");
  /* Empty axes: everything, or nothing with noop_with_empty_axes. */
  ck_assert_str_eq(shapes("dyn_sum", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "0", red))), "(1, 1)");
  ck_assert_str_eq(shapes("dyn_sum", "noop_with_empty_axes=1", 2,
                          IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "0", red))), "(2, 3)");
  /* The shape function needs the values. */
  ck_assert_str_eq(shapes("dyn_tile", "", 2, IN(in_shape("2x3"), in_values(NIMBLE_DTYPE_INT64, "2", NULL))),
                   "error: shape function of 'dyn_tile' reads the values of input 1; none given");
}
END_TEST

START_TEST(test_math_extra_ops_have_onnx_shapes) {
  ck_assert_str_eq(SHAPES1("acos", "", "2x3"), "(2, 3)");
  ck_assert_str_eq(SHAPES1("det", "", "4x3x3"), "(4)");
  ck_assert_str_eq(SHAPES1("det", "", "3x2"), "error: in shape function of 'det': det needs square matrices, got Tensor[(3, 2), float32]");
  static const int64_t ten = 10;
  ck_assert_str_eq(shapes("window", "kind=\"hamming\"", 1, IN(in_values(NIMBLE_DTYPE_INT64, "", &ten))), "(10)");
  ck_assert_str_eq(shapes("grid_sample", "", 2, IN(in_shape("1x3x8x8"), in_shape("1x5x6x2"))), "(1, 3, 5, 6)");
  static const int64_t bi[3] = {0, 0, 0};
  ck_assert_str_eq(shapes("roi_align", "output_height=5, output_width=4", 3,
                          IN(in_shape("1x3x8x8"), in_shape("3x4"), in_values(NIMBLE_DTYPE_INT64, "3", bi))),
                   "(3, 3, 5, 4)");
}
END_TEST

START_TEST(test_unique_all_bounds_by_elements_or_slices) {
  /* Flattened: at most 6 distinct values; inverse indices one per element. */
  ck_assert_str_eq(SHAPES1("unique_all", "", "2x3"), "(6) (6) (6) (6)");
  /* Along axis 1: at most 3 distinct columns, inverse one per column. */
  ck_assert_str_eq(SHAPES1("unique_all", "has_axis=1, axis=1", "2x3"), "(2, 3) (3) (3) (3)");
}
END_TEST

START_TEST(test_einsum_follows_the_equation) {
  ck_assert_str_eq(SHAPES2("einsum", "equation=\"bij,bjk->bik\"", "2x3x4", "2x4x5"), "(2, 3, 5)");
  /* Implicit output: the letters seen once, alphabetically: "ij,jk" -> "ik". */
  ck_assert_str_eq(SHAPES2("einsum", "equation=\"ij,jk\"", "3x4", "4x5"), "(3, 5)");
  /* A diagonal under broadcast leading dims. */
  ck_assert_str_eq(SHAPES1("einsum", "equation=\"...ii ->...i\"", "3x5x5"), "(3, 5)");
  ck_assert_str_eq(SHAPES1("einsum", "equation=\"ij->\"", "3x4"), "()");
  ck_assert_str_eq(SHAPES2("einsum", "equation=\"ij,jk->ik\"", "3x4", "5x6"),
                   "error: in shape function of 'einsum': dimension 4 does not match 5");
  ck_assert_str_eq(SHAPES1("einsum", "equation=\"ij->ik\"", "3x4"),
                   "error: in shape function of 'einsum': output letter 'k' is not in the inputs of 'ij->ik'");
}
END_TEST

START_TEST(test_max_pool_with_indices_matches_the_pool_extent) {
  /* (5 + 2 + 2 - 5) / 1 + 1 = 5; indices int64 of the same shape. */
  ck_assert_str_eq(SHAPES1("max_pool2d_with_indices", "kernel_shape=[5, 5], pads=[2, 2, 2, 2]", "1x1x5x5"),
                   "(1, 1, 5, 5) (1, 1, 5, 5)");
  /* (5 - 2) / 2 + 1 = 2, with ceil_mode 3. */
  ck_assert_str_eq(SHAPES1("max_pool2d_with_indices", "kernel_shape=[2, 2], strides=[2, 2]", "1x1x5x5"),
                   "(1, 1, 2, 2) (1, 1, 2, 2)");
  ck_assert_str_eq(SHAPES1("max_pool2d_with_indices", "kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1", "1x1x5x5"),
                   "(1, 1, 3, 3) (1, 1, 3, 3)");
}
END_TEST

START_TEST(test_random_ops_and_bit_shift_keep_their_input_shapes) {
  ck_assert_str_eq(SHAPES1("random_uniform_like", "", "3x4"), "(3, 4)");
  ck_assert_str_eq(SHAPES1("bernoulli", "", "10"), "(10)");
  ck_assert_str_eq(SHAPES1("dropout_train", "", "3x4x5"), "(3, 4, 5) (3, 4, 5)");
  ck_assert_str_eq(shapes("bit_shift", "", 2, IN(in_values(NIMBLE_DTYPE_UINT8, "3", NULL), in_values(NIMBLE_DTYPE_UINT8, "1", NULL))),
                   "(3)");
  ck_assert_str_eq(SHAPES2("bit_shift", "", "3", "3"),
                   "error: in shape function of 'bit_shift': input 0 must be an integer tensor, got Tensor[(3,), float32]");
}
END_TEST

START_TEST(test_lstm_scan_gives_every_step_s_h_and_the_last_state) {
  /* xw [T, B, D, 4H], r [D, H, 4H], h0 and c0 [D, B, H] -> y [T, D, B, H],
   * h, c [D, B, H]. */
  ck_assert_str_eq(shapes("lstm_scan", "", 4,
                          IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"))),
                   "(5, 1, 2, 8) (1, 2, 8) (1, 2, 8)");
  ck_assert_str_eq(shapes("lstm_scan", "reverse=1", 4,
                          IN(in_shape("0x1x1x4"), in_shape("1x1x4"), in_shape("1x1x1"), in_shape("1x1x1"))),
                   "(0, 1, 1, 1) (1, 1, 1) (1, 1, 1)");
  /* Both directions at once; reverse=1 with two is an error. */
  ck_assert_str_eq(shapes("lstm_scan", "", 4,
                          IN(in_shape("5x2x2x32"), in_shape("2x8x32"), in_shape("2x2x8"), in_shape("2x2x8"))),
                   "(5, 2, 2, 8) (2, 2, 8) (2, 2, 8)");
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "reverse=1", 4,
                                      IN(in_shape("5x2x2x32"), in_shape("2x8x32"), in_shape("2x2x8"), in_shape("2x2x8"))),
                               "forward and reversed already"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x3x32"), in_shape("3x8x32"), in_shape("3x2x8"), in_shape("3x2x8"))),
                               "must be 1 or 2"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x1x32"), in_shape("2x8x32"), in_shape("2x2x8"), in_shape("2x2x8"))),
                               "the directions"));
  /* The peepholes, when given, are [D, 3H]. */
  ck_assert_str_eq(shapes("lstm_scan", "", 5,
                          IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                             in_shape("1x24"))),
                   "(5, 1, 2, 8) (1, 2, 8) (1, 2, 8)");
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 5, IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"),
                                                             in_shape("1x2x8"), in_shape("1x32"))),
                               "the peepholes"));
  /* Sequence lengths: int64 [B], forward only. */
  static const int64_t lens[2] = {3, 5};
  ck_assert_str_eq(shapes("lstm_scan", "", 6,
                          IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                             in_shape("1x24"), in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                   "(5, 1, 2, 8) (1, 2, 8) (1, 2, 8)");
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "reverse=1", 6,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                                         in_shape("1x24"), in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                               "forward direction only"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 6,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                                         in_shape("1x24"), in_values(NIMBLE_DTYPE_INT64, "3", lens))),
                               "the batch (the sequence lengths)"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 6,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                                         in_shape("1x24"), in_shape("2"))),
                               "must be int64"));
  /* The peepholes are checked with the lengths after them too. */
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 6,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"),
                                         in_shape("1x32"), in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                               "the peepholes"));
  /* r must be [D, H, 4H], xw's columns 4H, the states [D, B, H]. */
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x2x8"))),
                               "4 x hidden size"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x1x36"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"))),
                               "the gate columns"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x3x8"), in_shape("1x2x8"))),
                               "the batch"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x1x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x7"))),
                               "the hidden size"));
  ck_assert_ptr_nonnull(strstr(shapes("lstm_scan", "", 4,
                                      IN(in_shape("5x2x32"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x2x8"))),
                               "error"));
}
END_TEST

START_TEST(test_gru_scan_gives_every_step_s_h_and_the_last_h) {
  /* xw [T, B, D, 3H], r [D, H, 3H], h0 [D, B, H], rbh [D, H] -> y [T, D, B,
   * H], h [D, B, H]. */
  ck_assert_str_eq(shapes("gru_scan", "", 4,
                          IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x8"))),
                   "(5, 1, 2, 8) (1, 2, 8)");
  ck_assert_str_eq(shapes("gru_scan", "linear_before_reset=1", 4,
                          IN(in_shape("0x1x2x3"), in_shape("2x1x3"), in_shape("2x1x1"), in_shape("2x1"))),
                   "(0, 2, 1, 1) (2, 1, 1)");
  static const int64_t lens[2] = {3, 5};
  ck_assert_str_eq(shapes("gru_scan", "", 5,
                          IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x8"),
                             in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                   "(5, 1, 2, 8) (1, 2, 8)");
  /* Lengths go with one forward direction only. */
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "reverse=1", 5,
                                      IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x8"),
                                         in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                               "forward direction only"));
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "", 5,
                                      IN(in_shape("5x2x2x24"), in_shape("2x8x24"), in_shape("2x2x8"), in_shape("2x8"),
                                         in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                               "forward direction only"));
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "", 5,
                                      IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x8"),
                                         in_shape("2"))),
                               "must be int64"));
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "", 4,
                                      IN(in_shape("5x2x1x24"), in_shape("1x8x32"), in_shape("1x2x8"), in_shape("1x8"))),
                               "3 x hidden size"));
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "", 4,
                                      IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("1x24"))),
                               "the h gate's recurrent bias"));
  ck_assert_ptr_nonnull(strstr(shapes("gru_scan", "", 4,
                                      IN(in_shape("5x2x1x24"), in_shape("1x8x24"), in_shape("1x2x8"), in_shape("2x8"))),
                               "the directions (the h gate's recurrent bias)"));
}
END_TEST

START_TEST(test_rnn_scan_gives_every_step_s_h_and_the_last_h) {
  /* xw [T, B, D, H], r [D, H, H], h0 [D, B, H] -> y [T, D, B, H], h [D, B, H]. */
  ck_assert_str_eq(shapes("rnn_scan", "", 3, IN(in_shape("5x2x2x8"), in_shape("2x8x8"), in_shape("2x2x8"))),
                   "(5, 2, 2, 8) (2, 2, 8)");
  static const int64_t lens[2] = {3, 5};
  ck_assert_str_eq(shapes("rnn_scan", "", 4,
                          IN(in_shape("5x2x1x8"), in_shape("1x8x8"), in_shape("1x2x8"),
                             in_values(NIMBLE_DTYPE_INT64, "2", lens))),
                   "(5, 1, 2, 8) (1, 2, 8)");
  ck_assert_ptr_nonnull(strstr(shapes("rnn_scan", "", 3, IN(in_shape("5x2x1x8"), in_shape("1x8x16"), in_shape("1x2x8"))),
                               "1 x hidden size"));
  ck_assert_ptr_nonnull(strstr(shapes("rnn_scan", "", 3, IN(in_shape("5x2x1x16"), in_shape("1x8x8"), in_shape("1x2x8"))),
                               "the gate columns"));
  ck_assert_ptr_nonnull(strstr(shapes("rnn_scan", "", 3, IN(in_shape("5x2x1x8"), in_shape("1x8x8"), in_shape("1x3x8"))),
                               "the batch"));
  ck_assert_ptr_nonnull(strstr(shapes("rnn_scan", "", 3, IN(in_shape("5x2x1x8"), in_shape("1x8x8"), in_shape("2x2x8"))),
                               "the directions"));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_ops");
  TCase *tc = tcase_create("shapes");
  tcase_add_test(tc, test_gather_and_scatter_elements_follow_indices_and_data);
  tcase_add_test(tc, test_one_hot_inserts_the_depth_at_axis);
  tcase_add_test(tc, test_conv2d_transpose_output_extent_matches_the_onnx_formula);
  tcase_add_test(tc, test_resize_and_dyn_resize_give_the_requested_extents);
  tcase_add_test(tc, test_non_max_suppression_bounds_by_batches_classes_and_boxes);
  tcase_add_test(tc, test_dyn_layout_ops_read_their_run_time_tensors);
  tcase_add_test(tc, test_math_extra_ops_have_onnx_shapes);
  tcase_add_test(tc, test_unique_all_bounds_by_elements_or_slices);
  tcase_add_test(tc, test_einsum_follows_the_equation);
  tcase_add_test(tc, test_max_pool_with_indices_matches_the_pool_extent);
  tcase_add_test(tc, test_random_ops_and_bit_shift_keep_their_input_shapes);
  tcase_add_test(tc, test_lstm_scan_gives_every_step_s_h_and_the_last_state);
  tcase_add_test(tc, test_gru_scan_gives_every_step_s_h_and_the_last_h);
  tcase_add_test(tc, test_rnn_scan_gives_every_step_s_h_and_the_last_h);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
