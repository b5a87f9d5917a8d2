/* SHA-256 digests: FIPS 180-2 vectors and the strict text form. */
#include <string.h>

#include "nimble_test.h"

#include "nimble/digest.h"

/* FIPS 180-2 appendix B test vectors. */
#define SHA_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_448 "sha256:248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"

static void expect_digest_of(const char *data, size_t n, const char *want) {
  nimble_digest_t d;
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_compute(data, n, &d);
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, want);
}

START_TEST(test_compute_matches_fips_vectors) {
  expect_digest_of(NULL, 0, SHA_EMPTY);
  expect_digest_of("abc", 3, SHA_ABC);
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect_digest_of(m, strlen(m), SHA_448);
}
END_TEST

START_TEST(test_streaming_equals_one_shot_for_any_split) {
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  size_t n = strlen(m);
  for (size_t cut = 0; cut <= n; cut++) {
    nimble_digest_ctx_t ctx;
    nimble_digest_t d;
    char text[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_ctx_init(&ctx);
    nimble_digest_ctx_update(&ctx, m, cut);
    nimble_digest_ctx_update(&ctx, m + cut, n - cut);
    nimble_digest_ctx_final(&ctx, &d);
    nimble_digest_format(&d, text);
    ck_assert_str_eq(text, SHA_448);
  }
}
END_TEST

START_TEST(test_parse_then_format_round_trips) {
  nimble_digest_t d, e;
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  ck_assert_ptr_null(nimble_digest_parse(SHA_ABC, &d));
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, SHA_ABC);
  nimble_digest_compute("abc", 3, &e);
  ck_assert(nimble_digest_equal(&d, &e));
  nimble_digest_compute("abd", 3, &e);
  ck_assert(!nimble_digest_equal(&d, &e));
}
END_TEST

static void expect_parse_error(const char *text, const char *fragment) {
  nimble_digest_t d;
  nimble_status_t s = nimble_digest_parse(text, &d);
  ck_assert_msg(s != NULL, "'%s' was accepted", text);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  ck_assert_msg(strstr(nimble_status_message(s), fragment) != NULL,
                "message '%s' lacks '%s'", nimble_status_message(s), fragment);
  nimble_status_free(s);
}

START_TEST(test_parse_rejects_wrong_algorithm_length_and_case) {
  expect_parse_error("sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                     "unsupported algorithm 'sha512'");
  expect_parse_error("SHA256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                     "unsupported algorithm");
  expect_parse_error("sha256:ba7816bf", "64 hex digits, got 8");
  expect_parse_error(SHA_ABC "00", "got 66");
  expect_parse_error("sha256:BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                     "character 0 of the hex part is 0x42");
  expect_parse_error("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a/",
                     "character 63");
  expect_parse_error("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                     "expected 'sha256:");
  expect_parse_error("", "expected 'sha256:");
}
END_TEST

START_TEST(test_parse_n_ignores_bytes_past_length) {
  nimble_digest_t d;
  ck_assert_ptr_null(nimble_digest_parse_n(SHA_ABC "/tail", NIMBLE_DIGEST_STRING_LEN, &d));
  char hex[65];
  nimble_digest_format_hex(&d, hex);
  ck_assert_str_eq(hex, SHA_ABC + 7);
}
END_TEST

int main(void) {
  Suite *s = suite_create("digest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_compute_matches_fips_vectors);
  tcase_add_test(tc, test_streaming_equals_one_shot_for_any_split);
  tcase_add_test(tc, test_parse_then_format_round_trips);
  tcase_add_test(tc, test_parse_rejects_wrong_algorithm_length_and_case);
  tcase_add_test(tc, test_parse_n_ignores_bytes_past_length);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
