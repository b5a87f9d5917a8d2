/* Restarts lose no job: the scheduler killed mid-job and started again on
 * the same endpoints, Redis (AOF on) stopped and started mid-job, and a
 * worker's connection to the scheduler gone silent mid-job. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "farm_harness.h"
#include "nimble_test.h"

static char *submit(farm *f, const char *model, const char *const *targets) {
  json_t *acc = farm_submit(f, model, "team/restart", targets, NULL);
  char *job = strdup(json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  return job;
}

static void task_key(farm *f, const char *job, int i, char out[200]) {
  char key[80], field[16];
  snprintf(key, sizeof key, "nimble:job:%s", job);
  snprintf(field, sizeof field, "task:%d", i);
  char *tid = farm_redis_hget(f, key, field);
  ck_assert(tid != NULL);
  snprintf(out, 200, "nimble:task:%s", tid);
  free(tid);
}

/* Waits until `worker`'s log says it is compiling the task at `tkey`: the
 * worker has it, not only the scheduler's record of sending it. Cut off
 * between the two (a scheduler killed, a connection held; each seen once
 * under ASan), the task's message is lost, and the task waits out a lease
 * no compile renews before its second delivery: not what these tests are
 * about. */
static void wait_compiling(farm *f, const char *worker, const char *tkey) {
  char compiling[220];
  snprintf(compiling, sizeof compiling, "compiling task %s", tkey + strlen("nimble:task:"));
  for (int i = 0; i < 200 && !farm_worker_log_contains(f, worker, compiling); i++) farm_sleep_ms(50);
  ck_assert_msg(farm_worker_log_contains(f, worker, compiling), "%s's log never said '%s'", worker, compiling);
}

START_TEST(test_scheduler_killed_mid_job_and_restarted_completes_the_job) {
  farm f;
  /* A lease longer than a restart takes on a loaded 2-core machine: the
   * test is about the lease surviving the restart, not about its length
   * (a 2 s lease lapsed once while the machine ran two builds, an 8 s one
   * once under ASan beside the background image build). */
  farm_config cfg = {.lease_ms = 20000};
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72], queued_model[72];
  farm_push_model(&f, "model M\nsleep 2500\n", model);
  farm_push_model(&f, "model N: waits for an aarch64 worker\n", queued_model);
  const char *x86[] = {"x86", NULL};
  const char *arm[] = {"aarch64", NULL};
  char *job = submit(&f, model, x86);
  char *job2 = submit(&f, queued_model, arm);
  char tkey[200];
  task_key(&f, job, 0, tkey);
  ck_assert(farm_wait_redis_field(&f, tkey, "worker", "w1", 10000));
  wait_compiling(&f, "w1", tkey);
  farm_stop_scheduler(&f, SIGKILL);
  farm_sleep_ms(300);
  farm_start_scheduler(&f);
  farm_start_worker(&f, "w2", "aarch64", NULL);
  json_t *st = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "done"), "%s",
                json_dumps(st, 0));
  json_t *st2 = farm_wait_job(&f, job2, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st2, "state")), "done");
  /* The running compile kept its lease across the restart: one compile. */
  char *attempts = farm_redis_hget(&f, tkey, "attempts");
  ck_assert_str_eq(attempts, "1");
  ck_assert_int_eq(farm_count_compiles(&f, "x86"), 1);
  ck_assert(farm_sched_log_contains(&f, "reloaded 1 running task(s) from redis"));
  free(attempts);
  json_decref(st);
  json_decref(st2);
  free(job);
  free(job2);
  farm_stop(&f);
}
END_TEST

START_TEST(test_redis_restarted_with_aof_loses_no_job) {
  farm_config cfg = {.aof = 1};
  farm f;
  farm_start(&f, &cfg);
  farm_start_worker(&f, "w1", "x86", NULL);
  char model[72], queued_model[72];
  farm_push_model(&f, "model O\nsleep 2000\n", model);
  farm_push_model(&f, "model P: queued across the restart\n", queued_model);
  const char *x86[] = {"x86", NULL};
  const char *arm[] = {"aarch64", NULL};
  char *job = submit(&f, model, x86);
  char *job2 = submit(&f, queued_model, arm);
  char tkey[200];
  task_key(&f, job, 0, tkey);
  ck_assert(farm_wait_redis_field(&f, tkey, "state", "running", 10000));
  farm_restart_redis(&f);
  /* The restarted Redis has both jobs back from its AOF. */
  char key[80];
  snprintf(key, sizeof key, "nimble:job:%s", job2);
  char *targets = farm_redis_hget(&f, key, "targets");
  ck_assert_msg(targets != NULL, "job %s is gone after the Redis restart", job2);
  ck_assert_str_eq(targets, "[\"aarch64\"]");
  free(targets);
  farm_start_worker(&f, "w2", "aarch64", NULL);
  json_t *st = farm_wait_job(&f, job, "done", 25000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "done"), "%s",
                json_dumps(st, 0));
  json_t *st2 = farm_wait_job(&f, job2, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st2, "state")), "done");
  json_decref(st);
  json_decref(st2);
  free(job);
  free(job2);
  farm_stop(&f);
}
END_TEST

/* A worker whose connection to the scheduler goes silent mid-compile (the
 * proxy between them holds it: open both ways, passing nothing, as when
 * the scheduler's host vanished or a NAT dropped the flow) notices by its
 * ZeroMQ heartbeats and connects again; its RESULT, written into the
 * silent connection and lost there, goes again until the scheduler's ACK.
 * The job completes with its one compile, well inside a lease that would
 * otherwise have had to run out (and the task to compile again). */
START_TEST(test_worker_connection_gone_silent_loses_no_result) {
  farm f;
  farm_config cfg = {.lease_ms = 120000};
  farm_start(&f, &cfg);
  const char *colon = strrchr(f.workers_ep, ':');
  ck_assert(colon != NULL);
  int port = farm_proxy_start(&f, "127.0.0.1", atoi(colon + 1));
  snprintf(f.worker_sched_ep, sizeof f.worker_sched_ep, "tcp://127.0.0.1:%d", port);
  const char *metrics[] = {"--metrics", "127.0.0.1:0", NULL};
  farm_start_worker(&f, "w1", "x86", metrics);
  char model[72];
  farm_push_model(&f, "model S\nsleep 1500\n", model);
  const char *x86[] = {"x86", NULL};
  char *job = submit(&f, model, x86);
  char tkey[200];
  task_key(&f, job, 0, tkey);
  ck_assert(farm_wait_redis_field(&f, tkey, "worker", "w1", 10000));
  wait_compiling(&f, "w1", tkey);
  ck_assert_int_eq(farm_proxy_hold(&f), 1);
  json_t *st = farm_wait_job(&f, job, "done", 40000, NULL);
  ck_assert_msg(!strcmp(json_string_value(json_object_get(st, "state")), "done"), "%s",
                json_dumps(st, 0));
  char *attempts = farm_redis_hget(&f, tkey, "attempts");
  ck_assert_str_eq(attempts, "1");
  ck_assert_int_eq(farm_count_compiles(&f, "x86"), 1);
  /* The first RESULT was lost: a copy made it, and was acknowledged. */
  ck_assert(farm_worker_log_contains(&f, "w1", "the scheduler acknowledged its RESULT, sent "));
  ck_assert_int_ge(farm_worker_metric(&f, "w1", "nimble_worker_outcomes_resent_total"), 1);
  ck_assert_int_eq(farm_worker_metric(&f, "w1", "nimble_worker_outcomes_unacknowledged_total"), 0);
  free(attempts);
  json_decref(st);
  free(job);
  farm_stop(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("farm_restarts");
  TCase *tc = tcase_create("restarts");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_scheduler_killed_mid_job_and_restarted_completes_the_job);
  tcase_add_test(tc, test_redis_restarted_with_aof_loses_no_job);
  tcase_add_test(tc, test_worker_connection_gone_silent_loses_no_result);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
