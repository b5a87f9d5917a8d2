/* Exhaustiveness of match (typing/exhaustive.c): complete matches pass,
 * partial ones give an example of a value no arm matches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;
static void setup(void) { NIMBLE_ASSERT_OK(nimble_arena_create(&arena)); }
static void teardown(void) { nimble_arena_destroy(arena); }

#define TYPES "type List[T] { Cons(T, List[T]), Nil }\ntype Option[T] { Some(T), None }\n"

/* The missing case of the first match in @f's body ("" when complete). */
static const char *missing_of(const char *body) {
  char text[2048];
  snprintf(text, sizeof text, TYPES "def @f(%%l: List[float32], %%o: Option[List[float32]]) {\n  %s\n}\n", body);
  nimble_module *m = test_parse(arena, text);
  const nimble_expr *e = nimble_module_find_func(m, "f")->u.func.body;
  while (e->kind == NIMBLE_EXPR_LET) e = e->u.let.body;
  ck_assert_int_eq(e->kind, NIMBLE_EXPR_MATCH);
  bool ok;
  const char *missing;
  NIMBLE_ASSERT_OK(nimble_typing_match_exhaustive(arena, e, &ok, &missing));
  ck_assert(ok == (missing == NULL));
  return ok ? "" : missing;
}

START_TEST(test_complete_matches_have_no_missing_case) {
  ck_assert_str_eq(missing_of("match (%l) { Cons(_, _) => 1, Nil => 0 }"), "");
  ck_assert_str_eq(missing_of("match (%l) { _ => 1 }"), "");
  ck_assert_str_eq(missing_of("match (%l) { %x => 1 }"), "");
  ck_assert_str_eq(missing_of("match (%l) { Cons(_, Cons(_, _)) => 2, Cons(_, Nil) => 1, Nil => 0 }"), "");
  ck_assert_str_eq(missing_of("match ((%l, %o)) { (Nil, _) => 0, (_, None) => 1, (Cons(_, _), Some(_)) => 2 }"), "");
}
END_TEST

START_TEST(test_partial_matches_give_an_uncovered_value) {
  ck_assert_str_eq(missing_of("match (%l) { Cons(_, _) => 1 }"), "Nil");
  ck_assert_str_eq(missing_of("match (%l) { Nil => 0 }"), "Cons(_, _)");
  ck_assert_str_eq(missing_of("match (%l) { Cons(_, Nil) => 1, Nil => 0 }"), "Cons(_, Cons(_, _))");
  ck_assert_str_eq(missing_of("match (%o) { Some(Cons(_, _)) => 1, None => 0 }"), "Some(Nil)");
  ck_assert_str_eq(missing_of("match ((%l, %o)) { (Nil, _) => 0, (_, None) => 1 }"), "(Cons(_, _), Some(_))");
}
END_TEST

START_TEST(test_module_check_names_the_partial_match_and_its_place) {
  nimble_module *m = test_parse(arena, TYPES "def @ok(%l: List[float32]) { match (%l) { Cons(%h, _) => %h, Nil => 0.0 } }\n"
                                             "def @head(%l: List[float32]) {\n  match (%l) { Cons(%h, _) => %h }\n}\n");
  NIMBLE_ASSERT_ERROR(nimble_typing_check_matches(m), NIMBLE_INVALID_ARGUMENT,
                      "in @head: test.nir:5:3: match is not exhaustive: no arm matches Nil");
  /* Every fixture program and the Tree-LSTM are total. */
  static const char *const kTotal[] = {"examples/treelstm.nir", "tests/compiler/programs/list_sum.nir",
                                       "tests/compiler/programs/option_tree.nir",
                                       "tests/compiler/programs/edge_cases.nir"};
  for (size_t i = 0; i < sizeof kTotal / sizeof kTotal[0]; i++) {
    nimble_module *total;
    char *path = test_source_path(kTotal[i]);
    NIMBLE_ASSERT_OK(nimble_nir_parse_file(arena, path, &total));
    NIMBLE_ASSERT_OK(nimble_typing_check_matches(total));
    free(path);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("exhaustive");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_complete_matches_have_no_missing_case);
  tcase_add_test(tc, test_partial_matches_give_an_uncovered_value);
  tcase_add_test(tc, test_module_check_names_the_partial_match_and_its_place);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
