/* Converters for ONNX's element-wise operators: arithmetic (Add ... Mod,
 * Pow, BitShift, variadic Max/Min/Sum/Mean), comparisons and logic, unary
 * math (Exp ... Atan, the hyperbolic functions, IsNaN, IsInf, Sign),
 * activations (Relu, LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish,
 * Softplus, Mish, Softsign, PRelu, ThresholdedRelu, Shrink) and Clip. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

#define UNARY(fn, opname) \
  static nimble_status_t fn(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, opname, 1, NULL, 0); }
UNARY(cv_abs, "abs")
UNARY(cv_exp, "exp")
UNARY(cv_log, "log")
UNARY(cv_sqrt, "sqrt")
UNARY(cv_tanh, "tanh")
UNARY(cv_sigmoid, "sigmoid")
UNARY(cv_erf, "erf")
UNARY(cv_sin, "sin")
UNARY(cv_cos, "cos")
UNARY(cv_floor, "floor")
UNARY(cv_ceil, "ceil")
UNARY(cv_round, "round")
UNARY(cv_relu, "relu")
UNARY(cv_not, "logical_not")

#define BINARY(fn, opname) \
  static nimble_status_t fn(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, opname, 2, NULL, 0); }
BINARY(cv_equal, "equal")
BINARY(cv_less, "less")
BINARY(cv_less_equal, "less_equal")
BINARY(cv_greater, "greater")
BINARY(cv_greater_equal, "greater_equal")
BINARY(cv_and, "logical_and")
BINARY(cv_or, "logical_or")
BINARY(cv_xor, "not_equal")

static nimble_status_t cv_where(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "where", 3, NULL, 0); }

/* Add/Sub/Mul/Div: fold constant integer arithmetic (shape computations)
 * and keep symbolic dims where one side is 0 or 1. */
static nimble_status_t arith(imp_ctx *c, const nimble_onnx_node *n, const char *op, int kind) {
  imp_val *a, *b;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &b));
  if (a->known && b->known && nimble_dtype_is_int(a->sig.dtype) && a->sig.dtype == b->sig.dtype &&
      (a->nknown == b->nknown || a->nknown == 1 || b->nknown == 1) && a->sig.rank <= 1 && b->sig.rank <= 1) {
    size_t cnt = a->nknown > b->nknown ? a->nknown : b->nknown;
    nimble_dim_t res[IMP_MAX_KNOWN];
    int64_t vals[IMP_MAX_KNOWN];
    bool all_const = true, ok = true;
    for (size_t i = 0; i < cnt && ok; i++) {
      nimble_dim_t x = imp_resolve(c, a->known[a->nknown == 1 ? 0 : i]);
      nimble_dim_t y = imp_resolve(c, b->known[b->nknown == 1 ? 0 : i]);
      if (x.kind == NIMBLE_DIM_CONST && y.kind == NIMBLE_DIM_CONST) {
        int64_t v = 0;
        switch (kind) {
          case 0: ok = !__builtin_add_overflow(x.value, y.value, &v); break;
          case 1: ok = !__builtin_sub_overflow(x.value, y.value, &v); break;
          case 2: ok = !__builtin_mul_overflow(x.value, y.value, &v); break;
          default:
            if (y.value == 0) ok = false;
            else if (x.value == INT64_MIN && y.value == -1) ok = false;
            else v = x.value / y.value; /* ONNX integer Div truncates, as C does */
        }
        res[i] = nimble_dim_const(v);
        vals[i] = v;
      } else {
        all_const = false;
        if ((kind == 0 || kind == 1) && y.kind == NIMBLE_DIM_CONST && y.value == 0) res[i] = x;
        else if (kind == 0 && x.kind == NIMBLE_DIM_CONST && x.value == 0) res[i] = y;
        else if ((kind == 2 || kind == 3) && y.kind == NIMBLE_DIM_CONST && y.value == 1) res[i] = x;
        else if (kind == 2 && x.kind == NIMBLE_DIM_CONST && x.value == 1) res[i] = y;
        else res[i] = nimble_dim_any();
      }
    }
    if (ok && all_const) {
      imp_val *r;
      bool scalar = a->sig.rank == 0 && b->sig.rank == 0;
      if (a->sig.dtype == NIMBLE_DTYPE_INT64) NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, cnt, vals, scalar, &r));
      else {
        int32_t v32[IMP_MAX_KNOWN];
        for (size_t i = 0; i < cnt; i++) v32[i] = (int32_t)vals[i];
        int64_t d = (int64_t)cnt;
        if (a->sig.dtype != NIMBLE_DTYPE_INT32) goto emit;
        NIMBLE_RETURN_IF_ERROR(imp_const(c, NIMBLE_DTYPE_INT32, scalar ? 0 : 1, &d, v32, &r));
      }
      return imp_define(c, n, 0, r);
    }
    if (ok) {
      imp_val *r;
      NIMBLE_RETURN_IF_ERROR(imp_e2(c, op, a, b, &r));
      nimble_dim_t *k = nimble_arena_calloc(c->arena, cnt, sizeof *k);
      if (!k) return NIMBLE_OOM_IN("importing");
      memcpy(k, res, cnt * sizeof *k);
      r->known = k;
      r->nknown = cnt;
      return imp_define(c, n, 0, r);
    }
  }
emit:;
  imp_val *r;
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, op, a, b, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_add(imp_ctx *c, const nimble_onnx_node *n) { return arith(c, n, "add", 0); }
static nimble_status_t cv_sub(imp_ctx *c, const nimble_onnx_node *n) { return arith(c, n, "subtract", 1); }
static nimble_status_t cv_mul(imp_ctx *c, const nimble_onnx_node *n) { return arith(c, n, "multiply", 2); }
static nimble_status_t cv_div(imp_ctx *c, const nimble_onnx_node *n) {
  return arith(c, n, "divide", 3);
}

static nimble_status_t cv_mod(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t fmod_;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "fmod", 0, &fmod_));
  imp_val *a, *b;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &b));
  if (!fmod_ && nimble_dtype_is_float(a->sig.dtype))
    return imp_err(NIMBLE_INVALID_ARGUMENT, "Mod with fmod=0 needs integer inputs");
  if (!fmod_) return imp_simple(c, n, "mod", 2, NULL, 0);
  /* fmod=1 is C's fmod: the dividend's sign. With |a| and |b| both
   * conventions agree, so fmod(a, b) = +-mod(|a|, |b|) by the sign of a. */
  imp_val *aa, *ab, *m, *neg, *zero, *is_neg, *r;
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", a, &aa));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", b, &ab));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "mod", aa, ab, &m));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", m, &neg));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, a, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", a, zero, &is_neg));
  imp_val *args[3] = {is_neg, neg, m};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t variadic(imp_ctx *c, const nimble_onnx_node *n, const char *op, bool mean) {
  imp_val *acc = NULL;
  size_t count = 0;
  for (size_t i = 0; i < n->n_inputs; i++) {
    imp_val *v;
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, i, &v));
    if (!v) continue;
    count++;
    if (!acc) acc = v;
    else NIMBLE_RETURN_IF_ERROR(imp_e2(c, op, acc, v, &acc));
  }
  if (!acc) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs at least one input");
  if (count == 1) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "copy", acc, &acc));
  if (mean) {
    imp_val *k;
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, acc, (double)count, &k));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", acc, k, &acc));
  }
  return imp_define(c, n, 0, acc);
}
static nimble_status_t cv_max(imp_ctx *c, const nimble_onnx_node *n) { return variadic(c, n, "maximum", false); }
static nimble_status_t cv_min(imp_ctx *c, const nimble_onnx_node *n) { return variadic(c, n, "minimum", false); }
static nimble_status_t cv_sum(imp_ctx *c, const nimble_onnx_node *n) { return variadic(c, n, "add", false); }
static nimble_status_t cv_mean(imp_ctx *c, const nimble_onnx_node *n) { return variadic(c, n, "add", true); }

/* Neg folds tracked integer elements (shape arithmetic). */
static nimble_status_t cv_neg(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t v[IMP_MAX_KNOWN];
  size_t cnt;
  if (x->known && nimble_dtype_is_int(x->sig.dtype) && x->sig.dtype == NIMBLE_DTYPE_INT64 && x->sig.rank <= 1 &&
      imp_known_ints(x, v, IMP_MAX_KNOWN, &cnt)) {
    bool ok = true;
    for (size_t i = 0; i < cnt && ok; i++) {
      if (v[i] == INT64_MIN) ok = false;
      else v[i] = -v[i];
    }
    if (ok) {
      NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, cnt, v, x->sig.rank == 0, &r));
      return imp_define(c, n, 0, r);
    }
  }
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_reciprocal(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *one, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1.0, &one));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", one, x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_tan(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *s, *co, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "sin", x, &s));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "cos", x, &co));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", s, co, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_leaky_relu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 0.01f, &alpha));
  nimble_named_attr_t a = imp_attr_float("alpha", alpha);
  return imp_simple(c, n, "leaky_relu", 1, &a, 1);
}

/* where(x > 0, x, alpha * (exp(x) - 1)), scaled by gamma for Selu. */
static nimble_status_t elu_like(imp_ctx *c, const nimble_onnx_node *n, double alpha, double gamma) {
  imp_val *x, *zero, *one, *al, *pos, *e, *em1, *neg, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &al));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "greater", x, zero, &pos));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", x, &e));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", e, one, &em1));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", al, em1, &neg));
  imp_val *args[3] = {pos, x, neg};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  if (gamma != 1.0) {
    imp_val *g;
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, gamma, &g));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", g, r, &r));
  }
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_elu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.0f, &alpha));
  return elu_like(c, n, alpha, 1.0);
}
static nimble_status_t cv_selu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha, gamma;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.67326319217681884765625f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "gamma", 1.05070102214813232421875f, &gamma));
  return elu_like(c, n, alpha, gamma);
}

static nimble_status_t hard_sigmoid(imp_ctx *c, imp_val *x, double alpha, double beta, imp_val **out) {
  imp_val *a, *b, *t;
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &a));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, beta, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, a, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", t, b, &t));
  nimble_named_attr_t at[2] = {imp_attr_float("min", 0.0), imp_attr_float("max", 1.0)};
  return imp_emit(c, "clip", 1, &t, at, 2, out);
}
static nimble_status_t cv_hard_sigmoid(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha, beta;
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 0.2f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "beta", 0.5f, &beta));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(hard_sigmoid(c, x, alpha, beta, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_hard_swish(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(hard_sigmoid(c, x, 1.0 / 6.0, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, h, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t softplus(imp_ctx *c, imp_val *x, imp_val **out) {
  imp_val *e, *one;
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", x, &e));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", e, one, &e));
  return imp_e1(c, "log", e, out);
}
static nimble_status_t cv_softplus(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(softplus(c, x, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_mish(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(softplus(c, x, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "tanh", r, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_softsign(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *one, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", x, &a));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", a, one, &a));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", x, a, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_prelu(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *slope, *zero, *neg, *prod, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &slope));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, zero, &neg));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", slope, x, &prod));
  imp_val *args[3] = {neg, prod, x};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_thresholded_relu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  imp_val *x, *a, *zero, *gt, *r;
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &a));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "greater", x, a, &gt));
  imp_val *args[3] = {gt, x, zero};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_sign(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *zero, *one, *mone, *gt, *lt, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, -1, &mone));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "greater", x, zero, &gt));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, zero, &lt));
  imp_val *a1[3] = {lt, mone, zero};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, a1, NULL, 0, &r));
  imp_val *a2[3] = {gt, one, r};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, a2, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

/* Clip: bounds as attributes (opset < 11) or optional inputs. Constant
 * bounds become the clip operator; others maximum/minimum. */
static nimble_status_t cv_clip(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *lo = NULL, *hi = NULL;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  double mn = -INFINITY, mx = INFINITY;
  if (n->opset < 11) {
    NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "min", -INFINITY, &mn));
    NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "max", INFINITY, &mx));
  } else {
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &lo));
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &hi));
  }
  bool lo_const = !lo || imp_const_double(lo, &mn);
  bool hi_const = !hi || imp_const_double(hi, &mx);
  imp_val *r = x;
  if (lo_const && hi_const && nimble_dtype_is_float(x->sig.dtype)) {
    nimble_named_attr_t at[2] = {imp_attr_float("min", mn), imp_attr_float("max", mx)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "clip", 1, &x, at, 2, &r));
    return imp_define(c, n, 0, r);
  }
  if (lo) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "maximum", r, lo, &r));
  if (hi) NIMBLE_RETURN_IF_ERROR(imp_e2(c, "minimum", r, hi, &r));
  if (r == x) NIMBLE_RETURN_IF_ERROR(imp_e1(c, "copy", x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t exp_pair(imp_ctx *c, imp_val *x, imp_val **ep, imp_val **em) {
  imp_val *nx;
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", x, ep));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "negative", x, &nx));
  return imp_e1(c, "exp", nx, em);
}

static nimble_status_t cv_sinh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *b, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(exp_pair(c, x, &a, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", a, b, &r));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", r, h, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_cosh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *b, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(exp_pair(c, x, &a, &b));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", a, b, &r));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", r, h, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t log_hyp(imp_ctx *c, const nimble_onnx_node *n, double s) {
  imp_val *x, *sq, *k, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", x, x, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, s, &k));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", sq, k, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "sqrt", sq, &sq));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", x, sq, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "log", r, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_asinh(imp_ctx *c, const nimble_onnx_node *n) { return log_hyp(c, n, 1.0); }

static nimble_status_t cv_acosh(imp_ctx *c, const nimble_onnx_node *n) { return log_hyp(c, n, -1.0); }

static nimble_status_t cv_atanh(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *one, *half, *p, *m, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1.0, &one));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0.5, &half));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", one, x, &p));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", one, x, &m));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", p, m, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "log", r, &r));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", half, r, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_isnan(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "not_equal", x, x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_isinf(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *inf, *r;
  int64_t neg, pos;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "detect_negative", 1, &neg));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_int(n, "detect_positive", 1, &pos));
  if (neg && pos) {
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, INFINITY, &inf));
    NIMBLE_RETURN_IF_ERROR(imp_e1(c, "abs", x, &r));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "equal", r, inf, &r));
  } else if (neg || pos) {
    NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, pos ? INFINITY : -INFINITY, &inf));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "equal", x, inf, &r));
  } else {
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, x, &r)); /* false everywhere, NaN included */
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_celu(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *al, *zero, *one, *pos, *t, *neg, *r;
  double alpha;
  NIMBLE_RETURN_IF_ERROR(imp_unary_in(c, n, &x));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, alpha, &al));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "maximum", x, zero, &pos));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "divide", x, al, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e1(c, "exp", t, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", t, one, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "multiply", al, t, &t));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "minimum", t, zero, &neg));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", pos, neg, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_shrink(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *l, *ml, *b, *zero, *lo, *hi, *xp, *xm, *r;
  double lambd, bias;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "lambd", 0.5f, &lambd));
  NIMBLE_RETURN_IF_ERROR(imp_get_float(n, "bias", 0.0f, &bias));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, lambd, &l));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, -lambd, &ml));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, bias, &b));
  NIMBLE_RETURN_IF_ERROR(imp_k_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "less", x, ml, &lo));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "greater", x, l, &hi));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "add", x, b, &xp));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "subtract", x, b, &xm));
  imp_val *w1[3] = {hi, xm, zero};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w1, NULL, 0, &r));
  imp_val *w2[3] = {lo, xp, r};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w2, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

/* Pow: ONNX lets the exponent have another type; the result has the
 * base's. */
static nimble_status_t cv_pow(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *y, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &y));
  if (x->sig.dtype == y->sig.dtype) {
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t to_x = imp_attr_str("dtype", nimble_dtype_name(x->sig.dtype));
  if (nimble_dtype_is_float(x->sig.dtype)) {
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &y, &to_x, 1, &y));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
  } else {
    nimble_named_attr_t to_y = imp_attr_str("dtype", nimble_dtype_name(y->sig.dtype));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &x, &to_y, 1, &x));
    NIMBLE_RETURN_IF_ERROR(imp_e2(c, "power", x, y, &r));
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &r, &to_x, 1, &r));
  }
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_acos(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "acos", 1, NULL, 0); }

static nimble_status_t cv_asin(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "asin", 1, NULL, 0); }

static nimble_status_t cv_atan(imp_ctx *c, const nimble_onnx_node *n) { return imp_simple(c, n, "atan", 1, NULL, 0); }

static nimble_status_t cv_bit_shift(imp_ctx *c, const nimble_onnx_node *n) {
  const char *dir;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "direction", "LEFT", &dir));
  nimble_named_attr_t at = imp_attr_str("direction", dir);
  return imp_simple(c, n, "bit_shift", 2, &at, 1);
}

const imp_converter imp_converters_elementwise[] = {
    {"Abs", cv_abs},
    {"Neg", cv_neg},
    {"Exp", cv_exp},
    {"Log", cv_log},
    {"Sqrt", cv_sqrt},
    {"Tanh", cv_tanh},
    {"Sigmoid", cv_sigmoid},
    {"Erf", cv_erf},
    {"Sin", cv_sin},
    {"Cos", cv_cos},
    {"Tan", cv_tan},
    {"Floor", cv_floor},
    {"Ceil", cv_ceil},
    {"Round", cv_round},
    {"Relu", cv_relu},
    {"Not", cv_not},
    {"Reciprocal", cv_reciprocal},
    {"Add", cv_add},
    {"Sub", cv_sub},
    {"Mul", cv_mul},
    {"Div", cv_div},
    {"Mod", cv_mod},
    {"Equal", cv_equal},
    {"Less", cv_less},
    {"LessOrEqual", cv_less_equal},
    {"Greater", cv_greater},
    {"GreaterOrEqual", cv_greater_equal},
    {"And", cv_and},
    {"Or", cv_or},
    {"Xor", cv_xor},
    {"Where", cv_where},
    {"Max", cv_max},
    {"Min", cv_min},
    {"Sum", cv_sum},
    {"Mean", cv_mean},
    {"LeakyRelu", cv_leaky_relu},
    {"Elu", cv_elu},
    {"Selu", cv_selu},
    {"HardSigmoid", cv_hard_sigmoid},
    {"HardSwish", cv_hard_swish},
    {"Softplus", cv_softplus},
    {"Mish", cv_mish},
    {"Softsign", cv_softsign},
    {"PRelu", cv_prelu},
    {"ThresholdedRelu", cv_thresholded_relu},
    {"Sign", cv_sign},
    {"Clip", cv_clip},
    {"Sinh", cv_sinh},
    {"Cosh", cv_cosh},
    {"Asinh", cv_asinh},
    {"Acosh", cv_acosh},
    {"Atanh", cv_atanh},
    {"IsNaN", cv_isnan},
    {"IsInf", cv_isinf},
    {"Celu", cv_celu},
    {"Shrink", cv_shrink},
    {"Pow", cv_pow},
    {"Acos", cv_acos},
    {"Asin", cv_asin},
    {"Atan", cv_atan},
    {"BitShift", cv_bit_shift},
};
const size_t imp_converters_elementwise_count = sizeof imp_converters_elementwise / sizeof imp_converters_elementwise[0];
