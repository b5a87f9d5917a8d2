/* Loading the kernel libraries: the CPU one from memory, another device's
 * (CUDA's PTX) through that device's table (device/device.h).
 *
 * The ELF image goes into an anonymous memfd that dlopen reads through
 * /proc/self/fd/N; the fd is closed right after, so nothing is left in the
 * file system and no descriptor stays open.
 *
 * glibc recognises an already loaded library by the path it was opened
 * with. Once our fd is closed its number can be reused by a later memfd,
 * and dlopen of the same "/proc/self/fd/N" would then hand back the earlier
 * library. So before loading we ask (RTLD_NOLOAD) whether that path is
 * taken and, if so, move to a fresh descriptor number. That probe and the
 * load that follows are one step under `g_dl_mu`, as is every unload: two
 * threads loading executables at once could otherwise interleave a probe
 * with another's load or unload of the same path. (It also gives
 * ThreadSanitizer an order between the loader's own allocations, which it
 * cannot see locked inside ld.so.) Loads are rare; the lock costs nothing
 * on the hot path. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device.h"
#include "format/byte_reader.h"
#include "executable/executable.h"
#include "format/layout.h"
#include "nimble/kernel_abi.h"

#define MAX_FD_TRIES 64

static pthread_mutex_t g_dl_mu = PTHREAD_MUTEX_INITIALIZER;

static nimble_status_t write_all(int fd, const uint8_t *data, size_t size) {
  while (size) {
    ssize_t w = write(fd, data, size);
    if (w < 0) {
      if (errno == EINTR) continue;
      return nimble_status_make(NIMBLE_IO_ERROR, "cpu kernels: writing to a memfd failed: %s",
                                strerror(errno));
    }
    data += w;
    size -= (size_t)w;
  }
  return nimble_ok();
}

static nimble_status_t open_from_fd_locked(int fd, void **handle);

static nimble_status_t open_from_fd(int fd, void **handle) {
  pthread_mutex_lock(&g_dl_mu);
  nimble_status_t s = open_from_fd_locked(fd, handle);
  pthread_mutex_unlock(&g_dl_mu);
  return s;
}

static nimble_status_t open_from_fd_locked(int fd, void **handle) {
  int fds[MAX_FD_TRIES];
  int nfds = 0;
  int cur = fd;
  nimble_status_t s = nimble_ok();
  char path[64];
  for (;;) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", cur);
    void *old = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!old) break;
    dlclose(old);
    /* That name belongs to a library loaded earlier: keep this descriptor
     * open (so the next dup gets another number) and try again. */
    if (nfds == MAX_FD_TRIES) {
      s = nimble_status_make(NIMBLE_INTERNAL, "cpu kernels: no free descriptor name to load from");
      break;
    }
    int next = dup(cur);
    if (next < 0) {
      s = nimble_status_make(NIMBLE_IO_ERROR, "cpu kernels: dup failed: %s", strerror(errno));
      break;
    }
    fds[nfds++] = next;
    cur = next;
  }
  if (!s) {
    dlerror();
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) {
      const char *err = dlerror();
      s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                             "cpu kernels: the shared object does not load: %s",
                             err ? err : "unknown dlopen error");
    }
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  return s;
}

nimble_status_t nimble_kernel_part_parse(const uint8_t *data, size_t size, size_t base,
                                         nimble_part_kind_t kind, const uint8_t **blob_out,
                                         size_t *blob_size_out) {
  const char *what = nimble_part_name(kind);
  DLDeviceType want = kind == NIMBLE_PART_KERNELS_CPU ? kDLCPU : kDLCUDA;
  NIMBLE_RETURN_IF_ERROR(nimble_part_header_check(data, size, base, kind, what, NULL));
  nimble_reader_t r;
  nimble_reader_init(&r, data, size, what);
  r.base = base;
  r.pos = NIMBLE_PART_HEADER_SIZE;
  int32_t dev;
  uint32_t reserved;
  uint64_t blob;
  NIMBLE_RETURN_IF_ERROR(nimble_reader_i32(&r, "device type", &dev));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u32(&r, "reserved", &reserved));
  NIMBLE_RETURN_IF_ERROR(nimble_reader_u64(&r, "blob size", &blob));
  if (dev != (int32_t)want || reserved != 0) {
    r.pos -= 16;
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "device type %d (reserved %u), expected %d",
                               dev, reserved, (int)want);
  }
  if (blob != size - r.pos) {
    r.pos -= 8;
    return nimble_reader_error(&r, blob > size - r.pos - 8 ? NIMBLE_DATA_LOSS : NIMBLE_INVALID_ARGUMENT,
                               "blob size %llu, but %zu bytes follow", (unsigned long long)blob,
                               size - r.pos - 8);
  }
  const uint8_t *b = data + r.pos;
  if (kind == NIMBLE_PART_KERNELS_CPU && (blob < 64 || memcmp(b, "\x7f" "ELF", 4) != 0))
    return nimble_reader_error(&r, NIMBLE_INVALID_ARGUMENT, "the kernel blob is not an ELF shared object");
  *blob_out = b;
  *blob_size_out = (size_t)blob;
  return nimble_ok();
}

/* Whether to call kernels' x86-64-v4 clones (NIMBLE_KERNEL_AVX512_SUFFIX):
 * on a CPU with all of x86-64-v4's AVX-512, unless NIMBLE_AVX512=0 (which
 * the own sgemm's kernels follow too). */
static int avx512_clones(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  const char *v = getenv("NIMBLE_AVX512");
  if (v && strcmp(v, "0") == 0) return 0;
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v4");
#else
  return 0;
#endif
}

nimble_status_t nimble_kernel_library_load_cpu(const uint8_t *data, size_t size, size_t base,
                                               nimble_kernel_library_t *lib,
                                               nimble_bytecode_t *code) {
  const uint8_t *elf;
  size_t blob;
  NIMBLE_RETURN_IF_ERROR(
      nimble_kernel_part_parse(data, size, base, NIMBLE_PART_KERNELS_CPU, &elf, &blob));
  int fd = memfd_create("nimble-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(NIMBLE_IO_ERROR, "cpu kernels: memfd_create failed: %s", strerror(errno));
  nimble_status_t s = write_all(fd, elf, (size_t)blob);
  if (!s) s = open_from_fd(fd, &lib->handle);
  close(fd);
  NIMBLE_RETURN_IF_ERROR(s);

  int wide = avx512_clones();
  char name[512];
  for (uint32_t i = 0; i < code->num_kernels; i++) {
    nimble_kernel_ref_t *k = &code->kernels[i];
    if (k->device != kDLCPU) continue;
    dlerror();
    void *sym = NULL;
    if (wide && snprintf(name, sizeof name, "%s" NIMBLE_KERNEL_AVX512_SUFFIX, k->symbol) < (int)sizeof name)
      sym = dlsym(lib->handle, name);
    if (!sym) sym = dlsym(lib->handle, k->symbol);
    if (!sym)
      return nimble_status_make(NIMBLE_NOT_FOUND,
                                "kernel '%s' (kernel %u) is not exported by the cpu kernel library",
                                k->symbol, i);
    /* POSIX guarantees function pointers survive a round trip through
     * void *; memcpy says so without a cast warning. */
    memcpy(&k->fn, &sym, sizeof sym);
  }
  return nimble_ok();
}

void nimble_kernel_library_unload(nimble_kernel_library_t *lib) {
  if (lib->handle) {
    pthread_mutex_lock(&g_dl_mu);
    dlclose(lib->handle);
    pthread_mutex_unlock(&g_dl_mu);
  }
  lib->handle = NULL;
}

nimble_status_t nimble_kernel_library_load_device(const uint8_t *data, size_t size, size_t base,
                                                  nimble_part_kind_t kind, DLDeviceType type,
                                                  nimble_device_kernels_t *out, nimble_bytecode_t *code) {
  const uint8_t *image;
  size_t image_size;
  NIMBLE_RETURN_IF_ERROR(nimble_kernel_part_parse(data, size, base, kind, &image, &image_size));
  /* The device is needed from here on; a CPU executable never gets here. */
  const nimble_device_t *dev;
  nimble_status_t s = nimble_device_get(type, &dev);
  if (s) {
    nimble_status_t t = nimble_status_make(nimble_status_code(s), "%s: this executable has %s kernels",
                                           nimble_status_message(s), nimble_device_name(type));
    nimble_status_free(s);
    return t;
  }
  void *module = NULL;
  NIMBLE_RETURN_IF_ERROR(dev->module_load(dev, image, image_size, &module));
  for (uint32_t i = 0; i < code->num_kernels; i++) {
    nimble_kernel_ref_t *k = &code->kernels[i];
    if (k->device != type) continue;
    s = dev->module_function(dev, module, k->symbol, &k->device_fn);
    if (s) {
      dev->module_unload(dev, module);
      return nimble_status_annotate(s, "kernel '%s' (kernel %u)", k->symbol, i);
    }
  }
  out->dev = dev;
  out->module = module;
  return nimble_ok();
}

void nimble_device_kernels_unload(nimble_device_kernels_t *k) {
  if (k->dev) k->dev->module_unload(k->dev, k->module);
  k->dev = NULL;
  k->module = NULL;
}
