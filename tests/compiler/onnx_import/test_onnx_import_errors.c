/* The importer on hand-built ONNX models (encoded here with the loader
 * suites' protobuf writer): opset-dependent operator forms give the types
 * computed by hand, graph inputs keep their names and symbolic dims, and
 * bad input gives an error naming the node (name and op type), never a
 * crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble_test.h"
#include "onnx_test_util.h"

/* ---- a tiny model builder ---- */

typedef struct mb {
  onnx_test_buf graph;
  int64_t opset;
} mb;

static void value_info(onnx_test_buf *out, uint32_t field, const char *name, int elem, int rank,
                       const char *const *dims) {
  onnx_test_buf shape = {0}, tensor = {0}, type = {0}, vi = {0};
  for (int i = 0; i < rank; i++) {
    onnx_test_buf dim = {0};
    char *end;
    long v = strtol(dims[i], &end, 10);
    if (dims[i][0] == 0) { /* unknown: neither value nor param */
    } else if (*end == 0) pb_int(&dim, 1, v);
    else pb_str(&dim, 2, dims[i]);
    pb_msg(&shape, 1, &dim);
    pb_free(&dim);
  }
  pb_int(&tensor, 1, elem);
  if (rank >= 0) pb_msg(&tensor, 2, &shape);
  pb_msg(&type, 1, &tensor);
  pb_str(&vi, 1, name);
  pb_msg(&vi, 2, &type);
  pb_msg(out, field, &vi);
  pb_free(&shape);
  pb_free(&tensor);
  pb_free(&type);
  pb_free(&vi);
}

static void input(mb *b, const char *name, int elem, int rank, const char *const *dims) {
  value_info(&b->graph, 11, name, elem, rank, dims);
}
/* A float output of unknown shape (the loader wants outputs typed). */
static void output(mb *b, const char *name) { value_info(&b->graph, 12, name, 1, -1, NULL); }

/* An int64 initializer. */
static void init_i64(mb *b, const char *name, int rank, const int64_t *vals, size_t n) {
  onnx_test_buf t = {0};
  if (rank == 1) pb_int(&t, 1, (int64_t)n);
  pb_int(&t, 2, 7);
  for (size_t i = 0; i < n; i++) pb_int(&t, 7, vals[i]);
  pb_str(&t, 8, name);
  pb_msg(&b->graph, 5, &t);
  pb_free(&t);
}

typedef struct attr {
  const char *name;
  int kind; /* 2 int, 7 ints, 1 float, 3 string */
  int64_t i;
  const int64_t *ints;
  size_t n;
  float f;
  const char *s;
} attr;

static void node(mb *b, const char *name, const char *op, const char *const *ins, size_t nin,
                 const char *const *outs, size_t nout, const attr *attrs, size_t nattrs) {
  onnx_test_buf nd = {0};
  for (size_t i = 0; i < nin; i++) pb_str(&nd, 1, ins[i]);
  for (size_t i = 0; i < nout; i++) pb_str(&nd, 2, outs[i]);
  pb_str(&nd, 3, name);
  pb_str(&nd, 4, op);
  for (size_t i = 0; i < nattrs; i++) {
    onnx_test_buf a = {0};
    pb_str(&a, 1, attrs[i].name);
    if (attrs[i].kind == 2) pb_int(&a, 3, attrs[i].i);
    if (attrs[i].kind == 7)
      for (size_t k = 0; k < attrs[i].n; k++) pb_int(&a, 8, attrs[i].ints[k]);
    if (attrs[i].kind == 1) {
      pb_tag(&a, 2, 5);
      pb_raw(&a, &attrs[i].f, 4);
    }
    if (attrs[i].kind == 3) pb_str(&a, 4, attrs[i].s);
    pb_int(&a, 20, attrs[i].kind);
    pb_msg(&nd, 5, &a);
    pb_free(&a);
  }
  pb_msg(&b->graph, 1, &nd);
  pb_free(&nd);
}

/* Imports the model; on success *t has the types. */
static nimble_status_t build_and_import(mb *b, nimble_arena *arena, nimble_module **m, nimble_typing **t) {
  onnx_test_buf model = {0}, opset = {0};
  pb_str(&b->graph, 2, "g");
  pb_int(&model, 1, 8);
  pb_str(&opset, 1, "");
  pb_int(&opset, 2, b->opset);
  pb_msg(&model, 8, &opset);
  pb_msg(&model, 7, &b->graph);
  nimble_onnx_model *om;
  nimble_status_t s = nimble_onnx_model_load_memory(model.data, model.size, "test.onnx", &om);
  pb_free(&model);
  pb_free(&opset);
  pb_free(&b->graph);
  if (s) return s;
  s = nimble_onnx_import_model(arena, om, NULL, m);
  nimble_onnx_model_destroy(om);
  if (s) return s;
  return nimble_typing_infer_module(*m, t);
}

/* Imports and gives the result type text, or fails the test. */
static const char *result_of(mb *b, char *buf, size_t size) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  nimble_status_t s = build_and_import(b, arena, &m, &t);
  ck_assert_msg(s == NULL, "import failed: %s", nimble_status_message(s));
  import_test_main_result(t, buf, size);
  nimble_arena_destroy(arena);
  return buf;
}

static nimble_status_t import_status(mb *b) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  nimble_status_t s = build_and_import(b, arena, &m, &t);
  nimble_arena_destroy(arena);
  return s;
}

static const char *const D234[] = {"2", "3", "4"};
static const char *const D1_3_1[] = {"1", "3", "1"};

/* ---- opset-dependent forms ---- */

START_TEST(test_squeeze_axes_as_attribute_and_as_input_give_the_same_type) {
  char buf[256];
  int64_t ax[] = {0, 2};
  mb b = {{0}, 11};
  input(&b, "x", 1, 3, D1_3_1);
  attr a = {"axes", 7, 0, ax, 2, 0, NULL};
  node(&b, "sq", "Squeeze", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, &a, 1);
  output(&b, "y");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(3,), float32]");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D1_3_1);
  init_i64(&b2, "axes", 1, ax, 2);
  node(&b2, "sq", "Squeeze", (const char *[]){"x", "axes"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(3,), float32]");
}
END_TEST

START_TEST(test_reduce_sum_axes_as_attribute_before_opset_13_and_input_after) {
  char buf[256];
  int64_t ax[] = {1};
  mb b = {{0}, 11};
  input(&b, "x", 1, 3, D234);
  attr a[2] = {{"axes", 7, 0, ax, 1, 0, NULL}, {"keepdims", 2, 0, NULL, 0, 0, NULL}};
  node(&b, "rs", "ReduceSum", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, a, 2);
  output(&b, "y");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(2, 4), float32]");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  init_i64(&b2, "axes", 1, ax, 1);
  node(&b2, "rs", "ReduceSum", (const char *[]){"x", "axes"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  /* keepdims defaults to 1 in ONNX. */
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(2, 1, 4), float32]");
}
END_TEST

START_TEST(test_slice_attributes_before_opset_10_and_inputs_after) {
  char buf[256];
  int64_t st[] = {1, 0}, en[] = {2, -1}, ax[] = {0, 2}, steps[] = {1, 2};
  mb b = {{0}, 9};
  input(&b, "x", 1, 3, D234);
  attr a[3] = {{"starts", 7, 0, st, 2, 0, NULL}, {"ends", 7, 0, en, 2, 0, NULL}, {"axes", 7, 0, ax, 2, 0, NULL}};
  node(&b, "sl", "Slice", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, a, 3);
  output(&b, "y");
  /* axis 0: [1, 2) -> 1; axis 2: [0, 3) -> 3. */
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(1, 3, 3), float32]");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  init_i64(&b2, "st", 1, st, 2);
  init_i64(&b2, "en", 1, en, 2);
  init_i64(&b2, "ax", 1, ax, 2);
  init_i64(&b2, "sp", 1, steps, 2);
  node(&b2, "sl", "Slice", (const char *[]){"x", "st", "en", "ax", "sp"}, 5, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  /* axis 2 with step 2 over [0, 3): 0, 2 -> 2. */
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(1, 3, 2), float32]");
}
END_TEST

START_TEST(test_split_sizes_as_attribute_and_as_input) {
  char buf[256];
  int64_t sp[] = {1, 3};
  mb b = {{0}, 11};
  input(&b, "x", 1, 3, D234);
  attr a[2] = {{"axis", 2, 2, NULL, 0, 0, NULL}, {"split", 7, 0, sp, 2, 0, NULL}};
  node(&b, "sp", "Split", (const char *[]){"x"}, 1, (const char *[]){"a", "b"}, 2, a, 2);
  output(&b, "a");
  output(&b, "b");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "(Tensor[(2, 3, 1), float32], Tensor[(2, 3, 3), float32])");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  init_i64(&b2, "sizes", 1, sp, 2);
  node(&b2, "sp", "Split", (const char *[]){"x", "sizes"}, 2, (const char *[]){"a", "b"}, 2, a, 1);
  output(&b2, "a");
  output(&b2, "b");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "(Tensor[(2, 3, 1), float32], Tensor[(2, 3, 3), float32])");
}
END_TEST

START_TEST(test_unsqueeze_and_clip_in_old_and_new_forms) {
  char buf[256];
  int64_t ax[] = {0, 3};
  mb b = {{0}, 9};
  input(&b, "x", 1, 3, D234);
  attr a = {"axes", 7, 0, ax, 2, 0, NULL};
  attr clip[2] = {{"min", 1, 0, NULL, 0, -1.0f, NULL}, {"max", 1, 0, NULL, 0, 1.0f, NULL}};
  node(&b, "un", "Unsqueeze", (const char *[]){"x"}, 1, (const char *[]){"u"}, 1, &a, 1);
  node(&b, "cl", "Clip", (const char *[]){"u"}, 1, (const char *[]){"y"}, 1, clip, 2);
  output(&b, "y");
  /* [2, 3, 4] with axes 0 and 3 of the result: [1, 2, 3, 1, 4]. */
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(1, 2, 3, 1, 4), float32]");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  init_i64(&b2, "axes", 1, ax, 2);
  node(&b2, "un", "Unsqueeze", (const char *[]){"x", "axes"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(1, 2, 3, 1, 4), float32]");
}
END_TEST

/* A float initializer. */
static void init_f32(mb *b, const char *name, const float *vals, size_t n) {
  onnx_test_buf t = {0};
  pb_int(&t, 1, (int64_t)n);
  pb_int(&t, 2, 1);
  pb_str(&t, 8, name);
  pb_bytes(&t, 9, vals, n * sizeof *vals);
  pb_msg(&b->graph, 5, &t);
  pb_free(&t);
}

START_TEST(test_pad_attributes_before_opset_11_and_inputs_after) {
  char buf[256];
  int64_t pads[] = {0, 1, 2, 1, 0, 3}; /* begins (0, 1, 2), ends (1, 0, 3) */
  mb b = {{0}, 2};
  input(&b, "x", 1, 3, D234);
  attr a[2] = {{"pads", 7, 0, pads, 6, 0, NULL}, {"mode", 3, 0, NULL, 0, 0, "edge"}};
  node(&b, "pad", "Pad", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, a, 2);
  output(&b, "y");
  /* (2 + 0 + 1, 3 + 1 + 0, 4 + 2 + 3) */
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(3, 4, 9), float32]");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  init_i64(&b2, "pads", 1, pads, 6);
  node(&b2, "pad", "Pad", (const char *[]){"x", "pads"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(3, 4, 9), float32]");
}
END_TEST

START_TEST(test_resize_scales_at_input_1_in_opset_10_and_sizes_at_input_3_after) {
  char buf[256];
  static const char *const d[] = {"1", "1", "4", "6"};
  float scales[] = {1, 1, 2, 0.5f};
  mb b = {{0}, 10};
  input(&b, "x", 1, 4, d);
  init_f32(&b, "scales", scales, 4);
  node(&b, "up", "Resize", (const char *[]){"x", "scales"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  /* floor(4 * 2), floor(6 * 0.5) */
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(1, 1, 8, 3), float32]");
  int64_t sizes[] = {1, 1, 5, 7};
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 4, d);
  init_i64(&b2, "sizes", 1, sizes, 4);
  node(&b2, "up", "Resize", (const char *[]){"x", "", "", "sizes"}, 4, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(1, 1, 5, 7), float32]");
}
END_TEST

/* Constant scales whose product with the extent is not an integer keep
 * the scales (ONNX maps coordinates by the scale, not out / in): the
 * importer passes them to dyn_resize as a constant; integral products
 * become static sizes. */
START_TEST(test_resize_with_constant_fractional_scales_keeps_the_scales) {
  static const char *const d[] = {"1", "1", "2", "4"};
  static const struct {
    float s[4];
    const char *type, *op;
  } cases[] = {{{1, 1, 0.6f, 0.6f}, "Tensor[(1, 1, 1, 2), float32]", "dyn_resize("},
               {{1, 1, 2, 0.5f}, "Tensor[(1, 1, 4, 2), float32]", "resize(%"}};
  for (int i = 0; i < 2; i++) {
    mb b = {{0}, 13};
    input(&b, "x", 1, 4, d);
    init_f32(&b, "scales", cases[i].s, 4);
    node(&b, "up", "Resize", (const char *[]){"x", "", "scales"}, 3, (const char *[]){"y"}, 1, NULL, 0);
    output(&b, "y");
    nimble_arena *arena;
    NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
    nimble_module *m;
    nimble_typing *t;
    NIMBLE_ASSERT_OK(build_and_import(&b, arena, &m, &t));
    char buf[256], *text;
    ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), cases[i].type);
    NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
    ck_assert_msg(strstr(text, cases[i].op) != NULL, "%s", text);
    free(text);
    nimble_arena_destroy(arena);
  }
}
END_TEST

START_TEST(test_graph_inputs_keep_names_and_symbolic_dims) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  mb b = {{0}, 13};
  static const char *const d1[] = {"batch", "", "4"}, *const d2[] = {"batch", "3", "4"};
  input(&b, "input.1", 1, 3, d1);
  input(&b, "other", 1, 3, d2);
  node(&b, "add", "Add", (const char *[]){"input.1", "other"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  nimble_module *m;
  nimble_typing *t;
  NIMBLE_ASSERT_OK(build_and_import(&b, arena, &m, &t));
  const nimble_expr *fn = nimble_module_find_func(m, "main");
  ck_assert_uint_eq(fn->u.func.num_params, 2);
  ck_assert_str_eq(fn->u.func.params[0]->u.var.name, "input.1");
  ck_assert_str_eq(fn->u.func.params[1]->u.var.name, "other");
  char buf[256];
  nimble_type_format(fn->u.func.params[0]->u.var.annotation, buf, sizeof buf);
  ck_assert_str_eq(buf, "Tensor[(batch, ?, 4), float32]");
  /* One variable for one dim_param: batch broadcast with batch stays batch,
   * ? with 3 gives 3. */
  ck_assert_str_eq(import_test_main_result(t, buf, sizeof buf), "Tensor[(batch, 3, 4), float32]");
  char *text;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &text));
  ck_assert_ptr_nonnull(strstr(text, "%\"input.1\""));
  free(text);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_shape_arithmetic_folds_so_reshape_keeps_the_symbolic_dim) {
  /* x[n, 6] -> Reshape(x, Concat(Shape(x)[0:1], [2, 3])) is [n, 2, 3]. */
  char buf[256];
  mb b = {{0}, 13};
  static const char *const d[] = {"n", "6"};
  input(&b, "x", 1, 2, d);
  int64_t z = 0, one = 1, tail[] = {2, 3};
  init_i64(&b, "zero", 1, &z, 1);
  init_i64(&b, "one", 1, &one, 1);
  init_i64(&b, "tail", 1, tail, 2);
  attr a0 = {"axis", 2, 0, NULL, 0, 0, NULL};
  node(&b, "shape", "Shape", (const char *[]){"x"}, 1, (const char *[]){"s"}, 1, NULL, 0);
  node(&b, "head", "Slice", (const char *[]){"s", "zero", "one"}, 3, (const char *[]){"h"}, 1, NULL, 0);
  node(&b, "cat", "Concat", (const char *[]){"h", "tail"}, 2, (const char *[]){"ns"}, 1, &a0, 1);
  node(&b, "rs", "Reshape", (const char *[]){"x", "ns"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(n, 2, 3), float32]");
}
END_TEST

/* A graph attribute (If branches, Loop bodies). The subgraph's buffer is
 * consumed. */
static attr graph_attr(const char *name) {
  attr a = {name, 5, 0, NULL, 0, 0, NULL};
  return a;
}
static void node_with_graphs(mb *b, const char *name, const char *op, const char *const *ins, size_t nin,
                             const char *const *outs, size_t nout, const char *const *gnames, onnx_test_buf *graphs,
                             size_t ng) {
  onnx_test_buf nd = {0};
  for (size_t i = 0; i < nin; i++) pb_str(&nd, 1, ins[i]);
  for (size_t i = 0; i < nout; i++) pb_str(&nd, 2, outs[i]);
  pb_str(&nd, 3, name);
  pb_str(&nd, 4, op);
  for (size_t i = 0; i < ng; i++) {
    onnx_test_buf a = {0};
    attr ga = graph_attr(gnames[i]);
    pb_str(&a, 1, ga.name);
    pb_str(&graphs[i], 2, gnames[i]);
    pb_msg(&a, 6, &graphs[i]);
    pb_int(&a, 20, 5);
    pb_msg(&nd, 5, &a);
    pb_free(&a);
    pb_free(&graphs[i]);
  }
  pb_msg(&b->graph, 1, &nd);
  pb_free(&nd);
}

START_TEST(test_if_branches_of_different_static_shapes_give_any_dims) {
  /* then: Concat(x, x) is [6]; else: x is [3]. */
  char buf[256];
  mb b = {{0}, 13};
  static const char *const d3[] = {"3"};
  input(&b, "x", 1, 1, d3);
  input(&b, "c", 9, 0, NULL);
  mb t = {{0}, 13}, e = {{0}, 13};
  attr a0 = {"axis", 2, 0, NULL, 0, 0, NULL};
  node(&t, "cat", "Concat", (const char *[]){"x", "x"}, 2, (const char *[]){"tx"}, 1, &a0, 1);
  output(&t, "tx");
  node(&e, "id", "Identity", (const char *[]){"x"}, 1, (const char *[]){"ex"}, 1, NULL, 0);
  output(&e, "ex");
  onnx_test_buf gs[2] = {t.graph, e.graph};
  node_with_graphs(&b, "branch", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1,
                   (const char *[]){"then_branch", "else_branch"}, gs, 2);
  output(&b, "y");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(?,), float32]");
}
END_TEST

START_TEST(test_a_loop_carried_value_that_grows_is_widened_to_any) {
  /* v starts as [2] and doubles each iteration (Concat(v, v)); the trip
   * count is an input. The loop's type must not claim [2]: the carried
   * dim is widened to Any. */
  char buf[256];
  mb b = {{0}, 13};
  static const char *const d2[] = {"2"}, *const dq[] = {""};
  input(&b, "v0", 1, 1, d2);
  input(&b, "m", 7, 0, NULL);
  mb body = {{0}, 13};
  value_info(&body.graph, 11, "it", 7, 0, NULL);
  value_info(&body.graph, 11, "cin", 9, 0, NULL);
  value_info(&body.graph, 11, "vin", 1, 1, dq);
  attr a0 = {"axis", 2, 0, NULL, 0, 0, NULL};
  node(&body, "grow", "Concat", (const char *[]){"vin", "vin"}, 2, (const char *[]){"vout"}, 1, &a0, 1);
  node(&body, "keep", "Identity", (const char *[]){"cin"}, 1, (const char *[]){"cout"}, 1, NULL, 0);
  value_info(&body.graph, 12, "cout", 9, 0, NULL);
  output(&body, "vout");
  onnx_test_buf gs[1] = {body.graph};
  node_with_graphs(&b, "loop", "Loop", (const char *[]){"m", ""}, 2 + 0, (const char *[]){"v"}, 1,
                   (const char *[]){"body"}, gs, 1);
  output(&b, "v");
  /* Without v0 among its inputs the body has one input too many. */
  nimble_status_t s = import_status(&b);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(nimble_status_message(s), "node 'loop' (Loop)") != NULL, "%s", nimble_status_message(s));
  nimble_status_free(s);
  mb b2 = {{0}, 13};
  input(&b2, "v0", 1, 1, d2);
  input(&b2, "m", 7, 0, NULL);
  mb body2 = {{0}, 13};
  value_info(&body2.graph, 11, "it", 7, 0, NULL);
  value_info(&body2.graph, 11, "cin", 9, 0, NULL);
  value_info(&body2.graph, 11, "vin", 1, 1, dq);
  node(&body2, "grow", "Concat", (const char *[]){"vin", "vin"}, 2, (const char *[]){"vout"}, 1, &a0, 1);
  node(&body2, "keep", "Identity", (const char *[]){"cin"}, 1, (const char *[]){"cout"}, 1, NULL, 0);
  value_info(&body2.graph, 12, "cout", 9, 0, NULL);
  output(&body2, "vout");
  onnx_test_buf gs2[1] = {body2.graph};
  node_with_graphs(&b2, "loop", "Loop", (const char *[]){"m", "", "v0"}, 3, (const char *[]){"v"}, 1,
                   (const char *[]){"body"}, gs2, 1);
  output(&b2, "v");
  ck_assert_str_eq(result_of(&b2, buf, sizeof buf), "Tensor[(?,), float32]");
}
END_TEST

/* ---- errors ---- */

START_TEST(test_an_unsupported_operator_names_the_node_and_op_type) {
  mb b = {{0}, 13};
  static const char *const d[] = {"3", "3"};
  input(&b, "x", 1, 2, d);
  node(&b, "lp_1", "GlobalLpPool", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_UNIMPLEMENTED,
                      "node 'lp_1' (GlobalLpPool): operator 'GlobalLpPool' is not supported");
}
END_TEST

START_TEST(test_an_unnamed_node_is_named_by_its_index) {
  mb b = {{0}, 13};
  static const char *const d[] = {"3", "3"};
  input(&b, "x", 1, 2, d);
  node(&b, "", "Relu", (const char *[]){"x"}, 1, (const char *[]){"r"}, 1, NULL, 0);
  node(&b, "", "GlobalLpPool", (const char *[]){"r"}, 1, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_UNIMPLEMENTED, "node #1 (GlobalLpPool)");
}
END_TEST

START_TEST(test_a_bad_attribute_value_names_the_node) {
  mb b = {{0}, 13};
  input(&b, "x", 1, 3, D234);
  int64_t perm[] = {0, 5, 1};
  attr a = {"perm", 7, 0, perm, 3, 0, NULL};
  node(&b, "tr", "Transpose", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, &a, 1);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_OUT_OF_RANGE, "node 'tr' (Transpose): transpose: axis 5 is out of range");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  attr ap = {"auto_pad", 3, 0, NULL, 0, 0, "SIDEWAYS"};
  int64_t k[] = {2, 2};
  attr a2[2] = {{"kernel_shape", 7, 0, k, 2, 0, NULL}, ap};
  static const char *const d4[] = {"1", "1", "4", "4"};
  mb b3 = {{0}, 13};
  input(&b3, "x", 1, 4, d4);
  node(&b3, "pool", "MaxPool", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, a2, 2);
  output(&b3, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b3), NIMBLE_INVALID_ARGUMENT, "node 'pool' (MaxPool): attribute 'auto_pad' has unknown value 'SIDEWAYS'");
  pb_free(&b2.graph);
}
END_TEST

/* The attribute getters name the node, and so does the importer's driver
 * for every failure: the node is named once (the status carries it as its
 * subject, not a comparison of message text). */
static size_t count_of(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

START_TEST(test_an_attribute_of_the_wrong_type_names_the_node_once) {
  mb b = {{0}, 13};
  input(&b, "x", 1, 3, D234);
  attr a = {"perm", 2, 1, NULL, 0, 0, NULL}; /* an INT where INTS is wanted */
  node(&b, "tr", "Transpose", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, &a, 1);
  output(&b, "y");
  nimble_status_t s = import_status(&b);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  const char *m = nimble_status_message(s);
  ck_assert_msg(strstr(m, "node 'tr' (Transpose): attribute 'perm' must be ") != NULL, "%s", m);
  ck_assert_msg(count_of(m, "node 'tr'") == 1, "%s", m);
  nimble_status_free(s);
  /* A required attribute that is missing: the same. */
  mb b2 = {{0}, 13};
  static const char *const d[] = {"2", "3"};
  input(&b2, "x", 1, 2, d);
  node(&b2, "cat", "Concat", (const char *[]){"x", "x"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b2, "y");
  s = import_status(&b2);
  ck_assert_ptr_nonnull(s);
  m = nimble_status_message(s);
  ck_assert_msg(strstr(m, "node 'cat' (Concat): ") != NULL, "%s", m);
  ck_assert_msg(count_of(m, "node 'cat'") == 1, "%s", m);
  nimble_status_free(s);
}
END_TEST

START_TEST(test_a_type_error_names_the_node_and_both_types) {
  mb b = {{0}, 13};
  static const char *const d[] = {"5"};
  input(&b, "x", 1, 3, D234);
  input(&b, "z", 1, 1, d);
  node(&b, "sum", "Add", (const char *[]){"x", "z"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_INVALID_ARGUMENT,
                      "node 'sum' (Add): add: cannot broadcast Tensor[(2, 3, 4), float32] with Tensor[(5,), float32]");
}
END_TEST

START_TEST(test_recurrent_weights_of_the_wrong_shape_name_the_input_and_the_expected_shape) {
  /* X [seq 5, batch 2, input 3]; hidden 4: W [D, gates*4, 3], R [D,
   * gates*4, 4], B [D, 2*gates*4]. Each mistake names the input, its
   * shape, the one expected and why (where a later reshape or product
   * had failed with its own shapes). */
  static const char *const X[] = {"5", "2", "3"}, *const W12[] = {"1", "12", "3"}, *const W37[] = {"1", "4", "7"},
                           *const R12[] = {"1", "12", "4"}, *const R4[] = {"1", "4", "4"}, *const B20[] = {"1", "20"},
                           *const W3D[] = {"3", "16", "3"}, *const R3D[] = {"3", "16", "4"};
  static const struct {
    const char *op;
    const char *const *w, *const *r, *const *b;
    int64_t hidden;
    const char *want;
  } kCases[] = {
      {"GRU", W12, R12, NULL, 5, "input 'W' has shape (1, 12, 3), expected (1, 15, 3) for hidden_size 5 and 1 direction(s)"},
      {"GRU", W12, R12, B20, 4, "input 'B' has shape (1, 20), expected (1, 24) for hidden_size 4"},
      {"RNN", W37, R4, NULL, 4, "input 'W' has shape (1, 4, 7), expected (1, 4, 3) for hidden_size 4 and 1 direction(s) (X's input size 3)"},
      {"LSTM", W3D, R3D, NULL, 4, "input 'W' has shape (3, 16, 3), expected (1, 16, 3)"},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    mb b = {{0}, 14};
    input(&b, "X", 1, 3, X);
    input(&b, "W", 1, 3, kCases[i].w);
    input(&b, "R", 1, 3, kCases[i].r);
    if (kCases[i].b) input(&b, "B", 1, 2, kCases[i].b);
    attr a = {"hidden_size", 2, kCases[i].hidden, NULL, 0, 0, NULL};
    node(&b, "rec", kCases[i].op, (const char *[]){"X", "W", "R", "B"}, kCases[i].b ? 4 : 3,
         (const char *[]){"Y", "Y_h"}, 2, &a, 1);
    output(&b, "Y");
    output(&b, "Y_h");
    nimble_status_t s = import_status(&b);
    ck_assert_msg(s != NULL, "%s case %zu imported", kCases[i].op, i);
    ck_assert_msg(strstr(nimble_status_message(s), kCases[i].want) && strstr(nimble_status_message(s), "node 'rec'"),
                  "%s case %zu: %s", kCases[i].op, i, nimble_status_message(s));
    nimble_status_free(s);
  }
}
END_TEST

START_TEST(test_a_dangling_tensor_name_and_a_cycle_are_errors_naming_the_node) {
  mb b = {{0}, 13};
  input(&b, "x", 1, 3, D234);
  node(&b, "r1", "Relu", (const char *[]){"nope"}, 1, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_INVALID_ARGUMENT, "node 'r1' (Relu)");
  mb b2 = {{0}, 13};
  input(&b2, "x", 1, 3, D234);
  node(&b2, "a", "Add", (const char *[]){"x", "q"}, 2, (const char *[]){"p"}, 1, NULL, 0);
  node(&b2, "b", "Relu", (const char *[]){"p"}, 1, (const char *[]){"q"}, 1, NULL, 0);
  output(&b2, "q");
  nimble_status_t s = import_status(&b2);
  ck_assert_ptr_nonnull(s);
  ck_assert_msg(strstr(nimble_status_message(s), "node 'a' (Add)") || strstr(nimble_status_message(s), "node 'b' (Relu)"),
                "%s", nimble_status_message(s));
  nimble_status_free(s);
}
END_TEST

START_TEST(test_an_input_of_unknown_rank_is_an_error_naming_it) {
  mb b = {{0}, 13};
  input(&b, "x", 1, -1, NULL);
  node(&b, "r", "Relu", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_UNIMPLEMENTED, "value 'x' has no shape");
}
END_TEST

START_TEST(test_run_time_axes_give_the_rank_with_unknown_dims) {
  /* Squeeze 13 with axes from a graph input: one axis of three goes, which
   * one is known only at run time. */
  char buf[256];
  mb b = {{0}, 13};
  static const char *const d[] = {"1"};
  input(&b, "x", 1, 3, D1_3_1);
  input(&b, "axes", 7, 1, d);
  node(&b, "sq", "Squeeze", (const char *[]){"x", "axes"}, 2, (const char *[]){"y"}, 1, NULL, 0);
  output(&b, "y");
  ck_assert_str_eq(result_of(&b, buf, sizeof buf), "Tensor[(?, ?), float32]");
}
END_TEST

START_TEST(test_a_static_only_form_on_dynamic_dims_is_an_error_naming_the_node) {
  mb b = {{0}, 13};
  static const char *const d[] = {"1", "1", "h", "w"}, *const wd[] = {"1", "1", "3", "3"};
  input(&b, "x", 1, 4, d);
  input(&b, "w", 1, 4, wd);
  attr a = {"auto_pad", 3, 0, NULL, 0, 0, "SAME_UPPER"};
  node(&b, "conv", "Conv", (const char *[]){"x", "w"}, 2, (const char *[]){"y"}, 1, &a, 1);
  output(&b, "y");
  NIMBLE_ASSERT_ERROR(import_status(&b), NIMBLE_UNIMPLEMENTED,
                      "node 'conv' (Conv): auto_pad SAME_UPPER needs static spatial dims");
}
END_TEST

START_TEST(test_a_missing_file_is_an_error_naming_the_path) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_status_t s = nimble_onnx_import_file("/nonexistent/model.onnx", arena, NULL, &m);
  ck_assert_ptr_nonnull(s);
  ck_assert_ptr_nonnull(strstr(nimble_status_message(s), "/nonexistent/model.onnx"));
  ck_assert_ptr_null(m);
  nimble_status_free(s);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_supports_lists_converted_operators_only) {
  ck_assert(nimble_onnx_import_supports("LSTM"));
  ck_assert(nimble_onnx_import_supports("Loop"));
  ck_assert(nimble_onnx_import_supports("Gemm"));
  ck_assert(!nimble_onnx_import_supports("GlobalLpPool"));
  ck_assert(!nimble_onnx_import_supports("gemm"));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("onnx_import_errors");
  TCase *tc = tcase_create("forms");
  tcase_add_test(tc, test_squeeze_axes_as_attribute_and_as_input_give_the_same_type);
  tcase_add_test(tc, test_reduce_sum_axes_as_attribute_before_opset_13_and_input_after);
  tcase_add_test(tc, test_slice_attributes_before_opset_10_and_inputs_after);
  tcase_add_test(tc, test_split_sizes_as_attribute_and_as_input);
  tcase_add_test(tc, test_unsqueeze_and_clip_in_old_and_new_forms);
  tcase_add_test(tc, test_pad_attributes_before_opset_11_and_inputs_after);
  tcase_add_test(tc, test_resize_scales_at_input_1_in_opset_10_and_sizes_at_input_3_after);
  tcase_add_test(tc, test_resize_with_constant_fractional_scales_keeps_the_scales);
  tcase_add_test(tc, test_graph_inputs_keep_names_and_symbolic_dims);
  tcase_add_test(tc, test_shape_arithmetic_folds_so_reshape_keeps_the_symbolic_dim);
  tcase_add_test(tc, test_run_time_axes_give_the_rank_with_unknown_dims);
  tcase_add_test(tc, test_if_branches_of_different_static_shapes_give_any_dims);
  tcase_add_test(tc, test_a_loop_carried_value_that_grows_is_widened_to_any);
  suite_add_tcase(s, tc);
  TCase *te = tcase_create("errors");
  tcase_add_test(te, test_an_unsupported_operator_names_the_node_and_op_type);
  tcase_add_test(te, test_an_unnamed_node_is_named_by_its_index);
  tcase_add_test(te, test_a_bad_attribute_value_names_the_node);
  tcase_add_test(te, test_an_attribute_of_the_wrong_type_names_the_node_once);
  tcase_add_test(te, test_a_type_error_names_the_node_and_both_types);
  tcase_add_test(te, test_recurrent_weights_of_the_wrong_shape_name_the_input_and_the_expected_shape);
  tcase_add_test(te, test_a_dangling_tensor_name_and_a_cycle_are_errors_naming_the_node);
  tcase_add_test(te, test_an_input_of_unknown_rank_is_an_error_naming_it);
  tcase_add_test(te, test_a_static_only_form_on_dynamic_dims_is_an_error_naming_the_node);
  tcase_add_test(te, test_a_missing_file_is_an_error_naming_the_path);
  tcase_add_test(te, test_supports_lists_converted_operators_only);
  suite_add_tcase(s, te);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
