/* The rewriter most passes are built on: a bottom-up walk that rebuilds
 * only what changed (unchanged subtrees are shared), substitutes
 * variables, and lets a pass replace nodes (post), drop or record `let`
 * bindings (bind) and scope its tables (enter/leave). Let chains are walked
 * in a loop, so a 100,000-`let` graph costs no stack. */
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

nimble_status_t pass_chain_push(pass_chain *c, const nimble_expr *var, const nimble_expr *value) {
  if (c->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 16;
    const nimble_expr **v = realloc(c->vars, ncap * sizeof *v);
    if (!v) return NIMBLE_OOM();
    c->vars = v;
    const nimble_expr **x = realloc(c->values, ncap * sizeof *x);
    if (!x) return NIMBLE_OOM();
    c->values = x;
    c->cap = ncap;
  }
  c->vars[c->n] = var;
  c->values[c->n] = value;
  c->n++;
  return nimble_ok();
}

nimble_status_t pass_chain_collect(const nimble_expr *e, pass_chain *c) {
  memset(c, 0, sizeof *c);
  while (e->kind == NIMBLE_EXPR_LET) {
    NIMBLE_RETURN_IF_ERROR(pass_chain_push(c, e->u.let.var, e->u.let.value));
    e = e->u.let.body;
  }
  c->tail = e;
  return nimble_ok();
}

const nimble_expr *pass_chain_build(nimble_arena *a, const pass_chain *c, const nimble_expr *tail) {
  const nimble_expr *e = tail;
  for (size_t i = c->n; e && i-- > 0;) e = nimble_ir_let(a, c->vars[i], c->values[i], e, &c->vars[i]->loc);
  return e;
}

void pass_chain_free(pass_chain *c) {
  free(c->vars);
  free(c->values);
  memset(c, 0, sizeof *c);
}

static size_t enter(pass_rewriter *rw) { return rw->enter ? rw->enter(rw) : 0; }
static void leave(pass_rewriter *rw, size_t mark) {
  if (rw->leave) rw->leave(rw, mark);
}

static nimble_status_t rewrite(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out);

static nimble_status_t rewrite_scoped(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out) {
  size_t mark = enter(rw);
  nimble_status_t st = rewrite(rw, e, out);
  leave(rw, mark);
  return st;
}

static nimble_status_t rewrite_chain(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out) {
  size_t mark = enter(rw);
  pass_chain c = {0};
  nimble_status_t st = nimble_ok();
  bool changed = false;
  const nimble_expr *cur = e;
  while (!st && cur->kind == NIMBLE_EXPR_LET) {
    const nimble_expr *v = NULL;
    bool drop = false;
    st = rewrite(rw, cur->u.let.value, &v);
    if (!st && rw->bind) st = rw->bind(rw, cur->u.let.var, v, &drop);
    if (!st && !drop) st = pass_chain_push(&c, cur->u.let.var, v);
    if (drop || v != cur->u.let.value) changed = true;
    cur = cur->u.let.body;
  }
  const nimble_expr *tail = NULL;
  if (!st) st = rewrite(rw, cur, &tail);
  if (!st) {
    if (!changed && tail == cur) {
      *out = e;
    } else {
      *out = pass_chain_build(rw->arena, &c, tail);
      if (!*out) st = NIMBLE_OOM();
    }
  }
  pass_chain_free(&c);
  leave(rw, mark);
  return st;
}

static nimble_status_t rewrite_inner(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out) {
  nimble_arena *a = rw->arena;
  *out = e;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: {
      const nimble_expr *r = pass_map_get(&rw->subst, e);
      if (r) *out = r;
      return nimble_ok();
    }
    case NIMBLE_EXPR_GLOBAL:
    case NIMBLE_EXPR_CONSTANT:
    case NIMBLE_EXPR_OP:
    case NIMBLE_EXPR_CONSTRUCTOR: return nimble_ok();
    case NIMBLE_EXPR_LET: return rewrite_chain(rw, e, out);
    case NIMBLE_EXPR_CALL: {
      size_t n = e->u.call.num_args;
      const nimble_expr **args = n ? calloc(n, sizeof *args) : NULL;
      if (n && !args) return NIMBLE_OOM();
      const nimble_expr *callee;
      nimble_status_t st = rewrite(rw, e->u.call.callee, &callee);
      bool changed = callee != e->u.call.callee;
      for (size_t i = 0; !st && i < n; i++) {
        st = rewrite(rw, e->u.call.args[i], &args[i]);
        if (args[i] != e->u.call.args[i]) changed = true;
      }
      if (!st && changed) {
        *out = pass_call_with_args(a, e, callee, args);
        if (!*out) st = NIMBLE_OOM();
      }
      free(args);
      return st;
    }
    case NIMBLE_EXPR_IF: {
      const nimble_expr *c, *t, *f;
      NIMBLE_RETURN_IF_ERROR(rewrite(rw, e->u.if_.cond, &c));
      NIMBLE_RETURN_IF_ERROR(rewrite_scoped(rw, e->u.if_.then_branch, &t));
      NIMBLE_RETURN_IF_ERROR(rewrite_scoped(rw, e->u.if_.else_branch, &f));
      if (c != e->u.if_.cond || t != e->u.if_.then_branch || f != e->u.if_.else_branch) {
        *out = nimble_ir_if(a, c, t, f, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_TUPLE: {
      size_t n = e->u.tuple.count;
      const nimble_expr **fs = n ? calloc(n, sizeof *fs) : NULL;
      if (n && !fs) return NIMBLE_OOM();
      nimble_status_t st = nimble_ok();
      bool changed = false;
      for (size_t i = 0; !st && i < n; i++) {
        st = rewrite(rw, e->u.tuple.fields[i], &fs[i]);
        if (fs[i] != e->u.tuple.fields[i]) changed = true;
      }
      if (!st && changed) {
        *out = nimble_ir_tuple(a, n, fs, &e->loc);
        if (!*out) st = NIMBLE_OOM();
      }
      free(fs);
      return st;
    }
    case NIMBLE_EXPR_PROJ: {
      const nimble_expr *t;
      NIMBLE_RETURN_IF_ERROR(rewrite(rw, e->u.proj.tuple, &t));
      if (t != e->u.proj.tuple) {
        *out = nimble_ir_proj(a, t, e->u.proj.index, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_FUNC: {
      const nimble_expr *b;
      NIMBLE_RETURN_IF_ERROR(rewrite_scoped(rw, e->u.func.body, &b));
      if (b != e->u.func.body) {
        *out = nimble_ir_func(a, e->u.func.num_type_params, e->u.func.type_params,
                              e->u.func.num_params, e->u.func.params, e->u.func.ret, b, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_MATCH: {
      const nimble_expr *s;
      NIMBLE_RETURN_IF_ERROR(rewrite(rw, e->u.match.scrutinee, &s));
      size_t n = e->u.match.num_clauses;
      nimble_match_clause_t *cs = calloc(n ? n : 1, sizeof *cs);
      if (!cs) return NIMBLE_OOM();
      nimble_status_t st = nimble_ok();
      bool changed = s != e->u.match.scrutinee;
      for (size_t i = 0; !st && i < n; i++) {
        cs[i].pattern = e->u.match.clauses[i].pattern;
        st = rewrite_scoped(rw, e->u.match.clauses[i].body, &cs[i].body);
        if (!st && cs[i].body != e->u.match.clauses[i].body) changed = true;
      }
      if (!st && changed) {
        *out = nimble_ir_match(a, s, n, cs, &e->loc);
        if (!*out) st = NIMBLE_OOM();
      }
      free(cs);
      return st;
    }
  }
  return nimble_ok();
}

static nimble_status_t rewrite(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out) {
  const nimble_expr *r;
  NIMBLE_RETURN_IF_ERROR(rewrite_inner(rw, e, &r));
  if (rw->post && e->kind != NIMBLE_EXPR_LET) return rw->post(rw, e, r, out);
  *out = r;
  return nimble_ok();
}

nimble_status_t pass_rewrite(pass_rewriter *rw, const nimble_expr *e, const nimble_expr **out) {
  return rewrite(rw, e, out);
}

nimble_status_t pass_rewrite_module(pass_rewriter *rw, nimble_module *m) {
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    const nimble_expr *f = g->func;
    const nimble_expr *body;
    nimble_status_t st = rewrite_scoped(rw, f->u.func.body, &body);
    if (st) return nimble_status_annotate(st, "in @%s", g->name);
    if (body == f->u.func.body) continue;
    const nimble_expr *nf = nimble_ir_func(rw->arena, f->u.func.num_type_params, f->u.func.type_params,
                                           f->u.func.num_params, f->u.func.params, f->u.func.ret, body,
                                           &f->loc);
    if (!nf) return NIMBLE_OOM();
    NIMBLE_RETURN_IF_ERROR(nimble_module_replace_func(m, g->name, nf));
  }
  return nimble_ok();
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

nimble_status_t pass_map_children(nimble_arena *a, const nimble_expr *e, pass_child_fn fn, void *user,
                                  const nimble_expr **out) {
  *out = e;
  switch (e->kind) {
    case NIMBLE_EXPR_CALL: {
      size_t n = e->u.call.num_args;
      const nimble_expr **args = calloc(n ? n : 1, sizeof *args);
      if (!args) return NIMBLE_OOM();
      bool changed = false;
      nimble_status_t st = nimble_ok();
      const nimble_expr *callee = e->u.call.callee;
      st = fn(user, e->u.call.callee, &callee);
      for (size_t i = 0; !st && i < n; i++) {
        st = fn(user, e->u.call.args[i], &args[i]);
        if (args[i] != e->u.call.args[i]) changed = true;
      }
      if (!st && (changed || callee != e->u.call.callee)) {
        *out = pass_call_with_args(a, e, callee, args);
        if (!*out) st = NIMBLE_OOM();
      }
      free(args);
      return st;
    }
    case NIMBLE_EXPR_IF: {
      const nimble_expr *c, *t, *f;
      NIMBLE_RETURN_IF_ERROR(fn(user, e->u.if_.cond, &c));
      NIMBLE_RETURN_IF_ERROR(fn(user, e->u.if_.then_branch, &t));
      NIMBLE_RETURN_IF_ERROR(fn(user, e->u.if_.else_branch, &f));
      if (c != e->u.if_.cond || t != e->u.if_.then_branch || f != e->u.if_.else_branch) {
        *out = nimble_ir_if(a, c, t, f, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_TUPLE: {
      size_t n = e->u.tuple.count;
      const nimble_expr **fs = calloc(n ? n : 1, sizeof *fs);
      if (!fs) return NIMBLE_OOM();
      bool changed = false;
      nimble_status_t st = nimble_ok();
      for (size_t i = 0; !st && i < n; i++) {
        st = fn(user, e->u.tuple.fields[i], &fs[i]);
        if (fs[i] != e->u.tuple.fields[i]) changed = true;
      }
      if (!st && changed) {
        *out = nimble_ir_tuple(a, n, fs, &e->loc);
        if (!*out) st = NIMBLE_OOM();
      }
      free(fs);
      return st;
    }
    case NIMBLE_EXPR_PROJ: {
      const nimble_expr *t;
      NIMBLE_RETURN_IF_ERROR(fn(user, e->u.proj.tuple, &t));
      if (t != e->u.proj.tuple) {
        *out = nimble_ir_proj(a, t, e->u.proj.index, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_FUNC: {
      const nimble_expr *b;
      NIMBLE_RETURN_IF_ERROR(fn(user, e->u.func.body, &b));
      if (b != e->u.func.body) {
        *out = nimble_ir_func(a, e->u.func.num_type_params, e->u.func.type_params,
                              e->u.func.num_params, e->u.func.params, e->u.func.ret, b, &e->loc);
        if (!*out) return NIMBLE_OOM();
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_MATCH: {
      size_t n = e->u.match.num_clauses;
      nimble_match_clause_t *cs = calloc(n ? n : 1, sizeof *cs);
      if (!cs) return NIMBLE_OOM();
      bool changed = false;
      const nimble_expr *s = e->u.match.scrutinee;
      nimble_status_t st = fn(user, e->u.match.scrutinee, &s);
      for (size_t i = 0; !st && i < n; i++) {
        cs[i].pattern = e->u.match.clauses[i].pattern;
        st = fn(user, e->u.match.clauses[i].body, &cs[i].body);
        if (!st && cs[i].body != e->u.match.clauses[i].body) changed = true;
      }
      if (!st && (changed || s != e->u.match.scrutinee)) {
        *out = nimble_ir_match(a, s, n, cs, &e->loc);
        if (!*out) st = NIMBLE_OOM();
      }
      free(cs);
      return st;
    }
    default: return nimble_ok(); /* leaves; LET is the caller's */
  }
}
