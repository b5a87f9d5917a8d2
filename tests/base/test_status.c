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
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
