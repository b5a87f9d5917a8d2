/* The VM's side of the devices other than the CPU (vm.h): for each one it
 * uses, a pool over the device's memory and one stream on which its
 * copies and launches are queued in program order; the host objects that
 * queued uploads read from, kept alive until the stream has been waited
 * for; and the device copies of constants, uploaded once per VM. Everything
 * device-specific goes through the device's table (device/device.h). */
#include <stdlib.h>

#include "vm/vm.h"

/* Past this many kept sources a copy waits for the stream first, so a long
 * loop of uploads does not hold host memory until the end of the invoke. */
#define MAX_KEPT 64u

nimble_vm_device *nimble_vm_device_find(const nimble_vm *vm, DLDeviceType type) {
  for (uint32_t i = 0; i < vm->num_devices; i++)
    if (vm->devices[i].dev->type == type) return (nimble_vm_device *)&vm->devices[i];
  return NULL;
}

nimble_status_t nimble_vm_device_open(nimble_vm *vm, DLDeviceType type, const char *why,
                                      nimble_vm_device **out) {
  nimble_vm_device *d = nimble_vm_device_find(vm, type);
  if (d) {
    *out = d;
    return nimble_ok();
  }
  const nimble_device_t *dev;
  nimble_status_t s = nimble_device_get(type, &dev);
  if (s) {
    nimble_status_t t = nimble_status_make(nimble_status_code(s), "%s: %s",
                                           nimble_status_message(s), why);
    nimble_status_free(s);
    return t;
  }
  if (vm->num_devices == NIMBLE_VM_MAX_DEVICES)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: a VM uses at most %d devices besides the cpu",
                              dev->name, NIMBLE_VM_MAX_DEVICES);
  void *stream = NULL;
  nimble_pool *pool = NULL;
  NIMBLE_RETURN_IF_ERROR(dev->stream_create(dev, &stream));
  s = nimble_pool_create(dev, vm->opts.memory_cap_bytes, &pool);
  if (s) {
    dev->stream_destroy(dev, stream);
    return s;
  }
  d = &vm->devices[vm->num_devices++];
  *d = (nimble_vm_device){.dev = dev, .pool = pool, .stream = stream};
  *out = d;
  return nimble_ok();
}

static void release_kept(nimble_vm_device *d) {
  for (uint32_t i = 0; i < d->kept_count; i++) nimble_object_release(d->kept[i]);
  d->kept_count = 0;
}

nimble_status_t nimble_vm_device_sync(nimble_vm_device *d) {
  nimble_status_t s = d->dev->stream_sync(d->dev, d->stream);
  /* Even after a failure: nothing queued reads them any more, since a
   * failed stream runs nothing further. */
  release_kept(d);
  return s;
}

nimble_status_t nimble_vm_device_sync_all(nimble_vm *vm) {
  nimble_status_t first = nimble_ok();
  for (uint32_t i = 0; i < vm->num_devices; i++) {
    nimble_status_t s = nimble_vm_device_sync(&vm->devices[i]);
    if (!first) first = s;
    else nimble_status_free(s);
  }
  return first;
}

void nimble_vm_device_host_waited(nimble_vm_device *d) { release_kept(d); }

nimble_status_t nimble_vm_device_keep(nimble_vm_device *d, nimble_object *o) {
  if (d->kept_count == MAX_KEPT) NIMBLE_RETURN_IF_ERROR(nimble_vm_device_sync(d));
  if (!d->kept) {
    d->kept = malloc(MAX_KEPT * sizeof *d->kept);
    if (!d->kept) {
      /* Cannot keep it: wait for the copy instead. */
      return nimble_vm_device_sync(d);
    }
  }
  nimble_object_retain(o);
  d->kept[d->kept_count++] = o;
  return nimble_ok();
}

nimble_storage_obj *nimble_vm_device_constant(const nimble_vm_device *d, const void *host,
                                              uint64_t nbytes) {
  for (uint32_t i = 0; i < d->num_consts; i++)
    if (d->consts[i].host == host && d->consts[i].nbytes == nbytes) return d->consts[i].storage;
  return NULL;
}

void nimble_vm_device_remember_constant(nimble_vm_device *d, const void *host, uint64_t nbytes,
                                        nimble_storage_obj *storage) {
  if (d->num_consts == d->consts_cap) {
    uint32_t cap = d->consts_cap ? d->consts_cap * 2 : 16;
    struct nimble_vm_device_const *c = realloc(d->consts, cap * sizeof *c);
    if (!c) return;
    d->consts = c;
    d->consts_cap = cap;
  }
  nimble_object_retain(&storage->base);
  d->consts[d->num_consts].host = host;
  d->consts[d->num_consts].nbytes = nbytes;
  d->consts[d->num_consts].storage = storage;
  d->num_consts++;
}

_Bool nimble_vm_device_is_constant_copy(const nimble_vm *vm, const nimble_object *owner) {
  for (uint32_t k = 0; k < vm->num_devices; k++) {
    const nimble_vm_device *d = &vm->devices[k];
    for (uint32_t i = 0; i < d->num_consts; i++)
      if (owner == &d->consts[i].storage->base) return 1;
  }
  return 0;
}

void nimble_vm_device_deinit_all(nimble_vm *vm) {
  for (uint32_t k = 0; k < vm->num_devices; k++) {
    nimble_vm_device *d = &vm->devices[k];
    d->dev->stream_destroy(d->dev, d->stream); /* waits first */
    release_kept(d);
    for (uint32_t i = 0; i < d->num_consts; i++) nimble_object_release(&d->consts[i].storage->base);
    free(d->consts);
    free(d->kept);
    nimble_pool_release(d->pool);
    *d = (nimble_vm_device){0};
  }
  vm->num_devices = 0;
}
