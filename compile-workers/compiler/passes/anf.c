/* A-normal form for calls: every argument of a call, every field of a
 * tuple, the base of a projection and the condition of an `if` become
 * atoms (variables, constants, globals, operators, constructors, function
 * literals), with the compound values bound by fresh `let`s just before
 * their use; `let`s nested in values are flattened into the enclosing
 * chain; the result of a block that is a call is bound too. Branches, arms
 * and function bodies are blocks of their own: nothing is hoisted out of
 * them, so evaluation order and conditional evaluation are unchanged.
 *
 * Fusion, explicit memory and the lowering to bytecode work on this form:
 * each operator call has its own variable. */
#include "passes/pass_internal.h"

typedef struct anf_ctx {
  nimble_arena *arena;
  pass_namer names;
} anf_ctx;

static nimble_status_t norm(anf_ctx *c, const nimble_expr *e, pass_chain *pend, const nimble_expr **out);

static bool atomic(const nimble_expr *e) {
  switch (e->kind) {
    case NIMBLE_EXPR_CALL:
    case NIMBLE_EXPR_TUPLE:
    case NIMBLE_EXPR_PROJ:
    case NIMBLE_EXPR_IF:
    case NIMBLE_EXPR_MATCH:
    case NIMBLE_EXPR_LET: return false;
    default: return true;
  }
}

static nimble_status_t bind_fresh(anf_ctx *c, const nimble_expr *v, pass_chain *pend,
                                  const nimble_expr **out) {
  const nimble_expr *var = pass_namer_var(&c->names, "t", NULL);
  if (!var) return NIMBLE_OOM();
  NIMBLE_RETURN_IF_ERROR(pass_chain_push(pend, var, v));
  *out = var;
  return nimble_ok();
}

static nimble_status_t atom(anf_ctx *c, const nimble_expr *e, pass_chain *pend, const nimble_expr **out) {
  const nimble_expr *r;
  NIMBLE_RETURN_IF_ERROR(norm(c, e, pend, &r));
  if (atomic(r)) {
    *out = r;
    return nimble_ok();
  }
  return bind_fresh(c, r, pend, out);
}

/* A block: its own bindings, ending in an atom or a non-call value. */
static nimble_status_t block(anf_ctx *c, const nimble_expr *e, const nimble_expr **out) {
  pass_chain pend = {0};
  const nimble_expr *r;
  nimble_status_t st = norm(c, e, &pend, &r);
  if (!st && r->kind == NIMBLE_EXPR_CALL) st = bind_fresh(c, r, &pend, &r);
  if (!st) {
    *out = pass_chain_build(c->arena, &pend, r);
    if (!*out) st = NIMBLE_OOM();
  }
  pass_chain_free(&pend);
  return st;
}

static nimble_status_t norm(anf_ctx *c, const nimble_expr *e, pass_chain *pend, const nimble_expr **out) {
  nimble_arena *a = c->arena;
  *out = e;
  switch (e->kind) {
    case NIMBLE_EXPR_LET:
      while (e->kind == NIMBLE_EXPR_LET) {
        const nimble_expr *v;
        NIMBLE_RETURN_IF_ERROR(norm(c, e->u.let.value, pend, &v));
        NIMBLE_RETURN_IF_ERROR(pass_chain_push(pend, e->u.let.var, v));
        e = e->u.let.body;
      }
      return norm(c, e, pend, out);
    case NIMBLE_EXPR_CALL: {
      size_t n = e->u.call.num_args;
      const nimble_expr **args = nimble_arena_calloc(a, n ? n : 1, sizeof *args);
      if (!args) return NIMBLE_OOM();
      const nimble_expr *callee;
      NIMBLE_RETURN_IF_ERROR(atom(c, e->u.call.callee, pend, &callee));
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(atom(c, e->u.call.args[i], pend, &args[i]));
      *out = pass_call_with_args(a, e, callee, args);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_TUPLE: {
      size_t n = e->u.tuple.count;
      const nimble_expr **fs = nimble_arena_calloc(a, n ? n : 1, sizeof *fs);
      if (!fs) return NIMBLE_OOM();
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(atom(c, e->u.tuple.fields[i], pend, &fs[i]));
      *out = nimble_ir_tuple(a, n, fs, &e->loc);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_PROJ: {
      const nimble_expr *t;
      NIMBLE_RETURN_IF_ERROR(atom(c, e->u.proj.tuple, pend, &t));
      *out = nimble_ir_proj(a, t, e->u.proj.index, &e->loc);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_IF: {
      const nimble_expr *cond, *t, *f;
      NIMBLE_RETURN_IF_ERROR(atom(c, e->u.if_.cond, pend, &cond));
      NIMBLE_RETURN_IF_ERROR(block(c, e->u.if_.then_branch, &t));
      NIMBLE_RETURN_IF_ERROR(block(c, e->u.if_.else_branch, &f));
      *out = nimble_ir_if(a, cond, t, f, &e->loc);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_MATCH: {
      const nimble_expr *s;
      NIMBLE_RETURN_IF_ERROR(atom(c, e->u.match.scrutinee, pend, &s));
      size_t n = e->u.match.num_clauses;
      nimble_match_clause_t *cs = nimble_arena_calloc(a, n ? n : 1, sizeof *cs);
      if (!cs) return NIMBLE_OOM();
      for (size_t i = 0; i < n; i++) {
        cs[i].pattern = e->u.match.clauses[i].pattern;
        NIMBLE_RETURN_IF_ERROR(block(c, e->u.match.clauses[i].body, &cs[i].body));
      }
      *out = nimble_ir_match(a, s, n, cs, &e->loc);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    case NIMBLE_EXPR_FUNC: {
      const nimble_expr *b;
      NIMBLE_RETURN_IF_ERROR(block(c, e->u.func.body, &b));
      *out = nimble_ir_func(a, e->u.func.num_type_params, e->u.func.type_params, e->u.func.num_params,
                            e->u.func.params, e->u.func.ret, b, &e->loc);
      return *out ? nimble_ok() : NIMBLE_OOM();
    }
    default: return nimble_ok();
  }
}

nimble_status_t nimble_passes_to_anf(nimble_module *m) {
  anf_ctx c = {nimble_module_arena(m), {0}};
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    NIMBLE_RETURN_IF_ERROR(pass_namer_init(&c.names, c.arena, g->func));
    const nimble_expr *f;
    nimble_status_t st = norm(&c, g->func, NULL, &f);
    pass_namer_deinit(&c.names);
    if (st) return nimble_status_annotate(st, "in @%s", g->name);
    if (!nimble_ir_expr_equal(f, g->func)) NIMBLE_RETURN_IF_ERROR(nimble_module_replace_func(m, g->name, f));
  }
  return nimble_ok();
}
