/* Values whose rank is known only at run time.
 *
 * ONNX lets the two branches of an If give tensors of different ranks
 * (PyTorch's `x.squeeze(-1)` exports as If(size(-1) == 1, Squeeze(x), x):
 * [N, 128] or [N, 128, T]). The If's result then has type Tensor[*, dt] in
 * the IR, and the importer keeps, for each rank the value may have, what
 * it knows of it then (imp_ranks).
 *
 * Kernels are generated per rank, so no operator (but shape_of) takes such
 * a value. A node reading one is converted once per rank the value may
 * have, each time with the input refined to that rank
 * (reshape_tensor(x, check_rank(shape_of(x), rank=r)): a view, and a tiny
 * kernel that checks the rank), and the conversions are chosen at run time
 * by the value's rank:
 *
 *   let %rk = shape_of(shape_of(%x));          (the rank, as a [1] tensor)
 *   if (%rk == 2) { <node for rank 2> } else { <node for rank 3> }
 *
 * Where the converter refuses a rank (an LSTM wants rank 3), that rank is
 * dropped: with one rank left there is no `if`, only the refinement, whose
 * check fails at run time with a message naming the node and both ranks
 * should the other branch have run. The outputs of the conversions join
 * like an If's: the same rank everywhere (ReduceSum over all axes, Shape,
 * Flatten) gives a ranked value again. */
#include <stdio.h>
#include <string.h>

#include "import_internal.h"

#define MAX_NODE_OUTPUTS 64

static uint32_t rank_bit(size_t r) { return r <= NIMBLE_MAX_RANK ? 1u << r : 0; }

const nimble_type *imp_val_type(imp_ctx *c, const imp_val *v, bool any_for_vars) {
  if (v->ranks) return nimble_type_unranked_tensor(c->arena, v->ranks->dtype);
  if (v->has_sig) return imp_sig_type(c, &v->sig, any_for_vars);
  return NULL;
}

void imp_val_ranks(const imp_val *v, imp_ranks *out) {
  if (v->ranks) {
    *out = *v->ranks;
    return;
  }
  memset(out, 0, sizeof *out);
  if (!v->has_sig) return;
  out->dtype = v->sig.dtype;
  out->mask = rank_bit(v->sig.rank);
  if (out->mask) out->sig[v->sig.rank] = v->sig;
}

static void join_sig(imp_ctx *c, const nimble_tensor_sig_t *a, const nimble_tensor_sig_t *b, nimble_tensor_sig_t *out) {
  *out = *a;
  for (size_t d = 0; d < a->rank; d++) {
    nimble_dim_t p = imp_resolve(c, a->dims[d]), q = imp_resolve(c, b->dims[d]);
    out->dims[d] = nimble_dim_same(p, q) ? p : nimble_dim_any();
  }
}

static const char *rank_list(imp_ctx *c, uint32_t mask) {
  char buf[64];
  size_t used = 0;
  int count = 0, total = __builtin_popcount(mask), seen = 0;
  buf[0] = '\0';
  for (size_t r = 0; r <= NIMBLE_MAX_RANK; r++) {
    if (!(mask & rank_bit(r))) continue;
    seen++;
    const char *sep = count == 0 ? "" : seen == total ? " or " : ", ";
    used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%zu", sep, r);
    count++;
  }
  return nimble_arena_strdup(c->arena, buf);
}

nimble_status_t imp_join_vals(imp_ctx *c, const imp_val *a, const imp_val *b, imp_val *out) {
  out->has_sig = false;
  out->ranks = NULL;
  out->known = NULL;
  out->nknown = 0;
  if (!imp_val_typed(a) || !imp_val_typed(b)) return nimble_ok();
  imp_ranks ra, rb;
  imp_val_ranks(a, &ra);
  imp_val_ranks(b, &rb);
  if (ra.dtype != rb.dtype)
    return imp_err(NIMBLE_INVALID_ARGUMENT, "one is %s, the other %s", nimble_dtype_name(ra.dtype),
                   nimble_dtype_name(rb.dtype));
  imp_ranks j;
  memset(&j, 0, sizeof j);
  j.dtype = ra.dtype;
  j.mask = ra.mask | rb.mask;
  for (size_t r = 0; r <= NIMBLE_MAX_RANK; r++) {
    uint32_t bit = rank_bit(r);
    if ((ra.mask & bit) && (rb.mask & bit)) join_sig(c, &ra.sig[r], &rb.sig[r], &j.sig[r]);
    else if (ra.mask & bit) j.sig[r] = ra.sig[r];
    else if (rb.mask & bit) j.sig[r] = rb.sig[r];
  }
  if (__builtin_popcount(j.mask) == 1) {
    out->has_sig = true;
    out->sig = j.sig[__builtin_ctz(j.mask)];
    return nimble_ok();
  }
  imp_ranks *keep = nimble_arena_alloc(c->arena, sizeof *keep);
  if (!keep) return NIMBLE_OOM_IN("importing");
  *keep = j;
  out->ranks = keep;
  return nimble_ok();
}

/* Binds `value` like imp_bind, the variable annotated with `type`. */
static nimble_status_t bind_annotated(imp_ctx *c, const char *hint, const nimble_expr *value, const nimble_type *type,
                                      const nimble_tensor_sig_t *sig, imp_val **out) {
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, hint, value, sig, out));
  imp_chain *ch = c->chain;
  const nimble_expr *v = ch->vars[ch->n - 1];
  const nimble_expr *annotated = nimble_ir_var(c->arena, v->u.var.name, type, NULL);
  if (!annotated) return NIMBLE_OOM_IN("importing");
  ch->vars[ch->n - 1] = annotated;
  (*out)->expr = annotated;
  return nimble_ok();
}

static nimble_status_t call_op(imp_ctx *c, const char *name, size_t n, const nimble_expr *const *args,
                               const nimble_named_attr_t *attrs, size_t nattrs, const nimble_expr **out) {
  const nimble_op *op = nimble_op_find(name);
  if (!op) return imp_err(NIMBLE_INTERNAL, "operator '%s' is not registered", name);
  return nimble_ir_call_op(c->arena, op, n, args, attrs, nattrs, NULL, out);
}

/* shape_of(x) for a value of any rank: a [?] (or [rank]) int64. */
static nimble_status_t shape_of_any(imp_ctx *c, imp_val *x, imp_val **out) {
  const nimble_expr *e;
  NIMBLE_RETURN_IF_ERROR(call_op(c, "shape_of", 1, &x->expr, NULL, 0, &e));
  nimble_tensor_sig_t s;
  memset(&s, 0, sizeof s);
  s.dtype = NIMBLE_DTYPE_INT64;
  s.rank = 1;
  s.dims[0] = x->ranks ? nimble_dim_any() : nimble_dim_const((int64_t)x->sig.rank);
  return imp_bind(c, "shape", e, &s, out);
}

nimble_status_t imp_refine_rank(imp_ctx *c, imp_val *x, size_t r, const char *what, imp_val **out) {
  if (!x->ranks) return imp_err(NIMBLE_INTERNAL, "refining a value whose rank is known");
  if (r > NIMBLE_MAX_RANK) return imp_err(NIMBLE_OUT_OF_RANGE, "rank %zu", r);
  imp_val *sh, *checked;
  NIMBLE_RETURN_IF_ERROR(shape_of_any(c, x, &sh));
  const char *w = nimble_arena_strdup(c->arena, what ? what : "");
  if (!w) return NIMBLE_OOM_IN("importing");
  nimble_named_attr_t at[2] = {imp_attr_int("rank", (int64_t)r), imp_attr_str("what", w)};
  const nimble_expr *e;
  NIMBLE_RETURN_IF_ERROR(call_op(c, "check_rank", 1, &sh->expr, at, 2, &e));
  nimble_tensor_sig_t s;
  memset(&s, 0, sizeof s);
  s.dtype = NIMBLE_DTYPE_INT64;
  s.rank = 1;
  s.dims[0] = nimble_dim_const((int64_t)r);
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, "shape", e, &s, &checked));
  /* What is known of the value when it has rank r (Any where nothing is). */
  nimble_tensor_sig_t vs;
  if (x->ranks->mask & rank_bit(r)) {
    vs = x->ranks->sig[r];
  } else {
    memset(&vs, 0, sizeof vs);
    vs.dtype = x->ranks->dtype;
    vs.rank = r;
    for (size_t d = 0; d < r; d++) vs.dims[d] = nimble_dim_any();
  }
  const nimble_expr *args[2] = {x->expr, checked->expr};
  NIMBLE_RETURN_IF_ERROR(call_op(c, "reshape_tensor", 2, args, NULL, 0, &e));
  /* The annotation keeps the constant dims known for this rank (symbols
   * belong to the scope that made them: Any there). */
  const nimble_type *t = imp_sig_type(c, &vs, true);
  if (!t) return NIMBLE_OOM_IN("importing");
  return bind_annotated(c, "refined", e, t, &vs, out);
}

/* ---- conversion per rank ---- */

typedef struct rank_attempt {
  imp_chain chain;
  imp_val *outs[MAX_NODE_OUTPUTS];
} rank_attempt;

/* Appends the bindings of `from` to the current chain. */
static nimble_status_t splice(imp_ctx *c, const imp_chain *from) {
  imp_chain *ch = c->chain;
  if (ch->n + from->n > ch->cap) {
    size_t cap = ch->cap ? ch->cap : 32;
    while (cap < ch->n + from->n) cap *= 2;
    const nimble_expr **vars = nimble_arena_calloc(c->arena, cap, sizeof *vars);
    const nimble_expr **vals = nimble_arena_calloc(c->arena, cap, sizeof *vals);
    if (!vars || !vals) return NIMBLE_OOM_IN("importing");
    if (ch->n) {
      memcpy(vars, ch->vars, ch->n * sizeof *vars);
      memcpy(vals, ch->values, ch->n * sizeof *vals);
    }
    ch->vars = vars;
    ch->values = vals;
    ch->cap = cap;
  }
  for (size_t i = 0; i < from->n; i++) {
    ch->vars[ch->n] = from->vars[i];
    ch->values[ch->n] = from->values[i];
    ch->n++;
  }
  return nimble_ok();
}

/* Converts n with input `name` bound to x refined to rank r, into a chain
 * of its own; the outputs it defines go to a->outs. */
static nimble_status_t attempt(imp_ctx *c, const nimble_onnx_node *n, const imp_converter *cv, const char *name,
                               imp_val *x, size_t r, const char *what, rank_attempt *a) {
  memset(&a->chain, 0, sizeof a->chain);
  imp_chain *saved_chain = c->chain;
  imp_scope *saved_scope = c->scope;
  size_t funcs = nimble_module_num_funcs(c->module);
  nimble_subst_mark_t mark = nimble_subst_mark(c->subst); /* each rank is a branch of its own */
  c->chain = &a->chain;
  nimble_status_t s = imp_scope_push(c);
  imp_val *xr;
  if (!s) s = imp_refine_rank(c, x, r, what, &xr);
  /* Every input naming this value sees the refined one. */
  if (!s) s = imp_scope_set(c, name, xr);
  if (!s) s = imp_convert_node(c, n, cv);
  for (size_t k = 0; !s && k < n->n_outputs && k < MAX_NODE_OUTPUTS; k++) {
    a->outs[k] = NULL;
    if (!n->outputs[k][0]) continue;
    imp_val *v;
    nimble_status_t ls = imp_lookup(c, n->outputs[k], &v);
    if (ls) nimble_status_free(ls);
    else a->outs[k] = v;
  }
  c->scope = saved_scope;
  c->chain = saved_chain;
  nimble_subst_undo_dims(c->subst, mark);
  /* A refused rank leaves nothing behind (a Loop may have added its
   * function before failing). */
  if (s) nimble_module_truncate_funcs(c->module, funcs);
  return s;
}

static nimble_status_t dispatch(imp_ctx *c, const nimble_onnx_node *n, const imp_converter *cv, size_t in, imp_val *x) {
  if (n->n_outputs > MAX_NODE_OUTPUTS) return imp_err(NIMBLE_OUT_OF_RANGE, "%zu outputs", n->n_outputs);
  /* Names the node whole, however long its name and its input's. */
  const char *what =
      n->name && n->name[0]
          ? nimble_arena_sprintf(c->arena, "input %zu ('%s') of node '%s' (%s)", in, n->inputs[in], n->name,
                                 n->op_type)
          : nimble_arena_sprintf(c->arena, "input %zu ('%s') of node #%zu (%s)", in, n->inputs[in], n->index,
                                 n->op_type);
  if (!what) return NIMBLE_OOM_IN("importing");
  const char *name = n->inputs[in];
  uint32_t mask = x->ranks->mask;
  rank_attempt *att = nimble_arena_calloc(c->arena, NIMBLE_MAX_RANK + 1, sizeof *att);
  if (!att) return NIMBLE_OOM_IN("importing");
  size_t ok[NIMBLE_MAX_RANK + 1], nok = 0;
  nimble_status_t first = NULL;
  size_t first_rank = 0;
  for (size_t r = 0; r <= NIMBLE_MAX_RANK; r++) {
    if (!(mask & rank_bit(r))) continue;
    nimble_status_t s = attempt(c, n, cv, name, x, r, what, &att[r]);
    if (!s) {
      ok[nok++] = r;
    } else if (!first) {
      first = s;
      first_rank = r;
    } else {
      nimble_status_free(s);
    }
  }
  if (nok == 0)
    return nimble_status_annotate(first,
                                  "%s may have rank %s at run time (If branches of different ranks), and "
                                  "the node takes none of them; with rank %zu",
                                  what, rank_list(c, mask), first_rank);
  nimble_status_free(first);
  if (nok == 1) {
    /* The one rank the node takes: its refinement checks it at run time. */
    rank_attempt *a = &att[ok[0]];
    NIMBLE_RETURN_IF_ERROR(splice(c, &a->chain));
    for (size_t k = 0; k < n->n_outputs; k++)
      if (a->outs[k]) NIMBLE_RETURN_IF_ERROR(imp_define(c, n, k, a->outs[k]));
    return nimble_ok();
  }
  /* Several: chosen by the rank at run time. Outputs every conversion
   * defines are the node's results. */
  size_t outs[MAX_NODE_OUTPUTS], no = 0;
  for (size_t k = 0; k < n->n_outputs; k++) {
    bool all = true;
    for (size_t j = 0; j < nok; j++) all = all && att[ok[j]].outs[k];
    if (all) outs[no++] = k;
  }
  if (no == 0) return imp_err(NIMBLE_INTERNAL, "no output is defined for every rank"); /* the driver names the node */
  const nimble_expr *body[NIMBLE_MAX_RANK + 1];
  for (size_t j = 0; j < nok; j++) {
    rank_attempt *a = &att[ok[j]];
    const nimble_expr *fields[MAX_NODE_OUTPUTS];
    for (size_t q = 0; q < no; q++) fields[q] = a->outs[outs[q]]->expr;
    const nimble_expr *e = no == 1 ? fields[0] : nimble_ir_tuple(c->arena, no, fields, NULL);
    body[j] = e ? imp_chain_close(c, &a->chain, e) : NULL;
    if (!body[j]) return NIMBLE_OOM_IN("importing");
  }
  imp_val *sh, *rk;
  NIMBLE_RETURN_IF_ERROR(shape_of_any(c, x, &sh));
  NIMBLE_RETURN_IF_ERROR(imp_emit(c, "shape_of", 1, &sh, NULL, 0, &rk));
  const nimble_expr *e = body[nok - 1]; /* the last rank: no test (its refinement checks) */
  for (size_t j = nok - 1; j-- > 0;) {
    int64_t rv = (int64_t)ok[j];
    imp_val *want, *eq, *cond;
    NIMBLE_RETURN_IF_ERROR(imp_const_i64(c, 1, &rv, false, &want));
    imp_val *args[2] = {rk, want};
    NIMBLE_RETURN_IF_ERROR(imp_emit(c, "equal", 2, args, NULL, 0, &eq));
    NIMBLE_RETURN_IF_ERROR(imp_to_scalar(c, eq, &cond));
    e = nimble_ir_if(c->arena, cond->expr, body[j], e, NULL);
    if (!e) return NIMBLE_OOM_IN("importing");
  }
  /* What is known of each output: the join over the ranks. */
  imp_val known[MAX_NODE_OUTPUTS];
  for (size_t q = 0; q < no; q++) {
    known[q] = *att[ok[0]].outs[outs[q]];
    for (size_t j = 1; j < nok; j++) {
      imp_val acc = known[q];
      nimble_status_t s = imp_join_vals(c, &acc, att[ok[j]].outs[outs[q]], &known[q]);
      if (s) return nimble_status_annotate(s, "output %zu differs between ranks", outs[q]);
    }
  }
  imp_val *r;
  if (no == 1) {
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, n->outputs[outs[0]], e, known[0].has_sig ? &known[0].sig : NULL, &r));
    r->ranks = known[0].ranks;
    return imp_define(c, n, outs[0], r);
  }
  NIMBLE_RETURN_IF_ERROR(imp_bind(c, "by_rank", e, NULL, &r));
  for (size_t q = 0; q < no; q++) {
    const nimble_expr *p = nimble_ir_proj(c->arena, r->expr, q, NULL);
    imp_val *o;
    if (!p) return NIMBLE_OOM_IN("importing");
    NIMBLE_RETURN_IF_ERROR(imp_bind(c, n->outputs[outs[q]], p, known[q].has_sig ? &known[q].sig : NULL, &o));
    o->ranks = known[q].ranks;
    NIMBLE_RETURN_IF_ERROR(imp_define(c, n, outs[q], o));
  }
  return nimble_ok();
}

nimble_status_t imp_convert_node(imp_ctx *c, const nimble_onnx_node *n, const imp_converter *cv) {
  for (size_t i = 0; i < n->n_inputs; i++) {
    if (!n->inputs[i][0]) continue;
    imp_val *v;
    nimble_status_t s = imp_lookup(c, n->inputs[i], &v);
    if (s) { /* the converter reports a missing input itself */
      nimble_status_free(s);
      continue;
    }
    if (!v->ranks) continue;
    /* Identity hands the value on as it is. */
    if (strcmp(n->op_type, "Identity") == 0 && i == 0) return imp_define(c, n, 0, v);
    return dispatch(c, n, cv, i, v);
  }
  return cv->fn(c, n);
}
