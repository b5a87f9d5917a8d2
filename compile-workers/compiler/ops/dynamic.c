/* Operators whose output shapes depend on input values: dyn_reshape,
 * expand and dyn_strided_slice (shapes and bounds given as tensors), topk
 * (k may be an input), nonzero and unique (upper-bound: the result is
 * allocated at its largest and the kernel reports the real size). Fusion keeps them opaque: a data-dependent shape function needs
 * its input computed before the output can be allocated. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_status_t rel_dyn_reshape(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  nimble_dim_t dims[NIMBLE_MAX_RANK];
  int64_t raw[NIMBLE_MAX_RANK];
  size_t n;
  bool known;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_shape_input(call, 1, true, dims, raw, &n, &known));
  *num_out = 1;
  if (known) return nimble_reshape_infer(call->ctx, &call->inputs[0], raw, n, &out[0]);
  memset(&out[0], 0, sizeof out[0]);
  out[0].dtype = call->inputs[0].dtype;
  out[0].rank = n;
  for (size_t i = 0; i < n; i++) out[0].dims[i] = nimble_dim_any();
  return nimble_ok();
}

static nimble_status_t rel_expand(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  nimble_dim_t dims[NIMBLE_MAX_RANK];
  int64_t raw[NIMBLE_MAX_RANK];
  size_t n;
  bool known;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_shape_input(call, 1, false, dims, raw, &n, &known));
  *num_out = 1;
  return nimble_broadcast_to_shape(call->ctx, &call->inputs[0], dims, n, &out[0]);
}

static nimble_status_t numel(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x, nimble_dim_t *out) {
  nimble_dim_t p = nimble_dim_const(1);
  for (size_t i = 0; i < x->rank; i++) NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(ctx, p, x->dims[i], &p));
  *out = p;
  return nimble_ok();
}

static nimble_status_t rel_nonzero(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = NIMBLE_DTYPE_INT64;
  r.rank = 2;
  r.dims[0] = nimble_dim_const((int64_t)call->inputs[0].rank);
  /* The type says Any; the shape function gives the upper bound, every
   * element, and the kernel returns how many it found. */
  r.dims[1] = nimble_dim_any();
  if (nimble_dim_ctx_is_concrete(call->ctx))
    NIMBLE_RETURN_IF_ERROR(numel(call->ctx, &call->inputs[0], &r.dims[1]));
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_unique(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = call->inputs[0].dtype;
  r.rank = 1;
  r.dims[0] = nimble_dim_any();
  if (nimble_dim_ctx_is_concrete(call->ctx))
    NIMBLE_RETURN_IF_ERROR(numel(call->ctx, &call->inputs[0], &r.dims[0]));
  return nimble_rel_one(out, num_out, &r);
}

/* The values of a 1-D integer input, or false when they are not known. */
static bool int_values(const nimble_rel_call_t *call, size_t i, int64_t *vals, size_t *n) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  nimble_dim_t len = nimble_dim_resolve(call->ctx, s->rank == 1 ? s->dims[0] : nimble_dim_const(1));
  if (s->rank > 1 || len.kind != NIMBLE_DIM_CONST || len.value > NIMBLE_MAX_RANK) return false;
  *n = (size_t)len.value;
  for (size_t k = 0; k < *n; k++)
    if (!nimble_rel_value_int(call, i, k, &vals[k])) return false;
  return true;
}

/* ONNX Slice with starts, ends, steps and axes as tensors. */
static nimble_status_t rel_dyn_strided_slice(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                             size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  int64_t v[4][NIMBLE_MAX_RANK];
  size_t n[4] = {0, 0, 0, 0};
  bool known = true;
  for (size_t i = 1; i < call->num_inputs; i++) {
    char buf[160];
    if (call->inputs[i].rank > 1 || !nimble_dtype_is_int(call->inputs[i].dtype))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must be a 1-D integer tensor, got %s",
                                i, SIG_STR(&call->inputs[i], buf));
    known = known && int_values(call, i, v[i - 1], &n[i - 1]);
  }
  *num_out = 1;
  if (known)
    return nimble_slice_infer(call->ctx, x, v[0], n[0], v[1], n[1], v[2], n[2], v[3], n[3], &out[0]);
  /* Unknown bounds: every axis that may be sliced has an unknown extent. */
  out[0] = *x;
  size_t na = 0;
  bool axes_known = call->num_inputs == 5 && int_values(call, 4, v[3], &na);
  nimble_dim_t len = nimble_dim_resolve(call->ctx, call->inputs[1].rank == 1 ? call->inputs[1].dims[0]
                                                                            : nimble_dim_const(1));
  for (size_t a = 0; a < x->rank; a++) {
    bool sliced = true;
    if (axes_known) {
      sliced = false;
      for (size_t k = 0; k < na; k++) sliced = sliced || v[3][k] == (int64_t)a || v[3][k] + (int64_t)x->rank == (int64_t)a;
    } else if (call->num_inputs < 5 && len.kind == NIMBLE_DIM_CONST) {
      sliced = (int64_t)a < len.value;
    }
    if (sliced) out[0].dims[a] = nimble_dim_any();
  }
  return nimble_ok();
}

static nimble_status_t rel_topk(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t axis;
  char buf[160];
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  /* k is the attribute, or (ONNX TopK) the value of a second input. */
  int64_t k = A_INT(call, "k");
  bool k_known = true;
  if (call->num_inputs == 2) {
    if (call->inputs[1].rank > 1 || !nimble_dtype_is_int(call->inputs[1].dtype))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "k must be a 1-element integer tensor, got %s",
                                SIG_STR(&call->inputs[1], buf));
    k_known = nimble_rel_value_int(call, 1, 0, &k);
  } else if (k < 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "give k as an attribute (>= 0) or an input");
  }
  if (k_known && k < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "k must be >= 0, got %" PRId64, k);
  nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[axis]);
  if (k_known && d.kind == NIMBLE_DIM_CONST && k > d.value)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "k = %" PRId64 " exceeds axis %zu of %s", k,
                              axis, SIG_STR(x, buf));
  out[0] = *x;
  out[0].dims[axis] = k_known ? nimble_dim_const(k) : nimble_dim_any();
  out[1] = out[0];
  out[1].dtype = NIMBLE_DTYPE_INT64;
  *num_out = 2;
  return nimble_ok();
}

static const nimble_attr_spec_t kTopkAttrs[] = {
    ATTR_INT("k", -1, "how many elements to keep; -1: from the second input"),
    ATTR_INT("axis", -1, "axis searched"),
    ATTR_INT("largest", 1, "largest (1) or smallest (0)"),
    ATTR_INT("sorted", 1, "results in order"),
};

const nimble_op nimble_ops_dynamic[] = {
    {"dyn_reshape", "reshape to a shape given as a 1-D tensor (0 copies, -1 infers)", 2, 2,
     NO_ATTRS, rel_dyn_reshape, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false},
    {"expand", "broadcasts with a shape given as a 1-D tensor (ONNX Expand)", 2, 2, NO_ATTRS,
     rel_expand, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false},
    {"nonzero", "indices of non-zero elements, int64 [rank, count]", 1, 1, NO_ATTRS, rel_nonzero,
     NIMBLE_SHAPE_UPPER_BOUND, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"unique", "distinct elements, flattened", 1, 1, NO_ATTRS, rel_unique,
     NIMBLE_SHAPE_UPPER_BOUND, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"topk", "the k largest (or smallest) along axis: (values, int64 indices); k an attribute or input 1",
     1, 2, ATTRS(kTopkAttrs), rel_topk, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, true},
    {"dyn_strided_slice", "ONNX Slice: begin, end, [strides, [axes]] as 1-D tensors", 3, 5, NO_ATTRS,
     rel_dyn_strided_slice, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 0x1eu, NIMBLE_FUSE_OPAQUE, false},
};
const size_t nimble_ops_dynamic_count = sizeof nimble_ops_dynamic / sizeof nimble_ops_dynamic[0];
