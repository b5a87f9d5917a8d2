/* The registry of devices: the built-in ones (the CPU always, CUDA when its
 * driver loads) and those registered in their place. This is the one file
 * that knows which devices the runtime has. */
#include <pthread.h>
#include <stddef.h>

#include "device/device_registry.h"

/* Registered devices: few (a test's, a plug-in's), looked up when an
 * executable is loaded or a VM needs a device, never per instruction. */
#define MAX_REGISTERED 8

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const nimble_device_t *g_registered[MAX_REGISTERED];

static const nimble_device_t *registered(DLDeviceType type) {
  const nimble_device_t *dev = NULL;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_REGISTERED && !dev; i++)
    if (g_registered[i] && g_registered[i]->type == type) dev = g_registered[i];
  pthread_mutex_unlock(&g_mu);
  return dev;
}

nimble_status_t nimble_device_get(DLDeviceType type, const nimble_device_t **out) {
  if (type == kDLCPU) {
    *out = nimble_cpu_device();
    return nimble_ok();
  }
  const nimble_device_t *dev = registered(type);
  if (dev) {
    *out = dev;
    return nimble_ok();
  }
  if (type == kDLCUDA) return nimble_cuda_device_get(out);
  return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                            "device %s is not available in this runtime (only cpu and cuda)",
                            nimble_device_name(type));
}

/* The first entry a device other than the CPU lacks, or NULL. */
static const char *missing_entry(const nimble_device_t *dev) {
  if (!dev->name) return "name";
  if (!dev->max_alignment || (dev->max_alignment & (dev->max_alignment - 1)))
    return "max_alignment (a power of two)";
  if (!dev->alloc) return "alloc";
  if (!dev->free) return "free";
  if (!dev->copy) return "copy";
  if (!dev->stream_create) return "stream_create";
  if (!dev->stream_destroy) return "stream_destroy";
  if (!dev->stream_sync) return "stream_sync";
  if (!dev->module_load) return "module_load";
  if (!dev->module_function) return "module_function";
  if (!dev->module_unload) return "module_unload";
  if (!dev->launch) return "launch";
  return NULL;
}

nimble_status_t nimble_device_register(const nimble_device_t *dev) {
  if (!dev) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "device_register: NULL device");
  if (dev->type == kDLCPU)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "device_register: the cpu cannot be replaced");
  const char *missing = missing_entry(dev);
  if (missing)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "device_register: device '%s' has no %s",
                              dev->name ? dev->name : "(unnamed)", missing);
  nimble_status_t s = nimble_ok();
  pthread_mutex_lock(&g_mu);
  int slot = -1;
  for (int i = 0; i < MAX_REGISTERED; i++) {
    if (g_registered[i] && g_registered[i]->type == dev->type) {
      slot = i; /* the newer registration replaces the older */
      break;
    }
    if (!g_registered[i] && slot < 0) slot = i;
  }
  if (slot < 0)
    s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "device_register: %d devices are registered already",
                           MAX_REGISTERED);
  else
    g_registered[slot] = dev;
  pthread_mutex_unlock(&g_mu);
  return s;
}

void nimble_device_unregister(DLDeviceType type) {
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAX_REGISTERED; i++)
    if (g_registered[i] && g_registered[i]->type == type) g_registered[i] = NULL;
  pthread_mutex_unlock(&g_mu);
}

const char *nimble_device_name(DLDeviceType type) {
  if (type == kDLCPU) return "cpu";
  const nimble_device_t *dev = registered(type);
  if (dev) return dev->name;
  return type == kDLCUDA ? "cuda" : "unknown";
}
