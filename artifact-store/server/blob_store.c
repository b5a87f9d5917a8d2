/* The store object and its content-addressed blobs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_fs_internal.h"

nimble_status_t nimble_store_fs_create(const char *root, const nimble_store_fs_options *options,
                                       nimble_store_fs **out_store) {
  if (!root || !*root)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "store root directory is empty");
  nimble_store_fs *store = calloc(1, sizeof *store);
  if (!store) return NIMBLE_OOM();
  store->root = strdup(root);
  if (!store->root) {
    free(store);
    return NIMBLE_OOM();
  }
  size_t len = strlen(store->root);
  while (len > 1 && store->root[len - 1] == '/') store->root[--len] = '\0';
  store->max_blob_size = options && options->max_blob_size ? options->max_blob_size
                                                           : NIMBLE_STORE_DEFAULT_MAX_BLOB_SIZE;
  nimble_status_t s = nimble_store_mkdirs(store->root);
  const char *subdirs[] = {"blobs/sha256", "uploads", "repositories"};
  for (size_t i = 0; !s && i < sizeof subdirs / sizeof subdirs[0]; i++) {
    char *p = nimble_store_path(store, "%s", subdirs[i]);
    s = p ? nimble_store_mkdirs(p) : NIMBLE_OOM();
    free(p);
  }
  /* Sessions of an earlier process cannot be continued by anyone who still
   * holds their URL in a meaningful way; start clean. */
  if (!s) s = nimble_store_fs_upload_expire(store, 0, NULL);
  if (s) {
    nimble_store_fs_destroy(store);
    return nimble_status_annotate(s, "opening store at %s", root);
  }
  *out_store = store;
  return nimble_ok();
}

void nimble_store_fs_destroy(nimble_store_fs *store) {
  if (!store) return;
  free(store->root);
  free(store);
}

const char *nimble_store_fs_root(const nimble_store_fs *store) { return store->root; }

uint64_t nimble_store_fs_max_blob_size(const nimble_store_fs *store) {
  return store->max_blob_size;
}

static nimble_status_t blob_missing(const nimble_digest_t *digest) {
  char text[NIMBLE_DIGEST_STRING_LEN + 1];
  nimble_digest_format(digest, text);
  return nimble_status_make(NIMBLE_NOT_FOUND, "blob %s is not in the store", text);
}

nimble_status_t nimble_store_fs_blob_stat(nimble_store_fs *store, const nimble_digest_t *digest,
                                          uint64_t *out_size) {
  char *path = nimble_store_blob_path(store, digest);
  if (!path) return NIMBLE_OOM();
  struct stat st;
  int rc = stat(path, &st);
  int err = errno;
  nimble_status_t s = nimble_ok();
  if (rc != 0)
    s = (err == ENOENT || err == ENOTDIR)
            ? blob_missing(digest)
            : nimble_status_make(NIMBLE_IO_ERROR, "stat of %s: %s", path, strerror(err));
  else if (out_size)
    *out_size = (uint64_t)st.st_size;
  free(path);
  return s;
}

nimble_status_t nimble_store_fs_blob_open(nimble_store_fs *store, const nimble_digest_t *digest,
                                          int *out_fd, uint64_t *out_size) {
  char *path = nimble_store_blob_path(store, digest);
  if (!path) return NIMBLE_OOM();
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int err = errno;
  nimble_status_t s = nimble_ok();
  struct stat st;
  if (fd < 0) {
    s = (err == ENOENT || err == ENOTDIR)
            ? blob_missing(digest)
            : nimble_status_make(NIMBLE_IO_ERROR, "opening %s: %s", path, strerror(err));
  } else if (fstat(fd, &st) != 0) {
    s = nimble_status_make(NIMBLE_IO_ERROR, "stat of %s: %s", path, strerror(errno));
    close(fd);
  } else {
    *out_fd = fd;
    if (out_size) *out_size = (uint64_t)st.st_size;
  }
  free(path);
  return s;
}

nimble_status_t nimble_store_blob_install(nimble_store_fs *store, const char *tmp_path,
                                          const nimble_digest_t *digest) {
  char *path = nimble_store_blob_path(store, digest);
  if (!path) {
    unlink(tmp_path);
    return NIMBLE_OOM();
  }
  nimble_status_t s = nimble_ok();
  if (access(path, F_OK) == 0) {
    /* Content addressing: the stored blob has these very bytes. */
    unlink(tmp_path);
    free(path);
    return nimble_ok();
  }
  char *dir = strdup(path);
  if (!dir) s = NIMBLE_OOM();
  if (!s) {
    *strrchr(dir, '/') = '\0';
    s = nimble_store_mkdirs(dir);
  }
  /* rename() replaces atomically; when two identical uploads race here the
   * loser replaces the winner's file with the same bytes, and one blob
   * remains either way. */
  if (!s && rename(tmp_path, path) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "renaming %s to %s: %s", tmp_path, path,
                           strerror(errno));
  if (s) unlink(tmp_path);
  if (!s) s = nimble_store_fsync_dir(dir);
  free(dir);
  free(path);
  return s;
}

nimble_status_t nimble_store_fs_blob_put(nimble_store_fs *store, const void *data, size_t size,
                                         const nimble_digest_t *expected,
                                         nimble_digest_t *out_digest) {
  if ((uint64_t)size > store->max_blob_size)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "blob of %zu bytes exceeds the limit of %llu bytes", size,
                              (unsigned long long)store->max_blob_size);
  nimble_digest_t digest;
  nimble_digest_compute(data, size, &digest);
  if (expected && !nimble_digest_equal(expected, &digest)) {
    char want[NIMBLE_DIGEST_STRING_LEN + 1], got[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(expected, want);
    nimble_digest_format(&digest, got);
    return nimble_status_make(NIMBLE_DATA_LOSS, "digest mismatch: expected %s, content is %s", want,
                              got);
  }
  if (out_digest) *out_digest = digest;
  if (nimble_status_consume(nimble_store_fs_blob_stat(store, &digest, NULL)) == NIMBLE_OK)
    return nimble_ok();

  char *tmp = NULL;
  int fd = -1;
  NIMBLE_RETURN_IF_ERROR(nimble_store_temp_create(store, &tmp, &fd));
  nimble_status_t s = nimble_store_write_all(fd, data, size, tmp);
  if (!s && fsync(fd) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "fsync of %s: %s", tmp, strerror(errno));
  if (close(fd) != 0 && !s)
    s = nimble_status_make(NIMBLE_IO_ERROR, "closing %s: %s", tmp, strerror(errno));
  if (s)
    unlink(tmp);
  else
    s = nimble_store_blob_install(store, tmp, &digest);
  free(tmp);
  return s;
}
