/* Memory planning: storage reuse by liveness and kills at last use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "passes_test_util.h"

#define EXP(name, shape)                                                                         \
  "def @\"" name "\"(%p0: Tensor[" shape ", float32]) -> Tensor[" shape ", float32] { exp(%p0) }\n"

START_TEST(test_a_three_layer_chain_reuses_the_first_storage_for_the_third) {
  /* t1 dies at the second invoke, so the third output takes its storage;
   * each tensor is killed right after its last use, and storage %s1 after
   * its last tenant t3... which is returned: so only %s1's first tenant
   * and t2 are killed, and %s2 once t2 is dead. */
  const char *prims = EXP("fused.a", "(4, 64)") EXP("fused.b", "(4, 64)") EXP("fused.c", "(4, 64)");
  char in[4096], want[4096];
  snprintf(in, sizeof in,
           "def @main(%%x: Tensor[(4, 64), float32]) {\n"
           "  let %%s1 = alloc_storage(1024);\n"
           "  let %%t1 = alloc_tensor(%%s1, 0, shape=[4, 64]);\n"
           "  let %%u1 = invoke(%%x, %%t1, kernel=\"fused.a\");\n"
           "  let %%s2 = alloc_storage(1024);\n"
           "  let %%t2 = alloc_tensor(%%s2, 0, shape=[4, 64]);\n"
           "  let %%u2 = invoke(%%t1, %%t2, kernel=\"fused.b\");\n"
           "  let %%s3 = alloc_storage(1024);\n"
           "  let %%t3 = alloc_tensor(%%s3, 0, shape=[4, 64]);\n"
           "  let %%u3 = invoke(%%t2, %%t3, kernel=\"fused.c\");\n"
           "  %%t3\n"
           "}\n%s",
           prims);
  snprintf(want, sizeof want,
           "def @main(%%x: Tensor[(4, 64), float32]) {\n"
           "  let %%s1 = alloc_storage(1024);\n"
           "  let %%t1 = alloc_tensor(%%s1, 0, shape=[4, 64]);\n"
           "  let %%u1 = invoke(%%x, %%t1, kernel=\"fused.a\");\n"
           "  let %%s2 = alloc_storage(1024);\n"
           "  let %%t2 = alloc_tensor(%%s2, 0, shape=[4, 64]);\n"
           "  let %%u2 = invoke(%%t1, %%t2, kernel=\"fused.b\");\n"
           "  let %%k1 = kill(%%t1);\n"
           "  let %%t3 = alloc_tensor(%%s1, 0, shape=[4, 64]);\n"
           "  let %%u3 = invoke(%%t2, %%t3, kernel=\"fused.c\");\n"
           "  let %%k2 = kill(%%t2);\n"
           "  let %%k3 = kill(%%s2);\n"
           "  %%t3\n"
           "}\n%s",
           prims);
  pt_expect(nimble_passes_plan_memory, in, want);
}
END_TEST

static nimble_memory_plan_stats_t plan_pipeline(const char *text, nimble_module **out, nimble_arena *a) {
  pt_pass_fn passes[] = {nimble_passes_fuse_ops, nimble_passes_manifest_memory};
  nimble_module *m = pt_run(a, text, passes, 2);
  nimble_memory_plan_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_plan_memory_stats(m, &st));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  *out = m;
  return st;
}

START_TEST(test_an_mlp_of_six_layers_needs_two_storages_with_symbolic_batch) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp_layers.nir");
  nimble_module *m;
  nimble_memory_plan_stats_t st = plan_pipeline(text, &m, a);
  /* 6 layer outputs, and 6 int64 scalars holding their sizes in bytes
   * (computed at run time from the symbolic batch). By hand: layer 3
   * takes layer 1's storage, 4 takes 2's, and so on: 2 storages for the
   * layers; the size computations of the 4 dropped storages go too; the 2
   * size scalars left share one 8-byte storage. */
  ck_assert_uint_eq(st.storages_before, 12);
  ck_assert_uint_eq(st.storages_after, 3);
  ck_assert_uint_eq(pt_count_op(m, "alloc_storage"), 3);
  ck_assert_uint_eq(pt_count_op(m, "alloc_tensor"), 8);
  ck_assert_uint_eq(pt_count_op(m, "invoke"), 8);
  ck_assert_uint_eq(pt_count_op(m, "invoke_shape_func"), 6);
  /* Killed: h1..h5 and the layers' first storage (6), the two size
   * scalars and their storage (3). h6 is returned. */
  ck_assert_uint_eq(pt_count_op(m, "kill"), 9);
  ck_assert_uint_eq(st.kills, 9);
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_any_dims_prove_nothing_so_nothing_is_reused) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp_layers.nir");
  char *p = strstr(text, "(n, 64)");
  ck_assert_ptr_nonnull(p);
  memcpy(p, "(?, 64)", 7);
  nimble_module *m;
  nimble_memory_plan_stats_t st = plan_pipeline(text, &m, a);
  /* 6 outputs and 6 size scalars: the outputs keep their own storages,
   * the size scalars share one. */
  ck_assert_uint_eq(st.storages_before, 12);
  ck_assert_uint_eq(st.storages_after, 7);
  /* Still killed early: h1..h5 and their 5 storages, the 6 scalars and
   * their storage. */
  ck_assert_uint_eq(st.kills, 17);
  free(text);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_a_static_mlp_needs_two_storages_and_a_larger_one_holds_a_smaller) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp_layers.nir");
  char *p = strstr(text, "(n, 64)");
  memcpy(p, "(4, 64)", 7);
  nimble_module *m;
  nimble_memory_plan_stats_t st = plan_pipeline(text, &m, a);
  ck_assert_uint_eq(st.storages_after, 2);
  free(text);
  /* (4, 64) = 1024 bytes, then (4, 32) = 512, then (4, 32) reuses the
   * first 1024-byte storage; (4, 128) = 2048 fits neither: a new one. */
  st = plan_pipeline(
      "def @main(%x: Tensor[(4, 64), float32], %w1: Tensor[(32, 64), float32],\n"
      "          %w2: Tensor[(32, 32), float32], %w3: Tensor[(128, 32), float32]) {\n"
      "  let %a = exp(%x);\n"
      "  let %b = dense(%a, %w1, transB=1);\n"
      "  let %c = dense(%b, %w2, transB=1);\n"
      "  let %d = dense(%c, %w3, transB=1);\n"
      "  %d\n"
      "}\n",
      &m, a);
  ck_assert_uint_eq(st.storages_before, 4);
  ck_assert_uint_eq(st.storages_after, 3);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_escaping_tensors_and_views_keep_their_storage) {
  /* t1 is returned in a tuple (pinned): t3 cannot take its storage. A view
   * of t2 used after the third invoke keeps t2 alive through it. */
  const char *prims = EXP("fused.a", "(4,)") EXP("fused.b", "(4,)") EXP("fused.c", "(4,)");
  char in[4096];
  snprintf(in, sizeof in,
           "def @main(%%x: Tensor[(4,), float32]) {\n"
           "  let %%s1 = alloc_storage(16);\n"
           "  let %%t1 = alloc_tensor(%%s1, 0, shape=[4]);\n"
           "  let %%u1 = invoke(%%x, %%t1, kernel=\"fused.a\");\n"
           "  let %%s2 = alloc_storage(16);\n"
           "  let %%t2 = alloc_tensor(%%s2, 0, shape=[4]);\n"
           "  let %%u2 = invoke(%%t1, %%t2, kernel=\"fused.b\");\n"
           "  let %%v = reshape_tensor(%%t2, const[(2,), int64]{2, 2});\n"
           "  let %%s3 = alloc_storage(16);\n"
           "  let %%t3 = alloc_tensor(%%s3, 0, shape=[4]);\n"
           "  let %%u3 = invoke(%%x, %%t3, kernel=\"fused.c\");\n"
           "  let %%s4 = alloc_storage(16);\n"
           "  let %%t4 = alloc_tensor(%%s4, 0, shape=[4]);\n"
           "  let %%u4 = invoke(%%t3, %%t4, kernel=\"fused.c\");\n"
           "  let %%y = add(%%v, 1.0);\n"
           "  (%%t1, %%t4, %%y)\n"
           "}\n%s",
           prims);
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a, in);
  nimble_memory_plan_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_plan_memory_stats(m, &st));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  /* t1 pinned, t2 alive (through %v) until the add: only t4 can reuse t3's
   * storage? No: t3 is still read by the fourth invoke. So nothing is
   * reused: 4 storages. Kills: t3 and s3 after the fourth invoke (k0, k1);
   * v, t2 and s2 after the add. */
  ck_assert_uint_eq(st.storages_after, 4);
  ck_assert_uint_eq(st.kills, 5);
  char *s;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &s));
  ck_assert_ptr_nonnull(strstr(s, "let %y = add(%v, 1.0);\n  let %k2 = kill(%v);\n  let %k3 = kill(%t2);\n"
                                  "  let %k4 = kill(%s2);\n"));
  free(s);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_an_if_condition_is_only_read_but_a_branch_result_escapes) {
  /* %c is the condition: killed (with its storage) right after the if;
   * %t flows into %y through the then-branch: pinned, never killed, and
   * its 16-byte storage is not handed to %w. */
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  nimble_module *m = pt_parse(a,
                              "def @main(%x: Tensor[(4,), float32]) {\n"
                              "  let %s1 = alloc_storage(1);\n"
                              "  let %c = alloc_tensor(%s1, 0, dtype=\"bool\");\n"
                              "  let %u1 = invoke(%x, %c, kernel=\"fused.pos\");\n"
                              "  let %s2 = alloc_storage(16);\n"
                              "  let %t = alloc_tensor(%s2, 0, shape=[4]);\n"
                              "  let %u2 = invoke(%x, %t, kernel=\"fused.a\");\n"
                              "  let %y = if (%c) { %t } else { %x };\n"
                              "  let %s3 = alloc_storage(16);\n"
                              "  let %w = alloc_tensor(%s3, 0, shape=[4]);\n"
                              "  let %u3 = invoke(%y, %w, kernel=\"fused.a\");\n"
                              "  %w\n"
                              "}\n"
                              "def @\"fused.pos\"(%p0: Tensor[(4,), float32]) -> Tensor[(), bool] {\n"
                              "  greater(sum(%p0), 0.0)\n"
                              "}\n" EXP("fused.a", "(4,)"));
  nimble_memory_plan_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_plan_memory_stats(m, &st));
  nimble_typing *t;
  NIMBLE_ASSERT_OK(nimble_typing_infer_module(m, &t));
  ck_assert_uint_eq(st.storages_after, 3);
  ck_assert_uint_eq(st.kills, 2);
  char *s;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &s));
  ck_assert_ptr_nonnull(strstr(s, "  };\n  let %k0 = kill(%c);\n  let %k1 = kill(%s1);\n"));
  free(s);
  nimble_arena_destroy(a);
}
END_TEST

START_TEST(test_planning_twice_changes_nothing_more) {
  nimble_arena *a;
  NIMBLE_ASSERT_OK(nimble_arena_create(&a));
  char *text = pt_load("mlp_layers.nir");
  nimble_module *m;
  plan_pipeline(text, &m, a);
  free(text);
  char *once, *twice;
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &once));
  nimble_memory_plan_stats_t st;
  NIMBLE_ASSERT_OK(nimble_passes_plan_memory_stats(m, &st));
  NIMBLE_ASSERT_OK(nimble_ir_print_module(m, &twice));
  ck_assert_str_eq(once, twice);
  ck_assert_uint_eq(st.storages_before, 3);
  ck_assert_uint_eq(st.storages_after, 3);
  ck_assert_uint_eq(st.kills, 0);
  free(once);
  free(twice);
  nimble_arena_destroy(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan_memory");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_a_three_layer_chain_reuses_the_first_storage_for_the_third);
  tcase_add_test(tc, test_an_mlp_of_six_layers_needs_two_storages_with_symbolic_batch);
  tcase_add_test(tc, test_any_dims_prove_nothing_so_nothing_is_reused);
  tcase_add_test(tc, test_a_static_mlp_needs_two_storages_and_a_larger_one_holds_a_smaller);
  tcase_add_test(tc, test_escaping_tensors_and_views_keep_their_storage);
  tcase_add_test(tc, test_planning_twice_changes_nothing_more);
  tcase_add_test(tc, test_an_if_condition_is_only_read_but_a_branch_result_escapes);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
