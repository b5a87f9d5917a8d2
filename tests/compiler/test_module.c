/* Modules (ir/module.c) and expression builders (ir/expr.c). */
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;
static void setup(void) { NIMBLE_ASSERT_OK(nimble_arena_create(&arena)); }
static void teardown(void) { nimble_arena_destroy(arena); }

static const nimble_typedef *add_option(nimble_module *m) {
  const nimble_type *t = nimble_type_var(arena, nimble_module_fresh_var_id(m), "T");
  const char *names[2] = {"Some", "None"};
  size_t nfields[2] = {1, 0};
  const nimble_type *const some_fields[1] = {t};
  const nimble_type *const *fields[2] = {some_fields, NULL};
  const nimble_typedef *td;
  NIMBLE_ASSERT_OK(nimble_module_add_typedef(m, "Option", 1, &t, 2, names, nfields, fields, NULL, &td));
  return td;
}

START_TEST(test_typedefs_own_their_constructors_in_order) {
  nimble_module *m;
  NIMBLE_ASSERT_OK(nimble_module_create(arena, &m));
  const nimble_typedef *td = add_option(m);
  ck_assert_uint_eq(td->num_ctors, 2);
  ck_assert_str_eq(td->ctors[1]->name, "None");
  ck_assert_uint_eq(td->ctors[1]->tag, 1);
  ck_assert_ptr_eq(td->ctors[0]->owner, td);
  ck_assert_ptr_eq(nimble_module_find_ctor(m, "Some"), td->ctors[0]);
  ck_assert_ptr_eq(nimble_module_find_typedef(m, "Option"), td);
  ck_assert_ptr_null(nimble_module_find_ctor(m, "Option"));
  ck_assert_uint_eq(nimble_module_num_typedefs(m), 1);
  ck_assert_ptr_eq(nimble_module_typedef_at(m, 0), td);
  ck_assert_ptr_null(nimble_module_typedef_at(m, 1));
}
END_TEST

START_TEST(test_duplicate_names_are_refused) {
  nimble_module *m;
  NIMBLE_ASSERT_OK(nimble_module_create(arena, &m));
  add_option(m);
  const char *names[1] = {"Some"};
  size_t nfields[1] = {0};
  const nimble_type *const *fields[1] = {NULL};
  NIMBLE_ASSERT_ERROR(nimble_module_add_typedef(m, "Option", 0, NULL, 0, NULL, NULL, NULL, NULL, NULL),
                      NIMBLE_ALREADY_EXISTS, "type 'Option' is defined twice");
  NIMBLE_ASSERT_ERROR(nimble_module_add_typedef(m, "Maybe", 0, NULL, 1, names, nfields, fields, NULL, NULL),
                      NIMBLE_ALREADY_EXISTS, "constructor 'Some' of type 'Maybe' is already defined");
  const nimble_expr *f = nimble_ir_func(arena, 0, NULL, 0, NULL, NULL, nimble_ir_scalar_i64(arena, 1, NULL), NULL);
  NIMBLE_ASSERT_OK(nimble_module_add_func(m, "f", f));
  NIMBLE_ASSERT_ERROR(nimble_module_add_func(m, "f", f), NIMBLE_ALREADY_EXISTS, "'@f' is defined twice");
  NIMBLE_ASSERT_ERROR(nimble_module_add_func(m, "g", nimble_ir_scalar_i64(arena, 1, NULL)), NIMBLE_INVALID_ARGUMENT,
                      "global '@g' must be a function");
  NIMBLE_ASSERT_ERROR(nimble_module_replace_func(m, "h", f), NIMBLE_NOT_FOUND, "no global function '@h'");
}
END_TEST

START_TEST(test_builders_copy_arrays_and_check_sizes) {
  int64_t dims[2] = {2, 3};
  float data[6] = {1, 2, 3, 4, 5, 6};
  const nimble_expr *c = nimble_ir_constant(arena, NIMBLE_DTYPE_FLOAT32, 2, dims, data, NULL);
  dims[0] = 9;
  data[0] = 42;
  ck_assert_int_eq(c->u.constant.dims[0], 2);
  ck_assert(((const float *)c->u.constant.data)[0] == 1.0f);
  ck_assert_uint_eq(c->u.constant.num_elements, 6);
  int64_t bad[2] = {-1, 3};
  ck_assert_ptr_null(nimble_ir_constant(arena, NIMBLE_DTYPE_FLOAT32, 2, bad, data, NULL));
  int64_t huge[3] = {INT64_MAX, INT64_MAX, 2};
  ck_assert_ptr_null(nimble_ir_constant(arena, NIMBLE_DTYPE_FLOAT32, 3, huge, data, NULL));
  const nimble_expr *fields[2] = {c, c};
  const nimble_expr *t = nimble_ir_tuple(arena, 2, fields, NULL);
  fields[0] = NULL;
  ck_assert_ptr_eq(t->u.tuple.fields[0], c);
  const nimble_expr *x = nimble_ir_var(arena, "x", NULL, NULL);
  const nimble_expr *out;
  NIMBLE_ASSERT_ERROR(nimble_ir_call_op(arena, nimble_op_find("where"), 2, fields, NULL, 0, NULL, &out),
                      NIMBLE_INVALID_ARGUMENT, "operator 'where' takes 3 inputs, got 2");
  NIMBLE_ASSERT_ERROR(nimble_ir_call_op(arena, nimble_op_find("concatenate"), 0, &x, NULL, 0, NULL, &out),
                      NIMBLE_INVALID_ARGUMENT, "operator 'concatenate' takes at least 1 inputs, got 0");
}
END_TEST

int main(void) {
  Suite *s = suite_create("module");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_typedefs_own_their_constructors_in_order);
  tcase_add_test(tc, test_duplicate_names_are_refused);
  tcase_add_test(tc, test_builders_copy_arrays_and_check_sizes);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
