/* nimble_base's SHA-256 (nimble/digest.h) against FIPS 180-4's published
 * examples and the NIST long message, each compression function this CPU
 * runs (portable, x86 SHA extensions, ARMv8 SHA2) against those examples and
 * against each other, and the whole hasher against libsodium (the
 * independent reference, where the build has it) on random inputs of every
 * length from 0 to 10,000 bytes, split at random points, and on 64 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NIMBLE_TEST_HAVE_SODIUM
#include <sodium.h>
#endif

#include "nimble/digest.h"
#include "nimble_test.h"
#include "sha256_blocks.h"

/* FIPS 180-4 examples (csrc.nist.gov, SHA256.pdf and SHA2_Additional). */
static const char kM448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char kM896[] =
    "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
    "mnopqrstnopqrstu";
static const struct {
  const char *message;
  const char *hex;
} kVectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {kM448, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {kM896, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};
#define MILLION_A_HEX "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

static void hex_of(const void *data, size_t n, char out[65]) {
  nimble_digest_t d;
  nimble_digest_compute(data, n, &d);
  nimble_digest_format_hex(&d, out);
}

START_TEST(test_fips_180_examples_hash_to_the_published_digests) {
  char hex[65];
  for (size_t i = 0; i < sizeof kVectors / sizeof kVectors[0]; i++) {
    hex_of(kVectors[i].message, strlen(kVectors[i].message), hex);
    ck_assert_str_eq(hex, kVectors[i].hex);
  }
  /* One million 'a', fed 1000 bytes at a time. */
  char block[1000];
  memset(block, 'a', sizeof block);
  nimble_digest_ctx_t c;
  nimble_digest_ctx_init(&c);
  for (int i = 0; i < 1000; i++) nimble_digest_ctx_update(&c, block, sizeof block);
  nimble_digest_t d;
  nimble_digest_ctx_final(&c, &d);
  nimble_digest_format_hex(&d, hex);
  ck_assert_str_eq(hex, MILLION_A_HEX);
}
END_TEST

/* SHA-256 of `n` bytes with only a compression function: the padding of
 * FIPS 180-4 §5.1.1 written out here, apart from digest.c's. */
static void hex_with(nimble_sha256_blocks_fn blocks, const uint8_t *data, size_t n, char out[65]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  blocks(h, data, n / 64);
  uint8_t tail[128] = {0};
  size_t rest = n % 64, len = rest + 9 <= 64 ? 64 : 128;
  memcpy(tail, data + n - rest, rest);
  tail[rest] = 0x80;
  for (int i = 0; i < 8; i++) tail[len - 1 - i] = (uint8_t)((uint64_t)n * 8 >> (8 * i));
  blocks(h, tail, len / 64);
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    uint8_t b = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 15];
  }
  out[64] = '\0';
}

START_TEST(test_every_compression_function_gives_the_fips_digests) {
  nimble_sha256_impl_t impls[2];
  size_t n = nimble_sha256_impls(impls);
  ck_assert_uint_ge(n, 1);
  ck_assert_str_eq(impls[0].name, "portable");
  printf("sha256 implementations on this CPU: %s%s%s\n", impls[0].name, n > 1 ? ", " : "",
         n > 1 ? impls[1].name : "");
  uint8_t *million = malloc(1000000);
  ck_assert_ptr_nonnull(million);
  memset(million, 'a', 1000000);
  for (size_t k = 0; k < n; k++) {
    char hex[65];
    for (size_t i = 0; i < sizeof kVectors / sizeof kVectors[0]; i++) {
      hex_with(impls[k].blocks, (const uint8_t *)kVectors[i].message, strlen(kVectors[i].message), hex);
      ck_assert_msg(strcmp(hex, kVectors[i].hex) == 0, "%s: vector %zu gives %s", impls[k].name, i, hex);
    }
    hex_with(impls[k].blocks, million, 1000000, hex);
    ck_assert_msg(strcmp(hex, MILLION_A_HEX) == 0, "%s: a million 'a' gives %s", impls[k].name, hex);
  }
  free(million);
}
END_TEST

START_TEST(test_the_compression_functions_agree_on_random_blocks) {
  nimble_sha256_impl_t impls[2];
  size_t n = nimble_sha256_impls(impls);
  uint8_t data[64 * 64];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < sizeof data; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    data[i] = (uint8_t)x;
  }
  for (size_t nblocks = 0; nblocks <= 64; nblocks++) {
    uint32_t want[8] = {1, 2, 3, 4, 5, 6, 7, 0xffffffffu};
    nimble_sha256_blocks_portable(want, data, nblocks);
    for (size_t k = 1; k < n; k++) {
      uint32_t got[8] = {1, 2, 3, 4, 5, 6, 7, 0xffffffffu};
      /* Unaligned input too: the instructions' loads must not assume it. */
      uint8_t *copy = malloc(sizeof data + 1);
      memcpy(copy + 1, data, sizeof data);
      impls[k].blocks(got, copy + 1, nblocks);
      free(copy);
      ck_assert_msg(memcmp(want, got, sizeof want) == 0, "%s differs from portable on %zu blocks",
                    impls[k].name, nblocks);
    }
  }
}
END_TEST

START_TEST(test_streaming_equals_one_shot_for_every_split) {
  uint8_t buf[300];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7 + 1);
  nimble_digest_t want;
  nimble_digest_compute(buf, sizeof buf, &want);
  for (size_t a = 0; a <= sizeof buf; a += 13)
    for (size_t b = a; b <= sizeof buf; b += 29) {
      nimble_digest_ctx_t c;
      nimble_digest_t got;
      nimble_digest_ctx_init(&c);
      nimble_digest_ctx_update(&c, buf, a);
      nimble_digest_ctx_update(&c, buf + a, b - a);
      nimble_digest_ctx_update(&c, buf + b, sizeof buf - b);
      nimble_digest_ctx_final(&c, &got);
      ck_assert_msg(nimble_digest_equal(&want, &got), "split at %zu, %zu differs", a, b);
    }
}
END_TEST

#ifdef NIMBLE_TEST_HAVE_SODIUM
START_TEST(test_random_inputs_of_every_length_match_libsodium) {
  ck_assert_int_ne(sodium_init(), -1);
  enum { MAX = 10000 };
  uint8_t *buf = malloc(MAX);
  randombytes_buf(buf, MAX);
  for (size_t n = 0; n <= MAX; n++) {
    uint8_t want[32];
    nimble_digest_t got;
    crypto_hash_sha256(want, buf, n);
    /* Streaming, split at up to three random points. */
    nimble_digest_ctx_t c;
    nimble_digest_ctx_init(&c);
    size_t pos = 0;
    for (int k = 0; k < 3 && pos < n; k++) {
      size_t step = randombytes_uniform((uint32_t)(n - pos + 1));
      nimble_digest_ctx_update(&c, buf + pos, step);
      pos += step;
    }
    nimble_digest_ctx_update(&c, buf + pos, n - pos);
    nimble_digest_ctx_final(&c, &got);
    if (memcmp(want, got.bytes, 32) != 0) ck_abort_msg("length %zu: digest differs from libsodium", n);
    nimble_digest_compute(buf, n, &got);
    if (memcmp(want, got.bytes, 32) != 0) ck_abort_msg("length %zu: one-shot digest differs", n);
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
  uint8_t want[32];
  nimble_digest_t got;
  crypto_hash_sha256(want, buf, n);
  nimble_digest_compute(buf, n, &got);
  ck_assert_mem_eq(want, got.bytes, 32);
  free(buf);
}
END_TEST
#endif

int main(void) {
  Suite *s = suite_create("sha256");
  TCase *tc = tcase_create("sha256");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_fips_180_examples_hash_to_the_published_digests);
  tcase_add_test(tc, test_every_compression_function_gives_the_fips_digests);
  tcase_add_test(tc, test_the_compression_functions_agree_on_random_blocks);
  tcase_add_test(tc, test_streaming_equals_one_shot_for_every_split);
#ifdef NIMBLE_TEST_HAVE_SODIUM
  tcase_add_test(tc, test_random_inputs_of_every_length_match_libsodium);
  tcase_add_test(tc, test_a_64_mib_input_matches_libsodium);
#endif
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
