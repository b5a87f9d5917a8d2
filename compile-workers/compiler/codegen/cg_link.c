/* Linking an object file into a shared object with the target's GNU ld
 * (x86_64-linux-gnu-ld.bfd, aarch64-linux-gnu-ld.bfd; ld.lld-16 where that
 * is not installed), run as a child process on files in a private
 * temporary directory that is removed on every path. GNU ld starts in
 * ~2 ms; ld.lld-16 spent ~60 ms of every compile loading the shared
 * libLLVM (ld.so binding its ~400,000 relocations), more than code
 * generation itself for a small model.
 *
 * Kernels call libm (log, expf, pow, ...), and the shared object must say
 * so itself: a process that dlopens it (nimble-run links libc, libdl and
 * pthreads, not libm) resolves an undefined symbol only from libraries
 * already loaded or named by DT_NEEDED. Linking against the target's real
 * libm needs its sysroot, which a compile worker for another architecture
 * does not have. So the kernels are linked against a name-only libm: a
 * shared object with soname libm.so.6 and no symbols, written here byte by
 * byte for the object's machine (x86_64 or aarch64; name_only_libm), which
 * records DT_NEEDED libm.so.6 (glibc's libm soname on both). That object
 * only names the library; the symbols stay undefined in the kernel object
 * (allowed in a shared link) and bind to the real libm when the runtime
 * loads it. (It used to come from a first ld.lld run on an empty linker
 * script; writing it costs nothing, where a second ld.lld process cost
 * ~0.07 s of startup per compile.) memcpy/memset and other libc symbols
 * need no entry: libc is in every process. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
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

static void put16(uint8_t *p, unsigned v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* One ELF64 section header at p. */
static void put_shdr(uint8_t *p, uint32_t name, uint32_t type, uint64_t flags, uint64_t offset, uint64_t size,
                     uint32_t link, uint32_t info, uint64_t align, uint64_t entsize) {
  put32(p, name);
  put32(p + 4, type);
  put64(p + 8, flags);
  put64(p + 16, offset); /* sh_addr: the file offset (addresses are never used) */
  put64(p + 24, offset);
  put64(p + 32, size);
  put32(p + 40, link);
  put32(p + 44, info);
  put64(p + 48, align);
  put64(p + 56, entsize);
}

/* The name-only libm for an ELF machine (EM_X86_64 or EM_AARCH64), as a
 * linker reads a shared library: an ELF64 little-endian ET_DYN file whose
 * sections are .dynsym (the null symbol only), .dynstr, .dynamic
 * (DT_SONAME libm.so.6, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT) and
 * .shstrtab. ld.lld takes the soname from .dynamic through .dynsym's string
 * table, so .dynsym must be there even with no symbols. Fills buf (at
 * least NAME_ONLY_LIBM_SIZE bytes); returns the size. */
#define NAME_ONLY_LIBM_SIZE 560
static size_t name_only_libm(unsigned machine, uint8_t *buf) {
  static const char dynstr[] = "\0libm.so.6";                        /* 11 bytes with the final NUL */
  static const char shstr[] = "\0.dynsym\0.dynstr\0.dynamic\0.shstrtab"; /* 36 bytes */
  enum {
    DYNSYM = 64, DYNSTR = DYNSYM + 24, DYNAMIC = 104, N_DYN = 6, SHSTR = DYNAMIC + 16 * N_DYN,
    SHDRS = 240, N_SH = 5, END = SHDRS + 64 * N_SH
  };
  _Static_assert(DYNSTR + sizeof dynstr <= DYNAMIC && SHSTR + sizeof shstr <= SHDRS, "name-only libm layout");
  _Static_assert(END == NAME_ONLY_LIBM_SIZE, "name-only libm size");
  memset(buf, 0, END);
  static const uint8_t ident[8] = {0x7f, 'E', 'L', 'F', 2 /* ELFCLASS64 */, 1 /* LSB */, 1 /* EV_CURRENT */, 0};
  memcpy(buf, ident, sizeof ident);
  put16(buf + 16, 3); /* ET_DYN */
  put16(buf + 18, machine);
  put32(buf + 20, 1);      /* e_version */
  put64(buf + 40, SHDRS);  /* e_shoff (no program headers: e_phoff 0) */
  put16(buf + 52, 64);     /* e_ehsize */
  put16(buf + 54, 56);     /* e_phentsize */
  put16(buf + 58, 64);     /* e_shentsize */
  put16(buf + 60, N_SH);   /* e_shnum */
  put16(buf + 62, N_SH - 1); /* e_shstrndx */
  memcpy(buf + DYNSTR, dynstr, sizeof dynstr);
  static const uint64_t tags[N_DYN][2] = {
      {14 /* DT_SONAME */, 1}, {5 /* DT_STRTAB */, DYNSTR}, {6 /* DT_SYMTAB */, DYNSYM},
      {10 /* DT_STRSZ */, sizeof dynstr}, {11 /* DT_SYMENT */, 24}, {0 /* DT_NULL */, 0}};
  for (int i = 0; i < N_DYN; i++) {
    put64(buf + DYNAMIC + 16 * i, tags[i][0]);
    put64(buf + DYNAMIC + 16 * i + 8, tags[i][1]);
  }
  memcpy(buf + SHSTR, shstr, sizeof shstr);
  /* Section 0 stays null; names are offsets into shstr. */
  put_shdr(buf + SHDRS + 64, 1, 11 /* SHT_DYNSYM */, 2 /* SHF_ALLOC */, DYNSYM, 24, 2, 1, 8, 24);
  put_shdr(buf + SHDRS + 128, 9, 3 /* SHT_STRTAB */, 2, DYNSTR, sizeof dynstr, 0, 0, 1, 0);
  put_shdr(buf + SHDRS + 192, 17, 6 /* SHT_DYNAMIC */, 3 /* SHF_WRITE|SHF_ALLOC */, DYNAMIC, 16 * N_DYN, 2, 0, 8,
           16);
  put_shdr(buf + SHDRS + 256, 26, 3, 0, SHSTR, sizeof shstr, 0, 0, 1, 0);
  return END;
}

/* An ELF relocatable's machine (e_machine at byte 18, little-endian on both
 * targets) when it is a 64-bit little-endian x86_64 or aarch64 one, else 0. */
static unsigned machine_of(const uint8_t *object, size_t size) {
  static const uint8_t magic[4] = {0x7f, 'E', 'L', 'F'};
  if (size < 20 || memcmp(object, magic, 4) != 0 || object[4] != 2 /* ELFCLASS64 */ ||
      object[5] != 1 /* little-endian */)
    return 0;
  unsigned machine = (unsigned)object[18] | (unsigned)object[19] << 8;
  return machine == 62 /* EM_X86_64 */ || machine == 183 /* EM_AARCH64 */ ? machine : 0;
}

/* Whether PROGRAM (no slash) is an executable on $PATH. */
static bool on_path(const char *program) {
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/bin:/bin";
  for (const char *c = path; c;) {
    const char *end = strchr(c, ':');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    char full[4096];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)len, len ? c : ".", program) < (int)sizeof full &&
        access(full, X_OK) == 0)
      return true;
    c = end ? end + 1 : NULL;
  }
  return false;
}

const char *nimble_codegen_default_linker(const uint8_t *object, size_t size) {
  unsigned machine = machine_of(object, size);
  const char *bfd = machine == 62 ? "x86_64-linux-gnu-ld.bfd" : machine == 183 ? "aarch64-linux-gnu-ld.bfd" : NULL;
  return bfd && on_path(bfd) ? bfd : "ld.lld-16";
}

static nimble_status_t run_linker(const char *lld, char *const *argv, const char *log) {
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
  if (n == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "linking kernels: no objects");
  if (n > 1000000) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "linking kernels: %zu objects", n);
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  unsigned machine = machine_of(objects[0], sizes[0]);
  for (size_t i = 0; i < n; i++) {
    if (!machine || machine_of(objects[i], sizes[i]) != machine)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "linking kernels: object %zu is not a 64-bit little-endian x86_64 or "
                                "aarch64 ELF file of the same machine as the others", i);
  }
  if (!lld) lld = nimble_codegen_default_linker(objects[0], sizes[0]);
  char dir[4096], so[4200], log[4200], libm[4200];
  if (snprintf(dir, sizeof dir, "%s/nimble-codegen-XXXXXX", tmp) >= (int)sizeof dir)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "TMPDIR is too long");
  if (!mkdtemp(dir)) return nimble_status_make(NIMBLE_IO_ERROR, "mkdtemp %s: %s", dir, strerror(errno));
  snprintf(so, sizeof so, "%s/kernels.so", dir);
  snprintf(log, sizeof log, "%s/link.log", dir);
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
  uint8_t libm_image[NAME_ONLY_LIBM_SIZE];
  if (!s) s = write_file(libm, libm_image, name_only_libm(machine, libm_image));
  if (!s) s = run_linker(lld, argv, log);
  if (!s) s = read_file(so, (size_t)1 << 31, so_out, so_size);
  for (size_t i = 0; objs && i < n; i++) {
    if (objs[i]) unlink(objs[i]);
    free(objs[i]);
  }
  free(objs);
  free(argv);
  unlink(so);
  unlink(log);
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
