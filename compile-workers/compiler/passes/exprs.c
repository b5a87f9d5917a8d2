/* Building and asking about expressions in passes: a call like another
 * with new arguments, operator calls by name, which operator a call calls,
 * whether evaluating an expression may have effects, how often a variable
 * occurs, and static shapes as constants (pass_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

const nimble_expr *pass_call_with_args(nimble_arena *a, const nimble_expr *e, const nimble_expr *callee,
                                       const nimble_expr *const *args) {
  return nimble_ir_call(a, callee, e->u.call.num_args, args, &e->u.call.attrs, &e->loc);
}

nimble_status_t pass_op_call(nimble_arena *a, const char *name, size_t n, const nimble_expr *const *args,
                             const nimble_named_attr_t *attrs, size_t num_attrs, const nimble_expr **out) {
  const nimble_op *op = nimble_op_find(name);
  if (!op) return nimble_status_make(NIMBLE_INTERNAL, "no operator '%s'", name);
  return nimble_ir_call_op(a, op, n, args, attrs, num_attrs, NULL, out);
}

const nimble_op *pass_called_op(const nimble_expr *e) {
  if (!e || e->kind != NIMBLE_EXPR_CALL || e->u.call.callee->kind != NIMBLE_EXPR_OP) return NULL;
  return e->u.call.callee->u.op.op;
}

bool pass_is_op_call(const nimble_expr *e, const char *name) {
  const nimble_op *op = pass_called_op(e);
  return op && strcmp(op->name, name) == 0;
}

bool pass_is_memory_op(const nimble_op *op) {
  static const char *const kMemory[] = {"alloc_storage", "alloc_tensor", "invoke",
                                        "invoke_shape_func", "reshape_tensor", "kill"};
  if (!op) return false;
  for (size_t i = 0; i < sizeof kMemory / sizeof kMemory[0]; i++)
    if (strcmp(op->name, kMemory[i]) == 0) return true;
  return false;
}

typedef struct var_count {
  const nimble_expr *var;
  size_t n;
} var_count;

static nimble_status_t count_var(void *user, const nimble_expr *e, const nimble_expr **out) {
  var_count *vc = user;
  *out = e;
  while (e->kind == NIMBLE_EXPR_LET) { /* chains iteratively: they can be long */
    const nimble_expr *ignored;
    NIMBLE_RETURN_IF_ERROR(count_var(user, e->u.let.value, &ignored));
    e = e->u.let.body;
  }
  if (e->kind == NIMBLE_EXPR_VAR) {
    vc->n += e == vc->var;
    return nimble_ok();
  }
  const nimble_expr *same;
  return pass_map_children(NULL, e, count_var, user, &same);
}

nimble_status_t pass_count_var(const nimble_expr *e, const nimble_expr *var, size_t *count) {
  var_count vc = {var, 0};
  const nimble_expr *ignored;
  NIMBLE_RETURN_IF_ERROR(count_var(&vc, e, &ignored));
  *count = vc.n;
  return nimble_ok();
}

bool pass_has_effects(const nimble_expr *e) {
  while (e) {
    switch (e->kind) {
      case NIMBLE_EXPR_CALL: {
        const nimble_expr *c = e->u.call.callee;
        if (c->kind == NIMBLE_EXPR_OP) {
          if (pass_is_op_call(e, "invoke") || pass_is_op_call(e, "kill")) return true;
        } else if (c->kind != NIMBLE_EXPR_CONSTRUCTOR) {
          return true; /* a global or a closure may do anything */
        }
        for (size_t i = 0; i < e->u.call.num_args; i++)
          if (pass_has_effects(e->u.call.args[i])) return true;
        return false;
      }
      case NIMBLE_EXPR_LET:
        if (pass_has_effects(e->u.let.value)) return true;
        e = e->u.let.body;
        continue;
      case NIMBLE_EXPR_IF:
        if (pass_has_effects(e->u.if_.cond) || pass_has_effects(e->u.if_.then_branch)) return true;
        e = e->u.if_.else_branch;
        continue;
      case NIMBLE_EXPR_TUPLE:
        for (size_t i = 0; i < e->u.tuple.count; i++)
          if (pass_has_effects(e->u.tuple.fields[i])) return true;
        return false;
      case NIMBLE_EXPR_PROJ: e = e->u.proj.tuple; continue;
      case NIMBLE_EXPR_MATCH:
        /* A match no arm covers fails at run time: keep it. */
        return true;
      default: return false;
    }
  }
  return false;
}

bool pass_type_static_shape(const nimble_type *t, int64_t *dims, size_t *rank) {
  if (!t || t->kind != NIMBLE_TYPE_TENSOR || t->u.tensor.rank > NIMBLE_MAX_RANK) return false;
  for (size_t i = 0; i < t->u.tensor.rank; i++) {
    if (t->u.tensor.dims[i].kind != NIMBLE_DIM_CONST) return false;
    if (dims) dims[i] = t->u.tensor.dims[i].value;
  }
  if (rank) *rank = t->u.tensor.rank;
  return true;
}

const nimble_expr *pass_shape_const(nimble_arena *a, const int64_t *dims, size_t rank) {
  int64_t len = (int64_t)rank;
  static const int64_t kNone = 0;
  return nimble_ir_constant(a, NIMBLE_DTYPE_INT64, 1, &len, rank ? (const void *)dims : &kNone, NULL);
}
