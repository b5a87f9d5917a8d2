/* Shared helpers for the Check suites. */
#ifndef NIMBLE_TEST_H
#define NIMBLE_TEST_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/status.h"

/* Check's ck_assert_msg (and every ck_assert_* built on it) records each
 * passing assertion's file and line (_mark_point: a write(2) to Check's
 * message file), so that a crash can be reported after the last one
 * passed. Suites that check every element of a result made millions of
 * those writes: half of test_sgemm_threads' time was write(2). Here a
 * passing assertion records nothing and a failing one reports as before;
 * a crash is located by the sanitizers' stack trace and the test's name. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                               \
  ((expr) ? (void)0                                                            \
          : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", \
                              ##__VA_ARGS__))

/* Test cases tagged NIMBLE_TAG_LARGE compile the big reference models
 * (squeezenet, mobilenet, bert, lstm2). The sanitizer stage of
 * scripts/test.sh leaves them to the release stage with Check's own
 * CK_EXCLUDE_TAGS=large: they run the same compiler code as the small
 * models, only longer. */
#define NIMBLE_TAG_LARGE "large"

/* Runs a suite and returns main()'s exit code. A suite that ran no test
 * fails: a filter (CK_RUN_CASE, CK_EXCLUDE_TAGS) that leaves nothing must
 * not read as a pass. */
static inline int nimble_test_run(Suite *suite) {
  SRunner *sr = srunner_create(suite);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  int ran = srunner_ntests_run(sr);
  srunner_free(sr);
  const char *excluded = getenv("CK_EXCLUDE_TAGS");
  if (excluded && *excluded) printf("test cases tagged '%s' were left out (CK_EXCLUDE_TAGS)\n", excluded);
  if (ran == 0) {
    printf("no test ran: a suite that checks nothing fails\n");
    return EXIT_FAILURE;
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The next of a reproducible sequence of floats in [-1, 1) (a linear
 * congruential step on *seed; 16 bits of it, so every value is exact in
 * f32): the operands of the numeric suites. */
static inline float nimble_test_uniform(uint32_t *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
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
