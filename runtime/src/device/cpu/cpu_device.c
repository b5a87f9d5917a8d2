/* The host CPU device: aligned heap memory and memcpy. Its kernels are the
 * executable's shared object (executable/kernel_library.c), called
 * directly, so it has no streams, modules or launches. */
#include <stdlib.h>
#include <string.h>

#include "device/device_registry.h"

static nimble_status_t cpu_alloc(const nimble_device_t *dev, uint64_t size, uint64_t alignment,
                                 void **out) {
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (size > SIZE_MAX - alignment)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cpu: cannot allocate %llu bytes",
                              (unsigned long long)size);
  void *p = NULL;
  if (posix_memalign(&p, (size_t)alignment, size ? (size_t)size : 1) != 0)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cpu: out of memory allocating %llu bytes",
                              (unsigned long long)size);
  *out = p;
  return nimble_ok();
}

static void cpu_free(const nimble_device_t *dev, void *ptr) { free(ptr); }

static nimble_status_t cpu_copy(const nimble_device_t *dev, void *dst, DLDeviceType dst_type,
                                const void *src, DLDeviceType src_type, uint64_t size,
                                void *stream) {
  if (dst_type != kDLCPU || src_type != kDLCPU)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "cpu: cannot copy from %s to %s",
                              nimble_device_name(src_type), nimble_device_name(dst_type));
  if (size) memmove(dst, src, (size_t)size);
  return nimble_ok();
}

static const nimble_device_t kCpu = {
    .name = "cpu",
    .type = kDLCPU,
    .max_alignment = 4096,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
};

const nimble_device_t *nimble_cpu_device(void) { return &kCpu; }
