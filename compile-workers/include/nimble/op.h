/* Operator registry: what the compiler knows about each primitive operator.
 *
 * For every operator the registry gives
 *   - its inputs (a count range) and typed attributes with defaults,
 *   - its type relation: output tensor types from input tensor types, over
 *     dims that may be constants, symbolic variables or Any,
 *   - its shape function, computing concrete output shapes at run time, and
 *     the function's kind (data-independent, data-dependent, upper-bound),
 *   - its fusion pattern (element-wise ... opaque).
 *
 * One dimension algebra serves both the type relation and the shape
 * function: a relation is written once against nimble_dim_ctx, and the
 * data-independent shape function runs the same relation in concrete mode
 * (every dim a constant, every mismatch an error). Data-dependent and
 * upper-bound operators add a shape function that reads input values.
 *
 * Registry entries are static and live for the whole process; the pointers
 * returned here are never freed. docs/ir.md says how to add an operator.
 */
#ifndef NIMBLE_OP_H
#define NIMBLE_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/status.h"
#include "nimble/type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most dims an operator's relation and shape function handle. */
#define NIMBLE_MAX_RANK 8
/* The most outputs one operator produces (split). */
#define NIMBLE_MAX_OUTPUTS 64

/* ---- Attributes ---------------------------------------------------------- */

typedef enum nimble_attr_kind {
  NIMBLE_ATTR_INT = 0,
  NIMBLE_ATTR_FLOAT,
  NIMBLE_ATTR_INTS,
  NIMBLE_ATTR_STRING,
} nimble_attr_kind_t;

typedef struct nimble_attr_value {
  nimble_attr_kind_t kind;
  int64_t i;          /* INT */
  double f;           /* FLOAT */
  const char *s;      /* STRING (borrowed: static or arena) */
  size_t n;           /* INTS: count */
  const int64_t *ints;/* INTS (borrowed: static or arena) */
} nimble_attr_value_t;

/* One attribute an operator accepts. */
typedef struct nimble_attr_spec {
  const char *name;
  nimble_attr_kind_t kind;
  bool required;
  nimble_attr_value_t default_value; /* when not required */
  const char *doc;
} nimble_attr_spec_t;

/* The attributes of one call, one per spec of the operator, in spec order
 * (defaults filled in). Built with nimble_attrs_make. */
typedef struct nimble_attrs {
  size_t count;
  const nimble_attr_value_t *values;
} nimble_attrs_t;

/* An attribute given by name, as a frontend has it. */
typedef struct nimble_named_attr {
  const char *name;
  nimble_attr_value_t value;
} nimble_named_attr_t;

/* ---- Operators ----------------------------------------------------------- */

typedef enum nimble_shape_fn_kind {
  NIMBLE_SHAPE_DATA_INDEPENDENT = 0, /* needs only input shapes */
  NIMBLE_SHAPE_DATA_DEPENDENT,       /* needs input values */
  NIMBLE_SHAPE_UPPER_BOUND,          /* gives the largest possible shape */
} nimble_shape_fn_kind_t;

typedef enum nimble_fusion_pattern {
  NIMBLE_FUSE_ELEMWISE = 0,
  NIMBLE_FUSE_BROADCAST,
  NIMBLE_FUSE_INJECTIVE,
  NIMBLE_FUSE_REDUCTION,
  NIMBLE_FUSE_OUT_FUSABLE,
  NIMBLE_FUSE_OPAQUE,
} nimble_fusion_pattern_t;

const char *nimble_shape_fn_kind_name(nimble_shape_fn_kind_t kind);
const char *nimble_fusion_pattern_name(nimble_fusion_pattern_t p);

/* A tensor's signature as relations see it: dtype, rank and dims. */
typedef struct nimble_tensor_sig {
  nimble_dtype_t dtype;
  size_t rank;
  nimble_dim_t dims[NIMBLE_MAX_RANK];
} nimble_tensor_sig_t;

/* "Tensor[(3, ?), float32]" into buf (always terminated). Returns buf. */
char *nimble_tensor_sig_format(const nimble_tensor_sig_t *sig, char *buf, size_t size);

/* The context a relation runs in: type inference (dims may be variables or
 * Any; variables get bound in `subst`, see nimble/typing.h) or a shape
 * function (subst NULL: all dims constant). */
typedef struct nimble_subst nimble_subst;
typedef struct nimble_dim_ctx {
  nimble_subst *subst; /* borrowed; NULL in concrete mode */
} nimble_dim_ctx;

/* The constant value of input i when the relation can see one (inference
 * over a constant argument, or a shape function with values): element type,
 * count and data. NULL data when unknown. */
typedef struct nimble_input_value {
  nimble_dtype_t dtype;
  size_t num_elements;
  const void *data;
} nimble_input_value_t;

typedef struct nimble_op nimble_op;

/* The arguments of one relation call. */
typedef struct nimble_rel_call {
  const nimble_op *op;
  nimble_dim_ctx *ctx;
  const nimble_attrs_t *attrs;
  size_t num_inputs;
  const nimble_tensor_sig_t *inputs;
  const nimble_input_value_t *values; /* num_inputs entries; may be NULL */
} nimble_rel_call_t;

/* Writes the output signatures into out[0..*num_out) (capacity
 * NIMBLE_MAX_OUTPUTS) and sets *num_out. The status message names the
 * problem with both shapes ("cannot broadcast ... with ..."); the caller
 * adds the operator and place. */
typedef nimble_status_t (*nimble_op_relation_fn)(const nimble_rel_call_t *call,
                                                 nimble_tensor_sig_t *out, size_t *num_out);

/* A concrete shape. */
typedef struct nimble_shape {
  size_t rank;
  int64_t dims[NIMBLE_MAX_RANK];
} nimble_shape_t;

/* A shape function input: its dtype, shape and, for the inputs whose values
 * a data-dependent operator reads, its data (row-major; else NULL). */
typedef struct nimble_shape_input {
  nimble_dtype_t dtype;
  nimble_shape_t shape;
  const void *data;
} nimble_shape_input_t;

/* A shape function reading values (data-dependent and upper-bound kinds). */
typedef nimble_status_t (*nimble_op_shape_fn)(const nimble_op *op, const nimble_attrs_t *attrs,
                                              const nimble_shape_input_t *in, size_t num_in,
                                              nimble_shape_t *out, size_t *num_out);

struct nimble_op {
  const char *name;
  const char *doc;
  int min_inputs;
  int max_inputs; /* -1: variadic */
  size_t num_attrs;
  const nimble_attr_spec_t *attrs;
  nimble_op_relation_fn relation;
  nimble_shape_fn_kind_t shape_kind;
  /* NULL for data-independent operators: their shape function is the
   * relation run in concrete mode. */
  nimble_op_shape_fn shape_fn;
  /* Bit i set: the shape function reads input i's values. */
  uint32_t value_inputs;
  nimble_fusion_pattern_t pattern;
  /* The result is a tuple of the relation's outputs (split, topk) rather
   * than a single tensor. */
  bool tuple_output;
  /* Bit i set: input i may be a tensor of unknown rank (Tensor[*, dt]); the
   * relation then sees rank NIMBLE_RANK_UNKNOWN (and no dims) there. Every
   * other input of every operator has a known rank. */
  uint32_t unranked_inputs;
};

/* Looks an operator up by name; NULL when there is none. */
const nimble_op *nimble_op_find(const char *name);
const nimble_op *nimble_op_find_n(const char *name, size_t len);
/* All registered operators, in registration order. */
size_t nimble_op_count(void);
const nimble_op *nimble_op_at(size_t i);

/* Index of the attribute spec named `name` in op->attrs, or -1. */
int nimble_op_attr_index(const nimble_op *op, const char *name);

/* Builds a call's attributes: checks names and kinds (an INT is accepted
 * where a FLOAT is expected), fills defaults, fails on a missing required
 * one. The values array and copied lists live in `arena`. */
nimble_status_t nimble_attrs_make(nimble_arena *arena, const nimble_op *op,
                                  const nimble_named_attr_t *given, size_t num_given,
                                  nimble_attrs_t *out);
/* The attributes when none are given (all defaults); fails when one is
 * required. Uses no memory beyond the static defaults. */
nimble_status_t nimble_attrs_defaults(const nimble_op *op, nimble_attrs_t *out);
/* Accessors by name for relations and shape functions; the name must be a
 * spec of the op (asserted). */
int64_t nimble_attrs_int(const nimble_op *op, const nimble_attrs_t *attrs, const char *name);
double nimble_attrs_float(const nimble_op *op, const nimble_attrs_t *attrs, const char *name);
const char *nimble_attrs_string(const nimble_op *op, const nimble_attrs_t *attrs, const char *name);
const int64_t *nimble_attrs_ints(const nimble_op *op, const nimble_attrs_t *attrs,
                                 const char *name, size_t *n);
/* Whether the value equals the spec's default (printers omit those). */
bool nimble_attr_value_is_default(const nimble_attr_spec_t *spec, const nimble_attr_value_t *v);
bool nimble_attr_value_equal(const nimble_attr_value_t *a, const nimble_attr_value_t *b);

/* Computes concrete output shapes (the run-time shape function). Checks
 * the input count, that data-dependent inputs have data, and that dims are
 * non-negative. `attrs` NULL means defaults. */
nimble_status_t nimble_op_compute_shapes(const nimble_op *op, const nimble_attrs_t *attrs,
                                         const nimble_shape_input_t *in, size_t num_in,
                                         nimble_shape_t *out, size_t *num_out);

/* ---- The dimension algebra relations use -------------------------------- */

/* A dim with variables resolved through the context's bindings. */
nimble_dim_t nimble_dim_resolve(nimble_dim_ctx *ctx, nimble_dim_t d);
/* Unifies two dims (they must be equal): equal constants unify, a variable
 * binds, Any against anything stays Any. */
nimble_status_t nimble_dim_unify(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                                 nimble_dim_t *out);
/* NumPy broadcasting of two dims: 1 with d gives d, Any with d (d != 1)
 * gives d, Any with 1 gives Any; two different constants are an error. */
nimble_status_t nimble_dim_broadcast(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                                     nimble_dim_t *out);
/* Broadcasts two signatures' shapes (right-aligned) into out (dtype of a);
 * the error names both types. */
nimble_status_t nimble_sig_broadcast(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *a,
                                     const nimble_tensor_sig_t *b, nimble_tensor_sig_t *out);
/* Arithmetic on dims: the result is Any unless every operand resolves to a
 * constant. nimble_dim_mul checks overflow (error). */
nimble_status_t nimble_dim_mul(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                               nimble_dim_t *out);
nimble_dim_t nimble_dim_add(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b);
/* True in shape-function mode (every dim is a known constant). */
bool nimble_dim_ctx_is_concrete(const nimble_dim_ctx *ctx);

/* Normalizes an axis in [-rank, rank) to [0, rank); the error names the
 * axis and rank. */
nimble_status_t nimble_axis_normalize(int64_t axis, size_t rank, size_t *out);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_OP_H */
