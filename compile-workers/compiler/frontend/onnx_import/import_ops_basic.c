/* Converters for element-wise, neural-network and reduction operators. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"


static nimble_status_t get_int(const nimble_onnx_node *n, const char *name, int64_t dflt, int64_t *out) {
  return nimble_onnx_node_get_int(n, name, dflt, out);
}
static nimble_status_t get_float(const nimble_onnx_node *n, const char *name, float dflt, double *out) {
  float f;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_float(n, name, dflt, &f));
  *out = f;
  return nimble_ok();
}

/* One op on the node's inputs, result is output 0. */
static nimble_status_t simple(imp_ctx *c, const nimble_onnx_node *n, const char *op, size_t nin,
                              const nimble_named_attr_t *attrs, size_t nattrs) {
  imp_val *args[8], *r;
  for (size_t i = 0; i < nin; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &args[i]));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, nin, args, attrs, nattrs, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t emit1(imp_ctx *c, const char *op, imp_val *a, imp_val **out) {
  return imp_emit(c, op, 1, &a, NULL, 0, out);
}
static nimble_status_t emit2(imp_ctx *c, const char *op, imp_val *a, imp_val *b, imp_val **out) {
  imp_val *args[2] = {a, b};
  return imp_emit(c, op, 2, args, NULL, 0, out);
}
static nimble_status_t scalar_like(imp_ctx *c, imp_val *x, double v, imp_val **out) {
  return imp_scalar(c, x->sig.dtype, v, out);
}

/* ---- element-wise ---- */

#define UNARY(fn, opname) \
  static nimble_status_t fn(imp_ctx *c, const nimble_onnx_node *n) { return simple(c, n, opname, 1, NULL, 0); }
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
  static nimble_status_t fn(imp_ctx *c, const nimble_onnx_node *n) { return simple(c, n, opname, 2, NULL, 0); }
BINARY(cv_equal, "equal")
BINARY(cv_less, "less")
BINARY(cv_less_equal, "less_equal")
BINARY(cv_greater, "greater")
BINARY(cv_greater_equal, "greater_equal")
BINARY(cv_and, "logical_and")
BINARY(cv_or, "logical_or")
BINARY(cv_xor, "not_equal")

static nimble_status_t cv_where(imp_ctx *c, const nimble_onnx_node *n) { return simple(c, n, "where", 3, NULL, 0); }

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
      NIMBLE_RETURN_IF_ERROR(emit2(c, op, a, b, &r));
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
  NIMBLE_RETURN_IF_ERROR(emit2(c, op, a, b, &r));
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
  NIMBLE_RETURN_IF_ERROR(get_int(n, "fmod", 0, &fmod_));
  imp_val *a, *b;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &b));
  if (!fmod_ && nimble_dtype_is_float(a->sig.dtype))
    return imp_err(NIMBLE_INVALID_ARGUMENT, "Mod with fmod=0 needs integer inputs");
  if (!fmod_) return simple(c, n, "mod", 2, NULL, 0);
  /* fmod=1 is C's fmod: the dividend's sign. With |a| and |b| both
   * conventions agree, so fmod(a, b) = +-mod(|a|, |b|) by the sign of a. */
  imp_val *aa, *ab, *m, *neg, *zero, *is_neg, *r;
  NIMBLE_RETURN_IF_ERROR(emit1(c, "abs", a, &aa));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "abs", b, &ab));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "mod", aa, ab, &m));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "negative", m, &neg));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, a, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "less", a, zero, &is_neg));
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
    else NIMBLE_RETURN_IF_ERROR(emit2(c, op, acc, v, &acc));
  }
  if (!acc) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs at least one input");
  if (count == 1) NIMBLE_RETURN_IF_ERROR(emit1(c, "copy", acc, &acc));
  if (mean) {
    imp_val *k;
    NIMBLE_RETURN_IF_ERROR(scalar_like(c, acc, (double)count, &k));
    NIMBLE_RETURN_IF_ERROR(emit2(c, "divide", acc, k, &acc));
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
  NIMBLE_RETURN_IF_ERROR(emit1(c, "negative", x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_reciprocal(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *one, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 1.0, &one));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "divide", one, x, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_tan(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *s, *co, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "sin", x, &s));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "cos", x, &co));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "divide", s, co, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_leaky_relu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 0.01f, &alpha));
  nimble_named_attr_t a = imp_attr_float("alpha", alpha);
  return simple(c, n, "leaky_relu", 1, &a, 1);
}

/* where(x > 0, x, alpha * (exp(x) - 1)), scaled by gamma for Selu. */
static nimble_status_t elu_like(imp_ctx *c, const nimble_onnx_node *n, double alpha, double gamma) {
  imp_val *x, *zero, *one, *al, *pos, *e, *em1, *neg, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, alpha, &al));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "greater", x, zero, &pos));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "exp", x, &e));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "subtract", e, one, &em1));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", al, em1, &neg));
  imp_val *args[3] = {pos, x, neg};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  if (gamma != 1.0) {
    imp_val *g;
    NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, gamma, &g));
    NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", g, r, &r));
  }
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_elu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 1.0f, &alpha));
  return elu_like(c, n, alpha, 1.0);
}
static nimble_status_t cv_selu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha, gamma;
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 1.67326319217681884765625f, &alpha));
  NIMBLE_RETURN_IF_ERROR(get_float(n, "gamma", 1.05070102214813232421875f, &gamma));
  return elu_like(c, n, alpha, gamma);
}

static nimble_status_t hard_sigmoid(imp_ctx *c, imp_val *x, double alpha, double beta, imp_val **out) {
  imp_val *a, *b, *t;
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, alpha, &a));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, beta, &b));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", x, a, &t));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "add", t, b, &t));
  nimble_named_attr_t at[2] = {imp_attr_float("min", 0.0), imp_attr_float("max", 1.0)};
  return imp_emit(c, "clip", 1, &t, at, 2, out);
}
static nimble_status_t cv_hard_sigmoid(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha, beta;
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 0.2f, &alpha));
  NIMBLE_RETURN_IF_ERROR(get_float(n, "beta", 0.5f, &beta));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(hard_sigmoid(c, x, alpha, beta, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_hard_swish(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *h, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(hard_sigmoid(c, x, 1.0 / 6.0, 0.5, &h));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", x, h, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t softplus(imp_ctx *c, imp_val *x, imp_val **out) {
  imp_val *e, *one;
  NIMBLE_RETURN_IF_ERROR(emit1(c, "exp", x, &e));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "add", e, one, &e));
  return emit1(c, "log", e, out);
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
  NIMBLE_RETURN_IF_ERROR(emit1(c, "tanh", r, &r));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", x, r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_softsign(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *a, *one, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(emit1(c, "abs", x, &a));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "add", a, one, &a));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "divide", x, a, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_prelu(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *slope, *zero, *neg, *prod, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &slope));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "less", x, zero, &neg));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", slope, x, &prod));
  imp_val *args[3] = {neg, prod, x};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_thresholded_relu(imp_ctx *c, const nimble_onnx_node *n) {
  double alpha;
  imp_val *x, *a, *zero, *gt, *r;
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, alpha, &a));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "greater", x, a, &gt));
  imp_val *args[3] = {gt, x, zero};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_sign(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *zero, *one, *mone, *gt, *lt, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, 1, &one));
  NIMBLE_RETURN_IF_ERROR(scalar_like(c, x, -1, &mone));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "greater", x, zero, &gt));
  NIMBLE_RETURN_IF_ERROR(emit2(c, "less", x, zero, &lt));
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
    NIMBLE_RETURN_IF_ERROR(get_float(n, "min", -INFINITY, &mn));
    NIMBLE_RETURN_IF_ERROR(get_float(n, "max", INFINITY, &mx));
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
  if (lo) NIMBLE_RETURN_IF_ERROR(emit2(c, "maximum", r, lo, &r));
  if (hi) NIMBLE_RETURN_IF_ERROR(emit2(c, "minimum", r, hi, &r));
  if (r == x) NIMBLE_RETURN_IF_ERROR(emit1(c, "copy", x, &r));
  return imp_define(c, n, 0, r);
}

/* ---- neural network ---- */

static nimble_status_t cv_gemm(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t ta, tb;
  double alpha, beta;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "transA", 0, &ta));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "transB", 0, &tb));
  NIMBLE_RETURN_IF_ERROR(get_float(n, "alpha", 1.0f, &alpha));
  NIMBLE_RETURN_IF_ERROR(get_float(n, "beta", 1.0f, &beta));
  imp_val *args[3], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &args[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &args[1]));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &args[2]));
  nimble_named_attr_t at[4] = {imp_attr_int("transA", ta), imp_attr_int("transB", tb),
                               imp_attr_float("alpha", alpha), imp_attr_float("beta", beta)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dense", args[2] ? 3 : 2, args, at, 4, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_matmul(imp_ctx *c, const nimble_onnx_node *n) { return simple(c, n, "matmul", 2, NULL, 0); }

/* Pads for auto_pad SAME_*: needs static spatial extents. */
static nimble_status_t auto_pads(imp_ctx *c, const nimble_onnx_node *n, const imp_val *x,
                                 const int64_t *k, const int64_t *s, const int64_t *d, size_t nsp,
                                 int64_t *pads) {
  const char *ap;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "auto_pad", "NOTSET", &ap));
  if (strcmp(ap, "NOTSET") == 0) return nimble_ok();
  if (strcmp(ap, "VALID") == 0) {
    for (size_t i = 0; i < 2 * nsp; i++) pads[i] = 0;
    return nimble_ok();
  }
  bool upper = strcmp(ap, "SAME_UPPER") == 0;
  if (!upper && strcmp(ap, "SAME_LOWER") != 0)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'auto_pad' has unknown value '%s'", ap);
  for (size_t i = 0; i < nsp; i++)
    if (s[i] < 1 || d[i] < 1 || k[i] < 1 || s[i] > (1 << 20) || d[i] > (1 << 20) || k[i] > (1 << 20))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "strides, dilations and kernel must be in [1, 2^20]");
  for (size_t i = 0; i < nsp; i++) {
    nimble_dim_t in = imp_resolve(c, x->sig.dims[2 + i]);
    if (in.kind != NIMBLE_DIM_CONST)
      return imp_err(NIMBLE_UNIMPLEMENTED, "auto_pad %s needs static spatial dims", ap);
    if (in.value > ((int64_t)1 << 40)) return imp_err(NIMBLE_OUT_OF_RANGE, "spatial dim %" PRId64 " is too large", in.value);
    int64_t out = (in.value + s[i] - 1) / s[i];
    int64_t total = (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in.value;
    if (total < 0) total = 0;
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + nsp] = total - pads[i];
  }
  return nimble_ok();
}

/* Reads an INTS attribute with exactly `want` entries (or none: default). */
static nimble_status_t ints_attr(const nimble_onnx_node *n, const char *name, size_t want, int64_t dflt,
                                 int64_t *out) {
  const int64_t *v;
  size_t cnt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, name, &v, &cnt));
  if (cnt && cnt != want)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %zu", name, cnt, want);
  for (size_t i = 0; i < want; i++) out[i] = cnt ? v[i] : dflt;
  return nimble_ok();
}

/* Conv and pooling work on NCHW; 1-D forms are lifted to 2-D with an axis
 * of extent 1. */
static nimble_status_t lift_1d(imp_ctx *c, imp_val *v, imp_val **out) {
  nimble_named_attr_t a = imp_attr_int("axis", 2);
  return imp_emit(c, "expand_dims", 1, &v, &a, 1, out);
}
static nimble_status_t drop_1d(imp_ctx *c, imp_val *v, imp_val **out) {
  int64_t ax = 2;
  nimble_named_attr_t a = imp_attr_ints("axes", &ax, 1);
  return imp_emit(c, "squeeze", 1, &v, &a, 1, out);
}

static nimble_status_t cv_conv(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *w, *b, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &w));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &b));
  NIMBLE_RETURN_IF_ERROR(imp_conv(c, n, x, w, b, &r));
  return imp_define(c, n, 0, r);
}

nimble_status_t imp_conv(imp_ctx *c, const nimble_onnx_node *n, imp_val *x, imp_val *w, imp_val *b, imp_val **out) {
  if (x->sig.rank != 4 && x->sig.rank != 3)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only 1-D and 2-D convolutions are supported (input has rank %zu)",
                   x->sig.rank);
  size_t nsp = x->sig.rank - 2;
  int64_t k[2], s[2], d[2], pads[4], group;
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "strides", nsp, 1, s));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "dilations", nsp, 1, d));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "pads", 2 * nsp, 0, pads));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "group", 1, &group));
  for (size_t i = 0; i < nsp; i++) {
    nimble_dim_t kd = imp_resolve(c, w->sig.rank == x->sig.rank ? w->sig.dims[2 + i] : nimble_dim_any());
    k[i] = kd.kind == NIMBLE_DIM_CONST ? kd.value : 1;
  }
  const int64_t *ks;
  size_t nks;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "kernel_shape", &ks, &nks));
  if (nks == nsp && nsp) memcpy(k, ks, nsp * sizeof *k); /* absent: (NULL, 0) */
  NIMBLE_RETURN_IF_ERROR(auto_pads(c, n, x, k, s, d, nsp, pads));
  if (nsp == 1) {
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, x, &x));
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, w, &w));
    s[1] = s[0]; s[0] = 1;
    d[1] = d[0]; d[0] = 1;
    int64_t p0 = pads[0], p1 = pads[1];
    pads[0] = 0; pads[1] = p0; pads[2] = 0; pads[3] = p1;
  }
  nimble_named_attr_t at[4] = {imp_attr_ints("strides", s, 2), imp_attr_ints("pads", pads, 4),
                               imp_attr_ints("dilations", d, 2), imp_attr_int("groups", group)};
  imp_val *args[3] = {x, w, b}, *r;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "conv2d", b ? 3 : 2, args, at, 4, &r));
  if (nsp == 1) NIMBLE_RETURN_IF_ERROR(drop_1d(c, r, &r));
  *out = r;
  return nimble_ok();
}

static nimble_status_t pool(imp_ctx *c, const nimble_onnx_node *n, bool is_max) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (x->sig.rank != 4 && x->sig.rank != 3)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only 1-D and 2-D pooling is supported (input has rank %zu)", x->sig.rank);
  bool with_indices = is_max && n->n_outputs > 1 && n->outputs[1][0];
  size_t nsp = x->sig.rank - 2;
  if (with_indices && nsp != 2) return imp_err(NIMBLE_UNIMPLEMENTED, "the Indices output needs 2-D pooling");
  int64_t k[2], s[2], d[2], pads[4], ceil_mode, cip = 0;
  const int64_t *ks;
  size_t nks;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "kernel_shape", &ks, &nks));
  if (nks != nsp) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'kernel_shape' has %zu values, expected %zu", nks, nsp);
  if (nsp) memcpy(k, ks, nsp * sizeof *k); /* absent: (NULL, 0) */
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "strides", nsp, 1, s));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "dilations", nsp, 1, d));
  NIMBLE_RETURN_IF_ERROR(ints_attr(n, "pads", 2 * nsp, 0, pads));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "ceil_mode", 0, &ceil_mode));
  if (!is_max) NIMBLE_RETURN_IF_ERROR(get_int(n, "count_include_pad", 0, &cip));
  NIMBLE_RETURN_IF_ERROR(auto_pads(c, n, x, k, s, d, nsp, pads));
  if (nsp == 1) {
    NIMBLE_RETURN_IF_ERROR(lift_1d(c, x, &x));
    k[1] = k[0]; k[0] = 1;
    s[1] = s[0]; s[0] = 1;
    d[1] = d[0]; d[0] = 1;
    int64_t p0 = pads[0], p1 = pads[1];
    pads[0] = 0; pads[1] = p0; pads[2] = 0; pads[3] = p1;
  }
  nimble_named_attr_t at[6] = {imp_attr_ints("kernel_shape", k, 2), imp_attr_ints("strides", s, 2),
                               imp_attr_ints("pads", pads, 4), imp_attr_ints("dilations", d, 2),
                               imp_attr_int("ceil_mode", ceil_mode), imp_attr_int("count_include_pad", cip)};
  if (with_indices) {
    int64_t order;
    NIMBLE_RETURN_IF_ERROR(get_int(n, "storage_order", 0, &order));
    imp_val *outs[2];
    size_t nout;
    nimble_named_attr_t ai[6] = {at[0], at[1], at[2], at[3], at[4], imp_attr_int("storage_order", order)};
    NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "max_pool2d_with_indices", 1, &x, ai, 6, outs, &nout));
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, outs[0]));
    return imp_define(c, n, 1, outs[1]);
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, is_max ? "max_pool2d" : "avg_pool2d", 1, &x, at, is_max ? 5 : 6, &r));
  if (nsp == 1) NIMBLE_RETURN_IF_ERROR(drop_1d(c, r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_maxpool(imp_ctx *c, const nimble_onnx_node *n) { return pool(c, n, true); }
static nimble_status_t cv_avgpool(imp_ctx *c, const nimble_onnx_node *n) { return pool(c, n, false); }

static nimble_status_t global_pool(imp_ctx *c, const nimble_onnx_node *n, const char *op) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (x->sig.rank < 3) return imp_err(NIMBLE_INVALID_ARGUMENT, "input has rank %zu, expected at least 3", x->sig.rank);
  if (x->sig.rank == 4 && strcmp(op, "mean") == 0) {
    NIMBLE_RETURN_IF_ERROR(emit1(c, "global_avg_pool2d", x, &r));
    return imp_define(c, n, 0, r);
  }
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  for (size_t i = 2; i < x->sig.rank; i++) axes[na++] = (int64_t)i;
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", 1)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &x, at, 2, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_global_avg(imp_ctx *c, const nimble_onnx_node *n) { return global_pool(c, n, "mean"); }
static nimble_status_t cv_global_max(imp_ctx *c, const nimble_onnx_node *n) { return global_pool(c, n, "max"); }

/* Softmax: opset 13 normalizes along one axis; before, over the flattened
 * dims from axis on (default 1). */
static nimble_status_t softmax_like(imp_ctx *c, const nimble_onnx_node *n, const char *op) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "axis", n->opset >= 13 ? -1 : 1, &axis));
  size_t ax;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axis, x->sig.rank, &ax));
  nimble_named_attr_t a = imp_attr_int("axis", -1);
  if (n->opset >= 13 || ax + 1 == x->sig.rank) {
    nimble_named_attr_t a2 = imp_attr_int("axis", (int64_t)ax);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &x, &a2, 1, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t fa = imp_attr_int("axis", (int64_t)ax);
  imp_val *f;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "flatten", 1, &x, &fa, 1, &f));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &f, &a, 1, &r));
  /* Back to the input's shape. */
  int64_t shape[NIMBLE_MAX_RANK];
  bool known = true;
  for (size_t i = 0; i < x->sig.rank; i++) {
    nimble_dim_t d = imp_resolve(c, x->sig.dims[i]);
    if (d.kind != NIMBLE_DIM_CONST) known = false;
    shape[i] = d.value;
  }
  if (known) {
    nimble_named_attr_t ra = imp_attr_ints("newshape", shape, x->sig.rank);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &r, &ra, 1, &r));
  } else {
    imp_val *sh;
    NIMBLE_RETURN_IF_ERROR(emit1(c, "shape_of", x, &sh));
    NIMBLE_RETURN_IF_ERROR(emit2(c, "dyn_reshape", r, sh, &r));
    r->has_sig = true;
    r->sig = x->sig;
  }
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_softmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "softmax"); }
static nimble_status_t cv_log_softmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "log_softmax"); }
static nimble_status_t cv_hardmax(imp_ctx *c, const nimble_onnx_node *n) { return softmax_like(c, n, "hardmax"); }

static nimble_status_t cv_dropout(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  imp_val *t, *ratio;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &t));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &ratio));
  int64_t tm[1];
  size_t cnt;
  if (t && !(imp_const_ints(t, tm, 1, &cnt) && tm[0] == 0)) {
    /* Training mode (a constant true, or chosen at run time). */
    int64_t seed;
    NIMBLE_RETURN_IF_ERROR(get_int(n, "seed", 0, &seed));
    if (ratio && ratio->has_sig && ratio->sig.rank == 1) NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, ratio, &ratio));
    imp_val *args[2] = {x, ratio}, *outs[2];
    size_t nout;
    nimble_named_attr_t sa = imp_attr_float("seed", (double)seed);
    NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "dropout_train", ratio ? 2 : 1, args, &sa, 1, outs, &nout));
    imp_val *y = outs[0], *mask = outs[1];
    if (!(imp_const_ints(t, tm, 1, &cnt) && tm[0] != 0)) {
      /* Run-time mode: where(t, training result, inference result). */
      imp_val *ts, *yes;
      NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, t, &ts));
      imp_val *w1[3] = {ts, y, x};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w1, NULL, 0, &y));
      NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_BOOL, 1, &yes));
      imp_val *w2[3] = {ts, mask, yes};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "where", 3, w2, NULL, 0, &mask));
    }
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, y));
    return imp_define(c, n, 1, mask);
  }
  NIMBLE_RETURN_IF_ERROR(emit1(c, "copy", x, &r));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, r));
  if (n->n_outputs > 1 && n->outputs[1][0]) {
    /* In inference the mask is all true. */
    imp_val *sh, *one, *m;
    NIMBLE_RETURN_IF_ERROR(emit1(c, "shape_of", x, &sh));
    nimble_named_attr_t at[2] = {imp_attr_str("dtype", "bool"), imp_attr_float("value", 1.0)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &sh, at, 2, &m));
    (void)one;
    m->has_sig = true;
    m->sig = x->sig;
    m->sig.dtype = NIMBLE_DTYPE_BOOL;
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 1, m));
  }
  return nimble_ok();
}

/* ---- reductions ---- */

static nimble_status_t reduce(imp_ctx *c, const nimble_onnx_node *n, const char *op, int pre, int post) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t keepdims, noop;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "keepdims", 1, &keepdims));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "noop_with_empty_axes", 0, &noop));
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na = 0;
  const int64_t *av;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "axes", &av, &na));
  if (na > NIMBLE_MAX_RANK) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'axes' has %zu values", na);
  if (na) memcpy(axes, av, na * sizeof *axes);
  imp_val *ai;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &ai));
  if (ai) {
    if (!imp_const_ints(ai, axes, NIMBLE_MAX_RANK, &na)) {
      if (strcmp(op, "sum") != 0 || pre || post)
        return imp_err(NIMBLE_UNIMPLEMENTED, "input 'axes' must be a constant");
      /* ReduceSum 13 with axes known only at run time. */
      if (!ai->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "input 'axes' has no known type");
      imp_val *args[2] = {x, ai};
      nimble_named_attr_t at[2] = {imp_attr_int("keepdims", keepdims ? 1 : 0), imp_attr_int("noop_with_empty_axes", noop ? 1 : 0)};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_sum", 2, args, at, 2, &r));
      return imp_define(c, n, 0, r);
    }
  }
  if (na == 0 && noop) {
    NIMBLE_RETURN_IF_ERROR(emit1(c, "copy", x, &r));
    return imp_define(c, n, 0, r);
  }
  r = x;
  if (pre == 1) NIMBLE_RETURN_IF_ERROR(emit1(c, "abs", r, &r));
  if (pre == 2) NIMBLE_RETURN_IF_ERROR(emit2(c, "multiply", r, r, &r));
  if (pre == 3) NIMBLE_RETURN_IF_ERROR(emit1(c, "exp", r, &r));
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", axes, na), imp_attr_int("keepdims", keepdims ? 1 : 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 1, &r, at, 2, &r));
  if (post == 1) NIMBLE_RETURN_IF_ERROR(emit1(c, "sqrt", r, &r));
  if (post == 2) NIMBLE_RETURN_IF_ERROR(emit1(c, "log", r, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_reduce_sum(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 0, 0); }
static nimble_status_t cv_reduce_mean(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "mean", 0, 0); }
static nimble_status_t cv_reduce_max(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "max", 0, 0); }
static nimble_status_t cv_reduce_min(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "min", 0, 0); }
static nimble_status_t cv_reduce_prod(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "prod", 0, 0); }
static nimble_status_t cv_reduce_l1(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 1, 0); }
static nimble_status_t cv_reduce_l2(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 2, 1); }
static nimble_status_t cv_reduce_sumsq(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 2, 0); }
static nimble_status_t cv_reduce_logsum(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 0, 2); }
static nimble_status_t cv_reduce_logsumexp(imp_ctx *c, const nimble_onnx_node *n) { return reduce(c, n, "sum", 3, 2); }

const imp_converter imp_converters_basic[] = {
    {"Abs", cv_abs}, {"Neg", cv_neg}, {"Exp", cv_exp}, {"Log", cv_log}, {"Sqrt", cv_sqrt},
    {"Tanh", cv_tanh}, {"Sigmoid", cv_sigmoid}, {"Erf", cv_erf}, {"Sin", cv_sin}, {"Cos", cv_cos},
    {"Tan", cv_tan}, {"Floor", cv_floor}, {"Ceil", cv_ceil}, {"Round", cv_round}, {"Relu", cv_relu},
    {"Not", cv_not}, {"Reciprocal", cv_reciprocal}, {"Add", cv_add}, {"Sub", cv_sub},
    {"Mul", cv_mul}, {"Div", cv_div}, {"Mod", cv_mod}, {"Equal", cv_equal},
    {"Less", cv_less}, {"LessOrEqual", cv_less_equal}, {"Greater", cv_greater},
    {"GreaterOrEqual", cv_greater_equal}, {"And", cv_and}, {"Or", cv_or}, {"Xor", cv_xor},
    {"Where", cv_where}, {"Max", cv_max}, {"Min", cv_min}, {"Sum", cv_sum}, {"Mean", cv_mean},
    {"LeakyRelu", cv_leaky_relu}, {"Elu", cv_elu}, {"Selu", cv_selu},
    {"HardSigmoid", cv_hard_sigmoid}, {"HardSwish", cv_hard_swish}, {"Softplus", cv_softplus},
    {"Mish", cv_mish}, {"Softsign", cv_softsign}, {"PRelu", cv_prelu},
    {"ThresholdedRelu", cv_thresholded_relu}, {"Sign", cv_sign}, {"Clip", cv_clip},
    {"Gemm", cv_gemm}, {"MatMul", cv_matmul}, {"Conv", cv_conv}, {"MaxPool", cv_maxpool},
    {"AveragePool", cv_avgpool}, {"GlobalAveragePool", cv_global_avg},
    {"GlobalMaxPool", cv_global_max}, 
     {"Softmax", cv_softmax},
    {"LogSoftmax", cv_log_softmax}, {"Hardmax", cv_hardmax}, {"Dropout", cv_dropout}, {"ReduceSum", cv_reduce_sum},
    {"ReduceMean", cv_reduce_mean}, {"ReduceMax", cv_reduce_max}, {"ReduceMin", cv_reduce_min},
    {"ReduceProd", cv_reduce_prod}, {"ReduceL1", cv_reduce_l1}, {"ReduceL2", cv_reduce_l2},
    {"ReduceSumSquare", cv_reduce_sumsq}, {"ReduceLogSum", cv_reduce_logsum},
    {"ReduceLogSumExp", cv_reduce_logsumexp}, 
};
const size_t imp_converters_basic_count = sizeof imp_converters_basic / sizeof imp_converters_basic[0];
