/* The server's pure pieces: Range and Content-Range parsing (RFC 9110
 * examples), route splitting, bearer tokens and OCI error bodies. */
#include <jansson.h>
#include <string.h>

#include "nimble_test.h"

#include "auth.h"
#include "http_errors.h"
#include "http_range.h"
#include "nimble/store_fs.h"
#include "oci_routes.h"

static void expect_partial(const char *h, uint64_t size, uint64_t start, uint64_t len) {
  uint64_t s = 99, l = 99;
  ck_assert_msg(nimble_http_range_parse(h, size, &s, &l) == NIMBLE_RANGE_PARTIAL, "%s", h);
  ck_assert_msg(s == start && l == len, "%s: got start %llu len %llu", h, (unsigned long long)s,
                (unsigned long long)l);
}

START_TEST(test_range_forms_from_rfc_9110_select_the_right_bytes) {
  /* RFC 9110 14.1.2 examples on a 10000-byte representation. */
  expect_partial("bytes=0-499", 10000, 0, 500);
  expect_partial("bytes=500-999", 10000, 500, 500);
  expect_partial("bytes=-500", 10000, 9500, 500);
  expect_partial("bytes=9500-", 10000, 9500, 500);
  expect_partial("bytes=0-0", 10000, 0, 1);
  expect_partial("bytes=-1", 10000, 9999, 1);
  /* A last position past the end is clamped. */
  expect_partial("bytes=9000-20000", 10000, 9000, 1000);
  expect_partial("bytes=-20000", 10000, 0, 10000);
}
END_TEST

START_TEST(test_range_outside_the_content_is_unsatisfiable) {
  uint64_t s, l;
  ck_assert(nimble_http_range_parse("bytes=10000-", 10000, &s, &l) == NIMBLE_RANGE_UNSATISFIABLE);
  ck_assert(nimble_http_range_parse("bytes=5-9", 5, &s, &l) == NIMBLE_RANGE_UNSATISFIABLE);
  ck_assert(nimble_http_range_parse("bytes=-0", 5, &s, &l) == NIMBLE_RANGE_UNSATISFIABLE);
  ck_assert(nimble_http_range_parse("bytes=0-", 0, &s, &l) == NIMBLE_RANGE_UNSATISFIABLE);
}
END_TEST

START_TEST(test_malformed_or_multiple_ranges_are_ignored) {
  uint64_t s, l;
  const char *ignored[] = {
      NULL,        "",          "bytes",         "bytes=",    "bytes=-",
      "items=0-1", "bytes=5-1", "bytes=0-1,3-4", "bytes=a-b", "bytes=99999999999999999999999-"};
  for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
    ck_assert_msg(nimble_http_range_parse(ignored[i], 100, &s, &l) == NIMBLE_RANGE_WHOLE, "%s",
                  ignored[i] ? ignored[i] : "(null)");
}
END_TEST

START_TEST(test_content_range_accepts_oci_and_rfc_forms) {
  uint64_t s, e;
  NIMBLE_ASSERT_OK(nimble_http_content_range_parse("0-1023", &s, &e));
  ck_assert(s == 0 && e == 1023);
  NIMBLE_ASSERT_OK(nimble_http_content_range_parse("bytes 1024-2047/*", &s, &e));
  ck_assert(s == 1024 && e == 2047);
  NIMBLE_ASSERT_OK(nimble_http_content_range_parse("bytes 5-9/10", &s, &e));
  ck_assert(s == 5 && e == 9);
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("9-5", &s, &e), NIMBLE_INVALID_ARGUMENT,
                      "end 5 is before start 9");
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("x-5", &s, &e), NIMBLE_INVALID_ARGUMENT,
                      "expected a start offset");
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("5", &s, &e), NIMBLE_INVALID_ARGUMENT,
                      "expected '-'");
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("1-2x", &s, &e), NIMBLE_INVALID_ARGUMENT,
                      "trailing");
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("bytes 5-9/9", &s, &e),
                      NIMBLE_INVALID_ARGUMENT, "bad total");
  NIMBLE_ASSERT_ERROR(nimble_http_content_range_parse("0-99999999999999999999", &s, &e),
                      NIMBLE_INVALID_ARGUMENT, "expected an end offset");
}
END_TEST

static void expect_route(const char *path, nimble_oci_route_kind kind, const char *name,
                         const char *arg) {
  nimble_oci_route r;
  ck_assert(nimble_oci_route_parse(path, &r));
  ck_assert_msg(r.kind == kind, "%s: kind %d, want %d", path, r.kind, kind);
  if (name) ck_assert_str_eq(r.name, name);
  if (arg) ck_assert_str_eq(r.arg, arg);
  nimble_oci_route_deinit(&r);
}

START_TEST(test_routes_are_split_from_the_right) {
  expect_route("/v2/", NIMBLE_ROUTE_BASE, NULL, NULL);
  expect_route("/v2/a/b/blobs/sha256:00", NIMBLE_ROUTE_BLOB, "a/b", "sha256:00");
  expect_route("/v2/a/blobs/uploads/", NIMBLE_ROUTE_UPLOAD_NEW, "a", "");
  expect_route("/v2/a/blobs/uploads/abc", NIMBLE_ROUTE_UPLOAD, "a", "abc");
  /* A name may itself contain the words the routes use. */
  expect_route("/v2/blobs/manifests/x/manifests/latest", NIMBLE_ROUTE_MANIFEST, "blobs/manifests/x",
               "latest");
  expect_route("/v2/tags/tags/list", NIMBLE_ROUTE_TAGS, "tags", "");
  expect_route("/v2/a/tags/other", NIMBLE_ROUTE_NONE, NULL, NULL);
  expect_route("/v2/a/blobs/", NIMBLE_ROUTE_NONE, NULL, NULL);
  expect_route("/other", NIMBLE_ROUTE_NONE, NULL, NULL);
  expect_route("/v2/x", NIMBLE_ROUTE_NONE, NULL, NULL);
}
END_TEST

START_TEST(test_tokens_match_only_listed_bearer_values) {
  const char *file = "# comment\n\n  alpha  \nbeta-token\r\n#gamma\n";
  nimble_store_auth *a = NULL;
  NIMBLE_ASSERT_OK(nimble_store_auth_parse(file, strlen(file), &a));
  ck_assert_uint_eq(nimble_store_auth_count(a), 2);
  ck_assert(nimble_store_auth_check(a, "Bearer alpha"));
  ck_assert(nimble_store_auth_check(a, "bearer beta-token"));
  ck_assert(!nimble_store_auth_check(a, "Bearer gamma"));  /* commented out */
  ck_assert(!nimble_store_auth_check(a, "Bearer alph"));   /* prefix */
  ck_assert(!nimble_store_auth_check(a, "Bearer alphaa")); /* longer */
  ck_assert(!nimble_store_auth_check(a, "Basic alpha"));
  ck_assert(!nimble_store_auth_check(a, "Bearer "));
  ck_assert(!nimble_store_auth_check(a, "Beareralpha"));
  ck_assert(!nimble_store_auth_check(a, NULL));
  nimble_store_auth_destroy(a);
}
END_TEST

START_TEST(test_token_file_without_tokens_or_with_bad_bytes_is_refused) {
  nimble_store_auth *a = NULL;
  NIMBLE_ASSERT_ERROR(nimble_store_auth_parse("# only\n\n", 8, &a), NIMBLE_INVALID_ARGUMENT,
                      "holds no token");
  NIMBLE_ASSERT_ERROR(nimble_store_auth_parse("ok\nbad token\n", 13, &a), NIMBLE_INVALID_ARGUMENT,
                      "line 2: character 3 (0x20)");
  NIMBLE_ASSERT_ERROR(nimble_store_auth_load("/nonexistent/tokens", &a), NIMBLE_NOT_FOUND,
                      "/nonexistent/tokens");
}
END_TEST

START_TEST(test_error_body_is_the_oci_json_shape) {
  char *text = nimble_oci_error_body("BLOB_UNKNOWN", "blob \"x\" is\nmissing", NULL);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  ck_assert_ptr_nonnull(root);
  json_t *e = json_array_get(json_object_get(root, "errors"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(e, "code")), "BLOB_UNKNOWN");
  ck_assert_str_eq(json_string_value(json_object_get(e, "message")), "blob \"x\" is\nmissing");
  ck_assert(json_is_null(json_object_get(e, "detail")));
  json_decref(root);
  free(text);
  /* Invalid UTF-8 from a URL still gives valid JSON. */
  text = nimble_oci_error_body("NAME_INVALID", "bad \xff name", "d");
  root = json_loads(text, 0, &err);
  ck_assert_ptr_nonnull(root);
  json_decref(root);
  free(text);
}
END_TEST

/* Random bytes and random mixes of the grammar's own characters: every
 * parser must answer (accept or refuse) without crashing or reading out of
 * bounds (the ASan build checks the latter). Accepted names are re-checked
 * against the properties the store relies on. */
START_TEST(test_random_input_never_breaks_the_parsers) {
  const char alphabet[] =
      "/v2abz09.-_:%@ \x7f\x80"
      "blobsuploadsmanifeststagslist";
  unsigned seed = 12345;
  char text[300];
  for (int iter = 0; iter < 20000; iter++) {
    size_t len = (size_t)(rand_r(&seed) % 280);
    int mode = rand_r(&seed) % 3;
    for (size_t i = 0; i < len; i++) {
      int r = rand_r(&seed);
      text[i] = mode == 0 ? (char)(r % 255 + 1) : alphabet[(size_t)r % (sizeof alphabet - 1)];
    }
    text[len] = '\0';
    if (mode == 2 && len >= 4) memcpy(text, "/v2/", 4);
    nimble_oci_route route;
    ck_assert(nimble_oci_route_parse(text, &route));
    if (route.name) {
      nimble_status_t st = nimble_store_name_check(route.name);
      if (!st) {
        ck_assert(strstr(route.name, "..") == NULL);
        ck_assert(strstr(route.name, "//") == NULL);
        ck_assert(route.name[0] != '/');
        ck_assert(strlen(route.name) <= 255);
      }
      nimble_status_free(st);
    }
    nimble_oci_route_deinit(&route);
    uint64_t a, b;
    (void)nimble_http_range_parse(text, (uint64_t)len, &a, &b);
    nimble_status_free(nimble_http_content_range_parse(text, &a, &b));
    nimble_status_free(nimble_store_tag_check(text));
    nimble_store_auth *auth = NULL;
    nimble_status_t st = nimble_store_auth_parse(text, len, &auth);
    if (!st) {
      ck_assert_uint_ge(nimble_store_auth_count(auth), 1);
      nimble_store_auth_destroy(auth);
    }
    nimble_status_free(st);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("store_http_parts");
  TCase *tc = tcase_create("parts");
  tcase_add_test(tc, test_range_forms_from_rfc_9110_select_the_right_bytes);
  tcase_add_test(tc, test_range_outside_the_content_is_unsatisfiable);
  tcase_add_test(tc, test_malformed_or_multiple_ranges_are_ignored);
  tcase_add_test(tc, test_content_range_accepts_oci_and_rfc_forms);
  tcase_add_test(tc, test_routes_are_split_from_the_right);
  tcase_add_test(tc, test_tokens_match_only_listed_bearer_values);
  tcase_add_test(tc, test_token_file_without_tokens_or_with_bad_bytes_is_refused);
  tcase_add_test(tc, test_error_body_is_the_oci_json_shape);
  tcase_add_test(tc, test_random_input_never_breaks_the_parsers);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
