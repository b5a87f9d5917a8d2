/* Indexing and masking operators added for the ONNX importer:
 * gather_elements, scatter_elements, scatter_nd (ONNX GatherElements,
 * ScatterElements, ScatterND), one_hot, trilu, cumsum, hardmax,
 * reverse_sequence, unique_all, eye_like. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_status_t rel_gather_elements(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                           size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *idx = &call->inputs[1];
  char a[160], b[160];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  if (x->rank != idx->rank || x->rank == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "data %s and indices %s must have the same rank >= 1",
                              SIG_STR(x, a), SIG_STR(idx, b));
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  nimble_tensor_sig_t r = *idx;
  r.dtype = x->dtype;
  return nimble_rel_one(out, num_out, &r);
}

/* data, indices, updates: indices and updates have one shape, the result
 * is data's. */
static nimble_status_t rel_scatter_elements(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                            size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *idx = &call->inputs[1], *upd = &call->inputs[2];
  char a[160], b[160];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 2));
  if (idx->rank != x->rank || upd->rank != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "indices %s and updates %s must have data's rank %zu",
                              SIG_STR(idx, a), SIG_STR(upd, b), x->rank);
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  for (size_t i = 0; i < idx->rank; i++) {
    nimble_dim_t d;
    NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, idx->dims[i], upd->dims[i], &d));
  }
  return nimble_rel_one(out, num_out, x);
}

static nimble_status_t rel_scatter_nd(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                      size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *idx = &call->inputs[1], *upd = &call->inputs[2];
  char a[160];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 2));
  if (idx->rank == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "indices %s must have rank >= 1", SIG_STR(idx, a));
  nimble_dim_t k = nimble_dim_resolve(call->ctx, idx->dims[idx->rank - 1]);
  if (k.kind == NIMBLE_DIM_CONST) {
    if (k.value > (int64_t)x->rank)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "index tuples of %" PRId64 " for data of rank %zu", k.value, x->rank);
    size_t want = idx->rank - 1 + x->rank - (size_t)k.value;
    if (upd->rank != want)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "updates %s should have rank %zu", SIG_STR(upd, a), want);
  }
  return nimble_rel_one(out, num_out, x);
}

static nimble_status_t rel_trilu(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, NIMBLE_MAX_RANK));
  if (call->num_inputs == 2) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 0, 0));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  }
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_axis_same(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), call->inputs[0].rank, &axis));
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

/* cumsum: the axis is an attribute or, when given, the scalar input 1
 * (the result's shape does not depend on it). */
static nimble_status_t rel_cumsum(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  if (call->num_inputs == 2) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 0, 1));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
    return nimble_rel_one(out, num_out, &call->inputs[0]);
  }
  return rel_axis_same(call, out, num_out);
}

/* indices [...], depth (scalar or [1]), values [2] -> [..., depth, ...]
 * with depth inserted at axis. */
static nimble_status_t rel_one_hot(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *idx = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 0, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 1, 1));
  if (idx->rank + 1 > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "result rank %zu exceeds %d", idx->rank + 1, NIMBLE_MAX_RANK);
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), idx->rank + 1, &axis));
  nimble_dim_t depth = nimble_dim_any();
  double dv;
  if (nimble_rel_value_double(call, 1, 0, &dv)) {
    if (dv < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "depth %g must be >= 1", dv);
    depth = nimble_dim_const((int64_t)dv);
  } else if (nimble_dim_ctx_is_concrete(call->ctx)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "one_hot needs the value of depth");
  }
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = call->inputs[2].dtype;
  r.rank = idx->rank + 1;
  for (size_t i = 0, j = 0; i < r.rank; i++) r.dims[i] = i == axis ? depth : idx->dims[j++];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_eye_like(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, 2));
  nimble_tensor_sig_t r = call->inputs[0];
  const char *dt = A_STRING(call, "dtype");
  if (dt && dt[0]) NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  return nimble_rel_one(out, num_out, &r);
}

/* input, sequence_lens [batch] -> input's shape. */
static nimble_status_t rel_reverse_sequence(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                            size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, NIMBLE_MAX_RANK));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 1, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  int64_t b = A_INT(call, "batch_axis"), t = A_INT(call, "time_axis");
  if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "batch_axis %" PRId64 " and time_axis %" PRId64 " must be 0 and 1", b, t);
  nimble_dim_t d;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, x->dims[b], call->inputs[1].dims[0], &d));
  return nimble_rel_one(out, num_out, x);
}

/* ONNX Unique: (Y, indices, inverse_indices, counts). The counts of
 * distinct values are Any in types; the shape function gives the bound
 * (every element, or every slice along axis, distinct). */
static nimble_status_t rel_unique_all(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  bool concrete = nimble_dim_ctx_is_concrete(call->ctx);
  nimble_dim_t total = nimble_dim_const(1);
  nimble_tensor_sig_t y = *x, v;
  memset(&v, 0, sizeof v);
  v.dtype = NIMBLE_DTYPE_INT64;
  v.rank = 1;
  if (A_INT(call, "has_axis")) {
    size_t axis;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
    total = x->dims[axis];
    y.dims[axis] = concrete ? total : nimble_dim_any();
  } else {
    for (size_t i = 0; i < x->rank; i++) NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, total, x->dims[i], &total));
    y.rank = 1;
    y.dims[0] = concrete ? total : nimble_dim_any();
  }
  v.dims[0] = concrete ? total : nimble_dim_any();
  out[0] = y;
  out[1] = v;
  out[2] = v;
  out[2].dims[0] = total; /* one inverse index per input element (or slice) */
  out[3] = v;
  *num_out = 4;
  return nimble_ok();
}

static const nimble_attr_spec_t kAxis0[] = {ATTR_INT("axis", 0, "axis indexed")};
static const nimble_attr_spec_t kUniqueAll[] = {
    ATTR_INT("has_axis", 0, "unique slices along axis (1) or elements of the flattened input (0)"),
    ATTR_INT("axis", 0, "the axis when has_axis"),
    ATTR_INT("sorted", 1, "results in ascending order"),
};
static const nimble_attr_spec_t kReverseSequence[] = {
    ATTR_INT("batch_axis", 1, "the batch axis (0 or 1)"),
    ATTR_INT("time_axis", 0, "the time axis (0 or 1)"),
};
/* `inplace` is set by the update_in_place pass, never by a frontend: the
 * data input is dead and owned, so the kernel writes the updates into it
 * (the invoke's output is the data tensor) instead of copying it first. */
static const nimble_attr_spec_t kScatterElements[] = {
    ATTR_INT("axis", 0, "axis indexed"),
    ATTR_STRING("reduction", "none", "none, add or mul"),
    ATTR_INT("inplace", 0, "1: the output is the data tensor itself (update_in_place)"),
};
static const nimble_attr_spec_t kScatterNd[] = {
    ATTR_STRING("reduction", "none", "none, add or mul"),
    ATTR_INT("inplace", 0, "1: the output is the data tensor itself (update_in_place)"),
};
static const nimble_attr_spec_t kTrilu[] = {ATTR_INT("upper", 1, "keep the upper (1) or lower (0) triangle")};
static const nimble_attr_spec_t kCumsum[] = {
    ATTR_INT("axis", 0, "axis summed along"),
    ATTR_INT("exclusive", 0, "exclude the element itself"),
    ATTR_INT("reverse", 0, "sum from the end"),
};
static const nimble_attr_spec_t kHardmax[] = {ATTR_INT("axis", -1, "axis of the maximum")};
static const nimble_attr_spec_t kOneHot[] = {ATTR_INT("axis", -1, "where the depth axis goes")};
static const nimble_attr_spec_t kEyeLike[] = {
    ATTR_INT("k", 0, "diagonal offset"),
    ATTR_STRING("dtype", "", "element type; empty: the input's"),
};

const nimble_op nimble_ops_indexing[] = {
    {"gather_elements", "ONNX GatherElements: data[... idx ...] along axis, shaped like indices", 2, 2,
     ATTRS(kAxis0), rel_gather_elements, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_INJECTIVE, false},
    {"scatter_elements", "ONNX ScatterElements: a copy of data with updates written at indices along axis", 3, 3,
     ATTRS(kScatterElements), rel_scatter_elements, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"scatter_nd", "ONNX ScatterND: a copy of data with updates written at index tuples", 3, 3, ATTRS(kScatterNd),
     rel_scatter_nd, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"trilu", "upper or lower triangle of the last two dims (diagonal offset k: input 1)", 1, 2, ATTRS(kTrilu),
     rel_trilu, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_INJECTIVE, false},
    {"cumsum", "cumulative sum along axis (the attribute, or input 1 when given)", 1, 2, ATTRS(kCumsum), rel_cumsum, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL,
     0, NIMBLE_FUSE_OPAQUE, false},
    {"hardmax", "1 at the first maximum along axis, else 0", 1, 1, ATTRS(kHardmax), rel_axis_same,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"one_hot", "ONNX OneHot: indices, depth, [off, on] values", 3, 3, ATTRS(kOneHot), rel_one_hot,
     NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false},
    {"reverse_sequence", "reverses the first sequence_lens[b] steps of each batch entry", 2, 2,
     ATTRS(kReverseSequence), rel_reverse_sequence, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"unique_all", "ONNX Unique: (values, first indices, inverse indices, counts)", 1, 1, ATTRS(kUniqueAll),
     rel_unique_all, NIMBLE_SHAPE_UPPER_BOUND, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"eye_like", "ones on diagonal k of a 2-D tensor shaped like the input", 1, 1, ATTRS(kEyeLike), rel_eye_like,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
};
const size_t nimble_ops_indexing_count = sizeof nimble_ops_indexing / sizeof nimble_ops_indexing[0];
