/* Element-wise, injective and reduction primitives: each program goes
 * through the default passes, its fused primitive becomes one kernel
 * (nimble_compute_primitive), which is compiled, loaded and run on random
 * inputs of several shapes (symbolic dims at different sizes, odd
 * extents, size-1 broadcast dims) against a plain C reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/passes.h"
#include "nimble_test.h"

typedef struct fixture {
  nimble_arena *arena;
  nimble_module *m;
  const char *prim;
  ch_kernel k;
  ch_env env;
} fixture;

static void fx_open(fixture *f, const char *text, const char *prefix) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&f->arena));
  f->m = ch_compile_module(f->arena, text);
  f->prim = ch_find_primitive(f->m, prefix);
  ch_kernel_build(f->m, f->prim, false, NULL, &f->k);
  ch_env_init(&f->env, false);
}

static void fx_close(fixture *f) {
  ch_kernel_free(&f->k);
  nimble_arena_destroy(f->arena);
}

static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

START_TEST(test_an_elementwise_chain_with_broadcasting_is_one_kernel_matching_c) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(n, m), float32], %y: Tensor[(?,), float32], %z: Tensor[(n, 1), float32]) {\n"
          "  tanh(add(multiply(%x, %y), sigmoid(%z)))\n"
          "}\n",
          "fused.multiply_");
  /* One primitive holds the whole chain: no intermediate buffers. */
  ck_assert_str_eq(f.prim, "fused.multiply_sigmoid_add_tanh");
  static const int64_t shapes[][3] = {{1, 1, 1}, {3, 7, 7}, {3, 7, 1}, {5, 16, 16}, {2, 33, 1}, {4, 9, 9}, {0, 5, 5}};
  unsigned seed = 7;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t n = shapes[s][0], m = shapes[s][1], ylen = shapes[s][2];
    ch_tensor x, y, z, out;
    int64_t xs[2] = {n, m}, zs[2] = {n, 1};
    ch_tensor_f32(&x, 2, xs, &seed, -2, 2);
    ch_tensor_f32(&y, 1, &ylen, &seed, -2, 2);
    ch_tensor_f32(&z, 2, zs, &seed, -3, 3);
    ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
    ch_tensor *args[] = {&x, &y, &z, &out};
    ck_assert_int_eq(ch_call(&f.k, &f.env, args, 4), 0);
    float *want = malloc((size_t)(n * m + 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++)
        want[i * m + j] = tanhf(ch_f(&x)[i * m + j] * ch_f(&y)[ylen == 1 ? 0 : j] + sigm(ch_f(&z)[i]));
    ch_assert_close("tanh(x*y + sigmoid(z))", ch_f(&out), want, (size_t)(n * m), 2e-6f, 2e-6f);
    free(want);
    ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&z), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

/* An LSTM cell of hidden size H over gates [n, 4H] laid out i, o, f, u,
 * returning (h2, c2). */
static void lstm_cell_program(char *buf, size_t size, int64_t H) {
  long long h = (long long)H;
  snprintf(buf, size,
           "def @main(%%g: Tensor[(n, %lld), float32], %%c: Tensor[(n, %lld), float32]) {\n"
           "  let %%i = sigmoid(strided_slice(%%g, begin=[0], end=[%lld], axes=[1]));\n"
           "  let %%f = sigmoid(strided_slice(%%g, begin=[%lld], end=[%lld], axes=[1]));\n"
           "  let %%u = tanh(strided_slice(%%g, begin=[%lld], end=[%lld], axes=[1]));\n"
           "  let %%c2 = add(multiply(%%f, %%c), multiply(%%i, %%u));\n"
           "  let %%o = sigmoid(strided_slice(%%g, begin=[%lld], end=[%lld], axes=[1]));\n"
           "  let %%h2 = multiply(%%o, tanh(%%c2));\n"
           "  (%%h2, %%c2)\n"
           "}\n",
           4 * h, h, h, 2 * h, 3 * h, 3 * h, 4 * h, h, 2 * h);
}

/* f's cell kernel (lstm_cell_program(H)) on each batch size, on one
 * thread and then on two (tasks reversed), gates drawn from [-g, g],
 * against C. */
static void check_lstm_cell(fixture *f, int64_t H, const int64_t *batches, size_t nb, unsigned *seed, float g_range) {
  for (int threads = 1; threads <= 2; threads++) {
    if (threads == 2) ch_env_threads_reversed(&f->env, 2);
    for (size_t s = 0; s < nb; s++) {
      int64_t n = batches[s], gs[2] = {n, 4 * H}, cs[2] = {n, H};
      ch_tensor g, c, h2, c2;
      ch_tensor_f32(&g, 2, gs, seed, -g_range, g_range);
      ch_tensor_f32(&c, 2, cs, seed, -2, 2);
      ch_tensor_f32(&h2, 2, cs, seed, 0, 0);
      ch_tensor_f32(&c2, 2, cs, seed, 0, 0);
      ch_tensor *args[] = {&g, &c, &h2, &c2};
      ck_assert_int_eq(ch_call(&f->k, &f->env, args, 4), 0);
      float *want_h = malloc((size_t)(n * H + 1) * sizeof(float));
      float *want_c = malloc((size_t)(n * H + 1) * sizeof(float));
      ck_assert(want_h && want_c);
      for (int64_t b = 0; b < n; b++)
        for (int64_t j = 0; j < H; j++) {
          const float *gb = ch_f(&g) + b * 4 * H;
          float cn = sigm(gb[2 * H + j]) * ch_f(&c)[b * H + j] + sigm(gb[j]) * tanhf(gb[3 * H + j]);
          want_c[b * H + j] = cn;
          want_h[b * H + j] = sigm(gb[H + j]) * tanhf(cn);
        }
      ch_assert_close("c2", ch_f(&c2), want_c, (size_t)(n * H), 2e-6f, 2e-6f);
      ch_assert_close("h2", ch_f(&h2), want_h, (size_t)(n * H), 2e-6f, 2e-6f);
      free(want_h), free(want_c);
      ch_tensor_free(&g), ch_tensor_free(&c), ch_tensor_free(&h2), ch_tensor_free(&c2);
    }
  }
}

/* fuse_ops' side outputs: an LSTM cell's new state c2 is read by h2 and
 * also returned, so one kernel writes both (out0 = h2, out1 = c2), h2
 * reading c2 back from out1. Hidden size 5 (no whole vector), the batch
 * known only at run time, on one thread and on two (tasks reversed). */
START_TEST(test_an_lstm_cell_is_one_kernel_writing_both_states) {
  fixture f;
  char prog[1024];
  lstm_cell_program(prog, sizeof prog, 5);
  fx_open(&f, prog, "fused.");
  size_t kernels = 0; /* the cell's (besides the allocation helpers') */
  for (size_t i = 0; i < nimble_module_num_funcs(f.m); i++)
    kernels += !strncmp(nimble_module_func_at(f.m, i)->name, "fused.strided_slice", 19);
  ck_assert_uint_eq(kernels, 1);
  static const int64_t batches[] = {1, 3, 7, 0};
  unsigned seed = 11;
  check_lstm_cell(&f, 5, batches, sizeof batches / sizeof batches[0], &seed, 3.0f);
  fx_close(&f);
}
END_TEST

/* Loops evaluating exp, tanh, sigmoid or erf run four (or two) vectors
 * side by side where the last axis is a known multiple of that many
 * lanes, one vector otherwise (no wider scalar tail): an LSTM cell of
 * hidden size 64 at 32 lanes, a GELU over 48 columns at 16 and over 24
 * at 8; each against C, with batches of 1 and 3 on one and two threads. */
static float gelu(float v) { return 0.5f * v * (1.0f + erff(v / 1.41421354f)); }

START_TEST(test_transcendental_loops_run_several_vectors_side_by_side) {
  fixture f;
  char cell[1024];
  lstm_cell_program(cell, sizeof cell, 64);
  fx_open(&f, cell, "fused.");
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
  ck_assert_msg(strstr(text, "vectorized(32)") != NULL && strstr(text, "vectorized(8)") == NULL, "%s", text);
  free(text);
  static const int64_t batches[] = {1, 3};
  unsigned seed = 29;
  check_lstm_cell(&f, 64, batches, 2, &seed, 4.0f);
  fx_close(&f);
  static const struct {
    int64_t m;
    const char *lanes;
  } gelus[] = {{48, "vectorized(16)"}, {24, "vectorized(8)"}};
  for (size_t s = 0; s < sizeof gelus / sizeof gelus[0]; s++) {
    char prog[256];
    snprintf(prog, sizeof prog,
             "def @main(%%x: Tensor[(n, %lld), float32]) {\n"
             "  multiply(multiply(%%x, const[(), float32]{0.5}), add(erf(divide(%%x, const[(), float32]{1.41421354})), const[(), float32]{1.0}))\n"
             "}\n",
             (long long)gelus[s].m);
    fx_open(&f, prog, "fused.");
    NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
    ck_assert_msg(strstr(text, gelus[s].lanes) != NULL, "%lld columns: %s", (long long)gelus[s].m, text);
    free(text);
    int64_t xs[2] = {3, gelus[s].m};
    ch_tensor x, out;
    ch_tensor_f32(&x, 2, xs, &seed, -5, 5);
    ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
    ch_tensor *args[] = {&x, &out};
    ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
    float want[3 * 48];
    for (int64_t i = 0; i < 3 * gelus[s].m; i++) want[i] = gelu(ch_f(&x)[i]);
    ch_assert_close("gelu", ch_f(&out), want, (size_t)(3 * gelus[s].m), 2e-6f, 2e-6f);
    ch_tensor_free(&x), ch_tensor_free(&out);
    fx_close(&f);
  }
}
END_TEST

START_TEST(test_a_broadcast_mismatch_fails_the_kernel_with_a_message) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32], %y: Tensor[(?,), float32]) { exp(add(%x, %y)) }\n",
          "fused.add_exp");
  unsigned seed = 3;
  int64_t xs[2] = {2, 7}, ylen = 5;
  ch_tensor x, y, out;
  ch_tensor_f32(&x, 2, xs, &seed, 0, 1);
  ch_tensor_f32(&y, 1, &ylen, &seed, 0, 1);
  ch_tensor_f32(&out, 2, xs, &seed, 0, 1);
  ch_tensor *args[] = {&x, &y, &out};
  ck_assert_int_ne(ch_call(&f.k, &f.env, args, 3), 0);
  ck_assert_msg(strstr(f.env.error, "broadcast") != NULL, "message: %s", f.env.error);
  /* A wrong output shape is refused too. */
  int64_t bad[2] = {2, 6}, ok = 7;
  ch_tensor_free(&y);
  ch_tensor_free(&out);
  ch_tensor_f32(&y, 1, &ok, &seed, 0, 1);
  ch_tensor_f32(&out, 2, bad, &seed, 0, 1);
  ck_assert_int_ne(ch_call(&f.k, &f.env, args, 3), 0);
  ck_assert_msg(strstr(f.env.error, "output axis 1") != NULL, "message: %s", f.env.error);
  ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_where_over_a_comparison_computes_leaky_relu) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(?, 5), float32]) {\n"
          "  where(greater(%x, 0.0), %x, multiply(%x, 0.1))\n"
          "}\n",
          "fused.");
  unsigned seed = 11;
  int64_t xs[2] = {6, 5};
  ch_tensor x, out;
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
  ch_tensor *args[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  float want[30];
  for (int i = 0; i < 30; i++) want[i] = ch_f(&x)[i] > 0 ? ch_f(&x)[i] : ch_f(&x)[i] * 0.1f;
  ch_assert_close("leaky relu", ch_f(&out), want, 30, 0, 1e-6f);
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_a_reduction_takes_its_input_chain_and_epilogue) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32]) { divide(sum(exp(%x), axes=[1]), 4.0) }\n", "fused.exp_sum");
  ck_assert_str_eq(f.prim, "fused.exp_sum_divide");
  static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {2, 64}, {5, 13}, {4, 0}};
  unsigned seed = 5;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t n = shapes[s][0], m = shapes[s][1];
    ch_tensor x, out;
    int64_t xs[2] = {n, m};
    ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
    ch_tensor_f32(&out, 1, &n, &seed, 0, 0);
    ch_tensor *args[] = {&x, &out};
    ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
    float want[8];
    for (int64_t i = 0; i < n; i++) {
      double acc = 0;
      for (int64_t j = 0; j < m; j++) acc += exp((double)ch_f(&x)[i * m + j]);
      want[i] = (float)(acc / 4.0);
    }
    ch_assert_close("sum(exp(x))/4", ch_f(&out), want, (size_t)n, 1e-6f, 1e-5f);
    ch_tensor_free(&x), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_mean_over_two_axes_with_keepdims_and_max_and_argmax) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(a, b, c), float32]) { sqrt(mean(multiply(%x, %x), axes=[0, 2], keepdims=1)) }\n",
          "fused.");
  unsigned seed = 9;
  int64_t a = 3, b = 5, c = 7, xs[3] = {3, 5, 7}, os[3] = {1, 5, 1};
  ch_tensor x, out;
  ch_tensor_f32(&x, 3, xs, &seed, -2, 2);
  ch_tensor_f32(&out, 3, os, &seed, 0, 0);
  ch_tensor *args[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  float want[5];
  for (int64_t j = 0; j < b; j++) {
    double acc = 0;
    for (int64_t i = 0; i < a; i++)
      for (int64_t k = 0; k < c; k++) {
        double v = ch_f(&x)[(i * b + j) * c + k];
        acc += v * v;
      }
    want[j] = (float)sqrt(acc / (double)(a * c));
  }
  ch_assert_close("rms over axes 0, 2", ch_f(&out), want, 5, 1e-6f, 1e-5f);
  ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(a, b, c), float32]) { negative(max(%x, axes=[1])) }\n", "fused.");
  int64_t ms[2] = {3, 7};
  ch_tensor_f32(&out, 2, ms, &seed, 0, 0);
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  float wmax[21];
  for (int64_t i = 0; i < a; i++)
    for (int64_t k = 0; k < c; k++) {
      float best = -INFINITY;
      for (int64_t j = 0; j < b; j++) best = fmaxf(best, ch_f(&x)[(i * b + j) * c + k]);
      wmax[i * c + k] = -best;
    }
  ch_assert_close("-max over axis 1", ch_f(&out), wmax, 21, 0, 0);
  ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(a, b, c), float32]) { argmax(%x, axis=2, keepdims=0) }\n", "fused.");
  ch_tensor_i64(&out, 2, (int64_t[]){3, 5}, NULL);
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  for (int64_t r = 0; r < a * b; r++) {
    int64_t bi = 0;
    for (int64_t k = 1; k < c; k++)
      if (ch_f(&x)[r * c + k] > ch_f(&x)[r * c + bi]) bi = k;
    ck_assert_int_eq(ch_i(&out)[r], bi);
  }
  ch_tensor_free(&out);
  ch_tensor_free(&x);
  fx_close(&f);
}
END_TEST

START_TEST(test_an_epilogue_that_broadcasts_its_reduction_recomputes_it_correctly) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32]) { exp(subtract(%x, max(%x, axes=[1], keepdims=1))) }\n",
          "fused.");
  ck_assert_msg(strstr(f.prim, "max") != NULL, "one primitive holds the reduction and its epilogue: %s", f.prim);
  unsigned seed = 37;
  int64_t xs[2] = {3, 9};
  ch_tensor x, out;
  ch_tensor_f32(&x, 2, xs, &seed, -5, 5);
  ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
  ch_tensor *args[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  float want[27];
  for (int i = 0; i < 3; i++) {
    float mx = -INFINITY;
    for (int j = 0; j < 9; j++) mx = fmaxf(mx, ch_f(&x)[i * 9 + j]);
    for (int j = 0; j < 9; j++) want[i * 9 + j] = expf(ch_f(&x)[i * 9 + j] - mx);
  }
  ch_assert_close("exp(x - max(x))", ch_f(&out), want, 27, 1e-6f, 2e-6f);
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

/* A reduction over the last axis broadcast back over it (primitive.c: the
 * anchor computed once per row around a vectorized, not unrolled, loop
 * over the row): bert's layer norm as ONNX spells it, in its two fused
 * kernels, on rows of 128, 19, 7 and 1 (whole vectors, a tail, shorter
 * than a vector), a NaN in one row only, on 1, 2 and 3 threads (the last
 * with its tasks run last first); and reductions over another axis, whose
 * value changes along the last one (the old nest), against the same
 * double reference. */
START_TEST(test_row_reductions_broadcast_over_the_row_match_the_reference) {
  static const struct {
    const char *text, *prefix;
    int kind; /* 0: x - mean(x) over the last axis; 1: the variance part; 2: x - mean over axis 1 */
  } kCases[] = {
      {"def @main(%x: Tensor[(b, s, m), float32]) { subtract(%x, mean(%x, axes=[-1], keepdims=1)) }\n",
       "fused.mean", 0},
      {"def @main(%x: Tensor[(b, s, m), float32], %g: Tensor[(m,), float32], %e: Tensor[(m,), float32]) {\n"
       "  add(multiply(divide(%x, sqrt(add(mean(power(%x, 2.0), axes=[-1], keepdims=1), 1e-05))), %g), %e)\n}\n",
       "fused.power", 1},
      {"def @main(%x: Tensor[(b, s, m), float32]) { subtract(%x, mean(%x, axes=[1], keepdims=1)) }\n",
       "fused.mean", 2},
  };
  static const int64_t widths[] = {128, 19, 7, 1};
  unsigned seed = 53;
  for (size_t ci = 0; ci < sizeof kCases / sizeof kCases[0]; ci++) {
    fixture f;
    fx_open(&f, kCases[ci].text, kCases[ci].prefix);
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
      for (int threads = 1; threads <= 3; threads++) {
        /* 64 rows a batch: rows of 128 then make 4 tasks (a row's work is
         * 4 evaluations an element, tasks at least 16384). */
        int64_t B = 2, S = 64, M = widths[wi], shape[3] = {B, S, M}, n = B * S * M;
        ch_tensor x, g, e, out;
        ch_tensor_f32(&x, 3, shape, &seed, -3, 3);
        ch_tensor_f32(&g, 1, &M, &seed, 0.5f, 1.5f);
        ch_tensor_f32(&e, 1, &M, &seed, -1, 1);
        ch_tensor_f32(&out, 3, shape, &seed, 50, 60);
        ch_f(&x)[(1 * S + 2) * M + M / 2] = NAN; /* row (1, 2) */
        ch_env_init(&f.env, false);
        if (threads == 2) ch_env_threads(&f.env, 2);
        if (threads == 3) ch_env_threads_reversed(&f.env, 3);
        ch_tensor *args1[] = {&x, &out}, *args2[] = {&x, &g, &e, &out};
        ck_assert_int_eq(kCases[ci].kind == 1 ? ch_call(&f.k, &f.env, args2, 4) : ch_call(&f.k, &f.env, args1, 2), 0);
        for (int64_t i = 0; i < n; i++) {
          int64_t bi = i / (S * M), si = i / M % S, mi = i % M;
          double acc = 0, want;
          if (kCases[ci].kind == 2) {
            for (int64_t t = 0; t < S; t++) acc += ch_f(&x)[(bi * S + t) * M + mi];
            want = ch_f(&x)[i] - acc / (double)S;
          } else {
            for (int64_t t = 0; t < M; t++) {
              double v = ch_f(&x)[(bi * S + si) * M + t];
              acc += kCases[ci].kind == 1 ? v * v : v;
            }
            want = kCases[ci].kind == 1 ? ch_f(&x)[i] / sqrt(acc / (double)M + 1e-5) * ch_f(&g)[mi] + ch_f(&e)[mi]
                                        : ch_f(&x)[i] - acc / (double)M;
          }
          float got = ch_f(&out)[i];
          if (isnan(want))
            ck_assert_msg(isnan(got), "case %zu width %lld, %d threads: [%lld] = %g, want NaN", ci, (long long)M,
                          threads, (long long)i, got);
          else
            ck_assert_msg(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want),
                          "case %zu width %lld, %d threads: [%lld] = %.9g, want %.9g", ci, (long long)M, threads,
                          (long long)i, got, want);
        }
        ch_tensor_free(&x), ch_tensor_free(&g), ch_tensor_free(&e), ch_tensor_free(&out);
      }
    fx_close(&f);
  }
}
END_TEST

START_TEST(test_a_transpose_reshape_chain_is_index_arithmetic) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(?, 4, 6), float32]) { reshape(transpose(%x, axes=[1, 0, 2]), newshape=[-1, 6]) }\n",
          "fused.transpose_reshape");
  unsigned seed = 13;
  for (int64_t n = 1; n <= 5; n += 2) {
    int64_t xs[3] = {n, 4, 6}, os[2] = {4 * n, 6};
    ch_tensor x, out;
    ch_tensor_f32(&x, 3, xs, &seed, -1, 1);
    ch_tensor_f32(&out, 2, os, &seed, 0, 0);
    ch_tensor *args[] = {&x, &out};
    ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < 4; j++)
        for (int64_t k = 0; k < 6; k++)
          ck_assert_float_eq(ch_f(&out)[(j * n + i) * 6 + k], ch_f(&x)[(i * 4 + j) * 6 + k]);
    ch_tensor_free(&x), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

/* Attention heads merged back (bert): a reshape of a reshape of a
 * transpose at the kernel's root; the nest runs over the transpose's
 * indices (no division per element) and must store every element at its
 * flat position, on 1 and 2 threads. */
START_TEST(test_a_view_chain_at_the_root_stores_each_element_at_its_flat_place) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(?, 2, 5, 8), float32]) { reshape(reshape(transpose(%x, axes=[0, 2, 1, 3]), "
          "newshape=[-1, 5, 16]), newshape=[-1, 80]) }\n",
          "fused.transpose_reshape_reshape");
  unsigned seed = 17;
  for (int threads = 1; threads <= 2; threads++)
    for (int64_t n = 1; n <= 4; n += 3) {
      if (threads == 2) ch_env_threads(&f.env, 2);
      int64_t xs[4] = {n, 2, 5, 8}, os[2] = {n, 80};
      ch_tensor x, out;
      ch_tensor_f32(&x, 4, xs, &seed, -1, 1);
      ch_tensor_f32(&out, 2, os, &seed, 50, 60);
      ch_tensor *args[] = {&x, &out};
      ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
      for (int64_t b = 0; b < n; b++)
        for (int64_t s = 0; s < 5; s++)
          for (int64_t h = 0; h < 2; h++)
            for (int64_t d = 0; d < 8; d++)
              ck_assert_float_eq(ch_f(&out)[b * 80 + s * 16 + h * 8 + d], ch_f(&x)[((b * 2 + h) * 5 + s) * 8 + d]);
      ch_tensor_free(&x), ch_tensor_free(&out);
    }
  fx_close(&f);
}
END_TEST

START_TEST(test_slices_concatenation_and_take_match_numpy_semantics) {
  fixture f;
  /* Rows 1, 3, 5...; columns all but the last. */
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32]) { strided_slice(%x, begin=[1, 0], end=[100, -1], strides=[2, 1]) }\n",
          "fused.strided_slice");
  unsigned seed = 17;
  int64_t xs[2] = {6, 5}, os[2] = {3, 4};
  ch_tensor x, out;
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  ch_tensor_f32(&out, 2, os, &seed, 0, 0);
  ch_tensor *args[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) ck_assert_float_eq(ch_f(&out)[i * 4 + j], ch_f(&x)[(1 + 2 * i) * 5 + j]);
  ch_tensor_free(&out);
  fx_close(&f);

  /* A negative stride from the end: elements 5, 3, 1 of a length-6 vector. */
  fx_open(&f, "def @main(%x: Tensor[(?,), float32]) { strided_slice(%x, begin=[-1], end=[-1000], strides=[-2]) }\n",
          "fused.strided_slice");
  int64_t six = 6, three = 3;
  ch_tensor v;
  ch_tensor_f32(&v, 1, &six, &seed, -1, 1);
  ch_tensor_f32(&out, 1, &three, &seed, 0, 0);
  ch_tensor *args2[] = {&v, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args2, 2), 0);
  for (int i = 0; i < 3; i++) ck_assert_float_eq(ch_f(&out)[i], ch_f(&v)[5 - 2 * i]);
  ch_tensor_free(&out), ch_tensor_free(&v);
  fx_close(&f);

  fx_open(&f, "def @main(%a: Tensor[(n, 3), float32], %b: Tensor[(n, ?), float32]) { concatenate(%a, %b, axis=1) }\n",
          "fused.concatenate");
  int64_t as[2] = {4, 3}, bs[2] = {4, 2}, cs[2] = {4, 5};
  ch_tensor a, b;
  ch_tensor_f32(&a, 2, as, &seed, -1, 1);
  ch_tensor_f32(&b, 2, bs, &seed, -1, 1);
  ch_tensor_f32(&out, 2, cs, &seed, 0, 0);
  ch_tensor *args3[] = {&a, &b, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args3, 3), 0);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 5; j++)
      ck_assert_float_eq(ch_f(&out)[i * 5 + j], j < 3 ? ch_f(&a)[i * 3 + j] : ch_f(&b)[i * 2 + j - 3]);
  ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(n, m), float32], %i: Tensor[(k,), int64]) { take(%x, %i, axis=1) }\n",
          "fused.take");
  int64_t idx[4] = {4, 0, -1, 2}, four = 4, ts[2] = {6, 4};
  ch_tensor ind;
  ch_tensor_i64(&ind, 1, &four, idx);
  ch_tensor_f32(&out, 2, ts, &seed, 0, 0);
  ch_tensor *args4[] = {&x, &ind, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args4, 3), 0);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) {
      int64_t col = idx[j] < 0 ? idx[j] + 5 : idx[j];
      ck_assert_float_eq(ch_f(&out)[i * 4 + j], ch_f(&x)[i * 5 + col]);
    }
  ch_tensor_free(&ind), ch_tensor_free(&out), ch_tensor_free(&x);
  fx_close(&f);
}
END_TEST

/* A concatenate of parameters as a whole primitive is one contiguous copy
 * per input and run (transform.c, cp_concat_copy): squeezenet's fire
 * modules (channels of two 4-D tensors, runs of h*w), a leading axis, a
 * middle axis of a 3-D tensor, an input with no channels, odd and
 * vector-sized runs, larger planes; on one, two and three threads (the
 * last one's tasks run last first), against plain index loops. */
START_TEST(test_a_concatenate_of_parameters_copies_each_input_into_its_slice) {
  /* Channels of three 4-D tensors (squeezenet's fire modules). */
  static const char kConcat4[] =
      "def @main(%a: Tensor[(n, ?, h, w), float32], %b: Tensor[(n, ?, h, w), float32], %c: Tensor[(n, ?, h, w), "
      "float32]) { concatenate(%a, %b, %c, axis=1) }\n";
  static const struct {
    const char *text;
    int rank, axis;
    int64_t a[4], b[4], c[4];
  } kCases[] = {
      {kConcat4,
       4, 1, {2, 3, 5, 7}, {2, 4, 5, 7}, {2, 2, 5, 7}},
      {kConcat4,
       4, 1, {1, 16, 8, 8}, {1, 0, 8, 8}, {1, 5, 8, 8}},
      {"def @main(%a: Tensor[(?, m, k), float32], %b: Tensor[(?, m, k), float32], %c: Tensor[(?, m, k), float32]) { "
       "concatenate(%a, %b, %c, axis=0) }\n",
       3, 0, {2, 3, 11}, {1, 3, 11}, {3, 3, 11}},
      {"def @main(%a: Tensor[(n, ?, 9), float32], %b: Tensor[(n, ?, 9), float32], %c: Tensor[(n, ?, 9), float32]) { "
       "concatenate(%a, %b, %c, axis=-2) }\n",
       3, 1, {3, 2, 9}, {3, 5, 9}, {3, 1, 9}},
      /* Planes of 17x19 (batch 2) and 16x16 (an empty input between). */
      {kConcat4,
       4, 1, {2, 3, 17, 19}, {2, 2, 17, 19}, {2, 1, 17, 19}},
      {kConcat4,
       4, 1, {1, 4, 16, 16}, {1, 0, 16, 16}, {1, 3, 16, 16}},
  };
  unsigned seed = 21;
  for (size_t ci = 0; ci < sizeof kCases / sizeof kCases[0]; ci++) {
    fixture f;
    fx_open(&f, kCases[ci].text, "fused.concatenate");
    int R = kCases[ci].rank, ax = kCases[ci].axis;
    const int64_t *shp[3] = {kCases[ci].a, kCases[ci].b, kCases[ci].c};
    int64_t os[4];
    for (int d = 0; d < R; d++) os[d] = d == ax ? shp[0][d] + shp[1][d] + shp[2][d] : shp[0][d];
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; d++) outer *= os[d];
    for (int d = ax + 1; d < R; d++) inner *= os[d];
    for (int threads = 1; threads <= 3; threads++) {
      ch_tensor in[3], out;
      for (int i = 0; i < 3; i++) ch_tensor_f32(&in[i], R, shp[i], &seed, -1, 1);
      ch_tensor_f32(&out, R, os, &seed, 50, 60);
      if (threads == 2) ch_env_threads(&f.env, 2);
      if (threads == 3) ch_env_threads_reversed(&f.env, 3); /* the last task first */
      ch_tensor *args[] = {&in[0], &in[1], &in[2], &out};
      ck_assert_int_eq(ch_call(&f.k, &f.env, args, 4), 0);
      for (int64_t o = 0; o < outer; o++)
        for (int64_t m = 0; m < os[ax]; m++) {
          int i = 0;
          int64_t mm = m;
          while (mm >= shp[i][ax]) mm -= shp[i][ax], i++;
          for (int64_t k = 0; k < inner; k++)
            ck_assert_msg(ch_f(&out)[(o * os[ax] + m) * inner + k] == ch_f(&in[i])[(o * shp[i][ax] + mm) * inner + k],
                          "case %zu, %d threads: run (%lld, %lld) element %lld", ci, threads, (long long)o,
                          (long long)m, (long long)k);
        }
      for (int i = 0; i < 3; i++) ch_tensor_free(&in[i]);
      ch_tensor_free(&out);
    }
    fx_close(&f);
  }
}
END_TEST

START_TEST(test_gather_nd_and_expand_read_indices_and_shapes_from_tensors) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(a, b, c), float32], %i: Tensor[(?, 2), int64]) { gather_nd(%x, %i) }\n",
          "fused.gather_nd");
  unsigned seed = 29;
  int64_t xs[3] = {3, 4, 5}, is[2] = {3, 2}, os[2] = {3, 5};
  int64_t pick[6] = {2, 3, 0, -1, 1, 0};
  ch_tensor x, ind, out;
  ch_tensor_f32(&x, 3, xs, &seed, -1, 1);
  ch_tensor_i64(&ind, 2, is, pick);
  ch_tensor_f32(&out, 2, os, &seed, 0, 0);
  ch_tensor *args[] = {&x, &ind, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 3), 0);
  for (int r = 0; r < 3; r++) {
    int64_t i0 = pick[2 * r], i1 = pick[2 * r + 1] < 0 ? pick[2 * r + 1] + 4 : pick[2 * r + 1];
    for (int k = 0; k < 5; k++) ck_assert_float_eq(ch_f(&out)[r * 5 + k], ch_f(&x)[(i0 * 4 + i1) * 5 + k]);
  }
  ch_tensor_free(&ind), ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(b, 1, c), float32], %s: Tensor[(3,), int64]) { expand(%x, %s) }\n",
          "fused.expand");
  int64_t spec[3] = {1, 4, 1}, three = 3, es[3] = {3, 4, 5};
  ch_tensor sp;
  ch_tensor_free(&x);
  ch_tensor_f32(&x, 3, (int64_t[]){3, 1, 5}, &seed, -1, 1);
  ch_tensor_i64(&sp, 1, &three, spec);
  ch_tensor_f32(&out, 3, es, &seed, 0, 0);
  ch_tensor *args2[] = {&x, &sp, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args2, 3), 0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 5; k++) ck_assert_float_eq(ch_f(&out)[(i * 4 + j) * 5 + k], ch_f(&x)[i * 5 + k]);
  /* A shape that does not broadcast is refused. */
  ch_i(&sp)[2] = 3;
  ck_assert_int_ne(ch_call(&f.k, &f.env, args2, 3), 0);
  ck_assert_msg(strstr(f.env.error, "expand") != NULL, "message: %s", f.env.error);
  ch_tensor_free(&x), ch_tensor_free(&sp), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_a_slice_with_bounds_from_tensors_follows_onnx_slice) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(a, b), float32], %s: Tensor[(2,), int64], %e: Tensor[(2,), int64],\n"
          "          %t: Tensor[(2,), int64], %ax: Tensor[(2,), int64]) { dyn_strided_slice(%x, %s, %e, %t, %ax) }\n",
          "fused.dyn_strided_slice");
  unsigned seed = 31;
  int64_t xs[2] = {4, 6}, two = 2;
  ch_tensor x, b, e, t, ax, out;
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  /* Axis 1 from the last element backwards by 2; axis 0 from 1 by 2 to
   * "the end" (INT64_MAX); the axes given in reverse order. */
  int64_t bv[2] = {-1, 1}, ev[2] = {-100, INT64_MAX}, tv[2] = {-2, 2}, av[2] = {-1, 0};
  ch_tensor_i64(&b, 1, &two, bv);
  ch_tensor_i64(&e, 1, &two, ev);
  ch_tensor_i64(&t, 1, &two, tv);
  ch_tensor_i64(&ax, 1, &two, av);
  ch_tensor_f32(&out, 2, (int64_t[]){2, 3}, &seed, 0, 0);
  ch_tensor *args[] = {&x, &b, &e, &t, &ax, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 6), 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) ck_assert_float_eq(ch_f(&out)[i * 3 + j], ch_f(&x)[(1 + 2 * i) * 6 + (5 - 2 * j)]);
  /* A huge step takes one element; a zero step fails. */
  ch_i(&t)[0] = INT64_MIN;
  ch_tensor_free(&out);
  ch_tensor_f32(&out, 2, (int64_t[]){2, 1}, &seed, 0, 0);
  ch_tensor *args2[] = {&x, &b, &e, &t, &ax, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args2, 6), 0);
  ck_assert_float_eq(ch_f(&out)[0], ch_f(&x)[1 * 6 + 5]);
  ck_assert_float_eq(ch_f(&out)[1], ch_f(&x)[3 * 6 + 5]);
  ch_i(&t)[0] = 0;
  ck_assert_int_ne(ch_call(&f.k, &f.env, args2, 6), 0);
  ck_assert_msg(strstr(f.env.error, "step 0") != NULL, "message: %s", f.env.error);
  ch_tensor *all[] = {&x, &b, &e, &t, &ax, &out};
  for (int i = 0; i < 6; i++) ch_tensor_free(all[i]);
  fx_close(&f);
}
END_TEST

START_TEST(test_an_operator_without_a_compute_definition_is_unimplemented_and_named) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m = ch_compile_module(arena, "def @main(%x: Tensor[(n,), float32]) { unique(%x) }\n");
  const char *prim = ch_find_primitive(m, "fused.unique");
  nimble_ln_arena *la;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&la));
  nimble_ln_kernel *k = NULL;
  NIMBLE_ASSERT_ERROR(nimble_compute_primitive(m, prim, NULL, la, &k), NIMBLE_UNIMPLEMENTED, "'unique'");
  ck_assert_ptr_null(k);
  NIMBLE_ASSERT_ERROR(nimble_compute_primitive(m, "fused.nothing", NULL, la, &k), NIMBLE_NOT_FOUND, "fused.nothing");
  ck_assert(nimble_compute_supports_op("dense"));
  ck_assert(!nimble_compute_supports_op("unique"));
  ck_assert(!nimble_compute_supports_op("no_such_op"));
  char sym[64];
  ck_assert(nimble_compute_kernel_symbol("fused.dense_add_relu.1", sym, sizeof sym));
  ck_assert_str_eq(sym, "fused__dense_add_relu__1");
  ck_assert(!nimble_compute_kernel_symbol("fused.dense_add_relu.1", sym, 8));
  nimble_ln_arena_destroy(la);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_floor_ceil_and_round_half_to_even_match_libm) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(n,), float32]) {\n"
          "  add(multiply(round(%x), 100.0), add(multiply(floor(%x), 10.0), ceil(%x)))\n"
          "}\n",
          "fused.");
  static const float vals[] = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, -1.2f, 1.7f, 3.0f, 1e7f, -7.49f, 0.0f, 4.5f};
  int64_t n = (int64_t)(sizeof vals / sizeof vals[0]);
  ch_tensor x, out;
  unsigned seed = 1;
  ch_tensor_f32(&x, 1, &n, &seed, 0, 0);
  memcpy(x.data, vals, sizeof vals);
  ch_tensor_f32(&out, 1, &n, &seed, 0, 0);
  ch_tensor *args[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 2), 0);
  for (int64_t i = 0; i < n; i++) {
    float want = rintf(vals[i]) * 100.0f + (floorf(vals[i]) * 10.0f + ceilf(vals[i]));
    ck_assert_msg(ch_f(&out)[i] == want, "x=%g: got %g, want %g", (double)vals[i], (double)ch_f(&out)[i], (double)want);
  }
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_sin_cos_and_float_mod_match_libm) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n,), float32]) { add(sin(%x), multiply(cos(%x), 8.0)) }\n", "fused.");
  int64_t n = 4001;
  ch_tensor x, y, out;
  unsigned seed = 3;
  ch_tensor_f32(&x, 1, &n, &seed, 0, 0);
  ch_tensor_f32(&y, 1, &n, &seed, 0, 0);
  for (int64_t i = 0; i < n; i++) ch_f(&x)[i] = -200.0f + 0.1f * (float)i + 0.0137f;
  ch_f(&x)[0] = 0.0f;
  ch_f(&x)[1] = 1e-20f;
  ch_tensor_f32(&out, 1, &n, &seed, 0, 0);
  ch_tensor *args1[] = {&x, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args1, 2), 0);
  for (int64_t i = 0; i < n; i++) {
    double v = ch_f(&x)[i], want = sin(v) + 8.0 * cos(v);
    ck_assert_msg(fabs(ch_f(&out)[i] - want) <= 4e-6, "x=%.9g: got %.9g, want %.9g", v, (double)ch_f(&out)[i], want);
  }
  ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(n,), float32], %y: Tensor[(n,), float32]) { mod(%x, %y) }\n", "fused.mod");
  static const float a[6] = {7.5f, -7.5f, 7.5f, -7.5f, 6.0f, 0.25f}, b[6] = {2.0f, 2.0f, -2.0f, -2.0f, 3.0f, 1.0f};
  int64_t six = 6;
  ch_tensor_free(&x), ch_tensor_free(&y);
  ch_tensor_f32(&x, 1, &six, &seed, 0, 0);
  ch_tensor_f32(&y, 1, &six, &seed, 0, 0);
  memcpy(x.data, a, sizeof a);
  memcpy(y.data, b, sizeof b);
  ch_tensor_f32(&out, 1, &six, &seed, 0, 0);
  ch_tensor *args[] = {&x, &y, &out};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 3), 0);
  for (int i = 0; i < 6; i++) {
    float want = a[i] - floorf(a[i] / b[i]) * b[i]; /* numpy.mod */
    ck_assert_msg(ch_f(&out)[i] == want, "mod(%g, %g) = %g, want %g", (double)a[i], (double)b[i], (double)ch_f(&out)[i], (double)want);
  }
  ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_split_writes_every_part_in_one_kernel) {
  fixture f;
  fx_open(&f,
          "def @main(%x: Tensor[(n, 6), float32]) {\n"
          "  let %t = split(%x, axis=1, sizes=[1, 3, 2]);\n"
          "  %t\n"
          "}\n",
          "fused.split");
  unsigned seed = 19;
  int64_t xs[2] = {3, 6};
  ch_tensor x, o[3];
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  static const int64_t w[3] = {1, 3, 2}, off[3] = {0, 1, 4};
  for (int p = 0; p < 3; p++) ch_tensor_f32(&o[p], 2, (int64_t[]){3, w[p]}, &seed, 0, 0);
  ch_tensor *args[] = {&x, &o[0], &o[1], &o[2]};
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 4), 0);
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < w[p]; j++) ck_assert_float_eq(ch_f(&o[p])[i * w[p] + j], ch_f(&x)[i * 6 + off[p] + j]);
  ch_tensor_free(&x);
  for (int p = 0; p < 3; p++) ch_tensor_free(&o[p]);
  fx_close(&f);
}
END_TEST

START_TEST(test_large_elementwise_kernels_are_vectorized_and_run_in_parallel_tasks) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32], %y: Tensor[(m,), float32]) { relu(add(%x, %y)) }\n",
          "fused.add_relu");
  char *text = NULL;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(f.k.kernel, &text));
  ck_assert_msg(strstr(text, "vectorized(8)") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "parallel") != NULL, "%s", text);
  free(text);
  unsigned seed = 23;
  int64_t xs[2] = {300, 203}, m = 203;
  ch_tensor x, y, out;
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  ch_tensor_f32(&y, 1, &m, &seed, -1, 1);
  ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
  ch_tensor *args[] = {&x, &y, &out};
  f.env.tasks = 0;
  ch_env_threads(&f.env, 3); /* tasks really run at once */
  ck_assert_int_eq(ch_call(&f.k, &f.env, args, 3), 0);
  ck_assert_int_gt(f.env.tasks, 1);
  for (int64_t i = 0; i < 300; i++)
    for (int64_t j = 0; j < m; j++)
      ck_assert_float_eq(ch_f(&out)[i * m + j], fmaxf(ch_f(&x)[i * m + j] + ch_f(&y)[j], 0.0f));
  ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_elementwise");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_an_elementwise_chain_with_broadcasting_is_one_kernel_matching_c);
  tcase_add_test(tc, test_a_concatenate_of_parameters_copies_each_input_into_its_slice);
  tcase_add_test(tc, test_a_broadcast_mismatch_fails_the_kernel_with_a_message);
  tcase_add_test(tc, test_where_over_a_comparison_computes_leaky_relu);
  tcase_add_test(tc, test_transcendental_loops_run_several_vectors_side_by_side);
  tcase_add_test(tc, test_a_reduction_takes_its_input_chain_and_epilogue);
  tcase_add_test(tc, test_mean_over_two_axes_with_keepdims_and_max_and_argmax);
  tcase_add_test(tc, test_an_epilogue_that_broadcasts_its_reduction_recomputes_it_correctly);
  tcase_add_test(tc, test_row_reductions_broadcast_over_the_row_match_the_reference);
  tcase_add_test(tc, test_a_transpose_reshape_chain_is_index_arithmetic);
  tcase_add_test(tc, test_a_view_chain_at_the_root_stores_each_element_at_its_flat_place);
  tcase_add_test(tc, test_slices_concatenation_and_take_match_numpy_semantics);
  tcase_add_test(tc, test_floor_ceil_and_round_half_to_even_match_libm);
  tcase_add_test(tc, test_sin_cos_and_float_mod_match_libm);
  tcase_add_test(tc, test_split_writes_every_part_in_one_kernel);
  tcase_add_test(tc, test_large_elementwise_kernels_are_vectorized_and_run_in_parallel_tasks);
  tcase_add_test(tc, test_gather_nd_and_expand_read_indices_and_shapes_from_tensors);
  tcase_add_test(tc, test_a_slice_with_bounds_from_tensors_follows_onnx_slice);
  tcase_add_test(tc, test_an_operator_without_a_compute_definition_is_unimplemented_and_named);
  tcase_add_test(tc, test_an_lstm_cell_is_one_kernel_writing_both_states);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
