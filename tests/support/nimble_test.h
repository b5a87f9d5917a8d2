/* Shared helpers for the Check suites. */
#ifndef NIMBLE_TEST_H
#define NIMBLE_TEST_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/status.h"

/* Runs a suite and returns main()'s exit code. */
static inline int nimble_test_run(Suite *suite) {
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Asserts success, showing the status message on failure. */
#define NIMBLE_ASSERT_OK(expr)                                                 \
  do {                                                                         \
    nimble_status_t s_ = (expr);                                               \
    ck_assert_msg(s_ == NULL, "%s failed: %s: %s", #expr,                      \
                  nimble_status_code_name(nimble_status_code(s_)),             \
                  nimble_status_message(s_));                                  \
  } while (0)

/* Asserts failure with `code` and a message containing `fragment`. */
#define NIMBLE_ASSERT_ERROR(expr, code, fragment)                              \
  do {                                                                         \
    nimble_status_t s_ = (expr);                                               \
    ck_assert_msg(s_ != NULL, "%s succeeded, expected %s", #expr,              \
                  nimble_status_code_name(code));                              \
    ck_assert_msg(nimble_status_code(s_) == (code), "%s: got %s (%s), want %s",\
                  #expr, nimble_status_code_name(nimble_status_code(s_)),      \
                  nimble_status_message(s_), nimble_status_code_name(code));   \
    ck_assert_msg(strstr(nimble_status_message(s_), (fragment)) != NULL,       \
                  "%s: message '%s' lacks '%s'", #expr,                        \
                  nimble_status_message(s_), (fragment));                      \
    nimble_status_free(s_);                                                    \
  } while (0)

#endif /* NIMBLE_TEST_H */
