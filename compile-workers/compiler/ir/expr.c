/* Expression and pattern builders. Arrays are copied into the arena so
 * callers may build them on the stack. */
#include <string.h>

#include "nimble/ir.h"

static nimble_expr *expr_new(nimble_arena *a, nimble_expr_kind_t kind, const nimble_src_loc_t *loc) {
  nimble_expr *e = nimble_arena_alloc(a, sizeof(*e));
  if (!e) return NULL;
  e->kind = kind;
  if (loc) e->loc = *loc;
  return e;
}

static bool copy_array(nimble_arena *a, const void *src, size_t n, size_t size, const void **dst) {
  *dst = NULL;
  if (n == 0) return true;
  void *p = nimble_arena_calloc(a, n, size);
  if (!p) return false;
  memcpy(p, src, n * size);
  *dst = p;
  return true;
}

const nimble_expr *nimble_ir_var(nimble_arena *a, const char *name, const nimble_type *annotation,
                                 const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_VAR, loc);
  if (!e) return NULL;
  e->u.var.name = nimble_arena_strdup(a, name);
  e->u.var.annotation = annotation;
  return e->u.var.name ? e : NULL;
}

const nimble_expr *nimble_ir_global(nimble_arena *a, const char *name, const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_GLOBAL, loc);
  if (!e) return NULL;
  e->u.global.name = nimble_arena_strdup(a, name);
  return e->u.global.name ? e : NULL;
}

const nimble_expr *nimble_ir_constant(nimble_arena *a, nimble_dtype_t dtype, size_t rank,
                                      const int64_t *dims, const void *data,
                                      const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_CONSTANT, loc);
  if (!e) return NULL;
  size_t count = 1;
  for (size_t i = 0; i < rank; i++) {
    if (dims[i] < 0) return NULL;
    if (dims[i] != 0 && count > SIZE_MAX / (size_t)dims[i]) return NULL;
    count *= (size_t)dims[i];
  }
  size_t esize = nimble_dtype_size(dtype);
  if (esize == 0 || (count && count > SIZE_MAX / esize)) return NULL;
  nimble_const_tensor_t *c = &e->u.constant;
  c->dtype = dtype;
  c->rank = rank;
  c->num_elements = count;
  const void *d;
  if (!copy_array(a, dims, rank, sizeof(int64_t), &d)) return NULL;
  c->dims = d;
  if (!copy_array(a, data, count, esize, &d)) return NULL;
  c->data = d;
  return e;
}

const nimble_expr *nimble_ir_scalar_f32(nimble_arena *a, float v, const nimble_src_loc_t *loc) {
  return nimble_ir_constant(a, NIMBLE_DTYPE_FLOAT32, 0, NULL, &v, loc);
}

const nimble_expr *nimble_ir_scalar_i64(nimble_arena *a, int64_t v, const nimble_src_loc_t *loc) {
  return nimble_ir_constant(a, NIMBLE_DTYPE_INT64, 0, NULL, &v, loc);
}

const nimble_expr *nimble_ir_op(nimble_arena *a, const nimble_op *op, const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_OP, loc);
  if (e) e->u.op.op = op;
  return e;
}

const nimble_expr *nimble_ir_ctor(nimble_arena *a, const nimble_constructor *ctor,
                                  const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_CONSTRUCTOR, loc);
  if (e) e->u.ctor.ctor = ctor;
  return e;
}

const nimble_expr *nimble_ir_call(nimble_arena *a, const nimble_expr *callee, size_t num_args,
                                  const nimble_expr *const *args, const nimble_attrs_t *attrs,
                                  const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_CALL, loc);
  if (!e) return NULL;
  e->u.call.callee = callee;
  e->u.call.num_args = num_args;
  const void *p;
  if (!copy_array(a, args, num_args, sizeof(*args), &p)) return NULL;
  e->u.call.args = p;
  if (attrs) e->u.call.attrs = *attrs;
  return e;
}

nimble_status_t nimble_ir_call_op(nimble_arena *a, const nimble_op *op, size_t num_args,
                                  const nimble_expr *const *args,
                                  const nimble_named_attr_t *attrs, size_t num_attrs,
                                  const nimble_src_loc_t *loc, const nimble_expr **out) {
  if ((int64_t)num_args < op->min_inputs || (op->max_inputs >= 0 && (int64_t)num_args > op->max_inputs)) {
    if (op->max_inputs < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "operator '%s' takes at least %d inputs, got %zu", op->name,
                                op->min_inputs, num_args);
    if (op->min_inputs == op->max_inputs)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "operator '%s' takes %d inputs, got %zu",
                                op->name, op->min_inputs, num_args);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "operator '%s' takes %d to %d inputs, got %zu", op->name,
                              op->min_inputs, op->max_inputs, num_args);
  }
  nimble_attrs_t built;
  NIMBLE_RETURN_IF_ERROR(nimble_attrs_make(a, op, attrs, num_attrs, &built));
  const nimble_expr *callee = nimble_ir_op(a, op, loc);
  const nimble_expr *call = callee ? nimble_ir_call(a, callee, num_args, args, &built, loc) : NULL;
  if (!call) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory building a call");
  *out = call;
  return nimble_ok();
}

const nimble_expr *nimble_ir_let(nimble_arena *a, const nimble_expr *var, const nimble_expr *value,
                                 const nimble_expr *body, const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_LET, loc);
  if (!e) return NULL;
  e->u.let.var = var;
  e->u.let.value = value;
  e->u.let.body = body;
  return e;
}

const nimble_expr *nimble_ir_if(nimble_arena *a, const nimble_expr *cond, const nimble_expr *then_b,
                                const nimble_expr *else_b, const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_IF, loc);
  if (!e) return NULL;
  e->u.if_.cond = cond;
  e->u.if_.then_branch = then_b;
  e->u.if_.else_branch = else_b;
  return e;
}

const nimble_expr *nimble_ir_tuple(nimble_arena *a, size_t count, const nimble_expr *const *fields,
                                   const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_TUPLE, loc);
  if (!e) return NULL;
  e->u.tuple.count = count;
  const void *p;
  if (!copy_array(a, fields, count, sizeof(*fields), &p)) return NULL;
  e->u.tuple.fields = p;
  return e;
}

const nimble_expr *nimble_ir_proj(nimble_arena *a, const nimble_expr *tuple, size_t index,
                                  const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_PROJ, loc);
  if (!e) return NULL;
  e->u.proj.tuple = tuple;
  e->u.proj.index = index;
  return e;
}

const nimble_expr *nimble_ir_func(nimble_arena *a, size_t num_type_params,
                                  const nimble_type *const *type_params, size_t num_params,
                                  const nimble_expr *const *params, const nimble_type *ret,
                                  const nimble_expr *body, const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_FUNC, loc);
  if (!e) return NULL;
  const void *p;
  e->u.func.num_type_params = num_type_params;
  if (!copy_array(a, type_params, num_type_params, sizeof(*type_params), &p)) return NULL;
  e->u.func.type_params = p;
  e->u.func.num_params = num_params;
  if (!copy_array(a, params, num_params, sizeof(*params), &p)) return NULL;
  e->u.func.params = p;
  e->u.func.ret = ret;
  e->u.func.body = body;
  return e;
}

const nimble_expr *nimble_ir_match(nimble_arena *a, const nimble_expr *scrutinee,
                                   size_t num_clauses, const nimble_match_clause_t *clauses,
                                   const nimble_src_loc_t *loc) {
  nimble_expr *e = expr_new(a, NIMBLE_EXPR_MATCH, loc);
  if (!e) return NULL;
  e->u.match.scrutinee = scrutinee;
  e->u.match.num_clauses = num_clauses;
  const void *p;
  if (!copy_array(a, clauses, num_clauses, sizeof(*clauses), &p)) return NULL;
  e->u.match.clauses = p;
  return e;
}

static nimble_pattern *pattern_new(nimble_arena *a, nimble_pattern_kind_t kind,
                                   const nimble_src_loc_t *loc) {
  nimble_pattern *p = nimble_arena_alloc(a, sizeof(*p));
  if (!p) return NULL;
  p->kind = kind;
  if (loc) p->loc = *loc;
  return p;
}

const nimble_pattern *nimble_ir_pattern_wildcard(nimble_arena *a, const nimble_src_loc_t *loc) {
  return pattern_new(a, NIMBLE_PATTERN_WILDCARD, loc);
}

const nimble_pattern *nimble_ir_pattern_var(nimble_arena *a, const nimble_expr *var,
                                            const nimble_src_loc_t *loc) {
  nimble_pattern *p = pattern_new(a, NIMBLE_PATTERN_VAR, loc);
  if (p) p->var = var;
  return p;
}

static const nimble_pattern *pattern_with_subs(nimble_pattern *p, nimble_arena *a, size_t n,
                                               const nimble_pattern *const *subs) {
  if (!p) return NULL;
  const void *q;
  p->num_subs = n;
  if (!copy_array(a, subs, n, sizeof(*subs), &q)) return NULL;
  p->subs = q;
  return p;
}

const nimble_pattern *nimble_ir_pattern_ctor(nimble_arena *a, const nimble_constructor *ctor,
                                             size_t num_subs, const nimble_pattern *const *subs,
                                             const nimble_src_loc_t *loc) {
  nimble_pattern *p = pattern_new(a, NIMBLE_PATTERN_CTOR, loc);
  if (p) p->ctor = ctor;
  return pattern_with_subs(p, a, num_subs, subs);
}

const nimble_pattern *nimble_ir_pattern_tuple(nimble_arena *a, size_t num_subs,
                                              const nimble_pattern *const *subs,
                                              const nimble_src_loc_t *loc) {
  return pattern_with_subs(pattern_new(a, NIMBLE_PATTERN_TUPLE, loc), a, num_subs, subs);
}
