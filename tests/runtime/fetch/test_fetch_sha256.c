/* The fetcher's own SHA-256 agrees with FIPS 180-4's published examples and
 * with libsodium (the independent reference) on random inputs of every
 * length from 0 to 10,000 bytes, split at random points, and on 64 MiB. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "sha256.h"

static void hex_of(const void *data, size_t n, char out[65]) {
  uint8_t d[32];
  nimble_sha256(data, n, d);
  nimble_sha256_hex(d, out);
}

START_TEST(test_fips_180_examples_hash_to_the_published_digests) {
  char hex[65];
  hex_of("abc", 3, hex);
  ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  hex_of("", 0, hex);
  ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  hex_of(m448, strlen(m448), hex);
  ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 =
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
      "mnopqrstnopqrstu";
  hex_of(m896, strlen(m896), hex);
  ck_assert_str_eq(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  /* One million 'a', fed 1000 bytes at a time. */
  char block[1000];
  memset(block, 'a', sizeof block);
  nimble_sha256_ctx c;
  nimble_sha256_init(&c);
  for (int i = 0; i < 1000; i++) nimble_sha256_update(&c, block, sizeof block);
  uint8_t d[32];
  nimble_sha256_final(&c, d);
  nimble_sha256_hex(d, hex);
  ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(test_random_inputs_of_every_length_match_libsodium) {
  ck_assert_int_ne(sodium_init(), -1);
  enum { MAX = 10000 };
  uint8_t *buf = malloc(MAX);
  randombytes_buf(buf, MAX);
  for (size_t n = 0; n <= MAX; n++) {
    uint8_t want[32], got[32];
    crypto_hash_sha256(want, buf, n);
    /* Streaming, split at up to three random points. */
    nimble_sha256_ctx c;
    nimble_sha256_init(&c);
    size_t pos = 0;
    for (int k = 0; k < 3 && pos < n; k++) {
      size_t step = randombytes_uniform((uint32_t)(n - pos + 1));
      nimble_sha256_update(&c, buf + pos, step);
      pos += step;
    }
    nimble_sha256_update(&c, buf + pos, n - pos);
    nimble_sha256_final(&c, got);
    if (memcmp(want, got, 32) != 0) ck_abort_msg("length %zu: digest differs from libsodium", n);
    nimble_sha256(buf, n, got);
    if (memcmp(want, got, 32) != 0) ck_abort_msg("length %zu: one-shot digest differs", n);
  }
  free(buf);
}
END_TEST

START_TEST(test_a_64_mib_input_matches_libsodium) {
  ck_assert_int_ne(sodium_init(), -1);
  size_t n = 64u << 20;
  uint8_t *buf = malloc(n);
  ck_assert_ptr_nonnull(buf);
  randombytes_buf(buf, n);
  uint8_t want[32], got[32];
  crypto_hash_sha256(want, buf, n);
  nimble_sha256(buf, n, got);
  ck_assert_mem_eq(want, got, 32);
  free(buf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fetch_sha256");
  TCase *tc = tcase_create("sha256");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fips_180_examples_hash_to_the_published_digests);
  tcase_add_test(tc, test_random_inputs_of_every_length_match_libsodium);
  tcase_add_test(tc, test_a_64_mib_input_matches_libsodium);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
