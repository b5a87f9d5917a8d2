/* The VM's private state, shared by the interpreter, the C API and the
 * kernel environment. */
#ifndef NIMBLE_RUNTIME_VM_H
#define NIMBLE_RUNTIME_VM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "executable/executable.h"
#include "memory/pool_allocator.h"
#include "nimble/kernel_abi.h"
#include "nimble/runtime.h"
#include "vm/object.h"
#include "vm/thread_pool.h"

typedef struct nimble_frame_t {
  uint32_t func;
  uint32_t pc;
  size_t base;      /* first register of this frame in vm->regs */
  uint32_t ret_dst; /* caller's register that receives the result */
} nimble_frame_t;

struct nimble_vm {
  nimble_executable *exe; /* retained */
  nimble_vm_options_t opts;
  nimble_pool *cpu_pool;  /* retained */
  /* CUDA (device/cuda/cuda_vm.c): NULL until the VM needs the device. */
  nimble_pool *cuda_pool;
  struct nimble_cuda_stream *cuda_stream;
  nimble_object **cuda_kept; /* sources of queued uploads, retained */
  uint32_t cuda_kept_count;
  /* Constants uploaded once per VM: host data, size, device storage. */
  struct nimble_vm_cuda_const {
    const void *host;
    uint64_t nbytes;
    nimble_storage_obj *storage; /* retained */
  } *cuda_consts;
  uint32_t cuda_num_consts, cuda_consts_cap;
  nimble_thread_pool *threads;
  nimble_kernel_env_t env;

  /* A kernel's message (env->set_error); tasks of a parallel loop may set
   * it concurrently. */
  pthread_mutex_t error_mu;
  char kernel_error[512];
  int has_kernel_error;

  /* Register stack: frames are windows into one array. */
  nimble_object **regs;
  size_t regs_cap, sp;
  nimble_frame_t *frames;
  uint32_t frames_cap, depth;
  DLTensor **packed_args; /* max_kernel_args slots */

  /* Inputs set for `input_entry` (-1: none yet): tensors, or ADT values
   * for ADT inputs. */
  int64_t input_entry;
  nimble_object **inputs;
  uint32_t inputs_cap;

  /* Per-kernel timing (nimble_vm_kernel_times): one slot per kernel of
   * the bytecode while on, NULL while off (the interpreter tests only this
   * pointer, so timing costs nothing when off). */
  struct nimble_vm_kernel_time {
    uint64_t calls, ns;
  } *ktimes;

  /* Outputs of the last invoke; taken ones are NULL. */
  nimble_tensor_obj **outputs;
  uint32_t num_outputs, outputs_cap;
};

/* Fills vm->env for this VM. */
void nimble_kernel_env_init(nimble_vm *vm);

/* The VM's CUDA pool and stream (device/cuda/cuda_vm.c). _init creates
 * them once; a driver that does not load fails with its message followed
 * by ": <why>". _sync waits for the stream and drops the kept sources;
 * _keep holds `o` (retained) until then, for a copy queued from its
 * memory; _host_waited says the stream was just waited for; _deinit waits
 * and frees. All are no-ops for a VM without CUDA. */
nimble_status_t nimble_vm_cuda_init(nimble_vm *vm, const char *why);
nimble_status_t nimble_vm_cuda_sync(nimble_vm *vm);
nimble_status_t nimble_vm_cuda_keep(nimble_vm *vm, nimble_object *o);
void nimble_vm_cuda_host_waited(nimble_vm *vm);
void nimble_vm_cuda_deinit(nimble_vm *vm);

/* The device copy of constant data `host` (`nbytes`) this VM uploaded
 * before, or NULL (borrowed). _remember records a new one (retained; a
 * failure to record only costs a later upload). _is_constant_copy: whether
 * `owner` is such a copy (kernels may not write into it). */
nimble_storage_obj *nimble_vm_cuda_constant(const nimble_vm *vm, const void *host, uint64_t nbytes);
void nimble_vm_cuda_remember_constant(nimble_vm *vm, const void *host, uint64_t nbytes,
                                      nimble_storage_obj *storage);
_Bool nimble_vm_cuda_is_constant_copy(const nimble_vm *vm, const nimble_object *owner);

/* Runs function `func` on `args` (borrowed; the callee gets its own
 * references) and stores the result in *result (caller releases). Errors
 * name the function, the pc and the instruction. */
nimble_status_t nimble_vm_run(nimble_vm *vm, uint32_t func, nimble_object *const *args,
                              uint32_t num_args, nimble_object **result);

#endif
