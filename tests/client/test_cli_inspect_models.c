/* `nimble inspect` on the reference ONNX models (docs/reference-models.md),
 * checked against the metadata the generator wrote beside each model from
 * the PyTorch export (NAME.json: input and output names, dtypes, shapes
 * with symbolic dims, ONNX operator counts). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "nimble_test.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

#define ASSERT_CONTAINS(hay, needle) \
  ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in:\n%.2000s", (needle), (hay))

static char *model_path(const char *name, const char *ext) {
  const char *dir = getenv("NIMBLE_MODELS_DIR");
  ck_assert_msg(dir != NULL, "NIMBLE_MODELS_DIR is not set (run through ctest)");
  char *p;
  ck_assert(asprintf(&p, "%s/%s.%s", dir, name, ext) > 0);
  return p;
}

static json_t *load_json_text(const char *text, const char *what) {
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  ck_assert_msg(j != NULL, "%s: not JSON: %s", what, err.text);
  return j;
}

static json_t *reference_of(const char *name) {
  char *path = model_path(name, "json");
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  ck_assert_msg(j != NULL, "%s: %s", path, err.text);
  free(path);
  return j;
}

static json_t *summary_of(const char *name) {
  char *path = model_path(name, "onnx");
  cli_result r = cli_run(ARGS("inspect", "--json", path), NULL);
  ck_assert_msg(r.exit_code == 0, "inspect %s: rc %d: %s", path, r.exit_code, r.err);
  json_t *j = load_json_text(r.out, path);
  cli_result_free(&r);
  free(path);
  return j;
}

static char *dump(json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY); }

START_TEST(test_bert_tiny_sequence_dim_is_symbolic_in_the_json) {
  json_t *s = summary_of("bert_tiny");
  ck_assert_str_eq(json_string_value(json_object_get(s, "format")), "onnx");
  json_t *x = json_array_get(json_object_get(s, "inputs"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(x, "name")), "x");
  ck_assert_str_eq(json_string_value(json_object_get(x, "dtype")), "float32");
  json_t *want = json_loads("[1, \"seq\", 128]", 0, NULL);
  ck_assert(json_equal(json_object_get(x, "shape"), want));
  json_t *y = json_array_get(json_object_get(s, "outputs"), 0);
  ck_assert_str_eq(json_string_value(json_object_get(y, "name")), "y");
  ck_assert(json_equal(json_object_get(y, "shape"), want));
  json_decref(want);
  want = json_loads("[\"seq\"]", 0, NULL);
  ck_assert(json_equal(json_object_get(s, "symbolic_dims"), want));
  json_decref(want);
  want = json_loads("{\"value\": \"inputs[0]\", \"name\": \"x\", \"axis\": 1, \"dim\": \"seq\"}", 0,
                    NULL);
  ck_assert(json_equal(json_array_get(json_object_get(s, "dynamic_dims"), 0), want));
  json_decref(want);
  ck_assert(json_is_true(json_object_get(s, "dynamic")));
  ck_assert(json_is_false(json_object_get(json_object_get(s, "control_flow"), "present")));
  json_decref(s);
}
END_TEST

/* Every axis agrees: two constants or two names must be equal; "?" (Any,
 * what inference gives where the exporter only named an unknown) agrees
 * with anything; a constant where the exporter had a name is the importer
 * knowing more (e.g. a dim fixed by a Loop's body). With `exact`, the
 * shapes must be identical. */
static void assert_shapes_agree(const char *model, const char *which, json_t *got, json_t *ref,
                                bool exact) {
  char *g = dump(got), *r = dump(ref);
  ck_assert_msg(json_array_size(got) == json_array_size(ref), "%s %s: rank of %s vs %s", model,
                which, g, r);
  if (exact) ck_assert_msg(json_equal(got, ref), "%s %s: %s, want %s", model, which, g, r);
  for (size_t i = 0; i < json_array_size(got); i++) {
    json_t *a = json_array_get(got, i), *b = json_array_get(ref, i);
    if (json_is_string(a) && strcmp(json_string_value(a), "?") == 0) continue;
    if (json_is_integer(a) && json_is_string(b)) continue;
    ck_assert_msg(json_equal(a, b), "%s %s axis %zu: %s, want %s", model, which, i, g, r);
  }
  free(g);
  free(r);
}

static void check_model_interface(const char *model, bool exact) {
  json_t *s = summary_of(model), *ref = reference_of(model);
  static const char *const kLists[] = {"inputs", "outputs"};
  for (int l = 0; l < 2; l++) {
    json_t *got = json_object_get(s, kLists[l]), *want = json_object_get(ref, kLists[l]);
    ck_assert_msg(json_array_size(got) == json_array_size(want), "%s: %zu %s, want %zu", model,
                  json_array_size(got), kLists[l], json_array_size(want));
    for (size_t i = 0; i < json_array_size(want); i++) {
      json_t *g = json_array_get(got, i), *w = json_array_get(want, i);
      ck_assert_str_eq(json_string_value(json_object_get(g, "name")),
                       json_string_value(json_object_get(w, "name")));
      ck_assert_str_eq(json_string_value(json_object_get(g, "dtype")),
                       json_string_value(json_object_get(w, "dtype")));
      char which[64];
      snprintf(which, sizeof which, "%s[%zu]", kLists[l], i);
      /* Inputs carry the declared types unchanged, always. */
      assert_shapes_agree(model, which, json_object_get(g, "shape"), json_object_get(w, "shape"),
                          exact || l == 0);
    }
  }
  json_decref(s);
  json_decref(ref);
}

START_TEST(test_interfaces_of_static_flow_models_match_the_export_exactly) {
  static const char *const kModels[] = {"mlp",          "cnn",       "squeezenet1_0",
                                        "mobilenet_v2", "bert_tiny", "bert_tiny_emb"};
  for (size_t i = 0; i < sizeof kModels / sizeof kModels[0]; i++)
    check_model_interface(kModels[i], true);
}
END_TEST

START_TEST(test_interfaces_of_dynamic_models_agree_with_the_export) {
  static const char *const kModels[] = {"lstm", "lstm2", "gru", "loop_if", "while_loop", "dyn_ops"};
  for (size_t i = 0; i < sizeof kModels / sizeof kModels[0]; i++)
    check_model_interface(kModels[i], false);
}
END_TEST

START_TEST(test_op_counts_follow_the_onnx_graph) {
  /* By hand from cnn.json's op_types: Conv 3, Relu 4, MaxPool 3, Flatten 1,
   * Gemm 2 map one to one onto IR operators. */
  json_t *s = summary_of("cnn");
  json_t *ref = reference_of("cnn");
  json_t *ops = json_object_get(ref, "op_types");
  json_t *want = json_pack("{s:I, s:I, s:I, s:I, s:I}", "conv2d",
                           json_integer_value(json_object_get(ops, "Conv")), "relu",
                           json_integer_value(json_object_get(ops, "Relu")), "max_pool2d",
                           json_integer_value(json_object_get(ops, "MaxPool")), "flatten",
                           json_integer_value(json_object_get(ops, "Flatten")), "dense",
                           json_integer_value(json_object_get(ops, "Gemm")));
  char *g = dump(json_object_get(s, "op_counts")), *w = dump(want);
  ck_assert_msg(json_equal(json_object_get(s, "op_counts"), want), "%s, want %s", g, w);
  free(g);
  free(w);
  json_decref(want);
  json_decref(ref);
  json_decref(s);
}
END_TEST

START_TEST(test_loops_and_ifs_show_as_control_flow_and_an_lstm_as_one_scan) {
  json_t *s = summary_of("loop_if");
  json_t *cf = json_object_get(s, "control_flow");
  ck_assert(json_is_true(json_object_get(cf, "present")));
  /* The If node, plus the Loop's continue-or-stop test. */
  ck_assert_int_ge(json_integer_value(json_object_get(cf, "if")), 2);
  ck_assert_int_eq(json_array_size(json_object_get(cf, "recursive_functions")), 1);
  json_decref(s);

  /* An LSTM over a run-time sequence length is one lstm_scan operator
   * (its steps run inside one kernel), not a recursion; its sequence dim
   * stays dynamic. */
  s = summary_of("lstm");
  cf = json_object_get(s, "control_flow");
  ck_assert(json_is_false(json_object_get(cf, "present")));
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "op_counts"), "lstm_scan")), 1);
  ck_assert(json_is_true(json_object_get(s, "dynamic")));
  json_decref(s);

  s = summary_of("mlp");
  ck_assert(json_is_false(json_object_get(json_object_get(s, "control_flow"), "present")));
  json_decref(s);
}
END_TEST

START_TEST(test_typed_ir_of_mlp_shows_the_batch_dim) {
  char *path = model_path("mlp", "onnx");
  cli_result r = cli_run(ARGS("inspect", path), NULL);
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  /* MLP 784-512-512-10 over a symbolic batch; PyTorch's Linear weights are
   * [out, in], hence Gemm with transB. */
  ASSERT_CONTAINS(r.out, "def @main(%x: Tensor[(batch, 784), float32]) -> "
                         "Tensor[(batch, 10), float32] {\n");
  ASSERT_CONTAINS(r.out, ": Tensor[(batch, 512), float32] = dense(%x, "
                         "%\"const[(512, 784), float32]{...}\", "
                         "%\"const[(512,), float32]{...}\", transB=1);\n");
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_typed_ir_of_imported_models_reads_back_to_itself) {
  static const char *const kModels[] = {"loop_if", "while_loop", "dyn_ops", "lstm"};
  for (size_t i = 0; i < sizeof kModels / sizeof kModels[0]; i++) {
    char *path = model_path(kModels[i], "onnx");
    cli_result first = cli_run(ARGS("inspect", "--constants", path), NULL);
    ck_assert_msg(first.exit_code == 0, "%s: %s", path, first.err);
    char name[64];
    snprintf(name, sizeof name, "%s.nir", kModels[i]);
    char *copy = cli_write_file(name, first.out);
    cli_result second = cli_run(ARGS("inspect", "--constants", copy), NULL);
    ck_assert_msg(second.exit_code == 0, "%s: %s", copy, second.err);
    ck_assert_msg(strcmp(first.out, second.out) == 0, "%s: typed IR is not a fixed point",
                  kModels[i]);
    cli_result_free(&first);
    cli_result_free(&second);
    free(copy);
    free(path);
  }
}
END_TEST

START_TEST(test_truncated_onnx_model_is_an_input_error_naming_it) {
  char *path = model_path("bert_tiny", "onnx");
  FILE *f = fopen(path, "rb");
  ck_assert(f != NULL);
  char buf[3000];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert(n == sizeof buf);
  char *cut = cli_write_file("cut.onnx", "");
  f = fopen(cut, "wb");
  ck_assert(f != NULL);
  ck_assert(fwrite(buf, 1, n, f) == n);
  fclose(f);
  cli_result r = cli_run(ARGS("inspect", "--json", cut), NULL);
  ck_assert_int_eq(r.exit_code, 3);
  ck_assert_str_eq(r.out, "");
  char want[600];
  snprintf(want, sizeof want, "nimble: %s: byte ", cut);
  ASSERT_CONTAINS(r.err, want);
  cli_result_free(&r);
  free(cut);
  free(path);
}
END_TEST

/* ---- a model written byte by byte ----------------------------------------- */

/* A protobuf message under construction (onnx.proto field numbers). */
typedef struct pb {
  unsigned char data[512];
  size_t len;
} pb;

static void pb_varint(pb *b, uint64_t v) {
  do {
    ck_assert(b->len < sizeof b->data);
    b->data[b->len++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
}

static void pb_int(pb *b, unsigned field, uint64_t v) {
  pb_varint(b, (uint64_t)field << 3);
  pb_varint(b, v);
}

static void pb_bytes(pb *b, unsigned field, const void *data, size_t n) {
  pb_varint(b, ((uint64_t)field << 3) | 2);
  pb_varint(b, n);
  ck_assert(b->len + n <= sizeof b->data);
  memcpy(b->data + b->len, data, n);
  b->len += n;
}

static void pb_str(pb *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static void pb_msg(pb *b, unsigned field, const pb *m) { pb_bytes(b, field, m->data, m->len); }

/* y = OP(x), x: float[n]; opset 13, IR version 7. */
static void write_single_node_model(const char *path, const char *op) {
  pb dim = {0}, shape = {0}, tensor = {0}, type = {0}, in = {0}, out = {0}, node = {0};
  pb graph = {0}, opset = {0}, model = {0};
  pb_str(&dim, 2, "n");            /* Dimension.dim_param */
  pb_msg(&shape, 1, &dim);         /* TensorShapeProto.dim */
  pb_int(&tensor, 1, 1);           /* TypeProto.Tensor.elem_type = FLOAT */
  pb_msg(&tensor, 2, &shape);      /* .shape */
  pb_msg(&type, 1, &tensor);       /* TypeProto.tensor_type */
  pb_str(&in, 1, "x");             /* ValueInfoProto.name */
  pb_msg(&in, 2, &type);           /* .type */
  pb_str(&out, 1, "y");
  pb_msg(&out, 2, &type);
  pb_str(&node, 1, "x");           /* NodeProto.input */
  pb_str(&node, 2, "y");           /* .output */
  pb_str(&node, 3, "bad0");        /* .name */
  pb_str(&node, 4, op);            /* .op_type */
  pb_msg(&graph, 1, &node);        /* GraphProto.node */
  pb_str(&graph, 2, "g");          /* .name */
  pb_msg(&graph, 11, &in);         /* .input */
  pb_msg(&graph, 12, &out);        /* .output */
  pb_str(&opset, 1, "");           /* OperatorSetIdProto.domain */
  pb_int(&opset, 2, 13);           /* .version */
  pb_int(&model, 1, 7);            /* ModelProto.ir_version */
  pb_msg(&model, 7, &graph);       /* .graph */
  pb_msg(&model, 8, &opset);       /* .opset_import */
  FILE *f = fopen(path, "wb");
  ck_assert(f != NULL);
  ck_assert(fwrite(model.data, 1, model.len, f) == model.len);
  ck_assert(fclose(f) == 0);
}

START_TEST(test_hand_written_model_imports_with_its_symbolic_dim) {
  char *path = cli_write_file("relu.onnx", "");
  write_single_node_model(path, "Relu");
  cli_result r = cli_run(ARGS("inspect", path), NULL);
  ck_assert_msg(r.exit_code == 0, "rc %d: %s", r.exit_code, r.err);
  ASSERT_CONTAINS(r.out, "def @main(%x: Tensor[(n,), float32]) -> Tensor[(n,), float32] {\n");
  ASSERT_CONTAINS(r.out, "relu(%x)");
  cli_result_free(&r);
  free(path);
}
END_TEST

START_TEST(test_unsupported_operator_is_an_input_error_naming_the_node) {
  char *path = cli_write_file("unsupported.onnx", "");
  write_single_node_model(path, "StringNormalizer");
  cli_result r = cli_run(ARGS("inspect", "--json", path), NULL);
  ck_assert_int_eq(r.exit_code, 3);
  ck_assert_str_eq(r.out, "");
  char want[600];
  snprintf(want, sizeof want, "nimble: %s: node 'bad0' (StringNormalizer): ", path);
  ASSERT_CONTAINS(r.err, want);
  ASSERT_CONTAINS(r.err, "not supported");
  cli_result_free(&r);
  free(path);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli_inspect_models");
  TCase *tc = tcase_create("models");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_bert_tiny_sequence_dim_is_symbolic_in_the_json);
  tcase_add_test(tc, test_interfaces_of_static_flow_models_match_the_export_exactly);
  tcase_add_test(tc, test_interfaces_of_dynamic_models_agree_with_the_export);
  tcase_add_test(tc, test_op_counts_follow_the_onnx_graph);
  tcase_add_test(tc, test_loops_and_ifs_show_as_control_flow_and_an_lstm_as_one_scan);
  tcase_add_test(tc, test_typed_ir_of_mlp_shows_the_batch_dim);
  tcase_add_test(tc, test_typed_ir_of_imported_models_reads_back_to_itself);
  tcase_add_test(tc, test_truncated_onnx_model_is_an_input_error_naming_it);
  tcase_add_test(tc, test_hand_written_model_imports_with_its_symbolic_dim);
  tcase_add_test(tc, test_unsupported_operator_is_an_input_error_naming_the_node);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
