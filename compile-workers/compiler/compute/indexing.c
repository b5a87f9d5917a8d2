/* Indexing and masks computed per element: gather_elements, trilu,
 * eye_like, reverse_sequence and grid_sample. Each is a value at an output
 * index from its inputs' values at computed indices, like the element-wise
 * ops (elementwise.c). */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

/* gather_elements: shaped like the indices, data's type. */
static nimble_status_t shape_gather_elements(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *ind = n->in[1];
  if (ind->type != NIMBLE_LN_I64 && ind->type != NIMBLE_LN_I32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_elements: indices must be integers");
  if (ind->rank != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_elements: indices of rank %d for data of rank %d",
                              ind->rank, x->rank);
  n->rank = ind->rank;
  for (int a = 0; a < ind->rank; a++) n->ext[a] = ind->ext[a];
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

/* out[i] = data[i with i[axis] replaced by indices[i]]; negative indices
 * count from the end, out-of-range ones are clamped (a kernel cannot fail
 * per element), as take does. */
static nimble_ln_expr *value_gather_elements(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *x = n->in[0];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  nimble_ln_expr *iv = cp_convert(c, cp_value(c, n->in[1], idx), NIMBLE_LN_I64);
  if (!iv) return NULL;
  nimble_ln_expr *d = x->ext[ax];
  iv = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, iv, cp_i(c, 0)), cp_add(c, iv, d), iv);
  iv = cp_clamp(c, iv, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < x->rank; a++) in_idx[a] = idx[a];
  in_idx[ax] = iv;
  return cp_value(c, x, in_idx);
}

/* The diagonal offset k of trilu (input 1, a scalar; 0 when absent). */
static nimble_ln_expr *trilu_k(cp_ctx *c, cp_node *n) {
  if (n->n_in < 2) return cp_i(c, 0);
  cp_node *k = n->in[1];
  nimble_ln_expr *zero[CP_MAX_RANK];
  for (int a = 0; a < CP_MAX_RANK; a++) zero[a] = cp_i(c, 0);
  return cp_convert(c, cp_value(c, k, zero), NIMBLE_LN_I64);
}

/* trilu: x where the element is in the kept triangle (upper: col - row >=
 * k; lower: col - row <= k), else 0. */
static nimble_ln_expr *value_trilu(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *x = cp_in_value(c, n, 0, idx);
  nimble_ln_expr *k = trilu_k(c, n);
  if (!x || !k) return NULL;
  nimble_ln_expr *diff = cp_sub(c, idx[n->rank - 1], idx[n->rank - 2]);
  nimble_ln_expr *keep = nimble_ln_binary(c->A, cp_attr_int(n, "upper") ? NIMBLE_LN_GE : NIMBLE_LN_LE, diff, k);
  return nimble_ln_select(c->A, keep, x, cp_const_of(c, x->type, 0));
}

static nimble_status_t shape_eye_like(cp_ctx *c, cp_node *n) {
  cp_shape_same(c, n);
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (dt && dt[0] &&
      (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool)))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "eye_like of %s", dt);
  return nimble_ok();
}

/* eye_like: 1 where col - row == k, else 0 (the input gives the shape only). */
static nimble_ln_expr *value_eye_like(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *on = nimble_ln_binary(c->A, NIMBLE_LN_EQ, cp_sub(c, idx[1], idx[0]), cp_i(c, cp_attr_int(n, "k")));
  if (n->type == NIMBLE_LN_BOOL) return on;
  return nimble_ln_select(c->A, on, cp_const_of(c, n->type, 1), cp_const_of(c, n->type, 0));
}

/* reverse_sequence: along time, the first lens[b] steps of batch entry b
 * reversed, the rest kept. */
static nimble_ln_expr *value_reverse_sequence(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  int b = (int)cp_attr_int(n, "batch_axis"), t = (int)cp_attr_int(n, "time_axis");
  if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: batch_axis %d and time_axis %d", c->prim, b, t);
  nimble_ln_expr *bi[1] = {idx[b]};
  nimble_ln_expr *len = cp_convert(c, cp_value(c, n->in[1], bi), NIMBLE_LN_I64);
  if (!len) return NULL;
  nimble_ln_expr *src[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) src[a] = idx[a];
  nimble_ln_expr *rev = cp_sub(c, cp_sub(c, len, cp_i(c, 1)), idx[t]);
  src[t] = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, idx[t], len),
                            cp_clamp(c, rev, cp_i(c, 0), cp_max(c, cp_sub(c, n->ext[t], cp_i(c, 1)), cp_i(c, 0))),
                            idx[t]);
  return cp_value(c, n->in[0], src);
}

/* ---- grid_sample (ONNX GridSample, 4-D, PyTorch's grid_sampler): the
 * output at (n, c, h, w) samples x[n, c] at the grid's normalized (x, y)
 * in grid[n, h, w]. Coordinates are unnormalized by align_corners, then
 * (bilinear, nearest) clipped or reflected by padding_mode; taps outside
 * the image read 0. Bicubic (A = -0.75) bounds each of its 16 taps
 * instead, as PyTorch does. ---- */

typedef struct {
  nimble_ln_expr *n, *c;
  cp_node *x;
  int align;
  int pad; /* 0 zeros, 1 border, 2 reflection */
} gs_ctx;

static nimble_status_t shape_grid_sample(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *g = n->in[1];
  if (x->rank != 4 || g->rank != 4)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample: only 4-D input and grid");
  if (x->type != NIMBLE_LN_F32 || g->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample of non-float32");
  const char *mode = cp_attr_string(n, "mode"), *pad = cp_attr_string(n, "padding_mode");
  if (strcmp(mode, "bilinear") && strcmp(mode, "nearest") && strcmp(mode, "bicubic"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample mode '%s'", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "grid_sample padding_mode '%s'", pad);
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = x->ext[1];
  n->ext[2] = g->ext[1];
  n->ext[3] = g->ext[2];
  n->type = x->type;
  n->dtype = x->dtype;
  cp_check(c, cp_eq(c, g->ext[3], cp_i(c, 2)), "grid_sample: the grid's last axis must be 2");
  cp_check(c, cp_eq(c, g->ext[0], x->ext[0]), "grid_sample: grid and input batch differ");
  return nimble_ok();
}

#define GA c->A
#define GF(v) nimble_ln_f32(GA, (v))
#define GADD(a, b) nimble_ln_binary(GA, NIMBLE_LN_ADD, (a), (b))
#define GSUB(a, b) nimble_ln_binary(GA, NIMBLE_LN_SUB, (a), (b))
#define GMUL(a, b) nimble_ln_binary(GA, NIMBLE_LN_MUL, (a), (b))
#define GDIV(a, b) nimble_ln_binary(GA, NIMBLE_LN_DIV, (a), (b))

/* PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2]. */
static nimble_ln_expr *gs_reflect(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo2, nimble_ln_expr *hi2) {
  nimble_ln_expr *mn = GDIV(lo2, GF(2)), *span = GDIV(GSUB(hi2, lo2), GF(2));
  nimble_ln_expr *in = nimble_ln_unary(GA, NIMBLE_LN_ABS, GSUB(v, mn));
  nimble_ln_expr *flips = cp_f32_floor(c, GDIV(in, span));
  nimble_ln_expr *extra = GSUB(in, GMUL(flips, span));
  nimble_ln_expr *even = nimble_ln_binary(
      GA, NIMBLE_LN_EQ, nimble_ln_binary(GA, NIMBLE_LN_REM, nimble_ln_cast(GA, NIMBLE_LN_I64, flips), cp_i(c, 2)), cp_i(c, 0));
  nimble_ln_expr *r = nimble_ln_select(GA, even, GADD(extra, mn), GADD(GSUB(span, extra), mn));
  /* A one-pixel axis (span 0) reflects to 0. */
  return nimble_ln_select(GA, nimble_ln_binary(GA, NIMBLE_LN_GT, span, GF(0)), r, GF(0));
}

/* The coordinate after padding_mode (size as f32). */
static nimble_ln_expr *gs_bound(cp_ctx *c, const gs_ctx *g, nimble_ln_expr *v, nimble_ln_expr *size) {
  nimble_ln_expr *hi = GSUB(size, GF(1));
  if (g->pad == 0) return v;
  if (g->pad == 2)
    v = g->align ? gs_reflect(c, v, GF(0), GMUL(GF(2), hi)) : gs_reflect(c, v, GF(-1), GSUB(GMUL(GF(2), size), GF(1)));
  return nimble_ln_binary(GA, NIMBLE_LN_MIN, nimble_ln_binary(GA, NIMBLE_LN_MAX, v, GF(0)), hi);
}

/* x[n, c, y, x] for integer (i64) y, x, or 0 outside the image. */
static nimble_ln_expr *gs_tap(cp_ctx *c, const gs_ctx *g, nimble_ln_expr *y, nimble_ln_expr *x) {
  nimble_ln_expr *h = g->x->ext[2], *w = g->x->ext[3];
  nimble_ln_expr *in = nimble_ln_binary(
      GA, NIMBLE_LN_AND,
      nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_GE, y, cp_i(c, 0)), nimble_ln_binary(GA, NIMBLE_LN_LT, y, h)),
      nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_GE, x, cp_i(c, 0)), nimble_ln_binary(GA, NIMBLE_LN_LT, x, w)));
  nimble_ln_expr *yc = cp_clamp(c, y, cp_i(c, 0), cp_max(c, cp_sub(c, h, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *xc = cp_clamp(c, x, cp_i(c, 0), cp_max(c, cp_sub(c, w, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *idx[4] = {g->n, g->c, yc, xc};
  nimble_ln_expr *v = cp_value(c, g->x, idx);
  return v ? nimble_ln_select(GA, in, v, GF(0)) : NULL;
}

/* PyTorch's cubic convolution weights for the taps at -1, 0, 1, 2 from t. */
static void gs_cubic(cp_ctx *c, nimble_ln_expr *t, nimble_ln_expr **w) {
  const double a = -0.75;
  nimble_ln_expr *u[4] = {GADD(t, GF(1)), t, GSUB(GF(1), t), GSUB(GF(2), t)};
  for (int i = 0; i < 4; i++) {
    nimble_ln_expr *x = u[i];
    if (i == 1 || i == 2) /* ((a + 2) x - (a + 3)) x x + 1 */
      w[i] = GADD(GMUL(GMUL(GSUB(GMUL(GF(a + 2), x), GF(a + 3)), x), x), GF(1));
    else /* ((a x - 5a) x + 8a) x - 4a */
      w[i] = GSUB(GMUL(GADD(GMUL(GSUB(GMUL(GF(a), x), GF(5 * a)), x), GF(8 * a)), x), GF(4 * a));
  }
}

static nimble_ln_expr *value_grid_sample(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *grid = n->in[1];
  gs_ctx g = {idx[0], idx[1], n->in[0], (int)cp_attr_int(n, "align_corners") != 0, 0};
  const char *pad = cp_attr_string(n, "padding_mode"), *mode = cp_attr_string(n, "mode");
  g.pad = !strcmp(pad, "border") ? 1 : !strcmp(pad, "reflection") ? 2 : 0;
  nimble_ln_expr *gi[4] = {idx[0], idx[2], idx[3], cp_i(c, 0)};
  nimble_ln_expr *gx = cp_value(c, grid, gi);
  gi[3] = cp_i(c, 1);
  nimble_ln_expr *gy = cp_value(c, grid, gi);
  if (!gx || !gy) return NULL;
  nimble_ln_expr *wf = cp_convert(c, g.x->ext[3], NIMBLE_LN_F32), *hf = cp_convert(c, g.x->ext[2], NIMBLE_LN_F32);
  /* align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2. */
  nimble_ln_expr *ix = g.align ? GMUL(GDIV(GADD(gx, GF(1)), GF(2)), GSUB(wf, GF(1)))
                               : GDIV(GSUB(GMUL(GADD(gx, GF(1)), wf), GF(1)), GF(2));
  nimble_ln_expr *iy = g.align ? GMUL(GDIV(GADD(gy, GF(1)), GF(2)), GSUB(hf, GF(1)))
                               : GDIV(GSUB(GMUL(GADD(gy, GF(1)), hf), GF(1)), GF(2));
  if (!strcmp(mode, "bicubic")) {
    nimble_ln_expr *fx = cp_f32_floor(c, ix), *fy = cp_f32_floor(c, iy);
    nimble_ln_expr *wx[4], *wy[4];
    gs_cubic(c, GSUB(ix, fx), wx);
    gs_cubic(c, GSUB(iy, fy), wy);
    nimble_ln_expr *sum = NULL;
    for (int r = 0; r < 4; r++) {
      nimble_ln_expr *row = NULL;
      nimble_ln_expr *ty = gs_bound(c, &g, GADD(fy, GF(r - 1)), hf);
      for (int k = 0; k < 4; k++) {
        nimble_ln_expr *tx = gs_bound(c, &g, GADD(fx, GF(k - 1)), wf);
        nimble_ln_expr *v = gs_tap(c, &g, nimble_ln_cast(GA, NIMBLE_LN_I64, ty), nimble_ln_cast(GA, NIMBLE_LN_I64, tx));
        if (!v) return NULL;
        row = row ? GADD(row, GMUL(wx[k], v)) : GMUL(wx[k], v);
      }
      sum = sum ? GADD(sum, GMUL(wy[r], row)) : GMUL(wy[r], row);
    }
    return sum;
  }
  ix = gs_bound(c, &g, ix, wf);
  iy = gs_bound(c, &g, iy, hf);
  if (!strcmp(mode, "nearest")) {
    /* nearbyint: half to even. */
    nimble_ln_expr *r[2], *v2[2] = {ix, iy};
    for (int i = 0; i < 2; i++) {
      nimble_ln_expr *f = cp_f32_floor(c, v2[i]), *d = GSUB(v2[i], f);
      nimble_ln_expr *odd = nimble_ln_binary(
          GA, NIMBLE_LN_NE, nimble_ln_binary(GA, NIMBLE_LN_REM, nimble_ln_cast(GA, NIMBLE_LN_I64, f), cp_i(c, 2)), cp_i(c, 0));
      nimble_ln_expr *up = nimble_ln_binary(
          GA, NIMBLE_LN_OR, nimble_ln_binary(GA, NIMBLE_LN_GT, d, GF(0.5)),
          nimble_ln_binary(GA, NIMBLE_LN_AND, nimble_ln_binary(GA, NIMBLE_LN_EQ, d, GF(0.5)), odd));
      r[i] = nimble_ln_cast(GA, NIMBLE_LN_I64, nimble_ln_select(GA, up, GADD(f, GF(1)), f));
    }
    return gs_tap(c, &g, r[1], r[0]);
  }
  nimble_ln_expr *fx = cp_f32_floor(c, ix), *fy = cp_f32_floor(c, iy);
  nimble_ln_expr *tx = GSUB(ix, fx), *ty = GSUB(iy, fy);
  nimble_ln_expr *x0 = nimble_ln_cast(GA, NIMBLE_LN_I64, fx), *y0 = nimble_ln_cast(GA, NIMBLE_LN_I64, fy);
  nimble_ln_expr *x1 = cp_add(c, x0, cp_i(c, 1)), *y1 = cp_add(c, y0, cp_i(c, 1));
  nimble_ln_expr *v00 = gs_tap(c, &g, y0, x0), *v01 = gs_tap(c, &g, y0, x1);
  nimble_ln_expr *v10 = gs_tap(c, &g, y1, x0), *v11 = gs_tap(c, &g, y1, x1);
  if (!v00 || !v01 || !v10 || !v11) return NULL;
  nimble_ln_expr *top = GADD(GMUL(v00, GSUB(GF(1), tx)), GMUL(v01, tx));
  nimble_ln_expr *bot = GADD(GMUL(v10, GSUB(GF(1), tx)), GMUL(v11, tx));
  return GADD(GMUL(top, GSUB(GF(1), ty)), GMUL(bot, ty));
}

#undef GA
#undef GF
#undef GADD
#undef GSUB
#undef GMUL
#undef GDIV

const cp_def cp_defs_indexing[] = {
    {"gather_elements", CP_INJECTIVE, shape_gather_elements, value_gather_elements, NULL, NULL},
    {"trilu", CP_INJECTIVE, cp_shape_same, value_trilu, NULL, NULL},
    {"eye_like", CP_INJECTIVE, shape_eye_like, value_eye_like, NULL, NULL},
    {"reverse_sequence", CP_INJECTIVE, cp_shape_same, value_reverse_sequence, NULL, NULL},
    {"grid_sample", CP_INJECTIVE, shape_grid_sample, value_grid_sample, NULL, NULL},
};
const int cp_defs_indexing_count = (int)(sizeof cp_defs_indexing / sizeof cp_defs_indexing[0]);
