/* max_pool2d_with_indices (ONNX MaxPool with its Indices output): NCHW
 * max pooling (strides, pads, dilations, ceil_mode) that also gives, per
 * output, the flat index of the maximum in the input: ((n C + c) H + h) W
 * + w, or ((n C + c) W + w) H + h with storage_order 1. The first maximum
 * in window order (rows, then columns) wins; padding is never chosen, and
 * a window that lies wholly in the padding gives -inf and index -1. Two
 * outputs (values, int64 indices), one nest, any element type. */
#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define REF(v) nimble_ln_ref(A_, (v))
#define SET(v, e) nimble_ln_assign(A_, (v), (e))

typedef struct mp_attrs {
  int64_t k[2], s[2], d[2], p[4];
  bool ceil_mode, col_major;
} mp_attrs;

static bool attrs(cp_ctx *c, cp_node *n, mp_attrs *m) {
  size_t nk, ns, np, nd;
  const int64_t *k = cp_attr_ints(n, "kernel_shape", &nk), *s = cp_attr_ints(n, "strides", &ns);
  const int64_t *p = cp_attr_ints(n, "pads", &np), *d = cp_attr_ints(n, "dilations", &nd);
  if (nk != 2 || (ns && ns != 2) || (np && np != 4) || (nd && nd != 2)) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: max_pool2d_with_indices attributes have the wrong length", c->prim);
    return false;
  }
  for (int i = 0; i < 2; i++) {
    m->k[i] = k[i];
    m->s[i] = ns ? s[i] : 1;
    m->d[i] = nd ? d[i] : 1;
    m->p[i] = np ? p[i] : 0;
    m->p[i + 2] = np ? p[i + 2] : 0;
    if (m->k[i] < 1 || m->s[i] < 1 || m->d[i] < 1 || m->p[i] < 0 || m->p[i + 2] < 0 || m->k[i] > (1 << 20) ||
        m->s[i] > (1 << 20) || m->d[i] > (1 << 20) || m->p[i] > (1 << 20) || m->p[i + 2] > (1 << 20)) {
      cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: max_pool2d_with_indices window attributes out of range", c->prim);
      return false;
    }
  }
  m->ceil_mode = cp_attr_int(n, "ceil_mode") != 0;
  m->col_major = cp_attr_int(n, "storage_order") != 0;
  return true;
}

static nimble_status_t shape_mp(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  mp_attrs m;
  if (x->rank != 4) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "max_pool2d_with_indices of rank %d", x->rank);
  if (x->type == NIMBLE_LN_BOOL) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "max_pool2d_with_indices of bool");
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = 4;
  n->ext[0] = x->ext[0];
  n->ext[1] = x->ext[1];
  if (!attrs(c, n, &m)) return nimble_ok();
  for (int i = 0; i < 2; i++) {
    nimble_ln_expr *in = x->ext[2 + i];
    nimble_ln_expr *span = cp_sub(c, cp_add(c, in, cp_i(c, m.p[i] + m.p[i + 2])), cp_i(c, (m.k[i] - 1) * m.d[i] + 1));
    cp_check(c, BIN(GE, span, cp_i(c, 0)), "max_pool2d_with_indices: the window is larger than the padded input");
    nimble_ln_expr *o;
    if (m.ceil_mode) {
      o = cp_add(c, cp_div(c, cp_add(c, span, cp_i(c, m.s[i] - 1)), cp_i(c, m.s[i])), cp_i(c, 1));
      /* A last window starting in the end padding is dropped. */
      nimble_ln_expr *drop =
          BIN(GE, cp_mul(c, cp_sub(c, o, cp_i(c, 1)), cp_i(c, m.s[i])), cp_add(c, in, cp_i(c, m.p[i])));
      o = cp_sub(c, o, nimble_ln_cast(A_, NIMBLE_LN_I64, drop));
    } else {
      o = cp_add(c, cp_div(c, span, cp_i(c, m.s[i])), cp_i(c, 1));
    }
    n->ext[2 + i] = o;
  }
  return nimble_ok();
}

static bool outputs_mp(cp_ctx *c, cp_node *n, cp_outputs *o) {
  o->n = 2;
  o->type[0] = n->type;
  o->type[1] = NIMBLE_LN_I64;
  for (int k = 0; k < 2; k++) {
    o->rank[k] = 4;
    for (int a = 0; a < 4; a++) o->ext[k][a] = n->ext[a];
  }
  return true;
}

static nimble_ln_stmt *emit_mp(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs, nimble_ln_param *const *shapes) {
  (void)shapes;
  cp_node *x = n->in[0];
  mp_attrs m;
  if (!attrs(c, n, &m)) return NULL;
  nimble_ln_var *iv[4], *kh = cp_var(c, "kh", NIMBLE_LN_I64), *kw = cp_var(c, "kw", NIMBLE_LN_I64);
  nimble_ln_expr *idx[4];
  for (int a = 0; a < 4; a++) {
    iv[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = REF(iv[a]);
  }
  nimble_ln_expr *H = x->ext[2], *W = x->ext[3];
  nimble_ln_expr *h =
      cp_add(c, cp_sub(c, cp_mul(c, idx[2], cp_i(c, m.s[0])), cp_i(c, m.p[0])), cp_mul(c, REF(kh), cp_i(c, m.d[0])));
  nimble_ln_expr *w =
      cp_add(c, cp_sub(c, cp_mul(c, idx[3], cp_i(c, m.s[1])), cp_i(c, m.p[1])), cp_mul(c, REF(kw), cp_i(c, m.d[1])));
  nimble_ln_var *hv = cp_var(c, "h", NIMBLE_LN_I64), *wv = cp_var(c, "w", NIMBLE_LN_I64);
  nimble_ln_var *best = cp_var(c, "best", x->type), *bi = cp_var(c, "best_i", NIMBLE_LN_I64);
  nimble_ln_expr *xi[4] = {idx[0], idx[1], REF(hv), REF(wv)};
  nimble_ln_expr *v = cp_value(c, x, xi);
  if (!v) return NULL;
  nimble_ln_var *vv = cp_var(c, "v", x->type);
  nimble_ln_expr *plane = cp_mul(c, cp_add(c, cp_mul(c, idx[0], x->ext[1]), idx[1]), cp_mul(c, H, W));
  nimble_ln_expr *pos =
      m.col_major ? cp_add(c, cp_mul(c, REF(wv), H), REF(hv)) : cp_add(c, cp_mul(c, REF(hv), W), REF(wv));
  nimble_ln_expr *take = BIN(OR, BIN(LT, REF(bi), cp_i(c, 0)), BIN(GT, REF(vv), REF(best)));
  nimble_ln_stmt *upd =
      nimble_ln_if(A_, take, nimble_ln_seq2(A_, SET(best, REF(vv)), SET(bi, cp_add(c, plane, pos))), NULL);
  nimble_ln_expr *inside = BIN(AND, BIN(AND, BIN(GE, REF(hv), cp_i(c, 0)), BIN(LT, REF(hv), H)),
                               BIN(AND, BIN(GE, REF(wv), cp_i(c, 0)), BIN(LT, REF(wv), W)));
  nimble_ln_stmt *tap = nimble_ln_if(A_, inside, nimble_ln_let(A_, vv, v, upd), NULL);
  tap = nimble_ln_let(A_, hv, h, nimble_ln_let(A_, wv, w, tap));
  nimble_ln_stmt *win =
      cp_for(c, kh, cp_i(c, m.k[0]), NIMBLE_LN_SERIAL, 0, cp_for(c, kw, cp_i(c, m.k[1]), NIMBLE_LN_SERIAL, 0, tap));
  nimble_ln_expr *lowest = x->type == NIMBLE_LN_F32 ? nimble_ln_f32(A_, -__builtin_inf()) : cp_const_of(c, x->type, 0);
  nimble_ln_expr *o0 = nimble_ln_flat_index(A_, outs[0], idx), *o1 = nimble_ln_flat_index(A_, outs[1], idx);
  nimble_ln_stmt *store =
      nimble_ln_seq2(A_, nimble_ln_store(A_, outs[0], o0, SEL(BIN(LT, REF(bi), cp_i(c, 0)), lowest, REF(best))),
                     nimble_ln_store(A_, outs[1], o1, REF(bi)));
  nimble_ln_stmt *elem = nimble_ln_decl(A_, best, cp_const_of(c, x->type, 0),
                                        nimble_ln_decl(A_, bi, cp_i(c, -1), nimble_ln_seq2(A_, win, store)));
  return cp_loops(c, iv, n->ext, 4, m.k[0] * m.k[1], elem);
}

const cp_def cp_defs_pool_indices[] = {
    {"max_pool2d_with_indices", CP_ANCHOR_ROW, shape_mp, NULL, NULL, NULL, outputs_mp, emit_mp},
};
const int cp_defs_pool_indices_count = (int)(sizeof cp_defs_pool_indices / sizeof cp_defs_pool_indices[0]);
