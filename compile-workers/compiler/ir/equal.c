/* Structural equality of expressions and modules, up to the names of bound
 * variables: a binding site pairs the two variables, and a use must refer to
 * the paired variable. Type and dim variables compare by name because the
 * parser scopes them by definition, so two parses of one text give the same
 * names but different ids. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/ir.h"

typedef struct var_pair {
  const nimble_expr *a, *b;
  const struct var_pair *next;
} var_pair;

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static bool dim_eq_named(nimble_dim_t a, nimble_dim_t b) {
  if (a.kind != b.kind) return false;
  if (a.kind == NIMBLE_DIM_CONST) return a.value == b.value;
  if (a.kind == NIMBLE_DIM_VAR) return str_eq(a.name, b.name);
  return true;
}

static bool type_eq_named(const nimble_type *a, const nimble_type *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_TYPE_TENSOR:
      if (a->u.tensor.dtype != b->u.tensor.dtype || a->u.tensor.rank != b->u.tensor.rank)
        return false;
      for (size_t i = 0; i < a->u.tensor.rank; i++)
        if (!dim_eq_named(a->u.tensor.dims[i], b->u.tensor.dims[i])) return false;
      return true;
    case NIMBLE_TYPE_UNRANKED_TENSOR: return a->u.tensor.dtype == b->u.tensor.dtype;
    case NIMBLE_TYPE_TUPLE:
      if (a->u.tuple.count != b->u.tuple.count) return false;
      for (size_t i = 0; i < a->u.tuple.count; i++)
        if (!type_eq_named(a->u.tuple.fields[i], b->u.tuple.fields[i])) return false;
      return true;
    case NIMBLE_TYPE_FUNC:
      if (a->u.func.num_type_params != b->u.func.num_type_params ||
          a->u.func.num_params != b->u.func.num_params)
        return false;
      for (size_t i = 0; i < a->u.func.num_type_params; i++)
        if (!type_eq_named(a->u.func.type_params[i], b->u.func.type_params[i])) return false;
      for (size_t i = 0; i < a->u.func.num_params; i++)
        if (!type_eq_named(a->u.func.params[i], b->u.func.params[i])) return false;
      return type_eq_named(a->u.func.ret, b->u.func.ret);
    case NIMBLE_TYPE_ADT:
      if (!str_eq(a->u.adt.name, b->u.adt.name) || a->u.adt.num_args != b->u.adt.num_args)
        return false;
      for (size_t i = 0; i < a->u.adt.num_args; i++)
        if (!type_eq_named(a->u.adt.args[i], b->u.adt.args[i])) return false;
      return true;
    case NIMBLE_TYPE_VAR: return str_eq(a->u.var.name, b->u.var.name);
  }
  return false;
}

static bool ctor_eq(const nimble_constructor *a, const nimble_constructor *b) {
  return a->tag == b->tag && str_eq(a->name, b->name) && str_eq(a->owner->name, b->owner->name);
}

/* Binds a's variable to b's variable if the declarations agree. */
static bool bind_var(const nimble_expr *a, const nimble_expr *b, var_pair *slot,
                     const var_pair *env) {
  if (a->kind != NIMBLE_EXPR_VAR || b->kind != NIMBLE_EXPR_VAR) return false;
  if (!type_eq_named(a->u.var.annotation, b->u.var.annotation)) return false;
  slot->a = a;
  slot->b = b;
  slot->next = env;
  return true;
}

/* The variables one pattern binds are paired in slots on the caller's
 * stack; a pattern binding more than this many compares unequal. */
#define MAX_PATTERN_VARS 64

static bool pattern_eq(const nimble_pattern *a, const nimble_pattern *b, var_pair *slots,
                       size_t *used, const var_pair **env) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_PATTERN_WILDCARD: return true;
    case NIMBLE_PATTERN_VAR:
      if (*used >= MAX_PATTERN_VARS) return false;
      if (!bind_var(a->var, b->var, &slots[*used], *env)) return false;
      *env = &slots[(*used)++];
      return true;
    case NIMBLE_PATTERN_CTOR:
      if (!ctor_eq(a->ctor, b->ctor)) return false;
      /* fallthrough */
    case NIMBLE_PATTERN_TUPLE:
      if (a->num_subs != b->num_subs) return false;
      for (size_t i = 0; i < a->num_subs; i++)
        if (!pattern_eq(a->subs[i], b->subs[i], slots, used, env)) return false;
      return true;
  }
  return false;
}

static bool expr_eq(const nimble_expr *a, const nimble_expr *b, const var_pair *env);

/* Let chains are compared in a loop with the pairs on the heap: imported
 * models nest thousands of lets. */
static __attribute__((noinline)) bool let_chain_eq(const nimble_expr *a, const nimble_expr *b,
                                                   const var_pair *env) {
  size_t n = 0;
  const nimble_expr *x = a, *y = b;
  while (x->kind == NIMBLE_EXPR_LET && y->kind == NIMBLE_EXPR_LET) {
    n++;
    x = x->u.let.body;
    y = y->u.let.body;
  }
  var_pair *slots = malloc(n * sizeof(*slots));
  if (!slots) return false;
  bool ok = true;
  const var_pair *e = env;
  x = a;
  y = b;
  for (size_t i = 0; i < n && ok; i++) {
    ok = expr_eq(x->u.let.value, y->u.let.value, e) && bind_var(x->u.let.var, y->u.let.var, &slots[i], e);
    e = &slots[i];
    x = x->u.let.body;
    y = y->u.let.body;
  }
  ok = ok && expr_eq(x, y, e);
  free(slots);
  return ok;
}

static __attribute__((noinline)) bool func_eq(const nimble_expr *a, const nimble_expr *b,
                                              const var_pair *env) {
      if (a->u.func.num_params != b->u.func.num_params ||
          a->u.func.num_type_params != b->u.func.num_type_params ||
          !type_eq_named(a->u.func.ret, b->u.func.ret))
        return false;
      for (size_t i = 0; i < a->u.func.num_type_params; i++)
        if (!type_eq_named(a->u.func.type_params[i], b->u.func.type_params[i])) return false;
      /* Parameters are paired in a chain; models with many weight
       * parameters need more slots than the stack holds. */
      size_t n = a->u.func.num_params;
      var_pair stack_slots[32];
      var_pair *slots = n <= 32 ? stack_slots : malloc(n * sizeof(*slots));
      if (!slots) return false;
      const var_pair *e = env;
      bool ok = true;
      for (size_t i = 0; i < n && ok; i++) {
        ok = bind_var(a->u.func.params[i], b->u.func.params[i], &slots[i], e);
        e = &slots[i];
      }
      ok = ok && expr_eq(a->u.func.body, b->u.func.body, e);
      if (slots != stack_slots) free(slots);
      return ok;
}

static __attribute__((noinline)) bool match_eq(const nimble_expr *a, const nimble_expr *b,
                                               const var_pair *env) {
  if (a->u.match.num_clauses != b->u.match.num_clauses ||
      !expr_eq(a->u.match.scrutinee, b->u.match.scrutinee, env))
    return false;
  for (size_t i = 0; i < a->u.match.num_clauses; i++) {
    var_pair slots[MAX_PATTERN_VARS];
    size_t used = 0;
    const var_pair *e = env;
    if (!pattern_eq(a->u.match.clauses[i].pattern, b->u.match.clauses[i].pattern, slots, &used, &e))
      return false;
    if (!expr_eq(a->u.match.clauses[i].body, b->u.match.clauses[i].body, e)) return false;
  }
  return true;
}

static bool expr_eq(const nimble_expr *a, const nimble_expr *b, const var_pair *env) {
  if (!a || !b) return a == b;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_EXPR_VAR:
      for (const var_pair *p = env; p; p = p->next)
        if (p->a == a || p->b == b) return p->a == a && p->b == b;
      return a == b; /* free variables: only the same node */
    case NIMBLE_EXPR_GLOBAL: return str_eq(a->u.global.name, b->u.global.name);
    case NIMBLE_EXPR_CONSTANT: {
      const nimble_const_tensor_t *x = &a->u.constant, *y = &b->u.constant;
      if (x->dtype != y->dtype || x->rank != y->rank) return false;
      for (size_t i = 0; i < x->rank; i++)
        if (x->dims[i] != y->dims[i]) return false;
      return x->num_elements == 0 ||
             memcmp(x->data, y->data, x->num_elements * nimble_dtype_size(x->dtype)) == 0;
    }
    case NIMBLE_EXPR_OP: return a->u.op.op == b->u.op.op;
    case NIMBLE_EXPR_CONSTRUCTOR: return ctor_eq(a->u.ctor.ctor, b->u.ctor.ctor);
    case NIMBLE_EXPR_CALL:
      if (a->u.call.num_args != b->u.call.num_args || a->u.call.attrs.count != b->u.call.attrs.count)
        return false;
      if (!expr_eq(a->u.call.callee, b->u.call.callee, env)) return false;
      for (size_t i = 0; i < a->u.call.num_args; i++)
        if (!expr_eq(a->u.call.args[i], b->u.call.args[i], env)) return false;
      for (size_t i = 0; i < a->u.call.attrs.count; i++)
        if (!nimble_attr_value_equal(&a->u.call.attrs.values[i], &b->u.call.attrs.values[i]))
          return false;
      return true;
    case NIMBLE_EXPR_LET: return let_chain_eq(a, b, env);
    case NIMBLE_EXPR_IF:
      return expr_eq(a->u.if_.cond, b->u.if_.cond, env) &&
             expr_eq(a->u.if_.then_branch, b->u.if_.then_branch, env) &&
             expr_eq(a->u.if_.else_branch, b->u.if_.else_branch, env);
    case NIMBLE_EXPR_TUPLE:
      if (a->u.tuple.count != b->u.tuple.count) return false;
      for (size_t i = 0; i < a->u.tuple.count; i++)
        if (!expr_eq(a->u.tuple.fields[i], b->u.tuple.fields[i], env)) return false;
      return true;
    case NIMBLE_EXPR_PROJ:
      return a->u.proj.index == b->u.proj.index && expr_eq(a->u.proj.tuple, b->u.proj.tuple, env);
    case NIMBLE_EXPR_FUNC: return func_eq(a, b, env);
    case NIMBLE_EXPR_MATCH: return match_eq(a, b, env);
  }
  return false;
}

bool nimble_ir_expr_equal(const nimble_expr *a, const nimble_expr *b) { return expr_eq(a, b, NULL); }

bool nimble_ir_module_equal(const nimble_module *a, const nimble_module *b) {
  if (nimble_module_num_typedefs(a) != nimble_module_num_typedefs(b) ||
      nimble_module_num_funcs(a) != nimble_module_num_funcs(b))
    return false;
  for (size_t i = 0; i < nimble_module_num_typedefs(a); i++) {
    const nimble_typedef *x = nimble_module_typedef_at(a, i), *y = nimble_module_typedef_at(b, i);
    if (!str_eq(x->name, y->name) || x->num_params != y->num_params ||
        x->num_ctors != y->num_ctors)
      return false;
    for (size_t j = 0; j < x->num_params; j++)
      if (!type_eq_named(x->params[j], y->params[j])) return false;
    for (size_t j = 0; j < x->num_ctors; j++) {
      const nimble_constructor *c = x->ctors[j], *d = y->ctors[j];
      if (!str_eq(c->name, d->name) || c->num_fields != d->num_fields) return false;
      for (size_t k = 0; k < c->num_fields; k++)
        if (!type_eq_named(c->fields[k], d->fields[k])) return false;
    }
  }
  for (size_t i = 0; i < nimble_module_num_funcs(a); i++) {
    const nimble_global_func_t *f = nimble_module_func_at(a, i), *g = nimble_module_func_at(b, i);
    if (!str_eq(f->name, g->name) || !nimble_ir_expr_equal(f->func, g->func)) return false;
  }
  return true;
}
