/* Linking an object file into a shared object with ld.lld, run as a child
 * process on files in a private temporary directory that is removed on
 * every path.
 *
 * Kernels call libm (log, expf, pow, ...), and the shared object must say
 * so itself: a process that dlopens it (nimble-run links libc, libdl and
 * pthreads, not libm) resolves an undefined symbol only from libraries
 * already loaded or named by DT_NEEDED. Linking against the target's real
 * libm needs its sysroot, which a compile worker for another architecture
 * does not have. So lld first builds a name-only libm: a shared object with soname
 * libm.so.6 and no symbols, from an empty linker script with the emulation
 * of the object's machine (x86_64 or aarch64); the kernels are then linked
 * against it, which records DT_NEEDED libm.so.6 (glibc's libm soname on
 * both). That object only names the library; the symbols stay undefined in
 * the kernel object (allowed in a shared link) and bind to the real libm
 * when the runtime loads it. memcpy/memset and other libc symbols need no
 * entry: libc is in every process. */
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

/* The lld emulation for an ELF relocatable's machine (e_machine at byte
 * 18, little-endian on both targets); NULL for anything else. */
static const char *emulation_of(const uint8_t *object, size_t size) {
  static const uint8_t magic[4] = {0x7f, 'E', 'L', 'F'};
  if (size < 20 || memcmp(object, magic, 4) != 0 || object[4] != 2 /* ELFCLASS64 */ ||
      object[5] != 1 /* little-endian */)
    return NULL;
  unsigned machine = (unsigned)object[18] | (unsigned)object[19] << 8;
  if (machine == 62) return "elf_x86_64";    /* EM_X86_64 */
  if (machine == 183) return "aarch64linux"; /* EM_AARCH64 */
  return NULL;
}

static nimble_status_t run_lld(const char *lld, char *const *argv, const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
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
  return nimble_codegen_link_objects(&object, &object_size, 1, lld, so_out, so_size);
}

nimble_status_t nimble_codegen_link_objects(const uint8_t *const *objects, const size_t *sizes, size_t n,
                                            const char *lld, uint8_t **so_out, size_t *so_size) {
  *so_out = NULL;
  *so_size = 0;
  if (!lld) lld = "ld.lld-16";
  if (n == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "linking kernels: no objects");
  if (n > 1000000) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "linking kernels: %zu objects", n);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  const char *emulation = emulation_of(objects[0], sizes[0]);
  for (size_t i = 0; i < n; i++) {
    const char *e = emulation_of(objects[i], sizes[i]);
    if (!e || strcmp(e, emulation ? emulation : "") != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "linking kernels: object %zu is not a 64-bit little-endian x86_64 or "
                                "aarch64 ELF file of the same machine as the others", i);
  }
  char dir[4096], so[4200], log[4200], lds[4200], libm[4200];
  if (snprintf(dir, sizeof dir, "%s/nimble-codegen-XXXXXX", tmp) >= (int)sizeof dir)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "TMPDIR is too long");
  if (!mkdtemp(dir)) return nimble_status_make(NIMBLE_IO_ERROR, "mkdtemp %s: %s", dir, strerror(errno));
  snprintf(so, sizeof so, "%s/kernels.so", dir);
  snprintf(log, sizeof log, "%s/lld.log", dir);
  snprintf(lds, sizeof lds, "%s/empty.lds", dir);
  snprintf(libm, sizeof libm, "%s/libm.so.6", dir);
  /* The objects as k0.o, k1.o, ... in order; the link reads them in that
   * order, so the output depends on their contents and order only. */
  char **objs = calloc(n, sizeof *objs);
  char **argv = calloc(n + 10, sizeof *argv);
  nimble_status_t s = (!objs || !argv) ? NIMBLE_OOM_IN("linking kernels")
                                       : nimble_ok();
  for (size_t i = 0; i < n && !s; i++) {
    size_t len = strlen(dir) + 32;
    objs[i] = malloc(len);
    if (!objs[i]) {
      s = NIMBLE_OOM_IN("linking kernels");
      break;
    }
    snprintf(objs[i], len, "%s/k%zu.o", dir, i);
    s = write_file(objs[i], objects[i], sizes[i]);
  }
  char *name_only_argv[] = {(char *)lld, "-shared", "-m", (char *)emulation, "-soname", "libm.so.6",
                       "-o", libm, lds, NULL};
  if (!s) {
    size_t a = 0;
    argv[a++] = (char *)lld;
    argv[a++] = "-shared";
    argv[a++] = "--hash-style=gnu";
    argv[a++] = "-z";
    argv[a++] = "noexecstack";
    argv[a++] = "-o";
    argv[a++] = so;
    for (size_t i = 0; i < n; i++) argv[a++] = objs[i];
    argv[a++] = libm;
    argv[a] = NULL;
  }
  if (!s) s = write_file(lds, (const uint8_t *)"", 0);
  if (!s) s = run_lld(lld, name_only_argv, log);
  if (!s) s = run_lld(lld, argv, log);
  if (!s) s = read_file(so, (size_t)1 << 31, so_out, so_size);
  for (size_t i = 0; objs && i < n; i++) {
    if (objs[i]) unlink(objs[i]);
    free(objs[i]);
  }
  free(objs);
  free(argv);
  unlink(so);
  unlink(log);
  unlink(lds);
  unlink(libm);
  if (rmdir(dir) != 0 && !s)
    s = nimble_status_make(NIMBLE_IO_ERROR, "removing %s: %s", dir, strerror(errno));
  if (s) {
    free(*so_out);
    *so_out = NULL;
    *so_size = 0;
  }
  return s;
}
