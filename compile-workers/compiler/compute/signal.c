/* Signal operators (ONNX 17): the Hann, Hamming and Blackman windows of a
 * run-time length; dft (DFT: forward or inverse, onesided, zero-padded or
 * truncated to dft_length) and stft (STFT: frames of frame_length every
 * frame_step, optionally windowed), both as direct sums, O(n) per output
 * bin (no FFT yet), in f32; mel_weight_matrix (MelWeightMatrix: the
 * triangular filters of ONNX's reference, its mel/Hz conversions through
 * the kernels' exp and log in f32).
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

/* ---- dft and stft: direct sums, O(n) per output bin ---- */

#define REF(v) nimble_ln_ref(A_, (v))

static nimble_ln_expr *scalar_i64(cp_ctx *c, cp_node *v) {
  nimble_ln_expr *z[CP_MAX_RANK];
  for (int a = 0; a < v->rank; a++) z[a] = cp_i(c, 0);
  return cp_convert(c, cp_value(c, v, z), NIMBLE_LN_I64);
}

/* The transform length: positive and at most 2^31 (k * n stays exact). */
static void check_length(cp_ctx *c, nimble_ln_expr *L, const char *op) {
  cp_check(c, BIN(AND, BIN(GE, L, cp_i(c, 1)), BIN(LE, L, cp_i(c, INT64_C(1) << 31))),
           "%s: the transform length must be in [1, 2^31]", op);
}

static nimble_ln_expr *bins(cp_ctx *c, nimble_ln_expr *L, bool onesided) {
  return onesided ? cp_add(c, cp_div(c, L, cp_i(c, 2)), cp_i(c, 1)) : L;
}

static nimble_status_t shape_dft(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int ax;
  if (x->rank < 2 || x->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dft of rank %d %s (float32 only)", x->rank,
                              nimble_dtype_name(x->dtype));
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return nimble_ok();
  if (ax == x->rank - 1) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dft: the axis cannot be the last");
  nimble_ln_expr *last = x->ext[x->rank - 1];
  cp_check(c, BIN(OR, BIN(EQ, last, cp_i(c, 1)), BIN(EQ, last, cp_i(c, 2))),
           "dft: the last axis must be 1 (real) or 2 (complex)");
  nimble_ln_expr *L = n->n_in == 2 ? scalar_i64(c, n->in[1]) : x->ext[ax];
  check_length(c, L, "dft");
  n->type = NIMBLE_LN_F32;
  n->dtype = NIMBLE_DTYPE_FLOAT32;
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  n->ext[ax] = bins(c, L, cp_attr_int(n, "onesided") != 0);
  n->ext[x->rank - 1] = cp_i(c, 2);
  n->aux[0] = L;
  cp_check_numel(c, n->ext, n->rank, "dft");
  return nimble_ok();
}

/* re/im accumulation of x_n e^(-+i 2 pi k n / L) over n in [0, count):
 * xr, xi are the sample's parts (functions of the loop variable nv). */
static nimble_ln_stmt *dft_sum(cp_ctx *c, nimble_ln_var *nv, nimble_ln_expr *count, nimble_ln_expr *k,
                               nimble_ln_expr *L, nimble_ln_expr *xr, nimble_ln_expr *xi, bool inverse,
                               nimble_ln_var *re, nimble_ln_var *im) {
  nimble_ln_var *m = cp_var(c, "m", NIMBLE_LN_I64), *cv = cp_var(c, "cs", NIMBLE_LN_F32),
                *sv = cp_var(c, "sn", NIMBLE_LN_F32);
  nimble_ln_var *vr = cp_var(c, "xr", NIMBLE_LN_F32), *vi = cp_var(c, "xi", NIMBLE_LN_F32);
  nimble_ln_expr *C = REF(cv), *S = REF(sv), *R = REF(vr), *I = REF(vi);
  nimble_ln_expr *dr = inverse ? BIN(SUB, BIN(MUL, R, C), BIN(MUL, I, S)) : BIN(ADD, BIN(MUL, R, C), BIN(MUL, I, S));
  nimble_ln_expr *di = inverse ? BIN(ADD, BIN(MUL, I, C), BIN(MUL, R, S)) : BIN(SUB, BIN(MUL, I, C), BIN(MUL, R, S));
  nimble_ln_stmt *acc = nimble_ln_seq2(A_, nimble_ln_assign(A_, re, BIN(ADD, REF(re), dr)),
                                       nimble_ln_assign(A_, im, BIN(ADD, REF(im), di)));
  acc = nimble_ln_let(A_, vr, xr, nimble_ln_let(A_, vi, xi, acc));
  acc = nimble_ln_let(A_, cv, cos_sin_2pi(c, REF(m), L, false),
                      nimble_ln_let(A_, sv, cos_sin_2pi(c, REF(m), L, true), acc));
  acc = nimble_ln_let(A_, m, cp_rem(c, cp_mul(c, k, REF(nv)), L), acc);
  return cp_for(c, nv, count, NIMBLE_LN_SERIAL, 0, acc);
}

/* Stores re and im (scaled by 1 / L for an inverse) at the output index
 * whose last axis is 0 and 1. */
static nimble_ln_stmt *store_complex(cp_ctx *c, nimble_ln_param *o, nimble_ln_expr **oidx, int R, nimble_ln_var *re,
                                     nimble_ln_var *im, nimble_ln_expr *scale) {
  nimble_ln_expr *vr = REF(re), *vi = REF(im);
  if (scale) vr = BIN(MUL, vr, scale), vi = BIN(MUL, vi, scale);
  oidx[R - 1] = cp_i(c, 0);
  nimble_ln_stmt *a = nimble_ln_store(A_, o, nimble_ln_flat_index(A_, o, oidx), vr);
  oidx[R - 1] = cp_i(c, 1);
  nimble_ln_stmt *b = nimble_ln_store(A_, o, nimble_ln_flat_index(A_, o, oidx), vi);
  return nimble_ln_seq2(A_, a, b);
}

static nimble_ln_stmt *emit_dft(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  int ax, R = x->rank;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), R, &ax)) return NULL;
  bool inverse = cp_attr_int(n, "inverse") != 0;
  nimble_ln_var *Lv = cp_var(c, "len", NIMBLE_LN_I64);
  nimble_ln_expr *L = REF(Lv);
  nimble_ln_var *iv[CP_MAX_RANK], *nv = cp_var(c, "n", NIMBLE_LN_I64);
  nimble_ln_expr *idx[CP_MAX_RANK], *xi[CP_MAX_RANK], *oidx[CP_MAX_RANK];
  for (int a = 0; a < R - 1; a++) {
    iv[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = oidx[a] = xi[a] = REF(iv[a]);
  }
  xi[ax] = REF(nv);
  nimble_ln_expr *last = x->ext[R - 1];
  xi[R - 1] = cp_i(c, 0);
  nimble_ln_expr *re_in = cp_value(c, x, xi);
  xi[R - 1] = cp_min(c, cp_i(c, 1), cp_sub(c, last, cp_i(c, 1)));
  nimble_ln_expr *im_in = cp_value(c, x, xi);
  if (!re_in || !im_in) return NULL;
  im_in = SEL(BIN(EQ, last, cp_i(c, 2)), im_in, F(0));
  nimble_ln_var *re = cp_var(c, "re", NIMBLE_LN_F32), *im = cp_var(c, "im", NIMBLE_LN_F32);
  /* Samples past the input are the zero padding up to the length. */
  nimble_ln_stmt *sum = dft_sum(c, nv, cp_min(c, x->ext[ax], L), idx[ax], L, re_in, im_in, inverse, re, im);
  nimble_ln_expr *scale = inverse ? BIN(DIV, F(1), nimble_ln_cast(A_, NIMBLE_LN_F32, L)) : NULL;
  nimble_ln_stmt *body = nimble_ln_seq2(A_, sum, store_complex(c, o, oidx, R, re, im, scale));
  body = nimble_ln_decl(A_, re, F(0), nimble_ln_decl(A_, im, F(0), body));
  nimble_ln_expr *ext[CP_MAX_RANK];
  for (int a = 0; a < R - 1; a++) ext[a] = n->ext[a];
  nimble_ln_stmt *nest = cp_loops(c, iv, ext, R - 1, 64, body);
  return nimble_ln_let(A_, Lv, n->aux[0], nest);
}

/* stft(signal [B, S, 1 or 2], step, [window], [frame_length]). */
static nimble_status_t shape_stft(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  bool has_window = cp_attr_int(n, "has_window") != 0;
  int want = 2 + has_window;
  if (x->rank != 3 || x->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "stft of a signal other than [batch, length, 1 or 2] float32");
  if (n->n_in != want && n->n_in != want + 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "stft: %d inputs with has_window=%d", n->n_in, has_window);
  cp_check(c, BIN(OR, BIN(EQ, x->ext[2], cp_i(c, 1)), BIN(EQ, x->ext[2], cp_i(c, 2))),
           "stft: the last axis must be 1 (real) or 2 (complex)");
  nimble_ln_expr *step = scalar_i64(c, n->in[1]), *L = NULL;
  if (has_window) {
    cp_node *w = n->in[2];
    if (w->rank != 1 || w->type != NIMBLE_LN_F32)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "stft: the window must be a 1-D float32 tensor");
    L = w->ext[0];
  }
  if (n->n_in == want + 1) {
    nimble_ln_expr *fl = scalar_i64(c, n->in[want]);
    if (L) cp_check(c, cp_eq(c, L, fl), "stft: frame_length differs from the window's length");
    else L = fl;
  }
  if (!L) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "stft: give a window or a frame_length");
  check_length(c, L, "stft");
  cp_check(c, BIN(AND, BIN(GE, step, cp_i(c, 1)), BIN(LE, step, cp_i(c, INT64_C(1) << 40))),
           "stft: frame_step must be in [1, 2^40]");
  cp_check(c, BIN(LE, L, x->ext[1]), "stft: the frame is longer than the signal");
  n->type = NIMBLE_LN_F32;
  n->dtype = NIMBLE_DTYPE_FLOAT32;
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = cp_add(c, cp_div(c, cp_sub(c, x->ext[1], L), cp_max(c, step, cp_i(c, 1))), cp_i(c, 1));
  n->ext[2] = bins(c, L, cp_attr_int(n, "onesided") != 0);
  n->ext[3] = cp_i(c, 2);
  n->aux[0] = L;
  n->aux[1] = step;
  cp_check_numel(c, n->ext, 4, "stft");
  return nimble_ok();
}

static nimble_ln_stmt *emit_stft(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  bool has_window = cp_attr_int(n, "has_window") != 0;
  nimble_ln_var *Lv = cp_var(c, "len", NIMBLE_LN_I64), *Sv = cp_var(c, "step", NIMBLE_LN_I64);
  nimble_ln_var *iv[3], *nv = cp_var(c, "n", NIMBLE_LN_I64);
  nimble_ln_expr *idx[4];
  for (int a = 0; a < 3; a++) {
    iv[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = REF(iv[a]);
  }
  nimble_ln_expr *pos = cp_add(c, cp_mul(c, idx[1], REF(Sv)), REF(nv));
  nimble_ln_expr *last = x->ext[2];
  nimble_ln_expr *xr_i[3] = {idx[0], pos, cp_i(c, 0)},
                 *xi_i[3] = {idx[0], pos, cp_min(c, cp_i(c, 1), cp_sub(c, last, cp_i(c, 1)))};
  nimble_ln_expr *xr = cp_value(c, x, xr_i), *xi = cp_value(c, x, xi_i);
  if (!xr || !xi) return NULL;
  xi = SEL(BIN(EQ, last, cp_i(c, 2)), xi, F(0));
  if (has_window) {
    nimble_ln_expr *wi[1] = {REF(nv)};
    nimble_ln_expr *w = cp_value(c, n->in[2], wi);
    if (!w) return NULL;
    xr = BIN(MUL, xr, w), xi = BIN(MUL, xi, w);
  }
  nimble_ln_var *re = cp_var(c, "re", NIMBLE_LN_F32), *im = cp_var(c, "im", NIMBLE_LN_F32);
  nimble_ln_stmt *sum = dft_sum(c, nv, REF(Lv), idx[2], REF(Lv), xr, xi, false, re, im);
  nimble_ln_stmt *body = nimble_ln_seq2(A_, sum, store_complex(c, o, idx, 4, re, im, NULL));
  body = nimble_ln_decl(A_, re, F(0), nimble_ln_decl(A_, im, F(0), body));
  nimble_ln_stmt *nest = cp_loops(c, iv, n->ext, 3, 64, body);
  return nimble_ln_let(A_, Lv, n->aux[0], nimble_ln_let(A_, Sv, n->aux[1], nest));
}

/* ---- mel_weight_matrix ---- */

static nimble_status_t shape_mel(cp_ctx *c, cp_node *n) {
  if (strcmp(cp_attr_string(n, "dtype"), "float32"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "mel_weight_matrix of %s (float32 only)",
                              cp_attr_string(n, "dtype"));
  for (int i = 0; i < 5; i++)
    if (n->in[i]->rank > 1 || (i < 3 && n->in[i]->type != NIMBLE_LN_I64 && n->in[i]->type != NIMBLE_LN_I32) ||
        (i >= 3 && n->in[i]->type != NIMBLE_LN_F32))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "mel_weight_matrix: input %d has the wrong type", i);
  nimble_ln_expr *bins_n = scalar_i64(c, n->in[0]), *dft = scalar_i64(c, n->in[1]), *rate = scalar_i64(c, n->in[2]);
  cp_check(c, BIN(AND, BIN(GE, dft, cp_i(c, 1)), BIN(LE, dft, cp_i(c, INT64_C(1) << 31))),
           "mel_weight_matrix: dft_length must be in [1, 2^31]");
  cp_check(c, BIN(GE, rate, cp_i(c, 1)), "mel_weight_matrix: sample_rate must be positive");
  cp_check(c, BIN(AND, BIN(GE, bins_n, cp_i(c, 0)), BIN(LE, bins_n, cp_i(c, INT64_C(1) << 31))),
           "mel_weight_matrix: num_mel_bins must be in [0, 2^31]");
  n->type = NIMBLE_LN_F32;
  n->dtype = NIMBLE_DTYPE_FLOAT32;
  n->rank = 2;
  n->ext[0] = bins(c, dft, true);
  n->ext[1] = bins_n;
  cp_check_numel(c, n->ext, 2, "mel_weight_matrix");
  return nimble_ok();
}

/* Bin k of ONNX's reference: mel points evenly spaced from lower to upper
 * in num_mel_bins + 2 steps, back to Hz, floor((dft + 1) hz / rate). */
static nimble_ln_expr *mel_bin(cp_ctx *c, cp_node *n, nimble_ln_expr *k) {
  nimble_ln_expr *z[1] = {cp_i(c, 0)};
  nimble_ln_expr *lo = cp_value(c, n->in[3], n->in[3]->rank ? z : NULL);
  nimble_ln_expr *hi = cp_value(c, n->in[4], n->in[4]->rank ? z : NULL);
  nimble_ln_expr *nb = nimble_ln_cast(A_, NIMBLE_LN_F32, cp_add(c, scalar_i64(c, n->in[0]), cp_i(c, 2)));
  const double k1 = 2595.0 / 2.30258509299404568402; /* 2595 log10(v) = k1 ln(v) */
  nimble_ln_expr *mlo = BIN(MUL, F(k1), nimble_ln_unary(A_, NIMBLE_LN_LOG, BIN(ADD, F(1), BIN(DIV, lo, F(700)))));
  nimble_ln_expr *mhi = BIN(MUL, F(k1), nimble_ln_unary(A_, NIMBLE_LN_LOG, BIN(ADD, F(1), BIN(DIV, hi, F(700)))));
  nimble_ln_expr *mel = BIN(ADD, BIN(MUL, nimble_ln_cast(A_, NIMBLE_LN_F32, k), BIN(DIV, BIN(SUB, mhi, mlo), nb)), mlo);
  nimble_ln_expr *hz = BIN(MUL, F(700), BIN(SUB, nimble_ln_unary(A_, NIMBLE_LN_EXP, BIN(DIV, mel, F(k1))), F(1)));
  nimble_ln_expr *dft1 = nimble_ln_cast(A_, NIMBLE_LN_F32, cp_add(c, scalar_i64(c, n->in[1]), cp_i(c, 1)));
  nimble_ln_expr *q = BIN(DIV, BIN(MUL, dft1, hz), nimble_ln_cast(A_, NIMBLE_LN_F32, scalar_i64(c, n->in[2])));
  nimble_ln_expr *t = nimble_ln_cast(A_, NIMBLE_LN_F32, nimble_ln_cast(A_, NIMBLE_LN_I64, q));
  return nimble_ln_cast(A_, NIMBLE_LN_I64, SEL(BIN(GT, t, q), BIN(SUB, t, F(1)), t));
}

static nimble_ln_expr *value_mel(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *j = idx[0], *i = idx[1];
  nimble_ln_expr *l = mel_bin(c, n, i), *m = mel_bin(c, n, cp_add(c, i, cp_i(c, 1))),
                 *h = mel_bin(c, n, cp_add(c, i, cp_i(c, 2)));
  nimble_ln_expr *jf = nimble_ln_cast(A_, NIMBLE_LN_F32, j);
  nimble_ln_expr *lf = nimble_ln_cast(A_, NIMBLE_LN_F32, l), *mf = nimble_ln_cast(A_, NIMBLE_LN_F32, m);
  nimble_ln_expr *hf = nimble_ln_cast(A_, NIMBLE_LN_F32, h);
  /* Rising edge over [l, m] (a single 1 at m when l == m), then the falling
   * edge over [m, h) written over it, as the reference's two loops. */
  nimble_ln_expr *up =
      SEL(BIN(EQ, l, m), SEL(BIN(EQ, j, m), F(1), F(0)),
          SEL(BIN(AND, BIN(GE, j, l), BIN(LE, j, m)), BIN(DIV, BIN(SUB, jf, lf), BIN(SUB, mf, lf)), F(0)));
  nimble_ln_expr *down = BIN(AND, BIN(GT, h, m), BIN(AND, BIN(GE, j, m), BIN(LT, j, h)));
  return SEL(down, BIN(DIV, BIN(SUB, hf, jf), BIN(SUB, hf, mf)), up);
}

const cp_def cp_defs_signal[] = {
    {"window", CP_INJECTIVE, shape_window, value_window, NULL, NULL, NULL, NULL},
    {"dft", CP_ANCHOR_ROW, shape_dft, NULL, NULL, emit_dft, NULL, NULL},
    {"stft", CP_ANCHOR_ROW, shape_stft, NULL, NULL, emit_stft, NULL, NULL},
    {"mel_weight_matrix", CP_INJECTIVE, shape_mel, value_mel, NULL, NULL, NULL, NULL},
};
const int cp_defs_signal_count = (int)(sizeof cp_defs_signal / sizeof cp_defs_signal[0]);
