/* dropout_train (ONNX Dropout in training mode): (x * mask / (1 - ratio),
 * mask). Nimble's kernels draw no random numbers, so only the
 * deterministic case is computed: ratio 0, where the output is x and the
 * mask all true. A ratio input other than 0 fails the kernel with a
 * message; without a ratio input (ONNX's default 0.5) the primitive is
 * UNIMPLEMENTED at compile time. Inference-mode Dropout never gets here:
 * the importer makes it the identity. */
#include "compute_internal.h"

#define A_ c->A

static nimble_status_t shape_dropout(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  if (n->n_in < 2)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dropout_train with the default ratio 0.5 draws random numbers "
                              "(only ratio 0 is computed)");
  if (n->in[1]->rank > 1 || n->in[1]->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dropout_train: the ratio must be a float32 scalar");
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  return nimble_ok();
}

static bool outputs_dropout(cp_ctx *c, cp_node *n, cp_outputs *o) {
  o->n = 2;
  o->type[0] = n->type;
  o->type[1] = NIMBLE_LN_BOOL;
  for (int k = 0; k < 2; k++) {
    o->rank[k] = n->rank;
    for (int a = 0; a < n->rank; a++) o->ext[k][a] = n->ext[a];
  }
  return true;
}

static nimble_ln_stmt *emit_dropout(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                    nimble_ln_param *const *shapes) {
  (void)shapes;
  cp_node *x = n->in[0], *r = n->in[1];
  nimble_ln_expr *z[1] = {cp_i(c, 0)};
  nimble_ln_expr *ratio = cp_value(c, r, z);
  if (!ratio) return NULL;
  nimble_ln_stmt *check = nimble_ln_check(
      A_, nimble_ln_binary(A_, NIMBLE_LN_EQ, ratio, nimble_ln_f32(A_, 0)),
      "dropout_train: training-mode dropout with a ratio other than 0 draws random numbers, which Nimble's "
      "kernels do not (only ratio 0 is computed)");
  nimble_ln_stmt *y = cp_store_nest(c, x, outs[0], 1);
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK];
  for (int a = 0; a < x->rank; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(A_, v[a]);
  }
  nimble_ln_expr *mi = x->rank ? nimble_ln_flat_index(A_, outs[1], idx) : cp_i(c, 0);
  nimble_ln_stmt *mask = cp_loops(c, v, x->ext, x->rank, 1, nimble_ln_store(A_, outs[1], mi, nimble_ln_u8(A_, 1)));
  nimble_ln_stmt *s[3] = {check, y, mask};
  return nimble_ln_seq(A_, s, 3);
}

const cp_def cp_defs_dropout[] = {
    {"dropout_train", CP_ANCHOR_ROW, shape_dropout, NULL, NULL, NULL, outputs_dropout, emit_dropout},
};
const int cp_defs_dropout_count = (int)(sizeof cp_defs_dropout / sizeof cp_defs_dropout[0]);
