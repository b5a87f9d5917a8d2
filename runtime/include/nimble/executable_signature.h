/* Signatures of local executables (docs/executable.md, "Signatures"):
 * `nimble compile --sign KEY` adds a signature part, an Ed25519 signature
 * of the executable digest (the digest over every part's digest), and
 * `nimble-run --require-signature` loads only executables signed by one of
 * the trusted keys.
 *
 * In nimble_fetch (libsodium), not in the core runtime: the core loader
 * checks the digests and calls a nimble_executable_check_fn
 * (nimble/runtime.h) before any part is parsed or a kernel mapped; the
 * check below is one. Key files are those of `nimble keys` and the
 * fetcher's trusted keys (nimble/signature.h, docs/fetch.md "Trust").
 *
 *   nimble_signature_policy *p;
 *   NIMBLE_RETURN_IF_ERROR(nimble_signature_policy_create(NULL, NULL, &p));
 *   s = nimble_executable_load_file_checked("m.nimble", 0, nimble_signature_policy_check, p, &exe);
 *   nimble_signature_policy_destroy(p);
 */
#ifndef NIMBLE_EXECUTABLE_SIGNATURE_H
#define NIMBLE_EXECUTABLE_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/export.h"
#include "nimble/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The signature part (kind NIMBLE_PART_SIGNATURE) for the `.nimble` image
 * `image`, signed with the secret key file `key_path` (`nimble keys
 * generate`). The image is validated first (digests and parts; kernels are
 * not loaded). *part is malloc'ed: a part file for a parts directory. */
NIMBLE_API nimble_status_t nimble_executable_sign_part(const void *image, size_t size, const char *key_path,
                                                       void **part, size_t *part_size);

/* `image` with its signature part (one it had is replaced). *out is
 * malloc'ed. */
NIMBLE_API nimble_status_t nimble_executable_sign_image(const void *image, size_t size, const char *key_path,
                                                        void **out, size_t *out_size);

/* Which signers are trusted. */
typedef struct nimble_signature_policy nimble_signature_policy;

/* Reads the trusted keys file `trusted_keys` (NULL: $NIMBLE_TRUSTED_KEYS;
 * neither: INVALID_ARGUMENT, since requiring a signature from nobody is a
 * mistake). `what` (may be NULL) names the executable in messages, e.g. a
 * path: "m.nimble: signed by key ...". */
NIMBLE_API nimble_status_t nimble_signature_policy_create(const char *trusted_keys, const char *what,
                                                          nimble_signature_policy **out);
NIMBLE_API void nimble_signature_policy_destroy(nimble_signature_policy *policy);

/* A nimble_executable_check_fn (user: the policy): OK when the executable
 * carries a signature part whose Ed25519 signature of its digest verifies
 * under one of the trusted keys; PERMISSION_DENIED naming the executable
 * and the key otherwise (unsigned, signed by a key not trusted, or a
 * signature that does not verify). */
NIMBLE_API nimble_status_t nimble_signature_policy_check(void *policy, const uint8_t digest[32],
                                                         const void *signature, size_t signature_size);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_EXECUTABLE_SIGNATURE_H */
