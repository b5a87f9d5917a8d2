/* The fixture models of scripts/gen_fixture_models.py: every good model
 * loads and shows the inputs, outputs, dims, nodes and initializer values
 * the generator wrote (fixtures.json and the .npy files numpy saved); every
 * bad model gives the error the generator expects, naming the node. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

#include "nimble/onnx_model.h"

static json_t *manifest(void) {
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", "fixtures.json");
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  ck_assert_msg(root != NULL, "%s: %s", path, err.text);
  free(path);
  return root;
}

static nimble_onnx_model *load_fixture(const char *name) {
  char rel[256];
  snprintf(rel, sizeof(rel), "%s.onnx", name);
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", rel);
  nimble_onnx_model *m;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_file(path, &m));
  free(path);
  return m;
}

/* The json description {"name", "elem_type", "dims": [int | "param" | null]}
 * against a loaded value. */
static void expect_value_matches(const nimble_onnx_value_t *v, json_t *desc, const char *model) {
  const char *name = json_string_value(json_object_get(desc, "name"));
  ck_assert_str_eq(v->name, name);
  ck_assert_msg(v->type != NULL, "%s: %s has no type", model, name);
  ck_assert_int_eq(v->type->kind, NIMBLE_ONNX_TYPE_TENSOR);
  ck_assert_int_eq(v->type->elem_type, json_integer_value(json_object_get(desc, "elem_type")));
  json_t *dims = json_object_get(desc, "dims");
  ck_assert(v->type->has_shape);
  ck_assert_uint_eq(v->type->rank, json_array_size(dims));
  for (size_t i = 0; i < json_array_size(dims); i++) {
    json_t *d = json_array_get(dims, i);
    const nimble_onnx_dim_t *got = &v->type->dims[i];
    if (json_is_integer(d)) {
      ck_assert_int_eq(got->kind, NIMBLE_ONNX_DIM_VALUE);
      ck_assert_int_eq(got->value, json_integer_value(d));
    } else if (json_is_string(d)) {
      ck_assert_int_eq(got->kind, NIMBLE_ONNX_DIM_PARAM);
      ck_assert_str_eq(got->param, json_string_value(d));
    } else {
      ck_assert_int_eq(got->kind, NIMBLE_ONNX_DIM_UNKNOWN);
    }
  }
}

static int dtype_of_descr(const char *descr) {
  static const struct {
    const char *descr;
    int dtype;
  } map[] = {{"<f4", NIMBLE_ONNX_FLOAT}, {"<f8", NIMBLE_ONNX_DOUBLE}, {"|i1", NIMBLE_ONNX_INT8},
             {"|u1", NIMBLE_ONNX_UINT8}, {"<i4", NIMBLE_ONNX_INT32},  {"<i8", NIMBLE_ONNX_INT64},
             {"|b1", NIMBLE_ONNX_BOOL},  {"<f2", NIMBLE_ONNX_FLOAT16}};
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (strcmp(map[i].descr, descr) == 0) return map[i].dtype;
  return -1;
}

static void expect_initializer_matches_npy(const nimble_onnx_model *m, const char *model,
                                           const char *init) {
  char rel[512], err[256];
  snprintf(rel, sizeof(rel), "%s.init/%s.npy", model, init);
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", rel);
  onnx_test_npy npy;
  ck_assert_msg(onnx_test_npy_load(path, &npy, err, sizeof(err)) == 0, "%s", err);
  const nimble_onnx_tensor_t *t = nimble_onnx_graph_constant(nimble_onnx_model_graph(m), init);
  ck_assert_msg(t != NULL, "%s: initializer %s not found", model, init);
  ck_assert_int_eq(t->dtype, dtype_of_descr(npy.descr));
  ck_assert_uint_eq(t->rank, npy.rank);
  for (size_t i = 0; i < npy.rank; i++) ck_assert_int_eq(t->dims[i], npy.dims[i]);
  ck_assert_uint_eq(t->size, npy.size);
  ck_assert_msg(memcmp(t->data, npy.data, npy.size) == 0, "%s: %s data differs from %s", model,
                init, path);
  onnx_test_npy_free(&npy);
  free(path);
}

/* Each reference case's inputs fit the model's declared types: constant
 * dims equal, one size per symbolic dim within a case. */
static void expect_cases_fit_inputs(const nimble_onnx_model *m, const char *model, json_t *cases) {
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_uint_ge(json_array_size(cases), 3);
  for (size_t c = 0; c < json_array_size(cases); c++) {
    const char *case_name = json_string_value(json_array_get(cases, c));
    const char *params[16];
    int64_t sizes[16];
    size_t n_params = 0;
    for (size_t i = 0; i < g->n_inputs; i++) {
      char rel[512], err[256];
      snprintf(rel, sizeof(rel), "%s.ref/%s/%s.npy", model, case_name, g->inputs[i]->name);
      char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", rel);
      onnx_test_npy npy;
      ck_assert_msg(onnx_test_npy_load(path, &npy, err, sizeof(err)) == 0, "%s", err);
      const nimble_onnx_type_t *t = g->inputs[i]->type;
      ck_assert_int_eq(dtype_of_descr(npy.descr), t->elem_type);
      ck_assert_uint_eq(npy.rank, t->rank);
      for (size_t d = 0; d < t->rank; d++) {
        if (t->dims[d].kind == NIMBLE_ONNX_DIM_VALUE) {
          ck_assert_int_eq(npy.dims[d], t->dims[d].value);
        } else if (t->dims[d].kind == NIMBLE_ONNX_DIM_PARAM) {
          size_t k = 0;
          while (k < n_params && strcmp(params[k], t->dims[d].param) != 0) k++;
          if (k == n_params && n_params < 16) {
            params[n_params] = t->dims[d].param;
            sizes[n_params++] = npy.dims[d];
          } else if (k < n_params) {
            ck_assert_int_eq(npy.dims[d], sizes[k]);
          }
        }
      }
      onnx_test_npy_free(&npy);
      free(path);
    }
  }
}

START_TEST(test_every_good_fixture_matches_what_the_generator_wrote) {
  json_t *root = manifest();
  json_t *good = json_object_get(root, "good");
  ck_assert_uint_eq(json_array_size(good), 5);
  for (size_t k = 0; k < json_array_size(good); k++) {
    json_t *desc = json_array_get(good, k);
    const char *name = json_string_value(json_object_get(desc, "name"));
    nimble_onnx_model *m = load_fixture(name);
    const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
    ck_assert_str_eq(nimble_onnx_model_producer(m), "nimble-gen-fixture-models");
    ck_assert_int_eq(nimble_onnx_model_opset(m, ""), 13);

    json_t *inputs = json_object_get(desc, "inputs");
    ck_assert_uint_eq(g->n_inputs, json_array_size(inputs));
    for (size_t i = 0; i < g->n_inputs; i++)
      expect_value_matches(g->inputs[i], json_array_get(inputs, i), name);
    json_t *outputs = json_object_get(desc, "outputs");
    ck_assert_uint_eq(g->n_outputs, json_array_size(outputs));
    for (size_t i = 0; i < g->n_outputs; i++)
      expect_value_matches(g->outputs[i], json_array_get(outputs, i), name);

    /* The same nodes, whatever order the file stores them in. */
    json_t *nodes = json_object_get(desc, "nodes");
    ck_assert_uint_eq(g->n_nodes, json_array_size(nodes));
    for (size_t i = 0; i < json_array_size(nodes); i++) {
      const char *node_name = json_string_value(json_array_get(nodes, i));
      int found = 0;
      for (size_t n = 0; n < g->n_nodes; n++) found += strcmp(g->nodes[n]->name, node_name) == 0;
      ck_assert_msg(found == 1, "%s: node %s found %d times", name, node_name, found);
    }

    json_t *inits = json_object_get(desc, "initializers");
    for (size_t i = 0; i < json_array_size(inits); i++)
      expect_initializer_matches_npy(m, name, json_string_value(json_array_get(inits, i)));
    expect_cases_fit_inputs(m, name, json_object_get(desc, "cases"));
    nimble_onnx_model_destroy(m);
  }
  json_decref(root);
}
END_TEST

START_TEST(test_every_bad_fixture_gives_the_expected_error) {
  json_t *root = manifest();
  json_t *bad = json_object_get(root, "bad");
  ck_assert_uint_eq(json_array_size(bad), 7);
  for (size_t k = 0; k < json_array_size(bad); k++) {
    json_t *desc = json_array_get(bad, k);
    const char *name = json_string_value(json_object_get(desc, "name"));
    const char *want = json_string_value(json_object_get(desc, "error"));
    char rel[256];
    snprintf(rel, sizeof(rel), "%s.onnx", name);
    char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", rel);
    nimble_onnx_model *m = NULL;
    nimble_status_t s = nimble_onnx_model_load_file(path, &m);
    ck_assert_msg(s != NULL, "%s loaded", name);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(nimble_status_message(s), want) != NULL, "%s: '%s' lacks '%s'", name,
                  nimble_status_message(s), want);
    /* The message starts with the file it is about. */
    ck_assert_msg(strncmp(nimble_status_message(s), path, strlen(path)) == 0, "%s: '%s'", name,
                  nimble_status_message(s));
    nimble_status_code_t code = nimble_status_code(s);
    ck_assert_int_eq(code, strcmp(name, "bad_external_data") == 0 ? NIMBLE_UNIMPLEMENTED
                                                                  : NIMBLE_INVALID_ARGUMENT);
    nimble_status_free(s);
    free(path);
  }
  json_decref(root);
}
END_TEST

START_TEST(test_load_memory_gives_the_same_model_as_load_file) {
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", "cnn.onnx");
  size_t n;
  uint8_t *bytes = onnx_test_read_file(path, &n);
  ck_assert_ptr_nonnull(bytes);
  nimble_onnx_model *a, *b;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_memory(bytes, n, "cnn.onnx", &b));
  free(bytes); /* the model must not borrow the caller's bytes */
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_file(path, &a));
  const nimble_onnx_graph *ga = nimble_onnx_model_graph(a), *gb = nimble_onnx_model_graph(b);
  ck_assert_uint_eq(ga->n_nodes, gb->n_nodes);
  for (size_t i = 0; i < ga->n_nodes; i++) ck_assert_str_eq(ga->nodes[i]->name, gb->nodes[i]->name);
  const nimble_onnx_tensor_t *wa = nimble_onnx_graph_constant(ga, "conv_w");
  const nimble_onnx_tensor_t *wb = nimble_onnx_graph_constant(gb, "conv_w");
  ck_assert_uint_eq(wa->size, 4 * 1 * 3 * 3 * 4);
  ck_assert_int_eq(memcmp(wa->data, wb->data, wa->size), 0);
  nimble_onnx_model_destroy(a);
  nimble_onnx_model_destroy(b);
  free(path);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_fixtures");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_every_good_fixture_matches_what_the_generator_wrote);
  tcase_add_test(tc, test_every_bad_fixture_gives_the_expected_error);
  tcase_add_test(tc, test_load_memory_gives_the_same_model_as_load_file);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
