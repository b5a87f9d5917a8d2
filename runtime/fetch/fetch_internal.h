/* Pieces of the fetcher shared between its files: the local cache and HTTP
 * GET. Private to runtime/fetch. */
#ifndef NIMBLE_FETCH_INTERNAL_H
#define NIMBLE_FETCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/fetch.h"
#include "nimble/signature.h"
#include "nimble/status.h"

/* ---- Cache (cache.c) ----------------------------------------------------- */

/* Creates DIR/blobs/sha256 and DIR/refs when missing. */
/* "sha256:<hex>" of data (the base library's SHA-256). */
void nimble_fetch_digest_of(const void *data, size_t size, char out[72]);

nimble_status_t nimble_fetch_cache_prepare(const char *dir);

/* Reads the cached blob `digest` ("sha256:hex") into memory and re-hashes
 * it. *out_found is 0 when it is not cached (not an error). A blob whose
 * bytes do not match is DATA_LOSS naming the digest (the file is left for
 * the caller to remove or replace). Caller frees *out_bytes. `max_size`
 * caps what is read. */
nimble_status_t nimble_fetch_cache_read_blob(const char *dir, const char *digest, uint64_t max_size,
                                             int *out_found, uint8_t **out_bytes, size_t *out_size);

/* Writes a blob already verified against `digest`: temp file, fsync,
 * rename, so a reader sees all of it or none. */
nimble_status_t nimble_fetch_cache_write_blob(const char *dir, const char *digest, const void *bytes,
                                              size_t size);

/* Removes a damaged cached blob (a missing file is fine). */
void nimble_fetch_cache_remove_blob(const char *dir, const char *digest);

/* The tag record: which manifest digest (base_url, name, tag) named at the
 * last successful fetch. read: *out_found 0 when none. */
nimble_status_t nimble_fetch_cache_read_tag(const char *dir, const nimble_fetch_reference_t *ref,
                                            int *out_found, char out_digest[72]);
nimble_status_t nimble_fetch_cache_write_tag(const char *dir, const nimble_fetch_reference_t *ref,
                                             const char *digest);

/* ---- HTTP (http_get.c) --------------------------------------------------- */

typedef struct nimble_fetch_http_t {
  const nimble_fetch_options_t *options;
  const char *token;   /* borrowed; NULL for none */
} nimble_fetch_http_t;

/* GET `url` into memory. `accept` may be NULL. At most `max_size` bytes are
 * accepted: a larger Content-Length is refused before any body is read.
 * When `expect_size` is not UINT64_MAX the body must be exactly that long.
 * Connection failures and 5xx/429 are retried up to options.max_attempts;
 * after the last one the error is UNAVAILABLE (the store is unreachable).
 * HTTP 401/403/404 give UNAUTHENTICATED/PERMISSION_DENIED/NOT_FOUND.
 * Caller frees *out_body; *out_digest_header (may be NULL) gets the
 * Docker-Content-Digest header or "" when absent. */
nimble_status_t nimble_fetch_http_get(const nimble_fetch_http_t *http, const char *url,
                                      const char *accept, uint64_t max_size, uint64_t expect_size,
                                      int is_blob, uint8_t **out_body, size_t *out_size,
                                      char out_digest_header[72]);

/* ---- Publisher check (signature_check.c) --------------------------------- */

/* A signature object that passed: its bytes (caller frees), digest, and
 * whether it came from the network (and so must be cached). */
typedef struct nimble_fetch_signature_t {
  uint8_t *bytes;
  size_t size;
  char digest[72];
  int fetched;
} nimble_fetch_signature_t;

/* Checks that `<ref->tag>.sig` signs (ref->name, ref->tag, mdigest) under
 * one of `keys`: from the cache when `offline` (or, for NAME:TAG@DIGEST,
 * when the cached one is for this manifest), else from the store. Errors
 * are PERMISSION_DENIED naming `ref_text` and the key or the keys file: a
 * digest-only reference, no signature, an untrusted key, a signature for
 * another tag or manifest, a forged one. */
nimble_status_t nimble_fetch_signature_check(const nimble_fetch_http_t *http, const char *cache,
                                             int offline, const nimble_fetch_reference_t *ref,
                                             const char *ref_text, const char *mdigest,
                                             const nimble_trusted_keys_t *keys,
                                             nimble_fetch_signature_t *out);

#endif
