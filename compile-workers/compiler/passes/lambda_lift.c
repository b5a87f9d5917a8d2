/* Lambda lifting with closure conversion, as Relay's LambdaLift does it:
 * every function literal inside a global becomes a global of its own, so
 * that the lowering to bytecode deals only with globals.
 *
 *   fn (%v) { multiply(%v, %x) }        (%x free)
 * becomes a call of a closure constructor
 *   @main_lambda0(%x)
 *   def @main_lambda0(%x: T) -> fn(...) -> R { fn (%v) { multiply(%v, %x) } }
 * and a literal with no free variables becomes a reference to a plain
 * global (`@main_lambda1`). A global whose body is a function literal is
 * thus a closure: its parameters are the captured values (the VM's
 * AllocClosure), the inner function the code (InvokeClosure passes the
 * captured values first). Literals are lifted innermost first, so an
 * inner closure's captured values become free variables of the outer one.
 * Types come from inference: captured variables and parameters are
 * annotated, and type variables they mention become type parameters of the
 * new global. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

typedef struct lift_ctx {
  nimble_module *m;
  const nimble_typing *types;
  const char *global; /* the function being lifted from */
  unsigned counter;
} lift_ctx;

typedef struct var_walk {
  pass_map bound;
  const nimble_expr **refs;
  size_t n, cap;
  pass_map seen;
} var_walk;

static nimble_status_t bind_pattern(var_walk *w, const nimble_pattern *p) {
  if (p->kind == NIMBLE_PATTERN_VAR && !pass_map_put(&w->bound, p->var, (void *)p->var)) return NIMBLE_OOM();
  for (size_t i = 0; i < p->num_subs; i++) NIMBLE_RETURN_IF_ERROR(bind_pattern(w, p->subs[i]));
  return nimble_ok();
}

static nimble_status_t walk_vars(void *user, const nimble_expr *e, const nimble_expr **out) {
  var_walk *w = user;
  *out = e;
  while (e->kind == NIMBLE_EXPR_LET) {
    if (!pass_map_put(&w->bound, e->u.let.var, (void *)e)) return NIMBLE_OOM();
    const nimble_expr *ignored;
    NIMBLE_RETURN_IF_ERROR(walk_vars(user, e->u.let.value, &ignored));
    e = e->u.let.body;
  }
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
      if (pass_map_has(&w->seen, e)) return nimble_ok();
      if (!pass_map_put(&w->seen, e, (void *)e)) return NIMBLE_OOM();
      if (w->n == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 16;
        const nimble_expr **r = realloc(w->refs, ncap * sizeof *r);
        if (!r) return NIMBLE_OOM();
        w->refs = r;
        w->cap = ncap;
      }
      w->refs[w->n++] = e;
      return nimble_ok();
    case NIMBLE_EXPR_FUNC:
      for (size_t i = 0; i < e->u.func.num_params; i++)
        if (!pass_map_put(&w->bound, e->u.func.params[i], (void *)e)) return NIMBLE_OOM();
      break;
    case NIMBLE_EXPR_MATCH:
      for (size_t i = 0; i < e->u.match.num_clauses; i++)
        NIMBLE_RETURN_IF_ERROR(bind_pattern(w, e->u.match.clauses[i].pattern));
      break;
    default: break;
  }
  const nimble_expr *same;
  return pass_map_children(NULL, e, walk_vars, user, &same);
}

/* Type variables of t, added to vars[0..*n) once each (by id). */
static void type_vars(const nimble_type *t, const nimble_type **vars, size_t *n, size_t cap) {
  if (!t) return;
  switch (t->kind) {
    case NIMBLE_TYPE_VAR:
      for (size_t i = 0; i < *n; i++)
        if (vars[i]->u.var.id == t->u.var.id) return;
      if (*n < cap) vars[(*n)++] = t;
      return;
    case NIMBLE_TYPE_TUPLE:
      for (size_t i = 0; i < t->u.tuple.count; i++) type_vars(t->u.tuple.fields[i], vars, n, cap);
      return;
    case NIMBLE_TYPE_FUNC:
      for (size_t i = 0; i < t->u.func.num_params; i++) type_vars(t->u.func.params[i], vars, n, cap);
      type_vars(t->u.func.ret, vars, n, cap);
      return;
    case NIMBLE_TYPE_ADT:
      for (size_t i = 0; i < t->u.adt.num_args; i++) type_vars(t->u.adt.args[i], vars, n, cap);
      return;
    default: return;
  }
}

static nimble_status_t lift_post(pass_rewriter *rw, const nimble_expr *orig, const nimble_expr *e,
                                 const nimble_expr **out) {
  lift_ctx *c = rw->user;
  nimble_arena *a = rw->arena;
  *out = e;
  if (e->kind != NIMBLE_EXPR_FUNC) return nimble_ok();
  const nimble_type *ft = nimble_typing_type_of(c->types, orig);
  if (!ft || ft->kind != NIMBLE_TYPE_FUNC)
    return nimble_status_make(NIMBLE_INTERNAL, "a function literal in @%s has no type",
                              c->global);
  /* Free variables, in order of first use. */
  var_walk w;
  memset(&w, 0, sizeof w);
  const nimble_expr *ignored;
  nimble_status_t st = walk_vars(&w, e, &ignored);
  size_t nfree = 0;
  const nimble_expr **free_vars = NULL;
  if (!st && w.n) {
    free_vars = nimble_arena_calloc(a, w.n, sizeof *free_vars);
    if (!free_vars) st = NIMBLE_OOM();
  }
  for (size_t i = 0; !st && i < w.n; i++)
    if (!pass_map_has(&w.bound, w.refs[i])) free_vars[nfree++] = w.refs[i];
  pass_map_free(&w.bound);
  pass_map_free(&w.seen);
  free(w.refs);
  NIMBLE_RETURN_IF_ERROR(st);

  /* The literal with annotated parameters and result. */
  size_t np = e->u.func.num_params;
  const nimble_expr **params = nimble_arena_calloc(a, np ? np : 1, sizeof *params);
  if (!params) return NIMBLE_OOM();
  for (size_t i = 0; i < np; i++) {
    const nimble_expr *p = e->u.func.params[i];
    params[i] = p->u.var.annotation ? p
                                    : nimble_ir_var(a, p->u.var.name, ft->u.func.params[i], &p->loc);
    if (!params[i]) return NIMBLE_OOM();
    if (params[i] != p && !pass_map_put(&rw->subst, p, (void *)params[i])) return NIMBLE_OOM();
  }
  /* Captured variables become the closure global's parameters. */
  pass_rewriter inner = {0};
  inner.arena = a;
  const nimble_expr **cparams = nimble_arena_calloc(a, nfree ? nfree : 1, sizeof *cparams);
  if (!cparams) return NIMBLE_OOM();
  const nimble_type *tvars[32];
  size_t ntv = 0;
  type_vars(ft, tvars, &ntv, 32);
  for (size_t i = 0; i < nfree; i++) {
    const nimble_type *t = nimble_typing_type_of(c->types, free_vars[i]);
    if (!t) {
      pass_map_free(&inner.subst);
      return nimble_status_make(NIMBLE_INTERNAL, "%%%s in @%s has no type",
                                free_vars[i]->u.var.name, c->global);
    }
    type_vars(t, tvars, &ntv, 32);
    cparams[i] = nimble_ir_var(a, free_vars[i]->u.var.name, t, &free_vars[i]->loc);
    if (!cparams[i] || !pass_map_put(&inner.subst, free_vars[i], (void *)cparams[i])) {
      pass_map_free(&inner.subst);
      return NIMBLE_OOM();
    }
  }
  for (size_t i = 0; i < np; i++)
    if (params[i] != e->u.func.params[i] && !pass_map_put(&inner.subst, e->u.func.params[i], (void *)params[i])) {
      pass_map_free(&inner.subst);
      return NIMBLE_OOM();
    }
  const nimble_expr *body = e->u.func.body;
  st = pass_rewrite(&inner, body, &body);
  pass_map_free(&inner.subst);
  NIMBLE_RETURN_IF_ERROR(st);
  if (ntv >= 32) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "over 32 type variables");

  char *name = NULL;
  do {
    name = nimble_arena_sprintf(a, "%s_lambda%u", c->global, c->counter++);
  } while (name && nimble_module_find_func(c->m, name));
  if (!name) return NIMBLE_OOM();
  const nimble_expr *code = nimble_ir_func(a, 0, NULL, np, params, ft->u.func.ret, body, &e->loc);
  const nimble_expr *global, *ref = nimble_ir_global(a, name, &e->loc);
  if (!code || !ref) return NIMBLE_OOM();
  if (nfree == 0) {
    global = nimble_ir_func(a, ntv, tvars, np, params, ft->u.func.ret, body, &e->loc);
    *out = ref;
  } else {
    global = nimble_ir_func(a, ntv, tvars, nfree, cparams, ft, code, &e->loc);
    *out = nimble_ir_call(a, ref, nfree, free_vars, NULL, &e->loc);
  }
  if (!global || !*out) return NIMBLE_OOM();
  return nimble_module_add_func(c->m, name, global);
}

nimble_status_t nimble_passes_lift_lambdas(nimble_module *m) {
  lift_ctx c = {m, NULL, NULL, 0};
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, (nimble_typing **)&c.types),
                             "the input does not type-check");
  size_t n = nimble_module_num_funcs(m);
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    const char *name = g->name;
    c.global = name;
    c.counter = 0;
    pass_rewriter rw = {0};
    rw.arena = nimble_module_arena(m);
    rw.user = &c;
    rw.post = lift_post;
    const nimble_expr *f = g->func, *body;
    st = pass_rewrite(&rw, f->u.func.body, &body);
    pass_map_free(&rw.subst);
    if (!st && body != f->u.func.body) {
      const nimble_expr *nf = nimble_ir_func(rw.arena, f->u.func.num_type_params, f->u.func.type_params,
                                             f->u.func.num_params, f->u.func.params, f->u.func.ret, body,
                                             &f->loc);
      st = nf ? nimble_module_replace_func(m, name, nf) : NIMBLE_OOM();
    }
    if (st) st = nimble_status_annotate(st, "in @%s", name);
  }
  return st;
}
