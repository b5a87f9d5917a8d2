/* The runtime's fetcher: load an executable straight from the artifact store
 * at application start-up.
 *
 * A reference names an artifact in a store (docs/fetch.md):
 *   http://HOST:PORT/NAME:TAG                 e.g. http://127.0.0.1:5000/team/bert:x86
 *   http://HOST:PORT/NAME@sha256:<64 hex>     one exact artifact
 * The fetcher downloads the manifest and every blob it lists into a local
 * content-addressed cache, checks every byte against its digest, and loads
 * the executable from the verified bytes. A later start finds the blobs in
 * the cache (each is re-hashed before use); when the store is unreachable a
 * tag resolves through the tag record of the last successful fetch, with a
 * warning, and a digest reference loads from the cache directly. A digest
 * mismatch anywhere is NIMBLE_DATA_LOSS naming the digest; nothing
 * unverified is ever loaded or cached. With trusted keys (options.
 * trusted_keys or $NIMBLE_TRUSTED_KEYS) the artifact's Ed25519 signature
 * is checked too, before any blob is fetched (docs/fetch.md, "Trust").
 *
 *   nimble_fetch_options_t o;
 *   nimble_fetch_options_init(&o);
 *   nimble_executable *exe;
 *   NIMBLE_RETURN_IF_ERROR(nimble_fetch_artifact(&o, "http://store:5000/team/bert:x86", &exe));
 *
 * Dependencies: the runtime, libcurl (HTTP) and libsodium (signatures). Built as the separate
 * library nimble_fetch so the runtime proper stays free of libcurl.
 */
#ifndef NIMBLE_FETCH_H
#define NIMBLE_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/export.h"
#include "nimble/runtime.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed reference. Strings are owned by the struct: free with
 * nimble_fetch_reference_deinit. */
typedef struct nimble_fetch_reference_t {
  char *base_url; /* "http://127.0.0.1:5000" (scheme, host, port) */
  char *name;     /* repository name, "team/bert" */
  char *tag;      /* "x86", or NULL for a digest-only reference */
  char *digest;   /* "sha256:<64 hex>", or NULL for a tag reference; NAME:TAG@DIGEST
                     sets both (the digest pins the bytes, the tag names what the
                     signature must be for) */
} nimble_fetch_reference_t;

/* Parses `text` (borrowed). INVALID_ARGUMENT names what is wrong and the
 * byte where it is. On failure *out is zeroed. */
NIMBLE_API nimble_status_t nimble_fetch_parse_reference(const char *text, nimble_fetch_reference_t *out);
NIMBLE_API void nimble_fetch_reference_deinit(nimble_fetch_reference_t *ref);

/* 1 when `text` starts like a reference ("http://" or "https://"), so a
 * program can tell a reference from a file path before parsing it. */
NIMBLE_API int nimble_fetch_looks_like_reference(const char *text);

typedef enum nimble_fetch_event_kind_t {
  NIMBLE_FETCH_EVENT_REQUEST = 1, /* an HTTP GET finished (or failed) */
  NIMBLE_FETCH_EVENT_WARNING = 2, /* something the user should know: offline start, a
                                     damaged cache entry replaced */
} nimble_fetch_event_kind_t;

/* Pointers are borrowed for the duration of the callback. */
typedef struct nimble_fetch_event_t {
  nimble_fetch_event_kind_t kind;
  const char *url;     /* REQUEST */
  long http_status;    /* REQUEST: 0 when the transfer failed */
  int is_blob;         /* REQUEST: 1 for a blob GET, 0 for a manifest GET */
  const char *range;   /* REQUEST: "bytes=N-" when it resumed a cut transfer, else NULL */
  const char *message; /* WARNING */
} nimble_fetch_event_t;

typedef void (*nimble_fetch_event_fn)(void *user, const nimble_fetch_event_t *event);

typedef struct nimble_fetch_options_t {
  size_t struct_size;        /* sizeof(nimble_fetch_options_t); set by _init */
  const char *cache_dir;     /* NULL: $NIMBLE_CACHE_DIR, $XDG_CACHE_HOME/nimble, ~/.cache/nimble */
  const char *token;         /* bearer token; NULL: $NIMBLE_TOKEN (unset: none) */
  long connect_timeout_ms;   /* default 5000 */
  long stall_timeout_ms;     /* abort a transfer idle this long; default 30000 */
  int max_attempts;          /* per request, for connection errors and 5xx; default 3 */
  uint64_t max_blob_size;    /* default 4 GiB */
  int offline;               /* 1: never contact the store, load from the cache */
  uint32_t load_flags;       /* passed to nimble_executable_load_parts (NO_KERNELS) */
  nimble_fetch_event_fn on_event; /* optional, called synchronously */
  void *event_user;
  /* The publisher check (docs/fetch.md, "Trust"): a file of trusted
   * public keys, one "ed25519 <hex> [comment]" per line. NULL:
   * $NIMBLE_TRUSTED_KEYS; neither set: artifacts load unverified, with one
   * warning event saying so. With keys, a tag reference loads only when its
   * `<tag>.sig` signature object signs (repository, tag, manifest digest)
   * under one of them, checked before any blob is fetched; anything else is
   * PERMISSION_DENIED naming the reference and the key. */
  const char *trusted_keys;
} nimble_fetch_options_t;

NIMBLE_API void nimble_fetch_options_init(nimble_fetch_options_t *options);

/* What one fetch did. */
typedef struct nimble_fetch_stats_t {
  uint32_t blobs_fetched;     /* blobs downloaded (the manifest not counted) */
  uint64_t bytes_fetched;     /* their bytes */
  uint32_t blobs_from_cache;  /* blobs found, verified, in the cache */
  int offline;                /* 1 when the store was not reached (or options.offline) */
  double elapsed_ms;
  char manifest_digest[72];   /* the artifact's digest */
} nimble_fetch_stats_t;

/* Fetches the artifact `reference` names (see the top of this file) and
 * loads it. `options` may be NULL for defaults; `stats` may be NULL. Caller
 * releases *out. Errors: INVALID_ARGUMENT (bad reference or manifest),
 * NOT_FOUND / UNAUTHENTICATED / PERMISSION_DENIED (the store said so),
 * UNAVAILABLE (store unreachable and nothing usable cached), DATA_LOSS (a
 * digest mismatch, naming the digest), UNIMPLEMENTED (not a Nimble artifact
 * or a part this runtime cannot load), PERMISSION_DENIED (trusted keys are
 * set and the artifact is unsigned, signed by another key, or signed for
 * another tag or manifest). */
NIMBLE_API nimble_status_t nimble_fetch_artifact(const nimble_fetch_options_t *options, const char *reference,
                                                 nimble_executable **out);
NIMBLE_API nimble_status_t nimble_fetch_artifact_stats(const nimble_fetch_options_t *options,
                                                       const char *reference, nimble_executable **out,
                                                       nimble_fetch_stats_t *stats);

/* The cache directory the options select (see cache_dir above). Caller frees
 * with free(). */
NIMBLE_API nimble_status_t nimble_fetch_cache_dir(const nimble_fetch_options_t *options, char **out);

/* ---- Signatures of local executables -------------------------------------
 * (docs/executable.md, "Signatures"): `nimble compile --sign KEY` adds a
 * signature part, an Ed25519 signature of the executable digest, and
 * `nimble-run --require-signature` loads only executables signed by one of
 * the trusted keys. Here rather than in the core runtime because of
 * libsodium: the core loader checks the digests and calls a
 * nimble_executable_check_fn (nimble/runtime.h) before any part is parsed
 * or a kernel mapped; nimble_signature_policy_check is one. Key files are
 * those of `nimble keys` and the trusted keys above.
 *
 *   nimble_signature_policy *p;
 *   NIMBLE_RETURN_IF_ERROR(nimble_signature_policy_create(NULL, NULL, &p));
 *   s = nimble_executable_load_file_checked("m.nimble", 0, nimble_signature_policy_check, p, &exe);
 *   nimble_signature_policy_destroy(p);
 */

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
#endif /* NIMBLE_FETCH_H */
