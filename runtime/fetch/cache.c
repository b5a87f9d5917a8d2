/* The fetcher's local cache (docs/fetch.md):
 *   DIR/blobs/sha256/<hex>                      verified blobs and manifests
 *   DIR/refs/<scheme>_<host>_<port>/<name>/<tag>  "sha256:<hex>\n"
 * Every write goes to a temporary file in the same directory, is fsynced
 * and renamed into place, so a crash leaves either the old file or the new
 * one. Cached blobs are re-hashed on every read: a flipped bit on disk is
 * caught where it matters, before loading. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetch_internal.h"
#include "nimble/digest.h"
#include "oci_manifest.h"

static nimble_status_t io_error(const char *what, const char *path) {
  return nimble_status_make(NIMBLE_IO_ERROR, "cache: %s '%s': %s", what, path, strerror(errno));
}

/* mkdir -p for the directories under (and including) `path`. */
static nimble_status_t make_dirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cache: path of %zu bytes is unusable", n);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return io_error("cannot create directory", buf);
    buf[i] = c;
  }
  return nimble_ok();
}

nimble_status_t nimble_fetch_cache_prepare(const char *dir) {
  char *p = NULL;
  if (asprintf(&p, "%s/blobs/sha256", dir) < 0)
    return NIMBLE_OOM_IN("cache");
  nimble_status_t s = make_dirs(p);
  free(p);
  if (s) return s;
  if (asprintf(&p, "%s/refs", dir) < 0)
    return NIMBLE_OOM_IN("cache");
  s = make_dirs(p);
  free(p);
  return s;
}

static char *blob_path(const char *dir, const char *digest) {
  char *p = NULL;
  /* digest is validated "sha256:<hex>": the hex part is a safe file name. */
  if (asprintf(&p, "%s/blobs/sha256/%s", dir, digest + 7) < 0) return NULL;
  return p;
}

nimble_status_t nimble_fetch_cache_read_blob(const char *dir, const char *digest, uint64_t max_size,
                                             int *out_found, uint8_t **out_bytes, size_t *out_size) {
  *out_found = 0;
  *out_bytes = NULL;
  *out_size = 0;
  char *path = blob_path(dir, digest);
  if (!path) return NIMBLE_OOM_IN("cache");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    nimble_status_t s = errno == ENOENT || errno == ENOTDIR ? nimble_ok() : io_error("cannot open", path);
    free(path);
    return s;
  }
  struct stat st;
  nimble_status_t s = nimble_ok();
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0) {
    s = io_error("cannot stat", path);
  } else if (!S_ISREG(st.st_mode)) {
    s = nimble_status_make(NIMBLE_DATA_LOSS, "cache: blob %s: '%s' is not a regular file", digest, path);
  } else if ((uint64_t)st.st_size > max_size || (uint64_t)st.st_size > SIZE_MAX - 1) {
    s = nimble_status_make(NIMBLE_DATA_LOSS, "cache: blob %s: %lld bytes, more than expected",
                           digest, (long long)st.st_size);
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cache: out of memory for %lld bytes",
                           (long long)st.st_size);
  } else {
    size_t got = 0, want = (size_t)st.st_size;
    while (got < want) {
      ssize_t r = read(fd, buf + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (got != want) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "cache: short read of '%s'", path);
    } else {
      nimble_digest_t d;
      char hex[65];
      nimble_digest_compute(buf, want, &d);
      nimble_digest_format_hex(&d, hex);
      if (strcmp(hex, digest + 7) != 0) {
        s = nimble_status_make(NIMBLE_DATA_LOSS,
                               "cache: blob %s is damaged: its bytes hash to sha256:%s", digest, hex);
      } else {
        *out_found = 1;
        *out_bytes = buf;
        *out_size = want;
        buf = NULL;
      }
    }
  }
  free(buf);
  close(fd);
  free(path);
  return s;
}

/* Writes `size` bytes to a temporary file beside `path`, fsyncs, renames. */
static nimble_status_t write_atomic(const char *path, const void *bytes, size_t size) {
  char *tmp = NULL;
  if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
    return NIMBLE_OOM_IN("cache");
  int fd = mkstemp(tmp);
  if (fd < 0) {
    nimble_status_t s = io_error("cannot create", tmp);
    free(tmp);
    return s;
  }
  const uint8_t *p = bytes;
  size_t left = size;
  nimble_status_t s = nimble_ok();
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s = io_error("cannot write", tmp);
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  if (!s && fchmod(fd, 0644) != 0) s = io_error("cannot chmod", tmp);
  if (!s && fsync(fd) != 0) s = io_error("cannot fsync", tmp);
  if (close(fd) != 0 && !s) s = io_error("cannot close", tmp);
  if (!s && rename(tmp, path) != 0) s = io_error("cannot rename into place", path);
  if (s) unlink(tmp);
  free(tmp);
  if (s) return s;
  /* The rename is durable once the directory is synced. */
  char *slash = strrchr(path, '/');
  if (slash) {
    char *d = strndup(path, (size_t)(slash - path));
    int dfd = d ? open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
      fsync(dfd);
      close(dfd);
    }
    free(d);
  }
  return nimble_ok();
}

nimble_status_t nimble_fetch_cache_write_blob(const char *dir, const char *digest, const void *bytes,
                                              size_t size) {
  char *path = blob_path(dir, digest);
  if (!path) return NIMBLE_OOM_IN("cache");
  nimble_status_t s = write_atomic(path, bytes, size);
  free(path);
  return s;
}

void nimble_fetch_cache_remove_blob(const char *dir, const char *digest) {
  char *path = blob_path(dir, digest);
  if (path) unlink(path);
  free(path);
}

/* DIR/refs/<scheme>_<host>_<port>/<name>; the reference parser allowed only
 * [A-Za-z0-9.-] in the host and no "." or ".." name components. */
static char *tag_dir(const char *dir, const nimble_fetch_reference_t *ref) {
  const char *u = ref->base_url;
  size_t n = strlen(u);
  char *key = malloc(n + 1);
  if (!key) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char c = u[i];
    if (c == ':' && i + 2 < n && u[i + 1] == '/' && u[i + 2] == '/') {
      key[k++] = '_';
      i += 2;
    } else if (c == ':' || c == '[' || c == ']') {
      key[k++] = c == ':' ? '_' : '-';
    } else {
      key[k++] = c;
    }
  }
  key[k] = '\0';
  char *p = NULL;
  if (asprintf(&p, "%s/refs/%s/%s", dir, key, ref->name) < 0) p = NULL;
  free(key);
  return p;
}

nimble_status_t nimble_fetch_cache_read_tag(const char *dir, const nimble_fetch_reference_t *ref,
                                            int *out_found, char out_digest[72]) {
  *out_found = 0;
  char *d = tag_dir(dir, ref), *path = NULL;
  if (!d || asprintf(&path, "%s/%s", d, ref->tag) < 0) {
    free(d);
    return NIMBLE_OOM_IN("cache");
  }
  free(d);
  FILE *f = fopen(path, "re");
  if (!f) {
    nimble_status_t s = errno == ENOENT || errno == ENOTDIR ? nimble_ok() : io_error("cannot open", path);
    free(path);
    return s;
  }
  char line[128];
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
  if (!nimble_digest_valid(line, n)) {
    nimble_status_t s = nimble_status_make(NIMBLE_DATA_LOSS,
                                           "cache: tag record '%s' does not hold a digest", path);
    free(path);
    return s;
  }
  memcpy(out_digest, line, 72);
  *out_found = 1;
  free(path);
  return nimble_ok();
}

nimble_status_t nimble_fetch_cache_write_tag(const char *dir, const nimble_fetch_reference_t *ref,
                                             const char *digest) {
  char *d = tag_dir(dir, ref);
  if (!d) return NIMBLE_OOM_IN("cache");
  nimble_status_t s = make_dirs(d);
  char *path = NULL;
  if (!s && asprintf(&path, "%s/%s", d, ref->tag) < 0)
    s = NIMBLE_OOM_IN("cache");
  free(d);
  if (s) return s;
  char line[80];
  int n = snprintf(line, sizeof line, "%s\n", digest);
  s = write_atomic(path, line, (size_t)n);
  free(path);
  return s;
}
