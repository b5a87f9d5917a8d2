/* Tensor creation: zeros, ones, full (static shape attribute), and the
 * data-dependent arange and constant_of_shape. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ops/op_internal.h"

nimble_status_t nimble_rel_shape_input(const nimble_rel_call_t *call, size_t i, bool allow_neg,
                                       nimble_dim_t *dims, int64_t *raw, size_t *n, bool *known) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  char buf[160];
  if (s->rank != 1 || !nimble_dtype_is_int(s->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "input %zu (a shape) must be a 1-D integer tensor, got %s", i,
                              SIG_STR(s, buf));
  nimble_dim_t len = nimble_dim_resolve(call->ctx, s->dims[0]);
  if (len.kind != NIMBLE_DIM_CONST)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "input %zu (a shape) has unknown length in %s: the result's rank must "
                              "be known",
                              i, SIG_STR(s, buf));
  if (len.value > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "input %zu (a shape) has %" PRId64 " dims, at most %d",
                              i, len.value, NIMBLE_MAX_RANK);
  *n = (size_t)len.value;
  *known = true;
  for (size_t k = 0; k < *n; k++) {
    int64_t v;
    if (!nimble_rel_value_int(call, i, k, &v)) {
      *known = false;
      dims[k] = nimble_dim_any();
      continue;
    }
    if (v < (allow_neg ? -1 : 0))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu (a shape) has dim %" PRId64 " at %zu",
                                i, v, k);
    raw[k] = v;
    dims[k] = v >= 0 ? nimble_dim_const(v) : nimble_dim_any();
  }
  return nimble_ok();
}

static nimble_status_t rel_fill(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  size_t n;
  const int64_t *shape = A_INTS(call, "shape", &n);
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  if (n > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape has %zu dims, at most %d", n, NIMBLE_MAX_RANK);
  r.rank = n;
  for (size_t i = 0; i < n; i++) {
    if (shape[i] < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "shape has negative dim %" PRId64 " at %zu",
                                shape[i], i);
    r.dims[i] = nimble_dim_const(shape[i]);
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_constant_of_shape(const nimble_rel_call_t *call,
                                             nimble_tensor_sig_t *out, size_t *num_out) {
  nimble_tensor_sig_t r;
  int64_t raw[NIMBLE_MAX_RANK];
  bool known;
  memset(&r, 0, sizeof r);
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_shape_input(call, 0, false, r.dims, raw, &r.rank, &known));
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_arange(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  for (size_t i = 0; i < 3; i++) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, i, 0, 0));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
  }
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = call->inputs[0].dtype;
  r.rank = 1;
  r.dims[0] = nimble_dim_any();
  double start, stop, step;
  if (nimble_rel_value_double(call, 0, 0, &start) && nimble_rel_value_double(call, 1, 0, &stop) &&
      nimble_rel_value_double(call, 2, 0, &step)) {
    /* ONNX Range: max(ceil((limit - start) / delta), 0) elements. */
    if (step == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "arange step is 0");
    double count = ceil((stop - start) / step);
    if (!(count <= 9.0e15))
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "arange of %g to %g by %g is too long", start,
                                stop, step);
    r.dims[0] = nimble_dim_const(count > 0 ? (int64_t)count : 0);
  }
  return nimble_rel_one(out, num_out, &r);
}

static const nimble_attr_spec_t kFillAttrs[] = {
    ATTR_INTS("shape", "dims of the result"),
    ATTR_STRING("dtype", "float32", "element type"),
};
static const nimble_attr_spec_t kFullAttrs[] = {
    ATTR_INTS("shape", "dims of the result"),
    ATTR_STRING("dtype", "float32", "element type"),
    ATTR_FLOAT("fill_value", 0.0, "the value of every element"),
};
static const nimble_attr_spec_t kConstantOfShapeAttrs[] = {
    ATTR_STRING("dtype", "float32", "element type"),
    ATTR_FLOAT("value", 0.0, "the value of every element"),
};

const nimble_op nimble_ops_create[] = {
    {"zeros", "a tensor of zeros", 0, 0, ATTRS(kFillAttrs), rel_fill,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    {"ones", "a tensor of ones", 0, 0, ATTRS(kFillAttrs), rel_fill,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    {"full", "a tensor of fill_value", 0, 0, ATTRS(kFullAttrs), rel_fill,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    {"constant_of_shape", "a tensor of value, shaped by a 1-D shape input", 1, 1,
     ATTRS(kConstantOfShapeAttrs), rel_constant_of_shape, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 0,
     NIMBLE_FUSE_OPAQUE, false},
    {"arange", "start, start + step, ... below stop (scalar inputs)", 3, 3, NO_ATTRS, rel_arange,
     NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 0x7u, NIMBLE_FUSE_OPAQUE, false},
};
const size_t nimble_ops_create_count = sizeof nimble_ops_create / sizeof nimble_ops_create[0];
