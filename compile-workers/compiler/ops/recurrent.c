/* Recurrent operators: lstm_scan, gru_scan and rnn_scan, a whole LSTM,
 * GRU or RNN layer's recurrence (one direction or both) as one operator,
 * so that its steps run inside one kernel instead of one VM call per step
 * (the ONNX importer's recursive step function remains for types other
 * than float32; docs/onnx-import.md). Their tensors are laid out as ONNX's
 * with a direction axis D (1, or 2 for forward and reverse):
 *
 *   lstm_scan(xw [T, B, D, 4H], r [D, H, 4H], h0 [D, B, H], c0 [D, B, H]
 *             [, p [D, 3H] [, lens int64 [B]]]; reverse)
 *     -> (y [T, D, B, H], h [D, B, H], c [D, B, H])
 *
 * xw holds every step's input projection with both biases (X W^T + Wb +
 * Rb; one product for both directions gives [T, B, D, 4H]), r the
 * recurrent weights transposed (h r[d] is a step's [B, 4H] product);
 * their 4H columns are the gates in ONNX's order i, o, f, c. p, when
 * given, holds ONNX's peepholes (i, o, f): i and f add p_i * c and p_f * c
 * of the previous c, o adds p_o * c of the new one (zeros are no
 * peepholes, as ONNX defines them). y[t, d] is direction d's h of time
 * index t; h and c are each direction's last step's (h0 and c0 when T is
 * 0). Direction 0 runs forward, or from T - 1 down to 0 with reverse (D =
 * 1 only); direction 1 always runs reversed. With lens (ONNX's
 * sequence_lens; forward only) batch entry b takes steps t < lens[b]
 * only: later ones keep its h and c and give zeros in y.
 *
 *   gru_scan(xw [T, B, D, 3H], r [D, H, 3H], h0 [D, B, H], rbh [D, H]
 *            [, lens int64 [B]]; reverse, linear_before_reset)
 *     -> (y [T, D, B, H], h [D, B, H])
 *
 * The same for a GRU, gates in ONNX's order z, r, h: xw holds X W^T + Wb
 * plus R's biases of z and r; rbh is R's bias of the h gate, which
 * ONNX adds inside the reset gate's product when linear_before_reset is
 * set: h~ = tanh(xw_h + r * (h R_h^T + rbh)), else h~ = tanh(xw_h +
 * (r * h) R_h^T + rbh). The new h is (1 - z) * h~ + z * h.
 *
 *   rnn_scan(xw [T, B, D, H], r [D, H, H], h0 [D, B, H] [, lens int64 [B]];
 *            reverse) -> (y [T, D, B, H], h [D, B, H])
 *
 * ONNX's RNN (tanh): xw holds X W^T + Wb + Rb, and h' = tanh(xw + h r). */
#include <stdio.h>
#include <string.h>

#include "ops/op_internal.h"

/* Dims a and b of inputs i and j must agree; the error names both. */
#define UNIFY(a, b, what, i, j, out) \
  nimble_rel_unify_named(call, (a), (b), (what), &call->inputs[i], &call->inputs[j], (out))

/* The three differ in their gates and optional inputs (-1: none). */
typedef struct scan_shape {
  int gates;
  int c0_in;   /* the LSTM's c0 [D, B, H] */
  int peep_in; /* the LSTM's peepholes [D, 3H] */
  int rbh_in;  /* the GRU's rbh [D, H] */
  int lens_in; /* the sequence lengths, when the inputs reach it */
  size_t outs;
} scan_shape;

static nimble_status_t rel_scan(const nimble_rel_call_t *call, const scan_shape *ss, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  const nimble_tensor_sig_t *xw = &call->inputs[0], *r = &call->inputs[1];
  for (size_t i = 0; i < call->num_inputs; i++) {
    int rank = i == 0 ? 4 : (int)i == ss->lens_in ? 1 : (int)i == ss->peep_in || (int)i == ss->rbh_in ? 2 : 3;
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, i, rank, rank));
  }
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  for (size_t i = 1; i < call->num_inputs; i++)
    if ((int)i != ss->lens_in) NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, i));
  char buf[160], what[64];
  nimble_dim_t h = nimble_dim_resolve(call->ctx, r->dims[1]);
  if (h.kind != NIMBLE_DIM_CONST || h.value < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the hidden size (r's second dim) must be known and positive, got %s",
                              SIG_STR(r, buf));
  nimble_dim_t d = nimble_dim_resolve(call->ctx, r->dims[0]);
  if (d.kind != NIMBLE_DIM_CONST || d.value < 1 || d.value > 2)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the directions (r's first dim) must be 1 or 2, got %s",
                              SIG_STR(r, buf));
  if (d.value == 2 && A_INT(call, "reverse"))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "two directions run forward and reversed already: no reverse=1");
  nimble_dim_t g, b, hh, dd;
  NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, h, nimble_dim_const(ss->gates), &g));
  snprintf(what, sizeof what, "%d x hidden size", ss->gates);
  NIMBLE_RETURN_IF_ERROR(UNIFY(r->dims[2], g, what, 1, 1, &g));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[3], g, "the gate columns", 0, 1, &g));
  NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[2], d, "the directions", 0, 1, &dd));
  for (int i = 2; i < 4; i++) {
    if (i != 2 && i != ss->c0_in) continue;
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[i].dims[0], d, "the directions", i, 1, &dd));
    NIMBLE_RETURN_IF_ERROR(UNIFY(xw->dims[1], call->inputs[i].dims[1], "the batch", 0, i, &b));
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[i].dims[2], h, "the hidden size", i, 1, &hh));
  }
  if (ss->peep_in >= 0 && (int)call->num_inputs > ss->peep_in) {
    nimble_dim_t g3;
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, h, nimble_dim_const(3), &g3));
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[ss->peep_in].dims[0], d, "the directions (the peepholes)", ss->peep_in, 1, &dd));
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[ss->peep_in].dims[1], g3, "3 x hidden size (the peepholes)", ss->peep_in, 1, &g3));
  }
  if (ss->rbh_in >= 0) {
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[ss->rbh_in].dims[0], d, "the directions (the h gate's recurrent bias)",
                                 ss->rbh_in, 1, &dd));
    NIMBLE_RETURN_IF_ERROR(UNIFY(call->inputs[ss->rbh_in].dims[1], h, "the hidden size (the h gate's recurrent bias)",
                                 ss->rbh_in, 1, &hh));
  }
  if ((int)call->num_inputs > ss->lens_in) {
    const nimble_tensor_sig_t *l = &call->inputs[ss->lens_in];
    if (l->dtype != NIMBLE_DTYPE_INT64)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the sequence lengths must be int64, got %s", SIG_STR(l, buf));
    if (A_INT(call, "reverse") || d.value != 1)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sequence lengths go with the forward direction only");
    NIMBLE_RETURN_IF_ERROR(UNIFY(l->dims[0], b, "the batch (the sequence lengths)", ss->lens_in, 0, &b));
  }
  memset(out, 0, ss->outs * sizeof *out);
  out[0].dtype = xw->dtype;
  out[0].rank = 4;
  out[0].dims[0] = xw->dims[0];
  out[0].dims[1] = d;
  out[0].dims[2] = b;
  out[0].dims[3] = h;
  for (size_t k = 1; k < ss->outs; k++) {
    out[k].dtype = xw->dtype;
    out[k].rank = 3;
    out[k].dims[0] = d;
    out[k].dims[1] = b;
    out[k].dims[2] = h;
  }
  *num_out = ss->outs;
  return nimble_ok();
}

static nimble_status_t rel_lstm_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  static const scan_shape ss = {4, 3, 4, -1, 5, 3};
  return rel_scan(call, &ss, out, num_out);
}

static nimble_status_t rel_gru_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  static const scan_shape ss = {3, -1, -1, 3, 4, 2};
  return rel_scan(call, &ss, out, num_out);
}

static nimble_status_t rel_rnn_scan(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  static const scan_shape ss = {1, -1, -1, -1, 3, 2};
  return rel_scan(call, &ss, out, num_out);
}

static const nimble_attr_spec_t kLstmScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: one direction whose steps run from the last time index to the first"),
};

static const nimble_attr_spec_t kGruScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: one direction whose steps run from the last time index to the first"),
    ATTR_INT("linear_before_reset", 0, "1: the reset gate multiplies h R_h^T + rbh (ONNX's linear_before_reset)"),
};

static const nimble_attr_spec_t kRnnScanAttrs[] = {
    ATTR_INT("reverse", 0, "1: one direction whose steps run from the last time index to the first"),
};

const nimble_op nimble_ops_recurrent[] = {
    {"lstm_scan",
     "an LSTM layer's recurrence, D directions: (xw [T,B,D,4H], r [D,H,4H], h0, c0 [D,B,H], [peepholes [D,3H], "
     "[lens int64 [B]]]) -> (y [T,D,B,H], h, c [D,B,H]); gates i, o, f, c",
     4, 6, ATTRS(kLstmScanAttrs), rel_lstm_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"gru_scan",
     "a GRU layer's recurrence, D directions: (xw [T,B,D,3H], r [D,H,3H], h0 [D,B,H], rbh [D,H], [lens int64 [B]]) "
     "-> (y [T,D,B,H], h [D,B,H]); gates z, r, h",
     4, 5, ATTRS(kGruScanAttrs), rel_gru_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"rnn_scan",
     "a (tanh) RNN layer's recurrence, D directions: (xw [T,B,D,H], r [D,H,H], h0 [D,B,H], [lens int64 [B]]) -> "
     "(y [T,D,B,H], h [D,B,H])",
     3, 4, ATTRS(kRnnScanAttrs), rel_rnn_scan, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
};
const size_t nimble_ops_recurrent_count = sizeof nimble_ops_recurrent / sizeof nimble_ops_recurrent[0];
