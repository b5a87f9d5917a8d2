/* Constant folding: an operator call whose arguments are all constants is
 * evaluated now (fold_eval.c), an `if` on a constant condition becomes its
 * branch, and small constants and plain variable aliases bound by `let`
 * are propagated to their uses so that folding reaches through `let`
 * chains. Large constants (weights) stay bound: they are not evaluated and
 * not copied into every use. A projection of a tuple literal (or of a
 * variable bound to one) becomes the field when that is an atom. */
#include "passes/fold_eval.h"

/* Constants up to this many elements are propagated into their uses. */
#define FOLD_PROPAGATE_MAX 64

/* Variables bound to tuple literals, for projections. */
typedef struct fold_ctx {
  pass_map tuples;
} fold_ctx;

static nimble_status_t fold_post(pass_rewriter *rw, const nimble_expr *orig, const nimble_expr *e,
                                 const nimble_expr **out) {
  fold_ctx *c = rw->user;
  (void)orig;
  *out = e;
  if (e->kind == NIMBLE_EXPR_PROJ) {
    const nimble_expr *t = e->u.proj.tuple;
    if (t->kind == NIMBLE_EXPR_VAR) t = pass_map_get(&c->tuples, t);
    /* The field is an atom or a value the tuple held: taking it directly
     * evaluates nothing twice (a tuple's fields are bound before it in
     * A-normal form; otherwise only atoms are taken). */
    if (t && t->kind == NIMBLE_EXPR_TUPLE && e->u.proj.index < t->u.tuple.count) {
      const nimble_expr *f = t->u.tuple.fields[e->u.proj.index];
      if (f->kind == NIMBLE_EXPR_VAR || f->kind == NIMBLE_EXPR_CONSTANT || f->kind == NIMBLE_EXPR_GLOBAL)
        *out = f;
    }
    return nimble_ok();
  }
  if (e->kind == NIMBLE_EXPR_CALL && e->u.call.callee->kind == NIMBLE_EXPR_OP) {
    const nimble_expr *r;
    NIMBLE_RETURN_IF_ERROR(pass_fold_eval(rw->arena, e, &r));
    if (r) *out = r;
  } else if (e->kind == NIMBLE_EXPR_IF && e->u.if_.cond->kind == NIMBLE_EXPR_CONSTANT) {
    const nimble_const_tensor_t *c = &e->u.if_.cond->u.constant;
    if (c->dtype == NIMBLE_DTYPE_BOOL && c->rank == 0)
      *out = *(const uint8_t *)c->data ? e->u.if_.then_branch : e->u.if_.else_branch;
  }
  return nimble_ok();
}

static nimble_status_t fold_bind(pass_rewriter *rw, const nimble_expr *var, const nimble_expr *value,
                                 bool *drop) {
  fold_ctx *c = rw->user;
  if (value->kind == NIMBLE_EXPR_TUPLE && !pass_map_put(&c->tuples, var, (void *)value)) return NIMBLE_OOM();
  bool small_const = value->kind == NIMBLE_EXPR_CONSTANT &&
                     value->u.constant.num_elements <= FOLD_PROPAGATE_MAX;
  /* An annotated alias keeps its annotation's meaning: leave it bound. */
  bool alias = value->kind == NIMBLE_EXPR_VAR && !var->u.var.annotation;
  if (small_const || alias) {
    if (!pass_map_put(&rw->subst, var, (void *)value)) return NIMBLE_OOM();
    *drop = true;
  }
  return nimble_ok();
}

nimble_status_t nimble_passes_fold_constants(nimble_module *m) {
  fold_ctx c = {{0}};
  pass_rewriter rw = {0};
  rw.arena = nimble_module_arena(m);
  rw.user = &c;
  rw.post = fold_post;
  rw.bind = fold_bind;
  nimble_status_t st = pass_rewrite_module(&rw, m);
  pass_map_free(&rw.subst);
  pass_map_free(&c.tuples);
  return st;
}
