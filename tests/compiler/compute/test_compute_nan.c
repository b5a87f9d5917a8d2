/* NaN and infinities through every operator family, as NumPy (ONNX's
 * reference implementation) and ONNX Runtime give them: a NaN input makes
 * a NaN output wherever NumPy's would be NaN (relu, maximum/minimum, clip,
 * leaky relu, hard sigmoid, max/min/sum reductions, max pooling, softmax,
 * dense + relu), argmax/argmin pick the first NaN (np.argmax), and
 * infinities follow IEEE arithmetic (inf - inf = NaN in a softmax row that
 * holds +inf). Each case is a small program compiled to one kernel and run
 * on hand-made inputs; the expected values are worked out by hand from
 * NumPy's definitions and written next to each case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/passes.h"
#include "nimble_test.h"

#define NaN NAN
#define INF INFINITY

enum { MAXE = 96 };

typedef struct nan_case {
  const char *what;
  const char *program;    /* def @main over f32 inputs */
  int n_in;
  int rank[3];
  int64_t shape[3][4];
  float in[3][MAXE];
  int out_rank;
  int64_t out_shape[4];
  bool out_i64;           /* argmax/argmin */
  float want[MAXE];
  int64_t want_i[MAXE];
} nan_case;

static size_t numel(int rank, const int64_t *shape) {
  size_t n = 1;
  for (int a = 0; a < rank; a++) n *= (size_t)shape[a];
  return n;
}

/* NaN equals NaN; otherwise equal within a few float ulps (softmax's exp
 * and division round), infinities exactly. */
static bool same(float got, float want) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabsf(got - want) <= 1e-6f + 1e-5f * fabsf(want);
}

static void run_case(const nan_case *c, bool with_sgemm) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m = ch_compile_module(arena, c->program);
  const char *prim = ch_find_primitive(m, "fused.");
  nimble_compute_options_t o = nimble_compute_default_options();
  o.use_sgemm = with_sgemm;
  ch_kernel k;
  ch_kernel_build(m, prim, false, &o, &k);
  ch_env env;
  ch_env_init(&env, with_sgemm);
  ch_tensor ts[4];
  ch_tensor *args[4];
  for (int i = 0; i < c->n_in; i++) {
    unsigned seed = 1;
    ch_tensor_f32(&ts[i], c->rank[i], c->shape[i], &seed, 0, 1);
    memcpy(ts[i].data, c->in[i], numel(c->rank[i], c->shape[i]) * sizeof(float));
    args[i] = &ts[i];
  }
  size_t n_out = numel(c->out_rank, c->out_shape);
  if (c->out_i64) {
    ch_tensor_i64(&ts[c->n_in], c->out_rank, c->out_shape, NULL);
  } else {
    unsigned seed = 1;
    ch_tensor_f32(&ts[c->n_in], c->out_rank, c->out_shape, &seed, 0, 1);
  }
  args[c->n_in] = &ts[c->n_in];
  ck_assert_msg(ch_call(&k, &env, args, c->n_in + 1) == 0, "%s: %s", c->what, env.error);
  for (size_t e = 0; e < n_out; e++) {
    if (c->out_i64) {
      int64_t got = ch_i(&ts[c->n_in])[e];
      if (got != c->want_i[e])
        ck_abort_msg("%s%s: element %zu is %lld, NumPy gives %lld", c->what, with_sgemm ? " (sgemm)" : "", e,
                     (long long)got, (long long)c->want_i[e]);
    } else {
      float got = ch_f(&ts[c->n_in])[e];
      if (!same(got, c->want[e]))
        ck_abort_msg("%s%s: element %zu is %g, NumPy gives %g", c->what, with_sgemm ? " (sgemm)" : "", e, (double)got,
                     (double)c->want[e]);
    }
  }
  for (int i = 0; i <= c->n_in; i++) ch_tensor_free(&ts[i]);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
}

/* x = [NaN, +inf, -inf, 1, -2, 0, NaN, 3] for the element-wise cases. */
#define X8 {NaN, INF, -INF, 1, -2, 0, NaN, 3}

static const nan_case kElementwise[] = {
    /* np.maximum(x, 0): NaN stays NaN (maxnum would give 0). */
    {"relu", "def @main(%x: Tensor[(8,), float32]) { relu(%x) }\n", 1, {1}, {{8}}, {X8}, 1, {8}, false,
     {NaN, INF, 0, 1, 0, 0, NaN, 3}},
    /* The same and np.clip(x, 0, 6) over a run-time length (vectorized:
     * against a constant bound, one compare and select, vmaxps(0, x) on
     * x86; NaN in lanes 0 and 9 and in the tail, values at the bounds). */
    {"relu (vector)", "def @main(%x: Tensor[(n,), float32]) { relu(%x) }\n", 1, {1}, {{19}},
     {{NaN, INF, -INF, 1, -2, 0, 6, 7, -0.5f, NaN, 2, 3, -3, 4, 5, -5, 8, -8, NaN}}, 1, {19}, false,
     {NaN, INF, 0, 1, 0, 0, 6, 7, 0, NaN, 2, 3, 0, 4, 5, 0, 8, 0, NaN}},
    {"clip (vector)", "def @main(%x: Tensor[(n,), float32]) { clip(%x, min=0.0, max=6.0) }\n", 1, {1}, {{19}},
     {{NaN, INF, -INF, 1, -2, 0, 6, 7, -0.5f, NaN, 2, 3, -3, 4, 5, -5, 8, -8, NaN}}, 1, {19}, false,
     {NaN, 6, 0, 1, 0, 0, 6, 6, 0, NaN, 2, 3, 0, 4, 5, 0, 6, 0, NaN}},
    /* np.maximum / np.minimum: NaN on either side gives NaN. */
    {"maximum", "def @main(%x: Tensor[(8,), float32], %y: Tensor[(8,), float32]) { maximum(%x, %y) }\n", 2, {1, 1},
     {{8}, {8}}, {X8, {0, 0, 0, NaN, NaN, -INF, 5, INF}}, 1, {8}, false, {NaN, INF, 0, NaN, NaN, 0, NaN, INF}},
    {"minimum", "def @main(%x: Tensor[(8,), float32], %y: Tensor[(8,), float32]) { minimum(%x, %y) }\n", 2, {1, 1},
     {{8}, {8}}, {X8, {0, 0, 0, NaN, NaN, -INF, 5, INF}}, 1, {8}, false, {NaN, 0, -INF, NaN, NaN, -INF, NaN, 3}},
    /* np.clip(x, -1, 2) */
    {"clip", "def @main(%x: Tensor[(8,), float32]) { clip(%x, min=-1.0, max=2.0) }\n", 1, {1}, {{8}}, {X8}, 1, {8},
     false, {NaN, 2, -1, 1, -1, 0, NaN, 2}},
    /* np.where(x > 0, x, 0.1 * x): NaN > 0 is false, 0.1 * NaN is NaN. */
    {"leaky_relu", "def @main(%x: Tensor[(8,), float32]) { leaky_relu(%x, alpha=0.1) }\n", 1, {1}, {{8}}, {X8}, 1,
     {8}, false, {NaN, INF, -INF, 1, -0.2f, 0, NaN, 3}},
    /* HardSigmoid as ONNX defines it: max(0, min(1, 0.2 x + 0.5)). */
    {"hard_sigmoid",
     "def @main(%x: Tensor[(8,), float32]) { maximum(minimum(add(multiply(%x, 0.2), 0.5), 1.0), 0.0) }\n", 1, {1},
     {{8}}, {X8}, 1, {8}, false, {NaN, 1, 0, 0.7f, 0.1f, 0.5f, NaN, 1}},
    /* exp, tanh, sigmoid at the special values. */
    {"exp", "def @main(%x: Tensor[(8,), float32]) { exp(%x) }\n", 1, {1}, {{8}}, {X8}, 1, {8}, false,
     {NaN, INF, 0, 2.718281828f, 0.135335283f, 1, NaN, 20.08553692f}},
    {"tanh", "def @main(%x: Tensor[(8,), float32]) { tanh(%x) }\n", 1, {1}, {{8}}, {X8}, 1, {8}, false,
     {NaN, 1, -1, 0.761594156f, -0.964027580f, 0, NaN, 0.995054754f}},
    {"sigmoid", "def @main(%x: Tensor[(8,), float32]) { sigmoid(%x) }\n", 1, {1}, {{8}}, {X8}, 1, {8}, false,
     {NaN, 1, 0, 0.731058579f, 0.119202922f, 0.5f, NaN, 0.952574127f}},
    /* x - x: inf - inf is NaN. */
    {"inf_minus_inf", "def @main(%x: Tensor[(8,), float32]) { subtract(%x, %x) }\n", 1, {1}, {{8}}, {X8}, 1, {8},
     false, {NaN, NaN, NaN, 0, 0, 0, NaN, 0}},
};

static const nan_case kReductions[] = {
    /* np.max / np.min along axis 1: a NaN row is NaN; infinities order. */
    {"max", "def @main(%x: Tensor[(3, 4), float32]) { max(%x, axes=[1]) }\n", 1, {2}, {{3, 4}},
     {{NaN, 1, 2, 3, 1, INF, 2, 0, -INF, -INF, -INF, -INF}}, 1, {3}, false, {NaN, INF, -INF}},
    {"min", "def @main(%x: Tensor[(3, 4), float32]) { min(%x, axes=[1]) }\n", 1, {2}, {{3, 4}},
     {{1, 2, NaN, 3, 1, INF, 2, 0, INF, INF, INF, INF}}, 1, {3}, false, {NaN, 0, INF}},
    /* np.sum: NaN poisons, inf + -inf is NaN, inf + 1 is inf. */
    {"sum", "def @main(%x: Tensor[(3, 4), float32]) { sum(%x, axes=[1]) }\n", 1, {2}, {{3, 4}},
     {{1, NaN, 2, 3, INF, -INF, 1, 1, INF, 1, 2, 3}}, 1, {3}, false, {NaN, NaN, INF}},
    /* np.argmax / np.argmin: the first NaN wins; ties take the first; an
     * all -inf row gives 0. */
    {"argmax", "def @main(%x: Tensor[(3, 4), float32]) { argmax(%x, axis=1, keepdims=0) }\n", 1, {2}, {{3, 4}},
     {{1, NaN, 3, NaN, 1, 3, 3, 2, -INF, -INF, -INF, -INF}}, 1, {3}, true, {0}, {1, 1, 0}},
    {"argmin", "def @main(%x: Tensor[(3, 4), float32]) { argmin(%x, axis=1, keepdims=0) }\n", 1, {2}, {{3, 4}},
     {{1, -3, NaN, NaN, 2, -INF, 0, -INF, NaN, 1, 2, 3}}, 1, {3}, true, {0}, {2, 1, 0}},
    /* max_pool2d, 2x2 windows, stride 2, on [1, 1, 2, 4]: windows
     * {NaN, 1, 2, 3}, {4, INF, 0, 5}. */
    {"max_pool2d", "def @main(%x: Tensor[(1, 1, 2, 4), float32]) { max_pool2d(%x, kernel_shape=[2, 2], strides=[2, 2]) }\n",
     1, {4}, {{1, 1, 2, 4}}, {{NaN, 1, 4, INF, 2, 3, 0, 5}}, 4, {1, 1, 1, 2}, false, {NaN, INF}},
    /* 3x3 windows at stride 2 (conv.c's max_pool_3s2, the row maxima
     * with their even and odd columns apart: with sgemm, below) on
     * [1, 1, 3, 7]: windows over columns 0-2, 2-4, 4-6; a NaN at column 3
     * and +inf at column 6. */
    {"max_pool2d 3x3/2",
     "def @main(%x: Tensor[(1, 1, 3, 7), float32]) { max_pool2d(%x, kernel_shape=[3, 3], strides=[2, 2]) }\n", 1,
     {4}, {{1, 1, 3, 7}}, {{1, 2, 3, 4, 5, 6, 7, 0, 0, 0, NaN, 0, -INF, 0, -1, -2, -3, -4, -5, -6, INF}}, 4,
     {1, 1, 1, 3}, false, {3, NaN, INF}},
    /* Rows of 27 (squeezenet's last pool): the row maxima read straight
     * from x in whole vectors, the last one overlapping the one before.
     * Row 0 holds the column index (NaN at 25), row 1 a NaN at column 5,
     * row 2 a NaN at column 20, in the overlapped vector: windows over
     * columns 4-6, 18-20, 20-22 and 24-26 are NaN, the others the largest
     * column index in them. */
    {"max_pool2d 3x3/2 rows of 27",
     "def @main(%x: Tensor[(1, 1, 3, 27), float32]) { max_pool2d(%x, kernel_shape=[3, 3], strides=[2, 2]) }\n", 1,
     {4}, {{1, 1, 3, 27}},
     {{0,  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, NaN, 26,
       0,  0, 0, 0, 0, NaN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, NaN, -1, -1, -1, -1, -1, -1}},
     4, {1, 1, 1, 13}, false, {2, 4, NaN, 8, 10, 12, 14, 16, 18, NaN, NaN, 24, NaN}},
    /* The same through a fused epilogue (the pool is an anchor, + 1 after). */
    {"max_pool2d+1",
     "def @main(%x: Tensor[(1, 1, 2, 4), float32]) { add(max_pool2d(%x, kernel_shape=[2, 2], strides=[2, 2]), 1.0) }\n",
     1, {4}, {{1, 1, 2, 4}}, {{1, 1, 4, -INF, 2, NaN, 0, -INF}}, 4, {1, 1, 1, 2}, false, {NaN, 5}},
    /* softmax along the last axis, per row (NumPy: e = exp(x - max(x));
     * e / sum(e)):
     *   [NaN, 1, 2, 3]: max is NaN, everything NaN;
     *   [1, 2, inf, 0]: max inf, inf - inf = NaN in the sum: all NaN;
     *   [1, -inf, 0, -inf]: exp(x - 1) = [1, 0, 1/e, 0], sum 1 + 1/e. */
    {"softmax", "def @main(%x: Tensor[(3, 4), float32]) { softmax(%x, axis=-1) }\n", 1, {2}, {{3, 4}},
     {{NaN, 1, 2, 3, 1, 2, INF, 0, 1, -INF, 0, -INF}}, 2, {3, 4}, false,
     {NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN, 0.731058579f, 0, 0.268941421f, 0}},
    /* Rows of 11: eight running maxima and a tail of 3. A NaN in a lane
     * (index 5) makes the row NaN; a 100 among zeros, in a lane (index 6)
     * or in the tail (index 9), gives 1 there and e^-100 (0 within the
     * tolerance) elsewhere, and a maximum that missed it would overflow
     * exp(100) to inf and the row to NaN. */
    {"softmax", "def @main(%x: Tensor[(3, 11), float32]) { softmax(%x, axis=-1) }\n", 1, {2}, {{3, 11}},
     {{1, 2, 3, 4, 5, NaN, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0}},
     2, {3, 11}, false,
     {NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN, NaN, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
      1, 0, 0}},
};

/* relu(x w^T + b) with x = [[NaN, 1], [1, 2]], w = [[1, 1], [2, -1]],
 * b = [0, 1]: row 0 is NaN everywhere (NaN * 1 + 1 * 1), row 1 is
 * relu([3, 1]) = [3, 1]. Both with the generated loops and with OpenBLAS. */
static const nan_case kDense = {
    "dense_relu",
    "def @main(%x: Tensor[(2, 2), float32], %w: Tensor[(2, 2), float32], %b: Tensor[(2,), float32]) {\n"
    "  relu(add(dense(%x, %w, transB=1), %b))\n}\n",
    3, {2, 2, 1}, {{2, 2}, {2, 2}, {2}}, {{NaN, 1, 1, 2}, {1, 1, 2, -1}, {0, 1}}, 2, {2, 2}, false,
    {NaN, NaN, 3, 1}};

START_TEST(test_elementwise_operators_keep_nan_and_follow_infinities) {
  for (size_t i = 0; i < sizeof kElementwise / sizeof kElementwise[0]; i++) run_case(&kElementwise[i], false);
}
END_TEST

START_TEST(test_reductions_pooling_and_softmax_propagate_nan) {
  for (size_t i = 0; i < sizeof kReductions / sizeof kReductions[0]; i++) {
    run_case(&kReductions[i], false);
    run_case(&kReductions[i], true); /* where CPU kernels branch on has_sgemm() (max_pool_3s2) */
  }
}
END_TEST

START_TEST(test_a_nan_input_row_makes_a_nan_dense_relu_row) {
  run_case(&kDense, false);
  run_case(&kDense, true);
}
END_TEST

/* Other widths: f64 and f16 maximum keep NaN; a cast of NaN to f16 and
 * back is NaN, of inf is inf. f16 values are given as f32 inputs cast in
 * the program. */
static const nan_case kWidths[] = {
    {"f64_maximum",
     "def @main(%x: Tensor[(8,), float32], %y: Tensor[(8,), float32]) {\n"
     "  cast(maximum(cast(%x, dtype=\"float64\"), cast(%y, dtype=\"float64\")), dtype=\"float32\")\n}\n",
     2, {1, 1}, {{8}, {8}}, {X8, {0, 0, 0, NaN, NaN, -INF, 5, INF}}, 1, {8}, false,
     {NaN, INF, 0, NaN, NaN, 0, NaN, INF}},
    {"f16_relu", "def @main(%x: Tensor[(8,), float32]) { cast(relu(cast(%x, dtype=\"float16\")), dtype=\"float32\") }\n",
     1, {1}, {{8}}, {X8}, 1, {8}, false, {NaN, INF, 0, 1, 0, 0, NaN, 3}},
    /* 1e5 overflows float16 to inf; 1e-8 underflows to 0. */
    {"f16_round_trip", "def @main(%x: Tensor[(4,), float32]) { cast(cast(%x, dtype=\"float16\"), dtype=\"float32\") }\n",
     1, {1}, {{4}}, {{NaN, 1e5f, -1e5f, 1e-8f}}, 1, {4}, false, {NaN, INF, -INF, 0}},
    {"f64_max_reduce",
     "def @main(%x: Tensor[(2, 3), float32]) { cast(max(cast(%x, dtype=\"float64\"), axes=[1]), dtype=\"float32\") }\n",
     1, {2}, {{2, 3}}, {{1, NaN, 2, -INF, 3, 2}}, 1, {2}, false, {NaN, 3}},
};

START_TEST(test_f64_and_f16_keep_nan_too) {
  for (size_t i = 0; i < sizeof kWidths / sizeof kWidths[0]; i++) run_case(&kWidths[i], false);
}
END_TEST

int main(void) {
  Suite *s = suite_create("compute_nan");
  TCase *tc = tcase_create("nan");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_elementwise_operators_keep_nan_and_follow_infinities);
  tcase_add_test(tc, test_reductions_pooling_and_softmax_propagate_nan);
  tcase_add_test(tc, test_a_nan_input_row_makes_a_nan_dense_relu_row);
  tcase_add_test(tc, test_f64_and_f16_keep_nan_too);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
