/* Element-wise operators: unary math, binary arithmetic and comparisons with
 * NumPy broadcasting, where, cast and clip. */
#include <math.h>

#include "ops/op_internal.h"

static nimble_status_t rel_unary(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                 size_t *num_out) {
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_unary_float(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_logical_not(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  if (call->inputs[0].dtype != NIMBLE_DTYPE_BOOL) {
    char buf[160];
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input 0 must be bool, got %s",
                              SIG_STR(&call->inputs[0], buf));
  }
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_binary(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  nimble_tensor_sig_t r;
  /* The broadcast error names both types, which is what users need first;
   * the dtype check comes second. */
  NIMBLE_RETURN_IF_ERROR(nimble_sig_broadcast(call->ctx, &call->inputs[0], &call->inputs[1], &r));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_compare(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(rel_binary(call, out, num_out));
  out[0].dtype = NIMBLE_DTYPE_BOOL;
  return nimble_ok();
}

static nimble_status_t rel_logical_binary(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                          size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(rel_binary(call, out, num_out));
  if (out[0].dtype != NIMBLE_DTYPE_BOOL)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "inputs must be bool, got %s",
                              nimble_dtype_name(out[0].dtype));
  return nimble_ok();
}

static nimble_status_t rel_where(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                 size_t *num_out) {
  if (call->inputs[0].dtype != NIMBLE_DTYPE_BOOL) {
    char buf[160];
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "condition must be bool, got %s",
                              SIG_STR(&call->inputs[0], buf));
  }
  nimble_tensor_sig_t xy, r;
  NIMBLE_RETURN_IF_ERROR(nimble_sig_broadcast(call->ctx, &call->inputs[1], &call->inputs[2], &xy));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 1, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_sig_broadcast(call->ctx, &call->inputs[0], &xy, &r));
  r.dtype = xy.dtype;
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_cast(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  nimble_tensor_sig_t r = call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  return nimble_rel_one(out, num_out, &r);
}

static const nimble_attr_spec_t kCastAttrs[] = {
    {"dtype", NIMBLE_ATTR_STRING, true, {NIMBLE_ATTR_STRING, 0, 0, NULL, 0, NULL}, "target dtype"},
};
static const nimble_attr_spec_t kClipAttrs[] = {
    ATTR_FLOAT("min", -INFINITY, "lower bound"),
    ATTR_FLOAT("max", INFINITY, "upper bound"),
};
static const nimble_attr_spec_t kLeakyAttrs[] = {
    ATTR_FLOAT("alpha", 0.01, "slope for negative inputs"),
};

#define ELEMWISE(nm, rel, doc) \
  {nm, doc, 1, 1, NO_ATTRS, rel, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false}
#define BROADCAST(nm, rel, doc) \
  {nm, doc, 2, 2, NO_ATTRS, rel, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_BROADCAST, false}

const nimble_op nimble_ops_elementwise[] = {
    ELEMWISE("negative", rel_unary, "-x"),
    ELEMWISE("abs", rel_unary, "|x|"),
    ELEMWISE("exp", rel_unary_float, "e^x"),
    ELEMWISE("log", rel_unary_float, "natural logarithm"),
    ELEMWISE("sqrt", rel_unary_float, "square root"),
    ELEMWISE("rsqrt", rel_unary_float, "1 / sqrt(x)"),
    ELEMWISE("tanh", rel_unary_float, "hyperbolic tangent"),
    ELEMWISE("sigmoid", rel_unary_float, "1 / (1 + e^-x)"),
    ELEMWISE("erf", rel_unary_float, "Gauss error function"),
    ELEMWISE("sin", rel_unary_float, "sine"),
    ELEMWISE("cos", rel_unary_float, "cosine"),
    ELEMWISE("floor", rel_unary_float, "round down"),
    ELEMWISE("ceil", rel_unary_float, "round up"),
    ELEMWISE("round", rel_unary_float, "round half to even"),
    ELEMWISE("relu", rel_unary, "max(x, 0)"),
    ELEMWISE("copy", rel_unary, "identity (a fresh tensor)"),
    ELEMWISE("logical_not", rel_logical_not, "!x on bool"),
    {"leaky_relu", "x if x > 0 else alpha * x", 1, 1, ATTRS(kLeakyAttrs), rel_unary_float,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    {"clip", "min(max(x, min), max)", 1, 1, ATTRS(kClipAttrs), rel_unary,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    {"cast", "converts to attribute dtype", 1, 1, ATTRS(kCastAttrs), rel_cast,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false},
    BROADCAST("add", rel_binary, "x + y"),
    BROADCAST("subtract", rel_binary, "x - y"),
    BROADCAST("multiply", rel_binary, "x * y"),
    BROADCAST("divide", rel_binary, "x / y"),
    BROADCAST("power", rel_binary, "x ^ y"),
    BROADCAST("maximum", rel_binary, "max(x, y)"),
    BROADCAST("minimum", rel_binary, "min(x, y)"),
    BROADCAST("mod", rel_binary, "x mod y"),
    BROADCAST("equal", rel_compare, "x == y (bool)"),
    BROADCAST("not_equal", rel_compare, "x != y (bool)"),
    BROADCAST("less", rel_compare, "x < y (bool)"),
    BROADCAST("less_equal", rel_compare, "x <= y (bool)"),
    BROADCAST("greater", rel_compare, "x > y (bool)"),
    BROADCAST("greater_equal", rel_compare, "x >= y (bool)"),
    BROADCAST("logical_and", rel_logical_binary, "x && y on bool"),
    BROADCAST("logical_or", rel_logical_binary, "x || y on bool"),
    {"where", "cond ? x : y, all three broadcast", 3, 3, NO_ATTRS, rel_where,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_BROADCAST, false},
};
const size_t nimble_ops_elementwise_count =
    sizeof nimble_ops_elementwise / sizeof nimble_ops_elementwise[0];
