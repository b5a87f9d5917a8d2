/* The views of a typed module (typing/summary.c, typing/annotate.c): the
 * summary of hand-written programs against counts made by reading them,
 * and the annotated IR printed back. */
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble/typed_module.h"
#include "nimble_test.h"

/* Two ifs (countdown, ping), one closure (main), recursion through
 * countdown and through ping <-> pong; six operator calls of four
 * operators, in this order: greater, subtract, concatenate, relu. */
static const char kControl[] =
    "def @countdown(%n: Tensor[(), int64], %acc: Tensor[(?,), float32]) -> Tensor[(?,), float32] {\n"
    "  if (greater(%n, 0)) {\n"
    "    @countdown(subtract(%n, 1), concatenate(%acc, %acc, axis=0))\n"
    "  } else {\n"
    "    %acc\n"
    "  }\n"
    "}\n"
    "def @ping(%x: Tensor[(), int64]) -> Tensor[(), int64] {\n"
    "  if (greater(%x, 0)) { @pong(subtract(%x, 1)) } else { %x }\n"
    "}\n"
    "def @pong(%x: Tensor[(), int64]) -> Tensor[(), int64] { @ping(%x) }\n"
    "def @main(%n: Tensor[(), int64], %x: Tensor[(?,), float32]) {\n"
    "  let %f = fn (%v: Tensor[(?,), float32]) { relu(%v) };\n"
    "  %f(@countdown(%n, %x))\n"
    "}\n";

START_TEST(test_the_summary_counts_calls_control_flow_and_recursion) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m;
  nimble_typing *t = test_check(a, kControl, &m);
  nimble_module_summary_t s;
  NIMBLE_ASSERT_OK(nimble_typed_module_summarize(m, t, &s));
  ck_assert_str_eq(s.entry->name, "main");
  ck_assert_uint_eq(s.num_ops, 4);
  const char *names[] = {"greater", "subtract", "concatenate", "relu"};
  const size_t calls[] = {2, 2, 1, 1};
  for (size_t i = 0; i < 4; i++) {
    ck_assert_str_eq(s.ops[i].op, names[i]);
    ck_assert_uint_eq(s.ops[i].calls, calls[i]);
  }
  ck_assert_uint_eq(s.num_op_calls, 6);
  ck_assert_uint_eq(s.num_ifs, 2);
  ck_assert_uint_eq(s.num_matches, 0);
  ck_assert_uint_eq(s.num_closures, 1);
  ck_assert(s.recursion_known);
  ck_assert_uint_eq(s.num_recursive, 3);
  ck_assert_str_eq(s.recursive[0], "countdown");
  ck_assert_str_eq(s.recursive[1], "ping");
  ck_assert_str_eq(s.recursive[2], "pong");
  ck_assert(s.has_control_flow);
  /* main(%n: Tensor[(), int64], %x: Tensor[(?,), float32]) -> Tensor[(?,), float32] */
  ck_assert_uint_eq(s.num_inputs, 2);
  ck_assert_str_eq(s.input_vars[1]->u.var.name, "x");
  ck_assert_int_eq(s.input_types[1]->kind, NIMBLE_TYPE_TENSOR);
  ck_assert_int_eq(s.input_types[1]->u.tensor.dims[0].kind, NIMBLE_DIM_ANY);
  ck_assert_uint_eq(s.num_outputs, 1);
  ck_assert_int_eq(s.output_types[0]->u.tensor.dims[0].kind, NIMBLE_DIM_ANY);
  ck_assert(s.has_any_dim);
  ck_assert_uint_eq(s.num_symbolic_dims, 0);
  ck_assert(s.dynamic);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_a_static_entry_with_a_tuple_result_has_one_output_per_field) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m;
  nimble_typing *t = test_check(
      a,
      "def @helper(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] { relu(%x) }\n"
      "def @run(%x: Tensor[(2, 3), float32], %y: Tensor[(b, 3), float32]) {\n"
      "  (@helper(%x), add(%y, %y))\n"
      "}\n",
      &m);
  nimble_module_summary_t s;
  NIMBLE_ASSERT_OK(nimble_typed_module_summarize(m, t, &s));
  /* No @main: the last definition is the entry. */
  ck_assert_str_eq(s.entry->name, "run");
  ck_assert_uint_eq(s.num_outputs, 2);
  ck_assert_uint_eq(s.output_types[1]->u.tensor.dims[0].kind, NIMBLE_DIM_VAR);
  ck_assert_uint_eq(s.num_symbolic_dims, 1);
  ck_assert_str_eq(s.symbolic_dims[0], "b");
  ck_assert(!s.has_any_dim);
  ck_assert(s.dynamic);
  ck_assert(!s.has_control_flow);
  ck_assert_uint_eq(s.num_recursive, 0);
  ck_assert_uint_eq(s.num_op_calls, 2);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_annotation_writes_the_inferred_types_and_renames_shadowed_bindings) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m;
  nimble_typing *t = test_check(a,
                                "def @main(%x: Tensor[(n, 4), float32]) {\n"
                                "  let %y = relu(%x);\n"
                                "  let %y = add(%y, %y);\n"
                                "  %y\n"
                                "}\n",
                                &m);
  NIMBLE_ASSERT_OK(nimble_typed_module_annotate(m, t, 0));
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_msg(strstr(text, "let %y: Tensor[(n, 4), float32] = relu(%x);") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "let %y_1: Tensor[(n, 4), float32] = add(%y, %y);") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "-> Tensor[(n, 4), float32]") != NULL, "%s", text);
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("typed_module");
  TCase *tc = tcase_create("typed_module");
  tcase_add_test(tc, test_the_summary_counts_calls_control_flow_and_recursion);
  tcase_add_test(tc, test_a_static_entry_with_a_tuple_result_has_one_output_per_field);
  tcase_add_test(tc, test_annotation_writes_the_inferred_types_and_renames_shadowed_bindings);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
