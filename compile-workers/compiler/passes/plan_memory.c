/* Memory planning on the explicit-memory form (after manifest_memory).
 *
 * Within each `let` chain, a tensor's lifetime runs from its alloc_tensor
 * to its last use (through views: a reshape_tensor of it, or a plain
 * alias, extends it). A tensor that may flow into a value bound or
 * returned — put in a tuple or an ADT, captured by a closure, passed to a
 * function that may return it, returned by an if branch or a match arm —
 * is pinned: it lives to the end and its storage is never handed on. An
 * if's condition and an operator's inputs are only read.
 *
 * Storage coalescing walks the chain in order with a free list: when a
 * tensor is allocated, a storage whose previous tenant died before this
 * point is reused if its size is provably not smaller — for constant sizes
 * the smallest that fits; for symbolic sizes (dynamic shapes) the same
 * product of symbolic dims, read from the tensor's annotated type, and a
 * constant factor not smaller. An Any dim proves nothing: such tensors get
 * their own storage. The reused storage's own alloc_storage and its size
 * computation (the size scalar's invoke and allocation) go away.
 *
 * Then `kill` goes right after each last use: of each tensor and its views,
 * and of each storage once its last tenant is dead (the VM's KillRegister
 * frees memory early instead of at function exit). Tensors that are
 * killed already (a second run) are left as they are. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

#define PLAN_MAX_SYMS 8

typedef struct size_desc {
  bool known;        /* false: contains Any (or not a tensor) */
  int64_t factor;    /* constant part in bytes */
  size_t nsyms;
  uint32_t syms[PLAN_MAX_SYMS]; /* symbolic dim ids, sorted */
} size_desc;

typedef struct tensor_info {
  size_t index;               /* its alloc_tensor */
  const nimble_expr *var;
  const nimble_expr *storage; /* storage variable, after reuse */
  size_t storage_index;       /* the storage's own alloc_storage */
  size_desc size;
  size_t last_use;
  bool pinned;
  bool planned;               /* storage exclusive to it, offset 0 */
  bool killed;                /* a kill of it exists already (planned before) */
  size_t uses;                /* references after its allocation */
  size_t writer;              /* index + 1 of the invoke writing it as its only output */
} tensor_info;

typedef struct free_storage {
  const nimble_expr *var;
  size_desc size;
  size_t free_after;
} free_storage;

typedef struct plan_ctx {
  nimble_arena *arena;
  pass_namer names;
  nimble_memory_plan_stats_t stats;
} plan_ctx;

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static size_desc describe(const nimble_type *t) {
  size_desc d = {false, 0, 0, {0}};
  if (!t || t->kind != NIMBLE_TYPE_TENSOR) return d;
  d.factor = (int64_t)nimble_dtype_size(t->u.tensor.dtype);
  for (size_t i = 0; i < t->u.tensor.rank; i++) {
    nimble_dim_t x = t->u.tensor.dims[i];
    if (x.kind == NIMBLE_DIM_CONST) {
      if (__builtin_mul_overflow(d.factor, x.value, &d.factor)) return d;
    } else if (x.kind == NIMBLE_DIM_VAR && d.nsyms < PLAN_MAX_SYMS) {
      d.syms[d.nsyms++] = x.var_id;
    } else {
      return d;
    }
  }
  qsort(d.syms, d.nsyms, sizeof d.syms[0], cmp_u32);
  d.known = true;
  return d;
}

/* Whether a storage of size `have` provably holds `need`. */
static bool fits(const size_desc *have, const size_desc *need) {
  if (!have->known || !need->known || have->nsyms != need->nsyms) return false;
  for (size_t i = 0; i < have->nsyms; i++)
    if (have->syms[i] != need->syms[i]) return false;
  return have->factor >= need->factor;
}

/* Every variable referenced in e, reported to fn. */
typedef struct refs {
  const nimble_expr **v;
  size_t n, cap;
} refs;

static nimble_status_t add_ref(void *user, const nimble_expr *e, const nimble_expr **out) {
  refs *r = user;
  *out = e;
  while (e->kind == NIMBLE_EXPR_LET) {
    const nimble_expr *ignored;
    NIMBLE_RETURN_IF_ERROR(add_ref(user, e->u.let.value, &ignored));
    e = e->u.let.body;
  }
  if (e->kind == NIMBLE_EXPR_VAR) {
    if (r->n == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 16;
      const nimble_expr **nv = realloc(r->v, ncap * sizeof *nv);
      if (!nv) return NIMBLE_OOM();
      r->v = nv;
      r->cap = ncap;
    }
    r->v[r->n++] = e;
    return nimble_ok();
  }
  const nimble_expr *same;
  return pass_map_children(NULL, e, add_ref, user, &same);
}

static nimble_status_t push_ref(refs *r, const nimble_expr *v) {
  if (r->n == r->cap) {
    size_t ncap = r->cap ? r->cap * 2 : 16;
    const nimble_expr **nv = realloc(r->v, ncap * sizeof *nv);
    if (!nv) return NIMBLE_OOM();
    r->v = nv;
    r->cap = ncap;
  }
  r->v[r->n++] = v;
  return nimble_ok();
}

static bool non_aliasing(const nimble_expr *v);

/* The variables whose values may flow into e's result (and so live as
 * long as it): not an if's condition, not what an operator only reads.
 * Where it cannot tell, every variable of e. */
static nimble_status_t flow_refs(const nimble_expr *e, refs *r) {
  const nimble_expr *ignored;
  switch (e->kind) {
    case NIMBLE_EXPR_VAR: return push_ref(r, e);
    case NIMBLE_EXPR_LET: {
      pass_chain chain;
      NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
      refs tail = {0};
      nimble_status_t st = flow_refs(chain.tail, &tail);
      bool local = false;
      for (size_t k = 0; !st && k < tail.n && !local; k++)
        for (size_t i = 0; i < chain.n && !local; i++) local = chain.vars[i] == tail.v[k];
      if (!st && local) st = add_ref(r, e, &ignored); /* bound inside: anything may flow */
      for (size_t k = 0; !st && !local && k < tail.n; k++) st = push_ref(r, tail.v[k]);
      free(tail.v);
      pass_chain_free(&chain);
      return st;
    }
    case NIMBLE_EXPR_IF:
      NIMBLE_RETURN_IF_ERROR(flow_refs(e->u.if_.then_branch, r));
      return flow_refs(e->u.if_.else_branch, r);
    case NIMBLE_EXPR_MATCH:
      /* an arm may return a field of the scrutinee */
      NIMBLE_RETURN_IF_ERROR(add_ref(r, e->u.match.scrutinee, &ignored));
      for (size_t i = 0; i < e->u.match.num_clauses; i++)
        NIMBLE_RETURN_IF_ERROR(flow_refs(e->u.match.clauses[i].body, r));
      return nimble_ok();
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++) NIMBLE_RETURN_IF_ERROR(flow_refs(e->u.tuple.fields[i], r));
      return nimble_ok();
    case NIMBLE_EXPR_PROJ: return flow_refs(e->u.proj.tuple, r);
    case NIMBLE_EXPR_CALL:
      if (pass_is_op_call(e, "reshape_tensor")) return flow_refs(e->u.call.args[0], r);
      if (non_aliasing(e)) return nimble_ok();
      return add_ref(r, e, &ignored); /* a function may return what it is given */
    case NIMBLE_EXPR_FUNC: return add_ref(r, e, &ignored); /* captured */
    default: return nimble_ok();
  }
}

/* Values that read tensors without holding on to them. */
static bool non_aliasing(const nimble_expr *v) {
  static const char *const ops[] = {"invoke", "invoke_shape_func", "shape_of", "kill",
                                    "alloc_tensor", "alloc_storage"};
  const nimble_op *op = pass_called_op(v);
  if (!op) return false;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op->name, ops[i])) return true;
  /* Shape arithmetic and other operator calls make new tensors. */
  return strcmp(op->name, "reshape_tensor") != 0;
}

static nimble_status_t plan_expr(void *user, const nimble_expr *e, const nimble_expr **out);

/* The device of storage variable `s` (alloc_storage's attribute; place_devices
 * sets "cuda"): a storage is handed on only to a tensor on its device. */
static const char *storage_device(const pass_chain *chain, const pass_map *storage_at, const nimble_expr *s) {
  size_t i = (size_t)(uintptr_t)pass_map_get(storage_at, s);
  if (!i) return "cpu";
  const nimble_expr *v = chain->values[i - 1];
  return nimble_attrs_string(pass_called_op(v), &v->u.call.attrs, "device");
}

static nimble_status_t plan_chain(plan_ctx *c, const nimble_expr *e, const nimble_expr **out) {
  pass_chain chain, res = {0};
  NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
  size_t n = chain.n;
  nimble_status_t st = nimble_ok();
  /* Nested blocks are planned on their own first. */
  for (size_t i = 0; !st && i < n; i++) st = plan_expr(c, chain.values[i], &chain.values[i]);
  const nimble_expr *tail = chain.tail;
  if (!st) st = plan_expr(c, chain.tail, &tail);

  pass_map storage_at = {0}; /* storage var -> index + 1 */
  pass_map storage_uses = {0}; /* storage var -> number of alloc_tensor uses */
  pass_map tensor_of = {0};  /* var (tensor or view) -> tensor_info index + 1 */
  tensor_info *tensors = calloc(n ? n : 1, sizeof *tensors);
  size_t nt = 0;
  refs r = {0};
  /* Views per tensor, in order: view_var[v], linked from view_head[k]. */
  const nimble_expr **view_var = calloc(n ? n : 1, sizeof *view_var);
  size_t *view_next = calloc(n ? n : 1, sizeof *view_next);
  size_t *view_head = calloc(n ? n : 1, sizeof *view_head), *view_tail = calloc(n ? n : 1, sizeof *view_tail);
  size_t nviews = 0;
  if (!tensors || !view_var || !view_next || !view_head || !view_tail) st = NIMBLE_OOM();
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_expr *v = chain.values[i];
    if (pass_is_op_call(v, "alloc_storage")) {
      c->stats.storages_before++;
      if (!pass_map_put(&storage_at, chain.vars[i], (void *)(uintptr_t)(i + 1))) st = NIMBLE_OOM();
    } else if (pass_is_op_call(v, "alloc_tensor")) {
      const nimble_expr *s = v->u.call.args[0], *off = v->u.call.args[1];
      size_t si = (size_t)(uintptr_t)pass_map_get(&storage_at, s);
      tensor_info *t = &tensors[nt];
      t->index = t->last_use = i;
      t->var = chain.vars[i];
      t->storage = s;
      t->storage_index = si ? si - 1 : 0;
      bool zero = off->kind == NIMBLE_EXPR_CONSTANT && off->u.constant.num_elements == 1 &&
                  off->u.constant.dtype == NIMBLE_DTYPE_INT64 && *(const int64_t *)off->u.constant.data == 0;
      t->planned = si && zero;
      /* The size: the annotation (symbolic) or the static shape attribute. */
      const nimble_type *ty = chain.vars[i]->u.var.annotation;
      if (!ty && v->u.call.num_args == 2) {
        size_t nd;
        const int64_t *d = nimble_attrs_ints(pass_called_op(v), &v->u.call.attrs, "shape", &nd);
        nimble_dim_t dims[NIMBLE_MAX_RANK];
        nimble_dtype_t dt = NIMBLE_DTYPE_FLOAT32;
        nimble_dtype_from_name(nimble_attrs_string(pass_called_op(v), &v->u.call.attrs, "dtype"),
                               strlen(nimble_attrs_string(pass_called_op(v), &v->u.call.attrs, "dtype")),
                               &dt);
        for (size_t k = 0; k < nd && k < NIMBLE_MAX_RANK; k++) dims[k] = nimble_dim_const(d[k]);
        ty = nd <= NIMBLE_MAX_RANK ? nimble_type_tensor(c->arena, dt, nd, dims) : NULL;
      }
      t->size = describe(ty);
      uintptr_t uses = (uintptr_t)pass_map_get(&storage_uses, s);
      if (!pass_map_put(&storage_uses, s, (void *)(uses + 1)) ||
          !pass_map_put(&tensor_of, chain.vars[i], (void *)(uintptr_t)(nt + 1)))
        st = NIMBLE_OOM();
      nt++;
      continue;
    }
    /* Uses, views and escapes. */
    r.n = 0;
    const nimble_expr *ignored;
    if (!st) st = add_ref(&r, v, &ignored);
    bool view = pass_is_op_call(v, "reshape_tensor") || v->kind == NIMBLE_EXPR_VAR;
    bool kill = pass_is_op_call(v, "kill");
    for (size_t k = 0; !st && k < r.n; k++) {
      size_t ti = (size_t)(uintptr_t)pass_map_get(&tensor_of, r.v[k]);
      if (!ti) continue;
      if (kill) { /* planned by an earlier run: leave it as it is */
        tensors[ti - 1].killed = true;
        continue;
      }
      tensors[ti - 1].last_use = i;
      tensors[ti - 1].uses++;
      if (pass_is_op_call(v, "invoke") && v->u.call.num_args &&
          v->u.call.args[v->u.call.num_args - 1] == tensors[ti - 1].var &&
          nimble_attrs_int(pass_called_op(v), &v->u.call.attrs, "num_outputs") == 1)
        tensors[ti - 1].writer = i + 1;
      if (view && (v->kind == NIMBLE_EXPR_VAR || r.v[k] == v->u.call.args[0])) {
        if (!pass_map_put(&tensor_of, chain.vars[i], (void *)(uintptr_t)ti)) st = NIMBLE_OOM();
        view_var[nviews] = chain.vars[i];
        if (view_tail[ti - 1]) view_next[view_tail[ti - 1] - 1] = nviews + 1;
        else view_head[ti - 1] = nviews + 1;
        view_tail[ti - 1] = ++nviews;
      }
    }
    /* What flows into the bound value outlives this point: pinned. */
    if (!st && !view) {
      r.n = 0;
      st = flow_refs(v, &r);
      for (size_t k = 0; !st && k < r.n; k++) {
        size_t ti = (size_t)(uintptr_t)pass_map_get(&tensor_of, r.v[k]);
        if (ti) tensors[ti - 1].pinned = true;
      }
    }
  }
  /* The tail uses its variables at the very end (nothing can follow to
   * kill them) and returns what flows into it. */
  r.n = 0;
  const nimble_expr *ignored;
  if (!st) st = add_ref(&r, tail, &ignored);
  for (size_t k = 0; !st && k < r.n; k++) {
    size_t ti = (size_t)(uintptr_t)pass_map_get(&tensor_of, r.v[k]);
    if (ti) tensors[ti - 1].last_use = n;
  }
  r.n = 0;
  if (!st) st = flow_refs(tail, &r);
  for (size_t k = 0; !st && k < r.n; k++) {
    size_t ti = (size_t)(uintptr_t)pass_map_get(&tensor_of, r.v[k]);
    if (ti) tensors[ti - 1].pinned = true;
  }
  /* A storage shared by several tensors (not ours) is left as it is. */
  for (size_t k = 0; k < nt; k++)
    if ((uintptr_t)pass_map_get(&storage_uses, tensors[k].storage) != 1 || tensors[k].killed)
      tensors[k].planned = false;

  /* Tensors by last use: dying[i] lists those whose last use is at i. */
  size_t *dying = calloc(n ? n : 1, sizeof *dying), *dying_next = calloc(nt ? nt : 1, sizeof *dying_next);
  if (!st && (!dying || !dying_next)) st = NIMBLE_OOM();
  for (size_t k = nt; !st && k-- > 0;) {
    if (tensors[k].last_use >= n) continue;
    dying_next[k] = dying[tensors[k].last_use];
    dying[tensors[k].last_use] = k + 1;
  }

  /* Coalescing. */
  free_storage *pool = calloc(nt ? nt : 1, sizeof *pool);
  bool *drop = calloc(n ? n : 1, sizeof *drop);
  if (!st && (!pool || !drop)) st = NIMBLE_OOM();
  size_t npool = 0;
  size_t ti = 0;
  for (size_t i = 0; !st && i < n; i++) {
    if (ti < nt && tensors[ti].index == i) {
      tensor_info *t = &tensors[ti++];
      if (t->planned) {
        size_t best = npool;
        for (size_t p = 0; p < npool; p++) {
          if (pool[p].free_after >= i || !fits(&pool[p].size, &t->size)) continue;
          if (strcmp(storage_device(&chain, &storage_at, pool[p].var), storage_device(&chain, &storage_at, t->storage)))
            continue;
          if (best == npool || pool[p].size.factor < pool[best].size.factor) best = p;
        }
        if (best < npool) {
          drop[t->storage_index] = true;
          t->storage = pool[best].var;
          t->size = pool[best].size;
          pool[best] = pool[--npool];
          const nimble_expr *args[3];
          const nimble_expr *old = chain.values[i];
          for (size_t k = 0; k < old->u.call.num_args; k++) args[k] = old->u.call.args[k];
          args[0] = t->storage;
          chain.values[i] = pass_call_with_args(c->arena, old, old->u.call.callee, args);
          if (!chain.values[i]) st = NIMBLE_OOM();
        }
      }
    }
    /* Storages whose tenant died at i become free after i. */
    for (size_t k = dying[i]; k; k = dying_next[k - 1]) {
      tensor_info *t = &tensors[k - 1];
      if (t->planned && !t->pinned && t->index <= i) pool[npool++] = (free_storage){t->storage, t->size, i};
    }
  }

  /* A dropped storage's size, computed by a kernel into an int64 scalar
   * of its own (manifest_memory), dies with it: its invoke and allocation
   * go too, and its storage unless a later tensor took it over. */
  for (size_t i = 0; !st && i < n; i++) {
    if (!drop[i] || !pass_is_op_call(chain.values[i], "alloc_storage")) continue;
    size_t k1 = (size_t)(uintptr_t)pass_map_get(&tensor_of, chain.values[i]->u.call.args[0]);
    if (!k1) continue;
    tensor_info *t = &tensors[k1 - 1];
    if (t->pinned || t->killed || t->uses != 2 || !t->writer || t->last_use != i || t->var != chain.values[i]->u.call.args[0])
      continue;
    drop[t->writer - 1] = true;
    drop[t->index] = true;
    t->planned = false;
    bool shared = (uintptr_t)pass_map_get(&storage_uses, t->storage) != 1 ||
                  !pass_map_has(&storage_at, t->storage);
    for (size_t k = 0; !shared && k < nt; k++) shared = k != k1 - 1 && tensors[k].storage == t->storage;
    if (!shared) drop[(size_t)(uintptr_t)pass_map_get(&storage_at, t->storage) - 1] = true;
  }

  /* Kills: after each last use, the tensor and its views; the storage once
   * its last tenant is dead and nothing reuses it later. */
  pass_map storage_last = {0}; /* storage var -> last use + 1 (0: pinned) */
  for (size_t k = 0; !st && k < nt; k++) {
    const tensor_info *t = &tensors[k];
    if (!t->planned) continue;
    uintptr_t prev = (uintptr_t)pass_map_get(&storage_last, t->storage);
    bool seen = pass_map_has(&storage_last, t->storage);
    uintptr_t v = t->pinned || (seen && prev == 0) ? 0 : t->last_use + 1;
    if (seen && v && prev > v) v = prev;
    if (!pass_map_put(&storage_last, t->storage, (void *)v)) st = NIMBLE_OOM();
  }
  for (size_t i = 0; !st && i < n; i++) {
    if (drop[i]) continue;
    st = pass_chain_push(&res, chain.vars[i], chain.values[i]);
    for (size_t k1 = dying[i]; !st && k1; k1 = dying_next[k1 - 1]) {
      size_t k = k1 - 1;
      const tensor_info *t = &tensors[k];
      if (!t->planned || t->pinned) continue;
      /* the tensor's views first, then the tensor */
      for (size_t v = view_head[k]; !st && v; v = view_next[v - 1]) {
        const nimble_expr *kv, *kill;
        st = pass_op_call(c->arena, "kill", 1, &view_var[v - 1], NULL, 0, &kill);
        if (!st && !(kv = pass_namer_var(&c->names, "k", NULL))) st = NIMBLE_OOM();
        if (!st) st = pass_chain_push(&res, kv, kill);
        if (!st) c->stats.kills++;
      }
      const nimble_expr *kv, *kill;
      if (!st) st = pass_op_call(c->arena, "kill", 1, &t->var, NULL, 0, &kill);
      if (!st && !(kv = pass_namer_var(&c->names, "k", NULL))) st = NIMBLE_OOM();
      if (!st) st = pass_chain_push(&res, kv, kill);
      if (!st) c->stats.kills++;
      if (!st && (uintptr_t)pass_map_get(&storage_last, t->storage) == i + 1) {
        st = pass_op_call(c->arena, "kill", 1, &t->storage, NULL, 0, &kill);
        if (!st && !(kv = pass_namer_var(&c->names, "k", NULL))) st = NIMBLE_OOM();
        if (!st) st = pass_chain_push(&res, kv, kill);
        if (!st) c->stats.kills++;
      }
    }
  }
  if (!st) {
    for (size_t i = 0; i < n; i++) c->stats.storages_after += pass_is_op_call(chain.values[i], "alloc_storage") && !drop[i];
    *out = pass_chain_build(c->arena, &res, tail);
    if (!*out) st = NIMBLE_OOM();
  }
  free(r.v);
  free(view_var);
  free(view_next);
  free(view_head);
  free(view_tail);
  free(dying);
  free(dying_next);
  free(pool);
  free(drop);
  free(tensors);
  pass_map_free(&storage_at);
  pass_map_free(&storage_uses);
  pass_map_free(&tensor_of);
  pass_map_free(&storage_last);
  pass_chain_free(&chain);
  pass_chain_free(&res);
  return st;
}

static nimble_status_t plan_expr(void *user, const nimble_expr *e, const nimble_expr **out) {
  plan_ctx *c = user;
  if (e->kind == NIMBLE_EXPR_LET) return plan_chain(c, e, out);
  return pass_map_children(c->arena, e, plan_expr, c, out);
}

nimble_status_t nimble_passes_plan_memory_stats(nimble_module *m, nimble_memory_plan_stats_t *stats) {
  plan_ctx c = {nimble_module_arena(m), {0}, {0, 0, 0}};
  nimble_status_t st = nimble_ok();
  size_t n = nimble_module_num_funcs(m);
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    const char *name = g->name;
    const nimble_expr *f = g->func, *nf;
    st = pass_namer_init(&c.names, c.arena, f);
    if (!st) st = plan_expr(&c, f, &nf);
    pass_namer_deinit(&c.names);
    if (!st && nf != f) st = nimble_module_replace_func(m, name, nf);
    if (st) st = nimble_status_annotate(st, "in @%s", name);
  }
  /* Whatever the dropped allocations left unused. */
  if (!st) st = nimble_passes_eliminate_dead_code(m);
  if (!st && stats) *stats = c.stats;
  return st;
}

nimble_status_t nimble_passes_plan_memory(nimble_module *m) {
  return nimble_passes_plan_memory_stats(m, NULL);
}
