/* The runtime's Winograd 3x3 convolution (runtime/src/vm/conv_winograd.c,
 * env->conv3x3) against the definition computed here in double: image
 * sizes odd and even, smaller than a tile and spanning several blocks,
 * pads 0 to 2 on each side (output sizes from them), 1 to 70 channels,
 * the epilogue (bias, a residual with its own leading dimension, a clamp
 * that keeps NaN), weights transformed once inside registered constants
 * (and again after their range goes), and bands of tiles or parts of the
 * output channels on a thread pool. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nimble_test.h"
#include "vm/conv_winograd.h"
#include "vm/sgemm_own.h"
#include "vm/sgemm_threads.h"
#include "vm/thread_pool.h"

typedef struct wcase {
  int64_t c, h, w, k, pt, pl, pb, pr;
} wcase;

static int64_t out_h(const wcase *q) { return q->h + q->pt + q->pb - 2; }
static int64_t out_w(const wcase *q) { return q->w + q->pl + q->pr - 2; }

/* y against the definition; bound: the sum of the terms' magnitudes sets
 * the tolerance (the transforms add and subtract up to 16 terms). */
static void check_against_definition(const wcase *q, const float *x, const float *wt, const float *y,
                                     const nimble_sgemm_epilogue_t *e, const char *what) {
  int64_t oh = out_h(q), ow = out_w(q);
  for (int64_t kk = 0; kk < q->k; kk++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        double acc = 0, mag = 0;
        for (int64_t cc = 0; cc < q->c; cc++)
          for (int u = 0; u < 3; u++)
            for (int v = 0; v < 3; v++) {
              int64_t r = i - q->pt + u, s = j - q->pl + v;
              if (r < 0 || r >= q->h || s < 0 || s >= q->w) continue;
              double t = (double)wt[((kk * q->c + cc) * 3 + u) * 3 + v] * x[(cc * q->h + r) * q->w + s];
              acc += t;
              mag += fabs(t);
            }
        if (e && e->row_bias) acc += e->row_bias[kk], mag += fabs(e->row_bias[kk]);
        if (e && e->residual) {
          double res = e->residual[kk * e->ldr + i * ow + j];
          acc += res;
          mag += fabs(res);
        }
        float got = y[(kk * oh + i) * ow + j];
        if (isnan(acc)) {
          ck_assert_msg(isnan(got), "%s: y[%lld,%lld,%lld] = %g, want NaN", what, (long long)kk, (long long)i,
                        (long long)j, (double)got);
          continue;
        }
        if (e) acc = acc < e->lo ? e->lo : acc > e->hi ? e->hi : acc;
        double tol = 1e-6 * (mag + 1.0);
        ck_assert_msg(fabs(got - acc) <= tol,
                      "%s: c=%lld %lldx%lld k=%lld pads %lld %lld %lld %lld: y[%lld,%lld,%lld] = %.9g, want %.9g",
                      what, (long long)q->c, (long long)q->h, (long long)q->w, (long long)q->k, (long long)q->pt,
                      (long long)q->pl, (long long)q->pb, (long long)q->pr, (long long)kk, (long long)i,
                      (long long)j, (double)got, acc);
      }
}

typedef struct tensors {
  float *x, *wt, *y, *bias, *res;
} tensors;

static void make(const wcase *q, uint32_t seed, tensors *t) {
  int64_t oh = out_h(q), ow = out_w(q);
  size_t nx = (size_t)(q->c * q->h * q->w), nw = (size_t)(q->k * q->c * 9), ny = (size_t)(q->k * oh * ow);
  t->x = malloc((nx + 1) * sizeof(float));
  t->wt = malloc((nw + 1) * sizeof(float));
  t->y = malloc((ny + 1) * sizeof(float));
  t->bias = malloc((size_t)(q->k + 1) * sizeof(float));
  t->res = malloc((ny + 1) * sizeof(float));
  ck_assert(t->x && t->wt && t->y && t->bias && t->res);
  for (size_t i = 0; i < nx; i++) t->x[i] = nimble_test_uniform(&seed);
  for (size_t i = 0; i < nw; i++) t->wt[i] = nimble_test_uniform(&seed) * 0.5f;
  for (size_t i = 0; i < ny; i++) t->y[i] = 1e30f, t->res[i] = nimble_test_uniform(&seed);
  for (int64_t i = 0; i < q->k; i++) t->bias[i] = nimble_test_uniform(&seed);
}

static void release(tensors *t) {
  free(t->x);
  free(t->wt);
  free(t->y);
  free(t->bias);
  free(t->res);
}

static void run(const wcase *q, const tensors *t, const nimble_sgemm_epilogue_t *e) {
  nimble_conv3x3_winograd(q->c, q->h, q->w, q->k, q->pt, q->pl, out_h(q), out_w(q), t->x, t->wt, t->y, e);
}

static const wcase kCases[] = {
    {1, 4, 4, 1, 0, 0, 0, 0},     {3, 5, 7, 2, 1, 1, 1, 1},      {8, 9, 11, 16, 1, 1, 1, 1},
    {5, 1, 1, 3, 1, 1, 1, 1},     {4, 2, 3, 5, 1, 1, 1, 1},      {16, 13, 13, 40, 1, 1, 1, 1},
    {7, 10, 6, 9, 2, 0, 1, 2},    {12, 8, 8, 24, 0, 0, 0, 0},    {2, 6, 17, 3, 0, 2, 2, 0},
    {70, 14, 14, 18, 1, 1, 1, 1}, {32, 27, 27, 64, 1, 1, 1, 1},  {9, 3, 40, 20, 1, 1, 1, 1},
    {6, 33, 5, 7, 1, 0, 1, 0},    {16, 55, 55, 32, 1, 1, 1, 1},
    /* Several blocks on one thread (of up to 3 MB): three of 8 tile rows
     * but the last of 4; blocks of unequal heights with pads. */
    {8, 40, 40, 200, 1, 1, 1, 1}, {5, 45, 38, 120, 0, 1, 2, 1},
};

/* Every case with each epilogue; weights not registered (transformed per
 * call). */
START_TEST(test_cases_match_the_definition_with_each_epilogue) {
  uint32_t seed = 11;
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const wcase *q = &kCases[i];
    tensors t;
    make(q, seed++, &t);
    run(q, &t, NULL);
    check_against_definition(q, t.x, t.wt, t.y, NULL, "no epilogue");
    nimble_sgemm_epilogue_t bias = {t.bias, NULL, NULL, 0, -INFINITY, INFINITY};
    run(q, &t, &bias);
    check_against_definition(q, t.x, t.wt, t.y, &bias, "bias");
    /* A residual, relu6, and a NaN in the input: the outputs whose window
     * covers it are NaN through the clamp. */
    t.x[q->c * q->h * q->w / 2] = NAN;
    nimble_sgemm_epilogue_t all = {t.bias, NULL, t.res, out_h(q) * out_w(q), 0.0f, 6.0f};
    run(q, &t, &all);
    check_against_definition(q, t.x, t.wt, t.y, &all, "bias, residual, clamp");
    release(&t);
  }
}
END_TEST

/* Weights inside registered constants are transformed once: changed in
 * place (which a constant never is) they still give the first result, so
 * a call that transformed them again fails here; once the range is
 * removed the new weights are seen. */
START_TEST(test_constant_weights_are_transformed_once_and_go_with_their_range) {
  const wcase q = {24, 12, 10, 32, 1, 1, 1, 1};
  tensors t, u;
  make(&q, 77, &t);
  make(&q, 78, &u);
  size_t wbytes = (size_t)(q.k * q.c * 9) * sizeof(float);
  nimble_sgemm_own_constants_add(t.wt, wbytes);
  run(&q, &t, NULL);
  check_against_definition(&q, t.x, t.wt, t.y, NULL, "first call");
  float *keep = malloc(wbytes);
  ck_assert(keep);
  memcpy(keep, t.wt, wbytes);
  memcpy(t.wt, u.wt, wbytes);
  run(&q, &t, NULL);
  check_against_definition(&q, t.x, keep, t.y, NULL, "the transformed weights were not reused");
  nimble_sgemm_own_constants_remove(t.wt, wbytes);
  run(&q, &t, NULL);
  check_against_definition(&q, t.x, t.wt, t.y, NULL, "after removal");
  free(keep);
  release(&t);
  release(&u);
}
END_TEST

/* Every case of q on a pool of 2 and of 3 threads (the calling VM's, as
 * the interpreter sets it around a kernel call), with tensors made from
 * seed + the case's index: `per_case` runs and checks it. */
static void on_thread_pools(const wcase *q, size_t n, uint32_t seed, void (*per_case)(const wcase *, tensors *)) {
  for (uint32_t threads = 2; threads <= 3; threads++) {
    nimble_thread_pool *pool = NULL;
    NIMBLE_ASSERT_OK(nimble_thread_pool_create(threads, &pool));
    nimble_thread_pool *outer = nimble_sgemm_threads_swap(pool);
    for (size_t i = 0; i < n; i++) {
      tensors t;
      make(&q[i], seed + (uint32_t)i, &t);
      per_case(&q[i], &t);
      release(&t);
    }
    nimble_sgemm_threads_swap(outer);
    nimble_thread_pool_destroy(pool);
  }
}

/* Constant weights, the bias and a Relu, twice. */
static void bands_case(const wcase *q, tensors *t) {
  size_t wbytes = (size_t)(q->k * q->c * 9) * sizeof(float);
  nimble_sgemm_own_constants_add(t->wt, wbytes);
  nimble_sgemm_epilogue_t bias = {t->bias, NULL, NULL, 0, 0.0f, INFINITY};
  for (int round = 0; round < 2; round++) {
    run(q, t, &bias);
    check_against_definition(q, t->x, t->wt, t->y, &bias, "threads");
  }
  nimble_sgemm_own_constants_remove(t->wt, wbytes);
}

/* Bands of tile rows, one per thread, and images of too few tiles for a
 * band each (cnn's 16x16 and 8x8 layers, 23x9, 6x6) on the calling
 * thread alone. */
START_TEST(test_bands_on_a_thread_pool_match_the_definition) {
  static const wcase q[] = {{16, 55, 55, 32, 1, 1, 1, 1}, {8, 27, 30, 16, 1, 1, 1, 1}, {4, 23, 9, 16, 0, 1, 2, 1},
                            {32, 16, 16, 64, 1, 1, 1, 1},  {64, 8, 8, 128, 1, 1, 1, 1}, {3, 6, 6, 2, 1, 1, 1, 1}};
  on_thread_pools(q, sizeof q / sizeof q[0], 300, bands_case);
}
END_TEST

/* The bias, a residual and a clamp (which index by channel), with weights
 * transformed for the call, then constant ones twice. */
static void channel_parts_case(const wcase *q, tensors *t) {
  size_t wbytes = (size_t)(q->k * q->c * 9) * sizeof(float);
  nimble_sgemm_epilogue_t all = {t->bias, NULL, t->res, out_h(q) * out_w(q), -0.5f, 6.0f};
  run(q, t, &all);
  check_against_definition(q, t->x, t->wt, t->y, &all, "channel parts");
  nimble_sgemm_own_constants_add(t->wt, wbytes);
  for (int round = 0; round < 2; round++) {
    run(q, t, &all);
    check_against_definition(q, t->x, t->wt, t->y, &all, "channel parts, constant weights");
  }
  nimble_sgemm_own_constants_remove(t->wt, wbytes);
}

/* Too few tiles for a band a thread but many output channels (squeezenet's
 * 64 -> 256 on 13x13, 49 tiles; 392 channels on 16 tiles, three parts of
 * 128, 136 and 128 at three threads): tasks by output channels, each with
 * its part of the transformed weights packed as a product of its own. */
START_TEST(test_channel_parts_on_a_thread_pool_match_the_definition) {
  static const wcase q[] = {{16, 13, 13, 256, 1, 1, 1, 1}, {8, 9, 7, 392, 0, 1, 1, 1}, {5, 6, 6, 300, 1, 1, 1, 1}};
  on_thread_pools(q, sizeof q / sizeof q[0], 400, channel_parts_case);
}
END_TEST

/* No input channels: the epilogue on zeros. */
START_TEST(test_no_input_channels_give_the_epilogue_of_zero) {
  float y[2 * 3 * 3], bias[2] = {1.5f, -2.0f};
  for (int i = 0; i < 18; i++) y[i] = 99.0f;
  nimble_sgemm_epilogue_t e = {bias, NULL, NULL, 0, -1.0f, INFINITY};
  nimble_conv3x3_winograd(0, 3, 3, 2, 1, 1, 3, 3, NULL, NULL, y, &e);
  for (int i = 0; i < 9; i++) ck_assert_float_eq(y[i], 1.5f);
  for (int i = 9; i < 18; i++) ck_assert_float_eq(y[i], -1.0f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("conv_winograd");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_cases_match_the_definition_with_each_epilogue);
  tcase_add_test(tc, test_constant_weights_are_transformed_once_and_go_with_their_range);
  tcase_add_test(tc, test_bands_on_a_thread_pool_match_the_definition);
  tcase_add_test(tc, test_channel_parts_on_a_thread_pool_match_the_definition);
  tcase_add_test(tc, test_no_input_channels_give_the_epilogue_of_zero);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
