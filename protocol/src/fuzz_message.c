/* libFuzzer target for the farm's message decoder (message.c over
 * json_codec.c): nimble_message_decode turns one received ZeroMQ frame into
 * a type and a validated body, and the scheduler's handlers
 * (scheduler/src/client_requests.c, worker_requests.c) then read the body's
 * members without checking them again. Built with clang-16 by
 * protocol/CMakeLists.txt (`cmake --build BUILD --target fuzz_message`) and
 * run by bench/fuzz/run.sh; tests/fuzz replays the corpus
 * (tests/fuzz/message/corpus) through this same function in every build.
 * docs/reliability.md, "Fuzzing".
 *
 * Checked on every input (any violation aborts):
 *  - a refusal is INVALID_ARGUMENT, UNIMPLEMENTED or RESOURCE_EXHAUSTED,
 *    and can be sent back: nimble_message_encode_error of it succeeds
 *    (the scheduler answers a bad frame with that ERROR) and decodes to the
 *    same code;
 *  - an accepted message re-encodes, and the encoding decodes to the same
 *    type and an equal body;
 *  - an accepted body has what the handlers read unchecked: the required
 *    strings, digests that parse, targets that nimble_target_parse takes
 *    and that need no JSON escaping, a compile key for SUBMIT, exactly one
 *    of job and task for CANCEL, and a failed status for ERROR/FAILURE. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/compile_key.h"
#include "nimble/digest.h"
#include "nimble/message.h"
#include "nimble/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(nimble_msg_type_t type, const char *what, const char *detail) {
  fprintf(stderr, "fuzz_message: %s: %s%s%s\n", nimble_message_type_name(type), what,
          detail ? ": " : "", detail ? detail : "");
  abort();
}

static const char *str(nimble_msg_type_t type, const json_t *body, const char *key, int required) {
  const json_t *v = json_object_get(body, key);
  if (!v && !required) return NULL;
  if (!json_is_string(v)) fail(type, "a member the handlers read is not a string", key);
  return json_string_value(v);
}

static void digest(nimble_msg_type_t type, const json_t *body, const char *key, int required) {
  const char *s = str(type, body, key, required);
  nimble_digest_t d;
  nimble_status_t st = s ? nimble_digest_parse(s, &d) : nimble_ok();
  if (st) fail(type, "a digest member does not parse", nimble_status_message(st));
}

/* A target the handlers parse, and print into JSON by hand. */
static void target(nimble_msg_type_t type, const char *spec) {
  nimble_target_t t;
  nimble_status_t st = nimble_target_parse(spec, &t);
  if (st) fail(type, "a validated target does not parse", nimble_status_message(st));
  for (const char *p = spec; *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) fail(type, "a target needs escaping", spec);
}

static void targets(nimble_msg_type_t type, const json_t *body, const char *key, int required) {
  const json_t *a = json_object_get(body, key);
  if (!a && !required) return;
  if (!json_is_array(a) || json_array_size(a) == 0) fail(type, "targets is not a non-empty array", key);
  for (size_t i = 0; i < json_array_size(a); i++) {
    if (!json_is_string(json_array_get(a, i))) fail(type, "a target is not a string", key);
    target(type, json_string_value(json_array_get(a, i)));
  }
}

static void integer(nimble_msg_type_t type, const json_t *body, const char *key, int required) {
  const json_t *v = json_object_get(body, key);
  if ((v || required) && !json_is_integer(v)) fail(type, "an integer member is not an integer", key);
}

/* Tuning records: an array of non-empty strings (what they hold is the
 * receiver's to parse). */
static void tune_texts(nimble_msg_type_t type, const json_t *body, const char *key, int required) {
  const json_t *a = json_object_get(body, key);
  if (!a && !required) return;
  if (!json_is_array(a) || json_array_size(a) > NIMBLE_TUNE_MESSAGE_MAX)
    fail(type, "tuning records are not an array of at most NIMBLE_TUNE_MESSAGE_MAX", key);
  for (size_t i = 0; i < json_array_size(a); i++) {
    const json_t *e = json_array_get(a, i);
    if (!json_is_string(e) || json_string_length(e) == 0) fail(type, "a tuning record is not a non-empty string", key);
  }
}

/* What each type's reader takes for granted once the message decoded. */
static void check_body(nimble_msg_type_t type, const json_t *body) {
  switch (type) {
    case NIMBLE_MSG_SUBMIT: {
      digest(type, body, "model", 1);
      str(type, body, "format", 1);
      str(type, body, "name", 1);
      targets(type, body, "targets", 1);
      const json_t *options = json_object_get(body, "options");
      if (options && !json_is_object(options)) fail(type, "options is not an object", NULL);
      const json_t *a = json_object_get(body, "targets");
      for (size_t i = 0; i < json_array_size(a); i++) {
        nimble_compile_key_input_t in = {.target = json_string_value(json_array_get(a, i)),
                                         .compiler_version = "fuzz 1.0",
                                         .options = options,
                                         .salt = ""};
        nimble_status_t st = nimble_digest_parse(str(type, body, "model", 1), &in.model);
        nimble_digest_t key;
        if (!st) st = nimble_compile_key_compute(&in, &key);
        if (st) fail(type, "no compile key for a validated SUBMIT", nimble_status_message(st));
      }
      break;
    }
    case NIMBLE_MSG_STATUS: str(type, body, "job", 1); break;
    case NIMBLE_MSG_ACK: str(type, body, "task", 1); break;
    case NIMBLE_MSG_CANCEL:
      if (!str(type, body, "job", 0) == !str(type, body, "task", 0))
        fail(type, "not exactly one of job and task", NULL);
      break;
    case NIMBLE_MSG_PROFILE: {
      target(type, str(type, body, "target", 1));
      str(type, body, "name", 1);
      const json_t *inputs = json_object_get(body, "inputs");
      if (!json_is_object(inputs)) fail(type, "inputs is not an object", NULL);
      char *text = json_dumps(inputs, JSON_COMPACT | JSON_SORT_KEYS);
      if (!text) fail(type, "inputs do not dump", NULL);
      free(text);
      integer(type, body, "runs", 0);
      digest(type, body, "manifest", 0);
      break;
    }
    case NIMBLE_MSG_READY:
      str(type, body, "worker", 1);
      str(type, body, "compiler_version", 1);
      targets(type, body, "targets", 1);
      targets(type, body, "can_run", 0);
      integer(type, body, "slots", 0);
      break;
    case NIMBLE_MSG_HEARTBEAT:
      str(type, body, "worker", 1);
      str(type, body, "task", 0);
      break;
    case NIMBLE_MSG_PROGRESS:
      str(type, body, "task", 1);
      str(type, body, "phase", 1);
      integer(type, body, "percent", 1);
      break;
    case NIMBLE_MSG_RESULT:
      str(type, body, "task", 1);
      digest(type, body, "manifest", 1);
      digest(type, body, "key", 0);
      tune_texts(type, body, "tune_records", 0);
      break;
    case NIMBLE_MSG_TUNE_RECORDS_LIST: {
      const char *kind = str(type, body, "target", 0);
      if (kind && !nimble_target_kind_from_name(kind, NULL))
        fail(type, "target is not a target kind", kind);
      integer(type, body, "offset", 0);
      break;
    }
    case NIMBLE_MSG_TUNE_RECORDS_IMPORT:
      tune_texts(type, body, "records", 1);
      integer(type, body, "first", 0);
      break;
    case NIMBLE_MSG_TUNE_RECORDS:
      tune_texts(type, body, "records", 1);
      integer(type, body, "offset", 1);
      integer(type, body, "next", 1);
      integer(type, body, "total", 1);
      break;
    case NIMBLE_MSG_TUNE_RECORDS_IMPORTED: integer(type, body, "imported", 1); break;
    case NIMBLE_MSG_PROFILE_RESULT: {
      str(type, body, "task", 1);
      digest(type, body, "manifest", 1);
      char *text = json_dumps(json_object_get(body, "report"), JSON_COMPACT | JSON_SORT_KEYS);
      if (!text) fail(type, "the report does not dump", NULL);
      free(text);
      break;
    }
    case NIMBLE_MSG_FAILURE:
    case NIMBLE_MSG_ERROR: {
      str(type, body, "task", type == NIMBLE_MSG_FAILURE);
      str(type, body, type == NIMBLE_MSG_ERROR ? "message" : "error", 1);
      nimble_status_t st = nimble_message_body_to_status(body);
      if (!st) fail(type, "the body reads back as success", NULL);
      const char *code = str(type, body, "code", type == NIMBLE_MSG_ERROR);
      if (code && strcmp(nimble_status_code_name(nimble_status_code(st)), code) != 0)
        fail(type, "the status code differs from the body's", code);
      nimble_status_free(st);
      break;
    }
    case NIMBLE_MSG_TASK:
    case NIMBLE_MSG_PROFILE_TASK:
      str(type, body, "task", 1);
      str(type, body, "job", 1);
      str(type, body, "name", 1);
      target(type, str(type, body, "target", 1));
      integer(type, body, "lease_ms", 1);
      if (type == NIMBLE_MSG_TASK) {
        digest(type, body, "model", 1);
        digest(type, body, "key", 1);
        tune_texts(type, body, "tune_records", 0);
      }
      break;
    case NIMBLE_MSG_ACCEPTED: str(type, body, "job", 1); break;
    case NIMBLE_MSG_JOB_STATUS: {
      str(type, body, "job", 1);
      str(type, body, "state", 1);
      const json_t *tasks = json_object_get(body, "tasks");
      if (!json_is_array(tasks)) fail(type, "tasks is not an array", NULL);
      for (size_t i = 0; i < json_array_size(tasks); i++) {
        const json_t *t = json_array_get(tasks, i);
        target(type, str(type, t, "target", 1));
        str(type, t, "state", 1);
      }
      break;
    }
    default: fail(type, "decoded to an unknown type", NULL);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_msg_type_t type = NIMBLE_MSG_TYPE_COUNT_;
  json_t *body = NULL;
  nimble_status_t s = nimble_message_decode(data, size, &type, &body);
  if (s) {
    nimble_status_code_t code = nimble_status_code(s);
    if (code != NIMBLE_INVALID_ARGUMENT && code != NIMBLE_UNIMPLEMENTED &&
        code != NIMBLE_RESOURCE_EXHAUSTED)
      fail(type, "refused with an unexpected code", nimble_status_message(s));
    if (body) fail(type, "refused but returned a body", nimble_status_message(s));
    /* The scheduler answers with this error: it must encode, and read back. */
    char *out = NULL;
    size_t n = 0;
    nimble_status_t e = nimble_message_encode_error(s, NULL, &out, &n);
    if (e) {
      fprintf(stderr, "fuzz_message: decode error: %s\nencode_error: %s\n", nimble_status_message(s),
                   nimble_status_message(e));
      fail(NIMBLE_MSG_ERROR, "a decode error cannot be sent back", NULL);
    }
    nimble_msg_type_t t2;
    json_t *b2 = NULL;
    e = nimble_message_decode(out, n, &t2, &b2);
    if (e || t2 != NIMBLE_MSG_ERROR) fail(NIMBLE_MSG_ERROR, "the ERROR reply does not decode", out);
    nimble_status_t back = nimble_message_body_to_status(b2);
    if (nimble_status_code(back) != code) fail(NIMBLE_MSG_ERROR, "the ERROR reply has another code", out);
    nimble_status_free(back);
    json_decref(b2);
    free(out);
    nimble_status_free(s);
    return 0;
  }
  if ((unsigned)type >= NIMBLE_MSG_TYPE_COUNT_ || !json_is_object(body))
    fail(type, "accepted without a type or an object body", NULL);
  check_body(type, body);

  char *out = NULL;
  size_t n = 0;
  nimble_status_t e = nimble_message_encode(type, body, &out, &n);
  if (e) fail(type, "an accepted body does not encode", nimble_status_message(e));
  nimble_msg_type_t t2;
  json_t *b2 = NULL;
  e = nimble_message_decode(out, n, &t2, &b2);
  if (e) fail(type, "the re-encoded message does not decode", nimble_status_message(e));
  if (t2 != type || !json_equal(b2, body)) fail(type, "the re-encoded message decodes differently", out);
  json_decref(b2);
  free(out);
  json_decref(body);
  return 0;
}
