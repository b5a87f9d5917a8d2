/* unique_all (ONNX Unique): the distinct elements of the flattened input,
 * or the distinct slices along `axis`, with (values, first indices,
 * inverse indices, counts), sorted ascending (slices lexicographically,
 * as numpy.unique) or in order of first occurrence. An upper-bound
 * result: every output but the inverse indices is allocated for "all
 * distinct" and written compactly; the real shapes go to the shape
 * outputs.
 *
 * One serial kernel, O(M log M * S) for M slices of S elements: a stable
 * bottom-up merge sort of the slice indices (scratch P, Q), then one scan
 * that groups equal neighbours (the first of a group is its first
 * occurrence, by stability), and for sorted=0 a renumbering of the groups
 * by first occurrence. Values compare with < and == (NaNs are each
 * distinct); bool elements compare as 0 and 1. */
#include <string.h>

#include "compute_internal.h"

#define A_ c->A
#define BIN(op, a, b) nimble_ln_binary(A_, NIMBLE_LN_##op, (a), (b))
#define SEL(c_, a, b) nimble_ln_select(A_, (c_), (a), (b))
#define REF(v) nimble_ln_ref(A_, (v))
#define LD(p, i) nimble_ln_load(A_, (p), (i))
#define ST(p, i, v) nimble_ln_store(A_, (p), (i), (v))
#define SET(v, e) nimble_ln_assign(A_, (v), (e))
#define INC(v) SET(v, cp_add(c, REF(v), cp_i(c, 1)))

typedef struct uq_geom {
  int axis; /* -1: flattened */
  nimble_ln_expr *M, *S, *outer, *inner; /* slices, slice size, extents before and after the axis */
} uq_geom;

static bool geometry(cp_ctx *c, cp_node *n, uq_geom *g) {
  cp_node *x = n->in[0];
  g->axis = -1;
  if (cp_attr_int(n, "has_axis") && !cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &g->axis)) return false;
  if (g->axis < 0) {
    g->M = cp_product(c, x->ext, 0, x->rank);
    g->outer = g->inner = g->S = cp_i(c, 1);
  } else {
    g->M = x->ext[g->axis];
    g->outer = cp_product(c, x->ext, 0, g->axis);
    g->inner = cp_product(c, x->ext, g->axis + 1, x->rank);
    g->S = cp_mul(c, g->outer, g->inner);
  }
  return true;
}

static nimble_status_t shape_unique(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  n->type = x->type;
  n->dtype = x->dtype;
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  return nimble_ok();
}

static bool outputs_unique(cp_ctx *c, cp_node *n, cp_outputs *o) {
  cp_node *x = n->in[0];
  uq_geom g;
  if (!geometry(c, n, &g)) return false;
  o->n = 4;
  o->upper = true;
  o->type[0] = x->type;
  if (g.axis < 0) {
    o->rank[0] = 1;
    o->ext[0][0] = g.M;
  } else {
    o->rank[0] = x->rank;
    for (int a = 0; a < x->rank; a++) o->ext[0][a] = x->ext[a];
  }
  for (int k = 1; k < 4; k++) {
    o->type[k] = NIMBLE_LN_I64;
    o->rank[k] = 1;
    o->ext[k][0] = g.M;
  }
  return true;
}

/* Element e of slice i, as a comparable value. */
static nimble_ln_expr *elem(cp_ctx *c, cp_node *x, const uq_geom *g, nimble_ln_expr *i, nimble_ln_expr *e) {
  nimble_ln_expr *flat = i;
  if (g->axis >= 0) {
    nimble_ln_expr *o = cp_div(c, e, g->inner), *q = cp_rem(c, e, g->inner);
    flat = cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, o, g->M), i), g->inner), q);
  }
  nimble_ln_expr *v = cp_value_flat(c, x, flat);
  return v && v->type == NIMBLE_LN_BOOL ? nimble_ln_cast(A_, NIMBLE_LN_I64, v) : v;
}

/* r = -1, 0 or 1 as slice a is below, equal to or above slice b. */
static nimble_ln_stmt *compare(cp_ctx *c, cp_node *x, const uq_geom *g, nimble_ln_var *r, nimble_ln_expr *a,
                               nimble_ln_expr *b) {
  nimble_ln_var *e = cp_var(c, "e", NIMBLE_LN_I64);
  nimble_ln_expr *va = elem(c, x, g, a, REF(e)), *vb = elem(c, x, g, b, REF(e));
  if (!va || !vb) return NULL;
  nimble_ln_expr *cmp = SEL(BIN(LT, va, vb), cp_i(c, -1), SEL(BIN(LT, vb, va), cp_i(c, 1), cp_i(c, 0)));
  nimble_ln_stmt *step = nimble_ln_if(A_, BIN(EQ, REF(r), cp_i(c, 0)), SET(r, cmp), NULL);
  return nimble_ln_seq2(A_, SET(r, cp_i(c, 0)), cp_for(c, e, g->S, NIMBLE_LN_SERIAL, 0, step));
}

static nimble_ln_stmt *emit_unique(cp_ctx *c, cp_node *n, nimble_ln_param *const *outs,
                                   nimble_ln_param *const *shapes) {
  cp_node *x = n->in[0];
  uq_geom g;
  if (!geometry(c, n, &g)) return NULL;
  bool sorted = cp_attr_int(n, "sorted") != 0;
  nimble_ln_expr *M = g.M;
  /* Scratch: P, Q (the permutation, merge buffer; later group firsts),
   * C (counts per group), F (group + 1 at each first occurrence). */
  nimble_ln_expr *m1 = cp_max(c, M, cp_i(c, 1));
  nimble_ln_param *scr = nimble_ln_kernel_add_scratch(c->k, "unique_scratch", NIMBLE_LN_I64, cp_mul(c, m1, cp_i(c, 4)));
  if (!scr) return NULL;
  nimble_ln_expr *offP = cp_i(c, 0), *offQ = m1, *offC = cp_mul(c, m1, cp_i(c, 2)), *offF = cp_mul(c, m1, cp_i(c, 3));
#define P_(i) cp_add(c, offP, (i))
#define Q_(i) cp_add(c, offQ, (i))
#define C_(i) cp_add(c, offC, (i))
#define F_(i) cp_add(c, offF, (i))
  nimble_ln_stmt *st[16];
  int ns = 0;
  nimble_ln_var *i = cp_var(c, "i", NIMBLE_LN_I64);
  st[ns++] = cp_for(c, i, M, NIMBLE_LN_SERIAL, 0, ST(scr, P_(REF(i)), REF(i)));

  /* Stable bottom-up merge sort of P by slice, runs of width w. */
  nimble_ln_var *w = cp_var(c, "width", NIMBLE_LN_I64), *pass = cp_var(c, "pass", NIMBLE_LN_I64);
  nimble_ln_var *t = cp_var(c, "run", NIMBLE_LN_I64), *k = cp_var(c, "k", NIMBLE_LN_I64);
  nimble_ln_var *li = cp_var(c, "li", NIMBLE_LN_I64), *ri = cp_var(c, "ri", NIMBLE_LN_I64);
  nimble_ln_var *lo = cp_var(c, "lo", NIMBLE_LN_I64), *mid = cp_var(c, "mid", NIMBLE_LN_I64);
  nimble_ln_var *hi = cp_var(c, "hi", NIMBLE_LN_I64), *left = cp_var(c, "left", NIMBLE_LN_I64);
  nimble_ln_var *r = cp_var(c, "cmp", NIMBLE_LN_I64);
  nimble_ln_expr *w2 = cp_mul(c, REF(w), cp_i(c, 2));
  nimble_ln_stmt *cmp = compare(c, x, &g, r, LD(scr, P_(REF(li))), LD(scr, P_(REF(ri))));
  if (!cmp) return NULL;
  /* Left when the right run is spent, or its head is not below the left's. */
  nimble_ln_stmt *choose = nimble_ln_if(
      A_, BIN(LT, REF(li), REF(mid)),
      nimble_ln_if(A_, BIN(LT, REF(ri), REF(hi)),
                   nimble_ln_seq2(A_, cmp, SET(left, nimble_ln_cast(A_, NIMBLE_LN_I64, BIN(LE, REF(r), cp_i(c, 0))))),
                   SET(left, cp_i(c, 1))),
      SET(left, cp_i(c, 0)));
  nimble_ln_stmt *take = nimble_ln_if(A_, BIN(NE, REF(left), cp_i(c, 0)),
                                      nimble_ln_seq2(A_, ST(scr, Q_(REF(k)), LD(scr, P_(REF(li)))), INC(li)),
                                      nimble_ln_seq2(A_, ST(scr, Q_(REF(k)), LD(scr, P_(REF(ri)))), INC(ri)));
  nimble_ln_stmt *merge = nimble_ln_for(A_, k, REF(lo), REF(hi), NIMBLE_LN_SERIAL, 0, nimble_ln_seq2(A_, choose, take));
  merge = nimble_ln_decl(
      A_, li, REF(lo),
      nimble_ln_decl(A_, ri, REF(mid), nimble_ln_decl(A_, left, cp_i(c, 0), nimble_ln_decl(A_, r, cp_i(c, 0), merge))));
  merge = nimble_ln_let(A_, hi, cp_min(c, cp_add(c, REF(lo), w2), M), merge);
  merge = nimble_ln_let(A_, mid, cp_min(c, cp_add(c, REF(lo), REF(w)), M), merge);
  merge = nimble_ln_let(A_, lo, cp_mul(c, REF(t), w2), merge);
  nimble_ln_expr *runs = cp_div(c, cp_add(c, M, cp_sub(c, w2, cp_i(c, 1))), w2);
  nimble_ln_var *j = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_stmt *copy = cp_for(c, j, M, NIMBLE_LN_SERIAL, 0, ST(scr, P_(REF(j)), LD(scr, Q_(REF(j)))));
  nimble_ln_stmt *one_pass = nimble_ln_seq2(A_, cp_for(c, t, runs, NIMBLE_LN_SERIAL, 0, merge), copy);
  one_pass = nimble_ln_if(A_, BIN(LT, REF(w), M), nimble_ln_seq2(A_, one_pass, SET(w, w2)), NULL);
  /* 62 passes cover any M below 2^62. */
  st[ns++] = nimble_ln_decl(A_, w, cp_i(c, 1), cp_for(c, pass, cp_i(c, 62), NIMBLE_LN_SERIAL, 0, one_pass));

  /* Groups: a new one wherever a sorted slice differs from the previous. */
  nimble_ln_param *oy = outs[0], *oidx = outs[1], *oinv = outs[2], *ocnt = outs[3];
  nimble_ln_var *p = cp_var(c, "p", NIMBLE_LN_I64), *K = cp_var(c, "groups", NIMBLE_LN_I64);
  nimble_ln_var *r2 = cp_var(c, "cmp", NIMBLE_LN_I64);
  nimble_ln_expr *pp = REF(p), *prev = cp_sub(c, pp, cp_i(c, 1));
  nimble_ln_stmt *cmp2 = compare(c, x, &g, r2, LD(scr, P_(prev)), LD(scr, P_(pp)));
  if (!cmp2) return NULL;
  nimble_ln_stmt *newg[3] = {INC(K), ST(scr, Q_(cp_sub(c, REF(K), cp_i(c, 1))), LD(scr, P_(pp))),
                             ST(scr, C_(cp_sub(c, REF(K), cp_i(c, 1))), cp_i(c, 0))};
  nimble_ln_stmt *grp = nimble_ln_if(
      A_, BIN(EQ, pp, cp_i(c, 0)), nimble_ln_seq(A_, newg, 3),
      nimble_ln_seq2(A_, cmp2, nimble_ln_if(A_, BIN(NE, REF(r2), cp_i(c, 0)), nimble_ln_seq(A_, newg, 3), NULL)));
  nimble_ln_expr *gcur = cp_sub(c, REF(K), cp_i(c, 1));
  nimble_ln_stmt *acc[3] = {grp, ST(scr, C_(gcur), cp_add(c, LD(scr, C_(gcur)), cp_i(c, 1))),
                            ST(oinv, LD(scr, P_(pp)), gcur)};
  nimble_ln_stmt *scan =
      nimble_ln_decl(A_, r2, cp_i(c, 0), cp_for(c, p, M, NIMBLE_LN_SERIAL, 0, nimble_ln_seq(A_, acc, 3)));

  /* The output position of group q: q, or its rank by first occurrence
   * (kept in P, free after the scan). */
  nimble_ln_var *q = cp_var(c, "q", NIMBLE_LN_I64), *pos = cp_var(c, "pos", NIMBLE_LN_I64);
  nimble_ln_stmt *renumber = NULL;
  if (!sorted) {
    nimble_ln_var *z = cp_var(c, "z", NIMBLE_LN_I64), *q2 = cp_var(c, "q", NIMBLE_LN_I64);
    nimble_ln_var *i2 = cp_var(c, "i", NIMBLE_LN_I64), *nxt = cp_var(c, "next", NIMBLE_LN_I64);
    nimble_ln_var *i3 = cp_var(c, "i", NIMBLE_LN_I64);
    nimble_ln_stmt *r3[4];
    r3[0] = cp_for(c, z, M, NIMBLE_LN_SERIAL, 0, ST(scr, F_(REF(z)), cp_i(c, 0)));
    r3[1] =
        cp_for(c, q2, REF(K), NIMBLE_LN_SERIAL, 0, ST(scr, F_(LD(scr, Q_(REF(q2)))), cp_add(c, REF(q2), cp_i(c, 1))));
    nimble_ln_expr *fi = LD(scr, F_(REF(i2)));
    r3[2] = nimble_ln_decl(
        A_, nxt, cp_i(c, 0),
        cp_for(c, i2, M, NIMBLE_LN_SERIAL, 0,
               nimble_ln_if(A_, BIN(GT, fi, cp_i(c, 0)),
                            nimble_ln_seq2(A_, ST(scr, P_(cp_sub(c, fi, cp_i(c, 1))), REF(nxt)), INC(nxt)), NULL)));
    r3[3] = cp_for(c, i3, M, NIMBLE_LN_SERIAL, 0, ST(oinv, REF(i3), LD(scr, P_(LD(oinv, REF(i3))))));
    renumber = nimble_ln_seq(A_, r3, 4);
  }
  nimble_ln_expr *first = LD(scr, Q_(REF(q)));
  nimble_ln_stmt *wr[3];
  int nw = 0;
  wr[nw++] = ST(oidx, REF(pos), first);
  wr[nw++] = ST(ocnt, REF(pos), LD(scr, C_(REF(q))));
  /* The slice itself, into Y laid out compactly as [outer, K, inner]. */
  nimble_ln_var *e = cp_var(c, "e", NIMBLE_LN_I64);
  nimble_ln_expr *ev = cp_value_flat(
      c, x,
      g.axis < 0 ? first
                 : cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, cp_div(c, REF(e), g.inner), M), first), g.inner),
                          cp_rem(c, REF(e), g.inner)));
  if (!ev) return NULL;
  nimble_ln_expr *yo =
      g.axis < 0 ? REF(pos)
                 : cp_add(c, cp_mul(c, cp_add(c, cp_mul(c, cp_div(c, REF(e), g.inner), REF(K)), REF(pos)), g.inner),
                          cp_rem(c, REF(e), g.inner));
  wr[nw++] = cp_for(c, e, g.S, NIMBLE_LN_SERIAL, 0, ST(oy, yo, ev));
  nimble_ln_stmt *write =
      cp_for(c, q, REF(K), NIMBLE_LN_SERIAL, 0,
             nimble_ln_let(A_, pos, sorted ? REF(q) : LD(scr, P_(REF(q))), nimble_ln_seq(A_, wr, nw)));
  /* Real shapes: Y with K on its axis (or [K]), indices/counts [K], inverse [M]. */
  nimble_ln_stmt *sh[CP_MAX_RANK + 3];
  int nsh = 0;
  if (g.axis < 0) {
    sh[nsh++] = ST(shapes[0], cp_i(c, 0), REF(K));
  } else {
    for (int a = 0; a < x->rank; a++) sh[nsh++] = ST(shapes[0], cp_i(c, a), a == g.axis ? REF(K) : x->ext[a]);
  }
  sh[nsh++] = ST(shapes[1], cp_i(c, 0), REF(K));
  sh[nsh++] = ST(shapes[2], cp_i(c, 0), M);
  sh[nsh++] = ST(shapes[3], cp_i(c, 0), REF(K));
  nimble_ln_stmt *tail[4];
  int nt = 0;
  tail[nt++] = scan;
  if (renumber) tail[nt++] = renumber;
  tail[nt++] = write;
  tail[nt++] = nimble_ln_seq(A_, sh, (size_t)nsh);
  st[ns++] = nimble_ln_decl(A_, K, cp_i(c, 0), nimble_ln_seq(A_, tail, (size_t)nt));
  return nimble_ln_seq(A_, st, (size_t)ns);
#undef P_
#undef Q_
#undef C_
#undef F_
}

const cp_def cp_defs_unique[] = {
    {"unique_all", CP_ANCHOR_ROW, shape_unique, NULL, NULL, NULL, outputs_unique, emit_unique},
};
const int cp_defs_unique_count = (int)(sizeof cp_defs_unique / sizeof cp_defs_unique[0]);
