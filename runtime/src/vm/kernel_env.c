/* The kernel environment a VM hands to every kernel it calls: parallel_for
 * over the VM's thread pool, workspace from the VM's CPU pool (so it counts
 * against the cap), an error message slot, and the sgemm of a BLAS found at
 * run time (vm/blas_loader.h) or the runtime's own, over the VM's threads
 * (vm/sgemm_threads.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/blas_loader.h"
#include "vm/conv_winograd.h"
#include "vm/sgemm_threads.h"
#include "vm/vm.h"

static int32_t env_parallel_for(const nimble_kernel_env_t *env, int64_t n_tasks,
                                nimble_parallel_body_fn body, void *closure) {
  nimble_vm *vm = env->runtime_ctx;
  return nimble_thread_pool_run(vm->threads, n_tasks, body, closure);
}

/* A workspace block keeps its pool block size and start just before the
 * pointer handed out, so free needs nothing else. */
typedef struct ws_header {
  void *block;
  uint64_t block_size;
} ws_header;

static void *env_workspace_alloc(const nimble_kernel_env_t *env, size_t bytes, size_t alignment) {
  nimble_vm *vm = env->runtime_ctx;
  if (alignment < 16) alignment = 16;
  if (alignment > 4096 || (alignment & (alignment - 1)) || bytes > SIZE_MAX / 2) return NULL;
  /* The header needs its own aligned slot in front of the user's bytes. */
  size_t front = alignment < sizeof(ws_header) ? sizeof(ws_header) : alignment;
  void *block;
  uint64_t block_size;
  nimble_status_t s = nimble_pool_alloc(vm->cpu_pool, (uint64_t)bytes + front, alignment, &block,
                                        &block_size);
  if (s) {
    nimble_status_free(s);
    return NULL;
  }
  char *user = (char *)block + front;
  ws_header h = {block, block_size};
  memcpy(user - sizeof h, &h, sizeof h);
  return user;
}

static void env_workspace_free(const nimble_kernel_env_t *env, void *ptr) {
  nimble_vm *vm = env->runtime_ctx;
  if (!ptr) return;
  ws_header h;
  memcpy(&h, (char *)ptr - sizeof h, sizeof h);
  nimble_pool_free(vm->cpu_pool, h.block, h.block_size);
}

static void env_set_error(const nimble_kernel_env_t *env, const char *message) {
  nimble_vm *vm = env->runtime_ctx;
  pthread_mutex_lock(&vm->error_mu);
  /* Only on a kernel's failure path, so the copy costs nothing per call;
   * the message is kept whole, however long. */
  free(vm->kernel_error);
  vm->kernel_error = strdup(message ? message : "");
  vm->has_kernel_error = 1;
  pthread_mutex_unlock(&vm->error_mu);
}

static int winograd_enabled(void) {
  const char *v = getenv("NIMBLE_WINOGRAD");
  return !(v && strcmp(v, "0") == 0);
}

void nimble_kernel_env_init(nimble_vm *vm) {
  memset(&vm->env, 0, sizeof vm->env);
  vm->env.struct_size = sizeof vm->env;
  vm->env.abi_version = NIMBLE_KERNEL_ABI_VERSION;
  vm->env.parallel_for = env_parallel_for;
  vm->env.workspace_alloc = env_workspace_alloc;
  vm->env.workspace_free = env_workspace_free;
  vm->env.set_error = env_set_error;
  /* Artifacts never link a BLAS: the runtime offers the one it loaded, or
   * NULL, and kernels then use their own loops. */
  vm->env.sgemm = nimble_blas_sgemm() ? nimble_sgemm_threads : NULL;
  vm->env.sgemm_epilogue = vm->env.sgemm ? nimble_sgemm_threads_epilogue : NULL;
  vm->env.runtime_ctx = vm;
  vm->env.num_threads = 1; /* the pool's size once it exists */
  /* Winograd's 3x3 convolutions run on the own sgemm: offered wherever
   * sgemm is, unless NIMBLE_WINOGRAD=0 (kernels then take their im2col
   * products; docs/vm.md). */
  vm->env.conv3x3 = vm->env.sgemm && winograd_enabled() ? nimble_conv3x3_winograd : NULL;
}
