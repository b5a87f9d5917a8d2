/* Neural-network primitives: dense/matmul with fused epilogues (through
 * env->sgemm and through the kernel's own loops), conv2d + bias + relu,
 * pooling, softmax, layer norm and batch norm, run against direct C
 * loops written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/codegen.h"
#include "nimble/passes.h"
#include "nimble_test.h"

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

START_TEST(test_dense_bias_relu_is_one_kernel_with_and_without_sgemm) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(?, 19), float32], %w: Tensor[(13, 19), float32], %b: Tensor[(13,), float32]) {\n"
          "  relu(add(dense(%x, %w, transB=1), %b))\n"
          "}\n",
          "fused.dense");
  ck_assert_str_eq(f.prim, "fused.dense_add_relu");
  /* Both paths are in the kernel: env->sgemm then the epilogue in place,
   * and the kernel's own loops when the runtime has no sgemm. */
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
  ck_assert_msg(strstr(text, "sgemm") != NULL && strstr(text, "has_sgemm") != NULL, "%s", text);
  free(text);
  unsigned seed = 21;
  static const int64_t batches[] = {1, 3, 8, 17, 0, 2000};
  /* sg 2: the runtime also has sgemm_epilogue, which then takes the bias
   * over the columns and the relu (one call per non-empty batch). */
  for (int sg = 0; sg < 3; sg++) {
    ch_env env;
    ch_env_init(&env, sg >= 1);
    ch_env_threads(&env, 2);
    if (sg == 2) ch_env_epilogue(&env);
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
      int64_t M = batches[bi], K = 19, N = 13;
      long epi_before = ch_epilogue_calls;
      ch_tensor x, w, b, y;
      ch_tensor_f32(&x, 2, (int64_t[]){M, K}, &seed, -1, 1);
      ch_tensor_f32(&w, 2, (int64_t[]){N, K}, &seed, -1, 1);
      ch_tensor_f32(&b, 1, &N, &seed, -1, 1);
      ch_tensor_f32(&y, 2, (int64_t[]){M, N}, &seed, 5, 6);
      ch_tensor *args[] = {&x, &w, &b, &y};
      ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
      ck_assert_msg((ch_epilogue_calls > epi_before) == (sg == 2 && M > 0), "batch %lld: sgemm_epilogue %s expected",
                    (long long)M, sg == 2 && M > 0 ? "" : "not");
      float *want = malloc((size_t)(M * N + 1) * sizeof(float));
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double acc = 0;
          for (int64_t k = 0; k < K; k++) acc += (double)ch_f(&x)[i * K + k] * ch_f(&w)[j * K + k];
          acc += ch_f(&b)[j];
          want[i * N + j] = acc > 0 ? (float)acc : 0.0f;
        }
      ch_assert_close(sg == 2 ? "dense+bias+relu (sgemm_epilogue)" : sg ? "dense+bias+relu (sgemm)" : "dense+bias+relu (own loops)", ch_f(&y), want,
                      (size_t)(M * N), 1e-5f, 1e-5f);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&w), ch_tensor_free(&b), ch_tensor_free(&y);
    }
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_gemm_with_alpha_beta_c_and_transposed_a) {
  fixture f;
  fx_open(&f,
          "def @main(%a: Tensor[(k, m), float32], %b: Tensor[(k, n), float32], %c: Tensor[(n,), float32]) {\n"
          "  dense(%a, %b, %c, transA=1, alpha=0.5, beta=2.0)\n"
          "}\n",
          "fused.dense");
  unsigned seed = 23;
  int64_t K = 5, M = 4, N = 7;
  ch_env env;
  ch_env_init(&env, true);
  ch_tensor a, b, c, y;
  ch_tensor_f32(&a, 2, (int64_t[]){K, M}, &seed, -1, 1);
  ch_tensor_f32(&b, 2, (int64_t[]){K, N}, &seed, -1, 1);
  ch_tensor_f32(&c, 1, &N, &seed, -1, 1);
  ch_tensor_f32(&y, 2, (int64_t[]){M, N}, &seed, 0, 0);
  ch_tensor *args[] = {&a, &b, &c, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
  float want[28];
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += (double)ch_f(&a)[k * M + i] * ch_f(&b)[k * N + j];
      want[i * N + j] = (float)(0.5 * acc + 2.0 * ch_f(&c)[j]);
    }
  ch_assert_close("gemm", ch_f(&y), want, 28, 1e-5f, 1e-5f);
  /* Inner dimensions that differ fail the kernel. */
  ch_tensor_free(&b);
  ch_tensor_f32(&b, 2, (int64_t[]){K + 1, N}, &seed, -1, 1);
  ck_assert_int_ne(ch_call(&f.k, &env, args, 4), 0);
  ck_assert_msg(strstr(env.error, "differ") != NULL, "message: %s", env.error);
  ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&c), ch_tensor_free(&y);
  fx_close(&f);
}
END_TEST

START_TEST(test_batch_matmul_broadcasts_batch_dims_and_fuses_a_scale) {
  fixture f;
  fx_open(&f,
          "def @main(%a: Tensor[(?, 1, m, k), float32], %b: Tensor[(h, k, n), float32]) {\n"
          "  divide(matmul(%a, %b), 4.0)\n"
          "}\n",
          "fused.matmul");
  ck_assert_str_eq(f.prim, "fused.matmul_divide");
  unsigned seed = 29;
  int64_t B = 2, H = 3, M = 5, K = 6, N = 9;
  ch_env env;
  ch_env_init(&env, false);
  ch_tensor a, b, y;
  ch_tensor_f32(&a, 4, (int64_t[]){B, 1, M, K}, &seed, -1, 1);
  ch_tensor_f32(&b, 3, (int64_t[]){H, K, N}, &seed, -1, 1);
  ch_tensor_f32(&y, 4, (int64_t[]){B, H, M, N}, &seed, 0, 0);
  ch_tensor *args[] = {&a, &b, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args, 3), 0);
  float *want = malloc((size_t)(B * H * M * N) * sizeof(float));
  for (int64_t p = 0; p < B; p++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double acc = 0;
          for (int64_t k = 0; k < K; k++) acc += (double)ch_f(&a)[(p * M + i) * K + k] * ch_f(&b)[(h * K + k) * N + j];
          want[((p * H + h) * M + i) * N + j] = (float)(acc / 4.0);
        }
  ch_assert_close("batch matmul / 4", ch_f(&y), want, (size_t)(B * H * M * N), 1e-5f, 1e-5f);
  free(want);
  ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&y);
  fx_close(&f);
}
END_TEST

/* Direct convolution, NCHW / OIHW. */
static void conv_ref(const float *x, const float *w, const float *bias, float *y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t O, int64_t KH, int64_t KW, int64_t s, int64_t p, int64_t g, int64_t OH,
                     int64_t OW, bool relu) {
  int64_t cg = C / g, og = O / g;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = 0;
          int64_t grp = o / og;
          for (int64_t ci = 0; ci < cg; ci++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = oh * s - p + kh, iw = ow * s - p + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += (double)x[((n * C + grp * cg + ci) * H + ih) * W + iw] * w[((o * cg + ci) * KH + kh) * KW + kw];
              }
          acc += bias[o];
          y[((n * O + o) * OH + oh) * OW + ow] = relu && acc < 0 ? 0.0f : (float)acc;
        }
}

START_TEST(test_conv2d_bias_relu_is_one_kernel_matching_direct_loops) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(?, 3, h, w), float32], %k: Tensor[(8, 3, 3, 3), float32], %b: Tensor[(8, 1, 1), float32]) {\n"
          "  relu(add(conv2d(%x, %k, strides=[2, 2], pads=[1, 1, 1, 1]), %b))\n"
          "}\n",
          "fused.conv2d");
  ck_assert_str_eq(f.prim, "fused.conv2d_add_relu");
  unsigned seed = 31;
  static const int64_t sizes[][3] = {{1, 7, 7}, {2, 8, 5}, {1, 1, 1}};
  ch_env env;
  ch_env_init(&env, false);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t N = sizes[s][0], H = sizes[s][1], W = sizes[s][2];
    int64_t OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1;
    ch_tensor x, k, b, y;
    ch_tensor_f32(&x, 4, (int64_t[]){N, 3, H, W}, &seed, -1, 1);
    ch_tensor_f32(&k, 4, (int64_t[]){8, 3, 3, 3}, &seed, -1, 1);
    ch_tensor_f32(&b, 3, (int64_t[]){8, 1, 1}, &seed, -1, 1);
    ch_tensor_f32(&y, 4, (int64_t[]){N, 8, OH, OW}, &seed, 0, 0);
    ch_tensor *args[] = {&x, &k, &b, &y};
    ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
    float *want = malloc((size_t)(N * 8 * OH * OW) * sizeof(float));
    conv_ref(ch_f(&x), ch_f(&k), ch_f(&b), want, N, 3, H, W, 8, 3, 3, 2, 1, 1, OH, OW, true);
    ch_assert_close("conv2d+bias+relu", ch_f(&y), want, (size_t)(N * 8 * OH * OW), 1e-5f, 1e-5f);
    free(want);
    ch_tensor_free(&x), ch_tensor_free(&k), ch_tensor_free(&b), ch_tensor_free(&y);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_grouped_conv2d_with_its_bias_input) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(1, 4, 6, 6), float32], %k: Tensor[(6, 2, 3, 3), float32], %b: Tensor[(6,), float32]) {\n"
          "  conv2d(%x, %k, %b, groups=2)\n"
          "}\n",
          "fused.conv2d");
  unsigned seed = 37;
  ch_env env;
  ch_env_init(&env, false);
  ch_tensor x, k, b, y;
  ch_tensor_f32(&x, 4, (int64_t[]){1, 4, 6, 6}, &seed, -1, 1);
  ch_tensor_f32(&k, 4, (int64_t[]){6, 2, 3, 3}, &seed, -1, 1);
  ch_tensor_f32(&b, 1, (int64_t[]){6}, &seed, -1, 1);
  ch_tensor_f32(&y, 4, (int64_t[]){1, 6, 4, 4}, &seed, 0, 0);
  ch_tensor *args[] = {&x, &k, &b, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
  float want[96];
  conv_ref(ch_f(&x), ch_f(&k), ch_f(&b), want, 1, 4, 6, 6, 6, 3, 3, 1, 0, 2, 4, 4, false);
  ch_assert_close("grouped conv2d", ch_f(&y), want, 96, 1e-5f, 1e-5f);
  ch_tensor_free(&x), ch_tensor_free(&k), ch_tensor_free(&b), ch_tensor_free(&y);
  fx_close(&f);
}
END_TEST

START_TEST(test_max_and_average_pooling_with_padding) {
  unsigned seed = 41;
  ch_env env;
  ch_env_init(&env, false);
  int64_t H = 7, W = 6, OH = (7 + 2 - 3) / 2 + 1, OW = (6 + 2 - 3) / 2 + 1;
  ch_tensor x, y;
  ch_tensor_f32(&x, 4, (int64_t[]){2, 3, H, W}, &seed, -1, 1);
  for (int kind = 0; kind < 3; kind++) {
    fixture f;
    fx_open(&f,
            kind == 0 ? "def @main(%x: Tensor[(?, 3, h, w), float32]) { max_pool2d(%x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]) }\n"
            : kind == 1 ? "def @main(%x: Tensor[(?, 3, h, w), float32]) { avg_pool2d(%x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]) }\n"
                        : "def @main(%x: Tensor[(?, 3, h, w), float32]) { avg_pool2d(%x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1) }\n",
            "fused.");
    ch_tensor_f32(&y, 4, (int64_t[]){2, 3, OH, OW}, &seed, 0, 0);
    ch_tensor *args[] = {&x, &y};
    ck_assert_int_eq(ch_call(&f.k, &env, args, 2), 0);
    float want[2 * 3 * 4 * 3];
    for (int64_t nc = 0; nc < 6; nc++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          float best = -INFINITY;
          double sum = 0;
          int cnt = 0;
          for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) {
              int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              float v = ch_f(&x)[(nc * H + ih) * W + iw];
              best = fmaxf(best, v);
              sum += v;
              cnt++;
            }
          want[(nc * OH + oh) * OW + ow] = kind == 0 ? best : (float)(sum / (kind == 1 ? cnt : 9));
        }
    ch_assert_close(kind == 0 ? "max_pool2d" : "avg_pool2d", ch_f(&y), want, (size_t)(6 * OH * OW), 1e-6f, 1e-6f);
    ch_tensor_free(&y);
    fx_close(&f);
  }
  ch_tensor_free(&x);
  /* Global average pooling, on planes of whole vectors and a remainder
   * (7x6, 13x13, 3x40) and on an empty one (0x5, which averages to 0). */
  static const int64_t planes[][2] = {{7, 6}, {13, 13}, {3, 40}, {0, 5}};
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(?, 3, h, w), float32]) { global_avg_pool2d(%x) }\n", "fused.");
  for (size_t pi = 0; pi < sizeof planes / sizeof planes[0]; pi++) {
    int64_t ph = planes[pi][0], pw = planes[pi][1];
    ch_tensor_f32(&x, 4, (int64_t[]){2, 3, ph, pw}, &seed, -1, 1);
    ch_tensor_f32(&y, 4, (int64_t[]){2, 3, 1, 1}, &seed, 0, 0);
    ch_tensor *args[] = {&x, &y};
    if (ch_call(&f.k, &env, args, 2) != 0)
      ck_abort_msg("global_avg_pool2d %lldx%lld: %s", (long long)ph, (long long)pw, env.error);
    float want[6];
    for (int nc = 0; nc < 6; nc++) {
      double s = 0;
      for (int64_t i = 0; i < ph * pw; i++) s += ch_f(&x)[nc * ph * pw + i];
      want[nc] = ph * pw > 0 ? (float)(s / (double)(ph * pw)) : 0.0f;
    }
    ch_assert_close("global_avg_pool2d", ch_f(&y), want, 6, 1e-6f, 1e-5f);
    ch_tensor_free(&y), ch_tensor_free(&x);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_softmax_and_log_softmax_rows_sum_to_one) {
  unsigned seed = 43;
  ch_env env;
  ch_env_init(&env, false);
  for (int lg = 0; lg < 2; lg++) {
    fixture f;
    fx_open(&f, lg ? "def @main(%x: Tensor[(?, m), float32]) { log_softmax(%x, axis=-1) }\n"
                   : "def @main(%x: Tensor[(?, m), float32]) { softmax(%x, axis=-1) }\n",
            "fused.");
    static const int64_t shapes[][2] = {{3, 10}, {1, 1}, {5, 33}};
    for (size_t s = 0; s < 3; s++) {
      int64_t n = shapes[s][0], m = shapes[s][1];
      ch_tensor x, y;
      ch_tensor_f32(&x, 2, (int64_t[]){n, m}, &seed, -20, 20);
      ch_tensor_f32(&y, 2, (int64_t[]){n, m}, &seed, 0, 0);
      ch_tensor *args[] = {&x, &y};
      ck_assert_int_eq(ch_call(&f.k, &env, args, 2), 0);
      float *want = malloc((size_t)(n * m) * sizeof(float));
      for (int64_t i = 0; i < n; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < m; j++) mx = fmax(mx, ch_f(&x)[i * m + j]);
        for (int64_t j = 0; j < m; j++) sum += exp(ch_f(&x)[i * m + j] - mx);
        for (int64_t j = 0; j < m; j++) {
          double v = ch_f(&x)[i * m + j] - mx;
          want[i * m + j] = (float)(lg ? v - log(sum) : exp(v) / sum);
        }
      }
      ch_assert_close(lg ? "log_softmax" : "softmax", ch_f(&y), want, (size_t)(n * m), 1e-6f, 1e-5f);
      free(want);
      ch_tensor_free(&x), ch_tensor_free(&y);
    }
    fx_close(&f);
  }
  /* Along a middle axis. */
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(2, 5, 3), float32]) { softmax(%x, axis=1) }\n", "fused.");
  ch_tensor x, y;
  ch_tensor_f32(&x, 3, (int64_t[]){2, 5, 3}, &seed, -3, 3);
  ch_tensor_f32(&y, 3, (int64_t[]){2, 5, 3}, &seed, 0, 0);
  ch_tensor *args[] = {&x, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args, 2), 0);
  float want[30];
  for (int a = 0; a < 2; a++)
    for (int c = 0; c < 3; c++) {
      double sum = 0;
      for (int b = 0; b < 5; b++) sum += exp(ch_f(&x)[(a * 5 + b) * 3 + c]);
      for (int b = 0; b < 5; b++) want[(a * 5 + b) * 3 + c] = (float)(exp(ch_f(&x)[(a * 5 + b) * 3 + c]) / sum);
    }
  ch_assert_close("softmax axis 1", ch_f(&y), want, 30, 1e-6f, 1e-5f);
  ch_tensor_free(&x), ch_tensor_free(&y);
  fx_close(&f);
}
END_TEST

/* The row maximum in lanes (nn.c's row_max_lanes: blocks of 32 in four
 * groups of 8, then blocks of 8, then the tail): on rows of 75 = 2*32 + 8
 * + 3, 43, 31 and 8, a 100 among values in [-3, 3] placed in each group
 * of a 32-block, in the 8-block and in the tail. A maximum that missed it
 * would leave exp(100 - 3) = inf in the sum and the row NaN; a NaN in a
 * lane of group 2 makes its row NaN. */
START_TEST(test_softmax_finds_the_maximum_in_every_lane_group) {
  unsigned seed = 47;
  ch_env env;
  ch_env_init(&env, false);
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(?, m), float32]) { softmax(%x, axis=-1) }\n", "fused.");
  static const int64_t widths[] = {75, 43, 31, 8};
  static const int64_t at[] = {3, 13, 22, 30, 37, 65, 71, 74}; /* groups 0-3, 32-block 2, 8-block, tail */
  for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
    int64_t m = widths[wi], n = (int64_t)(sizeof at / sizeof at[0]) + 1;
    ch_tensor x, y;
    ch_tensor_f32(&x, 2, (int64_t[]){n, m}, &seed, -3, 3);
    ch_tensor_f32(&y, 2, (int64_t[]){n, m}, &seed, 0, 0);
    for (int64_t r = 0; r + 1 < n; r++) ch_f(&x)[r * m + at[r] % m] = 100.0f;
    ch_f(&x)[(n - 1) * m + (m > 21 ? 21 : m - 1)] = NAN; /* lane 5 of group 2 */
    ch_tensor *args[] = {&x, &y};
    ck_assert_int_eq(ch_call(&f.k, &env, args, 2), 0);
    for (int64_t r = 0; r < n; r++) {
      double mx = -INFINITY, sum = 0;
      const float *xr = ch_f(&x) + r * m, *yr = ch_f(&y) + r * m;
      for (int64_t j = 0; j < m; j++) mx = fmax(mx, xr[j]);
      for (int64_t j = 0; j < m; j++) sum += exp(xr[j] - mx);
      for (int64_t j = 0; j < m; j++) {
        if (r == n - 1) {
          ck_assert_msg(isnan(yr[j]), "width %lld: NaN row, column %lld = %g", (long long)m, (long long)j, yr[j]);
          continue;
        }
        double want = exp(xr[j] - mx) / sum;
        ck_assert_msg(fabs(yr[j] - want) <= 1e-6 + 1e-5 * want, "width %lld row %lld column %lld: %g, want %g",
                      (long long)m, (long long)r, (long long)j, yr[j], want);
      }
    }
    ch_tensor_free(&x), ch_tensor_free(&y);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_layer_norm_and_batch_norm_match_their_formulas) {
  unsigned seed = 47;
  ch_env env;
  ch_env_init(&env, false);
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(?, 24), float32], %g: Tensor[(24,), float32], %b: Tensor[(24,), float32]) {\n"
          "  layer_norm(%x, %g, %b, epsilon=1e-5)\n"
          "}\n",
          "fused.");
  int64_t n = 5, d = 24;
  ch_tensor x, g, b, y;
  ch_tensor_f32(&x, 2, (int64_t[]){n, d}, &seed, -2, 3);
  ch_tensor_f32(&g, 1, &d, &seed, 0.5f, 1.5f);
  ch_tensor_f32(&b, 1, &d, &seed, -1, 1);
  ch_tensor_f32(&y, 2, (int64_t[]){n, d}, &seed, 0, 0);
  ch_tensor *args[] = {&x, &g, &b, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args, 4), 0);
  float want[120];
  for (int64_t i = 0; i < n; i++) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; j++) mean += ch_f(&x)[i * d + j];
    mean /= (double)d;
    for (int64_t j = 0; j < d; j++) var += (ch_f(&x)[i * d + j] - mean) * (ch_f(&x)[i * d + j] - mean);
    var /= (double)d;
    for (int64_t j = 0; j < d; j++)
      want[i * d + j] = (float)((ch_f(&x)[i * d + j] - mean) / sqrt(var + 1e-5) * ch_f(&g)[j] + ch_f(&b)[j]);
  }
  ch_assert_close("layer_norm", ch_f(&y), want, 120, 1e-5f, 1e-5f);
  ch_tensor_free(&x), ch_tensor_free(&g), ch_tensor_free(&b), ch_tensor_free(&y);
  fx_close(&f);

  fx_open(&f,
          "def @main(%x: Tensor[(?, 3, 4, 4), float32], %s: Tensor[(3,), float32], %o: Tensor[(3,), float32],\n"
          "          %mu: Tensor[(3,), float32], %v: Tensor[(3,), float32]) {\n"
          "  batch_norm(%x, %s, %o, %mu, %v, epsilon=0.001)\n"
          "}\n",
          "fused.");
  ch_tensor s, o, mu, v;
  ch_tensor_f32(&x, 4, (int64_t[]){2, 3, 4, 4}, &seed, -2, 2);
  int64_t three = 3;
  ch_tensor_f32(&s, 1, &three, &seed, 0.5f, 1.5f);
  ch_tensor_f32(&o, 1, &three, &seed, -1, 1);
  ch_tensor_f32(&mu, 1, &three, &seed, -1, 1);
  ch_tensor_f32(&v, 1, &three, &seed, 0.1f, 2);
  ch_tensor_f32(&y, 4, (int64_t[]){2, 3, 4, 4}, &seed, 0, 0);
  ch_tensor *args2[] = {&x, &s, &o, &mu, &v, &y};
  ck_assert_int_eq(ch_call(&f.k, &env, args2, 6), 0);
  float want2[96];
  for (int i = 0; i < 96; i++) {
    int c = (i / 16) % 3;
    double r = (ch_f(&x)[i] - ch_f(&mu)[c]) / sqrt(ch_f(&v)[c] + 0.001) * ch_f(&s)[c] + ch_f(&o)[c];
    want2[i] = (float)r;
  }
  ch_assert_close("batch_norm", ch_f(&y), want2, 96, 1e-5f, 1e-5f);
  ch_tensor_free(&x), ch_tensor_free(&s), ch_tensor_free(&o), ch_tensor_free(&mu), ch_tensor_free(&v);
  ch_tensor_free(&y);
  fx_close(&f);
}
END_TEST

/* The primitives of the sample programs that compute/ may refuse as
 * UNIMPLEMENTED, each with the reason: a refusal of any other primitive,
 * or of one of these with another code, fails the test, and so does a
 * listed primitive that builds (the list only shrinks). Every primitive of
 * the sample programs builds today, so the list is empty. */
static const struct {
  const char *program;   /* relative to the source tree */
  const char *primitive; /* the primitive function's name */
  const char *why;
} kMayBeUnimplemented[] = {
    {NULL, NULL, NULL}, /* end */
};

static bool may_be_unimplemented(const char *rel, const char *name) {
  for (size_t i = 0; kMayBeUnimplemented[i].program; i++)
    if (!strcmp(kMayBeUnimplemented[i].program, rel) && !strcmp(kMayBeUnimplemented[i].primitive, name))
      return true;
  return false;
}

/* Every primitive of the repository's sample programs becomes a kernel
 * that compiles, unless kMayBeUnimplemented lists it (never another error,
 * never a crash). */
static void build_all(const char *rel) {
  const char *src = getenv("NIMBLE_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", src, rel);
  FILE *fp = fopen(path, "rb");
  ck_assert_msg(fp != NULL, "cannot open %s", path);
  char *text = calloc(1, 1 << 16);
  size_t n = fread(text, 1, (1 << 16) - 1, fp);
  fclose(fp);
  ck_assert_uint_gt(n, 0);
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m = ch_compile_module(arena, text);
  free(text);
  int built = 0;
  for (size_t i = 0; i < nimble_module_num_funcs(m); i++) {
    const char *name = nimble_module_func_at(m, i)->name;
    if (!nimble_passes_is_primitive(name)) continue;
    nimble_ln_arena *la;
    NIMBLE_ASSERT_OK(nimble_ln_arena_create(&la));
    nimble_ln_kernel *k = NULL;
    nimble_status_t s = nimble_compute_primitive(m, name, NULL, la, &k);
    if (s) {
      ck_assert_msg(may_be_unimplemented(rel, name) && nimble_status_code(s) == NIMBLE_UNIMPLEMENTED,
                    "%s: %s is refused (%s: %s) and kMayBeUnimplemented does not list it", rel, name,
                    nimble_status_code_name(nimble_status_code(s)), nimble_status_message(s));
      nimble_status_free(s);
    } else {
      ck_assert_msg(!may_be_unimplemented(rel, name),
                    "%s: %s builds now: remove it from kMayBeUnimplemented", rel, name);
      nimble_codegen_output_t out;
      const nimble_ln_kernel *ks[1] = {k};
      nimble_codegen_options_t co = ch_codegen_options();
      NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 1, &co, &out));
      nimble_codegen_output_deinit(&out);
      built++;
    }
    nimble_ln_arena_destroy(la);
  }
  ck_assert_int_gt(built, 0);
  nimble_arena_destroy(arena);
}

START_TEST(test_every_primitive_of_the_sample_programs_builds_unless_listed_as_unimplemented) {
  build_all("tests/compiler/passes/programs/attention.nir");
  build_all("tests/compiler/passes/programs/mlp3.nir");
  build_all("tests/compiler/programs/layers.nir");
  build_all("tests/compiler/programs/control_flow.nir");
  build_all("tests/compiler/programs/dynamic_mlp.nir");
}
END_TEST

/* Runs primitive `name` the way the VM does after manifest_memory: its
 * shape function on the inputs' shapes gives the output shape, the output
 * is allocated, the kernel fills it. */
static void run_like_the_vm(const nimble_module *m, const char *name, ch_env *env, ch_tensor *const *in, int n_in,
                            ch_tensor *out) {
  ch_kernel sf, k;
  ch_kernel_build(m, name, true, NULL, &sf);
  ch_tensor shapes[8], oshape;
  ch_tensor *args[9];
  for (int i = 0; i < n_in; i++) {
    int64_t r = in[i]->t.ndim;
    ch_tensor_i64(&shapes[i], 1, &r, in[i]->shape);
    args[i] = &shapes[i];
  }
  int64_t rank = 2;
  ch_tensor_i64(&oshape, 1, &rank, NULL);
  args[n_in] = &oshape;
  ck_assert_int_eq(ch_call(&sf, env, args, n_in + 1), 0);
  unsigned seed = 0;
  ch_tensor_f32(out, 2, ch_i(&oshape), &seed, 9, 9);
  for (int i = 0; i < n_in; i++) ch_tensor_free(&shapes[i]);
  ch_tensor_free(&oshape);
  ch_kernel_free(&sf);
  ch_kernel_build(m, name, false, NULL, &k);
  for (int i = 0; i < n_in; i++) args[i] = in[i];
  args[n_in] = out;
  ck_assert_int_eq(ch_call(&k, env, args, n_in + 1), 0);
  ch_kernel_free(&k);
}

START_TEST(test_a_three_layer_mlp_runs_primitive_by_primitive_like_the_vm) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m = ch_compile_module(arena,
      "def @main(%x: Tensor[(?, 12), float32], %w1: Tensor[(16, 12), float32], %b1: Tensor[(16,), float32],\n"
      "          %w2: Tensor[(5, 16), float32], %b2: Tensor[(5,), float32]) {\n"
      "  let %h = relu(add(dense(%x, %w1, transB=1), %b1));\n"
      "  softmax(add(dense(%h, %w2, transB=1), %b2), axis=-1)\n"
      "}\n");
  unsigned seed = 53;
  int64_t B = 7;
  ch_tensor x, w1, b1, w2, b2, h, l, y;
  ch_tensor_f32(&x, 2, (int64_t[]){B, 12}, &seed, -1, 1);
  ch_tensor_f32(&w1, 2, (int64_t[]){16, 12}, &seed, -1, 1);
  ch_tensor_f32(&b1, 1, (int64_t[]){16}, &seed, -1, 1);
  ch_tensor_f32(&w2, 2, (int64_t[]){5, 16}, &seed, -1, 1);
  ch_tensor_f32(&b2, 1, (int64_t[]){5}, &seed, -1, 1);
  ch_env env;
  ch_env_init(&env, true);
  ch_tensor *in1[] = {&x, &w1, &b1};
  run_like_the_vm(m, "fused.dense_add_relu", &env, in1, 3, &h);
  ch_tensor *in2[] = {&h, &w2, &b2};
  run_like_the_vm(m, "fused.dense_add", &env, in2, 3, &l);
  ch_tensor *in3[] = {&l};
  run_like_the_vm(m, "fused.softmax", &env, in3, 1, &y);
  ck_assert_int_eq(y.shape[0], B);
  ck_assert_int_eq(y.shape[1], 5);
  for (int64_t i = 0; i < B; i++) {
    double hid[16], lg[5], mx = -INFINITY, sum = 0;
    for (int j = 0; j < 16; j++) {
      double a = ch_f(&b1)[j];
      for (int k = 0; k < 12; k++) a += (double)ch_f(&x)[i * 12 + k] * ch_f(&w1)[j * 12 + k];
      hid[j] = a > 0 ? a : 0;
    }
    for (int j = 0; j < 5; j++) {
      double a = ch_f(&b2)[j];
      for (int k = 0; k < 16; k++) a += hid[k] * ch_f(&w2)[j * 16 + k];
      lg[j] = a;
      mx = fmax(mx, a);
    }
    for (int j = 0; j < 5; j++) sum += exp(lg[j] - mx);
    for (int j = 0; j < 5; j++) {
      float want = (float)(exp(lg[j] - mx) / sum);
      ck_assert_msg(fabsf(ch_f(&y)[i * 5 + j] - want) <= 1e-5f, "y[%lld][%d] = %g, want %g", (long long)i, j,
                    (double)ch_f(&y)[i * 5 + j], (double)want);
    }
  }
  ch_tensor *all[] = {&x, &w1, &b1, &w2, &b2, &h, &l, &y};
  for (int i = 0; i < 8; i++) ch_tensor_free(all[i]);
  nimble_arena_destroy(arena);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_nn");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_dense_bias_relu_is_one_kernel_with_and_without_sgemm);
  tcase_add_test(tc, test_gemm_with_alpha_beta_c_and_transposed_a);
  tcase_add_test(tc, test_batch_matmul_broadcasts_batch_dims_and_fuses_a_scale);
  tcase_add_test(tc, test_conv2d_bias_relu_is_one_kernel_matching_direct_loops);
  tcase_add_test(tc, test_grouped_conv2d_with_its_bias_input);
  tcase_add_test(tc, test_max_and_average_pooling_with_padding);
  tcase_add_test(tc, test_softmax_and_log_softmax_rows_sum_to_one);
  tcase_add_test(tc, test_softmax_finds_the_maximum_in_every_lane_group);
  tcase_add_test(tc, test_layer_norm_and_batch_norm_match_their_formulas);
  tcase_add_test(tc, test_a_three_layer_mlp_runs_primitive_by_primitive_like_the_vm);
  tcase_add_test(tc, test_every_primitive_of_the_sample_programs_builds_unless_listed_as_unimplemented);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
