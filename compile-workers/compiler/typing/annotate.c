/* Writes inferred types into a module as annotations, so that the ordinary
 * printer shows the typed IR (`Any` as `?`, symbolic dims by name); see
 * nimble/typed_module.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/ptr_map.h"
#include "nimble/typed_module.h"

/* Names bound so far in one global function (arena strings). */
typedef struct name_set {
  const char **slots;
  size_t cap, count;
} name_set;

typedef struct annotator {
  nimble_arena *arena;
  const nimble_typing *typing;
  size_t elide_above;
  /* Old binding variable -> its annotated copy; uses always come after
   * bindings, so one walk fills and reads it. */
  nimble_ptr_map map;
  name_set names;
  bool oom;
} annotator;

static size_t hash_str(const char *s) {
  size_t h = 1469598103934665603ull & SIZE_MAX;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
  return h;
}

static bool names_contains(const name_set *n, const char *s) {
  if (!n->cap) return false;
  for (size_t j = hash_str(s) & (n->cap - 1); n->slots[j]; j = (j + 1) & (n->cap - 1))
    if (strcmp(n->slots[j], s) == 0) return true;
  return false;
}

static bool names_add(name_set *n, const char *s) {
  if ((n->count + 1) * 2 > n->cap) {
    size_t cap = n->cap ? n->cap * 2 : 64;
    const char **slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < n->cap; i++) {
      if (!n->slots[i]) continue;
      size_t j = hash_str(n->slots[i]) & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = n->slots[i];
    }
    free(n->slots);
    n->slots = slots;
    n->cap = cap;
  }
  size_t j = hash_str(s) & (n->cap - 1);
  while (n->slots[j]) j = (j + 1) & (n->cap - 1);
  n->slots[j] = s;
  n->count++;
  return true;
}

static void names_clear(name_set *n) {
  free(n->slots);
  memset(n, 0, sizeof *n);
}

/* The name a binding prints with: its own, or, when that name is bound
 * already in this function, the first free "NAME_K". The printer writes
 * variables by name, and frontends may bind one name twice (ONNX exports
 * reuse value names in subgraphs), so without this a use could print as a
 * reference to the wrong binding. Unique names make the text mean what the
 * IR means. */
static const char *unique_name(annotator *an, const char *name) {
  const char *chosen = name;
  for (unsigned k = 1; names_contains(&an->names, chosen); k++) {
    chosen = nimble_arena_sprintf(an->arena, "%s_%u", name, k);
    if (!chosen) return NULL;
  }
  return names_add(&an->names, chosen) ? chosen : NULL;
}

/* A binding site: a copy of `var` annotated with its inferred type (its
 * own annotation when inference has none). */
static const nimble_expr *bind_var(annotator *an, const nimble_expr *var) {
  const nimble_type *t = nimble_typing_type_of(an->typing, var);
  if (!t) t = var->u.var.annotation;
  const char *name = unique_name(an, var->u.var.name);
  const nimble_expr *nv = name ? nimble_ir_var(an->arena, name, t, &var->loc) : NULL;
  if (!nv || !nimble_ptr_map_put(&an->map, var, (void *)nv)) {
    an->oom = true;
    return var;
  }
  return nv;
}

static const nimble_expr *annotate(annotator *an, const nimble_expr *e);

static const nimble_pattern *annotate_pattern(annotator *an, const nimble_pattern *p) {
  switch (p->kind) {
    case NIMBLE_PATTERN_WILDCARD: return p;
    case NIMBLE_PATTERN_VAR: {
      const nimble_pattern *np = nimble_ir_pattern_var(an->arena, bind_var(an, p->var), &p->loc);
      if (!np) an->oom = true;
      return np ? np : p;
    }
    case NIMBLE_PATTERN_CTOR:
    case NIMBLE_PATTERN_TUPLE: {
      const nimble_pattern **subs = NULL;
      if (p->num_subs) {
        subs = nimble_arena_calloc(an->arena, p->num_subs, sizeof *subs);
        if (!subs) {
          an->oom = true;
          return p;
        }
      }
      for (size_t i = 0; i < p->num_subs; i++) subs[i] = annotate_pattern(an, p->subs[i]);
      const nimble_pattern *np =
          p->kind == NIMBLE_PATTERN_CTOR
              ? nimble_ir_pattern_ctor(an->arena, p->ctor, p->num_subs, subs, &p->loc)
              : nimble_ir_pattern_tuple(an->arena, p->num_subs, subs, &p->loc);
      if (!np) an->oom = true;
      return np ? np : p;
    }
  }
  return p;
}

static const nimble_expr **annotate_all(annotator *an, size_t n, const nimble_expr *const *es) {
  if (!n) return NULL;
  const nimble_expr **out = nimble_arena_calloc(an->arena, n, sizeof *out);
  if (!out) {
    an->oom = true;
    return NULL;
  }
  for (size_t i = 0; i < n; i++) out[i] = annotate(an, es[i]);
  return out;
}

/* A function with annotated parameters and its return type written out.
 * `type` is its inferred function type (may be NULL). */
static const nimble_expr *annotate_func(annotator *an, const nimble_expr *f,
                                        const nimble_type *type) {
  size_t n = f->u.func.num_params;
  const nimble_expr **params = NULL;
  if (n) {
    params = nimble_arena_calloc(an->arena, n, sizeof *params);
    if (!params) {
      an->oom = true;
      return f;
    }
  }
  for (size_t i = 0; i < n; i++) params[i] = bind_var(an, f->u.func.params[i]);
  const nimble_type *ret = f->u.func.ret;
  if (type && type->kind == NIMBLE_TYPE_FUNC) ret = type->u.func.ret;
  const nimble_expr *body = annotate(an, f->u.func.body);
  const nimble_expr *nf = nimble_ir_func(an->arena, f->u.func.num_type_params,
                                         f->u.func.type_params, n, params, ret, body, &f->loc);
  if (!nf) an->oom = true;
  return nf ? nf : f;
}

/* A `let` chain, rebuilt without recursing once per `let` (frontends build
 * graphs as chains thousands long). */
static const nimble_expr *annotate_let_chain(annotator *an, const nimble_expr *e) {
  size_t n = 0;
  for (const nimble_expr *l = e; l->kind == NIMBLE_EXPR_LET; l = l->u.let.body) n++;
  const nimble_expr **vars = malloc(n * sizeof *vars);
  const nimble_expr **vals = malloc(n * sizeof *vals);
  const nimble_expr **olds = malloc(n * sizeof *olds);
  if (!vars || !vals || !olds) {
    free(vars);
    free(vals);
    free(olds);
    an->oom = true;
    return e;
  }
  const nimble_expr *l = e;
  for (size_t i = 0; i < n; i++, l = l->u.let.body) {
    olds[i] = l;
    /* The value first: a let's variable is not in scope in its own value. */
    vals[i] = annotate(an, l->u.let.value);
    vars[i] = bind_var(an, l->u.let.var);
  }
  const nimble_expr *body = annotate(an, l);
  for (size_t i = n; i-- > 0;) {
    const nimble_expr *nl = nimble_ir_let(an->arena, vars[i], vals[i], body, &olds[i]->loc);
    if (!nl) {
      an->oom = true;
      break;
    }
    body = nl;
  }
  free(vars);
  free(vals);
  free(olds);
  return body;
}

/* A large constant (imported weights) stands in the output as a name that
 * reads like the constant with its elements left out:
 * %"const[(512, 784), float32]{...}". Printing megabytes of numbers would
 * bury the structure the reader asked to see. */
static const nimble_expr *elide_constant(annotator *an, const nimble_expr *e) {
  const nimble_const_tensor_t *c = &e->u.constant;
  if (!an->elide_above || c->num_elements <= an->elide_above) return e;
  nimble_dim_t *dims = c->rank ? nimble_arena_calloc(an->arena, c->rank, sizeof *dims) : NULL;
  if (c->rank && !dims) {
    an->oom = true;
    return e;
  }
  for (size_t i = 0; i < c->rank; i++) dims[i] = nimble_dim_const(c->dims[i]);
  const nimble_type *t = nimble_type_tensor(an->arena, c->dtype, c->rank, dims);
  const char *text = t ? nimble_type_to_string(an->arena, t) : NULL;
  /* "Tensor[(512, 784), float32]" -> "const[(512, 784), float32]{...}" */
  const char *name = text && strncmp(text, "Tensor", 6) == 0
                         ? nimble_arena_sprintf(an->arena, "const%s{...}", text + 6)
                         : NULL;
  const nimble_expr *v = name ? nimble_ir_var(an->arena, name, NULL, &e->loc) : NULL;
  if (!v) {
    an->oom = true;
    return e;
  }
  return v;
}

static const nimble_expr *annotate(annotator *an, const nimble_expr *e) {
  if (an->oom) return e;
  const nimble_expr *r = NULL;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: {
      const nimble_expr *v = nimble_ptr_map_get(&an->map, e);
      return v ? v : e; /* a free variable would be a parser bug; keep it */
    }
    case NIMBLE_EXPR_CONSTANT: return elide_constant(an, e);
    case NIMBLE_EXPR_GLOBAL:
    case NIMBLE_EXPR_OP:
    case NIMBLE_EXPR_CONSTRUCTOR: return e;
    case NIMBLE_EXPR_CALL: {
      const nimble_expr *callee = annotate(an, e->u.call.callee);
      const nimble_expr **args = annotate_all(an, e->u.call.num_args, e->u.call.args);
      if (an->oom) return e;
      r = nimble_ir_call(an->arena, callee, e->u.call.num_args, args, &e->u.call.attrs, &e->loc);
      break;
    }
    case NIMBLE_EXPR_LET: return annotate_let_chain(an, e);
    case NIMBLE_EXPR_IF: {
      const nimble_expr *c = annotate(an, e->u.if_.cond);
      const nimble_expr *t = annotate(an, e->u.if_.then_branch);
      const nimble_expr *f = annotate(an, e->u.if_.else_branch);
      r = nimble_ir_if(an->arena, c, t, f, &e->loc);
      break;
    }
    case NIMBLE_EXPR_TUPLE: {
      const nimble_expr **fields = annotate_all(an, e->u.tuple.count, e->u.tuple.fields);
      if (an->oom) return e;
      r = nimble_ir_tuple(an->arena, e->u.tuple.count, fields, &e->loc);
      break;
    }
    case NIMBLE_EXPR_PROJ:
      r = nimble_ir_proj(an->arena, annotate(an, e->u.proj.tuple), e->u.proj.index, &e->loc);
      break;
    case NIMBLE_EXPR_FUNC: return annotate_func(an, e, nimble_typing_type_of(an->typing, e));
    case NIMBLE_EXPR_MATCH: {
      const nimble_expr *scrut = annotate(an, e->u.match.scrutinee);
      size_t n = e->u.match.num_clauses;
      nimble_match_clause_t *cl = nimble_arena_calloc(an->arena, n ? n : 1, sizeof *cl);
      if (!cl) {
        an->oom = true;
        return e;
      }
      for (size_t i = 0; i < n; i++) {
        cl[i].pattern = annotate_pattern(an, e->u.match.clauses[i].pattern);
        cl[i].body = annotate(an, e->u.match.clauses[i].body);
      }
      r = nimble_ir_match(an->arena, scrut, n, cl, &e->loc);
      break;
    }
  }
  if (!r) {
    an->oom = true;
    return e;
  }
  return r;
}

nimble_status_t nimble_typed_module_annotate(nimble_module *m, const nimble_typing *t,
                                             size_t elide_above) {
  annotator an = {nimble_module_arena(m), t, elide_above, {0}, {NULL, 0, 0}, false};
  size_t n = nimble_module_num_funcs(m);
  const nimble_expr **funcs = calloc(n ? n : 1, sizeof *funcs);
  if (!funcs) return NIMBLE_OOM();
  /* Build every annotated function first, then swap them in, so that no
   * lookup sees a half-replaced module. */
  for (size_t i = 0; i < n && !an.oom; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    funcs[i] = annotate_func(&an, g->func, nimble_typing_global_type(t, g->name));
    names_clear(&an.names);
  }
  nimble_status_t s = nimble_ok();
  if (an.oom) s = nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory while annotating");
  for (size_t i = 0; i < n && !s; i++) {
    const char *name = nimble_module_func_at(m, i)->name;
    s = nimble_module_replace_func(m, name, funcs[i]);
  }
  free(funcs);
  nimble_ptr_map_deinit(&an.map);
  return s;
}
