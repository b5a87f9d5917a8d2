/* The runtime's own sgemm (runtime/src/vm/sgemm_own.c), every variant this
 * CPU runs (AVX-512, AVX2, portable; under qemu-aarch64 the portable NEON
 * one), against a plain double-accumulation reference written here: many
 * shapes around the register tile and cache blocks (1, tile sizes plus and
 * minus one, more rows than a row block, more columns than a column block,
 * k across the depth block), all four transpose combinations, alpha and
 * beta, padded leading dimensions (whose padding must stay untouched),
 * beta = 0 clearing NaNs, empty products, and calls from several threads
 * (each has its own packing buffers). */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "vm/sgemm_own.h"

/* A product with its operands, C's initial value and the expected result,
 * every matrix padded to its leading dimension. */
typedef struct gemm_case {
  int ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  float *a, *b, *c0, *c;
  double *want, *bound;
} gemm_case;

static const float PAD = 12345.0f; /* what C's padding holds, before and after */

static void case_make(gemm_case *g, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t pad, float alpha,
                      float beta, uint32_t seed) {
  memset(g, 0, sizeof *g);
  g->ta = ta;
  g->tb = tb;
  g->m = m;
  g->n = n;
  g->k = k;
  g->alpha = alpha;
  g->beta = beta;
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  g->lda = ac + pad;
  g->ldb = bc + pad;
  g->ldc = n + pad;
  g->a = malloc(sizeof(float) * (size_t)(ar * g->lda + 1));
  g->b = malloc(sizeof(float) * (size_t)(br * g->ldb + 1));
  g->c0 = malloc(sizeof(float) * (size_t)(m * g->ldc + 1));
  g->c = malloc(sizeof(float) * (size_t)(m * g->ldc + 1));
  g->want = malloc(sizeof(double) * (size_t)(m * n + 1));
  g->bound = malloc(sizeof(double) * (size_t)(m * n + 1));
  ck_assert(g->a && g->b && g->c0 && g->c && g->want && g->bound);
  for (int64_t i = 0; i < ar * g->lda; i++) g->a[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < br * g->ldb; i++) g->b[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < g->ldc; j++)
      g->c0[i * g->ldc + j] = j < n ? (beta == 0.0f ? NAN : nimble_test_uniform(&seed)) : PAD;
  /* The reference: the definition, in double; bound = the sum of the
   * terms' magnitudes, which sets the tolerance. */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = ta ? g->a[p * g->lda + i] : g->a[i * g->lda + p];
        double y = tb ? g->b[j * g->ldb + p] : g->b[p * g->ldb + j];
        acc += x * y;
        mag += fabs(x * y);
      }
      double cin = beta == 0.0f ? 0.0 : (double)beta * g->c0[i * g->ldc + j];
      g->want[i * n + j] = (double)alpha * acc + cin;
      g->bound[i * n + j] = fabs((double)alpha) * mag + fabs(cin);
    }
}

static void case_free(gemm_case *g) {
  free(g->a);
  free(g->b);
  free(g->c0);
  free(g->c);
  free(g->want);
  free(g->bound);
}

/* Runs the case on `isa` and checks C, padding included. Returns 0, or 1
 * with `msg` saying what differed. */
static int case_run(gemm_case *g, nimble_sgemm_isa isa, char *msg, size_t size) {
  memcpy(g->c, g->c0, sizeof(float) * (size_t)(g->m * g->ldc));
  if (!nimble_sgemm_own_isa(isa, g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb, g->beta,
                            g->c, g->ldc)) {
    snprintf(msg, size, "%s refused", nimble_sgemm_isa_name(isa));
    return 1;
  }
  for (int64_t i = 0; i < g->m; i++)
    for (int64_t j = 0; j < g->ldc; j++) {
      float got = g->c[i * g->ldc + j];
      int bad;
      double want;
      if (j >= g->n) {
        want = PAD;
        bad = got != PAD;
      } else {
        want = g->want[i * g->n + j];
        /* float accumulation: at most about k roundings of the running sum */
        double tol = (double)(g->k + 4) * 1.2e-7 * g->bound[i * g->n + j] + 1e-30;
        bad = !(fabs(got - want) <= tol);
      }
      if (bad) {
        snprintf(msg, size,
                 "%s ta=%d tb=%d m=%lld n=%lld k=%lld lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g: "
                 "C[%lld,%lld] = %.9g, want %.9g",
                 nimble_sgemm_isa_name(isa), g->ta, g->tb, (long long)g->m, (long long)g->n, (long long)g->k,
                 (long long)g->lda, (long long)g->ldb, (long long)g->ldc, (double)g->alpha, (double)g->beta,
                 (long long)i, (long long)j, (double)got, want);
        return 1;
      }
    }
  return 0;
}

/* Runs g on every variant this CPU has; a mismatch fails the test with
 * `what` before the mismatch's description. */
static void run_every_variant(gemm_case *g, const char *what) {
  char msg[512];
  for (int isa = NIMBLE_SGEMM_ISA_PORTABLE; isa <= NIMBLE_SGEMM_ISA_AVX512; isa++) {
    if (!nimble_sgemm_isa_available((nimble_sgemm_isa)isa)) continue;
    int bad = case_run(g, (nimble_sgemm_isa)isa, msg, sizeof msg);
    ck_assert_msg(!bad, "%s%s%s", what, *what ? ": " : "", msg);
  }
}

/* g takes h's A, C and expected result (g and h of one shape): with h's B
 * in g's place, g is h. */
static void case_take(gemm_case *g, const gemm_case *h) {
  int64_t arows = g->ta ? g->k : g->m;
  memcpy(g->a, h->a, sizeof(float) * (size_t)(arows * g->lda));
  memcpy(g->c0, h->c0, sizeof(float) * (size_t)(g->m * g->ldc));
  memcpy(g->want, h->want, sizeof(double) * (size_t)(g->m * g->n));
  memcpy(g->bound, h->bound, sizeof(double) * (size_t)(g->m * g->n));
}

/* Runs one case on every variant this CPU has. */
static void check_case(int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t pad, float alpha, float beta,
                       uint32_t seed) {
  gemm_case g;
  case_make(&g, ta, tb, m, n, k, pad, alpha, beta, seed);
  run_every_variant(&g, "");
  case_free(&g);
}

/* The epilogue (+ row bias, + column bias, + a residual with its own
 * leading dimension, clamp to [lo, hi] keeping NaN) on every variant: full
 * and edge tiles, the matrix-vector paths, depth past one block (the
 * epilogue must follow the last one only), alpha/beta. Row 1's A has a
 * NaN, so its C must stay NaN through the clamp. `parts`: bit 0 the row
 * bias, bit 1 the column bias, bit 2 the residual. */
static void check_epi_case(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, float lo,
                           float hi, int parts, uint32_t seed) {
  gemm_case g;
  case_make(&g, ta, tb, m, n, k, 1, alpha, beta, seed);
  int64_t ldr = n + 3;
  float *bias = malloc(sizeof(float) * (size_t)m), *cbias = malloc(sizeof(float) * (size_t)n);
  float *res = malloc(sizeof(float) * (size_t)(m * ldr));
  ck_assert(bias && cbias && res);
  for (int64_t i = 0; i < m; i++) bias[i] = nimble_test_uniform(&seed) * 4.0f;
  for (int64_t j = 0; j < n; j++) cbias[j] = nimble_test_uniform(&seed) * 2.0f;
  for (int64_t i = 0; i < m * ldr; i++) res[i] = nimble_test_uniform(&seed) * 3.0f;
  if (m > 1 && k > 0) g.a[ta ? 1 : g.lda] = NAN; /* op(A)[1, 0] */
  int with_bias = parts & 1;
  nimble_sgemm_epi epi = {with_bias ? bias : NULL, parts & 2 ? cbias : NULL, parts & 4 ? res : NULL, ldr, lo, hi};
  for (int isa = NIMBLE_SGEMM_ISA_PORTABLE; isa <= NIMBLE_SGEMM_ISA_AVX512; isa++) {
    if (!nimble_sgemm_isa_available((nimble_sgemm_isa)isa)) continue;
    memcpy(g.c, g.c0, sizeof(float) * (size_t)(m * g.ldc));
    ck_assert(nimble_sgemm_own_isa_epi((nimble_sgemm_isa)isa, ta, tb, m, n, k, alpha, g.a, g.lda, g.b, g.ldb, beta,
                                       g.c, g.ldc, &epi));
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < g.ldc; j++) {
        float got = g.c[i * g.ldc + j];
        if (j >= n) {
          ck_assert_msg(got == PAD, "%s: padding C[%lld,%lld] changed", nimble_sgemm_isa_name((nimble_sgemm_isa)isa),
                        (long long)i, (long long)j);
          continue;
        }
        int nan_row = m > 1 && k > 0 && alpha != 0.0f && i == 1;
        double extra = (with_bias ? bias[i] : 0.0) + (parts & 2 ? cbias[j] : 0.0) + (parts & 4 ? res[i * ldr + j] : 0.0);
        double want = g.want[i * n + j] + extra;
        double tol = (double)(k + 6) * 1.2e-7 * (g.bound[i * n + j] + fabs(bias[i]) + 5.0) + 1e-30;
        int ok;
        if (nan_row) {
          ok = isnan(got);
        } else if (want <= lo) {
          ok = got == lo || fabs(got - want) <= tol; /* at the bound, rounding decides */
        } else if (want >= hi) {
          ok = got == hi || fabs(got - want) <= tol;
        } else {
          ok = fabs(got - want) <= tol && got >= lo && got <= hi;
        }
        ck_assert_msg(ok, "%s ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g [%g, %g] parts=%d: C[%lld,%lld] = %.9g, want %.9g",
                      nimble_sgemm_isa_name((nimble_sgemm_isa)isa), ta, tb, (long long)m, (long long)n, (long long)k,
                      (double)alpha, (double)beta, (double)lo, (double)hi, parts, (long long)i, (long long)j,
                      (double)got, nan_row ? NAN : want);
      }
  }
  free(bias);
  free(cbias);
  free(res);
  case_free(&g);
}

START_TEST(test_epilogue_adds_the_row_bias_and_clamps_keeping_nan) {
  static const int64_t shapes[][3] = {{1, 40, 30},  {37, 1, 30}, {8, 32, 16},  {13, 67, 300},
                                      {96, 100, 16}, {5, 3, 9},   {130, 70, 5}, {24, 3100, 12}};
  uint32_t seed = 500;
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      check_epi_case(t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], 1.0f, 0.0f, 0.0f, 6.0f, 1, seed++);
      check_epi_case(t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], 0.5f, 1.0f, -INFINITY, INFINITY, 1,
                     seed++);
      check_epi_case(t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], 1.0f, 0.0f, 0.0f, INFINITY, 0, seed++);
      check_epi_case(t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], 1.0f, 0.0f, -INFINITY, INFINITY, 7,
                     seed++);
      check_epi_case(t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], 1.0f, 0.0f, 0.0f, 6.0f, 6, seed++);
    }
  /* An empty depth: C = beta * C, then the epilogue. */
  check_epi_case(0, 0, 9, 20, 0, 1.0f, 0.5f, -1.0f, 1.0f, 1, seed++);
}
END_TEST

START_TEST(test_portable_variant_is_always_available_and_best_is_available) {
  ck_assert(nimble_sgemm_isa_available(NIMBLE_SGEMM_ISA_PORTABLE));
  ck_assert(nimble_sgemm_isa_available(nimble_sgemm_own_best_isa()));
  ck_assert(!nimble_sgemm_isa_available((nimble_sgemm_isa)7));
  ck_assert_str_eq(nimble_sgemm_isa_name(NIMBLE_SGEMM_ISA_AVX512), "avx512");
  ck_assert_str_eq(nimble_sgemm_isa_name(NIMBLE_SGEMM_ISA_AVX2), "avx2");
  ck_assert_str_eq(nimble_sgemm_isa_name(NIMBLE_SGEMM_ISA_PORTABLE), "portable");
#if !defined(__x86_64__)
  ck_assert_int_eq(nimble_sgemm_own_best_isa(), NIMBLE_SGEMM_ISA_PORTABLE);
#endif
  printf("test_sgemm_own: best variant here: %s\n", nimble_sgemm_isa_name(nimble_sgemm_own_best_isa()));
}
END_TEST

/* Shapes around every variant's tiles (MR 4, 6, 8, 14; NR 8, 16, 32), the
 * one-vector and 8-row edge kernels (AVX-512: 17 and 22 are a 14-row panel
 * and one of 8, 16 two of 8, 40 three of 14), the matrix-vector paths, the
 * depth blocks (192, 256), a last panel one vector wide read in place (48
 * columns on AVX-512, 16 on AVX2) and, with B transposed, the few-column dot
 * products (n 3 and 11: blocks of 4 rows by 2 columns, rows and an odd
 * column left over, depths with a tail). */
START_TEST(test_every_transpose_and_shape_matches_the_reference) {
  static const int64_t ms[] = {1, 2, 5, 8, 13, 16, 17, 22, 40};
  static const int64_t ns[] = {1, 3, 11, 16, 17, 33, 48, 65, 100};
  static const int64_t ks[] = {1, 7, 64, 300};
  uint32_t seed = 1;
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
      for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++)
          check_case(t >> 1, t & 1, ms[i], ns[j], ks[q], 0, 1.0f, 0.0f, seed++);
}
END_TEST

START_TEST(test_alpha_beta_and_padded_leading_dimensions_match_the_reference) {
  static const float ab[][2] = {{1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, 0.0f}, {0.25f, -1.0f}};
  static const int64_t shapes[][3] = {{1, 33, 20}, {7, 1, 20}, {9, 35, 19}, {24, 64, 260}, {3, 5, 2}, {9, 11, 37}, {5, 48, 19}};
  uint32_t seed = 100;
  for (int t = 0; t < 4; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (size_t x = 0; x < sizeof ab / sizeof ab[0]; x++)
        check_case(t >> 1, t & 1, shapes[s][0], shapes[s][1], shapes[s][2], 3, ab[x][0], ab[x][1], seed++);
}
END_TEST

/* More rows than a row block (MC <= 128), more columns than a column block
 * (NC = 3072), both with an edge. */
START_TEST(test_products_larger_than_the_cache_blocks_match_the_reference) {
  check_case(0, 0, 130, 70, 40, 1, 1.0f, 0.5f, 7);
  check_case(1, 1, 130, 70, 40, 0, 1.0f, 0.0f, 8);
  check_case(0, 0, 9, 3100, 12, 2, 1.0f, 1.0f, 9);
  check_case(0, 1, 9, 3100, 12, 0, -1.0f, 0.0f, 10);
  check_case(1, 0, 2, 3073, 5, 0, 1.0f, 0.0f, 11);
}
END_TEST

/* Shapes from the reference models (dense layers, convolutions' im2col
 * products) on the variant the runtime uses. */
START_TEST(test_reference_model_shapes_match_the_reference) {
  check_case(0, 1, 64, 512, 784, 0, 1.0f, 0.0f, 20); /* mlp batch 64 */
  check_case(0, 1, 64, 10, 512, 0, 1.0f, 0.0f, 21);  /* its classifier */
  check_case(0, 1, 1, 512, 784, 0, 1.0f, 0.0f, 22);  /* batch 1 */
  check_case(0, 0, 32, 196, 144, 0, 1.0f, 1.0f, 23); /* cnn conv, bias already in C */
  check_case(0, 0, 16, 384, 128, 0, 1.0f, 0.0f, 24); /* bert seq 16 projection */
}
END_TEST

/* The matrix-vector products: one row of C (m = 1) and one column (n = 1,
 * written ldc apart), with lengths across every column block of the
 * kernels that keep their sums in registers (SG_GB of 4, 8, 16 vectors of
 * 4, 8, 16 floats: blocks of 16 to 256 columns, their halves down to one
 * vector, and a tail of single columns), an LSTM step's shapes (1x512x128
 * and lstm2's 1x2048x512), the large products' row groups, alpha/beta and
 * padded leading dimensions. */
START_TEST(test_matrix_vector_products_across_the_column_blocks_match_the_reference) {
  static const int64_t lens[] = {1, 3, 4, 8, 15, 16, 31, 32, 47, 63, 64, 65, 127, 128, 129, 191, 255, 256, 257, 300, 385, 511, 513};
  static const int64_t ks[] = {1, 5, 40};
  uint32_t seed = 900;
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
    for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
      int64_t pad = (int64_t)(i % 3);
      check_case(0, 0, 1, lens[i], ks[q], pad, 1.0f, 0.0f, seed++);   /* row: x . B rows */
      check_case(1, 0, 1, lens[i], ks[q], pad, -0.5f, 2.0f, seed++);  /* same path, A's row strided */
      check_case(1, 0, lens[i], 1, ks[q], pad, 1.0f, 0.0f, seed++);   /* column: A^T rows, C ldc apart */
      check_case(1, 1, lens[i], 1, ks[q], pad, 0.25f, -1.0f, seed++);
      check_case(0, 1, 1, lens[i], ks[q], pad, 1.0f, 1.0f, seed++);   /* dot products */
      check_case(0, 0, lens[i], 1, ks[q], pad, 2.0f, 0.5f, seed++);
    }
  check_case(0, 0, 1, 512, 128, 0, 1.0f, 0.0f, seed++);  /* lstm step, R [H, 4H] */
  check_case(0, 0, 1, 512, 128, 0, 1.0f, 1.0f, seed++);
  check_case(0, 1, 1, 2048, 512, 0, 1.0f, 0.0f, seed++); /* lstm2 step, R [4H, H] */
  check_case(0, 0, 1, 2048, 512, 0, 1.0f, 1.0f, seed++); /* lstm2 step, R [H, 4H] */
  /* Past 128K floats and 128 rows the row updates go 64 rows at a time
   * with partial sums, in column ranges of at most 3072: a last range
   * and a last group of rows shorter than the others, C's column ldc
   * apart, alpha and beta. */
  check_case(0, 0, 1, 3100, 300, 1, 1.0f, 0.0f, seed++);
  check_case(0, 0, 1, 1100, 129, 0, -0.5f, 2.0f, seed++);
  check_case(1, 0, 1300, 1, 250, 3, 0.25f, -1.0f, seed++);
  check_case(1, 1, 6200, 1, 160, 0, 1.0f, 0.0f, seed++);
}
END_TEST

START_TEST(test_empty_products_only_scale_c) {
  for (int isa = NIMBLE_SGEMM_ISA_PORTABLE; isa <= NIMBLE_SGEMM_ISA_AVX512; isa++) {
    if (!nimble_sgemm_isa_available((nimble_sgemm_isa)isa)) continue;
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {1, 2, NAN, 4};
    /* k = 0, beta = 0: C cleared, NaN included. */
    ck_assert(nimble_sgemm_own_isa((nimble_sgemm_isa)isa, 0, 0, 2, 2, 0, 1.0f, a, 2, b, 2, 0.0f, c, 2));
    for (int i = 0; i < 4; i++) ck_assert_float_eq(c[i], 0.0f);
    /* alpha = 0, beta = 3: C scaled, A and B not read (NULL). */
    float d[4] = {1, 2, 3, 4};
    ck_assert(nimble_sgemm_own_isa((nimble_sgemm_isa)isa, 0, 0, 2, 2, 2, 0.0f, NULL, 2, NULL, 2, 3.0f, d, 2));
    ck_assert_float_eq(d[0], 3.0f);
    ck_assert_float_eq(d[3], 12.0f);
    /* m = 0 or n = 0: nothing at all. */
    float e[1] = {7};
    ck_assert(nimble_sgemm_own_isa((nimble_sgemm_isa)isa, 0, 0, 0, 1, 2, 1.0f, a, 2, b, 1, 0.0f, e, 1));
    ck_assert(nimble_sgemm_own_isa((nimble_sgemm_isa)isa, 0, 0, 1, 0, 2, 1.0f, a, 2, b, 1, 0.0f, e, 1));
    ck_assert_float_eq(e[0], 7.0f);
    /* A hand-computed one: [[1,2],[3,4]] [[5,6],[7,8]]^T + C = [[18,24],[40,54]]. */
    float f[4] = {1, 1, 1, 1};
    ck_assert(nimble_sgemm_own_isa((nimble_sgemm_isa)isa, 0, 1, 2, 2, 2, 1.0f, a, 2, b, 2, 1.0f, f, 2));
    ck_assert_float_eq(f[0], 18.0f);
    ck_assert_float_eq(f[1], 24.0f);
    ck_assert_float_eq(f[2], 40.0f);
    ck_assert_float_eq(f[3], 54.0f);
  }
}
END_TEST

/* A transposed B inside registered constant memory is packed once and
 * reused; after the range is removed, a changed B is seen again. */
START_TEST(test_constant_b_packed_once_gives_the_same_products_and_goes_with_its_range) {
  gemm_case g;
  case_make(&g, 0, 1, 20, 70, 300, 1, 1.0f, 0.0f, 31);
  size_t bbytes = sizeof(float) * (size_t)(g.n * g.ldb);
  ck_assert(!nimble_sgemm_own_is_constant(1, g.b, g.ldb, g.k, g.n));
  nimble_sgemm_own_constants_add(g.b, bbytes);
  ck_assert(nimble_sgemm_own_is_constant(1, g.b, g.ldb, g.k, g.n));
  /* The last row's one float of padding leaves room for a shift by one;
   * by two, the operand ends past the range. */
  ck_assert(nimble_sgemm_own_is_constant(1, g.b + 1, g.ldb, g.k, g.n));
  ck_assert(!nimble_sgemm_own_is_constant(1, g.b + 2, g.ldb, g.k, g.n));
  for (int round = 0; round < 3; round++) run_every_variant(&g, round == 0 ? "round 0" : "a later round");
  nimble_sgemm_own_constants_remove(g.b, bbytes);
  ck_assert(!nimble_sgemm_own_is_constant(1, g.b, g.ldb, g.k, g.n));
  /* New values in the same place: the reference is recomputed, and stale
   * panels would give the old product. */
  gemm_case h;
  case_make(&h, 0, 1, 20, 70, 300, 1, 1.0f, 0.0f, 32);
  memcpy(g.b, h.b, bbytes);
  case_take(&g, &h);
  run_every_variant(&g, "after removal");
  case_free(&g);
  case_free(&h);
}
END_TEST

/* A matrix-vector product's constant B (an LSTM's recurrent weights) is
 * packed once into its own layout (column blocks whose rows follow one
 * another), either transposition, across the block widths (16 to 256
 * columns by variant, a last block narrower and not a whole vector) and
 * an LSTM step's shape. The copy is what later calls read: B changed
 * inside its range (which a constant never is) still gives the first
 * product, so a call that read B in place fails here; after the range is
 * removed, the new B is seen. */
START_TEST(test_matrix_vector_products_pack_a_constant_b_once) {
  static const int64_t shapes[][2] = {{16, 1},  {17, 40},  {63, 5},   {100, 33},  {255, 7}, {256, 64},
                                      {257, 9}, {300, 40}, {513, 20}, {512, 128}, {1100, 3}};
  uint32_t seed = 1200;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int tb = 0; tb < 2; tb++) {
      int64_t n = shapes[i][0], k = shapes[i][1], pad = (int64_t)(i % 3);
      float alpha = tb ? -0.5f : 1.0f, beta = tb ? 1.0f : 0.0f;
      gemm_case g, h;
      case_make(&g, (int)(i & 1), tb, 1, n, k, pad, alpha, beta, seed++);
      case_make(&h, g.ta, tb, 1, n, k, pad, alpha, beta, seed++);
      size_t bbytes = sizeof(float) * (size_t)((tb ? n : k) * g.ldb);
      nimble_sgemm_own_constants_add(g.b, bbytes);
      for (int round = 0; round < 2; round++) {
        /* Round 1: h's B under g's range; g's product all the same. */
        if (round == 1) memcpy(g.b, h.b, bbytes);
        run_every_variant(&g, round ? "the packed copy was not what was read" : "packing");
      }
      nimble_sgemm_own_constants_remove(g.b, bbytes);
      /* g becomes h (its B is h's already): read in place, h's product. */
      case_take(&g, &h);
      run_every_variant(&g, "after removal");
      case_free(&g);
      case_free(&h);
    }
}
END_TEST

/* Products of few columns against many rows, which the x86 variants
 * compute as C^T = op(B)^T op(A)^T where that leaves less of the tiles
 * empty, and write back transposed (a 7x7 image's 49 pixels by 320 output
 * channels; AVX-512: 17 to 81 columns, AVX2: 9, 17, 33), every
 * transposition (on AVX-512 a transposed B of 9 rows goes by the
 * few-column dot products instead), rows and columns not multiples of 8,
 * the epilogue after the transposition, a constant A packed as a
 * transposed B; with beta != 0 they keep the direct product. */
START_TEST(test_few_columns_computed_transposed_match_the_reference) {
  static const int64_t shapes[][3] = {{320, 49, 96}, {45, 49, 30}, {1280, 17, 20}, {64, 33, 200},
                                      {200, 81, 7},  {19, 9, 40},  {22, 33, 300}};
  uint32_t seed = 900;
  for (int t = 0; t < 4; t++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
      check_case(t >> 1, t & 1, m, n, k, 3, 1.0f, 0.0f, seed++);
      check_case(t >> 1, t & 1, m, n, k, 0, -0.5f, 0.0f, seed++);
      check_case(t >> 1, t & 1, m, n, k, 1, 1.0f, 0.75f, seed++);
      check_epi_case(t >> 1, t & 1, m, n, k, 1.0f, 0.0f, 0.0f, 6.0f, 7, seed++);
      check_epi_case(t >> 1, t & 1, m, n, k, 1.0f, 0.0f, -INFINITY, INFINITY, 1, seed++);
    }
  gemm_case g;
  case_make(&g, 0, 0, 320, 49, 96, 2, 1.0f, 0.0f, seed++);
  size_t abytes = sizeof(float) * (size_t)(g.m * g.lda);
  nimble_sgemm_own_constants_add(g.a, abytes);
  for (int round = 0; round < 2; round++) run_every_variant(&g, round ? "constant A, a later round" : "constant A, round 0");
  nimble_sgemm_own_constants_remove(g.a, abytes);
  case_free(&g);
}
END_TEST

/* A constant A (a convolution's weights) is packed once as well, either
 * transposition, beside a constant B or not. */
START_TEST(test_constant_a_packed_once_gives_the_same_products) {
  static const int ts[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (size_t t = 0; t < sizeof ts / sizeof ts[0]; t++) {
    gemm_case g;
    /* Two row blocks (MC <= 128), the second partial: with AVX-512's 112,
     * 140 rows end in two 14-row panels and 120 in one of 8. 24 rows go by
     * 8-row panels there. */
    static const int64_t ms[] = {140, 120, 24};
    case_make(&g, ts[t][0], ts[t][1], ms[t % 3], 50, 270, 2, 1.0f, 1.0f, 40 + (uint32_t)t);
    size_t abytes = sizeof(float) * (size_t)((g.ta ? g.k : g.m) * g.lda);
    size_t bbytes = sizeof(float) * (size_t)((g.tb ? g.n : g.k) * g.ldb);
    nimble_sgemm_own_constants_add(g.a, abytes);
    if (t & 1) nimble_sgemm_own_constants_add(g.b, bbytes);
    for (int round = 0; round < 2; round++) run_every_variant(&g, round ? "a later round" : "round 0");
    nimble_sgemm_own_constants_remove(g.a, abytes);
    if (t & 1) nimble_sgemm_own_constants_remove(g.b, bbytes);
    case_free(&g);
  }
}
END_TEST

/* Four threads at once, each with its own products, twice (buffers grown,
 * then reused); each thread's buffers are freed when it ends. */
typedef struct thread_case {
  int64_t m, n, k;
  int failed;
  char msg[512];
} thread_case;

static void *thread_body(void *p) {
  thread_case *tc = p;
  for (int round = 0; round < 2; round++) {
    gemm_case g;
    case_make(&g, round, 1 - round, tc->m, tc->n, tc->k, 1, 1.0f, 0.0f, (uint32_t)(tc->m * 31 + round));
    if (!tc->failed) tc->failed = case_run(&g, nimble_sgemm_own_best_isa(), tc->msg, sizeof tc->msg);
    case_free(&g);
  }
  return NULL;
}

START_TEST(test_threads_at_once_each_get_the_right_product) {
  thread_case tc[4] = {{37, 300, 70, 0, ""}, {64, 128, 257, 0, ""}, {5, 1000, 33, 0, ""}, {130, 40, 9, 0, ""}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, thread_body, &tc[i]), 0);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < 4; i++) ck_assert_msg(!tc[i].failed, "thread %d: %s", i, tc[i].msg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sgemm_own");
  TCase *tc = tcase_create("own");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_portable_variant_is_always_available_and_best_is_available);
  tcase_add_test(tc, test_every_transpose_and_shape_matches_the_reference);
  tcase_add_test(tc, test_alpha_beta_and_padded_leading_dimensions_match_the_reference);
  tcase_add_test(tc, test_products_larger_than_the_cache_blocks_match_the_reference);
  tcase_add_test(tc, test_reference_model_shapes_match_the_reference);
  tcase_add_test(tc, test_matrix_vector_products_across_the_column_blocks_match_the_reference);
  tcase_add_test(tc, test_empty_products_only_scale_c);
  tcase_add_test(tc, test_constant_b_packed_once_gives_the_same_products_and_goes_with_its_range);
  tcase_add_test(tc, test_constant_a_packed_once_gives_the_same_products);
  tcase_add_test(tc, test_few_columns_computed_transposed_match_the_reference);
  tcase_add_test(tc, test_matrix_vector_products_pack_a_constant_b_once);
  tcase_add_test(tc, test_threads_at_once_each_get_the_right_product);
  tcase_add_test(tc, test_epilogue_adds_the_row_bias_and_clamps_keeping_nan);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
