/* Reduction compute definitions: sum, mean, max, min, prod over axes
 * (empty: all) with keepdims, and argmax/argmin along one axis. Each is a
 * point anchor: per output element an accumulator runs over the reduced
 * axes, reading its input's value (so an element-wise or injective chain
 * below the reduction is computed inline), and the result feeds the
 * epilogue's store. Sum-like accumulations vectorize their innermost loop
 * (the loop hint lets LLVM reassociate f32 adds). */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD } reduce_kind;

static reduce_kind kind_of(const cp_node *n) {
  const char *o = n->op->name;
  if (!strcmp(o, "mean")) return R_MEAN;
  if (!strcmp(o, "max")) return R_MAX;
  if (!strcmp(o, "min")) return R_MIN;
  if (!strcmp(o, "prod")) return R_PROD;
  return R_SUM;
}

/* Which input axes are reduced. */
static bool reduced_axes(cp_ctx *c, cp_node *n, bool *red) {
  cp_node *x = n->in[0];
  size_t na;
  const int64_t *axes = cp_attr_ints(n, "axes", &na);
  for (int a = 0; a < x->rank; a++) red[a] = na == 0;
  for (size_t i = 0; i < na; i++) {
    int ax;
    if (!cp_axis(c, n, axes[i], x->rank, &ax)) return false;
    red[ax] = true;
  }
  return true;
}

static nimble_status_t shape_reduce(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  bool red[CP_MAX_RANK];
  n->type = x->type;
  n->dtype = x->dtype;
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "reducing bool tensors");
  if (!reduced_axes(c, n, red)) return nimble_ok();
  bool keep = cp_attr_int(n, "keepdims") != 0;
  n->rank = 0;
  for (int a = 0; a < x->rank; a++) {
    if (!red[a]) n->ext[n->rank++] = x->ext[a];
    else if (keep) n->ext[n->rank++] = cp_i(c, 1);
  }
  return nimble_ok();
}

static nimble_ln_expr *init_of(cp_ctx *c, reduce_kind k, nimble_ln_type_t t) {
  switch (k) {
  case R_MAX: return t == NIMBLE_LN_F32 ? nimble_ln_f32(c->A, -INFINITY) : cp_const_of(c, t, t == NIMBLE_LN_I64 ? (double)INT64_MIN : (double)INT32_MIN);
  case R_MIN: return t == NIMBLE_LN_F32 ? nimble_ln_f32(c->A, INFINITY) : cp_const_of(c, t, t == NIMBLE_LN_I64 ? (double)INT64_MAX : (double)INT32_MAX);
  case R_PROD: return cp_const_of(c, t, 1);
  default: return cp_const_of(c, t, 0);
  }
}

static nimble_ln_stmt *emit_reduce(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                   nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  bool red[CP_MAX_RANK];
  if (!reduced_axes(c, n, red)) return NULL;
  bool keep = cp_attr_int(n, "keepdims") != 0;
  reduce_kind k = kind_of(n);
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  nimble_ln_var *rv[CP_MAX_RANK];
  int o = 0, last_red = -1;
  for (int a = 0; a < x->rank; a++) {
    if (red[a]) {
      rv[a] = cp_var(c, "r", NIMBLE_LN_I64);
      in_idx[a] = nimble_ln_ref(c->A, rv[a]);
      last_red = a;
      if (keep) o++;
    } else {
      in_idx[a] = idx[o++];
    }
  }
  nimble_ln_var *acc = cp_var(c, "acc", n->type);
  nimble_ln_expr *v = cp_value(c, x, in_idx);
  nimble_ln_expr *ra = nimble_ln_ref(c->A, acc), *nv;
  switch (k) {
  case R_MAX: nv = nimble_ln_binary(c->A, NIMBLE_LN_MAX, ra, v); break;
  case R_MIN: nv = nimble_ln_binary(c->A, NIMBLE_LN_MIN, ra, v); break;
  case R_PROD: nv = nimble_ln_binary(c->A, NIMBLE_LN_MUL, ra, v); break;
  default: nv = nimble_ln_binary(c->A, NIMBLE_LN_ADD, ra, v); break;
  }
  nimble_ln_stmt *loop = nimble_ln_assign(c->A, acc, nv);
  nimble_ln_expr *count = cp_i(c, 1);
  for (int a = x->rank - 1; a >= 0; a--) {
    if (!red[a]) continue;
    bool vec = a == last_red && (k == R_SUM || k == R_MEAN) && n->type == NIMBLE_LN_F32 && c->opt.vector_width > 1;
    loop = cp_for(c, rv[a], x->ext[a], vec ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vec ? c->opt.vector_width : 0, loop);
    count = cp_mul(c, count, x->ext[a]);
  }
  nimble_ln_expr *fin = ra;
  if (k == R_MEAN) fin = nimble_ln_binary(c->A, NIMBLE_LN_DIV, ra, cp_convert(c, count, n->type));
  return nimble_ln_decl(c->A, acc, init_of(c, k, n->type),
                        nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, fin, body)));
}

/* argmax / argmin: the first index of the extreme value along one axis. */
static nimble_status_t shape_arg(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int ax;
  n->type = NIMBLE_LN_I64;
  n->dtype = NIMBLE_DTYPE_INT64;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return nimble_ok();
  cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_GT, x->ext[ax], cp_i(c, 0))),
           "%s: the reduced axis %d is empty", n->op->name, ax);
  bool keep = cp_attr_int(n, "keepdims") != 0;
  n->rank = 0;
  for (int a = 0; a < x->rank; a++) {
    if (a != ax) n->ext[n->rank++] = x->ext[a];
    else if (keep) n->ext[n->rank++] = cp_i(c, 1);
  }
  return nimble_ok();
}

static nimble_ln_stmt *emit_arg(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  bool keep = cp_attr_int(n, "keepdims") != 0, is_max = strcmp(n->op->name, "argmax") == 0;
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64);
  for (int a = 0, o = 0; a < x->rank; a++) {
    if (a == ax) {
      in_idx[a] = nimble_ln_ref(c->A, r);
      if (keep) o++;
    } else {
      in_idx[a] = idx[o++];
    }
  }
  nimble_ln_var *best = cp_var(c, "best", x->type), *bi = cp_var(c, "bi", NIMBLE_LN_I64);
  nimble_ln_expr *v = cp_value(c, x, in_idx);
  nimble_ln_expr *better = nimble_ln_binary(c->A, is_max ? NIMBLE_LN_GT : NIMBLE_LN_LT, v, nimble_ln_ref(c->A, best));
  nimble_ln_stmt *upd = nimble_ln_if(c->A, better,
                                     nimble_ln_seq2(c->A, nimble_ln_assign(c->A, best, v),
                                                    nimble_ln_assign(c->A, bi, nimble_ln_ref(c->A, r))),
                                     NULL);
  nimble_ln_stmt *loop = cp_for(c, r, x->ext[ax], NIMBLE_LN_SERIAL, 0, upd);
  return nimble_ln_decl(
      c->A, best, init_of(c, is_max ? R_MAX : R_MIN, x->type),
      nimble_ln_decl(c->A, bi, cp_i(c, 0),
                     nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, nimble_ln_ref(c->A, bi), body))));
}

/* ---- topk: k rounds of "the best element after the previous one" in the
 * order (value, index), so no scratch memory and no sort: O(n k) per row. */

static nimble_status_t shape_topk(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int ax;
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = x->rank;
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "topk of bool");
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return nimble_ok();
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  nimble_ln_expr *k;
  if (n->n_in == 2) {
    nimble_ln_expr *i0[1] = {cp_i(c, 0)};
    k = cp_convert(c, cp_value(c, n->in[1], n->in[1]->rank ? i0 : NULL), NIMBLE_LN_I64);
  } else {
    k = cp_i(c, cp_attr_int(n, "k"));
  }
  cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_AND,
                                                                   nimble_ln_binary(c->A, NIMBLE_LN_GE, k, cp_i(c, 0)),
                                                                   nimble_ln_binary(c->A, NIMBLE_LN_LE, k, x->ext[ax]))),
           "topk: k is negative or exceeds axis %d", ax);
  n->ext[ax] = k;
  return nimble_ok();
}

nimble_ln_stmt *cp_emit_topk(cp_ctx *c, cp_node *n, nimble_ln_param *values, nimble_ln_param *indices) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  bool largest = cp_attr_int(n, "largest") != 0;
  nimble_ln_op_t better = largest ? NIMBLE_LN_GT : NIMBLE_LN_LT, worse = largest ? NIMBLE_LN_LT : NIMBLE_LN_GT;
  nimble_ln_var *v[CP_MAX_RANK];
  nimble_ln_expr *oidx[CP_MAX_RANK], *xidx[CP_MAX_RANK];
  for (int a = 0; a < x->rank; a++) {
    v[a] = cp_var(c, "i", NIMBLE_LN_I64);
    oidx[a] = xidx[a] = nimble_ln_ref(A, v[a]);
  }
  nimble_ln_var *t = cp_var(c, "t", NIMBLE_LN_I64);
  xidx[ax] = nimble_ln_ref(A, t);
  nimble_ln_var *pv = cp_var(c, "pv", x->type), *pi = cp_var(c, "pi", NIMBLE_LN_I64);
  nimble_ln_var *bv = cp_var(c, "bv", x->type), *bi = cp_var(c, "bi", NIMBLE_LN_I64);
  nimble_ln_expr *xv = cp_value(c, x, xidx), *tr = nimble_ln_ref(A, t);
  if (!xv) return NULL;
  /* Eligible: after the previous pick in (value, index) order. */
  nimble_ln_expr *eligible = nimble_ln_binary(
      A, NIMBLE_LN_OR, nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_ref(A, pi), cp_i(c, 0)),
      nimble_ln_binary(A, NIMBLE_LN_OR, nimble_ln_binary(A, worse, xv, nimble_ln_ref(A, pv)),
                       nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_EQ, xv, nimble_ln_ref(A, pv)),
                                        nimble_ln_binary(A, NIMBLE_LN_GT, tr, nimble_ln_ref(A, pi)))));
  nimble_ln_expr *take = nimble_ln_binary(
      A, NIMBLE_LN_AND, eligible,
      nimble_ln_binary(A, NIMBLE_LN_OR, nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_ref(A, bi), cp_i(c, 0)),
                       nimble_ln_binary(A, better, xv, nimble_ln_ref(A, bv))));
  nimble_ln_stmt *scan = cp_for(c, t, x->ext[ax], NIMBLE_LN_SERIAL, 0,
                                nimble_ln_if(A, take, nimble_ln_seq2(A, nimble_ln_assign(A, bv, xv), nimble_ln_assign(A, bi, tr)), NULL));
  nimble_ln_stmt *emit[4] = {
      scan,
      nimble_ln_store(A, values, nimble_ln_flat_index(A, values, oidx), nimble_ln_ref(A, bv)),
      nimble_ln_store(A, indices, nimble_ln_flat_index(A, indices, oidx), nimble_ln_ref(A, bi)),
      nimble_ln_seq2(A, nimble_ln_assign(A, pv, nimble_ln_ref(A, bv)), nimble_ln_assign(A, pi, nimble_ln_ref(A, bi))),
  };
  nimble_ln_stmt *round = nimble_ln_decl(A, bv, cp_const_of(c, x->type, 0),
                                         nimble_ln_decl(A, bi, cp_i(c, -1), nimble_ln_seq(A, emit, 4)));
  nimble_ln_stmt *row = cp_for(c, v[ax], n->ext[ax], NIMBLE_LN_SERIAL, 0, round);
  row = nimble_ln_decl(A, pv, cp_const_of(c, x->type, 0), nimble_ln_decl(A, pi, cp_i(c, -1), row));
  for (int a = x->rank - 1; a >= 0; a--)
    if (a != ax) row = cp_for(c, v[a], n->ext[a], NIMBLE_LN_SERIAL, 0, row);
  return row;
}

#define RED(name) {name, CP_ANCHOR_POINT, shape_reduce, NULL, emit_reduce, NULL}

const cp_def cp_defs_reduce[] = {
    RED("sum"), RED("mean"), RED("max"), RED("min"), RED("prod"),
    {"argmax", CP_ANCHOR_POINT, shape_arg, NULL, emit_arg, NULL},
    {"argmin", CP_ANCHOR_POINT, shape_arg, NULL, emit_arg, NULL},
    {"topk", CP_INJECTIVE, shape_topk, NULL, NULL, NULL},
};
const int cp_defs_reduce_count = (int)(sizeof cp_defs_reduce / sizeof cp_defs_reduce[0]);
