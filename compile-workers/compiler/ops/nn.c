/* Neural-network operators: dense (ONNX Gemm semantics), matmul (NumPy),
 * conv2d, pooling, softmax, layer and batch normalization. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_status_t rel_dense(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                 size_t *num_out) {
  const nimble_tensor_sig_t *a = &call->inputs[0], *b = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  bool ta = A_INT(call, "transA") != 0, tb = A_INT(call, "transB") != 0;
  nimble_dim_t m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1];
  nimble_dim_t kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1], k;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, ka, kb, "inner dimensions", a, b, &k));
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = a->dtype;
  r.rank = 2;
  r.dims[0] = m;
  r.dims[1] = n;
  if (call->num_inputs == 3) {
    /* C broadcasts one way, to (M, N). */
    const nimble_tensor_sig_t *c = &call->inputs[2];
    nimble_tensor_sig_t bc;
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 0, 2));
    NIMBLE_RETURN_IF_ERROR(nimble_sig_broadcast(call->ctx, &r, c, &bc));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 2));
    r = bc;
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_matmul(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  nimble_tensor_sig_t a = call->inputs[0], b = call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 1, NIMBLE_MAX_RANK));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 1, NIMBLE_MAX_RANK));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  /* NumPy: a vector operand becomes a matrix, and its unit dim is dropped
   * from the result. */
  bool a_vec = a.rank == 1, b_vec = b.rank == 1;
  if (a_vec) {
    a.dims[1] = a.dims[0];
    a.dims[0] = nimble_dim_const(1);
    a.rank = 2;
  }
  if (b_vec) {
    b.dims[1] = nimble_dim_const(1);
    b.rank = 2;
  }
  nimble_dim_t k;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, a.dims[a.rank - 1], b.dims[b.rank - 2],
                                     "inner dimensions", &call->inputs[0], &call->inputs[1], &k));
  nimble_tensor_sig_t ba = a, bb = b, batch;
  ba.rank = a.rank - 2;
  bb.rank = b.rank - 2;
  nimble_status_t s = nimble_sig_broadcast(call->ctx, &ba, &bb, &batch);
  if (s) {
    char x[160], y[160];
    nimble_status_free(s);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot broadcast the batch dims of %s and %s",
                              SIG_STR(&call->inputs[0], x), SIG_STR(&call->inputs[1], y));
  }
  nimble_tensor_sig_t r = batch;
  r.dtype = a.dtype;
  if (!a_vec) r.dims[r.rank++] = a.dims[a.rank - 2];
  if (!b_vec) r.dims[r.rank++] = b.dims[b.rank - 1];
  return nimble_rel_one(out, num_out, &r);
}

/* Reads an INTS attribute of `n` entries, or `fill` everywhere when empty. */
static nimble_status_t ints_or_default(const nimble_rel_call_t *call, const char *name, size_t n,
                                       int64_t fill, int64_t *out) {
  size_t got;
  const int64_t *v = A_INTS(call, name, &got);
  if (got == 0) {
    for (size_t i = 0; i < n; i++) out[i] = fill;
    return nimble_ok();
  }
  if (got != n)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' needs %zu values, got %zu",
                              name, n, got);
  memcpy(out, v, n * sizeof(int64_t));
  return nimble_ok();
}

/* One spatial output extent of a sliding window:
 * floor_or_ceil((in + pad_begin + pad_end - dilation * (k - 1) - 1) / stride) + 1 */
static nimble_status_t window_extent(nimble_dim_ctx *ctx, nimble_dim_t in, nimble_dim_t k,
                                     int64_t pad_b, int64_t pad_e, int64_t stride, int64_t dil,
                                     bool ceil_mode, size_t axis, nimble_dim_t *out) {
  in = nimble_dim_resolve(ctx, in);
  k = nimble_dim_resolve(ctx, k);
  if (stride <= 0 || dil <= 0 || pad_b < 0 || pad_e < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "spatial axis %zu: strides and dilations must be positive and pads "
                              "non-negative (stride %" PRId64 ", dilation %" PRId64 ", pads %" PRId64
                              ", %" PRId64 ")",
                              axis, stride, dil, pad_b, pad_e);
  if (in.kind != NIMBLE_DIM_CONST || k.kind != NIMBLE_DIM_CONST) {
    *out = nimble_dim_any();
    return nimble_ok();
  }
  if (in.value > INT64_MAX / 4 || k.value > INT64_MAX / 4 / dil || pad_b > INT64_MAX / 4 ||
      pad_e > INT64_MAX / 4)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "spatial axis %zu: sizes overflow", axis);
  int64_t span = in.value + pad_b + pad_e - dil * (k.value - 1) - 1;
  if (k.value < 1 || span < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "spatial axis %zu: window of %" PRId64 " (dilation %" PRId64
                              ") does not fit input extent %" PRId64 " with pads %" PRId64 "+%" PRId64,
                              axis, k.value, dil, in.value, pad_b, pad_e);
  int64_t q = ceil_mode ? (span + stride - 1) / stride : span / stride;
  *out = nimble_dim_const(q + 1);
  return nimble_ok();
}

static nimble_status_t rel_conv2d(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *w = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 4, 4));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  int64_t strides[2], dil[2], pads[4];
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "strides", 2, 1, strides));
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "dilations", 2, 1, dil));
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "pads", 4, 0, pads));
  int64_t groups = A_INT(call, "groups");
  if (groups < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "groups must be >= 1, got %" PRId64, groups);
  /* Input channels = weight's channels per group * groups. */
  nimble_dim_t cin_w, c;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, w->dims[1], nimble_dim_const(groups), &cin_w));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, x->dims[1], cin_w, "input channels (x dim 1 vs weight dim 1 * groups)", x, w, &c));
  nimble_dim_t o = nimble_dim_resolve(call->ctx, w->dims[0]);
  if (o.kind == NIMBLE_DIM_CONST && o.value % groups != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "output channels %" PRId64 " are not divisible by groups %" PRId64,
                              o.value, groups);
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = x->dtype;
  r.rank = 4;
  r.dims[0] = x->dims[0];
  r.dims[1] = o;
  for (size_t i = 0; i < 2; i++)
    NIMBLE_RETURN_IF_ERROR(window_extent(call->ctx, x->dims[2 + i], w->dims[2 + i], pads[i],
                                         pads[2 + i], strides[i], dil[i], false, i, &r.dims[2 + i]));
  if (call->num_inputs == 3) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 1, 1));
    nimble_dim_t ob;
    NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, o, call->inputs[2].dims[0], "bias length",
                                       w, &call->inputs[2], &ob));
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_pool2d(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  int64_t kernel[2], strides[2], dil[2], pads[4];
  size_t nk;
  A_INTS(call, "kernel_shape", &nk);
  if (nk != 2)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel_shape needs 2 values, got %zu", nk);
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "kernel_shape", 2, 1, kernel));
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "strides", 2, 1, strides));
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "dilations", 2, 1, dil));
  NIMBLE_RETURN_IF_ERROR(ints_or_default(call, "pads", 4, 0, pads));
  bool ceil_mode = A_INT(call, "ceil_mode") != 0;
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < 2; i++)
    NIMBLE_RETURN_IF_ERROR(window_extent(call->ctx, x->dims[2 + i], nimble_dim_const(kernel[i]),
                                         pads[i], pads[2 + i], strides[i], dil[i], ceil_mode, i,
                                         &r.dims[2 + i]));
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_global_pool2d(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                         size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 4, 4));
  nimble_tensor_sig_t r = call->inputs[0];
  r.dims[2] = r.dims[3] = nimble_dim_const(1);
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_softmax(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), call->inputs[0].rank, &axis));
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_layer_norm(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                      size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  /* gamma and beta cover the normalized dims x[axis:]. */
  for (size_t i = 1; i < call->num_inputs; i++) {
    const nimble_tensor_sig_t *p = &call->inputs[i];
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
    if (p->rank != x->rank - axis) {
      char bx[160], bp[160];
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "input %zu %s must cover dims %zu.. of %s", i, SIG_STR(p, bp),
                                axis, SIG_STR(x, bx));
    }
    for (size_t d = 0; d < p->rank; d++) {
      nimble_dim_t u;
      NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, x->dims[axis + d], p->dims[d], "normalized dims", x, p, &u));
    }
  }
  return nimble_rel_one(out, num_out, x);
}

static nimble_status_t rel_batch_norm(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                      size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  for (size_t i = 1; i < 5; i++) {
    nimble_dim_t u;
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, i, 1, 1));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_unify_named(call, x->dims[axis], call->inputs[i].dims[0], "channels",
                                       x, &call->inputs[i], &u));
  }
  return nimble_rel_one(out, num_out, x);
}

static const nimble_attr_spec_t kDenseAttrs[] = {
    ATTR_FLOAT("alpha", 1.0, "scales A*B"),
    ATTR_FLOAT("beta", 1.0, "scales C"),
    ATTR_INT("transA", 0, "use A transposed"),
    ATTR_INT("transB", 0, "use B transposed"),
};
static const nimble_attr_spec_t kConvAttrs[] = {
    ATTR_INTS("strides", "[sh, sw]; empty: 1s"),
    ATTR_INTS("pads", "[top, left, bottom, right]; empty: 0s"),
    ATTR_INTS("dilations", "[dh, dw]; empty: 1s"),
    ATTR_INT("groups", 1, "channel groups"),
};
static const nimble_attr_spec_t kMaxPoolAttrs[] = {
    ATTR_INTS_REQUIRED("kernel_shape", "[kh, kw]"),
    ATTR_INTS("strides", "[sh, sw]; empty: 1s"),
    ATTR_INTS("pads", "[top, left, bottom, right]; empty: 0s"),
    ATTR_INTS("dilations", "[dh, dw]; empty: 1s"),
    ATTR_INT("ceil_mode", 0, "round the output extent up"),
};
static const nimble_attr_spec_t kAvgPoolAttrs[] = {
    ATTR_INTS_REQUIRED("kernel_shape", "[kh, kw]"),
    ATTR_INTS("strides", "[sh, sw]; empty: 1s"),
    ATTR_INTS("pads", "[top, left, bottom, right]; empty: 0s"),
    ATTR_INTS("dilations", "[dh, dw]; empty: 1s"),
    ATTR_INT("ceil_mode", 0, "round the output extent up"),
    ATTR_INT("count_include_pad", 0, "average over padding too"),
};
static const nimble_attr_spec_t kSoftmaxAttrs[] = {
    ATTR_INT("axis", -1, "the axis normalized over"),
};
static const nimble_attr_spec_t kLayerNormAttrs[] = {
    ATTR_INT("axis", -1, "first normalized axis"),
    ATTR_FLOAT("epsilon", 1e-5, "added to the variance"),
};
static const nimble_attr_spec_t kBatchNormAttrs[] = {
    ATTR_INT("axis", 1, "channel axis"),
    ATTR_FLOAT("epsilon", 1e-5, "added to the variance"),
};

#define NN(nm, doc, lo, hi, attrs, rel, pat) \
  {nm, doc, lo, hi, attrs, rel, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, pat, false}

const nimble_op nimble_ops_nn[] = {
    NN("dense", "Gemm: alpha * op(A) op(B) + beta * C, C optional", 2, 3, ATTRS(kDenseAttrs),
       rel_dense, NIMBLE_FUSE_OUT_FUSABLE),
    NN("matmul", "NumPy matmul with batch broadcasting", 2, 2, NO_ATTRS, rel_matmul,
       NIMBLE_FUSE_OUT_FUSABLE),
    NN("conv2d", "NCHW x OIHW convolution, optional bias", 2, 3, ATTRS(kConvAttrs), rel_conv2d,
       NIMBLE_FUSE_OUT_FUSABLE),
    NN("max_pool2d", "NCHW max pooling", 1, 1, ATTRS(kMaxPoolAttrs), rel_pool2d,
       NIMBLE_FUSE_OUT_FUSABLE),
    NN("avg_pool2d", "NCHW average pooling", 1, 1, ATTRS(kAvgPoolAttrs), rel_pool2d,
       NIMBLE_FUSE_OUT_FUSABLE),
    NN("global_avg_pool2d", "NCHW mean over H and W", 1, 1, NO_ATTRS, rel_global_pool2d,
       NIMBLE_FUSE_OUT_FUSABLE),
    NN("softmax", "softmax along axis", 1, 1, ATTRS(kSoftmaxAttrs), rel_softmax, NIMBLE_FUSE_OPAQUE),
    NN("log_softmax", "log of softmax along axis", 1, 1, ATTRS(kSoftmaxAttrs), rel_softmax,
       NIMBLE_FUSE_OPAQUE),
    NN("layer_norm", "(x - mean) / sqrt(var + eps) * gamma + beta over x[axis:]", 1, 3,
       ATTRS(kLayerNormAttrs), rel_layer_norm, NIMBLE_FUSE_OPAQUE),
    NN("batch_norm", "inference batch norm: x, scale, bias, mean, var", 5, 5,
       ATTRS(kBatchNormAttrs), rel_batch_norm, NIMBLE_FUSE_OPAQUE),
};
const size_t nimble_ops_nn_count = sizeof nimble_ops_nn / sizeof nimble_ops_nn[0];
