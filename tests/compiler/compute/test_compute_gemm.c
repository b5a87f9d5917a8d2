/* Dense and matmul through env->sgemm (compute/nn.c cp_gemm_sgemm): the
 * batched and folded forms, dense's C input added after the product, and
 * the epilogues in place. Every kernel runs twice, once with an sgemm that
 * counts its calls (and computes with a plain triple loop written here) and
 * once without sgemm (the kernel's own loops); both are checked against a
 * NumPy-semantics matmul in double written here, and the call counts show
 * which form ran. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble_test.h"

static long sgemm_calls;
static float sgemm_alpha; /* the last call's */

/* C = alpha op(A) op(B) + beta C, row-major, as the kernel ABI says. */
static void counting_sgemm(int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  __atomic_fetch_add(&sgemm_calls, 1, __ATOMIC_RELAXED);
  sgemm_alpha = alpha;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++)
        acc += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      float *cij = &c[i * ldc + j];
      *cij = (float)(alpha * acc) + (beta == 0.0f ? 0.0f : beta * *cij);
    }
}

typedef struct fixture {
  nimble_arena *arena;
  nimble_module *m;
  const char *prim;
  ch_kernel k;
} fixture;

static void fx_open(fixture *f, const char *text, const char *prefix) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&f->arena));
  f->m = ch_compile_module(f->arena, text);
  f->prim = ch_find_primitive(f->m, prefix);
  ch_kernel_build(f->m, f->prim, false, NULL, &f->k);
}

static void fx_close(fixture *f) {
  ch_kernel_free(&f->k);
  nimble_arena_destroy(f->arena);
}

/* NumPy matmul of a [ra dims] and b [rb dims] (both rank >= 2) into want,
 * result rank R (batch axes broadcast, right-aligned). */
static void ref_matmul(const ch_tensor *a, const ch_tensor *b, int R, const int64_t *out, double *want) {
  int ra = (int)a->t.ndim, rb = (int)b->t.ndim, nb = R - 2;
  int64_t M = out[R - 2], N = out[R - 1], K = a->shape[ra - 1];
  int64_t batches = 1;
  for (int x = 0; x < nb; x++) batches *= out[x];
  for (int64_t t = 0; t < batches; t++) {
    int64_t idx[8], rem = t;
    for (int x = nb - 1; x >= 0; x--) {
      idx[x] = rem % out[x];
      rem /= out[x];
    }
    int64_t ao = 0, bo = 0;
    for (int x = 0; x < ra - 2; x++) {
      int64_t e = a->shape[x], i = idx[x + nb - (ra - 2)];
      ao = ao * e + (e == 1 ? 0 : i);
    }
    for (int x = 0; x < rb - 2; x++) {
      int64_t e = b->shape[x], i = idx[x + nb - (rb - 2)];
      bo = bo * e + (e == 1 ? 0 : i);
    }
    const float *pa = ch_f(a) + ao * M * K, *pb = ch_f(b) + bo * K * N;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t p = 0; p < K; p++) acc += (double)pa[i * K + p] * pb[p * N + j];
        want[(t * M + i) * N + j] = acc;
      }
  }
}

static void assert_close_d(const char *what, const float *got, const double *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(fabs((double)got[i] - want[i]) <= 1e-5 + 1e-5 * fabs(want[i]), "%s: [%zu] = %.9g, want %.9g",
                  what, i, (double)got[i], want[i]);
}

static void env_with(ch_env *env, bool sgemm) {
  ch_env_init(env, false);
  ch_env_threads(env, 2);
  env->env.sgemm = sgemm ? counting_sgemm : NULL;
  sgemm_calls = 0;
}

START_TEST(test_rank3_times_matrix_plus_bias_is_one_sgemm_call) {
  /* Attention's projections: [1, seq, 128] x [128, 384] + bias, the
   * batch axis folded into the rows. */
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(b, seq, 6), float32], %w: Tensor[(6, 10), float32], %c: Tensor[(10,), float32]) {\n"
          "  add(%c, matmul(%x, %w))\n"
          "}\n",
          "fused.matmul");
  ck_assert_str_eq(f.prim, "fused.matmul_add");
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
  ck_assert_msg(strstr(text, "sgemm") != NULL, "%s", text);
  free(text);
  unsigned seed = 31;
  static const int64_t shapes[][2] = {{1, 16}, {2, 7}, {3, 1}, {1, 0}, {0, 5}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int sg = 0; sg < 2; sg++) {
      int64_t B = shapes[s][0], S = shapes[s][1], K = 6, N = 10;
      ch_env env;
      env_with(&env, sg == 1);
      ch_tensor x, w, c, y;
      ch_tensor_f32(&x, 3, (int64_t[]){B, S, K}, &seed, -1, 1);
      ch_tensor_f32(&w, 2, (int64_t[]){K, N}, &seed, -1, 1);
      ch_tensor_f32(&c, 1, &N, &seed, -1, 1);
      ch_tensor_f32(&y, 3, (int64_t[]){B, S, N}, &seed, 7, 8);
      /* The primitive's parameters in the order they appear: c, x, w. */
      ch_tensor *args[] = {&c, &x, &w, &y};
      ck_assert_msg(ch_call(&f.k, &env, args, 4) == 0, "[%lld, %lld, 6]: %s", (long long)B, (long long)S, env.error);
      size_t n = (size_t)(B * S * N);
      double *want = malloc((n + 1) * sizeof *want);
      ref_matmul(&x, &w, 3, (int64_t[]){B, S, N}, want);
      for (size_t i = 0; i < n; i++) want[i] += ch_f(&c)[i % (size_t)N];
      assert_close_d(sg ? "matmul+bias (sgemm)" : "matmul+bias (own loops)", ch_f(&y), want, n);
      /* One call for every row of every batch; none for an empty product. */
      ck_assert_int_eq(sgemm_calls, sg && n > 0 ? 1 : 0);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&c), ch_tensor_free(&y);
    }
  fx_close(&f);
}
END_TEST

START_TEST(test_batched_matmul_broadcasts_and_scales_with_one_call_per_matrix) {
  /* Attention scores: [b, h, m, k] x [b, h, k, n] * 0.125, and operands
   * whose batch axes broadcast from 1 or are missing. */
  static const struct {
    const char *text;
    int ra, rb;
    int64_t as[4], bs[4];
  } cases[] = {
      {"def @main(%a: Tensor[(b, h, m, k), float32], %q: Tensor[(b, h, k, n), float32]) {\n"
       "  multiply(matmul(%a, %q), 0.125)\n}\n",
       4, 4, {2, 3, 5, 4}, {2, 3, 4, 7}},
      {"def @main(%a: Tensor[(b, 1, m, k), float32], %q: Tensor[(h, k, n), float32]) {\n"
       "  multiply(matmul(%a, %q), 0.125)\n}\n",
       4, 3, {2, 1, 5, 4}, {3, 4, 7}},
      {"def @main(%a: Tensor[(?, ?, m, k), float32], %q: Tensor[(?, ?, k, n), float32]) {\n"
       "  multiply(matmul(%a, %q), 0.125)\n}\n",
       4, 4, {1, 3, 6, 2}, {2, 1, 2, 5}},
      {"def @main(%a: Tensor[(m, k), float32], %q: Tensor[(h, k, n), float32]) {\n"
       "  multiply(matmul(%a, %q), 0.125)\n}\n",
       2, 3, {5, 4}, {3, 4, 9}},
  };
  unsigned seed = 37;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    fixture f;
    fx_open(&f, cases[ci].text, "fused.matmul");
    ck_assert_str_eq(f.prim, "fused.matmul_multiply");
    int ra = cases[ci].ra, rb = cases[ci].rb, R = ra > rb ? ra : rb;
    int64_t out[4];
    for (int x = 0; x < R - 2; x++) {
      int xa = x - (R - ra), xb = x - (R - rb);
      int64_t ea = xa >= 0 ? cases[ci].as[xa] : 1, eb = xb >= 0 ? cases[ci].bs[xb] : 1;
      out[x] = ea > eb ? ea : eb;
    }
    out[R - 2] = cases[ci].as[ra - 2];
    out[R - 1] = cases[ci].bs[rb - 1];
    int64_t matrices = 1;
    for (int x = 0; x < R - 2; x++) matrices *= out[x];
    for (int sg = 0; sg < 2; sg++) {
      ch_env env;
      env_with(&env, sg == 1);
      ch_tensor a, b, y;
      ch_tensor_f32(&a, ra, cases[ci].as, &seed, -1, 1);
      ch_tensor_f32(&b, rb, cases[ci].bs, &seed, -1, 1);
      ch_tensor_f32(&y, R, out, &seed, 7, 8);
      ch_tensor *args[] = {&a, &b, &y};
      ck_assert_int_eq(ch_call(&f.k, &env, args, 3), 0);
      size_t n = (size_t)(matrices * out[R - 2] * out[R - 1]);
      double *want = malloc((n + 1) * sizeof *want);
      ref_matmul(&a, &b, R, out, want);
      for (size_t i = 0; i < n; i++) want[i] *= 0.125;
      char what[96];
      snprintf(what, sizeof what, "case %zu, %s", ci, sg ? "sgemm" : "own loops");
      assert_close_d(what, ch_f(&y), want, n);
      ck_assert_msg(sgemm_calls == (sg ? matrices : 0), "case %zu: %ld sgemm calls, want %lld", ci, sgemm_calls,
                    (long long)(sg ? matrices : 0));
      free(want);
      ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&y);
    }
    fx_close(&f);
  }
}
END_TEST

/* A constant factor on the product goes into sgemm's alpha (multiply by
 * any finite nonzero scalar, either side; divide by a power of two); other
 * factors stay a pass after the product with alpha 1: divide by 3 (whose
 * inverse is inexact) and multiply by 0 (0 * inf must stay NaN, where
 * alpha 0 would skip the product). Checked against the double reference,
 * an inf in A included. */
START_TEST(test_a_constant_factor_becomes_sgemm_alpha) {
  static const struct {
    const char *expr;
    double factor;
    float alpha; /* what sgemm must be called with */
  } cases[] = {
      {"multiply(matmul(%a, %q), 0.3)", 0.3, 0.3f},
      {"multiply(-2.5, matmul(%a, %q))", -2.5, -2.5f},
      {"divide(matmul(%a, %q), 8.0)", 0.125, 0.125f},
      {"divide(matmul(%a, %q), 3.0)", 1.0 / 3.0, 1.0f},
      {"multiply(matmul(%a, %q), 0.0)", 0.0, 1.0f},
  };
  unsigned seed = 41;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    char text[256];
    snprintf(text, sizeof text,
             "def @main(%%a: Tensor[(h, m, k), float32], %%q: Tensor[(h, k, n), float32]) {\n  %s\n}\n",
             cases[ci].expr);
    fixture f;
    fx_open(&f, text, "fused.matmul");
    for (int sg = 0; sg < 2; sg++) {
      ch_env env;
      env_with(&env, sg == 1);
      sgemm_alpha = 0;
      ch_tensor a, b, y;
      int64_t as[3] = {2, 5, 4}, bs[3] = {2, 4, 6}, out[3] = {2, 5, 6};
      ch_tensor_f32(&a, 3, as, &seed, -1, 1);
      ch_tensor_f32(&b, 3, bs, &seed, -1, 1);
      ch_tensor_f32(&y, 3, out, &seed, 7, 8);
      ch_f(&a)[3] = INFINITY; /* row 0 of matrix 0: +-inf, or NaN times 0 */
      ch_tensor *args[] = {&a, &b, &y};
      ck_assert_int_eq(ch_call(&f.k, &env, args, 3), 0);
      double want[60];
      ref_matmul(&a, &b, 3, out, want);
      for (size_t i = 0; i < 60; i++) {
        double w = want[i] * cases[ci].factor;
        if (cases[ci].factor == 0.0) w = isinf(want[i]) ? NAN : 0.0;
        float got = ch_f(&y)[i];
        if (isnan(w) || isinf(w))
          ck_assert_msg(isnan(w) ? isnan(got) : got == (float)w, "%s [%zu] = %g, want %g", cases[ci].expr, i, got, w);
        else
          ck_assert_msg(fabs(got - w) <= 1e-5 + 1e-5 * fabs(w), "%s [%zu] = %.9g, want %.9g", cases[ci].expr, i, got, w);
      }
      if (sg) {
        ck_assert_int_eq(sgemm_calls, 2);
        ck_assert_msg(sgemm_alpha == cases[ci].alpha, "%s: sgemm alpha %g, want %g", cases[ci].expr, sgemm_alpha,
                      cases[ci].alpha);
      }
      ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&y);
    }
    fx_close(&f);
  }
}
END_TEST

START_TEST(test_dense_with_its_c_input_goes_through_sgemm_then_adds_c) {
  /* The MLP's layers: dense(x, w, bias, transB=1) and its relu; C as a
   * row, as a full matrix, with alpha and beta. */
  static const struct {
    const char *text;
    int c_rank;
    float alpha, beta;
    bool relu, w_kn; /* w stored [K, N] (no transB): the own loops go row by row */
  } cases[] = {
      {"def @main(%x: Tensor[(?, 9), float32], %w: Tensor[(11, 9), float32], %c: Tensor[(11,), float32]) {\n"
       "  relu(dense(%x, %w, %c, transB=1))\n}\n",
       1, 1.0f, 1.0f, true, false},
      {"def @main(%x: Tensor[(?, 9), float32], %w: Tensor[(11, 9), float32], %c: Tensor[(?, 11), float32]) {\n"
       "  dense(%x, %w, %c, transB=1, alpha=0.5, beta=-2.0)\n}\n",
       2, 0.5f, -2.0f, false, false},
      {"def @main(%x: Tensor[(?, 9), float32], %w: Tensor[(9, 11), float32], %c: Tensor[(11,), float32]) {\n"
       "  relu(dense(%x, %w, %c, alpha=0.5, beta=-2.0))\n}\n",
       1, 0.5f, -2.0f, true, true},
  };
  unsigned seed = 41;
  static const int64_t rows[] = {1, 5, 0, 130};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    fixture f;
    fx_open(&f, cases[ci].text, "fused.dense");
    if (cases[ci].w_kn) {
      /* The own loops walk w's rows (C[r, :] += a * w[p, :]), not its
       * columns. */
      char *text = NULL;
      NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
      ck_assert_msg(strstr(text, "av") != NULL, "%s", text);
      free(text);
    }
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
      for (int sg = 0; sg < 2; sg++) {
        int64_t M = rows[r], K = 9, N = 11;
        ch_env env;
        env_with(&env, sg == 1);
        ch_tensor x, w, c, y;
        ch_tensor_f32(&x, 2, (int64_t[]){M, K}, &seed, -1, 1);
        if (cases[ci].w_kn) ch_tensor_f32(&w, 2, (int64_t[]){K, N}, &seed, -1, 1);
        else ch_tensor_f32(&w, 2, (int64_t[]){N, K}, &seed, -1, 1);
        if (cases[ci].c_rank == 1) ch_tensor_f32(&c, 1, &N, &seed, -1, 1);
        else ch_tensor_f32(&c, 2, (int64_t[]){M, N}, &seed, -1, 1);
        ch_tensor_f32(&y, 2, (int64_t[]){M, N}, &seed, 7, 8);
        ch_tensor *args[] = {&x, &w, &c, &y};
        ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
        size_t n = (size_t)(M * N);
        double *want = malloc((n + 1) * sizeof *want);
        for (int64_t i = 0; i < M; i++)
          for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t p = 0; p < K; p++)
              acc += (double)ch_f(&x)[i * K + p] * ch_f(&w)[cases[ci].w_kn ? p * N + j : j * K + p];
            double cv = ch_f(&c)[cases[ci].c_rank == 1 ? j : i * N + j];
            double v = cases[ci].alpha * acc + cases[ci].beta * cv;
            want[i * N + j] = cases[ci].relu && v < 0 ? 0 : v;
          }
        char what[96];
        snprintf(what, sizeof what, "case %zu, %lld rows, %s", ci, (long long)M, sg ? "sgemm" : "own loops");
        assert_close_d(what, ch_f(&y), want, n);
        ck_assert_int_eq(sgemm_calls, sg && n > 0 ? 1 : 0);
        free(want);
        ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&c), ch_tensor_free(&y);
      }
    fx_close(&f);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_gemm");
  TCase *tc = tcase_create("gemm");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_rank3_times_matrix_plus_bias_is_one_sgemm_call);
  tcase_add_test(tc, test_batched_matmul_broadcasts_and_scales_with_one_call_per_matrix);
  tcase_add_test(tc, test_a_constant_factor_becomes_sgemm_alpha);
  tcase_add_test(tc, test_dense_with_its_c_input_goes_through_sgemm_then_adds_c);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
