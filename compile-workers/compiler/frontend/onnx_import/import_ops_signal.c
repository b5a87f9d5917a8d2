/* Converters for ONNX's signal operators: the Hann, Hamming and Blackman
 * windows, DFT, STFT and MelWeightMatrix. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

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

const imp_converter imp_converters_signal[] = {
    {"HannWindow", cv_window},
    {"HammingWindow", cv_window},
    {"BlackmanWindow", cv_window},
    {"DFT", cv_dft},
    {"STFT", cv_stft},
    {"MelWeightMatrix", cv_mel},
};
const size_t imp_converters_signal_count = sizeof imp_converters_signal / sizeof imp_converters_signal[0];
