/* Updates in place (before fuse_ops): a scatter_nd or scatter_elements
 * whose data input nothing else can see writes into that tensor instead of
 * a copy of it (attribute inplace=1; manifest_memory then passes the data
 * tensor as the kernel's output and the kernel skips its copy).
 *
 * This is what keeps a loop that fills a preallocated tensor one row per
 * iteration linear in the number of rows: the ONNX importer's LSTM/GRU/RNN
 * write each step's h into Y with scatter_nd, and without this pass every
 * step would copy all of Y.
 *
 * A scatter S on %d, in function F, goes in place when
 *   - %d is bound in F's own scope (not captured by a function literal):
 *     let-bound to a fresh value (an operator call that is not a view:
 *     not reshape, dyn_reshape, squeeze, expand_dims, flatten, nor a memory
 *     operator), or an owned parameter of a global (below);
 *   - %d appears once among S's arguments, as the data, and every other
 *     occurrence of %d in F is in another branch of an `if` or `match`
 *     that S is in: on any path through F, S is its only use.
 * A parameter of global G is owned when some scatter on it satisfies the
 * second rule, G is called directly (never used as a value), has at least
 * one call, and is not `main` (the entry: its inputs are the caller's
 * memory). Every call of G must then hand over a tensor it gives up: an
 * argument that is, at the call, what the two rules say of a scatter's
 * data (fresh or owned, the call its only use on that path). Where an
 * argument is not (a constant, an entry input, a value used again later),
 * a `copy` is inserted before the call, so the callee owns what it gets.
 * For a loop (a self-recursive function), the recursive call passes the
 * in-place result on; the first call copies at most once.
 *
 * Variables are unique nodes (pointer identity), so occurrences are
 * counted per node. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

/* A branch taken on the way to an occurrence: an if (0 then, 1 else) or a
 * match arm. */
typedef struct branch_step {
  const nimble_expr *node;
  size_t branch;
} branch_step;

/* One occurrence of a variable. */
typedef struct occurrence {
  const nimble_expr *var;
  const nimble_expr *call; /* the call it is an argument of, or NULL */
  size_t arg;              /* its position there */
  size_t scope;            /* function scope it is in */
  size_t path_at, path_len; /* into walk.paths */
} occurrence;

/* A binding: what a variable is bound to, and in which scope. */
typedef struct binding {
  const nimble_expr *value; /* let value; NULL for a parameter */
  size_t scope;
  bool param_of_top; /* a parameter of the global itself (scope 0) */
} binding;

typedef struct walk {
  branch_step *stack;
  size_t depth, stack_cap;
  branch_step *paths;
  size_t paths_n, paths_cap;
  occurrence *occ;
  size_t n_occ, occ_cap;
  pass_map first_occ;  /* var -> index + 1 of a list head (chained below) */
  size_t *next_occ;    /* per occurrence: index + 1 of the next of that var */
  size_t next_cap;
  pass_map bindings;   /* var -> binding* */
  binding *binds;
  size_t n_binds, binds_cap;
  size_t scope, n_scopes;
  /* Calls of scatter ops and of globals, in walk order. */
  const nimble_expr **calls;
  size_t *call_scope, *call_path_at, *call_path_len;
  size_t n_calls, calls_cap;
} walk;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * elem);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

static void walk_free(walk *w) {
  free(w->stack);
  free(w->paths);
  free(w->occ);
  free(w->next_occ);
  free(w->binds);
  free(w->calls);
  free(w->call_scope);
  free(w->call_path_at);
  free(w->call_path_len);
  pass_map_free(&w->first_occ);
  pass_map_free(&w->bindings);
  memset(w, 0, sizeof *w);
}

static bool save_path(walk *w, size_t *at, size_t *len) {
  *at = w->paths_n;
  *len = w->depth;
  if (w->depth == 0) return true; /* the function's top: nothing to copy (stack may be NULL) */
  if (!grow((void **)&w->paths, &w->paths_cap, w->paths_n + w->depth, sizeof *w->paths)) return false;
  memcpy(w->paths + w->paths_n, w->stack, w->depth * sizeof *w->stack);
  *at = w->paths_n;
  *len = w->depth;
  w->paths_n += w->depth;
  return true;
}

static nimble_status_t record_occ(walk *w, const nimble_expr *var, const nimble_expr *call, size_t arg) {
  if (!grow((void **)&w->occ, &w->occ_cap, w->n_occ + 1, sizeof *w->occ) ||
      !grow((void **)&w->next_occ, &w->next_cap, w->n_occ + 1, sizeof *w->next_occ))
    return NIMBLE_OOM();
  occurrence *o = &w->occ[w->n_occ];
  o->var = var;
  o->call = call;
  o->arg = arg;
  o->scope = w->scope;
  if (!save_path(w, &o->path_at, &o->path_len)) return NIMBLE_OOM();
  /* Prepend to the variable's list. */
  w->next_occ[w->n_occ] = (size_t)(uintptr_t)pass_map_get(&w->first_occ, var);
  w->n_occ++;
  return pass_map_put(&w->first_occ, var, (void *)(uintptr_t)w->n_occ) ? nimble_ok() : NIMBLE_OOM();
}

static nimble_status_t record_bind(walk *w, const nimble_expr *var, const nimble_expr *value, bool top_param) {
  if (!grow((void **)&w->binds, &w->binds_cap, w->n_binds + 1, sizeof *w->binds)) return NIMBLE_OOM();
  /* The map holds indices: the array may move as it grows. */
  w->binds[w->n_binds] = (binding){value, w->scope, top_param};
  w->n_binds++;
  return pass_map_put(&w->bindings, var, (void *)(uintptr_t)w->n_binds) ? nimble_ok() : NIMBLE_OOM();
}

static const binding *binding_of(const walk *w, const nimble_expr *var) {
  size_t i = (size_t)(uintptr_t)pass_map_get(&w->bindings, var);
  return i ? &w->binds[i - 1] : NULL;
}

static bool is_scatter(const nimble_expr *e) {
  return pass_is_op_call(e, "scatter_nd") || pass_is_op_call(e, "scatter_elements");
}

static bool is_global_call(const nimble_expr *e) {
  return e->kind == NIMBLE_EXPR_CALL && e->u.call.callee->kind == NIMBLE_EXPR_GLOBAL;
}

static nimble_status_t record_call(walk *w, const nimble_expr *call) {
  size_t n = w->n_calls + 1;
  if (!grow((void **)&w->calls, &w->calls_cap, n, sizeof *w->calls)) return NIMBLE_OOM();
  /* The side arrays share calls_cap: grow them to it. */
  size_t *arrs[3] = {w->call_scope, w->call_path_at, w->call_path_len};
  for (int i = 0; i < 3; i++) {
    size_t *q = realloc(arrs[i], w->calls_cap * sizeof *q);
    if (!q) return NIMBLE_OOM();
    arrs[i] = q;
  }
  w->call_scope = arrs[0];
  w->call_path_at = arrs[1];
  w->call_path_len = arrs[2];
  w->calls[w->n_calls] = call;
  w->call_scope[w->n_calls] = w->scope;
  if (!save_path(w, &w->call_path_at[w->n_calls], &w->call_path_len[w->n_calls])) return NIMBLE_OOM();
  w->n_calls++;
  return nimble_ok();
}

static nimble_status_t push_branch(walk *w, const nimble_expr *node, size_t branch) {
  if (!grow((void **)&w->stack, &w->stack_cap, w->depth + 1, sizeof *w->stack)) return NIMBLE_OOM();
  w->stack[w->depth++] = (branch_step){node, branch};
  return nimble_ok();
}

static nimble_status_t walk_pattern(walk *w, const nimble_pattern *p) {
  if (!p) return nimble_ok();
  if (p->kind == NIMBLE_PATTERN_VAR) return record_bind(w, p->var, NULL, false);
  for (size_t i = 0; i < p->num_subs; i++) NIMBLE_RETURN_IF_ERROR(walk_pattern(w, p->subs[i]));
  return nimble_ok();
}

static nimble_status_t walk_expr(walk *w, const nimble_expr *e) {
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
      return record_occ(w, e, NULL, 0);
    case NIMBLE_EXPR_CALL: {
      if (is_scatter(e) || is_global_call(e)) NIMBLE_RETURN_IF_ERROR(record_call(w, e));
      /* A global as a callee is not a use of it as a value. */
      if (e->u.call.callee->kind != NIMBLE_EXPR_GLOBAL) NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.call.callee));
      for (size_t i = 0; i < e->u.call.num_args; i++) {
        const nimble_expr *a = e->u.call.args[i];
        if (a->kind == NIMBLE_EXPR_VAR) NIMBLE_RETURN_IF_ERROR(record_occ(w, a, e, i));
        else NIMBLE_RETURN_IF_ERROR(walk_expr(w, a));
      }
      return nimble_ok();
    }
    case NIMBLE_EXPR_LET:
      for (; e->kind == NIMBLE_EXPR_LET; e = e->u.let.body) {
        NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.let.value));
        NIMBLE_RETURN_IF_ERROR(record_bind(w, e->u.let.var, e->u.let.value, false));
      }
      return walk_expr(w, e);
    case NIMBLE_EXPR_IF:
      NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.if_.cond));
      for (size_t b = 0; b < 2; b++) {
        NIMBLE_RETURN_IF_ERROR(push_branch(w, e, b));
        NIMBLE_RETURN_IF_ERROR(walk_expr(w, b ? e->u.if_.else_branch : e->u.if_.then_branch));
        w->depth--;
      }
      return nimble_ok();
    case NIMBLE_EXPR_MATCH:
      NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.match.scrutinee));
      for (size_t i = 0; i < e->u.match.num_clauses; i++) {
        NIMBLE_RETURN_IF_ERROR(push_branch(w, e, i));
        NIMBLE_RETURN_IF_ERROR(walk_pattern(w, e->u.match.clauses[i].pattern));
        NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.match.clauses[i].body));
        w->depth--;
      }
      return nimble_ok();
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++) NIMBLE_RETURN_IF_ERROR(walk_expr(w, e->u.tuple.fields[i]));
      return nimble_ok();
    case NIMBLE_EXPR_PROJ:
      return walk_expr(w, e->u.proj.tuple);
    case NIMBLE_EXPR_FUNC: {
      /* A function literal is a scope of its own: it may run many times,
       * so what it captures is never its to update. */
      size_t outer = w->scope;
      w->scope = ++w->n_scopes;
      nimble_status_t s = nimble_ok();
      for (size_t i = 0; !s && i < e->u.func.num_params; i++) s = record_bind(w, e->u.func.params[i], NULL, false);
      if (!s) s = walk_expr(w, e->u.func.body);
      w->scope = outer;
      return s;
    }
    case NIMBLE_EXPR_GLOBAL:
      /* A global used as a value (not called): recorded like a variable,
       * so its parameters are never owned. */
      return record_occ(w, e, NULL, 0);
    default:
      return nimble_ok();
  }
}

/* Whether the two paths part in different branches of one if or match. */
static bool exclusive(const walk *w, size_t a_at, size_t a_len, size_t b_at, size_t b_len) {
  size_t n = a_len < b_len ? a_len : b_len;
  for (size_t i = 0; i < n; i++) {
    const branch_step *x = &w->paths[a_at + i], *y = &w->paths[b_at + i];
    if (x->node != y->node) return false;
    if (x->branch != y->branch) return true;
  }
  return false;
}

static bool is_view_op(const nimble_op *op) {
  static const char *const views[] = {"reshape", "dyn_reshape", "squeeze", "expand_dims", "flatten"};
  for (size_t i = 0; i < sizeof views / sizeof *views; i++)
    if (!strcmp(op->name, views[i])) return true;
  return false;
}

/* A value whose result is memory of its own, nobody else's. */
static bool fresh_value(const nimble_expr *v) {
  const nimble_op *op = v ? pass_called_op(v) : NULL;
  return op && !is_view_op(op) && !pass_is_memory_op(op);
}

/* Whether `var`, handed to `call` at argument `arg` (in `scope`, at the
 * call's path), is given up there: bound in that scope to a fresh value or
 * an owned parameter, used once by the call, and nowhere else on a path
 * through the call. */
static bool given_up(const walk *w, const pass_map *owned_params, const nimble_expr *var,
                     const nimble_expr *call, size_t scope, size_t path_at, size_t path_len) {
  if (var->kind != NIMBLE_EXPR_VAR) return false;
  const binding *b = binding_of(w, var);
  if (!b || b->scope != scope) return false;
  if (b->value ? !fresh_value(b->value) : !(b->param_of_top && pass_map_has(owned_params, var))) return false;
  size_t in_call = 0;
  for (size_t i = (size_t)(uintptr_t)pass_map_get(&w->first_occ, var); i; i = w->next_occ[i - 1]) {
    const occurrence *o = &w->occ[i - 1];
    if (o->call == call) {
      in_call++;
      continue;
    }
    if (!exclusive(w, o->path_at, o->path_len, path_at, path_len)) return false;
  }
  return in_call == 1;
}

typedef struct inplace_ctx {
  nimble_module *m;
  nimble_arena *arena;
  pass_map inplace; /* scatter call -> itself: goes in place */
  pass_map copies;  /* global call -> bitmask + 1 of the arguments to copy */
  pass_namer names;
  nimble_inplace_stats_t stats;
} inplace_ctx;

static bool already_in_place(const nimble_expr *call) {
  const nimble_op *op = pass_called_op(call);
  return nimble_attrs_int(op, &call->u.call.attrs, "inplace") != 0;
}

/* The scatter at calls[k] can update its data in place, given which
 * parameters are owned. */
static bool scatter_qualifies(const walk *w, const pass_map *owned_params, size_t k) {
  const nimble_expr *s = w->calls[k];
  if (!is_scatter(s) || s->u.call.num_args < 1) return false;
  return given_up(w, owned_params, s->u.call.args[0], s, w->call_scope[k], w->call_path_at[k],
                  w->call_path_len[k]);
}

static size_t global_index(const nimble_module *m, const char *name) {
  size_t n = nimble_module_num_funcs(m);
  for (size_t j = 0; j < n; j++)
    if (!strcmp(nimble_module_func_at(m, j)->name, name)) return j;
  return n;
}

static nimble_status_t analyse(inplace_ctx *c) {
  size_t n = nimble_module_num_funcs(c->m), cap = n ? n : 1;
  walk *walks = calloc(cap, sizeof *walks);
  uint64_t *owned = calloc(cap, sizeof *owned);
  pass_map *owned_params = calloc(cap, sizeof *owned_params);
  size_t *ncalls = calloc(cap, sizeof *ncalls); /* direct calls of each global */
  bool *as_value = calloc(cap, sizeof *as_value); /* used other than as a callee */
  nimble_status_t st = nimble_ok();
  if (!walks || !owned || !owned_params || !ncalls || !as_value) st = NIMBLE_OOM();
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(c->m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    walk *w = &walks[i];
    for (size_t p = 0; !st && p < g->func->u.func.num_params; p++)
      st = record_bind(w, g->func->u.func.params[p], NULL, true);
    if (!st) st = walk_expr(w, g->func->u.func.body);
  }
  for (size_t i = 0; !st && i < n; i++) {
    const walk *w = &walks[i];
    for (size_t k = 0; k < w->n_calls; k++) {
      if (!is_global_call(w->calls[k])) continue;
      size_t j = global_index(c->m, w->calls[k]->u.call.callee->u.global.name);
      if (j < n) ncalls[j]++;
    }
    for (size_t k = 0; k < w->n_occ; k++) {
      if (w->occ[k].var->kind != NIMBLE_EXPR_GLOBAL) continue;
      size_t j = global_index(c->m, w->occ[k].var->u.global.name);
      if (j < n) as_value[j] = true;
    }
  }
  /* Owned parameters: those some scatter would update if they were owned.
   * Whether one parameter is owned does not change whether another's
   * scatter qualifies (given_up looks at its own variable only), so one
   * sweep settles them. */
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(c->m, i);
    const nimble_expr *f = g->func;
    if (nimble_passes_is_primitive(g->name) || !strcmp(g->name, "main") || ncalls[i] == 0 || as_value[i])
      continue;
    pass_map all = {0};
    for (size_t p = 0; !st && p < f->u.func.num_params && p < 64; p++)
      if (!pass_map_put(&all, f->u.func.params[p], (void *)f)) st = NIMBLE_OOM();
    uint64_t mask = 0;
    for (size_t k = 0; !st && k < walks[i].n_calls; k++) {
      if (!scatter_qualifies(&walks[i], &all, k)) continue;
      for (size_t p = 0; p < f->u.func.num_params && p < 64; p++)
        if (f->u.func.params[p] == walks[i].calls[k]->u.call.args[0]) mask |= (uint64_t)1 << p;
    }
    pass_map_free(&all);
    for (size_t p = 0; !st && p < f->u.func.num_params && p < 64; p++)
      if ((mask >> p & 1) && !pass_map_put(&owned_params[i], f->u.func.params[p], (void *)f)) st = NIMBLE_OOM();
    owned[i] = mask;
  }
  /* The scatters that go in place, and the copies that calls of owning
   * globals need. */
  for (size_t i = 0; !st && i < n; i++) {
    const walk *w = &walks[i];
    for (size_t k = 0; !st && k < w->n_calls; k++) {
      const nimble_expr *call = w->calls[k];
      if (is_scatter(call)) {
        if (!already_in_place(call) && scatter_qualifies(w, &owned_params[i], k)) {
          if (!pass_map_put(&c->inplace, call, (void *)call)) st = NIMBLE_OOM();
          c->stats.in_place++;
        }
        continue;
      }
      size_t j = global_index(c->m, call->u.call.callee->u.global.name);
      if (j == n || !owned[j]) continue;
      uint64_t need = 0;
      for (size_t a = 0; a < call->u.call.num_args && a < 64; a++)
        if ((owned[j] >> a & 1) && !given_up(w, &owned_params[i], call->u.call.args[a], call, w->call_scope[k],
                                             w->call_path_at[k], w->call_path_len[k]))
          need |= (uint64_t)1 << a;
      if (need) {
        if (!pass_map_put(&c->copies, call, (void *)(uintptr_t)(need + 1))) st = NIMBLE_OOM();
        c->stats.copies += (size_t)__builtin_popcountll(need);
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (walks) walk_free(&walks[i]);
    if (owned_params) pass_map_free(&owned_params[i]);
  }
  free(walks);
  free(owned);
  free(owned_params);
  free(ncalls);
  free(as_value);
  return st;
}

/* ---- Rewriting ---------------------------------------------------------- */

/* The scatter with inplace=1. */
static nimble_status_t in_place_call(inplace_ctx *c, const nimble_expr *call, const nimble_expr **out) {
  const nimble_op *op = pass_called_op(call);
  size_t n = op->num_attrs, at = n;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(op->attrs[i].name, "inplace")) at = i;
  if (at == n || call->u.call.attrs.count != n)
    return nimble_status_make(NIMBLE_INTERNAL, "%s has no inplace attribute", op->name);
  nimble_attr_value_t *vals = nimble_arena_calloc(c->arena, n, sizeof *vals);
  if (!vals) return NIMBLE_OOM();
  memcpy(vals, call->u.call.attrs.values, n * sizeof *vals);
  vals[at].i = 1;
  nimble_attrs_t attrs = {n, vals};
  *out = nimble_ir_call(c->arena, call->u.call.callee, call->u.call.num_args, call->u.call.args, &attrs, &call->loc);
  return *out ? nimble_ok() : NIMBLE_OOM();
}

/* Pushes `let %own = copy(arg)` for each argument of `call` in `need` and
 * gives the call with those arguments replaced. */
static nimble_status_t copied_call(inplace_ctx *c, pass_chain *chain, const nimble_expr *call, uint64_t need,
                                   const nimble_expr **out) {
  size_t n = call->u.call.num_args;
  const nimble_expr **args = nimble_arena_calloc(c->arena, n ? n : 1, sizeof *args);
  if (!args) return NIMBLE_OOM();
  for (size_t a = 0; a < n; a++) {
    args[a] = call->u.call.args[a];
    if (!(a < 64 && (need >> a & 1))) continue;
    const nimble_expr *cp, *v = pass_namer_var(&c->names, "own", NULL);
    if (!v) return NIMBLE_OOM();
    NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "copy", 1, &args[a], NULL, 0, &cp));
    NIMBLE_RETURN_IF_ERROR(pass_chain_push(chain, v, cp));
    args[a] = v;
  }
  *out = pass_call_with_args(c->arena, call, call->u.call.callee, args);
  return *out ? nimble_ok() : NIMBLE_OOM();
}

static uint64_t copies_of(const inplace_ctx *c, const nimble_expr *e) {
  uintptr_t v = (uintptr_t)pass_map_get(&c->copies, e);
  return v ? (uint64_t)(v - 1) : 0;
}

static nimble_status_t rewrite(void *user, const nimble_expr *e, const nimble_expr **out);

static nimble_status_t rewrite_chain(inplace_ctx *c, const nimble_expr *e, const nimble_expr **out) {
  pass_chain chain, res = {0};
  NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; !st && i < chain.n; i++) {
    const nimble_expr *v = chain.values[i];
    uint64_t need = copies_of(c, v);
    if (need) st = copied_call(c, &res, v, need, &v);
    else st = rewrite(c, v, &v);
    if (!st) st = pass_chain_push(&res, chain.vars[i], v);
  }
  const nimble_expr *tail = chain.tail;
  if (!st) {
    uint64_t need = copies_of(c, tail);
    st = need ? copied_call(c, &res, tail, need, &tail) : rewrite(c, tail, &tail);
  }
  if (!st) {
    *out = pass_chain_build(c->arena, &res, tail);
    if (!*out) st = NIMBLE_OOM();
  }
  pass_chain_free(&chain);
  pass_chain_free(&res);
  return st;
}

static nimble_status_t rewrite(void *user, const nimble_expr *e, const nimble_expr **out) {
  inplace_ctx *c = user;
  if (e->kind == NIMBLE_EXPR_LET || copies_of(c, e)) return rewrite_chain(c, e, out);
  if (pass_map_has(&c->inplace, e)) return in_place_call(c, e, out);
  return pass_map_children(c->arena, e, rewrite, c, out);
}

nimble_status_t nimble_passes_update_in_place_stats(nimble_module *m, nimble_inplace_stats_t *stats) {
  inplace_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  nimble_status_t st = analyse(&c);
  size_t n = nimble_module_num_funcs(m);
  for (size_t i = 0; !st && i < n && (c.inplace.count || c.copies.count); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    const char *name = g->name;
    const nimble_expr *f = g->func, *nf;
    st = pass_namer_init(&c.names, c.arena, f);
    if (!st) st = rewrite(&c, f, &nf);
    pass_namer_deinit(&c.names);
    if (!st && nf != f) st = nimble_module_replace_func(m, name, nf);
    if (st) st = nimble_status_annotate(st, "in @%s", name);
  }
  if (!st && stats) *stats = c.stats;
  pass_map_free(&c.inplace);
  pass_map_free(&c.copies);
  return st;
}

nimble_status_t nimble_passes_update_in_place(nimble_module *m) {
  return nimble_passes_update_in_place_stats(m, NULL);
}
