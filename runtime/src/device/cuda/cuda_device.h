/* The CUDA device: device 0 through the driver API (cuda_driver.h), as the
 * device table the pools use, plus what the loader and the VM need beyond
 * it: PTX modules, and a per-VM stream on which copies and launches are
 * queued.
 *
 * Ordering: everything a VM does on the device goes to its one stream, so
 * device memory returned to the VM's pool and handed out again is only
 * touched after the work queued before. The host waits for the stream where
 * it reads device results (a copy to the host returns when the data is
 * there) and at the end of each invoke (the VM's side, cuda_vm.c). */
#ifndef NIMBLE_RUNTIME_CUDA_DEVICE_H
#define NIMBLE_RUNTIME_CUDA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "device/device.h"

/* The device table for kDLCUDA (device 0). Loads the driver on first use;
 * its errors are the driver's (cuda_driver.h). */
nimble_status_t nimble_cuda_device_get(const nimble_device_t **out);

/* A loaded kernel module: PTX text (JIT-compiled by the driver for the
 * device) or a cubin/fatbin (ELF). `image` is borrowed. Errors: a NUL byte
 * inside PTX text, the driver's refusal with its JIT error log. */
typedef struct nimble_cuda_module nimble_cuda_module;
nimble_status_t nimble_cuda_module_load(const uint8_t *image, size_t size,
                                        nimble_cuda_module **out);
/* The entry point `name` of the module (borrowed handle, valid while the
 * module is loaded); NOT_FOUND naming it when the module has none. */
nimble_status_t nimble_cuda_module_function(nimble_cuda_module *m, const char *name, void **out);
void nimble_cuda_module_unload(nimble_cuda_module *m);

/* A VM's stream and its launch staging memory. */
typedef struct nimble_cuda_stream nimble_cuda_stream;
nimble_status_t nimble_cuda_stream_create(nimble_cuda_stream **out);
/* Waits for the queued work first; errors then are dropped (nothing is
 * left to report them to). */
void nimble_cuda_stream_destroy(nimble_cuda_stream *s);
/* Waits until everything queued has finished. An error of an earlier
 * asynchronous launch surfaces here and names the last kernel launched. */
nimble_status_t nimble_cuda_stream_sync(nimble_cuda_stream *s);

/* Launches kernel `fn` (from nimble_cuda_module_function; `name` for
 * messages) on `args` (host DLTensors whose data are device pointers) with
 * the kernel ABI of docs/vm.md "Devices": the argument array, the DLTensor
 * structs and their shapes are staged into device memory in one upload;
 * 256 threads a block, min(ceil(n / 256), 65535) blocks (at least 1) with
 * n the element count of the last argument. Queued on `s`; returns before
 * the kernel runs. */
nimble_status_t nimble_cuda_launch(nimble_cuda_stream *s, void *fn, const char *name,
                                   DLTensor *const *args, int32_t num_args);

/* The block and grid size the launch rule gives for an output of
 * `elements` elements (exposed for tests). */
void nimble_cuda_launch_dims(uint64_t elements, uint32_t *grid, uint32_t *block);

#endif
