/* Quantization: DequantizeLinear, QuantizeLinear, DynamicQuantizeLinear,
 * MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, as casts and float
 * or int32 arithmetic around the registry operators. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"


/* A per-axis scale or zero point [C] made to broadcast along `axis` of a
 * rank-r tensor. */
static nimble_status_t along_axis(imp_ctx *c, imp_val *v, int64_t axis, size_t rank, imp_val **out) {
  *out = v;
  if (!v->has_sig || v->sig.rank != 1 || rank < 2) return nimble_ok();
  size_t ax;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axis, rank, &ax));
  if (ax + 1 == rank) return nimble_ok();
  nimble_named_attr_t ea[2] = {imp_attr_int("axis", 1), imp_attr_int("num_newaxis", (int64_t)(rank - 1 - ax))};
  return imp_emit(c, "expand_dims", 1, &v, ea, 2, out);
}

static nimble_status_t to_dtype(imp_ctx *c, imp_val *v, nimble_dtype_t dt, imp_val **out) {
  if (v->sig.dtype == dt) {
    *out = v;
    return nimble_ok();
  }
  nimble_named_attr_t a = imp_attr_str("dtype", nimble_dtype_name(dt));
  return imp_emit(c, "cast", 1, &v, &a, 1, out);
}

/* (x - zp) * scale in float32. */
static nimble_status_t dequantize(imp_ctx *c, imp_val *x, imp_val *scale, imp_val *zp, int64_t axis, imp_val **out) {
  imp_val *xf, *s;
  NIMBLE_RETURN_IF_ERROR(to_dtype(c, x, NIMBLE_DTYPE_FLOAT32, &xf));
  if (zp) {
    imp_val *zf;
    NIMBLE_RETURN_IF_ERROR(to_dtype(c, zp, NIMBLE_DTYPE_FLOAT32, &zf));
    NIMBLE_RETURN_IF_ERROR(along_axis(c, zf, axis, x->sig.rank, &zf));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", xf, zf, &xf));
  }
  NIMBLE_RETURN_IF_ERROR(along_axis(c, scale, axis, x->sig.rank, &s));
  return imp_e2(c, "multiply", xf, s, out);
}

/* saturate(round(x / scale) + zp) in zp's type (uint8 by default). */
static nimble_status_t quantize(imp_ctx *c, imp_val *x, imp_val *scale, imp_val *zp, int64_t axis, imp_val **out) {
  imp_val *s, *q;
  nimble_dtype_t dt = zp ? zp->sig.dtype : NIMBLE_DTYPE_UINT8;
  if (dt != NIMBLE_DTYPE_UINT8 && dt != NIMBLE_DTYPE_INT8)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only uint8 and int8 quantization is supported");
  NIMBLE_RETURN_IF_ERROR(along_axis(c, scale, axis, x->sig.rank, &s));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", x, s, &q));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "round", q, &q));
  if (zp) {
    imp_val *zf;
    NIMBLE_RETURN_IF_ERROR(to_dtype(c, zp, x->sig.dtype, &zf));
    NIMBLE_RETURN_IF_ERROR(along_axis(c, zf, axis, x->sig.rank, &zf));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", q, zf, &q));
  }
  nimble_named_attr_t cl[2] = {imp_attr_float("min", dt == NIMBLE_DTYPE_UINT8 ? 0 : -128),
                               imp_attr_float("max", dt == NIMBLE_DTYPE_UINT8 ? 255 : 127)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "clip", 1, &q, cl, 2, &q));
  return to_dtype(c, q, dt, out);
}

static nimble_status_t cv_dequantize(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *s, *zp, *r;
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &s));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &zp));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 1, &axis));
  NIMBLE_RETURN_IF_ERROR(dequantize(c, x, s, zp, axis, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_quantize(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *s, *zp, *r;
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &s));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &zp));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "axis", 1, &axis));
  if (!nimble_dtype_is_float(x->sig.dtype)) return imp_err(NIMBLE_INVALID_ARGUMENT, "input must be float");
  NIMBLE_RETURN_IF_ERROR(quantize(c, x, s, zp, axis, &r));
  return imp_define(c, n, 0, r);
}

/* scale = (max(x, 0) - min(x, 0)) / 255, zero point = saturate(round(-min
 * / scale)), y = quantize(x). */
static nimble_status_t cv_dynamic_quantize(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *mn, *mx, *zero, *k, *scale, *zp, *y;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  nimble_named_attr_t all[2] = {imp_attr_ints("axes", NULL, 0), imp_attr_int("keepdims", 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "min", 1, &x, all, 2, &mn));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "max", 1, &x, all, 2, &mx));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "minimum", mn, zero, &mn));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "maximum", mx, zero, &mx));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", mx, mn, &scale));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 255, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", scale, k, &scale));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", mn, scale, &zp));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", zp, &zp));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "round", zp, &zp));
  nimble_named_attr_t cl[2] = {imp_attr_float("min", 0), imp_attr_float("max", 255)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "clip", 1, &zp, cl, 2, &zp));
  NIMBLE_RETURN_IF_ERROR(to_dtype(c, zp, NIMBLE_DTYPE_UINT8, &zp));
  NIMBLE_RETURN_IF_ERROR(quantize(c, x, scale, zp, 1, &y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, y));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, scale));
  return imp_define(c, n, 2, zp);
}

/* (x - zp) as int32, zp broadcast along `axis` when per-channel. */
static nimble_status_t minus_zp(imp_ctx *c, imp_val *x, imp_val *zp, int64_t axis, imp_val **out) {
  imp_val *xi;
  NIMBLE_RETURN_IF_ERROR(to_dtype(c, x, NIMBLE_DTYPE_INT32, &xi));
  if (!zp) {
    *out = xi;
    return nimble_ok();
  }
  imp_val *zi;
  NIMBLE_RETURN_IF_ERROR(to_dtype(c, zp, NIMBLE_DTYPE_INT32, &zi));
  NIMBLE_RETURN_IF_ERROR(along_axis(c, zi, axis, x->sig.rank, &zi));
  return imp_e2(c, "subtract", xi, zi, out);
}

static nimble_status_t cv_matmul_integer(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a, *b, *az, *bz, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &b));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &az));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &bz));
  /* A's zero point is per row (axis -2), B's per column (axis -1). */
  NIMBLE_RETURN_IF_ERROR(minus_zp(c, a, az, a->sig.rank >= 2 ? (int64_t)a->sig.rank - 2 : 0, &a));
  NIMBLE_RETURN_IF_ERROR(minus_zp(c, b, bz, -1, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "matmul", a, b, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_conv_integer(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *w, *xz, *wz, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &w));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &xz));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &wz));
  NIMBLE_RETURN_IF_ERROR(minus_zp(c, x, xz, 1, &x));
  NIMBLE_RETURN_IF_ERROR(minus_zp(c, w, wz, 0, &w));
  NIMBLE_RETURN_IF_ERROR(imp_conv(c, n, x, w, NULL, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_qlinear_matmul(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *v[8], *a, *b, *r;
  for (size_t i = 0; i < 8; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &v[i]));
  NIMBLE_RETURN_IF_ERROR(dequantize(c, v[0], v[1], v[2], v[0]->sig.rank >= 2 ? (int64_t)v[0]->sig.rank - 2 : 0, &a));
  NIMBLE_RETURN_IF_ERROR(dequantize(c, v[3], v[4], v[5], -1, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "matmul", a, b, &r));
  NIMBLE_RETURN_IF_ERROR(quantize(c, r, v[6], v[7], 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_qlinear_conv(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *v[8], *bias, *x, *w, *r;
  for (size_t i = 0; i < 8; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &v[i]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 8, &bias));
  NIMBLE_RETURN_IF_ERROR(dequantize(c, v[0], v[1], v[2], 1, &x));
  NIMBLE_RETURN_IF_ERROR(dequantize(c, v[3], v[4], v[5], 0, &w));
  if (bias) {
    /* int32 bias in units of x_scale * w_scale. */
    imp_val *bs;
    NIMBLE_RETURN_IF_ERROR(to_dtype(c, bias, NIMBLE_DTYPE_FLOAT32, &bias));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", v[1], v[4], &bs));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", bias, bs, &bias));
  }
  NIMBLE_RETURN_IF_ERROR(imp_conv(c, n, x, w, bias, &r));
  NIMBLE_RETURN_IF_ERROR(quantize(c, r, v[6], v[7], 1, &r));
  return imp_define(c, n, 0, r);
}

const imp_converter imp_converters_quant[] = {
    {"DequantizeLinear", cv_dequantize},
    {"QuantizeLinear", cv_quantize},
    {"DynamicQuantizeLinear", cv_dynamic_quantize},
    {"MatMulInteger", cv_matmul_integer},
    {"ConvInteger", cv_conv_integer},
    {"QLinearMatMul", cv_qlinear_matmul},
    {"QLinearConv", cv_qlinear_conv},
};
const size_t imp_converters_quant_count = sizeof imp_converters_quant / sizeof imp_converters_quant[0];
