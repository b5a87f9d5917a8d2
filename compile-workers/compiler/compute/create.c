/* Creation compute definitions: zeros, ones, full (static shapes), and the
 * data-dependent constant_of_shape and arange, whose extents the kernel
 * (and the shape function, which takes the input values) reads from the
 * inputs. */
#include <string.h>

#include "compute_internal.h"

static nimble_status_t shape_create(cp_ctx *c, cp_node *n) {
  size_t ns;
  const int64_t *shape = cp_attr_ints(n, "shape", &ns);
  if (ns > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s of rank %zu", n->op->name, ns);
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s of dtype %s", n->op->name, dt);
  n->rank = (int)ns;
  for (int a = 0; a < n->rank; a++) {
    if (shape[a] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: negative dim", n->op->name);
    n->ext[a] = cp_i(c, shape[a]);
  }
  return nimble_ok();
}

static nimble_ln_expr *value_create(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  double v = 0;
  if (!strcmp(n->op->name, "ones")) v = 1;
  else if (!strcmp(n->op->name, "full")) v = cp_attr_float(n, "fill_value");
  return cp_const_of(c, n->type, v);
}

static nimble_status_t shape_constant_of_shape(cp_ctx *c, cp_node *n) {
  cp_node *sp = n->in[0];
  int64_t len;
  const char *dt = cp_attr_string(n, "dtype");
  bool is_bool;
  if (!nimble_dtype_from_name(dt, strlen(dt), &n->dtype) || !cp_ln_type(n->dtype, &n->type, &is_bool))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "constant_of_shape of dtype %s", dt);
  if (sp->rank != 1 || !cp_const_i(sp->ext[0], &len) || len > CP_MAX_RANK)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "constant_of_shape with a shape of unknown length");
  n->rank = (int)len;
  for (int i = 0; i < n->rank; i++) {
    nimble_ln_expr *ii[1] = {cp_i(c, i)};
    n->ext[i] = cp_convert(c, cp_value(c, sp, ii), NIMBLE_LN_I64);
    cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_GE, n->ext[i], cp_i(c, 0))),
             "constant_of_shape: dim %d is negative", i);
  }
  return nimble_ok();
}

static nimble_ln_expr *value_constant_of_shape(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return cp_const_of(c, n->type, cp_attr_float(n, "value"));
}

/* ONNX Range: max(ceil((limit - start) / delta), 0) elements; delta 0 is
 * an error. Floats count in their type (f16/bf16 in f32). */
static nimble_status_t shape_arange(cp_ctx *c, cp_node *n) {
  cp_node *s0 = n->in[0];
  n->type = s0->type;
  n->dtype = s0->dtype;
  n->rank = 1;
  for (int i = 0; i < 3; i++)
    if (n->in[i]->rank != 0 || n->in[i]->type != s0->type)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "arange takes three scalars of one dtype");
  nimble_ln_expr *start = cp_value(c, n->in[0], NULL), *stop = cp_value(c, n->in[1], NULL),
                 *step = cp_value(c, n->in[2], NULL);
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *zero = cp_const_of(c, s0->type, 0);
  cp_check(c, nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_NE, step, zero)), "arange: step is 0");
  nimble_ln_expr *count;
  if (nimble_ln_type_is_float(s0->type)) {
    nimble_ln_type_t ft = cp_acc_type(s0->type);
    nimble_ln_expr *q = nimble_ln_binary(A, NIMBLE_LN_DIV,
                                         nimble_ln_binary(A, NIMBLE_LN_SUB, cp_convert(c, stop, ft), cp_convert(c, start, ft)),
                                         cp_convert(c, step, ft));
    q = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_EQ, step, zero), cp_const_of(c, ft, 0), q);
    nimble_ln_expr *t = nimble_ln_cast(A, NIMBLE_LN_I64, q);
    count = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, nimble_ln_cast(A, ft, t), q),
                             cp_add(c, t, cp_i(c, 1)), t);
  } else {
    /* In i64: an unsigned stop below start must not wrap. */
    nimble_ln_expr *d = nimble_ln_binary(A, NIMBLE_LN_SUB, cp_convert(c, stop, NIMBLE_LN_I64),
                                         cp_convert(c, start, NIMBLE_LN_I64));
    nimble_ln_expr *st = cp_convert(c, step, NIMBLE_LN_I64);
    nimble_ln_expr *q = nimble_ln_binary(A, NIMBLE_LN_DIV, d, st), *r = nimble_ln_binary(A, NIMBLE_LN_REM, d, st);
    nimble_ln_expr *up = nimble_ln_binary(A, NIMBLE_LN_AND, nimble_ln_binary(A, NIMBLE_LN_NE, r, cp_i(c, 0)),
                                          nimble_ln_binary(A, NIMBLE_LN_EQ, nimble_ln_binary(A, NIMBLE_LN_GT, r, cp_i(c, 0)),
                                                           nimble_ln_binary(A, NIMBLE_LN_GT, st, cp_i(c, 0))));
    count = nimble_ln_select(A, up, nimble_ln_binary(A, NIMBLE_LN_ADD, q, cp_i(c, 1)), q);
  }
  n->ext[0] = nimble_ln_binary(A, NIMBLE_LN_MAX, count, cp_i(c, 0));
  return nimble_ok();
}

static nimble_ln_expr *value_arange(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *start = cp_value(c, n->in[0], NULL), *step = cp_value(c, n->in[2], NULL);
  return nimble_ln_binary(c->A, NIMBLE_LN_ADD, start,
                          nimble_ln_binary(c->A, NIMBLE_LN_MUL, cp_convert(c, idx[0], n->type), step));
}

const cp_def cp_defs_create[] = {
    {"constant_of_shape", CP_INJECTIVE, shape_constant_of_shape, value_constant_of_shape, NULL, NULL},
    {"arange", CP_INJECTIVE, shape_arange, value_arange, NULL, NULL},
    {"zeros", CP_INJECTIVE, shape_create, value_create, NULL, NULL},
    {"ones", CP_INJECTIVE, shape_create, value_create, NULL, NULL},
    {"full", CP_INJECTIVE, shape_create, value_create, NULL, NULL},
};
const int cp_defs_create_count = (int)(sizeof cp_defs_create / sizeof cp_defs_create[0]);
