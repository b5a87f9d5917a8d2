/* Store filesystem backend: content-addressed blobs, resumable uploads and
 * per-repository manifests and tags under one root directory.
 *
 * This is the storage half of nimble-store, usable and testable without
 * HTTP. Layout under the root:
 *
 *   blobs/sha256/<first 2 hex>/<64 hex>         blob bytes (manifests too)
 *   uploads/<32 hex id>                          an upload in progress
 *   repositories/<name>/_manifests/tags/<tag>    "sha256:<hex>\n"
 *   repositories/<name>/_manifests/revisions/sha256/<hex>/link
 *                                                "sha256:<hex>\n"
 *   repositories/<name>/_manifests/revisions/sha256/<hex>/media_type
 *
 * Every visible file is written to a temporary name, fsynced, renamed into
 * place and its directory fsynced, so a crash leaves either the old state or
 * the new one, never a partial blob. A blob becomes visible only after its
 * digest and size were verified. Blobs are global: once stored, a blob can be
 * read through any repository name (content addressing makes that safe).
 *
 * All functions are safe to call from several threads at once on one store.
 */
#ifndef NIMBLE_STORE_FS_H
#define NIMBLE_STORE_FS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "nimble/digest.h"
#include "nimble/media_type.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits from the OCI distribution spec and our own defaults. */
#define NIMBLE_STORE_NAME_MAX 255
#define NIMBLE_STORE_TAG_MAX 128
#define NIMBLE_STORE_MANIFEST_MAX (4u * 1024u * 1024u)
#define NIMBLE_STORE_DEFAULT_MAX_BLOB_SIZE (4ull * 1024u * 1024u * 1024u)
/* An upload id is 32 lowercase hex digits (128 random bits). */
#define NIMBLE_STORE_UPLOAD_ID_LEN 32

/* Media types a manifest may have: NIMBLE_MEDIA_TYPE_OCI_MANIFEST,
 * _OCI_INDEX, _DOCKER_MANIFEST and _DOCKER_LIST (nimble/media_type.h). */

typedef struct nimble_store_fs nimble_store_fs;
typedef struct nimble_store_upload_writer nimble_store_upload_writer;

typedef struct nimble_store_fs_options {
  /* Largest blob accepted, in bytes; 0 means NIMBLE_STORE_DEFAULT_MAX_BLOB_SIZE. */
  uint64_t max_blob_size;
} nimble_store_fs_options;

/* --- names ------------------------------------------------------------- */

/* OK when `name` follows the OCI repository name grammar
 * [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*
 * and has at most 255 characters; INVALID_ARGUMENT naming the offending
 * character and its position otherwise. No valid name can escape the root. */
nimble_status_t nimble_store_name_check(const char *name);

/* OK when `tag` matches [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}. */
nimble_status_t nimble_store_tag_check(const char *tag);

/* --- opening ----------------------------------------------------------- */

/* Opens (creating as needed) the store rooted at `root`. Removes every
 * temporary upload left by an earlier process: a session whose server died is
 * gone. `options` may be NULL. Caller owns *out_store and frees it with
 * nimble_store_fs_destroy(). */
nimble_status_t nimble_store_fs_create(const char *root, const nimble_store_fs_options *options,
                                       nimble_store_fs **out_store);
void nimble_store_fs_destroy(nimble_store_fs *store);

/* The root directory, borrowed from the store. */
const char *nimble_store_fs_root(const nimble_store_fs *store);
uint64_t nimble_store_fs_max_blob_size(const nimble_store_fs *store);

/* --- blobs ------------------------------------------------------------- */

/* Size of a stored blob; NOT_FOUND when absent. out_size may be NULL. */
nimble_status_t nimble_store_fs_blob_stat(nimble_store_fs *store, const nimble_digest_t *digest,
                                          uint64_t *out_size);

/* Opens a stored blob for reading. The caller owns *out_fd and closes it. */
nimble_status_t nimble_store_fs_blob_open(nimble_store_fs *store, const nimble_digest_t *digest,
                                          int *out_fd, uint64_t *out_size);

/* Stores `size` bytes from memory. With `expected` non-NULL the bytes must
 * hash to it (DATA_LOSS otherwise, nothing stored). out_digest may be NULL.
 * Storing a blob that exists already is a no-op that succeeds. */
nimble_status_t nimble_store_fs_blob_put(nimble_store_fs *store, const void *data, size_t size,
                                         const nimble_digest_t *expected,
                                         nimble_digest_t *out_digest);

/* --- uploads ----------------------------------------------------------- */

/* Starts an upload session; writes its id and a NUL into out_id. */
nimble_status_t nimble_store_fs_upload_start(nimble_store_fs *store,
                                             char out_id[NIMBLE_STORE_UPLOAD_ID_LEN + 1]);

/* OK when `id` has the shape of an upload id (so it can name a file). */
nimble_status_t nimble_store_fs_upload_id_check(const char *id);

/* Bytes received so far; NOT_FOUND for an unknown or expired session. */
nimble_status_t nimble_store_fs_upload_size(nimble_store_fs *store, const char *id,
                                            uint64_t *out_size);

/* Opens a session for appending. The session is locked while the writer is
 * open: a second writer, or a commit, gets FAILED_PRECONDITION. The caller
 * owns *out_writer and ends it with nimble_store_upload_writer_close().
 * *out_offset is the session's size, where the next byte goes. */
nimble_status_t nimble_store_fs_upload_open(nimble_store_fs *store, const char *id,
                                            nimble_store_upload_writer **out_writer,
                                            uint64_t *out_offset);

/* Appends bytes. RESOURCE_EXHAUSTED (and nothing written) when the session
 * would exceed the store's blob size limit. */
nimble_status_t nimble_store_upload_writer_write(nimble_store_upload_writer *writer,
                                                 const void *data, size_t size);

/* Session size after the writes so far. */
uint64_t nimble_store_upload_writer_offset(const nimble_store_upload_writer *writer);

/* Closes and frees the writer; the bytes written stay in the session. NULL
 * is fine. Returns an error when the final write to disk failed. */
nimble_status_t nimble_store_upload_writer_close(nimble_store_upload_writer *writer);

/* Verifies the session against `expected` and, when it matches, makes it the
 * blob `expected` (fsync, rename, directory fsync) and ends the session.
 * A mismatch is DATA_LOSS and ends the session with nothing stored (the
 * bytes cannot become right later). If the blob exists already, the session
 * is dropped and the stored blob kept: identical uploads store one blob.
 * out_size (may be NULL) receives the blob's size. */
nimble_status_t nimble_store_fs_upload_commit(nimble_store_fs *store, const char *id,
                                              const nimble_digest_t *expected, uint64_t *out_size);

/* Ends a session and removes its bytes; NOT_FOUND when unknown. */
nimble_status_t nimble_store_fs_upload_cancel(nimble_store_fs *store, const char *id);

/* Removes sessions not written to for `max_age_s` seconds (0: all that are
 * not locked by a writer). out_removed may be NULL. */
nimble_status_t nimble_store_fs_upload_expire(nimble_store_fs *store, time_t max_age_s,
                                              size_t *out_removed);

/* --- manifests --------------------------------------------------------- */

/* Validates a manifest (JSON, schemaVersion 2, descriptors well formed) of
 * `media_type` and returns the digests it references: config and layers for
 * an image manifest, manifests[] for an index. INVALID_ARGUMENT names what
 * is wrong and where; UNIMPLEMENTED for an unsupported media type.
 * *out_refs is caller-owned (free()); *out_sizes likewise. */
nimble_status_t nimble_store_manifest_references(const void *bytes, size_t size,
                                                 const char *media_type, nimble_digest_t **out_refs,
                                                 int64_t **out_sizes, size_t *out_count);

/* Stores a manifest byte-exact under repository `name` and, when `reference`
 * is a tag, points the tag at it. `reference` may also be the manifest's
 * digest, which must match (DATA_LOSS otherwise). Refused with NOT_FOUND when
 * a referenced blob is missing, FAILED_PRECONDITION when its size differs,
 * INVALID_ARGUMENT for a malformed manifest, RESOURCE_EXHAUSTED over 4 MiB.
 * out_digest (may be NULL) receives the manifest digest. */
nimble_status_t nimble_store_fs_manifest_put(nimble_store_fs *store, const char *name,
                                             const char *reference, const char *media_type,
                                             const void *bytes, size_t size,
                                             nimble_digest_t *out_digest);

/* Resolves `reference` (tag or digest) in repository `name`: NOT_FOUND when
 * the repository, tag or revision is unknown. */
nimble_status_t nimble_store_fs_manifest_resolve(nimble_store_fs *store, const char *name,
                                                 const char *reference,
                                                 nimble_digest_t *out_digest);

/* Reads a manifest by tag or digest. Caller owns *out_bytes and
 * *out_media_type (free()). Either out pointer may be NULL. */
nimble_status_t nimble_store_fs_manifest_get(nimble_store_fs *store, const char *name,
                                             const char *reference, void **out_bytes,
                                             size_t *out_size, char **out_media_type,
                                             nimble_digest_t *out_digest);

/* 1 when repository `name` exists (has had a manifest pushed). */
int nimble_store_fs_repo_exists(nimble_store_fs *store, const char *name);

/* The repository's tags, sorted bytewise. NOT_FOUND for an unknown
 * repository. Caller owns the array and each string (free each, then the
 * array; nimble_store_fs_tags_free does both). */
nimble_status_t nimble_store_fs_tags_list(nimble_store_fs *store, const char *name,
                                          char ***out_tags, size_t *out_count);
void nimble_store_fs_tags_free(char **tags, size_t count);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_STORE_FS_H */
