/* Linking an object file into a shared object with ld.lld, run as a child
 * process on files in a private temporary directory that is removed on
 * every path. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nimble/codegen.h"

extern char **environ;

static nimble_status_t write_file(const char *path, const uint8_t *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return nimble_status_make(NIMBLE_IO_ERROR, "creating %s: %s", path, strerror(errno));
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      return nimble_status_make(NIMBLE_IO_ERROR, "writing %s: %s", path, strerror(e));
    }
    done += (size_t)w;
  }
  if (close(fd) != 0) return nimble_status_make(NIMBLE_IO_ERROR, "closing %s: %s", path, strerror(errno));
  return nimble_ok();
}

static nimble_status_t read_file(const char *path, size_t limit, uint8_t **out, size_t *size) {
  *out = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nimble_status_make(NIMBLE_IO_ERROR, "opening %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size > limit) {
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot size it or larger than %zu bytes", path, limit);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory reading %s", path);
  }
  size_t done = 0;
  while (done < n) {
    ssize_t r = read(fd, buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += (size_t)r;
  }
  close(fd);
  if (done != n) {
    free(buf);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: short read", path);
  }
  *out = buf;
  *size = n;
  return nimble_ok();
}

static nimble_status_t run_lld(const char *lld, const char *obj, const char *so,
                               const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *argv[] = {(char *)lld, "-shared", "--hash-style=gnu", "-z", "noexecstack", "-o", (char *)so,
                  (char *)obj, NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, lld, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return nimble_status_make(NIMBLE_UNAVAILABLE, "cannot run the linker '%s': %s", lld, strerror(rc));
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return nimble_status_make(NIMBLE_INTERNAL, "waiting for '%s': %s", lld, strerror(errno));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return nimble_ok();
  uint8_t *text = NULL;
  size_t n = 0;
  nimble_status_t rs = read_file(log, 1 << 16, &text, &n);
  nimble_status_free(rs);
  if (n > 2000) n = 2000;
  nimble_status_t s = nimble_status_make(NIMBLE_INTERNAL, "'%s -shared' failed (%s %d): %.*s", lld,
                                         WIFEXITED(status) ? "exit status" : "signal",
                                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), (int)n,
                                         text ? (const char *)text : "");
  free(text);
  return s;
}

nimble_status_t nimble_codegen_link_shared(const uint8_t *object, size_t object_size, const char *lld,
                                           uint8_t **so_out, size_t *so_size) {
  *so_out = NULL;
  *so_size = 0;
  if (!lld) lld = "ld.lld-16";
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char dir[4096], obj[4200], so[4200], log[4200];
  if (snprintf(dir, sizeof dir, "%s/nimble-codegen-XXXXXX", tmp) >= (int)sizeof dir)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "TMPDIR is too long");
  if (!mkdtemp(dir)) return nimble_status_make(NIMBLE_IO_ERROR, "mkdtemp %s: %s", dir, strerror(errno));
  snprintf(obj, sizeof obj, "%s/kernels.o", dir);
  snprintf(so, sizeof so, "%s/kernels.so", dir);
  snprintf(log, sizeof log, "%s/lld.log", dir);
  nimble_status_t s = write_file(obj, object, object_size);
  if (!s) s = run_lld(lld, obj, so, log);
  if (!s) s = read_file(so, (size_t)1 << 31, so_out, so_size);
  unlink(obj);
  unlink(so);
  unlink(log);
  if (rmdir(dir) != 0 && !s)
    s = nimble_status_make(NIMBLE_IO_ERROR, "removing %s: %s", dir, strerror(errno));
  if (s) {
    free(*so_out);
    *so_out = NULL;
    *so_size = 0;
  }
  return s;
}
