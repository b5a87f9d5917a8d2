/* Scratch buffers (nimble_ln_kernel_add_scratch): taken from
 * env->workspace_alloc by the entry point, visible to parallel tasks,
 * freed on every return, not counted as arguments; the failure when the
 * runtime has no memory for them; the IR's ordering rules; nvptx64
 * refuses code that reaches one. */
#include "codegen_harness.h"

static atomic_int g_allocs, g_frees;
static size_t g_last_bytes, g_last_align;

static void *counting_alloc(const nimble_kernel_env_t *env, size_t bytes, size_t align) {
  (void)env;
  atomic_fetch_add(&g_allocs, 1);
  g_last_bytes = bytes;
  g_last_align = align;
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}
static void counting_free(const nimble_kernel_env_t *env, void *p) {
  (void)env;
  atomic_fetch_add(&g_frees, 1);
  free(p);
}
static void *no_memory(const nimble_kernel_env_t *env, size_t bytes, size_t align) {
  (void)env, (void)bytes, (void)align;
  return NULL;
}

/* y[i] = 2*x[i] + 1 through a scratch buffer s of n elements: s written
 * by a chunked parallel loop, then read back in reverse order by another. */
static nimble_ln_kernel *scratch_kernel(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "twice_plus_one");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  nimble_ln_param *s = nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, nimble_ln_shape(A, x, 0));
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
  nimble_ln_expr *n = nimble_ln_shape(A, x, 0);
  nimble_ln_stmt *w = nimble_ln_for(
      A, i, nimble_ln_i64(A, 0), n, NIMBLE_LN_VECTORIZED, 8,
      nimble_ln_store(A, s, nimble_ln_ref(A, i),
                      nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, x, nimble_ln_ref(A, i)), nimble_ln_f32(A, 2))));
  w = nimble_ln_chunk(A, w, nimble_ln_i64(A, 100));
  nimble_ln_expr *rev = nimble_ln_binary(A, NIMBLE_LN_SUB, nimble_ln_binary(A, NIMBLE_LN_SUB, nimble_ln_shape(A, s, 0),
                                                                             nimble_ln_i64(A, 1)),
                                         nimble_ln_ref(A, j));
  nimble_ln_stmt *r = nimble_ln_for(
      A, j, nimble_ln_i64(A, 0), n, NIMBLE_LN_SERIAL, 0,
      nimble_ln_store(A, y, rev, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_load(A, s, rev), nimble_ln_f32(A, 1))));
  r = nimble_ln_chunk(A, r, nimble_ln_i64(A, 64));
  nimble_ln_kernel_set_body(k, nimble_ln_seq2(A, w, r));
  return k;
}

START_TEST(test_scratch_is_allocated_shared_by_tasks_and_freed) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = scratch_kernel(A);
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  ck_assert_msg(strstr(text, "scratch s: f32[1]") && strstr(text, "# scratch s: shape(x, 0) elements"), "%s", text);
  free(text);
  harness_lib lib;
  const nimble_ln_kernel *ks[1] = {k};
  harness_build_and_load(ks, 1, &lib);
  nimble_kernel_fn fn = harness_sym(&lib, "twice_plus_one");
  static const int64_t sizes[] = {1, 7, 100, 1001, 0};
  for (int threads = 0; threads < 3; threads += 2)
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      int64_t n = sizes[si];
      harness_env he;
      harness_env_init(&he, threads, 0);
      he.env.workspace_alloc = counting_alloc;
      he.env.workspace_free = counting_free;
      atomic_store(&g_allocs, 0);
      atomic_store(&g_frees, 0);
      float *xd = malloc((size_t)(n + 1) * sizeof(float)), *yd = calloc((size_t)(n + 1), sizeof(float));
      for (int64_t i = 0; i < n; i++) xd[i] = (float)i * 0.5f - 3.0f;
      int64_t shp = n;
      DLTensor x = {.data = xd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
      DLTensor y = {.data = yd, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
      DLTensor *args[2] = {&x, &y};
      ck_assert_int_eq(fn(args, 2, &he.env), 0);
      for (int64_t i = 0; i < n; i++)
        ck_assert_msg(yd[i] == 2 * xd[i] + 1, "n %lld: y[%lld] = %g", (long long)n, (long long)i, (double)yd[i]);
      ck_assert_int_eq(atomic_load(&g_allocs), 1);
      ck_assert_int_eq(atomic_load(&g_frees), 1);
      ck_assert_uint_ge(g_last_bytes, (size_t)n * sizeof(float));
      ck_assert_uint_eq(g_last_align, 64);
      if (threads && n == 1001) ck_assert_int_gt(atomic_load(&he.tasks_run), 1);
      free(xd), free(yd);
    }
  /* The caller passes inputs and outputs only. */
  harness_env he;
  harness_env_init(&he, 0, 0);
  float d[4] = {0};
  int64_t shp = 4;
  DLTensor t = {.data = d, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
  DLTensor *three[3] = {&t, &t, &t};
  ck_assert_int_eq(fn(three, 3, &he.env), 1);
  ck_assert_msg(strstr(he.error, "expects 2 arguments"), "%s", he.error);
  /* No workspace: the kernel fails and says which buffer (the VM names
   * the kernel). */
  float e[4] = {0};
  DLTensor u = {.data = e, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &shp};
  DLTensor *two[2] = {&t, &u};
  he.env.workspace_alloc = no_memory;
  ck_assert_int_eq(fn(two, 2, &he.env), 1);
  ck_assert_str_eq(he.error, "the runtime gave no workspace for scratch buffer 's'");
  dlclose(lib.handle), close(lib.fd);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_scratch_ordering_rules_and_nvptx_refusal) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "early");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  ck_assert_ptr_null(nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, nimble_ln_i64(A, 4)));
  nimble_status_t st = nimble_ln_arena_status(A);
  ck_assert_msg(st && strstr(nimble_status_message(st), "must follow the outputs"), "%s",
                st ? nimble_status_message(st) : "ok");
  nimble_status_free(st);
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  k = nimble_ln_kernel_create(A, "late");
  x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  ck_assert_ptr_null(nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, nimble_ln_f32(A, 4)));
  st = nimble_ln_arena_status(A);
  ck_assert_msg(st && strstr(nimble_status_message(st), "i64 element count"), "%s", st ? nimble_status_message(st) : "ok");
  nimble_status_free(st);
  nimble_ln_arena_destroy(A);

  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  k = nimble_ln_kernel_create(A, "after");
  x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 1);
  ck_assert_ptr_nonnull(nimble_ln_kernel_add_scratch(k, "s", NIMBLE_LN_F32, nimble_ln_shape(A, x, 0)));
  ck_assert_ptr_null(nimble_ln_kernel_add_param(k, "z", NIMBLE_LN_F32, 1, 1));
  st = nimble_ln_arena_status(A);
  ck_assert_msg(st && strstr(nimble_status_message(st), "follows a scratch buffer"), "%s",
                st ? nimble_status_message(st) : "ok");
  nimble_status_free(st);
  nimble_ln_arena_destroy(A);

  /* nvptx64 has no workspace. */
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  k = scratch_kernel(A);
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  const nimble_ln_kernel *ks[1] = {k};
  st = nimble_codegen_build(ks, 1, &o, &out);
  ck_assert_msg(st && nimble_status_code(st) == NIMBLE_UNIMPLEMENTED && strstr(nimble_status_message(st), "scratch"),
                "%s", st ? nimble_status_message(st) : "built");
  nimble_status_free(st);
  nimble_ln_arena_destroy(A);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_scratch");
  TCase *tc = tcase_create("scratch");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_scratch_is_allocated_shared_by_tasks_and_freed);
  tcase_add_test(tc, test_scratch_ordering_rules_and_nvptx_refusal);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
