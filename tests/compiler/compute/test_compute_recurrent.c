/* lstm_scan's, gru_scan's and rnn_scan's kernel (compute/recurrent.c)
 * against the LSTM, GRU and RNN equations written here in double: ONNX's
 * LSTM (gates i, o, f, c; c' = f c + i tanh(u), h' = o tanh(c'); with
 * peepholes i and f add p_i c and p_f c, o adds p_o c'), GRU (gates z, r,
 * h; h~ = tanh(x_h + r (h R_h + rbh)) with linear_before_reset, else
 * tanh(x_h + (r h) R_h + rbh); h' = (1 - z) h~ + z h) and RNN (h' =
 * tanh(x + h R)). Forward, reversed and both directions at once (one
 * task each: also on two threads, and with the tasks run in reverse
 * order, so a direction writing into the other's scratch or outputs
 * fails), batches of 1 to 4, no steps, sequence lengths, and each way the
 * kernel computes a step: through env->sgemm (OpenBLAS here) and through
 * its own loops (no sgemm: GPUs, runtimes without BLAS). Also the shape
 * function and the run-time check that h0's batch is xw's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_harness.h"
#include "nimble_test.h"

typedef enum { LSTM, GRU, RNN } cell;

static const char *const kOp[3] = {"lstm_scan", "gru_scan", "rnn_scan"};
static const int kGates[3] = {4, 3, 1};

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

/* One case's sizes and options. */
typedef struct rcase {
  cell k;
  int T, B, D, H;
  int reverse; /* D == 1 only */
  int lbr;     /* GRU */
  bool peep;   /* LSTM: the peepholes given */
  const int64_t *lens;
} rcase;

/* Direction d of the case in double: xw [T, B, D, G], r [D, H, G], h0
 * and c0 [D, B, H], p [D, 3H], rbh [D, H] -> y [T, D, B, H], hT and cT
 * [D, B, H]. An entry past its length keeps h and c, and its y is 0. */
static void reference_direction(const rcase *q, int d, const float *xw, const float *r, const float *h0,
                                const float *c0, const float *p, const float *rbh, float *y, float *hT, float *cT) {
  int T = q->T, B = q->B, D = q->D, H = q->H, G = kGates[q->k] * H;
  bool rev = q->D == 2 ? d == 1 : q->reverse;
  const float *rd = r + (size_t)d * H * G;
  double *h = malloc(sizeof(double) * (size_t)(B * H)), *cs = malloc(sizeof(double) * (size_t)(B * H));
  double *g = malloc(sizeof(double) * (size_t)G), *hn = malloc(sizeof(double) * (size_t)H),
         *rr = malloc(sizeof(double) * (size_t)H);
  for (int i = 0; i < B * H; i++) h[i] = h0[d * B * H + i], cs[i] = c0 ? c0[d * B * H + i] : 0;
  for (int s = 0; s < T; s++) {
    int t = rev ? T - 1 - s : s;
    for (int b = 0; b < B; b++) {
      float *yr = y + (((size_t)t * D + d) * B + b) * H;
      const float *x = xw + (((size_t)t * B + b) * D + d) * G;
      double *hb = h + b * H, *cb = cs + b * H;
      if (q->lens && s >= q->lens[b]) {
        for (int j = 0; j < H; j++) yr[j] = 0.0f;
        continue;
      }
      for (int col = 0; col < G; col++) {
        double acc = x[col];
        for (int k = 0; k < H; k++) acc += hb[k] * rd[k * G + col];
        g[col] = acc;
      }
      for (int j = 0; j < H; j++) {
        if (q->k == LSTM) {
          const float *pd = p ? p + d * 3 * H : NULL;
          double cp = cb[j];
          double i = sig(g[j] + (pd ? pd[j] * cp : 0)), f = sig(g[2 * H + j] + (pd ? pd[2 * H + j] * cp : 0));
          cb[j] = f * cp + i * tanh(g[3 * H + j]);
          hn[j] = sig(g[H + j] + (pd ? pd[H + j] * cb[j] : 0)) * tanh(cb[j]);
        } else if (q->k == RNN) {
          hn[j] = tanh(g[j]);
        } else {
          rr[j] = sig(g[H + j]);
        }
      }
      if (q->k == GRU)
        for (int j = 0; j < H; j++) {
          const float *rb = rbh + d * H;
          double hh;
          if (q->lbr) {
            hh = tanh(x[2 * H + j] + rr[j] * (g[2 * H + j] - x[2 * H + j] + rb[j]));
          } else {
            double acc = 0;
            for (int k = 0; k < H; k++) acc += rr[k] * hb[k] * rd[k * G + 2 * H + j];
            hh = tanh(x[2 * H + j] + acc + rb[j]);
          }
          double z = sig(g[j]);
          hn[j] = (1 - z) * hh + z * hb[j];
        }
      for (int j = 0; j < H; j++) {
        hb[j] = hn[j];
        yr[j] = (float)hn[j];
      }
    }
  }
  for (int i = 0; i < B * H; i++) {
    hT[d * B * H + i] = (float)h[i];
    if (cT) cT[d * B * H + i] = (float)cs[i];
  }
  free(h);
  free(cs);
  free(g);
  free(hn);
  free(rr);
}

typedef struct prog {
  nimble_arena *arena;
  ch_kernel k;
} prog;

/* The case's program; h0's batch dim is `hb` ("b" as xw's, or "?"). */
static void prog_open(prog *pg, const rcase *q, bool shape_func, const char *hb) {
  int H = q->H, D = q->D, G = kGates[q->k] * H;
  char text[1024], extra[256] = "", args[64] = "", attrs[64];
  size_t n = 0;
  if (q->k == LSTM) {
    n += (size_t)snprintf(extra + n, sizeof extra - n, ", %%c0: Tensor[(%d, b, %d), float32]", D, H);
    strcat(args, ", %c0");
    if (q->peep || q->lens) {
      n += (size_t)snprintf(extra + n, sizeof extra - n, ", %%p: Tensor[(%d, %d), float32]", D, 3 * H);
      strcat(args, ", %p");
    }
  }
  if (q->k == GRU) {
    n += (size_t)snprintf(extra + n, sizeof extra - n, ", %%rbh: Tensor[(%d, %d), float32]", D, H);
    strcat(args, ", %rbh");
  }
  if (q->lens) {
    snprintf(extra + n, sizeof extra - n, ", %%l: Tensor[(b,), int64]");
    strcat(args, ", %l");
  }
  if (q->k == GRU) snprintf(attrs, sizeof attrs, "reverse=%d, linear_before_reset=%d", q->reverse, q->lbr);
  else snprintf(attrs, sizeof attrs, "reverse=%d", q->reverse);
  snprintf(text, sizeof text,
           "def @main(%%xw: Tensor[(?, b, %d, %d), float32], %%r: Tensor[(%d, %d, %d), float32], %%h0: Tensor[(%d, %s, "
           "%d), float32]%s) { %s(%%xw, %%r, %%h0%s, %s) }\n",
           D, G, D, H, G, D, hb, H, extra, kOp[q->k], args, attrs);
  NIMBLE_ASSERT_OK(nimble_arena_create(&pg->arena));
  nimble_module *m = ch_compile_module(pg->arena, text);
  char prim[32];
  snprintf(prim, sizeof prim, "fused.%s", kOp[q->k]);
  ch_kernel_build(m, ch_find_primitive(m, prim), shape_func, NULL, &pg->k);
}

static void prog_close(prog *pg) {
  ch_kernel_free(&pg->k);
  nimble_arena_destroy(pg->arena);
}

/* The ways to run a case: without sgemm, with it, and with both
 * directions' tasks on two threads or in reverse order. */
enum { RUN_OWN, RUN_SGEMM, RUN_THREADS, RUN_REVERSED, RUN_MODES };

/* One case, every way, against the reference. */
static void check(const rcase *q, unsigned seed) {
  int T = q->T, B = q->B, D = q->D, H = q->H, G = kGates[q->k] * H;
  prog pg;
  prog_open(&pg, q, false, "b");
  ch_tensor xw, r, h0, c0, pp, rbh, ln, y, hT, cT;
  ch_tensor_f32(&xw, 4, (int64_t[]){T, B, D, G}, &seed, -2, 2);
  /* R's scale keeps the RNN's steps contracting: with nothing gating
   * them, a spectral radius over 1 amplifies every step's rounding (130
   * steps drifted 1e-4 from the double reference). */
  float ra = q->k == RNN ? 0.8f / sqrtf((float)H) : 0.4f;
  ch_tensor_f32(&r, 3, (int64_t[]){D, H, G}, &seed, -ra, ra);
  ch_tensor_f32(&h0, 3, (int64_t[]){D, B, H}, &seed, -1, 1);
  ch_tensor_f32(&c0, 3, (int64_t[]){D, B, H}, &seed, -1, 1);
  ch_tensor_f32(&pp, 2, (int64_t[]){D, 3 * H}, &seed, -1, 1);
  if (!q->peep) memset(pp.data, 0, pp.n * sizeof(float)); /* zeros: no peepholes, as the importer passes */
  ch_tensor_f32(&rbh, 2, (int64_t[]){D, H}, &seed, -1, 1);
  ch_tensor_i64(&ln, 1, (int64_t[]){B}, q->lens);
  size_t ny = (size_t)T * D * B * H, ns = (size_t)D * B * H;
  float *wy = calloc(ny + 1, sizeof(float)), *wh = calloc(ns, sizeof(float)), *wc = calloc(ns, sizeof(float));
  for (int d = 0; d < D; d++)
    reference_direction(q, d, ch_f(&xw), ch_f(&r), ch_f(&h0), q->k == LSTM ? ch_f(&c0) : NULL,
                        q->peep ? ch_f(&pp) : NULL, ch_f(&rbh), wy, wh, q->k == LSTM ? wc : NULL);
  for (int mode = 0; mode < RUN_MODES; mode++) {
    if (mode >= RUN_THREADS && D == 1) break;
    ch_tensor_f32(&y, 4, (int64_t[]){T, D, B, H}, &seed, 9, 10); /* garbage the kernel must overwrite */
    ch_tensor_f32(&hT, 3, (int64_t[]){D, B, H}, &seed, 9, 10);
    ch_tensor_f32(&cT, 3, (int64_t[]){D, B, H}, &seed, 9, 10);
    ch_env e;
    ch_env_init(&e, mode != RUN_OWN);
    if (mode == RUN_THREADS) ch_env_threads(&e, 2);
    if (mode == RUN_REVERSED) ch_env_threads_reversed(&e, 2);
    ch_tensor *a[10];
    int na = 0;
    a[na++] = &xw;
    a[na++] = &r;
    a[na++] = &h0;
    if (q->k == LSTM) {
      a[na++] = &c0;
      if (q->peep || q->lens) a[na++] = &pp;
    }
    if (q->k == GRU) a[na++] = &rbh;
    if (q->lens) a[na++] = &ln;
    a[na++] = &y;
    a[na++] = &hT;
    if (q->k == LSTM) a[na++] = &cT;
    int rc = ch_call(&pg.k, &e, a, na);
    char what[160];
    snprintf(what, sizeof what, "%s T=%d B=%d D=%d H=%d reverse=%d lbr=%d peep=%d lens=%d mode=%d", kOp[q->k], T, B,
             D, H, q->reverse, q->lbr, q->peep, q->lens != NULL, mode);
    ck_assert_msg(rc == 0, "%s: %s", what, e.error);
    if (D == 2 && mode != RUN_OWN) ck_assert_msg(e.tasks >= 2, "%s: the directions ran as %ld tasks", what, e.tasks);
    char part[200];
    snprintf(part, sizeof part, "y (%s)", what);
    ch_assert_close(part, ch_f(&y), wy, ny, 2e-6f, 2e-5f);
    snprintf(part, sizeof part, "h (%s)", what);
    ch_assert_close(part, ch_f(&hT), wh, ns, 2e-6f, 2e-5f);
    if (q->k == LSTM) {
      snprintf(part, sizeof part, "c (%s)", what);
      ch_assert_close(part, ch_f(&cT), wc, ns, 2e-6f, 2e-5f);
    }
    ch_tensor_free(&y);
    ch_tensor_free(&hT);
    ch_tensor_free(&cT);
  }
  free(wy);
  free(wh);
  free(wc);
  ch_tensor *ins[] = {&xw, &r, &h0, &c0, &pp, &rbh, &ln};
  for (int i = 0; i < 7; i++) ch_tensor_free(ins[i]);
  prog_close(&pg);
}

static void check_sizes(cell k, int lbr, unsigned seed) {
  rcase q[] = {
      {k, 7, 1, 1, 32, 0, lbr, false, NULL},  /* the matrix-vector product, 2 vectors of units */
      {k, 5, 3, 1, 20, 0, lbr, false, NULL},  /* a batch; H not a multiple of the vector */
      {k, 6, 2, 1, 16, 1, lbr, false, NULL},  /* reversed: y[T-1] is the first step's h, h the last's (y[0]) */
      {k, 130, 1, 1, 64, 0, lbr, false, NULL}, /* long enough to drift if a step were wrong */
      {k, 9, 1, 2, 32, 0, lbr, false, NULL},  /* both directions, one task each */
      {k, 4, 3, 2, 20, 0, lbr, false, NULL},
  };
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) check(&q[i], seed + (unsigned)i);
}

START_TEST(test_lstm_scan_follows_the_lstm_equations_step_by_step) { check_sizes(LSTM, 0, 11); }
END_TEST

START_TEST(test_lstm_scan_peepholes_see_the_previous_and_the_new_cell) {
  rcase q[] = {{LSTM, 6, 2, 1, 24, 0, 0, true, NULL}, {LSTM, 5, 1, 1, 32, 1, 0, true, NULL},
               {LSTM, 5, 2, 2, 16, 0, 0, true, NULL}};
  for (size_t i = 0; i < 3; i++) check(&q[i], 31 + (unsigned)i);
}
END_TEST

START_TEST(test_gru_scan_follows_the_gru_equations_either_way_of_resetting) {
  check_sizes(GRU, 0, 51);
  check_sizes(GRU, 1, 61);
}
END_TEST

START_TEST(test_rnn_scan_follows_the_rnn_equation) { check_sizes(RNN, 0, 71); }
END_TEST

START_TEST(test_sequence_lengths_stop_each_entry_at_its_own) {
  /* Entries ending at 0 (h0 and c0 come back), in the middle, at T and
   * past it; with peepholes and without (zeros); no steps at all. */
  static const int64_t lens4[4] = {0, 3, 7, 9}, lens2[2] = {5, 1};
  rcase q[] = {{LSTM, 7, 4, 1, 16, 0, 0, false, lens4}, {LSTM, 6, 2, 1, 24, 0, 0, true, lens2},
               {LSTM, 0, 2, 1, 24, 0, 0, true, lens2},  {GRU, 7, 4, 1, 16, 0, 0, false, lens4},
               {GRU, 7, 4, 1, 16, 0, 1, false, lens4},  {GRU, 0, 2, 1, 24, 0, 1, false, lens2},
               {RNN, 7, 4, 1, 16, 0, 0, false, lens4},  {RNN, 0, 2, 1, 8, 0, 0, false, lens2}};
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) check(&q[i], 41 + (unsigned)i);
}
END_TEST

START_TEST(test_without_steps_the_initial_state_comes_back) {
  for (int k = 0; k < 3; k++) {
    rcase q[] = {{(cell)k, 0, 2, 1, 8, 0, 0, false, NULL}, {(cell)k, 0, 1, 1, 8, 1, 1, false, NULL},
                 {(cell)k, 0, 2, 2, 8, 0, 0, false, NULL}};
    for (size_t i = 0; i < 3; i++) check(&q[i], 21 + (unsigned)(3 * k + (int)i));
  }
}
END_TEST

START_TEST(test_shape_functions_and_the_run_time_batch_check) {
  for (int k = 0; k < 3; k++) {
    rcase q = {(cell)k, 9, 2, 2, 8, 0, 0, false, NULL};
    int G = kGates[k] * 8;
    prog sf;
    prog_open(&sf, &q, true, "b");
    ch_tensor s[3], shx, shr, shh, shc, shb;
    ch_tensor_i64(&s[0], 1, (int64_t[]){4}, NULL);
    ch_tensor_i64(&s[1], 1, (int64_t[]){3}, NULL);
    ch_tensor_i64(&s[2], 1, (int64_t[]){3}, NULL);
    /* A data-independent shape function takes its inputs' shapes. */
    ch_tensor_i64(&shx, 1, (int64_t[]){4}, (int64_t[]){9, 2, 2, G});
    ch_tensor_i64(&shr, 1, (int64_t[]){3}, (int64_t[]){2, 8, G});
    ch_tensor_i64(&shh, 1, (int64_t[]){3}, (int64_t[]){2, 2, 8});
    ch_tensor_i64(&shc, 1, (int64_t[]){3}, (int64_t[]){2, 2, 8});
    ch_tensor_i64(&shb, 1, (int64_t[]){2}, (int64_t[]){2, 8});
    ch_env e;
    ch_env_init(&e, false);
    ch_tensor *a[8];
    int na = 0, nout = k == LSTM ? 3 : 2;
    a[na++] = &shx;
    a[na++] = &shr;
    a[na++] = &shh;
    if (k == LSTM) a[na++] = &shc;
    if (k == GRU) a[na++] = &shb;
    for (int i = 0; i < nout; i++) a[na++] = &s[i];
    ck_assert_msg(ch_call(&sf.k, &e, a, na) == 0, "%s: %s", kOp[k], e.error);
    int64_t want[3][4] = {{9, 2, 2, 8}, {2, 2, 8, 0}, {2, 2, 8, 0}};
    for (int o = 0; o < nout; o++)
      for (int i = 0; i < (o ? 3 : 4); i++) ck_assert_int_eq(ch_i(&s[o])[i], want[o][i]);
    prog_close(&sf);
    /* h0's batch is `?` in its type: the kernel checks it against xw's. */
    prog pg;
    prog_open(&pg, &q, false, "?");
    unsigned seed = 5;
    ch_tensor xw, r, bad, c0, rbh, y, hT, cT;
    ch_tensor_f32(&xw, 4, (int64_t[]){9, 2, 2, G}, &seed, -1, 1);
    ch_tensor_f32(&r, 3, (int64_t[]){2, 8, G}, &seed, -1, 1);
    ch_tensor_f32(&bad, 3, (int64_t[]){2, 3, 8}, &seed, -1, 1);
    ch_tensor_f32(&c0, 3, (int64_t[]){2, 2, 8}, &seed, -1, 1);
    ch_tensor_f32(&rbh, 2, (int64_t[]){2, 8}, &seed, -1, 1);
    ch_tensor_f32(&y, 4, (int64_t[]){9, 2, 2, 8}, &seed, -1, 1);
    ch_tensor_f32(&hT, 3, (int64_t[]){2, 2, 8}, &seed, -1, 1);
    ch_tensor_f32(&cT, 3, (int64_t[]){2, 2, 8}, &seed, -1, 1);
    na = 0;
    a[na++] = &xw;
    a[na++] = &r;
    a[na++] = &bad;
    if (k == LSTM) a[na++] = &c0;
    if (k == GRU) a[na++] = &rbh;
    a[na++] = &y;
    a[na++] = &hT;
    if (k == LSTM) a[na++] = &cT;
    ch_env_init(&e, true);
    ck_assert_int_ne(ch_call(&pg.k, &e, a, na), 0);
    char want_msg[96];
    snprintf(want_msg, sizeof want_msg, "%s: input 2's batch differs from xw's", kOp[k]);
    ck_assert_msg(strstr(e.error, want_msg), "message: %s", e.error);
    prog_close(&pg);
    ch_tensor *all[] = {&s[0], &s[1], &s[2], &shx, &shr, &shh, &shc, &shb, &xw, &r, &bad, &c0, &rbh, &y, &hT, &cT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ch_tensor_free(all[i]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("compute_recurrent");
  TCase *tc = tcase_create("scans");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_lstm_scan_follows_the_lstm_equations_step_by_step);
  tcase_add_test(tc, test_lstm_scan_peepholes_see_the_previous_and_the_new_cell);
  tcase_add_test(tc, test_gru_scan_follows_the_gru_equations_either_way_of_resetting);
  tcase_add_test(tc, test_rnn_scan_follows_the_rnn_equation);
  tcase_add_test(tc, test_sequence_lengths_stop_each_entry_at_its_own);
  tcase_add_test(tc, test_without_steps_the_initial_state_comes_back);
  tcase_add_test(tc, test_shape_functions_and_the_run_time_batch_check);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
