/* Data-dependent and upper-bound operators (ops/create.c, ops/dynamic.c) and the run-time entry point (ops/shape_fn.c).
 * Shapes are computed by hand; see the comments. */
#include <stdint.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"
#include "ops_test_util.h"

START_TEST(test_dyn_reshape_reads_the_shape_tensor) {
  int64_t spec[2] = {-1, 6};
  ck_assert_str_eq(shapes("dyn_reshape", "", 2, IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT64, "2", spec))),
                   "(4, 6)");
  int32_t spec32[3] = {0, 0, -1};
  ck_assert_str_eq(shapes("dyn_reshape", "", 2, IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT32, "3", spec32))),
                   "(2, 3, 4)");
  ck_assert_str_eq(shapes("dyn_reshape", "", 2, IN(in_shape("2x3x4"), in_values(NIMBLE_DTYPE_INT64, "2", NULL))),
                   "error: shape function of 'dyn_reshape' reads the values of input 1; none given");
}
END_TEST

START_TEST(test_data_dependent_and_upper_bound_shapes) {
  int64_t start = 0, stop = 10, step = 3;
  ck_assert_str_eq(shapes("arange", "", 3, IN(in_values(NIMBLE_DTYPE_INT64, "", &start),
                                              in_values(NIMBLE_DTYPE_INT64, "", &stop),
                                              in_values(NIMBLE_DTYPE_INT64, "", &step))),
                   "(4)");
  float fa = 0.5f, fb = 2.0f, fs = 0.5f;
  ck_assert_str_eq(shapes("arange", "", 3, IN(in_values(NIMBLE_DTYPE_FLOAT32, "", &fa),
                                              in_values(NIMBLE_DTYPE_FLOAT32, "", &fb),
                                              in_values(NIMBLE_DTYPE_FLOAT32, "", &fs))),
                   "(3)");
  int64_t down = -3;
  ck_assert_str_eq(shapes("arange", "", 3, IN(in_values(NIMBLE_DTYPE_INT64, "", &stop),
                                              in_values(NIMBLE_DTYPE_INT64, "", &start),
                                              in_values(NIMBLE_DTYPE_INT64, "", &down))),
                   "(4)");
  int64_t dims[2] = {2, 3};
  ck_assert_str_eq(shapes("constant_of_shape", "value=1.0", 1, IN(in_values(NIMBLE_DTYPE_INT64, "2", dims))), "(2, 3)");
  int64_t to[3] = {2, 1, 6};
  ck_assert_str_eq(shapes("expand", "", 2, IN(in_shape("3x1"), in_values(NIMBLE_DTYPE_INT64, "3", to))), "(2, 3, 6)");
  /* Upper bound: every element could be non-zero. */
  ck_assert_str_eq(SHAPES1("nonzero", "", "3x4"), "(2, 12)");
  ck_assert_str_eq(SHAPES1("unique", "", "3x4"), "(12)");
  ck_assert_str_eq(SHAPES1("topk", "k=4", "3x10"), "(3, 4) (3, 4)");
  ck_assert_str_eq(SHAPES1("topk", "k=11", "3x10"),
                   "error: in shape function of 'topk': k = 11 exceeds axis 1 of Tensor[(3, 10), float32]");
}
END_TEST

START_TEST(test_shape_function_refuses_bad_inputs) {
  nimble_shape_input_t neg = in_shape("2x3");
  neg.shape.dims[1] = -1;
  nimble_shape_t out[4];
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_op_compute_shapes(nimble_op_find("relu"), NULL, &neg, 1, out, &n),
                      NIMBLE_INVALID_ARGUMENT, "input 0 has negative dim -1");
  nimble_shape_input_t two[2] = {in_shape("2"), in_shape("2")};
  NIMBLE_ASSERT_ERROR(nimble_op_compute_shapes(nimble_op_find("relu"), NULL, two, 2, out, &n),
                      NIMBLE_INVALID_ARGUMENT, "2 inputs given");
  nimble_shape_input_t big = in_shape("4294967296x4294967296x4294967296");
  NIMBLE_ASSERT_ERROR(nimble_op_compute_shapes(nimble_op_find("relu"), NULL, &big, 1, out, &n),
                      NIMBLE_OUT_OF_RANGE, "too large");
  NIMBLE_ASSERT_ERROR(nimble_op_compute_shapes(nimble_op_find("reshape"), NULL, two, 1, out, &n),
                      NIMBLE_INVALID_ARGUMENT, "needs attribute 'newshape'");
}
END_TEST

START_TEST(test_dyn_strided_slice_reads_its_bounds) {
  int64_t begin[1] = {-3}, end[1] = {100};
  ck_assert_str_eq(shapes("dyn_strided_slice", "", 3,
                          IN(in_shape("10x8"), in_values(NIMBLE_DTYPE_INT64, "1", begin),
                             in_values(NIMBLE_DTYPE_INT64, "1", end))),
                   "(3, 8)");
  /* Axis 1 from 1 to 8 by 2: 1, 3, 5, 7. */
  int64_t b2[1] = {1}, e2[1] = {8}, st[1] = {2}, ax[1] = {-1};
  ck_assert_str_eq(shapes("dyn_strided_slice", "", 5,
                          IN(in_shape("10x8"), in_values(NIMBLE_DTYPE_INT64, "1", b2), in_values(NIMBLE_DTYPE_INT64, "1", e2),
                             in_values(NIMBLE_DTYPE_INT64, "1", st), in_values(NIMBLE_DTYPE_INT64, "1", ax))),
                   "(10, 4)");
  ck_assert_str_eq(shapes("dyn_strided_slice", "", 3,
                          IN(in_shape("10x8"), in_values(NIMBLE_DTYPE_INT64, "1", begin),
                             in_values(NIMBLE_DTYPE_INT64, "1", NULL))),
                   "error: shape function of 'dyn_strided_slice' reads the values of input 2; none given");
}
END_TEST

START_TEST(test_topk_takes_k_from_an_attribute_or_an_input) {
  int64_t k = 3;
  ck_assert_str_eq(shapes("topk", "", 2, IN(in_shape("3x10"), in_values(NIMBLE_DTYPE_INT64, "1", &k))), "(3, 3) (3, 3)");
  ck_assert_str_eq(SHAPES1("topk", "k=2, axis=0", "3x10"), "(2, 10) (2, 10)");
  ck_assert_str_eq(SHAPES1("topk", "", "3x10"),
                   "error: in shape function of 'topk': give k as an attribute (>= 0) or an input");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ops_dynamic");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_dyn_reshape_reads_the_shape_tensor);
  tcase_add_test(tc, test_data_dependent_and_upper_bound_shapes);
  tcase_add_test(tc, test_shape_function_refuses_bad_inputs);
  tcase_add_test(tc, test_dyn_strided_slice_reads_its_bounds);
  tcase_add_test(tc, test_topk_takes_k_from_an_attribute_or_an_input);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
