/* Converters for ONNX's linear-algebra operators: Det and Einsum. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

static nimble_status_t cv_det(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "det", 1, NULL, 0); }

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

const imp_converter imp_converters_linalg[] = {
    {"Det", cv_det},
    {"Einsum", cv_einsum},
};
const size_t imp_converters_linalg_count = sizeof imp_converters_linalg / sizeof imp_converters_linalg[0];
