/* Control flow: If becomes an IR `if`; Loop and Scan become a recursive
 * global function over their carried values:
 *
 *   def @loop_0(%i, %max, %cond, %v..., %outer..., %acc...) -> (V..., ACC...) {
 *     if (logical_and(%cond, less(%i, %max))) {
 *       <body>;  @loop_0(add(%i, 1), %max, %cond_out, %v_out..., %outer...,
 *                         concatenate(%acc, expand_dims(%scan_out, axis=0))...)
 *     } else { (%v..., %acc...) }
 *   }
 *
 * Global functions capture nothing, so the values a body reads from outer
 * scopes (other than constants) become extra parameters. Parameters are
 * annotated with the carried values' types, symbolic dims renamed per
 * function; a dim the body changes is widened to Any and the body imported
 * again. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

#define MAX_LOOP_VALUES 256

/* Symbolic dims of one function's annotations, renamed. */
typedef struct remap {
  size_t n;
  uint32_t from[64], to[64];
} remap;

static nimble_dim_t remap_dim(imp_ctx *c, remap *r, nimble_dim_t d) {
  d = imp_resolve(c, d);
  if (d.kind != NIMBLE_DIM_VAR) return d;
  for (size_t i = 0; i < r->n; i++)
    if (r->from[i] == d.var_id) return nimble_dim_var(r->to[i], d.name);
  if (r->n == 64) return nimble_dim_any();
  r->from[r->n] = d.var_id;
  r->to[r->n] = nimble_module_fresh_var_id(c->module);
  return nimble_dim_var(r->to[r->n++], d.name);
}

static nimble_tensor_sig_t remap_sig(imp_ctx *c, remap *r, const nimble_tensor_sig_t *s) {
  nimble_tensor_sig_t o = *s;
  for (size_t i = 0; i < s->rank; i++) o.dims[i] = remap_dim(c, r, s->dims[i]);
  return o;
}

static const nimble_type *sig_type(imp_ctx *c, const nimble_tensor_sig_t *s) {
  return nimble_type_tensor(c->arena, s->dtype, s->rank, s->dims);
}

/* A parameter with an annotation, tracked with that signature. */
static nimble_status_t make_param(imp_ctx *c, const char *name, const nimble_tensor_sig_t *sig,
                                  const nimble_expr **var, imp_val **val) {
  const nimble_type *t = sig_type(c, sig);
  const char *uname = imp_unique_name(c, name);
  *var = t && uname ? nimble_ir_var(c->arena, uname, t, NULL) : NULL;
  *val = *var ? imp_val_new(c, *var, sig) : NULL;
  return *val ? nimble_ok() : NIMBLE_OOM_IN("importing");
}

/* A parameter of a value known as a set of ranks: one rank is an ordinary
 * annotated parameter; several make a Tensor[*, dt] parameter whose value
 * keeps the ranks (nodes of the body reading it are converted per rank). */
static nimble_status_t make_param_ranks(imp_ctx *c, const char *name, const imp_ranks *k, const nimble_expr **var,
                                        imp_val **val) {
  if (__builtin_popcount(k->mask) == 1) return make_param(c, name, &k->sig[__builtin_ctz(k->mask)], var, val);
  const nimble_type *t = nimble_type_unranked_tensor(c->arena, k->dtype);
  const char *uname = imp_unique_name(c, name);
  imp_ranks *keep = nimble_arena_alloc(c->arena, sizeof *keep);
  *var = t && uname && keep ? nimble_ir_var(c->arena, uname, t, NULL) : NULL;
  *val = *var ? imp_val_new(c, *var, NULL) : NULL;
  if (!*val) return NIMBLE_OOM_IN("importing");
  *keep = *k;
  (*val)->ranks = keep;
  return nimble_ok();
}

/* A value's ranks with its symbolic dims renamed. */
static void remap_ranks(imp_ctx *c, remap *r, const imp_val *v, imp_ranks *out) {
  imp_val_ranks(v, out);
  for (size_t k = 0; k <= NIMBLE_MAX_RANK; k++)
    if (out->mask & (1u << k)) out->sig[k] = remap_sig(c, r, &out->sig[k]);
}

/* Widens the carried type p so that the body's output o fits it: ranks o
 * has and p lacks are added (their symbolic dims as Any), dims that differ
 * become Any. True when p changed (the body is then imported again). */
static bool widen_carried(imp_ctx *c, imp_ranks *p, const imp_ranks *o) {
  bool changed = false;
  for (size_t r = 0; r <= NIMBLE_MAX_RANK; r++) {
    uint32_t bit = 1u << r;
    if (!(o->mask & bit)) continue;
    if (!(p->mask & bit)) {
      p->mask |= bit;
      p->sig[r] = o->sig[r];
      for (size_t d = 0; d < r; d++) {
        nimble_dim_t od = imp_resolve(c, o->sig[r].dims[d]);
        p->sig[r].dims[d] = od.kind == NIMBLE_DIM_CONST ? od : nimble_dim_any();
      }
      changed = true;
      continue;
    }
    for (size_t d = 0; d < r; d++) {
      nimble_dim_t od = imp_resolve(c, o->sig[r].dims[d]), pd = imp_resolve(c, p->sig[r].dims[d]);
      /* A symbol as well as a constant: an [n] that leaves as [2n] is no
       * longer the [n] of other values (kernels would check them equal). */
      if (pd.kind != NIMBLE_DIM_ANY && !nimble_dim_same(od, pd)) {
        p->sig[r].dims[d] = nimble_dim_any();
        changed = true;
      }
    }
  }
  return changed;
}

static nimble_tensor_sig_t scalar_sig(nimble_dtype_t dt) {
  nimble_tensor_sig_t s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  return s;
}

/* ---- If ---- */

typedef struct branch {
  imp_chain chain;
  imp_val *outs[MAX_LOOP_VALUES];
} branch;

static nimble_status_t import_branch(imp_ctx *c, const nimble_onnx_graph *g, branch *b) {
  memset(&b->chain, 0, sizeof b->chain);
  /* What the branch's relations prove about outer dims (a Squeeze binding
   * `T` to 1) holds only where it runs (as in the IR's typing of `if`). */
  nimble_subst_mark_t mark = nimble_subst_mark(c->subst);
  imp_chain *saved = c->chain;
  c->chain = &b->chain;
  nimble_status_t s = imp_scope_push(c);
  if (s) {
    c->chain = saved;
    return s;
  }
  s = imp_graph_nodes(c, g);
  const nimble_onnx_graph *saved_graph = c->graph;
  c->graph = g;
  for (size_t i = 0; !s && i < g->n_outputs; i++) {
    s = imp_lookup(c, g->outputs[i]->name, &b->outs[i]);
    if (!s && !imp_val_typed(b->outs[i]))
      s = imp_err(NIMBLE_INVALID_ARGUMENT, "output '%s' has no known type", g->outputs[i]->name);
  }
  c->graph = saved_graph;
  imp_scope_pop(c);
  c->chain = saved;
  nimble_subst_undo_dims(c->subst, mark);
  if (s) return nimble_status_annotate(s, "in subgraph '%s'", g->name);
  return nimble_ok();
}

static const nimble_expr *branch_result(imp_ctx *c, branch *b, size_t n) {
  const nimble_expr *fields[MAX_LOOP_VALUES];
  for (size_t i = 0; i < n; i++) fields[i] = b->outs[i]->expr;
  const nimble_expr *body = n == 1 ? fields[0] : nimble_ir_tuple(c->arena, n, fields, NULL);
  return body ? imp_chain_close(c, &b->chain, body) : NULL;
}

/* Exporters sometimes give one branch [1] and the other []: when both
 * shapes are static with the same element count, the branch whose rank
 * differs from the node's declared output (or else from then_branch) is
 * reshaped to the other's shape. */
static int64_t static_count(imp_ctx *c, const nimble_tensor_sig_t *s) {
  int64_t n = 1;
  for (size_t d = 0; d < s->rank; d++) {
    nimble_dim_t x = imp_resolve(c, s->dims[d]);
    if (x.kind != NIMBLE_DIM_CONST || __builtin_mul_overflow(n, x.value, &n)) return -1;
  }
  return n;
}

static nimble_status_t match_static_ranks(imp_ctx *c, const nimble_onnx_node *n, size_t i, branch *bt,
                                          branch *be) {
  imp_val *a = bt->outs[i], *b = be->outs[i];
  if (!a->has_sig || !b->has_sig || a->sig.rank == b->sig.rank || a->sig.dtype != b->sig.dtype) return nimble_ok();
  int64_t ca = static_count(c, &a->sig), cb = static_count(c, &b->sig);
  if (ca < 0 || ca != cb) return nimble_ok();
  const nimble_onnx_value_t *declared = nimble_onnx_graph_find_value(c->graph, n->outputs[i]);
  bool to_else = declared && declared->type && declared->type->has_shape && declared->type->rank == b->sig.rank;
  imp_val *from = to_else ? a : b, *like = to_else ? b : a;
  branch *br = to_else ? bt : be;
  int64_t shape[NIMBLE_MAX_RANK];
  for (size_t d = 0; d < like->sig.rank; d++) shape[d] = imp_resolve(c, like->sig.dims[d]).value;
  imp_chain *saved = c->chain;
  c->chain = &br->chain;
  nimble_named_attr_t at = imp_attr_ints("newshape", shape, like->sig.rank);
  nimble_status_t s = imp_emit(c, "reshape", 1, &from, &at, 1, &br->outs[i]);
  c->chain = saved;
  return s;
}

static nimble_status_t cv_if(imp_ctx *c, const nimble_onnx_node *n) {
  imp_val *cond;
  NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 0, &cond));
  if (cond->sig.dtype != NIMBLE_DTYPE_BOOL) return imp_err(NIMBLE_INVALID_ARGUMENT, "condition must be bool");
  NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, cond, &cond));
  const nimble_onnx_graph *tg, *eg;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_graph(n, "then_branch", &tg));
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_graph(n, "else_branch", &eg));
  if (!tg || !eg) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs then_branch and else_branch");
  size_t no = n->n_outputs;
  if (tg->n_outputs != no || eg->n_outputs != no)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "branches give %zu and %zu outputs, the node has %zu", tg->n_outputs,
                   eg->n_outputs, no);
  if (no == 0 || no > MAX_LOOP_VALUES) return imp_err(NIMBLE_OUT_OF_RANGE, "%zu outputs", no);
  branch *bt = nimble_arena_calloc(c->arena, 1, sizeof *bt), *be = nimble_arena_calloc(c->arena, 1, sizeof *be);
  if (!bt || !be) return NIMBLE_OOM_IN("importing");
  NIMBLE_RETURN_IF_ERROR(import_branch(c, tg, bt));
  NIMBLE_RETURN_IF_ERROR(import_branch(c, eg, be));
  /* Either branch may run: each output is the join of the two (dims that
   * differ are Any; ranks that differ give a value of unknown rank, which
   * is refined where a node needs a rank, see import_ranks.c). The IR's
   * `if` is typed the same way (nimble_type_join). */
  imp_val *joined = nimble_arena_calloc(c->arena, no, sizeof *joined);
  if (!joined) return NIMBLE_OOM_IN("importing");
  for (size_t i = 0; i < no; i++) {
    NIMBLE_RETURN_IF_ERROR(match_static_ranks(c, n, i, bt, be));
    nimble_status_t s = imp_join_vals(c, bt->outs[i], be->outs[i], &joined[i]);
    if (s) return nimble_status_annotate(s, "output %zu differs between then_branch and else_branch", i);
  }
  const nimble_expr *te = branch_result(c, bt, no), *ee = branch_result(c, be, no);
  const nimble_expr *ife = te && ee ? nimble_ir_if(c->arena, cond->expr, te, ee, NULL) : NULL;
  if (!ife) return NIMBLE_OOM_IN("importing");
  imp_val *r;
  if (no == 1) {
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, n->outputs[0], ife, joined[0].has_sig ? &joined[0].sig : NULL, &r));
    r->ranks = joined[0].ranks;
    return imp_define(c, n, 0, r);
  }
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, "if", ife, NULL, &r));
  for (size_t i = 0; i < no; i++) {
    const nimble_expr *p = nimble_ir_proj(c->arena, r->expr, i, NULL);
    imp_val *o;
    if (!p) return NIMBLE_OOM_IN("importing");
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, n->outputs[i][0] ? n->outputs[i] : "if", p,
                                    joined[i].has_sig ? &joined[i].sig : NULL, &o));
    o->ranks = joined[i].ranks;
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, i, o));
  }
  return nimble_ok();
}

/* ---- Loop and Scan ---- */

typedef struct loop_spec {
  bool is_scan;
  const nimble_onnx_graph *body;
  size_t n_carried;                  /* loop-carried / scan state values */
  imp_val *init[MAX_LOOP_VALUES];    /* their initial values */
  size_t n_seq;                      /* Scan: scanned inputs */
  imp_val *seq[MAX_LOOP_VALUES];
  int64_t seq_axis[MAX_LOOP_VALUES];
  int64_t seq_reverse[MAX_LOOP_VALUES];
  size_t n_scan_out;
  int64_t out_axis[MAX_LOOP_VALUES];
  int64_t out_reverse[MAX_LOOP_VALUES];
  imp_val *max;                      /* trip count (int64 scalar) */
  imp_val *cond;                     /* Loop: initial condition (bool scalar) */
} loop_spec;

typedef struct loop_result {
  const char *name;
  imp_ranks *carried_out;                           /* as the body leaves them (n_carried) */
  nimble_tensor_sig_t scan_sig[MAX_LOOP_VALUES];    /* one iteration's scan output */
  size_t n_outer;
  imp_val *outer[MAX_LOOP_VALUES];                  /* outer values passed in */
} loop_result;

/* The accumulator after an iteration whose scan output (e, with a leading
 * axis of 1) has dims not known statically: the empty accumulator the loop
 * starts with cannot have them, so the first iteration's output replaces
 * it, and later ones are concatenated:
 *   if (equal(%i, 0)) { e } else { concatenate(%acc, e) }    */
static nimble_status_t accumulate_dynamic(imp_ctx *c, imp_val *i, imp_val *acc, imp_val *e, bool reverse,
                                          imp_val **out) {
  imp_val *zero, *first, *cat;
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, 0, &zero));
  NIMBLE_RETURN_IF_ERROR(imp_e2(c, "equal", i, zero, &first));
  imp_chain later;
  memset(&later, 0, sizeof later);
  imp_chain *saved = c->chain;
  c->chain = &later;
  nimble_named_attr_t ax0 = imp_attr_int("axis", 0);
  imp_val *pair[2] = {reverse ? e : acc, reverse ? acc : e};
  nimble_status_t s = imp_emit(c, "concatenate", 2, pair, &ax0, 1, &cat);
  c->chain = saved;
  NIMBLE_RETURN_IF_ERROR(s);
  const nimble_expr *else_e = imp_chain_close(c, &later, cat->expr);
  const nimble_expr *ife = else_e ? nimble_ir_if(c->arena, first->expr, e->expr, else_e, NULL) : NULL;
  if (!ife) return NIMBLE_OOM_IN("importing");
  imp_val joined;
  memset(&joined, 0, sizeof joined);
  NIMBLE_RETURN_IF_ERROR(imp_join_vals(c, e, cat, &joined));
  return imp_bind(c, "acc", ife, joined.has_sig ? &joined.sig : NULL, out);
}

/* Builds the function for carried signatures `carried` (already renamed).
 * When the body changes a constant dim of a carried value, *widen is set
 * and nothing is added to the module. */
static nimble_status_t build_loop_func(imp_ctx *c, const loop_spec *L, const imp_ranks *carried,
                                       remap *rm, loop_result *res, bool *widen) {
  *widen = false;
  const nimble_onnx_graph *g = L->body;
  nimble_arena *a = c->arena;
  size_t nc = L->n_carried, ns = L->n_seq;
  /* Outer values: resolved in the enclosing scopes, before switching. */
  res->n_outer = 0;
  const char *outer_names[MAX_LOOP_VALUES];
  imp_val *outer_consts[MAX_LOOP_VALUES];
  size_t n_consts = 0;
  const char *const_names[MAX_LOOP_VALUES];
  for (size_t i = 0; i < g->n_outer_refs; i++) {
    imp_val *v;
    nimble_status_t s = imp_lookup(c, g->outer_refs[i], &v);
    if (s) return nimble_status_annotate(s, "body reads '%s'", g->outer_refs[i]);
    if (v->expr->kind == NIMBLE_EXPR_CONSTANT) {
      if (n_consts == MAX_LOOP_VALUES) return imp_err(NIMBLE_OUT_OF_RANGE, "too many outer values");
      const_names[n_consts] = g->outer_refs[i];
      outer_consts[n_consts++] = v;
      continue;
    }
    if (!imp_val_typed(v)) return imp_err(NIMBLE_INVALID_ARGUMENT, "outer value '%s' has no known type", g->outer_refs[i]);
    if (res->n_outer == MAX_LOOP_VALUES) return imp_err(NIMBLE_OUT_OF_RANGE, "too many outer values");
    outer_names[res->n_outer] = g->outer_refs[i];
    res->outer[res->n_outer++] = v;
  }

  imp_scope *saved_scope = c->scope;
  imp_chain *saved_chain = c->chain;
  const nimble_onnx_graph *saved_graph = c->graph;
  imp_chain pre, body;
  memset(&pre, 0, sizeof pre);
  memset(&body, 0, sizeof body);
  c->scope = NULL;
  nimble_status_t s = imp_scope_push(c);
  if (s) {
    c->scope = saved_scope;
    return s;
  }
  c->chain = &pre;

  const nimble_expr *params[3 * MAX_LOOP_VALUES + 3];
  size_t np = 0;
  imp_val *pi, *pmax, *pcond = NULL;
  nimble_tensor_sig_t i64 = scalar_sig(NIMBLE_DTYPE_INT64), b1 = scalar_sig(NIMBLE_DTYPE_BOOL);
  imp_val *carried_vals[MAX_LOOP_VALUES], *seq_vals[MAX_LOOP_VALUES], *acc_vals[MAX_LOOP_VALUES];
  const nimble_expr *acc_vars[MAX_LOOP_VALUES];
  imp_val *go = NULL;
#define TRY(x) do { s = (x); if (s) goto done; } while (0)
  /* Checked before the carried parameters are named after the body's
   * inputs (a short input list was read past its end: fuzz crash
   * tests/compiler/onnx_import/corpus/crash-loop-body-short-inputs). */
  size_t want_inputs = L->is_scan ? nc + ns : 2 + nc;
  if (g->n_inputs != want_inputs) {
    s = imp_err(NIMBLE_INVALID_ARGUMENT, "body has %zu inputs, expected %zu", g->n_inputs, want_inputs);
    goto done;
  }
  TRY(make_param(c, "i", &i64, &params[np++], &pi));
  TRY(make_param(c, "max", &i64, &params[np++], &pmax));
  if (!L->is_scan) TRY(make_param(c, "cond", &b1, &params[np++], &pcond));
  for (size_t j = 0; j < nc; j++)
    TRY(make_param_ranks(c, g->inputs[(L->is_scan ? 0 : 2) + j]->name, &carried[j], &params[np++],
                         &carried_vals[j]));
  for (size_t j = 0; j < ns; j++) {
    nimble_tensor_sig_t ss = remap_sig(c, rm, &L->seq[j]->sig);
    TRY(make_param(c, "seq", &ss, &params[np++], &seq_vals[j]));
  }
  for (size_t j = 0; j < res->n_outer; j++) {
    imp_ranks os;
    remap_ranks(c, rm, res->outer[j], &os);
    imp_val *ov;
    TRY(make_param_ranks(c, outer_names[j], &os, &params[np++], &ov));
    TRY(imp_scope_set(c, outer_names[j], ov));
  }
  for (size_t j = 0; j < n_consts; j++) TRY(imp_scope_set(c, const_names[j], outer_consts[j]));
  /* go = cond && i < max */
  {
    imp_val *args[2] = {pi, pmax};
    TRY(imp_emit(c, "less", 2, args, NULL, 0, &go));
    if (pcond) {
      imp_val *a2[2] = {pcond, go};
      TRY(imp_emit(c, "logical_and", 2, a2, NULL, 0, &go));
    }
  }
  c->chain = &body;
  /* Body inputs. */
  if (!L->is_scan) {
    TRY(imp_scope_set(c, g->inputs[0]->name, pi));
    TRY(imp_scope_set(c, g->inputs[1]->name, pcond));
  }
  for (size_t j = 0; j < nc; j++) TRY(imp_scope_set(c, g->inputs[(L->is_scan ? 0 : 2) + j]->name, carried_vals[j]));
  for (size_t j = 0; j < ns; j++) {
    /* The slice of this iteration: index i, or max - 1 - i in reverse. */
    imp_val *idx = pi, *x;
    if (L->seq_reverse[j]) {
      imp_val *one, *t;
      TRY(imp_scalar(c, NIMBLE_DTYPE_INT64, 1, &one));
      imp_val *a1[2] = {pmax, one};
      TRY(imp_emit(c, "subtract", 2, a1, NULL, 0, &t));
      imp_val *a2[2] = {t, pi};
      TRY(imp_emit(c, "subtract", 2, a2, NULL, 0, &idx));
    }
    nimble_named_attr_t ax = imp_attr_int("axis", L->seq_axis[j]);
    imp_val *args[2] = {seq_vals[j], idx};
    TRY(imp_emit(c, "take", 2, args, &ax, 1, &x));
    TRY(imp_scope_set(c, g->inputs[nc + j]->name, x));
  }
  TRY(imp_graph_nodes(c, g));
  c->graph = g;
  size_t first = L->is_scan ? 0 : 1;
  if (g->n_outputs != first + nc + L->n_scan_out) {
    s = imp_err(NIMBLE_INVALID_ARGUMENT, "body has %zu outputs, expected %zu", g->n_outputs, first + nc + L->n_scan_out);
    goto done;
  }
  imp_val *outs[2 * MAX_LOOP_VALUES + 1];
  for (size_t k = 0; k < g->n_outputs; k++) {
    TRY(imp_lookup(c, g->outputs[k]->name, &outs[k]));
    if (!imp_val_typed(outs[k])) {
      s = imp_err(NIMBLE_INVALID_ARGUMENT, "body output '%s' has no known type", g->outputs[k]->name);
      goto done;
    }
  }
  for (size_t j = 0; j < nc; j++) {
    imp_val_ranks(outs[first + j], &res->carried_out[j]);
    if (res->carried_out[j].dtype != carried[j].dtype) {
      s = imp_err(NIMBLE_INVALID_ARGUMENT, "carried value %zu enters as %s and leaves the body as %s", j,
                  nimble_dtype_name(carried[j].dtype), nimble_dtype_name(res->carried_out[j].dtype));
      goto done;
    }
    /* Dims (or the rank) that change from one iteration to the next widen
     * the parameter, and the body is imported again. */
    imp_ranks tmp = carried[j];
    if (widen_carried(c, &tmp, &res->carried_out[j])) *widen = true;
  }
  if (*widen) goto done;
  /* Scan outputs: accumulate. */
  for (size_t k = 0; k < L->n_scan_out; k++) {
    if (!outs[first + nc + k]->has_sig) {
      s = imp_err(NIMBLE_UNIMPLEMENTED, "scan output '%s' has a rank that changes between iterations",
                  g->outputs[first + nc + k]->name);
      goto done;
    }
    res->scan_sig[k] = outs[first + nc + k]->sig;
    nimble_tensor_sig_t acc;
    memset(&acc, 0, sizeof acc);
    acc.dtype = res->scan_sig[k].dtype;
    acc.rank = res->scan_sig[k].rank + 1;
    if (acc.rank > NIMBLE_MAX_RANK) {
      s = imp_err(NIMBLE_OUT_OF_RANGE, "scan output rank too large");
      goto done;
    }
    acc.dims[0] = nimble_dim_any();
    for (size_t d = 0; d < res->scan_sig[k].rank; d++) {
      nimble_dim_t dd = imp_resolve(c, res->scan_sig[k].dims[d]);
      acc.dims[d + 1] = dd.kind == NIMBLE_DIM_CONST ? dd : nimble_dim_any();
    }
    TRY(make_param(c, "acc", &acc, &acc_vars[k], &acc_vals[k]));
    params[np++] = acc_vars[k];
  }
  /* The recursive call. */
  {
    const nimble_expr *args[3 * MAX_LOOP_VALUES + 3];
    size_t na = 0;
    imp_val *one, *next_i;
    TRY(imp_scalar(c, NIMBLE_DTYPE_INT64, 1, &one));
    imp_val *ai[2] = {pi, one};
    TRY(imp_emit(c, "add", 2, ai, NULL, 0, &next_i));
    args[na++] = next_i->expr;
    args[na++] = pmax->expr;
    if (!L->is_scan) {
      imp_val *cnext;
      if (outs[0]->sig.dtype != NIMBLE_DTYPE_BOOL) {
        s = imp_err(NIMBLE_INVALID_ARGUMENT, "body's condition output must be bool");
        goto done;
      }
      TRY(imp_to_scalar(c, outs[0], &cnext));
      args[na++] = cnext->expr;
    }
    for (size_t j = 0; j < nc; j++) args[na++] = outs[first + j]->expr;
    for (size_t j = 0; j < ns; j++) args[na++] = seq_vals[j]->expr;
    for (size_t j = 0; j < res->n_outer; j++) args[na++] = params[np - L->n_scan_out - res->n_outer + j];
    for (size_t k = 0; k < L->n_scan_out; k++) {
      imp_val *e, *cat;
      nimble_named_attr_t ax0 = imp_attr_int("axis", 0);
      TRY(imp_emit(c, "expand_dims", 1, &outs[first + nc + k], &ax0, 1, &e));
      if (static_count(c, &res->scan_sig[k]) >= 0) {
        imp_val *pair[2] = {acc_vals[k], e};
        if (L->out_reverse[k]) {
          pair[0] = e;
          pair[1] = acc_vals[k];
        }
        TRY(imp_emit(c, "concatenate", 2, pair, &ax0, 1, &cat));
      } else {
        TRY(accumulate_dynamic(c, pi, acc_vals[k], e, L->out_reverse[k] != 0, &cat));
      }
      args[na++] = cat->expr;
    }
    res->name = imp_fresh_global(c, L->is_scan ? "scan" : "loop");
    const nimble_expr *callee = res->name ? nimble_ir_global(a, res->name, NULL) : NULL;
    const nimble_expr *call = callee ? nimble_ir_call(a, callee, na, args, NULL, NULL) : NULL;
    const nimble_expr *fields[2 * MAX_LOOP_VALUES];
    const nimble_type *rtypes[2 * MAX_LOOP_VALUES];
    for (size_t j = 0; j < nc; j++) {
      fields[j] = carried_vals[j]->expr;
      rtypes[j] = carried_vals[j]->ranks ? nimble_type_unranked_tensor(a, carried[j].dtype)
                                         : sig_type(c, &carried_vals[j]->sig);
    }
    for (size_t k = 0; k < L->n_scan_out; k++) {
      fields[nc + k] = acc_vars[k];
      rtypes[nc + k] = acc_vars[k]->u.var.annotation;
    }
    size_t nf = nc + L->n_scan_out;
    const nimble_expr *done_e = nimble_ir_tuple(a, nf, fields, NULL);
    const nimble_type *ret = nimble_type_tuple(a, nf, rtypes);
    const nimble_expr *then_e = call ? imp_chain_close(c, &body, call) : NULL;
    const nimble_expr *ife = then_e && done_e ? nimble_ir_if(a, go->expr, then_e, done_e, NULL) : NULL;
    const nimble_expr *fbody = ife ? imp_chain_close(c, &pre, ife) : NULL;
    const nimble_expr *fn = fbody && ret ? nimble_ir_func(a, 0, NULL, np, params, ret, fbody, NULL) : NULL;
    if (!fn) {
      s = NIMBLE_OOM_IN("importing");
      goto done;
    }
    /* Parameters must be in order: i, max, [cond], carried, seq, outer, acc. */
    s = nimble_module_add_func(c->module, res->name, fn);
  }
done:
#undef TRY
  c->scope = saved_scope;
  c->chain = saved_chain;
  c->graph = saved_graph;
  return s;
}

/* Zeros of shape [0, dims...] for an empty accumulator. A dim not known
 * statically is 0 there: the first iteration's output replaces such an
 * accumulator (accumulate_dynamic), so only a loop that runs no iteration
 * returns it, as [0, 0, ...] where ONNX Runtime would give [0, d, ...]. */
static nimble_status_t empty_acc(imp_ctx *c, const nimble_tensor_sig_t *one, imp_val **out) {
  int64_t shape[NIMBLE_MAX_RANK];
  shape[0] = 0;
  if (one->rank + 1 > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "scan output rank too large");
  for (size_t d = 0; d < one->rank; d++) {
    nimble_dim_t dd = imp_resolve(c, one->dims[d]);
    shape[d + 1] = dd.kind == NIMBLE_DIM_CONST ? dd.value : 0;
  }
  nimble_named_attr_t at[2] = {imp_attr_ints("shape", shape, one->rank + 1),
                               imp_attr_str("dtype", nimble_dtype_name(one->dtype))};
  return imp_emit(c, "zeros", 0, NULL, at, 2, out);
}

static nimble_status_t run_loop(imp_ctx *c, const nimble_onnx_node *n, loop_spec *L) {
  size_t nc = L->n_carried;
  loop_result *res = nimble_arena_calloc(c->arena, 1, sizeof *res);
  imp_ranks *carried = nimble_arena_calloc(c->arena, nc ? nc : 1, sizeof *carried);
  if (res) res->carried_out = nimble_arena_calloc(c->arena, nc ? nc : 1, sizeof *res->carried_out);
  if (!res || !carried || !res->carried_out) return NIMBLE_OOM_IN("importing");
  remap rm;
  memset(&rm, 0, sizeof rm);
  for (size_t j = 0; j < nc; j++) remap_ranks(c, &rm, L->init[j], &carried[j]);
  /* Each widening adds a rank or turns a dim into Any, so this settles. */
  bool widen = true;
  for (int attempt = 0; attempt < 2 * NIMBLE_MAX_RANK + 4 && widen; attempt++) {
    remap r2 = rm;
    NIMBLE_RETURN_IF_ERROR(build_loop_func(c, L, carried, &r2, res, &widen));
    if (!widen) break;
    for (size_t j = 0; j < nc; j++) widen_carried(c, &carried[j], &res->carried_out[j]);
  }
  if (widen) return imp_err(NIMBLE_INTERNAL, "carried types did not settle");
  /* The call. */
  const nimble_expr *args[3 * MAX_LOOP_VALUES + 3];
  size_t na = 0;
  imp_val *zero;
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, 0, &zero));
  args[na++] = zero->expr;
  args[na++] = L->max->expr;
  if (!L->is_scan) args[na++] = L->cond->expr;
  for (size_t j = 0; j < L->n_carried; j++) args[na++] = L->init[j]->expr;
  for (size_t j = 0; j < L->n_seq; j++) args[na++] = L->seq[j]->expr;
  for (size_t j = 0; j < res->n_outer; j++) args[na++] = res->outer[j]->expr;
  for (size_t k = 0; k < L->n_scan_out; k++) {
    imp_val *z;
    NIMBLE_RETURN_IF_ERROR(empty_acc(c, &res->scan_sig[k], &z));
    args[na++] = z->expr;
  }
  const nimble_expr *callee = nimble_ir_global(c->arena, res->name, NULL);
  const nimble_expr *call = callee ? nimble_ir_call(c->arena, callee, na, args, NULL, NULL) : NULL;
  if (!call) return NIMBLE_OOM_IN("importing");
  imp_val *r;
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, L->is_scan ? "scan" : "loop", call, NULL, &r));
  for (size_t j = 0; j < L->n_carried + L->n_scan_out; j++) {
    nimble_tensor_sig_t sig;
    const imp_ranks *out_ranks = NULL;
    if (j < L->n_carried) {
      /* Dims the body leaves alone keep the initial value's dims; other
       * ranks the body gives it have only their constant dims known. */
      imp_ranks *k = nimble_arena_alloc(c->arena, sizeof *k);
      if (!k) return NIMBLE_OOM_IN("importing");
      *k = carried[j];
      size_t r0 = L->init[j]->sig.rank;
      for (size_t r = 0; r <= NIMBLE_MAX_RANK; r++) {
        if (!(k->mask & (1u << r))) continue;
        nimble_tensor_sig_t *ks = &k->sig[r];
        for (size_t d = 0; d < r; d++) {
          nimble_dim_t cd = ks->dims[d];
          if (r == r0 && cd.kind != NIMBLE_DIM_ANY) ks->dims[d] = L->init[j]->sig.dims[d];
          else if (cd.kind != NIMBLE_DIM_CONST) ks->dims[d] = nimble_dim_any();
        }
      }
      if (__builtin_popcount(k->mask) == 1) sig = k->sig[r0];
      else out_ranks = k;
    } else {
      const nimble_tensor_sig_t *one = &res->scan_sig[j - L->n_carried];
      memset(&sig, 0, sizeof sig);
      sig.dtype = one->dtype;
      sig.rank = one->rank + 1;
      sig.dims[0] = nimble_dim_any();
      for (size_t d = 0; d < one->rank; d++) {
        nimble_dim_t dd = imp_resolve(c, one->dims[d]);
        sig.dims[d + 1] = dd.kind == NIMBLE_DIM_CONST ? dd : nimble_dim_any();
      }
    }
    const nimble_expr *p = nimble_ir_proj(c->arena, r->expr, j, NULL);
    if (!p) return NIMBLE_OOM_IN("importing");
    imp_val *o;
    const char *nm = j < n->n_outputs && n->outputs[j][0] ? n->outputs[j] : "out";
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, nm, p, out_ranks ? NULL : &sig, &o));
    o->ranks = out_ranks;
    size_t k = j - L->n_carried;
    if (j >= L->n_carried && L->out_axis[k] != 0) {
      int64_t perm[NIMBLE_MAX_RANK];
      size_t rank = sig.rank, pos = 0;
      int64_t ax = L->out_axis[k] < 0 ? L->out_axis[k] + (int64_t)rank : L->out_axis[k];
      if (ax < 0 || ax >= (int64_t)rank) return imp_err(NIMBLE_INVALID_ARGUMENT, "scan output axis out of range");
      for (size_t d = 1; d < rank; d++) {
        if ((int64_t)pos == ax) perm[pos++] = 0;
        perm[pos++] = (int64_t)d;
      }
      if ((int64_t)pos == ax) perm[pos++] = 0;
      nimble_named_attr_t pa = imp_attr_ints("axes", perm, rank);
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "transpose", 1, &o, &pa, 1, &o));
    }
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, j, o));
  }
  return nimble_ok();
}

static nimble_status_t cv_loop(imp_ctx *c, const nimble_onnx_node *n) {
  loop_spec *L = nimble_arena_calloc(c->arena, 1, sizeof *L);
  if (!L) return NIMBLE_OOM_IN("importing");
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_graph(n, "body", &L->body));
  if (!L->body) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs a body");
  if (n->n_inputs < 2) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs inputs M and cond (possibly empty)");
  L->n_carried = n->n_inputs - 2;
  if (L->n_carried > MAX_LOOP_VALUES) return imp_err(NIMBLE_OUT_OF_RANGE, "too many carried values");
  for (size_t j = 0; j < L->n_carried; j++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, 2 + j, &L->init[j]));
  if (n->n_outputs < L->n_carried) return imp_err(NIMBLE_INVALID_ARGUMENT, "fewer outputs than carried values");
  L->n_scan_out = n->n_outputs - L->n_carried;
  imp_val *m, *cond;
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 0, &m));
  NIMBLE_RETURN_IF_ERROR(imp_input(c, n, 1, &cond));
  if (m) {
    if (!m->has_sig || !nimble_dtype_is_int(m->sig.dtype))
      return imp_err(NIMBLE_INVALID_ARGUMENT, "trip count M must be an integer tensor");
    NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, m, &m));
    if (m->sig.dtype != NIMBLE_DTYPE_INT64) {
      nimble_named_attr_t a = imp_attr_str("dtype", "int64");
      NIMBLE_RETURN_IF_ERROR(imp_emit(c, "cast", 1, &m, &a, 1, &m));
    }
  } else {
    int64_t big = INT64_MAX;
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &big, true, &m));
  }
  if (cond) {
    if (!cond->has_sig || cond->sig.dtype != NIMBLE_DTYPE_BOOL)
      return imp_err(NIMBLE_INVALID_ARGUMENT, "cond must be a bool tensor");
    NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, cond, &cond));
  } else {
    NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_BOOL, 1, &cond));
  }
  L->max = m;
  L->cond = cond;
  return run_loop(c, n, L);
}

static nimble_status_t read_axes(const nimble_onnx_node *n, const char *name, size_t count, int64_t *out) {
  const int64_t *v;
  size_t cnt;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_ints(n, name, &v, &cnt));
  if (cnt && cnt != count)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "attribute '%s' has %zu values, expected %zu", name, cnt, count);
  for (size_t i = 0; i < count; i++) out[i] = cnt ? v[i] : 0;
  return nimble_ok();
}

static nimble_status_t cv_scan(imp_ctx *c, const nimble_onnx_node *n) {
  if (n->opset < 9) return imp_err(NIMBLE_UNIMPLEMENTED, "Scan before opset 9 (with a batch axis) is not supported");
  loop_spec *L = nimble_arena_calloc(c->arena, 1, sizeof *L);
  if (!L) return NIMBLE_OOM_IN("importing");
  L->is_scan = true;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_get_graph(n, "body", &L->body));
  if (!L->body) return imp_err(NIMBLE_INVALID_ARGUMENT, "needs a body");
  int64_t m;
  NIMBLE_RETURN_IF_ERROR(nimble_onnx_node_require_int(n, "num_scan_inputs", &m));
  if (m <= 0 || (size_t)m > n->n_inputs || (size_t)m > MAX_LOOP_VALUES)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "num_scan_inputs %" PRId64 " does not fit %zu inputs", m, n->n_inputs);
  L->n_seq = (size_t)m;
  L->n_carried = n->n_inputs - L->n_seq;
  if (n->n_outputs < L->n_carried) return imp_err(NIMBLE_INVALID_ARGUMENT, "fewer outputs than states");
  L->n_scan_out = n->n_outputs - L->n_carried;
  for (size_t j = 0; j < L->n_carried; j++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, j, &L->init[j]));
  for (size_t j = 0; j < L->n_seq; j++) NIMBLE_RETURN_IF_ERROR(imp_input_req(c, n, L->n_carried + j, &L->seq[j]));
  NIMBLE_RETURN_IF_ERROR(read_axes(n, "scan_input_axes", L->n_seq, L->seq_axis));
  NIMBLE_RETURN_IF_ERROR(read_axes(n, "scan_input_directions", L->n_seq, L->seq_reverse));
  NIMBLE_RETURN_IF_ERROR(read_axes(n, "scan_output_axes", L->n_scan_out, L->out_axis));
  NIMBLE_RETURN_IF_ERROR(read_axes(n, "scan_output_directions", L->n_scan_out, L->out_reverse));
  for (size_t j = 0; j < L->n_seq; j++) {
    size_t ax;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(L->seq_axis[j], L->seq[j]->sig.rank, &ax));
    L->seq_axis[j] = (int64_t)ax;
  }
  /* Trip count: the first scanned input's extent on its axis. */
  imp_val *sh, *idx, *len;
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &L->seq[0], NULL, 0, &sh));
  NIMBLE_RETURN_IF_ERROR(imp_scalar(c, NIMBLE_DTYPE_INT64, (double)L->seq_axis[0], &idx));
  nimble_named_attr_t a0 = imp_attr_int("axis", 0);
  imp_val *args[2] = {sh, idx};
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "take", 2, args, &a0, 1, &len));
  L->max = len;
  return run_loop(c, n, L);
}

const imp_converter imp_converters_control[] = {
    {"If", cv_if},
    {"Loop", cv_loop},
    {"Scan", cv_scan},
};
const size_t imp_converters_control_count = sizeof imp_converters_control / sizeof imp_converters_control[0];
