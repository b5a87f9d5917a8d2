/* What the loader promises the importer: topological order (sorting
 * unsorted files, with subgraph uses of outer values as dependencies),
 * scopes and outer references, producers, constants, typed attribute
 * access with errors naming the node. Models come from the fixture
 * generator or are written here field by field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "onnx_test_util.h"

#include "nimble/onnx_model.h"

static nimble_onnx_model *load_fixture(const char *name) {
  char rel[256];
  snprintf(rel, sizeof(rel), "%s.onnx", name);
  char *path = onnx_test_path("NIMBLE_ONNX_FIXTURES", rel);
  nimble_onnx_model *m;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_file(path, &m));
  free(path);
  return m;
}

static const nimble_onnx_node *node_named(const nimble_onnx_graph *g, const char *name) {
  for (size_t i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
  ck_abort_msg("no node %s", name);
  return NULL;
}

START_TEST(test_unsorted_nodes_come_out_in_topological_order) {
  nimble_onnx_model *m = load_fixture("unsorted");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_uint_eq(g->n_nodes, 3);
  ck_assert_str_eq(g->nodes[0]->name, "gemm_0");
  ck_assert_str_eq(g->nodes[1]->name, "relu_0");
  ck_assert_str_eq(g->nodes[2]->name, "gemm_1");
  /* index keeps the file's position: the file stored them reversed */
  ck_assert_uint_eq(g->nodes[0]->index, 2);
  ck_assert_uint_eq(g->nodes[2]->index, 0);
  nimble_onnx_model_destroy(m);
}
END_TEST

START_TEST(test_sorted_files_keep_their_order) {
  nimble_onnx_model *m = load_fixture("cnn");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  const char *want[] = {"conv_0", "relu_0", "pool_0", "flatten_0", "fc_0"};
  ck_assert_uint_eq(g->n_nodes, 5);
  for (size_t i = 0; i < 5; i++) {
    ck_assert_str_eq(g->nodes[i]->name, want[i]);
    ck_assert_uint_eq(g->nodes[i]->index, i);
  }
  nimble_onnx_model_destroy(m);
}
END_TEST

START_TEST(test_values_know_their_producers_and_types) {
  nimble_onnx_model *m = load_fixture("mlp");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_ptr_eq(nimble_onnx_graph_producer(g, "h"), node_named(g, "gemm_0"));
  ck_assert_ptr_eq(nimble_onnx_graph_producer(g, "y"), node_named(g, "gemm_1"));
  ck_assert_ptr_null(nimble_onnx_graph_producer(g, "x"));
  ck_assert_ptr_null(nimble_onnx_graph_find_value(g, "nope"));
  ck_assert_ptr_null(nimble_onnx_graph_find_value(g, ""));
  const nimble_onnx_value_t *w1 = nimble_onnx_graph_find_value(g, "w1");
  ck_assert_int_eq(w1->kind, NIMBLE_ONNX_VALUE_INITIALIZER);
  ck_assert_uint_eq(w1->type->rank, 2);
  ck_assert_int_eq(w1->type->dims[0].value, 16);
  ck_assert_int_eq(w1->type->dims[1].value, 8);
  const nimble_onnx_value_t *y = nimble_onnx_graph_find_value(g, "y");
  ck_assert_int_eq(y->kind, NIMBLE_ONNX_VALUE_NODE_OUTPUT);
  ck_assert_uint_eq(y->output_index, 0);
  ck_assert_int_eq(y->type->dims[0].kind, NIMBLE_ONNX_DIM_PARAM);
  ck_assert_str_eq(y->type->dims[0].param, "batch");
  /* a node output with no stated type */
  ck_assert_ptr_null(nimble_onnx_graph_find_value(g, "h")->type);
  /* b1 travelled in float_data; the decoded bytes are IEEE floats */
  const nimble_onnx_tensor_t *b1 = nimble_onnx_graph_constant(g, "b1");
  ck_assert_int_eq(b1->dtype, NIMBLE_ONNX_FLOAT);
  ck_assert_uint_eq(b1->count, 16);
  ck_assert_uint_eq(b1->size, 64);
  nimble_onnx_model_destroy(m);
}
END_TEST

START_TEST(test_value_info_gives_types_with_unknown_dims) {
  nimble_onnx_model *m = load_fixture("dim_param");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  const nimble_onnx_value_t *s = nimble_onnx_graph_find_value(g, "s");
  ck_assert_ptr_nonnull(s->type);
  ck_assert_uint_eq(s->type->rank, 3);
  ck_assert_str_eq(s->type->dims[0].param, "batch");
  ck_assert_str_eq(s->type->dims[1].param, "seq");
  ck_assert_int_eq(s->type->dims[2].kind, NIMBLE_ONNX_DIM_UNKNOWN);
  /* The Constant's value: a FLOAT [4] tensor */
  const nimble_onnx_tensor_t *scale = nimble_onnx_graph_constant(g, "scale");
  ck_assert_ptr_nonnull(scale);
  ck_assert_ptr_eq(scale, node_named(g, "const_scale")->constant);
  ck_assert_int_eq(scale->dtype, NIMBLE_ONNX_FLOAT);
  ck_assert_uint_eq(scale->rank, 1);
  ck_assert_int_eq(scale->dims[0], 4);
  /* int8 from int32_data: the generator wrote [-2, -1, 0, 1, 2, 3] */
  const nimble_onnx_tensor_t *off = nimble_onnx_graph_constant(g, "offset");
  const int8_t want[] = {-2, -1, 0, 1, 2, 3};
  ck_assert_int_eq(off->dtype, NIMBLE_ONNX_INT8);
  ck_assert_uint_eq(off->size, 6);
  ck_assert_int_eq(memcmp(off->data, want, 6), 0);
  nimble_onnx_model_destroy(m);
}
END_TEST

START_TEST(test_subgraphs_see_outer_scopes_and_list_their_outer_refs) {
  nimble_onnx_model *m = load_fixture("control_flow");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_uint_eq(g->n_outer_refs, 0);
  const nimble_onnx_node *loop = node_named(g, "loop_0");
  const nimble_onnx_graph *body;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_graph(loop, "body", &body));
  ck_assert_ptr_eq(body->parent, g);
  ck_assert_ptr_eq(body->owner, loop);
  ck_assert_str_eq(body->owner_attr, "body");
  ck_assert_uint_eq(body->depth, 1);
  ck_assert_uint_eq(body->n_inputs, 3);
  ck_assert_str_eq(body->inputs[2]->name, "acc_in");
  ck_assert_uint_eq(body->n_outer_refs, 1);
  ck_assert_str_eq(body->outer_refs[0], "x");
  /* x seen from the body is the main graph's input */
  const nimble_onnx_value_t *x = nimble_onnx_graph_find_value(body, "x");
  ck_assert_ptr_eq(x->graph, g);
  ck_assert_int_eq(x->kind, NIMBLE_ONNX_VALUE_GRAPH_INPUT);

  const nimble_onnx_node *iff = node_named(g, "if_0");
  const nimble_onnx_graph *then_g, *else_g;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_graph(iff, "then_branch", &then_g));
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_graph(iff, "else_branch", &else_g));
  ck_assert_uint_eq(then_g->n_outer_refs, 2);
  ck_assert_str_eq(then_g->outer_refs[0], "acc");
  ck_assert_str_eq(then_g->outer_refs[1], "two");
  ck_assert_str_eq(else_g->outer_refs[1], "one");
  ck_assert_ptr_eq(nimble_onnx_graph_producer(then_g, "acc"), loop);
  /* constants through scopes: value_float 2.0 is a FLOAT scalar */
  const nimble_onnx_tensor_t *two = nimble_onnx_graph_constant(then_g, "two");
  ck_assert_ptr_nonnull(two);
  ck_assert_int_eq(two->dtype, NIMBLE_ONNX_FLOAT);
  ck_assert_uint_eq(two->rank, 0);
  ck_assert_uint_eq(two->count, 1);
  ck_assert(*(const float *)two->data == 2.0f);
  const nimble_onnx_tensor_t *t = nimble_onnx_graph_constant(g, "true");
  ck_assert_int_eq(t->dtype, NIMBLE_ONNX_BOOL);
  ck_assert_int_eq(*(const uint8_t *)t->data, 1);
  /* a graph input is not a load-time constant */
  ck_assert_ptr_null(nimble_onnx_graph_constant(g, "n"));
  /* the If comes after the Loop whose output its branches use */
  ck_assert_uint_lt(loop->index, iff->index);
  nimble_onnx_model_destroy(m);
}
END_TEST

START_TEST(test_attribute_access_checks_types_and_gives_defaults) {
  nimble_onnx_model *m = load_fixture("cnn");
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  const nimble_onnx_node *conv = node_named(g, "conv_0");
  const int64_t *ints;
  size_t n;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_ints(conv, "pads", &ints, &n));
  ck_assert_uint_eq(n, 4);
  for (size_t i = 0; i < 4; i++) ck_assert_int_eq(ints[i], 1);
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_ints(conv, "dilations", &ints, &n));
  ck_assert_uint_eq(n, 0);
  ck_assert_ptr_null(ints);
  int64_t group;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_int(conv, "group", 1, &group));
  ck_assert_int_eq(group, 1);
  const char *pad;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_string(conv, "auto_pad", "NOTSET", &pad));
  ck_assert_str_eq(pad, "NOTSET");
  NIMBLE_ASSERT_ERROR(nimble_onnx_node_get_int(conv, "strides", 1, &group), NIMBLE_INVALID_ARGUMENT,
                      "node 'conv_0' (Conv): attribute 'strides' must be INT, got INTS");
  float f;
  NIMBLE_ASSERT_ERROR(nimble_onnx_node_get_float(conv, "kernel_shape", 0, &f),
                      NIMBLE_INVALID_ARGUMENT, "attribute 'kernel_shape' must be FLOAT, got INTS");
  NIMBLE_ASSERT_ERROR(nimble_onnx_node_require_int(conv, "group", &group), NIMBLE_NOT_FOUND,
                      "node 'conv_0' (Conv): required attribute 'group' is missing");
  const nimble_onnx_node *gemm = node_named(g, "fc_0");
  int64_t trans_b;
  NIMBLE_ASSERT_OK(nimble_onnx_node_require_int(gemm, "transB", &trans_b));
  ck_assert_int_eq(trans_b, 1);
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_float(gemm, "alpha", 1.0f, &f));
  ck_assert(f == 1.0f);
  char buf[64];
  ck_assert_str_eq(nimble_onnx_node_describe(gemm, buf, sizeof(buf)), "node 'fc_0' (Gemm)");
  nimble_onnx_model_destroy(m);
}
END_TEST

/* ---- hand-built graphs with subgraphs ---- */

static void node_proto(onnx_test_buf *out, const char *name, const char *op, const char *in,
                       const char *output, const onnx_test_buf *attrs) {
  onnx_test_buf n = {0};
  if (in) pb_str(&n, 1, in);
  pb_str(&n, 2, output);
  pb_str(&n, 3, name);
  pb_str(&n, 4, op);
  if (attrs) pb_raw(&n, attrs->data, attrs->size);
  pb_msg(out, 1, &n); /* GraphProto.node */
  pb_free(&n);
}

static void float_vi(onnx_test_buf *out, uint32_t field, const char *name) {
  onnx_test_buf vi = {0}, type = {0}, tt = {0};
  pb_int(&tt, 1, 1);
  pb_msg(&type, 1, &tt);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  pb_msg(out, field, &vi);
  pb_free(&vi);
  pb_free(&type);
  pb_free(&tt);
}

/* A branch graph `out = Identity(used)` where `used` comes from outside. */
static void branch(onnx_test_buf *attrs, const char *attr, const char *used, const char *out) {
  onnx_test_buf g = {0}, a = {0};
  char node[64];
  snprintf(node, sizeof(node), "%s_id", attr);
  node_proto(&g, node, "Identity", used, out, NULL);
  float_vi(&g, 12, out);
  pb_str(&a, 1, attr);
  pb_int(&a, 20, NIMBLE_ONNX_ATTR_GRAPH);
  pb_msg(&a, 6, &g);
  pb_msg(attrs, 5, &a); /* NodeProto.attribute */
  pb_free(&g);
  pb_free(&a);
}

/* Main graph: If(cond) whose branches read `a`, stored BEFORE the Relu
 * that makes `a` from `relu_in`. */
static void if_before_producer(onnx_test_buf *model, const char *relu_in) {
  onnx_test_buf graph = {0}, attrs = {0}, opset = {0}, cond_vi = {0};
  branch(&attrs, "then_branch", "a", "t_out");
  branch(&attrs, "else_branch", "a", "e_out");
  node_proto(&graph, "if_0", "If", "cond", "y", &attrs);
  node_proto(&graph, "relu_0", "Relu", relu_in, "a", NULL);
  /* cond: BOOL scalar */
  {
    onnx_test_buf vi = {0}, type = {0}, tt = {0}, shape = {0};
    pb_int(&tt, 1, NIMBLE_ONNX_BOOL);
    pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, "cond");
    pb_msg(&vi, 2, &type);
    pb_msg(&graph, 11, &vi);
    pb_free(&vi);
    pb_free(&type);
    pb_free(&tt);
    pb_free(&shape);
  }
  float_vi(&graph, 11, "x");
  float_vi(&graph, 12, "y");
  pb_int(model, 1, 8);
  pb_msg(model, 7, &graph);
  pb_str(&opset, 1, "");
  pb_int(&opset, 2, 13);
  pb_msg(model, 8, &opset);
  pb_free(&graph);
  pb_free(&attrs);
  pb_free(&opset);
  pb_free(&cond_vi);
}

START_TEST(test_outer_values_used_by_subgraphs_order_the_parent) {
  onnx_test_buf b = {0};
  if_before_producer(&b, "x");
  nimble_onnx_model *m;
  NIMBLE_ASSERT_OK(nimble_onnx_model_load_memory(b.data, b.size, "h.onnx", &m));
  const nimble_onnx_graph *g = nimble_onnx_model_graph(m);
  ck_assert_str_eq(g->nodes[0]->name, "relu_0");
  ck_assert_str_eq(g->nodes[1]->name, "if_0");
  const nimble_onnx_graph *then_g;
  NIMBLE_ASSERT_OK(nimble_onnx_node_get_graph(g->nodes[1], "then_branch", &then_g));
  ck_assert_uint_eq(then_g->n_outer_refs, 1);
  ck_assert_str_eq(then_g->outer_refs[0], "a");
  nimble_onnx_model_destroy(m);
  pb_free(&b);
}
END_TEST

START_TEST(test_a_cycle_through_a_subgraph_names_its_nodes) {
  /* relu_0 reads y, the If's output, while the If's branches read a. */
  onnx_test_buf b = {0};
  if_before_producer(&b, "y");
  NIMBLE_ASSERT_ERROR(
      nimble_onnx_model_load_memory(b.data, b.size, "h.onnx", &(nimble_onnx_model *){0}),
      NIMBLE_INVALID_ARGUMENT,
      "h.onnx: node 'if_0' (If) is on a cycle: node 'if_0' (If) -> node 'relu_0' "
      "(Relu) -> node 'if_0' (If)");
  pb_free(&b);
}
END_TEST

START_TEST(test_subgraph_errors_name_the_path_to_the_node) {
  /* the branches read `a`, which nobody defines */
  onnx_test_buf b = {0};
  if_before_producer(&b, "x");
  /* rename Relu's output: replace the bytes "\x12\x01" "a" of relu_0's
   * output field. It is the last "\x12\x01a" in the buffer. */
  for (size_t i = b.size - 3;; i--) {
    if (b.data[i] == 0x12 && b.data[i + 1] == 1 && b.data[i + 2] == 'a') {
      b.data[i + 2] = 'b';
      break;
    }
    ck_assert_uint_gt(i, 0);
  }
  NIMBLE_ASSERT_ERROR(
      nimble_onnx_model_load_memory(b.data, b.size, "h.onnx", &(nimble_onnx_model *){0}),
      NIMBLE_INVALID_ARGUMENT,
      "h.onnx: node 'if_0' (If): attribute 'then_branch': node 'then_branch_id' "
      "(Identity): input 0 'a' is not defined");
  pb_free(&b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_graph");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_unsorted_nodes_come_out_in_topological_order);
  tcase_add_test(tc, test_sorted_files_keep_their_order);
  tcase_add_test(tc, test_values_know_their_producers_and_types);
  tcase_add_test(tc, test_value_info_gives_types_with_unknown_dims);
  tcase_add_test(tc, test_subgraphs_see_outer_scopes_and_list_their_outer_refs);
  tcase_add_test(tc, test_attribute_access_checks_types_and_gives_defaults);
  tcase_add_test(tc, test_outer_values_used_by_subgraphs_order_the_parent);
  tcase_add_test(tc, test_a_cycle_through_a_subgraph_names_its_nodes);
  tcase_add_test(tc, test_subgraph_errors_name_the_path_to_the_node);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
