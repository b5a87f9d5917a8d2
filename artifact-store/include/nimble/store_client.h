/* Store client: pushes and pulls blobs and manifests over the OCI
 * Distribution HTTP API, against nimble-store or any OCI registry.
 *
 * The compile farm pushes artifacts with it; the runtime and the CLI pull
 * them. Every byte pulled is checked against its digest before it is handed
 * out, uploads are skipped when the store already has the blob, and transient
 * failures (5xx, 429, 408, connection errors) are retried with exponential
 * backoff and jitter, within a bounded number of attempts and total time.
 * Interrupted downloads resume with `Range`; interrupted chunked uploads
 * resume from the offset the server reports.
 *
 *   nimble_store_client_options_t o = {.base_url = "http://127.0.0.1:5000",
 *                                      .token = "secret"};
 *   nimble_store_client *c;
 *   NIMBLE_RETURN_IF_ERROR(nimble_store_client_create(&o, &c));
 *   nimble_digest_t d;
 *   nimble_status_t s = nimble_store_push_blob(c, "models/lstm", data, n, &d);
 *   nimble_store_client_destroy(c);
 *
 * Errors name the method and URL, the HTTP status, and the OCI error code and
 * message from the server's JSON body. Codes: 401 → UNAUTHENTICATED,
 * 403 → PERMISSION_DENIED, 404 → NOT_FOUND, digest mismatch → DATA_LOSS,
 * connection refused or 5xx after the last retry → UNAVAILABLE, a size over a
 * cap → RESOURCE_EXHAUSTED.
 *
 * A client is not thread-safe: use one per thread (they are cheap).
 */
#ifndef NIMBLE_STORE_CLIENT_H
#define NIMBLE_STORE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/digest.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nimble_store_client nimble_store_client;

/* What the event callback is told. */
typedef enum nimble_store_event_kind_t {
  /* One HTTP exchange finished (any status) or failed to connect/transfer. */
  NIMBLE_STORE_EVENT_RESPONSE = 1,
  /* The client is about to sleep `delay_ms` and try again. */
  NIMBLE_STORE_EVENT_RETRY = 2,
  /* Bytes moved for the current blob upload or download. */
  NIMBLE_STORE_EVENT_PROGRESS = 3,
} nimble_store_event_kind_t;

/* Every pointer in an event is borrowed for the duration of the callback. */
typedef struct nimble_store_event_t {
  nimble_store_event_kind_t kind;
  const char *method;      /* "GET", "HEAD", "POST", "PUT", "PATCH" */
  const char *url;         /* the absolute URL of the request */
  const char *range;       /* the request's Range header value, or NULL */
  long http_status;        /* RESPONSE: the status, 0 when the transfer failed */
  const char *error;       /* RESPONSE: the transfer error (curl), or NULL */
  int attempt;             /* 1-based attempt of this operation */
  long delay_ms;           /* RETRY: the sleep before the next attempt */
  uint64_t bytes_done;     /* PROGRESS */
  uint64_t bytes_total;    /* PROGRESS: 0 when unknown */
} nimble_store_event_t;

typedef void (*nimble_store_event_fn)(void *user, const nimble_store_event_t *event);

/* Options. Zero means "the default" for every numeric field. */
typedef struct nimble_store_client_options_t {
  const char *base_url;        /* "http://host:port" (required; copied) */
  const char *token;           /* bearer token sent on every request, or NULL (copied) */
  long connect_timeout_ms;     /* default 5000 */
  long stall_timeout_ms;       /* abort a transfer that moves no byte for this long; default 30000 */
  long request_timeout_ms;     /* whole-request cap; default none (large blobs) */
  int max_attempts;            /* per operation, including the first; default 5 */
  long backoff_base_ms;        /* first retry delay before jitter; default 100 */
  long backoff_max_ms;         /* cap of one delay; default 5000 */
  long retry_budget_ms;        /* no new attempt starts after this much time; default 60000 */
  size_t chunk_size;           /* PATCH chunk size for chunked uploads; default 8 MiB */
  size_t monolithic_max;       /* blobs up to this size use POST+PUT; default = chunk_size */
  size_t max_manifest_size;    /* cap on a pulled manifest; default 4 MiB */
  size_t max_blob_size;        /* cap on a blob pulled into memory; default 1 GiB */
  nimble_store_event_fn on_event;  /* optional; called synchronously */
  void *event_user;
} nimble_store_client_options_t;

/* Reads the first token of a token file (the store's format: one token a
 * line, blank and '#' lines skipped, blanks around a token ignored) into
 * out (cap bytes, NUL-terminated). Errors name the file and the reason:
 * IO_ERROR when it cannot be opened, INVALID_ARGUMENT when it holds no
 * token or one longer than cap - 1. */
nimble_status_t nimble_store_read_token_file(const char *path, char *out, size_t cap);

/* Creates a client. `opts` and its strings are copied. Caller destroys
 * `*out_client` with nimble_store_client_destroy(). INVALID_ARGUMENT names a
 * bad base URL or option. */
nimble_status_t nimble_store_client_create(const nimble_store_client_options_t *opts,
                                           nimble_store_client **out_client);

/* Frees the client; NULL is fine. */
void nimble_store_client_destroy(nimble_store_client *client);

/* HEAD on the blob: *out_exists is 1 and *out_size its size when the store
 * has it, 0 otherwise (not an error). out_size may be NULL. */
nimble_status_t nimble_store_blob_exists(nimble_store_client *client, const char *repo,
                                         const nimble_digest_t *digest, int *out_exists,
                                         uint64_t *out_size);

/* Pushes `size` bytes (borrowed) as a blob and returns its digest. Skipped
 * (one HEAD, nothing uploaded) when the store already has it. Small blobs go
 * as POST+PUT, larger ones as chunked PATCHes of options.chunk_size. */
nimble_status_t nimble_store_push_blob(nimble_store_client *client, const char *repo,
                                       const void *data, size_t size,
                                       nimble_digest_t *out_digest);

/* Same, streaming from the file at `path` (never loaded whole into memory).
 * out_size may be NULL. */
nimble_status_t nimble_store_push_blob_file(nimble_store_client *client, const char *repo,
                                            const char *path, nimble_digest_t *out_digest,
                                            uint64_t *out_size);

/* Pushes a manifest byte-exact under `tag` (or by its digest when tag is
 * NULL) with Content-Type `media_type`. Its blobs must be pushed first (OCI
 * registries check). Returns the manifest's digest, checked against the one
 * the server reports. */
nimble_status_t nimble_store_push_manifest(nimble_store_client *client, const char *repo,
                                           const char *tag, const void *bytes, size_t size,
                                           const char *media_type,
                                           nimble_digest_t *out_digest);

/* Pulls a manifest by tag or by "sha256:..." digest. When the reference is a
 * digest the bytes are checked against it; otherwise against the server's
 * Docker-Content-Digest header when it sends one. Caller frees *out_bytes and
 * *out_media_type with free(). out_media_type and out_digest may be NULL. */
nimble_status_t nimble_store_pull_manifest(nimble_store_client *client, const char *repo,
                                           const char *reference, uint8_t **out_bytes,
                                           size_t *out_size, char **out_media_type,
                                           nimble_digest_t *out_digest);

/* Pulls a blob into memory (capped by options.max_blob_size), verified
 * against `digest`. Caller frees *out_bytes with free(). */
nimble_status_t nimble_store_pull_blob(nimble_store_client *client, const char *repo,
                                       const nimble_digest_t *digest, uint8_t **out_bytes,
                                       size_t *out_size);

/* Pulls a blob into `path`: writes a temporary file beside it, resumes with
 * Range after an interrupted transfer, verifies the digest, fsyncs and
 * renames it into place. On failure `path` is untouched and no temporary file
 * is left behind. */
nimble_status_t nimble_store_pull_blob_to_file(nimble_store_client *client, const char *repo,
                                               const nimble_digest_t *digest, const char *path);

/* Lists the tags of `repo` (following pagination). Caller frees with
 * nimble_store_tags_free(*out_tags, *out_count). */
nimble_status_t nimble_store_list_tags(nimble_store_client *client, const char *repo,
                                       char ***out_tags, size_t *out_count);

void nimble_store_tags_free(char **tags, size_t count);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_STORE_CLIENT_H */
