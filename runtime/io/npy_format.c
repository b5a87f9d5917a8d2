/* NumPy .npy: the format is a magic string, a version, a header length, a
 * header that is a Python dict literal, and the raw array bytes.
 *
 *   "\x93NUMPY" major minor  HEADER_LEN (u16 LE for 1.0, u32 LE for 2.0/3.0)
 *   "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   ...\n"
 *   data (count * itemsize bytes)
 *
 * The header is parsed by a small recursive-descent reader of exactly the
 * literals NumPy writes (strings, True/False, tuples of non-negative ints),
 * strictly: unknown or repeated keys, trailing junk and malformed tuples are
 * errors, not guesses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_io_internal.h"

static const uint8_t NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_lexer {
  const char *start; /* the header text */
  const char *p;
  const char *end;
  const char *label;
  size_t base; /* file offset of `start`, for messages */
} npy_lexer;

typedef struct npy_header {
  char descr[16];
  int have_descr, have_fortran, have_shape;
  int fortran_order;
  int ndim;
  int64_t shape[NIMBLE_TENSOR_IO_MAX_NDIM];
} npy_header;

static nimble_status_t npy_error(const npy_lexer *lx, const char *what) {
  return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: bad .npy header at byte %zu: %s",
                            lx->label, lx->base + (size_t)(lx->p - lx->start), what);
}

static void skip_space(npy_lexer *lx) {
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r'))
    lx->p++;
}

static int peek(const npy_lexer *lx) { return lx->p < lx->end ? (unsigned char)*lx->p : -1; }

/* A quoted string without escapes (NumPy never writes any in a header). */
static nimble_status_t parse_string(npy_lexer *lx, char *out, size_t cap) {
  int q = peek(lx);
  if (q != '\'' && q != '"') return npy_error(lx, "expected a quoted string");
  const char *open = lx->p;
  const char *close = open + 1;
  while (close < lx->end && *close != q && *close != '\n') close++;
  if (close >= lx->end || *close != q) return npy_error(lx, "unterminated string");
  const char *bs = memchr(open + 1, '\\', (size_t)(close - open - 1));
  if (bs) {
    lx->p = bs;
    return npy_error(lx, "escape sequences are not supported in strings");
  }
  size_t n = (size_t)(close - open - 1);
  if (n >= cap) return npy_error(lx, "string is too long");
  memcpy(out, open + 1, n);
  out[n] = '\0';
  lx->p = close + 1;
  return nimble_ok();
}

static nimble_status_t parse_bool(npy_lexer *lx, int *out) {
  size_t left = (size_t)(lx->end - lx->p);
  if (left >= 4 && memcmp(lx->p, "True", 4) == 0) {
    lx->p += 4;
    *out = 1;
  } else if (left >= 5 && memcmp(lx->p, "False", 5) == 0) {
    lx->p += 5;
    *out = 0;
  } else {
    return npy_error(lx, "'fortran_order' must be True or False");
  }
  int c = peek(lx);
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
    return npy_error(lx, "'fortran_order' must be True or False");
  return nimble_ok();
}

/* A non-negative decimal integer, as Python writes it; Python 2's NumPy
 * wrote long integers with an 'L' suffix, which is accepted. */
static nimble_status_t parse_dim(npy_lexer *lx, int64_t *out) {
  int c = peek(lx);
  if (c == '-') return npy_error(lx, "a dimension is negative");
  if (c < '0' || c > '9') return npy_error(lx, "expected a dimension (a non-negative integer)");
  const char *first = lx->p;
  uint64_t v = 0;
  while ((c = peek(lx)) >= '0' && c <= '9') {
    uint64_t d = (uint64_t)(c - '0');
    if (v > ((uint64_t)INT64_MAX - d) / 10) {
      lx->p = first;
      return npy_error(lx, "a dimension does not fit in 64 bits");
    }
    v = v * 10 + d;
    lx->p++;
  }
  if (lx->p - first > 1 && *first == '0') {
    lx->p = first;
    return npy_error(lx, "a dimension has a leading zero");
  }
  if (peek(lx) == 'L') lx->p++;
  *out = (int64_t)v;
  return nimble_ok();
}

/* A tuple of dims: "()", "(3,)", "(2, 3)", "(2, 3,)". "(3)" is the integer
 * 3 in Python, not a tuple, and is rejected as NumPy would. */
static nimble_status_t parse_shape(npy_lexer *lx, npy_header *h) {
  if (peek(lx) != '(') return npy_error(lx, "'shape' must be a tuple");
  lx->p++;
  h->ndim = 0;
  int trailing_comma = 0;
  for (;;) {
    skip_space(lx);
    if (peek(lx) == ')') break;
    if (h->ndim == NIMBLE_TENSOR_IO_MAX_NDIM)
      return npy_error(lx, "'shape' has more than 64 dimensions");
    NIMBLE_RETURN_IF_ERROR(parse_dim(lx, &h->shape[h->ndim]));
    h->ndim++;
    skip_space(lx);
    trailing_comma = 0;
    if (peek(lx) == ',') {
      lx->p++;
      trailing_comma = 1;
      continue;
    }
    if (peek(lx) != ')') return npy_error(lx, "expected ',' or ')' in 'shape'");
  }
  if (h->ndim == 1 && !trailing_comma)
    return npy_error(lx, "'shape' is not a tuple: a one-element tuple needs a trailing comma");
  lx->p++;
  return nimble_ok();
}

static nimble_status_t parse_header_dict(npy_lexer *lx, npy_header *h) {
  memset(h, 0, sizeof(*h));
  skip_space(lx);
  if (peek(lx) != '{') return npy_error(lx, "expected '{' starting the header dict");
  lx->p++;
  for (;;) {
    skip_space(lx);
    if (peek(lx) == '}') break;
    const char *key_at = lx->p;
    char key[32];
    NIMBLE_RETURN_IF_ERROR(parse_string(lx, key, sizeof(key)));
    skip_space(lx);
    if (peek(lx) != ':') return npy_error(lx, "expected ':' after a key");
    lx->p++;
    skip_space(lx);
    int *seen;
    if (strcmp(key, "descr") == 0) {
      seen = &h->have_descr;
    } else if (strcmp(key, "fortran_order") == 0) {
      seen = &h->have_fortran;
    } else if (strcmp(key, "shape") == 0) {
      seen = &h->have_shape;
    } else {
      lx->p = key_at;
      char msg[96];
      snprintf(msg, sizeof(msg), "unknown key '%s'", key);
      return npy_error(lx, msg);
    }
    if (*seen) {
      lx->p = key_at;
      char msg[96];
      snprintf(msg, sizeof(msg), "key '%s' appears twice", key);
      return npy_error(lx, msg);
    }
    *seen = 1;
    if (seen == &h->have_descr) {
      if (peek(lx) == '[')
        return npy_error(lx, "structured dtypes (a list 'descr') are not supported");
      NIMBLE_RETURN_IF_ERROR(parse_string(lx, h->descr, sizeof(h->descr)));
    } else if (seen == &h->have_fortran) {
      NIMBLE_RETURN_IF_ERROR(parse_bool(lx, &h->fortran_order));
    } else {
      NIMBLE_RETURN_IF_ERROR(parse_shape(lx, h));
    }
    skip_space(lx);
    if (peek(lx) == ',') {
      lx->p++;
      continue;
    }
    if (peek(lx) != '}') return npy_error(lx, "expected ',' or '}' in the header dict");
  }
  lx->p++;
  skip_space(lx);
  if (lx->p != lx->end) return npy_error(lx, "unexpected text after the header dict");
  if (!h->have_descr) return npy_error(lx, "the header lacks the key 'descr'");
  if (!h->have_fortran) return npy_error(lx, "the header lacks the key 'fortran_order'");
  if (!h->have_shape) return npy_error(lx, "the header lacks the key 'shape'");
  return nimble_ok();
}

typedef struct npy_type {
  const char *kind; /* descr without the byte-order character */
  DLDataType dtype;
} npy_type;

static const npy_type NPY_TYPES[] = {
    {"f2", {kDLFloat, 16, 1}}, {"f4", {kDLFloat, 32, 1}}, {"f8", {kDLFloat, 64, 1}},
    {"i1", {kDLInt, 8, 1}},    {"i2", {kDLInt, 16, 1}},   {"i4", {kDLInt, 32, 1}},
    {"i8", {kDLInt, 64, 1}},   {"u1", {kDLUInt, 8, 1}},   {"u2", {kDLUInt, 16, 1}},
    {"u4", {kDLUInt, 32, 1}},  {"u8", {kDLUInt, 64, 1}},  {"b1", {kDLUInt, 1, 1}},
};

static nimble_status_t dtype_from_descr(const char *descr, const char *label, DLDataType *out) {
  char order = descr[0];
  const char *kind = order ? descr + 1 : descr;
  if (strchr(descr, 'O'))
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "%s: object arrays (dtype '%s') are not supported", label, descr);
  for (size_t i = 0; i < sizeof(NPY_TYPES) / sizeof(NPY_TYPES[0]); i++) {
    if (strcmp(kind, NPY_TYPES[i].kind) != 0) continue;
    size_t size = nimble_tensor_io_dtype_size(NPY_TYPES[i].dtype);
    if (size == 1 ? (order == '|' || order == '<' || order == '>' || order == '=')
                  : order == '<') {
      *out = NPY_TYPES[i].dtype;
      return nimble_ok();
    }
    if (order == '>')
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "%s: big-endian data (dtype '%s') is not supported", label,
                                descr);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: dtype '%s' has an invalid byte-order character '%c'", label,
                              descr, order);
  }
  return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                            "%s: dtype '%s' is not supported (supported: <f2 <f4 <f8 |i1 <i2 "
                            "<i4 <i8 |u1 <u2 <u4 <u8 |b1)",
                            label, descr);
}

static uint32_t read_le(const uint8_t *p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

nimble_status_t nimble_tensor_io_parse_npy(const void *bytes, size_t len, const char *label,
                                           nimble_tensor_file_t *out) {
  memset(out, 0, sizeof(*out));
  const uint8_t *b = bytes;
  if (len < 8 || memcmp(b, NPY_MAGIC, sizeof(NPY_MAGIC)) != 0) {
    if (len >= 6 && memcmp(b, NPY_MAGIC, sizeof(NPY_MAGIC)) != 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                "%s: not a .npy file (it does not start with \\x93NUMPY)", label);
    return nimble_status_make(NIMBLE_DATA_LOSS, "%s: truncated .npy file: %zu bytes", label,
                              len);
  }
  int major = b[6], minor = b[7];
  int lensize;
  if (major == 1 && minor == 0) {
    lensize = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    lensize = 4; /* 3.0 differs from 2.0 only in allowing UTF-8 in the header */
  } else {
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 "
                              "are)",
                              label, major, minor);
  }
  size_t prefix = 8 + (size_t)lensize;
  if (len < prefix)
    return nimble_status_make(NIMBLE_DATA_LOSS, "%s: truncated .npy file: %zu bytes", label,
                              len);
  size_t hlen = read_le(b + 8, lensize);
  if (hlen > len - prefix)
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s: truncated .npy file: the header is %zu bytes but only %zu "
                              "follow",
                              label, hlen, len - prefix);
  if (hlen == 0 || b[prefix + hlen - 1] != '\n')
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: bad .npy header: it does not end with a newline", label);
  npy_lexer lx = {(const char *)b + prefix, (const char *)b + prefix,
                  (const char *)b + prefix + hlen, label, prefix};
  npy_header h;
  NIMBLE_RETURN_IF_ERROR(parse_header_dict(&lx, &h));

  DLDataType dtype;
  NIMBLE_RETURN_IF_ERROR(dtype_from_descr(h.descr, label, &dtype));
  if (h.fortran_order) {
    /* Fortran and C order store the same bytes when at most one dimension
     * exceeds 1; otherwise we would have to transpose, which we do not. */
    int big = 0;
    for (int i = 0; i < h.ndim; i++) big += h.shape[i] > 1;
    if (big > 1)
      return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                                "%s: Fortran-order arrays are not supported (save with C order)",
                                label);
  }
  uint64_t count;
  size_t nbytes;
  NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_checked_size(h.shape, h.ndim,
                                                       nimble_tensor_io_dtype_size(dtype), label,
                                                       &count, &nbytes));
  size_t offset = prefix + hlen;
  size_t have = len - offset;
  if (have < nbytes)
    return nimble_status_make(NIMBLE_DATA_LOSS,
                              "%s: truncated .npy data: shape and dtype '%s' need %zu bytes, "
                              "the file has %zu",
                              label, h.descr, nbytes, have);
  if (have > nbytes)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: inconsistent .npy size: %zu bytes follow the %zu bytes of "
                              "data",
                              label, have - nbytes, nbytes);
  NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_alloc(dtype, h.shape, h.ndim, nbytes, NULL, 0, label,
                                                out));
  if (nbytes) memcpy(out->data, b + offset, nbytes);
  if (dtype.code == kDLUInt && dtype.bits == 1) {
    for (size_t i = 0; i < nbytes; i++) {
      uint8_t v = ((const uint8_t *)out->data)[i];
      if (v > 1) {
        nimble_tensor_file_deinit(out);
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "%s: bool element %zu has the byte value %u (not 0 or 1)",
                                  label, i, v);
      }
    }
  }
  return nimble_ok();
}

static const char *descr_of(DLDataType t) {
  for (size_t i = 0; i < sizeof(NPY_TYPES) / sizeof(NPY_TYPES[0]); i++) {
    DLDataType d = NPY_TYPES[i].dtype;
    if (d.code == t.code && d.bits == t.bits && d.lanes == t.lanes) {
      static const char *const names[] = {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4",
                                          "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"};
      return names[i];
    }
  }
  return NULL;
}

nimble_status_t nimble_tensor_io_encode_npy(const DLTensor *tensor, void **out_bytes,
                                            size_t *out_len) {
  *out_bytes = NULL;
  *out_len = 0;
  const void *data;
  size_t nbytes;
  NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_check_encodable(tensor, &data, &nbytes));
  const char *descr = descr_of(tensor->dtype);
  if (!descr)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED, "%s has no .npy form: NumPy has no %s (write it to an ONNX .pb)",
                              nimble_tensor_io_dtype_name(tensor->dtype), nimble_tensor_io_dtype_name(tensor->dtype));

  /* The dict as NumPy 1.24 writes it; at most 64 dims of at most 19 digits
   * keep it far below the 65535 bytes of format 1.0. */
  char dict[64 + NIMBLE_TENSOR_IO_MAX_NDIM * 24];
  int n = snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   descr);
  for (int i = 0; i < tensor->ndim; i++)
    n += snprintf(dict + n, sizeof(dict) - (size_t)n, i ? ", %lld" : "%lld",
                  (long long)tensor->shape[i]);
  n += snprintf(dict + n, sizeof(dict) - (size_t)n, "%s), }", tensor->ndim == 1 ? "," : "");
  /* Pad with spaces and a final newline so the data starts on a 64-byte
   * boundary, which NumPy expects of files it can memory-map. */
  size_t hlen = (size_t)n + 1;
  size_t total_head = 10 + hlen;
  size_t pad = (64 - total_head % 64) % 64;
  hlen += pad;
  if (nbytes > SIZE_MAX - 10 - hlen)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "tensor too large to encode");
  size_t len = 10 + hlen + nbytes;
  uint8_t *buf = malloc(len);
  if (!buf) return NIMBLE_OOM();
  memcpy(buf, NPY_MAGIC, 6);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (uint8_t)(hlen & 0xff);
  buf[9] = (uint8_t)(hlen >> 8);
  memcpy(buf + 10, dict, (size_t)n);
  memset(buf + 10 + n, ' ', pad);
  buf[10 + hlen - 1] = '\n';
  if (nbytes) memcpy(buf + 10 + hlen, data, nbytes);
  nimble_tensor_io_normalize_bools(tensor->dtype, buf + 10 + hlen, nbytes);
  *out_bytes = buf;
  *out_len = len;
  return nimble_ok();
}
