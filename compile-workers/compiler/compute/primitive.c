/* nimble_compute_primitive and nimble_compute_shape_func: from one fused
 * primitive function to one loop-nest kernel.
 *
 * The function's body (nested operator calls, possibly through `let`s)
 * becomes a graph of cp_nodes. Each node knows its extents as i64
 * expressions: constants where the parameters' annotations are static,
 * shape(param, axis) reads otherwise (the same symbolic dim variable maps
 * to one expression, checked at run time), derived through each
 * operator's shape rule. The kernel is then one loop nest over the root's
 * output indices whose body stores cp_value(root, idx): injective
 * operators are index arithmetic, and the one anchor (a reduction, dense,
 * conv...) is computed per output element around the store. Row anchors
 * (softmax, layer norm) emit the whole body themselves. A concatenation of
 * convolutions has one anchor per part, each writing its channels of the
 * output (emit_conv_parts).
 *
 * The shape function reuses the same graph with every parameter extent
 * read from a 1-D int64 shape argument instead of a DLTensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute_internal.h"

nimble_compute_options_t nimble_compute_default_options(void) {
  nimble_compute_options_t o;
  memset(&o, 0, sizeof o);
  o.vector_width = 8;
  o.parallel = true;
  o.use_sgemm = true;
  o.min_task_work = CP_MIN_TASK_WORK;
  o.conv_block = CP_CONV_BLOCK;
  return o;
}

const cp_def *cp_find_def(const char *op) {
  static const struct {
    const cp_def *defs;
    const int *count;
  } families[] = {
      {cp_defs_elementwise, &cp_defs_elementwise_count},
      {cp_defs_indexing, &cp_defs_indexing_count},
      {cp_defs_scatter, &cp_defs_scatter_count},
      {cp_defs_transform, &cp_defs_transform_count},
      {cp_defs_reduce, &cp_defs_reduce_count},
      {cp_defs_nn, &cp_defs_nn_count},
      {cp_defs_create, &cp_defs_create_count},
      {cp_defs_dyn_layout, &cp_defs_dyn_layout_count},
      {cp_defs_resize, &cp_defs_resize_count},
      {cp_defs_detection, &cp_defs_detection_count},
      {cp_defs_unique, &cp_defs_unique_count},
      {cp_defs_one_hot, &cp_defs_one_hot_count},
      {cp_defs_signal, &cp_defs_signal_count},
      {cp_defs_linalg, &cp_defs_linalg_count},
      {cp_defs_pool_indices, &cp_defs_pool_indices_count},
      {cp_defs_dropout, &cp_defs_dropout_count},
      {cp_defs_recurrent, &cp_defs_recurrent_count},
  };
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (int i = 0; i < *families[f].count; i++)
      if (strcmp(families[f].defs[i].op, op) == 0) return &families[f].defs[i];
  return NULL;
}

bool nimble_compute_supports_op(const char *op_name) { return op_name && cp_find_def(op_name) != NULL; }

bool nimble_compute_kernel_symbol(const char *primitive, char *buf, size_t size) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  if (!primitive || !buf || size == 0) return false;
  for (const unsigned char *p = (const unsigned char *)primitive; *p; p++) {
    char tmp[4];
    size_t n = 0;
    if (*p == '.') {
      tmp[n++] = '_';
      tmp[n++] = '_';
    } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') {
      tmp[n++] = (char)*p;
    } else {
      tmp[n++] = '_';
      tmp[n++] = hex[*p >> 4];
      tmp[n++] = hex[*p & 15];
    }
    if (o + n >= size) return false;
    memcpy(buf + o, tmp, n);
    o += n;
  }
  if (o == 0 || (buf[0] >= '0' && buf[0] <= '9')) return false;
  buf[o] = '\0';
  return true;
}

/* Variables bound in the body: params and lets, mapped to nodes. */
typedef struct cp_binding {
  const nimble_expr *var;
  cp_node *node;
} cp_binding;

typedef struct cp_graph {
  cp_binding bind[256];
  int n_bind;
  int n_calls;
} cp_graph;

static cp_node *new_node(cp_ctx *c, cp_node_kind_t kind, const nimble_expr *e) {
  cp_node *n = nimble_ln_arena_alloc(c->A, sizeof *n);
  if (!n) return cp_fail(c, NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", c->prim);
  n->kind = kind;
  n->expr = e;
  return n;
}

static cp_node *lookup(cp_graph *g, const nimble_expr *var) {
  for (int i = g->n_bind - 1; i >= 0; i--)
    if (g->bind[i].var == var) return g->bind[i].node;
  return NULL;
}

static cp_node *build(cp_ctx *c, cp_graph *g, const nimble_expr *e, int depth);

static cp_node *build_const(cp_ctx *c, const nimble_expr *e) {
  const nimble_const_tensor_t *t = &e->u.constant;
  if (t->num_elements != 1)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: a constant of %zu elements inside the primitive (only scalars "
                   "are inlined)", c->prim, t->num_elements);
  if (t->rank > CP_MAX_RANK) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: constant of rank %zu", c->prim, t->rank);
  cp_node *n = new_node(c, CP_CONST, e);
  if (!n) return NULL;
  if (!cp_ln_type(t->dtype, &n->type, &(bool){false}))
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: constant of dtype %s", c->prim, nimble_dtype_name(t->dtype));
  n->dtype = t->dtype;
  n->rank = (int)t->rank;
  for (int a = 0; a < n->rank; a++) n->ext[a] = cp_i(c, 1);
  if (nimble_ln_type_is_float(n->type)) {
    n->cval = nimble_ln_const_f(c->A, n->type, nimble_dtype_get_double(t->dtype, t->data, 0));
  } else if (n->type == NIMBLE_LN_BOOL) {
    n->cval = cp_const_of(c, n->type, ((const uint8_t *)t->data)[0] != 0);
  } else {
    /* The element's bits, sign- or zero-extended (uint64 keeps all 64). */
    int64_t i = nimble_dtype_get_int(t->dtype, t->data, 0);
    if (t->dtype == NIMBLE_DTYPE_UINT64) memcpy(&i, t->data, 8);
    n->cval = nimble_ln_const_i(c->A, n->type, i);
  }
  return n;
}

static cp_node *build_call(cp_ctx *c, cp_graph *g, const nimble_expr *e, int depth) {
  const nimble_expr *callee = e->u.call.callee;
  if (callee->kind != NIMBLE_EXPR_OP)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: only operator calls can be computed in a primitive", c->prim);
  const nimble_op *op = callee->u.op.op;
  const cp_def *def = cp_find_def(op->name);
  if (!def)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: operator '%s' has no compute definition", c->prim, op->name);
  if (e->u.call.num_args > CP_MAX_IN)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: '%s' with %zu inputs (at most %d)", c->prim, op->name,
                   e->u.call.num_args, CP_MAX_IN);
  if (++g->n_calls > 256) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: more than 256 operator calls", c->prim);
  cp_node *n = new_node(c, CP_CALL, e);
  if (!n) return NULL;
  n->op = op;
  n->attrs = &e->u.call.attrs;
  n->def = def;
  n->n_in = (int)e->u.call.num_args;
  for (int i = 0; i < n->n_in; i++) {
    n->in[i] = build(c, g, e->u.call.args[i], depth + 1);
    if (!n->in[i]) return NULL;
    n->in[i]->uses++;
  }
  nimble_status_t s = def->shape(c, n);
  if (s) {
    if (!c->err) c->err = nimble_status_annotate(s, "%s: operator '%s'", c->prim, op->name);
    else nimble_status_free(s);
    return NULL;
  }
  if (c->err) return NULL;
  if (n->rank > CP_MAX_RANK || n->rank > NIMBLE_LN_MAX_RANK)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: '%s' of rank %d", c->prim, op->name, n->rank);
  if (def->cls != CP_INJECTIVE) {
    /* Two or more only in a concatenation of convolutions (checked once
     * the root is known). */
    if (c->n_anchors >= CP_MAX_IN)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: more than %d anchors in one primitive", c->prim, CP_MAX_IN);
    c->anchors[c->n_anchors++] = n;
    if (!c->anchor) c->anchor = n;
  }
  return n;
}

static cp_node *build(cp_ctx *c, cp_graph *g, const nimble_expr *e, int depth) {
  if (c->err) return NULL;
  if (depth > 200) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: nesting deeper than 200", c->prim);
  switch (e->kind) {
  case NIMBLE_EXPR_VAR: {
    cp_node *n = lookup(g, e);
    if (!n) return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: unbound variable %%%s", c->prim, e->u.var.name);
    return n;
  }
  case NIMBLE_EXPR_CONSTANT: return build_const(c, e);
  case NIMBLE_EXPR_CALL: return build_call(c, g, e, depth);
  case NIMBLE_EXPR_LET: {
    /* A chain of lets, walked iteratively. */
    const nimble_expr *cur = e;
    while (cur->kind == NIMBLE_EXPR_LET) {
      cp_node *v = build(c, g, cur->u.let.value, depth + 1);
      if (!v) return NULL;
      if (g->n_bind >= (int)(sizeof g->bind / sizeof g->bind[0]))
        return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: too many let bindings", c->prim);
      g->bind[g->n_bind].var = cur->u.let.var;
      g->bind[g->n_bind++].node = v;
      cur = cur->u.let.body;
    }
    return build(c, g, cur, depth + 1);
  }
  case NIMBLE_EXPR_TUPLE:
    /* The result of a group with side outputs: one output per field. */
    if (c->n_fields || e->u.tuple.count < 2 || e->u.tuple.count > CP_MAX_OUTPUTS)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: a tuple of %zu fields (only the result, of 2 to %d)", c->prim,
                     e->u.tuple.count, CP_MAX_OUTPUTS);
    for (size_t i = 0; i < e->u.tuple.count; i++) {
      cp_node *f = build(c, g, e->u.tuple.fields[i], depth + 1);
      if (!f) return NULL;
      if (f->kind != CP_CALL)
        return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: result field %zu computes nothing", c->prim, i);
      c->fields[c->n_fields++] = f;
    }
    return c->fields[0];
  default:
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: a primitive body may only hold operator calls, lets, "
                   "variables and constants", c->prim);
  }
}

/* Extent of a parameter's axis: the annotation's constant (checked at run
 * time), the expression already given to the same symbolic dim (checked
 * equal), or the run-time read. */
static nimble_ln_expr *param_extent(cp_ctx *c, int pi, nimble_ln_param *p, int axis, nimble_dim_t d,
                                    const char *pname) {
  nimble_ln_expr *read = c->shape_mode && !c->shape_values ? nimble_ln_load(c->A, c->shape_params[pi], cp_i(c, axis))
                                       : nimble_ln_shape(c->A, p, axis);
  if (d.kind == NIMBLE_DIM_CONST) {
    cp_check(c, cp_eq(c, read, cp_i(c, d.value)), "parameter %%%s axis %d: extent is not %lld", pname, axis,
             (long long)d.value);
    return cp_i(c, d.value);
  }
  if (d.kind == NIMBLE_DIM_VAR) {
    for (int i = 0; i < c->n_dimvars; i++)
      if (c->dimvar_id[i] == d.var_id) {
        cp_check(c, cp_eq(c, read, c->dimvar_ext[i]), "parameter %%%s axis %d: extent differs from dim '%s'",
                 pname, axis, d.name ? d.name : "?");
        return c->dimvar_ext[i];
      }
    if (c->n_dimvars < CP_MAX_DIMVARS) {
      c->dimvar_id[c->n_dimvars] = d.var_id;
      c->dimvar_ext[c->n_dimvars++] = read;
    }
  }
  return read;
}

/* The most demanding shape-function kind of the operators in e. */
static nimble_shape_fn_kind_t body_shape_kind(const nimble_expr *e, int depth) {
  nimble_shape_fn_kind_t k = NIMBLE_SHAPE_DATA_INDEPENDENT, j;
  if (!e || depth > 300) return k;
  switch (e->kind) {
  case NIMBLE_EXPR_CALL:
    if (e->u.call.callee->kind == NIMBLE_EXPR_OP) k = e->u.call.callee->u.op.op->shape_kind;
    for (size_t i = 0; i < e->u.call.num_args; i++)
      if ((j = body_shape_kind(e->u.call.args[i], depth + 1)) > k) k = j;
    return k;
  case NIMBLE_EXPR_LET:
    for (; e->kind == NIMBLE_EXPR_LET; e = e->u.let.body)
      if ((j = body_shape_kind(e->u.let.value, depth + 1)) > k) k = j;
    if ((j = body_shape_kind(e, depth + 1)) > k) k = j;
    return k;
  default: return k;
  }
}

/* Parses the function into the graph; adds the kernel's input params. */
static cp_node *build_graph(cp_ctx *c, const nimble_module *m, const char *name, cp_graph *g) {
  const nimble_expr *fn = nimble_module_find_func(m, name);
  if (!fn) return cp_fail(c, NIMBLE_NOT_FOUND, "no global function @\"%s\"", name);
  if (fn->kind != NIMBLE_EXPR_FUNC)
    return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "@\"%s\" is not a function", name);
  size_t np = fn->u.func.num_params;
  if (c->shape_mode) {
    nimble_shape_fn_kind_t kind = body_shape_kind(fn->u.func.body, 0);
    /* Data-dependent and upper-bound shape functions take the inputs
     * themselves (an upper bound's is the bound: the kernel reports the
     * real shape). */
    c->shape_values = kind != NIMBLE_SHAPE_DATA_INDEPENDENT;
  }
  if (np + 1 > NIMBLE_LN_MAX_PARAMS)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %zu parameters (a kernel takes at most %d arguments)", name, np,
                   NIMBLE_LN_MAX_PARAMS);
  for (size_t i = 0; i < np; i++) {
    const nimble_expr *v = fn->u.func.params[i];
    const nimble_type *t = v->u.var.annotation;
    if (!t || t->kind != NIMBLE_TYPE_TENSOR)
      return cp_fail(c, NIMBLE_INVALID_ARGUMENT, "%s: parameter %%%s is not annotated with a tensor type", name,
                     v->u.var.name);
    cp_node *n = new_node(c, CP_PARAM, v);
    if (!n) return NULL;
    bool is_bool;
    if (!cp_ln_type(t->u.tensor.dtype, &n->type, &is_bool))
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: parameter %%%s has dtype %s, which kernels do not take", name,
                     v->u.var.name, nimble_dtype_name(t->u.tensor.dtype));
    if (t->u.tensor.rank > CP_MAX_RANK)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: parameter %%%s has rank %zu (at most %d)", name,
                     v->u.var.name, t->u.tensor.rank, CP_MAX_RANK);
    n->dtype = t->u.tensor.dtype;
    n->rank = (int)t->u.tensor.rank;
    n->param_index = (int)i;
    if (c->shape_mode && !c->shape_values) {
      char pn[96];
      snprintf(pn, sizeof pn, "%s_shape", v->u.var.name);
      c->shape_params[i] = nimble_ln_kernel_add_param(c->k, pn, NIMBLE_LN_I64, 1, 0);
      if (c->shape_params[i])
        cp_check(c, cp_eq(c, nimble_ln_shape(c->A, c->shape_params[i], 0), cp_i(c, n->rank)),
                 "shape of %%%s: expected %d extents", v->u.var.name, n->rank);
    } else {
      n->param = nimble_ln_kernel_add_param(c->k, v->u.var.name, cp_tensor_type(n->type), n->rank, 0);
    }
    for (int a = 0; a < n->rank; a++)
      n->ext[a] = param_extent(c, (int)i, n->param, a, t->u.tensor.dims[a], v->u.var.name);
    g->bind[g->n_bind].var = v;
    g->bind[g->n_bind++].node = n;
  }
  if (c->err) return NULL;
  cp_node *root = build(c, g, fn->u.func.body, 0);
  if (!root) return NULL;
  if (root->kind != CP_CALL)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: the body computes nothing (a parameter or constant)", name);
  return root;
}

static nimble_status_t setup(cp_ctx *c, const char *name, const nimble_compute_options_t *options,
                             nimble_ln_arena *arena, bool shape_mode, const char *suffix) {
  memset(c, 0, sizeof *c);
  c->A = arena;
  c->opt = options ? *options : nimble_compute_default_options();
  if (c->opt.vector_width <= 0) c->opt.vector_width = 8;
  if (c->opt.min_task_work <= 0) c->opt.min_task_work = CP_MIN_TASK_WORK;
  if (c->opt.conv_block <= 0) c->opt.conv_block = CP_CONV_BLOCK;
  c->prim = name;
  c->shape_mode = shape_mode;
  char kname[256], base[224];
  if (c->opt.kernel_name) {
    snprintf(base, sizeof base, "%s", c->opt.kernel_name);
  } else if (!nimble_compute_kernel_symbol(name, base, sizeof base)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel name of '%s' is too long", name);
  }
  int len = snprintf(kname, sizeof kname, "%s%s", base, suffix);
  if (len < 0 || (size_t)len >= sizeof kname)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "kernel name of '%s' is too long", name);
  c->k = nimble_ln_kernel_create(arena, kname);
  if (!c->k) return nimble_ln_arena_status(arena);
  return nimble_ok();
}

static nimble_status_t finish(cp_ctx *c, nimble_ln_stmt *body, nimble_ln_kernel **out) {
  if (c->err) {
    nimble_status_t s = c->err;
    c->err = NULL;
    return s;
  }
  c->checks[c->n_checks] = body;
  nimble_ln_kernel_set_body(c->k, nimble_ln_seq(c->A, c->checks, (size_t)c->n_checks + 1));
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_ln_kernel_validate(c->k), "compute of '%s'", c->prim);
  *out = c->k;
  return nimble_ok();
}

/* The loop nest over the root's output for injective roots and point
 * anchors. */
nimble_ln_stmt *cp_gemm_sgemm(cp_ctx *c, cp_node *n, nimble_ln_param *o);
/* The same product with the epilogue at root folded into
 * env->sgemm_epilogue (a column bias, a residual, Relu/Clip): `base` is
 * cp_gemm_desc of cp_gemm_sgemm's statement; *cond the run-time conditions
 * besides the caller's. NULL when the epilogue is anything else. */
nimble_ln_stmt *cp_gemm_sgemm_epilogue(cp_ctx *c, cp_node *n, cp_node *root, nimble_ln_param *o,
                                       const nimble_ln_sgemm_desc_t *base, nimble_ln_expr **cond);
/* The same product when root only scales it by a constant (attention's
 * scores times 1/sqrt(d)): that factor as sgemm's alpha, which rounds
 * alpha * sum once, as the product and then the multiply do. NULL when
 * root is anything else. */
nimble_ln_stmt *cp_gemm_sgemm_scaled(cp_ctx *c, cp_node *n, cp_node *root, nimble_ln_param *o);

nimble_ln_expr *cp_out_flat(cp_ctx *c, nimble_ln_param *o, nimble_ln_expr *const *idx) {
  if (!c->win_off || o->rank < 2) return nimble_ln_flat_index(c->A, o, idx);
  nimble_ln_expr *at[CP_MAX_RANK];
  for (int a = 0; a < o->rank; a++) at[a] = a == 1 ? cp_add(c, idx[1], c->win_off) : idx[a];
  return nimble_ln_flat_index(c->A, o, at);
}

nimble_ln_stmt *cp_epilogue_at(cp_ctx *c, cp_node *root, nimble_ln_param *o, nimble_ln_expr *const *idx,
                               nimble_ln_expr *addend) {
  cp_node *anchor = c->anchor;
  if (!anchor || root == anchor || anchor->rank != root->rank || root->rank != o->rank) return NULL;
  if (o->dtype != anchor->type) return NULL; /* the output cannot hold the anchor's values */
  c->anchor_used = 0;
  c->anchor_var = cp_var(c, anchor->op->name, anchor->type);
  nimble_ln_expr *value = cp_convert(c, cp_value(c, root, idx), root->type);
  if (c->err || !value || !c->anchor_used) return NULL;
  for (int a = 0; a < root->rank; a++)
    if (c->anchor_idx[a] != idx[a]) return NULL;
  nimble_ln_expr *fi = cp_out_flat(c, o, idx);
  nimble_ln_expr *anchor_value = nimble_ln_load(c->A, o, fi);
  if (addend) anchor_value = nimble_ln_binary(c->A, NIMBLE_LN_ADD, anchor_value, addend);
  return nimble_ln_let(c->A, c->anchor_var, anchor_value, nimble_ln_store(c->A, o, fi, value));
}

/* from_out: the anchor's value was already stored into the output (by
 * sgemm); the nest applies the epilogue in place. Only valid when the
 * epilogue reads the anchor at the very index it writes; NULL otherwise. */
/* Views: the same elements in the same order under another shape. */
static bool is_view(const cp_node *n) {
  if (n->kind != CP_CALL || n->n_in < 1) return false;
  const char *op = n->op->name;
  return !strcmp(op, "reshape") || !strcmp(op, "flatten") || !strcmp(op, "squeeze") || !strcmp(op, "expand_dims");
}

/* Whether every index of the anchor is a constant or one of the nest's
 * indices but the last (idx[0..R-2]): its value is then the same along
 * the last axis. */
static bool anchor_outside_last(const cp_ctx *c, const cp_node *anchor, nimble_ln_expr *const *idx, int R) {
  for (int a = 0; a < anchor->rank; a++) {
    int64_t v;
    bool ok = cp_const_i(c->anchor_idx[a], &v);
    for (int b = 0; b < R - 1 && !ok; b++) ok = c->anchor_idx[a] == idx[b];
    if (!ok) return false;
  }
  return true;
}

/* Whether `e` evaluates exp, tanh, sigmoid or erf. */
static bool has_transcendental(const nimble_ln_expr *e) {
  if (!e) return false;
  if (e->kind == NIMBLE_LN_E_UNARY &&
      (e->op == NIMBLE_LN_EXP || e->op == NIMBLE_LN_TANH || e->op == NIMBLE_LN_SIGMOID || e->op == NIMBLE_LN_ERF))
    return true;
  return has_transcendental(e->a) || has_transcendental(e->b) || has_transcendental(e->c);
}

/* The lanes of an element-wise loop computing `value` over a last axis
 * of extent `ext`, w the target's vector width. exp, tanh, sigmoid and
 * erf are long chains of dependent multiply-adds (cg_math.c): one vector
 * at a time, the core waits on them (bert_tiny's GELU, 128x512, spent
 * 34 cycles a vector of 8 on 68 instructions). Four vectors side by side
 * (LLVM splits the wide vector into independent ones) keep it busy:
 * that GELU 70 -> 59 us on AVX2, 16 registers and spills included; two
 * vectors gained 63. Only where the extent is a known multiple, so that
 * no wider scalar tail appears (an element-wise tail runs one lane at a
 * time). */
static int transcendental_lanes(const nimble_ln_expr *value, nimble_ln_expr *ext, int w) {
  int64_t e;
  /* f32 values only (what was measured): f64 lanes take twice the
   * registers, and four vectors of them would spill more than they hide. */
  if (w <= 1 || value->type != NIMBLE_LN_F32 || !cp_const_i(ext, &e) || !has_transcendental(value)) return w;
  for (int k = 4; k > 1; k /= 2)
    if (e % (k * w) == 0) return k * w;
  return w;
}

static nimble_ln_stmt *emit_nest(cp_ctx *c, cp_node *root, nimble_ln_param *o, bool from_out) {
  /* In place over the anchor's values: only where the output holds them
   * (a quantizing epilogue writes u8 into an output no f32 was stored in). */
  if (from_out && (!c->anchor || o->dtype != c->anchor->type)) return NULL;
  /* A view at the root relabels the output: the nest runs over the view's
   * input's indices and stores at the same flat position, so no index is
   * divided back out of the view's shape (bert's heads merged by a
   * transpose under a reshape: a division and a gather per element). */
  cp_node *src = root;
  while (!c->anchor && !from_out && is_view(src) && src->in[0]->kind == CP_CALL && src->in[0]->rank > 0 &&
         src->in[0]->type == root->type)
    src = src->in[0];
  int R = src->rank;
  nimble_ln_expr *const *ext = src->ext;
  nimble_ln_var *d[CP_MAX_RANK];
  nimble_ln_expr *idx[CP_MAX_RANK];
  for (int a = 0; a < R; a++) {
    d[a] = cp_var(c, "i", NIMBLE_LN_I64);
    idx[a] = nimble_ln_ref(c->A, d[a]);
  }
  cp_node *anchor = c->anchor;
  c->anchor_used = 0;
  if (anchor) c->anchor_var = cp_var(c, anchor->op->name, anchor->type);
  nimble_ln_expr *value = cp_convert(c, cp_value(c, src, idx), root->type);
  if (c->err) return NULL;
  nimble_ln_expr *at = cp_i(c, 0);
  if (src == root && R) at = cp_out_flat(c, o, idx);
  else
    for (int a = 0; a < R; a++) at = cp_add(c, cp_mul(c, at, ext[a]), idx[a]);
  nimble_ln_stmt *body = nimble_ln_store(c->A, o, at, value);
  if (anchor) {
    if (!c->anchor_used)
      return cp_fail(c, NIMBLE_INTERNAL, "%s: the anchor '%s' does not reach the output", c->prim,
                     anchor->op->name);
    if (from_out) {
      if (anchor->rank != R) return NULL;
      for (int a = 0; a < R; a++)
        if (c->anchor_idx[a] != idx[a]) return NULL;
      body = nimble_ln_let(c->A, c->anchor_var, nimble_ln_load(c->A, o, cp_out_flat(c, o, idx)), body);
      anchor = NULL; /* schedule as element-wise */
    } else if (R >= 2 && c->opt.vector_width > 1 && anchor_outside_last(c, anchor, idx, R)) {
      /* The anchor's value does not change along the last axis (a row's
       * mean or variance broadcast over it: bert's layer norms): computed
       * once per row around a vectorized loop over the row, which was a
       * scalar loop (a division per element) with the anchor inside it
       * (LLVM hoisted the anchor's loop but left the row's scalar). */
      int w = c->opt.vector_width;
      nimble_ln_stmt *row = cp_for(c, d[R - 1], ext[R - 1], NIMBLE_LN_SERIAL, 0, body);
      row = nimble_ln_split(c->A, row, w, NIMBLE_LN_VECTORIZED, w);
      if (!row) return NULL;
      /* Not unrolled before the vectorizer sees them: the row's constant
       * 128 elements, fully unrolled, were vectorized across rows as
       * shuffles (bert_tiny's layer norm 13.5 -> 3.5 us with this). */
      nimble_ln_no_unroll(row);
      row = anchor->def->emit(c, anchor, c->anchor_idx, c->anchor_var, row);
      if (c->err || !row) return NULL;
      /* A row's work: about 4 evaluations an element (the reduction's pass
       * and the row's), in min_task_work's unit. Counted as 64, bert_tiny's
       * 16 rows of 128 were cut in tasks of 2 rows, 0.24 us of work each
       * kernel: at 2 threads those layer norms took 2.2 us, and bert_tiny
       * seq 16 / 64 / 128 0.140 / 0.341 / 0.643 ms, now 0.127 / 0.327 /
       * 0.627 (1 thread unchanged). */
      return cp_parallel_outer(c, d, ext, R - 1, cp_mul(c, ext[R - 1], cp_i(c, 4)), row);
    } else {
      body = anchor->def->emit(c, anchor, c->anchor_idx, c->anchor_var, body);
    }
    if (c->err) return NULL;
  }
  if (R == 0) return body;
  int w = c->opt.vector_width;
  if (!anchor) w = transcendental_lanes(value, ext[R - 1], w);
  nimble_ln_stmt *inner = cp_for(c, d[R - 1], ext[R - 1], NIMBLE_LN_SERIAL, 0, body);
  nimble_ln_expr *row_work = cp_product(c, ext, 1, R);
  if (anchor) {
    /* The anchor's own loops are the vector work; output loops stay serial. */
    row_work = cp_mul(c, row_work, cp_i(c, 64));
  } else if (w > 1) {
    int64_t inner_ext;
    bool tiny = cp_const_i(ext[R - 1], &inner_ext) && inner_ext < w;
    if (!tiny) {
      inner = nimble_ln_split(c->A, inner, w, NIMBLE_LN_VECTORIZED, w);
      if (!inner) return NULL;
      bool have = false;
      for (int i = 0; i < c->k->n_specs; i++) have |= c->k->specs[i].param == o;
      /* A speed-up only (the split keeps its tail loop): skipped once the
       * kernel has all the specialisations it may (split into 5 outputs). */
      if (!have && src == root && c->k->n_specs < NIMBLE_LN_MAX_SPECIALIZATIONS)
        nimble_ln_kernel_specialize(c->k, o, R - 1, w);
      if (R == 1) {
        nimble_ln_stmt *blocks = inner->stmts[0];
        if (c->opt.parallel)
          blocks = nimble_ln_chunk(c->A, blocks, cp_rows_per_task(c, blocks->end, cp_i(c, w)));
        return nimble_ln_seq2(c->A, blocks, inner->stmts[1]);
      }
    }
  }
  if (R == 1) {
    nimble_ln_stmt *nest = inner;
    if (c->opt.parallel) nest = nimble_ln_chunk(c->A, nest, cp_rows_per_task(c, ext[0], row_work));
    return nest;
  }
  /* row_work is one iteration of axis 0's; the loops below take one of
   * the innermost axis's body. */
  nimble_ln_expr *inner_work = anchor ? cp_mul(c, ext[R - 1], cp_i(c, 64)) : ext[R - 1];
  return cp_parallel_outer(c, d, ext, R - 1, inner_work, inner);
}

/* A whole kernel with several outputs or a real shape (cp_def.outputs):
 * one parameter per output ("out" or "out<k>"), then, for an upper bound,
 * one int64 [rank] parameter per output for its real shape. */
static nimble_ln_stmt *emit_outputs(cp_ctx *c, cp_node *root) {
  cp_outputs o;
  memset(&o, 0, sizeof o);
  if (!root->def->outputs(c, root, &o) || c->err) return NULL;
  if (o.n < 1 || o.n > CP_MAX_OUTPUTS || 2 * o.n + root->n_in > NIMBLE_LN_MAX_PARAMS)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: '%s' with %d outputs", c->prim, root->op->name, o.n);
  nimble_ln_param *outs[CP_MAX_OUTPUTS] = {NULL}, *shapes[CP_MAX_OUTPUTS] = {NULL};
  for (int k = 0; k < o.n; k++) {
    char pn[16];
    snprintf(pn, sizeof pn, o.n == 1 ? "out" : "out%d", k);
    outs[k] = nimble_ln_kernel_add_param(c->k, pn, cp_tensor_type(o.type[k]), o.rank[k], 1);
    if (!outs[k]) return NULL;
    for (int a = 0; a < o.rank[k]; a++) {
      nimble_ln_expr *got = nimble_ln_shape(c->A, outs[k], a);
      if (o.upper)
        cp_check(c, nimble_ln_binary(c->A, NIMBLE_LN_GE, got, o.ext[k][a]),
                 "%s: output %d axis %d is below the bound", root->op->name, k, a);
      else
        cp_check(c, cp_eq(c, got, o.ext[k][a]), "output %d axis %d: extent differs from the computed shape", k, a);
    }
  }
  for (int k = 0; o.upper && k < o.n; k++) {
    char pn[24];
    snprintf(pn, sizeof pn, o.n == 1 ? "out_shape" : "out_shape%d", k);
    shapes[k] = nimble_ln_kernel_add_param(c->k, pn, NIMBLE_LN_I64, 1, 1);
    if (!shapes[k]) return NULL;
    cp_check(c, cp_eq(c, nimble_ln_shape(c->A, shapes[k], 0), cp_i(c, o.rank[k])),
             "%s: the shape output %d needs %d extents", root->op->name, k, o.rank[k]);
  }
  return root->def->emit_outputs(c, root, outs, shapes);
}

/* The kernel's output parameter "out" for root's value, its extents
 * checked at run time against the computed ones. */
static nimble_ln_param *root_out(cp_ctx *c, cp_node *root) {
  nimble_ln_param *o = nimble_ln_kernel_add_param(c->k, "out", cp_tensor_type(root->type), root->rank, 1);
  for (int a = 0; a < root->rank && o; a++)
    cp_check(c, cp_eq(c, root->ext[a], nimble_ln_shape(c->A, o, a)),
             "output axis %d: extent differs from the computed shape", a);
  return o;
}

/* A concatenation along the channels of convolutions (each part a conv2d,
 * or a Relu or Clip of one; fuse_ops makes these for squeezenet's fire
 * modules): each part's convolution writes straight into its channels of
 * the output, o's axis-1 index offset by the channels before it
 * (c->win_off), with its epilogue, so that no part is stored apart and
 * copied: one conv_into_out per part in turn, the anchor set to the
 * part's. NULL with c->err set when the primitive is any other with more
 * than one anchor. */
static nimble_ln_stmt *emit_conv_parts(cp_ctx *c, cp_node *root) {
  int64_t axis = cp_attr_int(root, "axis");
  if (strcmp(root->op->name, "concatenate") || root->rank != 4 || root->type != NIMBLE_LN_F32 ||
      (axis != 1 && axis != -3) || root->n_in != c->n_anchors)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: %d anchors in one primitive ('%s' and '%s')", c->prim, c->n_anchors,
                   c->anchors[0]->op->name, c->anchors[1]->op->name);
  nimble_ln_param *o = root_out(c, root);
  if (!o) return NULL;
  nimble_ln_stmt *parts[CP_MAX_IN];
  nimble_ln_expr *off = cp_i(c, 0);
  c->win_total = root->ext[1];
  for (int k = 0; k < root->n_in; k++) {
    cp_node *part = root->in[k], *conv = part;
    float lo, hi;
    if (part->kind == CP_CALL && strcmp(part->op->name, "conv2d")) conv = cp_clamp_operand(part, &lo, &hi);
    if (!conv || conv->kind != CP_CALL || strcmp(conv->op->name, "conv2d") || !cp_window_op(conv) || conv->uses != 1)
      return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: part %d of the concatenation is not a convolution", c->prim, k);
    c->anchor = conv;
    c->win_off = off;
    nimble_ln_stmt *epi = part == conv ? NULL : emit_nest(c, part, o, true);
    bool fused = false;
    nimble_ln_stmt *win = part == conv || epi ? cp_window_into_out(c, conv, o, part, epi, &fused) : NULL;
    if (c->err) return NULL;
    if (!win) return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: part %d's convolution cannot write its channels", c->prim, k);
    parts[k] = epi && !fused ? nimble_ln_seq2(c->A, win, epi) : win;
    off = cp_add(c, off, part->ext[1]);
  }
  c->win_off = c->win_total = NULL;
  return nimble_ln_seq(c->A, parts, (size_t)root->n_in);
}

/* A tuple result (fuse_ops' side outputs: element-wise values needed
 * both inside the group and after it): one output parameter per field,
 * "out0", "out1", ... in order. A field that others read is stored
 * first and then read back from its output like a parameter, so nothing
 * is computed twice. */
static nimble_ln_stmt *emit_fields(cp_ctx *c) {
  if (c->anchor)
    return cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: several results with '%s' in the group", c->prim,
                   c->anchor->op->name);
  nimble_ln_param *outs[CP_MAX_OUTPUTS];
  for (int k = 0; k < c->n_fields; k++) {
    cp_node *f = c->fields[k];
    char pn[16];
    snprintf(pn, sizeof pn, "out%d", k);
    outs[k] = nimble_ln_kernel_add_param(c->k, pn, cp_tensor_type(f->type), f->rank, 1);
    if (!outs[k]) return NULL;
    for (int a = 0; a < f->rank; a++)
      cp_check(c, cp_eq(c, f->ext[a], nimble_ln_shape(c->A, outs[k], a)),
               "output %d axis %d: extent differs from the computed shape", k, a);
  }
  /* The fields others read first, then the rest; a field once stored is
   * read back from its output: the node becomes a parameter. */
  nimble_ln_stmt *nests[CP_MAX_OUTPUTS];
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < c->n_fields; k++) {
      cp_node *f = c->fields[k];
      if (f->kind == CP_PARAM || (pass == 0 && f->uses == 0)) continue;
      nests[n] = emit_nest(c, f, outs[k], false);
      if (!nests[n++]) return NULL;
      f->kind = CP_PARAM;
      f->param = outs[k];
    }
  return nimble_ln_seq(c->A, nests, (size_t)n);
}

nimble_status_t nimble_compute_primitive(const nimble_module *m, const char *name,
                                         const nimble_compute_options_t *options, nimble_ln_arena *arena,
                                         nimble_ln_kernel **out) {
  if (!m || !name || !arena || !out)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compute_primitive: NULL argument");
  *out = NULL;
  cp_ctx c;
  NIMBLE_RETURN_IF_ERROR(setup(&c, name, options, arena, false, ""));
  cp_graph *g = calloc(1, sizeof *g);
  if (!g) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", name);
  cp_node *root = build_graph(&c, m, name, g);
  free(g);
  nimble_ln_stmt *body = NULL;
  if (root && c.n_fields) {
    body = emit_fields(&c);
    if (!body && !c.err) c.err = nimble_ln_arena_status(arena);
    root = NULL;
  }
  if (root && c.n_anchors > 1) {
    body = emit_conv_parts(&c, root);
    if (!body && !c.err) c.err = nimble_ln_arena_status(arena);
    root = NULL;
  }
  if (root && root->def->emit_outputs) {
    body = emit_outputs(&c, root);
    if (!body && !c.err) c.err = nimble_ln_arena_status(arena);
    root = NULL;
  }
  if (root && !strcmp(root->op->name, "nonzero")) {
    /* Upper bound: out is allocated at [rank, numel]; the kernel writes
     * the indices compactly as [rank, count] and the real shape into an
     * extra int64 [2] output. */
    nimble_ln_param *o = nimble_ln_kernel_add_param(c.k, "out", NIMBLE_LN_I64, 2, 1);
    nimble_ln_param *so = nimble_ln_kernel_add_param(c.k, "out_shape", NIMBLE_LN_I64, 1, 1);
    if (o && so) body = cp_emit_nonzero(&c, root, o, so);
    root = NULL;
  }
  if (root && !strcmp(root->op->name, "topk")) {
    nimble_ln_param *ov = nimble_ln_kernel_add_param(c.k, "values", cp_tensor_type(root->type), root->rank, 1);
    nimble_ln_param *oi = nimble_ln_kernel_add_param(c.k, "indices", NIMBLE_LN_I64, root->rank, 1);
    for (int a = 0; a < root->rank && ov && oi; a++) {
      cp_check(&c, cp_eq(&c, root->ext[a], nimble_ln_shape(arena, ov, a)), "output 0 axis %d: extent differs from the computed shape", a);
      cp_check(&c, cp_eq(&c, root->ext[a], nimble_ln_shape(arena, oi, a)), "output 1 axis %d: extent differs from the computed shape", a);
    }
    if (ov && oi) body = cp_emit_topk(&c, root, ov, oi);
    root = NULL;
  }
  if (root && !strcmp(root->op->name, "split")) {
    /* A tuple of parts: one output and one nest per part. */
    cp_node *parts[CP_MAX_OUTPUTS];
    nimble_ln_stmt *nests[CP_MAX_OUTPUTS];
    int k = 0;
    if (cp_split_parts(&c, root, parts, &k)) {
      for (int p = 0; p < k && !c.err; p++) {
        char pn[16];
        snprintf(pn, sizeof pn, "out%d", p);
        nimble_ln_param *o = nimble_ln_kernel_add_param(c.k, pn, cp_tensor_type(root->type), root->rank, 1);
        for (int a = 0; a < root->rank && o; a++)
          cp_check(&c, cp_eq(&c, parts[p]->ext[a], nimble_ln_shape(arena, o, a)),
                   "output %d axis %d: extent differs from the computed shape", p, a);
        nests[p] = o ? emit_nest(&c, parts[p], o, false) : NULL;
      }
      if (!c.err) body = nimble_ln_seq(arena, nests, (size_t)k);
    }
    root = NULL;
  }
  if (root) {
    nimble_ln_param *o = root_out(&c, root);
    if (c.anchor && c.anchor->def->cls == CP_ANCHOR_ROW) {
      if (c.anchor != root)
        cp_fail(&c, NIMBLE_UNIMPLEMENTED, "%s: '%s' must be the primitive's result to be computed", name,
                c.anchor->op->name);
      else
        body = root->def->emit_root(&c, root, o);
    } else {
      /* A concatenate of parameters: contiguous copies (transform.c). */
      if (!c.anchor && root->kind == CP_CALL && !strcmp(root->op->name, "concatenate"))
        body = cp_concat_copy(&c, root, o);
      if (!body && !c.err) body = emit_nest(&c, root, o, false);
      nimble_ln_stmt *sg = body && c.anchor && c.opt.use_sgemm ? cp_gemm_sgemm(&c, c.anchor, o) : NULL;
      if (sg) {
        /* env->sgemm when the runtime has one (and the sizes are non-empty),
         * then the epilogue in place; the own loops otherwise. */
        nimble_ln_stmt *epi = root == c.anchor ? NULL : emit_nest(&c, root, o, true);
        if (root == c.anchor || epi) {
          const nimble_ln_sgemm_desc_t *d = cp_gemm_desc(sg);
          nimble_ln_expr *cond = nimble_ln_has_sgemm(arena);
          nimble_ln_expr *dims[3] = {d->m, d->n, d->k};
          for (int i = 0; i < 3; i++)
            cond = nimble_ln_binary(arena, NIMBLE_LN_AND, cond, nimble_ln_binary(arena, NIMBLE_LN_GT, dims[i], cp_i(&c, 0)));
          /* Without sgemm: the row loops where B is [k, n], whose columns
           * the generic nest would walk with a stride (nn.c). */
          nimble_ln_stmt *rows = cp_gemm_rows(&c, c.anchor, o);
          nimble_ln_stmt *own = rows ? (epi ? nimble_ln_seq2(arena, rows, epi) : rows) : body;
          body = nimble_ln_if(arena, cond, epi ? nimble_ln_seq2(arena, sg, epi) : sg, own);
          /* A bias over the columns, a residual and Relu/Clip folded into
           * sgemm's tiles (env->sgemm_epilogue) where they are all the
           * epilogue is; the above otherwise. */
          nimble_ln_expr *econd = NULL;
          nimble_ln_stmt *sge = epi ? cp_gemm_sgemm_epilogue(&c, c.anchor, root, o, d, &econd) : NULL;
          if (sge && econd) body = nimble_ln_if(arena, nimble_ln_binary(arena, NIMBLE_LN_AND, cond, econd), sge, body);
          /* A constant factor as alpha: no pass over C after the product
           * (bert's scores: a third of that kernel's time). */
          nimble_ln_stmt *scaled = epi && !sge ? cp_gemm_sgemm_scaled(&c, c.anchor, root, o) : NULL;
          if (scaled) body = nimble_ln_if(arena, cond, scaled, body);
        }
      }
      /* conv2d and pooling: their own loop nests into the output (conv.c),
       * then the epilogue in place, like the sgemm path. */
      if (body && c.anchor && cp_window_op(c.anchor)) {
        nimble_ln_stmt *epi = root == c.anchor ? NULL : emit_nest(&c, root, o, true);
        bool fused = false;
        nimble_ln_stmt *win = root == c.anchor || epi ? cp_window_into_out(&c, c.anchor, o, root, epi, &fused) : NULL;
        if (win) body = epi && !fused ? nimble_ln_seq2(arena, win, epi) : win;
      }
    }
    if (!body && !c.err) c.err = nimble_ln_arena_status(arena);
    if (!body && !c.err) c.err = nimble_status_make(NIMBLE_INTERNAL, "%s: no kernel body", name);
  }
  nimble_status_t s = finish(&c, body, out);
  if (s && nimble_status_code(s) != NIMBLE_UNIMPLEMENTED && nimble_status_code(s) != NIMBLE_NOT_FOUND)
    return nimble_status_annotate(s, "compute of '%s'", name);
  return s;
}

nimble_status_t nimble_compute_shape_func(const nimble_module *m, const char *name,
                                          const nimble_compute_options_t *options, nimble_ln_arena *arena,
                                          nimble_ln_kernel **out) {
  if (!m || !name || !arena || !out)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "nimble_compute_shape_func: NULL argument");
  *out = NULL;
  cp_ctx c;
  NIMBLE_RETURN_IF_ERROR(setup(&c, name, options, arena, true, "__shape_func"));
  cp_graph *g = calloc(1, sizeof *g);
  if (!g) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", name);
  cp_node *root = build_graph(&c, m, name, g);
  free(g);
  nimble_ln_stmt *body = NULL;
  if (root) {
    cp_node *outs[CP_MAX_OUTPUTS] = {root};
    int k = 1;
    for (int p = 0; p < c.n_fields; p++) outs[p] = c.fields[p];
    if (c.n_fields) k = c.n_fields;
    else if (!strcmp(root->op->name, "split") && !cp_split_parts(&c, root, outs, &k)) k = 0;
    if (!strcmp(root->op->name, "topk")) outs[k++] = root;
    /* Each output's rank and extents (for cp_def.outputs: the bounds of an
     * upper-bound result). */
    cp_outputs mo;
    memset(&mo, 0, sizeof mo);
    if (root->def->outputs) {
      k = root->def->outputs(&c, root, &mo) ? mo.n : 0;
      if (k < 0 || k > CP_MAX_OUTPUTS) k = 0;
    } else {
      for (int p = 0; p < k; p++) {
        mo.rank[p] = outs[p]->rank;
        for (int a = 0; a < outs[p]->rank; a++) mo.ext[p][a] = outs[p]->ext[a];
      }
    }
    nimble_ln_stmt *st[CP_MAX_OUTPUTS * (CP_MAX_RANK + 1)];
    size_t n_st = 0;
    for (int p = 0; p < k; p++) {
      char pn[24];
      snprintf(pn, sizeof pn, k == 1 ? "out_shape" : "out_shape%d", p);
      nimble_ln_param *o = nimble_ln_kernel_add_param(c.k, pn, NIMBLE_LN_I64, 1, 1);
      cp_check(&c, cp_eq(&c, nimble_ln_shape(arena, o, 0), cp_i(&c, mo.rank[p])),
               "output shape %d: expected %d extents", p, mo.rank[p]);
      for (int a = 0; a < mo.rank[p]; a++) st[n_st++] = nimble_ln_store(arena, o, cp_i(&c, a), mo.ext[p][a]);
    }
    if (n_st == 0)
      st[n_st++] = nimble_ln_check(arena, nimble_ln_binary(arena, NIMBLE_LN_EQ, cp_i(&c, 0), cp_i(&c, 0)), "rank 0");
    body = nimble_ln_seq(arena, st, n_st);
  }
  return finish(&c, body, out);
}
