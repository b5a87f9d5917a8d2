/* Image operators added for the ONNX importer: resize (output dims as an
 * attribute: the importer resolves ONNX's scales or sizes) and dyn_resize,
 * transposed convolution, grid sampling, RoI align, and non-maximum
 * suppression (an upper-bound shape). */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

/* sizes[i] >= 0 is the output extent; -1 keeps the input's dim. */
static nimble_status_t rel_resize(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  const int64_t *sizes = A_INTS(call, "sizes", &n);
  char buf[160];
  if (n != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sizes has %zu values for input %s", n, SIG_STR(x, buf));
  if (!nimble_dtype_is_float(x->dtype) && !nimble_dtype_is_int(x->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "resize needs a numeric input, got %s", SIG_STR(x, buf));
  const char *mode = A_STRING(call, "mode");
  if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0 && strcmp(mode, "cubic") != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown resize mode '%s'", mode);
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < n; i++) {
    if (sizes[i] < -1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "size %" PRId64 " at %zu", sizes[i], i);
    if (sizes[i] >= 0) r.dims[i] = nimble_dim_const(sizes[i]);
  }
  return nimble_rel_one(out, num_out, &r);
}

/* dyn_resize(x, s): s is a 1-D tensor of scales (float) or of sizes (int),
 * one per dim; dims are known where its values are. */
static nimble_status_t rel_dyn_resize(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *s = &call->inputs[1];
  char a[160], b[160];
  nimble_dim_t len = nimble_dim_resolve(call->ctx, s->rank == 1 ? s->dims[0] : nimble_dim_any());
  if (s->rank != 1 || (len.kind == NIMBLE_DIM_CONST && len.value != (int64_t)x->rank))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "scales or sizes %s must have one value per dim of %s",
                              SIG_STR(s, a), SIG_STR(x, b));
  if (call->num_inputs == 3) {
    const nimble_tensor_sig_t *roi = &call->inputs[2];
    nimble_dim_t rl = nimble_dim_resolve(call->ctx, roi->rank == 1 ? roi->dims[0] : nimble_dim_any());
    if (roi->rank != 1 || !nimble_dtype_is_float(roi->dtype) ||
        (rl.kind == NIMBLE_DIM_CONST && rl.value != 2 * (int64_t)x->rank))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "roi %s must hold a start and an end per dim of %s",
                                SIG_STR(roi, a), SIG_STR(x, b));
  }
  bool sizes = nimble_dtype_is_int(s->dtype);
  if (!sizes && !nimble_dtype_is_float(s->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "scales or sizes must be float or integer, got %s", SIG_STR(s, a));
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < x->rank; i++) {
    r.dims[i] = nimble_dim_any();
    double v;
    if (!nimble_rel_value_double(call, 1, i, &v)) {
      if (nimble_dim_ctx_is_concrete(call->ctx))
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_resize needs the values of input 1");
      continue;
    }
    if (v < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative scale or size %g at %zu", v, i);
    if (sizes) {
      r.dims[i] = nimble_dim_const((int64_t)v);
      continue;
    }
    nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[i]);
    if (v == 1.0) r.dims[i] = x->dims[i];
    else if (d.kind == NIMBLE_DIM_CONST) r.dims[i] = nimble_dim_const((int64_t)((double)d.value * v));
  }
  return nimble_rel_one(out, num_out, &r);
}

/* x [N, C, H, W], w [C, M/groups, kh, kw], optional bias [M]. */
static nimble_status_t rel_conv2d_transpose(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                            size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *w = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  int64_t v[4][4];
  static const char *const names[] = {"strides", "dilations", "pads", "output_padding"};
  static const size_t want[] = {2, 2, 4, 2};
  static const int64_t dflt[] = {1, 1, 0, 0};
  for (size_t k = 0; k < 4; k++) {
    size_t n;
    const int64_t *a = A_INTS(call, names[k], &n);
    if (n && n != want[k])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s needs %zu values, got %zu", names[k], want[k], n);
    for (size_t i = 0; i < want[k]; i++) v[k][i] = n ? a[i] : dflt[k];
  }
  int64_t groups = A_INT(call, "groups");
  if (groups < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "groups must be >= 1, got %" PRId64, groups);
  nimble_dim_t cin;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, x->dims[1], w->dims[0], &cin));
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = x->dtype;
  r.rank = 4;
  r.dims[0] = x->dims[0];
  NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, w->dims[1], nimble_dim_const(groups), &r.dims[1]));
  for (size_t i = 0; i < 2; i++) {
    nimble_dim_t in = nimble_dim_resolve(call->ctx, x->dims[2 + i]), k = nimble_dim_resolve(call->ctx, w->dims[2 + i]);
    if (in.kind != NIMBLE_DIM_CONST || k.kind != NIMBLE_DIM_CONST) {
      r.dims[2 + i] = nimble_dim_any();
      continue;
    }
    int64_t e = (in.value - 1) * v[0][i] - v[2][i] - v[2][2 + i] + v[1][i] * (k.value - 1) + 1 + v[3][i];
    if (e < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative output extent on spatial axis %zu", i);
    r.dims[2 + i] = nimble_dim_const(e);
  }
  if (call->num_inputs == 3) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 1, 1));
    nimble_dim_t ob;
    NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, r.dims[1], call->inputs[2].dims[0], &ob));
  }
  return nimble_rel_one(out, num_out, &r);
}

/* boxes [B, N, 4], scores [B, C, N] -> selected [?, 3] int64; the bound is
 * B * C * N. */
static nimble_status_t rel_nms(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *boxes = &call->inputs[0], *scores = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 3, 3));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 3, 3));
  nimble_dim_t d;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, boxes->dims[0], scores->dims[0], &d));
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, boxes->dims[1], scores->dims[2], &d));
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, boxes->dims[2], nimble_dim_const(4), &d));
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = NIMBLE_DTYPE_INT64;
  r.rank = 2;
  r.dims[0] = nimble_dim_any();
  r.dims[1] = nimble_dim_const(3);
  if (nimble_dim_ctx_is_concrete(call->ctx)) {
    nimble_dim_t bc;
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, scores->dims[0], scores->dims[1], &bc));
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, bc, scores->dims[2], &r.dims[0]));
  }
  return nimble_rel_one(out, num_out, &r);
}

/* x [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]. */
static nimble_status_t rel_grid_sample(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *g = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 1));
  nimble_dim_t d;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, x->dims[0], g->dims[0], &d));
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, g->dims[3], nimble_dim_const(2), &d));
  nimble_tensor_sig_t r = *x;
  r.dims[2] = g->dims[1];
  r.dims[3] = g->dims[2];
  return nimble_rel_one(out, num_out, &r);
}

/* x [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, oh, ow]. */
static nimble_status_t rel_roi_align(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *rois = &call->inputs[1], *bi = &call->inputs[2];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 1, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 2));
  nimble_dim_t d;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, rois->dims[1], nimble_dim_const(4), &d));
  NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, rois->dims[0], bi->dims[0], &d));
  int64_t oh = A_INT(call, "output_height"), ow = A_INT(call, "output_width");
  if (oh < 1 || ow < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "output size %" PRId64 "x%" PRId64, oh, ow);
  nimble_tensor_sig_t r = *x;
  r.dims[0] = d;
  r.dims[2] = nimble_dim_const(oh);
  r.dims[3] = nimble_dim_const(ow);
  return nimble_rel_one(out, num_out, &r);
}

/* Max pooling that also gives the flat (NCHW, or NCWH with
 * storage_order 1) index of each maximum. */
static nimble_status_t rel_max_pool_indices(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  size_t nk, ns, np, nd;
  const int64_t *k = A_INTS(call, "kernel_shape", &nk), *st = A_INTS(call, "strides", &ns), *pd = A_INTS(call, "pads", &np),
                *dl = A_INTS(call, "dilations", &nd);
  if (nk != 2 || (ns && ns != 2) || (np && np != 4) || (nd && nd != 2))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel_shape, strides, pads or dilations have the wrong length");
  bool ceil_mode = A_INT(call, "ceil_mode") != 0;
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < 2; i++) {
    int64_t s = ns ? st[i] : 1, d = nd ? dl[i] : 1, pb = np ? pd[i] : 0, pe = np ? pd[i + 2] : 0;
    if (k[i] < 1 || s < 1 || d < 1 || pb < 0 || pe < 0 || k[i] > (1 << 20) || s > (1 << 20) || d > (1 << 20) ||
        pb > (1 << 20) || pe > (1 << 20))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel, strides, dilations or pads out of range");
    nimble_dim_t in = nimble_dim_resolve(call->ctx, x->dims[2 + i]);
    if (in.kind != NIMBLE_DIM_CONST || in.value > ((int64_t)1 << 40)) {
      r.dims[2 + i] = nimble_dim_any();
      continue;
    }
    int64_t span = in.value + pb + pe - ((k[i] - 1) * d + 1);
    if (span < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the window is larger than the padded input");
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    /* A last window starting in the end padding is dropped (ceil mode). */
    if (ceil_mode && (o - 1) * s >= in.value + pb) o--;
    r.dims[2 + i] = nimble_dim_const(o);
  }
  out[0] = r;
  out[1] = r;
  out[1].dtype = NIMBLE_DTYPE_INT64;
  *num_out = 2;
  return nimble_ok();
}

static const nimble_attr_spec_t kMaxPoolIndices[] = {
    ATTR_INTS_REQUIRED("kernel_shape", "[kh, kw]"),
    ATTR_INTS("strides", "[sh, sw]; empty: 1s"),
    ATTR_INTS("pads", "[top, left, bottom, right]; empty: 0s"),
    ATTR_INTS("dilations", "[dh, dw]; empty: 1s"),
    ATTR_INT("ceil_mode", 0, "round the output extent up"),
    ATTR_INT("storage_order", 0, "indices in row-major (0) or column-major (1) order"),
};
static const nimble_attr_spec_t kGridSample[] = {
    ATTR_INT("align_corners", 0, "extreme grid values are pixel centers (1) or edges (0)"),
    ATTR_STRING("mode", "bilinear", "bilinear, nearest or bicubic"),
    ATTR_STRING("padding_mode", "zeros", "zeros, border or reflection"),
};
static const nimble_attr_spec_t kRoiAlign[] = {
    ATTR_STRING("mode", "avg", "avg or max"),
    ATTR_INT("output_height", 1, "pooled height"),
    ATTR_INT("output_width", 1, "pooled width"),
    ATTR_INT("sampling_ratio", 0, "samples per bin; 0: adaptive"),
    ATTR_FLOAT("spatial_scale", 1.0, "scale from roi to input coordinates"),
    ATTR_STRING("coordinate_transformation_mode", "half_pixel", "half_pixel or output_half_pixel"),
};
static const nimble_attr_spec_t kResize[] = {
    ATTR_INTS_REQUIRED("sizes", "output dims; -1 keeps the input's"),
    ATTR_STRING("mode", "nearest", "nearest, linear or cubic"),
    ATTR_STRING("coordinate_transformation_mode", "half_pixel", "as ONNX Resize"),
    ATTR_STRING("nearest_mode", "round_prefer_floor", "as ONNX Resize"),
    ATTR_FLOAT("cubic_coeff_a", -0.75, "cubic interpolation coefficient"),
    ATTR_INT("exclude_outside", 0, "zero the weights outside the tensor"),
};
static const nimble_attr_spec_t kDynResize[] = {
    ATTR_STRING("mode", "nearest", "nearest, linear or cubic"),
    ATTR_STRING("coordinate_transformation_mode", "half_pixel", "as ONNX Resize"),
    ATTR_STRING("nearest_mode", "round_prefer_floor", "as ONNX Resize"),
    ATTR_FLOAT("cubic_coeff_a", -0.75, "cubic interpolation coefficient"),
    ATTR_INT("exclude_outside", 0, "zero the weights outside the tensor"),
    ATTR_FLOAT("extrapolation_value", 0.0, "tf_crop_and_resize: the value outside the input"),
};
static const nimble_attr_spec_t kConvTranspose[] = {
    ATTR_INTS("strides", "[sh, sw]; empty: 1s"),
    ATTR_INTS("pads", "[top, left, bottom, right]; empty: 0s"),
    ATTR_INTS("dilations", "[dh, dw]; empty: 1s"),
    ATTR_INTS("output_padding", "extra extent at the end; empty: 0s"),
    ATTR_INT("groups", 1, "channel groups"),
};
static const nimble_attr_spec_t kNms[] = {
    ATTR_INT("center_point_box", 0, "boxes as [y1, x1, y2, x2] (0) or [xc, yc, w, h] (1)"),
};

const nimble_op nimble_ops_vision[] = {
    {"resize", "resizes to static sizes (nearest, linear or cubic; ONNX Resize)", 1, 1, ATTRS(kResize), rel_resize,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"dyn_resize", "resize with scales (float) or sizes (int) given as a 1-D tensor, [roi] (ONNX Resize)", 2, 3,
     ATTRS(kDynResize), rel_dyn_resize, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false},
    {"conv2d_transpose", "NCHW transposed convolution (ONNX ConvTranspose), optional bias", 2, 3,
     ATTRS(kConvTranspose), rel_conv2d_transpose, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OUT_FUSABLE,
     false},
    {"max_pool2d_with_indices", "NCHW max pooling: (values, int64 flat indices of the maxima)", 1, 1,
     ATTRS(kMaxPoolIndices), rel_max_pool_indices, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"grid_sample", "samples x at the grid's normalized coordinates (ONNX GridSample)", 2, 2, ATTRS(kGridSample),
     rel_grid_sample, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"roi_align", "pools each region of interest to output_height x output_width (ONNX RoiAlign)", 3, 3,
     ATTRS(kRoiAlign), rel_roi_align, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"non_max_suppression", "ONNX NonMaxSuppression: [selected, 3] int64 (batch, class, box)", 2, 5, ATTRS(kNms),
     rel_nms, NIMBLE_SHAPE_UPPER_BOUND, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
};
const size_t nimble_ops_vision_count = sizeof nimble_ops_vision / sizeof nimble_ops_vision[0];
