/* Let chains unrolled into arrays of bindings and built back
 * (pass_internal.h): passes that reorder, drop or add bindings work on the
 * array, not on nested lets. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

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
