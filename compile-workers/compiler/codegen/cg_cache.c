/* The local kernel cache (nimble/kernel_cache.h): one file per entry,
 * DIR/XX/KEY, laid out as
 *
 *   "NIMBLKC1"  8 bytes, the format's magic and version
 *   key         64 hex digits: the name the entry was stored under
 *   size        8 bytes, little-endian: the payload's length
 *   sha256      32 bytes: the payload's digest
 *   payload     size bytes
 *
 * A reader checks all four, so a truncated, corrupted or misplaced file is
 * a miss, never linked. Writers create DIR/XX/.tmp-KEY-XXXXXX and rename it
 * onto DIR/XX/KEY: rename is atomic within a folder, so concurrent
 * compiles see a whole entry or none; two writers of one key write the
 * same bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nimble/digest.h"
#include "nimble/kernel_cache.h"

#define MAGIC "NIMBLKC1"
enum { MAGIC_LEN = 8, HEADER_LEN = MAGIC_LEN + NIMBLE_KERNEL_KEY_LEN + 8 + NIMBLE_DIGEST_SIZE };
/* A kernel object is a few hundred KiB at most; anything far larger is
 * not ours. */
#define MAX_PAYLOAD ((uint64_t)1 << 30)

typedef struct local_cache {
  nimble_kernel_cache_t base;
  char *dir; /* owned */
} local_cache;

static bool key_ok(const char *key) {
  if (!key || strlen(key) != NIMBLE_KERNEL_KEY_LEN) return false;
  for (const char *p = key; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

/* mkdir -p. */
static nimble_status_t make_dirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: bad folder name '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: creating %s: %s", buf, strerror(errno));
    buf[i] = c;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: %s is not a folder", path);
  return nimble_ok();
}

static nimble_status_t entry_path(const local_cache *c, const char *key, char *out, size_t size, bool subdir_only) {
  if (!key_ok(key)) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: bad key '%s'", key ? key : "(null)");
  int n = subdir_only ? snprintf(out, size, "%s/%.2s", c->dir, key) : snprintf(out, size, "%s/%.2s/%s", c->dir, key, key);
  if (n < 0 || (size_t)n >= size) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: folder name too long");
  return nimble_ok();
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static bool read_all(int fd, uint8_t *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = read(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += (size_t)r;
  }
  return true;
}

static bool write_all(int fd, const uint8_t *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += (size_t)w;
  }
  return true;
}

static nimble_status_t local_get(nimble_kernel_cache_t *base, const char *key, uint8_t **data, size_t *size,
                                 bool *found, bool *corrupt) {
  local_cache *c = (local_cache *)base;
  *data = NULL;
  *size = 0;
  *found = false;
  if (corrupt) *corrupt = false;
  char path[4400];
  NIMBLE_RETURN_IF_ERROR(entry_path(c, key, path, sizeof path, false));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return nimble_ok();
    return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: opening %s: %s", path, strerror(errno));
  }
  uint8_t header[HEADER_LEN];
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && st.st_size >= HEADER_LEN && read_all(fd, header, HEADER_LEN) &&
            memcmp(header, MAGIC, MAGIC_LEN) == 0 && memcmp(header + MAGIC_LEN, key, NIMBLE_KERNEL_KEY_LEN) == 0;
  uint64_t n = ok ? get_u64(header + MAGIC_LEN + NIMBLE_KERNEL_KEY_LEN) : 0;
  ok = ok && n <= MAX_PAYLOAD && (uint64_t)st.st_size - HEADER_LEN == n;
  uint8_t *buf = ok ? malloc(n ? (size_t)n : 1) : NULL;
  if (ok && !buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "kernel cache: out of memory reading %s", path);
  }
  ok = ok && read_all(fd, buf, (size_t)n);
  close(fd);
  if (ok) {
    nimble_digest_t want, got;
    memcpy(want.bytes, header + MAGIC_LEN + NIMBLE_KERNEL_KEY_LEN + 8, NIMBLE_DIGEST_SIZE);
    nimble_digest_compute(buf, (size_t)n, &got);
    ok = nimble_digest_equal(&want, &got);
  }
  if (!ok) {
    free(buf);
    if (corrupt) *corrupt = true;
    return nimble_ok();
  }
  *data = buf;
  *size = (size_t)n;
  *found = true;
  return nimble_ok();
}

static nimble_status_t local_put(nimble_kernel_cache_t *base, const char *key, const uint8_t *data, size_t size) {
  local_cache *c = (local_cache *)base;
  char sub[4400], path[4400], tmp[4500];
  NIMBLE_RETURN_IF_ERROR(entry_path(c, key, sub, sizeof sub, true));
  NIMBLE_RETURN_IF_ERROR(entry_path(c, key, path, sizeof path, false));
  if ((uint64_t)size > MAX_PAYLOAD)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: entry of %zu bytes is too large", size);
  if (mkdir(sub, 0755) != 0 && errno != EEXIST)
    return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: creating %s: %s", sub, strerror(errno));
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", sub, key);
  int fd = mkstemp(tmp);
  if (fd < 0) return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: creating %s: %s", tmp, strerror(errno));
  uint8_t header[HEADER_LEN];
  memcpy(header, MAGIC, MAGIC_LEN);
  memcpy(header + MAGIC_LEN, key, NIMBLE_KERNEL_KEY_LEN);
  put_u64(header + MAGIC_LEN + NIMBLE_KERNEL_KEY_LEN, (uint64_t)size);
  nimble_digest_t d;
  nimble_digest_compute(data, size, &d);
  memcpy(header + MAGIC_LEN + NIMBLE_KERNEL_KEY_LEN + 8, d.bytes, NIMBLE_DIGEST_SIZE);
  bool ok = fchmod(fd, 0644) == 0 && write_all(fd, header, HEADER_LEN) && write_all(fd, data, size);
  int e = errno;
  if (close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(tmp);
    return nimble_status_make(NIMBLE_IO_ERROR, "kernel cache: writing %s: %s", path, strerror(e));
  }
  return nimble_ok();
}

static void local_destroy(nimble_kernel_cache_t *base) {
  local_cache *c = (local_cache *)base;
  free(c->dir);
  free(c);
}

nimble_status_t nimble_kernel_cache_open_local(const char *dir, nimble_kernel_cache_t **out) {
  *out = NULL;
  if (!dir || !*dir) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: no folder given");
  NIMBLE_RETURN_IF_ERROR(make_dirs(dir));
  local_cache *c = calloc(1, sizeof *c);
  char *d = strdup(dir);
  if (!c || !d) {
    free(c);
    free(d);
    return NIMBLE_OOM_IN("kernel cache");
  }
  c->dir = d;
  c->base.get = local_get;
  c->base.put = local_put;
  c->base.destroy = local_destroy;
  *out = &c->base;
  return nimble_ok();
}

nimble_status_t nimble_kernel_cache_default_dir(char *out, size_t size) {
  const char *env = getenv("NIMBLE_KERNEL_CACHE");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (env && *env) n = snprintf(out, size, "%s", env);
  else if (xdg && *xdg) n = snprintf(out, size, "%s/nimble/kernels", xdg);
  else if (home && *home) n = snprintf(out, size, "%s/.cache/nimble/kernels", home);
  else return nimble_status_make(NIMBLE_NOT_FOUND, "kernel cache: none of NIMBLE_KERNEL_CACHE, XDG_CACHE_HOME, HOME is set");
  if (n < 0 || (size_t)n >= size) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel cache: folder name too long");
  return nimble_ok();
}

void nimble_kernel_cache_destroy(nimble_kernel_cache_t *c) {
  if (c && c->destroy) c->destroy(c);
}
