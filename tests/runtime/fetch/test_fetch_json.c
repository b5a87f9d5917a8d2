/* The fetcher's strict JSON reader and its OCI manifest reading: values and
 * byte offsets checked by hand; manifests made by protocol's encoder read
 * back to the descriptors that went in; a bounded mutation loop whose every
 * accepted document jansson (the independent reference) also accepts, and
 * that never crashes or leaks (ASan). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch_push.h"
#include "json_reader.h"
#include "nimble/runtime.h"
#include "nimble_test.h"
#include "oci_manifest.h"

static nimble_json_value *parse_ok(const char *text) {
  nimble_json_value *v = NULL;
  NIMBLE_ASSERT_OK(nimble_json_parse(text, strlen(text), &v));
  return v;
}

#define ASSERT_JSON_ERROR(text, fragment) \
  do {                                    \
    nimble_json_value *v_ = NULL;         \
    NIMBLE_ASSERT_ERROR(nimble_json_parse((text), strlen(text), &v_), NIMBLE_INVALID_ARGUMENT, (fragment)); \
    ck_assert_ptr_null(v_);               \
  } while (0)

START_TEST(test_objects_arrays_strings_and_integers_read_back_exactly) {
  nimble_json_value *v =
      parse_ok(" {\"a\": [1, -2, 9223372036854775807, -9223372036854775808], \"b\": \"x\\ty\","
               " \"c\": {\"d\": true, \"e\": false, \"f\": null}, \"g\": []} ");
  ck_assert_int_eq(v->kind, NIMBLE_JSON_OBJECT);
  ck_assert_uint_eq(v->length, 4);
  const nimble_json_value *a = nimble_json_get(v, "a");
  ck_assert_int_eq(a->kind, NIMBLE_JSON_ARRAY);
  ck_assert_uint_eq(a->length, 4);
  ck_assert_int_eq(a->items[0].integer, 1);
  ck_assert_int_eq(a->items[1].integer, -2);
  ck_assert(a->items[2].integer == INT64_MAX);
  ck_assert(a->items[3].integer == INT64_MIN);
  ck_assert_uint_eq(a->offset, 7); /* the '[' */
  const nimble_json_value *b = nimble_json_get(v, "b");
  ck_assert_str_eq(b->string, "x\ty");
  ck_assert_uint_eq(b->length, 3);
  const nimble_json_value *c = nimble_json_get(v, "c");
  ck_assert_int_eq(nimble_json_get(c, "d")->integer, 1);
  ck_assert_int_eq(nimble_json_get(c, "e")->kind, NIMBLE_JSON_BOOL);
  ck_assert_int_eq(nimble_json_get(c, "f")->kind, NIMBLE_JSON_NULL);
  ck_assert_uint_eq(nimble_json_get(v, "g")->length, 0);
  ck_assert_ptr_null(nimble_json_get(v, "missing"));
  nimble_json_free(v);
}
END_TEST

START_TEST(test_escapes_and_surrogate_pairs_decode_to_utf8) {
  /* U+00E9 (C3 A9), U+20AC (E2 82 AC), U+1F600 via a surrogate pair. */
  nimble_json_value *v = parse_ok("\"\\u00e9\\u20AC\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\"");
  const char want[] = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"\\/\b\f\n\r";
  ck_assert_uint_eq(v->length, sizeof want - 1);
  ck_assert_mem_eq(v->string, want, sizeof want - 1);
  nimble_json_free(v);
  v = parse_ok("\"caf\xC3\xA9\"");
  ck_assert_str_eq(v->string, "caf\xC3\xA9");
  nimble_json_free(v);
}
END_TEST

START_TEST(test_malformed_documents_are_refused_with_their_byte_offset) {
  ASSERT_JSON_ERROR("{\"a\":1,}", "at byte 7: expected a string key");
  ASSERT_JSON_ERROR("{\"a\":1 \"b\":2}", "at byte 7: expected ',' or '}'");
  ASSERT_JSON_ERROR("[1,2", "at byte 4: unterminated array");
  ASSERT_JSON_ERROR("{\"a\":1.5}", "at byte 5: real numbers are not supported");
  ASSERT_JSON_ERROR("[1e3]", "at byte 1: real numbers");
  ASSERT_JSON_ERROR("[01]", "at byte 1: leading zeros");
  ASSERT_JSON_ERROR("[9223372036854775808]", "at byte 1: integer out of the int64 range");
  ASSERT_JSON_ERROR("[-9223372036854775809]", "at byte 1: integer out of the int64 range");
  ASSERT_JSON_ERROR("{\"a\":1,\"a\":2}", "at byte 7: duplicate key 'a'");
  ASSERT_JSON_ERROR("{} x", "at byte 3: trailing bytes");
  ASSERT_JSON_ERROR("\"abc", "at byte 0: unterminated string");
  ASSERT_JSON_ERROR("\"a\tb\"", "at byte 2: control character");
  ASSERT_JSON_ERROR("\"\\x\"", "at byte 1: unknown escape");
  ASSERT_JSON_ERROR("\"\\u12\"", "at byte 1: \\u needs 4 hex digits");
  ASSERT_JSON_ERROR("\"\\ud800\"", "at byte 1: high surrogate not followed");
  ASSERT_JSON_ERROR("\"\\udc00\"", "at byte 1: lone low surrogate");
  ASSERT_JSON_ERROR("\"\xC0\xAF\"", "at byte 1: invalid UTF-8"); /* overlong '/' */
  ASSERT_JSON_ERROR("\"\xED\xA0\x80\"", "at byte 1: invalid UTF-8"); /* encoded surrogate */
  ASSERT_JSON_ERROR("[tru]", "at byte 1: invalid literal");
  ASSERT_JSON_ERROR("", "at byte 0: expected a value");
  ASSERT_JSON_ERROR("[-]", "at byte 1: a number needs digits");
  ASSERT_JSON_ERROR("{\"a\\u0000\":1}", "at byte 1: NUL in an object key");
}
END_TEST

START_TEST(test_nesting_and_size_caps_are_enforced) {
  char deep[80];
  memset(deep, '[', 33);
  memset(deep + 33, ']', 33);
  deep[66] = '\0';
  ASSERT_JSON_ERROR(deep, "at byte 32: nesting deeper than 32");
  deep[0] = ' '; /* 32 levels: accepted */
  deep[65] = ' ';
  nimble_json_value *v = parse_ok(deep);
  nimble_json_free(v);
  size_t n = NIMBLE_JSON_MAX_SIZE + 1;
  char *big = malloc(n);
  memset(big, ' ', n);
  big[0] = '0';
  nimble_json_value *w = NULL;
  NIMBLE_ASSERT_ERROR(nimble_json_parse(big, n, &w), NIMBLE_RESOURCE_EXHAUSTED,
                      "over the 4194304-byte limit");
  free(big);
}
END_TEST

#define SAMPLE_PARTS 5
static const uint8_t kBytes[SAMPLE_PARTS][3] = {
    {'a', 'b', 'c'}, {1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};

static void sample_parts(fetch_push_part parts[SAMPLE_PARTS]) {
  parts[0] = (fetch_push_part){fetch_protocol_bytecode_type, kBytes[0], 3};
  parts[1] = (fetch_push_part){fetch_protocol_constants_type, kBytes[1], 3};
  parts[2] = (fetch_push_part){fetch_protocol_kernels_x86_64_type, kBytes[2], 3};
  parts[3] = (fetch_push_part){fetch_protocol_kernels_ptx_type, kBytes[3], 3};
  parts[4] = (fetch_push_part){fetch_protocol_metadata_type, kBytes[4], 3};
}

START_TEST(test_a_manifest_from_protocols_encoder_reads_back_its_descriptors) {
  fetch_push_part parts[SAMPLE_PARTS];
  sample_parts(parts);
  char *m;
  size_t n;
  fetch_encode_protocol_manifest(parts, SAMPLE_PARTS, &m, &n);
  nimble_fetch_manifest_t got;
  NIMBLE_ASSERT_OK(nimble_fetch_manifest_parse(m, n, &got));
  ck_assert_str_eq(got.config.media_type, fetch_protocol_config_type);
  ck_assert_uint_eq(got.layer_count, SAMPLE_PARTS);
  for (int i = 0; i < SAMPLE_PARTS; i++) {
    char want[72];
    fetch_reference_digest(parts[i].data, parts[i].size, want);
    ck_assert_str_eq(got.layers[i].media_type, parts[i].media_type);
    ck_assert_str_eq(got.layers[i].digest, want);
    ck_assert_uint_eq(got.layers[i].size, 3);
  }
  free(m);
}
END_TEST

START_TEST(test_the_fetchers_layer_names_match_protocols) {
  /* The fetcher maps layers to parts with the runtime's
   * nimble_part_kind_from_media_type (the runtime does not link protocol;
   * both spell the types through nimble/media_type.h): protocol's every
   * layer type, written out as docs/artifacts.md lists it, must name the
   * part the runtime gives it, and back. */
  ck_assert_str_eq(fetch_protocol_metadata_type, "application/vnd.nimble.executable.metadata.v1");
  ck_assert_str_eq(fetch_protocol_bytecode_type, "application/vnd.nimble.bytecode.v1");
  ck_assert_str_eq(fetch_protocol_constants_type, "application/vnd.nimble.constants.v1");
  ck_assert_str_eq(fetch_protocol_kernels_x86_64_type,
                   "application/vnd.nimble.kernels.x86_64-linux-gnu.v1+elf");
  ck_assert_str_eq(fetch_protocol_kernels_aarch64_type,
                   "application/vnd.nimble.kernels.aarch64-linux-gnu.v1+elf");
  ck_assert_str_eq(fetch_protocol_kernels_ptx_type,
                   "application/vnd.nimble.kernels.nvptx64-nvidia-cuda.v1+ptx");
  ck_assert_str_eq(fetch_protocol_config_type, NIMBLE_MEDIA_TYPE_CONFIG);
  const struct {
    const char *protocol;
    nimble_part_kind_t kind;
    const char *triple;
  } kPairs[] = {
      {fetch_protocol_metadata_type, NIMBLE_PART_METADATA, NULL},
      {fetch_protocol_bytecode_type, NIMBLE_PART_BYTECODE, NULL},
      {fetch_protocol_constants_type, NIMBLE_PART_CONSTANTS, NULL},
      {fetch_protocol_kernels_x86_64_type, NIMBLE_PART_KERNELS_CPU, "x86_64-linux-gnu"},
      {fetch_protocol_kernels_aarch64_type, NIMBLE_PART_KERNELS_CPU, "aarch64-linux-gnu"},
      {fetch_protocol_kernels_ptx_type, NIMBLE_PART_KERNELS_CUDA, NULL},
  };
  for (size_t i = 0; i < sizeof kPairs / sizeof kPairs[0]; i++) {
    ck_assert_int_eq(nimble_part_kind_from_media_type(kPairs[i].protocol), kPairs[i].kind);
    ck_assert_str_eq(nimble_part_media_type_for_target(kPairs[i].kind,
                                                       kPairs[i].triple ? kPairs[i].triple
                                                                        : "x86_64-linux-gnu"),
                     kPairs[i].protocol);
  }
  /* The config blob is not a part. */
  ck_assert_int_eq(nimble_part_kind_from_media_type(fetch_protocol_config_type), 0);
}
END_TEST

#define GOOD_DIGEST "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CONFIG "{\"mediaType\":\"application/vnd.nimble.executable.config.v1+json\",\"digest\":\"" GOOD_DIGEST "\",\"size\":0}"
#define HEAD "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"," \
             "\"artifactType\":\"application/vnd.nimble.executable.v1\",\"config\":" CONFIG ","

static void assert_manifest_error(const char *text, nimble_status_code_t code, const char *fragment) {
  nimble_fetch_manifest_t m;
  NIMBLE_ASSERT_ERROR(nimble_fetch_manifest_parse(text, strlen(text), &m), code, fragment);
}

START_TEST(test_bad_manifests_name_the_field_at_fault) {
  assert_manifest_error(HEAD "\"layers\":[{\"mediaType\":\"x\",\"digest\":\"sha256:abc\",\"size\":1}]}",
                        NIMBLE_INVALID_ARGUMENT, "layers[0].digest: 'sha256:abc' is not sha256");
  assert_manifest_error(HEAD "\"layers\":[{\"mediaType\":\"x\",\"digest\":\"" GOOD_DIGEST "\",\"size\":-1}]}",
                        NIMBLE_INVALID_ARGUMENT, "layers[0].size: -1 is out of the range");
  assert_manifest_error(HEAD "\"layers\":[{\"mediaType\":\"x\",\"digest\":\"" GOOD_DIGEST "\",\"size\":\"1\"}]}",
                        NIMBLE_INVALID_ARGUMENT, "layers[0].size: expected an integer, got a string");
  assert_manifest_error(HEAD "\"layers\":[{\"digest\":\"" GOOD_DIGEST "\",\"size\":1}]}",
                        NIMBLE_INVALID_ARGUMENT, "layers[0].mediaType: missing");
  assert_manifest_error(HEAD "\"layers\":[]}", NIMBLE_INVALID_ARGUMENT, "layers: 0 items");
  assert_manifest_error(HEAD "\"layers\":{}}", NIMBLE_INVALID_ARGUMENT, "layers: expected an array");
  assert_manifest_error(
      "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\"}",
      NIMBLE_UNIMPLEMENTED, "mediaType: expected 'application/vnd.oci.image.manifest.v1+json'");
  assert_manifest_error(
      "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
      "\"artifactType\":\"application/vnd.example\"}",
      NIMBLE_UNIMPLEMENTED, "artifactType: expected 'application/vnd.nimble.executable.v1'");
  assert_manifest_error("{\"schemaVersion\":1}", NIMBLE_UNIMPLEMENTED, "schemaVersion: expected 2");
  assert_manifest_error("[]", NIMBLE_INVALID_ARGUMENT, "document: expected an object");
  assert_manifest_error("{\"schemaVersion\":2", NIMBLE_INVALID_ARGUMENT, "manifest: json: at byte 18: unterminated object");
}
END_TEST

/* xorshift64*: a deterministic mutation stream. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

START_TEST(test_mutated_manifests_never_crash_and_agree_with_jansson) {
  fetch_push_part parts[SAMPLE_PARTS];
  sample_parts(parts);
  char *seed;
  size_t seed_n;
  fetch_encode_protocol_manifest(parts, SAMPLE_PARTS, &seed, &seed_n);
  static const char kTokens[] = "{}[]\":,\\-0123456789eE.tfnu \t\x80\xC3\xFF";
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  uint8_t *buf = malloc(seed_n + 64);
  unsigned accepted = 0, agreed_refusals = 0;
  for (int iter = 0; iter < 20000; iter++) {
    memcpy(buf, seed, seed_n);
    size_t n = seed_n;
    int edits = 1 + (int)(next_random(&rng) % 4);
    for (int e = 0; e < edits; e++) {
      uint64_t r = next_random(&rng);
      size_t at = (size_t)(r >> 8) % (n ? n : 1);
      switch (r % 4) {
        case 0: if (n) buf[at] = (uint8_t)kTokens[(r >> 40) % (sizeof kTokens - 1)]; break;
        case 1: if (n) { memmove(buf + at, buf + at + 1, n - at - 1); n--; } break;
        case 2: if (n < seed_n + 60) { memmove(buf + at + 1, buf + at, n - at); buf[at] = (uint8_t)kTokens[(r >> 40) % (sizeof kTokens - 1)]; n++; } break;
        case 3: n = at; break; /* truncate */
      }
    }
    nimble_json_value *v = NULL;
    nimble_status_t s = nimble_json_parse(buf, n, &v);
    json_error_t err;
    json_t *ref = json_loadb((const char *)buf, n,
                             JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!s) {
      accepted++;
      ck_assert_msg(ref != NULL, "iteration %d: accepted what jansson refuses (%s): %.*s", iter,
                    err.text, (int)n, (const char *)buf);
      nimble_json_free(v);
      nimble_fetch_manifest_t m;
      nimble_status_free(nimble_fetch_manifest_parse(buf, n, &m));
    } else {
      if (!ref) agreed_refusals++;
      nimble_status_free(s);
    }
    json_decref(ref);
  }
  /* The loop exercised both sides. */
  ck_assert_uint_gt(accepted, 100);
  ck_assert_uint_gt(agreed_refusals, 1000);
  free(buf);
  free(seed);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fetch_json");
  TCase *tc = tcase_create("json");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_objects_arrays_strings_and_integers_read_back_exactly);
  tcase_add_test(tc, test_escapes_and_surrogate_pairs_decode_to_utf8);
  tcase_add_test(tc, test_malformed_documents_are_refused_with_their_byte_offset);
  tcase_add_test(tc, test_nesting_and_size_caps_are_enforced);
  tcase_add_test(tc, test_a_manifest_from_protocols_encoder_reads_back_its_descriptors);
  tcase_add_test(tc, test_the_fetchers_layer_names_match_protocols);
  tcase_add_test(tc, test_bad_manifests_name_the_field_at_fault);
  tcase_add_test(tc, test_mutated_manifests_never_crash_and_agree_with_jansson);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
