/* Element-wise compute definitions: unary and binary math, comparisons,
 * logic, where, cast, clip, leaky_relu, inverse trigonometry, bit shifts. Each is a
 * value at an output index from its inputs' values at the NumPy-broadcast
 * indices; with the extents folded, static shapes index without selects.
 * Also the indexing ops computed per element (gather_elements, trilu,
 * eye_like, reverse_sequence, grid_sample) and, as whole kernels,
 * scatter_elements and scatter_nd. */
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

/* f16 and bf16 operands of the longer computations (mod, sin, rounding,
 * atan) are widened to f32 and the result narrowed once at the end, as
 * NumPy computes half-precision math in float and rounds the result. */
static nimble_ln_expr *widen(cp_ctx *c, nimble_ln_expr *x) {
  return x && (x->type == NIMBLE_LN_F16 || x->type == NIMBLE_LN_BF16) ? nimble_ln_cast(c->A, NIMBLE_LN_F32, x) : x;
}
static nimble_ln_expr *narrow(cp_ctx *c, nimble_ln_expr *v, nimble_ln_type_t t) { return cp_convert(c, v, t); }

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
    nimble_ln_expr *a = in_value(c, n, 0, idx);
    if (kSimple[i].arity == 1) return nimble_ln_unary(c->A, kSimple[i].op, a);
    nimble_ln_expr *b = in_value(c, n, 1, idx);
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
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  return x ? nimble_ln_binary(c->A, NIMBLE_LN_MAX, x, cp_const_of(c, x->type, 0)) : NULL;
}

static nimble_ln_expr *value_copy(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return in_value(c, n, 0, idx);
}

static nimble_ln_expr *value_rsqrt(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x) return NULL;
  return nimble_ln_binary(c->A, NIMBLE_LN_DIV, cp_const_of(c, x->type, 1.0), nimble_ln_unary(c->A, NIMBLE_LN_SQRT, x));
}

static nimble_ln_expr *value_leaky(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x) return NULL;
  /* NaN is not > 0: it takes the other arm, NaN * alpha, still NaN. */
  nimble_ln_expr *pos = nimble_ln_binary(c->A, NIMBLE_LN_GT, x, cp_const_of(c, x->type, 0));
  return nimble_ln_select(c->A, pos, x,
                          nimble_ln_binary(c->A, NIMBLE_LN_MUL, x, cp_const_of(c, x->type, cp_attr_float(n, "alpha"))));
}

static nimble_ln_expr *value_clip(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
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
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  if (!x) return NULL;
  if (n->type == NIMBLE_LN_BOOL) return nimble_ln_binary(c->A, NIMBLE_LN_NE, x, cp_const_of(c, x->type, 0));
  if (x->type == NIMBLE_LN_BOOL) return nimble_ln_select(c->A, x, cp_const_of(c, n->type, 1), cp_const_of(c, n->type, 0));
  return cp_convert(c, x, n->type);
}

static nimble_ln_expr *value_mod(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *a = in_value(c, n, 0, idx), *b = in_value(c, n, 1, idx);
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
    nimble_ln_expr *q = f32_floor(c, nimble_ln_binary(c->A, NIMBLE_LN_DIV, a, b));
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
  nimble_ln_expr *a = in_value(c, n, 0, idx), *b = in_value(c, n, 1, idx);
  if (!a || !b) return NULL;
  if (!nimble_ln_type_is_int(a->type))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: bit_shift of %s", c->prim, nimble_dtype_name(n->dtype));
  const char *dir = cp_attr_string(n, "direction");
  return nimble_ln_binary(c->A, !strcmp(dir, "RIGHT") ? NIMBLE_LN_SHR : NIMBLE_LN_SHL, a, cp_convert(c, b, a->type));
}

static nimble_ln_expr *value_where(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *cond = in_value(c, n, 0, idx);
  if (cond && cond->type != NIMBLE_LN_BOOL) cond = nimble_ln_binary(c->A, NIMBLE_LN_NE, cond, cp_const_of(c, cond->type, 0));
  return nimble_ln_select(c->A, cond, in_value(c, n, 1, idx), in_value(c, n, 2, idx));
}

/* Above this magnitude every value of the type is an integer: 2^23 for
 * f32, 2^52 for f64. */
static double integral_bound(nimble_ln_type_t t) { return t == NIMBLE_LN_F64 ? 0x1p52 : 0x1p23; }

/* floor(x) for f32 or f64 without libm (see value_rounding). */
static nimble_ln_expr *f32_floor(cp_ctx *c, nimble_ln_expr *x) {
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
  nimble_ln_expr *x = in_value(c, n, 0, idx);
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
  nimble_ln_expr *x = in_value(c, n, 0, idx);
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

/* ---- indexing and masks computed per element: gather_elements, trilu,
 * eye_like ---- */

static nimble_ln_expr *clamp_i64(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo, nimble_ln_expr *hi) {
  return cp_min(c, cp_max(c, v, lo), hi);
}

/* gather_elements: shaped like the indices, data's type. */
static nimble_status_t shape_gather_elements(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *ind = n->in[1];
  if (ind->type != NIMBLE_LN_I64 && ind->type != NIMBLE_LN_I32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_elements: indices must be integers");
  if (ind->rank != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_elements: indices of rank %d for data of rank %d",
                              ind->rank, x->rank);
  n->rank = ind->rank;
  for (int a = 0; a < ind->rank; a++) n->ext[a] = ind->ext[a];
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

/* out[i] = data[i with i[axis] replaced by indices[i]]; negative indices
 * count from the end, out-of-range ones are clamped (a kernel cannot fail
 * per element), as take does. */
static nimble_ln_expr *value_gather_elements(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *x = n->in[0];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  nimble_ln_expr *iv = cp_convert(c, cp_value(c, n->in[1], idx), NIMBLE_LN_I64);
  if (!iv) return NULL;
  nimble_ln_expr *d = x->ext[ax];
  iv = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, iv, cp_i(c, 0)), cp_add(c, iv, d), iv);
  iv = clamp_i64(c, iv, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < x->rank; a++) in_idx[a] = idx[a];
  in_idx[ax] = iv;
  return cp_value(c, x, in_idx);
}

/* The diagonal offset k of trilu (input 1, a scalar; 0 when absent). */
static nimble_ln_expr *trilu_k(cp_ctx *c, cp_node *n) {
  if (n->n_in < 2) return cp_i(c, 0);
  cp_node *k = n->in[1];
  nimble_ln_expr *zero[CP_MAX_RANK];
  for (int a = 0; a < CP_MAX_RANK; a++) zero[a] = cp_i(c, 0);
  return cp_convert(c, cp_value(c, k, zero), NIMBLE_LN_I64);
}

/* trilu: x where the element is in the kept triangle (upper: col - row >=
 * k; lower: col - row <= k), else 0. */
static nimble_ln_expr *value_trilu(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = in_value(c, n, 0, idx);
  nimble_ln_expr *k = trilu_k(c, n);
  if (!x || !k) return NULL;
  nimble_ln_expr *diff = cp_sub(c, idx[n->rank - 1], idx[n->rank - 2]);
  nimble_ln_expr *keep = nimble_ln_binary(c->A, cp_attr_int(n, "upper") ? NIMBLE_LN_GE : NIMBLE_LN_LE, diff, k);
  return nimble_ln_select(c->A, keep, x, cp_const_of(c, x->type, 0));
}

static nimble_status_t shape_eye_like(cp_ctx *c, cp_node *n) {
  shape_same(c, n);
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (dt && dt[0] &&
      (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool)))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "eye_like of %s", dt);
  return nimble_ok();
}

/* eye_like: 1 where col - row == k, else 0 (the input gives the shape only). */
static nimble_ln_expr *value_eye_like(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *on = nimble_ln_binary(c->A, NIMBLE_LN_EQ, cp_sub(c, idx[1], idx[0]), cp_i(c, cp_attr_int(n, "k")));
  if (n->type == NIMBLE_LN_BOOL) return on;
  return nimble_ln_select(c->A, on, cp_const_of(c, n->type, 1), cp_const_of(c, n->type, 0));
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
  nimble_ln_expr *x = in_value(c, n, 0, idx);
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

/* ---- scatter_elements and scatter_nd: whole kernels (the result's root)
 * that copy data into the output, then write the updates at the indexed
 * places in index order, serially, so a repeated index keeps the last
 * update (reduction "none") or accumulates them ("add", "mul"), as ONNX's
 * reference does. Indices are normalized like take's: negative ones count
 * from the end, out-of-range ones are clamped. ---- */

static nimble_status_t shape_scatter(cp_ctx *c, cp_node *n) {
  shape_same(c, n);
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
  if (cp_attr_int(n, "inplace")) return nimble_ln_seq(c->A, NULL, 0);
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
  return clamp_i64(c, iv, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
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
  for (int a = 0; a < q; a++) iidx[a] = uidx[a];
  for (int t = 0; t < (int)k; t++) {
    iidx[q] = cp_i(c, t);
    pos[t] = norm_index(c, cp_value(c, ind, iidx), n->ext[t]);
    if (!pos[t]) return NULL;
  }
  for (int a = (int)k; a < n->rank; a++) pos[a] = uidx[q + a - (int)k];
  nimble_ln_expr *u = cp_value(c, upd, uidx);
  nimble_ln_stmt *copy = copy_into(c, n, o);
  if (!u || !copy) return NULL;
  return nimble_ln_seq2(c->A, copy, serial_nest(c, v, ext, ur, scatter_store(c, n, o, pos, u)));
}

/* reverse_sequence: along time, the first lens[b] steps of batch entry b
 * reversed, the rest kept. */
static nimble_ln_expr *value_reverse_sequence(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  int b = (int)cp_attr_int(n, "batch_axis"), t = (int)cp_attr_int(n, "time_axis");
  if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: batch_axis %d and time_axis %d", c->prim, b, t);
  nimble_ln_expr *bi[1] = {idx[b]};
  nimble_ln_expr *len = cp_convert(c, cp_value(c, n->in[1], bi), NIMBLE_LN_I64);
  if (!len) return NULL;
  nimble_ln_expr *src[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) src[a] = idx[a];
  nimble_ln_expr *rev = cp_sub(c, cp_sub(c, len, cp_i(c, 1)), idx[t]);
  src[t] = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, idx[t], len),
                            clamp_i64(c, rev, cp_i(c, 0), cp_max(c, cp_sub(c, n->ext[t], cp_i(c, 1)), cp_i(c, 0))),
                            idx[t]);
  return cp_value(c, n->in[0], src);
}

/* ---- grid_sample (ONNX GridSample, 4-D, PyTorch's grid_sampler): the
 * output at (n, c, h, w) samples x[n, c] at the grid's normalized (x, y)
 * in grid[n, h, w]. Coordinates are unnormalized by align_corners, then
 * (bilinear, nearest) clipped or reflected by padding_mode; taps outside
 * the image read 0. Bicubic (A = -0.75) bounds each of its 16 taps
 * instead, as PyTorch does. ---- */

typedef struct {
  nimble_ln_expr *n, *c;
  cp_node *x;
  int align;
  int pad; /* 0 zeros, 1 border, 2 reflection */
} gs_ctx;

static nimble_status_t shape_grid_sample(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *g = n->in[1];
  if (x->rank != 4 || g->rank != 4)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample: only 4-D input and grid");
  if (x->type != NIMBLE_LN_F32 || g->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample of non-float32");
  const char *mode = cp_attr_string(n, "mode"), *pad = cp_attr_string(n, "padding_mode");
  if (strcmp(mode, "bilinear") && strcmp(mode, "nearest") && strcmp(mode, "bicubic"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample mode '%s'", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample padding_mode '%s'", pad);
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = x->ext[1];
  n->ext[2] = g->ext[1];
  n->ext[3] = g->ext[2];
  n->type = x->type;
  n->dtype = x->dtype;
  cp_check(c, cp_eq(c, g->ext[3], cp_i(c, 2)), "grid_sample: the grid's last axis must be 2");
  cp_check(c, cp_eq(c, g->ext[0], x->ext[0]), "grid_sample: grid and input batch differ");
  return nimble_ok();
}

#define GA c->A
#define GF(v) nimble_ln_f32(GA, (v))
#define GADD(a, b) nimble_ln_binary(GA, NIMBLE_LN_ADD, (a), (b))
#define GSUB(a, b) nimble_ln_binary(GA, NIMBLE_LN_SUB, (a), (b))
#define GMUL(a, b) nimble_ln_binary(GA, NIMBLE_LN_MUL, (a), (b))
#define GDIV(a, b) nimble_ln_binary(GA, NIMBLE_LN_DIV, (a), (b))

/* PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2]. */
static nimble_ln_expr *gs_reflect(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo2, nimble_ln_expr *hi2) {
  nimble_ln_expr *mn = GDIV(lo2, GF(2)), *span = GDIV(GSUB(hi2, lo2), GF(2));
  nimble_ln_expr *in = nimble_ln_unary(GA, NIMBLE_LN_ABS, GSUB(v, mn));
  nimble_ln_expr *flips = f32_floor(c, GDIV(in, span));
  nimble_ln_expr *extra = GSUB(in, GMUL(flips, span));
  nimble_ln_expr *even = nimble_ln_binary(
      GA, NIMBLE_LN_EQ, nimble_ln_binary(GA, NIMBLE_LN_REM, nimble_ln_cast(GA, NIMBLE_LN_I64, flips), cp_i(c, 2)), cp_i(c, 0));
  nimble_ln_expr *r = nimble_ln_select(GA, even, GADD(extra, mn), GADD(GSUB(span, extra), mn));
  /* A one-pixel axis (span 0) reflects to 0. */
  return nimble_ln_select(GA, nimble_ln_binary(GA, NIMBLE_LN_GT, span, GF(0)), r, GF(0));
}

/* The coordinate after padding_mode (size as f32). */
static nimble_ln_expr *gs_bound(cp_ctx *c, const gs_ctx *g, nimble_ln_expr *v, nimble_ln_expr *size) {
  nimble_ln_expr *hi = GSUB(size, GF(1));
  if (g->pad == 0) return v;
  if (g->pad == 2)
    v = g->align ? gs_reflect(c, v, GF(0), GMUL(GF(2), hi)) : gs_reflect(c, v, GF(-1), GSUB(GMUL(GF(2), size), GF(1)));
  return nimble_ln_binary(GA, NIMBLE_LN_MIN, nimble_ln_binary(GA, NIMBLE_LN_MAX, v, GF(0)), hi);
}

/* x[n, c, y, x] for integer (i64) y, x, or 0 outside the image. */
static nimble_ln_expr *gs_tap(cp_ctx *c, const gs_ctx *g, nimble_ln_expr *y, nimble_ln_expr *x) {
  nimble_ln_expr *h = g->x->ext[2], *w = g->x->ext[3];
  nimble_ln_expr *in = nimble_ln_binary(
      GA, NIMBLE_LN_AND,
      nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_GE, y, cp_i(c, 0)), nimble_ln_binary(GA, NIMBLE_LN_LT, y, h)),
      nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_GE, x, cp_i(c, 0)), nimble_ln_binary(GA, NIMBLE_LN_LT, x, w)));
  nimble_ln_expr *yc = clamp_i64(c, y, cp_i(c, 0), cp_max(c, cp_sub(c, h, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *xc = clamp_i64(c, x, cp_i(c, 0), cp_max(c, cp_sub(c, w, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *idx[4] = {g->n, g->c, yc, xc};
  nimble_ln_expr *v = cp_value(c, g->x, idx);
  return v ? nimble_ln_select(GA, in, v, GF(0)) : NULL;
}

/* PyTorch's cubic convolution weights for the taps at -1, 0, 1, 2 from t. */
static void gs_cubic(cp_ctx *c, nimble_ln_expr *t, nimble_ln_expr **w) {
  const double a = -0.75;
  nimble_ln_expr *u[4] = {GADD(t, GF(1)), t, GSUB(GF(1), t), GSUB(GF(2), t)};
  for (int i = 0; i < 4; i++) {
    nimble_ln_expr *x = u[i];
    if (i == 1 || i == 2) /* ((a + 2) x - (a + 3)) x x + 1 */
      w[i] = GADD(GMUL(GMUL(GSUB(GMUL(GF(a + 2), x), GF(a + 3)), x), x), GF(1));
    else /* ((a x - 5a) x + 8a) x - 4a */
      w[i] = GSUB(GMUL(GADD(GMUL(GSUB(GMUL(GF(a), x), GF(5 * a)), x), GF(8 * a)), x), GF(4 * a));
  }
}

static nimble_ln_expr *value_grid_sample(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *grid = n->in[1];
  gs_ctx g = {idx[0], idx[1], n->in[0], (int)cp_attr_int(n, "align_corners") != 0, 0};
  const char *pad = cp_attr_string(n, "padding_mode"), *mode = cp_attr_string(n, "mode");
  g.pad = !strcmp(pad, "border") ? 1 : !strcmp(pad, "reflection") ? 2 : 0;
  nimble_ln_expr *gi[4] = {idx[0], idx[2], idx[3], cp_i(c, 0)};
  nimble_ln_expr *gx = cp_value(c, grid, gi);
  gi[3] = cp_i(c, 1);
  nimble_ln_expr *gy = cp_value(c, grid, gi);
  if (!gx || !gy) return NULL;
  nimble_ln_expr *wf = cp_convert(c, g.x->ext[3], NIMBLE_LN_F32), *hf = cp_convert(c, g.x->ext[2], NIMBLE_LN_F32);
  /* align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2. */
  nimble_ln_expr *ix = g.align ? GMUL(GDIV(GADD(gx, GF(1)), GF(2)), GSUB(wf, GF(1)))
                               : GDIV(GSUB(GMUL(GADD(gx, GF(1)), wf), GF(1)), GF(2));
  nimble_ln_expr *iy = g.align ? GMUL(GDIV(GADD(gy, GF(1)), GF(2)), GSUB(hf, GF(1)))
                               : GDIV(GSUB(GMUL(GADD(gy, GF(1)), hf), GF(1)), GF(2));
  if (!strcmp(mode, "bicubic")) {
    nimble_ln_expr *fx = f32_floor(c, ix), *fy = f32_floor(c, iy);
    nimble_ln_expr *wx[4], *wy[4];
    gs_cubic(c, GSUB(ix, fx), wx);
    gs_cubic(c, GSUB(iy, fy), wy);
    nimble_ln_expr *sum = NULL;
    for (int r = 0; r < 4; r++) {
      nimble_ln_expr *row = NULL;
      nimble_ln_expr *ty = gs_bound(c, &g, GADD(fy, GF(r - 1)), hf);
      for (int k = 0; k < 4; k++) {
        nimble_ln_expr *tx = gs_bound(c, &g, GADD(fx, GF(k - 1)), wf);
        nimble_ln_expr *v = gs_tap(c, &g, nimble_ln_cast(GA, NIMBLE_LN_I64, ty), nimble_ln_cast(GA, NIMBLE_LN_I64, tx));
        if (!v) return NULL;
        row = row ? GADD(row, GMUL(wx[k], v)) : GMUL(wx[k], v);
      }
      sum = sum ? GADD(sum, GMUL(wy[r], row)) : GMUL(wy[r], row);
    }
    return sum;
  }
  ix = gs_bound(c, &g, ix, wf);
  iy = gs_bound(c, &g, iy, hf);
  if (!strcmp(mode, "nearest")) {
    /* nearbyint: half to even. */
    nimble_ln_expr *r[2], *v2[2] = {ix, iy};
    for (int i = 0; i < 2; i++) {
      nimble_ln_expr *f = f32_floor(c, v2[i]), *d = GSUB(v2[i], f);
      nimble_ln_expr *odd = nimble_ln_binary(
          GA, NIMBLE_LN_NE, nimble_ln_binary(GA, NIMBLE_LN_REM, nimble_ln_cast(GA, NIMBLE_LN_I64, f), cp_i(c, 2)), cp_i(c, 0));
      nimble_ln_expr *up = nimble_ln_binary(
          GA, NIMBLE_LN_OR, nimble_ln_binary(GA, NIMBLE_LN_GT, d, GF(0.5)),
          nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_EQ, d, GF(0.5)), odd));
      r[i] = nimble_ln_cast(GA, NIMBLE_LN_I64, nimble_ln_select(GA, up, GADD(f, GF(1)), f));
    }
    return gs_tap(c, &g, r[1], r[0]);
  }
  nimble_ln_expr *fx = f32_floor(c, ix), *fy = f32_floor(c, iy);
  nimble_ln_expr *tx = GSUB(ix, fx), *ty = GSUB(iy, fy);
  nimble_ln_expr *x0 = nimble_ln_cast(GA, NIMBLE_LN_I64, fx), *y0 = nimble_ln_cast(GA, NIMBLE_LN_I64, fy);
  nimble_ln_expr *x1 = cp_add(c, x0, cp_i(c, 1)), *y1 = cp_add(c, y0, cp_i(c, 1));
  nimble_ln_expr *v00 = gs_tap(c, &g, y0, x0), *v01 = gs_tap(c, &g, y0, x1);
  nimble_ln_expr *v10 = gs_tap(c, &g, y1, x0), *v11 = gs_tap(c, &g, y1, x1);
  if (!v00 || !v01 || !v10 || !v11) return NULL;
  nimble_ln_expr *top = GADD(GMUL(v00, GSUB(GF(1), tx)), GMUL(v01, tx));
  nimble_ln_expr *bot = GADD(GMUL(v10, GSUB(GF(1), tx)), GMUL(v11, tx));
  return GADD(GMUL(top, GSUB(GF(1), ty)), GMUL(bot, ty));
}

#undef GA
#undef GF
#undef GADD
#undef GSUB
#undef GMUL
#undef GDIV

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
    {"bit_shift", CP_INJECTIVE, shape_bcast, value_bit_shift, NULL, NULL},
    CMP("equal"), CMP("not_equal"), CMP("less"), CMP("less_equal"), CMP("greater"), CMP("greater_equal"),
    {"logical_and", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"logical_or", CP_INJECTIVE, shape_compare, value_simple, NULL, NULL},
    {"where", CP_INJECTIVE, shape_where, value_where, NULL, NULL},
    {"gather_elements", CP_INJECTIVE, shape_gather_elements, value_gather_elements, NULL, NULL},
    {"trilu", CP_INJECTIVE, shape_same, value_trilu, NULL, NULL},
    {"eye_like", CP_INJECTIVE, shape_eye_like, value_eye_like, NULL, NULL},
    {"atan", CP_INJECTIVE, shape_same, value_inverse_trig, NULL, NULL},
    {"asin", CP_INJECTIVE, shape_same, value_inverse_trig, NULL, NULL},
    {"acos", CP_INJECTIVE, shape_same, value_inverse_trig, NULL, NULL},
    {"scatter_elements", CP_ANCHOR_ROW, shape_scatter, NULL, NULL, emit_scatter_elements},
    {"scatter_nd", CP_ANCHOR_ROW, shape_scatter, NULL, NULL, emit_scatter_nd},
    {"reverse_sequence", CP_INJECTIVE, shape_same, value_reverse_sequence, NULL, NULL},
    {"grid_sample", CP_INJECTIVE, shape_grid_sample, value_grid_sample, NULL, NULL},
};
const int cp_defs_elementwise_count = (int)(sizeof cp_defs_elementwise / sizeof cp_defs_elementwise[0]);
