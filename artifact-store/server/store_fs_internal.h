/* Private to the filesystem backend: the store object and file helpers. */
#ifndef NIMBLE_STORE_FS_INTERNAL_H
#define NIMBLE_STORE_FS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/store_fs.h"

struct nimble_store_fs {
  char *root; /* owned; no trailing slash */
  uint64_t max_blob_size;
};

/* "<root>/<rel>", formatted; caller frees. NULL when out of memory. */
char *nimble_store_path(const nimble_store_fs *store, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "<root>/blobs/sha256/<2>/<64>"; caller frees. */
char *nimble_store_blob_path(const nimble_store_fs *store, const nimble_digest_t *digest);

/* mkdir -p, fsyncing each parent whose entries it changed. */
nimble_status_t nimble_store_mkdirs(const char *path);

/* fsync the directory holding `path` (or `path` itself when it is one). */
nimble_status_t nimble_store_fsync_dir(const char *dir);
nimble_status_t nimble_store_fsync_parent(const char *path);

/* A unique temporary file under <root>/uploads/: *out_path is caller-owned,
 * *out_fd open for writing. */
nimble_status_t nimble_store_temp_create(nimble_store_fs *store, char **out_path, int *out_fd);

/* Writes `size` bytes to fd, retrying short writes and EINTR. */
nimble_status_t nimble_store_write_all(int fd, const void *data, size_t size, const char *what);

/* Atomically replaces `path` with `size` bytes: temp file, fsync, rename,
 * directory fsync. Creates the parent directories. */
nimble_status_t nimble_store_write_atomic(nimble_store_fs *store, const char *path,
                                          const void *data, size_t size);

/* Reads a whole file of at most `max` bytes into a NUL-terminated buffer the
 * caller frees. NOT_FOUND when absent, RESOURCE_EXHAUSTED when larger. */
nimble_status_t nimble_store_read_file(const char *path, size_t max, char **out, size_t *out_size);

/* Fills `out` with `n` random bytes from the kernel. */
nimble_status_t nimble_store_random(void *out, size_t n);

/* Moves the complete, fsynced file at `tmp_path` into place as blob
 * `digest` (or removes it when the blob exists already), then fsyncs the
 * blob's directory. `tmp_path` is gone afterwards either way. */
nimble_status_t nimble_store_blob_install(nimble_store_fs *store, const char *tmp_path,
                                          const nimble_digest_t *digest);
#endif /* NIMBLE_STORE_FS_INTERNAL_H */
