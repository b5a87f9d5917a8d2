/* Reductions over axes: sum, mean, max, min, prod (axes, keepdims) and
 * argmax/argmin (one axis, int64 result). */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

/* Marks reduced axes; empty `axes` means all of them. */
static nimble_status_t reduced_axes(const int64_t *axes, size_t n, size_t rank, bool *mark) {
  memset(mark, 0, NIMBLE_MAX_RANK * sizeof(bool));
  if (n == 0) {
    for (size_t i = 0; i < rank; i++) mark[i] = true;
    return nimble_ok();
  }
  for (size_t i = 0; i < n; i++) {
    size_t a;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axes[i], rank, &a));
    if (mark[a])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "axis %" PRId64 " is reduced twice", axes[i]);
    mark[a] = true;
  }
  return nimble_ok();
}

static nimble_tensor_sig_t reduce_shape(const nimble_tensor_sig_t *x, const bool *mark,
                                        bool keepdims) {
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = x->dtype;
  for (size_t i = 0; i < x->rank; i++) {
    if (!mark[i]) r.dims[r.rank++] = x->dims[i];
    else if (keepdims) r.dims[r.rank++] = nimble_dim_const(1);
  }
  return r;
}

static nimble_status_t rel_reduce(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  size_t n;
  const int64_t *axes = A_INTS(call, "axes", &n);
  bool mark[NIMBLE_MAX_RANK];
  NIMBLE_RETURN_IF_ERROR(reduced_axes(axes, n, call->inputs[0].rank, mark));
  nimble_tensor_sig_t r = reduce_shape(&call->inputs[0], mark, A_INT(call, "keepdims") != 0);
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_arg_reduce(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                      size_t *num_out) {
  size_t a;
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &a));
  bool mark[NIMBLE_MAX_RANK] = {false};
  mark[a] = true;
  nimble_tensor_sig_t r = reduce_shape(x, mark, A_INT(call, "keepdims") != 0);
  r.dtype = NIMBLE_DTYPE_INT64;
  return nimble_rel_one(out, num_out, &r);
}

static const nimble_attr_spec_t kReduceAttrs[] = {
    ATTR_INTS("axes", "axes to reduce; empty: all"),
    ATTR_INT("keepdims", 0, "keep reduced axes as 1"),
};
static const nimble_attr_spec_t kArgAttrs[] = {
    ATTR_INT("axis", 0, "axis to reduce"),
    ATTR_INT("keepdims", 1, "keep the reduced axis as 1"),
};

#define REDUCE(nm, doc) \
  {nm, doc, 1, 1, ATTRS(kReduceAttrs), rel_reduce, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_REDUCTION, false}

const nimble_op nimble_ops_reduce[] = {
    REDUCE("sum", "sum over axes"),
    REDUCE("mean", "mean over axes"),
    REDUCE("max", "maximum over axes"),
    REDUCE("min", "minimum over axes"),
    REDUCE("prod", "product over axes"),
    {"argmax", "index of the maximum along axis", 1, 1, ATTRS(kArgAttrs), rel_arg_reduce,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_REDUCTION, false},
    {"argmin", "index of the minimum along axis", 1, 1, ATTRS(kArgAttrs), rel_arg_reduce,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_REDUCTION, false},
};
const size_t nimble_ops_reduce_count = sizeof nimble_ops_reduce / sizeof nimble_ops_reduce[0];
