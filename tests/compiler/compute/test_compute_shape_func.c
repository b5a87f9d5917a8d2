/* Shape functions as kernels: for primitives with dynamic output shapes
 * the VM runs invoke_shape_func on the host; nimble_compute_shape_func
 * builds it from the same compute definitions. Arguments: each
 * parameter's shape as a 1-D int64 tensor, then the output shape. The
 * expected shapes are computed by hand (NumPy / ONNX rules). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/passes.h"
#include "nimble_test.h"

/* Runs the shape function of the first primitive named prefix* on the
 * given input shapes; returns the kernel's code, the shape in out. */
static int32_t run_shape_func(const char *text, const char *prefix, int n_in, const int64_t *const *shapes,
                              const int *ranks, int out_rank, int64_t *out, char *err, size_t err_size) {
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *m = ch_compile_module(arena, text);
  const char *prim = ch_find_primitive(m, prefix);
  ch_kernel k;
  ch_kernel_build(m, prim, true, NULL, &k);
  char sym[128];
  ck_assert(nimble_compute_kernel_symbol(prim, sym, sizeof sym));
  strcat(sym, "__shape_func");
  ck_assert_str_eq(k.kernel->name, sym);
  ch_env env;
  ch_env_init(&env, false);
  ch_tensor t[8], o;
  ch_tensor *args[9];
  for (int i = 0; i < n_in; i++) {
    int64_t r = ranks[i];
    ch_tensor_i64(&t[i], 1, &r, shapes[i]);
    args[i] = &t[i];
  }
  int64_t orank = out_rank;
  ch_tensor_i64(&o, 1, &orank, NULL);
  args[n_in] = &o;
  int32_t rc = ch_call(&k, &env, args, n_in + 1);
  memcpy(out, o.data, (size_t)out_rank * sizeof(int64_t));
  if (err) snprintf(err, err_size, "%s", env.error);
  for (int i = 0; i < n_in; i++) ch_tensor_free(&t[i]);
  ch_tensor_free(&o);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  return rc;
}

START_TEST(test_broadcast_elementwise_shape_function) {
  const char *p = "def @main(%x: Tensor[(?, 1, ?), float32], %y: Tensor[(?, ?), float32]) { tanh(add(%x, %y)) }\n";
  int64_t xs[3] = {4, 1, 1}, ys[2] = {5, 7}, out[3];
  const int64_t *sh[2] = {xs, ys};
  int ranks[2] = {3, 2};
  char err[512];
  ck_assert_int_eq(run_shape_func(p, "fused.add", 2, sh, ranks, 3, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 4); ck_assert_int_eq(out[1], 5); ck_assert_int_eq(out[2], 7);
  /* 3 against 7 does not broadcast: the shape function fails, naming add. */
  int64_t xs2[3] = {4, 1, 3};
  sh[0] = xs2;
  ck_assert_int_ne(run_shape_func(p, "fused.add", 2, sh, ranks, 3, out, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "add") && strstr(err, "broadcast"), "message: %s", err);
  /* A static dim of the annotation is checked. */
  int64_t xs3[3] = {4, 2, 7};
  sh[0] = xs3;
  ck_assert_int_ne(run_shape_func(p, "fused.add", 2, sh, ranks, 3, out, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "extent is not 1") != NULL, "message: %s", err);
}
END_TEST

START_TEST(test_dense_and_matmul_shape_functions) {
  const char *p = "def @main(%x: Tensor[(?, ?), float32], %w: Tensor[(?, ?), float32]) { dense(%x, %w, transB=1) }\n";
  int64_t xs[2] = {9, 5}, ws[2] = {3, 5}, out[4];
  const int64_t *sh[2] = {xs, ws};
  int ranks[2] = {2, 2};
  char err[512];
  ck_assert_int_eq(run_shape_func(p, "fused.dense", 2, sh, ranks, 2, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 9); ck_assert_int_eq(out[1], 3);
  int64_t bad[2] = {3, 4};
  sh[1] = bad;
  ck_assert_int_ne(run_shape_func(p, "fused.dense", 2, sh, ranks, 2, out, err, sizeof err), 0);
  ck_assert_msg(strstr(err, "inner dimensions") != NULL, "message: %s", err);

  const char *q = "def @main(%a: Tensor[(?, 1, ?, ?), float32], %b: Tensor[(?, ?, ?), float32]) { matmul(%a, %b) }\n";
  int64_t as[4] = {2, 1, 5, 6}, bs[3] = {3, 6, 9};
  const int64_t *sh2[2] = {as, bs};
  int ranks2[2] = {4, 3};
  ck_assert_int_eq(run_shape_func(q, "fused.matmul", 2, sh2, ranks2, 4, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 2); ck_assert_int_eq(out[1], 3); ck_assert_int_eq(out[2], 5); ck_assert_int_eq(out[3], 9);
}
END_TEST

START_TEST(test_reshape_transpose_concat_and_reduce_shape_functions) {
  char err[512];
  int64_t out[4];
  /* reshape with 0 and -1 after a transpose: (n, 4, 6) -> (4, n, 6) -> (4, 6n). */
  const char *p = "def @main(%x: Tensor[(?, 4, 6), float32]) { reshape(transpose(%x, axes=[1, 0, 2]), newshape=[0, -1]) }\n";
  int64_t xs[3] = {5, 4, 6};
  const int64_t *sh[1] = {xs};
  int r3[1] = {3};
  ck_assert_int_eq(run_shape_func(p, "fused.transpose", 1, sh, r3, 2, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 4); ck_assert_int_eq(out[1], 30);

  const char *q = "def @main(%a: Tensor[(?, 3), float32], %b: Tensor[(?, 3), float32]) { concatenate(%a, %b, axis=0) }\n";
  int64_t as[2] = {2, 3}, bs[2] = {7, 3};
  const int64_t *sh2[2] = {as, bs};
  int r2[2] = {2, 2};
  ck_assert_int_eq(run_shape_func(q, "fused.concatenate", 2, sh2, r2, 2, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 9); ck_assert_int_eq(out[1], 3);

  const char *s = "def @main(%x: Tensor[(?, ?, ?), float32]) { sum(%x, axes=[0, 2], keepdims=1) }\n";
  int64_t ys[3] = {3, 8, 2};
  const int64_t *sh3[1] = {ys};
  ck_assert_int_eq(run_shape_func(s, "fused.sum", 1, sh3, r3, 3, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 1); ck_assert_int_eq(out[1], 8); ck_assert_int_eq(out[2], 1);

  const char *t = "def @main(%x: Tensor[(?, 3, ?, ?), float32], %k: Tensor[(8, 3, 3, 3), float32]) {\n"
                  "  conv2d(%x, %k, strides=[2, 2], pads=[1, 1, 1, 1])\n}\n";
  int64_t cs[4] = {2, 3, 9, 6}, ks[4] = {8, 3, 3, 3};
  const int64_t *sh4[2] = {cs, ks};
  int r4[2] = {4, 4};
  ck_assert_int_eq(run_shape_func(t, "fused.conv2d", 2, sh4, r4, 4, out, err, sizeof err), 0);
  ck_assert_int_eq(out[0], 2); ck_assert_int_eq(out[1], 8); ck_assert_int_eq(out[2], 5); ck_assert_int_eq(out[3], 3);
}
END_TEST

/* Builds the kernel (shape_func false) or shape function of the first
 * primitive prefix* of text. */
static void build(nimble_arena **arena, const char *text, const char *prefix, bool shape_func, ch_kernel *k) {
  NIMBLE_ASSERT_OK(nimble_arena_create(arena));
  nimble_module *m = ch_compile_module(*arena, text);
  ch_kernel_build(m, ch_find_primitive(m, prefix), shape_func, NULL, k);
}

START_TEST(test_data_dependent_primitives_read_their_input_values) {
  nimble_arena *arena;
  ch_kernel k;
  ch_env env;
  ch_env_init(&env, false);
  unsigned seed = 5;
  /* dyn_reshape: 0 copies, -1 infers; the shape function takes the values. */
  const char *p = "def @main(%x: Tensor[(?, 6), float32], %s: Tensor[(3,), int64]) { exp(dyn_reshape(%x, %s)) }\n";
  int64_t spec[3] = {0, -1, 3}, three = 3;
  ch_tensor x, s, o, sh;
  ch_tensor_f32(&x, 2, (int64_t[]){4, 6}, &seed, -1, 1);
  ch_tensor_i64(&s, 1, &three, spec);
  build(&arena, p, "fused.dyn_reshape", true, &k);
  ch_tensor_i64(&sh, 1, &three, NULL);
  ch_tensor *a1[] = {&x, &s, &sh};
  ck_assert_int_eq(ch_call(&k, &env, a1, 3), 0);
  ck_assert_int_eq(ch_i(&sh)[0], 4); ck_assert_int_eq(ch_i(&sh)[1], 2); ck_assert_int_eq(ch_i(&sh)[2], 3);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  build(&arena, p, "fused.dyn_reshape", false, &k);
  ch_tensor_f32(&o, 3, (int64_t[]){4, 2, 3}, &seed, 0, 0);
  ch_tensor *a2[] = {&x, &s, &o};
  ck_assert_int_eq(ch_call(&k, &env, a2, 3), 0);
  for (int i = 0; i < 24; i++) ck_assert_float_eq(ch_f(&o)[i], ch_f(&x)[i]);
  /* Two -1s fail the kernel. */
  ch_i(&s)[0] = -1;
  ck_assert_int_ne(ch_call(&k, &env, a2, 3), 0);
  ck_assert_msg(strstr(env.error, "-1") != NULL, "message: %s", env.error);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  ch_tensor_free(&o), ch_tensor_free(&s), ch_tensor_free(&sh), ch_tensor_free(&x);

  /* arange over int64 (positive and negative steps) and float32. */
  const char *q = "def @main(%a: Tensor[(), int64], %b: Tensor[(), int64], %c: Tensor[(), int64]) { arange(%a, %b, %c) }\n";
  static const int64_t cases[][3] = {{2, 11, 3}, {10, 1, -4}, {5, 5, 1}, {3, 0, 1}};
  for (int t = 0; t < 4; t++) {
    ch_tensor sa, sb, sc, out, shp;
    int64_t one = 1;
    ch_tensor_i64(&sa, 0, NULL, &cases[t][0]);
    ch_tensor_i64(&sb, 0, NULL, &cases[t][1]);
    ch_tensor_i64(&sc, 0, NULL, &cases[t][2]);
    int64_t want_n = 0;
    for (int64_t v = cases[t][0]; cases[t][2] > 0 ? v < cases[t][1] : v > cases[t][1]; v += cases[t][2]) want_n++;
    build(&arena, q, "fused.arange", true, &k);
    ch_tensor_i64(&shp, 1, &one, NULL);
    ch_tensor *b1[] = {&sa, &sb, &sc, &shp};
    ck_assert_int_eq(ch_call(&k, &env, b1, 4), 0);
    ck_assert_int_eq(ch_i(&shp)[0], want_n);
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
    build(&arena, q, "fused.arange", false, &k);
    ch_tensor_i64(&out, 1, &want_n, NULL);
    ch_tensor *b2[] = {&sa, &sb, &sc, &out};
    ck_assert_int_eq(ch_call(&k, &env, b2, 4), 0);
    for (int64_t i = 0; i < want_n; i++) ck_assert_int_eq(ch_i(&out)[i], cases[t][0] + i * cases[t][2]);
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
    ch_tensor_free(&sa), ch_tensor_free(&sb), ch_tensor_free(&sc), ch_tensor_free(&out), ch_tensor_free(&shp);
  }
  const char *r = "def @main(%a: Tensor[(), float32], %b: Tensor[(), float32], %c: Tensor[(), float32]) { arange(%a, %b, %c) }\n";
  ch_tensor fa, fb, fc, shp;
  int64_t one = 1;
  ch_tensor_f32(&fa, 0, NULL, &seed, 0.5f, 0.5f);
  ch_tensor_f32(&fb, 0, NULL, &seed, 2.0f, 2.0f);
  ch_tensor_f32(&fc, 0, NULL, &seed, 0.4f, 0.4f);
  build(&arena, r, "fused.arange", true, &k);
  ch_tensor_i64(&shp, 1, &one, NULL);
  ch_tensor *c1[] = {&fa, &fb, &fc, &shp};
  ck_assert_int_eq(ch_call(&k, &env, c1, 4), 0);
  ck_assert_int_eq(ch_i(&shp)[0], 4); /* ceil(1.5 / 0.4) */
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  /* A zero step fails. */
  ch_f(&fc)[0] = 0;
  build(&arena, r, "fused.arange", true, &k);
  ck_assert_int_ne(ch_call(&k, &env, c1, 4), 0);
  ck_assert_msg(strstr(env.error, "step is 0") != NULL, "message: %s", env.error);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  ch_tensor_free(&fa), ch_tensor_free(&fb), ch_tensor_free(&fc), ch_tensor_free(&shp);

  /* constant_of_shape. */
  const char *u = "def @main(%s: Tensor[(2,), int64]) { constant_of_shape(%s, value=2.5) }\n";
  int64_t dims[2] = {2, 3}, two = 2;
  ch_tensor ss, co;
  ch_tensor_i64(&ss, 1, &two, dims);
  build(&arena, u, "fused.constant_of_shape", false, &k);
  ch_tensor_f32(&co, 2, dims, &seed, 0, 0);
  ch_tensor *d1[] = {&ss, &co};
  ck_assert_int_eq(ch_call(&k, &env, d1, 2), 0);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(ch_f(&co)[i], 2.5f);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  ch_tensor_free(&ss), ch_tensor_free(&co);
}
END_TEST

START_TEST(test_the_storage_size_host_primitive_multiplies_the_shape) {
  /* manifest_memory's fused.storage_size_r2_e4: prod(shape) * 4 into an
   * int64 scalar, run on the host before each dynamic allocation. */
  nimble_arena *arena;
  ch_kernel k;
  ch_env env;
  ch_env_init(&env, false);
  build(&arena, "def @main(%x: Tensor[(?, 64), float32]) { exp(%x) }\n", "fused.storage_size_r2_e4", false, &k);
  int64_t two = 2, dims[2] = {5, 64};
  ch_tensor sh, out;
  ch_tensor_i64(&sh, 1, &two, dims);
  ch_tensor_i64(&out, 0, NULL, NULL);
  ch_tensor *args[] = {&sh, &out};
  ck_assert_int_eq(ch_call(&k, &env, args, 2), 0);
  ck_assert_int_eq(ch_i(&out)[0], 5 * 64 * 4);
  ch_tensor_free(&sh), ch_tensor_free(&out);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
}
END_TEST

START_TEST(test_nonzero_writes_compact_indices_and_its_real_shape) {
  nimble_arena *arena;
  ch_kernel k;
  ch_env env;
  ch_env_init(&env, false);
  const char *p = "def @main(%x: Tensor[(a, b), float32]) { nonzero(%x) }\n";
  static const float vals[3][4] = {{0, 1.5f, 0, 0}, {-2, 0, 0, 3}, {0, 0, 0, 0}};
  for (int zero = 0; zero < 2; zero++) {
    unsigned seed = 1;
    ch_tensor x, bound, out, real;
    int64_t xs[2] = {3, 4};
    ch_tensor_f32(&x, 2, xs, &seed, 0, 0);
    if (!zero) memcpy(x.data, vals, sizeof vals);
    /* The shape function gives the bound [rank, numel]. */
    build(&arena, p, "fused.nonzero", true, &k);
    int64_t two = 2;
    ch_tensor_i64(&bound, 1, &two, NULL);
    ch_tensor *a1[] = {&x, &bound};
    ck_assert_int_eq(ch_call(&k, &env, a1, 2), 0);
    ck_assert_int_eq(ch_i(&bound)[0], 2); ck_assert_int_eq(ch_i(&bound)[1], 12);
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
    build(&arena, p, "fused.nonzero", false, &k);
    ch_tensor_i64(&out, 2, ch_i(&bound), NULL);
    ch_tensor_i64(&real, 1, &two, NULL);
    ch_tensor *a2[] = {&x, &out, &real};
    ck_assert_int_eq(ch_call(&k, &env, a2, 3), 0);
    ck_assert_int_eq(ch_i(&real)[0], 2);
    if (zero) {
      ck_assert_int_eq(ch_i(&real)[1], 0);
    } else {
      /* (0,1), (1,0), (1,3) as [rank, count] = rows then columns. */
      static const int64_t want[6] = {0, 1, 1, 1, 0, 3};
      ck_assert_int_eq(ch_i(&real)[1], 3);
      for (int i = 0; i < 6; i++) ck_assert_int_eq(ch_i(&out)[i], want[i]);
    }
    ch_kernel_free(&k);
    nimble_arena_destroy(arena);
    ch_tensor_free(&x), ch_tensor_free(&bound), ch_tensor_free(&out), ch_tensor_free(&real);
  }
}
END_TEST

/* The reference: k rounds picking the best unpicked element, ties by the
 * smaller index. */
static void topk_ref(const float *row, int n, int k, bool largest, float *vals, int64_t *idx) {
  bool used[64] = {false};
  for (int r = 0; r < k; r++) {
    int best = -1;
    for (int t = 0; t < n; t++)
      if (!used[t] && (best < 0 || (largest ? row[t] > row[best] : row[t] < row[best]))) best = t;
    used[best] = true;
    vals[r] = row[best];
    idx[r] = best;
  }
}

START_TEST(test_topk_gives_sorted_values_and_indices_with_k_from_an_input) {
  nimble_arena *arena;
  ch_kernel k;
  ch_env env;
  ch_env_init(&env, false);
  const char *p = "def @main(%x: Tensor[(a, b), float32], %k: Tensor[(1,), int64]) { let %t = topk(%x, %k); %t }\n";
  static const float vals[3][7] = {{1, 5, 3, 5, -2, 0, 4}, {0, 0, 0, 0, 0, 0, 0}, {-1, -7, 2.5f, 9, 9, 1, 2.5f}};
  unsigned seed = 1;
  ch_tensor x, kk, ov, oi, s0, s1;
  int64_t xs[2] = {3, 7}, one = 1, kv = 4, os[2] = {3, 4}, two = 2;
  ch_tensor_f32(&x, 2, xs, &seed, 0, 0);
  memcpy(x.data, vals, sizeof vals);
  ch_tensor_i64(&kk, 1, &one, &kv);
  build(&arena, p, "fused.topk", true, &k);
  ch_tensor_i64(&s0, 1, &two, NULL);
  ch_tensor_i64(&s1, 1, &two, NULL);
  ch_tensor *a1[] = {&x, &kk, &s0, &s1};
  ck_assert_int_eq(ch_call(&k, &env, a1, 4), 0);
  ck_assert_int_eq(ch_i(&s0)[0], 3); ck_assert_int_eq(ch_i(&s0)[1], 4);
  ck_assert_int_eq(ch_i(&s1)[0], 3); ck_assert_int_eq(ch_i(&s1)[1], 4);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  build(&arena, p, "fused.topk", false, &k);
  ch_tensor_f32(&ov, 2, os, &seed, 0, 0);
  ch_tensor_i64(&oi, 2, os, NULL);
  ch_tensor *a2[] = {&x, &kk, &ov, &oi};
  ck_assert_int_eq(ch_call(&k, &env, a2, 4), 0);
  for (int r = 0; r < 3; r++) {
    float wv[4];
    int64_t wi[4];
    topk_ref(vals[r], 7, 4, true, wv, wi);
    for (int j = 0; j < 4; j++) {
      ck_assert_float_eq(ch_f(&ov)[r * 4 + j], wv[j]);
      ck_assert_int_eq(ch_i(&oi)[r * 4 + j], wi[j]);
    }
  }
  /* k above the axis fails. */
  ch_i(&kk)[0] = 8;
  ck_assert_int_ne(ch_call(&k, &env, a2, 4), 0);
  ck_assert_msg(strstr(env.error, "topk") != NULL, "message: %s", env.error);
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  ch_tensor_free(&ov), ch_tensor_free(&oi), ch_tensor_free(&kk), ch_tensor_free(&s0), ch_tensor_free(&s1);

  /* Smallest two along axis 0, k an attribute. */
  const char *q = "def @main(%x: Tensor[(a, b), float32]) { let %t = topk(%x, k=2, axis=0, largest=0); %t }\n";
  build(&arena, q, "fused.topk", false, &k);
  int64_t os2[2] = {2, 7};
  ch_tensor_f32(&ov, 2, os2, &seed, 0, 0);
  ch_tensor_i64(&oi, 2, os2, NULL);
  ch_tensor *a3[] = {&x, &ov, &oi};
  ck_assert_int_eq(ch_call(&k, &env, a3, 3), 0);
  for (int col = 0; col < 7; col++) {
    float column[3] = {vals[0][col], vals[1][col], vals[2][col]}, wv[2];
    int64_t wi[2];
    topk_ref(column, 3, 2, false, wv, wi);
    for (int j = 0; j < 2; j++) {
      ck_assert_float_eq(ch_f(&ov)[j * 7 + col], wv[j]);
      ck_assert_int_eq(ch_i(&oi)[j * 7 + col], wi[j]);
    }
  }
  ch_kernel_free(&k);
  nimble_arena_destroy(arena);
  ch_tensor_free(&ov), ch_tensor_free(&oi), ch_tensor_free(&x);
}
END_TEST

/* The pieces of a masked select (x[x > 0] as NonZero, then GatherND) and a
 * top-k with k from an input, on 1-D inputs, down to empty results: the
 * expected values are worked out by hand. */
START_TEST(test_empty_results_of_nonzero_gather_nd_and_topk) {
  nimble_arena *arena;
  ch_kernel sf, kern;
  ch_env env;
  ch_env_init(&env, false);
  const char *p = "def @main(%m: Tensor[(n,), bool]) { nonzero(%m) }\n";
  /* {mask, its extent, count, indices}: some set, none set, an empty input. */
  static const struct {
    uint8_t mask[6];
    int64_t n, count, idx[6];
  } cases[] = {{{0, 1, 0, 1, 1, 0}, 6, 3, {1, 3, 4}}, {{0, 0, 0, 0, 0}, 5, 0, {0}}, {{0}, 0, 0, {0}}};
  build(&arena, p, "fused.nonzero", true, &sf);
  nimble_arena *arena2;
  build(&arena2, p, "fused.nonzero", false, &kern);
  for (int t = 0; t < 3; t++) {
    ch_tensor m, bound, out, real;
    int64_t two = 2, n = cases[t].n;
    ch_tensor_u8(&m, 1, &n, cases[t].mask);
    ch_tensor_i64(&bound, 1, &two, NULL);
    ch_tensor *a1[] = {&m, &bound};
    ck_assert_int_eq(ch_call(&sf, &env, a1, 2), 0);
    ck_assert_int_eq(ch_i(&bound)[0], 1);
    ck_assert_int_eq(ch_i(&bound)[1], n);
    /* The output is allocated at the bound; the kernel writes the real
     * shape, and the count indices at the start. Past them nothing is
     * written (the harness fills with zeros; a sentinel shows it). */
    ch_tensor_i64(&out, 2, ch_i(&bound), NULL);
    for (int64_t i = 0; i < n; i++) ch_i(&out)[i] = -7;
    ch_tensor_i64(&real, 1, &two, NULL);
    ch_tensor *a2[] = {&m, &out, &real};
    ck_assert_int_eq(ch_call(&kern, &env, a2, 3), 0);
    ck_assert_int_eq(ch_i(&real)[0], 1);
    ck_assert_int_eq(ch_i(&real)[1], cases[t].count);
    for (int64_t i = 0; i < cases[t].count; i++) ck_assert_int_eq(ch_i(&out)[i], cases[t].idx[i]);
    for (int64_t i = cases[t].count; i < n; i++) ck_assert_int_eq(ch_i(&out)[i], -7);
    ch_tensor_free(&m), ch_tensor_free(&bound), ch_tensor_free(&out), ch_tensor_free(&real);
  }
  ch_kernel_free(&sf), ch_kernel_free(&kern);
  nimble_arena_destroy(arena), nimble_arena_destroy(arena2);

  /* gather_nd of x [5] with [count, 1] indices: [count]; with none, the
   * kernel runs on an empty output. */
  const char *g = "def @main(%x: Tensor[(n,), float32], %i: Tensor[(?, 1), int64]) { gather_nd(%x, %i) }\n";
  int64_t out1[1];
  char err[512];
  int64_t xs[1] = {5}, is0[2] = {0, 1}, is3[2] = {3, 1};
  const int64_t *sh[2] = {xs, is0};
  int ranks[2] = {1, 2};
  ck_assert_int_eq(run_shape_func(g, "fused.gather_nd", 2, sh, ranks, 1, out1, err, sizeof err), 0);
  ck_assert_int_eq(out1[0], 0);
  sh[1] = is3;
  ck_assert_int_eq(run_shape_func(g, "fused.gather_nd", 2, sh, ranks, 1, out1, err, sizeof err), 0);
  ck_assert_int_eq(out1[0], 3);
  build(&arena, g, "fused.gather_nd", false, &kern);
  {
    static const float xv[5] = {-1, 2, -3, 4, 5};
    static const int64_t iv[3] = {1, 3, 4};
    unsigned seed = 3;
    int64_t five = 5, zero = 0, three = 3;
    ch_tensor x, idx, o;
    ch_tensor_f32(&x, 1, &five, &seed, 0, 0);
    memcpy(x.data, xv, sizeof xv);
    for (int t = 0; t < 2; t++) {
      int64_t cnt = t ? three : zero;
      ch_tensor_i64(&idx, 2, (int64_t[]){cnt, 1}, iv);
      ch_tensor_f32(&o, 1, &cnt, &seed, 0, 0);
      ch_tensor *a[] = {&x, &idx, &o};
      ck_assert_int_eq(ch_call(&kern, &env, a, 3), 0);
      for (int64_t i = 0; i < cnt; i++) ck_assert_float_eq(ch_f(&o)[i], xv[iv[i]]);
      ch_tensor_free(&idx), ch_tensor_free(&o);
    }
    ch_tensor_free(&x);
  }
  ch_kernel_free(&kern);
  nimble_arena_destroy(arena);

  /* topk with k from an input on x [5]: k = 0 gives two empty outputs,
   * k = 5 the whole axis sorted (ties by the smaller index). */
  const char *q = "def @main(%x: Tensor[(n,), float32], %k: Tensor[(1,), int64]) { let %t = topk(%x, %k); %t }\n";
  build(&arena, q, "fused.topk", true, &sf);
  build(&arena2, q, "fused.topk", false, &kern);
  {
    static const float xv[5] = {0.5f, -1, 2, 0.5f, -3};
    static const float want_v[5] = {2, 0.5f, 0.5f, -1, -3};
    static const int64_t want_i[5] = {2, 0, 3, 1, 4};
    unsigned seed = 9;
    int64_t five = 5, one = 1;
    ch_tensor x, kk, s0, s1, ov, oi;
    ch_tensor_f32(&x, 1, &five, &seed, 0, 0);
    memcpy(x.data, xv, sizeof xv);
    for (int64_t kv = 0; kv <= 5; kv += 5) {
      ch_tensor_i64(&kk, 1, &one, &kv);
      ch_tensor_i64(&s0, 1, &one, NULL);
      ch_tensor_i64(&s1, 1, &one, NULL);
      ch_tensor *a1[] = {&x, &kk, &s0, &s1};
      ck_assert_int_eq(ch_call(&sf, &env, a1, 4), 0);
      ck_assert_int_eq(ch_i(&s0)[0], kv);
      ck_assert_int_eq(ch_i(&s1)[0], kv);
      ch_tensor_f32(&ov, 1, &kv, &seed, 0, 0);
      ch_tensor_i64(&oi, 1, &kv, NULL);
      ch_tensor *a2[] = {&x, &kk, &ov, &oi};
      ck_assert_int_eq(ch_call(&kern, &env, a2, 4), 0);
      for (int64_t j = 0; j < kv; j++) {
        ck_assert_float_eq(ch_f(&ov)[j], want_v[j]);
        ck_assert_int_eq(ch_i(&oi)[j], want_i[j]);
      }
      ch_tensor_free(&kk), ch_tensor_free(&s0), ch_tensor_free(&s1), ch_tensor_free(&ov), ch_tensor_free(&oi);
    }
    /* A negative k fails the shape function, naming topk. */
    int64_t neg = -1;
    ch_tensor_i64(&kk, 1, &one, &neg);
    ch_tensor_i64(&s0, 1, &one, NULL);
    ch_tensor_i64(&s1, 1, &one, NULL);
    ch_tensor *a3[] = {&x, &kk, &s0, &s1};
    ck_assert_int_ne(ch_call(&sf, &env, a3, 4), 0);
    ck_assert_msg(strstr(env.error, "topk") != NULL, "message: %s", env.error);
    ch_tensor_free(&kk), ch_tensor_free(&s0), ch_tensor_free(&s1), ch_tensor_free(&x);
  }
  ch_kernel_free(&sf), ch_kernel_free(&kern);
  nimble_arena_destroy(arena), nimble_arena_destroy(arena2);

  /* arange(0, n, 1), n read from an int64 scalar as bert_tiny_emb's
   * positions: n = 0 gives an empty output, n = 4 gives 0 1 2 3. */
  const char *r = "def @main(%n: Tensor[(), int64]) { arange(0, %n, 1) }\n";
  build(&arena, r, "fused.arange", true, &sf);
  build(&arena2, r, "fused.arange", false, &kern);
  for (int64_t nv = 0; nv <= 4; nv += 4) {
    int64_t one = 1;
    ch_tensor n, shp, o;
    ch_tensor_i64(&n, 0, NULL, &nv);
    ch_tensor_i64(&shp, 1, &one, NULL);
    ch_tensor *a1[] = {&n, &shp};
    ck_assert_int_eq(ch_call(&sf, &env, a1, 2), 0);
    ck_assert_int_eq(ch_i(&shp)[0], nv);
    ch_tensor_i64(&o, 1, &nv, NULL);
    ch_tensor *a2[] = {&n, &o};
    ck_assert_int_eq(ch_call(&kern, &env, a2, 2), 0);
    for (int64_t i = 0; i < nv; i++) ck_assert_int_eq(ch_i(&o)[i], i);
    ch_tensor_free(&n), ch_tensor_free(&shp), ch_tensor_free(&o);
  }
  ch_kernel_free(&sf), ch_kernel_free(&kern);
  nimble_arena_destroy(arena), nimble_arena_destroy(arena2);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_shape_func");
  TCase *tc = tcase_create("shape_functions");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_broadcast_elementwise_shape_function);
  tcase_add_test(tc, test_dense_and_matmul_shape_functions);
  tcase_add_test(tc, test_reshape_transpose_concat_and_reduce_shape_functions);
  tcase_add_test(tc, test_data_dependent_primitives_read_their_input_values);
  tcase_add_test(tc, test_the_storage_size_host_primitive_multiplies_the_shape);
  tcase_add_test(tc, test_nonzero_writes_compact_indices_and_its_real_shape);
  tcase_add_test(tc, test_topk_gives_sorted_values_and_indices_with_k_from_an_input);
  tcase_add_test(tc, test_empty_results_of_nonzero_gather_nd_and_topk);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
