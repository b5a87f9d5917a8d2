/* lstm_scan, gru_scan and rnn_scan (ops/recurrent.c): a whole LSTM, GRU
 * or RNN recurrence in one kernel. What follows is said of lstm_scan;
 * gru_scan and rnn_scan (at the end) run their steps the same way with
 * three gates or one and no c.
 *
 * Each step is g = h r (B x 4H from B x H and H x 4H), through env->sgemm
 * where the runtime has it (every CPU runtime: the packed matrix-vector
 * product for a batch of 1, split over the VM's threads by the runtime
 * when r is large), then per hidden unit the gates from xw[t] + g (plus
 * the peepholes' terms when given): c = f * c + i * u, h = o * tanh(c),
 * one vectorized loop over the units. Where
 * the importer's recursion over steps cost a VM call per step, its
 * allocations, the row's take and scatter and a kernel for the gates, a
 * step is now one product and one loop (lstm seq 128 at 1 thread: 0.51 ->
 * 0.38 ms, docs/benchmarks.md).
 *
 * The steps are not split over threads by hidden units: tasks owning a
 * contiguous run of r's columns for their units' four gates (r's columns
 * reordered by blocks of 16 units) exchange only h per step, but on the
 * build machine a fork-join per step (cache lines crossing cores in
 * 0.2-0.25 us each way) cost more than the half product saved: lstm seq
 * 128's kernel took 361 us at 2 threads against 285 at 1.
 *
 * State lives in the outputs: y[t] holds step t's h, which the next
 * step's product reads (a step writes y[t] while reading y[t - 1]: no
 * double buffer); the c output holds c, updated in place. h0 goes to a
 * scratch row after the gates' [B, 4H] for the first product (h0 itself
 * may be an inlined constant). With sequence lengths an entry past its
 * own keeps c and writes zeros to y; the product still runs over its
 * (now zero) h, whose results it discards, and its last h is read back
 * from y's row at its length.
 *
 * Without sgemm (GPUs, runtimes without BLAS, use_sgemm off) the same
 * steps run as serial loops with the products as dot products: correct,
 * not fast, no scratch. The steps depend on each other, so no GPU thread
 * may take one: the body is several statements (c0's copy, the steps, the
 * last h), which the GPU thread mapping (codegen/cg_ptx_map.c, a lone
 * top-level nest only) leaves serial. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A

static nimble_ln_expr *ref(cp_ctx *c, nimble_ln_var *v) { return nimble_ln_ref(A_, v); }
static nimble_ln_expr *bin(cp_ctx *c, nimble_ln_op_t op, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(A_, op, a, b);
}
static nimble_ln_expr *un(cp_ctx *c, nimble_ln_op_t op, nimble_ln_expr *a) { return nimble_ln_unary(A_, op, a); }

static nimble_status_t shape_lstm_scan(cp_ctx *c, cp_node *n) {
  if (n->n_in < 4 || n->n_in > 6)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "lstm_scan takes 4 to 6 inputs, got %d", n->n_in);
  cp_node *xw = n->in[0], *r = n->in[1];
  static const int ranks[6] = {3, 2, 2, 2, 1, 1};
  for (int i = 0; i < n->n_in; i++) {
    if (i == 5 ? n->in[i]->type != NIMBLE_LN_I64 : n->in[i]->type != NIMBLE_LN_F32)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "lstm_scan of %s (only float32 is computed)",
                                nimble_ln_type_name(n->in[i]->type));
    if (n->in[i]->rank != ranks[i])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "lstm_scan: input %d has rank %d, expected %d", i,
                                n->in[i]->rank, ranks[i]);
  }
  int64_t H;
  if (!cp_const_i(r->ext[0], &H) || H < 1)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "lstm_scan: the hidden size must be a known constant");
  if (H > ((int64_t)1 << 32)) /* 4H and 5H below stay far from overflowing */
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "lstm_scan: hidden size %lld is too large", (long long)H);
  nimble_ln_expr *G = cp_i(c, 4 * H), *Hx = cp_i(c, H), *B = xw->ext[1];
  cp_check(c, cp_eq(c, r->ext[1], G), "lstm_scan: r is not [H, 4H]");
  cp_check(c, cp_eq(c, xw->ext[2], G), "lstm_scan: xw's last axis is not 4H");
  for (int i = 2; i < 4; i++) {
    cp_check(c, cp_eq(c, n->in[i]->ext[0], B), "lstm_scan: input %d's batch differs from xw's", i);
    cp_check(c, cp_eq(c, n->in[i]->ext[1], Hx), "lstm_scan: input %d is not [batch, H]", i);
  }
  if (n->n_in >= 5) cp_check(c, cp_eq(c, n->in[4]->ext[0], cp_i(c, 3 * H)), "lstm_scan: the peepholes are not [3H]");
  if (n->n_in == 6) {
    if (cp_attr_int(n, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "lstm_scan: sequence lengths go with the forward direction only");
    cp_check(c, cp_eq(c, n->in[5]->ext[0], B), "lstm_scan: the sequence lengths' batch differs from xw's");
  }
  n->type = NIMBLE_LN_F32;
  n->dtype = xw->dtype;
  n->rank = 3;
  n->ext[0] = xw->ext[0];
  n->ext[1] = B;
  n->ext[2] = Hx;
  return nimble_ok();
}

static bool outputs_lstm_scan(cp_ctx *c, cp_node *n, cp_outputs *o) {
  (void)c;
  o->n = 3;
  for (int k = 0; k < 3; k++) {
    o->type[k] = NIMBLE_LN_F32;
    o->rank[k] = k ? 2 : 3;
    for (int a = 0; a < o->rank[k]; a++) o->ext[k][a] = n->ext[k ? a + 1 : a];
  }
  return true;
}

/* What one step needs to know, shared by both ways of computing it. */
typedef struct scan {
  cp_node *n;
  nimble_ln_param *y, *hy, *cy, *xw, *r;
  int64_t H; /* hidden size */
  nimble_ln_expr *T, *B, *G;
  nimble_ln_expr *t, *ti; /* step and its time index */
  cp_node *lens;          /* the sequence lengths (int64 [B]), or NULL */
} scan;

/* Whether batch entry b takes step t: t < lens[b] (NULL: no lengths,
 * every entry takes every step). */
static nimble_ln_expr *active(cp_ctx *c, const scan *s, nimble_ln_expr *b) {
  if (!s->lens) return NULL;
  nimble_ln_expr *idx[1] = {b};
  return bin(c, NIMBLE_LN_LT, s->t, cp_value(c, s->lens, idx));
}

/* The new c and h of unit j of batch entry b from its four gates'
 * pre-activations (xw's plus the product's), stored into the c output and
 * y[ti]; with peepholes, i and f see the previous c, o the new one. An
 * entry past its length keeps its c and gets 0 in y. */
static nimble_ln_stmt *unit_update(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j,
                                   nimble_ln_expr *const *pre) {
  nimble_ln_expr *ci = cp_add(c, cp_mul(c, b, cp_i(c, s->H)), j);
  nimble_ln_var *c1 = cp_var(c, "c1", NIMBLE_LN_F32), *c2 = cp_var(c, "c2", NIMBLE_LN_F32);
  nimble_ln_expr *g[3] = {pre[0], pre[1], pre[2]}; /* i, o, f */
  if (s->n->n_in >= 5)
    for (int q = 0; q < 3; q++) {
      nimble_ln_expr *idx[1] = {cp_add(c, cp_i(c, q * s->H), j)};
      g[q] = bin(c, NIMBLE_LN_ADD, g[q], bin(c, NIMBLE_LN_MUL, cp_value(c, s->n->in[4], idx), ref(c, q == 1 ? c2 : c1)));
    }
  nimble_ln_expr *gi = un(c, NIMBLE_LN_SIGMOID, g[0]), *go = un(c, NIMBLE_LN_SIGMOID, g[1]),
                 *gf = un(c, NIMBLE_LN_SIGMOID, g[2]), *gu = un(c, NIMBLE_LN_TANH, pre[3]);
  nimble_ln_expr *cn = bin(c, NIMBLE_LN_ADD, bin(c, NIMBLE_LN_MUL, gf, ref(c, c1)), bin(c, NIMBLE_LN_MUL, gi, gu));
  nimble_ln_expr *yi = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), cp_i(c, s->H)), j);
  nimble_ln_expr *cv = ref(c, c2), *hv = bin(c, NIMBLE_LN_MUL, go, un(c, NIMBLE_LN_TANH, ref(c, c2)));
  nimble_ln_expr *on = active(c, s, b);
  if (on) {
    cv = nimble_ln_select(A_, on, cv, ref(c, c1));
    hv = nimble_ln_select(A_, on, hv, nimble_ln_f32(A_, 0));
  }
  nimble_ln_stmt *st[2] = {nimble_ln_store(A_, s->cy, ci, cv), nimble_ln_store(A_, s->y, yi, hv)};
  return nimble_ln_let(A_, c1, nimble_ln_load(A_, s->cy, ci), nimble_ln_let(A_, c2, cn, nimble_ln_seq(A_, st, 2)));
}

/* Column of gate `gate` (ONNX's order: i, o, f, c) of unit j. */
static nimble_ln_expr *gate_col(cp_ctx *c, const scan *s, nimble_ln_expr *j, int gate) {
  return cp_add(c, cp_i(c, gate * s->H), j);
}

/* The sgemm path's step: the product of h (A at a_off of a) with r into
 * the gates' scratch g, then every unit's update. */
static nimble_ln_stmt *fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_param *a,
                                 nimble_ln_expr *a_off) {
  nimble_ln_sgemm_desc_t d;
  memset(&d, 0, sizeof d);
  d.m = s->B;
  d.n = s->G;
  d.k = cp_i(c, s->H);
  d.alpha = 1.0f;
  d.beta = 0.0f;
  d.a = a;
  d.a_offset = a_off;
  d.lda = cp_i(c, s->H);
  d.b = s->r;
  d.b_offset = cp_i(c, 0);
  d.ldb = s->G;
  d.c = g;
  d.c_offset = cp_i(c, 0);
  d.ldc = s->G;
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *pre[4];
  for (int q = 0; q < 4; q++) {
    nimble_ln_expr *col = gate_col(c, s, j, q);
    nimble_ln_expr *xi = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), s->G), col);
    pre[q] = bin(c, NIMBLE_LN_ADD, nimble_ln_load(A_, s->xw, xi), nimble_ln_load(A_, g, cp_add(c, cp_mul(c, b, s->G), col)));
  }
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_stmt *units =
      cp_for(c, jv, cp_i(c, s->H), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, unit_update(c, s, b, j, pre));
  units = cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, units);
  return nimble_ln_seq2(A_, nimble_ln_sgemm(A_, &d), units);
}

/* The own step (no sgemm): per unit, four dot products of h with r's
 * columns, h's element p of batch entry b read by h_at(b, p). */
typedef nimble_ln_expr *(*h_at_fn)(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p);

static nimble_ln_stmt *own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64),
                *pv = cp_var(c, "p", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv), *p = ref(c, pv);
  nimble_ln_var *acc[4];
  nimble_ln_stmt *adds[4];
  nimble_ln_expr *pre[4];
  nimble_ln_expr *hp = h_at(c, s, b, p);
  for (int q = 0; q < 4; q++) {
    acc[q] = cp_var(c, "acc", NIMBLE_LN_F32);
    nimble_ln_expr *col = gate_col(c, s, j, q);
    nimble_ln_expr *w = nimble_ln_load(A_, s->r, cp_add(c, cp_mul(c, p, s->G), col));
    adds[q] = nimble_ln_assign(A_, acc[q], bin(c, NIMBLE_LN_ADD, ref(c, acc[q]), bin(c, NIMBLE_LN_MUL, hp, w)));
    nimble_ln_expr *xi = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), s->G), col);
    pre[q] = bin(c, NIMBLE_LN_ADD, nimble_ln_load(A_, s->xw, xi), ref(c, acc[q]));
  }
  nimble_ln_stmt *dots = cp_for(c, pv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, nimble_ln_seq(A_, adds, 4));
  nimble_ln_stmt *body = nimble_ln_seq2(A_, dots, unit_update(c, s, b, j, pre));
  for (int q = 3; q >= 0; q--) body = nimble_ln_decl(A_, acc[q], nimble_ln_f32(A_, 0), body);
  body = cp_for(c, jv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, body);
}

static nimble_ln_expr *h_initial(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  nimble_ln_expr *idx[2] = {b, p};
  return cp_value(c, s->n->in[2], idx);
}

/* Step t's previous h: y at the time index before ti (after it, reversed). */
static nimble_ln_expr *prev_row(cp_ctx *c, const scan *s) {
  return cp_attr_int(s->n, "reverse") ? cp_add(c, s->ti, cp_i(c, 1)) : cp_sub(c, s->ti, cp_i(c, 1));
}

static nimble_ln_expr *h_previous(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  nimble_ln_expr *row = cp_add(c, cp_mul(c, prev_row(c, s), s->B), b);
  return nimble_ln_load(A_, s->y, cp_add(c, cp_mul(c, row, cp_i(c, s->H)), p));
}

/* out[b * H + j] = value(b, j) over [B, H]. */
static nimble_ln_stmt *fill_bh(cp_ctx *c, const scan *s, nimble_ln_param *out, nimble_ln_expr *off, h_at_fn value) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *at = cp_add(c, off, cp_add(c, cp_mul(c, b, cp_i(c, s->H)), j));
  nimble_ln_stmt *st = cp_for(c, jv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, nimble_ln_store(A_, out, at, value(c, s, b, j)));
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, st);
}

static nimble_ln_expr *c_initial(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  nimble_ln_expr *idx[2] = {b, p};
  return cp_value(c, s->n->in[3], idx);
}

/* The last step's h: y at its time index (0 reversed, else T - 1; with
 * lengths, entry b's last, min(lens[b], T) - 1, or h0 when it took no
 * step). Only when T > 0. */
static nimble_ln_expr *h_last(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  nimble_ln_expr *last = cp_attr_int(s->n, "reverse") ? cp_i(c, 0) : cp_sub(c, s->T, cp_i(c, 1));
  if (!s->lens) {
    nimble_ln_expr *row = cp_add(c, cp_mul(c, last, s->B), b);
    return nimble_ln_load(A_, s->y, cp_add(c, cp_mul(c, row, cp_i(c, s->H)), p));
  }
  nimble_ln_expr *idx[1] = {b};
  nimble_ln_expr *t = cp_min(c, cp_sub(c, cp_value(c, s->lens, idx), cp_i(c, 1)), last);
  nimble_ln_expr *row = cp_add(c, cp_mul(c, cp_max(c, t, cp_i(c, 0)), s->B), b);
  return nimble_ln_select(A_, bin(c, NIMBLE_LN_GE, t, cp_i(c, 0)),
                          nimble_ln_load(A_, s->y, cp_add(c, cp_mul(c, row, cp_i(c, s->H)), p)), h_initial(c, s, b, p));
}

static nimble_ln_stmt *emit_lstm_scan(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                      nimble_ln_param *const *shapes) {
  (void)shapes;
  cp_node *xw = n->in[0], *r = n->in[1];
  if (xw->kind != CP_PARAM || !xw->param || r->kind != CP_PARAM || !r->param)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: lstm_scan's xw and r must be tensors", c->prim);
  scan s;
  memset(&s, 0, sizeof s);
  s.n = n;
  s.y = outs[0];
  s.hy = outs[1];
  s.cy = outs[2];
  s.xw = xw->param;
  s.r = r->param;
  cp_const_i(n->ext[2], &s.H);
  s.T = xw->ext[0];
  s.B = n->ext[1];
  s.G = cp_i(c, 4 * s.H);
  s.lens = n->n_in == 6 ? n->in[5] : NULL;
  bool reverse = cp_attr_int(n, "reverse") != 0;
  nimble_ln_var *tv = cp_var(c, "t", NIMBLE_LN_I64), *tiv = cp_var(c, "ti", NIMBLE_LN_I64);
  s.t = ref(c, tv);
  s.ti = ref(c, tiv);
  nimble_ln_expr *ti_val = reverse ? cp_sub(c, cp_sub(c, s.T, cp_i(c, 1)), s.t) : s.t;
  nimble_ln_expr *first = bin(c, NIMBLE_LN_EQ, s.t, cp_i(c, 0));

  /* The own loops: step 0 reads h0, the others y's previous row. */
  nimble_ln_stmt *own = nimble_ln_if(A_, first, own_step(c, &s, h_initial), own_step(c, &s, h_previous));
  own = cp_for(c, tv, s.T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, own));
  nimble_ln_stmt *steps = own;

  if (c->opt.use_sgemm) {
    /* scratch: the gates [B, 4H], then h0 [B, H] */
    nimble_ln_expr *gsize = cp_mul(c, s.B, s.G);
    nimble_ln_param *g = nimble_ln_kernel_add_scratch(c->k, "gates", NIMBLE_LN_F32, cp_mul(c, s.B, cp_i(c, 5 * s.H)));
    if (!g) return NULL;
    nimble_ln_expr *prev = cp_mul(c, cp_mul(c, prev_row(c, &s), s.B), cp_i(c, s.H));
    nimble_ln_stmt *step = nimble_ln_if(A_, first, fast_step(c, &s, g, g, gsize), fast_step(c, &s, g, s.y, prev));
    nimble_ln_stmt *fast = cp_for(c, tv, s.T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, step));
    fast = nimble_ln_seq2(A_, fill_bh(c, &s, g, gsize, h_initial), fast);
    nimble_ln_expr *cond = bin(c, NIMBLE_LN_AND, nimble_ln_has_sgemm(A_), bin(c, NIMBLE_LN_GT, s.B, cp_i(c, 0)));
    steps = nimble_ln_if(A_, cond, fast, own);
  }
  /* c0 into the c output, the steps, then the last h (h0 when T is 0). */
  nimble_ln_stmt *hT = nimble_ln_if(A_, bin(c, NIMBLE_LN_GT, s.T, cp_i(c, 0)), fill_bh(c, &s, s.hy, cp_i(c, 0), h_last),
                                    fill_bh(c, &s, s.hy, cp_i(c, 0), h_initial));
  nimble_ln_stmt *all[3] = {fill_bh(c, &s, s.cy, cp_i(c, 0), c_initial), steps, hT};
  if (c->err) return NULL;
  return nimble_ln_seq(A_, all, 3);
}

/* ---- gru_scan and rnn_scan ----------------------------------------------------- */

static nimble_status_t shape_gru_scan(cp_ctx *c, cp_node *n) {
  if (n->n_in < 4 || n->n_in > 5)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gru_scan takes 4 or 5 inputs, got %d", n->n_in);
  cp_node *xw = n->in[0], *r = n->in[1];
  static const int ranks[5] = {3, 2, 2, 1, 1};
  for (int i = 0; i < n->n_in; i++) {
    if (i == 4 ? n->in[i]->type != NIMBLE_LN_I64 : n->in[i]->type != NIMBLE_LN_F32)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "gru_scan of %s (only float32 is computed)",
                                nimble_ln_type_name(n->in[i]->type));
    if (n->in[i]->rank != ranks[i])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gru_scan: input %d has rank %d, expected %d", i,
                                n->in[i]->rank, ranks[i]);
  }
  int64_t H;
  if (!cp_const_i(r->ext[0], &H) || H < 1)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "gru_scan: the hidden size must be a known constant");
  if (H > ((int64_t)1 << 32)) /* 3H and 5H below stay far from overflowing */
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gru_scan: hidden size %lld is too large", (long long)H);
  nimble_ln_expr *G = cp_i(c, 3 * H), *Hx = cp_i(c, H), *B = xw->ext[1];
  cp_check(c, cp_eq(c, r->ext[1], G), "gru_scan: r is not [H, 3H]");
  cp_check(c, cp_eq(c, xw->ext[2], G), "gru_scan: xw's last axis is not 3H");
  cp_check(c, cp_eq(c, n->in[2]->ext[0], B), "gru_scan: h0's batch differs from xw's");
  cp_check(c, cp_eq(c, n->in[2]->ext[1], Hx), "gru_scan: h0 is not [batch, H]");
  cp_check(c, cp_eq(c, n->in[3]->ext[0], Hx), "gru_scan: rbh is not [H]");
  if (n->n_in == 5) {
    if (cp_attr_int(n, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gru_scan: sequence lengths go with the forward direction only");
    cp_check(c, cp_eq(c, n->in[4]->ext[0], B), "gru_scan: the sequence lengths' batch differs from xw's");
  }
  n->type = NIMBLE_LN_F32;
  n->dtype = xw->dtype;
  n->rank = 3;
  n->ext[0] = xw->ext[0];
  n->ext[1] = B;
  n->ext[2] = Hx;
  return nimble_ok();
}

static nimble_status_t shape_rnn_scan(cp_ctx *c, cp_node *n) {
  if (n->n_in < 3 || n->n_in > 4)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "rnn_scan takes 3 or 4 inputs, got %d", n->n_in);
  cp_node *xw = n->in[0], *r = n->in[1];
  static const int ranks[4] = {3, 2, 2, 1};
  for (int i = 0; i < n->n_in; i++) {
    if (i == 3 ? n->in[i]->type != NIMBLE_LN_I64 : n->in[i]->type != NIMBLE_LN_F32)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "rnn_scan of %s (only float32 is computed)",
                                nimble_ln_type_name(n->in[i]->type));
    if (n->in[i]->rank != ranks[i])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "rnn_scan: input %d has rank %d, expected %d", i,
                                n->in[i]->rank, ranks[i]);
  }
  int64_t H;
  if (!cp_const_i(r->ext[0], &H) || H < 1)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "rnn_scan: the hidden size must be a known constant");
  if (H > ((int64_t)1 << 32))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "rnn_scan: hidden size %lld is too large", (long long)H);
  nimble_ln_expr *Hx = cp_i(c, H), *B = xw->ext[1];
  cp_check(c, cp_eq(c, r->ext[1], Hx), "rnn_scan: r is not [H, H]");
  cp_check(c, cp_eq(c, xw->ext[2], Hx), "rnn_scan: xw's last axis is not H");
  cp_check(c, cp_eq(c, n->in[2]->ext[0], B), "rnn_scan: h0's batch differs from xw's");
  cp_check(c, cp_eq(c, n->in[2]->ext[1], Hx), "rnn_scan: h0 is not [batch, H]");
  if (n->n_in == 4) {
    if (cp_attr_int(n, "reverse"))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "rnn_scan: sequence lengths go with the forward direction only");
    cp_check(c, cp_eq(c, n->in[3]->ext[0], B), "rnn_scan: the sequence lengths' batch differs from xw's");
  }
  n->type = NIMBLE_LN_F32;
  n->dtype = xw->dtype;
  n->rank = 3;
  n->ext[0] = xw->ext[0];
  n->ext[1] = B;
  n->ext[2] = Hx;
  return nimble_ok();
}

/* gru_scan's and rnn_scan's outputs: y [T, B, H] and h [B, H]. */
static bool outputs_y_h(cp_ctx *c, cp_node *n, cp_outputs *o) {
  (void)c;
  o->n = 2;
  for (int k = 0; k < 2; k++) {
    o->type[k] = NIMBLE_LN_F32;
    o->rank[k] = k ? 2 : 3;
    for (int a = 0; a < o->rank[k]; a++) o->ext[k][a] = n->ext[k ? a + 1 : a];
  }
  return true;
}

/* xw[ti, b, gate * H + j]: gate q's input projection of unit j. */
static nimble_ln_expr *xw_at(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, int q) {
  return nimble_ln_load(A_, s->xw, cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), s->G), gate_col(c, s, j, q)));
}

static nimble_ln_expr *rbh_at(cp_ctx *c, const scan *s, nimble_ln_expr *j) {
  nimble_ln_expr *idx[1] = {j};
  return cp_value(c, s->n->in[3], idx);
}

/* y[ti, b, j] = hn, or 0 for an entry past its length (which keeps its
 * h: its last is read back from y). */
static nimble_ln_stmt *h_store(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, nimble_ln_expr *hn) {
  nimble_ln_expr *on = active(c, s, b);
  if (on) hn = nimble_ln_select(A_, on, hn, nimble_ln_f32(A_, 0));
  nimble_ln_expr *yi = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), cp_i(c, s->H)), j);
  return nimble_ln_store(A_, s->y, yi, hn);
}

/* The GRU's new h, (1 - z) * hh + z * hp, stored by h_store. */
static nimble_ln_stmt *gru_store(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, nimble_ln_expr *z,
                                 nimble_ln_expr *hh, nimble_ln_expr *hp) {
  nimble_ln_var *hv = cp_var(c, "hh", NIMBLE_LN_F32);
  nimble_ln_expr *hn = bin(c, NIMBLE_LN_ADD, ref(c, hv), bin(c, NIMBLE_LN_MUL, z, bin(c, NIMBLE_LN_SUB, hp, ref(c, hv))));
  return nimble_ln_let(A_, hv, hh, h_store(c, s, b, j, hn));
}

/* C[:, c0 : c0 + n] (C = g, [B, 3H]) = A (m x H at a + a_off) times r's
 * columns [c0, c0 + n). */
static nimble_ln_stmt *step_product(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_param *a,
                                   nimble_ln_expr *a_off, int64_t c0, int64_t n) {
  nimble_ln_sgemm_desc_t d;
  memset(&d, 0, sizeof d);
  d.m = s->B;
  d.n = cp_i(c, n);
  d.k = cp_i(c, s->H);
  d.alpha = 1.0f;
  d.beta = 0.0f;
  d.a = a;
  d.a_offset = a_off;
  d.lda = cp_i(c, s->H);
  d.b = s->r;
  d.b_offset = cp_i(c, c0);
  d.ldb = s->G;
  d.c = g;
  d.c_offset = cp_i(c, c0);
  d.ldc = s->G;
  return nimble_ln_sgemm(A_, &d);
}

/* A loop over the batch and (vectorized) the units around body(b, j). */
static nimble_ln_stmt *units_loop(cp_ctx *c, const scan *s, nimble_ln_var *bv, nimble_ln_var *jv,
                                  nimble_ln_stmt *body) {
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  body = cp_for(c, jv, cp_i(c, s->H), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, body);
}

/* The sgemm path's step, the previous h at a + a_off ([B, H]); g is the
 * scratch: the products [B, 3H] at 0, h0 at B*3H, r * h at B*4H.
 * linear_before_reset: one product h r, then every unit. Otherwise h r
 * for z and r, the units' z (kept in g) and r * h, then (r * h) r_h, then
 * every unit. */
static nimble_ln_stmt *gru_fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_param *a,
                                     nimble_ln_expr *a_off) {
  int64_t H = s->H;
  bool lbr = cp_attr_int(s->n, "linear_before_reset") != 0;
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *hrow = cp_add(c, cp_mul(c, b, cp_i(c, H)), j);
  nimble_ln_expr *hp = nimble_ln_load(A_, a, cp_add(c, a_off, hrow));
  nimble_ln_expr *grow = cp_mul(c, b, s->G);
  nimble_ln_expr *gq[3];
  for (int q = 0; q < 3; q++) gq[q] = nimble_ln_load(A_, g, cp_add(c, grow, gate_col(c, s, j, q)));
  nimble_ln_expr *z = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), gq[0]));
  nimble_ln_expr *rr = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 1), gq[1]));
  if (lbr) {
    nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 2),
                                                   bin(c, NIMBLE_LN_MUL, rr, bin(c, NIMBLE_LN_ADD, gq[2], rbh_at(c, s, j)))));
    return nimble_ln_seq2(A_, step_product(c, s, g, a, a_off, 0, 3 * H), units_loop(c, s, bv, jv, gru_store(c, s, b, j, z, hh, hp)));
  }
  nimble_ln_expr *rh_at = cp_add(c, cp_mul(c, s->B, cp_i(c, 4 * H)), hrow);
  nimble_ln_stmt *gates[2] = {nimble_ln_store(A_, g, cp_add(c, grow, j), z),
                              nimble_ln_store(A_, g, rh_at, bin(c, NIMBLE_LN_MUL, rr, hp))};
  nimble_ln_var *bv2 = cp_var(c, "b", NIMBLE_LN_I64), *jv2 = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b2 = ref(c, bv2), *j2 = ref(c, jv2);
  nimble_ln_expr *grow2 = cp_mul(c, b2, s->G);
  nimble_ln_expr *hp2 = nimble_ln_load(A_, a, cp_add(c, a_off, cp_add(c, cp_mul(c, b2, cp_i(c, H)), j2)));
  nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH,
                          bin(c, NIMBLE_LN_ADD, xw_at(c, s, b2, j2, 2),
                              bin(c, NIMBLE_LN_ADD, nimble_ln_load(A_, g, cp_add(c, grow2, gate_col(c, s, j2, 2))),
                                  rbh_at(c, s, j2))));
  nimble_ln_expr *z2 = nimble_ln_load(A_, g, cp_add(c, grow2, j2));
  nimble_ln_stmt *st[4] = {step_product(c, s, g, a, a_off, 0, 2 * H),
                           units_loop(c, s, bv, jv, nimble_ln_seq(A_, gates, 2)),
                           step_product(c, s, g, g, cp_mul(c, s->B, cp_i(c, 4 * H)), 2 * H, H),
                           units_loop(c, s, bv2, jv2, gru_store(c, s, b2, j2, z2, hh, hp2))};
  return nimble_ln_seq(A_, st, 4);
}

/* sum over p of h(b, p) * r[p, col]: a serial dot product into acc. */
static nimble_ln_stmt *dot_into(cp_ctx *c, const scan *s, nimble_ln_var *acc, nimble_ln_expr *b, nimble_ln_expr *col,
                                h_at_fn h_at, nimble_ln_param *hbuf) {
  nimble_ln_var *pv = cp_var(c, "p", NIMBLE_LN_I64);
  nimble_ln_expr *p = ref(c, pv);
  nimble_ln_expr *hp = hbuf ? nimble_ln_load(A_, hbuf, cp_add(c, cp_mul(c, b, cp_i(c, s->H)), p)) : h_at(c, s, b, p);
  nimble_ln_expr *w = nimble_ln_load(A_, s->r, cp_add(c, cp_mul(c, p, s->G), col));
  return cp_for(c, pv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0,
                nimble_ln_assign(A_, acc, bin(c, NIMBLE_LN_ADD, ref(c, acc), bin(c, NIMBLE_LN_MUL, hp, w))));
}

/* The own step (no sgemm, no scratch): per unit, dot products of h with
 * r's columns. Without linear_before_reset the h gate's product needs
 * every unit's r * h first: a first pass keeps z in y[ti] and r * h in
 * the h output (both written for good later), the second computes the
 * new h from them. */
static nimble_ln_stmt *gru_own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  bool lbr = cp_attr_int(s->n, "linear_before_reset") != 0;
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_var *acc[3];
  for (int q = 0; q < 3; q++) acc[q] = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *hp = h_at(c, s, b, j);
  nimble_ln_expr *z = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), ref(c, acc[0])));
  nimble_ln_expr *rr = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 1), ref(c, acc[1])));
  nimble_ln_expr *yi = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b), cp_i(c, s->H)), j);
  nimble_ln_expr *hi = cp_add(c, cp_mul(c, b, cp_i(c, s->H)), j);
  int nq = lbr ? 3 : 2;
  nimble_ln_stmt *dots[4];
  for (int q = 0; q < nq; q++) dots[q] = dot_into(c, s, acc[q], b, gate_col(c, s, j, q), h_at, NULL);
  nimble_ln_stmt *pass1;
  if (lbr) {
    nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 2),
                                                   bin(c, NIMBLE_LN_MUL, rr, bin(c, NIMBLE_LN_ADD, ref(c, acc[2]), rbh_at(c, s, j)))));
    dots[nq] = gru_store(c, s, b, j, z, hh, hp);
  } else {
    nimble_ln_stmt *keep[2] = {nimble_ln_store(A_, s->y, yi, z), nimble_ln_store(A_, s->hy, hi, bin(c, NIMBLE_LN_MUL, rr, hp))};
    dots[nq] = nimble_ln_seq(A_, keep, 2);
  }
  pass1 = nimble_ln_seq(A_, dots, (size_t)nq + 1);
  for (int q = nq - 1; q >= 0; q--) pass1 = nimble_ln_decl(A_, acc[q], nimble_ln_f32(A_, 0), pass1);
  pass1 = cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, pass1));
  if (lbr) return pass1;
  nimble_ln_var *bv2 = cp_var(c, "b", NIMBLE_LN_I64), *jv2 = cp_var(c, "j", NIMBLE_LN_I64), *a2 = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *b2 = ref(c, bv2), *j2 = ref(c, jv2);
  nimble_ln_expr *yi2 = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, s->ti, s->B), b2), cp_i(c, s->H)), j2);
  nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b2, j2, 2),
                                                 bin(c, NIMBLE_LN_ADD, ref(c, a2), rbh_at(c, s, j2))));
  nimble_ln_stmt *pass2 = nimble_ln_seq2(A_, dot_into(c, s, a2, b2, gate_col(c, s, j2, 2), h_at, s->hy),
                                         gru_store(c, s, b2, j2, nimble_ln_load(A_, s->y, yi2), hh, h_at(c, s, b2, j2)));
  pass2 = nimble_ln_decl(A_, a2, nimble_ln_f32(A_, 0), pass2);
  pass2 = cp_for(c, bv2, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv2, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, pass2));
  return nimble_ln_seq2(A_, pass1, pass2);
}

/* rnn_scan's steps: h' = tanh(xw + h r), one product a step (fast) or a
 * dot product per unit (own). */
static nimble_ln_stmt *rnn_fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_param *a,
                                     nimble_ln_expr *a_off) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *gv = nimble_ln_load(A_, g, cp_add(c, cp_mul(c, b, s->G), j));
  nimble_ln_expr *hn = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), gv));
  return nimble_ln_seq2(A_, step_product(c, s, g, a, a_off, 0, s->H), units_loop(c, s, bv, jv, h_store(c, s, b, j, hn)));
}

static nimble_ln_stmt *rnn_own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64), *acc = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *hn = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), ref(c, acc)));
  nimble_ln_stmt *body = nimble_ln_seq2(A_, dot_into(c, s, acc, b, j, h_at, NULL), h_store(c, s, b, j, hn));
  body = nimble_ln_decl(A_, acc, nimble_ln_f32(A_, 0), body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv, cp_i(c, s->H), NIMBLE_LN_SERIAL, 0, body));
}

typedef nimble_ln_stmt *(*fast_step_fn)(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_param *a,
                                        nimble_ln_expr *a_off);
typedef nimble_ln_stmt *(*own_step_fn)(cp_ctx *c, const scan *s, h_at_fn h_at);

/* gru_scan's and rnn_scan's kernel: `gates` columns of H a step, the
 * lengths at input lens_in when there are that many, the steps by
 * fast_step (with sgemm; scratch: the products [B, gates*H], h0 [B, H],
 * and a row [B, H] gru_scan's r * h uses) or own_step. */
static nimble_ln_stmt *emit_h_scan(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs, const char *op, int gates,
                                   int lens_in, fast_step_fn fast_step, own_step_fn own_step) {
  cp_node *xw = n->in[0], *r = n->in[1];
  if (xw->kind != CP_PARAM || !xw->param || r->kind != CP_PARAM || !r->param)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s's xw and r must be tensors", c->prim, op);
  scan s;
  memset(&s, 0, sizeof s);
  s.n = n;
  s.y = outs[0];
  s.hy = outs[1];
  s.xw = xw->param;
  s.r = r->param;
  cp_const_i(n->ext[2], &s.H);
  s.T = xw->ext[0];
  s.B = n->ext[1];
  s.G = cp_i(c, gates * s.H);
  s.lens = n->n_in > lens_in ? n->in[lens_in] : NULL;
  bool reverse = cp_attr_int(n, "reverse") != 0;
  nimble_ln_var *tv = cp_var(c, "t", NIMBLE_LN_I64), *tiv = cp_var(c, "ti", NIMBLE_LN_I64);
  s.t = ref(c, tv);
  s.ti = ref(c, tiv);
  nimble_ln_expr *ti_val = reverse ? cp_sub(c, cp_sub(c, s.T, cp_i(c, 1)), s.t) : s.t;
  nimble_ln_expr *first = bin(c, NIMBLE_LN_EQ, s.t, cp_i(c, 0));

  nimble_ln_stmt *own = nimble_ln_if(A_, first, own_step(c, &s, h_initial), own_step(c, &s, h_previous));
  own = cp_for(c, tv, s.T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, own));
  nimble_ln_stmt *steps = own;

  if (c->opt.use_sgemm) {
    nimble_ln_expr *h0at = cp_mul(c, s.B, s.G);
    nimble_ln_param *g =
        nimble_ln_kernel_add_scratch(c->k, "gates", NIMBLE_LN_F32, cp_mul(c, s.B, cp_i(c, (gates + 2) * s.H)));
    if (!g) return NULL;
    nimble_ln_expr *prev = cp_mul(c, cp_mul(c, prev_row(c, &s), s.B), cp_i(c, s.H));
    nimble_ln_stmt *step = nimble_ln_if(A_, first, fast_step(c, &s, g, g, h0at), fast_step(c, &s, g, s.y, prev));
    nimble_ln_stmt *fast = cp_for(c, tv, s.T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, step));
    fast = nimble_ln_seq2(A_, fill_bh(c, &s, g, h0at, h_initial), fast);
    nimble_ln_expr *cond = bin(c, NIMBLE_LN_AND, nimble_ln_has_sgemm(A_), bin(c, NIMBLE_LN_GT, s.B, cp_i(c, 0)));
    steps = nimble_ln_if(A_, cond, fast, own);
  }
  /* The steps, then the last h (h0 when T is 0). */
  nimble_ln_stmt *hT = nimble_ln_if(A_, bin(c, NIMBLE_LN_GT, s.T, cp_i(c, 0)), fill_bh(c, &s, s.hy, cp_i(c, 0), h_last),
                                    fill_bh(c, &s, s.hy, cp_i(c, 0), h_initial));
  if (c->err) return NULL;
  return nimble_ln_seq2(A_, steps, hT);
}

static nimble_ln_stmt *emit_gru_scan(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                     nimble_ln_param *const *shapes) {
  (void)shapes;
  return emit_h_scan(c, n, outs, "gru_scan", 3, 4, gru_fast_step, gru_own_step);
}

static nimble_ln_stmt *emit_rnn_scan(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                     nimble_ln_param *const *shapes) {
  (void)shapes;
  return emit_h_scan(c, n, outs, "rnn_scan", 1, 3, rnn_fast_step, rnn_own_step);
}

const cp_def cp_defs_recurrent[] = {
    {"lstm_scan", CP_ANCHOR_ROW, shape_lstm_scan, NULL, NULL, NULL, outputs_lstm_scan, emit_lstm_scan},
    {"gru_scan", CP_ANCHOR_ROW, shape_gru_scan, NULL, NULL, NULL, outputs_y_h, emit_gru_scan},
    {"rnn_scan", CP_ANCHOR_ROW, shape_rnn_scan, NULL, NULL, NULL, outputs_y_h, emit_rnn_scan},
};
const int cp_defs_recurrent_count = (int)(sizeof cp_defs_recurrent / sizeof cp_defs_recurrent[0]);
