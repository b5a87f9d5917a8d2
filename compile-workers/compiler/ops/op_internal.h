/* Helpers for writing operators (private to the compiler). Each family file
 * (elementwise.c, nn.c, ...) defines a table of nimble_op and registers it
 * in registry.c; docs/ir.md walks through adding one. */
#ifndef NIMBLE_COMPILER_OP_INTERNAL_H
#define NIMBLE_COMPILER_OP_INTERNAL_H

#include <stdio.h>

#include "nimble/op.h"

/* The tables of the families, defined in their files. */
extern const nimble_op nimble_ops_elementwise[];
extern const size_t nimble_ops_elementwise_count;
extern const nimble_op nimble_ops_nn[];
extern const size_t nimble_ops_nn_count;
extern const nimble_op nimble_ops_reduce[];
extern const size_t nimble_ops_reduce_count;
extern const nimble_op nimble_ops_transform[];
extern const size_t nimble_ops_transform_count;
extern const nimble_op nimble_ops_create[];
extern const size_t nimble_ops_create_count;
extern const nimble_op nimble_ops_dynamic[];
extern const size_t nimble_ops_dynamic_count;
extern const nimble_op nimble_ops_memory[];
extern const size_t nimble_ops_memory_count;

/* Added for the ONNX importer (indexing.c, vision.c, dyn_layout.c, math_extra.c, random.c). */
extern const nimble_op nimble_ops_indexing[];
extern const size_t nimble_ops_indexing_count;
extern const nimble_op nimble_ops_vision[];
extern const size_t nimble_ops_vision_count;
extern const nimble_op nimble_ops_dyn_layout[];
extern const size_t nimble_ops_dyn_layout_count;
extern const nimble_op nimble_ops_math_extra[];
extern const size_t nimble_ops_math_extra_count;
extern const nimble_op nimble_ops_random[];
extern const size_t nimble_ops_random_count;
/* recurrent.c: lstm_scan, gru_scan and rnn_scan, a whole LSTM, GRU or RNN
 * recurrence (the importer's fast path). */
extern const nimble_op nimble_ops_recurrent[];
extern const size_t nimble_ops_recurrent_count;

/* Attribute spec initializers. */
#define ATTR_INT(n, def, d) {n, NIMBLE_ATTR_INT, false, {NIMBLE_ATTR_INT, (def), 0, NULL, 0, NULL}, d}
#define ATTR_FLOAT(n, def, d) {n, NIMBLE_ATTR_FLOAT, false, {NIMBLE_ATTR_FLOAT, 0, (def), NULL, 0, NULL}, d}
#define ATTR_STRING(n, def, d) {n, NIMBLE_ATTR_STRING, false, {NIMBLE_ATTR_STRING, 0, 0, (def), 0, NULL}, d}
/* An INTS attribute whose default is the empty list (each op says what
 * empty means: all axes, reversed axes, ...). */
#define ATTR_INTS(n, d) {n, NIMBLE_ATTR_INTS, false, {NIMBLE_ATTR_INTS, 0, 0, NULL, 0, NULL}, d}
#define ATTR_INTS_REQUIRED(n, d) {n, NIMBLE_ATTR_INTS, true, {NIMBLE_ATTR_INTS, 0, 0, NULL, 0, NULL}, d}
#define ATTR_INT_REQUIRED(n, d) {n, NIMBLE_ATTR_INT, true, {NIMBLE_ATTR_INT, 0, 0, NULL, 0, NULL}, d}
#define ATTRS(arr) (sizeof(arr) / sizeof((arr)[0])), (arr)
#define NO_ATTRS 0, NULL

/* Accessors in relations. */
#define A_INT(call, name) nimble_attrs_int((call)->op, (call)->attrs, (name))
#define A_FLOAT(call, name) nimble_attrs_float((call)->op, (call)->attrs, (name))
#define A_STRING(call, name) nimble_attrs_string((call)->op, (call)->attrs, (name))
#define A_INTS(call, name, np) nimble_attrs_ints((call)->op, (call)->attrs, (name), (np))

/* "Tensor[...]" of input i into a local buffer, for messages. */
#define SIG_STR(sig, buf) nimble_tensor_sig_format((sig), (buf), sizeof(buf))

/* Unifies dims a and b of operands x and y that must agree (inner dims of
 * a product, channels); the error names `what` and both types. */
nimble_status_t nimble_rel_unify_named(const nimble_rel_call_t *call, nimble_dim_t a, nimble_dim_t b,
                                       const char *what, const nimble_tensor_sig_t *x, const nimble_tensor_sig_t *y,
                                       nimble_dim_t *out);
/* Fails unless input i has a rank in [lo, hi]. */
nimble_status_t nimble_rel_expect_rank(const nimble_rel_call_t *call, size_t i, size_t lo,
                                       size_t hi);
/* Fails unless input i has a float / an integer dtype. */
nimble_status_t nimble_rel_expect_dtype_float(const nimble_rel_call_t *call, size_t i);
nimble_status_t nimble_rel_expect_dtype_int(const nimble_rel_call_t *call, size_t i);
/* Fails unless inputs i and j have the same dtype. */
nimble_status_t nimble_rel_expect_same_dtype(const nimble_rel_call_t *call, size_t i, size_t j);
/* Element k of input i's value as an integer; false when no value is known
 * or the dtype is not an integer. */
bool nimble_rel_value_int(const nimble_rel_call_t *call, size_t i, size_t k, int64_t *out);
/* Element k of input i's value as a double; false when unknown. */
bool nimble_rel_value_double(const nimble_rel_call_t *call, size_t i, size_t k, double *out);
/* A one-output result. */
static inline nimble_status_t nimble_rel_one(nimble_tensor_sig_t *out, size_t *num_out,
                                             const nimble_tensor_sig_t *sig) {
  out[0] = *sig;
  *num_out = 1;
  return nimble_ok();
}
/* Parses a dtype attribute ("float32"); the error names the op. */
nimble_status_t nimble_rel_dtype_attr(const nimble_rel_call_t *call, const char *attr,
                                      nimble_dtype_t *out);

/* Shared by reshape and dyn_reshape (transform.c). */
nimble_status_t nimble_reshape_infer(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                     const int64_t *spec, size_t n, nimble_tensor_sig_t *out);
/* Shared by broadcast_to and expand (transform.c). */
nimble_status_t nimble_broadcast_to_shape(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                          const nimble_dim_t *dims, size_t n,
                                          nimble_tensor_sig_t *out);
/* Slicing shared by strided_slice and dyn_strided_slice (transform.c). */
nimble_status_t nimble_slice_infer(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                   const int64_t *begin, size_t nb, const int64_t *end, size_t ne,
                                   const int64_t *strides, size_t ns, const int64_t *axes, size_t na,
                                   nimble_tensor_sig_t *out);
/* Elements of begin:end:step on an axis of `dim` (clamped, NumPy rules). */
int64_t nimble_slice_count(int64_t dim, int64_t begin, int64_t end, int64_t step);
/* The dims a 1-D integer "shape" input describes: from its value when
 * known, else Any dims of the input's static length (an unknown length is
 * an error: the rank must be known). */
nimble_status_t nimble_rel_shape_input(const nimble_rel_call_t *call, size_t i, bool allow_neg,
                                       nimble_dim_t *dims, int64_t *raw, size_t *n, bool *known);

#endif
