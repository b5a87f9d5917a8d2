/* resize and dyn_resize (ONNX Resize and Upsample): nearest, linear and
 * cubic interpolation over every axis, with ONNX's coordinate
 * transformation modes (half_pixel, pytorch_half_pixel, asymmetric,
 * align_corners, tf_half_pixel_for_nn, and tf_crop_and_resize with its roi
 * input and extrapolation_value, in f32), nearest modes, cubic_coeff_a and
 * exclude_outside, as ONNX's reference (onnx/backend/test/case/node/
 * resize.py) defines them:
 *
 *   output extent  sizes[a], or floor(in * scales[a]) (exactly: the f32
 *                  product's rounding error is recovered with Dekker's
 *                  two-product, no FMA or fast-math needed)
 *   source x_ori   from the output index by the transformation mode, with
 *                  the scale out/in for sizes (computed as an exact
 *                  fraction N / D in i64) or scales[a] (f32: a candidate
 *                  floor from the f32 quotient, then the exact signs of
 *                  x_ori - v at the floor, the next integer and the half
 *                  between, each from an error-free product), so
 *                  floor(x_ori), "x_ori is an integer" and "its fraction
 *                  is below / at / above one half" are decided exactly as
 *                  the reference's real numbers would be
 *   taps           nearest: one (by nearest_mode); linear: 2, cubic: 4
 *                  around x_ori, weights from the distance, indices
 *                  clamped into the axis (edge padding), or weights zeroed
 *                  outside and renormalized (exclude_outside)
 *
 * An axis whose extent does not change (scale 1, or the size equal to the
 * input's) is the identity in every mode (tf_half_pixel_for_nn's formula
 * would move it by half a pixel, which round_prefer_ceil and ceil would
 * turn into a shift of the batch and channel axes of [1, 1, s, s] scales;
 * it is copied there too); at run time its tap loop runs once, so resizing H and W of NCHW reads 4 (linear) or 16
 * (cubic) values per output. The kernel writes its own nest: per axis the loop-invariant values first, per output
 * element the source coordinates, then the tap loops. Interpolation is in f32; nearest copies any element type. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define F(v) nimble_ln_f32(A_, (v))
#define REF(v) nimble_ln_ref(A_, (v))

enum { RZ_IDENT = 0, RZ_SIZES, RZ_SCALES };
enum { CT_HALF = 0, CT_PYTORCH, CT_ASYM, CT_ALIGN, CT_TF_NN, CT_CROP };
enum { NM_ROUND_FLOOR = 0, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };

typedef struct rz_spec {
  int mode; /* 0 nearest, 1 linear, 2 cubic */
  int ctm, nearest;
  double a;
  bool exclude;
  int kind[CP_MAX_RANK]; /* RZ_* per axis */
} rz_spec;

static bool parse_spec(cp_ctx *c, cp_node *n, rz_spec *s) {
  memset(s, 0, sizeof *s);
  const char *mode = cp_attr_string(n, "mode"), *ctm = cp_attr_string(n, "coordinate_transformation_mode");
  const char *nm = cp_attr_string(n, "nearest_mode");
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel",    "pytorch_half_pixel",  "asymmetric",
                                     "align_corners", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  s->mode = s->ctm = s->nearest = -1;
  for (int i = 0; i < 3; i++)
    if (!strcmp(mode, modes[i])) s->mode = i;
  for (int i = 0; i < 6; i++)
    if (!strcmp(ctm, ctms[i])) s->ctm = i;
  for (int i = 0; i < 4; i++)
    if (!strcmp(nm, nms[i])) s->nearest = i;
  if (s->mode < 0) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s mode '%s'", c->prim, n->op->name, mode), false;
  if (s->ctm < 0)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s coordinate_transformation_mode '%s'", c->prim, n->op->name, ctm),
           false;
  if (s->nearest < 0)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s nearest_mode '%s'", c->prim, n->op->name, nm), false;
  if (s->ctm == CT_CROP && (strcmp(n->op->name, "dyn_resize") || n->n_in != 3))
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: tf_crop_and_resize needs a roi input", c->prim), false;
  if (n->n_in == 3 && (n->in[2]->rank != 1 || n->in[2]->type != NIMBLE_LN_F32))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: a roi other than a 1-D float32 tensor", c->prim), false;
  s->a = cp_attr_float(n, "cubic_coeff_a");
  s->exclude = cp_attr_int(n, "exclude_outside") != 0;
  cp_node *x = n->in[0];
  if (s->mode != 0 && x->type != NIMBLE_LN_F32)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s interpolation of %s (float32 only; nearest takes any type)",
                   c->prim, modes[s->mode], nimble_dtype_name(x->dtype)),
           false;
  if (!strcmp(n->op->name, "resize")) {
    size_t ns;
    const int64_t *sizes = cp_attr_ints(n, "sizes", &ns);
    if ((int)ns != x->rank)
      return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: resize has %zu sizes for rank %d", c->prim, ns, x->rank), false;
    for (int a = 0; a < x->rank; a++) {
      int64_t in;
      bool same = sizes[a] == -1 || (cp_const_i(x->ext[a], &in) && in == sizes[a]);
      s->kind[a] = same ? RZ_IDENT : RZ_SIZES;
    }
    return true;
  }
  cp_node *v = n->in[1];
  int64_t len;
  if (v->rank != 1 || !cp_const_i(v->ext[0], &len) || len != x->rank)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: dyn_resize needs one scale or size per axis of the input",
                   c->prim),
           false;
  int kind = v->type == NIMBLE_LN_F32 ? RZ_SCALES : RZ_SIZES;
  if (v->type != NIMBLE_LN_F32 && v->type != NIMBLE_LN_I64 && v->type != NIMBLE_LN_I32)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: dyn_resize scales of %s", c->prim, nimble_dtype_name(v->dtype)), false;
  for (int a = 0; a < x->rank; a++) s->kind[a] = kind;
  return true;
}

/* floor(y) for |y| < 2^62 (the coordinates here are far smaller). */
static nimble_ln_expr *floor_f(cp_ctx *c, nimble_ln_expr *y) {
  nimble_ln_expr *t = nimble_ln_cast(A_, NIMBLE_LN_F32, nimble_ln_cast(A_, NIMBLE_LN_I64, y));
  return SEL(BIN(GT, t, y), BIN(SUB, t, F(1)), t);
}

/* Let-bindings collected while building an element's expressions, so a
 * value used several times is computed once (the loop-nest IR is emitted
 * as trees). */
typedef struct rz_lets {
  nimble_ln_var *v[512];
  nimble_ln_expr *e[512];
  int n;
} rz_lets;

static nimble_ln_expr *bind(cp_ctx *c, rz_lets *L, nimble_ln_expr *e) {
  if (!e) return NULL;
  if (L->n >= 512) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: resize needs too many temporaries", c->prim);
  if (e->kind == NIMBLE_LN_E_CONST_F || e->kind == NIMBLE_LN_E_CONST_I || e->kind == NIMBLE_LN_E_VAR) return e;
  nimble_ln_var *v = cp_var(c, "r", e->type);
  L->v[L->n] = v;
  L->e[L->n++] = e;
  return REF(v);
}

static nimble_ln_stmt *wrap(cp_ctx *c, rz_lets *L, int from, nimble_ln_stmt *body) {
  for (int i = L->n - 1; i >= from && body; i--) body = nimble_ln_let(A_, L->v[i], L->e[i], body);
  L->n = from;
  return body;
}

/* Dekker's split of an f32 into two halves of 12 bits (exact products). */
static void split2(cp_ctx *c, rz_lets *L, nimble_ln_expr *v, nimble_ln_expr **hi, nimble_ln_expr **lo) {
  nimble_ln_expr *t = bind(c, L, BIN(MUL, F(4097.0), v));
  *hi = bind(c, L, BIN(SUB, t, BIN(SUB, t, v)));
  *lo = bind(c, L, BIN(SUB, v, *hi));
}

/* The sign (-1, 0, 1 as i64) of a - t * (dh + dl) for f32 a, t, dh, dl
 * with |dl| tiny against dh: t * dh = p + e exactly (Dekker's two-product,
 * dh already split), a - p is exact where it matters (Sterbenz: the sign
 * is only in doubt when p is close to a), so the sign of ((a - p) - e) -
 * t * dl is the sign of the real a - t * d. */
static nimble_ln_expr *sign_of_rest(cp_ctx *c, rz_lets *L, nimble_ln_expr *a, nimble_ln_expr *t, nimble_ln_expr *dh,
                                    nimble_ln_expr *dhh, nimble_ln_expr *dhl, nimble_ln_expr *dl) {
  nimble_ln_expr *th, *tl;
  split2(c, L, t, &th, &tl);
  nimble_ln_expr *p = bind(c, L, BIN(MUL, t, dh));
  nimble_ln_expr *e = BIN(SUB, BIN(MUL, th, dhh), p);
  e = BIN(ADD, BIN(ADD, BIN(ADD, e, BIN(MUL, th, dhl)), BIN(MUL, tl, dhh)), BIN(MUL, tl, dhl));
  nimble_ln_expr *r = BIN(SUB, BIN(SUB, a, p), e);
  if (dl) r = BIN(SUB, r, BIN(MUL, t, dl));
  r = bind(c, L, r);
  return bind(c, L, SEL(BIN(GT, r, F(0)), cp_i(c, 1), SEL(BIN(LT, r, F(0)), cp_i(c, -1), cp_i(c, 0))));
}

/* floor(in * s) for in >= 0 and s > 0 with in * s <= 2^40 (checked
 * first): the f32 product rounded, corrected down when it rounded up onto
 * an integer. */
static nimble_ln_expr *floor_product(cp_ctx *c, nimble_ln_expr *in, nimble_ln_expr *s) {
  nimble_ln_expr *inf = nimble_ln_cast(A_, NIMBLE_LN_F32, in);
  nimble_ln_expr *p = BIN(MUL, inf, s);
  /* Exact error of the product: in * s - p (two-product, written out). */
  nimble_ln_expr *th = BIN(MUL, F(4097.0), inf), *ts = BIN(MUL, F(4097.0), s);
  nimble_ln_expr *ih = BIN(SUB, th, BIN(SUB, th, inf)), *sh = BIN(SUB, ts, BIN(SUB, ts, s));
  nimble_ln_expr *il = BIN(SUB, inf, ih), *sl = BIN(SUB, s, sh);
  nimble_ln_expr *e = BIN(ADD, BIN(ADD, BIN(ADD, BIN(SUB, BIN(MUL, ih, sh), p), BIN(MUL, ih, sl)), BIN(MUL, il, sh)),
                          BIN(MUL, il, sl));
  nimble_ln_expr *fp = floor_f(c, p);
  nimble_ln_expr *down = BIN(AND, BIN(EQ, fp, p), BIN(LT, e, F(0)));
  return cp_sub(c, nimble_ln_cast(A_, NIMBLE_LN_I64, fp), nimble_ln_cast(A_, NIMBLE_LN_I64, down));
}

static nimble_status_t shape_resize(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  rz_spec s;
  n->rank = x->rank;
  n->type = x->type;
  n->dtype = x->dtype;
  if (!parse_spec(c, n, &s)) return nimble_ok();
  const char *op = n->op->name;
  size_t ns = 0;
  const int64_t *sizes = strcmp(op, "resize") ? NULL : cp_attr_ints(n, "sizes", &ns);
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *in = x->ext[a], *out = in;
    nimble_ln_expr *ii[1] = {cp_i(c, a)};
    if (s.kind[a] == RZ_SCALES) {
      nimble_ln_expr *sv = cp_value(c, n->in[1], ii);
      /* NaN fails both comparisons. */
      cp_check(c, BIN(AND, BIN(GT, sv, F(0)), BIN(LE, sv, F((double)CP_MAX_DYN_ELEMENTS))),
               "%s: scales[%d] is not a positive finite number", op, a);
      cp_check(c, BIN(LE, BIN(MUL, nimble_ln_cast(A_, NIMBLE_LN_F32, in), sv), F((double)CP_MAX_DYN_ELEMENTS)),
               "%s: scales[%d] makes axis %d longer than 2^40", op, a, a);
      out = floor_product(c, in, sv);
      n->aux[a] = sv;
    } else if (s.kind[a] == RZ_SIZES) {
      out = sizes ? (sizes[a] < 0 ? in : cp_i(c, sizes[a])) : cp_convert(c, cp_value(c, n->in[1], ii), NIMBLE_LN_I64);
      /* The exact fractions multiply extents: both stay below 2^31. */
      cp_check(c, BIN(AND, BIN(GE, out, cp_i(c, 0)), BIN(LE, out, cp_i(c, INT64_C(1) << 31))),
               "%s: sizes[%d] is negative or above 2^31", op, a);
      cp_check(c, BIN(LE, in, cp_i(c, INT64_C(1) << 31)), "%s: axis %d is longer than 2^31", op, a);
    }
    if (s.kind[a] != RZ_IDENT)
      cp_check(c, BIN(OR, BIN(GT, in, cp_i(c, 0)), BIN(EQ, out, cp_i(c, 0))),
               "%s: axis %d is empty and cannot be resized to a non-empty extent", op, a);
    n->ext[a] = out;
  }
  cp_check_numel(c, n->ext, n->rank, op);
  return nimble_ok();
}

/* One resized axis while building the element: loop-invariant values
 * (bound once above the nest) and the element's coordinate. */
typedef struct rz_axis {
  nimble_ln_expr *in, *out, *scale, *ident; /* ident: bool, the axis is unchanged at run time */
  nimble_ln_expr *fl, *isint, *fr, *ch; /* floor(x_ori) i64, x_ori integral (bool), fraction f32, sign(frac - 1/2) */
  nimble_ln_expr *roi0, *roi1;              /* tf_crop_and_resize: the axis's roi start and end */
  nimble_ln_expr *outside;                  /* tf_crop_and_resize: x_ori outside [0, in - 1] (bool) */
} rz_axis;

/* x_ori = N / D exactly (sizes: the scale is out / in), D > 0. */
static void coord_sizes(cp_ctx *c, rz_lets *L, const rz_spec *s, rz_axis *ax, nimble_ln_expr *x) {
  nimble_ln_expr *in = ax->in, *out = ax->out, *one = cp_i(c, 1), *two = cp_i(c, 2);
  nimble_ln_expr *x2 = cp_add(c, cp_mul(c, x, two), one), *N, *D;
  switch (s->ctm) {
  case CT_ASYM: N = cp_mul(c, x, in), D = out; break;
  case CT_TF_NN: N = cp_mul(c, x2, in), D = cp_mul(c, two, out); break;
  case CT_ALIGN: {
    nimble_ln_expr *single = BIN(EQ, out, one);
    N = SEL(single, cp_i(c, 0), cp_mul(c, x, cp_sub(c, in, one)));
    D = SEL(single, one, cp_sub(c, out, one));
    break;
  }
  case CT_PYTORCH: {
    nimble_ln_expr *single = BIN(EQ, out, one);
    N = SEL(single, cp_i(c, -1), cp_sub(c, cp_mul(c, x2, in), out));
    D = SEL(single, two, cp_mul(c, two, out));
    break;
  }
  default: N = cp_sub(c, cp_mul(c, x2, in), out), D = cp_mul(c, two, out); break;
  }
  /* An output index exists only when out >= 1, so D >= 1 wherever this runs. */
  N = bind(c, L, N);
  D = bind(c, L, cp_max(c, D, one));
  nimble_ln_expr *q = cp_div(c, N, D); /* truncating */
  nimble_ln_expr *fl = bind(c, L, SEL(BIN(LT, cp_rem(c, N, D), cp_i(c, 0)), cp_sub(c, q, one), q));
  nimble_ln_expr *rem = bind(c, L, cp_sub(c, N, cp_mul(c, fl, D)));
  ax->fl = fl;
  ax->isint = BIN(EQ, rem, cp_i(c, 0));
  ax->fr = bind(c, L, BIN(DIV, nimble_ln_cast(A_, NIMBLE_LN_F32, rem), nimble_ln_cast(A_, NIMBLE_LN_F32, D)));
  nimble_ln_expr *twice = cp_sub(c, cp_mul(c, rem, two), D);
  ax->ch = bind(c, L, SEL(BIN(GT, twice, cp_i(c, 0)), one, SEL(BIN(LT, twice, cp_i(c, 0)), cp_i(c, -1), cp_i(c, 0))));
}

/* x_ori = a / d - shift from an f32 scale: a candidate floor from the f32
 * quotient, then the exact signs of x_ori - v at v = floor and floor + 1
 * (to correct the floor by one and tell an integer) and at floor + 1/2
 * (the nearest modes' tie), each the sign of a - (v + shift) * d. For
 * align_corners d = s * in - 1 is carried as an f32 pair (the product's
 * rounding error recovered), since the reference uses the real width. */
static void coord_scales(cp_ctx *c, rz_lets *L, const rz_spec *s, rz_axis *ax, nimble_ln_expr *x) {
  nimble_ln_expr *xf = nimble_ln_cast(A_, NIMBLE_LN_F32, x), *a, *dh = ax->scale, *dl = NULL, *fixed = NULL;
  double fixed_v = 0, shift = 0;
  nimble_ln_expr *inf = nimble_ln_cast(A_, NIMBLE_LN_F32, ax->in);
  if (s->ctm == CT_ALIGN || s->ctm == CT_PYTORCH) {
    /* width = s * in = wp + we exactly; "width is 1" exactly. */
    nimble_ln_expr *sh, *sl, *ih, *il;
    split2(c, L, ax->scale, &sh, &sl);
    split2(c, L, inf, &ih, &il);
    nimble_ln_expr *wp = bind(c, L, BIN(MUL, ax->scale, inf));
    nimble_ln_expr *we = BIN(SUB, BIN(MUL, sh, ih), wp);
    we = bind(c, L, BIN(ADD, BIN(ADD, BIN(ADD, we, BIN(MUL, sh, il)), BIN(MUL, sl, ih)), BIN(MUL, sl, il)));
    fixed = bind(c, L, BIN(AND, BIN(EQ, wp, F(1)), BIN(EQ, we, F(0))));
    if (s->ctm == CT_ALIGN) {
      dh = SEL(fixed, F(1), BIN(SUB, wp, F(1))); /* exact: 1 <= wp < 2^24 */
      dl = bind(c, L, SEL(fixed, F(0), we));
    }
  }
  switch (s->ctm) {
  case CT_ASYM: a = xf; break;
  case CT_TF_NN: a = BIN(ADD, xf, F(0.5)); break;
  case CT_ALIGN:
    a = BIN(MUL, xf, nimble_ln_cast(A_, NIMBLE_LN_F32, cp_sub(c, ax->in, cp_i(c, 1))));
    fixed_v = 0;
    break;
  case CT_PYTORCH:
    a = BIN(ADD, xf, F(0.5)), shift = 0.5;
    fixed_v = -0.5;
    break;
  default: a = BIN(ADD, xf, F(0.5)), shift = 0.5; break;
  }
  a = bind(c, L, a);
  dh = bind(c, L, dh);
  nimble_ln_expr *dhh, *dhl;
  split2(c, L, dh, &dhh, &dhl);
  nimble_ln_expr *y = BIN(DIV, a, dh);
  if (shift) y = BIN(SUB, y, F(shift));
  y = bind(c, L, y);
  nimble_ln_expr *f0 = bind(c, L, floor_f(c, y));
  /* x_ori - v has the sign of a - (v + shift) d. */
  nimble_ln_expr *g0 = sign_of_rest(c, L, a, BIN(ADD, f0, F(shift)), dh, dhh, dhl, dl);
  nimble_ln_expr *g1 = sign_of_rest(c, L, a, BIN(ADD, f0, F(1 + shift)), dh, dhh, dhl, dl);
  nimble_ln_expr *lower = BIN(LT, g0, cp_i(c, 0)), *upper = BIN(GE, g1, cp_i(c, 0));
  nimble_ln_expr *fl = bind(c, L, SEL(lower, BIN(SUB, f0, F(1)), SEL(upper, BIN(ADD, f0, F(1)), f0)));
  nimble_ln_expr *isint = BIN(OR, BIN(EQ, g0, cp_i(c, 0)), BIN(EQ, g1, cp_i(c, 0)));
  nimble_ln_expr *gh = sign_of_rest(c, L, a, BIN(ADD, fl, F(0.5 + shift)), dh, dhh, dhl, dl);
  nimble_ln_expr *fr = cp_min(c, cp_max(c, BIN(SUB, y, fl), F(0)), F(1));
  if (fixed) { /* a width of exactly 1: x_ori is fixed_v */
    nimble_ln_expr *ffl = F(fixed_v < 0 ? -1.0 : 0.0);
    fl = bind(c, L, SEL(fixed, ffl, fl));
    isint = SEL(fixed, fixed_v == 0 ? BIN(EQ, F(0), F(0)) : BIN(NE, F(0), F(0)), isint);
    gh = bind(c, L, SEL(fixed, cp_i(c, fixed_v == 0 ? -1 : 0), gh));
    fr = SEL(fixed, F(fixed_v - (fixed_v < 0 ? -1.0 : 0.0)), fr);
  }
  ax->fl = bind(c, L, nimble_ln_cast(A_, NIMBLE_LN_I64, fl));
  ax->isint = bind(c, L, isint);
  ax->fr = bind(c, L, fr);
  ax->ch = gh;
}

/* tf_crop_and_resize (f32, as the reference's formula): x_ori =
 * x (e - s)(in - 1) / (width - 1) + s (in - 1), or the roi's middle for a
 * width of 1; outside [0, in - 1] the output is extrapolation_value. */
static void coord_crop(cp_ctx *c, rz_lets *L, const rz_spec *s, rz_axis *ax, nimble_ln_expr *x) {
  nimble_ln_expr *inm1 = nimble_ln_cast(A_, NIMBLE_LN_F32, cp_sub(c, ax->in, cp_i(c, 1)));
  nimble_ln_expr *width = ax->scale ? BIN(MUL, ax->scale, nimble_ln_cast(A_, NIMBLE_LN_F32, ax->in))
                                    : nimble_ln_cast(A_, NIMBLE_LN_F32, ax->out);
  nimble_ln_expr *span = BIN(MUL, BIN(SUB, ax->roi1, ax->roi0), inm1);
  nimble_ln_expr *one = BIN(EQ, width, F(1));
  nimble_ln_expr *y = SEL(one, BIN(DIV, span, F(2)),
                          BIN(DIV, BIN(MUL, nimble_ln_cast(A_, NIMBLE_LN_F32, x), span), BIN(SUB, width, F(1))));
  y = bind(c, L, BIN(ADD, y, BIN(MUL, ax->roi0, inm1)));
  ax->outside = bind(c, L, nimble_ln_unary(A_, NIMBLE_LN_NOT, BIN(AND, BIN(GE, y, F(0)), BIN(LE, y, inm1))));
  nimble_ln_expr *fy = bind(c, L, floor_f(c, y));
  nimble_ln_expr *fr = bind(c, L, BIN(SUB, y, fy));
  ax->fl = bind(c, L, nimble_ln_cast(A_, NIMBLE_LN_I64, fy));
  ax->isint = bind(c, L, BIN(EQ, fr, F(0)));
  ax->fr = fr;
  nimble_ln_expr *h = BIN(SUB, fr, F(0.5));
  ax->ch = bind(c, L, SEL(BIN(GT, h, F(0)), cp_i(c, 1), SEL(BIN(LT, h, F(0)), cp_i(c, -1), cp_i(c, 0))));
  (void)s;
}

static nimble_ln_expr *clamp_axis(cp_ctx *c, nimble_ln_expr *j, nimble_ln_expr *in) {
  return cp_max(c, cp_min(c, j, cp_sub(c, in, cp_i(c, 1))), cp_i(c, 0));
}

/* The interpolation weight at distance d (f32) from x_ori. */
static nimble_ln_expr *weight(cp_ctx *c, const rz_spec *s, nimble_ln_expr *d) {
  nimble_ln_expr *ad = nimble_ln_unary(A_, NIMBLE_LN_ABS, d);
  if (s->mode == 1) return cp_max(c, BIN(SUB, F(1), ad), F(0));
  double A = s->a;
  nimble_ln_expr *inner = BIN(ADD, BIN(MUL, BIN(MUL, BIN(SUB, BIN(MUL, F(A + 2), ad), F(A + 3)), ad), ad), F(1));
  nimble_ln_expr *outer =
      BIN(SUB, BIN(MUL, BIN(ADD, BIN(MUL, BIN(SUB, BIN(MUL, F(A), ad), F(5 * A)), ad), F(8 * A)), ad), F(4 * A));
  return SEL(BIN(LE, ad, F(1)), inner, SEL(BIN(LT, ad, F(2)), outer, F(0)));
}

/* tf_crop_and_resize: extrapolation_value where any axis's x_ori is
 * outside the input (the reference's inner interpolations then all give
 * it, and the weights sum to 1). */
static nimble_ln_expr *extrapolate(cp_ctx *c, const rz_spec *s, cp_node *n, const rz_axis *ax, int R,
                                   nimble_ln_expr *v) {
  if (s->ctm != CT_CROP || !v) return v;
  nimble_ln_expr *out = NULL;
  for (int a = 0; a < R; a++)
    if (ax[a].outside) out = out ? BIN(OR, out, ax[a].outside) : ax[a].outside;
  if (!out) return v;
  return SEL(out, cp_const_of(c, v->type, cp_attr_float(n, "extrapolation_value")), v);
}

static nimble_ln_stmt *emit_resize(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  rz_spec s;
  if (!parse_spec(c, n, &s)) return NULL;
  int R = n->rank;
  rz_lets *L = nimble_ln_arena_alloc(A_, sizeof *L);
  if (!L) return NULL;
  rz_axis ax[CP_MAX_RANK];
  memset(ax, 0, sizeof ax);
  /* Loop-invariant values, bound above the nest. */
  for (int a = 0; a < R; a++) {
    if (s.kind[a] == RZ_IDENT) continue;
    ax[a].in = bind(c, L, x->ext[a]);
    ax[a].out = bind(c, L, n->ext[a]);
    if (s.kind[a] == RZ_SCALES) {
      ax[a].scale = bind(c, L, n->aux[a]);
      ax[a].ident = bind(c, L, BIN(EQ, ax[a].scale, F(1)));
    } else {
      ax[a].ident = bind(c, L, BIN(EQ, ax[a].out, ax[a].in));
    }
    if (s.ctm == CT_CROP) { /* the roi moves even an unchanged axis */
      nimble_ln_expr *r0[1] = {cp_i(c, a)}, *r1[1] = {cp_i(c, a + R)};
      ax[a].roi0 = bind(c, L, cp_value(c, n->in[2], r0));
      ax[a].roi1 = bind(c, L, cp_value(c, n->in[2], r1));
      ax[a].ident = BIN(NE, cp_i(c, 0), cp_i(c, 0));
    }
  }
  int top = L->n;
  nimble_ln_var *iv[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK], *src[CP_MAX_RANK];
  for (int a = 0; a < R; a++) {
    iv[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = src[a] = REF(iv[a]);
  }
  /* Per element: each resized axis's coordinate. */
  for (int a = 0; a < R; a++) {
    if (s.kind[a] == RZ_IDENT) continue;
    if (s.ctm == CT_CROP) coord_crop(c, L, &s, &ax[a], idx[a]);
    else if (s.kind[a] == RZ_SCALES) coord_scales(c, L, &s, &ax[a], idx[a]);
    else coord_sizes(c, L, &s, &ax[a], idx[a]);
  }
  if (c->err) return NULL;
  nimble_ln_stmt *body;
  nimble_ln_expr *oi = R ? nimble_ln_flat_index(A_, o, idx) : cp_i(c, 0);
  if (s.mode == 0) {
    for (int a = 0; a < R; a++) {
      if (s.kind[a] == RZ_IDENT) continue;
      nimble_ln_expr *fl = ax[a].fl, *up = cp_add(c, fl, cp_i(c, 1)), *j;
      switch (s.nearest) {
      case NM_ROUND_CEIL: j = SEL(BIN(LT, ax[a].ch, cp_i(c, 0)), fl, up); break;
      case NM_FLOOR: j = fl; break;
      case NM_CEIL: j = SEL(ax[a].isint, fl, up); break;
      default: j = SEL(BIN(LE, ax[a].ch, cp_i(c, 0)), fl, up); break;
      }
      src[a] = SEL(ax[a].ident, idx[a], clamp_axis(c, j, ax[a].in));
    }
    nimble_ln_expr *v = cp_value(c, x, src);
    if (!v) return NULL;
    body = nimble_ln_store(A_, o, oi, extrapolate(c, &s, n, ax, R, v));
  } else {
    /* Tap loops, outermost axis first; an unchanged axis runs one tap. */
    int T = s.mode == 1 ? 2 : 4, h = T / 2 - 1;
    nimble_ln_var *acc = cp_var(c, "acc", NIMBLE_LN_F32), *wsum = cp_var(c, "wsum", NIMBLE_LN_F32);
    nimble_ln_var *tv[CP_MAX_RANK], *wv[CP_MAX_RANK];
    nimble_ln_expr *taps[CP_MAX_RANK], *wexpr[CP_MAX_RANK], *w = NULL;
    for (int a = 0; a < R; a++) {
      if (s.kind[a] == RZ_IDENT) continue;
      nimble_ln_expr *base = bind(c, L, SEL(ax[a].isint, cp_sub(c, ax[a].fl, cp_i(c, 1)), ax[a].fl));
      nimble_ln_expr *r = bind(c, L, SEL(ax[a].isint, F(1), ax[a].fr));
      tv[a] = cp_var(c, "t", NIMBLE_LN_I64);
      wv[a] = cp_var(c, "w", NIMBLE_LN_F32);
      nimble_ln_expr *t = REF(tv[a]);
      nimble_ln_expr *pos = cp_add(c, cp_sub(c, base, cp_i(c, h)), t);
      nimble_ln_expr *wt = weight(c, &s, BIN(SUB, BIN(ADD, r, F(h)), nimble_ln_cast(A_, NIMBLE_LN_F32, t)));
      if (s.exclude)
        wt = SEL(BIN(AND, BIN(GE, pos, cp_i(c, 0)), BIN(LT, pos, ax[a].in)), wt, F(0));
      wexpr[a] = SEL(ax[a].ident, F(1), wt);
      src[a] = SEL(ax[a].ident, idx[a], clamp_axis(c, pos, ax[a].in));
      taps[a] = SEL(ax[a].ident, cp_i(c, 1), cp_i(c, T));
      w = w ? BIN(MUL, w, REF(wv[a])) : REF(wv[a]);
    }
    nimble_ln_expr *v = cp_value(c, x, src);
    if (!v) return NULL;
    nimble_ln_stmt *inner;
    if (!w) { /* every axis unchanged: a copy */
      inner = nimble_ln_assign(A_, acc, v);
    } else {
      inner = nimble_ln_assign(A_, acc, BIN(ADD, REF(acc), BIN(MUL, w, v)));
      if (s.exclude) inner = nimble_ln_seq2(A_, inner, nimble_ln_assign(A_, wsum, BIN(ADD, REF(wsum), w)));
    }
    for (int a = R - 1; a >= 0; a--) {
      if (s.kind[a] == RZ_IDENT) continue;
      inner = cp_for(c, tv[a], taps[a], NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, wv[a], wexpr[a], inner));
    }
    nimble_ln_expr *res = REF(acc);
    if (s.exclude && w) res = SEL(BIN(EQ, REF(wsum), F(0)), REF(acc), BIN(DIV, REF(acc), REF(wsum)));
    body = nimble_ln_seq2(A_, inner, nimble_ln_store(A_, o, oi, extrapolate(c, &s, n, ax, R, res)));
    body = nimble_ln_decl(A_, acc, F(0), nimble_ln_decl(A_, wsum, F(0), body));
  }
  body = wrap(c, L, top, body);
  nimble_ln_expr *ext[CP_MAX_RANK];
  for (int a = 0; a < R; a++) ext[a] = s.kind[a] == RZ_IDENT ? n->ext[a] : ax[a].out;
  body = cp_loops(c, iv, ext, R, s.mode == 0 ? 1 : 16, body);
  return wrap(c, L, 0, body);
}

const cp_def cp_defs_resize[] = {
    {"resize", CP_ANCHOR_ROW, shape_resize, NULL, NULL, emit_resize, NULL, NULL},
    {"dyn_resize", CP_ANCHOR_ROW, shape_resize, NULL, NULL, emit_resize, NULL, NULL},
};
const int cp_defs_resize_count = (int)(sizeof cp_defs_resize / sizeof cp_defs_resize[0]);
