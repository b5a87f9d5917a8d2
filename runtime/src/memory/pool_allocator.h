/* A pooling allocator for one device.
 *
 * Blocks come in power-of-two size classes (64 bytes and up); a freed block
 * goes back to its class and serves the next request of that class or one
 * up to four times smaller, so a VM running the same model on changing
 * shapes reaches a steady state instead of growing. When a request would
 * pass the cap, cached blocks are returned to the device first; if it still
 * does not fit, the request fails with RESOURCE_EXHAUSTED naming its size
 * and the cap.
 *
 * Thread-safe: outputs handed to the application are freed on any thread.
 * Reference counted: every storage holds a reference, so the pool outlives
 * the VM while outputs are alive.
 *
 * Owned: the thread running an invoke owns its VM's pool for the call
 * (nimble_pool_own), and its allocations, frees and references go through
 * a small cache of its own without the lock or an atomic per operation:
 * once a process has a second thread (the VM's workers), glibc's mutexes
 * and every reference count are atomic instructions, which took 17 % of
 * a small model's run at 2 threads (loop_if). Other threads (kernels'
 * workspaces on the workers, the application freeing outputs) take the
 * lock as before. */
#ifndef NIMBLE_RUNTIME_POOL_ALLOCATOR_H
#define NIMBLE_RUNTIME_POOL_ALLOCATOR_H

#include <stdint.h>

#include "device/device.h"
#include "nimble/runtime.h"

typedef struct nimble_pool nimble_pool;

/* Creates a pool over `dev` (static) with `cap` bytes (0: none). Caller
 * releases *out. */
nimble_status_t nimble_pool_create(const nimble_device_t *dev, uint64_t cap, nimble_pool **out);
void nimble_pool_retain(nimble_pool *p);
void nimble_pool_release(nimble_pool *p);

/* Allocates at least `size` bytes aligned to `alignment` (power of two, at
 * most the device's max_alignment: 4096 on the CPU, 256 on CUDA). *block_size is what to pass back to nimble_pool_free. */
nimble_status_t nimble_pool_alloc(nimble_pool *p, uint64_t size, uint64_t alignment, void **out,
                                  uint64_t *block_size);
void nimble_pool_free(nimble_pool *p, void *ptr, uint64_t block_size);

/* own = 1: the calling thread owns the pool until it calls this with 0 on
 * the same thread; owners follow one another (a VM is invoked by one
 * thread at a time) and the caller holds a reference throughout. Giving
 * it up adds the cache's counts to the stats. */
void nimble_pool_own(nimble_pool *p, int own);

/* Counts up to the last time an owner gave the pool up. */
void nimble_pool_stats(nimble_pool *p, nimble_memory_stats_t *out);
/* Returns every cached block to the device. */
void nimble_pool_trim(nimble_pool *p);
const nimble_device_t *nimble_pool_device(const nimble_pool *p);

#endif
