/* SHA-256's compression function, in the implementations this build has:
 * portable C (FIPS 180-4 §6.2), the x86 SHA extensions and the ARMv8
 * cryptography extensions. digest.c picks the fastest one the CPU runs, once;
 * the rest of the code sees only nimble/digest.h. Private to base/; the
 * tests include it to check every implementation against the others. */
#ifndef NIMBLE_BASE_SHA256_BLOCKS_H
#define NIMBLE_BASE_SHA256_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Hashes `nblocks` 64-byte blocks at `data` (any alignment) into `state`
 * (the eight working words H0..H7, host order). */
typedef void (*nimble_sha256_blocks_fn)(uint32_t state[8], const uint8_t *data, size_t nblocks);

typedef struct nimble_sha256_impl_t {
  const char *name; /* "portable", "x86-sha", "armv8-sha2" */
  nimble_sha256_blocks_fn blocks;
} nimble_sha256_impl_t;

/* The round constants K0..K63 (FIPS 180-4 §4.2.2). */
extern const uint32_t nimble_sha256_k[64];

void nimble_sha256_blocks_portable(uint32_t state[8], const uint8_t *data, size_t nblocks);

/* The implementations this CPU can run, the portable one first and the
 * fastest last; returns how many (at most 2). */
size_t nimble_sha256_impls(nimble_sha256_impl_t out[2]);

#endif /* NIMBLE_BASE_SHA256_BLOCKS_H */
