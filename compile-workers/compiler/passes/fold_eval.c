/* The constant folder's evaluator: runs an operator on constant inputs at
 * compile time. It covers what shape code and small tensor code need:
 * element-wise unary and binary operators (with NumPy broadcasting),
 * comparisons and logic, cast, shape_of, the reshape family (the data is
 * shared, only the shape changes), concatenate and take. The output shape
 * and dtype come from the operator's own relation run in concrete mode, so
 * the folder and type inference agree by construction; an input the
 * relation rejects is left for the type checker to report.
 *
 * Integer results that would overflow, and integer division by zero, are
 * not folded: the run time reports them where they happen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/fold_eval.h"

/* Folding computes at most this many elements (weights are not folded). */
#define FOLD_MAX_ELEMENTS 4096

typedef enum { K_NONE, K_UNARY, K_BINARY, K_COMPARE, K_LOGIC, K_CAST, K_RESHAPE, K_SHAPE_OF,
               K_CONCAT, K_TAKE } fold_kind;

static fold_kind kind_of(const char *n) {
  static const char *const unary[] = {"negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh",
                                      "sigmoid", "floor", "ceil", "round", "relu", "erf", "sin",
                                      "cos", "copy", "logical_not"};
  static const char *const binary[] = {"add", "subtract", "multiply", "divide", "maximum", "minimum"};
  static const char *const compare[] = {"equal", "not_equal", "less", "less_equal", "greater",
                                        "greater_equal"};
  static const char *const reshape[] = {"reshape", "dyn_reshape", "expand_dims", "squeeze", "flatten"};
  for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) if (!strcmp(n, unary[i])) return K_UNARY;
  for (size_t i = 0; i < sizeof binary / sizeof *binary; i++) if (!strcmp(n, binary[i])) return K_BINARY;
  for (size_t i = 0; i < sizeof compare / sizeof *compare; i++) if (!strcmp(n, compare[i])) return K_COMPARE;
  for (size_t i = 0; i < sizeof reshape / sizeof *reshape; i++) if (!strcmp(n, reshape[i])) return K_RESHAPE;
  if (!strcmp(n, "logical_and") || !strcmp(n, "logical_or")) return K_LOGIC;
  if (!strcmp(n, "cast")) return K_CAST;
  if (!strcmp(n, "shape_of")) return K_SHAPE_OF;
  if (!strcmp(n, "concatenate")) return K_CONCAT;
  if (!strcmp(n, "take")) return K_TAKE;
  return K_NONE;
}

static bool dtype_ok(nimble_dtype_t d) { return (unsigned)d < NIMBLE_DTYPE_COUNT_; }

/* uint64 values above INT64_MAX do not fit the int64 arithmetic below:
 * a constant holding one is left for the run time. */
static bool values_ok(const nimble_const_tensor_t *c) {
  if (c->dtype != NIMBLE_DTYPE_UINT64) return true;
  for (size_t i = 0; i < c->num_elements; i++) {
    uint64_t u;
    memcpy(&u, (const char *)c->data + 8 * i, 8);
    if (u > (uint64_t)INT64_MAX) return false;
  }
  return true;
}

static double get_f(const nimble_const_tensor_t *c, size_t i) {
  return nimble_dtype_get_double(c->dtype, c->data, i);
}

static int64_t get_i(const nimble_const_tensor_t *c, size_t i) {
  return nimble_dtype_get_int(c->dtype, c->data, i);
}

/* Stores v (a double for float dtypes, rounded once to the dtype, an int64
 * otherwise); false when an integer does not fit. */
static bool put(void *data, nimble_dtype_t d, size_t i, double f, int64_t v) {
  char *p = data;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  switch (d) {
    case NIMBLE_DTYPE_FLOAT32: { float x = (float)f; memcpy(p + 4 * i, &x, 4); return true; }
    case NIMBLE_DTYPE_FLOAT64: memcpy(p + 8 * i, &f, 8); return true;
    case NIMBLE_DTYPE_FLOAT16: { uint16_t h = nimble_f64_to_f16(f); memcpy(p + 2 * i, &h, 2); return true; }
    case NIMBLE_DTYPE_BFLOAT16: {
      /* Through float would round twice; a double that float rounds to a
       * bfloat16 tie is not foldable exactly, so leave such values be. */
      float x = (float)f;
      if ((double)x != f && isfinite(f)) {
        uint32_t u;
        memcpy(&u, &x, 4);
        if ((u & 0xffff) == 0x8000) return false;
      }
      uint16_t h = nimble_f32_to_bf16(x);
      memcpy(p + 2 * i, &h, 2);
      return true;
    }
    case NIMBLE_DTYPE_BOOL: p[i] = v != 0; return true;
    case NIMBLE_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case NIMBLE_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case NIMBLE_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case NIMBLE_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
    case NIMBLE_DTYPE_UINT16: lo = 0, hi = UINT16_MAX; break;
    case NIMBLE_DTYPE_UINT32: lo = 0, hi = UINT32_MAX; break;
    case NIMBLE_DTYPE_UINT64: lo = 0; break;
    case NIMBLE_DTYPE_INT64: break;
    default: return false;
  }
  if (v < lo || v > hi) return false;
  size_t es = nimble_dtype_size(d);
  /* Little-endian hosts only (x86_64, aarch64): the low bytes of v. */
  memcpy(p + es * i, &v, es);
  return true;
}

static double unary_f(const char *n, double x) {
  if (!strcmp(n, "negative")) return -x;
  if (!strcmp(n, "abs")) return fabs(x);
  if (!strcmp(n, "exp")) return exp(x);
  if (!strcmp(n, "log")) return log(x);
  if (!strcmp(n, "sqrt")) return sqrt(x);
  if (!strcmp(n, "rsqrt")) return 1.0 / sqrt(x);
  if (!strcmp(n, "tanh")) return tanh(x);
  if (!strcmp(n, "sigmoid")) return 1.0 / (1.0 + exp(-x));
  if (!strcmp(n, "floor")) return floor(x);
  if (!strcmp(n, "ceil")) return ceil(x);
  if (!strcmp(n, "round")) return nearbyint(x); /* half to even in the default mode */
  if (!strcmp(n, "relu")) return x > 0 || isnan(x) ? x : 0; /* NaN stays NaN, as in NumPy */
  if (!strcmp(n, "erf")) return erf(x);
  if (!strcmp(n, "sin")) return sin(x);
  if (!strcmp(n, "cos")) return cos(x);
  return x; /* copy */
}

/* Integer unary; false when not foldable (overflow, float-only op). */
static bool unary_i(const char *n, int64_t x, int64_t *r) {
  if (!strcmp(n, "negative")) { if (x == INT64_MIN) return false; *r = -x; return true; }
  if (!strcmp(n, "abs")) { if (x == INT64_MIN) return false; *r = x < 0 ? -x : x; return true; }
  if (!strcmp(n, "relu")) { *r = x > 0 ? x : 0; return true; }
  if (!strcmp(n, "copy")) { *r = x; return true; }
  if (!strcmp(n, "logical_not")) { *r = !x; return true; }
  return false;
}

static double binary_f(const char *n, double a, double b) {
  if (!strcmp(n, "add")) return a + b;
  if (!strcmp(n, "subtract")) return a - b;
  if (!strcmp(n, "multiply")) return a * b;
  if (!strcmp(n, "divide")) return a / b;
  /* NumPy's maximum/minimum: a NaN on either side gives NaN. */
  if (isnan(a) || isnan(b)) return a + b;
  if (!strcmp(n, "maximum")) return a > b ? a : b;
  return a < b ? a : b;
}

static bool binary_i(const char *n, int64_t a, int64_t b, int64_t *r) {
  if (!strcmp(n, "add")) return !__builtin_add_overflow(a, b, r);
  if (!strcmp(n, "subtract")) return !__builtin_sub_overflow(a, b, r);
  if (!strcmp(n, "multiply")) return !__builtin_mul_overflow(a, b, r);
  if (!strcmp(n, "divide")) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *r = a / b; /* truncation, as ONNX Div on integers */
    return true;
  }
  if (!strcmp(n, "maximum")) { *r = a > b ? a : b; return true; }
  *r = a < b ? a : b;
  return true;
}

static bool compare(const char *n, double a, double b, int64_t ia, int64_t ib, bool ints) {
  int c = ints ? (ia < ib ? -1 : ia > ib) : (a < b ? -1 : a > b ? 1 : (a == b ? 0 : 2));
  if (!strcmp(n, "equal")) return c == 0;
  if (!strcmp(n, "not_equal")) return c != 0;
  if (!strcmp(n, "less")) return c == -1;
  if (!strcmp(n, "less_equal")) return c == -1 || c == 0;
  if (!strcmp(n, "greater")) return c == 1;
  return c == 1 || c == 0;
}

/* Offset of output element `flat` in an input of shape `in` broadcast to
 * `out` (right-aligned; extent-1 axes repeat). */
static size_t bcast_offset(size_t flat, const nimble_shape_t *out, const nimble_const_tensor_t *in) {
  size_t off = 0, stride = 1;
  for (size_t k = 0; k < out->rank; k++) {
    size_t od = out->rank - 1 - k;
    size_t idx = (size_t)(flat % (uint64_t)out->dims[od]);
    flat /= (size_t)out->dims[od];
    if (k < in->rank) {
      size_t id = in->rank - 1 - k;
      int64_t ext = in->dims[id];
      if (ext != 1) off += idx * stride;
      stride *= (size_t)ext;
    }
  }
  return off;
}

nimble_status_t pass_fold_eval(nimble_arena *a, const nimble_expr *call, const nimble_expr **out) {
  *out = NULL;
  const nimble_op *op = call->u.call.callee->u.op.op;
  fold_kind kind = kind_of(op->name);
  size_t n = call->u.call.num_args;
  if (kind == K_NONE || n == 0 || n > 16) return nimble_ok();
  const nimble_const_tensor_t *in[16];
  nimble_shape_input_t sin[16];
  for (size_t i = 0; i < n; i++) {
    const nimble_expr *arg = call->u.call.args[i];
    if (arg->kind != NIMBLE_EXPR_CONSTANT) return nimble_ok();
    in[i] = &arg->u.constant;
    if (in[i]->rank > NIMBLE_MAX_RANK || !dtype_ok(in[i]->dtype) || !values_ok(in[i])) return nimble_ok();
    memset(&sin[i], 0, sizeof sin[i]);
    sin[i].dtype = in[i]->dtype;
    sin[i].shape.rank = in[i]->rank;
    for (size_t d = 0; d < in[i]->rank; d++) sin[i].shape.dims[d] = in[i]->dims[d];
    sin[i].data = in[i]->data;
  }
  /* The relation in concrete mode gives the output's dtype and shape (and
   * rejects what inference would reject). */
  nimble_attrs_t defaults;
  const nimble_attrs_t *attrs = &call->u.call.attrs;
  if (attrs->count == 0) {
    nimble_status_t st = nimble_attrs_defaults(op, &defaults);
    if (st) {
      nimble_status_free(st);
      return nimble_ok();
    }
    attrs = &defaults;
  }
  nimble_shape_t shapes[NIMBLE_MAX_OUTPUTS];
  size_t nout = 0;
  nimble_status_t st = nimble_op_compute_shapes(op, attrs, sin, n, shapes, &nout);
  if (st || nout != 1 || op->tuple_output) {
    nimble_status_free(st);
    return nimble_ok();
  }
  nimble_tensor_sig_t sigs[16], res[NIMBLE_MAX_OUTPUTS];
  nimble_input_value_t vals[16];
  for (size_t i = 0; i < n; i++) {
    memset(&sigs[i], 0, sizeof sigs[i]);
    sigs[i].dtype = in[i]->dtype;
    sigs[i].rank = in[i]->rank;
    for (size_t d = 0; d < in[i]->rank; d++) sigs[i].dims[d] = nimble_dim_const(in[i]->dims[d]);
    vals[i].dtype = in[i]->dtype;
    vals[i].num_elements = in[i]->num_elements;
    vals[i].data = in[i]->data;
  }
  nimble_dim_ctx ctx = {NULL};
  nimble_rel_call_t rc = {op, &ctx, attrs, n, sigs, vals};
  size_t nres = 0;
  st = op->relation(&rc, res, &nres);
  if (st || nres != 1) {
    nimble_status_free(st);
    return nimble_ok();
  }
  nimble_dtype_t odt = res[0].dtype;
  const nimble_shape_t *osh = &shapes[0];
  size_t count = 1;
  for (size_t d = 0; d < osh->rank; d++) {
    if (osh->dims[d] != 0 && count > SIZE_MAX / (size_t)osh->dims[d]) return nimble_ok();
    count *= (size_t)osh->dims[d];
  }
  if (!dtype_ok(odt)) return nimble_ok();

  if (kind == K_RESHAPE) { /* same bytes, new shape */
    *out = nimble_ir_constant(a, odt, osh->rank, osh->dims, in[0]->data, &call->loc);
    return *out ? nimble_ok() : NIMBLE_OOM();
  }
  if (kind == K_SHAPE_OF) {
    *out = nimble_ir_constant(a, NIMBLE_DTYPE_INT64, 1, (int64_t[]){(int64_t)in[0]->rank},
                              in[0]->rank ? (const void *)in[0]->dims : (const void *)"", &call->loc);
    return *out ? nimble_ok() : NIMBLE_OOM();
  }
  if (count > FOLD_MAX_ELEMENTS) return nimble_ok();
  size_t esize = nimble_dtype_size(odt);
  void *data = calloc(count ? count : 1, esize);
  if (!data) return NIMBLE_OOM();
  bool ok = true;
  bool ints = !nimble_dtype_is_float(in[0]->dtype);
  const char *name = op->name;
  switch (kind) {
    case K_UNARY:
      for (size_t i = 0; ok && i < count; i++) {
        int64_t r = 0;
        if (ints) ok = unary_i(name, get_i(in[0], i), &r) && put(data, odt, i, 0, r);
        else put(data, odt, i, unary_f(name, get_f(in[0], i)), 0);
      }
      break;
    case K_BINARY:
    case K_COMPARE:
    case K_LOGIC:
      for (size_t i = 0; ok && i < count; i++) {
        size_t oa = bcast_offset(i, osh, in[0]), ob = bcast_offset(i, osh, in[1]);
        if (kind == K_COMPARE) {
          ok = put(data, odt, i, 0, compare(name, get_f(in[0], oa), get_f(in[1], ob),
                                            get_i(in[0], oa), get_i(in[1], ob), ints));
        } else if (kind == K_LOGIC) {
          bool x = get_i(in[0], oa) != 0, y = get_i(in[1], ob) != 0;
          ok = put(data, odt, i, 0, !strcmp(name, "logical_and") ? (x && y) : (x || y));
        } else if (ints) {
          int64_t r;
          ok = binary_i(name, get_i(in[0], oa), get_i(in[1], ob), &r) && put(data, odt, i, 0, r);
        } else {
          put(data, odt, i, binary_f(name, get_f(in[0], oa), get_f(in[1], ob)), 0);
        }
      }
      break;
    case K_CAST:
      for (size_t i = 0; ok && i < count; i++) {
        double f = get_f(in[0], i);
        if (!nimble_dtype_is_float(odt) && odt != NIMBLE_DTYPE_BOOL &&
            (isnan(f) || f < -9.2e18 || f > 9.2e18))
          ok = false; /* not representable: the run time decides */
        else if (odt == NIMBLE_DTYPE_BOOL)
          ok = put(data, odt, i, f, f != 0); /* 0.5 is true, not truncated to 0 */
        else
          ok = put(data, odt, i, f, ints ? get_i(in[0], i) : (int64_t)f);
      }
      break;
    case K_CONCAT: {
      /* Only along axis 0 of 1-D inputs (shape vectors). */
      size_t k = 0;
      for (size_t j = 0; ok && j < n; j++) {
        if (in[j]->rank != 1 || in[j]->dtype != odt) ok = false;
        for (size_t i = 0; ok && i < in[j]->num_elements && k < count; i++, k++)
          memcpy((char *)data + k * esize, (const char *)in[j]->data + i * esize, esize);
      }
      ok = ok && k == count;
      break;
    }
    case K_TAKE: {
      /* Scalar index into a 1-D tensor (an element of a shape). */
      if (in[0]->rank != 1 || in[1]->rank != 0 || count != 1) {
        ok = false;
        break;
      }
      int64_t idx = get_i(in[1], 0), len = in[0]->dims[0];
      if (idx < 0) idx += len;
      if (idx < 0 || idx >= len) ok = false;
      else memcpy(data, (const char *)in[0]->data + (size_t)idx * esize, esize);
      break;
    }
    default: ok = false;
  }
  if (ok) {
    *out = nimble_ir_constant(a, odt, osh->rank, osh->dims, data, &call->loc);
    if (!*out) ok = false, st = NIMBLE_OOM();
  }
  free(data);
  return st;
}
