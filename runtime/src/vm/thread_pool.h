/* The thread pool behind the kernel ABI's parallel_for. The calling thread
 * takes part in every loop; a loop started from inside a task runs inline,
 * so nested parallelism cannot deadlock. */
#ifndef NIMBLE_RUNTIME_THREAD_POOL_H
#define NIMBLE_RUNTIME_THREAD_POOL_H

#include <stdint.h>

#include "nimble/kernel_abi.h"
#include "nimble/status.h"

typedef struct nimble_thread_pool nimble_thread_pool;

/* A pool of `num_threads` threads counting the caller (num_threads - 1
 * workers). Caller destroys *out. */
nimble_status_t nimble_thread_pool_create(uint32_t num_threads, nimble_thread_pool **out);
void nimble_thread_pool_destroy(nimble_thread_pool *p);

/* Runs body(i, n_tasks, closure) for i in [0, n_tasks) and waits. Returns 0
 * or the first nonzero code a task returned. One loop at a time per pool. */
int32_t nimble_thread_pool_run(nimble_thread_pool *p, int64_t n_tasks, nimble_parallel_body_fn body,
                               void *closure);

/* Threads in the pool, counting the caller's. */
uint32_t nimble_thread_pool_size(const nimble_thread_pool *p);

/* Whether the calling thread is running a task of some pool's loop (a loop
 * it starts then runs inline). */
int nimble_thread_pool_in_task(void);

#endif
