/* The CUDA device table: memory, PTX modules, streams and kernel launches
 * (see cuda_device.h). Device addresses travel through the runtime as void *
 * (CUdeviceptr is 64 bits on the 64-bit hosts this builds for). */
#include "device/cuda/cuda_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_driver.h"

#define LAUNCH_BLOCK 256u
#define LAUNCH_MAX_GRID 65535u
/* The driver's allocations are aligned to at least this. */
#define CUDA_ALIGNMENT 256u
#define STAGING_MIN 16384u
#define STAGING_ALIGN 64u
/* Full staging buffers still read by queued uploads, freed at the next
 * wait; past this many the launch waits instead. */
#define MAX_RETIRED 8

static nimble_cu_deviceptr dptr(const void *p) { return (nimble_cu_deviceptr)(uintptr_t)p; }

/* The driver, with its context current on this thread. */
static nimble_status_t driver(const nimble_cuda_driver_t **out) {
  NIMBLE_RETURN_IF_ERROR(nimble_cuda_driver_get(out));
  return nimble_cuda_make_current(*out);
}

/* ---- the device table ---- */

static nimble_status_t cuda_alloc(const nimble_device_t *dev, uint64_t size, uint64_t alignment,
                                  void **out) {
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(driver(&d));
  if (alignment > CUDA_ALIGNMENT)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "cuda: alignment %llu is more than the device guarantees (%u)",
                              (unsigned long long)alignment, CUDA_ALIGNMENT);
  if (size > SIZE_MAX)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cuda: cannot allocate %llu bytes",
                              (unsigned long long)size);
  nimble_cu_deviceptr p = 0;
  nimble_cu_result rc = d->cuMemAlloc(&p, size ? (size_t)size : 1);
  if (rc != 0) return nimble_cuda_error(d, rc, "allocating %llu bytes", (unsigned long long)size);
  *out = (void *)(uintptr_t)p;
  return nimble_ok();
}

static void cuda_free(const nimble_device_t *dev, void *ptr) {
  const nimble_cuda_driver_t *d;
  nimble_status_t s = driver(&d);
  if (s) {
    /* Only reachable if the context cannot be made current on this
     * thread: the block is lost, nothing else can be done here. */
    nimble_status_free(s);
    return;
  }
  d->cuMemFree(dptr(ptr));
}

/* A VM's stream and its launch staging memory. */
typedef struct nimble_cuda_stream {
  const nimble_cuda_driver_t *d;
  nimble_cu_stream stream;
  /* Launch staging: each launch takes the next bytes of both buffers (host
   * and device, same offsets), and the bytes are reused only after the
   * stream has been waited for, so an upload never reads a host buffer that
   * was written again, whatever the driver does with pageable memory. */
  uint8_t *host;
  nimble_cu_deviceptr device;
  size_t cap, used;
  /* Buffers replaced by larger ones while uploads from them were queued. */
  struct {
    uint8_t *host;
    nimble_cu_deviceptr device;
  } retired[MAX_RETIRED];
  int num_retired;
  char last_kernel[128]; /* for errors that surface at a wait */
} nimble_cuda_stream;

/* Waits until everything queued has finished. An error of an earlier
 * asynchronous launch surfaces here and names the last kernel launched. */
static nimble_status_t stream_sync(nimble_cuda_stream *s);

static nimble_status_t cuda_copy(const nimble_device_t *dev, void *dst, DLDeviceType dst_type,
                                 const void *src, DLDeviceType src_type, uint64_t size,
                                 void *stream) {
  if ((dst_type != kDLCPU && dst_type != kDLCUDA) || (src_type != kDLCPU && src_type != kDLCUDA))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "cuda: cannot copy from %s to %s",
                              nimble_device_name(src_type), nimble_device_name(dst_type));
  if (size == 0) return nimble_ok();
  if (dst_type == kDLCPU && src_type == kDLCPU) {
    memmove(dst, src, (size_t)size);
    return nimble_ok();
  }
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(driver(&d));
  nimble_cuda_stream *s = stream;
  nimble_cu_stream cs = s ? s->stream : NULL;
  nimble_cu_result rc;
  if (src_type == kDLCPU)
    rc = d->cuMemcpyHtoDAsync(dptr(dst), src, (size_t)size, cs);
  else if (dst_type == kDLCPU)
    rc = d->cuMemcpyDtoHAsync(dst, dptr(src), (size_t)size, cs);
  else
    rc = d->cuMemcpyDtoDAsync(dptr(dst), dptr(src), (size_t)size, cs);
  if (rc != 0)
    return nimble_cuda_error(d, rc, "copying %llu bytes from %s to %s", (unsigned long long)size,
                             nimble_device_name(src_type), nimble_device_name(dst_type));
  /* The host reads what it copied back: wait for it (and for a copy that
   * was asked to be synchronous). */
  if (dst_type == kDLCPU || !s) {
    if (s) return stream_sync(s);
    rc = d->cuStreamSynchronize(NULL);
    if (rc != 0)
      return nimble_cuda_error(d, rc, "waiting for a copy of %llu bytes from %s to %s",
                               (unsigned long long)size, nimble_device_name(src_type),
                               nimble_device_name(dst_type));
  }
  return nimble_ok();
}

/* ---- modules ---- */

typedef struct nimble_cuda_module {
  nimble_cu_module module;
} nimble_cuda_module;

static nimble_status_t cuda_module_load(const nimble_device_t *dev, const uint8_t *image, size_t size,
                                        void **out) {
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(driver(&d));
  int is_elf = size >= 4 && memcmp(image, "\x7f" "ELF", 4) == 0;
  /* PTX goes to the driver as a NUL-terminated string. */
  uint8_t *copy = NULL;
  if (!is_elf) {
    const uint8_t *nul = memchr(image, 0, size);
    if (nul)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "cuda kernels: the PTX text has a NUL byte at offset %zu",
                                (size_t)(nul - image));
    copy = malloc(size + 1);
    if (!copy) return NIMBLE_OOM_IN("cuda kernels");
    memcpy(copy, image, size);
    copy[size] = 0;
  }
  char log[2048];
  log[0] = '\0';
  nimble_cu_jit_option opts[2] = {NIMBLE_CU_JIT_ERROR_LOG_BUFFER,
                                  NIMBLE_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(uintptr_t)sizeof log};
  nimble_cu_module m = NULL;
  nimble_cu_result rc = d->cuModuleLoadDataEx(&m, copy ? (const void *)copy : (const void *)image,
                                              2, opts, values);
  free(copy);
  if (rc != 0) {
    log[sizeof log - 1] = '\0';
    nimble_status_t s = nimble_cuda_error(d, rc, "loading the %s module", is_elf ? "cubin" : "PTX");
    return log[0] ? nimble_status_annotate(s, "cuda kernels (JIT log: %s)", log) : s;
  }
  nimble_cuda_module *cm = malloc(sizeof *cm);
  if (!cm) {
    d->cuModuleUnload(m);
    return NIMBLE_OOM_IN("cuda kernels");
  }
  cm->module = m;
  *out = cm;
  return nimble_ok();
}

static nimble_status_t cuda_module_function(const nimble_device_t *dev, void *module, const char *name,
                                            void **out) {
  nimble_cuda_module *m = module;
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(driver(&d));
  nimble_cu_function fn = NULL;
  nimble_cu_result rc = d->cuModuleGetFunction(&fn, m->module, name);
  if (rc == 500 /* CUDA_ERROR_NOT_FOUND */)
    return nimble_status_make(NIMBLE_NOT_FOUND, "the cuda kernel module has no entry '%s'", name);
  if (rc != 0) return nimble_cuda_error(d, rc, "looking up kernel '%s'", name);
  *out = fn;
  return nimble_ok();
}

static void cuda_module_unload(const nimble_device_t *dev, void *module) {
  nimble_cuda_module *m = module;
  if (!m) return;
  const nimble_cuda_driver_t *d;
  nimble_status_t s = driver(&d);
  if (!s)
    d->cuModuleUnload(m->module);
  else
    nimble_status_free(s);
  free(m);
}

/* ---- streams and launches ---- */

static nimble_status_t cuda_stream_create(const nimble_device_t *dev, void **out) {
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(driver(&d));
  nimble_cuda_stream *s = calloc(1, sizeof *s);
  if (!s) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "cuda: out of memory creating a stream");
  s->d = d;
  nimble_cu_result rc = d->cuStreamCreate(&s->stream, NIMBLE_CU_STREAM_NON_BLOCKING);
  if (rc != 0) {
    free(s);
    return nimble_cuda_error(d, rc, "creating a stream");
  }
  *out = s;
  return nimble_ok();
}

static nimble_status_t stream_sync(nimble_cuda_stream *s) {
  NIMBLE_RETURN_IF_ERROR(nimble_cuda_make_current(s->d));
  nimble_cu_result rc = s->d->cuStreamSynchronize(s->stream);
  if (rc != 0) {
    if (s->last_kernel[0])
      return nimble_cuda_error(s->d, rc, "waiting for the stream (the last kernel launched was '%s')",
                               s->last_kernel);
    return nimble_cuda_error(s->d, rc, "waiting for the stream");
  }
  s->used = 0;
  for (int i = 0; i < s->num_retired; i++) {
    free(s->retired[i].host);
    s->d->cuMemFree(s->retired[i].device);
  }
  s->num_retired = 0;
  return nimble_ok();
}

static nimble_status_t cuda_stream_sync(const nimble_device_t *dev, void *stream) {
  return stream_sync(stream);
}

static void cuda_stream_destroy(const nimble_device_t *dev, void *stream) {
  nimble_cuda_stream *s = stream;
  if (!s) return;
  nimble_status_free(stream_sync(s));
  if (!nimble_cuda_make_current(s->d)) {
    if (s->device) s->d->cuMemFree(s->device);
    for (int i = 0; i < s->num_retired; i++) s->d->cuMemFree(s->retired[i].device);
    s->d->cuStreamDestroy(s->stream);
  }
  for (int i = 0; i < s->num_retired; i++) free(s->retired[i].host);
  free(s->host);
  free(s);
}

void nimble_cuda_launch_dims(uint64_t elements, uint32_t *grid, uint32_t *block) {
  uint64_t blocks = elements / LAUNCH_BLOCK + (elements % LAUNCH_BLOCK != 0);
  if (blocks > LAUNCH_MAX_GRID) blocks = LAUNCH_MAX_GRID;
  if (blocks == 0) blocks = 1;
  *grid = (uint32_t)blocks;
  *block = LAUNCH_BLOCK;
}

/* Makes room for `bytes` of staging. When the buffers are full they are
 * replaced by ones twice as large (the old ones retired until the next
 * wait), so the host does not wait for the device in the middle of an
 * invoke; after the first invoke the buffers hold a whole one. */
static nimble_status_t reserve_staging(nimble_cuda_stream *s, size_t bytes, const char *name) {
  if (s->cap - s->used >= bytes) return nimble_ok();
  if (s->used && s->num_retired == MAX_RETIRED)
    NIMBLE_RETURN_IF_ERROR(stream_sync(s)); /* used = 0, retired freed */
  if (s->used == 0 && s->cap >= bytes) return nimble_ok();
  size_t cap = s->cap ? s->cap * 2 : STAGING_MIN;
  while (cap < bytes) cap *= 2;
  uint8_t *host = malloc(cap);
  nimble_cu_deviceptr device = 0;
  nimble_cu_result rc = host ? s->d->cuMemAlloc(&device, cap) : 0;
  if (!host || rc != 0) {
    free(host);
    if (!host)
      return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                                "kernel '%s' (cuda): out of memory staging its arguments", name);
    return nimble_status_annotate(
        nimble_cuda_error(s->d, rc, "allocating %zu bytes of argument staging", cap),
        "kernel '%s'", name);
  }
  if (s->cap && s->used) {
    s->retired[s->num_retired].host = s->host;
    s->retired[s->num_retired].device = s->device;
    s->num_retired++;
  } else if (s->cap) {
    free(s->host);
    s->d->cuMemFree(s->device);
  }
  s->host = host;
  s->device = device;
  s->cap = cap;
  s->used = 0;
  return nimble_ok();
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* The argument array, the DLTensor structs and their shapes are staged
 * into device memory in one upload; 256 threads a block, and as many
 * blocks as nimble_cuda_launch_dims gives for the last argument. */
static nimble_status_t cuda_launch(const nimble_device_t *dev, void *stream, void *fn, const char *name,
                                   DLTensor *const *args, int32_t num_args) {
  nimble_cuda_stream *s = stream;
  if (num_args <= 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s' (cuda): no arguments", name);
  NIMBLE_RETURN_IF_ERROR(nimble_cuda_make_current(s->d));
  /* Layout: the argument array (device addresses of the DLTensors), the
   * DLTensors, then their shapes. */
  size_t n = (size_t)num_args;
  size_t tensors_at = align_up(n * sizeof(uint64_t), 16);
  size_t shapes_at = tensors_at + n * sizeof(DLTensor);
  size_t total = shapes_at;
  for (size_t i = 0; i < n; i++) total += (size_t)args[i]->ndim * sizeof(int64_t);
  total = align_up(total, STAGING_ALIGN);
  NIMBLE_RETURN_IF_ERROR(reserve_staging(s, total, name));
  uint8_t *h = s->host + s->used;
  nimble_cu_deviceptr base = s->device + s->used;
  size_t shape_at = shapes_at;
  for (size_t i = 0; i < n; i++) {
    const DLTensor *a = args[i];
    DLTensor t = *a;
    /* The kernels see the first element at data; byte_offset is folded in. */
    t.data = a->data ? (char *)a->data + a->byte_offset : NULL;
    t.byte_offset = 0;
    t.strides = NULL;
    t.shape = (int64_t *)(uintptr_t)(base + shape_at);
    if (a->ndim) memcpy(h + shape_at, a->shape, (size_t)a->ndim * sizeof(int64_t));
    shape_at += (size_t)a->ndim * sizeof(int64_t);
    memcpy(h + tensors_at + i * sizeof(DLTensor), &t, sizeof t);
    uint64_t at = base + tensors_at + i * sizeof(DLTensor);
    memcpy(h + i * sizeof(uint64_t), &at, sizeof at);
  }
  s->used += total;
  nimble_cu_result rc = s->d->cuMemcpyHtoDAsync(base, h, total, s->stream);
  if (rc != 0)
    return nimble_status_annotate(nimble_cuda_error(s->d, rc, "uploading %zu bytes of arguments", total),
                                  "kernel '%s'", name);
  const DLTensor *out = args[n - 1];
  uint64_t elements = 1;
  for (int32_t k = 0; k < out->ndim; k++) elements *= (uint64_t)out->shape[k];
  uint32_t grid, block;
  nimble_cuda_launch_dims(elements, &grid, &block);
  nimble_cu_deviceptr args_ptr = base;
  int32_t count = num_args;
  void *params[2] = {&args_ptr, &count};
  rc = s->d->cuLaunchKernel((nimble_cu_function)fn, grid, 1, 1, block, 1, 1, 0, s->stream, params,
                            NULL);
  if (rc != 0)
    return nimble_cuda_error(s->d, rc, "launching kernel '%s' (%u blocks of %u threads)", name, grid,
                             block);
  snprintf(s->last_kernel, sizeof s->last_kernel, "%s", name);
  return nimble_ok();
}

static const nimble_device_t kCuda = {
    .name = "cuda",
    .type = kDLCUDA,
    .max_alignment = CUDA_ALIGNMENT,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .module_load = cuda_module_load,
    .module_function = cuda_module_function,
    .module_unload = cuda_module_unload,
    .launch = cuda_launch,
};

nimble_status_t nimble_cuda_device_get(const nimble_device_t **out) {
  const nimble_cuda_driver_t *d;
  NIMBLE_RETURN_IF_ERROR(nimble_cuda_driver_get(&d));
  *out = &kCuda;
  return nimble_ok();
}
