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
 * the VM while outputs are alive. */
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

void nimble_pool_stats(nimble_pool *p, nimble_memory_stats_t *out);
/* Returns every cached block to the device. */
void nimble_pool_trim(nimble_pool *p);
const nimble_device_t *nimble_pool_device(const nimble_pool *p);

#endif
