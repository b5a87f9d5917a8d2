/* Signal operators: the Hann, Hamming and Blackman windows (ONNX 17) of a
 * run-time length.
 *
 * cos and sin of 2 pi m / N for integers 0 <= m < N are computed without
 * libm and without a large argument: the nearest quarter turn q =
 * round(4 m / N) and the remainder 4 m - q N are exact integers, leaving
 * an angle of at most pi / 4, where Taylor polynomials of degree 9 (sin)
 * and 8 (cos) are accurate to about 2e-9; the quarter picks and signs the
 * result. So window values are correctly rounded f32 in practice, and the
 * endpoints of a symmetric window are exactly 0 (Hann) where ONNX's
 * reference, which multiplies out 2 pi k / N in f32 first, gives ~1e-8. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define F(v) nimble_ln_f32(A_, (v))

/* cos (want_sin false) or sin of 2 pi m / N, for i64 0 <= m < N (N >= 1,
 * N <= 2^40 so 8 m does not overflow). */
static nimble_ln_expr *cos_sin_2pi(cp_ctx *c, nimble_ln_expr *m, nimble_ln_expr *N, bool want_sin) {
  nimble_ln_expr *q = cp_div(c, cp_add(c, cp_mul(c, m, cp_i(c, 8)), N), cp_mul(c, N, cp_i(c, 2)));
  nimble_ln_expr *rn = cp_sub(c, cp_mul(c, m, cp_i(c, 4)), cp_mul(c, q, N));
  nimble_ln_expr *t = BIN(MUL, BIN(DIV, nimble_ln_cast(A_, NIMBLE_LN_F32, rn), nimble_ln_cast(A_, NIMBLE_LN_F32, N)),
                          F(1.57079632679489661923));
  nimble_ln_expr *t2 = BIN(MUL, t, t);
  nimble_ln_expr *sp = F(1.0 / 362880.0);
  sp = BIN(ADD, BIN(MUL, sp, t2), F(-1.0 / 5040.0));
  sp = BIN(ADD, BIN(MUL, sp, t2), F(1.0 / 120.0));
  sp = BIN(ADD, BIN(MUL, sp, t2), F(-1.0 / 6.0));
  nimble_ln_expr *s = BIN(ADD, t, BIN(MUL, BIN(MUL, sp, t2), t));
  nimble_ln_expr *cp = F(1.0 / 40320.0);
  cp = BIN(ADD, BIN(MUL, cp, t2), F(-1.0 / 720.0));
  cp = BIN(ADD, BIN(MUL, cp, t2), F(1.0 / 24.0));
  cp = BIN(ADD, BIN(MUL, cp, t2), F(-0.5));
  nimble_ln_expr *co = BIN(ADD, F(1.0), BIN(MUL, cp, t2));
  /* The quarter (q = 4 is the full turn). */
  nimble_ln_expr *qm = cp_rem(c, cp_add(c, q, want_sin ? cp_i(c, 3) : cp_i(c, 0)), cp_i(c, 4));
  /* cos(q pi/2 + t) for q = 0..3: c, -s, -c, s; sin is cos a quarter earlier. */
  nimble_ln_expr *odd = BIN(EQ, cp_rem(c, qm, cp_i(c, 2)), cp_i(c, 1));
  nimble_ln_expr *neg = BIN(OR, BIN(EQ, qm, cp_i(c, 1)), BIN(EQ, qm, cp_i(c, 2)));
  nimble_ln_expr *v = SEL(odd, s, co);
  return SEL(neg, nimble_ln_unary(A_, NIMBLE_LN_NEG, v), v);
}

/* ---- window(size) ---- */

static nimble_status_t shape_window(cp_ctx *c, cp_node *n) {
  cp_node *sz = n->in[0];
  const char *kind = cp_attr_string(n, "kind"), *dt = cp_attr_string(n, "dtype");
  if (strcmp(kind, "hann") && strcmp(kind, "hamming") && strcmp(kind, "blackman"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "window '%s'", kind);
  if (strcmp(dt, "float32")) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "window of %s (float32 only)", dt);
  if (sz->rank > 1 || (sz->type != NIMBLE_LN_I64 && sz->type != NIMBLE_LN_I32))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "window: the size must be an integer scalar");
  if (sz->rank == 1) cp_check(c, cp_eq(c, sz->ext[0], cp_i(c, 1)), "window: the size must be one value");
  nimble_ln_expr *z[1] = {cp_i(c, 0)};
  nimble_ln_expr *size = cp_convert(c, cp_value(c, sz, z), NIMBLE_LN_I64);
  n->type = NIMBLE_LN_F32;
  n->dtype = NIMBLE_DTYPE_FLOAT32;
  n->rank = 1;
  n->ext[0] = size;
  cp_check_numel(c, n->ext, 1, "window");
  return nimble_ok();
}

static nimble_ln_expr *value_window(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  const char *kind = cp_attr_string(n, "kind");
  bool periodic = cp_attr_int(n, "periodic") != 0;
  nimble_ln_expr *k = idx[0], *N = periodic ? n->ext[0] : cp_sub(c, n->ext[0], cp_i(c, 1));
  /* A symmetric window of one point is [1] (N would be 0), as SciPy's. */
  nimble_ln_expr *deg = BIN(LE, N, cp_i(c, 0)), *Ns = cp_max(c, N, cp_i(c, 1));
  nimble_ln_expr *m = SEL(BIN(GE, k, Ns), cp_sub(c, k, Ns), k);
  nimble_ln_expr *c1 = cos_sin_2pi(c, m, Ns, false), *v;
  if (!strcmp(kind, "hann")) {
    v = BIN(SUB, F(0.5), BIN(MUL, F(0.5), c1));
  } else if (!strcmp(kind, "hamming")) {
    v = BIN(SUB, F(25.0 / 46.0), BIN(MUL, F(21.0 / 46.0), c1));
  } else {
    nimble_ln_expr *m2 = cp_mul(c, m, cp_i(c, 2));
    m2 = SEL(BIN(GE, m2, Ns), cp_sub(c, m2, Ns), m2);
    nimble_ln_expr *c2 = cos_sin_2pi(c, m2, Ns, false);
    v = BIN(ADD, BIN(SUB, F(0.42), BIN(MUL, F(0.5), c1)), BIN(MUL, F(0.08), c2));
  }
  return SEL(deg, F(1), v);
}

const cp_def cp_defs_signal[] = {
    {"window", CP_INJECTIVE, shape_window, value_window, NULL, NULL, NULL, NULL},
};
const int cp_defs_signal_count = (int)(sizeof cp_defs_signal / sizeof cp_defs_signal[0]);
