/* The part of the CUDA driver API the runtime uses, declared here from
 * NVIDIA's documented ABI so that the runtime builds without CUDA headers
 * (and for aarch64 with nothing but the cross toolchain), and loaded at run
 * time with dlopen: a process without libcuda.so.1 runs CPU executables as
 * before and refuses CUDA executables with a message that says why.
 *
 * Only 64-bit hosts: CUdeviceptr is then 64 bits wide, as is a device
 * address inside a DLTensor the kernels read. */
#ifndef NIMBLE_RUNTIME_CUDA_DRIVER_H
#define NIMBLE_RUNTIME_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/status.h"

_Static_assert(sizeof(void *) == 8, "the CUDA device needs a 64-bit host");

typedef int nimble_cu_result;         /* CUresult; 0 is CUDA_SUCCESS */
typedef int nimble_cu_device;         /* CUdevice */
typedef struct nimble_cu_ctx_st *nimble_cu_context;
typedef struct nimble_cu_mod_st *nimble_cu_module;
typedef struct nimble_cu_func_st *nimble_cu_function;
typedef struct nimble_cu_stream_st *nimble_cu_stream;
typedef unsigned long long nimble_cu_deviceptr; /* CUdeviceptr (the _v2 ABI) */
typedef int nimble_cu_jit_option;     /* CUjit_option */

/* CUjit_option values used when loading PTX. */
#define NIMBLE_CU_JIT_ERROR_LOG_BUFFER 5
#define NIMBLE_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
/* CU_STREAM_NON_BLOCKING: no implicit ordering with the legacy stream. */
#define NIMBLE_CU_STREAM_NON_BLOCKING 1u

typedef struct nimble_cuda_driver_t {
  void *handle; /* dlopen handle, kept for the life of the process */
  nimble_cu_device device;   /* ordinal 0 */
  nimble_cu_context context; /* its primary context, retained */

  nimble_cu_result (*cuInit)(unsigned int flags);
  nimble_cu_result (*cuDeviceGet)(nimble_cu_device *device, int ordinal);
  nimble_cu_result (*cuDevicePrimaryCtxRetain)(nimble_cu_context *ctx, nimble_cu_device dev);
  nimble_cu_result (*cuCtxSetCurrent)(nimble_cu_context ctx);
  nimble_cu_result (*cuModuleLoadDataEx)(nimble_cu_module *module, const void *image,
                                         unsigned int num_options, nimble_cu_jit_option *options,
                                         void **option_values);
  nimble_cu_result (*cuModuleGetFunction)(nimble_cu_function *fn, nimble_cu_module module,
                                          const char *name);
  nimble_cu_result (*cuModuleUnload)(nimble_cu_module module);
  nimble_cu_result (*cuLaunchKernel)(nimble_cu_function fn, unsigned int grid_x, unsigned int grid_y,
                                     unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                     unsigned int block_z, unsigned int shared_bytes,
                                     nimble_cu_stream stream, void **params, void **extra);
  nimble_cu_result (*cuMemAlloc)(nimble_cu_deviceptr *ptr, size_t bytes);   /* cuMemAlloc_v2 */
  nimble_cu_result (*cuMemFree)(nimble_cu_deviceptr ptr);                   /* cuMemFree_v2 */
  nimble_cu_result (*cuMemcpyHtoDAsync)(nimble_cu_deviceptr dst, const void *src, size_t bytes,
                                        nimble_cu_stream stream);          /* _v2 */
  nimble_cu_result (*cuMemcpyDtoHAsync)(void *dst, nimble_cu_deviceptr src, size_t bytes,
                                        nimble_cu_stream stream);          /* _v2 */
  nimble_cu_result (*cuMemcpyDtoDAsync)(nimble_cu_deviceptr dst, nimble_cu_deviceptr src,
                                        size_t bytes, nimble_cu_stream stream); /* _v2 */
  nimble_cu_result (*cuStreamCreate)(nimble_cu_stream *stream, unsigned int flags);
  nimble_cu_result (*cuStreamSynchronize)(nimble_cu_stream stream);
  nimble_cu_result (*cuStreamDestroy)(nimble_cu_stream stream);             /* _v2 */
  nimble_cu_result (*cuGetErrorString)(nimble_cu_result error, const char **str);
  nimble_cu_result (*cuGetErrorName)(nimble_cu_result error, const char **str);
} nimble_cuda_driver_t;

/* The process's driver: loaded, initialised and device 0's primary context
 * retained on the first call (once per process; a failure is remembered and
 * reported to every caller). The library is NIMBLE_CUDA_DRIVER when set and
 * non-empty, else libcuda.so.1. Errors read `cuda: cannot load libcuda.so.1
 * (<dlerror>)`, `cuda: libcuda.so.1 has no cuInit`, or `cuda: cuInit failed:
 * CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)`. */
nimble_status_t nimble_cuda_driver_get(const nimble_cuda_driver_t **out);

/* Whether anything in this process has asked for the driver yet (a CPU
 * executable never does). */
_Bool nimble_cuda_driver_tried(void);

/* Makes device 0's primary context current on the calling thread (the
 * one the CUDA runtime API uses too; it stays current afterwards). */
nimble_status_t nimble_cuda_make_current(const nimble_cuda_driver_t *d);

/* A status for a failed driver call: `cuda: <what> failed: NAME (string)`. */
nimble_status_t nimble_cuda_error(const nimble_cuda_driver_t *d, nimble_cu_result rc,
                                  const char *what_fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
