/* Common-subexpression elimination over `let` bindings: when a pure value
 * (an operator call, a tuple or a projection) equals one bound earlier and
 * still in scope, the later variable becomes the earlier one. Equality is
 * structural with variables by identity (after earlier replacements), so
 * `add(%a, %b)` twice is one value, `add(%a, %b)` and `add(%b, %a)` are
 * two. Scopes follow the program: a binding inside an `if` branch, a match
 * arm or a function body is not seen outside it. Memory operators are
 * never merged (two allocations are two objects). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

#define CSE_BUCKETS 4096

typedef struct cse_entry {
  uint64_t hash;
  const nimble_expr *value;
  const nimble_expr *var;
  size_t prev; /* previous head of the bucket, +1 (0: none) */
} cse_entry;

typedef struct cse_ctx {
  cse_entry *entries;
  size_t n, cap;
  size_t heads[CSE_BUCKETS]; /* entry index + 1 */
} cse_ctx;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t hash_bytes(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

static uint64_t hash_expr(const nimble_expr *e) {
  uint64_t h = mix(7, (uint64_t)e->kind);
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
    case NIMBLE_EXPR_OP:
    case NIMBLE_EXPR_CONSTRUCTOR:
      return mix(h, e->kind == NIMBLE_EXPR_OP ? (uint64_t)(uintptr_t)e->u.op.op
                    : e->kind == NIMBLE_EXPR_CONSTRUCTOR ? (uint64_t)(uintptr_t)e->u.ctor.ctor
                                                         : (uint64_t)(uintptr_t)e);
    case NIMBLE_EXPR_GLOBAL: return mix(h, hash_bytes(e->u.global.name, strlen(e->u.global.name)));
    case NIMBLE_EXPR_CONSTANT:
      return mix(h, hash_bytes(e->u.constant.data,
                               e->u.constant.num_elements * nimble_dtype_size(e->u.constant.dtype)));
    case NIMBLE_EXPR_CALL:
      h = mix(h, hash_expr(e->u.call.callee));
      for (size_t i = 0; i < e->u.call.num_args; i++) h = mix(h, hash_expr(e->u.call.args[i]));
      return h;
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++) h = mix(h, hash_expr(e->u.tuple.fields[i]));
      return h;
    case NIMBLE_EXPR_PROJ: return mix(mix(h, e->u.proj.index), hash_expr(e->u.proj.tuple));
    default: return mix(h, (uint64_t)(uintptr_t)e);
  }
}

static bool same(const nimble_expr *a, const nimble_expr *b) {
  if (a == b) return true;
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case NIMBLE_EXPR_OP: return a->u.op.op == b->u.op.op;
    case NIMBLE_EXPR_CONSTRUCTOR: return a->u.ctor.ctor == b->u.ctor.ctor;
    case NIMBLE_EXPR_GLOBAL: return strcmp(a->u.global.name, b->u.global.name) == 0;
    case NIMBLE_EXPR_CONSTANT: {
      const nimble_const_tensor_t *x = &a->u.constant, *y = &b->u.constant;
      if (x->dtype != y->dtype || x->rank != y->rank) return false;
      for (size_t i = 0; i < x->rank; i++)
        if (x->dims[i] != y->dims[i]) return false;
      return memcmp(x->data, y->data, x->num_elements * nimble_dtype_size(x->dtype)) == 0;
    }
    case NIMBLE_EXPR_CALL: {
      if (a->u.call.num_args != b->u.call.num_args || !same(a->u.call.callee, b->u.call.callee) ||
          a->u.call.attrs.count != b->u.call.attrs.count)
        return false;
      for (size_t i = 0; i < a->u.call.num_args; i++)
        if (!same(a->u.call.args[i], b->u.call.args[i])) return false;
      for (size_t i = 0; i < a->u.call.attrs.count; i++)
        if (!nimble_attr_value_equal(&a->u.call.attrs.values[i], &b->u.call.attrs.values[i]))
          return false;
      return true;
    }
    case NIMBLE_EXPR_TUPLE:
      if (a->u.tuple.count != b->u.tuple.count) return false;
      for (size_t i = 0; i < a->u.tuple.count; i++)
        if (!same(a->u.tuple.fields[i], b->u.tuple.fields[i])) return false;
      return true;
    case NIMBLE_EXPR_PROJ:
      return a->u.proj.index == b->u.proj.index && same(a->u.proj.tuple, b->u.proj.tuple);
    default: return false; /* variables by identity; binders never merge */
  }
}

/* Values worth merging: pure operator calls, tuples, projections, built
 * only from variables, constants and other such values. */
static bool candidate(const nimble_expr *e) {
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
    case NIMBLE_EXPR_CONSTANT: return true;
    case NIMBLE_EXPR_CALL: {
      const nimble_op *op = pass_called_op(e);
      if (!op || pass_is_memory_op(op)) return false;
      for (size_t i = 0; i < e->u.call.num_args; i++)
        if (!candidate(e->u.call.args[i])) return false;
      return true;
    }
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++)
        if (!candidate(e->u.tuple.fields[i])) return false;
      return true;
    case NIMBLE_EXPR_PROJ: return candidate(e->u.proj.tuple);
    default: return false;
  }
}

static size_t cse_enter(pass_rewriter *rw) { return ((cse_ctx *)rw->user)->n; }

static void cse_leave(pass_rewriter *rw, size_t mark) {
  cse_ctx *c = rw->user;
  while (c->n > mark) { /* LIFO: each popped entry is its bucket's head */
    cse_entry *en = &c->entries[--c->n];
    c->heads[en->hash % CSE_BUCKETS] = en->prev;
  }
}

static nimble_status_t cse_bind(pass_rewriter *rw, const nimble_expr *var, const nimble_expr *value,
                                bool *drop) {
  cse_ctx *c = rw->user;
  if (value->kind == NIMBLE_EXPR_VAR || value->kind == NIMBLE_EXPR_CONSTANT || !candidate(value))
    return nimble_ok();
  uint64_t h = hash_expr(value);
  size_t b = h % CSE_BUCKETS;
  for (size_t i = c->heads[b]; i; i = c->entries[i - 1].prev) {
    const cse_entry *en = &c->entries[i - 1];
    if (en->hash == h && same(en->value, value)) {
      if (!pass_map_put(&rw->subst, var, (void *)en->var)) return NIMBLE_OOM();
      *drop = true;
      return nimble_ok();
    }
  }
  if (c->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 64;
    cse_entry *ne = realloc(c->entries, ncap * sizeof *ne);
    if (!ne) return NIMBLE_OOM();
    c->entries = ne;
    c->cap = ncap;
  }
  c->entries[c->n] = (cse_entry){h, value, var, c->heads[b]};
  c->heads[b] = ++c->n;
  return nimble_ok();
}

nimble_status_t nimble_passes_eliminate_common_subexprs(nimble_module *m) {
  cse_ctx *c = calloc(1, sizeof *c);
  if (!c) return NIMBLE_OOM();
  pass_rewriter rw = {0};
  rw.arena = nimble_module_arena(m);
  rw.user = c;
  rw.bind = cse_bind;
  rw.enter = cse_enter;
  rw.leave = cse_leave;
  nimble_status_t st = pass_rewrite_module(&rw, m);
  pass_map_free(&rw.subst);
  free(c->entries);
  free(c);
  return st;
}
