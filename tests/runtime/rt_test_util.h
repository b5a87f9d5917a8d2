/* Helpers shared by the runtime suites: the test kernel library's bytes,
 * builders preloaded with it, DLTensor and signature shorthands, and
 * emitters for the instruction sequences every program repeats. */
#ifndef NIMBLE_RT_TEST_UTIL_H
#define NIMBLE_RT_TEST_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/bytecode.h"
#include "nimble/executable_builder.h"
#include "nimble/kernel_abi.h"
#include "nimble/runtime.h"
#include "nimble_test.h"

extern const DLDataType RT_F32, RT_I64;
extern const DLDevice RT_CPU;

/* Reads a whole file; caller frees. Fails the test when it cannot. */
void *rt_read_file(const char *path, size_t *size);

/* The bytes of the test kernel library (or the alternative one, whose
 * vadd_f32 adds 1000 more), read once, borrowed. */
const void *rt_kernels(size_t *size);
const void *rt_kernels_alt(size_t *size);

/* A builder for target "test" with the test kernels set. Caller destroys. */
nimble_executable_builder *rt_builder(void);

/* Adds a kernel by symbol (CPU) and returns its index. */
int64_t rt_kernel(nimble_executable_builder *b, const char *symbol);

/* Adds a function and returns its index. */
uint32_t rt_function(nimble_executable_builder *b, const char *name, uint32_t params, uint32_t regs);

/* Asserting wrappers around NIMBLE_BUILDER_EMIT. */
#define RT_EMIT(b, f, op, ...) NIMBLE_ASSERT_OK(NIMBLE_BUILDER_EMIT((b), (f), (op), __VA_ARGS__))
#define RT_EMIT0(b, f, op) NIMBLE_ASSERT_OK(NIMBLE_BUILDER_EMIT0((b), (f), (op)))

/* Emits LoadConsti/AllocStorage/LoadConsti/AllocTensor: a fresh compact
 * tensor of a constant shape in `dst`, using registers t1 and t2. */
void rt_emit_alloc(nimble_executable_builder *b, uint32_t f, int64_t dst, int64_t t1, int64_t t2,
                   DLDataType dt, int32_t ndim, const int64_t *shape);

/* A signature entry. dims: values >= 0 are constants; for symbolic dims
 * pass RT_SYM("name") in `symbols` at the same index (NULL elsewhere). */
nimble_tensor_info_t rt_info(const char *name, DLDataType dt, int32_t ndim, const int64_t *dims,
                             const char *const *symbols);
void rt_info_free(nimble_tensor_info_t *info);

/* Serialises the builder and loads the image through the real loader. */
nimble_executable *rt_load(nimble_executable_builder *b);
/* The same, returning the status instead (and *out on success). */
nimble_status_t rt_try_load(nimble_executable_builder *b, nimble_executable **out);

/* A DLTensor over caller memory (shape borrowed). */
DLTensor rt_tensor(void *data, DLDataType dt, int32_t ndim, int64_t *shape);

/* Runs `entry` with int64 scalar inputs and returns the int64 scalar result. */
int64_t rt_run_i64(nimble_vm *vm, const char *entry, const int64_t *inputs, uint32_t n);

/* Scalar int64 entry signatures: n inputs named a0.., one output "out". */
void rt_add_scalar_entry(nimble_executable_builder *b, const char *name, uint32_t func, uint32_t n);

/* Items handed to a thread of their own, which takes each in turn, in
 * order (outputs or blocks an application frees on another thread while
 * the VM goes on): rt_handoff_start starts it, rt_handoff_push queues an
 * item (waiting while RT_HANDOFF_RING are queued), rt_handoff_finish
 * returns once every item is taken and the thread has ended. */
enum { RT_HANDOFF_RING = 64 };
typedef struct rt_handoff {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  void *items[RT_HANDOFF_RING];
  int head, tail, done;
  void (*take)(void *item, void *ctx);
  void *ctx;
  pthread_t thread;
} rt_handoff;
void rt_handoff_start(rt_handoff *h, void (*take)(void *item, void *ctx), void *ctx);
void rt_handoff_push(rt_handoff *h, void *item);
void rt_handoff_finish(rt_handoff *h);

#endif
