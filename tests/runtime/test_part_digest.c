/* A part's digest as docs/executable.md defines it: the SHA-256 of the
 * SHA-256s of its 1 MiB chunks, in order. The expected values come from
 * libsodium's SHA-256, not from the project's; parts of several chunks are
 * hashed on threads (format/src/part_digest.c), so this suite also runs in
 * the ThreadSanitizer stage. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "format/layout.h"
#include "rt_test_util.h"

#define MIB ((size_t)1 << 20)

/* Deterministic bytes, so a failure reproduces. */
static uint8_t *pattern(size_t n) {
  uint8_t *b = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(b);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b[i] = (uint8_t)x;
  }
  return b;
}

/* The definition, with libsodium. */
static void reference_digest(const uint8_t *data, size_t size, uint8_t out[32]) {
  size_t count = (size + MIB - 1) / MIB;
  uint8_t *list = malloc(32 * (count ? count : 1));
  ck_assert_ptr_nonnull(list);
  for (size_t i = 0; i < count; i++) {
    size_t len = size - i * MIB < MIB ? size - i * MIB : MIB;
    crypto_hash_sha256(list + 32 * i, data + i * MIB, len);
  }
  crypto_hash_sha256(out, list, 32 * count);
  free(list);
}

/* Body sizes on and around the chunk boundaries, up to several chunks. */
static const size_t kBodies[] = {16, 1000, MIB - 1, MIB, MIB + 1, 2 * MIB, 3 * MIB + 12345, 9 * MIB + 7};

START_TEST(test_the_seal_is_the_sha256_of_the_chunks_sha256s) {
  for (size_t k = 0; k < sizeof kBodies / sizeof kBodies[0]; k++) {
    size_t body = kBodies[k], size = body + NIMBLE_PART_DIGEST_SIZE;
    uint8_t *p = pattern(size), want[32];
    nimble_part_seal(p, size);
    reference_digest(p, body, want);
    ck_assert_msg(memcmp(p + body, want, 32) == 0, "body of %zu bytes: the trailer is not the chunked SHA-256",
                  body);
    NIMBLE_ASSERT_OK(nimble_part_digest_check(p, size, 0, "constants part"));
    free(p);
  }
}
END_TEST

START_TEST(test_a_flipped_byte_in_any_chunk_is_a_mismatch_naming_the_part) {
  size_t body = 3 * MIB + 12345, size = body + NIMBLE_PART_DIGEST_SIZE;
  uint8_t *p = pattern(size);
  nimble_part_seal(p, size);
  /* The first byte, both sides of each chunk boundary, the short last
   * chunk, and the trailer itself. */
  const size_t at[] = {0, MIB - 1, MIB, 2 * MIB + 17, 3 * MIB, body - 1, body, size - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    p[at[i]] ^= 0x10;
    NIMBLE_ASSERT_ERROR(nimble_part_digest_check(p, size, 4096, "constants section"), NIMBLE_DATA_LOSS,
                        "constants section (offset 4096, 3158105 bytes): digest mismatch");
    p[at[i]] ^= 0x10;
  }
  NIMBLE_ASSERT_OK(nimble_part_digest_check(p, size, 4096, "constants section"));
  /* Chunks swapped keep every chunk digest but not their order. */
  uint8_t *swapped = malloc(size);
  ck_assert_ptr_nonnull(swapped);
  memcpy(swapped, p + MIB, MIB);
  memcpy(swapped + MIB, p, MIB);
  memcpy(swapped + 2 * MIB, p + 2 * MIB, size - 2 * MIB);
  NIMBLE_ASSERT_ERROR(nimble_part_digest_check(swapped, size, 0, "constants part"), NIMBLE_DATA_LOSS,
                      "digest mismatch");
  free(swapped);
  free(p);
}
END_TEST

START_TEST(test_the_chunk_list_is_each_chunks_sha256_and_hashes_to_the_seal) {
  for (size_t k = 0; k < sizeof kBodies / sizeof kBodies[0]; k++) {
    size_t body = kBodies[k], count = nimble_part_chunk_count(body);
    ck_assert_uint_eq(count, (body + MIB - 1) / MIB);
    uint8_t *p = pattern(body), *list = malloc(32 * count), want[32], seal[32];
    ck_assert_ptr_nonnull(list);
    nimble_part_chunk_digests(p, body, list);
    for (size_t i = 0; i < count; i++) {
      size_t len = body - i * MIB < MIB ? body - i * MIB : MIB;
      crypto_hash_sha256(want, p + i * MIB, len);
      ck_assert_msg(memcmp(list + 32 * i, want, 32) == 0, "body of %zu bytes: chunk %zu", body, i);
    }
    crypto_hash_sha256(want, list, 32 * count);
    nimble_part_digest(p, body, seal);
    ck_assert_msg(memcmp(want, seal, 32) == 0, "body of %zu bytes: the list does not hash to the digest", body);
    free(list);
    free(p);
  }
}
END_TEST

Suite *part_digest_suite(void) {
  Suite *s = suite_create("part_digest");
  TCase *tc = tcase_create("part_digest");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_the_seal_is_the_sha256_of_the_chunks_sha256s);
  tcase_add_test(tc, test_a_flipped_byte_in_any_chunk_is_a_mismatch_naming_the_part);
  tcase_add_test(tc, test_the_chunk_list_is_each_chunks_sha256_and_hashes_to_the_seal);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  if (sodium_init() < 0) return 1;
  return nimble_test_run(part_digest_suite());
}
