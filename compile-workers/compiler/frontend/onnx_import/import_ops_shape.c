/* Converters for constants, shapes and layout operators. Small integer
 * tensors are tracked element by element (imp_val.known), so shape
 * arithmetic folds to constants and symbolic dims reach Reshape. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"


static nimble_status_t get_int(const nimble_onnx_node *n, const char *name, int64_t dflt, int64_t *out) {
  return nimble_onnx_node_get_int(n, name, dflt, out);
}

static bool all_const(imp_ctx *c, const nimble_dim_t *k, size_t n, int64_t *vals) {
  for (size_t i = 0; i < n; i++) {
    nimble_dim_t d = imp_resolve(c, k[i]);
    if (d.kind != NIMBLE_DIM_CONST) return false;
    vals[i] = d.value;
  }
  return true;
}

/* Gives `v` tracked elements. */
static nimble_status_t set_known(imp_ctx *c, imp_val *v, const nimble_dim_t *k, size_t n) {
  nimble_dim_t *copy = nimble_arena_calloc(c->arena, n ? n : 1, sizeof *copy);
  if (!copy) return NIMBLE_OOM_IN("importing");
  for (size_t i = 0; i < n; i++) copy[i] = imp_resolve(c, k[i]);
  v->known = copy;
  v->nknown = n;
  return nimble_ok();
}

/* A constant when every element is known, else nothing (*out NULL). */
static nimble_status_t fold_known(imp_ctx *c, nimble_dtype_t dtype, bool scalar, const nimble_dim_t *k,
                                  size_t n, imp_val **out) {
  *out = NULL;
  int64_t vals[IMP_MAX_KNOWN];
  if (n > IMP_MAX_KNOWN || !all_const(c, k, n, vals)) return nimble_ok();
  int64_t d = (int64_t)n;
  if (dtype == NIMBLE_DTYPE_INT64) return imp_const(c, dtype, scalar ? 0 : 1, &d, vals, out);
  if (dtype == NIMBLE_DTYPE_INT32) {
    int32_t v32[IMP_MAX_KNOWN];
    for (size_t i = 0; i < n; i++) v32[i] = (int32_t)vals[i];
    return imp_const(c, dtype, scalar ? 0 : 1, &d, v32, out);
  }
  return nimble_ok();
}

static nimble_status_t cv_identity(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 0, &x));
  if (!x) return imp_err(NIMBLE_INVALID_ARGUMENT, "input 0 is required");
  return imp_define(c, n, 0, x);
}

static nimble_status_t cv_constant(imp_ctx *c, const nimble_onnx_node *n) {
  if (!n->constant)
    return imp_err(NIMBLE_UNIMPLEMENTED, "only dense constants are supported (sparse_value is not)");
  const nimble_onnx_tensor_t *t = n->constant;
  nimble_dtype_t dt;
  NIMBLE_RETURN_IF_ERROR(imp_dtype(t->dtype, &dt));
  uint64_t bytes;
  if (__builtin_mul_overflow(t->count, (uint64_t)nimble_dtype_size(dt), &bytes) || t->size != bytes)
    return imp_err(NIMBLE_DATA_LOSS, "value has %zu bytes for %" PRIu64 " elements", t->size, t->count);
  static const uint8_t empty[8];
  imp_val *v;
  NIMBLE_RETURN_IF_ERROR(imp_const(c, dt, t->rank, t->dims, t->data ? t->data : empty, &v));
  return imp_define(c, n, 0, v);
}

static nimble_status_t cv_shape(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t start, end;
  int64_t rank = (int64_t)x->sig.rank;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "start", 0, &start));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "end", rank, &end));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  if (start < 0) start = 0;
  if (end > rank) end = rank;
  if (end < start) end = start;
  nimble_dim_t k[NIMBLE_MAX_RANK];
  size_t cnt = 0;
  for (int64_t i = start; i < end; i++) k[cnt++] = imp_resolve(c, x->sig.dims[i]);
  NIMBLE_RETURN_IF_ERROR(fold_known(c, NIMBLE_DTYPE_INT64, false, k, cnt, &r));
  if (r) return imp_define(c, n, 0, r);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &x, NULL, 0, &r));
  if (start != 0 || end != rank) {
    imp_val *args[3], *b, *e;
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &start, false, &b));
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &end, false, &e));
    nimble_named_attr_t at[2] = {imp_attr_ints("begin", &start, 1), imp_attr_ints("end", &end, 1)};
    args[0] = r;
    (void)b;
    (void)e;
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, args, at, 2, &r));
  }
  NIMBLE_RETURN_IF_ERROR(set_known(c, r, k, cnt));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_size(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t total = 1;
  bool known = true;
  for (size_t i = 0; i < x->sig.rank; i++) {
    nimble_dim_t d = imp_resolve(c, x->sig.dims[i]);
    if (d.kind != NIMBLE_DIM_CONST || __builtin_mul_overflow(total, d.value, &total)) known = false;
  }
  if (known) {
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &total, true, &r));
    return imp_define(c, n, 0, r);
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &x, NULL, 0, &r));
  nimble_named_attr_t at[2] = {imp_attr_ints("axes", NULL, 0), imp_attr_int("keepdims", 0)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "prod", 1, &r, at, 2, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_gather(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *idx, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &idx));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "axis", 0, &axis));
  int64_t iv[IMP_MAX_KNOWN];
  size_t ni;
  if (x->known && x->sig.rank == 1 && (axis == 0 || axis == -1) && idx->sig.rank <= 1 &&
      imp_const_ints(idx, iv, IMP_MAX_KNOWN, &ni)) {
    nimble_dim_t k[IMP_MAX_KNOWN];
    bool ok = true;
    for (size_t i = 0; i < ni; i++) {
      int64_t j = iv[i] < 0 ? iv[i] + (int64_t)x->nknown : iv[i];
      if (j < 0 || j >= (int64_t)x->nknown) {
        ok = false;
        break;
      }
      k[i] = x->known[j];
    }
    if (ok) {
      NIMBLE_RETURN_IF_ERROR(fold_known(c, x->sig.dtype, idx->sig.rank == 0, k, ni, &r));
      if (r) return imp_define(c, n, 0, r);
      nimble_named_attr_t a = imp_attr_int("axis", axis);
      imp_val *args[2] = {x, idx};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, args, &a, 1, &r));
      NIMBLE_RETURN_IF_ERROR(set_known(c, r, k, ni));
      return imp_define(c, n, 0, r);
    }
  }
  nimble_named_attr_t a = imp_attr_int("axis", axis);
  imp_val *args[2] = {x, idx};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, args, &a, 1, &r));
  return imp_define(c, n, 0, r);
}

/* Axes from the attribute (older opsets) or a constant input. */
static nimble_status_t axes_of(imp_ctx *c, const nimble_onnx_node *n, int64_t input_from_opset, size_t input,
                               int64_t *axes, size_t *na, bool *given) {
  *na = 0;
  *given = false;
  if (n->opset < input_from_opset) {
    const int64_t *v;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "axes", &v, na));
    if (*na > NIMBLE_MAX_RANK) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'axes' has %zu values", *na);
    if (*na) memcpy(axes, v, *na * sizeof *axes);
    *given = nimble_onnx_node_attr(n, "axes") != NULL;
    return nimble_ok();
  }
  imp_val *a;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, input, &a));
  if (!a) return nimble_ok();
  if (!imp_const_ints(a, axes, NIMBLE_MAX_RANK, na))
    return imp_err(NIMBLE_UNIMPLEMENTED, "input 'axes' must be a constant");
  *given = true;
  return nimble_ok();
}

/* Input `input` when it is given and not a constant (a run-time tensor),
 * else NULL. */
static nimble_status_t runtime_input(imp_ctx *c, const nimble_onnx_node *n, size_t input, imp_val **out) {
  int64_t v[IMP_MAX_KNOWN];
  size_t cnt;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, input, out));
  if (*out && imp_const_ints(*out, v, IMP_MAX_KNOWN, &cnt)) *out = NULL;
  if (*out && !(*out)->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "input %zu has no known type", input);
  return nimble_ok();
}

/* op(x, t) for a run-time tensor t (dyn_expand_dims, dyn_squeeze, ...). */
static nimble_status_t emit_dyn(imp_ctx *c, const nimble_onnx_node *n, const char *op, imp_val *x, imp_val *t) {
  imp_val *args[2] = {x, t}, *r;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, op, 2, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static nimble_status_t cv_unsqueeze(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r, *rt = NULL;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (n->opset >= 13) NIMBLE_RETURN_IF_ERROR(runtime_input(c, n, 1, &rt));
  if (rt) return emit_dyn(c, n, "dyn_expand_dims", x, rt);
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na;
  bool given;
  NIMBLE_RETURN_IF_ERROR(axes_of(c, n, 13, 1, axes, &na, &given));
  if (!na) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs axes");
  int64_t out_rank = (int64_t)(x->sig.rank + na);
  if (out_rank > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "result rank %" PRId64 " exceeds %d", out_rank, NIMBLE_MAX_RANK);
  for (size_t i = 0; i < na; i++) {
    if (axes[i] < -out_rank || axes[i] >= out_rank)
      return imp_err(NIMBLE_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for rank %" PRId64, axes[i], out_rank);
    if (axes[i] < 0) axes[i] += out_rank;
  }
  qsort(axes, na, sizeof *axes, cmp_i64);
  for (size_t i = 1; i < na; i++)
    if (axes[i] == axes[i - 1]) return imp_err(NIMBLE_INVALID_ARGUMENT, "axis %" PRId64 " repeats", axes[i]);
  if (x->known && x->sig.rank == 0) {
    NIMBLE_RETURN_IF_ERROR(fold_known(c, x->sig.dtype, false, x->known, x->nknown, &r));
    if (r && na == 1) return imp_define(c, n, 0, r);
  }
  r = x;
  for (size_t i = 0; i < na; i++) {
    nimble_named_attr_t a = imp_attr_int("axis", axes[i]);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand_dims", 1, &r, &a, 1, &r));
  }
  if (x->known && x->sig.rank + na == 1) NIMBLE_RETURN_IF_ERROR(set_known(c, r, x->known, x->nknown));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_squeeze(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r, *rt = NULL;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  if (n->opset >= 13) NIMBLE_RETURN_IF_ERROR(runtime_input(c, n, 1, &rt));
  if (rt) return emit_dyn(c, n, "dyn_squeeze", x, rt);
  int64_t axes[NIMBLE_MAX_RANK];
  size_t na;
  bool given;
  NIMBLE_RETURN_IF_ERROR(axes_of(c, n, 13, 1, axes, &na, &given));
  if (x->known && x->sig.rank == 1 && x->nknown == 1) {
    NIMBLE_RETURN_IF_ERROR(fold_known(c, x->sig.dtype, true, x->known, 1, &r));
    if (r) return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t a = imp_attr_ints("axes", axes, na);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "squeeze", 1, &x, &a, 1, &r));
  if (x->known && r->has_sig && r->sig.rank <= 1) NIMBLE_RETURN_IF_ERROR(set_known(c, r, x->known, x->nknown));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_concat(imp_ctx *c, const nimble_onnx_node *n) {
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "axis", &axis));
  imp_val *args[64], *r;
  size_t na = 0;
  bool known = true;
  nimble_dim_t k[IMP_MAX_KNOWN];
  size_t nk = 0;
  for (size_t i = 0; i < n->n_inputs; i++) {
    imp_val *v;
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, i, &v));
    if (!v) continue;
    if (!v->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "input %zu has no known type", i);
    if (na == 64) return imp_err(NIMBLE_OUT_OF_RANGE, "more than 64 inputs");
    args[na++] = v;
    if (!v->known || v->sig.rank != 1 || nk + v->nknown > IMP_MAX_KNOWN) known = false;
    else {
      memcpy(k + nk, v->known, v->nknown * sizeof *k);
      nk += v->nknown;
    }
  }
  if (!na) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs at least one input");
  if (known) {
    NIMBLE_RETURN_IF_ERROR(fold_known(c, args[0]->sig.dtype, false, k, nk, &r));
    if (r) return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t a = imp_attr_int("axis", axis);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "concatenate", na, args, &a, 1, &r));
  if (known) NIMBLE_RETURN_IF_ERROR(set_known(c, r, k, nk));
  return imp_define(c, n, 0, r);
}

/* Reshape: a constant shape becomes `reshape`; a shape known element by
 * element keeps symbolic dims by copying them (0) where they sit in the
 * input at the same position, or inferring one (-1); otherwise
 * `dyn_reshape`. */
static nimble_status_t cv_reshape(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *shape, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t allowzero;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "allowzero", 0, &allowzero));
  int64_t spec[NIMBLE_MAX_RANK];
  size_t ns;
  if (n->opset < 5) {
    const int64_t *v;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "shape", &v, &ns));
    if (ns > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "shape has %zu dims", ns);
    if (ns) memcpy(spec, v, ns * sizeof *spec); /* no attribute: v is NULL (found by the fuzzer) */
    nimble_named_attr_t a = imp_attr_ints("newshape", spec, ns);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &x, &a, 1, &r));
    return imp_define(c, n, 0, r);
  }
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &shape));
  if (shape->known && shape->nknown <= NIMBLE_MAX_RANK) {
    ns = shape->nknown;
    bool ok = true, used_infer = false;
    for (size_t i = 0; i < ns && ok; i++) {
      nimble_dim_t d = imp_resolve(c, shape->known[i]);
      if (d.kind == NIMBLE_DIM_CONST) {
        if (d.value == -1) {
          if (used_infer) ok = false;
          used_infer = true;
        }
        if (d.value == 0 && allowzero) ok = false; /* a literal 0 dim */
        spec[i] = d.value;
        continue;
      }
      if (d.kind == NIMBLE_DIM_VAR && i < x->sig.rank && nimble_dim_same(imp_resolve(c, x->sig.dims[i]), d)) {
        spec[i] = 0;
        continue;
      }
      if (used_infer) ok = false;
      used_infer = true;
      spec[i] = -1;
    }
    if (ok) {
      nimble_named_attr_t a = imp_attr_ints("newshape", spec, ns);
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &x, &a, 1, &r));
      return imp_define(c, n, 0, r);
    }
  }
  if (allowzero) return imp_err(NIMBLE_UNIMPLEMENTED, "allowzero=1 with a run-time shape is not supported");
  imp_val *args[2] = {x, shape};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_reshape", 2, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_flatten(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "axis", 1, &axis));
  if (axis < 0) axis += (int64_t)x->sig.rank;
  if (axis < 0 || axis > (int64_t)x->sig.rank)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "axis out of range for rank %zu", x->sig.rank);
  nimble_named_attr_t a = imp_attr_int("axis", axis);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "flatten", 1, &x, &a, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_transpose(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  const int64_t *perm;
  size_t np;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "perm", &perm, &np));
  nimble_named_attr_t a = imp_attr_ints("axes", perm, np);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "transpose", 1, &x, &a, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_cast(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t to;
  nimble_dtype_t dt;
  if (strcmp(n->op_type, "CastLike") == 0) {
    imp_val *like;
    NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &like));
    dt = like->sig.dtype;
  } else {
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "to", &to));
    NIMBLE_RETURN_IF_ERROR(imp_dtype((int)to, &dt));
  }
  if (x->known && nimble_dtype_is_int(dt)) {
    NIMBLE_RETURN_IF_ERROR(fold_known(c, dt, x->sig.rank == 0, x->known, x->nknown, &r));
    if (r) return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t a = imp_attr_str("dtype", nimble_dtype_name(dt));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &x, &a, 1, &r));
  if (x->known && nimble_dtype_is_int(dt)) NIMBLE_RETURN_IF_ERROR(set_known(c, r, x->known, x->nknown));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_constant_of_shape(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *shape, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &shape));
  const nimble_onnx_tensor_t *t;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_tensor(n, "value", &t));
  nimble_dtype_t dt = NIMBLE_DTYPE_FLOAT32;
  double value = 0;
  if (t) {
    NIMBLE_RETURN_IF_ERROR(imp_dtype(t->dtype, &dt));
    if (t->count != 1) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'value' must have one element");
    imp_val *tv;
    NIMBLE_RETURN_IF_ERROR(imp_const(c, dt, 0, NULL, t->data, &tv));
    if (!imp_const_double(tv, &value)) return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute 'value' is unreadable");
  }
  int64_t dims[NIMBLE_MAX_RANK];
  if (shape->known && shape->nknown <= 1 && all_const(c, shape->known, shape->nknown, dims) &&
      nimble_dtype_is_int(dt) && (shape->nknown == 0 || (dims[0] >= 0 && dims[0] <= IMP_MAX_KNOWN))) {
    /* A small integer vector (shape arithmetic): a constant, tracked. */
    int64_t cnt = shape->nknown ? dims[0] : 1;
    int64_t vals[IMP_MAX_KNOWN];
    for (int64_t i = 0; i < cnt; i++) vals[i] = (int64_t)value;
    nimble_dim_t k[IMP_MAX_KNOWN];
    for (int64_t i = 0; i < cnt; i++) k[i] = nimble_dim_const(vals[i]);
    NIMBLE_RETURN_IF_ERROR(fold_known(c, dt, shape->nknown == 0, k, (size_t)cnt, &r));
    if (r) return imp_define(c, n, 0, r);
  }
  if (shape->known && shape->nknown <= NIMBLE_MAX_RANK && all_const(c, shape->known, shape->nknown, dims)) {
    nimble_named_attr_t at[3] = {imp_attr_ints("shape", dims, shape->nknown),
                                 imp_attr_str("dtype", nimble_dtype_name(dt)), imp_attr_float("fill_value", value)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "full", 0, NULL, at, 3, &r));
    return imp_define(c, n, 0, r);
  }
  nimble_named_attr_t at[2] = {imp_attr_str("dtype", nimble_dtype_name(dt)), imp_attr_float("value", value)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "constant_of_shape", 1, &shape, at, 2, &r));
  if (shape->known && r->has_sig && r->sig.rank == shape->nknown)
    for (size_t i = 0; i < shape->nknown; i++) r->sig.dims[i] = imp_resolve(c, shape->known[i]);
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_range(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[3], *r;
  for (size_t i = 0; i < 3; i++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, i, &a[i]));
  int64_t v[3];
  size_t cnt;
  bool consts = nimble_dtype_is_int(a[0]->sig.dtype);
  for (size_t i = 0; i < 3 && consts; i++) consts = imp_const_ints(a[i], &v[i], 1, &cnt) && cnt == 1;
  int64_t span;
  if (consts && v[2] != 0 && v[2] != INT64_MIN && !__builtin_sub_overflow(v[1], v[0], &span)) {
    /* ceil(span / step) elements when span and step agree in sign. */
    int64_t len = 0, step = v[2];
    if (step > 0 && span > 0) len = span / step + (span % step != 0);
    if (step < 0 && span < 0 && span != INT64_MIN) len = (-span) / (-step) + ((-span) % (-step) != 0);
    if (len <= 4096 && a[0]->sig.dtype == NIMBLE_DTYPE_INT64) {
      int64_t *vals = nimble_arena_calloc(c->arena, len ? (size_t)len : 1, sizeof *vals);
      if (!vals) return NIMBLE_OOM_IN("importing");
      for (int64_t i = 0; i < len; i++) vals[i] = v[0] + i * v[2];
      NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, (size_t)len, vals, false, &r));
      return imp_define(c, n, 0, r);
    }
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "arange", 3, a, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_expand(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *shape, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &shape));
  int64_t dims[NIMBLE_MAX_RANK];
  if (shape->known && shape->nknown <= NIMBLE_MAX_RANK && all_const(c, shape->known, shape->nknown, dims)) {
    nimble_named_attr_t a = imp_attr_ints("shape", dims, shape->nknown);
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "broadcast_to", 1, &x, &a, 1, &r));
    return imp_define(c, n, 0, r);
  }
  imp_val *args[2] = {x, shape};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "expand", 2, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_slice(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t b[NIMBLE_MAX_RANK], e[NIMBLE_MAX_RANK], ax[NIMBLE_MAX_RANK], st[NIMBLE_MAX_RANK];
  size_t nb = 0, ne = 0, na = 0, nst = 0;
  bool consts = true;
  imp_val *in[5] = {x, NULL, NULL, NULL, NULL};
  if (n->opset < 10) {
    const int64_t *v;
    /* Slice-1 requires both (fuzz: a model without them sliced nothing). */
    if (!nimble_onnx_node_attr(n, "starts") || !nimble_onnx_node_attr(n, "ends"))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "attributes 'starts' and 'ends' are required before opset 10");
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "starts", &v, &nb));
    if (nb > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "too many starts");
    if (nb) memcpy(b, v, nb * sizeof *b); /* v is NULL when absent */
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "ends", &v, &ne));
    if (ne > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "too many ends");
    if (ne) memcpy(e, v, ne * sizeof *e);
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "axes", &v, &na));
    if (na > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "too many axes");
    if (na) memcpy(ax, v, na * sizeof *ax);
  } else {
    for (size_t i = 1; i < 5; i++) NIMBLE_RETURN_IF_ERROR(imp_input(c, n, i, &in[i]));
    if (!in[1] || !in[2]) return imp_err(NIMBLE_INVALID_ARGUMENT, "inputs 'starts' and 'ends' are required");
    consts = imp_const_ints(in[1], b, NIMBLE_MAX_RANK, &nb) && imp_const_ints(in[2], e, NIMBLE_MAX_RANK, &ne) &&
             (!in[3] || imp_const_ints(in[3], ax, NIMBLE_MAX_RANK, &na)) &&
             (!in[4] || imp_const_ints(in[4], st, NIMBLE_MAX_RANK, &nst));
  }
  if (consts) {
    if (nb != ne || (na && na != nb) || (nst && nst != nb))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "starts, ends, axes and steps differ in length");
    for (size_t i = 0; i < nst; i++)
      if (st[i] == 0) return imp_err(NIMBLE_INVALID_ARGUMENT, "step %zu is 0", i);
    /* Slicing a tracked 1-D value slices what is known of it. */
    if (x->known && x->sig.rank == 1 && nb == 1) {
      int64_t len = (int64_t)x->nknown, step = nst ? st[0] : 1, s0 = b[0], e0 = e[0];
      if (s0 < 0) s0 += len;
      if (e0 < 0) e0 += len;
      nimble_dim_t k[IMP_MAX_KNOWN];
      size_t nk = 0;
      /* Steps may be huge: advance without overflowing. */
      if (step > 0) {
        if (s0 < 0) s0 = 0;
        if (e0 > len) e0 = len;
        for (int64_t i = s0; i < e0;) {
          k[nk++] = x->known[i];
          if (step >= e0 - i) break;
          i += step;
        }
      } else {
        if (s0 > len - 1) s0 = len - 1;
        if (e0 < -1) e0 = -1;
        for (int64_t i = s0; i > e0;) {
          k[nk++] = x->known[i];
          if (step == INT64_MIN || -step >= i - e0) break;
          i += step;
        }
      }
      NIMBLE_RETURN_IF_ERROR(fold_known(c, x->sig.dtype, false, k, nk, &r));
      if (r) return imp_define(c, n, 0, r);
      nimble_named_attr_t at[4] = {imp_attr_ints("begin", b, nb), imp_attr_ints("end", e, ne),
                                   imp_attr_ints("strides", st, nst), imp_attr_ints("axes", ax, na)};
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, &x, at, 4, &r));
      NIMBLE_RETURN_IF_ERROR(set_known(c, r, k, nk));
      return imp_define(c, n, 0, r);
    }
    nimble_named_attr_t at[4] = {imp_attr_ints("begin", b, nb), imp_attr_ints("end", e, ne),
                                 imp_attr_ints("strides", st, nst), imp_attr_ints("axes", ax, na)};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "strided_slice", 1, &x, at, 4, &r));
    return imp_define(c, n, 0, r);
  }
  /* Run-time bounds: dyn_strided_slice takes begin, end, strides, axes. */
  imp_val *args[5] = {x, in[1], in[2], in[4], in[3]};
  size_t nargs = 3;
  if (in[4] || in[3]) nargs = 4;
  if (in[3]) nargs = 5;
  if (nargs >= 4 && !in[4]) {
    nimble_dim_t len = in[1]->has_sig && in[1]->sig.rank == 1 ? imp_resolve(c, in[1]->sig.dims[0]) : nimble_dim_any();
    if (len.kind != NIMBLE_DIM_CONST || len.value > NIMBLE_MAX_RANK)
      return imp_err(NIMBLE_UNIMPLEMENTED, "run-time starts of unknown length with axes but no steps");
    int64_t ones[NIMBLE_MAX_RANK];
    for (int64_t i = 0; i < len.value; i++) ones[i] = 1;
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, (size_t)len.value, ones, false, &args[3]));
  }
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_strided_slice", nargs, args, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_split(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *outs[NIMBLE_MAX_OUTPUTS];
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "axis", 0, &axis));
  int64_t sizes[NIMBLE_MAX_OUTPUTS];
  size_t ns = 0;
  if (n->opset < 13) {
    const int64_t *v;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, "split", &v, &ns));
    if (ns > NIMBLE_MAX_OUTPUTS) return imp_err(NIMBLE_OUT_OF_RANGE, "too many parts");
    if (ns) memcpy(sizes, v, ns * sizeof *sizes);
  } else {
    imp_val *s;
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &s));
    if (s && !imp_const_ints(s, sizes, NIMBLE_MAX_OUTPUTS, &ns)) {
      /* Sizes known only at run time; their count is the outputs'. */
      if (!s->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "input 'split' has no known type");
      imp_val *args[2] = {x, s};
      nimble_named_attr_t aa = imp_attr_int("axis", axis);
      size_t nout;
      NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "dyn_split", 2, args, &aa, 1, outs, &nout));
      if (nout != n->n_outputs)
        return imp_err(NIMBLE_INVALID_ARGUMENT, "%zu split sizes for %zu outputs", nout, n->n_outputs);
      for (size_t i = 0; i < nout; i++) NIMBLE_RETURN_IF_ERROR(imp_define(c, n, i, outs[i]));
      return nimble_ok();
    }
  }
  if (ns && ns != n->n_outputs)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "%zu split sizes for %zu outputs", ns, n->n_outputs);
  nimble_named_attr_t at[2] = {imp_attr_int("axis", axis),
                               ns ? imp_attr_ints("sizes", sizes, ns) : imp_attr_int("sections", (int64_t)n->n_outputs)};
  size_t nout;
  NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "split", 1, &x, at, 2, outs, &nout));
  for (size_t i = 0; i < nout && i < n->n_outputs; i++) NIMBLE_RETURN_IF_ERROR(imp_define(c, n, i, outs[i]));
  return nimble_ok();
}

static nimble_status_t cv_tile(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *reps, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &reps));
  int64_t v[NIMBLE_MAX_RANK];
  size_t nv;
  if (!imp_const_ints(reps, v, NIMBLE_MAX_RANK, &nv)) return emit_dyn(c, n, "dyn_tile", x, reps);
  nimble_named_attr_t a = imp_attr_ints("reps", v, nv);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "tile", 1, &x, &a, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_pad(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  const char *mode;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "mode", "constant", &mode));
  int64_t pads[2 * NIMBLE_MAX_RANK];
  size_t np = 0;
  double value = 0;
  if (n->opset < 11) {
    const int64_t *v;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, n->opset < 2 ? "paddings" : "pads", &v, &np));
    if (np > 2 * NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "too many pads");
    if (np) memcpy(pads, v, np * sizeof *pads); /* an absent attribute is (NULL, 0) */
    float f;
    NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_float(n, "value", 0.0f, &f));
    value = f;
  } else {
    imp_val *p, *cv, *axes;
    NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &p));
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 2, &cv));
    NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 3, &axes));
    if (axes) return imp_err(NIMBLE_UNIMPLEMENTED, "input 'axes' is not supported");
    if (!imp_const_ints(p, pads, 2 * NIMBLE_MAX_RANK, &np) || (cv && !imp_const_double(cv, &value))) {
      /* Pads or value known only at run time. */
      imp_val *args[3] = {x, p, cv}, *r2;
      if (cv && cv->has_sig && cv->sig.rank == 1) NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, cv, &args[2]));
      nimble_named_attr_t ma = imp_attr_str("mode", mode);
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "dyn_pad", cv ? 3 : 2, args, &ma, 1, &r2));
      return imp_define(c, n, 0, r2);
    }
  }
  if (np != 2 * x->sig.rank)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "%zu pads for rank %zu", np, x->sig.rank);
  nimble_named_attr_t at[3] = {imp_attr_ints("pads", pads, np), imp_attr_float("value", value), imp_attr_str("mode", mode)};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "pad", 1, &x, at, 3, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_nonzero(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "nonzero", 1, &x, NULL, 0, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_gather_nd(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *a[2], *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &a[0]));
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &a[1]));
  int64_t bd;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "batch_dims", 0, &bd));
  nimble_named_attr_t at = imp_attr_int("batch_dims", bd);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "gather_nd", 2, a, &at, 1, &r));
  return imp_define(c, n, 0, r);
}

static nimble_status_t cv_topk(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *x, *k = NULL, *outs[2];
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t axis, largest, sorted, kk = -1;
  NIMBLE_RETURN_IF_ERROR(get_int(n, "axis", -1, &axis));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "largest", 1, &largest));
  NIMBLE_RETURN_IF_ERROR(get_int(n, "sorted", 1, &sorted));
  if (n->opset < 10) NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "k", &kk));
  else {
    NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 1, &k));
    int64_t v[1];
    size_t nv;
    if (imp_const_ints(k, v, 1, &nv) && nv == 1) {
      kk = v[0];
      k = NULL;
    }
  }
  nimble_named_attr_t at[4] = {imp_attr_int("k", kk), imp_attr_int("axis", axis),
                               imp_attr_int("largest", largest), imp_attr_int("sorted", sorted)};
  imp_val *args[2] = {x, k};
  size_t nout;
  NIMBLE_RETURN_IF_ERROR(imp_emit_multi(c, "topk", k ? 2 : 1, args, at, 4, outs, &nout));
  NIMBLE_RETURN_IF_ERROR(imp_define(c, n, 0, outs[0]));
  return imp_define(c, n, 1, outs[1]);
}

/* DepthToSpace / SpaceToDepth as reshape, transpose, reshape (static). */
static nimble_status_t space_depth(imp_ctx *c, const nimble_onnx_node *n, bool to_space) {
  imp_val *x, *r;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &x));
  int64_t bs;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "blocksize", &bs));
  const char *mode;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_string(n, "mode", "DCR", &mode));
  if (x->sig.rank != 4) return imp_err(NIMBLE_INVALID_ARGUMENT, "input must have rank 4");
  int64_t d[4];
  for (int i = 0; i < 4; i++) {
    nimble_dim_t dd = imp_resolve(c, x->sig.dims[i]);
    if (dd.kind != NIMBLE_DIM_CONST) return imp_err(NIMBLE_UNIMPLEMENTED, "needs static dims");
    if (dd.value > ((int64_t)1 << 30)) return imp_err(NIMBLE_OUT_OF_RANGE, "dim %" PRId64 " is too large", dd.value);
    d[i] = dd.value;
  }
  if (bs <= 0 || bs > (1 << 20)) return imp_err(NIMBLE_INVALID_ARGUMENT, "blocksize %" PRId64 " is out of range", bs);
  int64_t s1[6], perm[6], s2[4];
  if (to_space) {
    if (d[1] % (bs * bs)) return imp_err(NIMBLE_INVALID_ARGUMENT, "channels not divisible by blocksize^2");
    int64_t cc = d[1] / (bs * bs);
    if (strcmp(mode, "CRD") == 0) {
      int64_t a[6] = {d[0], cc, bs, bs, d[2], d[3]}, p[6] = {0, 1, 4, 2, 5, 3};
      memcpy(s1, a, sizeof a); memcpy(perm, p, sizeof p);
    } else {
      int64_t a[6] = {d[0], bs, bs, cc, d[2], d[3]}, p[6] = {0, 3, 4, 1, 5, 2};
      memcpy(s1, a, sizeof a); memcpy(perm, p, sizeof p);
    }
    int64_t o[4] = {d[0], cc, d[2] * bs, d[3] * bs};
    memcpy(s2, o, sizeof o);
  } else {
    if (d[2] % bs || d[3] % bs) return imp_err(NIMBLE_INVALID_ARGUMENT, "spatial dims not divisible by blocksize");
    int64_t a[6] = {d[0], d[1], d[2] / bs, bs, d[3] / bs, bs}, p[6] = {0, 3, 5, 1, 2, 4};
    memcpy(s1, a, sizeof a); memcpy(perm, p, sizeof p);
    int64_t o[4] = {d[0], d[1] * bs * bs, d[2] / bs, d[3] / bs};
    memcpy(s2, o, sizeof o);
  }
  nimble_named_attr_t a1 = imp_attr_ints("newshape", s1, 6), a2 = imp_attr_ints("axes", perm, 6),
                      a3 = imp_attr_ints("newshape", s2, 4);
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &x, &a1, 1, &r));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "transpose", 1, &r, &a2, 1, &r));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "reshape", 1, &r, &a3, 1, &r));
  return imp_define(c, n, 0, r);
}
static nimble_status_t cv_depth_to_space(imp_ctx *c, const nimble_onnx_node *n) { return space_depth(c, n, true); }
static nimble_status_t cv_space_to_depth(imp_ctx *c, const nimble_onnx_node *n) { return space_depth(c, n, false); }

const imp_converter imp_converters_shape[] = {
    {"Identity", cv_identity}, {"Constant", cv_constant}, {"Shape", cv_shape}, {"Size", cv_size},
    {"Gather", cv_gather}, {"Unsqueeze", cv_unsqueeze}, {"Squeeze", cv_squeeze},
    {"Concat", cv_concat}, {"Reshape", cv_reshape}, {"Flatten", cv_flatten},
    {"Transpose", cv_transpose}, {"Cast", cv_cast}, {"CastLike", cv_cast},
    {"ConstantOfShape", cv_constant_of_shape}, {"Range", cv_range}, {"Expand", cv_expand},
    {"Slice", cv_slice}, {"Split", cv_split}, {"Tile", cv_tile}, {"Pad", cv_pad},
    {"NonZero", cv_nonzero}, {"GatherND", cv_gather_nd}, {"TopK", cv_topk},
    {"DepthToSpace", cv_depth_to_space}, {"SpaceToDepth", cv_space_to_depth},
};
const size_t imp_converters_shape_count = sizeof imp_converters_shape / sizeof imp_converters_shape[0];
