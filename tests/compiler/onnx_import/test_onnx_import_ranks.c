/* The importer on If nodes whose branches give different ranks (models
 * built here with the ONNX model builder): the If's result is a tensor of
 * unknown rank, nodes that read it are converted once per rank and chosen
 * by the rank at run time, nodes that take only one of the ranks get a
 * run-time check instead, and what cannot work is an error naming the node.
 * The expected types are worked out by hand in each test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_test_util.h"
#include "nimble_test.h"
#include "onnx_model_builder.h"

/* The result of an import: @main's result type, the module text and the
 * status; the module text is malloc'ed. */
typedef struct imported {
  nimble_status_t status; /* owned */
  char type[512];
  char *text;
} imported;

static imported import_graph(omb_graph *g, int64_t opset) {
  imported r;
  memset(&r, 0, sizeof r);
  onnx_test_buf bytes = omb_model(g, opset);
  nimble_onnx_model *om;
  r.status = nimble_onnx_model_load_memory(bytes.data, bytes.size, "test.onnx", &om);
  pb_free(&bytes);
  if (r.status) return r;
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m;
  nimble_typing *t;
  r.status = nimble_onnx_import_model(arena, om, NULL, &m);
  nimble_onnx_model_destroy(om);
  if (!r.status) NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &r.text));
  if (!r.status) r.status = nimble_typing_infer_module(m, &t);
  if (!r.status) import_test_main_result(t, r.type, sizeof r.type);
  nimble_arena_destroy(arena);
  return r;
}

static void imported_free(imported *r) {
  nimble_status_free(r->status);
  free(r->text);
}

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static const char *const DX[] = {"N", "4", "T"};

/* x: [N, 4, T]; y = If(Greater(s, 0), then: ReduceSum(x, axes=[2],
 * keepdims=0) -> [N, 4], else: Relu(x) -> [N, 4, T]). */
static void squeeze_like_if(omb_graph *g) {
  omb_input(g, "x", OMB_FLOAT, 3, DX);
  omb_input(g, "s", OMB_FLOAT, 0, NULL);
  float zero = 0;
  omb_init_f32(g, "zero", 0, NULL, &zero, 1);
  int64_t ax2 = 2, one = 1;
  omb_graph t = {{0}}, e = {{0}};
  omb_init_i64(&t, "ax2", 1, &one, &ax2, 1);
  omb_attr kd = omb_a_int("keepdims", 0);
  omb_node(&t, "rs", "ReduceSum", (const char *[]){"x", "ax2"}, 2, (const char *[]){"t_out"}, 1, &kd, 1);
  omb_output(&t, "t_out", OMB_FLOAT, -1, NULL);
  omb_node(&e, "relu", "Relu", (const char *[]){"x"}, 1, (const char *[]){"e_out"}, 1, NULL, 0);
  omb_output(&e, "e_out", OMB_FLOAT, -1, NULL);
  omb_node(g, "gt", "Greater", (const char *[]){"s", "zero"}, 2, (const char *[]){"c"}, 1, NULL, 0);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(g, "branch", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
}

START_TEST(test_if_branches_of_different_ranks_give_an_output_of_any_rank_whatever_the_declaration) {
  /* The model declares y as [N, 4, T] (exporters declare the then-branch's
   * rank); ONNX Runtime returns whatever the branch taken gives, and so
   * does the entry: an output of unknown rank, no check. */
  omb_graph g = {{0}};
  squeeze_like_if(&g);
  omb_output(&g, "y", OMB_FLOAT, 3, DX);
  imported r = import_graph(&g, 13);
  NIMBLE_ASSERT_OK(r.status);
  r.status = NULL;
  ck_assert_ptr_nonnull(strstr(r.text, "let %y = if (%c)"));
  ck_assert_ptr_null(strstr(r.text, "check_rank"));
  ck_assert_str_eq(r.type, "Tensor[*, float32]");
  imported_free(&r);
  /* The same without a declared shape. */
  omb_graph g2 = {{0}};
  squeeze_like_if(&g2);
  omb_output(&g2, "y", OMB_FLOAT, -1, NULL);
  r = import_graph(&g2, 13);
  NIMBLE_ASSERT_OK(r.status);
  r.status = NULL;
  ck_assert_str_eq(r.type, "Tensor[*, float32]");
  imported_free(&r);
}
END_TEST

START_TEST(test_nodes_that_take_either_rank_are_converted_per_rank_and_join) {
  /* ReduceSum over all axes: a scalar for both ranks; Flatten(axis=1): rank
   * 2 for both ([N, 4] and [N, 4T]); Shape: [2] or [3], so [?]; Neg keeps
   * the rank, so it stays unknown until ReduceMax makes a scalar. */
  omb_graph g = {{0}};
  squeeze_like_if(&g);
  omb_attr kd = omb_a_int("keepdims", 0), ax1 = omb_a_int("axis", 1);
  omb_node(&g, "sum", "ReduceSum", (const char *[]){"y"}, 1, (const char *[]){"total"}, 1, &kd, 1);
  omb_node(&g, "flat", "Flatten", (const char *[]){"y"}, 1, (const char *[]){"flat"}, 1, &ax1, 1);
  omb_node(&g, "shape", "Shape", (const char *[]){"y"}, 1, (const char *[]){"shape"}, 1, NULL, 0);
  omb_node(&g, "neg", "Neg", (const char *[]){"y"}, 1, (const char *[]){"neg"}, 1, NULL, 0);
  omb_node(&g, "max", "ReduceMax", (const char *[]){"neg"}, 1, (const char *[]){"negmax"}, 1, &kd, 1);
  omb_output(&g, "total", OMB_FLOAT, -1, NULL);
  omb_output(&g, "flat", OMB_FLOAT, -1, NULL);
  omb_output(&g, "shape", OMB_INT64, -1, NULL);
  omb_output(&g, "negmax", OMB_FLOAT, -1, NULL);
  imported r = import_graph(&g, 13);
  NIMBLE_ASSERT_OK(r.status);
  r.status = NULL;
  ck_assert_str_eq(r.type,
                   "(Tensor[(), float32], Tensor[(?, ?), float32], Tensor[(?,), int64], Tensor[(), float32])");
  /* Five nodes read a value of rank 2 or 3: each is converted twice, the
   * conversions chosen by the rank (one `if` each). */
  ck_assert_int_eq(count(r.text, ", rank=2, what="), 5);
  ck_assert_int_eq(count(r.text, ", rank=3, what="), 5);
  ck_assert_ptr_nonnull(strstr(r.text, "what=\"input 0 ('y') of node 'flat' (Flatten)\""));
  imported_free(&r);
}
END_TEST

START_TEST(test_a_node_that_takes_one_of_the_ranks_gets_only_the_run_time_check) {
  /* Transpose with perm [0, 2, 1] takes rank 3 only: no choice by rank,
   * one check that y has rank 3. */
  omb_graph g = {{0}};
  squeeze_like_if(&g);
  int64_t perm[] = {0, 2, 1};
  omb_attr p = omb_a_ints("perm", perm, 3);
  omb_node(&g, "tr", "Transpose", (const char *[]){"y"}, 1, (const char *[]){"yt"}, 1, &p, 1);
  omb_output(&g, "yt", OMB_FLOAT, -1, NULL);
  imported r = import_graph(&g, 13);
  NIMBLE_ASSERT_OK(r.status);
  r.status = NULL;
  ck_assert_str_eq(r.type, "Tensor[(?, ?, 4), float32]");
  ck_assert_int_eq(count(r.text, "check_rank("), 1);
  ck_assert_ptr_nonnull(strstr(r.text, "rank=3, what=\"input 0 ('y') of node 'tr' (Transpose)\""));
  ck_assert_int_eq(count(r.text, "if ("), 1); /* the If itself */
  imported_free(&r);
}
END_TEST

START_TEST(test_a_node_that_takes_none_of_the_ranks_is_an_error_naming_it_and_the_ranks) {
  omb_graph g = {{0}};
  squeeze_like_if(&g);
  int64_t perm[] = {0, 1, 2, 3};
  omb_attr p = omb_a_ints("perm", perm, 4);
  omb_node(&g, "tr4", "Transpose", (const char *[]){"y"}, 1, (const char *[]){"yt"}, 1, &p, 1);
  omb_output(&g, "yt", OMB_FLOAT, -1, NULL);
  imported r = import_graph(&g, 13);
  ck_assert_ptr_nonnull(r.status);
  const char *msg = nimble_status_message(r.status);
  ck_assert_msg(strstr(msg, "input 0 ('y') of node 'tr4' (Transpose) may have rank 2 or 3 at run time") != NULL,
                "message: %s", msg);
  ck_assert_msg(strstr(msg, "with rank 2") != NULL, "message: %s", msg);
  imported_free(&r);
}
END_TEST

START_TEST(test_branches_of_different_dtypes_are_an_error_naming_the_output) {
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "c", OMB_BOOL, 0, NULL);
  float one = 1;
  int64_t ione = 1;
  omb_init_f32(&t, "f", 0, NULL, &one, 1);
  omb_node(&t, "id", "Identity", (const char *[]){"f"}, 1, (const char *[]){"t_out"}, 1, NULL, 0);
  omb_output(&t, "t_out", OMB_FLOAT, -1, NULL);
  omb_init_i64(&e, "i", 0, NULL, &ione, 1);
  omb_node(&e, "id", "Identity", (const char *[]){"i"}, 1, (const char *[]){"e_out"}, 1, NULL, 0);
  omb_output(&e, "e_out", OMB_INT64, -1, NULL);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "pick", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_output(&g, "y", OMB_FLOAT, -1, NULL);
  imported r = import_graph(&g, 13);
  NIMBLE_ASSERT_ERROR(r.status, NIMBLE_INVALID_ARGUMENT,
                      "output 0 differs between then_branch and else_branch: one is float32, the other int64");
  r.status = NULL;
  imported_free(&r);
}
END_TEST

START_TEST(test_an_lstm_after_a_squeeze_if_takes_the_rank_3_input_it_needs) {
  /* PyTorch's x.squeeze(-1) in a model with an LSTM (voice activity
   * detectors): If(Shape(x)[2] == 1, Squeeze(x, [2]), x), then Unsqueeze(0)
   * gives rank 3 or 4, and the LSTM takes rank 3 only. */
  enum { F = 4, H = 3 };
  omb_graph g = {{0}}, t = {{0}}, e = {{0}};
  omb_input(&g, "x", OMB_FLOAT, 3, (const char *[]){"N", "4", "T"});
  static float w[4 * H * F], rr[4 * H * H], b[8 * H];
  for (size_t i = 0; i < sizeof w / sizeof *w; i++) w[i] = 0.01f * (float)i;
  for (size_t i = 0; i < sizeof rr / sizeof *rr; i++) rr[i] = -0.01f * (float)i;
  int64_t wd[] = {1, 4 * H, F}, rd[] = {1, 4 * H, H}, bd[] = {1, 8 * H}, one = 1, two = 2, zero = 0;
  omb_init_f32(&g, "W", 3, wd, w, sizeof w / sizeof *w);
  omb_init_f32(&g, "R", 3, rd, rr, sizeof rr / sizeof *rr);
  omb_init_f32(&g, "B", 2, bd, b, sizeof b / sizeof *b);
  omb_init_i64(&g, "i2", 0, NULL, &two, 1);
  omb_init_i64(&g, "one", 0, NULL, &one, 1);
  omb_init_i64(&g, "ax0", 1, &one, &zero, 1);
  omb_init_i64(&t, "ax2", 1, &one, &two, 1);
  omb_node(&t, "sq", "Squeeze", (const char *[]){"x", "ax2"}, 2, (const char *[]){"sq"}, 1, NULL, 0);
  omb_output(&t, "sq", OMB_FLOAT, -1, NULL);
  omb_node(&e, "id", "Identity", (const char *[]){"x"}, 1, (const char *[]){"id"}, 1, NULL, 0);
  omb_output(&e, "id", OMB_FLOAT, -1, NULL);
  omb_node(&g, "shape", "Shape", (const char *[]){"x"}, 1, (const char *[]){"shp"}, 1, NULL, 0);
  omb_attr a0 = omb_a_int("axis", 0);
  omb_node(&g, "last", "Gather", (const char *[]){"shp", "i2"}, 2, (const char *[]){"last"}, 1, &a0, 1);
  omb_node(&g, "is1", "Equal", (const char *[]){"last", "one"}, 2, (const char *[]){"c"}, 1, NULL, 0);
  omb_attr br[2] = {omb_a_graph("then_branch", &t), omb_a_graph("else_branch", &e)};
  omb_node(&g, "squeeze_if", "If", (const char *[]){"c"}, 1, (const char *[]){"y"}, 1, br, 2);
  omb_node(&g, "unsq", "Unsqueeze", (const char *[]){"y", "ax0"}, 2, (const char *[]){"u"}, 1, NULL, 0);
  omb_attr hs = omb_a_int("hidden_size", H);
  omb_node(&g, "lstm", "LSTM", (const char *[]){"u", "W", "R", "B"}, 4, (const char *[]){"Y", "Yh"}, 2, &hs, 1);
  omb_output(&g, "Yh", OMB_FLOAT, -1, NULL);
  imported r = import_graph(&g, 13);
  NIMBLE_ASSERT_OK(r.status);
  r.status = NULL;
  /* Y_h is [num_directions, batch, hidden]; the batch is y's first dim. */
  ck_assert_str_eq(r.type, "Tensor[(1, ?, 3), float32]");
  ck_assert_ptr_nonnull(strstr(r.text, "rank=3, what=\"input 0 ('u') of node 'lstm' (LSTM)\""));
  ck_assert_ptr_null(strstr(r.text, "rank=4, what=\"input 0 ('u') of node 'lstm' (LSTM)\""));
  /* The Squeeze in then_branch proves T = 1 there only: the If's condition
   * (T == 1) was not folded to true. */
  ck_assert_ptr_nonnull(strstr(r.text, "else {"));
  imported_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("onnx_import_ranks");
  TCase *tc = tcase_create("ranks");
  tcase_add_test(tc, test_if_branches_of_different_ranks_give_an_output_of_any_rank_whatever_the_declaration);
  tcase_add_test(tc, test_nodes_that_take_either_rank_are_converted_per_rank_and_join);
  tcase_add_test(tc, test_a_node_that_takes_one_of_the_ranks_gets_only_the_run_time_check);
  tcase_add_test(tc, test_a_node_that_takes_none_of_the_ranks_is_an_error_naming_it_and_the_ranks);
  tcase_add_test(tc, test_branches_of_different_dtypes_are_an_error_naming_the_output);
  tcase_add_test(tc, test_an_lstm_after_a_squeeze_if_takes_the_rank_3_input_it_needs);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
