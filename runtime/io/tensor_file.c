/* The owned tensor type, element types, and file access shared by the
 * .npy and TensorProto codecs. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor_io_internal.h"

void nimble_tensor_file_deinit(nimble_tensor_file_t *file) {
  if (!file) return;
  free(file->data);
  free(file->shape);
  free(file->name);
  memset(file, 0, sizeof(*file));
}

DLDataType nimble_tensor_io_dtype_bool(void) {
  DLDataType t = {kDLUInt, 1, 1};
  return t;
}

size_t nimble_tensor_io_dtype_size(DLDataType t) {
  if (t.lanes != 1) return 0;
  switch (t.code) {
    case kDLFloat:
      return (t.bits == 16 || t.bits == 32 || t.bits == 64) ? t.bits / 8u : 0;
    case kDLInt:
      return (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64) ? t.bits / 8u : 0;
    case kDLUInt:
      if (t.bits == 1) return 1; /* bool, one byte per element */
      return (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64) ? t.bits / 8u : 0;
    case kDLBfloat:
      return t.bits == 16 ? 2 : 0; /* .pb only: NumPy has no bfloat16 */
    default:
      return 0;
  }
}

const char *nimble_tensor_io_dtype_name(DLDataType t) {
  if (nimble_tensor_io_dtype_size(t) == 0) return "unsupported";
  switch (t.code) {
    case kDLFloat:
      return t.bits == 16 ? "float16" : t.bits == 32 ? "float32" : "float64";
    case kDLInt:
      return t.bits == 8 ? "int8" : t.bits == 16 ? "int16" : t.bits == 32 ? "int32" : "int64";
    case kDLBfloat:
      return "bfloat16";
    default:
      return t.bits == 1    ? "bool"
             : t.bits == 8  ? "uint8"
             : t.bits == 16 ? "uint16"
             : t.bits == 32 ? "uint32"
                            : "uint64";
  }
}

char *nimble_tensor_io_format_shape(const DLTensor *tensor, char *buf, size_t size) {
  if (size == 0) return buf;
  size_t used = 0;
  buf[0] = '\0';
#define APPEND(...)                                                  \
  do {                                                               \
    if (used < size) {                                               \
      int n_ = snprintf(buf + used, size - used, __VA_ARGS__);       \
      if (n_ > 0) used += (size_t)n_;                                \
    }                                                                \
  } while (0)
  APPEND("[");
  for (int i = 0; i < tensor->ndim; i++) APPEND(i ? ", %lld" : "%lld", (long long)tensor->shape[i]);
  APPEND("]");
#undef APPEND
  return buf;
}

nimble_status_t nimble_tensor_io_checked_size(const int64_t *shape, int ndim, size_t itemsize,
                                              const char *label, uint64_t *out_count,
                                              size_t *out_nbytes) {
  /* The limit is the smaller of SIZE_MAX and INT64_MAX: sizes must fit a
   * size_t for malloc and an int64_t for DLPack consumers. */
  uint64_t limit = (uint64_t)INT64_MAX;
  if ((uint64_t)SIZE_MAX < limit) limit = (uint64_t)SIZE_MAX;
  uint64_t count = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: dimension %d is negative (%lld)",
                                label, i, (long long)shape[i]);
    if (shape[i] == 0) zero = 1;
  }
  /* A zero dimension makes the product zero whatever the others are, but
   * the others must still be sane numbers, which they are (>= 0, int64). */
  if (!zero) {
    for (int i = 0; i < ndim; i++) {
      uint64_t d = (uint64_t)shape[i];
      if (count > limit / d)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "%s: shape overflows: the element count exceeds %llu at "
                                  "dimension %d",
                                  label, (unsigned long long)limit, i);
      count *= d;
    }
  } else {
    count = 0;
  }
  if (itemsize != 0 && count > limit / itemsize)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "%s: shape overflows: %llu elements of %zu bytes exceed %llu bytes",
                              label, (unsigned long long)count, itemsize,
                              (unsigned long long)limit);
  *out_count = count;
  *out_nbytes = (size_t)(count * itemsize);
  return nimble_ok();
}

nimble_status_t nimble_tensor_io_alloc(DLDataType dtype, const int64_t *shape, int ndim,
                                       size_t nbytes, const char *name, size_t name_len,
                                       const char *label, nimble_tensor_file_t *out) {
  memset(out, 0, sizeof(*out));
  /* Round up to the alignment (and allocate at least one block) so that
   * data is never NULL and vectorized kernels may read whole blocks. */
  size_t rounded = nbytes + (NIMBLE_TENSOR_IO_ALIGNMENT - 1);
  if (rounded < nbytes)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: %zu bytes of data is too large",
                              label, nbytes);
  rounded -= rounded % NIMBLE_TENSOR_IO_ALIGNMENT;
  if (rounded == 0) rounded = NIMBLE_TENSOR_IO_ALIGNMENT;
  void *data = NULL;
  if (posix_memalign(&data, NIMBLE_TENSOR_IO_ALIGNMENT, rounded) != 0)
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED,
                              "%s: cannot allocate %zu bytes for the tensor data", label, nbytes);
  memset(data, 0, rounded);
  int64_t *dims = malloc(sizeof(int64_t) * (size_t)(ndim > 0 ? ndim : 1));
  char *copy = malloc(name_len + 1);
  if (!dims || !copy) {
    free(data);
    free(dims);
    free(copy);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", label);
  }
  if (ndim > 0) memcpy(dims, shape, sizeof(int64_t) * (size_t)ndim);
  if (name_len) memcpy(copy, name, name_len);
  copy[name_len] = '\0';
  out->data = data;
  out->nbytes = nbytes;
  out->shape = dims;
  out->name = copy;
  out->tensor.data = data;
  out->tensor.device.device_type = kDLCPU;
  out->tensor.device.device_id = 0;
  out->tensor.ndim = ndim;
  out->tensor.dtype = dtype;
  out->tensor.shape = dims;
  out->tensor.strides = NULL;
  out->tensor.byte_offset = 0;
  return nimble_ok();
}

nimble_status_t nimble_tensor_io_check_encodable(const DLTensor *t, const void **out_data,
                                                 size_t *out_nbytes) {
  if (!t) return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tensor is NULL");
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                              "tensor is on device type %d; only CPU memory can be written",
                              (int)t->device.device_type);
  size_t itemsize = nimble_tensor_io_dtype_size(t->dtype);
  if (itemsize == 0)
    return nimble_status_make(NIMBLE_UNIMPLEMENTED,
                              "tensor element type (code %u, bits %u, lanes %u) is not supported",
                              t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (t->ndim < 0 || t->ndim > NIMBLE_TENSOR_IO_MAX_NDIM)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tensor has %d dimensions (at most %d)",
                              t->ndim, NIMBLE_TENSOR_IO_MAX_NDIM);
  if (t->ndim > 0 && !t->shape)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tensor has %d dimensions but no shape",
                              t->ndim);
  uint64_t count;
  size_t nbytes;
  NIMBLE_RETURN_IF_ERROR(
      nimble_tensor_io_checked_size(t->shape, t->ndim, itemsize, "tensor", &count, &nbytes));
  if (t->strides && count > 1) {
    /* Strides are allowed when they describe the compact C layout anyway
     * (dims of size 1 may carry any stride). */
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
      if (t->shape[i] != 1 && t->strides[i] != expect)
        return nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                                  "tensor is not compact in C order: stride %d is %lld, "
                                  "expected %lld",
                                  i, (long long)t->strides[i], (long long)expect);
      expect *= t->shape[i];
    }
  }
  if (nbytes > 0 && !t->data)
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "tensor has %zu bytes of data but no "
                              "data pointer", nbytes);
  *out_data = t->data ? (const char *)t->data + t->byte_offset : NULL;
  *out_nbytes = nbytes;
  return nimble_ok();
}

/* Reads a whole regular file. *out is malloc'd (caller frees). */
static nimble_status_t read_whole_file(const char *path, uint8_t **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return nimble_status_make(errno == ENOENT ? NIMBLE_NOT_FOUND : NIMBLE_IO_ERROR,
                              "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return nimble_status_make(NIMBLE_INVALID_ARGUMENT, "%s: not a regular file", path);
  }
  if ((uint64_t)st.st_size >= (uint64_t)SIZE_MAX) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: file too large", path);
  }
  size_t size = (size_t)st.st_size;
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes", path,
                              size);
  }
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, buf + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return nimble_status_make(NIMBLE_IO_ERROR, "%s: read failed: %s", path, strerror(e));
    }
    if (n == 0) break; /* shrank under us: parse what is there */
    got += (size_t)n;
  }
  close(fd);
  *out = buf;
  *out_len = got;
  return nimble_ok();
}

/* Writes bytes to `path` through a temporary file in the same directory and
 * a rename, so a reader never sees half a file. */
static nimble_status_t write_whole_file(const char *path, const void *bytes, size_t len) {
  static atomic_uint counter;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64);
  if (!tmp) return nimble_status_make(NIMBLE_RESOURCE_EXHAUSTED, "%s: out of memory", path);
  snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(),
           atomic_fetch_add(&counter, 1u));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot create: %s", path,
                                           strerror(errno));
    free(tmp);
    return s;
  }
  const uint8_t *p = bytes;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      nimble_status_t s = nimble_status_make(NIMBLE_IO_ERROR, "%s: write failed: %s", path,
                                             n < 0 ? strerror(errno) : "no progress");
      close(fd);
      unlink(tmp);
      free(tmp);
      return s;
    }
    done += (size_t)n;
  }
  if (close(fd) != 0) {
    nimble_status_t s =
        nimble_status_make(NIMBLE_IO_ERROR, "%s: close failed: %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return s;
  }
  if (rename(tmp, path) != 0) {
    nimble_status_t s =
        nimble_status_make(NIMBLE_IO_ERROR, "%s: cannot rename into place: %s", path,
                           strerror(errno));
    unlink(tmp);
    free(tmp);
    return s;
  }
  free(tmp);
  return nimble_ok();
}

typedef nimble_status_t (*parse_fn)(const void *, size_t, const char *, nimble_tensor_file_t *);

static nimble_status_t read_with(const char *path, parse_fn parse, nimble_tensor_file_t *out) {
  memset(out, 0, sizeof(*out));
  uint8_t *buf;
  size_t len;
  NIMBLE_RETURN_IF_ERROR(read_whole_file(path, &buf, &len));
  nimble_status_t s = parse(buf, len, path, out);
  free(buf);
  return s;
}

nimble_status_t nimble_tensor_io_read_npy(const char *path, nimble_tensor_file_t *out) {
  return read_with(path, nimble_tensor_io_parse_npy, out);
}

nimble_status_t nimble_tensor_io_read_pb(const char *path, nimble_tensor_file_t *out) {
  return read_with(path, nimble_tensor_io_parse_pb, out);
}

nimble_status_t nimble_tensor_io_read_auto(const char *path, nimble_tensor_file_t *out) {
  memset(out, 0, sizeof(*out));
  uint8_t *buf;
  size_t len;
  NIMBLE_RETURN_IF_ERROR(read_whole_file(path, &buf, &len));
  static const char magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
  size_t plen = strlen(path);
  nimble_status_t s;
  if (len >= sizeof(magic) && memcmp(buf, magic, sizeof(magic)) == 0) {
    s = nimble_tensor_io_parse_npy(buf, len, path, out);
  } else if (plen >= 3 && strcmp(path + plen - 3, ".pb") == 0) {
    s = nimble_tensor_io_parse_pb(buf, len, path, out);
  } else if (plen >= 4 && strcmp(path + plen - 4, ".npy") == 0) {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "%s: not a .npy file (it does not start with \\x93NUMPY)", path);
  } else {
    s = nimble_status_make(NIMBLE_INVALID_ARGUMENT,
                           "%s: unknown tensor file format: expected a .npy file (starting "
                           "with \\x93NUMPY) or an ONNX TensorProto named *.pb",
                           path);
  }
  free(buf);
  return s;
}

nimble_status_t nimble_tensor_io_write_npy(const char *path, const DLTensor *tensor) {
  void *bytes;
  size_t len;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_tensor_io_encode_npy(tensor, &bytes, &len), "%s", path);
  nimble_status_t s = write_whole_file(path, bytes, len);
  free(bytes);
  return s;
}

nimble_status_t nimble_tensor_io_write_pb(const char *path, const char *name,
                                          const DLTensor *tensor) {
  void *bytes;
  size_t len;
  NIMBLE_RETURN_IF_ERROR_CTX(nimble_tensor_io_encode_pb(tensor, name, &bytes, &len), "%s", path);
  nimble_status_t s = write_whole_file(path, bytes, len);
  free(bytes);
  return s;
}
