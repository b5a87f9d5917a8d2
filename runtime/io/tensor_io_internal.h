/* Private helpers shared by the .npy and TensorProto codecs. */
#ifndef NIMBLE_TENSOR_IO_INTERNAL_H
#define NIMBLE_TENSOR_IO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nimble/tensor_io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nimble tensor I/O supports little-endian hosts only"
#endif

/* Multiplies the dims (each >= 0) and the item size, checking for overflow
 * of both size_t and int64_t. On success *out_count is the element count and
 * *out_nbytes the data size. `label` names the source in the error. */
nimble_status_t nimble_tensor_io_checked_size(const int64_t *shape, int ndim, size_t itemsize,
                                              const char *label, uint64_t *out_count,
                                              size_t *out_nbytes);

/* Fills `out` with an owned tensor of the given type and shape: a copy of
 * `shape`, a zeroed aligned buffer of `nbytes`, and a copy of `name` (NULL
 * means ""). On failure `out` is zeroed. */
nimble_status_t nimble_tensor_io_alloc(DLDataType dtype, const int64_t *shape, int ndim,
                                       size_t nbytes, const char *name, size_t name_len,
                                       const char *label, nimble_tensor_file_t *out);

/* Checks that `tensor` can be encoded (CPU, compact C order, lanes 1,
 * supported dtype, sizes without overflow) and gives its data pointer
 * (data + byte_offset) and size. */
nimble_status_t nimble_tensor_io_check_encodable(const DLTensor *tensor, const void **out_data,
                                                 size_t *out_nbytes);

/* Bool elements are written as 0 or 1 whatever nonzero byte the caller
 * holds: both formats (and our readers) allow nothing else. */
static inline void nimble_tensor_io_normalize_bools(DLDataType dtype, uint8_t *p, size_t n) {
  if (dtype.code != kDLUInt || dtype.bits != 1) return;
  for (size_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

#endif /* NIMBLE_TENSOR_IO_INTERNAL_H */
