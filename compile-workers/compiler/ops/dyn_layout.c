/* Layout operators whose axes, repeats, pads or sizes come as a tensor
 * known only at run time (ONNX passes them as inputs): the rank follows
 * from the static length of that tensor, dims are exact where its values
 * are known and Any otherwise. All are data-dependent (they read input 1). */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

/* The static length of 1-D input i; an error when unknown. */
static nimble_status_t vec_len(const nimble_rel_call_t *call, size_t i, size_t *n) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  char buf[160];
  if (s->rank > 1 || !nimble_dtype_is_int(s->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must be a 1-D integer tensor, got %s", i,
                              SIG_STR(s, buf));
  nimble_dim_t d = s->rank == 0 ? nimble_dim_const(1) : nimble_dim_resolve(call->ctx, s->dims[0]);
  if (d.kind != NIMBLE_DIM_CONST)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu has unknown length in %s: the result's rank must be known",
                              i, SIG_STR(s, buf));
  if (d.value > 4 * NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "input %zu has %" PRId64 " values", i, d.value);
  *n = (size_t)d.value;
  return nimble_ok();
}

/* All values of input i when known. */
static bool vec_values(const nimble_rel_call_t *call, size_t i, size_t n, int64_t *v) {
  for (size_t k = 0; k < n; k++)
    if (!nimble_rel_value_int(call, i, k, &v[k])) return false;
  return true;
}

static nimble_status_t need_values(const nimble_rel_call_t *call) {
  if (nimble_dim_ctx_is_concrete(call->ctx))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s' needs the values of input 1", call->op->name);
  return nimble_ok();
}

static nimble_status_t rel_dyn_expand_dims(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  size_t rank = x->rank + n;
  if (rank > NIMBLE_MAX_RANK) return nimble_status_make(NIMBLE_OUT_OF_RANGE, "result rank %zu exceeds %d", rank, NIMBLE_MAX_RANK);
  nimble_tensor_sig_t r = *x;
  r.rank = rank;
  int64_t v[4 * NIMBLE_MAX_RANK];
  if (!vec_values(call, 1, n, v)) {
    NIMBLE_RETURN_IF_ERROR(need_values(call));
    for (size_t i = 0; i < rank; i++) r.dims[i] = nimble_dim_any();
    return nimble_rel_one(out, num_out, &r);
  }
  bool ins[NIMBLE_MAX_RANK] = {false};
  for (size_t k = 0; k < n; k++) {
    size_t a;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(v[k], rank, &a));
    if (ins[a]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "axis %" PRId64 " repeats", v[k]);
    ins[a] = true;
  }
  for (size_t i = 0, j = 0; i < rank; i++) r.dims[i] = ins[i] ? nimble_dim_const(1) : x->dims[j++];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_dyn_squeeze(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  if (n > x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu axes for rank %zu", n, x->rank);
  nimble_tensor_sig_t r = *x;
  r.rank = x->rank - n;
  int64_t v[4 * NIMBLE_MAX_RANK];
  if (!vec_values(call, 1, n, v)) {
    NIMBLE_RETURN_IF_ERROR(need_values(call));
    for (size_t i = 0; i < r.rank; i++) r.dims[i] = nimble_dim_any();
    return nimble_rel_one(out, num_out, &r);
  }
  bool drop[NIMBLE_MAX_RANK] = {false};
  for (size_t k = 0; k < n; k++) {
    size_t a;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(v[k], x->rank, &a));
    drop[a] = true;
  }
  r.rank = 0;
  for (size_t i = 0; i < x->rank; i++)
    if (!drop[i]) r.dims[r.rank++] = x->dims[i];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_dyn_tile(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  if (n != x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu repeats for rank %zu", n, x->rank);
  nimble_tensor_sig_t r = *x;
  int64_t v[4 * NIMBLE_MAX_RANK];
  bool known = vec_values(call, 1, n, v);
  if (!known) NIMBLE_RETURN_IF_ERROR(need_values(call));
  for (size_t i = 0; i < x->rank; i++) {
    if (!known) {
      r.dims[i] = nimble_dim_any();
      continue;
    }
    if (v[i] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative repeat %" PRId64, v[i]);
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, x->dims[i], nimble_dim_const(v[i]), &r.dims[i]));
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_dyn_pad(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  if (n != 2 * x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu pads for rank %zu", n, x->rank);
  if (call->num_inputs == 3) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 2));
  nimble_tensor_sig_t r = *x;
  int64_t v[4 * NIMBLE_MAX_RANK];
  bool known = vec_values(call, 1, n, v);
  if (!known) NIMBLE_RETURN_IF_ERROR(need_values(call));
  for (size_t i = 0; i < x->rank; i++) {
    nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[i]);
    r.dims[i] = nimble_dim_any();
    if (!known) continue;
    if (v[i] == 0 && v[i + x->rank] == 0) r.dims[i] = x->dims[i];
    else if (d.kind == NIMBLE_DIM_CONST) {
      int64_t e = d.value + v[i] + v[i + x->rank];
      if (e < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "pads crop axis %zu below 0", i);
      r.dims[i] = nimble_dim_const(e);
    }
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_dyn_split(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n, axis;
  NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  if (n == 0 || n > NIMBLE_MAX_OUTPUTS) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu parts", n);
  int64_t v[NIMBLE_MAX_OUTPUTS];
  bool known = n <= 4 * NIMBLE_MAX_RANK && vec_values(call, 1, n, v);
  if (!known) NIMBLE_RETURN_IF_ERROR(need_values(call));
  for (size_t k = 0; k < n; k++) {
    out[k] = *x;
    if (known && v[k] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative split size %" PRId64, v[k]);
    out[k].dims[axis] = known ? nimble_dim_const(v[k]) : nimble_dim_any();
  }
  *num_out = n;
  return nimble_ok();
}

/* dyn_sum(x, [axes]): keepdims keeps the rank (reduced dims 1); without it
 * the rank drops by the number of axes. Empty axes reduce everything, or
 * nothing with noop_with_empty_axes. */
static nimble_status_t rel_dyn_sum(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n = 0;
  if (call->num_inputs == 2) NIMBLE_RETURN_IF_ERROR(vec_len(call, 1, &n));
  bool keep = A_INT(call, "keepdims") != 0, noop = A_INT(call, "noop_with_empty_axes") != 0;
  nimble_tensor_sig_t r = *x;
  if (n == 0) {
    if (noop) return nimble_rel_one(out, num_out, x);
    if (!keep) r.rank = 0;
    for (size_t i = 0; i < r.rank; i++) r.dims[i] = nimble_dim_const(1);
    return nimble_rel_one(out, num_out, &r);
  }
  if (n > x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu axes for rank %zu", n, x->rank);
  int64_t v[4 * NIMBLE_MAX_RANK];
  if (!vec_values(call, 1, n, v)) {
    NIMBLE_RETURN_IF_ERROR(need_values(call));
    if (!keep) r.rank = x->rank - n;
    for (size_t i = 0; i < r.rank; i++) {
      nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[i]);
      /* A dim of 1 stays 1 whether reduced or not, when the rank is kept. */
      r.dims[i] = keep && d.kind == NIMBLE_DIM_CONST && d.value == 1 ? d : nimble_dim_any();
    }
    return nimble_rel_one(out, num_out, &r);
  }
  bool red[NIMBLE_MAX_RANK] = {false};
  for (size_t k = 0; k < n; k++) {
    size_t a;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(v[k], x->rank, &a));
    red[a] = true;
  }
  r.rank = 0;
  for (size_t i = 0; i < x->rank; i++) {
    if (!red[i]) r.dims[r.rank++] = x->dims[i];
    else if (keep) r.dims[r.rank++] = nimble_dim_const(1);
  }
  return nimble_rel_one(out, num_out, &r);
}

static const nimble_attr_spec_t kDynSplit[] = {ATTR_INT("axis", 0, "axis split")};
static const nimble_attr_spec_t kDynPad[] = {ATTR_STRING("mode", "constant", "constant, reflect or edge")};
static const nimble_attr_spec_t kDynSum[] = {
    ATTR_INT("keepdims", 1, "keep reduced axes as 1"),
    ATTR_INT("noop_with_empty_axes", 0, "empty axes: no reduction (1) or all axes (0)"),
};

#define DYN(nm, doc, lo, hi, attrs, rel, tuple) \
  {nm, doc, lo, hi, attrs, rel, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, tuple}

const nimble_op nimble_ops_dyn_layout[] = {
    DYN("dyn_expand_dims", "inserts axes of extent 1 at the axes given as a 1-D tensor", 2, 2, NO_ATTRS,
        rel_dyn_expand_dims, false),
    DYN("dyn_squeeze", "drops the axes given as a 1-D tensor", 2, 2, NO_ATTRS, rel_dyn_squeeze, false),
    DYN("dyn_tile", "repeats per axis given as a 1-D tensor", 2, 2, NO_ATTRS, rel_dyn_tile, false),
    DYN("dyn_pad", "pads (all begins, then all ends) given as a 1-D tensor, optional scalar value", 2, 3,
        ATTRS(kDynPad), rel_dyn_pad, false),
    DYN("dyn_split", "splits along axis into parts whose sizes are a 1-D tensor", 2, 2, ATTRS(kDynSplit),
        rel_dyn_split, true),
    DYN("dyn_sum", "sum over axes given as a 1-D tensor (ONNX ReduceSum 13)", 1, 2, ATTRS(kDynSum), rel_dyn_sum,
        false),
};
const size_t nimble_ops_dyn_layout_count = sizeof nimble_ops_dyn_layout / sizeof nimble_ops_dyn_layout[0];
