/* The CUDA device: device 0 through the driver API (cuda_driver.h), as the
 * device table of device/device.h (nimble_cuda_device_get, declared for
 * the registry in device/device_registry.h): its memory, PTX modules,
 * non-blocking streams on which copies and launches are queued, and
 * launches with the kernel ABI of docs/vm.md "Devices". Nothing else of
 * the runtime includes this header; it is here for the device's tests.
 *
 * Ordering: everything a VM does on the device goes to its one stream, so
 * device memory returned to the VM's pool and handed out again is only
 * touched after the work queued before. The host waits for the stream where
 * it reads device results (a copy to the host returns when the data is
 * there) and at the end of each invoke (vm/vm_device.c). */
#ifndef NIMBLE_RUNTIME_CUDA_DEVICE_H
#define NIMBLE_RUNTIME_CUDA_DEVICE_H

#include <stdint.h>

#include "device/device_registry.h"

/* The block and grid size of a launch for an output of `elements`
 * elements: 256 threads a block, min(ceil(n / 256), 65535) blocks, at
 * least 1 (exposed for tests). */
void nimble_cuda_launch_dims(uint64_t elements, uint32_t *grid, uint32_t *block);

#endif
