/* Layout operators whose axes, repeats, pads or part sizes are a 1-D
 * tensor read at run time (ONNX passes them as inputs): dyn_expand_dims,
 * dyn_squeeze, dyn_tile, dyn_pad and dyn_split. The vector's length is
 * static (the result's rank follows from it); its values are loads, so the
 * extents are expressions over them, and everything the values could get
 * wrong (an axis out of range or repeated, a squeezed extent other than 1,
 * a negative repeat or size, parts that do not add up, a result past
 * 2^40 elements) is a run-time check naming the operator, in the shape
 * function and the kernel alike. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))

/* The static length of the vector input v (a scalar counts as one). */
static bool vec_len(cp_ctx *c, cp_node *n, cp_node *v, int *len) {
  int64_t l = 1;
  if (v->rank > 1 || (v->rank == 1 && !cp_const_i(v->ext[0], &l)) || l < 0 || l > 4 * CP_MAX_RANK) {
    cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: '%s' needs a 1-D input of static length", c->prim, n->op->name);
    return false;
  }
  if (v->type != NIMBLE_LN_I64 && v->type != NIMBLE_LN_I32) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: '%s' needs an integer input", c->prim, n->op->name);
    return false;
  }
  *len = (int)l;
  return true;
}

/* Element k of the vector input v, as i64. */
static nimble_ln_expr *vec_at(cp_ctx *c, cp_node *v, int k) {
  nimble_ln_expr *i[1] = {cp_i(c, k)};
  return cp_convert(c, cp_value(c, v, i), NIMBLE_LN_I64);
}

static nimble_ln_expr *b2i(cp_ctx *c, nimble_ln_expr *b) { return nimble_ln_cast(A_, NIMBLE_LN_I64, b); }

/* The axes input of dyn_expand_dims / dyn_squeeze: each value checked in
 * [-rank, rank) and normalized; mark[j] says whether some value names j,
 * and the marks must count len (no axis repeats). */
static bool marked_axes(cp_ctx *c, cp_node *n, int rank, nimble_ln_expr **mark) {
  cp_node *ax = n->in[1];
  int len;
  if (!vec_len(c, n, ax, &len)) return false;
  nimble_ln_expr *norm[4 * CP_MAX_RANK];
  for (int k = 0; k < len; k++) {
    nimble_ln_expr *v = vec_at(c, ax, k);
    cp_check(c, BIN(AND, BIN(GE, v, cp_i(c, -rank)), BIN(LT, v, cp_i(c, rank))),
             "%s: axes[%d] is out of range for rank %d", n->op->name, k, rank);
    norm[k] = SEL(BIN(LT, v, cp_i(c, 0)), cp_add(c, v, cp_i(c, rank)), v);
  }
  nimble_ln_expr *count = cp_i(c, 0);
  for (int j = 0; j < rank; j++) {
    nimble_ln_expr *m = NULL;
    for (int k = 0; k < len; k++) {
      nimble_ln_expr *e = BIN(EQ, norm[k], cp_i(c, j));
      m = m ? BIN(OR, m, e) : e;
    }
    mark[j] = m ? m : BIN(NE, cp_i(c, 0), cp_i(c, 0));
    count = cp_add(c, count, b2i(c, mark[j]));
  }
  cp_check(c, cp_eq(c, count, cp_i(c, len)), "%s: an axis repeats in axes", n->op->name);
  return !c->err;
}

static void same_type(cp_node *n, cp_node *x) {
  n->type = x->type;
  n->dtype = x->dtype;
}

/* ---- dyn_expand_dims(x, axes): an axis of 1 at each position named ---- */

static nimble_status_t shape_dyn_expand_dims(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int len;
  same_type(n, x);
  if (!vec_len(c, n, n->in[1], &len)) return nimble_ok();
  int R = x->rank + len;
  if (R > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dyn_expand_dims to rank %d", R);
  n->rank = R;
  nimble_ln_expr *ins[CP_MAX_RANK];
  if (!marked_axes(c, n, R, ins)) return nimble_ok();
  /* Output axis i is inserted, or x's axis i - (insertions before i). */
  nimble_ln_expr *before = cp_i(c, 0);
  for (int i = 0; i < R; i++) {
    nimble_ln_expr *src = cp_sub(c, cp_i(c, i), before), *e = x->rank ? x->ext[0] : cp_i(c, 1);
    for (int j = 1; j < x->rank; j++) e = SEL(BIN(EQ, src, cp_i(c, j)), x->ext[j], e);
    n->ext[i] = SEL(ins[i], cp_i(c, 1), e);
    before = cp_add(c, before, b2i(c, ins[i]));
  }
  return nimble_ok();
}

/* ---- dyn_squeeze(x, axes): drops the named axes (each of extent 1) ---- */

static nimble_status_t shape_dyn_squeeze(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int len;
  same_type(n, x);
  if (!vec_len(c, n, n->in[1], &len)) return nimble_ok();
  if (len > x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_squeeze: %d axes for rank %d", len, x->rank);
  n->rank = x->rank - len;
  nimble_ln_expr *drop[CP_MAX_RANK], *pos[CP_MAX_RANK];
  if (!marked_axes(c, n, x->rank, drop)) return nimble_ok();
  nimble_ln_expr *before = cp_i(c, 0);
  for (int j = 0; j < x->rank; j++) {
    cp_check(c, BIN(OR, nimble_ln_unary(A_, NIMBLE_LN_NOT, drop[j]), BIN(EQ, x->ext[j], cp_i(c, 1))),
             "dyn_squeeze: axis %d is squeezed but its extent is not 1", j);
    pos[j] = cp_sub(c, cp_i(c, j), before); /* output axis of a kept j */
    before = cp_add(c, before, b2i(c, drop[j]));
  }
  /* Output axis i is the kept axis j >= i with i = j - (drops before j). */
  for (int i = 0; i < n->rank; i++) {
    nimble_ln_expr *e = x->ext[x->rank - 1];
    for (int j = x->rank - 2; j >= i; j--)
      e = SEL(BIN(AND, nimble_ln_unary(A_, NIMBLE_LN_NOT, drop[j]), BIN(EQ, pos[j], cp_i(c, i))), x->ext[j], e);
    n->ext[i] = e;
  }
  return nimble_ok();
}

/* Squeeze and expand_dims keep the row-major order of the elements. */
static nimble_ln_expr *value_flat_copy(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *f = cp_i(c, 0);
  for (int a = 0; a < n->rank; a++) f = cp_add(c, cp_mul(c, f, n->ext[a]), idx[a]);
  return cp_value_flat(c, n->in[0], f);
}

/* ---- dyn_tile(x, repeats) ---- */

static nimble_status_t shape_dyn_tile(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int len;
  same_type(n, x);
  n->rank = x->rank;
  if (!vec_len(c, n, n->in[1], &len)) return nimble_ok();
  if (len != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_tile: %d repeats for rank %d", len, x->rank);
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *r = vec_at(c, n->in[1], a);
    cp_check(c, BIN(GE, r, cp_i(c, 0)), "dyn_tile: repeats[%d] is negative", a);
    /* Bounded before multiplying, so the product cannot overflow. */
    cp_check(c, BIN(LE, r, cp_div(c, cp_i(c, CP_MAX_DYN_ELEMENTS), cp_max(c, x->ext[a], cp_i(c, 1)))),
             "dyn_tile: repeats[%d] makes axis %d longer than 2^40", a, a);
    n->ext[a] = cp_mul(c, x->ext[a], r);
  }
  cp_check_numel(c, n->ext, n->rank, "dyn_tile");
  return nimble_ok();
}

static nimble_ln_expr *value_dyn_tile(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  /* An input extent of 0 gives an output extent of 0: never evaluated. */
  for (int a = 0; a < n->rank; a++) in_idx[a] = cp_rem(c, idx[a], n->in[0]->ext[a]);
  return cp_value(c, n->in[0], in_idx);
}

/* ---- dyn_pad(x, pads, [value]): pads = all begins, then all ends ---- */

static nimble_status_t shape_dyn_pad(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int len;
  same_type(n, x);
  n->rank = x->rank;
  const char *mode = cp_attr_string(n, "mode");
  if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dyn_pad mode '%s'", mode);
  if (!vec_len(c, n, n->in[1], &len)) return nimble_ok();
  if (len != 2 * x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_pad: %d pads for rank %d", len, x->rank);
  if (n->n_in == 3 && (n->in[2]->type != x->type || n->in[2]->rank > 1))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_pad: the value must be a scalar of the input's type");
  bool constant = !strcmp(mode, "constant");
  nimble_ln_expr *lim = cp_i(c, CP_MAX_DYN_ELEMENTS);
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *pb = vec_at(c, n->in[1], a), *pe = vec_at(c, n->in[1], a + x->rank);
    /* Negative pads crop; both are bounded before they are added. */
    cp_check(c, BIN(AND, BIN(LE, cp_max(c, pb, pe), lim), BIN(GE, cp_min(c, pb, pe), cp_sub(c, cp_i(c, 0), lim))),
             "dyn_pad: a pad of axis %d is beyond 2^40", a);
    n->ext[a] = cp_add(c, cp_add(c, x->ext[a], pb), pe);
    n->aux[a] = pb;
    if (!constant)
      cp_check(c, BIN(OR, BIN(GT, x->ext[a], cp_i(c, 0)), BIN(LE, n->ext[a], cp_i(c, 0))),
               "dyn_pad: %s padding of axis %d, which is empty", mode, a);
  }
  cp_check_numel(c, n->ext, n->rank, "dyn_pad");
  return nimble_ok();
}

/* j in [0, d) for the source index j of an output index (d > 0). */
static nimble_ln_expr *pad_source(cp_ctx *c, const char *mode, nimble_ln_expr *j, nimble_ln_expr *d) {
  nimble_ln_expr *last = cp_sub(c, d, cp_i(c, 1));
  if (!strcmp(mode, "reflect")) {
    /* NumPy's reflect repeats with period 2 (d - 1); a one-element axis
     * repeats its element. */
    nimble_ln_expr *m = cp_max(c, cp_add(c, last, last), cp_i(c, 1));
    nimble_ln_expr *t = cp_rem(c, cp_add(c, cp_rem(c, j, m), m), m);
    nimble_ln_expr *r = SEL(BIN(LT, t, d), t, cp_sub(c, m, t));
    return SEL(BIN(EQ, d, cp_i(c, 1)), cp_i(c, 0), r);
  }
  return cp_max(c, cp_min(c, j, last), cp_i(c, 0));
}

static nimble_ln_stmt *emit_dyn_pad(cp_ctx *c, cp_node *n, nimble_ln_param *out) {
  cp_node *x = n->in[0];
  const char *mode = cp_attr_string(n, "mode");
  bool constant = !strcmp(mode, "constant");
  int R = n->rank;
  nimble_ln_var *v[CP_MAX_RANK], *pb[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK], *src[CP_MAX_RANK], *inside = NULL;
  for (int a = 0; a < R; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    pb[a] = cp_var(c, "pb", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(A_, v[a]);
    nimble_ln_expr *j = cp_sub(c, idx[a], nimble_ln_ref(A_, pb[a]));
    if (constant) {
      nimble_ln_expr *in = BIN(AND, BIN(GE, j, cp_i(c, 0)), BIN(LT, j, x->ext[a]));
      inside = inside ? BIN(AND, inside, in) : in;
    }
    src[a] = pad_source(c, constant ? "edge" : mode, j, x->ext[a]);
  }
  nimble_ln_expr *fill = cp_const_of(c, n->type, 0);
  if (n->n_in == 3) {
    nimble_ln_expr *z[1] = {cp_i(c, 0)};
    fill = cp_value(c, n->in[2], z);
  }
  nimble_ln_expr *val = cp_value(c, x, src);
  if (!val || !fill) return NULL;
  if (inside) val = SEL(inside, val, fill);
  nimble_ln_expr *oi = R ? nimble_ln_flat_index(A_, out, idx) : cp_i(c, 0);
  nimble_ln_stmt *body = cp_loops(c, v, n->ext, R, 1, nimble_ln_store(A_, out, oi, val));
  if (constant) {
    /* An empty input pads to the fill value alone: its tensor is never read. */
    nimble_ln_var *w[CP_MAX_RANK];
    nimble_ln_expr *widx[CP_MAX_RANK];
    for (int a = 0; a < R; a++) {
      w[a] = cp_var(c, "i", NIMBLE_LN_I64);
      widx[a] = nimble_ln_ref(A_, w[a]);
    }
    nimble_ln_expr *wo = R ? nimble_ln_flat_index(A_, out, widx) : cp_i(c, 0);
    nimble_ln_stmt *fills = cp_loops(c, w, n->ext, R, 1, nimble_ln_store(A_, out, wo, fill));
    nimble_ln_expr *nonempty = BIN(GT, cp_product(c, x->ext, 0, x->rank), cp_i(c, 0));
    body = nimble_ln_if(A_, nonempty, body, fills);
  }
  for (int a = R - 1; a >= 0; a--) body = nimble_ln_let(A_, pb[a], n->aux[a], body);
  return body;
}

/* ---- dyn_split(x, sizes): one output per size along axis ---- */

static nimble_status_t shape_dyn_split(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  same_type(n, x);
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  return nimble_ok();
}

static bool outputs_dyn_split(cp_ctx *c, cp_node *n, cp_outputs *o) {
  cp_node *x = n->in[0];
  int ax, len;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax) || !vec_len(c, n, n->in[1], &len)) return false;
  if (len < 1 || len > CP_MAX_OUTPUTS) {
    cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: dyn_split into %d parts (at most %d)", c->prim, len, CP_MAX_OUTPUTS);
    return false;
  }
  nimble_ln_expr *total = cp_i(c, 0);
  o->n = len;
  for (int p = 0; p < len; p++) {
    nimble_ln_expr *s = vec_at(c, n->in[1], p);
    cp_check(c, BIN(AND, BIN(GE, s, cp_i(c, 0)), BIN(LE, s, x->ext[ax])),
             "dyn_split: part %d's size is negative or longer than axis %d", p, ax);
    total = cp_add(c, total, s);
    o->type[p] = x->type;
    o->rank[p] = x->rank;
    for (int a = 0; a < x->rank; a++) o->ext[p][a] = a == ax ? s : x->ext[a];
  }
  cp_check(c, cp_eq(c, total, x->ext[ax]), "dyn_split: the sizes do not add up to axis %d", ax);
  return !c->err;
}

static nimble_ln_stmt *emit_dyn_split(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                      nimble_ln_param *const *shapes) {
  (void)shapes;
  cp_node *x = n->in[0];
  int ax, len;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax) || !vec_len(c, n, n->in[1], &len)) return NULL;
  nimble_ln_stmt *parts[CP_MAX_OUTPUTS];
  nimble_ln_expr *off = cp_i(c, 0);
  for (int p = 0; p < len && p < CP_MAX_OUTPUTS; p++) {
    nimble_ln_var *v[CP_MAX_RANK], *base = cp_var(c, "off", NIMBLE_LN_I64);
    nimble_ln_expr *idx[CP_MAX_RANK], *src[CP_MAX_RANK], *ext[CP_MAX_RANK];
    for (int a = 0; a < x->rank; a++) {
      v[a] = cp_var(c, "i", NIMBLE_LN_I64);
      idx[a] = src[a] = nimble_ln_ref(A_, v[a]);
      ext[a] = nimble_ln_shape(A_, outs[p], a); /* checked equal to the part's extent */
    }
    src[ax] = cp_add(c, idx[ax], nimble_ln_ref(A_, base));
    nimble_ln_expr *val = cp_value(c, x, src);
    if (!val) return NULL;
    nimble_ln_stmt *st =
        nimble_ln_store(A_, outs[p], x->rank ? nimble_ln_flat_index(A_, outs[p], idx) : cp_i(c, 0), val);
    parts[p] = nimble_ln_let(A_, base, off, cp_loops(c, v, ext, x->rank, 1, st));
    off = cp_add(c, off, vec_at(c, n->in[1], p));
  }
  return nimble_ln_seq(A_, parts, (size_t)len);
}

#define INJ(name, shape, value) {name, CP_INJECTIVE, shape, value, NULL, NULL, NULL, NULL}

const cp_def cp_defs_dyn_layout[] = {
    INJ("dyn_expand_dims", shape_dyn_expand_dims, value_flat_copy),
    INJ("dyn_squeeze", shape_dyn_squeeze, value_flat_copy),
    INJ("dyn_tile", shape_dyn_tile, value_dyn_tile),
    {"dyn_pad", CP_ANCHOR_ROW, shape_dyn_pad, NULL, NULL, emit_dyn_pad, NULL, NULL},
    {"dyn_split", CP_ANCHOR_ROW, shape_dyn_split, NULL, NULL, NULL, outputs_dyn_split, emit_dyn_split},
};
const int cp_defs_dyn_layout_count = (int)(sizeof cp_defs_dyn_layout / sizeof cp_defs_dyn_layout[0]);
