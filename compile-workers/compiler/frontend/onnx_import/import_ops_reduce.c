/* Converters for ONNX's reductions: ReduceSum ... ReduceLogSumExp, and
 * ArgMax/ArgMin (with select_last_index). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

static nimble_status_t reduce(imp_ctx *c, const nimble_onnx_node *n, const char *op, int pre, int post) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t keepdims, noop;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "keepdims", 1, &keepdims));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "noop_with_empty_axes", 0, &noop));
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  const int64_t *av;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "axes", &av, &na));
  if (na > NIMBLE_MAX_RANK) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'axes' has %zu values", na);
  if (na) memcpy(axes, av, na * sizeof *axes);
  imp_val *ai;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &ai));
  if (ai) {
    if (!imp_const_ints(ai, axes, NIMBLE_MAX_RANK, &na)) {
      if (strcmp(op, "sum") != 0 || pre || post)
        return imp_err(NIMBLE_UNIMPLEMENTED, "input 'axes' must be a constant");
      /* ReduceSum 13 with axes known only at run time. */
      if (!ai->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "input 'axes' has no known type");
      imp_val *args[2] = {x, ai};
      nimble_named_attr_t at[2] = {imp_attr_int("keepdims", keepdims ? 1 : 0), imp_attr_int("noop_with_empty_axes", noop ? 1 : 0)};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_sum", 2, args, at, 2, &r));
      return imp_define(c, n, 0, r);
    }
  }
  if (na == 0 && noop) {
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "copy", x, &r));
    return imp_define(c, n, 0, r);
  }
  r = x;
  if (pre == 1) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", r, &r));
  if (pre == 2) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", r, r, &r));
  if (pre == 3) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", r, &r));
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", keepdims ? 1 : 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &r, at, 2, &r));
  if (post == 1) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "sqrt", r, &r));
  if (post == 2) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "log", r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_reduce_sum(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 0, 0); }
static nimble_status_t cv_reduce_mean(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "mean", 0, 0); }
static nimble_status_t cv_reduce_max(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "max", 0, 0); }
static nimble_status_t cv_reduce_min(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "min", 0, 0); }
static nimble_status_t cv_reduce_prod(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "prod", 0, 0); }
static nimble_status_t cv_reduce_l1(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 1, 0); }
static nimble_status_t cv_reduce_l2(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 2, 1); }
static nimble_status_t cv_reduce_sumsq(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 2, 0); }
static nimble_status_t cv_reduce_logsum(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 0, 2); }
static nimble_status_t cv_reduce_logsumexp(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 3, 2); }

/* ArgMax/ArgMin; select_last_index searches the reversed axis and maps
 * the index back (extent - 1 - i). */
static nimble_status_t arg_last(imp_ctx *c, const nimble_onnx_node *n, const char *op) {
  imp_val *x, *r;
  int64_t axis, keepdims, last;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 0, &axis));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "keepdims", 1, &keepdims));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "select_last_index", 0, &last));
  size_t ax;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axis, x->sig.rank, &ax));
  nimble_named_attr_t at[2] = {imp_attr_int("axis", (int64_t)ax), imp_attr_int("keepdims", keepdims ? 1 : 0)};
  if (!last) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &x, at, 2, &r));
    return imp_define(c, n, 0, r);
  }
  int64_t b = -1, e = INT64_MIN, s = -1, a = (int64_t)ax;
  nimble_named_attr_t sl[4] = {imp_attr_ints("begin", &b, 1), imp_attr_ints("end", &e, 1),
                               imp_attr_ints("strides", &s, 1), imp_attr_ints("axes", &a, 1)};
  imp_val *rev, *ext, *one;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, &x, sl, 4, &rev));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &rev, at, 2, &r));
  nimble_dim_t d = imp_resolve(c, x->sig.dims[ax]);
  if (d.kind == NIMBLE_DIM_CONST) {
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, (double)(d.value - 1), &ext));
  } else {
    imp_val *sh, *idx;
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "shape_of", x, &sh));
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, (double)ax, &idx));
    nimble_named_attr_t a0 = imp_attr_int("axis", 0);
    imp_val *ta[2] = {sh, idx};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, ta, &a0, 1, &ext));
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, 1, &one));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", ext, one, &ext));
  }
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", ext, r, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_argmax(imp_ctx *c, const nimble_onnx_node *n) { return arg_last(c, n, "argmax"); }

static nimble_status_t cv_argmin(imp_ctx *c, const nimble_onnx_node *n) { return arg_last(c, n, "argmin"); }

const imp_converter imp_converters_reduce[] = {
    {"ReduceSum", cv_reduce_sum},
    {"ReduceMean", cv_reduce_mean},
    {"ReduceMax", cv_reduce_max},
    {"ReduceMin", cv_reduce_min},
    {"ReduceProd", cv_reduce_prod},
    {"ReduceL1", cv_reduce_l1},
    {"ReduceL2", cv_reduce_l2},
    {"ReduceSumSquare", cv_reduce_sumsq},
    {"ReduceLogSum", cv_reduce_logsum},
    {"ReduceLogSumExp", cv_reduce_logsumexp},
    {"ArgMax", cv_argmax},
    {"ArgMin", cv_argmin},
};
const size_t imp_converters_reduce_count = sizeof imp_converters_reduce / sizeof imp_converters_reduce[0];
