/* The ONNX importer's driver: scopes, let chains, value tracking, graph
 * walking and @main. Operator converters live in import_ops_*.c. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "nimble/nir.h"

/* ---- status helpers ---- */

nimble_status_t imp_err(nimble_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nimble_status_t s = nimble_status_makev(code, fmt, ap);
  va_end(ap);
  return s;
}

nimble_status_t imp_dtype(int onnx_dtype, nimble_dtype_t *out) {
  switch (onnx_dtype) {
    case NIMBLE_ONNX_FLOAT: *out = NIMBLE_DTYPE_FLOAT32; return nimble_ok();
    case NIMBLE_ONNX_DOUBLE: *out = NIMBLE_DTYPE_FLOAT64; return nimble_ok();
    case NIMBLE_ONNX_FLOAT16: *out = NIMBLE_DTYPE_FLOAT16; return nimble_ok();
    case NIMBLE_ONNX_INT8: *out = NIMBLE_DTYPE_INT8; return nimble_ok();
    case NIMBLE_ONNX_INT16: *out = NIMBLE_DTYPE_INT16; return nimble_ok();
    case NIMBLE_ONNX_INT32: *out = NIMBLE_DTYPE_INT32; return nimble_ok();
    case NIMBLE_ONNX_INT64: *out = NIMBLE_DTYPE_INT64; return nimble_ok();
    case NIMBLE_ONNX_UINT8: *out = NIMBLE_DTYPE_UINT8; return nimble_ok();
    case NIMBLE_ONNX_BOOL: *out = NIMBLE_DTYPE_BOOL; return nimble_ok();
    case NIMBLE_ONNX_UINT16: *out = NIMBLE_DTYPE_UINT16; return nimble_ok();
    case NIMBLE_ONNX_UINT32: *out = NIMBLE_DTYPE_UINT32; return nimble_ok();
    case NIMBLE_ONNX_UINT64: *out = NIMBLE_DTYPE_UINT64; return nimble_ok();
    case NIMBLE_ONNX_BFLOAT16: *out = NIMBLE_DTYPE_BFLOAT16; return nimble_ok();
    default:
      return imp_err(NIMBLE_UNIMPLEMENTED, "element type %s is not supported",
                     nimble_onnx_dtype_name(onnx_dtype));
  }
}

/* ---- scopes: name -> value, open addressing, arena-allocated ---- */

struct imp_scope {
  imp_scope *parent;
  size_t cap, count;
  const char **keys;
  imp_val **vals;
};

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

nimble_status_t imp_scope_push(imp_ctx *c) {
  imp_scope *s = nimble_arena_calloc(c->arena, 1, sizeof *s);
  if (!s) return NIMBLE_OOM_IN("importing");
  s->cap = 64;
  s->keys = nimble_arena_calloc(c->arena, s->cap, sizeof *s->keys);
  s->vals = nimble_arena_calloc(c->arena, s->cap, sizeof *s->vals);
  if (!s->keys || !s->vals) return NIMBLE_OOM_IN("importing");
  s->parent = c->scope;
  c->scope = s;
  return nimble_ok();
}

void imp_scope_pop(imp_ctx *c) { c->scope = c->scope->parent; }

static imp_val *scope_get(const imp_scope *s, const char *name) {
  size_t i = hash_str(name) & (s->cap - 1);
  while (s->keys[i]) {
    if (strcmp(s->keys[i], name) == 0) return s->vals[i];
    i = (i + 1) & (s->cap - 1);
  }
  return NULL;
}

static bool scope_put(imp_scope *s, const char *name, imp_val *v) {
  size_t i = hash_str(name) & (s->cap - 1);
  while (s->keys[i]) {
    if (strcmp(s->keys[i], name) == 0) {
      s->vals[i] = v;
      return false;
    }
    i = (i + 1) & (s->cap - 1);
  }
  s->keys[i] = name;
  s->vals[i] = v;
  s->count++;
  return true;
}

nimble_status_t imp_scope_set(imp_ctx *c, const char *name, imp_val *v) {
  imp_scope *s = c->scope;
  if ((s->count + 1) * 2 > s->cap) {
    imp_scope grown = *s;
    grown.cap = s->cap * 2;
    grown.count = 0;
    grown.keys = nimble_arena_calloc(c->arena, grown.cap, sizeof *grown.keys);
    grown.vals = nimble_arena_calloc(c->arena, grown.cap, sizeof *grown.vals);
    if (!grown.keys || !grown.vals) return NIMBLE_OOM_IN("importing");
    for (size_t i = 0; i < s->cap; i++)
      if (s->keys[i]) scope_put(&grown, s->keys[i], s->vals[i]);
    *s = grown;
  }
  scope_put(s, name, v);
  return nimble_ok();
}

/* ---- values ---- */

imp_val *imp_val_new(imp_ctx *c, const nimble_expr *e, const nimble_tensor_sig_t *sig) {
  imp_val *v = nimble_arena_calloc(c->arena, 1, sizeof *v);
  if (!v) return NULL;
  v->expr = e;
  if (sig) {
    v->has_sig = true;
    v->sig = *sig;
  }
  return v;
}

nimble_dim_t imp_resolve(imp_ctx *c, nimble_dim_t d) { return nimble_subst_resolve_dim(c->subst, d); }

/* Integer elements (uint64 above INT64_MAX saturates: such a value is no
 * dim, index or axis anyway). */
static int64_t elem_as_int(nimble_dtype_t dt, const void *data, size_t k) {
  if (!nimble_dtype_is_int(dt) && dt != NIMBLE_DTYPE_BOOL) return 0;
  return nimble_dtype_get_int(dt, data, k);
}

nimble_status_t imp_const(imp_ctx *c, nimble_dtype_t dtype, size_t rank, const int64_t *dims,
                          const void *data, imp_val **out) {
  if (rank > NIMBLE_MAX_RANK)
    return imp_err(NIMBLE_OUT_OF_RANGE, "constant of rank %zu, at most %d", rank, NIMBLE_MAX_RANK);
  const nimble_expr *e = nimble_ir_constant(c->arena, dtype, rank, dims, data, NULL);
  if (!e) return imp_err(NIMBLE_RESOURCE_EXHAUSTED, "constant too large or out of memory");
  /* Every NaN becomes the one NaN the text form has (`nan`): the sign and
   * payload bits of a NaN in the file mean nothing to any operator, and
   * keeping them made the printed module read back as a different one
   * (found by the importer's fuzzer). The data is this constant's own copy. */
  if (dtype == NIMBLE_DTYPE_FLOAT16 || dtype == NIMBLE_DTYPE_BFLOAT16) {
    void *own = (void *)e->u.constant.data;
    uint16_t qnan = dtype == NIMBLE_DTYPE_FLOAT16 ? 0x7e00 : 0x7fc0;
    for (size_t k = 0; k < e->u.constant.num_elements; k++)
      if (isnan(nimble_dtype_get_double(dtype, own, k))) memcpy((char *)own + 2 * k, &qnan, 2);
  }
  if (dtype == NIMBLE_DTYPE_FLOAT32 || dtype == NIMBLE_DTYPE_FLOAT64) {
    void *own = (void *)e->u.constant.data;
    for (size_t k = 0; k < e->u.constant.num_elements; k++) {
      if (dtype == NIMBLE_DTYPE_FLOAT32) {
        float f;
        memcpy(&f, (char *)own + 4 * k, 4);
        if (isnan(f)) f = (float)NAN, memcpy((char *)own + 4 * k, &f, 4);
      } else {
        double d;
        memcpy(&d, (char *)own + 8 * k, 8);
        if (isnan(d)) d = NAN, memcpy((char *)own + 8 * k, &d, 8);
      }
    }
  }
  nimble_tensor_sig_t sig;
  memset(&sig, 0, sizeof sig);
  sig.dtype = dtype;
  sig.rank = rank;
  for (size_t i = 0; i < rank; i++) sig.dims[i] = nimble_dim_const(dims[i]);
  imp_val *v = imp_val_new(c, e, &sig);
  if (!v) return NIMBLE_OOM_IN("importing");
  size_t count = e->u.constant.num_elements;
  if (nimble_dtype_is_int(dtype) && rank <= 1 && count <= IMP_MAX_KNOWN) {
    nimble_dim_t *k = nimble_arena_calloc(c->arena, count ? count : 1, sizeof *k);
    if (!k) return NIMBLE_OOM_IN("importing");
    for (size_t i = 0; i < count; i++) {
      int64_t x = elem_as_int(dtype, e->u.constant.data, i);
      /* Negative elements are not dims; keep them as Any-valued knowns
       * would lose them, so store the raw value in a const dim. */
      k[i] = nimble_dim_const(x);
    }
    v->known = k;
    v->nknown = count;
  }
  *out = v;
  return nimble_ok();
}

nimble_status_t imp_const_i64(imp_ctx *c, size_t n, const int64_t *vals, bool scalar, imp_val **out) {
  int64_t d = (int64_t)n;
  return imp_const(c, NIMBLE_DTYPE_INT64, scalar ? 0 : 1, &d, vals, out);
}

nimble_status_t imp_scalar(imp_ctx *c, nimble_dtype_t dtype, double x, imp_val **out) {
  uint8_t buf[8];
  if (nimble_dtype_is_int(dtype)) {
    /* Converting an out-of-range double to an integer is undefined. */
    double lo, hi;
    switch (dtype) {
      case NIMBLE_DTYPE_INT8: lo = -128; hi = 127; break;
      case NIMBLE_DTYPE_UINT8: lo = 0; hi = 255; break;
      case NIMBLE_DTYPE_INT16: lo = -32768; hi = 32767; break;
      case NIMBLE_DTYPE_UINT16: lo = 0; hi = 65535; break;
      case NIMBLE_DTYPE_INT32: lo = -2147483648.0; hi = 2147483647.0; break;
      case NIMBLE_DTYPE_UINT32: lo = 0; hi = 4294967295.0; break;
      case NIMBLE_DTYPE_UINT64: lo = 0; hi = 18446744073709549568.0; break;
      default: lo = -9223372036854775808.0; hi = 9223372036854774784.0; break;
    }
    if (!(x >= lo && x <= hi))
      return imp_err(NIMBLE_OUT_OF_RANGE, "value %g does not fit %s", x, nimble_dtype_name(dtype));
  }
  switch (dtype) {
    case NIMBLE_DTYPE_FLOAT32: { float f = (float)x; memcpy(buf, &f, 4); break; }
    case NIMBLE_DTYPE_FLOAT64: memcpy(buf, &x, 8); break;
    case NIMBLE_DTYPE_FLOAT16: { uint16_t h = nimble_f64_to_f16(x); memcpy(buf, &h, 2); break; }
    case NIMBLE_DTYPE_BFLOAT16: { uint16_t h = nimble_f32_to_bf16((float)x); memcpy(buf, &h, 2); break; }
    case NIMBLE_DTYPE_INT64: { int64_t v = (int64_t)x; memcpy(buf, &v, 8); break; }
    case NIMBLE_DTYPE_INT32: { int32_t v = (int32_t)x; memcpy(buf, &v, 4); break; }
    case NIMBLE_DTYPE_INT16: { int16_t v = (int16_t)x; memcpy(buf, &v, 2); break; }
    case NIMBLE_DTYPE_INT8: { int8_t v = (int8_t)x; memcpy(buf, &v, 1); break; }
    case NIMBLE_DTYPE_UINT8: { uint8_t v = (uint8_t)x; memcpy(buf, &v, 1); break; }
    case NIMBLE_DTYPE_UINT16: { uint16_t v = (uint16_t)x; memcpy(buf, &v, 2); break; }
    case NIMBLE_DTYPE_UINT32: { uint32_t v = (uint32_t)x; memcpy(buf, &v, 4); break; }
    case NIMBLE_DTYPE_UINT64: { uint64_t v = (uint64_t)x; memcpy(buf, &v, 8); break; }
    case NIMBLE_DTYPE_BOOL: buf[0] = x != 0; break;
    default: return imp_err(NIMBLE_INTERNAL, "bad dtype");
  }
  return imp_const(c, dtype, 0, NULL, buf, out);
}

bool imp_known_ints(const imp_val *v, int64_t *out, size_t cap, size_t *n) {
  if (!v->known || v->nknown > cap) return false;
  for (size_t i = 0; i < v->nknown; i++) {
    if (v->known[i].kind != NIMBLE_DIM_CONST) return false;
    out[i] = v->known[i].value;
  }
  *n = v->nknown;
  return true;
}

bool imp_const_ints(const imp_val *v, int64_t *out, size_t cap, size_t *n) {
  if (!v) return false;
  if (v->expr->kind == NIMBLE_EXPR_CONSTANT && nimble_dtype_is_int(v->expr->u.constant.dtype)) {
    const nimble_const_tensor_t *k = &v->expr->u.constant;
    if (k->num_elements > cap) return false;
    for (size_t i = 0; i < k->num_elements; i++) out[i] = elem_as_int(k->dtype, k->data, i);
    *n = k->num_elements;
    return true;
  }
  return imp_known_ints(v, out, cap, n);
}

bool imp_const_double(const imp_val *v, double *out) {
  if (!v || v->expr->kind != NIMBLE_EXPR_CONSTANT) return false;
  const nimble_const_tensor_t *k = &v->expr->u.constant;
  if (k->num_elements != 1) return false;
  switch (k->dtype) {
    case NIMBLE_DTYPE_FLOAT32: { float f; memcpy(&f, k->data, 4); *out = f; return true; }
    case NIMBLE_DTYPE_FLOAT64: memcpy(out, k->data, 8); return true;
    case NIMBLE_DTYPE_FLOAT16:
    case NIMBLE_DTYPE_BFLOAT16: *out = nimble_dtype_get_double(k->dtype, k->data, 0); return true;
    default:
      if (nimble_dtype_is_int(k->dtype) || k->dtype == NIMBLE_DTYPE_BOOL) {
        *out = (double)elem_as_int(k->dtype, k->data, 0);
        return true;
      }
      return false;
  }
}

/* ---- chains ---- */

const char *imp_unique_name(imp_ctx *c, const char *hint) {
  if (!c->names) {
    imp_scope *saved = c->scope;
    c->scope = NULL;
    nimble_status_t s = imp_scope_push(c);
    c->names = c->scope;
    c->scope = saved;
    if (s) {
      nimble_status_free(s);
      return NULL;
    }
  }
  const char *name = hint;
  for (unsigned k = 1; scope_get(c->names, name); k++) {
    name = nimble_arena_sprintf(c->arena, "%s_%u", hint, k);
    if (!name) return NULL;
  }
  imp_scope *saved = c->scope;
  c->scope = c->names;
  static imp_val used; /* any non-NULL marker */
  nimble_status_t s = imp_scope_set(c, name, &used);
  c->scope = saved;
  if (s) {
    nimble_status_free(s);
    return NULL;
  }
  return name;
}

nimble_status_t imp_bind(imp_ctx *c, const char *hint, const nimble_expr *value,
                         const nimble_tensor_sig_t *sig, imp_val **out) {
  imp_chain *ch = c->chain;
  if (ch->n == ch->cap) {
    size_t cap = ch->cap ? ch->cap * 2 : 32;
    const nimble_expr **vars = nimble_arena_calloc(c->arena, cap, sizeof *vars);
    const nimble_expr **vals = nimble_arena_calloc(c->arena, cap, sizeof *vals);
    if (!vars || !vals) return NIMBLE_OOM_IN("importing");
    if (ch->n) {
      memcpy(vars, ch->vars, ch->n * sizeof *vars);
      memcpy(vals, ch->values, ch->n * sizeof *vals);
    }
    ch->vars = vars;
    ch->values = vals;
    ch->cap = cap;
  }
  const char *name = imp_unique_name(c, hint && hint[0] ? hint : "t");
  const nimble_expr *var = name ? nimble_ir_var(c->arena, name, NULL, NULL) : NULL;
  if (!var) return NIMBLE_OOM_IN("importing");
  ch->vars[ch->n] = var;
  ch->values[ch->n] = value;
  ch->n++;
  imp_val *v = imp_val_new(c, var, sig);
  if (!v) return NIMBLE_OOM_IN("importing");
  *out = v;
  return nimble_ok();
}

const nimble_expr *imp_chain_close(imp_ctx *c, const imp_chain *ch, const nimble_expr *body) {
  for (size_t i = ch->n; i-- > 0;) {
    body = nimble_ir_let(c->arena, ch->vars[i], ch->values[i], body, NULL);
    if (!body) return NULL;
  }
  return body;
}

/* ---- attributes ---- */

nimble_named_attr_t imp_attr_int(const char *name, int64_t v) {
  nimble_named_attr_t a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.value.kind = NIMBLE_ATTR_INT;
  a.value.i = v;
  return a;
}
nimble_named_attr_t imp_attr_float(const char *name, double v) {
  nimble_named_attr_t a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.value.kind = NIMBLE_ATTR_FLOAT;
  a.value.f = v;
  return a;
}
nimble_named_attr_t imp_attr_ints(const char *name, const int64_t *v, size_t n) {
  nimble_named_attr_t a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.value.kind = NIMBLE_ATTR_INTS;
  a.value.ints = v;
  a.value.n = n;
  return a;
}
nimble_named_attr_t imp_attr_str(const char *name, const char *s) {
  nimble_named_attr_t a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.value.kind = NIMBLE_ATTR_STRING;
  a.value.s = s;
  return a;
}

/* ---- emitting operator calls ---- */

static nimble_status_t emit_common(imp_ctx *c, const char *opname, size_t nargs,
                                   imp_val *const *args, const nimble_named_attr_t *attrs,
                                   size_t nattrs, const nimble_expr **call,
                                   nimble_tensor_sig_t *res, size_t *nres, bool *typed) {
  const nimble_op *op = nimble_op_find(opname);
  if (!op) return imp_err(NIMBLE_INTERNAL, "operator '%s' is not registered", opname);
  if (nargs > 16) return imp_err(NIMBLE_OUT_OF_RANGE, "too many inputs (%zu)", nargs);
  const nimble_expr *exprs[16];
  nimble_tensor_sig_t sigs[16];
  nimble_input_value_t values[16];
  *typed = true;
  for (size_t i = 0; i < nargs; i++) {
    exprs[i] = args[i]->expr;
    memset(&values[i], 0, sizeof values[i]);
    if (!args[i]->has_sig) *typed = false;
    else sigs[i] = args[i]->sig;
    if (exprs[i]->kind == NIMBLE_EXPR_CONSTANT) {
      values[i].dtype = exprs[i]->u.constant.dtype;
      values[i].num_elements = exprs[i]->u.constant.num_elements;
      values[i].data = exprs[i]->u.constant.data;
    }
  }
  NIMBLE_RETURN_IF_ERROR(nimble_ir_call_op(c->arena, op, nargs, exprs, attrs, nattrs, NULL, call));
  *nres = 0;
  if (*typed) {
    nimble_rel_call_t rc = {op, &c->dctx, &(*call)->u.call.attrs, nargs, sigs, values};
    nimble_status_t s = op->relation(&rc, res, nres);
    if (s) return nimble_status_annotate(s, "%s", opname);
  }
  return nimble_ok();
}

static const char *out_hint(imp_ctx *c) {
  if (c->node && c->node->n_outputs && c->node->outputs[0][0]) return c->node->outputs[0];
  return "t";
}

nimble_status_t imp_emit(imp_ctx *c, const char *opname, size_t nargs, imp_val *const *args,
                         const nimble_named_attr_t *attrs, size_t nattrs, imp_val **out) {
  const nimble_expr *call;
  nimble_tensor_sig_t res[NIMBLE_MAX_OUTPUTS];
  size_t nres;
  bool typed;
  NIMBLE_RETURN_IF_ERROR(emit_common(c, opname, nargs, args, attrs, nattrs, &call, res, &nres, &typed));
  if (typed && nres != 1)
    return imp_err(NIMBLE_INTERNAL, "'%s' gave %zu outputs, expected one", opname, nres);
  return imp_bind(c, out_hint(c), call, typed ? &res[0] : NULL, out);
}

nimble_status_t imp_emit_multi(imp_ctx *c, const char *opname, size_t nargs, imp_val *const *args,
                               const nimble_named_attr_t *attrs, size_t nattrs, imp_val **outs,
                               size_t *nout) {
  const nimble_expr *call;
  nimble_tensor_sig_t res[NIMBLE_MAX_OUTPUTS];
  size_t nres;
  bool typed;
  NIMBLE_RETURN_IF_ERROR(emit_common(c, opname, nargs, args, attrs, nattrs, &call, res, &nres, &typed));
  if (!typed) return imp_err(NIMBLE_INVALID_ARGUMENT, "'%s': input types unknown", opname);
  imp_val *tup;
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, out_hint(c), call, NULL, &tup));
  for (size_t k = 0; k < nres; k++) {
    const nimble_expr *p = nimble_ir_proj(c->arena, tup->expr, k, NULL);
    if (!p) return NIMBLE_OOM_IN("importing");
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, out_hint(c), p, &res[k], &outs[k]));
  }
  *nout = nres;
  return nimble_ok();
}

/* ---- lookups ---- */

static nimble_status_t make_dim(imp_ctx *c, const nimble_onnx_dim_t *d, nimble_dim_t *out) {
  if (d->kind == NIMBLE_ONNX_DIM_VALUE) {
    *out = nimble_dim_const(d->value);
    return nimble_ok();
  }
  if (d->kind != NIMBLE_ONNX_DIM_PARAM || !d->param || !d->param[0]) {
    *out = nimble_dim_any();
    return nimble_ok();
  }
  for (size_t i = 0; i < c->n_params; i++)
    if (strcmp(c->param_names[i], d->param) == 0) {
      *out = nimble_dim_var(c->param_ids[i], c->param_names[i]);
      return nimble_ok();
    }
  if (c->n_params == c->cap_params) {
    size_t cap = c->cap_params ? c->cap_params * 2 : 8;
    const char **names = nimble_arena_calloc(c->arena, cap, sizeof *names);
    uint32_t *ids = nimble_arena_calloc(c->arena, cap, sizeof *ids);
    if (!names || !ids) return NIMBLE_OOM_IN("importing");
    if (c->n_params) {
      memcpy(names, c->param_names, c->n_params * sizeof *names);
      memcpy(ids, c->param_ids, c->n_params * sizeof *ids);
    }
    c->param_names = names;
    c->param_ids = ids;
    c->cap_params = cap;
  }
  /* A dim_param may be any string; the IR text form wants an identifier,
   * so other characters become '_'. */
  char *nm = nimble_arena_strdup(c->arena, d->param);
  if (!nm) return NIMBLE_OOM_IN("importing");
  for (char *p = nm; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
      *p = '_';
  if (nm[0] >= '0' && nm[0] <= '9') nm = nimble_arena_sprintf(c->arena, "d_%s", nm);
  if (!nm) return NIMBLE_OOM_IN("importing");
  c->param_names[c->n_params] = d->param;
  c->param_ids[c->n_params] = nimble_module_fresh_var_id(c->module);
  *out = nimble_dim_var(c->param_ids[c->n_params], nm);
  c->n_params++;
  return nimble_ok();
}

static nimble_status_t type_to_sig(imp_ctx *c, const char *name, const nimble_onnx_type_t *t,
                                   nimble_tensor_sig_t *sig) {
  if (!t) return imp_err(NIMBLE_UNIMPLEMENTED, "value '%s' has no declared type", name);
  if (t->kind != NIMBLE_ONNX_TYPE_TENSOR)
    return imp_err(NIMBLE_UNIMPLEMENTED, "value '%s' is not a tensor (sequences, maps and optionals are not supported)", name);
  memset(sig, 0, sizeof *sig);
  nimble_status_t s = imp_dtype(t->elem_type, &sig->dtype);
  if (s) return nimble_status_annotate(s, "value '%s'", name);
  if (!t->has_shape)
    return imp_err(NIMBLE_UNIMPLEMENTED, "value '%s' has no shape: its rank must be known", name);
  if (t->rank > NIMBLE_MAX_RANK)
    return imp_err(NIMBLE_OUT_OF_RANGE, "value '%s' has rank %zu, at most %d", name, t->rank, NIMBLE_MAX_RANK);
  sig->rank = t->rank;
  for (size_t i = 0; i < t->rank; i++) NIMBLE_RETURN_IF_ERROR(make_dim(c, &t->dims[i], &sig->dims[i]));
  return nimble_ok();
}

static nimble_status_t const_from_tensor(imp_ctx *c, const nimble_onnx_tensor_t *t, imp_val **out) {
  nimble_dtype_t dt;
  nimble_status_t s = imp_dtype(t->dtype, &dt);
  if (s) return nimble_status_annotate(s, "tensor '%s'", t->name);
  if (t->rank > NIMBLE_MAX_RANK)
    return imp_err(NIMBLE_OUT_OF_RANGE, "tensor '%s' has rank %zu, at most %d", t->name, t->rank, NIMBLE_MAX_RANK);
  uint64_t bytes;
  if (__builtin_mul_overflow(t->count, (uint64_t)nimble_dtype_size(dt), &bytes) || t->size != bytes)
    return imp_err(NIMBLE_DATA_LOSS, "tensor '%s': %zu bytes for %" PRIu64 " elements", t->name, t->size, t->count);
  static const uint8_t empty[8];
  return imp_const(c, dt, t->rank, t->dims, t->data ? t->data : empty, out);
}

nimble_status_t imp_lookup(imp_ctx *c, const char *name, imp_val **out) {
  for (imp_scope *s = c->scope; s; s = s->parent) {
    imp_val *v = scope_get(s, name);
    if (v) {
      *out = v;
      return nimble_ok();
    }
  }
  const nimble_onnx_value_t *ov = nimble_onnx_graph_find_value(c->graph, name);
  if (ov && ov->kind == NIMBLE_ONNX_VALUE_INITIALIZER && ov->initializer) {
    imp_val *v;
    NIMBLE_RETURN_IF_ERROR(const_from_tensor(c, ov->initializer, &v));
    /* Main-graph initializers are cached in the outermost scope so every
     * subgraph shares the constant; a subgraph's own in the current one. */
    imp_scope *saved = c->scope;
    if (ov->graph && ov->graph->parent == NULL)
      while (c->scope->parent) c->scope = c->scope->parent;
    nimble_status_t s = imp_scope_set(c, name, v);
    c->scope = saved;
    NIMBLE_RETURN_IF_ERROR(s);
    *out = v;
    return nimble_ok();
  }
  if (ov && ov->kind == NIMBLE_ONNX_VALUE_SPARSE_INITIALIZER)
    return imp_err(NIMBLE_UNIMPLEMENTED, "tensor '%s' is a sparse initializer (not supported)", name);
  return imp_err(NIMBLE_NOT_FOUND, "tensor '%s' is not defined", name);
}

nimble_status_t imp_input(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val **out) {
  *out = NULL;
  if (i >= n->n_inputs || !n->inputs[i][0]) return nimble_ok();
  nimble_status_t s = imp_lookup(c, n->inputs[i], out);
  if (s) return nimble_status_annotate(s, "input %zu", i);
  return nimble_ok();
}

nimble_status_t imp_input_req(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val **out) {
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, i, out));
  if (!*out) return imp_err(NIMBLE_INVALID_ARGUMENT, "input %zu is required", i);
  if (!(*out)->has_sig)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "input %zu ('%s') has no known type", i, n->inputs[i]);
  return nimble_ok();
}

nimble_status_t imp_define(imp_ctx *c, const nimble_onnx_node *n, size_t i, imp_val *v) {
  if (i >= n->n_outputs || !n->outputs[i][0]) return nimble_ok();
  return imp_scope_set(c, n->outputs[i], v);
}

/* ---- types for annotations ---- */

const nimble_type *imp_sig_type(imp_ctx *c, const nimble_tensor_sig_t *sig, bool any_for_vars) {
  nimble_dim_t dims[NIMBLE_MAX_RANK];
  for (size_t i = 0; i < sig->rank; i++) {
    nimble_dim_t d = imp_resolve(c, sig->dims[i]);
    if (d.kind == NIMBLE_DIM_VAR && any_for_vars) d = nimble_dim_any();
    dims[i] = d;
  }
  return nimble_type_tensor(c->arena, sig->dtype, sig->rank, dims);
}

nimble_status_t imp_to_scalar(imp_ctx *c, imp_val *v, imp_val **out) {
  if (!v->has_sig) return imp_err(NIMBLE_INVALID_ARGUMENT, "condition has no known type");
  if (v->sig.rank == 0) {
    *out = v;
    return nimble_ok();
  }
  nimble_named_attr_t a = imp_attr_ints("newshape", NULL, 0);
  return imp_emit(c, "reshape", 1, &v, &a, 1, out);
}

const char *imp_fresh_global(imp_ctx *c, const char *prefix) {
  for (;;) {
    const char *name = nimble_arena_sprintf(c->arena, "%s_%u", prefix, c->counter++);
    if (!name) return NULL;
    if (!nimble_module_find_func(c->module, name)) return name;
  }
}

nimble_status_t imp_add_nir_func(imp_ctx *c, const char *name, const char *text) {
  nimble_module *tmp;
  nimble_status_t s = nimble_nir_parse(c->arena, name, text, strlen(text), &tmp);
  if (s) return nimble_status_annotate(s, "generated function @%s", name);
  const nimble_expr *f = nimble_module_find_func(tmp, name);
  if (!f) return imp_err(NIMBLE_INTERNAL, "generated text lacks @%s", name);
  return nimble_module_add_func(c->module, name, f);
}

/* ---- the graph walk ---- */

static const struct {
  const imp_converter *t;
  const size_t *n;
} tables[] = {
    /* One table per ONNX operator family; an operator is in one table. */
    {imp_converters_index, &imp_converters_index_count},
    {imp_converters_image, &imp_converters_image_count},
    {imp_converters_quant, &imp_converters_quant_count},
    {imp_converters_elementwise, &imp_converters_elementwise_count},
    {imp_converters_nn, &imp_converters_nn_count},
    {imp_converters_reduce, &imp_converters_reduce_count},
    {imp_converters_signal, &imp_converters_signal_count},
    {imp_converters_linalg, &imp_converters_linalg_count},
    {imp_converters_random, &imp_converters_random_count},
    {imp_converters_shape, &imp_converters_shape_count},
    {imp_converters_control, &imp_converters_control_count},
    {imp_converters_rnn, &imp_converters_rnn_count},
};

const char *nimble_onnx_import_supported_op(size_t i) {
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
    if (i < *tables[t].n) return tables[t].t[i].op_type;
    i -= *tables[t].n;
  }
  return NULL;
}

static const imp_converter *find_converter(const char *op_type) {
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (size_t i = 0; i < *tables[t].n; i++)
      if (strcmp(tables[t].t[i].op_type, op_type) == 0) return &tables[t].t[i];
  return NULL;
}

int nimble_onnx_import_supports(const char *op_type) { return find_converter(op_type) != NULL; }

nimble_status_t imp_graph_nodes(imp_ctx *c, const nimble_onnx_graph *g) {
  const nimble_onnx_graph *saved_graph = c->graph;
  const nimble_onnx_node *saved_node = c->node;
  c->graph = g;
  nimble_status_t s = nimble_ok();
  for (size_t i = 0; i < g->n_nodes && !s; i++) {
    const nimble_onnx_node *n = g->nodes[i];
    c->node = n;
    if (n->domain[0]) {
      s = nimble_onnx_node_annotate(
          n, imp_err(NIMBLE_UNIMPLEMENTED, "operator domain '%s' is not supported", n->domain));
      break;
    }
    const imp_converter *cv = find_converter(n->op_type);
    if (!cv) {
      s = nimble_onnx_node_annotate(
          n, imp_err(NIMBLE_UNIMPLEMENTED, "operator '%s' is not supported", n->op_type));
      break;
    }
    /* Names the node once: the loader's attribute getters name it already
     * (their statuses carry the node as their subject). */
    s = nimble_onnx_node_annotate(n, imp_convert_node(c, n, cv));
    if (s) break;
    /* Every produced output must be defined. */
    for (size_t k = 0; k < n->n_outputs; k++) {
      if (!n->outputs[k][0]) continue;
      bool found = false;
      for (imp_scope *sc = c->scope; sc && !found; sc = sc->parent) found = scope_get(sc, n->outputs[k]) != NULL;
      if (!found) {
        s = nimble_onnx_node_annotate(
            n, imp_err(NIMBLE_UNIMPLEMENTED, "output %zu ('%s') is not supported", k, n->outputs[k]));
        break;
      }
    }
  }
  c->graph = saved_graph;
  c->node = saved_node;
  return s;
}

nimble_status_t nimble_onnx_import_model(nimble_arena *arena, const nimble_onnx_model *model,
                                         const nimble_onnx_import_options_t *options,
                                         nimble_module **out) {
  *out = NULL;
  if (!arena || !model) return imp_err(NIMBLE_INVALID_ARGUMENT, "import needs an arena and a model");
  imp_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  imp_ctx *c = &ctx;
  c->arena = arena;
  c->model = model;
  NIMBLE_RETURN_IF_ERROR(nimble_module_create(arena, &c->module));
  /* The tracker's own fresh variables stay far above the module's ids. */
  NIMBLE_RETURN_IF_ERROR(nimble_subst_create(arena, 1u << 30, &c->subst));
  c->dctx.subst = c->subst;
  imp_chain chain;
  memset(&chain, 0, sizeof chain);
  c->chain = &chain;
  NIMBLE_RETURN_IF_ERROR(imp_scope_push(c));
  const nimble_onnx_graph *g = nimble_onnx_model_graph(model);
  c->graph = g;

  const nimble_expr **params = nimble_arena_calloc(arena, g->n_inputs ? g->n_inputs : 1, sizeof *params);
  if (!params) return NIMBLE_OOM_IN("importing");
  size_t np = 0;
  for (size_t i = 0; i < g->n_inputs; i++) {
    const nimble_onnx_value_t *in = g->inputs[i];
    if (in->initializer) continue; /* an overridable default: a constant here */
    nimble_tensor_sig_t sig;
    nimble_status_t s = type_to_sig(c, in->name, in->type, &sig);
    if (s) return nimble_status_annotate(s, "graph input %zu", i);
    const nimble_type *t = nimble_type_tensor(arena, sig.dtype, sig.rank, sig.dims);
    const char *pname = imp_unique_name(c, in->name);
    const nimble_expr *var = t && pname ? nimble_ir_var(arena, pname, t, NULL) : NULL;
    imp_val *v = var ? imp_val_new(c, var, &sig) : NULL;
    if (!v) return NIMBLE_OOM_IN("importing");
    params[np++] = var;
    NIMBLE_RETURN_IF_ERROR(imp_scope_set(c, in->name, v));
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    const nimble_onnx_value_t *in = g->inputs[i];
    if (!in->initializer) continue;
    imp_val *v;
    NIMBLE_RETURN_IF_ERROR(const_from_tensor(c, in->initializer, &v));
    NIMBLE_RETURN_IF_ERROR(imp_scope_set(c, in->name, v));
  }
  NIMBLE_RETURN_IF_ERROR(imp_graph_nodes(c, g));
  c->node = NULL;
  if (g->n_outputs == 0) return imp_err(NIMBLE_INVALID_ARGUMENT, "the graph has no outputs");
  const nimble_expr **outs = nimble_arena_calloc(arena, g->n_outputs, sizeof *outs);
  if (!outs) return NIMBLE_OOM_IN("importing");
  for (size_t i = 0; i < g->n_outputs; i++) {
    imp_val *v;
    nimble_status_t s = imp_lookup(c, g->outputs[i]->name, &v);
    if (s) return nimble_status_annotate(s, "graph output %zu", i);
    /* A value of unknown rank is an output of any rank (what the branch
     * taken gives, as ONNX Runtime returns it, whatever rank the model
     * declares: exporters declare the then-branch's). */
    outs[i] = v->expr;
  }
  const nimble_expr *result = g->n_outputs == 1 ? outs[0] : nimble_ir_tuple(arena, g->n_outputs, outs, NULL);
  const nimble_expr *body = result ? imp_chain_close(c, &chain, result) : NULL;
  const nimble_expr *fn = body ? nimble_ir_func(arena, 0, NULL, np, params, NULL, body, NULL) : NULL;
  if (!fn) return NIMBLE_OOM_IN("importing");
  const char *entry = options && options->entry_name ? options->entry_name : "main";
  NIMBLE_RETURN_IF_ERROR(nimble_module_add_func(c->module, entry, fn));
  *out = c->module;
  return nimble_ok();
}

nimble_status_t nimble_onnx_import_file(const char *path, nimble_arena *arena,
                                        const nimble_onnx_import_options_t *options,
                                        nimble_module **out) {
  *out = NULL;
  nimble_onnx_model *m;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_model_load_file(path, &m));
  nimble_status_t s = nimble_onnx_import_model(arena, m, options, out);
  nimble_onnx_model_destroy(m);
  if (s) return nimble_status_annotate(s, "while importing %s", path);
  return nimble_ok();
}
