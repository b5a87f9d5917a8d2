/* The compiler's IR: expressions in the style of TVM's Relay.
 *
 * A module holds type definitions (ADTs with constructors) and global
 * functions. Expressions are variables, global references, tensor constants,
 * operators, constructors, calls, `let`, `if`, tuples and projections,
 * functions (closures) and `match` with nested patterns.
 *
 * Everything is allocated from one arena per compilation (nimble/arena.h)
 * and is immutable after construction: passes build new expressions and
 * share the unchanged parts. A variable is one node, created where it is
 * bound; every use points to that node, so variables compare by identity.
 *
 * Builders take the arena first and return NULL only when memory runs out;
 * arrays passed in are copied. Pointers returned are owned by the arena.
 *
 * The readable text form (.nir) is documented in docs/ir.md; see nimble/nir.h
 * for the parser and nimble_ir_print_module() below for the printer.
 */
#ifndef NIMBLE_IR_H
#define NIMBLE_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/op.h"
#include "nimble/status.h"
#include "nimble/type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where an expression came from; file is NULL for built IR. */
typedef struct nimble_src_loc {
  const char *file;
  uint32_t line;
  uint32_t col;
} nimble_src_loc_t;

/* A constant tensor: dense, row-major, little-endian host layout. */
typedef struct nimble_const_tensor {
  nimble_dtype_t dtype;
  size_t rank;
  const int64_t *dims;
  size_t num_elements;
  const void *data; /* num_elements * nimble_dtype_size(dtype) bytes */
} nimble_const_tensor_t;

typedef struct nimble_typedef nimble_typedef;
typedef struct nimble_constructor nimble_constructor;
typedef struct nimble_expr nimble_expr;
typedef struct nimble_pattern nimble_pattern;

/* One constructor of an ADT, e.g. Cons(T, List[T]). Field types may refer to
 * the type definition's parameters. */
struct nimble_constructor {
  const char *name;
  const nimble_typedef *owner;
  uint32_t tag; /* index in owner->ctors */
  size_t num_fields;
  const nimble_type *const *fields;
};

/* type List[T] { Cons(T, List[T]), Nil } */
struct nimble_typedef {
  const char *name;
  size_t num_params;
  const nimble_type *const *params; /* NIMBLE_TYPE_VAR */
  size_t num_ctors;
  const nimble_constructor *const *ctors;
  nimble_src_loc_t loc;
};

typedef enum nimble_expr_kind {
  NIMBLE_EXPR_VAR = 0,  /* %x */
  NIMBLE_EXPR_GLOBAL,   /* @f */
  NIMBLE_EXPR_CONSTANT, /* 1.5, const[(2,), float32]{1, 2} */
  NIMBLE_EXPR_OP,       /* add (only as a callee) */
  NIMBLE_EXPR_CONSTRUCTOR, /* Cons */
  NIMBLE_EXPR_CALL,
  NIMBLE_EXPR_LET,
  NIMBLE_EXPR_IF,
  NIMBLE_EXPR_TUPLE,
  NIMBLE_EXPR_PROJ, /* %t.0 */
  NIMBLE_EXPR_FUNC, /* fn (%x) { ... } */
  NIMBLE_EXPR_MATCH,
} nimble_expr_kind_t;

typedef enum nimble_pattern_kind {
  NIMBLE_PATTERN_WILDCARD = 0, /* _ */
  NIMBLE_PATTERN_VAR,          /* %x: binds */
  NIMBLE_PATTERN_CTOR,         /* Cons(p, q) */
  NIMBLE_PATTERN_TUPLE,        /* (p, q) */
} nimble_pattern_kind_t;

struct nimble_pattern {
  nimble_pattern_kind_t kind;
  nimble_src_loc_t loc;
  const nimble_expr *var;              /* NIMBLE_PATTERN_VAR: a NIMBLE_EXPR_VAR */
  const nimble_constructor *ctor;      /* NIMBLE_PATTERN_CTOR */
  size_t num_subs;
  const nimble_pattern *const *subs;   /* CTOR fields or TUPLE fields */
};

typedef struct nimble_match_clause {
  const nimble_pattern *pattern;
  const nimble_expr *body;
} nimble_match_clause_t;

struct nimble_expr {
  nimble_expr_kind_t kind;
  nimble_src_loc_t loc;
  union {
    struct {
      const char *name;
      const nimble_type *annotation; /* may be NULL */
    } var;
    struct {
      const char *name;
    } global;
    nimble_const_tensor_t constant;
    struct {
      const nimble_op *op;
    } op;
    struct {
      const nimble_constructor *ctor;
    } ctor;
    struct {
      const nimble_expr *callee;
      size_t num_args;
      const nimble_expr *const *args;
      nimble_attrs_t attrs; /* operator calls only; empty otherwise */
    } call;
    struct {
      const nimble_expr *var; /* NIMBLE_EXPR_VAR */
      const nimble_expr *value;
      const nimble_expr *body;
    } let;
    struct {
      const nimble_expr *cond;
      const nimble_expr *then_branch;
      const nimble_expr *else_branch;
    } if_;
    struct {
      size_t count;
      const nimble_expr *const *fields;
    } tuple;
    struct {
      const nimble_expr *tuple;
      size_t index;
    } proj;
    struct {
      size_t num_type_params;
      const nimble_type *const *type_params; /* NIMBLE_TYPE_VAR */
      size_t num_params;
      const nimble_expr *const *params; /* NIMBLE_EXPR_VAR */
      const nimble_type *ret; /* may be NULL */
      const nimble_expr *body;
    } func;
    struct {
      const nimble_expr *scrutinee;
      size_t num_clauses;
      const nimble_match_clause_t *clauses;
    } match;
  } u;
};

/* Builders. `loc` may be NULL (no location). They return NULL when memory
 * runs out, and nimble_ir_constant also for negative dims or a byte size
 * that overflows. */
const nimble_expr *nimble_ir_var(nimble_arena *a, const char *name, const nimble_type *annotation,
                                 const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_global(nimble_arena *a, const char *name, const nimble_src_loc_t *loc);
/* Copies dims and data. */
const nimble_expr *nimble_ir_constant(nimble_arena *a, nimble_dtype_t dtype, size_t rank,
                                      const int64_t *dims, const void *data,
                                      const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_scalar_f32(nimble_arena *a, float v, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_scalar_i64(nimble_arena *a, int64_t v, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_op(nimble_arena *a, const nimble_op *op, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_ctor(nimble_arena *a, const nimble_constructor *ctor,
                                  const nimble_src_loc_t *loc);
/* A call. For operator calls prefer nimble_ir_call_op, which checks arity
 * and attributes. `attrs` may be NULL (none). */
const nimble_expr *nimble_ir_call(nimble_arena *a, const nimble_expr *callee, size_t num_args,
                                  const nimble_expr *const *args, const nimble_attrs_t *attrs,
                                  const nimble_src_loc_t *loc);
/* Calls operator `op` with attributes given by name (missing ones take
 * their defaults). Checks the argument count and the attributes' names and
 * kinds; on error the message names the operator and the attribute. */
nimble_status_t nimble_ir_call_op(nimble_arena *a, const nimble_op *op, size_t num_args,
                                  const nimble_expr *const *args,
                                  const nimble_named_attr_t *attrs, size_t num_attrs,
                                  const nimble_src_loc_t *loc, const nimble_expr **out);
const nimble_expr *nimble_ir_let(nimble_arena *a, const nimble_expr *var, const nimble_expr *value,
                                 const nimble_expr *body, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_if(nimble_arena *a, const nimble_expr *cond, const nimble_expr *then_b,
                                const nimble_expr *else_b, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_tuple(nimble_arena *a, size_t count, const nimble_expr *const *fields,
                                   const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_proj(nimble_arena *a, const nimble_expr *tuple, size_t index,
                                  const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_func(nimble_arena *a, size_t num_type_params,
                                  const nimble_type *const *type_params, size_t num_params,
                                  const nimble_expr *const *params, const nimble_type *ret,
                                  const nimble_expr *body, const nimble_src_loc_t *loc);
const nimble_expr *nimble_ir_match(nimble_arena *a, const nimble_expr *scrutinee,
                                   size_t num_clauses, const nimble_match_clause_t *clauses,
                                   const nimble_src_loc_t *loc);
const nimble_pattern *nimble_ir_pattern_wildcard(nimble_arena *a, const nimble_src_loc_t *loc);
const nimble_pattern *nimble_ir_pattern_var(nimble_arena *a, const nimble_expr *var,
                                            const nimble_src_loc_t *loc);
const nimble_pattern *nimble_ir_pattern_ctor(nimble_arena *a, const nimble_constructor *ctor,
                                             size_t num_subs, const nimble_pattern *const *subs,
                                             const nimble_src_loc_t *loc);
const nimble_pattern *nimble_ir_pattern_tuple(nimble_arena *a, size_t num_subs,
                                              const nimble_pattern *const *subs,
                                              const nimble_src_loc_t *loc);

/* A module: type definitions and global functions, in definition order.
 * The module itself lives in the arena it was created with. */
typedef struct nimble_global_func {
  const char *name;
  const nimble_expr *func; /* NIMBLE_EXPR_FUNC */
} nimble_global_func_t;

typedef struct nimble_module nimble_module;

nimble_status_t nimble_module_create(nimble_arena *arena, nimble_module **out);
nimble_arena *nimble_module_arena(const nimble_module *m);

/* Creates a type definition with its constructors. Constructors are given
 * by name and field types; the typedef owns them. Fails when the name is
 * taken by another type definition or a constructor name is reused. */
nimble_status_t nimble_module_add_typedef(nimble_module *m, const char *name, size_t num_params,
                                          const nimble_type *const *params, size_t num_ctors,
                                          const char *const *ctor_names,
                                          const size_t *ctor_num_fields,
                                          const nimble_type *const *const *ctor_fields,
                                          const nimble_src_loc_t *loc,
                                          const nimble_typedef **out);
/* Adds a global function (a NIMBLE_EXPR_FUNC); fails on a duplicate name. */
nimble_status_t nimble_module_add_func(nimble_module *m, const char *name,
                                       const nimble_expr *func);
/* Drops the global functions added after the first n (a frontend undoing
 * a failed attempt); nothing when there are n or fewer. */
void nimble_module_truncate_funcs(nimble_module *m, size_t n);
/* Replaces the body of an existing global (passes rebuild functions). */
nimble_status_t nimble_module_replace_func(nimble_module *m, const char *name,
                                           const nimble_expr *func);

/* Ids for type and dim variables: each call gives a new one. Frontends
 * take their variables' ids from here so that inference can make fresh ones
 * above nimble_module_next_var_id(). */
uint32_t nimble_module_fresh_var_id(nimble_module *m);
uint32_t nimble_module_next_var_id(const nimble_module *m);

size_t nimble_module_num_typedefs(const nimble_module *m);
const nimble_typedef *nimble_module_typedef_at(const nimble_module *m, size_t i);
size_t nimble_module_num_funcs(const nimble_module *m);
const nimble_global_func_t *nimble_module_func_at(const nimble_module *m, size_t i);
/* Lookups by name; NULL when absent. */
const nimble_typedef *nimble_module_find_typedef(const nimble_module *m, const char *name);
const nimble_constructor *nimble_module_find_ctor(const nimble_module *m, const char *name);
const nimble_expr *nimble_module_find_func(const nimble_module *m, const char *name);

/* The text form of a whole module. *out is malloc'ed: caller frees. */
nimble_status_t nimble_ir_print_module(const nimble_module *m, char **out);
/* The text form of one expression, indented for a top-level position.
 * *out is malloc'ed: caller frees. */
nimble_status_t nimble_ir_print_expr(const nimble_expr *e, char **out);
/* A one-line summary of an expression for error messages, truncated to fit
 * `size` bytes (e.g. "add(%x, %y)", "@f(%t, ...)"). Returns buf. */
char *nimble_ir_expr_brief(const nimble_expr *e, char *buf, size_t size);

/* Structural equality up to renaming of bound variables (alpha
 * equivalence); type and dim variables compare by name, constants by bytes.
 * Source locations are ignored. */
bool nimble_ir_expr_equal(const nimble_expr *a, const nimble_expr *b);
bool nimble_ir_module_equal(const nimble_module *a, const nimble_module *b);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_IR_H */
