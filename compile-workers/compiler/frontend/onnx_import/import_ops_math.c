/* Math and normalization: compositions of registry operators (hyperbolic
 * functions, IsNaN/IsInf, Celu, Shrink, instance/mean-variance/layer
 * normalization, training batch norm, ArgMax/ArgMin with select_last_index,
 * Pow across types), losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss), and direct mappings (Acos, Asin, Atan, Det,
 * windows, Einsum, BitShift, random sampling). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"


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

static nimble_status_t exp_pair(imp_ctx *c, imp_val *x, imp_val **ep, imp_val **em) {
  imp_val *nx;
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", x, ep));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", x, &nx));
  return imp_e1(c, "exp", nx, em);
}

static nimble_status_t cv_sinh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *b, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(exp_pair(c, x, &a, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", a, b, &r));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", r, h, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_cosh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *b, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(exp_pair(c, x, &a, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", a, b, &r));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", r, h, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t log_hyp(imp_ctx *c, const nimble_onnx_node *n, double s) {
  imp_val *x, *sq, *k, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, x, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, s, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", sq, k, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "sqrt", sq, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", x, sq, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "log", r, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_asinh(imp_ctx *c, const nimble_onnx_node *n) { return log_hyp(c, n, 1.0); }

static nimble_status_t cv_acosh(imp_ctx *c, const nimble_onnx_node *n) { return log_hyp(c, n, -1.0); }

static nimble_status_t cv_atanh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *one, *half, *p, *m, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1.0, &one));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &half));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", one, x, &p));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", one, x, &m));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", p, m, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "log", r, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", half, r, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_isnan(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "not_equal", x, x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_isinf(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *inf, *r;
  int64_t neg, pos;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "detect_negative", 1, &neg));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "detect_positive", 1, &pos));
  if (neg && pos) {
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, INFINITY, &inf));
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", x, &r));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "equal", r, inf, &r));
  } else if (neg || pos) {
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, pos ? INFINITY : -INFINITY, &inf));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "equal", x, inf, &r));
  } else {
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, x, &r)); /* false everywhere, NaN included */
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_celu(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *al, *zero, *one, *pos, *t, *neg, *r;
  double alpha;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &al));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "maximum", x, zero, &pos));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", x, al, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", t, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", t, one, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", al, t, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "minimum", t, zero, &neg));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", pos, neg, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_shrink(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *l, *ml, *b, *zero, *lo, *hi, *xp, *xm, *r;
  double lambd, bias;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "lambd", 0.5f, &lambd));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "bias", 0.0f, &bias));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, lambd, &l));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, -lambd, &ml));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, bias, &b));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, ml, &lo));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "greater", x, l, &hi));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", x, b, &xp));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", x, b, &xm));
  imp_val *w1[3] = {hi, xm, zero};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w1, NULL, 0, &r));
  imp_val *w2[3] = {lo, xp, r};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w2, NULL, 0, &r));
  return imp_define(c, n, 0, r);
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

/* Pow: ONNX lets the exponent have another type; the result has the
 * base's. */
static nimble_status_t cv_pow(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *y, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &y));
  if (x->sig.dtype == y->sig.dtype) {
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t to_x = imp_attr_str("dtype", nimble_dtype_name(x->sig.dtype));
  if (nimble_dtype_is_float(x->sig.dtype)) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &y, &to_x, 1, &y));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
  } else {
    nimble_named_attr_t to_y = imp_attr_str("dtype", nimble_dtype_name(y->sig.dtype));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &x, &to_y, 1, &x));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &r, &to_x, 1, &r));
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_acos(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "acos", 1, NULL, 0); }

static nimble_status_t cv_asin(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "asin", 1, NULL, 0); }

static nimble_status_t cv_atan(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "atan", 1, NULL, 0); }

static nimble_status_t cv_det(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "det", 1, NULL, 0); }

static nimble_status_t cv_window(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *size, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &size));
  int64_t periodic, dt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "periodic", 1, &periodic));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "output_datatype", NIMBLE_ONNX_FLOAT, &dt));
  nimble_dtype_t d;
  NIMBLE_RETURN_IF_ERROR(imp_dtype((int)dt, &d));
  const char *kind = strcmp(n->op_type, "HannWindow") == 0 ? "hann" : strcmp(n->op_type, "HammingWindow") == 0 ? "hamming" : "blackman";
  nimble_named_attr_t at[3] = {imp_attr_str("kind", kind), imp_attr_int("periodic", periodic ? 1 : 0),
                               imp_attr_str("dtype", nimble_dtype_name(d))};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "window", 1, &size, at, 3, &r));
  return imp_define(c, n, 0, r);
}

/* A one-element tensor input as a scalar (ONNX allows [1] or []). */
static nimble_status_t scalar_input(imp_ctx *c, imp_val *v, imp_val **out) {
  if (v && v->has_sig && v->sig.rank == 1) return imp_to_scalar(c, v, out);
  *out = v;
  return nimble_ok();
}

/* DFT-17: x, [dft_length]; axis, inverse, onesided. */
static nimble_status_t cv_dft(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[2], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &a[1]));
  if (a[1]) NIMBLE_RETURN_IF_ERROR(scalar_input(c, a[1], &a[1]));
  int64_t axis, inverse, onesided;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 1, &axis));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "inverse", 0, &inverse));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "onesided", 0, &onesided));
  nimble_named_attr_t at[3] = {imp_attr_int("axis", axis), imp_attr_int("inverse", inverse ? 1 : 0),
                               imp_attr_int("onesided", onesided ? 1 : 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dft", a[1] ? 2 : 1, a, at, 3, &r));
  return imp_define(c, n, 0, r);
}

/* STFT-17: signal, frame_step, [window], [frame_length]; onesided. The
 * optional inputs are packed after frame_step, has_window telling which. */
static nimble_status_t cv_stft(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[4], *w, *len, *r;
  size_t na = 2;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &a[1]));
  NIMBLE_RETURN_IF_ERROR(scalar_input(c, a[1], &a[1]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &w));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &len));
  if (w) a[na++] = w;
  if (len) NIMBLE_RETURN_IF_ERROR(scalar_input(c, len, &a[na++]));
  int64_t onesided;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "onesided", 1, &onesided));
  nimble_named_attr_t at[2] = {imp_attr_int("onesided", onesided ? 1 : 0), imp_attr_int("has_window", w != NULL)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "stft", na, a, at, 2, &r));
  return imp_define(c, n, 0, r);
}

/* MelWeightMatrix-17: five scalars; output_datatype. */
static nimble_status_t cv_mel(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[5], *r;
  for (size_t i = 0; i < 5; i++) {
    NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
    NIMBLE_RETURN_IF_ERROR(scalar_input(c, a[i], &a[i]));
  }
  int64_t dt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "output_datatype", NIMBLE_ONNX_FLOAT, &dt));
  nimble_dtype_t d;
  NIMBLE_RETURN_IF_ERROR(imp_dtype((int)dt, &d));
  nimble_named_attr_t at = imp_attr_str("dtype", nimble_dtype_name(d));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "mel_weight_matrix", 5, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
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

static nimble_status_t random_dtype(const nimble_onnx_node *n, const char **out) {
  int64_t dt;
  *out = "";
  if (!nimble_onnx_node_attr(n, "dtype")) return nimble_ok();
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "dtype", NIMBLE_ONNX_FLOAT, &dt));
  nimble_dtype_t d;
  NIMBLE_RETURN_IF_ERROR(imp_dtype((int)dt, &d));
  *out = nimble_dtype_name(d);
  return nimble_ok();
}

static nimble_status_t cv_random_like(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  const char *dt;
  double a = 0, b = 1, seed;
  NIMBLE_RETURN_IF_ERROR(random_dtype(n, &dt));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "seed", 0.0f, &seed));
  bool normal = strstr(n->op_type, "Normal") != NULL;
  if (strncmp(n->op_type, "RandomUniform", 13) == 0 || normal) {
    NIMBLE_RETURN_IF_ERROR(imp_get_float(n, normal ? "mean" : "low", 0.0f, &a));
    NIMBLE_RETURN_IF_ERROR(imp_get_float(n, normal ? "scale" : "high", 1.0f, &b));
  }
  if (strcmp(n->op_type, "RandomUniform") == 0 || strcmp(n->op_type, "RandomNormal") == 0) {
    /* Static shape: samples shaped like zeros of that shape. */
    const int64_t *shape;
    size_t ns;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "shape", &shape, &ns));
    nimble_named_attr_t za[2] = {imp_attr_ints("shape", shape, ns), imp_attr_str("dtype", dt[0] ? dt : "float32")};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "zeros", 0, NULL, za, 2, &x));
  }
  if (strcmp(n->op_type, "Bernoulli") == 0) {
    nimble_named_attr_t at[2] = {imp_attr_float("seed", seed), imp_attr_str("dtype", dt)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "bernoulli", 1, &x, at, 2, &r));
  } else {
    nimble_named_attr_t at[4] = {imp_attr_float(normal ? "mean" : "low", a), imp_attr_float(normal ? "scale" : "high", b),
                                 imp_attr_float("seed", seed), imp_attr_str("dtype", dt)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, normal ? "random_normal_like" : "random_uniform_like", 1, &x, at, 4, &r));
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_einsum(imp_ctx *c, const nimble_onnx_node *n) {
  const char *eq;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "equation", "", &eq));
  imp_val *args[16], *r;
  if (n->n_inputs == 0 || n->n_inputs > 16) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs 1 to 16 inputs");
  for (size_t i = 0; i < n->n_inputs; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &args[i]));
  nimble_named_attr_t at = imp_attr_str("equation", eq);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "einsum", n->n_inputs, args, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_bit_shift(imp_ctx *c, const nimble_onnx_node *n) {
  const char *dir;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "direction", "LEFT", &dir));
  nimble_named_attr_t at = imp_attr_str("direction", dir);
  return imp_simple(c, n, "bit_shift", 2, &at, 1);
}

const imp_converter imp_converters_math[] = {
    {"NegativeLogLikelihoodLoss", cv_nll_loss},
    {"SoftmaxCrossEntropyLoss", cv_sce_loss},
    {"Sinh", cv_sinh},
    {"Cosh", cv_cosh},
    {"Asinh", cv_asinh},
    {"Acosh", cv_acosh},
    {"Atanh", cv_atanh},
    {"IsNaN", cv_isnan},
    {"IsInf", cv_isinf},
    {"Celu", cv_celu},
    {"Shrink", cv_shrink},
    {"InstanceNormalization", cv_instance_norm},
    {"MeanVarianceNormalization", cv_mvn},
    {"LayerNormalization", cv_layer_norm_full},
    {"ArgMax", cv_argmax},
    {"ArgMin", cv_argmin},
    {"Pow", cv_pow},
    {"Acos", cv_acos},
    {"Asin", cv_asin},
    {"Atan", cv_atan},
    {"Det", cv_det},
    {"HannWindow", cv_window},
    {"HammingWindow", cv_window},
    {"BlackmanWindow", cv_window},
    {"DFT", cv_dft},
    {"STFT", cv_stft},
    {"MelWeightMatrix", cv_mel},
    {"BatchNormalization", cv_batch_norm_any},
    {"RandomUniformLike", cv_random_like},
    {"RandomNormalLike", cv_random_like},
    {"RandomUniform", cv_random_like},
    {"RandomNormal", cv_random_like},
    {"Bernoulli", cv_random_like},
    {"Einsum", cv_einsum},
    {"BitShift", cv_bit_shift},
};
const size_t imp_converters_math_count = sizeof imp_converters_math / sizeof imp_converters_math[0];
