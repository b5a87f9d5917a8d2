/* The device interface: everything the allocator, the loader and the VM
 * need from a device, as one table. The CPU is always present; CUDA
 * (runtime/src/device/cuda/) provides the same table once its driver loads.
 * Nothing outside runtime/src/device/ knows which devices exist: the loader
 * and the VM reach a device only through nimble_device_get and its table
 * (docs/vm.md "Devices" says how a new one plugs in).
 *
 * Memory and copies are every device's. Streams, kernel modules and
 * launches are for devices other than the CPU (the CPU's entries are NULL:
 * its kernels are the executable's shared object, loaded by the loader,
 * and run where they are called). */
#ifndef NIMBLE_RUNTIME_DEVICE_H
#define NIMBLE_RUNTIME_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/status.h"

typedef struct nimble_device_t {
  const char *name; /* "cpu", "cuda": what messages call it */
  DLDeviceType type;
  /* The largest alignment alloc guarantees (a power of two). */
  uint64_t max_alignment;

  /* ---- memory ---- */
  /* Allocates `size` bytes aligned to `alignment` (a power of two, at most
   * max_alignment). */
  nimble_status_t (*alloc)(const struct nimble_device_t *dev, uint64_t size, uint64_t alignment,
                           void **out);
  void (*free)(const struct nimble_device_t *dev, void *ptr);
  /* Copies `size` bytes between this device and the host (or within the
   * device). `stream` is this device's stream to queue on (NULL: wait for
   * the copy). A copy to the host has finished when it returns; a copy to
   * the device may still be queued, after everything queued on `stream`
   * before it, and reads its source when it runs. */
  nimble_status_t (*copy)(const struct nimble_device_t *dev, void *dst, DLDeviceType dst_type,
                          const void *src, DLDeviceType src_type, uint64_t size, void *stream);

  /* ---- streams: queues that run copies and launches in order ---- */
  nimble_status_t (*stream_create)(const struct nimble_device_t *dev, void **out);
  /* Waits for the queued work, then frees the stream; errors then are
   * dropped (nothing is left to report them to). */
  void (*stream_destroy)(const struct nimble_device_t *dev, void *stream);
  /* Waits until everything queued has finished. The error of an earlier
   * asynchronous copy or launch surfaces here and names what failed. */
  nimble_status_t (*stream_sync)(const struct nimble_device_t *dev, void *stream);

  /* ---- kernels ---- */
  /* Loads the executable's kernel part for this device (PTX text or a
   * cubin for CUDA). `image` is borrowed and may be freed once this
   * returns. Errors say what the device refused. */
  nimble_status_t (*module_load)(const struct nimble_device_t *dev, const uint8_t *image, size_t size,
                                 void **out);
  /* The entry point `name` of a module (a handle valid while the module is
   * loaded); NOT_FOUND naming it when the module has none. */
  nimble_status_t (*module_function)(const struct nimble_device_t *dev, void *module, const char *name,
                                     void **out);
  void (*module_unload)(const struct nimble_device_t *dev, void *module);
  /* Launches kernel `fn` (from module_function; `name` for messages) on
   * `args`: host DLTensor structs, borrowed for the call only, whose data
   * are this device's memory, with the kernel ABI of docs/vm.md "Devices".
   * Queued on `stream`; may return before the kernel runs. */
  nimble_status_t (*launch)(const struct nimble_device_t *dev, void *stream, void *fn, const char *name,
                            DLTensor *const *args, int32_t num_args);
} nimble_device_t;

/* The device of a type: the CPU always; CUDA when its driver loads (the
 * driver's error otherwise, cuda_driver.h); a registered device in place
 * of the built-in one; UNIMPLEMENTED for others. */
nimble_status_t nimble_device_get(DLDeviceType type, const nimble_device_t **out);

/* Makes `dev` (borrowed; it must outlive every executable and VM that uses
 * it) the device of dev->type for executables loaded and VMs created from
 * now on, in place of the built-in one. The CPU cannot be replaced, and a
 * device other than the CPU must fill every entry of the table
 * (INVALID_ARGUMENT naming the first that is missing). For tests, and the
 * way in for a device the runtime does not build in. */
nimble_status_t nimble_device_register(const nimble_device_t *dev);
/* Drops the registered device of `type` (the built-in one comes back). */
void nimble_device_unregister(DLDeviceType type);

/* The name of the device of a type: "cpu", a registered device's name,
 * "cuda", or "unknown". Never loads a driver. */
const char *nimble_device_name(DLDeviceType type);

#endif
