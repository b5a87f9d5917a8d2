/* Indexing operators: GatherElements, ScatterElements/Scatter, ScatterND, Trilu,
 * CumSum, OneHot, EyeLike, ReverseSequence, Compress, Unique. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"


static nimble_status_t cv_gather_elements(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[2], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &a[1]));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 0, &axis));
  nimble_named_attr_t at = imp_attr_int("axis", axis);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "gather_elements", 2, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_scatter_elements(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[3], *r;
  for (size_t i = 0; i < 3; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  int64_t axis;
  const char *red;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 0, &axis));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "reduction", "none", &red));
  nimble_named_attr_t at[2] = {imp_attr_int("axis", axis), imp_attr_str("reduction", red)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "scatter_elements", 3, a, at, 2, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_scatter_nd(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[3], *r;
  for (size_t i = 0; i < 3; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  const char *red;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "reduction", "none", &red));
  nimble_named_attr_t at = imp_attr_str("reduction", red);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "scatter_nd", 3, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_trilu(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[2], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &a[1]));
  int64_t upper;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "upper", 1, &upper));
  if (a[1] && a[1]->has_sig && a[1]->sig.rank == 1) NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, a[1], &a[1]));
  nimble_named_attr_t at = imp_attr_int("upper", upper ? 1 : 0);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "trilu", a[1] ? 2 : 1, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_cumsum(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *ax, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &ax));
  int64_t axis[1], ex, rev;
  size_t na;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "exclusive", 0, &ex));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "reverse", 0, &rev));
  if (!imp_const_ints(ax, axis, 1, &na) || na != 1) {
    /* The axis is read at run time. */
    nimble_named_attr_t at[2] = {imp_attr_int("exclusive", ex ? 1 : 0), imp_attr_int("reverse", rev ? 1 : 0)};
    imp_val *args[2] = {x, ax};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cumsum", 2, args, at, 2, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t at[3] = {imp_attr_int("axis", axis[0]), imp_attr_int("exclusive", ex ? 1 : 0),
                               imp_attr_int("reverse", rev ? 1 : 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cumsum", 1, &x, at, 3, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_one_hot(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[3], *r;
  for (size_t i = 0; i < 3; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", -1, &axis));
  nimble_named_attr_t at = imp_attr_int("axis", axis);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "one_hot", 3, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_eye_like(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t k, dt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "k", 0, &k));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "dtype", 0, &dt));
  nimble_dtype_t d = x->sig.dtype;
  if (dt) NIMBLE_RETURN_IF_ERROR(imp_dtype((int)dt, &d));
  nimble_named_attr_t at[2] = {imp_attr_int("k", k), imp_attr_str("dtype", nimble_dtype_name(d))};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "eye_like", 1, &x, at, 2, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_reverse_sequence(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t b, t;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "batch_axis", 1, &b));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "time_axis", 0, &t));
  nimble_named_attr_t at[2] = {imp_attr_int("batch_axis", b), imp_attr_int("time_axis", t)};
  return imp_simple(c, n, "reverse_sequence", 2, at, 2);
}

/* Compress: the indices where condition holds (nonzero), taken along axis
 * (or from the flattened input). */
static nimble_status_t cv_compress(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *cond, *idx, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &cond));
  if (cond->sig.rank != 1) return imp_err(NIMBLE_INVALID_ARGUMENT, "condition must be 1-D");
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "nonzero", cond, &idx));
  int64_t zero = 0;
  nimble_named_attr_t sq = imp_attr_ints("axes", &zero, 1);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "squeeze", 1, &idx, &sq, 1, &idx));
  int64_t axis = 0;
  if (nimble_onnx_node_attr(n, "axis")) {
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 0, &axis));
  } else {
    int64_t flat = -1;
    nimble_named_attr_t ra = imp_attr_ints("newshape", &flat, 1);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &x, &ra, 1, &x));
  }
  nimble_named_attr_t ta = imp_attr_int("axis", axis);
  imp_val *args[2] = {x, idx};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, args, &ta, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_unique(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *outs[4];
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis, sorted;
  bool has_axis = nimble_onnx_node_attr(n, "axis") != NULL;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 0, &axis));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "sorted", 1, &sorted));
  nimble_named_attr_t at[3] = {imp_attr_int("has_axis", has_axis), imp_attr_int("axis", axis),
                               imp_attr_int("sorted", sorted ? 1 : 0)};
  size_t nout;
  NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "unique_all", 1, &x, at, 3, outs, &nout));
  for (size_t i = 0; i < 4; i++) NIMBLE_RETURN_IF_ERROR(imp_define(c, n, i, outs[i]));
  return nimble_ok();
}

const imp_converter imp_converters_index[] = {
    {"GatherElements", cv_gather_elements},
    {"ScatterElements", cv_scatter_elements},
    {"Scatter", cv_scatter_elements},
    {"ScatterND", cv_scatter_nd},
    {"Trilu", cv_trilu},
    {"CumSum", cv_cumsum},
    {"OneHot", cv_one_hot},
    {"EyeLike", cv_eye_like},
    {"ReverseSequence", cv_reverse_sequence},
    {"Compress", cv_compress},
    {"Unique", cv_unique},
};
const size_t imp_converters_index_count = sizeof imp_converters_index / sizeof imp_converters_index[0];
