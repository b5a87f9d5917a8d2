/* Bool (u8) tensors in the loop-nest IR: kernels whose inputs or outputs
 * are one byte per element (DLPack {kDLUInt, 8, 1} or {kDLUInt, 1, 1}),
 * compiled for x86_64 and run against plain C references (a broadcast
 * comparison stored as 0/1, where with a bool condition, a bool scalar
 * used as an if condition, cast round trips, unsigned byte compares), the
 * argument dtype checks, IR construction errors, and an aarch64 build. */
#include <stdint.h>

#include "codegen_harness.h"

static nimble_ln_arena *arena;
static harness_lib lib = {.fd = -1};

/* for i in [0, shape(p, 0)): body(i), vectorized by 8 with its tail. */
static nimble_ln_stmt *loop1(nimble_ln_arena *A, nimble_ln_var *i, nimble_ln_param *p, nimble_ln_stmt *body) {
  nimble_ln_stmt *l = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, p, 0), NIMBLE_LN_SERIAL, 0, body);
  return l ? nimble_ln_split(A, l, 8, NIMBLE_LN_VECTORIZED, 8) : NULL;
}

/* gt(a f32 [n, m], b f32 [m]) -> out u8 [n, m] = a > b, rows in parallel. */
static nimble_ln_kernel *build_gt(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "gt_bcast");
  nimble_ln_param *a = nimble_ln_kernel_add_param(k, "a", NIMBLE_LN_F32, 2, 0);
  nimble_ln_param *b = nimble_ln_kernel_add_param(k, "b", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "out", NIMBLE_LN_U8, 2, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *j = nimble_ln_var_create(A, "j", NIMBLE_LN_I64);
  nimble_ln_expr *idx[2] = {nimble_ln_ref(A, i), nimble_ln_ref(A, j)};
  nimble_ln_expr *flat = nimble_ln_flat_index(A, a, idx);
  nimble_ln_stmt *st = nimble_ln_store(
      A, o, nimble_ln_flat_index(A, o, idx),
      nimble_ln_binary(A, NIMBLE_LN_GT, nimble_ln_load(A, a, flat), nimble_ln_load(A, b, nimble_ln_ref(A, j))));
  nimble_ln_stmt *inner = nimble_ln_for(A, j, nimble_ln_i64(A, 0), nimble_ln_shape(A, o, 1), NIMBLE_LN_SERIAL, 0, st);
  inner = nimble_ln_split(A, inner, 8, NIMBLE_LN_VECTORIZED, 8);
  nimble_ln_stmt *outer = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, o, 0), NIMBLE_LN_SERIAL, 0, inner);
  nimble_ln_kernel_set_body(k, nimble_ln_chunk(A, outer, nimble_ln_i64(A, 2)));
  return k;
}

/* where(cond u8 [n], x f32 [n], y f32 [n]) -> out f32 [n]. */
static nimble_ln_kernel *build_where(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "where_u8");
  nimble_ln_param *c = nimble_ln_kernel_add_param(k, "cond", NIMBLE_LN_U8, 1, 0);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *y = nimble_ln_kernel_add_param(k, "y", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "out", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *ii = nimble_ln_ref(A, i);
  nimble_ln_expr *cb = nimble_ln_cast(A, NIMBLE_LN_BOOL, nimble_ln_load(A, c, ii));
  nimble_ln_stmt *st = nimble_ln_store(A, o, ii, nimble_ln_select(A, cb, nimble_ln_load(A, x, ii), nimble_ln_load(A, y, ii)));
  nimble_ln_kernel_set_body(k, loop1(A, i, o, st));
  return k;
}

/* any_big(x f32 [n]) -> flag u8 [] = (sum of x) > 10. */
static nimble_ln_kernel *build_flag(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "sum_gt_10");
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "flag", NIMBLE_LN_U8, 0, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *acc = nimble_ln_var_create(A, "acc", NIMBLE_LN_F32);
  nimble_ln_stmt *add = nimble_ln_assign(
      A, acc, nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_ref(A, acc), nimble_ln_load(A, x, nimble_ln_ref(A, i))));
  nimble_ln_stmt *l = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, x, 0), NIMBLE_LN_SERIAL, 0, add);
  nimble_ln_stmt *st = nimble_ln_store(A, o, nimble_ln_i64(A, 0),
                                       nimble_ln_binary(A, NIMBLE_LN_GT, nimble_ln_ref(A, acc), nimble_ln_f32(A, 10)));
  nimble_ln_kernel_set_body(k, nimble_ln_decl(A, acc, nimble_ln_f32(A, 0), nimble_ln_seq2(A, l, st)));
  return k;
}

/* branch(c u8 [], x f32 [n]) -> out f32 [n]: if c { 2x } else { -x }. */
static nimble_ln_kernel *build_branch(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "branch_on_flag");
  nimble_ln_param *c = nimble_ln_kernel_add_param(k, "c", NIMBLE_LN_U8, 0, 0);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "out", NIMBLE_LN_F32, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64), *i2 = nimble_ln_var_create(A, "i2", NIMBLE_LN_I64);
  nimble_ln_stmt *dbl = nimble_ln_store(
      A, o, nimble_ln_ref(A, i),
      nimble_ln_binary(A, NIMBLE_LN_MUL, nimble_ln_load(A, x, nimble_ln_ref(A, i)), nimble_ln_f32(A, 2)));
  nimble_ln_stmt *neg = nimble_ln_store(A, o, nimble_ln_ref(A, i2),
                                        nimble_ln_unary(A, NIMBLE_LN_NEG, nimble_ln_load(A, x, nimble_ln_ref(A, i2))));
  nimble_ln_expr *cond = nimble_ln_cast(A, NIMBLE_LN_BOOL, nimble_ln_load(A, c, nimble_ln_i64(A, 0)));
  nimble_ln_kernel_set_body(k, nimble_ln_if(A, cond, loop1(A, i, o, dbl), loop1(A, i2, o, neg)));
  return k;
}

/* casts(b u8 [n], x f32 [n], w i64 [n]) -> f u8->f32, i u8->i32, l u8->i64,
 * nb (u8 as bool, stored) u8, fx f32->u8, wx i64->u8, gt (b > 100 unsigned) u8,
 * mx max(b, 128) u8. */
static nimble_ln_kernel *build_casts(nimble_ln_arena *A) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "casts");
  nimble_ln_param *b = nimble_ln_kernel_add_param(k, "b", NIMBLE_LN_U8, 1, 0);
  nimble_ln_param *x = nimble_ln_kernel_add_param(k, "x", NIMBLE_LN_F32, 1, 0);
  nimble_ln_param *w = nimble_ln_kernel_add_param(k, "w", NIMBLE_LN_I64, 1, 0);
  nimble_ln_param *of = nimble_ln_kernel_add_param(k, "f", NIMBLE_LN_F32, 1, 1);
  nimble_ln_param *oi = nimble_ln_kernel_add_param(k, "i", NIMBLE_LN_I32, 1, 1);
  nimble_ln_param *ol = nimble_ln_kernel_add_param(k, "l", NIMBLE_LN_I64, 1, 1);
  nimble_ln_param *onb = nimble_ln_kernel_add_param(k, "nb", NIMBLE_LN_U8, 1, 1);
  nimble_ln_param *ofx = nimble_ln_kernel_add_param(k, "fx", NIMBLE_LN_U8, 1, 1);
  nimble_ln_param *owx = nimble_ln_kernel_add_param(k, "wx", NIMBLE_LN_U8, 1, 1);
  nimble_ln_param *ogt = nimble_ln_kernel_add_param(k, "gt", NIMBLE_LN_U8, 1, 1);
  nimble_ln_param *omx = nimble_ln_kernel_add_param(k, "mx", NIMBLE_LN_U8, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *ii = nimble_ln_ref(A, i);
  nimble_ln_expr *bv = nimble_ln_load(A, b, ii);
  nimble_ln_stmt *st[] = {
      nimble_ln_store(A, of, ii, nimble_ln_cast(A, NIMBLE_LN_F32, bv)),
      nimble_ln_store(A, oi, ii, nimble_ln_cast(A, NIMBLE_LN_I32, bv)),
      nimble_ln_store(A, ol, ii, nimble_ln_cast(A, NIMBLE_LN_I64, bv)),
      nimble_ln_store(A, onb, ii, nimble_ln_cast(A, NIMBLE_LN_BOOL, bv)),
      nimble_ln_store(A, ofx, ii, nimble_ln_cast(A, NIMBLE_LN_U8, nimble_ln_load(A, x, ii))),
      nimble_ln_store(A, owx, ii, nimble_ln_cast(A, NIMBLE_LN_U8, nimble_ln_load(A, w, ii))),
      nimble_ln_store(A, ogt, ii, nimble_ln_binary(A, NIMBLE_LN_GT, bv, nimble_ln_u8(A, 100))),
      nimble_ln_store(A, omx, ii, nimble_ln_binary(A, NIMBLE_LN_MAX, bv, nimble_ln_u8(A, 128))),
  };
  nimble_ln_kernel_set_body(k, loop1(A, i, of, nimble_ln_seq(A, st, sizeof st / sizeof st[0])));
  return k;
}

static void build_all(void) {
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&arena));
  const nimble_ln_kernel *ks[] = {build_gt(arena), build_where(arena), build_flag(arena), build_branch(arena),
                                  build_casts(arena)};
  NIMBLE_ASSERT_OK(nimble_ln_arena_status(arena));
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(ks[i]));
  harness_build_and_load(ks, sizeof ks / sizeof ks[0], &lib);
}

static void free_all(void) {
  harness_unload(&lib);
  nimble_ln_arena_destroy(arena);
  arena = NULL;
}

/* A tensor over caller memory with a given dtype. */
static DLTensor tensor(void *data, int rank, int64_t *shape, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = rank;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static int32_t call(const char *name, harness_env *he, DLTensor **args, int n) {
  he->error[0] = 0;
  return harness_sym(&lib, name)(args, n, &he->env);
}

START_TEST(test_comparison_with_broadcasting_stores_zero_or_one_bytes) {
  static const int64_t shapes[][2] = {{3, 17}, {5, 16}, {1, 1}, {9, 3}, {0, 4}, {70, 33}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    int64_t n = shapes[c][0], m = shapes[c][1];
    int64_t as[2] = {n, m}, bs[1] = {m}, os[2] = {n, m};
    float *a = malloc((size_t)(n * m + 1) * sizeof *a), *b = malloc((size_t)(m + 1) * sizeof *b);
    uint8_t *o = malloc((size_t)(n * m + 1));
    unsigned seed = 11 + (unsigned)c;
    for (int64_t i = 0; i < n * m; i++) a[i] = (float)(rand_r(&seed) % 7) - 3;
    for (int64_t j = 0; j < m; j++) b[j] = (float)(rand_r(&seed) % 7) - 3;
    memset(o, 0xAB, (size_t)(n * m + 1));
    DLTensor ta = tensor(a, 2, as, kDLFloat, 32), tb = tensor(b, 1, bs, kDLFloat, 32), to = tensor(o, 2, os, kDLUInt, 8);
    DLTensor *args[] = {&ta, &tb, &to};
    harness_env he;
    harness_env_init(&he, 2, 0);
    ck_assert_msg(call("gt_bcast", &he, args, 3) == 0, "gt_bcast failed: %s", he.error);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < m; j++) {
        uint8_t want = a[i * m + j] > b[j] ? 1 : 0;
        if (o[i * m + j] != want)
          ck_abort_msg("[%lld, %lld]: %g > %g gave %d, want %d", (long long)i, (long long)j, (double)a[i * m + j],
                       (double)b[j], o[i * m + j], want);
      }
    ck_assert_int_eq(o[n * m], 0xAB); /* nothing written past the end */
    free(a);
    free(b);
    free(o);
  }
}
END_TEST

START_TEST(test_where_takes_a_u8_condition_where_any_nonzero_byte_is_true) {
  enum { N = 37 };
  uint8_t cond[N];
  float x[N], y[N], o[N];
  for (int i = 0; i < N; i++) {
    cond[i] = (uint8_t)(i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 200); /* 200: true too */
    x[i] = (float)i;
    y[i] = -(float)i - 0.5f;
  }
  int64_t s[1] = {N};
  DLTensor tc = tensor(cond, 1, s, kDLUInt, 8), tx = tensor(x, 1, s, kDLFloat, 32), ty = tensor(y, 1, s, kDLFloat, 32),
           to = tensor(o, 1, s, kDLFloat, 32);
  DLTensor *args[] = {&tc, &tx, &ty, &to};
  harness_env he;
  harness_env_init(&he, 0, 0);
  ck_assert_msg(call("where_u8", &he, args, 4) == 0, "where_u8 failed: %s", he.error);
  for (int i = 0; i < N; i++) ck_assert_float_eq(o[i], cond[i] ? x[i] : y[i]);
  /* The runtime's tensor files write bool as {kDLUInt, 1, 1}, DLPack 0.8
   * has {kDLBool = 6, 8, 1}: the same bytes. */
  static const uint8_t alt[][2] = {{kDLUInt, 1}, {6, 8}};
  for (int a = 0; a < 2; a++) {
    tc.dtype.code = alt[a][0];
    tc.dtype.bits = alt[a][1];
    memset(o, 0, sizeof o);
    ck_assert_msg(call("where_u8", &he, args, 4) == 0, "where_u8 (code %d bits %d) failed: %s", alt[a][0], alt[a][1],
                  he.error);
    for (int i = 0; i < N; i++) ck_assert_float_eq(o[i], cond[i] ? x[i] : y[i]);
  }
}
END_TEST

START_TEST(test_a_bool_scalar_output_drives_an_if_in_the_next_kernel) {
  enum { N = 21 };
  float x[N], o[N];
  for (int round = 0; round < 2; round++) {
    double sum = 0;
    for (int i = 0; i < N; i++) {
      x[i] = round ? (float)i * 0.01f : (float)i; /* sums 2.1 and 210 */
      sum += x[i];
    }
    uint8_t flag = 0x55;
    int64_t s[1] = {N};
    DLTensor tx = tensor(x, 1, s, kDLFloat, 32), tf = tensor(&flag, 0, NULL, kDLUInt, 8),
             to = tensor(o, 1, s, kDLFloat, 32);
    harness_env he;
    harness_env_init(&he, 0, 0);
    DLTensor *a1[] = {&tx, &tf};
    ck_assert_msg(call("sum_gt_10", &he, a1, 2) == 0, "sum_gt_10 failed: %s", he.error);
    ck_assert_int_eq(flag, sum > 10 ? 1 : 0);
    DLTensor *a2[] = {&tf, &tx, &to};
    ck_assert_msg(call("branch_on_flag", &he, a2, 3) == 0, "branch_on_flag failed: %s", he.error);
    for (int i = 0; i < N; i++) ck_assert_float_eq(o[i], flag ? 2 * x[i] : -x[i]);
  }
}
END_TEST

START_TEST(test_casts_to_and_from_u8_round_trip_and_bytes_compare_unsigned) {
  enum { N = 19 };
  uint8_t b[N], nb[N], fx[N], wx[N], gt[N], mx[N];
  float x[N], f[N];
  int64_t w[N], l[N];
  int32_t iv[N];
  static const float xs[] = {0.0f, 1.0f, 2.9f, 255.0f, 300.0f, -1.0f, -0.5f, 127.5f, NAN, 7.0f};
  for (int i = 0; i < N; i++) {
    b[i] = (uint8_t)(i * 37 % 256); /* 0, 37, 74, ..., includes values above 127 */
    x[i] = xs[i % 10];
    w[i] = (int64_t)i * 100 - 300; /* truncation wraps modulo 256 */
  }
  int64_t s[1] = {N};
  DLTensor tb = tensor(b, 1, s, kDLUInt, 8), tx = tensor(x, 1, s, kDLFloat, 32), tw = tensor(w, 1, s, kDLInt, 64);
  DLTensor tf = tensor(f, 1, s, kDLFloat, 32), ti = tensor(iv, 1, s, kDLInt, 32), tl = tensor(l, 1, s, kDLInt, 64);
  DLTensor tnb = tensor(nb, 1, s, kDLUInt, 8), tfx = tensor(fx, 1, s, kDLUInt, 8), twx = tensor(wx, 1, s, kDLUInt, 8);
  DLTensor tgt = tensor(gt, 1, s, kDLUInt, 8), tmx = tensor(mx, 1, s, kDLUInt, 8);
  DLTensor *args[] = {&tb, &tx, &tw, &tf, &ti, &tl, &tnb, &tfx, &twx, &tgt, &tmx};
  harness_env he;
  harness_env_init(&he, 0, 0);
  ck_assert_msg(call("casts", &he, args, 11) == 0, "casts failed: %s", he.error);
  for (int i = 0; i < N; i++) {
    ck_assert_float_eq(f[i], (float)b[i]);
    ck_assert_int_eq(iv[i], b[i]);
    ck_assert_int_eq(l[i], b[i]);
    ck_assert_int_eq(nb[i], b[i] != 0);
    /* f32 -> u8 truncates toward zero and saturates to [0, 255]; NaN -> 0. */
    float xv = x[i];
    int want = isnan(xv) ? 0 : xv <= 0 ? 0 : xv >= 255 ? 255 : (int)xv;
    ck_assert_msg(fx[i] == want, "u8(%g) = %d, want %d", (double)xv, fx[i], want);
    ck_assert_int_eq(wx[i], (uint8_t)(w[i] & 0xFF));
    ck_assert_int_eq(gt[i], b[i] > 100);
    ck_assert_int_eq(mx[i], b[i] > 128 ? b[i] : 128);
  }
}
END_TEST

START_TEST(test_u8_parameters_reject_other_dtypes_with_a_message) {
  enum { N = 4 };
  uint8_t cond[N] = {1, 0, 1, 0};
  float x[N] = {1, 2, 3, 4}, y[N] = {5, 6, 7, 8}, o[N];
  int64_t s[1] = {N};
  DLTensor tc = tensor(cond, 1, s, kDLUInt, 8), tx = tensor(x, 1, s, kDLFloat, 32), ty = tensor(y, 1, s, kDLFloat, 32),
           to = tensor(o, 1, s, kDLFloat, 32);
  DLTensor *args[] = {&tc, &tx, &ty, &to};
  harness_env he;
  harness_env_init(&he, 0, 0);
  static const struct { uint8_t code, bits; uint16_t lanes; } bad[] = {
      {kDLInt, 8, 1}, {kDLUInt, 16, 1}, {kDLUInt, 8, 4}, {kDLFloat, 32, 1}, {kDLUInt, 2, 1}, {6, 1, 1}, {kDLInt, 1, 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tc.dtype.code = bad[i].code;
    tc.dtype.bits = bad[i].bits;
    tc.dtype.lanes = bad[i].lanes;
    ck_assert_int_ne(call("where_u8", &he, args, 4), 0);
    ck_assert_msg(strstr(he.error, "argument 0 ('cond') must be uint8 or bool") != NULL, "message: %s", he.error);
  }
}
END_TEST

START_TEST(test_ir_rejects_bool_params_bool_arithmetic_and_mistyped_stores) {
  struct {
    int what;
    const char *fragment;
  } cases[] = {
      {0, "bool is not a tensor element type"},
      {1, "binary '+' does not apply to bool"},
      {2, "store o[i64] = f32"},
      {3, "unary 'exp' does not apply to u8"},
      {4, "binary '&&' does not apply to u8"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nimble_ln_arena *A;
    NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
    nimble_ln_kernel *k = nimble_ln_kernel_create(A, "bad");
    nimble_ln_param *in = nimble_ln_kernel_add_param(k, "b", NIMBLE_LN_U8, 1, 0);
    nimble_ln_param *o = nimble_ln_kernel_add_param(k, "o", NIMBLE_LN_U8, 1, 1);
    nimble_ln_expr *v = nimble_ln_load(A, in, nimble_ln_i64(A, 0));
    switch (cases[c].what) {
    case 0: ck_assert_ptr_null(nimble_ln_kernel_add_param(k, "p", NIMBLE_LN_BOOL, 1, 1)); break;
    case 1: {
      nimble_ln_expr *c = nimble_ln_cast(A, NIMBLE_LN_BOOL, v);
      ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_ADD, c, c));
      break;
    }
    case 2: ck_assert_ptr_null(nimble_ln_store(A, o, nimble_ln_i64(A, 0), nimble_ln_f32(A, 1))); break;
    case 3: ck_assert_ptr_null(nimble_ln_unary(A, NIMBLE_LN_EXP, v)); break;
    case 4: ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_AND, v, v)); break;
    }
    NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, cases[c].fragment);
    nimble_ln_arena_destroy(A);
  }
}
END_TEST

START_TEST(test_u8_kernels_print_their_types) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  nimble_ln_kernel *k = build_casts(A);
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  ck_assert_msg(strstr(text, "in b: u8[1]") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "out nb: u8[1]") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "u8(100)") != NULL, "%s", text);
  free(text);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_bool_kernels_build_and_verify_for_aarch64) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[] = {build_gt(A), build_where(A), build_casts(A)};
  NIMBLE_ASSERT_OK(nimble_ln_arena_status(A));
  nimble_codegen_options_t o = nimble_codegen_default_options();
  o.triple = "aarch64-linux-gnu";
  o.keep_ir = 1;
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 3, &o, &out));
  const uint8_t *e = out.shared_object;
  ck_assert_uint_gt(out.shared_object_size, 64);
  ck_assert_int_eq(memcmp(e, "\177ELF", 4), 0);
  ck_assert_int_eq(e[18] | e[19] << 8, 183); /* EM_AARCH64 */
  ck_assert_ptr_nonnull(strstr(out.llvm_ir, "store i8"));
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_bool");
  TCase *tc = tcase_create("kernels");
  tcase_add_unchecked_fixture(tc, build_all, free_all);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, test_comparison_with_broadcasting_stores_zero_or_one_bytes);
  tcase_add_test(tc, test_where_takes_a_u8_condition_where_any_nonzero_byte_is_true);
  tcase_add_test(tc, test_a_bool_scalar_output_drives_an_if_in_the_next_kernel);
  tcase_add_test(tc, test_casts_to_and_from_u8_round_trip_and_bytes_compare_unsigned);
  tcase_add_test(tc, test_u8_parameters_reject_other_dtypes_with_a_message);
  suite_add_tcase(s, tc);
  TCase *ir = tcase_create("ir");
  tcase_set_timeout(ir, 240);
  tcase_add_test(ir, test_ir_rejects_bool_params_bool_arithmetic_and_mistyped_stores);
  tcase_add_test(ir, test_u8_kernels_print_their_types);
  tcase_add_test(ir, test_bool_kernels_build_and_verify_for_aarch64);
  suite_add_tcase(s, ir);
  return nimble_test_run(s);
}
