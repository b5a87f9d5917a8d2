/* VM objects: tensors, storage, ADT values and closures, reference counted.
 *
 * Most objects live and die inside one VM, on one thread, and pay for plain
 * increments only. An object that can be reached from several threads —
 * a constant (shared by every VM over one executable), an output handed to
 * the application and everything it keeps alive — is first marked shared
 * (nimble_object_share, on the owning thread, before it is handed over);
 * from then on its count is updated atomically. On the (loaded) build
 * machine this took bench/vm's cost of a Move from about 120 ns to 11 ns.
 * A new object starts with one reference, owned by its creator. */
#ifndef NIMBLE_RUNTIME_OBJECT_H
#define NIMBLE_RUNTIME_OBJECT_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "format/layout.h"
#include "nimble/status.h"

struct nimble_pool;

typedef enum nimble_object_kind {
  NIMBLE_OBJ_TENSOR = 1,
  NIMBLE_OBJ_STORAGE = 2,
  NIMBLE_OBJ_ADT = 3,
  NIMBLE_OBJ_CLOSURE = 4,
} nimble_object_kind_t;

typedef struct nimble_object {
  uint32_t refs;
  uint8_t kind;
  uint8_t shared; /* set once, before other threads can see the object */
  uint8_t small;  /* from nimble_object_new's small blocks: freed back to them */
} nimble_object;

static inline void nimble_object_init(nimble_object *o, nimble_object_kind_t kind) {
  o->refs = 1;
  o->kind = (uint8_t)kind;
  o->shared = 0;
  o->small = 0;
}

/* A new object of `bytes` bytes (at least the header), its header
 * initialized as nimble_object_init does and the rest not; NULL when
 * memory is short. Objects of up to NIMBLE_OBJECT_SMALL_BYTES (a tensor of
 * up to 8 dims, a shape of 4, a storage) come from a per-thread list of
 * blocks that nimble_object_release gives back to the releasing thread's
 * list: a loop's step allocates and drops 20-30 of them, and malloc and
 * free cost about as much as the step's bookkeeping itself. */
#define NIMBLE_OBJECT_SMALL_BYTES 128
nimble_object *nimble_object_new(nimble_object_kind_t kind, size_t bytes);

/* A block of device memory. `pool` (retained) gets the block back when the
 * last reference goes; NULL means the memory belongs to someone else (the
 * executable's constant pool). */
typedef struct nimble_storage_obj {
  nimble_object base;
  void *data;
  uint64_t size;       /* usable bytes */
  uint64_t block_size; /* the pool's size class, for giving it back */
  DLDevice device;
  struct nimble_pool *pool;
} nimble_storage_obj;

/* A DLTensor view. `owner` (retained, may be NULL for borrowed input data)
 * keeps `dl.data` alive: a storage, or another tensor whose inline data or
 * storage this tensor views. Shape and strides live in the object. */
typedef struct nimble_tensor_obj {
  nimble_object base;
  DLTensor dl;           /* dl.shape points at shape[]; strides NULL */
  nimble_object *owner;
  int64_t shape[];       /* ndim entries, then inline data when any */
} nimble_tensor_obj;

/* Whether t's data lives inside the object itself (immediates, shapes,
 * copied values), as nimble_tensor_obj_new(..., inline_bytes > 0) lays it
 * out. */
static inline int nimble_tensor_obj_data_inline(const nimble_tensor_obj *t) {
  size_t shape_bytes = ((size_t)t->dl.ndim * sizeof(int64_t) + 15) & ~(size_t)15;
  return t->dl.data == (const void *)((const char *)t->shape + shape_bytes);
}

typedef struct nimble_adt_obj {
  nimble_object base;
  int32_t tag;
  uint32_t num_fields;
  nimble_object *fields[]; /* owned references */
} nimble_adt_obj;

typedef struct nimble_closure_obj {
  nimble_object base;
  uint32_t func;
  uint32_t num_captured;
  nimble_object *captured[]; /* owned references */
} nimble_closure_obj;

static inline void nimble_object_retain(nimble_object *o) {
  if (!o) return;
  if (o->shared)
    __atomic_fetch_add(&o->refs, 1, __ATOMIC_RELAXED);
  else
    o->refs++;
}

/* Marks a tensor and the chain of owners keeping its data alive (or any
 * other object alone) as shared. Call on the thread that owns them. */
void nimble_object_share(nimble_object *o);
/* A DLTensor's first byte; NULL stays NULL (an empty tensor may have no
 * data, and NULL + 0 is undefined in C). */
static inline void *nimble_dl_data(const DLTensor *t) {
  return t->data ? (char *)t->data + t->byte_offset : NULL;
}

/* Drops a reference; frees the object (and releases what it holds) at 0. */
void nimble_object_release(nimble_object *o);

/* A tensor of `ndim` dims with `inline_bytes` of data inside the object
 * (dl.data points there when inline_bytes > 0, else NULL for the caller to
 * set). Returns NULL when memory is short. The shape is zeroed. */
nimble_tensor_obj *nimble_tensor_obj_new(int32_t ndim, DLDataType dtype, DLDevice device,
                                         size_t inline_bytes);

/* An int64 scalar tensor on the CPU holding `value`. NULL when memory is short. */
nimble_tensor_obj *nimble_tensor_obj_scalar_i64(int64_t value);

/* A tensor viewing `owner`'s memory at `data` (owner retained). */
nimble_tensor_obj *nimble_tensor_obj_view(nimble_object *owner, void *data, int32_t ndim,
                                          const int64_t *shape, DLDataType dtype, DLDevice device);

nimble_adt_obj *nimble_adt_obj_new(int32_t tag, uint32_t num_fields);
nimble_closure_obj *nimble_closure_obj_new(uint32_t func, uint32_t num_captured);

/* nimble_tensor_nbytes (the bytes of a compact tensor) is the format's:
 * format/layout.h, included above. */

/* "[2,7]" into buf (truncated, NUL-terminated). Returns buf. */
char *nimble_format_shape(int32_t ndim, const int64_t *shape, char *buf, size_t size);

/* "float32", "int64", ... into buf. Returns buf. */
char *nimble_format_dtype(DLDataType dtype, char *buf, size_t size);

/* "tensor", "storage", "ADT", "closure", or "nothing" for NULL. */
const char *nimble_object_kind_name(const nimble_object *o);

#endif
