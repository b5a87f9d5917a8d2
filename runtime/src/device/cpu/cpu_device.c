/* The host CPU device: aligned heap memory and memcpy. Its kernels are the
 * executable's shared object (executable/kernel_library.c), called
 * directly, so it has no streams, modules or launches. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/device_registry.h"

/* Blocks of 2 MiB and more start on a 2 MiB boundary and ask for
 * transparent huge pages (where the kernel gives them only on request,
 * THP "madvise", as on this project's machines): the pool's large blocks
 * (activations of a batch) are first touched by the first invoke, one
 * page fault per 4 KB otherwise. mobilenet_v2 at batch 8: first invoke
 * 385-416 -> 95-98 ms; docs/vm.md "Memory". A kernel without THP ignores
 * the advice. */
#define CPU_HUGE_PAGE ((uint64_t)2 << 20)

static nimble_status_t cpu_alloc(const nimble_device_t *dev, uint64_t size, uint64_t alignment,
                                 void **out) {
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (size >= CPU_HUGE_PAGE && alignment < CPU_HUGE_PAGE) alignment = CPU_HUGE_PAGE;
  if (size > SIZE_MAX - alignment)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cpu: cannot allocate %llu bytes",
                              (unsigned long long)size);
  void *p = NULL;
  if (posix_memalign(&p, (size_t)alignment, size ? (size_t)size : 1) != 0)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cpu: out of memory allocating %llu bytes",
                              (unsigned long long)size);
#ifdef MADV_HUGEPAGE
  if (size >= CPU_HUGE_PAGE) (void)madvise(p, (size_t)(size / CPU_HUGE_PAGE * CPU_HUGE_PAGE), MADV_HUGEPAGE);
#endif
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
