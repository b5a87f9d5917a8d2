/* Math operators added for the ONNX importer: inverse trigonometric
 * functions (element-wise), the determinant, einsum, bit shifts, the
 * signal windows (Hann, Hamming, Blackman) whose length is a run-time
 * scalar, and the spectral operators DFT, STFT and MelWeightMatrix. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_status_t rel_unary_float(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

/* [..., n, n] -> [...] */
static nimble_status_t rel_det(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, NIMBLE_MAX_RANK));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  nimble_dim_t d;
  nimble_status_t s = nimble_dim_unify(call->ctx, x->dims[x->rank - 2], x->dims[x->rank - 1], &d);
  if (s) {
    char buf[160];
    nimble_status_free(s);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "det needs square matrices, got %s", SIG_STR(x, buf));
  }
  nimble_tensor_sig_t r = *x;
  r.rank -= 2;
  return nimble_rel_one(out, num_out, &r);
}

/* window(size): [size] of dtype; size is a scalar read at run time. */
static nimble_status_t rel_window(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 0, 1));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 0));
  const char *kind = A_STRING(call, "kind");
  if (strcmp(kind, "hann") != 0 && strcmp(kind, "hamming") != 0 && strcmp(kind, "blackman") != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "unknown window '%s'", kind);
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  r.rank = 1;
  int64_t n;
  if (nimble_rel_value_int(call, 0, 0, &n)) {
    if (n < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "window size %" PRId64 " is negative", n);
    r.dims[0] = nimble_dim_const(n);
  } else if (nimble_dim_ctx_is_concrete(call->ctx)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "window needs the value of its size");
  } else {
    r.dims[0] = nimble_dim_any();
  }
  return nimble_rel_one(out, num_out, &r);
}

/* A scalar (or one-element) integer input's value, or Any; an error in
 * concrete mode (a shape function must read it). */
static nimble_status_t scalar_dim(const nimble_rel_call_t *call, size_t i, const char *what, nimble_dim_t *out) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  char buf[160];
  if (s->rank > 1 || !nimble_dtype_is_int(s->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s must be an integer scalar, got %s", what, SIG_STR(s, buf));
  int64_t v;
  if (nimble_rel_value_int(call, i, 0, &v)) {
    if (v < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s %" PRId64 " is negative", what, v);
    *out = nimble_dim_const(v);
  } else if (nimble_dim_ctx_is_concrete(call->ctx)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "'%s' needs the value of %s", call->op->name, what);
  } else {
    *out = nimble_dim_any();
  }
  return nimble_ok();
}

/* onesided: floor(n / 2) + 1 bins. */
static nimble_dim_t bins_of(nimble_dim_t n, bool onesided) {
  if (!onesided) return n;
  return n.kind == NIMBLE_DIM_CONST ? nimble_dim_const(n.value / 2 + 1) : nimble_dim_any();
}

/* dft(x [..., n, ..., 1 or 2], [dft_length]) -> [..., bins, ..., 2]. */
static nimble_status_t rel_dft(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  char buf[160];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 2, NIMBLE_MAX_RANK));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  nimble_dim_t last = nimble_dim_resolve(call->ctx, x->dims[x->rank - 1]);
  if (last.kind == NIMBLE_DIM_CONST && last.value != 1 && last.value != 2)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the last axis of %s must be 1 (real) or 2 (complex)",
                              SIG_STR(x, buf));
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  if (axis == x->rank - 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "the transform axis cannot be the last (real/imaginary) axis");
  nimble_dim_t n = x->dims[axis];
  if (call->num_inputs == 2) NIMBLE_RETURN_IF_ERROR(scalar_dim(call, 1, "dft_length", &n));
  nimble_tensor_sig_t r = *x;
  r.dims[axis] = bins_of(nimble_dim_resolve(call->ctx, n), A_INT(call, "onesided") != 0);
  r.dims[x->rank - 1] = nimble_dim_const(2);
  return nimble_rel_one(out, num_out, &r);
}

/* stft(signal [B, S, 1 or 2], frame_step, [window [L]], [frame_length])
 * -> [B, frames, bins, 2]; has_window says whether input 2 is the window. */
static nimble_status_t rel_stft(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 0, 3, 3));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, 0));
  bool has_window = A_INT(call, "has_window") != 0;
  size_t want = 2 + (has_window ? 1 : 0);
  if (call->num_inputs != want && call->num_inputs != want + 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu inputs with has_window=%d", call->num_inputs, has_window);
  nimble_dim_t step, len = nimble_dim_any();
  NIMBLE_RETURN_IF_ERROR(scalar_dim(call, 1, "frame_step", &step));
  if (has_window) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, 2, 1, 1));
    len = call->inputs[2].dims[0];
  }
  if (call->num_inputs == want + 1) {
    nimble_dim_t fl;
    NIMBLE_RETURN_IF_ERROR(scalar_dim(call, want, "frame_length", &fl));
    if (has_window) NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, len, fl, &len));
    else len = fl;
  } else if (!has_window) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "give a window or a frame_length");
  }
  nimble_dim_t S = nimble_dim_resolve(call->ctx, x->dims[1]), L = nimble_dim_resolve(call->ctx, len);
  step = nimble_dim_resolve(call->ctx, step);
  nimble_tensor_sig_t r = *x;
  r.dims[1] = nimble_dim_any();
  if (S.kind == NIMBLE_DIM_CONST && L.kind == NIMBLE_DIM_CONST && step.kind == NIMBLE_DIM_CONST) {
    if (step.value < 1 || L.value > S.value)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "frame_step %" PRId64 " and frame length %" PRId64
                                " do not fit a signal of %" PRId64, step.value, L.value, S.value);
    r.dims[1] = nimble_dim_const((S.value - L.value) / step.value + 1);
  }
  r.dims[2] = bins_of(L, A_INT(call, "onesided") != 0);
  r.rank = 4;
  r.dims[3] = nimble_dim_const(2);
  return nimble_rel_one(out, num_out, &r);
}

/* mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_hz,
 * upper_hz) -> [dft_length / 2 + 1, num_mel_bins] of dtype. */
static nimble_status_t rel_mel(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  nimble_dim_t bins, dft, rate;
  NIMBLE_RETURN_IF_ERROR(scalar_dim(call, 0, "num_mel_bins", &bins));
  NIMBLE_RETURN_IF_ERROR(scalar_dim(call, 1, "dft_length", &dft));
  NIMBLE_RETURN_IF_ERROR(scalar_dim(call, 2, "sample_rate", &rate));
  for (size_t i = 3; i < 5; i++) {
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_rank(call, i, 0, 1));
    NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_float(call, i));
  }
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  r.rank = 2;
  r.dims[0] = bins_of(dft, true);
  r.dims[1] = bins;
  return nimble_rel_one(out, num_out, &r);
}

/* Einsum: a term per input ("bij,bjk->bik"), letters name dims (a
 * letter seen twice is one dim: "ii" is a diagonal), "..." stands for
 * broadcast leading dims. Without "->" the output is "..." then the
 * letters seen once, in ASCII order (uppercase first), as NumPy's. */
static nimble_status_t rel_einsum(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  const char *eq = A_STRING(call, "equation");
  char e[256];
  size_t n = 0;
  for (const char *p = eq; *p; p++) {
    if (*p == ' ') continue;
    if (n + 1 >= sizeof e) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "equation is too long");
    e[n++] = *p;
  }
  e[n] = 0;
  char *arrow = strstr(e, "->");
  if (arrow) *arrow = 0;
  const char *rhs = arrow ? arrow + 2 : NULL;
  nimble_dim_t letter[52];
  bool seen[52] = {false};
  int count[52] = {0};
  nimble_dim_t ell[NIMBLE_MAX_RANK];
  size_t ell_rank = 0;
  bool has_ell = false;
  size_t input = 0;
  char *term = e;
  for (;;) {
    char *comma = strchr(term, ',');
    if (comma) *comma = 0;
    if (input >= call->num_inputs)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "equation has more terms than the %zu inputs", call->num_inputs);
    const nimble_tensor_sig_t *x = &call->inputs[input];
    if (x->dtype != call->inputs[0].dtype) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "inputs differ in dtype");
    size_t letters = 0;
    bool t_ell = false;
    for (const char *p = term; *p; p++) {
      if (*p == '.') {
        if (strncmp(p, "...", 3) != 0 || t_ell) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "bad ellipsis in '%s'", eq);
        t_ell = true;
        p += 2;
      } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
        letters++;
      } else {
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "bad character '%c' in equation '%s'", *p, eq);
      }
    }
    if (letters > x->rank || (!t_ell && letters != x->rank))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "term '%s' does not fit input %zu of rank %zu", term, input, x->rank);
    size_t er = x->rank - letters, d = 0;
    for (const char *p = term; *p; p++) {
      if (*p == '.') {
        /* Broadcast this input's ellipsis dims into the shared ones. */
        has_ell = true;
        if (er > ell_rank) {
          for (size_t k = ell_rank; k-- > 0;) ell[k + er - ell_rank] = ell[k];
          for (size_t k = 0; k < er - ell_rank; k++) ell[k] = nimble_dim_const(1);
          ell_rank = er;
        }
        for (size_t k = 0; k < er; k++)
          NIMBLE_RETURN_IF_ERROR(nimble_dim_broadcast(call->ctx, ell[ell_rank - er + k], x->dims[d + k], &ell[ell_rank - er + k]));
        d += er;
        p += 2;
        continue;
      }
      int li = *p >= 'a' ? *p - 'a' : 26 + *p - 'A';
      if (!seen[li]) {
        letter[li] = x->dims[d];
        seen[li] = true;
      } else {
        NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, letter[li], x->dims[d], &letter[li]));
      }
      count[li]++;
      d++;
    }
    input++;
    if (!comma) break;
    term = comma + 1;
  }
  if (input != call->num_inputs)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "equation has %zu terms for %zu inputs", input, call->num_inputs);
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = call->inputs[0].dtype;
  if (rhs) {
    for (const char *p = rhs; *p; p++) {
      if (*p == '.') {
        if (strncmp(p, "...", 3) != 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "bad ellipsis in '%s'", eq);
        for (size_t k = 0; k < ell_rank && r.rank < NIMBLE_MAX_RANK; k++) r.dims[r.rank++] = ell[k];
        p += 2;
        continue;
      }
      int li = (*p >= 'a' && *p <= 'z') ? *p - 'a' : (*p >= 'A' && *p <= 'Z') ? 26 + *p - 'A' : -1;
      if (li < 0 || !seen[li])
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "output letter '%c' is not in the inputs of '%s'", *p, eq);
      if (r.rank == NIMBLE_MAX_RANK) return nimble_status_make(NIMBLE_OUT_OF_RANGE, "output rank exceeds %d", NIMBLE_MAX_RANK);
      r.dims[r.rank++] = letter[li];
    }
  } else {
    if (has_ell)
      for (size_t k = 0; k < ell_rank; k++) r.dims[r.rank++] = ell[k];
    /* NumPy's order is ASCII: 'A'..'Z' (26..51 here) before 'a'..'z'. */
    for (int k = 0; k < 52; k++) {
      int li = (k + 26) % 52;
      if (count[li] == 1) {
        if (r.rank == NIMBLE_MAX_RANK) return nimble_status_make(NIMBLE_OUT_OF_RANGE, "output rank exceeds %d", NIMBLE_MAX_RANK);
        r.dims[r.rank++] = letter[li];
      }
    }
  }
  return nimble_rel_one(out, num_out, &r);
}

/* x, y integers, broadcast. */
static nimble_status_t rel_bit_shift(const nimble_rel_call_t *call, nimble_tensor_sig_t *out, size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 0));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_same_dtype(call, 0, 1));
  const char *dir = A_STRING(call, "direction");
  if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "direction must be LEFT or RIGHT, got '%s'", dir);
  NIMBLE_RETURN_IF_ERROR(nimble_sig_broadcast(call->ctx, &call->inputs[0], &call->inputs[1], &out[0]));
  *num_out = 1;
  return nimble_ok();
}

static const nimble_attr_spec_t kEinsum[] = {
    {"equation", NIMBLE_ATTR_STRING, true, {NIMBLE_ATTR_STRING, 0, 0, NULL, 0, NULL}, "e.g. \"bij,bjk->bik\""},
};
static const nimble_attr_spec_t kBitShift[] = {ATTR_STRING("direction", "LEFT", "LEFT or RIGHT")};
static const nimble_attr_spec_t kWindow[] = {
    ATTR_STRING("kind", "hann", "hann, hamming or blackman"),
    ATTR_INT("periodic", 1, "periodic (1) or symmetric (0)"),
    ATTR_STRING("dtype", "float32", "element type"),
};

static const nimble_attr_spec_t kDft[] = {
    ATTR_INT("axis", 1, "the transformed axis (not the last)"),
    ATTR_INT("inverse", 0, "inverse transform (scaled by 1 / n)"),
    ATTR_INT("onesided", 0, "only the floor(n / 2) + 1 non-redundant bins"),
};
static const nimble_attr_spec_t kStft[] = {
    ATTR_INT("onesided", 1, "only the floor(n / 2) + 1 non-redundant bins"),
    ATTR_INT("has_window", 0, "input 2 is the window (else the frame length, when given)"),
};
static const nimble_attr_spec_t kMel[] = {ATTR_STRING("dtype", "float32", "element type")};

#define UNARY(nm, doc) \
  {nm, doc, 1, 1, NO_ATTRS, rel_unary_float, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_ELEMWISE, false}

const nimble_op nimble_ops_math_extra[] = {
    UNARY("acos", "arc cosine"),
    UNARY("asin", "arc sine"),
    UNARY("atan", "arc tangent"),
    {"det", "determinant of the last two (square) dims", 1, 1, NO_ATTRS, rel_det, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL,
     0, NIMBLE_FUSE_OPAQUE, false},
    {"einsum", "Einstein summation over the equation's terms (ONNX Einsum)", 1, -1, ATTRS(kEinsum), rel_einsum,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false},
    {"bit_shift", "x << y or x >> y, broadcast (integers)", 2, 2, ATTRS(kBitShift), rel_bit_shift,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_BROADCAST, false},
    {"window", "a Hann, Hamming or Blackman window of a run-time length", 1, 1, ATTRS(kWindow), rel_window,
     NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 0, NIMBLE_FUSE_OPAQUE, false},
    {"dft", "discrete Fourier transform along axis (ONNX DFT); dft_length as input 1", 1, 2, ATTRS(kDft), rel_dft,
     NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false},
    {"stft", "short-time Fourier transform (ONNX STFT): signal, frame_step, [window], [frame_length]", 2, 4,
     ATTRS(kStft), rel_stft, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 0xeu, NIMBLE_FUSE_OPAQUE, false},
    {"mel_weight_matrix", "ONNX MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters", 5, 5,
     ATTRS(kMel), rel_mel, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 0x1fu, NIMBLE_FUSE_OPAQUE, false},
};
const size_t nimble_ops_math_extra_count = sizeof nimble_ops_math_extra / sizeof nimble_ops_math_extra[0];
