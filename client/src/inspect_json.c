/* The JSON summary `nimble inspect --json` prints: the compiler's summary
 * of the typed module (nimble/typed_module.h) written out, with the entry
 * function's inputs and outputs and their shapes (symbolic dims as
 * strings, Any as "?"), operator counts, control flow and which dims are
 * dynamic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_ir.h"
#include "json_text.h"
#include "nimble/typed_module.h"

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

static json_t *names_json(const char *const *names, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n && a; i++) json_array_append_new(a, nimble_cli_json_text(names[i]));
  return a;
}

nimble_status_t nimble_cli_summarize_module(const nimble_module *m, const nimble_typing *t,
                                            const char *source, const char *format,
                                            const char *const *output_names,
                                            size_t num_output_names, json_t **out) {
  *out = NULL;
  nimble_module_summary_t sum;
  NIMBLE_RETURN_IF_ERROR(nimble_typed_module_summarize(m, t, &sum));
  nimble_arena *arena = nimble_module_arena(m);
  json_t *root = json_object();
  if (!root) return NIMBLE_OOM();
  json_object_set_new(root, "file", nimble_cli_json_text(source));
  json_object_set_new(root, "format", nimble_cli_json_text(format));

  json_t *funcs = json_array();
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    const nimble_type *gt = nimble_typing_global_type(t, g->name);
    const char *text = gt ? nimble_type_to_string(arena, gt) : NULL;
    json_t *f = json_object();
    json_object_set_new(f, "name", nimble_cli_json_text(g->name));
    json_object_set_new(f, "type", text ? nimble_cli_json_text(text) : json_null());
    json_array_append_new(funcs, f);
  }
  json_object_set_new(root, "functions", funcs);
  json_t *types = json_array();
  for (size_t i = 0; i < nimble_module_num_typedefs(m); i++)
    json_array_append_new(types, nimble_cli_json_text(nimble_module_typedef_at(m, i)->name));
  json_object_set_new(root, "types", types);

  json_t *dynamic = json_array();
  json_t *inputs = json_array(), *outputs = json_array();
  json_object_set_new(root, "entry", sum.entry ? nimble_cli_json_text(sum.entry->name) : json_null());
  for (size_t i = 0; i < sum.num_inputs; i++) {
    char where[48];
    snprintf(where, sizeof where, "inputs[%zu]", i);
    json_array_append_new(inputs, value_json(arena, sum.input_vars[i]->u.var.name, sum.input_types[i],
                                             where, dynamic));
  }
  /* A tuple result is the entry's list of outputs, as ONNX has it. */
  for (size_t i = 0; i < sum.num_outputs; i++) {
    char where[48];
    snprintf(where, sizeof where, "outputs[%zu]", i);
    json_array_append_new(outputs, value_json(arena, i < num_output_names ? output_names[i] : NULL,
                                              sum.output_types[i], where, dynamic));
  }
  json_object_set_new(root, "inputs", inputs);
  json_object_set_new(root, "outputs", outputs);

  json_t *op_counts = json_object();
  for (size_t i = 0; i < sum.num_ops && op_counts; i++)
    json_object_set_new(op_counts, sum.ops[i].op, json_integer((json_int_t)sum.ops[i].calls));
  json_object_set_new(root, "op_counts", op_counts);
  json_object_set_new(root, "num_op_calls", json_integer((json_int_t)sum.num_op_calls));
  json_t *cf = json_object();
  json_object_set_new(cf, "present", json_boolean(sum.has_control_flow));
  json_object_set_new(cf, "if", json_integer((json_int_t)sum.num_ifs));
  json_object_set_new(cf, "match", json_integer((json_int_t)sum.num_matches));
  json_object_set_new(cf, "closures", json_integer((json_int_t)sum.num_closures));
  json_object_set_new(cf, "recursive_functions",
                      sum.recursion_known ? names_json(sum.recursive, sum.num_recursive) : json_null());
  json_object_set_new(root, "control_flow", cf);

  json_object_set_new(root, "dynamic", json_boolean(sum.dynamic));
  json_object_set_new(root, "symbolic_dims", names_json(sum.symbolic_dims, sum.num_symbolic_dims));
  json_object_set_new(root, "dynamic_dims", dynamic);
  *out = root;
  return nimble_ok();
}
