/* Layout operators: reshape (0/-1), transpose, concatenate, strided_slice,
 * take, split, squeeze, expand_dims, broadcast_to, tile, pad, flatten and
 * shape_of. */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_tensor_sig_t sig_empty(nimble_dtype_t dtype) {
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = dtype;
  return r;
}

/* Reshape to `spec` (ONNX semantics: 0 copies the input dim at the same
 * position, one -1 takes what is left). Shared with dyn_reshape, whose
 * spec arrives as a tensor value. Dims the types cannot know become Any,
 * except that equal dims on both sides cancel, so (n, 128) reshaped to
 * (-1, 128) is (n, 128). */
nimble_status_t nimble_reshape_infer(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                     const int64_t *spec, size_t n, nimble_tensor_sig_t *out) {
  char buf[160];
  if (n > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "new shape has %zu dims, at most %d", n,
                              NIMBLE_MAX_RANK);
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  r.rank = n;
  int infer_at = -1;
  bool copied[NIMBLE_MAX_RANK] = {false};
  for (size_t i = 0; i < n; i++) {
    if (spec[i] == -1) {
      if (infer_at >= 0)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "new shape has more than one -1");
      infer_at = (int)i;
    } else if (spec[i] == 0) {
      if (i >= x->rank)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "new shape copies dim %zu (0) of %s, which has no such dim", i,
                                  SIG_STR(x, buf));
      r.dims[i] = nimble_dim_resolve(ctx, x->dims[i]);
      copied[i] = true;
    } else if (spec[i] < -1) {
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "new shape has negative dim %" PRId64,
                                spec[i]);
    } else {
      r.dims[i] = nimble_dim_const(spec[i]);
    }
  }
  /* Cancel equal dims, then look at what is left on each side. */
  bool used_in[NIMBLE_MAX_RANK] = {false}, used_out[NIMBLE_MAX_RANK] = {false};
  nimble_dim_t in[NIMBLE_MAX_RANK];
  for (size_t i = 0; i < x->rank; i++) in[i] = nimble_dim_resolve(ctx, x->dims[i]);
  for (size_t o = 0; o < n; o++) {
    /* A copied dim (0) is the input's dim at the same place. */
    if (copied[o]) used_in[o] = used_out[o] = true;
  }
  for (size_t o = 0; o < n; o++) {
    if ((int)o == infer_at || used_out[o] || r.dims[o].kind == NIMBLE_DIM_ANY) continue;
    for (size_t i = 0; i < x->rank; i++) {
      if (!used_in[i] && nimble_dim_same(in[i], r.dims[o])) {
        used_in[i] = used_out[o] = true;
        break;
      }
    }
  }
  int64_t in_prod = 1, out_prod = 1;
  bool in_known = true, out_known = true, in_zero = false;
  size_t in_unknown = 0;
  nimble_dim_t lone = nimble_dim_any();
  for (size_t i = 0; i < x->rank; i++) {
    if (used_in[i]) continue;
    if (in[i].kind == NIMBLE_DIM_CONST) {
      if (in[i].value == 0) in_zero = true;
      else if (in_prod > INT64_MAX / in[i].value)
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "%s has too many elements", SIG_STR(x, buf));
      else in_prod *= in[i].value;
    } else {
      in_known = false;
      in_unknown++;
      lone = in[i];
    }
  }
  for (size_t o = 0; o < n; o++) {
    if ((int)o == infer_at || used_out[o]) continue;
    if (r.dims[o].kind == NIMBLE_DIM_CONST) {
      if (r.dims[o].value == 0) out_prod = 0;
      else if (out_prod != 0 && out_prod > INT64_MAX / r.dims[o].value)
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "new shape has too many elements");
      else if (out_prod != 0) out_prod *= r.dims[o].value;
    } else {
      out_known = false;
    }
  }
  if (in_zero) in_prod = 0;
  if (infer_at >= 0) {
    nimble_dim_t d = nimble_dim_any();
    if (in_known && out_known) {
      if (out_prod == 0 || in_prod % out_prod != 0)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "cannot reshape %s: %" PRId64 " elements do not divide into "
                                  "parts of %" PRId64,
                                  SIG_STR(x, buf), in_prod, out_prod);
      d = nimble_dim_const(in_prod / out_prod);
    } else if (out_known && out_prod == 1 && in_unknown == 1 && in_prod == 1) {
      d = lone;
    }
    r.dims[infer_at] = d;
  } else if (in_known && out_known && in_prod != out_prod) {
    /* The counts above leave out the dims both shapes share; the message
     * gives whole counts when those are known too. */
    int64_t shared = 1;
    for (size_t i = 0; i < x->rank && shared > 0; i++)
      if (used_in[i]) {
        if (in[i].kind != NIMBLE_DIM_CONST || (in[i].value > 0 && shared > INT64_MAX / in[i].value)) shared = -1;
        else shared *= in[i].value;
      }
    char want[160];
    nimble_tensor_sig_t shown = r;
    if (shared > 0 && (in_prod == 0 || shared <= INT64_MAX / in_prod) && (out_prod == 0 || shared <= INT64_MAX / out_prod))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot reshape %s (%" PRId64
                                " elements) to %s (%" PRId64 " elements)",
                                SIG_STR(x, buf), in_prod * shared, SIG_STR(&shown, want), out_prod * shared);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot reshape %s to %s (%" PRId64 " against %" PRId64
                              " elements besides the dims they share)",
                              SIG_STR(x, buf), SIG_STR(&shown, want), in_prod, out_prod);
  }
  *out = r;
  return nimble_ok();
}

static nimble_status_t rel_reshape(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  size_t n;
  const int64_t *spec = A_INTS(call, "newshape", &n);
  *num_out = 1;
  return nimble_reshape_infer(call->ctx, &call->inputs[0], spec, n, &out[0]);
}

static nimble_status_t rel_transpose(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                     size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  const int64_t *axes = A_INTS(call, "axes", &n);
  nimble_tensor_sig_t r = *x;
  bool seen[NIMBLE_MAX_RANK] = {false};
  if (n != 0 && n != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "axes has %zu entries for rank %zu", n,
                              x->rank);
  for (size_t i = 0; i < x->rank; i++) {
    size_t a = x->rank - 1 - i;
    if (n) NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axes[i], x->rank, &a));
    if (seen[a])
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "axes is not a permutation: %zu repeats",
                                a);
    seen[a] = true;
    r.dims[i] = x->dims[a];
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_concatenate(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  const nimble_tensor_sig_t *first = &call->inputs[0];
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), first->rank, &axis));
  nimble_tensor_sig_t r = *first;
  r.dims[axis] = nimble_dim_resolve(call->ctx, first->dims[axis]);
  for (size_t i = 1; i < call->num_inputs; i++) {
    const nimble_tensor_sig_t *x = &call->inputs[i];
    char a[160], b[160];
    if (x->rank != first->rank || x->dtype != first->dtype)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot concatenate %s with %s",
                                SIG_STR(first, a), SIG_STR(x, b));
    for (size_t d = 0; d < x->rank; d++) {
      if (d == axis) {
        r.dims[d] = nimble_dim_add(call->ctx, r.dims[d], x->dims[d]);
        continue;
      }
      nimble_status_t s = nimble_dim_unify(call->ctx, r.dims[d], x->dims[d], &r.dims[d]);
      if (s) {
        nimble_status_free(s);
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "cannot concatenate %s with %s along axis %zu: dim %zu differs",
                                  SIG_STR(first, a), SIG_STR(x, b), axis, d);
      }
    }
  }
  return nimble_rel_one(out, num_out, &r);
}

/* Elements selected by begin:end:step on an axis of `dim` elements, with
 * negative indices counted from the end and out-of-range ones clamped
 * (ONNX Slice, NumPy). */
int64_t nimble_slice_count(int64_t dim, int64_t begin, int64_t end, int64_t step) {
  if (begin < 0) begin += dim;
  if (end < 0) end += dim;
  /* Counted as (span - 1) / |step| + 1 so that a huge step cannot
   * overflow. */
  if (step > 0) {
    begin = begin < 0 ? 0 : begin > dim ? dim : begin;
    end = end < 0 ? 0 : end > dim ? dim : end;
    return end > begin ? (end - begin - 1) / step + 1 : 0;
  }
  if (step == INT64_MIN) step = -INT64_MAX;
  begin = begin < 0 ? -1 : begin > dim - 1 ? dim - 1 : begin;
  end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
  return begin > end ? (begin - end - 1) / (-step) + 1 : 0;
}

nimble_status_t nimble_slice_infer(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                   const int64_t *begin, size_t nb, const int64_t *end, size_t ne,
                                   const int64_t *strides, size_t ns, const int64_t *axes, size_t na,
                                   nimble_tensor_sig_t *out) {
  if (nb != ne || (ns && ns != nb) || (na && na != nb))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "begin, end, strides and axes must have one entry per sliced axis "
                              "(got %zu, %zu, %zu, %zu)",
                              nb, ne, ns, na);
  nimble_tensor_sig_t r = *x;
  bool seen[NIMBLE_MAX_RANK] = {false};
  for (size_t i = 0; i < nb; i++) {
    size_t a = i;
    if (na) NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axes[i], x->rank, &a));
    else if (i >= x->rank)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%zu sliced axes for rank %zu", nb, x->rank);
    if (seen[a]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "axis %zu is sliced twice", a);
    seen[a] = true;
    int64_t step = ns ? strides[i] : 1;
    if (step == 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "stride of axis %zu is 0", a);
    nimble_dim_t d = nimble_dim_resolve(ctx, x->dims[a]);
    if (d.kind == NIMBLE_DIM_CONST) {
      r.dims[a] = nimble_dim_const(nimble_slice_count(d.value, begin[i], end[i], step));
    } else if (!(begin[i] == 0 && end[i] >= INT32_MAX && step == 1)) {
      /* Only a slice of the whole axis keeps an unknown dim. */
      r.dims[a] = nimble_dim_any();
    }
  }
  *out = r;
  return nimble_ok();
}

static nimble_status_t rel_strided_slice(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                         size_t *num_out) {
  size_t nb, ne, ns, na;
  const int64_t *begin = A_INTS(call, "begin", &nb);
  const int64_t *end = A_INTS(call, "end", &ne);
  const int64_t *strides = A_INTS(call, "strides", &ns);
  const int64_t *axes = A_INTS(call, "axes", &na);
  *num_out = 1;
  return nimble_slice_infer(call->ctx, &call->inputs[0], begin, nb, end, ne, strides, ns, axes, na,
                            &out[0]);
}

/* ONNX GatherND: indices [..., k] pick slices of data after batch_dims
 * leading dims: result = indices.shape[:-1] + data.shape[batch_dims + k:]. */
static nimble_status_t rel_gather_nd(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                     size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *idx = &call->inputs[1];
  char bx[160], bi[160];
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  int64_t b = A_INT(call, "batch_dims");
  if (idx->rank < 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "indices must have rank >= 1, got %s",
                              SIG_STR(idx, bi));
  if (b < 0 || (size_t)b >= idx->rank || (size_t)b >= x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "batch_dims %" PRId64 " must be below both ranks (%s, %s)",
                              b, SIG_STR(x, bx), SIG_STR(idx, bi));
  nimble_dim_t k = nimble_dim_resolve(call->ctx, idx->dims[idx->rank - 1]);
  if (k.kind != NIMBLE_DIM_CONST)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "the last dim of indices %s must be known: it sets the result's rank",
                              SIG_STR(idx, bi));
  if (k.value < 1 || (size_t)b + (uint64_t)k.value > x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "indices of depth %" PRId64 " after %" PRId64 " batch dims do not fit %s",
                              k.value, b, SIG_STR(x, bx));
  size_t rank = idx->rank - 1 + x->rank - (size_t)b - (size_t)k.value;
  if (rank > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "result rank %zu exceeds %d", rank, NIMBLE_MAX_RANK);
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  for (size_t i = 0; i < (size_t)b; i++) {
    nimble_dim_t u;
    NIMBLE_RETURN_IF_ERROR(nimble_dim_unify(call->ctx, x->dims[i], idx->dims[i], &u));
  }
  for (size_t i = 0; i + 1 < idx->rank; i++) r.dims[r.rank++] = idx->dims[i];
  for (size_t i = (size_t)b + (size_t)k.value; i < x->rank; i++) r.dims[r.rank++] = x->dims[i];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_take(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0], *idx = &call->inputs[1];
  size_t axis;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  NIMBLE_RETURN_IF_ERROR(nimble_rel_expect_dtype_int(call, 1));
  if (x->rank - 1 + idx->rank > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "result rank %zu exceeds %d",
                              x->rank - 1 + idx->rank, NIMBLE_MAX_RANK);
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  for (size_t i = 0; i < axis; i++) r.dims[r.rank++] = x->dims[i];
  for (size_t i = 0; i < idx->rank; i++) r.dims[r.rank++] = idx->dims[i];
  for (size_t i = axis + 1; i < x->rank; i++) r.dims[r.rank++] = x->dims[i];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_split(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                 size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t axis, nsizes;
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank, &axis));
  int64_t sections = A_INT(call, "sections");
  const int64_t *sizes = A_INTS(call, "sizes", &nsizes);
  nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[axis]);
  if ((sections > 0) == (nsizes > 0))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "give either sections or sizes");
  size_t parts = nsizes ? nsizes : (size_t)sections;
  if (parts > NIMBLE_MAX_OUTPUTS)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "%zu parts, at most %d", parts, NIMBLE_MAX_OUTPUTS);
  if (nsizes) {
    int64_t total = 0;
    for (size_t i = 0; i < nsizes; i++) {
      if (sizes[i] < 0 || sizes[i] > INT64_MAX - total)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "bad split size %" PRId64, sizes[i]);
      total += sizes[i];
    }
    if (d.kind == NIMBLE_DIM_CONST && d.value != total)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "split sizes add up to %" PRId64 ", axis %zu has %" PRId64, total,
                                axis, d.value);
  } else if (d.kind == NIMBLE_DIM_CONST && d.value % sections != 0) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "axis %zu of %" PRId64 " does not split into %" PRId64 " equal parts",
                              axis, d.value, sections);
  }
  for (size_t i = 0; i < parts; i++) {
    out[i] = *x;
    if (nsizes) out[i].dims[axis] = nimble_dim_const(sizes[i]);
    else if (d.kind == NIMBLE_DIM_CONST) out[i].dims[axis] = nimble_dim_const(d.value / sections);
    else out[i].dims[axis] = nimble_dim_any();
  }
  *num_out = parts;
  return nimble_ok();
}

static nimble_status_t rel_squeeze(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  const int64_t *axes = A_INTS(call, "axes", &n);
  bool drop[NIMBLE_MAX_RANK] = {false};
  char buf[160];
  for (size_t i = 0; i < n; i++) {
    size_t a;
    nimble_dim_t one;
    NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(axes[i], x->rank, &a));
    nimble_status_t s = nimble_dim_unify(call->ctx, x->dims[a], nimble_dim_const(1), &one);
    if (s) {
      nimble_status_free(s);
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "cannot squeeze axis %zu of %s: not 1", a,
                                SIG_STR(x, buf));
    }
    drop[a] = true;
  }
  if (n == 0) {
    for (size_t a = 0; a < x->rank; a++) {
      nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[a]);
      if (d.kind != NIMBLE_DIM_CONST)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "squeeze without axes needs known dims, got %s", SIG_STR(x, buf));
      drop[a] = d.value == 1;
    }
  }
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  for (size_t a = 0; a < x->rank; a++)
    if (!drop[a]) r.dims[r.rank++] = x->dims[a];
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_expand_dims(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  int64_t k = A_INT(call, "num_newaxis");
  if (k < 0 || x->rank + (uint64_t)k > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "num_newaxis %" PRId64 " on rank %zu", k, x->rank);
  size_t axis;
  /* The axis counts in the result, as in NumPy: -1 appends. */
  NIMBLE_RETURN_IF_ERROR(nimble_axis_normalize(A_INT(call, "axis"), x->rank + 1, &axis));
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  for (size_t i = 0; i < axis; i++) r.dims[r.rank++] = x->dims[i];
  for (int64_t i = 0; i < k; i++) r.dims[r.rank++] = nimble_dim_const(1);
  for (size_t i = axis; i < x->rank; i++) r.dims[r.rank++] = x->dims[i];
  return nimble_rel_one(out, num_out, &r);
}

nimble_status_t nimble_broadcast_to_shape(nimble_dim_ctx *ctx, const nimble_tensor_sig_t *x,
                                          const nimble_dim_t *dims, size_t n,
                                          nimble_tensor_sig_t *out) {
  if (n > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape has %zu dims, at most %d", n, NIMBLE_MAX_RANK);
  nimble_tensor_sig_t target = sig_empty(x->dtype);
  target.rank = n;
  for (size_t i = 0; i < n; i++) target.dims[i] = dims[i];
  return nimble_sig_broadcast(ctx, x, &target, out);
}

static nimble_status_t rel_broadcast_to(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                        size_t *num_out) {
  size_t n;
  const int64_t *shape = A_INTS(call, "shape", &n);
  nimble_dim_t dims[NIMBLE_MAX_RANK];
  for (size_t i = 0; i < n && i < NIMBLE_MAX_RANK; i++) {
    if (shape[i] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative dim in shape");
    dims[i] = nimble_dim_const(shape[i]);
  }
  *num_out = 1;
  return nimble_broadcast_to_shape(call->ctx, &call->inputs[0], dims, n, &out[0]);
}

static nimble_status_t rel_tile(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  const int64_t *reps = A_INTS(call, "reps", &n);
  if (n != x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "reps has %zu entries for rank %zu", n, x->rank);
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < n; i++) {
    if (reps[i] < 0) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "negative repeat on axis %zu", i);
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, x->dims[i], nimble_dim_const(reps[i]), &r.dims[i]));
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_pad(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                               size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  size_t n;
  const int64_t *pads = A_INTS(call, "pads", &n);
  const char *mode = A_STRING(call, "mode");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "mode must be constant, reflect or edge, got '%s'", mode);
  if (n != 2 * x->rank)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "pads needs 2 x rank = %zu entries (all begins, then all ends), got %zu",
                              2 * x->rank, n);
  nimble_tensor_sig_t r = *x;
  for (size_t i = 0; i < x->rank; i++) {
    nimble_dim_t d = nimble_dim_resolve(call->ctx, x->dims[i]);
    int64_t add = pads[i] + pads[x->rank + i];
    if (d.kind != NIMBLE_DIM_CONST) {
      r.dims[i] = add == 0 ? d : nimble_dim_any();
      continue;
    }
    if (pads[i] < -d.value || pads[x->rank + i] < -d.value || d.value + add < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "pads %" PRId64 ", %" PRId64 " remove more than axis %zu's %" PRId64,
                                pads[i], pads[x->rank + i], i, d.value);
    r.dims[i] = nimble_dim_const(d.value + add);
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_flatten(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                   size_t *num_out) {
  const nimble_tensor_sig_t *x = &call->inputs[0];
  int64_t axis = A_INT(call, "axis");
  if (axis < 0) axis += (int64_t)x->rank;
  if (axis < 0 || axis > (int64_t)x->rank)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "axis %" PRId64 " out of range for rank %zu",
                              A_INT(call, "axis"), x->rank);
  nimble_tensor_sig_t r = sig_empty(x->dtype);
  r.rank = 2;
  r.dims[0] = r.dims[1] = nimble_dim_const(1);
  for (size_t i = 0; i < x->rank; i++)
    NIMBLE_RETURN_IF_ERROR(nimble_dim_mul(call->ctx, r.dims[(int64_t)i < axis ? 0 : 1], x->dims[i],
                                          &r.dims[(int64_t)i < axis ? 0 : 1]));
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_shape_of(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                    size_t *num_out) {
  nimble_tensor_sig_t r = sig_empty(NIMBLE_DTYPE_INT64);
  r.rank = 1;
  /* A tensor of unknown rank has a shape of unknown length. */
  size_t rank = call->inputs[0].rank;
  r.dims[0] = rank == NIMBLE_RANK_UNKNOWN ? nimble_dim_any() : nimble_dim_const((int64_t)rank);
  return nimble_rel_one(out, num_out, &r);
}

/* check_rank(shape, rank=R, what=W): the shape of a tensor (1-D int64),
 * checked to have R entries, returned with that static length. With
 * reshape_tensor it turns a tensor of unknown rank into one of rank R:
 *   reshape_tensor(%x, check_rank(shape_of(%x), rank=3))
 * is %x as a Tensor[(?, ?, ?)], or the run-time error "W has rank 2,
 * expected rank 3". */
static nimble_status_t rel_check_rank(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                      size_t *num_out) {
  const nimble_tensor_sig_t *s = &call->inputs[0];
  char buf[160];
  if (s->rank != 1 || s->dtype != NIMBLE_DTYPE_INT64)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input 0 must be a shape (1-D int64), got %s",
                              SIG_STR(s, buf));
  int64_t want = A_INT(call, "rank");
  if (want < 0 || want > NIMBLE_MAX_RANK)
    return nimble_status_make(NIMBLE_OUT_OF_RANGE, "rank %" PRId64 " is not in 0 to %d", want,
                              NIMBLE_MAX_RANK);
  /* Only a run-time shape is an error here. A length known to differ at
   * compile time is left to the kernel: such a check may sit on a path that
   * never runs (the other rank's conversion, once folding has made the
   * value's rank known), and fails only if it does run. */
  nimble_dim_t have = nimble_dim_resolve(call->ctx, s->dims[0]);
  if (nimble_dim_ctx_is_concrete(call->ctx) && have.kind == NIMBLE_DIM_CONST && have.value != want) {
    const char *what = A_STRING(call, "what");
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s has rank %" PRId64 ", expected rank %" PRId64,
                              what[0] ? what : "the tensor", have.value, want);
  }
  nimble_tensor_sig_t r = sig_empty(NIMBLE_DTYPE_INT64);
  r.rank = 1;
  r.dims[0] = nimble_dim_const(want);
  return nimble_rel_one(out, num_out, &r);
}

static const nimble_attr_spec_t kReshapeAttrs[] = {
    ATTR_INTS_REQUIRED("newshape", "target dims; 0 copies, -1 infers"),
};
static const nimble_attr_spec_t kTransposeAttrs[] = {
    ATTR_INTS("axes", "permutation; empty: reversed"),
};
static const nimble_attr_spec_t kConcatAttrs[] = {
    ATTR_INT("axis", 0, "axis to join along"),
};
static const nimble_attr_spec_t kSliceAttrs[] = {
    ATTR_INTS_REQUIRED("begin", "first index per axis (negative from the end)"),
    ATTR_INTS_REQUIRED("end", "one past the last index per axis (clamped)"),
    ATTR_INTS("strides", "step per axis; empty: 1s"),
    ATTR_INTS("axes", "sliced axes; empty: 0, 1, ..."),
};
static const nimble_attr_spec_t kTakeAttrs[] = {
    ATTR_INT("axis", 0, "axis indexed"),
};
static const nimble_attr_spec_t kGatherNdAttrs[] = {
    ATTR_INT("batch_dims", 0, "leading dims shared by data and indices"),
};
static const nimble_attr_spec_t kSplitAttrs[] = {
    ATTR_INT("axis", 0, "axis split"),
    ATTR_INT("sections", 0, "number of equal parts (or give sizes)"),
    ATTR_INTS("sizes", "size of each part"),
};
static const nimble_attr_spec_t kSqueezeAttrs[] = {
    ATTR_INTS("axes", "axes of extent 1 to drop; empty: all such"),
};
static const nimble_attr_spec_t kExpandDimsAttrs[] = {
    ATTR_INT_REQUIRED("axis", "position of the new axes in the result"),
    ATTR_INT("num_newaxis", 1, "how many axes to insert"),
};
static const nimble_attr_spec_t kBroadcastToAttrs[] = {
    ATTR_INTS_REQUIRED("shape", "shape broadcast with the input (ONNX Expand)"),
};
static const nimble_attr_spec_t kTileAttrs[] = {
    ATTR_INTS_REQUIRED("reps", "repeats per axis"),
};
static const nimble_attr_spec_t kPadAttrs[] = {
    ATTR_INTS_REQUIRED("pads", "all begins, then all ends (negative crops)"),
    ATTR_FLOAT("value", 0.0, "fill for constant mode"),
    ATTR_STRING("mode", "constant", "constant, reflect or edge"),
};
static const nimble_attr_spec_t kFlattenAttrs[] = {
    ATTR_INT("axis", 1, "dims before it form the first result dim"),
};
static const nimble_attr_spec_t kCheckRankAttrs[] = {
    ATTR_INT_REQUIRED("rank", "the number of entries the shape must have"),
    ATTR_STRING("what", "", "the value checked, for the error message"),
};

#define LAYOUT(nm, doc, lo, hi, attrs, rel, pat) \
  {nm, doc, lo, hi, attrs, rel, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, pat, false}

const nimble_op nimble_ops_transform[] = {
    LAYOUT("reshape", "reshape to newshape (0 copies, -1 infers)", 1, 1, ATTRS(kReshapeAttrs),
           rel_reshape, NIMBLE_FUSE_INJECTIVE),
    LAYOUT("transpose", "permutes axes", 1, 1, ATTRS(kTransposeAttrs), rel_transpose,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("concatenate", "joins inputs along axis", 1, -1, ATTRS(kConcatAttrs), rel_concatenate,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("strided_slice", "begin:end:stride per axis, clamped", 1, 1, ATTRS(kSliceAttrs),
           rel_strided_slice, NIMBLE_FUSE_INJECTIVE),
    LAYOUT("take", "gather along axis by integer indices", 2, 2, ATTRS(kTakeAttrs), rel_take,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("gather_nd", "gathers slices by index tuples (ONNX GatherND)", 2, 2, ATTRS(kGatherNdAttrs),
           rel_gather_nd, NIMBLE_FUSE_INJECTIVE),
    {"split", "splits along axis into a tuple", 1, 1, ATTRS(kSplitAttrs), rel_split,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_INJECTIVE, true},
    LAYOUT("squeeze", "drops axes of extent 1", 1, 1, ATTRS(kSqueezeAttrs), rel_squeeze,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("expand_dims", "inserts axes of extent 1", 1, 1, ATTRS(kExpandDimsAttrs),
           rel_expand_dims, NIMBLE_FUSE_INJECTIVE),
    LAYOUT("broadcast_to", "broadcasts with a static shape", 1, 1, ATTRS(kBroadcastToAttrs),
           rel_broadcast_to, NIMBLE_FUSE_BROADCAST),
    LAYOUT("tile", "repeats the tensor along each axis", 1, 1, ATTRS(kTileAttrs), rel_tile,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("pad", "pads (or crops) each axis", 1, 1, ATTRS(kPadAttrs), rel_pad,
           NIMBLE_FUSE_INJECTIVE),
    LAYOUT("flatten", "collapses to 2-D at axis", 1, 1, ATTRS(kFlattenAttrs), rel_flatten,
           NIMBLE_FUSE_INJECTIVE),
    {"shape_of", "the shape as an int64 vector (of any tensor, ranked or not)", 1, 1, NO_ATTRS, rel_shape_of,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, false, 1u},
    LAYOUT("check_rank", "a shape checked at run time to have `rank` entries", 1, 1, ATTRS(kCheckRankAttrs),
           rel_check_rank, NIMBLE_FUSE_OPAQUE),
};
const size_t nimble_ops_transform_count = sizeof nimble_ops_transform / sizeof nimble_ops_transform[0];
