/* Light kernels (compile-workers/compiler/codegen/cg_light.c): a kernel
 * whose run is statically at most 1024 statements gets a short pipeline
 * and fast instruction selection; anything with a loop bound known only at
 * run time, a long constant loop, an sgemm or being called in place is
 * compiled in full. The
 * classification is read back from the build's statistics, and the light
 * kernel's results are checked against hand-computed values. */
#include "codegen_harness.h"

/* y[i] = 3 * x[trips - 1 - i] for i in [0, trips): a constant loop. */
static nimble_ln_kernel *reverse_kernel(nimble_ln_arena *A, const char *name, int64_t trips) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *src = nimble_ln_binary(A, NIMBLE_LN_SUB, nimble_ln_i64(A, trips - 1), nimble_ln_ref(A, i));
  nimble_ln_kernel_set_body(
      k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_i64(A, trips), NIMBLE_LN_SERIAL, 0,
                       nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                       nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, x, src),
                                                        nimble_ln_f32(A, 3)))));
  return k;
}

/* y[i*cols + j] = x[i*cols + j] + 1 over a rows x cols constant nest. */
static nimble_ln_kernel *nest_kernel(nimble_ln_arena *A, const char *name, int64_t rows, int64_t cols) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
  nimble_ln_expr *at = nimble_ln_binary(A, NIMBLE_LN_ADD,
                                        nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_ref(A, i), nimble_ln_i64(A, cols)),
                                        nimble_ln_ref(A, j));
  nimble_ln_stmt *inner = nimble_ln_for(
      A, j, nimble_ln_i64(A, 0), nimble_ln_i64(A, cols), NIMBLE_LN_SERIAL, 0,
      nimble_ln_store(A, y, at, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, x, at), nimble_ln_f32(A, 1))));
  nimble_ln_kernel_set_body(k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_i64(A, rows), NIMBLE_LN_SERIAL, 0,
                                             inner));
  return k;
}

/* y[i] = x[i] for i in [0, shape(x, 0)): a bound known only at run time. */
static nimble_ln_kernel *dynamic_kernel(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "copy_dynamic");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_kernel_set_body(k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_SERIAL, 0,
                                             nimble_ln_store(A, y, nimble_ln_ref(A, i),
                                                             nimble_ln_load(A, x, nimble_ln_ref(A, i)))));
  return k;
}

START_TEST(test_short_constant_kernels_are_light_and_still_right) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[] = {
      reverse_kernel(A, "reverse8", 8),         /* 8 statements + the loop: light */
      nest_kernel(A, "nest4x4", 4, 4),          /* 4 * (1 + 4) + 1: light */
      reverse_kernel(A, "reverse4096", 4096),   /* 4096 stores: heavy */
      nest_kernel(A, "nest40x40", 40, 40),      /* 1600 stores: heavy */
      dynamic_kernel(A),                        /* a run-time bound: heavy */
  };
  static const int want_light[] = {1, 1, 0, 0, 0};
  size_t n = sizeof ks / sizeof ks[0];
  for (size_t i = 0; i < n; i++) NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(ks[i]));
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, n, NULL, &out));
  ck_assert_uint_eq(out.stats.n_kernels, n);
  ck_assert_uint_eq(out.stats.n_light, 2);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(out.stats.kernels[i].light == want_light[i], "%s: light %d, expected %d", ks[i]->name,
                  out.stats.kernels[i].light, want_light[i]);

  harness_lib lib;
  harness_load_bytes(out.shared_object, out.shared_object_size, &lib);
  harness_env he;
  harness_env_init(&he, 0, 0);
  float xd[16], yd[16];
  for (int i = 0; i < 16; i++) xd[i] = (float)i * 0.25f - 1.0f;
  int64_t eight = 8, sixteen = 16;
  DLTensor x8 = {.data = xd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &eight};
  DLTensor y8 = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &eight};
  DLTensor *args[2] = {&x8, &y8};
  ck_assert_int_eq(harness_sym(&lib, "reverse8")(args, 2, &he.env), 0);
  for (int i = 0; i < 8; i++) /* 3 * x[7 - i], x[k] = k/4 - 1 */
    ck_assert_msg(yd[i] == 3.0f * ((float)(7 - i) * 0.25f - 1.0f), "reverse8: y[%d] = %g", i, (double)yd[i]);
  DLTensor x16 = {.data = xd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &sixteen};
  DLTensor y16 = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &sixteen};
  DLTensor *args16[2] = {&x16, &y16};
  ck_assert_int_eq(harness_sym(&lib, "nest4x4")(args16, 2, &he.env), 0);
  for (int i = 0; i < 16; i++) ck_assert_msg(yd[i] == (float)i * 0.25f, "nest4x4: y[%d] = %g", i, (double)yd[i]);
  harness_unload(&lib);
  nimble_codegen_output_deinit(&out);

  /* Opt level 0 is all fast instruction selection already: nothing is
   * called light there. */
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.opt_level = 0;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 2, &o, &out));
  ck_assert_uint_eq(out.stats.n_light, 0);
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* A short constant kernel marked in_place (update_in_place's scatters: the
 * row write of a loop, run once per iteration) is compiled in full, and
 * called with its output over its input it still computes y[i] = x[i] + 1. */
START_TEST(test_an_in_place_kernel_is_never_light) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *plain = nest_kernel(A, "nest2x8", 2, 8);
  nimble_ln_kernel *inplace = nest_kernel(A, "nest2x8_in_place", 2, 8);
  inplace->in_place = 1;
  const nimble_ln_kernel *ks[] = {plain, inplace};
  for (size_t i = 0; i < 2; i++) NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(ks[i]));
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 2, NULL, &out));
  ck_assert_uint_eq(out.stats.n_kernels, 2);
  ck_assert_msg(out.stats.kernels[0].light == 1, "nest2x8 (17 statements) should be light");
  ck_assert_msg(out.stats.kernels[1].light == 0, "the in-place kernel should be compiled in full");
  harness_lib lib;
  harness_load_bytes(out.shared_object, out.shared_object_size, &lib);
  harness_env he;
  harness_env_init(&he, 0, 0);
  float d[16];
  for (int i = 0; i < 16; i++) d[i] = (float)i * 0.5f;
  int64_t sixteen = 16;
  DLTensor x = {.data = d, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &sixteen};
  DLTensor y = x; /* the output over the input */
  DLTensor *args[2] = {&x, &y};
  ck_assert_int_eq(harness_sym(&lib, "nest2x8_in_place")(args, 2, &he.env), 0);
  for (int i = 0; i < 16; i++) ck_assert_msg(d[i] == (float)i * 0.5f + 1.0f, "y[%d] = %g", i, (double)d[i]);
  harness_unload(&lib);
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_light");
  TCase *tc = tcase_create("light");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_short_constant_kernels_are_light_and_still_right);
  tcase_add_test(tc, test_an_in_place_kernel_is_never_light);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
