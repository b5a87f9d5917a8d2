/* SHA-256 digests over libsodium. */
#include "nimble/digest.h"

#include <sodium.h>
#include <string.h>

_Static_assert(sizeof(crypto_hash_sha256_state) <= sizeof(((nimble_digest_ctx_t *)0)->opaque),
               "nimble_digest_ctx_t too small for libsodium's state");

static const char kPrefix[] = "sha256:";
#define PREFIX_LEN (sizeof(kPrefix) - 1)

void nimble_digest_ctx_init(nimble_digest_ctx_t *ctx) {
  crypto_hash_sha256_init((crypto_hash_sha256_state *)ctx->opaque);
}

void nimble_digest_ctx_update(nimble_digest_ctx_t *ctx, const void *data, size_t size) {
  if (size == 0) return;
  crypto_hash_sha256_update((crypto_hash_sha256_state *)ctx->opaque, data, size);
}

void nimble_digest_ctx_final(nimble_digest_ctx_t *ctx, nimble_digest_t *out_digest) {
  crypto_hash_sha256_final((crypto_hash_sha256_state *)ctx->opaque, out_digest->bytes);
}

void nimble_digest_compute(const void *data, size_t size, nimble_digest_t *out_digest) {
  static const unsigned char empty = 0;
  crypto_hash_sha256(out_digest->bytes, size ? data : &empty, size);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

nimble_status_t nimble_digest_parse_n(const char *text, size_t len, nimble_digest_t *out_digest) {
  if (!text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "digest: missing");
  const char *colon = memchr(text, ':', len);
  if (!colon) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "digest '%.*s': expected 'sha256:<64 hex digits>'",
                              (int)(len > 80 ? 80 : len), text);
  }
  size_t alg_len = (size_t)(colon - text);
  if (alg_len != PREFIX_LEN - 1 || memcmp(text, kPrefix, alg_len) != 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "digest: unsupported algorithm '%.*s' (only sha256)",
                              (int)(alg_len > 32 ? 32 : alg_len), text);
  }
  size_t hex_len = len - PREFIX_LEN;
  if (hex_len != 2 * NIMBLE_DIGEST_SIZE) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "digest: sha256 needs 64 hex digits, got %zu", hex_len);
  }
  const char *hex = text + PREFIX_LEN;
  for (size_t i = 0; i < NIMBLE_DIGEST_SIZE; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      unsigned char c = (unsigned char)hex[at];
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "digest: character %zu of the hex part is 0x%02x, "
                                "expected a lowercase hex digit",
                                at, c);
    }
    out_digest->bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  return nimble_ok();
}

nimble_status_t nimble_digest_parse(const char *text, nimble_digest_t *out_digest) {
  if (!text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "digest: missing");
  return nimble_digest_parse_n(text, strlen(text), out_digest);
}

void nimble_digest_format_hex(const nimble_digest_t *digest, char out[65]) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < NIMBLE_DIGEST_SIZE; i++) {
    out[2 * i] = kHex[digest->bytes[i] >> 4];
    out[2 * i + 1] = kHex[digest->bytes[i] & 15];
  }
  out[64] = '\0';
}

void nimble_digest_format(const nimble_digest_t *digest, char out[NIMBLE_DIGEST_STRING_LEN + 1]) {
  memcpy(out, kPrefix, PREFIX_LEN);
  nimble_digest_format_hex(digest, out + PREFIX_LEN);
}

int nimble_digest_equal(const nimble_digest_t *a, const nimble_digest_t *b) {
  return sodium_memcmp(a->bytes, b->bytes, NIMBLE_DIGEST_SIZE) == 0;
}
