/* The default pipeline: order, levels, the dump hook, and a whole program
 * from shape code to planned memory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

typedef struct seen {
  char names[512];
  size_t calls;
  int fail_at; /* stop with an error at this call (1-based), 0: never */
} seen;

static nimble_status_t record(void *user, const char *pass, const nimble_module *m) {
  seen *s = user;
  ck_assert_ptr_nonnull(m);
  s->calls++;
  strncat(s->names, pass, sizeof s->names - strlen(s->names) - 2);
  strcat(s->names, " ");
  if ((int)s->calls == s->fail_at)
    return nimble_status_make(NIMBLE_IO_ERROR, "cannot write %s.nir", pass);
  return nimble_ok();
}

START_TEST(test_level_two_runs_every_pass_in_order_and_dumps_after_each) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp_layers.nir");
  nimble_module *m = pt_parse(a, text);
  free(text);
  seen s = {{0}, 0, 0};
  NIMBLE_ASSERT_OK(nimble_passes_run_default(m, 2, true, record, &s));
  ck_assert_str_eq(s.names,
                   "to_anf simplify_shapes fold_constants eliminate_common_subexprs "
                   "eliminate_dead_code update_in_place fuse_ops manifest_memory eliminate_common_subexprs plan_memory "
                   "lift_lambdas ");
  /* 2 storages for the layers, 1 for the sizes computed at run time;
   * 6 layer kernels and 2 size kernels (see test_plan_memory). */
  ck_assert_uint_eq(pt_count_op(m, "alloc_storage"), 3);
  ck_assert_uint_eq(pt_count_op(m, "invoke"), 8);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_level_zero_makes_one_kernel_per_operator_without_planning) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a,
                              "def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32]) {\n"
                              "  relu(dense(%x, %w, transB=1))\n"
                              "}\n");
  ck_assert_uint_eq(pt_count_kernel_ops_outside_primitives(m), 2);
  seen s = {{0}, 0, 0};
  NIMBLE_ASSERT_OK(nimble_passes_run_default(m, 0, true, record, &s));
  ck_assert_str_eq(s.names, "to_anf fuse_ops manifest_memory lift_lambdas ");
  ck_assert_uint_eq(pt_count_kernel_ops_outside_primitives(m), 0);
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.dense"));
  ck_assert_ptr_nonnull(nimble_module_find_func(m, "fused.relu"));
  ck_assert_uint_eq(pt_count_op(m, "invoke"), 2);
  ck_assert_uint_eq(pt_count_op(m, "kill"), 0);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_shape_code_folds_away_before_fusion) {
  /* numel of a (2, 3) tensor is 6 by hand: the reshape's shape folds to a
   * constant (one element: it stays inside the primitive), the reshape
   * becomes a static view and no kernel runs for the shape arithmetic; the
   * unused exp is gone. %y views the parameter %x, which the function does
   * not own: nothing to kill; the result %e is returned: not killed. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a,
                              "def @main(%x: Tensor[(2, 3), float32]) {\n"
                              "  let %s = shape_of(%x);\n"
                              "  let %n = multiply(take(%s, 0, axis=0), take(%s, 1, axis=0));\n"
                              "  let %unused = exp(%x);\n"
                              "  let %y = dyn_reshape(%x, expand_dims(%n, axis=0));\n"
                              "  exp(%y)\n"
                              "}\n");
  NIMBLE_ASSERT_OK(nimble_passes_run_default(m, 2, true, NULL, NULL));
  pt_assert_equal(m,
                  "def @main(%x: Tensor[(2, 3), float32]) {\n"
                  "  let %y = reshape_tensor(%x, const[(1,), int64]{6});\n"
                  "  let %s = alloc_storage(24, alignment=64);\n"
                  "  let %e = alloc_tensor(%s, 0, shape=[6], dtype=\"float32\");\n"
                  "  let %u = invoke(%y, %e, kernel=\"fused.exp\", num_outputs=1);\n"
                  "  %e\n"
                  "}\n"
                  "def @\"fused.dyn_reshape\"(%p0: Tensor[(2, 3), float32]) -> Tensor[(6,), float32] {\n"
                  "  dyn_reshape(%p0, const[(1,), int64]{6})\n"
                  "}\n"
                  "def @\"fused.exp\"(%p0: Tensor[(6,), float32]) -> Tensor[(6,), float32] { exp(%p0) }\n");
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_a_failing_dump_stops_the_pipeline_with_the_pass_named) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a, "def @main(%x: Tensor[(2,), float32]) { exp(%x) }\n");
  seen s = {{0}, 0, 2};
  NIMBLE_ASSERT_ERROR(nimble_passes_run_default(m, 1, false, record, &s), NIMBLE_IO_ERROR,
                      "dump after pass simplify_shapes: cannot write simplify_shapes.nir");
  ck_assert_uint_eq(s.calls, 2);
  NIMBLE_ASSERT_ERROR(nimble_passes_run_default(m, 7, false, NULL, NULL), NIMBLE_INVALID_ARGUMENT,
                      "opt level 7 is not 0 to 3");
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_an_ill_typed_input_is_reported_before_any_pass) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m;
  const char *t = "def @main(%x: Tensor[(2,), float32], %y: Tensor[(3,), float32]) { add(%x, %y) }\n";
  NIMBLE_ASSERT_OK(nimble_nir_parse(a, "bad.nir", t, strlen(t), &m));
  NIMBLE_ASSERT_ERROR(nimble_passes_run_default(m, 2, true, NULL, NULL), NIMBLE_INVALID_ARGUMENT,
                      "before the passes");
  NIMBLE_ASSERT_ERROR(nimble_passes_fuse_ops(m), NIMBLE_INVALID_ARGUMENT, "the input does not type-check");
  /* Without the check before the passes, the first pass that types the
   * module fails, and the pipeline names it. */
  nimble_status_t s = nimble_passes_run_default(m, 0, false, NULL, NULL);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_INVALID_ARGUMENT);
  const char *want = "pass fuse_ops: the input does not type-check: in @main: ";
  ck_assert_msg(strncmp(nimble_status_message(s), want, strlen(want)) == 0, "message: %s",
                nimble_status_message(s));
  nimble_status_free(s);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_the_tree_lstm_program_goes_through_every_pass) {
  /* Recursion, ADTs, match and closures: every pass keeps it well-typed
   * (pt_run checks after each) and fusion makes kernels inside the arms. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  const char *root = getenv("NIMBLE_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/treelstm.nir", root ? root : ".");
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  pt_pass_fn passes[] = {nimble_passes_to_anf,
                         nimble_passes_simplify_shapes,
                         nimble_passes_fold_constants,
                         nimble_passes_eliminate_common_subexprs,
                         nimble_passes_eliminate_dead_code,
                         nimble_passes_fuse_ops,
                         nimble_passes_manifest_memory,
                         nimble_passes_plan_memory,
                         nimble_passes_lift_lambdas};
  nimble_module *m = pt_run(a, text, passes, sizeof passes / sizeof passes[0]);
  ck_assert_uint_gt(pt_count_op(m, "invoke"), 0);
  /* Every kernel call became an invoke with at least one allocated output,
   * and no call of a primitive is left. */
  ck_assert_uint_ge(pt_count_op(m, "alloc_tensor"), pt_count_op(m, "invoke"));
  ck_assert_uint_eq(pt_count_global_calls(m, NIMBLE_PRIMITIVE_PREFIX), 0);
  ck_assert_uint_eq(pt_count_kernel_ops_outside_primitives(m), 0);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_every_sample_program_keeps_its_types_through_every_pass) {
  /* The compiler's own sample programs (control flow, closures, ADTs,
   * dynamic shapes): after each pass the module type-checks and prints to
   * text that parses back to it (pt_run checks both). */
  const char *root = getenv("NIMBLE_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/compiler/programs", root ? root : ".");
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "cannot open %s", dir);
  size_t programs = 0;
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    size_t len = strlen(ent->d_name);
    if (len < 5 || strcmp(ent->d_name + len - 4, ".nir") != 0) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    nimble_arena *a;
    NIMBLE_ASSERT_OK(nimble_arena_create(&a));
    pt_pass_fn passes[] = {nimble_passes_to_anf,
                           nimble_passes_simplify_shapes,
                           nimble_passes_fold_constants,
                           nimble_passes_eliminate_common_subexprs,
                           nimble_passes_eliminate_dead_code,
                           nimble_passes_fuse_ops,
                           nimble_passes_manifest_memory,
                           nimble_passes_plan_memory,
                           nimble_passes_lift_lambdas};
    nimble_module *m = pt_run(a, text, passes, sizeof passes / sizeof passes[0]);
    ck_assert_msg(pt_count_global_calls(m, NIMBLE_PRIMITIVE_PREFIX) == 0, "%s: a primitive call is left",
                  ent->d_name);
    /* Outside primitives only VM-level calls remain. */
    ck_assert_msg(pt_count_kernel_ops_outside_primitives(m) == 0, "%s: a kernel operator is left",
                  ent->d_name);
    nimble_arena_destroy(a);
    programs++;
  }
  closedir(d);
  ck_assert_uint_ge(programs, 7);
}
END_TEST

/* A chain of `count` calls of `op` on a (8,) float32 input. */
static char *chain_program(const char *op, size_t count) {
  size_t cap = 64 + count * 64;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  size_t len = (size_t)snprintf(text, cap, "def @main(%%h0: Tensor[(8,), float32]) {\n");
  for (size_t i = 1; i <= count; i++)
    len += (size_t)snprintf(text + len, cap - len, "  let %%h%zu = %s(%%h%zu);\n", i, op, i - 1);
  snprintf(text + len, cap - len, "  %%h%zu\n}\n", count);
  return text;
}

START_TEST(test_long_chains_cost_no_stack_and_need_two_storages) {
  /* 3000 exps: groups of at most 32 calls, so 93 groups of 32 and one of
   * 24; 1500 softmaxes (opaque): one kernel each. Either way the outputs
   * of one width need 2 storages. */
  static const struct {
    const char *op;
    size_t count, kernels;
  } cases[] = {{"exp", 3000, 94}, {"softmax", 1500, 1500}};
  for (size_t k = 0; k < 2; k++) {
    nimble_arena *a;
    NIMBLE_ASSERT_OK(nimble_arena_create(&a));
    char *text = chain_program(cases[k].op, cases[k].count);
    nimble_module *m = pt_parse(a, text);
    free(text);
    NIMBLE_ASSERT_OK(nimble_passes_run_default(m, 2, true, NULL, NULL));
    ck_assert_uint_eq(nimble_module_num_funcs(m), cases[k].kernels + 1);
    ck_assert_uint_eq(pt_count_op(m, "invoke"), cases[k].kernels);
    ck_assert_uint_eq(pt_count_op(m, "alloc_storage"), 2);
    ck_assert_uint_eq(pt_count_op(m, cases[k].op), cases[k].count);
    nimble_arena_destroy(a);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("pipeline");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_level_two_runs_every_pass_in_order_and_dumps_after_each);
  tcase_add_test(tc, test_level_zero_makes_one_kernel_per_operator_without_planning);
  tcase_add_test(tc, test_shape_code_folds_away_before_fusion);
  tcase_add_test(tc, test_a_failing_dump_stops_the_pipeline_with_the_pass_named);
  tcase_add_test(tc, test_an_ill_typed_input_is_reported_before_any_pass);
  tcase_add_test(tc, test_the_tree_lstm_program_goes_through_every_pass);
  tcase_add_test(tc, test_every_sample_program_keeps_its_types_through_every_pass);
  tcase_add_test(tc, test_long_chains_cost_no_stack_and_need_two_storages);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
