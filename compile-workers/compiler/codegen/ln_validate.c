/* Kernel validation: every variable is used inside its binding, only
 * mutable variables are assigned, parameters belong to the kernel, and a
 * parallel loop's body touches no accumulator declared outside it (tasks
 * run concurrently, so such a variable would be a data race). */
#include "ln_internal.h"

typedef struct scope {
  const nimble_ln_var *vars[256];
  int depth[256]; /* parallel-loop nesting level at which each was bound */
  int n;
  int parallel_depth;
  const nimble_ln_kernel *k;
} scope;

static int scope_find(const scope *s, const nimble_ln_var *v) {
  for (int i = s->n - 1; i >= 0; i--)
    if (s->vars[i] == v) return i;
  return -1;
}

static nimble_status_t check_param(const scope *s, const nimble_ln_param *p) {
  for (int i = 0; i < s->k->n_params; i++)
    if (s->k->params[i] == p) return nimble_ok();
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s': parameter '%s' is not one of its own",
                            s->k->name, p ? p->name : "(null)");
}

static nimble_status_t check_var_use(const scope *s, const nimble_ln_var *v, const char *what) {
  int i = scope_find(s, v);
  if (i < 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s': variable '%s' is %s outside its binding",
                              s->k->name, v->name, what);
  if (v->mutable_ && s->depth[i] < s->parallel_depth)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "kernel '%s': accumulator '%s' is %s inside a parallel loop but declared "
                              "outside it",
                              s->k->name, v->name, what);
  return nimble_ok();
}

static nimble_status_t check_expr(const scope *s, const nimble_ln_expr *e) {
  if (!e) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s': missing expression", s->k->name);
  switch (e->kind) {
  case NIMBLE_LN_E_VAR: return check_var_use(s, e->var, "read");
  case NIMBLE_LN_E_SHAPE: return check_param(s, e->param);
  case NIMBLE_LN_E_LOAD: NIMBLE_RETURN_IF_ERROR(check_param(s, e->param)); return check_expr(s, e->a);
  case NIMBLE_LN_E_UNARY:
  case NIMBLE_LN_E_CAST: return check_expr(s, e->a);
  case NIMBLE_LN_E_BINARY: NIMBLE_RETURN_IF_ERROR(check_expr(s, e->a)); return check_expr(s, e->b);
  case NIMBLE_LN_E_SELECT:
  case NIMBLE_LN_E_FMA:
    NIMBLE_RETURN_IF_ERROR(check_expr(s, e->a));
    NIMBLE_RETURN_IF_ERROR(check_expr(s, e->b));
    return check_expr(s, e->c);
  default: return nimble_ok();
  }
}

static nimble_status_t push(scope *s, const nimble_ln_var *v) {
  if (scope_find(s, v) >= 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "kernel '%s': variable '%s' is bound again inside its own scope",
                              s->k->name, v->name);
  if (s->n >= 256)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "kernel '%s': more than 256 nested bindings",
                              s->k->name);
  s->vars[s->n] = v;
  s->depth[s->n] = s->parallel_depth;
  s->n++;
  return nimble_ok();
}

static nimble_status_t check_stmt(scope *s, const nimble_ln_stmt *st) {
  if (!st) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s': missing statement", s->k->name);
  nimble_status_t status = nimble_ok();
  switch (st->kind) {
  case NIMBLE_LN_S_SEQ:
    for (size_t i = 0; i < st->n_stmts; i++) NIMBLE_RETURN_IF_ERROR(check_stmt(s, st->stmts[i]));
    return nimble_ok();
  case NIMBLE_LN_S_FOR:
    NIMBLE_RETURN_IF_ERROR(check_expr(s, st->begin));
    NIMBLE_RETURN_IF_ERROR(check_expr(s, st->end));
    if (st->loop_kind == NIMBLE_LN_PARALLEL) s->parallel_depth++;
    status = push(s, st->var);
    if (!status) status = check_stmt(s, st->body), s->n--;
    if (st->loop_kind == NIMBLE_LN_PARALLEL) s->parallel_depth--;
    return status;
  case NIMBLE_LN_S_LET:
  case NIMBLE_LN_S_DECL:
    NIMBLE_RETURN_IF_ERROR(check_expr(s, st->value));
    NIMBLE_RETURN_IF_ERROR(push(s, st->var));
    status = check_stmt(s, st->body);
    s->n--;
    return status;
  case NIMBLE_LN_S_ASSIGN:
    if (!st->var->mutable_)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s': '%s' is assigned but not declared mutable",
                                s->k->name, st->var->name);
    NIMBLE_RETURN_IF_ERROR(check_var_use(s, st->var, "assigned"));
    return check_expr(s, st->value);
  case NIMBLE_LN_S_STORE:
    NIMBLE_RETURN_IF_ERROR(check_param(s, st->param));
    NIMBLE_RETURN_IF_ERROR(check_expr(s, st->index));
    return check_expr(s, st->value);
  case NIMBLE_LN_S_IF:
    NIMBLE_RETURN_IF_ERROR(check_expr(s, st->value));
    NIMBLE_RETURN_IF_ERROR(check_stmt(s, st->body));
    return st->else_ ? check_stmt(s, st->else_) : nimble_ok();
  case NIMBLE_LN_S_CHECK: return check_expr(s, st->value);
  case NIMBLE_LN_S_SGEMM: {
    const nimble_ln_sgemm_desc_t *d = &st->sgemm;
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->a));
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->b));
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->c));
    if (d->epilogue && d->row_bias) {
      NIMBLE_RETURN_IF_ERROR(check_param(s, d->row_bias));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->row_bias_offset));
    }
    if (d->epilogue && d->col_bias) {
      NIMBLE_RETURN_IF_ERROR(check_param(s, d->col_bias));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->col_bias_offset));
    }
    if (d->epilogue && d->residual) {
      NIMBLE_RETURN_IF_ERROR(check_param(s, d->residual));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->residual_offset));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->ldr));
    }
    const nimble_ln_expr *es[] = {d->m, d->n, d->k, d->a_offset, d->b_offset, d->c_offset, d->lda, d->ldb, d->ldc};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) NIMBLE_RETURN_IF_ERROR(check_expr(s, es[i]));
    return nimble_ok();
  }
  case NIMBLE_LN_S_CONV3X3: {
    const nimble_ln_conv3x3_desc_t *d = &st->conv3x3;
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->x));
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->w));
    NIMBLE_RETURN_IF_ERROR(check_param(s, d->y));
    if (d->row_bias) {
      NIMBLE_RETURN_IF_ERROR(check_param(s, d->row_bias));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->row_bias_offset));
    }
    if (d->residual) {
      NIMBLE_RETURN_IF_ERROR(check_param(s, d->residual));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->residual_offset));
      NIMBLE_RETURN_IF_ERROR(check_expr(s, d->ldr));
    }
    const nimble_ln_expr *es[] = {d->x_offset, d->w_offset, d->y_offset, d->c,  d->h, d->width,
                                  d->k,        d->pad_t,    d->pad_l,    d->oh, d->ow};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) NIMBLE_RETURN_IF_ERROR(check_expr(s, es[i]));
    return nimble_ok();
  }
  }
  return nimble_status_make(NIMBLE_INTERNAL, "kernel '%s': unknown statement kind %d", s->k->name, (int)st->kind);
}

nimble_status_t nimble_ln_kernel_validate(const nimble_ln_kernel *k) {
  if (!k) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "no kernel");
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_arena_status(k->arena), "kernel '%s'", k->name);
  if (!k->body) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s' has no body", k->name);
  int n_args = k->n_params;
  while (n_args > 0 && k->params[n_args - 1]->scratch) n_args--;
  if (n_args == 0 || !k->params[n_args - 1]->is_output)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel '%s' has no output parameter", k->name);
  scope s = {.k = k};
  return check_stmt(&s, k->body);
}
