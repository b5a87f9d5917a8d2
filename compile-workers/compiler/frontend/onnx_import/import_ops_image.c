/* Image operators: Resize/Upsample, NonMaxSuppression, ConvTranspose,
 * GridSample, RoiAlign, LRN. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"


/* Float elements of a constant (scales). */
static bool const_floats(const imp_val *v, double *out, size_t cap, size_t *n) {
  if (!v || v->expr->kind != NIMBLE_EXPR_CONSTANT) return false;
  const nimble_const_tensor_t *k = &v->expr->u.constant;
  if (k->num_elements > cap) return false;
  for (size_t i = 0; i < k->num_elements; i++) {
    if (k->dtype == NIMBLE_DTYPE_FLOAT32) {
      float f;
      memcpy(&f, (const char *)k->data + 4 * i, 4);
      out[i] = f;
    } else if (k->dtype == NIMBLE_DTYPE_FLOAT64) {
      memcpy(&out[i], (const char *)k->data + 8 * i, 8);
    } else {
      return false;
    }
  }
  *n = k->num_elements;
  return true;
}

static nimble_status_t resize_attrs(const nimble_onnx_node *n, bool upsample, nimble_named_attr_t *at) {
  const char *mode, *ctm, *nm;
  double cubic;
  int64_t excl;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "mode", "nearest", &mode));
  if (strcmp(mode, "bilinear") == 0 || strcmp(mode, "trilinear") == 0) mode = "linear";
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "coordinate_transformation_mode",
                                  upsample || n->opset < 11 ? "asymmetric" : "half_pixel", &ctm));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(
      n, "nearest_mode", upsample || n->opset < 11 ? "floor" : "round_prefer_floor", &nm));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "cubic_coeff_a", -0.75f, &cubic));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "exclude_outside", 0, &excl));
  at[0] = imp_attr_str("mode", mode);
  at[1] = imp_attr_str("coordinate_transformation_mode", ctm);
  at[2] = imp_attr_str("nearest_mode", nm);
  at[3] = imp_attr_float("cubic_coeff_a", cubic);
  at[4] = imp_attr_int("exclude_outside", excl);
  return nimble_ok();
}

static bool is_crop(const nimble_onnx_node *n) {
  const char *ctm;
  nimble_status_t st = nimble_onnx_node_get_string(n, "coordinate_transformation_mode", "", &ctm);
  if (st) {
    nimble_status_free(st);
    return false;
  }
  return strcmp(ctm, "tf_crop_and_resize") == 0;
}

/* Scales or sizes known only at run time, or tf_crop_and_resize (its roi
 * is input 2 of dyn_resize). */
static nimble_status_t dyn_resize(imp_ctx *c, const nimble_onnx_node *n, imp_val *x, imp_val *s, bool upsample) {
  nimble_named_attr_t at[6];
  NIMBLE_RETURN_IF_ERROR(resize_attrs(n, upsample, at));
  imp_val *args[3] = {x, s, NULL}, *r;
  size_t na = 2, nat = 5;
  if (is_crop(n)) {
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &args[2]));
    if (!args[2]) return imp_err(NIMBLE_INVALID_ARGUMENT, "tf_crop_and_resize needs a roi");
    double ev;
    NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "extrapolation_value", 0.0f, &ev));
    at[nat++] = imp_attr_float("extrapolation_value", ev);
    na = 3;
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_resize", na, args, at, nat, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_resize(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *scales = NULL, *sizes = NULL, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  bool upsample = strcmp(n->op_type, "Upsample") == 0;
  double sv[NIMBLE_MAX_RANK];
  size_t ns = 0;
  int64_t out[NIMBLE_MAX_RANK];
  size_t nsz = 0;
  if (upsample && n->opset < 9) {
    const float *f;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_floats(n, "scales", &f, &ns));
    if (ns > NIMBLE_MAX_RANK) return imp_err(NIMBLE_INVALID_ARGUMENT, "too many scales");
    for (size_t i = 0; i < ns; i++) sv[i] = f[i];
  } else {
    size_t si = upsample || n->opset < 11 ? 1 : 2;
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, si, &scales));
    if (!upsample && n->opset >= 11) NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &sizes));
    if (scales && scales->has_sig && scales->sig.rank == 1 && scales->sig.dims[0].kind == NIMBLE_DIM_CONST &&
        scales->sig.dims[0].value == 0)
      scales = NULL; /* an empty tensor stands for "not given" */
    if (sizes) {
      if (!imp_const_ints(sizes, out, NIMBLE_MAX_RANK, &nsz) || is_crop(n)) return dyn_resize(c, n, x, sizes, upsample);
    } else if (scales) {
      if (!const_floats(scales, sv, NIMBLE_MAX_RANK, &ns) || is_crop(n)) return dyn_resize(c, n, x, scales, upsample);
    } else {
      return imp_err(NIMBLE_INVALID_ARGUMENT, "needs scales or sizes");
    }
  }
  if (!nsz) {
    if (ns != x->sig.rank) return imp_err(NIMBLE_INVALID_ARGUMENT, "%zu scales for rank %zu", ns, x->sig.rank);
    bool exact = true;
    for (size_t i = 0; i < ns; i++) {
      nimble_dim_t d = imp_resolve(c, x->sig.dims[i]);
      if (sv[i] == 1.0) {
        out[i] = d.kind == NIMBLE_DIM_CONST ? d.value : -1;
      } else if (d.kind == NIMBLE_DIM_CONST && sv[i] > 0 && (double)d.value * sv[i] < 9.0e15) {
        out[i] = (int64_t)floor((double)d.value * sv[i]);
        /* Static sizes stand for the scale out / in: exact only when
         * in * scale is an integer (ONNX maps coordinates by the scale). */
        exact = exact && (double)out[i] == (double)d.value * sv[i];
      } else {
        exact = false;
      }
    }
    if (!exact) {
      /* The scales as a constant input: the kernel uses them as given. */
      float fv[NIMBLE_MAX_RANK];
      int64_t len = (int64_t)ns;
      for (size_t i = 0; i < ns; i++) fv[i] = (float)sv[i];
      imp_val *k;
      NIMBLE_RETURN_IF_ERROR(imp_const(c, NIMBLE_DTYPE_FLOAT32, 1, &len, fv, &k));
      return dyn_resize(c, n, x, k, upsample);
    }
    nsz = ns;
  }
  nimble_named_attr_t at[6];
  NIMBLE_RETURN_IF_ERROR(resize_attrs(n, upsample, at + 1));
  at[0] = imp_attr_ints("sizes", out, nsz);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "resize", 1, &x, at, 6, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_nms(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[5], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &a[1]));
  size_t na = 2;
  for (size_t i = 2; i < 5; i++) {
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, i, &a[i]));
    if (a[i]) na = i + 1;
  }
  for (size_t i = 2; i < na; i++) {
    if (a[i]) {
      if (a[i]->has_sig && a[i]->sig.rank == 1) NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, a[i], &a[i]));
      continue;
    }
    /* An omitted middle input takes ONNX's default. */
    if (i == 2) NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, 0, &a[i]));
    else NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_FLOAT32, 0, &a[i]));
  }
  int64_t cpb;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "center_point_box", 0, &cpb));
  nimble_named_attr_t at = imp_attr_int("center_point_box", cpb);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "non_max_suppression", na, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_conv_transpose(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *w, *b, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &w));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &b));
  if ((x->sig.rank != 4 && x->sig.rank != 3) || w->sig.rank != x->sig.rank)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only 1-D and 2-D transposed convolutions are supported");
  size_t nsp = x->sig.rank - 2;
  int64_t s[2] = {1, 1}, d[2] = {1, 1}, op[2] = {0, 0}, pads[4] = {0, 0, 0, 0}, k[2], group;
  const int64_t *v;
  size_t cnt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "group", 1, &group));
#define READ(name, arr, want)                                                            \
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, name, &v, &cnt));                  \
  if (cnt && cnt != (want))                                                              \
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute '%s' has %zu values", name, cnt); \
  if (cnt) memcpy(arr, v, cnt * sizeof *v);
  READ("strides", s, nsp);
  READ("dilations", d, nsp);
  READ("output_padding", op, nsp);
  READ("pads", pads, 2 * nsp);
  for (size_t i = 0; i < nsp; i++) {
    nimble_dim_t kd = imp_resolve(c, w->sig.dims[2 + i]);
    k[i] = kd.kind == NIMBLE_DIM_CONST ? kd.value : 1;
  }
  READ("kernel_shape", k, nsp);
  int64_t oshape[2];
  size_t nos = 0;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "output_shape", &v, &nos));
  if (nos) {
    if (nos != nsp && nos != nsp + 2) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'output_shape' has %zu values", nos);
    memcpy(oshape, v + (nos - nsp), nsp * sizeof *v);
  }
#undef READ
  const char *ap;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "auto_pad", "NOTSET", &ap));
  bool same = strncmp(ap, "SAME", 4) == 0;
  for (size_t i = 0; i < nsp; i++)
    if (s[i] < 1 || d[i] < 1 || k[i] < 1 || s[i] > (1 << 20) || d[i] > (1 << 20) || k[i] > (1 << 20) ||
        op[i] < 0 || op[i] > (1 << 20))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "strides, dilations, kernel and output_padding are out of range");
  if (nos || same) {
    for (size_t i = 0; i < nsp; i++) {
      nimble_dim_t in = imp_resolve(c, x->sig.dims[2 + i]);
      if (in.kind != NIMBLE_DIM_CONST) return imp_err(NIMBLE_UNIMPLEMENTED, "output_shape/auto_pad need static dims");
      if (in.value > ((int64_t)1 << 40) || (nos && (oshape[i] < 0 || oshape[i] > ((int64_t)1 << 40))))
        return imp_err(NIMBLE_OUT_OF_RANGE, "spatial dims out of range");
      int64_t target = nos ? oshape[i] : in.value * s[i];
      int64_t total = s[i] * (in.value - 1) + op[i] + ((k[i] - 1) * d[i] + 1) - target;
      if (total < 0) {
        /* The requested shape is larger: the rest is output padding. */
        op[i] -= total;
        total = 0;
      }
      bool upper = strcmp(ap, "SAME_LOWER") != 0;
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + nsp] = total - pads[i];
    }
  }
  if (nsp == 1) {
    nimble_named_attr_t a2 = imp_attr_int("axis", 2);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &x, &a2, 1, &x));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &w, &a2, 1, &w));
    s[1] = s[0]; s[0] = 1;
    d[1] = d[0]; d[0] = 1;
    op[1] = op[0]; op[0] = 0;
    int64_t p0 = pads[0], p1 = pads[1];
    pads[0] = 0; pads[1] = p0; pads[2] = 0; pads[3] = p1;
  }
  nimble_named_attr_t at[5] = {imp_attr_ints("strides", s, 2), imp_attr_ints("pads", pads, 4),
                               imp_attr_ints("dilations", d, 2), imp_attr_ints("output_padding", op, 2),
                               imp_attr_int("groups", group)};
  imp_val *args[3] = {x, w, b};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "conv2d_transpose", b ? 3 : 2, args, at, 5, &r));
  if (nsp == 1) {
    int64_t ax = 2;
    nimble_named_attr_t sq = imp_attr_ints("axes", &ax, 1);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "squeeze", 1, &r, &sq, 1, &r));
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_grid_sample(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t ac;
  const char *mode, *pm;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "align_corners", 0, &ac));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "mode", "bilinear", &mode));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "padding_mode", "zeros", &pm));
  nimble_named_attr_t at[3] = {imp_attr_int("align_corners", ac), imp_attr_str("mode", mode), imp_attr_str("padding_mode", pm)};
  return imp_simple(c, n, "grid_sample", 2, at, 3);
}

static nimble_status_t cv_roi_align(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t oh, ow, sr;
  double ss;
  const char *mode, *ctm;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "output_height", 1, &oh));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "output_width", 1, &ow));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "sampling_ratio", 0, &sr));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "spatial_scale", 1.0f, &ss));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "mode", "avg", &mode));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "coordinate_transformation_mode", "half_pixel", &ctm));
  nimble_named_attr_t at[6] = {imp_attr_str("mode", mode), imp_attr_int("output_height", oh),
                               imp_attr_int("output_width", ow), imp_attr_int("sampling_ratio", sr),
                               imp_attr_float("spatial_scale", ss), imp_attr_str("coordinate_transformation_mode", ctm)};
  return imp_simple(c, n, "roi_align", 3, at, 6);
}

/* LRN: x / (bias + alpha / size * sum of squares over a window of
 * channels) ^ beta, the window sum as an average pool (padding counted)
 * over a [N, 1, C, H*W] view. */
static nimble_status_t cv_lrn(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *sq, *sum, *t, *k;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  int64_t size;
  double alpha, beta, bias;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "size", &size));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1e-4f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "beta", 0.75f, &beta));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "bias", 1.0f, &bias));
  if (x->sig.rank != 4 || size < 1) return imp_err(NIMBLE_UNIMPLEMENTED, "LRN needs a 4-D input and size >= 1");
  nimble_dim_t ch = imp_resolve(c, x->sig.dims[1]);
  if (ch.kind != NIMBLE_DIM_CONST) return imp_err(NIMBLE_UNIMPLEMENTED, "LRN needs a static channel count");
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, x, &sq));
  int64_t view[4] = {0, 1, ch.value, -1};
  nimble_named_attr_t va = imp_attr_ints("newshape", view, 4);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &sq, &va, 1, &sum));
  int64_t ks[2] = {size, 1}, pads[4] = {(size - 1) / 2, 0, size - 1 - (size - 1) / 2, 0};
  nimble_named_attr_t pa[4] = {imp_attr_ints("kernel_shape", ks, 2), imp_attr_ints("pads", pads, 4),
                               imp_attr_int("count_include_pad", 1), imp_attr_int("ceil_mode", 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "avg_pool2d", 1, &sum, pa, 4, &sum));
  imp_val *sh;
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "shape_of", x, &sh));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "dyn_reshape", sum, sh, &sum));
  sum->sig = x->sig;
  /* avg * size = sum; times alpha / size: avg * alpha. */
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", sum, k, &t));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, bias, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", t, k, &t));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, beta, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", t, k, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", x, t, &t));
  return imp_define(c, n, 0, t);
}

const imp_converter imp_converters_image[] = {
    {"Resize", cv_resize},
    {"Upsample", cv_resize},
    {"NonMaxSuppression", cv_nms},
    {"ConvTranspose", cv_conv_transpose},
    {"GridSample", cv_grid_sample},
    {"RoiAlign", cv_roi_align},
    {"LRN", cv_lrn},
};
const size_t imp_converters_image_count = sizeof imp_converters_image / sizeof imp_converters_image[0];
