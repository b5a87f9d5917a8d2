/* Lambda lifting and closure conversion. */
#include <stdio.h>
#include <stdlib.h>

#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_closures_become_globals_taking_their_captured_values) {
  pt_expect(nimble_passes_lift_lambdas,
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %scale = fn (%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] { multiply(%v, %x) };\n"
            "  let %id = fn (%v: Tensor[(2,), float32]) { %v };\n"
            "  %scale(%id(%x))\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %scale = @main_lambda0(%x);\n"
            "  let %id = @main_lambda1;\n"
            "  %scale(%id(%x))\n"
            "}\n"
            "def @main_lambda0(%x: Tensor[(2,), float32]) -> fn(Tensor[(2,), float32]) -> Tensor[(2,), float32] {\n"
            "  fn (%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] { multiply(%v, %x) }\n"
            "}\n"
            "def @main_lambda1(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %v }\n");
}
END_TEST

START_TEST(test_nested_closures_are_lifted_innermost_first) {
  /* The inner literal captures %a (the outer's parameter) and %x; lifted
   * first, it becomes @f_lambda0(%a, %x) inside the outer literal, which
   * then captures only %x. */
  pt_expect(nimble_passes_lift_lambdas,
            "def @f(%x: Tensor[(), float32]) {\n"
            "  let %outer = fn (%a: Tensor[(), float32]) {\n"
            "    let %inner = fn (%b: Tensor[(), float32]) { add(add(%a, %b), %x) };\n"
            "    %inner(%a)\n"
            "  };\n"
            "  %outer(1.0)\n"
            "}\n",
            "def @f(%x: Tensor[(), float32]) {\n"
            "  let %outer = @f_lambda1(%x);\n"
            "  %outer(1.0)\n"
            "}\n"
            "def @f_lambda0(%a: Tensor[(), float32], %x: Tensor[(), float32])\n"
            "    -> fn(Tensor[(), float32]) -> Tensor[(), float32] {\n"
            "  fn (%b: Tensor[(), float32]) -> Tensor[(), float32] { add(add(%a, %b), %x) }\n"
            "}\n"
            "def @f_lambda1(%x: Tensor[(), float32]) -> fn(Tensor[(), float32]) -> Tensor[(), float32] {\n"
            "  fn (%a: Tensor[(), float32]) -> Tensor[(), float32] {\n"
            "    let %inner = @f_lambda0(%a, %x);\n"
            "    %inner(%a)\n"
            "  }\n"
            "}\n");
}
END_TEST

START_TEST(test_the_control_flow_program_lifts_and_still_type_checks) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  const char *root = getenv("NIMBLE_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/compiler/programs/control_flow.nir", root ? root : ".");
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  pt_pass_fn p = nimble_passes_lift_lambdas;
  nimble_module *m = pt_run(a, text, &p, 1);
  /* @pair's %scale closure captures nothing: a plain global. */
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "pair_lambda0"));
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_a_closure_in_a_polymorphic_function_keeps_its_type_parameter) {
  pt_expect(nimble_passes_lift_lambdas,
            "def @apply[T](%f: fn(T) -> T, %x: T) -> T {\n"
            "  let %g = fn (%y: T) { %f(%y) };\n"
            "  %g(%x)\n"
            "}\n"
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  @apply(fn (%v: Tensor[(2,), float32]) { exp(%v) }, %x)\n"
            "}\n",
            "def @apply[T](%f: fn(T) -> T, %x: T) -> T {\n"
            "  let %g = @apply_lambda0(%f);\n"
            "  %g(%x)\n"
            "}\n"
            "def @main(%x: Tensor[(2,), float32]) { @apply(@main_lambda0, %x) }\n"
            "def @apply_lambda0[T](%f: fn(T) -> T) -> fn(T) -> T { fn (%y: T) -> T { %f(%y) } }\n"
            "def @main_lambda0(%v: Tensor[(2,), float32]) -> Tensor[(2,), float32] { exp(%v) }\n");
}
END_TEST

int main(void) {
  Suite *s = suite_create("lambda_lift");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_closures_become_globals_taking_their_captured_values);
  tcase_add_test(tc, test_nested_closures_are_lifted_innermost_first);
  tcase_add_test(tc, test_the_control_flow_program_lifts_and_still_type_checks);
  tcase_add_test(tc, test_a_closure_in_a_polymorphic_function_keeps_its_type_parameter);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
