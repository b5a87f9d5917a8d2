/* Shared machinery of the passes (private): pointer maps, fresh names,
 * expression rebuilding and the bottom-up rewriter most passes are built
 * on. Everything IR is allocated in the module's arena; the maps are
 * malloc'ed and freed by their owner with pass_map_free. */
#ifndef NIMBLE_PASSES_PASS_INTERNAL_H
#define NIMBLE_PASSES_PASS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/ir.h"
#include "nimble/passes.h"
#include "nimble/ptr_map.h"
#include "nimble/typing.h"

/* ---- Pointer → pointer map ------------------------------------------------
 * nimble_base's (nimble/ptr_map.h), malloc'ed: zero-initialise, free with
 * pass_map_free. The passes keep their short names for it. */
typedef nimble_ptr_map pass_map;

/* false when memory runs out. */
static inline bool pass_map_put(pass_map *m, const void *key, void *val) {
  return nimble_ptr_map_put(m, key, val);
}
/* The value, or NULL when absent. */
static inline void *pass_map_get(const pass_map *m, const void *key) {
  return nimble_ptr_map_get(m, key);
}
static inline bool pass_map_has(const pass_map *m, const void *key) {
  return nimble_ptr_map_has(m, key);
}
static inline void pass_map_free(pass_map *m) { nimble_ptr_map_deinit(m); }

/* ---- Fresh variable names ------------------------------------------------ */
/* Names already used in one function, so that new variables print and
 * parse back unambiguously (the printer does not rename). */
typedef struct pass_namer {
  nimble_arena *arena;
  char **names; /* malloc'ed open-addressing set of borrowed names */
  size_t cap, count;
  unsigned counter;
} pass_namer;

/* Collects every variable name in `e`. */
nimble_status_t pass_namer_init(pass_namer *n, nimble_arena *arena, const nimble_expr *e);
void pass_namer_deinit(pass_namer *n);
/* A new variable named base<N>, unused so far (NULL on OOM). */
const nimble_expr *pass_namer_var(pass_namer *n, const char *base, const nimble_type *annotation);

/* ---- Building ------------------------------------------------------------- */
/* A call like `e` (same callee kind, attributes and place) with new args. */
const nimble_expr *pass_call_with_args(nimble_arena *a, const nimble_expr *e, const nimble_expr *callee,
                                       const nimble_expr *const *args);
/* An operator call with attributes given by name (NULL/0: defaults). */
nimble_status_t pass_op_call(nimble_arena *a, const char *op, size_t n, const nimble_expr *const *args,
                             const nimble_named_attr_t *attrs, size_t num_attrs, const nimble_expr **out);
/* Whether `e` calls the operator named `name`. */
bool pass_is_op_call(const nimble_expr *e, const char *name);
/* The operator `e` calls, or NULL. */
const nimble_op *pass_called_op(const nimble_expr *e);
/* Memory operators (alloc_storage ... kill): passes before manifest_memory
 * leave them alone. */
bool pass_is_memory_op(const nimble_op *op);
/* Whether evaluating `e` may have an effect beyond its value: calls of
 * functions (globals, closures), invoke and kill. Function literals are
 * pure (building a closure runs nothing). */
bool pass_has_effects(const nimble_expr *e);

/* How many times variable `var` occurs in e (its binding sites not
 * counted). */
nimble_status_t pass_count_var(const nimble_expr *e, const nimble_expr *var, size_t *count);

/* A let chain unrolled: bindings in order and the final body. */
typedef struct pass_chain {
  size_t n, cap;
  const nimble_expr **vars;
  const nimble_expr **values;
  const nimble_expr *tail;
} pass_chain;
nimble_status_t pass_chain_collect(const nimble_expr *e, pass_chain *c);
nimble_status_t pass_chain_push(pass_chain *c, const nimble_expr *var, const nimble_expr *value);
/* Rebuilds `let v0 = x0; ... tail` (locations taken from nothing). */
const nimble_expr *pass_chain_build(nimble_arena *a, const pass_chain *c, const nimble_expr *tail);
void pass_chain_free(pass_chain *c);

/* ---- The bottom-up rewriter ------------------------------------------------ */
typedef struct pass_rewriter pass_rewriter;
struct pass_rewriter {
  nimble_arena *arena;
  pass_map subst; /* variable -> replacement */
  void *user;
  /* After the children of `orig` were rewritten into `e` (== orig when
   * nothing changed): may replace it. Optional. */
  nimble_status_t (*post)(pass_rewriter *rw, const nimble_expr *orig, const nimble_expr *e,
                          const nimble_expr **out);
  /* A `let var = value` (value rewritten): *drop removes the binding (the
   * hook then usually substitutes var). Optional. */
  nimble_status_t (*bind)(pass_rewriter *rw, const nimble_expr *var, const nimble_expr *value,
                          bool *drop);
  /* Scopes (let chains, branches, arms, function bodies): enter returns a
   * mark, leave restores it. Optional. */
  size_t (*enter)(pass_rewriter *rw);
  void (*leave)(pass_rewriter *rw, size_t mark);
};
nimble_status_t pass_rewrite(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out);
/* Rewrites every global function's body (parameters are kept). Errors
 * name the function ("in @f: ..."); the pipeline adds the pass. */
nimble_status_t pass_rewrite_module(pass_rewriter *rw, nimble_module *m);

/* Applies fn to each direct child of `e` (not LET: callers walk chains
 * themselves), in evaluation order, and rebuilds `e` when a child changed. */
typedef nimble_status_t (*pass_child_fn)(void *user, const nimble_expr *child, const nimble_expr **out);
nimble_status_t pass_map_children(nimble_arena *a, const nimble_expr *e, pass_child_fn fn, void *user,
                                  const nimble_expr **out);

/* ---- Types ------------------------------------------------------------------- */
/* The static shape of a tensor type: true when every dim is a constant. */
bool pass_type_static_shape(const nimble_type *t, int64_t *dims, size_t *rank);
/* The 1-D int64 constant holding dims. */
const nimble_expr *pass_shape_const(nimble_arena *a, const int64_t *dims, size_t rank);

/* fuse_ops; allow_groups false makes every op its own primitive. */
nimble_status_t pass_fuse_ops(nimble_module *m, bool allow_groups);

#endif
