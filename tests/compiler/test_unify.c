/* Unification of dims and types with Any (typing/unify.c, ops/dim.c). */
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;
static nimble_subst *subst;
static nimble_dim_ctx ctx;

static void setup(void) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  NIMBLE_ASSERT_OK(nimble_subst_create(arena, 1, &subst));
  ctx.subst = subst;
}

static void teardown(void) { nimble_arena_destroy(arena); }

static const nimble_type *tensor2(nimble_dim_t a, nimble_dim_t b) {
  nimble_dim_t d[2] = {a, b};
  return nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 2, d);
}

static const char *fmt(const nimble_type *t) {
  static char buf[256];
  return nimble_type_format(nimble_subst_apply(subst, t), buf, sizeof buf);
}

START_TEST(test_unify_equal_constants_gives_the_constant) {
  nimble_dim_t out;
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, nimble_dim_const(7), nimble_dim_const(7), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_CONST);
  ck_assert_int_eq(out.value, 7);
}
END_TEST

START_TEST(test_unify_different_constants_fails_naming_both) {
  nimble_dim_t out;
  NIMBLE_ASSERT_ERROR(nimble_dim_unify(&ctx, nimble_dim_const(3), nimble_dim_const(5), &out),
                      NIMBLE_INVALID_ARGUMENT, "dimension 3 does not match 5");
}
END_TEST

START_TEST(test_unify_any_with_constant_stays_any) {
  nimble_dim_t out;
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, nimble_dim_any(), nimble_dim_const(128), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_ANY);
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, nimble_dim_const(128), nimble_dim_any(), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_ANY);
  /* Against a variable too, and the variable stays unbound. */
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n");
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, nimble_dim_any(), n, &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_ANY);
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, n).kind, NIMBLE_DIM_VAR);
}
END_TEST

START_TEST(test_unify_binds_a_variable_to_a_constant) {
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n"), out;
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, n, nimble_dim_const(42), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_CONST);
  nimble_dim_t r = nimble_subst_resolve_dim(subst, n);
  ck_assert_int_eq(r.kind, NIMBLE_DIM_CONST);
  ck_assert_int_eq(r.value, 42);
  /* Once bound, n = 42 and n = 43 cannot both hold. */
  NIMBLE_ASSERT_ERROR(nimble_dim_unify(&ctx, n, nimble_dim_const(43), &out), NIMBLE_INVALID_ARGUMENT,
                      "42 does not match 43");
}
END_TEST

START_TEST(test_unify_binds_a_variable_to_another_variable) {
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n"), m = nimble_subst_fresh_dim_var(subst, "m"), out;
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, n, m, &out));
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, m, nimble_dim_const(9), &out));
  nimble_dim_t r = nimble_subst_resolve_dim(subst, n);
  ck_assert_int_eq(r.kind, NIMBLE_DIM_CONST);
  ck_assert_int_eq(r.value, 9);
}
END_TEST

/* Of two unbound variables the older (made first, so the one the user
 * wrote rather than a call's fresh copy) stays the representative, in
 * whichever order they are unified, and keeps its name. */
START_TEST(test_unifying_two_variables_keeps_the_older_one_either_way) {
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n"), k = nimble_subst_fresh_dim_var(subst, "k"), out;
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, n, k, &out)); /* binds n: turned around */
  nimble_dim_t r = nimble_subst_resolve_dim(subst, n);
  ck_assert_int_eq(r.kind, NIMBLE_DIM_VAR);
  ck_assert_uint_eq(r.var_id, n.var_id);
  r = nimble_subst_resolve_dim(subst, k);
  ck_assert_uint_eq(r.var_id, n.var_id);
  ck_assert_str_eq(r.name, "n");
  nimble_dim_t a = nimble_subst_fresh_dim_var(subst, "a"), b = nimble_subst_fresh_dim_var(subst, "b");
  NIMBLE_ASSERT_OK(nimble_dim_unify(&ctx, b, a, &out)); /* binds b: kept */
  ck_assert_str_eq(fmt(tensor2(a, b)), "Tensor[(a, a), float32]");
  /* A variable unified with itself binds nothing. */
  NIMBLE_ASSERT_OK(nimble_subst_bind_dim(subst, a.var_id, a));
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, a).kind, NIMBLE_DIM_VAR);
  /* Binding twice is still an error. */
  NIMBLE_ASSERT_ERROR(nimble_subst_bind_dim(subst, b.var_id, nimble_dim_const(3)), NIMBLE_INTERNAL, "bound twice");
}
END_TEST

START_TEST(test_broadcast_any_with_d_gives_d) {
  nimble_dim_t out;
  NIMBLE_ASSERT_OK(nimble_dim_broadcast(&ctx, nimble_dim_any(), nimble_dim_const(5), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_CONST);
  ck_assert_int_eq(out.value, 5);
  NIMBLE_ASSERT_OK(nimble_dim_broadcast(&ctx, nimble_dim_const(5), nimble_dim_any(), &out));
  ck_assert_int_eq(out.value, 5);
}
END_TEST

START_TEST(test_broadcast_any_with_one_gives_any) {
  nimble_dim_t out;
  NIMBLE_ASSERT_OK(nimble_dim_broadcast(&ctx, nimble_dim_any(), nimble_dim_const(1), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_ANY);
  NIMBLE_ASSERT_OK(nimble_dim_broadcast(&ctx, nimble_dim_const(1), nimble_dim_any(), &out));
  ck_assert_int_eq(out.kind, NIMBLE_DIM_ANY);
}
END_TEST

START_TEST(test_broadcast_of_shapes_follows_numpy) {
  nimble_tensor_sig_t a = {NIMBLE_DTYPE_FLOAT32, 3, {nimble_dim_const(8), nimble_dim_const(1), nimble_dim_const(6)}};
  nimble_tensor_sig_t b = {NIMBLE_DTYPE_FLOAT32, 2, {nimble_dim_const(7), nimble_dim_const(1)}};
  nimble_tensor_sig_t r;
  char buf[128];
  NIMBLE_ASSERT_OK(nimble_sig_broadcast(&ctx, &a, &b, &r));
  ck_assert_str_eq(nimble_tensor_sig_format(&r, buf, sizeof buf), "Tensor[(8, 7, 6), float32]");
  nimble_tensor_sig_t c = {NIMBLE_DTYPE_FLOAT32, 2, {nimble_dim_const(3), nimble_dim_const(4)}};
  nimble_tensor_sig_t d = {NIMBLE_DTYPE_FLOAT32, 1, {nimble_dim_const(5)}};
  NIMBLE_ASSERT_ERROR(nimble_sig_broadcast(&ctx, &c, &d, &r), NIMBLE_INVALID_ARGUMENT,
                      "cannot broadcast Tensor[(3, 4), float32] with Tensor[(5,), float32]");
}
END_TEST

START_TEST(test_unify_tensor_types_keeps_any_and_binds_variables) {
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n");
  const nimble_type *u;
  NIMBLE_ASSERT_OK(nimble_type_unify(subst, tensor2(nimble_dim_any(), n),
                                     tensor2(nimble_dim_const(4), nimble_dim_const(128)), &u));
  ck_assert_str_eq(fmt(u), "Tensor[(?, 128), float32]");
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, n).value, 128);
}
END_TEST

START_TEST(test_unify_mismatched_types_names_both) {
  const nimble_type *u;
  nimble_dim_t d1[1] = {nimble_dim_const(3)};
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, tensor2(nimble_dim_const(3), nimble_dim_const(4)),
                                        tensor2(nimble_dim_const(3), nimble_dim_const(5)), &u),
                      NIMBLE_INVALID_ARGUMENT,
                      "cannot unify Tensor[(3, 4), float32] with Tensor[(3, 5), float32]");
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, tensor2(nimble_dim_const(3), nimble_dim_const(4)),
                                        nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 1, d1), &u),
                      NIMBLE_INVALID_ARGUMENT, "different ranks");
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, nimble_type_scalar(arena, NIMBLE_DTYPE_FLOAT32),
                                        nimble_type_scalar(arena, NIMBLE_DTYPE_INT64), &u),
                      NIMBLE_INVALID_ARGUMENT, "different dtypes");
}
END_TEST

START_TEST(test_unify_type_variable_binds_through_adts_and_tuples) {
  const nimble_type *t = nimble_subst_fresh_type_var(subst, "T");
  const nimble_type *list_t = nimble_type_adt(arena, "List", 1, &t);
  const nimble_type *f32 = nimble_type_scalar(arena, NIMBLE_DTYPE_FLOAT32);
  const nimble_type *list_f = nimble_type_adt(arena, "List", 1, &f32);
  const nimble_type *pair1[2] = {list_t, t}, *pair2[2] = {list_f, f32}, *u;
  NIMBLE_ASSERT_OK(nimble_type_unify(subst, nimble_type_tuple(arena, 2, pair1),
                                     nimble_type_tuple(arena, 2, pair2), &u));
  ck_assert_str_eq(fmt(t), "Tensor[(), float32]");
  ck_assert_str_eq(fmt(u), "(List[Tensor[(), float32]], Tensor[(), float32])");
  /* List[float32] is not Tree[float32]. */
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, list_f, nimble_type_adt(arena, "Tree", 1, &f32), &u),
                      NIMBLE_INVALID_ARGUMENT, "different data types");
}
END_TEST

START_TEST(test_unify_refuses_an_infinite_type) {
  const nimble_type *t = nimble_subst_fresh_type_var(subst, "T"), *u;
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, t, nimble_type_adt(arena, "List", 1, &t), &u),
                      NIMBLE_INVALID_ARGUMENT, "infinite type");
}
END_TEST

START_TEST(test_unify_function_types_pairs_parameters_and_results) {
  const nimble_type *a = nimble_subst_fresh_type_var(subst, "A");
  const nimble_type *f32 = nimble_type_scalar(arena, NIMBLE_DTYPE_FLOAT32);
  const nimble_type *i64 = nimble_type_scalar(arena, NIMBLE_DTYPE_INT64);
  const nimble_type *f1 = nimble_type_func(arena, 0, NULL, 1, &a, a);
  const nimble_type *f2 = nimble_type_func(arena, 0, NULL, 1, &f32, f32);
  const nimble_type *f3 = nimble_type_func(arena, 0, NULL, 1, &i64, f32), *u;
  NIMBLE_ASSERT_OK(nimble_type_unify(subst, f1, f2, &u));
  ck_assert_str_eq(fmt(u), "fn(Tensor[(), float32]) -> Tensor[(), float32]");
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, f1, f3, &u), NIMBLE_INVALID_ARGUMENT,
                      "cannot unify fn(Tensor[(), float32]) -> Tensor[(), float32] with fn(Tensor[(), int64])");
}
END_TEST

START_TEST(test_rigid_type_parameter_refuses_a_concrete_type) {
  const nimble_type *t = nimble_subst_fresh_type_var(subst, "T");
  const nimble_type *v = nimble_subst_fresh_type_var(subst, "V"), *u;
  NIMBLE_ASSERT_OK(nimble_subst_set_rigid(subst, t->u.var.id, true));
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, t, nimble_type_scalar(arena, NIMBLE_DTYPE_FLOAT32), &u),
                      NIMBLE_INVALID_ARGUMENT, "type parameter");
  /* An unbound variable binds to it instead. */
  NIMBLE_ASSERT_OK(nimble_type_unify(subst, v, t, &u));
  ck_assert_str_eq(fmt(v), "T");
}
END_TEST


/* ---- join: the type of a value that is one of two (if, match) ---- */

static const nimble_type *tensor3(nimble_dim_t a, nimble_dim_t b, nimble_dim_t c) {
  nimble_dim_t d[3] = {a, b, c};
  return nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 3, d);
}

START_TEST(test_join_of_equal_constants_keeps_them_and_different_ones_become_any) {
  const nimble_type *out;
  NIMBLE_ASSERT_OK(nimble_type_join(subst, tensor2(nimble_dim_const(4), nimble_dim_const(128)),
                                    tensor2(nimble_dim_const(6), nimble_dim_const(128)), &out));
  ck_assert_str_eq(fmt(out), "Tensor[(?, 128), float32]");
  /* Any against a constant is Any, as in unification. */
  NIMBLE_ASSERT_OK(nimble_type_join(subst, tensor2(nimble_dim_any(), nimble_dim_const(3)),
                                    tensor2(nimble_dim_const(2), nimble_dim_const(3)), &out));
  ck_assert_str_eq(fmt(out), "Tensor[(?, 3), float32]");
}
END_TEST

START_TEST(test_join_of_a_symbol_and_a_constant_is_any_and_leaves_the_symbol_unbound) {
  /* Unification would bind n to 3; a join must not: the branch giving n
   * says nothing about n being 3. */
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "n"), m = nimble_subst_fresh_dim_var(subst, "m");
  const nimble_type *out;
  NIMBLE_ASSERT_OK(nimble_type_join(subst, tensor2(n, nimble_dim_const(8)), tensor2(nimble_dim_const(3), nimble_dim_const(8)), &out));
  ck_assert_str_eq(fmt(out), "Tensor[(?, 8), float32]");
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, n).kind, NIMBLE_DIM_VAR);
  /* Two different symbols: Any, neither bound; the same symbol: kept. */
  NIMBLE_ASSERT_OK(nimble_type_join(subst, tensor2(n, m), tensor2(m, m), &out));
  ck_assert_str_eq(fmt(out), "Tensor[(?, m), float32]");
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, n).var_id, n.var_id);
  ck_assert_int_eq(nimble_subst_resolve_dim(subst, m).var_id, m.var_id);
}
END_TEST

START_TEST(test_join_of_different_ranks_is_a_tensor_of_unknown_rank) {
  nimble_dim_t n = nimble_subst_fresh_dim_var(subst, "N");
  const nimble_type *out, *t2 = tensor2(n, nimble_dim_const(128)),
                          *t3 = tensor3(n, nimble_dim_const(128), nimble_dim_any());
  NIMBLE_ASSERT_OK(nimble_type_join(subst, t2, t3, &out));
  ck_assert_int_eq(out->kind, NIMBLE_TYPE_UNRANKED_TENSOR);
  ck_assert_str_eq(fmt(out), "Tensor[*, float32]");
  /* Unknown rank absorbs any rank, in either order. */
  const nimble_type *u = out;
  NIMBLE_ASSERT_OK(nimble_type_join(subst, t2, u, &out));
  ck_assert_str_eq(fmt(out), "Tensor[*, float32]");
  NIMBLE_ASSERT_OK(nimble_type_join(subst, u, nimble_type_scalar(arena, NIMBLE_DTYPE_FLOAT32), &out));
  ck_assert_str_eq(fmt(out), "Tensor[*, float32]");
  /* Unification accepts it against any rank too (checked at run time). */
  NIMBLE_ASSERT_OK(nimble_type_unify(subst, t3, u, &out));
  ck_assert_str_eq(fmt(out), "Tensor[*, float32]");
}
END_TEST

START_TEST(test_join_refuses_different_dtypes_and_kinds_naming_both) {
  const nimble_type *out, *f = nimble_type_unranked_tensor(arena, NIMBLE_DTYPE_FLOAT32);
  NIMBLE_ASSERT_ERROR(nimble_type_join(subst, f, nimble_type_scalar(arena, NIMBLE_DTYPE_INT64), &out),
                      NIMBLE_INVALID_ARGUMENT,
                      "no common type for Tensor[*, float32] and Tensor[(), int64] (different dtypes:");
  NIMBLE_ASSERT_ERROR(nimble_type_unify(subst, f, nimble_type_unranked_tensor(arena, NIMBLE_DTYPE_INT32), &out),
                      NIMBLE_INVALID_ARGUMENT, "different dtypes");
  NIMBLE_ASSERT_ERROR(nimble_type_join(subst, f, nimble_type_tuple(arena, 0, NULL), &out), NIMBLE_INVALID_ARGUMENT,
                      "different kinds of type");
}
END_TEST

START_TEST(test_join_goes_through_tuples_and_adt_arguments_and_binds_type_variables) {
  const nimble_type *a = tensor2(nimble_dim_const(2), nimble_dim_const(3)), *b = tensor2(nimble_dim_const(5), nimble_dim_const(3));
  const nimble_type *ta[2] = {a, a}, *tb[2] = {b, tensor3(nimble_dim_const(1), nimble_dim_const(2), nimble_dim_const(3))};
  const nimble_type *out;
  NIMBLE_ASSERT_OK(nimble_type_join(subst, nimble_type_tuple(arena, 2, ta), nimble_type_tuple(arena, 2, tb), &out));
  ck_assert_str_eq(fmt(out), "(Tensor[(?, 3), float32], Tensor[*, float32])");
  const nimble_type *la = nimble_type_adt(arena, "List", 1, &a), *lb = nimble_type_adt(arena, "List", 1, &b);
  NIMBLE_ASSERT_OK(nimble_type_join(subst, la, lb, &out));
  ck_assert_str_eq(fmt(out), "List[Tensor[(?, 3), float32]]");
  /* A type not known yet (a recursive call's result) takes the other. */
  const nimble_type *r = nimble_subst_fresh_type_var(subst, "R");
  NIMBLE_ASSERT_OK(nimble_type_join(subst, r, a, &out));
  ck_assert_str_eq(fmt(r), "Tensor[(2, 3), float32]");
}
END_TEST

int main(void) {
  Suite *s = suite_create("unify");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_unify_equal_constants_gives_the_constant);
  tcase_add_test(tc, test_unify_different_constants_fails_naming_both);
  tcase_add_test(tc, test_unify_any_with_constant_stays_any);
  tcase_add_test(tc, test_unify_binds_a_variable_to_a_constant);
  tcase_add_test(tc, test_unify_binds_a_variable_to_another_variable);
  tcase_add_test(tc, test_unifying_two_variables_keeps_the_older_one_either_way);
  tcase_add_test(tc, test_broadcast_any_with_d_gives_d);
  tcase_add_test(tc, test_broadcast_any_with_one_gives_any);
  tcase_add_test(tc, test_broadcast_of_shapes_follows_numpy);
  tcase_add_test(tc, test_unify_tensor_types_keeps_any_and_binds_variables);
  tcase_add_test(tc, test_unify_mismatched_types_names_both);
  tcase_add_test(tc, test_unify_type_variable_binds_through_adts_and_tuples);
  tcase_add_test(tc, test_unify_refuses_an_infinite_type);
  tcase_add_test(tc, test_unify_function_types_pairs_parameters_and_results);
  tcase_add_test(tc, test_rigid_type_parameter_refuses_a_concrete_type);
  tcase_add_test(tc, test_join_of_equal_constants_keeps_them_and_different_ones_become_any);
  tcase_add_test(tc, test_join_of_a_symbol_and_a_constant_is_any_and_leaves_the_symbol_unbound);
  tcase_add_test(tc, test_join_of_different_ranks_is_a_tensor_of_unknown_rank);
  tcase_add_test(tc, test_join_refuses_different_dtypes_and_kinds_naming_both);
  tcase_add_test(tc, test_join_goes_through_tuples_and_adt_arguments_and_binds_type_variables);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
