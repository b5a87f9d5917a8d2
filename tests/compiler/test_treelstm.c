/* The reference Tree-LSTM (examples/treelstm.nir) parses and type-checks,
 * and the inferred types match the model's sizes (treelstm.json: hidden
 * 128, leaf weight [384, 128], node weight [640, 256]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler_test_util.h"
#include "nimble_test.h"

static nimble_arena *arena;
static nimble_module *module;
static nimble_typing *typing;

static void setup(void) {
  char *path = test_source_path("examples/treelstm.nir");
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  NIMBLE_ASSERT_OK(nimble_nir_parse_file(arena, path, &module));
  free(path);
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(module, &typing));
}

static void teardown(void) { nimble_arena_destroy(arena); }

START_TEST(test_treelstm_main_returns_the_root_state) {
  char buf[512];
  /* @main has no annotated result: inference derives it from the cells. */
  ck_assert_str_eq(test_global_type(typing, "main", buf, sizeof buf),
                   "fn(Tree[Tensor[(), int64]], Tensor[(1000, 128), float32], Tensor[(384, 128), float32], "
                   "Tensor[(384,), float32], Tensor[(640, 256), float32], Tensor[(640,), float32]) -> "
                   "(Tensor[(128,), float32], Tensor[(128,), float32])");
}
END_TEST

START_TEST(test_treelstm_cells_have_the_gate_sizes_of_the_model) {
  char buf[512];
  const nimble_expr *leaf = nimble_module_find_func(module, "leaf_cell");
  ck_assert_ptr_nonnull(leaf);
  /* let %gates = add(matmul(%w, %x), %b): 384 = 3 gates of 128. */
  const nimble_expr *gates = leaf->u.func.body;
  ck_assert_int_eq(gates->kind, NIMBLE_EXPR_LET);
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(typing, gates->u.let.var), buf, sizeof buf),
                   "Tensor[(384,), float32]");
  const nimble_expr *iou = gates->u.let.body;
  ck_assert_str_eq(nimble_type_format(nimble_typing_type_of(typing, iou->u.let.var), buf, sizeof buf),
                   "(Tensor[(128,), float32], Tensor[(128,), float32], Tensor[(128,), float32])");
  ck_assert_str_eq(test_global_type(typing, "node_cell", buf, sizeof buf),
                   "fn((Tensor[(128,), float32], Tensor[(128,), float32]), (Tensor[(128,), float32], "
                   "Tensor[(128,), float32]), Tensor[(640, 256), float32], Tensor[(640,), float32]) -> "
                   "(Tensor[(128,), float32], Tensor[(128,), float32])");
  ck_assert_str_eq(test_global_type(typing, "embed", buf, sizeof buf),
                   "fn(Tree[Tensor[(), int64]], Tensor[(1000, 128), float32]) -> Tree[Tensor[(128,), float32]]");
}
END_TEST

START_TEST(test_treelstm_with_a_wrong_weight_size_is_a_type_error) {
  /* The node weight of the model is [640, 256]; [640, 255] cannot multiply
   * the concatenated children's states of 256. */
  char *path = test_source_path("examples/treelstm.nir");
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  char *text = calloc(1, 1 << 16);
  size_t n = fread(text, 1, (1 << 16) - 1, f);
  fclose(f);
  free(path);
  ck_assert_uint_gt(n, 100);
  char *at = strstr(text, "%w: Tensor[(640, 256), float32]");
  ck_assert_ptr_nonnull(at);
  memcpy(strstr(at, "256"), "255", 3);
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  NIMBLE_ASSERT_ERROR(test_check_status(a, text), NIMBLE_INVALID_ARGUMENT,
                      "in call 'matmul' at main.nir:");
  nimble_arena_destroy(a);
  free(text);
}
END_TEST

int main(void) {
  Suite *s = suite_create("treelstm");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_treelstm_main_returns_the_root_state);
  tcase_add_test(tc, test_treelstm_cells_have_the_gate_sizes_of_the_model);
  tcase_add_test(tc, test_treelstm_with_a_wrong_weight_size_is_a_type_error);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
