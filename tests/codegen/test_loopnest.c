/* The loop-nest IR: construction errors, validation, schedules and the
 * text form. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nimble_test.h"

#include "nimble/codegen.h"
#include "op_builders.h"
#include "nimble/loopnest.h"

/* y[i] = x[i] * 2 over a rank-1 tensor. */
static nimble_ln_kernel *scale_kernel(nimble_ln_arena *A, nimble_ln_stmt **loop_out) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "scale");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *ir = nimble_ln_ref(A, i);
  nimble_ln_stmt *store = nimble_ln_store(
      A, y, ir, nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, x, ir), nimble_ln_f32(A, 2.0)));
  *loop_out = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0, store);
  return k;
}

static char *print(const nimble_ln_kernel *k) {
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  return text;
}

START_TEST(test_split_prints_vector_loop_and_tail_marked_for_the_variant) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_stmt *loop;
  nimble_ln_kernel *k = scale_kernel(A, &loop);
  nimble_ln_kernel_set_body(k, nimble_ln_split(A, loop, 4, NIMBLE_LN_VECTORIZED, 4));
  nimble_ln_kernel_specialize(k, k->params[1], 0, 8);
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text = print(k);
  const char *want =
      "kernel scale(in x: f32[1], out y: f32[1]) {\n"
      "  # variant when shape(y, 0) % 8 == 0\n"
      "  for io in [0, (shape(y, 0) / 4)) {\n"
      "    vectorized(4) for ii in [0, 4) {\n"
      "      let i = ((io * 4) + ii)\n"
      "      y[i] = (x[i] * 2f)\n"
      "    }\n"
      "  }\n"
      "  for i in [((shape(y, 0) / 4) * 4), shape(y, 0)) {  # tail: empty when shape(y, 0) % 4 == 0\n"
      "    y[i] = (x[i] * 2f)\n"
      "  }\n"
      "}\n";
  ck_assert_str_eq(text, want);
  free(text);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_chunk_prints_parallel_loop_over_clamped_chunks) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_stmt *loop;
  nimble_ln_kernel *k = scale_kernel(A, &loop);
  nimble_ln_kernel_set_body(k, nimble_ln_chunk(A, loop, nimble_ln_i64(A, 100)));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text = print(k);
  const char *want =
      "kernel scale(in x: f32[1], out y: f32[1]) {\n"
      "  let i_chunk_size = max(100, 1)\n"
      "  parallel for i_chunk in [0, (((shape(y, 0) + i_chunk_size) - 1) / i_chunk_size)) {\n"
      "    for i in [(i_chunk * i_chunk_size), min(shape(y, 0), ((i_chunk * i_chunk_size) + i_chunk_size))) {\n"
      "      y[i] = (x[i] * 2f)\n"
      "    }\n"
      "  }\n"
      "}\n";
  ck_assert_str_eq(text, want);
  free(text);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_constructors_record_the_first_type_error) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_expr *bad = nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_f32(A, 1), nimble_ln_i64(A, 1));
  ck_assert_ptr_null(bad);
  /* A later error does not replace the first, and NULL operands propagate. */
  ck_assert_ptr_null(nimble_ln_unary(A, NIMBLE_LN_EXP, bad));
  ck_assert_ptr_null(nimble_ln_unary(A, NIMBLE_LN_EXP, nimble_ln_i64(A, 3)));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "binary '+' mixes f32 and i64");
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  ck_assert_ptr_null(nimble_ln_unary(A, NIMBLE_LN_EXP, nimble_ln_i64(A, 3)));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "unary 'exp' does not apply to i64");
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  ck_assert_ptr_null(nimble_ln_kernel_create(A, "9lives"));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "'9lives' is not a C identifier");
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "k");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 2, 0);
  ck_assert_ptr_null(nimble_ln_shape(A, x, 2));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "shape(x, 2): axis outside rank 2");
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  k = nimble_ln_kernel_create(A, "k");
  x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  ck_assert_ptr_null(nimble_ln_store(A, x, nimble_ln_i64(A, 0), nimble_ln_f32(A, 0)));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "store to 'x', which is an input");
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_validate_rejects_unbound_variables_and_immutable_assignment) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "k");
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
  nimble_ln_kernel_set_body(k, nimble_ln_store(A, y, nimble_ln_ref(A, j), nimble_ln_f32(A, 1)));
  NIMBLE_ASSERT_ERROR(nimble_ln_kernel_validate(k), NIMBLE_INVALID_ARGUMENT,
                      "variable 'j' is read outside its binding");

  nimble_ln_var *v = nimble_ln_var_create(A, "v", NIMBLE_LN_F32);
  nimble_ln_kernel_set_body(k, nimble_ln_let(A, v, nimble_ln_f32(A, 1), nimble_ln_assign(A, v, nimble_ln_f32(A, 2))));
  NIMBLE_ASSERT_ERROR(nimble_ln_kernel_validate(k), NIMBLE_INVALID_ARGUMENT, "'v' is assigned but not declared mutable");

  nimble_ln_kernel *empty = nimble_ln_kernel_create(A, "empty");
  nimble_ln_kernel_add_param(empty, "y", NIMBLE_LN_F32, 1, 1);
  NIMBLE_ASSERT_ERROR(nimble_ln_kernel_validate(empty), NIMBLE_INVALID_ARGUMENT, "kernel 'empty' has no body");
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_validate_rejects_accumulator_shared_by_parallel_tasks) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "racy");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 0, 1);
  nimble_ln_var *acc = nimble_ln_var_create(A, "acc", NIMBLE_LN_F32);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_stmt *loop = nimble_ln_for(
      A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_PARALLEL, 0,
      nimble_ln_assign(A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, acc),
                                                nimble_ln_load(A, x, nimble_ln_ref(A, i)))));
  nimble_ln_kernel_set_body(
      k, nimble_ln_decl(A, acc, nimble_ln_f32(A, 0),
                        nimble_ln_seq2(A, loop, nimble_ln_store(A, y, nimble_ln_i64(A, 0), nimble_ln_ref(A, acc)))));
  NIMBLE_ASSERT_ERROR(nimble_ln_kernel_validate(k), NIMBLE_INVALID_ARGUMENT,
                      "accumulator 'acc' is assigned inside a parallel loop but declared outside it");
  /* Code generation refuses it too, naming the kernel. */
  nimble_codegen_output_t out;
  const nimble_ln_kernel *ks[] = {k};
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, NULL, &out), NIMBLE_INVALID_ARGUMENT, "kernel 'racy'");
  ck_assert_ptr_null(out.shared_object);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* Which kernels an AVX-512 clone (16 lanes where the kernel has 8) leaves
 * bit for bit alike: those whose vectorized loops carry no reduction. A
 * sum vectorized over its own axis adds lane by lane and the lanes at the
 * end (16 partial sums are not 8); an accumulator declared inside the
 * vectorized loop is one per lane, and an element-wise loop has none.
 * Those are also the loops an interleave count may go on. */
START_TEST(test_lane_exact_tells_vectorized_reductions_from_per_lane_sums) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  /* Element-wise: y[i] = x[i] * 2, vectorized. */
  nimble_ln_stmt *loop;
  nimble_ln_kernel *ew = scale_kernel(A, &loop);
  ck_assert(!nimble_ln_kernel_vectorized(ew));
  loop->loop_kind = NIMBLE_LN_VECTORIZED;
  loop->factor = 8;
  nimble_ln_kernel_set_body(ew, loop);
  ck_assert(nimble_ln_kernel_vectorized(ew));
  ck_assert(nimble_ln_kernel_lane_exact(ew));
  /* y[0] = sum_i x[i], the sum's loop vectorized (the reduce builder over
   * its last axis): not lane exact. */
  nimble_ln_kernel *sum = NULL;
  NIMBLE_ASSERT_OK(nimble_codegen_build_reduce(A, "sum", 1, 0, NIMBLE_CODEGEN_REDUCE_SUM, &sum));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(sum));
  ck_assert(nimble_ln_kernel_vectorized(sum));
  ck_assert(!nimble_ln_kernel_lane_exact(sum));
  /* z[j] = sum_i w[j, i] with j vectorized and each lane's accumulator
   * declared inside it: lane exact. */
  nimble_ln_kernel *rows = nimble_ln_kernel_create(A, "rows");
  nimble_ln_param *w = nimble_ln_kernel_add_param(rows, "w", NIMBLE_LN_F32, 2, 0);
  nimble_ln_param *z = nimble_ln_kernel_add_param(rows, "z", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *a2 = nimble_ln_var_create(A, "a2", NIMBLE_LN_F32), *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64),
                *p = nimble_ln_var_create(A, "p", NIMBLE_LN_I64);
  nimble_ln_expr *wi = nimble_ln_binary(A, NIMBLE_LN_ADD,
                                        nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_ref(A, j), nimble_ln_shape(A, w, 1)),
                                        nimble_ln_ref(A, p));
  nimble_ln_stmt *inner = nimble_ln_for(
      A, p, nimble_ln_i64(A, 0), nimble_ln_shape(A, w, 1), NIMBLE_LN_SERIAL, 0,
      nimble_ln_assign(A, a2, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, a2), nimble_ln_load(A, w, wi))));
  nimble_ln_stmt *lane = nimble_ln_decl(A, a2, nimble_ln_f32(A, 0),
                                        nimble_ln_seq2(A, inner, nimble_ln_store(A, z, nimble_ln_ref(A, j),
                                                                                 nimble_ln_ref(A, a2))));
  nimble_ln_kernel_set_body(rows, nimble_ln_for(A, j, nimble_ln_i64(A, 0), nimble_ln_shape(A, z, 0),
                                                NIMBLE_LN_VECTORIZED, 8, lane));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(rows));
  ck_assert(nimble_ln_kernel_lane_exact(rows));
  /* An interleave count goes on the loops without a reduction only, and
   * shows in the print (the variant, the cache key). */
  ck_assert_int_eq(nimble_ln_kernel_set_interleave(sum, 4), 0);
  ck_assert_int_eq(nimble_ln_kernel_set_interleave(rows, 4), 1);
  ck_assert_int_eq(nimble_ln_kernel_set_interleave(ew, 2), 1);
  char *text = print(rows);
  ck_assert_ptr_nonnull(strstr(text, "interleave(4)"));
  free(text);
  text = print(sum);
  ck_assert_ptr_null(strstr(text, "interleave"));
  free(text);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_builders_reject_bad_arguments_with_the_kernel_name) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = NULL;
  int ranks[2] = {3, 2};
  nimble_ln_op_t op = NIMBLE_LN_ADD;
  NIMBLE_ASSERT_ERROR(nimble_codegen_build_elementwise(A, "add7", 2, ranks, 7, nimble_codegen_combine_binary, &op, &k),
                      NIMBLE_INVALID_ARGUMENT, "elementwise kernel 'add7'");
  NIMBLE_ASSERT_ERROR(nimble_codegen_build_elementwise(A, "addr", 2, ranks, 2, nimble_codegen_combine_binary, &op, &k),
                      NIMBLE_INVALID_ARGUMENT, "input 0 has rank 3, above the output's 2");
  NIMBLE_ASSERT_ERROR(nimble_codegen_build_reduce(A, "r", 2, 2, NIMBLE_CODEGEN_REDUCE_SUM, &k),
                      NIMBLE_INVALID_ARGUMENT, "reduce kernel 'r': rank 2, axis 2");
  NIMBLE_ASSERT_ERROR(nimble_codegen_build_softmax(A, "sm", 0, &k), NIMBLE_INVALID_ARGUMENT, "rank 0 outside 1..6");
  ck_assert_ptr_null(k);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_build_rejects_unknown_target_and_missing_linker) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  nimble_ln_op_t op = NIMBLE_LN_EXP;
  int r = 1;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vexp", 1, &r, 1, nimble_codegen_combine_unary, &op, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_output_t out;
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "riscv64-linux-gnu";
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, &o, &out), NIMBLE_UNIMPLEMENTED, "'riscv64-linux-gnu' is not supported");
  o = nimble_codegen_default_options();
  o.lld = "/nonexistent/ld.lld";
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, &o, &out), NIMBLE_UNAVAILABLE, "cannot run the linker '/nonexistent/ld.lld'");
  /* A linker that fails: its exit status is reported. */
  o.lld = "false";
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, &o, &out), NIMBLE_INTERNAL, "'false -shared' failed (exit status 1)");
  /* Two kernels with one name. */
  const nimble_ln_kernel *twice[] = {k, k};
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(twice, 2, NULL, &out), NIMBLE_ALREADY_EXISTS, "kernel 'vexp'");
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_link_leaves_no_temporary_files) {
  char dir[] = "/tmp/nimble-cg-test-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  setenv("TMPDIR", dir, 1);
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  nimble_ln_op_t op = NIMBLE_LN_EXP;
  int r = 1;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vexp", 1, &r, 1, nimble_codegen_combine_unary, &op, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, NULL, &out));
  /* An ELF shared object: magic, ET_DYN. */
  ck_assert_uint_gt(out.shared_object_size, 64);
  ck_assert_int_eq(memcmp(out.shared_object, "\177ELF", 4), 0);
  ck_assert_int_eq(out.shared_object[16], 3);
  nimble_codegen_output_deinit(&out);
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.lld = "false";
  nimble_status_free(nimble_codegen_build(ks, 1, &o, &out));
  unsetenv("TMPDIR");
  /* rmdir succeeds only if both builds cleaned up after themselves. */
  ck_assert_int_eq(rmdir(dir), 0);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* for i in [0, n) { for i in [0, n) { y[i] = x[i] } }, the store's index
 * being the outer or the inner `i`: the text form prints both alike. */
static nimble_ln_kernel *shadow_kernel(nimble_ln_arena *A, int use_outer) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "shadow");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *outer = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *inner = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *idx = nimble_ln_ref(A, use_outer ? outer : inner);
  nimble_ln_stmt *store = nimble_ln_store(A, y, idx, nimble_ln_load(A, x, idx));
  nimble_ln_stmt *in = nimble_ln_for(A, inner, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0, store);
  nimble_ln_kernel_set_body(
      k, nimble_ln_for(A, outer, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0, in));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  return k;
}

START_TEST(test_the_cache_key_follows_the_kernel_and_target_not_the_arena) {
  nimble_ln_arena *A, *B;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&B));
  /* B's variable ids start later: the kernels are the same all the same. */
  for (int i = 0; i < 5; i++) ck_assert_ptr_nonnull(nimble_ln_var_create(B, "unused", NIMBLE_LN_I64));
  nimble_ln_stmt *la, *lb;
  nimble_ln_kernel *ka = scale_kernel(A, &la), *kb = scale_kernel(B, &lb);
  nimble_ln_kernel_set_body(ka, la);
  nimble_ln_kernel_set_body(kb, lb);
  char *ta = NULL, *tb = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print_canonical(ka, &ta));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print_canonical(kb, &tb));
  ck_assert_str_eq(ta, tb);
  /* Exact constants and types: 2.0f is 0x1p+1, the loop variable numbered. */
  ck_assert_msg(strstr(ta, "(0:f32 0x1p+1)") != NULL && strstr(ta, "v0:i64") != NULL, "%s", ta);
  char key_a[65], key_b[65], key[65];
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.opt_level = 2;
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(ka, &o, key_a));
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(kb, &o, key_b));
  ck_assert_str_eq(key_a, key_b);
  ck_assert_uint_eq(strlen(key_a), 64);
  ck_assert_uint_eq(strspn(key_a, "0123456789abcdef"), 64);
  /* Another opt level, CPU or triple is another key. */
  o.opt_level = 3;
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(ka, &o, key));
  ck_assert_str_ne(key, key_a);
  o.opt_level = 2;
  o.cpu = "skylake-avx512";
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(ka, &o, key));
  ck_assert_str_ne(key, key_a);
  o = nimble_codegen_default_options();
  o.opt_level = 2;
  o.triple = "aarch64-linux-gnu";
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(ka, &o, key));
  ck_assert_str_ne(key, key_a);
  /* Which `i` a shadowed name means: one text form, two keys. */
  nimble_ln_kernel *so = shadow_kernel(A, 1), *si = shadow_kernel(A, 0);
  char *po = print(so), *pi = print(si);
  ck_assert_str_eq(po, pi);
  char key_o[65], key_i[65];
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(so, NULL, key_o));
  NIMBLE_ASSERT_OK(nimble_codegen_kernel_key(si, NULL, key_i));
  ck_assert_str_ne(key_o, key_i);
  free(po);
  free(pi);
  free(ta);
  free(tb);
  nimble_ln_arena_destroy(A);
  nimble_ln_arena_destroy(B);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loopnest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_split_prints_vector_loop_and_tail_marked_for_the_variant);
  tcase_add_test(tc, test_chunk_prints_parallel_loop_over_clamped_chunks);
  tcase_add_test(tc, test_lane_exact_tells_vectorized_reductions_from_per_lane_sums);
  tcase_add_test(tc, test_constructors_record_the_first_type_error);
  tcase_add_test(tc, test_validate_rejects_unbound_variables_and_immutable_assignment);
  tcase_add_test(tc, test_validate_rejects_accumulator_shared_by_parallel_tasks);
  tcase_add_test(tc, test_builders_reject_bad_arguments_with_the_kernel_name);
  tcase_add_test(tc, test_build_rejects_unknown_target_and_missing_linker);
  tcase_add_test(tc, test_link_leaves_no_temporary_files);
  tcase_add_test(tc, test_the_cache_key_follows_the_kernel_and_target_not_the_arena);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
