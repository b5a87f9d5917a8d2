/* Compile keys: exact canonical bytes and digests computed with sha256sum. */
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"

#include "nimble/compile_key.h"

#define SHA_ABC "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Written by hand; digests from `printf '%s' "$A" | sha256sum`. */
static const char kBytesA[] =
    "{\"compiler\":\"0.1.0\",\"key\":\"nimble.compile-key.v1\",\"model\":\"" SHA_ABC
    "\",\"options\":{\"opt_level\":3,\"tune\":false},\"salt\":\"\",\"target\":\"x86\"}";
static const char kKeyA[] =
    "sha256:acf5ce4045d591bd4d5fcc9b29574c43063aafd1fa51b6445cfca6c16fef5b4c";
static const char kBytesB[] =
    "{\"compiler\":\"0.1.0\",\"compilerBuild\":\"" SHA_EMPTY
    "\",\"key\":\"nimble.compile-key.v1\",\"model\":\"" SHA_ABC
    "\",\"options\":{},\"salt\":\"2026-12\",\"target\":\"cuda:arch=sm_90\"}";
static const char kKeyB[] =
    "sha256:0699d72b21b44b090a2c6322456a75c36bab1ba0421a074d8932931d5d471143";

static nimble_compile_key_input_t input_a(json_t **options) {
  nimble_compile_key_input_t in;
  memset(&in, 0, sizeof(in));
  ck_assert_ptr_null(nimble_digest_parse(SHA_ABC, &in.model));
  in.target = "x86:cpu=x86-64-v3"; /* canonicalised to "x86" */
  in.compiler_version = "0.1.0";
  *options = json_pack("{s:b, s:i}", "tune", 0, "opt_level", 3);
  in.options = *options;
  return in;
}

static void expect_key(const nimble_compile_key_input_t *in, const char *bytes, const char *key) {
  char *out;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_compile_key_encode(in, &out, &n));
  ck_assert_str_eq(out, bytes);
  ck_assert_uint_eq(n, strlen(bytes));
  free(out);
  nimble_digest_t d;
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(in, &d));
  nimble_digest_format(&d, text);
  ck_assert_str_eq(text, key);
}

START_TEST(test_key_is_sha256_of_the_documented_canonical_json) {
  json_t *opts;
  nimble_compile_key_input_t in = input_a(&opts);
  expect_key(&in, kBytesA, kKeyA);
  json_decref(opts);
}
END_TEST

START_TEST(test_build_digest_and_salt_are_part_of_the_key) {
  nimble_compile_key_input_t in;
  nimble_digest_t build;
  memset(&in, 0, sizeof(in));
  ck_assert_ptr_null(nimble_digest_parse(SHA_ABC, &in.model));
  ck_assert_ptr_null(nimble_digest_parse(SHA_EMPTY, &build));
  in.target = "cuda:arch=sm_90";
  in.compiler_version = "0.1.0";
  in.compiler_build = &build;
  in.salt = "2026-12";
  expect_key(&in, kBytesB, kKeyB); /* options NULL encodes as {} */
}
END_TEST

START_TEST(test_every_input_changes_the_key) {
  json_t *opts;
  nimble_compile_key_input_t base = input_a(&opts);
  nimble_digest_t k0, k;
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&base, &k0));

  nimble_compile_key_input_t in = base;
  in.model.bytes[31] ^= 1;
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(!nimble_digest_equal(&k0, &k));

  in = base;
  in.target = "x86:cpu=znver4";
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(!nimble_digest_equal(&k0, &k));

  in = base;
  in.compiler_version = "0.1.1";
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(!nimble_digest_equal(&k0, &k));

  in = base;
  in.salt = "x";
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(!nimble_digest_equal(&k0, &k));

  json_t *other = json_pack("{s:b, s:i}", "tune", 0, "opt_level", 2);
  in = base;
  in.options = other;
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(!nimble_digest_equal(&k0, &k));
  json_decref(other);

  /* Spelling a target differently does not change the key. */
  in = base;
  in.target = "x86";
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&in, &k));
  ck_assert(nimble_digest_equal(&k0, &k));
  json_decref(opts);
}
END_TEST

START_TEST(test_fields_cannot_bleed_into_each_other) {
  /* With plain concatenation, version "1" + salt "2" would equal version
   * "12" + salt "": canonical JSON keeps them apart. */
  nimble_compile_key_input_t a, b;
  memset(&a, 0, sizeof(a));
  a.target = "x86";
  a.compiler_version = "1";
  a.salt = "2";
  b = a;
  b.compiler_version = "12";
  b.salt = "";
  nimble_digest_t ka, kb;
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&a, &ka));
  NIMBLE_ASSERT_OK(nimble_compile_key_compute(&b, &kb));
  ck_assert(!nimble_digest_equal(&ka, &kb));
}
END_TEST

START_TEST(test_bad_inputs_are_refused_with_the_reason) {
  nimble_compile_key_input_t in;
  nimble_digest_t k;
  memset(&in, 0, sizeof(in));
  in.compiler_version = "0.1.0";
  in.target = "x87";
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "compile key: target 'x87': unknown target");
  in.target = NULL;
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT, "target");
  in.target = "x86";
  in.compiler_version = "";
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "compiler version missing");
  in.compiler_version = "0.1.0";
  json_t *bad = json_pack("{s:f}", "lr", 0.5);
  in.options = bad;
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "options.lr: expected a string, integer or boolean, got a real number");
  json_decref(bad);
  bad = json_pack("{s:[i]}", "list", 1);
  in.options = bad;
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "options.list: expected a string, integer or boolean, got an array");
  json_decref(bad);
  bad = json_array();
  in.options = bad;
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "options: expected an object");
  json_decref(bad);
  in.options = NULL;
  in.salt = "\xff\xfe";
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(&in, &k), NIMBLE_INVALID_ARGUMENT,
                      "not valid UTF-8");
  NIMBLE_ASSERT_ERROR(nimble_compile_key_compute(NULL, &k), NIMBLE_INVALID_ARGUMENT, "no input");
}
END_TEST

int main(void) {
  Suite *s = suite_create("compile_key");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_key_is_sha256_of_the_documented_canonical_json);
  tcase_add_test(tc, test_build_digest_and_salt_are_part_of_the_key);
  tcase_add_test(tc, test_every_input_changes_the_key);
  tcase_add_test(tc, test_fields_cannot_bleed_into_each_other);
  tcase_add_test(tc, test_bad_inputs_are_refused_with_the_reason);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
