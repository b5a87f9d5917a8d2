/* one_hot (ONNX OneHot): indices [...] -> [..., depth, ...] with the depth
 * axis at `axis`; on_value where the (normalized) index equals the
 * position along it, off_value elsewhere. depth is a run-time scalar of
 * any numeric type (cast to int64, as ONNX says), checked non-negative;
 * indices of any numeric type are cast to int64 (floats truncate; NaN and
 * values beyond +-2^62 match nothing), negative ones count from depth,
 * and one outside [-depth, depth) gives a row of off_value. */
#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))

/* An i64 from a numeric value; floats outside +-2^62 (and NaN) become
 * INT64_MIN / 2, which no index matches. */
static nimble_ln_expr *to_i64(cp_ctx *c, nimble_ln_expr *v) {
  if (!v || v->type != NIMBLE_LN_F32) return cp_convert(c, v, NIMBLE_LN_I64);
  nimble_ln_expr *lim = nimble_ln_f32(A_, 4611686018427387904.0);
  nimble_ln_expr *ok = BIN(AND, BIN(LT, nimble_ln_unary(A_, NIMBLE_LN_ABS, v), lim), BIN(EQ, v, v));
  return SEL(ok, nimble_ln_cast(A_, NIMBLE_LN_I64, SEL(ok, v, nimble_ln_f32(A_, 0))), cp_i(c, INT64_MIN / 2));
}

static nimble_ln_expr *scalar(cp_ctx *c, cp_node *v) {
  nimble_ln_expr *z[CP_MAX_RANK];
  for (int a = 0; a < v->rank; a++) z[a] = cp_i(c, 0);
  return cp_value(c, v, z);
}

static nimble_status_t shape_one_hot(cp_ctx *c, cp_node *n) {
  cp_node *ind = n->in[0], *depth = n->in[1], *vals = n->in[2];
  int ax;
  if (depth->rank > 1 || vals->rank != 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "one_hot: depth must be a scalar and values [off, on]");
  if (ind->type == NIMBLE_LN_BOOL || depth->type == NIMBLE_LN_BOOL)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "one_hot: indices and depth must be numbers");
  if (ind->rank + 1 > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "one_hot of rank %d", ind->rank + 1);
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), ind->rank + 1, &ax)) return nimble_ok();
  cp_check(c, cp_eq(c, vals->ext[0], cp_i(c, 2)), "one_hot: values must hold [off_value, on_value]");
  nimble_ln_expr *dv = scalar(c, depth);
  if (dv && dv->type == NIMBLE_LN_F32)
    cp_check(c, BIN(AND, BIN(EQ, dv, dv), BIN(LT, nimble_ln_unary(A_, NIMBLE_LN_ABS, dv), nimble_ln_f32(A_, 1e18))),
             "one_hot: depth is NaN or beyond 1e18");
  nimble_ln_expr *d = to_i64(c, dv);
  cp_check(c, BIN(GE, d, cp_i(c, 0)), "one_hot: depth is negative");
  n->type = vals->type;
  n->dtype = vals->dtype;
  n->rank = ind->rank + 1;
  for (int a = 0, j = 0; a < n->rank; a++) n->ext[a] = a == ax ? d : ind->ext[j++];
  n->aux[0] = d;
  cp_check_numel(c, n->ext, n->rank, "one_hot");
  return nimble_ok();
}

static nimble_ln_expr *value_one_hot(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *ind = n->in[0], *vals = n->in[2];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  nimble_ln_expr *ii[CP_MAX_RANK];
  for (int a = 0, j = 0; a < n->rank; a++)
    if (a != ax) ii[j++] = idx[a];
  nimble_ln_expr *v = to_i64(c, cp_value(c, ind, ii)), *d = n->aux[0];
  if (!v) return NULL;
  v = SEL(BIN(LT, v, cp_i(c, 0)), cp_add(c, v, d), v);
  nimble_ln_expr *off[1] = {cp_i(c, 0)}, *on[1] = {cp_i(c, 1)};
  return SEL(BIN(EQ, v, idx[ax]), cp_value(c, vals, on), cp_value(c, vals, off));
}

const cp_def cp_defs_one_hot[] = {
    {"one_hot", CP_INJECTIVE, shape_one_hot, value_one_hot, NULL, NULL, NULL, NULL},
};
const int cp_defs_one_hot_count = (int)(sizeof cp_defs_one_hot / sizeof cp_defs_one_hot[0]);
