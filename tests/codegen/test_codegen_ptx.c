/* nvptx64 emission: kernels become PTX entry points (marked through
 * nvvm.annotations) that ptxas accepts for sm_80 when the CUDA toolkit is
 * installed. No GPU is needed; running them is left to a GPU machine. */
#include <sys/stat.h>
#include <sys/wait.h>

#include "codegen_harness.h"

#define PTXAS "/usr/local/cuda/bin/ptxas"

START_TEST(test_kernels_emit_ptx_entries_that_ptxas_accepts) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k[4];
  int r[2] = {2, 1}, r1 = 1;
  nimble_ln_op_t add = NIMBLE_LN_ADD, t = NIMBLE_LN_ERF;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "badd", 2, r, 2, nimble_codegen_combine_binary, &add, &k[0]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "verf", 1, &r1, 1, nimble_codegen_combine_unary, &t, &k[1]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_softmax(A, "softmax", 3, &k[2]));
  NIMBLE_ASSERT_OK(nimble_codegen_build_dense(A, "dense", NIMBLE_CODEGEN_EPILOGUE_BIAS_RELU, &k[3]));
  const nimble_ln_kernel *ks[] = {k[0], k[1], k[2], k[3]};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 4, &o, &out));
  ck_assert_ptr_null(out.shared_object);
  ck_assert_ptr_nonnull(out.ptx);
  ck_assert_ptr_nonnull(strstr(out.ptx, ".target sm_80"));
  static const char *const entries[] = {".visible .entry badd(", ".visible .entry verf(", ".visible .entry softmax(",
                                        ".visible .entry dense("};
  for (int i = 0; i < 4; i++) ck_assert_msg(strstr(out.ptx, entries[i]) != NULL, "no '%s'", entries[i]);
  /* Threads: the parallel loops read the grid's special registers. */
  ck_assert_ptr_nonnull(strstr(out.ptx, "%ctaid.x"));
  ck_assert_ptr_nonnull(strstr(out.ptx, "%nctaid.x"));
  /* No calls: the math is inline and there is no libm on the device. */
  ck_assert_ptr_null(strstr(out.ptx, "call.uni"));

  if (access(PTXAS, X_OK) != 0) {
    printf(PTXAS " not installed: checked the PTX text only\n");
  } else {
    char dir[] = "/tmp/nimble-ptx-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char ptx[128], cubin[128], log[128], cmd[1024];
    snprintf(ptx, sizeof ptx, "%s/k.ptx", dir);
    snprintf(cubin, sizeof cubin, "%s/k.cubin", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    FILE *f = fopen(ptx, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out.ptx, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, PTXAS " -arch=sm_80 %s -o %s > %s 2>&1", ptx, cubin, log);
    int rc = system(cmd);
    char text[2048] = "";
    f = fopen(log, "r");
    if (f) {
      size_t n = fread(text, 1, sizeof text - 1, f);
      text[n] = 0;
      fclose(f);
    }
    ck_assert_msg(rc == 0, "ptxas rejected the PTX: %s", text);
    struct stat st;
    ck_assert_int_eq(stat(cubin, &st), 0);
    ck_assert_int_gt(st.st_size, 0);
    unlink(ptx);
    unlink(cubin);
    unlink(log);
    ck_assert_int_eq(rmdir(dir), 0);
  }
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_ptx_refuses_what_the_device_cannot_run) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k;
  int r1 = 1;
  nimble_ln_op_t lg = NIMBLE_LN_LOG;
  NIMBLE_ASSERT_OK(nimble_codegen_build_elementwise(A, "vlog", 1, &r1, 1, nimble_codegen_combine_unary, &lg, &k));
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(ks, 1, &o, &out), NIMBLE_UNIMPLEMENTED,
                      "kernel 'vlog': log is not available on nvptx64");
  ck_assert_ptr_null(out.ptx);
  nimble_ln_arena_destroy(A);
}
END_TEST


/* ---- thread mappings (nimble_codegen_map_threads) ----
 * A mapped kernel has one PARALLEL loop, which the CPU target runs through
 * env->parallel_for: so the rewritten index arithmetic is checked here, on
 * the CPU, against plain C, and the same kernel is then emitted as PTX. */

/* y = x * 2 + 1 over a rank-3 nest of serial loops. */
static nimble_ln_kernel *scale3(nimble_ln_arena *A, const char *name) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 3, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 3, 1);
  nimble_ln_var *v[3];
  nimble_ln_expr *idx[3];
  for (int a = 0; a < 3; a++) {
    v[a] = nimble_ln_var_create(A, a == 0 ? "i" : a == 1 ? "j" : "l", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(A, v[a]);
  }
  nimble_ln_expr *val = nimble_ln_binary(A, NIMBLE_LN_ADD,
                                         nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, x, nimble_ln_flat_index(A, x, idx)),
                                                          nimble_ln_f32(A, 2.0)),
                                         nimble_ln_f32(A, 1.0));
  nimble_ln_stmt *body = nimble_ln_store(A, y, nimble_ln_flat_index(A, y, idx), val);
  for (int a = 2; a >= 0; a--)
    body = nimble_ln_for(A, v[a], nimble_ln_i64(A, 0), nimble_ln_shape(A, y, a), NIMBLE_LN_SERIAL, 0, body);
  nimble_ln_kernel_set_body(k, body);
  return k;
}

/* c[b, i, j] = sum_k a[b, i, k] * w[k, j]: output loops b, i, j, an
 * accumulator loop over k inside. */
static nimble_ln_kernel *bmm(nimble_ln_arena *A, const char *name) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, name);
  nimble_ln_param *a = nimble_ln_kernel_add_param(k, "a", NIMBLE_LN_F32, 3, 0);
  nimble_ln_param *w = nimble_ln_kernel_add_param(k, "w", NIMBLE_LN_F32, 2, 0);
  nimble_ln_param *c = nimble_ln_kernel_add_param(k, "c", NIMBLE_LN_F32, 3, 1);
  nimble_ln_var *b = nimble_ln_var_create(A, "b", NIMBLE_LN_I64), *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64),
                *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64), *kk = nimble_ln_var_create(A, "k", NIMBLE_LN_I64),
                *acc = nimble_ln_var_create(A, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *ai[3] = {nimble_ln_ref(A, b), nimble_ln_ref(A, i), nimble_ln_ref(A, kk)};
  nimble_ln_expr *wi[2] = {nimble_ln_ref(A, kk), nimble_ln_ref(A, j)};
  nimble_ln_expr *ci[3] = {nimble_ln_ref(A, b), nimble_ln_ref(A, i), nimble_ln_ref(A, j)};
  nimble_ln_expr *prod = nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, a, nimble_ln_flat_index(A, a, ai)),
                                          nimble_ln_load(A, w, nimble_ln_flat_index(A, w, wi)));
  nimble_ln_stmt *inner = nimble_ln_for(A, kk, nimble_ln_i64(A, 0), nimble_ln_shape(A, w, 0), NIMBLE_LN_SERIAL, 0,
                                        nimble_ln_assign(A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, acc), prod)));
  nimble_ln_stmt *body = nimble_ln_decl(A, acc, nimble_ln_f32(A, 0.0),
                                        nimble_ln_seq2(A, inner, nimble_ln_store(A, c, nimble_ln_flat_index(A, c, ci),
                                                                                  nimble_ln_ref(A, acc))));
  body = nimble_ln_for(A, j, nimble_ln_i64(A, 0), nimble_ln_shape(A, c, 2), NIMBLE_LN_SERIAL, 0, body);
  body = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, c, 1), NIMBLE_LN_SERIAL, 0, body);
  body = nimble_ln_for(A, b, nimble_ln_i64(A, 0), nimble_ln_shape(A, c, 0), NIMBLE_LN_SERIAL, 0, body);
  nimble_ln_kernel_set_body(k, body);
  return k;
}

/* Exactly one loop of the mapped kernel is parallel, and it is the top one. */
static void expect_one_parallel_loop(const nimble_ln_kernel *k) {
  char *text;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  const char *p = strstr(text, "parallel");
  ck_assert_msg(p != NULL, "no parallel loop in\n%s", text);
  ck_assert_msg(strstr(p + 1, "parallel") == NULL, "two parallel loops in\n%s", text);
  free(text);
}

static void expect_ptxas_accepts(const nimble_ln_kernel *k) {
  const nimble_ln_kernel *ks[] = {k};
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &o, &out));
  ck_assert_ptr_nonnull(strstr(out.ptx, "%nctaid.x")); /* the grid-stride loop */
  if (access(PTXAS, X_OK) == 0) {
    char dir[] = "/tmp/nimble-ptxmap-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char ptx[128], cmd[512];
    snprintf(ptx, sizeof ptx, "%s/k.ptx", dir);
    FILE *f = fopen(ptx, "w");
    ck_assert_ptr_nonnull(f);
    fputs(out.ptx, f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, PTXAS " -arch=sm_80 %s -o /dev/null > /dev/null 2>&1", ptx);
    ck_assert_msg(system(cmd) == 0, "ptxas rejected the mapped kernel %s", k->name);
    unlink(ptx);
    ck_assert_int_eq(rmdir(dir), 0);
  }
  nimble_codegen_output_deinit(&out);
}

START_TEST(test_the_per_output_mapping_computes_every_element_of_a_rank_3_nest) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = scale3(A, "scale3");
  NIMBLE_ASSERT_OK(nimble_codegen_map_threads(A, k, NIMBLE_CODEGEN_MAP_PER_OUTPUT));
  expect_one_parallel_loop(k);
  const nimble_ln_kernel *ks[] = {k};
  harness_lib lib;
  harness_build_and_load(ks, 1, &lib);
  nimble_kernel_fn fn = harness_sym(&lib, "scale3");
  static const int64_t shapes[][3] = {{3, 5, 7}, {1, 1, 1}, {0, 4, 2}, {17, 1, 33}, {2, 9, 0}};
  unsigned seed = 7;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    harness_tensor x, y;
    harness_tensor_init(&x, 3, shapes[s], &seed, -1, 1);
    harness_tensor_init(&y, 3, shapes[s], &seed, 100, 101); /* a value the kernel never writes */
    double *want = malloc((x.n + 1) * sizeof *want);
    for (size_t e = 0; e < x.n; e++) want[e] = (double)x.f[e] * 2 + 1;
    harness_env he;
    harness_env_init(&he, 2, 0);
    DLTensor *args[] = {&x.t, &y.t};
    ck_assert_int_eq(fn(args, 2, &he.env), 0);
    harness_expect_close(y.f, want, x.n, 1e-6, 1e-6, "scale3");
    free(want);
    harness_tensor_deinit(&x);
    harness_tensor_deinit(&y);
  }
  harness_unload(&lib);
  expect_ptxas_accepts(k);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_the_tiled_mapping_computes_a_batched_matmul_across_tile_edges) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = bmm(A, "bmm");
  NIMBLE_ASSERT_OK(nimble_codegen_map_threads(A, k, NIMBLE_CODEGEN_MAP_TILED_2D));
  expect_one_parallel_loop(k);
  const nimble_ln_kernel *ks[] = {k};
  harness_lib lib;
  harness_build_and_load(ks, 1, &lib);
  nimble_kernel_fn fn = harness_sym(&lib, "bmm");
  /* B, M, K, N: tile edges (37 = 2*16+5, 21 = 16+5), exact tiles, a row
   * vector, a zero-size batch. */
  static const int64_t dims[][4] = {{2, 37, 5, 21}, {1, 16, 16, 16}, {3, 1, 3, 40}, {0, 4, 4, 4}, {1, 33, 1, 1}};
  unsigned seed = 11;
  for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
    int64_t B = dims[s][0], M = dims[s][1], K = dims[s][2], N = dims[s][3];
    int64_t as[3] = {B, M, K}, ws[2] = {K, N}, cs[3] = {B, M, N};
    harness_tensor a, w, c;
    harness_tensor_init(&a, 3, as, &seed, -1, 1);
    harness_tensor_init(&w, 2, ws, &seed, -1, 1);
    harness_tensor_init(&c, 3, cs, &seed, 100, 101);
    double *want = calloc(c.n + 1, sizeof *want);
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
          for (int64_t q = 0; q < K; q++) want[(b * M + i) * N + j] += (double)a.f[(b * M + i) * K + q] * w.f[q * N + j];
    harness_env he;
    harness_env_init(&he, 2, 0);
    DLTensor *args[] = {&a.t, &w.t, &c.t};
    ck_assert_int_eq(fn(args, 3, &he.env), 0);
    harness_expect_close(c.f, want, c.n, 1e-5, 1e-5, "bmm");
    free(want);
    harness_tensor_deinit(&a);
    harness_tensor_deinit(&w);
    harness_tensor_deinit(&c);
  }
  harness_unload(&lib);
  expect_ptxas_accepts(k);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_a_kernel_with_two_top_level_loops_is_left_as_it_is) {
  /* Two sibling nests may depend on each other (no grid-wide barrier):
   * the mapping leaves such a kernel alone. */
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k1 = scale3(A, "one"), *k2 = scale3(A, "two");
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "both");
  k->n_params = k1->n_params;
  for (int i = 0; i < k1->n_params; i++) k->params[i] = k1->params[i];
  nimble_ln_stmt *body = nimble_ln_seq2(A, k1->body, k1->body);
  nimble_ln_kernel_set_body(k, body);
  NIMBLE_ASSERT_OK(nimble_codegen_map_threads(A, k, NIMBLE_CODEGEN_MAP_PER_OUTPUT));
  ck_assert_ptr_eq(k->body, body);
  (void)k2;
  NIMBLE_ASSERT_ERROR(nimble_codegen_map_threads(A, k, (nimble_codegen_thread_mapping_t)7), NIMBLE_INVALID_ARGUMENT,
                      "unknown mapping 7");
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_ptx");
  TCase *tc = tcase_create("ptx");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_kernels_emit_ptx_entries_that_ptxas_accepts);
  tcase_add_test(tc, test_ptx_refuses_what_the_device_cannot_run);
  tcase_add_test(tc, test_the_per_output_mapping_computes_every_element_of_a_rank_3_nest);
  tcase_add_test(tc, test_the_tiled_mapping_computes_a_batched_matmul_across_tile_edges);
  tcase_add_test(tc, test_a_kernel_with_two_top_level_loops_is_left_as_it_is);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
