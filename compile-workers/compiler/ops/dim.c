/* The dimension algebra shared by type relations and shape functions, and
 * the small helpers relations use. In typing mode variables resolve and
 * bind through the substitution; in concrete mode every dim is a constant. */
#include <inttypes.h>
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/typing.h"
#include "ops/op_internal.h"

bool nimble_dim_ctx_is_concrete(const nimble_dim_ctx *ctx) { return ctx->subst == NULL; }

nimble_dim_t nimble_dim_resolve(nimble_dim_ctx *ctx, nimble_dim_t d) {
  if (ctx->subst && d.kind == NIMBLE_DIM_VAR) return nimble_subst_resolve_dim(ctx->subst, d);
  return d;
}

static void dim_str(nimble_dim_t d, char *buf, size_t size) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  nimble_print_dim(&b, d);
  nimble_strbuf_copy_truncated(&b, buf, size);
  nimble_strbuf_deinit(&b);
}

nimble_status_t nimble_dim_unify(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                                 nimble_dim_t *out) {
  a = nimble_dim_resolve(ctx, a);
  b = nimble_dim_resolve(ctx, b);
  if (a.kind == NIMBLE_DIM_ANY || b.kind == NIMBLE_DIM_ANY) {
    /* Any against anything stays Any: the shape function checks at run
     * time what the types cannot know. */
    *out = nimble_dim_any();
    return nimble_ok();
  }
  if (a.kind == NIMBLE_DIM_CONST && b.kind == NIMBLE_DIM_CONST) {
    if (a.value != b.value)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dimension %" PRId64 " does not match %" PRId64,
                                a.value, b.value);
    *out = a;
    return nimble_ok();
  }
  if (!ctx->subst) {
    char x[32], y[32];
    dim_str(a, x, sizeof x);
    dim_str(b, y, sizeof y);
    return nimble_status_make(NIMBLE_INTERNAL, "symbolic dimension %s or %s in a shape function",
                              x, y);
  }
  if (a.kind == NIMBLE_DIM_VAR && b.kind == NIMBLE_DIM_VAR && a.var_id == b.var_id) {
    *out = a;
    return nimble_ok();
  }
  if (a.kind == NIMBLE_DIM_VAR) {
    NIMBLE_RETURN_IF_ERROR(nimble_subst_bind_dim(ctx->subst, a.var_id, b));
    *out = b;
    return nimble_ok();
  }
  NIMBLE_RETURN_IF_ERROR(nimble_subst_bind_dim(ctx->subst, b.var_id, a));
  *out = a;
  return nimble_ok();
}

static bool is_one(nimble_dim_t d) { return d.kind == NIMBLE_DIM_CONST && d.value == 1; }

nimble_status_t nimble_dim_broadcast(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                                     nimble_dim_t *out) {
  a = nimble_dim_resolve(ctx, a);
  b = nimble_dim_resolve(ctx, b);
  if (is_one(a)) {
    *out = b;
  } else if (is_one(b)) {
    *out = a;
  } else if (a.kind == NIMBLE_DIM_ANY) {
    /* Any with d gives d: if Any turns out 1 it broadcasts to d, and if it
     * is anything else it must be d. */
    *out = b;
  } else if (b.kind == NIMBLE_DIM_ANY) {
    *out = a;
  } else if (a.kind == NIMBLE_DIM_CONST && b.kind == NIMBLE_DIM_CONST) {
    if (a.value != b.value) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "dimension %" PRId64 " cannot broadcast with %" PRId64, a.value,
                                b.value);
    }
    *out = a;
  } else if (a.kind == NIMBLE_DIM_VAR && b.kind == NIMBLE_DIM_VAR) {
    /* n with m: either may be 1, so nothing is known statically. */
    *out = a.var_id == b.var_id ? a : nimble_dim_any();
  } else {
    /* A variable with a constant c != 1: the result is c (the variable is
     * 1 or c, checked at run time). */
    *out = a.kind == NIMBLE_DIM_CONST ? a : b;
  }
  return nimble_ok();
}

nimble_status_t nimble_sig_broadcast(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *a,
                                     const nimble_tensor_sig_t *b, nimble_tensor_sig_t *out) {
  size_t rank = a->rank > b->rank ? a->rank : b->rank;
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = a->dtype;
  r.rank = rank;
  for (size_t i = 0; i < rank; i++) {
    /* Right-aligned, as NumPy does. */
    nimble_dim_t da = i < rank - a->rank ? nimble_dim_const(1) : a->dims[i - (rank - a->rank)];
    nimble_dim_t db = i < rank - b->rank ? nimble_dim_const(1) : b->dims[i - (rank - b->rank)];
    nimble_status_t s = nimble_dim_broadcast(ctx, da, db, &r.dims[i]);
    if (s) {
      char x[160], y[160];
      nimble_status_free(s);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot broadcast %s with %s",
                                SIG_STR(a, x), SIG_STR(b, y));
    }
  }
  *out = r;
  return nimble_ok();
}

nimble_status_t nimble_dim_mul(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b,
                               nimble_dim_t *out) {
  a = nimble_dim_resolve(ctx, a);
  b = nimble_dim_resolve(ctx, b);
  if ((a.kind == NIMBLE_DIM_CONST && a.value == 0) || (b.kind == NIMBLE_DIM_CONST && b.value == 0)) {
    *out = nimble_dim_const(0);
  } else if (a.kind == NIMBLE_DIM_CONST && b.kind == NIMBLE_DIM_CONST) {
    if (a.value > INT64_MAX / b.value)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE,
                                "size %" PRId64 " x %" PRId64 " overflows 64 bits", a.value,
                                b.value);
    *out = nimble_dim_const(a.value * b.value);
  } else if (is_one(a)) {
    *out = b;
  } else if (is_one(b)) {
    *out = a;
  } else {
    *out = nimble_dim_any();
  }
  return nimble_ok();
}

nimble_dim_t nimble_dim_add(nimble_dim_ctx *ctx, nimble_dim_t a, nimble_dim_t b) {
  a = nimble_dim_resolve(ctx, a);
  b = nimble_dim_resolve(ctx, b);
  if (a.kind == NIMBLE_DIM_CONST && b.kind == NIMBLE_DIM_CONST && a.value <= INT64_MAX - b.value)
    return nimble_dim_const(a.value + b.value);
  if (a.kind == NIMBLE_DIM_CONST && a.value == 0) return b;
  if (b.kind == NIMBLE_DIM_CONST && b.value == 0) return a;
  return nimble_dim_any();
}

nimble_status_t nimble_axis_normalize(int64_t axis, size_t rank, size_t *out) {
  int64_t r = (int64_t)rank;
  if (axis < -r || axis >= r)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "axis %" PRId64 " is out of range for rank %zu",
                              axis, rank);
  *out = (size_t)(axis < 0 ? axis + r : axis);
  return nimble_ok();
}

char *nimble_tensor_sig_format(const nimble_tensor_sig_t *sig, char *buf, size_t size) {
  nimble_strbuf b;
  nimble_strbuf_init(&b);
  if (sig->rank == NIMBLE_RANK_UNKNOWN || sig->rank > NIMBLE_MAX_RANK) {
    nimble_strbuf_printf(&b, "Tensor[*, %s]", nimble_dtype_name(sig->dtype));
    nimble_strbuf_copy_truncated(&b, buf, size);
    nimble_strbuf_deinit(&b);
    return buf;
  }
  nimble_strbuf_puts(&b, "Tensor[(");
  for (size_t i = 0; i < sig->rank; i++) {
    if (i) nimble_strbuf_puts(&b, ", ");
    nimble_print_dim(&b, sig->dims[i]);
  }
  nimble_strbuf_printf(&b, "%s), %s]", sig->rank == 1 ? "," : "", nimble_dtype_name(sig->dtype));
  nimble_strbuf_copy_truncated(&b, buf, size);
  nimble_strbuf_deinit(&b);
  return buf;
}

nimble_status_t nimble_rel_unify_named(const nimble_rel_call_t *call, nimble_dim_t a, nimble_dim_t b,
                                       const char *what, const nimble_tensor_sig_t *x, const nimble_tensor_sig_t *y,
                                       nimble_dim_t *out) {
  nimble_status_t s = nimble_dim_unify(call->ctx, a, b, out);
  if (!s) return nimble_ok();
  char bx[160], by[160];
  nimble_status_t r = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s of %s and %s: %s", what,
                                         SIG_STR(x, bx), SIG_STR(y, by), nimble_status_message(s));
  nimble_status_free(s);
  return r;
}

nimble_status_t nimble_rel_expect_rank(const nimble_rel_call_t *call, size_t i, size_t lo,
                                       size_t hi) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  if (s->rank >= lo && s->rank <= hi) return nimble_ok();
  char buf[160];
  if (lo == hi)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must have rank %zu, got %s", i,
                              lo, SIG_STR(s, buf));
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must have rank %zu to %zu, got %s",
                            i, lo, hi, SIG_STR(s, buf));
}

nimble_status_t nimble_rel_expect_dtype_float(const nimble_rel_call_t *call, size_t i) {
  if (nimble_dtype_is_float(call->inputs[i].dtype)) return nimble_ok();
  char buf[160];
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must be a float tensor, got %s",
                            i, SIG_STR(&call->inputs[i], buf));
}

nimble_status_t nimble_rel_expect_dtype_int(const nimble_rel_call_t *call, size_t i) {
  if (nimble_dtype_is_int(call->inputs[i].dtype)) return nimble_ok();
  char buf[160];
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu must be an integer tensor, got %s",
                            i, SIG_STR(&call->inputs[i], buf));
}

nimble_status_t nimble_rel_expect_same_dtype(const nimble_rel_call_t *call, size_t i, size_t j) {
  if (call->inputs[i].dtype == call->inputs[j].dtype) return nimble_ok();
  char x[160], y[160];
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "inputs %zu and %zu differ in dtype: %s and %s",
                            i, j, SIG_STR(&call->inputs[i], x), SIG_STR(&call->inputs[j], y));
}

bool nimble_rel_value_int(const nimble_rel_call_t *call, size_t i, size_t k, int64_t *out) {
  if (!call->values || i >= call->num_inputs) return false;
  const nimble_input_value_t *v = &call->values[i];
  if (!v->data || k >= v->num_elements) return false;
  switch (v->dtype) {
    case NIMBLE_DTYPE_INT64: *out = ((const int64_t *)v->data)[k]; return true;
    case NIMBLE_DTYPE_INT32: *out = ((const int32_t *)v->data)[k]; return true;
    case NIMBLE_DTYPE_INT16: *out = ((const int16_t *)v->data)[k]; return true;
    case NIMBLE_DTYPE_INT8: *out = ((const int8_t *)v->data)[k]; return true;
    case NIMBLE_DTYPE_UINT8: *out = ((const uint8_t *)v->data)[k]; return true;
    case NIMBLE_DTYPE_UINT16:
    case NIMBLE_DTYPE_UINT32:
      *out = nimble_dtype_get_int(v->dtype, v->data, k);
      return true;
    case NIMBLE_DTYPE_UINT64: {
      uint64_t u;
      memcpy(&u, (const char *)v->data + 8 * k, 8);
      if (u > (uint64_t)INT64_MAX) return false; /* not an int64 value */
      *out = (int64_t)u;
      return true;
    }
    default: return false;
  }
}

bool nimble_rel_value_double(const nimble_rel_call_t *call, size_t i, size_t k, double *out) {
  if (!call->values || i >= call->num_inputs) return false;
  const nimble_input_value_t *v = &call->values[i];
  if (!v->data || k >= v->num_elements) return false;
  int64_t iv;
  switch (v->dtype) {
    case NIMBLE_DTYPE_FLOAT32: *out = ((const float *)v->data)[k]; return true;
    case NIMBLE_DTYPE_FLOAT64: *out = ((const double *)v->data)[k]; return true;
    case NIMBLE_DTYPE_FLOAT16:
    case NIMBLE_DTYPE_BFLOAT16:
    case NIMBLE_DTYPE_UINT64:
      *out = nimble_dtype_get_double(v->dtype, v->data, k);
      return true;
    default:
      if (!nimble_rel_value_int(call, i, k, &iv)) return false;
      *out = (double)iv;
      return true;
  }
}

nimble_status_t nimble_rel_dtype_attr(const nimble_rel_call_t *call, const char *attr,
                                      nimble_dtype_t *out) {
  const char *name = A_STRING(call, attr);
  if (nimble_dtype_from_name(name, strlen(name), out)) return nimble_ok();
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "attribute '%s' names no dtype: '%s'", attr,
                            name);
}
