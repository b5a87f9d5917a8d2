/* Content digests: SHA-256, written "sha256:<64 lowercase hex>".
 *
 * Every blob, manifest and model in Nimble is named by its digest. Parsing is
 * strict (algorithm, length and case are all checked) so that one content
 * has exactly one spelling, which keys and file names rely on.
 *
 * The one SHA-256 of the project (base/, libc only): the store, the farm and
 * the runtime's fetcher all hash with it. It uses the CPU's SHA-256
 * instructions where there are some (x86 SHA extensions, ARMv8 cryptography
 * extensions; chosen at run time) and portable C elsewhere.
 */
#ifndef NIMBLE_DIGEST_H
#define NIMBLE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_DIGEST_SIZE 32
/* "sha256:" + 64 hex digits, without the terminating NUL. */
#define NIMBLE_DIGEST_STRING_LEN 71

typedef struct nimble_digest_t {
  uint8_t bytes[NIMBLE_DIGEST_SIZE];
} nimble_digest_t;

/* Streaming hasher. Caller-owned storage; no deinit needed. The fields are
 * the hasher's own: callers only pass the struct to the functions below. */
typedef struct nimble_digest_ctx_t {
  uint32_t state[8];
  uint64_t total;    /* bytes hashed so far */
  size_t used;       /* bytes waiting in block */
  uint8_t block[64]; /* a partial block */
} nimble_digest_ctx_t;

void nimble_digest_ctx_init(nimble_digest_ctx_t *ctx);
void nimble_digest_ctx_update(nimble_digest_ctx_t *ctx, const void *data, size_t size);
void nimble_digest_ctx_final(nimble_digest_ctx_t *ctx, nimble_digest_t *out_digest);

/* SHA-256 of `size` bytes at `data` (data may be NULL when size is 0). */
void nimble_digest_compute(const void *data, size_t size, nimble_digest_t *out_digest);

/* Parses exactly "sha256:<64 lowercase hex>" from a NUL-terminated string.
 * Errors (INVALID_ARGUMENT) name what is wrong: the algorithm, the length,
 * or the offending character and its position. */
nimble_status_t nimble_digest_parse(const char *text, nimble_digest_t *out_digest);

/* Same, for `len` bytes that need not be NUL-terminated. */
nimble_status_t nimble_digest_parse_n(const char *text, size_t len, nimble_digest_t *out_digest);

/* 1 when the `len` bytes at `text` are exactly "sha256:<64 lowercase hex>"
 * (what nimble_digest_parse_n accepts), else 0. Allocates nothing. */
int nimble_digest_valid(const char *text, size_t len);

/* Writes "sha256:<hex>" and a NUL into out (NIMBLE_DIGEST_STRING_LEN + 1 bytes). */
void nimble_digest_format(const nimble_digest_t *digest, char out[NIMBLE_DIGEST_STRING_LEN + 1]);

/* Writes only the 64 hex digits and a NUL into out (65 bytes): file names. */
void nimble_digest_format_hex(const nimble_digest_t *digest, char out[65]);

/* 1 when equal, in constant time. */
int nimble_digest_equal(const nimble_digest_t *a, const nimble_digest_t *b);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_DIGEST_H */
