/* Status objects: codes, messages, context, ownership. */
#include <string.h>

#include "nimble_test.h"

#include "nimble/status.h"

START_TEST(test_ok_is_null_with_empty_message) {
  ck_assert_ptr_null(nimble_ok());
  ck_assert_int_eq(nimble_status_code(nimble_ok()), NIMBLE_OK);
  ck_assert_str_eq(nimble_status_message(nimble_ok()), "");
  nimble_status_free(nimble_ok());
}
END_TEST

START_TEST(test_make_formats_message_and_keeps_code) {
  nimble_status_t s = nimble_status_make(NIMBLE_NOT_FOUND, "blob %s of %d bytes", "x", 42);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_NOT_FOUND);
  ck_assert_str_eq(nimble_status_message(s), "blob x of 42 bytes");
  nimble_status_free(s);
}
END_TEST

START_TEST(test_make_with_ok_code_is_ok) {
  ck_assert_ptr_null(nimble_status_make(NIMBLE_OK, "nothing"));
}
END_TEST

START_TEST(test_annotate_prepends_context_twice) {
  nimble_status_t s = nimble_status_make(NIMBLE_DATA_LOSS, "digest mismatch");
  s = nimble_status_annotate(s, "blob %d", 3);
  s = nimble_status_annotate(s, "while pulling %s", "m:v1");
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_DATA_LOSS);
  ck_assert_str_eq(nimble_status_message(s), "while pulling m:v1: blob 3: digest mismatch");
  ck_assert_int_eq(nimble_status_consume(s), NIMBLE_DATA_LOSS);
}
END_TEST

START_TEST(test_annotate_ok_stays_ok) {
  ck_assert_ptr_null(nimble_status_annotate(nimble_ok(), "context"));
}
END_TEST

static nimble_status_t fails_then_returns(int *reached) {
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_status_make(NIMBLE_IO_ERROR, "disk full"), "writing %s", "f");
  *reached = 1;
  return nimble_ok();
}

START_TEST(test_return_if_error_ctx_stops_and_annotates) {
  int reached = 0;
  nimble_status_t s = fails_then_returns(&reached);
  ck_assert_int_eq(reached, 0);
  ck_assert_str_eq(nimble_status_message(s), "writing f: disk full");
  nimble_status_free(s);
}
END_TEST

START_TEST(test_code_names_are_stable) {
  ck_assert_str_eq(nimble_status_code_name(NIMBLE_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  ck_assert_str_eq(nimble_status_code_name(NIMBLE_DATA_LOSS), "DATA_LOSS");
  ck_assert_str_eq(nimble_status_code_name((nimble_status_code_t)999), "UNKNOWN");
}
END_TEST

START_TEST(test_messages_and_context_of_any_length_are_kept_whole) {
  char big[3001];
  memset(big, 'x', 3000);
  big[3000] = '\0';
  nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s", big);
  s = nimble_status_annotate(s, "node '%s'", big);
  const char *m = nimble_status_message(s);
  ck_assert_uint_eq(strlen(m), 6 + 3000 + 3 + 3000);
  ck_assert(strncmp(m, "node 'xxx", 9) == 0);
  ck_assert(strncmp(m + 6 + 3000, "': x", 4) == 0);
  ck_assert_int_eq(m[strlen(m) - 1], 'x');
  nimble_status_free(s);
}
END_TEST

START_TEST(test_a_status_made_at_a_place_keeps_it_through_annotations) {
  nimble_status_t s = nimble_status_make_at("lower.c", 42, NIMBLE_INTERNAL, "bad %s", "thing");
  s = nimble_status_annotate(s, "pass %s", "lower");
  int line = 0;
  ck_assert_str_eq(nimble_status_source(s, &line), "lower.c");
  ck_assert_int_eq(line, 42);
  ck_assert_str_eq(nimble_status_message(s), "pass lower: bad thing");
  nimble_status_free(s);
  /* The function itself records none; OK has none. */
  s = (nimble_status_make)(NIMBLE_INTERNAL, "x");
  ck_assert_ptr_null(nimble_status_source(s, &line));
  nimble_status_free(s);
  ck_assert_ptr_null(nimble_status_source(nimble_ok(), NULL));
}
END_TEST

START_TEST(test_debug_builds_record_where_a_status_was_made) {
  int line = 0, here = __LINE__ + 1;
  nimble_status_t s = nimble_status_make(NIMBLE_NOT_FOUND, "x");
  const char *file = nimble_status_source(s, &line);
#ifdef NDEBUG
  (void)here;
  ck_assert_ptr_null(file);
#else
  ck_assert_ptr_nonnull(file);
  ck_assert_str_eq(file, __FILE__);
  ck_assert_int_eq(line, here);
#endif
  nimble_status_free(s);
}
END_TEST

START_TEST(test_a_subject_marks_what_the_message_names_and_survives_annotation) {
  static const int node_a = 0, node_b = 0;
  nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "node 'a': bad attribute");
  ck_assert_ptr_null(nimble_status_subject(s));
  s = nimble_status_set_subject(s, &node_a);
  s = nimble_status_annotate(s, "in graph g");
  ck_assert_ptr_eq(nimble_status_subject(s), &node_a);
  s = nimble_status_set_subject(s, &node_b);
  ck_assert_ptr_eq(nimble_status_subject(s), &node_b);
  nimble_status_free(s);
  ck_assert_ptr_null(nimble_status_set_subject(nimble_ok(), &node_a));
  ck_assert_ptr_null(nimble_status_subject(nimble_ok()));
}
END_TEST

START_TEST(test_oom_macros_say_out_of_memory_and_what_was_being_done) {
  nimble_status_t s = NIMBLE_OOM();
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(nimble_status_message(s), "out of memory");
  nimble_status_free(s);
  s = NIMBLE_OOM_IN("lowering");
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(nimble_status_message(s), "lowering: out of memory");
  nimble_status_free(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("status");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_ok_is_null_with_empty_message);
  tcase_add_test(tc, test_make_formats_message_and_keeps_code);
  tcase_add_test(tc, test_make_with_ok_code_is_ok);
  tcase_add_test(tc, test_annotate_prepends_context_twice);
  tcase_add_test(tc, test_annotate_ok_stays_ok);
  tcase_add_test(tc, test_return_if_error_ctx_stops_and_annotates);
  tcase_add_test(tc, test_code_names_are_stable);
  tcase_add_test(tc, test_messages_and_context_of_any_length_are_kept_whole);
  tcase_add_test(tc, test_a_status_made_at_a_place_keeps_it_through_annotations);
  tcase_add_test(tc, test_debug_builds_record_where_a_status_was_made);
  tcase_add_test(tc, test_a_subject_marks_what_the_message_names_and_survives_annotation);
  tcase_add_test(tc, test_oom_macros_say_out_of_memory_and_what_was_being_done);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
