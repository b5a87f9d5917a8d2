/* Threads by measurement: with a pool of more than one thread, a VM times
 * its first invokes at each set of input shapes and keeps the fastest of
 * three ways to run them (docs/vm.md, "Threads by measurement"):
 *
 *   pool   every kernel's parallel loops (and the runtime's sgemm and
 *          Winograd calls) on the pool, as without this;
 *   alone  every kernel on the calling thread;
 *   mixed  each kernel alone where that was at least 10 % faster in the
 *          pool and alone blocks.
 *
 * Work split over two cores and then read by the other one moves cache
 * lines between them, and writing a line the other core has read costs
 * about 8 ns on the build machine (a 64 KB buffer: 8 us against 0.5): a
 * small model loses more to that than the second core gives (cnn at 2
 * threads: 0.120 ms, alone 0.111, mixed 0.105). Kernels compute the same
 * bits at any thread count, so the choice changes only the time.
 *
 * From KPAR_SETTLE_NS after the VM is made, the probe runs KPAR_BLOCKS
 * blocks of KPAR_BLOCK invokes (kBlockMode), timing every invoke but each
 * block's first, and each kernel call in the pool and alone blocks (per
 * kernel and power of two of its first output's elements); the fastest
 * invoke's mode wins, the pool unless another is 3 % faster. New shapes
 * start over; after KPAR_RESTARTS of them the VM keeps the pool, so that
 * inputs whose shapes change on every call do not keep it probing. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm/sgemm_threads.h"
#include "vm/vm.h"

/* The probe: blocks of KPAR_BLOCK invokes in one mode, the first of each
 * untimed (it moves the data to where the mode computes it: alternating
 * modes invoke by invoke, cnn alone took 126-143 us against 111 in a run
 * alone throughout). Kernels are timed in the pool and alone blocks. */
enum { KPAR_BLOCK = 3, KPAR_BLOCKS = 7, KPAR_RESTARTS = 8 };
static const uint8_t kBlockMode[KPAR_BLOCKS] = {NIMBLE_KPAR_POOL,  NIMBLE_KPAR_ALONE, NIMBLE_KPAR_POOL,
                                                NIMBLE_KPAR_ALONE, NIMBLE_KPAR_MIXED, NIMBLE_KPAR_POOL,
                                                NIMBLE_KPAR_MIXED};
/* A new pool's worker can start on its caller's core and is moved within
 * 10-20 ms (docs/benchmarks.md): measured before then, alone and the
 * pool look alike. */
#define KPAR_SETTLE_NS 40000000u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t kpar_bytes(const nimble_vm *vm) {
  return (vm->exe->code.num_kernels ? vm->exe->code.num_kernels : 1) * sizeof *vm->kpar;
}

static void restart(nimble_vm *vm, uint64_t sig) {
  struct nimble_vm_adapt *a = &vm->adapt;
  a->sig = sig;
  a->invokes = 0;
  a->chosen = -1;
  for (int m = 0; m < 3; m++) a->best[m] = UINT64_MAX;
  memset(vm->kpar, 0xff, kpar_bytes(vm)); /* every slot unused (log2 -1) */
}

nimble_status_t nimble_vm_adapt_init(nimble_vm *vm) {
  const char *v = getenv("NIMBLE_ADAPTIVE_THREADS");
  vm->adapt.sig = ~(uint64_t)0; /* no invoke yet: the first one starts the probe */
  if (vm->env.num_threads < 2 || vm->opts.fixed_threads || (v && !strcmp(v, "0"))) return nimble_ok();
  vm->kpar = malloc(kpar_bytes(vm));
  if (!vm->kpar) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory creating a VM");
  vm->adapt.settled_ns = now_ns() + KPAR_SETTLE_NS;
  vm->adapt.chosen = -1; /* not settled until the probe has run */
  return nimble_ok();
}

/* The entry and its tensor inputs' shapes (FNV-1a); an ADT input counts
 * as its kind only. */
static uint64_t signature(const nimble_vm *vm, uint32_t entry) {
  uint64_t h = 1469598103934665603u ^ entry;
  const nimble_entry_info_t *info = &vm->exe->meta.entries[entry];
  for (uint32_t i = 0; i < info->num_inputs; i++) {
    const nimble_object *o = vm->inputs[i];
    h = (h ^ o->kind) * 1099511628211u;
    if (o->kind != NIMBLE_OBJ_TENSOR) continue;
    const DLTensor *t = &((const nimble_tensor_obj *)o)->dl;
    for (int32_t d = 0; d < t->ndim; d++) h = (h ^ (uint64_t)t->shape[d]) * 1099511628211u;
  }
  return h;
}

uint64_t nimble_vm_adapt_begin(nimble_vm *vm, uint32_t entry) {
  struct nimble_vm_adapt *a = &vm->adapt;
  if (!vm->kpar) return 0;
  uint64_t sig = signature(vm, entry);
  if (sig != a->sig) {
    if (a->restarts >= KPAR_RESTARTS) { /* shapes keep changing: the pool, unmeasured */
      free(vm->kpar);
      vm->kpar = NULL;
      a->mode = a->chosen = NIMBLE_KPAR_POOL;
      return 0;
    }
    if (a->sig != ~(uint64_t)0) a->restarts++;
    restart(vm, sig);
  }
  if (a->chosen >= 0) {
    a->mode = a->chosen;
    return 0;
  }
  uint64_t t = now_ns();
  if (t < a->settled_ns) {
    a->mode = NIMBLE_KPAR_POOL;
    return 0;
  }
  a->mode = kBlockMode[a->invokes / KPAR_BLOCK];
  return t;
}

void nimble_vm_adapt_end(nimble_vm *vm, uint64_t t0) {
  struct nimble_vm_adapt *a = &vm->adapt;
  if (!t0 || !vm->kpar) return;
  uint64_t dt = now_ns() - t0;
  if (a->invokes % KPAR_BLOCK && dt < a->best[a->mode]) a->best[a->mode] = dt;
  if (++a->invokes < KPAR_BLOCK * KPAR_BLOCKS) return;
  /* Another mode only when at least 3 % faster than the pool: noise
   * should not take the second core away. */
  uint64_t pool = a->best[NIMBLE_KPAR_POOL];
  a->chosen = NIMBLE_KPAR_POOL;
  for (int m = NIMBLE_KPAR_ALONE; m <= NIMBLE_KPAR_MIXED; m++)
    if (a->best[m] < pool - pool / 32 && a->best[m] < a->best[a->chosen]) a->chosen = m;
}

int nimble_vm_threads_settled(const nimble_vm *vm) { return !vm->kpar || vm->adapt.chosen >= 0; }

/* A CPU kernel's call, its parallel loops (and the runtime's sgemm and
 * Winograd calls) on `pool`, or on the calling thread for NULL. */
static __attribute__((noinline)) int32_t call_on(nimble_vm *vm, const nimble_kernel_ref_t *k, int32_t arity,
                                                 nimble_thread_pool *pool) {
  nimble_thread_pool *vm_pool = vm->threads, *outer = nimble_sgemm_threads_swap(pool);
  uint32_t T = vm->env.num_threads;
  vm->threads = pool;
  vm->env.num_threads = nimble_thread_pool_size(pool);
  int32_t rc = k->fn(vm->packed_args, arity, &vm->env);
  vm->threads = vm_pool;
  vm->env.num_threads = T;
  nimble_sgemm_threads_swap(outer);
  return rc;
}

int32_t nimble_vm_call_kernel(nimble_vm *vm, const nimble_kernel_ref_t *k, int64_t ki, int32_t arity,
                              int32_t first_output) {
  struct nimble_vm_adapt *a = &vm->adapt;
  nimble_thread_pool *pool = vm->threads;
  if (!vm->kpar || (a->mode == NIMBLE_KPAR_POOL && a->chosen >= 0)) return call_on(vm, k, arity, pool);
  int alone = a->mode == NIMBLE_KPAR_ALONE;
  /* Probing the pool and alone (timed past each block's first invoke),
   * or mixed: this kernel's slot for its first output's size. */
  int probe = a->chosen < 0 && a->invokes < 4 * KPAR_BLOCK && a->invokes % KPAR_BLOCK;
  if (a->mode != NIMBLE_KPAR_MIXED && !probe) return call_on(vm, k, arity, alone ? NULL : pool);
  uint64_t e = first_output < arity ? nimble_dl_elements(vm->packed_args[first_output]) : 1;
  int8_t lg = (int8_t)(e ? 63 - __builtin_clzll(e) : 0);
  struct nimble_vm_kpar *kp = &vm->kpar[ki];
  uint32_t *best = kp->best[lg & 3];
  if (kp->log2[lg & 3] != lg) {
    kp->log2[lg & 3] = lg;
    best[0] = best[1] = UINT32_MAX;
  }
  if (!probe) /* mixed: alone where that was at least 10 % faster */
    return call_on(vm, k, arity, best[1] < best[0] - best[0] / 10 ? NULL : pool);
  uint64_t t0 = now_ns();
  int32_t rc = call_on(vm, k, arity, alone ? NULL : pool);
  uint64_t dt = now_ns() - t0;
  if (dt < best[alone]) best[alone] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
  return rc;
}
