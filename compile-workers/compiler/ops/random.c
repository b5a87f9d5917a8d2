/* Random operators added for the ONNX importer: samples shaped like an
 * input (RandomUniformLike, RandomNormalLike, Bernoulli) and training-mode
 * dropout, whose mask is drawn at run time. The seed is an attribute (0:
 * the run time picks one). */
#include <math.h>
#include <string.h>

#include "ops/op_internal.h"

/* Shaped like input 0, with the dtype attribute (empty: input 0's). */
static nimble_status_t rel_like(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  nimble_tensor_sig_t r = call->inputs[0];
  const char *dt = A_STRING(call, "dtype");
  if (dt && dt[0]) NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  if (!nimble_dtype_is_float(r.dtype)) {
    char buf[160];
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "random samples must be float, got %s", SIG_STR(&r, buf));
  }
  return nimble_rel_one(out, num_out, &r);
}

/* x, optional scalar ratio -> (x's type, bool mask of x's shape). */
static nimble_status_t rel_dropout_train(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  if (call->num_inputs == 2) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 0, 0));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 1));
  }
  out[0] = call->inputs[0];
  out[1] = call->inputs[0];
  out[1].dtype = NIMBLE_DTYPE_BOOL;
  *num_out = 2;
  return nimble_ok();
}

static const nimble_attr_spec_t kUniform[] = {
    ATTR_FLOAT("low", 0.0, "lower bound"),
    ATTR_FLOAT("high", 1.0, "upper bound (exclusive)"),
    ATTR_FLOAT("seed", 0.0, "generator seed; 0: chosen at run time"),
    ATTR_STRING("dtype", "", "element type; empty: the input's"),
};
static const nimble_attr_spec_t kNormal[] = {
    ATTR_FLOAT("mean", 0.0, "mean"),
    ATTR_FLOAT("scale", 1.0, "standard deviation"),
    ATTR_FLOAT("seed", 0.0, "generator seed; 0: chosen at run time"),
    ATTR_STRING("dtype", "", "element type; empty: the input's"),
};
static const nimble_attr_spec_t kBernoulli[] = {
    ATTR_FLOAT("seed", 0.0, "generator seed; 0: chosen at run time"),
    ATTR_STRING("dtype", "", "element type; empty: the input's"),
};
static const nimble_attr_spec_t kDropout[] = {
    ATTR_FLOAT("seed", 0.0, "generator seed; 0: chosen at run time"),
};

#define RANDOM(nm, doc, lo, hi, attrs, rel, tuple) \
  {nm, doc, lo, hi, attrs, rel, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, tuple}

const nimble_op nimble_ops_random[] = {
    RANDOM("random_uniform_like", "uniform samples in [low, high) shaped like the input", 1, 1, ATTRS(kUniform),
           rel_like, false),
    RANDOM("random_normal_like", "normal samples shaped like the input", 1, 1, ATTRS(kNormal), rel_like, false),
    RANDOM("bernoulli", "1 with the probability given by each element, else 0", 1, 1, ATTRS(kBernoulli), rel_like,
           false),
    RANDOM("dropout_train", "training dropout: (x * mask / (1 - ratio), mask); ratio input 1 (default 0.5)", 1, 2,
           ATTRS(kDropout), rel_dropout_train, true),
};
const size_t nimble_ops_random_count = sizeof nimble_ops_random / sizeof nimble_ops_random[0];
