/* Store references parse into base URL, name and tag or digest; malformed
 * ones are INVALID_ARGUMENT naming the problem and the byte. */
#include "nimble/fetch.h"
#include "nimble_test.h"

#define DIGEST "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

START_TEST(test_tag_and_digest_references_split_into_their_parts) {
  nimble_fetch_reference_t r;
  NIMBLE_ASSERT_OK(nimble_fetch_parse_reference("http://127.0.0.1:5000/team/bert:x86", &r));
  ck_assert_str_eq(r.base_url, "http://127.0.0.1:5000");
  ck_assert_str_eq(r.name, "team/bert");
  ck_assert_str_eq(r.tag, "x86");
  ck_assert_ptr_null(r.digest);
  nimble_fetch_reference_deinit(&r);

  NIMBLE_ASSERT_OK(nimble_fetch_parse_reference("https://store.example.com/a/b-c/d__e.f@" DIGEST, &r));
  ck_assert_str_eq(r.base_url, "https://store.example.com");
  ck_assert_str_eq(r.name, "a/b-c/d__e.f");
  ck_assert_ptr_null(r.tag);
  ck_assert_str_eq(r.digest, DIGEST);
  nimble_fetch_reference_deinit(&r);

  /* NAME:TAG@DIGEST, as `nimble submit` prints: the digest pins it, the
   * tag is kept for the signature check. */
  NIMBLE_ASSERT_OK(nimble_fetch_parse_reference("http://h:5000/team/bert:x86@" DIGEST, &r));
  ck_assert_str_eq(r.name, "team/bert");
  ck_assert_str_eq(r.tag, "x86");
  ck_assert_str_eq(r.digest, DIGEST);
  nimble_fetch_reference_deinit(&r);

  NIMBLE_ASSERT_OK(nimble_fetch_parse_reference("http://[::1]:8080/m:x86-84a9ff0d0f0134a5", &r));
  ck_assert_str_eq(r.base_url, "http://[::1]:8080");
  ck_assert_str_eq(r.name, "m");
  ck_assert_str_eq(r.tag, "x86-84a9ff0d0f0134a5");
  nimble_fetch_reference_deinit(&r);

  ck_assert_int_eq(nimble_fetch_looks_like_reference("http://h/m:t"), 1);
  ck_assert_int_eq(nimble_fetch_looks_like_reference("model.nimble"), 0);
  ck_assert_int_eq(nimble_fetch_looks_like_reference("/tmp/http://x"), 0);
}
END_TEST

static void assert_bad(const char *text, const char *fragment) {
  nimble_fetch_reference_t r;
  NIMBLE_ASSERT_ERROR(nimble_fetch_parse_reference(text, &r), NIMBLE_INVALID_ARGUMENT, fragment);
  ck_assert_ptr_null(r.base_url);
  ck_assert_ptr_null(r.name);
}

START_TEST(test_bad_references_name_the_problem_and_its_byte) {
  assert_bad("ftp://h:1/m:t", "at byte 0: expected http:// or https://");
  assert_bad("model.nimble", "at byte 0: expected http://");
  assert_bad("http:///m:t", "at byte 7: missing host");
  assert_bad("http://h:/m:t", "at byte 9: missing port");
  assert_bad("http://h:70000/m:t", "at byte 9: port must be 1 to 65535");
  assert_bad("http://h:0/m:t", "port must be 1 to 65535");
  assert_bad("http://h:5000", "at byte 13: missing '/NAME:TAG'");
  assert_bad("http://h_x:5000/m:t", "at byte 8: invalid character in the host");
  assert_bad("http://h:5000/team/bert", "missing ':TAG' or '@sha256:...'");
  assert_bad("http://h:5000/Team/bert:x86", "at byte 14: a name component must start with a lowercase");
  assert_bad("http://h:5000/team/../bert:x86", "at byte 19: a name component must start");
  assert_bad("http://h:5000/team//bert:x86", "at byte 19: a name component must start");
  assert_bad("http://h:5000/te$m:x86", "at byte 16: a name may hold only");
  assert_bad("http://h:5000/team-:x86", "at byte 18: a separator in a name must be followed");
  assert_bad("http://h:5000/:x86", "at byte 14: empty name");
  assert_bad("http://h:5000/m:", "at byte 16: empty tag");
  assert_bad("http://h:5000/m:-x", "at byte 16: a tag must start with");
  assert_bad("http://h:5000/m:a/b", "missing ':TAG'");
  assert_bad("http://h:5000/m:a b", "at byte 17: a tag may hold only");
  assert_bad("http://h:5000/m@sha256:abc", "at byte 16: expected a digest sha256:<64 lowercase hex");
  assert_bad("http://h:5000/m@" "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
             "expected a digest");
  assert_bad("http://h:5000/m:@" DIGEST, "at byte 16: empty tag");
  assert_bad("http://h:5000/m:t!@" DIGEST, "at byte 17: a tag may hold only");
  assert_bad("http://h:5000/m:t/x@" DIGEST, "at byte 15: a ':' in the name must start its tag");
  char longname[400] = "http://h:5000/";
  memset(longname + 14, 'a', 300);
  strcpy(longname + 314, ":t");
  assert_bad(longname, "name longer than 255 bytes");
  nimble_fetch_reference_t r;
  NIMBLE_ASSERT_ERROR(nimble_fetch_parse_reference(NULL, &r), NIMBLE_INVALID_ARGUMENT, "NULL");
}
END_TEST

int main(void) {
  Suite *s = suite_create("fetch_reference");
  TCase *tc = tcase_create("reference");
  tcase_add_test(tc, test_tag_and_digest_references_split_into_their_parts);
  tcase_add_test(tc, test_bad_references_name_the_problem_and_its_byte);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
