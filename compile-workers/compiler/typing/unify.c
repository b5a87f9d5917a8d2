/* Substitutions and unification of types with Any.
 *
 * A substitution maps variable ids to what they are bound to: type
 * variables to types, dim variables to dims. Bindings live in two arrays
 * indexed by id (ids are small and dense: the parser and the inference hand
 * them out from one counter), grown by doubling in the arena. */
#include <string.h>

#include "ir/print_internal.h"
#include "nimble/typing.h"

struct nimble_subst {
  nimble_arena *arena;
  uint32_t next_id;
  size_t cap;
  const nimble_type **types; /* NULL: unbound */
  nimble_dim_t *dims;
  unsigned char *dim_bound;
  unsigned char *rigid; /* type variables that may not be bound */
  /* The name of each dim variable seen (resolved, bound or made fresh), so
   * that a binding can be turned around (see nimble_subst_bind_dim). */
  const char **dim_names;
  /* The dim variables bound, in order (nimble_subst_undo_dims). */
  uint32_t *trail;
  size_t trail_n, trail_cap;
};

nimble_status_t nimble_subst_create(nimble_arena *arena, uint32_t first_fresh_id,
                                    nimble_subst **out) {
  nimble_subst *s = nimble_arena_alloc(arena, sizeof(*s));
  if (!s) return NIMBLE_OOM_IN("type inference");
  s->arena = arena;
  s->next_id = first_fresh_id ? first_fresh_id : 1;
  *out = s;
  return nimble_ok();
}

static bool ensure(nimble_subst *s, uint32_t id) {
  if (id < s->cap) return true;
  size_t cap = s->cap ? s->cap : 64;
  while (cap <= id) cap *= 2;
  const nimble_type **t = nimble_arena_calloc(s->arena, cap, sizeof(*t));
  nimble_dim_t *d = nimble_arena_calloc(s->arena, cap, sizeof(*d));
  unsigned char *b = nimble_arena_calloc(s->arena, cap, 1);
  unsigned char *r = nimble_arena_calloc(s->arena, cap, 1);
  const char **n = nimble_arena_calloc(s->arena, cap, sizeof(*n));
  if (!t || !d || !b || !r || !n) return false;
  if (s->cap) {
    memcpy(t, s->types, s->cap * sizeof(*t));
    memcpy(d, s->dims, s->cap * sizeof(*d));
    memcpy(b, s->dim_bound, s->cap);
    memcpy(r, s->rigid, s->cap);
    memcpy(n, s->dim_names, s->cap * sizeof(*n));
  }
  s->dim_names = n;
  s->rigid = r;
  s->types = t;
  s->dims = d;
  s->dim_bound = b;
  s->cap = cap;
  return true;
}

uint32_t nimble_subst_fresh_id(nimble_subst *s) { return s->next_id++; }

nimble_status_t nimble_subst_set_rigid(nimble_subst *s, uint32_t type_var_id, bool rigid) {
  if (!ensure(s, type_var_id)) return NIMBLE_OOM_IN("type inference");
  s->rigid[type_var_id] = rigid;
  return nimble_ok();
}

static bool is_rigid(const nimble_subst *s, const nimble_type *t) {
  return t->kind == NIMBLE_TYPE_VAR && t->u.var.id < s->cap && s->rigid[t->u.var.id];
}

const nimble_type *nimble_subst_fresh_type_var(nimble_subst *s, const char *name) {
  return nimble_type_var(s->arena, nimble_subst_fresh_id(s), name);
}

/* Remembers the name of dim variable d (best effort: without memory the
 * name stays unknown and bindings keep the caller's direction). */
static void note_dim_name(nimble_subst *s, nimble_dim_t d) {
  if (d.kind != NIMBLE_DIM_VAR || !d.name || !ensure(s, d.var_id)) return;
  if (!s->dim_names[d.var_id]) s->dim_names[d.var_id] = d.name;
}

nimble_dim_t nimble_subst_fresh_dim_var(nimble_subst *s, const char *name) {
  nimble_dim_t d = nimble_dim_var(nimble_subst_fresh_id(s), name);
  note_dim_name(s, d);
  return d;
}

nimble_dim_t nimble_subst_resolve_dim(nimble_subst *s, nimble_dim_t d) {
  note_dim_name(s, d);
  /* Chains are short; a cycle cannot form because binding resolves both
   * sides first and never binds a variable to itself. */
  while (d.kind == NIMBLE_DIM_VAR && d.var_id < s->cap && s->dim_bound[d.var_id])
    d = s->dims[d.var_id];
  return d;
}

static nimble_status_t log_binding(nimble_subst *s, uint32_t id) {
  if (s->trail_n == s->trail_cap) {
    size_t cap = s->trail_cap ? s->trail_cap * 2 : 64;
    uint32_t *t = nimble_arena_calloc(s->arena, cap, sizeof(*t));
    if (!t) return NIMBLE_OOM_IN("type inference");
    if (s->trail_n) memcpy(t, s->trail, s->trail_n * sizeof(*t));
    s->trail = t;
    s->trail_cap = cap;
  }
  s->trail[s->trail_n++] = id;
  return nimble_ok();
}

nimble_subst_mark_t nimble_subst_mark(const nimble_subst *s) {
  nimble_subst_mark_t m = {s->trail_n, s->next_id};
  return m;
}

void nimble_subst_undo_dims(nimble_subst *s, nimble_subst_mark_t mark) {
  size_t kept = mark.trail;
  for (size_t i = mark.trail; i < s->trail_n; i++) {
    uint32_t id = s->trail[i];
    if (id < mark.next_id) s->dim_bound[id] = 0;
    else s->trail[kept++] = id;
  }
  s->trail_n = kept;
}

nimble_status_t nimble_subst_bind_dim(nimble_subst *s, uint32_t var_id, nimble_dim_t value) {
  if (!ensure(s, var_id)) return NIMBLE_OOM_IN("type inference");
  if (s->dim_bound[var_id])
    return nimble_status_make(NIMBLE_INTERNAL, "dim variable %u is bound twice", var_id);
  value = nimble_subst_resolve_dim(s, value);
  if (value.kind == NIMBLE_DIM_VAR && value.var_id == var_id) return nimble_ok(); /* x = x */
  /* Two unbound variables: the older one (smaller id) stays the
   * representative, whichever side the caller binds. Ids grow in order of
   * creation, so the symbols written in the source (the parser's ids) win
   * over the fresh variables of calls: the inferred types keep the names the
   * user wrote, and every unbound variable newer than a point in the
   * inference stands only for variables made since (what the end of a
   * global function relies on to turn them into Any). */
  if (value.kind == NIMBLE_DIM_VAR && value.var_id > var_id && s->dim_names[var_id]) {
    uint32_t newer = value.var_id;
    if (!ensure(s, newer)) return NIMBLE_OOM_IN("type inference");
    s->dims[newer] = nimble_dim_var(var_id, s->dim_names[var_id]);
    s->dim_bound[newer] = 1;
    return log_binding(s, newer);
  }
  s->dims[var_id] = value;
  s->dim_bound[var_id] = 1;
  return log_binding(s, var_id);
}

/* Follows type variable bindings at the top only. */
static const nimble_type *shallow(nimble_subst *s, const nimble_type *t) {
  while (t && t->kind == NIMBLE_TYPE_VAR && t->u.var.id < s->cap && s->types[t->u.var.id])
    t = s->types[t->u.var.id];
  return t;
}

static const nimble_type *apply_list(nimble_subst *s, size_t n, const nimble_type *const *in,
                                     const nimble_type ***out, bool *changed) {
  *out = NULL;
  if (n == 0) return (const nimble_type *)1;
  const nimble_type **arr = nimble_arena_calloc(s->arena, n, sizeof(*arr));
  if (!arr) return NULL;
  for (size_t i = 0; i < n; i++) {
    arr[i] = nimble_subst_apply(s, in[i]);
    if (!arr[i]) return NULL;
    if (arr[i] != in[i]) *changed = true;
  }
  *out = arr;
  return (const nimble_type *)1;
}

const nimble_type *nimble_subst_apply(nimble_subst *s, const nimble_type *t) {
  if (!t) return NULL;
  t = shallow(s, t);
  bool changed = false;
  switch (t->kind) {
    case NIMBLE_TYPE_VAR:
    case NIMBLE_TYPE_UNRANKED_TENSOR: return t;
    case NIMBLE_TYPE_TENSOR: {
      nimble_dim_t dims[64];
      size_t rank = t->u.tensor.rank;
      if (rank > 64) return t; /* relations refuse such ranks anyway */
      for (size_t i = 0; i < rank; i++) {
        dims[i] = nimble_subst_resolve_dim(s, t->u.tensor.dims[i]);
        if (!nimble_dim_same(dims[i], t->u.tensor.dims[i])) changed = true;
      }
      return changed ? nimble_type_tensor(s->arena, t->u.tensor.dtype, rank, dims) : t;
    }
    case NIMBLE_TYPE_TUPLE: {
      const nimble_type **f;
      if (!apply_list(s, t->u.tuple.count, t->u.tuple.fields, &f, &changed)) return NULL;
      return changed ? nimble_type_tuple(s->arena, t->u.tuple.count, f) : t;
    }
    case NIMBLE_TYPE_ADT: {
      const nimble_type **a;
      if (!apply_list(s, t->u.adt.num_args, t->u.adt.args, &a, &changed)) return NULL;
      return changed ? nimble_type_adt(s->arena, t->u.adt.name, t->u.adt.num_args, a) : t;
    }
    case NIMBLE_TYPE_FUNC: {
      const nimble_type **p;
      if (!apply_list(s, t->u.func.num_params, t->u.func.params, &p, &changed)) return NULL;
      const nimble_type *r = nimble_subst_apply(s, t->u.func.ret);
      if (!r) return NULL;
      if (r != t->u.func.ret) changed = true;
      return changed ? nimble_type_func(s->arena, t->u.func.num_type_params, t->u.func.type_params,
                                        t->u.func.num_params, p, r)
                     : t;
    }
  }
  return t;
}

static bool occurs(nimble_subst *s, uint32_t id, const nimble_type *t) {
  t = shallow(s, t);
  switch (t->kind) {
    case NIMBLE_TYPE_VAR: return t->u.var.id == id;
    case NIMBLE_TYPE_TENSOR:
    case NIMBLE_TYPE_UNRANKED_TENSOR: return false;
    case NIMBLE_TYPE_TUPLE:
      for (size_t i = 0; i < t->u.tuple.count; i++)
        if (occurs(s, id, t->u.tuple.fields[i])) return true;
      return false;
    case NIMBLE_TYPE_ADT:
      for (size_t i = 0; i < t->u.adt.num_args; i++)
        if (occurs(s, id, t->u.adt.args[i])) return true;
      return false;
    case NIMBLE_TYPE_FUNC:
      for (size_t i = 0; i < t->u.func.num_params; i++)
        if (occurs(s, id, t->u.func.params[i])) return true;
      return occurs(s, id, t->u.func.ret);
  }
  return false;
}

static nimble_status_t mismatch(const nimble_type *a, const nimble_type *b, const char *what) {
  nimble_strbuf x, y;
  nimble_strbuf_init(&x);
  nimble_strbuf_init(&y);
  nimble_print_type(&x, a);
  nimble_print_type(&y, b);
  nimble_status_t st = nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s %s and %s", what,
                                          x.data ? x.data : "?", y.data ? y.data : "?");
  nimble_strbuf_deinit(&x);
  nimble_strbuf_deinit(&y);
  return st;
}

static nimble_status_t unify_rec(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                 const nimble_type **out);

static nimble_status_t unify_list(nimble_subst *s, size_t n, const nimble_type *const *a,
                                  const nimble_type *const *b, const nimble_type ***out) {
  *out = NULL;
  if (n == 0) return nimble_ok();
  const nimble_type **arr = nimble_arena_calloc(s->arena, n, sizeof(*arr));
  if (!arr) return NIMBLE_OOM_IN("type inference");
  for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(unify_rec(s, a[i], b[i], &arr[i]));
  *out = arr;
  return nimble_ok();
}

static nimble_status_t bind_type(nimble_subst *s, const nimble_type *var, const nimble_type *t,
                                 const nimble_type **out) {
  if (is_rigid(s, var))
    return mismatch(var, t, "a type parameter stands for any type; it cannot be fixed here:");
  if (occurs(s, var->u.var.id, t)) return mismatch(var, t, "infinite type: variable occurs in");
  if (!ensure(s, var->u.var.id)) return NIMBLE_OOM_IN("type inference");
  s->types[var->u.var.id] = t;
  *out = t;
  return nimble_ok();
}

static nimble_status_t unify_rec(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                 const nimble_type **out) {
  a = shallow(s, a);
  b = shallow(s, b);
  if (a == b) {
    *out = a;
    return nimble_ok();
  }
  if (a->kind == NIMBLE_TYPE_VAR && b->kind == NIMBLE_TYPE_VAR) {
    if (b->u.var.id == a->u.var.id) {
      *out = a;
      return nimble_ok();
    }
    /* Keep the older variable (the one the user wrote, or a rigid type
     * parameter) as the representative, so signatures keep their names. */
    bool a_first = is_rigid(s, a) || (!is_rigid(s, b) && a->u.var.id < b->u.var.id);
    return a_first ? bind_type(s, b, a, out) : bind_type(s, a, b, out);
  }
  if (a->kind == NIMBLE_TYPE_VAR) return bind_type(s, a, b, out);
  if (b->kind == NIMBLE_TYPE_VAR) return bind_type(s, b, a, out);
  if ((a->kind == NIMBLE_TYPE_UNRANKED_TENSOR && nimble_type_is_any_tensor(b)) ||
      (b->kind == NIMBLE_TYPE_UNRANKED_TENSOR && nimble_type_is_any_tensor(a))) {
    /* An unknown rank against any rank stays unknown, as Any does against
     * a dim: what the value really is gets checked where it is used (a
     * kernel checks the rank of every argument it is given). */
    if (a->u.tensor.dtype != b->u.tensor.dtype) return mismatch(a, b, "different dtypes:");
    *out = a->kind == NIMBLE_TYPE_UNRANKED_TENSOR ? a : b;
    return nimble_ok();
  }
  if (a->kind != b->kind) return mismatch(a, b, "different kinds of type:");
  switch (a->kind) {
    case NIMBLE_TYPE_TENSOR: {
      if (a->u.tensor.dtype != b->u.tensor.dtype) return mismatch(a, b, "different dtypes:");
      if (a->u.tensor.rank != b->u.tensor.rank) return mismatch(a, b, "different ranks:");
      size_t rank = a->u.tensor.rank;
      nimble_dim_t *dims = rank ? nimble_arena_calloc(s->arena, rank, sizeof(*dims)) : NULL;
      if (rank && !dims) return NIMBLE_OOM_IN("type inference");
      nimble_dim_ctx ctx = {s};
      for (size_t i = 0; i < rank; i++) {
        nimble_status_t st = nimble_dim_unify(&ctx, a->u.tensor.dims[i], b->u.tensor.dims[i], &dims[i]);
        if (st) {
          nimble_status_free(st);
          return mismatch(a, b, "different dims:");
        }
      }
      *out = nimble_type_tensor(s->arena, a->u.tensor.dtype, rank, dims);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_TYPE_TUPLE: {
      if (a->u.tuple.count != b->u.tuple.count) return mismatch(a, b, "tuples of different sizes:");
      const nimble_type **f;
      NIMBLE_RETURN_IF_ERROR(unify_list(s, a->u.tuple.count, a->u.tuple.fields, b->u.tuple.fields, &f));
      *out = nimble_type_tuple(s->arena, a->u.tuple.count, f);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_TYPE_ADT: {
      if (strcmp(a->u.adt.name, b->u.adt.name) != 0 || a->u.adt.num_args != b->u.adt.num_args)
        return mismatch(a, b, "different data types:");
      const nimble_type **args;
      NIMBLE_RETURN_IF_ERROR(unify_list(s, a->u.adt.num_args, a->u.adt.args, b->u.adt.args, &args));
      *out = nimble_type_adt(s->arena, a->u.adt.name, a->u.adt.num_args, args);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_TYPE_FUNC: {
      if (a->u.func.num_params != b->u.func.num_params ||
          a->u.func.num_type_params != b->u.func.num_type_params)
        return mismatch(a, b, "functions of different arity:");
      /* Type parameters pair up positionally. */
      for (size_t i = 0; i < a->u.func.num_type_params; i++) {
        const nimble_type *ta = a->u.func.type_params[i], *tb = b->u.func.type_params[i], *u;
        NIMBLE_RETURN_IF_ERROR(unify_rec(s, ta, tb, &u));
      }
      const nimble_type **p, *r;
      NIMBLE_RETURN_IF_ERROR(unify_list(s, a->u.func.num_params, a->u.func.params, b->u.func.params, &p));
      NIMBLE_RETURN_IF_ERROR(unify_rec(s, a->u.func.ret, b->u.func.ret, &r));
      *out = nimble_type_func(s->arena, 0, NULL, a->u.func.num_params, p, r);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_TYPE_VAR:
    case NIMBLE_TYPE_UNRANKED_TENSOR: break;
  }
  return mismatch(a, b, "cannot unify");
}

nimble_status_t nimble_type_unify(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                  const nimble_type **out) {
  const nimble_type *ra = nimble_subst_apply(s, a), *rb = nimble_subst_apply(s, b);
  if (!ra || !rb) return NIMBLE_OOM_IN("type inference");
  nimble_status_t st = unify_rec(s, a, b, out);
  if (!st) return nimble_ok();
  nimble_strbuf x, y;
  nimble_strbuf_init(&x);
  nimble_strbuf_init(&y);
  nimble_print_type(&x, ra);
  nimble_print_type(&y, rb);
  nimble_status_t r = nimble_status_make(nimble_status_code(st), "cannot unify %s with %s (%s)",
                                         x.data ? x.data : "?", y.data ? y.data : "?",
                                         nimble_status_message(st));
  nimble_strbuf_deinit(&x);
  nimble_strbuf_deinit(&y);
  nimble_status_free(st);
  return r;
}

/* ---- join ------------------------------------------------------------------ */

/* The least upper bound of two dims: the dim itself when both are the
 * same (after bindings), Any otherwise. Variables are never bound here: a
 * branch giving `n` and one giving 3 says nothing about n. */
static nimble_dim_t join_dim(nimble_subst *s, nimble_dim_t a, nimble_dim_t b) {
  a = nimble_subst_resolve_dim(s, a);
  b = nimble_subst_resolve_dim(s, b);
  return nimble_dim_same(a, b) ? a : nimble_dim_any();
}

static nimble_status_t join_rec(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                const nimble_type **out) {
  a = shallow(s, a);
  b = shallow(s, b);
  if (a == b) {
    *out = a;
    return nimble_ok();
  }
  /* A type not known yet takes the other side's (as in unification). */
  if (a->kind == NIMBLE_TYPE_VAR || b->kind == NIMBLE_TYPE_VAR) return unify_rec(s, a, b, out);
  if (nimble_type_is_any_tensor(a) && nimble_type_is_any_tensor(b)) {
    if (a->u.tensor.dtype != b->u.tensor.dtype) return mismatch(a, b, "different dtypes:");
    if (a->kind == NIMBLE_TYPE_UNRANKED_TENSOR || b->kind == NIMBLE_TYPE_UNRANKED_TENSOR ||
        a->u.tensor.rank != b->u.tensor.rank) {
      *out = nimble_type_unranked_tensor(s->arena, a->u.tensor.dtype);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    size_t rank = a->u.tensor.rank;
    nimble_dim_t *dims = rank ? nimble_arena_calloc(s->arena, rank, sizeof(*dims)) : NULL;
    if (rank && !dims) return NIMBLE_OOM_IN("type inference");
    for (size_t i = 0; i < rank; i++) dims[i] = join_dim(s, a->u.tensor.dims[i], b->u.tensor.dims[i]);
    *out = nimble_type_tensor(s->arena, a->u.tensor.dtype, rank, dims);
    return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
  }
  if (a->kind != b->kind) return mismatch(a, b, "different kinds of type:");
  switch (a->kind) {
    case NIMBLE_TYPE_TUPLE: {
      if (a->u.tuple.count != b->u.tuple.count) return mismatch(a, b, "tuples of different sizes:");
      size_t n = a->u.tuple.count;
      const nimble_type **f = n ? nimble_arena_calloc(s->arena, n, sizeof(*f)) : NULL;
      if (n && !f) return NIMBLE_OOM_IN("type inference");
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(join_rec(s, a->u.tuple.fields[i], b->u.tuple.fields[i], &f[i]));
      *out = nimble_type_tuple(s->arena, n, f);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    case NIMBLE_TYPE_ADT: {
      /* Values are immutable, so a List of [3]-tensors is also a List of
       * [?]-tensors: the arguments join. */
      if (strcmp(a->u.adt.name, b->u.adt.name) != 0 || a->u.adt.num_args != b->u.adt.num_args)
        return mismatch(a, b, "different data types:");
      size_t n = a->u.adt.num_args;
      const nimble_type **args = n ? nimble_arena_calloc(s->arena, n, sizeof(*args)) : NULL;
      if (n && !args) return NIMBLE_OOM_IN("type inference");
      for (size_t i = 0; i < n; i++) NIMBLE_RETURN_IF_ERROR(join_rec(s, a->u.adt.args[i], b->u.adt.args[i], &args[i]));
      *out = nimble_type_adt(s->arena, a->u.adt.name, n, args);
      return *out ? nimble_ok() : NIMBLE_OOM_IN("type inference");
    }
    default:
      /* Functions: parameters would need a meet; they must agree. */
      return unify_rec(s, a, b, out);
  }
}

nimble_status_t nimble_type_join(nimble_subst *s, const nimble_type *a, const nimble_type *b,
                                 const nimble_type **out) {
  const nimble_type *ra = nimble_subst_apply(s, a), *rb = nimble_subst_apply(s, b);
  if (!ra || !rb) return NIMBLE_OOM_IN("type inference");
  nimble_status_t st = join_rec(s, a, b, out);
  if (!st) return nimble_ok();
  nimble_strbuf x, y;
  nimble_strbuf_init(&x);
  nimble_strbuf_init(&y);
  nimble_print_type(&x, ra);
  nimble_print_type(&y, rb);
  nimble_status_t r = nimble_status_make(nimble_status_code(st), "no common type for %s and %s (%s)",
                                         x.data ? x.data : "?", y.data ? y.data : "?",
                                         nimble_status_message(st));
  nimble_strbuf_deinit(&x);
  nimble_strbuf_deinit(&y);
  nimble_status_free(st);
  return r;
}
