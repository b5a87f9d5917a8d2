/* Primitives with bool tensors as parameters or results: comparisons
 * producing bool (with broadcasting, and as a scalar loop condition),
 * where over a bool condition, logical and/or/not, casts to and from bool.
 * Bool tensors are one byte per element ({kDLUInt, 8, 1}, 0 or 1); each
 * kernel runs against a C reference. */
#include <math.h>
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

/* The kernel's last parameter is a bool tensor: a u8 loop-nest param. */
static void assert_bool_output(const fixture *f) {
  const nimble_ln_kernel *k = f->k.kernel;
  ck_assert_int_eq(k->params[k->n_params - 1]->dtype, NIMBLE_LN_U8);
}

START_TEST(test_a_broadcast_comparison_is_a_bool_tensor_of_zero_and_one_bytes) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n, m), float32], %y: Tensor[(m,), float32]) { less(%x, %y) }\n", "fused.");
  assert_bool_output(&f);
  static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {4, 16}, {2, 33}, {0, 5}, {5, 0}};
  unsigned seed = 3;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t n = shapes[s][0], m = shapes[s][1], xs[2] = {n, m};
    ch_tensor x, y, out;
    ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
    ch_tensor_f32(&y, 1, &m, &seed, -1, 1);
    ch_tensor_u8(&out, 2, xs, NULL);
    memset(out.data, 0x77, out.n + 1);
    ch_tensor *args[] = {&x, &y, &out};
    ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "less: %s", f.env.error);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) {
        uint8_t want = ch_f(&x)[i * m + j] < ch_f(&y)[j];
        if (ch_u8(&out)[i * m + j] != want)
          ck_abort_msg("less[%lld, %lld] = %d, want %d", (long long)i, (long long)j, ch_u8(&out)[i * m + j], want);
      }
    ck_assert_int_eq(ch_u8(&out)[out.n], 0x77);
    ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_where_takes_a_bool_tensor_condition_with_broadcasting) {
  fixture f;
  fx_open(&f,
          "def @main(%c: Tensor[(n, 1), bool], %x: Tensor[(n, m), float32], %y: Tensor[(m,), float32]) {\n"
          "  where(%c, %x, %y)\n"
          "}\n",
          "fused.");
  ck_assert_int_eq(f.k.kernel->params[0]->dtype, NIMBLE_LN_U8);
  static const int64_t shapes[][2] = {{5, 9}, {1, 16}, {7, 1}, {0, 3}};
  unsigned seed = 9;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t n = shapes[s][0], m = shapes[s][1], xs[2] = {n, m}, cs[2] = {n, 1};
    uint8_t cv[8];
    for (int i = 0; i < 8; i++) cv[i] = (uint8_t)(i % 3 == 2 ? 0 : 1);
    ch_tensor c, x, y, out;
    ch_tensor_u8(&c, 2, cs, cv);
    ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
    ch_tensor_f32(&y, 1, &m, &seed, -1, 1);
    ch_tensor_f32(&out, 2, xs, &seed, 0, 0);
    ch_tensor *args[] = {&c, &x, &y, &out};
    ck_assert_msg(ch_call(&f.k, &f.env, args, 4) == 0, "where: %s", f.env.error);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) {
        float want = cv[i] ? ch_f(&x)[i * m + j] : ch_f(&y)[j];
        ck_assert_float_eq(ch_f(&out)[i * m + j], want);
      }
    ch_tensor_free(&c), ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_logical_and_or_not_over_bool_tensors_match_truth_tables) {
  fixture f;
  fx_open(&f,
          "def @main(%a: Tensor[(n,), bool], %b: Tensor[(n,), bool]) {\n"
          "  logical_or(logical_and(%a, %b), logical_not(%a))\n"
          "}\n",
          "fused.");
  assert_bool_output(&f);
  /* Every pair, and a byte of 7 (any nonzero byte reads as true). */
  uint8_t av[] = {0, 0, 1, 1, 7, 7, 0, 1, 1}, bv[] = {0, 1, 0, 1, 0, 1, 7, 7, 1};
  int64_t n = 9;
  ch_tensor a, b, out;
  ch_tensor_u8(&a, 1, &n, av);
  ch_tensor_u8(&b, 1, &n, bv);
  ch_tensor_u8(&out, 1, &n, NULL);
  ch_tensor *args[] = {&a, &b, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "logic: %s", f.env.error);
  for (int i = 0; i < n; i++) {
    int want = (av[i] && bv[i]) || !av[i];
    ck_assert_msg(ch_u8(&out)[i] == want, "(%d && %d) || !%d = %d, want %d", av[i], bv[i], av[i], ch_u8(&out)[i], want);
  }
  ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_casts_from_bool_feed_arithmetic) {
  fixture f;
  fx_open(&f,
          "def @main(%c: Tensor[(n,), bool], %x: Tensor[(n,), float32]) {\n"
          "  multiply(cast(%c, dtype=\"float32\"), %x)\n"
          "}\n",
          "fused.");
  uint8_t cv[] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1};
  int64_t n = 11;
  unsigned seed = 4;
  ch_tensor c, x, out;
  ch_tensor_u8(&c, 1, &n, cv);
  ch_tensor_f32(&x, 1, &n, &seed, -3, 3);
  ch_tensor_f32(&out, 1, &n, &seed, 0, 0);
  ch_tensor *args[] = {&c, &x, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "cast: %s", f.env.error);
  for (int i = 0; i < n; i++) ck_assert_float_eq(ch_f(&out)[i], cv[i] ? ch_f(&x)[i] : 0.0f);
  ch_tensor_free(&c), ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_a_cast_to_bool_is_nonzero_and_stores_a_bool_tensor) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n,), float32]) { cast(%x, dtype=\"bool\") }\n", "fused.");
  assert_bool_output(&f);
  int64_t n = 10;
  unsigned seed = 1;
  ch_tensor x, out;
  ch_tensor_f32(&x, 1, &n, &seed, 0, 0);
  const float xs[] = {0.0f, -0.0f, 1.0f, -2.5f, 1e-30f, NAN, INFINITY, 0.0f, 3.0f, -1.0f};
  memcpy(x.data, xs, sizeof xs);
  ch_tensor_u8(&out, 1, &n, NULL);
  ch_tensor *args[] = {&x, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 2) == 0, "cast: %s", f.env.error);
  /* NumPy: NaN casts to True, +-0 to False. */
  for (int i = 0; i < n; i++) ck_assert_msg(ch_u8(&out)[i] == (xs[i] != 0.0f), "bool(%g) = %d", (double)xs[i], ch_u8(&out)[i]);
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_a_scalar_loop_condition_is_a_bool_scalar) {
  /* The shape of a while loop's condition: i < limit && keep-going flag. */
  fixture f;
  fx_open(&f,
          "def @main(%i: Tensor[(), int64], %limit: Tensor[(), int64], %go: Tensor[(), bool]) {\n"
          "  logical_and(less(%i, %limit), %go)\n"
          "}\n",
          "fused.");
  assert_bool_output(&f);
  ck_assert_int_eq(f.k.kernel->params[f.k.kernel->n_params - 1]->rank, 0);
  const int64_t cases[][3] = {{0, 3, 1}, {2, 3, 1}, {3, 3, 1}, {4, 3, 1}, {0, 3, 0}, {-5, -4, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ch_tensor i, limit, go, out;
    ch_tensor_i64(&i, 0, NULL, &cases[c][0]);
    ch_tensor_i64(&limit, 0, NULL, &cases[c][1]);
    uint8_t g = (uint8_t)cases[c][2];
    ch_tensor_u8(&go, 0, NULL, &g);
    ch_tensor_u8(&out, 0, NULL, NULL);
    ch_u8(&out)[0] = 0x5A;
    ch_tensor *args[] = {&i, &limit, &go, &out};
    ck_assert_msg(ch_call(&f.k, &f.env, args, 4) == 0, "cond: %s", f.env.error);
    int want = cases[c][0] < cases[c][1] && cases[c][2];
    ck_assert_msg(ch_u8(&out)[0] == want, "case %zu: %d, want %d", c, ch_u8(&out)[0], want);
    ch_tensor_free(&i), ch_tensor_free(&limit), ch_tensor_free(&go), ch_tensor_free(&out);
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_a_reduction_compared_to_a_limit_gives_a_bool_scalar) {
  /* while_loop's condition: max(h) < limit (a reduction anchor whose
   * epilogue is a comparison). */
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(n,), float32], %limit: Tensor[(), float32]) { less(max(%x), %limit) }\n",
          "fused.");
  assert_bool_output(&f);
  static const int64_t sizes[] = {1, 5, 17, 64};
  unsigned seed = 8;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    for (int side = 0; side < 2; side++) {
      int64_t n = sizes[s];
      ch_tensor x, limit, out;
      ch_tensor_f32(&x, 1, &n, &seed, -1, 1);
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, ch_f(&x)[i]);
      float lim = side ? mx + 0.25f : mx; /* equal: not less */
      ch_tensor_f32(&limit, 0, NULL, &seed, 0, 0);
      ch_f(&limit)[0] = lim;
      ch_tensor_u8(&out, 0, NULL, NULL);
      ch_u8(&out)[0] = 0x33;
      ch_tensor *args[] = {&x, &limit, &out};
      ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "max < limit: %s", f.env.error);
      ck_assert_int_eq(ch_u8(&out)[0], mx < lim);
      ch_tensor_free(&x), ch_tensor_free(&limit), ch_tensor_free(&out);
    }
  }
  fx_close(&f);
}
END_TEST

START_TEST(test_a_reshaped_bool_tensor_feeds_logical_not) {
  fixture f;
  fx_open(&f, "def @main(%b: Tensor[(2, 3), bool]) { logical_not(reshape(%b, newshape=[3, 2])) }\n", "fused.");
  assert_bool_output(&f);
  uint8_t bv[6] = {1, 0, 0, 1, 1, 0};
  int64_t bs[2] = {2, 3}, os[2] = {3, 2};
  ch_tensor b, out;
  ch_tensor_u8(&b, 2, bs, bv);
  ch_tensor_u8(&out, 2, os, NULL);
  ch_tensor *args[] = {&b, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 2) == 0, "reshape: %s", f.env.error);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(ch_u8(&out)[i], !bv[i]);
  ch_tensor_free(&b), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

START_TEST(test_a_bool_parameter_rejects_a_float_tensor_with_a_message) {
  fixture f;
  fx_open(&f,
          "def @main(%c: Tensor[(n,), bool], %x: Tensor[(n,), float32]) {\n"
          "  multiply(cast(%c, dtype=\"float32\"), %x)\n"
          "}\n",
          "fused.");
  int64_t n = 3;
  unsigned seed = 2;
  ch_tensor c, x, out;
  ch_tensor_f32(&c, 1, &n, &seed, 0, 1);
  ch_tensor_f32(&x, 1, &n, &seed, 0, 1);
  ch_tensor_f32(&out, 1, &n, &seed, 0, 0);
  ch_tensor *args[] = {&c, &x, &out};
  ck_assert_int_ne(ch_call(&f.k, &f.env, args, 3), 0);
  ck_assert_msg(strstr(f.env.error, "argument 0 ('p0') must be uint8 or bool") != NULL, "message: %s", f.env.error);
  ch_tensor_free(&c), ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("compute_bool");
  TCase *tc = tcase_create("bool");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_a_broadcast_comparison_is_a_bool_tensor_of_zero_and_one_bytes);
  tcase_add_test(tc, test_where_takes_a_bool_tensor_condition_with_broadcasting);
  tcase_add_test(tc, test_logical_and_or_not_over_bool_tensors_match_truth_tables);
  tcase_add_test(tc, test_casts_from_bool_feed_arithmetic);
  tcase_add_test(tc, test_a_cast_to_bool_is_nonzero_and_stores_a_bool_tensor);
  tcase_add_test(tc, test_a_scalar_loop_condition_is_a_bool_scalar);
  tcase_add_test(tc, test_a_reduction_compared_to_a_limit_gives_a_bool_scalar);
  tcase_add_test(tc, test_a_reshaped_bool_tensor_feeds_logical_not);
  tcase_add_test(tc, test_a_bool_parameter_rejects_a_float_tensor_with_a_message);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
