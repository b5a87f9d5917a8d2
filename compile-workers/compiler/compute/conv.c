/* conv2d and max/avg pooling computed straight into the output by their
 * own loop nests (cp_window_into_out), instead of one point anchor per
 * output element. The primitive then applies its epilogue in place (the
 * sgemm path's arrangement, primitive.c).
 *
 * conv2d through env->sgemm (f32 weights as a parameter, at least 8
 * output channels per group, or a plain 1x1 with groups 1), when the
 * runtime has it: per image and block of whole output rows (about 64K
 * output floats, at least 512 columns) the block is set to the bias, sgemm
 * adds w[group] x cols per group, cols being the input itself for a 1x1
 * with unit strides and no padding, else an im2col copy of the block in a
 * scratch buffer (nimble_ln_kernel_add_scratch: env->workspace_alloc), and
 * the primitive's epilogue runs on the block while it is in cache. At
 * column stride 2 the im2col copies come from a deinterleaved copy of the
 * image (deinterleave_rows) in the same buffer.
 *
 * conv2d direct (the rest, and the fallback without BLAS): tasks over
 * (batch, block of B output channels); per output row the row is set to
 * the bias; interior column blocks whose window never touches the padding
 * accumulate over (ci, kh, kw) in the output, which LLVM keeps in B x J/8
 * vector registers across those loops; the other columns go by rows: for
 * every input channel and kernel row inside the image, a vectorized loop
 * over the interior columns adds the sum over the kernel columns of
 * weight times input (the B weights per kernel column bound before the
 * loop), and the columns whose window crosses the padding run a short
 * scalar loop with clamped reads, so the vector loops carry no selects.
 * A 1x1 convolution with unit strides and no padding is one row of H*W
 * columns. Depthwise convolutions have their own rows (dw_*
 * below) and apply the epilogue per plane.
 *
 * max/avg pooling: tasks over (batch, channel); per output row the same
 * interior/border split, max or sum; avg then divides each element by its
 * window count (the padded area for count_include_pad, the part inside
 * the image otherwise). Max pooling with 3 columns at stride 2 goes by
 * whole rows through a scratch row instead (max_pool_3s2). */
#include <math.h>
#include <string.h>

#include "compute_internal.h"

#define CV_MAX_B 8 /* output channels per task block */

typedef struct cv_geom {
  int64_t s[2], d[2], p[4];
  nimble_ln_expr *H, *W, *OH, *OW; /* the spatial extents of the loops (1x1: one row) */
  nimble_ln_expr *KH, *KW;
  int64_t kw_const; /* KW when it is a small constant (the columns unrolled), else 0 */
  bool flat;        /* a 1x1 flattened into one row of H*W columns */
} cv_geom;

static nimble_ln_expr *ref(cp_ctx *c, nimble_ln_var *v) { return nimble_ln_ref(c->A, v); }
static nimble_ln_expr *bin(cp_ctx *c, nimble_ln_op_t op, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(c->A, op, a, b);
}
static nimble_ln_expr *inside(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *hi) {
  return bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GE, v, cp_i(c, 0)), bin(c, NIMBLE_LN_LT, v, hi));
}
static nimble_ln_expr *clamp(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *hi) {
  return cp_max(c, cp_min(c, v, cp_sub(c, hi, cp_i(c, 1))), cp_i(c, 0));
}

static bool get_ints(cp_ctx *c, cp_node *n, const char *name, size_t want, int64_t dflt, int64_t *out) {
  size_t got;
  const int64_t *v = cp_attr_ints(n, name, &got);
  if (got == 0) {
    for (size_t i = 0; i < want; i++) out[i] = dflt;
    return true;
  }
  if (got != want) return false;
  memcpy(out, v, want * sizeof *out);
  return true;
}

/* First output column whose window column `off` (kw*dw - pw) is inside the
 * image: ceil(max(-off, 0) / s), at most OW. */
static nimble_ln_expr *col_lo(cp_ctx *c, const cv_geom *g, nimble_ln_expr *off) {
  nimble_ln_expr *need = cp_max(c, cp_sub(c, cp_i(c, 0), off), cp_i(c, 0));
  return cp_min(c, g->OW, cp_div(c, cp_add(c, need, cp_i(c, g->s[1] - 1)), cp_i(c, g->s[1])));
}
/* One past the last output column with ow*s + off <= W-1, at least 0, at
 * most OW: floor((W-1-off)/s) + 1 = (W-1-off+s)/s for W-1-off >= -s. */
static nimble_ln_expr *col_hi(cp_ctx *c, const cv_geom *g, nimble_ln_expr *off) {
  nimble_ln_expr *num = cp_add(c, cp_sub(c, cp_sub(c, g->W, cp_i(c, 1)), off), cp_i(c, g->s[1]));
  return cp_min(c, g->OW, cp_div(c, cp_max(c, num, cp_i(c, 0)), cp_i(c, g->s[1])));
}

/* Column offset of kernel column kw: kw*dw - pw. */
static nimble_ln_expr *col_off(cp_ctx *c, const cv_geom *g, nimble_ln_expr *kw) {
  return cp_sub(c, cp_mul(c, kw, cp_i(c, g->d[1])), cp_i(c, g->p[1]));
}

/* The combine step of the accumulation: acc + v (conv, avg) or max. */
typedef enum cv_kind { CV_CONV, CV_MAX, CV_AVG } cv_kind_t;

static nimble_ln_expr *combine(cp_ctx *c, cv_kind_t k, nimble_ln_expr *acc, nimble_ln_expr *v) {
  return bin(c, k == CV_MAX ? NIMBLE_LN_MAX : NIMBLE_LN_ADD, acc, v);
}

/* One output row's accumulation over the kernel columns of one (input
 * channel, kernel row), for B outputs:
 *   out_b[ow] = combine(out_b[ow], sum/max over kw of w_b(kw) * x(ow*s + off(kw)))
 * xrow: flat index of the input row's column 0; orow[b]: of output row b.
 * wval(b, kw) gives the weight (NULL for pooling). */
typedef nimble_ln_expr *(*cv_weight_fn)(cp_ctx *c, void *ctx, int b, nimble_ln_expr *kw);

static nimble_ln_stmt *row_update(cp_ctx *c, cv_kind_t kind, const cv_geom *g, cp_node *x, nimble_ln_param *o,
                                  nimble_ln_expr *xrow, nimble_ln_expr *const *orow, int B, cv_weight_fn wf,
                                  void *wctx, nimble_ln_expr *skip) {
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_loop_kind_t vk = vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL;
  if (g->kw_const > 0) {
    /* Interior: every kernel column inside; unrolled over kw. */
    int KW = (int)g->kw_const;
    nimble_ln_expr *lo = col_lo(c, g, col_off(c, g, cp_i(c, 0)));
    nimble_ln_expr *hi = cp_max(c, col_hi(c, g, col_off(c, g, cp_i(c, KW - 1))), lo);
    nimble_ln_var *wv[CV_MAX_B][16];
    nimble_ln_var *ow = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *owr = ref(c, ow);
    nimble_ln_expr *base = cp_add(c, xrow, cp_mul(c, owr, cp_i(c, g->s[1])));
    nimble_ln_expr *xv[16];
    for (int kw = 0; kw < KW; kw++) xv[kw] = cp_value_flat(c, x, cp_add(c, base, col_off(c, g, cp_i(c, kw))));
    nimble_ln_stmt *st[CV_MAX_B];
    for (int b = 0; b < B; b++) {
      nimble_ln_expr *v = NULL;
      for (int kw = 0; kw < KW; kw++) {
        nimble_ln_expr *t = xv[kw];
        if (wf) {
          wv[b][kw] = cp_var(c, "wv", NIMBLE_LN_F32);
          t = bin(c, NIMBLE_LN_MUL, ref(c, wv[b][kw]), t);
        }
        v = v ? (kind == CV_MAX ? bin(c, NIMBLE_LN_MAX, v, t) : bin(c, NIMBLE_LN_ADD, v, t)) : t;
      }
      nimble_ln_expr *oi = cp_add(c, orow[b], owr);
      st[b] = nimble_ln_store(c->A, o, oi, combine(c, kind, nimble_ln_load(c->A, o, oi), v));
    }
    /* skip: interior columns [lo, lo + skip) another nest has done. */
    nimble_ln_expr *from = skip ? cp_add(c, lo, skip) : lo;
    nimble_ln_stmt *loop = nimble_ln_for(c->A, ow, from, hi, vk, vw, nimble_ln_seq(c->A, st, (size_t)B));
    if (wf)
      for (int b = B - 1; b >= 0; b--)
        for (int kw = KW - 1; kw >= 0; kw--) loop = nimble_ln_let(c->A, wv[b][kw], wf(c, wctx, b, cp_i(c, kw)), loop);
    /* Borders: scalar columns [0, lo) and [hi, OW), every kw checked. */
    nimble_ln_stmt *border[2];
    for (int side = 0; side < 2; side++) {
      nimble_ln_var *bw = cp_var(c, "ow", NIMBLE_LN_I64), *kw = cp_var(c, "kw", NIMBLE_LN_I64);
      nimble_ln_expr *iw = cp_add(c, cp_mul(c, ref(c, bw), cp_i(c, g->s[1])), col_off(c, g, ref(c, kw)));
      nimble_ln_expr *ok = inside(c, iw, g->W);
      nimble_ln_expr *xval = cp_value_flat(c, x, cp_add(c, xrow, clamp(c, iw, g->W)));
      nimble_ln_stmt *bs[CV_MAX_B];
      for (int b = 0; b < B; b++) {
        nimble_ln_expr *t = wf ? bin(c, NIMBLE_LN_MUL, wf(c, wctx, b, ref(c, kw)), xval) : xval;
        nimble_ln_expr *oi = cp_add(c, orow[b], ref(c, bw));
        nimble_ln_expr *cur = nimble_ln_load(c->A, o, oi);
        bs[b] = nimble_ln_store(c->A, o, oi, nimble_ln_select(c->A, ok, combine(c, kind, cur, t), cur));
      }
      nimble_ln_stmt *inner = cp_for(c, kw, g->KW, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(c->A, bs, (size_t)B));
      border[side] = side == 0 ? nimble_ln_for(c->A, bw, cp_i(c, 0), lo, NIMBLE_LN_SERIAL, 0, inner)
                               : nimble_ln_for(c->A, bw, hi, g->OW, NIMBLE_LN_SERIAL, 0, inner);
    }
    nimble_ln_stmt *all[3] = {border[0], loop, border[1]};
    return nimble_ln_seq(c->A, all, 3);
  }
  /* Any KW: per kernel column, the columns where it is inside. */
  nimble_ln_var *kw = cp_var(c, "kw", NIMBLE_LN_I64), *ow = cp_var(c, "ow", NIMBLE_LN_I64);
  nimble_ln_expr *off = col_off(c, g, ref(c, kw));
  nimble_ln_expr *lo = col_lo(c, g, off), *hi = cp_max(c, col_hi(c, g, off), lo);
  nimble_ln_expr *xval = cp_value_flat(c, x, cp_add(c, cp_add(c, xrow, cp_mul(c, ref(c, ow), cp_i(c, g->s[1]))), off));
  nimble_ln_var *wv[CV_MAX_B];
  nimble_ln_stmt *st[CV_MAX_B];
  for (int b = 0; b < B; b++) {
    nimble_ln_expr *t = xval;
    if (wf) {
      wv[b] = cp_var(c, "wv", NIMBLE_LN_F32);
      t = bin(c, NIMBLE_LN_MUL, ref(c, wv[b]), t);
    }
    nimble_ln_expr *oi = cp_add(c, orow[b], ref(c, ow));
    st[b] = nimble_ln_store(c->A, o, oi, combine(c, kind, nimble_ln_load(c->A, o, oi), t));
  }
  nimble_ln_stmt *loop = nimble_ln_for(c->A, ow, lo, hi, vk, vw, nimble_ln_seq(c->A, st, (size_t)B));
  if (wf)
    for (int b = B - 1; b >= 0; b--) loop = nimble_ln_let(c->A, wv[b], wf(c, wctx, b, ref(c, kw)), loop);
  return cp_for(c, kw, g->KW, NIMBLE_LN_SERIAL, 0, loop);
}

typedef struct conv_w {
  cp_node *wt;
  nimble_ln_expr *co0, *ci, *kh, *cg;
} conv_w;

static nimble_ln_expr *conv_weight(cp_ctx *c, void *ctx, int b, nimble_ln_expr *kw) {
  conv_w *w = ctx;
  nimble_ln_expr *co = cp_add(c, w->co0, cp_i(c, b));
  nimble_ln_expr *flat = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, co, w->cg), w->ci), w->wt->ext[2]), w->kh),
                                          w->wt->ext[3]),
                                kw);
  return cp_value_flat(c, w->wt, flat);
}

static bool geometry(cp_ctx *c, cp_node *n, cp_node *x, nimble_ln_expr *KH, nimble_ln_expr *KW, bool flatten_1x1,
                     cv_geom *g) {
  memset(g, 0, sizeof *g);
  if (!get_ints(c, n, "strides", 2, 1, g->s) || !get_ints(c, n, "dilations", 2, 1, g->d) ||
      !get_ints(c, n, "pads", 4, 0, g->p))
    return false;
  for (int i = 0; i < 2; i++)
    if (g->s[i] <= 0 || g->d[i] <= 0 || g->p[i] < 0 || g->p[i + 2] < 0) return false;
  g->H = x->ext[2];
  g->W = x->ext[3];
  g->OH = n->ext[2];
  g->OW = n->ext[3];
  g->KH = KH;
  g->KW = KW;
  int64_t kh, kw;
  bool one = cp_const_i(KH, &kh) && cp_const_i(KW, &kw) && kh == 1 && kw == 1;
  if (flatten_1x1 && one && g->s[0] == 1 && g->s[1] == 1 && !g->p[0] && !g->p[1] && !g->p[2] && !g->p[3]) {
    g->H = g->OH = cp_i(c, 1);
    g->W = g->OW = cp_mul(c, x->ext[2], x->ext[3]);
    g->flat = true;
  }
  if (cp_const_i(KW, &kw) && kw >= 1 && kw <= 16) g->kw_const = kw;
  return true;
}

/* Depthwise convolutions (dw_*: one input channel per output channel co,
 * constant KH x KW kernel). A row whose kernel rows are all inside the
 * image is written in one pass: a vectorized loop over the interior
 * columns computes bias + the KH*KW taps (weights bound before the loop)
 * and stores it, with no read-modify-write of the output; the columns whose
 * window crosses the padding sum the same taps with the ones outside
 * selected away (scalar). Other rows run the generic row nest (`slow`).
 * With unit strides and OW == W (the usual "same" padding) the interior
 * rows are instead one vectorized loop over the flattened plane, from the
 * first interior pixel to the last: an input pixel's offset from the output
 * pixel's flat index is then the same for every pixel, and the border
 * columns it passes over (which read neighbouring rows' pixels, inside the
 * plane) are rewritten by the scalar border loops after it. On the small
 * images of late layers (14x14, 7x7) that keeps the vector loop long.
 * Both vector loops run to a whole number of vectors when the extra pixels
 * stay in the row (plane) and read inside the plane (dw_round_up). */
typedef struct dw_ctx {
  const cv_geom *g;
  cp_node *x;
  nimble_ln_param *o;
  int64_t KH;
  nimble_ln_var *wv[49], *bv;
  nimble_ln_expr *plane; /* flat index of the input plane's pixel 0 */
  nimble_ln_expr *oh_lo, *oh_hi; /* the output rows written: the task's band */
  /* A Relu or Clip on the convolution, applied as each sum is stored by
   * the padded-plane paths (no pass over the plane after it): clamp set,
   * bounds lo and hi. */
  bool clamp;
  float lo, hi;
} dw_ctx;

/* v clamped as the Relu or Clip on the convolution would (clip's and
 * relu's values in elementwise.c: max then min, NaN kept), or v. */
static nimble_ln_expr *dw_clamp(cp_ctx *c, const dw_ctx *d, nimble_ln_expr *v) {
  if (!d->clamp) return v;
  if (!isinf(d->lo) || d->lo > 0) v = bin(c, NIMBLE_LN_MAX, v, nimble_ln_f32(c->A, d->lo));
  if (!isinf(d->hi) || d->hi < 0) v = bin(c, NIMBLE_LN_MIN, v, nimble_ln_f32(c->A, d->hi));
  return v;
}

/* bias + sum of the taps at the input pixel whose flat index (kernel tap
 * (0, 0) with the padding offsets applied) is base + the tap's offset;
 * iw: the tap (0, 0)'s input column for the border form (NULL: all inside). */
static nimble_ln_expr *dw_sum(cp_ctx *c, dw_ctx *d, nimble_ln_expr *row0, nimble_ln_expr *iw0) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const;
  nimble_ln_expr *v = ref(c, d->bv);
  for (int kh = 0; kh < d->KH; kh++) {
    nimble_ln_expr *xrow = cp_add(c, row0, cp_mul(c, cp_i(c, kh * g->d[0]), g->W));
    for (int kw = 0; kw < KW; kw++) {
      nimble_ln_expr *t;
      nimble_ln_var *w = d->wv[kh * KW + kw];
      if (!iw0) {
        t = cp_value_flat(c, d->x, cp_add(c, xrow, cp_i(c, kw * g->d[1])));
      } else {
        nimble_ln_expr *iw = cp_add(c, iw0, cp_i(c, kw * g->d[1]));
        t = nimble_ln_select(c->A, inside(c, iw, g->W), cp_value_flat(c, d->x, cp_add(c, xrow, clamp(c, iw, g->W))),
                             nimble_ln_f32(c->A, 0));
      }
      v = nimble_ln_fma(c->A, ref(c, w), t, v);
    }
  }
  return v;
}

/* n rounded up to a multiple of m (m >= 1). */
static nimble_ln_expr *round_up(cp_ctx *c, nimble_ln_expr *n, int64_t m) {
  return cp_mul(c, cp_div(c, cp_add(c, n, cp_i(c, m - 1)), cp_i(c, m)), cp_i(c, m));
}

/* loop (vectorized over n iterations) run as one masked vector step when
 * n is a known constant under one vector: a 7x7 plane's rows were 7 scalar
 * steps (AVX2's masked stores lost to 6 scalar ones on 14-pixel rows). */
static nimble_ln_stmt *short_row(nimble_ln_stmt *loop, nimble_ln_expr *n, int vw) {
  int64_t nc;
  if (loop && vw > 1 && cp_const_i(n, &nc) && nc > 0 && nc < vw)
    nimble_ln_masked_tail(nimble_ln_no_unroll(loop)); /* unrolled first, it is never vectorized */
  return loop;
}

/* loop (vectorized with vw lanes) as whole vectors only, the last one
 * overlapping the one before (nimble_ln_split_overlap): for loops that
 * store a function of memory the loop does not write. The short rows of
 * small planes (27 or 13 columns) spent more in their scalar remainders
 * than in their vectors. */
static nimble_ln_stmt *whole_vectors(cp_ctx *c, nimble_ln_stmt *loop, int vw) {
  return loop && vw > 1 ? nimble_ln_split_overlap(c->A, loop, vw) : loop;
}

/* A row's vectorized loop over n pixels, for loops that store a function
 * of memory the loop does not write: as one masked step when n is a known
 * constant under a vector (short_row), else as whole vectors, the last
 * overlapping the one before (whole_vectors): the depthwise rows' copies
 * and last rows (28 pixels: 3 vectors and 4 scalar steps, 55 pairs of a
 * stride-2 row: 6 and 7) spent more in the scalar steps than in the
 * vectors. */
static nimble_ln_stmt *row_vectors(cp_ctx *c, nimble_ln_stmt *loop, nimble_ln_expr *n, int vw) {
  int64_t nc;
  if (vw <= 1 || !cp_const_i(n, &nc)) return whole_vectors(c, loop, vw);
  if (nc < vw) return short_row(loop, n, vw);
  return nc % vw ? whole_vectors(c, loop, vw) : loop; /* no remainder: as it is */
}

/* The end of a vector loop over [lo, hi) rounded up to whole vectors,
 * when that stays at most `cap` and the input the last extra pixel reads
 * (flat index in its plane: last_read(end - 1)) is inside the plane: the
 * extra pixels are border pixels that a later loop rewrites, so the vector
 * loop leaves no scalar remainder. hi otherwise. */
static nimble_ln_expr *dw_round_up(cp_ctx *c, const dw_ctx *d, nimble_ln_expr *lo, nimble_ln_expr *hi,
                                   nimble_ln_expr *cap, nimble_ln_expr *last_read, int vw) {
  if (vw <= 1) return hi;
  nimble_ln_expr *up = cp_add(c, lo, round_up(c, cp_sub(c, hi, lo), vw));
  nimble_ln_expr *ok = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_LE, up, cap),
                           bin(c, NIMBLE_LN_LT, last_read, cp_mul(c, d->g->H, d->g->W)));
  return nimble_ln_select(c->A, ok, up, hi);
}

/* One output row oh: if its kernel rows are all inside, the border columns
 * and (when `interior` holds, or it is NULL) the vectorized interior, else
 * `slow`. orow: flat index of the output row's column 0. */
static nimble_ln_stmt *dw_row(cp_ctx *c, dw_ctx *d, nimble_ln_expr *ohr, nimble_ln_expr *orow,
                              nimble_ln_expr *interior, nimble_ln_stmt *slow) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_expr *ih0 = cp_sub(c, cp_mul(c, ohr, cp_i(c, g->s[0])), cp_i(c, g->p[0]));
  nimble_ln_expr *last = cp_add(c, ih0, cp_i(c, (d->KH - 1) * g->d[0]));
  nimble_ln_expr *rows_in =
      bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GE, ih0, cp_i(c, 0)), bin(c, NIMBLE_LN_LT, last, g->H));
  nimble_ln_var *xr = cp_var(c, "xrow", NIMBLE_LN_I64);
  nimble_ln_expr *lo = col_lo(c, g, col_off(c, g, cp_i(c, 0)));
  nimble_ln_expr *hi = cp_max(c, col_hi(c, g, col_off(c, g, cp_i(c, KW - 1))), lo);
  /* Pixel tap (KH-1, KW-1) of output column end - 1 reads, in the plane. */
  nimble_ln_expr *up = cp_add(c, lo, round_up(c, cp_sub(c, hi, lo), vw > 1 ? vw : 1));
  nimble_ln_expr *last_read = cp_add(c, cp_mul(c, last, g->W),
                                     cp_add(c, cp_mul(c, cp_sub(c, up, cp_i(c, 1)), cp_i(c, g->s[1])),
                                            cp_i(c, (KW - 1) * g->d[1] - g->p[1])));
  nimble_ln_expr *vend = dw_round_up(c, d, lo, hi, g->OW, last_read, vw);
  nimble_ln_stmt *loops[3];
  int np = 0;
  for (int part = 0; part < 3; part++) {
    nimble_ln_var *ow = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *iw0 = cp_sub(c, cp_mul(c, ref(c, ow), cp_i(c, g->s[1])), cp_i(c, g->p[1]));
    nimble_ln_expr *v = part == 1 ? dw_sum(c, d, cp_add(c, ref(c, xr), iw0), NULL) : dw_sum(c, d, ref(c, xr), iw0);
    nimble_ln_stmt *st = nimble_ln_store(c->A, d->o, cp_add(c, orow, ref(c, ow)), v);
    loops[np++] = part == 0   ? nimble_ln_for(c->A, ow, cp_i(c, 0), lo, NIMBLE_LN_SERIAL, 0, st)
                  : part == 1 ? nimble_ln_for(c->A, ow, lo, vend, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, st)
                              : nimble_ln_for(c->A, ow, hi, g->OW, NIMBLE_LN_SERIAL, 0, st);
    if (part == 1 && interior) loops[np - 1] = nimble_ln_if(c->A, interior, loops[np - 1], NULL);
  }
  nimble_ln_stmt *fast = nimble_ln_let(c->A, xr, cp_add(c, d->plane, cp_mul(c, ih0, g->W)),
                                       nimble_ln_seq(c->A, loops, (size_t)np));
  if (!fast || !slow) return NULL;
  return nimble_ln_if(c->A, rows_in, fast, slow);
}

/* The plane's interior rows as one vectorized loop over flat output
 * indices (unit strides, OW == W; see above). */
static nimble_ln_stmt *dw_plane(cp_ctx *c, dw_ctx *d, nimble_ln_expr *obase) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  /* Rows with every kernel row inside: [pt, H + pt - (KH-1)*dh), within
   * [0, OH) and the band [oh_lo, oh_hi). */
  nimble_ln_expr *r0 = cp_min(c, cp_max(c, cp_i(c, g->p[0]), d->oh_lo), d->oh_hi);
  nimble_ln_expr *r1 = cp_min(c, d->oh_hi, cp_max(c, cp_add(c, g->H, cp_i(c, g->p[0] - (d->KH - 1) * g->d[0])), r0));
  nimble_ln_expr *lo = col_lo(c, g, col_off(c, g, cp_i(c, 0)));
  nimble_ln_expr *hi = cp_max(c, col_hi(c, g, col_off(c, g, cp_i(c, KW - 1))), lo);
  nimble_ln_expr *p0 = cp_add(c, cp_mul(c, r0, g->OW), lo);
  nimble_ln_expr *p1 = cp_max(c, cp_add(c, cp_mul(c, cp_sub(c, r1, cp_i(c, 1)), g->OW), hi), p0);
  if (vw > 1) {
    nimble_ln_expr *up = cp_add(c, p0, round_up(c, cp_sub(c, p1, p0), vw));
    nimble_ln_expr *last_read = cp_add(c, cp_sub(c, up, cp_i(c, 1)),
                                       cp_add(c, cp_mul(c, cp_i(c, (d->KH - 1) * g->d[0] - g->p[0]), g->W),
                                              cp_i(c, (KW - 1) * g->d[1] - g->p[1])));
    p1 = dw_round_up(c, d, p0, p1, cp_mul(c, d->oh_hi, g->OW), last_read, vw); /* not into the next band */
  }
  nimble_ln_var *p = cp_var(c, "p", NIMBLE_LN_I64);
  /* Input of tap (0, 0) for output pixel p: p - pt*W - pl. */
  nimble_ln_expr *x0 = cp_add(c, d->plane, cp_sub(c, ref(c, p), cp_add(c, cp_mul(c, cp_i(c, g->p[0]), g->W),
                                                                       cp_i(c, g->p[1]))));
  nimble_ln_stmt *st = nimble_ln_store(c->A, d->o, cp_add(c, obase, ref(c, p)), dw_sum(c, d, x0, NULL));
  /* Only when some row and column are interior (hi > lo, r1 > r0). */
  nimble_ln_expr *any = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GT, r1, r0), bin(c, NIMBLE_LN_GT, hi, lo));
  return nimble_ln_if(c->A, any, nimble_ln_for(c->A, p, p0, p1, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, st),
                      NULL);
}

/* Output rows [lo, hi) of a depthwise plane from a padded copy at b:
 * with We NULL, dw_padded's (output row oh's kernel row kh is buffer row
 * oh - lo + kh, column ow + kw), else stride 2's (dw_s2_split_row: buffer row
 * 2*(oh - lo) + kh, column kw/2 of E or O). bias + taps in dw_sum's order,
 * rows but the last run to whole vectors where the extra pixels stay
 * inside the next row (which is written after), the last one exactly. */
static nimble_ln_stmt *dw_out_rows(cp_ctx *c, const dw_ctx *d, nimble_ln_param *buf, nimble_ln_expr *b,
                                   nimble_ln_expr *pitch, nimble_ln_expr *We, nimble_ln_expr *obase,
                                   nimble_ln_expr *lo, nimble_ln_expr *hi, int vw) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, KH = (int)d->KH;
  nimble_ln_expr *one = cp_i(c, 1);
  nimble_ln_stmt *parts[2];
  for (int part = 0; part < 2; part++) {
    nimble_ln_var *oh = cp_var(c, "oh", NIMBLE_LN_I64), *ow = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *ohv = part == 0 ? ref(c, oh) : cp_sub(c, hi, one);
    nimble_ln_expr *v = ref(c, d->bv);
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        nimble_ln_expr *qr = cp_add(c, cp_mul(c, cp_sub(c, ohv, lo), cp_i(c, We ? 2 : 1)), cp_i(c, kh));
        nimble_ln_expr *col = We ? cp_add(c, (kw & 1) ? We : cp_i(c, 0), cp_i(c, kw / 2)) : cp_i(c, kw);
        nimble_ln_expr *at = cp_add(c, cp_add(c, b, cp_mul(c, qr, pitch)), cp_add(c, ref(c, ow), col));
        v = nimble_ln_fma(c->A, ref(c, d->wv[kh * KW + kw]), nimble_ln_load(c->A, buf, at), v);
      }
    nimble_ln_stmt *st = nimble_ln_store(c->A, d->o, cp_add(c, obase, cp_add(c, cp_mul(c, ohv, g->OW), ref(c, ow))),
                                         dw_clamp(c, d, v));
    if (part == 0) {
      nimble_ln_expr *up = round_up(c, g->OW, vw);
      up = nimble_ln_select(c->A, bin(c, NIMBLE_LN_GE, g->OW, cp_i(c, vw - 1)), up, g->OW);
      nimble_ln_stmt *row = short_row(nimble_ln_for(c->A, ow, cp_i(c, 0), up, NIMBLE_LN_VECTORIZED, vw, st), up, vw);
      parts[0] = nimble_ln_for(c->A, oh, lo, cp_max(c, cp_sub(c, hi, one), lo), NIMBLE_LN_SERIAL, 0, row);
    } else {
      parts[1] = row_vectors(c, cp_for(c, ow, g->OW, NIMBLE_LN_VECTORIZED, vw, st), g->OW, vw);
      parts[1] = nimble_ln_if(c->A, bin(c, NIMBLE_LN_GT, hi, lo), parts[1], NULL);
    }
  }
  return nimble_ln_seq2(c->A, parts[0], parts[1]);
}

/* Small planes, unit strides (dw_padded): the plane copied into a
 * zero-padded buffer (Hp x Wp, slot pidx of the `planes` slots in the
 * kernel's scratch buffer: the task's, see the call), then every output
 * row in one vectorized pass over it with no border cases: on 14x14 and
 * 7x7 planes the border columns and rows are most of the pixels, and the
 * scalar border loops most of the time. Rows but the last run to a whole
 * number of vectors (the extra pixels are the next row's, rewritten by
 * it); the sum is the same bias + taps in the same order as dw_sum
 * (outside taps add w * 0). NULL where it does not apply; *cond: the
 * run-time condition (the plane small enough, the output the padded
 * size). */
#define DW_PAD_MAX_FLOATS 400

/* Whether a padded copy serves strides s (1: dw_padded's layout, 2:
 * dw_padded_s2's; dilations 1, a constant kernel width, vectors); *small:
 * 1 when the padded plane is known to fit DW_PAD_MAX_FLOATS (the whole
 * plane's copy), 0 known not to (dw_rows_copied), -1 not known (a
 * symbolic plane: the whole plane's run-time test). */
static bool dw_copy_applies(const cp_ctx *c, const dw_ctx *d, int64_t s, int *small) {
  const cv_geom *g = d->g;
  if (c->opt.vector_width <= 1 || g->kw_const <= 0 || g->s[0] != s || g->s[1] != s || g->d[0] != 1 ||
      g->d[1] != 1 || g->flat)
    return false;
  int64_t hc, wc;
  *small = !cp_const_i(g->H, &hc) || !cp_const_i(g->W, &wc)
               ? -1
               : (hc + g->p[0] + g->p[2]) * (wc + g->p[1] + g->p[3]) <= DW_PAD_MAX_FLOATS;
  return true;
}

static nimble_ln_stmt *dw_padded(cp_ctx *c, dw_ctx *d, nimble_ln_expr *obase, nimble_ln_expr *pidx,
                                 nimble_ln_expr *planes, nimble_ln_expr **cond) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, KH = (int)d->KH, vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  int small;
  /* Known too large: no scratch buffer for a dead branch (dw_rows_copied's). */
  if (!dw_copy_applies(c, d, 1, &small) || small == 0) return NULL;
  nimble_ln_expr *Hp = cp_add(c, g->H, cp_i(c, g->p[0] + g->p[2]));
  nimble_ln_expr *Wp = cp_add(c, g->W, cp_i(c, g->p[1] + g->p[3]));
  nimble_ln_expr *area = cp_mul(c, Hp, Wp);
  /* The rounded-up rows read up to vw - 1 past; a slot is whole cache lines. */
  nimble_ln_expr *PS = round_up(c, cp_add(c, area, cp_i(c, vw)), 16);
  *cond = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_LE, area, cp_i(c, DW_PAD_MAX_FLOATS)),
              bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_EQ, g->OH, cp_sub(c, Hp, cp_i(c, KH - 1))),
                  bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_EQ, g->OW, cp_sub(c, Wp, cp_i(c, KW - 1))),
                      bin(c, NIMBLE_LN_GT, g->OH, cp_i(c, 0)))));
  nimble_ln_expr *size = cp_max(c, nimble_ln_select(c->A, *cond, cp_mul(c, planes, PS), cp_i(c, 1)), cp_i(c, 1));
  nimble_ln_param *pad = nimble_ln_kernel_add_scratch(c->k, "dw_pad", NIMBLE_LN_F32, size);
  if (!pad) return NULL;
  nimble_ln_var *base = cp_var(c, "pad", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, base);
  /* Zero, then copy the plane's rows in. */
  nimble_ln_var *q = cp_var(c, "q", NIMBLE_LN_I64), *r = cp_var(c, "r", NIMBLE_LN_I64), *w = cp_var(c, "w", NIMBLE_LN_I64);
  nimble_ln_stmt *zero = cp_for(c, q, PS, NIMBLE_LN_VECTORIZED, vw,
                                nimble_ln_store(c->A, pad, cp_add(c, b, ref(c, q)), nimble_ln_f32(c->A, 0)));
  nimble_ln_expr *dst = cp_add(c, b, cp_add(c, cp_mul(c, cp_add(c, ref(c, r), cp_i(c, g->p[0])), Wp),
                                            cp_add(c, ref(c, w), cp_i(c, g->p[1]))));
  nimble_ln_expr *src = cp_add(c, d->plane, cp_add(c, cp_mul(c, ref(c, r), g->W), ref(c, w)));
  nimble_ln_stmt *copy = row_vectors(c, cp_for(c, w, g->W, NIMBLE_LN_VECTORIZED, vw,
                                               nimble_ln_store(c->A, pad, dst, cp_value_flat(c, d->x, src))),
                                     g->W, vw);
  copy = cp_for(c, r, g->H, NIMBLE_LN_SERIAL, 0, copy);
  /* Output rows: bias + taps, read from the padded plane. */
  nimble_ln_stmt *steps[3] = {zero, copy, dw_out_rows(c, d, pad, b, Wp, NULL, obase, cp_i(c, 0), g->OH, vw)};
  return nimble_ln_let(c->A, base, cp_mul(c, pidx, PS), nimble_ln_seq(c->A, steps, 3));
}

/* Stride 2's layout (dw_padded_s2, dw_rows_copied): padded row r of a plane as
 * E[j] = xp[r][2j] at row + j and O[j] = xp[r][2j + 1] at row + We + j.
 * dw_s2_split_row fills one row from the image row at flat index xrow:
 * both columns inside the row for j in [jlo, jhi) (one vectorized pass of
 * interleaved loads), the j outside, at most one or two at each end, by
 * selects. */
static nimble_ln_stmt *dw_s2_split_row(cp_ctx *c, const dw_ctx *d, nimble_ln_param *buf, nimble_ln_expr *row,
                                       nimble_ln_expr *xrow, nimble_ln_expr *We, int vw) {
  const cv_geom *g = d->g;
  nimble_ln_expr *two = cp_i(c, 2);
  int64_t pl = g->p[1];
  nimble_ln_expr *jlo = cp_i(c, (pl + 1) / 2);
  nimble_ln_expr *jhi = cp_max(c, cp_div(c, cp_add(c, g->W, cp_i(c, pl)), two), jlo); /* 2j + 1 - pl <= W - 1 */
  nimble_ln_stmt *fill[3];
  for (int part = 0; part < 3; part++) {
    nimble_ln_var *j = cp_var(c, "j", NIMBLE_LN_I64);
    nimble_ln_expr *jr = ref(c, j);
    nimble_ln_expr *iw[2] = {cp_sub(c, cp_mul(c, jr, two), cp_i(c, pl)), cp_add(c, cp_mul(c, jr, two), cp_i(c, 1 - pl))};
    nimble_ln_stmt *st[2];
    for (int par = 0; par < 2; par++) {
      nimble_ln_expr *v = part == 1 ? cp_value_flat(c, d->x, cp_add(c, xrow, iw[par]))
                                    : nimble_ln_select(c->A, inside(c, iw[par], g->W),
                                                       cp_value_flat(c, d->x, cp_add(c, xrow, clamp(c, iw[par], g->W))),
                                                       nimble_ln_f32(c->A, 0));
      st[par] = nimble_ln_store(c->A, buf, cp_add(c, row, cp_add(c, jr, par ? We : cp_i(c, 0))), v);
    }
    nimble_ln_stmt *body = nimble_ln_seq(c->A, st, 2);
    fill[part] = part == 0   ? nimble_ln_for(c->A, j, cp_i(c, 0), cp_min(c, jlo, We), NIMBLE_LN_SERIAL, 0, body)
                 : part == 1 ? row_vectors(c, nimble_ln_for(c->A, j, jlo, cp_min(c, jhi, We), NIMBLE_LN_VECTORIZED, vw, body),
                                           cp_sub(c, jhi, jlo), vw)
                             : nimble_ln_for(c->A, j, cp_max(c, jhi, jlo), We, NIMBLE_LN_SERIAL, 0, body);
  }
  return nimble_ln_seq(c->A, fill, 3);
}

/* Unit strides' layout (dw_rows_copied): padded row `row` of a plane as
 * pl zeros, the image row at flat index xrow, pr zeros (pitch W + pl + pr). */
static nimble_ln_stmt *dw_s1_pad_row(cp_ctx *c, const dw_ctx *d, nimble_ln_param *buf, nimble_ln_expr *row,
                                     nimble_ln_expr *xrow, int vw) {
  const cv_geom *g = d->g;
  nimble_ln_var *jl = cp_var(c, "j", NIMBLE_LN_I64), *j = cp_var(c, "j", NIMBLE_LN_I64), *jr = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_stmt *part[3] = {
      nimble_ln_for(c->A, jl, cp_i(c, 0), cp_i(c, g->p[1]), NIMBLE_LN_SERIAL, 0,
                    nimble_ln_store(c->A, buf, cp_add(c, row, ref(c, jl)), nimble_ln_f32(c->A, 0))),
      row_vectors(c, cp_for(c, j, g->W, NIMBLE_LN_VECTORIZED, vw,
                            nimble_ln_store(c->A, buf, cp_add(c, row, cp_add(c, ref(c, j), cp_i(c, g->p[1]))),
                                            cp_value_flat(c, d->x, cp_add(c, xrow, ref(c, j))))),
                  g->W, vw),
      nimble_ln_for(c->A, jr, cp_i(c, 0), cp_i(c, g->p[3]), NIMBLE_LN_SERIAL, 0,
                    nimble_ln_store(c->A, buf, cp_add(c, row, cp_add(c, ref(c, jr), cp_add(c, g->W, cp_i(c, g->p[1])))),
                                    nimble_ln_f32(c->A, 0))),
  };
  return nimble_ln_seq(c->A, part, 3);
}

/* Small planes, stride 2 (mobilenet_v2's 14x14 -> 7x7):
 * the plane, zero-padded, copied once with its even and odd columns apart
 * (row r of the padded plane as E[r][j] = xp[r][2j] and O[r][j] =
 * xp[r][2j+1], We = ceil(Wp/2) floats each), so that tap (kh, kw) of
 * output column ow is (kw odd ? O : E)[2oh + kh][ow + kw/2]: every tap a
 * contiguous vector, where the row nest's stride-2 loads were assembled
 * lane by lane and most of a 7-pixel row ran scalar. Rows but the last
 * run to whole vectors as in dw_padded; the sum is bias + taps in dw_sum's
 * order; a Relu or Clip goes into the stores when d->clamp is set. NULL
 * where it does not apply; *cond: the run-time
 * condition (the padded plane at most DW_PAD_MAX_FLOATS, the output the
 * size stride 2 gives). */
static nimble_ln_stmt *dw_padded_s2(cp_ctx *c, dw_ctx *d, nimble_ln_expr *obase, nimble_ln_expr *pidx,
                                    nimble_ln_expr *planes, nimble_ln_expr **cond) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, KH = (int)d->KH, vw = c->opt.vector_width, small;
  /* Known too large: no scratch buffer for a dead branch. */
  if (!dw_copy_applies(c, d, 2, &small) || small == 0) return NULL;
  nimble_ln_expr *two = cp_i(c, 2), *one = cp_i(c, 1);
  nimble_ln_expr *Hp = cp_add(c, g->H, cp_i(c, g->p[0] + g->p[2]));
  nimble_ln_expr *Wp = cp_add(c, g->W, cp_i(c, g->p[1] + g->p[3]));
  nimble_ln_expr *We = cp_div(c, cp_add(c, Wp, one), two);
  nimble_ln_expr *pitch = cp_mul(c, We, two); /* one padded row: E then O */
  /* Rounded-up rows read up to vw - 1 columns past a row's end. */
  nimble_ln_expr *PS = round_up(c, cp_add(c, cp_mul(c, Hp, pitch), cp_i(c, vw)), 16);
  *cond = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_LE, cp_mul(c, Hp, Wp), cp_i(c, DW_PAD_MAX_FLOATS)),
              bin(c, NIMBLE_LN_AND,
                  bin(c, NIMBLE_LN_EQ, g->OH, cp_add(c, cp_div(c, cp_sub(c, Hp, cp_i(c, KH)), two), one)),
                  bin(c, NIMBLE_LN_AND,
                      bin(c, NIMBLE_LN_EQ, g->OW, cp_add(c, cp_div(c, cp_sub(c, Wp, cp_i(c, KW)), two), one)),
                      bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GE, Hp, cp_i(c, KH)),
                          bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GE, Wp, cp_i(c, KW)),
                              bin(c, NIMBLE_LN_GT, g->W, cp_i(c, 0)))))));
  nimble_ln_expr *size = cp_max(c, nimble_ln_select(c->A, *cond, cp_mul(c, planes, PS), one), one);
  nimble_ln_param *buf = nimble_ln_kernel_add_scratch(c->k, "dw_s2", NIMBLE_LN_F32, size);
  if (!buf) return NULL;
  nimble_ln_var *base = cp_var(c, "pad", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, base);
  nimble_ln_var *q = cp_var(c, "q", NIMBLE_LN_I64), *r = cp_var(c, "r", NIMBLE_LN_I64);
  nimble_ln_stmt *zero = cp_for(c, q, PS, NIMBLE_LN_VECTORIZED, vw,
                                nimble_ln_store(c->A, buf, cp_add(c, b, ref(c, q)), nimble_ln_f32(c->A, 0)));
  /* Image row r is padded row r + pt. */
  nimble_ln_expr *erow = cp_add(c, b, cp_mul(c, cp_add(c, ref(c, r), cp_i(c, g->p[0])), pitch));
  nimble_ln_expr *xrow = cp_add(c, d->plane, cp_mul(c, ref(c, r), g->W));
  nimble_ln_stmt *copy = cp_for(c, r, g->H, NIMBLE_LN_SERIAL, 0, dw_s2_split_row(c, d, buf, erow, xrow, We, vw));
  nimble_ln_stmt *steps[3] = {zero, copy, dw_out_rows(c, d, buf, b, pitch, We, obase, cp_i(c, 0), g->OH, vw)};
  return nimble_ln_let(c->A, base, cp_mul(c, pidx, PS), nimble_ln_seq(c->A, steps, 3));
}

/* Depthwise rows from a copy of their input (dw_rows_copied), per plane:
 * the input rows of a sub-band of the task's output rows, zero-padded, go
 * into the task's own slot of a scratch buffer (one slot per thread), then
 * those output rows are computed from it with contiguous loads and no
 * border cases (dw_out_rows: rows but the sub-band's last run to whole
 * vectors, the spill being the next row's, which the task writes after);
 * with one thread sub-band after sub-band, so that the copy is still in
 * L1 when read. The
 * sum is dw_sum's: bias + taps in order (outside taps add w * 0).
 * - Stride 2 on larger planes (mobilenet_v2's 112x112 -> 56x56 and 56x56
 *   -> 28x28): the row nest's taps at 2ow - 1, 2ow and 2ow + 1 are no
 *   single interleaved group, and LLVM assembled the third lane by lane
 *   (the layer ran at half the L3's bandwidth); the copy has each row's
 *   even and odd columns apart (dw_padded_s2's layout).
 * - Unit strides on mid-sized planes (56x56, 28x28): the flattened
 *   plane's vector loop left the columns whose window crosses the padding
 *   to scalar loops with a select per tap, on 28x28 planes most of the
 *   instructions; the copy is dw_padded's layout. Not on rows wider than
 *   DW_S1_MAX_WIDTH.
 * NULL where it does not apply; *cond: the run-time condition (rows of at
 * least a vector, for unit strides the output the size they give).
 * `slot`: the task's index among at most T running at once (bound around
 * the plane's statement). */
#define DW_SLOT_FLOATS 4096 /* a sub-band's copy: 16 KB, in L1 */
/* Padded rows up to this wide for unit strides: on 112-pixel rows the
 * border columns are 2 in 112 and the copy cost more than they did (32
 * planes of 112x112: 0.125 -> 0.133 ms a call; 144 of 56x56 0.164 ->
 * 0.149, 192 of 28x28 0.080 -> 0.060). */
#define DW_S1_MAX_WIDTH 64
static nimble_ln_stmt *dw_rows_copied(cp_ctx *c, dw_ctx *d, nimble_ln_expr *orow0, nimble_ln_expr *slot,
                                      nimble_ln_expr **cond) {
  const cv_geom *g = d->g;
  int KW = (int)g->kw_const, KH = (int)d->KH, vw = c->opt.vector_width, small, s = (int)g->s[0];
  /* A kernel has one scratch buffer: only planes known to be past
   * dw_padded's and dw_padded_s2's (which a symbolic plane may be). */
  if (!dw_copy_applies(c, d, s, &small) || small != 0) return NULL;
  int64_t wc;
  if (!cp_const_i(g->W, &wc)) return NULL;
  int64_t wp = wc + g->p[1] + g->p[3], pitch_c = s == 1 ? wp : (wp + 1) / 2 * 2;
  if (s == 1 && wp > DW_S1_MAX_WIDTH) return NULL;
  nimble_ln_expr *one = cp_i(c, 1), *S = cp_i(c, s);
  nimble_ln_expr *We = s == 2 ? cp_i(c, pitch_c / 2) : NULL, *pitch = cp_i(c, pitch_c);
  /* With one thread, sub-bands of R output rows, whose s*R + KH - s input
   * rows fit in DW_SLOT_FLOATS; with more, the whole band (measured: 96
   * planes of 112x112 at stride 2 in mobilenet_v2 at one thread 271 ->
   * 234 us a call with sub-bands; at two threads 134 us with whole bands,
   * 147 with sub-bands, and alone 0.11 against 0.17 ms: why, not found).
   * A slot holds one and a vector's slack for the rounded-up rows' reads. */
  nimble_ln_expr *T0 = cp_max(c, nimble_ln_num_threads(c->A), one);
  int64_t R = (DW_SLOT_FLOATS / pitch_c - KH + s) / s;
  nimble_ln_expr *OH1 = cp_max(c, g->OH, one);
  nimble_ln_expr *Rx = nimble_ln_select(c->A, bin(c, NIMBLE_LN_GT, T0, one), OH1, cp_min(c, cp_i(c, R < 1 ? 1 : R), OH1));
  nimble_ln_expr *slot_size = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, Rx, S), cp_i(c, KH - s)), pitch), cp_i(c, vw));
  *cond = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GE, g->OW, cp_i(c, vw)), bin(c, NIMBLE_LN_GT, g->W, cp_i(c, 0)));
  if (s == 1)
    *cond = bin(c, NIMBLE_LN_AND, *cond,
                bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_EQ, g->OW, cp_i(c, wp - (KW - 1))),
                    bin(c, NIMBLE_LN_EQ, g->OH, cp_sub(c, cp_add(c, g->H, cp_i(c, g->p[0] + g->p[2])), cp_i(c, KH - 1)))));
  nimble_ln_param *buf = nimble_ln_kernel_add_scratch(c->k, s == 1 ? "dw_rows_s1" : "dw_rows_s2", NIMBLE_LN_F32,
                                                      cp_mul(c, T0, slot_size));
  if (!buf) return NULL;
  nimble_ln_var *base = cp_var(c, "slot", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, base);
  nimble_ln_var *sb = cp_var(c, "sb", NIMBLE_LN_I64), *lo = cp_var(c, "lo", NIMBLE_LN_I64), *hi = cp_var(c, "hi", NIMBLE_LN_I64);
  /* Buffer row q is padded row s*lo + q, image row s*lo + q - pt. */
  nimble_ln_expr *nrows = cp_add(c, cp_mul(c, cp_sub(c, ref(c, hi), ref(c, lo)), S), cp_i(c, KH - s));
  nimble_ln_var *q = cp_var(c, "q", NIMBLE_LN_I64), *z = cp_var(c, "z", NIMBLE_LN_I64), *ih = cp_var(c, "ih", NIMBLE_LN_I64);
  nimble_ln_expr *qrow = cp_add(c, b, cp_mul(c, ref(c, q), pitch));
  nimble_ln_expr *xrow = cp_add(c, d->plane, cp_mul(c, ref(c, ih), g->W));
  nimble_ln_stmt *zrow = cp_for(c, z, pitch, NIMBLE_LN_VECTORIZED, vw,
                                nimble_ln_store(c->A, buf, cp_add(c, qrow, ref(c, z)), nimble_ln_f32(c->A, 0)));
  nimble_ln_stmt *fill = s == 2 ? dw_s2_split_row(c, d, buf, qrow, xrow, We, vw) : dw_s1_pad_row(c, d, buf, qrow, xrow, vw);
  nimble_ln_stmt *rowq = nimble_ln_if(c->A, inside(c, ref(c, ih), g->H), fill, zrow);
  rowq = nimble_ln_let(c->A, ih, cp_sub(c, cp_add(c, cp_mul(c, ref(c, lo), S), ref(c, q)), cp_i(c, g->p[0])), rowq);
  nimble_ln_stmt *copy = nimble_ln_for(c->A, q, cp_i(c, 0), nrows, NIMBLE_LN_SERIAL, 0, rowq);
  nimble_ln_var *z2 = cp_var(c, "z", NIMBLE_LN_I64);
  nimble_ln_stmt *slack = nimble_ln_for(c->A, z2, cp_i(c, 0), cp_i(c, vw), NIMBLE_LN_SERIAL, 0,
                                        nimble_ln_store(c->A, buf, cp_add(c, cp_add(c, b, cp_mul(c, nrows, pitch)), ref(c, z2)),
                                                        nimble_ln_f32(c->A, 0)));
  nimble_ln_stmt *steps[3] = {copy, slack, dw_out_rows(c, d, buf, b, pitch, We, orow0, ref(c, lo), ref(c, hi), vw)};
  nimble_ln_stmt *sub = nimble_ln_seq(c->A, steps, 3);
  sub = nimble_ln_let(c->A, hi, cp_min(c, cp_add(c, ref(c, lo), Rx), d->oh_hi), sub);
  sub = nimble_ln_let(c->A, lo, cp_add(c, d->oh_lo, cp_mul(c, ref(c, sb), Rx)), sub);
  nimble_ln_expr *nsub = cp_div(c, cp_add(c, cp_sub(c, d->oh_hi, d->oh_lo), cp_sub(c, Rx, one)), Rx);
  sub = nimble_ln_for(c->A, sb, cp_i(c, 0), cp_max(c, nsub, cp_i(c, 0)), NIMBLE_LN_SERIAL, 0, sub);
  return nimble_ln_let(c->A, base, cp_mul(c, slot, slot_size), sub);
}

/* The epilogue as a pass over the band of rows [oh_lo, oh_hi) of the
 * plane just written (n, co), while it is in cache; a fresh statement
 * each call. When it is only a Relu or Clip of the convolution
 * (clamp_only), it reads nothing but the plane: one vectorized pass over
 * the band's contiguous floats as row 0 of a flat plane, instead of a
 * short loop per row (on 14x14 planes a vector and six scalar clamps per
 * row took more time than the taps). NULL when the epilogue cannot be
 * written at that index. */
static nimble_ln_stmt *dw_epilogue_pass(cp_ctx *c, const dw_ctx *d, cp_node *root, nimble_ln_expr *n,
                                        nimble_ln_expr *co, bool clamp_only) {
  const cv_geom *g = d->g;
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_var *ohe = cp_var(c, "oh", NIMBLE_LN_I64), *owe = cp_var(c, "ow", NIMBLE_LN_I64);
  nimble_ln_expr *idx[4] = {n, co, clamp_only ? cp_i(c, 0) : ref(c, ohe), ref(c, owe)};
  nimble_ln_stmt *e = cp_epilogue_at(c, root, d->o, idx, NULL);
  if (!e) return NULL;
  nimble_ln_loop_kind_t vk = vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL;
  if (clamp_only) return nimble_ln_for(c->A, owe, cp_mul(c, d->oh_lo, g->OW), cp_mul(c, d->oh_hi, g->OW), vk, vw, e);
  return nimble_ln_for(c->A, ohe, d->oh_lo, d->oh_hi, NIMBLE_LN_SERIAL, 0, cp_for(c, owe, g->OW, vk, vw, e));
}

/* Binds the weights and the bias of channel co around s. */
static nimble_ln_stmt *dw_bind(cp_ctx *c, dw_ctx *d, cp_node *wt, cp_node *bias, nimble_ln_expr *co,
                               nimble_ln_stmt *s) {
  int KW = (int)d->g->kw_const;
  conv_w wc = {wt, co, cp_i(c, 0), NULL, wt->ext[1]};
  for (int i = (int)d->KH * KW - 1; i >= 0; i--) {
    wc.kh = cp_i(c, i / KW);
    s = nimble_ln_let(c->A, d->wv[i], conv_weight(c, &wc, 0, cp_i(c, i % KW)), s);
  }
  nimble_ln_expr *bi[1] = {co};
  return nimble_ln_let(c->A, d->bv, bias ? cp_value(c, bias, bi) : nimble_ln_f32(c->A, 0), s);
}

/* The rows whose multiples start a plane's row on a 64-byte line (16 /
 * gcd(OW, 16), planes aligned): threads whose bands of rows meet inside a
 * line both write it, and it moved between the cores for every plane or
 * channel row. 1 (no rounding) when OW is unknown or rounding could take
 * more than 4 rows (odd widths: 16) and unbalance the threads. */
static int64_t line_rows(cp_ctx *c, nimble_ln_expr *OW) {
  int64_t ow, q = 16;
  if (!cp_const_i(OW, &ow) || ow <= 0) return 1;
  for (; ow % 2 == 0 && q > 1; ow /= 2) q /= 2;
  return q <= 4 ? q : 1;
}

/* conv2d into o (raw conv plus its bias input, before any epilogue). */
/* The sgemm path's rows per block with T threads: R (the cache-sized
 * rows) when that makes one block of fewer than 128 columns per thread,
 * else fewer so that the block count is a multiple of T and the T tasks
 * are even (cnn's 16x16 layer, one block of 256 columns: two tasks of 128
 * instead of a copy and a product each split in two, 0.17-0.19 -> 0.14-0.16
 * ms for the model at 2 threads). */
static nimble_ln_expr *slot_rows(cp_ctx *c, nimble_ln_expr *OH, nimble_ln_expr *OW, nimble_ln_expr *R,
                                 nimble_ln_expr *T) {
  nimble_ln_expr *one = cp_i(c, 1);
  nimble_ln_expr *nb0 = cp_div(c, cp_add(c, OH, cp_sub(c, R, one)), R);
  nimble_ln_expr *nb = cp_mul(c, cp_div(c, cp_add(c, nb0, cp_sub(c, T, one)), T), T);
  nimble_ln_expr *wide = bin(c, NIMBLE_LN_GE, cp_mul(c, OH, OW), cp_mul(c, T, cp_i(c, 128)));
  nb = nimble_ln_select(c->A, bin(c, NIMBLE_LN_OR, bin(c, NIMBLE_LN_GT, nb0, one), wide), nb, one);
  nimble_ln_expr *r = cp_max(c, cp_div(c, cp_add(c, OH, cp_sub(c, nb, one)), nb), one);
  /* Blocks on cache lines where that keeps their count (see line_rows):
   * mobilenet_v2's 1x1 convolutions on 28x28 at 2 threads, 14 + 14 rows
   * against 16 + 12: 45 -> 37-39 us a call (the 32->192 expansions),
   * 35 -> 25 (144->32). */
  int64_t q = line_rows(c, OW);
  if (q == 1) return r;
  nimble_ln_expr *al = round_up(c, r, q);
  nimble_ln_expr *same = bin(c, NIMBLE_LN_EQ, cp_div(c, cp_add(c, OH, cp_sub(c, al, one)), al),
                             cp_div(c, cp_add(c, OH, cp_sub(c, r, one)), r));
  return nimble_ln_select(c->A, same, al, r);
}

/* Its tasks: min(blocks of R rows, T), at least 1. */
static nimble_ln_expr *slot_count(cp_ctx *c, nimble_ln_expr *OH, nimble_ln_expr *R, nimble_ln_expr *T) {
  nimble_ln_expr *one = cp_i(c, 1);
  nimble_ln_expr *nblk = cp_div(c, cp_add(c, OH, cp_sub(c, R, one)), R);
  return cp_max(c, cp_min(c, nblk, T), one);
}

/* A depthwise band height of at least bh rows whose bands start on a
 * cache line (see line_rows) where that leaves more than one band: 192
 * planes of 28x28 alone at two threads, bands of 14 rows against 16 + 12:
 * 0.050 -> 0.036 ms. Any height is correct: the last bands may be empty. */
static nimble_ln_expr *dw_band_on_line(cp_ctx *c, const cv_geom *g, nimble_ln_expr *bh) {
  int64_t q = line_rows(c, g->OW);
  if (q == 1) return bh;
  nimble_ln_expr *al = round_up(c, bh, q);
  return nimble_ln_select(c->A, bin(c, NIMBLE_LN_LT, al, g->OH), al, bh);
}

/* What an im2col block copy needs (conv_into_out's sgemm path). */
typedef struct im2col_ctx {
  const cv_geom *gr;
  cp_node *x;
  nimble_ln_param *col;
  nimble_ln_expr *ldcol, *K, *KK, *OWr, *cols, *nr, *gr_, *cg, *Ci, *oh0, *rows, *one;
  nimble_ln_expr *col_at; /* where the block's columns start in col */
  int vw;
  /* Stride 2 in columns: the image's rows with their even and odd columns
   * apart (deinterleave_rows), [channel][row][parity][Wh]; NULL otherwise. */
  nimble_ln_param *xd;
  nimble_ln_expr *Wh, *xd_at; /* xd_at: where the planes start in xd */
} im2col_ctx;

/* im2col of the block: row r = (ci, kh, kw) of col holds, per output
 * pixel of the block, the input it multiplies (0 in the padding); rows in
 * parallel tasks. A fresh statement each call (its variables too). */
static nimble_ln_stmt *im2col_block(cp_ctx *c, const im2col_ctx *q) {
  const cv_geom gr = *q->gr;
  cp_node *x = q->x;
  nimble_ln_param *col = q->col;
  nimble_ln_expr *ldcol = q->ldcol, *K = q->K, *KK = q->KK, *OWr = q->OWr, *cols = q->cols, *nr = q->nr,
                 *gr_ = q->gr_, *cg = q->cg, *Ci = q->Ci, *oh0 = q->oh0, *rows = q->rows, *one = q->one;
  int vw = q->vw;
  nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64), *oh2 = cp_var(c, "oh", NIMBLE_LN_I64),
                *ow2 = cp_var(c, "ow", NIMBLE_LN_I64), *ihv = cp_var(c, "ih", NIMBLE_LN_I64),
                *kwv = cp_var(c, "kw", NIMBLE_LN_I64), *khv = cp_var(c, "kh", NIMBLE_LN_I64),
                *civ = cp_var(c, "ci", NIMBLE_LN_I64);
  nimble_ln_expr *rr = ref(c, r);
  nimble_ln_expr *rbase = cp_add(c, q->col_at, cp_mul(c, rr, ldcol)); /* row r of the block */
  nimble_ln_expr *off = col_off(c, &gr, ref(c, kwv));
  nimble_ln_expr *lo = col_lo(c, &gr, off), *hi = cp_max(c, col_hi(c, &gr, off), lo);
  nimble_ln_expr *crow = cp_add(c, rbase, cp_mul(c, cp_sub(c, ref(c, oh2), oh0), OWr));
  nimble_ln_expr *cin_ = cp_add(c, cp_mul(c, nr, Ci), cp_add(c, cp_mul(c, gr_, cg), ref(c, civ)));
  nimble_ln_expr *xrow2 = cp_add(c, cp_mul(c, cin_, cp_mul(c, gr.H, gr.W)), cp_mul(c, ref(c, ihv), gr.W));
  nimble_ln_expr *iw = cp_add(c, cp_mul(c, ref(c, ow2), cp_i(c, gr.s[1])), off);
  nimble_ln_expr *xin = cp_value_flat(c, x, cp_add(c, xrow2, iw));
  nimble_ln_expr *xsel = nimble_ln_select(c->A, inside(c, iw, gr.W),
                                          cp_value_flat(c, x, cp_add(c, xrow2, clamp(c, iw, gr.W))),
                                          nimble_ln_f32(c->A, 0));
  if (q->xd) {
    /* Input column 2*ow + off = 2*(ow + h) + par, from the row's parity
     * plane: a contiguous copy instead of a load per lane. off + 2*pw >= 0,
     * so the remainder is the parity. */
    nimble_ln_expr *e = cp_add(c, off, cp_i(c, 2 * gr.p[1]));
    nimble_ln_expr *par = cp_rem(c, e, cp_i(c, 2));
    nimble_ln_expr *h = cp_sub(c, cp_div(c, cp_sub(c, e, par), cp_i(c, 2)), cp_i(c, gr.p[1]));
    nimble_ln_expr *prow = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, gr_, cg), ref(c, civ)), gr.H), ref(c, ihv));
    nimble_ln_expr *drow = cp_add(c, q->xd_at, cp_add(c, cp_mul(c, prow, cp_mul(c, cp_i(c, 2), q->Wh)),
                                                      cp_mul(c, par, q->Wh)));
    xin = cp_load(c, q->xd, cp_add(c, drow, cp_add(c, ref(c, ow2), h)), NIMBLE_LN_F32);
  }
  nimble_ln_expr *ci_ = cp_add(c, crow, ref(c, ow2));
  nimble_ln_stmt *parts[3] = {
      nimble_ln_for(c->A, ow2, cp_i(c, 0), lo, NIMBLE_LN_SERIAL, 0, nimble_ln_store(c->A, col, ci_, xsel)),
      nimble_ln_for(c->A, ow2, lo, hi, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                    nimble_ln_store(c->A, col, ci_, xin)),
      nimble_ln_for(c->A, ow2, hi, OWr, NIMBLE_LN_SERIAL, 0, nimble_ln_store(c->A, col, ci_, xsel)),
  };
  nimble_ln_stmt *zero = cp_for(c, ow2, OWr, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                nimble_ln_store(c->A, col, ci_, nimble_ln_f32(c->A, 0)));
  nimble_ln_stmt *rowc = nimble_ln_if(c->A, inside(c, ref(c, ihv), gr.H), nimble_ln_seq(c->A, parts, 3), zero);
  rowc = nimble_ln_let(c->A, ihv,
                       cp_add(c, cp_sub(c, cp_mul(c, ref(c, oh2), cp_i(c, gr.s[0])), cp_i(c, gr.p[0])),
                              cp_mul(c, ref(c, khv), cp_i(c, gr.d[0]))),
                       rowc);
  rowc = nimble_ln_for(c->A, oh2, oh0, cp_add(c, oh0, rows), NIMBLE_LN_SERIAL, 0, rowc);
  if (gr.s[0] == 1 && gr.s[1] == 1) {
    /* Unit strides and OW == W (3x3 with padding 1): the block's row r is
     * the input plane shifted by (kh*dh - ph) rows and off columns, one
     * vectorized copy over the flattened rows whose input row is inside,
     * instead of a short loop per output row; the copy stays inside those
     * input rows, and the columns it fills from a neighbouring row (the
     * window crossing the padding) are set to 0 after it, with the rows
     * outside the image. */
    nimble_ln_var *f = cp_var(c, "f", NIMBLE_LN_I64), *oh3 = cp_var(c, "oh", NIMBLE_LN_I64),
                  *ow3 = cp_var(c, "ow", NIMBLE_LN_I64), *ow4 = cp_var(c, "ow", NIMBLE_LN_I64),
                  *ow5 = cp_var(c, "ow", NIMBLE_LN_I64), *ih3 = cp_var(c, "ih", NIMBLE_LN_I64);
    nimble_ln_expr *shift = cp_sub(c, cp_mul(c, ref(c, khv), cp_i(c, gr.d[0])), cp_i(c, gr.p[0])); /* ih - oh */
    nimble_ln_expr *a = cp_max(c, oh0, cp_sub(c, cp_i(c, 0), shift));
    nimble_ln_expr *b = cp_min(c, cp_add(c, oh0, rows), cp_sub(c, gr.H, shift));
    nimble_ln_expr *f0 = cp_add(c, cp_mul(c, cp_sub(c, a, oh0), gr.W), cp_max(c, cp_sub(c, cp_i(c, 0), off), cp_i(c, 0)));
    nimble_ln_expr *f1 = cp_sub(c, cp_mul(c, cp_sub(c, b, oh0), gr.W), cp_max(c, off, cp_i(c, 0)));
    nimble_ln_expr *src = cp_add(c, cp_add(c, cp_mul(c, cin_, cp_mul(c, gr.H, gr.W)), cp_mul(c, cp_add(c, oh0, shift), gr.W)),
                                 cp_add(c, off, ref(c, f)));
    nimble_ln_stmt *copy = nimble_ln_for(c->A, f, f0, cp_max(c, f1, f0), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                         nimble_ln_store(c->A, col, cp_add(c, rbase, ref(c, f)),
                                                         cp_value_flat(c, x, src)));
    nimble_ln_expr *crow3 = cp_add(c, rbase, cp_mul(c, cp_sub(c, ref(c, oh3), oh0), OWr));
    nimble_ln_stmt *edges[2] = {
        nimble_ln_for(c->A, ow3, cp_i(c, 0), lo, NIMBLE_LN_SERIAL, 0,
                      nimble_ln_store(c->A, col, cp_add(c, crow3, ref(c, ow3)), nimble_ln_f32(c->A, 0))),
        nimble_ln_for(c->A, ow4, hi, OWr, NIMBLE_LN_SERIAL, 0,
                      nimble_ln_store(c->A, col, cp_add(c, crow3, ref(c, ow4)), nimble_ln_f32(c->A, 0))),
    };
    nimble_ln_stmt *zero3 = cp_for(c, ow5, OWr, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                   nimble_ln_store(c->A, col, cp_add(c, crow3, ref(c, ow5)), nimble_ln_f32(c->A, 0)));
    nimble_ln_stmt *fix = nimble_ln_if(c->A, inside(c, ref(c, ih3), gr.H), nimble_ln_seq(c->A, edges, 2), zero3);
    fix = nimble_ln_let(c->A, ih3, cp_add(c, ref(c, oh3), shift), fix);
    fix = nimble_ln_for(c->A, oh3, oh0, cp_add(c, oh0, rows), NIMBLE_LN_SERIAL, 0, fix);
    rowc = nimble_ln_if(c->A, bin(c, NIMBLE_LN_EQ, OWr, gr.W), nimble_ln_seq2(c->A, copy, fix), rowc);
  }
  rowc = nimble_ln_let(c->A, kwv, cp_rem(c, rr, cp_max(c, gr.KW, one)), rowc);
  rowc = nimble_ln_let(c->A, khv, cp_rem(c, cp_div(c, rr, cp_max(c, gr.KW, one)), cp_max(c, gr.KH, one)), rowc);
  rowc = nimble_ln_let(c->A, civ, cp_div(c, rr, cp_max(c, KK, one)), rowc);
  nimble_ln_stmt *im2col = cp_for(c, r, K, NIMBLE_LN_SERIAL, 0, rowc);
  if (c->opt.parallel && im2col) im2col = nimble_ln_chunk(c->A, im2col, cp_rows_per_task(c, K, cols));
  return im2col;
}

/* The rows of image n with their even and odd columns apart: xd[at +
 * (ci*H + ih)*2*Wh + par*Wh + j] = x[n, ci, ih, 2*j + par], Wh = ceil(W/2):
 * every row in parallel tasks (ih_lo NULL), or rows [ih_lo, ih_lo +
 * nrows) of every channel on the calling task (a slot's own rows). The
 * even/odd pair of loads is one interleaved group that LLVM vectorizes
 * with two loads and shuffles. */
static nimble_ln_stmt *deinterleave_rows(cp_ctx *c, cp_node *x, nimble_ln_param *xd, nimble_ln_expr *at,
                                         nimble_ln_expr *nr, nimble_ln_expr *Wh, int vw, nimble_ln_expr *ih_lo,
                                         nimble_ln_expr *nrows) {
  nimble_ln_expr *Ci = x->ext[1], *H = x->ext[2], *W = x->ext[3];
  nimble_ln_var *q = cp_var(c, "q", NIMBLE_LN_I64), *j = cp_var(c, "j", NIMBLE_LN_I64), *j2 = cp_var(c, "j", NIMBLE_LN_I64);
  /* The row q of the loop as ci*H + ih. */
  nimble_ln_expr *row = ref(c, q);
  if (ih_lo) {
    nimble_ln_expr *n1 = cp_max(c, nrows, cp_i(c, 1));
    row = cp_add(c, cp_mul(c, cp_div(c, ref(c, q), n1), H), cp_add(c, ih_lo, cp_rem(c, ref(c, q), n1)));
  }
  nimble_ln_expr *src = cp_mul(c, cp_add(c, cp_mul(c, nr, cp_mul(c, Ci, H)), row), W);
  nimble_ln_expr *dst = cp_add(c, at, cp_mul(c, row, cp_mul(c, cp_i(c, 2), Wh)));
  nimble_ln_expr *two_j = cp_mul(c, ref(c, j), cp_i(c, 2));
  nimble_ln_stmt *st[2] = {
      nimble_ln_store(c->A, xd, cp_add(c, dst, ref(c, j)), cp_value_flat(c, x, cp_add(c, src, two_j))),
      nimble_ln_store(c->A, xd, cp_add(c, cp_add(c, dst, Wh), ref(c, j)),
                      cp_value_flat(c, x, cp_add(c, cp_add(c, src, two_j), cp_i(c, 1)))),
  };
  nimble_ln_stmt *pairs = cp_for(c, j, cp_div(c, W, cp_i(c, 2)), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                 nimble_ln_seq(c->A, st, 2));
  /* An odd width: the last even column. */
  nimble_ln_stmt *last = nimble_ln_for(c->A, j2, cp_div(c, W, cp_i(c, 2)), Wh, NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_store(c->A, xd, cp_add(c, dst, ref(c, j2)),
                                                       cp_value_flat(c, x, cp_add(c, src, cp_mul(c, ref(c, j2), cp_i(c, 2))))));
  nimble_ln_stmt *all = cp_for(c, q, cp_mul(c, Ci, ih_lo ? nrows : H), NIMBLE_LN_SERIAL, 0,
                               nimble_ln_seq2(c->A, pairs, last));
  if (!ih_lo && c->opt.parallel && all) all = nimble_ln_chunk(c->A, all, cp_rows_per_task(c, all->end, W));
  return all;
}

/* Winograd's 3x3 convolution (env->conv3x3) per image, or NULL where it
 * does not apply: 3x3 weights as an f32 parameter, unit strides and
 * dilations, one group, an f32 input parameter, at least 16 output and 8
 * input channels (known), and when the image size is known, at least 64
 * output pixels (on the build machine cnn's 8x8 layer, 64 -> 128 channels,
 * took 45 us against 60 by the im2col product; below that the tiles'
 * transforms weigh more). gr: the unflattened geometry; res: a residual
 * laid out as the output, or NULL; the clamp [lo, hi]. */
static nimble_ln_stmt *winograd(cp_ctx *c, cp_node *n, cp_node *x, cp_node *wt, cp_node *bias, cp_node *res,
                                nimble_ln_param *o, const cv_geom *gr, float lo, float hi) {
  int64_t kh, kw, co, ci, oh, ow;
  if (cp_attr_int(n, "groups") != 1 || !cp_const_i(wt->ext[2], &kh) || kh != 3 || !cp_const_i(wt->ext[3], &kw) ||
      kw != 3 || gr->s[0] != 1 || gr->s[1] != 1 || gr->d[0] != 1 || gr->d[1] != 1)
    return NULL;
  if (x->kind != CP_PARAM || !x->param || x->type != NIMBLE_LN_F32 || x->rank != 4) return NULL;
  if (!cp_const_i(wt->ext[0], &co) || co < 16 || !cp_const_i(wt->ext[1], &ci) || ci < 8) return NULL;
  if (cp_const_i(gr->OH, &oh) && cp_const_i(gr->OW, &ow) && oh * ow < 64) return NULL;
  nimble_ln_expr *Cz = c->win_off ? c->win_total : wt->ext[0], *cz0 = c->win_off ? c->win_off : cp_i(c, 0);
  nimble_ln_expr *P = cp_mul(c, gr->OH, gr->OW);
  nimble_ln_var *ni = cp_var(c, "n", NIMBLE_LN_I64);
  nimble_ln_expr *nr = ref(c, ni);
  nimble_ln_conv3x3_desc_t d;
  memset(&d, 0, sizeof d);
  d.x = x->param;
  d.w = wt->param;
  d.y = o;
  d.x_offset = cp_mul(c, nr, cp_mul(c, x->ext[1], cp_mul(c, gr->H, gr->W)));
  d.w_offset = cp_i(c, 0);
  d.y_offset = cp_mul(c, cp_add(c, cp_mul(c, nr, Cz), cz0), P);
  d.c = x->ext[1];
  d.h = gr->H;
  d.width = gr->W;
  d.k = wt->ext[0];
  d.pad_t = cp_i(c, gr->p[0]);
  d.pad_l = cp_i(c, gr->p[1]);
  d.oh = gr->OH;
  d.ow = gr->OW;
  if (bias) {
    d.row_bias = bias->param;
    d.row_bias_offset = cp_i(c, 0);
  }
  if (res) { /* laid out as the output */
    d.residual = res->param;
    d.residual_offset = d.y_offset;
    d.ldr = P;
  }
  d.lo = lo;
  d.hi = hi;
  return cp_for(c, ni, x->ext[0], NIMBLE_LN_SERIAL, 0, nimble_ln_conv3x3(c->A, &d));
}

static nimble_ln_stmt *conv_into_out(cp_ctx *c, cp_node *n, nimble_ln_param *o, cp_node *root, nimble_ln_stmt *epi,
                                     bool *fused) {
  cp_node *x = n->in[0], *wt = n->in[1], *bias = n->n_in == 3 ? n->in[2] : NULL;
  if (bias && bias->rank != 1) return NULL;
  int64_t groups = cp_attr_int(n, "groups");
  if (groups < 1) return NULL;
  cv_geom g;
  if (!geometry(c, n, x, wt->ext[2], wt->ext[3], true, &g)) return NULL;
  nimble_ln_expr *Co = wt->ext[0], *cg = wt->ext[1], *Ci = x->ext[1];
  /* o's channels and this convolution's first among them: Co and 0, or
   * the concatenation's and the part's offset (c->win_off). */
  nimble_ln_expr *Cz = c->win_off ? c->win_total : Co, *cz0 = c->win_off ? c->win_off : cp_i(c, 0);
  nimble_ln_expr *og = cp_div(c, Co, cp_i(c, groups));
  int64_t ogv;
  int B = 1;
  if (cp_const_i(og, &ogv)) B = ogv % 8 == 0 ? 8 : ogv % 4 == 0 ? 4 : ogv % 2 == 0 ? 2 : 1;
  /* Whether the sgemm path below applies (f32 weights as a parameter, at
   * least 8 output channels per group, or a plain 1x1 with groups 1); the
   * direct nest is then only the fallback of runtimes without BLAS. */
  int64_t one_;
  bool flat1_ = cp_const_i(wt->ext[2], &one_) && one_ == 1 && cp_const_i(wt->ext[3], &one_) && one_ == 1 &&
                g.s[0] == 1 && g.s[1] == 1 && !g.p[0] && !g.p[1] && !g.p[2] && !g.p[3];
  bool sg_path = c->opt.use_sgemm && wt->kind == CP_PARAM && wt->param && wt->type == NIMBLE_LN_F32 &&
                 o->dtype == NIMBLE_LN_F32 && ((cp_const_i(og, &one_) ? one_ >= 8 : true) || (flat1_ && groups == 1));
  /* A fallback nest keeps to one channel per task block and no register
   * blocks: measured on squeezenet1_0, that takes the compile from 25 s to
   * 18 s of CPU (the kernels have three variants each). */
  if (sg_path) B = 1;
  /* Depthwise (one input and one output channel per group, constant
   * kernel of at most 49 taps): rows whose kernel rows are all inside the
   * image get their own nest below, the register blocks are not built. */
  int64_t cg_c = 0, kh_c = 0;
  bool dw = !sg_path && B == 1 && cp_const_i(og, &ogv) && ogv == 1 && cp_const_i(cg, &cg_c) && cg_c == 1 &&
            g.kw_const > 0 && cp_const_i(g.KH, &kh_c) && kh_c >= 1 && kh_c * g.kw_const <= 49 && !g.flat &&
            !c->win_off; /* its paths write whole planes of o */
  nimble_ln_expr *blocks = cp_div(c, Co, cp_i(c, B)); /* blocks of B channels per image */
  nimble_ln_var *t = cp_var(c, "t", NIMBLE_LN_I64), *oh = cp_var(c, "oh", NIMBLE_LN_I64),
                *ci = cp_var(c, "ci", NIMBLE_LN_I64), *kh = cp_var(c, "kh", NIMBLE_LN_I64),
                *ow = cp_var(c, "ow", NIMBLE_LN_I64), *nv = cp_var(c, "n", NIMBLE_LN_I64),
                *co0 = cp_var(c, "co", NIMBLE_LN_I64);
  /* Depthwise: the band of output rows a task writes, the bands, and the
   * task's slot (its index among the tasks, at most T). */
  nimble_ln_var *band_lo = cp_var(c, "oh_lo", NIMBLE_LN_I64), *band_hi = cp_var(c, "oh_hi", NIMBLE_LN_I64),
                *band_s = cp_var(c, "bands", NIMBLE_LN_I64), *slot_i = cp_var(c, "slot_i", NIMBLE_LN_I64);
  nimble_ln_expr *dw_pcond = NULL;
  nimble_ln_expr *tr = ref(c, t);
  nimble_ln_expr *plane = cp_mul(c, g.OH, g.OW), *iplane = cp_mul(c, g.H, g.W);
  nimble_ln_expr *orow[CV_MAX_B];
  for (int b = 0; b < B; b++)
    orow[b] = cp_mul(c, cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, ref(c, nv), Cz), cp_add(c, cp_add(c, ref(c, co0), cz0), cp_i(c, b))), g.OH),
                               ref(c, oh)),
                     g.OW);
  /* Row init: the bias (or 0). */
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_stmt *init[CV_MAX_B];
  for (int b = 0; b < B; b++) {
    nimble_ln_expr *bv = nimble_ln_f32(c->A, 0);
    if (bias) {
      nimble_ln_expr *bi[1] = {cp_add(c, ref(c, co0), cp_i(c, b))};
      bv = cp_value(c, bias, bi);
    }
    init[b] = nimble_ln_store(c->A, o, cp_add(c, orow[b], ref(c, ow)), bv);
  }
  nimble_ln_stmt *init_loop = cp_for(c, ow, g.OW, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                     nimble_ln_seq(c->A, init, (size_t)B));
  /* Input row of (ci, kh). */
  nimble_ln_var *ih = cp_var(c, "ih", NIMBLE_LN_I64);
  nimble_ln_expr *cin = cp_add(c, cp_mul(c, cp_div(c, ref(c, co0), cp_max(c, og, cp_i(c, 1))), cg), ref(c, ci));
  nimble_ln_expr *xrow = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, ref(c, nv), Ci), cin), iplane),
                                cp_mul(c, ref(c, ih), g.W));
  conv_w wc = {wt, ref(c, co0), ref(c, ci), ref(c, kh), cg};
  /* Register blocks: interior column blocks of J, every kernel column
   * inside, accumulated over (ci, kh, kw) in the output, which LLVM keeps
   * in registers across those loops (B x J/8 vectors); the row nest below
   * does the rest of the columns. */
  nimble_ln_expr *skip = NULL;
  nimble_ln_stmt *blocked = NULL;
  if (g.kw_const > 0 && !sg_path && !dw) {
    int J = B >= 8 ? 8 : B >= 4 ? 16 : 32;
    nimble_ln_expr *lo = col_lo(c, &g, col_off(c, &g, cp_i(c, 0)));
    nimble_ln_expr *hi = cp_max(c, col_hi(c, &g, col_off(c, &g, cp_i(c, g.kw_const - 1))), lo);
    nimble_ln_expr *nb = cp_div(c, cp_sub(c, hi, lo), cp_i(c, J));
    skip = cp_mul(c, nb, cp_i(c, J));
    nimble_ln_var *owb = cp_var(c, "owb", NIMBLE_LN_I64), *j = cp_var(c, "j", NIMBLE_LN_I64),
                  *kw = cp_var(c, "kw", NIMBLE_LN_I64), *ci2 = cp_var(c, "ci", NIMBLE_LN_I64),
                  *kh2 = cp_var(c, "kh", NIMBLE_LN_I64);
    nimble_ln_expr *owv = cp_add(c, cp_add(c, lo, cp_mul(c, ref(c, owb), cp_i(c, J))), ref(c, j));
    nimble_ln_expr *ih0 = cp_sub(c, cp_mul(c, ref(c, oh), cp_i(c, g.s[0])), cp_i(c, g.p[0]));
    nimble_ln_expr *ihv = cp_add(c, ih0, cp_mul(c, ref(c, kh2), cp_i(c, g.d[0])));
    nimble_ln_expr *cin2 = cp_add(c, cp_mul(c, cp_div(c, ref(c, co0), cp_max(c, og, cp_i(c, 1))), cg), ref(c, ci2));
    nimble_ln_expr *xr = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, ref(c, nv), Ci), cin2), iplane), cp_mul(c, ihv, g.W));
    nimble_ln_expr *xv = cp_value_flat(c, x, cp_add(c, xr, cp_add(c, cp_mul(c, owv, cp_i(c, g.s[1])),
                                                                   col_off(c, &g, ref(c, kw)))));
    conv_w wc2 = {wt, ref(c, co0), ref(c, ci2), ref(c, kh2), cg};
    nimble_ln_var *wv[CV_MAX_B];
    nimble_ln_stmt *st[CV_MAX_B];
    for (int b = 0; b < B; b++) {
      wv[b] = cp_var(c, "wv", NIMBLE_LN_F32);
      nimble_ln_expr *oi = cp_add(c, orow[b], owv);
      st[b] = nimble_ln_store(c->A, o, oi, bin(c, NIMBLE_LN_ADD, nimble_ln_load(c->A, o, oi),
                                                bin(c, NIMBLE_LN_MUL, ref(c, wv[b]), xv)));
    }
    nimble_ln_stmt *jl = cp_for(c, j, cp_i(c, J), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                nimble_ln_seq(c->A, st, (size_t)B));
    for (int b = B - 1; b >= 0; b--) jl = nimble_ln_let(c->A, wv[b], conv_weight(c, &wc2, b, ref(c, kw)), jl);
    jl = cp_for(c, kw, g.KW, NIMBLE_LN_SERIAL, 0, jl);
    /* Kernel rows inside the image: [kh_lo, kh_hi). */
    nimble_ln_expr *kh_lo = cp_div(c, cp_add(c, cp_max(c, cp_sub(c, cp_i(c, 0), ih0), cp_i(c, 0)), cp_i(c, g.d[0] - 1)),
                                   cp_i(c, g.d[0]));
    nimble_ln_expr *kh_hi = cp_min(c, g.KH, cp_div(c, cp_add(c, cp_max(c, cp_sub(c, g.H, ih0), cp_i(c, 0)),
                                                             cp_i(c, g.d[0] - 1)),
                                                   cp_i(c, g.d[0])));
    jl = nimble_ln_for(c->A, kh2, kh_lo, cp_max(c, kh_hi, kh_lo), NIMBLE_LN_SERIAL, 0, jl);
    jl = cp_for(c, ci2, cg, NIMBLE_LN_SERIAL, 0, jl);
    blocked = cp_for(c, owb, nb, NIMBLE_LN_SERIAL, 0, jl);
  }
  nimble_ln_stmt *upd = row_update(c, CV_CONV, &g, x, o, xrow, orow, B, conv_weight, &wc, skip);
  upd = nimble_ln_if(c->A, inside(c, ref(c, ih), g.H), upd, NULL);
  upd = nimble_ln_let(c->A, ih,
                      cp_add(c, cp_sub(c, cp_mul(c, ref(c, oh), cp_i(c, g.s[0])), cp_i(c, g.p[0])),
                             cp_mul(c, ref(c, kh), cp_i(c, g.d[0]))),
                      upd);
  upd = cp_for(c, kh, g.KH, NIMBLE_LN_SERIAL, 0, upd);
  upd = cp_for(c, ci, cg, NIMBLE_LN_SERIAL, 0, upd);
  nimble_ln_stmt *steps[3] = {init_loop, blocked, upd};
  nimble_ln_stmt *row_body = blocked ? nimble_ln_seq(c->A, steps, 3) : nimble_ln_seq2(c->A, init_loop, upd);
  nimble_ln_stmt *row;
  if (dw) {
    dw_ctx d;
    memset(&d, 0, sizeof d);
    d.g = &g;
    d.x = x;
    d.o = o;
    d.KH = kh_c;
    for (int i = 0; i < kh_c * g.kw_const; i++) d.wv[i] = cp_var(c, "wv", NIMBLE_LN_F32);
    d.bv = cp_var(c, "bias", NIMBLE_LN_F32);
    d.plane = cp_mul(c, cp_add(c, cp_mul(c, ref(c, nv), Ci), ref(c, co0)), cp_mul(c, g.H, g.W));
    d.oh_lo = ref(c, band_lo);
    d.oh_hi = ref(c, band_hi);
    /* A Relu or Clip of the convolution alone (mobilenet_v2's ReLU6). */
    float clo = -INFINITY, chi = INFINITY;
    bool clamp_only = epi && root && root != n && cp_clamp_operand(root, &clo, &chi) == n;
    d.lo = clo;
    d.hi = chi;
    nimble_ln_expr *obase = cp_mul(c, cp_add(c, cp_mul(c, ref(c, nv), Co), ref(c, co0)), plane);
    /* Row by row; with unit strides and OW == W, first the flattened plane,
     * then the rows without their interior. */
    nimble_ln_expr *by_rows = NULL;
    if (g.s[0] == 1 && g.s[1] == 1) by_rows = bin(c, NIMBLE_LN_NE, g.OW, g.W);
    nimble_ln_stmt *rows = nimble_ln_for(c->A, oh, d.oh_lo, d.oh_hi, NIMBLE_LN_SERIAL, 0,
                                         dw_row(c, &d, ref(c, oh), orow[0], by_rows, row_body));
    if (by_rows) {
      nimble_ln_stmt *flat = nimble_ln_if(c->A, bin(c, NIMBLE_LN_EQ, g.OW, g.W), dw_plane(c, &d, obase), NULL);
      rows = nimble_ln_seq2(c->A, flat, rows);
    }
    /* The epilogue on the rows just written, while they are in cache
     * (dw_epilogue_pass). */
    nimble_ln_stmt *epass = NULL;
    if (rows && epi) {
      epass = dw_epilogue_pass(c, &d, root, ref(c, nv), ref(c, co0), clamp_only);
      if (c->err) return NULL;
      if (epass) rows = nimble_ln_seq2(c->A, rows, epass);
    }
    if (epass) *fused = true;
    /* Rows from a copy (dw_rows_copied): a Relu or Clip alone in the
     * stores, another epilogue as the pass (mobilenet_v2's ReLU6 in the
     * stores, best of 5 rounds at 1 / 2 threads: 56x56 172 -> 159 / 171
     * -> 149 us a call, 28x28 59 -> 57 / 77 -> 61, 112x112 at stride 2
     * 200 -> 186 / 193 -> 184). */
    nimble_ln_expr *rc_cond = NULL;
    d.clamp = clamp_only && epass;
    nimble_ln_stmt *rows_c = dw_rows_copied(c, &d, obase, ref(c, slot_i), &rc_cond);
    if (rows_c && epass && !d.clamp)
      rows_c = nimble_ln_seq2(c->A, rows_c, dw_epilogue_pass(c, &d, root, ref(c, nv), ref(c, co0), clamp_only));
    if (rows_c) rows = nimble_ln_if(c->A, rc_cond, rows_c, rows);
    /* Small planes (dw_padded, dw_padded_s2): a Relu or Clip in the stores
     * where an output row is shorter than a vector (a 7x7 plane: there the
     * pass after the plane was a fifth of the layer, on 14x14 to 56x56
     * planes it came out faster than the clamps in the rows); another
     * epilogue, or longer rows, as the pass after the plane. */
    int64_t ow_c;
    d.clamp = clamp_only && epass && vw > 1 && cp_const_i(g.OW, &ow_c) && ow_c < vw;
    /* The padded copy in the task's slot (slot_i < T), reused plane after
     * plane, each slot on cache lines of its own (docs/codegen.md): a
     * buffer per plane made the scratch as large as the input. */
    nimble_ln_expr *pi = ref(c, slot_i), *pn = cp_max(c, nimble_ln_num_threads(c->A), cp_i(c, 1));
    nimble_ln_stmt *padded = dw_padded(c, &d, obase, pi, pn, &dw_pcond);
    if (!padded && (!epi || epass)) padded = dw_padded_s2(c, &d, obase, pi, pn, &dw_pcond);
    if (padded && epass && !d.clamp)
      padded = nimble_ln_seq2(c->A, padded, dw_epilogue_pass(c, &d, root, ref(c, nv), ref(c, co0), clamp_only));
    if (padded) rows = nimble_ln_if(c->A, dw_pcond, padded, rows); /* whole planes: never banded */
    row = dw_bind(c, &d, wt, bias, ref(c, co0), rows);
  } else {
    row = cp_for(c, oh, g.OH, NIMBLE_LN_SERIAL, 0, row_body);
  }
  row = nimble_ln_let(c->A, co0, cp_mul(c, cp_rem(c, tr, cp_max(c, blocks, cp_i(c, 1))), cp_i(c, B)), row);
  row = nimble_ln_let(c->A, nv, cp_div(c, tr, cp_max(c, blocks, cp_i(c, 1))), row);
  nimble_ln_expr *planes = cp_mul(c, x->ext[0], blocks), *planes1 = cp_max(c, planes, cp_i(c, 1));
  nimble_ln_expr *work = cp_mul(c, cp_mul(c, plane, cp_i(c, B)), cp_mul(c, cp_mul(c, cg, g.KH), g.KW));
  nimble_ln_stmt *direct;
  if (dw && c->opt.parallel) {
    /* Depthwise with T threads: T tasks, each the same band of output rows
     * of every plane, where tasks of whole planes had each core write half
     * the channels: the 1x1 convolutions around it (blocks of rows, see
     * the sgemm path) then read half their input from the other core
     * (mobilenet_v2's 96->24 projection after its depthwise layer: 0.11 ms
     * at one thread and at two). Task s goes to thread s (the pool hands
     * out a loop of at most T tasks that way), as the 1x1's block s does.
     * Planes of the padded path (small ones), or too few rows for two per
     * band, keep tasks of whole planes: S = 1, u = t (below). S (T or 1)
     * is bound at the top. */
    nimble_ln_expr *T0 = nimble_ln_num_threads(c->A);
    nimble_ln_expr *ok = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GT, T0, cp_i(c, 1)),
                             bin(c, NIMBLE_LN_GE, g.OH, cp_mul(c, T0, cp_i(c, 2))));
    nimble_ln_expr *bands = nimble_ln_select(c->A, ok, T0, cp_i(c, 1));
    if (dw_pcond) bands = nimble_ln_select(c->A, dw_pcond, cp_i(c, 1), bands);
    nimble_ln_expr *S = ref(c, band_s), *bh = cp_div(c, cp_add(c, g.OH, cp_sub(c, S, cp_i(c, 1))), S);
    bh = dw_band_on_line(c, &g, bh);
    /* u = band * planes + t */
    nimble_ln_var *u = cp_var(c, "u", NIMBLE_LN_I64);
    row = nimble_ln_let(c->A, band_hi, cp_min(c, cp_add(c, ref(c, band_lo), bh), g.OH), row);
    row = nimble_ln_let(c->A, band_lo, cp_min(c, cp_mul(c, cp_div(c, ref(c, u), planes1), bh), g.OH), row);
    nimble_ln_var *perv = cp_var(c, "per", NIMBLE_LN_I64);
    row = nimble_ln_let(c->A, slot_i, cp_div(c, ref(c, u), cp_max(c, ref(c, perv), cp_i(c, 1))), row);
    row = nimble_ln_let(c->A, t, cp_rem(c, ref(c, u), planes1), row);
    direct = cp_for(c, u, cp_mul(c, S, planes), NIMBLE_LN_SERIAL, 0, row);
    /* Whole planes: at most T tasks of consecutive planes, so that thread
     * s writes the channels that the product before it (cut by rows of
     * its output channels on 14x14 and 7x7 images) left in its cache.
     * Small chunks handed out in arrival order gave each core planes from
     * both halves: mobilenet_v2's 14x14 depthwise layers ran no faster at
     * two threads than at one. */
    nimble_ln_expr *per_thread = cp_div(c, cp_add(c, planes1, cp_sub(c, T0, cp_i(c, 1))), cp_max(c, T0, cp_i(c, 1)));
    nimble_ln_expr *per = nimble_ln_select(c->A, bin(c, NIMBLE_LN_GT, S, cp_i(c, 1)), planes1,
                                           cp_max(c, cp_rows_per_task(c, planes, work), per_thread));
    /* A task is `per` consecutive u (a band, or planes): u / per is its
     * slot, below T (per_thread). */
    if (direct) direct = nimble_ln_chunk(c->A, direct, ref(c, perv));
    if (direct) direct = nimble_ln_let(c->A, perv, cp_max(c, per, cp_i(c, 1)), direct);
    if (direct) direct = nimble_ln_let(c->A, band_s, bands, direct);
  } else {
    if (dw) {
      row = nimble_ln_let(c->A, band_hi, g.OH, row);
      row = nimble_ln_let(c->A, band_lo, cp_i(c, 0), row);
      row = nimble_ln_let(c->A, slot_i, cp_i(c, 0), row); /* one task at a time */
    }
    direct = cp_for(c, t, planes, NIMBLE_LN_SERIAL, 0, row);
    if (c->opt.parallel && direct) direct = nimble_ln_chunk(c->A, direct, cp_rows_per_task(c, direct->end, work));
  }
  if (!direct) return NULL;

  /* Through env->sgemm (f32 weights as a parameter, at least 8 output
   * channels per group, or any 1x1 with groups 1): per image and group,
   * out[n, group] = w[group] (og x cg*KH*KW) times the input's columns
   * (cg*KH*KW x OH*OW): the input itself for a 1x1 with unit strides and
   * no padding, else an im2col copy in a scratch buffer. The output is
   * first set to the bias (or 0) and sgemm adds (beta 1). */
  if (!sg_path) return direct;
  bool direct_b = flat1_ && x->kind == CP_PARAM && x->param && x->type == NIMBLE_LN_F32;
  cv_geom gr; /* unflattened: the blocks are whole output rows */
  if (!geometry(c, n, x, wt->ext[2], wt->ext[3], false, &gr)) return direct;
  nimble_ln_expr *KK = cp_mul(c, gr.KH, gr.KW), *K = cp_mul(c, cg, KK);
  nimble_ln_expr *OHr = gr.OH, *OWr = gr.OW, *P = cp_mul(c, OHr, OWr), *one = cp_i(c, 1);
  /* Column blocks of R whole output rows, about conv_block (64K by
   * default) output floats (all channels) and at least 512 columns: the
   * bias fill, the sgemm (and its im2col) and the epilogue of a block run
   * while it is in cache. */
  nimble_ln_expr *target = cp_max(c, cp_div(c, cp_i(c, c->opt.conv_block), cp_max(c, Co, one)), cp_i(c, 512));
  nimble_ln_expr *R = cp_max(c, cp_min(c, OHr, cp_div(c, cp_add(c, target, cp_sub(c, OWr, one)), cp_max(c, OWr, one))),
                             one);
  /* With T threads (env->num_threads) and more than one block, the blocks
   * go to S = min(blocks, T) parallel tasks (task s takes blocks s, s + S,
   * ...), each with its own im2col buffer: a block's copy, product and
   * epilogue run on one core with no barrier between them, where splitting
   * each block's copy by rows and its product by columns made every block
   * two fork-joins and had each core read half its columns from the
   * other's cache (squeezenet at two threads: 1.33x its one-thread speed).
   * The block count is rounded up to a multiple of T (R shrinks) so the
   * tasks are even. One block keeps the split copy and product (and a
   * convolution known to have one keeps R a constant).
   * T, R and S are bound once at the top (num_threads() reads the
   * environment behind a branch, which inside the copy loops kept them
   * from vectorizing); the scratch size, computed at entry, spells them
   * out. */
  int64_t nb_known;
  int64_t p_known;
  bool slotted = c->opt.parallel &&
                 !(cp_const_i(cp_div(c, cp_add(c, OHr, cp_sub(c, R, one)), R), &nb_known) && nb_known <= 1 &&
                   cp_const_i(P, &p_known) && p_known < 2 * 128);
  nimble_ln_var *Tv = cp_var(c, "threads", NIMBLE_LN_I64), *Rv = cp_var(c, "R", NIMBLE_LN_I64),
                *Sv = cp_var(c, "S", NIMBLE_LN_I64);
  nimble_ln_expr *R_at_entry = R, *S_at_entry = one, *R_bound = R, *S_bound = one;
  if (slotted) {
    R_bound = slot_rows(c, OHr, OWr, R, ref(c, Tv));
    S_bound = slot_count(c, OHr, ref(c, Rv), ref(c, Tv));
    nimble_ln_expr *T0 = nimble_ln_num_threads(c->A);
    R_at_entry = slot_rows(c, OHr, OWr, R, T0);
    S_at_entry = slot_count(c, OHr, R_at_entry, T0);
    R = ref(c, Rv);
  }
  /* im2col rows start on 64-byte boundaries (16 floats): sgemm reads B's
   * rows in place, and rows that start anywhere split a vector load in
   * two across cache lines (squeezenet's 3x3 expand, 64 x 1026 x 144:
   * 160 -> 179 GFLOP/s with 1040 floats a row). */
  nimble_ln_expr *ldcol = round_up(c, cp_max(c, cp_mul(c, R, OWr), one), 16);
  nimble_ln_expr *nblk = cp_div(c, cp_add(c, OHr, cp_sub(c, R, one)), R);
  nimble_ln_expr *S = slotted ? ref(c, Sv) : one;
  nimble_ln_var *slot = cp_var(c, "slot", NIMBLE_LN_I64);
  nimble_ln_expr *col_at = cp_i(c, 0);
  nimble_ln_param *col = NULL, *xd = NULL;
  nimble_ln_expr *Wh = NULL, *xd_at = NULL, *xd_planes = NULL;
  im2col_ctx iq;
  if (!direct_b) {
    /* Stride 2 in columns (resnet's and squeezenet's first layers): the
     * image deinterleaved once, so that im2col copies contiguous runs; it
     * lies in the same scratch buffer after the blocks' columns (a kernel
     * has one scratch buffer). */
    nimble_ln_expr *size = cp_mul(c, S_at_entry, cp_mul(c, K, round_up(c, cp_max(c, cp_mul(c, R_at_entry, OWr), one), 16)));
    if (slotted) col_at = cp_mul(c, ref(c, slot), cp_mul(c, K, ldcol));
    if (gr.s[1] == 2) {
      /* Slotted, each task deinterleaves the rows its blocks read into
       * its own copy of the planes (xd_at + slot * planes): deinterleaved
       * once by rows in parallel tasks, the image's rows were written by
       * one core and read by the other's im2col (mobilenet_v2's first
       * layer at 2 threads: the copies 32 -> 82 us, no faster than at
       * one thread). */
      Wh = cp_div(c, cp_add(c, gr.W, cp_i(c, 1)), cp_i(c, 2));
      xd_planes = cp_mul(c, cp_mul(c, Ci, gr.H), cp_mul(c, cp_i(c, 2), Wh));
      xd_at = cp_mul(c, S, cp_mul(c, K, ldcol)); /* size, in the bound variables */
      size = cp_add(c, size, cp_mul(c, slotted ? S_at_entry : one, xd_planes));
    }
    col = nimble_ln_kernel_add_scratch(c->k, "col", NIMBLE_LN_F32, size);
    if (!col) return direct;
    if (xd_at) xd = col;
  }
  nimble_ln_var *ni = cp_var(c, "n", NIMBLE_LN_I64), *gi = cp_var(c, "g", NIMBLE_LN_I64),
                *bk = cp_var(c, "blk", NIMBLE_LN_I64), *oh0v = cp_var(c, "oh0", NIMBLE_LN_I64),
                *rowsv = cp_var(c, "rows", NIMBLE_LN_I64);
  nimble_ln_expr *nr = ref(c, ni), *gr_ = ref(c, gi), *oh0 = ref(c, oh0v), *rows = ref(c, rowsv);
  nimble_ln_expr *p0 = cp_mul(c, oh0, OWr), *cols = cp_mul(c, rows, OWr);
  /* The epilogue on the block, in place, while it is in cache; it also
   * adds the bias then, and sgemm writes the block with beta 0 (no fill). */
  nimble_ln_stmt *e = NULL;
  if (epi) {
    nimble_ln_var *co3 = cp_var(c, "co", NIMBLE_LN_I64), *oh3 = cp_var(c, "oh", NIMBLE_LN_I64),
                  *ow3 = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *idx[4] = {nr, ref(c, co3), ref(c, oh3), ref(c, ow3)};
    nimble_ln_expr *bi3[1] = {ref(c, co3)};
    e = cp_epilogue_at(c, root, o, idx, bias ? cp_value(c, bias, bi3) : NULL);
    if (c->err) return NULL;
    if (e) {
      e = cp_for(c, ow3, OWr, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, e);
      e = nimble_ln_for(c->A, oh3, oh0, cp_add(c, oh0, rows), NIMBLE_LN_SERIAL, 0, e);
      e = cp_for(c, co3, Co, NIMBLE_LN_SERIAL, 0, e);
      if (c->opt.parallel && e) e = nimble_ln_chunk(c->A, e, cp_rows_per_task(c, Co, cols));
      if (!e) return NULL;
      direct = nimble_ln_seq2(c->A, direct, epi);
      *fused = true;
    }
  }
  /* out[n, :, block] = bias (or 0; always 0 when the epilogue adds it) */
  nimble_ln_var *co = cp_var(c, "co", NIMBLE_LN_I64), *p = cp_var(c, "p", NIMBLE_LN_I64);
  nimble_ln_expr *bi[1] = {ref(c, co)};
  nimble_ln_expr *oi = cp_add(c, cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, nr, Cz), cp_add(c, ref(c, co), cz0)), P), p0), ref(c, p));
  nimble_ln_stmt *fill = cp_for(c, p, cols, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                nimble_ln_store(c->A, o, oi,
                                                bias && !e ? cp_value(c, bias, bi) : nimble_ln_f32(c->A, 0)));
  fill = cp_for(c, co, Co, NIMBLE_LN_SERIAL, 0, fill);
  if (c->opt.parallel && fill) fill = nimble_ln_chunk(c->A, fill, cp_rows_per_task(c, Co, cols));
  nimble_ln_sgemm_desc_t d;
  memset(&d, 0, sizeof d);
  d.m = og;
  d.n = cols;
  d.k = K;
  d.alpha = 1.0f;
  d.beta = e ? 0.0f : 1.0f;
  d.a = wt->param;
  d.c = o;
  d.a_offset = cp_mul(c, cp_mul(c, gr_, og), K);
  d.c_offset = cp_add(c, cp_mul(c, cp_add(c, cp_add(c, cp_mul(c, nr, Cz), cz0), cp_mul(c, gr_, og)), P), p0);
  d.lda = cp_max(c, K, one);
  d.ldc = cp_max(c, P, one);
  nimble_ln_stmt *per_group;
  if (direct_b) {
    d.b = x->param;
    d.b_offset = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, nr, Ci), cp_mul(c, gr_, cg)), P), p0);
    d.ldb = cp_max(c, P, one);
    per_group = nimble_ln_sgemm(c->A, &d);
  } else {
    /* im2col of the block: row r = (ci, kh, kw) of col holds, per output
     * pixel of the block, the input it multiplies (0 in the padding); rows
     * in parallel tasks. */
    d.b = col;
    d.b_offset = col_at;
    d.ldb = ldcol;
    iq = (im2col_ctx){&gr, x, col, ldcol, K, KK, OWr, cols, nr, gr_, cg, Ci, oh0, rows, one, col_at, vw, NULL, NULL, NULL};
    if (xd) iq.xd = xd, iq.Wh = Wh, iq.xd_at = slotted ? cp_add(c, xd_at, cp_mul(c, ref(c, slot), xd_planes)) : xd_at;
    nimble_ln_stmt *im2col = im2col_block(c, &iq);
    per_group = nimble_ln_seq2(c->A, im2col, nimble_ln_sgemm(c->A, &d));
  }
  nimble_ln_expr *nonempty = bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GT, og, cp_i(c, 0)),
                                 bin(c, NIMBLE_LN_AND, bin(c, NIMBLE_LN_GT, P, cp_i(c, 0)),
                                     bin(c, NIMBLE_LN_GT, K, cp_i(c, 0))));
  per_group = cp_for(c, gi, cp_i(c, groups), NIMBLE_LN_SERIAL, 0, per_group);
  if (!e) per_group = nimble_ln_if(c->A, nonempty, per_group, NULL);
  /* Without the epilogue: fill, then sgemm adds; with it: sgemm writes
   * (an empty product: the fill's zeros), then the epilogue. */
  nimble_ln_stmt *block = e ? nimble_ln_seq2(c->A, nimble_ln_if(c->A, nonempty, per_group, fill), e)
                            : nimble_ln_seq2(c->A, fill, per_group);
  /* The bias, a residual added to the convolution and a Clip or Relu on
   * top (any of them, in that order) go into sgemm's tiles
   * (env->sgemm_epilogue): no fill before the product and no second pass
   * over the block after it. The block above stays for runtimes without
   * it, and for a residual whose shape is not the output's (broadcast). */
  bool bias_ok = !bias || (bias->kind == CP_PARAM && bias->param && bias->type == NIMBLE_LN_F32 && bias->rank == 1);
  float ep_lo, ep_hi;
  cp_node *res = NULL, *mid = root && root != n ? cp_clamp_operand(root, &ep_lo, &ep_hi) : n;
  if (root == n || !root) ep_lo = -INFINITY, ep_hi = INFINITY;
  if (mid && mid != n && mid->kind == CP_CALL && !strcmp(mid->op->name, "add") && mid->n_in == 2 &&
      mid->type == NIMBLE_LN_F32) {
    cp_node *other = mid->in[0] == n ? mid->in[1] : mid->in[1] == n ? mid->in[0] : NULL;
    if (other != n && !c->win_off && cp_is_residual(other, o)) {
      res = other;
      mid = n;
    }
  }
  bool use_epi = bias_ok && mid == n && (root == n || root == NULL || e);
  if (use_epi) {
    nimble_ln_var *g2 = cp_var(c, "g", NIMBLE_LN_I64);
    nimble_ln_expr *g2r = ref(c, g2);
    nimble_ln_sgemm_desc_t d2 = d;
    d2.beta = 0.0f;
    d2.a_offset = cp_mul(c, cp_mul(c, g2r, og), K);
    d2.c_offset = cp_add(c, cp_mul(c, cp_add(c, cp_add(c, cp_mul(c, nr, Cz), cz0), cp_mul(c, g2r, og)), P), p0);
    d2.epilogue = true;
    d2.row_bias = bias ? bias->param : NULL;
    d2.row_bias_offset = bias ? cp_mul(c, g2r, og) : NULL;
    d2.lo = ep_lo;
    d2.hi = ep_hi;
    if (res) { /* laid out as the output */
      d2.residual = res->param;
      d2.residual_offset = d2.c_offset;
      d2.ldr = d2.ldc;
    }
    nimble_ln_stmt *eg;
    if (direct_b) {
      d2.b_offset = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, nr, Ci), cp_mul(c, g2r, cg)), P), p0);
      eg = nimble_ln_sgemm(c->A, &d2);
    } else {
      im2col_ctx q2 = iq;
      q2.gr_ = g2r;
      eg = nimble_ln_seq2(c->A, im2col_block(c, &q2), nimble_ln_sgemm(c->A, &d2));
    }
    eg = cp_for(c, g2, cp_i(c, groups), NIMBLE_LN_SERIAL, 0, eg);
    if (!eg) return NULL;
    nimble_ln_expr *cond = nimble_ln_has_sgemm_epilogue(c->A);
    if (res) cond = cp_same_shape(c, cond, res->param, o, 4);
    block = nimble_ln_if(c->A, cond, eg, block);
  }
  block = nimble_ln_let(c->A, rowsv, cp_min(c, R, cp_sub(c, OHr, oh0)), block);
  block = nimble_ln_let(c->A, oh0v, cp_mul(c, ref(c, bk), R), block);
  nimble_ln_stmt *per_image;
  if (slotted) {
    /* for slot in [0, S) (tasks): blocks [slot*per, min((slot+1)*per, nblk)),
     * per = ceil(nblk/S): each task takes a contiguous band of output rows,
     * so that a next layer cut the same way (a convolution's blocks, a
     * depthwise convolution's bands) finds its input rows in its own
     * core's cache. Taking every S-th block instead interleaved the bands,
     * and layers with different block heights read most of their input
     * from the other core. */
    nimble_ln_var *jv = cp_var(c, "j", NIMBLE_LN_I64);
    nimble_ln_expr *per = cp_div(c, cp_add(c, nblk, cp_sub(c, S, one)), S);
    nimble_ln_expr *first = cp_mul(c, ref(c, slot), per);
    nimble_ln_stmt *one_slot = nimble_ln_let(c->A, bk, cp_add(c, first, ref(c, jv)), block);
    nimble_ln_expr *count = cp_max(c, cp_min(c, per, cp_sub(c, nblk, first)), cp_i(c, 0));
    one_slot = cp_for(c, jv, count, NIMBLE_LN_SERIAL, 0, one_slot);
    if (xd && one_slot) {
      /* The input rows of output rows [first*R, min((first+count)*R, OH)). */
      nimble_ln_expr *oh_lo = cp_mul(c, first, R), *oh_hi = cp_min(c, cp_mul(c, cp_add(c, first, count), R), OHr);
      nimble_ln_expr *ih_lo = cp_max(c, cp_sub(c, cp_mul(c, oh_lo, cp_i(c, gr.s[0])), cp_i(c, gr.p[0])), cp_i(c, 0));
      nimble_ln_expr *ih_hi = cp_min(c, gr.H, cp_add(c, cp_sub(c, cp_mul(c, cp_sub(c, oh_hi, one), cp_i(c, gr.s[0])), cp_i(c, gr.p[0])),
                                                     cp_add(c, cp_mul(c, cp_sub(c, gr.KH, one), cp_i(c, gr.d[0])), one)));
      nimble_ln_expr *nrows = cp_max(c, cp_sub(c, ih_hi, ih_lo), cp_i(c, 0));
      nimble_ln_expr *at = cp_add(c, xd_at, cp_mul(c, ref(c, slot), xd_planes));
      one_slot = nimble_ln_seq2(c->A, deinterleave_rows(c, x, xd, at, nr, Wh, vw, ih_lo, nrows), one_slot);
    }
    per_image = cp_for(c, slot, S, NIMBLE_LN_SERIAL, 0, one_slot);
    if (per_image) per_image = nimble_ln_chunk(c->A, per_image, one);
  } else {
    per_image = cp_for(c, bk, nblk, NIMBLE_LN_SERIAL, 0, block);
  }
  if (xd && per_image && !slotted)
    per_image = nimble_ln_seq2(c->A, deinterleave_rows(c, x, xd, xd_at, nr, Wh, vw, NULL, NULL), per_image);
  nimble_ln_stmt *gemm = cp_for(c, ni, x->ext[0], NIMBLE_LN_SERIAL, 0, per_image);
  if (slotted && gemm) {
    gemm = nimble_ln_let(c->A, Sv, S_bound, gemm);
    gemm = nimble_ln_let(c->A, Rv, R_bound, gemm);
    gemm = nimble_ln_let(c->A, Tv, nimble_ln_num_threads(c->A), gemm);
  }
  /* A 3x3 convolution with unit strides, one group and enough channels
   * goes through the runtime's Winograd convolution (env->conv3x3), with
   * the epilogue above (bias, residual, clamp) in its output pass: about
   * half the multiply-adds of the product (docs/codegen.md). The product
   * above stays for runtimes without it (NIMBLE_WINOGRAD=0). */
  nimble_ln_stmt *wino = use_epi ? winograd(c, n, x, wt, bias, res, o, &gr, ep_lo, ep_hi) : NULL;
  if (c->err) return NULL;
  if (wino) {
    nimble_ln_expr *cond = nimble_ln_has_conv3x3(c->A);
    if (res) cond = cp_same_shape(c, cond, res->param, o, 4);
    gemm = nimble_ln_if(c->A, cond, wino, gemm);
  }
  /* has_sgemm() alone is the condition, so nvptx64 folds the branch away. */
  return nimble_ln_if(c->A, nimble_ln_has_sgemm(c->A), gemm, direct);
}

/* Number of k in [0, K) with lo <= base + k*d < hi (d > 0). */
static nimble_ln_expr *count_in(cp_ctx *c, nimble_ln_expr *base, int64_t d, nimble_ln_expr *K, nimble_ln_expr *lo,
                                nimble_ln_expr *hi) {
  /* first k: ceil((lo - base)/d) clamped at 0; last+1: ceil((hi - base)/d) clamped to [0, K]. */
  nimble_ln_expr *a = cp_max(c, cp_sub(c, lo, base), cp_i(c, 0));
  nimble_ln_expr *first = cp_div(c, cp_add(c, a, cp_i(c, d - 1)), cp_i(c, d));
  nimble_ln_expr *b = cp_max(c, cp_sub(c, hi, base), cp_i(c, 0));
  nimble_ln_expr *end = cp_min(c, K, cp_div(c, cp_add(c, b, cp_i(c, d - 1)), cp_i(c, d)));
  return cp_max(c, cp_sub(c, end, first), cp_i(c, 0));
}

/* Where max_pool_3s2 finds t's columns: computed from the plane's rows
 * ihv[0..rows) (rows > 0), or loaded from the scratch at tb. */
typedef struct pool_t {
  cp_node *x;
  nimble_ln_expr *plane, *W;
  int rows;
  nimble_ln_var *ihv[8];
  nimble_ln_param *sc;
  nimble_ln_expr *tb;
} pool_t;

/* t[col] of the current output row. */
static nimble_ln_expr *pool_t_at(cp_ctx *c, const pool_t *t, nimble_ln_expr *col) {
  if (!t->rows) return nimble_ln_load(c->A, t->sc, cp_add(c, t->tb, col));
  nimble_ln_expr *v = NULL;
  for (int r = 0; r < t->rows; r++) {
    nimble_ln_expr *xv = cp_value_flat(c, t->x, cp_add(c, cp_add(c, t->plane, cp_mul(c, ref(c, t->ihv[r]), t->W)), col));
    v = v ? bin(c, NIMBLE_LN_MAX, v, xv) : xv;
  }
  return v;
}

/* Max pooling with 3 columns at stride 2 (squeezenet, resnet, googlenet)
 * by whole rows through a scratch row per plane, so that every vector
 * loop reads contiguous columns or an even/odd pair (which LLVM
 * vectorizes with two loads and a shuffle; a third column at stride 2
 * costs a scalar insert per lane). With t[j] the max over the kernel rows
 * inside the image of x[ih][j]:
 *   u[j] = max(t[j], t[j+1])              for j in [0, W-1)
 *   out[ow] = max(u[2ow-p], u[2ow-p+1])   for the interior columns,
 * which is max(t[2ow-p], t[2ow-p+1], t[2ow-p+2]); the border columns (a
 * window crossing the padding) take t's columns inside. For a kernel of
 * at most 8 rows and no left padding, t is never stored: u and the
 * borders read x's rows (each row's loop read t[j+1] back from stores just
 * made, and a load straddling two stores waits for them to reach the
 * cache: squeezenet's 27x27 pool spent a third of its time there). Else
 * t is stored first (with a left pad the interior's loads of u straddle
 * its stores either way, and t's pass is the cheaper: 112x112 with pad 1
 * 265 us against 317). max is exact, so the order does not change the
 * result (NaN still propagates). A row with no kernel row inside the
 * image is -inf, as in the general nest. The scratch holds u (and t
 * when stored) for every plane (tasks write disjoint parts). NULL when
 * the scratch cannot be added. */
static nimble_ln_stmt *max_pool_3s2(cp_ctx *c, const cv_geom *g, cp_node *x, nimble_ln_param *o, nimble_ln_expr *planes) {
  int64_t khc;
  bool direct = cp_const_i(g->KH, &khc) && khc >= 1 && khc <= 8 && g->p[1] == 0;
  /* A plane's rows in the scratch: t then u, or u alone when t is read
   * from x. */
  nimble_ln_expr *W = g->W, *rows_w = direct ? W : cp_mul(c, cp_i(c, 2), W);
  nimble_ln_param *sc = nimble_ln_kernel_add_scratch(c->k, "pool_rows", NIMBLE_LN_F32, cp_max(c, cp_mul(c, planes, rows_w), cp_i(c, 1)));
  if (!sc) return NULL;
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_loop_kind_t vk = vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL;
  nimble_ln_var *t = cp_var(c, "t", NIMBLE_LN_I64), *oh = cp_var(c, "oh", NIMBLE_LN_I64),
                *kh = cp_var(c, "kh", NIMBLE_LN_I64), *j = cp_var(c, "j", NIMBLE_LN_I64),
                *j2 = cp_var(c, "j", NIMBLE_LN_I64), *j3 = cp_var(c, "j", NIMBLE_LN_I64),
                *ow = cp_var(c, "ow", NIMBLE_LN_I64);
  nimble_ln_expr *tb = cp_mul(c, ref(c, t), rows_w), *ub = direct ? tb : cp_add(c, tb, W);
  nimble_ln_expr *orow = cp_mul(c, cp_add(c, cp_mul(c, ref(c, t), g->OH), ref(c, oh)), g->OW);
  nimble_ln_expr *plane = cp_mul(c, ref(c, t), cp_mul(c, g->H, W));
  /* Kernel rows inside the image: [kh_lo, kh_hi). */
  nimble_ln_expr *ih0 = cp_sub(c, cp_mul(c, ref(c, oh), cp_i(c, g->s[0])), cp_i(c, g->p[0]));
  nimble_ln_expr *kh_lo = cp_min(c, g->KH, cp_div(c, cp_add(c, cp_max(c, cp_sub(c, cp_i(c, 0), ih0), cp_i(c, 0)), cp_i(c, g->d[0] - 1)),
                                 cp_i(c, g->d[0])));
  nimble_ln_expr *kh_hi = cp_min(c, g->KH, cp_div(c, cp_add(c, cp_max(c, cp_sub(c, g->H, ih0), cp_i(c, 0)), cp_i(c, g->d[0] - 1)),
                                                  cp_i(c, g->d[0])));
  nimble_ln_expr *xrow_kh = cp_add(c, plane, cp_mul(c, cp_add(c, ih0, cp_mul(c, ref(c, kh), cp_i(c, g->d[0]))), W));
  nimble_ln_expr *xrow_lo = cp_add(c, plane, cp_mul(c, cp_add(c, ih0, cp_mul(c, kh_lo, cp_i(c, g->d[0]))), W));
  /* t's column col: for a short kernel the max over its rows read from x,
   * rows outside the image replaced by the nearest row inside the window
   * (max is idempotent); else the stored t. */
  pool_t tt = {x, plane, W, direct ? (int)khc : 0, {NULL}, sc, tb};
  nimble_ln_stmt *steps[6];
  size_t ns = 0;
  if (direct) {
    for (int r = 0; r < khc; r++) tt.ihv[r] = cp_var(c, "ih", NIMBLE_LN_I64);
  } else {
    /* t stored: the first kernel row inside, then the others in turn. */
    steps[ns++] = cp_for(c, j, W, vk, vw,
                         nimble_ln_store(c->A, sc, cp_add(c, tb, ref(c, j)), cp_value_flat(c, x, cp_add(c, xrow_lo, ref(c, j)))));
    nimble_ln_expr *ti = cp_add(c, tb, ref(c, j2));
    nimble_ln_stmt *more = cp_for(c, j2, W, vk, vw,
                                  nimble_ln_store(c->A, sc, ti, bin(c, NIMBLE_LN_MAX, nimble_ln_load(c->A, sc, ti),
                                                                    cp_value_flat(c, x, cp_add(c, xrow_kh, ref(c, j2))))));
    steps[ns++] = nimble_ln_for(c->A, kh, cp_add(c, kh_lo, cp_i(c, 1)), kh_hi, NIMBLE_LN_SERIAL, 0, more);
  }
  /* Border columns: max over the kernel columns inside. */
  nimble_ln_expr *lo = col_lo(c, g, col_off(c, g, cp_i(c, 0)));
  nimble_ln_expr *hi = cp_max(c, col_hi(c, g, col_off(c, g, cp_i(c, 2))), lo);
  for (int side = 0; side < 2; side++) {
    nimble_ln_var *bw = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *v = NULL;
    for (int k = 0; k < 3; k++) {
      nimble_ln_expr *iw = cp_add(c, cp_mul(c, ref(c, bw), cp_i(c, 2)), col_off(c, g, cp_i(c, k)));
      nimble_ln_expr *tv = nimble_ln_select(c->A, inside(c, iw, W), pool_t_at(c, &tt, clamp(c, iw, W)),
                                            nimble_ln_f32(c->A, -INFINITY));
      v = v ? bin(c, NIMBLE_LN_MAX, v, tv) : tv;
    }
    nimble_ln_stmt *st = nimble_ln_store(c->A, o, cp_add(c, orow, ref(c, bw)), v);
    steps[ns++] = side == 0 ? nimble_ln_for(c->A, bw, cp_i(c, 0), lo, NIMBLE_LN_SERIAL, 0, st)
                            : nimble_ln_for(c->A, bw, hi, g->OW, NIMBLE_LN_SERIAL, 0, st);
  }
  /* u = max of neighbouring columns of t. */
  nimble_ln_expr *tj = ref(c, j3), *tj1 = cp_add(c, ref(c, j3), cp_i(c, 1));
  nimble_ln_stmt *pairs = cp_for(c, j3, cp_max(c, cp_sub(c, W, cp_i(c, 1)), cp_i(c, 0)), vk, vw,
                                 nimble_ln_store(c->A, sc, cp_add(c, ub, ref(c, j3)),
                                                 bin(c, NIMBLE_LN_MAX, pool_t_at(c, &tt, tj), pool_t_at(c, &tt, tj1))));
  /* Interior columns: an even/odd pair of u. */
  nimble_ln_expr *ui = cp_add(c, ub, cp_sub(c, cp_mul(c, ref(c, ow), cp_i(c, 2)), cp_i(c, g->p[1])));
  nimble_ln_stmt *interior = nimble_ln_for(c->A, ow, lo, hi, vk, vw,
                                           nimble_ln_store(c->A, o, cp_add(c, orow, ref(c, ow)),
                                                           bin(c, NIMBLE_LN_MAX, nimble_ln_load(c->A, sc, ui),
                                                               nimble_ln_load(c->A, sc, cp_add(c, ui, cp_i(c, 1))))));
  steps[ns++] = nimble_ln_seq2(c->A, whole_vectors(c, pairs, vw), whole_vectors(c, interior, vw));
  nimble_ln_stmt *rowc = nimble_ln_seq(c->A, steps, ns);
  if (direct) {
    nimble_ln_expr *ih_first = cp_add(c, ih0, cp_mul(c, kh_lo, cp_i(c, g->d[0])));
    nimble_ln_expr *ih_last = cp_add(c, ih0, cp_mul(c, cp_sub(c, kh_hi, cp_i(c, 1)), cp_i(c, g->d[0])));
    for (int r = (int)khc - 1; r >= 0; r--)
      rowc = nimble_ln_let(c->A, tt.ihv[r], cp_min(c, cp_max(c, cp_add(c, ih0, cp_i(c, r * g->d[0])), ih_first), ih_last),
                           rowc);
  }
  nimble_ln_var *ow2 = cp_var(c, "ow", NIMBLE_LN_I64);
  nimble_ln_stmt *empty = cp_for(c, ow2, g->OW, vk, vw,
                                 nimble_ln_store(c->A, o, cp_add(c, orow, ref(c, ow2)), nimble_ln_f32(c->A, -INFINITY)));
  rowc = nimble_ln_if(c->A, bin(c, NIMBLE_LN_LT, kh_lo, kh_hi), rowc, whole_vectors(c, empty, vw));
  nimble_ln_stmt *all = cp_for(c, t, planes, NIMBLE_LN_SERIAL, 0, cp_for(c, oh, g->OH, NIMBLE_LN_SERIAL, 0, rowc));
  if (c->opt.parallel && all) {
    nimble_ln_expr *work = cp_mul(c, g->OH, cp_mul(c, W, cp_i(c, 4)));
    all = nimble_ln_chunk(c->A, all, cp_rows_per_task(c, all->end, work));
  }
  return all;
}

static nimble_ln_stmt *pool_into_out(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0];
  bool is_max = !strcmp(n->op->name, "max_pool2d");
  int64_t k[2];
  if (!get_ints(c, n, "kernel_shape", 2, 1, k) || k[0] < 1 || k[1] < 1) return NULL;
  cv_geom g;
  if (!geometry(c, n, x, cp_i(c, k[0]), cp_i(c, k[1]), false, &g)) return NULL;
  bool include_pad = !is_max && cp_attr_int(n, "count_include_pad") != 0;
  cv_kind_t kind = is_max ? CV_MAX : CV_AVG;
  nimble_ln_var *t = cp_var(c, "t", NIMBLE_LN_I64), *oh = cp_var(c, "oh", NIMBLE_LN_I64),
                *kh = cp_var(c, "kh", NIMBLE_LN_I64), *ow = cp_var(c, "ow", NIMBLE_LN_I64),
                *ih = cp_var(c, "ih", NIMBLE_LN_I64);
  nimble_ln_expr *orow[1] = {cp_mul(c, cp_add(c, cp_mul(c, ref(c, t), g.OH), ref(c, oh)), g.OW)};
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_loop_kind_t vk = vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL;
  nimble_ln_stmt *init = cp_for(c, ow, g.OW, vk, vw,
                                nimble_ln_store(c->A, o, cp_add(c, orow[0], ref(c, ow)),
                                                nimble_ln_f32(c->A, is_max ? -INFINITY : 0.0)));
  nimble_ln_expr *xrow = cp_add(c, cp_mul(c, ref(c, t), cp_mul(c, g.H, g.W)), cp_mul(c, ref(c, ih), g.W));
  nimble_ln_stmt *upd = row_update(c, kind, &g, x, o, xrow, orow, 1, NULL, NULL, NULL);
  upd = nimble_ln_if(c->A, inside(c, ref(c, ih), g.H), upd, NULL);
  nimble_ln_expr *ih0 = cp_sub(c, cp_mul(c, ref(c, oh), cp_i(c, g.s[0])), cp_i(c, g.p[0]));
  upd = nimble_ln_let(c->A, ih, cp_add(c, ih0, cp_mul(c, ref(c, kh), cp_i(c, g.d[0]))), upd);
  upd = cp_for(c, kh, g.KH, NIMBLE_LN_SERIAL, 0, upd);
  nimble_ln_stmt *parts[3] = {init, upd, NULL};
  int np = 2;
  if (!is_max) {
    /* Divide by the window count: rows times columns inside [lo, hi). */
    nimble_ln_var *ow2 = cp_var(c, "ow", NIMBLE_LN_I64);
    nimble_ln_expr *iw0 = cp_sub(c, cp_mul(c, ref(c, ow2), cp_i(c, g.s[1])), cp_i(c, g.p[1]));
    nimble_ln_expr *lo0 = cp_i(c, include_pad ? -g.p[0] : 0), *lo1 = cp_i(c, include_pad ? -g.p[1] : 0);
    nimble_ln_expr *hi0 = include_pad ? cp_add(c, x->ext[2], cp_i(c, g.p[2])) : x->ext[2];
    nimble_ln_expr *hi1 = include_pad ? cp_add(c, x->ext[3], cp_i(c, g.p[3])) : x->ext[3];
    nimble_ln_expr *cnt = cp_mul(c, count_in(c, ih0, g.d[0], g.KH, lo0, hi0), count_in(c, iw0, g.d[1], g.KW, lo1, hi1));
    nimble_ln_expr *den = nimble_ln_binary(c->A, NIMBLE_LN_MAX, cp_convert(c, cnt, NIMBLE_LN_F32), nimble_ln_f32(c->A, 1));
    nimble_ln_expr *oi = cp_add(c, orow[0], ref(c, ow2));
    parts[np++] = cp_for(c, ow2, g.OW, vk, vw,
                         nimble_ln_store(c->A, o, oi, bin(c, NIMBLE_LN_DIV, nimble_ln_load(c->A, o, oi), den)));
  }
  nimble_ln_stmt *row = cp_for(c, oh, g.OH, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(c->A, parts, (size_t)np));
  nimble_ln_stmt *all = cp_for(c, t, cp_mul(c, x->ext[0], x->ext[1]), NIMBLE_LN_SERIAL, 0, row);
  if (c->opt.parallel && all) {
    nimble_ln_expr *work = cp_mul(c, cp_mul(c, g.OH, g.OW), cp_i(c, k[0] * k[1]));
    all = nimble_ln_chunk(c->A, all, cp_rows_per_task(c, all->end, work));
  }
  /* 3 columns at stride 2: by whole rows through a scratch buffer, which
   * nvptx64 does not have; has_sgemm() is false there and folds the
   * branch away (every CPU runtime has sgemm, see cg_emit.c). */
  if (all && is_max && k[1] == 3 && g.s[1] == 2 && g.d[1] == 1) {
    nimble_ln_stmt *fast = max_pool_3s2(c, &g, x, o, cp_mul(c, x->ext[0], x->ext[1]));
    if (fast) return nimble_ln_if(c->A, nimble_ln_has_sgemm(c->A), fast, all);
  }
  return all;
}

bool cp_window_op(const cp_node *n) {
  if (!n || n->kind != CP_CALL || n->rank != 4 || n->type != NIMBLE_LN_F32 || n->in[0]->type != NIMBLE_LN_F32)
    return false;
  if (!strcmp(n->op->name, "conv2d")) return n->in[1]->type == NIMBLE_LN_F32 && n->in[1]->rank == 4;
  return !strcmp(n->op->name, "max_pool2d") || !strcmp(n->op->name, "avg_pool2d");
}

nimble_ln_stmt *cp_window_into_out(cp_ctx *c, cp_node *n, nimble_ln_param *o, cp_node *root, nimble_ln_stmt *epi,
                                   bool *fused) {
  *fused = false;
  if (!n || n->kind != CP_CALL || n->rank != 4 || n->type != NIMBLE_LN_F32 || !o || o->rank != 4 ||
      o->dtype != NIMBLE_LN_F32)
    return NULL;
  if (n->in[0]->type != NIMBLE_LN_F32) return NULL;
  if (!strcmp(n->op->name, "conv2d")) {
    if (n->in[1]->type != NIMBLE_LN_F32 || n->in[1]->rank != 4) return NULL;
    return conv_into_out(c, n, o, root, epi, fused);
  }
  if (!strcmp(n->op->name, "max_pool2d") || !strcmp(n->op->name, "avg_pool2d")) return pool_into_out(c, n, o);
  return NULL;
}
