/* Type inference over small programs: operators, if, match, recursion,
 * ADTs, closures, and the errors it reports (typing/infer.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;

static void setup(void) { NIMBLE_ASSERT_OK(nimble_arena_create(&arena)); }
static void teardown(void) { nimble_arena_destroy(arena); }

/* The inferred type of @main in `text`. */
static const char *main_type(const char *text) {
  static char buf[1024];
  return test_global_type(test_check(arena, text, NULL), "main", buf, sizeof buf);
}

START_TEST(test_broadcasting_add_gives_the_numpy_shape) {
  ck_assert_str_eq(main_type("def @main(%x: Tensor[(?, 1, 6), float32], %y: Tensor[(7, 1), float32]) { add(%x, %y) }"),
                   "fn(Tensor[(?, 1, 6), float32], Tensor[(7, 1), float32]) -> Tensor[(?, 7, 6), float32]");
}
END_TEST

START_TEST(test_broadcast_error_names_call_place_and_both_types) {
  NIMBLE_ASSERT_ERROR(test_check_status(arena,
                                        "def @main(%x: Tensor[(3, 4), float32],\n"
                                        "          %y: Tensor[(5,), float32]) {\n"
                                        "  let %z = exp(%x);\n"
                                        "  let %w = add(%z, %y);\n"
                                        "  %w\n"
                                        "}\n"),
                      NIMBLE_INVALID_ARGUMENT,
                      "in call 'add' at main.nir:4:15 (add(%z, %y)): cannot broadcast Tensor[(3, 4), "
                      "float32] with Tensor[(5,), float32]");
}
END_TEST

START_TEST(test_symbolic_dim_binds_to_the_constant_it_meets) {
  nimble_module *m;
  nimble_typing *t = test_check(arena,
                                "def @main(%x: Tensor[(n, 128), float32], %w: Tensor[(64, k), float32]) {\n"
                                "  dense(%x, %w, transB=1)\n}\n", &m);
  char buf[256];
  /* k meets 128 in the inner dimension; n stays symbolic. */
  ck_assert_str_eq(test_global_type(t, "main", buf, sizeof buf),
                   "fn(Tensor[(n, 128), float32], Tensor[(64, 128), float32]) -> Tensor[(n, 64), float32]");
}
END_TEST

START_TEST(test_inner_dimension_mismatch_is_reported) {
  NIMBLE_ASSERT_ERROR(test_check_status(arena,
                                        "def @main(%x: Tensor[(7, 100), float32], %w: Tensor[(100, 64), float32]) {\n"
                                        "  matmul(%w, %x)\n}\n"),
                      NIMBLE_INVALID_ARGUMENT,
                      "inner dimensions of Tensor[(100, 64), float32] and Tensor[(7, 100), float32]: "
                      "dimension 64 does not match 7");
  /* Against Any the static check passes: the shape function decides. */
  NIMBLE_ASSERT_OK(test_check_status(arena, "def @main(%x: Tensor[(?, 100), float32], %w: Tensor[(100, 64), float32]) {\n"
                                            "  matmul(%w, %x)\n}\n"));
}
END_TEST

START_TEST(test_if_branches_unify_and_any_stays_any) {
  ck_assert_str_eq(main_type("def @main(%c: bool, %a: Tensor[(?, 3), float32], %b: Tensor[(2, 3), float32]) {\n"
                             "  if (%c) { %a } else { %b }\n}\n"),
                   "fn(Tensor[(), bool], Tensor[(?, 3), float32], Tensor[(2, 3), float32]) -> "
                   "Tensor[(?, 3), float32]");
}
END_TEST

START_TEST(test_if_with_branches_of_different_shapes_joins_them) {
  /* Either branch may run: different constants give Any. */
  ck_assert_str_eq(main_type("def @main(%c: bool, %a: Tensor[(4,), float32], %b: Tensor[(5,), float32]) {\n"
                             "  if (%c) { %a } else { %b }\n}\n"),
                   "fn(Tensor[(), bool], Tensor[(4,), float32], Tensor[(5,), float32]) -> Tensor[(?,), float32]");
  /* A symbol against a constant: Any, and the symbol is not bound to the
   * constant (unification would have made %a a [3] too). */
  ck_assert_str_eq(main_type("def @main(%c: bool, %a: Tensor[(n, 2), float32], %b: Tensor[(3, 2), float32]) {\n"
                             "  (if (%c) { %a } else { %b }, %a)\n}\n"),
                   "fn(Tensor[(), bool], Tensor[(n, 2), float32], Tensor[(3, 2), float32]) -> "
                   "(Tensor[(?, 2), float32], Tensor[(n, 2), float32])");
  /* Different ranks: a tensor of unknown rank. */
  ck_assert_str_eq(main_type("def @main(%c: bool, %a: Tensor[(n, 128), float32], %b: Tensor[(n, 128, t), float32]) {\n"
                             "  if (%c) { %a } else { %b }\n}\n"),
                   "fn(Tensor[(), bool], Tensor[(n, 128), float32], Tensor[(n, 128, t), float32]) -> "
                   "Tensor[*, float32]");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%c: bool, %a: Tensor[(4,), float32], %b: Tensor[(4,), int32]) {\n"
                                               "  if (%c) { %a } else { %b }\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "in if at main.nir:2:3");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%c: bool, %a: Tensor[(4,), float32], %b: Tensor[(4,), int32]) {\n"
                                               "  if (%c) { %a } else { %b }\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "different dtypes");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%c: float32) { if (%c) { 1 } else { 2 } }"),
                      NIMBLE_INVALID_ARGUMENT, "the condition must be a bool scalar");
}
END_TEST

START_TEST(test_a_value_of_unknown_rank_reaches_operators_only_once_refined) {
  static const char *const head =
      "def @main(%c: bool, %a: Tensor[(n, 4), float32], %b: Tensor[(n, 4, t), float32]) {\n"
      "  let %u = if (%c) { %a } else { %b };\n";
  char text[1024];
  /* shape_of takes it: a shape of unknown length. */
  snprintf(text, sizeof text, "%s  shape_of(%%u)\n}\n", head);
  ck_assert_str_eq(main_type(text), "fn(Tensor[(), bool], Tensor[(n, 4), float32], Tensor[(n, 4, t), float32]) -> "
                                    "Tensor[(?,), int64]");
  /* check_rank + reshape_tensor refine it to a rank (dims Any). */
  snprintf(text, sizeof text,
           "%s  let %%v = reshape_tensor(%%u, check_rank(shape_of(%%u), rank=3));\n  sum(%%v, axes=[2])\n}\n", head);
  ck_assert_str_eq(main_type(text), "fn(Tensor[(), bool], Tensor[(n, 4), float32], Tensor[(n, 4, t), float32]) -> "
                                    "Tensor[(?, ?), float32]");
  /* Any other operator needs a known rank: the error names it. */
  snprintf(text, sizeof text, "%s  relu(%%u)\n}\n", head);
  NIMBLE_ASSERT_ERROR(test_check_status(arena, text), NIMBLE_UNIMPLEMENTED,
                      "'relu' needs a tensor of known rank, argument 0 is Tensor[*, float32]");
  /* A shape known to have the wrong length is left to the run-time check
   * (the path may be dead once folding has made the rank known). */
  ck_assert_str_eq(main_type("def @main(%a: Tensor[(2, 4), float32]) {\n"
                             "  check_rank(shape_of(%a), rank=3, what=\"input 'a'\")\n}\n"),
                   "fn(Tensor[(2, 4), float32]) -> Tensor[(3,), int64]");
  /* Parameters and lets may say Tensor[*, dtype]; it prints back. */
  ck_assert_str_eq(main_type("def @main(%x: Tensor[*, int64]) { let %y: Tensor[*, int64] = %x; shape_of(%y) }"),
                   "fn(Tensor[*, int64]) -> Tensor[(?,), int64]");
  /* Match arms join too. */
  ck_assert_str_eq(main_type("type Option[T] { Some(T), None }\n"
                             "def @main(%o: Option[Tensor[(2, 2), float32]]) {\n"
                             "  match (%o) { Some(%v) => %v, None => const[(1,), float32]{0} }\n}\n"),
                   "fn(Option[Tensor[(2, 2), float32]]) -> Tensor[*, float32]");
}
END_TEST

START_TEST(test_match_arms_unify_and_constructors_instantiate_parameters) {
  ck_assert_str_eq(main_type("type Option[T] { Some(T), None }\n"
                             "def @main(%o: Option[Tensor[(?,), int32]]) {\n"
                             "  match (%o) { Some(%v) => %v, None => const[(2,), int32]{1, 2} }\n}\n"),
                   "fn(Option[Tensor[(?,), int32]]) -> Tensor[(?,), int32]");
  /* The constructor's T becomes the element type of the list. */
  ck_assert_str_eq(main_type("type List[T] { Cons(T, List[T]), Nil }\n"
                             "def @main(%x: Tensor[(2,), float32]) { Cons(%x, Cons(%x, Nil)) }\n"),
                   "fn(Tensor[(2,), float32]) -> List[Tensor[(2,), float32]]");
}
END_TEST

START_TEST(test_match_arm_of_another_type_is_an_error) {
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "type Option[T] { Some(T), None }\n"
                                               "def @main(%o: Option[float32]) {\n"
                                               "  match (%o) { Some(%v) => %v, None => 1 }\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "arm 2 differs");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "type Option[T] { Some(T), None }\n"
                                               "type Box[T] { Box(T) }\n"
                                               "def @main(%o: Option[float32]) {\n"
                                               "  match (%o) { Box(%v) => %v }\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "pattern Box at main.nir:4:16");
}
END_TEST

START_TEST(test_symbolic_dims_in_a_type_definition_are_per_value) {
  ck_assert_str_eq(main_type("type Vec { V(Tensor[(n,), float32]) }\n"
                             "def @len(%v: Vec) -> Tensor[(1,), int64] { match (%v) { V(%x) => shape_of(%x) } }\n"
                             "def @main(%a: Tensor[(3,), float32], %b: Tensor[(5,), float32]) {\n"
                             "  (V(%a), V(%b))\n}\n"),
                   "fn(Tensor[(3,), float32], Tensor[(5,), float32]) -> (Vec, Vec)");
}
END_TEST

START_TEST(test_recursive_function_checks_through_its_annotation) {
  ck_assert_str_eq(main_type("type List[T] { Cons(T, List[T]), Nil }\n"
                             "def @len[T](%l: List[T]) -> Tensor[(), int64] {\n"
                             "  match (%l) { Cons(_, %t) => add(@len(%t), 1), Nil => 0 }\n}\n"
                             "def @main(%a: List[float32], %b: List[Tensor[(?, ?), int8]]) {\n"
                             "  (@len(%a), @len(%b))\n}\n"),
                   "fn(List[Tensor[(), float32]], List[Tensor[(?, ?), int8]]) -> "
                   "(Tensor[(), int64], Tensor[(), int64])");
}
END_TEST

START_TEST(test_symbolic_dims_of_a_signature_are_instantiated_per_call) {
  ck_assert_str_eq(main_type("def @twice(%x: Tensor[(n,), float32]) -> Tensor[(n,), float32] { add(%x, %x) }\n"
                             "def @main(%a: Tensor[(3,), float32], %b: Tensor[(5,), float32]) {\n"
                             "  (@twice(%a), @twice(%b))\n}\n"),
                   "fn(Tensor[(3,), float32], Tensor[(5,), float32]) -> "
                   "(Tensor[(3,), float32], Tensor[(5,), float32])");
}
END_TEST

/* Issue 3 (found by `nimble inspect` on tests/client/programs/no_main.nir):
 * @double's symbolic k is instantiated afresh at the call in @scale; the
 * argument's dim is `?`, so the fresh variable stays unbound, and it used to
 * leak into @scale's type as `Tensor[(k,), float32]`. At the end of a
 * global function (its generalisation point) an unbound variable made by
 * the inference is `?`: Any against anything stays Any (DESIGN.md §1). */
START_TEST(test_a_callee_symbol_instantiated_against_any_becomes_any) {
  nimble_module *m;
  nimble_typing *t = test_check(arena,
                                "def @double(%x: Tensor[(k,), float32]) {\n  add(%x, %x)\n}\n"
                                "def @scale(%x: Tensor[(?,), float32], %s: Tensor[(), float32]) {\n"
                                "  multiply(@double(%x), %s)\n}\n",
                                &m);
  char buf[256];
  ck_assert_str_eq(test_global_type(t, "scale", buf, sizeof buf),
                   "fn(Tensor[(?,), float32], Tensor[(), float32]) -> Tensor[(?,), float32]");
  /* The callee's own declared symbol stays symbolic. */
  ck_assert_str_eq(test_global_type(t, "double", buf, sizeof buf),
                   "fn(Tensor[(k,), float32]) -> Tensor[(k,), float32]");
}
END_TEST

/* The leaked variable was shared by every caller of @scale (only declared
 * symbols are instantiated per call), so two calls with different lengths
 * bound one variable; each now gets `?`. */
START_TEST(test_callers_of_a_function_with_an_any_result_do_not_share_a_variable) {
  ck_assert_str_eq(main_type("def @double(%x: Tensor[(k,), float32]) { add(%x, %x) }\n"
                             "def @scale(%x: Tensor[(?,), float32]) { @double(%x) }\n"
                             "def @main(%a: Tensor[(3,), float32], %b: Tensor[(5,), float32]) {\n"
                             "  let %p = @scale(%a);\n  let %q = @scale(%b);\n  (%p, %q, add(%p, %q))\n}\n"),
                   "fn(Tensor[(3,), float32], Tensor[(5,), float32]) -> "
                   "(Tensor[(?,), float32], Tensor[(?,), float32], Tensor[(?,), float32])");
}
END_TEST

/* A fresh variable that meets a declared symbol is that symbol: it stays
 * symbolic (under the caller's name), through a call and through recursion. */
START_TEST(test_a_callee_symbol_met_by_a_declared_symbol_stays_symbolic) {
  nimble_module *m;
  nimble_typing *t = test_check(arena,
                                "def @double(%x: Tensor[(k,), float32]) { add(%x, %x) }\n"
                                "def @f(%x: Tensor[(n,), float32]) { @double(%x) }\n"
                                "def @g(%x: Tensor[(n,), float32]) { let %y = @double(%x); add(%y, %x) }\n"
                                "def @loop(%i: Tensor[(), int64], %x: Tensor[(b, 4), float32]) {\n"
                                "  if (less(%i, 3)) { @loop(add(%i, 1), tanh(%x)) } else { %x }\n}\n"
                                "def @main(%a: Tensor[(m, 4), float32]) { @loop(0, %a) }\n",
                                &m);
  char buf[256];
  ck_assert_str_eq(test_global_type(t, "f", buf, sizeof buf), "fn(Tensor[(n,), float32]) -> Tensor[(n,), float32]");
  ck_assert_str_eq(test_global_type(t, "g", buf, sizeof buf), "fn(Tensor[(n,), float32]) -> Tensor[(n,), float32]");
  ck_assert_str_eq(test_global_type(t, "loop", buf, sizeof buf),
                   "fn(Tensor[(), int64], Tensor[(b, 4), float32]) -> Tensor[(b, 4), float32]");
  ck_assert_str_eq(test_global_type(t, "main", buf, sizeof buf),
                   "fn(Tensor[(m, 4), float32]) -> Tensor[(m, 4), float32]");
}
END_TEST

START_TEST(test_closures_capture_and_apply) {
  ck_assert_str_eq(main_type("def @main(%s: Tensor[(), float32], %x: Tensor[(4,), float32]) {\n"
                             "  let %scale = fn (%v: Tensor[(4,), float32]) { multiply(%v, %s) };\n"
                             "  let %pair = fn (%v) { (%v, %s) };\n"
                             "  (%scale(%x), %pair(%x))\n}\n"),
                   "fn(Tensor[(), float32], Tensor[(4,), float32]) -> (Tensor[(4,), float32], "
                   "(Tensor[(4,), float32], Tensor[(), float32]))");
  /* Operators need their arguments' types where they are called. */
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%x: float32) { let %f = fn (%v) { exp(%v) }; %f(%x) }"),
                      NIMBLE_INVALID_ARGUMENT, "argument 0 has a type not known here (T): annotate it");
  /* A local closure has one type (no let-polymorphism). */
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%a: float32, %b: int64) {\n"
                                               "  let %id = fn (%v) { %v };\n"
                                               "  (%id(%a), %id(%b))\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "argument 1: cannot unify");
}
END_TEST

START_TEST(test_higher_order_polymorphic_function_checks) {
  ck_assert_str_eq(main_type("type List[T] { Cons(T, List[T]), Nil }\n"
                             "def @map[A, B](%f: fn(A) -> B, %l: List[A]) -> List[B] {\n"
                             "  match (%l) { Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)), Nil => Nil }\n}\n"
                             "def @main(%l: List[Tensor[(?, 3), float32]]) {\n"
                             "  @map(fn (%x: Tensor[(?, 3), float32]) { sum(%x, axes=[1]) }, %l)\n}\n"),
                   "fn(List[Tensor[(?, 3), float32]]) -> List[Tensor[(?,), float32]]");
}
END_TEST

START_TEST(test_type_parameter_cannot_be_fixed_in_its_body) {
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @bad[T](%x: T) -> T { add(%x, 1.0) }"),
                      NIMBLE_INVALID_ARGUMENT, "type not known here");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @bad[T](%x: T) -> T { 1.0 }"),
                      NIMBLE_INVALID_ARGUMENT, "type parameter");
}
END_TEST

START_TEST(test_tuples_and_projections) {
  ck_assert_str_eq(main_type("def @main(%x: Tensor[(6, 4), float32]) {\n"
                             "  let %parts = split(%x, sections=3);\n"
                             "  let %t = (%parts.2, (%parts.0,));\n"
                             "  %t.1.0\n}\n"),
                   "fn(Tensor[(6, 4), float32]) -> Tensor[(2, 4), float32]");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%x: float32) { (%x, %x).2 }"),
                      NIMBLE_OUT_OF_RANGE, "index 2 of a 2-tuple");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%x: float32) { %x.0 }"),
                      NIMBLE_INVALID_ARGUMENT, "projecting from a non-tuple Tensor[(), float32]");
}
END_TEST

START_TEST(test_data_dependent_shapes_are_any_unless_constant) {
  ck_assert_str_eq(main_type("def @main(%n: Tensor[(), int64], %x: Tensor[(2, 6), float32], %s: Tensor[(3,), int64]) {\n"
                             "  (arange(0, %n, 1), arange(0, 10, 3), dyn_reshape(%x, %s),\n"
                             "   dyn_reshape(%x, const[(2,), int64]{-1, 4}), nonzero(%x))\n}\n"),
                   "fn(Tensor[(), int64], Tensor[(2, 6), float32], Tensor[(3,), int64]) -> "
                   "(Tensor[(?,), int64], Tensor[(4,), int64], Tensor[(?, ?, ?), float32], "
                   "Tensor[(3, 4), float32], Tensor[(2, ?), int64])");
}
END_TEST

START_TEST(test_dynamic_slices_and_topk_type_as_any_until_known) {
  ck_assert_str_eq(main_type("def @main(%x: Tensor[(10, 8), float32], %b: Tensor[(1,), int64], %e: Tensor[(1,), int64],\n"
                             "          %k: Tensor[(1,), int64]) {\n"
                             "  (dyn_strided_slice(%x, %b, %e), dyn_strided_slice(%x, const[(1,), int64]{2}, const[(1,), int64]{-1}),\n"
                             "   topk(%x, %k).0, topk(%x, const[(1,), int64]{4}).1, gather_nd(%x, const[(3, 1), int64]{0, 1, 2}))\n}\n"),
                   "fn(Tensor[(10, 8), float32], Tensor[(1,), int64], Tensor[(1,), int64], Tensor[(1,), int64]) -> "
                   "(Tensor[(?, 8), float32], Tensor[(7, 8), float32], Tensor[(10, ?), float32], Tensor[(10, 4), int64], "
                   "Tensor[(3, 8), float32])");
}
END_TEST

START_TEST(test_wrong_argument_count_and_kinds_are_errors) {
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @f(%x: float32) { %x }\ndef @main() { @f(1.0, 2.0) }"),
                      NIMBLE_INVALID_ARGUMENT, "expected 1 arguments, got 2");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "type B { B(float32) }\ndef @main(%b: B) { exp(%b) }"),
                      NIMBLE_INVALID_ARGUMENT, "argument 0 must be a tensor, got B");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%x: float32) { %x(1.0) }"),
                      NIMBLE_INVALID_ARGUMENT, "the callee is not a function");
  NIMBLE_ASSERT_ERROR(test_check_status(arena, "def @main(%x: int64) { sqrt(%x) }"),
                      NIMBLE_INVALID_ARGUMENT, "must be a float tensor");
}
END_TEST

START_TEST(test_built_calls_without_required_attributes_are_errors) {
  /* nimble_ir_call bypasses the attribute checks of nimble_ir_call_op:
   * inference catches what is missing. */
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_module_create(arena, &m));
  nimble_dim_t d[1] = {nimble_dim_const(6)};
  const nimble_expr *x = nimble_ir_var(arena, "x", nimble_type_tensor(arena, NIMBLE_DTYPE_FLOAT32, 1, d), NULL);
  const nimble_expr *call = nimble_ir_call(arena, nimble_ir_op(arena, nimble_op_find("reshape"), NULL), 1, &x, NULL, NULL);
  NIMBLE_ASSERT_OK(nimble_module_add_func(m, "main", nimble_ir_func(arena, 0, NULL, 1, &x, NULL, call, NULL)));
  NIMBLE_ASSERT_ERROR(nimble_typing_infer_module(m, &t), NIMBLE_INVALID_ARGUMENT,
                      "operator 'reshape' needs attribute 'newshape'");
  /* Without required ones, no attributes means defaults. */
  const nimble_expr *sm = nimble_ir_call(arena, nimble_ir_op(arena, nimble_op_find("softmax"), NULL), 1, &x, NULL, NULL);
  NIMBLE_ASSERT_OK(nimble_module_replace_func(m, "main", nimble_ir_func(arena, 0, NULL, 1, &x, NULL, sm, NULL)));
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  char buf[128];
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(t, sm), buf, sizeof buf), "Tensor[(6,), float32]");
  /* A variable used outside its scope is reported, not trusted. */
  const nimble_expr *y = nimble_ir_var(arena, "y", NULL, NULL);
  NIMBLE_ASSERT_OK(nimble_module_replace_func(m, "main", nimble_ir_func(arena, 0, NULL, 1, &x, NULL, y, NULL)));
  NIMBLE_ASSERT_ERROR(nimble_typing_infer_module(m, &t), NIMBLE_INVALID_ARGUMENT, "variable %y is not bound here");
}
END_TEST

START_TEST(test_every_subexpression_gets_a_type) {
  nimble_module *m;
  nimble_typing *t = test_check(arena, "def @main(%x: Tensor[(?, 8), float32]) { let %y = tanh(%x); (%y, shape_of(%y)) }", &m);
  const nimble_expr *f = nimble_module_find_func(m, "main");
  const nimble_expr *let = f->u.func.body;
  char buf[256];
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(t, let->u.let.value), buf, sizeof buf),
                   "Tensor[(?, 8), float32]");
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(t, let->u.let.body->u.tuple.fields[1]), buf, sizeof buf),
                   "Tensor[(2,), int64]");
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(t, f->u.func.params[0]), buf, sizeof buf),
                   "Tensor[(?, 8), float32]");
}
END_TEST

/* The types of the fixture programs' globals, computed by hand (see the
 * comments in each program for the shapes). */
static void expect_program_type(const char *file, const char *global, const char *want) {
  char rel[256], buf[2048];
  snprintf(rel, sizeof rel, "tests/compiler/programs/%s", file);
  char *path = test_source_path(rel);
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_nir_parse_file(arena, path, &m));
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  ck_assert_str_eq(test_global_type(t, global, buf, sizeof buf), want);
  free(path);
}

START_TEST(test_fixture_programs_have_hand_computed_types) {
  /* conv 3x3 pad 1 keeps 32; pool 2/2 halves it to 16; reshape [0, -1]
   * keeps the batch and folds 16 * 16 * 16 = 4096; the slice keeps rows
   * 1..17 of the padded 18 and columns 15..16. */
  expect_program_type("layers.nir", "cnn",
                      "fn(Tensor[(?, 3, 32, 32), float32], Tensor[(16, 3, 3, 3), float32], Tensor[(16,), float32]) -> "
                      "(Tensor[(?, 4096), float32], Tensor[(?, 17, 2, 16), float32], Tensor[(?, 16, 1, 1), float32])");
  expect_program_type("layers.nir", "main",
                      "fn(Tensor[(?, 3, 32, 32), float32], Tensor[(16, 3, 3, 3), float32], Tensor[(16,), float32]) -> "
                      "(Tensor[(?, 3096), float32], Tensor[(?, 3, 1, 1), float32], Tensor[(?, ?, ?, ?), float32], "
                      "Tensor[(?, 16, 1, 1), float32], Tensor[(3,), float32])");
  expect_program_type("dynamic_mlp.nir", "mlp",
                      "fn(Tensor[(?, n), float32], Tensor[(256, n), float32], Tensor[(256,), float32], "
                      "Tensor[(10, 256), float32], Tensor[(10,), float32]) -> Tensor[(?, 10), float32]");
  expect_program_type("list_sum.nir", "map", "fn[A, B](fn(A) -> B, List[A]) -> List[B]");
  expect_program_type("option_tree.nir", "left_leaf", "fn[T](Tree[T]) -> Option[T]");
  expect_program_type("control_flow.nir", "main",
                      "fn(Tensor[(?, 4), float32]) -> (Tensor[(), float32], Tensor[(), float32], ())");
  expect_program_type("edge_cases.nir", "swap", "fn[A, B](Pair[A, B]) -> Pair[B, A]");
  /* The join of [n, 4] and [n, 4, t] has no rank; refined to rank 3 and
   * summed over axes 1 and 2 it is a [?]. */
  expect_program_type("unknown_rank.nir", "pick",
                      "fn(Tensor[(), bool], Tensor[(n, 4), float32], Tensor[(n, 4, t), float32]) -> Tensor[*, float32]");
  expect_program_type("unknown_rank.nir", "main",
                      "fn(Tensor[(), bool], Tensor[(n, 4), float32], Tensor[(n, 4, t), float32]) -> "
                      "(Tensor[(?,), float32], Tensor[(?,), int64])");
}
END_TEST

/* The type of let-bound %name in global @fn of a fixture program. */
static const char *let_type(const char *file, const char *fn, const char *name) {
  static char buf[512];
  char rel[256];
  snprintf(rel, sizeof rel, "tests/compiler/programs/%s", file);
  char *path = test_source_path(rel);
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_nir_parse_file(arena, path, &m));
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  free(path);
  for (const nimble_expr *e = nimble_module_find_func(m, fn)->u.func.body; e->kind == NIMBLE_EXPR_LET;
       e = e->u.let.body)
    if (strcmp(e->u.let.var->u.var.name, name) == 0)
      return nimble_type_format(nimble_typing_type_of(t, e->u.let.var), buf, sizeof buf);
  ck_abort_msg("no let %%%s in @%s", name, fn);
  return NULL;
}

START_TEST(test_attention_block_types_through_dynamic_reshapes) {
  /* shape_of/take/concatenate make a shape only known at run time, so the
   * dyn_reshape is (?, ?, ?); the static reshape to [-1, 4, 16] keeps 4
   * and 16; matmul broadcasts the batch dim ? with 4 to 4. */
  ck_assert_str_eq(let_type("attention.nir", "attention", "seq"), "Tensor[(), int64]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "heads"), "Tensor[(3,), int64]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "qh"), "Tensor[(?, ?, ?), float32]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "kh"), "Tensor[(4, 16, ?), float32]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "scores"), "Tensor[(4, ?, ?), float32]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "ctx"), "Tensor[(4, ?, 16), float32]");
  ck_assert_str_eq(let_type("attention.nir", "attention", "merged"), "Tensor[(?, 64), float32]");
  expect_program_type("attention.nir", "attention",
                      "fn(Tensor[(?, 64), float32], Tensor[(64, 64), float32], Tensor[(64, 64), float32], "
                      "Tensor[(64, 64), float32], Tensor[(64,), float32], Tensor[(64,), float32]) -> "
                      "Tensor[(?, 64), float32]");
}
END_TEST

int main(void) {
  Suite *s = suite_create("infer");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_broadcasting_add_gives_the_numpy_shape);
  tcase_add_test(tc, test_broadcast_error_names_call_place_and_both_types);
  tcase_add_test(tc, test_symbolic_dim_binds_to_the_constant_it_meets);
  tcase_add_test(tc, test_inner_dimension_mismatch_is_reported);
  tcase_add_test(tc, test_if_branches_unify_and_any_stays_any);
  tcase_add_test(tc, test_if_with_branches_of_different_shapes_joins_them);
  tcase_add_test(tc, test_a_value_of_unknown_rank_reaches_operators_only_once_refined);
  tcase_add_test(tc, test_match_arms_unify_and_constructors_instantiate_parameters);
  tcase_add_test(tc, test_match_arm_of_another_type_is_an_error);
  tcase_add_test(tc, test_symbolic_dims_in_a_type_definition_are_per_value);
  tcase_add_test(tc, test_recursive_function_checks_through_its_annotation);
  tcase_add_test(tc, test_symbolic_dims_of_a_signature_are_instantiated_per_call);
  tcase_add_test(tc, test_a_callee_symbol_instantiated_against_any_becomes_any);
  tcase_add_test(tc, test_callers_of_a_function_with_an_any_result_do_not_share_a_variable);
  tcase_add_test(tc, test_a_callee_symbol_met_by_a_declared_symbol_stays_symbolic);
  tcase_add_test(tc, test_closures_capture_and_apply);
  tcase_add_test(tc, test_higher_order_polymorphic_function_checks);
  tcase_add_test(tc, test_type_parameter_cannot_be_fixed_in_its_body);
  tcase_add_test(tc, test_tuples_and_projections);
  tcase_add_test(tc, test_data_dependent_shapes_are_any_unless_constant);
  tcase_add_test(tc, test_dynamic_slices_and_topk_type_as_any_until_known);
  tcase_add_test(tc, test_wrong_argument_count_and_kinds_are_errors);
  tcase_add_test(tc, test_built_calls_without_required_attributes_are_errors);
  tcase_add_test(tc, test_every_subexpression_gets_a_type);
  tcase_add_test(tc, test_fixture_programs_have_hand_computed_types);
  tcase_add_test(tc, test_attention_block_types_through_dynamic_reshapes);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
