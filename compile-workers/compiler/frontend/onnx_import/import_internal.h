/* Private to the ONNX importer: the import context, values as the importer
 * tracks them, and the helpers the operator converters share.
 *
 * Each ONNX value maps to an IR expression (a let-bound variable or an
 * inline constant, inline so that relations can read constant arguments)
 * plus what the importer knows statically: its tensor signature (computed
 * with the operators' own type relations while importing) and, for small
 * integer tensors, its elements as dims, so that shape arithmetic (Shape,
 * Gather, Concat, ...) folds and symbolic dims survive a Reshape. */
#ifndef NIMBLE_ONNX_IMPORT_INTERNAL_H
#define NIMBLE_ONNX_IMPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nimble/ir.h"
#include "nimble/onnx_import.h"
#include "nimble/onnx_model.h"
#include "nimble/op.h"
#include "nimble/typing.h"

/* The most elements of an integer tensor the importer tracks as dims. */
#define IMP_MAX_KNOWN 64

/* What is known of a tensor whose rank is known only at run time (an If
 * whose branches give different ranks): the ranks it may have and, for
 * each, the signature it then has. */
typedef struct imp_ranks {
  nimble_dtype_t dtype;
  uint32_t mask; /* bit r: it may have rank r (r <= NIMBLE_MAX_RANK) */
  nimble_tensor_sig_t sig[NIMBLE_MAX_RANK + 1];
} imp_ranks;

typedef struct imp_val {
  const nimble_expr *expr;
  bool has_sig;
  nimble_tensor_sig_t sig;
  /* Elements of a small integer tensor (rank 0 or 1), each a constant, a
   * symbolic dim or Any; known == NULL when not tracked. */
  size_t nknown;
  const nimble_dim_t *known;
  /* Non-NULL for a tensor of unknown rank (has_sig is then false, so a
   * converter that is handed one by mistake refuses it). Converters never
   * see such values: imp_convert_node refines them first. */
  const imp_ranks *ranks;
} imp_val;

typedef struct imp_scope imp_scope;

/* A let chain under construction. */
typedef struct imp_chain {
  size_t n, cap;
  const nimble_expr **vars;
  const nimble_expr **values;
} imp_chain;

typedef struct imp_ctx {
  nimble_arena *arena;
  nimble_module *module;
  const nimble_onnx_model *model;
  nimble_subst *subst;
  nimble_dim_ctx dctx;
  imp_scope *scope;  /* innermost */
  imp_chain *chain;  /* where bindings go */
  const nimble_onnx_graph *graph; /* graph being imported */
  const nimble_onnx_node *node;   /* node being converted */
  /* dim_param name -> dim variable (shared across the model). */
  size_t n_params, cap_params;
  const char **param_names;
  uint32_t *param_ids;
  unsigned counter; /* for names of generated globals */
  imp_scope *names; /* variable names in use: every binding gets its own */
} imp_ctx;

typedef nimble_status_t (*imp_convert_fn)(imp_ctx *c, const nimble_onnx_node *n);

typedef struct imp_converter {
  const char *op_type;
  imp_convert_fn fn;
} imp_converter;

/* Converter tables (import_ops_*.c); import.c searches them in order. */
extern const imp_converter imp_converters_elementwise[]; /* import_ops_elementwise.c */
extern const size_t imp_converters_elementwise_count;
extern const imp_converter imp_converters_nn[]; /* import_ops_nn.c */
extern const size_t imp_converters_nn_count;
extern const imp_converter imp_converters_reduce[]; /* import_ops_reduce.c */
extern const size_t imp_converters_reduce_count;
extern const imp_converter imp_converters_signal[]; /* import_ops_signal.c */
extern const size_t imp_converters_signal_count;
extern const imp_converter imp_converters_linalg[]; /* import_ops_linalg.c */
extern const size_t imp_converters_linalg_count;
extern const imp_converter imp_converters_random[]; /* import_ops_random.c */
extern const size_t imp_converters_random_count;
extern const imp_converter imp_converters_shape[];
extern const size_t imp_converters_shape_count;
extern const imp_converter imp_converters_control[];
extern const size_t imp_converters_control_count;
extern const imp_converter imp_converters_rnn[];
extern const size_t imp_converters_rnn_count;
extern const imp_converter imp_converters_index[];
extern const size_t imp_converters_index_count;
extern const imp_converter imp_converters_image[];
extern const size_t imp_converters_image_count;
extern const imp_converter imp_converters_quant[];
extern const size_t imp_converters_quant_count;

/* ---- helpers (import.c) ---- */
/* An error naming nothing more (the driver prefixes the node). */
nimble_status_t imp_err(nimble_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

nimble_status_t imp_dtype(int onnx_dtype, nimble_dtype_t *out);

/* Input i of the node; NULL when omitted ("" or beyond n_inputs). */
nimble_status_t imp_input(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val **out);
/* Like imp_input, but fails when the input is omitted or has no known
 * signature. */
nimble_status_t imp_input_req(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val **out);
/* Defines output i of the node (ignored when the output is omitted). */
nimble_status_t imp_define(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val *v);
/* Looks a value up by name through the scopes (initializers become
 * constants on first use). NOT_FOUND names the tensor. */
nimble_status_t imp_lookup(imp_ctx *c, const char *name, imp_val **out);

/* A new value for an expression with a known signature (sig may be NULL). */
imp_val *imp_val_new(imp_ctx *c, const nimble_expr *e, const nimble_tensor_sig_t *sig);
/* A constant value (data copied). Tracks small integer tensors as dims. */
nimble_status_t imp_const(imp_ctx *c, nimble_dtype_t dtype, size_t rank, const int64_t *dims,
                          const void *data, imp_val **out);
nimble_status_t imp_const_i64(imp_ctx *c, size_t n, const int64_t *v, bool scalar, imp_val **out);
/* A scalar constant of `dtype` with value v. */
nimble_status_t imp_scalar(imp_ctx *c, nimble_dtype_t dtype, double v, imp_val **out);

/* Binds `value` to a fresh variable in the current chain; the new value
 * carries `sig` (may be NULL). */
nimble_status_t imp_bind(imp_ctx *c, const char *hint, const nimble_expr *value,
                         const nimble_tensor_sig_t *sig, imp_val **out);

/* Calls operator `opname` on args, binds the result and tracks its
 * signature with the operator's relation. For tuple-output operators, use
 * imp_emit_multi. */
nimble_status_t imp_emit(imp_ctx *c, const char *opname, size_t nargs, imp_val *const *args,
                         const nimble_named_attr_t *attrs, size_t nattrs, imp_val **out);
nimble_status_t imp_emit_multi(imp_ctx *c, const char *opname, size_t nargs, imp_val *const *args,
                               const nimble_named_attr_t *attrs, size_t nattrs, imp_val **outs,
                               size_t *nout);

/* Attribute builders. */
nimble_named_attr_t imp_attr_int(const char *name, int64_t v);
nimble_named_attr_t imp_attr_float(const char *name, double v);
nimble_named_attr_t imp_attr_ints(const char *name, const int64_t *v, size_t n);
nimble_named_attr_t imp_attr_str(const char *name, const char *s);

/* Whether every element of v->known is a constant; copies them to out. */
bool imp_known_ints(const imp_val *v, int64_t *out, size_t cap, size_t *n);
/* Reads a constant integer input (from an inline constant or tracked
 * elements); false when not known. */
bool imp_const_ints(const imp_val *v, int64_t *out, size_t cap, size_t *n);
/* Reads a constant float scalar. */
bool imp_const_double(const imp_val *v, double *out);

nimble_dim_t imp_resolve(imp_ctx *c, nimble_dim_t d);

/* ---- values of unknown rank (import_ranks.c) ---- */

/* Runs converter cv on node n. An input of unknown rank is first refined
 * to each rank it may have (one conversion per rank, chosen at run time by
 * the value's rank; a rank the converter refuses is left to a run-time
 * check that names the node). */
nimble_status_t imp_convert_node(imp_ctx *c, const nimble_onnx_node *n, const imp_converter *cv);
/* x (of unknown rank) as a tensor of rank r, checked at run time:
 * reshape_tensor(x, check_rank(shape_of(x), rank=r, what=what)). */
nimble_status_t imp_refine_rank(imp_ctx *c, imp_val *x, size_t r, const char *what, imp_val **out);
/* What is known of a value that is either a or b (If outputs): sets
 * out->has_sig/sig (same rank: dims that differ are Any) or out->ranks. */
nimble_status_t imp_join_vals(imp_ctx *c, const imp_val *a, const imp_val *b, imp_val *out);
/* What is known of v as a set of ranks (one bit for a ranked value; the
 * mask is 0 for a value of no known type). */
void imp_val_ranks(const imp_val *v, imp_ranks *out);
/* Whether v's static type is known (a signature, or ranks). */
static inline bool imp_val_typed(const imp_val *v) { return v->has_sig || v->ranks; }
/* The IR type of a value's static knowledge (Tensor[*, dt] for ranks). */
const nimble_type *imp_val_type(imp_ctx *c, const imp_val *v, bool any_for_vars);

/* Imports the nodes of graph g into the current chain and scope. */
nimble_status_t imp_graph_nodes(imp_ctx *c, const nimble_onnx_graph *g);
/* Pushes / pops a scope (for subgraphs). */
nimble_status_t imp_scope_push(imp_ctx *c);
void imp_scope_pop(imp_ctx *c);
/* Binds name -> value in the innermost scope. */
nimble_status_t imp_scope_set(imp_ctx *c, const char *name, imp_val *v);
/* Folds a chain around body into nested lets. */
const nimble_expr *imp_chain_close(imp_ctx *c, const imp_chain *ch, const nimble_expr *body);

/* A tensor type from a signature with non-constant dims replaced by fresh
 * symbolic dims (same variable for equal dims, per call) or Any. */
const nimble_type *imp_sig_type(imp_ctx *c, const nimble_tensor_sig_t *sig, bool any_for_vars);

/* Converts a value's dims to a reshape to scalar when it has one element
 * (conditions of If/Loop). */
nimble_status_t imp_to_scalar(imp_ctx *c, imp_val *v, imp_val **out);

/* Parses a .nir definition text into the module (used by generated step
 * functions). */
nimble_status_t imp_add_nir_func(imp_ctx *c, const char *name, const char *text);

/* A variable name based on `hint` that no other variable of the module
 * has (the text form resolves names, so they must not collide). */
const char *imp_unique_name(imp_ctx *c, const char *hint);

/* Conv's attributes of node n applied to x, w and optional b. */
nimble_status_t imp_conv(imp_ctx *c, const nimble_onnx_node *n, imp_val *x, imp_val *w, imp_val *b, imp_val **out);

/* A unique global name with the prefix. */
const char *imp_fresh_global(imp_ctx *c, const char *prefix);

/* Small helpers shared by the converter files. */
static inline nimble_status_t imp_e1(imp_ctx *c, const char *op, imp_val *a, imp_val **out) {
  return imp_emit(c, op, 1, &a, NULL, 0, out);
}
static inline nimble_status_t imp_e2(imp_ctx *c, const char *op, imp_val *a, imp_val *b, imp_val **out) {
  imp_val *args[2] = {a, b};
  return imp_emit(c, op, 2, args, NULL, 0, out);
}
/* A scalar of x's dtype. */
static inline nimble_status_t imp_k_like(imp_ctx *c, imp_val *x, double v, imp_val **out) {
  return imp_scalar(c, x->sig.dtype, v, out);
}
static inline nimble_status_t imp_get_float(const nimble_onnx_node *n, const char *name, float dflt, double *out) {
  float f;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_float(n, name, dflt, &f));
  *out = f;
  return nimble_ok();
}
/* Input 0, which must be a float tensor. */
static inline nimble_status_t imp_unary_in(imp_ctx *c, const nimble_onnx_node *n, imp_val **x) {
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, x));
  if (!nimble_dtype_is_float((*x)->sig.dtype)) return imp_err(NIMBLE_INVALID_ARGUMENT, "input must be a float tensor");
  return nimble_ok();
}
/* op on the node's first nin inputs, defining output 0. */
static inline nimble_status_t imp_simple(imp_ctx *c, const nimble_onnx_node *n, const char *op, size_t nin,
                                         const nimble_named_attr_t *at, size_t nat) {
  imp_val *a[8], *r;
  if (nin > 8) return imp_err(NIMBLE_INTERNAL, "too many inputs");
  for (size_t i = 0; i < nin; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, nin, a, at, nat, &r));
  return imp_define(c, n, 0, r);
}

#endif
