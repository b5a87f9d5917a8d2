/* Neural-network operators (ops/nn.c): conv2d and pooling output sizes, products and normalization.
 * Shapes are computed by hand; see the comments. */
#include <stdint.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_conv2d_output_sizes_with_pads_strides_dilations_groups) {
  /* ResNet's stem: 224, kernel 7, stride 2, pad 3 -> 112. */
  ck_assert_str_eq(SHAPES2("conv2d", "strides=[2, 2], pads=[3, 3, 3, 3]", "1x3x224x224", "64x3x7x7"),
                   "(1, 64, 112, 112)");
  /* Dilation 2 makes a 3x3 kernel span 5: 10 - 5 + 1 = 6. */
  ck_assert_str_eq(SHAPES2("conv2d", "dilations=[2, 2]", "1x1x10x10", "1x1x3x3"), "(1, 1, 6, 6)");
  /* Asymmetric pads and strides: H (7 + 1 + 0 - 3) / 2 + 1 = 3, W (9 + 0 + 2 - 3) / 3 + 1 = 3. */
  ck_assert_str_eq(SHAPES2("conv2d", "strides=[2, 3], pads=[1, 0, 0, 2]", "2x4x7x9", "8x4x3x3"), "(2, 8, 3, 3)");
  /* Depthwise: 32 groups of one channel. */
  ck_assert_str_eq(SHAPES2("conv2d", "groups=32, pads=[1, 1, 1, 1]", "1x32x56x56", "32x1x3x3"), "(1, 32, 56, 56)");
  ck_assert_str_eq(SHAPES2("conv2d", "", "1x3x8x8", "4x2x3x3"),
                   "error: in shape function of 'conv2d': input channels (x dim 1 vs weight dim 1 * groups) of "
                   "Tensor[(1, 3, 8, 8), float32] and Tensor[(4, 2, 3, 3), float32]: dimension 3 does not match 2");
  ck_assert_str_eq(SHAPES2("conv2d", "", "1x3x2x2", "4x3x3x3"),
                   "error: in shape function of 'conv2d': spatial axis 0: window of 3 (dilation 1) does not fit "
                   "input extent 2 with pads 0+0");
}
END_TEST

START_TEST(test_pooling_output_sizes_floor_and_ceil) {
  ck_assert_str_eq(SHAPES1("max_pool2d", "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]", "1x64x112x112"),
                   "(1, 64, 56, 56)");
  /* (6 - 3) / 2 + 1 = 2 rounding down, 3 rounding up. */
  ck_assert_str_eq(SHAPES1("avg_pool2d", "kernel_shape=[3, 3], strides=[2, 2]", "1x1x6x6"), "(1, 1, 2, 2)");
  ck_assert_str_eq(SHAPES1("avg_pool2d", "kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1", "1x1x6x6"), "(1, 1, 3, 3)");
  ck_assert_str_eq(SHAPES1("global_avg_pool2d", "", "2x512x7x7"), "(2, 512, 1, 1)");
}
END_TEST

START_TEST(test_products_and_normalization) {
  ck_assert_str_eq(SHAPES2("matmul", "", "2x1x3x4", "5x4x6"), "(2, 5, 3, 6)");
  ck_assert_str_eq(SHAPES2("matmul", "", "4", "4x6"), "(6)");
  ck_assert_str_eq(SHAPES2("matmul", "", "3x4", "4"), "(3)");
  ck_assert_str_eq(shapes("dense", "transB=1", 3, IN(in_shape("5x3"), in_shape("4x3"), in_shape("4"))), "(5, 4)");
  ck_assert_str_eq(SHAPES2("dense", "transA=1", "3x5", "3x4"), "(5, 4)");
  ck_assert_str_eq(SHAPES2("dense", "", "5x3", "4x3"),
                   "error: in shape function of 'dense': inner dimensions of Tensor[(5, 3), float32] and "
                   "Tensor[(4, 3), float32]: dimension 3 does not match 4");
  ck_assert_str_eq(SHAPES1("softmax", "axis=1", "2x10"), "(2, 10)");
  ck_assert_str_eq(shapes("layer_norm", "", 3, IN(in_shape("2x7x16"), in_shape("16"), in_shape("16"))), "(2, 7, 16)");
  ck_assert_str_eq(shapes("layer_norm", "", 2, IN(in_shape("2x7x16"), in_shape("8"))),
                   "error: in shape function of 'layer_norm': normalized dims of Tensor[(2, 7, 16), float32] and "
                   "Tensor[(8,), float32]: dimension 16 does not match 8");
  ck_assert_str_eq(shapes("batch_norm", "", 5, IN(in_shape("2x3x8x8"), in_shape("3"), in_shape("3"), in_shape("3"), in_shape("3"))),
                   "(2, 3, 8, 8)");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_nn");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_conv2d_output_sizes_with_pads_strides_dilations_groups);
  tcase_add_test(tc, test_pooling_output_sizes_floor_and_ceil);
  tcase_add_test(tc, test_products_and_normalization);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
