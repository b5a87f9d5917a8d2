/* The device abstraction: what the allocator and the VM need from a device.
 * The CPU is always present; the CUDA device (runtime/src/device/cuda/)
 * provides the same table once its driver loads. */
#ifndef NIMBLE_RUNTIME_DEVICE_H
#define NIMBLE_RUNTIME_DEVICE_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/status.h"

typedef struct nimble_device_t {
  const char *name; /* "cpu", "cuda" */
  DLDeviceType type;
  /* The largest alignment alloc guarantees (a power of two). */
  uint64_t max_alignment;
  /* Allocates `size` bytes aligned to `alignment` (a power of two, at most
   * max_alignment). */
  nimble_status_t (*alloc)(const struct nimble_device_t *dev, uint64_t size, uint64_t alignment,
                           void **out);
  void (*free)(const struct nimble_device_t *dev, void *ptr);
  /* Copies `size` bytes between this device and the host (or within the
   * device). `stream` is the device's stream to queue on (a
   * nimble_cuda_stream for CUDA; NULL: wait for the copy). A copy to the
   * host has finished when it returns; a copy to the device may still be
   * queued, after everything queued on `stream` before it. */
  nimble_status_t (*copy)(const struct nimble_device_t *dev, void *dst, DLDeviceType dst_type,
                          const void *src, DLDeviceType src_type, uint64_t size, void *stream);
} nimble_device_t;

/* The device of a type: the CPU always; CUDA when its driver loads (the
 * driver's error otherwise, cuda_driver.h); UNIMPLEMENTED for others. */
nimble_status_t nimble_device_get(DLDeviceType type, const nimble_device_t **out);

/* "cpu", "cuda", or "unknown". */
const char *nimble_device_name(DLDeviceType type);

#endif
