/* Shape functions at run time: concrete input shapes (and values for the
 * inputs a data-dependent operator reads) in, concrete output shapes out.
 * Unless the operator brings its own, the relation runs in concrete mode. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

nimble_status_t nimble_op_compute_shapes(const nimble_op *op, const nimble_attrs_t *attrs,
                                         const nimble_shape_input_t *in, size_t num_in,
                                         nimble_shape_t *out, size_t *num_out) {
  nimble_attrs_t defaults;
  if (!attrs) {
    NIMBLE_RETURN_IF_ERROR(nimble_attrs_defaults(op, &defaults));
    attrs = &defaults;
  }
  if ((int64_t)num_in < op->min_inputs || (op->max_inputs >= 0 && (int64_t)num_in > op->max_inputs))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "shape function of '%s': %zu inputs given",
                              op->name, num_in);
  if (num_in > 64)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape function of '%s': %zu inputs, at most 64",
                              op->name, num_in);
  nimble_tensor_sig_t sigs[64];
  nimble_input_value_t values[64];
  for (size_t i = 0; i < num_in; i++) {
    if (in[i].shape.rank > NIMBLE_MAX_RANK)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape function of '%s': input %zu has rank %zu, at most %d",
                                op->name, i, in[i].shape.rank, NIMBLE_MAX_RANK);
    memset(&sigs[i], 0, sizeof sigs[i]);
    sigs[i].dtype = in[i].dtype;
    sigs[i].rank = in[i].shape.rank;
    size_t count = 1;
    for (size_t d = 0; d < in[i].shape.rank; d++) {
      int64_t v = in[i].shape.dims[d];
      if (v < 0)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "shape function of '%s': input %zu has negative dim %" PRId64,
                                  op->name, i, v);
      if (v != 0 && count > SIZE_MAX / (size_t)v)
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape function of '%s': input %zu is too large",
                                  op->name, i);
      count *= (size_t)v;
      sigs[i].dims[d] = nimble_dim_const(v);
    }
    values[i].dtype = in[i].dtype;
    values[i].num_elements = count;
    values[i].data = in[i].data;
    if (i < 32 && (op->value_inputs >> i & 1u) && !in[i].data)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "shape function of '%s' reads the values of input %zu; none given",
                                op->name, i);
  }
  if (op->shape_fn) return op->shape_fn(op, attrs, in, num_in, out, num_out);

  nimble_dim_ctx ctx = {NULL};
  nimble_rel_call_t call = {op, &ctx, attrs, num_in, sigs, values};
  nimble_tensor_sig_t res[NIMBLE_MAX_OUTPUTS];
  size_t n = 0;
  NIMBLE_RETURN_IF_ERROR_CTX(op->relation(&call, res, &n), "in shape function of '%s'", op->name);
  for (size_t k = 0; k < n; k++) {
    out[k].rank = res[k].rank;
    for (size_t d = 0; d < res[k].rank; d++) {
      if (res[k].dims[d].kind != NIMBLE_DIM_CONST)
        return nimble_status_make(NIMBLE_INTERNAL,
                                  "shape function of '%s' left dim %zu of output %zu unknown",
                                  op->name, d, k);
      out[k].dims[d] = res[k].dims[d].value;
    }
  }
  *num_out = n;
  return nimble_ok();
}
