/* Private to the lowering: the state shared by its files. */
#ifndef NIMBLE_LOWER_INTERNAL_H
#define NIMBLE_LOWER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lower/lower_builder.h"
#include "nimble/lower.h"
#include "nimble/passes.h"
#include "nimble/ptr_map.h"
#include "nimble/typing.h"

/* ---- A pointer -> int64 map ------------------------------------------------
 * nimble_base's pointer map (malloc'ed; zero-initialise), the integers
 * stored as pointer-sized values. */
typedef nimble_ptr_map lw_map;
_Static_assert(sizeof(intptr_t) >= sizeof(int64_t), "lw_map stores int64 values in pointers");

static inline void lw_map_free(lw_map *m) { nimble_ptr_map_deinit(m); }
/* false when absent */
static inline bool lw_map_get(const lw_map *m, const void *key, int64_t *val) {
  void *v;
  if (!nimble_ptr_map_find(m, key, &v)) return false;
  *val = (int64_t)(intptr_t)v;
  return true;
}
/* false on OOM */
static inline bool lw_map_put(lw_map *m, const void *key, int64_t val) {
  return nimble_ptr_map_put(m, key, (void *)(intptr_t)val);
}

/* ---- Instructions buffered per function --------------------------------- */
/* Function operands hold the callee's position among the lowered globals
 * until every function is added to the builder (its index is known only
 * then, because the builder wants the register count up front). */
typedef struct lw_ins {
  int op;
  uint32_t n;
  int64_t ops[8]; /* inline when n <= 8 */
  int64_t *big;   /* malloc'ed when n > 8 */
  int func_operand; /* index of an operand holding a function position, or -1 */
} lw_ins;

static inline int64_t *lw_ins_ops(lw_ins *i) { return i->big ? i->big : i->ops; }

typedef struct lw_func {
  const char *name;
  const nimble_expr *global; /* the global's NIMBLE_EXPR_FUNC */
  const nimble_expr *code;   /* the code: the inner function of a closure, else `global` */
  bool closure;              /* body is a function literal: calls allocate a closure */
  uint32_t num_params;       /* captured + code params for a closure */
  uint32_t num_registers;
  lw_ins *ins;
  size_t n, cap;
  uint32_t vm_index;
} lw_func;

typedef struct lower_ctx {
  const nimble_module *m;
  nimble_arena *arena;
  nimble_executable_builder *b;
  nimble_lower_options_t opts;
  lw_func *funcs;
  size_t num_funcs;
  nimble_lower_primitive_t *prims;
  size_t num_prims, cap_prims;
  lw_map consts; /* constant expr -> pool index */
} lower_ctx;

/* Position of the non-primitive global `name` in ctx->funcs, or -1. */
int64_t lw_find_func(const lower_ctx *c, const char *name);

/* The kernel index of primitive `name` as `kind` (declared on first use). */
nimble_status_t lw_kernel(lower_ctx *c, const char *name, nimble_lower_kernel_kind_t kind,
                          uint32_t num_outputs, const char *mode, int64_t *index);
/* The same, for a compute kernel that place_devices put on the GPU when
 * on_cuda (a primitive invoked on both devices gets one kernel each). */
nimble_status_t lw_kernel_on(lower_ctx *c, const char *name, nimble_lower_kernel_kind_t kind,
                             uint32_t num_outputs, const char *mode, bool on_cuda, int64_t *index);

/* The constant pool index of a constant expression (added on first use). */
nimble_status_t lw_constant(lower_ctx *c, const nimble_expr *e, int64_t *index);

/* The DLPack dtype of an IR dtype (bool is uint8: the VM's If reads it). */
DLDataType lw_dl_dtype(nimble_dtype_t dt);

/* Compiles one function's body into f->ins and sets f->num_registers. */
nimble_status_t lw_compile_function(lower_ctx *c, lw_func *f);

#endif
