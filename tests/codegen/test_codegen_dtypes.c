/* Every element type of the loop-nest IR: kernels over f64, f16, bf16,
 * i8, i16, u8, u16, u32 and u64 tensors compiled for x86_64 and run on
 * values whose results are worked out by hand in the tables below
 * (wrapping integer arithmetic, unsigned division, comparison and shifts,
 * half-precision rounding to nearest even, subnormals, overflow to
 * infinity, NaN through min/max, saturating float-to-integer casts, f64
 * math against libm), plus the argument dtype check, construction errors,
 * the printed form, vectorized IR for narrow types, and the nvptx64
 * refusal. */
#include <stdint.h>
#include <sys/stat.h>

#include "codegen_harness.h"

enum { MAXN = 12 };

typedef enum { K_BIN, K_UN, K_CAST } case_kind;

/* out[i] = op(a[i], b[i]) (K_BIN), op(a[i]) (K_UN) or cast(out, a[i]).
 * Values are given as doubles for f32/f64 and as integers (two's
 * complement, or the bit patterns of f16/bf16) for the other types. */
typedef struct dcase {
  const char *name;
  case_kind kind;
  nimble_ln_op_t op;
  nimble_ln_type_t in, out;
  int n;
  double fa[MAXN], fb[MAXN], fwant[MAXN];
  uint64_t ua[MAXN], ub[MAXN], uwant[MAXN];
} dcase;

#define NAN_ NAN
#define INF_ INFINITY

static const dcase kCases[] = {
    /* u8 wraps like NumPy's uint8: 200+100 = 300-256 = 44; 5-10 = 251;
     * 16*17 = 272-256 = 16; 255/2 = 127 (unsigned); x/0 = 0; 200%7 = 4. */
    {"u8_add", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_U8, NIMBLE_LN_U8, 3, .ua = {200, 255, 1}, .ub = {100, 1, 2}, .uwant = {44, 0, 3}},
    {"u8_sub", K_BIN, NIMBLE_LN_SUB, NIMBLE_LN_U8, NIMBLE_LN_U8, 2, .ua = {5, 200}, .ub = {10, 100}, .uwant = {251, 100}},
    {"u8_mul", K_BIN, NIMBLE_LN_MUL, NIMBLE_LN_U8, NIMBLE_LN_U8, 2, .ua = {16, 3}, .ub = {17, 5}, .uwant = {16, 15}},
    {"u8_div", K_BIN, NIMBLE_LN_DIV, NIMBLE_LN_U8, NIMBLE_LN_U8, 3, .ua = {255, 7, 9}, .ub = {2, 0, 200}, .uwant = {127, 0, 0}},
    {"u8_rem", K_BIN, NIMBLE_LN_REM, NIMBLE_LN_U8, NIMBLE_LN_U8, 3, .ua = {200, 7, 255}, .ub = {7, 0, 16}, .uwant = {4, 0, 15}},
    {"u8_max", K_BIN, NIMBLE_LN_MAX, NIMBLE_LN_U8, NIMBLE_LN_U8, 2, .ua = {200, 3}, .ub = {100, 130}, .uwant = {200, 130}},
    {"u8_lt", K_BIN, NIMBLE_LN_LT, NIMBLE_LN_U8, NIMBLE_LN_U8, 2, .ua = {200, 3}, .ub = {100, 130}, .uwant = {0, 1}},
    {"u8_shl", K_BIN, NIMBLE_LN_SHL, NIMBLE_LN_U8, NIMBLE_LN_U8, 4, .ua = {1, 255, 16, 3}, .ub = {7, 1, 8, 200}, .uwant = {128, 254, 0, 0}},
    {"u8_shr", K_BIN, NIMBLE_LN_SHR, NIMBLE_LN_U8, NIMBLE_LN_U8, 3, .ua = {128, 255, 255}, .ub = {7, 4, 8}, .uwant = {1, 15, 0}},
    /* i8: 100+100 = 200-256 = -56; -128 / -1 wraps to -128; -7 % 3 = -1
     * (truncating, like C); >> is arithmetic: -8 >> 1 = -4, and a count of
     * 9 (past 7) fills with the sign: -1; 1 << 7 = -128; 1 << 8 = 0. */
    {"i8_add", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_I8, NIMBLE_LN_I8, 2, .ua = {100, (uint64_t)-1}, .ub = {100, (uint64_t)-127}, .uwant = {(uint64_t)-56, (uint64_t)-128}},
    {"i8_div", K_BIN, NIMBLE_LN_DIV, NIMBLE_LN_I8, NIMBLE_LN_I8, 3, .ua = {(uint64_t)-128, (uint64_t)-7, 5}, .ub = {(uint64_t)-1, 2, 0}, .uwant = {(uint64_t)-128, (uint64_t)-3, 0}},
    {"i8_rem", K_BIN, NIMBLE_LN_REM, NIMBLE_LN_I8, NIMBLE_LN_I8, 2, .ua = {(uint64_t)-7, 7}, .ub = {3, (uint64_t)-3}, .uwant = {(uint64_t)-1, 1}},
    {"i8_min", K_BIN, NIMBLE_LN_MIN, NIMBLE_LN_I8, NIMBLE_LN_I8, 2, .ua = {(uint64_t)-5, 100}, .ub = {3, (uint64_t)-100}, .uwant = {(uint64_t)-5, (uint64_t)-100}},
    {"i8_shr", K_BIN, NIMBLE_LN_SHR, NIMBLE_LN_I8, NIMBLE_LN_I8, 3, .ua = {(uint64_t)-8, (uint64_t)-1, 64}, .ub = {1, 9, 6}, .uwant = {(uint64_t)-4, (uint64_t)-1, 1}},
    {"i8_shl", K_BIN, NIMBLE_LN_SHL, NIMBLE_LN_I8, NIMBLE_LN_I8, 3, .ua = {1, 1, 3}, .ub = {7, 8, (uint64_t)-1}, .uwant = {(uint64_t)-128, 0, 0}},
    {"i8_neg", K_UN, NIMBLE_LN_NEG, NIMBLE_LN_I8, NIMBLE_LN_I8, 2, .ua = {(uint64_t)-128, 5}, .uwant = {(uint64_t)-128, (uint64_t)-5}},
    {"i16_mul", K_BIN, NIMBLE_LN_MUL, NIMBLE_LN_I16, NIMBLE_LN_I16, 2, .ua = {300, (uint64_t)-2}, .ub = {300, 16384}, .uwant = {90000 - 65536, (uint64_t)-32768}},
    /* u16 0 - 1 = 65535; u32 0x80000000 >> 31 = 1 and 0xffffffff > 0
     * unsigned; u64 (2^64-1) / 2 = 2^63-1, (2^64-1) > 1. */
    {"u16_sub", K_BIN, NIMBLE_LN_SUB, NIMBLE_LN_U16, NIMBLE_LN_U16, 1, .ua = {0}, .ub = {1}, .uwant = {65535}},
    {"u32_shr", K_BIN, NIMBLE_LN_SHR, NIMBLE_LN_U32, NIMBLE_LN_U32, 2, .ua = {0x80000000u, 0xffffffffu}, .ub = {31, 32}, .uwant = {1, 0}},
    {"u32_gt", K_BIN, NIMBLE_LN_GT, NIMBLE_LN_U32, NIMBLE_LN_U32, 1, .ua = {0xffffffffu}, .ub = {0}, .uwant = {1}},
    {"u64_div", K_BIN, NIMBLE_LN_DIV, NIMBLE_LN_U64, NIMBLE_LN_U64, 2, .ua = {UINT64_MAX, 10}, .ub = {2, 3}, .uwant = {INT64_MAX, 3}},
    {"u64_gt", K_BIN, NIMBLE_LN_GT, NIMBLE_LN_U64, NIMBLE_LN_U64, 2, .ua = {UINT64_MAX, 1}, .ub = {1, UINT64_MAX}, .uwant = {1, 0}},
    {"u64_min", K_BIN, NIMBLE_LN_MIN, NIMBLE_LN_U64, NIMBLE_LN_U64, 1, .ua = {UINT64_MAX}, .ub = {7}, .uwant = {7}},
    /* f64 is real double: 0.1 + 0.2 = 0.30000000000000004 (in float it is
     * 0.3f exactly representable differently). */
    {"f64_add", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_F64, NIMBLE_LN_F64, 2, .fa = {0.1, 1e300}, .fb = {0.2, 1e300}, .fwant = {0.30000000000000004, 2e300}},
    /* NaN through min/max in either position; infinities order normally. */
    {"f64_max", K_BIN, NIMBLE_LN_MAX, NIMBLE_LN_F64, NIMBLE_LN_F64, 4, .fa = {NAN_, 1, -INF_, 2}, .fb = {1, NAN_, 3, -0.5}, .fwant = {NAN_, NAN_, 3, 2}},
    {"f32_max", K_BIN, NIMBLE_LN_MAX, NIMBLE_LN_F32, NIMBLE_LN_F32, 4, .fa = {NAN_, 1, -INF_, 2}, .fb = {1, NAN_, 3, -0.5}, .fwant = {NAN_, NAN_, 3, 2}},
    {"f32_min", K_BIN, NIMBLE_LN_MIN, NIMBLE_LN_F32, NIMBLE_LN_F32, 4, .fa = {NAN_, 1, INF_, 2}, .fb = {1, NAN_, 3, -0.5}, .fwant = {NAN_, NAN_, 3, -0.5}},
    /* f16: 0x3c00 = 1, 0x1000 = 2^-11, 0x1400 = 2^-10. 1 + 2^-11 ties to the
     * even 1.0; 0x3c01 + 2^-11 ties to the even 0x3c02; 65504 + 16 = 65520
     * ties past the largest half: inf. 0x0001 (2^-24) * 2 = 0x0002. NaN
     * (0x7e00) stays NaN. 0x3555 (0.333251953125) * 0x4200 (3) =
     * 1 - 2^-12, a tie between 0x3bff (odd) and 1.0: 0x3c00. */
    {"f16_add", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_F16, NIMBLE_LN_F16, 4, .ua = {0x3c00, 0x3c01, 0x7bff, 0x7e00}, .ub = {0x1000, 0x1000, 0x4c00, 0x3c00}, .uwant = {0x3c00, 0x3c02, 0x7c00, 0x7e00}},
    {"f16_mul", K_BIN, NIMBLE_LN_MUL, NIMBLE_LN_F16, NIMBLE_LN_F16, 2, .ua = {0x0001, 0x3555}, .ub = {0x4000, 0x4200}, .uwant = {0x0002, 0x3c00}},
    {"f16_max", K_BIN, NIMBLE_LN_MAX, NIMBLE_LN_F16, NIMBLE_LN_F16, 2, .ua = {0x7e00, 0xc000}, .ub = {0x3c00, 0xbc00}, .uwant = {0x7e00, 0xbc00}},
    /* exp(1) = 2.71828..., nearest half (spacing 2^-9 in [2, 4)) is
     * 1392 * 2^-9 = 2.71875 = 0x4170. */
    {"f16_exp", K_UN, NIMBLE_LN_EXP, NIMBLE_LN_F16, NIMBLE_LN_F16, 2, .ua = {0x3c00, 0x0000}, .uwant = {0x4170, 0x3c00}},
    /* bf16: 0x3f80 = 1, 0x3b80 = 2^-8. 1 + 2^-8 ties to even 0x3f80;
     * 0x3f81 + 2^-8 = 1 + 3*2^-8 ties to even 0x3f82. */
    {"bf16_add", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_BF16, NIMBLE_LN_BF16, 2, .ua = {0x3f80, 0x3f81}, .ub = {0x3b80, 0x3b80}, .uwant = {0x3f80, 0x3f82}},
    /* Casts. f32 -> f16: 2^-24 is the smallest subnormal; 1e-8 rounds to
     * +0; 1e5 overflows; -0 keeps its sign; 65519 rounds down to 65504. */
    {"f32_to_f16", K_CAST, 0, NIMBLE_LN_F32, NIMBLE_LN_F16, 6, .fa = {0x1p-24, 1e-8, 1e5, -0.0, 65519, NAN_}, .uwant = {0x0001, 0x0000, 0x7c00, 0x8000, 0x7bff, 0x7e00}},
    /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-30 is just above a tie
     * (through float it would be the tie itself and round to 1.0). */
    {"f64_to_f16", K_CAST, 0, NIMBLE_LN_F64, NIMBLE_LN_F16, 3, .fa = {1.0 + 0x1p-11 + 0x1p-30, 1.0 + 0x1p-11, -1e300}, .uwant = {0x3c01, 0x3c00, 0xfc00}},
    {"f64_to_bf16", K_CAST, 0, NIMBLE_LN_F64, NIMBLE_LN_BF16, 2, .fa = {1.0 + 0x1p-8 + 0x1p-40, -3.0}, .uwant = {0x3f81, 0xc040}},
    {"f32_to_bf16", K_CAST, 0, NIMBLE_LN_F32, NIMBLE_LN_BF16, 3, .fa = {3.4028234663852886e38, 1.0 + 0x1p-8, NAN_}, .uwant = {0x7f80, 0x3f80, 0x7fc0}},
    {"bf16_to_f16", K_CAST, 0, NIMBLE_LN_BF16, NIMBLE_LN_F16, 2, .ua = {0x3f81, 0x4700}, .uwant = {0x3c08, 0x7800}},
    {"f16_to_f64", K_CAST, 0, NIMBLE_LN_F16, NIMBLE_LN_F64, 3, .ua = {0x0001, 0x7bff, 0xfc00}, .fwant = {0x1p-24, 65504, -INF_}},
    {"f16_to_f32", K_CAST, 0, NIMBLE_LN_F16, NIMBLE_LN_F32, 2, .ua = {0x3555, 0x8000}, .fwant = {0.333251953125, -0.0}},
    /* Integer casts widen by their source's signedness and truncate. */
    {"u8_to_f32", K_CAST, 0, NIMBLE_LN_U8, NIMBLE_LN_F32, 1, .ua = {255}, .fwant = {255}},
    {"i8_to_i32", K_CAST, 0, NIMBLE_LN_I8, NIMBLE_LN_I32, 1, .ua = {(uint64_t)-1}, .uwant = {(uint64_t)-1}},
    {"u16_to_i64", K_CAST, 0, NIMBLE_LN_U16, NIMBLE_LN_I64, 1, .ua = {65535}, .uwant = {65535}},
    {"i64_to_u8", K_CAST, 0, NIMBLE_LN_I64, NIMBLE_LN_U8, 2, .ua = {257, (uint64_t)-1}, .uwant = {1, 255}},
    {"u64_to_f64", K_CAST, 0, NIMBLE_LN_U64, NIMBLE_LN_F64, 1, .ua = {UINT64_MAX}, .fwant = {0x1p64}},
    {"u32_to_i16", K_CAST, 0, NIMBLE_LN_U32, NIMBLE_LN_I16, 1, .ua = {0x18000}, .uwant = {(uint64_t)-32768}},
    /* float -> integer truncates toward zero and saturates; NaN -> 0. */
    {"f32_to_u16", K_CAST, 0, NIMBLE_LN_F32, NIMBLE_LN_U16, 4, .fa = {70000, -5, NAN_, 2.9}, .uwant = {65535, 0, 0, 2}},
    {"f64_to_i8", K_CAST, 0, NIMBLE_LN_F64, NIMBLE_LN_I8, 3, .fa = {-200.7, -2.9, 127.9}, .uwant = {(uint64_t)-128, (uint64_t)-2, 127}},
    {"f16_to_i32", K_CAST, 0, NIMBLE_LN_F16, NIMBLE_LN_I32, 2, .ua = {0xc170, 0x7c00}, .uwant = {(uint64_t)-2, INT32_MAX}},
};
#define N_CASES (sizeof kCases / sizeof kCases[0])

static nimble_ln_arena *arena;
static harness_lib lib = {.fd = -1};

static nimble_ln_kernel *build_case(nimble_ln_arena *A, const dcase *c) {
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, c->name);
  nimble_ln_param *a = nimble_ln_kernel_add_param(k, "a", c->in, 1, 0);
  nimble_ln_param *b = c->kind == K_BIN ? nimble_ln_kernel_add_param(k, "b", c->in, 1, 0) : NULL;
  nimble_ln_type_t ot = c->out;
  /* comparisons store their bool result into a u8 tensor */
  int cmp = c->kind == K_BIN && c->op >= NIMBLE_LN_LT && c->op <= NIMBLE_LN_NE;
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "out", cmp ? NIMBLE_LN_U8 : ot, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *ii = nimble_ln_ref(A, i);
  nimble_ln_expr *va = nimble_ln_load(A, a, ii), *v;
  if (c->kind == K_BIN) v = nimble_ln_binary(A, c->op, va, nimble_ln_load(A, b, ii));
  else if (c->kind == K_UN) v = nimble_ln_unary(A, c->op, va);
  else v = nimble_ln_cast(A, c->out, va);
  nimble_ln_stmt *l = nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, o, 0), NIMBLE_LN_SERIAL, 0,
                                    nimble_ln_store(A, o, ii, v));
  nimble_ln_kernel_set_body(k, nimble_ln_split(A, l, 8, NIMBLE_LN_VECTORIZED, 8));
  return k;
}

static size_t type_bytes(nimble_ln_type_t t) { return (size_t)nimble_ln_type_bits(t) / 8; }

static DLDataType dl_type(nimble_ln_type_t t) {
  DLDataType d = {kDLInt, (uint8_t)nimble_ln_type_bits(t), 1};
  if (t == NIMBLE_LN_BF16) d.code = kDLBfloat;
  else if (nimble_ln_type_is_float(t)) d.code = kDLFloat;
  else if (nimble_ln_type_is_unsigned(t)) d.code = kDLUInt;
  return d;
}

/* Element k of the case's column (fa/ua) in the type's bytes. */
static void put(nimble_ln_type_t t, void *buf, int k, double f, uint64_t u) {
  char *p = (char *)buf + (size_t)k * type_bytes(t);
  if (t == NIMBLE_LN_F32) {
    float x = (float)f;
    memcpy(p, &x, 4);
  } else if (t == NIMBLE_LN_F64) {
    memcpy(p, &f, 8);
  } else {
    memcpy(p, &u, type_bytes(t)); /* little-endian: the low bytes */
  }
}

/* The elements are repeated to fill 11 (a vector block of 8 and a tail). */
enum { RUN_N = 11 };

static void fill(nimble_ln_type_t t, void *buf, const dcase *c, const double *f, const uint64_t *u) {
  for (int k = 0; k < RUN_N; k++) put(t, buf, k, f[k % c->n], u[k % c->n]);
}

static void build_all(void) {
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&arena));
  const nimble_ln_kernel *ks[N_CASES];
  for (size_t c = 0; c < N_CASES; c++) ks[c] = build_case(arena, &kCases[c]);
  NIMBLE_ASSERT_OK(nimble_ln_arena_status(arena));
  for (size_t c = 0; c < N_CASES; c++) NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(ks[c]));
  harness_build_and_load(ks, N_CASES, &lib);
}

static void free_all(void) {
  harness_unload(&lib);
  nimble_ln_arena_destroy(arena);
  arena = NULL;
}

START_TEST(test_every_element_type_computes_the_hand_worked_values) {
  for (size_t ci = 0; ci < N_CASES; ci++) {
    const dcase *c = &kCases[ci];
    int cmp = c->kind == K_BIN && c->op >= NIMBLE_LN_LT && c->op <= NIMBLE_LN_NE;
    nimble_ln_type_t ot = cmp ? NIMBLE_LN_U8 : c->out;
    uint8_t a[RUN_N * 8], b[RUN_N * 8], o[(RUN_N + 1) * 8], want[RUN_N * 8];
    fill(c->in, a, c, c->fa, c->ua);
    fill(c->in, b, c, c->fb, c->ub);
    fill(ot, want, c, c->fwant, c->uwant);
    memset(o, 0xAB, sizeof o);
    int64_t shape[1] = {RUN_N};
    DLTensor ta = {a, {kDLCPU, 0}, 1, dl_type(c->in), shape, NULL, 0};
    DLTensor tb = {b, {kDLCPU, 0}, 1, dl_type(c->in), shape, NULL, 0};
    DLTensor to = {o, {kDLCPU, 0}, 1, dl_type(ot), shape, NULL, 0};
    DLTensor *args[3] = {&ta, &tb, &to};
    if (c->kind != K_BIN) args[1] = &to;
    harness_env he;
    harness_env_init(&he, 0, 0);
    int32_t rc = harness_sym(&lib, c->name)(args, c->kind == K_BIN ? 3 : 2, &he.env);
    ck_assert_msg(rc == 0, "%s failed: %s", c->name, he.error);
    size_t es = type_bytes(ot);
    for (int k = 0; k < RUN_N; k++) {
      const uint8_t *g = o + (size_t)k * es, *w = want + (size_t)k * es;
      if (memcmp(g, w, es) == 0) continue;
      if (ot == NIMBLE_LN_F32 || ot == NIMBLE_LN_F64) {
        double gv, wv;
        if (ot == NIMBLE_LN_F32) {
          float x, y;
          memcpy(&x, g, 4), memcpy(&y, w, 4), gv = x, wv = y;
        } else {
          memcpy(&gv, g, 8), memcpy(&wv, w, 8);
        }
        if (isnan(gv) && isnan(wv)) continue;
        ck_abort_msg("%s element %d: got %.17g, want %.17g", c->name, k, gv, wv);
      }
      uint64_t gu = 0, wu = 0;
      memcpy(&gu, g, es), memcpy(&wu, w, es);
      /* any NaN pattern will do for a NaN result */
      if (ot == NIMBLE_LN_F16 && (gu & 0x7c00) == 0x7c00 && (gu & 0x3ff) && (wu & 0x7c00) == 0x7c00 && (wu & 0x3ff))
        continue;
      ck_abort_msg("%s element %d: got 0x%llx, want 0x%llx", c->name, k, (unsigned long long)gu,
                   (unsigned long long)wu);
    }
    ck_assert_msg(o[RUN_N * es] == 0xAB, "%s wrote past the end", c->name);
  }
}
END_TEST

/* f64 math (exp, log, tanh, erf, sqrt, sin, cos, atan, pow) is libm's
 * double precision, not an f32 approximation widened:
 * the results equal libm's to the last bit (sigmoid, computed as e/(1+e)
 * with e = exp(-|x|), within 2 ulp of 1/(1+exp(-x))). */
START_TEST(test_f64_math_is_double_precision) {
  static const nimble_ln_op_t ops[] = {NIMBLE_LN_EXP, NIMBLE_LN_LOG, NIMBLE_LN_TANH, NIMBLE_LN_ERF, NIMBLE_LN_SQRT,
                                       NIMBLE_LN_SIGMOID, NIMBLE_LN_SIN, NIMBLE_LN_COS, NIMBLE_LN_ATAN};
  static const char *names[] = {"dexp", "dlog", "dtanh", "derf", "dsqrt", "dsigmoid", "dsin", "dcos", "datan"};
  enum { NOPS = 9, N = 9 };
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[NOPS + 1];
  for (int o = 0; o < NOPS; o++) {
    dcase c = {names[o], K_UN, ops[o], NIMBLE_LN_F64, NIMBLE_LN_F64, 1};
    ks[o] = build_case(A, &c);
  }
  dcase p = {"dpow", K_BIN, NIMBLE_LN_POW, NIMBLE_LN_F64, NIMBLE_LN_F64, 1};
  ks[NOPS] = build_case(A, &p);
  harness_lib l = {.fd = -1};
  harness_build_and_load(ks, NOPS + 1, &l);
  double x[N] = {0.5, 1.0, 2.0, 0.1, 3.7, 10.0, 1e-5, 0.75, 1.25};
  double y[N] = {0.5, 3.0, 0.5, 2.0, -1.5, 0.25, 2.0, 7.0, 1.0 / 3};
  int64_t shape[1] = {N};
  for (int o = 0; o <= NOPS; o++) {
    double out[N];
    DLTensor tx = {x, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, NULL, 0};
    DLTensor ty = {y, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, NULL, 0};
    DLTensor to = {out, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, NULL, 0};
    DLTensor *args3[3] = {&tx, &ty, &to}, *args2[2] = {&tx, &to};
    harness_env he;
    harness_env_init(&he, 0, 0);
    const char *name = o < NOPS ? names[o] : "dpow";
    ck_assert_int_eq(harness_sym(&l, name)(o < NOPS ? args2 : args3, o < NOPS ? 2 : 3, &he.env), 0);
    for (int i = 0; i < N; i++) {
      double want;
      switch (o) {
      case 0: want = exp(x[i]); break;
      case 1: want = log(x[i]); break;
      case 2: want = tanh(x[i]); break;
      case 3: want = erf(x[i]); break;
      case 4: want = sqrt(x[i]); break;
      case 5: want = 1.0 / (1.0 + exp(-x[i])); break;
      case 6: want = sin(x[i]); break;
      case 7: want = cos(x[i]); break;
      case 8: want = atan(x[i]); break;
      default: want = pow(x[i], y[i]); break;
      }
      double tol = o == 5 ? 2 * (nextafter(want, INFINITY) - want) : 0;
      ck_assert_msg(fabs(out[i] - want) <= tol, "%s(%.17g) = %.17g, libm %.17g", name, x[i], out[i], want);
    }
  }
  harness_unload(&l);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_a_wrong_dtype_argument_is_refused_with_the_expected_one) {
  uint16_t a[4] = {0}, o[4];
  int64_t shape[1] = {4};
  DLTensor ta = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}; /* f32 given for f16 */
  DLTensor tb = {a, {kDLCPU, 0}, 1, {kDLFloat, 16, 1}, shape, NULL, 0};
  DLTensor to = {o, {kDLCPU, 0}, 1, {kDLFloat, 16, 1}, shape, NULL, 0};
  DLTensor *args[3] = {&ta, &tb, &to};
  harness_env he;
  harness_env_init(&he, 0, 0);
  ck_assert_int_ne(harness_sym(&lib, "f16_add")(args, 3, &he.env), 0);
  ck_assert_str_eq(he.error, "argument 0 ('a') must be float16 (DLPack code 2, 16 bits, 1 lane)");
  DLTensor tu = {a, {kDLCPU, 0}, 1, {kDLInt, 16, 1}, shape, NULL, 0}; /* int16 given for uint16 */
  DLTensor *uargs[3] = {&tu, &tu, &tu};
  ck_assert_int_ne(harness_sym(&lib, "u16_sub")(uargs, 3, &he.env), 0);
  ck_assert_str_eq(he.error, "argument 0 ('a') must be uint16 (DLPack code 1, 16 bits, 1 lane)");
  DLTensor tbf = {a, {kDLCPU, 0}, 1, {kDLFloat, 16, 1}, shape, NULL, 0}; /* float16 given for bfloat16 */
  DLTensor *bargs[3] = {&tbf, &tbf, &tbf};
  ck_assert_int_ne(harness_sym(&lib, "bf16_add")(bargs, 3, &he.env), 0);
  ck_assert_str_eq(he.error, "argument 0 ('a') must be bfloat16 (DLPack code 4, 16 bits, 1 lane)");
}
END_TEST

START_TEST(test_ir_checks_the_classes_of_types) {
  struct {
    int what;
    const char *fragment;
  } cases[] = {
      {0, "binary '<<' does not apply to f32"},
      {1, "unary 'exp' does not apply to i8"},
      {2, "binary 'pow' does not apply to u16"},
      {3, "binary '+' mixes f16 and bf16"},
      {4, "float constant of type u32"},
      {5, "binary '&&' does not apply to i64"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nimble_ln_arena *A;
    NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
    switch (cases[c].what) {
    case 0: ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_SHL, nimble_ln_f32(A, 1), nimble_ln_f32(A, 1))); break;
    case 1: ck_assert_ptr_null(nimble_ln_unary(A, NIMBLE_LN_EXP, nimble_ln_const_i(A, NIMBLE_LN_I8, 1))); break;
    case 2: {
      nimble_ln_expr *u = nimble_ln_const_i(A, NIMBLE_LN_U16, 2);
      ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_POW, u, u));
      break;
    }
    case 3:
      ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_ADD, nimble_ln_const_f(A, NIMBLE_LN_F16, 1),
                                          nimble_ln_const_f(A, NIMBLE_LN_BF16, 1)));
      break;
    case 4: ck_assert_ptr_null(nimble_ln_const_f(A, NIMBLE_LN_U32, 1)); break;
    case 5: ck_assert_ptr_null(nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_i64(A, 1), nimble_ln_i64(A, 1))); break;
    }
    NIMBLE_ASSERT_ERROR(nimble_ln_arena_status(A), NIMBLE_INVALID_ARGUMENT, cases[c].fragment);
    nimble_ln_arena_destroy(A);
  }
}
END_TEST

/* Constants are rounded to their type and wrapped to their width, and
 * print with it. */
START_TEST(test_constants_take_their_types_value_and_print_with_it) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_F16, 1.0 + 0x1p-11)->f == 1.0);        /* tie to even */
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_F16, 1.0 + 3 * 0x1p-11)->f == 1.0 + 0x1p-9);
  ck_assert(isinf(nimble_ln_const_f(A, NIMBLE_LN_F16, 65520)->f));
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_F16, 65519)->f == 65504);
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_F16, 0x1.8p-25)->f == 0x1p-24);        /* subnormal, rounds up */
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_BF16, 1.0 + 0x1p-8 + 0x1p-12)->f == 1.0 + 0x1p-7);
  ck_assert(nimble_ln_const_f(A, NIMBLE_LN_F64, 0.1)->f == 0.1);
  ck_assert(nimble_ln_const_i(A, NIMBLE_LN_U8, 300)->i == 44);
  ck_assert(nimble_ln_const_i(A, NIMBLE_LN_I8, 200)->i == -56);
  ck_assert(nimble_ln_const_i(A, NIMBLE_LN_U16, -1)->i == 65535);
  ck_assert(nimble_ln_const_i(A, NIMBLE_LN_U64, -1)->i == -1); /* all ones */
  nimble_ln_kernel *k = nimble_ln_kernel_create(A, "consts");
  nimble_ln_param *a = nimble_ln_kernel_add_param(k, "a", NIMBLE_LN_U64, 1, 0);
  nimble_ln_param *o = nimble_ln_kernel_add_param(k, "o", NIMBLE_LN_F16, 1, 1);
  nimble_ln_var *i = nimble_ln_var_create(A, "i", NIMBLE_LN_I64);
  nimble_ln_expr *ii = nimble_ln_ref(A, i);
  nimble_ln_expr *big = nimble_ln_binary(A, NIMBLE_LN_GT, nimble_ln_load(A, a, ii), nimble_ln_const_i(A, NIMBLE_LN_U64, -1));
  nimble_ln_stmt *st = nimble_ln_store(A, o, ii,
                                       nimble_ln_select(A, big, nimble_ln_const_f(A, NIMBLE_LN_F16, 0.5),
                                                        nimble_ln_cast(A, NIMBLE_LN_F16, nimble_ln_load(A, a, ii))));
  nimble_ln_kernel_set_body(k, nimble_ln_for(A, i, nimble_ln_i64(A, 0), nimble_ln_shape(A, o, 0), NIMBLE_LN_SERIAL, 0, st));
  NIMBLE_ASSERT_OK(nimble_ln_kernel_validate(k));
  char *text;
  NIMBLE_ASSERT_OK(nimble_ln_kernel_print(k, &text));
  ck_assert_msg(strstr(text, "kernel consts(in a: u64[1], out o: f16[1])") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "(a[i] > u64(18446744073709551615))") != NULL, "%s", text);
  ck_assert_msg(strstr(text, "f16(0.5)") != NULL && strstr(text, "f16(a[i])") != NULL, "%s", text);
  free(text);
  nimble_ln_arena_destroy(A);
}
END_TEST

/* Narrow types stay vectorized: the u8 add's loop becomes <8 x i8>
 * (or wider) adds, and the f16 add converts whole vectors without calls
 * to conversion helpers. */
START_TEST(test_narrow_types_vectorize_without_helper_calls) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[2] = {build_case(A, &kCases[0]), NULL};
  for (size_t c = 0; c < N_CASES; c++)
    if (!strcmp(kCases[c].name, "f16_add")) ks[1] = build_case(A, &kCases[c]);
  nimble_codegen_options_t opt = nimble_codegen_default_options();
  opt.keep_ir = 1;
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, 2, &opt, &out));
  ck_assert_msg(strstr(out.llvm_ir, "add <8 x i8>") || strstr(out.llvm_ir, "add <16 x i8>") ||
                    strstr(out.llvm_ir, "add <32 x i8>"),
                "u8 add not vectorized");
  ck_assert_msg(strstr(out.llvm_ir, "fadd <8 x float>") != NULL, "f16 add not vectorized");
  ck_assert_ptr_null(strstr(out.llvm_ir, "__truncsfhf2"));
  ck_assert_ptr_null(strstr(out.llvm_ir, "__extendhfsf2"));
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

START_TEST(test_nvptx64_refuses_other_types_by_name) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *k = build_case(A, &kCases[0]); /* u8_add: u8 is fine on the GPU ... */
  nimble_codegen_options_t opt = nimble_codegen_default_options();
  opt.triple = "nvptx64-nvidia-cuda";
  nimble_codegen_output_t out;
  /* ... but not f64 */
  dcase d = {"dadd", K_BIN, NIMBLE_LN_ADD, NIMBLE_LN_F64, NIMBLE_LN_F64, 1};
  const nimble_ln_kernel *kd = build_case(A, &d);
  NIMBLE_ASSERT_OK(nimble_codegen_build(&k, 1, &opt, &out));
  nimble_codegen_output_deinit(&out);
  NIMBLE_ASSERT_ERROR(nimble_codegen_build(&kd, 1, &opt, &out), NIMBLE_UNIMPLEMENTED,
                      "kernel 'dadd': parameter 'a' is f64: nvptx64 kernels take f32, i32, i64 and u8 tensors");
  nimble_ln_arena_destroy(A);
}
END_TEST

/* The same kernels for aarch64, run under qemu-user when it and the cross
 * compiler are installed: a small aarch64 host program reads the cases
 * (arguments and the hand-worked expected bytes) from a file, calls each
 * kernel and compares, NaN matching any NaN. */
static const char host_source[] =
    "#include <dlfcn.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include \"nimble/kernel_abi.h\"\n"
    "static char err[256];\n"
    "static void set_error(const nimble_kernel_env_t *e, const char *m) { snprintf(err, sizeof err, \"%s\", m); }\n"
    "static int is_nan(const uint8_t *p, int code, int bits) {\n"
    "  uint64_t u = 0; memcpy(&u, p, bits / 8);\n"
    "  if (code == 2 && bits == 16) return (u & 0x7c00) == 0x7c00 && (u & 0x3ff);\n"
    "  if (code == 4 && bits == 16) return (u & 0x7f80) == 0x7f80 && (u & 0x7f);\n"
    "  if (code == 2 && bits == 32) return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu);\n"
    "  if (code == 2 && bits == 64) return (u >> 52 & 0x7ff) == 0x7ff && (u & 0xfffffffffffffull);\n"
    "  return 0;\n}\n"
    "int main(int argc, char **argv) {\n"
    "  void *h = dlopen(argv[1], RTLD_NOW);\n"
    "  if (!h) { printf(\"dlopen: %s\\n\", dlerror()); return 2; }\n"
    "  FILE *f = fopen(argv[2], \"rb\"); if (!f) return 3;\n"
    "  nimble_kernel_env_t env; memset(&env, 0, sizeof env);\n"
    "  env.struct_size = sizeof env; env.abi_version = NIMBLE_KERNEL_ABI_VERSION; env.set_error = set_error;\n"
    "  int cases = 0; char name[64]; uint32_t nl, na, n;\n"
    "  while (fread(&nl, 4, 1, f) == 1) {\n"
    "    if (nl >= sizeof name || fread(name, 1, nl, f) != nl) return 4;\n"
    "    name[nl] = 0;\n"
    "    if (fread(&na, 4, 1, f) != 1 || na > 3 || fread(&n, 4, 1, f) != 1) return 4;\n"
    "    static uint8_t buf[4][128]; DLTensor t[3]; DLTensor *args[3]; int64_t shape = n; uint8_t code[4], bits[4];\n"
    "    for (uint32_t a = 0; a <= na; a++) {\n"
    "      if (fread(&code[a], 1, 1, f) != 1 || fread(&bits[a], 1, 1, f) != 1) return 4;\n"
    "      if (fread(buf[a], 1, n * bits[a] / 8, f) != n * bits[a] / 8) return 4;\n"
    "      if (a < na) { DLTensor x = {buf[a], {kDLCPU, 0}, 1, {code[a], bits[a], 1}, &shape, NULL, 0}; t[a] = x; args[a] = &t[a]; }\n"
    "    }\n"
    "    nimble_kernel_fn fn = (nimble_kernel_fn)dlsym(h, name);\n"
    "    if (!fn) { printf(\"no %s\\n\", name); return 5; }\n"
    "    if (fn(args, (int32_t)na, &env) != 0) { printf(\"%s failed: %s\\n\", name, err); return 6; }\n"
    "    uint32_t o = na - 1, es = bits[o] / 8;\n"
    "    for (uint32_t k = 0; k < n; k++) {\n"
    "      const uint8_t *g = buf[o] + k * es, *w = buf[na] + k * es;\n"
    "      if (memcmp(g, w, es) && !(is_nan(g, code[o], bits[o]) && is_nan(w, code[o], bits[o]))) {\n"
    "        uint64_t gu = 0, wu = 0; memcpy(&gu, g, es); memcpy(&wu, w, es);\n"
    "        printf(\"%s element %u: got 0x%llx, want 0x%llx\\n\", name, k, (unsigned long long)gu, (unsigned long long)wu);\n"
    "        return 7;\n"
    "      }\n"
    "    }\n"
    "    cases++;\n"
    "  }\n"
    "  printf(\"aarch64 dtypes ok: %d cases\\n\", cases);\n"
    "  return 0;\n"
    "}\n";

static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *dir = strtok(buf, ":"); dir; dir = strtok(NULL, ":")) {
    char full[4200];
    snprintf(full, sizeof full, "%s/%s", dir, prog);
    if (access(full, X_OK) == 0) return 1;
  }
  return 0;
}

static void write_all(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

static void read_log(const char *path, char *text, size_t size) {
  text[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(text, 1, size - 1, f);
  text[n] = 0;
  fclose(f);
}

/* One case in the host program's format: name, argument count, element
 * count, then per argument (and the expected output last) its DLPack
 * code and bits and its bytes. */
static void put_case(FILE *f, const dcase *c) {
  int cmp = c->kind == K_BIN && c->op >= NIMBLE_LN_LT && c->op <= NIMBLE_LN_NE;
  nimble_ln_type_t ot = cmp ? NIMBLE_LN_U8 : c->out;
  uint32_t nl = (uint32_t)strlen(c->name), na = c->kind == K_BIN ? 3 : 2, n = RUN_N;
  fwrite(&nl, 4, 1, f), fwrite(c->name, 1, nl, f), fwrite(&na, 4, 1, f), fwrite(&n, 4, 1, f);
  uint8_t buf[RUN_N * 8];
  for (uint32_t a = 0; a <= na; a++) {
    /* inputs, the output (filled with 0xAB), the expected output */
    nimble_ln_type_t t = a + 1 < na ? c->in : ot;
    if (a == 0) fill(t, buf, c, c->fa, c->ua);
    else if (a == 1 && na == 3) fill(t, buf, c, c->fb, c->ub);
    else if (a == na) fill(t, buf, c, c->fwant, c->uwant);
    else memset(buf, 0xAB, sizeof buf);
    DLDataType d = dl_type(t);
    fwrite(&d.code, 1, 1, f), fwrite(&d.bits, 1, 1, f);
    fwrite(buf, 1, RUN_N * type_bytes(t), f);
  }
}

START_TEST(test_every_type_runs_on_aarch64_under_qemu) {
  nimble_ln_arena *A;
  NIMBLE_ASSERT_OK(nimble_ln_arena_create(&A));
  const nimble_ln_kernel *ks[N_CASES];
  for (size_t c = 0; c < N_CASES; c++) ks[c] = build_case(A, &kCases[c]);
  nimble_codegen_options_t opt = nimble_codegen_default_options();
  opt.triple = "aarch64-linux-gnu";
  nimble_codegen_output_t out;
  NIMBLE_ASSERT_OK(nimble_codegen_build(ks, N_CASES, &opt, &out));
  const uint8_t *e = out.shared_object;
  ck_assert_int_eq(e[18] | e[19] << 8, 183); /* EM_AARCH64 */
  if (!on_path("qemu-aarch64") || !on_path("aarch64-linux-gnu-gcc")) {
    printf("qemu-aarch64 or aarch64-linux-gnu-gcc not installed: built for aarch64 only\n");
  } else {
    char dir[] = "/tmp/nimble-dt64-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char so[256], src[256], exe[256], log[256], data[256], cmd[2048], text[2048];
    snprintf(so, sizeof so, "%s/kernels.so", dir);
    snprintf(src, sizeof src, "%s/host.c", dir);
    snprintf(exe, sizeof exe, "%s/host", dir);
    snprintf(log, sizeof log, "%s/log.txt", dir);
    snprintf(data, sizeof data, "%s/cases.bin", dir);
    write_all(so, out.shared_object, out.shared_object_size);
    write_all(src, host_source, strlen(host_source));
    FILE *f = fopen(data, "wb");
    ck_assert_ptr_nonnull(f);
    for (size_t c = 0; c < N_CASES; c++) put_case(f, &kCases[c]);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-gcc -O2 -I%s -I%s %s -o %s -ldl > %s 2>&1", NIMBLE_KERNEL_ABI_INCLUDE,
             NIMBLE_CROSS_DLPACK_INCLUDE, src, exe, log);
    int rc = system(cmd);
    read_log(log, text, sizeof text);
    ck_assert_msg(rc == 0, "cross compile failed: %s", text);
    snprintf(cmd, sizeof cmd, "qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib %s %s %s > %s 2>&1", exe, so, data, log);
    rc = system(cmd);
    read_log(log, text, sizeof text);
    char want[64];
    snprintf(want, sizeof want, "aarch64 dtypes ok: %zu cases", N_CASES);
    ck_assert_msg(rc == 0 && strstr(text, want), "qemu run failed (%d): %s", rc, text);
    unlink(so), unlink(src), unlink(exe), unlink(log), unlink(data);
    ck_assert_int_eq(rmdir(dir), 0);
  }
  nimble_codegen_output_deinit(&out);
  nimble_ln_arena_destroy(A);
}
END_TEST

int main(void) {
  Suite *s = suite_create("codegen_dtypes");
  TCase *tc = tcase_create("dtypes");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, build_all, free_all);
  tcase_add_test(tc, test_every_element_type_computes_the_hand_worked_values);
  tcase_add_test(tc, test_f64_math_is_double_precision);
  tcase_add_test(tc, test_a_wrong_dtype_argument_is_refused_with_the_expected_one);
  tcase_add_test(tc, test_ir_checks_the_classes_of_types);
  tcase_add_test(tc, test_constants_take_their_types_value_and_print_with_it);
  tcase_add_test(tc, test_narrow_types_vectorize_without_helper_calls);
  tcase_add_test(tc, test_nvptx64_refuses_other_types_by_name);
  tcase_add_test(tc, test_every_type_runs_on_aarch64_under_qemu);
  suite_add_tcase(s, tc);
  return nimble_test_run(s);
}
