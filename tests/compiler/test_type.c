/* Types (ir/type.c, ir/dtype.c): constructors, structural equality and
 * the text form. */
#include <math.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;
static void setup(void) { NIMBLE_ASSERT_OK(nimble_arena_create(&arena)); }
static void teardown(void) { nimble_arena_destroy(arena); }

START_TEST(test_dtypes_have_names_and_sizes) {
  nimble_dtype_t d;
  ck_assert(nimble_dtype_from_name("int16", 5, &d));
  ck_assert_int_eq(d, NIMBLE_DTYPE_INT16);
  ck_assert(!nimble_dtype_from_name("int", 3, &d));
  ck_assert(!nimble_dtype_from_name("float32x", 8, &d));
  ck_assert_str_eq(nimble_dtype_name(NIMBLE_DTYPE_BOOL), "bool");
  ck_assert_str_eq(nimble_dtype_name((nimble_dtype_t)99), "?");
  ck_assert_uint_eq(nimble_dtype_size(NIMBLE_DTYPE_FLOAT16), 2);
  ck_assert_uint_eq(nimble_dtype_size(NIMBLE_DTYPE_INT64), 8);
  ck_assert(nimble_dtype_is_float(NIMBLE_DTYPE_FLOAT64) && !nimble_dtype_is_float(NIMBLE_DTYPE_INT8));
  ck_assert(nimble_dtype_is_int(NIMBLE_DTYPE_UINT8) && !nimble_dtype_is_int(NIMBLE_DTYPE_BOOL));
}
END_TEST

START_TEST(test_types_print_in_the_text_form) {
  char buf[256];
  nimble_dim_t dims[3] = {nimble_dim_any(), nimble_dim_var(7, "n"), nimble_dim_const(128)};
  const nimble_type *t = nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 3, dims);
  ck_assert_str_eq(nimble_type_format(t, buf, sizeof buf), "Tensor[(?, n, 128), float32]");
  const nimble_type *v = nimble_type_tensor(arena, NIMBLE_DTYPE_INT8, 1, dims + 2);
  ck_assert_str_eq(nimble_type_format(v, buf, sizeof buf), "Tensor[(128,), int8]");
  const nimble_type *fields[2] = {t, v};
  ck_assert_str_eq(nimble_type_format(nimble_type_tuple(arena, 1, fields), buf, sizeof buf),
                   "(Tensor[(?, n, 128), float32],)");
  const nimble_type *tv = nimble_type_var(arena, 3, "T");
  const nimble_type *list = nimble_type_adt(arena, "List", 1, &tv);
  ck_assert_str_eq(nimble_type_format(nimble_type_func(arena, 1, &tv, 1, &list, tv), buf, sizeof buf),
                   "fn[T](List[T]) -> T");
  /* Truncation keeps the buffer terminated and says so. */
  char small[12];
  ck_assert_str_eq(nimble_type_format(t, small, sizeof small), "Tensor[(...");
  ck_assert_str_eq(nimble_type_to_string(arena, v), "Tensor[(128,), int8]");
}
END_TEST

START_TEST(test_new_dtypes_have_names_sizes_and_classes) {
  nimble_dtype_t d;
  ck_assert(nimble_dtype_from_name("uint16", 6, &d) && d == NIMBLE_DTYPE_UINT16);
  ck_assert(nimble_dtype_from_name("uint64", 6, &d) && d == NIMBLE_DTYPE_UINT64);
  ck_assert(nimble_dtype_from_name("bfloat16", 8, &d) && d == NIMBLE_DTYPE_BFLOAT16);
  ck_assert_uint_eq(nimble_dtype_size(NIMBLE_DTYPE_UINT32), 4);
  ck_assert_uint_eq(nimble_dtype_size(NIMBLE_DTYPE_BFLOAT16), 2);
  ck_assert(nimble_dtype_is_float(NIMBLE_DTYPE_BFLOAT16) && !nimble_dtype_is_int(NIMBLE_DTYPE_BFLOAT16));
  ck_assert(nimble_dtype_is_unsigned(NIMBLE_DTYPE_UINT64) && nimble_dtype_is_int(NIMBLE_DTYPE_UINT64));
  ck_assert(!nimble_dtype_is_unsigned(NIMBLE_DTYPE_INT8) && !nimble_dtype_is_unsigned(NIMBLE_DTYPE_BOOL));
}
END_TEST

/* Bit patterns by hand: binary16 has 5 exponent bits (bias 15) and 10
 * mantissa bits; bfloat16 is a float32's upper half. */
START_TEST(test_half_conversions_round_to_nearest_even) {
  ck_assert_uint_eq(nimble_f32_to_f16(1.0f), 0x3c00);
  ck_assert_uint_eq(nimble_f32_to_f16(-2.0f), 0xc000);
  ck_assert_uint_eq(nimble_f32_to_f16(65504.0f), 0x7bff);
  ck_assert_uint_eq(nimble_f32_to_f16(65519.0f), 0x7bff); /* below the halfway point */
  ck_assert_uint_eq(nimble_f32_to_f16(65520.0f), 0x7c00); /* ties to even: overflows */
  ck_assert_uint_eq(nimble_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie, even stays */
  ck_assert_uint_eq(nimble_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* tie, odd rounds up */
  ck_assert_uint_eq(nimble_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
  ck_assert_uint_eq(nimble_f32_to_f16(0x1p-25f), 0x0000);  /* tie to even zero */
  ck_assert_uint_eq(nimble_f32_to_f16(-0.0f), 0x8000);
  ck_assert_uint_eq(nimble_f32_to_f16(INFINITY), 0x7c00);
  ck_assert_uint_eq(nimble_f32_to_f16(NAN) & 0x7e00, 0x7e00);
  /* 1 + 2^-11 + 2^-30 is just above a tie in double: rounding through float
   * would lose the 2^-30 and tie to 1.0. */
  ck_assert_uint_eq(nimble_f64_to_f16(1.0 + 0x1p-11 + 0x1p-30), 0x3c01);
  ck_assert(nimble_f16_to_f32(0x3555) == 0x1.554p-2f);
  ck_assert(nimble_f16_to_f32(0x0001) == 0x1p-24f);
  ck_assert(isinf(nimble_f16_to_f32(0xfc00)) && nimble_f16_to_f32(0xfc00) < 0);
  ck_assert(isnan(nimble_f16_to_f32(0x7e00)));
  ck_assert_uint_eq(nimble_f32_to_bf16(1.0f), 0x3f80);
  ck_assert_uint_eq(nimble_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);          /* tie, even */
  ck_assert_uint_eq(nimble_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);      /* tie, odd up */
  ck_assert_uint_eq(nimble_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above the tie */
  ck_assert_uint_eq(nimble_f32_to_bf16(3.4028235e38f), 0x7f80);           /* rounds to inf */
  ck_assert(isnan(nimble_bf16_to_f32(nimble_f32_to_bf16(NAN))));
  ck_assert(nimble_bf16_to_f32(0xc040) == -3.0f);
}
END_TEST

START_TEST(test_elements_read_as_double_and_int) {
  const uint64_t u64[2] = {UINT64_MAX, 7};
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_UINT64, u64, 0) == INT64_MAX);
  ck_assert(nimble_dtype_get_double(NIMBLE_DTYPE_UINT64, u64, 0) == 0x1p64);
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_UINT64, u64, 1) == 7);
  const uint16_t u16[1] = {65535};
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_UINT16, u16, 0) == 65535);
  const float f[3] = {-2.75f, NAN, 1e30f};
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_FLOAT32, f, 0) == -2);
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_FLOAT32, f, 1) == 0);
  ck_assert(nimble_dtype_get_int(NIMBLE_DTYPE_FLOAT32, f, 2) == INT64_MAX);
  const uint16_t bf[1] = {0xc040};
  ck_assert(nimble_dtype_get_double(NIMBLE_DTYPE_BFLOAT16, bf, 0) == -3.0);
  const int8_t i8[1] = {-128};
  ck_assert(nimble_dtype_get_double(NIMBLE_DTYPE_INT8, i8, 0) == -128.0);
}
END_TEST

START_TEST(test_type_equality_is_structural) {
  nimble_dim_t a[2] = {nimble_dim_const(2), nimble_dim_var(5, "n")};
  nimble_dim_t b[2] = {nimble_dim_const(2), nimble_dim_var(5, "m")};
  nimble_dim_t c[2] = {nimble_dim_const(2), nimble_dim_var(6, "n")};
  const nimble_type *ta = nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 2, a);
  /* Dim variables are identified by id, not by the name shown. */
  ck_assert(nimble_type_equal(ta, nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 2, b)));
  ck_assert(!nimble_type_equal(ta, nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 2, c)));
  ck_assert(!nimble_type_equal(ta, nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT64, 2, a)));
  /* Bound type parameters pair positionally: fn[A](A) -> A == fn[B](B) -> B. */
  const nimble_type *va = nimble_type_var(arena, 10, "A"), *vb = nimble_type_var(arena, 11, "B");
  const nimble_type *fa = nimble_type_func(arena, 1, &va, 1, &va, va);
  const nimble_type *fb = nimble_type_func(arena, 1, &vb, 1, &vb, vb);
  const nimble_type *fc = nimble_type_func(arena, 1, &vb, 1, &va, va);
  ck_assert(nimble_type_equal(fa, fb));
  ck_assert(!nimble_type_equal(fa, fc));
  ck_assert(!nimble_type_equal(nimble_type_adt(arena, "List", 1, &va), nimble_type_adt(arena, "Tree", 1, &va)));
}
END_TEST

int main(void) {
  Suite *s = suite_create("type");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_dtypes_have_names_and_sizes);
  tcase_add_test(tc, test_types_print_in_the_text_form);
  tcase_add_test(tc, test_new_dtypes_have_names_sizes_and_classes);
  tcase_add_test(tc, test_half_conversions_round_to_nearest_even);
  tcase_add_test(tc, test_elements_read_as_double_and_int);
  tcase_add_test(tc, test_type_equality_is_structural);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
