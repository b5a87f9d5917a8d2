/* The summary of a typed module (nimble/typed_module.h): the entry's
 * signature with its symbolic and Any dims, operator calls, control flow
 * and recursion. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nimble/ptr_map.h"
#include "nimble/typed_module.h"

/* A growable list of names (malloc'ed while walking; copied into the
 * arena at the end). */
typedef struct name_list {
  const char **items;
  size_t count, cap;
} name_list;

static bool list_push(name_list *l, const char *name) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    const char **items = realloc(l->items, cap * sizeof *items);
    if (!items) return false;
    l->items = items;
    l->cap = cap;
  }
  l->items[l->count++] = name;
  return true;
}

typedef struct walk_stats {
  const nimble_module *m;
  nimble_ptr_map op_index; /* nimble_op -> its index in ops + 1 */
  nimble_op_calls_t *ops;  /* by operator, first met first */
  size_t num_ops, cap_ops;
  size_t op_calls;
  size_t ifs, matches, closures;
  /* Globals referenced from the function being walked (indices into the
   * module's function list), as a row of the reference matrix. */
  uint8_t *refs_row;
  bool failed;
} walk_stats;

static void count_op(walk_stats *w, const nimble_op *op) {
  size_t index = (size_t)(uintptr_t)nimble_ptr_map_get(&w->op_index, op);
  if (!index) {
    if (w->num_ops == w->cap_ops) {
      size_t cap = w->cap_ops ? 2 * w->cap_ops : 32;
      nimble_op_calls_t *ops = realloc(w->ops, cap * sizeof *ops);
      if (!ops) {
        w->failed = true;
        return;
      }
      w->ops = ops;
      w->cap_ops = cap;
    }
    w->ops[w->num_ops++] = (nimble_op_calls_t){op->name, 0};
    index = w->num_ops;
    if (!nimble_ptr_map_put(&w->op_index, op, (void *)(uintptr_t)index)) {
      w->failed = true;
      return;
    }
  }
  w->ops[index - 1].calls++;
  w->op_calls++;
}

static void note_global(walk_stats *w, const char *name) {
  if (!w->refs_row) return;
  size_t n = nimble_module_num_funcs(w->m);
  for (size_t i = 0; i < n; i++) {
    if (strcmp(nimble_module_func_at(w->m, i)->name, name) == 0) {
      w->refs_row[i] = 1;
      return;
    }
  }
}

static void walk(walk_stats *w, const nimble_expr *e) {
  /* `let` chains iterate; other nesting is bounded by the frontends. */
  while (e->kind == NIMBLE_EXPR_LET) {
    walk(w, e->u.let.value);
    e = e->u.let.body;
  }
  switch (e->kind) {
    case NIMBLE_EXPR_VAR:
    case NIMBLE_EXPR_CONSTANT:
    case NIMBLE_EXPR_OP:
    case NIMBLE_EXPR_CONSTRUCTOR:
    case NIMBLE_EXPR_LET: break;
    case NIMBLE_EXPR_GLOBAL: note_global(w, e->u.global.name); break;
    case NIMBLE_EXPR_CALL:
      if (e->u.call.callee->kind == NIMBLE_EXPR_OP)
        count_op(w, e->u.call.callee->u.op.op);
      else
        walk(w, e->u.call.callee);
      for (size_t i = 0; i < e->u.call.num_args; i++) walk(w, e->u.call.args[i]);
      break;
    case NIMBLE_EXPR_IF:
      w->ifs++;
      walk(w, e->u.if_.cond);
      walk(w, e->u.if_.then_branch);
      walk(w, e->u.if_.else_branch);
      break;
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++) walk(w, e->u.tuple.fields[i]);
      break;
    case NIMBLE_EXPR_PROJ: walk(w, e->u.proj.tuple); break;
    case NIMBLE_EXPR_FUNC:
      w->closures++;
      walk(w, e->u.func.body);
      break;
    case NIMBLE_EXPR_MATCH:
      w->matches++;
      walk(w, e->u.match.scrutinee);
      for (size_t i = 0; i < e->u.match.num_clauses; i++) walk(w, e->u.match.clauses[i].body);
      break;
  }
}

/* Collects the names of symbolic dims (once each) and whether Any occurs
 * anywhere in `t` (tensors inside tuples, ADT arguments and function types
 * too). */
static bool scan_dims(const nimble_type *t, name_list *symbols, bool *any) {
  if (!t) return true;
  switch (t->kind) {
    case NIMBLE_TYPE_TENSOR:
      for (size_t i = 0; i < t->u.tensor.rank; i++) {
        nimble_dim_t d = t->u.tensor.dims[i];
        if (d.kind == NIMBLE_DIM_ANY) *any = true;
        if (d.kind == NIMBLE_DIM_VAR) {
          const char *name = d.name ? d.name : "n";
          bool seen = false;
          for (size_t j = 0; j < symbols->count && !seen; j++) seen = strcmp(symbols->items[j], name) == 0;
          if (!seen && !list_push(symbols, name)) return false;
        }
      }
      return true;
    case NIMBLE_TYPE_TUPLE:
      for (size_t i = 0; i < t->u.tuple.count; i++)
        if (!scan_dims(t->u.tuple.fields[i], symbols, any)) return false;
      return true;
    case NIMBLE_TYPE_FUNC:
      for (size_t i = 0; i < t->u.func.num_params; i++)
        if (!scan_dims(t->u.func.params[i], symbols, any)) return false;
      return scan_dims(t->u.func.ret, symbols, any);
    case NIMBLE_TYPE_ADT:
      for (size_t i = 0; i < t->u.adt.num_args; i++)
        if (!scan_dims(t->u.adt.args[i], symbols, any)) return false;
      return true;
    case NIMBLE_TYPE_UNRANKED_TENSOR: *any = true; return true; /* even the rank is dynamic */
    case NIMBLE_TYPE_VAR: return true;
  }
  return true;
}

/* The entry point: @main when there is one, else the last definition. */
static const nimble_global_func_t *entry_func(const nimble_module *m) {
  size_t n = nimble_module_num_funcs(m);
  for (size_t i = 0; i < n; i++)
    if (strcmp(nimble_module_func_at(m, i)->name, "main") == 0) return nimble_module_func_at(m, i);
  return n ? nimble_module_func_at(m, n - 1) : NULL;
}

/* Globals that can reach themselves through references: a transitive
 * closure over the reference matrix (Warshall's algorithm). */
static bool recursive_functions(const nimble_module *m, uint8_t *refs, size_t n, name_list *out) {
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < n; i++)
      if (refs[i * n + k])
        for (size_t j = 0; j < n; j++)
          if (refs[k * n + j]) refs[i * n + j] = 1;
  for (size_t i = 0; i < n; i++)
    if (refs[i * n + i] && !list_push(out, nimble_module_func_at(m, i)->name)) return false;
  return true;
}

/* A copy of `l` in the arena: NULL when empty, or (with *ok cleared) when
 * out of memory. */
static const char **to_arena(nimble_arena *arena, const name_list *l, bool *ok) {
  if (!l->count) return NULL;
  const char **copy = nimble_arena_calloc(arena, l->count, sizeof *copy);
  if (!copy) {
    *ok = false;
    return NULL;
  }
  memcpy(copy, l->items, l->count * sizeof *copy);
  return copy;
}

nimble_status_t nimble_typed_module_summarize(const nimble_module *m, const nimble_typing *t,
                                              nimble_module_summary_t *out) {
  memset(out, 0, sizeof *out);
  nimble_arena *arena = nimble_module_arena(m);
  size_t n = nimble_module_num_funcs(m);
  out->recursion_known = n <= NIMBLE_SUMMARY_MAX_GLOBALS_FOR_RECURSION;
  uint8_t *refs = out->recursion_known ? calloc(n * n + 1, 1) : NULL;
  walk_stats w = {.m = m};
  name_list recursive = {0}, symbols = {0};
  bool ok = !out->recursion_known || refs;

  for (size_t i = 0; i < n && ok; i++) {
    /* Without the matrix (too many globals), references are not kept. */
    w.refs_row = refs ? refs + i * n : NULL;
    walk(&w, nimble_module_func_at(m, i)->func->u.func.body);
  }
  ok = ok && !w.failed;
  if (ok && refs) ok = recursive_functions(m, refs, n, &recursive);

  const nimble_global_func_t *entry = entry_func(m);
  out->entry = entry;
  if (ok && entry) {
    const nimble_type *ft = nimble_typing_global_type(t, entry->name);
    const nimble_expr *f = entry->func;
    size_t np = f->u.func.num_params;
    const nimble_type **in_types = np ? nimble_arena_calloc(arena, np, sizeof *in_types) : NULL;
    ok = !np || in_types;
    for (size_t i = 0; ok && i < np; i++) {
      const nimble_type *pt = nimble_typing_type_of(t, f->u.func.params[i]);
      if (!pt && ft && ft->kind == NIMBLE_TYPE_FUNC && i < ft->u.func.num_params)
        pt = ft->u.func.params[i];
      in_types[i] = pt;
      ok = scan_dims(pt, &symbols, &out->has_any_dim);
    }
    out->num_inputs = np;
    out->input_vars = (const nimble_expr *const *)f->u.func.params;
    out->input_types = in_types;
    const nimble_type *ret = ft && ft->kind == NIMBLE_TYPE_FUNC ? ft->u.func.ret : NULL;
    if (ret && ret->kind == NIMBLE_TYPE_TUPLE) {
      out->num_outputs = ret->u.tuple.count;
      out->output_types = (const nimble_type *const *)ret->u.tuple.fields;
    } else if (ret) {
      const nimble_type **one = nimble_arena_alloc(arena, sizeof *one);
      ok = ok && one;
      if (one) *one = ret;
      out->num_outputs = 1;
      out->output_types = one;
    }
    ok = ok && scan_dims(ret, &symbols, &out->has_any_dim);
  }

  nimble_op_calls_t *ops = w.num_ops ? nimble_arena_calloc(arena, w.num_ops, sizeof *ops) : NULL;
  ok = ok && (!w.num_ops || ops);
  if (ok && ops) memcpy(ops, w.ops, w.num_ops * sizeof *ops);
  out->num_ops = w.num_ops;
  out->ops = ops;
  out->num_op_calls = w.op_calls;
  out->num_ifs = w.ifs;
  out->num_matches = w.matches;
  out->num_closures = w.closures;
  out->num_recursive = recursive.count;
  if (ok) out->recursive = to_arena(arena, &recursive, &ok);
  out->has_control_flow = w.ifs || w.matches || recursive.count;
  out->num_symbolic_dims = symbols.count;
  if (ok) out->symbolic_dims = to_arena(arena, &symbols, &ok);
  /* A dim that is not a constant is a symbol or Any. */
  out->dynamic = out->has_any_dim || symbols.count > 0;

  free(refs);
  free(w.ops);
  nimble_ptr_map_deinit(&w.op_index);
  free(recursive.items);
  free(symbols.items);
  if (!ok) {
    memset(out, 0, sizeof *out);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory while summarizing");
  }
  return nimble_ok();
}
