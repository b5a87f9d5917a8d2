/* Failure handling with real processes: a worker SIGKILLed mid-compile, a
 * task that takes down three workers, and compiles that crash, run out of
 * memory, overrun their time, or fail with a message. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "farm_harness.h"
#include "nimble_test.h"

static char *submit_x86(farm *f, const char *model) {
  const char *targets[] = {"x86", NULL};
  json_t *acc = farm_submit(f, model, "team/fail", targets, NULL);
  char *job = strdup(json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  return job;
}

static void task_key(farm *f, const char *job, char out[200]) {
  char key[80];
  snprintf(key, sizeof key, "nimble:job:%s", job);
  char *tid = farm_redis_hget(f, key, "task:0");
  ck_assert(tid != NULL);
  snprintf(out, 200, "nimble:task:%s", tid);
  free(tid);
}

static const char *first_task(const json_t *st, const char *key) {
  return json_string_value(json_object_get(json_array_get(json_object_get(st, "tasks"), 0), key));
}

START_TEST(test_worker_killed_mid_compile_hands_the_task_to_another_worker) {
  farm f;
  farm_start(&f, NULL);
  int w1 = farm_start_worker(&f, "w1", "x86", NULL);
  char model[72];
  farm_push_model(&f, "model F\nsleep 3000\n", model);
  char *job = submit_x86(&f, model);
  char tkey[200];
  task_key(&f, job, tkey);
  ck_assert(farm_wait_redis_field(&f, tkey, "worker", "w1", 10000));
  /* Killed mid-compile: once its compiler has started. */
  for (int k = 0; k < 200 && farm_count_compiles(&f, NULL) < 1; k++) farm_sleep_ms(50);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  farm_start_worker(&f, "w2", "x86", NULL);
  farm_kill_worker(&f, w1, SIGKILL);
  json_t *st = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "done"), "state %s",
                json_dumps(st, 0));
  char *attempts = farm_redis_hget(&f, tkey, "attempts");
  ck_assert_str_eq(attempts, "2");
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 2);
  ck_assert(farm_sched_log_contains(&f, "worker 'w1' stopped renewing its lease"));
  free(attempts);
  json_decref(st);
  free(job);
  farm_stop(&f);
}
END_TEST

START_TEST(test_task_that_kills_three_workers_fails_with_the_reason) {
  farm f;
  farm_start(&f, NULL);
  char model[72];
  farm_push_model(&f, "model G\nsleep 30000\n", model);
  char *job = submit_x86(&f, model);
  char tkey[200];
  task_key(&f, job, tkey);
  const char *ids[] = {"v1", "v2", "v3"};
  for (int i = 0; i < 3; i++) {
    int w = farm_start_worker(&f, ids[i], "x86", NULL);
    ck_assert_msg(farm_wait_redis_field(&f, tkey, "worker", ids[i], 10000), "%s never got the task",
                  ids[i]);
    /* Killed mid-compile: once the compiler has started. */
    for (int k = 0; k < 200 && farm_count_compiles(&f, NULL) < i + 1; k++) farm_sleep_ms(50);
    ck_assert_int_eq(farm_count_compiles(&f, NULL), i + 1);
    farm_kill_worker(&f, w, SIGKILL);
  }
  json_t *st = farm_wait_job(&f, job, "failed", 15000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "failed");
  const char *error = first_task(st, "error");
  ck_assert_msg(strstr(error, "delivered 3 times without finishing") != NULL, "error: %s", error);
  ck_assert_msg(strstr(error, "'v3' stopped renewing its lease") != NULL, "error: %s", error);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 3);
  json_decref(st);
  free(job);
  farm_stop(&f);
}
END_TEST

/* Runs `model_text` on a worker started with `extra`; expects the job to
 * fail with every fragment in the error, and the worker to live on and
 * compile the next model. */
static void expect_compile_failure(const char *model_text, const char *const *extra,
                                   const char *const *fragments) {
  farm f;
  farm_start(&f, NULL);
  int w = farm_start_worker(&f, "w1", "x86", extra);
  char model[72], good[72];
  farm_push_model(&f, model_text, model);
  farm_push_model(&f, "model H: fine\n", good);
  char *job = submit_x86(&f, model);
  json_t *st = farm_wait_job(&f, job, "failed", 20000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "failed"), "state: %s",
                json_dumps(st, 0));
  const char *error = first_task(st, "error");
  for (int i = 0; fragments[i]; i++)
    ck_assert_msg(strstr(error, fragments[i]) != NULL, "error '%s' lacks '%s'", error, fragments[i]);
  /* Failed once, not retried: the same model would fail anywhere. */
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 1);
  ck_assert(farm_worker_alive(&f, w));
  char *job2 = submit_x86(&f, good);
  json_t *st2 = farm_wait_job(&f, job2, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st2, "state")), "done");
  json_decref(st);
  json_decref(st2);
  free(job);
  free(job2);
  farm_stop(&f);
}

START_TEST(test_compiler_crash_fails_the_task_and_the_worker_lives_on) {
  const char *frag[] = {"killed by signal 11", "crashing as the model asks", NULL};
  expect_compile_failure("model I\ncrash\n", NULL, frag);
}
END_TEST

START_TEST(test_compiler_over_its_memory_limit_fails_the_task) {
  const char *extra[] = {"--mem-limit-mb", "256", NULL};
  const char *frag[] = {"signal 6", "out of memory after", NULL};
  expect_compile_failure("model J\noom\n", extra, frag);
}
END_TEST

START_TEST(test_compiler_past_its_wall_clock_limit_is_killed) {
  const char *extra[] = {"--timeout-s", "1", NULL};
  const char *frag[] = {"wall-clock limit of 1 s", NULL};
  expect_compile_failure("model K\nsleep 20000\n", extra, frag);
}
END_TEST

START_TEST(test_failed_compile_reports_the_compiler_error_text) {
  const char *frag[] = {"exit status 1", "node 'lstm_0' (LSTM): unsupported attribute 'clip'", NULL};
  expect_compile_failure("model L\nfail node 'lstm_0' (LSTM): unsupported attribute 'clip'\n", NULL,
                         frag);
}
END_TEST

START_TEST(test_parts_without_a_metadata_part_fail_the_task_naming_the_layer) {
  /* The compiler exits 0 but its parts.json lists no metadata part: the
   * worker's manifest would not load in a runtime, so protocol's encoder
   * refuses it and the task fails naming the index and the missing type. */
  const char *frag[] = {"parts.json: manifest: layers: no "
                        "application/vnd.nimble.executable.metadata.v1 layer",
                        NULL};
  expect_compile_failure("model M\nno-metadata\n", NULL, frag);
}
END_TEST

START_TEST(test_model_missing_from_the_store_fails_the_task_naming_it) {
  farm f;
  farm_start(&f, NULL);
  farm_start_worker(&f, "w1", "x86", NULL);
  /* The digest of "absent\n", never pushed. */
  char model[72];
  nimble_digest_t d;
  nimble_digest_compute("absent\n", 7, &d);
  nimble_digest_format(&d, model);
  char *job = submit_x86(&f, model);
  json_t *st = farm_wait_job(&f, job, "failed", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "failed");
  const char *error = first_task(st, "error");
  char want[160];
  snprintf(want, sizeof want, "fetching model %s from repository 'models'", model);
  ck_assert_msg(strstr(error, want) != NULL, "error: %s", error);
  ck_assert_int_eq(farm_count_compiles(&f, NULL), 0);
  json_decref(st);
  free(job);
  farm_stop(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("farm_failures");
  TCase *tc = tcase_create("failures");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_worker_killed_mid_compile_hands_the_task_to_another_worker);
  tcase_add_test(tc, test_task_that_kills_three_workers_fails_with_the_reason);
  tcase_add_test(tc, test_compiler_crash_fails_the_task_and_the_worker_lives_on);
  tcase_add_test(tc, test_compiler_over_its_memory_limit_fails_the_task);
  tcase_add_test(tc, test_compiler_past_its_wall_clock_limit_is_killed);
  tcase_add_test(tc, test_failed_compile_reports_the_compiler_error_text);
  tcase_add_test(tc, test_parts_without_a_metadata_part_fail_the_task_naming_the_layer);
  tcase_add_test(tc, test_model_missing_from_the_store_fails_the_task_naming_it);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
