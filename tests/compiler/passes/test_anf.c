/* A-normal form for calls. */
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_anf_binds_nested_calls_in_evaluation_order) {
  pt_expect(nimble_passes_to_anf,
            "def @main(%x: Tensor[(2,), float32], %w: Tensor[(2,), float32]) {\n"
            "  relu(add(multiply(%x, %w), exp(%x)))\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %w: Tensor[(2,), float32]) {\n"
            "  let %a = multiply(%x, %w);\n"
            "  let %b = exp(%x);\n"
            "  let %c = add(%a, %b);\n"
            "  let %d = relu(%c);\n"
            "  %d\n"
            "}\n");
}
END_TEST

START_TEST(test_anf_flattens_lets_in_values_and_keeps_branches_apart) {
  pt_expect(nimble_passes_to_anf,
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %y = (let %z = exp(%x); negative(%z));\n"
            "  if (logical_not(%c)) { tanh(exp(%y)) } else { %y }\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %z = exp(%x);\n"
            "  let %y = negative(%z);\n"
            "  let %n = logical_not(%c);\n"
            "  if (%n) { let %e = exp(%y); let %t = tanh(%e); %t } else { %y }\n"
            "}\n");
}
END_TEST

START_TEST(test_anf_picks_names_not_used_in_the_function) {
  /* The user already has %t0; the fresh variables skip it, so the printed
   * program parses back to the same one (pt_run checks that). */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  pt_pass_fn p = nimble_passes_to_anf;
  nimble_module *m = pt_run(a,
                            "def @main(%t0: Tensor[(2,), float32]) {\n"
                            "  let %t1 = exp(%t0);\n"
                            "  negative(exp(%t1))\n"
                            "}\n",
                            &p, 1);
  char *s;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &s));
  ck_assert_ptr_nonnull(strstr(s, "let %t2 = exp(%t1);"));
  free(s);
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("anf");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_anf_binds_nested_calls_in_evaluation_order);
  tcase_add_test(tc, test_anf_flattens_lets_in_values_and_keeps_branches_apart);
  tcase_add_test(tc, test_anf_picks_names_not_used_in_the_function);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
