/* Recurrent operators: lstm_scan, gru_scan and rnn_scan, a whole LSTM,
 * GRU or RNN layer's recurrence (one direction) as one operator, so that
 * its steps run inside one kernel instead of one VM call per step (the
 * ONNX importer's recursive step function remains for types other than
 * float32; docs/onnx-import.md).
 *
 *   lstm_scan(xw [T, B, 4H], r [H, 4H], h0 [B, H], c0 [B, H]
 *             [, p [3H] [, lens int64 [B]]]; reverse)
 *     -> (y [T, B, H], h [B, H], c [B, H])
 *
 * xw holds every step's input projection with both biases (X W^T + Wb +
 * Rb), r the recurrent weights transposed (h r is a step's [B, 4H]
 * product); their 4H columns are the gates in ONNX's order i, o, f, c.
 * p, when given, holds ONNX's peepholes (i, o, f): i and f add p_i * c
 * and p_f * c of the previous c, o adds p_o * c of the new one (zeros are
 * no peepholes, as ONNX defines them). y[t] is the h of time index t; h
 * and c are the last step's (h0 and c0 when T is 0). With reverse the
 * steps run from T - 1 down to 0. With lens (ONNX's sequence_lens; not
 * with reverse) batch entry b takes steps t < lens[b] only: later ones
 * keep its h and c and give zeros in y.
 *
 *   gru_scan(xw [T, B, 3H], r [H, 3H], h0 [B, H], rbh [H]
 *            [, lens int64 [B]]; reverse, linear_before_reset)
 *     -> (y [T, B, H], h [B, H])
 *
 * The same for a GRU, gates in ONNX's order z, r, h: xw holds X W^T + Wb
 * plus R's biases of z and r; rbh is R's bias of the h gate, which
 * ONNX adds inside the reset gate's product when linear_before_reset is
 * set: h~ = tanh(xw_h + r * (h R_h^T + rbh)), else h~ = tanh(xw_h +
 * (r * h) R_h^T + rbh). The new h is (1 - z) * h~ + z * h.
 *
 *   rnn_scan(xw [T, B, H], r [H, H], h0 [B, H] [, lens int64 [B]]; reverse)
 *     -> (y [T, B, H], h [B, H])
 *
 * ONNX's RNN (tanh): xw holds X W^T + Wb + Rb, and h' = tanh(xw + h r). */
#include <string.h>

#include "ops/op_internal.h"

/* Dims a and b of inputs i and j must agree; the error names both. */
#define UNIFY(a, b, what, i, j, out) \
  nimble_rel_unify_named(call, (a), (b), (what), &call->inputs[i], &call->inputs[j], (out))

static nimble_status_t rel_lstm_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *xw = &call->inputs[0], *r = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 3, 3));
  for (size_t i = 1; i < 4; i++) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, i, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  for (size_t i = 1; i < call->num_inputs && i < 5; i++) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
  char buf[160];
  nimble_dim_t h = nimble_dim_resolve(call->ctx, r->dims[0]);
  if (h.kind != NIMBLE_DIM_CONST || h.value < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the hidden size (r's first dim) must be known and positive, got %s",
                              SIG_STR(r, buf));
  nimble_dim_t g4, b, hh;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, h, nimble_dim_const(4), &g4));
  NIMBLE_RETURN_IF_ERROR(UNIFY(r->dims[1], g4, "4 x hidden size", 1, 1, &g4));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[2], g4, "the gate columns", 0, 1, &g4));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[1], call->inputs[2].dims[0], "the batch", 0, 2, &b));
  NIMBLE_RETURN_IF_ERROR(UNIFY(b, call->inputs[3].dims[0], "the batch", 0, 3, &b));
  NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[2].dims[1], h, "the hidden size", 2, 1, &hh));
  NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[3].dims[1], h, "the hidden size", 3, 1, &hh));
  if (call->num_inputs >= 5) { /* the peepholes */
    nimble_dim_t g3;
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 4, 1, 1));
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, h, nimble_dim_const(3), &g3));
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[4].dims[0], g3, "3 x hidden size (the peepholes)", 4, 1, &g3));
  }
  if (call->num_inputs == 6) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 5, 1, 1));
    if (call->inputs[5].dtype != NIMBLE_DTYPE_INT64)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the sequence lengths must be int64, got %s",
                                SIG_STR(&call->inputs[5], buf));
    if (A_INT(call, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sequence lengths go with the forward direction only");
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[5].dims[0], b, "the batch (the sequence lengths)", 5, 0, &b));
  }
  memset(out, 0, 3 * sizeof *out);
  out[0].dtype = xw->dtype;
  out[0].rank = 3;
  out[0].dims[0] = xw->dims[0];
  out[0].dims[1] = b;
  out[0].dims[2] = h;
  for (int k = 1; k < 3; k++) {
    out[k].dtype = xw->dtype;
    out[k].rank = 2;
    out[k].dims[0] = b;
    out[k].dims[1] = h;
  }
  *num_out = 3;
  return nimble_ok();
}

/* gru_scan: the LSTM's checks with three gates, no c, and rbh [H]. */
static nimble_status_t rel_gru_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *xw = &call->inputs[0], *r = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 3, 3));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 3, 1, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  for (size_t i = 1; i < 4; i++) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
  char buf[160];
  nimble_dim_t h = nimble_dim_resolve(call->ctx, r->dims[0]);
  if (h.kind != NIMBLE_DIM_CONST || h.value < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the hidden size (r's first dim) must be known and positive, got %s",
                              SIG_STR(r, buf));
  nimble_dim_t g3, b, hh;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, h, nimble_dim_const(3), &g3));
  NIMBLE_RETURN_IF_ERROR(UNIFY(r->dims[1], g3, "3 x hidden size", 1, 1, &g3));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[2], g3, "the gate columns", 0, 1, &g3));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[1], call->inputs[2].dims[0], "the batch", 0, 2, &b));
  NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[2].dims[1], h, "the hidden size", 2, 1, &hh));
  NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[3].dims[0], h, "the hidden size (the h gate's recurrent bias)", 3, 1, &hh));
  if (call->num_inputs == 5) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 4, 1, 1));
    if (call->inputs[4].dtype != NIMBLE_DTYPE_INT64)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the sequence lengths must be int64, got %s",
                                SIG_STR(&call->inputs[4], buf));
    if (A_INT(call, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sequence lengths go with the forward direction only");
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[4].dims[0], b, "the batch (the sequence lengths)", 4, 0, &b));
  }
  memset(out, 0, 2 * sizeof *out);
  out[0].dtype = out[1].dtype = xw->dtype;
  out[0].rank = 3;
  out[0].dims[0] = xw->dims[0];
  out[0].dims[1] = b;
  out[0].dims[2] = h;
  out[1].rank = 2;
  out[1].dims[0] = b;
  out[1].dims[1] = h;
  *num_out = 2;
  return nimble_ok();
}

/* rnn_scan: one gate, no c, no bias apart from xw's. */
static nimble_status_t rel_rnn_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *xw = &call->inputs[0], *r = &call->inputs[1];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 3, 3));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 1, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 2, 2));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  for (size_t i = 1; i < 3; i++) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
  char buf[160];
  nimble_dim_t h = nimble_dim_resolve(call->ctx, r->dims[0]);
  if (h.kind != NIMBLE_DIM_CONST || h.value < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the hidden size (r's first dim) must be known and positive, got %s",
                              SIG_STR(r, buf));
  nimble_dim_t g, b, hh;
  NIMBLE_RETURN_IF_ERROR(UNIFY(r->dims[1], h, "the hidden size (r is [H, H])", 1, 1, &g));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[2], h, "the gate columns", 0, 1, &g));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[1], call->inputs[2].dims[0], "the batch", 0, 2, &b));
  NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[2].dims[1], h, "the hidden size", 2, 1, &hh));
  if (call->num_inputs == 4) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 3, 1, 1));
    if (call->inputs[3].dtype != NIMBLE_DTYPE_INT64)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the sequence lengths must be int64, got %s",
                                SIG_STR(&call->inputs[3], buf));
    if (A_INT(call, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sequence lengths go with the forward direction only");
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[3].dims[0], b, "the batch (the sequence lengths)", 3, 0, &b));
  }
  memset(out, 0, 2 * sizeof *out);
  out[0].dtype = out[1].dtype = xw->dtype;
  out[0].rank = 3;
  out[0].dims[0] = xw->dims[0];
  out[0].dims[1] = b;
  out[0].dims[2] = h;
  out[1].rank = 2;
  out[1].dims[0] = b;
  out[1].dims[1] = h;
  *num_out = 2;
  return nimble_ok();
}

static const nimble_attr_spec_t kRnnScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: the steps run from the last time index to the first"),
};

static const nimble_attr_spec_t kGruScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: the steps run from the last time index to the first"),
    ATTR_INT("linear_before_reset", 0, "1: the reset gate multiplies h R_h^T + rbh (ONNX's linear_before_reset)"),
};

static const nimble_attr_spec_t kLstmScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: the steps run from the last time index to the first"),
};

const nimble_op nimble_ops_recurrent[] = {
    {"lstm_scan",
     "an LSTM layer's recurrence: (xw [T,B,4H], r [H,4H], h0, c0 [B,H], [peepholes [3H], [lens int64 [B]]]) -> "
     "(y [T,B,H], h, c [B,H]); gates i, o, f, c",
     4, 6, ATTRS(kLstmScanAttrs), rel_lstm_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"gru_scan",
     "a GRU layer's recurrence: (xw [T,B,3H], r [H,3H], h0 [B,H], rbh [H], [lens int64 [B]]) -> (y [T,B,H], h [B,H]); "
     "gates z, r, h",
     4, 5, ATTRS(kGruScanAttrs), rel_gru_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"rnn_scan",
     "a (tanh) RNN layer's recurrence: (xw [T,B,H], r [H,H], h0 [B,H], [lens int64 [B]]) -> (y [T,B,H], h [B,H])",
     3, 4, ATTRS(kRnnScanAttrs), rel_rnn_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
};
const size_t nimble_ops_recurrent_count = sizeof nimble_ops_recurrent / sizeof nimble_ops_recurrent[0];
