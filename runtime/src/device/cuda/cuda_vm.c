/* The VM's side of the CUDA device: its pool and stream, created when the
 * VM is made for an executable with CUDA kernels (or at the first CUDA
 * allocation of one without); the host objects that queued copies read
 * from, kept alive until the stream has been waited for; and the device
 * copies of constants, uploaded once per VM (weights would otherwise cross
 * the bus on every invoke). */
#include <stdlib.h>

#include "device/cuda/cuda_device.h"
#include "vm/vm.h"

/* Past this many kept sources a copy waits for the stream first, so a long
 * loop of uploads does not hold host memory until the end of the invoke. */
#define MAX_KEPT 64u

nimble_status_t nimble_vm_cuda_init(nimble_vm *vm, const char *why) {
  if (vm->cuda_pool) return nimble_ok();
  const nimble_device_t *dev;
  nimble_status_t s = nimble_device_get(kDLCUDA, &dev);
  if (s) {
    nimble_status_t t = nimble_status_make(nimble_status_code(s), "%s: %s",
                                           nimble_status_message(s), why);
    nimble_status_free(s);
    return t;
  }
  nimble_cuda_stream *stream = NULL;
  nimble_pool *pool = NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_cuda_stream_create(&stream));
  s = nimble_pool_create(dev, vm->opts.memory_cap_bytes, &pool);
  if (s) {
    nimble_cuda_stream_destroy(stream);
    return s;
  }
  vm->cuda_stream = stream;
  vm->cuda_pool = pool;
  return nimble_ok();
}

static void release_kept(nimble_vm *vm) {
  for (uint32_t i = 0; i < vm->cuda_kept_count; i++) nimble_object_release(vm->cuda_kept[i]);
  vm->cuda_kept_count = 0;
}

nimble_status_t nimble_vm_cuda_sync(nimble_vm *vm) {
  if (!vm->cuda_stream) return nimble_ok();
  nimble_status_t s = nimble_cuda_stream_sync(vm->cuda_stream);
  /* Even after a failure: nothing queued reads them any more, since a
   * failed stream runs nothing further. */
  release_kept(vm);
  return s;
}

void nimble_vm_cuda_host_waited(nimble_vm *vm) { release_kept(vm); }

nimble_status_t nimble_vm_cuda_keep(nimble_vm *vm, nimble_object *o) {
  if (vm->cuda_kept_count == MAX_KEPT) NIMBLE_RETURN_IF_ERROR(nimble_vm_cuda_sync(vm));
  if (!vm->cuda_kept) {
    vm->cuda_kept = malloc(MAX_KEPT * sizeof *vm->cuda_kept);
    if (!vm->cuda_kept) {
      /* Cannot keep it: wait for the copy instead. */
      return nimble_vm_cuda_sync(vm);
    }
  }
  nimble_object_retain(o);
  vm->cuda_kept[vm->cuda_kept_count++] = o;
  return nimble_ok();
}

nimble_storage_obj *nimble_vm_cuda_constant(const nimble_vm *vm, const void *host, uint64_t nbytes) {
  for (uint32_t i = 0; i < vm->cuda_num_consts; i++)
    if (vm->cuda_consts[i].host == host && vm->cuda_consts[i].nbytes == nbytes)
      return vm->cuda_consts[i].storage;
  return NULL;
}

void nimble_vm_cuda_remember_constant(nimble_vm *vm, const void *host, uint64_t nbytes,
                                      nimble_storage_obj *storage) {
  if (vm->cuda_num_consts == vm->cuda_consts_cap) {
    uint32_t cap = vm->cuda_consts_cap ? vm->cuda_consts_cap * 2 : 16;
    struct nimble_vm_cuda_const *c = realloc(vm->cuda_consts, cap * sizeof *c);
    if (!c) return;
    vm->cuda_consts = c;
    vm->cuda_consts_cap = cap;
  }
  nimble_object_retain(&storage->base);
  vm->cuda_consts[vm->cuda_num_consts].host = host;
  vm->cuda_consts[vm->cuda_num_consts].nbytes = nbytes;
  vm->cuda_consts[vm->cuda_num_consts].storage = storage;
  vm->cuda_num_consts++;
}

_Bool nimble_vm_cuda_is_constant_copy(const nimble_vm *vm, const nimble_object *owner) {
  for (uint32_t i = 0; i < vm->cuda_num_consts; i++)
    if (owner == &vm->cuda_consts[i].storage->base) return 1;
  return 0;
}

void nimble_vm_cuda_deinit(nimble_vm *vm) {
  if (vm->cuda_stream) nimble_cuda_stream_destroy(vm->cuda_stream); /* waits first */
  release_kept(vm);
  for (uint32_t i = 0; i < vm->cuda_num_consts; i++)
    nimble_object_release(&vm->cuda_consts[i].storage->base);
  free(vm->cuda_consts);
  vm->cuda_consts = NULL;
  vm->cuda_num_consts = vm->cuda_consts_cap = 0;
  free(vm->cuda_kept);
  vm->cuda_kept = NULL;
  vm->cuda_stream = NULL;
  if (vm->cuda_pool) nimble_pool_release(vm->cuda_pool);
  vm->cuda_pool = NULL;
}
