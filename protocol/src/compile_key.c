/* Compile keys: canonical JSON of the inputs, then SHA-256. */
#include "nimble/compile_key.h"

#include <stdlib.h>
#include <string.h>

#include "json_codec.h"
#include "nimble/target.h"

/* Adds a string member; returns 0 when jansson refuses (bad UTF-8, OOM). */
static int set_str(json_t *obj, const char *key, const char *value) {
  return json_object_set_new(obj, key, json_string(value)) == 0;
}

nimble_status_t nimble_compile_key_encode(const nimble_compile_key_input_t *in, char **out,
                                          size_t *out_size) {
  if (!in) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "compile key: no input");
  char target[NIMBLE_TARGET_SPEC_MAX + 1];
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_target_canonicalize(in->target, target), "compile key");
  if (!in->compiler_version || !in->compiler_version[0]) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "compile key: compiler version missing");
  }
  if (in->options) {
    NIMBLE_RETURN_IF_ERROR_CTX(nimble_json_check_scalar_object(in->options, "options"),
                               "compile key");
  }
  char model[NIMBLE_DIGEST_STRING_LEN + 1], build[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(&in->model, model);
  json_t *obj = json_object();
  if (!obj) return NIMBLE_OOM_IN("compile key");
  int ok = set_str(obj, "key", NIMBLE_COMPILE_KEY_SCHEMA) && set_str(obj, "model", model) &&
           set_str(obj, "target", target) && set_str(obj, "compiler", in->compiler_version) &&
           set_str(obj, "salt", in->salt ? in->salt : "");
  if (ok && in->compiler_build) {
    nimble_digest_format(in->compiler_build, build);
    ok = set_str(obj, "compilerBuild", build);
  }
  if (ok) {
    json_t *opts = in->options ? json_deep_copy(in->options) : json_object();
    ok = opts && json_object_set_new(obj, "options", opts) == 0;
  }
  if (!ok) {
    json_decref(obj);
    /* json_string() refuses text that is not UTF-8. */
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "compile key: compiler version or salt is not valid UTF-8");
  }
  nimble_status_t s = nimble_json_dump_canonical(obj, out, out_size);
  json_decref(obj);
  return s;
}

nimble_status_t nimble_compile_key_compute(const nimble_compile_key_input_t *in,
                                           nimble_digest_t *out_key) {
  char *bytes;
  size_t size;
  NIMBLE_RETURN_IF_ERROR(nimble_compile_key_encode(in, &bytes, &size));
  nimble_digest_compute(bytes, size, out_key);
  free(bytes);
  return nimble_ok();
}
