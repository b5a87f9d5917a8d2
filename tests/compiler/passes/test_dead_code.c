/* Dead-code elimination. */
#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_dce_removes_unused_pure_chains_and_keeps_calls_of_functions) {
  pt_expect(nimble_passes_eliminate_dead_code,
            "def @f(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %x }\n"
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %a = exp(%x);\n"
            "  let %b = negative(%a);\n"
            "  let %c = @f(%x);\n"
            "  let %d = relu(%x);\n"
            "  %d\n"
            "}\n",
            "def @f(%x: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %x }\n"
            "def @main(%x: Tensor[(2,), float32]) {\n"
            "  let %c = @f(%x);\n"
            "  let %d = relu(%x);\n"
            "  %d\n"
            "}\n");
}
END_TEST

START_TEST(test_dce_works_inside_branches_and_closures) {
  pt_expect(nimble_passes_eliminate_dead_code,
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %unused = fn (%y: Tensor[(2,), float32]) { %y };\n"
            "  let %g = fn (%y: Tensor[(2,), float32]) { let %z = exp(%y); %y };\n"
            "  if (%c) { let %t = tanh(%x); %g(%x) } else { %x }\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %g = fn (%y: Tensor[(2,), float32]) { %y };\n"
            "  if (%c) { %g(%x) } else { %x }\n"
            "}\n");
}
END_TEST

START_TEST(test_dce_keeps_invoke_and_kill_effects) {
  const char *p =
      "def @main() {\n"
      "  let %s = alloc_storage(16);\n"
      "  let %t = alloc_tensor(%s, 0, shape=[4], dtype=\"float32\");\n"
      "  let %i = invoke(%t, kernel=\"fused.zeros\");\n"
      "  let %k = kill(%t);\n"
      "  ()\n"
      "}\n";
  pt_expect(nimble_passes_eliminate_dead_code, p, p);
}
END_TEST

START_TEST(test_dce_keeps_a_match_that_may_fail) {
  const char *p =
      "type Opt { Some(Tensor[(), float32]), None }\n"
      "def @main(%o: Opt) {\n"
      "  let %v = match (%o) { Some(%x) => %x };\n"
      "  1.0\n"
      "}\n";
  pt_expect(nimble_passes_eliminate_dead_code, p, p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dead_code");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_dce_removes_unused_pure_chains_and_keeps_calls_of_functions);
  tcase_add_test(tc, test_dce_works_inside_branches_and_closures);
  tcase_add_test(tc, test_dce_keeps_invoke_and_kill_effects);
  tcase_add_test(tc, test_dce_keeps_a_match_that_may_fail);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
