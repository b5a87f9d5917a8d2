/* Types of the IR: tensors with dynamic dims, tensors of unknown rank,
 * tuples, functions, algebraic data types (ADTs) and type variables.
 *
 * A tensor dimension is a constant, a symbolic variable (`n`) or Any (`?`,
 * unknown until run time). Symbolic variables and type variables carry a
 * name (what the user wrote) and an id (what makes them distinct: the text
 * parser gives each definition its own ids, type inference makes fresh ones
 * when it instantiates a polymorphic signature).
 *
 * A tensor whose rank is not known before run time (the join of an `if`
 * whose branches give different ranks) has a kind of its own,
 * NIMBLE_TYPE_UNRANKED_TENSOR, printed `Tensor[*, float32]` (MLIR keeps its
 * unranked tensor type apart from the ranked one for the same reason): code
 * written for ranked tensors tests `kind == NIMBLE_TYPE_TENSOR` and so never
 * reads the rank and dims of a tensor that has none. docs/ir.md says where
 * such values may go.
 *
 * Types are immutable and allocated from an arena (nimble/arena.h). All
 * pointers in and out of these functions are borrowed from, or owned by, the
 * arena passed in. Constructors return NULL only when memory runs out.
 */
#ifndef NIMBLE_TYPE_H
#define NIMBLE_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/arena.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The names are those of the text form ("float32", "bool"). */
typedef enum nimble_dtype {
  NIMBLE_DTYPE_FLOAT32 = 0,
  NIMBLE_DTYPE_FLOAT64,
  NIMBLE_DTYPE_FLOAT16,
  NIMBLE_DTYPE_INT8,
  NIMBLE_DTYPE_INT16,
  NIMBLE_DTYPE_INT32,
  NIMBLE_DTYPE_INT64,
  NIMBLE_DTYPE_UINT8,
  NIMBLE_DTYPE_BOOL,
  NIMBLE_DTYPE_UINT16,
  NIMBLE_DTYPE_UINT32,
  NIMBLE_DTYPE_UINT64,
  NIMBLE_DTYPE_BFLOAT16, /* the upper half of a float32 (Google Brain's format) */
  NIMBLE_DTYPE_COUNT_
} nimble_dtype_t;

/* "float32", ...; "?" for an out-of-range value. */
const char *nimble_dtype_name(nimble_dtype_t dtype);
/* Parses a dtype name; false when it is none. */
bool nimble_dtype_from_name(const char *name, size_t len, nimble_dtype_t *out);
/* Bytes per element. */
size_t nimble_dtype_size(nimble_dtype_t dtype);
bool nimble_dtype_is_float(nimble_dtype_t dtype);
bool nimble_dtype_is_int(nimble_dtype_t dtype); /* signed or unsigned, not bool */
bool nimble_dtype_is_unsigned(nimble_dtype_t dtype); /* uint8 ... uint64, not bool */

/* Half-precision conversions (IEEE binary16 and bfloat16 bit patterns).
 * Narrowing rounds to nearest, ties to even, as NumPy and ONNX Runtime do;
 * overflow gives infinity, NaN stays NaN (quiet). */
float nimble_f16_to_f32(uint16_t h);
uint16_t nimble_f32_to_f16(float f);
/* double -> binary16 rounded once (not through float, which could round twice). */
uint16_t nimble_f64_to_f16(double d);
float nimble_bf16_to_f32(uint16_t h);
uint16_t nimble_f32_to_bf16(float f);

/* Element k of a buffer of `dtype` as a double (uint64 above 2^53 and
 * int64 beyond +-2^53 are rounded), and as an int64 (floats truncated
 * toward zero, NaN and out-of-range ones saturate; uint64 above INT64_MAX
 * gives INT64_MAX). Bool is 0 or 1. */
double nimble_dtype_get_double(nimble_dtype_t dtype, const void *data, size_t k);
int64_t nimble_dtype_get_int(nimble_dtype_t dtype, const void *data, size_t k);

/* One dimension. `name` (borrowed, arena-owned) is set for variables only. */
typedef enum nimble_dim_kind {
  NIMBLE_DIM_CONST = 0,
  NIMBLE_DIM_VAR,
  NIMBLE_DIM_ANY,
} nimble_dim_kind_t;

typedef struct nimble_dim {
  nimble_dim_kind_t kind;
  int64_t value;    /* NIMBLE_DIM_CONST: the extent, >= 0 */
  uint32_t var_id;  /* NIMBLE_DIM_VAR: identity */
  const char *name; /* NIMBLE_DIM_VAR: the name written in the source */
} nimble_dim_t;

static inline nimble_dim_t nimble_dim_const(int64_t v) {
  nimble_dim_t d = {NIMBLE_DIM_CONST, v, 0, NULL};
  return d;
}
static inline nimble_dim_t nimble_dim_any(void) {
  nimble_dim_t d = {NIMBLE_DIM_ANY, 0, 0, NULL};
  return d;
}
static inline nimble_dim_t nimble_dim_var(uint32_t id, const char *name) {
  nimble_dim_t d = {NIMBLE_DIM_VAR, 0, id, name};
  return d;
}
/* Same kind and same value / variable id. */
bool nimble_dim_same(nimble_dim_t a, nimble_dim_t b);

typedef enum nimble_type_kind {
  NIMBLE_TYPE_TENSOR = 0,
  NIMBLE_TYPE_TUPLE,
  NIMBLE_TYPE_FUNC,
  NIMBLE_TYPE_ADT,
  NIMBLE_TYPE_VAR,
  /* A tensor of known dtype and unknown rank: u.tensor.dtype only (rank 0,
   * dims NULL, both meaningless). */
  NIMBLE_TYPE_UNRANKED_TENSOR,
} nimble_type_kind_t;

/* The rank of a nimble_tensor_sig_t (nimble/op.h) describing a tensor of
 * unknown rank; only relations of operators that declare such inputs
 * (nimble_op.unranked_inputs) ever see it. */
#define NIMBLE_RANK_UNKNOWN ((size_t)-1)

typedef struct nimble_type nimble_type;

struct nimble_type {
  nimble_type_kind_t kind;
  union {
    struct {
      nimble_dtype_t dtype;
      size_t rank;
      const nimble_dim_t *dims; /* rank entries */
    } tensor;
    struct {
      size_t count;
      const nimble_type *const *fields;
    } tuple;
    struct {
      /* Type parameters (NIMBLE_TYPE_VAR types) bound by this function type:
       * each use instantiates them afresh. */
      size_t num_type_params;
      const nimble_type *const *type_params;
      size_t num_params;
      const nimble_type *const *params;
      const nimble_type *ret;
    } func;
    struct {
      const char *name; /* the type definition's name, e.g. "List" */
      size_t num_args;
      const nimble_type *const *args;
    } adt;
    struct {
      const char *name;
      uint32_t id;
    } var;
  } u;
};

/* Constructors; the arrays are copied into the arena. */
const nimble_type *nimble_type_tensor(nimble_arena *arena, nimble_dtype_t dtype, size_t rank,
                                      const nimble_dim_t *dims);
const nimble_type *nimble_type_scalar(nimble_arena *arena, nimble_dtype_t dtype);
/* Tensor[*, dtype]: a tensor of unknown rank. */
const nimble_type *nimble_type_unranked_tensor(nimble_arena *arena, nimble_dtype_t dtype);
/* Whether t is a tensor, ranked or not. */
bool nimble_type_is_any_tensor(const nimble_type *t);
const nimble_type *nimble_type_tuple(nimble_arena *arena, size_t count,
                                     const nimble_type *const *fields);
const nimble_type *nimble_type_func(nimble_arena *arena, size_t num_type_params,
                                    const nimble_type *const *type_params, size_t num_params,
                                    const nimble_type *const *params, const nimble_type *ret);
const nimble_type *nimble_type_adt(nimble_arena *arena, const char *name, size_t num_args,
                                   const nimble_type *const *args);
const nimble_type *nimble_type_var(nimble_arena *arena, uint32_t id, const char *name);

/* Structural equality: dims and type variables compare by id, except that
 * type parameters bound by two function types are matched positionally. */
bool nimble_type_equal(const nimble_type *a, const nimble_type *b);

/* Appends the text form (e.g. "Tensor[(?, 128), float32]") to a buffer of
 * `size` bytes, always NUL-terminated, truncated with "..." if needed.
 * Returns buf. */
char *nimble_type_format(const nimble_type *type, char *buf, size_t size);

/* The text form as an arena string (NULL when out of memory). */
const char *nimble_type_to_string(nimble_arena *arena, const nimble_type *type);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TYPE_H */
