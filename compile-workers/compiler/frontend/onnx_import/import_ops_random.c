/* Converters for ONNX's random sampling: RandomUniform(Like),
 * RandomNormal(Like) and Bernoulli. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

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

const imp_converter imp_converters_random[] = {
    {"RandomUniformLike", cv_random_like},
    {"RandomNormalLike", cv_random_like},
    {"RandomUniform", cv_random_like},
    {"RandomNormal", cv_random_like},
    {"Bernoulli", cv_random_like},
};
const size_t imp_converters_random_count = sizeof imp_converters_random / sizeof imp_converters_random[0];
