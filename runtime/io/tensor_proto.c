/* ONNX TensorProto (.pb) without a protobuf library.
 *
 * The protobuf wire format is a sequence of (tag, value) pairs, the tag a
 * varint holding (field number << 3 | wire type). We decode only the fields
 * of onnx.TensorProto that carry a dense tensor and skip the others by their
 * wire type, as any protobuf parser must. Repeated numeric fields arrive
 * packed (one length-delimited run) or unpacked (one tag per value), and a
 * parser must accept both.
 *
 * Decoding is two passes over the bytes: the first validates every length
 * and varint, collects dims, the type and the name, and counts the values in
 * each data field; the second, once the type and size are known to agree,
 * converts the chosen field's values into the tensor buffer. Counts come
 * from the input's own length, so no allocation is sized by a number the
 * input merely claims. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_io_internal.h"

enum {
  F_DIMS = 1,
  F_DATA_TYPE = 2,
  F_SEGMENT = 3,
  F_FLOAT_DATA = 4,
  F_INT32_DATA = 5,
  F_STRING_DATA = 6,
  F_INT64_DATA = 7,
  F_NAME = 8,
  F_RAW_DATA = 9,
  F_DOUBLE_DATA = 10,
  F_UINT64_DATA = 11,
  F_DATA_LOCATION = 14,
};

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* onnx.TensorProto.DataType values we read and write. */
typedef struct onnx_type {
  int code;
  const char *name;
  DLDataType dtype; /* lanes 0: not supported */
  int field;        /* the typed field that holds values when raw_data is absent */
  int64_t min, max; /* range of int32_data values */
} onnx_type;

static const onnx_type ONNX_TYPES[] = {
    {1, "FLOAT", {kDLFloat, 32, 1}, F_FLOAT_DATA, 0, 0},
    {2, "UINT8", {kDLUInt, 8, 1}, F_INT32_DATA, 0, 255},
    {3, "INT8", {kDLInt, 8, 1}, F_INT32_DATA, -128, 127},
    {4, "UINT16", {kDLUInt, 16, 1}, F_INT32_DATA, 0, 65535},
    {5, "INT16", {kDLInt, 16, 1}, F_INT32_DATA, -32768, 32767},
    {6, "INT32", {kDLInt, 32, 1}, F_INT32_DATA, INT32_MIN, INT32_MAX},
    {7, "INT64", {kDLInt, 64, 1}, F_INT64_DATA, 0, 0},
    {8, "STRING", {0, 0, 0}, F_STRING_DATA, 0, 0},
    {9, "BOOL", {kDLUInt, 1, 1}, F_INT32_DATA, 0, 1},
    {10, "FLOAT16", {kDLFloat, 16, 1}, F_INT32_DATA, 0, 65535},
    {11, "DOUBLE", {kDLFloat, 64, 1}, F_DOUBLE_DATA, 0, 0},
    {12, "UINT32", {kDLUInt, 32, 1}, F_UINT64_DATA, 0, 0},
    {13, "UINT64", {kDLUInt, 64, 1}, F_UINT64_DATA, 0, 0},
    {14, "COMPLEX64", {0, 0, 0}, F_FLOAT_DATA, 0, 0},
    {15, "COMPLEX128", {0, 0, 0}, F_DOUBLE_DATA, 0, 0},
    /* bfloat16 values are stored as their 16 bits, as FLOAT16's are */
    {16, "BFLOAT16", {kDLBfloat, 16, 1}, F_INT32_DATA, 0, 65535},
};
#define N_ONNX_TYPES (sizeof(ONNX_TYPES) / sizeof(ONNX_TYPES[0]))

static const char *field_name(int field) {
  switch (field) {
    case F_DIMS: return "dims";
    case F_DATA_TYPE: return "data_type";
    case F_FLOAT_DATA: return "float_data";
    case F_INT32_DATA: return "int32_data";
    case F_STRING_DATA: return "string_data";
    case F_INT64_DATA: return "int64_data";
    case F_NAME: return "name";
    case F_RAW_DATA: return "raw_data";
    case F_DOUBLE_DATA: return "double_data";
    case F_UINT64_DATA: return "uint64_data";
    default: return "?";
  }
}

typedef struct pb_reader {
  const uint8_t *start, *p, *end;
  const char *label;
} pb_reader;

static nimble_status_t pb_error(const pb_reader *r, const uint8_t *at, nimble_status_code_t code,
                                const char *what) {
  return nimble_status_make(code, "%s: bad TensorProto at byte %zu: %s", r->label,
                            (size_t)(at - r->start), what);
}

static nimble_status_t pb_varint(pb_reader *r, uint64_t *out) {
  const uint8_t *at = r->p;
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return pb_error(r, at, NIMBLE_DATA_LOSS, "truncated varint");
    uint8_t b = *r->p++;
    if (shift == 63 && b > 1) return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, "varint overflows 64 bits");
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return nimble_ok();
    }
  }
  return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, "varint longer than 10 bytes");
}

/* Reads a length prefix and checks that many bytes remain; errors name the
 * field's tag at `at`. */
static nimble_status_t pb_length(pb_reader *r, const uint8_t *at, int field, size_t *out) {
  uint64_t n;
  NIMBLE_RETURN_IF_ERROR(pb_varint(r, &n));
  if (n > (uint64_t)(r->end - r->p)) {
    char msg[160];
    snprintf(msg, sizeof(msg), "field %d (%s) claims %llu bytes but only %zu remain", field,
             field_name(field), (unsigned long long)n, (size_t)(r->end - r->p));
    return pb_error(r, at, NIMBLE_DATA_LOSS, msg);
  }
  *out = (size_t)n;
  return nimble_ok();
}

static nimble_status_t pb_skip(pb_reader *r, int field, int wt, const uint8_t *tag_at) {
  uint64_t v;
  size_t n;
  char msg[120];
  switch (wt) {
    case WT_VARINT:
      return pb_varint(r, &v);
    case WT_I64:
    case WT_I32:
      n = wt == WT_I64 ? 8 : 4;
      if ((size_t)(r->end - r->p) < n) {
        snprintf(msg, sizeof(msg), "field %d: truncated %zu-byte value", field, n);
        return pb_error(r, tag_at, NIMBLE_DATA_LOSS, msg);
      }
      r->p += n;
      return nimble_ok();
    case WT_LEN:
      NIMBLE_RETURN_IF_ERROR(pb_length(r, tag_at, field, &n));
      r->p += n;
      return nimble_ok();
    case WT_SGROUP:
    case WT_EGROUP:
      snprintf(msg, sizeof(msg), "field %d uses the group wire type %d, which TensorProto never has",
               field, wt);
      return pb_error(r, tag_at, NIMBLE_INVALID_ARGUMENT, msg);
    default:
      snprintf(msg, sizeof(msg), "field %d has the invalid wire type %d", field, wt);
      return pb_error(r, tag_at, NIMBLE_INVALID_ARGUMENT, msg);
  }
}

/* What pass one learns. Counts are numbers of values per data field. */
typedef struct pb_scan {
  int ndim;
  int64_t dims[NIMBLE_TENSOR_IO_MAX_NDIM];
  int have_type;
  int64_t data_type;
  const uint8_t *name;
  size_t name_len;
  const uint8_t *raw;
  size_t raw_len;
  int have_raw;
  size_t counts[16];
} pb_scan;

/* The destination of pass two. */
typedef struct pb_fill {
  const onnx_type *type;
  uint8_t *out;
  size_t index; /* values written so far */
} pb_fill;

static nimble_status_t wrong_wire_type(pb_reader *r, const uint8_t *at, int field, int wt) {
  char msg[120];
  snprintf(msg, sizeof(msg), "field %d (%s) has the wrong wire type %d", field, field_name(field),
           wt);
  return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, msg);
}

/* Stores value number fill->index of a varint field, range-checked. */
static nimble_status_t fill_varint(pb_reader *r, const uint8_t *at, pb_fill *f, uint64_t v) {
  const onnx_type *t = f->type;
  size_t i = f->index++;
  if (t->field == F_INT64_DATA) {
    int64_t x = (int64_t)v;
    memcpy(f->out + i * 8, &x, 8);
  } else if (t->field == F_UINT64_DATA) {
    if (t->dtype.bits == 32) {
      if (v > UINT32_MAX) {
        char msg[120];
        snprintf(msg, sizeof(msg), "uint64_data[%zu] = %llu is out of range for UINT32", i,
                 (unsigned long long)v);
        return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, msg);
      }
      uint32_t x = (uint32_t)v;
      memcpy(f->out + i * 4, &x, 4);
    } else {
      memcpy(f->out + i * 8, &v, 8);
    }
  } else {
    /* int32 fields hold negative numbers sign-extended to 64 bits; protobuf
     * readers keep the low 32 bits. */
    int32_t x = (int32_t)(uint32_t)v;
    if (x < t->min || x > t->max) {
      char msg[120];
      snprintf(msg, sizeof(msg), "int32_data[%zu] = %d is out of range for %s", i, x, t->name);
      return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, msg);
    }
    size_t size = nimble_tensor_io_dtype_size(t->dtype);
    if (size == 1) {
      uint8_t b = (uint8_t)x;
      f->out[i] = b;
    } else if (size == 2) {
      uint16_t h = (uint16_t)x;
      memcpy(f->out + i * 2, &h, 2);
    } else {
      memcpy(f->out + i * 4, &x, 4);
    }
  }
  return nimble_ok();
}

/* One field of a numeric repeated field: a single value (unpacked) or a
 * packed run. In pass one (`fill` NULL) it validates and counts; in pass two
 * it stores values when the field is the chosen one. */
static nimble_status_t numeric_field(pb_reader *r, const uint8_t *tag_at, int field, int wt,
                                     int scalar_wt, pb_scan *sc, pb_fill *fill) {
  int store = fill && fill->type->field == field;
  size_t fixed = scalar_wt == WT_I32 ? 4 : scalar_wt == WT_I64 ? 8 : 0;
  if (wt == scalar_wt) {
    const uint8_t *at = r->p;
    if (fixed) {
      if ((size_t)(r->end - r->p) < fixed) {
        char msg[120];
        snprintf(msg, sizeof(msg), "field %d (%s): truncated %zu-byte value", field,
                 field_name(field), fixed);
        return pb_error(r, tag_at, NIMBLE_DATA_LOSS, msg);
      }
      if (store) memcpy(fill->out + fill->index++ * fixed, r->p, fixed);
      r->p += fixed;
    } else {
      uint64_t v;
      NIMBLE_RETURN_IF_ERROR(pb_varint(r, &v));
      if (store) NIMBLE_RETURN_IF_ERROR(fill_varint(r, at, fill, v));
    }
    if (!fill) sc->counts[field]++;
    return nimble_ok();
  }
  if (wt != WT_LEN) return wrong_wire_type(r, tag_at, field, wt);
  size_t n;
  NIMBLE_RETURN_IF_ERROR(pb_length(r, tag_at, field, &n));
  if (fixed) {
    if (n % fixed) {
      char msg[120];
      snprintf(msg, sizeof(msg), "packed field %d (%s) is %zu bytes, not a multiple of %zu",
               field, field_name(field), n, fixed);
      return pb_error(r, tag_at, NIMBLE_INVALID_ARGUMENT, msg);
    }
    if (store) {
      memcpy(fill->out + fill->index * fixed, r->p, n);
      fill->index += n / fixed;
    }
    if (!fill) sc->counts[field] += n / fixed;
    r->p += n;
    return nimble_ok();
  }
  pb_reader sub = {r->start, r->p, r->p + n, r->label};
  while (sub.p < sub.end) {
    const uint8_t *at = sub.p;
    uint64_t v;
    NIMBLE_RETURN_IF_ERROR(pb_varint(&sub, &v));
    if (store) NIMBLE_RETURN_IF_ERROR(fill_varint(&sub, at, fill, v));
    if (!fill) sc->counts[field]++;
  }
  r->p += n;
  return nimble_ok();
}

static nimble_status_t add_dim(pb_reader *r, const uint8_t *at, pb_scan *sc, uint64_t v) {
  if (sc->ndim == NIMBLE_TENSOR_IO_MAX_NDIM)
    return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, "more than 64 dims");
  if ((int64_t)v < 0) {
    char msg[96];
    snprintf(msg, sizeof(msg), "dims[%d] is negative (%lld)", sc->ndim, (long long)(int64_t)v);
    return pb_error(r, at, NIMBLE_INVALID_ARGUMENT, msg);
  }
  sc->dims[sc->ndim++] = (int64_t)v;
  return nimble_ok();
}

/* One pass over the message: pass one when `fill` is NULL. */
static nimble_status_t pb_pass(pb_reader *r, pb_scan *sc, pb_fill *fill) {
  while (r->p < r->end) {
    const uint8_t *tag_at = r->p;
    uint64_t tag;
    NIMBLE_RETURN_IF_ERROR(pb_varint(r, &tag));
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
      return pb_error(r, tag_at, NIMBLE_INVALID_ARGUMENT, "invalid field number");
    int field = (int)(tag >> 3), wt = (int)(tag & 7);
    uint64_t v;
    size_t n;
    switch (field) {
      case F_DIMS:
        if (wt == WT_VARINT) {
          const uint8_t *at = r->p;
          NIMBLE_RETURN_IF_ERROR(pb_varint(r, &v));
          if (!fill) NIMBLE_RETURN_IF_ERROR(add_dim(r, at, sc, v));
        } else if (wt == WT_LEN) {
          NIMBLE_RETURN_IF_ERROR(pb_length(r, tag_at, field, &n));
          pb_reader sub = {r->start, r->p, r->p + n, r->label};
          while (sub.p < sub.end) {
            const uint8_t *at = sub.p;
            NIMBLE_RETURN_IF_ERROR(pb_varint(&sub, &v));
            if (!fill) NIMBLE_RETURN_IF_ERROR(add_dim(&sub, at, sc, v));
          }
          r->p += n;
        } else {
          return wrong_wire_type(r, tag_at, field, wt);
        }
        break;
      case F_DATA_TYPE:
        if (wt != WT_VARINT) return wrong_wire_type(r, tag_at, field, wt);
        NIMBLE_RETURN_IF_ERROR(pb_varint(r, &v));
        sc->have_type = 1;
        sc->data_type = (int64_t)v; /* last one wins, as in protobuf */
        break;
      case F_SEGMENT:
        /* A SequenceProto or OptionalProto (the ONNX test suite stores
         * those in .pb files too) has a field 3 and lands here. */
        return pb_error(r, tag_at, NIMBLE_UNIMPLEMENTED,
                        "segmented tensors (field 3, segment) are not supported, or the file "
                        "holds a SequenceProto or OptionalProto rather than a TensorProto");
      case F_STRING_DATA:
        return pb_error(r, tag_at, NIMBLE_UNIMPLEMENTED,
                        "string tensors (field 6, string_data) are not supported");
      case F_FLOAT_DATA:
        NIMBLE_RETURN_IF_ERROR(numeric_field(r, tag_at, field, wt, WT_I32, sc, fill));
        break;
      case F_DOUBLE_DATA:
        NIMBLE_RETURN_IF_ERROR(numeric_field(r, tag_at, field, wt, WT_I64, sc, fill));
        break;
      case F_INT32_DATA:
      case F_INT64_DATA:
      case F_UINT64_DATA:
        NIMBLE_RETURN_IF_ERROR(numeric_field(r, tag_at, field, wt, WT_VARINT, sc, fill));
        break;
      case F_NAME:
      case F_RAW_DATA:
        if (wt != WT_LEN) return wrong_wire_type(r, tag_at, field, wt);
        NIMBLE_RETURN_IF_ERROR(pb_length(r, tag_at, field, &n));
        if (field == F_NAME) {
          sc->name = r->p;
          sc->name_len = n;
        } else {
          sc->raw = r->p;
          sc->raw_len = n;
          sc->have_raw = 1;
        }
        r->p += n;
        break;
      case F_DATA_LOCATION:
        if (wt != WT_VARINT) return wrong_wire_type(r, tag_at, field, wt);
        NIMBLE_RETURN_IF_ERROR(pb_varint(r, &v));
        if (v != 0)
          return pb_error(r, tag_at, NIMBLE_UNIMPLEMENTED,
                          "the data is stored externally (data_location EXTERNAL), which is "
                          "not supported");
        break;
      default:
        NIMBLE_RETURN_IF_ERROR(pb_skip(r, field, wt, tag_at));
        break;
    }
  }
  return nimble_ok();
}

nimble_status_t nimble_tensor_io_parse_pb(const void *bytes, size_t len, const char *label,
                                          nimble_tensor_file_t *out) {
  memset(out, 0, sizeof(*out));
  pb_scan sc;
  memset(&sc, 0, sizeof(sc));
  pb_reader r = {bytes, bytes, (const uint8_t *)bytes + len, label};
  if (len == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: empty TensorProto (no data_type)",
                              label);
  NIMBLE_RETURN_IF_ERROR(pb_pass(&r, &sc, NULL));

  if (!sc.have_type || sc.data_type == 0)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: TensorProto has no data_type (or UNDEFINED)", label);
  const onnx_type *type = NULL;
  for (size_t i = 0; i < N_ONNX_TYPES; i++)
    if (ONNX_TYPES[i].code == sc.data_type) type = &ONNX_TYPES[i];
  if (!type)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s: unknown TensorProto data_type %lld",
                              label, (long long)sc.data_type);
  if (type->dtype.lanes == 0)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "%s: TensorProto data_type %s is not supported", label, type->name);

  size_t itemsize = nimble_tensor_io_dtype_size(type->dtype);
  uint64_t count;
  size_t nbytes;
  NIMBLE_RETURN_IF_ERROR(
      nimble_tensor_io_checked_size(sc.dims, sc.ndim, itemsize, label, &count, &nbytes));

  /* Exactly one source of values: raw_data or the type's own field. */
  static const int data_fields[] = {F_FLOAT_DATA, F_INT32_DATA, F_INT64_DATA, F_DOUBLE_DATA,
                                    F_UINT64_DATA};
  for (size_t i = 0; i < sizeof(data_fields) / sizeof(data_fields[0]); i++) {
    int f = data_fields[i];
    if (!sc.counts[f]) continue;
    if (sc.have_raw)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: TensorProto has both raw_data and %s", label, field_name(f));
    if (f != type->field)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: TensorProto of type %s has values in %s (expected %s)", label,
                                type->name, field_name(f), field_name(type->field));
  }
  if (sc.have_raw) {
    if (sc.raw_len != nbytes)
      return nimble_status_make(sc.raw_len < nbytes ? NIMBLE_DATA_LOSS : NIMBLE_INVALID_ARGUMENT,
                                "%s: TensorProto raw_data is %zu bytes; dims and type %s need "
                                "%zu",
                                label, sc.raw_len, type->name, nbytes);
  } else if (sc.counts[type->field] != count) {
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: TensorProto has %zu values in %s; dims say %llu", label,
                              sc.counts[type->field], field_name(type->field),
                              (unsigned long long)count);
  }

  NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_alloc(type->dtype, sc.dims, sc.ndim, nbytes,
                                                (const char *)sc.name, sc.name_len, label, out));
  nimble_status_t s = nimble_ok();
  if (sc.have_raw) {
    if (nbytes) memcpy(out->data, sc.raw, nbytes);
    if (type->code == 9) {
      for (size_t i = 0; i < nbytes && !s; i++)
        if (sc.raw[i] > 1)
          s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                 "%s: BOOL raw_data element %zu has the byte value %u (not 0 "
                                 "or 1)",
                                 label, i, sc.raw[i]);
    }
  } else if (count) {
    pb_fill fill = {type, out->data, 0};
    pb_reader r2 = {bytes, bytes, (const uint8_t *)bytes + len, label};
    s = pb_pass(&r2, &sc, &fill);
    if (!s && fill.index != count)
      s = nimble_status_make(NIMBLE_INTERNAL, "%s: TensorProto values changed between passes",
                             label);
  }
  if (s) nimble_tensor_file_deinit(out);
  return s;
}

/* Appends a varint; returns the new end. */
static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

nimble_status_t nimble_tensor_io_encode_pb(const DLTensor *tensor, const char *name,
                                           void **out_bytes, size_t *out_len) {
  *out_bytes = NULL;
  *out_len = 0;
  const void *data;
  size_t nbytes;
  NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_check_encodable(tensor, &data, &nbytes));
  const onnx_type *type = NULL;
  for (size_t i = 0; i < N_ONNX_TYPES; i++) {
    DLDataType d = ONNX_TYPES[i].dtype;
    if (d.lanes && d.code == tensor->dtype.code && d.bits == tensor->dtype.bits)
      type = &ONNX_TYPES[i];
  }
  if (!type) return nimble_status_make(NIMBLE_INTERNAL, "no ONNX type for a supported type");
  size_t name_len = name ? strlen(name) : 0;
  /* Fields in number order, as protobuf serializers write them: dims
   * (unpacked, proto2's default), data_type, name, raw_data. */
  size_t cap = 11 * (size_t)tensor->ndim + 11 + (11 + name_len) + 11;
  if (nbytes > SIZE_MAX - cap)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "tensor too large to encode");
  cap += nbytes;
  uint8_t *buf = malloc(cap);
  if (!buf) return NIMBLE_OOM();
  uint8_t *p = buf;
  for (int i = 0; i < tensor->ndim; i++) {
    *p++ = F_DIMS << 3 | WT_VARINT;
    p = put_varint(p, (uint64_t)tensor->shape[i]);
  }
  *p++ = F_DATA_TYPE << 3 | WT_VARINT;
  p = put_varint(p, (uint64_t)type->code);
  if (name_len) {
    *p++ = F_NAME << 3 | WT_LEN;
    p = put_varint(p, name_len);
    memcpy(p, name, name_len);
    p += name_len;
  }
  *p++ = F_RAW_DATA << 3 | WT_LEN;
  p = put_varint(p, nbytes);
  if (nbytes) memcpy(p, data, nbytes);
  nimble_tensor_io_normalize_bools(tensor->dtype, p, nbytes);
  p += nbytes;
  *out_bytes = buf;
  *out_len = (size_t)(p - buf);
  return nimble_ok();
}
