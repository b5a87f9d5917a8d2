/* `nimble inspect`: the typed IR and the JSON summary of .nir programs,
 * checked against types and counts worked out by hand from the sources,
 * and the errors for files that cannot be read or imported. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "nimble_test.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#define ASSERT_CONTAINS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in:\n%s", (needle), (hay))

static cli_result inspect(const char *rel, bool json) {
  char *path = cli_source_path(rel);
  cli_result r = json ? cli_run(ARGS("inspect", "--json", path), NULL)
                      : cli_run(ARGS("inspect", path), NULL);
  ck_assert_msg(r.exit_code == 0, "inspect %s: rc %d: %s", rel, r.exit_code, r.err);
  ck_assert_str_eq(r.err, "");
  free(path);
  return r;
}

static json_t *inspect_json(const char *rel) {
  cli_result r = inspect(rel, true);
  json_error_t err;
  json_t *root = json_loads(r.out, 0, &err);
  ck_assert_msg(root != NULL, "not JSON (%s):\n%s", err.text, r.out);
  cli_result_free(&r);
  return root;
}

/* ---- typed IR ------------------------------------------------------------------ */

START_TEST(test_typed_ir_shows_symbolic_dims_and_any) {
  /* By hand: matmul (batch, ?, 64) x (64, 32) = (batch, ?, 32); adding (32,)
   * broadcasts to the same; relu keeps it; mean over axis 1 drops the ?. */
  cli_result r = inspect("tests/client/programs/seq_encoder.nir", false);
  ck_assert_str_eq(
      r.out,
      "def @main(%tokens: Tensor[(batch, ?, 64), float32], %w: Tensor[(64, 32), float32], "
      "%b: Tensor[(32,), float32]) -> (Tensor[(batch, 32), float32], "
      "Tensor[(batch, ?, 32), float32]) {\n"
      "  let %h: Tensor[(batch, ?, 32), float32] = add(matmul(%tokens, %w), %b);\n"
      "  let %a: Tensor[(batch, ?, 32), float32] = relu(%h);\n"
      "  let %pooled: Tensor[(batch, 32), float32] = mean(%a, axes=[1]);\n"
      "  (%pooled, %a)\n"
      "}\n");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_typed_ir_annotates_closures_and_recursion) {
  cli_result r = inspect("tests/client/programs/control.nir", false);
  /* The closure's type, written out in full, and main's inferred result. */
  ASSERT_CONTAINS(r.out,
                  "def @main(%n: Tensor[(), int64], %x: Tensor[(?,), float32]) -> "
                  "Tensor[(?,), float32] {\n"
                  "  let %f: fn(Tensor[(?,), float32]) -> Tensor[(?,), float32] = "
                  "fn (%v: Tensor[(?,), float32]) -> Tensor[(?,), float32] {\n"
                  "    relu(%v)\n"
                  "  };\n"
                  "  %f(@countdown(%n, %x))\n"
                  "}\n");
  ASSERT_CONTAINS(r.out, "def @pong(%x: Tensor[(), int64]) -> Tensor[(), int64] {\n"
                         "  @ping(%x)\n}\n");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_typed_ir_of_treelstm_types_every_binding) {
  cli_result r = inspect("examples/treelstm.nir", false);
  /* Leaf cell: W [384, 128] x [128] = [384], split in three of [128]. */
  ASSERT_CONTAINS(r.out, "  let %gates: Tensor[(384,), float32] = add(matmul(%w, %x), %b);\n");
  ASSERT_CONTAINS(r.out,
                  "  let %iou: (Tensor[(128,), float32], Tensor[(128,), float32], "
                  "Tensor[(128,), float32]) = split(%gates, sections=3);\n");
  /* Node cell: [h_l; h_r] is [256], W [640, 256] gives [640]. */
  ASSERT_CONTAINS(r.out, "  let %hs: Tensor[(256,), float32] = concatenate(%left.0, %right.0);\n");
  ASSERT_CONTAINS(r.out, "  let %gates: Tensor[(640,), float32] = add(matmul(%w, %hs), %b);\n");
  /* Pattern variables get the constructor's field types. */
  ASSERT_CONTAINS(r.out, "    Leaf(%word: Tensor[(), int64]) => Leaf(take(%emb, %word)),\n");
  ASSERT_CONTAINS(r.out,
                  "    Node(%l: Tree[Tensor[(128,), float32]], %r: Tree[Tensor[(128,), float32]]) "
                  "=> @node_cell(");
  /* @leaf_cell had no return annotation; inference gives (h, c). */
  ASSERT_CONTAINS(r.out,
                  "%b: Tensor[(384,), float32]) -> (Tensor[(128,), float32], "
                  "Tensor[(128,), float32]) {\n");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_typed_ir_reads_back_to_itself) {
  /* The typed IR is .nir: inspecting it again changes nothing. */
  static const char *const kPrograms[] = {
      "examples/treelstm.nir",
      "tests/client/programs/seq_encoder.nir",
      "tests/client/programs/control.nir",
      "tests/compiler/programs/dynamic_mlp.nir",
      "tests/client/programs/shadowing.nir",
  };
  for (size_t i = 0; i < sizeof kPrograms / sizeof kPrograms[0]; i++) {
    cli_result first = inspect(kPrograms[i], false);
    char name[32];
    snprintf(name, sizeof name, "typed%zu.nir", i);
    char *path = cli_write_file(name, first.out);
    cli_result second = cli_run(ARGS("inspect", path), NULL);
    ck_assert_msg(second.exit_code == 0, "%s: rc %d: %s", kPrograms[i], second.exit_code,
                  second.err);
    ck_assert_str_eq(second.out, first.out);
    cli_result_free(&first);
    cli_result_free(&second);
    free(path);
  }
}
END_TEST

START_TEST(test_typed_ir_gives_shadowed_bindings_their_own_names) {
  /* %x_1 is taken by a parameter, so the two lets become %x_2 and %x_3. */
  cli_result r = inspect("tests/client/programs/shadowing.nir", false);
  ck_assert_str_eq(r.out,
                   "def @main(%x: Tensor[(4,), float32], %x_1: Tensor[(4,), float32]) -> "
                   "Tensor[(4,), float32] {\n"
                   "  let %x_2: Tensor[(4,), float32] = relu(%x);\n"
                   "  let %x_3: Tensor[(4,), float32] = add(%x_2, %x_1);\n"
                   "  %x_3\n"
                   "}\n");
  cli_result_free(&r);
}
END_TEST

START_TEST(test_large_constants_are_elided_unless_asked_for) {
  cli_result r = inspect("tests/client/programs/big_constant.nir", false);
  ASSERT_CONTAINS(r.out, "multiply(%x, %\"const[(20,), float32]{...}\");\n");
  ASSERT_CONTAINS(r.out, ", const[(2,), float32]{0.5, -0.5});\n");
  ck_assert(strstr(r.out, "19.0") == NULL);
  cli_result_free(&r);

  char *path = cli_source_path("tests/client/programs/big_constant.nir");
  r = cli_run(ARGS("inspect", "--constants", path), NULL);
  ck_assert_int_eq(r.exit_code, 0);
  ASSERT_CONTAINS(r.out, "multiply(%x, const[(20,), float32]{1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, "
                         "8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, "
                         "20.0});\n");
  ck_assert(strstr(r.out, "{...}") == NULL);
  cli_result_free(&r);
  free(path);
}
END_TEST

/* ---- JSON summary ------------------------------------------------------------------ */

static json_t *at(json_t *array, size_t i) {
  json_t *v = json_array_get(array, i);
  ck_assert_msg(v != NULL, "no element %zu", i);
  return v;
}

static const char *str(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  ck_assert_msg(json_is_string(v), "'%s' is not a string", key);
  return json_string_value(v);
}

static json_int_t num(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  ck_assert_msg(json_is_integer(v), "'%s' is not an integer", key);
  return json_integer_value(v);
}

/* Asserts that a shape array equals `want`, written as JSON text. */
static void assert_json_eq(json_t *got, const char *want) {
  json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
  ck_assert(w != NULL);
  char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
  ck_assert_msg(json_equal(got, w), "got %s, want %s", g, want);
  free(g);
  json_decref(w);
}

START_TEST(test_json_summary_lists_inputs_outputs_and_dynamic_dims) {
  json_t *root = inspect_json("tests/client/programs/seq_encoder.nir");
  ck_assert_str_eq(str(root, "format"), "nir");
  ck_assert_str_eq(str(root, "entry"), "main");
  json_t *inputs = json_object_get(root, "inputs");
  ck_assert_int_eq(json_array_size(inputs), 3);
  json_t *tokens = at(inputs, 0);
  ck_assert_str_eq(str(tokens, "name"), "tokens");
  ck_assert_str_eq(str(tokens, "kind"), "tensor");
  ck_assert_str_eq(str(tokens, "dtype"), "float32");
  assert_json_eq(json_object_get(tokens, "shape"), "[\"batch\", \"?\", 64]");
  assert_json_eq(json_object_get(tokens, "dynamic_axes"), "[0, 1]");
  json_t *w = at(inputs, 1);
  ck_assert_str_eq(str(w, "name"), "w");
  assert_json_eq(json_object_get(w, "shape"), "[64, 32]");
  assert_json_eq(json_object_get(w, "dynamic_axes"), "[]");
  assert_json_eq(json_object_get(at(inputs, 2), "shape"), "[32]");

  json_t *outputs = json_object_get(root, "outputs");
  ck_assert_int_eq(json_array_size(outputs), 2);
  assert_json_eq(json_object_get(at(outputs, 0), "shape"), "[\"batch\", 32]");
  assert_json_eq(json_object_get(at(outputs, 1), "shape"), "[\"batch\", \"?\", 32]");
  ck_assert_str_eq(str(at(outputs, 1), "type"), "Tensor[(batch, ?, 32), float32]");

  assert_json_eq(json_object_get(root, "op_counts"),
                 "{\"add\": 1, \"matmul\": 1, \"relu\": 1, \"mean\": 1}");
  ck_assert_int_eq(num(root, "num_op_calls"), 4);
  ck_assert(json_is_true(json_object_get(root, "dynamic")));
  assert_json_eq(json_object_get(root, "symbolic_dims"), "[\"batch\"]");
  assert_json_eq(
      json_object_get(root, "dynamic_dims"),
      "[{\"value\": \"inputs[0]\", \"name\": \"tokens\", \"axis\": 0, \"dim\": \"batch\"},"
      " {\"value\": \"inputs[0]\", \"name\": \"tokens\", \"axis\": 1, \"dim\": \"?\"},"
      " {\"value\": \"outputs[0]\", \"axis\": 0, \"dim\": \"batch\"},"
      " {\"value\": \"outputs[1]\", \"axis\": 0, \"dim\": \"batch\"},"
      " {\"value\": \"outputs[1]\", \"axis\": 1, \"dim\": \"?\"}]");
  json_t *cf = json_object_get(root, "control_flow");
  ck_assert(json_is_false(json_object_get(cf, "present")));
  json_decref(root);
}
END_TEST

START_TEST(test_json_summary_reports_control_flow) {
  json_t *root = inspect_json("tests/client/programs/control.nir");
  json_t *cf = json_object_get(root, "control_flow");
  ck_assert(json_is_true(json_object_get(cf, "present")));
  ck_assert_int_eq(num(cf, "if"), 2);
  ck_assert_int_eq(num(cf, "match"), 0);
  ck_assert_int_eq(num(cf, "closures"), 1);
  assert_json_eq(json_object_get(cf, "recursive_functions"), "[\"countdown\", \"ping\", \"pong\"]");
  assert_json_eq(json_object_get(root, "op_counts"),
                 "{\"greater\": 2, \"subtract\": 2, \"concatenate\": 1, \"relu\": 1}");
  json_t *n = at(json_object_get(root, "inputs"), 0);
  ck_assert_str_eq(str(n, "dtype"), "int64");
  assert_json_eq(json_object_get(n, "shape"), "[]");
  json_decref(root);
}
END_TEST

START_TEST(test_json_summary_of_treelstm) {
  json_t *root = inspect_json("examples/treelstm.nir");
  assert_json_eq(json_object_get(root, "types"), "[\"Tree\"]");
  json_t *funcs = json_object_get(root, "functions");
  ck_assert_int_eq(json_array_size(funcs), 5);
  ck_assert_str_eq(str(at(funcs, 4), "name"), "main");
  json_t *tree = at(json_object_get(root, "inputs"), 0);
  ck_assert_str_eq(str(tree, "name"), "tree");
  ck_assert_str_eq(str(tree, "kind"), "adt");
  ck_assert_str_eq(str(tree, "type"), "Tree[Tensor[(), int64]]");
  ck_assert(json_object_get(tree, "shape") == NULL);
  json_t *emb = at(json_object_get(root, "inputs"), 1);
  assert_json_eq(json_object_get(emb, "shape"), "[1000, 128]");
  json_t *outputs = json_object_get(root, "outputs");
  ck_assert_int_eq(json_array_size(outputs), 2);
  assert_json_eq(json_object_get(at(outputs, 0), "shape"), "[128]");
  /* Counted by hand in examples/treelstm.nir: @embed 1 take; @leaf_cell
   * add, matmul, split, 2 multiply, 2 sigmoid, 2 tanh; @node_cell
   * concatenate, 3 add, matmul, split, 4 multiply, 4 sigmoid, 2 tanh. */
  assert_json_eq(json_object_get(root, "op_counts"),
                 "{\"take\": 1, \"add\": 4, \"matmul\": 2, \"split\": 2, \"multiply\": 6,"
                 " \"sigmoid\": 6, \"tanh\": 4, \"concatenate\": 1}");
  ck_assert_int_eq(num(root, "num_op_calls"), 26);
  json_t *cf = json_object_get(root, "control_flow");
  ck_assert(json_is_true(json_object_get(cf, "present")));
  ck_assert_int_eq(num(cf, "match"), 2);
  ck_assert_int_eq(num(cf, "if"), 0);
  assert_json_eq(json_object_get(cf, "recursive_functions"), "[\"embed\", \"tree_lstm\"]");
  /* Every dim is static: the dynamism is in the tree, not the shapes. */
  ck_assert(json_is_false(json_object_get(root, "dynamic")));
  assert_json_eq(json_object_get(root, "dynamic_dims"), "[]");
  json_decref(root);
}
END_TEST

START_TEST(test_json_summary_replaces_bytes_that_are_not_utf8) {
  /* The parser accepts any bytes in quoted names; JSON needs UTF-8, so the
   * lone 0xE9 becomes U+FFFD (EF BF BD) instead of breaking the output. */
  json_t *root = inspect_json("tests/client/programs/latin1_name.nir");
  json_t *x = at(json_object_get(root, "inputs"), 0);
  ck_assert_str_eq(str(x, "name"), "caf\xef\xbf\xbd");
  assert_json_eq(json_object_get(x, "shape"), "[2]");
  json_decref(root);
}
END_TEST

START_TEST(test_json_summary_without_main_describes_the_last_function) {
  json_t *root = inspect_json("tests/client/programs/no_main.nir");
  ck_assert_str_eq(str(root, "entry"), "scale");
  json_t *inputs = json_object_get(root, "inputs");
  ck_assert_int_eq(json_array_size(inputs), 2);
  assert_json_eq(json_object_get(at(inputs, 0), "shape"), "[\"?\"]");
  assert_json_eq(json_object_get(at(inputs, 1), "shape"), "[]");
  ck_assert_int_eq(json_array_size(json_object_get(root, "outputs")), 1);
  ck_assert_str_eq(str(at(json_object_get(root, "functions"), 0), "type"),
                   "fn(Tensor[(k,), float32]) -> Tensor[(k,), float32]");
  json_decref(root);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------ */

/* inspect on `path` fails with exit code 3, nothing on stdout, and stderr
 * containing `fragment`. */
static void assert_input_error(const char *path, const char *fragment) {
  for (int json = 0; json < 2; json++) {
    cli_result r = json ? cli_run(ARGS("inspect", "--json", path), NULL)
                        : cli_run(ARGS("inspect", path), NULL);
    ck_assert_msg(r.exit_code == 3, "%s: rc %d, stderr %s", path, r.exit_code, r.err);
    ck_assert_str_eq(r.out, "");
    ASSERT_CONTAINS(r.err, fragment);
    cli_result_free(&r);
  }
}

START_TEST(test_missing_file_is_an_input_error_naming_it) {
  char path[400], want[500];
  snprintf(path, sizeof path, "%s/absent.nir", cli_scratch_dir());
  snprintf(want, sizeof want, "nimble: cannot open %s: No such file or directory", path);
  assert_input_error(path, want);
}
END_TEST

START_TEST(test_garbage_file_is_an_input_error_naming_file_and_place) {
  char *path = cli_write_file("garbage.nir", "\x7f" "ELF\x02\x01\x01 not a program\n");
  char want[500];
  snprintf(want, sizeof want, "nimble: %s:1:1: ", path);
  assert_input_error(path, want);
  free(path);

  path = cli_write_file("truncated.nir", "def @main(%x: Tensor[(2,), float32]) {\n  relu(%x\n");
  snprintf(want, sizeof want, "nimble: %s:1:5: unbalanced '{'", path);
  assert_input_error(path, want);
  free(path);
}
END_TEST

START_TEST(test_type_error_is_an_input_error_naming_both_types) {
  char *path = cli_source_path("tests/client/programs/type_error.nir");
  char want[600];
  snprintf(want, sizeof want,
           "%s:2:6 (add(%%x, %%y)): cannot broadcast Tensor[(3, 4), float32] with "
           "Tensor[(5,), float32]",
           path);
  assert_input_error(path, want);
  free(path);
}
END_TEST

START_TEST(test_directories_and_unknown_formats_are_input_errors) {
  char dir[400], want[500];
  snprintf(dir, sizeof dir, "%s/folder.nir", cli_scratch_dir());
  ck_assert(mkdir(dir, 0700) == 0);
  snprintf(want, sizeof want, "nimble: %s is a directory, not a model file", dir);
  assert_input_error(dir, want);

  char *txt = cli_write_file("model.txt", "def @main() { 1 }\n");
  snprintf(want, sizeof want,
           "nimble: %s: unknown model format (expected a .onnx model or a .nir program)", txt);
  assert_input_error(txt, want);
  free(txt);
}
END_TEST

START_TEST(test_garbage_onnx_file_is_an_input_error_naming_it) {
  /* Whether or not this build has the ONNX importer, a file that is not
   * ONNX fails with exit code 3 and a message that starts with its name. */
  char *path = cli_write_file("garbage.onnx", "\xff\xff\xff\xff this is not protobuf");
  char want[500];
  snprintf(want, sizeof want, "nimble: %s", path);
  assert_input_error(path, want);
  free(path);
}
END_TEST

START_TEST(test_unreadable_file_is_an_input_error) {
  if (geteuid() == 0) return; /* root reads anything: nothing to check */
  char *path = cli_write_file("secret.nir", "def @main() { 1 }\n");
  ck_assert(chmod(path, 0) == 0);
  char want[500];
  snprintf(want, sizeof want, "nimble: cannot open %s: Permission denied", path);
  assert_input_error(path, want);
  free(path);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli_inspect");
  TCase *tc = tcase_create("typed_ir");
  tcase_add_test(tc, test_typed_ir_shows_symbolic_dims_and_any);
  tcase_add_test(tc, test_typed_ir_annotates_closures_and_recursion);
  tcase_add_test(tc, test_typed_ir_of_treelstm_types_every_binding);
  tcase_add_test(tc, test_typed_ir_gives_shadowed_bindings_their_own_names);
  tcase_add_test(tc, test_large_constants_are_elided_unless_asked_for);
  tcase_add_test(tc, test_typed_ir_reads_back_to_itself);
  suite_add_tcase(s, tc);
  tc = tcase_create("json");
  tcase_add_test(tc, test_json_summary_lists_inputs_outputs_and_dynamic_dims);
  tcase_add_test(tc, test_json_summary_reports_control_flow);
  tcase_add_test(tc, test_json_summary_of_treelstm);
  tcase_add_test(tc, test_json_summary_replaces_bytes_that_are_not_utf8);
  tcase_add_test(tc, test_json_summary_without_main_describes_the_last_function);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_add_test(tc, test_missing_file_is_an_input_error_naming_it);
  tcase_add_test(tc, test_garbage_file_is_an_input_error_naming_file_and_place);
  tcase_add_test(tc, test_type_error_is_an_input_error_naming_both_types);
  tcase_add_test(tc, test_directories_and_unknown_formats_are_input_errors);
  tcase_add_test(tc, test_garbage_onnx_file_is_an_input_error_naming_it);
  tcase_add_test(tc, test_unreadable_file_is_an_input_error);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
