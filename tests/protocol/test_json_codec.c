/* Canonical JSON and checked field access (the private json_codec module). */
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#include "json_codec.h"

static char *dump(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
  ck_assert_msg(j != NULL, "bad test JSON %s", text);
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_json_dump_canonical(j, &out, &n));
  ck_assert_uint_eq(n, strlen(out));
  json_decref(j);
  return out;
}

static void expect_dump(const char *text, const char *want) {
  char *out = dump(text);
  ck_assert_str_eq(out, want);
  free(out);
}

/* Expected bytes were cross-checked with Python:
 * json.dumps(json.loads(t), sort_keys=True, separators=(",", ":"),
 *            ensure_ascii=False) */
START_TEST(test_canonical_form_is_compact_sorted_by_bytes_and_utf8) {
  expect_dump("{ \"b\" : 1, \"a\" : [ 3 , 2 ] }", "{\"a\":[3,2],\"b\":1}");
  expect_dump("{\"a\":1,\"B\":2,\"\xc3\xa9\":3,\"aa\":4,\"\":5}",
              "{\"\":5,\"B\":2,\"a\":1,\"aa\":4,\"\xc3\xa9\":3}");
  expect_dump("{\"k\":\"\\u00e9/\\\"\\\\\"}", "{\"k\":\"\xc3\xa9/\\\"\\\\\"}");
  expect_dump("{\"k\":\"\\n\\t\\u0001\"}", "{\"k\":\"\\n\\t\\u0001\"}");
  expect_dump("{\"n\":-9223372036854775808,\"t\":true,\"z\":null}",
              "{\"n\":-9223372036854775808,\"t\":true,\"z\":null}");
  expect_dump("{\"o\":{\"y\":{},\"x\":[]}}", "{\"o\":{\"x\":[],\"y\":{}}}");
}
END_TEST

START_TEST(test_reals_are_refused_with_their_path) {
  json_t *j = json_pack("{s:[i,{s:f}]}", "a", 1, "b", 0.5);
  char *out;
  size_t n;
  NIMBLE_ASSERT_ERROR(nimble_json_dump_canonical(j, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "a[1].b: real numbers are not allowed");
  json_decref(j);
  j = json_real(1.0);
  NIMBLE_ASSERT_ERROR(nimble_json_dump_canonical(j, &out, &n), NIMBLE_INVALID_ARGUMENT,
                      "(document): real numbers");
  json_decref(j);
}
END_TEST

START_TEST(test_load_checks_size_syntax_duplicates_and_root) {
  json_t *j;
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("{}", 2, 1, "doc", &j), NIMBLE_RESOURCE_EXHAUSTED,
                      "doc: 2 bytes is over the limit of 1 bytes");
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("{\"a\":1,\"a\":2}", 13, 100, "doc", &j),
                      NIMBLE_INVALID_ARGUMENT, "doc: invalid JSON at line 1");
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("{\n\"a\" 1}", 8, 100, "doc", &j),
                      NIMBLE_INVALID_ARGUMENT, "doc: invalid JSON at line 2, column");
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("7", 1, 100, "doc", &j), NIMBLE_INVALID_ARGUMENT,
                      "invalid JSON");
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("\"s\"", 3, 100, "doc", &j),
                      NIMBLE_INVALID_ARGUMENT, "invalid JSON");
  NIMBLE_ASSERT_ERROR(nimble_json_load_object("[]", 2, 100, "doc", &j), NIMBLE_INVALID_ARGUMENT,
                      "doc: expected a JSON object, got an array");
  /* The size given is honoured: bytes past it are not read. */
  NIMBLE_ASSERT_OK(nimble_json_load_object("{}garbage", 2, 100, "doc", &j));
  json_decref(j);
}
END_TEST

START_TEST(test_getters_name_the_path_and_the_problem) {
  json_error_t err;
  json_t *o = json_loads("{\"s\":\"abc\",\"i\":5,\"b\":true,\"r\":1.5,\"e\":\"\",\"a\":[1,2]}", 0, &err);
  const char *s = NULL;
  int64_t i = 0;
  int b = 0, present = 7;
  json_t *a = NULL;
  NIMBLE_ASSERT_OK(nimble_json_get_string(o, "x", "s", 1, 3, &s));
  ck_assert_str_eq(s, "abc");
  NIMBLE_ASSERT_ERROR(nimble_json_get_string(o, "x", "s", 1, 2, &s), NIMBLE_INVALID_ARGUMENT,
                      "x.s: 3 bytes is longer than 2");
  NIMBLE_ASSERT_ERROR(nimble_json_get_string(o, "x", "e", 1, 9, &s), NIMBLE_INVALID_ARGUMENT,
                      "x.e: empty string");
  NIMBLE_ASSERT_ERROR(nimble_json_get_string(o, "", "i", 1, 9, &s), NIMBLE_INVALID_ARGUMENT,
                      "i: expected a string, got an integer");
  NIMBLE_ASSERT_ERROR(nimble_json_get_string(o, "x[2]", "zz", 1, 9, &s), NIMBLE_INVALID_ARGUMENT,
                      "x[2].zz: missing");
  s = NULL;
  NIMBLE_ASSERT_OK(nimble_json_get_string(o, "x", "zz", 0, 9, &s));
  ck_assert_ptr_null(s);
  NIMBLE_ASSERT_OK(nimble_json_get_int(o, "", "i", 1, 0, 5, &i, &present));
  ck_assert_int_eq(i, 5);
  ck_assert_int_eq(present, 1);
  NIMBLE_ASSERT_OK(nimble_json_get_int(o, "", "zz", 0, 0, 5, &i, &present));
  ck_assert_int_eq(present, 0);
  NIMBLE_ASSERT_ERROR(nimble_json_get_int(o, "", "i", 1, 6, 9, &i, NULL), NIMBLE_INVALID_ARGUMENT,
                      "i: 5 is outside [6, 9]");
  NIMBLE_ASSERT_ERROR(nimble_json_get_int(o, "", "r", 1, 0, 9, &i, NULL), NIMBLE_INVALID_ARGUMENT,
                      "r: expected an integer, got a real number");
  NIMBLE_ASSERT_OK(nimble_json_get_bool(o, "", "b", 1, &b, NULL));
  ck_assert_int_eq(b, 1);
  NIMBLE_ASSERT_ERROR(nimble_json_get_bool(o, "", "s", 1, &b, NULL), NIMBLE_INVALID_ARGUMENT,
                      "s: expected a boolean, got a string");
  NIMBLE_ASSERT_OK(nimble_json_get_array(o, "", "a", 1, 2, 2, &a));
  ck_assert_uint_eq(json_array_size(a), 2);
  NIMBLE_ASSERT_ERROR(nimble_json_get_array(o, "", "a", 1, 3, 9, &a), NIMBLE_INVALID_ARGUMENT,
                      "a: needs at least 3 items, got 2");
  NIMBLE_ASSERT_ERROR(nimble_json_get_array(o, "", "a", 1, 0, 1, &a), NIMBLE_INVALID_ARGUMENT,
                      "a: 2 items is more than 1");
  NIMBLE_ASSERT_ERROR(nimble_json_get_object(o, "", "a", 1, &a), NIMBLE_INVALID_ARGUMENT,
                      "a: expected an object, got an array");
  nimble_digest_t d;
  NIMBLE_ASSERT_ERROR(nimble_json_get_digest(o, "p", "s", 1, &d, NULL), NIMBLE_INVALID_ARGUMENT,
                      "p.s: digest 'abc': expected 'sha256:");
  json_decref(o);
}
END_TEST

START_TEST(test_paths_quote_odd_keys_and_stay_bounded) {
  char p[NIMBLE_JSON_PATH_MAX];
  nimble_json_path_key(p, "", "k\x01y");
  ck_assert_str_eq(p, "k?y");
  nimble_json_path_index(p, "layers", 12);
  ck_assert_str_eq(p, "layers[12]");
  char longkey[500];
  memset(longkey, 'k', sizeof(longkey) - 1);
  longkey[sizeof(longkey) - 1] = '\0';
  nimble_json_path_key(p, "root", longkey);
  ck_assert_uint_lt(strlen(p), NIMBLE_JSON_PATH_MAX);
  ck_assert_ptr_nonnull(strstr(p, "..."));
}
END_TEST

int main(void) {
  Suite *s = suite_create("json_codec");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_canonical_form_is_compact_sorted_by_bytes_and_utf8);
  tcase_add_test(tc, test_reals_are_refused_with_their_path);
  tcase_add_test(tc, test_load_checks_size_syntax_duplicates_and_root);
  tcase_add_test(tc, test_getters_name_the_path_and_the_problem);
  tcase_add_test(tc, test_paths_quote_odd_keys_and_stay_bounded);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
