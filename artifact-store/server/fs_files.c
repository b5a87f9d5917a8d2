/* Durable file helpers for the store: every visible change goes through a
 * temporary file, fsync, rename and a directory fsync, so that a crash at any
 * point leaves either the old file or the complete new one. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_fs_internal.h"

char *nimble_store_path(const nimble_store_fs *store, const char *fmt, ...) {
  char *rel = NULL, *full = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&rel, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  if (asprintf(&full, "%s/%s", store->root, rel) < 0) full = NULL;
  free(rel);
  return full;
}

char *nimble_store_blob_path(const nimble_store_fs *store, const nimble_digest_t *digest) {
  char hex[65];
  nimble_digest_format_hex(digest, hex);
  return nimble_store_path(store, "blobs/sha256/%.2s/%s", hex, hex);
}

nimble_status_t nimble_store_fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "opening directory %s: %s", dir, strerror(errno));
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "fsync of directory %s: %s", dir, strerror(err));
  return nimble_ok();
}

nimble_status_t nimble_store_fsync_parent(const char *path) {
  char *copy = strdup(path);
  if (!copy) return NIMBLE_OOM();
  char *slash = strrchr(copy, '/');
  if (slash == copy)
    slash[1] = '\0';
  else if (slash)
    *slash = '\0';
  else
    strcpy(copy, ".");
  nimble_status_t s = nimble_store_fsync_dir(copy);
  free(copy);
  return s;
}

nimble_status_t nimble_store_mkdirs(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return nimble_ok();
    return nimble_status_make(NIMBLE_IO_ERROR, "%s exists and is not a directory", path);
  }
  char *copy = strdup(path);
  if (!copy) return NIMBLE_OOM();
  nimble_status_t s = nimble_ok();
  /* Walk the components left to right; each new directory's parent is
   * fsynced so the new entry survives a crash. */
  for (char *p = copy + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(copy, 0755) == 0) {
      s = nimble_store_fsync_parent(copy);
    } else if (errno != EEXIST) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "creating directory %s: %s", copy, strerror(errno));
    } else if (stat(copy, &st) != 0 || !S_ISDIR(st.st_mode)) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "%s exists and is not a directory", copy);
    }
    *p = saved;
    if (s || saved == '\0') break;
  }
  free(copy);
  return s;
}

nimble_status_t nimble_store_random(void *out, size_t n) {
  unsigned char *p = out;
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return nimble_status_make(NIMBLE_INTERNAL, "getrandom: %s", strerror(errno));
    }
    p += got;
    n -= (size_t)got;
  }
  return nimble_ok();
}

nimble_status_t nimble_store_temp_create(nimble_store_fs *store, char **out_path, int *out_fd) {
  unsigned char rnd[12];
  NIMBLE_RETURN_IF_ERROR(nimble_store_random(rnd, sizeof rnd));
  char hex[sizeof rnd * 2 + 1];
  for (size_t i = 0; i < sizeof rnd; i++) snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
  char *path = nimble_store_path(store, "uploads/tmp-%s", hex);
  if (!path) return NIMBLE_OOM();
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "creating temporary file %s: %s", path,
                                           strerror(errno));
    free(path);
    return s;
  }
  /* Locked so that expiry leaves it alone while it is being written. */
  (void)flock(fd, LOCK_EX | LOCK_NB);
  *out_path = path;
  *out_fd = fd;
  return nimble_ok();
}

nimble_status_t nimble_store_write_all(int fd, const void *data, size_t size, const char *what) {
  const unsigned char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return nimble_status_make(errno == ENOSPC ? NIMBLE_RESOURCE_EXHAUSTED : NIMBLE_IO_ERROR,
                                "writing %s: %s", what, strerror(errno));
    }
    p += n;
    size -= (size_t)n;
  }
  return nimble_ok();
}

nimble_status_t nimble_store_write_atomic(nimble_store_fs *store, const char *path,
                                          const void *data, size_t size) {
  char *dir = strdup(path);
  if (!dir) return NIMBLE_OOM();
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  nimble_status_t s = nimble_store_mkdirs(dir);
  free(dir);
  if (s) return s;

  char *tmp = NULL;
  int fd = -1;
  NIMBLE_RETURN_IF_ERROR(nimble_store_temp_create(store, &tmp, &fd));
  s = nimble_store_write_all(fd, data, size, tmp);
  if (!s && fsync(fd) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "fsync of %s: %s", tmp, strerror(errno));
  if (close(fd) != 0 && !s)
    s = nimble_status_make(NIMBLE_IO_ERROR, "closing %s: %s", tmp, strerror(errno));
  if (!s && rename(tmp, path) != 0)
    s = nimble_status_make(NIMBLE_IO_ERROR, "renaming %s to %s: %s", tmp, path, strerror(errno));
  if (s) unlink(tmp);
  free(tmp);
  if (!s) s = nimble_store_fsync_parent(path);
  return s;
}

nimble_status_t nimble_store_read_file(const char *path, size_t max, char **out, size_t *out_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return nimble_status_make(NIMBLE_NOT_FOUND, "%s does not exist", path);
    return nimble_status_make(NIMBLE_IO_ERROR, "opening %s: %s", path, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "stat of %s: %s", path, strerror(errno));
  }
  if (st.st_size < 0 || (uint64_t)st.st_size > max) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s has %lld bytes, more than %zu", path,
                              (long long)st.st_size, max);
  }
  size_t size = (size_t)st.st_size;
  char *buf = malloc(size + 1);
  if (!buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory reading %s", path);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "reading %s: %s", path,
                                             n < 0 ? strerror(errno) : "file shrank");
      close(fd);
      free(buf);
      return s;
    }
    got += (size_t)n;
  }
  close(fd);
  buf[size] = '\0';
  *out = buf;
  if (out_size) *out_size = size;
  return nimble_ok();
}
