/* The built-in devices, for the registry (device.c) only. */
#ifndef NIMBLE_RUNTIME_DEVICE_REGISTRY_H
#define NIMBLE_RUNTIME_DEVICE_REGISTRY_H

#include "device/device.h"

/* The host CPU (cpu/cpu_device.c). */
const nimble_device_t *nimble_cpu_device(void);

/* The device table for kDLCUDA, device 0 (cuda/cuda_device.c). Loads the
 * driver on first use; its errors are the driver's (cuda/cuda_driver.h). */
nimble_status_t nimble_cuda_device_get(const nimble_device_t **out);

#endif
