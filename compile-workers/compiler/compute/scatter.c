/* Scatter compute definitions, as whole kernels: scatter_elements and
 * scatter_nd. */
#include <string.h>

#include "compute_internal.h"

/* ---- scatter_elements and scatter_nd: whole kernels (the result's root)
 * that copy data into the output, then write the updates at the indexed
 * places in index order, serially, so a repeated index keeps the last
 * update (reduction "none") or accumulates them ("add", "mul"), as ONNX's
 * reference does. Indices are normalized like take's: negative ones count
 * from the end, out-of-range ones are clamped. ---- */

static nimble_status_t shape_scatter(cp_ctx *c, cp_node *n) {
  cp_shape_same(c, n);
  cp_node *ind = n->in[1];
  if (ind->type != NIMBLE_LN_I64 && ind->type != NIMBLE_LN_I32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: indices must be integers", n->op->name);
  if (n->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s of bool", n->op->name);
  const char *red = cp_attr_string(n, "reduction");
  if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s: reduction '%s'", n->op->name, red);
  return nimble_ok();
}

/* for every index of extents ext[0..rank) (fresh variables in v) around body. */
static nimble_ln_stmt *serial_nest(cp_ctx *c, nimble_ln_var *const *v, nimble_ln_expr *const *ext, int rank,
                                   nimble_ln_stmt *body) {
  for (int a = rank - 1; a >= 0 && body; a--) body = cp_for(c, v[a], ext[a], NIMBLE_LN_SERIAL, 0, body);
  return body;
}

/* out = data, element by element. An in-place scatter (attribute
 * inplace=1, set by update_in_place) gets its data tensor as the output
 * itself: nothing to copy, so an empty statement. */
static nimble_ln_stmt *copy_into(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  if (cp_attr_int(n, "inplace")) {
    c->k->in_place = 1;
    return nimble_ln_seq(c->A, NULL, 0);
  }
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(c->A, v[a]);
  }
  nimble_ln_expr *x = cp_value(c, n->in[0], idx);
  if (!x) return NULL;
  return serial_nest(c, v, n->ext, n->rank, nimble_ln_store(c->A, o, nimble_ln_flat_index(c->A, o, idx), x));
}

/* out[pos] = u, or combined with what is there. */
static nimble_ln_stmt *scatter_store(cp_ctx *c, cp_node *n, nimble_ln_param *o, nimble_ln_expr *const *pos,
                                     nimble_ln_expr *u) {
  nimble_ln_expr *flat = nimble_ln_flat_index(c->A, o, pos);
  const char *red = cp_attr_string(n, "reduction");
  if (!strcmp(red, "add") || !strcmp(red, "mul"))
    u = nimble_ln_binary(c->A, red[0] == 'a' ? NIMBLE_LN_ADD : NIMBLE_LN_MUL, cp_load(c, o, flat, n->type), u);
  return nimble_ln_store(c->A, o, flat, u);
}

/* An index value normalized into [0, d). */
static nimble_ln_expr *norm_index(cp_ctx *c, nimble_ln_expr *iv, nimble_ln_expr *d) {
  iv = cp_convert(c, iv, NIMBLE_LN_I64);
  if (!iv) return NULL;
  iv = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, iv, cp_i(c, 0)), cp_add(c, iv, d), iv);
  return cp_clamp(c, iv, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
}

static nimble_ln_stmt *emit_scatter_elements(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *ind = n->in[1], *upd = n->in[2];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  if (ind->rank != n->rank || upd->rank != n->rank)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: indices and updates need data's rank %d", c->prim, n->rank);
  for (int a = 0; a < n->rank; a++)
    cp_check(c, cp_eq(c, ind->ext[a], upd->ext[a]), "scatter_elements: indices and updates differ on axis %d", a);
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *j[CP_MAX_RANK], *pos[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) {
    v[a] = cp_var(c, "j", NIMBLE_LN_I64);
    j[a] = pos[a] = nimble_ln_ref(c->A, v[a]);
  }
  pos[ax] = norm_index(c, cp_value(c, ind, j), n->ext[ax]);
  nimble_ln_expr *u = cp_value(c, upd, j);
  nimble_ln_stmt *copy = copy_into(c, n, o);
  if (!pos[ax] || !u || !copy) return NULL;
  return nimble_ln_seq2(c->A, copy, serial_nest(c, v, ind->ext, ind->rank, scatter_store(c, n, o, pos, u)));
}

/* scatter_nd: indices [..., k] address data's first k axes; updates are
 * [..., data dims k..]. */
static nimble_ln_stmt *emit_scatter_nd(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *ind = n->in[1], *upd = n->in[2];
  int64_t k;
  if (ind->rank < 1 || !cp_const_i(ind->ext[ind->rank - 1], &k))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: scatter_nd needs a static index tuple length", c->prim);
  int q = ind->rank - 1;
  if (k < 1 || k > n->rank || upd->rank != q + n->rank - (int)k)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: scatter_nd index tuples of %lld for data of rank %d", c->prim,
                   (long long)k, n->rank);
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *uidx[CP_MAX_RANK], *iidx[CP_MAX_RANK], *pos[CP_MAX_RANK], *ext[CP_MAX_RANK];
  int ur = upd->rank;
  for (int a = 0; a < ur; a++) {
    v[a] = cp_var(c, "j", NIMBLE_LN_I64);
    uidx[a] = nimble_ln_ref(c->A, v[a]);
    ext[a] = a < q ? ind->ext[a] : n->ext[(int)k + a - q];
    if (a < q) cp_check(c, cp_eq(c, upd->ext[a], ind->ext[a]), "scatter_nd: updates axis %d differs from indices", a);
    else cp_check(c, cp_eq(c, upd->ext[a], ext[a]), "scatter_nd: updates axis %d differs from data", a);
  }
  /* The index tuple depends on the outer q axes only: it is read and
   * normalized once per tuple (let-bound around the slice's loops), not
   * once per element of the slice it addresses (an LSTM step's row of Y
   * is one tuple and H elements). */
  for (int a = 0; a < q; a++) iidx[a] = uidx[a];
  nimble_ln_var *pv[CP_MAX_RANK];
  nimble_ln_expr *pval[CP_MAX_RANK];
  for (int t = 0; t < (int)k; t++) {
    iidx[q] = cp_i(c, t);
    pval[t] = norm_index(c, cp_value(c, ind, iidx), n->ext[t]);
    if (!pval[t]) return NULL;
    pv[t] = cp_var(c, "p", NIMBLE_LN_I64);
    pos[t] = nimble_ln_ref(c->A, pv[t]);
  }
  for (int a = (int)k; a < n->rank; a++) pos[a] = uidx[q + a - (int)k];
  nimble_ln_expr *u = cp_value(c, upd, uidx);
  nimble_ln_stmt *copy = copy_into(c, n, o);
  if (!u || !copy) return NULL;
  nimble_ln_stmt *slice = serial_nest(c, v + q, ext + q, ur - q, scatter_store(c, n, o, pos, u));
  for (int t = (int)k - 1; t >= 0 && slice; t--) slice = nimble_ln_let(c->A, pv[t], pval[t], slice);
  return nimble_ln_seq2(c->A, copy, serial_nest(c, v, ext, q, slice));
}

const cp_def cp_defs_scatter[] = {
    {"scatter_elements", CP_ANCHOR_ROW, shape_scatter, NULL, NULL, emit_scatter_elements},
    {"scatter_nd", CP_ANCHOR_ROW, shape_scatter, NULL, NULL, emit_scatter_nd},
};
const int cp_defs_scatter_count = (int)(sizeof cp_defs_scatter / sizeof cp_defs_scatter[0]);
