/* Schedules by size (nimble_ln_kernel_by_size): one kernel joined from
 * three builds of "the same" computation runs the first build's body for
 * outputs of at most 10 elements, the second's up to 100 and the third's
 * beyond. Here the three compute different values (2x + 1, 3x, -x), so
 * each output says which body ran; a scratch buffer two of them use at
 * different sizes is allocated at the larger, one of another type comes
 * after it. Then the refusals: other arguments, bounds not rising. */
#include "codegen_harness.h"

static size_t g_bytes[4];
static int g_allocs;

static void *recording_alloc(const nimble_kernel_env_t *env, size_t bytes, size_t align) {
  (void)env;
  if (g_allocs < 4) g_bytes[g_allocs] = bytes;
  g_allocs++;
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}

/* y[i] = f(x[i]) for f in {2x + 1 through scratch s of n floats, 3x
 * through i32 scratch t, -x through scratch s of 2n floats and a parallel
 * loop}. */
static nimble_ln_kernel *build(nimble_ln_arena *A, int which, const char *out_name) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "by_size");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, out_name, NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *n = nimble_ln_shape(A, x, 0), *xi = nimble_ln_load(A, x, nimble_ln_ref(A, i));
  nimble_ln_stmt *body;
  if (which == 0) {
    nimble_ln_param *s = nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, nimble_ln_shape(A, x, 0));
    nimble_ln_var *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
    nimble_ln_stmt *w = nimble_ln_for(
        A, i, nimble_ln_i64(A, 0), n, NIMBLE_LN_VECTORIZED, 8,
        nimble_ln_store(A, s, nimble_ln_ref(A, i), nimble_ln_binary(A, NIMBLE_LN_MUL, xi, nimble_ln_f32(A, 2))));
    nimble_ln_stmt *r = nimble_ln_for(A, j, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_SERIAL, 0,
                                      nimble_ln_store(A, y, nimble_ln_ref(A, j),
                                                      nimble_ln_binary(A, NIMBLE_LN_ADD,
                                                                       nimble_ln_load(A, s, nimble_ln_ref(A, j)),
                                                                       nimble_ln_f32(A, 1))));
    body = nimble_ln_seq2(A, w, r);
  } else if (which == 1) {
    nimble_ln_param *t = nimble_ln_kernel_add_scratch(k, "t", NIMBLE_LN_I32, nimble_ln_shape(A, x, 0));
    nimble_ln_var *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
    nimble_ln_stmt *w = nimble_ln_for(A, j, nimble_ln_i64(A, 0), n, NIMBLE_LN_SERIAL, 0,
                                      nimble_ln_store(A, t, nimble_ln_ref(A, j), nimble_ln_i32(A, 3)));
    nimble_ln_expr *ti = nimble_ln_cast(A, NIMBLE_LN_F32, nimble_ln_load(A, t, nimble_ln_ref(A, i)));
    nimble_ln_stmt *r = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_VECTORIZED, 8,
                                      nimble_ln_store(A, y, nimble_ln_ref(A, i), nimble_ln_binary(A, NIMBLE_LN_MUL, xi, ti)));
    body = nimble_ln_seq2(A, w, r);
  } else {
    nimble_ln_expr *two_n = nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_shape(A, x, 0), nimble_ln_i64(A, 2));
    nimble_ln_param *s = nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, two_n);
    nimble_ln_var *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
    nimble_ln_stmt *w = nimble_ln_for(A, i, nimble_ln_i64(A, 0), n, NIMBLE_LN_SERIAL, 0,
                                      nimble_ln_store(A, s, nimble_ln_ref(A, i), nimble_ln_unary(A, NIMBLE_LN_NEG, xi)));
    w = nimble_ln_chunk(A, w, nimble_ln_i64(A, 64));
    nimble_ln_stmt *r = nimble_ln_for(A, j, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_SERIAL, 0,
                                      nimble_ln_store(A, y, nimble_ln_ref(A, j), nimble_ln_load(A, s, nimble_ln_ref(A, j))));
    body = nimble_ln_seq2(A, w, r);
  }
  nimble_ln_kernel_set_body(k, body);
  return k;
}

START_TEST(test_each_size_runs_its_own_schedule) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *ks[3] = {build(A, 0, "y"), build(A, 1, "y"), build(A, 2, "y")};
  const int64_t bounds[2] = {10, 100};
  nimble_ln_kernel *k = nimble_ln_kernel_by_size(ks, bounds, 3);
  ck_assert_ptr_eq(k, ks[0]);
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  /* x, y, the f32 scratch the first and third share, the second's i32 one. */
  ck_assert_int_eq(k->n_params, 4);
  ck_assert_str_eq(k->params[3]->name, "t_s1");
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  ck_assert_msg(strstr(text, "<= 10") && strstr(text, "<= 100"), "%s", text);
  free(text);
  harness_lib lib;
  const nimble_ln_kernel *built[1] = {k};
  harness_build_and_load(built, 1, &lib);
  nimble_kernel_fn fn = harness_sym(&lib, "by_size");
  static const int64_t sizes[] = {0, 1, 10, 11, 100, 101, 1001};
  for (int threads = 0; threads < 3; threads += 2)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
      int64_t n = sizes[si];
      harness_env he;
      harness_env_init(&he, threads, 0);
      he.env.workspace_alloc = recording_alloc;
      g_allocs = 0;
      float *xd = malloc((size_t)(n + 1) * sizeof(float)), *yd = calloc((size_t)(n + 1), sizeof(float));
      for (int64_t i = 0; i < n; i++) xd[i] = (float)i * 0.25f - 5.0f;
      int64_t shp = n;
      DLTensor x = {.data = xd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
      DLTensor y = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
      DLTensor *args[2] = {&x, &y};
      ck_assert_int_eq(fn(args, 2, &he.env), 0);
      int which = n <= 10 ? 0 : n <= 100 ? 1 : 2;
      for (int64_t i = 0; i < n; i++) {
        float want = which == 0 ? 2 * xd[i] + 1 : which == 1 ? 3 * xd[i] : -xd[i];
        ck_assert_msg(yd[i] == want, "n %lld: y[%lld] = %g, want %g", (long long)n, (long long)i, (double)yd[i],
                      (double)want);
      }
      /* Every call takes both buffers, the shared one at 2n + 1 floats. */
      ck_assert_int_eq(g_allocs, 2);
      ck_assert_uint_ge(g_bytes[0], (size_t)(2 * n + 1) * sizeof(float));
      ck_assert_uint_ge(g_bytes[1], (size_t)(n + 1) * sizeof(int32_t));
      free(xd), free(yd);
    }
  harness_unload(&lib);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_other_arguments_and_falling_bounds_are_refused) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *ks[2] = {build(A, 1, "y"), build(A, 1, "z")};
  const int64_t bounds[1] = {10};
  ck_assert_ptr_null(nimble_ln_kernel_by_size(ks, bounds, 2));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT,
                      "schedule 1 by size is not of the same arguments or bounds");
  nimble_ln_arena_destroy(A);
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *three[3] = {build(A, 1, "y"), build(A, 1, "y"), build(A, 1, "y")};
  const int64_t falling[2] = {100, 100};
  ck_assert_ptr_null(nimble_ln_kernel_by_size(three, falling, 3));
  NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, "schedule 2 by size");
  nimble_ln_arena_destroy(A);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_by_size");
  TCase *tc = tcase_create("by_size");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_each_size_runs_its_own_schedule);
  tcase_add_test(tc, test_other_arguments_and_falling_bounds_are_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
