/* Converters for ONNX's neural-network operators: Gemm, MatMul, Conv,
 * pooling, Softmax/LogSoftmax/Hardmax, Dropout, normalization (Instance,
 * MeanVariance, Layer, BatchNormalization in inference and training) and
 * the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

static nimble_status_t cv_gemm(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t ta, tb;
  double alpha, beta;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "transA", 0, &ta));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "transB", 0, &tb));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "beta", 1.0f, &beta));
  imp_val *args[3], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &args[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &args[1]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &args[2]));
  nimble_named_attr_t at[4] = {imp_attr_int("transA", ta), imp_attr_int("transB", tb),
                               imp_attr_float("alpha", alpha), imp_attr_float("beta", beta)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dense", args[2] ? 3 : 2, args, at, 4, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_matmul(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "matmul", 2, NULL, 0); }

/* Pads for auto_pad SAME_*: needs static spatial extents. */
static nimble_status_t auto_pads(imp_ctx *c, const nimble_onnx_node *n, const imp_val *x,
                                 const int64_t *k, const int64_t *s, const int64_t *d, size_t nsp,
                                 int64_t *pads) {
  const char *ap;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "auto_pad", "NOTSET", &ap));
  if (strcmp(ap, "NOTSET") == 0) return nimble_ok();
  if (strcmp(ap, "VALID") == 0) {
    for (size_t i = 0; i < 2 * nsp; i++) pads[i] = 0;
    return nimble_ok();
  }
  bool upper = strcmp(ap, "SAME_UPPER") == 0;
  if (!upper && strcmp(ap, "SAME_LOWER") != 0)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'auto_pad' has unknown value '%s'", ap);
  for (size_t i = 0; i < nsp; i++)
    if (s[i] < 1 || d[i] < 1 || k[i] < 1 || s[i] > (1 << 20) || d[i] > (1 << 20) || k[i] > (1 << 20))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "strides, dilations and kernel must be in [1, 2^20]");
  for (size_t i = 0; i < nsp; i++) {
    nimble_dim_t in = imp_resolve(c, x->sig.dims[2 + i]);
    if (in.kind != NIMBLE_DIM_CONST)
      return imp_err(NIMBLE_UNIMPLEMENTED, "auto_pad %s needs static spatial dims", ap);
    if (in.value > ((int64_t)1 << 40)) return imp_err(NIMBLE_OUT_OF_RANGE, "spatial dim %" PRId64 " is too large", in.value);
    int64_t out = (in.value + s[i] - 1) / s[i];
    int64_t total = (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in.value;
    if (total < 0) total = 0;
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + nsp] = total - pads[i];
  }
  return nimble_ok();
}

/* Reads an INTS attribute with exactly `want` entries (or none: default). */
static nimble_status_t ints_attr(const nimble_onnx_node *n, const char *name, size_t want, int64_t dflt,
                                 int64_t *out) {
  const int64_t *v;
  size_t cnt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, name, &v, &cnt));
  if (cnt && cnt != want)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %zu", name, cnt, want);
  for (size_t i = 0; i < want; i++) out[i] = cnt ? v[i] : dflt;
  return nimble_ok();
}

/* Conv and pooling work on NCHW; 1-D forms are lifted to 2-D with an axis
 * of extent 1. */
static nimble_status_t lift_1d(imp_ctx *c, imp_val *v, imp_val **out) {
  nimble_named_attr_t a = imp_attr_int("axis", 2);
  return imp_emit(c, "expand_dims", 1, &v, &a, 1, out);
}
static nimble_status_t drop_1d(imp_ctx *c, imp_val *v, imp_val **out) {
  int64_t ax = 2;
  nimble_named_attr_t a = imp_attr_ints("axes", &ax, 1);
  return imp_emit(c, "squeeze", 1, &v, &a, 1, out);
}

static nimble_status_t cv_conv(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *w, *b, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &w));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &b));
  NIMBLE_RETURN_IF_ERROR(imp_conv(c, n, x, w, b, &r));
  return imp_define(c, n, 0, r);
}

nimble_status_t imp_conv(imp_ctx *c, const nimble_onnx_node *n, imp_val *x, imp_val *w, imp_val *b, imp_val **out) {
  if (x->sig.rank != 4 && x->sig.rank != 3)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only 1-D and 2-D convolutions are supported (input has rank %zu)",
                   x->sig.rank);
  size_t nsp = x->sig.rank - 2;
  int64_t k[2], s[2], d[2], pads[4], group;
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "strides", nsp, 1, s));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "dilations", nsp, 1, d));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "pads", 2 * nsp, 0, pads));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "group", 1, &group));
  for (size_t i = 0; i < nsp; i++) {
    nimble_dim_t kd = imp_resolve(c, w->sig.rank == x->sig.rank ? w->sig.dims[2 + i] : nimble_dim_any());
    k[i] = kd.kind == NIMBLE_DIM_CONST ? kd.value : 1;
  }
  const int64_t *ks;
  size_t nks;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "kernel_shape", &ks, &nks));
  if (nks == nsp && nsp) memcpy(k, ks, nsp * sizeof *k); /* absent: (NULL, 0) */
  NIMBLE_RETURN_IF_ERROR(auto_pads(c, n, x, k, s, d, nsp, pads));
  if (nsp == 1) {
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, x, &x));
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, w, &w));
    s[1] = s[0]; s[0] = 1;
    d[1] = d[0]; d[0] = 1;
    int64_t p0 = pads[0], p1 = pads[1];
    pads[0] = 0; pads[1] = p0; pads[2] = 0; pads[3] = p1;
  }
  nimble_named_attr_t at[4] = {imp_attr_ints("strides", s, 2), imp_attr_ints("pads", pads, 4),
                               imp_attr_ints("dilations", d, 2), imp_attr_int("groups", group)};
  imp_val *args[3] = {x, w, b}, *r;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "conv2d", b ? 3 : 2, args, at, 4, &r));
  if (nsp == 1) NIMBLE_RETURN_IF_ERROR(drop_1d(c, r, &r));
  *out = r;
  return nimble_ok();
}

static nimble_status_t pool(imp_ctx *c, const nimble_onnx_node *n, bool is_max) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (x->sig.rank != 4 && x->sig.rank != 3)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only 1-D and 2-D pooling is supported (input has rank %zu)", x->sig.rank);
  bool with_indices = is_max && n->n_outputs > 1 && n->outputs[1][0];
  size_t nsp = x->sig.rank - 2;
  if (with_indices && nsp != 2) return imp_err(NIMBLE_UNIMPLEMENTED, "the Indices output needs 2-D pooling");
  int64_t k[2], s[2], d[2], pads[4], ceil_mode, cip = 0;
  const int64_t *ks;
  size_t nks;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "kernel_shape", &ks, &nks));
  if (nks != nsp) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'kernel_shape' has %zu values, expected %zu", nks, nsp);
  if (nsp) memcpy(k, ks, nsp * sizeof *k); /* absent: (NULL, 0) */
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "strides", nsp, 1, s));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "dilations", nsp, 1, d));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "pads", 2 * nsp, 0, pads));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "ceil_mode", 0, &ceil_mode));
  if (!is_max) NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "count_include_pad", 0, &cip));
  NIMBLE_RETURN_IF_ERROR(auto_pads(c, n, x, k, s, d, nsp, pads));
  if (nsp == 1) {
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, x, &x));
    k[1] = k[0]; k[0] = 1;
    s[1] = s[0]; s[0] = 1;
    d[1] = d[0]; d[0] = 1;
    int64_t p0 = pads[0], p1 = pads[1];
    pads[0] = 0; pads[1] = p0; pads[2] = 0; pads[3] = p1;
  }
  nimble_named_attr_t at[6] = {imp_attr_ints("kernel_shape", k, 2), imp_attr_ints("strides", s, 2),
                               imp_attr_ints("pads", pads, 4), imp_attr_ints("dilations", d, 2),
                               imp_attr_int("ceil_mode", ceil_mode), imp_attr_int("count_include_pad", cip)};
  if (with_indices) {
    int64_t order;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "storage_order", 0, &order));
    imp_val *outs[2];
    size_t nout;
    nimble_named_attr_t ai[6] = {at[0], at[1], at[2], at[3], at[4], imp_attr_int("storage_order", order)};
    NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "max_pool2d_with_indices", 1, &x, ai, 6, outs, &nout));
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, outs[0]));
    return imp_define(c, n, 1, outs[1]);
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, is_max ? "max_pool2d" : "avg_pool2d", 1, &x, at, is_max ? 5 : 6, &r));
  if (nsp == 1) NIMBLE_RETURN_IF_ERROR(drop_1d(c, r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_maxpool(imp_ctx *c, const nimble_onnx_node *n) { return pool(c, n, true); }
static nimble_status_t cv_avgpool(imp_ctx *c, const nimble_onnx_node *n) { return pool(c, n, false); }

static nimble_status_t global_pool(imp_ctx *c, const nimble_onnx_node *n, const char *op) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (x->sig.rank < 3) return imp_err(NIMBLE_INVALID_ARGUMENT, "input has rank %zu, expected at least 3", x->sig.rank);
  if (x->sig.rank == 4 && strcmp(op, "mean") == 0) {
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "global_avg_pool2d", x, &r));
    return imp_define(c, n, 0, r);
  }
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  for (size_t i = 2; i < x->sig.rank; i++) axes[na++] = (int64_t)i;
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", 1)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &x, at, 2, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_global_avg(imp_ctx *c, const nimble_onnx_node *n) { return global_pool(c, n, "mean"); }
static nimble_status_t cv_global_max(imp_ctx *c, const nimble_onnx_node *n) { return global_pool(c, n, "max"); }

/* Softmax: opset 13 normalizes along one axis; before, over the flattened
 * dims from axis on (default 1). */
static nimble_status_t softmax_like(imp_ctx *c, const nimble_onnx_node *n, const char *op) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", n->opset >= 13 ? -1 : 1, &axis));
  size_t ax;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axis, x->sig.rank, &ax));
  nimble_named_attr_t a = imp_attr_int("axis", -1);
  if (n->opset >= 13 || ax + 1 == x->sig.rank) {
    nimble_named_attr_t a2 = imp_attr_int("axis", (int64_t)ax);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &x, &a2, 1, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t fa = imp_attr_int("axis", (int64_t)ax);
  imp_val *f;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "flatten", 1, &x, &fa, 1, &f));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &f, &a, 1, &r));
  /* Back to the input's shape. */
  int64_t shape[NIMBLE_MAX_RANK];
  bool known = true;
  for (size_t i = 0; i < x->sig.rank; i++) {
    nimble_dim_t d = imp_resolve(c, x->sig.dims[i]);
    if (d.kind != NIMBLE_DIM_CONST) known = false;
    shape[i] = d.value;
  }
  if (known) {
    nimble_named_attr_t ra = imp_attr_ints("newshape", shape, x->sig.rank);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &r, &ra, 1, &r));
  } else {
    imp_val *sh;
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "shape_of", x, &sh));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "dyn_reshape", r, sh, &r));
    r->has_sig = true;
    r->sig = x->sig;
  }
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_softmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "softmax"); }
static nimble_status_t cv_log_softmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "log_softmax"); }
static nimble_status_t cv_hardmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "hardmax"); }

static nimble_status_t cv_dropout(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  imp_val *t, *ratio;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &t));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &ratio));
  int64_t tm[1];
  size_t cnt;
  if (t && !(imp_const_ints(t, tm, 1, &cnt) && tm[0] == 0)) {
    /* Training mode (a constant true, or chosen at run time). */
    int64_t seed;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "seed", 0, &seed));
    if (ratio && ratio->has_sig && ratio->sig.rank == 1) NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, ratio, &ratio));
    imp_val *args[2] = {x, ratio}, *outs[2];
    size_t nout;
    nimble_named_attr_t sa = imp_attr_float("seed", (double)seed);
    NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "dropout_train", ratio ? 2 : 1, args, &sa, 1, outs, &nout));
    imp_val *y = outs[0], *mask = outs[1];
    if (!(imp_const_ints(t, tm, 1, &cnt) && tm[0] != 0)) {
      /* Run-time mode: where(t, training result, inference result). */
      imp_val *ts, *yes;
      NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, t, &ts));
      imp_val *w1[3] = {ts, y, x};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w1, NULL, 0, &y));
      NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_BOOL, 1, &yes));
      imp_val *w2[3] = {ts, mask, yes};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w2, NULL, 0, &mask));
    }
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, y));
    return imp_define(c, n, 1, mask);
  }
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "copy", x, &r));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, r));
  if (n->n_outputs > 1 && n->outputs[1][0]) {
    /* In inference the mask is all true. */
    imp_val *sh, *one, *m;
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "shape_of", x, &sh));
    nimble_named_attr_t at[2] = {imp_attr_str("dtype", "bool"), imp_attr_float("value", 1.0)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &sh, at, 2, &m));
    (void)one;
    m->has_sig = true;
    m->sig = x->sig;
    m->sig.dtype = NIMBLE_DTYPE_BOOL;
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, m));
  }
  return nimble_ok();
}

/* loss = -x[n, t[n, ...], ...] * weight[t], masked where t == ignore. */
static nimble_status_t nll(imp_ctx *c, const nimble_onnx_node *n, imp_val *x, imp_val *t, imp_val *weight,
                           imp_val **out) {
  const char *red;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "reduction", "mean", &red));
  bool has_ignore = nimble_onnx_node_attr(n, "ignore_index") != NULL;
  int64_t ignore;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "ignore_index", 0, &ignore));
  if (x->sig.rank < 2 || t->sig.rank + 1 != x->sig.rank)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "input must be [N, C, ...] and target [N, ...]");
  imp_val *safe = t, *mask = NULL, *w = NULL, *picked, *loss;
  if (has_ignore) {
    imp_val *ig, *zero;
    if (t->sig.dtype == NIMBLE_DTYPE_INT64) NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &ignore, true, &ig));
    else NIMBLE_RETURN_IF_ERROR(imp_scalar(c, t->sig.dtype, (double)ignore, &ig));
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, t->sig.dtype, 0, &zero));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "not_equal", t, ig, &mask));
    imp_val *args[3] = {mask, t, zero};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &safe));
  }
  nimble_named_attr_t a1 = imp_attr_int("axis", 1);
  imp_val *idx;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &safe, &a1, 1, &idx));
  imp_val *ga[2] = {x, idx};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "gather_elements", 2, ga, &a1, 1, &picked));
  int64_t one = 1;
  nimble_named_attr_t sq = imp_attr_ints("axes", &one, 1);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "squeeze", 1, &picked, &sq, 1, &picked));
  if (weight) {
    nimble_named_attr_t a0 = imp_attr_int("axis", 0);
    imp_val *ta[2] = {weight, safe};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, ta, &a0, 1, &w));
  }
  if (mask) {
    imp_val *mf;
    nimble_named_attr_t ca = imp_attr_str("dtype", nimble_dtype_name(x->sig.dtype));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &mask, &ca, 1, &mf));
    if (w) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", w, mf, &w));
    else w = mf;
  }
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", picked, &loss));
  if (w) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", loss, w, &loss));
  nimble_named_attr_t all[2] = {imp_attr_ints("axes", NULL, 0), imp_attr_int("keepdims", 0)};
  if (strcmp(red, "none") == 0) {
    *out = loss;
  } else if (strcmp(red, "sum") == 0) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "sum", 1, &loss, all, 2, out));
  } else if (strcmp(red, "mean") == 0) {
    if (w) {
      imp_val *sl, *sw;
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "sum", 1, &loss, all, 2, &sl));
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "sum", 1, &w, all, 2, &sw));
      NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", sl, sw, out));
    } else {
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mean", 1, &loss, all, 2, out));
    }
  } else {
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'reduction' has unknown value '%s'", red);
  }
  return nimble_ok();
}

static nimble_status_t cv_nll_loss(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *t, *w, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &t));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &w));
  NIMBLE_RETURN_IF_ERROR(nll(c, n, x, t, w, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_sce_loss(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *t, *w, *lp, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &t));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &w));
  nimble_named_attr_t a1 = imp_attr_int("axis", 1);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "log_softmax", 1, &x, &a1, 1, &lp));
  NIMBLE_RETURN_IF_ERROR(nll(c, n, lp, t, w, &r));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, r));
  return imp_define(c, n, 1, lp);
}

/* (x - mean) / sqrt(var + eps) over `axes`, keepdims; the pieces back. */
static nimble_status_t normalize(imp_ctx *c, imp_val *x, const int64_t *axes, size_t na, double eps, bool eps_after_sqrt,
                                 imp_val **y, imp_val **mean, imp_val **inv) {
  imp_val *d, *var, *e;
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", 1)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mean", 1, &x, at, 2, mean));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", x, *mean, &d));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", d, d, &var));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mean", 1, &var, at, 2, &var));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, eps, &e));
  if (eps_after_sqrt) {
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "sqrt", var, &var));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", var, e, &var));
    imp_val *one;
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", one, var, inv));
  } else {
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", var, e, &var));
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "rsqrt", var, inv));
  }
  return imp_e2(c, "multiply", d, *inv, y);
}

static nimble_status_t cv_instance_norm(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *scale, *bias, *y, *m, *inv;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &scale));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 2, &bias));
  double eps;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "epsilon", 1e-5f, &eps));
  if (x->sig.rank < 3) return imp_err(NIMBLE_INVALID_ARGUMENT, "input must have rank >= 3");
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  for (size_t i = 2; i < x->sig.rank; i++) axes[na++] = (int64_t)i;
  NIMBLE_RETURN_IF_ERROR(normalize(c, x, axes, na, eps, false, &y, &m, &inv));
  nimble_named_attr_t ea[2] = {imp_attr_int("axis", 1), imp_attr_int("num_newaxis", (int64_t)(x->sig.rank - 2))};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &scale, ea, 2, &scale));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &bias, ea, 2, &bias));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", y, scale, &y));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", y, bias, &y));
  return imp_define(c, n, 0, y);
}

static nimble_status_t cv_mvn(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *y, *m, *inv;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  const int64_t *av;
  size_t na;
  int64_t dflt[3] = {0, 2, 3};
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "axes", &av, &na));
  if (!na) {
    av = dflt;
    na = 3;
  }
  NIMBLE_RETURN_IF_ERROR(normalize(c, x, av, na, 1e-9, true, &y, &m, &inv));
  return imp_define(c, n, 0, y);
}

/* LayerNormalization with its optional Mean and InvStdDev outputs: the
 * layer_norm operator when only Y is used, the decomposition otherwise. */
static nimble_status_t cv_layer_norm_full(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *scale, *bias, *y, *m, *inv;
  int64_t axis;
  double eps;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &scale));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &bias));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", -1, &axis));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "epsilon", 1e-5f, &eps));
  size_t ax;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axis, x->sig.rank, &ax));
  bool extra = (n->n_outputs > 1 && n->outputs[1][0]) || (n->n_outputs > 2 && n->outputs[2][0]);
  if (!extra) {
    imp_val *args[3] = {x, scale, bias};
    nimble_named_attr_t at[2] = {imp_attr_int("axis", (int64_t)ax), imp_attr_float("epsilon", eps)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "layer_norm", bias ? 3 : 2, args, at, 2, &y));
    return imp_define(c, n, 0, y);
  }
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  for (size_t i = ax; i < x->sig.rank; i++) axes[na++] = (int64_t)i;
  NIMBLE_RETURN_IF_ERROR(normalize(c, x, axes, na, eps, false, &y, &m, &inv));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", y, scale, &y));
  if (bias) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", y, bias, &y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, m));
  return imp_define(c, n, 2, inv);
}

/* BatchNormalization in training mode: normalizes with the batch's mean
 * and (population) variance over all axes but 1, and updates the running
 * statistics: input * momentum + batch * (1 - momentum). */
static nimble_status_t batch_norm_training(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *v[5], *mean, *var, *mb, *d, *y, *k;
  for (size_t i = 0; i < 5; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &v[i]));
  imp_val *x = v[0];
  double eps, mom;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "epsilon", 1e-5f, &eps));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "momentum", 0.9f, &mom));
  if (x->sig.rank < 2) return imp_err(NIMBLE_INVALID_ARGUMENT, "input must have rank >= 2");
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  for (size_t i = 0; i < x->sig.rank; i++)
    if (i != 1) axes[na++] = (int64_t)i;
  nimble_named_attr_t red[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", 0)};
  nimble_named_attr_t ea[2] = {imp_attr_int("axis", 1), imp_attr_int("num_newaxis", (int64_t)(x->sig.rank - 2))};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mean", 1, &x, red, 2, &mean));
  imp_val *mean_b = mean, *scale = v[1], *bias = v[2];
  if (x->sig.rank > 2) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &mean, ea, 2, &mean_b));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &scale, ea, 2, &scale));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &bias, ea, 2, &bias));
  }
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", x, mean_b, &d));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", d, d, &var));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mean", 1, &var, red, 2, &var));
  imp_val *var_b = var;
  if (x->sig.rank > 2) NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &var, ea, 2, &var_b));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, eps, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", var_b, k, &mb));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "rsqrt", mb, &mb));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", d, mb, &y));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", y, scale, &y));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", y, bias, &y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, y));
  imp_val *m1, *m2, *rm, *rv, *t;
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, mom, &m1));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1.0 - mom, &m2));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", v[3], m1, &rm));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", mean, m2, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", rm, t, &rm));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", v[4], m1, &rv));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", var, m2, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", rv, t, &rv));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, rm));
  return imp_define(c, n, 2, rv);
}

static nimble_status_t cv_batch_norm_any(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t training;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "training_mode", 0, &training));
  if (training) return batch_norm_training(c, n);
  imp_val *a[5], *r;
  for (size_t i = 0; i < 5; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  double eps;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "epsilon", 1e-5f, &eps));
  nimble_named_attr_t at[2] = {imp_attr_int("axis", 1), imp_attr_float("epsilon", eps)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "batch_norm", 5, a, at, 2, &r));
  return imp_define(c, n, 0, r);
}

const imp_converter imp_converters_nn[] = {
    {"Gemm", cv_gemm},
    {"MatMul", cv_matmul},
    {"Conv", cv_conv},
    {"MaxPool", cv_maxpool},
    {"AveragePool", cv_avgpool},
    {"GlobalAveragePool", cv_global_avg},
    {"GlobalMaxPool", cv_global_max},
    {"Softmax", cv_softmax},
    {"LogSoftmax", cv_log_softmax},
    {"Hardmax", cv_hardmax},
    {"Dropout", cv_dropout},
    {"NegativeLogLikelihoodLoss", cv_nll_loss},
    {"SoftmaxCrossEntropyLoss", cv_sce_loss},
    {"InstanceNormalization", cv_instance_norm},
    {"MeanVarianceNormalization", cv_mvn},
    {"LayerNormalization", cv_layer_norm_full},
    {"BatchNormalization", cv_batch_norm_any},
};
const size_t imp_converters_nn_count = sizeof imp_converters_nn / sizeof imp_converters_nn[0];
