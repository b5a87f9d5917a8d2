/* Tensor files: NumPy .npy and ONNX TensorProto .pb, read and written.
 *
 * These are the formats in which Nimble's tools take inputs and give outputs
 * (`nimble-run`, `nimble run`), and the ones the ONNX backend test suite ships
 * (`test_data_set_0/input_0.pb`). A file is read into a nimble_tensor_file_t:
 * an owned, C-contiguous CPU DLTensor plus its name (the TensorProto's name;
 * "" for .npy). Every reader is strict: bad input yields a status naming the
 * file and the problem (and the byte offset where it helps), never a crash.
 *
 *   nimble_tensor_file_t in;
 *   NIMBLE_RETURN_IF_ERROR(nimble_tensor_io_read_auto("x.npy", &in));
 *   ... use in.tensor ...
 *   nimble_tensor_file_deinit(&in);
 *
 * Supported element types (both formats): float16/32/64, int8/16/32/64,
 * uint8/16/32/64 and bool. DLPack 0.6 has no bool code, so bool is
 * {kDLUInt, 1, 1} stored one byte per element (0 or 1), as TVM does; see
 * nimble_tensor_io_dtype_bool().
 *
 * Data is little-endian on disk; the module supports little-endian hosts only
 * (x86_64, aarch64), which is checked at compile time.
 *
 * Dependencies: libc, nimble_base (status) and dlpack.h. No protobuf library:
 * TensorProto is decoded by a small wire-format reader, so the runtime stays
 * thin.
 */
#ifndef NIMBLE_TENSOR_IO_H
#define NIMBLE_TENSOR_IO_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#include "nimble/export.h"
#include "nimble/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most dimensions a file may declare (NumPy's own limit is 64). */
#define NIMBLE_TENSOR_IO_MAX_NDIM 64

/* Alignment of every data buffer this module allocates. */
#define NIMBLE_TENSOR_IO_ALIGNMENT 64

/* A tensor read from a file. Caller-owned storage; the reader fills it and
 * nimble_tensor_file_deinit() releases what it points to.
 *   tensor: device CPU, strides NULL (C order), byte_offset 0; tensor.data
 *           and tensor.shape point into `data` and `shape` below.
 *   data:   owned, NIMBLE_TENSOR_IO_ALIGNMENT-aligned, never NULL (even for
 *           an empty tensor), `nbytes` long.
 *   shape:  owned, `tensor.ndim` entries (never NULL).
 *   name:   owned, NUL-terminated; "" when the format has no name. */
typedef struct nimble_tensor_file {
  DLTensor tensor;
  void *data;
  size_t nbytes;
  int64_t *shape;
  char *name;
} nimble_tensor_file_t;

/* Releases what `file` owns and zeroes it; a zeroed struct is fine. */
NIMBLE_API void nimble_tensor_file_deinit(nimble_tensor_file_t *file);

/* Reads a .npy file (format 1.0, 2.0 or 3.0; little-endian; C order).
 * On success `out` owns a new tensor; on failure `out` is zeroed. */
NIMBLE_API nimble_status_t nimble_tensor_io_read_npy(const char *path, nimble_tensor_file_t *out);

/* Reads a serialized ONNX TensorProto. Same ownership as read_npy. */
NIMBLE_API nimble_status_t nimble_tensor_io_read_pb(const char *path, nimble_tensor_file_t *out);

/* Reads either format: a file that starts with "\x93NUMPY" is .npy; else a
 * name ending in ".pb" is a TensorProto; anything else is an error naming
 * the file. Same ownership as read_npy. */
NIMBLE_API nimble_status_t nimble_tensor_io_read_auto(const char *path, nimble_tensor_file_t *out);

/* Decoders over memory, for callers that already hold the bytes (and for
 * tests). `label` names the source in error messages (e.g. the path);
 * `bytes` is borrowed. Same ownership of `out` as the readers. */
NIMBLE_API nimble_status_t nimble_tensor_io_parse_npy(const void *bytes, size_t len, const char *label,
                                                      nimble_tensor_file_t *out);
NIMBLE_API nimble_status_t nimble_tensor_io_parse_pb(const void *bytes, size_t len, const char *label,
                                                     nimble_tensor_file_t *out);

/* Encoders to memory. On success *out_bytes is a malloc'd buffer the caller
 * frees, *out_len its length. `tensor` is borrowed; it must be on the CPU,
 * compact in C order (strides NULL or matching), lanes 1, of a supported
 * type. `name` (pb only) may be NULL for no name. */
NIMBLE_API nimble_status_t nimble_tensor_io_encode_npy(const DLTensor *tensor, void **out_bytes,
                                                       size_t *out_len);
NIMBLE_API nimble_status_t nimble_tensor_io_encode_pb(const DLTensor *tensor, const char *name,
                                                      void **out_bytes, size_t *out_len);

/* Writes a .npy file that numpy.load reads: format 1.0 (whose 64 KiB header
 * always holds at most 64 dims), the header exactly as np.save writes it.
 * The file appears whole or not at all (temporary file + rename). */
NIMBLE_API nimble_status_t nimble_tensor_io_write_npy(const char *path, const DLTensor *tensor);

/* Writes a TensorProto with raw_data, as onnx.numpy_helper.from_array does.
 * `name` may be NULL. Same atomicity as write_npy. */
NIMBLE_API nimble_status_t nimble_tensor_io_write_pb(const char *path, const char *name,
                                                     const DLTensor *tensor);

/* The bool element type as this module represents it: {kDLUInt, 1, 1}. */
NIMBLE_API DLDataType nimble_tensor_io_dtype_bool(void);

/* Bytes per element of a supported type; 0 for an unsupported one. */
NIMBLE_API size_t nimble_tensor_io_dtype_size(DLDataType dtype);

/* A short name such as "float32", "int64", "bool"; "unsupported" otherwise.
 * The string is static. */
NIMBLE_API const char *nimble_tensor_io_dtype_name(DLDataType dtype);

/* Fills n elements of dtype dt at data with reproducible random values
 * (xorshift64* from *seed, which advances): floats uniform in [-1, 1),
 * integers in [0, 16) (small enough to index most tables), booleans 0/1.
 * UNIMPLEMENTED for another dtype, naming `what` (may be NULL). */
NIMBLE_API nimble_status_t nimble_tensor_io_fill_random(void *data, uint64_t n, DLDataType dt, uint64_t *seed,
                                                        const char *what);

/* Writes "[2, 3]" (or "[]" for a scalar) into buf, truncating to fit.
 * Returns buf. */
NIMBLE_API char *nimble_tensor_io_format_shape(const DLTensor *tensor, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* NIMBLE_TENSOR_IO_H */
