/* Memory operators: the explicit-memory form of the IR that the passes
 * produce (compile-workers/compiler/passes/, docs/passes.md) and the VM's
 * AllocStorage, AllocTensor(Reg), InvokePacked, ReshapeTensor and
 * KillRegister instructions consume.
 *
 *   alloc_storage(size)                  a storage of `size` bytes, typed as
 *                                        Tensor[(size,), uint8]
 *   alloc_tensor(storage, offset[, shape]) a tensor placed in a storage; the
 *                                        shape is the `shape` attribute or a
 *                                        1-D int64 tensor (dynamic shapes)
 *   invoke(inputs..., outputs..., kernel=, num_outputs=)
 *                                        runs primitive `kernel`, writing
 *                                        into the outputs (destination
 *                                        passing); returns ()
 *   invoke_shape_func(args..., kernel=, out_ranks=, mode=)
 *                                        the kernel's shape function on the
 *                                        host: one 1-D int64 shape per output
 *   reshape_tensor(x, shape)             a view of x with a new shape (x may
 *                                        be of unknown rank)
 *   device_copy(x, device=)              a copy of x on `device` ("cpu" or
 *                                        "cuda"); same type (place_devices
 *                                        inserts it; the VM's DeviceCopy)
 *   kill(x)                              x's last use: frees it early
 *
 * invoke's `device` says where the kernel runs ("cpu", or "cuda" once
 * place_devices has put it on the GPU); its tensors must live there.
 *
 * They are opaque to fusion, and DCE keeps invoke and kill (effects). */
#include <inttypes.h>
#include <string.h>

#include "ops/op_internal.h"

static nimble_status_t expect_int_scalar(const nimble_rel_call_t *call, size_t i, const char *what) {
  const nimble_tensor_sig_t *s = &call->inputs[i];
  char buf[160];
  if (s->rank != 0 || !nimble_dtype_is_int(s->dtype))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input %zu (%s) must be an integer scalar, got %s",
                              i, what, SIG_STR(s, buf));
  return nimble_ok();
}

static nimble_status_t device_name_ok(const char *device, const char *what) {
  if (strcmp(device, "cpu") == 0 || strcmp(device, "cuda") == 0) return nimble_ok();
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: unknown device '%s' (cpu or cuda)", what, device);
}

static nimble_status_t rel_alloc_storage(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                         size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(expect_int_scalar(call, 0, "the size in bytes"));
  int64_t align = A_INT(call, "alignment");
  if (align <= 0 || (align & (align - 1)) != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "alignment %" PRId64 " is not a power of two",
                              align);
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = NIMBLE_DTYPE_UINT8;
  r.rank = 1;
  int64_t size;
  if (nimble_rel_value_int(call, 0, 0, &size)) {
    if (size < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "storage size %" PRId64 " is negative", size);
    r.dims[0] = nimble_dim_const(size);
  } else if (nimble_dim_ctx_is_concrete(call->ctx)) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "storage size has no value");
  } else {
    r.dims[0] = nimble_dim_any();
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_alloc_tensor(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                        size_t *num_out) {
  const nimble_tensor_sig_t *st = &call->inputs[0];
  char buf[160];
  if (st->rank != 1 || st->dtype != NIMBLE_DTYPE_UINT8)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "input 0 (a storage) must be a 1-D uint8 tensor, got %s", SIG_STR(st, buf));
  NIMBLE_RETURN_IF_ERROR(expect_int_scalar(call, 1, "the offset"));
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  NIMBLE_RETURN_IF_ERROR(nimble_rel_dtype_attr(call, "dtype", &r.dtype));
  size_t nattr;
  const int64_t *shape = A_INTS(call, "shape", &nattr);
  bool known = true;
  if (call->num_inputs == 3) {
    if (nattr != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "give the shape as an attribute or as input 2, not both");
    int64_t raw[NIMBLE_MAX_RANK];
    NIMBLE_RETURN_IF_ERROR(nimble_rel_shape_input(call, 2, false, r.dims, raw, &r.rank, &known));
    if (!known && nimble_dim_ctx_is_concrete(call->ctx))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input 2 (the shape) has no value");
  } else {
    if (nattr > NIMBLE_MAX_RANK)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE, "shape has %zu dims, at most %d", nattr,
                                NIMBLE_MAX_RANK);
    r.rank = nattr;
    for (size_t i = 0; i < nattr; i++) {
      if (shape[i] < 0)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "shape has dim %" PRId64 " at %zu",
                                  shape[i], i);
      r.dims[i] = nimble_dim_const(shape[i]);
    }
  }
  /* When everything is known, the tensor must fit in its storage. */
  int64_t offset;
  nimble_dim_t cap = nimble_dim_resolve(call->ctx, st->dims[0]);
  if (known && cap.kind == NIMBLE_DIM_CONST && nimble_rel_value_int(call, 1, 0, &offset)) {
    if (offset < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "offset %" PRId64 " is negative", offset);
    int64_t bytes = (int64_t)nimble_dtype_size(r.dtype);
    for (size_t i = 0; i < r.rank; i++) {
      int64_t d = r.dims[i].value;
      if (d != 0 && bytes > INT64_MAX / d)
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "tensor %s is too large",
                                  SIG_STR(&r, buf));
      bytes *= d;
    }
    if (offset > cap.value || bytes > cap.value - offset)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE,
                                "tensor %s (%" PRId64 " bytes) at offset %" PRId64
                                " does not fit in a storage of %" PRId64 " bytes",
                                SIG_STR(&r, buf), bytes, offset, cap.value);
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_invoke(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                  size_t *num_out) {
  const char *kernel = A_STRING(call, "kernel");
  if (!kernel[0]) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invoke names no kernel");
  NIMBLE_RETURN_IF_ERROR(device_name_ok(A_STRING(call, "device"), "invoke"));
  int64_t nout = A_INT(call, "num_outputs");
  if (nout < 0 || (uint64_t)nout > call->num_inputs)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invoke of '%s': %" PRId64 " outputs among %zu arguments", kernel,
                              nout, call->num_inputs);
  (void)out;
  *num_out = 0; /* the outputs are written in place */
  return nimble_ok();
}

static nimble_status_t rel_invoke_shape_func(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                             size_t *num_out) {
  const char *kernel = A_STRING(call, "kernel");
  if (!kernel[0])
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "invoke_shape_func names no kernel");
  const char *mode = A_STRING(call, "mode");
  bool independent = strcmp(mode, "data_independent") == 0;
  if (!independent && strcmp(mode, "data_dependent") != 0 && strcmp(mode, "upper_bound") != 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invoke_shape_func of '%s': unknown mode '%s' (data_independent, "
                              "data_dependent or upper_bound)",
                              kernel, mode);
  char buf[160];
  /* A data-independent shape function sees only its inputs' shapes. */
  for (size_t i = 0; independent && i < call->num_inputs; i++)
    if (call->inputs[i].rank != 1 || call->inputs[i].dtype != NIMBLE_DTYPE_INT64)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "invoke_shape_func of '%s': input %zu must be a shape (1-D int64), "
                                "got %s",
                                kernel, i, SIG_STR(&call->inputs[i], buf));
  size_t n;
  const int64_t *ranks = A_INTS(call, "out_ranks", &n);
  if (n == 0 || n > NIMBLE_MAX_OUTPUTS)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "invoke_shape_func of '%s': %zu output ranks (1 to %d)", kernel, n,
                              NIMBLE_MAX_OUTPUTS);
  for (size_t k = 0; k < n; k++) {
    if (ranks[k] < 0 || ranks[k] > NIMBLE_MAX_RANK)
      return nimble_status_make(NIMBLE_OUT_OF_RANGE,
                                "invoke_shape_func of '%s': output %zu has rank %" PRId64, kernel,
                                k, ranks[k]);
    memset(&out[k], 0, sizeof out[k]);
    out[k].dtype = NIMBLE_DTYPE_INT64;
    out[k].rank = 1;
    out[k].dims[0] = nimble_dim_const(ranks[k]);
  }
  *num_out = n;
  return nimble_ok();
}

static nimble_status_t rel_reshape_tensor(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                          size_t *num_out) {
  nimble_tensor_sig_t r;
  memset(&r, 0, sizeof r);
  r.dtype = call->inputs[0].dtype;
  int64_t raw[NIMBLE_MAX_RANK];
  bool known;
  NIMBLE_RETURN_IF_ERROR(nimble_rel_shape_input(call, 1, false, r.dims, raw, &r.rank, &known));
  if (!known && nimble_dim_ctx_is_concrete(call->ctx))
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "input 1 (the shape) has no value");
  /* A view never grows: with both sizes known, the new one may not exceed
   * the old (an upper-bound result is viewed at its real, smaller size). */
  if (known) {
    int64_t before = 1, after = 1;
    bool static_in = true;
    /* A tensor of unknown rank has an unknown size (the VM checks the view
     * against the real one). */
    if (call->inputs[0].rank == NIMBLE_RANK_UNKNOWN) static_in = false;
    for (size_t i = 0; static_in && i < call->inputs[0].rank; i++) {
      nimble_dim_t d = nimble_dim_resolve(call->ctx, call->inputs[0].dims[i]);
      if (d.kind != NIMBLE_DIM_CONST) static_in = false;
      else if (d.value != 0 && before > INT64_MAX / d.value) static_in = false;
      else before *= d.value;
    }
    for (size_t i = 0; i < r.rank; i++) {
      if (raw[i] != 0 && after > INT64_MAX / raw[i])
        return nimble_status_make(NIMBLE_OUT_OF_RANGE, "reshape_tensor: the new shape is too large");
      after *= raw[i];
    }
    char b1[160], b2[160];
    if (static_in && after > before)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "reshape_tensor: a view %s is larger than the tensor %s",
                                SIG_STR(&r, b2), SIG_STR(&call->inputs[0], b1));
  }
  return nimble_rel_one(out, num_out, &r);
}

static nimble_status_t rel_device_copy(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                       size_t *num_out) {
  NIMBLE_RETURN_IF_ERROR(device_name_ok(A_STRING(call, "device"), "device_copy"));
  /* The same tensor elsewhere: shape and dtype unchanged. */
  return nimble_rel_one(out, num_out, &call->inputs[0]);
}

static nimble_status_t rel_kill(const nimble_rel_call_t *call, nimble_tensor_sig_t *out,
                                size_t *num_out) {
  (void)call;
  (void)out;
  *num_out = 0;
  return nimble_ok();
}

static const nimble_attr_spec_t kAllocStorageAttrs[] = {
    ATTR_INT("alignment", 64, "byte alignment (a power of two)"),
    ATTR_STRING("device", "cpu", "where the storage lives"),
};
static const nimble_attr_spec_t kAllocTensorAttrs[] = {
    ATTR_INTS("shape", "static shape (when no shape input is given)"),
    ATTR_STRING("dtype", "float32", "element type"),
};
static const nimble_attr_spec_t kInvokeAttrs[] = {
    ATTR_STRING("kernel", "", "the primitive function (a global) to run"),
    ATTR_INT("num_outputs", 1, "how many trailing arguments are outputs"),
    ATTR_STRING("device", "cpu", "where the kernel runs (cpu or cuda)"),
};
static const nimble_attr_spec_t kDeviceCopyAttrs[] = {
    ATTR_STRING("device", "cpu", "the device the copy lives on (cpu or cuda)"),
};
static const nimble_attr_spec_t kShapeFuncAttrs[] = {
    ATTR_STRING("kernel", "", "the primitive function whose output shapes are computed"),
    ATTR_INTS("out_ranks", "the rank of each output"),
    ATTR_STRING("mode", "data_independent", "data_independent (inputs are shapes), data_dependent "
                                            "or upper_bound (inputs are the tensors)"),
};

const nimble_op nimble_ops_memory[] = {
    {"alloc_storage", "a storage of `size` bytes (explicit memory)", 1, 1, ATTRS(kAllocStorageAttrs),
     rel_alloc_storage, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u, NIMBLE_FUSE_OPAQUE, false},
    {"alloc_tensor", "a tensor in a storage at an offset; shape an attribute or a 1-D tensor", 2, 3,
     ATTRS(kAllocTensorAttrs), rel_alloc_tensor, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 0x6u,
     NIMBLE_FUSE_OPAQUE, false},
    {"invoke", "runs a primitive kernel on inputs, writing its outputs in place", 1, -1,
     ATTRS(kInvokeAttrs), rel_invoke, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true},
    {"invoke_shape_func", "a primitive's shape function on the host: output shapes", 0, -1,
     ATTRS(kShapeFuncAttrs), rel_invoke_shape_func, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0,
     NIMBLE_FUSE_OPAQUE, true},
    {"reshape_tensor", "a view with a new shape given as a 1-D tensor", 2, 2, NO_ATTRS,
     rel_reshape_tensor, NIMBLE_SHAPE_DATA_DEPENDENT, NULL, 1u << 1, NIMBLE_FUSE_OPAQUE, false, 1u},
    {"device_copy", "a copy of a tensor on another device (the VM's DeviceCopy)", 1, 1,
     ATTRS(kDeviceCopyAttrs), rel_device_copy, NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE,
     false, 1u},
    {"kill", "the last use of a value: frees it early", 1, 1, NO_ATTRS, rel_kill,
     NIMBLE_SHAPE_DATA_INDEPENDENT, NULL, 0, NIMBLE_FUSE_OPAQUE, true, 1u},
};
const size_t nimble_ops_memory_count = sizeof nimble_ops_memory / sizeof nimble_ops_memory[0];
