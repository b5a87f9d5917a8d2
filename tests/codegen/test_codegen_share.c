/* Kernels with the same body under different names (a model's repeated
 * layers) share one implementation (cg_build.c's share_plan): the first
 * builds it, the others get a forwarder that calls it. Each must still compute
 * its own results, be exported under its own name, and name itself in its
 * error messages, from the entry point's checks and from a check inside a
 * parallel loop alike; the shared implementation must not be exported, and
 * the shared object must be the same bytes whatever the threads. */
#include "codegen_harness.h"

/* y[i] = 2 * x[i], checking x[i] >= 0, for i in [0, shape(y, 0)): split by
 * 8 (vectorised, a specialisation for divisible extents) and chunked over
 * the thread pool, so the check runs in an outlined parallel body. */
static nimble_ln_kernel *double_kernel(nimble_ln_arena *A, const char *name) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *xi = nimble_ln_load(A, x, nimble_ln_ref(A, i));
  nimble_ln_stmt *body = nimble_ln_seq2(
      A, nimble_ln_check(A, nimble_ln_binary(A, NIMBLE_LN_GE, xi, nimble_ln_f32(A, 0)), "x must not be negative"),
      nimble_ln_store(A, y, nimble_ln_ref(A, i), nimble_ln_binary(A, NIMBLE_LN_MUL, xi, nimble_ln_f32(A, 2))));
  nimble_ln_stmt *loop =
      nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0, body);
  nimble_ln_stmt *split = nimble_ln_split(A, loop, 8, NIMBLE_LN_VECTORIZED, 8);
  ck_assert_ptr_nonnull(split);
  nimble_ln_kernel_specialize(k, y, 0, 8);
  nimble_ln_stmt *blocks = nimble_ln_chunk(A, split->stmts[0], nimble_ln_i64(A, 2));
  nimble_ln_kernel_set_body(k, nimble_ln_seq2(A, blocks, split->stmts[1]));
  return k;
}

/* y[i] = x[i] + 1: another body, built on its own. */
static nimble_ln_kernel *inc_kernel(nimble_ln_arena *A, const char *name) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_kernel_set_body(
      k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, y, 0), NIMBLE_LN_SERIAL, 0,
                       nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                       nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, nimble_ln_ref(A, i)),
                                                        nimble_ln_f32(A, 1)))));
  return k;
}

/* Runs `name` on x = {0, 0.5, ..., 10} (21 elements: 2 blocks of 8 and a
 * tail of 5, or 16 with no tail when n is 16), y filled with -1. */
static int32_t run(harness_lib *lib, harness_env *he, const char *name, int64_t n, float *yd) {
  float xd[21];
  for (int i = 0; i < 21; i++) xd[i] = (float)i * 0.5f;
  for (int i = 0; i < 21; i++) yd[i] = -1.0f;
  DLTensor x = {.data = xd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
  DLTensor y = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n};
  DLTensor *args[2] = {&x, &y};
  he->error[0] = 0;
  return harness_sym(lib, name)(args, 2, &he->env);
}

START_TEST(test_kernels_with_one_body_share_its_code_and_keep_their_names) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[] = {double_kernel(A, "double_a"), inc_kernel(A, "inc"), double_kernel(A, "double_b"),
                                  double_kernel(A, "double_c")};
  size_t n = sizeof ks / sizeof ks[0];
  for (size_t i = 0; i < n; i++) NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(ks[i]));
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.opt_level = 2;
  o.jobs = 1;
  nimble_codegen_output_t one, two;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, n, &o, &one));
  o.jobs = 3;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, n, &o, &two));
  ck_assert_uint_eq(one.shared_object_size, two.shared_object_size);
  ck_assert(memcmp(one.shared_object, two.shared_object, one.shared_object_size) == 0);
  static const int want_shared[] = {1, 0, 2, 2};
  ck_assert_uint_eq(one.stats.n_shared, 2);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(one.stats.kernels[i].shared == want_shared[i], "%s: shared %d, expected %d", ks[i]->name,
                  one.stats.kernels[i].shared, want_shared[i]);

  harness_lib lib;
  harness_load_bytes(one.shared_object, one.shared_object_size, &lib);
  ck_assert_ptr_null(dlsym(lib.handle, "double_a.impl")); /* hidden */
  harness_env he;
  harness_env_init(&he, 2, 0);
  float yd[21];
  static const char *const names[] = {"double_a", "double_b", "double_c"};
  for (int k = 0; k < 3; k++) {
    for (int64_t len = 16; len <= 21; len += 5) {
      ck_assert_int_eq(run(&lib, &he, names[k], len, yd), 0);
      for (int i = 0; i < 21; i++) {
        float want = i < len ? (float)i : -1.0f; /* 2 * i / 2 inside, untouched past the end */
        ck_assert_msg(yd[i] == want, "%s, %lld elements: y[%d] = %g, want %g", names[k], (long long)len, i,
                      (double)yd[i], (double)want);
      }
    }
  }
  ck_assert_int_eq(run(&lib, &he, "inc", 21, yd), 0);
  for (int i = 0; i < 21; i++) ck_assert_msg(yd[i] == (float)i * 0.5f + 1.0f, "inc: y[%d] = %g", i, (double)yd[i]);

  /* Every kernel of the body reports its errors, which do not name it (the
   * VM names the kernel it called, test_codegen_runtime): the entry's
   * argument check... */
  int64_t len = 4;
  float xd[4] = {1, 2, 3, 4};
  DLTensor x2 = {.data = xd, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = (int64_t[]){2, 2}};
  DLTensor y1 = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &len};
  DLTensor *bad[2] = {&x2, &y1};
  for (int k = 0; k < 3; k++) {
    he.error[0] = 0;
    ck_assert_int_ne(harness_sym(&lib, names[k])(bad, 2, &he.env), 0);
    ck_assert_msg(strcmp(he.error, "argument 0 ('x') must have rank 1") == 0, "%s: %s", names[k], he.error);
  }
  /* ...and a check in the parallel body (x[3] < 0) and in the tail. */
  float neg[21];
  for (int i = 0; i < 21; i++) neg[i] = 1.0f;
  for (int k = 0; k < 3; k++) {
    for (int at = 3; at <= 18; at += 15) {
      neg[at] = -1.0f;
      int64_t n21 = 21;
      DLTensor xn = {.data = neg, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n21};
      DLTensor yn = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n21};
      DLTensor *args[2] = {&xn, &yn};
      he.error[0] = 0;
      ck_assert_int_ne(harness_sym(&lib, names[k])(args, 2, &he.env), 0);
      ck_assert_msg(strcmp(he.error, "x must not be negative") == 0, "%s: %s", names[k], he.error);
      neg[at] = 1.0f;
    }
  }
  harness_unload(&lib);
  nimble_codegen_output_deinit(&one);
  nimble_codegen_output_deinit(&two);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_share");
  TCase *tc = tcase_create("share");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_kernels_with_one_body_share_its_code_and_keep_their_names);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
