/* The VM's private state, shared by the interpreter, the C API and the
 * kernel environment. */
#ifndef NIMBLE_RUNTIME_VM_H
#define NIMBLE_RUNTIME_VM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
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

/* A device other than the CPU as one VM uses it (vm_device.c): its pool
 * and stream, the host objects that queued uploads read from (kept alive
 * until the stream has been waited for), and the device copies of
 * constants, uploaded once per VM (weights would otherwise cross the bus
 * on every invoke). */
typedef struct nimble_vm_device {
  const nimble_device_t *dev;
  nimble_pool *pool; /* retained */
  void *stream;      /* dev->stream_create's */
  nimble_object **kept; /* sources of queued uploads, retained */
  uint32_t kept_count;
  struct nimble_vm_device_const {
    const void *host;
    uint64_t nbytes;
    nimble_storage_obj *storage; /* retained */
  } *consts;
  uint32_t num_consts, consts_cap;
} nimble_vm_device;

/* Devices besides the CPU one VM can use at once. */
#define NIMBLE_VM_MAX_DEVICES 4

struct nimble_vm {
  nimble_executable *exe; /* retained */
  nimble_vm_options_t opts;
  nimble_pool *cpu_pool;  /* retained */
  /* Opened when the VM is made for an executable with kernels of the
   * device, or at the first allocation on it of one without. */
  nimble_vm_device devices[NIMBLE_VM_MAX_DEVICES];
  uint32_t num_devices;
  nimble_thread_pool *threads;
  nimble_kernel_env_t env;

  /* A kernel's message (env->set_error); tasks of a parallel loop may set
   * it concurrently. */
  pthread_mutex_t error_mu;
  char *kernel_error; /* owned; NULL when none, or when it could not be copied */
  int has_kernel_error;

  /* Register stack: frames are windows into one array. */
  nimble_object **regs;
  size_t regs_cap, sp;
  nimble_frame_t *frames;
  uint32_t frames_cap, depth;
  DLTensor **packed_args; /* max_kernel_args slots */
  /* LoadConst's tensors: per constant, this VM's own view of it (owner:
   * the constants' backing storage), made on first load. The executable's
   * are shared by every VM over it and counted atomically; a loop loading
   * its weights every step paid two atomic instructions a load. A view
   * handed out as an output becomes shared, and stays correct. NULL until
   * the first load; num_constants entries. */
  nimble_tensor_obj **const_views;

  /* Inputs set for `input_entry` (-1: none yet): tensors, or ADT values
   * for ADT inputs. */
  int64_t input_entry;
  nimble_object **inputs;
  uint32_t inputs_cap;

  /* Per-kernel timing (nimble_vm_kernel_times): one slot per kernel of
   * the bytecode while on, NULL while off (the interpreter tests only this
   * pointer, so timing costs nothing when off). */
  struct nimble_vm_kernel_time {
    uint64_t calls, ns, out_elements;
  } *ktimes;

  /* Threads by measurement (docs/vm.md, "Threads by measurement";
   * vm_adapt.c): whether an invoke's kernels run their parallel loops on
   * the pool, on the calling thread alone, or each as it ran faster. NULL
   * kpar (one thread, options.fixed_threads, NIMBLE_ADAPTIVE_THREADS=0, or
   * shapes that kept changing): always the pool. */
  struct nimble_vm_kpar { /* per kernel, up to 4 sizes (first output's elements, by powers of two) */
    int8_t log2[4];        /* -1: slot unused */
    uint32_t best[4][2];   /* fastest call while probing, ns: [0] on the pool, [1] alone */
  } *kpar;
  struct nimble_vm_adapt {
    uint64_t sig;          /* the entry and input shapes measured */
    uint32_t invokes;      /* invokes with them so far */
    uint32_t restarts;     /* probes restarted by new shapes */
    int mode;              /* this invoke's (NIMBLE_KPAR_POOL, _ALONE, _MIXED) */
    int chosen;            /* the mode once measured; -1 while probing */
    uint64_t best[3];      /* fastest invoke of each mode, ns */
    uint64_t settled_ns;   /* no probe before (the pool's threads are still being placed) */
  } adapt;

  /* Outputs of the last invoke; taken ones are NULL. */
  nimble_tensor_obj **outputs;
  uint32_t num_outputs, outputs_cap;
};

enum { NIMBLE_KPAR_POOL, NIMBLE_KPAR_ALONE, NIMBLE_KPAR_MIXED };

/* A tensor's elements (a kernel's first output's: what kernel timing and
 * the threads' probe key a kernel's sizes by). */
static inline uint64_t nimble_dl_elements(const DLTensor *t) {
  uint64_t e = 1;
  for (int32_t i = 0; i < t->ndim; i++) e *= (uint64_t)t->shape[i];
  return e;
}

/* vm_adapt.c: the state (kpar NULL when not adapting), an invoke's start
 * (picks adapt.mode; returns the start time, 0 when untimed) and end
 * (after a successful run), and a CPU kernel's call in that mode. */
nimble_status_t nimble_vm_adapt_init(nimble_vm *vm);
uint64_t nimble_vm_adapt_begin(nimble_vm *vm, uint32_t entry);
void nimble_vm_adapt_end(nimble_vm *vm, uint64_t t0);
int32_t nimble_vm_call_kernel(nimble_vm *vm, const nimble_kernel_ref_t *k, int64_t ki, int32_t arity,
                              int32_t first_output);

/* Fills vm->env for this VM. */
void nimble_kernel_env_init(nimble_vm *vm);

/* The VM's state of a device other than the CPU (vm_device.c).
 *
 * _open finds it or creates its pool and stream; a device that is not
 * available fails with its message followed by ": <why>". _find: the
 * opened one, or NULL. _sync waits for its stream and drops the kept
 * sources; _sync_all does so for every opened device (the first error
 * wins). _keep holds `o` (retained) until the next wait, for a copy queued
 * from its memory; _host_waited says the stream was just waited for.
 * _deinit_all waits and frees. */
nimble_status_t nimble_vm_device_open(nimble_vm *vm, DLDeviceType type, const char *why,
                                      nimble_vm_device **out);
nimble_vm_device *nimble_vm_device_find(const nimble_vm *vm, DLDeviceType type);
nimble_status_t nimble_vm_device_sync(nimble_vm_device *d);
nimble_status_t nimble_vm_device_sync_all(nimble_vm *vm);
nimble_status_t nimble_vm_device_keep(nimble_vm_device *d, nimble_object *o);
void nimble_vm_device_host_waited(nimble_vm_device *d);
void nimble_vm_device_deinit_all(nimble_vm *vm);

/* The device copy of constant data `host` (`nbytes`) this VM uploaded to
 * `d` before, or NULL (borrowed). _remember records a new one (retained; a
 * failure to record only costs a later upload). _is_constant_copy: whether
 * `owner` is such a copy on any device (kernels may not write into it). */
nimble_storage_obj *nimble_vm_device_constant(const nimble_vm_device *d, const void *host,
                                              uint64_t nbytes);
void nimble_vm_device_remember_constant(nimble_vm_device *d, const void *host, uint64_t nbytes,
                                        nimble_storage_obj *storage);
_Bool nimble_vm_device_is_constant_copy(const nimble_vm *vm, const nimble_object *owner);

/* Runs function `func` on `args` (borrowed; the callee gets its own
 * references) and stores the result in *result (caller releases). Errors
 * name the function, the pc and the instruction. */
nimble_status_t nimble_vm_run(nimble_vm *vm, uint32_t func, nimble_object *const *args,
                              uint32_t num_args, nimble_object **result);

#endif
