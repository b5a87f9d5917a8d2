/* libFuzzer target for the fetcher's strict JSON reader (json_reader.c),
 * which reads manifests straight off the network. Built with clang-16 by
 * runtime/fetch/CMakeLists.txt (`cmake --build BUILD --target
 * fuzz_json_reader`) and run by bench/fuzz/run.sh; tests/fuzz replays the
 * corpus (tests/fuzz/json_reader/corpus) through this same function in
 * every build. docs/reliability.md, "Fuzzing".
 *
 * Beyond "no crash, no leak, no UB", each input is checked against jansson,
 * an independent reader:
 *  - whatever ours accepts, jansson accepts, and the two trees are equal
 *    (kinds, integers, string bytes, keys in order);
 *  - whatever jansson accepts and ours refuses breaks one of ours' stated
 *    limits (a real number, nesting deeper than NIMBLE_JSON_MAX_DEPTH, more
 *    than NIMBLE_JSON_MAX_VALUES values), or holds a NUL byte (jansson
 *    reads "true\0junk" as true);
 *  - a refusal is INVALID_ARGUMENT with a message naming the byte.
 * Any disagreement aborts, so the fuzzer reports it like a crash. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) {
  fprintf(stderr, "fuzz_json_reader: %s\n", what);
  abort();
}

/* 1 when our tree v equals jansson's j. */
static int same(const nimble_json_value *v, const json_t *j) {
  switch (v->kind) {
    case NIMBLE_JSON_NULL: return json_is_null(j);
    case NIMBLE_JSON_BOOL: return json_is_boolean(j) && (v->integer != 0) == json_is_true(j);
    case NIMBLE_JSON_INT: return json_is_integer(j) && json_integer_value(j) == v->integer;
    case NIMBLE_JSON_STRING:
      return json_is_string(j) && json_string_length(j) == v->length &&
             memcmp(json_string_value(j), v->string, v->length) == 0 && v->string[v->length] == '\0';
    case NIMBLE_JSON_ARRAY:
      if (!json_is_array(j) || json_array_size(j) != v->length) return 0;
      for (size_t i = 0; i < v->length; i++)
        if (!same(&v->items[i], json_array_get(j, i))) return 0;
      return 1;
    case NIMBLE_JSON_OBJECT: {
      if (!json_is_object(j) || json_object_size(j) != v->length) return 0;
      for (size_t i = 0; i < v->length; i++) {
        const json_t *m = json_object_get(j, v->keys[i]);
        if (!m || !same(&v->items[i], m)) return 0;
        if (nimble_json_get(v, v->keys[i]) != &v->items[i]) return 0; /* keys are unique */
      }
      return 1;
    }
  }
  return 0;
}

/* Why ours may refuse what jansson accepts: counts values and depth the
 * way json_reader.c does (the root is at depth 1). */
typedef struct limits {
  size_t values;
  int deepest, real;
} limits;

static void measure(const json_t *j, int depth, limits *l) {
  l->values++;
  if (depth > l->deepest) l->deepest = depth;
  if (json_is_real(j)) l->real = 1;
  if (json_is_array(j)) {
    for (size_t i = 0; i < json_array_size(j); i++) measure(json_array_get(j, i), depth + 1, l);
  } else if (json_is_object(j)) {
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)j, k, m) measure(m, depth + 1, l);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nimble_json_value *v = NULL;
  nimble_status_t s = nimble_json_parse(data, size, &v);
  json_error_t err;
  /* jansson as ours reads: any value at the top, \u0000 allowed inside
   * strings (ours keeps its length), duplicate keys refused. */
  json_t *ref = json_loadb((const char *)data, size,
                           JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);
  if (!s) {
    if (!v) fail("accepted without a tree");
    if (!ref) fail("accepted a document jansson refuses");
    if (!same(v, ref)) fail("the tree differs from jansson's");
    nimble_json_free(v);
  } else {
    if (v) fail("refused but left a tree");
    if (nimble_status_code(s) != NIMBLE_INVALID_ARGUMENT &&
        nimble_status_code(s) != NIMBLE_RESOURCE_EXHAUSTED)
      fail("refused with a code other than INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
    if (!strstr(nimble_status_message(s), "json: ")) fail("the error does not say json");
    /* jansson (2.14, with JSON_DECODE_ANY) takes a top-level scalar
     * followed by a NUL byte and more as the scalar alone ("true\0\t"):
     * its quirk, not ours to match. */
    if (ref && size <= NIMBLE_JSON_MAX_SIZE && !memchr(data, '\0', size)) {
      limits l = {0, 0, 0};
      measure(ref, 1, &l);
      if (!l.real && l.deepest <= NIMBLE_JSON_MAX_DEPTH && l.values <= NIMBLE_JSON_MAX_VALUES) {
        fprintf(stderr, "fuzz_json_reader: ours: %s\n", nimble_status_message(s));
        fail("refused a document jansson accepts, within the stated limits");
      }
    }
    nimble_status_free(s);
  }
  json_decref(ref);
  return 0;
}
