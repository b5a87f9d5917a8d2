/* Simplification of shape code, using the types inference found:
 *   shape_of(%x)            -> a constant when %x's shape is static
 *   take(shape_of(%x), i)   -> dim i as a constant when that dim is static
 *                              (even if others are dynamic)
 *   reshape-like(%x, ...)   -> %x when the result has %x's very shape
 *   cast(%x) to its dtype   -> %x
 *   x + 0, x - 0, x * 1, x / 1 on integers (shape arithmetic) -> x, when
 *                              broadcasting does not change x's type
 * The constants it makes are folded further by fold_constants. */
#include <string.h>

#include "passes/pass_internal.h"

typedef struct simplify_ctx {
  const nimble_typing *types;
  pass_map shape_src; /* variable bound to shape_of(y) -> y */
} simplify_ctx;

static bool same_shape(const nimble_type *a, const nimble_type *b) {
  if (!a || !b || a->kind != NIMBLE_TYPE_TENSOR || b->kind != NIMBLE_TYPE_TENSOR) return false;
  if (a->u.tensor.dtype != b->u.tensor.dtype || a->u.tensor.rank != b->u.tensor.rank) return false;
  for (size_t i = 0; i < a->u.tensor.rank; i++) {
    nimble_dim_t x = a->u.tensor.dims[i], y = b->u.tensor.dims[i];
    if (x.kind == NIMBLE_DIM_ANY || !nimble_dim_same(x, y)) return false; /* Any proves nothing */
  }
  return true;
}

static bool const_int_scalar(const nimble_expr *e, int64_t *v) {
  if (e->kind != NIMBLE_EXPR_CONSTANT || e->u.constant.num_elements != 1) return false;
  switch (e->u.constant.dtype) {
    case NIMBLE_DTYPE_INT64: *v = *(const int64_t *)e->u.constant.data; return true;
    case NIMBLE_DTYPE_INT32: *v = *(const int32_t *)e->u.constant.data; return true;
    default: return false;
  }
}

/* The tensor whose shape `e` is: shape_of(y) or a variable bound to one. */
static const nimble_expr *shape_source(simplify_ctx *c, const nimble_expr *e) {
  if (pass_is_op_call(e, "shape_of")) return e->u.call.args[0];
  if (e->kind == NIMBLE_EXPR_VAR) return pass_map_get(&c->shape_src, e);
  return NULL;
}

static nimble_status_t simplify_post(pass_rewriter *rw, const nimble_expr *orig, const nimble_expr *e,
                                     const nimble_expr **out) {
  simplify_ctx *c = rw->user;
  *out = e;
  const nimble_op *op = pass_called_op(e);
  if (!op || orig->kind != NIMBLE_EXPR_CALL || pass_is_memory_op(op)) return nimble_ok();
  const char *n = op->name;
  const nimble_type *rt = nimble_typing_type_of(c->types, orig);
  int64_t dims[NIMBLE_MAX_RANK];
  size_t rank;
  if (!strcmp(n, "shape_of")) {
    const nimble_type *xt = nimble_typing_type_of(c->types, orig->u.call.args[0]);
    if (pass_type_static_shape(xt, dims, &rank)) {
      *out = pass_shape_const(rw->arena, dims, rank);
      if (!*out) return NIMBLE_OOM();
    }
    return nimble_ok();
  }
  if (!strcmp(n, "take") && e->u.call.num_args == 2) {
    const nimble_expr *src = shape_source(c, e->u.call.args[0]);
    int64_t idx;
    if (!src || !const_int_scalar(e->u.call.args[1], &idx)) return nimble_ok();
    const nimble_type *xt = nimble_typing_type_of(c->types, src);
    if (!xt || xt->kind != NIMBLE_TYPE_TENSOR) return nimble_ok();
    int64_t r = (int64_t)xt->u.tensor.rank;
    if (idx < 0) idx += r;
    if (idx < 0 || idx >= r || xt->u.tensor.dims[idx].kind != NIMBLE_DIM_CONST) return nimble_ok();
    *out = nimble_ir_scalar_i64(rw->arena, xt->u.tensor.dims[idx].value, &e->loc);
    return *out ? nimble_ok() : NIMBLE_OOM();
  }
  static const char *const reshapes[] = {"reshape", "dyn_reshape", "squeeze", "flatten",
                                         "broadcast_to", "expand", "cast", "copy"};
  for (size_t i = 0; i < sizeof reshapes / sizeof *reshapes; i++) {
    if (strcmp(n, reshapes[i]) != 0) continue;
    if (same_shape(rt, nimble_typing_type_of(c->types, orig->u.call.args[0])))
      *out = e->u.call.args[0];
    return nimble_ok();
  }
  bool add = !strcmp(n, "add"), sub = !strcmp(n, "subtract");
  bool mul = !strcmp(n, "multiply"), div = !strcmp(n, "divide");
  if ((add || sub || mul || div) && e->u.call.num_args == 2 && rt && rt->kind == NIMBLE_TYPE_TENSOR &&
      nimble_dtype_is_int(rt->u.tensor.dtype)) {
    int64_t k;
    int64_t unit = (add || sub) ? 0 : 1;
    for (size_t side = 0; side < 2; side++) {
      if ((sub || div) && side == 0) continue; /* 0 - x and 1 / x are not x */
      size_t other = 1 - side;
      if (const_int_scalar(e->u.call.args[side], &k) && k == unit &&
          same_shape(rt, nimble_typing_type_of(c->types, orig->u.call.args[other]))) {
        *out = e->u.call.args[other];
        return nimble_ok();
      }
    }
  }
  return nimble_ok();
}

static nimble_status_t simplify_bind(pass_rewriter *rw, const nimble_expr *var, const nimble_expr *value,
                                     bool *drop) {
  simplify_ctx *c = rw->user;
  (void)drop;
  if (pass_is_op_call(value, "shape_of") &&
      !pass_map_put(&c->shape_src, var, (void *)value->u.call.args[0]))
    return NIMBLE_OOM();
  return nimble_ok();
}

nimble_status_t nimble_passes_simplify_shapes(nimble_module *m) {
  simplify_ctx c = {0};
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_typing_infer_module(m, (nimble_typing **)&c.types),
                             "the input does not type-check");
  pass_rewriter rw = {0};
  rw.arena = nimble_module_arena(m);
  rw.user = &c;
  rw.post = simplify_post;
  rw.bind = simplify_bind;
  nimble_status_t st = pass_rewrite_module(&rw, m);
  pass_map_free(&rw.subst);
  pass_map_free(&c.shape_src);
  return st;
}
