/* SHA-256 digests (FIPS 180-4): streaming over the compression function of
 * sha256_blocks.c, and the strict "sha256:<hex>" text form. */
#include "nimble/digest.h"

#include <stdatomic.h>
#include <string.h>

#include "sha256_blocks.h"

static const char kPrefix[] = "sha256:";
#define PREFIX_LEN (sizeof(kPrefix) - 1)

/* The compression function, chosen on first use: the fastest this CPU runs.
 * Threads racing on the first use all store the same choice. */
static _Atomic(nimble_sha256_blocks_fn) g_blocks;

static nimble_sha256_blocks_fn blocks_fn(void) {
  nimble_sha256_blocks_fn fn = atomic_load_explicit(&g_blocks, memory_order_relaxed);
  if (!fn) {
    nimble_sha256_impl_t impls[2];
    size_t n = nimble_sha256_impls(impls);
    fn = impls[n - 1].blocks;
    atomic_store_explicit(&g_blocks, fn, memory_order_relaxed);
  }
  return fn;
}

void nimble_digest_ctx_init(nimble_digest_ctx_t *ctx) {
  static const uint32_t kH0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(ctx->state, kH0, sizeof kH0);
  ctx->total = 0;
  ctx->used = 0;
}

void nimble_digest_ctx_update(nimble_digest_ctx_t *ctx, const void *data, size_t size) {
  if (size == 0) return;
  const uint8_t *p = data;
  nimble_sha256_blocks_fn blocks = blocks_fn();
  ctx->total += size;
  if (ctx->used) {
    size_t take = 64 - ctx->used < size ? 64 - ctx->used : size;
    memcpy(ctx->block + ctx->used, p, take);
    ctx->used += take;
    p += take;
    size -= take;
    if (ctx->used < 64) return;
    blocks(ctx->state, ctx->block, 1);
    ctx->used = 0;
  }
  /* Whole blocks straight from the input, without copying. */
  if (size >= 64) {
    blocks(ctx->state, p, size / 64);
    p += size & ~(size_t)63;
    size &= 63;
  }
  if (size) memcpy(ctx->block, p, size);
  ctx->used = size;
}

void nimble_digest_ctx_final(nimble_digest_ctx_t *ctx, nimble_digest_t *out_digest) {
  nimble_sha256_blocks_fn blocks = blocks_fn();
  /* The message, 0x80, zeros to 56 mod 64, then its length in bits as a
   * big-endian 64-bit integer (FIPS 180-4 §5.1.1). */
  uint64_t bits = ctx->total * 8;
  ctx->block[ctx->used++] = 0x80;
  if (ctx->used > 56) {
    memset(ctx->block + ctx->used, 0, 64 - ctx->used);
    blocks(ctx->state, ctx->block, 1);
    ctx->used = 0;
  }
  memset(ctx->block + ctx->used, 0, 56 - ctx->used);
  for (int i = 0; i < 8; i++) ctx->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
  blocks(ctx->state, ctx->block, 1);
  for (int i = 0; i < 8; i++) {
    out_digest->bytes[4 * i] = (uint8_t)(ctx->state[i] >> 24);
    out_digest->bytes[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
    out_digest->bytes[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
    out_digest->bytes[4 * i + 3] = (uint8_t)ctx->state[i];
  }
}

void nimble_digest_compute(const void *data, size_t size, nimble_digest_t *out_digest) {
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  nimble_digest_ctx_update(&ctx, data, size);
  nimble_digest_ctx_final(&ctx, out_digest);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* What is wrong with a digest's text, found without allocating. */
typedef enum digest_fault {
  DIGEST_OK,
  DIGEST_NO_COLON,
  DIGEST_ALGORITHM,
  DIGEST_LENGTH,
  DIGEST_CHARACTER, /* *at: the offending position in the hex part */
} digest_fault;

static digest_fault scan(const char *text, size_t len, nimble_digest_t *out, size_t *at) {
  const char *colon = memchr(text, ':', len);
  if (!colon) return DIGEST_NO_COLON;
  size_t alg_len = (size_t)(colon - text);
  if (alg_len != PREFIX_LEN - 1 || memcmp(text, kPrefix, alg_len) != 0) return DIGEST_ALGORITHM;
  if (len - PREFIX_LEN != 2 * NIMBLE_DIGEST_SIZE) return DIGEST_LENGTH;
  const char *hex = text + PREFIX_LEN;
  for (size_t i = 0; i < NIMBLE_DIGEST_SIZE; i++) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      *at = hi < 0 ? 2 * i : 2 * i + 1;
      return DIGEST_CHARACTER;
    }
    if (out) out->bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  return DIGEST_OK;
}

int nimble_digest_valid(const char *text, size_t len) {
  size_t at;
  return text && scan(text, len, NULL, &at) == DIGEST_OK;
}

nimble_status_t nimble_digest_parse_n(const char *text, size_t len, nimble_digest_t *out_digest) {
  if (!text) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "digest: missing");
  size_t at = 0;
  switch (scan(text, len, out_digest, &at)) {
    case DIGEST_OK: return nimble_ok();
    case DIGEST_NO_COLON:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "digest '%.*s': expected 'sha256:<64 hex digits>'",
                                (int)(len > 80 ? 80 : len), text);
    case DIGEST_ALGORITHM: {
      size_t alg_len = (size_t)((const char *)memchr(text, ':', len) - text);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "digest: unsupported algorithm '%.*s' (only sha256)",
                                (int)(alg_len > 32 ? 32 : alg_len), text);
    }
    case DIGEST_LENGTH:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "digest: sha256 needs 64 hex digits, got %zu", len - PREFIX_LEN);
    case DIGEST_CHARACTER:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "digest: character %zu of the hex part is 0x%02x, "
                                "expected a lowercase hex digit",
                                at, (unsigned char)text[PREFIX_LEN + at]);
  }
  return nimble_status_make(NIMBLE_INTERNAL, "digest: unknown fault");
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
  /* Constant time: every byte is compared, whatever differs first. */
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < NIMBLE_DIGEST_SIZE; i++) diff |= a->bytes[i] ^ b->bytes[i];
  return diff == 0;
}
