/* Who may use the farm, and what the scheduler says to malformed or
 * misdirected messages: client bearer tokens, CurveZMQ with an allow-list
 * of worker keys, and protocol errors answered with the right code. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "farm_harness.h"
#include "nimble_test.h"

static void expect_error(farm *f, nimble_msg_type_t type, json_t *body, const char *token,
                         const char *code, const char *fragment) {
  nimble_msg_type_t got;
  json_t *reply;
  ck_assert_int_eq(farm_request(f, type, body, token, &got, &reply), 0);
  ck_assert_int_eq(got, NIMBLE_MSG_ERROR);
  ck_assert_str_eq(json_string_value(json_object_get(reply, "code")), code);
  const char *msg = json_string_value(json_object_get(reply, "message"));
  ck_assert_msg(strstr(msg, fragment) != NULL, "message '%s' lacks '%s'", msg, fragment);
  json_decref(reply);
}

static json_t *submit_body(const char *model, const char *target) {
  return json_pack("{s:s,s:s,s:s,s:[s]}", "model", model, "format", "onnx", "name", "team/sec",
                   "targets", target);
}

START_TEST(test_client_with_a_wrong_token_is_unauthenticated) {
  farm_config cfg = {.token = "# client tokens\n  good-token  \n"};
  farm f;
  farm_start(&f, &cfg);
  char model[72];
  farm_push_model(&f, "model Q\n", model);
  expect_error(&f, NIMBLE_MSG_SUBMIT, submit_body(model, "x86"), "bad-token", "UNAUTHENTICATED",
               "not valid");
  expect_error(&f, NIMBLE_MSG_SUBMIT, submit_body(model, "x86"), NULL, "UNAUTHENTICATED",
               "needs a bearer token");
  expect_error(&f, NIMBLE_MSG_STATUS, json_pack("{s:s}", "job", "j-1"), "good-tokenX",
               "UNAUTHENTICATED", "not valid");
  /* Nothing was recorded for the refused requests. */
  redisReply *r = redisCommand(f.redis, "EXISTS nimble:job:j-1");
  ck_assert_int_eq(r->integer, 0);
  freeReplyObject(r);
  farm_start_worker(&f, "w1", "x86", NULL);
  const char *targets[] = {"x86", NULL};
  json_t *acc = farm_submit(&f, model, "team/sec", targets, "good-token");
  const char *job = json_string_value(json_object_get(acc, "job"));
  json_t *st = farm_wait_job(&f, job, "done", 20000, "good-token");
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  json_decref(st);
  json_decref(acc);
  farm_stop(&f);
}
END_TEST

START_TEST(test_worker_with_a_key_not_in_the_allow_list_cannot_connect) {
  char sched_pub[41], sched_sec[41], good_pub[41], good_sec[41], bad_pub[41], bad_sec[41];
  ck_assert_int_eq(zmq_curve_keypair(sched_pub, sched_sec), 0);
  ck_assert_int_eq(zmq_curve_keypair(good_pub, good_sec), 0);
  ck_assert_int_eq(zmq_curve_keypair(bad_pub, bad_sec), 0);
  char keys[128];
  snprintf(keys, sizeof keys, "# allowed workers\n%s\n", good_pub);
  farm_config cfg = {.curve_secret = sched_sec, .worker_keys = keys};
  farm f;
  farm_start(&f, &cfg);
  char path[3][400];
  const char *texts[3] = {sched_pub, good_sec, bad_sec};
  const char *names[3] = {"sched.public", "good.secret", "bad.secret"};
  for (int i = 0; i < 3; i++) {
    snprintf(path[i], sizeof path[i], "%s/%s", f.dir, names[i]);
    FILE *fp = fopen(path[i], "w");
    fprintf(fp, "%s\n", texts[i]);
    fclose(fp);
  }
  const char *bad[] = {"--curve-secret", path[2], "--scheduler-key", path[0], NULL};
  farm_start_worker(&f, "intruder", "x86", bad);
  farm_start_worker(&f, "plain", "x86", NULL); /* no CURVE at all */
  char model[72];
  farm_push_model(&f, "model R\n", model);
  const char *targets[] = {"x86", NULL};
  json_t *acc = farm_submit(&f, model, "team/sec", targets, NULL);
  char job[64];
  snprintf(job, sizeof job, "%s", json_string_value(json_object_get(acc, "job")));
  json_decref(acc);
  farm_sleep_ms(2000);
  json_t *st = farm_wait_job(&f, job, "done", 100, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "queued");
  json_decref(st);
  char expect[128];
  snprintf(expect, sizeof expect, "ZAP: refused worker key %s", bad_pub);
  ck_assert_msg(farm_sched_log_contains(&f, expect), "no '%s' in the scheduler log", expect);
  ck_assert(!farm_sched_log_contains(&f, "worker intruder ready"));
  ck_assert(!farm_sched_log_contains(&f, "worker plain ready"));
  const char *good[] = {"--curve-secret", path[1], "--scheduler-key", path[0], NULL};
  farm_start_worker(&f, "trusted", "x86", good);
  st = farm_wait_job(&f, job, "done", 20000, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "done");
  ck_assert(farm_sched_log_contains(&f, "task j-1.x86 (x86) -> worker trusted"));
  json_decref(st);
  farm_stop(&f);
}
END_TEST

START_TEST(test_malformed_and_misdirected_requests_get_errors_with_the_right_code) {
  farm f;
  farm_start(&f, NULL);
  /* Raw frames first: not JSON, another protocol version. */
  const char *frames[] = {"{not json", "{\"body\":{},\"type\":\"STATUS\",\"v\":2}"};
  const char *codes[] = {"INVALID_ARGUMENT", "UNIMPLEMENTED"};
  for (int i = 0; i < 2; i++) {
    ck_assert(zmq_send(f.client, frames[i], strlen(frames[i]), 0) >= 0);
    zmq_msg_t m;
    zmq_msg_init(&m);
    ck_assert(zmq_msg_recv(&m, f.client, 0) >= 0);
    nimble_msg_type_t type;
    json_t *body;
    NIMBLE_ASSERT_OK(nimble_message_decode(zmq_msg_data(&m), zmq_msg_size(&m), &type, &body));
    zmq_msg_close(&m);
    ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
    ck_assert_str_eq(json_string_value(json_object_get(body, "code")), codes[i]);
    json_decref(body);
  }
  char model[72];
  farm_push_model(&f, "model S\n", model);
  expect_error(&f, NIMBLE_MSG_READY,
               json_pack("{s:s,s:[s],s:s}", "worker", "w", "targets", "x86", "compiler_version", "0.1.0"),
               NULL, "INVALID_ARGUMENT", "READY is not a client request");
  expect_error(&f, NIMBLE_MSG_STATUS, json_pack("{s:s}", "job", "j-77"), NULL, "NOT_FOUND",
               "job 'j-77' is not known");
  farm_stop(&f);
}
END_TEST

START_TEST(test_worker_with_another_compiler_version_is_refused) {
  farm f;
  farm_start(&f, NULL);
  const char *extra[] = {"--compiler-version", "9.9.9", NULL};
  farm_start_worker(&f, "old", "x86", extra);
  for (int i = 0; i < 100 && !farm_sched_log_contains(&f, "worker old refused"); i++) farm_sleep_ms(50);
  ck_assert(farm_sched_log_contains(&f, "worker old refused: compiler 9.9.9, this farm runs " NIMBLE_VERSION_STRING));
  farm_stop(&f);
}
END_TEST

/* Sends one frame on sock and reads the ERROR it must get back. */
static void expect_raw_error(void *sock, const char *frame, const char *code, const char *fragment) {
  ck_assert(zmq_send(sock, frame, strlen(frame), 0) >= 0);
  zmq_msg_t m;
  zmq_msg_init(&m);
  ck_assert_msg(zmq_msg_recv(&m, sock, 0) >= 0, "no answer to %s", frame);
  nimble_msg_type_t type;
  json_t *body;
  NIMBLE_ASSERT_OK(nimble_message_decode(zmq_msg_data(&m), zmq_msg_size(&m), &type, &body));
  zmq_msg_close(&m);
  ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
  ck_assert_str_eq(json_string_value(json_object_get(body, "code")), code);
  const char *msg = json_string_value(json_object_get(body, "message"));
  ck_assert_msg(strstr(msg, fragment) != NULL, "'%s' lacks '%s'", msg, fragment);
  json_decref(body);
}

START_TEST(test_worker_socket_answers_bad_frames_and_ignores_unknown_tasks) {
  farm f;
  farm_start(&f, NULL);
  void *w = zmq_socket(f.zctx, ZMQ_DEALER);
  int zero = 0, timeout = 5000;
  zmq_setsockopt(w, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(w, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
  ck_assert_int_eq(zmq_connect(w, f.workers_ep), 0);
  expect_raw_error(w, "garbage", "INVALID_ARGUMENT", "");
  expect_raw_error(w, "{\"body\":{\"job\":\"j-1\"},\"type\":\"STATUS\",\"v\":1}", "INVALID_ARGUMENT",
                   "STATUS is not a worker message");
  expect_raw_error(w, "{\"body\":{\"worker\":\"raw\"},\"type\":\"HEARTBEAT\",\"v\":1}",
                   "FAILED_PRECONDITION", "worker 'raw' is not registered; send READY");
  expect_raw_error(w, "{\"body\":{\"percent\":101,\"phase\":\"x\",\"task\":\"t\"},\"type\":\"PROGRESS\",\"v\":1}",
                   "INVALID_ARGUMENT", "percent");
  /* Results and progress for tasks nobody knows change nothing. */
  const char *unknown[] = {
      "{\"body\":{\"manifest\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\","
      "\"task\":\"j-404.x86\"},\"type\":\"RESULT\",\"v\":1}",
      "{\"body\":{\"error\":\"boom\",\"task\":\"j-404.x86\"},\"type\":\"FAILURE\",\"v\":1}",
      "{\"body\":{\"percent\":5,\"phase\":\"import\",\"task\":\"j-404.x86\"},\"type\":\"PROGRESS\",\"v\":1}"};
  for (int i = 0; i < 3; i++) ck_assert(zmq_send(w, unknown[i], strlen(unknown[i]), 0) >= 0);
  /* The RESULT is acknowledged all the same: a worker sending it again
   * (docs/protocol.md, ACK) may forget a task that is gone. */
  {
    zmq_msg_t a;
    zmq_msg_init(&a);
    ck_assert_msg(zmq_msg_recv(&a, w, 0) >= 0, "no ACK for a RESULT of an unknown task");
    nimble_msg_type_t at;
    json_t *ab;
    NIMBLE_ASSERT_OK(nimble_message_decode(zmq_msg_data(&a), zmq_msg_size(&a), &at, &ab));
    zmq_msg_close(&a);
    ck_assert_int_eq(at, NIMBLE_MSG_ACK);
    ck_assert_str_eq(json_string_value(json_object_get(ab, "task")), "j-404.x86");
    json_decref(ab);
  }
  const char *ready = "{\"body\":{\"compiler_version\":\"" NIMBLE_VERSION_STRING
                      "\",\"targets\":[\"x86\"],\"worker\":\"raw\"},\"type\":\"READY\",\"v\":1}";
  ck_assert(zmq_send(w, ready, strlen(ready), 0) >= 0);
  for (int i = 0; i < 100 && !farm_sched_log_contains(&f, "worker raw ready"); i++) farm_sleep_ms(50);
  ck_assert(farm_sched_log_contains(&f, "worker raw ready for 1 target(s)"));
  redisReply *r = redisCommand(f.redis, "EXISTS nimble:task:j-404.x86");
  ck_assert_int_eq(r->integer, 0);
  freeReplyObject(r);
  /* Registered now: a job goes to this raw worker as a TASK. */
  char model[72];
  farm_push_model(&f, "model U\n", model);
  const char *targets[] = {"x86", NULL};
  json_decref(farm_submit(&f, model, "team/raw", targets, NULL));
  zmq_msg_t m;
  zmq_msg_init(&m);
  ck_assert(zmq_msg_recv(&m, w, 0) >= 0);
  nimble_msg_type_t type;
  json_t *body;
  NIMBLE_ASSERT_OK(nimble_message_decode(zmq_msg_data(&m), zmq_msg_size(&m), &type, &body));
  zmq_msg_close(&m);
  ck_assert_int_eq(type, NIMBLE_MSG_TASK);
  ck_assert_str_eq(json_string_value(json_object_get(body, "model")), model);
  ck_assert_str_eq(json_string_value(json_object_get(body, "target")), "x86");
  ck_assert_int_eq(json_integer_value(json_object_get(body, "lease_ms")), 2000);
  ck_assert_int_eq(json_integer_value(json_object_get(body, "attempt")), 1);
  json_decref(body);
  zmq_close(w);
  farm_stop(&f);
}
END_TEST

/* Runs a shell command line; returns its exit code and its output. */
static int run_capture(const char *cmd, char *out, size_t cap) {
  char line[2048];
  snprintf(line, sizeof line, "%s 2>&1", cmd);
  FILE *p = popen(line, "r");
  ck_assert(p != NULL);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(test_programs_stop_cleanly_on_sigterm_and_refuse_bad_command_lines) {
  farm f;
  farm_start(&f, NULL);
  int status = farm_stop_scheduler(&f, SIGTERM);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "scheduler status 0x%x", status);
  const char *build = getenv("NIMBLE_BUILD_DIR");
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "%s/scheduler/nimble-scheduler --help", build);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 0);
  ck_assert(strstr(out, "--worker-keys F") != NULL);
  snprintf(cmd, sizeof cmd, "%s/scheduler/nimble-scheduler --clients tcp://127.0.0.1:*", build);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 2);
  ck_assert(strstr(out, "--redis and --store are required") != NULL);
  snprintf(cmd, sizeof cmd,
           "%s/scheduler/nimble-scheduler --clients tcp://127.0.0.1:* --workers tcp://127.0.0.1:* "
           "--events tcp://127.0.0.1:* --redis localhost --store %s",
           build, f.store_url);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 2);
  ck_assert_msg(strstr(out, "--redis 'localhost': expected HOST:PORT") != NULL, "%s", out);
  /* A token file without a token is refused at start-up. */
  snprintf(cmd, sizeof cmd, "printf '# nothing\\n' > %s/empty-tokens && %s/scheduler/nimble-scheduler "
           "--clients tcp://127.0.0.1:* --workers tcp://127.0.0.1:* --events tcp://127.0.0.1:* "
           "--redis %s:%d --store %s --token-file %s/empty-tokens",
           f.dir, build, f.redis_host, f.redis_port, f.store_url, f.dir);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "empty-tokens' holds no token") != NULL, "%s", out);
  snprintf(cmd, sizeof cmd, "%s/compile-workers/worker/nimble-worker --scheduler tcp://127.0.0.1:1 "
           "--store %s --targets x86,x87 --compiler /bin/true", build, f.store_url);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "--targets") && strstr(out, "'x87'"), "%s", out);
  snprintf(cmd, sizeof cmd, "%s/compile-workers/worker/nimble-worker --scheduler tcp://127.0.0.1:1 "
           "--store %s --targets x86 --compiler %s/no-such-compiler", build, f.store_url, f.dir);
  ck_assert_int_eq(run_capture(cmd, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "no-such-compiler") != NULL, "%s", out);
  farm_stop(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("farm_security");
  TCase *tc = tcase_create("security");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_client_with_a_wrong_token_is_unauthenticated);
  tcase_add_test(tc, test_worker_with_a_key_not_in_the_allow_list_cannot_connect);
  tcase_add_test(tc, test_malformed_and_misdirected_requests_get_errors_with_the_right_code);
  tcase_add_test(tc, test_worker_with_another_compiler_version_is_refused);
  tcase_add_test(tc, test_programs_stop_cleanly_on_sigterm_and_refuse_bad_command_lines);
  tcase_add_test(tc, test_worker_socket_answers_bad_frames_and_ignores_unknown_tasks);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
