/* Explicit memory ("manifest memory"), after fusion: every call of a
 * primitive function becomes allocation plus an invoke with destination
 * passing, so that memory is IR the planner can reason about.
 *
 *   let %y = @"fused.f"(%a, %b);              (%y: Tensor[(4, 16), float32])
 * becomes
 *   let %s0 = alloc_storage(256, alignment=64);
 *   let %y = alloc_tensor(%s0, 0, shape=[4, 16], dtype="float32");
 *   let %u0 = invoke(%a, %b, %y, kernel="fused.f", num_outputs=1);
 *
 * A static output shape gives constant sizes. A dynamic one calls the
 * primitive's shape function on the host first:
 *   data-independent  invoke_shape_func(shape_of(%a), shape_of(%b), ...)
 *   data-dependent    invoke_shape_func(%a, %b, mode="data_dependent")
 *   upper-bound       the same with mode="upper_bound": the output is
 *                     allocated at its largest; the kernel also writes each
 *                     output's real shape into a small int64 tensor (extra
 *                     outputs after the real ones), and the result is a view
 *                     of that shape (reshape_tensor).
 * and sizes the storage with prod(shape) * element size, computed by a
 * small shared host primitive (fused.storage_size_r<rank>_e<bytes>) into
 * an int64 scalar: afterwards, outside primitives, only shape_of and the
 * memory operators remain, each one VM instruction. The tensor's
 * variable keeps the inferred (possibly symbolic) type as its annotation:
 * plan_memory compares symbolic sizes through it.
 *
 * A primitive that is only a reshape (reshape, dyn_reshape, squeeze,
 * expand_dims, dyn_squeeze, dyn_expand_dims, flatten of its first
 * parameter) becomes a view, reshape_tensor(%x, shape), with the shape
 * constant or from its shape function: no copy, no kernel. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass_internal.h"

typedef struct manifest_ctx {
  nimble_module *m;
  nimble_arena *arena;
  const nimble_typing *types;
  pass_namer names;
  pass_map subst; /* result variables re-created with an annotation */
  pass_map ranks; /* shape values (projections of shape functions) -> rank */
} manifest_ctx;

static const char *mode_name(nimble_shape_fn_kind_t k) {
  return k == NIMBLE_SHAPE_DATA_DEPENDENT ? "data_dependent"
         : k == NIMBLE_SHAPE_UPPER_BOUND  ? "upper_bound"
                                          : "data_independent";
}

/* The strongest shape-function kind among the primitive's calls
 * (upper-bound > data-dependent > data-independent). */
static nimble_shape_fn_kind_t body_kind(const nimble_expr *e) {
  nimble_shape_fn_kind_t k = NIMBLE_SHAPE_DATA_INDEPENDENT;
  if (e->kind != NIMBLE_EXPR_CALL) return k;
  const nimble_op *op = pass_called_op(e);
  if (op) k = op->shape_kind;
  for (size_t i = 0; i < e->u.call.num_args; i++) {
    nimble_shape_fn_kind_t a = body_kind(e->u.call.args[i]);
    if (a == NIMBLE_SHAPE_UPPER_BOUND || (a == NIMBLE_SHAPE_DATA_DEPENDENT && k != NIMBLE_SHAPE_UPPER_BOUND))
      k = a;
  }
  return k;
}

static bool is_view(const nimble_expr *prim) {
  static const char *const views[] = {"reshape",     "dyn_reshape",     "squeeze", "expand_dims",
                                      "dyn_squeeze", "dyn_expand_dims", "flatten"};
  const nimble_expr *b = prim->u.func.body;
  const nimble_op *op = pass_called_op(b);
  if (!op || prim->u.func.num_params < 1 || b->u.call.args[0] != prim->u.func.params[0]) return false;
  for (size_t i = 1; i < b->u.call.num_args; i++)
    if (b->u.call.args[i]->kind != NIMBLE_EXPR_VAR && b->u.call.args[i]->kind != NIMBLE_EXPR_CONSTANT)
      return false;
  for (size_t i = 0; i < sizeof views / sizeof *views; i++)
    if (!strcmp(op->name, views[i])) return true;
  return false;
}

/* Whether `e` holds a scatter marked inplace=1 by update_in_place. */
static bool has_in_place_scatter(const nimble_expr *e) {
  const nimble_op *op = pass_called_op(e);
  if (!op) return false;
  if ((!strcmp(op->name, "scatter_nd") || !strcmp(op->name, "scatter_elements")) &&
      nimble_attrs_int(op, &e->u.call.attrs, "inplace"))
    return true;
  for (size_t i = 0; i < e->u.call.num_args; i++)
    if (has_in_place_scatter(e->u.call.args[i])) return true;
  return false;
}

/* A primitive that is one scatter marked inplace=1 by update_in_place:
 * its output is its data input (the first parameter), updated in place.
 * Its kernel does not copy the data, so a primitive that holds such a
 * scatter in any other form would compute garbage: refused. */
static nimble_status_t in_place_form(const nimble_expr *prim, const char *kernel, bool *yes) {
  const nimble_expr *b = prim->u.func.body;
  *yes = false;
  if (!has_in_place_scatter(b)) return nimble_ok();
  const nimble_op *op = pass_called_op(b);
  if (!op || (strcmp(op->name, "scatter_nd") && strcmp(op->name, "scatter_elements")) ||
      !nimble_attrs_int(op, &b->u.call.attrs, "inplace") || prim->u.func.num_params < 1 ||
      b->u.call.args[0] != prim->u.func.params[0])
    return nimble_status_make(NIMBLE_INTERNAL,
                              "%s: an in-place scatter must be a primitive of its own with the data as its "
                              "first parameter",
                              kernel);
  *yes = true;
  return nimble_ok();
}

static nimble_status_t emit(manifest_ctx *c, pass_chain *out, const char *base, const nimble_expr *value,
                            const nimble_expr **var) {
  *var = pass_namer_var(&c->names, base, NULL);
  if (!*var) return NIMBLE_OOM();
  return pass_chain_push(out, *var, value);
}

static nimble_status_t emit_op(manifest_ctx *c, pass_chain *out, const char *base, const char *op, size_t n,
                               const nimble_expr *const *args, const nimble_named_attr_t *attrs,
                               size_t nattrs, const nimble_expr **var) {
  const nimble_expr *call;
  NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, op, n, args, attrs, nattrs, &call));
  return emit(c, out, base, call, var);
}

static nimble_named_attr_t attr_str(const char *name, const char *v) {
  nimble_named_attr_t a = {name, {NIMBLE_ATTR_STRING, 0, 0, v, 0, NULL}};
  return a;
}
static nimble_named_attr_t attr_int(const char *name, int64_t v) {
  nimble_named_attr_t a = {name, {NIMBLE_ATTR_INT, v, 0, NULL, 0, NULL}};
  return a;
}
static nimble_named_attr_t attr_ints(const char *name, const int64_t *v, size_t n) {
  nimble_named_attr_t a = {name, {NIMBLE_ATTR_INTS, 0, 0, NULL, n, v}};
  return a;
}

/* invoke_shape_func for the call's outputs; *shapes is the tuple. */
static nimble_status_t emit_shape_func(manifest_ctx *c, pass_chain *out, const char *kernel,
                                       const nimble_expr *call, nimble_shape_fn_kind_t kind,
                                       const int64_t *ranks, size_t nout, const nimble_expr **shapes) {
  size_t n = call->u.call.num_args;
  const nimble_expr **args = nimble_arena_calloc(c->arena, n ? n : 1, sizeof *args);
  if (!args) return NIMBLE_OOM();
  for (size_t i = 0; i < n; i++) {
    args[i] = call->u.call.args[i];
    if (kind != NIMBLE_SHAPE_DATA_INDEPENDENT) continue;
    /* A static input's shape is a constant; only dynamic ones are read
     * at run time. */
    int64_t dims[NIMBLE_MAX_RANK];
    size_t rank;
    if (pass_type_static_shape(nimble_typing_type_of(c->types, args[i]), dims, &rank)) {
      args[i] = pass_shape_const(c->arena, dims, rank);
      if (!args[i]) return NIMBLE_OOM();
      continue;
    }
    NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "sh", "shape_of", 1, &args[i], NULL, 0, &args[i]));
  }
  nimble_named_attr_t attrs[3] = {attr_str("kernel", kernel), attr_ints("out_ranks", ranks, nout),
                                  attr_str("mode", mode_name(kind))};
  return emit_op(c, out, "shapes", "invoke_shape_func", n, args, attrs, 3, shapes);
}

/* The rank of a shape value (a 1-D int64 of static length). */
static size_t shape_rank(manifest_ctx *c, const nimble_expr *shape) {
  pass_map *ranks = &c->ranks;
  return (size_t)(uintptr_t)pass_map_get(ranks, shape);
}

/* The primitive computing prod(shape) * esize for shapes of `rank` dims:
 * one per (rank, element size), shared by every allocation that needs it. */
static nimble_status_t size_primitive(manifest_ctx *c, size_t rank, int64_t esize, const char **name) {
  *name = nimble_arena_sprintf(c->arena, NIMBLE_PRIMITIVE_PREFIX "storage_size_r%zu_e%lld", rank,
                               (long long)esize);
  if (!*name) return NIMBLE_OOM();
  if (nimble_module_find_func(c->m, *name)) return nimble_ok();
  nimble_dim_t d = nimble_dim_const((int64_t)rank);
  const nimble_type *st = nimble_type_tensor(c->arena, NIMBLE_DTYPE_INT64, 1, &d);
  const nimble_type *i64 = nimble_type_scalar(c->arena, NIMBLE_DTYPE_INT64);
  const nimble_expr *p = st ? nimble_ir_var(c->arena, "p0", st, NULL) : NULL;
  const nimble_expr *e = nimble_ir_scalar_i64(c->arena, esize, NULL);
  if (!i64 || !p || !e) return NIMBLE_OOM();
  const nimble_expr *numel, *bytes;
  NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "prod", 1, &p, NULL, 0, &numel));
  const nimble_expr *margs[2] = {numel, e};
  NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "multiply", 2, margs, NULL, 0, &bytes));
  const nimble_expr *f = nimble_ir_func(c->arena, 0, NULL, 1, &p, i64, bytes, NULL);
  if (!f) return NIMBLE_OOM();
  return nimble_module_add_func(c->m, *name, f);
}

/* alloc_storage + alloc_tensor of one output of type t, bound to `var`
 * (a fresh one when NULL). `shape` is a 1-D int64 value, or NULL for a
 * static shape. */
static nimble_status_t emit_alloc(manifest_ctx *c, pass_chain *out, const nimble_type *t,
                                  const nimble_expr *shape, const nimble_expr *var,
                                  const nimble_expr **tensor) {
  nimble_dtype_t dt = t->u.tensor.dtype;
  int64_t esize = (int64_t)nimble_dtype_size(dt);
  const nimble_expr *size, *storage, *alloc;
  nimble_named_attr_t align = attr_int("alignment", 64);
  nimble_named_attr_t dtype = attr_str("dtype", nimble_dtype_name(dt));
  if (!shape) {
    int64_t dims[NIMBLE_MAX_RANK];
    size_t rank;
    if (!pass_type_static_shape(t, dims, &rank))
      return nimble_status_make(NIMBLE_INTERNAL, "a dynamic output needs a shape");
    int64_t bytes = esize;
    for (size_t i = 0; i < rank; i++)
      if (__builtin_mul_overflow(bytes, dims[i], &bytes))
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "an output of %s overflows "
                                  "64-bit sizes", nimble_type_to_string(c->arena, t));
    size = nimble_ir_scalar_i64(c->arena, bytes, NULL);
    if (!size) return NIMBLE_OOM();
    NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "s", "alloc_storage", 1, &size, &align, 1, &storage));
    const nimble_expr *args[2] = {storage, nimble_ir_scalar_i64(c->arena, 0, NULL)};
    nimble_named_attr_t attrs[2] = {attr_ints("shape", dims, rank), dtype};
    NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "alloc_tensor", 2, args, attrs, 2, &alloc));
  } else {
    /* The size in bytes, prod(shape) * element size, by a small host
     * kernel writing an int64 scalar of its own (static: 8 bytes), so
     * that every computation left outside primitives is a VM instruction. */
    const char *kernel;
    NIMBLE_RETURN_IF_ERROR(size_primitive(c, shape_rank(c, shape), esize, &kernel));
    const nimble_type *i64 = nimble_type_scalar(c->arena, NIMBLE_DTYPE_INT64);
    if (!i64) return NIMBLE_OOM();
    NIMBLE_RETURN_IF_ERROR(emit_alloc(c, out, i64, NULL, NULL, &size));
    const nimble_expr *iargs[2] = {shape, size}, *done;
    nimble_named_attr_t iattrs[2] = {attr_str("kernel", kernel), attr_int("num_outputs", 1)};
    NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "u", "invoke", 2, iargs, iattrs, 2, &done));
    NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "s", "alloc_storage", 1, &size, &align, 1, &storage));
    const nimble_expr *args[3] = {storage, nimble_ir_scalar_i64(c->arena, 0, NULL), shape};
    NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "alloc_tensor", 3, args, &dtype, 1, &alloc));
  }
  if (!var) {
    var = pass_namer_var(&c->names, "o", shape ? t : NULL);
    if (!var) return NIMBLE_OOM();
  }
  *tensor = var;
  return pass_chain_push(out, var, alloc);
}

static nimble_status_t proj_of(manifest_ctx *c, pass_chain *out, const nimble_expr *tuple, size_t k,
                               int64_t rank, const nimble_expr **v) {
  const nimble_expr *p = nimble_ir_proj(c->arena, tuple, k, NULL);
  if (!p) return NIMBLE_OOM();
  NIMBLE_RETURN_IF_ERROR(emit(c, out, "sh", p, v));
  return pass_map_put(&c->ranks, *v, (void *)(uintptr_t)rank) ? nimble_ok() : NIMBLE_OOM();
}

static nimble_status_t manifest_call(manifest_ctx *c, pass_chain *out, const nimble_expr *var,
                                     const nimble_expr *call) {
  const char *kernel = call->u.call.callee->u.global.name;
  const nimble_expr *prim = nimble_module_find_func(c->m, kernel);
  const nimble_type *rt = nimble_typing_type_of(c->types, var);
  if (!prim || !rt) return nimble_status_make(NIMBLE_INTERNAL, "call of %s has no type", kernel);
  bool tuple = rt->kind == NIMBLE_TYPE_TUPLE;
  size_t nout = tuple ? rt->u.tuple.count : 1;
  if (nout == 0 || nout > NIMBLE_MAX_OUTPUTS)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s has %zu outputs", kernel, nout);
  const nimble_type *outs[NIMBLE_MAX_OUTPUTS];
  int64_t ranks[NIMBLE_MAX_OUTPUTS];
  bool dynamic = false;
  for (size_t k = 0; k < nout; k++) {
    outs[k] = tuple ? rt->u.tuple.fields[k] : rt;
    if (outs[k]->kind != NIMBLE_TYPE_TENSOR)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s returns a non-tensor", kernel);
    ranks[k] = (int64_t)outs[k]->u.tensor.rank;
    if (!pass_type_static_shape(outs[k], NULL, NULL)) dynamic = true;
  }
  nimble_shape_fn_kind_t kind = body_kind(prim->u.func.body);
  /* A result variable with its inferred type as annotation (dynamic). */
  const nimble_expr *result = var;
  if (dynamic && !tuple) {
    result = nimble_ir_var(c->arena, var->u.var.name, rt, &var->loc);
    if (!result || !pass_map_put(&c->subst, var, (void *)result)) return NIMBLE_OOM();
  }

  if (is_view(prim) && !tuple) {
    const nimble_expr *shape;
    if (!dynamic) {
      int64_t dims[NIMBLE_MAX_RANK];
      size_t rank;
      pass_type_static_shape(rt, dims, &rank);
      shape = pass_shape_const(c->arena, dims, rank);
      if (!shape) return NIMBLE_OOM();
    } else {
      const nimble_expr *shapes;
      NIMBLE_RETURN_IF_ERROR(emit_shape_func(c, out, kernel, call, kind, ranks, 1, &shapes));
      NIMBLE_RETURN_IF_ERROR(proj_of(c, out, shapes, 0, ranks[0], &shape));
    }
    const nimble_expr *args[2] = {call->u.call.args[0], shape}, *view;
    NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "reshape_tensor", 2, args, NULL, 0, &view));
    return pass_chain_push(out, result, view);
  }

  bool in_place;
  NIMBLE_RETURN_IF_ERROR(in_place_form(prim, kernel, &in_place));
  if (in_place) {
    /* invoke(data, ..., data): the kernel writes the updates into data,
     * which the result then names (update_in_place proved nothing else
     * reads it). No allocation, no shape function. */
    size_t nin = call->u.call.num_args;
    const nimble_expr **args = nimble_arena_calloc(c->arena, nin + 1, sizeof *args);
    if (!args) return NIMBLE_OOM();
    for (size_t i = 0; i < nin; i++) args[i] = call->u.call.args[i];
    args[nin] = call->u.call.args[0];
    nimble_named_attr_t attrs[2] = {attr_str("kernel", kernel), attr_int("num_outputs", 1)};
    const nimble_expr *done;
    NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "u", "invoke", nin + 1, args, attrs, 2, &done));
    return pass_chain_push(out, result, call->u.call.args[0]);
  }

  const nimble_expr *shapes = NULL;
  if (dynamic) NIMBLE_RETURN_IF_ERROR(emit_shape_func(c, out, kernel, call, kind, ranks, nout, &shapes));
  bool upper = kind == NIMBLE_SHAPE_UPPER_BOUND;
  size_t nin = call->u.call.num_args;
  size_t nargs = nin + nout * (upper ? 2 : 1);
  const nimble_expr **args = nimble_arena_calloc(c->arena, nargs, sizeof *args);
  const nimble_expr **tensors = nimble_arena_calloc(c->arena, nout, sizeof *tensors);
  if (!args || !tensors) return NIMBLE_OOM();
  for (size_t i = 0; i < nin; i++) args[i] = call->u.call.args[i];
  for (size_t k = 0; k < nout; k++) {
    const nimble_expr *shape = NULL;
    if (dynamic) NIMBLE_RETURN_IF_ERROR(proj_of(c, out, shapes, k, ranks[k], &shape));
    const nimble_expr *bind = (!tuple && !upper) ? result : NULL;
    NIMBLE_RETURN_IF_ERROR(emit_alloc(c, out, outs[k], shape, bind, &tensors[k]));
    args[nin + k] = tensors[k];
  }
  const nimble_expr **real = NULL;
  if (upper) { /* one int64 [rank] tensor per output for its real shape */
    real = nimble_arena_calloc(c->arena, nout, sizeof *real);
    if (!real) return NIMBLE_OOM();
    for (size_t k = 0; k < nout; k++) {
      nimble_dim_t d = nimble_dim_const(ranks[k]);
      const nimble_type *st = nimble_type_tensor(c->arena, NIMBLE_DTYPE_INT64, 1, &d);
      if (!st) return NIMBLE_OOM();
      NIMBLE_RETURN_IF_ERROR(emit_alloc(c, out, st, NULL, NULL, &real[k]));
      args[nin + nout + k] = real[k];
    }
  }
  nimble_named_attr_t attrs[2] = {attr_str("kernel", kernel),
                                  attr_int("num_outputs", (int64_t)(nargs - nin))};
  const nimble_expr *done;
  NIMBLE_RETURN_IF_ERROR(emit_op(c, out, "u", "invoke", nargs, args, attrs, 2, &done));
  if (upper) {
    for (size_t k = 0; k < nout; k++) {
      const nimble_expr *vargs[2] = {tensors[k], real[k]}, *view;
      NIMBLE_RETURN_IF_ERROR(pass_op_call(c->arena, "reshape_tensor", 2, vargs, NULL, 0, &view));
      if (!tuple) return pass_chain_push(out, result, view);
      NIMBLE_RETURN_IF_ERROR(emit(c, out, "v", view, &tensors[k]));
    }
  }
  if (tuple) {
    const nimble_expr *t = nimble_ir_tuple(c->arena, nout, tensors, NULL);
    if (!t) return NIMBLE_OOM();
    return pass_chain_push(out, var, t);
  }
  return nimble_ok();
}

static nimble_status_t manifest_expr(void *user, const nimble_expr *e, const nimble_expr **out);

static nimble_status_t manifest_chain(manifest_ctx *c, const nimble_expr *e, const nimble_expr **out) {
  pass_chain chain, res = {0};
  NIMBLE_RETURN_IF_ERROR(pass_chain_collect(e, &chain));
  nimble_status_t st = nimble_ok();
  /* A kernel's tuple of outputs (let %t = (%o0, %o1)), where it is in res:
   * its projections become the outputs themselves, and the tuple, if
   * nothing else reads it, goes (a tuple object per call otherwise: an
   * LSTM step's c2 and h2, fuse_ops' side outputs). */
  pass_map tuple_at = {0}; /* tuple variable -> index in res + 1 */
  for (size_t i = 0; !st && i < chain.n; i++) {
    const nimble_expr *v = chain.values[i];
    if (v->kind == NIMBLE_EXPR_CALL && v->u.call.callee->kind == NIMBLE_EXPR_GLOBAL &&
        nimble_passes_is_primitive(v->u.call.callee->u.global.name)) {
      st = manifest_call(c, &res, chain.vars[i], v);
      if (!st && res.n && res.vars[res.n - 1] == chain.vars[i] && res.values[res.n - 1]->kind == NIMBLE_EXPR_TUPLE &&
          !pass_map_put(&tuple_at, chain.vars[i], (void *)(uintptr_t)res.n))
        st = NIMBLE_OOM();
      continue;
    }
    size_t at = v->kind == NIMBLE_EXPR_PROJ ? (size_t)(uintptr_t)pass_map_get(&tuple_at, v->u.proj.tuple) : 0;
    if (at && v->u.proj.index < res.values[at - 1]->u.tuple.count) {
      st = pass_chain_push(&res, chain.vars[i], res.values[at - 1]->u.tuple.fields[v->u.proj.index]);
      continue;
    }
    st = manifest_expr(c, v, &v);
    if (!st) st = pass_chain_push(&res, chain.vars[i], v);
  }
  const nimble_expr *tail = NULL;
  if (!st) st = manifest_expr(c, chain.tail, &tail);
  /* Tuples no one reads any more: dropped (res keeps its order). */
  size_t kept = 0;
  for (size_t i = 0; !st && i < res.n; i++) {
    size_t n = 0;
    if (pass_map_get(&tuple_at, res.vars[i]) == (void *)(uintptr_t)(i + 1)) {
      for (size_t j = i + 1; !st && j < res.n && !n; j++) st = pass_count_var(res.values[j], res.vars[i], &n);
      if (!st && !n) st = pass_count_var(tail, res.vars[i], &n);
      if (!st && !n) continue;
    }
    res.vars[kept] = res.vars[i];
    res.values[kept++] = res.values[i];
  }
  if (!st) res.n = kept;
  pass_map_free(&tuple_at);
  if (!st) {
    *out = pass_chain_build(c->arena, &res, tail);
    if (!*out) st = NIMBLE_OOM();
  }
  pass_chain_free(&chain);
  pass_chain_free(&res);
  return st;
}

static nimble_status_t manifest_expr(void *user, const nimble_expr *e, const nimble_expr **out) {
  manifest_ctx *c = user;
  if (e->kind == NIMBLE_EXPR_LET) return manifest_chain(c, e, out);
  if (e->kind == NIMBLE_EXPR_CALL && e->u.call.callee->kind == NIMBLE_EXPR_GLOBAL &&
      nimble_passes_is_primitive(e->u.call.callee->u.global.name))
    return nimble_status_make(NIMBLE_FAILED_PRECONDITION,
                              "a call of %s outside a let (run fuse_ops, which "
                              "binds every call)",
                              e->u.call.callee->u.global.name);
  return pass_map_children(c->arena, e, manifest_expr, c, out);
}

nimble_status_t nimble_passes_manifest_memory(nimble_module *m) {
  manifest_ctx c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.arena = nimble_module_arena(m);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, (nimble_typing **)&c.types),
                             "the input does not type-check");
  nimble_status_t st = nimble_ok();
  size_t n = nimble_module_num_funcs(m);
  for (size_t i = 0; !st && i < n; i++) {
    const nimble_global_func_t *g = nimble_module_func_at(m, i);
    if (nimble_passes_is_primitive(g->name)) continue;
    const char *name = g->name;
    const nimble_expr *f = g->func, *nf;
    st = pass_namer_init(&c.names, c.arena, f);
    if (!st) st = manifest_expr(&c, f, &nf);
    pass_namer_deinit(&c.names);
    if (!st && c.subst.count) { /* uses of re-created result variables */
      pass_rewriter rw = {0};
      rw.arena = c.arena;
      rw.subst = c.subst;
      st = pass_rewrite(&rw, nf, &nf);
      memset(&c.subst, 0, sizeof c.subst);
      pass_map_free(&rw.subst);
    }
    if (!st && nf != f) st = nimble_module_replace_func(m, name, nf);
    if (st) st = nimble_status_annotate(st, "in @%s", name);
  }
  pass_map_free(&c.subst);
  pass_map_free(&c.ranks);
  return st;
}
