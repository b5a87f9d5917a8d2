/* Common-subexpression elimination. */
#include "nimble_test.h"
#include "passes_test_util.h"

START_TEST(test_cse_merges_equal_calls_and_follows_replacements) {
  pt_expect(nimble_passes_eliminate_common_subexprs,
            "def @main(%x: Tensor[(2,), float32], %y: Tensor[(2,), float32]) {\n"
            "  let %a = add(%x, %y);\n"
            "  let %b = add(%x, %y);\n"
            "  let %c = multiply(%a, %b);\n"
            "  let %d = multiply(%a, %a);\n"
            "  let %e = add(%y, %x);\n"
            "  let %f = sum(%e, axes=[0]);\n"
            "  let %g = sum(%e, axes=[0], keepdims=1);\n"
            "  (%c, %d, %e, %f, %g)\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %y: Tensor[(2,), float32]) {\n"
            "  let %a = add(%x, %y);\n"
            "  let %c = multiply(%a, %a);\n"
            "  let %e = add(%y, %x);\n"
            "  let %f = sum(%e, axes=[0]);\n"
            "  let %g = sum(%e, axes=[0], keepdims=1);\n"
            "  (%c, %c, %e, %f, %g)\n"
            "}\n");
}
END_TEST

START_TEST(test_cse_respects_scopes_of_branches) {
  /* exp(%x) inside the then-branch is not visible after the if; the outer
   * one computed before the if is visible inside both branches. */
  pt_expect(nimble_passes_eliminate_common_subexprs,
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %r = if (%c) { let %p = exp(%x); %p } else { %x };\n"
            "  let %q = exp(%x);\n"
            "  let %s = if (%c) { let %u = exp(%x); %u } else { let %v = exp(%x); %v };\n"
            "  (%r, %q, %s)\n"
            "}\n",
            "def @main(%x: Tensor[(2,), float32], %c: bool) {\n"
            "  let %r = if (%c) { let %p = exp(%x); %p } else { %x };\n"
            "  let %q = exp(%x);\n"
            "  let %s = if (%c) { %q } else { %q };\n"
            "  (%r, %q, %s)\n"
            "}\n");
}
END_TEST

START_TEST(test_cse_never_merges_allocations) {
  const char *p =
      "def @main() {\n"
      "  let %s1 = alloc_storage(16);\n"
      "  let %s2 = alloc_storage(16);\n"
      "  (%s1, %s2)\n"
      "}\n";
  pt_expect(nimble_passes_eliminate_common_subexprs, p, p);
}
END_TEST

START_TEST(test_cse_sees_outer_values_in_closures_and_arms_but_not_siblings) {
  /* Inside the closure and the match arm, exp(%x) bound outside is reused;
   * the tanh of one arm is not visible in the other arm. */
  pt_expect(nimble_passes_eliminate_common_subexprs,
            "type Opt { Some(Tensor[(2,), float32]), None }\n"
            "def @main(%x: Tensor[(2,), float32], %o: Opt) {\n"
            "  let %e = exp(%x);\n"
            "  let %f = fn (%y: Tensor[(2,), float32]) { let %g = exp(%x); add(%g, %y) };\n"
            "  match (%o) {\n"
            "    Some(%v) => (let %t = tanh(%x); let %u = exp(%x); %f(add(%t, %u))),\n"
            "    None => (let %t2 = tanh(%x); %t2),\n"
            "  }\n"
            "}\n",
            "type Opt { Some(Tensor[(2,), float32]), None }\n"
            "def @main(%x: Tensor[(2,), float32], %o: Opt) {\n"
            "  let %e = exp(%x);\n"
            "  let %f = fn (%y: Tensor[(2,), float32]) { add(%e, %y) };\n"
            "  match (%o) {\n"
            "    Some(%v) => (let %t = tanh(%x); %f(add(%t, %e))),\n"
            "    None => (let %t2 = tanh(%x); %t2),\n"
            "  }\n"
            "}\n");
}
END_TEST

int main(void) {
  Suite *s = suite_create("common_subexpr");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_cse_merges_equal_calls_and_follows_replacements);
  tcase_add_test(tc, test_cse_respects_scopes_of_branches);
  tcase_add_test(tc, test_cse_never_merges_allocations);
  tcase_add_test(tc, test_cse_sees_outer_values_in_closures_and_arms_but_not_siblings);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
