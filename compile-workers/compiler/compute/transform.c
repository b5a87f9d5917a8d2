/* Injective compute definitions: layout operators become index
 * arithmetic on their input's value, so a chain of them reads the
 * original tensor once per output element and stores nothing between.
 * Indices that a select would discard (concatenate, pad) are clamped into
 * range first: both sides of a select are evaluated. */
#include <string.h>

#include "compute_internal.h"

static nimble_ln_expr *clamp(cp_ctx *c, nimble_ln_expr *v, nimble_ln_expr *lo, nimble_ln_expr *hi) {
  return cp_max(c, cp_min(c, v, hi), lo);
}

/* ---- reshape family ---- */

static nimble_status_t shape_reshape(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  size_t ns;
  const int64_t *spec = cp_attr_ints(n, "newshape", &ns);
  if (ns > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "reshape to rank %zu", ns);
  n->rank = (int)ns;
  n->type = x->type;
  n->dtype = x->dtype;
  int infer = -1;
  nimble_ln_expr *known = cp_i(c, 1);
  for (int i = 0; i < n->rank; i++) {
    if (spec[i] == -1) {
      if (infer >= 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reshape: more than one -1");
      infer = i;
      continue;
    }
    if (spec[i] == 0) {
      if (i >= x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reshape: 0 copies a missing dim %d", i);
      n->ext[i] = x->ext[i];
    } else if (spec[i] > 0) {
      n->ext[i] = cp_i(c, spec[i]);
    } else {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reshape: negative dim %lld", (long long)spec[i]);
    }
    known = cp_mul(c, known, n->ext[i]);
  }
  nimble_ln_expr *total = cp_product(c, x->ext, 0, x->rank);
  if (infer >= 0) n->ext[infer] = cp_div(c, total, known);
  cp_check(c, cp_eq(c, cp_product(c, n->ext, 0, n->rank), total), "reshape: element counts differ");
  return nimble_ok();
}

static nimble_ln_expr *flat_of(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *f = cp_i(c, 0);
  for (int a = 0; a < n->rank; a++) f = cp_add(c, cp_mul(c, f, n->ext[a]), idx[a]);
  return f;
}

static nimble_ln_expr *value_reshape(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return cp_value_flat(c, n->in[0], flat_of(c, n, idx));
}

static nimble_status_t shape_flatten(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int64_t axis = cp_attr_int(n, "axis");
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "flatten: axis out of range for rank %d", x->rank);
  n->rank = 2;
  n->type = x->type;
  n->dtype = x->dtype;
  n->ext[0] = cp_product(c, x->ext, 0, (int)axis);
  n->ext[1] = cp_product(c, x->ext, (int)axis, x->rank);
  return nimble_ok();
}

static nimble_status_t shape_squeeze(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  size_t na;
  const int64_t *axes = cp_attr_ints(n, "axes", &na);
  bool drop[CP_MAX_RANK] = {false};
  for (int a = 0; a < x->rank; a++) {
    int64_t v;
    if (na == 0) drop[a] = cp_const_i(x->ext[a], &v) && v == 1;
  }
  for (size_t i = 0; i < na; i++) {
    int ax;
    if (!cp_axis(c, n, axes[i], x->rank, &ax)) return nimble_ok();
    drop[ax] = true;
    cp_check(c, cp_eq(c, x->ext[ax], cp_i(c, 1)), "squeeze: axis %d has extent other than 1", ax);
  }
  n->rank = 0;
  for (int a = 0; a < x->rank; a++)
    if (!drop[a]) n->ext[n->rank++] = x->ext[a];
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_status_t shape_expand_dims(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int64_t axis = cp_attr_int(n, "axis"), k = cp_attr_int(n, "num_newaxis");
  int R = x->rank + (int)k;
  if (k < 0 || R > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "expand_dims to rank %d", R);
  if (axis < 0) axis += x->rank + 1;
  if (axis < 0 || axis > x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "expand_dims: bad axis");
  n->rank = 0;
  for (int a = 0; a < x->rank + 1; a++) {
    if (a == axis)
      for (int j = 0; j < k; j++) n->ext[n->rank++] = cp_i(c, 1);
    if (a < x->rank) n->ext[n->rank++] = x->ext[a];
  }
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_ln_expr *value_as_reshape(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  /* Squeeze, expand_dims and flatten keep the row-major order. */
  return cp_value_flat(c, n->in[0], flat_of(c, n, idx));
}

/* ---- broadcast_to / tile ---- */

static nimble_status_t shape_broadcast_to(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  size_t ns;
  const int64_t *shape = cp_attr_ints(n, "shape", &ns);
  int R = (int)ns > x->rank ? (int)ns : x->rank;
  if (R > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "broadcast_to rank %d", R);
  n->rank = R;
  for (int a = 0; a < R; a++) {
    int ox = a - (R - x->rank), os = a - (R - (int)ns);
    nimble_ln_expr *e = ox >= 0 ? x->ext[ox] : NULL;
    nimble_ln_expr *s = os >= 0 ? cp_i(c, shape[os]) : NULL;
    n->ext[a] = e && s ? cp_broadcast_ext(c, e, s, n->op->name) : e ? e : s;
  }
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_ln_expr *value_broadcast_to(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  cp_broadcast_index(c, n->in[0], n, idx, in_idx);
  return cp_value(c, n->in[0], in_idx);
}

static nimble_status_t shape_tile(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  size_t nr;
  const int64_t *reps = cp_attr_ints(n, "reps", &nr);
  if ((int)nr != x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tile: %zu reps for rank %d", nr, x->rank);
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) {
    if (reps[a] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tile: negative reps");
    n->ext[a] = cp_mul(c, x->ext[a], cp_i(c, reps[a]));
  }
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_ln_expr *value_tile(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) in_idx[a] = cp_rem(c, idx[a], n->in[0]->ext[a]);
  return cp_value(c, n->in[0], in_idx);
}

/* ---- transpose ---- */

static bool perm_of(cp_ctx *c, cp_node *n, int *perm) {
  cp_node *x = n->in[0];
  size_t na;
  const int64_t *axes = cp_attr_ints(n, "axes", &na);
  bool seen[CP_MAX_RANK] = {false};
  if (na == 0) {
    for (int a = 0; a < x->rank; a++) perm[a] = x->rank - 1 - a;
    return true;
  }
  if ((int)na != x->rank) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "transpose: %zu axes for rank %d", na, x->rank);
    return false;
  }
  for (int a = 0; a < x->rank; a++) {
    if (!cp_axis(c, n, axes[a], x->rank, &perm[a])) return false;
    if (seen[perm[a]]) {
      cp_fail(c, NIMBLE_INVALID_ARGUMENT, "transpose: axis %d repeats", perm[a]);
      return false;
    }
    seen[perm[a]] = true;
  }
  return true;
}

static nimble_status_t shape_transpose(cp_ctx *c, cp_node *n) {
  int perm[CP_MAX_RANK];
  cp_node *x = n->in[0];
  n->rank = x->rank;
  n->type = x->type;
  n->dtype = x->dtype;
  if (!perm_of(c, n, perm)) return nimble_ok();
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[perm[a]];
  return nimble_ok();
}

static nimble_ln_expr *value_transpose(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  int perm[CP_MAX_RANK];
  if (!perm_of(c, n, perm)) return NULL;
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) in_idx[perm[a]] = idx[a];
  return cp_value(c, n->in[0], in_idx);
}

/* ---- strided_slice ---- */

typedef struct slice_axis {
  nimble_ln_expr *begin; /* normalized, clamped start */
  int64_t step;
} slice_axis;

static bool slice_axes(cp_ctx *c, cp_node *n, slice_axis *sa, nimble_ln_expr **ext) {
  cp_node *x = n->in[0];
  size_t nb, ne, ns, na;
  const int64_t *begin = cp_attr_ints(n, "begin", &nb);
  const int64_t *end = cp_attr_ints(n, "end", &ne);
  const int64_t *strides = cp_attr_ints(n, "strides", &ns);
  const int64_t *axes = cp_attr_ints(n, "axes", &na);
  for (int a = 0; a < x->rank; a++) {
    sa[a].begin = cp_i(c, 0);
    sa[a].step = 1;
    ext[a] = x->ext[a];
  }
  if (ne != nb || (ns && ns != nb) || (na && na != nb) || (int)nb > x->rank) {
    cp_fail(c, NIMBLE_INVALID_ARGUMENT, "strided_slice: %zu begins, %zu ends, %zu strides, %zu axes", nb, ne, ns, na);
    return false;
  }
  for (size_t i = 0; i < nb; i++) {
    int ax = (int)i;
    if (na && !cp_axis(c, n, axes[i], x->rank, &ax)) return false;
    int64_t s = ns ? strides[i] : 1;
    if (s == 0) {
      cp_fail(c, NIMBLE_INVALID_ARGUMENT, "strided_slice: stride 0 on axis %d", ax);
      return false;
    }
    nimble_ln_expr *d = x->ext[ax];
    int64_t b = begin[i], e = end[i];
    /* Constants' signs are known here; only the extent is symbolic. Large
     * magnitudes (INT64_MAX as "to the end") are clamped before adding. */
    if (b < -(INT64_C(1) << 62)) b = -(INT64_C(1) << 62);
    if (b > (INT64_C(1) << 62)) b = INT64_C(1) << 62;
    if (e < -(INT64_C(1) << 62)) e = -(INT64_C(1) << 62);
    if (e > (INT64_C(1) << 62)) e = INT64_C(1) << 62;
    nimble_ln_expr *bb = b < 0 ? cp_add(c, d, cp_i(c, b)) : cp_i(c, b);
    nimble_ln_expr *ee = e < 0 ? cp_add(c, d, cp_i(c, e)) : cp_i(c, e);
    nimble_ln_expr *len;
    if (s > 0) {
      bb = clamp(c, bb, cp_i(c, 0), d);
      ee = clamp(c, ee, cp_i(c, 0), d);
      len = cp_div(c, cp_add(c, cp_max(c, cp_sub(c, ee, bb), cp_i(c, 0)), cp_i(c, s - 1)), cp_i(c, s));
    } else {
      bb = clamp(c, bb, cp_i(c, -1), cp_sub(c, d, cp_i(c, 1)));
      ee = clamp(c, ee, cp_i(c, -1), cp_sub(c, d, cp_i(c, 1)));
      len = cp_div(c, cp_add(c, cp_max(c, cp_sub(c, bb, ee), cp_i(c, 0)), cp_i(c, -s - 1)), cp_i(c, -s));
    }
    sa[ax].begin = bb;
    sa[ax].step = s;
    ext[ax] = len;
  }
  return true;
}

static nimble_status_t shape_strided_slice(cp_ctx *c, cp_node *n) {
  slice_axis sa[CP_MAX_RANK];
  n->rank = n->in[0]->rank;
  n->type = n->in[0]->type;
  n->dtype = n->in[0]->dtype;
  slice_axes(c, n, sa, n->ext);
  return nimble_ok();
}

static nimble_ln_expr *value_strided_slice(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  slice_axis sa[CP_MAX_RANK];
  nimble_ln_expr *ext[CP_MAX_RANK];
  if (!slice_axes(c, n, sa, ext)) return NULL;
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) in_idx[a] = cp_add(c, sa[a].begin, cp_mul(c, idx[a], cp_i(c, sa[a].step)));
  return cp_value(c, n->in[0], in_idx);
}

/* ---- concatenate ---- */

static nimble_status_t shape_concat(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  int ax;
  n->rank = x->rank;
  n->type = x->type;
  n->dtype = x->dtype;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return nimble_ok();
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  n->ext[ax] = cp_i(c, 0);
  for (int i = 0; i < n->n_in; i++) {
    if (n->in[i]->rank != x->rank)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "concatenate: input %d has rank %d, not %d", i,
                                n->in[i]->rank, x->rank);
    for (int a = 0; a < x->rank; a++)
      if (a != ax)
        cp_check(c, cp_eq(c, n->in[i]->ext[a], x->ext[a]), "concatenate: input %d axis %d differs from input 0", i, a);
    n->ext[ax] = cp_add(c, n->ext[ax], n->in[i]->ext[ax]);
  }
  return nimble_ok();
}

static nimble_ln_expr *value_concat(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), n->rank, &ax)) return NULL;
  nimble_ln_expr *offs[CP_MAX_IN + 1];
  offs[0] = cp_i(c, 0);
  for (int i = 0; i < n->n_in; i++) offs[i + 1] = cp_add(c, offs[i], n->in[i]->ext[ax]);
  nimble_ln_expr *v = NULL;
  for (int i = n->n_in - 1; i >= 0; i--) {
    int64_t e;
    if (cp_const_i(n->in[i]->ext[ax], &e) && e == 0) continue;
    nimble_ln_expr *in_idx[CP_MAX_RANK];
    for (int a = 0; a < n->rank; a++) in_idx[a] = idx[a];
    in_idx[ax] = clamp(c, cp_sub(c, idx[ax], offs[i]), cp_i(c, 0),
                       cp_max(c, cp_sub(c, n->in[i]->ext[ax], cp_i(c, 1)), cp_i(c, 0)));
    nimble_ln_expr *vi = cp_value(c, n->in[i], in_idx);
    v = v ? nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, idx[ax], offs[i + 1]), vi, v) : vi;
  }
  return v ? v : cp_const_of(c, n->type, 0);
}

/* ---- take ---- */

static nimble_status_t shape_take(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *ind = n->in[1];
  int ax;
  n->type = x->type;
  n->dtype = x->dtype;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return nimble_ok();
  if (ind->type != NIMBLE_LN_I64 && ind->type != NIMBLE_LN_I32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "take: indices must be integers");
  if (x->rank - 1 + ind->rank > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "take: rank too large");
  n->rank = 0;
  for (int a = 0; a < ax; a++) n->ext[n->rank++] = x->ext[a];
  for (int a = 0; a < ind->rank; a++) n->ext[n->rank++] = ind->ext[a];
  for (int a = ax + 1; a < x->rank; a++) n->ext[n->rank++] = x->ext[a];
  return nimble_ok();
}

static nimble_ln_expr *value_take(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *x = n->in[0], *ind = n->in[1];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return NULL;
  nimble_ln_expr *iv = cp_convert(c, cp_value(c, ind, idx + ax), NIMBLE_LN_I64);
  nimble_ln_expr *d = x->ext[ax];
  /* Negative indices count from the end; out-of-range ones are clamped
   * (a kernel cannot fail per element without a data race on the error). */
  iv = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, iv, cp_i(c, 0)), cp_add(c, iv, d), iv);
  iv = clamp(c, iv, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < ax; a++) in_idx[a] = idx[a];
  in_idx[ax] = iv;
  for (int a = ax + 1; a < x->rank; a++) in_idx[a] = idx[a - 1 + ind->rank];
  return cp_value(c, x, in_idx);
}

/* ---- pad ---- */

static nimble_status_t shape_pad(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  size_t np;
  const int64_t *pads = cp_attr_ints(n, "pads", &np);
  if ((int)np != 2 * x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "pad: %zu pads for rank %d", np, x->rank);
  const char *mode = cp_attr_string(n, "mode");
  if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect"))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "pad mode '%s'", mode);
  n->rank = x->rank;
  n->type = x->type;
  n->dtype = x->dtype;
  for (int a = 0; a < x->rank; a++) {
    n->ext[a] = cp_add(c, cp_add(c, x->ext[a], cp_i(c, pads[a])), cp_i(c, pads[a + x->rank]));
    cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_GE, n->ext[a], cp_i(c, 0))),
             "pad: axis %d crops below zero", a);
  }
  return nimble_ok();
}

static nimble_ln_expr *value_pad(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *x = n->in[0];
  size_t np;
  const int64_t *pads = cp_attr_ints(n, "pads", &np);
  const char *mode = cp_attr_string(n, "mode");
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  nimble_ln_expr *inside = NULL;
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *j = cp_sub(c, idx[a], cp_i(c, pads[a]));
    nimble_ln_expr *last = cp_max(c, cp_sub(c, x->ext[a], cp_i(c, 1)), cp_i(c, 0));
    if (strcmp(mode, "reflect") == 0) {
      j = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, j, cp_i(c, 0)), cp_sub(c, cp_i(c, 0), j), j);
      j = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_GT, j, last), cp_sub(c, cp_add(c, last, last), j), j);
    } else if (strcmp(mode, "constant") == 0) {
      nimble_ln_expr *in = nimble_ln_binary(c->A, NIMBLE_LN_AND, nimble_ln_binary(c->A, NIMBLE_LN_GE, j, cp_i(c, 0)),
                                            nimble_ln_binary(c->A, NIMBLE_LN_LT, j, x->ext[a]));
      if (pads[a] != 0 || pads[a + x->rank] > 0) inside = inside ? nimble_ln_binary(c->A, NIMBLE_LN_AND, inside, in) : in;
    }
    in_idx[a] = clamp(c, j, cp_i(c, 0), last);
  }
  nimble_ln_expr *v = cp_value(c, x, in_idx);
  if (inside) v = nimble_ln_select(c->A, inside, v, cp_const_of(c, n->type, cp_attr_float(n, "value")));
  return v;
}

/* dyn_reshape(x, shape): the new shape is a 1-D int64 tensor of static
 * length whose values the kernel reads (0 copies, -1 infers). A shape
 * function would need those values: data-dependent, not built here. */
static nimble_status_t shape_dyn_reshape(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *sp = n->in[1];
  int64_t len;
  n->type = x->type;
  n->dtype = x->dtype;
  if (c->shape_mode && !c->shape_values)
    return nimble_status_make(NIMBLE_INTERNAL, "dyn_reshape's shape function needs the input values");
  if (sp->rank != 1 || !cp_const_i(sp->ext[0], &len) || len > CP_MAX_RANK)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dyn_reshape with a shape of unknown length");
  n->rank = (int)len;
  nimble_ln_expr *sv[CP_MAX_RANK], *known = cp_i(c, 1), *has_infer = cp_i(c, 0);
  for (int i = 0; i < n->rank; i++) {
    nimble_ln_expr *ii[1] = {cp_i(c, i)};
    sv[i] = cp_convert(c, cp_value(c, sp, ii), NIMBLE_LN_I64);
    nimble_ln_expr *d = i < x->rank ? nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, sv[i], cp_i(c, 0)),
                                                       x->ext[i], sv[i])
                                    : sv[i];
    n->ext[i] = d;
    nimble_ln_expr *is_inf = nimble_ln_binary(c->A, NIMBLE_LN_EQ, sv[i], cp_i(c, -1));
    known = cp_mul(c, known, nimble_ln_select(c->A, is_inf, cp_i(c, 1), d));
    has_infer = cp_add(c, has_infer, nimble_ln_cast(c->A, NIMBLE_LN_I64, is_inf));
  }
  nimble_ln_expr *total = cp_product(c, x->ext, 0, x->rank);
  for (int i = 0; i < n->rank; i++)
    n->ext[i] = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_EQ, sv[i], cp_i(c, -1)), cp_div(c, total, known),
                                 n->ext[i]);
  cp_check(c, nimble_ln_cast(c->A, NIMBLE_LN_I64, nimble_ln_binary(c->A, NIMBLE_LN_LE, has_infer, cp_i(c, 1))),
           "dyn_reshape: more than one -1");
  cp_check(c, cp_eq(c, cp_product(c, n->ext, 0, n->rank), total), "dyn_reshape: element counts differ");
  return nimble_ok();
}

/* expand(x, shape): broadcast with a shape read from a 1-D tensor
 * (data-dependent, like dyn_reshape). */
static nimble_status_t shape_expand(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *sp = n->in[1];
  int64_t len;
  n->type = x->type;
  n->dtype = x->dtype;
  if (sp->rank != 1 || !cp_const_i(sp->ext[0], &len) || len > CP_MAX_RANK)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "expand with a shape of unknown length");
  int R = (int)len > x->rank ? (int)len : x->rank;
  n->rank = R;
  for (int a = 0; a < R; a++) {
    int ox = a - (R - x->rank), os = a - (R - (int)len);
    nimble_ln_expr *e = ox >= 0 ? x->ext[ox] : NULL, *v = NULL;
    if (os >= 0) {
      nimble_ln_expr *ii[1] = {cp_i(c, os)};
      v = cp_convert(c, cp_value(c, sp, ii), NIMBLE_LN_I64);
    }
    n->ext[a] = e && v ? cp_broadcast_ext(c, e, v, "expand") : e ? e : v;
  }
  return nimble_ok();
}

/* gather_nd(data, indices, batch_dims=b): indices [..., k] pick slices of
 * data after b leading dims shared with indices. */
static nimble_status_t shape_gather_nd(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0], *ind = n->in[1];
  int64_t b = cp_attr_int(n, "batch_dims"), k;
  n->type = x->type;
  n->dtype = x->dtype;
  if (ind->type != NIMBLE_LN_I64 && ind->type != NIMBLE_LN_I32)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_nd: indices must be integers");
  if (ind->rank < 1 || !cp_const_i(ind->ext[ind->rank - 1], &k) || b < 0 || b >= ind->rank || k < 1 ||
      b + k > x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "gather_nd: indices do not fit the data");
  n->rank = 0;
  for (int a = 0; a < (int)b; a++) cp_check(c, cp_eq(c, x->ext[a], ind->ext[a]), "gather_nd: batch dim %d differs", a);
  for (int a = 0; a + 1 < ind->rank; a++) n->ext[n->rank++] = ind->ext[a];
  for (int a = (int)(b + k); a < x->rank; a++) n->ext[n->rank++] = x->ext[a];
  if (n->rank > CP_MAX_RANK) return nimble_status_make(NIMBLE_UNIMPLEMENTED, "gather_nd: rank too large");
  return nimble_ok();
}

static nimble_ln_expr *value_gather_nd(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  cp_node *x = n->in[0], *ind = n->in[1];
  int64_t b = cp_attr_int(n, "batch_dims"), k;
  cp_const_i(ind->ext[ind->rank - 1], &k);
  nimble_ln_expr *xi[CP_MAX_RANK], *ii[CP_MAX_RANK];
  for (int a = 0; a + 1 < ind->rank; a++) ii[a] = idx[a];
  for (int a = 0; a < (int)b; a++) xi[a] = idx[a];
  for (int j = 0; j < (int)k; j++) {
    ii[ind->rank - 1] = cp_i(c, j);
    nimble_ln_expr *v = cp_convert(c, cp_value(c, ind, ii), NIMBLE_LN_I64), *d = x->ext[b + j];
    v = nimble_ln_select(c->A, nimble_ln_binary(c->A, NIMBLE_LN_LT, v, cp_i(c, 0)), cp_add(c, v, d), v);
    xi[b + j] = clamp(c, v, cp_i(c, 0), cp_max(c, cp_sub(c, d, cp_i(c, 1)), cp_i(c, 0)));
  }
  for (int a = (int)(b + k); a < x->rank; a++) xi[a] = idx[ind->rank - 1 + (a - (int)(b + k))];
  return cp_value(c, x, xi);
}

/* ---- nonzero (upper bound) ---- */

static nimble_status_t shape_nonzero(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  n->type = NIMBLE_LN_I64;
  n->dtype = NIMBLE_DTYPE_INT64;
  n->rank = 2;
  n->ext[0] = cp_i(c, x->rank);
  n->ext[1] = cp_product(c, x->ext, 0, x->rank); /* the bound */
  return nimble_ok();
}

nimble_ln_stmt *cp_emit_nonzero(cp_ctx *c, cp_node *n, nimble_ln_param *out, nimble_ln_param *out_shape) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  nimble_ln_expr *numel = n->ext[1];
  cp_check(c, cp_eq(c, nimble_ln_shape(A, out, 0), n->ext[0]), "nonzero: output axis 0 is not the input's rank");
  cp_check(c, nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_GE, nimble_ln_shape(A, out, 1), numel)),
           "nonzero: output axis 1 is below the bound (the input's element count)");
  cp_check(c, cp_eq(c, nimble_ln_shape(A, out_shape, 0), cp_i(c, 2)), "nonzero: the shape output needs 2 extents");
  /* Pass 1 counts, pass 2 writes row a at a * count + j, so the first
   * rank * count elements are the compact [rank, count] result. */
  nimble_ln_var *f1 = cp_var(c, "f", NIMBLE_LN_I64), *f2 = cp_var(c, "f", NIMBLE_LN_I64);
  nimble_ln_var *cnt = cp_var(c, "cnt", NIMBLE_LN_I64), *total = cp_var(c, "total", NIMBLE_LN_I64);
  nimble_ln_var *j = cp_var(c, "j", NIMBLE_LN_I64);
  nimble_ln_expr *v1 = cp_value_flat(c, x, nimble_ln_ref(A, f1)), *v2 = cp_value_flat(c, x, nimble_ln_ref(A, f2));
  if (!v1 || !v2) return NULL;
  nimble_ln_expr *nz1 = nimble_ln_binary(A, NIMBLE_LN_NE, v1, cp_const_of(c, v1->type, 0));
  nimble_ln_expr *nz2 = nimble_ln_binary(A, NIMBLE_LN_NE, v2, cp_const_of(c, v2->type, 0));
  nimble_ln_stmt *count = cp_for(c, f1, numel, NIMBLE_LN_SERIAL, 0,
                                 nimble_ln_if(A, nz1, nimble_ln_assign(A, cnt, cp_add(c, nimble_ln_ref(A, cnt), cp_i(c, 1))), NULL));
  nimble_ln_stmt *st[CP_MAX_RANK + 1];
  int ns = 0;
  nimble_ln_expr *fr = nimble_ln_ref(A, f2);
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *ia = cp_rem(c, cp_div(c, fr, cp_product(c, x->ext, a + 1, x->rank)), x->ext[a]);
    if (a == 0) ia = cp_div(c, fr, cp_product(c, x->ext, 1, x->rank));
    st[ns++] = nimble_ln_store(A, out, cp_add(c, cp_mul(c, cp_i(c, a), nimble_ln_ref(A, total)), nimble_ln_ref(A, j)), ia);
  }
  st[ns++] = nimble_ln_assign(A, j, cp_add(c, nimble_ln_ref(A, j), cp_i(c, 1)));
  nimble_ln_stmt *write = cp_for(c, f2, numel, NIMBLE_LN_SERIAL, 0, nimble_ln_if(A, nz2, nimble_ln_seq(A, st, (size_t)ns), NULL));
  nimble_ln_stmt *shape = nimble_ln_seq2(A, nimble_ln_store(A, out_shape, cp_i(c, 0), cp_i(c, x->rank)),
                                         nimble_ln_store(A, out_shape, cp_i(c, 1), nimble_ln_ref(A, total)));
  nimble_ln_stmt *after = nimble_ln_let(A, total, nimble_ln_ref(A, cnt),
                                        nimble_ln_decl(A, j, cp_i(c, 0), nimble_ln_seq2(A, write, shape)));
  return nimble_ln_decl(A, cnt, cp_i(c, 0), nimble_ln_seq2(A, count, after));
}

/* dyn_strided_slice(x, begin, end, [strides, [axes]]): ONNX Slice with
 * the bounds as 1-D tensors read at run time. Every axis gets a begin and
 * a step (selected from the entries naming it, else the whole axis);
 * negative bounds count from the end, then clamp as numpy does. The
 * derived begin and step live in n->aux for the value. */
static nimble_status_t shape_dyn_slice(cp_ctx *c, cp_node *n) {
  cp_node *x = n->in[0];
  nimble_ln_arena *A = c->A;
  n->rank = x->rank;
  n->type = x->type;
  n->dtype = x->dtype;
  int64_t len = 0;
  for (int i = 1; i < n->n_in; i++) {
    int64_t l;
    if (n->in[i]->rank != 1 || !cp_const_i(n->in[i]->ext[0], &l) || l > CP_MAX_RANK)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "dyn_strided_slice with bounds of unknown length");
    if (i == 1) len = l;
    else if (l != len) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_strided_slice: bound lengths differ");
  }
  if (len > x->rank) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "dyn_strided_slice: more bounds than axes");
  nimble_ln_expr *vals[4][CP_MAX_RANK];
  for (int i = 1; i < n->n_in; i++)
    for (int j = 0; j < len; j++) {
      nimble_ln_expr *jj[1] = {cp_i(c, j)};
      vals[i - 1][j] = cp_convert(c, cp_value(c, n->in[i], jj), NIMBLE_LN_I64);
    }
  for (int a = 0; a < x->rank; a++) {
    nimble_ln_expr *d = x->ext[a];
    nimble_ln_expr *b = cp_i(c, 0), *e = d, *s = cp_i(c, 1);
    for (int j = 0; j < len; j++) {
      nimble_ln_expr *match;
      if (n->n_in == 5) {
        nimble_ln_expr *ax = vals[3][j];
        ax = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, ax, cp_i(c, 0)), cp_add(c, ax, cp_i(c, x->rank)), ax);
        match = nimble_ln_binary(A, NIMBLE_LN_EQ, ax, cp_i(c, a));
      } else if (j == a) {
        match = NULL; /* statically this axis */
      } else {
        continue;
      }
      b = match ? nimble_ln_select(A, match, vals[0][j], b) : vals[0][j];
      e = match ? nimble_ln_select(A, match, vals[1][j], e) : vals[1][j];
      if (n->n_in >= 4) s = match ? nimble_ln_select(A, match, vals[2][j], s) : vals[2][j];
    }
    cp_check(c, nimble_ln_cast(A, NIMBLE_LN_I64, nimble_ln_binary(A, NIMBLE_LN_NE, s, cp_i(c, 0))),
             "dyn_strided_slice: step 0 on axis %d", a);
    nimble_ln_expr *zero = cp_i(c, 0), *m1 = cp_i(c, -1), *last = cp_sub(c, d, cp_i(c, 1));
    nimble_ln_expr *pos = nimble_ln_binary(A, NIMBLE_LN_GT, s, zero);
    b = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, b, zero), cp_add(c, b, d), b);
    e = nimble_ln_select(A, nimble_ln_binary(A, NIMBLE_LN_LT, e, zero), cp_add(c, e, d), e);
    b = nimble_ln_select(A, pos, clamp(c, b, zero, d), clamp(c, b, m1, last));
    e = nimble_ln_select(A, pos, clamp(c, e, zero, d), clamp(c, e, m1, last));
    /* |s| as a positive divisor, capped at the extent (a larger step takes
     * one element either way), so nothing overflows. */
    nimble_ln_expr *big = cp_max(c, d, cp_i(c, 1));
    nimble_ln_expr *as = nimble_ln_select(A, pos, cp_min(c, s, big), cp_sub(c, zero, cp_max(c, s, cp_sub(c, zero, big))));
    nimble_ln_expr *span = nimble_ln_select(A, pos, cp_sub(c, e, b), cp_sub(c, b, e));
    n->ext[a] = cp_div(c, cp_add(c, cp_max(c, span, zero), cp_sub(c, as, cp_i(c, 1))), as);
    n->aux[a] = b;
    n->aux[CP_MAX_RANK + a] = nimble_ln_select(A, pos, s, cp_sub(c, zero, as));
  }
  return nimble_ok();
}

static nimble_ln_expr *value_dyn_slice(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) in_idx[a] = cp_add(c, n->aux[a], cp_mul(c, idx[a], n->aux[CP_MAX_RANK + a]));
  return cp_value(c, n->in[0], in_idx);
}

/* ---- split: a tuple of slices along one axis ---- */

static nimble_status_t shape_split(cp_ctx *c, cp_node *n) {
  /* The node itself stands for the tuple; cp_split_parts gives the parts. */
  cp_node *x = n->in[0];
  n->rank = x->rank;
  for (int a = 0; a < x->rank; a++) n->ext[a] = x->ext[a];
  n->type = x->type;
  n->dtype = x->dtype;
  return nimble_ok();
}

static nimble_ln_expr *value_part(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  nimble_ln_expr *in_idx[CP_MAX_RANK];
  for (int a = 0; a < n->rank; a++) in_idx[a] = idx[a];
  in_idx[n->part_axis] = cp_add(c, idx[n->part_axis], n->part_offset);
  return cp_value(c, n->in[0], in_idx);
}

static const cp_def kPartDef = {"split", CP_INJECTIVE, shape_split, value_part, NULL, NULL};

bool cp_split_parts(cp_ctx *c, cp_node *n, cp_node **parts, int *count) {
  cp_node *x = n->in[0];
  int ax;
  if (!cp_axis(c, n, cp_attr_int(n, "axis"), x->rank, &ax)) return false;
  int64_t sections = cp_attr_int(n, "sections");
  size_t ns;
  const int64_t *sizes = cp_attr_ints(n, "sizes", &ns);
  int k = ns ? (int)ns : (int)sections;
  if (k < 1 || k > CP_MAX_OUTPUTS) {
    cp_fail(c, NIMBLE_UNIMPLEMENTED, "%s: split into %d parts (at most %d)", c->prim, k, CP_MAX_OUTPUTS);
    return false;
  }
  nimble_ln_expr *off = cp_i(c, 0), *each = NULL;
  if (!ns) {
    each = cp_div(c, x->ext[ax], cp_i(c, k));
    cp_check(c, cp_eq(c, cp_rem(c, x->ext[ax], cp_i(c, k)), cp_i(c, 0)), "split: axis %d does not divide into %d", ax, k);
  }
  for (int p = 0; p < k; p++) {
    cp_node *q = nimble_ln_arena_alloc(c->A, sizeof *q);
    if (!q) {
      cp_fail(c, NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", c->prim);
      return false;
    }
    *q = *n;
    q->def = &kPartDef;
    q->part_axis = ax;
    q->part_offset = off;
    q->ext[ax] = ns ? cp_i(c, sizes[p]) : each;
    off = cp_add(c, off, q->ext[ax]);
    parts[p] = q;
  }
  if (ns) cp_check(c, cp_eq(c, off, x->ext[ax]), "split: sizes do not add up to axis %d", ax);
  *count = k;
  return true;
}

/* ---- check_rank: a shape vector checked to have `rank` entries ---- */

static nimble_status_t shape_check_rank(cp_ctx *c, cp_node *n) {
  cp_node *s = n->in[0];
  int64_t want = cp_attr_int(n, "rank");
  if (s->rank != 1 || want < 0 || want > CP_MAX_RANK)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "check_rank: a 1-D shape and a rank in 0 to %d", CP_MAX_RANK);
  const char *what = cp_attr_string(n, "what");
  if (!what || !what[0]) what = "the tensor";
  n->rank = 1;
  n->type = s->type;
  n->dtype = s->dtype;
  n->ext[0] = cp_i(c, want);
  /* One check per rank it might have instead, so that the message (static
   * text) says which. */
  for (int r = 0; r <= CP_MAX_RANK; r++)
    if (r != want)
      cp_check(c, nimble_ln_binary(c->A, NIMBLE_LN_NE, s->ext[0], cp_i(c, r)), "%s has rank %d, expected rank %lld",
               what, r, (long long)want);
  cp_check(c, cp_eq(c, s->ext[0], n->ext[0]), "%s has a rank above %d, expected rank %lld", what, CP_MAX_RANK,
           (long long)want);
  return nimble_ok();
}

static nimble_ln_expr *value_check_rank(cp_ctx *c, cp_node *n, nimble_ln_expr *const *idx) {
  return cp_value(c, n->in[0], idx);
}

#define INJ(name, shape, value) {name, CP_INJECTIVE, shape, value, NULL, NULL}

const cp_def cp_defs_transform[] = {
    INJ("reshape", shape_reshape, value_reshape),
    INJ("dyn_reshape", shape_dyn_reshape, value_reshape),
    INJ("flatten", shape_flatten, value_as_reshape),
    INJ("squeeze", shape_squeeze, value_as_reshape),
    INJ("expand_dims", shape_expand_dims, value_as_reshape),
    INJ("broadcast_to", shape_broadcast_to, value_broadcast_to),
    INJ("tile", shape_tile, value_tile),
    INJ("transpose", shape_transpose, value_transpose),
    INJ("strided_slice", shape_strided_slice, value_strided_slice),
    INJ("concatenate", shape_concat, value_concat),
    INJ("take", shape_take, value_take),
    INJ("pad", shape_pad, value_pad),
    INJ("split", shape_split, value_part),
    INJ("nonzero", shape_nonzero, NULL),
    INJ("dyn_strided_slice", shape_dyn_slice, value_dyn_slice),
    INJ("expand", shape_expand, value_broadcast_to),
    INJ("gather_nd", shape_gather_nd, value_gather_nd),
    INJ("check_rank", shape_check_rank, value_check_rank),
};
const int cp_defs_transform_count = (int)(sizeof cp_defs_transform / sizeof cp_defs_transform[0]);

/* A concatenate that is the whole primitive, of inputs that are kernel
 * parameters: per input, one copy of each contiguous run (the axes after
 * `axis` flattened) into its slice of the output, instead of the generic
 * nest's per-element select between clamped loads of every input. Runs of
 * fewer than 8 constant elements keep the generic nest; NULL then (and
 * for inputs that are computations). */
nimble_ln_stmt *cp_concat_copy(cp_ctx *c, cp_node *n, nimble_ln_param *o) {
  int ax, R = n->rank;
  if (R < 1 || n->n_in < 1 || !cp_axis(c, n, cp_attr_int(n, "axis"), R, &ax)) return NULL;
  for (int i = 0; i < n->n_in; i++)
    if (n->in[i]->kind != CP_PARAM || !n->in[i]->param || n->in[i]->rank != R) return NULL;
  nimble_ln_expr *outer = cp_product(c, n->ext, 0, ax), *inner = cp_product(c, n->ext, ax + 1, R);
  int64_t inner_c;
  if (cp_const_i(inner, &inner_c) && inner_c < 8) return NULL;
  int vw = c->opt.vector_width > 1 ? c->opt.vector_width : 0;
  nimble_ln_stmt *parts[CP_MAX_IN];
  nimble_ln_expr *off = cp_i(c, 0), *one = cp_i(c, 1);
  for (int i = 0; i < n->n_in; i++) {
    cp_node *x = n->in[i];
    nimble_ln_expr *mid = x->ext[ax];
    nimble_ln_var *r = cp_var(c, "r", NIMBLE_LN_I64), *k = cp_var(c, "k", NIMBLE_LN_I64);
    nimble_ln_expr *rr = nimble_ln_ref(c->A, r), *kr = nimble_ln_ref(c->A, k);
    /* run r = (o, m) of input i goes to output run o * ext[ax] + off + m. */
    nimble_ln_expr *m1 = cp_max(c, mid, one);
    nimble_ln_expr *dst_run = cp_add(c, cp_mul(c, cp_div(c, rr, m1), n->ext[ax]), cp_add(c, off, cp_rem(c, rr, m1)));
    nimble_ln_expr *v = cp_convert(c, cp_load(c, x->param, cp_add(c, cp_mul(c, rr, inner), kr), x->type), n->type);
    nimble_ln_stmt *copy = cp_for(c, k, inner, vw ? NIMBLE_LN_VECTORIZED : NIMBLE_LN_SERIAL, vw,
                                  nimble_ln_store(c->A, o, cp_add(c, cp_mul(c, dst_run, inner), kr), v));
    nimble_ln_stmt *runs = cp_for(c, r, cp_mul(c, outer, mid), NIMBLE_LN_SERIAL, 0, copy);
    if (c->opt.parallel && runs) runs = nimble_ln_chunk(c->A, runs, cp_rows_per_task(c, runs->end, inner));
    if (!runs) return NULL;
    parts[i] = runs;
    off = cp_add(c, off, mid);
  }
  return nimble_ln_seq(c->A, parts, (size_t)n->n_in);
}
