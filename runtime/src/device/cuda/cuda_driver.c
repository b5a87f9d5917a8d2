/* Loading the CUDA driver at run time (see cuda_driver.h).
 *
 * Everything happens once per process under pthread_once: dlopen, symbol
 * lookup, cuInit, device 0 and its primary context. The primary context is
 * the one the CUDA runtime would use too, so an application that also uses
 * CUDA shares the device's memory and modules with us instead of paying for
 * a second context. It is retained for the life of the process. */
#include "device/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_int g_tried;
static nimble_cuda_driver_t g_driver;
static nimble_status_code_t g_error_code;
static char g_error[512]; /* empty when the driver is ready */

static void set_error(nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_error, sizeof g_error, fmt, ap);
  va_end(ap);
  g_error_code = code;
}

/* Describes a driver error as "NAME (string)" into buf. */
static void describe(const nimble_cuda_driver_t *d, nimble_cu_result rc, char *buf, size_t size) {
  const char *name = NULL, *str = NULL;
  if (d->cuGetErrorName && d->cuGetErrorName(rc, &name) != 0) name = NULL;
  if (d->cuGetErrorString && d->cuGetErrorString(rc, &str) != 0) str = NULL;
  if (name)
    snprintf(buf, size, "%s (%s)", name, str ? str : "no description");
  else
    snprintf(buf, size, "CUDA error %d (%s)", rc, str ? str : "no description");
}

static void load_driver(void) {
  const char *lib = getenv("NIMBLE_CUDA_DRIVER");
  if (!lib || !lib[0]) lib = "libcuda.so.1";
  nimble_cuda_driver_t *d = &g_driver;
  dlerror();
  d->handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!d->handle) {
    const char *err = dlerror();
    set_error(NIMBLE_FAILED_PRECONDITION, "cuda: cannot load %s (%s)", lib,
              err ? err : "unknown dlopen error");
    return;
  }
  struct {
    const char *name;
    void *slot;
  } syms[] = {
      {"cuInit", &d->cuInit},
      {"cuDeviceGet", &d->cuDeviceGet},
      {"cuDevicePrimaryCtxRetain", &d->cuDevicePrimaryCtxRetain},
      {"cuCtxSetCurrent", &d->cuCtxSetCurrent},
      {"cuModuleLoadDataEx", &d->cuModuleLoadDataEx},
      {"cuModuleGetFunction", &d->cuModuleGetFunction},
      {"cuModuleUnload", &d->cuModuleUnload},
      {"cuLaunchKernel", &d->cuLaunchKernel},
      {"cuMemAlloc_v2", &d->cuMemAlloc},
      {"cuMemFree_v2", &d->cuMemFree},
      {"cuMemcpyHtoDAsync_v2", &d->cuMemcpyHtoDAsync},
      {"cuMemcpyDtoHAsync_v2", &d->cuMemcpyDtoHAsync},
      {"cuMemcpyDtoDAsync_v2", &d->cuMemcpyDtoDAsync},
      {"cuStreamCreate", &d->cuStreamCreate},
      {"cuStreamSynchronize", &d->cuStreamSynchronize},
      {"cuStreamDestroy_v2", &d->cuStreamDestroy},
      {"cuGetErrorString", &d->cuGetErrorString},
      {"cuGetErrorName", &d->cuGetErrorName},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *sym = dlsym(d->handle, syms[i].name);
    if (!sym) {
      set_error(NIMBLE_FAILED_PRECONDITION, "cuda: %s has no %s (not a CUDA driver, or too old)",
                lib, syms[i].name);
      dlclose(d->handle);
      memset(d, 0, sizeof *d);
      return;
    }
    /* POSIX: function pointers survive a round trip through void *. */
    memcpy(syms[i].slot, &sym, sizeof sym);
  }
  char why[256];
  nimble_cu_result rc = d->cuInit(0);
  if (rc != 0) {
    describe(d, rc, why, sizeof why);
    set_error(NIMBLE_FAILED_PRECONDITION, "cuda: cuInit failed: %s", why);
    return;
  }
  rc = d->cuDeviceGet(&d->device, 0);
  if (rc != 0) {
    describe(d, rc, why, sizeof why);
    set_error(NIMBLE_FAILED_PRECONDITION, "cuda: cuDeviceGet(0) failed: %s", why);
    return;
  }
  rc = d->cuDevicePrimaryCtxRetain(&d->context, d->device);
  if (rc != 0) {
    describe(d, rc, why, sizeof why);
    set_error(NIMBLE_FAILED_PRECONDITION, "cuda: retaining device 0's primary context failed: %s",
              why);
    return;
  }
  g_error[0] = '\0';
}

nimble_status_t nimble_cuda_driver_get(const nimble_cuda_driver_t **out) {
  atomic_store(&g_tried, 1);
  pthread_once(&g_once, load_driver);
  if (g_error[0]) return nimble_status_make(g_error_code, "%s", g_error);
  *out = &g_driver;
  return nimble_ok();
}

_Bool nimble_cuda_driver_tried(void) { return atomic_load(&g_tried) != 0; }

nimble_status_t nimble_cuda_make_current(const nimble_cuda_driver_t *d) {
  /* Set every time rather than remembered per thread: the application may
   * make another context current on the same thread between our calls. */
  nimble_cu_result rc = d->cuCtxSetCurrent(d->context);
  if (rc != 0) return nimble_cuda_error(d, rc, "making the context current");
  return nimble_ok();
}

nimble_status_t nimble_cuda_error(const nimble_cuda_driver_t *d, nimble_cu_result rc,
                                  const char *what_fmt, ...) {
  char what[384], why[256];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);
  describe(d, rc, why, sizeof why);
  /* Out of memory is a resource the caller may free up; anything else is
   * the device or the program. */
  nimble_status_code_t code = rc == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? NIMBLE_RESOURCE_EXHAUSTED
                                                                    : NIMBLE_INTERNAL;
  return nimble_status_make(code, "cuda: %s failed: %s", what, why);
}
