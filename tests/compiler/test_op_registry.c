/* The operator registry: lookups, the metadata each operator declares
 * (shape function kind, fusion pattern, attributes and defaults), attribute
 * checking, and a sweep that runs every relation on odd inputs. */
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

START_TEST(test_registry_finds_operators_by_name_and_only_those) {
  ck_assert_ptr_nonnull(nimble_op_find("add"));
  ck_assert_str_eq(nimble_op_find("conv2d")->name, "conv2d");
  ck_assert_ptr_null(nimble_op_find("Add"));
  ck_assert_ptr_null(nimble_op_find(""));
  ck_assert_ptr_eq(nimble_op_find_n("addx", 3), nimble_op_find("add"));
  /* Names are unique and every entry is complete. */
  size_t n = nimble_op_count();
  ck_assert_uint_ge(n, 60);
  for (size_t i = 0; i < n; i++) {
    const nimble_op *op = nimble_op_at(i);
    ck_assert_ptr_nonnull(op->relation);
    ck_assert_ptr_nonnull(op->doc);
    ck_assert_ptr_eq(nimble_op_find(op->name), op);
    ck_assert(op->max_inputs < 0 || op->max_inputs >= op->min_inputs);
    if (op->shape_kind == NIMBLE_SHAPE_DATA_DEPENDENT)
      ck_assert_msg(op->value_inputs != 0, "%s reads no values", op->name);
  }
  ck_assert_ptr_null(nimble_op_at(n));
}
END_TEST

static void expect_op(const char *name, nimble_shape_fn_kind_t kind, nimble_fusion_pattern_t pattern) {
  const nimble_op *op = nimble_op_find(name);
  ck_assert_msg(op != NULL, "no operator %s", name);
  ck_assert_msg(op->shape_kind == kind, "%s: shape function is %s", name, nimble_shape_fn_kind_name(op->shape_kind));
  ck_assert_msg(op->pattern == pattern, "%s: pattern is %s", name, nimble_fusion_pattern_name(op->pattern));
}

START_TEST(test_operators_declare_the_paper_s_shape_function_kinds_and_patterns) {
  expect_op("exp", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_ELEMWISE);
  expect_op("add", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_BROADCAST);
  expect_op("matmul", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_OUT_FUSABLE);
  expect_op("conv2d", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_OUT_FUSABLE);
  expect_op("sum", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_REDUCTION);
  expect_op("transpose", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_INJECTIVE);
  expect_op("softmax", NIMBLE_SHAPE_DATA_INDEPENDENT, NIMBLE_FUSE_OPAQUE);
  expect_op("arange", NIMBLE_SHAPE_DATA_DEPENDENT, NIMBLE_FUSE_OPAQUE);
  expect_op("dyn_reshape", NIMBLE_SHAPE_DATA_DEPENDENT, NIMBLE_FUSE_OPAQUE);
  expect_op("nonzero", NIMBLE_SHAPE_UPPER_BOUND, NIMBLE_FUSE_OPAQUE);
  ck_assert(nimble_op_find("split")->tuple_output);
  ck_assert(!nimble_op_find("add")->tuple_output);
  ck_assert_int_eq(nimble_op_find("concatenate")->max_inputs, -1);
}
END_TEST

START_TEST(test_attributes_fill_defaults_and_convert_ints_to_floats) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  const nimble_op *clip = nimble_op_find("clip");
  nimble_named_attr_t given[1] = {{"max", {NIMBLE_ATTR_INT, 6, 0, NULL, 0, NULL}}};
  nimble_attrs_t attrs;
  NIMBLE_ASSERT_OK(nimble_attrs_make(a, clip, given, 1, &attrs));
  ck_assert_uint_eq(attrs.count, 2);
  ck_assert(nimble_attrs_float(clip, &attrs, "max") == 6.0);
  ck_assert(nimble_attrs_float(clip, &attrs, "min") < -1e308);
  const nimble_op *pad = nimble_op_find("pad");
  int64_t pads[2] = {1, 2};
  nimble_named_attr_t pg[1] = {{"pads", {NIMBLE_ATTR_INTS, 0, 0, NULL, 2, pads}}};
  NIMBLE_ASSERT_OK(nimble_attrs_make(a, pad, pg, 1, &attrs));
  pads[0] = 99; /* the attributes hold their own copy */
  size_t n;
  const int64_t *got = nimble_attrs_ints(pad, &attrs, "pads", &n);
  ck_assert_uint_eq(n, 2);
  ck_assert_int_eq(got[0], 1);
  ck_assert_str_eq(nimble_attrs_string(pad, &attrs, "mode"), "constant");
  ck_assert_int_eq(nimble_attrs_int(nimble_op_find("softmax"), NULL, "axis"), -1);
  nimble_named_attr_t bad[1] = {{"mode", {NIMBLE_ATTR_INT, 1, 0, NULL, 0, NULL}}};
  NIMBLE_ASSERT_ERROR(nimble_attrs_make(a, pad, bad, 1, &attrs), NIMBLE_INVALID_ARGUMENT,
                      "attribute 'mode' of operator 'pad' must be a string, got an int");
  nimble_named_attr_t twice[2] = {pg[0], pg[0]};
  NIMBLE_ASSERT_ERROR(nimble_attrs_make(a, pad, twice, 2, &attrs), NIMBLE_INVALID_ARGUMENT, "given twice");
  NIMBLE_ASSERT_ERROR(nimble_attrs_make(a, nimble_op_find("exp"), pg, 1, &attrs), NIMBLE_INVALID_ARGUMENT,
                      "operator 'exp' has no attribute 'pads'");
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_every_relation_survives_odd_inputs) {
  /* Scalars, empty tensors, mismatched ranks and dtypes, Any dims: each
   * relation answers with shapes or an error, never a crash (this suite
   * runs under ASan and UBSan). */
  static const char *shapes[] = {"", "0", "1", "3", "2x3", "1x1x1x1", "4x0x2", "2x3x4x5x6x7x8x9"};
  static const nimble_dtype_t dtypes[] = {NIMBLE_DTYPE_FLOAT32, NIMBLE_DTYPE_INT64, NIMBLE_DTYPE_BOOL};
  int64_t values[16] = {2, 3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  size_t ok = 0, failed = 0;
  for (size_t i = 0; i < nimble_op_count(); i++) {
    const nimble_op *op = nimble_op_at(i);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      for (size_t d = 0; d < 3; d++) {
        nimble_shape_input_t in[5];
        size_t nin = op->min_inputs > 0 ? (size_t)op->min_inputs : 0;
        if (nin < 2 && (op->max_inputs < 0 || op->max_inputs >= 2)) nin = 2;
        for (size_t k = 0; k < nin; k++) {
          memset(&in[k], 0, sizeof in[k]);
          in[k].dtype = k == 0 ? dtypes[d] : NIMBLE_DTYPE_INT64;
          const char *p = shapes[(s + k) % 8];
          while (*p) {
            char *end;
            in[k].shape.dims[in[k].shape.rank++] = strtoll(p, &end, 10);
            p = *end == 'x' ? end + 1 : end;
          }
          size_t count = 1;
          for (size_t r = 0; r < in[k].shape.rank; r++) count *= (size_t)in[k].shape.dims[r];
          in[k].data = in[k].dtype == NIMBLE_DTYPE_INT64 && count <= 16 ? values : NULL;
        }
        nimble_shape_t out[NIMBLE_MAX_OUTPUTS];
        size_t nout;
        nimble_attrs_t defaults = {0, NULL};
        nimble_status_t st = nimble_op_compute_shapes(op, &defaults, in, nin, out, &nout);
        if (st) {
          ck_assert_int_ne(nimble_status_code(st), NIMBLE_INTERNAL);
          failed++;
        } else {
          ok++;
        }
        nimble_status_free(st);
      }
    }
  }
  ck_assert_uint_gt(ok, 100);
  ck_assert_uint_gt(failed, 100);
}
END_TEST

int main(void) {
  Suite *s = suite_create("op_registry");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_registry_finds_operators_by_name_and_only_those);
  tcase_add_test(tc, test_operators_declare_the_paper_s_shape_function_kinds_and_patterns);
  tcase_add_test(tc, test_attributes_fill_defaults_and_convert_ints_to_floats);
  tcase_add_test(tc, test_every_relation_survives_odd_inputs);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
