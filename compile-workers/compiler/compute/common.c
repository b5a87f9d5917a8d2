/* Helpers every compute definition uses: errors and run-time checks,
 * extent arithmetic that folds constants (so static shapes give constant
 * loop bounds), NumPy broadcasting of extents and indices, and value
 * lookup through the node graph. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

void *cp_fail(cp_ctx *c, nimble_status_code_t code, const char *fmt, ...) {
  if (c->err) return NULL;
  va_list ap;
  va_start(ap, fmt);
  c->err = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  return NULL;
}

void cp_check(cp_ctx *c, nimble_ln_expr *cond, const char *fmt, ...) {
  int64_t v;
  if (cp_const_i(cond, &v) && v != 0) return; /* holds statically */
  if (c->n_checks >= CP_MAX_CHECKS) {
    cp_fail(c, NIMBLE_RESOURCE_EXHAUSTED, "more than %d shape checks", CP_MAX_CHECKS);
    return;
  }
  char *msg = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    cp_fail(c, NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory for a shape check", c->prim);
    return;
  }
  if (cond && cond->type == NIMBLE_LN_I64) cond = nimble_ln_binary(c->A, NIMBLE_LN_NE, cond, nimble_ln_i64(c->A, 0));
  c->checks[c->n_checks++] = nimble_ln_check(c->A, cond, msg); /* the arena copies it */
  free(msg);
}

nimble_ln_var *cp_var(cp_ctx *c, const char *prefix, nimble_ln_type_t type) {
  char name[48];
  snprintf(name, sizeof name, "%s%d", prefix, c->n_vars++);
  return nimble_ln_var_create(c->A, name, type);
}

bool cp_const_i(const nimble_ln_expr *e, int64_t *v) {
  if (!e) return false;
  if (e->kind == NIMBLE_LN_E_CONST_I && e->type == NIMBLE_LN_I64) {
    *v = e->i;
    return true;
  }
  if (e->kind == NIMBLE_LN_E_CONST_I && e->type == NIMBLE_LN_BOOL) {
    *v = e->i;
    return true;
  }
  return false;
}

bool cp_same(const nimble_ln_expr *a, const nimble_ln_expr *b) {
  if (a == b) return true;
  int64_t x, y;
  if (cp_const_i(a, &x) && cp_const_i(b, &y)) return x == y;
  if (a && b && a->kind == NIMBLE_LN_E_SHAPE && b->kind == NIMBLE_LN_E_SHAPE)
    return a->param == b->param && a->axis == b->axis;
  return false;
}

nimble_ln_expr *cp_i(cp_ctx *c, int64_t v) { return nimble_ln_i64(c->A, v); }

nimble_ln_expr *cp_add(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (ca && cb && !__builtin_add_overflow(x, y, &x)) return cp_i(c, x);
  if (ca && x == 0) return b;
  if (cb && y == 0) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_ADD, a, b);
}

nimble_ln_expr *cp_sub(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (ca && cb && !__builtin_sub_overflow(x, y, &x)) return cp_i(c, x);
  if (cb && y == 0) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_SUB, a, b);
}

nimble_ln_expr *cp_mul(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (ca && cb && !__builtin_mul_overflow(x, y, &x)) return cp_i(c, x);
  if ((ca && x == 0) || (cb && y == 0)) return cp_i(c, 0);
  if (ca && x == 1) return b;
  if (cb && y == 1) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_MUL, a, b);
}

nimble_ln_expr *cp_div(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (ca && cb && y > 0 && x >= 0) return cp_i(c, x / y);
  if (cb && y == 1) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_DIV, a, b);
}

nimble_ln_expr *cp_rem(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (ca && cb && y > 0 && x >= 0) return cp_i(c, x % y);
  if (cb && y == 1) return cp_i(c, 0);
  return nimble_ln_binary(c->A, NIMBLE_LN_REM, a, b);
}

nimble_ln_expr *cp_min(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  if (cp_const_i(a, &x) && cp_const_i(b, &y)) return cp_i(c, x < y ? x : y);
  if (cp_same(a, b)) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_MIN, a, b);
}

nimble_ln_expr *cp_max(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  if (cp_const_i(a, &x) && cp_const_i(b, &y)) return cp_i(c, x > y ? x : y);
  if (cp_same(a, b)) return a;
  return nimble_ln_binary(c->A, NIMBLE_LN_MAX, a, b);
}

nimble_ln_expr *cp_clamp(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo, nimble_ln_expr *hi) {
  return cp_min(c, cp_max(c, v, lo), hi);
}

/* An i64 0/1 result so folded and run-time forms mix. */
nimble_ln_expr *cp_eq(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  if (cp_const_i(a, &x) && cp_const_i(b, &y)) return cp_i(c, x == y);
  if (cp_same(a, b)) return cp_i(c, 1);
  return nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_EQ, a, b));
}

nimble_ln_expr *cp_and(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b) {
  int64_t x, y;
  if (cp_const_i(a, &x)) return x ? b : cp_i(c, 0);
  if (cp_const_i(b, &y)) return y ? a : cp_i(c, 0);
  return cp_mul(c, a, b);
}

nimble_ln_expr *cp_product(cp_ctx *c, nimble_ln_expr *const *ext, int from, int to) {
  nimble_ln_expr *p = cp_i(c, 1);
  for (int a = from; a < to; a++) p = cp_mul(c, p, ext[a]);
  return p;
}

nimble_ln_expr *cp_broadcast_ext(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *b, const char *what) {
  int64_t x, y;
  bool ca = cp_const_i(a, &x), cb = cp_const_i(b, &y);
  if (cp_same(a, b)) return a;
  if (ca && x == 1) return b;
  if (cb && y == 1) return a;
  if (ca && cb) return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: cannot broadcast extent %lld with %lld", what,
                               (long long)x, (long long)y);
  nimble_ln_expr *one = cp_i(c, 1);
  nimble_ln_expr *ok = cp_max(c, cp_max(c, cp_eq(c, a, b), cp_eq(c, a, one)), cp_eq(c, b, one));
  cp_check(c, ok, "%s: operands do not broadcast", what);
  /* A constant other than 1 wins (the check makes the other side 1 or equal). */
  if (ca) return a;
  if (cb) return b;
  return nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, a, one), b, a);
}

nimble_status_t cp_broadcast_shape(cp_ctx *c, cp_node *n, int from, int to) {
  int R = 0;
  for (int i = from; i < to; i++)
    if (n->in[i]->rank > R) R = n->in[i]->rank;
  n->rank = R;
  for (int a = 0; a < R; a++) {
    nimble_ln_expr *e = NULL;
    for (int i = from; i < to; i++) {
      int off = R - n->in[i]->rank;
      if (a < off) continue;
      nimble_ln_expr *d = n->in[i]->ext[a - off];
      e = e ? cp_broadcast_ext(c, e, d, n->op->name) : d;
    }
    n->ext[a] = e;
  }
  return nimble_ok();
}

void cp_broadcast_index(cp_ctx *c, const cp_node *in, const cp_node *out, nimble_ln_expr *const *idx,
                        nimble_ln_expr **in_idx) {
  int off = out->rank - in->rank;
  for (int a = 0; a < in->rank; a++) {
    nimble_ln_expr *e = in->ext[a], *o = out->ext[a + off];
    int64_t v;
    if (cp_same(e, o)) in_idx[a] = idx[a + off];
    else if (cp_const_i(e, &v) && v == 1) in_idx[a] = cp_i(c, 0);
    else if (cp_const_i(e, &v)) in_idx[a] = idx[a + off]; /* checked equal to the output's */
    else in_idx[a] = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, e, cp_i(c, 1)), cp_i(c, 0),
                                      idx[a + off]);
  }
}

nimble_ln_expr *cp_const_of(cp_ctx *c, nimble_ln_type_t t, double v) {
  if (nimble_ln_type_is_float(t)) return nimble_ln_const_f(c->A, t, v);
  if (t == NIMBLE_LN_I64) return nimble_ln_i64(c->A, (int64_t)v);
  if (nimble_ln_type_is_int(t)) {
    /* Out-of-range doubles (and NaN) have no integer value: clamp first. */
    if (isnan(v)) v = 0;
    if (t == NIMBLE_LN_U64 && v >= 0x1p63) return nimble_ln_const_i(c->A, t, (int64_t)(uint64_t)fmin(v, 0x1.fffffffffffffp63));
    if (v >= 0x1p63) v = 0x1.fffffffffffffp62; /* the largest double below 2^63 */
    if (v < -0x1p63) v = -0x1p63;
    return nimble_ln_const_i(c->A, t, (int64_t)v);
  }
  return nimble_ln_binary(c->A, NIMBLE_LN_NE, nimble_ln_i64(c->A, v != 0), nimble_ln_i64(c->A, 0));
}

nimble_ln_expr *cp_type_lowest(cp_ctx *c, nimble_ln_type_t t) {
  if (nimble_ln_type_is_float(t)) return nimble_ln_const_f(c->A, t, -INFINITY);
  if (nimble_ln_type_is_unsigned(t)) return nimble_ln_const_i(c->A, t, 0);
  int bits = nimble_ln_type_bits(t);
  return nimble_ln_const_i(c->A, t, bits >= 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)));
}

nimble_ln_expr *cp_type_highest(cp_ctx *c, nimble_ln_type_t t) {
  if (nimble_ln_type_is_float(t)) return nimble_ln_const_f(c->A, t, INFINITY);
  int bits = nimble_ln_type_bits(t);
  if (nimble_ln_type_is_unsigned(t)) return nimble_ln_const_i(c->A, t, bits >= 64 ? -1 : ((int64_t)1 << bits) - 1);
  return nimble_ln_const_i(c->A, t, bits >= 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1);
}

nimble_ln_type_t cp_acc_type(nimble_ln_type_t t) {
  return t == NIMBLE_LN_F16 || t == NIMBLE_LN_BF16 ? NIMBLE_LN_F32 : t;
}

nimble_ln_expr *cp_convert(cp_ctx *c, nimble_ln_expr *e, nimble_ln_type_t to) {
  if (!e || e->type == to) return e;
  return nimble_ln_cast(c->A, to, e);
}

nimble_ln_type_t cp_tensor_type(nimble_ln_type_t t) { return t == NIMBLE_LN_BOOL ? NIMBLE_LN_U8 : t; }

nimble_ln_expr *cp_load(cp_ctx *c, nimble_ln_param *param, nimble_ln_expr *flat, nimble_ln_type_t t) {
  nimble_ln_expr *v = nimble_ln_load(c->A, param, flat);
  /* Any nonzero byte is true, so a tensor holding 2 or 255 still selects. */
  if (v && t == NIMBLE_LN_BOOL && param->dtype == NIMBLE_LN_U8) v = nimble_ln_cast(c->A, NIMBLE_LN_BOOL, v);
  return v;
}

bool cp_ln_type(nimble_dtype_t dt, nimble_ln_type_t *out, bool *is_bool) {
  *is_bool = false;
  switch (dt) {
  case NIMBLE_DTYPE_FLOAT32: *out = NIMBLE_LN_F32; return true;
  case NIMBLE_DTYPE_FLOAT64: *out = NIMBLE_LN_F64; return true;
  case NIMBLE_DTYPE_FLOAT16: *out = NIMBLE_LN_F16; return true;
  case NIMBLE_DTYPE_BFLOAT16: *out = NIMBLE_LN_BF16; return true;
  case NIMBLE_DTYPE_INT8: *out = NIMBLE_LN_I8; return true;
  case NIMBLE_DTYPE_INT16: *out = NIMBLE_LN_I16; return true;
  case NIMBLE_DTYPE_INT32: *out = NIMBLE_LN_I32; return true;
  case NIMBLE_DTYPE_INT64: *out = NIMBLE_LN_I64; return true;
  case NIMBLE_DTYPE_UINT8: *out = NIMBLE_LN_U8; return true;
  case NIMBLE_DTYPE_UINT16: *out = NIMBLE_LN_U16; return true;
  case NIMBLE_DTYPE_UINT32: *out = NIMBLE_LN_U32; return true;
  case NIMBLE_DTYPE_UINT64: *out = NIMBLE_LN_U64; return true;
  case NIMBLE_DTYPE_BOOL: *out = NIMBLE_LN_BOOL; *is_bool = true; return true;
  default: return false;
  }
}

bool cp_axis(cp_ctx *c, cp_node *n, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0)) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: axis %lld is out of range for rank %d", n->op->name, (long long)axis,
            rank);
    return false;
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

int64_t cp_attr_int(const cp_node *n, const char *name) { return nimble_attrs_int(n->op, n->attrs, name); }
double cp_attr_float(const cp_node *n, const char *name) { return nimble_attrs_float(n->op, n->attrs, name); }
const char *cp_attr_string(const cp_node *n, const char *name) {
  return nimble_attrs_string(n->op, n->attrs, name);
}
const int64_t *cp_attr_ints(const cp_node *n, const char *name, size_t *count) {
  return nimble_attrs_ints(n->op, n->attrs, name, count);
}
bool cp_has_attr(const cp_node *n, const char *name) { return nimble_op_attr_index(n->op, name) >= 0; }

nimble_ln_expr *cp_value(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  if (c->err) return NULL;
  switch (n->kind) {
  case CP_CONST: return n->cval;
  case CP_PARAM:
    if (!n->param) return cp_fail(c, NIMBLE_INTERNAL, "parameter %d has no tensor", n->param_index);
    return cp_load(c, n->param, n->rank ? nimble_ln_flat_index(c->A, n->param, idx) : cp_i(c, 0), n->type);
  case CP_CALL: break;
  }
  if (n == c->anchor) {
    if (c->anchor_used)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: the anchor '%s' is used twice", c->prim, n->op->name);
    c->anchor_used = 1;
    for (int a = 0; a < n->rank; a++) c->anchor_idx[a] = idx[a];
    return nimble_ln_ref(c->A, c->anchor_var);
  }
  if (n->def->cls != CP_INJECTIVE || !n->def->value)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: '%s' cannot be computed inline here", c->prim, n->op->name);
  return n->def->value(c, n, idx);
}

nimble_ln_expr *cp_value_flat(cp_ctx *c, cp_node *n, nimble_ln_expr *flat) {
  if (n->kind == CP_PARAM && n->param) return cp_load(c, n->param, flat, n->type);
  if (n->kind == CP_CONST) return n->cval;
  nimble_ln_expr *idx[CP_MAX_RANK];
  nimble_ln_expr *rest = flat;
  for (int a = n->rank - 1; a >= 0; a--) {
    if (a == 0) {
      idx[a] = rest;
    } else {
      idx[a] = cp_rem(c, rest, n->ext[a]);
      rest = cp_div(c, rest, n->ext[a]);
    }
  }
  return cp_value(c, n, idx);
}

nimble_ln_stmt *cp_for(cp_ctx *c, nimble_ln_var *v, nimble_ln_expr *ext, nimble_ln_loop_kind_t kind, int factor,
                       nimble_ln_stmt *body) {
  return nimble_ln_for(c->A, v, cp_i(c, 0), ext, kind, factor, body);
}

cp_node *cp_clamp_operand(cp_node *root, float *lo, float *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (!root || root->kind != CP_CALL || root->type != NIMBLE_LN_F32 || root->n_in < 1) return root;
  if (!strcmp(root->op->name, "relu")) {
    *lo = 0.0f;
    return root->in[0];
  }
  if (strcmp(root->op->name, "clip")) return root;
  *lo = (float)cp_attr_float(root, "min");
  *hi = (float)cp_attr_float(root, "max");
  return isnan(*lo) || isnan(*hi) ? NULL : root->in[0];
}

bool cp_is_residual(const cp_node *x, const nimble_ln_param *o) {
  return x && x->kind == CP_PARAM && x->param && x->param != o && x->type == NIMBLE_LN_F32 && x->rank == o->rank;
}

nimble_ln_expr *cp_same_shape(cp_ctx *c, nimble_ln_expr *cond, nimble_ln_param *a, nimble_ln_param *b, int rank) {
  for (int ax = 0; ax < rank; ax++)
    cond = nimble_ln_binary(c->A, NIMBLE_LN_AND, cond,
                            nimble_ln_binary(c->A, NIMBLE_LN_EQ, nimble_ln_shape(c->A, a, ax), nimble_ln_shape(c->A, b, ax)));
  return cond;
}

nimble_ln_stmt *cp_parallel_outer(cp_ctx *c, nimble_ln_var *const *d, nimble_ln_expr *const *ext, int n,
                                  nimble_ln_expr *body_work, nimble_ln_stmt *body) {
  if (!body || n <= 0) return body;
  nimble_ln_expr *work = body_work;
  for (int a = n - 1; a >= 2; a--) {
    body = cp_for(c, d[a], ext[a], NIMBLE_LN_SERIAL, 0, body);
    work = cp_mul(c, work, ext[a]);
  }
  int64_t e0 = 0;
  if (n == 1 || (cp_const_i(ext[0], &e0) && e0 == 1)) {
    int top = n == 1 ? 0 : 1;
    if (n > 1) {
      body = cp_for(c, d[1], ext[1], NIMBLE_LN_SERIAL, 0, body);
    } else {
      body = cp_for(c, d[0], ext[0], NIMBLE_LN_SERIAL, 0, body);
    }
    if (body && c->opt.parallel) body = nimble_ln_chunk(c->A, body, cp_rows_per_task(c, ext[top], work));
    if (n > 1 && body) body = nimble_ln_let(c->A, d[0], cp_i(c, 0), body);
    return body;
  }
  /* The two outermost axes as one loop over their product. */
  nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64);
  nimble_ln_expr *rr = nimble_ln_ref(c->A, r), *one = cp_i(c, 1);
  nimble_ln_expr *e1 = cp_max(c, ext[1], one);
  body = nimble_ln_let(c->A, d[1], cp_rem(c, rr, e1), body);
  body = nimble_ln_let(c->A, d[0], cp_div(c, rr, e1), body);
  nimble_ln_expr *rows = cp_mul(c, ext[0], ext[1]);
  body = cp_for(c, r, rows, NIMBLE_LN_SERIAL, 0, body);
  if (body && c->opt.parallel) body = nimble_ln_chunk(c->A, body, cp_rows_per_task(c, rows, work));
  return body;
}

nimble_ln_expr *cp_rows_per_task(cp_ctx *c, nimble_ln_expr *rows, nimble_ln_expr *row_work) {
  nimble_ln_expr *by_count = cp_div(c, cp_add(c, rows, cp_i(c, CP_MAX_TASKS - 1)), cp_i(c, CP_MAX_TASKS));
  nimble_ln_expr *work = cp_max(c, row_work, cp_i(c, 1));
  nimble_ln_expr *by_work = cp_div(c, cp_add(c, cp_i(c, c->opt.min_task_work - 1), work), work);
  return cp_max(c, cp_max(c, by_count, by_work), cp_i(c, 1));
}
