/* lstm_scan, gru_scan and rnn_scan (ops/recurrent.c): a whole LSTM, GRU
 * or RNN layer's recurrence, one or both directions, in one kernel.
 *
 * Each step is g = h r (B x gates*H from B x H and H x gates*H), through
 * env->sgemm where the runtime has it (every CPU runtime: the packed
 * matrix-vector product for a batch of 1, split over the VM's threads by
 * the runtime when r is large), then one vectorized loop over the hidden
 * units computing the gates from xw[t] + g: the LSTM's c = f * c + i * u,
 * h = o * tanh(c) (with the peepholes' terms when given), the GRU's h =
 * (1 - z) * h~ + z * h, the RNN's h = tanh(x + g). A GRU without
 * linear_before_reset needs r * h before its h gate's product: two
 * products a step, z and r's columns first. Where the importer's
 * recursion over steps cost a VM call per step, its allocations, the
 * row's take and scatter and a kernel for the gates, a step is now one
 * product and one loop (lstm seq 128 at 1 thread: 0.51 -> 0.38 ms, gru
 * 0.52 -> 0.25 ms, docs/benchmarks.md).
 *
 * Both directions of a bidirectional layer are one kernel call, each
 * direction a parallel task (the forward steps on one thread, the
 * reversed on the other, each with its own products and scratch): at 2
 * threads a bidirectional layer takes about the time of one direction.
 * Within a direction the steps are not split over threads by hidden
 * units: tasks owning a contiguous run of r's columns for their units'
 * gates exchange only h per step, but on the build machine a fork-join
 * per step (cache lines crossing cores in 0.2-0.25 us each way) cost more
 * than the half product saved: lstm seq 128's kernel took 361 us at 2
 * threads against 285 at 1.
 *
 * State lives in the outputs: y[t, d] holds step t's h, which the next
 * step's product reads (a step writes y[t] while reading y[t - 1]: no
 * double buffer); the c output holds c, updated in place. h0 goes to a
 * scratch row after the products' [B, gates*H] for the first product (h0
 * itself may be an inlined constant). With sequence lengths an entry past
 * its own keeps c and writes zeros to y; the product still runs over its
 * (now zero) h, whose results it discards, and its last h is read back
 * from y's row at its length.
 *
 * Without sgemm (GPUs, runtimes without BLAS, use_sgemm off) the same
 * steps run as serial loops with the products as dot products: correct,
 * not fast, no scratch. The steps depend on each other, so no GPU thread
 * may take one: a direction's body is several statements (c0's copy, the
 * steps, the last h), which the GPU thread mapping (codegen/cg_ptx_map.c,
 * a lone top-level nest only) leaves serial. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A

static nimble_ln_expr *ref(cp_ctx *c, nimble_ln_var *v) { return nimble_ln_ref(A_, v); }
static nimble_ln_expr *bin(cp_ctx *c, nimble_ln_op_t op, nimble_ln_expr *a, nimble_ln_expr *b) {
  return nimble_ln_binary(A_, op, a, b);
}
static nimble_ln_expr *un(cp_ctx *c, nimble_ln_op_t op, nimble_ln_expr *a) { return nimble_ln_unary(A_, op, a); }

/* ---- The three operators' shapes --------------------------------------------------- */

typedef enum { CELL_LSTM, CELL_GRU, CELL_RNN } cell_kind;

/* What distinguishes the three: name, gates, where the optional inputs
 * are (-1: none), how many outputs. */
typedef struct cell_info {
  const char *op;
  int gates;
  int min_in, max_in;
  int c0_in;   /* the LSTM's c0 */
  int peep_in; /* the LSTM's peepholes [D, 3H] */
  int rbh_in;  /* the GRU's h-gate recurrent bias [D, H] */
  int lens_in; /* the sequence lengths, when the inputs reach it */
  int outs;
} cell_info;

static const cell_info kCells[3] = {
    {"lstm_scan", 4, 4, 6, 3, 4, -1, 5, 3},
    {"gru_scan", 3, 4, 5, -1, -1, 3, 4, 2},
    {"rnn_scan", 1, 3, 4, -1, -1, -1, 3, 2},
};

static cell_kind kind_of(const cp_node *n) {
  return !strcmp(n->op->name, "lstm_scan") ? CELL_LSTM : !strcmp(n->op->name, "gru_scan") ? CELL_GRU : CELL_RNN;
}

/* xw [T, B, D, gates*H], r [D, H, gates*H], h0 (and c0) [D, B, H], the
 * peepholes [D, 3H], rbh [D, H], lens int64 [B] -> y [T, D, B, H]. */
static nimble_status_t shape_scan(cp_ctx *c, cp_node *n) {
  const cell_info *ci = &kCells[kind_of(n)];
  if (n->n_in < ci->min_in || n->n_in > ci->max_in)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s takes %d to %d inputs, got %d", ci->op, ci->min_in,
                              ci->max_in, n->n_in);
  cp_node *xw = n->in[0], *r = n->in[1];
  for (int i = 0; i < n->n_in; i++) {
    bool lens = i == ci->lens_in;
    int rank = i == 0 ? 4 : lens ? 1 : i == ci->peep_in || i == ci->rbh_in ? 2 : 3;
    if (lens ? n->in[i]->type != NIMBLE_LN_I64 : n->in[i]->type != NIMBLE_LN_F32)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s of %s (only float32 is computed)", ci->op,
                                nimble_ln_type_name(n->in[i]->type));
    if (n->in[i]->rank != rank)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: input %d has rank %d, expected %d", ci->op, i,
                                n->in[i]->rank, rank);
  }
  int64_t H, D;
  if (!cp_const_i(r->ext[1], &H) || H < 1)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s: the hidden size must be a known constant", ci->op);
  if (H > ((int64_t)1 << 32)) /* gates*H and the scratch below stay far from overflowing */
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: hidden size %lld is too large", ci->op, (long long)H);
  if (!cp_const_i(r->ext[0], &D) || D < 1 || D > 2)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s: the directions (r's first axis) must be 1 or 2", ci->op);
  if (D == 2 && cp_attr_int(n, "reverse"))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: two directions are forward and reverse already", ci->op);
  nimble_ln_expr *G = cp_i(c, ci->gates * H), *Hx = cp_i(c, H), *Dx = cp_i(c, D), *B = xw->ext[1];
  cp_check(c, cp_eq(c, r->ext[2], G), "%s: r is not [D, H, %d*H]", ci->op, ci->gates);
  cp_check(c, cp_eq(c, xw->ext[2], Dx), "%s: xw's directions differ from r's", ci->op);
  cp_check(c, cp_eq(c, xw->ext[3], G), "%s: xw's last axis is not %d*H", ci->op, ci->gates);
  for (int i = 2; i < 4; i++) {
    if (i != 2 && i != ci->c0_in) continue;
    cp_check(c, cp_eq(c, n->in[i]->ext[0], Dx), "%s: input %d's directions differ from r's", ci->op, i);
    cp_check(c, cp_eq(c, n->in[i]->ext[1], B), "%s: input %d's batch differs from xw's", ci->op, i);
    cp_check(c, cp_eq(c, n->in[i]->ext[2], Hx), "%s: input %d is not [D, batch, H]", ci->op, i);
  }
  if (ci->peep_in >= 0 && n->n_in > ci->peep_in) {
    cp_check(c, cp_eq(c, n->in[ci->peep_in]->ext[0], Dx), "%s: the peepholes' directions differ from r's", ci->op);
    cp_check(c, cp_eq(c, n->in[ci->peep_in]->ext[1], cp_i(c, 3 * H)), "%s: the peepholes are not [D, 3H]", ci->op);
  }
  if (ci->rbh_in >= 0) {
    cp_check(c, cp_eq(c, n->in[ci->rbh_in]->ext[0], Dx), "%s: rbh's directions differ from r's", ci->op);
    cp_check(c, cp_eq(c, n->in[ci->rbh_in]->ext[1], Hx), "%s: rbh is not [D, H]", ci->op);
  }
  if (n->n_in > ci->lens_in) {
    if (cp_attr_int(n, "reverse") || D != 1)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: sequence lengths go with the forward direction only",
                                ci->op);
    cp_check(c, cp_eq(c, n->in[ci->lens_in]->ext[0], B), "%s: the sequence lengths' batch differs from xw's", ci->op);
  }
  n->type = NIMBLE_LN_F32;
  n->dtype = xw->dtype;
  n->rank = 4;
  n->ext[0] = xw->ext[0];
  n->ext[1] = Dx;
  n->ext[2] = B;
  n->ext[3] = Hx;
  return nimble_ok();
}

/* y [T, D, B, H], then h (and the LSTM's c) [D, B, H]. */
static bool outputs_scan(cp_ctx *c, cp_node *n, cp_outputs *o) {
  (void)c;
  o->n = kCells[kind_of(n)].outs;
  for (int k = 0; k < o->n; k++) {
    o->type[k] = NIMBLE_LN_F32;
    o->rank[k] = k ? 3 : 4;
    for (int a = 0; a < o->rank[k]; a++) o->ext[k][a] = n->ext[k ? a + 1 : a];
  }
  return true;
}

/* ---- One direction's steps ------------------------------------------------------- */

/* What one direction's steps need to know, shared by both ways of
 * computing them. */
typedef struct scan {
  cp_node *n;
  const cell_info *ci;
  cell_kind kind;
  nimble_ln_param *y, *hy, *cy, *xw, *r;
  int64_t H, D, d; /* hidden size, directions, this direction */
  bool reverse;    /* this direction's steps run from T - 1 down */
  nimble_ln_expr *T, *B, *G;
  nimble_ln_expr *t, *ti; /* step and its time index */
  cp_node *lens;          /* the sequence lengths (int64 [B]), or NULL */
} scan;

static nimble_ln_expr *Hc(cp_ctx *c, const scan *s) { return cp_i(c, s->H); }

/* Flat indices: xw[ti, b, d, col], y[ti, d, b, j], a state [d, b, j]. */
static nimble_ln_expr *xw_index(cp_ctx *c, const scan *s, nimble_ln_expr *ti, nimble_ln_expr *b, nimble_ln_expr *col) {
  nimble_ln_expr *row = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, ti, s->B), b), cp_i(c, s->D)), cp_i(c, s->d));
  return cp_add(c, cp_mul(c, row, s->G), col);
}

static nimble_ln_expr *y_row(cp_ctx *c, const scan *s, nimble_ln_expr *ti) {
  return cp_mul(c, cp_add(c, cp_mul(c, ti, cp_i(c, s->D)), cp_i(c, s->d)), s->B); /* y[ti, d, 0] in rows of H */
}

static nimble_ln_expr *y_index(cp_ctx *c, const scan *s, nimble_ln_expr *ti, nimble_ln_expr *b, nimble_ln_expr *j) {
  return cp_add(c, cp_mul(c, cp_add(c, y_row(c, s, ti), b), Hc(c, s)), j);
}

static nimble_ln_expr *state_index(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j) {
  return cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, cp_i(c, s->d), s->B), b), Hc(c, s)), j);
}

/* Input i's [d, b, j] (h0, c0) and [d, col] (peepholes, rbh). */
static nimble_ln_expr *in_dbj(cp_ctx *c, const scan *s, int i, nimble_ln_expr *b, nimble_ln_expr *j) {
  nimble_ln_expr *idx[3] = {cp_i(c, s->d), b, j};
  return cp_value(c, s->n->in[i], idx);
}

static nimble_ln_expr *in_dj(cp_ctx *c, const scan *s, int i, nimble_ln_expr *j) {
  nimble_ln_expr *idx[2] = {cp_i(c, s->d), j};
  return cp_value(c, s->n->in[i], idx);
}

/* Column of gate q of unit j. */
static nimble_ln_expr *gate_col(cp_ctx *c, const scan *s, nimble_ln_expr *j, int q) {
  return cp_add(c, cp_i(c, q * s->H), j);
}

/* xw[ti, b, d, gate q of unit j]. */
static nimble_ln_expr *xw_at(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, int q) {
  return nimble_ln_load(A_, s->xw, xw_index(c, s, s->ti, b, gate_col(c, s, j, q)));
}

/* Whether batch entry b takes step t: t < lens[b] (NULL: no lengths,
 * every entry takes every step). */
static nimble_ln_expr *active(cp_ctx *c, const scan *s, nimble_ln_expr *b) {
  if (!s->lens) return NULL;
  nimble_ln_expr *idx[1] = {b};
  return bin(c, NIMBLE_LN_LT, s->t, cp_value(c, s->lens, idx));
}

/* y[ti, d, b, j] = hn, or 0 for an entry past its length (which keeps its
 * h: its last is read back from y). */
static nimble_ln_stmt *h_store(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, nimble_ln_expr *hn) {
  nimble_ln_expr *on = active(c, s, b);
  if (on) hn = nimble_ln_select(A_, on, hn, nimble_ln_f32(A_, 0));
  return nimble_ln_store(A_, s->y, y_index(c, s, s->ti, b, j), hn);
}

/* h(b, p): the previous step's h as the own loops read it. */
typedef nimble_ln_expr *(*h_at_fn)(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p);

static nimble_ln_expr *h_initial(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  return in_dbj(c, s, 2, b, p);
}

/* Step t's previous time index (after ti when reversed). */
static nimble_ln_expr *prev_ti(cp_ctx *c, const scan *s) {
  return s->reverse ? cp_add(c, s->ti, cp_i(c, 1)) : cp_sub(c, s->ti, cp_i(c, 1));
}

static nimble_ln_expr *h_previous(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  return nimble_ln_load(A_, s->y, y_index(c, s, prev_ti(c, s), b, p));
}

/* The last step's h: y at its time index (0 reversed, else T - 1; with
 * lengths, entry b's last, min(lens[b], T) - 1, or h0 when it took no
 * step). Only when T > 0. */
static nimble_ln_expr *h_last(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  nimble_ln_expr *last = s->reverse ? cp_i(c, 0) : cp_sub(c, s->T, cp_i(c, 1));
  if (!s->lens) return nimble_ln_load(A_, s->y, y_index(c, s, last, b, p));
  nimble_ln_expr *idx[1] = {b};
  nimble_ln_expr *t = cp_min(c, cp_sub(c, cp_value(c, s->lens, idx), cp_i(c, 1)), last);
  return nimble_ln_select(A_, bin(c, NIMBLE_LN_GE, t, cp_i(c, 0)),
                          nimble_ln_load(A_, s->y, y_index(c, s, cp_max(c, t, cp_i(c, 0)), b, p)),
                          h_initial(c, s, b, p));
}

static nimble_ln_expr *c_initial(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *p) {
  return in_dbj(c, s, s->ci->c0_in, b, p);
}

/* out[off + b * H + j] = value(b, j) over [B, H]. */
static nimble_ln_stmt *fill_bh(cp_ctx *c, const scan *s, nimble_ln_param *out, nimble_ln_expr *off, h_at_fn value) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *at = cp_add(c, off, cp_add(c, cp_mul(c, b, Hc(c, s)), j));
  nimble_ln_stmt *st = cp_for(c, jv, Hc(c, s), NIMBLE_LN_SERIAL, 0, nimble_ln_store(A_, out, at, value(c, s, b, j)));
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, st);
}

/* A loop over the batch and (vectorized) the units around body(b, j). */
static nimble_ln_stmt *units_loop(cp_ctx *c, const scan *s, nimble_ln_var *bv, nimble_ln_var *jv,
                                  nimble_ln_stmt *body) {
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  body = cp_for(c, jv, Hc(c, s), vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw, body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, body);
}

/* g[:, c0 : c0 + n] (g at g_off, [B, gates*H]) = A (B x H at a + a_off)
 * times this direction's r columns [c0, c0 + n). */
static nimble_ln_stmt *step_product(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_expr *g_off,
                                    nimble_ln_param *a, nimble_ln_expr *a_off, int64_t c0, int64_t n) {
  nimble_ln_sgemm_desc_t d;
  memset(&d, 0, sizeof d);
  d.m = s->B;
  d.n = cp_i(c, n);
  d.k = Hc(c, s);
  d.alpha = 1.0f;
  d.beta = 0.0f;
  d.a = a;
  d.a_offset = a_off;
  d.lda = Hc(c, s);
  d.b = s->r;
  d.b_offset = cp_i(c, s->d * s->H * s->ci->gates * s->H + c0);
  d.ldb = s->G;
  d.c = g;
  d.c_offset = cp_add(c, g_off, cp_i(c, c0));
  d.ldc = s->G;
  return nimble_ln_sgemm(A_, &d);
}

/* sum over p of h(b, p) * r[d, p, col] into acc (h from hbuf [B, H] at
 * off when hbuf is given). */
static nimble_ln_stmt *dot_into(cp_ctx *c, const scan *s, nimble_ln_var *acc, nimble_ln_expr *b, nimble_ln_expr *col,
                                h_at_fn h_at, nimble_ln_param *hbuf, nimble_ln_expr *off) {
  nimble_ln_var *pv = cp_var(c, "p", NIMBLE_LN_I64);
  nimble_ln_expr *p = ref(c, pv);
  nimble_ln_expr *hp =
      hbuf ? nimble_ln_load(A_, hbuf, cp_add(c, off, cp_add(c, cp_mul(c, b, Hc(c, s)), p))) : h_at(c, s, b, p);
  nimble_ln_expr *ri = cp_add(c, cp_mul(c, cp_add(c, cp_i(c, s->d * s->H), p), s->G), col);
  nimble_ln_expr *w = nimble_ln_load(A_, s->r, ri);
  return cp_for(c, pv, Hc(c, s), NIMBLE_LN_SERIAL, 0,
                nimble_ln_assign(A_, acc, bin(c, NIMBLE_LN_ADD, ref(c, acc), bin(c, NIMBLE_LN_MUL, hp, w))));
}

/* ---- LSTM ------------------------------------------------------------------------- */

/* The new c and h of unit j of batch entry b from its four gates'
 * pre-activations (xw's plus the product's), stored into the c output and
 * y[ti]; with peepholes, i and f see the previous c, o the new one. An
 * entry past its length keeps its c and gets 0 in y. */
static nimble_ln_stmt *lstm_update(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j,
                                   nimble_ln_expr *const *pre) {
  nimble_ln_expr *ci = state_index(c, s, b, j);
  nimble_ln_var *c1 = cp_var(c, "c1", NIMBLE_LN_F32), *c2 = cp_var(c, "c2", NIMBLE_LN_F32);
  nimble_ln_expr *g[3] = {pre[0], pre[1], pre[2]}; /* i, o, f */
  if (s->n->n_in > s->ci->peep_in)
    for (int q = 0; q < 3; q++) {
      nimble_ln_expr *pq = in_dj(c, s, s->ci->peep_in, cp_add(c, cp_i(c, q * s->H), j));
      g[q] = bin(c, NIMBLE_LN_ADD, g[q], bin(c, NIMBLE_LN_MUL, pq, ref(c, q == 1 ? c2 : c1)));
    }
  nimble_ln_expr *gi = un(c, NIMBLE_LN_SIGMOID, g[0]), *go = un(c, NIMBLE_LN_SIGMOID, g[1]),
                 *gf = un(c, NIMBLE_LN_SIGMOID, g[2]), *gu = un(c, NIMBLE_LN_TANH, pre[3]);
  nimble_ln_expr *cn = bin(c, NIMBLE_LN_ADD, bin(c, NIMBLE_LN_MUL, gf, ref(c, c1)), bin(c, NIMBLE_LN_MUL, gi, gu));
  nimble_ln_expr *cv = ref(c, c2), *hv = bin(c, NIMBLE_LN_MUL, go, un(c, NIMBLE_LN_TANH, ref(c, c2)));
  nimble_ln_expr *on = active(c, s, b);
  if (on) cv = nimble_ln_select(A_, on, cv, ref(c, c1));
  nimble_ln_stmt *st[2] = {nimble_ln_store(A_, s->cy, ci, cv), h_store(c, s, b, j, hv)};
  return nimble_ln_let(A_, c1, nimble_ln_load(A_, s->cy, ci), nimble_ln_let(A_, c2, cn, nimble_ln_seq(A_, st, 2)));
}

/* The sgemm path's step: h (at a + a_off) times r into the products g (at
 * g_off), then every unit's update. */
static nimble_ln_stmt *lstm_fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_expr *g_off,
                                      nimble_ln_param *a, nimble_ln_expr *a_off) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *pre[4];
  for (int q = 0; q < 4; q++) {
    nimble_ln_expr *gi = cp_add(c, g_off, cp_add(c, cp_mul(c, b, s->G), gate_col(c, s, j, q)));
    pre[q] = bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, q), nimble_ln_load(A_, g, gi));
  }
  return nimble_ln_seq2(A_, step_product(c, s, g, g_off, a, a_off, 0, 4 * s->H),
                        units_loop(c, s, bv, jv, lstm_update(c, s, b, j, pre)));
}

/* The own step (no sgemm): per unit, four dot products of h with r's
 * columns. */
static nimble_ln_stmt *lstm_own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_var *acc[4];
  nimble_ln_stmt *dots[5];
  nimble_ln_expr *pre[4];
  for (int q = 0; q < 4; q++) {
    acc[q] = cp_var(c, "acc", NIMBLE_LN_F32);
    dots[q] = dot_into(c, s, acc[q], b, gate_col(c, s, j, q), h_at, NULL, NULL);
    pre[q] = bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, q), ref(c, acc[q]));
  }
  dots[4] = lstm_update(c, s, b, j, pre);
  nimble_ln_stmt *body = nimble_ln_seq(A_, dots, 5);
  for (int q = 3; q >= 0; q--) body = nimble_ln_decl(A_, acc[q], nimble_ln_f32(A_, 0), body);
  body = cp_for(c, jv, Hc(c, s), NIMBLE_LN_SERIAL, 0, body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, body);
}

/* ---- GRU -------------------------------------------------------------------------- */

/* The GRU's new h, (1 - z) * hh + z * hp, stored by h_store. */
static nimble_ln_stmt *gru_store(cp_ctx *c, const scan *s, nimble_ln_expr *b, nimble_ln_expr *j, nimble_ln_expr *z,
                                 nimble_ln_expr *hh, nimble_ln_expr *hp) {
  nimble_ln_var *hv = cp_var(c, "hh", NIMBLE_LN_F32);
  nimble_ln_expr *hn = bin(c, NIMBLE_LN_ADD, ref(c, hv), bin(c, NIMBLE_LN_MUL, z, bin(c, NIMBLE_LN_SUB, hp, ref(c, hv))));
  return nimble_ln_let(A_, hv, hh, h_store(c, s, b, j, hn));
}

static nimble_ln_expr *rbh_at(cp_ctx *c, const scan *s, nimble_ln_expr *j) { return in_dj(c, s, s->ci->rbh_in, j); }

/* The sgemm path's step, the previous h at a + a_off; g (at g_off): the
 * products [B, 3H], h0 after them at B*3H, r * h at B*4H.
 * linear_before_reset: one product h r, then every unit. Otherwise h r
 * for z and r, the units' z (kept in g) and r * h, then (r * h) r_h, then
 * every unit. */
static nimble_ln_stmt *gru_fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_expr *g_off,
                                     nimble_ln_param *a, nimble_ln_expr *a_off) {
  int64_t H = s->H;
  bool lbr = cp_attr_int(s->n, "linear_before_reset") != 0;
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *hrow = cp_add(c, cp_mul(c, b, Hc(c, s)), j);
  nimble_ln_expr *hp = nimble_ln_load(A_, a, cp_add(c, a_off, hrow));
  nimble_ln_expr *grow = cp_add(c, g_off, cp_mul(c, b, s->G));
  nimble_ln_expr *gq[3];
  for (int q = 0; q < 3; q++) gq[q] = nimble_ln_load(A_, g, cp_add(c, grow, gate_col(c, s, j, q)));
  nimble_ln_expr *z = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), gq[0]));
  nimble_ln_expr *rr = un(c, NIMBLE_LN_SIGMOID, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 1), gq[1]));
  if (lbr) {
    nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 2),
                                                   bin(c, NIMBLE_LN_MUL, rr, bin(c, NIMBLE_LN_ADD, gq[2], rbh_at(c, s, j)))));
    return nimble_ln_seq2(A_, step_product(c, s, g, g_off, a, a_off, 0, 3 * H),
                          units_loop(c, s, bv, jv, gru_store(c, s, b, j, z, hh, hp)));
  }
  nimble_ln_expr *rh_off = cp_add(c, g_off, cp_mul(c, s->B, cp_i(c, 4 * H)));
  nimble_ln_stmt *gates[2] = {nimble_ln_store(A_, g, cp_add(c, grow, j), z),
                              nimble_ln_store(A_, g, cp_add(c, rh_off, hrow), bin(c, NIMBLE_LN_MUL, rr, hp))};
  nimble_ln_var *bv2 = cp_var(c, "b", NIMBLE_LN_I64), *jv2 = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b2 = ref(c, bv2), *j2 = ref(c, jv2);
  nimble_ln_expr *grow2 = cp_add(c, g_off, cp_mul(c, b2, s->G));
  nimble_ln_expr *hp2 = nimble_ln_load(A_, a, cp_add(c, a_off, cp_add(c, cp_mul(c, b2, Hc(c, s)), j2)));
  nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH,
                          bin(c, NIMBLE_LN_ADD, xw_at(c, s, b2, j2, 2),
                              bin(c, NIMBLE_LN_ADD, nimble_ln_load(A_, g, cp_add(c, grow2, gate_col(c, s, j2, 2))),
                                  rbh_at(c, s, j2))));
  nimble_ln_expr *z2 = nimble_ln_load(A_, g, cp_add(c, grow2, j2));
  nimble_ln_stmt *st[4] = {step_product(c, s, g, g_off, a, a_off, 0, 2 * H),
                           units_loop(c, s, bv, jv, nimble_ln_seq(A_, gates, 2)),
                           step_product(c, s, g, g_off, g, rh_off, 2 * H, H),
                           units_loop(c, s, bv2, jv2, gru_store(c, s, b2, j2, z2, hh, hp2))};
  return nimble_ln_seq(A_, st, 4);
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
  int nq = lbr ? 3 : 2;
  nimble_ln_stmt *dots[4];
  for (int q = 0; q < nq; q++) dots[q] = dot_into(c, s, acc[q], b, gate_col(c, s, j, q), h_at, NULL, NULL);
  if (lbr) {
    nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 2),
                                                   bin(c, NIMBLE_LN_MUL, rr, bin(c, NIMBLE_LN_ADD, ref(c, acc[2]), rbh_at(c, s, j)))));
    dots[nq] = gru_store(c, s, b, j, z, hh, hp);
  } else {
    nimble_ln_stmt *keep[2] = {nimble_ln_store(A_, s->y, y_index(c, s, s->ti, b, j), z),
                               nimble_ln_store(A_, s->hy, state_index(c, s, b, j), bin(c, NIMBLE_LN_MUL, rr, hp))};
    dots[nq] = nimble_ln_seq(A_, keep, 2);
  }
  nimble_ln_stmt *pass1 = nimble_ln_seq(A_, dots, (size_t)nq + 1);
  for (int q = nq - 1; q >= 0; q--) pass1 = nimble_ln_decl(A_, acc[q], nimble_ln_f32(A_, 0), pass1);
  pass1 = cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv, Hc(c, s), NIMBLE_LN_SERIAL, 0, pass1));
  if (lbr) return pass1;
  nimble_ln_var *bv2 = cp_var(c, "b", NIMBLE_LN_I64), *jv2 = cp_var(c, "j", NIMBLE_LN_I64), *a2 = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *b2 = ref(c, bv2), *j2 = ref(c, jv2);
  nimble_ln_expr *hh = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b2, j2, 2),
                                                 bin(c, NIMBLE_LN_ADD, ref(c, a2), rbh_at(c, s, j2))));
  nimble_ln_expr *hoff = cp_mul(c, cp_mul(c, cp_i(c, s->d), s->B), Hc(c, s));
  nimble_ln_stmt *pass2 =
      nimble_ln_seq2(A_, dot_into(c, s, a2, b2, gate_col(c, s, j2, 2), h_at, s->hy, hoff),
                     gru_store(c, s, b2, j2, nimble_ln_load(A_, s->y, y_index(c, s, s->ti, b2, j2)), hh,
                               h_at(c, s, b2, j2)));
  pass2 = nimble_ln_decl(A_, a2, nimble_ln_f32(A_, 0), pass2);
  pass2 = cp_for(c, bv2, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv2, Hc(c, s), NIMBLE_LN_SERIAL, 0, pass2));
  return nimble_ln_seq2(A_, pass1, pass2);
}

/* ---- RNN -------------------------------------------------------------------------- */

/* h' = tanh(xw + h r): one product a step (fast) or a dot product per
 * unit (own). */
static nimble_ln_stmt *rnn_fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_expr *g_off,
                                     nimble_ln_param *a, nimble_ln_expr *a_off) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *gv = nimble_ln_load(A_, g, cp_add(c, g_off, cp_add(c, cp_mul(c, b, s->G), j)));
  nimble_ln_expr *hn = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), gv));
  return nimble_ln_seq2(A_, step_product(c, s, g, g_off, a, a_off, 0, s->H),
                        units_loop(c, s, bv, jv, h_store(c, s, b, j, hn)));
}

static nimble_ln_stmt *rnn_own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  nimble_ln_var *bv = cp_var(c, "b", NIMBLE_LN_I64), *jv = cp_var(c, "j", NIMBLE_LN_I64), *acc = cp_var(c, "acc", NIMBLE_LN_F32);
  nimble_ln_expr *b = ref(c, bv), *j = ref(c, jv);
  nimble_ln_expr *hn = un(c, NIMBLE_LN_TANH, bin(c, NIMBLE_LN_ADD, xw_at(c, s, b, j, 0), ref(c, acc)));
  nimble_ln_stmt *body = nimble_ln_seq2(A_, dot_into(c, s, acc, b, j, h_at, NULL, NULL), h_store(c, s, b, j, hn));
  body = nimble_ln_decl(A_, acc, nimble_ln_f32(A_, 0), body);
  return cp_for(c, bv, s->B, NIMBLE_LN_SERIAL, 0, cp_for(c, jv, Hc(c, s), NIMBLE_LN_SERIAL, 0, body));
}

/* ---- The kernel ----------------------------------------------------------------------- */

static nimble_ln_stmt *fast_step(cp_ctx *c, const scan *s, nimble_ln_param *g, nimble_ln_expr *g_off,
                                 nimble_ln_param *a, nimble_ln_expr *a_off) {
  switch (s->kind) {
  case CELL_LSTM: return lstm_fast_step(c, s, g, g_off, a, a_off);
  case CELL_GRU: return gru_fast_step(c, s, g, g_off, a, a_off);
  default: return rnn_fast_step(c, s, g, g_off, a, a_off);
  }
}

static nimble_ln_stmt *own_step(cp_ctx *c, const scan *s, h_at_fn h_at) {
  switch (s->kind) {
  case CELL_LSTM: return lstm_own_step(c, s, h_at);
  case CELL_GRU: return gru_own_step(c, s, h_at);
  default: return rnn_own_step(c, s, h_at);
  }
}

/* Direction s->d's whole recurrence: c0 into the c output (LSTM), the
 * steps (through sgemm when the runtime has it: scratch g at this
 * direction's part, the products [B, gates*H], h0 [B, H] and a row [B, H]
 * for the GRU's r * h), then the last h (h0 when T is 0). */
static nimble_ln_stmt *direction(cp_ctx *c, scan *s, nimble_ln_param *g) {
  nimble_ln_var *tv = cp_var(c, "t", NIMBLE_LN_I64), *tiv = cp_var(c, "ti", NIMBLE_LN_I64);
  s->t = ref(c, tv);
  s->ti = ref(c, tiv);
  nimble_ln_expr *ti_val = s->reverse ? cp_sub(c, cp_sub(c, s->T, cp_i(c, 1)), s->t) : s->t;
  nimble_ln_expr *first = bin(c, NIMBLE_LN_EQ, s->t, cp_i(c, 0));

  /* The own loops: step 0 reads h0, the others y's previous row. */
  nimble_ln_stmt *own = nimble_ln_if(A_, first, own_step(c, s, h_initial), own_step(c, s, h_previous));
  own = cp_for(c, tv, s->T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, own));
  nimble_ln_stmt *steps = own;
  if (g) {
    nimble_ln_expr *g_off = cp_mul(c, cp_mul(c, cp_i(c, s->d), s->B), cp_i(c, (s->ci->gates + 2) * s->H));
    nimble_ln_expr *h0at = cp_add(c, g_off, cp_mul(c, s->B, s->G));
    nimble_ln_expr *prev = cp_mul(c, y_row(c, s, prev_ti(c, s)), Hc(c, s));
    nimble_ln_stmt *step =
        nimble_ln_if(A_, first, fast_step(c, s, g, g_off, g, h0at), fast_step(c, s, g, g_off, s->y, prev));
    nimble_ln_stmt *fast = cp_for(c, tv, s->T, NIMBLE_LN_SERIAL, 0, nimble_ln_let(A_, tiv, ti_val, step));
    fast = nimble_ln_seq2(A_, fill_bh(c, s, g, h0at, h_initial), fast);
    nimble_ln_expr *cond = bin(c, NIMBLE_LN_AND, nimble_ln_has_sgemm(A_), bin(c, NIMBLE_LN_GT, s->B, cp_i(c, 0)));
    steps = nimble_ln_if(A_, cond, fast, own);
  }
  nimble_ln_expr *soff = cp_mul(c, cp_mul(c, cp_i(c, s->d), s->B), Hc(c, s));
  nimble_ln_stmt *hT = nimble_ln_if(A_, bin(c, NIMBLE_LN_GT, s->T, cp_i(c, 0)), fill_bh(c, s, s->hy, soff, h_last),
                                    fill_bh(c, s, s->hy, soff, h_initial));
  nimble_ln_stmt *all[3];
  size_t n = 0;
  if (s->kind == CELL_LSTM) all[n++] = fill_bh(c, s, s->cy, soff, c_initial);
  all[n++] = steps;
  all[n++] = hT;
  return nimble_ln_seq(A_, all, n);
}

/* One direction, or both as two parallel tasks (forward, then reversed). */
static nimble_ln_stmt *emit_scan(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs, nimble_ln_param *const *shapes) {
  (void)shapes;
  cell_kind kind = kind_of(n);
  const cell_info *ci = &kCells[kind];
  cp_node *xw = n->in[0], *r = n->in[1];
  if (xw->kind != CP_PARAM || !xw->param || r->kind != CP_PARAM || !r->param)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %s's xw and r must be tensors", c->prim, ci->op);
  scan s;
  memset(&s, 0, sizeof s);
  s.n = n;
  s.ci = ci;
  s.kind = kind;
  s.y = outs[0];
  s.hy = outs[1];
  s.cy = kind == CELL_LSTM ? outs[2] : NULL;
  s.xw = xw->param;
  s.r = r->param;
  cp_const_i(n->ext[3], &s.H);
  cp_const_i(n->ext[1], &s.D);
  s.T = xw->ext[0];
  s.B = n->ext[2];
  s.G = cp_i(c, ci->gates * s.H);
  s.lens = n->n_in > ci->lens_in ? n->in[ci->lens_in] : NULL;
  nimble_ln_param *g = NULL;
  if (c->opt.use_sgemm) {
    nimble_ln_expr *per = cp_mul(c, s.B, cp_i(c, (ci->gates + 2) * s.H));
    g = nimble_ln_kernel_add_scratch(c->k, "gates", NIMBLE_LN_F32, cp_mul(c, cp_i(c, s.D), per));
    if (!g) return NULL;
  }
  if (s.D == 1) {
    s.reverse = cp_attr_int(n, "reverse") != 0;
    nimble_ln_stmt *one = direction(c, &s, g);
    return c->err ? NULL : one;
  }
  scan back = s;
  back.d = 1;
  back.reverse = true;
  nimble_ln_stmt *fwd = direction(c, &s, g), *bwd = direction(c, &back, g);
  nimble_ln_var *dv = cp_var(c, "d", NIMBLE_LN_I64);
  nimble_ln_stmt *both = nimble_ln_for(A_, dv, cp_i(c, 0), cp_i(c, 2), NIMBLE_LN_SERIAL, 0,
                                       nimble_ln_if(A_, bin(c, NIMBLE_LN_EQ, ref(c, dv), cp_i(c, 0)), fwd, bwd));
  if (c->opt.parallel && both) both = nimble_ln_chunk(A_, both, cp_i(c, 1));
  return c->err ? NULL : both;
}

const cp_def cp_defs_recurrent[] = {
    {"lstm_scan", CP_ANCHOR_ROW, shape_scan, NULL, NULL, NULL, outputs_scan, emit_scan},
    {"gru_scan", CP_ANCHOR_ROW, shape_scan, NULL, NULL, NULL, outputs_scan, emit_scan},
    {"rnn_scan", CP_ANCHOR_ROW, shape_scan, NULL, NULL, NULL, outputs_scan, emit_scan},
};
const int cp_defs_recurrent_count = (int)(sizeof cp_defs_recurrent / sizeof cp_defs_recurrent[0]);
