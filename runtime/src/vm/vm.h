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

  /* Inputs set for `input_entry` (-1: none yet). */
  int64_t input_entry;
  nimble_tensor_obj **inputs;
  uint32_t inputs_cap;

  /* Outputs of the last invoke; taken ones are NULL. */
  nimble_tensor_obj **outputs;
  uint32_t num_outputs, outputs_cap;
};

/* Fills vm->env for this VM. */
void nimble_kernel_env_init(nimble_vm *vm);

/* Runs function `func` on `args` (borrowed; the callee gets its own
 * references) and stores the result in *result (caller releases). Errors
 * name the function, the pc and the instruction. */
nimble_status_t nimble_vm_run(nimble_vm *vm, uint32_t func, nimble_object *const *args,
                              uint32_t num_args, nimble_object **result);

#endif
