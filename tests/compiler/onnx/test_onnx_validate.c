/* Validation errors, one per rule, on models written field by field here:
 * each bad input gets INVALID_ARGUMENT (or the documented code) and a
 * message naming the node, tensor or attribute at fault. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

#include "nimble/onnx_model.h"

/* ---- builders ---- */

static void type_tensor(onnx_test_buf *type, int elem, int rank, const int64_t *dims) {
  onnx_test_buf tt = {0}, shape = {0};
  pb_int(&tt, 1, elem);
  if (rank >= 0) {
    for (int i = 0; i < rank; i++) {
      onnx_test_buf d = {0};
      pb_int(&d, 1, dims[i]);
      pb_msg(&shape, 1, &d);
      pb_free(&d);
    }
    pb_msg(&tt, 2, &shape);
  }
  pb_msg(type, 1, &tt);
  pb_free(&tt);
  pb_free(&shape);
}

/* ValueInfoProto with a FLOAT [2] type (or none when typed is 0). */
static void vi(onnx_test_buf *graph, uint32_t field, const char *name, int typed) {
  onnx_test_buf v = {0}, type = {0};
  int64_t two = 2;
  pb_str(&v, 1, name);
  if (typed) {
    type_tensor(&type, 1, 1, &two);
    pb_msg(&v, 2, &type);
  }
  pb_msg(graph, field, &v);
  pb_free(&v);
  pb_free(&type);
}

/* NodeProto with up to two inputs and one output, plus raw attribute bytes. */
static void node(onnx_test_buf *graph, const char *name, const char *op, const char *in0,
                 const char *in1, const char *out, const onnx_test_buf *attrs) {
  onnx_test_buf n = {0};
  if (in0) pb_str(&n, 1, in0);
  if (in1) pb_str(&n, 1, in1);
  if (out) pb_str(&n, 2, out);
  if (name) pb_str(&n, 3, name);
  pb_str(&n, 4, op);
  if (attrs) pb_raw(&n, attrs->data, attrs->size);
  pb_msg(graph, 1, &n);
  pb_free(&n);
}

static void attr_int(onnx_test_buf *attrs, const char *name, int64_t v) {
  onnx_test_buf a = {0};
  pb_str(&a, 1, name);
  pb_int(&a, 3, v);
  pb_int(&a, 20, NIMBLE_ONNX_ATTR_INT);
  pb_msg(attrs, 5, &a);
  pb_free(&a);
}

static void attr_float(onnx_test_buf *attrs, const char *name, float v) {
  onnx_test_buf a = {0};
  pb_str(&a, 1, name);
  pb_tag(&a, 2, 5);
  pb_raw(&a, &v, 4);
  pb_int(&a, 20, NIMBLE_ONNX_ATTR_FLOAT);
  pb_msg(attrs, 5, &a);
  pb_free(&a);
}

static void attr_tensor(onnx_test_buf *attrs, const char *name, const onnx_test_buf *tensor) {
  onnx_test_buf a = {0};
  pb_str(&a, 1, name);
  pb_msg(&a, 5, tensor);
  pb_int(&a, 20, NIMBLE_ONNX_ATTR_TENSOR);
  pb_msg(attrs, 5, &a);
  pb_free(&a);
}

/* TensorProto named `name` of `dtype` with dims; data added by the caller. */
static void tensor_head(onnx_test_buf *t, const char *name, int dtype, int rank,
                        const int64_t *dims) {
  for (int i = 0; i < rank; i++) pb_int(t, 1, dims[i]);
  pb_int(t, 2, dtype);
  pb_str(t, 8, name);
}

/* ModelProto around `graph` importing the default domain at `opset`. */
static nimble_status_t load_graph(const onnx_test_buf *graph, int opset) {
  onnx_test_buf model = {0}, os = {0};
  pb_int(&model, 1, 8);
  pb_msg(&model, 7, graph);
  pb_str(&os, 1, "");
  pb_int(&os, 2, opset);
  pb_msg(&model, 8, &os);
  nimble_onnx_model *m = NULL;
  nimble_status_t s = nimble_onnx_model_load_memory(model.data, model.size, "v.onnx", &m);
  nimble_onnx_model_destroy(m);
  pb_free(&model);
  pb_free(&os);
  return s;
}

/* x -> Relu -> y, with `extra` graph bytes appended. */
static nimble_status_t load_relu_with(const onnx_test_buf *extra) {
  onnx_test_buf g = {0};
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  if (extra) pb_raw(&g, extra->data, extra->size);
  nimble_status_t s = load_graph(&g, 13);
  pb_free(&g);
  return s;
}

/* An initializer (graph field 5) from a finished TensorProto. */
static nimble_status_t load_with_initializer(const onnx_test_buf *tensor) {
  onnx_test_buf extra = {0};
  pb_msg(&extra, 5, tensor);
  nimble_status_t s = load_relu_with(&extra);
  pb_free(&extra);
  return s;
}

/* ---- tensors ---- */

START_TEST(test_initializer_sizes_and_carriers_are_checked) {
  int64_t dims22[] = {2, 2};
  onnx_test_buf t = {0};
  /* float_data with 3 entries for 4 elements */
  tensor_head(&t, "w", NIMBLE_ONNX_FLOAT, 2, dims22);
  float f[3] = {1, 2, 3};
  pb_bytes(&t, 4, f, sizeof(f));
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "v.onnx: initializer 0: tensor 'w': float_data has 3 entries, but 4 "
                      "elements of FLOAT need 4");
  pb_free(&t);
  /* FLOAT data in int64_data */
  tensor_head(&t, "w", NIMBLE_ONNX_FLOAT, 2, dims22);
  pb_int(&t, 7, 1);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'w': FLOAT data is in int64_data, which does not carry FLOAT");
  pb_free(&t);
  /* no data at all */
  tensor_head(&t, "w", NIMBLE_ONNX_INT64, 2, dims22);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'w': has 4 elements of INT64 but no data");
  pb_free(&t);
  /* both raw_data and the typed field */
  tensor_head(&t, "w", NIMBLE_ONNX_FLOAT, 0, NULL);
  pb_bytes(&t, 9, f, 4);
  pb_bytes(&t, 4, f, 4);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'w': data is in both raw_data and float_data");
  pb_free(&t);
  /* STRING cannot use raw_data */
  tensor_head(&t, "w", NIMBLE_ONNX_STRING, 0, NULL);
  pb_bytes(&t, 9, "abc", 3);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'w': STRING data cannot be in raw_data");
  pb_free(&t);
}
END_TEST

START_TEST(test_initializer_dims_and_types_are_checked) {
  onnx_test_buf t = {0};
  int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
  tensor_head(&t, "big", NIMBLE_ONNX_FLOAT, 2, huge);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'big': element count overflows at dimension 1");
  pb_free(&t);
  /* 2^40 elements claimed, 4 bytes present: refused before any allocation */
  tensor_head(&t, "big", NIMBLE_ONNX_FLOAT, 1, huge);
  pb_bytes(&t, 9, "\0\0\0\0", 4);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'big': raw_data has 4 bytes, but 1099511627776 elements of FLOAT "
                      "need 4398046511104");
  pb_free(&t);
  int64_t neg[] = {-3};
  tensor_head(&t, "n", NIMBLE_ONNX_FLOAT, 1, neg);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'n': dimension 0 is negative (-3)");
  pb_free(&t);
  tensor_head(&t, "u", 0, 0, NULL);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'u': data type 0 is not a valid ONNX type");
  pb_free(&t);
  tensor_head(&t, "u", 99, 0, NULL);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "tensor 'u': data type 99 is not a valid ONNX type");
  pb_free(&t);
  /* no name */
  pb_int(&t, 2, NIMBLE_ONNX_FLOAT);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_INVALID_ARGUMENT,
                      "initializer 0 has no name");
  pb_free(&t);
}
END_TEST

START_TEST(test_typed_fields_are_narrowed_to_the_dtype) {
  /* UINT16 [3] in int32_data: 1, 65535, 258 -> little-endian u16 */
  onnx_test_buf t = {0}, g = {0}, packed = {0};
  int64_t three = 3;
  tensor_head(&t, "w", NIMBLE_ONNX_UINT16, 1, &three);
  pb_varint(&packed, 1);
  pb_varint(&packed, 65535);
  pb_varint(&packed, 258);
  pb_msg(&t, 5, &packed);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  pb_msg(&g, 5, &t);
  onnx_test_buf model = {0}, os = {0};
  pb_msg(&model, 7, &g);
  pb_int(&os, 2, 13);
  pb_msg(&model, 8, &os);
  nimble_onnx_model *m;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_memory(model.data, model.size, "v.onnx", &m));
  const nimble_onnx_tensor_t *w = nimble_onnx_graph_constant(nimble_onnx_model_graph(m), "w");
  const uint8_t want[] = {1, 0, 0xff, 0xff, 2, 1};
  ck_assert_uint_eq(w->size, 6);
  ck_assert_int_eq(memcmp(w->data, want, 6), 0);
  nimble_onnx_model_destroy(m);
  pb_free(&t);
  pb_free(&g);
  pb_free(&packed);
  pb_free(&model);
  pb_free(&os);
}
END_TEST

START_TEST(test_external_data_is_refused_clearly) {
  onnx_test_buf t = {0}, e = {0};
  int64_t two = 2;
  tensor_head(&t, "w", NIMBLE_ONNX_FLOAT, 1, &two);
  pb_str(&e, 1, "location");
  pb_str(&e, 2, "w.bin");
  pb_msg(&t, 13, &e);
  pb_int(&t, 14, 1);
  NIMBLE_ASSERT_ERROR(load_with_initializer(&t), NIMBLE_UNIMPLEMENTED,
                      "tensor 'w': data stored in an external file ('w.bin') is not supported");
  pb_free(&t);
  pb_free(&e);
}
END_TEST

/* ---- graphs, nodes and attributes ---- */

START_TEST(test_graph_inputs_and_outputs_are_checked) {
  onnx_test_buf g = {0};
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 0);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT, "graph input 'x' has no type");
  pb_free(&g);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "z", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "graph output 'z' is not defined");
  pb_free(&g);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "graph input 'x' is listed twice");
  pb_free(&g);
  /* a negative dim_value in a type */
  onnx_test_buf v = {0}, type = {0};
  int64_t neg = -1;
  type_tensor(&type, 1, 1, &neg);
  pb_str(&v, 1, "x");
  pb_msg(&v, 2, &type);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  pb_msg(&g, 11, &v);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "graph input 'x': dimension 0 has negative dim_value -1");
  pb_free(&g);
  pb_free(&v);
  pb_free(&type);
}
END_TEST

START_TEST(test_operators_and_attributes_are_checked_against_onnx) {
  onnx_test_buf g = {0}, a = {0};
  attr_int(&a, "alpha_typo", 1);
  node(&g, "relu_0", "Relu", "x", NULL, "y", &a);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'relu_0' (Relu): attribute 'alpha_typo' is not an attribute of Relu");
  pb_free(&g);
  pb_free(&a);
  /* Celu arrived in opset 12 */
  node(&g, "celu_0", "Celu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 11), NIMBLE_INVALID_ARGUMENT,
                      "node 'celu_0' (Celu): operator 'Celu' needs opset 12 of domain 'ai.onnx', "
                      "the model imports 11");
  NIMBLE_ASSERT_OK(load_graph(&g, 12));
  pb_free(&g);
  /* Cast 'to' was a STRING in opset 1 and is an INT since: both pass,
   * a FLOAT does not. */
  attr_float(&a, "to", 1.0f);
  node(&g, "cast_0", "Cast", "x", NULL, "y", &a);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'cast_0' (Cast): attribute 'to' must be INT or STRING, got FLOAT");
  pb_free(&g);
  pb_free(&a);
  /* the same attribute twice; an unnamed node is named by position */
  attr_float(&a, "alpha", 1.0f);
  attr_float(&a, "alpha", 2.0f);
  node(&g, NULL, "Elu", "x", NULL, "y", &a);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node #0 (Elu): attribute 'alpha' is given twice");
  pb_free(&g);
  pb_free(&a);
  /* opset 18 is newer than the table: unknown ops pass to the importer */
  node(&g, "future_0", "FutureOp", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_OK(load_graph(&g, 18));
  pb_free(&g);
}
END_TEST

START_TEST(test_constant_nodes_need_exactly_one_value) {
  onnx_test_buf g = {0}, a = {0}, t = {0};
  float one = 1.0f;
  tensor_head(&t, "", NIMBLE_ONNX_FLOAT, 0, NULL);
  pb_bytes(&t, 9, &one, 4);
  attr_tensor(&a, "value", &t);
  attr_float(&a, "value_float", 2.0f);
  node(&g, "c_0", "Constant", NULL, NULL, "x", &a);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'c_0' (Constant): Constant has both 'value' and 'value_float'");
  pb_free(&g);
  pb_free(&a);
  node(&g, "c_0", "Constant", NULL, NULL, "x", NULL);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'c_0' (Constant): Constant has none of value");
  pb_free(&g);
  /* a good one: value_int 7 is an INT64 scalar */
  attr_int(&a, "value_int", 7);
  node(&g, "c_0", "Constant", NULL, NULL, "x", &a);
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_OK(load_graph(&g, 13));
  pb_free(&g);
  pb_free(&a);
  pb_free(&t);
}
END_TEST

START_TEST(test_names_defined_twice_are_refused) {
  onnx_test_buf g = {0}, t = {0};
  float one = 1.0f;
  tensor_head(&t, "x", NIMBLE_ONNX_FLOAT, 0, NULL);
  pb_bytes(&t, 9, &one, 4);
  /* Relu writes over an initializer */
  node(&g, "relu_0", "Relu", "x", NULL, "x", NULL);
  pb_msg(&g, 5, &t);
  vi(&g, 12, "x", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'relu_0' (Relu): output 'x' is already defined by an initializer");
  pb_free(&g);
  /* two initializers of one name */
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  pb_msg(&g, 5, &t);
  pb_msg(&g, 5, &t);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "initializer 'x' is defined twice");
  pb_free(&g);
  /* an input with an initializer of its name: the initializer is its default */
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  pb_msg(&g, 5, &t);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_OK(load_graph(&g, 13));
  pb_free(&g);
  pb_free(&t);
  /* empty names mark omitted optional inputs and outputs */
  node(&g, "clip_0", "Clip", "x", "", "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_OK(load_graph(&g, 13));
  pb_free(&g);
}
END_TEST

START_TEST(test_names_in_messages_are_escaped_unless_valid_utf8) {
  /* a node named "a\nb\xff" and one named "\xc3\xa9t\xc3\xa9" (UTF-8 'été') */
  onnx_test_buf g = {0};
  node(&g, "a\nb\xff", "Relu", "x", NULL, "y", NULL);
  node(&g, "\xc3\xa9t\xc3\xa9", "Relu", "nowhere", NULL, "z", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node '\xc3\xa9t\xc3\xa9' (Relu): input 0 'nowhere' is not defined");
  pb_free(&g);
  node(&g, "a\nb\xff", "Relu", "x", "", "y", NULL);
  node(&g, "c", "Neg", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "already defined by node 'a\\x0ab\\xff' (Relu)");
  pb_free(&g);
}
END_TEST

START_TEST(test_opset_imports_are_checked) {
  onnx_test_buf g = {0}, model = {0}, os = {0};
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  pb_msg(&model, 7, &g);
  pb_int(&os, 2, 13);
  pb_msg(&model, 8, &os);
  pb_free(&os);
  pb_str(&os, 1, "ai.onnx");
  pb_int(&os, 2, 12);
  pb_msg(&model, 8, &os);
  nimble_onnx_model *m = NULL;
  NIMBLE_ASSERT_ERROR(nimble_onnx_model_load_memory(model.data, model.size, "v.onnx", &m),
                      NIMBLE_INVALID_ARGUMENT, "domain 'ai.onnx' is imported twice");
  pb_free(&model);
  pb_free(&os);
  pb_msg(&model, 7, &g);
  pb_str(&os, 1, "");
  pb_msg(&model, 8, &os);
  NIMBLE_ASSERT_ERROR(nimble_onnx_model_load_memory(model.data, model.size, "v.onnx", &m),
                      NIMBLE_INVALID_ARGUMENT,
                      "opset import for domain 'ai.onnx' has no valid version");
  pb_free(&model);
  pb_free(&os);
  pb_free(&g);
}
END_TEST

START_TEST(test_deeply_nested_subgraphs_are_capped) {
  /* If nodes nested 40 deep, each then_branch holding the next */
  onnx_test_buf inner = {0};
  vi(&inner, 12, "x", 1); /* the innermost graph outputs the outer x */
  for (int depth = 0; depth < 40; depth++) {
    onnx_test_buf a = {0}, at = {0}, g = {0};
    pb_str(&at, 1, "then_branch");
    pb_int(&at, 20, NIMBLE_ONNX_ATTR_GRAPH);
    pb_msg(&at, 6, &inner);
    pb_msg(&a, 5, &at); /* no else_branch: one copy per level keeps the file small */
    char out[32];
    snprintf(out, sizeof(out), "o%d", depth);
    node(&g, NULL, "If", "c", NULL, out, &a);
    vi(&g, 12, out, 0);
    pb_free(&inner);
    inner = g;
    pb_free(&a);
    pb_free(&at);
  }
  vi(&inner, 11, "x", 1);
  vi(&inner, 11, "c", 1);
  nimble_status_t s = load_graph(&inner, 13);
  ck_assert_msg(s != NULL, "a 40-deep nest loaded");
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_RESOURCE_EXHAUSTED);
  ck_assert_msg(strstr(nimble_status_message(s), "deeper than"), "%s", nimble_status_message(s));
  nimble_status_free(s);
  pb_free(&inner);
}
END_TEST

/* Loads `graph` (opset 13) and returns the model; the caller destroys it. */
static nimble_onnx_model *load_ok(const onnx_test_buf *graph) {
  onnx_test_buf model = {0}, os = {0};
  pb_msg(&model, 7, graph);
  pb_int(&os, 2, 13);
  pb_msg(&model, 8, &os);
  nimble_onnx_model *m = NULL;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_memory(model.data, model.size, "v.onnx", &m));
  pb_free(&model);
  pb_free(&os);
  return m;
}

START_TEST(test_every_typed_carrier_decodes_to_little_endian_bytes) {
  onnx_test_buf g = {0}, t = {0}, packed = {0};
  int64_t two = 2;
  node(&g, "relu_0", "Relu", "x", NULL, "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  /* DOUBLE in double_data */
  double d[2] = {1.5, -2.25};
  tensor_head(&t, "d", NIMBLE_ONNX_DOUBLE, 1, &two);
  pb_bytes(&t, 10, d, sizeof(d));
  pb_msg(&g, 5, &t);
  pb_free(&t);
  /* UINT32 in uint64_data: 7 and 4294967295 */
  tensor_head(&t, "u32", NIMBLE_ONNX_UINT32, 1, &two);
  pb_varint(&packed, 7);
  pb_varint(&packed, 4294967295u);
  pb_msg(&t, 11, &packed);
  pb_msg(&g, 5, &t);
  pb_free(&t);
  pb_free(&packed);
  /* FLOAT16 in int32_data: 0x3c00 (1.0) and 0xc000 (-2.0) */
  tensor_head(&t, "h", NIMBLE_ONNX_FLOAT16, 1, &two);
  pb_varint(&packed, 0x3c00);
  pb_varint(&packed, 0xc000);
  pb_msg(&t, 5, &packed);
  pb_msg(&g, 5, &t);
  pb_free(&t);
  pb_free(&packed);
  /* BOOL in int32_data: any non-zero is true */
  tensor_head(&t, "b", NIMBLE_ONNX_BOOL, 1, &two);
  pb_varint(&packed, 0);
  pb_varint(&packed, 5);
  pb_msg(&t, 5, &packed);
  pb_msg(&g, 5, &t);
  pb_free(&t);
  pb_free(&packed);
  /* COMPLEX64 [1] is two floats in float_data */
  int64_t one = 1;
  float c[2] = {3.0f, 4.0f};
  tensor_head(&t, "c", NIMBLE_ONNX_COMPLEX64, 1, &one);
  pb_bytes(&t, 4, c, sizeof(c));
  pb_msg(&g, 5, &t);
  pb_free(&t);
  /* STRING [2] in string_data */
  tensor_head(&t, "s", NIMBLE_ONNX_STRING, 1, &two);
  pb_str(&t, 6, "ab");
  pb_str(&t, 6, "");
  pb_msg(&g, 5, &t);
  pb_free(&t);
  /* an empty tensor: dims [0], no data at all */
  int64_t zero = 0;
  tensor_head(&t, "e", NIMBLE_ONNX_FLOAT, 1, &zero);
  pb_msg(&g, 5, &t);
  pb_free(&t);

  nimble_onnx_model *m = load_ok(&g);
  const nimble_onnx_graph *mg = nimble_onnx_model_graph(m);
  ck_assert_uint_eq(mg->n_initializers, 7);
  const nimble_onnx_tensor_t *x = nimble_onnx_graph_constant(mg, "d");
  ck_assert_uint_eq(x->size, 16);
  ck_assert_int_eq(memcmp(x->data, d, 16), 0);
  x = nimble_onnx_graph_constant(mg, "u32");
  const uint8_t u32[] = {7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  ck_assert_uint_eq(x->size, 8);
  ck_assert_int_eq(memcmp(x->data, u32, 8), 0);
  x = nimble_onnx_graph_constant(mg, "h");
  const uint8_t h[] = {0x00, 0x3c, 0x00, 0xc0};
  ck_assert_uint_eq(x->size, 4);
  ck_assert_int_eq(memcmp(x->data, h, 4), 0);
  x = nimble_onnx_graph_constant(mg, "b");
  const uint8_t b[] = {0, 1};
  ck_assert_uint_eq(x->size, 2);
  ck_assert_int_eq(memcmp(x->data, b, 2), 0);
  x = nimble_onnx_graph_constant(mg, "c");
  ck_assert_uint_eq(x->count, 1);
  ck_assert_uint_eq(x->size, 8);
  ck_assert_int_eq(memcmp(x->data, c, 8), 0);
  x = nimble_onnx_graph_constant(mg, "s");
  ck_assert_uint_eq(x->count, 2);
  ck_assert_uint_eq(x->strings[0].size, 2);
  ck_assert_int_eq(memcmp(x->strings[0].data, "ab", 2), 0);
  ck_assert_uint_eq(x->strings[1].size, 0);
  x = nimble_onnx_graph_constant(mg, "e");
  ck_assert_uint_eq(x->count, 0);
  ck_assert_uint_eq(x->size, 0);
  ck_assert_ptr_null(x->data);
  nimble_onnx_model_destroy(m);
  pb_free(&g);
}
END_TEST

/* SparseTensorProto: values FLOAT [nnz], indices INT64 as given, dims. */
static void sparse(onnx_test_buf *out, const char *name, int64_t nnz, const int64_t *idx,
                   int64_t n_idx, int idx_rank, int64_t dense) {
  onnx_test_buf sp = {0}, values = {0}, indices = {0};
  float vals[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  tensor_head(&values, name, NIMBLE_ONNX_FLOAT, 1, &nnz);
  pb_bytes(&values, 9, vals, (size_t)nnz * 4);
  int64_t idims[2] = {nnz, 1};
  tensor_head(&indices, "", NIMBLE_ONNX_INT64, idx_rank, idims);
  pb_bytes(&indices, 9, idx, (size_t)n_idx * 8);
  pb_msg(&sp, 1, &values);
  pb_msg(&sp, 2, &indices);
  pb_int(&sp, 3, dense);
  pb_msg(out, 15, &sp); /* GraphProto.sparse_initializer */
  pb_free(&sp);
  pb_free(&values);
  pb_free(&indices);
}

START_TEST(test_sparse_initializers_are_checked_and_named) {
  onnx_test_buf g = {0};
  const int64_t idx[] = {1, 4};
  node(&g, "add_0", "Add", "x", "sp", "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  sparse(&g, "sp", 2, idx, 2, 1, 5);
  nimble_onnx_model *m = load_ok(&g);
  const nimble_onnx_value_t *v = nimble_onnx_graph_find_value(nimble_onnx_model_graph(m), "sp");
  ck_assert_int_eq(v->kind, NIMBLE_ONNX_VALUE_SPARSE_INITIALIZER);
  ck_assert_int_eq(v->sparse_initializer->dims[0], 5);
  ck_assert_uint_eq(v->sparse_initializer->values->count, 2);
  nimble_onnx_model_destroy(m);
  pb_free(&g);
  /* index 5 is outside a dense shape of [5] */
  const int64_t bad[] = {1, 5};
  node(&g, "add_0", "Add", "x", "sp", "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  sparse(&g, "sp", 2, bad, 2, 1, 5);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "sparse initializer 0: sparse tensor 'sp': index 5 at position 1 is outside "
                      "the shape");
  pb_free(&g);
  /* indices as [nnz, 1] coordinates are fine too */
  node(&g, "add_0", "Add", "x", "sp", "y", NULL);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  sparse(&g, "sp", 2, idx, 2, 2, 5);
  NIMBLE_ASSERT_OK(load_graph(&g, 13));
  pb_free(&g);
}
END_TEST

START_TEST(test_non_tensor_types_are_read) {
  /* x: sequence<map<INT64, optional<tensor FLOAT, unknown rank>>> */
  onnx_test_buf g = {0}, v = {0}, t_opt = {0}, opt = {0}, t_map = {0}, map = {0}, t_seq = {0},
                seq = {0}, t_tensor = {0};
  type_tensor(&t_tensor, NIMBLE_ONNX_FLOAT, -1, NULL);
  pb_msg(&opt, 1, &t_tensor);
  pb_msg(&t_opt, 9, &opt);
  pb_int(&map, 1, NIMBLE_ONNX_INT64);
  pb_msg(&map, 2, &t_opt);
  pb_msg(&t_map, 5, &map);
  pb_msg(&seq, 1, &t_map);
  pb_msg(&t_seq, 4, &seq);
  pb_str(&v, 1, "x");
  pb_msg(&v, 2, &t_seq);
  node(&g, "id_0", "Identity", "x", NULL, "y", NULL);
  pb_msg(&g, 11, &v);
  pb_free(&v);
  pb_str(&v, 1, "y");
  pb_msg(&v, 2, &t_seq);
  pb_msg(&g, 12, &v);
  nimble_onnx_model *m = load_ok(&g);
  const nimble_onnx_type_t *t = nimble_onnx_model_graph(m)->inputs[0]->type;
  ck_assert_int_eq(t->kind, NIMBLE_ONNX_TYPE_SEQUENCE);
  ck_assert_int_eq(t->elem->kind, NIMBLE_ONNX_TYPE_MAP);
  ck_assert_int_eq(t->elem->key_type, NIMBLE_ONNX_INT64);
  ck_assert_int_eq(t->elem->elem->kind, NIMBLE_ONNX_TYPE_OPTIONAL);
  const nimble_onnx_type_t *leaf = t->elem->elem->elem;
  ck_assert_int_eq(leaf->kind, NIMBLE_ONNX_TYPE_TENSOR);
  ck_assert_int_eq(leaf->elem_type, NIMBLE_ONNX_FLOAT);
  ck_assert_int_eq(leaf->has_shape, 0);
  nimble_onnx_model_destroy(m);
  onnx_test_buf *all[] = {&g, &v, &t_opt, &opt, &t_map, &map, &t_seq, &seq, &t_tensor};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) pb_free(all[i]);
}
END_TEST

START_TEST(test_attribute_types_are_inferred_for_old_files) {
  /* IR version 1 attributes have no `type`: one set field says it */
  onnx_test_buf g = {0}, a = {0}, at = {0};
  pb_str(&at, 1, "alpha");
  float alpha = 0.5f;
  pb_tag(&at, 2, 5);
  pb_raw(&at, &alpha, 4);
  pb_msg(&a, 5, &at);
  node(&g, "elu_0", "Elu", "x", NULL, "y", &a);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  nimble_onnx_model *m = load_ok(&g);
  float f;
  NIMBLE_ASSERT_OK(
      nimble_onnx_node_get_float(nimble_onnx_model_graph(m)->nodes[0], "alpha", 1.0f, &f));
  ck_assert(f == 0.5f);
  nimble_onnx_model_destroy(m);
  pb_free(&g);
  pb_free(&a);
  /* two value fields and no type: ambiguous */
  pb_int(&at, 3, 1);
  pb_msg(&a, 5, &at);
  node(&g, "elu_0", "Elu", "x", NULL, "y", &a);
  vi(&g, 11, "x", 1);
  vi(&g, 12, "y", 1);
  NIMBLE_ASSERT_ERROR(load_graph(&g, 13), NIMBLE_INVALID_ARGUMENT,
                      "node 'elu_0' (Elu): attribute 'alpha' has no type, and it does not set "
                      "exactly one value field");
  pb_free(&g);
  pb_free(&a);
  pb_free(&at);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_validate");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_initializer_sizes_and_carriers_are_checked);
  tcase_add_test(tc, test_initializer_dims_and_types_are_checked);
  tcase_add_test(tc, test_typed_fields_are_narrowed_to_the_dtype);
  tcase_add_test(tc, test_external_data_is_refused_clearly);
  tcase_add_test(tc, test_graph_inputs_and_outputs_are_checked);
  tcase_add_test(tc, test_operators_and_attributes_are_checked_against_onnx);
  tcase_add_test(tc, test_constant_nodes_need_exactly_one_value);
  tcase_add_test(tc, test_names_defined_twice_are_refused);
  tcase_add_test(tc, test_names_in_messages_are_escaped_unless_valid_utf8);
  tcase_add_test(tc, test_opset_imports_are_checked);
  tcase_add_test(tc, test_deeply_nested_subgraphs_are_capped);
  tcase_add_test(tc, test_every_typed_carrier_decodes_to_little_endian_bytes);
  tcase_add_test(tc, test_sparse_initializers_are_checked_and_named);
  tcase_add_test(tc, test_non_tensor_types_are_read);
  tcase_add_test(tc, test_attribute_types_are_inferred_for_old_files);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
