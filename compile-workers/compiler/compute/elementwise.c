/* Element-wise compute definitions: unary and binary math, comparisons,
 * logic, where, cast, clip, leaky_relu. Each is a value at an output index
 * from its inputs' values at the NumPy-broadcast indices; with the
 * extents folded, static shapes index without selects. */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

static nimble_status_t shape_same(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_status_t shape_bcast(cp_ctx *c, cp_node *n) {
  NIMBLE_RETURN_IF_ERROR(cp_broadcast_shape(c, n, 0, n->n_in));
  n->type = n->in[0]->type;
  n->dtype = n->in[0]->dtype;
  return nimble_ok();
}

static nimble_status_t shape_compare(cp_ctx *c, cp_node *n) {
  NIMBLE_RETURN_IF_ERROR(cp_broadcast_shape(c, n, 0, n->n_in));
  n->type = NIMBLE_LN_BOOL;
  n->dtype = NIMBLE_DTYPE_BOOL;
  return nimble_ok();
}

static nimble_status_t shape_where(cp_ctx *c, cp_node *n) {
  NIMBLE_RETURN_IF_ERROR(cp_broadcast_shape(c, n, 0, 3));
  n->type = n->in[1]->type;
  n->dtype = n->in[1]->dtype;
  return nimble_ok();
}

static nimble_status_t shape_cast(cp_ctx *c, cp_node *n) {
  shape_same(c, n);
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "cast to %s", dt);
  return nimble_ok();
}

static nimble_ln_expr *f32_floor(cp_ctx *c, nimble_ln_expr *x);

static nimble_ln_expr *in_value(cp_ctx *c, cp_node *n, int i, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  cp_broadcast_index(c, n->in[i], n, idx, in_idx);
  return cp_value(c, n->in[i], in_idx);
}

static const struct {
  const char *name;
  int arity;
  nimble_ln_op_t op;
} kSimple[] = {
    {"negative", 1, NIMBLE_LN_NEG}, {"abs", 1, NIMBLE_LN_ABS},         {"exp", 1, NIMBLE_LN_EXP},
    {"log", 1, NIMBLE_LN_LOG},      {"sqrt", 1, NIMBLE_LN_SQRT},       {"tanh", 1, NIMBLE_LN_TANH},
    {"sigmoid", 1, NIMBLE_LN_SIGMOID}, {"erf", 1, NIMBLE_LN_ERF},      {"logical_not", 1, NIMBLE_LN_NOT},
    {"add", 2, NIMBLE_LN_ADD},      {"subtract", 2, NIMBLE_LN_SUB},    {"multiply", 2, NIMBLE_LN_MUL},
    {"divide", 2, NIMBLE_LN_DIV},   {"power", 2, NIMBLE_LN_POW},       {"maximum", 2, NIMBLE_LN_MAX},
    {"minimum", 2, NIMBLE_LN_MIN},  {"equal", 2, NIMBLE_LN_EQ},        {"not_equal", 2, NIMBLE_LN_NE},
    {"less", 2, NIMBLE_LN_LT},      {"less_equal", 2, NIMBLE_LN_LE},   {"greater", 2, NIMBLE_LN_GT},
    {"greater_equal", 2, NIMBLE_LN_GE}, {"logical_and", 2, NIMBLE_LN_AND}, {"logical_or", 2, NIMBLE_LN_OR},
};

static nimble_ln_expr *value_simple(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  for (size_t i = 0; i < sizeof kSimple / sizeof kSimple[0]; i++) {
    if (strcmp(kSimple[i].name, n->op->name) != 0) continue;
    nimble_ln_expr *a = in_value(c, n, 0, idx);
    if (kSimple[i].arity == 1) return nimble_ln_unary(c->A, kSimple[i].op, a);
    nimble_ln_expr *b = in_value(c, n, 1, idx);
    if (kSimple[i].op == NIMBLE_LN_POW && a && a->type != NIMBLE_LN_F32)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: power on integers", c->prim);
    return nimble_ln_binary(c->A, kSimple[i].op, a, b);
  }
  return cp_fail(c, NIMBLE_INTERNAL, "%s: no simple element-wise op '%s'", c->prim, n->op->name);
}

static nimble_ln_expr *value_relu(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  return x ? nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, 0)) : NULL;
}

static nimble_ln_expr *value_copy(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return in_value(c, n, 0, idx);
}

static nimble_ln_expr *value_rsqrt(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  return nimble_ln_binary(c->A, NIMBLE_LN_DIV, nimble_ln_f32(c->A, 1.0), nimble_ln_unary(c->A, NIMBLE_LN_SQRT, x));
}

static nimble_ln_expr *value_leaky(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  nimble_ln_expr *pos = nimble_ln_binary(c->A, NIMBLE_LN_GT, x, nimble_ln_f32(c->A, 0));
  return nimble_ln_select(c->A, pos, x,
                          nimble_ln_binary(c->A, NIMBLE_LN_MUL, x, nimble_ln_f32(c->A, cp_attr_float(n, "alpha"))));
}

static nimble_ln_expr *value_clip(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x) return NULL;
  double lo = cp_attr_float(n, "min"), hi = cp_attr_float(n, "max");
  if (x->type != NIMBLE_LN_F32) {
    /* Integer bounds: infinite ones do not bound. */
    if (isfinite(lo)) x = nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, ceil(lo)));
    if (isfinite(hi)) x = nimble_ln_binary(c->A, NIMBLE_LN_MIN, x, cp_const_of(c, x->type, floor(hi)));
    return x;
  }
  if (!isinf(lo) || lo > 0) x = nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, nimble_ln_f32(c->A, lo));
  if (!isinf(hi) || hi < 0) x = nimble_ln_binary(c->A, NIMBLE_LN_MIN, x, nimble_ln_f32(c->A, hi));
  return x;
}

static nimble_ln_expr *value_cast(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x) return NULL;
  if (n->type == NIMBLE_LN_BOOL) return nimble_ln_binary(c->A, NIMBLE_LN_NE, x, cp_const_of(c, x->type, 0));
  if (x->type == NIMBLE_LN_BOOL) return nimble_ln_select(c->A, x, cp_const_of(c, n->type, 1), cp_const_of(c, n->type, 0));
  return cp_convert(c, x, n->type);
}

static nimble_ln_expr *value_mod(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *a = in_value(c, n, 0, idx), *b = in_value(c, n, 1, idx);
  if (!a || !b) return NULL;
  if (a->type == NIMBLE_LN_F32) {
    /* NumPy: a - floor(a / b) * b (the divisor's sign). */
    nimble_ln_expr *q = f32_floor(c, nimble_ln_binary(c->A, NIMBLE_LN_DIV, a, b));
    return nimble_ln_binary(c->A, NIMBLE_LN_SUB, a, nimble_ln_binary(c->A, NIMBLE_LN_MUL, q, b));
  }
  /* Integer mod takes the divisor's sign (Python/ONNX fmod=0). */
  nimble_ln_expr *r = nimble_ln_binary(c->A, NIMBLE_LN_REM, a, b);
  nimble_ln_expr *zero = cp_const_of(c, a->type, 0);
  nimble_ln_expr *fix = nimble_ln_binary(
      c->A, NIMBLE_LN_AND, nimble_ln_binary(c->A, NIMBLE_LN_NE, r, zero),
      nimble_ln_binary(c->A, NIMBLE_LN_NE, nimble_ln_binary(c->A, NIMBLE_LN_LT, r, zero),
                       nimble_ln_binary(c->A, NIMBLE_LN_LT, b, zero)));
  return nimble_ln_select(c->A, fix, nimble_ln_binary(c->A, NIMBLE_LN_ADD, r, b), r);
}

static nimble_ln_expr *value_where(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *cond = in_value(c, n, 0, idx);
  if (cond && cond->type != NIMBLE_LN_BOOL) cond = nimble_ln_binary(c->A, NIMBLE_LN_NE, cond, cp_const_of(c, cond->type, 0));
  return nimble_ln_select(c->A, cond, in_value(c, n, 1, idx), in_value(c, n, 2, idx));
}

/* floor(x) for f32 without libm (see value_rounding). */
static nimble_ln_expr *f32_floor(cp_ctx *c, nimble_ln_expr *x) {
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *t = nimble_ln_cast(A, NIMBLE_LN_F32, nimble_ln_cast(A, NIMBLE_LN_I64, x));
  nimble_ln_expr *f = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_GT, t, x),
                                       nimble_ln_binary(A, NIMBLE_LN_SUB, t, nimble_ln_f32(A, 1)), t);
  nimble_ln_expr *small = nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_unary(A, NIMBLE_LN_ABS, x), nimble_ln_f32(A, 8388608.0));
  return nimble_ln_select(A, small, f, x);
}

/* sin and cos without libm: k = round(x / (pi/2)), r = x - k*pi/2 in
 * three parts (Cody-Waite, exact products for |k| < 2^15), then the
 * Taylor polynomials of sin and cos on |r| <= pi/4 (first dropped terms
 * below 2e-9), chosen and signed by k mod 4. Accurate to a few ULP for
 * |x| up to about 5e4. */
static nimble_ln_expr *value_trig(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x || x->type != NIMBLE_LN_F32) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s of integers", c->prim, n->op->name);
  nimble_ln_arena *A = c->A;
#define F(v) nimble_ln_f32(A, (v))
#define ADD(a, b) nimble_ln_binary(A, NIMBLE_LN_ADD, (a), (b))
#define SUB(a, b) nimble_ln_binary(A, NIMBLE_LN_SUB, (a), (b))
#define MUL(a, b) nimble_ln_binary(A, NIMBLE_LN_MUL, (a), (b))
  nimble_ln_expr *kf = f32_floor(c, ADD(MUL(x, F(0.63661977236758134)), F(0.5)));
  nimble_ln_expr *r = SUB(SUB(SUB(x, MUL(kf, F(1.5703125))), MUL(kf, F(4.837512969970703125e-4))),
                          MUL(kf, F(7.54978995489188216e-8)));
  nimble_ln_expr *r2 = MUL(r, r);
  nimble_ln_expr *sp = F(1.0 / 362880.0);
  sp = ADD(MUL(sp, r2), F(-1.0 / 5040.0));
  sp = ADD(MUL(sp, r2), F(1.0 / 120.0));
  sp = ADD(MUL(sp, r2), F(-1.0 / 6.0));
  nimble_ln_expr *sinr = ADD(r, MUL(MUL(sp, r2), r));
  nimble_ln_expr *cp = F(1.0 / 40320.0);
  cp = ADD(MUL(cp, r2), F(-1.0 / 720.0));
  cp = ADD(MUL(cp, r2), F(1.0 / 24.0));
  cp = ADD(MUL(cp, r2), F(-0.5));
  nimble_ln_expr *cosr = ADD(F(1.0), MUL(cp, r2));
  /* q = k mod 4 in [0, 4); cos(x) = sin(x + pi/2): one more quarter. */
  nimble_ln_expr *q = nimble_ln_cast(A, NIMBLE_LN_I64, kf);
  if (!strcmp(n->op->name, "cos")) q = nimble_ln_binary(A, NIMBLE_LN_ADD, q, cp_i(c, 1));
  q = nimble_ln_binary(A, NIMBLE_LN_REM, q, cp_i(c, 4));
  q = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, q, cp_i(c, 0)), nimble_ln_binary(A, NIMBLE_LN_ADD, q, cp_i(c, 4)), q);
  nimble_ln_expr *odd = nimble_ln_binary(A, NIMBLE_LN_EQ, nimble_ln_binary(A, NIMBLE_LN_REM, q, cp_i(c, 2)), cp_i(c, 1));
  nimble_ln_expr *neg = nimble_ln_binary(A, NIMBLE_LN_GE, q, cp_i(c, 2));
  nimble_ln_expr *v = nimble_ln_select(A, odd, cosr, sinr);
  v = nimble_ln_select(A, neg, nimble_ln_unary(A, NIMBLE_LN_NEG, v), v);
  /* NaN and infinities give NaN (x - x). */
  nimble_ln_expr *finite = nimble_ln_binary(A, NIMBLE_LN_EQ, SUB(x, x), F(0));
  return nimble_ln_select(A, finite, v, SUB(x, x));
#undef F
#undef ADD
#undef SUB
#undef MUL
}

/* floor, ceil and round without libm: truncation through i64 is exact for
 * |x| < 2^23 (above that every float is an integer already, and the
 * select keeps x, as it does for NaN and infinities). */
static nimble_ln_expr *value_rounding(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x || x->type != NIMBLE_LN_F32) return x;
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *t = nimble_ln_cast(A, NIMBLE_LN_F32, nimble_ln_cast(A, NIMBLE_LN_I64, x)); /* toward zero */
  nimble_ln_expr *one = nimble_ln_f32(A, 1), *r;
  const char *o = n->op->name;
  if (!strcmp(o, "floor")) {
    r = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_GT, t, x), nimble_ln_binary(A, NIMBLE_LN_SUB, t, one), t);
  } else if (!strcmp(o, "ceil")) {
    r = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, t, x), nimble_ln_binary(A, NIMBLE_LN_ADD, t, one), t);
  } else {
    /* Half to even: f = floor(x), d = x - f; up when d > 0.5, or d == 0.5
     * and f is odd. */
    nimble_ln_expr *f = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_GT, t, x),
                                         nimble_ln_binary(A, NIMBLE_LN_SUB, t, one), t);
    nimble_ln_expr *d = nimble_ln_binary(A, NIMBLE_LN_SUB, x, f);
    nimble_ln_expr *half = nimble_ln_f32(A, 0.5);
    nimble_ln_expr *odd = nimble_ln_binary(A, NIMBLE_LN_NE,
                                           nimble_ln_binary(A, NIMBLE_LN_REM, nimble_ln_cast(A, NIMBLE_LN_I64, f), cp_i(c, 2)),
                                           cp_i(c, 0));
    nimble_ln_expr *up = nimble_ln_binary(A, NIMBLE_LN_OR, nimble_ln_binary(A, NIMBLE_LN_GT, d, half),
                                          nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_EQ, d, half), odd));
    r = nimble_ln_select(A, up, nimble_ln_binary(A, NIMBLE_LN_ADD, f, one), f);
  }
  nimble_ln_expr *small = nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_unary(A, NIMBLE_LN_ABS, x), nimble_ln_f32(A, 8388608.0));
  return nimble_ln_select(A, small, r, x);
}

#define SIMPLE1(n) {n, CP_INJECTIVE, shape_same, value_simple, NULL, NULL}
#define SIMPLE2(n) {n, CP_INJECTIVE, shape_bcast, value_simple, NULL, NULL}
#define CMP(n) {n, CP_INJECTIVE, shape_compare, value_simple, NULL, NULL}

const cp_def cp_defs_elementwise[] = {
    SIMPLE1("negative"), SIMPLE1("abs"), SIMPLE1("exp"), SIMPLE1("log"), SIMPLE1("sqrt"), SIMPLE1("tanh"),
    SIMPLE1("sigmoid"), SIMPLE1("erf"), SIMPLE1("logical_not"),
    {"relu", CP_INJECTIVE, shape_same, value_relu, NULL, NULL},
    {"floor", CP_INJECTIVE, shape_same, value_rounding, NULL, NULL},
    {"sin", CP_INJECTIVE, shape_same, value_trig, NULL, NULL},
    {"cos", CP_INJECTIVE, shape_same, value_trig, NULL, NULL},
    {"ceil", CP_INJECTIVE, shape_same, value_rounding, NULL, NULL},
    {"round", CP_INJECTIVE, shape_same, value_rounding, NULL, NULL},
    {"copy", CP_INJECTIVE, shape_same, value_copy, NULL, NULL},
    {"rsqrt", CP_INJECTIVE, shape_same, value_rsqrt, NULL, NULL},
    {"leaky_relu", CP_INJECTIVE, shape_same, value_leaky, NULL, NULL},
    {"clip", CP_INJECTIVE, shape_same, value_clip, NULL, NULL},
    {"cast", CP_INJECTIVE, shape_cast, value_cast, NULL, NULL},
    SIMPLE2("add"), SIMPLE2("subtract"), SIMPLE2("multiply"), SIMPLE2("divide"), SIMPLE2("power"),
    SIMPLE2("maximum"), SIMPLE2("minimum"),
    {"mod", CP_INJECTIVE, shape_bcast, value_mod, NULL, NULL},
    CMP("equal"), CMP("not_equal"), CMP("less"), CMP("less_equal"), CMP("greater"), CMP("greater_equal"),
    {"logical_and", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"logical_or", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"where", CP_INJECTIVE, shape_where, value_where, NULL, NULL},
};
const int cp_defs_elementwise_count = (int)(sizeof cp_defs_elementwise / sizeof cp_defs_elementwise[0]);
