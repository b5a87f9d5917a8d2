/* The device abstraction: what the allocator and the VM need from a device.
 * The CPU is always present; a CUDA device (issue 6) joins by providing the
 * same table from runtime/src/device/cuda/. */
#ifndef NIMBLE_RUNTIME_DEVICE_H
#define NIMBLE_RUNTIME_DEVICE_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/status.h"

typedef struct nimble_device_t {
  const char *name; /* "cpu", "cuda" */
  DLDeviceType type;
  /* Allocates `size` bytes aligned to `alignment` (a power of two). */
  nimble_status_t (*alloc)(const struct nimble_device_t *dev, uint64_t size, uint64_t alignment,
                           void **out);
  void (*free)(const struct nimble_device_t *dev, void *ptr);
  /* Copies between this device and the host (or within the device). */
  nimble_status_t (*copy)(const struct nimble_device_t *dev, void *dst, DLDeviceType dst_type,
                          const void *src, DLDeviceType src_type, uint64_t size);
} nimble_device_t;

/* The device of a type; UNIMPLEMENTED naming it when this build has none. */
nimble_status_t nimble_device_get(DLDeviceType type, const nimble_device_t **out);

/* "cpu", "cuda", or "device N". Static or thread-unsafe buffer never: only
 * the known names, else "unknown". */
const char *nimble_device_name(DLDeviceType type);

#endif
