/* Upload sessions: a file under <root>/uploads/ named by a random id, to
 * which chunks are appended until a commit verifies and installs it.
 *
 * The file itself is the whole session state (its size is the offset), so
 * a session survives request boundaries without any in-memory table. An
 * exclusive flock() on the file serialises the requests of one session:
 * writers, commits and expiry never interleave on the same bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_fs_internal.h"

struct nimble_store_upload_writer {
  int fd;
  uint64_t offset;
  uint64_t limit;
  char id[NIMBLE_STORE_UPLOAD_ID_LEN + 1];
};

nimble_status_t nimble_store_fs_upload_id_check(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n != NIMBLE_STORE_UPLOAD_ID_LEN)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "upload id must be %d hex digits, got %zu characters",
                              NIMBLE_STORE_UPLOAD_ID_LEN, n);
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "upload id: character %zu is not a lowercase hex digit", i);
  return nimble_ok();
}

static nimble_status_t session_missing(const char *id) {
  return nimble_status_make(NIMBLE_NOT_FOUND, "upload %s is unknown or has expired", id);
}

/* Opens and locks a session file. The lock is taken without waiting: a
 * second request on a busy session is refused rather than queued. After the
 * lock, a file that was unlinked meanwhile (committed, cancelled, expired)
 * counts as missing. */
static nimble_status_t session_lock(nimble_store_fs *store, const char *id, int flags, int *out_fd,
                                    struct stat *out_st) {
  NIMBLE_RETURN_IF_ERROR(nimble_store_fs_upload_id_check(id));
  char *path = nimble_store_path(store, "uploads/%s", id);
  if (!path) return NIMBLE_OOM();
  int fd = open(path, flags | O_CLOEXEC);
  int err = errno;
  if (fd < 0) {
    free(path);
    return err == ENOENT
               ? session_missing(id)
               : nimble_status_make(NIMBLE_IO_ERROR, "opening upload %s: %s", id, strerror(err));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    free(path);
    return nimble_status_make(NIMBLE_FAILED_PRECONDITION, "upload %s is in use by another request",
                              id);
  }
  /* Between open() and flock() a commit may have renamed this very file
   * into the blob store (or a cancel removed it): only if the session name
   * still leads to the inode we hold is it still the session. Without this
   * check a late writer could append to a visible blob. */
  struct stat st, by_name;
  int same = fstat(fd, &st) == 0 && st.st_nlink > 0 && stat(path, &by_name) == 0 &&
             by_name.st_ino == st.st_ino && by_name.st_dev == st.st_dev;
  free(path);
  if (!same) {
    close(fd);
    return session_missing(id);
  }
  *out_fd = fd;
  if (out_st) *out_st = st;
  return nimble_ok();
}

nimble_status_t nimble_store_fs_upload_start(nimble_store_fs *store,
                                             char out_id[NIMBLE_STORE_UPLOAD_ID_LEN + 1]) {
  unsigned char rnd[NIMBLE_STORE_UPLOAD_ID_LEN / 2];
  NIMBLE_RETURN_IF_ERROR(nimble_store_random(rnd, sizeof rnd));
  for (size_t i = 0; i < sizeof rnd; i++) snprintf(out_id + 2 * i, 3, "%02x", rnd[i]);
  char *path = nimble_store_path(store, "uploads/%s", out_id);
  if (!path) return NIMBLE_OOM();
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  nimble_status_t s =
      fd < 0 ? nimble_status_make(NIMBLE_IO_ERROR, "creating upload %s: %s", path, strerror(errno))
             : nimble_ok();
  if (fd >= 0) close(fd);
  free(path);
  return s;
}

nimble_status_t nimble_store_fs_upload_size(nimble_store_fs *store, const char *id,
                                            uint64_t *out_size) {
  NIMBLE_RETURN_IF_ERROR(nimble_store_fs_upload_id_check(id));
  char *path = nimble_store_path(store, "uploads/%s", id);
  if (!path) return NIMBLE_OOM();
  struct stat st;
  int rc = stat(path, &st);
  int err = errno;
  free(path);
  if (rc != 0)
    return err == ENOENT
               ? session_missing(id)
               : nimble_status_make(NIMBLE_IO_ERROR, "stat of upload %s: %s", id, strerror(err));
  *out_size = (uint64_t)st.st_size;
  return nimble_ok();
}

nimble_status_t nimble_store_fs_upload_open(nimble_store_fs *store, const char *id,
                                            nimble_store_upload_writer **out_writer,
                                            uint64_t *out_offset) {
  int fd;
  struct stat st;
  NIMBLE_RETURN_IF_ERROR(session_lock(store, id, O_WRONLY | O_APPEND, &fd, &st));
  nimble_store_upload_writer *w = calloc(1, sizeof *w);
  if (!w) {
    close(fd);
    return NIMBLE_OOM();
  }
  w->fd = fd;
  w->offset = (uint64_t)st.st_size;
  w->limit = store->max_blob_size;
  memcpy(w->id, id, NIMBLE_STORE_UPLOAD_ID_LEN + 1);
  *out_writer = w;
  if (out_offset) *out_offset = w->offset;
  return nimble_ok();
}

nimble_status_t nimble_store_upload_writer_write(nimble_store_upload_writer *writer,
                                                 const void *data, size_t size) {
  if ((uint64_t)size > writer->limit || writer->offset > writer->limit - (uint64_t)size)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "upload %s would exceed the blob size limit of %llu bytes",
                              writer->id, (unsigned long long)writer->limit);
  nimble_status_t s = nimble_store_write_all(writer->fd, data, size, "upload");
  if (s) {
    /* Leave the session as it was before this chunk: a half-written chunk
     * would make the offset lie. */
    if (ftruncate(writer->fd, (off_t)writer->offset) != 0) { /* keep the first error */
    }
    return nimble_status_annotate(s, "upload %s", writer->id);
  }
  writer->offset += size;
  return nimble_ok();
}

uint64_t nimble_store_upload_writer_offset(const nimble_store_upload_writer *writer) {
  return writer->offset;
}

nimble_status_t nimble_store_upload_writer_close(nimble_store_upload_writer *writer) {
  if (!writer) return nimble_ok();
  nimble_status_t s = nimble_ok();
  if (close(writer->fd) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "closing upload %s: %s", writer->id, strerror(errno));
  free(writer);
  return s;
}

static nimble_status_t hash_fd(int fd, const char *id, nimble_digest_t *out, uint64_t *out_size) {
  nimble_digest_ctx_t ctx;
  nimble_digest_ctx_init(&ctx);
  enum { BUF = 1 << 16 };
  unsigned char *buf = malloc(BUF);
  if (!buf) return NIMBLE_OOM();
  uint64_t total = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, BUF, (off_t)total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      nimble_status_t s =
          nimble_status_make(NIMBLE_IO_ERROR, "reading upload %s: %s", id, strerror(errno));
      free(buf);
      return s;
    }
    if (n == 0) break;
    nimble_digest_ctx_update(&ctx, buf, (size_t)n);
    total += (uint64_t)n;
  }
  free(buf);
  nimble_digest_ctx_final(&ctx, out);
  *out_size = total;
  return nimble_ok();
}

nimble_status_t nimble_store_fs_upload_commit(nimble_store_fs *store, const char *id,
                                              const nimble_digest_t *expected, uint64_t *out_size) {
  int fd;
  NIMBLE_RETURN_IF_ERROR(session_lock(store, id, O_RDWR, &fd, NULL));
  char *path = nimble_store_path(store, "uploads/%s", id);
  if (!path) {
    close(fd);
    return NIMBLE_OOM();
  }
  nimble_digest_t got;
  uint64_t size = 0;
  nimble_status_t s = hash_fd(fd, id, &got, &size);
  if (!s && !nimble_digest_equal(&got, expected)) {
    char want_text[NIMBLE_DIGEST_STRING_LEN + 1], got_text[NIMBLE_DIGEST_STRING_LEN + 1];
    nimble_digest_format(expected, want_text);
    nimble_digest_format(&got, got_text);
    s = nimble_status_make(NIMBLE_DATA_LOSS,
                           "digest mismatch: expected %s, the %llu bytes uploaded hash to %s",
                           want_text, (unsigned long long)size, got_text);
    unlink(path);
  }
  if (!s && fsync(fd) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "fsync of upload %s: %s", id, strerror(errno));
  /* Install while still holding the lock, so no writer can append between
   * the verification and the rename. */
  if (!s) s = nimble_store_blob_install(store, path, expected);
  close(fd);
  free(path);
  if (!s && out_size) *out_size = size;
  return s;
}

nimble_status_t nimble_store_fs_upload_cancel(nimble_store_fs *store, const char *id) {
  int fd;
  NIMBLE_RETURN_IF_ERROR(session_lock(store, id, O_RDONLY, &fd, NULL));
  char *path = nimble_store_path(store, "uploads/%s", id);
  nimble_status_t s = nimble_ok();
  if (!path)
    s = NIMBLE_OOM();
  else if (unlink(path) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "removing upload %s: %s", id, strerror(errno));
  free(path);
  close(fd);
  return s;
}

nimble_status_t nimble_store_fs_upload_expire(nimble_store_fs *store, time_t max_age_s,
                                              size_t *out_removed) {
  char *dir_path = nimble_store_path(store, "uploads");
  if (!dir_path) return NIMBLE_OOM();
  DIR *dir = opendir(dir_path);
  if (!dir) {
    nimble_status_t s =
        nimble_status_make(NIMBLE_IO_ERROR, "opening %s: %s", dir_path, strerror(errno));
    free(dir_path);
    return s;
  }
  size_t removed = 0;
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int fd = openat(dirfd(dir), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st;
    /* A locked file belongs to a request in progress: not stale. */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_nlink > 0 &&
        (max_age_s == 0 || now - st.st_mtime >= max_age_s)) {
      if (unlinkat(dirfd(dir), e->d_name, 0) == 0) removed++;
    }
    close(fd);
  }
  closedir(dir);
  free(dir_path);
  if (out_removed) *out_removed = removed;
  return nimble_ok();
}
