/* Operators whose sizes come from input values, and the vision, detection
 * and signal operators: dyn_expand_dims, dyn_squeeze, dyn_tile, dyn_pad,
 * dyn_split, resize/dyn_resize, non_max_suppression, roi_align,
 * unique_all, one_hot, window, det, max_pool2d_with_indices,
 * dropout_train, dft, stft and mel_weight_matrix. Each kernel (and, where the shape depends on values, its
 * shape function) runs against references written here from the ONNX
 * definitions: NumPy's pad and unique, ONNX's reference resize
 * (interpolate_1d_with_x: neighbours by distance on an edge-padded axis,
 * in double), a brute-force greedy NMS, double-precision determinants,
 * libm windows, hand-computed values; including empty results and the
 * run-time errors for sizes from the data that are negative or too large. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble/passes.h"
#include "nimble_test.h"

typedef struct prog {
  nimble_arena *arena;
  ch_kernel k;
  ch_env env;
} prog;

/* Builds the kernel (shape_func false) or shape function of the first
 * primitive named prefix* of text. */
static void prog_open(prog *p, const char *text, const char *prefix, bool shape_func) {
  NIMBLE_ASSERT_OK(nimble_arena_create(&p->arena));
  nimble_module *m = ch_compile_module(p->arena, text);
  ch_kernel_build(m, ch_find_primitive(m, prefix), shape_func, NULL, &p->k);
  ch_env_init(&p->env, false);
}

static void prog_close(prog *p) {
  ch_kernel_free(&p->k);
  nimble_arena_destroy(p->arena);
}

static int32_t run(prog *p, ch_tensor *const *ts, int n) { return ch_call(&p->k, &p->env, ts, n); }

static void f32_of(ch_tensor *t, int rank, const int64_t *shape, const float *v) {
  unsigned seed = 1;
  ch_tensor_f32(t, rank, shape, &seed, 0, 0);
  if (v) memcpy(t->data, v, t->n * sizeof(float));
}

static void expect_error(prog *p, ch_tensor *const *ts, int n, const char *a, const char *b) {
  ck_assert_int_ne(run(p, ts, n), 0);
  ck_assert_msg(strstr(p->env.error, a) && (!b || strstr(p->env.error, b)), "message: %s", p->env.error);
}

/* ---- dyn_expand_dims, dyn_squeeze ---------------------------------------- */

START_TEST(test_unsqueeze_and_squeeze_shapes_follow_the_axes_values) {
  const char *u = "def @main(%x: Tensor[(a, b, c), float32], %ax: Tensor[(3,), int64]) { dyn_expand_dims(%x, %ax) }\n";
  prog p;
  prog_open(&p, u, "fused.dyn_expand_dims", true);
  unsigned seed = 3;
  ch_tensor x, ax, sh;
  ch_tensor_f32(&x, 3, (int64_t[]){3, 4, 5}, &seed, -1, 1);
  int64_t six = 6, three = 3;
  ch_tensor_i64(&sh, 1, &six, NULL);
  /* ONNX's unsorted case: axes [5, 4, 2] of a rank-6 result. */
  ch_tensor_i64(&ax, 1, &three, (int64_t[]){5, 4, 2});
  ch_tensor *a[] = {&x, &ax, &sh};
  ck_assert_int_eq(run(&p, a, 3), 0);
  int64_t want[6] = {3, 4, 1, 5, 1, 1};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(ch_i(&sh)[i], want[i]);
  memcpy(ax.data, (int64_t[]){-6, 1, -1}, 24); /* 0, 1, 5 */
  ck_assert_int_eq(run(&p, a, 3), 0);
  int64_t want2[6] = {1, 1, 3, 4, 5, 1};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(ch_i(&sh)[i], want2[i]);
  memcpy(ax.data, (int64_t[]){0, 6, 1}, 24);
  expect_error(&p, a, 3, "dyn_expand_dims", "out of range");
  memcpy(ax.data, (int64_t[]){2, -4, 0}, 24); /* -4 is 2 again */
  expect_error(&p, a, 3, "dyn_expand_dims", "repeats");
  prog_close(&p);
  ch_tensor_free(&ax), ch_tensor_free(&sh);

  const char *s = "def @main(%x: Tensor[(a, b, c, d), float32], %ax: Tensor[(2,), int64]) { dyn_squeeze(%x, %ax) }\n";
  prog_open(&p, s, "fused.dyn_squeeze", true);
  ch_tensor y;
  int64_t two = 2;
  ch_tensor_f32(&y, 4, (int64_t[]){1, 3, 1, 5}, &seed, -1, 1);
  ch_tensor_i64(&ax, 1, &two, (int64_t[]){-2, 0});
  ch_tensor_i64(&sh, 1, &two, NULL);
  ch_tensor *b[] = {&y, &ax, &sh};
  ck_assert_int_eq(run(&p, b, 3), 0);
  ck_assert_int_eq(ch_i(&sh)[0], 3);
  ck_assert_int_eq(ch_i(&sh)[1], 5);
  memcpy(ax.data, (int64_t[]){1, 0}, 16); /* axis 1 has extent 3 */
  expect_error(&p, b, 3, "dyn_squeeze", "axis 1");
  memcpy(ax.data, (int64_t[]){0, -4}, 16);
  expect_error(&p, b, 3, "dyn_squeeze", "repeats");
  memcpy(ax.data, (int64_t[]){0, 4}, 16);
  expect_error(&p, b, 3, "dyn_squeeze", "out of range");
  prog_close(&p);

  /* The kernel (a view in programs, but it computes too) copies in order. */
  prog_open(&p, s, "fused.dyn_squeeze", false);
  ch_tensor o;
  memcpy(ax.data, (int64_t[]){2, 0}, 16);
  ch_tensor_f32(&o, 2, (int64_t[]){3, 5}, &seed, 0, 0);
  ch_tensor *c[] = {&y, &ax, &o};
  ck_assert_int_eq(run(&p, c, 3), 0);
  for (int i = 0; i < 15; i++) ck_assert_float_eq(ch_f(&o)[i], ch_f(&y)[i]);
  prog_close(&p);
  ch_tensor_free(&x), ch_tensor_free(&y), ch_tensor_free(&ax), ch_tensor_free(&sh), ch_tensor_free(&o);
}
END_TEST

/* ---- dyn_tile ------------------------------------------------------------ */

START_TEST(test_tile_repeats_come_from_a_tensor_and_bad_repeats_fail) {
  const char *t = "def @main(%x: Tensor[(a, b), float32], %r: Tensor[(2,), int64]) { dyn_tile(%x, %r) }\n";
  prog sf, k;
  prog_open(&sf, t, "fused.dyn_tile", true);
  prog_open(&k, t, "fused.dyn_tile", false);
  unsigned seed = 5;
  ch_tensor x, r, sh, o;
  int64_t two = 2;
  ch_tensor_f32(&x, 2, (int64_t[]){2, 3}, &seed, -1, 1);
  ch_tensor_i64(&r, 1, &two, (int64_t[]){3, 2});
  ch_tensor_i64(&sh, 1, &two, NULL);
  ch_tensor *a[] = {&x, &r, &sh};
  ck_assert_int_eq(run(&sf, a, 3), 0);
  ck_assert_int_eq(ch_i(&sh)[0], 6);
  ck_assert_int_eq(ch_i(&sh)[1], 6);
  ch_tensor_f32(&o, 2, (int64_t[]){6, 6}, &seed, 0, 0);
  ch_tensor *b[] = {&x, &r, &o};
  ck_assert_int_eq(run(&k, b, 3), 0);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++) ck_assert_float_eq(ch_f(&o)[i * 6 + j], ch_f(&x)[(i % 2) * 3 + j % 3]);
  /* A zero repeat: an empty result; the kernel writes nothing. */
  memcpy(r.data, (int64_t[]){0, 5}, 16);
  ck_assert_int_eq(run(&sf, a, 3), 0);
  ck_assert_int_eq(ch_i(&sh)[0], 0);
  ck_assert_int_eq(ch_i(&sh)[1], 15);
  memcpy(r.data, (int64_t[]){1, -1}, 16);
  expect_error(&sf, a, 3, "dyn_tile", "negative");
  memcpy(r.data, (int64_t[]){INT64_C(1) << 40, 1}, 16);
  expect_error(&sf, a, 3, "dyn_tile", "2^40");
  /* Each axis fits, the product does not. */
  memcpy(r.data, (int64_t[]){INT64_C(1) << 30, INT64_C(1) << 30}, 16);
  expect_error(&sf, a, 3, "dyn_tile", "more than 2^40 elements");
  prog_close(&sf), prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&r), ch_tensor_free(&sh), ch_tensor_free(&o);
}
END_TEST

/* ---- dyn_pad --------------------------------------------------------------- */

/* NumPy's pad for one index: reflect mirrors repeatedly about the ends. */
static int64_t np_pad_src(const char *mode, int64_t j, int64_t d) {
  if (!strcmp(mode, "edge")) return j < 0 ? 0 : j >= d ? d - 1 : j;
  if (d == 1) return 0;
  while (j < 0 || j >= d) {
    if (j < 0) j = -j;
    if (j >= d) j = 2 * (d - 1) - j;
  }
  return j;
}

START_TEST(test_pad_with_run_time_pads_matches_numpy_pad) {
  static const char *const modes[] = {"constant", "edge", "reflect"};
  /* pads (begin h, begin w, end h, end w): plain, reflect beyond the
   * extent (several mirrors), cropping. */
  static const int64_t cases[][4] = {{1, 2, 0, 3}, {4, 7, 5, 6}, {-1, 0, 1, -2}, {0, 0, 0, 0}};
  unsigned seed = 7;
  for (int mi = 0; mi < 3; mi++) {
    char text[256];
    snprintf(
        text, sizeof text,
        "def @main(%%x: Tensor[(a, b), float32], %%p: Tensor[(4,), int64]%s) { dyn_pad(%%x, %%p%s, mode=\"%s\") }\n",
        mi == 0 ? ", %v: Tensor[(), float32]" : "", mi == 0 ? ", %v" : "", modes[mi]);
    prog sf, k;
    prog_open(&sf, text, "fused.dyn_pad", true);
    prog_open(&k, text, "fused.dyn_pad", false);
    for (int ci = 0; ci < 4; ci++) {
      const int64_t *pd = cases[ci];
      int64_t H = 3, W = 4, four = 4, two = 2;
      ch_tensor x, p, v, sh, o;
      ch_tensor_f32(&x, 2, (int64_t[]){H, W}, &seed, -1, 1);
      ch_tensor_i64(&p, 1, &four, pd);
      f32_of(&v, 0, NULL, (float[]){9.5f});
      ch_tensor_i64(&sh, 1, &two, NULL);
      ch_tensor *a[4] = {&x, &p}, *b[4] = {&x, &p};
      int na = 2;
      if (mi == 0) a[na] = b[na] = &v, na++;
      a[na] = &sh;
      ck_assert_int_eq(run(&sf, a, na + 1), 0);
      int64_t oh = H + pd[0] + pd[2], ow = W + pd[1] + pd[3];
      ck_assert_int_eq(ch_i(&sh)[0], oh);
      ck_assert_int_eq(ch_i(&sh)[1], ow);
      ch_tensor_f32(&o, 2, (int64_t[]){oh, ow}, &seed, 0, 0);
      b[na] = &o;
      ck_assert_int_eq(run(&k, b, na + 1), 0);
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          int64_t si = i - pd[0], sj = j - pd[1];
          float want;
          if (mi == 0)
            want = si >= 0 && si < H && sj >= 0 && sj < W ? ch_f(&x)[si * W + sj] : 9.5f;
          else
            want = ch_f(&x)[np_pad_src(modes[mi], si, H) * W + np_pad_src(modes[mi], sj, W)];
          ck_assert_msg(ch_f(&o)[i * ow + j] == want, "%s pads case %d at (%lld, %lld): %g, want %g", modes[mi], ci,
                        (long long)i, (long long)j, (double)ch_f(&o)[i * ow + j], (double)want);
        }
      /* Cropping below zero fails the shape function, naming dyn_pad. */
      memcpy(p.data, (int64_t[]){-2, 0, -2, 0}, 32);
      expect_error(&sf, a, na + 1, "dyn_pad", "negative");
      memcpy(p.data, (int64_t[]){INT64_MAX, 0, 0, 0}, 32);
      expect_error(&sf, a, na + 1, "dyn_pad", "2^40");
      ch_tensor_free(&x), ch_tensor_free(&p), ch_tensor_free(&v), ch_tensor_free(&sh), ch_tensor_free(&o);
    }
    /* An empty input: constant padding gives the fill value (the input is
     * never read); edge and reflect have nothing to repeat. */
    ch_tensor x, p, v, sh, o;
    int64_t four = 4, two = 2;
    ch_tensor_f32(&x, 2, (int64_t[]){0, 3}, &seed, 0, 0);
    ch_tensor_i64(&p, 1, &four, (int64_t[]){1, 0, 1, 0});
    f32_of(&v, 0, NULL, (float[]){-2.0f});
    ch_tensor_i64(&sh, 1, &two, NULL);
    ch_tensor_f32(&o, 2, (int64_t[]){2, 3}, &seed, 0, 0);
    ch_tensor *a[4] = {&x, &p}, *b[4] = {&x, &p};
    int na = 2;
    if (mi == 0) a[na] = b[na] = &v, na++;
    a[na] = &sh;
    b[na] = &o;
    if (mi == 0) {
      ck_assert_int_eq(run(&k, b, na + 1), 0);
      for (int i = 0; i < 6; i++) ck_assert_float_eq(ch_f(&o)[i], -2.0f);
    } else {
      expect_error(&sf, a, na + 1, "dyn_pad", "empty");
      expect_error(&k, b, na + 1, "dyn_pad", "empty");
    }
    ch_tensor_free(&x), ch_tensor_free(&p), ch_tensor_free(&v), ch_tensor_free(&sh), ch_tensor_free(&o);
    prog_close(&sf), prog_close(&k);
  }
}
END_TEST

/* ---- dyn_split ------------------------------------------------------------ */

START_TEST(test_split_with_run_time_sizes_writes_each_part_and_checks_the_sum) {
  const char *t = "def @main(%x: Tensor[(a, b), float32], %s: Tensor[(3,), int64]) {\n"
                  "  let %t = dyn_split(%x, %s, axis=1);\n  %t\n}\n";
  prog sf, k;
  prog_open(&sf, t, "fused.dyn_split", true);
  prog_open(&k, t, "fused.dyn_split", false);
  unsigned seed = 11;
  ch_tensor x, s, sh[3], o[3];
  int64_t three = 3, two = 2, sizes[3] = {2, 0, 4}, off[3] = {0, 2, 2};
  ch_tensor_f32(&x, 2, (int64_t[]){3, 6}, &seed, -1, 1);
  ch_tensor_i64(&s, 1, &three, sizes);
  for (int i = 0; i < 3; i++) ch_tensor_i64(&sh[i], 1, &two, NULL);
  ch_tensor *a[] = {&x, &s, &sh[0], &sh[1], &sh[2]};
  ck_assert_int_eq(run(&sf, a, 5), 0);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ch_i(&sh[i])[0], 3);
    ck_assert_int_eq(ch_i(&sh[i])[1], sizes[i]);
    ch_tensor_f32(&o[i], 2, (int64_t[]){3, sizes[i]}, &seed, 0, 0);
  }
  ch_tensor *b[] = {&x, &s, &o[0], &o[1], &o[2]};
  ck_assert_int_eq(run(&k, b, 5), 0);
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < sizes[p]; j++)
        ck_assert_float_eq(ch_f(&o[p])[i * sizes[p] + j], ch_f(&x)[i * 6 + off[p] + j]);
  memcpy(s.data, (int64_t[]){2, 1, 4}, 24);
  expect_error(&sf, a, 5, "dyn_split", "add up");
  expect_error(&k, b, 5, "dyn_split", "add up");
  memcpy(s.data, (int64_t[]){7, -1, 0}, 24);
  expect_error(&sf, a, 5, "dyn_split", "negative");
  prog_close(&sf), prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&s);
  for (int i = 0; i < 3; i++) ch_tensor_free(&sh[i]), ch_tensor_free(&o[i]);
}
END_TEST

/* ---- resize: ONNX's reference, in double --------------------------------- */

typedef struct rz_case {
  const char *mode, *ctm, *nearest;
  double a;
  int exclude;
} rz_case;

/* interpolate_1d_with_x of onnx/backend/test/case/node/resize.py for one
 * output index x along an axis of `in` values; coeffs by mode. */
static double ref_1d(const rz_case *rc, const double *data, int in, double scale, int x) {
  double out_w = scale * in, xo;
  /* Nimble copies an unchanged axis in every mode; the reference does too
   * except tf_half_pixel_for_nn, whose formula would move it half a pixel. */
  if (scale == 1) return data[x];
  if (!strcmp(rc->ctm, "align_corners")) xo = out_w == 1 ? 0 : x * (in - 1) / (out_w - 1);
  else if (!strcmp(rc->ctm, "asymmetric")) xo = x / scale;
  else if (!strcmp(rc->ctm, "pytorch_half_pixel")) xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  else if (!strcmp(rc->ctm, "tf_half_pixel_for_nn")) xo = (x + 0.5) / scale;
  else xo = (x + 0.5) / scale - 0.5;
  double fl = floor(xo), ratio = xo == fl ? 1 : xo - fl;
  double c[4];
  int n;
  if (!strcmp(rc->mode, "nearest")) {
    n = 2;
    bool up;
    if (xo == fl) up = true;
    else if (!strcmp(rc->nearest, "round_prefer_ceil")) up = ratio >= 0.5;
    else if (!strcmp(rc->nearest, "floor")) up = false;
    else if (!strcmp(rc->nearest, "ceil")) up = true;
    else up = ratio > 0.5;
    c[0] = !up, c[1] = up;
  } else if (!strcmp(rc->mode, "linear")) {
    n = 2;
    c[0] = 1 - ratio, c[1] = ratio;
  } else {
    double A = rc->a, r = ratio;
    n = 4;
    c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    c[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
    c[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
  }
  /* get_neighbor: the n indices of the edge-padded axis nearest to x
   * (ties: the smaller), ascending. */
  int pad = (n + 1) / 2, len = in + 2 * pad, idx[4], used[64] = {0};
  double px = xo + pad;
  for (int k = 0; k < n; k++) {
    int best = -1;
    for (int i = 0; i < len; i++)
      if (!used[i] && (best < 0 || fabs(px - i) < fabs(px - best))) best = i;
    used[best] = 1;
    idx[k] = best;
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (idx[j] < idx[i]) {
        int t = idx[i];
        idx[i] = idx[j], idx[j] = t;
      }
  double sum = 0, wsum = 0;
  for (int k = 0; k < n; k++) {
    int o = idx[k] - pad, src = o < 0 ? 0 : o >= in ? in - 1 : o;
    if (rc->exclude && (o < 0 || o >= in)) c[k] = 0;
    wsum += c[k];
    sum += c[k] * data[src];
  }
  return rc->exclude ? sum / wsum : sum;
}

/* Resizes a [H, W] plane (the case's last two axes; the others scale 1). */
static void ref_resize(const rz_case *rc, const float *x, int H, int W, double sh, double sw, int OH, int OW,
                       float *out) {
  double rows[64][64], col[64];
  for (int h = 0; h < H; h++) {
    double row[64];
    for (int w = 0; w < W; w++) row[w] = x[h * W + w];
    for (int ow = 0; ow < OW; ow++) rows[h][ow] = ref_1d(rc, row, W, sw, ow);
  }
  for (int ow = 0; ow < OW; ow++) {
    for (int h = 0; h < H; h++) col[h] = rows[h][ow];
    for (int oh = 0; oh < OH; oh++) out[oh * OW + ow] = (float)ref_1d(rc, col, H, sh, oh);
  }
}

static void check_resize(const rz_case *rc, bool sizes) {
  char text[512];
  snprintf(text, sizeof text,
           "def @main(%%x: Tensor[(n, c, h, w), float32], %%s: Tensor[(4,), %s]) {\n"
           "  dyn_resize(%%x, %%s, mode=\"%s\", coordinate_transformation_mode=\"%s\", nearest_mode=\"%s\", "
           "cubic_coeff_a=%g, exclude_outside=%d)\n}\n",
           sizes ? "int64" : "float32", rc->mode, rc->ctm, rc->nearest, rc->a, rc->exclude);
  prog sf, k;
  prog_open(&sf, text, "fused.dyn_resize", true);
  prog_open(&k, text, "fused.dyn_resize", false);
  static const float scales[] = {0.5f, 0.6f, 0.75f, 1.0f, 4.0f / 3.0f, 1.5f, 2.0f, 2.5f, 3.0f, 0.8f};
  static const int dims[][4] = {{1, 5, 1, 7}, {4, 4, 8, 3}, {2, 7, 3, 4}, {5, 3, 9, 2}, {1, 1, 2, 5}, {6, 6, 6, 6}};
  unsigned seed = 13;
  int nconf = sizes ? 6 : 10;
  for (int t = 0; t < nconf; t++) {
    int H, W, OH, OW;
    double sh, sw;
    float sv[4] = {1, 1, 1, 1};
    int64_t zv[4] = {2, 3, 0, 0};
    if (sizes) {
      H = dims[t][0], W = dims[t][1], OH = dims[t][2], OW = dims[t][3];
      sh = (double)OH / H, sw = (double)OW / W;
      zv[2] = OH, zv[3] = OW;
    } else {
      H = 1 + t % 6, W = 2 + (t * 3) % 5;
      sv[2] = scales[t], sv[3] = scales[(t + 3) % 10];
      sh = sv[2], sw = sv[3];
      OH = (int)floor((double)sv[2] * H), OW = (int)floor((double)sv[3] * W);
    }
    ch_tensor x, s, shp, o;
    int64_t four = 4;
    ch_tensor_f32(&x, 4, (int64_t[]){2, 3, H, W}, &seed, -2, 2);
    if (sizes) ch_tensor_i64(&s, 1, &four, zv);
    else f32_of(&s, 1, &four, sv);
    ch_tensor_i64(&shp, 1, &four, NULL);
    ch_tensor *a[] = {&x, &s, &shp};
    ck_assert_int_eq(run(&sf, a, 3), 0);
    int64_t want_shape[4] = {2, 3, OH, OW};
    for (int i = 0; i < 4; i++)
      ck_assert_msg(ch_i(&shp)[i] == want_shape[i], "%s/%s: axis %d is %lld, want %lld", rc->mode, rc->ctm, i,
                    (long long)ch_i(&shp)[i], (long long)want_shape[i]);
    ch_tensor_f32(&o, 4, want_shape, &seed, 0, 0);
    ch_tensor *b[] = {&x, &s, &o};
    ck_assert_int_eq(run(&k, b, 3), 0);
    float want[64 * 64];
    for (int pl = 0; pl < 6; pl++) {
      ref_resize(rc, ch_f(&x) + pl * H * W, H, W, sh, sw, OH, OW, want);
      for (int i = 0; i < OH * OW; i++) {
        float g = ch_f(&o)[pl * OH * OW + i];
        ck_assert_msg(fabsf(g - want[i]) <= 2e-5f + 2e-5f * fabsf(want[i]),
                      "%s %s %s a=%g excl=%d (%s) %dx%d -> %dx%d, plane %d at %d: %.7g, want %.7g", rc->mode, rc->ctm,
                      rc->nearest, rc->a, rc->exclude, sizes ? "sizes" : "scales", H, W, OH, OW, pl, i, (double)g,
                      (double)want[i]);
      }
    }
    ch_tensor_free(&x), ch_tensor_free(&s), ch_tensor_free(&shp), ch_tensor_free(&o);
  }
  prog_close(&sf), prog_close(&k);
}

START_TEST(test_resize_matches_onnx_reference_in_every_mode) {
  static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                                     "tf_half_pixel_for_nn"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  for (int c = 0; c < 5; c++) {
    for (int m = 0; m < 4; m++) {
      rz_case rc = {"nearest", ctms[c], nms[m], -0.75, 0};
      check_resize(&rc, true);
      check_resize(&rc, false);
    }
    rz_case lin = {"linear", ctms[c], "round_prefer_floor", -0.75, 0};
    check_resize(&lin, true);
    check_resize(&lin, false);
    rz_case cub = {"cubic", ctms[c], "round_prefer_floor", -0.75, 0};
    check_resize(&cub, true);
    check_resize(&cub, false);
    rz_case cub2 = {"cubic", ctms[c], "round_prefer_floor", -0.5, 1};
    check_resize(&cub2, true);
    check_resize(&cub2, false);
  }
}
END_TEST

/* tf_crop_and_resize in ONNX's reference: x_ori from the roi; outside
 * [0, in - 1] the result is the extrapolation value; else linear or
 * nearest (round_prefer_floor) on the edge-padded axis. */
static double ref_crop_1d(bool linear, const double *d, int in, int out, double r0, double r1, int x, double ev,
                          bool *outside) {
  double xo = out == 1 ? (r1 - r0) * (in - 1) / 2 : x * (r1 - r0) * (in - 1) / (out - 1);
  xo += r0 * (in - 1);
  *outside = xo < 0 || xo > in - 1;
  if (*outside) return ev;
  double fl = floor(xo), r = xo == fl ? 1 : xo - fl;
  int base = xo == fl ? (int)fl - 1 : (int)fl;
  int lo = base < 0 ? 0 : base > in - 1 ? in - 1 : base, hi = base + 1 > in - 1 ? in - 1 : base + 1;
  if (!linear) return r > 0.5 ? d[hi] : d[lo];
  return (1 - r) * d[lo] + r * d[hi];
}

START_TEST(test_tf_crop_and_resize_samples_the_roi_and_extrapolates_outside) {
  unsigned seed = 47;
  for (int linear = 0; linear < 2; linear++) {
    char text[512];
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(1, 1, h, w), float32], %%s: Tensor[(4,), int64], %%r: Tensor[(8,), float32]) {\n"
             "  dyn_resize(%%x, %%s, %%r, mode=\"%s\", coordinate_transformation_mode=\"tf_crop_and_resize\", "
             "extrapolation_value=7.5)\n}\n",
             linear ? "linear" : "nearest");
    prog k;
    prog_open(&k, text, "fused.dyn_resize", false);
    int H = 4, W = 5, OH = 3, OW = 6;
    float roi[8] = {0, 0, 0.4f, -0.2f, 1, 1, 1.2f, 0.9f};
    ch_tensor x, sz, r, o;
    int64_t four = 4, eight = 8;
    ch_tensor_f32(&x, 4, (int64_t[]){1, 1, H, W}, &seed, -1, 1);
    ch_tensor_i64(&sz, 1, &four, (int64_t[]){1, 1, OH, OW});
    f32_of(&r, 1, &eight, roi);
    ch_tensor_f32(&o, 4, (int64_t[]){1, 1, OH, OW}, &seed, 0, 0);
    ch_tensor *a[] = {&x, &sz, &r, &o};
    ck_assert_int_eq(run(&k, a, 4), 0);
    int extrapolated = 0;
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        /* Separable: along W for each row, then along H. */
        double col[8], want;
        bool out_w = false, out_h = false;
        for (int h = 0; h < H; h++) {
          double row[8];
          for (int w = 0; w < W; w++) row[w] = ch_f(&x)[h * W + w];
          col[h] = ref_crop_1d(linear, row, W, OW, roi[3], roi[7], ow, 7.5, &out_w);
        }
        want = ref_crop_1d(linear, col, H, OH, roi[2], roi[6], oh, 7.5, &out_h);
        extrapolated += out_w || out_h;
        ck_assert_msg(fabs(ch_f(&o)[oh * OW + ow] - want) < 1e-5, "%s at (%d, %d): %g, want %g",
                      linear ? "linear" : "nearest", oh, ow, (double)ch_f(&o)[oh * OW + ow], want);
      }
    ck_assert_int_gt(extrapolated, 0);
    prog_close(&k);
    ch_tensor_free(&x), ch_tensor_free(&sz), ch_tensor_free(&r), ch_tensor_free(&o);
  }
}
END_TEST

START_TEST(test_resize_with_bad_sizes_or_scales_fails_naming_the_op) {
  prog sf;
  ch_tensor x, s, shp;
  unsigned seed = 17;
  int64_t four = 4;
  ch_tensor_f32(&x, 4, (int64_t[]){1, 1, 3, 3}, &seed, 0, 1);
  ch_tensor_i64(&shp, 1, &four, NULL);
  prog_open(&sf, "def @main(%x: Tensor[(1, 1, h, w), float32], %s: Tensor[(4,), int64]) { dyn_resize(%x, %s) }\n",
            "fused.dyn_resize", true);
  ch_tensor_i64(&s, 1, &four, (int64_t[]){1, 1, -3, 4});
  ch_tensor *a[] = {&x, &s, &shp};
  expect_error(&sf, a, 3, "dyn_resize", "sizes[2]");
  memcpy(s.data, (int64_t[]){1, 1, 3, INT64_C(1) << 33}, 32);
  expect_error(&sf, a, 3, "dyn_resize", "sizes[3]");
  /* Sizes 0 give an empty result. */
  memcpy(s.data, (int64_t[]){1, 1, 0, 5}, 32);
  ck_assert_int_eq(run(&sf, a, 3), 0);
  ck_assert_int_eq(ch_i(&shp)[2], 0);
  ck_assert_int_eq(ch_i(&shp)[3], 5);
  /* An empty axis cannot grow. */
  ch_tensor e;
  ch_tensor_f32(&e, 4, (int64_t[]){1, 1, 0, 3}, &seed, 0, 1);
  memcpy(s.data, (int64_t[]){1, 1, 2, 3}, 32);
  ch_tensor *b[] = {&e, &s, &shp};
  expect_error(&sf, b, 3, "dyn_resize", "empty");
  prog_close(&sf);
  ch_tensor_free(&s);
  prog_open(&sf, "def @main(%x: Tensor[(1, 1, h, w), float32], %s: Tensor[(4,), float32]) { dyn_resize(%x, %s) }\n",
            "fused.dyn_resize", true);
  static const float bad[][4] = {{1, 1, NAN, 2}, {1, 1, 2, -1}, {1, 1, 0, 2}, {1, 1, INFINITY, 1}, {1, 1, 2, 1e12f}};
  for (int i = 0; i < 5; i++) {
    f32_of(&s, 1, &four, bad[i]);
    ch_tensor *c[] = {&x, &s, &shp};
    expect_error(&sf, c, 3, "dyn_resize", "scales[");
    ch_tensor_free(&s);
  }
  /* floor(in * scale) exactly: 0.7f * 10 is 7.0000001 in f32 but 6.99...
   * in reals? No: 0.7f = 0.699999988..., times 10 = 6.99999988: 6. */
  ch_tensor y;
  ch_tensor_f32(&y, 4, (int64_t[]){1, 1, 10, 3}, &seed, 0, 1);
  f32_of(&s, 1, &four, (float[]){1, 1, 0.7f, 1.0f / 3.0f});
  ch_tensor *d[] = {&y, &s, &shp};
  ck_assert_int_eq(run(&sf, d, 3), 0);
  ck_assert_int_eq(ch_i(&shp)[2], (int64_t)floor((double)0.7f * 10)); /* 6 */
  ck_assert_int_eq(ch_i(&shp)[3], (int64_t)floor((double)(1.0f / 3.0f) * 3)); /* 1 */
  ck_assert_int_eq(ch_i(&shp)[2], 6);
  prog_close(&sf);
  ch_tensor_free(&x), ch_tensor_free(&s), ch_tensor_free(&shp), ch_tensor_free(&e), ch_tensor_free(&y);
}
END_TEST

START_TEST(test_static_resize_keeps_axes_of_minus_one_and_copies_other_types_nearest) {
  /* resize with static sizes (-1 keeps the axis) on int64 data, nearest. */
  prog k;
  prog_open(&k,
            "def @main(%x: Tensor[(2, 3), int64]) { resize(%x, sizes=[-1, 7], mode=\"nearest\", "
            "coordinate_transformation_mode=\"asymmetric\", nearest_mode=\"floor\") }\n",
            "fused.resize", false);
  ch_tensor x, o;
  ch_tensor_i64(&x, 2, (int64_t[]){2, 3}, (int64_t[]){10, 11, 12, 20, 21, 22});
  ch_tensor_i64(&o, 2, (int64_t[]){2, 7}, NULL);
  ch_tensor *a[] = {&x, &o};
  ck_assert_int_eq(run(&k, a, 2), 0);
  /* asymmetric floor: source floor(j * 3 / 7). */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 7; j++) ck_assert_int_eq(ch_i(&o)[i * 7 + j], ch_i(&x)[i * 3 + (j * 3) / 7]);
  prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&o);
}
END_TEST

/* ---- non_max_suppression --------------------------------------------------- */

typedef struct nms_box {
  float y1, x1, y2, x2;
} nms_box;

static nms_box corners(const float *b, bool center) {
  nms_box r;
  if (center) {
    r.x1 = b[0] - b[2] / 2, r.x2 = b[0] + b[2] / 2, r.y1 = b[1] - b[3] / 2, r.y2 = b[1] + b[3] / 2;
  } else {
    r.y1 = fminf(b[0], b[2]), r.y2 = fmaxf(b[0], b[2]), r.x1 = fminf(b[1], b[3]), r.x2 = fmaxf(b[1], b[3]);
  }
  return r;
}

static bool overlaps(nms_box a, nms_box b, float thr) {
  float ih = fmaxf(fminf(a.y2, b.y2) - fmaxf(a.y1, b.y1), 0), iw = fmaxf(fminf(a.x2, b.x2) - fmaxf(a.x1, b.x1), 0);
  float inter = ih * iw, aa = (a.y2 - a.y1) * (a.x2 - a.x1), ab = (b.y2 - b.y1) * (b.x2 - b.x1);
  float uni = aa + ab - inter;
  if (inter <= 0 || aa <= 0 || ab <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

/* Greedy NMS by sorting each class's candidates (stable, score
 * descending), keeping a box unless it overlaps a kept one. */
static int ref_nms(const float *boxes, const float *scores, int B, int C, int N, int64_t maxk, float iou, float st,
                   bool center, int64_t *rows) {
  int count = 0;
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      int order[64], n = 0, kept[64], nk = 0;
      const float *s = scores + (b * C + c) * N;
      for (int j = 0; j < N; j++)
        if (s[j] > st) order[n++] = j;
      for (int i = 1; i < n; i++) /* insertion sort: stable */
        for (int j = i; j > 0 && s[order[j]] > s[order[j - 1]]; j--) {
          int t = order[j];
          order[j] = order[j - 1], order[j - 1] = t;
        }
      for (int i = 0; i < n && nk < maxk; i++) {
        nms_box cand = corners(boxes + (b * N + order[i]) * 4, center);
        bool drop = false;
        for (int q = 0; q < nk && !drop; q++)
          drop = overlaps(corners(boxes + (b * N + kept[q]) * 4, center), cand, iou);
        if (drop) continue;
        kept[nk++] = order[i];
        rows[count * 3] = b, rows[count * 3 + 1] = c, rows[count * 3 + 2] = order[i];
        count++;
      }
    }
  return count;
}

START_TEST(test_nms_selects_like_a_greedy_reference_and_reports_its_count) {
  for (int center = 0; center < 2; center++) {
    char text[512];
    snprintf(text, sizeof text,
             "def @main(%%b: Tensor[(B, N, 4), float32], %%s: Tensor[(B, C, N), float32], %%m: Tensor[(), int64], "
             "%%i: Tensor[(), float32], %%t: Tensor[(), float32]) { non_max_suppression(%%b, %%s, %%m, %%i, %%t, "
             "center_point_box=%d) }\n",
             center);
    prog sf, k;
    prog_open(&sf, text, "fused.non_max_suppression", true);
    prog_open(&k, text, "fused.non_max_suppression", false);
    unsigned seed = 19 + center;
    for (int trial = 0; trial < 6; trial++) {
      int B = 2, C = 3, N = trial == 5 ? 0 : 20;
      int64_t maxk = trial == 4 ? 0 : 1 + trial * 3;
      float iou = 0.2f + 0.1f * trial, st = trial % 2 ? 0.3f : -1.0f;
      ch_tensor bx, sc, m, i, t, sh, out, real;
      ch_tensor_f32(&bx, 3, (int64_t[]){B, N, 4}, &seed, 0, 10);
      ch_tensor_f32(&sc, 3, (int64_t[]){B, C, N}, &seed, 0, 1);
      /* Some equal scores and identical boxes: ties go to the smaller index. */
      if (N) {
        ch_f(&sc)[3] = ch_f(&sc)[7];
        memcpy(ch_f(&bx) + 4 * 9, ch_f(&bx) + 4 * 2, 16);
      }
      ch_tensor_i64(&m, 0, NULL, &maxk);
      f32_of(&i, 0, NULL, &iou);
      f32_of(&t, 0, NULL, &st);
      int64_t two = 2, bound = (int64_t)B * C * N;
      ch_tensor_i64(&sh, 1, &two, NULL);
      ch_tensor *a[] = {&bx, &sc, &m, &i, &t, &sh};
      ck_assert_int_eq(run(&sf, a, 6), 0);
      ck_assert_int_eq(ch_i(&sh)[0], bound);
      ck_assert_int_eq(ch_i(&sh)[1], 3);
      ch_tensor_i64(&out, 2, (int64_t[]){bound, 3}, NULL);
      ch_tensor_i64(&real, 1, &two, NULL);
      ch_tensor *b[] = {&bx, &sc, &m, &i, &t, &out, &real};
      ck_assert_int_eq(run(&k, b, 7), 0);
      int64_t want[64 * 3 * 6];
      int n = ref_nms(ch_f(&bx), ch_f(&sc), B, C, N, maxk, iou, st, center, want);
      ck_assert_int_eq(ch_i(&real)[0], n);
      ck_assert_int_eq(ch_i(&real)[1], 3);
      for (int r = 0; r < n * 3; r++)
        ck_assert_msg(ch_i(&out)[r] == want[r], "center %d trial %d: element %d is %lld, want %lld", center, trial, r,
                      (long long)ch_i(&out)[r], (long long)want[r]);
      ch_tensor_free(&bx), ch_tensor_free(&sc), ch_tensor_free(&m), ch_tensor_free(&i), ch_tensor_free(&t);
      ch_tensor_free(&sh), ch_tensor_free(&out), ch_tensor_free(&real);
    }
    prog_close(&sf), prog_close(&k);
  }
  /* Without the optional inputs ONNX's max_output_boxes_per_class is 0:
   * nothing is selected. */
  prog k;
  prog_open(
      &k, "def @main(%b: Tensor[(1, 2, 4), float32], %s: Tensor[(1, 1, 2), float32]) { non_max_suppression(%b, %s) }\n",
      "fused.non_max_suppression", false);
  ch_tensor bx, sc, out, real;
  f32_of(&bx, 3, (int64_t[]){1, 2, 4}, (float[]){0, 0, 1, 1, 5, 5, 6, 6});
  f32_of(&sc, 3, (int64_t[]){1, 1, 2}, (float[]){0.9f, 0.8f});
  int64_t two = 2;
  ch_tensor_i64(&out, 2, (int64_t[]){2, 3}, NULL);
  ch_tensor_i64(&real, 1, &two, NULL);
  ch_tensor *a[] = {&bx, &sc, &out, &real};
  ck_assert_int_eq(run(&k, a, 4), 0);
  ck_assert_int_eq(ch_i(&real)[0], 0);
  prog_close(&k);
  ch_tensor_free(&bx), ch_tensor_free(&sc), ch_tensor_free(&out), ch_tensor_free(&real);
}
END_TEST

/* ---- roi_align ----------------------------------------------------------- */

START_TEST(test_roi_align_averages_bilinear_samples_per_bin) {
  /* A 3x4 image with value 10 y + x: bilinear sampling is exact on a
   * plane, so each bin's average is the plane at the bin's center. */
  prog k;
  prog_open(&k,
            "def @main(%x: Tensor[(1, 2, 3, 4), float32], %r: Tensor[(R, 4), float32], %b: Tensor[(R,), int64]) {\n"
            "  roi_align(%x, %r, %b, output_height=2, output_width=2, sampling_ratio=2, spatial_scale=0.5, "
            "coordinate_transformation_mode=\"half_pixel\")\n}\n",
            "fused.roi_align", false);
  float img[24];
  for (int c = 0; c < 2; c++)
    for (int y = 0; y < 3; y++)
      for (int x = 0; x < 4; x++) img[(c * 3 + y) * 4 + x] = 10.0f * y + x + 100.0f * c;
  ch_tensor x, r, b, o;
  f32_of(&x, 4, (int64_t[]){1, 2, 3, 4}, img);
  /* roi [x1, y1, x2, y2] = [1, 1, 5, 5] in input scale 0.5 -> [0, 0, 2, 2]
   * after the half-pixel shift: bins 1x1, centers 0.5 and 1.5. */
  f32_of(&r, 2, (int64_t[]){1, 4}, (float[]){1, 1, 5, 5});
  ch_tensor_i64(&b, 1, (int64_t[]){1}, (int64_t[]){0});
  ch_tensor_f32(&o, 4, (int64_t[]){1, 2, 2, 2}, &(unsigned){1}, 0, 0);
  ch_tensor *a[] = {&x, &r, &b, &o};
  ck_assert_int_eq(run(&k, a, 4), 0);
  for (int c = 0; c < 2; c++)
    for (int ph = 0; ph < 2; ph++)
      for (int pw = 0; pw < 2; pw++) {
        float want = 10.0f * (ph + 0.5f) + (pw + 0.5f) + 100.0f * c;
        ck_assert_msg(fabsf(ch_f(&o)[(c * 2 + ph) * 2 + pw] - want) < 1e-4f, "bin (%d, %d, %d): %g, want %g", c, ph, pw,
                      (double)ch_f(&o)[(c * 2 + ph) * 2 + pw], (double)want);
      }
  /* A batch index outside [0, N) fails before anything is read. */
  ch_i(&b)[0] = 1;
  expect_error(&k, a, 4, "roi_align", "batch index");
  prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&r), ch_tensor_free(&b), ch_tensor_free(&o);

  /* Max mode with one sample per bin on pixel centers: each bin is that
   * pixel (its corner weights are 1, 0, 0, 0). roi [0.5, 0.5, 4.5, 4.5]
   * shifted by half a pixel is [0, 4): 2x2 bins of 2, samples at 1 and 3. */
  prog_open(&k,
            "def @main(%x: Tensor[(1, 1, 4, 4), float32], %r: Tensor[(1, 4), float32], %b: Tensor[(1,), int64]) {\n"
            "  roi_align(%x, %r, %b, mode=\"max\", output_height=2, output_width=2, sampling_ratio=1, "
            "coordinate_transformation_mode=\"half_pixel\")\n}\n",
            "fused.roi_align", false);
  unsigned seed = 53;
  ch_tensor_f32(&x, 4, (int64_t[]){1, 1, 4, 4}, &seed, 0.1f, 2);
  f32_of(&r, 2, (int64_t[]){1, 4}, (float[]){0.5f, 0.5f, 4.5f, 4.5f});
  ch_tensor_i64(&b, 1, (int64_t[]){1}, (int64_t[]){0});
  ch_tensor_f32(&o, 4, (int64_t[]){1, 1, 2, 2}, &seed, 0, 0);
  ch_tensor *m[] = {&x, &r, &b, &o};
  ck_assert_int_eq(run(&k, m, 4), 0);
  for (int ph = 0; ph < 2; ph++)
    for (int pw = 0; pw < 2; pw++) ck_assert_float_eq(ch_f(&o)[ph * 2 + pw], ch_f(&x)[(1 + 2 * ph) * 4 + 1 + 2 * pw]);
  prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&r), ch_tensor_free(&b), ch_tensor_free(&o);
}
END_TEST

/* ---- unique_all ------------------------------------------------------------ */

/* numpy.unique on slices: distinct slices sorted (or by first
 * occurrence), first indices, inverse, counts. Slices of `S` values. */
static int ref_unique(const int64_t *sl, int M, int S, bool sorted, int *first, int64_t *inv, int64_t *cnt) {
  int K = 0;
  for (int i = 0; i < M; i++) {
    int g = -1;
    for (int q = 0; q < K && g < 0; q++)
      if (!memcmp(sl + (int64_t)first[q] * S, sl + (int64_t)i * S, (size_t)S * 8)) g = q;
    if (g < 0) first[g = K++] = i, cnt[g] = 0;
    cnt[g]++;
    inv[i] = g;
  }
  if (sorted) { /* order groups by value (lexicographic), renumber */
    int ord[256], pos[256];
    for (int q = 0; q < K; q++) ord[q] = q;
    for (int i = 1; i < K; i++)
      for (int j = i; j > 0; j--) {
        const int64_t *p = sl + (int64_t)first[ord[j]] * S, *pp = sl + (int64_t)first[ord[j - 1]] * S;
        int cmp = 0;
        for (int e = 0; e < S && !cmp; e++) cmp = p[e] < pp[e] ? -1 : p[e] > pp[e];
        if (cmp >= 0) break;
        int t = ord[j];
        ord[j] = ord[j - 1], ord[j - 1] = t;
      }
    int f2[256];
    int64_t c2[256];
    for (int q = 0; q < K; q++) pos[ord[q]] = q, f2[q] = first[ord[q]], c2[q] = cnt[ord[q]];
    for (int q = 0; q < K; q++) first[q] = f2[q], cnt[q] = c2[q];
    for (int i = 0; i < M; i++) inv[i] = pos[inv[i]];
  }
  return K;
}

START_TEST(test_unique_matches_numpy_unique_with_and_without_axis) {
  unsigned seed = 23;
  for (int sorted = 0; sorted < 2; sorted++) {
    /* Flattened int64 values with many repeats (and an empty input). */
    char text[256];
    snprintf(text, sizeof text, "def @main(%%x: Tensor[(a, b), int64]) { let %%t = unique_all(%%x, sorted=%d); %%t }\n",
             sorted);
    prog k;
    prog_open(&k, text, "fused.unique_all", false);
    for (int trial = 0; trial < 3; trial++) {
      int64_t shape[2] = {trial == 2 ? 0 : 5, 7}, M = shape[0] * shape[1];
      int64_t vals[64];
      for (int i = 0; i < M; i++) vals[i] = rand_r(&seed) % 9 - 4;
      ch_tensor x, o[4], s[4];
      ch_tensor_i64(&x, 2, shape, vals);
      for (int q = 0; q < 4; q++) ch_tensor_i64(&o[q], 1, &M, NULL), ch_tensor_i64(&s[q], 1, (int64_t[]){1}, NULL);
      ch_tensor *a[] = {&x, &o[0], &o[1], &o[2], &o[3], &s[0], &s[1], &s[2], &s[3]};
      ck_assert_int_eq(run(&k, a, 9), 0);
      int first[64];
      int64_t inv[64], cnt[64];
      int K = ref_unique(vals, (int)M, 1, sorted, first, inv, cnt);
      ck_assert_int_eq(ch_i(&s[0])[0], K);
      ck_assert_int_eq(ch_i(&s[1])[0], K);
      ck_assert_int_eq(ch_i(&s[2])[0], M);
      ck_assert_int_eq(ch_i(&s[3])[0], K);
      for (int q = 0; q < K; q++) {
        ck_assert_int_eq(ch_i(&o[0])[q], vals[first[q]]);
        ck_assert_int_eq(ch_i(&o[1])[q], first[q]);
        ck_assert_int_eq(ch_i(&o[3])[q], cnt[q]);
      }
      for (int i = 0; i < M; i++) ck_assert_int_eq(ch_i(&o[2])[i], inv[i]);
      ch_tensor_free(&x);
      for (int q = 0; q < 4; q++) ch_tensor_free(&o[q]), ch_tensor_free(&s[q]);
    }
    prog_close(&k);

    /* Slices along axis 1 of a [2, 6, 2] float tensor. */
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(2, m, 2), float32]) { let %%t = unique_all(%%x, has_axis=1, axis=-2, sorted=%d); "
             "%%t }\n",
             sorted);
    prog_open(&k, text, "fused.unique_all", false);
    int M = 6;
    float xv[24];
    int64_t sl[6 * 4];
    static const int pick[6] = {2, 0, 2, 1, 0, 3}; /* slices 0/2 and 1/4 repeat */
    float base[4][4];
    for (int v = 0; v < 4; v++)
      for (int e = 0; e < 4; e++) base[v][e] = (float)(rand_r(&seed) % 3);
    base[3][0] = base[1][0], base[3][1] = base[1][1]; /* a shared prefix */
    for (int i = 0; i < M; i++)
      for (int e = 0; e < 4; e++) {
        int o = e / 2, q = e % 2;
        xv[(o * M + i) * 2 + q] = base[pick[i]][e];
        sl[i * 4 + e] = (int64_t)base[pick[i]][e];
      }
    ch_tensor x, o[4], s[4];
    f32_of(&x, 3, (int64_t[]){2, M, 2}, xv);
    ch_tensor_f32(&o[0], 3, (int64_t[]){2, M, 2}, &seed, 0, 0);
    ch_tensor_i64(&s[0], 1, (int64_t[]){3}, NULL);
    for (int q = 1; q < 4; q++)
      ch_tensor_i64(&o[q], 1, (int64_t[]){M}, NULL), ch_tensor_i64(&s[q], 1, (int64_t[]){1}, NULL);
    ch_tensor *a[] = {&x, &o[0], &o[1], &o[2], &o[3], &s[0], &s[1], &s[2], &s[3]};
    ck_assert_int_eq(run(&k, a, 9), 0);
    int first[8];
    int64_t inv[8], cnt[8];
    int K = ref_unique(sl, M, 4, sorted, first, inv, cnt);
    ck_assert_int_eq(ch_i(&s[0])[0], 2);
    ck_assert_int_eq(ch_i(&s[0])[1], K);
    ck_assert_int_eq(ch_i(&s[0])[2], 2);
    for (int q = 0; q < K; q++) {
      ck_assert_int_eq(ch_i(&o[1])[q], first[q]);
      ck_assert_int_eq(ch_i(&o[3])[q], cnt[q]);
      for (int e = 0; e < 4; e++) /* Y is [2, K, 2], compact */
        ck_assert_float_eq(ch_f(&o[0])[((e / 2) * K + q) * 2 + e % 2], (float)sl[first[q] * 4 + e]);
    }
    for (int i = 0; i < M; i++) ck_assert_int_eq(ch_i(&o[2])[i], inv[i]);
    ch_tensor_free(&x);
    for (int q = 0; q < 4; q++) ch_tensor_free(&o[q]), ch_tensor_free(&s[q]);
    prog_close(&k);
  }
}
END_TEST

/* ---- one_hot, window, det ------------------------------------------------- */

START_TEST(test_one_hot_places_on_values_along_the_axis) {
  const char *t = "def @main(%i: Tensor[(4,), int64], %d: Tensor[(), float32], %v: Tensor[(2,), float32]) {\n"
                  "  one_hot(%i, %d, %v, axis=0)\n}\n";
  prog sf, k;
  prog_open(&sf, t, "fused.one_hot", true);
  prog_open(&k, t, "fused.one_hot", false);
  ch_tensor i, d, v, sh, o;
  int64_t two = 2;
  ch_tensor_i64(&i, 1, (int64_t[]){4}, (int64_t[]){1, -1, 5, -6});
  f32_of(&d, 0, NULL, (float[]){5.7f}); /* cast to 5 */
  f32_of(&v, 1, &two, (float[]){-1.0f, 3.0f});
  ch_tensor_i64(&sh, 1, &two, NULL);
  ch_tensor *a[] = {&i, &d, &v, &sh};
  ck_assert_int_eq(run(&sf, a, 4), 0);
  ck_assert_int_eq(ch_i(&sh)[0], 5);
  ck_assert_int_eq(ch_i(&sh)[1], 4);
  ch_tensor_f32(&o, 2, (int64_t[]){5, 4}, &(unsigned){1}, 0, 0);
  ch_tensor *b[] = {&i, &d, &v, &o};
  ck_assert_int_eq(run(&k, b, 4), 0);
  /* Columns: index 1 -> row 1; -1 -> row 4; 5 and -6 are outside: all off. */
  static const int hot[4] = {1, 4, -1, -1};
  for (int r = 0; r < 5; r++)
    for (int c = 0; c < 4; c++) ck_assert_float_eq(ch_f(&o)[r * 4 + c], r == hot[c] ? 3.0f : -1.0f);
  ch_f(&d)[0] = -2.0f;
  expect_error(&sf, a, 4, "one_hot", "negative");
  ch_f(&d)[0] = NAN;
  expect_error(&sf, a, 4, "one_hot", "NaN");
  ch_f(&d)[0] = 1e30f;
  expect_error(&sf, a, 4, "one_hot", "NaN or beyond");
  ch_f(&d)[0] = 3e12f; /* fits int64, but 3e12 x 4 elements is past 2^40 */
  expect_error(&sf, a, 4, "one_hot", "2^40");
  prog_close(&sf), prog_close(&k);
  ch_tensor_free(&i), ch_tensor_free(&d), ch_tensor_free(&v), ch_tensor_free(&sh), ch_tensor_free(&o);
}
END_TEST

START_TEST(test_windows_match_their_cosine_formulas) {
  static const char *const kinds[] = {"hann", "hamming", "blackman"};
  for (int kd = 0; kd < 3; kd++)
    for (int periodic = 0; periodic < 2; periodic++) {
      char text[256];
      snprintf(text, sizeof text, "def @main(%%n: Tensor[(), int64]) { window(%%n, kind=\"%s\", periodic=%d) }\n",
               kinds[kd], periodic);
      prog sf, k;
      prog_open(&sf, text, "fused.window", true);
      prog_open(&k, text, "fused.window", false);
      static const int64_t sizes[] = {0, 1, 2, 7, 10, 64, 1000};
      for (int si = 0; si < 7; si++) {
        int64_t n = sizes[si], one = 1;
        ch_tensor nt, sh, o;
        ch_tensor_i64(&nt, 0, NULL, &n);
        ch_tensor_i64(&sh, 1, &one, NULL);
        ch_tensor *a[] = {&nt, &sh};
        ck_assert_int_eq(run(&sf, a, 2), 0);
        ck_assert_int_eq(ch_i(&sh)[0], n);
        ch_tensor_f32(&o, 1, &n, &(unsigned){1}, 0, 0);
        ch_tensor *b[] = {&nt, &o};
        ck_assert_int_eq(run(&k, b, 2), 0);
        double N = periodic ? (double)n : (double)(n - 1);
        for (int64_t i = 0; i < n; i++) {
          double c1 = cos(2 * M_PI * i / N), c2 = cos(4 * M_PI * i / N), want;
          if (kd == 0) want = 0.5 - 0.5 * c1;
          else if (kd == 1) want = 25.0 / 46 - 21.0 / 46 * c1;
          else want = 0.42 - 0.5 * c1 + 0.08 * c2;
          if (N == 0) want = 1; /* one point: [1], as SciPy's windows */
          ck_assert_msg(fabs(ch_f(&o)[i] - want) < 3e-7, "%s periodic=%d n=%lld at %lld: %.9g, want %.9g", kinds[kd],
                        periodic, (long long)n, (long long)i, (double)ch_f(&o)[i], want);
        }
        ch_tensor_free(&nt), ch_tensor_free(&sh), ch_tensor_free(&o);
      }
      int64_t neg = -3, one = 1;
      ch_tensor nt, sh;
      ch_tensor_i64(&nt, 0, NULL, &neg);
      ch_tensor_i64(&sh, 1, &one, NULL);
      ch_tensor *a[] = {&nt, &sh};
      expect_error(&sf, a, 2, "window", "negative");
      ch_tensor_free(&nt), ch_tensor_free(&sh);
      prog_close(&sf), prog_close(&k);
    }
}
END_TEST

START_TEST(test_det_matches_double_precision_elimination) {
  prog k;
  prog_open(&k, "def @main(%x: Tensor[(b, n, n), float32]) { det(%x) }\n", "fused.det", false);
  unsigned seed = 29;
  for (int n = 0; n <= 5; n++) {
    int B = 4;
    ch_tensor x, o;
    ch_tensor_f32(&x, 3, (int64_t[]){B, n, n}, &seed, -2, 2);
    if (n >= 2) { /* matrix 1 singular (two equal rows), matrix 2 needs a row swap */
      memcpy(ch_f(&x) + n * n + n, ch_f(&x) + n * n, (size_t)n * 4);
      ch_f(&x)[2 * n * n] = 0;
    }
    ch_tensor_f32(&o, 1, (int64_t[]){B}, &seed, 0, 0);
    ch_tensor *a[] = {&x, &o};
    ck_assert_int_eq(run(&k, a, 2), 0);
    for (int b = 0; b < B; b++) {
      double m[5][5], det = 1;
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) m[i][j] = ch_f(&x)[b * n * n + i * n + j];
      for (int c = 0; c < n; c++) {
        int p = c;
        for (int i = c + 1; i < n; i++)
          if (fabs(m[i][c]) > fabs(m[p][c])) p = i;
        if (m[p][c] == 0) {
          det = 0;
          break;
        }
        if (p != c) {
          for (int j = 0; j < n; j++) {
            double t = m[c][j];
            m[c][j] = m[p][j], m[p][j] = t;
          }
          det = -det;
        }
        det *= m[c][c];
        for (int i = c + 1; i < n; i++)
          for (int j = n - 1; j >= c; j--) m[i][j] -= m[i][c] / m[c][c] * m[c][j];
      }
      if (n >= 2 && b == 1) ck_assert_msg(fabs(det) < 1e-9, "singular matrix: det %g", det);
      ck_assert_msg(fabs(ch_f(&o)[b] - det) <= 1e-5 + 1e-4 * fabs(det), "n=%d b=%d: %g, want %g", n, b,
                    (double)ch_f(&o)[b], det);
    }
    ch_tensor_free(&x), ch_tensor_free(&o);
  }
  prog_close(&k);
}
END_TEST

/* ---- max_pool2d_with_indices, dropout_train ------------------------------- */

START_TEST(test_max_pool_with_indices_gives_the_first_maximum_and_its_flat_index) {
  struct {
    int k, s, d, p, ceil, order;
  } cases[] = {{2, 2, 1, 0, 0, 0}, {3, 2, 1, 1, 1, 1}, {2, 1, 2, 1, 0, 0}, {3, 3, 1, 2, 1, 0}};
  unsigned seed = 31;
  for (int ci = 0; ci < 4; ci++) {
    char text[512];
    int K = cases[ci].k, S = cases[ci].s, D = cases[ci].d, P = cases[ci].p;
    snprintf(
        text, sizeof text,
        "def @main(%%x: Tensor[(n, c, h, w), float32]) { let %%t = max_pool2d_with_indices(%%x, kernel_shape=[%d, %d], "
        "strides=[%d, %d], dilations=[%d, %d], pads=[%d, %d, %d, %d], ceil_mode=%d, storage_order=%d); %%t }\n",
        K, K, S, S, D, D, P, P, P, P, cases[ci].ceil, cases[ci].order);
    prog sf, k;
    prog_open(&sf, text, "fused.max_pool2d_with_indices", true);
    prog_open(&k, text, "fused.max_pool2d_with_indices", false);
    int N = 2, C = 3, H = 7, W = 6;
    ch_tensor x, s[2], shp[2], o, oi;
    ch_tensor_f32(&x, 4, (int64_t[]){N, C, H, W}, &seed, -1, 1);
    for (int i = 0; i < N * C * H * W; i += 5) ch_f(&x)[i] = 0.5f; /* ties */
    ch_tensor_i64(&s[0], 1, (int64_t[]){4}, (int64_t[]){N, C, H, W});
    for (int q = 0; q < 2; q++) ch_tensor_i64(&shp[q], 1, (int64_t[]){4}, NULL);
    ch_tensor *a[] = {&s[0], &shp[0], &shp[1]};
    ck_assert_int_eq(run(&sf, a, 3), 0);
    int OH = (int)ch_i(&shp[0])[2], OW = (int)ch_i(&shp[0])[3];
    int span_h = H + 2 * P - ((K - 1) * D + 1), span_w = W + 2 * P - ((K - 1) * D + 1);
    int wh = cases[ci].ceil ? (span_h + S - 1) / S + 1 : span_h / S + 1,
        ww = cases[ci].ceil ? (span_w + S - 1) / S + 1 : span_w / S + 1;
    if (cases[ci].ceil && (wh - 1) * S >= H + P) wh--;
    if (cases[ci].ceil && (ww - 1) * S >= W + P) ww--;
    ck_assert_int_eq(OH, wh);
    ck_assert_int_eq(OW, ww);
    ck_assert_int_eq(ch_i(&shp[1])[3], OW);
    ch_tensor_f32(&o, 4, (int64_t[]){N, C, OH, OW}, &seed, 0, 0);
    ch_tensor_i64(&oi, 4, (int64_t[]){N, C, OH, OW}, NULL);
    ch_tensor *b[] = {&x, &o, &oi};
    ck_assert_int_eq(run(&k, b, 3), 0);
    for (int nc = 0; nc < N * C; nc++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          float best = 0;
          int64_t bi = -1;
          for (int kh = 0; kh < K; kh++)
            for (int kw = 0; kw < K; kw++) {
              int h = oh * S - P + kh * D, w = ow * S - P + kw * D;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              float v = ch_f(&x)[(nc * H + h) * W + w];
              if (bi < 0 || v > best) best = v, bi = (int64_t)nc * H * W + (cases[ci].order ? w * H + h : h * W + w);
            }
          int at = (nc * OH + oh) * OW + ow;
          ck_assert_float_eq(ch_f(&o)[at], best);
          ck_assert_int_eq(ch_i(&oi)[at], bi);
        }
    prog_close(&sf), prog_close(&k);
    ch_tensor_free(&x), ch_tensor_free(&s[0]), ch_tensor_free(&shp[0]), ch_tensor_free(&shp[1]);
    ch_tensor_free(&o), ch_tensor_free(&oi);
  }
}
END_TEST

START_TEST(test_training_dropout_computes_ratio_zero_and_refuses_random_ratios) {
  prog k;
  prog_open(&k,
            "def @main(%x: Tensor[(n, 3), float32], %r: Tensor[(), float32]) { let %t = dropout_train(%x, %r); %t }\n",
            "fused.dropout_train", false);
  unsigned seed = 37;
  ch_tensor x, r, y, m;
  ch_tensor_f32(&x, 2, (int64_t[]){4, 3}, &seed, -1, 1);
  f32_of(&r, 0, NULL, (float[]){0.0f});
  ch_tensor_f32(&y, 2, (int64_t[]){4, 3}, &seed, 0, 0);
  ch_tensor_u8(&m, 2, (int64_t[]){4, 3}, NULL);
  ch_tensor *a[] = {&x, &r, &y, &m};
  ck_assert_int_eq(run(&k, a, 4), 0);
  for (int i = 0; i < 12; i++) {
    ck_assert_float_eq(ch_f(&y)[i], ch_f(&x)[i]);
    ck_assert_int_eq(ch_u8(&m)[i], 1);
  }
  ch_f(&r)[0] = 0.5f;
  expect_error(&k, a, 4, "dropout_train", "ratio other than 0");
  prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&r), ch_tensor_free(&y), ch_tensor_free(&m);
  /* Without a ratio input (ONNX's 0.5) the primitive is not computed. */
  nimble_arena *arena;
  NIMBLE_ASSERT_OK(nimble_arena_create(&arena));
  nimble_module *mod =
      ch_compile_module(arena, "def @main(%x: Tensor[(2, 3), float32]) { let %t = dropout_train(%x); %t }\n");
  nimble_ln_arena *la;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&la));
  nimble_ln_kernel *kern;
  nimble_status_t s = nimble_compute_primitive(mod, ch_find_primitive(mod, "fused.dropout_train"), NULL, la, &kern);
  ck_assert_int_eq(nimble_status_code(s), NIMBLE_UNIMPLEMENTED);
  ck_assert_msg(strstr(nimble_status_message(s), "random"), "message: %s", nimble_status_message(s));
  nimble_status_free(s);
  nimble_ln_arena_destroy(la);
  nimble_arena_destroy(arena);
}
END_TEST

/* ---- dft, stft, mel_weight_matrix ---------------------------------------- */

/* X_k = sum_n x_n e^(-+2 pi i k n / L) (/ L for the inverse), in double,
 * with x zero-padded or truncated to L. */
static void ref_dft(const double *xr, const double *xi, int N, int L, int k, bool inverse, double *re, double *im) {
  double sr = 0, si = 0;
  for (int t = 0; t < N && t < L; t++) {
    double ph = 2 * M_PI * (double)((int64_t)k * t % L) / L, c = cos(ph), s = inverse ? sin(ph) : -sin(ph);
    sr += xr[t] * c - xi[t] * s;
    si += xr[t] * s + xi[t] * c;
  }
  *re = inverse ? sr / L : sr;
  *im = inverse ? si / L : si;
}

START_TEST(test_dft_matches_a_double_precision_sum) {
  static const struct {
    int axis, inverse, onesided, complex, N, L; /* L 0: no dft_length input */
  } cases[] = {{1, 0, 0, 0, 10, 0}, {1, 1, 0, 1, 7, 0}, {2, 0, 1, 0, 8, 0}, {1, 0, 0, 1, 6, 9}, {2, 1, 1, 1, 12, 5},
               {1, 0, 1, 0, 1, 0}};
  unsigned seed = 41;
  for (int ci = 0; ci < 6; ci++) {
    char text[512];
    int C = cases[ci].complex ? 2 : 1, N = cases[ci].N, ax = cases[ci].axis;
    snprintf(text, sizeof text,
             "def @main(%%x: Tensor[(2, a, b, %d), float32]%s) { dft(%%x%s, axis=%d, inverse=%d, onesided=%d) }\n", C,
             cases[ci].L ? ", %l: Tensor[(), int64]" : "", cases[ci].L ? ", %l" : "", ax, cases[ci].inverse,
             cases[ci].onesided);
    prog sf, k;
    prog_open(&sf, text, "fused.dft", true);
    prog_open(&k, text, "fused.dft", false);
    int other = 3, L = cases[ci].L ? cases[ci].L : N, K = cases[ci].onesided ? L / 2 + 1 : L;
    int64_t xs[4] = {2, ax == 1 ? N : other, ax == 1 ? other : N, C}, four = 4, lv = L;
    ch_tensor x, l, sh, o;
    ch_tensor_f32(&x, 4, xs, &seed, -3, 3);
    ch_tensor_i64(&l, 0, NULL, &lv);
    ch_tensor_i64(&sh, 1, &four, NULL);
    ch_tensor *a[3] = {&x}, *b[3] = {&x};
    int na = 1;
    if (cases[ci].L) a[na] = b[na] = &l, na++;
    a[na] = &sh;
    ck_assert_int_eq(run(&sf, a, na + 1), 0);
    int64_t os[4] = {2, ax == 1 ? K : other, ax == 1 ? other : K, 2};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(ch_i(&sh)[i], os[i]);
    ch_tensor_f32(&o, 4, os, &seed, 0, 0);
    b[na] = &o;
    ck_assert_int_eq(run(&k, b, na + 1), 0);
    for (int bt = 0; bt < 2; bt++)
      for (int j = 0; j < other; j++) {
        double xr[16], xi[16];
        for (int t = 0; t < N; t++) {
          int64_t at = ax == 1 ? ((bt * N + t) * other + j) * C : ((bt * other + j) * N + t) * C;
          xr[t] = ch_f(&x)[at], xi[t] = C == 2 ? ch_f(&x)[at + 1] : 0;
        }
        for (int kk = 0; kk < K; kk++) {
          double re, im;
          ref_dft(xr, xi, N, L, kk, cases[ci].inverse, &re, &im);
          int64_t at = ax == 1 ? ((bt * K + kk) * other + j) * 2 : ((bt * other + j) * K + kk) * 2;
          ck_assert_msg(fabs(ch_f(&o)[at] - re) < 1e-4 && fabs(ch_f(&o)[at + 1] - im) < 1e-4,
                        "case %d bin %d: (%g, %g), want (%g, %g)", ci, kk, (double)ch_f(&o)[at],
                        (double)ch_f(&o)[at + 1], re, im);
        }
      }
    if (cases[ci].L) {
      lv = 0;
      memcpy(l.data, &lv, 8);
      expect_error(&sf, a, na + 1, "dft", "length");
    }
    prog_close(&sf), prog_close(&k);
    ch_tensor_free(&x), ch_tensor_free(&l), ch_tensor_free(&sh), ch_tensor_free(&o);
  }
}
END_TEST

START_TEST(test_stft_frames_windows_and_transforms_the_signal) {
  const char *t = "def @main(%x: Tensor[(b, s, 1), float32], %st: Tensor[(), int64], %w: Tensor[(l,), float32]) {\n"
                  "  stft(%x, %st, %w, has_window=1)\n}\n";
  prog sf, k;
  prog_open(&sf, t, "fused.stft", true);
  prog_open(&k, t, "fused.stft", false);
  unsigned seed = 43;
  int B = 2, S = 37, L = 8, step = 5, F = (S - L) / step + 1, K = L / 2 + 1;
  int64_t st = step, four = 4;
  ch_tensor x, s, w, sh, o;
  ch_tensor_f32(&x, 3, (int64_t[]){B, S, 1}, &seed, -1, 1);
  ch_tensor_i64(&s, 0, NULL, &st);
  ch_tensor_f32(&w, 1, (int64_t[]){L}, &seed, 0, 1);
  ch_tensor_i64(&sh, 1, &four, NULL);
  ch_tensor *a[] = {&x, &s, &w, &sh};
  ck_assert_int_eq(run(&sf, a, 4), 0);
  int64_t os[4] = {B, F, K, 2};
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ch_i(&sh)[i], os[i]);
  ch_tensor_f32(&o, 4, os, &seed, 0, 0);
  ch_tensor *b[] = {&x, &s, &w, &o};
  ck_assert_int_eq(run(&k, b, 4), 0);
  for (int bt = 0; bt < B; bt++)
    for (int f = 0; f < F; f++) {
      double xr[16], xi[16] = {0};
      for (int q = 0; q < L; q++) xr[q] = (double)ch_f(&x)[bt * S + f * step + q] * ch_f(&w)[q];
      for (int kk = 0; kk < K; kk++) {
        double re, im;
        ref_dft(xr, xi, L, L, kk, false, &re, &im);
        float *g = ch_f(&o) + ((bt * F + f) * K + kk) * 2;
        ck_assert_msg(fabs(g[0] - re) < 1e-5 && fabs(g[1] - im) < 1e-5, "frame %d bin %d: (%g, %g), want (%g, %g)", f,
                      kk, (double)g[0], (double)g[1], re, im);
      }
    }
  st = 0;
  memcpy(s.data, &st, 8);
  expect_error(&sf, a, 4, "stft", "frame_step");
  ch_tensor x2;
  ch_tensor_f32(&x2, 3, (int64_t[]){B, 5, 1}, &seed, -1, 1);
  st = 1;
  memcpy(s.data, &st, 8);
  ch_tensor *c[] = {&x2, &s, &w, &sh};
  expect_error(&sf, c, 4, "stft", "longer than the signal");
  prog_close(&sf), prog_close(&k);
  ch_tensor_free(&x), ch_tensor_free(&s), ch_tensor_free(&w), ch_tensor_free(&sh), ch_tensor_free(&o),
      ch_tensor_free(&x2);
}
END_TEST

START_TEST(test_mel_weight_matrix_builds_onnx_triangular_filters) {
  const char *t =
      "def @main(%n: Tensor[(), int64], %d: Tensor[(), int64], %r: Tensor[(), int64], %lo: Tensor[(), float32], "
      "%hi: Tensor[(), float32]) { mel_weight_matrix(%n, %d, %r, %lo, %hi) }\n";
  prog sf, k;
  prog_open(&sf, t, "fused.mel_weight_matrix", true);
  prog_open(&k, t, "fused.mel_weight_matrix", false);
  static const struct {
    int64_t bins, dft, rate;
    float lo, hi;
  } cases[] = {{8, 16, 8192, 0, 4096}, {5, 64, 16000, 30, 7000}, {3, 10, 1000, 100, 450}};
  for (int ci = 0; ci < 3; ci++) {
    ch_tensor tn, td, tr, tl, th, sh, o;
    int64_t two = 2, nb = cases[ci].bins, dft = cases[ci].dft, rate = cases[ci].rate, rows = dft / 2 + 1;
    ch_tensor_i64(&tn, 0, NULL, &nb);
    ch_tensor_i64(&td, 0, NULL, &dft);
    ch_tensor_i64(&tr, 0, NULL, &rate);
    f32_of(&tl, 0, NULL, &cases[ci].lo);
    f32_of(&th, 0, NULL, &cases[ci].hi);
    ch_tensor_i64(&sh, 1, &two, NULL);
    ch_tensor *a[] = {&tn, &td, &tr, &tl, &th, &sh};
    ck_assert_int_eq(run(&sf, a, 6), 0);
    ck_assert_int_eq(ch_i(&sh)[0], rows);
    ck_assert_int_eq(ch_i(&sh)[1], nb);
    ch_tensor_f32(&o, 2, (int64_t[]){rows, nb}, &(unsigned){1}, 0, 0);
    ch_tensor *b[] = {&tn, &td, &tr, &tl, &th, &o};
    ck_assert_int_eq(run(&k, b, 6), 0);
    /* ONNX's reference, in double. */
    double lm = 2595 * log10(1 + cases[ci].lo / 700.0), hm = 2595 * log10(1 + cases[ci].hi / 700.0);
    double step = (hm - lm) / (double)(nb + 2), want[64][16] = {{0}};
    int64_t f[32];
    for (int q = 0; q < nb + 2; q++)
      f[q] = (int64_t)floor((dft + 1) * (700 * (pow(10, (q * step + lm) / 2595) - 1)) / rate);
    for (int i = 0; i < nb; i++) {
      int64_t l = f[i], m = f[i + 1], h = f[i + 2];
      if (m == l) want[m][i] = 1;
      else
        for (int64_t j = l; j <= m; j++) want[j][i] = (double)(j - l) / (double)(m - l);
      if (h > m)
        for (int64_t j = m; j < h; j++) want[j][i] = (double)(h - j) / (double)(h - m);
    }
    for (int64_t j = 0; j < rows; j++)
      for (int i = 0; i < nb; i++)
        ck_assert_msg(fabs(ch_f(&o)[j * nb + i] - want[j][i]) < 1e-6, "case %d at (%lld, %d): %g, want %g", ci,
                      (long long)j, i, (double)ch_f(&o)[j * nb + i], want[j][i]);
    ch_tensor_free(&tn), ch_tensor_free(&td), ch_tensor_free(&tr), ch_tensor_free(&tl), ch_tensor_free(&th);
    ch_tensor_free(&sh), ch_tensor_free(&o);
  }
  prog_close(&sf), prog_close(&k);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("compute_dynops");
  TCase *tc = tcase_create("kernels");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_unsqueeze_and_squeeze_shapes_follow_the_axes_values);
  tcase_add_test(tc, test_tile_repeats_come_from_a_tensor_and_bad_repeats_fail);
  tcase_add_test(tc, test_pad_with_run_time_pads_matches_numpy_pad);
  tcase_add_test(tc, test_split_with_run_time_sizes_writes_each_part_and_checks_the_sum);
  tcase_add_test(tc, test_resize_matches_onnx_reference_in_every_mode);
  tcase_add_test(tc, test_tf_crop_and_resize_samples_the_roi_and_extrapolates_outside);
  tcase_add_test(tc, test_resize_with_bad_sizes_or_scales_fails_naming_the_op);
  tcase_add_test(tc, test_static_resize_keeps_axes_of_minus_one_and_copies_other_types_nearest);
  tcase_add_test(tc, test_nms_selects_like_a_greedy_reference_and_reports_its_count);
  tcase_add_test(tc, test_roi_align_averages_bilinear_samples_per_bin);
  tcase_add_test(tc, test_unique_matches_numpy_unique_with_and_without_axis);
  tcase_add_test(tc, test_one_hot_places_on_values_along_the_axis);
  tcase_add_test(tc, test_windows_match_their_cosine_formulas);
  tcase_add_test(tc, test_det_matches_double_precision_elimination);
  tcase_add_test(tc, test_max_pool_with_indices_gives_the_first_maximum_and_its_flat_index);
  tcase_add_test(tc, test_training_dropout_computes_ratio_zero_and_refuses_random_ratios);
  tcase_add_test(tc, test_dft_matches_a_double_precision_sum);
  tcase_add_test(tc, test_stft_frames_windows_and_transforms_the_signal);
  tcase_add_test(tc, test_mel_weight_matrix_builds_onnx_triangular_filters);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return nimble_test_run(suite()); }
