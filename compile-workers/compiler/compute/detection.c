/* Detection operators: non_max_suppression (ONNX NonMaxSuppression, an
 * upper-bound result) and roi_align (ONNX RoiAlign), computed as ONNX
 * Runtime does, which the node suite's expected outputs follow.
 *
 * non_max_suppression(boxes [B, N, 4], scores [B, C, N], [max_per_class,
 * [iou_threshold, [score_threshold]]]) -> [count, 3] rows (batch, class,
 * box), allocated at the bound [B * C * N, 3]. Per batch and class the
 * greedy selection runs on a scratch array of flags (alive: score above
 * the threshold and not yet suppressed): pick the alive box of the
 * highest score (ties: the smaller index), write it, then clear every
 * alive box whose IoU with it exceeds the threshold; at most
 * max_per_class picks (none when it is absent, as ONNX's default 0
 * says). O(N) per pick, serial; the real shape goes to the shape output.
 *
 * roi_align(x [N, C, H, W], rois [R, 4], batch_indices [R]) -> [R, C, oh,
 * ow]: each bin averages (or takes the largest of) sampling_ratio^2
 * bilinear samples (adaptive ceil(roi / bins) when 0), samples outside
 * [-1, size] count 0; half_pixel shifts by half a pixel, output_half_pixel
 * (the legacy mode) keeps rois at least 1 pixel. A batch index outside
 * [0, N) fails the kernel before anything is read. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define F(v) nimble_ln_f32(A_, (v))
#define REF(v) nimble_ln_ref(A_, (v))
#define LD(p, i) nimble_ln_load(A_, (p), (i))

static nimble_ln_expr *scalar_in(cp_ctx *c, cp_node *v, nimble_ln_type_t t) {
  nimble_ln_expr *z[CP_MAX_RANK];
  for (int a = 0; a < v->rank; a++) z[a] = cp_i(c, 0);
  return cp_convert(c, cp_value(c, v, z), t);
}

/* ---- non_max_suppression ---- */

static nimble_status_t shape_nms(cp_ctx *c, cp_node *n) {
  cp_node *b = n->in[0], *s = n->in[1];
  if (b->rank != 3 || s->rank != 3 || b->type != NIMBLE_LN_F32 || s->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "non_max_suppression: boxes [B, N, 4] and scores [B, C, N] of float32");
  for (int i = 2; i < n->n_in; i++)
    if (n->in[i]->rank > 1 || (n->in[i]->rank == 1 && !cp_same(n->in[i]->ext[0], cp_i(c, 1))))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "non_max_suppression: input %d must be a single value", i);
  cp_check(c, cp_eq(c, b->ext[0], s->ext[0]), "non_max_suppression: boxes and scores differ in batch");
  cp_check(c, cp_eq(c, b->ext[1], s->ext[2]), "non_max_suppression: boxes and scores differ in box count");
  cp_check(c, cp_eq(c, b->ext[2], cp_i(c, 4)), "non_max_suppression: a box needs 4 coordinates");
  n->type = NIMBLE_LN_I64;
  n->dtype = NIMBLE_DTYPE_INT64;
  n->rank = 2;
  n->ext[0] = cp_product(c, s->ext, 0, 3); /* the bound */
  n->ext[1] = cp_i(c, 3);
  return nimble_ok();
}

static bool outputs_nms(cp_ctx *c, cp_node *n, cp_outputs *o) {
  o->n = 1;
  o->upper = true;
  o->type[0] = NIMBLE_LN_I64;
  o->rank[0] = 2;
  o->ext[0][0] = n->ext[0];
  o->ext[0][1] = n->ext[1];
  return true;
}

/* Corners (y1, x1, y2, x2 with y1 <= y2, x1 <= x2) of box j of batch b. */
static void box_corners(cp_ctx *c, cp_node *boxes, nimble_ln_expr *b, nimble_ln_expr *j, bool center,
                        nimble_ln_expr **k) {
  nimble_ln_expr *v[4];
  for (int i = 0; i < 4; i++) {
    nimble_ln_expr *idx[3] = {b, j, cp_i(c, i)};
    v[i] = cp_value(c, boxes, idx);
  }
  if (center) { /* [x_center, y_center, width, height] */
    nimble_ln_expr *hw = BIN(MUL, v[2], F(0.5)), *hh = BIN(MUL, v[3], F(0.5));
    k[0] = BIN(SUB, v[1], hh), k[2] = BIN(ADD, v[1], hh);
    k[1] = BIN(SUB, v[0], hw), k[3] = BIN(ADD, v[0], hw);
  } else {
    k[0] = cp_min(c, v[0], v[2]), k[2] = cp_max(c, v[0], v[2]);
    k[1] = cp_min(c, v[1], v[3]), k[3] = cp_max(c, v[1], v[3]);
  }
}

static nimble_ln_stmt *emit_nms(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                nimble_ln_param *const *shapes) {
  cp_node *boxes = n->in[0], *scores = n->in[1];
  nimble_ln_param *out = outs[0], *shp = shapes[0];
  bool center = cp_attr_int(n, "center_point_box") != 0;
  nimble_ln_expr *B = scores->ext[0], *C = scores->ext[1], *N = scores->ext[2];
  nimble_ln_param *alive = nimble_ln_kernel_add_scratch(c->k, "alive", NIMBLE_LN_I32, cp_max(c, N, cp_i(c, 1)));
  if (!alive) return NULL;
  nimble_ln_var *vb = cp_var(c, "b", NIMBLE_LN_I64), *vc = cp_var(c, "cl", NIMBLE_LN_I64);
  nimble_ln_var *vj = cp_var(c, "j", NIMBLE_LN_I64), *vk = cp_var(c, "k", NIMBLE_LN_I64);
  nimble_ln_var *vj2 = cp_var(c, "j", NIMBLE_LN_I64), *vj3 = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_var *count = cp_var(c, "count", NIMBLE_LN_I64), *done = cp_var(c, "done", NIMBLE_LN_I64);
  nimble_ln_var *best = cp_var(c, "best", NIMBLE_LN_I64), *bs = cp_var(c, "bs", NIMBLE_LN_F32);
  nimble_ln_var *maxk = cp_var(c, "maxk", NIMBLE_LN_I64), *iou_t = cp_var(c, "iou_t", NIMBLE_LN_F32);
  nimble_ln_expr *b = REF(vb), *cl = REF(vc);
  /* Absent inputs take ONNX's defaults: no box, IoU 0, no score threshold. */
  nimble_ln_expr *mk = n->n_in > 2 ? scalar_in(c, n->in[2], NIMBLE_LN_I64) : cp_i(c, 0);
  nimble_ln_expr *it = n->n_in > 3 ? scalar_in(c, n->in[3], NIMBLE_LN_F32) : F(0);
  nimble_ln_expr *st = n->n_in > 4 ? scalar_in(c, n->in[4], NIMBLE_LN_F32) : NULL;
  if (!mk || !it || (n->n_in > 4 && !st)) return NULL;

  /* 1. alive[j] = score above the threshold (NaN scores never are). */
  nimble_ln_expr *sidx[3] = {b, cl, REF(vj)};
  nimble_ln_expr *sj = cp_value(c, scores, sidx);
  nimble_ln_expr *ok = st ? BIN(GT, sj, st) : BIN(EQ, sj, sj);
  nimble_ln_stmt *init = cp_for(c, vj, N, NIMBLE_LN_SERIAL, 0,
                                nimble_ln_store(A_, alive, REF(vj), nimble_ln_cast(A_, NIMBLE_LN_I32, ok)));
  /* 2. the best alive box: highest score, the first of equal ones. */
  nimble_ln_expr *sidx2[3] = {b, cl, REF(vj2)};
  nimble_ln_expr *s2 = cp_value(c, scores, sidx2);
  nimble_ln_expr *is_alive = BIN(NE, LD(alive, REF(vj2)), nimble_ln_i32(A_, 0));
  nimble_ln_expr *better = BIN(AND, is_alive, BIN(OR, BIN(LT, REF(best), cp_i(c, 0)), BIN(GT, s2, REF(bs))));
  nimble_ln_stmt *scan = cp_for(c, vj2, N, NIMBLE_LN_SERIAL, 0,
                                nimble_ln_if(A_, better, nimble_ln_seq2(A_, nimble_ln_assign(A_, best, REF(vj2)),
                                                                          nimble_ln_assign(A_, bs, s2)),
                                             NULL));
  /* 3. write it, then suppress the alive boxes overlapping it. */
  nimble_ln_stmt *w[5];
  nimble_ln_expr *row = cp_mul(c, REF(count), cp_i(c, 3));
  w[0] = nimble_ln_store(A_, out, row, b);
  w[1] = nimble_ln_store(A_, out, cp_add(c, row, cp_i(c, 1)), cl);
  w[2] = nimble_ln_store(A_, out, cp_add(c, row, cp_i(c, 2)), REF(best));
  w[3] = nimble_ln_assign(A_, count, cp_add(c, REF(count), cp_i(c, 1)));
  w[4] = nimble_ln_store(A_, alive, REF(best), nimble_ln_i32(A_, 0));
  nimble_ln_expr *ka[4], *kb[4];
  box_corners(c, boxes, b, REF(best), center, ka);
  box_corners(c, boxes, b, REF(vj3), center, kb);
  nimble_ln_expr *ih = cp_max(c, BIN(SUB, cp_min(c, ka[2], kb[2]), cp_max(c, ka[0], kb[0])), F(0));
  nimble_ln_expr *iw = cp_max(c, BIN(SUB, cp_min(c, ka[3], kb[3]), cp_max(c, ka[1], kb[1])), F(0));
  nimble_ln_var *inter = cp_var(c, "inter", NIMBLE_LN_F32), *aa = cp_var(c, "area_a", NIMBLE_LN_F32);
  nimble_ln_var *ab = cp_var(c, "area_b", NIMBLE_LN_F32);
  nimble_ln_expr *uni = BIN(SUB, BIN(ADD, REF(aa), REF(ab)), REF(inter));
  nimble_ln_expr *suppress =
      BIN(AND, BIN(AND, BIN(GT, REF(inter), F(0)), BIN(AND, BIN(GT, REF(aa), F(0)), BIN(GT, REF(ab), F(0)))),
          BIN(AND, BIN(GT, uni, F(0)), BIN(GT, BIN(DIV, REF(inter), uni), REF(iou_t))));
  nimble_ln_stmt *cmp = nimble_ln_if(A_, suppress, nimble_ln_store(A_, alive, REF(vj3), nimble_ln_i32(A_, 0)), NULL);
  cmp = nimble_ln_let(A_, inter, BIN(MUL, ih, iw),
                      nimble_ln_let(A_, ab, BIN(MUL, BIN(SUB, kb[2], kb[0]), BIN(SUB, kb[3], kb[1])), cmp));
  cmp = nimble_ln_if(A_, BIN(NE, LD(alive, REF(vj3)), nimble_ln_i32(A_, 0)), cmp, NULL);
  nimble_ln_stmt *sup = cp_for(c, vj3, N, NIMBLE_LN_SERIAL, 0, cmp);
  sup = nimble_ln_let(A_, aa, BIN(MUL, BIN(SUB, ka[2], ka[0]), BIN(SUB, ka[3], ka[1])), sup);
  nimble_ln_stmt *take = nimble_ln_seq2(A_, nimble_ln_seq(A_, w, 5), sup);
  nimble_ln_stmt *pick = nimble_ln_seq2(A_, scan, nimble_ln_if(A_, BIN(LT, REF(best), cp_i(c, 0)),
                                                                nimble_ln_assign(A_, done, cp_i(c, 1)), take));
  pick = nimble_ln_decl(A_, best, cp_i(c, -1), nimble_ln_decl(A_, bs, F(0), pick));
  nimble_ln_stmt *picks = cp_for(c, vk, cp_min(c, REF(maxk), N), NIMBLE_LN_SERIAL, 0,
                                 nimble_ln_if(A_, BIN(EQ, REF(done), cp_i(c, 0)), pick, NULL));
  nimble_ln_stmt *per_class = nimble_ln_decl(A_, done, cp_i(c, 0), nimble_ln_seq2(A_, init, picks));
  nimble_ln_stmt *all = cp_for(c, vb, B, NIMBLE_LN_SERIAL, 0, cp_for(c, vc, C, NIMBLE_LN_SERIAL, 0, per_class));
  nimble_ln_stmt *real = nimble_ln_seq2(A_, nimble_ln_store(A_, shp, cp_i(c, 0), REF(count)),
                                        nimble_ln_store(A_, shp, cp_i(c, 1), cp_i(c, 3)));
  nimble_ln_stmt *body = nimble_ln_decl(A_, count, cp_i(c, 0), nimble_ln_seq2(A_, all, real));
  body = nimble_ln_let(A_, iou_t, it, body);
  return nimble_ln_let(A_, maxk, cp_max(c, mk, cp_i(c, 0)), body);
}

/* ---- roi_align ---- */

static nimble_status_t shape_roi_align(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *rois = n->in[1], *bi = n->in[2];
  if (x->rank != 4 || rois->rank != 2 || bi->rank != 1 || x->type != NIMBLE_LN_F32 || rois->type != NIMBLE_LN_F32)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "roi_align: x [N, C, H, W] and rois [R, 4] of float32");
  const char *mode = cp_attr_string(n, "mode"), *ctm = cp_attr_string(n, "coordinate_transformation_mode");
  if (strcmp(mode, "avg") && strcmp(mode, "max"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "roi_align mode '%s'", mode);
  if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "roi_align coordinate_transformation_mode '%s'", ctm);
  cp_check(c, cp_eq(c, rois->ext[1], cp_i(c, 4)), "roi_align: a roi needs 4 coordinates");
  cp_check(c, cp_eq(c, rois->ext[0], bi->ext[0]), "roi_align: rois and batch_indices differ in count");
  /* Samples read the image; with rois and channels it must have pixels. */
  nimble_ln_expr *none = BIN(OR, BIN(EQ, rois->ext[0], cp_i(c, 0)), BIN(EQ, x->ext[1], cp_i(c, 0)));
  cp_check(c, BIN(OR, none, BIN(AND, BIN(GT, x->ext[2], cp_i(c, 0)), BIN(GT, x->ext[3], cp_i(c, 0)))),
           "roi_align: the image is empty");
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = 4;
  n->ext[0] = rois->ext[0];
  n->ext[1] = x->ext[1];
  n->ext[2] = cp_i(c, cp_attr_int(n, "output_height"));
  n->ext[3] = cp_i(c, cp_attr_int(n, "output_width"));
  return nimble_ok();
}

static nimble_ln_stmt *emit_roi_align(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  cp_node *x = n->in[0], *rois = n->in[1], *bi = n->in[2];
  bool half = !strcmp(cp_attr_string(n, "coordinate_transformation_mode"), "half_pixel");
  bool is_max = !strcmp(cp_attr_string(n, "mode"), "max");
  int64_t ratio = cp_attr_int(n, "sampling_ratio");
  int64_t oh = cp_attr_int(n, "output_height"), ow = cp_attr_int(n, "output_width");
  double scale = cp_attr_float(n, "spatial_scale");
  nimble_ln_expr *H = x->ext[2], *W = x->ext[3];
  nimble_ln_expr *Hf = nimble_ln_cast(A_, NIMBLE_LN_F32, H), *Wf = nimble_ln_cast(A_, NIMBLE_LN_F32, W);

  /* Every batch index in range, checked before the (parallel) nest. */
  nimble_ln_var *vr = cp_var(c, "r", NIMBLE_LN_I64);
  nimble_ln_expr *ri[1] = {REF(vr)};
  nimble_ln_expr *bv = cp_convert(c, cp_value(c, bi, ri), NIMBLE_LN_I64);
  nimble_ln_stmt *valid = cp_for(c, vr, rois->ext[0], NIMBLE_LN_SERIAL, 0,
                                 nimble_ln_check(A_, BIN(AND, BIN(GE, bv, cp_i(c, 0)), BIN(LT, bv, x->ext[0])),
                                                 "roi_align: a batch index is out of range"));

  nimble_ln_var *iv[4];
  nimble_ln_expr *idx[4];
  for (int a = 0; a < 4; a++) {
    iv[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = REF(iv[a]);
  }
  nimble_ln_var *v_b = cp_var(c, "bi", NIMBLE_LN_I64), *v_y0 = cp_var(c, "y0", NIMBLE_LN_F32);
  nimble_ln_var *v_x0 = cp_var(c, "x0", NIMBLE_LN_F32), *v_bh = cp_var(c, "bin_h", NIMBLE_LN_F32);
  nimble_ln_var *v_bw = cp_var(c, "bin_w", NIMBLE_LN_F32), *v_gh = cp_var(c, "grid_h", NIMBLE_LN_I64);
  nimble_ln_var *v_gw = cp_var(c, "grid_w", NIMBLE_LN_I64), *acc = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *coord[4];
  for (int k = 0; k < 4; k++) {
    nimble_ln_expr *ci[2] = {idx[0], cp_i(c, k)};
    coord[k] = BIN(SUB, BIN(MUL, cp_value(c, rois, ci), F(scale)), F(half ? 0.5 : 0.0));
  }
  nimble_ln_expr *bidx[1] = {idx[0]};
  nimble_ln_expr *bval = cp_convert(c, cp_value(c, bi, bidx), NIMBLE_LN_I64);
  /* rois are [x1, y1, x2, y2]. */
  nimble_ln_expr *rw = BIN(SUB, coord[2], coord[0]), *rh = BIN(SUB, coord[3], coord[1]);
  if (!half) rw = cp_max(c, rw, F(1)), rh = cp_max(c, rh, F(1));
  nimble_ln_expr *bh = BIN(DIV, rh, F((double)oh)), *bw = BIN(DIV, rw, F((double)ow));
  /* Adaptive sampling: ceil(roi / bins) (0 for an empty or negative roi). */
  nimble_ln_expr *gh = cp_i(c, ratio), *gw = cp_i(c, ratio);
  if (ratio <= 0) {
    nimble_ln_expr *th = BIN(DIV, rh, F((double)oh)), *tw = BIN(DIV, rw, F((double)ow));
    nimble_ln_expr *ch = nimble_ln_cast(A_, NIMBLE_LN_I64, th), *cw = nimble_ln_cast(A_, NIMBLE_LN_I64, tw);
    gh = SEL(BIN(GT, th, nimble_ln_cast(A_, NIMBLE_LN_F32, ch)), cp_add(c, ch, cp_i(c, 1)), ch);
    gw = SEL(BIN(GT, tw, nimble_ln_cast(A_, NIMBLE_LN_F32, cw)), cp_add(c, cw, cp_i(c, 1)), cw);
    gh = SEL(BIN(GT, th, F(0)), gh, cp_i(c, 0));
    gw = SEL(BIN(GT, tw, F(0)), gw, cp_i(c, 0));
  }
  /* One bilinear sample at (y, x), ONNX Runtime's rules. */
  nimble_ln_var *sy = cp_var(c, "sy", NIMBLE_LN_I64), *sx = cp_var(c, "sx", NIMBLE_LN_I64);
  nimble_ln_var *yv = cp_var(c, "y", NIMBLE_LN_F32), *xv = cp_var(c, "x", NIMBLE_LN_F32);
  nimble_ln_expr *yraw = BIN(ADD, BIN(ADD, REF(v_y0), BIN(MUL, nimble_ln_cast(A_, NIMBLE_LN_F32, idx[2]), REF(v_bh))),
                             BIN(DIV, BIN(MUL, BIN(ADD, nimble_ln_cast(A_, NIMBLE_LN_F32, REF(sy)), F(0.5)), REF(v_bh)),
                                 nimble_ln_cast(A_, NIMBLE_LN_F32, REF(v_gh))));
  nimble_ln_expr *xraw = BIN(ADD, BIN(ADD, REF(v_x0), BIN(MUL, nimble_ln_cast(A_, NIMBLE_LN_F32, idx[3]), REF(v_bw))),
                             BIN(DIV, BIN(MUL, BIN(ADD, nimble_ln_cast(A_, NIMBLE_LN_F32, REF(sx)), F(0.5)), REF(v_bw)),
                                 nimble_ln_cast(A_, NIMBLE_LN_F32, REF(v_gw))));
  nimble_ln_expr *outside = BIN(OR, BIN(OR, BIN(LT, REF(yv), F(-1)), BIN(GT, REF(yv), Hf)),
                                BIN(OR, BIN(LT, REF(xv), F(-1)), BIN(GT, REF(xv), Wf)));
  nimble_ln_var *out_v = cp_var(c, "outside", NIMBLE_LN_BOOL);
  nimble_ln_var *yc = cp_var(c, "yc", NIMBLE_LN_F32), *xc = cp_var(c, "xc", NIMBLE_LN_F32);
  nimble_ln_var *ylo = cp_var(c, "ylo", NIMBLE_LN_I64), *xlo = cp_var(c, "xlo", NIMBLE_LN_I64);
  nimble_ln_expr *hm1 = cp_sub(c, H, cp_i(c, 1)), *wm1 = cp_sub(c, W, cp_i(c, 1));
  /* Past the last row or column: the sample is that row or column. */
  nimble_ln_expr *ytop = BIN(GE, REF(ylo), hm1), *xtop = BIN(GE, REF(xlo), wm1);
  nimble_ln_expr *y0 = SEL(ytop, hm1, REF(ylo)), *y1 = SEL(ytop, hm1, cp_add(c, REF(ylo), cp_i(c, 1)));
  nimble_ln_expr *x0 = SEL(xtop, wm1, REF(xlo)), *x1 = SEL(xtop, wm1, cp_add(c, REF(xlo), cp_i(c, 1)));
  nimble_ln_expr *ly = SEL(ytop, F(0), BIN(SUB, REF(yc), nimble_ln_cast(A_, NIMBLE_LN_F32, REF(ylo))));
  nimble_ln_expr *lx = SEL(xtop, F(0), BIN(SUB, REF(xc), nimble_ln_cast(A_, NIMBLE_LN_F32, REF(xlo))));
  nimble_ln_var *vly = cp_var(c, "ly", NIMBLE_LN_F32), *vlx = cp_var(c, "lx", NIMBLE_LN_F32);
  nimble_ln_expr *hy = BIN(SUB, F(1), REF(vly)), *hx = BIN(SUB, F(1), REF(vlx));
  nimble_ln_expr *t[4][2] = {{y0, x0}, {y0, x1}, {y1, x0}, {y1, x1}};
  nimble_ln_expr *wt[4] = {BIN(MUL, hy, hx), BIN(MUL, hy, REF(vlx)), BIN(MUL, REF(vly), hx),
                           BIN(MUL, REF(vly), REF(vlx))};
  nimble_ln_expr *sample = NULL;
  for (int k = 0; k < 4; k++) {
    nimble_ln_expr *xi[4] = {REF(v_b), idx[1], t[k][0], t[k][1]};
    nimble_ln_expr *v = BIN(MUL, wt[k], cp_value(c, x, xi));
    sample = !sample ? v : is_max ? cp_max(c, sample, v) : BIN(ADD, sample, v);
  }
  if (!sample) return NULL;
  nimble_ln_expr *upd = is_max ? cp_max(c, REF(acc), sample) : BIN(ADD, REF(acc), sample);
  /* Outside samples add 0 (and count as 0 for max, as ONNX Runtime does). */
  nimble_ln_stmt *s = nimble_ln_assign(A_, acc, SEL(REF(out_v), is_max ? cp_max(c, REF(acc), F(0)) : REF(acc), upd));
  s = nimble_ln_let(A_, vly, ly, nimble_ln_let(A_, vlx, lx, s));
  s = nimble_ln_let(A_, ylo, nimble_ln_cast(A_, NIMBLE_LN_I64, REF(yc)),
                    nimble_ln_let(A_, xlo, nimble_ln_cast(A_, NIMBLE_LN_I64, REF(xc)), s));
  s = nimble_ln_let(A_, yc, cp_max(c, REF(yv), F(0)), nimble_ln_let(A_, xc, cp_max(c, REF(xv), F(0)), s));
  s = nimble_ln_let(A_, out_v, outside, s);
  s = nimble_ln_let(A_, yv, yraw, nimble_ln_let(A_, xv, xraw, s));
  s = cp_for(c, sy, REF(v_gh), NIMBLE_LN_SERIAL, 0, cp_for(c, sx, REF(v_gw), NIMBLE_LN_SERIAL, 0, s));
  nimble_ln_expr *cnt = nimble_ln_cast(A_, NIMBLE_LN_F32, cp_max(c, cp_mul(c, REF(v_gh), REF(v_gw)), cp_i(c, 1)));
  /* No sample (an adaptive grid of an empty roi): 0, in both modes. */
  nimble_ln_expr *res = is_max ? SEL(BIN(GT, cp_mul(c, REF(v_gh), REF(v_gw)), cp_i(c, 0)), REF(acc), F(0))
                               : BIN(DIV, REF(acc), cnt);
  nimble_ln_stmt *elem = nimble_ln_seq2(A_, s, nimble_ln_store(A_, o, nimble_ln_flat_index(A_, o, idx), res));
  elem = nimble_ln_decl(A_, acc, F(is_max ? -3.4028234663852886e38 : 0.0), elem);
  nimble_ln_expr *lets_v[7] = {bval, coord[1], coord[0], bh, bw, gh, gw};
  nimble_ln_var *lets[7] = {v_b, v_y0, v_x0, v_bh, v_bw, v_gh, v_gw};
  for (int k = 6; k >= 0; k--) elem = nimble_ln_let(A_, lets[k], lets_v[k], elem);
  return nimble_ln_seq2(A_, valid, cp_loops(c, iv, n->ext, 4, 64, elem));
}

const cp_def cp_defs_detection[] = {
    {"non_max_suppression", CP_ANCHOR_ROW, shape_nms, NULL, NULL, NULL, outputs_nms, emit_nms},
    {"roi_align", CP_ANCHOR_ROW, shape_roi_align, NULL, NULL, emit_roi_align, NULL, NULL},
};
const int cp_defs_detection_count = (int)(sizeof cp_defs_detection / sizeof cp_defs_detection[0]);
