/* Compile keys: the name of one compilation, shared by scheduler and workers.
 *
 * compile key = sha256 of one canonical JSON object holding everything that
 * changes the output: the source model's digest, the canonical target spec,
 * the compiler version (and, when known, the digest of the compiler build),
 * the compile options, and a salt an operator bumps to disown old results.
 * Canonical JSON (compact, keys sorted, no reals) makes the encoding
 * unambiguous: no field can bleed into the next. docs/protocol.md shows the
 * exact bytes.
 */
#ifndef NIMBLE_COMPILE_KEY_H
#define NIMBLE_COMPILE_KEY_H

#include <jansson.h>
#include <stddef.h>

#include "nimble/digest.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value of the "key" field: the version of this encoding. */
#define NIMBLE_COMPILE_KEY_SCHEMA "nimble.compile-key.v1"

/* All pointers are borrowed for the duration of the call. */
typedef struct nimble_compile_key_input_t {
  nimble_digest_t model;                 /* digest of the source model bytes */
  const char *target;                    /* any valid spec; canonicalised */
  const char *compiler_version;          /* required, non-empty */
  const nimble_digest_t *compiler_build; /* optional (NULL: left out) */
  const json_t *options;                 /* optional object of string/integer/boolean */
  const char *salt;                      /* optional (NULL: "") */
} nimble_compile_key_input_t;

/* The canonical bytes that are hashed. Caller frees *out with free(); *out is
 * also NUL-terminated. Errors name the bad input (target, option). */
nimble_status_t nimble_compile_key_encode(const nimble_compile_key_input_t *in, char **out,
                                          size_t *out_size);

/* sha256 of nimble_compile_key_encode's bytes. */
nimble_status_t nimble_compile_key_compute(const nimble_compile_key_input_t *in,
                                           nimble_digest_t *out_key);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_COMPILE_KEY_H */
