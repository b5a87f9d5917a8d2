/* Reduction compute definitions: sum, mean, max, min, prod over axes
 * (empty: all) with keepdims, dyn_sum (the axes a run-time tensor),
 * argmax/argmin and hardmax along one axis,
 * and conv2d_transpose (a sum over channels and kernel taps); cumsum, a
 * row anchor. Each is a
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
  case R_MAX: return cp_type_lowest(c, t);
  case R_MIN: return cp_type_highest(c, t);
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
  /* Sums and products of f16/bf16 accumulate in f32 and round once at the
   * end (NumPy's reductions of half floats do too); max and min are exact
   * in any type, and propagate NaN (NumPy's max). */
  nimble_ln_type_t at = k == R_MAX || k == R_MIN ? n->type : cp_acc_type(n->type);
  nimble_ln_var *acc = cp_var(c, "acc", at);
  nimble_ln_expr *v = cp_convert(c, cp_value(c, x, in_idx), at);
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
    bool vec = a == last_red && (k == R_SUM || k == R_MEAN) && (at == NIMBLE_LN_F32 || at == NIMBLE_LN_F64) &&
               c->opt.vector_width > 1;
    loop = cp_for(c, rv[a], x->ext[a], vec ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vec ? c->opt.vector_width : 0, loop);
    count = cp_mul(c, count, x->ext[a]);
  }
  nimble_ln_expr *fin = ra;
  if (k == R_MEAN) fin = nimble_ln_binary(c->A, NIMBLE_LN_DIV, ra, cp_convert(c, count, at));
  fin = cp_convert(c, fin, n->type);
  return nimble_ln_decl(c->A, acc, init_of(c, k, at),
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

/* NumPy's argmax and argmin (ONNX's reference uses them) take the first
 * NaN as the extreme: a NaN is better than any number, and nothing is
 * better than a NaN already found. */
static nimble_ln_expr *nan_wins(cp_ctx *c, nimble_ln_expr *better, nimble_ln_expr *v, nimble_ln_expr *best) {
  if (!v || !nimble_ln_type_is_float(v->type)) return better;
  nimble_ln_expr *v_nan = nimble_ln_binary(c->A, NIMBLE_LN_NE, v, v);
  nimble_ln_expr *best_nan = nimble_ln_binary(c->A, NIMBLE_LN_NE, best, best);
  return nimble_ln_binary(c->A, NIMBLE_LN_AND, nimble_ln_binary(c->A, NIMBLE_LN_OR, better, v_nan),
                          nimble_ln_unary(c->A, NIMBLE_LN_NOT, best_nan));
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
  better = nan_wins(c, better, v, nimble_ln_ref(c->A, best));
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

/* hardmax: 1 where the element is the first maximum along the axis, else
 * 0 (the row's argmax, as emit_arg finds it, compared with the index). */
static nimble_status_t shape_hardmax(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int ax;
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "hardmax of bool");
  cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax);
  return nimble_ok();
}

static nimble_ln_stmt *emit_hardmax(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                    nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64);
  for (int a = 0; a < x->rank; a++) in_idx[a] = a == ax ? nimble_ln_ref(c->A, r) : idx[a];
  nimble_ln_var *best = cp_var(c, "best", x->type), *bi = cp_var(c, "bi", NIMBLE_LN_I64);
  nimble_ln_expr *v = cp_value(c, x, in_idx);
  nimble_ln_expr *better = nimble_ln_binary(
      c->A, NIMBLE_LN_OR, nimble_ln_binary(c->A, NIMBLE_LN_LT, nimble_ln_ref(c->A, bi), cp_i(c, 0)),
      nan_wins(c, nimble_ln_binary(c->A, NIMBLE_LN_GT, v, nimble_ln_ref(c->A, best)), v, nimble_ln_ref(c->A, best)));
  nimble_ln_stmt *upd = nimble_ln_if(c->A, better,
                                     nimble_ln_seq2(c->A, nimble_ln_assign(c->A, best, v),
                                                    nimble_ln_assign(c->A, bi, nimble_ln_ref(c->A, r))),
                                     NULL);
  nimble_ln_stmt *loop = cp_for(c, r, x->ext[ax], NIMBLE_LN_SERIAL, 0, upd);
  nimble_ln_expr *hit = nimble_ln_binary(c->A, NIMBLE_LN_EQ, idx[ax], nimble_ln_ref(c->A, bi));
  nimble_ln_expr *val = nimble_ln_select(c->A, hit, cp_const_of(c, x->type, 1), cp_const_of(c, x->type, 0));
  return nimble_ln_decl(
      c->A, best, cp_const_of(c, x->type, 0),
      nimble_ln_decl(c->A, bi, cp_i(c, -1), nimble_ln_seq2(c->A, loop, nimble_ln_let(c->A, result, val, body))));
}

/* conv2d_transpose (ONNX ConvTranspose, NCHW): a point anchor summing over
 * the group's input channels and the kernel taps. Output (oy, ox) takes
 * input (iy, ix) through tap (ky, kx) when oy + pad_top - ky * dil_y =
 * iy * stride_y (and the same for x): the scatter of the definition read
 * as a gather, so each output element is computed once. The weights are
 * [C, M / groups, KH, KW]; the optional bias [M] is added at the end. */
typedef struct {
  int64_t s[2], d[2], p[4], op[2], groups;
} convt_attrs;

static bool convt_read(cp_ctx *c, cp_node *n, convt_attrs *a) {
  static const char *const names[] = {"strides", "dilations", "pads", "output_padding"};
  static const size_t want[] = {2, 2, 4, 2};
  static const int64_t dflt[] = {1, 1, 0, 0};
  int64_t *dst[] = {a->s, a->d, a->p, a->op};
  for (int k = 0; k < 4; k++) {
    size_t cnt;
    const int64_t *v = cp_attr_ints(n, names[k], &cnt);
    if (cnt && cnt != want[k]) {
      cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: conv2d_transpose %s has %zu values", c->prim, names[k], cnt);
      return false;
    }
    for (size_t i = 0; i < want[k]; i++) dst[k][i] = cnt ? v[i] : dflt[k];
  }
  a->groups = cp_attr_int(n, "groups");
  if (a->groups < 1 || a->s[0] < 1 || a->s[1] < 1 || a->d[0] < 1 || a->d[1] < 1) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: conv2d_transpose strides, dilations and groups must be >= 1", c->prim);
    return false;
  }
  return true;
}

static nimble_status_t shape_conv_transpose(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *w = n->in[1];
  convt_attrs a;
  n->type = x->type;
  n->dtype = x->dtype;
  if (x->type != NIMBLE_LN_F32) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "conv2d_transpose of non-float32");
  if (x->rank != 4 || w->rank != 4)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "conv2d_transpose: input and weights need rank 4");
  if (!convt_read(c, n, &a)) return nimble_ok();
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = cp_mul(c, w->ext[1], cp_i(c, a.groups));
  for (int i = 0; i < 2; i++) {
    /* (in - 1) * s - pad_begin - pad_end + d * (k - 1) + 1 + output_padding */
    nimble_ln_expr *e = cp_mul(c, cp_sub(c, x->ext[2 + i], cp_i(c, 1)), cp_i(c, a.s[i]));
    e = cp_add(c, e, cp_mul(c, cp_i(c, a.d[i]), cp_sub(c, w->ext[2 + i], cp_i(c, 1))));
    n->ext[2 + i] = cp_add(c, e, cp_i(c, 1 + a.op[i] - a.p[i] - a.p[2 + i]));
  }
  cp_check(c, cp_eq(c, x->ext[1], w->ext[0]), "conv2d_transpose: input channels differ from the weights' axis 0");
  cp_check(c, cp_eq(c, cp_rem(c, x->ext[1], cp_i(c, a.groups)), cp_i(c, 0)),
           "conv2d_transpose: input channels are not a multiple of groups");
  return nimble_ok();
}

static nimble_ln_stmt *emit_conv_transpose(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                           nimble_ln_stmt *body) {
  cp_node *x = n->in[0], *w = n->in[1];
  nimble_ln_arena *A = c->A;
  convt_attrs a;
  if (!convt_read(c, n, &a)) return NULL;
  nimble_ln_expr *mg = w->ext[1];                                   /* outputs per group */
  nimble_ln_expr *cg = cp_div(c, x->ext[1], cp_i(c, a.groups));    /* inputs per group */
  nimble_ln_expr *g = cp_div(c, idx[1], mg), *mm = cp_rem(c, idx[1], mg);
  nimble_ln_var *ci = cp_var(c, "ci", NIMBLE_LN_I64), *ky = cp_var(c, "ky", NIMBLE_LN_I64);
  nimble_ln_var *kx = cp_var(c, "kx", NIMBLE_LN_I64);
  nimble_ln_expr *ch = cp_add(c, cp_mul(c, g, cg), nimble_ln_ref(A, ci));
  nimble_ln_var *kv[2] = {ky, kx};
  nimble_ln_expr *valid = NULL, *in_pos[2];
  for (int i = 0; i < 2; i++) {
    nimble_ln_expr *t = cp_sub(c, cp_add(c, idx[2 + i], cp_i(c, a.p[i])), cp_mul(c, nimble_ln_ref(A, kv[i]), cp_i(c, a.d[i])));
    nimble_ln_expr *q = cp_div(c, t, cp_i(c, a.s[i]));
    nimble_ln_expr *ok = nimble_ln_binary(
        A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_GE, t, cp_i(c, 0)),
        nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_EQ, cp_rem(c, t, cp_i(c, a.s[i])), cp_i(c, 0)),
                         nimble_ln_binary(A, NIMBLE_LN_LT, q, x->ext[2 + i])));
    valid = valid ? nimble_ln_binary(A, NIMBLE_LN_AND, valid, ok) : ok;
    /* Clamped so the load stays inside even where the tap does not count. */
    in_pos[i] = cp_min(c, cp_max(c, q, cp_i(c, 0)), cp_max(c, cp_sub(c, x->ext[2 + i], cp_i(c, 1)), cp_i(c, 0)));
  }
  nimble_ln_expr *xi[4] = {idx[0], ch, in_pos[0], in_pos[1]};
  nimble_ln_expr *wi[4] = {ch, mm, nimble_ln_ref(A, ky), nimble_ln_ref(A, kx)};
  nimble_ln_expr *prod = nimble_ln_binary(A, NIMBLE_LN_MUL, cp_value(c, x, xi), cp_value(c, w, wi));
  nimble_ln_var *acc = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *ra = nimble_ln_ref(A, acc);
  nimble_ln_stmt *loop = nimble_ln_if(A, valid, nimble_ln_assign(A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, ra, prod)), NULL);
  loop = cp_for(c, kx, w->ext[3], NIMBLE_LN_SERIAL, 0, loop);
  loop = cp_for(c, ky, w->ext[2], NIMBLE_LN_SERIAL, 0, loop);
  loop = cp_for(c, ci, cg, NIMBLE_LN_SERIAL, 0, loop);
  nimble_ln_expr *fin = ra;
  if (n->n_in == 3) {
    nimble_ln_expr *bi[1] = {idx[1]};
    fin = nimble_ln_binary(A, NIMBLE_LN_ADD, ra, cp_value(c, n->in[2], bi));
  }
  return nimble_ln_decl(A, acc, nimble_ln_f32(A, 0), nimble_ln_seq2(A, loop, nimble_ln_let(A, result, fin, body)));
}

/* dyn_sum (ONNX ReduceSum 13: the axes are a 1-D tensor read at run time,
 * of a static length). Whether input axis a is reduced is the run-time
 * flag aux[a] (i64 0 or 1); with keepdims=0 the kept axes move left, so
 * output axis p is the p-th kept input axis, found by select chains. One
 * point anchor sums over every input axis, each with extent 1 unless
 * reduced. */
static bool dyn_sum_flags(cp_ctx *c, cp_node *n, nimble_ln_expr **red) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  int64_t na = 0;
  if (n->n_in == 2 && !cp_const_i(n->in[1]->ext[0], &na)) {
    cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: dyn_sum with axes of unknown length", c->prim);
    return false;
  }
  if (na > x->rank) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: dyn_sum has %lld axes for rank %d", c->prim, (long long)na, x->rank);
    return false;
  }
  bool all = na == 0 && !cp_attr_int(n, "noop_with_empty_axes");
  for (int a = 0; a < x->rank; a++) red[a] = cp_i(c, all ? 1 : 0);
  for (int64_t j = 0; j < na; j++) {
    nimble_ln_expr *ji[1] = {cp_i(c, j)};
    nimble_ln_expr *v = cp_convert(c, cp_value(c, n->in[1], ji), NIMBLE_LN_I64);
    if (!v) return false;
    v = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, v, cp_i(c, 0)), cp_add(c, v, cp_i(c, x->rank)), v);
    cp_check(c, nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_GE, v, cp_i(c, 0)),
                                                                  nimble_ln_binary(A, NIMBLE_LN_LT, v, cp_i(c, x->rank)))),
             "dyn_sum: axis %lld is out of range for rank %d", (long long)j, x->rank);
    for (int a = 0; a < x->rank; a++)
      red[a] = cp_max(c, red[a], nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_EQ, v, cp_i(c, a))));
  }
  return true;
}

static nimble_ln_expr *is_set(cp_ctx *c, nimble_ln_expr *flag) {
  return nimble_ln_binary(c->A, NIMBLE_LN_NE, flag, cp_i(c, 0));
}

static nimble_status_t shape_dyn_sum(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  nimble_ln_expr *red[CP_MAX_RANK];
  n->type = x->type;
  n->dtype = x->dtype;
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "reducing bool tensors");
  if (!dyn_sum_flags(c, n, red)) return nimble_ok();
  int64_t na = 0;
  if (n->n_in == 2) cp_const_i(n->in[1]->ext[0], &na);
  bool keep = cp_attr_int(n, "keepdims") != 0;
  for (int a = 0; a < x->rank; a++) n->aux[a] = red[a];
  if (keep || (na == 0 && cp_attr_int(n, "noop_with_empty_axes"))) {
    n->rank = x->rank;
    for (int a = 0; a < x->rank; a++) n->ext[a] = nimble_ln_select(c->A, is_set(c, red[a]), cp_i(c, 1), x->ext[a]);
    return nimble_ok();
  }
  n->rank = na == 0 ? 0 : x->rank - (int)na;
  /* Output axis p: the input axis a that is kept with p kept axes before it. */
  for (int p = 0; p < n->rank; p++) {
    nimble_ln_expr *e = cp_i(c, 1), *before = cp_i(c, 0);
    for (int a = 0; a < x->rank; a++) {
      nimble_ln_expr *hit = nimble_ln_binary(c->A, NIMBLE_LN_AND, nimble_ln_binary(c->A, NIMBLE_LN_EQ, red[a], cp_i(c, 0)),
                                             nimble_ln_binary(c->A, NIMBLE_LN_EQ, before, cp_i(c, p)));
      e = nimble_ln_select(c->A, hit, x->ext[a], e);
      before = cp_add(c, before, cp_sub(c, cp_i(c, 1), red[a]));
    }
    n->ext[p] = e;
  }
  return nimble_ok();
}

static nimble_ln_stmt *emit_dyn_sum(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx, nimble_ln_var *result,
                                    nimble_ln_stmt *body) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *red[CP_MAX_RANK];
  if (!dyn_sum_flags(c, n, red)) return NULL;
  bool shifted = n->rank != x->rank;
  nimble_ln_var *rv[CP_MAX_RANK];
  nimble_ln_expr *in_idx[CP_MAX_RANK], *before = cp_i(c, 0);
  for (int a = 0; a < x->rank; a++) {
    rv[a] = cp_var(c, "r", NIMBLE_LN_I64);
    nimble_ln_expr *kept = cp_i(c, 0);
    if (!shifted) {
      kept = idx[a];
    } else {
      for (int p = 0; p < n->rank; p++)
        kept = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_EQ, before, cp_i(c, p)), idx[p], kept);
      before = cp_add(c, before, cp_sub(c, cp_i(c, 1), red[a]));
    }
    in_idx[a] = nimble_ln_select(A, is_set(c, red[a]), nimble_ln_ref(A, rv[a]), kept);
  }
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_var *acc = cp_var(c, "acc", at);
  nimble_ln_expr *v = cp_convert(c, cp_value(c, x, in_idx), at);
  if (!v) return NULL;
  nimble_ln_stmt *loop = nimble_ln_assign(A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, acc), v));
  for (int a = x->rank - 1; a >= 0; a--)
    loop = cp_for(c, rv[a], nimble_ln_select(A, is_set(c, red[a]), x->ext[a], cp_i(c, 1)), NIMBLE_LN_SERIAL, 0, loop);
  return nimble_ln_decl(A, acc, cp_const_of(c, at, 0),
                        nimble_ln_seq2(A, loop, nimble_ln_let(A, result, cp_convert(c, nimble_ln_ref(A, acc), n->type), body)));
}

/* ---- cumsum (ONNX CumSum): a running sum along one axis, which is an
 * attribute or a run-time scalar input. A row anchor: the tensor is seen
 * as [outer, len, inner] around the axis (the products chosen by the
 * axis's value when it is only known at run time), and each (outer,
 * inner) line is summed in one pass, forward or (reverse) backward,
 * storing the sum before (exclusive) or after adding the element. Sums of
 * f16/bf16 accumulate in f32. */

static nimble_status_t shape_cumsum(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  n->type = x->type;
  n->dtype = x->dtype;
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "cumsum of bool");
  if (x->rank < 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cumsum of a scalar");
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  return nimble_ok();
}

static nimble_ln_stmt *emit_cumsum(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  int R = x->rank;
  nimble_ln_expr *axis;
  if (n->n_in == 2) {
    nimble_ln_expr *i0[1] = {cp_i(c, 0)};
    axis = cp_convert(c, cp_value(c, n->in[1], n->in[1]->rank ? i0 : NULL), NIMBLE_LN_I64);
    if (!axis) return NULL;
    axis = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, axis, cp_i(c, 0)), cp_add(c, axis, cp_i(c, R)), axis);
    cp_check(c, nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_AND,
                                                                 nimble_ln_binary(A, NIMBLE_LN_GE, axis, cp_i(c, 0)),
                                                                 nimble_ln_binary(A, NIMBLE_LN_LT, axis, cp_i(c, R)))),
             "cumsum: the axis is out of range for rank %d", R);
  } else {
    int ax;
    if (!cp_axis(c, n, cp_attr_int(n, "axis"), R, &ax)) return NULL;
    axis = cp_i(c, ax);
  }
  /* outer, len, inner for each possible axis, picked by its value. */
  nimble_ln_expr *outer = NULL, *len = NULL, *inner = NULL;
  for (int a = R - 1; a >= 0; a--) {
    nimble_ln_expr *po = cp_product(c, x->ext, 0, a), *pi = cp_product(c, x->ext, a + 1, R);
    if (!outer) {
      outer = po, len = x->ext[a], inner = pi;
      continue;
    }
    nimble_ln_expr *is_a = nimble_ln_binary(A, NIMBLE_LN_EQ, axis, cp_i(c, a));
    outer = nimble_ln_select(A, is_a, po, outer);
    len = nimble_ln_select(A, is_a, x->ext[a], len);
    inner = nimble_ln_select(A, is_a, pi, inner);
  }
  int64_t k;
  if (cp_const_i(axis, &k)) {
    outer = cp_product(c, x->ext, 0, (int)k), len = x->ext[k], inner = cp_product(c, x->ext, (int)k + 1, R);
  }
  bool exclusive = cp_attr_int(n, "exclusive") != 0, reverse = cp_attr_int(n, "reverse") != 0;
  nimble_ln_type_t at = cp_acc_type(n->type);
  nimble_ln_var *vo = cp_var(c, "o", NIMBLE_LN_I64), *vi = cp_var(c, "i", NIMBLE_LN_I64), *vt = cp_var(c, "t", NIMBLE_LN_I64);
  nimble_ln_var *acc = cp_var(c, "acc", at);
  nimble_ln_expr *t = nimble_ln_ref(A, vt);
  nimble_ln_expr *pos = reverse ? cp_sub(c, cp_sub(c, len, cp_i(c, 1)), t) : t;
  nimble_ln_expr *flat = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, nimble_ln_ref(A, vo), len), pos), inner), nimble_ln_ref(A, vi));
  nimble_ln_expr *v = cp_convert(c, cp_value_flat(c, x, flat), at);
  nimble_ln_expr *ra = nimble_ln_ref(A, acc);
  nimble_ln_stmt *add = nimble_ln_assign(A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, ra, v));
  nimble_ln_stmt *st = nimble_ln_store(A, o, flat, cp_convert(c, ra, n->type));
  nimble_ln_stmt *step = exclusive ? nimble_ln_seq2(A, st, add) : nimble_ln_seq2(A, add, st);
  nimble_ln_stmt *line = nimble_ln_decl(A, acc, cp_const_of(c, at, 0), cp_for(c, vt, len, NIMBLE_LN_SERIAL, 0, step));
  nimble_ln_stmt *all = cp_for(c, vo, outer, NIMBLE_LN_SERIAL, 0, cp_for(c, vi, inner, NIMBLE_LN_SERIAL, 0, line));
  if (all && c->opt.parallel) all = nimble_ln_chunk(A, all, cp_rows_per_task(c, outer, cp_mul(c, len, inner)));
  return all;
}

#define RED(name) {name, CP_ANCHOR_POINT, shape_reduce, NULL, emit_reduce, NULL}

const cp_def cp_defs_reduce[] = {
    RED("sum"), RED("mean"), RED("max"), RED("min"), RED("prod"),
    {"argmax", CP_ANCHOR_POINT, shape_arg, NULL, emit_arg, NULL},
    {"argmin", CP_ANCHOR_POINT, shape_arg, NULL, emit_arg, NULL},
    {"topk", CP_INJECTIVE, shape_topk, NULL, NULL, NULL},
    {"hardmax", CP_ANCHOR_POINT, shape_hardmax, NULL, emit_hardmax, NULL},
    {"conv2d_transpose", CP_ANCHOR_POINT, shape_conv_transpose, NULL, emit_conv_transpose, NULL},
    {"dyn_sum", CP_ANCHOR_POINT, shape_dyn_sum, NULL, emit_dyn_sum, NULL},
    {"cumsum", CP_ANCHOR_ROW, shape_cumsum, NULL, NULL, emit_cumsum},
};
const int cp_defs_reduce_count = (int)(sizeof cp_defs_reduce / sizeof cp_defs_reduce[0]);
