/* The rewriter most passes are built on: a bottom-up walk that rebuilds
 * only what changed (unchanged subtrees are shared), substitutes
 * variables, and lets a pass replace nodes (post), drop or record `let`
 * bindings (bind) and scope its tables (enter/leave). Let chains are walked
 * in a loop, so a 100,000-`let` graph costs no stack. Also
 * pass_map_children, the one-level walk for passes that recurse themselves. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

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
