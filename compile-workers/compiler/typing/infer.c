/* Type inference over a module (see nimble/typing.h for the rules).
 *
 * One pass per global function, in module order. Each global first gets a
 * signature from its annotations (fresh variables where one is missing);
 * uses of a global instantiate the signature's type parameters and
 * symbolic dims afresh, so recursion and polymorphic ADT functions check.
 * The type of every expression goes into a pointer-keyed hash table; at the
 * end every recorded type has the final substitution applied. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/ptr_map.h"
#include "nimble/typing.h"

typedef struct global_sig {
  const char *name;
  const nimble_type *type; /* a function type; type_params as declared */
  size_t num_dim_vars;     /* symbolic dims of the annotations, generalized */
  uint32_t *dim_vars;
  const char **dim_names;
} global_sig;

struct nimble_typing {
  nimble_arena *arena;
  nimble_ptr_map types; /* expression -> its type, in the arena */
  global_sig *globals;
  size_t num_globals;
};

typedef struct infer_ctx {
  const nimble_module *m;
  nimble_arena *arena;
  nimble_subst *s;
  nimble_typing *t;
} infer_ctx;

/* ---- the expression -> type table ---------------------------------------- */

static nimble_status_t record(infer_ctx *c, const nimble_expr *e, const nimble_type *ty) {
  return nimble_ptr_map_put(&c->t->types, e, (void *)ty) ? nimble_ok() : NIMBLE_OOM_IN("type inference");
}

const nimble_type *nimble_typing_type_of(const nimble_typing *t, const nimble_expr *e) {
  return nimble_ptr_map_get(&t->types, e);
}

const nimble_type *nimble_typing_global_type(const nimble_typing *t, const char *name) {
  for (size_t i = 0; i < t->num_globals; i++)
    if (strcmp(t->globals[i].name, name) == 0) return t->globals[i].type;
  return NULL;
}

/* ---- messages ------------------------------------------------------------- */

/* A source place is printed with "%s%s" from LOC(loc, buf): the file, of
 * any length, then ":line:col" (or nothing), which fits `loc_tail` always. */
typedef char loc_tail[24];
static const char *loc_tail_str(const nimble_src_loc_t *loc, loc_tail buf) {
  buf[0] = '\0';
  if (loc->line) snprintf(buf, sizeof(loc_tail), ":%u:%u", loc->line, loc->col);
  return buf;
}
#define LOC(l, buf) ((l)->file ? (l)->file : "<built IR>"), loc_tail_str((l), (buf))

/* Prefixes a failure with the construct, its place and a brief print. */
static nimble_status_t at_expr(nimble_status_t st, const char *what, const nimble_expr *e) {
  if (!st) return st;
  loc_tail loc;
  char brief[96]; /* a brief print: cut on purpose */
  nimble_ir_expr_brief(e, brief, sizeof brief);
  return nimble_status_annotate(st, "in %s at %s%s (%s)", what, LOC(&e->loc, loc), brief);
}

/* ---- instantiation ---------------------------------------------------------- */

typedef struct renaming {
  size_t num_types;
  const uint32_t *type_ids;
  const nimble_type *const *types;
  size_t num_dims;
  const uint32_t *dim_ids;
  const nimble_dim_t *dims;
} renaming;

static const nimble_type *rename_type(nimble_arena *a, const renaming *r, const nimble_type *t);

static bool rename_list(nimble_arena *a, const renaming *r, size_t n, const nimble_type *const *in,
                        const nimble_type ***out) {
  *out = NULL;
  if (!n) return true;
  const nimble_type **arr = nimble_arena_calloc(a, n, sizeof(*arr));
  if (!arr) return false;
  for (size_t i = 0; i < n; i++)
    if (!(arr[i] = rename_type(a, r, in[i]))) return false;
  *out = arr;
  return true;
}

static const nimble_type *rename_type(nimble_arena *a, const renaming *r, const nimble_type *t) {
  switch (t->kind) {
    case NIMBLE_TYPE_UNRANKED_TENSOR: return t;
    case NIMBLE_TYPE_VAR:
      for (size_t i = 0; i < r->num_types; i++)
        if (r->type_ids[i] == t->u.var.id) return r->types[i];
      return t;
    case NIMBLE_TYPE_TENSOR: {
      size_t rank = t->u.tensor.rank;
      if (!r->num_dims || rank > 64) return t;
      nimble_dim_t dims[64];
      for (size_t i = 0; i < rank; i++) {
        dims[i] = t->u.tensor.dims[i];
        if (dims[i].kind != NIMBLE_DIM_VAR) continue;
        for (size_t k = 0; k < r->num_dims; k++)
          if (r->dim_ids[k] == dims[i].var_id) dims[i] = r->dims[k];
      }
      return nimble_type_tensor(a, t->u.tensor.dtype, rank, dims);
    }
    case NIMBLE_TYPE_TUPLE: {
      const nimble_type **f;
      if (!rename_list(a, r, t->u.tuple.count, t->u.tuple.fields, &f)) return NULL;
      return nimble_type_tuple(a, t->u.tuple.count, f);
    }
    case NIMBLE_TYPE_ADT: {
      const nimble_type **args;
      if (!rename_list(a, r, t->u.adt.num_args, t->u.adt.args, &args)) return NULL;
      return nimble_type_adt(a, t->u.adt.name, t->u.adt.num_args, args);
    }
    case NIMBLE_TYPE_FUNC: {
      const nimble_type **p, *ret;
      if (!rename_list(a, r, t->u.func.num_params, t->u.func.params, &p)) return NULL;
      if (!(ret = rename_type(a, r, t->u.func.ret))) return NULL;
      return nimble_type_func(a, 0, NULL, t->u.func.num_params, p, ret);
    }
  }
  return t;
}

/* A global's signature with fresh type parameters and symbolic dims. */
static nimble_status_t instantiate_global(infer_ctx *c, const global_sig *g,
                                          const nimble_type **out) {
  /* The signature as known so far: a result the callee did not declare is
   * a type variable bound to its inferred type, which mentions the callee's
   * symbols; applied first, they are renamed with the rest. (Renaming the
   * bare variable kept the callee's own `k` in every caller's type.) The
   * declared type parameters are kept: apply does not carry them. */
  const nimble_type *d = g->type, *f = nimble_subst_apply(c->s, d);
  if (!f || f->kind != NIMBLE_TYPE_FUNC) return NIMBLE_OOM_IN("type inference");
  f = nimble_type_func(c->arena, d->u.func.num_type_params, d->u.func.type_params, f->u.func.num_params,
                       f->u.func.params, f->u.func.ret);
  if (!f) return NIMBLE_OOM_IN("type inference");
  size_t nt = f->u.func.num_type_params;
  uint32_t tids[64];
  const nimble_type *fresh[64];
  if (nt > 64 || g->num_dim_vars > 256)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "'@%s' has too many type parameters", g->name);
  for (size_t i = 0; i < nt; i++) {
    tids[i] = f->u.func.type_params[i]->u.var.id;
    fresh[i] = nimble_subst_fresh_type_var(c->s, f->u.func.type_params[i]->u.var.name);
    if (!fresh[i]) return NIMBLE_OOM_IN("type inference");
  }
  nimble_dim_t dims[256];
  for (size_t i = 0; i < g->num_dim_vars; i++)
    dims[i] = nimble_subst_fresh_dim_var(c->s, g->dim_names[i]);
  renaming r = {nt, tids, fresh, g->num_dim_vars, g->dim_vars, dims};
  *out = rename_type(c->arena, &r, f);
  return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
}

static void collect_dims(const nimble_type *t, uint32_t *ids, const char **names, size_t *n, size_t cap);

/* Constructor field types and the ADT type, with fresh type arguments. */
static nimble_status_t instantiate_ctor(infer_ctx *c, const nimble_constructor *ctor,
                                        const nimble_type ***fields, const nimble_type **adt) {
  const nimble_typedef *td = ctor->owner;
  if (td->num_params > 64)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "type '%s' has too many parameters", td->name);
  uint32_t ids[64];
  const nimble_type *fresh[64];
  for (size_t i = 0; i < td->num_params; i++) {
    ids[i] = td->params[i]->u.var.id;
    fresh[i] = nimble_subst_fresh_type_var(c->s, td->params[i]->u.var.name);
    if (!fresh[i]) return NIMBLE_OOM_IN("type inference");
  }
  /* Symbolic dims in field types are per value, like type parameters. */
  uint32_t dim_ids[64];
  const char *dim_names[64];
  nimble_dim_t dims[64];
  size_t nd = 0;
  for (size_t k = 0; k < td->num_ctors; k++)
    for (size_t f = 0; f < td->ctors[k]->num_fields; f++)
      collect_dims(td->ctors[k]->fields[f], dim_ids, dim_names, &nd, 64);
  for (size_t i = 0; i < nd; i++) dims[i] = nimble_subst_fresh_dim_var(c->s, dim_names[i]);
  renaming r = {td->num_params, ids, fresh, nd, dim_ids, dims};
  if (!rename_list(c->arena, &r, ctor->num_fields, ctor->fields, fields)) return NIMBLE_OOM_IN("type inference");
  *adt = nimble_type_adt(c->arena, td->name, td->num_params, fresh);
  return *adt ? nimble_ok() : NIMBLE_OOM_IN("type inference");
}

static const global_sig *find_global(infer_ctx *c, const char *name) {
  for (size_t i = 0; i < c->t->num_globals; i++)
    if (strcmp(c->t->globals[i].name, name) == 0) return &c->t->globals[i];
  return NULL;
}

/* ---- expressions ------------------------------------------------------------ */

static nimble_status_t infer(infer_ctx *c, const nimble_expr *e, const nimble_type **out);

static nimble_status_t unify_at(infer_ctx *c, const nimble_type *a, const nimble_type *b,
                                const nimble_type **out) {
  return nimble_type_unify(c->s, a, b, out);
}

static nimble_status_t to_sig(infer_ctx *c, const nimble_type *t, size_t i, const nimble_op *op,
                              nimble_tensor_sig_t *sig) {
  t = nimble_subst_apply(c->s, t);
  if (!t) return NIMBLE_OOM_IN("type inference");
  char buf[160];
  if (t->kind == NIMBLE_TYPE_UNRANKED_TENSOR) {
    /* Kernels are made per rank: an operator takes a tensor of unknown rank
     * only where it says so (shape_of, reshape_tensor). Elsewhere the value
     * must be refined first, which checks its rank at run time. */
    if (i < 32 && (op->unranked_inputs >> i & 1u)) {
      memset(sig, 0, sizeof *sig);
      sig->dtype = t->u.tensor.dtype;
      sig->rank = NIMBLE_RANK_UNKNOWN;
      return nimble_ok();
    }
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "'%s' needs a tensor of known rank, argument %zu is %s: refine it first, "
                              "reshape_tensor(x, check_rank(shape_of(x), rank=R))",
                              op->name, i, nimble_type_format(t, buf, sizeof buf));
  }
  if (t->kind != NIMBLE_TYPE_TENSOR) {
    if (t->kind == NIMBLE_TYPE_VAR)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "argument %zu has a type not known here (%s): annotate it", i,
                                nimble_type_format(t, buf, sizeof buf));
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "argument %zu must be a tensor, got %s", i,
                              nimble_type_format(t, buf, sizeof buf));
  }
  if (t->u.tensor.rank > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "argument %zu has rank %zu; '%s' handles up to %d",
                              i, t->u.tensor.rank, op->name, NIMBLE_MAX_RANK);
  memset(sig, 0, sizeof *sig);
  sig->dtype = t->u.tensor.dtype;
  sig->rank = t->u.tensor.rank;
  for (size_t d = 0; d < sig->rank; d++) sig->dims[d] = t->u.tensor.dims[d];
  return nimble_ok();
}

static nimble_status_t infer_op_call(infer_ctx *c, const nimble_expr *e, const nimble_type **out) {
  const nimble_op *op = e->u.call.callee->u.op.op;
  size_t n = e->u.call.num_args;
  if ((int64_t)n < op->min_inputs || (op->max_inputs >= 0 && (int64_t)n > op->max_inputs)) {
    if (op->max_inputs < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s' takes at least %d inputs, got %zu",
                                op->name, op->min_inputs, n);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s' takes %d to %d inputs, got %zu",
                              op->name, op->min_inputs, op->max_inputs, n);
  }
  if (n > 64) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "more than 64 operator inputs");
  /* Built IR may carry no attributes (all defaults) or a full list. */
  const nimble_attrs_t *attrs = &e->u.call.attrs;
  if (attrs->count == 0) {
    nimble_attrs_t none;
    NIMBLE_RETURN_IF_ERROR(nimble_attrs_defaults(op, &none));
  } else if (attrs->count != op->num_attrs) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "'%s' has %zu attributes, the call carries %zu (build calls with "
                              "nimble_ir_call_op)",
                              op->name, op->num_attrs, attrs->count);
  }
  nimble_tensor_sig_t sigs[64];
  nimble_input_value_t values[64];
  for (size_t i = 0; i < n; i++) {
    const nimble_type *t;
    const nimble_expr *arg = e->u.call.args[i];
    NIMBLE_RETURN_IF_ERROR(infer(c, arg, &t));
    NIMBLE_RETURN_IF_ERROR(to_sig(c, t, i, op, &sigs[i]));
    memset(&values[i], 0, sizeof values[i]);
    if (arg->kind == NIMBLE_EXPR_CONSTANT) {
      /* Relations may read constant arguments (a reshape's shape). */
      values[i].dtype = arg->u.constant.dtype;
      values[i].num_elements = arg->u.constant.num_elements;
      values[i].data = arg->u.constant.data;
    }
  }
  nimble_dim_ctx ctx = {c->s};
  nimble_rel_call_t call = {op, &ctx, attrs, n, sigs, values};
  nimble_tensor_sig_t res[NIMBLE_MAX_OUTPUTS];
  size_t nres = 0;
  NIMBLE_RETURN_IF_ERROR(op->relation(&call, res, &nres));
  const nimble_type *types[NIMBLE_MAX_OUTPUTS];
  for (size_t k = 0; k < nres; k++) {
    types[k] = res[k].rank == NIMBLE_RANK_UNKNOWN ? nimble_type_unranked_tensor(c->arena, res[k].dtype)
                                                   : nimble_type_tensor(c->arena, res[k].dtype, res[k].rank, res[k].dims);
    if (!types[k]) return NIMBLE_OOM_IN("type inference");
  }
  if (op->tuple_output) *out = nimble_type_tuple(c->arena, nres, types);
  else if (nres == 1) *out = types[0];
  else return nimble_status_make(NIMBLE_INTERNAL, "'%s' gave %zu outputs", op->name, nres);
  return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
}

static nimble_status_t infer_call(infer_ctx *c, const nimble_expr *e, const nimble_type **out) {
  const nimble_expr *callee = e->u.call.callee;
  if (callee->kind == NIMBLE_EXPR_OP) {
    char what[96];
    snprintf(what, sizeof what, "call '%s'", callee->u.op.op->name);
    return at_expr(infer_op_call(c, e, out), what, e);
  }
  const nimble_type *ft;
  NIMBLE_RETURN_IF_ERROR(infer(c, callee, &ft));
  ft = nimble_subst_apply(c->s, ft);
  if (!ft) return NIMBLE_OOM_IN("type inference");
  size_t n = e->u.call.num_args;
  char what[128];
  if (callee->kind == NIMBLE_EXPR_GLOBAL) snprintf(what, sizeof what, "call to '@%s'", callee->u.global.name);
  else if (callee->kind == NIMBLE_EXPR_CONSTRUCTOR) snprintf(what, sizeof what, "constructor '%s'", callee->u.ctor.ctor->name);
  else snprintf(what, sizeof what, "call");
  if (ft->kind == NIMBLE_TYPE_VAR) {
    /* Calling something not yet known: it must be a function. */
    const nimble_type **ps = n ? nimble_arena_calloc(c->arena, n, sizeof(*ps)) : NULL;
    if (n && !ps) return NIMBLE_OOM_IN("type inference");
    for (size_t i = 0; i < n; i++)
      if (!(ps[i] = nimble_subst_fresh_type_var(c->s, "A"))) return NIMBLE_OOM_IN("type inference");
    const nimble_type *ret = nimble_subst_fresh_type_var(c->s, "R"), *fn, *u;
    if (!ret || !(fn = nimble_type_func(c->arena, 0, NULL, n, ps, ret))) return NIMBLE_OOM_IN("type inference");
    NIMBLE_RETURN_IF_ERROR(at_expr(unify_at(c, ft, fn, &u), what, e));
    ft = fn;
  }
  if (ft->kind != NIMBLE_TYPE_FUNC) {
    char buf[160];
    return at_expr(nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the callee is not a function: %s",
                                      nimble_type_format(ft, buf, sizeof buf)),
                   what, e);
  }
  if (ft->u.func.num_params != n)
    return at_expr(nimble_status_make(NIMBLE_INVALID_ARGUMENT, "expected %zu arguments, got %zu",
                                      ft->u.func.num_params, n),
                   what, e);
  for (size_t i = 0; i < n; i++) {
    const nimble_type *at, *u;
    NIMBLE_RETURN_IF_ERROR(infer(c, e->u.call.args[i], &at));
    nimble_status_t st = unify_at(c, ft->u.func.params[i], at, &u);
    if (st) return at_expr(nimble_status_annotate(st, "argument %zu", i + 1), what, e);
  }
  *out = ft->u.func.ret;
  return nimble_ok();
}

static nimble_status_t bind_var(infer_ctx *c, const nimble_expr *var, const nimble_type *t,
                                const nimble_type **out) {
  const nimble_type *u = t;
  if (var->u.var.annotation) {
    nimble_status_t st = unify_at(c, var->u.var.annotation, t, &u);
    if (st) {
      loc_tail loc;
      return nimble_status_annotate(st, "variable %%%s at %s%s", var->u.var.name,
                                    LOC(&var->loc, loc));
    }
    /* The annotation states the intended type: keep it (with bindings). */
    u = var->u.var.annotation;
  }
  if (out) *out = u;
  return record(c, var, u);
}

static nimble_status_t check_pattern(infer_ctx *c, const nimble_pattern *p, const nimble_type *want) {
  loc_tail loc;
  switch (p->kind) {
    case NIMBLE_PATTERN_WILDCARD: return nimble_ok();
    case NIMBLE_PATTERN_VAR: return bind_var(c, p->var, want, NULL);
    case NIMBLE_PATTERN_CTOR: {
      const nimble_type **fields, *adt, *u;
      NIMBLE_RETURN_IF_ERROR(instantiate_ctor(c, p->ctor, &fields, &adt));
      nimble_status_t st = unify_at(c, adt, want, &u);
      if (st)
        return nimble_status_annotate(st, "pattern %s at %s%s", p->ctor->name,
                                      LOC(&p->loc, loc));
      if (p->num_subs != p->ctor->num_fields)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "pattern %s at %s%s has %zu fields, the constructor %zu",
                                  p->ctor->name, LOC(&p->loc, loc), p->num_subs,
                                  p->ctor->num_fields);
      for (size_t i = 0; i < p->num_subs; i++)
        NIMBLE_RETURN_IF_ERROR(check_pattern(c, p->subs[i], fields[i]));
      return nimble_ok();
    }
    case NIMBLE_PATTERN_TUPLE: {
      size_t n = p->num_subs;
      const nimble_type **fs = n ? nimble_arena_calloc(c->arena, n, sizeof(*fs)) : NULL;
      if (n && !fs) return NIMBLE_OOM_IN("type inference");
      for (size_t i = 0; i < n; i++)
        if (!(fs[i] = nimble_subst_fresh_type_var(c->s, "T"))) return NIMBLE_OOM_IN("type inference");
      const nimble_type *tup = nimble_type_tuple(c->arena, n, fs), *u;
      if (!tup) return NIMBLE_OOM_IN("type inference");
      nimble_status_t st = unify_at(c, tup, want, &u);
      if (st)
        return nimble_status_annotate(st, "tuple pattern at %s%s", LOC(&p->loc, loc));
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(check_pattern(c, p->subs[i], fs[i]));
      return nimble_ok();
    }
  }
  return nimble_ok();
}

static nimble_status_t infer_func(infer_ctx *c, const nimble_expr *e, const nimble_type *ret_hint,
                                  const nimble_type *const *param_types, const nimble_type **out) {
  size_t n = e->u.func.num_params;
  const nimble_type **ps = n ? nimble_arena_calloc(c->arena, n, sizeof(*ps)) : NULL;
  if (n && !ps) return NIMBLE_OOM_IN("type inference");
  for (size_t i = 0; i < n; i++) {
    const nimble_expr *v = e->u.func.params[i];
    const nimble_type *t = param_types ? param_types[i] : v->u.var.annotation;
    if (!t && !(t = nimble_subst_fresh_type_var(c->s, "T"))) return NIMBLE_OOM_IN("type inference");
    NIMBLE_RETURN_IF_ERROR(bind_var(c, v, t, &ps[i]));
  }
  const nimble_type *body = NULL, *ret;
  NIMBLE_RETURN_IF_ERROR(infer(c, e->u.func.body, &body));
  ret = body;
  const nimble_type *want = ret_hint ? ret_hint : e->u.func.ret;
  if (want) {
    nimble_status_t st = unify_at(c, want, body, &ret);
    if (st) return at_expr(nimble_status_annotate(st, "the body does not have the declared result type"), "function", e);
    ret = want;
  }
  *out = nimble_type_func(c->arena, 0, NULL, n, ps, ret);
  return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
}

static nimble_status_t infer_inner(infer_ctx *c, const nimble_expr *e, const nimble_type **out) {
  loc_tail loc;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: {
      const nimble_type *t = nimble_typing_type_of(c->t, e);
      if (!t)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s%s: variable %%%s is not bound here",
                                  LOC(&e->loc, loc), e->u.var.name);
      *out = t;
      return nimble_ok();
    }
    case NIMBLE_EXPR_GLOBAL: {
      const global_sig *g = find_global(c, e->u.global.name);
      if (!g)
        return nimble_status_make(NIMBLE_NOT_FOUND, "%s%s: no global function '@%s'",
                                  LOC(&e->loc, loc), e->u.global.name);
      return instantiate_global(c, g, out);
    }
    case NIMBLE_EXPR_CONSTANT: {
      nimble_dim_t dims[64];
      if (e->u.constant.rank > 64) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "constant of rank > 64");
      for (size_t i = 0; i < e->u.constant.rank; i++) dims[i] = nimble_dim_const(e->u.constant.dims[i]);
      *out = nimble_type_tensor(c->arena, e->u.constant.dtype, e->u.constant.rank, dims);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_EXPR_OP:
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s%s: operator '%s' is used as a value; call it (or wrap it in fn)",
                                LOC(&e->loc, loc), e->u.op.op->name);
    case NIMBLE_EXPR_CONSTRUCTOR: {
      const nimble_type **fields, *adt;
      NIMBLE_RETURN_IF_ERROR(instantiate_ctor(c, e->u.ctor.ctor, &fields, &adt));
      if (e->u.ctor.ctor->num_fields == 0) *out = adt;
      else *out = nimble_type_func(c->arena, 0, NULL, e->u.ctor.ctor->num_fields, fields, adt);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_EXPR_CALL: return infer_call(c, e, out);
    case NIMBLE_EXPR_LET: {
      /* Lets nest deeply in imported models: walk the chain in a loop. */
      const nimble_expr *cur = e;
      while (cur->kind == NIMBLE_EXPR_LET) {
        const nimble_type *vt;
        NIMBLE_RETURN_IF_ERROR(infer(c, cur->u.let.value, &vt));
        NIMBLE_RETURN_IF_ERROR(bind_var(c, cur->u.let.var, vt, NULL));
        cur = cur->u.let.body;
      }
      const nimble_type *bt;
      NIMBLE_RETURN_IF_ERROR(infer(c, cur, &bt));
      /* Every let of the chain has the body's type. */
      for (const nimble_expr *l = e; l != cur; l = l->u.let.body)
        if (l != e) NIMBLE_RETURN_IF_ERROR(record(c, l, bt));
      *out = bt;
      return nimble_ok();
    }
    case NIMBLE_EXPR_IF: {
      const nimble_type *ct, *u, *tt, *et;
      const nimble_type *boolean = nimble_type_scalar(c->arena, NIMBLE_DTYPE_BOOL);
      if (!boolean) return NIMBLE_OOM_IN("type inference");
      NIMBLE_RETURN_IF_ERROR(infer(c, e->u.if_.cond, &ct));
      nimble_status_t st = unify_at(c, boolean, ct, &u);
      if (st) return at_expr(nimble_status_annotate(st, "the condition must be a bool scalar"), "if", e);
      /* What a branch proves about the dims of outer values (a squeeze
       * binding `t` to 1) holds only while it runs: undone after it. */
      nimble_subst_mark_t mark = nimble_subst_mark(c->s);
      NIMBLE_RETURN_IF_ERROR(infer(c, e->u.if_.then_branch, &tt));
      nimble_subst_undo_dims(c->s, mark);
      NIMBLE_RETURN_IF_ERROR(infer(c, e->u.if_.else_branch, &et));
      nimble_subst_undo_dims(c->s, mark);
      /* Either branch may run: the result is their join (dims that differ
       * are Any, ranks that differ an unknown rank). */
      st = nimble_type_join(c->s, tt, et, out);
      if (st) return at_expr(nimble_status_annotate(st, "the branches differ"), "if", e);
      return nimble_ok();
    }
    case NIMBLE_EXPR_TUPLE: {
      size_t n = e->u.tuple.count;
      const nimble_type **fs = n ? nimble_arena_calloc(c->arena, n, sizeof(*fs)) : NULL;
      if (n && !fs) return NIMBLE_OOM_IN("type inference");
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(infer(c, e->u.tuple.fields[i], &fs[i]));
      *out = nimble_type_tuple(c->arena, n, fs);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_EXPR_PROJ: {
      const nimble_type *tt;
      char buf[160];
      NIMBLE_RETURN_IF_ERROR(infer(c, e->u.proj.tuple, &tt));
      tt = nimble_subst_apply(c->s, tt);
      if (!tt) return NIMBLE_OOM_IN("type inference");
      if (tt->kind != NIMBLE_TYPE_TUPLE)
        return at_expr(nimble_status_make(NIMBLE_INVALID_ARGUMENT, "projecting from a non-tuple %s",
                                          nimble_type_format(tt, buf, sizeof buf)),
                       "projection", e);
      if (e->u.proj.index >= tt->u.tuple.count)
        return at_expr(nimble_status_make(NIMBLE_OUT_OF_RANGE, "index %zu of a %zu-tuple %s",
                                          e->u.proj.index, tt->u.tuple.count,
                                          nimble_type_format(tt, buf, sizeof buf)),
                       "projection", e);
      *out = tt->u.tuple.fields[e->u.proj.index];
      return nimble_ok();
    }
    case NIMBLE_EXPR_FUNC: return infer_func(c, e, NULL, NULL, out);
    case NIMBLE_EXPR_MATCH: {
      const nimble_type *st_type, *result = NULL;
      NIMBLE_RETURN_IF_ERROR(infer(c, e->u.match.scrutinee, &st_type));
      for (size_t i = 0; i < e->u.match.num_clauses; i++) {
        const nimble_match_clause_t *cl = &e->u.match.clauses[i];
        const nimble_type *bt;
        nimble_subst_mark_t mark = nimble_subst_mark(c->s);
        NIMBLE_RETURN_IF_ERROR(at_expr(check_pattern(c, cl->pattern, st_type), "match", e));
        NIMBLE_RETURN_IF_ERROR(infer(c, cl->body, &bt));
        nimble_subst_undo_dims(c->s, mark); /* as for the branches of an if */
        if (!result) {
          result = bt;
          continue;
        }
        nimble_status_t st = nimble_type_join(c->s, result, bt, &result);
        if (st) return at_expr(nimble_status_annotate(st, "arm %zu differs from the arms before", i + 1), "match", e);
      }
      if (!result)
        return at_expr(nimble_status_make(NIMBLE_INVALID_ARGUMENT, "a match needs at least one arm"), "match", e);
      *out = result;
      return nimble_ok();
    }
  }
  return nimble_status_make(NIMBLE_INTERNAL, "unknown expression kind %d", (int)e->kind);
}

static nimble_status_t infer(infer_ctx *c, const nimble_expr *e, const nimble_type **out) {
  NIMBLE_RETURN_IF_ERROR(infer_inner(c, e, out));
  return record(c, e, *out);
}

/* ---- signatures and the module -------------------------------------------- */

static void collect_dims(const nimble_type *t, uint32_t *ids, const char **names, size_t *n, size_t cap) {
  if (!t) return;
  switch (t->kind) {
    case NIMBLE_TYPE_TENSOR:
      for (size_t i = 0; i < t->u.tensor.rank; i++) {
        nimble_dim_t d = t->u.tensor.dims[i];
        if (d.kind != NIMBLE_DIM_VAR) continue;
        bool seen = false;
        for (size_t k = 0; k < *n; k++) seen = seen || ids[k] == d.var_id;
        if (!seen && *n < cap) {
          ids[*n] = d.var_id;
          names[(*n)++] = d.name;
        }
      }
      break;
    case NIMBLE_TYPE_TUPLE:
      for (size_t i = 0; i < t->u.tuple.count; i++) collect_dims(t->u.tuple.fields[i], ids, names, n, cap);
      break;
    case NIMBLE_TYPE_ADT:
      for (size_t i = 0; i < t->u.adt.num_args; i++) collect_dims(t->u.adt.args[i], ids, names, n, cap);
      break;
    case NIMBLE_TYPE_FUNC:
      for (size_t i = 0; i < t->u.func.num_params; i++) collect_dims(t->u.func.params[i], ids, names, n, cap);
      collect_dims(t->u.func.ret, ids, names, n, cap);
      break;
    case NIMBLE_TYPE_VAR:
    case NIMBLE_TYPE_UNRANKED_TENSOR: break;
  }
}

static nimble_status_t make_signature(infer_ctx *c, const nimble_global_func_t *g, global_sig *sig) {
  const nimble_expr *f = g->func;
  size_t n = f->u.func.num_params;
  const nimble_type **ps = n ? nimble_arena_calloc(c->arena, n, sizeof(*ps)) : NULL;
  if (n && !ps) return NIMBLE_OOM_IN("type inference");
  for (size_t i = 0; i < n; i++) {
    ps[i] = f->u.func.params[i]->u.var.annotation;
    if (!ps[i] && !(ps[i] = nimble_subst_fresh_type_var(c->s, "T"))) return NIMBLE_OOM_IN("type inference");
  }
  const nimble_type *ret = f->u.func.ret;
  if (!ret && !(ret = nimble_subst_fresh_type_var(c->s, "R"))) return NIMBLE_OOM_IN("type inference");
  sig->name = g->name;
  sig->type = nimble_type_func(c->arena, f->u.func.num_type_params, f->u.func.type_params, n, ps, ret);
  if (!sig->type) return NIMBLE_OOM_IN("type inference");
  /* Only symbolic dims the user wrote are generalized. */
  uint32_t ids[256];
  const char *names[256];
  size_t nd = 0;
  for (size_t i = 0; i < n; i++) collect_dims(f->u.func.params[i]->u.var.annotation, ids, names, &nd, 256);
  collect_dims(f->u.func.ret, ids, names, &nd, 256);
  sig->num_dim_vars = nd;
  sig->dim_vars = nd ? nimble_arena_calloc(c->arena, nd, sizeof(uint32_t)) : NULL;
  sig->dim_names = nd ? nimble_arena_calloc(c->arena, nd, sizeof(char *)) : NULL;
  if (nd && (!sig->dim_vars || !sig->dim_names)) return NIMBLE_OOM_IN("type inference");
  if (nd) {
    memcpy(sig->dim_vars, ids, nd * sizeof(uint32_t));
    memcpy(sig->dim_names, names, nd * sizeof(char *));
  }
  return nimble_ok();
}

/* The end of a global function is its generalisation point: a dim variable
 * made while inferring it (ids from `first` up: the fresh symbols of the
 * calls it makes, of operator relations) that is still unbound was met by
 * nothing but Any, so it is Any (DESIGN.md §1: Any against anything stays
 * Any). Left unbound it would leak into the function's type under the
 * callee's symbol name, and be shared by every caller of the function (only
 * declared symbols are instantiated per call). A fresh variable that met a
 * declared symbol is bound to it (the older variable is always the
 * representative, see nimble_subst_bind_dim), so symbols survive. */
static nimble_status_t generalize_fresh_dims(infer_ctx *c, uint32_t first) {
  uint32_t end = nimble_subst_fresh_id(c->s);
  for (uint32_t id = first; id < end; id++) {
    nimble_dim_t d = nimble_subst_resolve_dim(c->s, nimble_dim_var(id, NULL));
    if (d.kind == NIMBLE_DIM_VAR && d.var_id == id)
      NIMBLE_RETURN_IF_ERROR(nimble_subst_bind_dim(c->s, id, nimble_dim_any()));
  }
  return nimble_ok();
}

nimble_status_t nimble_typing_infer_module(const nimble_module *m, nimble_typing **out) {
  infer_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  NIMBLE_RETURN_IF_ERROR(nimble_subst_create(c.arena, nimble_module_next_var_id(m), &c.s));
  c.t = nimble_arena_alloc(c.arena, sizeof(*c.t));
  if (!c.t) return NIMBLE_OOM_IN("type inference");
  c.t->arena = c.arena;
  nimble_ptr_map_init(&c.t->types, c.arena);
  size_t ng = nimble_module_num_funcs(m);
  c.t->globals = ng ? nimble_arena_calloc(c.arena, ng, sizeof(global_sig)) : NULL;
  if (ng && !c.t->globals) return NIMBLE_OOM_IN("type inference");
  for (size_t i = 0; i < ng; i++) {
    NIMBLE_RETURN_IF_ERROR(make_signature(&c, nimble_module_func_at(m, i), &c.t->globals[i]));
    c.t->num_globals++;
  }
  for (size_t i = 0; i < ng; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    const nimble_type *ft, *u;
    const nimble_type *sig = c.t->globals[i].type;
    /* A function's type parameters stand for any type in its body. */
    for (size_t k = 0; k < g->func->u.func.num_type_params; k++)
      NIMBLE_RETURN_IF_ERROR(nimble_subst_set_rigid(c.s, g->func->u.func.type_params[k]->u.var.id, true));
    uint32_t first = nimble_subst_fresh_id(c.s);
    NIMBLE_RETURN_IF_ERROR_CTX(infer_func(&c, g->func, sig->u.func.ret, sig->u.func.params, &ft),
                               "in @%s", g->name);
    NIMBLE_RETURN_IF_ERROR(generalize_fresh_dims(&c, first));
    NIMBLE_RETURN_IF_ERROR(record(&c, g->func, ft));
    for (size_t k = 0; k < g->func->u.func.num_type_params; k++)
      NIMBLE_RETURN_IF_ERROR(nimble_subst_set_rigid(c.s, g->func->u.func.type_params[k]->u.var.id, false));
    (void)u;
  }
  /* Apply the final bindings to everything recorded (replacing a value
   * leaves the table as it is, so this iterates safely). */
  const void *key;
  void *recorded;
  for (size_t pos = 0; nimble_ptr_map_next(&c.t->types, &pos, &key, &recorded);) {
    const nimble_type *t = nimble_subst_apply(c.s, recorded);
    if (!t || !nimble_ptr_map_put(&c.t->types, key, (void *)t)) return NIMBLE_OOM_IN("type inference");
  }
  for (size_t i = 0; i < ng; i++) {
    const nimble_type *t = nimble_subst_apply(c.s, c.t->globals[i].type);
    if (!t) return NIMBLE_OOM_IN("type inference");
    /* Keep the declared type parameters on the applied signature. */
    const nimble_type *d = c.t->globals[i].type;
    c.t->globals[i].type = nimble_type_func(c.arena, d->u.func.num_type_params, d->u.func.type_params,
                                            t->u.func.num_params, t->u.func.params, t->u.func.ret);
    if (!c.t->globals[i].type) return NIMBLE_OOM_IN("type inference");
  }
  *out = c.t;
  return nimble_ok();
}
