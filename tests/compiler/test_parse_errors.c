/* The parser's errors: file:line:col and what was expected, for syntax
 * errors, unknown names and bad attributes; and no crash on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;

static void setup(void) { NIMBLE_ASSERT_OK(nimble_arena_create(&arena)); }
static void teardown(void) { nimble_arena_destroy(arena); }

static nimble_status_t parse(const char *text) {
  nimble_module *m;
  return nimble_nir_parse(arena, "main.nir", text, strlen(text), &m);
}

START_TEST(test_missing_paren_reports_line_col_and_what_was_expected) {
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) {\n  add(%x, %x\n}\n"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:3:1: expected ',' or ')' in the arguments, found '}'");
}
END_TEST

START_TEST(test_missing_semicolon_after_let) {
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) {\n  let %y = exp(%x)\n  %y\n}\n"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:3:3: expected ';' after the let's value, found '%y'");
}
END_TEST

START_TEST(test_unknown_variable_is_reported_where_used) {
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) {\n  let %y = exp(%x);\n  add(%y, %z)\n}\n"),
                      NIMBLE_INVALID_ARGUMENT, "main.nir:3:11: unknown variable %z");
  /* A let's variable is not in scope in its own value. */
  NIMBLE_ASSERT_ERROR(parse("def @main() { let %a = %a; %a }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:24: unknown variable %a");
  /* Match arm variables end with their arm. */
  NIMBLE_ASSERT_ERROR(parse("type O[T] { S(T), N }\ndef @m(%o: O[float32]) { match (%o) { S(%v) => %v, N => %v } }"),
                      NIMBLE_INVALID_ARGUMENT, "main.nir:2:57: unknown variable %v");
}
END_TEST

START_TEST(test_unknown_operator_global_and_type_are_errors) {
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) { frobnicate(%x) }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:26: unknown operator or constructor 'frobnicate'");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) { @nowhere(%x) }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:26: unknown global function @nowhere");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: Lst[float32]) { %x }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:15: unknown type 'Lst'");
  NIMBLE_ASSERT_ERROR(parse("type L[T] { C(T) }\ndef @main(%x: L[float32, int8]) { %x }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:2:15: type 'L' takes 1 type arguments, got 2");
}
END_TEST

START_TEST(test_bad_attributes_name_the_operator_and_attribute) {
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: Tensor[(2, 3), float32]) {\n  sum(%x, axis=[1])\n}"),
                      NIMBLE_INVALID_ARGUMENT, "main.nir:2:6: operator 'sum' has no attribute 'axis'");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: Tensor[(2, 3), float32]) { sum(%x, axes=1) }"),
                      NIMBLE_INVALID_ARGUMENT, "attribute 'axes' of operator 'sum' must be a list of ints, got an int");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: Tensor[(2, 3), float32]) { reshape(%x) }"),
                      NIMBLE_INVALID_ARGUMENT, "operator 'reshape' needs attribute 'newshape'");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: Tensor[(2, 3), float32]) { add(%x) }"),
                      NIMBLE_INVALID_ARGUMENT, "operator 'add' takes 2 inputs, got 1");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) { exp(axis=1, %x) }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:38: expected an attribute (name=value): arguments come first");
}
END_TEST

START_TEST(test_lexical_errors_have_a_place) {
  NIMBLE_ASSERT_ERROR(parse("def @main() {\n  $\n}"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:2:3: unexpected character '$'");
  NIMBLE_ASSERT_ERROR(parse("def @main() { 1 } /* never closed"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:19: unterminated comment");
  NIMBLE_ASSERT_ERROR(parse("def @main(%x: float32) { cast(%x, dtype=\"int8) }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:41: unterminated string");
  NIMBLE_ASSERT_ERROR(parse("def @main(%\"a.b) { 1 }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:11: unterminated quoted name");
  NIMBLE_ASSERT_ERROR(parse("def @\"\"() { 1 }"), NIMBLE_INVALID_ARGUMENT, "main.nir:1:5: empty quoted name");
  NIMBLE_ASSERT_ERROR(parse("def @main(%\"a\\x00\") { 1 }"), NIMBLE_INVALID_ARGUMENT,
                      "a quoted name cannot contain \\x00");
  NIMBLE_ASSERT_ERROR(parse("def @main() { 12abc }"), NIMBLE_INVALID_ARGUMENT, "main.nir:1:15: malformed number");
  NIMBLE_ASSERT_ERROR(parse("def @main() { 99999999999999999999 }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:15: integer 99999999999999999999 is out of range");
}
END_TEST

START_TEST(test_constant_errors_name_the_problem) {
  NIMBLE_ASSERT_ERROR(parse("def @main() { const[(2, 2), float32]{1, 2, 3} }"), NIMBLE_INVALID_ARGUMENT,
                      "3 elements for a shape of 4");
  NIMBLE_ASSERT_ERROR(parse("def @main() { const[(1,), int8]{300} }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:1:33: 300 does not fit int8");
  NIMBLE_ASSERT_ERROR(parse("def @main() { const[(1,), float33]{1} }"), NIMBLE_INVALID_ARGUMENT,
                      "expected a dtype, found 'float33'");
}
END_TEST

START_TEST(test_definitions_errors) {
  NIMBLE_ASSERT_ERROR(parse("def @f() { 1 }\ndef @f() { 2 }"), NIMBLE_INVALID_ARGUMENT,
                      "main.nir:2:5: global function '@f' is defined twice");
  NIMBLE_ASSERT_ERROR(parse("type A { X }\ntype B { X }"), NIMBLE_ALREADY_EXISTS, "constructor 'X' of type 'B' is already defined");
  NIMBLE_ASSERT_ERROR(parse("def @f() { 1 }\nlet"), NIMBLE_INVALID_ARGUMENT, "main.nir:2:1: expected 'type' or 'def', found 'let'");
  NIMBLE_ASSERT_ERROR(parse("def @f() { 1 "), NIMBLE_INVALID_ARGUMENT, "unbalanced '{'");
  NIMBLE_ASSERT_ERROR(parse("type float32 { A }"), NIMBLE_INVALID_ARGUMENT, "main.nir:1:6: 'float32' is a reserved word");
  NIMBLE_ASSERT_ERROR(parse("type T { A, let }"), NIMBLE_INVALID_ARGUMENT, "main.nir:1:13: 'let' is a reserved word");
  NIMBLE_ASSERT_ERROR(parse("type O[T] { S(T) }\ndef @m(%o: O[float32]) { match (%o) { S(%a, %b) => %a } }"),
                      NIMBLE_INVALID_ARGUMENT, "constructor S has 1 fields, the pattern 2");
}
END_TEST

START_TEST(test_deep_nesting_is_an_error_not_a_crash) {
  size_t n = 100000;
  char *text = malloc(2 * n + 64);
  size_t k = (size_t)sprintf(text, "def @main() { ");
  for (size_t i = 0; i < n; i++) text[k++] = '(';
  text[k++] = '1';
  for (size_t i = 0; i < n; i++) text[k++] = ')';
  strcpy(text + k, " }");
  NIMBLE_ASSERT_ERROR(parse(text), NIMBLE_INVALID_ARGUMENT, "nesting deeper than");
  free(text);
}
END_TEST

START_TEST(test_every_prefix_of_a_valid_program_fails_cleanly) {
  /* Truncating a real program anywhere gives an error, never a crash,
   * hang or leak (ASan runs this suite). */
  char *path = test_source_path("examples/treelstm.nir");
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char *text = calloc(1, 1 << 16);
  size_t len = fread(text, 1, (1 << 16) - 1, f);
  fclose(f);
  free(path);
  int errors = 0;
  for (size_t cut = 0; cut < len; cut += 7) {
    nimble_arena *a;
    nimble_module *m;
    NIMBLE_ASSERT_OK(nimble_arena_create(&a));
    nimble_status_t s = nimble_nir_parse(a, "cut.nir", text, cut, &m);
    if (s) errors++;
    nimble_status_free(s);
    nimble_arena_destroy(a);
  }
  ck_assert_int_gt(errors, (int)(len / 7) / 2);
  free(text);
}
END_TEST

START_TEST(test_nul_byte_and_missing_file_are_errors) {
  nimble_module *m;
  NIMBLE_ASSERT_ERROR(nimble_nir_parse(arena, "nul.nir", "def @f() { 1 }\0", 15, &m), NIMBLE_INVALID_ARGUMENT,
                      "nul.nir: the text contains a NUL byte");
  NIMBLE_ASSERT_ERROR(nimble_nir_parse_file(arena, "/nonexistent/x.nir", &m), NIMBLE_IO_ERROR,
                      "cannot open /nonexistent/x.nir");
}
END_TEST

int main(void) {
  Suite *s = suite_create("parse_errors");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_missing_paren_reports_line_col_and_what_was_expected);
  tcase_add_test(tc, test_missing_semicolon_after_let);
  tcase_add_test(tc, test_unknown_variable_is_reported_where_used);
  tcase_add_test(tc, test_unknown_operator_global_and_type_are_errors);
  tcase_add_test(tc, test_bad_attributes_name_the_operator_and_attribute);
  tcase_add_test(tc, test_lexical_errors_have_a_place);
  tcase_add_test(tc, test_constant_errors_name_the_problem);
  tcase_add_test(tc, test_definitions_errors);
  tcase_add_test(tc, test_deep_nesting_is_an_error_not_a_crash);
  tcase_add_test(tc, test_every_prefix_of_a_valid_program_fails_cleanly);
  tcase_add_test(tc, test_nul_byte_and_missing_file_are_errors);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
