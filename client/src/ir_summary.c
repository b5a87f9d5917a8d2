/* The JSON summary `nimble inspect --json` prints: the entry function's
 * inputs and outputs with their shapes (symbolic dims as strings, Any as
 * "?"), operator counts, control flow and which dims are dynamic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_ir.h"
#include "json_text.h"

typedef struct walk_stats {
  json_t *op_counts;   /* name -> count */
  size_t op_calls;
  size_t ifs, matches, closures;
  /* Globals referenced from the function being walked (indices into the
   * module's function list), as a row of the reference matrix. */
  const nimble_module *m;
  uint8_t *refs_row;
  bool failed;
} walk_stats;

static void count_op(walk_stats *w, const char *name) {
  json_t *c = json_object_get(w->op_counts, name);
  json_int_t n = c ? json_integer_value(c) : 0;
  if (json_object_set_new(w->op_counts, name, json_integer(n + 1))) w->failed = true;
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
        count_op(w, e->u.call.callee->u.op.op->name);
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

/* A dim as JSON: its extent, or its name, or "?" for Any. */
static json_t *dim_json(nimble_dim_t d) {
  switch (d.kind) {
    case NIMBLE_DIM_CONST: return json_integer(d.value);
    case NIMBLE_DIM_VAR: return nimble_cli_json_text(d.name ? d.name : "n");
    case NIMBLE_DIM_ANY: break;
  }
  return nimble_cli_json_text("?");
}

static const char *type_kind_name(nimble_type_kind_t k) {
  switch (k) {
    case NIMBLE_TYPE_TENSOR: return "tensor";
    case NIMBLE_TYPE_TUPLE: return "tuple";
    case NIMBLE_TYPE_FUNC: return "function";
    case NIMBLE_TYPE_ADT: return "adt";
    case NIMBLE_TYPE_VAR: return "type_var";
    case NIMBLE_TYPE_UNRANKED_TENSOR: return "unranked_tensor";
  }
  return "?";
}

/* Collects the names of symbolic dims and whether Any occurs anywhere in
 * `t` (tensors inside tuples, ADT arguments and function types too). */
static void scan_dims(const nimble_type *t, json_t *symbols, bool *any) {
  if (!t) return;
  switch (t->kind) {
    case NIMBLE_TYPE_TENSOR:
      for (size_t i = 0; i < t->u.tensor.rank; i++) {
        nimble_dim_t d = t->u.tensor.dims[i];
        if (d.kind == NIMBLE_DIM_ANY) *any = true;
        if (d.kind == NIMBLE_DIM_VAR) {
          const char *name = d.name ? d.name : "n";
          bool seen = false;
          for (size_t j = 0; j < json_array_size(symbols); j++)
            seen |= strcmp(json_string_value(json_array_get(symbols, j)), name) == 0;
          if (!seen) json_array_append_new(symbols, nimble_cli_json_text(name));
        }
      }
      break;
    case NIMBLE_TYPE_TUPLE:
      for (size_t i = 0; i < t->u.tuple.count; i++) scan_dims(t->u.tuple.fields[i], symbols, any);
      break;
    case NIMBLE_TYPE_FUNC:
      for (size_t i = 0; i < t->u.func.num_params; i++)
        scan_dims(t->u.func.params[i], symbols, any);
      scan_dims(t->u.func.ret, symbols, any);
      break;
    case NIMBLE_TYPE_ADT:
      for (size_t i = 0; i < t->u.adt.num_args; i++) scan_dims(t->u.adt.args[i], symbols, any);
      break;
    case NIMBLE_TYPE_UNRANKED_TENSOR: *any = true; break; /* even the rank is dynamic */
    case NIMBLE_TYPE_VAR: break;
  }
}

/* One input or output: name (when known), kind, type text, and for a
 * tensor its dtype, shape and dynamic axes. Dynamic dims are also listed
 * in `dynamic` as {"value": "inputs[0]", "name", "axis", "dim"}. */
static json_t *value_json(nimble_arena *arena, const char *name, const nimble_type *t,
                          const char *where, json_t *dynamic) {
  json_t *o = json_object();
  if (!o) return NULL;
  if (name) json_object_set_new(o, "name", nimble_cli_json_text(name));
  json_object_set_new(o, "kind", nimble_cli_json_text(t ? type_kind_name(t->kind) : "unknown"));
  const char *text = t ? nimble_type_to_string(arena, t) : NULL;
  json_object_set_new(o, "type", text ? nimble_cli_json_text(text) : json_null());
  if (t && t->kind == NIMBLE_TYPE_TENSOR) {
    json_object_set_new(o, "dtype", nimble_cli_json_text(nimble_dtype_name(t->u.tensor.dtype)));
    json_t *shape = json_array(), *axes = json_array();
    for (size_t i = 0; i < t->u.tensor.rank; i++) {
      nimble_dim_t d = t->u.tensor.dims[i];
      json_array_append_new(shape, dim_json(d));
      if (d.kind == NIMBLE_DIM_CONST) continue;
      json_array_append_new(axes, json_integer((json_int_t)i));
      json_t *dd = json_object();
      json_object_set_new(dd, "value", nimble_cli_json_text(where));
      if (name) json_object_set_new(dd, "name", nimble_cli_json_text(name));
      json_object_set_new(dd, "axis", json_integer((json_int_t)i));
      json_object_set_new(dd, "dim", dim_json(d));
      json_array_append_new(dynamic, dd);
    }
    json_object_set_new(o, "shape", shape);
    json_object_set_new(o, "dynamic_axes", axes);
  }
  return o;
}

/* The entry point: @main when there is one, else the last definition. */
static const nimble_global_func_t *entry_func(const nimble_module *m) {
  size_t n = nimble_module_num_funcs(m);
  for (size_t i = 0; i < n; i++)
    if (strcmp(nimble_module_func_at(m, i)->name, "main") == 0) return nimble_module_func_at(m, i);
  return n ? nimble_module_func_at(m, n - 1) : NULL;
}

/* Globals that can reach themselves through references (direct or mutual
 * recursion): a transitive closure over the reference matrix. */
static json_t *recursive_functions(const nimble_module *m, uint8_t *refs, size_t n) {
  /* Warshall's algorithm; modules have few globals (checked by the caller). */
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < n; i++)
      if (refs[i * n + k])
        for (size_t j = 0; j < n; j++)
          if (refs[k * n + j]) refs[i * n + j] = 1;
  json_t *out = json_array();
  for (size_t i = 0; i < n && out; i++)
    if (refs[i * n + i])
      json_array_append_new(out, nimble_cli_json_text(nimble_module_func_at(m, i)->name));
  return out;
}

/* Above this many globals the recursion check (n^2 bytes, n^3 steps) is
 * skipped and reported as unknown (null): 512 keeps it under a second. */
#define MAX_GLOBALS_FOR_RECURSION 512

nimble_status_t nimble_cli_summarize_module(const nimble_module *m, const nimble_typing *t,
                                            const char *source, const char *format,
                                            const char *const *output_names,
                                            size_t num_output_names, json_t **out) {
  *out = NULL;
  nimble_arena *arena = nimble_module_arena(m);
  size_t n = nimble_module_num_funcs(m);
  bool check_recursion = n <= MAX_GLOBALS_FOR_RECURSION;
  uint8_t *refs = check_recursion ? calloc(n * n + 1, 1) : NULL;
  json_t *root = json_object();
  walk_stats w = {json_object(), 0, 0, 0, 0, m, NULL, false};
  if (!root || !w.op_counts || (check_recursion && !refs)) {
    free(refs);
    json_decref(root);
    json_decref(w.op_counts);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory");
  }
  json_object_set_new(root, "file", nimble_cli_json_text(source));
  json_object_set_new(root, "format", nimble_cli_json_text(format));

  json_t *funcs = json_array();
  for (size_t i = 0; i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    const nimble_type *gt = nimble_typing_global_type(t, g->name);
    const char *text = gt ? nimble_type_to_string(arena, gt) : NULL;
    json_t *f = json_object();
    json_object_set_new(f, "name", nimble_cli_json_text(g->name));
    json_object_set_new(f, "type", text ? nimble_cli_json_text(text) : json_null());
    json_array_append_new(funcs, f);
    /* Without the matrix (too many globals), references are not kept. */
    w.refs_row = check_recursion ? refs + i * n : NULL;
    walk(&w, g->func->u.func.body);
  }
  json_object_set_new(root, "functions", funcs);
  json_t *types = json_array();
  for (size_t i = 0; i < nimble_module_num_typedefs(m); i++)
    json_array_append_new(types, nimble_cli_json_text(nimble_module_typedef_at(m, i)->name));
  json_object_set_new(root, "types", types);

  json_t *dynamic = json_array(), *symbols = json_array();
  bool any = false;
  const nimble_global_func_t *entry = entry_func(m);
  json_t *inputs = json_array(), *outputs = json_array();
  if (entry) {
    json_object_set_new(root, "entry", nimble_cli_json_text(entry->name));
    const nimble_type *ft = nimble_typing_global_type(t, entry->name);
    const nimble_expr *f = entry->func;
    for (size_t i = 0; i < f->u.func.num_params; i++) {
      const nimble_expr *p = f->u.func.params[i];
      const nimble_type *pt = nimble_typing_type_of(t, p);
      if (!pt && ft && ft->kind == NIMBLE_TYPE_FUNC && i < ft->u.func.num_params)
        pt = ft->u.func.params[i];
      char where[48];
      snprintf(where, sizeof where, "inputs[%zu]", i);
      json_array_append_new(inputs, value_json(arena, p->u.var.name, pt, where, dynamic));
      scan_dims(pt, symbols, &any);
    }
    const nimble_type *ret = ft && ft->kind == NIMBLE_TYPE_FUNC ? ft->u.func.ret : NULL;
    /* A tuple result is the entry's list of outputs, as ONNX has it. */
    if (ret && ret->kind == NIMBLE_TYPE_TUPLE) {
      for (size_t i = 0; i < ret->u.tuple.count; i++) {
        char where[48];
        snprintf(where, sizeof where, "outputs[%zu]", i);
        json_array_append_new(outputs,
                              value_json(arena, i < num_output_names ? output_names[i] : NULL,
                                         ret->u.tuple.fields[i], where, dynamic));
      }
    } else if (ret) {
      json_array_append_new(outputs, value_json(arena, num_output_names ? output_names[0] : NULL,
                                                ret, "outputs[0]", dynamic));
    }
    scan_dims(ret, symbols, &any);
  } else {
    json_object_set_new(root, "entry", json_null());
  }
  json_object_set_new(root, "inputs", inputs);
  json_object_set_new(root, "outputs", outputs);

  json_object_set_new(root, "op_counts", w.op_counts);
  json_object_set_new(root, "num_op_calls", json_integer((json_int_t)w.op_calls));
  json_t *rec = check_recursion ? recursive_functions(m, refs, n) : json_null();
  bool has_cf = w.ifs || w.matches || (rec && json_array_size(rec) > 0);
  json_t *cf = json_object();
  json_object_set_new(cf, "present", json_boolean(has_cf));
  json_object_set_new(cf, "if", json_integer((json_int_t)w.ifs));
  json_object_set_new(cf, "match", json_integer((json_int_t)w.matches));
  json_object_set_new(cf, "closures", json_integer((json_int_t)w.closures));
  json_object_set_new(cf, "recursive_functions", rec);
  json_object_set_new(root, "control_flow", cf);

  json_object_set_new(root, "dynamic", json_boolean(json_array_size(dynamic) > 0 || any ||
                                                    json_array_size(symbols) > 0));
  json_object_set_new(root, "symbolic_dims", symbols);
  json_object_set_new(root, "dynamic_dims", dynamic);
  free(refs);
  if (w.failed) {
    json_decref(root);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "out of memory while summarizing");
  }
  *out = root;
  return nimble_ok();
}
