/* Test helper: pushes an executable's parts to a store as an artifact, with
 * the store client library and protocol's encoders. Kept in its own file
 * so that the fetch suites see the runtime's view only, and protocol's
 * names through the fetch_protocol_* constants below. */
#ifndef NIMBLE_TEST_FETCH_PUSH_H
#define NIMBLE_TEST_FETCH_PUSH_H

#include <stddef.h>

typedef struct fetch_push_part {
  const char *media_type;
  const void *data;
  size_t size;
} fetch_push_part;

/* Pushes a config blob made by protocol's artifact-config encoder, every
 * part as a blob, and the manifest protocol's nimble_manifest_encode writes
 * for them (layers in the given order) under `tag` at http://`addr`. The
 * parts must make a manifest protocol accepts (a metadata and a bytecode
 * layer, known media types). Writes the manifest digest to digest_out
 * (72 bytes). */
void fetch_push_artifact(const char *addr, const char *repo, const char *tag,
                         const fetch_push_part *parts, size_t n, char digest_out[72]);

/* The same, but the encoded manifest has its one occurrence of `from`
 * replaced by `to` before it is pushed: a manifest protocol's encoder would
 * refuse (an unknown layer media type, no metadata layer), to see the
 * fetcher refuse it too. The blobs pushed are the parts as given. */
void fetch_push_artifact_edited(const char *addr, const char *repo, const char *tag,
                                const fetch_push_part *parts, size_t n, const char *from,
                                const char *to, char digest_out[72]);

/* The digest of bytes, as libsodium computes it (the independent reference):
 * "sha256:<hex>". */
void fetch_reference_digest(const void *data, size_t size, char out[72]);

/* Signs (repo, tag, manifest_digest) with the secret key file `key_path`
 * and pushes the signature object as the scheduler does (protocol's
 * nimble_signature_object, a layerless manifest tagged `<tag>.sig`). */
void fetch_push_signature(const char *addr, const char *repo, const char *tag, const char *key_path,
                          const char *manifest_digest);

/* Pushes `obj` (n bytes, any content) as the signature object of `tag`:
 * for forged and malformed objects. */
void fetch_push_signature_object(const char *addr, const char *repo, const char *tag, const char *obj,
                                 size_t n);

/* Pulls the manifest `from` (a tag or digest) of repo and pushes its bytes
 * unchanged under the tag `to`. */
void fetch_copy_tag(const char *addr, const char *repo, const char *from, const char *to);

/* protocol's layer media type names, to check the runtime's against. */
extern const char *const fetch_protocol_metadata_type;
extern const char *const fetch_protocol_bytecode_type;
extern const char *const fetch_protocol_constants_type;
extern const char *const fetch_protocol_kernels_x86_64_type;
extern const char *const fetch_protocol_kernels_aarch64_type;
extern const char *const fetch_protocol_kernels_ptx_type;
extern const char *const fetch_protocol_config_type;

/* Encodes a manifest with protocol's encoder (no store) for the JSON reader
 * tests: caller frees *out. */
void fetch_encode_protocol_manifest(const fetch_push_part *parts, size_t n, char **out, size_t *size);

#endif
