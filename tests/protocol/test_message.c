/* Wire messages: the envelope, every body schema, error paths, fuzzing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#include "nimble/message.h"

#define SHA_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Hand-written canonical frame of a SUBMIT. */
static const char kSubmitFrame[] =
    "{\"body\":{\"format\":\"onnx\",\"model\":\"" SHA_ABC "\",\"name\":\"team/bert\","
    "\"options\":{\"opt_level\":3},\"targets\":[\"x86\",\"cuda:arch=sm_90\"]},"
    "\"type\":\"SUBMIT\",\"v\":1}";

START_TEST(test_submit_encodes_to_the_hand_written_frame) {
  json_t *body = json_pack("{s:s, s:s, s:s, s:[s,s], s:{s:i}}", "name", "team/bert", "model",
                           SHA_ABC, "format", "onnx", "targets", "x86", "cuda:arch=sm_90",
                           "options", "opt_level", 3);
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_message_encode(NIMBLE_MSG_SUBMIT, body, &out, &n));
  ck_assert_str_eq(out, kSubmitFrame);
  ck_assert_uint_eq(n, strlen(kSubmitFrame));
  free(out);
  json_decref(body);
}
END_TEST

START_TEST(test_decoding_gives_type_and_body_and_re_encodes_identically) {
  nimble_msg_type_t type;
  json_t *body;
  NIMBLE_ASSERT_OK(nimble_message_decode(kSubmitFrame, strlen(kSubmitFrame), &type, &body));
  ck_assert_int_eq(type, NIMBLE_MSG_SUBMIT);
  ck_assert_str_eq(json_string_value(json_object_get(body, "name")), "team/bert");
  ck_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "targets"), 1)),
                   "cuda:arch=sm_90");
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_message_encode(type, body, &out, &n));
  ck_assert_str_eq(out, kSubmitFrame);
  free(out);
  json_decref(body);
}
END_TEST

/* One valid body per type, and the members each requires (written from
 * docs/protocol.md, independently of the schema tables in message.c). */
typedef struct example {
  nimble_msg_type_t type;
  const char *name;
  const char *body;
  const char *required[10];
} example;

static const example kExamples[] = {
    {NIMBLE_MSG_SUBMIT, "SUBMIT",
     "{\"model\":\"" SHA_ABC "\",\"format\":\"nir\",\"name\":\"tree-lstm\",\"targets\":[\"aarch64\"]}",
     {"model", "format", "name", "targets"}},
    {NIMBLE_MSG_STATUS, "STATUS", "{\"job\":\"job-42\"}", {"job"}},
    {NIMBLE_MSG_CANCEL, "CANCEL", "{\"task\":\"job-42:x86\"}", {NULL}},
    {NIMBLE_MSG_READY, "READY",
     "{\"worker\":\"w1\",\"targets\":[\"x86\",\"cuda\"],\"compiler_version\":\"0.1.0\","
     "\"compiler_build\":\"" SHA_EMPTY "\",\"slots\":2}",
     {"worker", "targets", "compiler_version"}},
    {NIMBLE_MSG_HEARTBEAT, "HEARTBEAT", "{\"worker\":\"w1\",\"task\":\"t-1\"}", {"worker"}},
    {NIMBLE_MSG_PROGRESS, "PROGRESS",
     "{\"task\":\"t-1\",\"phase\":\"codegen\",\"percent\":40,\"job\":\"j\",\"target\":\"cuda\"}",
     {"task", "phase", "percent"}},
    {NIMBLE_MSG_RESULT, "RESULT",
     "{\"task\":\"t-1\",\"manifest\":\"" SHA_ABC "\",\"key\":\"" SHA_EMPTY "\"}",
     {"task", "manifest"}},
    {NIMBLE_MSG_FAILURE, "FAILURE",
     "{\"task\":\"t-1\",\"error\":\"node 'lstm_0' (LSTM): unsupported\",\"code\":\"UNIMPLEMENTED\","
     "\"retryable\":false}",
     {"task", "error"}},
    {NIMBLE_MSG_ACCEPTED, "ACCEPTED", "{\"job\":\"j-1\",\"cached\":true}", {"job"}},
    {NIMBLE_MSG_JOB_STATUS, "JOB_STATUS",
     "{\"job\":\"j-1\",\"state\":\"running\",\"tasks\":["
     "{\"target\":\"x86\",\"state\":\"done\",\"manifest\":\"" SHA_ABC "\",\"cached\":true},"
     "{\"target\":\"cuda\",\"state\":\"running\",\"phase\":\"lower\",\"percent\":10},"
     "{\"target\":\"aarch64\",\"state\":\"failed\",\"error\":\"worker died 3 times\"}]}",
     {"job", "state", "tasks"}},
    {NIMBLE_MSG_TASK, "TASK",
     "{\"task\":\"t-1\",\"job\":\"j-1\",\"model\":\"" SHA_ABC "\",\"format\":\"onnx\","
     "\"name\":\"team/bert\",\"target\":\"x86:cpu=znver4\",\"key\":\"" SHA_EMPTY "\","
     "\"lease_ms\":30000,\"options\":{\"tune\":true},\"attempt\":2}",
     {"task", "job", "model", "format", "name", "target", "key", "lease_ms"}},
    {NIMBLE_MSG_ERROR, "ERROR",
     "{\"code\":\"NOT_FOUND\",\"message\":\"job 'j-9' is not known\",\"job\":\"j-9\"}",
     {"code", "message"}},
    {NIMBLE_MSG_PROFILE, "PROFILE",
     "{\"name\":\"team/mlp\",\"target\":\"x86\",\"inputs\":{\"x\":[4,784]},\"runs\":20}",
     {"name", "target", "inputs"}},
    {NIMBLE_MSG_PROFILE_TASK, "PROFILE_TASK",
     "{\"task\":\"j-2.x86\",\"job\":\"j-2\",\"name\":\"team/mlp\",\"target\":\"x86\","
     "\"inputs\":{\"x\":[4,784]},\"runs\":20,\"lease_ms\":30000,\"manifest\":\"" SHA_ABC "\"}",
     {"task", "job", "name", "target", "inputs", "runs", "lease_ms"}},
    {NIMBLE_MSG_PROFILE_RESULT, "PROFILE_RESULT",
     "{\"task\":\"j-2.x86\",\"manifest\":\"" SHA_ABC "\",\"report\":{\"runs\":20,"
     "\"median_ns\":41000,\"min_ns\":39000,\"max_ns\":90000,\"peak_bytes\":16384,"
     "\"kernels\":[{\"symbol\":\"fused_dense_relu\",\"calls\":20,\"total_ns\":500000}]}}",
     {"task", "manifest", "report"}},
    {NIMBLE_MSG_TUNE_RECORDS_LIST, "TUNE_RECORDS_LIST", "{\"target\":\"aarch64\",\"offset\":2048}", {NULL}},
    {NIMBLE_MSG_TUNE_RECORDS_IMPORT, "TUNE_RECORDS_IMPORT",
     "{\"records\":[\"{\\\"target\\\":\\\"x86\\\"}\"],\"first\":0}", {"records"}},
    {NIMBLE_MSG_TUNE_RECORDS, "TUNE_RECORDS",
     "{\"records\":[\"{}\"],\"offset\":2048,\"next\":2049,\"total\":2049}",
     {"records", "offset", "next", "total"}},
    {NIMBLE_MSG_TUNE_RECORDS_IMPORTED, "TUNE_RECORDS_IMPORTED", "{\"imported\":2}", {"imported"}},
    {NIMBLE_MSG_ACK, "ACK", "{\"task\":\"j-2.x86\"}", {"task"}},
};
#define EXAMPLE_COUNT (sizeof(kExamples) / sizeof(kExamples[0]))

static json_t *load(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  ck_assert_msg(j != NULL, "bad test JSON: %s: %s", text, err.text);
  return j;
}

START_TEST(test_every_type_has_a_name_and_its_example_round_trips) {
  ck_assert_int_eq(EXAMPLE_COUNT, NIMBLE_MSG_TYPE_COUNT_);
  for (size_t i = 0; i < EXAMPLE_COUNT; i++) {
    const example *ex = &kExamples[i];
    nimble_msg_type_t parsed;
    ck_assert_str_eq(nimble_message_type_name(ex->type), ex->name);
    NIMBLE_ASSERT_OK(nimble_message_type_parse(ex->name, &parsed));
    ck_assert_int_eq(parsed, ex->type);
    json_t *body = load(ex->body);
    char *out;
    size_t n;
    NIMBLE_ASSERT_OK(nimble_message_encode(ex->type, body, &out, &n));
    nimble_msg_type_t type;
    json_t *back;
    NIMBLE_ASSERT_OK(nimble_message_decode(out, n, &type, &back));
    ck_assert_int_eq(type, ex->type);
    ck_assert(json_equal(back, body));
    json_decref(back);
    json_decref(body);
    free(out);
  }
  ck_assert_str_eq(nimble_message_type_name((nimble_msg_type_t)99), "UNKNOWN");
}
END_TEST

START_TEST(test_a_missing_required_member_is_named) {
  for (size_t i = 0; i < EXAMPLE_COUNT; i++) {
    const example *ex = &kExamples[i];
    for (size_t r = 0; ex->required[r]; r++) {
      json_t *body = load(ex->body);
      ck_assert_int_eq(json_object_del(body, ex->required[r]), 0);
      char want[64];
      snprintf(want, sizeof(want), "body.%s: missing", ex->required[r]);
      nimble_status_t s = nimble_message_validate_body(ex->type, body);
      ck_assert_msg(s != NULL, "%s without %s was accepted", ex->name, ex->required[r]);
      ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "%s: '%s' lacks '%s'",
                    ex->name, nimble_status_message(s), want);
      nimble_status_free(s);
      json_decref(body);
    }
  }
}
END_TEST

/* Validates example `type`'s body with member `key` set to JSON `value`. */
static nimble_status_t with_member(nimble_msg_type_t type, const char *key, const char *value) {
  json_t *body = load(kExamples[type].body);
  json_error_t err;
  json_t *v = json_loads(value, JSON_DECODE_ANY, &err);
  ck_assert_msg(v != NULL, "bad test value %s", value);
  json_object_set_new(body, key, v);
  nimble_status_t s = nimble_message_validate_body(type, body);
  json_decref(body);
  return s;
}

START_TEST(test_member_values_are_checked) {
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "[]"), NIMBLE_INVALID_ARGUMENT,
                      "body.targets: needs at least 1 item, got 0");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "[\"x86\",\"x86\"]"),
                      NIMBLE_INVALID_ARGUMENT, "body.targets[1]: 'x86' repeats body.targets[0]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "[\"x86:cpu=x86-64-v3\"]"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.targets[0]: 'x86:cpu=x86-64-v3' is not canonical (write 'x86')");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "[\"tpu\"]"),
                      NIMBLE_INVALID_ARGUMENT, "body.targets[0]: target 'tpu': unknown target");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "[1]"), NIMBLE_INVALID_ARGUMENT,
                      "body.targets[0]: expected a string, got an integer");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "targets", "\"x86\""),
                      NIMBLE_INVALID_ARGUMENT, "body.targets: expected an array, got a string");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "format", "\"tflite\""),
                      NIMBLE_INVALID_ARGUMENT, "body.format: unknown model format 'tflite'");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "name", "\"Team/Bert\""),
                      NIMBLE_INVALID_ARGUMENT, "body.name: 'Team/Bert' is not a repository name");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "name", "\"team//bert\""),
                      NIMBLE_INVALID_ARGUMENT, "is not a repository name");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "name", "\"bert-\""),
                      NIMBLE_INVALID_ARGUMENT, "is not a repository name");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "name", "\"a___b\""),
                      NIMBLE_INVALID_ARGUMENT, "is not a repository name");
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_SUBMIT, "name", "\"my-org/models/bert_base.v2__x--y\""));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "model", "\"sha256:abc\""),
                      NIMBLE_INVALID_ARGUMENT, "body.model: digest: sha256 needs 64 hex digits");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "options", "{\"lr\":0.1}"),
                      NIMBLE_INVALID_ARGUMENT, "body.options.lr: expected a string, integer or boolean");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "options", "[]"), NIMBLE_INVALID_ARGUMENT,
                      "body.options: expected an object, got an array");
  /* A verified build asks for 1 to 16 workers. */
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_SUBMIT, "verify", "2"));
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_SUBMIT, "verify", "16"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "verify", "0"), NIMBLE_INVALID_ARGUMENT,
                      "body.verify: 0 is outside [1, 16]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "verify", "17"), NIMBLE_INVALID_ARGUMENT,
                      "body.verify: 17 is outside [1, 16]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_SUBMIT, "verify", "\"2\""), NIMBLE_INVALID_ARGUMENT,
                      "body.verify: expected an integer, got a string");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_STATUS, "job", "\"job 42\""), NIMBLE_INVALID_ARGUMENT,
                      "body.job: 'job 42' is not an id");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_STATUS, "job", "\"\""), NIMBLE_INVALID_ARGUMENT,
                      "body.job: empty string");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_READY, "slots", "0"), NIMBLE_INVALID_ARGUMENT,
                      "body.slots: 0 is outside [1, 1024]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_READY, "compiler_build", "\"latest\""),
                      NIMBLE_INVALID_ARGUMENT, "body.compiler_build: digest 'latest': expected");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "percent", "101"), NIMBLE_INVALID_ARGUMENT,
                      "body.percent: 101 is outside [0, 100]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "percent", "-1"), NIMBLE_INVALID_ARGUMENT,
                      "body.percent: -1 is negative");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "percent", "50.5"), NIMBLE_INVALID_ARGUMENT,
                      "body.percent: expected an integer, got a real number");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "phase", "\"Code Gen\""),
                      NIMBLE_INVALID_ARGUMENT, "body.phase: 'Code Gen' is not a word");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "target", "\"cuda:arch=sm_80\""),
                      NIMBLE_INVALID_ARGUMENT, "body.target: 'cuda:arch=sm_80' is not canonical");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_FAILURE, "code", "\"OOPS\""), NIMBLE_INVALID_ARGUMENT,
                      "body.code: 'OOPS' is not a status code name");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_FAILURE, "code", "\"OK\""), NIMBLE_INVALID_ARGUMENT,
                      "is not a status code name");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_FAILURE, "retryable", "1"), NIMBLE_INVALID_ARGUMENT,
                      "body.retryable: expected a boolean, got an integer");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TASK, "lease_ms", "0"), NIMBLE_INVALID_ARGUMENT,
                      "body.lease_ms: 0 is outside [1, 86400000]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_JOB_STATUS, "state", "\"paused\""),
                      NIMBLE_INVALID_ARGUMENT, "body.state: unknown state 'paused'");
  /* Members a type does not define are ignored, unless they hold reals. */
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_STATUS, "verbose", "true"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_STATUS, "extra", "[1,{\"a\":2.5}]"),
                      NIMBLE_INVALID_ARGUMENT, "body.extra[1].a: real numbers are not allowed");
}
END_TEST

START_TEST(test_cross_member_rules_are_checked) {
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_CANCEL, "job", "\"j-1\""), NIMBLE_INVALID_ARGUMENT,
                      "CANCEL names exactly one of 'job' or 'task' (got both)");
  json_t *empty = json_object();
  NIMBLE_ASSERT_ERROR(nimble_message_validate_body(NIMBLE_MSG_CANCEL, empty),
                      NIMBLE_INVALID_ARGUMENT, "(got neither)");
  json_decref(empty);
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_JOB_STATUS, "tasks",
                                  "[{\"target\":\"x86\",\"state\":\"done\"}]"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.tasks[0].manifest: missing (required when state is done)");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_JOB_STATUS, "tasks",
                                  "[{\"target\":\"x86\",\"state\":\"queued\"},"
                                  "{\"target\":\"cuda\",\"state\":\"failed\"}]"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.tasks[1].error: missing (required when state is failed)");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_JOB_STATUS, "tasks", "[{\"state\":\"queued\"}]"),
                      NIMBLE_INVALID_ARGUMENT, "body.tasks[0].target: missing");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_JOB_STATUS, "tasks", "[\"x86\"]"),
                      NIMBLE_INVALID_ARGUMENT, "body.tasks[0]: expected an object, got a string");
  NIMBLE_ASSERT_ERROR(nimble_message_validate_body(NIMBLE_MSG_STATUS, NULL),
                      NIMBLE_INVALID_ARGUMENT, "body: expected an object, got nothing");
  NIMBLE_ASSERT_ERROR(nimble_message_validate_body((nimble_msg_type_t)77, NULL),
                      NIMBLE_INVALID_ARGUMENT, "message type 77 is unknown");
}
END_TEST

START_TEST(test_profile_inputs_and_reports_are_checked) {
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROFILE, "inputs", "{}"), NIMBLE_INVALID_ARGUMENT,
                      "body.inputs: 1 to 64 inputs, got 0");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROFILE, "inputs", "{\"x\":[4,-1]}"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.inputs.x[1]: expected a dimension, an integer in [0, 2147483647]");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROFILE, "inputs", "{\"x\":\"4x784\"}"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.inputs.x: expected an array of at most 32 dimensions, got a string");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROFILE, "runs", "0"), NIMBLE_INVALID_ARGUMENT,
                      "body.runs");
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_PROFILE, "inputs", "{\"scalar\":[]}"));
  const nimble_msg_type_t R = NIMBLE_MSG_PROFILE_RESULT;
  NIMBLE_ASSERT_ERROR(
      with_member(R, "report",
                  "{\"runs\":3,\"median_ns\":5,\"min_ns\":6,\"max_ns\":9,\"peak_bytes\":0,"
                  "\"kernels\":[]}"),
      NIMBLE_INVALID_ARGUMENT, "body.report: min_ns <= median_ns <= max_ns does not hold (6, 5, 9)");
  NIMBLE_ASSERT_ERROR(
      with_member(R, "report",
                  "{\"runs\":3,\"median_ns\":5,\"min_ns\":4,\"max_ns\":9,\"peak_bytes\":0,"
                  "\"kernels\":[{\"symbol\":\"k\",\"total_ns\":1}]}"),
      NIMBLE_INVALID_ARGUMENT, "body.report.kernels[0].calls: missing");
  NIMBLE_ASSERT_ERROR(
      with_member(R, "report",
                  "{\"runs\":3,\"median_ns\":5,\"min_ns\":4,\"max_ns\":9,\"kernels\":[]}"),
      NIMBLE_INVALID_ARGUMENT, "body.report.peak_bytes: missing");
  NIMBLE_ASSERT_ERROR(
      with_member(R, "report",
                  "{\"runs\":3,\"median_ns\":5.5,\"min_ns\":4,\"max_ns\":9,\"peak_bytes\":0,"
                  "\"kernels\":[]}"),
      NIMBLE_INVALID_ARGUMENT, "body.report.median_ns");
  /* A finished profile task carries its report in JOB_STATUS. */
  NIMBLE_ASSERT_OK(with_member(
      NIMBLE_MSG_JOB_STATUS, "tasks",
      "[{\"target\":\"x86\",\"state\":\"done\",\"manifest\":\"" SHA_ABC "\","
      "\"profile\":{\"runs\":1,\"median_ns\":5,\"min_ns\":5,\"max_ns\":5,\"peak_bytes\":64,"
      "\"kernels\":[]}}]"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_READY, "can_run", "[\"x86\",\"x86\"]"),
                      NIMBLE_INVALID_ARGUMENT, "body.can_run[1]: 'x86' repeats body.can_run[0]");
}
END_TEST

#define KEY64 "8be6753dd152d5778de77b75ee53e15b477a41c617a0b28a9f5427d980305229"

/* The farm's kernel cache (docs/farm.md): entries, sequences, counts. */
START_TEST(test_kernel_cache_members_are_checked) {
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TASK, "kcache",
                               "[{\"key\":\"" KEY64 "\",\"digest\":\"" SHA_ABC "\"}]"));
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TASK, "kcache", "[]"));
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TASK, "kernel_cache", "false"));
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TASK, "kcache_seq", "0"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TASK, "kcache_seq", "-1"), NIMBLE_INVALID_ARGUMENT,
                      "body.kcache_seq");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TASK, "kcache", "[{\"key\":\"ABC\",\"digest\":\"" SHA_ABC "\"}]"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.kcache[0].key: 'ABC' is not a kernel cache key (64 lowercase hex digits)");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_RESULT, "kcache", "[{\"key\":\"" KEY64 "\"}]"),
                      NIMBLE_INVALID_ARGUMENT, "body.kcache[0].digest: missing");
  NIMBLE_ASSERT_ERROR(
      with_member(NIMBLE_MSG_RESULT, "kcache",
                  "[{\"key\":\"" KEY64 "\",\"digest\":\"" SHA_ABC "\"},"
                  "{\"key\":\"" KEY64 "\",\"digest\":\"" SHA_ABC "\"}]"),
      NIMBLE_INVALID_ARGUMENT, "repeats body.kcache[0]");
  /* At most 256 entries on a TASK. */
  json_t *many = json_array();
  for (int i = 0; i < 257; i++) {
    char key[65];
    snprintf(key, sizeof key, "%064x", i);
    json_array_append_new(many, json_pack("{s:s,s:s}", "key", key, "digest", SHA_ABC));
  }
  char *text = json_dumps(many, JSON_COMPACT);
  json_decref(many);
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TASK, "kcache", text), NIMBLE_INVALID_ARGUMENT, "body.kcache");
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_RESULT, "kcache", text));
  free(text);
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_READY, "kcache", "{\"x86\":12,\"aarch64\":0}"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_READY, "kcache", "{\"x86:cpu=x86-64-v3\":1}"),
                      NIMBLE_INVALID_ARGUMENT, "body.kcache.x86:cpu=x86-64-v3");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_READY, "kcache", "{\"x86\":-3}"), NIMBLE_INVALID_ARGUMENT,
                      "body.kcache.x86: expected an integer >= 0");
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_PROGRESS, "kernels",
                               "{\"done\":4,\"total\":6,\"cached\":4,\"fetched\":6}"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "kernels", "{\"done\":7,\"total\":6,\"cached\":4}"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.kernels: cached <= done <= total does not hold (4, 7, 6)");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_PROGRESS, "kernels", "{\"done\":1,\"total\":6}"),
                      NIMBLE_INVALID_ARGUMENT, "body.kernels.cached: missing");
  NIMBLE_ASSERT_OK(with_member(
      NIMBLE_MSG_JOB_STATUS, "tasks",
      "[{\"target\":\"x86\",\"state\":\"running\",\"kernels\":{\"done\":0,\"total\":0,\"cached\":0}}]"));
}
END_TEST

static nimble_status_t decode_text(const char *text) {
  nimble_msg_type_t type;
  json_t *body = NULL;
  nimble_status_t s = nimble_message_decode(text, strlen(text), &type, &body);
  if (!s) json_decref(body);
  return s;
}

START_TEST(test_envelope_errors_give_the_reason) {
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":2,\"type\":\"STATUS\",\"body\":{}}"), NIMBLE_UNIMPLEMENTED,
                      "message: protocol version 2 is not supported (this build speaks 1)");
  NIMBLE_ASSERT_ERROR(decode_text("{\"type\":\"STATUS\",\"body\":{\"job\":\"j\"}}"),
                      NIMBLE_INVALID_ARGUMENT, "message: v: missing");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":\"1\",\"type\":\"STATUS\",\"body\":{\"job\":\"j\"}}"),
                      NIMBLE_INVALID_ARGUMENT, "v: expected an integer, got a string");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"REBOOT\",\"body\":{}}"),
                      NIMBLE_UNIMPLEMENTED, "message: unknown message type 'REBOOT'");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"status\",\"body\":{}}"),
                      NIMBLE_UNIMPLEMENTED, "unknown message type 'status'");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"body\":{}}"), NIMBLE_INVALID_ARGUMENT,
                      "type: missing");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"STATUS\"}"), NIMBLE_INVALID_ARGUMENT,
                      "body: missing");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"STATUS\",\"body\":[]}"),
                      NIMBLE_INVALID_ARGUMENT, "body: expected an object, got an array");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"STATUS\",\"body\":{\"job\":\"j\"},\"x\":1}"),
                      NIMBLE_INVALID_ARGUMENT, "unknown envelope member 'x'");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"type\":\"STATUS\",\"body\":{\"job\":7}}"),
                      NIMBLE_INVALID_ARGUMENT, "message: STATUS: body.job: expected a string, got an integer");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,\"v\":1}"), NIMBLE_INVALID_ARGUMENT,
                      "duplicate object key");
  NIMBLE_ASSERT_ERROR(decode_text("{\"v\":1,"), NIMBLE_INVALID_ARGUMENT, "message: invalid JSON");
  NIMBLE_ASSERT_ERROR(decode_text("[1]"), NIMBLE_INVALID_ARGUMENT, "expected a JSON object");
  NIMBLE_ASSERT_ERROR(decode_text(""), NIMBLE_INVALID_ARGUMENT, "empty document");
  nimble_msg_type_t type;
  json_t *body;
  size_t big = NIMBLE_MESSAGE_MAX_SIZE + 1;
  char *buf = malloc(big);
  memset(buf, '{', big);
  NIMBLE_ASSERT_ERROR(nimble_message_decode(buf, big, &type, &body), NIMBLE_RESOURCE_EXHAUSTED,
                      "message: 4194305 bytes is over the limit of 4194304 bytes");
  free(buf);
  /* Encoding a body that would not fit is refused too: 52 bytes of envelope
   * around 4 MiB of text. */
  size_t len = NIMBLE_MESSAGE_MAX_SIZE;
  char *blob = malloc(len + 1);
  memset(blob, 'a', len);
  blob[len] = '\0';
  json_t *huge = json_pack("{s:s, s:s}", "job", "j", "note", blob);
  char *out;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_message_encode(NIMBLE_MSG_STATUS, huge, &out, &n),
                      NIMBLE_RESOURCE_EXHAUSTED, "STATUS message: 4194356 bytes is over the limit");
  json_decref(huge);
  free(blob);
}
END_TEST

START_TEST(test_deeply_nested_bodies_are_handled_without_crashing) {
  /* 2040 levels fit jansson's parser limit (2048): accepted, as unknown
   * members are ignored; 3000 levels are refused by the parser. */
  for (int pass = 0; pass < 2; pass++) {
    size_t depth = pass ? 3000 : 2040, n = 0;
    char *buf = malloc(2 * depth + 128);
    n += (size_t)sprintf(buf, "{\"v\":1,\"type\":\"STATUS\",\"body\":{\"job\":\"j\",\"x\":");
    memset(buf + n, '[', depth);
    n += depth;
    memset(buf + n, ']', depth);
    n += depth;
    n += (size_t)sprintf(buf + n, "}}");
    nimble_msg_type_t type;
    json_t *body;
    nimble_status_t s = nimble_message_decode(buf, n, &type, &body);
    if (pass == 0) {
      NIMBLE_ASSERT_OK(s);
      json_decref(body);
    } else {
      NIMBLE_ASSERT_ERROR(s, NIMBLE_INVALID_ARGUMENT, "message: invalid JSON");
    }
    free(buf);
  }
}
END_TEST

START_TEST(test_encode_refuses_invalid_bodies_with_the_type_named) {
  json_t *body = json_pack("{s:s}", "job", "has space");
  char *out;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_message_encode(NIMBLE_MSG_ACCEPTED, body, &out, &n),
                      NIMBLE_INVALID_ARGUMENT, "ACCEPTED message: body.job: 'has space' is not an id");
  json_decref(body);
}
END_TEST

START_TEST(test_errors_travel_as_messages_and_come_back_as_statuses) {
  nimble_status_t err = nimble_status_make(NIMBLE_NOT_FOUND, "job 'j-9' is not known");
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_message_encode_error(err, "j-9", &out, &n));
  ck_assert_str_eq(out, "{\"body\":{\"code\":\"NOT_FOUND\",\"job\":\"j-9\",\"message\":\"job "
                        "'j-9' is not known\"},\"type\":\"ERROR\",\"v\":1}");
  nimble_status_free(err);
  nimble_msg_type_t type;
  json_t *body;
  NIMBLE_ASSERT_OK(nimble_message_decode(out, n, &type, &body));
  free(out);
  ck_assert_int_eq(type, NIMBLE_MSG_ERROR);
  NIMBLE_ASSERT_ERROR(nimble_message_body_to_status(body), NIMBLE_NOT_FOUND,
                      "job 'j-9' is not known");
  json_decref(body);

  body = load(kExamples[NIMBLE_MSG_FAILURE].body);
  NIMBLE_ASSERT_ERROR(nimble_message_body_to_status(body), NIMBLE_UNIMPLEMENTED,
                      "node 'lstm_0' (LSTM): unsupported");
  json_object_del(body, "code");
  NIMBLE_ASSERT_ERROR(nimble_message_body_to_status(body), NIMBLE_INTERNAL, "lstm_0");
  json_decref(body);

  /* A success has nothing to report: it is sent as INTERNAL, never OK. */
  NIMBLE_ASSERT_OK(nimble_message_encode_error(nimble_ok(), NULL, &out, &n));
  ck_assert_ptr_nonnull(strstr(out, "\"code\":\"INTERNAL\""));
  free(out);
}
END_TEST

START_TEST(test_mutated_frames_never_crash_or_leak) {
  static const char bytes[] = "{}[]\":,01.-_aZ \\\xff";
  uint32_t rng = 99;
  int accepted = 0;
  char buf[1024];
  for (int iter = 0; iter < 12000; iter++) {
    const example *ex = &kExamples[iter % EXAMPLE_COUNT];
    json_t *seed = load(ex->body);
    char *frame;
    size_t n;
    NIMBLE_ASSERT_OK(nimble_message_encode(ex->type, seed, &frame, &n));
    json_decref(seed);
    ck_assert_uint_lt(n, sizeof(buf) - 16);
    memcpy(buf, frame, n);
    free(frame);
    for (int k = 0; k < 1 + iter % 3 && n > 0; k++) {
      rng = rng * 1664525u + 1013904223u;
      size_t at = (rng >> 8) % n;
      rng = rng * 1664525u + 1013904223u;
      char c = bytes[(rng >> 8) % (sizeof(bytes) - 1)];
      switch ((rng >> 24) % 4) {
        case 0: buf[at] = c; break;
        case 1: n = at; break;
        case 2: memmove(buf + at + 1, buf + at, n - at); buf[at] = c; n++; break;
        default: if (buf[at] >= 'a' && buf[at] <= 'z') buf[at] = (char)('a' + (rng >> 4) % 26);
      }
    }
    nimble_msg_type_t type;
    json_t *body;
    nimble_status_t s = nimble_message_decode(buf, n, &type, &body);
    if (s) {
      nimble_status_code_t code = nimble_status_code(s);
      ck_assert_msg(code == NIMBLE_INVALID_ARGUMENT || code == NIMBLE_UNIMPLEMENTED,
                    "unexpected %s: %s", nimble_status_code_name(code), nimble_status_message(s));
      nimble_status_free(s);
      continue;
    }
    accepted++;
    char *again;
    size_t an;
    NIMBLE_ASSERT_OK(nimble_message_encode(type, body, &again, &an));
    free(again);
    json_decref(body);
  }
  ck_assert_int_gt(accepted, 0);
}
END_TEST

/* Tuning records (docs/protocol.md): strings of record JSON, bounded in
 * number and length; what they hold is the receiver's to check. */
START_TEST(test_tuning_record_members_are_checked) {
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TASK, "tune_records", "[]"));
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_RESULT, "tune_records", "[\"{}\",\"not even JSON\"]"));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_RESULT, "tune_records",
                                  "[{\"signature\":\"ab\",\"default_us\":1}]"),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.tune_records[0]: expected a string (a tuning record's JSON), got an object");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TASK, "tune_records", "[\"x\",\"\"]"),
                      NIMBLE_INVALID_ARGUMENT, "body.tune_records[1]: a record's text is 1 to 1536 bytes, got 0");
  char long_text[1600];
  memset(long_text, 'a', sizeof long_text);
  long_text[0] = '[';
  long_text[1] = '"';
  long_text[1 + 1537 + 1] = '"'; /* 1537 characters between the quotes */
  long_text[1 + 1537 + 2] = ']';
  long_text[1 + 1537 + 3] = '\0';
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS_IMPORT, "records", long_text),
                      NIMBLE_INVALID_ARGUMENT, "body.records[0]: a record's text is 1 to 1536 bytes, got 1537");
  /* At most 2048 per message. */
  json_t *many = json_array();
  for (int i = 0; i < 2049; i++) json_array_append_new(many, json_string("{}"));
  char *text = json_dumps(many, JSON_COMPACT);
  json_decref(many);
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS, "records", text), NIMBLE_INVALID_ARGUMENT,
                      "body.records");
  free(text);
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS_LIST, "target", "\"x86:cpu=znver4\""),
                      NIMBLE_INVALID_ARGUMENT,
                      "body.target: 'x86:cpu=znver4' is not a target kind (x86, aarch64, cuda)");
  NIMBLE_ASSERT_OK(with_member(NIMBLE_MSG_TUNE_RECORDS_LIST, "target", "\"cuda\""));
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS_LIST, "offset", "-1"), NIMBLE_INVALID_ARGUMENT,
                      "body.offset");
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS_IMPORTED, "imported", "2049"),
                      NIMBLE_INVALID_ARGUMENT, "body.imported");
  /* Real numbers stay out of messages: a record must travel as text. */
  NIMBLE_ASSERT_ERROR(with_member(NIMBLE_MSG_TUNE_RECORDS_IMPORT, "first", "1.5"), NIMBLE_INVALID_ARGUMENT,
                      "body.first");
}
END_TEST

int main(void) {
  Suite *s = suite_create("message");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_submit_encodes_to_the_hand_written_frame);
  tcase_add_test(tc, test_decoding_gives_type_and_body_and_re_encodes_identically);
  tcase_add_test(tc, test_every_type_has_a_name_and_its_example_round_trips);
  tcase_add_test(tc, test_a_missing_required_member_is_named);
  tcase_add_test(tc, test_member_values_are_checked);
  tcase_add_test(tc, test_cross_member_rules_are_checked);
  tcase_add_test(tc, test_profile_inputs_and_reports_are_checked);
  tcase_add_test(tc, test_kernel_cache_members_are_checked);
  tcase_add_test(tc, test_tuning_record_members_are_checked);
  tcase_add_test(tc, test_envelope_errors_give_the_reason);
  tcase_add_test(tc, test_deeply_nested_bodies_are_handled_without_crashing);
  tcase_add_test(tc, test_encode_refuses_invalid_bodies_with_the_type_named);
  tcase_add_test(tc, test_errors_travel_as_messages_and_come_back_as_statuses);
  tcase_add_test(tc, test_mutated_frames_never_crash_or_leak);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
