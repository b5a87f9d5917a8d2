/* TensorProto, SparseTensorProto and TypeProto into the loader's structs.
 *
 * Tensor data ends up as fixed-width little-endian bytes whichever field
 * carried it: raw_data is used in place when aligned, the typed fields
 * (float_data, int32_data, ...) are narrowed or copied. Every size is
 * checked against the dims before anything is allocated from it, so a
 * tensor that claims 2^40 elements but carries 6 is an error, not an
 * allocation. */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "onnx_internal.h"

static const char *const dtype_names[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                          "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                          "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                          "COMPLEX128", "BFLOAT16"};

static const size_t dtype_sizes[] = {0, 4, 1, 1, 2, 2, 4, 8, 0, 1, 2, 8, 4, 8, 8, 16, 2};

const char *nimble_onnx_dtype_name(int dtype) {
  if (dtype < 0 || dtype > NIMBLE_ONNX_BFLOAT16) return "UNDEFINED";
  return dtype_names[dtype];
}

size_t nimble_onnx_dtype_size(int dtype) {
  if (dtype < 0 || dtype > NIMBLE_ONNX_BFLOAT16) return 0;
  return dtype_sizes[dtype];
}

/* Which typed field a dtype's values travel in, and how many of its
 * entries make one element (2 for complex numbers). */
typedef enum { F_NONE, F_FLOAT, F_INT32, F_INT64, F_STRING, F_DOUBLE, F_UINT64 } typed_field;

static typed_field field_for(int dtype, unsigned *per_element) {
  *per_element = 1;
  switch (dtype) {
    case NIMBLE_ONNX_FLOAT:
      return F_FLOAT;
    case NIMBLE_ONNX_COMPLEX64:
      *per_element = 2;
      return F_FLOAT;
    case NIMBLE_ONNX_UINT8:
    case NIMBLE_ONNX_INT8:
    case NIMBLE_ONNX_UINT16:
    case NIMBLE_ONNX_INT16:
    case NIMBLE_ONNX_INT32:
    case NIMBLE_ONNX_BOOL:
    case NIMBLE_ONNX_FLOAT16:
    case NIMBLE_ONNX_BFLOAT16:
      return F_INT32;
    case NIMBLE_ONNX_INT64:
      return F_INT64;
    case NIMBLE_ONNX_STRING:
      return F_STRING;
    case NIMBLE_ONNX_DOUBLE:
      return F_DOUBLE;
    case NIMBLE_ONNX_COMPLEX128:
      *per_element = 2;
      return F_DOUBLE;
    case NIMBLE_ONNX_UINT32:
    case NIMBLE_ONNX_UINT64:
      return F_UINT64;
  }
  return F_NONE;
}

static const char *field_name(typed_field f) {
  switch (f) {
    case F_FLOAT:
      return "float_data";
    case F_INT32:
      return "int32_data";
    case F_INT64:
      return "int64_data";
    case F_STRING:
      return "string_data";
    case F_DOUBLE:
      return "double_data";
    case F_UINT64:
      return "uint64_data";
    case F_NONE:
      break;
  }
  return "?";
}

static size_t field_count(const Onnx__TensorProto *tp, typed_field f) {
  switch (f) {
    case F_FLOAT:
      return tp->n_float_data;
    case F_INT32:
      return tp->n_int32_data;
    case F_INT64:
      return tp->n_int64_data;
    case F_STRING:
      return tp->n_string_data;
    case F_DOUBLE:
      return tp->n_double_data;
    case F_UINT64:
      return tp->n_uint64_data;
    case F_NONE:
      break;
  }
  return 0;
}

/* Copies `count` elements from the typed field into `out`, narrowing the
 * int32/uint64 carriers to the dtype's width (ONNX stores INT8, FLOAT16 ...
 * in int32_data and UINT32 in uint64_data). */
static void copy_typed(const Onnx__TensorProto *tp, int dtype, typed_field f, uint8_t *out,
                       size_t n_entries) {
  switch (f) {
    case F_FLOAT:
      memcpy(out, tp->float_data, n_entries * sizeof(float));
      return;
    case F_DOUBLE:
      memcpy(out, tp->double_data, n_entries * sizeof(double));
      return;
    case F_INT64:
      memcpy(out, tp->int64_data, n_entries * sizeof(int64_t));
      return;
    case F_UINT64:
      if (dtype == NIMBLE_ONNX_UINT64) {
        memcpy(out, tp->uint64_data, n_entries * sizeof(uint64_t));
      } else {
        for (size_t i = 0; i < n_entries; i++) {
          uint32_t v = (uint32_t)tp->uint64_data[i];
          memcpy(out + 4 * i, &v, 4);
        }
      }
      return;
    case F_INT32: {
      size_t width = nimble_onnx_dtype_size(dtype);
      for (size_t i = 0; i < n_entries; i++) {
        uint32_t v = (uint32_t)tp->int32_data[i];
        if (dtype == NIMBLE_ONNX_BOOL) v = v != 0;
        memcpy(out + width * i, &v, width); /* little-endian: low bytes first */
      }
      return;
    }
    case F_STRING:
    case F_NONE:
      return;
  }
}

nimble_status_t nimble_onnx_convert_tensor(onnx_loader *ld, const Onnx__TensorProto *tp,
                                           nimble_onnx_tensor_t **out) {
  nimble_arena *a = ld->model->arena;
  *out = NULL;
  const char *name = onnx_str(tp->name);
  if (tp->n_external_data > 0 ||
      (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
    const char *location = "";
    for (size_t i = 0; i < tp->n_external_data; i++)
      if (tp->external_data[i] && tp->external_data[i]->key &&
          strcmp(tp->external_data[i]->key, "location") == 0)
        location = onnx_str(tp->external_data[i]->value);
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "tensor '%s': data stored in an external file ('%s') is not "
                              "supported; save the model with its weights inside",
                              name, location);
  }
  if (tp->segment)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "tensor '%s': segmented tensors are not supported", name);
  int dtype = tp->has_data_type ? tp->data_type : 0;
  if (dtype <= 0 || dtype > NIMBLE_ONNX_BFLOAT16)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "tensor '%s': data type %d is not a valid ONNX type", name, dtype);
  if (tp->n_dims > NIMBLE_ONNX_MAX_RANK)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tensor '%s': rank %zu is over %d", name,
                              tp->n_dims, NIMBLE_ONNX_MAX_RANK);

  nimble_onnx_tensor_t *t = nimble_arena_alloc(a, sizeof(*t));
  int64_t *dims = nimble_arena_calloc(a, tp->n_dims, sizeof(int64_t));
  if (!t || !dims) return NIMBLE_OOM_IN("a tensor");
  uint64_t count = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': dimension %zu is negative (%" PRId64 ")", name, i,
                                tp->dims[i]);
    if (__builtin_mul_overflow(count, (uint64_t)tp->dims[i], &count) || count > (UINT64_MAX >> 8))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': element count overflows at dimension %zu", name, i);
    dims[i] = tp->dims[i];
  }
  t->name = name;
  t->dtype = (nimble_onnx_dtype_t)dtype;
  t->rank = tp->n_dims;
  t->dims = dims;
  t->count = count;

  unsigned per = 1;
  typed_field want = field_for(dtype, &per);
  /* Exactly one carrier may hold the data; a second one is ambiguous. */
  static const typed_field all[] = {F_FLOAT, F_INT32, F_INT64, F_STRING, F_DOUBLE, F_UINT64};
  for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
    if (all[k] != want && field_count(tp, all[k]) > 0)
      return nimble_status_make(
          NIMBLE_INVALID_ARGUMENT, "tensor '%s': %s data is in %s, which does not carry %s", name,
          nimble_onnx_dtype_name(dtype), field_name(all[k]), nimble_onnx_dtype_name(dtype));
  }
  size_t typed = field_count(tp, want);

  if (tp->has_raw_data && (tp->raw_data.len > 0 || typed == 0)) {
    if (dtype == NIMBLE_ONNX_STRING)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': STRING data cannot be in raw_data", name);
    if (typed > 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': data is in both raw_data and %s", name,
                                field_name(want));
    uint64_t want_bytes;
    if (__builtin_mul_overflow(count, (uint64_t)nimble_onnx_dtype_size(dtype), &want_bytes) ||
        want_bytes != tp->raw_data.len)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': raw_data has %zu bytes, but %" PRIu64
                                " elements of %s need %" PRIu64,
                                name, tp->raw_data.len, count, nimble_onnx_dtype_name(dtype),
                                count * (uint64_t)nimble_onnx_dtype_size(dtype));
    t->size = tp->raw_data.len;
    if (t->size == 0) return *out = t, nimble_ok();
    /* A BOOL byte other than 0 or 1 is true; keep only canonical bytes, so
     * every later stage (folding, the printer's true/false) sees one value. */
    bool canonical = true;
    if (dtype == NIMBLE_ONNX_BOOL)
      for (size_t i = 0; i < t->size && canonical; i++) canonical = tp->raw_data.data[i] <= 1;
    if (canonical && ((uintptr_t)tp->raw_data.data & 15) == 0) {
      t->data = tp->raw_data.data; /* lives as long as the proto, i.e. the model */
    } else {
      void *copy = nimble_arena_alloc(a, t->size);
      if (!copy) return NIMBLE_OOM_IN("tensor data");
      memcpy(copy, tp->raw_data.data, t->size);
      if (!canonical)
        for (size_t i = 0; i < t->size; i++) ((uint8_t *)copy)[i] = ((uint8_t *)copy)[i] != 0;
      t->data = copy;
    }
    *out = t;
    return nimble_ok();
  }

  uint64_t entries;
  if (__builtin_mul_overflow(count, (uint64_t)per, &entries) || entries != typed) {
    if (typed == 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "tensor '%s': has %" PRIu64 " elements of %s but no data", name,
                                count, nimble_onnx_dtype_name(dtype));
    return nimble_status_make(
        NIMBLE_INVALID_ARGUMENT,
        "tensor '%s': %s has %zu entries, but %" PRIu64 " elements of %s need %" PRIu64, name,
        field_name(want), typed, count, nimble_onnx_dtype_name(dtype), count * per);
  }
  if (count == 0) return *out = t, nimble_ok();
  if (dtype == NIMBLE_ONNX_STRING) {
    nimble_onnx_bytes_t *strings = nimble_arena_calloc(a, typed, sizeof(*strings));
    if (!strings) return NIMBLE_OOM_IN("tensor strings");
    for (size_t i = 0; i < typed; i++) {
      strings[i].data = tp->string_data[i].data;
      strings[i].size = tp->string_data[i].len;
    }
    t->strings = strings;
    *out = t;
    return nimble_ok();
  }
  size_t bytes = (size_t)count * nimble_onnx_dtype_size(dtype); /* <= typed * 16, no overflow */
  uint8_t *data = nimble_arena_alloc(a, bytes);
  if (!data) return NIMBLE_OOM_IN("tensor data");
  copy_typed(tp, dtype, want, data, typed);
  t->data = data;
  t->size = bytes;
  *out = t;
  return nimble_ok();
}

nimble_status_t nimble_onnx_convert_sparse(onnx_loader *ld, const Onnx__SparseTensorProto *sp,
                                           nimble_onnx_sparse_tensor_t **out) {
  *out = NULL;
  if (!sp->values)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sparse tensor has no values");
  const char *name = onnx_str(sp->values->name);
  if (!sp->indices)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sparse tensor '%s' has no indices", name);
  if (sp->n_dims > NIMBLE_ONNX_MAX_RANK)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "sparse tensor '%s': rank %zu is over %d",
                              name, sp->n_dims, NIMBLE_ONNX_MAX_RANK);
  nimble_onnx_sparse_tensor_t *s = nimble_arena_alloc(ld->model->arena, sizeof(*s));
  int64_t *dims = nimble_arena_calloc(ld->model->arena, sp->n_dims, sizeof(int64_t));
  if (!s || !dims) return NIMBLE_OOM_IN("a sparse tensor");
  nimble_onnx_tensor_t *values, *indices;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_tensor(ld, sp->values, &values),
                             "sparse tensor '%s': values", name);
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_tensor(ld, sp->indices, &indices),
                             "sparse tensor '%s': indices", name);
  uint64_t dense = 1;
  for (size_t i = 0; i < sp->n_dims; i++) {
    if (sp->dims[i] < 0 || __builtin_mul_overflow(dense, (uint64_t)sp->dims[i], &dense))
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "sparse tensor '%s': dimension %zu (%" PRId64 ") is invalid", name,
                                i, sp->dims[i]);
    dims[i] = sp->dims[i];
  }
  if (values->rank != 1)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "sparse tensor '%s': values must be 1-D, got rank %zu", name,
                              values->rank);
  uint64_t nnz = values->count;
  if (indices->dtype != NIMBLE_ONNX_INT64)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "sparse tensor '%s': indices must be INT64, got %s", name,
                              nimble_onnx_dtype_name(indices->dtype));
  int linear = indices->rank == 1 && indices->dims[0] == (int64_t)nnz;
  int coords = indices->rank == 2 && indices->dims[0] == (int64_t)nnz &&
               indices->dims[1] == (int64_t)sp->n_dims;
  if (!linear && !coords)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "sparse tensor '%s': indices must have shape [%" PRIu64
                              "] or [%" PRIu64 ", %zu]",
                              name, nnz, nnz, sp->n_dims);
  /* Indices outside the dense shape would let a later densify write out of
   * bounds, so they are checked here once. */
  const uint8_t *raw = indices->data;
  for (uint64_t k = 0; k < indices->count; k++) {
    int64_t v;
    memcpy(&v, raw + 8 * k, 8);
    uint64_t bound = linear ? dense : (uint64_t)dims[k % sp->n_dims];
    if (v < 0 || (uint64_t)v >= bound)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "sparse tensor '%s': index %" PRId64 " at position %" PRIu64
                                " is outside the shape",
                                name, v, k);
  }
  s->values = values;
  s->indices = indices;
  s->rank = sp->n_dims;
  s->dims = dims;
  *out = s;
  return nimble_ok();
}

static int valid_dtype(int32_t d) { return d > 0 && d <= NIMBLE_ONNX_BFLOAT16; }

static nimble_status_t convert_shape(onnx_loader *ld, const Onnx__TensorShapeProto *shape,
                                     nimble_onnx_type_t *t) {
  if (!shape) return nimble_ok(); /* unknown rank */
  if (shape->n_dim > NIMBLE_ONNX_MAX_RANK)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "shape of rank %zu is over %d", shape->n_dim,
                              NIMBLE_ONNX_MAX_RANK);
  nimble_onnx_dim_t *dims = nimble_arena_calloc(ld->model->arena, shape->n_dim, sizeof(*dims));
  if (!dims) return NIMBLE_OOM_IN("a shape");
  for (size_t i = 0; i < shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
    if (!d) continue;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "dimension %zu has negative dim_value %" PRId64, i, d->dim_value);
      dims[i].kind = NIMBLE_ONNX_DIM_VALUE;
      dims[i].value = d->dim_value;
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               d->dim_param && d->dim_param[0]) {
      dims[i].kind = NIMBLE_ONNX_DIM_PARAM;
      dims[i].param = d->dim_param;
    }
  }
  t->has_shape = 1;
  t->rank = shape->n_dim;
  t->dims = dims;
  return nimble_ok();
}

nimble_status_t nimble_onnx_convert_type(onnx_loader *ld, const Onnx__TypeProto *tp,
                                         nimble_onnx_type_t **out) {
  *out = NULL;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return nimble_ok();
  nimble_onnx_type_t *t = nimble_arena_alloc(ld->model->arena, sizeof(*t));
  if (!t) return NIMBLE_OOM_IN("a type");
  switch (tp->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: {
      int sparse = tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
      int32_t elem = 0;
      const Onnx__TensorShapeProto *shape = NULL;
      if (sparse && tp->sparse_tensor_type) {
        elem = tp->sparse_tensor_type->has_elem_type ? tp->sparse_tensor_type->elem_type : 0;
        shape = tp->sparse_tensor_type->shape;
      } else if (!sparse && tp->tensor_type) {
        elem = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
        shape = tp->tensor_type->shape;
      }
      if (!valid_dtype(elem))
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "%s type has elem_type %d, not a valid ONNX type",
                                  sparse ? "sparse tensor" : "tensor", elem);
      t->kind = sparse ? NIMBLE_ONNX_TYPE_SPARSE_TENSOR : NIMBLE_ONNX_TYPE_TENSOR;
      t->elem_type = (nimble_onnx_dtype_t)elem;
      NIMBLE_RETURN_IF_ERROR(convert_shape(ld, shape, t));
      break;
    }
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: {
      int seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
      const Onnx__TypeProto *elem = seq ? (tp->sequence_type ? tp->sequence_type->elem_type : NULL)
                                        : (tp->optional_type ? tp->optional_type->elem_type : NULL);
      nimble_onnx_type_t *e;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, elem, &e), "%s element",
                                 seq ? "sequence" : "optional");
      if (!e)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s type has no element type",
                                  seq ? "sequence" : "optional");
      t->kind = seq ? NIMBLE_ONNX_TYPE_SEQUENCE : NIMBLE_ONNX_TYPE_OPTIONAL;
      t->elem = e;
      break;
    }
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: {
      const Onnx__TypeProto__Map *m = tp->map_type;
      int32_t key = m && m->has_key_type ? m->key_type : 0;
      if (!valid_dtype(key))
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "map type has key_type %d", key);
      nimble_onnx_type_t *e;
      NIMBLE_RETURN_IF_ERROR_CTX(nimble_onnx_convert_type(ld, m->value_type, &e), "map value");
      if (!e) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "map type has no value type");
      t->kind = NIMBLE_ONNX_TYPE_MAP;
      t->key_type = (nimble_onnx_dtype_t)key;
      t->elem = e;
      break;
    }
    default:
      return nimble_status_make(NIMBLE_UNIMPLEMENTED, "type kind %d is not supported",
                                (int)tp->value_case);
  }
  *out = t;
  return nimble_ok();
}

nimble_status_t nimble_onnx_tensor_type(onnx_loader *ld, const nimble_onnx_tensor_t *tensor,
                                        nimble_onnx_type_t **out) {
  nimble_onnx_type_t *t = nimble_arena_alloc(ld->model->arena, sizeof(*t));
  nimble_onnx_dim_t *dims = nimble_arena_calloc(ld->model->arena, tensor->rank, sizeof(*dims));
  if (!t || !dims) return NIMBLE_OOM_IN("a type");
  for (size_t i = 0; i < tensor->rank; i++) {
    dims[i].kind = NIMBLE_ONNX_DIM_VALUE;
    dims[i].value = tensor->dims[i];
  }
  t->kind = NIMBLE_ONNX_TYPE_TENSOR;
  t->elem_type = tensor->dtype;
  t->has_shape = 1;
  t->rank = tensor->rank;
  t->dims = dims;
  *out = t;
  return nimble_ok();
}
