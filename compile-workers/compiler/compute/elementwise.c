/* Element-wise compute definitions: unary and binary math, comparisons,
 * logic, where, cast, clip, leaky_relu, inverse trigonometry, bit shifts. Each is a
 * value at an output index from its inputs' values at the NumPy-broadcast
 * indices; with the extents folded, static shapes index without selects.
 * The indexing ops computed per element are in indexing.c, the scatters in
 * scatter.c. */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

nimble_status_t cp_shape_same(cp_ctx *c, cp_node *n) {
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
  cp_shape_same(c, n);
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "cast to %s", dt);
  return nimble_ok();
}

/* f16 and bf16 operands of the longer computations (mod, sin, rounding,
 * atan) are widened to f32 and the result narrowed once at the end, as
 * NumPy computes half-precision math in float and rounds the result. */
static nimble_ln_expr *widen(cp_ctx *c, nimble_ln_expr *x) {
  return x && (x->type == NIMBLE_LN_F16 || x->type == NIMBLE_LN_BF16) ? nimble_ln_cast(c->A, NIMBLE_LN_F32, x) : x;
}
static nimble_ln_expr *narrow(cp_ctx *c, nimble_ln_expr *v, nimble_ln_type_t t) { return cp_convert(c, v, t); }

nimble_ln_expr *cp_in_value(cp_ctx *c, cp_node *n, int i, nimble_ln_expr *const *idx) {
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

/* a ** e for integers (NumPy): exponentiation by squaring over the low 7
 * bits of e, wrapping on overflow like NumPy for e < 128; beyond that
 * 0 and +-1 are exact (parity is the low bit) and larger bases have
 * overflowed anyway.
 * A negative e gives 1 for a == 1, +-1 for a == -1, else 0 (integer
 * division of 1 by a larger power). */
static nimble_ln_expr *int_power(cp_ctx *c, nimble_ln_expr *a, nimble_ln_expr *e) {
  nimble_ln_arena *A = c->A;
  nimble_ln_type_t t = a->type;
  nimble_ln_expr *one = cp_const_of(c, t, 1), *two = cp_const_of(c, t, 2), *zero = cp_const_of(c, t, 0);
  nimble_ln_expr *r = one, *base = a, *rest = e;
  for (int bit = 0; bit < 7; bit++) {
    nimble_ln_expr *odd = nimble_ln_binary(A, NIMBLE_LN_NE, nimble_ln_binary(A, NIMBLE_LN_REM, rest, two), zero);
    r = nimble_ln_select(A, odd, nimble_ln_binary(A, NIMBLE_LN_MUL, r, base), r);
    base = nimble_ln_binary(A, NIMBLE_LN_MUL, base, base);
    rest = nimble_ln_binary(A, NIMBLE_LN_DIV, rest, two);
  }
  nimble_ln_expr *e_odd = nimble_ln_binary(A, NIMBLE_LN_NE, nimble_ln_binary(A, NIMBLE_LN_REM, e, two), zero);
  nimble_ln_expr *neg = nimble_ln_select(
      A, nimble_ln_binary(A, NIMBLE_LN_EQ, a, one), one,
      nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_EQ, a, cp_const_of(c, t, -1)),
                       nimble_ln_select(A, e_odd, cp_const_of(c, t, -1), one), zero));
  /* 0 ** e for e >= 128 (the low bits alone would say 1 when they are 0). */
  nimble_ln_expr *zero_big = nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_EQ, a, zero),
                                               nimble_ln_binary(A, NIMBLE_LN_GT, e, zero));
  r = nimble_ln_select(A, zero_big, zero, r);
  return nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, e, zero), neg, r);
}

static nimble_ln_expr *value_simple(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  for (size_t i = 0; i < sizeof kSimple / sizeof kSimple[0]; i++) {
    if (strcmp(kSimple[i].name, n->op->name) != 0) continue;
    nimble_ln_expr *a = cp_in_value(c, n, 0, idx);
    if (kSimple[i].arity == 1) return nimble_ln_unary(c->A, kSimple[i].op, a);
    nimble_ln_expr *b = cp_in_value(c, n, 1, idx);
    if (kSimple[i].op == NIMBLE_LN_POW && a && b && !nimble_ln_type_is_float(a->type)) {
      if (nimble_ln_type_is_float(b->type) || a->type == NIMBLE_LN_BOOL || b->type == NIMBLE_LN_BOOL)
        return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: power of integers to a non-integer exponent", c->prim);
      return int_power(c, a, cp_convert(c, b, a->type));
    }
    return nimble_ln_binary(c->A, kSimple[i].op, a, b);
  }
  return cp_fail(c, NIMBLE_INTERNAL, "%s: no simple element-wise op '%s'", c->prim, n->op->name);
}

static nimble_ln_expr *value_relu(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  return x ? nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, 0)) : NULL;
}

static nimble_ln_expr *value_copy(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return cp_in_value(c, n, 0, idx);
}

static nimble_ln_expr *value_rsqrt(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x) return NULL;
  return nimble_ln_binary(c->A, NIMBLE_LN_DIV, cp_const_of(c, x->type, 1.0), nimble_ln_unary(c->A, NIMBLE_LN_SQRT, x));
}

static nimble_ln_expr *value_leaky(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x) return NULL;
  /* NaN is not > 0: it takes the other arm, NaN * alpha, still NaN. */
  nimble_ln_expr *pos = nimble_ln_binary(c->A, NIMBLE_LN_GT, x, cp_const_of(c, x->type, 0));
  return nimble_ln_select(c->A, pos, x,
                          nimble_ln_binary(c->A, NIMBLE_LN_MUL, x, cp_const_of(c, x->type, cp_attr_float(n, "alpha"))));
}

static nimble_ln_expr *value_clip(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x) return NULL;
  double lo = cp_attr_float(n, "min"), hi = cp_attr_float(n, "max");
  if (!nimble_ln_type_is_float(x->type)) {
    /* Integer bounds: those at or past the type's own range (infinite
     * ones included) do not bound; the rest are rounded inward. */
    int bits = nimble_ln_type_bits(x->type);
    bool u = nimble_ln_type_is_unsigned(x->type);
    double tmin = u ? 0 : -ldexp(1, bits - 1), tmax = u ? ldexp(1, bits) - 1 : ldexp(1, bits - 1) - 1;
    if (lo > tmin) x = nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, fmin(ceil(lo), tmax)));
    if (hi < tmax) x = nimble_ln_binary(c->A, NIMBLE_LN_MIN, x, cp_const_of(c, x->type, fmax(floor(hi), tmin)));
    return x;
  }
  /* NumPy's clip: NaN stays NaN (min/max propagate it). */
  if (!isinf(lo) || lo > 0) x = nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, lo));
  if (!isinf(hi) || hi < 0) x = nimble_ln_binary(c->A, NIMBLE_LN_MIN, x, cp_const_of(c, x->type, hi));
  return x;
}

static nimble_ln_expr *value_cast(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x) return NULL;
  if (n->type == NIMBLE_LN_BOOL) return nimble_ln_binary(c->A, NIMBLE_LN_NE, x, cp_const_of(c, x->type, 0));
  if (x->type == NIMBLE_LN_BOOL) return nimble_ln_select(c->A, x, cp_const_of(c, n->type, 1), cp_const_of(c, n->type, 0));
  return cp_convert(c, x, n->type);
}

static nimble_ln_expr *value_mod(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *a = cp_in_value(c, n, 0, idx), *b = cp_in_value(c, n, 1, idx);
  if (!a || !b) return NULL;
  nimble_ln_type_t t = a->type;
  if (t == NIMBLE_LN_F64) {
    /* NumPy's remainder: fmod, moved to the divisor's sign when they
     * differ (exact, where a - floor(a/b)*b would lose digits). */
    nimble_ln_expr *r = nimble_ln_binary(c->A, NIMBLE_LN_REM, a, b);
    nimble_ln_expr *zero = cp_const_of(c, t, 0);
    nimble_ln_expr *fix = nimble_ln_binary(
        c->A, NIMBLE_LN_AND, nimble_ln_binary(c->A, NIMBLE_LN_NE, r, zero),
        nimble_ln_binary(c->A, NIMBLE_LN_NE, nimble_ln_binary(c->A, NIMBLE_LN_LT, r, zero),
                         nimble_ln_binary(c->A, NIMBLE_LN_LT, b, zero)));
    return nimble_ln_select(c->A, fix, nimble_ln_binary(c->A, NIMBLE_LN_ADD, r, b), r);
  }
  if (nimble_ln_type_is_float(t)) {
    /* NumPy: a - floor(a / b) * b (the divisor's sign); f16/bf16 in f32. */
    a = widen(c, a), b = widen(c, b);
    nimble_ln_expr *q = cp_f32_floor(c, nimble_ln_binary(c->A, NIMBLE_LN_DIV, a, b));
    return narrow(c, nimble_ln_binary(c->A, NIMBLE_LN_SUB, a, nimble_ln_binary(c->A, NIMBLE_LN_MUL, q, b)), t);
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

/* bit_shift (ONNX BitShift, unsigned integers): x << y or x >> y; a count
 * of the type's width or more shifts every bit out (0), as NumPy's
 * left_shift/right_shift do. */
static nimble_ln_expr *value_bit_shift(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *a = cp_in_value(c, n, 0, idx), *b = cp_in_value(c, n, 1, idx);
  if (!a || !b) return NULL;
  if (!nimble_ln_type_is_int(a->type))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: bit_shift of %s", c->prim, nimble_dtype_name(n->dtype));
  const char *dir = cp_attr_string(n, "direction");
  return nimble_ln_binary(c->A, !strcmp(dir, "RIGHT") ? NIMBLE_LN_SHR : NIMBLE_LN_SHL, a, cp_convert(c, b, a->type));
}

static nimble_ln_expr *value_where(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *cond = cp_in_value(c, n, 0, idx);
  if (cond && cond->type != NIMBLE_LN_BOOL) cond = nimble_ln_binary(c->A, NIMBLE_LN_NE, cond, cp_const_of(c, cond->type, 0));
  return nimble_ln_select(c->A, cond, cp_in_value(c, n, 1, idx), cp_in_value(c, n, 2, idx));
}

/* Above this magnitude every value of the type is an integer: 2^23 for
 * f32, 2^52 for f64. */
static double integral_bound(nimble_ln_type_t t) { return t == NIMBLE_LN_F64 ? 0x1p52 : 0x1p23; }

/* floor(x) for f32 or f64 without libm (see value_rounding). */
nimble_ln_expr *cp_f32_floor(cp_ctx *c, nimble_ln_expr *x) {
  nimble_ln_arena *A = c->A;
  if (!x) return NULL;
  nimble_ln_type_t ty = x->type;
  nimble_ln_expr *t = nimble_ln_cast(A, ty, nimble_ln_cast(A, NIMBLE_LN_I64, x));
  nimble_ln_expr *f = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_GT, t, x),
                                       nimble_ln_binary(A, NIMBLE_LN_SUB, t, cp_const_of(c, ty, 1)), t);
  nimble_ln_expr *small = nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_unary(A, NIMBLE_LN_ABS, x),
                                           cp_const_of(c, ty, integral_bound(ty)));
  return nimble_ln_select(A, small, f, x);
}

/* sin and cos without libm: k = round(x / (pi/2)), r = x - k*pi/2 in
 * three parts (Cody-Waite, exact products for |k| < 2^15), then the
 * Taylor polynomials of sin and cos on |r| <= pi/4 (first dropped terms
 * below 2e-9), chosen and signed by k mod 4. Accurate to a few ULP for
 * |x| up to about 5e4. */
static nimble_ln_expr *value_trig(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x || !nimble_ln_type_is_float(x->type))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s of integers", c->prim, n->op->name);
  /* f64: libm's double-precision sin and cos. */
  if (x->type == NIMBLE_LN_F64)
    return nimble_ln_unary(c->A, !strcmp(n->op->name, "cos") ? NIMBLE_LN_COS : NIMBLE_LN_SIN, x);
  nimble_ln_type_t out_t = x->type;
  x = widen(c, x);
  nimble_ln_arena *A = c->A;
#define F(v) nimble_ln_f32(A, (v))
#define ADD(a, b) nimble_ln_binary(A, NIMBLE_LN_ADD, (a), (b))
#define SUB(a, b) nimble_ln_binary(A, NIMBLE_LN_SUB, (a), (b))
#define MUL(a, b) nimble_ln_binary(A, NIMBLE_LN_MUL, (a), (b))
  nimble_ln_expr *kf = cp_f32_floor(c, ADD(MUL(x, F(0.63661977236758134)), F(0.5)));
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
  return narrow(c, nimble_ln_select(A, finite, v, SUB(x, x)), out_t);
#undef F
#undef ADD
#undef SUB
#undef MUL
}

/* floor, ceil and round without libm: truncation through i64 is exact for
 * |x| < 2^23 (above that every float is an integer already, and the
 * select keeps x, as it does for NaN and infinities). */
static nimble_ln_expr *value_rounding(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x || !nimble_ln_type_is_float(x->type)) return x;
  nimble_ln_type_t out_t = x->type;
  x = widen(c, x); /* f16/bf16: exact in f32 either way */
  nimble_ln_type_t ty = x->type;
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *t = nimble_ln_cast(A, ty, nimble_ln_cast(A, NIMBLE_LN_I64, x)); /* toward zero */
  nimble_ln_expr *one = cp_const_of(c, ty, 1), *r;
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
    nimble_ln_expr *half = cp_const_of(c, ty, 0.5);
    nimble_ln_expr *odd = nimble_ln_binary(A, NIMBLE_LN_NE,
                                           nimble_ln_binary(A, NIMBLE_LN_REM, nimble_ln_cast(A, NIMBLE_LN_I64, f), cp_i(c, 2)),
                                           cp_i(c, 0));
    nimble_ln_expr *up = nimble_ln_binary(A, NIMBLE_LN_OR, nimble_ln_binary(A, NIMBLE_LN_GT, d, half),
                                          nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_EQ, d, half), odd));
    r = nimble_ln_select(A, up, nimble_ln_binary(A, NIMBLE_LN_ADD, f, one), f);
  }
  nimble_ln_expr *small = nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_unary(A, NIMBLE_LN_ABS, x),
                                           cp_const_of(c, ty, integral_bound(ty)));
  return narrow(c, nimble_ln_select(A, small, r, x), out_t);
}

/* atan, asin and acos without libm (Cephes' atanf): |x| is reduced to
 * [0, tan(pi/8)] by atan(x) = pi/2 - atan(1/x) for |x| > tan(3pi/8) and
 * pi/4 + atan((x-1)/(x+1)) above tan(pi/8), then a degree-9 odd
 * polynomial (relative error about 2e-7). asin(x) = atan(x / sqrt(1 -
 * x^2)) (x = +-1 gives +-inf, whose atan is +-pi/2); acos(x) = pi/2 -
 * asin(x). Outside [-1, 1] asin and acos give NaN from the square root. */
static nimble_ln_expr *f32_atan(cp_ctx *c, nimble_ln_expr *x) {
  nimble_ln_arena *A = c->A;
#define F(v) nimble_ln_f32(A, (v))
#define ADD(a, b) nimble_ln_binary(A, NIMBLE_LN_ADD, (a), (b))
#define SUB(a, b) nimble_ln_binary(A, NIMBLE_LN_SUB, (a), (b))
#define MUL(a, b) nimble_ln_binary(A, NIMBLE_LN_MUL, (a), (b))
#define DIV(a, b) nimble_ln_binary(A, NIMBLE_LN_DIV, (a), (b))
  nimble_ln_expr *ax = nimble_ln_unary(A, NIMBLE_LN_ABS, x);
  nimble_ln_expr *big = nimble_ln_binary(A, NIMBLE_LN_GT, ax, F(2.414213562373095));
  nimble_ln_expr *mid = nimble_ln_binary(A, NIMBLE_LN_GT, ax, F(0.4142135623730950));
  nimble_ln_expr *base = nimble_ln_select(A, big, F(1.5707963267948966), nimble_ln_select(A, mid, F(0.7853981633974483), F(0)));
  nimble_ln_expr *t = nimble_ln_select(A, big, DIV(F(-1.0), ax),
                                       nimble_ln_select(A, mid, DIV(SUB(ax, F(1)), ADD(ax, F(1))), ax));
  nimble_ln_expr *z = MUL(t, t);
  nimble_ln_expr *p = F(8.05374449538e-2);
  p = ADD(MUL(p, z), F(-1.38776856032e-1));
  p = ADD(MUL(p, z), F(1.99777106478e-1));
  p = ADD(MUL(p, z), F(-3.33329491539e-1));
  nimble_ln_expr *r = ADD(base, ADD(MUL(MUL(p, z), t), t));
  /* Back to x's sign; NaN stays NaN (the comparisons above are false for
   * it, so r is NaN too). */
  return nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, x, F(0)), nimble_ln_unary(A, NIMBLE_LN_NEG, r), r);
}

static nimble_ln_expr *value_inverse_trig(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  if (!x || !nimble_ln_type_is_float(x->type))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s of integers", c->prim, n->op->name);
  nimble_ln_arena *A = c->A;
  nimble_ln_type_t out_t = x->type;
  if (out_t == NIMBLE_LN_F64) {
    /* libm's atan in double; asin and acos through it as below, in f64. */
    nimble_ln_expr *one = cp_const_of(c, out_t, 1);
    if (!strcmp(n->op->name, "atan")) return nimble_ln_unary(A, NIMBLE_LN_ATAN, x);
    nimble_ln_expr *as = nimble_ln_unary(A, NIMBLE_LN_ATAN, DIV(x, nimble_ln_unary(A, NIMBLE_LN_SQRT, SUB(one, MUL(x, x)))));
    if (!strcmp(n->op->name, "asin")) return as;
    return SUB(cp_const_of(c, out_t, 1.5707963267948966), as);
  }
  x = widen(c, x);
  if (!strcmp(n->op->name, "atan")) return narrow(c, f32_atan(c, x), out_t);
  nimble_ln_expr *asin = f32_atan(c, DIV(x, nimble_ln_unary(A, NIMBLE_LN_SQRT, SUB(F(1), MUL(x, x)))));
  if (!strcmp(n->op->name, "asin")) return narrow(c, asin, out_t);
  return narrow(c, SUB(F(1.5707963267948966), asin), out_t);
#undef F
#undef ADD
#undef SUB
#undef MUL
#undef DIV
}

#define SIMPLE1(n) {n, CP_INJECTIVE, cp_shape_same, value_simple, NULL, NULL}
#define SIMPLE2(n) {n, CP_INJECTIVE, shape_bcast, value_simple, NULL, NULL}
#define CMP(n) {n, CP_INJECTIVE, shape_compare, value_simple, NULL, NULL}

const cp_def cp_defs_elementwise[] = {
    SIMPLE1("negative"), SIMPLE1("abs"), SIMPLE1("exp"), SIMPLE1("log"), SIMPLE1("sqrt"), SIMPLE1("tanh"),
    SIMPLE1("sigmoid"), SIMPLE1("erf"), SIMPLE1("logical_not"),
    {"relu", CP_INJECTIVE, cp_shape_same, value_relu, NULL, NULL},
    {"floor", CP_INJECTIVE, cp_shape_same, value_rounding, NULL, NULL},
    {"sin", CP_INJECTIVE, cp_shape_same, value_trig, NULL, NULL},
    {"cos", CP_INJECTIVE, cp_shape_same, value_trig, NULL, NULL},
    {"ceil", CP_INJECTIVE, cp_shape_same, value_rounding, NULL, NULL},
    {"round", CP_INJECTIVE, cp_shape_same, value_rounding, NULL, NULL},
    {"copy", CP_INJECTIVE, cp_shape_same, value_copy, NULL, NULL},
    {"rsqrt", CP_INJECTIVE, cp_shape_same, value_rsqrt, NULL, NULL},
    {"leaky_relu", CP_INJECTIVE, cp_shape_same, value_leaky, NULL, NULL},
    {"clip", CP_INJECTIVE, cp_shape_same, value_clip, NULL, NULL},
    {"cast", CP_INJECTIVE, shape_cast, value_cast, NULL, NULL},
    SIMPLE2("add"), SIMPLE2("subtract"), SIMPLE2("multiply"), SIMPLE2("divide"), SIMPLE2("power"),
    SIMPLE2("maximum"), SIMPLE2("minimum"),
    {"mod", CP_INJECTIVE, shape_bcast, value_mod, NULL, NULL},
    {"bit_shift", CP_INJECTIVE, shape_bcast, value_bit_shift, NULL, NULL},
    CMP("equal"), CMP("not_equal"), CMP("less"), CMP("less_equal"), CMP("greater"), CMP("greater_equal"),
    {"logical_and", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"logical_or", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"where", CP_INJECTIVE, shape_where, value_where, NULL, NULL},
    {"atan", CP_INJECTIVE, cp_shape_same, value_inverse_trig, NULL, NULL},
    {"asin", CP_INJECTIVE, cp_shape_same, value_inverse_trig, NULL, NULL},
    {"acos", CP_INJECTIVE, cp_shape_same, value_inverse_trig, NULL, NULL},
};
const int cp_defs_elementwise_count = (int)(sizeof cp_defs_elementwise / sizeof cp_defs_elementwise[0]);
