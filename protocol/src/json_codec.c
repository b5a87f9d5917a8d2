/* Canonical JSON and checked field access over jansson. */
#include "json_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/text_quote.h"

nimble_status_t nimble_json_load_object(const void *data, size_t size, size_t max,
                                        const char *what, json_t **out) {
  if (!data && size) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: no data", what);
  if (size > max) {
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%s: %zu bytes is over the limit of %zu bytes", what, size, max);
  }
  if (size == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty document", what);
  json_error_t err;
  /* Duplicate keys would make two readers see two different documents. */
  json_t *j = json_loadb(data, size, JSON_REJECT_DUPLICATES, &err);
  if (!j) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: invalid JSON at line %d, column %d: %s", what, err.line,
                              err.column, err.text);
  }
  if (!json_is_object(j)) {
    nimble_status_t s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                           "%s: expected a JSON object, got %s", what,
                                           nimble_json_type_name(j));
    json_decref(j);
    return s;
  }
  *out = j;
  return nimble_ok();
}

nimble_status_t nimble_json_check_no_real(const json_t *j, const char *path) {
  char p[NIMBLE_JSON_PATH_MAX];
  if (json_is_real(j)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: real numbers are not allowed; use an integer or a string",
                              path[0] ? path : "(document)");
  }
  if (json_is_object(j)) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v) {
      nimble_json_path_key(p, path, k);
      NIMBLE_RETURN_IF_ERROR(nimble_json_check_no_real(v, p));
    }
  } else if (json_is_array(j)) {
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) {
      nimble_json_path_index(p, path, i);
      NIMBLE_RETURN_IF_ERROR(nimble_json_check_no_real(v, p));
    }
  }
  return nimble_ok();
}

nimble_status_t nimble_json_dump_canonical(const json_t *j, char **out, size_t *out_size) {
  const size_t flags = JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY;
  NIMBLE_RETURN_IF_ERROR(nimble_json_check_no_real(j, ""));
  size_t n = json_dumpb(j, NULL, 0, flags);
  if (n == 0) return nimble_status_make(NIMBLE_INTERNAL, "JSON encoding failed");
  char *buf = malloc(n + 1);
  if (!buf) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", n);
  if (json_dumpb(j, buf, n, flags) != n) {
    free(buf);
    return nimble_status_make(NIMBLE_INTERNAL, "JSON encoding changed size");
  }
  buf[n] = '\0';
  *out = buf;
  *out_size = n;
  return nimble_ok();
}

const char *nimble_json_type_name(const json_t *j) {
  switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "unknown";
}

void nimble_json_path_key(char out[NIMBLE_JSON_PATH_MAX], const char *path, const char *key) {
  char k[64];
  nimble_text_quote(key, strlen(key), k, sizeof(k));
  snprintf(out, NIMBLE_JSON_PATH_MAX, "%s%s%s", path, path[0] ? "." : "", k);
}

void nimble_json_path_index(char out[NIMBLE_JSON_PATH_MAX], const char *path, size_t index) {
  snprintf(out, NIMBLE_JSON_PATH_MAX, "%s[%zu]", path, index);
}

/* Looks up key; on a missing required field returns the error. */
static nimble_status_t lookup(const json_t *obj, const char *path, const char *key, int required,
                              json_t **out) {
  *out = json_object_get(obj, key);
  if (!*out && required) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, key);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: missing", p);
  }
  return nimble_ok();
}

static nimble_status_t wrong_type(const char *path, const char *key, const char *want,
                                  const json_t *got) {
  char p[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(p, path, key);
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected %s, got %s", p, want,
                            nimble_json_type_name(got));
}

nimble_status_t nimble_json_get_string(const json_t *obj, const char *path, const char *key,
                                       int required, size_t max_len, const char **out) {
  json_t *v;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_string(v)) return wrong_type(path, key, "a string", v);
  size_t n = json_string_length(v);
  if (n == 0 || n > max_len) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, key);
    if (n == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty string", p);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %zu bytes is longer than %zu", p, n,
                              max_len);
  }
  *out = json_string_value(v);
  return nimble_ok();
}

nimble_status_t nimble_json_get_int(const json_t *obj, const char *path, const char *key,
                                    int required, int64_t min, int64_t max, int64_t *out,
                                    int *present) {
  json_t *v;
  if (present) *present = 0;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_integer(v)) return wrong_type(path, key, "an integer", v);
  int64_t x = (int64_t)json_integer_value(v);
  if (x < min || x > max) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, key);
    if (x < 0 && min >= 0) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %lld is negative", p, (long long)x);
    }
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %lld is outside [%lld, %lld]", p,
                              (long long)x, (long long)min, (long long)max);
  }
  *out = x;
  if (present) *present = 1;
  return nimble_ok();
}

nimble_status_t nimble_json_get_bool(const json_t *obj, const char *path, const char *key,
                                     int required, int *out, int *present) {
  json_t *v;
  if (present) *present = 0;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_boolean(v)) return wrong_type(path, key, "a boolean", v);
  *out = json_is_true(v);
  if (present) *present = 1;
  return nimble_ok();
}

nimble_status_t nimble_json_get_digest(const json_t *obj, const char *path, const char *key,
                                       int required, nimble_digest_t *out, int *present) {
  json_t *v;
  if (present) *present = 0;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_string(v)) return wrong_type(path, key, "a digest string", v);
  nimble_status_t s = nimble_digest_parse_n(json_string_value(v), json_string_length(v), out);
  if (s) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, key);
    return nimble_status_annotate(s, "%s", p);
  }
  if (present) *present = 1;
  return nimble_ok();
}

nimble_status_t nimble_json_get_object(const json_t *obj, const char *path, const char *key,
                                       int required, json_t **out) {
  json_t *v;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_object(v)) return wrong_type(path, key, "an object", v);
  *out = v;
  return nimble_ok();
}

nimble_status_t nimble_json_get_array(const json_t *obj, const char *path, const char *key,
                                      int required, size_t min_len, size_t max_len, json_t **out) {
  json_t *v;
  NIMBLE_RETURN_IF_ERROR(lookup(obj, path, key, required, &v));
  if (!v) return nimble_ok();
  if (!json_is_array(v)) return wrong_type(path, key, "an array", v);
  size_t n = json_array_size(v);
  if (n < min_len || n > max_len) {
    char p[NIMBLE_JSON_PATH_MAX];
    nimble_json_path_key(p, path, key);
    if (n < min_len) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: needs at least %zu item%s, got %zu",
                                p, min_len, min_len == 1 ? "" : "s", n);
    }
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: %zu items is more than %zu", p, n,
                              max_len);
  }
  *out = v;
  return nimble_ok();
}

nimble_status_t nimble_json_check_scalar_object(const json_t *j, const char *path) {
  if (!json_is_object(j)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: expected an object, got %s", path,
                              nimble_json_type_name(j));
  }
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)j, k, v) {
    if (!json_is_string(v) && !json_is_integer(v) && !json_is_boolean(v)) {
      char p[NIMBLE_JSON_PATH_MAX];
      nimble_json_path_key(p, path, k);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: expected a string, integer or boolean, got %s", p,
                                nimble_json_type_name(v));
    }
  }
  return nimble_ok();
}
