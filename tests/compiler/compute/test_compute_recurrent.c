/* lstm_scan's, gru_scan's and rnn_scan's kernels (compute/recurrent.c)
 * against the LSTM, GRU and RNN equations
 * written here in double (ONNX's LSTM: gates i, o, f, c; c' = f c + i
 * tanh(u), h' = o tanh(c'); with peepholes i and f add p_i c and p_f c,
 * o adds p_o c'), forward and reversed, for batches of 1 and 3,
 * no steps, and each way the kernel computes a step: through env->sgemm
 * (OpenBLAS here) and through its own loops (no sgemm: GPUs, runtimes
 * without BLAS). Also its shape function, and the run-time check that the
 * states' batch is xw's. gru_scan likewise (ONNX's GRU: gates z, r, h;
 * h~ = tanh(x_h + r (h R_h + rbh)) with linear_before_reset, else
 * tanh(x_h + (r h) R_h + rbh); h' = (1 - z) h~ + z h), each way of
 * linear_before_reset; rnn_scan (h' = tanh(x + h R)) too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble_test.h"

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

/* y [T, B, H], h and c [B, H] from xw [T, B, 4H], r [H, 4H], h0, c0, the
 * peepholes p [3H] (NULL: none) and the sequence lengths (NULL: none; an
 * entry past its length keeps h and c, and its y is 0). */
static void reference(int T, int B, int H, int reverse, const float *xw, const float *r, const float *h0,
                      const float *c0, const float *pp, const int64_t *lens, float *y, float *hT, float *cT) {
  double *h = malloc(sizeof(double) * (size_t)(B * H)), *c = malloc(sizeof(double) * (size_t)(B * H));
  double *g = malloc(sizeof(double) * (size_t)(4 * H));
  for (int i = 0; i < B * H; i++) h[i] = h0[i], c[i] = c0[i];
  for (int s = 0; s < T; s++) {
    int t = reverse ? T - 1 - s : s;
    for (int b = 0; b < B; b++) {
      if (lens && s >= lens[b]) {
        for (int j = 0; j < H; j++) y[((size_t)t * B + b) * H + j] = 0.0f;
        continue;
      }
      for (int q = 0; q < 4 * H; q++) {
        double acc = xw[((size_t)t * B + b) * 4 * H + q];
        for (int p = 0; p < H; p++) acc += h[b * H + p] * r[p * 4 * H + q];
        g[q] = acc;
      }
      for (int j = 0; j < H; j++) {
        double cp = c[b * H + j];
        double i = sig(g[j] + (pp ? pp[j] * cp : 0)), f = sig(g[2 * H + j] + (pp ? pp[2 * H + j] * cp : 0));
        c[b * H + j] = f * cp + i * tanh(g[3 * H + j]);
        h[b * H + j] = sig(g[H + j] + (pp ? pp[H + j] * c[b * H + j] : 0)) * tanh(c[b * H + j]);
        y[((size_t)t * B + b) * H + j] = (float)h[b * H + j];
      }
    }
  }
  for (int i = 0; i < B * H; i++) hT[i] = (float)h[i], cT[i] = (float)c[i];
  free(h);
  free(c);
  free(g);
}

typedef struct prog {
  nimble_arena *arena;
  ch_kernel k;
} prog;

/* h0's batch dim is `hb` ("b" as xw's, or "?"); with `peep` a fifth
 * input, the peepholes [3H], with `lens` then a sixth, the lengths. */
static void prog_open_h(prog *p, int H, int reverse, bool shape_func, const char *hb, bool peep, bool lens) {
  char text[768], pdecl[96];
  snprintf(pdecl, sizeof pdecl, ", %%p: Tensor[(%d,), float32]%s", 3 * H, lens ? ", %l: Tensor[(b,), int64]" : "");
  snprintf(text, sizeof text,
           "def @main(%%xw: Tensor[(?, b, %d), float32], %%r: Tensor[(%d, %d), float32], %%h0: Tensor[(%s, %d), "
           "float32], %%c0: Tensor[(b, %d), float32]%s) { lstm_scan(%%xw, %%r, %%h0, %%c0%s, reverse=%d) }\n",
           4 * H, H, 4 * H, hb, H, H, peep ? pdecl : "", peep ? (lens ? ", %p, %l" : ", %p") : "", reverse);
  NIMBLE_ASSERT_OK(nimble_arena_create(&p->arena));
  nimble_module *m = ch_compile_module(p->arena, text);
  ch_kernel_build(m, ch_find_primitive(m, "fused.lstm_scan"), shape_func, NULL, &p->k);
}

static void prog_open(prog *p, int H, int reverse, bool shape_func) {
  prog_open_h(p, H, reverse, shape_func, "b", false, false);
}

static void prog_close(prog *p) {
  ch_kernel_free(&p->k);
  nimble_arena_destroy(p->arena);
}

/* One case: the kernel with sgemm and without, against the reference. */
static void check_case_l(int T, int B, int H, int reverse, bool peep, const int64_t *lens, unsigned seed) {
  prog p;
  prog_open_h(&p, H, reverse, false, "b", peep || lens, lens != NULL);
  ch_tensor xw, r, h0, c0, pp, ln, y, hT, cT;
  ch_tensor_f32(&xw, 3, (int64_t[]){T, B, 4 * H}, &seed, -2, 2);
  ch_tensor_f32(&r, 2, (int64_t[]){H, 4 * H}, &seed, -0.4f, 0.4f);
  ch_tensor_f32(&h0, 2, (int64_t[]){B, H}, &seed, -1, 1);
  ch_tensor_f32(&c0, 2, (int64_t[]){B, H}, &seed, -1, 1);
  ch_tensor_f32(&pp, 1, (int64_t[]){3 * H}, &seed, -1, 1);
  if (lens && !peep) memset(pp.data, 0, pp.n * sizeof(float)); /* zeros: no peepholes, as the importer passes */
  ch_tensor_i64(&ln, 1, (int64_t[]){B}, lens);
  float *wy = calloc((size_t)(T * B * H) + 1, sizeof(float)), *wh = calloc((size_t)(B * H), sizeof(float)),
        *wc = calloc((size_t)(B * H), sizeof(float));
  reference(T, B, H, reverse, ch_f(&xw), ch_f(&r), ch_f(&h0), ch_f(&c0), peep ? ch_f(&pp) : NULL, lens, wy, wh, wc);
  for (int with_sgemm = 0; with_sgemm < 2; with_sgemm++) {
    ch_tensor_f32(&y, 3, (int64_t[]){T, B, H}, &seed, 9, 10); /* garbage the kernel must overwrite */
    ch_tensor_f32(&hT, 2, (int64_t[]){B, H}, &seed, 9, 10);
    ch_tensor_f32(&cT, 2, (int64_t[]){B, H}, &seed, 9, 10);
    ch_env e;
    ch_env_init(&e, with_sgemm);
    ch_tensor *a[] = {&xw, &r, &h0, &c0, &y, &hT, &cT}, *ap[] = {&xw, &r, &h0, &c0, &pp, &y, &hT, &cT},
              *al[] = {&xw, &r, &h0, &c0, &pp, &ln, &y, &hT, &cT};
    int rc = lens ? ch_call(&p.k, &e, al, 9) : peep ? ch_call(&p.k, &e, ap, 8) : ch_call(&p.k, &e, a, 7);
    ck_assert_msg(rc == 0, "T=%d B=%d H=%d: %s", T, B, H, e.error);
    char what[96];
    snprintf(what, sizeof what, "y (T=%d B=%d H=%d reverse=%d peep=%d lens=%d sgemm=%d)", T, B, H, reverse, peep,
             lens != NULL, with_sgemm);
    ch_assert_close(what, ch_f(&y), wy, (size_t)(T * B * H), 2e-6f, 2e-5f);
    ch_assert_close("h", ch_f(&hT), wh, (size_t)(B * H), 2e-6f, 2e-5f);
    ch_assert_close("c", ch_f(&cT), wc, (size_t)(B * H), 2e-6f, 2e-5f);
    ch_tensor_free(&y);
    ch_tensor_free(&hT);
    ch_tensor_free(&cT);
  }
  free(wy);
  free(wh);
  free(wc);
  ch_tensor *ins[] = {&xw, &r, &h0, &c0, &pp, &ln};
  for (int i = 0; i < 6; i++) ch_tensor_free(ins[i]);
  prog_close(&p);
}

static void check_case_p(int T, int B, int H, int reverse, bool peep, unsigned seed) {
  check_case_l(T, B, H, reverse, peep, NULL, seed);
}

static void check_case(int T, int B, int H, int reverse, unsigned seed) { check_case_p(T, B, H, reverse, false, seed); }

START_TEST(test_lstm_scan_follows_the_lstm_equations_step_by_step) {
  check_case(7, 1, 32, 0, 11);   /* the matrix-vector product, 2 vectors of units */
  check_case(5, 3, 20, 0, 12);   /* a batch; H not a multiple of the vector */
  check_case(6, 2, 16, 1, 13);   /* reversed: y[T-1] is the first step's h, h the last's (y[0]) */
  check_case(130, 1, 64, 0, 14); /* long enough for c and h to saturate if they were wrong */
}
END_TEST

START_TEST(test_lstm_scan_peepholes_see_the_previous_and_the_new_cell) {
  check_case_p(6, 2, 24, 0, true, 31);
  check_case_p(5, 1, 32, 1, true, 32);
}
END_TEST

START_TEST(test_lstm_scan_sequence_lengths_stop_each_entry_at_its_own) {
  /* Entries ending at 0 (h0 and c0 come back), in the middle, at T and
   * past it, with peepholes and without (zeros). */
  static const int64_t lens4[4] = {0, 3, 7, 9}, lens2[2] = {5, 1};
  check_case_l(7, 4, 16, 0, false, lens4, 41);
  check_case_l(6, 2, 24, 0, true, lens2, 42);
  check_case_l(0, 2, 24, 0, true, lens2, 43);
}
END_TEST

START_TEST(test_lstm_scan_without_steps_returns_the_initial_state) {
  check_case(0, 2, 8, 0, 21);
  check_case(0, 1, 8, 1, 22);
}
END_TEST

START_TEST(test_lstm_scan_shape_function_and_its_run_time_checks) {
  prog sf;
  prog_open(&sf, 8, 0, true);
  ch_tensor xw, r, h0, c0, s[3];
  unsigned seed = 5;
  ch_tensor_f32(&xw, 3, (int64_t[]){9, 2, 32}, &seed, -1, 1);
  ch_tensor_f32(&r, 2, (int64_t[]){8, 32}, &seed, -1, 1);
  ch_tensor_f32(&h0, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor_f32(&c0, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor_i64(&s[0], 1, (int64_t[]){3}, NULL);
  ch_tensor_i64(&s[1], 1, (int64_t[]){2}, NULL);
  ch_tensor_i64(&s[2], 1, (int64_t[]){2}, NULL);
  /* A data-independent shape function takes its inputs' shapes. */
  ch_tensor shx, shr, shh, shc;
  ch_tensor_i64(&shx, 1, (int64_t[]){3}, (int64_t[]){9, 2, 32});
  ch_tensor_i64(&shr, 1, (int64_t[]){2}, (int64_t[]){8, 32});
  ch_tensor_i64(&shh, 1, (int64_t[]){2}, (int64_t[]){2, 8});
  ch_tensor_i64(&shc, 1, (int64_t[]){2}, (int64_t[]){2, 8});
  ch_env e;
  ch_env_init(&e, false);
  ch_tensor *a[] = {&shx, &shr, &shh, &shc, &s[0], &s[1], &s[2]};
  ck_assert_msg(ch_call(&sf.k, &e, a, 7) == 0, "%s", e.error);
  int64_t want[3][3] = {{9, 2, 8}, {2, 8, 0}, {2, 8, 0}};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < (k ? 2 : 3); i++) ck_assert_int_eq(ch_i(&s[k])[i], want[k][i]);
  prog_close(&sf);
  /* The kernel checks the states against xw's batch at run time (h0's
   * batch is `?` in its type, so nothing else does). */
  prog p;
  prog_open_h(&p, 8, 0, false, "?", false, false);
  ch_tensor bad, y, hT, cT;
  ch_tensor_f32(&bad, 2, (int64_t[]){3, 8}, &seed, -1, 1);
  ch_tensor_f32(&y, 3, (int64_t[]){9, 2, 8}, &seed, -1, 1);
  ch_tensor_f32(&hT, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor_f32(&cT, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor *b[] = {&xw, &r, &bad, &c0, &y, &hT, &cT};
  ch_env_init(&e, true);
  ck_assert_int_ne(ch_call(&p.k, &e, b, 7), 0);
  ck_assert_msg(strstr(e.error, "lstm_scan: input 2's batch differs from xw's"), "message: %s", e.error);
  prog_close(&p);
  ch_tensor *all[] = {&xw, &r, &h0, &c0, &s[0], &s[1], &s[2], &bad, &y, &hT, &cT, &shx, &shr, &shh, &shc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ch_tensor_free(all[i]);
}
END_TEST

/* ---- gru_scan ------------------------------------------------------------------ */

/* y [T, B, H] and h [B, H] from xw [T, B, 3H], r [H, 3H], h0 [B, H], rbh
 * [H] and the lengths (NULL: none), in double. */
static void gru_reference(int T, int B, int H, int reverse, int lbr, const float *xw, const float *r,
                          const float *h0, const float *rbh, const int64_t *lens, float *y, float *hT) {
  double *h = malloc(sizeof(double) * (size_t)(B * H)), *z = malloc(sizeof(double) * (size_t)H),
         *rr = malloc(sizeof(double) * (size_t)H), *hn = malloc(sizeof(double) * (size_t)H);
  for (int i = 0; i < B * H; i++) h[i] = h0[i];
  for (int s = 0; s < T; s++) {
    int t = reverse ? T - 1 - s : s;
    for (int b = 0; b < B; b++) {
      const float *x = xw + ((size_t)t * B + b) * 3 * H;
      double *hb = h + b * H;
      if (lens && s >= lens[b]) {
        for (int j = 0; j < H; j++) y[((size_t)t * B + b) * H + j] = 0.0f;
        continue;
      }
      for (int j = 0; j < H; j++) {
        double gz = x[j], gr = x[H + j];
        for (int p = 0; p < H; p++) gz += hb[p] * r[p * 3 * H + j], gr += hb[p] * r[p * 3 * H + H + j];
        z[j] = sig(gz);
        rr[j] = sig(gr);
      }
      for (int j = 0; j < H; j++) {
        double acc = 0;
        for (int p = 0; p < H; p++) acc += (lbr ? hb[p] : rr[p] * hb[p]) * r[p * 3 * H + 2 * H + j];
        double hh = lbr ? tanh(x[2 * H + j] + rr[j] * (acc + rbh[j])) : tanh(x[2 * H + j] + acc + rbh[j]);
        hn[j] = (1 - z[j]) * hh + z[j] * hb[j];
      }
      for (int j = 0; j < H; j++) {
        hb[j] = hn[j];
        y[((size_t)t * B + b) * H + j] = (float)hn[j];
      }
    }
  }
  for (int i = 0; i < B * H; i++) hT[i] = (float)h[i];
  free(h);
  free(z);
  free(rr);
  free(hn);
}

/* h0's batch dim is `hb` ("b" as xw's, or "?"); with `lens` a fifth input. */
static void gru_open(prog *p, int H, int reverse, int lbr, bool shape_func, const char *hb, bool lens) {
  char text[768];
  snprintf(text, sizeof text,
           "def @main(%%xw: Tensor[(?, b, %d), float32], %%r: Tensor[(%d, %d), float32], %%h0: Tensor[(%s, %d), "
           "float32], %%rbh: Tensor[(%d,), float32]%s) { gru_scan(%%xw, %%r, %%h0, %%rbh%s, reverse=%d, "
           "linear_before_reset=%d) }\n",
           3 * H, H, 3 * H, hb, H, H, lens ? ", %l: Tensor[(b,), int64]" : "", lens ? ", %l" : "", reverse, lbr);
  NIMBLE_ASSERT_OK(nimble_arena_create(&p->arena));
  nimble_module *m = ch_compile_module(p->arena, text);
  ch_kernel_build(m, ch_find_primitive(m, "fused.gru_scan"), shape_func, NULL, &p->k);
}

/* One case: the kernel with sgemm and without, against the reference. */
static void gru_case(int T, int B, int H, int reverse, int lbr, const int64_t *lens, unsigned seed) {
  prog p;
  gru_open(&p, H, reverse, lbr, false, "b", lens != NULL);
  ch_tensor xw, r, h0, rbh, ln, y, hT;
  ch_tensor_f32(&xw, 3, (int64_t[]){T, B, 3 * H}, &seed, -2, 2);
  ch_tensor_f32(&r, 2, (int64_t[]){H, 3 * H}, &seed, -0.4f, 0.4f);
  ch_tensor_f32(&h0, 2, (int64_t[]){B, H}, &seed, -1, 1);
  ch_tensor_f32(&rbh, 1, (int64_t[]){H}, &seed, -1, 1);
  ch_tensor_i64(&ln, 1, (int64_t[]){B}, lens);
  float *wy = calloc((size_t)(T * B * H) + 1, sizeof(float)), *wh = calloc((size_t)(B * H), sizeof(float));
  gru_reference(T, B, H, reverse, lbr, ch_f(&xw), ch_f(&r), ch_f(&h0), ch_f(&rbh), lens, wy, wh);
  for (int with_sgemm = 0; with_sgemm < 2; with_sgemm++) {
    ch_tensor_f32(&y, 3, (int64_t[]){T, B, H}, &seed, 9, 10); /* garbage the kernel must overwrite */
    ch_tensor_f32(&hT, 2, (int64_t[]){B, H}, &seed, 9, 10);
    ch_env e;
    ch_env_init(&e, with_sgemm);
    ch_tensor *a[] = {&xw, &r, &h0, &rbh, &y, &hT}, *al[] = {&xw, &r, &h0, &rbh, &ln, &y, &hT};
    int rc = lens ? ch_call(&p.k, &e, al, 7) : ch_call(&p.k, &e, a, 6);
    ck_assert_msg(rc == 0, "T=%d B=%d H=%d: %s", T, B, H, e.error);
    char what[112];
    snprintf(what, sizeof what, "y (T=%d B=%d H=%d reverse=%d lbr=%d lens=%d sgemm=%d)", T, B, H, reverse, lbr,
             lens != NULL, with_sgemm);
    ch_assert_close(what, ch_f(&y), wy, (size_t)(T * B * H), 2e-6f, 2e-5f);
    snprintf(what, sizeof what, "h (T=%d B=%d H=%d reverse=%d lbr=%d lens=%d sgemm=%d)", T, B, H, reverse, lbr,
             lens != NULL, with_sgemm);
    ch_assert_close(what, ch_f(&hT), wh, (size_t)(B * H), 2e-6f, 2e-5f);
    ch_tensor_free(&y);
    ch_tensor_free(&hT);
  }
  free(wy);
  free(wh);
  ch_tensor *ins[] = {&xw, &r, &h0, &rbh, &ln};
  for (int i = 0; i < 5; i++) ch_tensor_free(ins[i]);
  prog_close(&p);
}

START_TEST(test_gru_scan_follows_the_gru_equations_either_way_of_resetting) {
  for (int lbr = 0; lbr < 2; lbr++) {
    gru_case(7, 1, 32, 0, lbr, NULL, 51 + lbr);    /* the matrix-vector product, 2 vectors of units */
    gru_case(5, 3, 20, 0, lbr, NULL, 53 + lbr);    /* a batch; H not a multiple of the vector */
    gru_case(6, 2, 16, 1, lbr, NULL, 55 + lbr);    /* reversed */
    gru_case(130, 1, 64, 0, lbr, NULL, 57 + lbr);  /* long enough to drift if a step were wrong */
  }
}
END_TEST

START_TEST(test_gru_scan_sequence_lengths_and_no_steps) {
  /* Entries ending at 0 (h0 comes back), in the middle, at T and past it;
   * no steps at all: h is h0. */
  static const int64_t lens4[4] = {0, 3, 7, 9}, lens2[2] = {5, 1};
  for (int lbr = 0; lbr < 2; lbr++) {
    gru_case(7, 4, 16, 0, lbr, lens4, 61 + lbr);
    gru_case(0, 2, 24, 0, lbr, lens2, 63 + lbr);
    gru_case(0, 2, 8, 1, lbr, NULL, 65 + lbr);
  }
}
END_TEST

START_TEST(test_gru_scan_shape_function_and_its_run_time_checks) {
  prog sf;
  gru_open(&sf, 8, 0, 1, true, "b", false);
  ch_tensor s[2], shx, shr, shh, shb;
  ch_tensor_i64(&s[0], 1, (int64_t[]){3}, NULL);
  ch_tensor_i64(&s[1], 1, (int64_t[]){2}, NULL);
  ch_tensor_i64(&shx, 1, (int64_t[]){3}, (int64_t[]){9, 2, 24});
  ch_tensor_i64(&shr, 1, (int64_t[]){2}, (int64_t[]){8, 24});
  ch_tensor_i64(&shh, 1, (int64_t[]){2}, (int64_t[]){2, 8});
  ch_tensor_i64(&shb, 1, (int64_t[]){1}, (int64_t[]){8});
  ch_env e;
  ch_env_init(&e, false);
  ch_tensor *a[] = {&shx, &shr, &shh, &shb, &s[0], &s[1]};
  ck_assert_msg(ch_call(&sf.k, &e, a, 6) == 0, "%s", e.error);
  int64_t want[2][3] = {{9, 2, 8}, {2, 8, 0}};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? 2 : 3); i++) ck_assert_int_eq(ch_i(&s[k])[i], want[k][i]);
  prog_close(&sf);
  /* h0's batch is `?` in its type: the kernel checks it against xw's. */
  prog p;
  gru_open(&p, 8, 0, 0, false, "?", false);
  unsigned seed = 7;
  ch_tensor xw, r, bad, rbh, y, hT;
  ch_tensor_f32(&xw, 3, (int64_t[]){9, 2, 24}, &seed, -1, 1);
  ch_tensor_f32(&r, 2, (int64_t[]){8, 24}, &seed, -1, 1);
  ch_tensor_f32(&bad, 2, (int64_t[]){3, 8}, &seed, -1, 1);
  ch_tensor_f32(&rbh, 1, (int64_t[]){8}, &seed, -1, 1);
  ch_tensor_f32(&y, 3, (int64_t[]){9, 2, 8}, &seed, -1, 1);
  ch_tensor_f32(&hT, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor *b[] = {&xw, &r, &bad, &rbh, &y, &hT};
  ch_env_init(&e, true);
  ck_assert_int_ne(ch_call(&p.k, &e, b, 6), 0);
  ck_assert_msg(strstr(e.error, "gru_scan: h0's batch differs from xw's"), "message: %s", e.error);
  prog_close(&p);
  ch_tensor *all[] = {&s[0], &s[1], &shx, &shr, &shh, &shb, &xw, &r, &bad, &rbh, &y, &hT};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ch_tensor_free(all[i]);
}
END_TEST

/* ---- rnn_scan ------------------------------------------------------------------ */

/* y [T, B, H] and h [B, H] of h' = tanh(xw + h r), in double. */
static void rnn_reference(int T, int B, int H, int reverse, const float *xw, const float *r, const float *h0,
                          const int64_t *lens, float *y, float *hT) {
  double *h = malloc(sizeof(double) * (size_t)(B * H)), *hn = malloc(sizeof(double) * (size_t)H);
  for (int i = 0; i < B * H; i++) h[i] = h0[i];
  for (int s = 0; s < T; s++) {
    int t = reverse ? T - 1 - s : s;
    for (int b = 0; b < B; b++) {
      if (lens && s >= lens[b]) {
        for (int j = 0; j < H; j++) y[((size_t)t * B + b) * H + j] = 0.0f;
        continue;
      }
      for (int j = 0; j < H; j++) {
        double acc = xw[((size_t)t * B + b) * H + j];
        for (int p = 0; p < H; p++) acc += h[b * H + p] * r[p * H + j];
        hn[j] = tanh(acc);
      }
      for (int j = 0; j < H; j++) {
        h[b * H + j] = hn[j];
        y[((size_t)t * B + b) * H + j] = (float)hn[j];
      }
    }
  }
  for (int i = 0; i < B * H; i++) hT[i] = (float)h[i];
  free(h);
  free(hn);
}

static void rnn_open(prog *p, int H, int reverse, bool shape_func, const char *hb, bool lens) {
  char text[768];
  snprintf(text, sizeof text,
           "def @main(%%xw: Tensor[(?, b, %d), float32], %%r: Tensor[(%d, %d), float32], %%h0: Tensor[(%s, %d), "
           "float32]%s) { rnn_scan(%%xw, %%r, %%h0%s, reverse=%d) }\n",
           H, H, H, hb, H, lens ? ", %l: Tensor[(b,), int64]" : "", lens ? ", %l" : "", reverse);
  NIMBLE_ASSERT_OK(nimble_arena_create(&p->arena));
  nimble_module *m = ch_compile_module(p->arena, text);
  ch_kernel_build(m, ch_find_primitive(m, "fused.rnn_scan"), shape_func, NULL, &p->k);
}

static void rnn_case(int T, int B, int H, int reverse, const int64_t *lens, unsigned seed) {
  prog p;
  rnn_open(&p, H, reverse, false, "b", lens != NULL);
  ch_tensor xw, r, h0, ln, y, hT;
  ch_tensor_f32(&xw, 3, (int64_t[]){T, B, H}, &seed, -2, 2);
  /* r's spectral radius under 1 (about 0.8 / sqrt(3)): with nothing
   * gating it, a larger one amplifies the rounding of every step (130
   * steps drifted 1e-4 apart from the double reference). */
  float ra = 0.8f / sqrtf((float)H);
  ch_tensor_f32(&r, 2, (int64_t[]){H, H}, &seed, -ra, ra);
  ch_tensor_f32(&h0, 2, (int64_t[]){B, H}, &seed, -1, 1);
  ch_tensor_i64(&ln, 1, (int64_t[]){B}, lens);
  float *wy = calloc((size_t)(T * B * H) + 1, sizeof(float)), *wh = calloc((size_t)(B * H), sizeof(float));
  rnn_reference(T, B, H, reverse, ch_f(&xw), ch_f(&r), ch_f(&h0), lens, wy, wh);
  for (int with_sgemm = 0; with_sgemm < 2; with_sgemm++) {
    ch_tensor_f32(&y, 3, (int64_t[]){T, B, H}, &seed, 9, 10); /* garbage the kernel must overwrite */
    ch_tensor_f32(&hT, 2, (int64_t[]){B, H}, &seed, 9, 10);
    ch_env e;
    ch_env_init(&e, with_sgemm);
    ch_tensor *a[] = {&xw, &r, &h0, &y, &hT}, *al[] = {&xw, &r, &h0, &ln, &y, &hT};
    int rc = lens ? ch_call(&p.k, &e, al, 6) : ch_call(&p.k, &e, a, 5);
    ck_assert_msg(rc == 0, "T=%d B=%d H=%d: %s", T, B, H, e.error);
    char what[112];
    snprintf(what, sizeof what, "y (T=%d B=%d H=%d reverse=%d lens=%d sgemm=%d)", T, B, H, reverse, lens != NULL,
             with_sgemm);
    ch_assert_close(what, ch_f(&y), wy, (size_t)(T * B * H), 2e-6f, 2e-5f);
    snprintf(what, sizeof what, "h (T=%d B=%d H=%d reverse=%d lens=%d sgemm=%d)", T, B, H, reverse, lens != NULL,
             with_sgemm);
    ch_assert_close(what, ch_f(&hT), wh, (size_t)(B * H), 2e-6f, 2e-5f);
    ch_tensor_free(&y);
    ch_tensor_free(&hT);
  }
  free(wy);
  free(wh);
  ch_tensor *ins[] = {&xw, &r, &h0, &ln};
  for (int i = 0; i < 4; i++) ch_tensor_free(ins[i]);
  prog_close(&p);
}

START_TEST(test_rnn_scan_follows_the_rnn_equation) {
  static const int64_t lens4[4] = {0, 3, 7, 9};
  rnn_case(7, 1, 32, 0, NULL, 71);   /* the matrix-vector product */
  rnn_case(5, 3, 20, 0, NULL, 72);   /* a batch; H not a multiple of the vector */
  rnn_case(6, 2, 16, 1, NULL, 73);   /* reversed */
  rnn_case(130, 1, 64, 0, NULL, 74); /* many steps */
  rnn_case(7, 4, 16, 0, lens4, 75);  /* lengths 0, in the middle, T, past T */
  rnn_case(0, 2, 8, 0, lens4, 76);   /* no steps: h is h0 */
  rnn_case(0, 1, 8, 1, NULL, 77);
}
END_TEST

START_TEST(test_rnn_scan_shape_function_and_its_run_time_checks) {
  prog sf;
  rnn_open(&sf, 8, 0, true, "b", false);
  ch_tensor s[2], shx, shr, shh;
  ch_tensor_i64(&s[0], 1, (int64_t[]){3}, NULL);
  ch_tensor_i64(&s[1], 1, (int64_t[]){2}, NULL);
  ch_tensor_i64(&shx, 1, (int64_t[]){3}, (int64_t[]){9, 2, 8});
  ch_tensor_i64(&shr, 1, (int64_t[]){2}, (int64_t[]){8, 8});
  ch_tensor_i64(&shh, 1, (int64_t[]){2}, (int64_t[]){2, 8});
  ch_env e;
  ch_env_init(&e, false);
  ch_tensor *a[] = {&shx, &shr, &shh, &s[0], &s[1]};
  ck_assert_msg(ch_call(&sf.k, &e, a, 5) == 0, "%s", e.error);
  int64_t want[2][3] = {{9, 2, 8}, {2, 8, 0}};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < (k ? 2 : 3); i++) ck_assert_int_eq(ch_i(&s[k])[i], want[k][i]);
  prog_close(&sf);
  prog p;
  rnn_open(&p, 8, 0, false, "?", false);
  unsigned seed = 9;
  ch_tensor xw, r, bad, y, hT;
  ch_tensor_f32(&xw, 3, (int64_t[]){9, 2, 8}, &seed, -1, 1);
  ch_tensor_f32(&r, 2, (int64_t[]){8, 8}, &seed, -1, 1);
  ch_tensor_f32(&bad, 2, (int64_t[]){3, 8}, &seed, -1, 1);
  ch_tensor_f32(&y, 3, (int64_t[]){9, 2, 8}, &seed, -1, 1);
  ch_tensor_f32(&hT, 2, (int64_t[]){2, 8}, &seed, -1, 1);
  ch_tensor *b[] = {&xw, &r, &bad, &y, &hT};
  ch_env_init(&e, true);
  ck_assert_int_ne(ch_call(&p.k, &e, b, 5), 0);
  ck_assert_msg(strstr(e.error, "rnn_scan: h0's batch differs from xw's"), "message: %s", e.error);
  prog_close(&p);
  ch_tensor *all[] = {&s[0], &s[1], &shx, &shr, &shh, &xw, &r, &bad, &y, &hT};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ch_tensor_free(all[i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("compute_recurrent");
  TCase *tc = tcase_create("lstm_scan");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_lstm_scan_follows_the_lstm_equations_step_by_step);
  tcase_add_test(tc, test_lstm_scan_peepholes_see_the_previous_and_the_new_cell);
  tcase_add_test(tc, test_lstm_scan_sequence_lengths_stop_each_entry_at_its_own);
  tcase_add_test(tc, test_lstm_scan_without_steps_returns_the_initial_state);
  tcase_add_test(tc, test_lstm_scan_shape_function_and_its_run_time_checks);
  suite_add_tcase(s, tc);
  TCase *tg = tcase_create("gru_scan");
  tcase_set_timeout(tg, 300);
  tcase_add_test(tg, test_gru_scan_follows_the_gru_equations_either_way_of_resetting);
  tcase_add_test(tg, test_gru_scan_sequence_lengths_and_no_steps);
  tcase_add_test(tg, test_gru_scan_shape_function_and_its_run_time_checks);
  suite_add_tcase(s, tg);
  TCase *tr = tcase_create("rnn_scan");
  tcase_set_timeout(tr, 300);
  tcase_add_test(tr, test_rnn_scan_follows_the_rnn_equation);
  tcase_add_test(tr, test_rnn_scan_shape_function_and_its_run_time_checks);
  suite_add_tcase(s, tr);
  return nimble_test_run(s);
}
