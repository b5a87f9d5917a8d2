/* SHA-256 (FIPS 180-4) for the fetcher, so the runtime verifies what it
 * downloads without depending on libsodium. Private to runtime/fetch; the
 * tests include it to check it against the FIPS vectors and libsodium. */
#ifndef NIMBLE_FETCH_SHA256_H
#define NIMBLE_FETCH_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct nimble_sha256_ctx {
  uint32_t h[8];
  uint64_t total;    /* bytes hashed so far */
  uint8_t block[64]; /* pending input */
  size_t used;       /* bytes in block */
} nimble_sha256_ctx;

void nimble_sha256_init(nimble_sha256_ctx *ctx);
/* `data` is borrowed; size 0 is fine (data may then be NULL). */
void nimble_sha256_update(nimble_sha256_ctx *ctx, const void *data, size_t size);
/* Writes the 32-byte digest; the context must be re-initialised to reuse. */
void nimble_sha256_final(nimble_sha256_ctx *ctx, uint8_t out[32]);
/* One-shot helpers. */
void nimble_sha256(const void *data, size_t size, uint8_t out[32]);
/* out gets 64 lowercase hex digits and a NUL. */
void nimble_sha256_hex(const uint8_t digest[32], char out[65]);

#endif
