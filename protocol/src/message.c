/* Wire messages: the envelope and one schema per message type. */
#include "nimble/message.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_codec.h"
#include "nimble/target.h"
#include "nimble/text_quote.h"

static const char *const kTypeNames[NIMBLE_MSG_TYPE_COUNT_] = {
    "SUBMIT", "STATUS",  "CANCEL",   "READY",    "HEARTBEAT",  "PROGRESS",
    "RESULT", "FAILURE", "ACCEPTED", "JOB_STATUS", "TASK",     "ERROR",
    "PROFILE", "PROFILE_TASK", "PROFILE_RESULT", "TUNE_RECORDS_LIST", "TUNE_RECORDS_IMPORT",
    "TUNE_RECORDS", "TUNE_RECORDS_IMPORTED", "ACK",
};

const char *nimble_message_type_name(nimble_msg_type_t type) {
  return (unsigned)type < NIMBLE_MSG_TYPE_COUNT_ ? kTypeNames[type] : "UNKNOWN";
}

nimble_status_t nimble_message_type_parse(const char *name, nimble_msg_type_t *out_type) {
  for (int i = 0; i < NIMBLE_MSG_TYPE_COUNT_; i++) {
    if (strcmp(kTypeNames[i], name) == 0) {
      *out_type = (nimble_msg_type_t)i;
      return nimble_ok();
    }
  }
  char q[48];
  nimble_text_quote(name, strlen(name), q, sizeof(q));
  return nimble_status_make(NIMBLE_UNIMPLEMENTED, "unknown message type '%s'", q);
}

/* ---- field kinds ---- */

typedef enum field_kind {
  F_ID,      /* job, task, worker ids: 1..128 of [A-Za-z0-9._:-] */
  F_TEXT,    /* any non-empty UTF-8 text up to `max` bytes */
  F_WORD,    /* 1..32 of [a-z0-9_-]: phases */
  F_DIGEST,  /* sha256:<hex> */
  F_TARGET,  /* a canonical target spec */
  F_TARGETS, /* 1..16 distinct canonical target specs */
  F_INT,     /* integer in [min, max] */
  F_BOOL,
  F_OPTIONS, /* object of strings, integers, booleans */
  F_FORMAT,  /* "onnx" or "nir" */
  F_STATE,   /* queued, running, done, failed, cancelled */
  F_CODE,    /* a status code name, e.g. "INVALID_ARGUMENT" */
  F_REPO,    /* an OCI repository name */
  F_TASKS,   /* JOB_STATUS tasks: array of task status objects */
  F_SHAPES,  /* profile inputs: object of input name -> array of dims */
  F_REPORT,  /* a profile report (integers: nanoseconds, bytes, counts) */
  F_KERNELS, /* code generation's counts: {done, total, cached, fetched?} */
  F_KCACHE,  /* kernel cache index entries: array (at most `max`) of {key, digest} */
  F_SEQS,    /* object of canonical target -> kernel cache index sequence (>= 0) */
  F_TUNE,    /* tuning records: array (at most `max`) of record JSON texts */
  F_KIND,    /* a target kind: x86, aarch64 or cuda */
} field_kind;

typedef struct field_spec {
  const char *key;
  field_kind kind;
  int required;
  int64_t min, max;
} field_spec;

#define END {NULL, F_ID, 0, 0, 0}
#define MAX_TEXT 65536

static const field_spec kSubmit[] = {{"model", F_DIGEST, 1, 0, 0},   {"format", F_FORMAT, 1, 0, 0},
                                     {"name", F_REPO, 1, 0, 0},      {"targets", F_TARGETS, 1, 0, 0},
                                     {"options", F_OPTIONS, 0, 0, 0}, {"verify", F_INT, 0, 1, 16},
                                     END};
static const field_spec kStatus[] = {{"job", F_ID, 1, 0, 0}, END};
static const field_spec kCancel[] = {{"job", F_ID, 0, 0, 0}, {"task", F_ID, 0, 0, 0}, END};
static const field_spec kReady[] = {{"worker", F_ID, 1, 0, 0},
                                    {"targets", F_TARGETS, 1, 0, 0},
                                    {"compiler_version", F_TEXT, 1, 0, 256},
                                    {"compiler_build", F_DIGEST, 0, 0, 0},
                                    {"slots", F_INT, 0, 1, 1024},
                                    {"can_run", F_TARGETS, 0, 0, 0},
                                    {"kcache", F_SEQS, 0, 0, 0},
                                    END};
static const field_spec kHeartbeat[] = {{"worker", F_ID, 1, 0, 0}, {"task", F_ID, 0, 0, 0}, END};
static const field_spec kProgress[] = {{"task", F_ID, 1, 0, 0},     {"phase", F_WORD, 1, 0, 0},
                                       {"percent", F_INT, 1, 0, 100}, {"job", F_ID, 0, 0, 0},
                                       {"target", F_TARGET, 0, 0, 0}, {"kernels", F_KERNELS, 0, 0, 0},
                                       END};
static const field_spec kResult[] = {{"task", F_ID, 1, 0, 0}, {"manifest", F_DIGEST, 1, 0, 0},
                                     {"key", F_DIGEST, 0, 0, 0},
                                     {"kcache", F_KCACHE, 0, 0, NIMBLE_KCACHE_RESULT_MAX},
                                     {"tune_records", F_TUNE, 0, 0, NIMBLE_TUNE_MESSAGE_MAX}, END};
static const field_spec kFailure[] = {{"task", F_ID, 1, 0, 0}, {"error", F_TEXT, 1, 0, MAX_TEXT},
                                      {"code", F_CODE, 0, 0, 0}, {"retryable", F_BOOL, 0, 0, 0},
                                      END};
static const field_spec kAccepted[] = {{"job", F_ID, 1, 0, 0}, {"cached", F_BOOL, 0, 0, 0}, END};
static const field_spec kJobStatus[] = {{"job", F_ID, 1, 0, 0}, {"state", F_STATE, 1, 0, 0},
                                        {"tasks", F_TASKS, 1, 0, 0}, END};
static const field_spec kTaskStatus[] = {{"target", F_TARGET, 1, 0, 0},
                                         {"state", F_STATE, 1, 0, 0},
                                         {"phase", F_WORD, 0, 0, 0},
                                         {"percent", F_INT, 0, 0, 100},
                                         {"manifest", F_DIGEST, 0, 0, 0},
                                         {"error", F_TEXT, 0, 0, MAX_TEXT},
                                         {"cached", F_BOOL, 0, 0, 0},
                                         {"workers", F_INT, 0, 0, 1000000},
                                         {"verify", F_INT, 0, 2, 16},
                                         {"verified", F_INT, 0, 0, 16},
                                         {"profile", F_REPORT, 0, 0, 0},
                                         {"kernels", F_KERNELS, 0, 0, 0},
                                         END};
static const field_spec kTask[] = {{"task", F_ID, 1, 0, 0},
                                   {"job", F_ID, 1, 0, 0},
                                   {"model", F_DIGEST, 1, 0, 0},
                                   {"format", F_FORMAT, 1, 0, 0},
                                   {"name", F_REPO, 1, 0, 0},
                                   {"target", F_TARGET, 1, 0, 0},
                                   {"key", F_DIGEST, 1, 0, 0},
                                   {"lease_ms", F_INT, 1, 1, 86400000},
                                   {"options", F_OPTIONS, 0, 0, 0},
                                   {"attempt", F_INT, 0, 1, 1000},
                                   {"kernel_cache", F_BOOL, 0, 0, 0},
                                   {"kcache", F_KCACHE, 0, 0, NIMBLE_KCACHE_TASK_MAX},
                                   {"kcache_seq", F_INT, 0, 0, INT64_MAX},
                                   {"tune_records", F_TUNE, 0, 0, NIMBLE_TUNE_MESSAGE_MAX},
                                   END};
static const field_spec kError[] = {{"code", F_CODE, 1, 0, 0}, {"message", F_TEXT, 1, 0, MAX_TEXT},
                                    {"job", F_ID, 0, 0, 0},    {"task", F_ID, 0, 0, 0}, END};

static const field_spec kProfile[] = {{"name", F_REPO, 1, 0, 0},
                                      {"target", F_TARGET, 1, 0, 0},
                                      {"inputs", F_SHAPES, 1, 0, 0},
                                      {"manifest", F_DIGEST, 0, 0, 0},
                                      {"runs", F_INT, 0, 1, NIMBLE_PROFILE_MAX_RUNS},
                                      END};
static const field_spec kProfileTask[] = {{"task", F_ID, 1, 0, 0},
                                          {"job", F_ID, 1, 0, 0},
                                          {"name", F_REPO, 1, 0, 0},
                                          {"target", F_TARGET, 1, 0, 0},
                                          {"inputs", F_SHAPES, 1, 0, 0},
                                          {"runs", F_INT, 1, 1, NIMBLE_PROFILE_MAX_RUNS},
                                          {"lease_ms", F_INT, 1, 1, 86400000},
                                          {"manifest", F_DIGEST, 0, 0, 0},
                                          {"attempt", F_INT, 0, 1, 1000},
                                          END};
static const field_spec kProfileResult[] = {{"task", F_ID, 1, 0, 0},
                                            {"manifest", F_DIGEST, 1, 0, 0},
                                            {"report", F_REPORT, 1, 0, 0},
                                            END};
static const field_spec kReport[] = {{"runs", F_INT, 1, 1, NIMBLE_PROFILE_MAX_RUNS},
                                     {"median_ns", F_INT, 1, 0, INT64_MAX},
                                     {"min_ns", F_INT, 1, 0, INT64_MAX},
                                     {"max_ns", F_INT, 1, 0, INT64_MAX},
                                     {"peak_bytes", F_INT, 1, 0, INT64_MAX},
                                     {"device_peak_bytes", F_INT, 0, 0, INT64_MAX},
                                     {"entry", F_TEXT, 0, 0, 256},
                                     {"threads", F_INT, 0, 1, 1024},
                                     END};
static const field_spec kKernelTime[] = {{"symbol", F_TEXT, 1, 0, 512},
                                         {"calls", F_INT, 1, 0, INT64_MAX},
                                         {"total_ns", F_INT, 1, 0, INT64_MAX},
                                         END};

/* Tuning records (docs/farm.md, "Tuning records"): a list asks for one
 * page (an offset into the records, oldest first; the reply says where the
 * next page starts and how many there are); an import names the index its
 * first record has in the file it comes from, for errors. */
static const field_spec kTuneList[] = {{"target", F_KIND, 0, 0, 0},
                                       {"offset", F_INT, 0, 0, INT32_MAX},
                                       END};
static const field_spec kTuneImport[] = {{"records", F_TUNE, 1, 0, NIMBLE_TUNE_MESSAGE_MAX},
                                         {"first", F_INT, 0, 0, INT32_MAX},
                                         END};
static const field_spec kTuneRecords[] = {{"records", F_TUNE, 1, 0, NIMBLE_TUNE_MESSAGE_MAX},
                                          {"offset", F_INT, 1, 0, INT32_MAX},
                                          {"next", F_INT, 1, 0, INT32_MAX},
                                          {"total", F_INT, 1, 0, INT32_MAX},
                                          END};
static const field_spec kTuneImported[] = {{"imported", F_INT, 1, 0, NIMBLE_TUNE_MESSAGE_MAX}, END};
static const field_spec kAck[] = {{"task", F_ID, 1, 0, 0}, END};

static const field_spec *const kSchemas[NIMBLE_MSG_TYPE_COUNT_] = {
    kSubmit, kStatus,  kCancel,   kReady,     kHeartbeat, kProgress,
    kResult, kFailure, kAccepted, kJobStatus, kTask,      kError,
    kProfile, kProfileTask, kProfileResult, kTuneList, kTuneImport,
    kTuneRecords, kTuneImported, kAck,
};

static const char *const kStates[] = {"queued", "running", "done", "failed", "cancelled", NULL};
static const char *const kFormats[] = {"onnx", "nir", NULL};

static nimble_status_t bad(const char *path, const char *fmt, const char *value) {
  char q[80];
  nimble_text_quote(value, strlen(value), q, sizeof(q));
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, fmt, path, q);
}

static int one_of(const char *const *list, const char *s) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], s) == 0) return 1;
  return 0;
}

static nimble_status_t check_id(const char *s, const char *path) {
  size_t n = strlen(s);
  if (n > 128) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: longer than 128 bytes", path);
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return bad(path, "%s: '%s' is not an id (letters, digits, '.', '_', ':', '-')", s);
  }
  return nimble_ok();
}

static int is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* OCI distribution's repository name grammar: components of [a-z0-9]+
 * joined by '.', '_', '__' or runs of '-', components separated by '/'. */
static int is_repo_name(const char *s) {
  size_t n = strlen(s), i = 0;
  if (n == 0 || n > 255) return 0;
  for (;;) {
    if (!is_lower_alnum(s[i])) return 0;
    while (is_lower_alnum(s[i])) i++;
    if (s[i] == '\0') return 1;
    if (s[i] == '/') {
      i++;
      continue;
    }
    if (s[i] == '.') {
      i++;
    } else if (s[i] == '_') {
      i += s[i + 1] == '_' ? 2 : 1;
    } else if (s[i] == '-') {
      while (s[i] == '-') i++;
    } else {
      return 0;
    }
  }
}

static nimble_status_t check_canonical_target(const char *s, const char *path) {
  char canon[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_canonicalize(s, canon), "%s", path);
  if (strcmp(canon, s) != 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: '%s' is not canonical (write '%s')",
                              path, s, canon);
  }
  return nimble_ok();
}

static nimble_status_t check_fields(const json_t *obj, const char *path, const field_spec *spec);

/* Profile inputs: {"x":[4,784],"mask":[]}: 1 to NIMBLE_PROFILE_MAX_INPUTS
 * names (1 to 256 bytes), each an array of at most 32 dimensions in
 * [0, 2^31-1]. */
static nimble_status_t check_shapes(const json_t *o, const char *p) {
  size_t n = json_object_size(o);
  if (n < 1 || n > NIMBLE_PROFILE_MAX_INPUTS)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: 1 to %d inputs, got %zu", p,
                              NIMBLE_PROFILE_MAX_INPUTS, n);
  const char *name;
  json_t *dims;
  char ip[NIMBLE_JSON_PATH_MAX], dp[NIMBLE_JSON_PATH_MAX];
  json_object_foreach((json_t *)o, name, dims) {
    size_t len = strlen(name);
    nimble_json_path_key(ip, p, len <= 64 ? name : "...");
    if (len == 0 || len > 256)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: an input name is 1 to 256 bytes", p);
    if (!json_is_array(dims) || json_array_size(dims) > 32)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: expected an array of at most 32 dimensions, got %s", ip,
                                json_is_array(dims) ? "a longer array" : nimble_json_type_name(dims));
    for (size_t k = 0; k < json_array_size(dims); k++) {
      json_t *d = json_array_get(dims, k);
      nimble_json_path_index(dp, ip, k);
      if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > INT32_MAX)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "%s: expected a dimension, an integer in [0, 2147483647]", dp);
    }
  }
  return nimble_ok();
}

static const field_spec kKernelCounts[] = {{"done", F_INT, 1, 0, 1000000},
                                           {"total", F_INT, 1, 0, 1000000},
                                           {"cached", F_INT, 1, 0, 1000000},
                                           {"fetched", F_INT, 0, 0, 1000000},
                                           END};

/* Code generation's counts: cached <= done <= total. */
static nimble_status_t check_kernel_counts(const json_t *o, const char *p) {
  NIMBLE_RETURN_IF_ERROR(check_fields(o, p, kKernelCounts));
  json_int_t done = json_integer_value(json_object_get(o, "done"));
  json_int_t total = json_integer_value(json_object_get(o, "total"));
  json_int_t cached = json_integer_value(json_object_get(o, "cached"));
  if (cached > done || done > total)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: cached <= done <= total does not hold (%lld, %lld, %lld)", p,
                              (long long)cached, (long long)done, (long long)total);
  return nimble_ok();
}

/* A kernel cache key: 64 lowercase hex digits (nimble/kernel_cache.h). */
static int is_kernel_key(const char *s) {
  size_t n = 0;
  for (; s[n]; n++)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return 0;
  return n == 64;
}

/* Index entries: [{key, digest}], at most max of them, no key twice. */
static nimble_status_t check_kcache_entries(const json_t *arr, const char *p, size_t max) {
  if (json_array_size(arr) > max)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: at most %zu entries, got %zu", p, max,
                              json_array_size(arr));
  char ip[NIMBLE_JSON_PATH_MAX], kp[NIMBLE_JSON_PATH_MAX];
  for (size_t k = 0; k < json_array_size(arr); k++) {
    json_t *e = json_array_get(arr, k);
    nimble_json_path_index(ip, p, k);
    if (!json_is_object(e))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", ip,
                                nimble_json_type_name(e));
    const char *key = NULL;
    nimble_digest_t d;
    NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(e, ip, "key", 1, 64, &key));
    nimble_json_path_key(kp, ip, "key");
    if (!is_kernel_key(key)) return bad(kp, "%s: '%s' is not a kernel cache key (64 lowercase hex digits)", key);
    NIMBLE_RETURN_IF_ERROR(nimble_json_get_digest(e, ip, "digest", 1, &d, NULL));
    for (size_t j = 0; j < k; j++)
      if (!strcmp(json_string_value(json_object_get(json_array_get(arr, j), "key")), key))
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: key '%s' repeats %s[%zu]", kp, key, p, j);
  }
  return nimble_ok();
}

/* Tuning records: strings of 1 to NIMBLE_TUNE_RECORD_TEXT_MAX bytes, each
 * a record's JSON; what they hold is the receiver's to check. */
static nimble_status_t check_tune_texts(const json_t *arr, const char *p, size_t max) {
  if (json_array_size(arr) > max)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: at most %zu records, got %zu", p, max,
                              json_array_size(arr));
  char ip[NIMBLE_JSON_PATH_MAX];
  for (size_t k = 0; k < json_array_size(arr); k++) {
    json_t *e = json_array_get(arr, k);
    nimble_json_path_index(ip, p, k);
    if (!json_is_string(e))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: expected a string (a tuning record's JSON), got %s", ip,
                                nimble_json_type_name(e));
    size_t n = json_string_length(e);
    if (n == 0 || n > NIMBLE_TUNE_RECORD_TEXT_MAX)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: a record's text is 1 to %d bytes, got %zu",
                                ip, NIMBLE_TUNE_RECORD_TEXT_MAX, n);
  }
  return nimble_ok();
}

/* READY's kcache: canonical target -> the index sequence seen (>= 0). */
static nimble_status_t check_seqs(const json_t *o, const char *p) {
  if (json_object_size(o) > NIMBLE_TARGET_LIST_MAX)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: at most %d targets", p, NIMBLE_TARGET_LIST_MAX);
  const char *target;
  json_t *v;
  char ip[NIMBLE_JSON_PATH_MAX];
  json_object_foreach((json_t *)o, target, v) {
    nimble_json_path_key(ip, p, strlen(target) <= 64 ? target : "...");
    if (strlen(target) > NIMBLE_TARGET_SPEC_MAX)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: target spec too long", ip);
    NIMBLE_RETURN_IF_ERROR(check_canonical_target(target, ip));
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an integer >= 0, got %s", ip,
                                nimble_json_type_name(v));
  }
  return nimble_ok();
}

/* A profile report: the integer members of kReport (min <= median <= max)
 * and `kernels`, an array of {symbol, calls, total_ns}. */
static nimble_status_t check_report(const json_t *o, const char *p) {
  NIMBLE_RETURN_IF_ERROR(check_fields(o, p, kReport));
  int64_t mn = json_integer_value(json_object_get(o, "min_ns"));
  int64_t med = json_integer_value(json_object_get(o, "median_ns"));
  int64_t mx = json_integer_value(json_object_get(o, "max_ns"));
  if (mn > med || med > mx)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: min_ns <= median_ns <= max_ns does not hold (%lld, %lld, %lld)",
                              p, (long long)mn, (long long)med, (long long)mx);
  json_t *arr = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_array(o, p, "kernels", 1, 0, 65536, &arr));
  char kp[NIMBLE_JSON_PATH_MAX], ip[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(kp, p, "kernels");
  for (size_t k = 0; k < json_array_size(arr); k++) {
    json_t *e = json_array_get(arr, k);
    nimble_json_path_index(ip, kp, k);
    if (!json_is_object(e))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", ip,
                                nimble_json_type_name(e));
    NIMBLE_RETURN_IF_ERROR(check_fields(e, ip, kKernelTime));
  }
  return nimble_ok();
}

static nimble_status_t check_field(const json_t *obj, const char *path, const field_spec *f) {
  char p[NIMBLE_JSON_PATH_MAX], ip[NIMBLE_JSON_PATH_MAX];
  const char *s = NULL;
  int64_t i64;
  int flag;
  json_t *arr = NULL;
  nimble_json_path_key(p, path, f->key);
  switch (f->kind) {
    case F_ID:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 128, &s));
      return s ? check_id(s, p) : nimble_ok();
    case F_TEXT:
      return nimble_json_get_string(obj, path, f->key, f->required, (size_t)f->max, &s);
    case F_WORD:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 32, &s));
      for (size_t k = 0; s && s[k]; k++) {
        if (!is_lower_alnum(s[k]) && s[k] != '_' && s[k] != '-')
          return bad(p, "%s: '%s' is not a word of [a-z0-9_-]", s);
      }
      return nimble_ok();
    case F_DIGEST: {
      nimble_digest_t d;
      return nimble_json_get_digest(obj, path, f->key, f->required, &d, NULL);
    }
    case F_TARGET:
      NIMBLE_RETURN_IF_ERROR(
          nimble_json_get_string(obj, path, f->key, f->required, NIMBLE_TARGET_SPEC_MAX, &s));
      return s ? check_canonical_target(s, p) : nimble_ok();
    case F_TARGETS:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_array(obj, path, f->key, f->required, 1,
                                                   NIMBLE_TARGET_LIST_MAX, &arr));
      for (size_t k = 0; arr && k < json_array_size(arr); k++) {
        json_t *t = json_array_get(arr, k);
        nimble_json_path_index(ip, p, k);
        if (!json_is_string(t)) {
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected a string, got %s", ip,
                                    nimble_json_type_name(t));
        }
        NIMBLE_RETURN_IF_ERROR(check_canonical_target(json_string_value(t), ip));
        for (size_t j = 0; j < k; j++) {
          if (json_equal(json_array_get(arr, j), t)) {
            return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: '%s' repeats %s[%zu]", ip,
                                      json_string_value(t), p, j);
          }
        }
      }
      return nimble_ok();
    case F_INT:
      return nimble_json_get_int(obj, path, f->key, f->required, f->min, f->max, &i64, NULL);
    case F_BOOL:
      return nimble_json_get_bool(obj, path, f->key, f->required, &flag, NULL);
    case F_OPTIONS: {
      json_t *o = NULL;
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(obj, path, f->key, f->required, &o));
      return o ? nimble_json_check_scalar_object(o, p) : nimble_ok();
    }
    case F_FORMAT:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 32, &s));
      if (s && !one_of(kFormats, s)) return bad(p, "%s: unknown model format '%s' (onnx, nir)", s);
      return nimble_ok();
    case F_STATE:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 32, &s));
      if (s && !one_of(kStates, s)) {
        return bad(p, "%s: unknown state '%s' (queued, running, done, failed, cancelled)", s);
      }
      return nimble_ok();
    case F_CODE:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 32, &s));
      if (s) {
        for (int c = 1; c <= NIMBLE_IO_ERROR; c++)
          if (strcmp(nimble_status_code_name((nimble_status_code_t)c), s) == 0) return nimble_ok();
        return bad(p, "%s: '%s' is not a status code name such as INVALID_ARGUMENT", s);
      }
      return nimble_ok();
    case F_REPO:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 255, &s));
      if (s && !is_repo_name(s)) {
        return bad(p, "%s: '%s' is not a repository name (lowercase components like 'team/bert')",
                   s);
      }
      return nimble_ok();
    case F_TASKS:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_array(obj, path, f->key, f->required, 0,
                                                   NIMBLE_TARGET_LIST_MAX, &arr));
      for (size_t k = 0; arr && k < json_array_size(arr); k++) {
        json_t *t = json_array_get(arr, k);
        nimble_json_path_index(ip, p, k);
        if (!json_is_object(t)) {
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", ip,
                                    nimble_json_type_name(t));
        }
        NIMBLE_RETURN_IF_ERROR(check_fields(t, ip, kTaskStatus));
        const char *state = json_string_value(json_object_get(t, "state"));
        if (strcmp(state, "done") == 0 && !json_object_get(t, "manifest")) {
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                    "%s.manifest: missing (required when state is done)", ip);
        }
        if (strcmp(state, "failed") == 0 && !json_object_get(t, "error")) {
          return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                    "%s.error: missing (required when state is failed)", ip);
        }
      }
      return nimble_ok();
    case F_SHAPES:
    case F_REPORT: {
      json_t *o = NULL;
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(obj, path, f->key, f->required, &o));
      if (!o) return nimble_ok();
      return f->kind == F_SHAPES ? check_shapes(o, p) : check_report(o, p);
    }
    case F_KERNELS:
    case F_SEQS: {
      json_t *o = NULL;
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(obj, path, f->key, f->required, &o));
      if (!o) return nimble_ok();
      return f->kind == F_KERNELS ? check_kernel_counts(o, p) : check_seqs(o, p);
    }
    case F_KCACHE:
      NIMBLE_RETURN_IF_ERROR(
          nimble_json_get_array(obj, path, f->key, f->required, 0, (size_t)f->max, &arr));
      return arr ? check_kcache_entries(arr, p, (size_t)f->max) : nimble_ok();
    case F_TUNE:
      NIMBLE_RETURN_IF_ERROR(
          nimble_json_get_array(obj, path, f->key, f->required, 0, (size_t)f->max, &arr));
      return arr ? check_tune_texts(arr, p, (size_t)f->max) : nimble_ok();
    case F_KIND:
      NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(obj, path, f->key, f->required, 16, &s));
      if (s && !nimble_target_kind_from_name(s, NULL))
        return bad(p, "%s: '%s' is not a target kind (x86, aarch64, cuda)", s);
      return nimble_ok();
  }
  return nimble_status_make(NIMBLE_INTERNAL, "%s: unknown field kind", p);
}

static nimble_status_t check_fields(const json_t *obj, const char *path, const field_spec *spec) {
  for (; spec->key; spec++) NIMBLE_RETURN_IF_ERROR(check_field(obj, path, spec));
  return nimble_ok();
}

nimble_status_t nimble_message_validate_body(nimble_msg_type_t type, const json_t *body) {
  if ((unsigned)type >= NIMBLE_MSG_TYPE_COUNT_) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "message type %d is unknown", (int)type);
  }
  if (!body || !json_is_object(body)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "body: expected an object, got %s",
                              body ? nimble_json_type_name(body) : "nothing");
  }
  NIMBLE_RETURN_IF_ERROR(check_fields(body, "body", kSchemas[type]));
  if (type == NIMBLE_MSG_CANCEL) {
    int job = json_object_get(body, "job") != NULL, task = json_object_get(body, "task") != NULL;
    if (job == task) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "body: CANCEL names exactly one of 'job' or 'task' (got %s)",
                                job ? "both" : "neither");
    }
  }
  return nimble_json_check_no_real(body, "body");
}

nimble_status_t nimble_message_encode(nimble_msg_type_t type, const json_t *body, char **out,
                                      size_t *out_size) {
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_message_validate_body(type, body), "%s message",
                             nimble_message_type_name(type));
  json_t *env = json_object();
  int ok = env && json_object_set_new(env, "v", json_integer(NIMBLE_PROTOCOL_VERSION)) == 0 &&
           json_object_set_new(env, "type", json_string(kTypeNames[type])) == 0 &&
           json_object_set(env, "body", (json_t *)body) == 0;
  if (!ok) {
    json_decref(env);
    return NIMBLE_OOM_IN("message");
  }
  nimble_status_t s = nimble_json_dump_canonical(env, out, out_size);
  json_decref(env);
  if (!s && *out_size > NIMBLE_MESSAGE_MAX_SIZE) {
    free(*out);
    *out = NULL;
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%s message: %zu bytes is over the limit of %zu bytes",
                              kTypeNames[type], *out_size, NIMBLE_MESSAGE_MAX_SIZE);
  }
  return s;
}

static nimble_status_t decode_envelope(const json_t *env, nimble_msg_type_t *out_type) {
  int64_t v;
  const char *type;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_int(env, "", "v", 1, INT64_MIN, INT64_MAX, &v, NULL));
  if (v != NIMBLE_PROTOCOL_VERSION) {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "protocol version %lld is not supported (this build speaks %d)",
                              (long long)v, NIMBLE_PROTOCOL_VERSION);
  }
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_string(env, "", "type", 1, 32, &type));
  NIMBLE_RETURN_IF_ERROR(nimble_message_type_parse(type, out_type));
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)env, key, value) {
    if (strcmp(key, "v") && strcmp(key, "type") && strcmp(key, "body")) {
      char q[64];
      nimble_text_quote(key, strlen(key), q, sizeof(q));
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "unknown envelope member '%s' (expected v, type, body)", q);
    }
  }
  json_t *body;
  NIMBLE_RETURN_IF_ERROR(nimble_json_get_object(env, "", "body", 1, &body));
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_message_validate_body(*out_type, body), "%s",
                             kTypeNames[*out_type]);
  return nimble_ok();
}

nimble_status_t nimble_message_decode(const void *data, size_t size, nimble_msg_type_t *out_type,
                                      json_t **out_body) {
  json_t *env;
  NIMBLE_RETURN_IF_ERROR(
      nimble_json_load_object(data, size, NIMBLE_MESSAGE_MAX_SIZE, "message", &env));
  nimble_msg_type_t type;
  nimble_status_t s = decode_envelope(env, &type);
  if (s) {
    json_decref(env);
    return nimble_status_annotate(s, "message");
  }
  *out_type = type;
  *out_body = json_incref(json_object_get(env, "body"));
  json_decref(env);
  return nimble_ok();
}

/* The length of the well-formed UTF-8 sequence at p (at most n bytes), or
 * 0 when there is none: no overlong forms, surrogates or code points past
 * U+10FFFF, as jansson requires of a string. */
static size_t utf8_sequence(const unsigned char *p, size_t n) {
  if (p[0] < 0x80) return 1;
  size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
  if (len == 0 || p[0] > 0xF4 || len > n) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0))) return 0;
  if (len == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))) return 0;
  return len;
}

/* `msg` with every byte that is not part of well-formed UTF-8 written as
 * \xNN: an error may quote what a peer sent (jansson's messages quote the
 * text near a syntax error), and it must still be sendable back. Caller
 * frees; NULL when out of memory. */
static char *utf8_clean(const char *msg) {
  size_t n = strlen(msg);
  char *out = malloc(4 * n + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = utf8_sequence((const unsigned char *)msg + i, n - i);
    if (len) {
      memcpy(out + o, msg + i, len);
      o += len;
      i += len;
    } else {
      o += (size_t)snprintf(out + o, 5, "\\x%02X", (unsigned char)msg[i]);
      i++;
    }
  }
  out[o] = '\0';
  return out;
}

nimble_status_t nimble_message_encode_error(nimble_status_t error, const char *job, char **out,
                                            size_t *out_size) {
  nimble_status_code_t code = nimble_status_code(error);
  if (code == NIMBLE_OK) code = NIMBLE_INTERNAL; /* an ERROR always reports a failure */
  char *msg = utf8_clean(nimble_status_message(error));
  json_t *body = msg ? json_object() : NULL;
  int ok = body &&
           json_object_set_new(body, "code", json_string(nimble_status_code_name(code))) == 0 &&
           json_object_set_new(body, "message", json_string(msg[0] ? msg : "unknown error")) == 0;
  free(msg);
  if (ok && job) ok = json_object_set_new(body, "job", json_string(job)) == 0;
  if (!ok) {
    json_decref(body);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "ERROR message: the job id is not valid UTF-8 (or out of memory)");
  }
  nimble_status_t s = nimble_message_encode(NIMBLE_MSG_ERROR, body, out, out_size);
  json_decref(body);
  return s;
}

nimble_status_t nimble_message_body_to_status(const json_t *body) {
  const char *code_name = json_string_value(json_object_get(body, "code"));
  const char *msg = json_string_value(json_object_get(body, "message"));
  if (!msg) msg = json_string_value(json_object_get(body, "error"));
  nimble_status_code_t code = NIMBLE_INTERNAL;
  for (int c = 1; code_name && c <= NIMBLE_IO_ERROR; c++) {
    if (strcmp(nimble_status_code_name((nimble_status_code_t)c), code_name) == 0) {
      code = (nimble_status_code_t)c;
      break;
    }
  }
  return nimble_status_make(code, "%s", msg ? msg : "unknown error");
}
