/* cumsum and einsum, the compute definitions added with the other element
 * types: values worked out by hand (and, for einsum, the matrix products
 * written as C loops), covering what the ONNX node suite's cases do not:
 * a cumsum whose run-time axis changes between calls of one kernel,
 * reverse + exclusive on int64; einsum's implicit output in NumPy's ASCII
 * order (uppercase first), a diagonal, and an ellipsis that broadcasts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/passes.h"
#include "nimble_test.h"

typedef struct fixture {
  nimble_arena *arena;
  nimble_module *m;
  ch_kernel k;
  ch_env env;
} fixture;

static void fx_open(fixture *f, const char *text) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&f->arena));
  f->m = ch_compile_module(f->arena, text);
  ch_kernel_build(f->m, ch_find_primitive(f->m, "fused."), false, NULL, &f->k);
  ch_env_init(&f->env, false);
}

static void fx_close(fixture *f) {
  ch_kernel_free(&f->k);
  nimble_arena_destroy(f->arena);
}

/* x = [[1, 2, 3], [4, 5, 6]]; reverse exclusive sums:
 *   axis -1: [[2+3, 3, 0], [5+6, 6, 0]] = [[5, 3, 0], [11, 6, 0]]
 *   axis 0:  [[4, 5, 6], [0, 0, 0]]
 *   axis 2:  out of range, the kernel fails with a message. */
START_TEST(test_cumsum_reads_its_axis_at_run_time) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(2, 3), int64], %a: Tensor[(), int64]) { cumsum(%x, %a, exclusive=1, reverse=1) }\n");
  static const int64_t xs[6] = {1, 2, 3, 4, 5, 6};
  static const struct {
    int64_t axis;
    int64_t want[6];
  } cases[] = {{-1, {5, 3, 0, 11, 6, 0}}, {1, {5, 3, 0, 11, 6, 0}}, {0, {4, 5, 6, 0, 0, 0}}};
  int64_t shape[2] = {2, 3};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    ch_tensor x, a, out;
    ch_tensor_i64(&x, 2, shape, xs);
    ch_tensor_i64(&a, 0, NULL, &cases[c].axis);
    ch_tensor_i64(&out, 2, shape, NULL);
    ch_tensor *args[] = {&x, &a, &out};
    ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "cumsum: %s", f.env.error);
    for (int i = 0; i < 6; i++)
      ck_assert_msg(ch_i(&out)[i] == cases[c].want[i], "axis %lld element %d: %lld, want %lld",
                    (long long)cases[c].axis, i, (long long)ch_i(&out)[i], (long long)cases[c].want[i]);
    ch_tensor_free(&x), ch_tensor_free(&a), ch_tensor_free(&out);
  }
  ch_tensor x, a, out;
  int64_t bad = 2;
  ch_tensor_i64(&x, 2, shape, xs);
  ch_tensor_i64(&a, 0, NULL, &bad);
  ch_tensor_i64(&out, 2, shape, NULL);
  ch_tensor *args[] = {&x, &a, &out};
  ck_assert_int_ne(ch_call(&f.k, &f.env, args, 3), 0);
  ck_assert_msg(strstr(f.env.error, "cumsum: the axis is out of range for rank 2") != NULL, "%s", f.env.error);
  ch_tensor_free(&x), ch_tensor_free(&a), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

/* Float cumsum along the first axis of a [3, 2] column pair. */
START_TEST(test_cumsum_along_an_attribute_axis) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(3, 2), float32]) { cumsum(%x, axis=0) }\n");
  int64_t shape[2] = {3, 2};
  unsigned seed = 1;
  ch_tensor x, out;
  ch_tensor_f32(&x, 2, shape, &seed, 0, 1);
  ch_tensor_f32(&out, 2, shape, &seed, 0, 1);
  static const float xs[6] = {1, 10, 2, 20, 3, 30}, want[6] = {1, 10, 3, 30, 6, 60};
  memcpy(x.data, xs, sizeof xs);
  ch_tensor *args[] = {&x, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 2) == 0, "cumsum: %s", f.env.error);
  ch_assert_close("cumsum axis 0", ch_f(&out), want, 6, 0, 0);
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

/* "bA,AC": the letters used once are b and C; NumPy orders them by ASCII,
 * 'C' (67) before 'b' (98), so the result is (x y)^T, shape [4, 2]. */
START_TEST(test_einsum_implicit_output_is_in_ascii_order) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 4), float32]) { einsum(%x, %y, equation=\"bA,AC\") }\n");
  int64_t xs[2] = {2, 3}, ys[2] = {3, 4}, os[2] = {4, 2};
  unsigned seed = 5;
  ch_tensor x, y, out;
  ch_tensor_f32(&x, 2, xs, &seed, -1, 1);
  ch_tensor_f32(&y, 2, ys, &seed, -1, 1);
  ch_tensor_f32(&out, 2, os, &seed, 0, 1);
  ch_tensor *args[] = {&x, &y, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 3) == 0, "einsum: %s", f.env.error);
  float want[8];
  for (int c = 0; c < 4; c++)
    for (int b = 0; b < 2; b++) {
      double s = 0;
      for (int a = 0; a < 3; a++) s += (double)ch_f(&x)[b * 3 + a] * ch_f(&y)[a * 4 + c];
      want[c * 2 + b] = (float)s;
    }
  ch_assert_close("einsum bA,AC", ch_f(&out), want, 8, 1e-6f, 1e-5f);
  ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&out);
  fx_close(&f);
}
END_TEST

/* "ii->i" takes the diagonal: [[1, 2], [3, 4]] -> [1, 4]; "...ij,jk->...ik"
 * with x [2, 1, 2] (ellipsis [2]) is a batched product. */
START_TEST(test_einsum_diagonals_and_ellipsis) {
  fixture f;
  fx_open(&f, "def @main(%x: Tensor[(2, 2), float32]) { einsum(%x, equation=\"ii->i\") }\n");
  int64_t s2[2] = {2, 2}, s1[1] = {2};
  unsigned seed = 2;
  ch_tensor x, out;
  ch_tensor_f32(&x, 2, s2, &seed, 0, 1);
  ch_tensor_f32(&out, 1, s1, &seed, 0, 1);
  static const float xs[4] = {1, 2, 3, 4}, diag[2] = {1, 4};
  memcpy(x.data, xs, sizeof xs);
  ch_tensor *args[] = {&x, &out};
  ck_assert_msg(ch_call(&f.k, &f.env, args, 2) == 0, "einsum: %s", f.env.error);
  ch_assert_close("einsum ii->i", ch_f(&out), diag, 2, 0, 0);
  ch_tensor_free(&x), ch_tensor_free(&out);
  fx_close(&f);

  fx_open(&f, "def @main(%x: Tensor[(2, 1, 2), float32], %y: Tensor[(2, 3), float32]) { einsum(%x, %y, equation=\"...ij,jk->...ik\") }\n");
  int64_t xs3[3] = {2, 1, 2}, ys[2] = {2, 3}, os[3] = {2, 1, 3};
  ch_tensor a, b, o;
  ch_tensor_f32(&a, 3, xs3, &seed, 0, 1);
  ch_tensor_f32(&b, 2, ys, &seed, 0, 1);
  ch_tensor_f32(&o, 3, os, &seed, 0, 1);
  static const float av[4] = {1, 2, 3, 4}, bv[6] = {1, 0, -1, 2, 1, 0};
  /* [1, 2] . cols = [1+4, 0+2, -1+0] = [5, 2, -1]; [3, 4] -> [11, 4, -3] */
  static const float want[6] = {5, 2, -1, 11, 4, -3};
  memcpy(a.data, av, sizeof av);
  memcpy(b.data, bv, sizeof bv);
  ch_tensor *args2[] = {&a, &b, &o};
  ck_assert_msg(ch_call(&f.k, &f.env, args2, 3) == 0, "einsum: %s", f.env.error);
  ch_assert_close("einsum ...ij,jk", ch_f(&o), want, 6, 0, 0);
  ch_tensor_free(&a), ch_tensor_free(&b), ch_tensor_free(&o);
  fx_close(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("compute_scan");
  TCase *tc = tcase_create("scan");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_cumsum_reads_its_axis_at_run_time);
  tcase_add_test(tc, test_cumsum_along_an_attribute_axis);
  tcase_add_test(tc, test_einsum_implicit_output_is_in_ascii_order);
  tcase_add_test(tc, test_einsum_diagonals_and_ellipsis);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
