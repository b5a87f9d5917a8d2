/* Types (ir/type.c, ir/dtype.c): constructors, structural equality and
 * the text form. */
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
  tcase_add_test(tc, test_type_equality_is_structural);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
