/* The project's reference models (docs/reference-models.md) import into the
 * IR and type-check. The independent reference for the inferred output
 * types is each model's json, written by the exporter from PyTorch's
 * dynamic axes, and the concrete output shapes of every case PyTorch ran:
 * a constant dim the importer infers must match both. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble_test.h"
#include "nimble/nir.h"

static const char *const kModels[] = {"mlp", "cnn", "squeezenet1_0", "mobilenet_v2", "lstm", "lstm2", "gru",
                                      "bert_tiny", "bert_tiny_emb", "loop_if", "while_loop", "dyn_ops"};

static const char *model_path(const char *name, const char *ext, char *buf, size_t size) {
  char rel[128];
  snprintf(rel, sizeof rel, "%s.%s", name, ext);
  const char *p = import_test_path("NIMBLE_MODELS_DIR", rel, buf, size);
  ck_assert_msg(p != NULL, "NIMBLE_MODELS_DIR is not set");
  return p;
}

static const char *dtype_of_json(const char *s) {
  return strcmp(s, "float32") == 0 ? "float32" : strcmp(s, "int64") == 0 ? "int64" : s;
}

/* Checks one model's @main against its json. */
static void check_model(const char *name) {
  char path[1024], jpath[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  nimble_status_t s = import_test_check_file(arena, model_path(name, "onnx", path, sizeof path), &m, &t);
  ck_assert_msg(s == NULL, "%s: %s", name, nimble_status_message(s));
  json_error_t jerr;
  json_t *j = json_load_file(model_path(name, "json", jpath, sizeof jpath), 0, &jerr);
  ck_assert_msg(j != NULL, "%s: %s", jpath, jerr.text);
  /* Parameters: the graph inputs, in order, names kept. */
  const nimble_expr *main_fn = nimble_module_find_func(m, "main");
  ck_assert_ptr_nonnull(main_fn);
  json_t *inputs = json_object_get(j, "inputs");
  ck_assert_uint_eq(main_fn->u.func.num_params, json_array_size(inputs));
  for (size_t i = 0; i < json_array_size(inputs); i++)
    ck_assert_str_eq(main_fn->u.func.params[i]->u.var.name,
                     json_string_value(json_object_get(json_array_get(inputs, i), "name")));
  json_t *outputs = json_object_get(j, "outputs");
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    json_t *o = json_array_get(outputs, i);
    const nimble_type *ty = import_test_main_output(t, i);
    char buf[256];
    ck_assert_msg(ty && ty->kind == NIMBLE_TYPE_TENSOR, "%s: output %zu missing", name, i);
    nimble_type_format(ty, buf, sizeof buf);
    ck_assert_msg(strcmp(nimble_dtype_name(ty->u.tensor.dtype),
                         dtype_of_json(json_string_value(json_object_get(o, "dtype")))) == 0,
                  "%s: output %zu is %s", name, i, buf);
    json_t *shape = json_object_get(o, "shape");
    ck_assert_msg(ty->u.tensor.rank == json_array_size(shape), "%s: output %zu is %s", name, i, buf);
    for (size_t d = 0; d < ty->u.tensor.rank; d++) {
      json_t *jd = json_array_get(shape, d);
      nimble_dim_t dim = ty->u.tensor.dims[d];
      if (json_is_integer(jd) && dim.kind == NIMBLE_DIM_CONST)
        ck_assert_msg(dim.value == json_integer_value(jd), "%s: output %zu is %s, dim %zu should be %lld", name,
                      i, buf, d, (long long)json_integer_value(jd));
      /* A constant the importer inferred where the exporter wrote a
       * symbolic dim must hold in every case PyTorch ran. */
      json_t *cases = json_object_get(j, "cases");
      for (size_t k = 0; dim.kind == NIMBLE_DIM_CONST && k < json_array_size(cases); k++) {
        json_t *co = json_object_get(json_object_get(json_array_get(cases, k), "outputs"),
                                     json_string_value(json_object_get(o, "name")));
        json_t *cd = json_array_get(json_object_get(co, "shape"), d);
        ck_assert_msg(cd && json_integer_value(cd) == dim.value, "%s: output %zu is %s, case %zu has dim %zu = %lld",
                      name, i, buf, k, d, (long long)json_integer_value(cd));
      }
    }
  }
  json_decref(j);
  nimble_arena_destroy(arena);
}

START_TEST(test_every_reference_model_imports_and_type_checks) {
  check_model(kModels[_i]);
}
END_TEST

START_TEST(test_bert_tiny_keeps_the_sequence_dim_symbolic_from_input_to_output) {
  char path[1024], buf[256];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path("bert_tiny", "onnx", path, sizeof path), &m, &t));
  ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), "Tensor[(1, seq, 128), float32]");
  const nimble_type *ft = nimble_typing_global_type(t, "main");
  nimble_type_format(ft->u.func.params[0], buf, sizeof buf);
  ck_assert_str_eq(buf, "Tensor[(1, seq, 128), float32]");
  /* The same variable, not two dims that happen to share a name. */
  ck_assert_uint_eq(ft->u.func.params[0]->u.tensor.dims[1].var_id, ft->u.func.ret->u.tensor.dims[1].var_id);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_mlp_maps_to_dense_and_relu_with_a_symbolic_batch) {
  char path[1024], buf[256];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path("mlp", "onnx", path, sizeof path), &m, &t));
  ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), "Tensor[(batch, 10), float32]");
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  /* Three Gemm become three dense, two Relu two relu. */
  size_t dense = 0, relu = 0;
  for (const char *p = text; (p = strstr(p, "dense(")); p++) dense++;
  for (const char *p = text; (p = strstr(p, "relu(")); p++) relu++;
  ck_assert_uint_eq(dense, 3);
  ck_assert_uint_eq(relu, 2);
  free(text);
  nimble_arena_destroy(arena);
}
END_TEST

/* The recurrent model imports as one `call` operator (its steps run in one
 * kernel, no step function), after the projection of every step as one
 * dense; its result type is `want`, y's step count X's run-time seq, and
 * the call's text holds `attr` (NULL: nothing asked). */
static void check_one_scan(const char *model, const char *want, const char *call, const char *attr) {
  char path[1024], buf[512];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path(model, "onnx", path, sizeof path), &m, &t));
  ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), want);
  const nimble_type *ft = nimble_typing_global_type(t, "main");
  ck_assert_uint_eq(ft->u.func.params[0]->u.tensor.dims[0].var_id,
                    ft->u.func.ret->u.tuple.fields[0]->u.tensor.dims[0].var_id);
  ck_assert_uint_eq(nimble_module_num_funcs(m), 1);
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  const char *scan = strstr(text, call);
  ck_assert_ptr_nonnull(scan);
  ck_assert_ptr_null(strstr(scan + 1, call));
  if (attr) ck_assert_ptr_nonnull(strstr(scan, attr));
  ck_assert_ptr_nonnull(strstr(text, "dense("));
  free(text);
  nimble_arena_destroy(arena);
}

START_TEST(test_lstm_becomes_one_lstm_scan_over_a_run_time_number_of_steps) {
  /* y [seq, 1, 128] (the step count is seq, known only at run time), h
   * and c [1, 1, 128]: as the exporter declared them. */
  check_one_scan("lstm",
                 "(Tensor[(seq, 1, 128), float32], Tensor[(1, 1, 128), float32], Tensor[(1, 1, 128), float32])",
                 "lstm_scan(", NULL);
}
END_TEST

START_TEST(test_gru_becomes_one_gru_scan_over_a_run_time_number_of_steps) {
  /* PyTorch's export resets after the product: linear_before_reset=1. */
  check_one_scan("gru", "(Tensor[(seq, 1, 128), float32], Tensor[(1, 1, 128), float32])", "gru_scan(",
                 "linear_before_reset=1");
}
END_TEST

START_TEST(test_loop_if_keeps_the_batch_dim_through_the_loop) {
  char path[1024], buf[512];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path("loop_if", "onnx", path, sizeof path), &m, &t));
  ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), "Tensor[(batch, 16), float32]");
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_imported_models_print_and_parse_back_to_the_same_module) {
  /* The printer's canonical text is a fixed point of parse + print, so the
   * imported IR is valid text IR (quoted names included). */
  static const char *const small[] = {"mlp", "loop_if", "while_loop", "dyn_ops", "lstm"};
  for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) {
    char path[1024];
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m, *m2;
    nimble_typing *t;
    NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path(small[k], "onnx", path, sizeof path), &m, &t));
    char *text;
    NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
    nimble_status_t s = nimble_nir_parse(arena, small[k], text, strlen(text), &m2);
    ck_assert_msg(s == NULL, "%s: %s", small[k], nimble_status_message(s));
    ck_assert_msg(nimble_ir_module_equal(m, m2), "%s: the parsed module differs", small[k]);
    free(text);
    nimble_arena_destroy(arena);
  }
}
END_TEST

/* ---- binder names ---- */

typedef struct binders {
  const char *names[8192];
  size_t n;
  const char *dup; /* the first name bound twice */
} binders;

static void binders_add(binders *b, const nimble_expr *var) {
  for (size_t i = 0; i < b->n; i++)
    if (strcmp(b->names[i], var->u.var.name) == 0 && !b->dup) b->dup = var->u.var.name;
  ck_assert_uint_lt(b->n, sizeof b->names / sizeof b->names[0]);
  b->names[b->n++] = var->u.var.name;
}

static void binders_of_pattern(binders *b, const nimble_pattern *p) {
  if (p->kind == NIMBLE_PATTERN_VAR) binders_add(b, p->var);
  for (size_t i = 0; i < p->num_subs; i++) binders_of_pattern(b, p->subs[i]);
}

/* Every binding site under e (let chains walked in a loop: they are long). */
static void binders_of(binders *b, const nimble_expr *e) {
  while (e && e->kind == NIMBLE_EXPR_LET) {
    binders_add(b, e->u.let.var);
    binders_of(b, e->u.let.value);
    e = e->u.let.body;
  }
  if (!e) return;
  switch (e->kind) {
    case NIMBLE_EXPR_CALL:
      binders_of(b, e->u.call.callee);
      for (size_t i = 0; i < e->u.call.num_args; i++) binders_of(b, e->u.call.args[i]);
      break;
    case NIMBLE_EXPR_IF:
      binders_of(b, e->u.if_.cond);
      binders_of(b, e->u.if_.then_branch);
      binders_of(b, e->u.if_.else_branch);
      break;
    case NIMBLE_EXPR_TUPLE:
      for (size_t i = 0; i < e->u.tuple.count; i++) binders_of(b, e->u.tuple.fields[i]);
      break;
    case NIMBLE_EXPR_PROJ: binders_of(b, e->u.proj.tuple); break;
    case NIMBLE_EXPR_FUNC:
      for (size_t i = 0; i < e->u.func.num_params; i++) binders_add(b, e->u.func.params[i]);
      binders_of(b, e->u.func.body);
      break;
    case NIMBLE_EXPR_MATCH:
      binders_of(b, e->u.match.scrutinee);
      for (size_t i = 0; i < e->u.match.num_clauses; i++) {
        binders_of_pattern(b, e->u.match.clauses[i].pattern);
        binders_of(b, e->u.match.clauses[i].body);
      }
      break;
    default: break;
  }
}

/* The cleaner of the two fixes the issue offered: names are made unique at
 * import (imp_unique_name), so the IR itself never shadows and
 * every consumer of the module (printer, passes, `nimble inspect`) sees one
 * binder per name. The loop, LSTM and dyn_ops models bound `%h`,
 * `%"/Loop_output_0"` and friends twice before. */
START_TEST(test_every_binder_of_an_imported_model_has_a_name_of_its_own) {
  const char *name = kModels[_i];
  char path[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  NIMBLE_ASSERT_OK(nimble_onnx_import_file(model_path(name, "onnx", path, sizeof path), arena, NULL, &m));
  /* Per global function: globals do not close over each other, so a name
   * may recur in two of them (the LSTM step function's `%x` and @main's). */
  static binders b;
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    b.n = 0;
    b.dup = NULL;
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    binders_of(&b, g->func);
    ck_assert_msg(b.dup == NULL, "%s: %%%s is bound twice in @%s", name, b.dup ? b.dup : "", g->name);
    ck_assert_uint_gt(b.n, 0);
  }
  nimble_arena_destroy(arena);
}
END_TEST

/* Issue 3: the importer used to bind several variables under one name
 * (`%h` of a loop body and of its caller, the `/Loop_output_0` of two
 * loops), so the printed text, parsed back, resolved a use to the wrong
 * binder and no longer type-checked. Every reference model's text must
 * parse back, type-check, and give the same module and the same type of
 * @main as the imported one. */
START_TEST(test_every_reference_model_prints_text_that_parses_back_and_type_checks) {
  const char *name = kModels[_i];
  char path[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m, *m2;
  nimble_typing *t, *t2;
  NIMBLE_ASSERT_OK(import_test_check_file(arena, model_path(name, "onnx", path, sizeof path), &m, &t));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  nimble_status_t s = nimble_nir_parse(arena, name, text, strlen(text), &m2);
  ck_assert_msg(s == NULL, "%s: %s", name, nimble_status_message(s));
  s = nimble_typing_infer_module(m2, &t2);
  ck_assert_msg(s == NULL, "%s: the printed text does not type-check: %s", name, nimble_status_message(s));
  ck_assert_msg(nimble_ir_module_equal(m, m2), "%s: the parsed module differs", name);
  char a[1024], b[1024];
  nimble_type_format(nimble_typing_global_type(t, "main"), a, sizeof a);
  nimble_type_format(nimble_typing_global_type(t2, "main"), b, sizeof b);
  ck_assert_msg(strcmp(a, b) == 0, "%s: @main is %s imported but %s parsed back", name, a, b);
  free(text);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_the_entry_function_can_be_renamed) {
  char path[1024];
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_onnx_import_options_t opts = {"forward"};
  NIMBLE_ASSERT_OK(nimble_onnx_import_file(model_path("mlp", "onnx", path, sizeof path), arena, &opts, &m));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "forward"));
  ck_assert_ptr_null(nimble_module_find_func(m, "main"));
  nimble_arena_destroy(arena);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_models");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_every_reference_model_imports_and_type_checks, 0,
                      (int)(sizeof kModels / sizeof kModels[0]));
  tcase_add_test(tc, test_bert_tiny_keeps_the_sequence_dim_symbolic_from_input_to_output);
  tcase_add_test(tc, test_mlp_maps_to_dense_and_relu_with_a_symbolic_batch);
  tcase_add_test(tc, test_lstm_becomes_one_lstm_scan_over_a_run_time_number_of_steps);
  tcase_add_test(tc, test_gru_becomes_one_gru_scan_over_a_run_time_number_of_steps);
  tcase_add_test(tc, test_loop_if_keeps_the_batch_dim_through_the_loop);
  tcase_add_test(tc, test_imported_models_print_and_parse_back_to_the_same_module);
  tcase_add_loop_test(tc, test_every_reference_model_prints_text_that_parses_back_and_type_checks, 0,
                      (int)(sizeof kModels / sizeof kModels[0]));
  tcase_add_loop_test(tc, test_every_binder_of_an_imported_model_has_a_name_of_its_own, 0,
                      (int)(sizeof kModels / sizeof kModels[0]));
  tcase_add_test(tc, test_the_entry_function_can_be_renamed);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
