/* Dead-code elimination: a `let` whose variable is never used and whose
 * value has no effect (pass_has_effects: no calls of functions, no invoke
 * or kill, no match that may fail) is removed. The walk goes backwards
 * through each chain, so a value's uses are known before its binding is
 * reached and a whole dead chain goes in one pass. Variables are unique
 * nodes, so one "used" set serves every scope. */
#include "passes/pass_internal.h"

typedef struct dce_ctx {
  nimble_arena *arena;
  pass_map used;
} dce_ctx;

static nimble_status_t dce(void *user, const nimble_expr *e, const nimble_expr **out) {
  dce_ctx *c = user;
  if (e->kind == NIMBLE_EXPR_VAR) {
    *out = e;
    return pass_map_put(&c->used, e, (void *)e) ? nimble_ok() : NIMBLE_OOM();
  }
  if (e->kind != NIMBLE_EXPR_LET) return pass_map_children(c->arena, e, dce, c, out);
  pass_chain chain, kept = {0};
  NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
  const nimble_expr *tail;
  nimble_status_t st = dce(c, chain.tail, &tail);
  bool changed = tail != chain.tail;
  /* Kept bindings, gathered last to first. */
  for (size_t i = chain.n; !st && i-- > 0;) {
    const nimble_expr *var = chain.vars[i], *v = chain.values[i];
    if (!pass_map_has(&c->used, var) && !pass_has_effects(v)) {
      changed = true;
      continue;
    }
    const nimble_expr *nv;
    st = dce(c, v, &nv);
    if (!st) st = pass_chain_push(&kept, var, nv);
    if (nv != v) changed = true;
  }
  if (!st) {
    if (!changed) {
      *out = e;
    } else {
      for (size_t i = 0, j = kept.n; i < j / 2; i++) { /* back to program order */
        const nimble_expr *tv = kept.vars[i], *tx = kept.values[i];
        kept.vars[i] = kept.vars[j - 1 - i];
        kept.values[i] = kept.values[j - 1 - i];
        kept.vars[j - 1 - i] = tv;
        kept.values[j - 1 - i] = tx;
      }
      *out = pass_chain_build(c->arena, &kept, tail);
      if (!*out) st = NIMBLE_OOM();
    }
  }
  pass_chain_free(&chain);
  pass_chain_free(&kept);
  return st;
}

nimble_status_t nimble_passes_eliminate_dead_code(nimble_module *m) {
  dce_ctx c = {nimble_module_arena(m), {0}};
  nimble_status_t st = nimble_ok();
  for (size_t i = 0; !st && i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    const nimble_expr *f;
    st = dce(&c, g->func, &f);
    if (st) st = nimble_status_annotate(st, "in @%s", g->name);
    else if (f != g->func) st = nimble_module_replace_func(m, g->name, f);
  }
  pass_map_free(&c.used);
  return st;
}
