/* Artifact signatures: who published a manifest under a tag.
 *
 * The farm (nimble-scheduler --signing-key) signs, with one Ed25519 key
 * (libsodium), a statement that binds a repository, a tag and a manifest
 * digest:
 *
 *   nimble-artifact-signature-v1\n
 *   repository team/bert\n
 *   tag x86\n
 *   manifest sha256:<64 hex>\n
 *
 * and pushes it beside the artifact as a signature object: the JSON
 * document nimble_signature_object() writes, as the config blob (media type
 * NIMBLE_SIGNATURE_MEDIA_TYPE) of an OCI manifest with no layers, tagged
 * `<tag>.sig` in the same repository. The fetcher (runtime/fetch) checks
 * that statement, rebuilt from what it fetched, under one of the trusted
 * public keys before it loads any kernel. Because the tag is in the
 * statement, an old signed manifest replayed under another tag does not
 * verify; because the manifest digest is, neither do changed bytes.
 *
 * Key files are text (docs/fetch.md, "Trust"):
 *   secret key:   one line "ed25519-secret <64 hex seed>", mode 0600; a
 *                 file group or others can read is refused.
 *   trusted keys: one "ed25519 <64 hex public key> [comment]" per line;
 *                 '#' lines and blank lines are ignored; several keys at
 *                 once allow rotation.
 *
 * Dependencies: libsodium (nothing else), so the fetcher can link it.
 */
#ifndef NIMBLE_SIGNATURE_H
#define NIMBLE_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NIMBLE_SIGN_KEY_BYTES 32       /* public key and secret seed */
#define NIMBLE_SIGN_SIGNATURE_BYTES 64
#define NIMBLE_SIGNATURE_FORMAT "nimble-artifact-signature-v1"
#define NIMBLE_SIGNATURE_MEDIA_TYPE "application/vnd.nimble.signature.v1+json"
#define NIMBLE_SIGNATURE_ARTIFACT_TYPE "application/vnd.nimble.signature.v1"
#define NIMBLE_SIGNATURE_TAG_SUFFIX ".sig"
/* The longest tag that still leaves room for ".sig" within the store's 128. */
#define NIMBLE_SIGNATURE_MAX_TAG 124

/* A secret key: caller-owned storage; wipe with nimble_sign_key_deinit. */
typedef struct nimble_sign_key_t {
  uint8_t seed[NIMBLE_SIGN_KEY_BYTES];
  uint8_t public_key[NIMBLE_SIGN_KEY_BYTES];
  uint8_t secret[64]; /* libsodium's expanded secret key */
} nimble_sign_key_t;

/* Trusted public keys, in file order. Caller-owned; free with _deinit. */
typedef struct nimble_trusted_keys_t {
  size_t count;
  uint8_t (*keys)[NIMBLE_SIGN_KEY_BYTES];
  char *source; /* the file it came from, for messages (owned) */
} nimble_trusted_keys_t;

/* Makes a new key and writes it to `path` (mode 0600, created: an existing
 * file is refused, never overwritten). *out_public gets its public key. */
nimble_status_t nimble_sign_keygen(const char *path, uint8_t out_public[NIMBLE_SIGN_KEY_BYTES]);

/* Reads a secret key file. Refused (PERMISSION_DENIED) when group or others
 * may read it; INVALID_ARGUMENT naming the line when malformed. */
nimble_status_t nimble_sign_key_load(const char *path, nimble_sign_key_t *out);
void nimble_sign_key_deinit(nimble_sign_key_t *key);

/* 64 lowercase hex digits and a NUL. */
void nimble_sign_key_hex(const uint8_t key[NIMBLE_SIGN_KEY_BYTES], char out[65]);

/* The trusted keys line for `key`: "ed25519 <hex> COMMENT\n" (comment may be
 * NULL). Caller frees. */
nimble_status_t nimble_sign_public_line(const uint8_t key[NIMBLE_SIGN_KEY_BYTES], const char *comment,
                                        char **out);

/* Parses a trusted keys file (`source` names it in messages). An empty set
 * is INVALID_ARGUMENT: a file that trusts nobody is a mistake. */
nimble_status_t nimble_trusted_keys_parse(const char *text, size_t size, const char *source,
                                          nimble_trusted_keys_t *out);
nimble_status_t nimble_trusted_keys_load(const char *path, nimble_trusted_keys_t *out);
void nimble_trusted_keys_deinit(nimble_trusted_keys_t *keys);

/* The statement above for (repository, tag, manifest digest). Refuses
 * (INVALID_ARGUMENT) a repository, tag or digest outside the store's
 * grammar, so the statement has one spelling and needs no escaping. Caller
 * frees *out. */
nimble_status_t nimble_signature_statement(const char *repository, const char *tag,
                                           const char *manifest_digest, char **out);

/* The signature object (JSON, one line, keys in this order):
 * {"format":"nimble-artifact-signature-v1","repository":R,"tag":T,
 *  "manifest":D,"key":"<hex public key>","signature":"<128 hex>"}
 * Caller frees *out (NUL-terminated; *out_size excludes the NUL). */
nimble_status_t nimble_signature_object(const nimble_sign_key_t *key, const char *repository,
                                        const char *tag, const char *manifest_digest, char **out,
                                        size_t *out_size);

/* The OCI manifest that carries a signature object of `size` bytes with
 * digest `object_digest` as its config and no layers. Caller frees *out. */
nimble_status_t nimble_signature_manifest(const char *object_digest, size_t size, char **out,
                                          size_t *out_size);

/* Ed25519 over raw bytes, for the signatures of local executables
 * (docs/executable.md "Signatures", runtime/fetch/executable_signature.c):
 * sign `size` bytes at `msg` with `key`; verify returns OK or
 * PERMISSION_DENIED (the message names nothing: the caller knows what). */
nimble_status_t nimble_sign_bytes(const nimble_sign_key_t *key, const void *msg, size_t size,
                                  uint8_t out_signature[NIMBLE_SIGN_SIGNATURE_BYTES]);
nimble_status_t nimble_sign_verify_bytes(const uint8_t public_key[NIMBLE_SIGN_KEY_BYTES], const void *msg,
                                         size_t size, const uint8_t signature[NIMBLE_SIGN_SIGNATURE_BYTES]);

/* Checks a signature object's fields against what the verifier fetched:
 * the statement is rebuilt from (repository, tag, manifest_digest), never
 * taken from the object, and must verify under `key_hex`, which must be one
 * of `trusted`. The fields the object names are compared first only to say
 * what went wrong (another tag: a replay; another digest: changed bytes).
 * Errors are PERMISSION_DENIED naming the key and `trusted->source`;
 * *out_index (may be NULL) gets the trusted key's line index. */
nimble_status_t nimble_signature_verify(const nimble_trusted_keys_t *trusted, const char *repository,
                                        const char *tag, const char *manifest_digest,
                                        const char *object_repository, const char *object_tag,
                                        const char *object_manifest, const char *key_hex,
                                        const char *signature_hex, size_t *out_index);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_SIGNATURE_H */
